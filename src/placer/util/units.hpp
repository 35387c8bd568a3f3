// Figures as people read them: counts, bytes and seconds in the unit of their size. Every report
// placer prints (the CLI's tables, notes) writes them so.
#pragma once

#include <string>

namespace placer {

std::string human_count(double n);          // 25.60M, 4.10G, ... (a count below 1,000 as is)
std::string human_bytes(double bytes);      // 97.5 MiB
std::string human_seconds(double seconds);  // 12.30 ms, 1.234 s, 15.0 us; negative ones too (-3.416 s)

}  // namespace placer
