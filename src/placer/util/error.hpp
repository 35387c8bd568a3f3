// The one error type of placer. Library code throws it with a message that names the file, field,
// op or tensor at fault and what was expected; the CLI catches it once, prints one line to stderr
// and exits non-zero. Never used for our own invariants (those are asserts).
#pragma once

#include <stdexcept>
#include <string>

namespace placer {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace placer
