#include "placer/graph/einsum.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "placer/util/error.hpp"
#include "placer/util/text.hpp"

namespace placer {
namespace {

std::string quoted(std::string_view equation) { return "Einsum: equation '" + std::string(equation) + "'"; }

int letter_label(char ch) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return 26 + (ch - 'a');
  return -1;
}

char label_letter(int label) { return static_cast<char>(label < 26 ? 'A' + label : 'a' + (label - 26)); }

// One term's letters in order, with -1 where its "..." stands. Throws on any other character, a
// lone '.', or a second "...".
std::vector<int> read_term(std::string_view equation, std::string_view term) {
  std::vector<int> out;
  bool ellipsis = false;
  for (std::size_t i = 0; i < term.size(); ++i) {
    if (term[i] == '.') {
      if (term.substr(i, 3) != "...") throw Error(quoted(equation) + ": a '.' outside \"...\"");
      if (ellipsis) throw Error(quoted(equation) + ": term '" + std::string(term) + "' has \"...\" twice");
      ellipsis = true;
      out.push_back(-1);
      i += 2;
      continue;
    }
    const int label = letter_label(term[i]);
    if (label < 0) throw Error(quoted(equation) + ": '" + std::string(1, term[i]) + "' is not a letter (A-Z, a-z)");
    out.push_back(label);
  }
  return out;
}

}  // namespace

EinsumLabels parse_einsum(std::string_view equation, std::span<const std::size_t> ranks) {
  std::string eq(equation);
  std::erase(eq, ' ');  // "" is one operand of rank 0, summed into a scalar (numpy's reading)
  std::string_view lhs = eq, rhs;
  const std::size_t arrow = eq.find("->");
  const bool explicit_out = arrow != std::string::npos;
  if (explicit_out) {
    lhs = std::string_view(eq).substr(0, arrow);
    rhs = std::string_view(eq).substr(arrow + 2);
    if (rhs.find("->") != std::string_view::npos) throw Error(quoted(equation) + ": \"->\" twice");
  }
  std::vector<std::vector<int>> terms;
  for (const std::string& term : split_commas(lhs)) terms.push_back(read_term(equation, term));
  if (terms.size() != ranks.size())
    throw Error(quoted(equation) + " has " + std::to_string(terms.size()) + " operand(s), the node has " + std::to_string(ranks.size()) +
                " input(s)");

  // The broadcast rank: the longest ellipsis.
  std::size_t broadcast = 0;
  for (std::size_t t = 0; t < terms.size(); ++t) {
    const bool has_ellipsis = std::ranges::find(terms[t], -1) != terms[t].end();
    const std::size_t letters = terms[t].size() - (has_ellipsis ? 1 : 0);
    if (letters > ranks[t] || (!has_ellipsis && letters != ranks[t]))
      throw Error(quoted(equation) + ": operand " + std::to_string(t + 1) + " has rank " + std::to_string(ranks[t]) + ", its term has " +
                  std::to_string(letters) + " letter(s)" + (has_ellipsis ? " and \"...\"" : ""));
    if (has_ellipsis) broadcast = std::max(broadcast, ranks[t] - letters);
  }

  EinsumLabels e;
  e.num_labels = EinsumLabels::kLetters + static_cast<int>(broadcast);
  std::array<int, EinsumLabels::kLetters> uses{};
  for (std::size_t t = 0; t < terms.size(); ++t) {
    std::vector<int>& dims = e.operands.emplace_back();
    const std::size_t ell = ranks[t] - (terms[t].size() - (std::ranges::find(terms[t], -1) != terms[t].end() ? 1 : 0));
    for (int label : terms[t]) {
      if (label >= 0) {
        dims.push_back(label);
        ++uses[static_cast<std::size_t>(label)];
        continue;
      }
      for (std::size_t k = 0; k < ell; ++k) dims.push_back(EinsumLabels::kLetters + static_cast<int>(broadcast - ell + k));
    }
  }

  if (!explicit_out) {
    for (std::size_t k = 0; k < broadcast; ++k) e.output.push_back(EinsumLabels::kLetters + static_cast<int>(k));
    for (int label = 0; label < EinsumLabels::kLetters; ++label)
      if (uses[static_cast<std::size_t>(label)] == 1) e.output.push_back(label);
    return e;
  }
  std::array<bool, EinsumLabels::kLetters> in_output{};
  for (int label : read_term(equation, rhs)) {
    if (label < 0) {
      for (std::size_t k = 0; k < broadcast; ++k) e.output.push_back(EinsumLabels::kLetters + static_cast<int>(k));
      continue;
    }
    if (uses[static_cast<std::size_t>(label)] == 0)
      throw Error(quoted(equation) + ": output letter '" + std::string(1, label_letter(label)) + "' is in no operand");
    if (in_output[static_cast<std::size_t>(label)])
      throw Error(quoted(equation) + ": output letter '" + std::string(1, label_letter(label)) + "' is given twice");
    in_output[static_cast<std::size_t>(label)] = true;
    e.output.push_back(label);
  }
  return e;
}

std::vector<std::int64_t> einsum_label_sizes(std::string_view equation, const EinsumLabels& labels,
                                             std::span<const std::span<const std::int64_t>> shapes) {
  std::vector<std::int64_t> size(static_cast<std::size_t>(labels.num_labels), -1);  // -1: not seen yet
  std::vector<std::size_t> seen_in(size.size(), 0);  // the operand (1-based) that gave the size
  auto what = [](int label) {
    return label < EinsumLabels::kLetters ? "letter '" + std::string(1, label_letter(label)) + "'" : std::string("a broadcast dimension");
  };
  for (std::size_t t = 0; t < labels.operands.size() && t < shapes.size(); ++t) {
    const std::vector<int>& dims = labels.operands[t];
    std::vector<std::int64_t> here(size.size(), -1);  // a letter repeated in one operand (a diagonal) never broadcasts
    for (std::size_t k = 0; k < dims.size() && k < shapes[t].size(); ++k) {
      const auto label = static_cast<std::size_t>(dims[k]);
      const std::int64_t s = shapes[t][k];
      if (here[label] != -1 && here[label] != s)
        throw Error(quoted(equation) + ": " + what(dims[k]) + " is repeated in operand " + std::to_string(t + 1) + " with sizes " +
                    std::to_string(here[label]) + " and " + std::to_string(s));
      here[label] = s;
      std::int64_t& have = size[label];
      if (have == -1 || have == 1) {  // unseen, or broadcast so far: takes this size
        have = s, seen_in[label] = t + 1;
        continue;
      }
      if (s == have || s == 1) continue;
      throw Error(quoted(equation) + ": " + what(dims[k]) + " has size " + std::to_string(have) + " in operand " +
                  std::to_string(seen_in[label]) + " and " + std::to_string(s) + " in operand " + std::to_string(t + 1));
    }
  }
  for (std::int64_t& s : size) s = std::max<std::int64_t>(s, 0);
  return size;
}

std::vector<std::int64_t> einsum_output_shape(std::string_view equation, const std::vector<std::vector<std::int64_t>>& shapes) {
  std::vector<std::size_t> ranks;
  std::vector<std::span<const std::int64_t>> spans;
  for (const auto& s : shapes) ranks.push_back(s.size()), spans.emplace_back(s);
  const EinsumLabels labels = parse_einsum(equation, ranks);
  const std::vector<std::int64_t> size = einsum_label_sizes(equation, labels, spans);
  std::vector<std::int64_t> out;
  for (int label : labels.output) out.push_back(size[static_cast<std::size_t>(label)]);
  return out;
}

}  // namespace placer
