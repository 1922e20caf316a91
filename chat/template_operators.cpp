// Python's operators on template values.
#include "chat/template_operators.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "chat/python_text.hpp"
#include "chat/template_lexer.hpp"
#include "common/text.hpp"

namespace conveyor::chat {

namespace {

using vk = value::kind;

[[noreturn]] void bad_operands(const std::string& op, const value& a, const value& b, int line) {
  fail_at_line(line, "unsupported operand types for '" + op + "': " + a.type_name() + " and " +
                         b.type_name());
}

bool numeric(const value& v) {
  return v.is_number() || v.type() == vk::boolean;
}
int64_t int_of(const value& v) {
  return v.type() == vk::boolean ? int64_t{v.as_bool()} : v.as_int();
}
bool both_int(const value& a, const value& b) {
  return a.type() != vk::floating && b.type() != vk::floating;
}

// i `op` j on 64-bit integers with Python's semantics, or an error when the result does not
// fit (Python's integers are unbounded).
value checked(int64_t i, char op, int64_t j, int line) {
  int64_t r = 0;
  switch (op) {
    case '+':
      if (__builtin_add_overflow(i, j, &r)) integer_overflow("+", line);
      return value{r};
    case '-':
      if (__builtin_sub_overflow(i, j, &r)) integer_overflow("-", line);
      return value{r};
    case '*':
      if (__builtin_mul_overflow(i, j, &r)) integer_overflow("*", line);
      return value{r};
    case '/':  // floor division
    case '%': {
      if (j == -1) {  // INT64_MIN / -1 overflows in C++, INT64_MIN % -1 too
        if (op == '%') return value{int64_t{0}};
        if (i == INT64_MIN) integer_overflow("//", line);
        return value{-i};
      }
      auto q = i / j;
      if ((i % j != 0) && ((i < 0) != (j < 0))) --q;
      return op == '/' ? value{q} : value{i - q * j};
    }
    default: {  // '^': power, j >= 0, by squaring
      int64_t result = 1, base = i;
      for (int64_t e = j; e > 0;) {
        if ((e & 1) && __builtin_mul_overflow(result, base, &result)) integer_overflow("**", line);
        e >>= 1;
        // Needed only while bits remain; then the result would overflow too.
        if (e > 0 && __builtin_mul_overflow(base, base, &base)) integer_overflow("**", line);
      }
      return value{result};
    }
  }
}

// Python's sequence * n: refused before it is built when it would be too large.
value repeat(const value& a, int64_t times, render_budget& budget, int line) {
  const bool empty = a.is_string() ? a.as_string().empty() : a.as_list().empty();
  if (times <= 0 || empty) return a.is_string() ? value{std::string{}} : value{value_list{}};
  budget.will_weigh(saturating_product(a.weight(), static_cast<uint64_t>(times)), line);
  if (a.is_string()) {
    std::string out;
    out.reserve(a.as_string().size() * static_cast<std::size_t>(times));
    for (int64_t i = 0; i < times; ++i) out += a.as_string();
    return budget.built_string(std::move(out), line);
  }
  value_list out;
  out.reserve(a.as_list().size() * static_cast<std::size_t>(times));
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), a.as_list().begin(), a.as_list().end());
  return budget.built(value{std::move(out)}, line);
}

// Python's slice.indices for a sequence of length n: the indices a slice takes.
std::vector<int64_t> slice_indices(int64_t n, const value& start, const value& stop, int64_t step) {
  auto clamp = [&](const value& v, int64_t dflt) {
    if (!v.is_number()) return dflt;
    int64_t i = v.as_int();
    if (i < 0) i += n;  // i >= INT64_MIN and n >= 0: no overflow
    if (step > 0) return std::max<int64_t>(0, std::min(i, n));
    return std::max<int64_t>(-1, std::min(i, n - 1));
  };
  std::vector<int64_t> out;
  if (step > 0) {
    for (int64_t i = clamp(start, 0), e = clamp(stop, n); i < e; i += step) {
      out.push_back(i);
      if (e - i <= step) break;  // the next index would pass e (or overflow)
    }
  } else {
    const auto stride = uint64_t{0} - static_cast<uint64_t>(step);
    for (int64_t i = clamp(start, n - 1), e = clamp(stop, -1); i > e; i += step) {
      out.push_back(i);
      if (static_cast<uint64_t>(i - e) <= stride) break;
    }
  }
  return out;
}

}  // namespace

void integer_overflow(const std::string& op, int line) {
  fail_at_line(line, "integer overflow in '" + op + "': the result does not fit in 64 bits");
}

value binary_operator(const std::string& op, const value& a, const value& b, render_budget& budget,
                      int line) {
  if (op == "~") {
    std::string out;
    budget.append(out, a, line);
    budget.append(out, b, line);
    return budget.built_string(std::move(out), line);
  }
  if (op == "==") return value{equal(a, b, budget, line)};
  if (op == "!=") return value{!equal(a, b, budget, line)};
  if (op == "in") return value{contains(b, a, budget, line)};
  if (op == "not in") return value{!contains(b, a, budget, line)};
  if (op == "<" || op == "<=" || op == ">" || op == ">=") {
    int c = 0;
    if (numeric(a) && numeric(b)) {
      double x = a.as_double(), y = b.as_double();
      if (both_int(a, b)) {
        auto i = int_of(a), j = int_of(b);
        c = i < j ? -1 : (i > j ? 1 : 0);
      } else {
        c = x < y ? -1 : (x > y ? 1 : 0);
      }
    } else if (a.is_string() && b.is_string()) {
      budget.charge(std::min(a.as_string().size(), b.as_string().size()) + 1, line);
      c = a.as_string().compare(b.as_string());
      c = c < 0 ? -1 : (c > 0 ? 1 : 0);
    } else {
      bad_operands(op, a, b, line);
    }
    if (op == "<") return value{c < 0};
    if (op == "<=") return value{c <= 0};
    if (op == ">") return value{c > 0};
    return value{c >= 0};
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      std::string out;
      budget.append_text(out, a.as_string(), line);
      budget.append_text(out, b.as_string(), line);
      return budget.built_string(std::move(out), line);
    }
    if (a.is_list() && b.is_list()) {
      budget.will_weigh(a.weight() > SIZE_MAX - b.weight() ? SIZE_MAX : a.weight() + b.weight(),
                        line);
      auto l = a.as_list();
      l.insert(l.end(), b.as_list().begin(), b.as_list().end());
      return budget.built(value{std::move(l)}, line);
    }
  }
  if (op == "*" && (a.is_string() || a.is_list()) && b.type() == vk::integer)
    return repeat(a, b.as_int(), budget, line);
  if (op == "*" && (b.is_string() || b.is_list()) && a.type() == vk::integer)
    return repeat(b, a.as_int(), budget, line);
  if (!numeric(a) || !numeric(b)) bad_operands(op, a, b, line);
  bool ints = both_int(a, b);
  double x = a.as_double(), y = b.as_double();
  if (op == "+") return ints ? checked(int_of(a), '+', int_of(b), line) : value{x + y};
  if (op == "-") return ints ? checked(int_of(a), '-', int_of(b), line) : value{x - y};
  if (op == "*") return ints ? checked(int_of(a), '*', int_of(b), line) : value{x * y};
  if (op == "/") {
    if (y == 0) fail_at_line(line, "division by zero");
    return value{x / y};
  }
  if (op == "//" || op == "%") {
    if (y == 0) fail_at_line(line, "division by zero");
    if (ints) return checked(int_of(a), op == "//" ? '/' : '%', int_of(b), line);
    auto q = std::floor(x / y);
    return op == "//" ? value{q} : value{x - q * y};
  }
  if (op == "**") {
    if (ints && int_of(b) >= 0) return checked(int_of(a), '^', int_of(b), line);
    if (x == 0 && y < 0) fail_at_line(line, "0 cannot be raised to a negative power");
    return value{std::pow(x, y)};
  }
  bad_operands(op, a, b, line);
}

value negative(const value& v, int line) {
  if (v.type() == vk::integer || v.type() == vk::boolean) return checked(0, '-', int_of(v), line);
  if (v.type() == vk::floating) return value{-v.as_double()};
  fail_at_line(line, std::string{"cannot negate a "} + v.type_name());
}

bool equal(const value& a, const value& b, render_budget& budget, int line) {
  budget.charge(std::min(a.weight(), b.weight()) + 1, line);
  return a == b;
}

bool contains(const value& container, const value& item, render_budget& budget, int line) {
  switch (container.type()) {
    case vk::undefined:
      return false;
    case vk::string: {
      if (!item.is_string())
        fail_at_line(line, std::string{"'in <string>' needs a string on the left, got a "} +
                               item.type_name());
      const auto& text = container.as_string();
      const auto& needle = item.as_string();
      budget.charge(text.size() + needle.size(), line);
      return text_finder{needle}.find(text, 0) != std::string::npos;
    }
    case vk::list:
      budget.charge(saturating_product(container.as_list().size(), 8 + item.weight()), line);
      for (const auto& x : container.as_list())
        if (x == item) return true;
      return false;
    case vk::map:
      if (container.is_namespace()) break;
      budget.charge(saturating_product(container.as_map().size(), 8), line);
      return item.is_string() && !container.get(item.as_string()).is_undefined();
    default:
      break;
  }
  fail_at_line(line, std::string{"cannot test membership in a "} + container.type_name());
}

value subscript(const value& base, const value& key, render_budget& budget, int line) {
  switch (base.type()) {
    case vk::undefined:
      fail_at_line(line, "cannot subscript an undefined value");
    case vk::map:
      if (!key.is_string()) return {};
      budget.charge(saturating_product(base.as_map().size(), 8), line);
      return base.get(key.as_string());
    case vk::list:
    case vk::string: {
      if (key.type() != vk::integer) return {};
      int64_t i = key.as_int();
      if (base.is_list()) {
        auto n = static_cast<int64_t>(base.as_list().size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return {};
        return base.as_list()[static_cast<std::size_t>(i)];
      }
      const auto& s = base.as_string();
      budget.charge(s.size(), line);
      const auto starts = char_starts(s);
      auto n = static_cast<int64_t>(starts.size() - 1);
      if (i < 0) i += n;
      if (i < 0 || i >= n) return {};
      return value{std::string{char_at(s, starts, static_cast<std::size_t>(i))}};
    }
    default:
      return {};
  }
}

value slice(const value& base, const value& start, const value& stop, const value& step,
            render_budget& budget, int line) {
  for (const auto* b : {&start, &stop, &step})
    if (!b->is_undefined() && !b->is_none() && b->type() != vk::integer)
      fail_at_line(line, "slice bounds must be integers");
  const int64_t stride = step.is_number() ? step.as_int() : 1;
  if (stride == 0) fail_at_line(line, "slice step cannot be zero");
  if (base.is_list()) {
    const auto& l = base.as_list();
    value_list out;
    for (auto i : slice_indices(static_cast<int64_t>(l.size()), start, stop, stride))
      out.push_back(l[static_cast<std::size_t>(i)]);
    return budget.built(value{std::move(out)}, line);
  }
  if (base.is_string()) {
    const auto& s = base.as_string();
    budget.charge(s.size(), line);
    const auto starts = char_starts(s);
    std::string out;
    for (auto i : slice_indices(static_cast<int64_t>(starts.size() - 1), start, stop, stride))
      out += char_at(s, starts, static_cast<std::size_t>(i));
    return budget.built_string(std::move(out), line);
  }
  fail_at_line(line, std::string{"cannot slice a "} + base.type_name());
}

value items_of(const value& v, render_budget& budget, int line) {
  switch (v.type()) {
    case vk::undefined:
      return value{value_list{}};
    case vk::list:
      return v;
    case vk::map: {
      if (v.is_namespace()) fail_at_line(line, "cannot iterate over a namespace");
      value_list keys;
      keys.reserve(v.as_map().size());
      for (const auto& kv : v.as_map()) keys.emplace_back(kv.first);
      return budget.built(value{std::move(keys)}, line);
    }
    case vk::string: {
      const auto& s = v.as_string();
      const auto starts = char_starts(s);
      budget.will_weigh(saturating_product(starts.size() - 1, value::item_weight) + s.size(), line);
      value_list chars;
      chars.reserve(starts.size() - 1);
      for (std::size_t i = 0; i + 1 < starts.size(); ++i)
        chars.emplace_back(std::string{char_at(s, starts, i)});
      return budget.built(value{std::move(chars)}, line);
    }
    default:
      fail_at_line(line, std::string{"cannot iterate over a "} + v.type_name());
  }
}

value walk(const value& v, render_budget& budget, int line) {
  auto items = items_of(v, budget, line);
  budget.charge(saturating_product(items.as_list().size(), 8), line);
  return items;
}

}  // namespace conveyor::chat
