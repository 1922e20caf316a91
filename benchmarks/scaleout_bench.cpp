// Scale-out throughput on the real stories260K model: one executor, two executors in one
// process, and one local plus one remote executor (a worker in a second actor system of this
// process, reached through CAF's middleman over 127.0.0.1, so every message is serialized).
// Run from the source tree: build/benchmarks/conveyor_scaleout_bench (see docs/scale-out.md).
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include <benchmark/benchmark.h>
#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include "actors/caf_error.hpp"
#include "actors/metrics_actor.hpp"
#include "actors/spawn.hpp"
#include "actors/worker_actor.hpp"
#include "pipeline/message_types.hpp"

using namespace conveyor;

namespace {

sink_actor::behavior_type counter(sink_actor::pointer, std::shared_ptr<std::atomic<int64_t>> left,
                                  std::shared_ptr<std::atomic<int64_t>> tokens, caf::actor done) {
  return {
      [](token_chunk&) {},
      [=](request_result& r) {
        *tokens += r.completion_tokens;
        if (--*left == 0) caf::anon_send(done, atom::done::value);
      },
  };
}

caf::actor_system_config& network_config(caf::actor_system_config& cfg) {
  add_error_category(cfg);
  add_message_types(cfg);
  cfg.load<caf::io::middleman>();
  cfg.set("logger.verbosity", caf::atom("quiet"));
  return cfg;
}

config::executor one_executor() {
  config::executor e;
  e.threads = 1;
  e.slots = 16;
  return e;
}

/// range(0): 0 = one local executor, 1 = two local executors, 2 = one local plus one remote.
void bm_scaleout(benchmark::State& state) {
  const int mode = int(state.range(0));
  const int64_t requests = 32;
  const int32_t max_tokens = 64;
  caf::actor_system_config worker_cfg;
  caf::actor_system worker_sys{network_config(worker_cfg)};
  std::optional<worker_actor> front;
  metrics_actor worker_metrics;
  std::vector<executor_actor> worker_execs;
  config::pipeline settings;
  settings.auto_executors = false;
  settings.metrics.interval_s = 0;
  settings.executors.push_back(one_executor());
  if (mode == 1) settings.executors.push_back(one_executor());
  if (mode == 2) {
    config::pipeline wcfg = settings;
    worker_metrics = spawn_metrics(worker_sys, 0);
    auto group = spawn_executors(worker_sys, wcfg, worker_metrics, "remote/");
    if (!group) {
      state.SkipWithError(message_of(group.error()).c_str());
      return;
    }
    worker_execs = group->executors;
    front = spawn_worker_front(worker_sys, worker_execs);
    auto port = worker_sys.middleman().publish(*front, 0, "127.0.0.1", true);
    if (!port) {
      state.SkipWithError("cannot publish the worker");
      return;
    }
    settings.cluster.remote.push_back("127.0.0.1:" + std::to_string(*port));
  }
  caf::actor_system_config cfg;
  caf::actor_system sys{network_config(cfg)};
  auto pipeline = spawn_pipeline(sys, settings);
  if (!pipeline) {
    state.SkipWithError(message_of(pipeline.error()).c_str());
    return;
  }
  // Wait until every executor pulls.
  {
    caf::scoped_actor self{sys};
    const uint64_t want = mode == 0 ? 1 : 2;
    for (int i = 0; i < 500; ++i) {
      uint64_t have = 0;
      self->request(pipeline->front, std::chrono::seconds(5), atom::status::value)
          .receive([&](const pipeline_status& s) { have = s.executors; }, [](caf::error&) {});
      if (have >= want) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  int64_t total_tokens = 0;
  for (auto _ : state) {
    caf::scoped_actor self{sys};
    auto left = std::make_shared<std::atomic<int64_t>>(requests);
    auto tokens = std::make_shared<std::atomic<int64_t>>(0);
    auto sink = sys.spawn(counter, left, tokens, caf::actor{self});
    for (int64_t i = 0; i < requests; ++i) {
      generate_request r;
      r.prompt = "Once upon a time";
      r.params.max_tokens = max_tokens;
      r.params.temperature = 0;
      r.params.ignore_eos = true;
      caf::anon_send(pipeline->front, atom::generate::value, std::move(r), sink);
    }
    self->receive([](atom::done) {});
    caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
    total_tokens += *tokens;
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(double(total_tokens), benchmark::Counter::kIsRate);
  state.counters["requests_per_s"] =
      benchmark::Counter(double(requests * state.iterations()), benchmark::Counter::kIsRate);
  stop_pipeline(*pipeline);
  for (const auto& e : worker_execs) caf::anon_send_exit(e, caf::exit_reason::user_shutdown);
  if (front) caf::anon_send_exit(*front, caf::exit_reason::user_shutdown);
  if (worker_metrics) caf::anon_send_exit(worker_metrics, caf::exit_reason::user_shutdown);
}

BENCHMARK(bm_scaleout)
    ->ArgName("mode")
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
