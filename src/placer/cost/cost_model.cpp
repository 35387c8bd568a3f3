#include "placer/cost/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sstream>

#include "placer/graph/einsum.hpp"
#include "placer/graph/matmul.hpp"
#include "placer/graph/op_work.hpp"
#include "placer/graph/training.hpp"
#include "placer/util/error.hpp"
#include "placer/util/json_fields.hpp"

namespace placer {

CostModel CostModel::defaults() {
  // Fractions of the device's peak FLOP/s (a large fp32 matrix product, see docs/clusters.md) and
  // of its memory bandwidth that each op class reaches. Sources and reasoning: docs/cost-model.md.
  CostModel m;
  auto set = [&](DeviceKind k, OpClass c, double compute, double memory) { m.of(k, c) = {compute, memory}; };
  for (DeviceKind k : {DeviceKind::cpu, DeviceKind::gpu}) set(k, OpClass::alias, 1.0, 1.0);
  set(DeviceKind::gpu, OpClass::matmul, 0.80, 0.70);
  set(DeviceKind::gpu, OpClass::conv, 0.60, 0.60);
  set(DeviceKind::gpu, OpClass::elementwise, 0.50, 0.70);
  set(DeviceKind::gpu, OpClass::normalization, 0.30, 0.60);
  set(DeviceKind::gpu, OpClass::pooling, 0.30, 0.60);
  set(DeviceKind::gpu, OpClass::reduction, 0.30, 0.50);
  set(DeviceKind::gpu, OpClass::data_movement, 0.50, 0.60);
  set(DeviceKind::gpu, OpClass::optimizer, 0.50, 0.70);
  set(DeviceKind::cpu, OpClass::matmul, 0.80, 0.60);
  set(DeviceKind::cpu, OpClass::conv, 0.50, 0.50);
  set(DeviceKind::cpu, OpClass::elementwise, 0.30, 0.60);
  set(DeviceKind::cpu, OpClass::normalization, 0.20, 0.50);
  set(DeviceKind::cpu, OpClass::pooling, 0.20, 0.50);
  set(DeviceKind::cpu, OpClass::reduction, 0.20, 0.50);
  set(DeviceKind::cpu, OpClass::data_movement, 0.30, 0.50);
  set(DeviceKind::cpu, OpClass::optimizer, 0.30, 0.60);
  m.efficiency[1] = m.efficiency[0];
  return m;
}

double modelled_time_s(const OpWork& work, const Device& device, const CostModel& model, bool device_efficiency, bool backward,
                       const Device::Efficiency* by_type) {
  if (work.op_class == OpClass::alias) return 0.0;
  const auto c = static_cast<std::size_t>(work.op_class);
  const Efficiency& e = model.of(device.kind, work.op_class, backward);
  // The device's own: for a gradient its backward efficiency, else its forward one, where measured.
  Device::Efficiency own{};
  if (device_efficiency) {
    own = device.efficiency[c];
    if (backward) {
      if (device.backward_efficiency[c].compute > 0) own.compute = device.backward_efficiency[c].compute;
      if (device.backward_efficiency[c].memory > 0) own.memory = device.backward_efficiency[c].memory;
    }
    // A matrix product by its smallest dimension (forward or gradient: a product's gradients ran
    // at its rate), a forward convolution by its kernel (a convolution's gradients run other
    // kernels, slower than its forward: they keep the class's), where the device measured that.
    if (work.op_class == OpClass::matmul && work.product_min_dim > 0 && !device.product_efficiency_by_size.empty())
      own.compute = device.product_efficiency_for(work.product_min_dim);
    if (!backward && work.op_class == OpClass::conv && work.conv_kernel_area > 0 && !device.conv_efficiency_by_kernel.empty())
      own.compute = device.conv_efficiency_for(work.conv_kernel_area);
  }
  if (by_type) {
    if (by_type->compute > 0) own.compute = by_type->compute;
    if (by_type->memory > 0) own.memory = by_type->memory;
  }
  const double compute = work.flops / (device.peak_flops * (own.compute > 0 ? own.compute : e.compute));
  const double bytes = work.bytes_read + work.bytes_written;
  const double memory = bytes / (device.bandwidth_for(bytes) * (own.memory > 0 ? own.memory : e.memory));
  return model.overhead_s(device, backward) + std::max(compute, memory);
}

std::optional<Device::Efficiency> type_efficiency_for(const OpWork& work, const Device& device, const CostModel& model, bool backward,
                                                      double seconds) {
  const double overhead = model.overhead_s(device, backward);
  const double kernel_s = seconds - overhead;
  const double bytes = work.bytes_read + work.bytes_written;
  if (work.op_class == OpClass::alias || !(work.flops > 0 || bytes > 0) || !(kernel_s > 0)) return std::nullopt;
  if (!(kernel_s > modelled_time_s(work, device, model, true, backward) - overhead)) return std::nullopt;
  // An op with FLOPs is priced by them; one without (a copy: a reflect pad) by its bytes.
  if (work.flops > 0) return Device::Efficiency{.compute = work.flops / (device.peak_flops * kernel_s), .memory = 0};
  return Device::Efficiency{.compute = 0, .memory = bytes / (device.bandwidth_for(bytes) * kernel_s)};
}

OpWork priced_work(const Graph& g, OpId op, std::optional<bool> training_step) {
  OpWork w = g.op_work(op);
  const std::uint32_t views = g.op_view_outputs(op);
  const auto ins = g.op_inputs(op);
  const auto outs = g.op_outputs(op);
  if (w.op_class == OpClass::alias) {
    // A Reshape or Flatten that PyTorch cannot make a view of (its input a view out of row-major
    // order: attention's heads merged after a Transpose) copies it, as the memory model has it.
    if (!outs.empty() && outs[0] != kNoId && !(views & 1u) && !g.op_folded(op) && !ins.empty() && ins[0] != kNoId &&
        !g.tensor_folded(ins[0]) && g.tensor_bytes(ins[0]) == g.tensor_bytes(outs[0]))
      return OpWork{0.0, static_cast<double>(g.tensor_bytes(ins[0])), static_cast<double>(g.tensor_bytes(outs[0])), OpClass::data_movement};
    return w;
  }
  bool all = views != 0;
  for (std::size_t i = 0; all && i < outs.size(); ++i) all = outs[i] == kNoId || (i < 32 && (views >> i & 1u));
  // A gradient that sums partial gradients as they arrive (Graph::tensor_accumulated) runs that sum
  // whatever it passes on, and Mean's gradient its one division: their work stays.
  for (std::size_t i = 0; all && i < ins.size(); ++i) all = ins[i] == kNoId || !g.tensor_accumulated(ins[i]);
  if (all && g.op_type(op) == "MeanGrad") all = false;
  if (all) w.flops = 0, w.bytes_read = 0, w.bytes_written = 0;
  // A BatchNormalization by its batch's statistics computes them too (op_work's rule for
  // training_mode=1: 8 FLOPs per element, not 4), also in a training step of a model exported for
  // inference.
  if (priced_type(g, op, training_step) == kTrainingBatchNormalization && g.op_attrs(op).get_int("training_mode", 0) == 0) w.flops *= 2;
  // A MatMul (or its gradient) of a transposed 3-D operand by a matrix runs one product per matrix
  // of the batch (matmul_layout), which the shapes alone took for one product of folded rows: its
  // smallest dimension is a matrix's.
  const OpId f = g.op_role(op) == OpRole::backward ? g.forward_op(op) : op;
  if (w.product_min_dim > 0 && f != kNoId && g.op_type(f) == "MatMul")
    if (const auto layout = matmul_layout_of(g, f); layout && layout->per_matrix) {
      const auto a = g.tensor_shape(g.op_inputs(f)[0]), b = g.tensor_shape(g.op_inputs(f)[1]);
      const std::int64_t least = std::min({a[a.size() - 1], a[a.size() - 2], b[b.size() - 1], b[b.size() - 2]});
      w.product_min_dim = static_cast<std::uint32_t>(std::clamp<std::int64_t>(least, 1, 0xFFFFFFFF));
    }
  return w;
}

double CostModel::overhead_s(const Device& device, bool backward) const {
  const double own = backward ? device.backward_overhead_s() : device.op_overhead_s;
  if (own > 0) return own * overhead_scale_of(device.kind, backward);
  const auto k = static_cast<std::size_t>(device.kind);
  const double fitted = backward ? kind_backward_overhead_s[k] : kind_overhead_s[k];
  return fitted > 0 ? fitted : 0.0;
}

std::string op_signature(const Graph& g, OpId op) {
  std::ostringstream s;
  s << g.op_type(op) << '(';
  bool first = true;
  for (TensorId t : g.op_inputs(op)) {
    if (!first) s << ',';
    first = false;
    if (t == kNoId) continue;
    auto shape = g.tensor_shape(t);
    for (std::size_t i = 0; i < shape.size(); ++i) s << (i ? "x" : "") << shape[i];
    if (shape.empty()) s << "scalar";
  }
  s << ')';
  return s.str();
}

void Profile::set_by_name(DeviceKind kind, std::string op_name, double seconds) {
  by_name_[static_cast<std::size_t>(kind)][std::move(op_name)] = seconds;
}

void Profile::set_by_signature(DeviceKind kind, std::string signature, double seconds) {
  by_signature_[static_cast<std::size_t>(kind)][std::move(signature)] = seconds;
}

void Profile::set_op_signature(std::string op_name, std::string signature) { op_signature_[std::move(op_name)] = std::move(signature); }

const std::string* Profile::op_signature_of(std::string_view op_name) const {
  auto it = op_signature_.find(op_name);
  return it == op_signature_.end() ? nullptr : &it->second;
}

std::optional<double> Profile::find_by_name(DeviceKind kind, const std::string& op_name, const std::string& signature) const {
  const auto k = static_cast<std::size_t>(kind);
  auto it = by_name_[k].find(op_name);
  if (it == by_name_[k].end()) return std::nullopt;
  if (auto sig = op_signature_.find(op_name); sig != op_signature_.end() && sig->second != signature) return std::nullopt;
  return it->second;
}

std::optional<double> Profile::find(DeviceKind kind, const std::string& op_name, const std::string& signature) const {
  if (auto t = find_by_name(kind, op_name, signature)) return t;
  const auto k = static_cast<std::size_t>(kind);
  if (auto it = by_signature_[k].find(signature); it != by_signature_[k].end()) return it->second;
  return std::nullopt;
}

std::size_t Profile::size() const {
  std::size_t n = 0;
  for (std::size_t k = 0; k < 2; ++k) n += by_name_[k].size() + by_signature_[k].size();
  return n;
}

nlohmann::json Profile::to_json() const {
  using nlohmann::json;
  json j = {{"format", "placer-profile"}, {"version", 1}, {"machine", device_description}};
  for (DeviceKind kind : {DeviceKind::cpu, DeviceKind::gpu}) {
    const auto k = static_cast<std::size_t>(kind);
    if (by_name_[k].empty() && by_signature_[k].empty()) continue;
    json entry = {{"ops", json::object()}, {"signatures", json::object()}};
    for (const auto& [name, t] : by_name_[k]) entry["ops"][name] = t;
    for (const auto& [sig, t] : by_signature_[k]) entry["signatures"][sig] = t;
    j["times_s"][std::string(device_kind_name(kind))] = entry;
  }
  if (!op_signature_.empty()) j["op_signatures"] = op_signature_;
  if (model_) {
    // The kinds the model prices only: the efficiencies of the others are no fit.
    json eff[2] = {json::object(), json::object()}, scales[2] = {json::object(), json::object()},
         overheads[2] = {json::object(), json::object()};
    for (bool backward : {false, true})
      for (DeviceKind kind : {DeviceKind::cpu, DeviceKind::gpu}) {
        const auto k = static_cast<std::size_t>(kind);
        if (!model_->prices[k]) continue;
        const std::string kind_name(device_kind_name(kind));
        for (int c = 0; c < kNumOpClasses; ++c) {
          if (static_cast<OpClass>(c) == OpClass::alias) continue;  // costs nothing: no efficiency (written until 2026-12-02)
          const Efficiency& e = model_->of(kind, static_cast<OpClass>(c), backward);
          eff[backward][kind_name][std::string(op_class_name(static_cast<OpClass>(c)))] = {{"compute", e.compute}, {"memory", e.memory}};
        }
        const double scale = backward ? model_->kind_backward_overhead_scale[k] : model_->kind_overhead_scale[k];
        if (scale >= 0) scales[backward][kind_name] = scale;
        const double overhead = backward ? model_->kind_backward_overhead_s[k] : model_->kind_overhead_s[k];
        if (overhead >= 0) overheads[backward][kind_name] = overhead;
      }
    j["model"] = {{"efficiency", eff[0]},
                  {"overhead_scale", model_->overhead_scale},
                  {"backward_efficiency", eff[1]},
                  {"backward_overhead_scale", model_->backward_overhead_scale}};
    if (!scales[0].empty()) j["model"]["overhead_scales"] = scales[0];
    if (!scales[1].empty()) j["model"]["backward_overhead_scales"] = scales[1];
    if (!overheads[0].empty()) j["model"]["overheads_s"] = overheads[0];
    if (!overheads[1].empty()) j["model"]["backward_overheads_s"] = overheads[1];
    json kinds = json::array();
    for (DeviceKind kind : {DeviceKind::cpu, DeviceKind::gpu})
      if (model_->prices[static_cast<std::size_t>(kind)]) kinds.push_back(std::string(device_kind_name(kind)));
    j["model"]["kinds"] = kinds;
  }
  return j;
}

namespace {

// parse(), with `where` in front of its error.
template <class Parse>
auto named(const std::string& where, Parse parse) {
  try {
    return parse();
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
}

}  // namespace

Profile Profile::from_json(const nlohmann::json& j, const std::string& source) {
  Profile p;
  // Compared as JSON values: a field of another type is a mismatch, not a library exception.
  if (!j.is_object() || !j.contains("format") || j["format"] != "placer-profile")
    throw Error(source + ": not a placer profile (field 'format' must be \"placer-profile\")");
  if (!j.contains("version")) throw Error(source + ": missing field 'version' (this placer reads 1)");
  check_format_version(j["version"], source, "profile", 1);
  check_known_fields(j, {"format", "version", "machine", "times_s", "op_signatures", "model"}, source);
  if (auto it = j.find("op_signatures"); it != j.end()) {
    if (!it->is_object()) throw Error(source + ": 'op_signatures' must be an object of op name -> signature");
    for (auto& [name, sig] : it->items()) {
      if (!sig.is_string()) throw Error(source + ": op_signatures of '" + name + "' must be a string");
      p.set_op_signature(name, sig.get<std::string>());
    }
  }
  if (j.contains("machine") && !j["machine"].is_string()) throw Error(source + ": 'machine' must be a string");
  p.device_description = j.value("machine", "");
  std::size_t times = 0, zero_times = 0;  // of the kind being read
  auto check_time = [&](const std::string& what, const nlohmann::json& v) {
    if (!v.is_number() || v.get<double>() < 0) throw Error(source + ": time of '" + what + "' must be a non-negative number of seconds");
    // 0 is a time (folded ops); a positive time under a picosecond is no measurement (such times
    // made the fit's weights 1 / t infinite and its efficiencies NaN).
    if (v.get<double>() > 0 && v.get<double>() < 1e-12)
      throw Error(source + ": time of '" + what + "' is " + fmt::format("{:g}", v.get<double>()) +
                  " s: under a picosecond, no op takes that (seconds written in another unit?)");
    ++times, zero_times += v.get<double>() == 0.0;
    return v.get<double>();
  };
  if (auto it = j.find("times_s"); it != j.end()) {
    if (!it->is_object()) throw Error(source + ": 'times_s' must be an object keyed by device kind");
    for (auto& [kind_name, entry] : it->items()) {
      const std::string where = source + ": times_s." + kind_name;
      const DeviceKind kind = named(where, [&] { return parse_device_kind(kind_name); });
      if (!entry.is_object()) throw Error(where + " must be an object with 'ops' and 'signatures'");
      times = zero_times = 0;
      check_known_fields(entry, {"ops", "signatures"}, where);
      for (const char* table : {"ops", "signatures"})
        if (entry.contains(table) && !entry[table].is_object()) throw Error(where + "." + table + " must be an object of times");
      if (auto ops = entry.find("ops"); ops != entry.end())
        for (auto& [name, t] : ops->items()) p.set_by_name(kind, name, check_time(name, t));
      if (auto sigs = entry.find("signatures"); sigs != entry.end())
        for (auto& [sig, t] : sigs->items()) p.set_by_signature(kind, sig, check_time(sig, t));
      // An op may take 0 s (placer profile writes 0 for folded ops), but a kind timed by nothing
      // but zeros measures nothing: it priced whole steps at 0 s.
      if (times > 0 && zero_times == times)
        throw Error(where + ": all its " + std::to_string(times) + " times are 0 s: it measures nothing");
    }
  }
  if (auto it = j.find("model"); it != j.end()) {
    CostModel m = CostModel::defaults();
    const std::string where = source + ": model";
    if (!it->is_object()) throw Error(where + " must be an object");
    check_known_fields(*it,
                       {"efficiency", "overhead_scale", "backward_efficiency", "backward_overhead_scale", "overhead_scales",
                        "backward_overhead_scales", "overheads_s", "backward_overheads_s", "kinds"},
                       where);
    for (const char* field : {"overhead_scale", "backward_overhead_scale"}) {
      if (!it->contains(field)) continue;
      const nlohmann::json& scale = (*it)[field];
      if (!scale.is_number() || scale.get<double>() < 0) throw Error(where + "." + field + " must be a non-negative number");
    }
    m.overhead_scale = it->value("overhead_scale", 1.0);
    // A profile written before backward ops had their own model prices them as forward ones.
    m.backward_overhead_scale = it->value("backward_overhead_scale", m.overhead_scale);
    // The kinds the model names (efficiencies or scales of their own) are the kinds it prices; a
    // model that names none prices every kind it has times for (below).
    std::array<bool, 2> named_kind{false, false};
    // An object keyed by device kind of non-negative numbers (`seconds`: finite ones), into `into`.
    auto per_kind = [&](const char* field, std::array<double, 2>& into, bool seconds) {
      auto values = it->find(field);
      if (values == it->end()) return;
      if (!values->is_object()) throw Error(where + "." + field + " must be an object keyed by device kind");
      for (auto& [kind_name, value] : values->items()) {
        const std::string here = where + "." + field + "." + kind_name;
        const auto k = static_cast<std::size_t>(named(here, [&] { return parse_device_kind(kind_name); }));
        if (!value.is_number() || value.get<double>() < 0 || (seconds && !std::isfinite(value.get<double>())))
          throw Error(here + (seconds ? " must be a non-negative number of seconds" : " must be a non-negative number"));
        into[k] = value.get<double>();
        if (!seconds) named_kind[k] = true;
      }
    };
    per_kind("overhead_scales", m.kind_overhead_scale, false);
    per_kind("backward_overhead_scales", m.kind_backward_overhead_scale, false);
    // Fitted overheads in seconds, for devices whose cluster entry gives none. They name no kind
    // (a kind priced by the cluster's own figures has no use for them).
    per_kind("overheads_s", m.kind_overhead_s, true);
    per_kind("backward_overheads_s", m.kind_backward_overhead_s, true);
    for (std::size_t k = 0; k < 2; ++k)
      if (m.kind_backward_overhead_s[k] < 0 && !it->contains("backward_overheads_s")) m.kind_backward_overhead_s[k] = m.kind_overhead_s[k];
    // Per kind, a backward scale defaults to the kind's forward one, as the common pair does.
    for (std::size_t k = 0; k < 2; ++k)
      if (m.kind_backward_overhead_scale[k] < 0 && m.kind_overhead_scale[k] >= 0 &&
          !(it->contains("backward_overhead_scales") || it->contains("backward_overhead_scale")))
        m.kind_backward_overhead_scale[k] = m.kind_overhead_scale[k];
    for (bool backward : {false, true}) {
      const std::string field = backward ? "backward_efficiency" : "efficiency";
      // Gradients start from the forward values read: a class left out is priced as forward.
      if (backward) m.efficiency[1] = m.efficiency[0];
      auto eff = it->find(field);
      if (eff == it->end()) continue;
      if (!eff->is_object()) throw Error(where + "." + field + " must be an object keyed by device kind");
      for (auto& [kind_name, classes] : eff->items()) {
        if (!classes.is_object()) throw Error(where + "." + field + "." + kind_name + " must be an object keyed by op class");
        named_kind[static_cast<std::size_t>(named(where + "." + field + "." + kind_name, [&] { return parse_device_kind(kind_name); }))] = true;
        for (auto& [class_name, e] : classes.items()) {
          const std::string here = where + "." + field + "." + kind_name + "." + class_name;
          Efficiency& target = m.of(named(here, [&] { return parse_device_kind(kind_name); }),
                                    named(here, [&] { return parse_op_class(class_name); }), backward);
          if (!e.is_object()) throw Error(here + " must be an object with 'compute' and 'memory'");
          check_known_fields(e, {"compute", "memory"}, here);
          for (const char* f : {"compute", "memory"})
            if (e.contains(f) && !e[f].is_number()) throw Error(here + "." + f + " must be a number");
          target.compute = e.value("compute", target.compute);
          target.memory = e.value("memory", target.memory);
          if (target.compute <= 0 || target.memory <= 0)
            throw Error(source + ": " + field + " of " + kind_name + "/" + class_name + " must be positive");
        }
      }
    }
    // Which kinds it prices: those the profile measured, of those only the ones it names when it
    // names any (a profile written before this rule named both kinds however many it measured);
    // with no times, the kinds it names, or every kind when it names none. (A global
    // overhead_scale fitted on GPU times alone scales GPUs only.)
    const bool any_named = named_kind[0] || named_kind[1];
    const bool any_times = p.size() > 0;
    for (std::size_t k = 0; k < 2; ++k) {
      const bool measured = !p.by_name_[k].empty() || !p.by_signature_[k].empty();
      m.prices[k] = (!any_named || named_kind[k]) && (!any_times || measured);
    }
    // Written since 2026-11-25: the kinds, explicitly.
    if (auto kinds = it->find("kinds"); kinds != it->end()) {
      if (!kinds->is_array()) throw Error(where + ".kinds must be an array of device kinds");
      m.prices = {false, false};
      for (const auto& kind : *kinds) {
        if (!kind.is_string()) throw Error(where + ".kinds must be an array of device kinds");
        m.prices[static_cast<std::size_t>(named(where + ".kinds", [&] { return parse_device_kind(kind.get<std::string>()); }))] = true;
      }
    }
    p.set_model(m);
  }
  // Neither times nor a model: it would change nothing, silently (a review found it used so).
  if (p.size() == 0 && !j.contains("model"))
    throw Error(source + ": it holds no op times ('times_s') and no fitted model ('model'): it measures nothing");
  return p;
}

Profile Profile::load(const std::string& path) {
  return from_json(read_json_file(path, "profile"), "profile file '" + path + "'");
}

void Profile::save(const std::string& path) const { write_json_file(path, to_json(), "profile"); }

namespace {

// A convolution (or its gradient) copies an operand whose elements are out of row-major order into
// order first, on every device (libtorch's `contiguous()` before oneDNN, cuDNN or its own kernels):
// a slice of a Concat's gradient, a Split's channels. Measured on the CPU: a [8,168,42,42] slice
// of dY held one slice more while its convolution's gradient ran.
std::uint64_t ordered_copies(const Graph& g, OpId op) {
  std::uint64_t bytes = 0;
  for (TensorId t : g.op_inputs(op))
    if (t != kNoId && !g.tensor_in_order(t) && !g.tensor_accumulated(t)) bytes += g.tensor_bytes(t);
  return bytes;
}

// PyTorch's recurrence on the CPU (at::lstm, gru, rnn_tanh, libtorch 1.13's RNN.cpp), in tensors of
// [seq, batch, hidden] (one direction's outputs; G = gates: LSTM 4, GRU 3, RNN 1): it projects
// every step's input in one product first (G of them, held to the layer's end), keeps the steps'
// hidden states in a list and stacks them into the output at the end (one more, in inference; in
// training the list is part of what the gradient keeps, the state the step adds). A bidirectional
// layer runs its directions in turn: the backward direction's projection is made while the forward
// one's is alive, and the two stacked outputs are concatenated into the op's. A batch-first input
// is copied into step-major order for the product. These are the rules of the layer the executor
// runs for the forms PyTorch exports (recurrent_as_pytorch_layer); other forms run a loop of
// the executor's own, which holds more (not modelled). Measured on the host meter (2026-11-30, 25
// shapes of LSTM, GRU and RNN, the executor running at::lstm/gru/rnn_tanh; docs/cost-model.md): the
// steps' peaks to within 0.12 of a [seq, batch, hidden] tensor; a bidirectional RNN's training step holds 4, one more
// than G + 2 (measured at two shapes; which moment holds it is not traced). The gradient's sums
// of the weights over the steps: recurrent_weight_sum_bytes.
std::uint64_t recurrent_workspace_bytes(const Graph& g, OpId op, const RecurrentSizes& r) {
  const auto ins = g.op_inputs(op);
  const auto outs = g.op_outputs(op);
  const std::uint64_t unit = r.step_elements() * dtype_size(g.tensor_dtype(ins[0]));
  // In a training step whose gradient for the op is computed, the op's last output is the state it
  // adds (training-step.md), which that gradient reads.
  bool training = false;
  if (!outs.empty() && outs.back() != kNoId)
    for (OpId reader : g.consumers(outs.back()))
      training = training || (g.op_role(reader) == OpRole::backward && g.forward_op(reader) == op && g.op_type(reader) != "Loss");
  const std::uint64_t gates = static_cast<std::uint64_t>(r.gates);
  std::uint64_t units = 0;
  if (r.directions == 1) units = training ? gates : gates + 1;
  else units = training ? std::max<std::uint64_t>(gates + 2, 4) : std::max(2 * gates, gates + 4);  // (an RNN's training: 4)
  std::uint64_t bytes = units * unit;
  if (outs.empty() || outs[0] == kNoId) bytes += static_cast<std::uint64_t>(r.directions) * unit;  // stacked though no one reads it
  // The input projection reads X as [seq, batch, input] in order: a batch-first X (`layout` 1, or
  // PyTorch's batch_first exported as a Transpose before the node) is copied so first by a
  // bidirectional LSTM; a GRU and a one-way LSTM read it as it is (measured 2026-12-01: [16, 32,
  // 64] transposed before the node, one input over before in those, to the byte after).
  const bool copies_input = !(g.op_type(op) == "GRU" || (g.op_type(op) == "LSTM" && r.directions == 1));  // (an RNN's: not measured, kept)
  if (!training && copies_input && (r.batch_first || !g.tensor_in_order(ins[0])))  // (training: kept, part of the state)
    bytes += static_cast<std::uint64_t>(r.seq) * static_cast<std::uint64_t>(r.batch) * static_cast<std::uint64_t>(r.input) *
             dtype_size(g.tensor_dtype(ins[0]));
  return bytes;
}

bool is_recurrent(std::string_view type) { return type == "LSTM" || type == "GRU" || type == "RNN"; }

// Whether gradient op `grad` of `fwd` computes the gradient of `x`, an input of `fwd`: one of its
// outputs is that gradient, which the training step names grad/<x>/<fwd>.
bool computes_gradient(const Graph& g, OpId grad, OpId fwd, TensorId x) {
  const std::string name = "grad/" + g.tensor_name(x) + "/" + g.op_name(fwd);
  for (TensorId t : g.op_outputs(grad))
    if (t != kNoId && g.tensor_name(t) == name) return true;
  return false;
}

// A recurrent layer's gradient on the CPU (PyTorch's recurrence; the executor's own loop for other
// forms is priced alike, not measured) runs the
// steps backwards first: each step's product gives a partial gradient of the recurrent weights R
// ([gates x hidden, hidden] per direction), which autograd adds into their sum as it arrives; then
// the input projection's gradients, dX and dW, in one product over every step. So while the steps
// run it holds one R-sized partial of a direction beside the sum, and a second when autograd sums
// out of place (`out_of_place`: the new sum written while the old lives), but not yet dX and dW,
// which the simulator holds for the whole op. A bidirectional layer's gradient runs its directions
// in turn, the reverse one first: during the second, the first's gradients (its R's and W's) are
// done and its saved state (the step's `<op>/state`, which the simulator holds to the op's end) is
// freed. The workspace is what the fullest of those moments holds beyond what the simulator holds,
// when positive (measured on the host meter, 2026-11-30, docs/cost-model.md#workspaces). 0 when R
// takes no gradient.
std::uint64_t recurrent_weight_sum_bytes(const Graph& g, OpId grad, OpId fwd, bool out_of_place) {
  const auto ins = g.op_inputs(fwd);
  if (ins.size() < 3 || ins[0] == kNoId || ins[1] == kNoId || ins[2] == kNoId) return 0;
  const auto r = recurrent_sizes(g.op_type(fwd), g.op_attrs(fwd), g.tensor_shape(ins[0]), g.tensor_shape(ins[2]));
  if (!r) return 0;
  auto gradient_of = [&](TensorId x) { return computes_gradient(g, grad, fwd, x); };
  if (!gradient_of(ins[2])) return 0;
  const auto dirs = static_cast<std::int64_t>(r->directions);
  const std::int64_t k = out_of_place ? 2 : 1;
  const auto R = static_cast<std::int64_t>(g.tensor_bytes(ins[2])) / dirs;  // one direction's
  const std::int64_t dX = gradient_of(ins[0]) ? static_cast<std::int64_t>(g.tensor_bytes(ins[0])) : 0;
  const std::int64_t dW = gradient_of(ins[1]) ? static_cast<std::int64_t>(g.tensor_bytes(ins[1])) : 0;  // every direction's
  // Held by the simulator beyond the moment's: dX, dW and every direction's R but one (its sum).
  std::int64_t bytes = k * R - dX - dW - (dirs - 1) * R;
  if (dirs == 2) {
    // The second direction's moment: the first's R and W done, its state freed.
    std::int64_t state = 0;
    for (TensorId t : g.op_inputs(grad))
      if (t != kNoId && g.producer(t) == fwd && g.tensor_name(t).ends_with("/state")) state = static_cast<std::int64_t>(g.tensor_bytes(t)) / dirs;
    bytes = std::max(bytes, k * R - dX - dW / dirs - state);
  }
  return static_cast<std::uint64_t>(std::max<std::int64_t>(0, bytes));
}

// A workspace's bytes as the product of `factors`, at most kMaxWorkspaceBytes (2^62, what a graph
// allows a tensor): the shapes of a graph JSON file can make such a product overflow, which gave
// 0 (a transposed convolution's columns of 2^64 elements "fitted" on a 1 TB CPU; a review).
constexpr std::uint64_t kMaxWorkspaceBytes = std::uint64_t{1} << 62;
std::uint64_t capped_product(std::initializer_list<std::int64_t> factors) {
  std::uint64_t product = 1;
  for (std::int64_t f : factors) {
    if (f <= 0) return 0;
    if (__builtin_mul_overflow(product, static_cast<std::uint64_t>(f), &product) || product > kMaxWorkspaceBytes) return kMaxWorkspaceBytes;
  }
  return product;
}

// oneDNN's reorders of a CPU convolution's operands (op_workspace_bytes).
std::uint64_t onednn_workspace_bytes(const Graph& g, OpId op, bool backward, OpId conv) {
  const auto ins = g.op_inputs(conv);
  const auto outs = g.op_outputs(conv);
  if (ins.size() < 2 || ins[0] == kNoId || ins[1] == kNoId || outs.empty() || outs[0] == kNoId) return 0;
  const TensorId x = ins[0], w = ins[1], y = outs[0];
  if (g.tensor_dtype(x) != DType::f32) return 0;  // oneDNN's path takes float32 only
  const auto xs = g.tensor_shape(x), ws = g.tensor_shape(w), ys = g.tensor_shape(y);
  // (A graph JSON op that gives its FLOPs is loaded whatever its shapes: an output of another rank
  // read past its end; a review.)
  if (xs.size() < 3 || ws.size() != xs.size() || ys.size() != xs.size()) return 0;
  // libtorch 1.13 (ConvParams::use_mkldnn): a 1x1 convolution, unstrided and undilated, over fewer
  // than 16 samples runs without oneDNN on one thread.
  const Attributes& a = g.op_attrs(conv);
  bool one_by_one = true, unit = true;
  for (std::size_t k = 2; k < ws.size(); ++k) one_by_one = one_by_one && ws[k] == 1;
  for (std::int64_t v : a.get_ints("strides")) unit = unit && v == 1;
  for (std::int64_t v : a.get_ints("dilations")) unit = unit && v == 1;
  if (one_by_one && unit && xs[0] < 16) return 0;
  const bool grouped = a.get_int("group", 1) > 1;
  // Nor does an ungrouped 2-D convolution of one sample with at most 20,480 input elements and a
  // kernel of at most 3 in a dimension ("native is faster" there): libtorch's slow_conv2d unfolds
  // the input into columns, [input channels x kernel elements, output positions], forward and for
  // its gradient (measured on the host meter, 2026-11-30, a QA pass's [1, 32, 16, 16] by 3x3: the
  // columns to the byte).
  if (xs.size() == 4 && xs[0] == 1 && !grouped && (ws[2] <= 3 || ws[3] <= 3) && capped_product({xs[1], xs[2], xs[3]}) <= 20480)
    return capped_product({ws[1], ws[2], ws[3], ys[2], ys[3], static_cast<std::int64_t>(dtype_size(g.tensor_dtype(x)))});
  // A 1-D convolution runs as a 2-D one of kernel height 1, so the kernel never rules oneDNN in.
  if (xs.size() == 3 && xs[0] == 1 && !grouped && capped_product({xs[1], xs[2]}) <= 20480)
    return capped_product({ws[1], ws[2], ys[2], static_cast<std::int64_t>(dtype_size(g.tensor_dtype(x)))});
  const std::uint64_t in = g.tensor_bytes(x), out = g.tensor_bytes(y);
  if (grouped) {
    if (!backward) return std::max(in, out) + g.tensor_bytes(w);
  } else {
    // oneDNN's blocked layouts hold channels in blocks of 16 (AVX-512; the measured machines): a
    // tensor of C channels is reordered into ceil(C / 16) x 16. A first layer's input of 4 to 8
    // channels goes in blocks of 8, and one of at most 3 is read as it is (measured 2026-12-01,
    // [8, C, 64, 64] to 16 channels by 3x3 for C = 3 to 9, 12, 16: see below).
    const auto padded = [](std::uint64_t bytes, std::int64_t channels, std::int64_t block = 16) {
      return channels <= 0 ? bytes : bytes / static_cast<std::uint64_t>(channels) * static_cast<std::uint64_t>((channels + block - 1) / block * block);
    };
    const std::int64_t c_in = xs[1], c_out = ws[0];
    const std::uint64_t in_blocked = c_in <= 3 ? 0 : c_in <= 8 ? padded(in, c_in, 8) : padded(in, c_in), out_blocked = padded(out, c_out);
    // (Under 16 input channels the weight is not held beside the input: one blocked weight over.)
    const std::uint64_t w_blocked = c_in < 16 ? 0 : padded(padded(g.tensor_bytes(w), c_out), c_in);
    // Forward: the blocked input and weight, or the blocked output, whichever is larger (they are
    // not held at once: a convolution enlarging its channels holds its blocked output alone;
    // measured 2026-11-30, 16 to 256 channels: one weight over with input and weight beside it).
    if (!backward) return std::max(in_blocked + w_blocked, out_blocked);
    if (c_in > 8) return in_blocked + out_blocked;
    // A first layer's gradient: its blocked dY and its input in blocks of 8 (at most 3 channels: not
    // reordered when the input takes no gradient: VGG-16's first layer); computing the input's
    // gradient, that gradient in blocks of 8 too, beyond the one the step counts (5-13% over and
    // one input under with 4 channels before 2026-12-01, when 5 to 8 channels went in blocks of 16).
    bool data_gradient = false;
    for (TensorId t : g.op_outputs(op)) data_gradient = data_gradient || (t != kNoId && std::ranges::equal(g.tensor_shape(t), xs));
    if (!data_gradient) return out_blocked + in_blocked;
    return out_blocked + 2 * padded(in, c_in, 8) - in;
  }
  // A grouped convolution's gradient, when it computes the input's: with channels in blocks (8 or
  // more channels per group, a multiple of 8, or a depthwise 3x3 one) dY and the input's gradient
  // reordered, else the larger of the two (2 or 4 channels per group, a depthwise 5x5: oneDNN's
  // plain kernels). Measured 2026-12-01 (a QA pass's probes, [8, 128, 16, 16] by 3x3 in 2 to 128
  // groups, [8, 96, 32, 32] depthwise by 3x3 and 5x5, strides 1 and 2, with and without a batch
  // normalization after): up to one input under with dY alone, within 0.4% after (a depthwise 5x5
  // of stride 2 one weight over).
  for (TensorId t : g.op_outputs(op))
    if (t != kNoId && std::ranges::equal(g.tensor_shape(t), xs)) {
      const std::int64_t groups = a.get_int("group", 1), per_group = groups > 0 ? xs[1] / groups : 0;
      bool three = true;
      for (std::size_t k = 2; k < ws.size(); ++k) three = three && ws[k] == 3;
      return (per_group == 1 && three) || (per_group > 1 && per_group % 8 == 0) ? in + out : std::max(in, out);
    }
  return 0;
}

// An Einsum's temporaries (einsum_layout; measured on the host meter, 2026-12-01, docs/cost-model.md):
// forward, the operands its batched product copies into order (but those its gradient keeps, an
// output of the op in a training step); gradient, each broadcast operand's product with dY at the
// output's size when nothing is summed (as Mul's), and the second partial gradient of an operand
// the product reads twice (summed into the first). (A dY out of the product's order is copied into
// it, but autograd then frees dY: no more memory than dY's.)
std::uint64_t einsum_workspace_bytes(const Graph& g, OpId op, OpId fwd) {
  const auto layout = einsum_layout_of(g, fwd);
  if (!layout) return 0;
  const auto ins = g.op_inputs(fwd);
  std::uint64_t bytes = 0;
  const auto outs = g.op_outputs(fwd);
  if (op == fwd) {
    for (std::size_t i = 0; i < ins.size(); ++i)
      if (layout->copied[i]) bytes += g.tensor_bytes(ins[i]);
    // (In a training step the copies its gradient keeps are an output of the op.)
    const std::uint64_t kept = outs.size() > 1 && outs[1] != kNoId ? g.tensor_bytes(outs[1]) : 0;
    return bytes > kept ? bytes - kept : 0;
  }
  if (outs.empty() || outs[0] == kNoId) return 0;
  const std::uint64_t y = g.tensor_bytes(outs[0]);
  if (ins.size() == 2 && !layout->product)
    for (TensorId x : ins)
      if (g.tensor_elements(x) < g.tensor_elements(outs[0]) && computes_gradient(g, op, fwd, x)) bytes += y;
  if (ins.size() == 2 && ins[0] == ins[1] && layout->product && computes_gradient(g, op, fwd, ins[0])) bytes += g.tensor_bytes(ins[0]);
  return bytes;
}

// A MatMul's copies (matmul_layout: operands it cannot fold or batch in place, and a result
// computed transposed), held while it runs, on every device (libtorch's matmul), but those its
// gradient keeps, an output of the op in a training step (measured on the host meter, 2026-11-30,
// docs/cost-model.md#workspaces).
std::uint64_t matmul_workspace_bytes(const Graph& g, OpId op) {
  const auto layout = matmul_layout_of(g, op);
  const auto outs = g.op_outputs(op);
  if (!layout || outs.empty() || outs[0] == kNoId) return 0;
  const std::uint64_t elements = layout->copied_elements[0] + layout->copied_elements[1] + layout->transposed_result_elements;
  const std::uint64_t bytes = elements * dtype_size(g.tensor_dtype(outs[0]));
  const std::uint64_t kept = outs.size() > 1 && outs[1] != kNoId ? g.tensor_bytes(outs[1]) : 0;
  return bytes > kept ? bytes - kept : 0;
}

// Whether the gradient op `grad` of Div `fwd` computes the divisor's gradient: both operands', or the
// one an operand that takes none (data, a constant) leaves, or else the one its name says (the
// training step names it grad/<divisor>/<op>).
bool divisor_differentiated(const Graph& g, OpId grad, OpId fwd) {
  const auto ins = g.op_inputs(fwd);
  const auto outs = g.op_outputs(grad);
  auto takes_none = [&](TensorId t) { return t == kNoId || g.tensor_kind(t) == TensorKind::data || g.tensor_kind(t) == TensorKind::constant; };
  if (takes_none(ins[1]) || outs.empty()) return false;
  if (outs.size() >= 2 || takes_none(ins[0])) return true;
  return outs[0] != kNoId && g.tensor_name(outs[0]).starts_with("grad/" + g.tensor_name(ins[1]) + "/");
}

// Whether a PRelu runs as torch's prelu (the executor): floating, and prelu_as_torch_prelu.
bool prelu_native(const Graph& g, OpId op) {
  const auto ins = g.op_inputs(op);
  if (ins.size() < 2 || ins[0] == kNoId || ins[1] == kNoId || g.tensor_dtype(ins[0]) != g.tensor_dtype(ins[1])) return false;
  if (!is_floating(g.tensor_dtype(ins[0]))) return false;  // integers: the `where`
  return prelu_as_torch_prelu(g.tensor_shape(ins[0]), g.tensor_shape(ins[1]), g.op_attrs(op).get_int("slope_per_channel", 0) != 0);
}

// Temporaries of a gradient formula that autograd evaluates as several kernels (PyTorch's
// derivatives.yaml: erf's `2 / sqrt(pi) * exp(-x.pow(2)) * grad` allocates x², -x², exp(-x²), ...),
// held while the gradient op runs beyond its output. Measured 2026-11-30 on the host meter
// (libtorch 1.13, one CPU thread: `placer validate` of x + b -> op -> y, [8, 128, 3072] float32),
// in tensors of the op's input: Erf 4, Cos 2, Reciprocal 2, Pow by a constant 2, Sin, Abs, Sqrt 1; none for Exp, Tanh, Sigmoid, Relu, Softmax, Log, Neg, Softplus, LayerNormalization
// (fused kernels, or formulas of the output). A Mul's gradient for a broadcast operand (a scale
// parameter) multiplies at the output's size before it reduces: 1 output-sized tensor; x * x: 1.
// A Div's for its divisor (-grad * a / b²): 3 of the output's size. An InstanceNormalization's,
// when it computes its input's gradient (PyTorch runs it as a batch normalization of the input
// viewed as one sample of N x C channels): 1 of its input (five sizes, [8, 32, 16, 16] to
// [8, 32, 64, 64]: exactly one input; none when the input takes no gradient). ReduceL2's: 1 of its
// input; Clip's with one bound: a bool mask (with both: none, Hardtanh's); ReduceMax's, ReduceMin's and GlobalMaxPool's (amax, amin): a float mask of the input's
// size, a bool one and three of the output's size (a QA pass's probes and five more, 2026-11-30:
// to 12 bytes); the inverse and hyperbolic functions' (2026-11-30, [8, 128, 256] after a Mul or an
// Add of a parameter, to 12 bytes): Acos 5, Asin 4, Acosh, Asinh, Atanh 3, Atan 2, Cosh, Sinh 1; Tan
// 2 (of its output, 1 + y², which its gradient keeps). Elu, Celu and Selu none: elu_backward is one
// kernel of the input (2026-12-01: the 1 they were given stood in for their input, which the step
// did not keep; found with a Relu after them, 20% over).
std::uint64_t gradient_temporaries(const Graph& g, OpId grad, OpId fwd, DeviceKind kind) {
  static const std::map<std::string, int, std::less<>> kPerInput{
      {"Erf", 4},  {"Cos", 2},  {"Reciprocal", 2}, {"CumSum", 2}, {"Sin", 1},   {"Abs", 1},   {"Sqrt", 1},  {"ReduceL2", 1},
      {"Acos", 5}, {"Asin", 4}, {"Acosh", 3},      {"Asinh", 3},  {"Atanh", 3}, {"Atan", 2},  {"Cosh", 1},  {"Sinh", 1},
      {"Tan", 2}};
  const std::string& type = g.op_type(fwd);
  const auto ins = g.op_inputs(fwd);
  const auto outs = g.op_outputs(fwd);
  if (ins.empty() || ins[0] == kNoId || outs.empty() || outs[0] == kNoId) return 0;
  const std::uint64_t x = g.tensor_bytes(ins[0]), y = g.tensor_bytes(outs[0]);
  if (auto it = kPerInput.find(type); it != kPerInput.end()) return static_cast<std::uint64_t>(it->second) * x;
  // A power by a set-up scalar (a Constant node's output is one too, not only an initializer).
  if (type == "Pow" && ins.size() > 1 && ins[1] != kNoId && (g.tensor_kind(ins[1]) == TensorKind::constant || g.tensor_folded(ins[1])) &&
      g.tensor_elements(ins[1]) == 1)
    return 2 * x;
  // A power by a tensor (pow(Tensor, Tensor)): the base's gradient, where(e == 0, 0, dY * e *
  // x^(e - 1)), holds three of the output's size and e - 1 and a bool of the exponent's; the
  // exponent's, dY * where(x == 0 & e >= 0, 0, y * log x), three (two when the base is one value)
  // and a bool of the output's size. One after the other (measured 2026-12-01, [8, 32, 32, 32] after
  // a Relu, exponents of [32], [1, 32, 32, 32] and the output's size: to 20 bytes for one gradient;
  // for both, exact with a full-size exponent and a quarter of the output over (2%) with one of [32]).
  if (type == "Pow" && ins.size() > 1 && ins[1] != kNoId) {
    const std::uint64_t e = g.tensor_bytes(ins[1]), ye = g.tensor_elements(outs[0]);
    const std::uint64_t base = computes_gradient(g, grad, fwd, ins[0]) ? 3 * y + e + g.tensor_elements(ins[1]) : 0;
    // (An exponent smaller than the output gets its gradient reduced from the output's size.)
    const std::uint64_t exponent =
        computes_gradient(g, grad, fwd, ins[1]) ? (g.tensor_elements(ins[0]) > 1 ? 3 : 2) * y + ye + (e < y ? y : 0) : 0;
    return std::max(base, exponent);
  }
  // PRelu: torch's prelu_backward on the CPU gathers the slope's gradient in a tensor of the input's
  // size; through a `where` (a slope broadcast otherwise), the where's and the product's gradients:
  // 2 inputs (measured 2026-12-01, [8, 32, 32, 32], to 12 bytes and to 0.6%).
  if (type == "PRelu") return prelu_native(g, fwd) ? (kind == DeviceKind::cpu ? x : 0) : 2 * x;
  // Reductions (measured 2026-12-01, [8, 32, 32, 32] over axis 1 or 3, with a Relu after, to 12
  // bytes): ReduceL1's sgn(x) * dY (and dY / |y| at the output's size); ReduceSumSquare's 2x * dY;
  // ReduceLogSumExp's exp(x - y) (x - y, then its exp); ReduceProd's y / x where no x is 0 (a bool
  // test of x, the quotient, and two of the output's size); a GlobalLpPool's as ReduceL2's (p 1, 2
  // or 3: one of the input, to 1 KB).
  if (type == "ReduceL1") return x + y;
  // A MatMul's operand broadcast over a batched product gets its gradient at the batch's size,
  // then summed (matmul_layout; measured 2026-12-01, a QA pass's token-mixing MLP, [8, 128, 64] as
  // a transposed view by [64, 64]: 0.44 of the input under before, to 12 bytes after).
  if (type == "MatMul" && ins.size() > 1 && ins[1] != kNoId) {
    std::uint64_t bytes = 0;
    if (const auto layout = matmul_layout_of(g, fwd))
      for (std::size_t i = 0; i < 2; ++i)
        if (layout->broadcast_gradient_elements[i] > 0 && computes_gradient(g, grad, fwd, ins[i]))
          bytes = std::max(bytes, layout->broadcast_gradient_elements[i] * dtype_size(g.tensor_dtype(ins[i])));
    return bytes;
  }
  // A Gemm with alpha other than 1 (torch's addmm): each operand's gradient, a product, is scaled
  // into a new tensor, A's first while B's gradient is not yet made, then B's beside A's (measured
  // 2026-12-01, [512, 512] by [512, 64] trained: 20% under before, to 12 bytes).
  // (Without C the executor runs mm(A, B) * alpha: not this rule; not measured.)
  if (type == "Gemm" && g.op_attrs(fwd).get_float("alpha", 1.0) != 1.0 && ins.size() > 2 && ins[1] != kNoId && ins[2] != kNoId) {
    const std::uint64_t a = computes_gradient(g, grad, fwd, ins[0]) ? x : 0;
    const std::uint64_t b = computes_gradient(g, grad, fwd, ins[1]) ? g.tensor_bytes(ins[1]) : 0;
    return std::max(a > b ? a - b : 0, b);
  }
  // MeanVarianceNormalization's gradient (through the centring, the square, the mean, the root and
  // the division): 5 of its input; a training Dropout's: dY / (1 - ratio) before the mask (which
  // the step keeps from the forward op); an
  // LpNormalization's (x / |x|: the division's for its divisor, as Div's, and the norm's): 3 of its
  // input (measured 2026-12-01, [8, 32, 32, 32] with a Relu after: 50%, 19% and 38% under before).
  if (type == "MeanVarianceNormalization") return 5 * x;
  // Softsign's (the division's for its divisor, then |x|'s) and LRN's: 3 of the input (measured
  // 2026-12-01, [8, 32, 32, 32] with a Relu after: 33% and 27% under without them).
  if (type == "Softsign" || type == "LRN") return 3 * x;
  if (type == "Dropout" && g.op_attrs(fwd).get_int("training_mode", 0) != 0) return x;
  if (type == "LpNormalization") return 3 * x + op_workspace_bytes(g, fwd, kind);  // and one of the norms
  // Such a HardSigmoid's gradient is clamp's: a bool mask per bound (9% under before).
  if (type == "HardSigmoid" && !pytorch_hard_sigmoid(g.op_attrs(fwd))) return 2 * g.tensor_elements(ins[0]);
  // maximum's and minimum's gradients: two bool masks (where the operands tie, where one won), and
  // a broadcast operand's gradient at the output's size before it is reduced (measured 2026-12-01,
  // Max and Min of x and -x, of x and data, of x and a parameter of [32], on [8, 32, 32, 32]: 4-13%
  // under before).
  if ((type == "Max" || type == "Min") && ins.size() == 2 && ins[1] != kNoId) {
    std::uint64_t bytes = 0;
    for (TensorId t : ins)
      if (computes_gradient(g, grad, fwd, t)) bytes = std::max(bytes, 2 * g.tensor_elements(outs[0]) + (g.tensor_bytes(t) < y ? y : 0));
    return bytes;
  }
  if (type == "ReduceSumSquare") return x;
  if (type == "ReduceLogSumExp") return 2 * x;
  if (type == "ReduceProd") return x + g.tensor_elements(ins[0]) + 2 * y;
  if (type == "GlobalLpPool") return x;
  // (libtorch's CPU kernel's buffer, not a formula's: cuDNN's not measured.)
  if (type == "InstanceNormalization" || type == "BatchNormalization")
    return kind == DeviceKind::cpu && computes_gradient(g, grad, fwd, ins[0]) ? x : 0;
  // clamp's gradient with one bound: where the input is within it, a bool mask (opset 11 and later
  // give the bounds as inputs 1 and 2, older opsets as attributes). With both, the executor runs
  // PyTorch's Hardtanh, whose gradient is one kernel with no temporary (docs/execution.md).
  if (type == "Clip") {
    const Attributes& a = g.op_attrs(fwd);
    const std::uint64_t bounds = static_cast<std::uint64_t>((ins.size() > 1 && ins[1] != kNoId) || a.find("min")) +
                                 static_cast<std::uint64_t>((ins.size() > 2 && ins[2] != kNoId) || a.find("max"));
    return bounds == 1 ? g.tensor_elements(ins[0]) : 0;
  }
  // amax/amin's gradient: where the input equals the result (a bool mask), divided by their count
  // (three of the result's size besides).
  if (type == "ReduceMax" || type == "ReduceMin" || type == "GlobalMaxPool") return x + g.tensor_elements(ins[0]) + 3 * y;
  // A Div's for its divisor, -dY * a / b², at the output's size: 3 when the divisor is broadcast
  // (reduced to its size after), 2 when it is of the output's size (a QA pass: h / Exp(h), h /
  // Sigmoid(h), h / (|W| + 1) one output over with 3, to 20 bytes with 2; 2026-12-01).
  if (type == "Div" && ins.size() > 1 && ins[1] != kNoId && divisor_differentiated(g, grad, fwd))
    return (g.tensor_elements(ins[1]) < g.tensor_elements(outs[0]) ? 3 : 2) * y;
  if (type == "Mul" && ins.size() > 1 && ins[1] != kNoId) {
    if (ins[0] == ins[1]) return x;
    // A gradient smaller than Y: a broadcast operand's, reduced from a product of Y's size.
    for (TensorId t : g.op_outputs(grad))
      if (t != kNoId && g.tensor_bytes(t) < y) return y;
  }
  return 0;
}

std::uint64_t workspace_bytes(const Graph& g, OpId op, DeviceKind kind) {
  const bool backward = g.op_role(op) == OpRole::backward;
  if (!backward) {
    const auto ins = g.op_inputs(op);
    if (ins.size() > 2 && ins[0] != kNoId && ins[2] != kNoId)
      if (const auto r = recurrent_sizes(g.op_type(op), g.op_attrs(op), g.tensor_shape(ins[0]), g.tensor_shape(ins[2])))
        return kind == DeviceKind::cpu ? recurrent_workspace_bytes(g, op, *r) : 0;
  }
  // libtorch's max pooling on the CPU (1.13: max_pool{1,2,3}d) computes the indices too and drops
  // them: a MaxPool whose indices the graph does not keep (inference; a training step keeps them as
  // an output, training-step.md) holds int64 indices of its output's shape while it runs (measured
  // on the host meter, 2026-11-30: the whole gap of a MaxPool alone). GPUs: not measured.
  if (!backward && g.op_type(op) == "MaxPool") {
    const auto outs = g.op_outputs(op);
    // (A 1-D one without a gradient to come computes none: max_pool1d's own kernel; a QA pass
    // measured it two outputs over with them.)
    const bool one_d = outs.size() == 1 && outs[0] != kNoId && g.tensor_shape(outs[0]).size() == 3;
    return kind == DeviceKind::cpu && outs.size() == 1 && outs[0] != kNoId && !one_d ? g.tensor_elements(outs[0]) * 8 : 0;
  }
  // libtorch 1.13 runs a transposed convolution on the CPU without oneDNN (slow_conv_transpose2d/3d):
  // one sample at a time, through a buffer of columns, [out channels x kernel, input's spatial
  // elements], and its gradient through the same columns for dX and dW (measured on the host meter,
  // 2026-11-30: four shapes in inference, the buffer to within 0.14 MB; 32 training steps,
  // docs/cost-model.md#workspaces). GPUs: not measured.
  const OpId fwd = backward ? g.forward_op(op) : op;
  if (fwd != kNoId && g.op_type(fwd) == "ConvTranspose" && g.op_type(op) == (backward ? "ConvTransposeGrad" : "ConvTranspose")) {
    const auto ins = g.op_inputs(fwd);
    if (kind != DeviceKind::cpu || ins.size() < 2 || ins[0] == kNoId || ins[1] == kNoId) return 0;
    const auto xs = g.tensor_shape(ins[0]), ws = g.tensor_shape(ins[1]);
    if (xs.size() < 3 || ws.size() != xs.size()) return 0;
    const std::int64_t groups = std::max<std::int64_t>(1, g.op_attrs(fwd).get_int("group", 1));
    // Out channels ([C_in, C_out / group, k...]) x kernel x the input's spatial elements.
    std::uint64_t bytes = capped_product({ws[1], groups, static_cast<std::int64_t>(dtype_size(g.tensor_dtype(ins[0])))});
    for (std::size_t d = 2; d < xs.size(); ++d)
      bytes = capped_product({static_cast<std::int64_t>(bytes), ws[d], xs[d]});
    return bytes;
  }
  if (fwd != kNoId && g.op_type(fwd) == "Einsum" && g.op_type(op) == (backward ? "EinsumGrad" : "Einsum")) return einsum_workspace_bytes(g, op, fwd);
  if (!backward && g.op_type(op) == "MatMul") return matmul_workspace_bytes(g, op);
  // A HardSigmoid other than PyTorch's (alpha 1/6, beta 1/2) runs as clamp(x * alpha + beta, 0, 1):
  // x * alpha + beta beside its output (measured 2026-12-01: 25% under in inference before).
  if (!backward && g.op_type(op) == "HardSigmoid" && !pytorch_hard_sigmoid(g.op_attrs(op))) {
    const auto ins = g.op_inputs(op);
    return ins.empty() || ins[0] == kNoId ? 0 : g.tensor_bytes(ins[0]);
  }
  // Softsign runs as x / (1 + |x|) and LRN as PyTorch's local_response_norm (the executor): they
  // hold 1 + |x|, and at most three of the input's size at once (the window means, alpha times
  // them, and plus bias), beside their output; in training less what they keep for the gradient,
  // an output of the op (kept_intermediate_elements).
  if (!backward && (g.op_type(op) == "Softsign" || g.op_type(op) == "LRN")) {
    const auto ins = g.op_inputs(op);
    const auto outs = g.op_outputs(op);
    if (ins.empty() || ins[0] == kNoId) return 0;
    const std::uint64_t bytes = (g.op_type(op) == "LRN" ? 2 : 1) * g.tensor_bytes(ins[0]);
    const std::uint64_t kept = outs.size() > 1 && outs.back() != kNoId && g.tensor_name(outs.back()).ends_with("/kept") ? g.tensor_bytes(outs.back()) : 0;
    return bytes > kept ? bytes - kept : 0;
  }
  // MeanVarianceNormalization runs as (x - mean) / (sqrt(mean((x - mean)²)) + eps): the centred
  // input and its square beside the output; a Dropout in training mode as x * (rand >= ratio) /
  // (1 - ratio): the random numbers or x times the mask, and the mask, a byte per element (measured
  // 2026-12-01, [8, 32, 32, 32]: 40% and 29% under before, to the byte).
  if (!backward && g.op_type(op) == "MeanVarianceNormalization") {
    const auto ins = g.op_inputs(op);
    return ins.empty() || ins[0] == kNoId ? 0 : 2 * g.tensor_bytes(ins[0]);
  }
  // An LpNormalization (x / |x| along an axis) holds the norms, of its output's size less that axis.
  if (!backward && g.op_type(op) == "LpNormalization") {
    const auto ins = g.op_inputs(op);
    if (ins.empty() || ins[0] == kNoId) return 0;
    const auto xs = g.tensor_shape(ins[0]);
    std::int64_t axis = g.op_attrs(op).get_int("axis", -1);
    if (axis < 0) axis += static_cast<std::int64_t>(xs.size());
    const std::int64_t along = axis >= 0 && axis < static_cast<std::int64_t>(xs.size()) ? std::max<std::int64_t>(1, xs[static_cast<std::size_t>(axis)]) : 1;
    return g.tensor_bytes(ins[0]) / static_cast<std::uint64_t>(along);
  }
  if (!backward && g.op_type(op) == "Dropout" && g.op_attrs(op).get_int("training_mode", 0) != 0) {
    const auto ins = g.op_inputs(op);
    const auto outs = g.op_outputs(op);
    if (ins.empty() || ins[0] == kNoId) return 0;
    // (The mask is an output when the node gives it, or what the training step keeps, <op>/kept.)
    const bool mask_out = outs.size() > 1 && outs.back() != kNoId;
    return g.tensor_bytes(ins[0]) + (mask_out ? 0 : g.tensor_elements(ins[0]));
  }
  // Reductions that hold a tensor of their input's size while they run: ReduceSumSquare's x * x,
  // ReduceLogSumExp's x - max(x) (libtorch's logsumexp exponentiates it in place before it sums)
  // and the maxima, of the output's size (measured 2026-12-01, to the byte).
  if (!backward && (g.op_type(op) == "ReduceSumSquare" || g.op_type(op) == "ReduceLogSumExp")) {
    const auto ins = g.op_inputs(op);
    const auto outs = g.op_outputs(op);
    if (ins.empty() || ins[0] == kNoId) return 0;
    const std::uint64_t maxima = g.op_type(op) == "ReduceLogSumExp" && !outs.empty() && outs[0] != kNoId ? g.tensor_bytes(outs[0]) : 0;
    return g.tensor_bytes(ins[0]) + maxima;
  }
  // A PRelu whose slope broadcasts other than per channel runs as where(x >= 0, x, x * slope): a bool
  // mask and the product beside its output (measured 2026-12-01).
  if (!backward && g.op_type(op) == "PRelu" && !prelu_native(g, op)) {
    const auto ins = g.op_inputs(op);
    return ins.empty() || ins[0] == kNoId ? 0 : g.tensor_elements(ins[0]) + g.tensor_bytes(ins[0]);
  }
  if (backward && fwd != kNoId && is_recurrent(g.op_type(fwd)) && g.op_type(op) == g.op_type(fwd) + "Grad")
    return kind == DeviceKind::cpu ? recurrent_weight_sum_bytes(g, op, fwd, false) : 0;
  if (backward && fwd != kNoId && g.op_type(fwd) != "Conv") return gradient_temporaries(g, op, fwd, kind);
  if (fwd == kNoId || g.op_type(fwd) != "Conv" || (backward && g.op_type(op) != "ConvGrad")) return 0;
  const std::uint64_t copies = ordered_copies(g, op);
  if (kind != DeviceKind::cpu) return copies;
  return copies + onednn_workspace_bytes(g, op, backward, fwd);
}

}  // namespace

std::uint64_t op_workspace_bytes(const Graph& g, OpId op, DeviceKind kind) {
  return std::min(workspace_bytes(g, op, kind), kMaxWorkspaceBytes);
}

std::uint64_t op_out_of_place_sum_bytes(const Graph& g, OpId op, DeviceKind kind) {
  const OpId fwd = g.op_role(op) == OpRole::backward ? g.forward_op(op) : kNoId;
  if (kind != DeviceKind::cpu || fwd == kNoId || !is_recurrent(g.op_type(fwd)) || g.op_type(op) != g.op_type(fwd) + "Grad") return 0;
  return recurrent_weight_sum_bytes(g, op, fwd, true) - recurrent_weight_sum_bytes(g, op, fwd, false);
}

namespace {

// A 2-D Conv of several groups, each of one input channel (its weight [M, 1, kh, kw]). (1-D and
// 3-D ones run other kernels; the local preset times the 2-D one.)
bool depthwise_conv(const Graph& g, OpId op) {
  if (g.op_type(op) != "Conv" || g.op_attrs(op).get_int("group", 1) <= 1) return false;
  const auto ins = g.op_inputs(op);
  if (ins.size() < 2 || ins[1] == kNoId) return false;
  const auto w = g.tensor_shape(ins[1]);
  return w.size() == 4 && w[1] == 1;
}

// A stride above 1 on some axis.
bool strided(const Graph& g, OpId op) {
  for (std::int64_t s : g.op_attrs(op).get_ints("strides"))
    if (s > 1) return true;
  return false;
}

// A Pad's mode, where reflect or edge; "wrap" is priced as reflect (op_work's memory rule takes it
// so too; the executor does not run it).
std::string_view pad_mode_type(const Graph& g, OpId op, bool gradient) {
  if (g.op_type(op) != "Pad") return {};
  const std::string mode = g.op_attrs(op).get_string("mode", "constant");
  if (mode == "reflect" || mode == "wrap") return gradient ? kReflectPadGrad : kReflectPad;
  if (mode == "edge") return gradient ? kEdgePadGrad : kEdgePad;
  return {};
}

}  // namespace

std::string_view priced_type(const Graph& g, OpId op, std::optional<bool> training_step) {
  const std::string& type = g.op_type(op);
  if (type == "BatchNormalization" && g.op_role(op) == OpRole::forward &&
      (training_step.value_or(g.num_forward_ops() < g.num_ops()) || g.op_attrs(op).get_int("training_mode", 0) != 0))
    return kTrainingBatchNormalization;
  if (g.op_role(op) == OpRole::backward) {
    // A gradient op of the forward op's own type + "Grad" (not a partial sum or a loss).
    const OpId fwd = g.forward_op(op);
    if (fwd == kNoId) return type;
    const std::string& forward = g.op_type(fwd);
    if (type.size() != forward.size() + 4 || !type.starts_with(forward) || !type.ends_with("Grad")) return type;
    if (depthwise_conv(g, fwd)) return strided(g, fwd) ? kStridedDepthwiseConvGrad : kDepthwiseConvGrad;
    if (auto pad = pad_mode_type(g, fwd, true); !pad.empty()) return pad;
    return type;
  }
  if (depthwise_conv(g, op)) return strided(g, op) ? kStridedDepthwiseConv : kDepthwiseConv;
  if (auto pad = pad_mode_type(g, op, false); !pad.empty()) return pad;
  return type;
}

std::vector<std::string> unmatched_efficiency_types(const Graph& g, const Cluster& c) {
  std::map<std::string, std::vector<std::string>> devices_of;  // key -> devices naming it
  for (DeviceId d = 0; d < c.num_devices(); ++d)
    for (const auto& [key, efficiency] : c.device(d).efficiency_by_type) devices_of[key].push_back(c.device(d).name);
  if (devices_of.empty()) return {};
  for (OpId o = 0; o < g.num_ops(); ++o) devices_of.erase(std::string(priced_type(g, o)));
  const auto known = [](std::string_view key) {
    if (is_known_op_type(key) || key == kLossOpType) return true;
    for (Optimizer o : {Optimizer::sgd, Optimizer::momentum, Optimizer::adam})
      if (key == update_op_type(o)) return true;
    for (std::string_view own : {kTrainingBatchNormalization, kDepthwiseConv, kDepthwiseConvGrad, kStridedDepthwiseConv,
                                 kStridedDepthwiseConvGrad, kReflectPad, kReflectPadGrad, kEdgePad, kEdgePadGrad})
      if (key == own) return true;
    return key.ends_with("Grad") && is_known_op_type(key.substr(0, key.size() - 4));
  };
  std::vector<std::string> unmatched;
  for (const auto& [key, devices] : devices_of)
    if (!known(key)) unmatched.push_back(fmt::format("'{}' ({})", key, fmt::join(devices, ", ")));
  return unmatched;
}

std::vector<EfficiencyKeyedApart> efficiency_types_keyed_apart(const Graph& g, const Cluster& c, const CostTable& costs) {
  std::vector<DeviceId> with_types;
  for (DeviceId d = 0; d < c.num_devices(); ++d)
    if (!c.device(d).efficiency_by_type.empty()) with_types.push_back(d);
  if (with_types.empty()) return {};
  std::map<std::pair<std::string, std::string>, EfficiencyKeyedApart> found;
  for (OpId o = 0; o < g.num_ops(); ++o) {
    const std::string& type = g.op_type(o);
    const std::string_view priced = priced_type(g, o);
    if (priced == type) continue;
    EfficiencyKeyedApart* entry = nullptr;
    for (DeviceId d : with_types) {
      const auto& types = c.device(d).efficiency_by_type;
      if (!types.contains(type) || types.contains(std::string(priced)) || costs.source(o, d) != CostSource::modelled) continue;
      if (!entry) {
        entry = &found[{type, std::string(priced)}];
        entry->key = type, entry->priced = priced, ++entry->ops;
      }
      if (std::find(entry->devices.begin(), entry->devices.end(), c.device(d).name) == entry->devices.end())
        entry->devices.push_back(c.device(d).name);
    }
  }
  std::vector<EfficiencyKeyedApart> out;
  for (auto& [key, entry] : found) out.push_back(std::move(entry));
  return out;
}

CostTable::CostTable(const Graph& g, const Cluster& c, const CostModel& model, const Profile* profile)
    : num_devices_(c.num_devices()) {
  const bool fitted = profile && profile->model();
  const CostModel& m = fitted ? *profile->model() : model;
  // Per device: the profile's model for the kinds it prices, else `model` with the device's own figures.
  std::vector<std::uint8_t> profile_model(num_devices_);
  for (DeviceId d = 0; d < num_devices_; ++d) profile_model[d] = fitted && m.prices[static_cast<std::size_t>(c.device(d).kind)];
  time_s_.assign(g.num_ops() * num_devices_, 0.0);
  source_.assign(g.num_ops() * num_devices_, CostSource::modelled);
  workspace_.assign(g.num_ops() * num_devices_, 0);
  const bool use_profile = profile && profile->size() > 0;
  // Per device, the graph's op types it has efficiencies of its own for (by type id); an op whose
  // priced_type is not its type (batch statistics, a depthwise convolution, a reflect pad) is
  // looked up by that name.
  std::vector<std::vector<const Device::Efficiency*>> by_type(num_devices_);
  for (DeviceId d = 0; d < num_devices_; ++d) {
    const auto& types = c.device(d).efficiency_by_type;
    if (types.empty()) continue;
    by_type[d].assign(g.num_op_types(), nullptr);
    for (std::uint32_t t = 0; t < g.num_op_types(); ++t)
      if (auto it = types.find(g.op_type_name(t)); it != types.end()) by_type[d][t] = &it->second;
  }
  for (OpId o = 0; o < g.num_ops(); ++o) {
    const OpWork w = priced_work(g, o);
    const bool backward = g.op_role(o) == OpRole::backward;
    const std::string_view type = priced_type(g, o);
    const bool own_key = type != g.op_type(o);
    std::string signature = use_profile ? op_signature(g, o) : std::string();
    for (DeviceId d = 0; d < num_devices_; ++d) {
      const std::size_t k = std::size_t{o} * num_devices_ + d;
      if (w.op_class == OpClass::alias) {
        source_[k] = CostSource::alias;
        continue;
      }
      if (g.op_folded(o)) {  // computed once before the step
        source_[k] = CostSource::folded;
        continue;
      }
      if (use_profile) {
        if (auto t = profile->find(c.device(d).kind, g.op_name(o), signature)) {
          time_s_[k] = *t;
          source_[k] = CostSource::measured;
          ++measured_;
          continue;
        }
      }
      const Device::Efficiency* type_efficiency = nullptr;
      if (own_key) {
        const auto& types = c.device(d).efficiency_by_type;
        if (auto it = types.find(type); it != types.end()) type_efficiency = &it->second;
      } else if (!by_type[d].empty()) {
        type_efficiency = by_type[d][g.op_type_id(o)];
      }
      time_s_[k] = profile_model[d] ? modelled_time_s(w, c.device(d), m, false, backward, type_efficiency)
                                    : modelled_time_s(w, c.device(d), model, true, backward, type_efficiency);
      // Tiny peaks, bandwidths or efficiencies (1e-300 is positive and finite) can price an op
      // past what a double holds: a step of inf seconds is no answer.
      if (!std::isfinite(time_s_[k]))
        throw Error("op '" + g.op_name(o) + "' would take " + std::to_string(time_s_[k]) + " s on device '" + c.device(d).name + "' (" +
                    std::to_string(w.flops) + " FLOPs, " + std::to_string(w.bytes_read + w.bytes_written) +
                    " bytes): check the op's work and the device's peak_flops, memory_bandwidth and efficiencies");
    }
  }
  // Workspaces (and what out-of-place sums add): one rule per device kind, where the op takes time.
  auto per_device = [&](std::vector<std::uint64_t>& table, auto rule) {
    for (OpId o = 0; o < g.num_ops(); ++o) {
      const std::array<std::uint64_t, 2> by_kind{rule(g, o, DeviceKind::cpu), rule(g, o, DeviceKind::gpu)};
      if (by_kind[0] == 0 && by_kind[1] == 0) continue;
      if (table.empty()) table.assign(g.num_ops() * num_devices_, 0);
      for (DeviceId d = 0; d < num_devices_; ++d)
        if (time_s_[std::size_t{o} * num_devices_ + d] > 0)
          table[std::size_t{o} * num_devices_ + d] = by_kind[static_cast<std::size_t>(c.device(d).kind)];
    }
  };
  per_device(workspace_, op_workspace_bytes);
  per_device(out_of_place_sum_, op_out_of_place_sum_bytes);
  // Each time is finite, but a device's sum may not be (a profile giving 1e308 s to two ops):
  // every step and bound on it would be inf, or the bounds' arithmetic NaN.
  for (DeviceId d = 0; d < num_devices_; ++d) {
    double total = 0.0;
    for (OpId o = 0; o < g.num_ops(); ++o) total += time_s_[std::size_t{o} * num_devices_ + d];
    if (!std::isfinite(total))
      throw Error("the ops' times on device '" + c.device(d).name +
                  "' add up to more than a double holds: check " +
                  (profile != nullptr ? std::string("the profile's times and ") : std::string()) +
                  "the device's figures (op_overhead_s, peak_flops, memory_bandwidth, efficiencies)");
  }
}

}  // namespace placer
