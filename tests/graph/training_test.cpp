#include "placer/graph/training.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "placer/util/error.hpp"

namespace placer {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

std::vector<TensorDesc> descs(GraphBuilder& b, std::initializer_list<TensorId> ids) {
  std::vector<TensorDesc> out;
  for (TensorId t : ids) out.push_back({b.tensor_shape(t), b.tensor_dtype(t), true});
  return out;
}

// x[4,8] -> MatMul W1[8,16] -> Add b1[16] -> Relu -> MatMul W2[16,2] -> y[4,2]
Graph tiny_mlp() {
  GraphBuilder b("mlp");
  TensorId x = b.add_tensor("x", {4, 8}, DType::f32, TensorKind::data);
  TensorId w1 = b.add_tensor("fc1.weight", {8, 16}, DType::f32, TensorKind::parameter);
  TensorId b1 = b.add_tensor("fc1.bias", {16}, DType::f32, TensorKind::parameter);
  TensorId w2 = b.add_tensor("fc2.weight", {16, 2}, DType::f32, TensorKind::parameter);
  TensorId h = b.add_tensor("h", {4, 16}, DType::f32, TensorKind::activation);
  TensorId a = b.add_tensor("a", {4, 16}, DType::f32, TensorKind::activation);
  TensorId r = b.add_tensor("r", {4, 16}, DType::f32, TensorKind::activation);
  TensorId y = b.add_tensor("y", {4, 2}, DType::f32, TensorKind::activation);
  auto add = [&](std::string name, std::string type, std::vector<TensorId> in, TensorId out, std::string module) {
    std::vector<TensorDesc> ins;
    for (TensorId t : in) ins.push_back({b.tensor_shape(t), b.tensor_dtype(t), true});
    OpSpec spec{.name = name, .type = type, .inputs = in, .outputs = {out}, .module = module};
    spec.work = op_work(type, {}, ins, descs(b, {out}));
    b.add_op(std::move(spec));
  };
  add("/fc1/MatMul", "MatMul", {x, w1}, h, "fc1");
  add("/fc1/Add", "Add", {h, b1}, a, "fc1");
  add("/Relu", "Relu", {a}, r, "");
  add("/fc2/MatMul", "MatMul", {r, w2}, y, "fc2");
  b.mark_output(y);
  return std::move(b).build();
}

OpId find(const Graph& g, const std::string& name) {
  OpId o = g.find_op(name);
  EXPECT_NE(o, kNoId) << name;
  return o;
}

// One MatMul of data x by parameter w into y; `output`: the graph's output, if any.
Graph one_matmul(const std::string& name, std::optional<std::string> output) {
  GraphBuilder b(name);
  TensorId x = b.add_tensor("x", {4, 8}, DType::f32, TensorKind::data);
  TensorId w = b.add_tensor("w", {8, 2}, DType::f32, TensorKind::parameter);
  TensorId y = b.add_tensor("y", {4, 2}, DType::f32, TensorKind::activation);
  OpSpec spec{.name = "mm", .type = "MatMul", .inputs = {x, w}, .outputs = {y}};
  spec.work = op_work("MatMul", {}, descs(b, {x, w}), descs(b, {y}));
  b.add_op(std::move(spec));
  if (output) b.mark_output(b.find_tensor(*output));
  return std::move(b).build();
}

// Two Einsums of 52 operands of [723,700] elements each: each op's work is finite, forward
// (1.04e308 FLOPs in all) and backward (one product per operand, 1.35e308 each) alike, but the
// step's sum is not: every total printed from it was "inf". Deriving it is refused now (the
// forward graph alone passes).
TEST(TrainingStep, WorkSummingPastADoubleIsRefused) {
  GraphBuilder b("big");
  TensorId x = b.add_tensor("x", {723700}, DType::f32, TensorKind::parameter);
  const std::string letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string eq;
  for (char c : letters) eq += (eq.empty() ? "" : ",") + std::string(1, c);
  Attributes attrs;
  Attribute equation{.name = "equation", .kind = Attribute::Kind::text};
  equation.s = eq + "->";
  attrs.set(equation);
  for (const char* name : {"e1", "e2"}) {
    TensorId y = b.add_tensor(std::string(name) + "_y", {}, DType::f32, TensorKind::activation);
    OpSpec spec{.name = name, .type = "Einsum", .inputs = std::vector<TensorId>(letters.size(), x), .outputs = {y}, .attrs = attrs};
    const std::vector<TensorDesc> ins(letters.size(), TensorDesc{b.tensor_shape(x), DType::f32, true});
    spec.work = op_work("Einsum", attrs, ins, descs(b, {y}));
    b.add_op(std::move(spec));
    b.mark_output(y);
  }
  const Graph fwd = std::move(b).build();
  EXPECT_EQ(work_sum_overflow(fwd), "");
  EXPECT_THAT([&] { (void)derive_training_step(fwd, Optimizer::sgd); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("the training step of graph 'big': its ops' FLOPs or bytes sum past what a double holds")));
}

TEST(TrainingStep, AGraphWithoutOutputsHasNothingToTrainAndSaysSo) {
  const Graph fwd = one_matmul("no-outputs", std::nullopt);
  EXPECT_THAT([&] { derive_training_step(fwd, Optimizer::sgd); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("no outputs to put a loss on")));
}

// Found by fuzzing: a model whose only output is its data input (or is reached from the
// parameters only through ops without a gradient) gave a "training step" of forward ops alone.
TEST(TrainingStep, OutputsThatCarryNoGradientHaveNothingToTrainAndSaySo) {
  const Graph fwd = one_matmul("output-is-input", "x");
  EXPECT_THAT([&] { derive_training_step(fwd, Optimizer::sgd); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("none of its outputs ('x') is computed from its parameters")));
  EXPECT_NO_THROW(derive_training_step(one_matmul("output-is-y", "y"), Optimizer::sgd));
}

TEST(TrainingStep, KeepsForwardOpsAndAddsLossBackwardAndUpdates) {
  Graph fwd = tiny_mlp();
  Graph step = derive_training_step(fwd, Optimizer::sgd);
  EXPECT_EQ(step.num_forward_ops(), 4u);
  // 4 forward + 1 loss + 4 gradients + 3 updates.
  EXPECT_EQ(step.num_ops(), 12u);
  for (OpId o = 0; o < 4; ++o) EXPECT_EQ(step.op_name(o), fwd.op_name(o));
  EXPECT_EQ(step.op_role(find(step, "loss/y")), OpRole::backward);
  EXPECT_EQ(step.op_role(find(step, "update/fc1.weight")), OpRole::update);
}

TEST(TrainingStep, GradientOpsRecordTheirForwardOpAndModule) {
  Graph step = derive_training_step(tiny_mlp(), Optimizer::sgd);
  OpId g = find(step, "/fc2/MatMul/grad");
  EXPECT_EQ(step.forward_op(g), find(step, "/fc2/MatMul"));
  EXPECT_EQ(step.module_name(step.op_module(g)), "fc2");
  EXPECT_EQ(step.op_type(g), "MatMulGrad");
}

TEST(TrainingStep, DependenciesAreReversed) {
  Graph step = derive_training_step(tiny_mlp(), Optimizer::sgd);
  // The gradient of fc2 needs the loss gradient and fc2's saved input (the Relu output).
  EXPECT_THAT(step.predecessors(find(step, "/fc2/MatMul/grad")),
              UnorderedElementsAre(find(step, "/Relu"), find(step, "loss/y")));
  // The gradient of Relu runs after the gradient of fc2.
  EXPECT_THAT(step.predecessors(find(step, "/Relu/grad")),
              ::testing::Contains(find(step, "/fc2/MatMul/grad")));
}

TEST(TrainingStep, MatmulGradientCostsOneForwardPerOperandNeedingIt) {
  Graph step = derive_training_step(tiny_mlp(), Optimizer::sgd);
  // fc2: data and weight gradients, 2 x (2*4*16*2) FLOPs.
  EXPECT_DOUBLE_EQ(step.op_work(find(step, "/fc2/MatMul/grad")).flops, 2.0 * 256.0);
  // fc1: its input is data, so only the weight gradient: 1 x (2*4*8*16).
  EXPECT_DOUBLE_EQ(step.op_work(find(step, "/fc1/MatMul/grad")).flops, 1024.0);
  OpId g1 = find(step, "/fc1/MatMul/grad");
  ASSERT_EQ(step.op_outputs(g1).size(), 1u);  // no gradient for the data input
  EXPECT_EQ(step.tensor_name(step.op_outputs(g1)[0]), "grad/fc1.weight//fc1/MatMul");
}

TEST(TrainingStep, UpdatesLiveWithTheirParameterAndSizeOptimizerState) {
  Graph sgd = derive_training_step(tiny_mlp(), Optimizer::sgd);
  OpId u = find(sgd, "update/fc1.weight");
  EXPECT_EQ(sgd.updated_param(u), sgd.find_tensor("fc1.weight"));
  EXPECT_EQ(sgd.module_name(sgd.op_module(u)), "fc1");
  EXPECT_DOUBLE_EQ(sgd.op_work(u).flops, 2.0 * 128.0);
  EXPECT_EQ(sgd.op_work(u).op_class, OpClass::optimizer);
  EXPECT_EQ(sgd.optimizer_state_copies(), 0u);
  EXPECT_EQ(derive_training_step(tiny_mlp(), Optimizer::momentum).optimizer_state_copies(), 1u);
  Graph adam = derive_training_step(tiny_mlp(), Optimizer::adam);
  EXPECT_EQ(adam.optimizer_state_copies(), 2u);
  EXPECT_EQ(adam.op_type(find(adam, "update/fc1.weight")), "AdamUpdate");
}

TEST(TrainingStep, SharedWeightGradientsAreSummedByItsUpdate) {
  // One weight used by two MatMuls (an unrolled recurrent cell).
  GraphBuilder b;
  TensorId x = b.add_tensor("x", {2, 3}, DType::f32, TensorKind::data);
  TensorId w = b.add_tensor("w", {3, 3}, DType::f32, TensorKind::parameter);
  TensorId y = b.add_tensor("y", {2, 3}, DType::f32, TensorKind::activation);
  TensorId z = b.add_tensor("z", {2, 3}, DType::f32, TensorKind::activation);
  auto work = [&](TensorId a, TensorId out) {
    return op_work("MatMul", {}, descs(b, {a, w}), descs(b, {out}));
  };
  b.add_op({.name = "step0", .type = "MatMul", .inputs = {x, w}, .outputs = {y}, .work = work(x, y)});
  b.add_op({.name = "step1", .type = "MatMul", .inputs = {y, w}, .outputs = {z}, .work = work(y, z)});
  b.mark_output(z);
  Graph step = derive_training_step(std::move(b).build(), Optimizer::sgd);
  OpId u = find(step, "update/w");
  EXPECT_EQ(step.op_inputs(u).size(), 3u);  // the weight and two partial gradients
  EXPECT_DOUBLE_EQ(step.op_work(u).flops, (2.0 + 1.0) * 9.0);
  // AccumulateGrad adds the second partial into the first as it arrives: only it is marked.
  EXPECT_FALSE(step.tensor_accumulated(step.op_inputs(u)[1]));
  EXPECT_TRUE(step.tensor_accumulated(step.op_inputs(u)[2]));
  // Nothing else is: every other tensor has one partial.
  for (TensorId t = 0; t < step.num_tensors(); ++t)
    if (step.tensor_accumulated(t)) {
      EXPECT_EQ(t, step.op_inputs(u)[2]) << step.tensor_name(t);
    }
}

// BatchNorm's running statistics (its training-mode form's outputs 1 and 2) are side outputs: as
// graph outputs they get no loss, and they carry no gradient into the norm (the executor detaches
// them; the step gave them a loss the executor never ran).
TEST(TrainingStep, BatchNormsRunningStatisticsCarryNoGradient) {
  GraphBuilder b;
  TensorId x = b.add_tensor("x", {4, 3, 2, 2}, DType::f32, TensorKind::data);
  TensorId scale = b.add_tensor("scale", {3}, DType::f32, TensorKind::parameter);
  TensorId bias = b.add_tensor("bias", {3}, DType::f32, TensorKind::parameter);
  TensorId mean = b.add_tensor("mean", {3}, DType::f32, TensorKind::buffer);
  TensorId var = b.add_tensor("var", {3}, DType::f32, TensorKind::buffer);
  TensorId y = b.add_tensor("y", {4, 3, 2, 2}, DType::f32, TensorKind::activation);
  TensorId rm = b.add_tensor("rm", {3}, DType::f32, TensorKind::activation);
  TensorId rv = b.add_tensor("rv", {3}, DType::f32, TensorKind::activation);
  b.add_op({.name = "bn", .type = "BatchNormalization", .inputs = {x, scale, bias, mean, var}, .outputs = {y, rm, rv},
            .work = op_work("BatchNormalization", {}, descs(b, {x, scale, bias, mean, var}), descs(b, {y, rm, rv}))});
  b.mark_output(y);
  b.mark_output(rm);
  b.mark_output(rv);
  Graph step = derive_training_step(std::move(b).build(), Optimizer::sgd);
  std::vector<std::string> losses;
  for (OpId o = 0; o < step.num_ops(); ++o)
    if (step.op_type(o) == "Loss") losses.push_back(step.op_name(o));
  EXPECT_THAT(losses, ::testing::ElementsAre("loss/y"));
}

TEST(TrainingStep, SavedActivationsFeedTheirGradient) {
  Graph step = derive_training_step(tiny_mlp(), Optimizer::sgd);
  // Relu's output stays alive until the gradients that read it have run.
  std::vector<std::string> readers;
  for (OpId c : step.consumers(step.find_tensor("r"))) readers.push_back(step.op_name(c));
  EXPECT_THAT(readers, ::testing::Contains("/fc2/MatMul/grad"));
}

// Found by a review of the rules against op-rules.md:
// - Div's gradient reads A and B whichever needs the gradient (dB = -dY·A/B² needs B);
// - an op reading one tensor twice (Mul(x, x)) reads it once and writes one gradient;
// - TopK's gradient reads its Indices, not its Values; training Dropout's its mask, not Y;
// - summing the partial gradients of an alias's output (a Reshape read twice) is a kernel.
namespace {
struct StepOf {
  GraphBuilder b{"g"};
  TensorId tensor(const std::string& name, std::vector<std::int64_t> shape, TensorKind kind = TensorKind::activation,
                  DType dtype = DType::f32) {
    return b.add_tensor(name, std::move(shape), dtype, kind);
  }
  void op(const std::string& name, const std::string& type, std::vector<TensorId> in, std::vector<TensorId> out, Attributes attrs = {}) {
    std::vector<TensorDesc> ins, outs;
    for (TensorId t : in) ins.push_back({b.tensor_shape(t), b.tensor_dtype(t), true});
    for (TensorId t : out) outs.push_back({b.tensor_shape(t), b.tensor_dtype(t), true});
    OpSpec spec{.name = name, .type = type, .inputs = in, .outputs = out, .attrs = attrs};
    spec.work = op_work(type, attrs, ins, outs);
    b.add_op(std::move(spec));
  }
  Graph step(std::vector<TensorId> outputs) {
    for (TensorId t : outputs) b.mark_output(t);
    return derive_training_step(std::move(b).build(), Optimizer::sgd);
  }
};
const OpWork& work_of(const Graph& g, const std::string& op) { return g.op_work(g.find_op(op)); }
}  // namespace

// A max pool's gradient reads the argmax of each window, PyTorch's int64 indices: an output the
// step adds to the forward op (or the node's ONNX Indices output), not Y; the work as before. In
// inference, or when no gradient reaches the pool's input, no indices.
TEST(TrainingStep, MaxPoolKeepsInt64IndicesForItsGradient) {
  auto pooled = [](bool indices_output, bool trained_input) {
    StepOf s;
    const TensorId x = s.tensor("x", {2, 3, 8, 8}, TensorKind::data), w = s.tensor("w", {4, 3, 3, 3}, TensorKind::parameter);
    const TensorId c = s.tensor("c", {2, 4, 6, 6}), y = s.tensor("y", {2, 4, 3, 3}), r = s.tensor("r", {2, 4, 3, 3});
    Attributes pool;
    pool.set(Attribute{.name = "kernel_shape", .kind = Attribute::Kind::integers, .ints = {2, 2}});
    pool.set(Attribute{.name = "strides", .kind = Attribute::Kind::integers, .ints = {2, 2}});
    s.op("conv", "Conv", {x, w}, {c});
    std::vector<TensorId> outs{y};
    if (indices_output) outs.push_back(s.tensor("i", {2, 4, 3, 3}, TensorKind::activation, DType::i64));
    s.op("pool", "MaxPool", {trained_input ? c : x}, outs, pool);
    s.op("relu", "Relu", {y}, {r});
    if (!trained_input) s.op("mul", "Mul", {r, s.tensor("p", {2, 4, 3, 3}, TensorKind::parameter)}, {s.tensor("m", {2, 4, 3, 3})});
    return s.step({trained_input ? r : s.b.find_tensor("m")});
  };
  const Graph step = pooled(false, true);
  const OpId pool = step.find_op("pool"), grad = step.find_op("pool/grad");
  ASSERT_EQ(step.op_outputs(pool).size(), 2u);
  const TensorId indices = step.op_outputs(pool)[1];
  EXPECT_EQ(step.tensor_name(indices), "y/indices");
  EXPECT_EQ(step.tensor_dtype(indices), DType::i64);
  EXPECT_EQ(step.tensor_bytes(indices), 2 * step.tensor_bytes(step.find_tensor("y")));
  auto reads = [&](const Graph& g, OpId op, TensorId t) {
    const auto ins = g.op_inputs(op);
    return std::find(ins.begin(), ins.end(), t) != ins.end();
  };
  EXPECT_TRUE(reads(step, grad, indices));
  EXPECT_TRUE(reads(step, grad, step.find_tensor("c"))) << "and its input";
  EXPECT_FALSE(reads(step, grad, step.find_tensor("y"))) << "not Y";
  // The ONNX Indices output, when the node has one, is what the gradient reads.
  const Graph declared = pooled(true, true);
  EXPECT_EQ(declared.op_outputs(declared.find_op("pool")).size(), 2u);
  EXPECT_TRUE(reads(declared, declared.find_op("pool/grad"), declared.find_tensor("i")));
  // A pool of data, which no gradient reaches, keeps none.
  const Graph data = pooled(false, false);
  EXPECT_EQ(data.op_outputs(data.find_op("pool")).size(), 1u);
}

// A recurrent op's gradient reads every time step's state, PyTorch's per-step gate activations,
// cell and hidden states (recurrent_saved_steps: LSTM 7, GRU 7, RNN 1 tensors of [seq, batch,
// hidden] per direction): an output the step adds after the node's own, instead of its outputs.
TEST(TrainingStep, RecurrentOpsKeepEveryStepsStateForTheirGradient) {
  for (const auto& [cell, gates, kept] : {std::tuple{"LSTM", 4, 7}, std::tuple{"GRU", 3, 7}, std::tuple{"RNN", 1, 1}}) {
    SCOPED_TRACE(cell);
    StepOf s;
    constexpr std::int64_t kSeq = 5, kBatch = 3, kInput = 4, kHidden = 6, kDirs = 2;
    const TensorId x = s.tensor("x", {kSeq, kBatch, kInput}, TensorKind::data);
    const TensorId w = s.tensor("W", {kDirs, gates * kHidden, kInput}, TensorKind::parameter);
    const TensorId r = s.tensor("R", {kDirs, gates * kHidden, kHidden}, TensorKind::parameter);
    const TensorId y = s.tensor("Y", {kSeq, kDirs, kBatch, kHidden}), h = s.tensor("Y_h", {kDirs, kBatch, kHidden});
    Attributes attrs;
    attrs.set(Attribute{.name = "hidden_size", .kind = Attribute::Kind::integer, .i = kHidden});
    attrs.set(Attribute{.name = "direction", .kind = Attribute::Kind::text, .s = "bidirectional"});
    s.op("rnn", cell, {x, w, r}, {y, h}, attrs);
    const Graph step = s.step({y});
    const OpId op = step.find_op("rnn"), grad = step.find_op("rnn/grad");
    const auto outs = step.op_outputs(op);
    ASSERT_EQ(outs.size(), 3u);
    const TensorId state = outs[2];
    EXPECT_EQ(step.tensor_name(state), "rnn/state");
    EXPECT_EQ(step.tensor_elements(state), static_cast<std::uint64_t>(kept * kDirs * kSeq * kBatch * kHidden));
    const auto ins = step.op_inputs(grad);
    EXPECT_NE(std::find(ins.begin(), ins.end(), state), ins.end()) << "the gradient reads the state";
    EXPECT_EQ(std::find(ins.begin(), ins.end(), y), ins.end()) << "not Y";
    EXPECT_EQ(std::find(ins.begin(), ins.end(), h), ins.end()) << "nor Y_h";
    EXPECT_NE(std::find(ins.begin(), ins.end(), x), ins.end()) << "its input, for the weights' gradients";
  }
}

// PyTorch's expand is a view: no storage of its own, stride 0 where it broadcasts (out of
// row-major order), larger than what it views; the training step keeps it a view.
TEST(TrainingStep, AnExpandIsAViewOfItsInput) {
  StepOf s;
  const TensorId x = s.tensor("x", {4, 1, 8}, TensorKind::data), p = s.tensor("p", {4, 1, 8}, TensorKind::parameter);
  const TensorId m = s.tensor("m", {4, 1, 8}), shape = s.tensor("shape", {3}, TensorKind::constant, DType::i64);
  const TensorId e = s.tensor("e", {4, 5, 8}), y = s.tensor("y", {4, 5, 8});
  s.op("mul", "Mul", {x, p}, {m});
  s.op("expand", "Expand", {m, shape}, {e});
  s.op("relu", "Relu", {e}, {y});
  const Graph step = s.step({y});
  EXPECT_TRUE(step.tensor_is_view(step.find_tensor("e")));
  EXPECT_FALSE(step.tensor_in_order(step.find_tensor("e")));
  EXPECT_FALSE(step.tensor_is_view(step.find_tensor("m")));
}

// PyTorch's einsum copies an operand its batched product cannot view in order, and the product
// keeps the copy for the other operand's gradient: an output the step adds ("<op>/copies"), which
// the gradient reads instead of the operand (einsum_layout). The output is the product's storage,
// [b, h, q, d] here, viewed as [b, q, h, d]: not in order, so the Reshape after it copies.
TEST(TrainingStep, AnEinsumKeepsTheOperandsItCopiedAndGivesItsOutputInTheProductsOrder) {
  StepOf s;
  Attributes eq;
  eq.set(Attribute{.name = "equation", .kind = Attribute::Kind::text, .s = "bhqk,bkhd->bqhd"});
  const TensorId x = s.tensor("x", {2, 3, 5, 6}, TensorKind::data), p = s.tensor("p", {6}, TensorKind::parameter);
  const TensorId v = s.tensor("v", {2, 6, 3, 4}, TensorKind::parameter), shape = s.tensor("shape", {3}, TensorKind::constant, DType::i64);
  const TensorId a = s.tensor("a", {2, 3, 5, 6}), o = s.tensor("o", {2, 5, 3, 4}), y = s.tensor("y", {2, 5, 12});
  s.op("mul", "Mul", {x, p}, {a});
  s.op("einsum", "Einsum", {a, v}, {o}, eq);
  s.op("reshape", "Reshape", {o, shape}, {y});
  const Graph step = s.step({y});
  const OpId einsum = step.find_op("einsum"), grad = step.find_op("einsum/grad");
  const TensorId copies = step.find_tensor("einsum/copies");
  ASSERT_NE(copies, kNoId);
  EXPECT_THAT(step.op_outputs(einsum), ElementsAre(o, copies));
  EXPECT_EQ(step.tensor_elements(copies), 2u * 6 * 3 * 4) << "V's copy (a's is a view)";
  const auto reads = step.op_inputs(grad);
  EXPECT_TRUE(std::ranges::find(reads, copies) != reads.end());
  EXPECT_TRUE(std::ranges::find(reads, v) == reads.end()) << "the copy instead of V";
  EXPECT_TRUE(std::ranges::find(reads, a) != reads.end()) << "a itself, for V's gradient";
  EXPECT_FALSE(step.tensor_in_order(o));
  EXPECT_EQ(step.tensor_strides(o), (std::vector<std::int64_t>{60, 4, 20, 1}));
  EXPECT_FALSE(step.tensor_is_view(y)) << "a Reshape of [b, q, h, d] viewing [b, h, q, d] copies";
  EXPECT_FALSE(step.tensor_in_order(step.find_tensor("grad/v/einsum"))) << "V's gradient comes in the product's order";
  EXPECT_TRUE(step.tensor_in_order(step.find_tensor("grad/a/einsum")));
}

// libtorch's matmul copies the heads of attention, [B, T, H, d] viewed as [B, H, T, d], to multiply
// them (matmul_layout), and keeps the copies for the gradients: Q's for K's and Kᵀ's for Q's.
TEST(TrainingStep, AMatMulKeepsTheOperandsItCopied) {
  StepOf s;
  Attributes heads, swap;
  heads.set(Attribute{.name = "perm", .kind = Attribute::Kind::integers, .ints = {0, 2, 1, 3}});
  swap.set(Attribute{.name = "perm", .kind = Attribute::Kind::integers, .ints = {0, 1, 3, 2}});
  const TensorId x = s.tensor("x", {2, 5, 3, 4}, TensorKind::data), p = s.tensor("p", {4}, TensorKind::parameter);
  const TensorId m = s.tensor("m", {2, 5, 3, 4}), q = s.tensor("q", {2, 3, 5, 4}), kt = s.tensor("kt", {2, 3, 4, 5});
  const TensorId y = s.tensor("y", {2, 3, 5, 5});
  s.op("mul", "Mul", {x, p}, {m});
  s.op("heads", "Transpose", {m}, {q}, heads);
  s.op("swap", "Transpose", {q}, {kt}, swap);
  s.op("scores", "MatMul", {q, kt}, {y});
  const Graph step = s.step({y});
  const TensorId copies = step.find_tensor("scores/copies");
  ASSERT_NE(copies, kNoId);
  EXPECT_EQ(step.tensor_elements(copies), 2u * 120);
  const auto reads = step.op_inputs(step.find_op("scores/grad"));
  EXPECT_TRUE(std::ranges::find(reads, copies) != reads.end());
  EXPECT_TRUE(std::ranges::find(reads, q) == reads.end() && std::ranges::find(reads, kt) == reads.end());
}

// A sum's gradient is dY broadcast back to the input's shape (PyTorch's sum_backward: an expand):
// a view of dY, no kernel, not in row-major order. A one-operand Einsum's likewise.
TEST(TrainingStep, ASumsGradientIsABroadcastViewOfTheIncomingOne) {
  StepOf s;
  Attributes keep;
  keep.set(Attribute{.name = "keepdims", .kind = Attribute::Kind::integer, .i = 0});
  Attributes eq;
  eq.set(Attribute{.name = "equation", .kind = Attribute::Kind::text, .s = "ij->i"});
  const TensorId x = s.tensor("x", {16, 32}, TensorKind::data), p = s.tensor("p", {32}, TensorKind::parameter);
  const TensorId axes = s.tensor("axes", {1}, TensorKind::constant, DType::i64);
  const TensorId m = s.tensor("m", {16, 32}), n = s.tensor("n", {16, 32}), r = s.tensor("r", {16}), e = s.tensor("e", {16}), y = s.tensor("y", {16});
  s.op("mul", "Mul", {x, p}, {m});
  s.op("neg", "Neg", {m}, {n});
  s.op("sum", "ReduceSum", {m, axes}, {r}, keep);
  s.op("einsum", "Einsum", {n}, {e}, eq);
  s.op("add", "Add", {r, e}, {y});
  const Graph step = s.step({y});
  for (const char* name : {"grad/m/sum", "grad/n/einsum"}) {
    SCOPED_TRACE(name);
    const TensorId g = step.find_tensor(name);
    ASSERT_NE(g, kNoId);
    EXPECT_TRUE(step.tensor_is_view(g));
    EXPECT_FALSE(step.tensor_in_order(g));
    EXPECT_EQ(step.tensor_strides(g), (std::vector<std::int64_t>{1, 0}));
    EXPECT_EQ(step.op_work(step.producer(g)).bytes_written, 0.0);
  }
  // A one-operand Einsum that sums and permutes: dY [4, 3] broadcast and permuted back to [2, 3, 4].
  StepOf q;
  Attributes bij;
  bij.set(Attribute{.name = "equation", .kind = Attribute::Kind::text, .s = "bij->ji"});
  const TensorId px = q.tensor("x", {2, 3, 4}, TensorKind::data), pw = q.tensor("p", {4}, TensorKind::parameter);
  const TensorId pm = q.tensor("m", {2, 3, 4}), py = q.tensor("y", {4, 3});
  q.op("mul", "Mul", {px, pw}, {pm});
  q.op("einsum", "Einsum", {pm}, {py}, bij);
  const Graph permuted = q.step({py});
  const TensorId pg = permuted.find_tensor("grad/m/einsum");
  EXPECT_TRUE(permuted.tensor_is_view(pg));
  EXPECT_EQ(permuted.tensor_strides(pg), (std::vector<std::int64_t>{0, 1, 3}));
  // A graph JSON may declare such a view; one that is no broadcast of its input is refused.
  GraphBuilder b("bad");
  const TensorId small = b.add_tensor("small", {16}, DType::f32, TensorKind::data);
  const TensorId wide = b.add_tensor("wide", {2, 16}, DType::f32, TensorKind::activation);
  const TensorId odd = b.add_tensor("odd", {5, 7}, DType::f32, TensorKind::activation);
  EXPECT_NO_THROW(b.add_op({.name = "broadcast", .type = "Custom", .inputs = {small}, .outputs = {wide}, .view_outputs = 1u}));
  EXPECT_THROW(b.add_op({.name = "no_broadcast", .type = "Custom", .inputs = {small}, .outputs = {odd}, .view_outputs = 1u}), Error);
}

// An op PyTorch runs as a formula keeps some of its intermediates for the gradient: Softsign's
// 1 + |x|, LRN's padded squares and two tensors of its input's size: an output `<op>/kept` of the
// forward op that the gradient reads; none in inference or when no gradient reaches the op.
TEST(TrainingStep, FormulaOpsKeepTheirIntermediatesForTheGradient) {
  Attributes lrn;
  lrn.set(Attribute{.name = "size", .kind = Attribute::Kind::integer, .i = 5});
  StepOf s;
  const TensorId x = s.tensor("x", {2, 8, 4, 4}, TensorKind::data), p = s.tensor("p", {4}, TensorKind::parameter);
  const TensorId m = s.tensor("m", {2, 8, 4, 4}), a = s.tensor("a", {2, 8, 4, 4}), y = s.tensor("y", {2, 8, 4, 4});
  s.op("mul", "Mul", {x, p}, {m});
  s.op("softsign", "Softsign", {m}, {a});
  s.op("lrn", "LRN", {a}, {y}, lrn);
  const Graph step = s.step({y});
  const TensorId soft = step.find_tensor("softsign/kept"), norm = step.find_tensor("lrn/kept");
  ASSERT_NE(soft, kNoId);
  ASSERT_NE(norm, kNoId);
  EXPECT_EQ(step.tensor_elements(soft), 256u);
  EXPECT_EQ(step.tensor_elements(norm), 2u * 12 * 16 + 2 * 256);  // the squares padded to 8 + 4 channels
  EXPECT_EQ(step.producer(soft), step.find_op("softsign"));
  const auto reads = step.op_inputs(step.find_op("lrn/grad"));
  EXPECT_TRUE(std::ranges::find(reads, norm) != reads.end());
  EXPECT_TRUE(std::ranges::find(reads, y) == reads.end());  // the division keeps x and its divisor, not y
  // No gradient reaches a Softsign of data alone: nothing kept.
  StepOf d;
  const TensorId dx = d.tensor("x", {4, 4}, TensorKind::data), dp = d.tensor("p", {4}, TensorKind::parameter);
  const TensorId da = d.tensor("a", {4, 4}), dy = d.tensor("y", {4, 4});
  d.op("softsign", "Softsign", {dx}, {da});
  d.op("mul", "Mul", {da, dp}, {dy});
  EXPECT_EQ(d.step({dy}).find_tensor("softsign/kept"), kNoId);
}

// A power by a set-up scalar (PyTorch's pow(Tensor, Scalar)) keeps its base alone for the gradient;
// by a tensor (pow(Tensor, Tensor)) its result too.
TEST(TrainingStep, APowerByAScalarKeepsItsBaseAlone) {
  for (const bool scalar : {true, false}) {
    SCOPED_TRACE(scalar ? "by a constant scalar" : "by a parameter tensor");
    StepOf s;
    const TensorId x = s.tensor("x", {4, 8}, TensorKind::data), p = s.tensor("p", {8}, TensorKind::parameter);
    const TensorId e = scalar ? s.tensor("e", {}, TensorKind::constant) : s.tensor("e", {8}, TensorKind::parameter);
    const TensorId m = s.tensor("m", {4, 8}), y = s.tensor("y", {4, 8}), r = s.tensor("r", {4, 8});
    s.op("mul", "Mul", {x, p}, {m});
    s.op("pow", "Pow", {m, e}, {y});
    s.op("relu", "Relu", {y}, {r});
    const Graph step = s.step({r});
    const auto reads = step.op_inputs(step.find_op("pow/grad"));
    EXPECT_TRUE(std::ranges::find(reads, m) != reads.end());
    EXPECT_EQ(std::ranges::find(reads, y) != reads.end(), !scalar);
    // ... and the bytes it reads are those it keeps: dY and the base (and by a tensor, Y and the
    // exponent); the result was priced as read by a scalar power too (a QA pass).
    const double read = step.op_work(step.find_op("pow/grad")).bytes_read;
    EXPECT_EQ(read, scalar ? 128.0 + 128.0 + 4.0 : 128.0 + 128.0 + 32.0 + 128.0);
  }
}

// A Transpose's gradient is dY permuted back (PyTorch's permute): a view of it, which runs no
// kernel and holds no memory of its own (it was priced as a copy: a QA pass).
TEST(TrainingStep, ATransposesGradientIsAViewOfTheIncomingOne) {
  StepOf s;
  Attributes perm;
  perm.set(Attribute{.name = "perm", .kind = Attribute::Kind::integers, .ints = {1, 0}});
  const TensorId x = s.tensor("x", {16, 8}, TensorKind::data), w = s.tensor("w", {8, 32}, TensorKind::parameter);
  const TensorId h = s.tensor("h", {16, 32}), t = s.tensor("t", {32, 16}), v = s.tensor("v", {16, 4}, TensorKind::data);
  const TensorId y = s.tensor("y", {32, 4});
  s.op("mm1", "MatMul", {x, w}, {h});
  s.op("tr", "Transpose", {h}, {t}, perm);
  s.op("mm2", "MatMul", {t, v}, {y});
  const Graph g = s.step({y});
  const OpId tr = g.find_op("tr/grad");
  EXPECT_EQ(g.op_view_outputs(tr), 1u);
  EXPECT_TRUE(g.tensor_is_view(g.find_tensor("grad/h/tr")));
  EXPECT_EQ(work_of(g, "tr/grad").flops, 0.0);
  EXPECT_EQ(work_of(g, "tr/grad").bytes_read + work_of(g, "tr/grad").bytes_written, 0.0);
  // dY [32,4]... permuted back: h's gradient [16,32] strides as dY's transpose, out of row-major
  // order (a review: it was taken as in order), which a convolution's gradient would copy.
  EXPECT_FALSE(g.tensor_in_order(g.find_tensor("grad/h/tr")));
}

// Attention's heads: a Reshape then a Transpose. Backward, dY permuted back is a view out of
// row-major order, which the Reshape's gradient cannot reshape in place: it copies (PyTorch's
// reshape), as a forward Reshape after a Transpose does (a review: both were views, and the copy
// the Transpose's gradient had made was priced nowhere).
TEST(TrainingStep, TheReshapeBeforeATransposeCopiesItsGradient) {
  StepOf s;
  Attributes perm;
  perm.set(Attribute{.name = "perm", .kind = Attribute::Kind::integers, .ints = {1, 0, 2}});
  const TensorId x = s.tensor("x", {4, 8}, TensorKind::data), w = s.tensor("w", {8, 6}, TensorKind::parameter);
  const TensorId shape = s.tensor("shape", {3}, TensorKind::constant, DType::i64);
  const TensorId h = s.tensor("h", {4, 6}), r = s.tensor("r", {4, 2, 3}), t = s.tensor("t", {2, 4, 3}), y = s.tensor("y", {2, 4, 3});
  s.op("mm", "MatMul", {x, w}, {h});
  s.op("heads", "Reshape", {h, shape}, {r});
  s.op("tr", "Transpose", {r}, {t}, perm);
  s.op("relu", "Relu", {t}, {y});
  const Graph g = s.step({y});
  EXPECT_FALSE(g.tensor_in_order(g.find_tensor("grad/r/tr")));
  EXPECT_EQ(g.op_view_outputs(g.find_op("heads/grad")), 0u);  // a copy into row-major order
  EXPECT_TRUE(g.tensor_in_order(g.find_tensor("grad/h/heads")));
  {
    // The Transpose's output read by two Adds: its partials (views) are summed into a tensor of its
    // own, row-major, then permuted back: still out of order, and the Reshape's gradient copies (a
    // review: taken as in order).
    StepOf s2;
    const TensorId x2 = s2.tensor("x", {4, 8}, TensorKind::data), w2 = s2.tensor("w", {8, 6}, TensorKind::parameter);
    const TensorId shape2 = s2.tensor("shape", {3}, TensorKind::constant, DType::i64);
    const TensorId u = s2.tensor("u", {2, 4, 3}, TensorKind::parameter), v = s2.tensor("v", {2, 4, 3}, TensorKind::parameter);
    const TensorId h2 = s2.tensor("h", {4, 6}), r2 = s2.tensor("r", {4, 2, 3}), t2 = s2.tensor("t", {2, 4, 3});
    const TensorId a = s2.tensor("a", {2, 4, 3}), b = s2.tensor("b", {2, 4, 3}), y2 = s2.tensor("y", {2, 4, 3});
    s2.op("mm", "MatMul", {x2, w2}, {h2});
    s2.op("heads", "Reshape", {h2, shape2}, {r2});
    s2.op("tr", "Transpose", {r2}, {t2}, perm);
    s2.op("add_a", "Add", {t2, u}, {a});
    s2.op("add_b", "Add", {t2, v}, {b});
    s2.op("mul", "Mul", {a, b}, {y2});
    const Graph g2 = s2.step({y2});
    EXPECT_FALSE(g2.tensor_in_order(g2.find_tensor("grad/r/tr")));
    EXPECT_EQ(g2.op_view_outputs(g2.find_op("heads/grad")), 0u);
  }
}

// A tensor read by two permuting Einsums (ij->ji): both gradients are views of their dY, summed
// into the first in place; a permutation is no broadcast (a review: the first was made a tensor of
// its own, as a broadcast's would be).
TEST(TrainingStep, PermutedGradientsAreNoBroadcasts) {
  StepOf s;
  Attributes ji;
  ji.set(Attribute{.name = "equation", .kind = Attribute::Kind::text, .s = "ij->ji"});
  const TensorId x = s.tensor("x", {4, 8}, TensorKind::data), w = s.tensor("w", {8, 6}, TensorKind::parameter);
  const TensorId h = s.tensor("h", {4, 6}), p = s.tensor("p", {6, 4}), q = s.tensor("q", {6, 4}), y = s.tensor("y", {6, 4});
  s.op("mm", "MatMul", {x, w}, {h});
  s.op("e1", "Einsum", {h}, {p}, ji);
  s.op("e2", "Einsum", {h}, {q}, ji);
  s.op("mul", "Mul", {p, q}, {y});
  const Graph g = s.step({y});
  EXPECT_EQ(g.op_view_outputs(g.find_op("e1/grad")), 1u);
  EXPECT_EQ(g.op_view_outputs(g.find_op("e2/grad")), 1u);
}

// The partials of a tensor whose reader passes no views on (a MatMul) are summed into one that owns
// its storage, not into a view an Add passed on, which shares a sibling's gradient (a QA pass: the
// sum went in place into the view when it came first).
TEST(TrainingStep, PartialsAreNotSummedIntoAViewAnAddPassedOn) {
  {
    StepOf s;  // h = x W; y = Relu(h) * (h + u): h's partials are a view (from the Add) and Relu's
    const TensorId x = s.tensor("x", {4, 8}, TensorKind::data), w = s.tensor("w", {8, 8}, TensorKind::parameter);
    const TensorId u = s.tensor("u", {4, 8}, TensorKind::parameter);
    const TensorId h = s.tensor("h", {4, 8}), r = s.tensor("r", {4, 8}), a = s.tensor("a", {4, 8}), y = s.tensor("y", {4, 8});
    s.op("mm", "MatMul", {x, w}, {h});
    s.op("relu", "Relu", {h}, {r});
    s.op("add", "Add", {h, u}, {a});
    s.op("mul", "Mul", {r, a}, {y});
    const Graph g = s.step({y});
    const auto reads = g.op_inputs(g.find_op("mm/grad"));
    ASSERT_FALSE(reads.empty());
    EXPECT_EQ(g.tensor_name(reads[0]), "grad/h/relu");  // summed into: its own storage
    EXPECT_TRUE(g.tensor_accumulated(g.find_tensor("grad/h/add")));
    EXPECT_TRUE(g.tensor_is_view(g.find_tensor("grad/h/add")));
  }
}

// Autograd never sums partial gradients into a broadcast view (its elements share memory): the
// partial that holds the sum, the first the gradient op reads, is another one, or, when every
// partial is a broadcast view, a tensor of its own.
TEST(TrainingStep, PartialGradientsAreNeverSummedIntoABroadcastView) {
  Attributes keep;
  keep.set(Attribute{.name = "keepdims", .kind = Attribute::Kind::integer, .i = 1});
  {
    // m is read by a Relu, then by a ReduceSum, whose gradient comes first in the backward pass.
    StepOf s;
    const TensorId x = s.tensor("x", {16, 32}, TensorKind::data), p = s.tensor("p", {32}, TensorKind::parameter);
    const TensorId axes = s.tensor("axes", {1}, TensorKind::constant, DType::i64);
    const TensorId m = s.tensor("m", {16, 32}), a = s.tensor("a", {16, 32}), r = s.tensor("r", {16, 1}), y = s.tensor("y", {16, 32});
    s.op("mul", "Mul", {x, p}, {m});
    s.op("relu", "Relu", {m}, {a});
    s.op("sum", "ReduceSum", {m, axes}, {r}, keep);
    s.op("add", "Add", {a, r}, {y});
    const Graph step = s.step({y});
    const TensorId by_sum = step.find_tensor("grad/m/sum"), by_relu = step.find_tensor("grad/m/relu");
    ASSERT_NE(by_sum, kNoId);
    ASSERT_NE(by_relu, kNoId);
    EXPECT_TRUE(step.tensor_is_view(by_sum));
    EXPECT_TRUE(step.tensor_accumulated(by_sum));
    EXPECT_FALSE(step.tensor_accumulated(by_relu));
    const auto reads = step.op_inputs(step.find_op("mul/grad"));
    ASSERT_FALSE(reads.empty());
    EXPECT_EQ(reads[0], by_relu);
  }
  {
    // m is read by two ReduceSums: the first partial becomes a tensor of its own, the second is
    // summed into it.
    StepOf s;
    const TensorId x = s.tensor("x", {16, 32}, TensorKind::data), p = s.tensor("p", {32}, TensorKind::parameter);
    const TensorId rows = s.tensor("rows", {1}, TensorKind::constant, DType::i64), cols = s.tensor("cols", {1}, TensorKind::constant, DType::i64);
    const TensorId m = s.tensor("m", {16, 32}), r = s.tensor("r", {16, 1}), c = s.tensor("c", {1, 32}), y = s.tensor("y", {16, 32});
    s.op("mul", "Mul", {x, p}, {m});
    s.op("sum_rows", "ReduceSum", {m, rows}, {r}, keep);
    s.op("sum_cols", "ReduceSum", {m, cols}, {c}, keep);
    s.op("add", "Add", {r, c}, {y});
    const Graph step = s.step({y});
    const auto reads = step.op_inputs(step.find_op("mul/grad"));
    ASSERT_GE(reads.size(), 2u);
    EXPECT_FALSE(step.tensor_is_view(reads[0]));
    EXPECT_FALSE(step.tensor_accumulated(reads[0]));
    EXPECT_TRUE(step.tensor_is_view(reads[1]));
    EXPECT_TRUE(step.tensor_accumulated(reads[1]));
  }
}

TEST(TrainingStep, GradientsReadAndWriteWhatTheRulesSay) {
  {
    StepOf s;  // y = a / b, only b trained: dY, A and B read
    const TensorId a = s.tensor("a", {4, 8}, TensorKind::data), b = s.tensor("b", {4, 8}, TensorKind::parameter), y = s.tensor("y", {4, 8});
    s.op("div", "Div", {a, b}, {y});
    const Graph g = s.step({y});
    EXPECT_EQ(work_of(g, "div/grad").bytes_read, 3 * 128.0);
    EXPECT_EQ(work_of(g, "div/grad").bytes_written, 128.0);
  }
  {
    StepOf s;  // y = x * x: x read once, one gradient written
    const TensorId w = s.tensor("w", {4, 8}, TensorKind::parameter), y = s.tensor("y", {4, 8});
    s.op("sq", "Mul", {w, w}, {y});
    const Graph g = s.step({y});
    EXPECT_EQ(work_of(g, "sq/grad").bytes_written, 128.0);
    EXPECT_EQ(work_of(g, "sq/grad").bytes_read, 2 * 128.0);  // dY and x
  }
  {
    StepOf s;  // TopK: dY of Values and the Indices
    Attributes k;
    k.set(Attribute{.name = "axis", .kind = Attribute::Kind::integer, .i = 1});
    const TensorId w = s.tensor("w", {4, 8}, TensorKind::parameter), kk = s.tensor("k", {1}, TensorKind::constant, DType::i64);
    const TensorId v = s.tensor("v", {4, 3}), i = s.tensor("i", {4, 3}, TensorKind::activation, DType::i64);
    s.op("topk", "TopK", {w, kk}, {v, i}, k);
    const Graph g = s.step({v});
    EXPECT_EQ(work_of(g, "topk/grad").bytes_read, 48.0 + 96.0);
  }
  {
    StepOf s;  // training Dropout: dY and the mask
    Attributes train;
    train.set(Attribute{.name = "training_mode", .kind = Attribute::Kind::integer, .i = 1});
    const TensorId w = s.tensor("w", {4, 8}, TensorKind::parameter), y = s.tensor("y", {4, 8});
    const TensorId mask = s.tensor("mask", {4, 8}, TensorKind::activation, DType::boolean);
    s.op("drop", "Dropout", {w}, {y, mask}, train);
    const Graph g = s.step({y});
    EXPECT_EQ(work_of(g, "drop/grad").bytes_read, 128.0 + 32.0);
  }
  {
    StepOf s;  // r = Reshape(x * w) read by two Exps: the Reshape's gradient sums two partials
    const TensorId x = s.tensor("x", {4, 8}, TensorKind::data), w = s.tensor("w", {4, 8}, TensorKind::parameter);
    const TensorId xs = s.tensor("xs", {4, 8}), shape = s.tensor("shape", {2}, TensorKind::constant, DType::i64), r = s.tensor("r", {8, 4});
    const TensorId e1 = s.tensor("e1", {8, 4}), e2 = s.tensor("e2", {8, 4}), y = s.tensor("y", {8, 4});
    s.op("mul", "Mul", {x, w}, {xs});
    s.op("reshape", "Reshape", {xs, shape}, {r});
    s.op("exp1", "Exp", {r}, {e1});
    s.op("exp2", "Exp", {r}, {e2});
    s.op("add", "Add", {e1, e2}, {y});
    const Graph g = s.step({y});
    const OpWork& sum = work_of(g, "reshape/grad");
    EXPECT_EQ(sum.op_class, OpClass::elementwise);
    EXPECT_EQ(sum.flops, 32.0);
    EXPECT_EQ(sum.bytes_read, 2 * 128.0);
    EXPECT_EQ(sum.bytes_written, 128.0);
    // Summed in place into the first partial (which owns its storage), which the gradient views.
    EXPECT_EQ(g.op_view_outputs(g.find_op("reshape/grad")), 1u);
  }
}

TEST(TrainingStep, AddPassesItsGradientOnAsViewsOfTheIncomingOne) {
  {
    StepOf s;  // y = Exp(h + Exp(h)), h = x * w: a residual sum
    const TensorId x = s.tensor("x", {4, 8}, TensorKind::data), w = s.tensor("w", {4, 8}, TensorKind::parameter);
    const TensorId h = s.tensor("h", {4, 8}), e = s.tensor("e", {4, 8}), r = s.tensor("r", {4, 8}), y = s.tensor("y", {4, 8});
    s.op("mul", "Mul", {x, w}, {h});
    s.op("exp", "Exp", {h}, {e});
    s.op("add", "Add", {h, e}, {r});
    s.op("out", "Exp", {r}, {y});
    const Graph g = s.step({y});
    const OpId add = g.find_op("add/grad");
    // An autograd node without a kernel: no work, but not an alias (it keeps its per-op overhead).
    EXPECT_EQ(g.op_work(add), (OpWork{0, 0, 0, OpClass::elementwise}));
    EXPECT_EQ(g.op_view_outputs(add), 3u);
    EXPECT_EQ(g.tensor_name(g.op_inputs(add)[0]), "grad/r/out");
    EXPECT_TRUE(g.tensor_is_view(g.find_tensor("grad/h/add")));
    EXPECT_TRUE(g.tensor_is_view(g.find_tensor("grad/e/add")));
    // h's two partials (from the Add and the Exp) are summed by the Mul's gradient, as before.
    EXPECT_EQ(work_of(g, "mul/grad").flops, 32.0 + 32.0);
  }
  {
    StepOf s;  // y = Exp(x * w + b): the bias's gradient sums dY over the rows
    const TensorId x = s.tensor("x", {4, 8}, TensorKind::data), w = s.tensor("w", {4, 8}, TensorKind::parameter);
    const TensorId b = s.tensor("b", {8}, TensorKind::parameter), h = s.tensor("h", {4, 8}), r = s.tensor("r", {4, 8}), y = s.tensor("y", {4, 8});
    s.op("mul", "Mul", {x, w}, {h});
    s.op("add", "Add", {h, b}, {r});
    s.op("out", "Exp", {r}, {y});
    const Graph g = s.step({y});
    const OpId add = g.find_op("add/grad");
    EXPECT_EQ(g.op_work(add), (OpWork{32, 128, 32, OpClass::elementwise}));
    EXPECT_EQ(g.op_view_outputs(add), 1u);  // dH passes; dB is a tensor of its own
    EXPECT_FALSE(g.tensor_is_view(g.find_tensor("grad/b/add")));
  }
  {
    StepOf s;  // r = h + w read by two Exps: its two partials are summed in place, then passed on
    const TensorId w = s.tensor("w", {4, 8}, TensorKind::parameter), v = s.tensor("v", {4, 8}, TensorKind::parameter);
    const TensorId r = s.tensor("r", {4, 8}), e1 = s.tensor("e1", {4, 8}), e2 = s.tensor("e2", {4, 8}), y = s.tensor("y", {4, 8});
    s.op("add", "Add", {w, v}, {r});
    s.op("exp1", "Exp", {r}, {e1});
    s.op("exp2", "Exp", {r}, {e2});
    s.op("mul", "Mul", {e1, e2}, {y});
    const Graph g = s.step({y});
    EXPECT_EQ(work_of(g, "add/grad"), (OpWork{32, 2 * 128, 128, OpClass::elementwise}));
    EXPECT_EQ(g.op_view_outputs(g.find_op("add/grad")), 3u);
  }
}

// A Concat's gradients are slices of dY (PyTorch's narrow): views of a part of the incoming gradient,
// priced as before (the bytes moved back). An input concatenated twice gets the sum of two slices,
// a tensor of its own; with every partial of dY a view, nothing views their new sum.
TEST(TrainingStep, ConcatsGradientsAreSlicesOfTheIncomingOne) {
  {
    StepOf s;  // y = Exp(Concat(x * w, x * v, x)) along the channels
    const TensorId x = s.tensor("x", {2, 3, 4}, TensorKind::data), w = s.tensor("w", {2, 3, 4}, TensorKind::parameter);
    const TensorId v = s.tensor("v", {2, 3, 4}, TensorKind::parameter), a = s.tensor("a", {2, 3, 4}), b = s.tensor("b", {2, 3, 4});
    const TensorId c = s.tensor("c", {2, 9, 4}), y = s.tensor("y", {2, 9, 4});
    Attributes axis;
    axis.set(Attribute{.name = "axis", .kind = Attribute::Kind::integer, .i = 1});
    s.op("mul_a", "Mul", {x, w}, {a});
    s.op("mul_b", "Mul", {x, v}, {b});
    s.op("cat", "Concat", {a, b, x}, {c}, axis);
    s.op("out", "Exp", {c}, {y});
    const Graph g = s.step({y});
    const OpId cat = g.find_op("cat/grad");
    EXPECT_EQ(g.op_view_outputs(cat), 3u);  // dA and dB; x is data
    EXPECT_EQ(g.tensor_name(g.op_inputs(cat)[0]), "grad/c/out");
    EXPECT_TRUE(g.tensor_is_view(g.find_tensor("grad/a/cat")));
    EXPECT_EQ(work_of(g, "cat/grad").bytes_written, 2 * 24 * 4.0);
  }
  {
    StepOf s;  // Concat(a, a): a's gradient is the sum of two slices
    const TensorId w = s.tensor("w", {2, 3}, TensorKind::parameter), a = s.tensor("a", {2, 3}), c = s.tensor("c", {4, 3});
    const TensorId y = s.tensor("y", {4, 3});
    s.op("exp_a", "Exp", {w}, {a});
    s.op("cat", "Concat", {a, a}, {c});
    s.op("out", "Exp", {c}, {y});
    const Graph g = s.step({y});
    EXPECT_EQ(g.op_view_outputs(g.find_op("cat/grad")), 0u);
  }
  {
    StepOf s;  // c = Concat(a, b) read by two Adds: both partials of dC are views, so their sum is new
    const TensorId w = s.tensor("w", {2, 3}, TensorKind::parameter), v = s.tensor("v", {2, 3}, TensorKind::parameter);
    const TensorId p = s.tensor("p", {4, 3}, TensorKind::parameter), q = s.tensor("q", {4, 3}, TensorKind::parameter);
    const TensorId a = s.tensor("a", {2, 3}), b = s.tensor("b", {2, 3}), c = s.tensor("c", {4, 3});
    const TensorId r = s.tensor("r", {4, 3}), t = s.tensor("t", {4, 3}), y = s.tensor("y", {4, 3});
    s.op("exp_a", "Exp", {w}, {a});
    s.op("exp_b", "Exp", {v}, {b});
    s.op("cat", "Concat", {a, b}, {c});
    s.op("add_r", "Add", {c, p}, {r});
    s.op("add_t", "Add", {c, q}, {t});
    s.op("mul", "Mul", {r, t}, {y});
    const Graph g = s.step({y});
    EXPECT_EQ(g.op_view_outputs(g.find_op("cat/grad")), 0u);
  }
}

// Found by a review: the partials of an output read twice are summed in place into one that owns
// its storage, never into a view that a sibling gradient may still read (PyTorch's input buffer
// adds in place only into a tensor it alone holds); a sum that must be written reads it again.
TEST(TrainingStep, PartialsAreSummedInPlaceOnlyIntoAGradientOfTheirOwn) {
  {
    StepOf s;  // a = p + q; r = a + x*w; y = r * Exp(a): a's partials are a view (from r's Add) and Exp's
    const TensorId p = s.tensor("p", {4, 8}, TensorKind::parameter), q = s.tensor("q", {4, 8}, TensorKind::parameter);
    const TensorId x = s.tensor("x", {4, 8}, TensorKind::data), w = s.tensor("w", {4, 8}, TensorKind::parameter);
    const TensorId a = s.tensor("a", {4, 8}), c = s.tensor("c", {4, 8}), b = s.tensor("b", {4, 8}), r = s.tensor("r", {4, 8});
    const TensorId y = s.tensor("y", {4, 8});
    s.op("add_a", "Add", {p, q}, {a});
    s.op("exp", "Exp", {a}, {c});
    s.op("mul_b", "Mul", {x, w}, {b});
    s.op("add_r", "Add", {a, b}, {r});
    s.op("mul_y", "Mul", {r, c}, {y});
    const Graph g = s.step({y});
    EXPECT_TRUE(g.tensor_is_view(g.find_tensor("grad/a/add_r")));
    const OpId add_a = g.find_op("add_a/grad");
    EXPECT_EQ(g.tensor_name(g.op_inputs(add_a)[0]), "grad/a/exp");
    EXPECT_EQ(g.op_view_outputs(add_a), 3u);
    // The partial summed into is held by add_a/grad; the other is added into it as it arrives.
    EXPECT_FALSE(g.tensor_accumulated(g.find_tensor("grad/a/exp")));
    EXPECT_TRUE(g.tensor_accumulated(g.find_tensor("grad/a/add_r")));
  }
  {
    StepOf s;  // y = (a + u) * (a + v), a = p + q: both of a's partials are views, so its sum is new
    const TensorId p = s.tensor("p", {4, 8}, TensorKind::parameter), q = s.tensor("q", {4, 8}, TensorKind::parameter);
    const TensorId u = s.tensor("u", {4, 8}, TensorKind::parameter), v = s.tensor("v", {4, 8}, TensorKind::parameter);
    const TensorId a = s.tensor("a", {4, 8}), r = s.tensor("r", {4, 8}), t = s.tensor("t", {4, 8}), y = s.tensor("y", {4, 8});
    s.op("add_a", "Add", {p, q}, {a});
    s.op("add_r", "Add", {a, u}, {r});
    s.op("add_t", "Add", {a, v}, {t});
    s.op("mul_y", "Mul", {r, t}, {y});
    const Graph g = s.step({y});
    EXPECT_EQ(g.op_view_outputs(g.find_op("add_a/grad")), 0u);
    EXPECT_FALSE(g.tensor_is_view(g.find_tensor("grad/p/add_a")));
    EXPECT_EQ(work_of(g, "add_a/grad"), (OpWork{32, 2 * 128, 128, OpClass::elementwise}));
  }
  {
    StepOf s;  // r = h + b (a bias) read by two Exps: sum (reads 2, writes 1), then the bias reduction reads the sum
    const TensorId x = s.tensor("x", {4, 8}, TensorKind::data), w = s.tensor("w", {4, 8}, TensorKind::parameter);
    const TensorId b = s.tensor("b", {8}, TensorKind::parameter), h = s.tensor("h", {4, 8}), r = s.tensor("r", {4, 8});
    const TensorId e1 = s.tensor("e1", {4, 8}), e2 = s.tensor("e2", {4, 8}), y = s.tensor("y", {4, 8});
    s.op("mul", "Mul", {x, w}, {h});
    s.op("add", "Add", {h, b}, {r});
    s.op("exp1", "Exp", {r}, {e1});
    s.op("exp2", "Exp", {r}, {e2});
    s.op("out", "Mul", {e1, e2}, {y});
    const Graph g = s.step({y});
    EXPECT_EQ(work_of(g, "add/grad"), (OpWork{32 + 32, 3 * 128, 32 + 128, OpClass::elementwise}));
    EXPECT_EQ(g.op_view_outputs(g.find_op("add/grad")), 1u);
  }
}

// A gradient op keeps the forward inputs autograd saves for the gradients it computes: a product's
// operand only for the other operand's gradient, a quotient's dividend only for the divisor's.
TEST(TrainingStep, GradientsKeepOnlyTheInputsTheirComputedGradientsNeed) {
  StepOf s;
  const TensorId x = s.tensor("x", {4, 8}, TensorKind::data), w = s.tensor("w", {8, 8}, TensorKind::parameter);
  const TensorId half = s.tensor("half", {1}, TensorKind::data), c = s.tensor("c", {1}, TensorKind::constant);
  const TensorId h = s.tensor("h", {4, 8}), d = s.tensor("d", {4, 8}), m = s.tensor("m", {4, 8}), q = s.tensor("q", {4, 8});
  const TensorId p = s.tensor("p", {4, 8}), y = s.tensor("y", {4, 8});
  s.op("mm", "MatMul", {x, w}, {h});     // x is data: dW = xᵀ·dY keeps x, not W
  s.op("div", "Div", {h, c}, {d});       // a constant divisor: dH = dY / c keeps nothing of h
  s.op("scale", "Mul", {d, half}, {m});  // half needs no gradient: dD = dY·half keeps half, not d
  s.op("sq", "Mul", {m, d}, {q});        // both need one: each keeps the other
  s.op("sig", "Sigmoid", {q}, {p});      // keeps its output
  s.op("div2", "Div", {x, p}, {y});      // the divisor needs a gradient: dP = -dY·x/p² keeps x and p
  const Graph g = s.step({y});
  auto kept = [&](const std::string& op) {
    std::vector<std::string> names;
    const OpId o = g.find_op(op + "/grad");
    for (TensorId t : g.op_inputs(o))
      if (g.tensor_kind(t) != TensorKind::gradient) names.push_back(g.tensor_name(t));
    return names;
  };
  EXPECT_THAT(kept("mm"), ::testing::ElementsAre("x"));
  EXPECT_THAT(kept("div"), ::testing::IsEmpty());
  EXPECT_THAT(kept("scale"), ::testing::ElementsAre("half"));
  EXPECT_THAT(kept("sq"), ::testing::ElementsAre("m", "d"));
  EXPECT_THAT(kept("sig"), ::testing::ElementsAre("p"));
  EXPECT_THAT(kept("div2"), ::testing::ElementsAre("x", "p"));
  // h is read by no gradient (mm's keeps x, div's nothing): it is freed after its last forward reader.
  for (OpId r : g.consumers(h)) EXPECT_LT(r, g.num_forward_ops()) << g.op_name(r);
}

// An unknown op priced as an alias that changes the size, read twice: its summed gradient cannot
// be a view of the incoming one (the step was refused: "sizes ... differ").
TEST(TrainingStep, AnAliasOfAnotherSizeGetsAGradientOfItsOwn) {
  GraphBuilder b("grow");
  const TensorId x = b.add_tensor("x", {4, 8}, DType::f32, TensorKind::data), w = b.add_tensor("w", {4, 8}, DType::f32, TensorKind::parameter);
  const TensorId h = b.add_tensor("h", {4, 8}, DType::f32, TensorKind::activation), big = b.add_tensor("big", {4, 16}, DType::f32, TensorKind::activation);
  const TensorId e1 = b.add_tensor("e1", {4, 16}, DType::f32, TensorKind::activation), e2 = b.add_tensor("e2", {4, 16}, DType::f32, TensorKind::activation);
  const TensorId y = b.add_tensor("y", {4, 16}, DType::f32, TensorKind::activation);
  b.add_op({.name = "mul", .type = "Mul", .inputs = {x, w}, .outputs = {h}, .work = {32, 256, 128, OpClass::elementwise}});
  b.add_op({.name = "grow", .type = "Grow", .inputs = {h}, .outputs = {big}, .work = {0, 0, 0, OpClass::alias}});
  b.add_op({.name = "exp1", .type = "Exp", .inputs = {big}, .outputs = {e1}, .work = {64, 256, 256, OpClass::elementwise}});
  b.add_op({.name = "exp2", .type = "Exp", .inputs = {big}, .outputs = {e2}, .work = {64, 256, 256, OpClass::elementwise}});
  b.add_op({.name = "add", .type = "Add", .inputs = {e1, e2}, .outputs = {y}, .work = {64, 512, 256, OpClass::elementwise}});
  b.mark_output(y);
  Graph step;
  ASSERT_NO_THROW(step = derive_training_step(std::move(b).build(), Optimizer::sgd));
  EXPECT_EQ(step.op_view_outputs(step.find_op("grow/grad")), 0u);
  EXPECT_FALSE(step.tensor_is_view(step.find_tensor("grad/h/grow")));
}

// Views a forward op declares (graph JSON's "views") stay views in its training step.
TEST(TrainingStep, KeepsTheViewsOfForwardOps) {
  GraphBuilder b("declared");
  const TensorId x = b.add_tensor("x", {4, 8}, DType::f32, TensorKind::data), w = b.add_tensor("w", {4, 8}, DType::f32, TensorKind::parameter);
  const TensorId h = b.add_tensor("h", {4, 8}, DType::f32, TensorKind::activation), v = b.add_tensor("v", {4, 8}, DType::f32, TensorKind::activation);
  const TensorId y = b.add_tensor("y", {4, 8}, DType::f32, TensorKind::activation);
  b.add_op({.name = "mul", .type = "Mul", .inputs = {x, w}, .outputs = {h}, .work = {32, 256, 128, OpClass::elementwise}});
  b.add_op({.name = "pass", .type = "Custom", .inputs = {h}, .outputs = {v}, .work = {0, 0, 0, OpClass::elementwise}, .view_outputs = 1u});
  b.add_op({.name = "out", .type = "Exp", .inputs = {v}, .outputs = {y}, .work = {32, 128, 128, OpClass::elementwise}});
  b.mark_output(y);
  const Graph step = derive_training_step(std::move(b).build(), Optimizer::sgd);
  EXPECT_EQ(step.op_view_outputs(step.find_op("pass")), 1u);
  EXPECT_TRUE(step.tensor_is_view(step.find_tensor("v")));
}

TEST(TrainingStep, RejectsAGraphThatIsAlreadyATrainingStep) {
  Graph step = derive_training_step(tiny_mlp(), Optimizer::sgd);
  EXPECT_THROW(derive_training_step(step, Optimizer::sgd), Error);
}

TEST(TrainingStep, ParsesNames) {
  EXPECT_EQ(parse_optimizer("adam"), Optimizer::adam);
  EXPECT_EQ(parse_mode("inference"), Mode::inference);
  EXPECT_THROW(parse_optimizer("lbfgs"), Error);
  EXPECT_THROW(parse_mode("eval"), Error);
}

}  // namespace
}  // namespace placer
