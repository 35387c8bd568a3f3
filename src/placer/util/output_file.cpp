#include "placer/util/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <iostream>

namespace placer {
namespace {

// /dev/stdout, /dev/fd/N, ... spelled normally.
std::optional<int> named_descriptor(const std::string& normal) {
  if (normal == "/dev/stdout") return 1;
  if (normal == "/dev/stderr") return 2;
  for (const std::string_view prefix : {std::string_view("/dev/fd/"), std::string_view("/proc/self/fd/")}) {
    if (!normal.starts_with(prefix) || normal.size() == prefix.size()) continue;
    int fd = -1;
    const char* first = normal.data() + prefix.size();
    const char* last = normal.data() + normal.size();
    const auto [end, ec] = std::from_chars(first, last, fd);
    if (ec == std::errc() && end == last && fd >= 0) return fd;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int> output_descriptor(const std::string& path) {
  if (path.empty()) return std::nullopt;
  if (auto fd = named_descriptor(std::filesystem::path(path).lexically_normal().string())) return fd;
  // Any other name of standard output's or standard error's file (a link to /dev/stdout, the file
  // stdout is redirected to): the same device and inode.
  struct stat named {};
  if (::stat(path.c_str(), &named) != 0) return std::nullopt;
  for (const int fd : {1, 2}) {
    struct stat open {};
    if (::fstat(fd, &open) == 0 && open.st_dev == named.st_dev && open.st_ino == named.st_ino) return fd;
  }
  return std::nullopt;
}

std::string output_target(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_symlink(path, ec)) return path;
  const fs::path target = fs::canonical(path, ec);  // every link followed
  if (!ec) return target.string();
  // Dangling: follow the chain by hand (each hop relative to its link's directory) to the file
  // it would create; a loop or an unreadable hop leaves the path as given.
  // (symlink_status reports a missing path as not_found, which is no error here.)
  auto is_link = [](const fs::path& p) {
    std::error_code e;
    return fs::symlink_status(p, e).type() == fs::file_type::symlink;
  };
  ec.clear();
  fs::path at = fs::absolute(path, ec);
  if (ec) return path;
  for (int hop = 0; hop < 40 && is_link(at); ++hop) {
    const fs::path next = fs::read_symlink(at, ec);
    if (ec) return path;
    at = next.is_absolute() ? next : at.parent_path() / next;
  }
  if (is_link(at)) return path;  // a loop
  const fs::path dir = fs::weakly_canonical(at.parent_path(), ec);
  return ec ? at.lexically_normal().string() : (dir / at.filename()).string();
}

bool write_to_descriptor(int fd, std::string_view text) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

bool descriptor_writable(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags != -1 && (flags & O_ACCMODE) != O_RDONLY;
}

}  // namespace placer
