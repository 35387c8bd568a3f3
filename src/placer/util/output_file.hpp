// Where an output file lands: the standard streams named as files (/dev/stdout), and links, which
// an output is written through (as a shell's redirection writes it), never replaced.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace placer {

// The open file descriptor that `path` names: /dev/stdout (1), /dev/stderr (2), /dev/fd/N and
// /proc/self/fd/N (N); nullopt for any other path. Such an output is written to the descriptor
// itself, after what the process printed (a file of that name opened anew would write over it: a
// `-o /dev/stdout` with stdout redirected to a file renamed a temporary file onto /dev/stdout,
// replacing the system's link: a QA pass).
std::optional<int> named_descriptor(const std::string& path);

// The file `path` lands in: a link followed to its final target (the target's absolute path), a
// link whose target cannot be resolved (dangling) as is, any other path as given.
std::string output_target(const std::string& path);

// Writes `text` to descriptor `fd` after flushing the process's own streams (stdout, stderr and
// their C++ counterparts); false when a write fails.
bool write_to_descriptor(int fd, std::string_view text);

}  // namespace placer
