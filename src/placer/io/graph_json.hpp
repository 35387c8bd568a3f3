// placer's own graph format: JSON, versioned, documented in docs/formats.md. For graphs that come
// from other frameworks or from generators. Writing then reading gives the same graph (same ids,
// names, shapes, kinds, modules, roles, attributes and work), and writing it again the same text.
//
//   save_graph_json(g, "model.graph.json");
//   Graph back = load_graph_json("model.graph.json", {});
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "placer/graph/graph.hpp"

namespace placer {

inline constexpr int kGraphJsonVersion = 1;

nlohmann::json graph_to_json(const Graph& g);
// `source` names the file in error messages. Ops without "flops" are priced by the ONNX rules
// (unknown types: `unknown_op_default`, else an Error naming the type); `guessed`, when given,
// counts those priced by the default, by type.
Graph graph_from_json(const nlohmann::json& j, const std::string& source, std::optional<OpClass> unknown_op_default = std::nullopt,
                      std::map<std::string, std::size_t>* guessed = nullptr);

void save_graph_json(const Graph& g, const std::string& path);
// Throws Error with one line for a missing file, malformed JSON, a wrong format or version, a
// missing field (naming the op or tensor), or an invalid graph (cycle, dangling input, ...).
Graph load_graph_json(const std::string& path, std::optional<OpClass> unknown_op_default = std::nullopt,
                      std::map<std::string, std::size_t>* guessed = nullptr);

}  // namespace placer
