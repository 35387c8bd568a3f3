#include "placer/graph/types.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "placer/util/error.hpp"

namespace placer {
namespace {

template <typename E, std::size_t N>
E parse_enum(std::string_view name, const std::array<std::string_view, N>& names, std::string_view what) {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == name) return static_cast<E>(i);
  std::string known;
  for (auto n : names) known += (known.empty() ? "" : ", ") + std::string(n);
  throw Error("unknown " + std::string(what) + " '" + std::string(name) + "' (known: " + known + ")");
}

constexpr std::array<std::string_view, 15> kDTypeNames = {"unknown", "float32", "float16", "bfloat16", "float64",
                                                          "int8",    "uint8",   "int16",   "uint16",   "int32",
                                                          "uint32",  "int64",   "uint64",  "bool",     "string"};
constexpr std::array<std::string_view, 6> kKindNames = {"activation", "data",     "parameter",
                                                        "buffer",     "constant", "gradient"};
constexpr std::array<std::string_view, 3> kRoleNames = {"forward", "backward", "update"};
constexpr std::array<std::string_view, kNumOpClasses> kClassNames = {
    "alias", "elementwise", "matmul", "conv", "normalization", "pooling", "reduction", "data_movement", "optimizer"};

}  // namespace

std::uint32_t dtype_size(DType t) {
  switch (t) {
    case DType::f64: case DType::i64: case DType::u64: return 8;
    case DType::f32: case DType::i32: case DType::u32: return 4;
    case DType::f16: case DType::bf16: case DType::i16: case DType::u16: return 2;
    case DType::i8: case DType::u8: case DType::boolean: return 1;
    case DType::unknown: case DType::string: return 0;
  }
  return 0;
}

std::string module_paths_too_long() {
  return "its module paths, each with its ancestors, hold more than " + std::to_string(kMaxModulePathBytes >> 20) +
         " MiB of names (node names nested too deep, too many times over)";
}

std::string_view dtype_name(DType t) { return kDTypeNames[static_cast<std::size_t>(t)]; }
DType parse_dtype(std::string_view name) {
  for (std::size_t i = 0; i < kDTypeNames.size(); ++i)
    if (kDTypeNames[i] == name) return static_cast<DType>(i);
  // The types a tensor may have: "unknown" and "string" have names but are refused.
  std::string known;
  for (auto n : kDTypeNames)
    if (n != "unknown" && n != "string") known += (known.empty() ? "" : ", ") + std::string(n);
  throw Error("unknown dtype '" + std::string(name) + "' (known: " + known + ")");
}

DType dtype_from_onnx(int e) {
  // onnx::TensorProto_DataType numbering.
  switch (e) {
    case 1: return DType::f32;
    case 2: return DType::u8;
    case 3: return DType::i8;
    case 4: return DType::u16;
    case 5: return DType::i16;
    case 6: return DType::i32;
    case 7: return DType::i64;
    case 8: return DType::string;
    case 9: return DType::boolean;
    case 10: return DType::f16;
    case 11: return DType::f64;
    case 12: return DType::u32;
    case 13: return DType::u64;
    case 16: return DType::bf16;
    default: return DType::unknown;
  }
}

bool is_floating(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f64; }

std::string_view tensor_kind_name(TensorKind k) { return kKindNames[static_cast<std::size_t>(k)]; }
TensorKind parse_tensor_kind(std::string_view n) { return parse_enum<TensorKind>(n, kKindNames, "tensor kind"); }
std::string_view op_role_name(OpRole r) { return kRoleNames[static_cast<std::size_t>(r)]; }
OpRole parse_op_role(std::string_view n) { return parse_enum<OpRole>(n, kRoleNames, "op role"); }
std::string_view op_class_name(OpClass c) { return kClassNames[static_cast<std::size_t>(c)]; }
OpClass parse_op_class(std::string_view n) { return parse_enum<OpClass>(n, kClassNames, "op class"); }

void Attributes::set(Attribute a) {
  // Kept sorted by name, so that equal attribute sets compare equal whatever their source order.
  auto it = std::lower_bound(items_.begin(), items_.end(), a.name, [](const Attribute& x, const std::string& name) { return x.name < name; });
  if (it != items_.end() && it->name == a.name) *it = std::move(a);
  else items_.insert(it, std::move(a));
}

const Attribute* Attributes::find(std::string_view name) const {
  for (const auto& a : items_)
    if (a.name == name) return &a;
  return nullptr;
}

std::int64_t Attributes::get_int(std::string_view name, std::int64_t fallback) const {
  const Attribute* a = find(name);
  if (!a) return fallback;
  if (a->kind == Attribute::Kind::integer) return a->i;
  if (a->kind == Attribute::Kind::real) return static_cast<std::int64_t>(a->f);
  return fallback;
}

double Attributes::get_float(std::string_view name, double fallback) const {
  const Attribute* a = find(name);
  if (!a) return fallback;
  if (a->kind == Attribute::Kind::real) return a->f;
  if (a->kind == Attribute::Kind::integer) return static_cast<double>(a->i);
  return fallback;
}

std::string Attributes::get_string(std::string_view name, std::string_view fallback) const {
  const Attribute* a = find(name);
  return a && a->kind == Attribute::Kind::text ? a->s : std::string(fallback);
}

std::vector<std::int64_t> Attributes::get_ints(std::string_view name, std::vector<std::int64_t> fallback) const {
  const Attribute* a = find(name);
  return a && a->kind == Attribute::Kind::integers ? a->ints : fallback;
}

}  // namespace placer
