// conveyor: the command-line entry point (serve, generate, bench, worker, config).
#include <cstdio>
#include <map>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "apps/conveyor/commands.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>

#include "actors/caf_error.hpp"
#include "kernels/blas_kernels.hpp"
#include "pipeline/message_types.hpp"

namespace conveyor::app {

void setup_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("conveyor");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");
}

sigset_t block_stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

void configure_local_actor_system(caf::actor_system_config& cfg) {
  add_error_category(cfg);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  // An idle scheduler thread of CAF's work-stealing policy polls its queue, then sleeps 50 us at a
  // time for up to 500 attempts before it waits on a condition variable. With a message every
  // decode step (about a millisecond) it never reached the wait: each idle thread woke tens of
  // thousands of times a second, on the cores the model's loops run on. Without the moderate
  // phase an idle thread spins briefly, then waits to be notified (docs/benchmarks.md).
  cfg.set("work-stealing.moderate-poll-attempts", size_t{0});
}

void configure_actor_system(caf::actor_system_config& cfg) {
  configure_local_actor_system(cfg);
  add_message_types(cfg);
  cfg.load<caf::io::middleman>();
}

}  // namespace conveyor::app

int main(int argc, char** argv) {
  using namespace conveyor::app;
  conveyor::kernels::restart_with_fitting_blas(argv);
  CLI::App app{"Conveyor: low-latency serving of causal language models (CAF actors + libtorch)"};
  app.require_subcommand(1);
  std::map<CLI::App*, command_fn> commands;
  auto add = [&](command_fn (*adder)(CLI::App&)) {
    auto before = app.get_subcommands({});
    auto fn = adder(app);
    auto after = app.get_subcommands({});
    commands[after.back()] = std::move(fn);
  };
  add(add_generate);
  add(add_serve);
  add(add_bench);
  add(add_config);
  add(add_worker);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto* sub : app.get_subcommands())
    if (auto it = commands.find(sub); it != commands.end()) return it->second();
  return 1;
}
