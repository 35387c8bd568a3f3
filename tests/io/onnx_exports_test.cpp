// What exporters other than the shared models' write: symbolic sizes, weights in external files,
// constant inputs that steer an op (Resize's scales, an RNN's initial state), empty constants,
// data-dependent shapes. Each model is written op by op here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "placer/graph/training.hpp"
#include "placer/io/onnx.hpp"
#include "placer/io/onnx_file.hpp"
#include "placer/util/error.hpp"
#include "support/paths.hpp"

namespace placer {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

using Dim = std::variant<std::int64_t, std::string>;  // a size or a symbolic name

struct Model {
  onnx::ModelProto m;
  explicit Model(std::int64_t opset = 17, std::int64_t ir = 8) {
    m.set_ir_version(ir);
    m.add_opset_import()->set_version(opset);
    m.mutable_graph()->set_name("export");
  }
  static void type(onnx::ValueInfoProto* vi, std::vector<Dim> dims, int elem = onnx::TensorProto::FLOAT) {
    auto* t = vi->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    auto* shape = t->mutable_shape();
    for (const Dim& d : dims) {
      if (std::holds_alternative<std::int64_t>(d)) shape->add_dim()->set_dim_value(std::get<std::int64_t>(d));
      else shape->add_dim()->set_dim_param(std::get<std::string>(d));
    }
  }
  void input(const std::string& name, std::vector<Dim> dims, int elem = onnx::TensorProto::FLOAT) {
    auto* vi = m.mutable_graph()->add_input();
    vi->set_name(name);
    type(vi, std::move(dims), elem);
  }
  // A graph output of this rank, its sizes left to shape inference.
  void output(const std::string& name, int rank, int elem = onnx::TensorProto::FLOAT) {
    auto* vi = m.mutable_graph()->add_output();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
    auto* shape = vi->mutable_type()->mutable_tensor_type()->mutable_shape();
    for (int i = 0; i < rank; ++i) shape->add_dim();
  }
  // A float initializer of these dims: `values`, or `fill` everywhere when none are given.
  onnx::TensorProto* initializer(const std::string& name, std::vector<std::int64_t> dims, float fill = 0.5f,
                                 std::vector<float> values = {}) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    std::int64_t n = 1;
    for (auto d : dims) t->add_dims(d), n *= d;
    for (std::int64_t i = 0; i < n; ++i) t->add_float_data(values.empty() ? fill : values[static_cast<std::size_t>(i)]);
    return t;
  }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
    auto* n = m.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name("/" + op + "_" + out[0]);
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    return n;
  }
  static void attr(onnx::NodeProto* n, const std::string& name, std::int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::INT), a->set_i(v);
  }
  static void attr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::STRING), a->set_s(v);
  }
  // A Constant node holding a float tensor of these dims (all `fill`).
  void constant(const std::string& out, std::vector<std::int64_t> dims, float fill = 1.0f) {
    auto* a = node("Constant", {}, {out})->add_attribute();
    a->set_name("value"), a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    std::int64_t n = 1;
    for (auto d : dims) a->mutable_t()->add_dims(d), n *= d;
    for (std::int64_t i = 0; i < n; ++i) a->mutable_t()->add_float_data(fill);
  }
  std::string save(const std::string& file, const std::string& dir = "") const {
    const std::string path = dir.empty() ? test::temp_path(file) : dir + "/" + file;
    std::ofstream out(path, std::ios::binary);
    m.SerializeToOstream(&out);
    return path;
  }
};

// If(condition) giving `out`: then Relu(x), else Tanh(x), x of [4, 16] read from the main graph.
void add_relu_or_tanh_if(Model& m, const std::string& condition, const std::string& out) {
  auto* node = m.node("If", {condition}, {out});
  for (const char* b : {"then", "else"}) {
    auto* a = node->add_attribute();
    a->set_name(std::string(b) + "_branch"), a->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* g = a->mutable_g();
    g->set_name(b);
    const std::string op = b[0] == 't' ? "Relu" : "Tanh";
    auto* n = g->add_node();
    n->set_op_type(op), n->set_name("/" + std::string(b) + "/" + op), n->add_input("x"), n->add_output(std::string(b) + "_y");
    auto* vi = g->add_output();
    vi->set_name(std::string(b) + "_y");
    Model::type(vi, {std::int64_t{4}, std::int64_t{16}});
  }
}

std::vector<std::int64_t> shape_of(const Graph& g, const std::string& tensor) {
  auto s = g.tensor_shape(g.find_tensor(tensor));
  return {s.begin(), s.end()};
}

std::uint64_t parameters(const Graph& g) {
  std::uint64_t n = 0;
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (g.tensor_kind(t) == TensorKind::parameter) n += g.tensor_elements(t);
  return n;
}

TEST(OnnxExports, ASymbolicSizeIsBoundWithDimAndNamedWhenItIsNot) {
  Model m;
  m.input("x", {std::string("N"), std::int64_t{64}});
  m.initializer("w", {64, 32});
  m.node("MatMul", {"x", "w"}, {"y"});
  m.output("y", 2);
  const std::string path = m.save("symbolic.onnx");
  EXPECT_THAT([&] { load_onnx(path, {}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("'" + path + "': graph input 'x' has the symbolic dimension 'N'"),
                                         HasSubstr("--dim N=VALUE"))));  // naming the file, as the other --dim errors do
  OnnxImportOptions o;
  o.dim_values["N"] = 8;
  Graph g = load_onnx(path, o);
  EXPECT_EQ(g.tensor_elements(g.find_tensor("y")), 8u * 32u);
  // A name the model does not have is a slip, not ignored.
  o.dim_values = {{"M", 8}};
  EXPECT_THAT([&] { load_onnx(path, o); },
              ThrowsMessage<Error>(AllOf(HasSubstr("--dim M=8"), HasSubstr("no symbolic dimension 'M'"), HasSubstr("its inputs have: N"))));
}

TEST(OnnxExports, WeightsInAnExternalFileAreFoundBesideTheModel) {
  const std::filesystem::path dir = test::temp_path("external_dir");
  std::filesystem::create_directories(dir);
  Model m;
  m.input("x", {std::int64_t{8}, std::int64_t{64}});
  auto* w = m.initializer("w", {64, 32});
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* location = w->add_external_data();
  location->set_key("location"), location->set_value("weights.bin");
  std::ofstream(dir / "weights.bin", std::ios::binary) << std::string(64 * 32 * 4, '\0');
  m.node("MatMul", {"x", "w"}, {"y"});
  m.output("y", 2);
  const std::string path = m.save("external.onnx", dir.string());
  // The tests run elsewhere than `dir`: the weights' path is read relative to the model.
  ASSERT_NE(std::filesystem::current_path(), dir);
  Graph g = load_onnx(path, {});
  EXPECT_EQ(parameters(g), 64u * 32u);
  std::filesystem::remove_all(dir);
}

// What `onnx.save_model(..., save_as_external_data=True, size_threshold=0)` writes: every
// initializer in one file, the shape arithmetic's operands too. A Reshape's target stored apart
// used to leave the shape after it unknown.
TEST(OnnxExports, SmallConstantsInAnExternalFileAreReadForShapeInference) {
  const std::filesystem::path dir = test::temp_path("external_shapes_dir");
  std::filesystem::remove_all(dir);  // a failed run may have left it, links included
  std::filesystem::create_directories(dir);
  auto external = [](onnx::TensorProto* t, const std::string& file, std::size_t offset, std::size_t length) {
    t->clear_float_data(), t->clear_int64_data();
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto entry = [&](const char* key, const std::string& value) {
      auto* e = t->add_external_data();
      e->set_key(key), e->set_value(value);
    };
    entry("location", file), entry("offset", std::to_string(offset)), entry("length", std::to_string(length));
  };
  Model m;
  m.input("x", {std::int64_t{8}, std::int64_t{64}});
  m.initializer("w", {64, 32});
  auto* target = m.m.mutable_graph()->add_initializer();
  target->set_name("target"), target->set_data_type(onnx::TensorProto::INT64), target->add_dims(3);
  m.node("MatMul", {"x", "w"}, {"h"});
  m.node("Reshape", {"h", "target"}, {"r"});
  m.node("Relu", {"r"}, {"y"});
  m.output("y", 3);
  // The weights first (8,192 bytes), then the target's three int64 at offset 8192.
  std::string bytes(64 * 32 * 4, '\0');
  for (std::int64_t v : {8, 4, 8}) bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
  std::ofstream(dir / "all.bin", std::ios::binary) << bytes;
  external(m.m.mutable_graph()->mutable_initializer(0), "all.bin", 0, 64 * 32 * 4);
  external(target, "all.bin", 64 * 32 * 4, 24);
  Graph g = load_onnx(m.save("external_shapes.onnx", dir.string()), {});
  EXPECT_EQ(shape_of(g, "y"), (std::vector<std::int64_t>{8, 4, 8}));
  EXPECT_EQ(parameters(g), 64u * 32u);

  // Entries that do not fit: each an error naming the initializer.
  auto fails = [&](const std::string& file, std::size_t offset, std::size_t length, const char* why) {
    external(target, file, offset, length);
    EXPECT_THAT([&] { load_onnx(m.save("external_shapes.onnx", dir.string()), {}); },
                ThrowsMessage<Error>(AllOf(HasSubstr("initializer 'target'"), HasSubstr(why))))
        << file << " " << offset << " " << length;
  };
  fails("all.bin", 64 * 32 * 4, 16, "its external data is 16 bytes long, a tensor of 3 element(s) of 8 bytes takes 24");
  fails("all.bin", 64 * 32 * 4 + 8, 24, "external data of 24 bytes at offset 8200 is past the end of");
  // A weight's (over 4,096 elements: its bytes are never read) are checked against the file too
  // (a QA pass found them taken on trust).
  external(target, "all.bin", 64 * 32 * 4, 24);
  for (const auto& [offset, length, why] : {std::tuple<std::size_t, std::size_t, const char*>{0, 100, "its external data is 100 bytes long"},
                                            {64 * 32 * 4, 64 * 32 * 4, "external data of 8192 bytes at offset 8192 is past the end of"}}) {
    external(m.m.mutable_graph()->mutable_initializer(0), "all.bin", offset, length);
    EXPECT_THAT([&] { load_onnx(m.save("external_shapes.onnx", dir.string()), {}); },
                ThrowsMessage<Error>(AllOf(HasSubstr("initializer 'w'"), HasSubstr(why))))
        << offset << " " << length;
  }
  external(m.m.mutable_graph()->mutable_initializer(0), "all.bin", 0, 64 * 32 * 4);
  fails("../all.bin", 0, 24, "is not a file inside the model's directory");
  fails("/etc/passwd", 0, 24, "is not a file inside the model's directory");
  // Found by fuzzing: a FIFO hung the import, a link read /etc/passwd as a shape.
  std::filesystem::create_directory(dir / "subdir");
  fails("subdir", 0, 24, "is not a regular file");
  std::filesystem::create_symlink("/dev/zero", dir / "zeros");
  fails("zeros", 0, 24, "is not a regular file");
  const std::filesystem::path outside = std::filesystem::absolute(test::temp_path("outside.bin"));
  std::ofstream(outside, std::ios::binary) << bytes;
  std::filesystem::create_symlink(outside, dir / "out.bin");
  fails("out.bin", 64 * 32 * 4, 24, "leads out of the model's directory (a symbolic link)");
  std::filesystem::remove(outside);
  target->clear_external_data();
  auto* e = target->add_external_data();
  e->set_key("location"), e->set_value("all.bin");
  e = target->add_external_data();
  e->set_key("offset"), e->set_value("0x10");
  EXPECT_THAT([&] { load_onnx(m.save("external_shapes.onnx", dir.string()), {}); },
              ThrowsMessage<Error>(HasSubstr("external data offset '0x10' is not a number of bytes")));
  // A weight (over 4,096 elements: never read here) must name a file inside the directory too
  // (its location went unchecked; found by a review).
  target->clear_external_data();
  external(target, "all.bin", 64 * 32 * 4, 24);
  for (const char* location : {"../all.bin", "/etc/passwd"}) {
    external(m.m.mutable_graph()->mutable_initializer(0), location, 0, 64 * 32 * 4);
    m.m.mutable_graph()->mutable_initializer(0)->mutable_external_data()->DeleteSubrange(0, 3);
    EXPECT_THAT([&] { load_onnx(m.save("external_shapes.onnx", dir.string()), {}); },
                ThrowsMessage<Error>(AllOf(HasSubstr("initializer 'w'"), HasSubstr("is not a file inside the model's directory"))))
        << location;
  }
  external(m.m.mutable_graph()->mutable_initializer(0), "all.bin", 0, 64 * 32 * 4);
  m.m.mutable_graph()->mutable_initializer(0)->mutable_external_data()->DeleteSubrange(0, 3);
  // A Constant node's value stored apart (onnx's convert_attribute=True) is read too.
  target->clear_external_data();
  external(target, "all.bin", 64 * 32 * 4, 24);
  Model c = m;
  auto* init = c.m.mutable_graph()->mutable_initializer();
  onnx::TensorProto value = init->Get(1);
  init->RemoveLast();
  auto* constant = c.m.mutable_graph()->mutable_node()->Add();
  constant->set_op_type("Constant"), constant->set_name("/target"), constant->add_output("target");
  auto* a = constant->add_attribute();
  a->set_name("value"), a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = value;
  a->mutable_t()->clear_name();
  for (int i = c.m.graph().node_size() - 1; i > 0; --i) c.m.mutable_graph()->mutable_node()->SwapElements(i, i - 1);  // the Constant first
  EXPECT_EQ(shape_of(load_onnx(c.save("external_constant.onnx", dir.string()), {}), "y"), (std::vector<std::int64_t>{8, 4, 8}));
  std::filesystem::remove_all(dir);
}

// Subgraphs store data apart too: an If branch's weight at ../../../etc/passwd was accepted (the
// main graph's is refused), and a branch's Constant stored beside the model got libonnx's raw
// message instead of being read (found by a fuzzing review).
TEST(OnnxExports, ExternalDataInsideSubgraphsIsCheckedAndRead) {
  const std::filesystem::path dir = test::temp_path("external_branch_dir");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::vector<float> four{1, 2, 3, 4};
  std::ofstream(dir / "c.bin", std::ios::binary) << std::string(reinterpret_cast<const char*>(four.data()), 16);
  auto external = [](onnx::TensorProto& t, const std::string& location) {
    t.clear_float_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    for (const auto& [key, value] : {std::pair<std::string, std::string>{"location", location}, {"offset", "0"}, {"length", "16"}}) {
      auto* e = t.add_external_data();
      e->set_key(key), e->set_value(value);
    }
  };
  // then: y = x + w (w an initializer of the branch, or a Constant in it); else: y = x.
  auto model = [&](bool as_constant, const std::string& location) {
    Model m;
    m.input("c", {}, onnx::TensorProto::BOOL);
    m.input("x", {std::int64_t{4}});
    onnx::NodeProto* branch_if = m.node("If", {"c"}, {"y"});
    for (const char* name : {"then_branch", "else_branch"}) {
      auto* a = branch_if->add_attribute();
      a->set_name(name), a->set_type(onnx::AttributeProto::GRAPH);
      onnx::GraphProto& g = *a->mutable_g();
      g.set_name(name);
      auto* out = g.add_output();
      out->set_name(std::string(name) + "_y");
      Model::type(out, {std::int64_t{4}});
      if (std::string(name) == "else_branch") {
        auto* n = g.add_node();
        n->set_op_type("Identity"), n->add_input("x"), n->add_output(out->name());
        continue;
      }
      onnx::TensorProto w;
      w.set_data_type(onnx::TensorProto::FLOAT), w.add_dims(4);
      external(w, location);
      if (as_constant) {
        auto* k = g.add_node();
        k->set_op_type("Constant"), k->set_name("/w"), k->add_output("w");
        auto* v = k->add_attribute();
        v->set_name("value"), v->set_type(onnx::AttributeProto::TENSOR), *v->mutable_t() = w;
      } else {
        w.set_name("w");
        *g.add_initializer() = w;
      }
      auto* n = g.add_node();
      n->set_op_type("Add"), n->add_input("x"), n->add_input("w"), n->add_output(out->name());
    }
    m.output("y", 1);
    return m.save("branch.onnx", dir.string());
  };
  for (const bool as_constant : {false, true})
    for (const char* location : {"../../../etc/passwd", "/etc/passwd"})
      EXPECT_THAT([&] { load_onnx(model(as_constant, location), {}); },
                  ThrowsMessage<Error>(AllOf(HasSubstr(as_constant ? "the value of Constant '/w' (in a subgraph of node '/If_y')"
                                                                   : "initializer 'w' (in a subgraph of node '/If_y')"),
                                             HasSubstr("is not a file inside the model's directory"))))
          << location;
  // Stored beside the model, it is read (the If, decided only at run time, is priced as one op).
  OnnxImportOptions priced;
  priced.unknown_op_default = OpClass::elementwise;
  for (const bool as_constant : {false, true}) EXPECT_NO_THROW(load_onnx(model(as_constant, "c.bin"), priced)) << as_constant;
  std::filesystem::remove_all(dir);
}

TEST(OnnxExports, ResizeScalesAreNoParameters) {
  Model m(13);
  m.input("x", {std::int64_t{2}, std::int64_t{3}, std::int64_t{8}, std::int64_t{8}});
  m.initializer("scales", {4}, 0.0f, {1, 1, 2, 2});  // a constant-folded scale_factor=2
  m.initializer("roi", {0});           // empty, as exporters write it
  Model::attr(m.node("Resize", {"x", "roi", "scales"}, {"up"}), "mode", std::string("nearest"));
  m.output("up", 4);
  Graph g = load_onnx(m.save("resize.onnx"), {});
  EXPECT_EQ(parameters(g), 0u);
  EXPECT_EQ(shape_of(g, "up"), (std::vector<std::int64_t>{2, 3, 16, 16}));

}

TEST(OnnxExports, EmptyConstantsAreInputsNotGiven) {
  Model m(11);
  m.input("x", {std::int64_t{2}, std::int64_t{3}, std::int64_t{8}, std::int64_t{8}});
  m.constant("roi", {0});
  m.initializer("scales", {4}, 0.0f, {1, 1, 2, 2});
  Model::attr(m.node("Resize", {"x", "roi", "scales"}, {"up"}), "mode", std::string("linear"));
  m.output("up", 4);
  Graph g = load_onnx(m.save("resize11.onnx"), {});
  EXPECT_EQ(g.find_tensor("roi"), kNoId);
  EXPECT_GT(g.tensor_elements(g.find_tensor("up")), 0u);
}

// An empty axes input of a reduction (ONNX: reduce every axis, or none with
// noop_with_empty_axes) is read as not given; an empty input read as data is still refused.
TEST(OnnxExports, EmptyInputsThatOnlySteerAreNotGiven) {
  Model m(13);
  m.input("x", {std::int64_t{3}, std::int64_t{4}});
  m.input("axes", {std::int64_t{0}}, onnx::TensorProto::INT64);
  Model::attr(m.node("ReduceSum", {"x", "axes"}, {"s"}), "keepdims", 1);
  Model::type(m.m.mutable_graph()->add_output(), {std::int64_t{1}, std::int64_t{1}});  // declared: inference cannot read axes
  m.m.mutable_graph()->mutable_output(0)->set_name("s");
  Graph g = load_onnx(m.save("empty_axes.onnx"), {});
  EXPECT_EQ(g.find_tensor("axes"), kNoId);
  EXPECT_EQ(shape_of(g, "s"), (std::vector<std::int64_t>{1, 1}));
  const OpId sum = g.producer(g.find_tensor("s"));
  ASSERT_EQ(g.op_inputs(sum).size(), 2u);
  EXPECT_EQ(g.op_inputs(sum)[1], kNoId);

  Model data(13);
  data.input("x", {std::int64_t{3}, std::int64_t{4}});
  data.input("e", {std::int64_t{0}, std::int64_t{4}});
  Model::attr(data.node("Concat", {"x", "e"}, {"c"}), "axis", 0);
  data.output("c", 2);
  EXPECT_THAT([&] { load_onnx(data.save("empty_data.onnx"), {}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("'e'"), HasSubstr("is 0 (an empty tensor"))));
}

// A set-up value that comes out empty (LayerNormalization's function for axis 0 slices a prefix
// shape of no dimension and concatenates it with the rest) is left out with the op that computes
// it; its readers read nothing there. Set-up values only: an empty activation is still refused.
TEST(OnnxExports, EmptySetUpValuesAreLeftOutWithTheirOps) {
  Model m(13);
  m.input("x", {std::int64_t{3}, std::int64_t{4}});
  m.node("Shape", {"x"}, {"shape"});
  auto int64s = [](Model& into, const std::string& name, std::vector<std::int64_t> values) {
    auto* t = into.m.mutable_graph()->add_initializer();
    t->set_name(name), t->set_data_type(onnx::TensorProto::INT64), t->add_dims(static_cast<std::int64_t>(values.size()));
    for (auto v : values) t->add_int64_data(v);
  };
  int64s(m, "zero", {0}), int64s(m, "two", {2});
  m.node("Slice", {"shape", "zero", "zero"}, {"prefix"});  // [0]: no dimension
  m.node("Slice", {"shape", "zero", "two"}, {"rest"});
  Model::attr(m.node("Concat", {"prefix", "rest"}, {"target"}), "axis", 0);
  m.node("Reshape", {"x", "target"}, {"y"});
  m.output("y", 2);
  Graph g = load_onnx(m.save("empty_prefix.onnx"), {});
  EXPECT_EQ(g.find_tensor("prefix"), kNoId);
  EXPECT_NE(g.find_tensor("rest"), kNoId);
  EXPECT_EQ(g.num_ops(), 4u);  // Shape, the second Slice, Concat and Reshape: nothing for the empty slice
  EXPECT_EQ(shape_of(g, "y"), (std::vector<std::int64_t>{3, 4}));
  const OpId concat = g.producer(g.find_tensor("target"));
  EXPECT_TRUE(g.op_folded(concat));
  EXPECT_EQ(g.op_inputs(concat)[0], kNoId);

  Model act(13);
  act.input("x", {std::int64_t{3}, std::int64_t{4}});
  int64s(act, "zero", {0});
  act.node("Slice", {"x", "zero", "zero"}, {"none"});  // [0, 4] of data
  act.node("Relu", {"none"}, {"y"});
  act.output("y", 2);
  // Named with the file, as every import error is (this one was not: a QA pass).
  EXPECT_THAT([&] { load_onnx(act.save("empty_activation.onnx"), {}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("model file '" + test::temp_path("empty_activation.onnx") + "': "),
                                         HasSubstr("is 0 (an empty tensor"))));

  // zeros_like of a scalar, as exporters write it: ConstantOfShape(Shape(s)), the shape empty. An
  // op that reads nothing but empty values would read nothing at all: refused, naming it.
  Model scalar(13);
  scalar.input("s", {});
  scalar.node("Shape", {"s"}, {"dims"});
  auto* zeros = scalar.node("ConstantOfShape", {"dims"}, {"z"});
  zeros->set_name("zeros");
  scalar.node("Add", {"s", "z"}, {"y"});
  scalar.output("y", 0);
  EXPECT_THAT([&] { load_onnx(scalar.save("zeros_like_scalar.onnx"), {}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("op 'zeros' (ConstantOfShape)"), HasSubstr("'dims' is empty"))));
}

// PRelu of opset 6 has no broadcasting: a slope of C values on [N, C, ...] is one per channel (as
// PyTorch's exporter wrote it), which the executor lays along dimension 1. From opset 7 the same
// slope broadcasts from the last dimension, and [3] on [2, 3, 4, 5] does not.
TEST(OnnxExports, Opset6PReluTakesASlopePerChannel) {
  for (const std::int64_t opset : {6, 9}) {
    Model m(opset, 3);
    m.input("x", {std::int64_t{2}, std::int64_t{3}, std::int64_t{4}, std::int64_t{5}});
    m.initializer("slope", {3});
    m.input("slope", {std::int64_t{3}});  // IR 3: initializers are graph inputs too
    m.node("PRelu", {"x", "slope"}, {"y"});
    m.output("y", 4);
    const std::string path = m.save("prelu" + std::to_string(opset) + ".onnx");
    if (opset == 6) {
      Graph g = load_onnx(path, {});
      EXPECT_EQ(shape_of(g, "y"), (std::vector<std::int64_t>{2, 3, 4, 5}));
      EXPECT_EQ(g.op_attrs(g.producer(g.find_tensor("y"))).get_int("slope_per_channel", 0), 1);
      EXPECT_NO_THROW(derive_training_step(g, Optimizer::sgd));
    } else {
      EXPECT_THAT([&] { load_onnx(path, {}); }, ThrowsMessage<Error>(HasSubstr("does not broadcast to input [2,3,4,5]")));
    }
  }
}

TEST(OnnxExports, NewerOpsetsThanTheLibrarysAreReadThroughTheirOlderForms) {
  // IR 10, opset 20 (what onnx >= 1.16 writes): Gelu (new in 20), ReduceMean with its axes as an
  // input (18), Split by num_outputs (18), GroupNormalization (18).
  Model m(20, 10);
  m.input("x", {std::int64_t{4}, std::int64_t{8}, std::int64_t{6}});
  Model::attr(m.node("Gelu", {"x"}, {"g"}), "approximate", std::string("none"));
  auto* axes = m.node("Constant", {}, {"axes"})->add_attribute();
  axes->set_name("value"), axes->set_type(onnx::AttributeProto::TENSOR);
  axes->mutable_t()->set_data_type(onnx::TensorProto::INT64), axes->mutable_t()->add_dims(1), axes->mutable_t()->add_int64_data(2);
  m.node("ReduceMean", {"g", "axes"}, {"mean"});
  Model::attr(m.node("Split", {"x"}, {"a", "b"}), "num_outputs", 2);
  m.initializer("scale", {2}), m.initializer("bias", {2});
  Model::attr(m.node("GroupNormalization", {"a", "scale", "bias"}, {"n"}), "num_groups", 2);
  m.output("mean", 3), m.output("n", 3), m.output("b", 3);
  Graph g = load_onnx(m.save("opset20.onnx"), {});
  EXPECT_EQ(shape_of(g, "g"), (std::vector<std::int64_t>{4, 8, 6}));
  EXPECT_EQ(shape_of(g, "mean"), (std::vector<std::int64_t>{4, 8, 1}));
  EXPECT_EQ(shape_of(g, "a"), (std::vector<std::int64_t>{2, 8, 6}));
  EXPECT_EQ(shape_of(g, "n"), (std::vector<std::int64_t>{2, 8, 6}));
  // The ops are the file's: Gelu keeps its own cost (5 FLOPs per element, docs/op-rules.md).
  bool found = false;
  for (OpId o = 0; o < g.num_ops(); ++o)
    if (g.op_type(o) == "Gelu") {
      found = true;
      EXPECT_DOUBLE_EQ(g.op_work(o).flops, 5.0 * 4 * 8 * 6);
    }
  EXPECT_TRUE(found);

  // Split by num_outputs into sizes the axis does not divide (opset 18: chunks of ceil(10/3), the
  // last smaller), axes from Constant(value_ints) (as onnxscript writes them), and
  // noop_with_empty_axes with no axes: a pass-through.
  Model u(18, 9);
  u.input("x", {std::int64_t{2}, std::int64_t{10}});
  auto* split = u.node("Split", {"x"}, {"s0", "s1", "s2"});
  Model::attr(split, "axis", 1), Model::attr(split, "num_outputs", 3);
  auto* ints = u.node("Constant", {}, {"ax"})->add_attribute();
  ints->set_name("value_ints"), ints->set_type(onnx::AttributeProto::INTS), ints->add_ints(1);
  Model::attr(u.node("ReduceMean", {"x", "ax"}, {"m"}), "keepdims", 0);
  Model::attr(u.node("ReduceMax", {"x"}, {"same"}), "noop_with_empty_axes", 1);
  u.output("s2", 2), u.output("m", 1), u.output("same", 2);
  Graph gu = load_onnx(u.save("opset18.onnx"), {});
  EXPECT_EQ(shape_of(gu, "s0"), (std::vector<std::int64_t>{2, 4}));
  EXPECT_EQ(shape_of(gu, "s2"), (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(shape_of(gu, "m"), (std::vector<std::int64_t>{2}));
  EXPECT_EQ(shape_of(gu, "same"), (std::vector<std::int64_t>{2, 10}));

  // Before opset 18 a Split without sizes makes equal parts: into parts its dimension does not
  // divide it is invalid, not opset 18's rule (the two looked the same once read through opset 17),
  // whether the file leaves the outputs' shapes to inference or declares them.
  for (const bool declared : {false, true}) {
    Model v(13, 8);
    v.input("x", {std::int64_t{2}, std::int64_t{10}});
    Model::attr(v.node("Split", {"x"}, {"s0", "s1", "s2"}), "axis", 1);
    v.output("s2", 2);
    if (declared)
      for (const char* name : {"s0", "s1", "s2"}) {
        auto* vi = v.m.mutable_graph()->add_value_info();
        vi->set_name(name);
        Model::type(vi, {std::int64_t{2}, std::int64_t{name[1] == '2' ? 2 : 4}});
      }
    EXPECT_THAT([&] { load_onnx(v.save("opset13_uneven_split.onnx"), {}); }, ThrowsMessage<Error>(HasSubstr("Split"))) << declared;
    if (!declared) {
      EXPECT_THAT([&] { load_onnx(v.save("opset13_uneven_split.onnx"), {}); },
                  ThrowsMessage<Error>(AllOf(HasSubstr("splits a dimension of 10 into 3 outputs without sizes"),
                                             HasSubstr("before opset 18 (the model's is 13)"))));
    }
  }

  // Opset 18's Split by num_outputs: declared shapes are checked against its rule, and num_outputs
  // and the axis against the node (all were accepted as given: found by a fuzzing review).
  auto split18 = [](std::int64_t num_outputs, std::int64_t axis, std::int64_t declared) {
    Model w(18, 8);
    w.input("x", {std::int64_t{4}, std::int64_t{8}});
    auto* sp = w.node("Split", {"x"}, {"y", "z"});
    sp->set_name("sp");
    Model::attr(sp, "axis", axis), Model::attr(sp, "num_outputs", num_outputs);
    for (const char* name : {"y", "z"}) {
      auto* vi = w.m.mutable_graph()->add_value_info();
      vi->set_name(name);
      Model::type(vi, {std::int64_t{4}, declared});
    }
    w.output("y", 2), w.output("z", 2);
    return w.save("split18.onnx");
  };
  EXPECT_EQ(shape_of(load_onnx(split18(2, 1, 4), {}), "z"), (std::vector<std::int64_t>{4, 4}));
  EXPECT_THAT([&] { load_onnx(split18(2, 1, 1000), {}); },
              ThrowsMessage<Error>(HasSubstr("node 'sp' (Split): output 'y' is declared float[4,1000] but its input gives float[4,4]")));
  EXPECT_THAT([&] { load_onnx(split18(-2, 1, 4), {}); }, ThrowsMessage<Error>(HasSubstr("attribute 'num_outputs' is -2, but the node has 2 outputs")));
  EXPECT_THAT([&] { load_onnx(split18(2, 9, 4), {}); }, ThrowsMessage<Error>(HasSubstr("attribute 'axis' is 9, outside its input's 2 dimensions")));

  // Ops new in opset 18: Mish (elementwise), the Bitwise ops (integer, broadcast).
  Model b(18, 8);
  b.input("x", {std::int64_t{4}, std::int64_t{8}});
  b.input("i", {std::int64_t{4}, std::int64_t{8}}, onnx::TensorProto::INT32);
  b.input("j", {std::int64_t{8}}, onnx::TensorProto::INT32);
  b.node("Mish", {"x"}, {"mish"});
  b.node("BitwiseAnd", {"i", "j"}, {"and"});
  b.node("BitwiseNot", {"and"}, {"not"});
  b.output("mish", 2), b.output("not", 2, onnx::TensorProto::INT32);
  Graph gb = load_onnx(b.save("opset18_new_ops.onnx"), {});
  EXPECT_EQ(shape_of(gb, "mish"), (std::vector<std::int64_t>{4, 8}));
  EXPECT_EQ(shape_of(gb, "not"), (std::vector<std::int64_t>{4, 8}));
  EXPECT_EQ(gb.tensor_dtype(gb.find_tensor("not")), DType::i32);

  // DFT: opset 18 and 19 still have DFT-17's axis attribute (default 1), kept as the file gives
  // it; opset 20's axis input (default -2, from the back) becomes that attribute, also when the
  // input's rank is known only after inference.
  for (const std::int64_t opset : {18, 20}) {
    SCOPED_TRACE("opset " + std::to_string(opset));
    Model d(opset, 9);
    d.input("x", {std::int64_t{2}, std::int64_t{8}, std::int64_t{16}, std::int64_t{1}});
    d.node("Relu", {"x"}, {"r"});
    Model::attr(d.node("DFT", {"r"}, {"y"}), "onesided", 1);
    d.output("y", 4);
    OnnxImportOptions o;
    o.unknown_op_default = OpClass::elementwise;
    Graph gd = load_onnx(d.save("dft.onnx"), o);
    EXPECT_EQ(shape_of(gd, "y"),
              opset >= 20 ? (std::vector<std::int64_t>{2, 8, 9, 2}) : (std::vector<std::int64_t>{2, 5, 16, 2}));
  }

  // An op the library has no older form of is refused, saying how new the model is.
  Model n(23, 10);
  n.input("x", {std::int64_t{4}, std::int64_t{8}});
  n.initializer("scale", {8});
  n.node("RMSNormalization", {"x", "scale"}, {"y"});
  n.output("y", 2);
  EXPECT_THAT([&] { load_onnx(n.save("opset23.onnx"), {}); },
              ThrowsMessage<Error>(HasSubstr("(IR version 10 and opset 23, newer than this build's ONNX library (IR 8, opset 17))")));
  Model ir8(23, 8);  // only the opset is newer: only it is named
  *ir8.m.mutable_graph() = n.m.graph();
  EXPECT_THAT([&] { load_onnx(ir8.save("opset23_ir8.onnx"), {}); },
              ThrowsMessage<Error>(HasSubstr("(opset 23, newer than this build's ONNX library (IR 8, opset 17))")));
}

// A model newer than placer knows (here opset 30, IR 12) is read as opset 21 / IR 10 are, and the
// import says so through OnnxImportOptions::warn (it said nothing, found by a review); opset 21 and
// IR 10 themselves, nothing.
TEST(OnnxExports, ModelsNewerThanPlacerKnowsAreReadWithAWarning) {
  for (const auto& [opset, ir, said] : {std::tuple{30, 10, "opset 30, newer than the newest placer reads (IR 10, opset 21)"},
                                        std::tuple{21, 12, "IR version 12, newer than the newest placer reads"},
                                        std::tuple{21, 10, ""}}) {
    Model m(opset, ir);
    m.input("x", {std::int64_t{4}, std::int64_t{8}});
    m.node("Relu", {"x"}, {"y"});
    m.output("y", 2);
    std::vector<std::string> warnings;
    OnnxImportOptions o;
    o.warn = [&](const std::string& w) { warnings.push_back(w); };
    const std::string path = m.save("newer.onnx");
    Graph g = load_onnx(path, o);
    EXPECT_EQ(shape_of(g, "y"), (std::vector<std::int64_t>{4, 8}));
    if (std::string(said).empty()) {
      EXPECT_TRUE(warnings.empty()) << opset;
    } else {
      ASSERT_EQ(warnings.size(), 1u) << opset;
      EXPECT_THAT(warnings[0], HasSubstr("'" + path + "': " + said)) << warnings[0];
    }
    EXPECT_NO_THROW(load_onnx(path, {}));  // no one to tell: nothing said, nothing refused
  }
}

TEST(OnnxExports, DropoutInTrainingModeIsAKernelAndAPassThroughOtherwise) {
  for (const bool training : {true, false}) {
    SCOPED_TRACE(training ? "training_mode true" : "training_mode false");
    Model m(13);
    m.input("x", {std::int64_t{8}, std::int64_t{64}});
    m.initializer("w", {64, 64});
    m.node("MatMul", {"x", "w"}, {"h"});
    auto* mode = m.node("Constant", {}, {"mode"})->add_attribute();
    mode->set_name("value"), mode->set_type(onnx::AttributeProto::TENSOR);
    mode->mutable_t()->set_data_type(onnx::TensorProto::BOOL), mode->mutable_t()->add_int32_data(training ? 1 : 0);
    m.initializer("ratio", {}, 0.1f);
    m.node("Dropout", {"h", "ratio", "mode"}, {"y"});
    m.output("y", 2);
    Graph g = load_onnx(m.save("dropout.onnx"), {});
    OpId dropout = kNoId;
    for (OpId o = 0; o < g.num_ops(); ++o)
      if (g.op_type(o) == "Dropout") dropout = o;
    ASSERT_NE(dropout, kNoId);
    EXPECT_EQ(g.op_work(dropout).op_class, training ? OpClass::elementwise : OpClass::alias);
    EXPECT_DOUBLE_EQ(g.op_work(dropout).flops, training ? 3.0 * 8 * 64 : 0.0);
  }
}

TEST(OnnxExports, ADataDependentShapeIsRefusedSayingSo) {
  Model m;
  m.input("x", {std::int64_t{4}, std::int64_t{4}});
  m.node("NonZero", {"x"}, {"nz"});
  m.node("Transpose", {"nz"}, {"idx"});
  m.output("idx", 2, onnx::TensorProto::INT64);
  EXPECT_THAT([&] { load_onnx(m.save("nonzero.onnx"), {}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("output of op '/NonZero_nz', NonZero"), HasSubstr("data-dependent shape"))));
}

// Found by review: kept as one op (--unknown-ops), an If or a Loop read only the inputs its node
// lists, not what its branches or body read from the main graph: a Loop whose body multiplies by
// an initializer W had no parameter, and an If whose branches read x neither waited for x nor was
// trained through it.
TEST(OnnxExports, SubgraphsReadFromTheMainGraphAreInputsOfTheirNode) {
  auto graph_attr = [](onnx::NodeProto* n, const std::string& name, const onnx::GraphProto& g) {
    auto* a = n->add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = g;
  };
  auto value = [](onnx::ValueInfoProto* vi, const std::string& name, std::vector<Dim> dims, int elem = onnx::TensorProto::FLOAT) {
    vi->set_name(name);
    Model::type(vi, std::move(dims), elem);
  };
  // Loop: 3 times h = Tanh(h @ W), W an initializer of the main graph.
  onnx::GraphProto body;
  body.set_name("body");
  value(body.add_input(), "i", {}, onnx::TensorProto::INT64);
  value(body.add_input(), "cond_in", {}, onnx::TensorProto::BOOL);
  value(body.add_input(), "h_in", {std::int64_t{4}, std::int64_t{16}});
  for (const auto& [op, in, out] : {std::tuple{"MatMul", std::vector<std::string>{"h_in", "W"}, "hm"},
                                    std::tuple{"Tanh", std::vector<std::string>{"hm"}, "h_out"},
                                    std::tuple{"Identity", std::vector<std::string>{"cond_in"}, "cond_out"}}) {
    auto* n = body.add_node();
    n->set_op_type(op), n->set_name(std::string("/body/") + op), n->add_output(out);
    for (const auto& x : in) n->add_input(x);
  }
  value(body.add_output(), "cond_out", {}, onnx::TensorProto::BOOL);
  value(body.add_output(), "h_out", {std::int64_t{4}, std::int64_t{16}});
  Model loop(13);
  loop.input("x0", {std::int64_t{4}, std::int64_t{16}});
  loop.initializer("W", {16, 16});
  loop.input("trip", {}, onnx::TensorProto::INT64);  // given with the data: a Loop placer does not unroll
  graph_attr(loop.node("Loop", {"trip", "", "x0"}, {"y"}), "body", body);
  value(loop.m.mutable_graph()->add_output(), "y", {std::int64_t{4}, std::int64_t{16}});  // inference does not run the body
  OnnxImportOptions o;
  o.unknown_op_default = OpClass::elementwise;
  const Graph gl = load_onnx(loop.save("loop_outer.onnx"), o);
  const auto ins = gl.op_inputs(gl.find_op("/Loop_y"));
  EXPECT_NE(std::find(ins.begin(), ins.end(), gl.find_tensor("W")), ins.end());
  EXPECT_EQ(parameters(gl), 256u);
  EXPECT_GT(derive_training_step(gl, Optimizer::sgd).num_ops(), gl.num_ops());  // W is trained through the Loop

  // A body's own input may bear the name of a value outside, made after the Loop from its result:
  // another value, no cycle (a review found it refused as one).
  onnx::GraphProto shadowing = body;
  shadowing.mutable_input(2)->set_name("z");
  shadowing.mutable_node(0)->set_input(0, "z");
  Model after(13);
  after.input("x0", {std::int64_t{4}, std::int64_t{16}});
  after.initializer("W", {16, 16});
  after.input("trip", {}, onnx::TensorProto::INT64);
  graph_attr(after.node("Loop", {"trip", "", "x0"}, {"y"}), "body", shadowing);
  after.node("Relu", {"y"}, {"z"});
  value(after.m.mutable_graph()->add_value_info(), "y", {std::int64_t{4}, std::int64_t{16}});  // inference does not run the body
  value(after.m.mutable_graph()->add_output(), "z", {std::int64_t{4}, std::int64_t{16}});
  const Graph ga = load_onnx(after.save("loop_shadowing.onnx"), o);
  EXPECT_EQ(ga.op_inputs(ga.find_op("/Relu_z"))[0], ga.find_tensor("y"));

  // A body's own sparse initializer is its own name, not one of the main graph (found by review:
  // it was taken for an outer read, which no node gives).
  onnx::GraphProto sparse_body = body;
  auto* sparse = sparse_body.add_sparse_initializer();
  sparse->add_dims(4), sparse->add_dims(16);
  sparse->mutable_values()->set_name("S"), sparse->mutable_values()->set_data_type(onnx::TensorProto::FLOAT);
  sparse->mutable_values()->add_dims(1), sparse->mutable_values()->add_float_data(1.0f);
  sparse->mutable_indices()->set_name("S_idx"), sparse->mutable_indices()->set_data_type(onnx::TensorProto::INT64);
  sparse->mutable_indices()->add_dims(1), sparse->mutable_indices()->add_int64_data(0);
  sparse_body.mutable_node(1)->set_input(0, "hs");  // Tanh(h_in @ W + S)
  auto* add = sparse_body.add_node();
  add->set_op_type("Add"), add->set_name("/body/Add"), add->add_input("hm"), add->add_input("S"), add->add_output("hs");
  sparse_body.mutable_node()->SwapElements(1, 3);  // Add before Tanh
  sparse_body.mutable_node()->SwapElements(2, 3);
  Model with_sparse = loop;
  graph_attr(with_sparse.m.mutable_graph()->mutable_node(0), "body", sparse_body);
  with_sparse.m.mutable_graph()->mutable_node(0)->mutable_attribute()->DeleteSubrange(0, 1);  // the first body
  const Graph gs = load_onnx(with_sparse.save("loop_sparse.onnx"), o);
  EXPECT_EQ(gs.op_inputs(gs.find_op("/Loop_y")).size(), ins.size());

  // If on a computed condition, both branches reading x = MatMul(x0, W).
  Model cond(13);
  cond.input("x0", {std::int64_t{4}, std::int64_t{16}});
  cond.initializer("W", {16, 16});
  cond.node("MatMul", {"x0", "W"}, {"x"});
  cond.node("ReduceSum", {"x"}, {"s"});
  cond.initializer("zero", {}, 0.0f);
  cond.node("Greater", {"s", "zero"}, {"c"});
  add_relu_or_tanh_if(cond, "c", "y");
  cond.output("y", 2);
  const Graph gi = load_onnx(cond.save("if_outer.onnx"), o);
  const auto if_ins = gi.op_inputs(gi.find_op("/If_y"));
  EXPECT_EQ(if_ins.size(), 2u);
  EXPECT_NE(std::find(if_ins.begin(), if_ins.end(), gi.find_tensor("x")), if_ins.end());
  EXPECT_NO_THROW(derive_training_step(gi, Optimizer::sgd));  // y depends on W through x

  // Branches that give back values from around them as they are read them too (a review).
  Model given(13);
  given.input("x0", {std::int64_t{4}, std::int64_t{16}});
  given.initializer("W", {16, 16});
  given.node("MatMul", {"x0", "W"}, {"x"});
  given.node("Tanh", {"x"}, {"t"});
  given.node("ReduceSum", {"x"}, {"s"});
  given.initializer("zero", {}, 0.0f);
  given.node("Greater", {"s", "zero"}, {"c"});
  onnx::NodeProto* choose = given.node("If", {"c"}, {"y"});
  for (const auto& [attr, out] : {std::pair{"then_branch", "x"}, std::pair{"else_branch", "t"}}) {
    onnx::GraphProto branch;
    branch.set_name(attr);
    value(branch.add_output(), out, {std::int64_t{4}, std::int64_t{16}});
    graph_attr(choose, attr, branch);
  }
  given.output("y", 2);
  const Graph gg = load_onnx(given.save("if_gives_outer.onnx"), o);
  const auto given_ins = gg.op_inputs(gg.find_op("/If_y"));
  for (const char* name : {"x", "t"}) EXPECT_NE(std::find(given_ins.begin(), given_ins.end(), gg.find_tensor(name)), given_ins.end()) << name;
}

// Loops and Scans whose iterations are known before the step are unrolled: each iteration's nodes
// are ops of their own, under the module "<node>.<i>".
namespace loops {

void graph_attr(onnx::NodeProto* n, const std::string& name, const onnx::GraphProto& g) {
  auto* a = n->add_attribute();
  a->set_name(name), a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = g;
}
void value(onnx::ValueInfoProto* vi, const std::string& name, std::vector<Dim> dims, int elem = onnx::TensorProto::FLOAT) {
  vi->set_name(name);
  Model::type(vi, std::move(dims), elem);
}
onnx::NodeProto* body_node(onnx::GraphProto& body, const std::string& op, std::vector<std::string> in, const std::string& out) {
  auto* n = body.add_node();
  n->set_op_type(op), n->set_name("/cell/" + op + "_" + out), n->add_output(out);
  for (auto& x : in) n->add_input(x);
  return n;
}
std::vector<std::int64_t> dims(const Graph& g, TensorId t) {
  const auto shape = g.tensor_shape(t);
  return {shape.begin(), shape.end()};
}
std::int64_t int_scalar(Model& m, const std::string& name, std::int64_t v) {
  auto* t = m.m.mutable_graph()->add_initializer();
  t->set_name(name), t->set_data_type(onnx::TensorProto::INT64), t->add_int64_data(v);
  return v;
}
// A recurrent cell as a Loop body: h = Tanh(h_in @ W + x_t), x_t = Gather(x, i) of the outer x
// [T, 4, 16]; scan output s = Relu(h). With `data_cond`, the body's condition is ReduceSum(h) > 0.
onnx::GraphProto cell_body(bool data_cond = false) {
  onnx::GraphProto body;
  body.set_name("cell");
  value(body.add_input(), "i", {}, onnx::TensorProto::INT64);
  value(body.add_input(), "cond_in", {}, onnx::TensorProto::BOOL);
  value(body.add_input(), "h_in", {std::int64_t{4}, std::int64_t{16}});
  body_node(body, "Gather", {"x", "i"}, "x_t");
  body_node(body, "MatMul", {"h_in", "W"}, "hm");
  body_node(body, "Add", {"hm", "x_t"}, "ha");
  body_node(body, "Tanh", {"ha"}, "h_out");
  body_node(body, "Relu", {"h_out"}, "s");
  if (data_cond) {
    body_node(body, "ReduceSum", {"h_out"}, "sum");
    auto* zero = body.add_initializer();
    zero->set_name("zero"), zero->set_data_type(onnx::TensorProto::FLOAT), zero->add_float_data(0.0f);
    body_node(body, "Greater", {"sum", "zero"}, "cond_out");
  } else {
    body_node(body, "Identity", {"cond_in"}, "cond_out");
  }
  value(body.add_output(), "cond_out", {}, onnx::TensorProto::BOOL);
  value(body.add_output(), "h_out", {std::int64_t{4}, std::int64_t{16}});
  value(body.add_output(), "s", {std::int64_t{4}, std::int64_t{16}});
  return body;
}
// x [T, 4, 16], h0 [4, 16], W [16, 16]; the Loop runs `trip` (a name) times over cell_body.
Model recurrent_loop(std::int64_t steps, const std::string& trip, bool data_cond = false) {
  Model m(13);
  m.input("x", {steps, std::int64_t{4}, std::int64_t{16}});
  m.input("h0", {std::int64_t{4}, std::int64_t{16}});
  m.initializer("W", {16, 16});
  graph_attr(m.node("Loop", {trip, "", "h0"}, {"h", "states"}), "body", cell_body(data_cond));
  m.output("h", 2);
  m.output("states", 3);
  return m;
}

}  // namespace loops

TEST(OnnxExports, ALoopOfAKnownTripCountIsUnrolled) {
  // The trip count as PyTorch's scripted `for i in range(x.size(0))` computes it: from x's shape.
  Model m = loops::recurrent_loop(5, "T");
  m.node("Shape", {"x"}, {"x_shape"});
  loops::int_scalar(m, "zero_index", 0);
  m.node("Gather", {"x_shape", "zero_index"}, {"T"});
  // Nodes in order: the trip count's before the Loop.
  auto* nodes = m.m.mutable_graph()->mutable_node();
  std::rotate(nodes->begin(), nodes->begin() + 1, nodes->end());
  const Graph g = load_onnx(m.save("loop_unrolled.onnx"), {});
  EXPECT_EQ(g.find_op("/Loop_h"), kNoId);
  for (int i = 0; i < 5; ++i) {
    const OpId mm = g.find_op("/Loop_h/" + std::to_string(i) + "/cell/MatMul_hm");
    ASSERT_NE(mm, kNoId) << i;
    EXPECT_EQ(g.module_name(g.op_module(mm)), "Loop_h." + std::to_string(i) + ".cell");
    EXPECT_EQ(g.op_work(mm).flops, 2.0 * 4 * 16 * 16);
    // Iteration i reads iteration i-1's state (h0 first).
    const TensorId h_in = g.op_inputs(mm)[0];
    EXPECT_EQ(g.tensor_name(h_in), i == 0 ? "h0" : "/Loop_h/" + std::to_string(i - 1) + "/h_out");
  }
  EXPECT_EQ(g.find_op("/Loop_h/5/cell/MatMul_hm"), kNoId);
  EXPECT_EQ(parameters(g), 256u);  // W, one weight for every iteration
  const auto h = g.find_tensor("h"), states = g.find_tensor("states");
  ASSERT_NE(h, kNoId);
  ASSERT_NE(states, kNoId);
  EXPECT_EQ(loops::dims(g, h), (std::vector<std::int64_t>{4, 16}));
  EXPECT_EQ(loops::dims(g, states), (std::vector<std::int64_t>{5, 4, 16}));
  // Trained through every iteration: five products' gradients, one update of W.
  const Graph step = derive_training_step(g, Optimizer::sgd);
  std::map<std::string, int> types;
  for (OpId o = 0; o < step.num_ops(); ++o) ++types[step.op_type(o)];
  EXPECT_EQ(types["MatMulGrad"], 5);
  EXPECT_EQ(types["SGDUpdate"], 1);
}

TEST(OnnxExports, ALoopOfAConstantTripCountOrConditionFalseIsUnrolled) {
  Model m = loops::recurrent_loop(3, "three");
  loops::int_scalar(m, "three", 3);
  const Graph g = load_onnx(m.save("loop_constant.onnx"), {});
  EXPECT_NE(g.find_op("/Loop_h/2/cell/Tanh_h_out"), kNoId);
  EXPECT_EQ(loops::dims(g, g.find_tensor("states")), (std::vector<std::int64_t>{3, 4, 16}));

  // A condition given false: no iteration; the state passes through, a scan output would be empty.
  Model off = loops::recurrent_loop(3, "three");
  loops::int_scalar(off, "three", 3);
  auto* f = off.m.mutable_graph()->add_initializer();
  f->set_name("off"), f->set_data_type(onnx::TensorProto::BOOL), f->add_int32_data(0);
  off.m.mutable_graph()->mutable_node(0)->set_input(1, "off");
  EXPECT_THAT([&] { load_onnx(off.save("loop_off.onnx"), {}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("runs no iteration"), HasSubstr("'states' would be empty"))));
  off.m.mutable_graph()->mutable_node(0)->set_output(1, "");
  off.m.mutable_graph()->mutable_output()->RemoveLast();
  const Graph none = load_onnx(off.save("loop_off_state.onnx"), {});
  EXPECT_EQ(none.find_op("/Loop_h/0/cell/MatMul_hm"), kNoId);
  EXPECT_EQ(loops::dims(none, none.find_tensor("h")), (std::vector<std::int64_t>{4, 16}));
  // Given false, the condition the body computes from the data does not matter: no iteration runs.
  Model off_early = loops::recurrent_loop(3, "three", /*data_cond=*/true);
  loops::int_scalar(off_early, "three", 3);
  *off_early.m.mutable_graph()->add_initializer() = *f;
  off_early.m.mutable_graph()->mutable_node(0)->set_input(1, "off");
  off_early.m.mutable_graph()->mutable_node(0)->set_output(1, "");
  off_early.m.mutable_graph()->mutable_output()->RemoveLast();
  const Graph skipped = load_onnx(off_early.save("loop_off_early.onnx"), {});
  EXPECT_EQ(skipped.find_op("/Loop_h/0/cell/MatMul_hm"), kNoId);
  // So for a while-loop's trip count (PyTorch writes 2^63 - 1): no iteration, not "too many".
  for (auto& t : *off_early.m.mutable_graph()->mutable_initializer())
    if (t.name() == "three") t.set_int64_data(0, std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(load_onnx(off_early.save("loop_off_while.onnx"), {}).find_op("/Loop_h/0/cell/MatMul_hm"), kNoId);
}

TEST(OnnxExports, LoopsInsideALoopAreUnrolledWithIt) {
  // Outer: 2 times { inner: 3 times h = Tanh(h @ W) }, the inner trip count a body initializer.
  onnx::GraphProto inner;
  inner.set_name("inner");
  loops::value(inner.add_input(), "j", {}, onnx::TensorProto::INT64);
  loops::value(inner.add_input(), "c_in", {}, onnx::TensorProto::BOOL);
  loops::value(inner.add_input(), "g_in", {std::int64_t{4}, std::int64_t{16}});
  loops::body_node(inner, "MatMul", {"g_in", "W"}, "gm");
  loops::body_node(inner, "Tanh", {"gm"}, "g_out");
  loops::body_node(inner, "Identity", {"c_in"}, "c_out");
  loops::value(inner.add_output(), "c_out", {}, onnx::TensorProto::BOOL);
  loops::value(inner.add_output(), "g_out", {std::int64_t{4}, std::int64_t{16}});
  onnx::GraphProto outer;
  outer.set_name("outer");
  loops::value(outer.add_input(), "i", {}, onnx::TensorProto::INT64);
  loops::value(outer.add_input(), "cond_in", {}, onnx::TensorProto::BOOL);
  loops::value(outer.add_input(), "h_in", {std::int64_t{4}, std::int64_t{16}});
  auto* three = outer.add_initializer();
  three->set_name("three"), three->set_data_type(onnx::TensorProto::INT64), three->add_int64_data(3);
  auto* loop = loops::body_node(outer, "Loop", {"three", "", "h_in"}, "h_out");
  loop->set_name("inner");
  loops::graph_attr(loop, "body", inner);
  loops::body_node(outer, "Identity", {"cond_in"}, "cond_out");
  loops::value(outer.add_output(), "cond_out", {}, onnx::TensorProto::BOOL);
  loops::value(outer.add_output(), "h_out", {std::int64_t{4}, std::int64_t{16}});
  Model m(13);
  m.input("h0", {std::int64_t{4}, std::int64_t{16}});
  m.initializer("W", {16, 16});
  loops::int_scalar(m, "two", 2);
  loops::graph_attr(m.node("Loop", {"two", "", "h0"}, {"h"}), "body", outer);
  m.output("h", 2);
  const Graph g = load_onnx(m.save("loop_nested.onnx"), {});
  int products = 0;
  for (OpId o = 0; o < g.num_ops(); ++o) products += g.op_type(o) == "MatMul";
  EXPECT_EQ(products, 6);
  const OpId last = g.find_op("/Loop_h/1/inner/2/cell/MatMul_gm");
  ASSERT_NE(last, kNoId);
  EXPECT_EQ(g.module_name(g.op_module(last)), "Loop_h.1.inner.2.cell");
  EXPECT_EQ(parameters(g), 256u);

  // W held by the inner body, as an initializer or a Constant node: still one weight (each outer
  // iteration's copy of the inner Loop made a weight of its own: 512 parameters, a review).
  for (const bool as_constant : {false, true}) {
    Model held = m;
    auto* graph = held.m.mutable_graph();
    graph->mutable_initializer()->DeleteSubrange(0, 1);  // W
    onnx::GraphProto& outer_body = *graph->mutable_node(0)->mutable_attribute(0)->mutable_g();
    onnx::GraphProto& inner_body = *outer_body.mutable_node(0)->mutable_attribute(0)->mutable_g();
    onnx::TensorProto w;
    w.set_name("W"), w.set_data_type(onnx::TensorProto::FLOAT), w.add_dims(16), w.add_dims(16);
    for (int k = 0; k < 256; ++k) w.add_float_data(0.01f);
    if (as_constant) {
      onnx::NodeProto* c = inner_body.add_node();
      c->set_op_type("Constant"), c->set_name("/cell/W"), c->add_output("W");
      auto* a = c->add_attribute();
      a->set_name("value"), a->set_type(onnx::AttributeProto::TENSOR);
      *a->mutable_t() = w;
      a->mutable_t()->clear_name();
      inner_body.mutable_node()->SwapElements(0, inner_body.node_size() - 1);
      inner_body.mutable_node()->SwapElements(1, inner_body.node_size() - 1);
    } else {
      *inner_body.add_initializer() = w;
    }
    const Graph gh = load_onnx(held.save(as_constant ? "loop_nested_constant.onnx" : "loop_nested_initializer.onnx"), {});
    EXPECT_EQ(parameters(gh), 256u) << as_constant;
    const Graph step = derive_training_step(gh, Optimizer::sgd);
    int updates = 0;
    for (OpId o = 0; o < step.num_ops(); ++o) updates += step.op_type(o) == "SGDUpdate";
    EXPECT_EQ(updates, 1) << as_constant;
  }
}

// A weight held by a Constant node in the branch a decided If takes is a parameter, as in the main
// graph (it stayed a constant: the branch's Constants were read before the If was decided).
TEST(OnnxExports, AWeightInTheBranchTakenIsAParameter) {
  Model m(13);
  m.input("x", {std::int64_t{4}, std::int64_t{16}});
  auto* yes = m.m.mutable_graph()->add_initializer();
  yes->set_name("yes"), yes->set_data_type(onnx::TensorProto::BOOL), yes->add_int32_data(1);
  auto* branch = m.node("If", {"yes"}, {"y"});
  for (const char* name : {"then_branch", "else_branch"}) {
    auto* a = branch->add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto& g = *a->mutable_g();
    g.set_name(name);
    auto* w = g.add_node();
    w->set_op_type("Constant"), w->set_name(std::string("/") + name + "/W"), w->add_output(std::string(name) + "_W");
    auto* value = w->add_attribute();
    value->set_name("value"), value->set_type(onnx::AttributeProto::TENSOR);
    value->mutable_t()->set_data_type(onnx::TensorProto::FLOAT), value->mutable_t()->add_dims(16), value->mutable_t()->add_dims(16);
    for (int k = 0; k < 256; ++k) value->mutable_t()->add_float_data(0.01f);
    auto* mm = g.add_node();
    mm->set_op_type("MatMul"), mm->set_name(std::string("/") + name + "/MatMul"), mm->add_input("x"), mm->add_input(std::string(name) + "_W");
    mm->add_output(std::string(name) + "_y");
    loops::value(g.add_output(), std::string(name) + "_y", {std::int64_t{4}, std::int64_t{16}});
  }
  m.output("y", 2);
  const Graph g = load_onnx(m.save("if_branch_weight.onnx"), {});
  EXPECT_EQ(parameters(g), 256u);
  for (OpId o = 0; o < g.num_ops(); ++o) EXPECT_NE(g.op_type(o), "Constant") << g.op_name(o);
}

// A body whose condition output is a constant false stops after its first iteration (ONNX checks
// the condition before each): one iteration, with or without a trip count; none for a count of 0.
TEST(OnnxExports, ALoopWhoseBodySaysStopRunsOnce) {
  auto do_once = [](const std::string& trip) {
    Model m = loops::recurrent_loop(1, trip);
    auto* body = m.m.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_g();
    for (auto& n : *body->mutable_node())
      if (n.op_type() == "Identity") {
        n.set_op_type("Constant"), n.clear_input();
        auto* a = n.add_attribute();
        a->set_name("value"), a->set_type(onnx::AttributeProto::TENSOR);
        a->mutable_t()->set_data_type(onnx::TensorProto::BOOL), a->mutable_t()->add_int32_data(0);
      }
    return m;
  };
  for (const std::string trip : {"", "five"}) {
    Model m = do_once(trip);
    if (!trip.empty()) loops::int_scalar(m, "five", 5);
    const Graph g = load_onnx(m.save("loop_once.onnx"), {});
    EXPECT_NE(g.find_op("/Loop_h/0/cell/MatMul_hm"), kNoId) << trip;
    EXPECT_EQ(g.find_op("/Loop_h/1/cell/MatMul_hm"), kNoId) << trip;
    EXPECT_EQ(loops::dims(g, g.find_tensor("states")), (std::vector<std::int64_t>{1, 4, 16})) << trip;
  }
  Model none = do_once("zero");
  loops::int_scalar(none, "zero", 0);
  EXPECT_THAT([&] { load_onnx(none.save("loop_once_none.onnx"), {}); }, ThrowsMessage<Error>(HasSubstr("runs no iteration")));
  // A trip count given with the data may be 0: not known before the step.
  Model data = do_once("n");
  data.input("n", {}, onnx::TensorProto::INT64);
  EXPECT_THAT([&] { load_onnx(data.save("loop_once_data.onnx"), {}); }, ThrowsMessage<Error>(HasSubstr("Loop")));
}

TEST(OnnxExports, ALoopWhoseIterationsDependOnDataIsRefusedSayingSo) {
  // A trip count given with the data.
  Model data_trip = loops::recurrent_loop(3, "n");
  data_trip.input("n", {}, onnx::TensorProto::INT64);
  EXPECT_THAT([&] { load_onnx(data_trip.save("loop_data_trip.onnx"), {}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("Loop"), HasSubstr("iterations are not known before the step"))));
  // An early exit computed from the state: unrolling 3 times would be a silent wrong answer.
  Model early = loops::recurrent_loop(3, "three", /*data_cond=*/true);
  loops::int_scalar(early, "three", 3);
  EXPECT_THAT([&] { load_onnx(early.save("loop_early_exit.onnx"), {}); },
              ThrowsMessage<Error>(HasSubstr("iterations are not known before the step")));
  // A negative trip count runs no iteration (ONNX's rule): its scan output would be empty.
  Model negative = loops::recurrent_loop(3, "minus");
  loops::int_scalar(negative, "minus", -2);
  EXPECT_THAT([&] { load_onnx(negative.save("loop_negative.onnx"), {}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("Loop '/Loop_h'"), HasSubstr("runs no iteration"))));
  // Trip counts that unroll past the node limit, 2^62 and 2^63 - 1 among them (the first wrapped
  // the limit's product and unrolled for ever, the second became no iteration: a review).
  for (const std::int64_t count : {std::int64_t{1'000'000}, std::int64_t{1} << 62, std::numeric_limits<std::int64_t>::max()}) {
    Model huge = loops::recurrent_loop(3, "many");
    loops::int_scalar(huge, "many", count);
    huge.m.mutable_graph()->mutable_node(0)->set_output(1, "");
    huge.m.mutable_graph()->mutable_output()->RemoveLast();
    EXPECT_THAT([&] { load_onnx(huge.save("loop_huge.onnx"), {}); },
                ThrowsMessage<Error>(AllOf(HasSubstr(" iterations"), HasSubstr("more than 1048576 nodes"))))
        << count;
  }
  // --unknown-ops prices such a Loop as one op, as before it was unrolled at all (a review).
  Model kept = loops::recurrent_loop(3, "many");
  loops::int_scalar(kept, "many", 2'000'000);
  kept.m.mutable_graph()->mutable_node(0)->set_output(1, "");
  kept.m.mutable_graph()->mutable_output()->RemoveLast();
  // (ONNX's inference leaves a loop-carried value's sizes open: the model declares them.)
  kept.m.mutable_graph()->mutable_output()->Clear();
  loops::value(kept.m.mutable_graph()->add_output(), "h", {std::int64_t{4}, std::int64_t{16}});
  OnnxImportOptions priced;
  priced.unknown_op_default = OpClass::elementwise;
  const Graph one = load_onnx(kept.save("loop_kept.onnx"), priced);
  EXPECT_NE(one.find_op("/Loop_h"), kNoId);
}

// A weight held by a Constant node in the body is one weight, trained (it was copied into every
// iteration and never trained), and a body whose If gives the iteration number as it is reads it
// (the number was not made: a dangling input). Both found by a review.
TEST(OnnxExports, ABodysConstantsAndItsSubgraphsReadsAreTheLoops) {
  Model m = loops::recurrent_loop(3, "three");
  loops::int_scalar(m, "three", 3);
  auto* graph = m.m.mutable_graph();
  for (int i = 0; i < graph->initializer_size(); ++i)
    if (graph->initializer(i).name() == "W") graph->mutable_initializer()->DeleteSubrange(i, 1);
  onnx::GraphProto& body = *graph->mutable_node(0)->mutable_attribute(0)->mutable_g();
  auto* w = body.add_node();
  w->set_op_type("Constant"), w->set_name("/cell/W"), w->add_output("W");
  auto* value = w->add_attribute();
  value->set_name("value"), value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::FLOAT), value->mutable_t()->add_dims(16), value->mutable_t()->add_dims(16);
  for (int k = 0; k < 256; ++k) value->mutable_t()->add_float_data(0.01f * static_cast<float>(k % 7));
  body.mutable_node()->SwapElements(0, body.node_size() - 1);  // the Constant first
  // x_t = Gather(x, k), k the output of an If whose branches give i as it is.
  auto* yes = body.add_initializer();
  yes->set_name("yes"), yes->set_data_type(onnx::TensorProto::BOOL), yes->add_int32_data(1);
  auto* branch = body.add_node();
  branch->set_op_type("If"), branch->set_name("/cell/If"), branch->add_input("yes"), branch->add_output("k");
  for (const char* name : {"then_branch", "else_branch"}) {
    auto* a = branch->add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::GRAPH);
    a->mutable_g()->set_name(name);
    a->mutable_g()->add_output()->set_name("i");
  }
  for (auto& n : *body.mutable_node())
    if (n.op_type() == "Gather") n.set_input(1, "k");
  // The If before the Gather that reads it.
  auto* nodes = body.mutable_node();
  for (int i = nodes->size() - 1; i > 1; --i) nodes->SwapElements(i, i - 1);
  OnnxImportOptions o;
  o.data_inputs = {"x", "h0"};  // (x read through the If's output, not a constant index, would pass for a table)
  const Graph g = load_onnx(m.save("loop_body_constant.onnx"), o);
  EXPECT_EQ(parameters(g), 256u);
  int products = 0;
  for (OpId o = 0; o < g.num_ops(); ++o) products += g.op_type(o) == "MatMul";
  EXPECT_EQ(products, 3);
  const Graph step = derive_training_step(g, Optimizer::sgd);
  std::map<std::string, int> types;
  for (OpId o = 0; o < step.num_ops(); ++o) ++types[step.op_type(o)];
  EXPECT_EQ(types["SGDUpdate"], 1);
}

namespace lists {

void sequence_of_floats(onnx::ValueInfoProto* vi, const std::string& name, std::vector<Dim> dims) {
  vi->set_name(name);
  onnx::ValueInfoProto elem;
  Model::type(&elem, std::move(dims));
  *vi->mutable_type()->mutable_sequence_type()->mutable_elem_type() = elem.type();
}

// A scripted RNN as PyTorch writes lists: xs = x.unbind(0); hs = []; for i in range(len(xs)):
// h = tanh(h @ W + xs[i]); hs.append(h). Then y = torch.stack(hs), last = hs[-1], and
// z = torch.cat(hs[:-1]) (SequenceErase of the last). x [5, 4, 16], h0 [4, 16], W [16, 16].
Model scripted_rnn() {
  Model m(13);
  m.input("x", {std::int64_t{5}, std::int64_t{4}, std::int64_t{16}});
  m.input("h0", {std::int64_t{4}, std::int64_t{16}});
  m.initializer("W", {16, 16});
  loops::int_scalar(m, "minus_one", -1);
  auto* unbind = m.node("SplitToSequence", {"x"}, {"xs"});
  Model::attr(unbind, "axis", 0), Model::attr(unbind, "keepdims", 0);
  m.node("SequenceLength", {"xs"}, {"T"});
  Model::attr(m.node("SequenceEmpty", {}, {"empty"}), "dtype", onnx::TensorProto::FLOAT);
  onnx::GraphProto body;
  body.set_name("cell");
  loops::value(body.add_input(), "i", {}, onnx::TensorProto::INT64);
  loops::value(body.add_input(), "cond_in", {}, onnx::TensorProto::BOOL);
  loops::value(body.add_input(), "h_in", {std::int64_t{4}, std::int64_t{16}});
  sequence_of_floats(body.add_input(), "hs_in", {std::int64_t{4}, std::int64_t{16}});
  loops::body_node(body, "SequenceAt", {"xs", "i"}, "x_t");
  loops::body_node(body, "MatMul", {"h_in", "W"}, "hm");
  loops::body_node(body, "Add", {"hm", "x_t"}, "ha");
  loops::body_node(body, "Tanh", {"ha"}, "h_out");
  loops::body_node(body, "SequenceInsert", {"hs_in", "h_out"}, "hs_out");
  loops::body_node(body, "Identity", {"cond_in"}, "cond_out");
  loops::value(body.add_output(), "cond_out", {}, onnx::TensorProto::BOOL);
  loops::value(body.add_output(), "h_out", {std::int64_t{4}, std::int64_t{16}});
  sequence_of_floats(body.add_output(), "hs_out", {std::int64_t{4}, std::int64_t{16}});
  loops::graph_attr(m.node("Loop", {"T", "", "h0", "empty"}, {"h", "hs"}), "body", body);
  auto* stack = m.node("ConcatFromSequence", {"hs"}, {"y"});
  Model::attr(stack, "axis", 0), Model::attr(stack, "new_axis", 1);
  m.node("SequenceAt", {"hs", "minus_one"}, {"last"});
  m.node("SequenceErase", {"hs"}, {"first_four"});
  Model::attr(m.node("ConcatFromSequence", {"first_four"}, {"z"}), "axis", 0);
  m.output("y", 3);
  m.output("last", 2);
  m.output("z", 2);
  return m;
}

}  // namespace lists

// Lists whose tensors are known before the step (a scripted model's, once its loop is unrolled)
// become the tensors they hold: no sequence op is left to place.
TEST(OnnxExports, ScriptedListsOfKnownTensorsAreResolved) {
  OnnxImportOptions told;
  DecidedBeforeStep decided;
  told.decided = [&](const DecidedBeforeStep& d) { decided = d; };
  const Graph g = load_onnx(lists::scripted_rnn().save("scripted_lists.onnx"), told);
  // unbind, len, [], 5 x (xs[i], append), stack, hs[-1], erase, cat: 17 sequence ops.
  EXPECT_EQ(decided.loops, 1u);
  EXPECT_EQ(decided.iterations, 5u);
  EXPECT_EQ(decided.sequence_ops, 17u);
  std::map<std::string, int> types;
  for (OpId o = 0; o < g.num_ops(); ++o) ++types[g.op_type(o)];
  for (const auto& [type, count] : types) EXPECT_EQ(type.find("Sequence"), std::string::npos) << type << " x" << count;
  EXPECT_EQ(types["MatMul"], 5);
  EXPECT_EQ(types["Split"], 1);  // x.unbind(0): one Split, its parts squeezed
  EXPECT_EQ(loops::dims(g, g.find_tensor("y")), (std::vector<std::int64_t>{5, 4, 16}));
  EXPECT_EQ(loops::dims(g, g.find_tensor("last")), (std::vector<std::int64_t>{4, 16}));
  EXPECT_EQ(loops::dims(g, g.find_tensor("z")), (std::vector<std::int64_t>{16, 16}));
  // hs[-1] is the last iteration's state; iteration 2 reads x's third part.
  const OpId last = g.producer(g.find_tensor("last"));
  EXPECT_EQ(g.tensor_name(g.op_inputs(last)[0]), "/Loop_h/4/h_out");
  const OpId add = g.find_op("/Loop_h/2/cell/Add_ha");
  ASSERT_NE(add, kNoId);
  const OpId part = g.producer(g.op_inputs(add)[1]);
  ASSERT_NE(part, kNoId);
  EXPECT_EQ(g.op_type(part), "Identity");
  EXPECT_EQ(g.op_type(g.producer(g.op_inputs(part)[0])), "Squeeze");
  EXPECT_EQ(derive_training_step(g, Optimizer::sgd).num_ops() > g.num_ops(), true);

  // A loop over the first 3 of the 5 parts: the 2 parts no one reads are not placed (their Squeezes
  // were made in the round before the loop's reads were known).
  Model three = lists::scripted_rnn();
  loops::int_scalar(three, "three", 3);
  three.m.mutable_graph()->mutable_node(3)->set_input(0, "three");
  const Graph g3 = load_onnx(three.save("scripted_lists_three.onnx"), {});
  std::map<std::string, int> types3;
  for (OpId o = 0; o < g3.num_ops(); ++o) ++types3[g3.op_type(o)];
  EXPECT_EQ(types3["Squeeze"], 3);
  EXPECT_EQ(types3["MatMul"], 3);

  // A position past the end is refused, naming the node.
  Model past = lists::scripted_rnn();
  loops::int_scalar(past, "seven", 7);
  for (auto& n : *past.m.mutable_graph()->mutable_node())
    if (n.op_type() == "SequenceAt") n.set_input(1, "seven");
  EXPECT_THAT([&] { load_onnx(past.save("scripted_lists_past.onnx"), {}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("SequenceAt"), HasSubstr("position 7 is outside [-5, 4]"))));
  // A tensor of another type than the list's is refused naming the insert (not the Concat made of it).
  Model ints = lists::scripted_rnn();
  for (auto& n : *ints.m.mutable_graph()->mutable_node())
    if (n.op_type() == "SequenceEmpty") n.mutable_attribute(0)->set_i(onnx::TensorProto::INT64);
  EXPECT_THAT([&] { load_onnx(ints.save("scripted_lists_ints.onnx"), {}); },
              ThrowsMessage<Error>(HasSubstr("SequenceInsert '/Loop_h/0/cell/SequenceInsert_hs_out': inserts '/Loop_h/0/h_out' (FLOAT) into a "
                                             "sequence of INT64 tensors")));
  // A list whose length depends on the data (a loop run for a count given with the data) is still
  // refused: its sequence values are not tensors.
  Model data = lists::scripted_rnn();
  data.input("n", {}, onnx::TensorProto::INT64);
  data.m.mutable_graph()->mutable_node(3)->set_input(0, "n");
  ASSERT_EQ(data.m.graph().node(3).op_type(), "Loop");
  EXPECT_THAT([&] { load_onnx(data.save("scripted_lists_data.onnx"), {}); }, ThrowsMessage<Error>(HasSubstr("sequence")));
}

// The parts of a split no one reads are not placed (`len(x.unbind(0))`), and the parts a split
// would make count against the model's bound on nodes before any is made.
TEST(OnnxExports, AListsUnreadPartsAreDroppedAndItsLengthBounded) {
  auto unbind_len = [](std::int64_t n) {
    Model m(13);
    m.input("x", {n, std::int64_t{2}});
    auto* unbind = m.node("SplitToSequence", {"x"}, {"xs"});
    Model::attr(unbind, "axis", 0), Model::attr(unbind, "keepdims", 0);
    m.node("SequenceLength", {"xs"}, {"n"});
    m.node("Relu", {"x"}, {"y"});
    m.output("y", 2);
    m.output("n", 0, onnx::TensorProto::INT64);
    return m;
  };
  const Graph g = load_onnx(unbind_len(6).save("unbind_len.onnx"), {});
  EXPECT_EQ(g.num_ops(), 1u);
  EXPECT_EQ(g.op_type(0), "Relu");
  EXPECT_THAT([&] { load_onnx(unbind_len(600000).save("unbind_long.onnx"), {}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("SplitToSequence"), HasSubstr("would add 1200001 nodes or concatenated inputs, past the model's bound of 1048576"))));
  // A split of one size 0: libonnx's shape rule divided by it (SIGFPE, found by OnnxMutation).
  Model zero = unbind_len(6);
  loops::int_scalar(zero, "zero", 0);
  zero.m.mutable_graph()->mutable_node(0)->add_input("zero");
  EXPECT_THAT([&] { load_onnx(zero.save("split_zero.onnx"), {}); }, ThrowsMessage<Error>(HasSubstr("its split is 0, not a positive size")));
}

// A position read from a list (`xs[xs[0]]`, and so on down a chain) is known in the round that
// reads the list: a chain of 301 such reads decides in one round (one link a round, 256 rounds
// refused it).
TEST(OnnxExports, PositionsReadFromAListAreKnownInTheSameRound) {
  Model m(13);
  m.input("x", {std::int64_t{3}});
  loops::int_scalar(m, "one", 1);
  loops::int_scalar(m, "zero", 0);
  m.node("SequenceConstruct", {"one", "zero"}, {"positions"});  // positions[1] = 0, positions[0] = 1
  std::string at = "one";
  for (int k = 0; k < 301; ++k) {
    const std::string next = "p" + std::to_string(k);
    m.node("SequenceAt", {"positions", at}, {next});
    at = next;
  }
  m.node("Unsqueeze", {"x", at}, {"y"});
  m.output("y", 2);
  const Graph g = load_onnx(m.save("chain.onnx"), {});
  EXPECT_EQ(loops::dims(g, g.find_tensor("y")), (std::vector<std::int64_t>{1, 3}));
}

// Optionals known before the step (a scripted model's `if bias is not None`): OptionalHasElement
// becomes a constant, so the If it decides is replaced by its branch, and OptionalGetElement the
// tensor held; getting from an empty one is refused.
TEST(OnnxExports, OptionalsKnownBeforeTheStepDecideTheirIfs) {
  auto model = [](bool given) {
    Model m(18);
    m.input("x", {std::int64_t{4}, std::int64_t{16}});
    auto* opt = m.node("Optional", given ? std::vector<std::string>{"x"} : std::vector<std::string>{}, {"maybe"});
    if (!given) {
      auto* a = opt->add_attribute();
      a->set_name("type"), a->set_type(onnx::AttributeProto::TYPE_PROTO);
      onnx::ValueInfoProto vi;
      Model::type(&vi, {std::int64_t{4}, std::int64_t{16}});
      *a->mutable_tp() = vi.type();
    }
    m.node("OptionalHasElement", {"maybe"}, {"has"});
    add_relu_or_tanh_if(m, "has", "y");
    m.output("y", 2);
    return m;
  };
  OnnxImportOptions told;
  DecidedBeforeStep decided;
  told.decided = [&](const DecidedBeforeStep& d) { decided = d; };
  const Graph some = load_onnx(model(true).save("optional_some.onnx"), told);
  EXPECT_EQ(some.op_type(some.producer(some.find_tensor("y"))), "Relu");
  EXPECT_EQ(decided.ifs, 1u);
  EXPECT_EQ(decided.sequence_ops, 2u);  // Optional, OptionalHasElement
  const Graph none = load_onnx(model(false).save("optional_none.onnx"), {});
  EXPECT_EQ(none.op_type(none.producer(none.find_tensor("y"))), "Tanh");

  Model get = model(true);
  get.node("OptionalGetElement", {"maybe"}, {"held"});
  get.node("Sigmoid", {"held"}, {"z"});
  get.output("z", 2);
  const Graph held = load_onnx(get.save("optional_get.onnx"), {});
  const OpId sigmoid = held.producer(held.find_tensor("z"));
  EXPECT_EQ(held.op_type(held.producer(held.op_inputs(sigmoid)[0])), "Identity");
  EXPECT_EQ(held.tensor_name(held.op_inputs(held.producer(held.op_inputs(sigmoid)[0]))[0]), "x");
  Model empty = model(false);
  empty.node("OptionalGetElement", {"maybe"}, {"held"});
  empty.node("Sigmoid", {"held"}, {"z"});
  empty.output("z", 2);
  EXPECT_THAT([&] { load_onnx(empty.save("optional_get_none.onnx"), {}); },
              ThrowsMessage<Error>(HasSubstr("OptionalGetElement '/OptionalGetElement_held': its optional 'maybe' holds nothing")));
}

TEST(OnnxExports, AScanOfKnownLengthIsUnrolled) {
  // h = Tanh(h_in @ W + x_t) over x [4, 5, 16] on axis 1, read from the end; the states stacked on
  // axis 0 in reverse.
  onnx::GraphProto body;
  body.set_name("cell");
  loops::value(body.add_input(), "h_in", {std::int64_t{4}, std::int64_t{16}});
  loops::value(body.add_input(), "x_t", {std::int64_t{4}, std::int64_t{16}});
  loops::body_node(body, "MatMul", {"h_in", "W"}, "hm");
  loops::body_node(body, "Add", {"hm", "x_t"}, "ha");
  loops::body_node(body, "Tanh", {"ha"}, "h_out");
  loops::value(body.add_output(), "h_out", {std::int64_t{4}, std::int64_t{16}});
  loops::value(body.add_output(), "h_out", {std::int64_t{4}, std::int64_t{16}});
  Model m(13);
  m.input("x", {std::int64_t{4}, std::int64_t{5}, std::int64_t{16}});
  m.input("h0", {std::int64_t{4}, std::int64_t{16}});
  m.initializer("W", {16, 16});
  auto* scan = m.node("Scan", {"h0", "x"}, {"h", "states"});
  Model::attr(scan, "num_scan_inputs", 1);
  for (const auto& [name, v] : {std::pair{"scan_input_axes", 1}, std::pair{"scan_input_directions", 1}, std::pair{"scan_output_directions", 1}}) {
    auto* a = scan->add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::INTS), a->add_ints(v);
  }
  loops::graph_attr(scan, "body", body);
  m.output("h", 2);
  m.output("states", 3);
  const Graph g = load_onnx(m.save("scan_unrolled.onnx"), {});
  EXPECT_EQ(loops::dims(g, g.find_tensor("h")), (std::vector<std::int64_t>{4, 16}));
  EXPECT_EQ(loops::dims(g, g.find_tensor("states")), (std::vector<std::int64_t>{5, 4, 16}));
  for (int i = 0; i < 5; ++i) {
    // Iteration i reads x[:, 4 - i] through a Gather on axis 1.
    const OpId add = g.find_op("/Scan_h/" + std::to_string(i) + "/cell/Add_ha");
    ASSERT_NE(add, kNoId) << i;
    const OpId slice = g.producer(g.op_inputs(add)[1]);
    ASSERT_NE(slice, kNoId);
    EXPECT_EQ(g.op_type(slice), "Gather");
    EXPECT_EQ(g.op_attrs(slice).get_int("axis", -1), 1);
  }
  EXPECT_EQ(parameters(g), 256u);
  EXPECT_NO_THROW(derive_training_step(g, Optimizer::sgd));
}

// Tensors of any element type, for the models below.
onnx::TensorProto* typed_initializer(Model& m, const std::string& name, int elem, std::vector<std::int64_t> dims, std::int64_t fill = 1) {
  auto* t = m.m.mutable_graph()->add_initializer();
  t->set_name(name), t->set_data_type(elem);
  std::int64_t n = 1;
  for (auto d : dims) t->add_dims(d), n *= d;
  for (std::int64_t i = 0; i < n; ++i) {
    if (elem == onnx::TensorProto::FLOAT) t->add_float_data(static_cast<float>(fill));
    else if (elem == onnx::TensorProto::INT64) t->add_int64_data(fill);
    else t->add_int32_data(static_cast<std::int32_t>(fill));  // uint8, int8, int32: int32_data
  }
  return t;
}

// Opset 1-9 Slice takes starts, ends and axes as attributes: the shape arithmetic of PaddleOCR's
// recognition and classification models (opset 9) was left unknown, and both were refused.
TEST(OnnxExports, SliceOfOpset9FoldsShapeArithmetic) {
  Model m(9, 7);
  m.input("x", {std::string("N"), std::int64_t{8}, std::int64_t{4}, std::int64_t{4}});
  m.node("GlobalAveragePool", {"x"}, {"g"});
  m.node("Shape", {"g"}, {"s"});
  auto* slice = m.node("Slice", {"s"}, {"batch"});
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::int64_t>>{{"axes", 0}, {"starts", 0}, {"ends", 1}}) {
    auto* a = slice->add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::INTS), a->add_ints(value);
  }
  typed_initializer(m, "minus_one", onnx::TensorProto::INT64, {1}, -1);
  Model::attr(m.node("Concat", {"batch", "minus_one"}, {"target"}), "axis", 0);
  m.node("Reshape", {"g", "target"}, {"y"});
  m.output("y", 2);
  OnnxImportOptions o;
  o.dim_values["N"] = 2;
  Graph g = load_onnx(m.save("slice_opset9.onnx"), o);
  EXPECT_EQ(shape_of(g, "y"), (std::vector<std::int64_t>{2, 8}));
}

// Opset 18's Split(num_outputs) and ReduceMean(axes as an input) inside an If's branch (the dynamo
// exporter puts whole models in branches): the checker saw them unconverted and refused the file.
TEST(OnnxExports, NewerOpsetFormsInsideBranchesAreReadToo) {
  Model m(18, 8);
  m.input("x", {std::int64_t{4}, std::int64_t{6}});
  auto* cond = m.node("Constant", {}, {"c"})->add_attribute();
  cond->set_name("value"), cond->set_type(onnx::AttributeProto::TENSOR);
  cond->mutable_t()->set_data_type(onnx::TensorProto::BOOL), cond->mutable_t()->add_int32_data(1);
  auto* branch = m.node("If", {"c"}, {"r"});
  for (const char* b : {"then_branch", "else_branch"}) {
    auto* a = branch->add_attribute();
    a->set_name(b), a->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* sub = a->mutable_g();
    sub->set_name(b);
    auto node = [&](const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
      auto* n = sub->add_node();
      n->set_op_type(op), n->set_name(std::string(b) + "/" + op);
      for (auto& i : in) n->add_input(i);
      for (auto& o : out) n->add_output(o);
      return n;
    };
    if (b[0] == 't') {
      Model::attr(node("Split", {"x"}, {"p", "q"}), "num_outputs", 2);
      auto* axes = node("Constant", {}, {"ax"})->add_attribute();  // the branch's own constant
      axes->set_name("value"), axes->set_type(onnx::AttributeProto::TENSOR);
      axes->mutable_t()->set_data_type(onnx::TensorProto::INT64), axes->mutable_t()->add_dims(1), axes->mutable_t()->add_int64_data(1);
      node("ReduceMean", {"p", "ax"}, {"o"});
    } else {
      node("Identity", {"x"}, {"o"});
    }
    sub->add_output()->set_name("o");
  }
  m.output("r", 2);
  Graph g = load_onnx(m.save("branch_opset18.onnx"), {});
  EXPECT_EQ(shape_of(g, "r"), (std::vector<std::int64_t>{2, 1}));
}

// Quantized models (onnxruntime's quantizer): DynamicQuantizeLinear, ConvInteger and the QDQ ops
// have cost rules (the quantized ISNet was refused; with --unknown-ops its convolutions came out 200
// times under the same network in fp16), and a per-axis scale is no broadcast.
TEST(OnnxExports, QuantizedOpsArePricedAsTheirProducts) {
  Model m(13, 8);
  m.input("x", {std::int64_t{1}, std::int64_t{3}, std::int64_t{8}, std::int64_t{8}});
  m.node("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"});
  typed_initializer(m, "w", onnx::TensorProto::UINT8, {4, 3, 3, 3}, 3);
  typed_initializer(m, "wz", onnx::TensorProto::UINT8, {}, 0);
  m.node("ConvInteger", {"xq", "w", "xz", "wz"}, {"acc"});  // int32 [1,4,6,6]
  typed_initializer(m, "scale", onnx::TensorProto::FLOAT, {4}, 1);
  typed_initializer(m, "zero", onnx::TensorProto::INT32, {4}, 0);
  Model::attr(m.node("DequantizeLinear", {"acc", "scale", "zero"}, {"y"}), "axis", 1);
  m.output("y", 4);
  Graph g = load_onnx(m.save("quantized.onnx"), {});
  EXPECT_EQ(shape_of(g, "y"), (std::vector<std::int64_t>{1, 4, 6, 6}));
  std::map<std::string, double> flops;
  for (OpId o = 0; o < g.num_ops(); ++o) flops[g.op_type(o)] = g.op_work(o).flops;
  EXPECT_DOUBLE_EQ(flops["DynamicQuantizeLinear"], 5.0 * 192);                // min, max, quantize
  EXPECT_DOUBLE_EQ(flops["ConvInteger"], 2.0 * 144 * 27 + 192 + 108);         // products, zero points
  EXPECT_DOUBLE_EQ(flops["DequantizeLinear"], 2.0 * 144);
  // The integer weight is the model's parameter (counted, never trained); scales and zero points
  // are settings, not parameters.
  EXPECT_EQ(parameters(g), 108u);
  EXPECT_EQ(g.tensor_kind(g.find_tensor("w")), TensorKind::parameter);
  EXPECT_NE(g.tensor_kind(g.find_tensor("scale")), TensorKind::parameter);

  // QDQ: an int8 weight dequantized per channel into a float Conv (onnxruntime's static
  // quantization). It counted 16 parameters (the scales) for 1,152 weights.
  Model q(13, 8);
  q.input("x", {std::int64_t{1}, std::int64_t{8}, std::int64_t{6}, std::int64_t{6}});
  typed_initializer(q, "w_q", onnx::TensorProto::INT8, {16, 8, 3, 3}, 2);
  typed_initializer(q, "w_scale", onnx::TensorProto::FLOAT, {16}, 1);
  typed_initializer(q, "w_zp", onnx::TensorProto::INT8, {16}, 0);
  Model::attr(q.node("DequantizeLinear", {"w_q", "w_scale", "w_zp"}, {"w"}), "axis", 0);
  q.node("Conv", {"x", "w"}, {"y"});
  q.output("y", 4);
  Graph gq = load_onnx(q.save("qdq_conv.onnx"), {});
  EXPECT_EQ(parameters(gq), 16u * 8 * 9);
  // A training step of it trains nothing, and says so.
  EXPECT_THAT([&] { (void)derive_training_step(gq, Optimizer::sgd); }, ThrowsMessage<Error>(HasSubstr("use inference mode")));
}

// --unknown-ops says which op types it priced, and how many ops: a count of FLOPs that is mostly a
// guess is no longer silent.
TEST(OnnxExports, UnknownOpsPricedByTheFallbackAreNamed) {
  Model m(17, 8);
  auto* custom = m.m.add_opset_import();
  custom->set_domain("com.example"), custom->set_version(1);
  m.input("x", {std::int64_t{4}, std::int64_t{8}});
  for (const char* out : {"a", "b"}) {
    auto* n = m.node("Mystery", {out[0] == 'a' ? "x" : "a"}, {out});
    n->set_domain("com.example");
    auto* vi = m.m.mutable_graph()->add_value_info();
    vi->set_name(out);
    Model::type(vi, {std::int64_t{4}, std::int64_t{8}});
  }
  m.node("Relu", {"b"}, {"y"});
  m.output("y", 2);
  OnnxImportOptions o;
  o.unknown_op_default = OpClass::elementwise;
  std::vector<std::string> warnings;
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  load_onnx(m.save("mystery.onnx"), o);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("--unknown-ops priced 2 ops of types without a cost rule as elementwise (one FLOP per output element): com.example::Mystery (2)"));
  // As aliases they do no work (a QA pass: the note said one FLOP per output element there too).
  o.unknown_op_default = OpClass::alias;
  warnings.clear();
  load_onnx(m.save("mystery_alias.onnx"), o);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("as alias (no work: their times taken as zero): com.example::Mystery (2); a guess"));
}

// Nodes out of topological order (an fp16 converter appended the input's Cast at the end): ONNX
// requires the order and its checker refused the file; onnxruntime sorts, and so does placer, with
// a warning. The importer and the executor read the same sorted nodes (read_onnx_file).
TEST(OnnxExports, NodesOutOfOrderAreReadSorted) {
  Model m(17, 8);
  m.input("x", {std::int64_t{4}, std::int64_t{8}});
  m.initializer("w", {8, 2});
  m.node("MatMul", {"r", "w"}, {"y"});
  m.node("Relu", {"x"}, {"r"});
  m.output("y", 2);
  const std::string path = m.save("unsorted.onnx");
  std::vector<std::string> warnings;
  OnnxImportOptions o;
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  Graph g = load_onnx(path, o);
  EXPECT_EQ(shape_of(g, "y"), (std::vector<std::int64_t>{4, 2}));
  EXPECT_EQ(g.op_type(0), "Relu");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("not in topological order"));
  bool sorted = false;
  const onnx::ModelProto read = read_onnx_file(path, &sorted);
  EXPECT_TRUE(sorted);
  EXPECT_EQ(read.graph().node(0).op_type(), "Relu");
  // A cycle is named, node by node (the checker said an input "is not output of any previous
  // nodes", as of a name nothing makes: a QA pass).
  Model c(17, 8);
  c.input("x", {std::int64_t{4}});
  c.node("Add", {"x", "b"}, {"a"});
  c.node("Relu", {"a"}, {"b"});
  c.output("b", 1);
  c.m.mutable_graph()->set_name("g");
  EXPECT_THAT([&] { load_onnx(c.save("cycle.onnx"), {}); },
              ThrowsMessage<Error>(HasSubstr("graph 'g' has a cycle of 2 node(s): node '/Add_a' (Add) -[a]-> node '/Relu_b' (Relu) -[b]-> node '/Add_a' (Add)")));
  // A node that reads what it makes.
  Model self(17, 8);
  self.input("x", {std::int64_t{4}});
  self.node("Add", {"x", "a"}, {"a"});
  self.output("a", 1);
  EXPECT_THAT([&] { load_onnx(self.save("self_cycle.onnx"), {}); }, ThrowsMessage<Error>(HasSubstr("reads 'a', which it makes")));
  // Or whose branch reads what it makes.
  Model branch_self(17, 8);
  branch_self.input("x", {std::int64_t{4}});
  branch_self.input("c", {}, onnx::TensorProto::BOOL);
  onnx::NodeProto* choose = branch_self.node("If", {"c"}, {"a"});
  for (const auto& [attr, in] : {std::pair{"then_branch", "a"}, std::pair{"else_branch", "x"}}) {
    onnx::GraphProto g;
    g.set_name(attr);
    auto* relu = g.add_node();
    relu->set_op_type("Relu"), relu->add_input(in), relu->add_output(std::string(attr) + "_out");
    loops::value(g.add_output(), std::string(attr) + "_out", {std::int64_t{4}});
    loops::graph_attr(choose, attr, g);
  }
  branch_self.output("a", 1);
  EXPECT_THAT([&] { load_onnx(branch_self.save("branch_self_cycle.onnx"), {}); },
              ThrowsMessage<Error>(HasSubstr("node '/If_a' (If) has a subgraph that reads 'a', which it makes")));
  // A name that nothing makes.
  Model missing(17, 8);
  missing.input("x", {std::int64_t{4}});
  missing.node("Add", {"x", "nope"}, {"a"});
  missing.output("a", 1);
  EXPECT_THAT([&] { load_onnx(missing.save("missing_name.onnx"), {}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("missing_name.onnx"), HasSubstr("node '/Add_a' (Add) reads 'nope', which no node makes"))));
}

// A Range whose integer bounds' difference overflows its type is refused as such (from -2^63 to
// 2^62 by 2^62 came out empty, named as an empty tensor further on: a QA pass); one whose
// difference fits exactly (2^63 - 1, which doubles round up) is read.
TEST(OnnxExports, ARangeWhoseLengthOverflowsIsRefused) {
  auto range = [](std::int64_t start, std::int64_t limit, std::int64_t delta) {
    Model m(17, 8);
    m.input("x", {std::int64_t{2}});
    for (const auto& [name, v] : {std::pair{"start", start}, std::pair{"limit", limit}, std::pair{"delta", delta}}) {
      auto* t = m.m.mutable_graph()->add_initializer();
      t->set_name(name), t->set_data_type(onnx::TensorProto::INT64), t->add_int64_data(v);
    }
    m.node("Range", {"start", "limit", "delta"}, {"r"});
    Model::attr(m.node("Cast", {"r"}, {"rf"}), "to", onnx::TensorProto::FLOAT);
    m.node("Add", {"x", "rf"}, {"y"});
    m.output("y", 1);
    return m.save("range.onnx");
  };
  const std::int64_t big = std::int64_t{1} << 62;
  EXPECT_THAT([&] { load_onnx(range(std::numeric_limits<std::int64_t>::min(), big, big), {}); },
              ThrowsMessage<Error>(HasSubstr("a range from -9223372036854775808 to 4611686018427387904, whose length overflows the 64-bit")));
  const Graph g = load_onnx(range(-big, big - 1, big), {});
  EXPECT_EQ(shape_of(g, "y"), (std::vector<std::int64_t>{2}));
}

// A device is no model file (/dev/zero was read for 2 GB before the refusal: a QA pass).
TEST(OnnxExports, ADeviceIsNoModelFile) {
  EXPECT_THAT([&] { load_onnx("/dev/zero", {}); }, ThrowsMessage<Error>(HasSubstr("model file '/dev/zero' is a device, not a file")));
}

// A Constant's value_ints is data to shape inference as its `value` is (a Reshape to one had no
// known size: a QA pass); value_int, value_float and value_floats too.
TEST(OnnxExports, ConstantListValuesAreData) {
  Model m(17, 8);
  m.input("x", {std::int64_t{4}, std::int64_t{16}});
  auto* shape = m.m.mutable_graph()->add_node();
  shape->set_op_type("Constant"), shape->add_output("shape");
  auto* a = shape->add_attribute();
  a->set_name("value_ints"), a->set_type(onnx::AttributeProto::INTS), a->add_ints(8), a->add_ints(8);
  m.node("Reshape", {"x", "shape"}, {"y"});
  m.output("y", 2);
  Graph g = load_onnx(m.save("constant_value_ints.onnx"), {});
  EXPECT_EQ(shape_of(g, "y"), (std::vector<std::int64_t>{8, 8}));
}

// An STFT without `onesided` is onesided, its default: 9 bins of a 16-sample window, not the 16
// libonnx 1.12's rule gave while the cost rule priced 9 (a QA pass).
TEST(OnnxExports, AnStftIsOnesidedByDefault) {
  for (const int onesided : {-1, 0, 1}) {
    SCOPED_TRACE(onesided);
    Model m(17, 8);
    m.input("x", {std::int64_t{1}, std::int64_t{64}, std::int64_t{1}});
    auto* step = m.m.mutable_graph()->add_initializer();
    step->set_name("step"), step->set_data_type(onnx::TensorProto::INT64), step->add_int64_data(8);
    m.initializer("window", {16});
    auto* stft = m.node("STFT", {"x", "step", "window"}, {"y"});
    if (onesided >= 0) Model::attr(stft, "onesided", std::int64_t{onesided});
    m.output("y", 4);
    Graph g = load_onnx(m.save("stft.onnx"), {});
    EXPECT_EQ(shape_of(g, "y"), (std::vector<std::int64_t>{1, 7, onesided == 0 ? 16 : 9, 2}));
  }
}

// An axis libonnx's rules read as a 32-bit int is refused beyond that range (Concat's axis
// 2^32 + 1 was read as 1, and the output came out [4,32]: a QA pass).
TEST(OnnxExports, AnAxisBeyond32BitsIsRefused) {
  Model m(17, 8);
  m.input("x", {std::int64_t{4}, std::int64_t{16}});
  auto* concat = m.m.mutable_graph()->add_node();
  concat->set_op_type("Concat"), concat->set_name("cat"), concat->add_input("x"), concat->add_input("x"), concat->add_output("y");
  auto* a = concat->add_attribute();
  a->set_name("axis"), a->set_type(onnx::AttributeProto::INT), a->set_i((std::int64_t{1} << 32) + 1);
  m.output("y", 2);
  EXPECT_THAT([&] { load_onnx(m.save("concat_axis.onnx"), {}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("attribute 'axis'"), HasSubstr("4294967297"), HasSubstr("beyond any value the op takes"))));
}

// Weights stored as Constant nodes (Paddle2ONNX writes every weight so) are parameters, as
// initializers are: PP-OCR's detector was read with no parameters and its training step trained
// nothing. A Constant that only scales activations stays a constant.
TEST(OnnxExports, WeightsInConstantNodesAreParameters) {
  Model m(11, 7);
  m.input("x", {std::int64_t{1}, std::int64_t{3}, std::int64_t{8}, std::int64_t{8}});
  m.constant("conv.w", {4, 3, 3, 3}, 0.1f);
  m.constant("conv.b", {4}, 0.0f);
  m.node("Conv", {"x", "conv.w", "conv.b"}, {"c"});
  m.node("Flatten", {"c"}, {"f"});  // [1, 144]
  m.constant("fc.w", {144, 10}, 0.1f);
  m.constant("fc.b", {10}, 0.0f);
  m.node("MatMul", {"f", "fc.w"}, {"mm"});
  m.node("Add", {"mm", "fc.b"}, {"logits"});
  m.constant("temperature", {10}, 0.5f);
  m.node("Mul", {"logits", "temperature"}, {"y"});
  m.output("y", 2);
  Graph g = load_onnx(m.save("constant_weights.onnx"), {});
  EXPECT_EQ(parameters(g), 4u * 27 + 4 + 144 * 10 + 10);
  EXPECT_NE(g.producer(g.find_tensor("temperature")), kNoId);  // still its Constant's output
  for (OpId o = 0; o < g.num_ops(); ++o) EXPECT_FALSE(g.op_type(o) == "Constant" && g.op_outputs(o)[0] != g.find_tensor("temperature"));
  // Its training step updates them.
  const Graph step = derive_training_step(g, Optimizer::sgd);
  std::size_t updates = 0;
  for (OpId o = 0; o < step.num_ops(); ++o) updates += step.op_role(o) == OpRole::update;
  EXPECT_EQ(updates, 4u);
}

// An If decided only when the model runs names the graph inputs whose values decide it (Silero
// VAD branches on its sample rate: the error named a dimension of the If's output instead).
TEST(OnnxExports, AnIfDecidedAtRunTimeNamesTheInputsItDependsOn) {
  Model m(13);
  m.input("x", {std::int64_t{4}, std::int64_t{16}});
  m.input("sr", {}, onnx::TensorProto::INT64);
  typed_initializer(m, "rate", onnx::TensorProto::INT64, {}, 16000);
  m.node("Equal", {"sr", "rate"}, {"c"});
  add_relu_or_tanh_if(m, "c", "y");
  m.output("y", 2);
  EXPECT_THAT([&] { load_onnx(m.save("if_on_input.onnx"), {}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("an If whose condition is only known when the model runs"),
                                         HasSubstr("computed from the value of graph input 'sr'"))));
}

// Split is folded: tf2onnx writes Pad's pads as Concat(Split(constant)), and MLSD's models were
// refused for a "data-dependent" shape. Sizes from the attribute (opset 11) or the input (13), or
// equal parts.
TEST(OnnxExports, SplitOfConstantsFoldsShapeArithmetic) {
  for (const std::int64_t opset : {11, 13}) {
    SCOPED_TRACE(opset);
    Model m(opset, 7);
    m.input("x", {std::int64_t{1}, std::int64_t{4}, std::int64_t{8}, std::int64_t{8}});
    auto* pads = typed_initializer(m, "pads_c", onnx::TensorProto::INT64, {8}, 0);
    pads->set_int64_data(5, 1), pads->set_int64_data(6, 1);
    std::vector<std::string> parts;
    for (int i = 0; i < 8; ++i) parts.push_back("s" + std::to_string(i));
    if (opset < 13) {
      auto* split = m.node("Split", {"pads_c"}, parts);
      auto* a = split->add_attribute();
      a->set_name("split"), a->set_type(onnx::AttributeProto::INTS);
      for (int i = 0; i < 8; ++i) a->add_ints(1);
    } else {
      typed_initializer(m, "sizes", onnx::TensorProto::INT64, {8}, 1);
      m.node("Split", {"pads_c", "sizes"}, parts);
    }
    Model::attr(m.node("Concat", {"s0", "s3", "s1", "s2", "s4", "s7", "s5", "s6"}, {"pads"}), "axis", 0);
    m.node("Pad", {"x", "pads"}, {"y"});
    m.output("y", 4);
    Graph g = load_onnx(m.save("split_pads.onnx"), {});
    // pads [0,0,0,0,0,1,1,0] reordered to [0,0,0,0, 0,0,1,1]: the end of H and W grows by one.
    EXPECT_EQ(shape_of(g, "y"), (std::vector<std::int64_t>{1, 4, 9, 9}));
  }
  // Equal parts without sizes.
  Model e(13, 7);
  e.input("x", {std::int64_t{9}});
  typed_initializer(e, "shape_c", onnx::TensorProto::INT64, {4}, 3);
  e.node("Split", {"shape_c"}, {"a", "b"});  // [3, 3] and [3, 3]
  e.node("Reshape", {"x", "b"}, {"y"});
  e.output("y", 2);
  Graph ge = load_onnx(e.save("split_equal.onnx"), {});
  EXPECT_EQ(shape_of(ge, "y"), (std::vector<std::int64_t>{3, 3}));
}

}  // namespace
}  // namespace placer
