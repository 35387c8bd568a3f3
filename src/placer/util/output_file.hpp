// Where an output file lands: the standard streams named as files (/dev/stdout), and links, which
// an output is written through (their target replaced, the link kept), never replaced themselves.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace placer {

// The open descriptor of this process that an output `path` names: /dev/stdout (1), /dev/stderr
// (2), /dev/fd/N and /proc/self/fd/N (N), however spelled (/dev//stdout); or any path whose file
// is standard output's or standard error's own (a link to /dev/stdout, /proc/PID/fd/1, the file
// stdout is redirected to). nullopt for any other path. Such an output is written to the
// descriptor itself, after what the process printed: a `-o /dev/stdout` with stdout redirected to
// a file renamed a temporary file onto /dev/stdout, replacing the system's link (a QA pass).
std::optional<int> output_descriptor(const std::string& path);

// The file `path` lands in: a link followed to its final target (an absolute path; a dangling
// link's to the file it would create), any other path as given.
std::string output_target(const std::string& path);

// Writes `text` to descriptor `fd` after flushing the process's own streams (stdout, stderr and
// their C++ counterparts); false when a write fails.
bool write_to_descriptor(int fd, std::string_view text);

// Whether descriptor `fd` is open for writing.
bool descriptor_writable(int fd);

}  // namespace placer
