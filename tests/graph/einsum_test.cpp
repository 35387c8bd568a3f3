// Einsum equations: labels, implicit outputs, broadcasting and the errors that name what is wrong.
#include "placer/graph/einsum.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "placer/util/error.hpp"

namespace placer {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Shapes = std::vector<std::vector<std::int64_t>>;
using Dims = std::vector<std::int64_t>;

TEST(Einsum, ExplicitOutputsFollowTheirLetters) {
  EXPECT_EQ(einsum_output_shape("ij,jk->ik", Shapes{{3, 4}, {4, 5}}), (Dims{3, 5}));
  EXPECT_EQ(einsum_output_shape("ij->ji", Shapes{{3, 4}}), (Dims{4, 3}));
  EXPECT_EQ(einsum_output_shape("i,j->ij", Shapes{{3}, {5}}), (Dims{3, 5}));
  EXPECT_EQ(einsum_output_shape("ii->i", Shapes{{6, 6}}), (Dims{6}));      // a diagonal
  EXPECT_EQ(einsum_output_shape("ij->", Shapes{{3, 4}}), (Dims{}));        // a full sum
  EXPECT_EQ(einsum_output_shape("", Shapes{{}}), (Dims{}));                 // a scalar, as it is
  EXPECT_EQ(einsum_output_shape(" b i j , b j k -> b i k ", Shapes{{2, 3, 4}, {2, 4, 5}}), (Dims{2, 3, 5}));  // spaces
}

TEST(Einsum, ImplicitOutputsAreTheLettersUsedOnceInAsciiOrderAfterTheBroadcastDimensions) {
  EXPECT_EQ(einsum_output_shape("ij,jk", Shapes{{3, 4}, {4, 5}}), (Dims{3, 5}));
  EXPECT_EQ(einsum_output_shape("ba", Shapes{{3, 4}}), (Dims{4, 3}));        // a, then b
  EXPECT_EQ(einsum_output_shape("aB", Shapes{{3, 4}}), (Dims{4, 3}));        // upper case first
  EXPECT_EQ(einsum_output_shape("...ij,jk", Shapes{{7, 2, 3, 4}, {4, 5}}), (Dims{7, 2, 3, 5}));
}

TEST(Einsum, EllipsesAreRightAlignedAndBroadcast) {
  EXPECT_EQ(einsum_output_shape("...ij,...jk->...ik", Shapes{{7, 1, 3, 4}, {2, 4, 5}}), (Dims{7, 2, 3, 5}));
  EXPECT_EQ(einsum_output_shape("...i,i->...", Shapes{{7, 2, 4}, {4}}), (Dims{7, 2}));
  // Broadcast dimensions an explicit output leaves out are summed (PyTorch's reading).
  EXPECT_EQ(einsum_output_shape("...ij->ij", Shapes{{7, 3, 4}}), (Dims{3, 4}));
  // A letter of size 1 broadcasts against another size, in either order.
  EXPECT_EQ(einsum_output_shape("bij,bjk->bik", Shapes{{1, 3, 4}, {6, 4, 5}}), (Dims{6, 3, 5}));
  EXPECT_EQ(einsum_output_shape("bij,bjk->bik", Shapes{{6, 3, 4}, {1, 4, 5}}), (Dims{6, 3, 5}));
}

TEST(Einsum, LabelsNumberLettersThenBroadcastDimensions) {
  const std::vector<std::size_t> ranks{4, 2};
  const EinsumLabels e = parse_einsum("...ij,jk", ranks);
  EXPECT_EQ(e.num_labels, EinsumLabels::kLetters + 2);
  const int i = 26 + 8, j = 26 + 9, k = 26 + 10, b0 = EinsumLabels::kLetters, b1 = b0 + 1;
  EXPECT_EQ(e.operands[0], (std::vector<int>{b0, b1, i, j}));
  EXPECT_EQ(e.operands[1], (std::vector<int>{j, k}));
  EXPECT_EQ(e.output, (std::vector<int>{b0, b1, i, k}));
}

TEST(Einsum, EquationsThatDoNotFitTheirOperandsAreErrorsNamingWhy) {
  auto fails = [](const char* eq, Shapes shapes, const char* why) {
    EXPECT_THAT([&] { einsum_output_shape(eq, shapes); }, ThrowsMessage<Error>(HasSubstr(why))) << eq;
  };
  fails("ij,jk->ik", Shapes{{3, 4}}, "has 2 operand(s), the node has 1 input(s)");
  fails("ijk->i", Shapes{{3, 4}}, "operand 1 has rank 2, its term has 3 letter(s)");
  fails("...ijk->i", Shapes{{3, 4}}, "its term has 3 letter(s) and \"...\"");
  fails("ij,jk->ik", Shapes{{3, 4}, {5, 6}}, "letter 'j' has size 4 in operand 1 and 5 in operand 2");
  fails("...i,...i->...", Shapes{{2, 3}, {5, 3}}, "a broadcast dimension has size 2 in operand 1 and 5 in operand 2");
  fails("i1->i", Shapes{{3, 4}}, "'1' is not a letter");
  fails("i.j->i", Shapes{{3, 4}}, "a '.' outside \"...\"");
  fails("...i...->i", Shapes{{3, 4}}, "has \"...\" twice");
  fails("ij->ix", Shapes{{3, 4}}, "output letter 'x' is in no operand");
  fails("ij->ii", Shapes{{3, 4}}, "output letter 'i' is given twice");
  fails("ij->i->j", Shapes{{3, 4}}, "\"->\" twice");
  fails("", Shapes{{3, 4}}, "operand 1 has rank 2, its term has 0 letter(s)");
  fails("ii->i", Shapes{{1, 3}}, "letter 'i' is repeated in operand 1 with sizes 1 and 3");  // a diagonal never broadcasts
  fails("ij,jj->i", Shapes{{2, 3}, {3, 1}}, "letter 'j' is repeated in operand 2 with sizes 3 and 1");
}

// How PyTorch's einsum lays out its work (measured against libtorch 1.13 on the host meter,
// tests/exec/memory_meter_test.cpp): an operand is copied when its dimensions cannot be reshaped
// into the batched product's [both, left only, summed] (left) or [both, summed, right only]
// (right) without a copy; the output is the product's storage, permuted into the output's order.
TEST(Einsum, AnOperandIsCopiedWhenItsLettersCannotBeViewedInTheProductsOrder) {
  using Strides = std::vector<std::vector<std::int64_t>>;
  auto layout = [](const char* eq, const Shapes& shapes, const Strides& strides = {}) {
    std::vector<std::span<const std::int64_t>> s(shapes.begin(), shapes.end()), st(strides.begin(), strides.end());
    return einsum_layout(eq, s, st);
  };
  // Attention's scores: b and h are batch letters, between q and d in both operands: two copies.
  const EinsumLayout qk = layout("bqhd,bkhd->bhqk", Shapes{{2, 5, 3, 4}, {2, 6, 3, 4}});
  ASSERT_TRUE(qk.modelled);
  EXPECT_TRUE(qk.product);
  EXPECT_EQ(qk.copied, (std::vector<bool>{true, true}));
  EXPECT_EQ(qk.output_strides, (Dims{3 * 5 * 6, 5 * 6, 6, 1})) << "[b, h, q, k]: in order";
  // ...and its values: the scores as they are, V copied; the output [b, q, h, d] viewed from [b, h, q, d].
  const EinsumLayout pv = layout("bhqk,bkhd->bqhd", Shapes{{2, 3, 5, 6}, {2, 6, 3, 4}});
  EXPECT_EQ(pv.copied, (std::vector<bool>{false, true}));
  EXPECT_EQ(pv.output_strides, (Dims{3 * 5 * 4, 4, 5 * 4, 1}));
  EXPECT_EQ(pv.gradient_strides[0], (Dims{3 * 5 * 6, 5 * 6, 6, 1})) << "the scores' gradient: [b, h, q, k] in order";
  EXPECT_EQ(pv.gradient_strides[1], (Dims{3 * 6 * 4, 4, 6 * 4, 1})) << "V's: in the product's [b, h, k, d]";
  // A batch letter in front of both, or a transposed operand the product reads as it is: no copy.
  EXPECT_EQ(layout("bhqd,bhkd->bhqk", Shapes{{2, 3, 5, 4}, {2, 3, 6, 4}}).copied, (std::vector<bool>{false, false}));
  const EinsumLayout abt = layout("ij,kj->ik", Shapes{{5, 4}, {6, 4}});
  EXPECT_EQ(abt.copied, (std::vector<bool>{false, false}));
  EXPECT_EQ(abt.gradient_strides[1], (Dims{1, 6})) << "B's gradient comes as [j, k]: transposed";
  EXPECT_EQ(layout("...d,de->...e", Shapes{{2, 3, 4}, {4, 7}}).copied, (std::vector<bool>{false, false}));
  EXPECT_EQ(layout("ij,jk->ki", Shapes{{5, 4}, {4, 6}}).output_strides, (Dims{1, 6})) << "the product's [i, k], transposed";
  // An operand already transposed into the product's order needs no copy; the same letters in
  // row-major order do.
  // (K^T as [b, h, d, k], viewing a [b, h, k, d] tensor.)
  EXPECT_EQ(layout("bhqd,bhdk->bhqk", Shapes{{2, 3, 5, 4}, {2, 3, 4, 6}}, Strides{{}, {72, 24, 1, 4}}).copied, (std::vector<bool>{false, false}));
  EXPECT_EQ(layout("bqhd,bkhd->bhqk", Shapes{{2, 5, 3, 4}, {2, 6, 3, 4}}, Strides{{60, 4, 20, 1}, {}}).copied, (std::vector<bool>{false, true}))
      << "Q given as a [b, h, q, d] tensor viewed as [b, q, h, d]";
}

TEST(Einsum, OneOperandIsAViewOrASumAndNothingSummedIsAnElementwiseProduct) {
  auto layout = [](const char* eq, const Shapes& shapes) {
    std::vector<std::span<const std::int64_t>> s(shapes.begin(), shapes.end());
    return einsum_layout(eq, s, {});
  };
  const EinsumLayout t = layout("ij->ji", Shapes{{5, 4}});
  EXPECT_TRUE(t.modelled && t.view);
  EXPECT_EQ(t.output_strides, (Dims{1, 4}));
  EXPECT_EQ(t.gradient_strides[0], (Dims{1, 5})) << "dY permuted back";
  const EinsumLayout sum = layout("ij->i", Shapes{{5, 4}});
  EXPECT_TRUE(sum.modelled && !sum.view && !sum.product);
  EXPECT_EQ(sum.gradient_strides[0], (Dims{1, 0})) << "dY broadcast along j";
  const EinsumLayout outer = layout("bi,bj->bij", Shapes{{2, 5}, {2, 4}});
  EXPECT_TRUE(outer.modelled && !outer.product);
  EXPECT_EQ(outer.copied, (std::vector<bool>{false, false}));
  // Outside the model: a diagonal, a letter summed from one operand alone, three operands.
  EXPECT_FALSE(layout("ii->i", Shapes{{4, 4}}).modelled);
  EXPECT_FALSE(layout("ij,jk->k", Shapes{{5, 4}, {4, 6}}).modelled);
  EXPECT_FALSE(layout("ij,jk,kl->il", Shapes{{5, 4}, {4, 6}, {6, 3}}).modelled);
}

}  // namespace
}  // namespace placer
