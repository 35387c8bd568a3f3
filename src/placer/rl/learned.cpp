#include "placer/rl/learned.hpp"

#include <mutex>

#include "placer/algorithms/families.hpp"

namespace placer::rl {
// One per learned placer, each defined in its own file.
PlacerInfo colocrl_info();
PlacerInfo hdp_info();
}  // namespace placer::rl

namespace placer {

void register_learned_placers() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_placer(rl::colocrl_info());
    register_placer(rl::hdp_info());
  });
}

}  // namespace placer
