#include "chat/template_renderer.hpp"

#include <cmath>
#include <unordered_map>

namespace conveyor::chat {

namespace {

using ek = expr::kind;
using vk = value::kind;

// Splits UTF-8 text into its characters (code points, as Python indexes strings).
std::vector<std::string> characters(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    std::size_t n = 1;
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0xf0)
      n = 4;
    else if (c >= 0xe0)
      n = 3;
    else if (c >= 0xc0)
      n = 2;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
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

std::string upper(std::string s) {
  for (auto& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return s;
}

std::string lower(std::string s) {
  for (auto& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

std::string title(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (auto& c : out) {
    if (is_alpha(c)) {
      c = start ? upper(std::string(1, c))[0] : lower(std::string(1, c))[0];
      start = false;
    } else {
      start = true;
    }
  }
  return out;
}

std::string capitalize(const std::string& s) {
  auto out = lower(s);
  if (!out.empty()) out[0] = upper(out.substr(0, 1))[0];
  return out;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to,
                        int64_t count) {
  if (from.empty()) return s;  // Python inserts between characters; templates never do this
  std::string out;
  std::size_t pos = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    auto hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out += s.substr(pos, hit - pos) + to;
    pos = hit + from.size();
  }
  return out + s.substr(pos);
}

// Python's slice.indices for a sequence of length n.
std::vector<int64_t> slice_indices(int64_t n, const value& start, const value& stop,
                                   const value& step_v) {
  int64_t step = step_v.is_number() ? step_v.as_int() : 1;
  auto clamp = [&](const value& v, int64_t dflt, bool is_start) {
    if (!v.is_number()) return dflt;
    int64_t i = v.as_int();
    if (i < 0) i += n;
    if (step > 0) return std::max<int64_t>(0, std::min(i, n));
    (void)is_start;
    return std::max<int64_t>(-1, std::min(i, n - 1));
  };
  std::vector<int64_t> out;
  if (step > 0) {
    for (int64_t i = clamp(start, 0, true), e = clamp(stop, n, false); i < e; i += step)
      out.push_back(i);
  } else if (step < 0) {
    for (int64_t i = clamp(start, n - 1, true), e = clamp(stop, -1, false); i > e; i += step)
      out.push_back(i);
  }
  return out;
}

enum class flow { normal, break_loop, continue_loop };

class renderer {
 public:
  explicit renderer(const value& variables) : globals_(variables) {}

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
        out += n.text;
        return flow::normal;
      case node::kind::output:
        out += eval(*n.value).str();
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

  std::vector<value> iterate(const value& v, int line) {
    switch (v.type()) {
      case vk::undefined:
        return {};
      case vk::list:
        return v.as_list();
      case vk::map: {
        std::vector<value> keys;
        for (const auto& kv : v.as_map()) keys.emplace_back(kv.first);
        return keys;
      }
      case vk::string: {
        std::vector<value> chars;
        for (auto& c : characters(v.as_string())) chars.emplace_back(std::move(c));
        return chars;
      }
      default:
        fail(line, std::string{"cannot iterate over a "} + v.type_name());
    }
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
    auto items = iterate(eval(*n.value), n.line);
    scopes_.emplace_back();
    if (n.condition) {
      std::vector<value> kept;
      for (auto& item : items) {
        bind_targets(n, item);
        if (eval(*n.condition).truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    scopes_.pop_back();
    const auto length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
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
      case ek::slice: {
        auto base = eval(*e.args[0]);
        value bounds[3];
        for (int i = 0; i < 3; ++i)
          if (e.args[static_cast<std::size_t>(i) + 1])
            bounds[i] = eval(*e.args[static_cast<std::size_t>(i) + 1]);
        for (auto& b : bounds)
          if (!b.is_undefined() && !b.is_none() && b.type() != vk::integer)
            fail(e.line, "slice bounds must be integers");
        if (bounds[2].is_number() && bounds[2].as_int() == 0)
          fail(e.line, "slice step cannot be zero");
        if (base.is_list()) {
          const auto& l = base.as_list();
          value_list out;
          for (auto i : slice_indices(static_cast<int64_t>(l.size()), bounds[0], bounds[1],
                                      bounds[2]))
            out.push_back(l[static_cast<std::size_t>(i)]);
          return value{std::move(out)};
        }
        if (base.is_string()) {
          auto chars = characters(base.as_string());
          std::string out;
          for (auto i : slice_indices(static_cast<int64_t>(chars.size()), bounds[0], bounds[1],
                                      bounds[2]))
            out += chars[static_cast<std::size_t>(i)];
          return value{std::move(out)};
        }
        fail(e.line, std::string{"cannot slice a "} + base.type_name());
      }
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
          return value{-(v.type() == vk::boolean ? int64_t{v.as_bool()} : v.as_int())};
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
        return value{std::move(l)};
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
        return value{std::move(m)};
      }
    }
    return {};
  }

  value subscript(const value& base, const value& key, int line) {
    switch (base.type()) {
      case vk::undefined:
        fail(line, "cannot subscript an undefined value");
      case vk::map:
        return key.is_string() ? base.get(key.as_string()) : value{};
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
        auto chars = characters(base.as_string());
        auto n = static_cast<int64_t>(chars.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return {};
        return value{chars[static_cast<std::size_t>(i)]};
      }
      default:
        return {};
    }
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
      throw template_raised(message.str());
    }
    if (e.name == "namespace") {
      value_map attributes;
      for (const auto& a : e.args) {
        auto m = eval(*a);
        if (m.is_map())
          for (const auto& kv : m.as_map()) attributes.push_back(kv);
      }
      for (const auto& [k, v] : e.kwargs) attributes.emplace_back(k, eval(*v));
      return value::make_namespace(std::move(attributes));
    }
    // range(stop) / range(start, stop[, step])
    std::vector<int64_t> a;
    for (const auto& x : e.args) {
      auto v = eval(*x);
      if (v.type() != vk::integer) fail(e.line, "range() takes integers");
      a.push_back(v.as_int());
    }
    if (a.empty() || a.size() > 3) fail(e.line, "range() takes 1 to 3 arguments");
    int64_t start = a.size() == 1 ? 0 : a[0], stop = a.size() == 1 ? a[0] : a[1];
    int64_t step = a.size() == 3 ? a[2] : 1;
    if (step == 0) fail(e.line, "range() step cannot be zero");
    if ((stop - start) / step > 100000) fail(e.line, "range() too long");
    value_list out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
    return value{std::move(out)};
  }

  std::string string_arg(const expr& e, std::size_t position, const char* name,
                         const char* what) {
    auto v = argument(e, position, name);
    if (!v.is_string())
      fail(e.line, std::string{what} + " takes a string, got a " + v.type_name());
    return v.as_string();
  }

  value method(const expr& e) {
    auto self = eval(*e.args[0]);
    const auto& m = e.name;
    if (self.is_map() && !self.is_namespace()) {
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
        return value{std::move(out)};
      }
    }
    if (self.is_string()) {
      const auto& s = self.as_string();
      if (m == "strip" || m == "lstrip" || m == "rstrip")
        return value{strip(s, argument(e, 1, "chars"), m != "rstrip", m != "lstrip")};
      if (m == "startswith" || m == "endswith") {
        auto arg = argument(e, 1, "prefix");
        std::vector<value> options = arg.is_list() ? arg.as_list() : std::vector<value>{arg};
        for (const auto& o : options) {
          if (!o.is_string()) fail(e.line, m + "() takes a string or a tuple of strings");
          const auto& p = o.as_string();
          if (p.size() > s.size()) continue;
          if (m == "startswith" ? s.compare(0, p.size(), p) == 0
                                : s.compare(s.size() - p.size(), p.size(), p) == 0)
            return value{true};
        }
        return value{false};
      }
      if (m == "upper") return value{upper(s)};
      if (m == "lower") return value{lower(s)};
      if (m == "title") return value{title(s)};
      if (m == "capitalize") return value{capitalize(s)};
      if (m == "replace") {
        auto count = argument(e, 3, "count");
        return value{replace_all(s, string_arg(e, 1, "old", "replace()"),
                                 string_arg(e, 2, "new", "replace()"),
                                 count.is_number() ? count.as_int() : -1)};
      }
      if (m == "split") {
        auto sep = argument(e, 1, "sep");
        auto max_v = argument(e, 2, "maxsplit");
        int64_t maxsplit = max_v.is_number() ? max_v.as_int() : -1;
        value_list out;
        if (sep.is_undefined() || sep.is_none()) {
          std::size_t i = 0;
          int64_t splits = 0;
          while (true) {
            while (i < s.size() && is_py_space(s[i])) ++i;
            if (i >= s.size()) break;
            if (maxsplit >= 0 && splits == maxsplit) {
              out.emplace_back(strip(s.substr(i), value{}, false, true));
              break;
            }
            auto j = i;
            while (j < s.size() && !is_py_space(s[j])) ++j;
            out.emplace_back(s.substr(i, j - i));
            ++splits;
            i = j;
          }
          return value{std::move(out)};
        }
        if (!sep.is_string() || sep.as_string().empty())
          fail(e.line, "split() takes a non-empty string separator");
        const auto& d = sep.as_string();
        std::size_t pos = 0;
        for (int64_t n = 0; maxsplit < 0 || n < maxsplit; ++n) {
          auto hit = s.find(d, pos);
          if (hit == std::string::npos) break;
          out.emplace_back(s.substr(pos, hit - pos));
          pos = hit + d.size();
        }
        out.emplace_back(s.substr(pos));
        return value{std::move(out)};
      }
    }
    fail(e.line, "a " + std::string{self.type_name()} + " has no method '" + m + "'");
  }

  int64_t length_of(const value& v, int line) {
    switch (v.type()) {
      case vk::undefined:
        return 0;
      case vk::string:
        return static_cast<int64_t>(utf8_length(v.as_string()));
      case vk::list:
        return static_cast<int64_t>(v.as_list().size());
      case vk::map:
        return static_cast<int64_t>(v.as_map().size());
      default:
        fail(line, std::string{"a "} + v.type_name() + " has no length");
    }
  }

  value apply_filter(const std::string& f, const value& v, const expr& e) {
    if (f == "trim") return value{strip(v.str(), argument(e, 1, "chars"), true, true)};
    if (f == "upper") return value{upper(v.str())};
    if (f == "lower") return value{lower(v.str())};
    if (f == "capitalize") return value{capitalize(v.str())};
    if (f == "title") return value{title(v.str())};
    if (f == "string") return value{v.str()};
    if (f == "safe") return v;
    if (f == "length" || f == "count") return value{length_of(v, e.line)};
    if (f == "tojson") {
      auto indent = argument(e, 1, "indent");
      std::string out;
      if (!v.to_json(out, indent.type() == vk::integer ? static_cast<int>(indent.as_int()) : -1))
        fail(e.line, "tojson cannot serialize an undefined value");
      return value{std::move(out)};
    }
    if (f == "default" || f == "d") {
      auto boolean = argument(e, 2, "boolean", value{false});
      if (v.is_undefined() || (boolean.truthy() && !v.truthy()))
        return argument(e, 1, "default_value", value{std::string{}});
      return v;
    }
    if (f == "first" || f == "last") {
      auto items = iterate(v, e.line);
      if (items.empty()) return {};
      return f == "first" ? items.front() : items.back();
    }
    if (f == "join") {
      auto sep = argument(e, 1, "d", value{std::string{}});
      auto attribute = argument(e, 2, "attribute");
      std::string out;
      bool first = true;
      for (const auto& item : iterate(v, e.line)) {
        if (!first) out += sep.str();
        first = false;
        out += attribute.is_string() ? item.get(attribute.as_string()).str() : item.str();
      }
      return value{std::move(out)};
    }
    if (f == "replace") {
      auto count = argument(e, 3, "count");
      return value{replace_all(v.str(), string_arg(e, 1, "old", "replace"),
                               string_arg(e, 2, "new", "replace"),
                               count.is_number() ? count.as_int() : -1)};
    }
    if (f == "list") return value{iterate(v, e.line)};
    if (f == "reverse") {
      if (v.is_string()) {
        auto chars = characters(v.as_string());
        std::string out;
        for (auto i = chars.rbegin(); i != chars.rend(); ++i) out += *i;
        return value{std::move(out)};
      }
      auto items = iterate(v, e.line);
      return value{value_list(items.rbegin(), items.rend())};
    }
    if (f == "items") {
      if (v.is_undefined()) return value{value_list{}};
      if (!v.is_map()) fail(e.line, std::string{"items takes a map, got a "} + v.type_name());
      value_list out;
      for (const auto& [k, x] : v.as_map()) out.emplace_back(value_list{value{k}, x});
      return value{std::move(out)};
    }
    if (f == "int") {
      if (v.type() == vk::integer) return v;
      if (v.type() == vk::boolean) return value{int64_t{v.as_bool()}};
      if (v.type() == vk::floating) return value{static_cast<int64_t>(v.as_double())};
      if (v.is_string()) {
        char* end = nullptr;
        auto s = strip(v.as_string(), value{}, true, true);
        auto i = std::strtoll(s.c_str(), &end, 10);
        if (!s.empty() && end && *end == '\0') return value{static_cast<int64_t>(i)};
      }
      return argument(e, 1, "default", value{int64_t{0}});
    }
    if (f == "float") {
      if (v.is_number() || v.type() == vk::boolean) return value{v.as_double()};
      if (v.is_string()) {
        char* end = nullptr;
        auto s = strip(v.as_string(), value{}, true, true);
        auto d = std::strtod(s.c_str(), &end);
        if (!s.empty() && end && *end == '\0') return value{d};
      }
      return argument(e, 1, "default", value{0.0});
    }
    if (f == "abs") {
      if (v.type() == vk::integer) return value{v.as_int() < 0 ? -v.as_int() : v.as_int()};
      if (v.type() == vk::floating) return value{std::fabs(v.as_double())};
      fail(e.line, std::string{"abs takes a number, got a "} + v.type_name());
    }
    if (f == "selectattr" || f == "rejectattr") {
      auto attribute = string_arg(e, 1, "attribute", f.c_str());
      auto test_name = argument(e, 2, "test");
      value_list out;
      for (const auto& item : iterate(v, e.line)) {
        auto field = item.get(attribute);
        bool pass = test_name.is_undefined() ? field.truthy()
                                             : named_test(test_name.str(), field, e, 3);
        if (pass == (f == "selectattr")) out.push_back(item);
      }
      return value{std::move(out)};
    }
    if (f == "map") {
      auto attribute = argument(e, 99, "attribute");
      value_list out;
      for (const auto& item : iterate(v, e.line)) {
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
      return value{std::move(out)};
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
    if (name == "lower") return v.str() == lower(v.str());
    if (name == "upper") return v.str() == upper(v.str());
    if (name == "odd" || name == "even" || name == "divisibleby") {
      if (v.type() != vk::integer) fail(e.line, "'" + name + "' tests integers");
      if (name == "divisibleby") {
        auto d = argument(e, position, "num");
        if (d.type() != vk::integer || d.as_int() == 0)
          fail(e.line, "'divisibleby' takes a non-zero integer");
        return v.as_int() % d.as_int() == 0;
      }
      return (v.as_int() % 2 != 0) == (name == "odd");
    }
    auto other = argument(e, position, "b");
    if (name == "equalto" || name == "eq" || name == "==") return v == other;
    if (name == "ne" || name == "!=") return v != other;
    if (name == "sameas") return v == other && v.type() == other.type();
    if (name == "in") return contains(other, v, e.line);
    fail(e.line, "unsupported test '" + name + "'");
  }

  bool contains(const value& container, const value& item, int line) {
    switch (container.type()) {
      case vk::undefined:
        return false;
      case vk::string:
        if (!item.is_string())
          fail(line, std::string{"'in <string>' needs a string on the left, got a "} +
                         item.type_name());
        return container.as_string().find(item.as_string()) != std::string::npos;
      case vk::list:
        for (const auto& x : container.as_list())
          if (x == item) return true;
        return false;
      case vk::map:
        return item.is_string() && !container.get(item.as_string()).is_undefined();
      default:
        fail(line, std::string{"cannot test membership in a "} + container.type_name());
    }
  }

  [[noreturn]] static void bad_operands(const std::string& op, const value& a, const value& b,
                                        int line) {
    fail(line, "unsupported operand types for '" + op + "': " + a.type_name() + " and " +
                   b.type_name());
  }

  static bool numeric(const value& v) { return v.is_number() || v.type() == vk::boolean; }
  static int64_t int_of(const value& v) {
    return v.type() == vk::boolean ? int64_t{v.as_bool()} : v.as_int();
  }
  static bool both_int(const value& a, const value& b) {
    return a.type() != vk::floating && b.type() != vk::floating;
  }

  value binary(const std::string& op, const value& a, const value& b, int line) {
    if (op == "~") return value{a.str() + b.str()};
    if (op == "==") return value{a == b};
    if (op == "!=") return value{a != b};
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
      if (a.is_string() && b.is_string()) return value{a.as_string() + b.as_string()};
      if (a.is_list() && b.is_list()) {
        auto l = a.as_list();
        l.insert(l.end(), b.as_list().begin(), b.as_list().end());
        return value{std::move(l)};
      }
    }
    if (op == "*" && (a.is_string() || a.is_list()) && b.type() == vk::integer)
      return repeat(a, b.as_int());
    if (op == "*" && (b.is_string() || b.is_list()) && a.type() == vk::integer)
      return repeat(b, a.as_int());
    if (!numeric(a) || !numeric(b)) bad_operands(op, a, b, line);
    bool ints = both_int(a, b);
    double x = a.as_double(), y = b.as_double();
    if (op == "+") return ints ? value{int_of(a) + int_of(b)} : value{x + y};
    if (op == "-") return ints ? value{int_of(a) - int_of(b)} : value{x - y};
    if (op == "*") return ints ? value{int_of(a) * int_of(b)} : value{x * y};
    if (op == "/") {
      if (y == 0) fail(line, "division by zero");
      return value{x / y};
    }
    if (op == "//" || op == "%") {
      if (y == 0) fail(line, "division by zero");
      if (ints) {
        auto i = int_of(a), j = int_of(b);
        auto q = i / j;
        if ((i % j != 0) && ((i < 0) != (j < 0))) --q;
        return op == "//" ? value{q} : value{i - q * j};
      }
      auto q = std::floor(x / y);
      return op == "//" ? value{q} : value{x - q * y};
    }
    if (op == "**") {
      if (ints && int_of(b) >= 0) {
        int64_t r = 1;
        for (int64_t i = 0; i < int_of(b); ++i) r *= int_of(a);
        return value{r};
      }
      return value{std::pow(x, y)};
    }
    bad_operands(op, a, b, line);
  }

  static value repeat(const value& a, int64_t times) {
    if (a.is_string()) {
      std::string out;
      for (int64_t i = 0; i < times; ++i) out += a.as_string();
      return value{std::move(out)};
    }
    value_list out;
    for (int64_t i = 0; i < times; ++i)
      out.insert(out.end(), a.as_list().begin(), a.as_list().end());
    return value{std::move(out)};
  }

  value globals_;
  std::vector<std::unordered_map<std::string, value>> scopes_;
};

}  // namespace

std::string render_template(const template_program& program, const value& variables) {
  return renderer{variables}.run(program);
}

}  // namespace conveyor::chat
