// The flags every pipeline command shares: --config FILE and the keys that flags override.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "config/config.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace conveyor::app {

/// --config FILE, --set KEY=VALUE (repeatable) and short flags for common keys.
struct config_flags {
  std::string file;
  std::vector<std::string> sets;
  std::vector<std::pair<std::string, std::string>> overrides;
  std::string host, port, policy, model, tokenizer, log_level;
  /// --threads: compute threads of each executor; -1 when not given.
  int64_t threads = -1;

  /// Adds the flags to a sub-command; `server` adds --host and --port.
  void add_to(CLI::App& cmd, bool server);

  /// Adds --threads N (see `add_threads_option`), which sets every executor's `threads`.
  void add_threads_to(CLI::App& cmd);

  /// The file (or the defaults), with the flags applied and validated.
  expected<config::pipeline> load() const;
};

/// --threads N for generate, bench and serve, one meaning and one check: compute threads (torch
/// intra-op and OpenBLAS, `model::set_compute_threads`), 0 to leave them to the machine
/// (`model::auto_compute_threads`: every core, or one for a model too small to share), at most
/// config's `max_threads` (1024, as `executors[].threads`).
CLI::Option* add_threads_option(CLI::App& cmd, int64_t& threads, const std::string& help);

/// Sets `threads` on every local executor, overriding `executors[].threads` from the file or
/// --set. With `executors = "auto"` the executors are first listed as auto would make them (one
/// per visible GPU, else one CPU executor).
void apply_threads(config::pipeline& cfg, int64_t threads);

}  // namespace conveyor::app
