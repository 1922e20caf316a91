// Python's str and dict methods.
#include "chat/template_methods.hpp"

#include <utility>
#include <vector>

#include "chat/python_text.hpp"
#include "chat/template_lexer.hpp"
#include "common/text.hpp"

namespace conveyor::chat {

namespace {

// Python's str.split(sep, maxsplit).
value split(const std::string& s, const value& sep, int64_t maxsplit, render_budget& budget,
            int line) {
  budget.charge(s.size(), line);
  // The pieces' bounds first, so that their number is known before they are built.
  std::vector<std::pair<std::size_t, std::size_t>> pieces;
  if (sep.is_undefined() || sep.is_none()) {
    std::size_t i = 0;
    while (true) {
      while (i < s.size() && is_py_space(s[i])) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(pieces.size()) == maxsplit) {
        auto end = s.size();
        while (end > i && is_py_space(s[end - 1])) --end;
        pieces.emplace_back(i, end);
        break;
      }
      auto j = i;
      while (j < s.size() && !is_py_space(s[j])) ++j;
      pieces.emplace_back(i, j);
      i = j;
    }
  } else {
    if (!sep.is_string() || sep.as_string().empty())
      fail_at_line(line, "split() takes a non-empty string separator");
    const auto& d = sep.as_string();
    budget.charge(d.size(), line);
    const text_finder finder{d};
    std::size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(pieces.size()) < maxsplit) {
      auto hit = finder.find(s, pos);
      if (hit == std::string::npos) break;
      pieces.emplace_back(pos, hit);
      pos = hit + d.size();
    }
    pieces.emplace_back(pos, s.size());
  }
  budget.will_weigh(saturating_product(pieces.size(), value::item_weight) + s.size(), line);
  value_list out;
  out.reserve(pieces.size());
  for (auto [b, e] : pieces) out.emplace_back(s.substr(b, e - b));
  return budget.built(value{std::move(out)}, line);
}

}  // namespace

value replace_text(const std::string& s, const std::string& from, const std::string& to,
                   int64_t count, render_budget& budget, int line) {
  if (from.empty()) return value{s};
  budget.charge(s.size() + from.size(), line);
  std::string out = s;
  const replace_limits limits{count < 0 ? SIZE_MAX : static_cast<std::size_t>(count),
                              budget.limits().max_output_bytes};
  if (!replace_all(out, from, to, limits)) budget.too_large(line);
  return budget.built_string(std::move(out), line);
}

value call_method(const value& self, const builtin_call& call) {
  const auto& m = call.e.name;
  const int line = call.line();
  auto& budget = call.budget;
  if (self.is_map() && !self.is_namespace()) {
    budget.charge(saturating_product(self.as_map().size(), 8), line);
    if (m == "get") {
      auto key = call.argument(1, "key");
      auto found = key.is_string() ? self.get(key.as_string()) : value{};
      return found.is_undefined() ? call.argument(2, "default", value::none()) : found;
    }
    if (m == "items" || m == "keys" || m == "values") {
      value_list out;
      for (const auto& [k, v] : self.as_map()) {
        if (m == "items")
          out.emplace_back(value_list{value{k}, v});
        else if (m == "keys")
          out.emplace_back(k);
        else
          out.push_back(v);
      }
      return budget.built(value{std::move(out)}, line);
    }
  }
  if (self.is_string()) {
    const auto& s = self.as_string();
    if (m == "strip" || m == "lstrip" || m == "rstrip") {
      budget.charge(s.size(), line);
      return budget.built_string(strip(s, call.argument(1, "chars"), m != "rstrip", m != "lstrip"),
                                 line);
    }
    if (m == "startswith" || m == "endswith") {
      auto arg = call.argument(1, "prefix");
      std::vector<value> options = arg.is_list() ? arg.as_list() : std::vector<value>{arg};
      for (const auto& o : options) {
        if (!o.is_string()) fail_at_line(line, m + "() takes a string or a tuple of strings");
        const auto& p = o.as_string();
        budget.charge(p.size() + 8, line);
        if (p.size() > s.size()) continue;
        if (m == "startswith" ? s.compare(0, p.size(), p) == 0
                              : s.compare(s.size() - p.size(), p.size(), p) == 0)
          return value{true};
      }
      return value{false};
    }
    if (m == "upper") return budget.built_string(upper(s), line);
    if (m == "lower") return budget.built_string(lower(s), line);
    if (m == "title") return budget.built_string(title(s), line);
    if (m == "capitalize") return budget.built_string(capitalize(s), line);
    if (m == "replace") {
      auto count = call.argument(3, "count");
      return replace_text(s, call.string_argument(1, "old", "replace()"),
                          call.string_argument(2, "new", "replace()"),
                          count.is_number() ? count.as_int() : -1, budget, line);
    }
    if (m == "split") {
      auto max_v = call.argument(2, "maxsplit");
      return split(s, call.argument(1, "sep"), max_v.is_number() ? max_v.as_int() : -1, budget,
                   line);
    }
  }
  fail_at_line(line, "a " + std::string{self.type_name()} + " has no method '" + m + "'");
}

}  // namespace conveyor::chat
