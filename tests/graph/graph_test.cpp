#include "placer/graph/graph.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "placer/util/error.hpp"

namespace placer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// x -> a -> {b, c} -> d : a fork and a join.
Graph diamond() {
  GraphBuilder b("diamond");
  TensorId x = b.add_tensor("x", {4, 8}, DType::f32, TensorKind::data);
  TensorId ta = b.add_tensor("ta", {4, 8}, DType::f32, TensorKind::activation);
  TensorId tb = b.add_tensor("tb", {4, 8}, DType::f32, TensorKind::activation);
  TensorId tc = b.add_tensor("tc", {4, 8}, DType::f32, TensorKind::activation);
  TensorId td = b.add_tensor("td", {4, 8}, DType::f32, TensorKind::activation);
  b.add_op({.name = "/blk/a/Relu", .type = "Relu", .inputs = {x}, .outputs = {ta}, .module = "blk.a"});
  b.add_op({.name = "/blk/b/Relu", .type = "Relu", .inputs = {ta}, .outputs = {tb}, .module = "blk.b"});
  b.add_op({.name = "/blk/c/Relu", .type = "Relu", .inputs = {ta}, .outputs = {tc}, .module = "blk.c"});
  b.add_op({.name = "/Add", .type = "Add", .inputs = {tb, tc}, .outputs = {td}});
  b.mark_output(td);
  return std::move(b).build();
}

TEST(Graph, StoresAdjacencyAsCsr) {
  Graph g = diamond();
  EXPECT_EQ(g.num_ops(), 4u);
  EXPECT_EQ(g.num_tensors(), 5u);
  EXPECT_THAT(g.successors(0), ElementsAre(1u, 2u));
  EXPECT_THAT(g.predecessors(3), ElementsAre(1u, 2u));
  EXPECT_THAT(g.consumers(g.find_tensor("ta")), ElementsAre(1u, 2u));
  EXPECT_EQ(g.producer(g.find_tensor("td")), 3u);
  EXPECT_EQ(g.producer(g.find_tensor("x")), kNoId);
}

TEST(Graph, TopologicalOrderPutsProducersFirst) {
  Graph g = diamond();
  EXPECT_THAT(g.topological_order(), ElementsAre(0u, 1u, 2u, 3u));
}

// Two chains, x -> a -> b and y -> c, written a, b, c: program order, not the breadth-first order
// a, c, b (which the order was until 2026-11-25, although the simulator documents program order).
// Ops listed out of order come after their producers, the lowest id first.
TEST(Graph, TopologicalOrderIsProgramOrderWhenIdsAreTopological) {
  auto build = [](bool producers_last) {
    GraphBuilder b;
    TensorId x = b.add_tensor("x", {2}, DType::f32, TensorKind::data), y = b.add_tensor("y", {2}, DType::f32, TensorKind::data);
    TensorId ta = b.add_tensor("ta", {2}, DType::f32, TensorKind::activation), tb = b.add_tensor("tb", {2}, DType::f32, TensorKind::activation);
    TensorId tc = b.add_tensor("tc", {2}, DType::f32, TensorKind::activation);
    if (producers_last) b.add_op({.name = "b", .type = "Relu", .inputs = {ta}, .outputs = {tb}});
    b.add_op({.name = "a", .type = "Relu", .inputs = {x}, .outputs = {ta}});
    if (!producers_last) b.add_op({.name = "b", .type = "Relu", .inputs = {ta}, .outputs = {tb}});
    b.add_op({.name = "c", .type = "Relu", .inputs = {y}, .outputs = {tc}});
    return std::move(b).build();
  };
  EXPECT_THAT(build(false).topological_order(), ElementsAre(0u, 1u, 2u));
  // b (id 0) waits for a (id 1); c (id 2) is ready before b, but b's id is lower.
  EXPECT_THAT(build(true).topological_order(), ElementsAre(1u, 0u, 2u));
}

TEST(Graph, SizesTensorsFromShapeAndType) {
  Graph g = diamond();
  EXPECT_EQ(g.tensor_bytes(g.find_tensor("x")), 4u * 8u * 4u);
  EXPECT_EQ(g.tensor_elements(g.find_tensor("x")), 32u);
}

TEST(Graph, KeepsModuleHierarchy) {
  Graph g = diamond();
  ModuleId a = g.op_module(0);
  EXPECT_EQ(g.module_name(a), "blk.a");
  EXPECT_EQ(g.module_depth(a), 2u);
  EXPECT_EQ(g.module_name(g.module_parent(a)), "blk");
  EXPECT_EQ(g.module_name(g.module_ancestor(a, 1)), "blk");
  EXPECT_EQ(g.op_module(3), 0u);  // top-level functional op
  EXPECT_TRUE(g.find_module("blk.c").has_value());
  EXPECT_FALSE(g.find_module("blk.d").has_value());
}

TEST(Graph, ParameterLivesWithItsFirstConsumer) {
  GraphBuilder b;
  TensorId x = b.add_tensor("x", {2, 3}, DType::f32, TensorKind::data);
  TensorId w = b.add_tensor("w", {3, 3}, DType::f32, TensorKind::parameter);
  TensorId y = b.add_tensor("y", {2, 3}, DType::f32, TensorKind::activation);
  TensorId z = b.add_tensor("z", {2, 3}, DType::f32, TensorKind::activation);
  b.add_op({.name = "mm1", .type = "MatMul", .inputs = {x, w}, .outputs = {y}});
  b.add_op({.name = "mm2", .type = "MatMul", .inputs = {y, w}, .outputs = {z}});
  Graph g = std::move(b).build();
  EXPECT_EQ(g.param_home(w), 0u);
  GraphTotals totals = graph_totals(g);
  EXPECT_EQ(totals.trainable_params, 9u);
  EXPECT_EQ(totals.param_bytes, 36u);
}

// Set-up values: constants, shapes, and what is computed from them alone (Graph::op_folded).
TEST(Graph, FoldsConstantsShapesAndWhatIsComputedFromThemAlone) {
  GraphBuilder b("fold");
  TensorId x = b.add_tensor("x", {4, 8}, DType::f32, TensorKind::data);
  TensorId axes = b.add_tensor("axes", {1}, DType::i64, TensorKind::constant);  // an initializer
  TensorId c = b.add_tensor("c", {2}, DType::i64, TensorKind::activation);
  TensorId shape = b.add_tensor("shape", {2}, DType::i64, TensorKind::activation);
  TensorId both = b.add_tensor("both", {2}, DType::i64, TensorKind::activation);
  TensorId u = b.add_tensor("u", {1, 2}, DType::i64, TensorKind::activation);
  TensorId r = b.add_tensor("r", {8, 4}, DType::f32, TensorKind::activation);
  TensorId y = b.add_tensor("y", {8, 4}, DType::f32, TensorKind::activation);
  TensorId dr = b.add_tensor("dr", {8, 4}, DType::f32, TensorKind::gradient);
  b.add_op({.name = "const", .type = "Constant", .outputs = {c}});
  b.add_op({.name = "shape", .type = "Shape", .inputs = {x}, .outputs = {shape}});  // shapes are static
  b.add_op({.name = "add", .type = "Add", .inputs = {c, shape}, .outputs = {both}});
  b.add_op({.name = "unsq", .type = "Unsqueeze", .inputs = {both, axes}, .outputs = {u}});
  b.add_op({.name = "reshape", .type = "Reshape", .inputs = {x, both}, .outputs = {r}});  // reads data
  b.add_op({.name = "relu", .type = "Relu", .inputs = {r}, .outputs = {y}});
  b.add_op({.name = "grad", .type = "ReluGrad", .inputs = {u}, .outputs = {dr}, .role = OpRole::backward, .forward_op = 5});
  b.mark_output(y);
  b.set_num_forward_ops(6);
  Graph g = std::move(b).build();
  std::vector<bool> folded;
  for (OpId o = 0; o < g.num_ops(); ++o) folded.push_back(g.op_folded(o));
  EXPECT_THAT(folded, ElementsAre(true, true, true, true, false, false, false));  // only forward ops fold
  EXPECT_EQ(g.num_folded_ops(), 4u);
  EXPECT_TRUE(g.tensor_folded(axes));
  EXPECT_TRUE(g.tensor_folded(u));
  EXPECT_FALSE(g.tensor_folded(x));
  EXPECT_FALSE(g.tensor_folded(r));
}

// A folded op runs before the step anywhere, so it is no home: the data input lives with the first
// op that reads its values.
// A random op draws anew every step, even from constants (found by review: it was drawn once).
TEST(Graph, RandomOpsAreNeverFolded) {
  GraphBuilder b("random");
  TensorId p = b.add_tensor("p", {4}, DType::f32, TensorKind::constant);
  TensorId coin = b.add_tensor("coin", {4}, DType::f32, TensorKind::activation);
  TensorId noise = b.add_tensor("noise", {4}, DType::f32, TensorKind::activation);
  b.add_op({.name = "coin", .type = "Bernoulli", .inputs = {p}, .outputs = {coin}});
  b.add_op({.name = "noise", .type = "RandomUniformLike", .inputs = {p}, .outputs = {noise}});
  b.mark_output(coin);
  b.mark_output(noise);
  Graph g = std::move(b).build();
  EXPECT_FALSE(g.op_folded(0));
  EXPECT_FALSE(g.op_folded(1));
}

TEST(Graph, ATensorLivesWithItsFirstReaderThatIsNotFolded) {
  GraphBuilder b("home");
  TensorId x = b.add_tensor("x", {4, 8}, DType::f32, TensorKind::data);
  TensorId shape = b.add_tensor("shape", {2}, DType::i64, TensorKind::activation);
  TensorId r = b.add_tensor("r", {8, 4}, DType::f32, TensorKind::activation);
  TensorId only = b.add_tensor("only", {1}, DType::i64, TensorKind::constant);
  TensorId u = b.add_tensor("u", {1}, DType::i64, TensorKind::activation);
  b.add_op({.name = "shape", .type = "Shape", .inputs = {x}, .outputs = {shape}});
  b.add_op({.name = "reshape", .type = "Reshape", .inputs = {x, shape}, .outputs = {r}});
  b.add_op({.name = "neg", .type = "Neg", .inputs = {only}, .outputs = {u}});
  b.mark_output(r);
  Graph g = std::move(b).build();
  EXPECT_EQ(g.param_home(x), 1u);
  EXPECT_EQ(g.param_home(only), 2u);  // read by folded ops alone: the first of them
}

TEST(GraphValidation, RejectsACycleNamingItsOps) {
  GraphBuilder b;
  TensorId t1 = b.add_tensor("t1", {1}, DType::f32, TensorKind::activation);
  TensorId t2 = b.add_tensor("t2", {1}, DType::f32, TensorKind::activation);
  b.add_op({.name = "first", .type = "Relu", .inputs = {t2}, .outputs = {t1}});
  b.add_op({.name = "second", .type = "Relu", .inputs = {t1}, .outputs = {t2}});
  try {
    (void)std::move(b).build();
    FAIL() << "a cycle was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("the graph has a cycle: 'second' -> 'first' -> 'second'"));
  }
}

// "r12": a name with a number (std::string's operator+ on a one-letter literal trips GCC 12's
// -Wrestrict false positive).
std::string fmt_name(std::string prefix, int i) { return prefix.append(std::to_string(i)); }

TEST(GraphValidation, ACycleBeforeAcyclicOpsIsReportedWithoutWritingPastItsArrays) {
  // Found by InputMutation (tests/sim): ranks were written by op id into an array sized by the ops
  // that had been ordered, fewer than the ops when there is a cycle. A ring of 2,000 ops comes
  // first, then a chain of 10 from the data: 10 ranks were written up to 2,000 entries past a
  // 10-entry array (silent in a release build, reported by AddressSanitizer). The message
  // closed the cycle on the wrong op ('ring0' -> 'ring0').
  GraphBuilder b;
  std::vector<TensorId> ring;
  for (int i = 0; i < 2000; ++i) ring.push_back(b.add_tensor(fmt_name("r", i), {1}, DType::f32, TensorKind::activation));
  for (int i = 0; i < 2000; ++i)
    b.add_op({.name = fmt_name("ring", i), .type = "Relu", .inputs = {ring[(i + 1999) % 2000]}, .outputs = {ring[i]}});
  TensorId last = b.add_tensor("x", {1}, DType::f32, TensorKind::data);
  for (int i = 0; i < 10; ++i) {
    TensorId next = b.add_tensor(fmt_name("c", i), {1}, DType::f32, TensorKind::activation);
    b.add_op({.name = fmt_name("chain", i), .type = "Relu", .inputs = {last}, .outputs = {next}});
    last = next;
  }
  try {
    (void)std::move(b).build();
    FAIL() << "a cycle was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    // A long cycle shows its first and last five ops (all 2,000 made a message of 20 KB).
    EXPECT_EQ(message,
              "the graph has a cycle of 2000 ops: 'ring1' -> 'ring2' -> 'ring3' -> 'ring4' -> 'ring5' -> ... -> 'ring1996' -> 'ring1997' -> "
              "'ring1998' -> 'ring1999' -> 'ring0' -> 'ring1'");
  }
}

TEST(GraphValidation, AnOpReadingItsOwnOutputIsACycleOfOne) {
  GraphBuilder b;
  TensorId t = b.add_tensor("t", {1}, DType::f32, TensorKind::activation);
  b.add_op({.name = "loop", .type = "Relu", .inputs = {t}, .outputs = {t}});
  try {
    (void)std::move(b).build();
    FAIL() << "a cycle was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("the graph has a cycle: 'loop' -> 'loop'"));
  }
}

TEST(GraphValidation, RejectsADanglingInput) {
  GraphBuilder b;
  TensorId orphan = b.add_tensor("orphan", {1}, DType::f32, TensorKind::activation);
  TensorId out = b.add_tensor("out", {1}, DType::f32, TensorKind::activation);
  b.add_op({.name = "reader", .type = "Relu", .inputs = {orphan}, .outputs = {out}});
  EXPECT_THROW(
      {
        try {
          (void)std::move(b).build();
        } catch (const Error& e) {
          EXPECT_THAT(e.what(), HasSubstr("'orphan'"));
          EXPECT_THAT(e.what(), HasSubstr("dangling"));
          throw;
        }
      },
      Error);
}

// Graph::tensor_accumulated: only a gradient an op produces, read by one op, not a graph output.
TEST(GraphValidation, AnAccumulatedTensorIsAPartialGradientWithOneReader) {
  auto build = [](TensorKind kind, int readers, bool output, bool produced) {
    GraphBuilder b;
    TensorId x = b.add_tensor("x", {1}, DType::f32, TensorKind::data);
    TensorId g = b.add_tensor("g", {1}, DType::f32, kind);
    if (produced) b.add_op({.name = "make", .type = "Relu", .inputs = {x}, .outputs = {g}});
    for (int r = 0; r < readers; ++r) {
      TensorId out = b.add_tensor("out" + std::to_string(r), {1}, DType::f32, TensorKind::activation);
      b.add_op({.name = "read" + std::to_string(r), .type = "Relu", .inputs = {g}, .outputs = {out}});
    }
    if (output) b.mark_output(g);
    b.set_tensor_accumulated(g);
    return std::move(b).build();
  };
  EXPECT_TRUE(build(TensorKind::gradient, 1, false, true).tensor_accumulated(1));
  EXPECT_FALSE(build(TensorKind::gradient, 1, false, true).tensor_accumulated(0));
  auto refused = [&](TensorKind kind, int readers, bool output, bool produced, const char* why) {
    try {
      (void)build(kind, readers, output, produced);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("tensor 'g' is marked accumulated"));
      EXPECT_THAT(e.what(), HasSubstr(why));
    }
  };
  refused(TensorKind::activation, 1, false, true, "it is not a gradient");
  refused(TensorKind::gradient, 2, false, true, "it is read by 2 ops, not one");
  refused(TensorKind::gradient, 0, false, true, "it is read by 0 ops, not one");
  refused(TensorKind::gradient, 1, true, true, "it is a graph output");
}

TEST(GraphValidation, RejectsNonPositiveDimensionNamingTheTensor) {
  GraphBuilder b;
  TensorId x = b.add_tensor("x", {4, 0}, DType::f32, TensorKind::data);
  TensorId y = b.add_tensor("y", {4}, DType::f32, TensorKind::activation);
  b.add_op({.name = "op", .type = "Relu", .inputs = {x}, .outputs = {y}});
  try {
    (void)std::move(b).build();
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'x'"));
    EXPECT_THAT(e.what(), HasSubstr("not positive"));
  }
}

TEST(GraphValidation, RejectsMissingDimension) {
  GraphBuilder b;
  b.add_tensor("x", {-1, 3}, DType::f32, TensorKind::data);
  EXPECT_THROW((void)std::move(b).build(), Error);
}

TEST(GraphValidation, RejectsSizeOverflowing64Bits) {
  GraphBuilder b;
  b.add_tensor("huge", {1LL << 40, 1LL << 30}, DType::f32, TensorKind::data);
  try {
    (void)std::move(b).build();
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'huge'"));
    EXPECT_THAT(e.what(), HasSubstr("overflows"));
  }
}

TEST(GraphValidation, RejectsTensorsTotallingMoreMemoryThanIsCounted) {
  // Each tensor fits in 64 bits (2^63 bytes), their sum does not: memory sums would wrap around and
  // a placement that cannot fit would look as if it did.
  GraphBuilder b;
  b.add_tensor("x1", {1LL << 61}, DType::f32, TensorKind::data);
  b.add_tensor("x2", {1LL << 61}, DType::f32, TensorKind::data);
  try {
    (void)std::move(b).build();
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("2^62 bytes"));
  }
  // Parameters count with the optimizer's copies of them: 2^59 bytes x (1 + 7) = 2^62 still fits,
  // x (1 + 8) does not.
  for (const std::uint32_t copies : {7u, 8u}) {
    GraphBuilder p;
    p.add_tensor("w", {1LL << 57}, DType::f32, TensorKind::parameter);
    p.set_optimizer_state_copies(copies);
    if (copies == 7) EXPECT_NO_THROW((void)std::move(p).build());
    else EXPECT_THROW((void)std::move(p).build(), Error);
  }
}

// Memory for a module path's ancestors grows with the square of its depth (a 100 KB name of 16,000
// levels took 1.8 GB): paths deeper than kMaxModuleDepth are refused, naming the op.
TEST(GraphValidation, RejectsAModulePathDeeperThanTheLimit) {
  for (const long depth : {kMaxModuleDepth, kMaxModuleDepth + 1}) {
    GraphBuilder b;
    std::string module = "m";
    for (long i = 1; i < depth; ++i) module += ".m";
    b.add_op({.name = "deep", .type = "Constant", .outputs = {b.add_tensor("t", {1}, DType::f32, TensorKind::activation)}, .module = module});
    if (depth == kMaxModuleDepth) EXPECT_NO_THROW((void)std::move(b).build());
    else EXPECT_THAT([&] { (void)std::move(b).build(); }, ::testing::ThrowsMessage<Error>(HasSubstr("op 'deep': its module path is 513 levels deep")));
  }
}

// Paths within the depth limit, distinct from the top, still hold their ancestors' names: 2,000 of
// 500 levels took 6 GB and 38 s to import (found by a fuzzing review). Past kMaxModulePathBytes
// of names they are refused, long before that.
TEST(GraphValidation, RejectsModulePathsHoldingTooManyBytesInAll) {
  GraphBuilder b;
  TensorId in = b.add_tensor("x", {1}, DType::f32, TensorKind::data);
  std::string tail;
  for (int level = 0; level < 500; ++level) tail += ".segment_" + std::to_string(level);
  for (int i = 0; i < 2000; ++i) {
    const TensorId out = b.add_tensor("y" + std::to_string(i), {1}, DType::f32, TensorKind::activation);
    std::string module = "top";
    module += std::to_string(i);
    module += tail;
    b.add_op({.name = "r" + std::to_string(i), .type = "Relu", .inputs = {in}, .outputs = {out}, .module = std::move(module)});
    in = out;
  }
  EXPECT_THAT([&] { (void)std::move(b).build(); }, ::testing::ThrowsMessage<Error>(HasSubstr("hold more than 64 MiB of names")));
}

// A backward op runs where its forward op runs: without one it silently followed the graph's first
// op, wherever the placement put its own (found by a review).
TEST(GraphValidation, ABackwardOpMustNameItsForwardOp) {
  GraphBuilder b;
  const TensorId x = b.add_tensor("x", {4}, DType::f32, TensorKind::data), y = b.add_tensor("y", {4}, DType::f32, TensorKind::activation);
  const TensorId g = b.add_tensor("g", {4}, DType::f32, TensorKind::gradient);
  b.add_op({.name = "f", .type = "Relu", .inputs = {x}, .outputs = {y}});
  b.add_op({.name = "loss", .type = "Loss", .inputs = {y}, .outputs = {g}, .role = OpRole::backward});
  b.set_num_forward_ops(1);
  EXPECT_THAT([&] { (void)std::move(b).build(); },
              ::testing::ThrowsMessage<Error>(HasSubstr("op 'loss': a backward op must name the forward op it differentiates")));
}

// An update runs where its parameter lives (found by a review): a param that is an activation or
// data has no home, one that no forward op reads has none either, and only update ops name one —
// each silently ran the update where the graph's first op ran.
TEST(GraphValidation, AnUpdateOpMustNameAParameterAForwardOpReads) {
  auto build = [](OpRole role, bool param_is_parameter, bool forward_reads_it) {
    GraphBuilder b;
    const TensorId x = b.add_tensor("x", {4}, DType::f32, TensorKind::data), y = b.add_tensor("y", {4}, DType::f32, TensorKind::activation);
    const TensorId w = b.add_tensor("w", {4}, DType::f32, TensorKind::parameter);
    b.add_op({.name = "f", .type = "Mul", .inputs = forward_reads_it ? std::vector<TensorId>{x, w} : std::vector<TensorId>{x, x}, .outputs = {y}});
    b.add_op({.name = "update/w", .type = "SGDUpdate", .inputs = {w}, .outputs = {}, .role = role,
              .forward_op = role == OpRole::backward ? OpId{0} : kNoId, .param = param_is_parameter ? w : y});
    b.set_num_forward_ops(1);
    return std::move(b).build();
  };
  const Graph ok = build(OpRole::update, true, true);
  EXPECT_EQ(ok.updated_param(1), ok.find_tensor("w"));
  EXPECT_THAT([&] { (void)build(OpRole::update, false, true); },
              ::testing::ThrowsMessage<Error>(HasSubstr("op 'update/w': its param 'y' is not a parameter (its kind: activation)")));
  EXPECT_THAT([&] { (void)build(OpRole::backward, true, true); },
              ::testing::ThrowsMessage<Error>(HasSubstr("op 'update/w': only update ops name the parameter they update")));
  EXPECT_THAT([&] { (void)build(OpRole::update, true, false); },
              ::testing::ThrowsMessage<Error>(HasSubstr("the parameter it updates, 'w', is read by no forward op")));
}

// Two update ops of one parameter applied the optimizer twice per step (found by a sweep of graph
// JSON files, 2026-11-28): an error naming both.
TEST(GraphValidation, AParameterHasOneUpdateOp) {
  GraphBuilder b;
  const TensorId x = b.add_tensor("x", {4}, DType::f32, TensorKind::data), y = b.add_tensor("y", {4}, DType::f32, TensorKind::activation);
  const TensorId w = b.add_tensor("w", {4}, DType::f32, TensorKind::parameter);
  b.add_op({.name = "f", .type = "Mul", .inputs = {x, w}, .outputs = {y}});
  b.add_op({.name = "update/w", .type = "SGDUpdate", .inputs = {w}, .outputs = {}, .role = OpRole::update, .param = w});
  b.add_op({.name = "update/w.again", .type = "SGDUpdate", .inputs = {w}, .outputs = {}, .role = OpRole::update, .param = w});
  b.set_num_forward_ops(1);
  EXPECT_THAT([&] { (void)std::move(b).build(); },
              ::testing::ThrowsMessage<Error>(HasSubstr("ops 'update/w' and 'update/w.again' both update parameter 'w'")));
}

// Optimizer state is kept for the parameters the step updates, not for one that no gradient
// reaches (PyTorch's optimizers keep none for a parameter without a gradient).
TEST(Graph, OptimizerStateIsKeptForUpdatedParametersOnly) {
  GraphBuilder b;
  const TensorId x = b.add_tensor("x", {4}, DType::f32, TensorKind::data), y = b.add_tensor("y", {4}, DType::f32, TensorKind::activation);
  const TensorId w = b.add_tensor("w", {4}, DType::f32, TensorKind::parameter), k = b.add_tensor("k", {100}, DType::f32, TensorKind::parameter);
  const TensorId m = b.add_tensor("m", {100}, DType::boolean, TensorKind::activation);
  b.add_op({.name = "f", .type = "Mul", .inputs = {x, w}, .outputs = {y}});
  b.add_op({.name = "cmp", .type = "Greater", .inputs = {k, k}, .outputs = {m}});
  b.add_op({.name = "update/w", .type = "AdamUpdate", .inputs = {w}, .outputs = {}, .role = OpRole::update, .param = w});
  b.set_num_forward_ops(2);
  b.set_optimizer_state_copies(2);
  const Graph g = std::move(b).build();
  EXPECT_EQ(g.optimizer_state_bytes(w), 2u * 16u);
  EXPECT_EQ(g.optimizer_state_bytes(k), 0u);
  EXPECT_EQ(g.optimizer_state_bytes(x), 0u);
}

// A parameter no op reads (an initializer read only through an Identity alias, which gets a tensor
// of its own) is neither trained nor placed: the totals leave it out, as the simulator does.
TEST(Graph, TotalsCountOnlyParametersSomeOpReads) {
  GraphBuilder b;
  const TensorId x = b.add_tensor("x", {8, 4}, DType::f32, TensorKind::data), y = b.add_tensor("y", {8, 2}, DType::f32, TensorKind::activation);
  const TensorId w = b.add_tensor("w", {4, 2}, DType::f32, TensorKind::parameter);
  b.add_tensor("w_original", {4, 2}, DType::f32, TensorKind::parameter);
  b.add_op({.name = "mm", .type = "MatMul", .inputs = {x, w}, .outputs = {y}});
  b.mark_output(y);
  const GraphTotals totals = graph_totals(std::move(b).build());
  EXPECT_EQ(totals.trainable_params, 8u);
  EXPECT_EQ(totals.param_bytes, 32u);
}

// An alias op with two outputs (an inference Dropout whose mask is read): the first output is a
// view of the input, the other a tensor of its own.
TEST(Graph, AnAliasOpsFirstOutputIsAViewWhateverItsOtherOutputs) {
  GraphBuilder b;
  const TensorId x = b.add_tensor("x", {4}, DType::f32, TensorKind::data), t = b.add_tensor("t", {4}, DType::f32, TensorKind::activation);
  const TensorId d = b.add_tensor("d", {4}, DType::f32, TensorKind::activation), mask = b.add_tensor("mask", {4}, DType::boolean, TensorKind::activation);
  b.add_op({.name = "A", .type = "Relu", .inputs = {x}, .outputs = {t}, .work = {4, 16, 16, OpClass::elementwise}});
  b.add_op({.name = "D", .type = "Dropout", .inputs = {t}, .outputs = {d, mask}, .work = {0, 0, 0, OpClass::alias}});
  b.mark_output(d), b.mark_output(mask);
  const Graph g = std::move(b).build();
  EXPECT_EQ(g.op_view_outputs(1), 1u);  // the data, not the mask
  EXPECT_EQ(g.op_view_outputs(0), 0u);
  EXPECT_TRUE(g.tensor_is_view(d));
  EXPECT_FALSE(g.tensor_is_view(mask));
  EXPECT_FALSE(g.tensor_is_view(t));
}

// An op priced as an alias whose output has more bytes than its input (an unknown op taken for an
// alias, a Reshape written wrong in graph JSON) has storage of its own: it took none (found by a
// fuzzing review: 16 GB fitted in 48 KiB).
TEST(GraphViews, AnAliasOfAnotherSizeIsNoView) {
  GraphBuilder b;
  const TensorId x = b.add_tensor("x", {4}, DType::f32, TensorKind::data), big = b.add_tensor("big", {4, 1000}, DType::f32, TensorKind::activation);
  const TensorId wide = b.add_tensor("wide", {4}, DType::f64, TensorKind::activation);
  b.add_op({.name = "grow", .type = "Custom", .inputs = {x}, .outputs = {big}, .work = {0, 0, 0, OpClass::alias}});
  b.add_op({.name = "cast", .type = "Identity", .inputs = {x}, .outputs = {wide}, .work = {0, 0, 0, OpClass::alias}});
  b.mark_output(big), b.mark_output(wide);
  const Graph g = std::move(b).build();
  EXPECT_EQ(g.op_view_outputs(0), 0u);
  EXPECT_EQ(g.op_view_outputs(1), 0u);
  EXPECT_FALSE(g.tensor_is_view(big));
}

// A Transpose is PyTorch's permute: a view with permuted strides. Squeeze and Unsqueeze keep the
// strides (views of it); a Reshape or Flatten of a permuted view copies it into row-major order
// (no view), and what views that copy is in order again. An identity permutation changes nothing.
TEST(GraphViews, ATransposeIsAPermutedViewThatAReshapeCopies) {
  GraphBuilder b;
  auto f32 = [&](const char* name, std::vector<std::int64_t> shape, TensorKind kind = TensorKind::activation) {
    return b.add_tensor(name, std::move(shape), DType::f32, kind);
  };
  const TensorId x = f32("x", {2, 3, 4}, TensorKind::data), w = f32("w", {3, 5}, TensorKind::parameter);
  const TensorId a = f32("a", {2, 3, 4}), t = f32("t", {2, 4, 3}), u = f32("u", {1, 2, 4, 3}), r = f32("r", {8, 3});
  const TensorId r2 = f32("r2", {24}), i = f32("i", {2, 3, 4}), ri = f32("ri", {6, 4}), wt = f32("wt", {5, 3});
  const OpWork alias{0, 0, 0, OpClass::alias}, copy{0, 96, 96, OpClass::data_movement};
  b.add_op({.name = "relu", .type = "Relu", .inputs = {x}, .outputs = {a}, .work = {24, 96, 96, OpClass::elementwise}});
  Attributes perm;
  perm.set(Attribute{.name = "perm", .kind = Attribute::Kind::integers, .ints = {0, 2, 1}});
  b.add_op({.name = "T", .type = "Transpose", .inputs = {a}, .outputs = {t}, .attrs = perm, .work = copy});
  b.add_op({.name = "U", .type = "Unsqueeze", .inputs = {t}, .outputs = {u}, .work = alias});
  b.add_op({.name = "R", .type = "Reshape", .inputs = {u}, .outputs = {r}, .work = alias});
  b.add_op({.name = "R2", .type = "Reshape", .inputs = {r}, .outputs = {r2}, .work = alias});
  Attributes same;
  same.set(Attribute{.name = "perm", .kind = Attribute::Kind::integers, .ints = {0, 1, 2}});
  b.add_op({.name = "I", .type = "Transpose", .inputs = {a}, .outputs = {i}, .attrs = same, .work = copy});
  b.add_op({.name = "RI", .type = "Reshape", .inputs = {i}, .outputs = {ri}, .work = alias});
  b.add_op({.name = "WT", .type = "Transpose", .inputs = {w}, .outputs = {wt}, .work = {0, 60, 60, OpClass::data_movement}});  // default perm: reversed
  for (TensorId out : {r2, ri, wt}) b.mark_output(out);
  const Graph g = std::move(b).build();
  EXPECT_TRUE(g.tensor_is_view(t));
  EXPECT_TRUE(g.tensor_is_view(u));
  EXPECT_FALSE(g.tensor_is_view(r));  // a copy
  EXPECT_TRUE(g.tensor_is_view(r2));  // of the copy, in order
  EXPECT_TRUE(g.tensor_is_view(i));
  EXPECT_TRUE(g.tensor_is_view(ri));  // the identity permutation keeps the order
  EXPECT_TRUE(g.tensor_is_view(wt));  // a weight's transpose takes no memory (x @ W.t())
}

// PyTorch's split returns views of parts of its input: a Split's outputs take no memory of their own.
// A part cut along the first dimension that is not 1 is in row-major order; one cut further in (an
// LSTM's gates, [B, 4H] along 1) is not, and a Reshape of it copies where PyTorch's `view` could not
// step through it (flattening across the cut), not where it could (splitting the cut dimension:
// attention heads of a fused QKV projection).
TEST(GraphViews, ASplitsOutputsAreViewsOfPartsOfItsInput) {
  GraphBuilder b;
  auto f32 = [&](const char* name, std::vector<std::int64_t> shape, TensorKind kind = TensorKind::activation) {
    return b.add_tensor(name, std::move(shape), DType::f32, kind);
  };
  const TensorId x = f32("x", {1, 4, 6}, TensorKind::data), a = f32("a", {1, 4, 6});
  const TensorId s0 = f32("s0", {1, 1, 6}), s1 = f32("s1", {1, 3, 6}), c0 = f32("c0", {1, 4, 2}), c1 = f32("c1", {1, 4, 4});
  const TensorId r0 = f32("r0", {6}), r1 = f32("r1", {16}), h1 = f32("h1", {1, 4, 2, 2});
  const OpWork alias{0, 0, 0, OpClass::alias};
  b.add_op({.name = "relu", .type = "Relu", .inputs = {x}, .outputs = {a}, .work = {24, 96, 96, OpClass::elementwise}});
  Attributes axis1, axis2;
  axis1.set(Attribute{.name = "axis", .kind = Attribute::Kind::integer, .i = 1});
  axis2.set(Attribute{.name = "axis", .kind = Attribute::Kind::integer, .i = 2});
  b.add_op({.name = "rows", .type = "Split", .inputs = {a}, .outputs = {s0, s1}, .attrs = axis1, .work = {0, 96, 96, OpClass::data_movement}});
  b.add_op({.name = "cols", .type = "Split", .inputs = {a}, .outputs = {c0, c1}, .attrs = axis2, .work = {0, 96, 96, OpClass::data_movement}});
  b.add_op({.name = "R0", .type = "Reshape", .inputs = {s0}, .outputs = {r0}, .work = alias});
  b.add_op({.name = "R1", .type = "Reshape", .inputs = {c1}, .outputs = {r1}, .work = alias});
  b.add_op({.name = "H1", .type = "Reshape", .inputs = {c1}, .outputs = {h1}, .work = alias});
  for (TensorId out : {s1, c0, r0, r1, h1}) b.mark_output(out);
  const Graph g = std::move(b).build();
  EXPECT_EQ(g.op_view_outputs(1), 3u);
  EXPECT_EQ(g.op_view_outputs(2), 3u);
  for (TensorId v : {s0, s1, c0, c1}) EXPECT_TRUE(g.tensor_is_view(v)) << g.tensor_name(v);
  EXPECT_TRUE(g.tensor_is_view(r0));   // rows of a [1, 4, 6]: in order
  EXPECT_TRUE(g.tensor_in_order(s1));
  EXPECT_FALSE(g.tensor_in_order(c1));
  EXPECT_FALSE(g.tensor_is_view(r1));  // columns flattened: a copy, in order
  EXPECT_TRUE(g.tensor_in_order(r1));
  EXPECT_TRUE(g.tensor_is_view(h1));   // columns split in two: a view, still out of order
  EXPECT_FALSE(g.tensor_in_order(h1));
}

TEST(GraphViews, DeclaredViewsOfTheFirstInput) {
  GraphBuilder b;
  const TensorId x = b.add_tensor("x", {2, 3}, DType::f32, TensorKind::data), y = b.add_tensor("y", {2, 3}, DType::f32, TensorKind::activation);
  const TensorId a = b.add_tensor("a", {6}, DType::f32, TensorKind::activation), c = b.add_tensor("c", {2, 3}, DType::f32, TensorKind::activation);
  b.add_op({.name = "R", .type = "Relu", .inputs = {x}, .outputs = {y}, .work = {6, 24, 24, OpClass::elementwise}});
  // A kernel whose second output shares y's storage (same elements and type, any shape).
  b.add_op({.name = "P", .type = "Pass", .inputs = {y}, .outputs = {c, a}, .work = {6, 24, 24, OpClass::elementwise}, .view_outputs = 2u});
  b.mark_output(c), b.mark_output(a);
  const Graph g = std::move(b).build();
  EXPECT_EQ(g.op_view_outputs(1), 2u);
  EXPECT_TRUE(g.tensor_is_view(a));
  EXPECT_FALSE(g.tensor_is_view(c));
}

TEST(GraphViews, RejectsViewsThatCannotShareStorage) {
  auto build = [](std::vector<std::int64_t> out_shape, DType out_type, std::uint32_t views, bool with_input) {
    GraphBuilder b;
    const TensorId x = b.add_tensor("x", {4}, DType::f32, TensorKind::data);
    const TensorId y = b.add_tensor("y", std::move(out_shape), out_type, TensorKind::activation);
    b.add_op({.name = "P", .type = "Pass", .inputs = {with_input ? x : kNoId}, .outputs = {y}, .work = {4, 16, 16, OpClass::elementwise},
              .view_outputs = views});
  };
  EXPECT_NO_THROW(build({2, 2}, DType::f32, 1u, true));
  EXPECT_NO_THROW(build({3}, DType::f32, 1u, true));  // a part of it (a Concat's gradient: a slice of dY)
  EXPECT_THAT([&] { build({5}, DType::f32, 1u, true); }, ThrowsMessage<Error>(HasSubstr("larger than that input or of another element type")));
  EXPECT_THAT([&] { build({4}, DType::f16, 1u, true); }, ThrowsMessage<Error>(HasSubstr("'y' a view of its input 'x'")));
  EXPECT_THAT([&] { build({4}, DType::f32, 2u, true); }, ThrowsMessage<Error>(HasSubstr("declares output 1 a view, but has 1 outputs")));
  EXPECT_THAT([&] { build({4}, DType::f32, 1u, false); }, ThrowsMessage<Error>(HasSubstr("has none")));
}

TEST(GraphValidation, RejectsTensorProducedTwice) {
  GraphBuilder b;
  TensorId t = b.add_tensor("t", {1}, DType::f32, TensorKind::activation);
  b.add_op({.name = "p1", .type = "Constant", .outputs = {t}});
  EXPECT_THROW(b.add_op({.name = "p2", .type = "Constant", .outputs = {t}}), Error);
}

TEST(GraphValidation, RejectsAnOpListingAnOutputTwice) {
  // Found by InputMutation (tests/sim): the message named the op being added before it existed.
  GraphBuilder b;
  TensorId t = b.add_tensor("t", {1}, DType::f32, TensorKind::activation);
  try {
    b.add_op({.name = "p", .type = "Constant", .outputs = {t, t}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("op 'p' lists output tensor 't' twice"));
  }
  // The op that threw left nothing behind: the tensor has no producer yet.
  EXPECT_EQ(b.add_op({.name = "q", .type = "Constant", .outputs = {t}}), 0u);
  EXPECT_EQ(std::move(b).build().producer(t), 0u);
}

// Which ids repeat an earlier one, by a scan for short lists and a hash set for long ones (a search
// per id was quadratic: an op of 200,000 inputs took 22 s to import, a QA pass); an op listing an
// output twice among many is refused as among few.
TEST(GraphValidation, RepeatedIdsAreFoundInShortAndLongLists) {
  for (const std::size_t n : {5u, 33u, 1000u}) {
    SCOPED_TRACE(n);
    std::vector<TensorId> ids(n);
    for (std::size_t i = 0; i < n; ++i) ids[i] = static_cast<TensorId>(i);
    ids[n - 1] = 2, ids[1] = kNoId, ids[3] = kNoId;
    const std::vector<bool> repeated = repeated_ids(ids);
    ASSERT_EQ(repeated.size(), n);
    for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(repeated[i], i == n - 1) << i;  // kNoId is never a repeat
  }
  GraphBuilder b;
  std::vector<TensorId> outs;
  for (int i = 0; i < 100; ++i) outs.push_back(b.add_tensor("t" + std::to_string(i), {1}, DType::f32, TensorKind::activation));
  outs.push_back(outs[40]);
  EXPECT_THAT([&] { b.add_op({.name = "p", .type = "Split", .outputs = outs}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("op 'p' lists output tensor 't40' twice")));
}

TEST(GraphValidation, RejectsDuplicateTensorName) {
  GraphBuilder b;
  b.add_tensor("t", {1}, DType::f32, TensorKind::data);
  EXPECT_THROW(b.add_tensor("t", {1}, DType::f32, TensorKind::data), Error);
}

TEST(GraphScale, BuildsAMillionOpChain) {
  GraphBuilder b;
  const std::size_t n = 1'000'000;
  TensorId prev = b.add_tensor("t0", {16}, DType::f32, TensorKind::data);
  for (std::size_t i = 1; i <= n; ++i) {
    const std::string index = std::to_string(i);
    TensorId next = b.add_tensor(std::string("t").append(index), {16}, DType::f32, TensorKind::activation);
    b.add_op({.name = std::string("op").append(index), .type = "Relu", .inputs = {prev}, .outputs = {next}});
    prev = next;
  }
  Graph g = std::move(b).build();
  EXPECT_EQ(g.num_ops(), n);
  EXPECT_EQ(g.topological_order().back(), n - 1);
}

}  // namespace
}  // namespace placer
