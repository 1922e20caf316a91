// The metrics as Prometheus text, through the one writer of that format (common/prometheus.hpp).
#include "pipeline/metrics_prometheus.hpp"

#include "common/prometheus.hpp"

namespace conveyor::pipeline {

namespace {

using namespace conveyor::prometheus;

void write_histogram(std::string& out, std::string_view name, std::string_view help,
                     const histogram& h) {
  write_header(out, name, help, "histogram");
  write_histogram_series(out, name, h.upper_bounds(), h.cumulative_counts(), h.sum(), h.count());
}

// One gauge of the executors' block gauges: a sample per executor with a block pool.
void write_kv_blocks(std::string& out, const metrics_registry& m,
                     const std::vector<std::string>& executors, std::string_view name,
                     std::string_view help, uint64_t kv_block_gauges::*gauge) {
  write_header(out, name, help, "gauge");
  for (const auto& executor : executors)
    if (auto kv = m.kv_blocks(executor))
      write_sample(out, name, label("executor", executor), (*kv).*gauge);
}

}  // namespace

std::string prometheus_text(const metrics_registry& m) {
  std::string out;
  out.reserve(16 * 1024);
  // Counters.
  write_header(out, "conveyor_requests_total", "Requests that ended, by outcome.", "counter");
  for (auto x : all_outcomes)
    write_sample(out, "conveyor_requests_total", label("outcome", to_string(x)), m.requests(x));
  write_header(out, "conveyor_finished_requests_total",
               "Finished requests, by the reason they stopped.", "counter");
  for (auto x : all_finish_reasons)
    write_sample(out, "conveyor_finished_requests_total", label("reason", to_string(x)),
                 m.finished(x));
  write_counter(out, "conveyor_prompt_tokens_total", "Prompt tokens of admitted requests.",
                m.prompt_tokens_total());
  write_counter(out, "conveyor_generation_tokens_total", "Output tokens generated.",
                m.generation_tokens_total());
  write_counter(out, "conveyor_prefix_cache_queries_total",
                "Prompt tokens looked up in an executor's prefix cache.",
                m.prefix_cache_queries_total());
  write_counter(out, "conveyor_prefix_cache_hits_total",
                "Prompt tokens found in an executor's prefix cache, read from cached KV blocks "
                "instead of computed.",
                m.prefix_cache_hits_total());
  // Request histograms.
  write_histogram(out, "conveyor_queue_time_seconds",
                  "Seconds a request waited in the queue before admission.", m.queue_time());
  write_histogram(out, "conveyor_time_to_first_token_seconds",
                  "Seconds from a request's arrival to its first output token.",
                  m.time_to_first_token());
  write_histogram(out, "conveyor_inter_token_latency_seconds",
                  "Seconds between consecutive output tokens of a request.",
                  m.inter_token_latency());
  write_histogram(out, "conveyor_time_per_output_token_seconds",
                  "Seconds per output token after the first, per finished request.",
                  m.time_per_output_token());
  write_histogram(out, "conveyor_e2e_latency_seconds",
                  "Seconds from a request's arrival to its end, per finished request.",
                  m.e2e_latency());
  write_histogram(out, "conveyor_request_prompt_tokens", "Prompt tokens per finished request.",
                  m.request_prompt_tokens());
  write_histogram(out, "conveyor_request_output_tokens", "Output tokens per finished request.",
                  m.request_output_tokens());
  // Step histograms.
  write_histogram(out, "conveyor_batch_size", "Sequences per executor step.", m.batch_size());
  write_histogram(out, "conveyor_padding_fraction",
                  "Fraction of padding among the tokens of an executor step.",
                  m.padding_fraction());
  write_header(out, "conveyor_step_time_seconds", "Seconds per executor step, by kind.",
               "histogram");
  for (auto x : all_step_kinds) {
    const auto& h = m.step_time(x);
    write_histogram_series(out, "conveyor_step_time_seconds", h.upper_bounds(),
                           h.cumulative_counts(), h.sum(), h.count(), "kind", to_string(x));
  }
  // Executors.
  const auto executors = m.executors();
  write_header(out, "conveyor_executor_busy_seconds_total",
               "Seconds an executor spent running steps.", "counter");
  for (const auto& name : executors)
    write_sample(out, "conveyor_executor_busy_seconds_total", label("executor", name),
                 m.busy_seconds(name));
  write_header(out, "conveyor_executor_busy_ratio",
               "Busy seconds of an executor over the seconds since it started.", "gauge");
  for (const auto& name : executors)
    write_sample(out, "conveyor_executor_busy_ratio", label("executor", name), m.busy_ratio(name));
  write_header(out, "conveyor_executor_steps_total", "Steps an executor ran.", "counter");
  for (const auto& name : executors)
    write_sample(out, "conveyor_executor_steps_total", label("executor", name),
                 m.executor_steps(name));
  write_header(out, "conveyor_executor_info", "The device each executor runs on (always 1).",
               "gauge");
  for (const auto& name : executors) {
    const auto device = m.executor_device(name);
    if (!device.empty())
      write_sample(out, "conveyor_executor_info", labels({{"executor", name}, {"device", device}}),
                   1.0);
  }
  // Settable gauges.
  write_header(out, "conveyor_queue_depth", "Requests waiting in the batcher's queue.", "gauge");
  write_sample(out, "conveyor_queue_depth", {}, uint64_t{m.queue_depth()});
  write_header(out, "conveyor_running_sequences", "Sequences running on an executor.", "gauge");
  for (const auto& name : executors)
    write_sample(out, "conveyor_running_sequences", label("executor", name),
                 uint64_t{m.running_sequences(name)});
  // KV-cache blocks after each executor's latest step; executors without a block pool have none.
  write_kv_blocks(out, m, executors, "conveyor_kv_blocks_used",
                  "KV-cache blocks referenced by an executor's running sequences.",
                  &kv_block_gauges::used);
  write_kv_blocks(out, m, executors, "conveyor_kv_blocks_cached",
                  "KV-cache blocks of an executor holding a cached prefix, referenced or not.",
                  &kv_block_gauges::cached);
  write_kv_blocks(out, m, executors, "conveyor_kv_blocks_free",
                  "KV-cache blocks an executor can allocate: free or evictable.",
                  &kv_block_gauges::free);
  return out;
}

}  // namespace conveyor::pipeline
