// Inlining, before anything else reads a model: calls of model-local functions, and Ifs whose
// condition is known before the model runs.
//
// Model-local functions (ModelProto.functions). Exporters write modules and composite ops as
// functions: PyTorch's dynamo exporter wrote one per module call and onnxscript's aten functions,
// hand-built models use them to share a block. placer places the ops of their bodies, so every
// call is replaced by its function's body before anything else reads the model:
// - the body's nodes are named "<call>/<node>" (the call's name, or its first output's when it has
//   none), so that the call is a module of the placement file, and calls nested in bodies nest;
// - the function's inputs and outputs become the call's (an input the call leaves out, and an empty
//   name in the body, stay empty: absent optional inputs); other values are named "<call>/<value>",
//   made unique in the model;
// - attributes that refer to the function's (`ref_attr_name`) take the call's value, else the
//   function's default (IR 9's attribute_proto), else are left out (the op's default);
// - the function's opset imports join the model's.
//
//   std::size_t calls = inline_local_functions(model);  // model.functions() is empty after
//
// Ifs decided before the model runs: onnxscript's aten functions branch on `IsScalar(x)` and the
// like, which shape inference and folding decide once x's shape is known.
// inline_control_flow_decided_by_shapes (onnx_file.hpp) finds such conditions and inline_decided_ifs
// replaces each If by the branch it takes, so that its ops are placed and run like the others (an
// If stays an op placer cannot price or run).
//
// Loops and Scans whose iterations are known before the model runs (a trip count that is a constant
// or computed from shapes, as PyTorch's scripted `for i in range(x.size(0))` and tf2onnx's RNNs
// write them) are unrolled the same way (unroll_counted_loops): each iteration's nodes are placed
// and run like the others.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace placer {

// Replaces every call of a model-local function in the main graph by the function's body, calls
// inside bodies and in subgraphs too, and clears model.functions(). An output the function also takes
// as an input (or gives twice) is given by an Identity after the body. Returns the number of calls
// replaced. Throws Error for a function that calls itself (directly or through others), functions
// nested more than 64 deep, inlining that would give more than 4,194,304 nodes (counted first), two
// functions of one name (IR 10's overloads), a call with more inputs or outputs than its function,
// and a function importing a domain at another version than the model where an op of its body reads
// differently at the two.
std::size_t inline_local_functions(onnx::ModelProto& model);

// Replaces every If of the main graph whose condition `conditions` decides (by the condition's
// tensor name) by the nodes of the branch it takes: the branch's outputs become the If's, its other
// values and its nodes are named under the If ("<if>/<name>", made unique), its initializers join
// the graph's, and an output the branch takes from outside it passes through an Identity. Returns
// the number of Ifs replaced. An If whose branch does not give as many outputs as it has is left.
std::size_t inline_decided_ifs(onnx::ModelProto& model, const std::unordered_map<std::string, bool>& conditions);

// Unrolls every Loop and Scan of the main graph whose iterations are known before the model runs:
// - a Loop whose trip count M `values` gives (the folding's values by name, folded_values), whose
//   condition input is absent or `values` gives it, and whose body's condition output stays true
//   (the body's condition input passed on, through Identity nodes or not, or a constant true): no
//   early exit that depends on the step's data. A condition given false, or an M of 0 or less,
//   runs no iteration (ONNX's rules); a body whose condition output is a constant false runs once
//   (a do-once loop: M, when given, must be known, and caps it).
// - a Scan (opset 9 on) whose scan inputs' lengths on their scan axes `types` gives.
// Iteration i's nodes are the body's, named "<node>/<i>/<name>" (so each iteration is a module of
// the placement file, "<node>.<i>"), values likewise; the iteration number and condition a Loop's
// body reads (its subgraphs too) are constants; a loop-carried value is the previous iteration's
// (the node's input first); a Scan's body reads its slice of each scan input through a Gather at
// index i (from the end when its direction is 1). The body's initializers and Constant nodes are
// copied once and shared by every iteration (a weight stays one weight), and so are those of the
// body's subgraphs (an inner Loop's body, an If's branches). The node's outputs: the
// last loop-carried values through an Identity, and each scan output's values stacked on its axis
// by Unsqueeze and Concat (in reverse when its direction is 1). Loops and Scans in a body are
// unrolled with it, as nodes of the main graph, at the next call. Other Loops and Scans are left
// as they are. Returns how many were unrolled. Throws Error for a trip count that is not an
// integer, an unrolled model of more than 1,048,576 nodes (counted before anything is unrolled),
// scan inputs of different lengths, a scan axis out of range, a body whose inputs or outputs do
// not match its node's, and a scan output of no iteration (empty).
// With `keep_refused`, a Loop or Scan it would refuse is left as it is instead (--unknown-ops
// prices it as one op).
// `iterations`, when given, gains the iterations unrolled.
std::size_t unroll_counted_loops(onnx::ModelProto& model, const std::unordered_map<std::string, std::vector<double>>& values,
                                 const std::map<std::string, onnx::TypeProto>& types, bool keep_refused = false,
                                 std::uint64_t* iterations = nullptr);

// Resolves the sequences of the main graph whose tensors are known before the model runs: PyTorch's
// scripted lists (`xs = []`, `xs.append(h)` in a loop, `torch.stack(xs)`: SequenceEmpty, a
// SequenceInsert per iteration once unroll_counted_loops has unrolled the loop, ConcatFromSequence;
// `x.unbind(0)`: SplitToSequence; `len(xs)`, `xs[i]`). A sequence is known when it comes from
// SequenceEmpty, SequenceConstruct, an Identity of a known one, a SequenceInsert or SequenceErase of
// a known one at a position `values` gives (or the default), or a SplitToSequence whose input's
// length on its axis `types` gives and whose split is absent or in `values`. Its readers become
// tensor ops: SequenceAt at a known position an Identity of the tensor, SequenceLength an int64
// initializer, ConcatFromSequence a Concat (new_axis: of the tensors each Unsqueezed), and
// SplitToSequence a Split (then Squeezes when keepdims is 0 and no split is given). The nodes that
// only made sequences go once nothing reads them; a sequence something else reads (a Loop left as
// it is, an output) stays as it was made, and the parts of a split nothing reads go. An insert waits
// for its tensor's type (a round) and is refused for a type other than the list's. Returns how many
// nodes were rewritten or removed. Throws Error for a position out of range (or into an empty
// list), a tensor of another type, a ConcatFromSequence of an empty sequence, a split that does not
// add up to its input's length or would give an empty tensor, and nodes that would take the model
// past 1,048,576 (counted before they are made).
// The ops resolve_known_sequences reads (Sequence*, ConcatFromSequence, SplitToSequence, Optional*),
// of the default domain.
bool is_sequence_or_optional_op(const onnx::NodeProto& n);

// `pass` carries what one import's rounds share: the outputs of the nodes the pass made (which go,
// in a later round too, once nothing reads them) and the count of the model's sequence ops read as
// tensors (`placer inspect` reports it).
struct SequencePass {
  std::unordered_set<std::string> made;
  std::size_t sequence_ops = 0;
};
std::size_t resolve_known_sequences(onnx::ModelProto& model, const std::unordered_map<std::string, std::vector<double>>& values,
                                    const std::map<std::string, onnx::TypeProto>& types, SequencePass& pass);

// Throws Error when a model-local function calls itself, directly or through others (ONNX's
// shape inference expands function bodies without a depth limit: the stack overflowed).
void check_function_recursion(const onnx::ModelProto& model);

}  // namespace placer
