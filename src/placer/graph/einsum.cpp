#include "placer/graph/einsum.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "placer/graph/graph.hpp"
#include "placer/graph/strides.hpp"
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

namespace placer {

EinsumLayout einsum_layout(std::string_view equation, std::span<const std::span<const std::int64_t>> shapes,
                           std::span<const std::span<const std::int64_t>> strides) {
  std::vector<std::size_t> ranks;
  for (const auto& s : shapes) ranks.push_back(s.size());
  const EinsumLabels labels = parse_einsum(equation, ranks);
  const std::vector<std::int64_t> size = einsum_label_sizes(equation, labels, shapes);
  const std::size_t n = shapes.size();
  EinsumLayout r;
  r.copied.assign(n, false);
  std::vector<std::int64_t> out_shape;
  for (int label : labels.output) out_shape.push_back(size[static_cast<std::size_t>(label)]);
  r.output_strides = row_major_strides(out_shape);
  for (const auto& s : shapes) r.gradient_strides.push_back(row_major_strides(s));
  if (n < 1 || n > 2) return r;

  const auto num_labels = static_cast<std::size_t>(labels.num_labels);
  std::vector<std::vector<int>> dim_of(n, std::vector<int>(num_labels, -1));  // per operand: label -> its dimension
  std::vector<bool> used(num_labels, false), in_output(num_labels, false);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < labels.operands[i].size(); ++k) {
      const auto label = static_cast<std::size_t>(labels.operands[i][k]);
      if (dim_of[i][label] != -1) return r;  // a diagonal: not modelled
      dim_of[i][label] = static_cast<int>(k);
      used[label] = true;
    }
  for (int label : labels.output) in_output[static_cast<std::size_t>(label)] = true;
  // The summed labels in PyTorch's order: broadcast dimensions, then letters.
  std::vector<int> summed;
  for (int label = EinsumLabels::kLetters; label < labels.num_labels; ++label)
    if (used[static_cast<std::size_t>(label)] && !in_output[static_cast<std::size_t>(label)]) summed.push_back(label);
  for (int label = 0; label < EinsumLabels::kLetters; ++label)
    if (used[static_cast<std::size_t>(label)] && !in_output[static_cast<std::size_t>(label)]) summed.push_back(label);
  auto operand_strides = [&](std::size_t i) {
    return i < strides.size() && strides[i].size() == shapes[i].size() ? std::vector<std::int64_t>(strides[i].begin(), strides[i].end())
                                                                       : row_major_strides(shapes[i]);
  };

  if (n == 1) {
    r.modelled = true;
    // The gradient: dY permuted back, broadcast along the summed letters (stride 0), a view of dY.
    for (std::size_t k = 0; k < labels.operands[0].size(); ++k) {
      const auto at = std::ranges::find(labels.output, labels.operands[0][k]);
      r.gradient_strides[0][k] = at == labels.output.end() ? 0 : r.output_strides[static_cast<std::size_t>(at - labels.output.begin())];
    }
    if (!summed.empty()) return r;  // a sum: a tensor of its own
    r.view = true;
    const std::vector<std::int64_t> st = operand_strides(0);
    for (std::size_t k = 0; k < labels.output.size(); ++k) r.output_strides[k] = st[static_cast<std::size_t>(dim_of[0][static_cast<std::size_t>(labels.output[k])])];
    return r;
  }

  auto extent = [&](std::size_t i, int label) {
    const int d = dim_of[i][static_cast<std::size_t>(label)];
    return d < 0 ? std::int64_t{1} : shapes[i][static_cast<std::size_t>(d)];
  };
  std::vector<int> both, left, right, sum;  // sumproduct_pair's lro, lo, ro and summed dimensions
  for (int label : summed) {
    const std::int64_t a = extent(0, label), b = extent(1, label);
    if (a > 1 && b > 1) sum.push_back(label);
    else if (a > 1 || b > 1) return r;  // summed out of one operand first (a reduction): not modelled
  }
  for (int label : labels.output) {
    const std::int64_t a = extent(0, label), b = extent(1, label);
    (a > 1 && b > 1 ? both : a > 1 ? left : right).push_back(label);
  }
  r.modelled = true;
  if (sum.empty()) return r;  // an elementwise product
  r.product = true;

  // Whether operand i, its dimensions grouped so, reshapes into one dimension per group without a copy.
  auto copies = [&](std::size_t i, std::span<const std::vector<int>* const> groups) {
    const std::vector<std::int64_t> st = operand_strides(i);
    for (const std::vector<int>* group : groups) {
      std::vector<int> dims;
      for (int label : *group)
        if (const int d = dim_of[i][static_cast<std::size_t>(label)]; d >= 0) dims.push_back(d);
      if (!mergeable(dims, shapes[i], st)) return true;
    }
    return false;
  };
  const std::vector<int>* left_groups[] = {&both, &left, &sum};
  const std::vector<int>* right_groups[] = {&both, &sum, &right};
  r.copied[0] = copies(0, left_groups);
  r.copied[1] = copies(1, right_groups);

  // Row-major strides over `memory` (labels, outermost first) for the dimensions of `dims` (labels).
  auto laid_out = [&](std::span<const int> dims, std::span<const std::vector<int>* const> memory) {
    std::vector<int> order;
    for (const std::vector<int>* group : memory) order.insert(order.end(), group->begin(), group->end());
    std::vector<std::int64_t> st(dims.size(), 1);
    std::int64_t step = 1;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const auto k = std::ranges::find(dims, *it);
      if (k == dims.end()) continue;  // (a dimension of size 1 of the other operand)
      st[static_cast<std::size_t>(k - dims.begin())] = step;
      step *= std::max<std::int64_t>(size[static_cast<std::size_t>(*it)], 1);
    }
    return st;
  };
  const std::vector<int>* out_groups[] = {&both, &left, &right};
  r.output_strides = laid_out(labels.output, out_groups);
  r.gradient_strides[0] = laid_out(labels.operands[0], left_groups);
  r.gradient_strides[1] = laid_out(labels.operands[1], right_groups);
  return r;
}

std::optional<EinsumLayout> einsum_layout_of(const Graph& g, OpId op) {
  return einsum_layout_of(g, op, [&g](TensorId t) { return g.tensor_strides(t); });
}

std::optional<EinsumLayout> einsum_layout_of(const Graph& g, OpId op, const std::function<std::vector<std::int64_t>(TensorId)>& strides_of) {
  std::vector<std::span<const std::int64_t>> shapes;
  std::vector<std::vector<std::int64_t>> strides;
  for (TensorId t : g.op_inputs(op)) {
    if (t == kNoId) return std::nullopt;
    shapes.push_back(g.tensor_shape(t));
    strides.push_back(strides_of(t));
  }
  const std::vector<std::span<const std::int64_t>> stride_spans(strides.begin(), strides.end());
  try {
    EinsumLayout layout = einsum_layout(g.op_attrs(op).get_string("equation", ""), shapes, stride_spans);
    if (layout.modelled) return layout;
  } catch (const Error&) {  // (op_work's rule reports it)
  }
  return std::nullopt;
}

}  // namespace placer
