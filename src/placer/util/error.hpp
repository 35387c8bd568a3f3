// The one error type of placer. Library code throws it with a message that names the file, field,
// op or tensor at fault and what was expected; the CLI catches it once, prints one line to stderr
// and exits non-zero. Never used for our own invariants (those are asserts).
#pragma once

#include <stdexcept>
#include <string>

namespace placer {

// `text` with its control characters escaped ("\n", "\t", "\x00"): messages quote names from the
// user's files, which may hold any byte, and must stay one line (a NUL would also end what()).
inline std::string printable(const std::string& text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) out.append("\\x").append(1, kHex[c >> 4]).append(1, kHex[c & 15]);
    else out += ch;
  }
  return out;
}

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(printable(message)) {}
};

}  // namespace placer
