// Small text helpers for error messages.
#pragma once

#include <string>
#include <string_view>

namespace placer {

// 'name' — how messages quote a name from the user's input.
inline std::string in_quotes(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.append(1, '\'').append(s).append(1, '\'');
  return out;
}

}  // namespace placer
