#include "bench/in_process.hpp"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/spawn.hpp"
#include "bench/process_cpu.hpp"

namespace conveyor::bench {

namespace {

/// The records of one run; sinks write into it from actor threads.
struct run_book {
  explicit run_book(std::size_t n, run_progress& p) : records(n), progress(p) {}

  std::mutex mutex;
  std::condition_variable all_ended;
  std::vector<request_record> records;
  stamp last_end = 0;
  run_progress& progress;

  void end(std::size_t index, request_record record, stamp at) {
    {
      std::lock_guard<std::mutex> guard{mutex};
      records[index] = std::move(record);
      last_end = std::max(last_end, at);
      ++progress.ended;
    }
    all_ended.notify_all();
  }
};

struct collector_state {
  static inline const char* name = "bench_collector";
  request_record record;
};

/// The sink of one benchmark request: stamps each chunk that carries tokens and the end,
/// relative to the scheduled arrival, and hands the record to the book.
sink_actor::behavior_type collector(sink_actor::stateful_pointer<collector_state> self,
                                    std::shared_ptr<run_book> book, std::size_t index,
                                    stamp scheduled, bool constrained) {
  self->state.record.constrained = constrained;
  return {
      [=](token_chunk& chunk) {
        if (!chunk.tokens.empty())
          self->state.record.chunk_times.push_back(seconds_between(scheduled, now_stamp()));
      },
      [=](request_result& result) {
        const stamp now = now_stamp();
        auto& r = self->state.record;
        r.end = seconds_between(scheduled, now);
        r.output_tokens = result.completion_tokens;
        r.prompt_tokens = result.prompt_tokens;
        r.cached_tokens = result.cached_tokens;
        switch (result.how) {
          case outcome::finished:
            r.status = request_status::completed;
            break;
          case outcome::rejected:
            r.status = request_status::rejected;
            r.message = result.message;
            break;
          default:
            r.status = request_status::failed;
            r.message = result.message;
        }
        book->end(index, std::move(r), now);
        self->quit();
      },
  };
}

/// Reads batch size, padding fraction and busy ratio from the pipeline's JSON snapshot, once the
/// metrics have heard of all `requests` (an executor sends a request's result to its sink before
/// the timings of its steps to the metrics; up to 10 s).
void add_pipeline_metrics(caf::actor_system& system, const pipeline_handle& pipeline,
                          std::size_t requests, run_summary& summary) {
  caf::scoped_actor self{system};
  nlohmann::json j;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    std::string text;
    self->request(pipeline.front, std::chrono::seconds(10), atom::snapshot::value)
        .receive([&](std::string& s) { text = std::move(s); }, [&](caf::error&) {});
    j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return;
    const auto total = j["requests"]["total"];
    if ((total.is_number() && total.get<double>() >= double(requests)) ||
        std::chrono::steady_clock::now() > give_up)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  auto mean_of = [&](const char* name) {
    auto h = j["histograms"][name];
    if (h.is_object() && h["mean"].is_number()) return h["mean"].get<double>();
    return std::numeric_limits<double>::quiet_NaN();
  };
  summary.batch_size_mean = mean_of("batch_size");
  // Only steps with padding record a fraction: none recorded means no padding at all.
  summary.padding_fraction = mean_of("padding_fraction");
  if (std::isnan(summary.padding_fraction) && !std::isnan(summary.batch_size_mean))
    summary.padding_fraction = 0;
  auto busy = j["gauges"]["executor_busy_ratio"];
  if (busy.is_object() && !busy.empty()) {
    double sum = 0;
    for (const auto& item : busy.items()) sum += item.value().get<double>();
    summary.executor_busy_ratio = sum / double(busy.size());
  }
}

}  // namespace

expected<run_summary> run_in_process(caf::actor_system& system, config::pipeline cfg,
                                     const std::string& policy, const workload& requests,
                                     double rate, run_progress& progress,
                                     const sampling_fields& sampling,
                                     const output_formats& formats) {
  cfg.batcher.policy = policy;
  cfg.metrics.interval_s = 0;
  auto pipeline = spawn_pipeline(system, cfg);
  if (!pipeline) return pipeline.error();
  const bool synthetic = cfg.model.path.rfind("synthetic:", 0) == 0;
  auto book = std::make_shared<run_book>(requests.size(), progress);
  const double cpu0 = process_cpu_seconds();
  const stamp t0 = now_stamp();
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto& w = requests[i];
    const stamp scheduled = t0 + stamp(std::llround(w.arrival_s * 1e9));
    std::this_thread::sleep_until(to_time_point(scheduled));
    generate_request g;
    g.prompt = w.prompt;
    g.params.max_tokens = w.max_tokens;
    g.params.temperature = float(sampling.temperature.value_or(cfg.generation.temperature));
    g.params.top_p = float(sampling.top_p.value_or(cfg.generation.top_p));
    g.params.top_k = int32_t(sampling.top_k.value_or(cfg.generation.top_k));
    g.params.seed = uint64_t(i) + 1;
    // Random weights never choose to end: they must generate exactly max_tokens.
    g.params.ignore_eos = synthetic || sampling.ignore_eos;
    const bool formatted = constrained(formats, i);
    if (formatted) g.params.constraint = bench_constraint();
    g.arrival = scheduled;
    auto sink = system.spawn(collector, book, i, scheduled, formatted);
    caf::anon_send(pipeline->front, atom::generate::value, std::move(g), sink);
    ++progress.sent;
  }
  {
    std::unique_lock<std::mutex> guard{book->mutex};
    book->all_ended.wait(guard, [&] { return progress.ended >= requests.size(); });
  }
  auto summary = summarize(policy, rate, book->records, seconds_between(t0, book->last_end));
  summary.process_cpu_s = process_cpu_seconds() - cpu0;
  add_pipeline_metrics(system, *pipeline, requests.size(), summary);
  stop_pipeline(*pipeline);
  return summary;
}

}  // namespace conveyor::bench
