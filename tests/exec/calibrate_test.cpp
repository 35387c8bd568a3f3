// Calibration of isolated op times against the measured passes (exec/calibrate.hpp), on the
// training step of the bundled CIFAR-10 CNN with made-up times.
#include "placer/exec/calibrate.hpp"

#include <gtest/gtest.h>

#include "placer/io/model.hpp"
#include "support/paths.hpp"

namespace placer {
namespace {

struct Fixture {
  Graph step;
  std::vector<double> seconds;
  std::vector<std::uint8_t> folded;
  double forward_sum = 0, rest_sum = 0;
  explicit Fixture(Mode mode) : step(load_model(test::example("cifarnet.onnx"), ModelOptions{.mode = mode})) {
    seconds.assign(step.num_ops(), -1.0);
    folded.assign(step.num_ops(), 0);
    for (OpId op = 0; op < step.num_ops(); ++op) {
      if (op % 7 == 3) continue;  // some ops unmeasured
      if (op % 11 == 5) folded[op] = 1;
      seconds[op] = 1e-6 * static_cast<double>(1 + op % 5);
      if (folded[op]) continue;
      (step.op_role(op) == OpRole::forward ? forward_sum : rest_sum) += seconds[op];
    }
  }
  double sum(bool forward) const {
    double s = 0;
    for (OpId op = 0; op < step.num_ops(); ++op)
      if (seconds[op] >= 0 && !folded[op] && (step.op_role(op) == OpRole::forward) == forward) s += seconds[op];
    return s;
  }
};

TEST(Calibration, EachPassSumsToItsMeasuredTime) {
  Fixture f(Mode::training);
  const std::vector<double> before = f.seconds;
  const exec::Calibration c = exec::calibrate_op_times(f.step, f.seconds, f.folded, 0.01, 0.03, true);
  EXPECT_FALSE(c.whole_step);
  EXPECT_NEAR(f.sum(true), 0.01, 1e-12);
  EXPECT_NEAR(f.sum(false), 0.02, 1e-12);
  EXPECT_NEAR(c.op_sum_s, f.forward_sum + f.rest_sum, 1e-15);
  EXPECT_NEAR(c.forward_residual_s, 0.01 - f.forward_sum, 1e-12);
  EXPECT_NEAR(c.backward_residual_s, 0.02 - f.rest_sum, 1e-12);
  for (OpId op = 0; op < f.step.num_ops(); ++op) {
    if (before[op] < 0 || f.folded[op]) {
      EXPECT_EQ(f.seconds[op], before[op]) << "untouched: " << f.step.op_name(op);
    } else {
      EXPECT_GT(f.seconds[op], before[op]) << f.step.op_name(op);
    }
  }
}

// Forward pass and whole step are timed apart; when noise makes the step no longer than the forward
// pass, the whole step is spread over all ops, and every measured op keeps a positive time.
TEST(Calibration, AStepNoLongerThanItsForwardPassIsSpreadOverAllOps) {
  for (double step_s : {0.01, 0.009}) {
    Fixture f(Mode::training);
    const exec::Calibration c = exec::calibrate_op_times(f.step, f.seconds, f.folded, 0.01, step_s, true);
    EXPECT_TRUE(c.whole_step);
    EXPECT_NEAR(f.sum(true) + f.sum(false), step_s, 1e-12);
    EXPECT_NEAR(f.sum(true) / f.sum(false), f.forward_sum / f.rest_sum, 1e-9) << "proportions kept";
    EXPECT_NEAR(c.forward_residual_s + c.backward_residual_s, step_s - c.op_sum_s, 1e-12);
    for (OpId op = 0; op < f.step.num_ops(); ++op) {
      if (f.step.op_role(op) != OpRole::forward && !f.folded[op] && op % 7 != 3) {
        EXPECT_GT(f.seconds[op], 0) << f.step.op_name(op);
      }
    }
  }
}

TEST(Calibration, InferenceScalesTheForwardOpsToTheStep) {
  Fixture f(Mode::inference);
  const exec::Calibration c = exec::calibrate_op_times(f.step, f.seconds, f.folded, 0.004, 0.004, false);
  EXPECT_FALSE(c.whole_step);
  EXPECT_NEAR(f.sum(true), 0.004, 1e-12);
  EXPECT_EQ(c.backward_residual_s, 0);
}

}  // namespace
}  // namespace placer
