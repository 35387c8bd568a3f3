// Checks shared by placer's JSON readers (graph, cluster, placement, profile files), reading one, and
// writing files (JSON or text) so that a failed write never leaves half a file.
//
//   check_known_fields(j, {"name", "shape", "dtype"}, "graph file 'g.json': tensors[3]");
#pragma once

#include <cstdint>
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

#include <unistd.h>

#include "placer/util/error.hpp"
#include "placer/util/output_file.hpp"
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

// A JSON value as an error message shows it: scalars and small flat lists or objects as written,
// cut to `max_chars`; anything nested or longer described ("a list of 3 items"). Bounded whatever
// the value (a file's deeply nested or huge value never becomes the message).
inline std::string json_excerpt(const nlohmann::json& v, std::size_t max_chars = 80) {
  auto cut = [max_chars](std::string s) { return s.size() > max_chars ? s.substr(0, max_chars) + "..." : s; };
  if (v.is_array() || v.is_object()) {
    bool flat = v.size() <= 16;
    for (auto it = v.begin(); flat && it != v.end(); ++it) flat = it->is_primitive() && !(it->is_string() && it->get_ref<const std::string&>().size() > 32);
    if (flat) return cut(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    const std::string n = std::to_string(v.size());
    return v.is_array() ? "a list of " + n + (v.size() == 1 ? " item" : " items") : "an object of " + n + (v.size() == 1 ? " field" : " fields");
  }
  return cut(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

// Deepest nesting of lists and objects a placer file may have (its formats need a handful).
inline constexpr std::size_t kMaxJsonNesting = 256;

// Checks a file's `version` field (`format`: "cluster", "graph", ...): an integer from 1 to
// `current`. A later version is "newer than this placer reads", however large: one past 64 bits,
// which the JSON parser reads as a float, too (it was told to be an integer: a QA pass).
inline void check_format_version(const nlohmann::json& version, const std::string& source, const std::string& format, std::int64_t current) {
  // (Every double from 2^63 up is a whole number.)
  const bool past_64_bits = version.is_number_float() && version.get<double>() >= 0x1p63;
  const bool newer = past_64_bits || (version.is_number_unsigned() && version.get<std::uint64_t>() > static_cast<std::uint64_t>(current)) ||
                     (version.is_number_integer() && version.get<std::int64_t>() > current);
  if (newer)
    throw Error(source + ": " + format + " format version " + json_excerpt(version) + " is newer than this placer reads (" +
                std::to_string(current) + ")");
  if (version.is_number_float() && version.get<double>() <= -0x1p63)
    throw Error(source + ": field 'version' must be at least 1, got " + json_excerpt(version));
  if (!version.is_number_integer()) throw Error(source + ": field 'version' must be an integer, got " + json_excerpt(version));
  if (version.get<std::int64_t>() < 1) throw Error(source + ": field 'version' must be at least 1, got " + json_excerpt(version));
}

namespace detail {

// nlohmann's DOM builder behind a SAX filter that stops at an object's second use of a key
// (nlohmann::json keeps the last one silently): one pass, a few percent slower than a plain parse
// (a parse callback doubled the time of a 5 MB graph file). Keys are compared within the objects
// being read, by a scan while an object has few and through a hash set beyond.
class DuplicateKeyParser {
 public:
  using json = nlohmann::json;
  explicit DuplicateKeyParser(json& result) : dom_(result, /*allow_exceptions=*/true) {}
  std::string duplicate;
  bool too_deep = false;  // nested deeper than kMaxJsonNesting

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return dom_.number_float(v, s); }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) {
    if (++nesting_ > kMaxJsonNesting) return too_deep = true, false;
    if (levels_.size() <= depth_) levels_.emplace_back();
    Level& l = levels_[depth_++];
    l.few.clear(), l.many.clear();
    return dom_.start_object(n);
  }
  bool key(json::string_t& k) {
    Level& l = levels_[depth_ - 1];
    bool seen = false;
    if (l.many.empty()) {
      for (const auto& s : l.few) seen = seen || s == k;
      if (!seen) l.few.push_back(k);
      if (l.few.size() > 32) l.many.insert(l.few.begin(), l.few.end());
    } else {
      seen = !l.many.insert(k).second;
    }
    if (seen) return duplicate = k, false;
    return dom_.key(k);
  }
  bool end_object() { return --depth_, --nesting_, dom_.end_object(); }
  bool start_array(std::size_t n) {
    if (++nesting_ > kMaxJsonNesting) return too_deep = true, false;
    return dom_.start_array(n);
  }
  bool end_array() { return --nesting_, dom_.end_array(); }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& e) {
    error_position = position;  // the parser's own messages give line and column, a number out of range does not
    return dom_.parse_error(position, token, e);  // throws it
  }
  std::size_t error_position = 0;  // characters read when the parser gave up

 private:
  struct Level {
    std::vector<std::string> few;
    std::unordered_set<std::string> many;
  };
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::vector<Level> levels_;  // one per object open, reused
  std::size_t depth_ = 0;    // objects open
  std::size_t nesting_ = 0;  // objects and lists open
};

}  // namespace detail

// Reads and parses the JSON file at `path`; `what` names the kind of file in errors ("placement"
// gives "placement file 'p.json' ..."). Errors: the file cannot be opened, is not valid JSON (the
// parser's message, with line and column), holds a number out of range, or an object with a key
// twice. One pass, straight from the file (no copy of a big one).
inline nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  const std::string name = what + " file " + in_quotes(path);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(name + " is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + name);
  auto message = [](const std::string& m) { return m.substr(m.find(']') == std::string::npos ? 0 : m.find(']') + 2); };
  nlohmann::json j;
  detail::DuplicateKeyParser parser(j);
  try {
    nlohmann::json::sax_parse(in, &parser);
    if (parser.too_deep)
      throw Error(name + ": lists and objects nested deeper than " + std::to_string(kMaxJsonNesting) + " levels (not a placer file)");
    if (!parser.duplicate.empty()) throw Error(name + ": key " + in_quotes(parser.duplicate) + " appears twice in one object");
    // The parser takes a NUL byte for the end of its input: what came after one was ignored (a QA
    // pass). A parse that ran to the end leaves the stream at its end; one stopped at a NUL does not.
    if (!in.eof()) throw Error(name + " is not valid JSON: a NUL byte after the value (JSON text has none)");
    return j;
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(name + " is not valid JSON: " + message(e.what()));
  } catch (const nlohmann::json::exception& e) {
    // A number out of range (1e999): its place, as the parser gives it for syntax errors.
    std::string place;
    if (parser.error_position > 0) {
      std::ifstream again(path, std::ios::binary);
      std::size_t line = 1, column = 0;
      char c;
      for (std::size_t i = 0; i < parser.error_position && again.get(c); ++i) c == '\n' ? (++line, column = 0) : ++column;
      place = " at line " + std::to_string(line) + ", column " + std::to_string(column);
    }
    throw Error(name + place + ": " + message(e.what()));
  }
}

// Fails now, not after a long run, when `path` cannot be written: "cannot write `what` 'path'"
// (`what`: "trace file", "the checkpoint"). A file this creates is removed again.
// A regular file is written through `path`.tmp (write_text_file): its directory must take one too;
// a link, through its target's (output_target); a standard stream named as a file needs only to
// be open for writing.
inline void check_writable(const std::string& given, const std::string& what) {
  if (const auto fd = output_descriptor(given)) {
    if (!descriptor_writable(*fd))
      throw Error("cannot write " + what + " " + in_quotes(given) + " (descriptor " + std::to_string(*fd) + " is not open for writing)");
    return;
  }
  const std::string path = output_target(given);
  std::error_code ec;
  const bool existed = std::filesystem::exists(path, ec);
  // A pipe or a device is written in place, and only asked: opening a FIFO to probe it blocks until
  // a reader comes, which then reads the probe's close as the end of the file.
  if (existed && !std::filesystem::is_regular_file(path, ec)) {
    if (std::filesystem::is_directory(path, ec)) throw Error("cannot write " + what + " " + in_quotes(given) + " (a directory)");
    if (::access(path.c_str(), W_OK) != 0) throw Error("cannot write " + what + " " + in_quotes(given));
    return;
  }
  if (!std::ofstream(path, std::ios::app)) throw Error("cannot write " + what + " " + in_quotes(given));
  if (!existed) std::filesystem::remove(path, ec);
  const std::string tmp = path + ".tmp";
  const bool tmp_existed = std::filesystem::exists(tmp, ec);
  if (!std::ofstream(tmp, std::ios::app))
    throw Error("cannot write " + what + " " + in_quotes(given) + " (its directory takes no new file " + in_quotes(tmp) + ")");
  if (!tmp_existed) std::filesystem::remove(tmp, ec);
}

// Writes `text` to `path` through `path`.tmp and a rename, so that a failed or interrupted write
// never leaves half a file; a write that fails (a full disk) is an error naming the file (`what`:
// "trace", "placement", ...), never a success. A link is written through: its target is renamed
// onto (a dangling one's created); a standard stream named as a file (/dev/stdout,
// output_descriptor) is written to after what the process printed; another path that is not a
// regular file (a pipe) is written in place.
inline void write_text_file(const std::string& given, std::string_view text, const std::string& what) {
  if (const auto fd = output_descriptor(given)) {
    if (!write_to_descriptor(*fd, text)) throw Error("failed writing " + what + " file " + in_quotes(given));
    return;
  }
  const std::string path = output_target(given);
  std::error_code ec;
  const bool special = std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec);
  const std::string tmp = special ? path : path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) throw Error("cannot write " + what + " file " + in_quotes(given));
    out << text;
    out.flush();
    if (!out) {
      out.close();
      if (!special) std::remove(tmp.c_str());
      throw Error("failed writing " + what + " file " + in_quotes(given) + " (disk full?)");
    }
  }
  if (!special && std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error("cannot write " + what + " file " + in_quotes(given) + " (renaming " + in_quotes(tmp) + " failed)");
  }
}

// Writes `j` (`indent` as nlohmann's dump takes it) with write_text_file.
inline void write_json_file(const std::string& path, const nlohmann::json& j, const std::string& what, int indent = 1) {
  write_text_file(path, j.dump(indent) + "\n", what);
}

}  // namespace placer
