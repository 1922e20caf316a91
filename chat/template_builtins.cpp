// Jinja's filters and tests, and range().
#include "chat/template_builtins.hpp"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <vector>

#include "chat/python_text.hpp"
#include "chat/template_lexer.hpp"
#include "chat/template_methods.hpp"
#include "chat/template_operators.hpp"
#include "common/text.hpp"

namespace conveyor::chat {

namespace {

using vk = value::kind;

int64_t length_of(const value& v, render_budget& budget, int line) {
  switch (v.type()) {
    case vk::undefined:
      return 0;
    case vk::string:
      budget.charge(v.as_string().size(), line);
      return static_cast<int64_t>(utf8_code_points(v.as_string()));
    case vk::list:
      return static_cast<int64_t>(v.as_list().size());
    case vk::map:
      if (v.is_namespace()) break;
      return static_cast<int64_t>(v.as_map().size());
    default:
      break;
  }
  fail_at_line(line, std::string{"a "} + v.type_name() + " has no length");
}

// Jinja's int filter: int(x), else int(float(x)), else the default; a number that does not
// fit in 64 bits is an error (Python's would be exact).
value to_int(const value& v, const builtin_call& call) {
  const int line = call.line();
  auto from_double = [&](double d) -> std::optional<value> {
    if (std::isnan(d)) return std::nullopt;
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
      fail_at_line(line, "int of " + float_repr(d) + ": out of range of a 64-bit integer");
    return value{static_cast<int64_t>(d)};
  };
  if (v.type() == vk::integer) return v;
  if (v.type() == vk::boolean) return value{int64_t{v.as_bool()}};
  if (v.type() == vk::floating) {
    if (auto i = from_double(v.as_double())) return *i;
  } else if (v.is_string()) {
    call.budget.charge(v.as_string().size(), line);
    auto s = strip(v.as_string(), value{}, true, true);
    if (!s.empty()) {
      char* end = nullptr;
      errno = 0;
      const long long i = std::strtoll(s.c_str(), &end, 10);
      if (end && *end == '\0') {
        if (errno == ERANGE)
          fail_at_line(line, "int of '" + s + "': out of range of a 64-bit integer");
        return value{static_cast<int64_t>(i)};
      }
      double d = 0;
      if (parse_float(s, d))
        if (auto i = from_double(d)) return *i;
    }
  }
  return call.argument(1, "default", value{int64_t{0}});
}

bool is_filter_without_arguments(const std::string& f) {
  for (const char* name :
       {"trim", "upper", "lower", "capitalize", "title", "string", "length", "count", "list",
        "reverse", "int", "float", "abs", "tojson", "items", "safe", "first", "last"})
    if (f == name) return true;
  return false;
}

}  // namespace

value apply_filter(const std::string& f, const value& v, const builtin_call& call) {
  const int line = call.line();
  auto& budget = call.budget;
  if (f == "trim") {
    auto s = budget.text(v, line);
    budget.charge(s.size(), line);
    return budget.built_string(strip(s, call.argument(1, "chars"), true, true), line);
  }
  if (f == "upper") return budget.built_string(upper(budget.text(v, line)), line);
  if (f == "lower") return budget.built_string(lower(budget.text(v, line)), line);
  if (f == "capitalize") return budget.built_string(capitalize(budget.text(v, line)), line);
  if (f == "title") return budget.built_string(title(budget.text(v, line)), line);
  if (f == "string") return v.is_string() ? v : budget.built_string(budget.text(v, line), line);
  if (f == "safe") return v;
  if (f == "length" || f == "count") return value{length_of(v, budget, line)};
  if (f == "tojson") {
    const auto max_bytes = budget.limits().max_output_bytes;
    auto indent = call.argument(1, "indent");
    if (indent.type() == vk::integer && indent.as_int() > static_cast<int64_t>(max_bytes))
      budget.too_large(line);
    std::string out;
    switch (v.to_json(out, indent.type() == vk::integer ? static_cast<int>(indent.as_int()) : -1,
                      max_bytes)) {
      case value::json_error::none:
        break;
      case value::json_error::undefined:
        fail_at_line(line, "tojson cannot serialize an undefined value");
      case value::json_error::namespace_object:
        fail_at_line(line, "tojson cannot serialize a namespace");
      case value::json_error::too_large:
        budget.too_large(line);
    }
    return budget.built_string(std::move(out), line);
  }
  if (f == "default" || f == "d") {
    auto boolean = call.argument(2, "boolean", value{false});
    if (v.is_undefined() || (boolean.truthy() && !v.truthy()))
      return call.argument(1, "default_value", value{std::string{}});
    return v;
  }
  if (f == "first" || f == "last") {
    const auto items = v.is_list() ? v : walk(v, budget, line);
    const auto& l = items.as_list();
    if (l.empty()) return {};
    return f == "first" ? l.front() : l.back();
  }
  if (f == "join") {
    auto sep = call.argument(1, "d", value{std::string{}});
    auto attribute = call.argument(2, "attribute");
    std::string out;
    bool first = true;
    const auto items = walk(v, budget, line);
    for (const auto& item : items.as_list()) {
      if (!first) budget.append(out, sep, line);
      first = false;
      budget.append(out, attribute.is_string() ? item.get(attribute.as_string()) : item, line);
    }
    return budget.built_string(std::move(out), line);
  }
  if (f == "replace") {
    auto count = call.argument(3, "count");
    return replace_text(budget.text(v, line), call.string_argument(1, "old", "replace"),
                        call.string_argument(2, "new", "replace"),
                        count.is_number() ? count.as_int() : -1, budget, line);
  }
  if (f == "list") return v.is_list() ? v : items_of(v, budget, line);
  if (f == "reverse") {
    if (v.is_string()) {
      const auto& s = v.as_string();
      budget.charge(s.size(), line);
      const auto starts = char_starts(s);
      std::string out;
      out.reserve(s.size());
      for (auto i = starts.size() - 1; i > 0; --i) out += char_at(s, starts, i - 1);
      return budget.built_string(std::move(out), line);
    }
    const auto items = walk(v, budget, line);
    const auto& l = items.as_list();
    return budget.built(value{value_list(l.rbegin(), l.rend())}, line);
  }
  if (f == "items") {
    if (v.is_undefined()) return value{value_list{}};
    if (!v.is_map() || v.is_namespace())
      fail_at_line(line, std::string{"items takes a map, got a "} + v.type_name());
    value_list out;
    for (const auto& [k, x] : v.as_map()) out.emplace_back(value_list{value{k}, x});
    return budget.built(value{std::move(out)}, line);
  }
  if (f == "int") return to_int(v, call);
  if (f == "float") {
    if (v.is_number() || v.type() == vk::boolean) return value{v.as_double()};
    if (v.is_string()) {
      budget.charge(v.as_string().size(), line);
      double d = 0;
      if (parse_float(strip(v.as_string(), value{}, true, true), d)) return value{d};
    }
    return call.argument(1, "default", value{0.0});
  }
  if (f == "abs") {
    if (v.type() == vk::integer) {
      if (v.as_int() == INT64_MIN) integer_overflow("abs", line);
      return value{v.as_int() < 0 ? -v.as_int() : v.as_int()};
    }
    if (v.type() == vk::floating) return value{std::fabs(v.as_double())};
    fail_at_line(line, std::string{"abs takes a number, got a "} + v.type_name());
  }
  if (f == "selectattr" || f == "rejectattr") {
    auto attribute = call.string_argument(1, "attribute", f.c_str());
    auto test_name = call.argument(2, "test");
    value_list out;
    const auto items = walk(v, budget, line);
    for (const auto& item : items.as_list()) {
      auto field = item.get(attribute);
      bool pass =
          test_name.is_undefined() ? field.truthy() : apply_test(test_name.str(), field, call, 3);
      if (pass == (f == "selectattr")) out.push_back(item);
    }
    return budget.built(value{std::move(out)}, line);
  }
  if (f == "select" || f == "reject") {
    // select(test, args...): the items that pass the test (that are true without one).
    auto test_name = call.argument(1, "test");
    value_list out;
    const auto items = walk(v, budget, line);
    for (const auto& item : items.as_list()) {
      bool pass =
          test_name.is_undefined() ? item.truthy() : apply_test(test_name.str(), item, call, 2);
      if (pass == (f == "select")) out.push_back(item);
    }
    return budget.built(value{std::move(out)}, line);
  }
  if (f == "map") {
    auto attribute = call.argument(99, "attribute");
    value_list out;
    const auto items = walk(v, budget, line);
    for (const auto& item : items.as_list()) {
      if (attribute.is_string()) {
        out.push_back(item.get(attribute.as_string()));
      } else {
        auto name = call.string_argument(1, "filter", "map");
        if (name == "map" || !is_filter_without_arguments(name))
          fail_at_line(line,
                       "map supports attribute= or a filter without arguments, not '" + name + "'");
        out.push_back(apply_filter(name, item, call));
      }
    }
    return budget.built(value{std::move(out)}, line);
  }
  fail_at_line(line, "unsupported filter '" + f + "'");
}

bool apply_test(const std::string& name, const value& v, const builtin_call& call,
                std::size_t position) {
  const int line = call.line();
  auto& budget = call.budget;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number() || v.type() == vk::boolean;
  if (name == "integer") return v.type() == vk::integer;
  if (name == "float") return v.type() == vk::floating;
  if (name == "boolean") return v.type() == vk::boolean;
  if (name == "mapping") return v.is_map() && !v.is_namespace();
  if (name == "iterable" || name == "sequence")
    return v.is_string() || v.is_list() || (v.is_map() && !v.is_namespace()) ||
           (name == "iterable" && v.is_undefined());
  if (name == "true") return v.type() == vk::boolean && v.as_bool();
  if (name == "false") return v.type() == vk::boolean && !v.as_bool();
  if (name == "lower" || name == "upper") {
    auto s = budget.text(v, line);
    budget.charge(s.size(), line);
    return s == (name == "lower" ? lower(s) : upper(s));
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (v.type() != vk::integer) fail_at_line(line, "'" + name + "' tests integers");
    if (name == "divisibleby") {
      auto d = call.argument(position, "num");
      if (d.type() != vk::integer || d.as_int() == 0)
        fail_at_line(line, "'divisibleby' takes a non-zero integer");
      // INT64_MIN % -1 overflows in C++; every integer is divisible by -1.
      return d.as_int() == -1 || v.as_int() % d.as_int() == 0;
    }
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  auto other = call.argument(position, "b");
  if (name == "equalto" || name == "eq" || name == "==") return equal(v, other, budget, line);
  if (name == "ne" || name == "!=") return !equal(v, other, budget, line);
  if (name == "sameas") return equal(v, other, budget, line) && v.type() == other.type();
  if (name == "in") return contains(other, v, budget, line);
  fail_at_line(line, "unsupported test '" + name + "'");
}

value range(const builtin_call& call) {
  static constexpr uint64_t max_range = 100000;
  const int line = call.line();
  std::vector<int64_t> a;
  for (const auto& x : call.e.args) {
    auto v = call.evaluator.eval(*x);
    if (v.type() != vk::integer) fail_at_line(line, "range() takes integers");
    a.push_back(v.as_int());
  }
  if (a.empty() || a.size() > 3) fail_at_line(line, "range() takes 1 to 3 arguments");
  const int64_t start = a.size() == 1 ? 0 : a[0], stop = a.size() == 1 ? a[0] : a[1];
  const int64_t step = a.size() == 3 ? a[2] : 1;
  if (step == 0) fail_at_line(line, "range() step cannot be zero");
  // The length, in unsigned arithmetic: the distance between two int64 fits in uint64.
  uint64_t count = 0;
  if (step > 0 && start < stop)
    count = (static_cast<uint64_t>(stop) - static_cast<uint64_t>(start) - 1) /
                static_cast<uint64_t>(step) +
            1;
  else if (step < 0 && start > stop)
    count = (static_cast<uint64_t>(start) - static_cast<uint64_t>(stop) - 1) /
                (uint64_t{0} - static_cast<uint64_t>(step)) +
            1;
  if (count > max_range)
    fail_at_line(line, "range() of more than " + std::to_string(max_range) + " items (" +
                           std::to_string(count) + ")");
  value_list out;
  out.reserve(count);
  int64_t i = start;
  for (uint64_t k = 0; k < count; ++k) {
    out.emplace_back(i);
    if (k + 1 < count) i += step;  // stays between start and stop
  }
  return call.budget.built(value{std::move(out)}, line);
}

}  // namespace conveyor::chat
