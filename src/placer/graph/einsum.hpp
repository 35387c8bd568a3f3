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
#include <span>
#include <string_view>
#include <vector>

namespace placer {

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

}  // namespace placer
