#include "apps/conveyor/config_flags.hpp"

#include <CLI/CLI.hpp>

namespace conveyor::app {

void config_flags::add_to(CLI::App& cmd, bool server) {
  cmd.add_option("--config,-c", file, "A TOML configuration file (see config/conveyor.toml)");
  cmd.add_option("--set", sets, "Override any key: --set batcher.policy=seed (repeatable)");
  cmd.add_option("--model,-m", model, "Sets model.path: a llama2.c checkpoint or synthetic:NAME");
  cmd.add_option("--tokenizer", tokenizer, "Sets model.tokenizer");
  cmd.add_option("--policy", policy, "Sets batcher.policy: sequential, seed or continuous");
  cmd.add_option("--log-level", log_level, "Sets log.level");
  if (server) {
    cmd.add_option("--host", host, "Sets server.host (default 127.0.0.1)");
    cmd.add_option("--port", port, "Sets server.port (default 8080)");
  }
}

expected<config::pipeline> config_flags::load() const {
  config::pipeline cfg;
  if (!file.empty()) {
    auto loaded = config::load_file(file);
    if (!loaded) return loaded.error();
    cfg = std::move(*loaded);
  }
  std::vector<std::pair<std::string, std::string>> all;
  auto flag = [&](const char* key, const std::string& value) {
    if (!value.empty()) all.emplace_back(key, value);
  };
  flag("model.path", model);
  flag("model.tokenizer", tokenizer);
  flag("batcher.policy", policy);
  flag("log.level", log_level);
  flag("server.host", host);
  flag("server.port", port);
  for (const auto& s : sets) {
    auto eq = s.find('=');
    if (eq == std::string::npos)
      return make_error(ec::bad_config, "command line: --set " + s + ": expected KEY=VALUE");
    all.emplace_back(s.substr(0, eq), s.substr(eq + 1));
  }
  for (const auto& [key, value] : all)
    if (auto err = config::apply_override(cfg, key, value)) return err;
  if (auto err = config::validate(cfg)) return err;
  return cfg;
}

}  // namespace conveyor::app
