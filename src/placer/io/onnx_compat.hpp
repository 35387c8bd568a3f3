// Models newer than the ONNX library placer links. Debian's libonnx 1.12 checks and infers shapes
// for IR version 8 and opset 17 of the default domain; exporters now write IR 9-10 and opsets
// 18-21 (onnx >= 1.14, PyTorch's dynamo exporter). Most ops of those opsets are their opset-17
// forms with more element types; the few whose inputs or attributes changed (ReduceMean's axes
// became an input, Split got num_outputs, DFT's axis became an input; Gelu, GroupNormalization,
// Mish and the Bitwise ops are new) are rewritten, in a copy used only for checking and shape
// inference, one for one into opset-17 nodes that give the same output shapes. The imported ops
// are the file's own nodes, so costs follow the real ops.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>

namespace placer {

// ONNX's name of an element type ("FLOAT"), or "element type 99" for one the linked library does
// not know (its own function gives "" then: a fuzzing pass's message read "input 'w' is  but").
inline std::string elem_type_name(int type) {
  const std::string name = onnx::TensorProto_DataType_IsValid(type) ? onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(type)) : "";
  return name.empty() ? "element type " + std::to_string(type) : name;
}

// What the linked ONNX library knows: its IR version and the last opset of the default domain.
std::int64_t onnx_library_ir_version();
std::int64_t onnx_library_opset();

// The model's opset of the default domain (1 when it imports none).
std::int64_t default_opset(const onnx::ModelProto& model);

// A copy of `model` the library can check and infer: IR version and default opset lowered to the
// library's, and the nodes whose newer forms it cannot read rewritten (see the header comment).
// std::nullopt when the model is not newer than the library. Nodes it cannot rewrite are left as
// they are: the checker then names them.
std::optional<onnx::ModelProto> library_compatible_copy(const onnx::ModelProto& model);

// "IR version 10 and opset 20, newer than this build's ONNX library (IR 8, opset 17)", or "" when
// the model is not newer: what errors about such a model add.
std::string newer_than_library(const onnx::ModelProto& model);

// The newest IR version and default-domain opset whose changes placer reads (the rewrites above);
// a newer model is read as if it were of these, with a warning (newer_than_placer).
inline constexpr std::int64_t kNewestKnownIrVersion = 10;
inline constexpr std::int64_t kNewestKnownOpset = 21;
// "opset 23, newer than the newest placer reads (IR 10, opset 21): ...", or "" when it is not.
std::string newer_than_placer(const onnx::ModelProto& model);

}  // namespace placer
