// Vocabulary types of the graph layer: integer ids, element types, tensor kinds, op roles and op
// classes, and the small attribute map that keeps the ONNX attributes an op's cost depends on.
// Everything here is a value type; nothing allocates on the simulator's hot path.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace placer {

using OpId = std::uint32_t;
using TensorId = std::uint32_t;
using ModuleId = std::uint32_t;
inline constexpr std::uint32_t kNoId = std::numeric_limits<std::uint32_t>::max();
// Module paths ("layer3.0.conv1") may be at most this many levels deep; deeper ones are refused
// at import (memory for a path's ancestors grows with the square of its depth).
inline constexpr long kMaxModuleDepth = 512;
// And every module path with all its ancestors, each a string of its own, may hold at most this
// many bytes in all (NASNet-A large's 1,396 modules hold 52 KB): 2,000 distinct paths 500 levels
// deep took 6 GB and 38 s before (found by a fuzzing review).
inline constexpr std::size_t kMaxModulePathBytes = std::size_t{64} << 20;
// The error when they hold more.
std::string module_paths_too_long();

// ONNX TensorProto element types we size; `unknown` is an error wherever bytes are needed.
enum class DType : std::uint8_t { unknown, f32, f16, bf16, f64, i8, u8, i16, u16, i32, u32, i64, u64, boolean, string };

// Bytes of one element (0 for unknown/string).
std::uint32_t dtype_size(DType t);
std::string_view dtype_name(DType t);
// Parses a name written by dtype_name ("float32", "int64", ...). Throws Error on an unknown name.
DType parse_dtype(std::string_view name);
// ONNX TensorProto::DataType number -> DType (unknown when we do not size it).
DType dtype_from_onnx(int onnx_elem_type);
bool is_floating(DType t);

enum class TensorKind : std::uint8_t {
  activation,  // produced by an op
  data,        // a graph input that carries the training data (not trained)
  parameter,   // trainable weight: lives on one device, gets a gradient and optimizer state
  buffer,      // held in memory, never trained (BatchNorm running statistics)
  constant,    // a value baked into the graph (initializer that is not a parameter)
  gradient,    // a gradient produced by the backward pass
};
std::string_view tensor_kind_name(TensorKind k);
TensorKind parse_tensor_kind(std::string_view name);

enum class OpRole : std::uint8_t { forward, backward, update };
std::string_view op_role_name(OpRole r);
OpRole parse_op_role(std::string_view name);

// What bounds an op's speed; the cost model keeps one efficiency factor per class and device kind.
enum class OpClass : std::uint8_t {
  alias,          // no work: Identity, Reshape, Constant, Shape, ... (zero time)
  elementwise,    // pointwise math and activations: memory bound
  matmul,         // Gemm, MatMul: compute bound
  conv,           // Conv, ConvTranspose
  normalization,  // BatchNormalization, LayerNormalization, ...
  pooling,        // MaxPool, AveragePool, LpPool; the gradients of global pooling
  reduction,      // ReduceSum, Softmax, global pooling (GlobalAveragePool, ...), ...
  data_movement,  // Concat, Split, Transpose, Slice, Pad, Gather, Cast, ...: copies bytes
  optimizer,      // parameter update ops of a training step
};
inline constexpr int kNumOpClasses = 9;
std::string_view op_class_name(OpClass c);
OpClass parse_op_class(std::string_view name);

// One ONNX attribute, reduced to what cost rules and the JSON format need.
struct Attribute {
  enum class Kind : std::uint8_t { integer, real, text, integers, reals };
  std::string name;
  Kind kind = Kind::integer;
  std::int64_t i = 0;
  double f = 0.0;
  std::string s;
  std::vector<std::int64_t> ints;
  std::vector<double> floats;
  bool operator==(const Attribute&) const = default;
};

// A small list of attributes, sorted by name, with typed lookups (ops have few attributes).
class Attributes {
 public:
  Attributes() = default;
  void set(Attribute a);
  const Attribute* find(std::string_view name) const;
  std::int64_t get_int(std::string_view name, std::int64_t fallback) const;
  double get_float(std::string_view name, double fallback) const;
  std::string get_string(std::string_view name, std::string_view fallback) const;
  // The ints of a list attribute, or `fallback` when absent.
  std::vector<std::int64_t> get_ints(std::string_view name, std::vector<std::int64_t> fallback = {}) const;
  std::span<const Attribute> all() const { return items_; }
  bool empty() const { return items_.empty(); }
  bool operator==(const Attributes&) const = default;

 private:
  std::vector<Attribute> items_;
};

}  // namespace placer
