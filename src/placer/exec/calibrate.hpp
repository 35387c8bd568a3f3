#pragma once
// Calibration of isolated per-op times against measured whole passes (free of torch: the profiler
// measures, this puts the measurements in agreement). Method: docs/execution.md.
#include <cstdint>
#include <vector>

#include "placer/graph/graph.hpp"

namespace placer::exec {

struct Calibration {
  double op_sum_s = 0;             // isolated times summed over the calibrated ops
  double forward_residual_s = 0;   // what the forward ops gained (or lost) to match
  double backward_residual_s = 0;  // what the backward, loss and update ops gained (or lost)
  bool whole_step = false;         // the step was spread over all ops at once (see below)
};

// Scales the isolated times `seconds` (by op of `step`; < 0: not measured, skipped; ops with
// `folded` set are zero per step and skipped) so that the forward ops sum to `forward_step_s` and
// the other ops (gradients, loss, updates) to `step_s - forward_step_s`, each group in proportion
// to its ops' times, so that no op goes below zero. The two passes are timed apart, so timing noise
// can leave the second group no time (`step_s <= forward_step_s`): then the whole step is spread
// over all ops at once and `whole_step` is set. In inference (`training` false) only the forward
// group exists and it is scaled to `step_s`.
Calibration calibrate_op_times(const Graph& step, std::vector<double>& seconds, const std::vector<std::uint8_t>& folded,
                               double forward_step_s, double step_s, bool training);

}  // namespace placer::exec
