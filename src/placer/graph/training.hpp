// Derives the training step the device-placement papers place from a forward graph: the backward
// pass (one gradient op per forward op that needs one, with reversed dependencies, the forward
// tensors it keeps alive, activation and parameter gradients) and one parameter update per
// trainable parameter for SGD, momentum or Adam. Every backward op records the forward op it
// differentiates and every update op its parameter, so a placement of forward ops extends to the
// whole step. The rules are documented in docs/training-step.md.
//
//   Graph step = derive_training_step(forward, Optimizer::adam);
#pragma once

#include <string_view>

#include "placer/graph/graph.hpp"

namespace placer {

enum class Optimizer : std::uint8_t { sgd, momentum, adam };
std::string_view optimizer_name(Optimizer o);
Optimizer parse_optimizer(std::string_view name);  // "sgd" | "momentum" | "adam"; Error otherwise
// Type of the update ops derive_training_step writes for this optimizer ("SGDUpdate", ...).
std::string_view update_op_type(Optimizer o);
// Type of the loss op derive_training_step puts after each output it differentiates.
inline constexpr std::string_view kLossOpType = "Loss";
// The optimizer whose update ops `step` holds (its first update op's type); `fallback` when it
// holds none (a forward graph, a step with no parameters) or an update of no known optimizer.
Optimizer step_optimizer(const Graph& step, Optimizer fallback);

enum class Mode : std::uint8_t { training, inference };
Mode parse_mode(std::string_view name);  // "training" | "inference"; Error otherwise

// The forward ops keep their ids (0 .. forward.num_ops()-1) and tensors keep theirs; backward and
// update ops follow. REQUIRES: `forward` is a forward graph (no backward or update ops).
Graph derive_training_step(const Graph& forward, Optimizer optimizer);

}  // namespace placer
