// The flags every pipeline command shares: --config FILE and the keys that flags override.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "config/config.hpp"

namespace CLI {
class App;
}

namespace conveyor::app {

/// --config FILE, --set KEY=VALUE (repeatable) and short flags for common keys.
struct config_flags {
  std::string file;
  std::vector<std::string> sets;
  std::vector<std::pair<std::string, std::string>> overrides;
  std::string host, port, policy, model, tokenizer, log_level;

  /// Adds the flags to a sub-command; `server` adds --host and --port.
  void add_to(CLI::App& cmd, bool server);

  /// The file (or the defaults), with the flags applied and validated.
  expected<config::pipeline> load() const;
};

}  // namespace conveyor::app
