#include "chat/template_renderer.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "common/text.hpp"

namespace conveyor::chat {

namespace {

using ek = expr::kind;
using vk = value::kind;

// The number of bytes of the UTF-8 character that starts with `c` (1 for a stray byte).
std::size_t char_length(unsigned char c) {
  if (c >= 0xf0) return 4;
  if (c >= 0xe0) return 3;
  if (c >= 0xc0) return 2;
  return 1;
}

// Where each character (code point, as Python indexes strings) of UTF-8 text starts, and the
// text's size at the end.
std::vector<std::size_t> char_starts(std::string_view s) {
  std::vector<std::size_t> starts;
  for (std::size_t i = 0; i < s.size(); i += char_length(static_cast<unsigned char>(s[i])))
    starts.push_back(i);
  starts.push_back(s.size());
  return starts;
}

// Character `i` of `s` from its starts (a truncated last character is what is left).
std::string_view char_at(std::string_view s, const std::vector<std::size_t>& starts,
                         std::size_t i) {
  const auto end = std::min(starts[i + 1], s.size());
  return s.substr(starts[i], end - starts[i]);
}

bool is_py_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

std::string strip(const std::string& s, const value& chars, bool left, bool right) {
  auto drop = [&](char c) {
    if (chars.is_string()) return chars.as_string().find(c) != std::string::npos;
    return is_py_space(c);
  };
  std::size_t b = 0, e = s.size();
  if (left)
    while (b < e && drop(s[b])) ++b;
  if (right)
    while (e > b && drop(s[e - 1])) --e;
  return s.substr(b, e - b);
}

char upper(char c) {
  return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
}
char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string upper(std::string s) {
  for (auto& c : s) c = upper(c);
  return s;
}

std::string lower(std::string s) {
  for (auto& c : s) c = lower(c);
  return s;
}

bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

std::string title(std::string s) {
  bool start = true;
  for (auto& c : s) {
    if (is_alpha(c)) {
      c = start ? upper(c) : lower(c);
      start = false;
    } else {
      start = true;
    }
  }
  return s;
}

std::string capitalize(const std::string& s) {
  auto out = lower(s);
  if (!out.empty()) out[0] = upper(out[0]);
  return out;
}

// a * b, saturating.
std::size_t product(std::size_t a, std::size_t b) {
  return b != 0 && a > SIZE_MAX / b ? SIZE_MAX : a * b;
}

// Python's float(s) for stripped `s`: decimal, "inf", "nan" (no hexadecimal, which strtod
// would take).
bool parse_float(const std::string& s, double& d) {
  if (s.empty() || s.find_first_of("xXpP") != std::string::npos) return false;
  char* end = nullptr;
  d = std::strtod(s.c_str(), &end);
  return end && *end == '\0';
}

enum class flow { normal, break_loop, continue_loop };

class renderer {
 public:
  renderer(const value& variables, const render_limits& limits)
      : globals_(variables), limits_(limits) {}

  // Namespaces may hold themselves: breaking every cycle lets them go.
  ~renderer() {
    for (auto& ns : namespaces_) ns.clear_attributes();
  }
  renderer(const renderer&) = delete;
  renderer& operator=(const renderer&) = delete;

  std::string run(const template_program& program) {
    scopes_.emplace_back();
    std::string out;
    exec(program.body, out);
    return out;
  }

 private:
  [[noreturn]] static void fail(int line, const std::string& what) {
    throw template_error(line, "chat template line " + std::to_string(line) + ": " + what);
  }

  // -- limits ----------------------------------------------------------------------------------

  // Counts `units` of work (see render_limits::max_work).
  void charge(std::size_t units, int line) {
    work_ = units > SIZE_MAX - work_ ? SIZE_MAX : work_ + units;
    if (work_ > limits_.max_work)
      fail(line, "the template does more than " + std::to_string(limits_.max_work) +
                     " units of work (bytes and items built, searched or walked): a loop or a "
                     "repetition too large");
  }

  void count_iterations(int64_t n, int line) {
    if (n > limits_.max_loop_iterations - iterations_)
      fail(line, "the template runs more than " + std::to_string(limits_.max_loop_iterations) +
                     " loop iterations");
    iterations_ += n;
  }

  [[noreturn]] void too_large(int line) const {
    fail(line, "the template builds a value that exceeds " +
                   std::to_string(limits_.max_output_bytes) + " bytes");
  }

  // Refuses, before it is built, a value that would weigh `weight`.
  void will_weigh(std::size_t weight, int line) const {
    if (weight > limits_.max_output_bytes) too_large(line);
  }

  // A value an expression built: within the size and nesting limits, its making counted.
  value built(value v, int line) {
    if (v.weight() > limits_.max_output_bytes) too_large(line);
    if (v.depth() > static_cast<uint32_t>(max_template_nesting))
      fail(line, "the template builds lists or maps nested more than " +
                     std::to_string(max_template_nesting) + " deep");
    if (v.is_string())
      charge(v.as_string().size(), line);
    else if (v.is_list())
      charge(product(v.as_list().size(), value::item_weight), line);
    else if (v.is_map())
      charge(product(v.as_map().size(), value::item_weight), line);
    return v;
  }

  value built_string(std::string s, int line) { return built(value{std::move(s)}, line); }

  // Appends `piece` to a string being built.
  void append_text(std::string& out, std::string_view piece, int line) const {
    if (piece.size() > limits_.max_output_bytes - std::min(out.size(), limits_.max_output_bytes))
      too_large(line);
    out += piece;
  }

  // Appends str(v) to a string being built.
  void append(std::string& out, const value& v, int line) const {
    if (!v.append_str(out, limits_.max_output_bytes)) too_large(line);
  }

  // str(v), built.
  std::string text(const value& v, int line) {
    if (v.is_string()) return v.as_string();
    std::string out;
    append(out, v, line);
    charge(out.size(), line);
    return out;
  }

  // Appends to the rendered prompt.
  [[noreturn]] void prompt_too_large(int line) const {
    fail(line,
         "the rendered prompt exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
  }
  void emit(std::string& out, std::string_view text, int line) const {
    if (text.size() > limits_.max_output_bytes - out.size()) prompt_too_large(line);
    out += text;
  }
  void emit(std::string& out, const value& v, int line) const {
    if (!v.append_str(out, limits_.max_output_bytes)) prompt_too_large(line);
  }

  // -- statements ------------------------------------------------------------------------------

  flow exec(const node_list& body, std::string& out) {
    for (const auto& n : body) {
      auto f = exec(*n, out);
      if (f != flow::normal) return f;
    }
    return flow::normal;
  }

  flow exec(const node& n, std::string& out) {
    switch (n.type) {
      case node::kind::text:
        emit(out, std::string_view{n.text}, n.line);
        return flow::normal;
      case node::kind::output:
        emit(out, eval(*n.value), n.line);
        return flow::normal;
      case node::kind::if_chain:
        for (std::size_t i = 0; i < n.conditions.size(); ++i)
          if (eval(*n.conditions[i]).truthy()) return exec(n.bodies[i], out);
        return exec(n.else_body, out);
      case node::kind::for_loop:
        exec_for(n, out);
        return flow::normal;
      case node::kind::set: {
        auto v = eval(*n.value);
        if (n.attribute.empty()) {
          scopes_.back()[n.targets[0]] = std::move(v);
        } else {
          auto target = lookup(n.targets[0]);
          if (!target.is_namespace())
            fail(n.line, "cannot assign attribute '" + n.attribute + "' of '" + n.targets[0] +
                             "', a " + target.type_name() + " (only namespaces take attributes)");
          target.set_attribute(n.attribute, std::move(v));
        }
        return flow::normal;
      }
      case node::kind::break_loop:
        return flow::break_loop;
      case node::kind::continue_loop:
        return flow::continue_loop;
    }
    return flow::normal;
  }

  // The items of an iterable: a list's own, a map's keys, a string's characters; none for
  // undefined. The list is built (and counted) unless `v` is a list.
  value items_of(const value& v, int line) {
    switch (v.type()) {
      case vk::undefined:
        return value{value_list{}};
      case vk::list:
        return v;
      case vk::map: {
        if (v.is_namespace()) fail(line, "cannot iterate over a namespace");
        value_list keys;
        keys.reserve(v.as_map().size());
        for (const auto& kv : v.as_map()) keys.emplace_back(kv.first);
        return built(value{std::move(keys)}, line);
      }
      case vk::string: {
        const auto& s = v.as_string();
        const auto starts = char_starts(s);
        will_weigh(product(starts.size() - 1, value::item_weight) + s.size(), line);
        value_list chars;
        chars.reserve(starts.size() - 1);
        for (std::size_t i = 0; i + 1 < starts.size(); ++i)
          chars.emplace_back(std::string{char_at(s, starts, i)});
        return built(value{std::move(chars)}, line);
      }
      default:
        fail(line, std::string{"cannot iterate over a "} + v.type_name());
    }
  }

  // The same, walked: counts 8 units per item.
  value walk(const value& v, int line) {
    auto items = items_of(v, line);
    charge(product(items.as_list().size(), 8), line);
    return items;
  }

  void bind_targets(const node& n, const value& item) {
    auto& scope = scopes_.back();
    if (n.targets.size() == 1) {
      scope[n.targets[0]] = item;
      return;
    }
    if (!item.is_list() || item.as_list().size() != n.targets.size())
      fail(n.line, "cannot unpack a " + std::string{item.type_name()} + " into " +
                       std::to_string(n.targets.size()) + " loop variables");
    for (std::size_t i = 0; i < n.targets.size(); ++i) scope[n.targets[i]] = item.as_list()[i];
  }

  void exec_for(const node& n, std::string& out) {
    auto sequence = items_of(eval(*n.value), n.line);
    if (n.condition) {
      // The loop's `if` filter looks at every item: each look is an iteration.
      count_iterations(static_cast<int64_t>(sequence.as_list().size()), n.line);
      scopes_.emplace_back();
      value_list kept;
      for (const auto& item : sequence.as_list()) {
        bind_targets(n, item);
        if (eval(*n.condition).truthy()) kept.push_back(item);
      }
      scopes_.pop_back();
      sequence = built(value{std::move(kept)}, n.line);
    }
    const auto& items = sequence.as_list();
    const auto length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      count_iterations(1, n.line);
      // Each iteration starts from a fresh scope: a `set` in the body lasts one iteration.
      scopes_.emplace_back();
      bind_targets(n, items[static_cast<std::size_t>(i)]);
      value_map loop{{"index", value{i + 1}},
                     {"index0", value{i}},
                     {"revindex", value{length - i}},
                     {"revindex0", value{length - i - 1}},
                     {"first", value{i == 0}},
                     {"last", value{i == length - 1}},
                     {"length", value{length}}};
      if (i > 0) loop.emplace_back("previtem", items[static_cast<std::size_t>(i - 1)]);
      if (i + 1 < length) loop.emplace_back("nextitem", items[static_cast<std::size_t>(i + 1)]);
      scopes_.back()["loop"] = value{std::move(loop)};
      auto f = exec(n.body, out);
      scopes_.pop_back();
      if (f == flow::break_loop) break;
    }
    if (length == 0) exec(n.else_body, out);
  }

  // -- expressions -----------------------------------------------------------------------------

  value lookup(const std::string& name) const {
    for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s) {
      auto i = s->find(name);
      if (i != s->end()) return i->second;
    }
    return globals_.get(name);
  }

  value eval(const expr& e) {
    switch (e.type) {
      case ek::literal:
        return e.lit;
      case ek::name:
        return lookup(e.name);
      case ek::attribute: {
        auto base = eval(*e.args[0]);
        if (base.is_undefined())
          fail(e.line, "cannot read attribute '" + e.name + "' of an undefined value");
        return base.get(e.name);
      }
      case ek::item:
        return subscript(eval(*e.args[0]), eval(*e.args[1]), e.line);
      case ek::slice:
        return slice(e);
      case ek::call:
        return call(e);
      case ek::method:
        return method(e);
      case ek::filter:
        return filter(e);
      case ek::test: {
        bool result = test(e);
        return value{e.negated ? !result : result};
      }
      case ek::negate:
        return value{!eval(*e.args[0]).truthy()};
      case ek::unary_minus: {
        auto v = eval(*e.args[0]);
        if (v.type() == vk::integer || v.type() == vk::boolean)
          return checked(0, '-', int_of(v), e.line);
        if (v.type() == vk::floating) return value{-v.as_double()};
        fail(e.line, std::string{"cannot negate a "} + v.type_name());
      }
      case ek::binary:
        return binary(e.name, eval(*e.args[0]), eval(*e.args[1]), e.line);
      case ek::logical_and: {
        auto l = eval(*e.args[0]);
        return l.truthy() ? eval(*e.args[1]) : l;
      }
      case ek::logical_or: {
        auto l = eval(*e.args[0]);
        return l.truthy() ? l : eval(*e.args[1]);
      }
      case ek::conditional:
        if (eval(*e.args[1]).truthy()) return eval(*e.args[0]);
        return e.args[2] ? eval(*e.args[2]) : value{};
      case ek::list: {
        value_list l;
        for (const auto& a : e.args) l.push_back(eval(*a));
        return built(value{std::move(l)}, e.line);
      }
      case ek::dict: {
        value_map m;
        for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
          auto k = eval(*e.args[i]);
          if (!k.is_string()) fail(e.line, "only string keys are supported in a dict literal");
          bool replaced = false;
          for (auto& kv : m)
            if (kv.first == k.as_string()) {
              kv.second = eval(*e.args[i + 1]);
              replaced = true;
            }
          if (!replaced) m.emplace_back(k.as_string(), eval(*e.args[i + 1]));
        }
        return built(value{std::move(m)}, e.line);
      }
    }
    return {};
  }

  value subscript(const value& base, const value& key, int line) {
    switch (base.type()) {
      case vk::undefined:
        fail(line, "cannot subscript an undefined value");
      case vk::map:
        if (!key.is_string()) return {};
        charge(product(base.as_map().size(), 8), line);
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
        charge(s.size(), line);
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

  // Python's slice.indices for a sequence of length n: the indices a slice takes.
  static std::vector<int64_t> slice_indices(int64_t n, const value& start, const value& stop,
                                            int64_t step) {
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

  value slice(const expr& e) {
    auto base = eval(*e.args[0]);
    value bounds[3];
    for (int i = 0; i < 3; ++i)
      if (e.args[static_cast<std::size_t>(i) + 1])
        bounds[i] = eval(*e.args[static_cast<std::size_t>(i) + 1]);
    for (auto& b : bounds)
      if (!b.is_undefined() && !b.is_none() && b.type() != vk::integer)
        fail(e.line, "slice bounds must be integers");
    const int64_t step = bounds[2].is_number() ? bounds[2].as_int() : 1;
    if (step == 0) fail(e.line, "slice step cannot be zero");
    if (base.is_list()) {
      const auto& l = base.as_list();
      value_list out;
      for (auto i : slice_indices(static_cast<int64_t>(l.size()), bounds[0], bounds[1], step))
        out.push_back(l[static_cast<std::size_t>(i)]);
      return built(value{std::move(out)}, e.line);
    }
    if (base.is_string()) {
      const auto& s = base.as_string();
      charge(s.size(), e.line);
      const auto starts = char_starts(s);
      std::string out;
      for (auto i :
           slice_indices(static_cast<int64_t>(starts.size() - 1), bounds[0], bounds[1], step))
        out += char_at(s, starts, static_cast<std::size_t>(i));
      return built_string(std::move(out), e.line);
    }
    fail(e.line, std::string{"cannot slice a "} + base.type_name());
  }

  value argument(const expr& e, std::size_t position, const char* name, value dflt = {}) {
    // args[0] of methods, filters and tests is the subject: positions count from 1.
    if (position < e.args.size()) return eval(*e.args[position]);
    for (const auto& [k, v] : e.kwargs)
      if (k == name) return eval(*v);
    return dflt;
  }

  value call(const expr& e) {
    if (e.name == "raise_exception") {
      auto message = e.args.empty() ? value{} : eval(*e.args[0]);
      throw template_raised(text(message, e.line));
    }
    if (e.name == "namespace") {
      value_map attributes;
      for (const auto& a : e.args) {
        auto m = eval(*a);
        if (m.is_map() && !m.is_namespace())
          for (const auto& kv : m.as_map()) attributes.push_back(kv);
      }
      for (const auto& [k, v] : e.kwargs) attributes.emplace_back(k, eval(*v));
      charge(product(attributes.size() + 1, value::item_weight), e.line);
      auto ns = value::make_namespace(std::move(attributes));
      // Those no one else holds can hold no cycle: let them go now and then.
      if (namespaces_.size() >= prune_namespaces_at_) {
        namespaces_.erase(std::remove_if(namespaces_.begin(), namespaces_.end(),
                                         [](const value& v) { return !v.shared(); }),
                          namespaces_.end());
        prune_namespaces_at_ = std::max<std::size_t>(64, 2 * namespaces_.size());
      }
      namespaces_.push_back(ns);
      return ns;
    }
    return range(e);
  }

  // range(stop) / range(start, stop[, step]), at most 100000 items as in jinja2's sandbox.
  value range(const expr& e) {
    static constexpr uint64_t max_range = 100000;
    std::vector<int64_t> a;
    for (const auto& x : e.args) {
      auto v = eval(*x);
      if (v.type() != vk::integer) fail(e.line, "range() takes integers");
      a.push_back(v.as_int());
    }
    if (a.empty() || a.size() > 3) fail(e.line, "range() takes 1 to 3 arguments");
    const int64_t start = a.size() == 1 ? 0 : a[0], stop = a.size() == 1 ? a[0] : a[1];
    const int64_t step = a.size() == 3 ? a[2] : 1;
    if (step == 0) fail(e.line, "range() step cannot be zero");
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
      fail(e.line, "range() of more than " + std::to_string(max_range) + " items (" +
                       std::to_string(count) + ")");
    value_list out;
    out.reserve(count);
    int64_t i = start;
    for (uint64_t k = 0; k < count; ++k) {
      out.emplace_back(i);
      if (k + 1 < count) i += step;  // stays between start and stop
    }
    return built(value{std::move(out)}, e.line);
  }

  std::string string_arg(const expr& e, std::size_t position, const char* name,
                         const char* what) {
    auto v = argument(e, position, name);
    if (!v.is_string())
      fail(e.line, std::string{what} + " takes a string, got a " + v.type_name());
    return v.as_string();
  }

  // Python's str.replace(old, new, count) (count < 0: all).
  value replace_text(const std::string& s, const std::string& from, const std::string& to,
                     int64_t count, int line) {
    if (from.empty()) return value{s};  // Python inserts between characters; no template does
    charge(s.size() + from.size(), line);
    std::string out = s;
    const replace_limits limits{count < 0 ? SIZE_MAX : static_cast<std::size_t>(count),
                                limits_.max_output_bytes};
    if (!replace_all(out, from, to, limits)) too_large(line);
    return built_string(std::move(out), line);
  }

  // Python's str.split(sep, maxsplit).
  value split(const std::string& s, const value& sep, int64_t maxsplit, int line) {
    charge(s.size(), line);
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
        fail(line, "split() takes a non-empty string separator");
      const auto& d = sep.as_string();
      charge(d.size(), line);
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
    will_weigh(product(pieces.size(), value::item_weight) + s.size(), line);
    value_list out;
    out.reserve(pieces.size());
    for (auto [b, e] : pieces) out.emplace_back(s.substr(b, e - b));
    return built(value{std::move(out)}, line);
  }

  value method(const expr& e) {
    auto self = eval(*e.args[0]);
    const auto& m = e.name;
    if (self.is_map() && !self.is_namespace()) {
      charge(product(self.as_map().size(), 8), e.line);
      if (m == "get") {
        auto key = argument(e, 1, "key");
        auto found = key.is_string() ? self.get(key.as_string()) : value{};
        return found.is_undefined() ? argument(e, 2, "default", value::none()) : found;
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
        return built(value{std::move(out)}, e.line);
      }
    }
    if (self.is_string()) {
      const auto& s = self.as_string();
      if (m == "strip" || m == "lstrip" || m == "rstrip") {
        charge(s.size(), e.line);
        return built_string(strip(s, argument(e, 1, "chars"), m != "rstrip", m != "lstrip"),
                            e.line);
      }
      if (m == "startswith" || m == "endswith") {
        auto arg = argument(e, 1, "prefix");
        std::vector<value> options = arg.is_list() ? arg.as_list() : std::vector<value>{arg};
        for (const auto& o : options) {
          if (!o.is_string()) fail(e.line, m + "() takes a string or a tuple of strings");
          const auto& p = o.as_string();
          charge(p.size() + 8, e.line);
          if (p.size() > s.size()) continue;
          if (m == "startswith" ? s.compare(0, p.size(), p) == 0
                                : s.compare(s.size() - p.size(), p.size(), p) == 0)
            return value{true};
        }
        return value{false};
      }
      if (m == "upper") return built_string(upper(s), e.line);
      if (m == "lower") return built_string(lower(s), e.line);
      if (m == "title") return built_string(title(s), e.line);
      if (m == "capitalize") return built_string(capitalize(s), e.line);
      if (m == "replace") {
        auto count = argument(e, 3, "count");
        return replace_text(s, string_arg(e, 1, "old", "replace()"),
                           string_arg(e, 2, "new", "replace()"),
                           count.is_number() ? count.as_int() : -1, e.line);
      }
      if (m == "split") {
        auto max_v = argument(e, 2, "maxsplit");
        return split(s, argument(e, 1, "sep"), max_v.is_number() ? max_v.as_int() : -1, e.line);
      }
    }
    fail(e.line, "a " + std::string{self.type_name()} + " has no method '" + m + "'");
  }

  int64_t length_of(const value& v, int line) {
    switch (v.type()) {
      case vk::undefined:
        return 0;
      case vk::string:
        charge(v.as_string().size(), line);
        return static_cast<int64_t>(utf8_code_points(v.as_string()));
      case vk::list:
        return static_cast<int64_t>(v.as_list().size());
      case vk::map:
        if (v.is_namespace()) break;
        return static_cast<int64_t>(v.as_map().size());
      default:
        break;
    }
    fail(line, std::string{"a "} + v.type_name() + " has no length");
  }

  // Jinja's int filter: int(x), else int(float(x)), else the default; a number that does not
  // fit in 64 bits is an error (Python's would be exact).
  value to_int(const value& v, const expr& e) {
    auto from_double = [&](double d) -> std::optional<value> {
      if (std::isnan(d)) return std::nullopt;
      if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
        fail(e.line, "int of " + float_repr(d) + ": out of range of a 64-bit integer");
      return value{static_cast<int64_t>(d)};
    };
    if (v.type() == vk::integer) return v;
    if (v.type() == vk::boolean) return value{int64_t{v.as_bool()}};
    if (v.type() == vk::floating) {
      if (auto i = from_double(v.as_double())) return *i;
    } else if (v.is_string()) {
      charge(v.as_string().size(), e.line);
      auto s = strip(v.as_string(), value{}, true, true);
      if (!s.empty()) {
        char* end = nullptr;
        errno = 0;
        const long long i = std::strtoll(s.c_str(), &end, 10);
        if (end && *end == '\0') {
          if (errno == ERANGE) fail(e.line, "int of '" + s + "': out of range of a 64-bit integer");
          return value{static_cast<int64_t>(i)};
        }
        double d = 0;
        if (parse_float(s, d))
          if (auto i = from_double(d)) return *i;
      }
    }
    return argument(e, 1, "default", value{int64_t{0}});
  }

  value apply_filter(const std::string& f, const value& v, const expr& e) {
    if (f == "trim") {
      auto s = text(v, e.line);
      charge(s.size(), e.line);
      return built_string(strip(s, argument(e, 1, "chars"), true, true), e.line);
    }
    if (f == "upper") return built_string(upper(text(v, e.line)), e.line);
    if (f == "lower") return built_string(lower(text(v, e.line)), e.line);
    if (f == "capitalize") return built_string(capitalize(text(v, e.line)), e.line);
    if (f == "title") return built_string(title(text(v, e.line)), e.line);
    if (f == "string") return v.is_string() ? v : built_string(text(v, e.line), e.line);
    if (f == "safe") return v;
    if (f == "length" || f == "count") return value{length_of(v, e.line)};
    if (f == "tojson") {
      auto indent = argument(e, 1, "indent");
      if (indent.type() == vk::integer &&
          indent.as_int() > static_cast<int64_t>(limits_.max_output_bytes))
        too_large(e.line);
      std::string out;
      switch (v.to_json(out, indent.type() == vk::integer ? static_cast<int>(indent.as_int()) : -1,
                        limits_.max_output_bytes)) {
        case value::json_error::none:
          break;
        case value::json_error::undefined:
          fail(e.line, "tojson cannot serialize an undefined value");
        case value::json_error::namespace_object:
          fail(e.line, "tojson cannot serialize a namespace");
        case value::json_error::too_large:
          too_large(e.line);
      }
      return built_string(std::move(out), e.line);
    }
    if (f == "default" || f == "d") {
      auto boolean = argument(e, 2, "boolean", value{false});
      if (v.is_undefined() || (boolean.truthy() && !v.truthy()))
        return argument(e, 1, "default_value", value{std::string{}});
      return v;
    }
    if (f == "first" || f == "last") {
      const auto items = v.is_list() ? v : walk(v, e.line);
      const auto& l = items.as_list();
      if (l.empty()) return {};
      return f == "first" ? l.front() : l.back();
    }
    if (f == "join") {
      auto sep = argument(e, 1, "d", value{std::string{}});
      auto attribute = argument(e, 2, "attribute");
      std::string out;
      bool first = true;
      const auto items = walk(v, e.line);
      for (const auto& item : items.as_list()) {
        if (!first) append(out, sep, e.line);
        first = false;
        append(out, attribute.is_string() ? item.get(attribute.as_string()) : item, e.line);
      }
      return built_string(std::move(out), e.line);
    }
    if (f == "replace") {
      auto count = argument(e, 3, "count");
      return replace_text(text(v, e.line), string_arg(e, 1, "old", "replace"),
                         string_arg(e, 2, "new", "replace"),
                         count.is_number() ? count.as_int() : -1, e.line);
    }
    if (f == "list") return v.is_list() ? v : items_of(v, e.line);
    if (f == "reverse") {
      if (v.is_string()) {
        const auto& s = v.as_string();
        charge(s.size(), e.line);
        const auto starts = char_starts(s);
        std::string out;
        out.reserve(s.size());
        for (auto i = starts.size() - 1; i > 0; --i) out += char_at(s, starts, i - 1);
        return built_string(std::move(out), e.line);
      }
      const auto items = walk(v, e.line);
      const auto& l = items.as_list();
      return built(value{value_list(l.rbegin(), l.rend())}, e.line);
    }
    if (f == "items") {
      if (v.is_undefined()) return value{value_list{}};
      if (!v.is_map() || v.is_namespace())
        fail(e.line, std::string{"items takes a map, got a "} + v.type_name());
      value_list out;
      for (const auto& [k, x] : v.as_map()) out.emplace_back(value_list{value{k}, x});
      return built(value{std::move(out)}, e.line);
    }
    if (f == "int") return to_int(v, e);
    if (f == "float") {
      if (v.is_number() || v.type() == vk::boolean) return value{v.as_double()};
      if (v.is_string()) {
        charge(v.as_string().size(), e.line);
        double d = 0;
        if (parse_float(strip(v.as_string(), value{}, true, true), d)) return value{d};
      }
      return argument(e, 1, "default", value{0.0});
    }
    if (f == "abs") {
      if (v.type() == vk::integer) {
        if (v.as_int() == INT64_MIN) overflow("abs", e.line);
        return value{v.as_int() < 0 ? -v.as_int() : v.as_int()};
      }
      if (v.type() == vk::floating) return value{std::fabs(v.as_double())};
      fail(e.line, std::string{"abs takes a number, got a "} + v.type_name());
    }
    if (f == "selectattr" || f == "rejectattr") {
      auto attribute = string_arg(e, 1, "attribute", f.c_str());
      auto test_name = argument(e, 2, "test");
      value_list out;
      const auto items = walk(v, e.line);
      for (const auto& item : items.as_list()) {
        auto field = item.get(attribute);
        bool pass = test_name.is_undefined() ? field.truthy()
                                             : named_test(test_name.str(), field, e, 3);
        if (pass == (f == "selectattr")) out.push_back(item);
      }
      return built(value{std::move(out)}, e.line);
    }
    if (f == "map") {
      auto attribute = argument(e, 99, "attribute");
      value_list out;
      const auto items = walk(v, e.line);
      for (const auto& item : items.as_list()) {
        if (attribute.is_string()) {
          out.push_back(item.get(attribute.as_string()));
        } else {
          auto name = string_arg(e, 1, "filter", "map");
          if (name == "map" || !is_filter_without_arguments(name))
            fail(e.line, "map supports attribute= or a filter without arguments, not '" + name +
                             "'");
          out.push_back(apply_filter(name, item, e));
        }
      }
      return built(value{std::move(out)}, e.line);
    }
    fail(e.line, "unsupported filter '" + f + "'");
  }

  static bool is_filter_without_arguments(const std::string& f) {
    for (const char* name : {"trim", "upper", "lower", "capitalize", "title", "string", "length",
                             "count", "list", "reverse", "int", "float", "abs", "tojson", "items",
                             "safe", "first", "last"})
      if (f == name) return true;
    return false;
  }

  value filter(const expr& e) { return apply_filter(e.name, eval(*e.args[0]), e); }

  bool test(const expr& e) { return named_test(e.name, eval(*e.args[0]), e, 1); }

  // Test `name` on `v`; its argument (if any) is argument `position` of `e`.
  bool named_test(const std::string& name, const value& v, const expr& e, std::size_t position) {
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
      auto s = text(v, e.line);
      charge(s.size(), e.line);
      return s == (name == "lower" ? lower(s) : upper(s));
    }
    if (name == "odd" || name == "even" || name == "divisibleby") {
      if (v.type() != vk::integer) fail(e.line, "'" + name + "' tests integers");
      if (name == "divisibleby") {
        auto d = argument(e, position, "num");
        if (d.type() != vk::integer || d.as_int() == 0)
          fail(e.line, "'divisibleby' takes a non-zero integer");
        // INT64_MIN % -1 overflows in C++; every integer is divisible by -1.
        return d.as_int() == -1 || v.as_int() % d.as_int() == 0;
      }
      return (v.as_int() % 2 != 0) == (name == "odd");
    }
    auto other = argument(e, position, "b");
    if (name == "equalto" || name == "eq" || name == "==") return equal(v, other, e.line);
    if (name == "ne" || name == "!=") return !equal(v, other, e.line);
    if (name == "sameas") return equal(v, other, e.line) && v.type() == other.type();
    if (name == "in") return contains(other, v, e.line);
    fail(e.line, "unsupported test '" + name + "'");
  }

  // Python's ==, its comparisons counted (at most the lighter side's weight).
  bool equal(const value& a, const value& b, int line) {
    charge(std::min(a.weight(), b.weight()) + 1, line);
    return a == b;
  }

  bool contains(const value& container, const value& item, int line) {
    switch (container.type()) {
      case vk::undefined:
        return false;
      case vk::string: {
        if (!item.is_string())
          fail(line, std::string{"'in <string>' needs a string on the left, got a "} +
                         item.type_name());
        const auto& text = container.as_string();
        const auto& needle = item.as_string();
        charge(text.size() + needle.size(), line);
        return text_finder{needle}.find(text, 0) != std::string::npos;
      }
      case vk::list:
        charge(product(container.as_list().size(), 8 + item.weight()), line);
        for (const auto& x : container.as_list())
          if (x == item) return true;
        return false;
      case vk::map:
        if (container.is_namespace()) break;
        charge(product(container.as_map().size(), 8), line);
        return item.is_string() && !container.get(item.as_string()).is_undefined();
      default:
        break;
    }
    fail(line, std::string{"cannot test membership in a "} + container.type_name());
  }

  [[noreturn]] static void bad_operands(const std::string& op, const value& a, const value& b,
                                        int line) {
    fail(line, "unsupported operand types for '" + op + "': " + a.type_name() + " and " +
                   b.type_name());
  }

  [[noreturn]] static void overflow(const std::string& op, int line) {
    fail(line, "integer overflow in '" + op + "': the result does not fit in 64 bits");
  }

  static bool numeric(const value& v) { return v.is_number() || v.type() == vk::boolean; }
  static int64_t int_of(const value& v) {
    return v.type() == vk::boolean ? int64_t{v.as_bool()} : v.as_int();
  }
  static bool both_int(const value& a, const value& b) {
    return a.type() != vk::floating && b.type() != vk::floating;
  }

  // i `op` j on 64-bit integers with Python's semantics, or an error when the result does not
  // fit (Python's integers are unbounded).
  static value checked(int64_t i, char op, int64_t j, int line) {
    int64_t r = 0;
    switch (op) {
      case '+':
        if (__builtin_add_overflow(i, j, &r)) overflow("+", line);
        return value{r};
      case '-':
        if (__builtin_sub_overflow(i, j, &r)) overflow("-", line);
        return value{r};
      case '*':
        if (__builtin_mul_overflow(i, j, &r)) overflow("*", line);
        return value{r};
      case '/':  // floor division
      case '%': {
        if (j == -1) {  // INT64_MIN / -1 overflows in C++, INT64_MIN % -1 too
          if (op == '%') return value{int64_t{0}};
          if (i == INT64_MIN) overflow("//", line);
          return value{-i};
        }
        auto q = i / j;
        if ((i % j != 0) && ((i < 0) != (j < 0))) --q;
        return op == '/' ? value{q} : value{i - q * j};
      }
      default: {  // '^': power, j >= 0, by squaring
        int64_t result = 1, base = i;
        for (int64_t e = j; e > 0;) {
          if ((e & 1) && __builtin_mul_overflow(result, base, &result)) overflow("**", line);
          e >>= 1;
          // Needed only while bits remain; then the result would overflow too.
          if (e > 0 && __builtin_mul_overflow(base, base, &base)) overflow("**", line);
        }
        return value{result};
      }
    }
  }

  value binary(const std::string& op, const value& a, const value& b, int line) {
    if (op == "~") {
      std::string out;
      append(out, a, line);
      append(out, b, line);
      return built_string(std::move(out), line);
    }
    if (op == "==") return value{equal(a, b, line)};
    if (op == "!=") return value{!equal(a, b, line)};
    if (op == "in") return value{contains(b, a, line)};
    if (op == "not in") return value{!contains(b, a, line)};
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
        charge(std::min(a.as_string().size(), b.as_string().size()) + 1, line);
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
        append_text(out, a.as_string(), line);
        append_text(out, b.as_string(), line);
        return built_string(std::move(out), line);
      }
      if (a.is_list() && b.is_list()) {
        will_weigh(a.weight() > SIZE_MAX - b.weight() ? SIZE_MAX : a.weight() + b.weight(), line);
        auto l = a.as_list();
        l.insert(l.end(), b.as_list().begin(), b.as_list().end());
        return built(value{std::move(l)}, line);
      }
    }
    if (op == "*" && (a.is_string() || a.is_list()) && b.type() == vk::integer)
      return repeat(a, b.as_int(), line);
    if (op == "*" && (b.is_string() || b.is_list()) && a.type() == vk::integer)
      return repeat(b, a.as_int(), line);
    if (!numeric(a) || !numeric(b)) bad_operands(op, a, b, line);
    bool ints = both_int(a, b);
    double x = a.as_double(), y = b.as_double();
    if (op == "+") return ints ? checked(int_of(a), '+', int_of(b), line) : value{x + y};
    if (op == "-") return ints ? checked(int_of(a), '-', int_of(b), line) : value{x - y};
    if (op == "*") return ints ? checked(int_of(a), '*', int_of(b), line) : value{x * y};
    if (op == "/") {
      if (y == 0) fail(line, "division by zero");
      return value{x / y};
    }
    if (op == "//" || op == "%") {
      if (y == 0) fail(line, "division by zero");
      if (ints) return checked(int_of(a), op == "//" ? '/' : '%', int_of(b), line);
      auto q = std::floor(x / y);
      return op == "//" ? value{q} : value{x - q * y};
    }
    if (op == "**") {
      if (ints && int_of(b) >= 0) return checked(int_of(a), '^', int_of(b), line);
      if (x == 0 && y < 0) fail(line, "0 cannot be raised to a negative power");
      return value{std::pow(x, y)};
    }
    bad_operands(op, a, b, line);
  }

  // Python's sequence * n: refused before it is built when it would be too large.
  value repeat(const value& a, int64_t times, int line) {
    const bool empty = a.is_string() ? a.as_string().empty() : a.as_list().empty();
    if (times <= 0 || empty) return a.is_string() ? value{std::string{}} : value{value_list{}};
    will_weigh(product(a.weight(), static_cast<uint64_t>(times)), line);
    if (a.is_string()) {
      std::string out;
      out.reserve(a.as_string().size() * static_cast<std::size_t>(times));
      for (int64_t i = 0; i < times; ++i) out += a.as_string();
      return built_string(std::move(out), line);
    }
    value_list out;
    out.reserve(a.as_list().size() * static_cast<std::size_t>(times));
    for (int64_t i = 0; i < times; ++i)
      out.insert(out.end(), a.as_list().begin(), a.as_list().end());
    return built(value{std::move(out)}, line);
  }

  value globals_;
  render_limits limits_;
  std::vector<std::unordered_map<std::string, value>> scopes_;
  // Every namespace made, so that its cycles can be broken at the end.
  std::vector<value> namespaces_;
  std::size_t prune_namespaces_at_ = 64;
  int64_t iterations_ = 0;
  std::size_t work_ = 0;
};

}  // namespace

std::string render_template(const template_program& program, const value& variables,
                            const render_limits& limits) {
  return renderer{variables, limits}.run(program);
}

}  // namespace conveyor::chat
