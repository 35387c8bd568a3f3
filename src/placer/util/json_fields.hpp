// Checks shared by placer's JSON readers (graph, cluster, profile files).
//
//   check_known_fields(j, {"name", "shape", "dtype"}, "graph file 'g.json': tensors[3]");
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "placer/util/error.hpp"
#include "placer/util/text.hpp"

namespace placer {

// Throws an Error naming the first field of object `j` that is not in `known` (and listing the
// known ones), so that a misspelt field is reported instead of silently ignored.
inline void check_known_fields(const nlohmann::json& j, std::initializer_list<std::string_view> known, const std::string& where) {
  if (!j.is_object()) return;
  for (const auto& [key, value] : j.items()) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || key == k;
    if (!ok) {
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      throw Error(where + ": unknown field " + in_quotes(key) + " (known: " + list + ")");
    }
  }
}

}  // namespace placer
