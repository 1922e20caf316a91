// Renders a parsed chat template: statements into the prompt, expressions into values.
#include "chat/template_renderer.hpp"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "chat/builtin_call.hpp"
#include "chat/render_budget.hpp"
#include "chat/template_builtins.hpp"
#include "chat/template_methods.hpp"
#include "chat/template_operators.hpp"
#include "chat/template_parser.hpp"

namespace conveyor::chat {

namespace {

using ek = expr::kind;

enum class flow { normal, break_loop, continue_loop };

// Walks the syntax tree and keeps the scopes; filters, tests, methods and operators are the
// builtins' (template_builtins.hpp, template_methods.hpp, template_operators.hpp), which evaluate
// their arguments through it.
class renderer final : public expression_evaluator {
 public:
  renderer(const value& variables, const render_limits& limits, const std::tm& now)
      : globals_(variables), budget_(limits), now_(now) {}

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

  value eval(const expr& e) override {
    switch (e.type) {
      case ek::literal:
        return e.lit;
      case ek::name:
        return lookup(e.name);
      case ek::attribute: {
        auto base = eval(*e.args[0]);
        if (base.is_undefined())
          fail_at_line(e.line, "cannot read attribute '" + e.name + "' of an undefined value");
        return base.get(e.name);
      }
      case ek::item:
        return subscript(eval(*e.args[0]), eval(*e.args[1]), budget_, e.line);
      case ek::slice:
        return slice_of(e);
      case ek::call:
        return call(e);
      case ek::macro:
        return call_macro(e);
      case ek::method: {
        auto self = eval(*e.args[0]);
        return call_method(self, builtin(e));
      }
      case ek::filter:
        return apply_filter(e.name, eval(*e.args[0]), builtin(e));
      case ek::test: {
        bool result = apply_test(e.name, eval(*e.args[0]), builtin(e), 1);
        return value{e.negated ? !result : result};
      }
      case ek::negate:
        return value{!eval(*e.args[0]).truthy()};
      case ek::unary_minus:
        return negative(eval(*e.args[0]), e.line);
      case ek::binary:
        return binary_operator(e.name, eval(*e.args[0]), eval(*e.args[1]), budget_, e.line);
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
        return budget_.built(value{std::move(l)}, e.line);
      }
      case ek::dict: {
        value_map m;
        for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
          auto k = eval(*e.args[i]);
          if (!k.is_string())
            fail_at_line(e.line, "only string keys are supported in a dict literal");
          bool replaced = false;
          for (auto& kv : m)
            if (kv.first == k.as_string()) {
              kv.second = eval(*e.args[i + 1]);
              replaced = true;
            }
          if (!replaced) m.emplace_back(k.as_string(), eval(*e.args[i + 1]));
        }
        return budget_.built(value{std::move(m)}, e.line);
      }
    }
    return {};
  }

 private:
  // -- the rendered prompt ---------------------------------------------------------------------

  [[noreturn]] void prompt_too_large(int line) const {
    fail_at_line(line, "the rendered prompt exceeds " +
                           std::to_string(budget_.limits().max_output_bytes) + " bytes");
  }
  void emit(std::string& out, std::string_view text, int line) const {
    if (text.size() > budget_.limits().max_output_bytes - out.size()) prompt_too_large(line);
    out += text;
  }
  void emit(std::string& out, const value& v, int line) const {
    if (!v.append_str(out, budget_.limits().max_output_bytes)) prompt_too_large(line);
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
            fail_at_line(n.line, "cannot assign attribute '" + n.attribute + "' of '" +
                                     n.targets[0] + "', a " + target.type_name() +
                                     " (only namespaces take attributes)");
          target.set_attribute(n.attribute, std::move(v));
        }
        return flow::normal;
      }
      case node::kind::break_loop:
        return flow::break_loop;
      case node::kind::continue_loop:
        return flow::continue_loop;
      case node::kind::macro:
        macros_[n.targets[0]] = &n;
        return flow::normal;
    }
    return flow::normal;
  }

  void bind_targets(const node& n, const value& item) {
    auto& scope = scopes_.back();
    if (n.targets.size() == 1) {
      scope[n.targets[0]] = item;
      return;
    }
    if (!item.is_list() || item.as_list().size() != n.targets.size())
      fail_at_line(n.line, "cannot unpack a " + std::string{item.type_name()} + " into " +
                               std::to_string(n.targets.size()) + " loop variables");
    for (std::size_t i = 0; i < n.targets.size(); ++i) scope[n.targets[i]] = item.as_list()[i];
  }

  void exec_for(const node& n, std::string& out) {
    auto sequence = items_of(eval(*n.value), budget_, n.line);
    if (n.condition) {
      // The loop's `if` filter looks at every item: each look is an iteration.
      budget_.count_iterations(static_cast<int64_t>(sequence.as_list().size()), n.line);
      scopes_.emplace_back();
      value_list kept;
      for (const auto& item : sequence.as_list()) {
        bind_targets(n, item);
        if (eval(*n.condition).truthy()) kept.push_back(item);
      }
      scopes_.pop_back();
      sequence = budget_.built(value{std::move(kept)}, n.line);
    }
    const auto& items = sequence.as_list();
    const auto length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      budget_.count_iterations(1, n.line);
      // Each iteration starts from a fresh scope: a `set` in the body lasts one iteration.
      scopes_.emplace_back();
      bind_targets(n, items[static_cast<std::size_t>(i)]);
      value_map loop{{"index", value{i + 1}},         {"index0", value{i}},
                     {"revindex", value{length - i}}, {"revindex0", value{length - i - 1}},
                     {"first", value{i == 0}},        {"last", value{i == length - 1}},
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

  // A name in the scopes from the innermost to `floor_` (a macro's own), then the template's
  // top level, then the variables; a global function that no variable hides is defined
  // (`strftime_now is defined`) and prints as Python's repr of a function would begin.
  value lookup(const std::string& name) const {
    for (auto s = scopes_.size(); s > floor_; --s) {
      auto i = scopes_[s - 1].find(name);
      if (i != scopes_[s - 1].end()) return i->second;
    }
    if (floor_ > 0)
      if (auto i = scopes_.front().find(name); i != scopes_.front().end()) return i->second;
    auto v = globals_.get(name);
    if (v.is_undefined() && is_supported_function(name)) return value{"<function " + name + ">"};
    return v;
  }

  builtin_call builtin(const expr& e) { return builtin_call{e, *this, budget_}; }

  value slice_of(const expr& e) {
    auto base = eval(*e.args[0]);
    value bounds[3];
    for (int i = 0; i < 3; ++i)
      if (e.args[static_cast<std::size_t>(i) + 1])
        bounds[i] = eval(*e.args[static_cast<std::size_t>(i) + 1]);
    return slice(base, bounds[0], bounds[1], bounds[2], budget_, e.line);
  }

  // The global functions: raise_exception, namespace and range.
  value call(const expr& e) {
    if (e.name == "raise_exception") {
      auto message = e.args.empty() ? value{} : eval(*e.args[0]);
      throw template_raised(budget_.text(message, e.line));
    }
    if (e.name == "namespace") {
      value_map attributes;
      for (const auto& a : e.args) {
        auto m = eval(*a);
        if (m.is_map() && !m.is_namespace())
          for (const auto& kv : m.as_map()) attributes.push_back(kv);
      }
      for (const auto& [k, v] : e.kwargs) attributes.emplace_back(k, eval(*v));
      budget_.charge(saturating_product(attributes.size() + 1, value::item_weight), e.line);
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
    if (e.name == "strftime_now") return strftime_now(e);
    return range(builtin(e));
  }

  // transformers' strftime_now(format): datetime.now().strftime(format), which is C's strftime
  // (in the C locale, as Python leaves LC_TIME) of the rendering's time.
  value strftime_now(const expr& e) {
    static constexpr std::size_t max_format = 256;
    auto format = e.args.empty() ? value{} : eval(*e.args[0]);
    if (!format.is_string()) fail_at_line(e.line, "strftime_now() takes a format string");
    const auto& f = format.as_string();
    if (f.size() > max_format)
      fail_at_line(e.line, "strftime_now() takes a format of at most " +
                               std::to_string(max_format) + " bytes");
    budget_.charge(f.size(), e.line);
    if (f.empty()) return value{std::string{}};
    // No directive writes more than a few dozen bytes.
    std::string out(f.size() * 64 + 64, '\0');
    const auto n = std::strftime(out.data(), out.size(), f.c_str(), &now_);
    out.resize(n);
    return budget_.built_string(std::move(out), e.line);
  }

  // A call of the template's macro: its body rendered in a scope of its own, in which the
  // parameters are bound (positional, then by keyword, then the defaults; a missing one is
  // undefined) and only the template's top level and the variables are visible besides.
  value call_macro(const expr& e) {
    auto found = macros_.find(e.name);
    if (found == macros_.end()) fail_at_line(e.line, "macro '" + e.name + "' is not defined");
    const node& m = *found->second;
    const std::size_t params = m.targets.size() - 1;
    if (e.args.size() > params)
      fail_at_line(e.line, "macro '" + e.name + "' takes " + std::to_string(params) +
                               " arguments, got " + std::to_string(e.args.size()));
    // Each call nests a body's statements and expressions (each up to max_template_nesting
    // deep) on the stack: calls nest far less deep than those.
    static constexpr int max_macro_depth = 32;
    if (macro_depth_ >= max_macro_depth)
      fail_at_line(e.line,
                   "macro calls nested more than " + std::to_string(max_macro_depth) + " deep");
    // Each call is work (its frame, its output): a macro that calls itself twice per level
    // runs out of work, not of time.
    budget_.charge(4 * value::item_weight, e.line);
    std::unordered_map<std::string, value> frame;
    std::vector<bool> bound(params, false);
    for (std::size_t i = 0; i < e.args.size(); ++i) {
      frame[m.targets[i + 1]] = eval(*e.args[i]);
      bound[i] = true;
    }
    for (const auto& [key, arg] : e.kwargs) {
      auto p = std::find(m.targets.begin() + 1, m.targets.end(), key);
      if (p == m.targets.end())
        fail_at_line(e.line, "macro '" + e.name + "' has no parameter '" + key + "'");
      frame[key] = eval(*arg);
      bound[static_cast<std::size_t>(p - m.targets.begin()) - 1] = true;
    }
    const auto saved_floor = floor_;
    scopes_.push_back(std::move(frame));
    floor_ = scopes_.size() - 1;
    ++macro_depth_;
    std::string out;
    try {
      for (std::size_t i = 0; i < params; ++i)
        if (!bound[i] && m.conditions[i]) scopes_.back()[m.targets[i + 1]] = eval(*m.conditions[i]);
      exec(m.body, out);
    } catch (...) {
      --macro_depth_;
      floor_ = saved_floor;
      scopes_.pop_back();
      throw;
    }
    --macro_depth_;
    floor_ = saved_floor;
    scopes_.pop_back();
    return budget_.built_string(std::move(out), e.line);
  }

  value globals_;
  render_budget budget_;
  std::tm now_;
  std::vector<std::unordered_map<std::string, value>> scopes_;
  // The first scope a name is looked up in before the top level's: a macro's frame.
  std::size_t floor_ = 0;
  // The macros defined so far (their definitions ran) and how deep calls of them nest.
  std::unordered_map<std::string, const node*> macros_;
  int macro_depth_ = 0;
  // Every namespace made, so that its cycles can be broken at the end.
  std::vector<value> namespaces_;
  std::size_t prune_namespaces_at_ = 64;
};

}  // namespace

std::string render_template(const template_program& program, const value& variables,
                            const render_limits& limits, const std::tm& now) {
  return renderer{variables, limits, now}.run(program);
}

}  // namespace conveyor::chat
