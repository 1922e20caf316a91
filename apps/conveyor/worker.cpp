// conveyor worker: loads the model, spawns its executor(s) and publishes them with CAF's
// middleman, so that a server listing this worker in `cluster.remote` lets them pull its work.
#include <pthread.h>
#include <unistd.h>
#include <csignal>
#include <cstdio>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include "actors/metrics_actor.hpp"
#include "actors/remote_connector.hpp"
#include "actors/spawn.hpp"
#include "actors/worker_actor.hpp"
#include "apps/conveyor/commands.hpp"
#include "apps/conveyor/config_flags.hpp"
#include "common/host_port.hpp"
#include "model/causal_lm.hpp"
#include "pipeline/message_types.hpp"

namespace conveyor::app {

namespace {

struct worker_flags {
  config_flags config;
  std::string listen = "127.0.0.1:7000";
};

int run_worker(const worker_flags& flags) {
  auto cfg = flags.config.load();
  if (!cfg) {
    std::fprintf(stderr, "conveyor worker: %s\n", message_of(cfg.error()).c_str());
    return 1;
  }
  setup_logging(cfg->log.level);
  // Port 0: any free port.
  const auto listen = parse_host_port(flags.listen, /*min_port=*/0);
  if (!listen) {
    std::fprintf(stderr, "conveyor worker: --listen %s: expected HOST:PORT\n",
                 flags.listen.c_str());
    return 1;
  }
  const std::string host = listen->host;
  const uint16_t port = listen->port;
  if (cfg->executors.empty() && !cfg->auto_executors) {
    std::fprintf(stderr, "conveyor worker: the configuration lists no executor to publish\n");
    return 1;
  }
  sigset_t signals = block_stop_signals();
  caf::actor_system_config sys_cfg;
  // Workers (cluster.remote) talk to the batcher and the sinks through CAF's middleman.
  configure_actor_system(sys_cfg);
  caf::actor_system system{sys_cfg};
  // Timings stay here: the worker's own metrics actor logs its summary (timing events hold time
  // points of this machine and are not sent to the server).
  auto metrics = spawn_metrics(system, cfg->metrics.enabled ? double(cfg->metrics.interval_s) : 0);
  // Executor names say where they run: "host:port/cpu:0" ("host/pid N/cpu:0" for port 0).
  const std::string prefix =
      port != 0 ? flags.listen + "/" : host + "/pid " + std::to_string(::getpid()) + "/";
  auto group = spawn_executors(system, *cfg, metrics, prefix);
  if (!group) {
    std::fprintf(stderr, "conveyor worker: %s\n", message_of(group.error()).c_str());
    caf::anon_send_exit(metrics, caf::exit_reason::user_shutdown);
    return 1;
  }
  auto published = spawn_worker_front(system, group->executors);
  auto bound = system.middleman().publish(published, port, host.c_str(), true);
  if (!bound) {
    std::fprintf(stderr, "conveyor worker: cannot listen on %s: %s\n", flags.listen.c_str(),
                 system.render(bound.error()).c_str());
    for (const auto& e : group->executors) caf::anon_send_exit(e, caf::exit_reason::kill);
    caf::anon_send_exit(published, caf::exit_reason::kill);
    caf::anon_send_exit(metrics, caf::exit_reason::kill);
    return 1;
  }
  spdlog::info("worker ready: {} executor(s) of model {} at {}:{}; {}", group->executors.size(),
               group->model_name, host, *bound, model::compute_backend_description());
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("received {}: stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
  system.middleman().unpublish(published, *bound);
  for (const auto& e : group->executors)
    caf::anon_send(e, atom::drain::value, std::string{"the worker is shutting down"});
  for (const auto& e : group->executors) caf::anon_send_exit(e, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(published, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(metrics, caf::exit_reason::user_shutdown);
  spdlog::info("stopped");
  return 0;
}

}  // namespace

command_fn add_worker(CLI::App& app) {
  auto flags = std::make_shared<worker_flags>();
  auto* cmd = app.add_subcommand(
      "worker",
      "Run executors for a remote server: publish them at --listen; a server that lists this "
      "address in cluster.remote connects and they pull its work");
  cmd->add_option("--listen,-l", flags->listen, "HOST:PORT to listen on (port 0: any free port)")
      ->required();
  flags->config.add_to(*cmd, false);
  return [flags] { return run_worker(*flags); };
}

}  // namespace conveyor::app
