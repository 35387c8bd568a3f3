// The one error type of placer. Library code throws it with a message that names the file, field,
// op or tensor at fault and what was expected; the CLI catches it once, prints one line to stderr
// and exits non-zero. Never used for our own invariants (those are asserts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace placer {

// The length of the UTF-8 sequence that starts at byte `i` of `s` (1 to 4), or 0 when none does
// there (a stray continuation byte, a truncated sequence, an overlong form, a surrogate, a code
// point past U+10FFFF).
inline std::size_t utf8_length_at(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (len <= 1 || i + len > s.size()) return i + len > s.size() ? 0 : len;
  std::uint32_t cp = len == 2 ? c & 0x1Fu : len == 3 ? c & 0x0Fu : c & 0x07u;
  for (std::size_t k = 1; k < len; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc >> 6) != 0x2) return 0;
    cp = (cp << 6) | (cc & 0x3Fu);
  }
  constexpr std::uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kSmallest[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

// `text` with its control characters escaped ("\n", "\t", "\x00"), and the bytes that are not
// UTF-8 ("\xff"): messages quote names from the user's files, which may hold any byte, and must
// stay one line (a NUL would also end what()) of text.
inline std::string printable(const std::string& text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t len = utf8_length_at(text, i);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f || len == 0) out.append("\\x").append(1, kHex[c >> 4]).append(1, kHex[c & 15]);
    else out.append(text, i, len);
    i += len == 0 ? 1 : len;
  }
  return out;
}

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(printable(message)) {}
};

}  // namespace placer
