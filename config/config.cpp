// Comparison, validation and the values derived from a configuration.
#include "config/config.hpp"

#include <filesystem>
#include <utility>
#include <variant>

#include "config/schema.hpp"

namespace conveyor::config {

namespace {

/// One value of any key type.
using any_value = std::variant<std::string, int64_t, double, bool, std::vector<std::string>>;

/// Lists every value of a pipeline with its dotted key, so two pipelines compare key by key.
struct flattener {
  std::vector<std::pair<std::string, any_value>> out;
  std::string prefix;

  template <class T>
  void operator()(std::string_view key, const T& value, const detail::rule&) {
    out.emplace_back(prefix + "." + std::string{key}, value);
  }

  template <class S>
  void section(std::string_view name, const S& x) {
    prefix = std::string{name};
    detail::fields(*this, x);
  }

  void executor_list(bool automatic, const std::vector<executor>& xs) {
    out.emplace_back(std::string{detail::executors_key}, automatic);
    for (size_t i = 0; i < xs.size(); ++i) {
      prefix = detail::executor_key(i);
      detail::fields(*this, xs[i]);
    }
  }
};

std::vector<std::pair<std::string, any_value>> flatten(const pipeline& cfg) {
  flattener f;
  detail::sections(f, cfg);
  return std::move(f.out);
}

}  // namespace

bool operator==(const pipeline& x, const pipeline& y) {
  return flatten(x) == flatten(y);
}

error validate(const pipeline& cfg) {
  auto issues = detail::find_issues(cfg);
  if (issues.empty()) return {};
  std::string msg;
  for (const auto& x : issues) {
    if (!msg.empty()) msg += '\n';
    msg += x.key + ": " + x.message;
  }
  return make_error(ec::bad_config, std::move(msg));
}

std::string served_name(const config::model& cfg) {
  if (!cfg.name.empty()) return cfg.name;
  constexpr std::string_view synthetic = "synthetic:";
  std::string_view path = cfg.path;
  if (path.substr(0, synthetic.size()) == synthetic)
    return std::string{path.substr(synthetic.size())};
  // A model directory: its folder name ("TinyLlama-1.1B", trailing slashes ignored); a file: its
  // stem ("stories260K").
  std::filesystem::path p{cfg.path};
  while (!p.empty() && p.filename().empty()) p = p.parent_path();
  std::error_code error;
  if (path.back() == '/' || std::filesystem::is_directory(p, error)) return p.filename().string();
  return p.stem().string();
}

std::string tokenizer_path(const config::model& cfg) {
  return cfg.tokenizer.empty() ? std::string{default_tokenizer_path} : cfg.tokenizer;
}

std::vector<executor> resolve_executors(const pipeline& cfg, size_t visible_gpus) {
  if (!cfg.auto_executors) return cfg.executors;
  if (visible_gpus == 0) return {executor{}};
  std::vector<executor> result(visible_gpus);
  for (size_t i = 0; i < visible_gpus; ++i) result[i].device = "cuda:" + std::to_string(i);
  return result;
}

}  // namespace conveyor::config
