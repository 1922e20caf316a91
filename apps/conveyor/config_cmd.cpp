// conveyor config --print: the effective configuration after the file and the flags.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "apps/conveyor/commands.hpp"
#include "apps/conveyor/config_flags.hpp"

namespace conveyor::app {

command_fn add_config(CLI::App& app) {
  auto flags = std::make_shared<config_flags>();
  auto print = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("config", "Check a configuration and print the effective one");
  flags->add_to(*cmd, true);
  cmd->add_flag("--print", *print, "Print the effective configuration as TOML");
  return [flags, print] {
    auto cfg = flags->load();
    if (!cfg) {
      std::fprintf(stderr, "conveyor config: %s\n", message_of(cfg.error()).c_str());
      return 1;
    }
    if (*print)
      std::fputs(config::to_toml(*cfg).c_str(), stdout);
    else
      std::fputs("configuration is valid\n", stdout);
    return 0;
  };
}

}  // namespace conveyor::app
