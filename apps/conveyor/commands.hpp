// The sub-commands of the conveyor program; each registers its flags and runs.
#pragma once

#include <csignal>
#include <functional>
#include <string>

#include <caf/fwd.hpp>

namespace CLI {
class App;
}

namespace conveyor::app {

/// A sub-command's entry point, called after parsing; returns the exit code.
using command_fn = std::function<int()>;

/// Each adds its sub-command to `app` and returns what runs it.
command_fn add_generate(CLI::App& app);
command_fn add_serve(CLI::App& app);
command_fn add_config(CLI::App& app);
command_fn add_bench(CLI::App& app);
command_fn add_worker(CLI::App& app);

/// Sends every log line to stderr at `level` ("info", "debug", ...).
void setup_logging(const std::string& level);

/// Blocks SIGINT and SIGTERM in this thread and every thread it starts later, so that only a
/// sigwait on the returned set sees them. Call before creating the actor system.
sigset_t block_stop_signals();

/// What every command's actor system needs: Conveyor's error category, a quiet CAF logger, and
/// scheduler threads that wait for work without waking every 50 us.
void configure_local_actor_system(caf::actor_system_config& cfg);

/// What every networked command's actor system needs: `configure_local_actor_system`, the
/// message types that cross the network, and the middleman.
void configure_actor_system(caf::actor_system_config& cfg);

}  // namespace conveyor::app
