#include "placer/exec/calibrate.hpp"

#include <cassert>

namespace placer::exec {

Calibration calibrate_op_times(const Graph& step, std::vector<double>& seconds, const std::vector<std::uint8_t>& folded,
                               double forward_step_s, double step_s, bool training) {
  assert(seconds.size() == step.num_ops() && folded.size() == step.num_ops());
  enum class Group { forward, rest, all };
  auto in_group = [&](OpId op, Group g) {
    if (seconds[op] < 0 || folded[op]) return false;
    return g == Group::all || (step.op_role(op) == OpRole::forward) == (g == Group::forward);
  };
  auto sum_of = [&](Group g) {
    double sum = 0;
    for (OpId op = 0; op < step.num_ops(); ++op)
      if (in_group(op, g)) sum += seconds[op];
    return sum;
  };
  // Scales group `g` to `total_s`; returns its sum before.
  auto spread = [&](Group g, double total_s) {
    const double sum = sum_of(g);
    if (sum > 0)
      for (OpId op = 0; op < step.num_ops(); ++op)
        if (in_group(op, g)) seconds[op] *= total_s / sum;
    return sum;
  };

  Calibration c;
  if (!training) {
    c.op_sum_s = spread(Group::forward, step_s);
    c.forward_residual_s = step_s - c.op_sum_s;
    return c;
  }
  const double rest_s = step_s - forward_step_s;
  if (rest_s <= 0) {
    const double forward_sum = sum_of(Group::forward);
    c.op_sum_s = spread(Group::all, step_s);
    c.whole_step = true;
    if (c.op_sum_s > 0) {
      const double gain = step_s / c.op_sum_s - 1;
      c.forward_residual_s = forward_sum * gain;
      c.backward_residual_s = (c.op_sum_s - forward_sum) * gain;
    }
    return c;
  }
  const double forward_sum = spread(Group::forward, forward_step_s);
  const double rest_sum = spread(Group::rest, rest_s);
  c.op_sum_s = forward_sum + rest_sum;
  c.forward_residual_s = forward_step_s - forward_sum;
  c.backward_residual_s = rest_s - rest_sum;
  return c;
}

}  // namespace placer::exec
