#include "apps/conveyor/config_flags.hpp"

#include <CLI/CLI.hpp>

#include "config/schema.hpp"
#include "gpu/devices.hpp"

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

void config_flags::add_threads_to(CLI::App& cmd) {
  add_threads_option(cmd, threads,
                     "Compute threads of each executor, overriding executors[].threads "
                     "(default: the configuration's; 0: every core, one for a model too small to share a "
                     "step)");
}

CLI::Option* add_threads_option(CLI::App& cmd, int64_t& threads, const std::string& help) {
  return cmd.add_option("--threads", threads, help)
      ->check(CLI::Range(int64_t{0}, config::detail::max_threads));
}

void apply_threads(config::pipeline& cfg, int64_t threads) {
  if (cfg.auto_executors) {
    cfg.executors = config::resolve_executors(cfg, gpu::system_devices().devices().size());
    cfg.auto_executors = false;
  }
  for (auto& e : cfg.executors) e.threads = threads;
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
  if (threads >= 0) apply_threads(cfg, threads);
  if (auto err = config::validate(cfg)) return err;
  return cfg;
}

}  // namespace conveyor::app
