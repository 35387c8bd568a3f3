#include "placer/util/units.hpp"

#include <cmath>

#include <fmt/format.h>

namespace placer {

std::string human_count(double n) {
  // Absurd figures in scientific notation, not hundreds of digits before a "P".
  if (!std::isfinite(n) || std::fabs(n) >= 999.995e15) return fmt::format("{:.2e}", n);
  const char* units[] = {"", "K", "M", "G", "T", "P"};
  int u = 0;
  // The unit is chosen for the figure as printed: 999.996 shows as 1.00K, not 1000.00.
  while ((u == 0 ? std::fabs(n) >= 999.5 : std::fabs(n) >= 999.995) && u < 5) n /= 1000.0, ++u;
  return u == 0 ? fmt::format("{:.0f}", n) : fmt::format("{:.2f}{}", n, units[u]);
}

std::string human_bytes(double bytes) {
  // Up to EiB (2^64 bytes is 16.0 EiB; "262144.0 TiB" was printed for 256 PiB: a QA pass), then
  // scientific notation, as human_count does.
  if (!std::isfinite(bytes) || std::fabs(bytes) >= 1023.95 * 0x1p60) return fmt::format("{:.2e} B", bytes);
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while ((u == 0 ? std::fabs(bytes) >= 1023.5 : std::fabs(bytes) >= 1023.95) && u < 6) bytes /= 1024.0, ++u;
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[u]);
}

std::string human_seconds(double s) {
  // A negative figure (a profile's residual) in the unit of its size: it printed as
  // "-3416205.2 us" for -3.416 s (found by a review).
  if (s < 0) {
    std::string text(1, '-');  // not "-" + ...: GCC 12 warns of a memcpy overlap that cannot happen
    return text.append(human_seconds(-s));
  }
  // Each unit from where the figure, rounded as printed, reaches it: 0.99996 ms shows as 1.00 ms.
  if (s >= 999999.9995) return fmt::format("{:.3e} s", s);  // absurd figures, not hundreds of digits
  if (s >= 0.999995) return fmt::format("{:.3f} s", s);
  if (s >= 0.99995e-3) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

}  // namespace placer
