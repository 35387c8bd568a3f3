// Internal to exec/ (includes torch; never include it from outside the layer): the prepared model
// the Executor runs and the profiler measures. One ONNX node maps to one op of the forward graph
// (the importer adds ops in node order), and every op type to one libtorch function (ops.cpp part
// of executor.cpp). Shape arithmetic and constants are folded once at construction.
#pragma once

#include <onnx/onnx_pb.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "placer/exec/exec.hpp"

namespace placer::exec::detail {

torch::ScalarType scalar_type(DType t);
// configure_threads(0) unless threads were configured already (local.cpp).
void ensure_threads();

// What an op implementation sees.
struct OpCall {
  const Graph& g;
  OpId op;
  const onnx::NodeProto& node;
  bool training;
  std::span<const torch::Tensor> in;     // inputs on the op's device; undefined: absent or a value slot
  std::span<const torch::Tensor> value;  // CPU values of folded (static) inputs; undefined otherwise
  torch::Device device;
  // RNN, GRU and LSTM whose weights and biases the engine keeps in PyTorch's gate order (i-f-g-o,
  // r-z-n) rather than ONNX's (i-o-f-c, z-r-h), as PyTorch's modules keep them: inputs 1-3 hold that
  // order, and `layer_params`, when not empty, is PyTorch's flat list of the layer's parameters
  // (w_ih, w_hh[, b_ih, b_hh] per direction), the leaves autograd gives gradients to.
  bool pytorch_gate_order = false;
  std::span<const torch::Tensor> layer_params = {};

  bool has(std::size_t slot) const;
  std::vector<std::int64_t> ints(std::size_t slot) const;     // value of an integer input
  std::optional<double> scalar(std::size_t slot) const;       // value of a one-element input
  std::vector<std::int64_t> out_shape(std::size_t k) const;   // IR shape of output k
  torch::Tensor input_or_value(std::size_t slot) const;       // device tensor, else the CPU value moved here
};
using OpFn = std::vector<torch::Tensor> (*)(const OpCall&);
// What the executor cannot run of an op type it knows (an attribute, an output), checked before
// anything runs: an empty string when it can run the op, else why not.
using OpCheck = std::string (*)(const Graph&, OpId);
struct OpImpl {
  OpFn fn = nullptr;
  int first_value_slot = -1;  // slots >= this are read as values (shapes, indices, bounds); -1: none
  OpCheck check = nullptr;
  int outputs = 1;  // the ONNX outputs fn gives, from the first; -1: as many as the node has
};
// nullptr for an op type the executor cannot run.
const OpImpl* find_op_impl(const std::string& type);

class Engine {
 public:
  Engine(const std::string& model_path, const ModelOptions& model, const Cluster& cluster,
         std::span<const DeviceId> forward_devices, const ExecOptions& options);

  const Graph& graph() const { return graph_; }
  const ExecOptions& options() const { return options_; }
  bool training() const { return options_.mode == Mode::training; }
  torch::Device torch_device(DeviceId d) const { return torch_devices_[d]; }
  DeviceId op_device(OpId op) const { return op_device_[op]; }
  const std::vector<DeviceId>& used_devices() const { return used_devices_; }

  // One step; `keep_values` keeps every tensor's value (detached) for value().
  void step(bool keep_values = false);
  // Lets go of the last step's outputs (held for output_values() until the next step starts).
  void release_outputs();
  void synchronize() const;
  // Forward pass only, with autograd off, keeping every tensor (the profiler's inputs) on request.
  void forward_only(bool keep_values);
  // Forward pass as in a training step (autograd recording), without loss or backward.
  void forward_recording();
  // One step recorded (Executor::trace_step).
  StepTrace trace_step();

  bool is_folded(OpId op) const { return op_folded_[op] != 0; }
  bool is_skipped(OpId op) const { return op_skip_[op] != 0; }
  const OpImpl* impl(OpId op) const { return impls_[op]; }
  const onnx::NodeProto& node(OpId op) const { return model_.graph().node(node_index_[op]); }
  // Runs op `op` on `inputs` (already on `device`), as the step does.
  std::vector<torch::Tensor> run_op(OpId op, std::span<const torch::Tensor> inputs, torch::Device device, bool training) const;
  // Inputs of `op` for run_op on `device`, from the kept values of the last step (or folded values).
  std::vector<torch::Tensor> inputs_for(OpId op, torch::Device device) const;
  const torch::Tensor& value(TensorId t) const { return kept_[t]; }
  const torch::Tensor& folded_value(TensorId t) const { return folded_[t]; }
  bool is_source(TensorId t) const { return sources_[t].defined(); }
  // The value of source tensor `t` (data, parameter or buffer) as the model defines it (a recurrent
  // layer's weights in ONNX's gate order), on its device.
  torch::Tensor source_value(TensorId t) const;
  // Gives source tensor `t` the value `v`, on its device; its shape and element type must be the
  // tensor's.
  void set_source_value(TensorId t, const torch::Tensor& v);

  std::vector<std::vector<float>> output_values() const;
  std::vector<torch::Tensor> parameters() const;
  std::vector<TensorId> parameter_ids() const { return param_ids_; }
  double last_loss() const { return loss_.defined() ? loss_.item<double>() : 0.0; }
  std::size_t copies_last_step() const { return copies_ + gradient_copies_->load(); }

 private:
  void fold_constants();
  void create_sources();
  void make_optimizer();
  void keep_gates_in_pytorch_order();
  torch::Tensor fetch(TensorId t, DeviceId d);
  void run_forward(bool keep_values);

  ExecOptions options_;
  onnx::ModelProto model_;
  std::vector<int> node_index_;  // op -> its node in model_ (the importer leaves out empty Constants)
  Graph graph_;
  std::size_t num_devices_ = 0;
  std::vector<torch::Device> torch_devices_;
  std::vector<DeviceId> op_device_;
  std::vector<DeviceId> used_devices_;
  std::vector<const OpImpl*> impls_;
  std::vector<std::uint8_t> op_folded_, op_skip_;
  std::vector<std::uint8_t> op_stops_gradient_;  // not differentiable in the IR: outputs detached in training
  std::vector<std::vector<TensorId>> op_out_slots_;  // per op: IR tensor of each node output (kNoId: dropped)
  std::vector<torch::Tensor> folded_;   // per tensor: CPU value of folded tensors
  std::vector<std::vector<torch::Tensor>> folded_on_;  // per tensor: folded value per device (filled at setup)
  std::vector<torch::Tensor> sources_;  // per tensor: parameters, buffers, data on their home device
  // Data drawn at random that decides shapes (decides_shapes): (tensor, op, input slot, the tensor
  // at that slot: itself or what passes its values on); step() refuses to run while one is not
  // given (set_source_value).
  std::vector<std::tuple<TensorId, OpId, std::size_t, TensorId>> drawn_settings_;
  std::vector<DeviceId> source_device_;
  std::vector<TensorId> param_ids_;
  // Recurrent layers run as PyTorch's (recurrent_as_pytorch_layer) whose W, R and B are parameters
  // read by nothing else keep them as PyTorch's modules do: in PyTorch's gate order, one leaf per
  // direction (and per bias half) that the optimizer updates, views of the tensor's storage; no
  // copy is made each step (docs/execution.md#recurrent-layers).
  std::vector<std::uint8_t> op_gate_order_;                  // per op: 1 for such a layer
  std::vector<OpId> gate_reader_;                            // per tensor: the layer reading it so, or kNoId
  std::vector<std::vector<torch::Tensor>> param_parts_;      // per such tensor: its leaves
  std::vector<std::vector<torch::Tensor>> op_layer_params_;  // per such op: PyTorch's list of its leaves
  std::vector<std::uint32_t> uses_;     // per tensor: readers among executed ops
  std::vector<std::uint32_t> uses_on_;  // per tensor x device: those readers on the device
  // Per step.
  std::vector<torch::Tensor> values_;   // per tensor: value on its producer's device
  std::vector<torch::Tensor> copies_on_;  // per tensor x device: copy made this step
  std::vector<std::uint32_t> remaining_;     // per tensor: readers still to run
  std::vector<std::uint32_t> remaining_on_;  // per tensor x device: those on the device
  std::vector<torch::Tensor> kept_;
  std::vector<torch::Tensor> outputs_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  torch::Tensor loss_;
  bool checked_shapes_ = false;
  std::size_t copies_ = 0;
  // Gradients copied back across devices in the last step's backward pass: counted by hooks that
  // autograd may run on its own threads (one per CUDA device); shared with them.
  std::shared_ptr<std::atomic<std::size_t>> gradient_copies_ = std::make_shared<std::atomic<std::size_t>>(0);
  // While trace_step runs: where forward ops, the loss and the update record their slices.
  StepTrace* trace_ = nullptr;
  std::chrono::steady_clock::time_point trace_start_;
  void trace_slice(std::string name, const char* category, DeviceId device, std::chrono::steady_clock::time_point start);
  // The device of the step's first output that an op makes (where the loss starts; trace slices).
  DeviceId loss_device() const;
};

}  // namespace placer::exec::detail
