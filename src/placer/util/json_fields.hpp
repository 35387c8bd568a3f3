// Checks shared by placer's JSON readers (graph, cluster, placement, profile files), reading one, and
// writing files (JSON or text) so that a failed write never leaves half a file.
//
//   check_known_fields(j, {"name", "shape", "dtype"}, "graph file 'g.json': tensors[3]");
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

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

namespace detail {

// A SAX pass that stops at the first object holding a key twice (nlohmann::json keeps the last
// one silently): `duplicate` names it.
class DuplicateKeyFinder final : public nlohmann::json::json_sax_t {
 public:
  std::string duplicate;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return keys_.emplace_back(), true; }
  bool key(string_t& k) override {
    if (!keys_.back().insert(k).second) return duplicate = k, false;
    return true;
  }
  bool end_object() override { return keys_.pop_back(), true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception&) override { return false; }

 private:
  std::vector<std::unordered_set<std::string>> keys_;
};

}  // namespace detail

// Reads and parses the JSON file at `path`; `what` names the kind of file in errors ("placement"
// gives "placement file 'p.json' ..."). Errors: the file cannot be opened, is not valid JSON (the
// parser's message, with line and column), holds a number out of range, or (unless
// `allow_duplicate_keys`) an object with a key twice.
inline nlohmann::json read_json_file(const std::string& path, const std::string& what, bool allow_duplicate_keys = false) {
  const std::string name = what + " file " + in_quotes(path);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(name + " is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + name);
  auto message = [](const std::string& m) { return m.substr(m.find(']') == std::string::npos ? 0 : m.find(']') + 2); };
  try {
    if (allow_duplicate_keys) return nlohmann::json::parse(in);  // straight from the file: no copy of a big one
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    nlohmann::json j = nlohmann::json::parse(text);
    detail::DuplicateKeyFinder finder;
    nlohmann::json::sax_parse(text, &finder);
    if (!finder.duplicate.empty()) throw Error(name + ": key " + in_quotes(finder.duplicate) + " appears twice in one object");
    return j;
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(name + " is not valid JSON: " + message(e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw Error(name + ": " + message(e.what()));
  }
}

// Fails now, not after a long run, when `path` cannot be written: "cannot write `what` 'path'"
// (`what`: "trace file", "the checkpoint"). A file this creates is removed again.
// A regular file is written through `path`.tmp (write_text_file): its directory must take one too.
inline void check_writable(const std::string& path, const std::string& what) {
  std::error_code ec;
  const bool existed = std::filesystem::exists(path, ec);
  if (!std::ofstream(path, std::ios::app)) throw Error("cannot write " + what + " " + in_quotes(path));
  if (!existed) std::filesystem::remove(path, ec);
  if (existed && !std::filesystem::is_regular_file(path, ec)) return;  // /dev/stdout, a pipe: written in place
  const std::string tmp = path + ".tmp";
  const bool tmp_existed = std::filesystem::exists(tmp, ec);
  if (!std::ofstream(tmp, std::ios::app))
    throw Error("cannot write " + what + " " + in_quotes(path) + " (its directory takes no new file " + in_quotes(tmp) + ")");
  if (!tmp_existed) std::filesystem::remove(tmp, ec);
}

// Writes `text` to `path` through `path`.tmp and a rename, so that a failed or interrupted write
// never leaves half a file; a write that fails (a full disk) is an error naming the file (`what`:
// "trace", "placement", ...), never a success. A path that is not a regular file (/dev/stdout, a
// pipe) is written in place.
inline void write_text_file(const std::string& path, std::string_view text, const std::string& what) {
  std::error_code ec;
  const bool special = std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec);
  const std::string tmp = special ? path : path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) throw Error("cannot write " + what + " file " + in_quotes(path));
    out << text;
    out.flush();
    if (!out) {
      out.close();
      if (!special) std::remove(tmp.c_str());
      throw Error("failed writing " + what + " file " + in_quotes(path) + " (disk full?)");
    }
  }
  if (!special && std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error("cannot write " + what + " file " + in_quotes(path) + " (renaming " + in_quotes(tmp) + " failed)");
  }
}

// Writes `j` (`indent` as nlohmann's dump takes it) with write_text_file.
inline void write_json_file(const std::string& path, const nlohmann::json& j, const std::string& what, int indent = 1) {
  write_text_file(path, j.dump(indent) + "\n", what);
}

}  // namespace placer
