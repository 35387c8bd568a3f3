// Natural order of names, for listings a person reads (module paths with list indices).
#pragma once

#include <cstddef>
#include <string_view>

namespace placer {

// Natural order of names: runs of digits compare as numbers ("blocks.2" before "blocks.10"), the
// rest byte by byte; a tie between equal numbers written differently ("07" and "7") goes to the
// byte order, so that the order is strict.
struct NaturalLess {
  bool operator()(std::string_view a, std::string_view b) const {
    const auto digit = [](char c) { return c >= '0' && c <= '9'; };
    std::size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
      if (digit(a[i]) && digit(b[j])) {
        std::size_t ei = i, ej = j;
        while (ei < a.size() && digit(a[ei])) ++ei;
        while (ej < b.size() && digit(b[ej])) ++ej;
        std::size_t si = i, sj = j;  // without leading zeros
        while (si + 1 < ei && a[si] == '0') ++si;
        while (sj + 1 < ej && b[sj] == '0') ++sj;
        if (ei - si != ej - sj) return ei - si < ej - sj;
        if (const int c = a.substr(si, ei - si).compare(b.substr(sj, ej - sj)); c != 0) return c < 0;
        i = ei, j = ej;
      } else {
        if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
        ++i, ++j;
      }
    }
    if ((i < a.size()) != (j < b.size())) return i >= a.size();
    return a < b;
  }
};

}  // namespace placer
