// The pipeline's own cost: requests per second through tokenizer, batcher, executor and sink
// with the trivial model (fixed logits, no arithmetic).
#include <atomic>
#include <chrono>

#include <benchmark/benchmark.h>
#include <caf/all.hpp>

#include "actors/spawn.hpp"

using namespace conveyor;

namespace {

/// Counts results; tells `done` when `expected` have arrived.
sink_actor::behavior_type counter(sink_actor::pointer self,
                                  std::shared_ptr<std::atomic<int64_t>> left, caf::actor done) {
  return {
      [](token_chunk&) {},
      [=](request_result&) {
        if (--*left == 0) caf::anon_send(done, atom::done::value);
      },
  };
  (void)self;
}

void bm_pipeline(benchmark::State& state) {
  const int32_t tokens = int32_t(state.range(0));
  const int64_t requests = state.range(1);
  caf::actor_system_config cfg;
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system sys{cfg};
  config::pipeline settings;
  settings.model.path = "trivial";
  settings.auto_executors = false;
  config::executor e;
  e.slots = 256;
  e.threads = 1;
  settings.executors.push_back(e);
  settings.batcher.max_num_seqs = 256;
  settings.batcher.max_queued_requests = requests;
  settings.metrics.interval_s = 0;
  auto pipeline = spawn_pipeline(sys, settings);
  if (!pipeline) {
    state.SkipWithError(message_of(pipeline.error()).c_str());
    return;
  }
  for (auto _ : state) {
    caf::scoped_actor self{sys};
    auto left = std::make_shared<std::atomic<int64_t>>(requests);
    auto sink = sys.spawn(counter, left, caf::actor{self});
    for (int64_t i = 0; i < requests; ++i) {
      generate_request r;
      r.prompt = "Once upon a time";
      r.params.max_tokens = tokens;
      r.params.temperature = 0;
      caf::anon_send(pipeline->front, atom::generate::value, std::move(r), sink);
    }
    self->receive([](atom::done) {});
    caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  }
  state.counters["requests/s"] =
      benchmark::Counter(double(requests), benchmark::Counter::kIsIterationInvariantRate);
  stop_pipeline(*pipeline);
}

}  // namespace

BENCHMARK(bm_pipeline)
    ->ArgNames({"tokens", "requests"})
    ->Args({1, 20000})
    ->Args({16, 20000})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

BENCHMARK_MAIN();
