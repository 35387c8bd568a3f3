// Pricing: how long each op takes on each device of a cluster. A roofline — the larger of compute
// time (FLOPs / (peak FLOP/s x compute efficiency)) and memory time (bytes / (bandwidth x memory
// efficiency)) — plus the device's fixed per-op overhead; aliases cost nothing. Efficiencies are
// per op class and device kind (docs/cost-model.md says where each comes from). A measured
// profile, by op name or by op type and input shapes, overrides the model. Costs are computed once
// per (graph, cluster) into a flat op-major table that the simulator only reads.
//
//   CostTable costs(graph, cluster, CostModel::defaults(), &profile);
//   double t = costs.time_s(op, device);
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "placer/cluster/cluster.hpp"
#include "placer/graph/graph.hpp"

namespace placer {

// Fraction of a device's peak FLOP/s and of its memory bandwidth an op class reaches.
struct Efficiency {
  double compute = 1.0;
  double memory = 1.0;
  bool operator==(const Efficiency&) const = default;
};

struct CostModel {
  // efficiency[pass][device kind][op class]. Pass 1 prices backward ops (gradients), pass 0 the
  // others (forward and update): an eager framework runs a gradient as several kernels and an
  // autograd node, so the same class does not reach the same fraction of peak both ways.
  std::array<std::array<std::array<Efficiency, kNumOpClasses>, 2>, 2> efficiency{};
  // Multiply every device's per-op overhead (1 = as the cluster says), of forward and update ops
  // and of backward ops; per device kind (index: DeviceKind) where kind_overhead_scale >= 0.
  double overhead_scale = 1.0;
  double backward_overhead_scale = 1.0;
  std::array<double, 2> kind_overhead_scale{-1.0, -1.0}, kind_backward_overhead_scale{-1.0, -1.0};
  // The fitted per-op overhead in seconds of a kind (>= 0; -1 = none), of forward and update ops
  // and of backward ops: what devices of that kind whose cluster entry gives no overhead (0, which
  // no scale can raise) pay instead.
  std::array<double, 2> kind_overhead_s{-1.0, -1.0}, kind_backward_overhead_s{-1.0, -1.0};
  // The kinds this model prices. A profile's fitted model prices the kinds it measured; the
  // CostTable prices other kinds' ops from their devices' own figures, as without a profile.
  std::array<bool, 2> prices{true, true};
  double overhead_scale_of(DeviceKind kind, bool backward) const {
    const auto k = static_cast<std::size_t>(kind);
    if (backward) return kind_backward_overhead_scale[k] >= 0 ? kind_backward_overhead_scale[k] : backward_overhead_scale;
    return kind_overhead_scale[k] >= 0 ? kind_overhead_scale[k] : overhead_scale;
  }
  // The per-op overhead of `device` under this model: the device's own times its scale, or where
  // the device has none, the fitted overhead of its kind (0 without one).
  double overhead_s(const Device& device, bool backward) const;
  const Efficiency& of(DeviceKind kind, OpClass c, bool backward = false) const {
    return efficiency[backward][static_cast<std::size_t>(kind)][static_cast<std::size_t>(c)];
  }
  Efficiency& of(DeviceKind kind, OpClass c, bool backward = false) {
    return efficiency[backward][static_cast<std::size_t>(kind)][static_cast<std::size_t>(c)];
  }
  // The defaults price backward ops as forward ones.
  static CostModel defaults();
};

// Time of one op with `work` on `device` under `model` (no profile); `backward`: the op is a
// gradient (OpRole::backward). The device's own measured efficiencies and backward overhead
// (Device::efficiency, backward_efficiency, backward_op_overhead_s; a matrix product's compute
// efficiency by its smallest dimension, Device::product_efficiency_by_size, and an ungrouped
// forward convolution's by its kernel, Device::conv_efficiency_by_kernel) replace the model's
// defaults for its kind unless `device_efficiency` is false (a profile's fitted model is used instead).
// `by_type`, when given (the device's Device::efficiency_by_type entry for the op's type), replaces
// the class's efficiencies with its non-zero terms either way: `placer fit` leaves such ops out.
double modelled_time_s(const OpWork& work, const Device& device, const CostModel& model, bool device_efficiency = true,
                       bool backward = false, const Device::Efficiency* by_type = nullptr);

// The efficiency of its own that an op type needs on `device` for an op with `work` to take
// `seconds` (a kernel timed alone, its per-op overhead included): a compute efficiency pricing its
// FLOPs at the time beyond the overhead, or for an op with no FLOPs (a copy) a memory efficiency
// pricing its bytes so. nullopt when the op's class already prices it at that time or slower (the
// device's own or `model`'s efficiencies, a gradient's where `backward`), or when it has neither
// FLOPs nor bytes or took no longer than the overhead. The `local` preset uses it for the kernels it
// times (docs/cost-model.md#op-types).
std::optional<Device::Efficiency> type_efficiency_for(const OpWork& work, const Device& device, const CostModel& model, bool backward,
                                                      double seconds);

// The work the cost model prices for `op` (the cost table and `placer fit` read it):
// Graph::op_work, but
// - none for an op every output of which is a view (Graph::op_view_outputs: a Transpose, a Split,
//   a gradient passed through, a Concat gradient's slices), which PyTorch makes without touching
//   memory: such an op costs its per-op overhead alone, as measured (a Transpose 0.6 us on a CPU
//   whatever its size, where its bytes priced it at up to 126 us); unless it sums partial
//   gradients as they arrive (Graph::tensor_accumulated inputs) or is Mean's gradient;
// - an alias whose output is no view (a Reshape of a view out of row-major order, which PyTorch
//   copies) moves its input's and output's bytes, as data movement;
// - a BatchNormalization by its batch's statistics (priced_type; `training_step` as there) computes
//   them too: 8 FLOPs per element, as op_work gives training_mode=1, where a model exported for
//   inference gives 4 (inspect's FLOPs are op_work's).
// docs/cost-model.md#views, #op-types.
OpWork priced_work(const Graph& g, OpId op, std::optional<bool> training_step = std::nullopt);

// The key of an op's own efficiency (Device::efficiency_by_type): its type, a gradient by its own
// type ("MaxPoolGrad"), except a forward BatchNormalization that normalises by its batch's
// statistics (in a training step, or with training_mode=1), which is "BatchNormalizationTraining":
// libtorch's CPU kernel then runs several times slower than with running statistics
// (docs/cost-model.md#op-types).
// `training_step` says whether `g`'s forward ops run as a training step's; by default, whether it
// has ops besides its forward ones (`placer fit` says false for a profile of a forward pass alone,
// whose ops it prices in a training step to pair them by name).
inline constexpr std::string_view kTrainingBatchNormalization = "BatchNormalizationTraining";
// And a depthwise convolution (a Conv of more than one group with one input channel per group:
// MobileNets', EfficientNets') is "ConvDepthwise", its gradient "ConvDepthwiseGrad": libtorch's CPU
// runs it in another kernel than the dense one, at a fraction of its rate, and one of a stride above
// 1 is "ConvDepthwiseStrided" ("ConvDepthwiseStridedGrad"): its time follows its input, four
// times its output at a stride of 2, more than its FLOPs; a reflect- or edge-padding
// `Pad` is "PadReflect" or "PadEdge" (and "PadReflectGrad", "PadEdgeGrad"), which libtorch's
// reflection and replication kernels run ten times slower than a constant pad's copy
// (docs/cost-model.md#op-types).
inline constexpr std::string_view kDepthwiseConv = "ConvDepthwise", kDepthwiseConvGrad = "ConvDepthwiseGrad";
inline constexpr std::string_view kStridedDepthwiseConv = "ConvDepthwiseStrided", kStridedDepthwiseConvGrad = "ConvDepthwiseStridedGrad";
inline constexpr std::string_view kReflectPad = "PadReflect", kReflectPadGrad = "PadReflectGrad";
inline constexpr std::string_view kEdgePad = "PadEdge", kEdgePadGrad = "PadEdgeGrad";
std::string_view priced_type(const Graph& g, OpId op, std::optional<bool> training_step = std::nullopt);

// The keys of the devices' efficiency_by_type that price no op of `g` and that placer knows
// nowhere (no op type of the rules, their gradients "XGrad", a training step's loss and update
// types, or a key of priced_type above): most likely misspelt (op types are an open set, so they
// are not refused). One entry per key: "'Maxpool' (cpu:0, cpu:1)".
std::vector<std::string> unmatched_efficiency_types(const Graph& g, const Cluster& c);

// Keys of the devices' efficiency_by_type that name an op type of `g` whose ops (some or all) are
// priced under another key (priced_type: batch statistics, depthwise convolutions, reflect and
// edge pads, their gradients) that the device does not name: those ops take their class's
// efficiency, not the entry of their type (a cluster fitted before those keys existed). Only ops
// the table prices by the model on that device count (not a profile's times, aliases or folded
// ops). One entry per (key, priced key): the devices and the number of ops.
struct EfficiencyKeyedApart {
  std::string key, priced;
  std::vector<std::string> devices;
  std::size_t ops = 0;
};
class CostTable;
std::vector<EfficiencyKeyedApart> efficiency_types_keyed_apart(const Graph& g, const Cluster& c, const CostTable& costs);

// Measured op times, per device kind: by exact op name, or by op signature (type and input
// shapes, see op_signature). JSON format "placer-profile" in docs/formats.md. It may also carry a
// fitted cost model (efficiencies), used for ops it has no time for.
class Profile {
 public:
  void set_by_name(DeviceKind kind, std::string op_name, double seconds);
  void set_by_signature(DeviceKind kind, std::string signature, double seconds);
  // The signature of the op a name was measured on: a time by name then applies only to an op of
  // that name *and* signature (exporters reuse names such as '/conv1/Conv' across models).
  void set_op_signature(std::string op_name, std::string signature);
  // The signature recorded for an op name, or null.
  const std::string* op_signature_of(std::string_view op_name) const;
  // By name (checked against the recorded signature, if any), else by signature.
  std::optional<double> find(DeviceKind kind, const std::string& op_name, const std::string& signature) const;
  std::optional<double> find_by_name(DeviceKind kind, const std::string& op_name, const std::string& signature) const;
  void set_model(CostModel model) { model_ = model; }
  const std::optional<CostModel>& model() const { return model_; }
  std::size_t size() const;
  std::string device_description;  // the machine it was measured on (free text)

  nlohmann::json to_json() const;
  static Profile from_json(const nlohmann::json& j, const std::string& source);
  static Profile load(const std::string& path);
  void save(const std::string& path) const;

 private:
  std::array<std::map<std::string, double, std::less<>>, 2> by_name_, by_signature_;
  std::map<std::string, std::string, std::less<>> op_signature_;  // op name -> signature it was measured with
  std::optional<CostModel> model_;
};

// Scratch memory `op` holds while it runs on a device of `kind`, beyond its inputs and outputs
// (docs/cost-model.md#workspaces; each rule measured with libtorch 1.13). On any device: a
// convolution or its gradient copies an operand that is a view out of row-major order
// (Graph::tensor_in_order: a slice of a Concat's gradient) into order first, a MatMul or an Einsum
// the operands its product cannot view in order (matmul_layout, einsum_layout; less the copies a
// training step keeps as the op's output), and a gradient formula
// that autograd runs as several kernels holds their temporaries (Erf's, Cos's, Pow's by a constant,
// a Div's for its divisor, a broadcast Mul operand's product before it is reduced, ReduceL2's,
// amax's, Clip's masks; in tensors of the op's input or output). On the CPU: a convolution through
// oneDNN reorders its operands into blocked layouts of 16 channels (forward the larger of input plus
// weight and output, its gradient input and output when ungrouped, dY alone for a grouped one
// whose data gradient is needed; a first layer's input of 4 to 8 channels in blocks of 8, one of at
// most 3 read as it is); one that
// libtorch runs itself (a one-sample small convolution: slow_conv2d; a transposed one) holds its
// columns, forward and backward; a normalization's gradient one input when the input takes a
// gradient; a 2-D or 3-D MaxPool without kept indices holds them; a recurrent op (RNN, GRU, LSTM) its input
// projection and stacked steps (recurrent_workspace_bytes), its gradient a partial gradient of the
// recurrent weights beside their sum over the time steps. 0 for every other op, for a 1x1
// convolution over fewer than 16 samples, for non-float32 convolutions, and on GPUs but the
// copies and the formulas' temporaries (cuDNN's workspaces depend on the algorithm it picks: not
// measured).
std::uint64_t op_workspace_bytes(const Graph& g, OpId op, DeviceKind kind);
// What `op` holds beyond op_workspace_bytes when autograd sums partial gradients out of place
// (SimOptions::gradient_sums_out_of_place, libtorch 1.x): a recurrent layer's gradient on the CPU,
// a second partial of its recurrent weights' sum over the time steps. 0 for every other op.
std::uint64_t op_out_of_place_sum_bytes(const Graph& g, OpId op, DeviceKind kind);

// "Conv(32x3x224x224,64x3x7x7)": the op type and its input shapes.
std::string op_signature(const Graph& g, OpId op);

// Where a time came from: zero for an alias (a view) or a folded op (a set-up value,
// Graph::op_folded), the model, or a profile.
enum class CostSource : std::uint8_t { alias, folded, modelled, measured };

// Op x device times, computed once. Immutable after construction; safe to share between threads.
class CostTable {
 public:
  // `profile` may be null. The model is the profile's fitted one when it has one (then the devices'
  // own efficiencies are ignored: the fit is the newer measurement), else `model` with the devices'
  // efficiencies.
  CostTable(const Graph& g, const Cluster& c, const CostModel& model, const Profile* profile = nullptr);

  std::size_t num_devices() const { return num_devices_; }
  double time_s(OpId op, DeviceId d) const { return time_s_[std::size_t{op} * num_devices_ + d]; }
  // Op-major table: times()[op * num_devices + device].
  std::span<const double> times() const { return time_s_; }
  CostSource source(OpId op, DeviceId d) const { return source_[std::size_t{op} * num_devices_ + d]; }
  // op_workspace_bytes of each op on each device's kind (0 where the op takes no time there).
  std::uint64_t workspace_bytes(OpId op, DeviceId d) const { return workspace_[std::size_t{op} * num_devices_ + d]; }
  // Op-major table: workspaces()[op * num_devices + device].
  std::span<const std::uint64_t> workspaces() const { return workspace_; }
  // op_out_of_place_sum_bytes of each op on each device, op-major as workspaces(); empty when all 0.
  std::span<const std::uint64_t> out_of_place_sums() const { return out_of_place_sum_; }
  std::size_t measured_entries() const { return measured_; }

 private:
  std::size_t num_devices_ = 0;
  std::vector<double> time_s_;
  std::vector<CostSource> source_;
  std::vector<std::uint64_t> workspace_;
  std::vector<std::uint64_t> out_of_place_sum_;
  std::size_t measured_ = 0;
};

}  // namespace placer
