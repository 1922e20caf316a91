// Reading a TOML file into a pipeline: unknown keys, wrong types and impossible values are
// reported with the file, the line and the dotted key. The only file that includes toml++.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <system_error>

#include <toml++/toml.h>

#include "config/config.hpp"
#include "config/schema.hpp"

namespace conveyor::config {

namespace {

/// "a string", "an integer", ... for messages.
const char* type_name(toml::node_type type) {
  switch (type) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a floating-point number";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

/// One line of the final error message; line 0 when the key is not in the file.
struct problem {
  toml::source_index line;
  std::string text;
};

/// Walks a parsed document along the schema, filling a pipeline and collecting problems.
class reader {
 public:
  reader(const toml::table& root, pipeline& cfg) : root_(root) {
    detail::sections(*this, cfg);
    for (auto&& [key, node] : root_) {
      if (known_top_.count(key.str()) == 0)
        unknown(std::string{key.str()}, key.source().begin.line);
    }
    // A value of the wrong type kept its default (or became ""): no further word on it.
    for (auto& x : detail::find_issues(cfg)) {
      if (mistyped_.count(x.key) == 0)
        problems_.push_back({line_of(x.key), x.key + ": " + x.message});
    }
  }

  /// Everything found wrong, in any order.
  std::vector<problem>& problems() { return problems_; }

  // -- the schema's section visitor --------------------------------------------------------------

  template <class S>
  void section(std::string_view name, S& x) {
    known_top_.insert(name);
    const auto* node = root_.get(name);
    if (node == nullptr) return;
    std::string key{name};
    lines_[key] = node->source().begin.line;
    if (const auto* tbl = node->as_table())
      read_table(*tbl, key, x);
    else
      wrong_type(key, *node, "a table");
  }

  void executor_list(bool& automatic, std::vector<executor>& xs) {
    known_top_.insert(detail::executors_key);
    const auto* node = root_.get(detail::executors_key);
    if (node == nullptr) return;
    std::string key{detail::executors_key};
    lines_[key] = node->source().begin.line;
    if (const auto* str = node->as_string(); str != nullptr && str->get() == "auto") {
      automatic = true;
      xs.clear();
      return;
    }
    const auto* arr = node->as_array();
    if (arr == nullptr) {
      std::string got = node->is_string() ? "'" + node->as_string()->get() + "'"
                                          : std::string{type_name(node->type())};
      add(*node, key + ": must be \"auto\" or [[executors]] tables, got " + got);
      return;
    }
    automatic = false;
    xs.clear();
    for (size_t i = 0; i < arr->size(); ++i) {
      const auto& element = *arr->get(i);
      auto element_key = detail::executor_key(i);
      lines_[element_key] = element.source().begin.line;
      executor x;
      if (const auto* tbl = element.as_table())
        read_table(*tbl, element_key, x);
      else
        wrong_type(element_key, element, "a table");
      xs.push_back(std::move(x));
    }
  }

  // -- one table ----------------------------------------------------------------------------------

  /// The schema's field visitor for one table.
  struct table_reader {
    reader& self;
    const toml::table& tbl;
    const std::string& prefix;
    std::set<std::string_view> known;

    template <class T>
    void operator()(std::string_view key, T& value, const detail::rule&) {
      known.insert(key);
      if (const auto* node = tbl.get(key)) self.read(prefix + "." + std::string{key}, *node, value);
    }
  };

  template <class S>
  void read_table(const toml::table& tbl, const std::string& prefix, S& x) {
    table_reader fields_reader{*this, tbl, prefix, {}};
    detail::fields(fields_reader, x);
    for (auto&& [key, node] : tbl) {
      if (fields_reader.known.count(key.str()) == 0)
        unknown(prefix + "." + std::string{key.str()}, key.source().begin.line);
    }
  }

  // -- one value ----------------------------------------------------------------------------------

  void read(const std::string& key, const toml::node& node, std::string& out) {
    lines_[key] = node.source().begin.line;
    if (const auto* x = node.as_string())
      out = x->get();
    else
      wrong_type(key, node, "a string");
  }

  void read(const std::string& key, const toml::node& node, int64_t& out) {
    lines_[key] = node.source().begin.line;
    if (const auto* x = node.as_integer())
      out = x->get();
    else
      wrong_type(key, node, "an integer");
  }

  void read(const std::string& key, const toml::node& node, double& out) {
    lines_[key] = node.source().begin.line;
    if (const auto* x = node.as_floating_point())
      out = x->get();
    else if (const auto* y = node.as_integer())
      out = static_cast<double>(y->get());
    else
      wrong_type(key, node, "a number");
  }

  void read(const std::string& key, const toml::node& node, bool& out) {
    lines_[key] = node.source().begin.line;
    if (const auto* x = node.as_boolean())
      out = x->get();
    else
      wrong_type(key, node, "a boolean");
  }

  void read(const std::string& key, const toml::node& node, std::vector<std::string>& out) {
    lines_[key] = node.source().begin.line;
    const auto* arr = node.as_array();
    if (arr == nullptr) {
      wrong_type(key, node, "an array of strings");
      return;
    }
    out.clear();
    for (size_t i = 0; i < arr->size(); ++i) {
      auto element_key = key + "[" + std::to_string(i) + "]";
      std::string x;
      read(element_key, *arr->get(i), x);
      out.push_back(std::move(x));
    }
  }

 private:
  void add(const toml::node& node, std::string text) {
    problems_.push_back({node.source().begin.line, std::move(text)});
  }

  void wrong_type(const std::string& key, const toml::node& node, const char* expected) {
    mistyped_.insert(key);
    add(node, key + ": expected " + std::string{expected} + ", got " + type_name(node.type()));
  }

  void unknown(const std::string& key, toml::source_index line) {
    auto text = detail::unknown_key_message(key);
    // `executors = "auto"` below a [table] header lands in that table.
    auto hint = detail::suggest(key);
    if (key.find('.') != std::string::npos && !hint.empty() && hint.find('.') == std::string::npos)
      text += " (a top-level key must come before the first [table])";
    problems_.push_back({line, std::move(text)});
  }

  /// The line of `key`, or of the closest enclosing key in the file, or 0.
  toml::source_index line_of(std::string key) const {
    for (;;) {
      if (auto i = lines_.find(key); i != lines_.end()) return i->second;
      auto cut = key.find_last_of(".[");
      if (cut == std::string::npos || cut == 0) return 0;
      key.resize(cut);
    }
  }

  const toml::table& root_;
  std::set<std::string_view> known_top_;
  std::map<std::string, toml::source_index> lines_;
  std::set<std::string> mistyped_;
  std::vector<problem> problems_;
};

}  // namespace

expected<pipeline> load_string(std::string_view toml, std::string_view source_name) {
  const std::string source{source_name};
  toml::table root;
  try {
    root = toml::parse(toml, source);
  } catch (const toml::parse_error& err) {
    const auto& where = err.source().begin;
    return make_error(ec::bad_config, source + ":" + std::to_string(where.line) + ":" +
                                          std::to_string(where.column) +
                                          ": syntax error: " + std::string{err.description()});
  }
  pipeline cfg;
  reader walk{root, cfg};
  auto& problems = walk.problems();
  if (problems.empty()) return cfg;
  // Lines in file order; problems of keys the file does not hold come last.
  std::stable_sort(problems.begin(), problems.end(), [](const problem& x, const problem& y) {
    return (x.line == 0 ? toml::source_index(-1) : x.line) <
           (y.line == 0 ? toml::source_index(-1) : y.line);
  });
  std::string msg;
  for (const auto& x : problems) {
    if (!msg.empty()) msg += '\n';
    msg += source;
    if (x.line > 0) msg += ":" + std::to_string(x.line);
    msg += ": " + x.text;
  }
  return make_error(ec::bad_config, std::move(msg));
}

expected<pipeline> load_file(const std::string& path) {
  std::error_code err;
  if (!std::filesystem::exists(path, err)) return make_error(ec::bad_file, path + ": no such file");
  if (!std::filesystem::is_regular_file(path, err))
    return make_error(ec::bad_file, path + ": not a regular file");
  std::ifstream in{path, std::ios::binary};
  if (!in) return make_error(ec::bad_file, path + ": cannot open the file");
  std::string text{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  if (in.bad()) return make_error(ec::bad_file, path + ": cannot read the file");
  return load_string(text, path);
}

}  // namespace conveyor::config
