// Small text helpers for error messages.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "placer/util/error.hpp"

namespace placer {

// The first `max` bytes of `s` or fewer, cut at a character boundary (a cut inside a UTF-8
// sequence showed as an escaped byte in messages).
inline std::string utf8_prefix(std::string_view s, std::size_t max) {
  if (s.size() <= max) return std::string(s);
  std::size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return std::string(s.substr(0, cut));
}

// Whether `s` holds an ASCII control character (a newline, a tab, ESC, DEL): names printed in
// tables and one-line messages refuse them.
inline bool has_control_char(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  return false;
}

// 'name' — how messages quote a name from the user's input. A name longer than 200 bytes is cut
// (at a character boundary) and its length given, so that a message stays readable.
inline std::string in_quotes(std::string_view s) {
  constexpr std::size_t kMax = 200;
  std::string out;
  if (s.size() <= kMax) {
    out.reserve(s.size() + 2);
    out.append(1, '\'').append(s).append(1, '\'');
    return out;
  }
  out.append(1, '\'').append(utf8_prefix(s, kMax)).append("...' (").append(std::to_string(s.size())).append(" bytes)");
  return out;
}

// A shape as messages write it: "[32,3,224,224]" ("[]" for a scalar).
// A shape of absurd rank shows its first 16 and last 4 dimensions and its rank (one of 10,002
// dimensions made an error line of 20,178 characters: a QA pass).
inline std::string dims_text(std::span<const std::int64_t> dims) {
  constexpr std::size_t kHead = 16, kTail = 4;
  std::string out = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims.size() > kHead + kTail + 1 && i == kHead) {
      out.append(",...(" + std::to_string(dims.size()) + " dimensions)...");
      i = dims.size() - kTail - 1;
      continue;
    }
    out.append(i ? "," : "").append(std::to_string(dims[i]));
  }
  return out + "]";
}

// The parts of `s` between commas, empty ones kept ("a,,b" gives three; "" gives one, empty), so
// that a caller can refuse an empty name rather than skip it.
inline std::vector<std::string> split_commas(std::string_view s) {
  std::vector<std::string> parts;
  for (std::size_t from = 0;;) {
    const std::size_t comma = s.find(',', from);
    parts.emplace_back(s.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from));
    if (comma == std::string_view::npos) return parts;
    from = comma + 1;
  }
}

// A library's message on one line: its lines joined, runs of white space collapsed, at most 300
// characters (the ONNX checker names the offending node on the lines after the first).
inline std::string one_line(std::string_view s) {
  std::string line;
  for (char c : s) {
    const bool space = c == '\n' || c == '\r' || c == '\t' || c == ' ';
    if (space && (line.empty() || line.back() == ' ')) continue;
    line += space ? ' ' : c;
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}

// Where `s` stops being valid UTF-8 (see utf8_length_at), or npos when it is valid throughout.
inline std::size_t invalid_utf8_at(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t len = utf8_length_at(s, i);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

// Characters in UTF-8 text (bytes that do not continue a character): the columns fmt's widths
// count for all but East Asian wide characters (two columns each), so that a table sized by it
// stays aligned with names such as "gpu:0 — Ü".
inline std::size_t text_width(std::string_view s) {
  std::size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace placer
