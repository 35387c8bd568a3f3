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

}  // namespace
}  // namespace placer
