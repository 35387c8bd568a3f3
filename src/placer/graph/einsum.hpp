// Einsum equations (ONNX's Einsum, read as numpy and PyTorch do): the labels of every operand's dimensions,
// the output's, and the output shape. The cost rules price an Einsum from its labels, and the ONNX
// importer gives an Einsum's output its shape where libonnx 1.12's rule gives only its rank.
//
//   EinsumLabels e = parse_einsum("bhqd,bhkd->bhqk", std::vector<std::size_t>{4, 4});
//   einsum_output_shape("bhqd,bhkd->bhqk", {{8, 12, 128, 64}, {8, 12, 128, 64}});  // {8, 12, 128, 128}
//
// Rules: letters A-Z and a-z label dimensions, spaces are ignored, "..." stands for the broadcast
// dimensions of an operand (right-aligned across operands). Without "->" the output is the
// broadcast dimensions, then the letters used exactly once in ASCII order. A letter's sizes must
// agree across its uses, or be 1 (broadcast), and a letter repeated in one operand (a diagonal)
// has one size. Broadcast dimensions an explicit output leaves out are summed, as PyTorch does
// (numpy refuses them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "placer/graph/types.hpp"

namespace placer {

class Graph;

struct EinsumLabels {
  static constexpr int kLetters = 52;  // 'A'..'Z' are 0..25, 'a'..'z' 26..51
  // Per operand, the label of each dimension: a letter's number, or kLetters + k for the k-th of
  // the broadcast dimensions (counted over the longest ellipsis, operands' ellipses right-aligned).
  std::vector<std::vector<int>> operands;
  std::vector<int> output;  // labels of the output's dimensions, in order
  int num_labels = kLetters;  // kLetters + the number of broadcast dimensions
};

// Parses `equation` for operands of these ranks. Throws Error naming the equation when it does not
// fit them: another number of operands, a term of another rank, a character that is not a letter,
// '.' outside "...", an output letter no operand has or given twice.
EinsumLabels parse_einsum(std::string_view equation, std::span<const std::size_t> ranks);

// The size of every label (0 for a label no operand uses). Throws Error when a letter's sizes
// disagree (neither equal nor 1).
std::vector<std::int64_t> einsum_label_sizes(std::string_view equation, const EinsumLabels& labels,
                                             std::span<const std::span<const std::int64_t>> shapes);

// The output shape of `equation` on operands of these shapes (parse_einsum and einsum_label_sizes'
// errors).
std::vector<std::int64_t> einsum_output_shape(std::string_view equation, const std::vector<std::vector<std::int64_t>>& shapes);

// How PyTorch evaluates an Einsum (libtorch 1.13's at::einsum, the executor's kernel), as far as
// memory goes. Every operand is viewed in one common order of the labels (the output's, then the
// summed ones: broadcast dimensions, then letters in label order); two operands with letters to
// sum are multiplied by sumproduct_pair: the left one permuted to [both, left only, summed] and
// reshaped to three dimensions, the right one to [both, summed, right only], a batched product of
// the two, and its result viewed in the output's order. An operand whose dimensions cannot be
// reshaped so without a copy (PyTorch's `view` rule) is copied into that order first; the output
// is the product's storage, in row-major order only when the output lists its letters as the
// product does. The gradient of that product reshapes dY the same way (a copy when the output is
// not in row-major order, which replaces dY) and gives each operand's gradient in the product's
// order. With nothing
// to sum the operands are multiplied elementwise (broadcast); one operand with nothing to sum is
// a permuted view of it.
struct EinsumLayout {
  bool modelled = false;  // one operand, or two; no letter repeated within an operand; no letter summed from one operand alone
  bool product = false;   // two operands multiplied by a batched matrix product (else elementwise, or one operand)
  bool view = false;      // the output is a view of the only operand (a permutation of it)
  std::vector<bool> copied;  // per operand: copied into the product's order first
  std::vector<std::int64_t> output_strides;  // the output's strides, in elements
  // Per operand, its gradient's strides: the product's order; one operand's, dY's permuted back
  // (0 along summed letters: a view of dY); row-major for an elementwise product (summed to shape).
  std::vector<std::vector<std::int64_t>> gradient_strides;
};

// `strides[i]`: operand i's strides in elements (empty: row-major). Throws as parse_einsum and
// einsum_label_sizes do; an equation outside what `modelled` covers gives modelled = false,
// row-major strides and no copies.
EinsumLayout einsum_layout(std::string_view equation, std::span<const std::span<const std::int64_t>> shapes,
                           std::span<const std::span<const std::int64_t>> strides);

// einsum_layout of Einsum op `op` of `g`, its operands laid out as the graph has them
// (Graph::tensor_strides); none when an input is absent, the equation does not parse, or the
// equation is outside what einsum_layout models.
std::optional<EinsumLayout> einsum_layout_of(const Graph& g, OpId op);
// The same with the operands' strides from `strides_of` (the graph's build, before it stores them).
std::optional<EinsumLayout> einsum_layout_of(const Graph& g, OpId op, const std::function<std::vector<std::int64_t>(TensorId)>& strides_of);

}  // namespace placer
