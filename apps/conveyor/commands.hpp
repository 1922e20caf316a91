// The sub-commands of the conveyor program; each registers its flags and runs.
#pragma once

#include <functional>
#include <string>

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

}  // namespace conveyor::app
