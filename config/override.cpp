// Command-line overrides: one dotted key and its value as text, read by the key's type.
#include <charconv>

#include "config/config.hpp"
#include "config/schema.hpp"

namespace conveyor::config {

namespace {

using detail::issue;
using detail::rule;

error command_line_error(const std::string& message) {
  return make_error(ec::bad_config, "command line: " + message);
}

std::string_view trim(std::string_view x) {
  while (!x.empty() && x.front() == ' ') x.remove_prefix(1);
  while (!x.empty() && x.back() == ' ') x.remove_suffix(1);
  return x;
}

/// "a,b, c" -> {"a", "b", "c"}; "" -> {}.
std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> out;
  if (trim(text).empty()) return out;
  for (;;) {
    auto comma = text.find(',');
    out.emplace_back(trim(text.substr(0, comma)));
    if (comma == std::string_view::npos) return out;
    text.remove_prefix(comma + 1);
  }
}

// -- parsing a value by its type: each returns a problem or "" ------------------------------------

std::string parse(std::string_view text, std::string& out) {
  out = std::string{text};
  return {};
}

std::string parse(std::string_view text, int64_t& out) {
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (err == std::errc{} && end == text.data() + text.size() && !text.empty()) return {};
  return "expected an integer, got '" + std::string{text} + "'";
}

std::string parse(std::string_view text, double& out) {
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (err == std::errc{} && end == text.data() + text.size() && !text.empty()) return {};
  return "expected a number, got '" + std::string{text} + "'";
}

std::string parse(std::string_view text, bool& out) {
  if (text == "true" || text == "false") {
    out = text == "true";
    return {};
  }
  return "expected true or false, got '" + std::string{text} + "'";
}

std::string parse(std::string_view text, std::vector<std::string>& out) {
  out = split_list(text);
  return {};
}

/// The schema's field visitor: sets the field named `leaf` when the text is a valid value.
struct field_setter {
  std::string_view leaf;
  std::string_view text;
  std::string prefix;
  bool found = false;
  std::string problem;

  template <class T>
  void operator()(std::string_view key, T& value, const rule& r) {
    if (key != leaf) return;
    found = true;
    auto full_key = prefix + "." + std::string{key};
    T parsed{};
    if (auto err = parse(text, parsed); !err.empty()) {
      problem = full_key + ": " + err;
      return;
    }
    std::vector<issue> issues;
    detail::check_value(full_key, parsed, r, issues);
    for (const auto& x : issues) {
      if (!problem.empty()) problem += "\ncommand line: ";
      problem += x.key + ": " + x.message;
    }
    if (issues.empty()) value = std::move(parsed);
  }
};

/// The schema's section visitor: hands the section named `name` to a field setter.
struct section_setter {
  std::string_view name;
  field_setter& setter;

  template <class S>
  void section(std::string_view section_name, S& x) {
    if (section_name != name) return;
    setter.prefix = std::string{name};
    detail::fields(setter, x);
  }

  void executor_list(bool&, std::vector<executor>&) {
    // handled by apply_override
  }
};

/// "executors.0.slots" -> "executors[0].slots"; any other key stays as it is.
std::string normalize(std::string_view key) {
  std::string prefix{detail::executors_key};
  prefix += '.';
  if (key.substr(0, prefix.size()) != prefix) return std::string{key};
  auto rest = key.substr(prefix.size());
  auto dot = rest.find('.');
  auto index = rest.substr(0, dot);
  if (index.empty() || index.find_first_not_of("0123456789") != std::string_view::npos)
    return std::string{key};
  std::string result{detail::executors_key};
  result += "[" + std::string{index} + "]";
  if (dot != std::string_view::npos) result += rest.substr(dot);
  return result;
}

/// `executors=auto`, `executors=none` or `executors=cpu,cuda:0`: replaces the executors.
error set_executors(pipeline& cfg, std::string_view text) {
  if (text == "auto") {
    cfg.auto_executors = true;
    cfg.executors.clear();
    return {};
  }
  if (text == "none") {
    // Only workers (cluster.remote) run the model; `validate` insists on some.
    cfg.auto_executors = false;
    cfg.executors.clear();
    return {};
  }
  auto devices = split_list(text);
  if (devices.empty())
    return command_line_error(std::string{detail::executors_key} +
                              ": expected \"auto\" or a list of devices, got ''");
  std::vector<executor> xs(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) {
    if (auto problem = detail::check_device(devices[i]); !problem.empty())
      return command_line_error(detail::executor_key(i) + ".device: " + problem);
    xs[i].device = devices[i];
  }
  cfg.auto_executors = false;
  cfg.executors = std::move(xs);
  return {};
}

}  // namespace

error apply_override(pipeline& cfg, std::string_view dotted_key, std::string_view value) {
  auto key = normalize(dotted_key);
  if (key == detail::executors_key) return set_executors(cfg, value);
  field_setter setter{{}, value, {}, false, {}};
  auto executor_prefix = std::string{detail::executors_key} + "[";
  if (key.compare(0, executor_prefix.size(), executor_prefix) == 0) {
    // executors[N].leaf
    auto close = key.find("].");
    size_t index = 0;
    auto digits = std::string_view{key}.substr(executor_prefix.size());
    if (close != std::string::npos) digits = digits.substr(0, close - executor_prefix.size());
    auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (close == std::string::npos || err != std::errc{} || end != digits.data() + digits.size())
      return command_line_error(detail::unknown_key_message(key));
    setter.leaf = std::string_view{key}.substr(close + 2);
    if (index >= cfg.executors.size()) {
      auto why = cfg.auto_executors
                     ? std::string{"executors is \"auto\""}
                     : "the configuration lists " + std::to_string(cfg.executors.size());
      return command_line_error(key + ": no such executor, " + why);
    }
    setter.prefix = detail::executor_key(index);
    detail::fields(setter, cfg.executors[index]);
  } else if (auto dot = key.find('.'); dot != std::string::npos) {
    setter.leaf = std::string_view{key}.substr(dot + 1);
    section_setter sections{std::string_view{key}.substr(0, dot), setter};
    detail::sections(sections, cfg);
  }
  if (!setter.found) return command_line_error(detail::unknown_key_message(key));
  if (!setter.problem.empty()) return command_line_error(setter.problem);
  return {};
}

}  // namespace conveyor::config
