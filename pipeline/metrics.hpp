// Metrics aggregation: turns timing events into histograms, counters and gauges. The renderers
// are beside it, one per format: metrics_prometheus.hpp, metrics_json.hpp, metrics_log.hpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/histogram.hpp"
#include "pipeline/timing.hpp"

namespace conveyor::pipeline {

// -- summary -------------------------------------------------------------------------------------

/// The main numbers of a registry, for a one-line log or a benchmark table. Times in seconds;
/// NaN where there were no observations.
struct summary {
  /// Requests that ended as `outcome::finished`.
  uint64_t finished = 0;
  /// Requests that ended as `outcome::cancelled`.
  uint64_t cancelled = 0;
  /// Requests that ended as `outcome::expired`.
  uint64_t expired = 0;
  /// Requests that ended as `outcome::rejected`.
  uint64_t rejected = 0;
  /// Requests that ended as `outcome::failed`.
  uint64_t failed = 0;
  /// Prompt tokens of admitted requests.
  uint64_t prompt_tokens = 0;
  /// Output tokens of all requests.
  uint64_t generation_tokens = 0;
  /// Median queue time.
  double queue_time_p50 = 0;
  /// 99th percentile of queue time.
  double queue_time_p99 = 0;
  /// Median time to first token.
  double ttft_p50 = 0;
  /// 99th percentile of time to first token.
  double ttft_p99 = 0;
  /// Mean inter-token latency.
  double itl_mean = 0;
  /// Median time per output token.
  double tpot_p50 = 0;
  /// Median end-to-end latency.
  double e2e_p50 = 0;
  /// 99th percentile of end-to-end latency.
  double e2e_p99 = 0;
  /// Mean sequences per step (all kinds).
  double batch_size_mean = 0;
  /// Mean padding fraction per step.
  double padding_fraction_mean = 0;
  /// Generated tokens per second (see `metrics_registry::tokens_per_second`).
  double tokens_per_second = 0;
  /// Prompt tokens found in the prefix cache over those looked up there, in [0, 1]; NaN when
  /// none were looked up (see `metrics_registry::prefix_cache_hit_rate`).
  double prefix_cache_hit_rate = 0;
  /// Used KV-cache blocks over all blocks of the executors with a block pool, in [0, 1]; NaN
  /// when none has one (see `metrics_registry::kv_blocks`).
  double kv_cache_usage = 0;
};

/// An executor's KV-cache blocks after its latest step (`step_timing`'s gauges). Every block is
/// either used or free, so `used + free` is the pool's size; `cached` overlaps both.
struct kv_block_gauges {
  /// Blocks referenced by running sequences.
  uint64_t used = 0;
  /// Blocks holding a cached prefix, referenced or not.
  uint64_t cached = 0;
  /// Blocks free to allocate: free or evictable.
  uint64_t free = 0;
};

/// Every outcome, step kind and finish reason, in the order the renderers list them.
inline constexpr outcome all_outcomes[] = {outcome::finished, outcome::cancelled, outcome::expired,
                                           outcome::rejected, outcome::failed};
inline constexpr step_kind all_step_kinds[] = {step_kind::prefill, step_kind::decode};
inline constexpr finish_reason all_finish_reasons[] = {finish_reason::stop, finish_reason::length};

// -- registry ------------------------------------------------------------------------------------

/// Aggregates the timing events of a pipeline. The metrics actor owns one and turns each event
/// it receives into a `record` call; `GET /metrics` serves `prometheus_text`, the bench command
/// and the JSON endpoint use `json_snapshot` and `summarize`. Not thread-safe: one owner.
///
/// What a request adds (stamps a request lacks add nothing):
/// - every request: `requests(outcome)`, its output tokens to `generation_tokens_total`, the
///   prompt tokens it looked up in the prefix cache to `prefix_cache_queries_total` and those
///   found there to `prefix_cache_hits_total`;
/// - admitted requests: their prompt tokens to `prompt_tokens_total`;
/// - queued and admitted: `queue_time` (queued -> admitted);
/// - with a first token: `time_to_first_token` (arrival -> first token);
/// - each gap between consecutive `token_times`: `inter_token_latency`;
/// - finished requests only: `finished(reason)` (stop, length), `e2e_latency` (arrival ->
///   finished), `request_prompt_tokens`, `request_output_tokens`, and with two or more output
///   tokens `time_per_output_token` ((finished - first token) / (output tokens - 1)).
///
/// What a step adds: `batch_size`, `step_time(kind)`, the executor's busy time, and when
/// `padded_tokens > 0` a `padding_fraction` of (padded_tokens - tokens) / padded_tokens. Its
/// block gauges become the executor's `kv_blocks`, unless they are all 0 and the executor never
/// reported others (an executor without a block pool has no `kv_blocks`).
class metrics_registry {
 public:
  // -- member types ------------------------------------------------------------------------------

  /// Returns the current time; the end of the wall time in busy ratios.
  using clock_function = std::function<time_point()>;

  // -- constructors ------------------------------------------------------------------------------

  /// Makes an empty registry that reads the time from `now` (tests pass a fixed clock) and keeps
  /// `reservoir_capacity` raw samples per histogram for percentiles.
  explicit metrics_registry(clock_function now = timing_clock::now,
                            std::size_t reservoir_capacity = histogram::default_reservoir_capacity);

  // -- recording ---------------------------------------------------------------------------------

  /// Adds the timings of one ended request.
  void record(const request_timing& x);

  /// Adds the timings of one executor step.
  void record(const step_timing& x);

  /// Starts (or restarts, forgetting its busy time, steps and block gauges) the wall time of an
  /// executor's busy ratio, and notes its device.
  void record(const executor_started& x);

  /// Sets the gauge of requests waiting in the batcher's queue.
  void set_queue_depth(std::size_t requests);

  /// Sets the gauge of sequences running on `executor`.
  void set_running_sequences(const std::string& executor, std::size_t sequences);

  /// Forgets everything recorded and set; keeps the clock and the capacity.
  void reset();

  // -- counters ----------------------------------------------------------------------------------

  /// Requests that ended with `x`.
  uint64_t requests(outcome x) const noexcept;

  /// Requests recorded, of every outcome.
  uint64_t requests_total() const noexcept;

  /// Finished requests that stopped for `x` (`finish_reason::none` counts nothing).
  uint64_t finished(finish_reason x) const noexcept;

  /// Prompt tokens of admitted requests.
  uint64_t prompt_tokens_total() const noexcept { return prompt_tokens_total_; }

  /// Output tokens of all requests.
  uint64_t generation_tokens_total() const noexcept { return generation_tokens_total_; }

  /// Generated tokens per second over the span of the recorded requests (earliest arrival to
  /// latest end); 0 when the span is empty.
  double tokens_per_second() const noexcept;

  /// Prompt tokens that requests looked up in an executor's prefix cache (in tokens, as vLLM's
  /// `prefix_cache_queries`).
  uint64_t prefix_cache_queries_total() const noexcept { return prefix_cache_queries_total_; }

  /// Prompt tokens found in an executor's prefix cache: read from cached KV blocks instead of
  /// computed.
  uint64_t prefix_cache_hits_total() const noexcept { return prefix_cache_hits_total_; }

  /// `prefix_cache_hits_total` over `prefix_cache_queries_total`; NaN when nothing was looked up.
  double prefix_cache_hit_rate() const noexcept;

  // -- histograms --------------------------------------------------------------------------------

  /// Seconds from entering the queue to admission.
  const histogram& queue_time() const noexcept { return queue_time_; }

  /// Seconds from arrival to the first output token.
  const histogram& time_to_first_token() const noexcept { return time_to_first_token_; }

  /// Seconds between consecutive output tokens of a request.
  const histogram& inter_token_latency() const noexcept { return inter_token_latency_; }

  /// Seconds per output token after the first, per finished request.
  const histogram& time_per_output_token() const noexcept { return time_per_output_token_; }

  /// Seconds from arrival to the end, per finished request.
  const histogram& e2e_latency() const noexcept { return e2e_latency_; }

  /// Prompt tokens per finished request.
  const histogram& request_prompt_tokens() const noexcept { return request_prompt_tokens_; }

  /// Output tokens per finished request.
  const histogram& request_output_tokens() const noexcept { return request_output_tokens_; }

  /// Sequences per step.
  const histogram& batch_size() const noexcept { return batch_size_; }

  /// Fraction of padding tokens per step, in [0, 1].
  const histogram& padding_fraction() const noexcept { return padding_fraction_; }

  /// Seconds per step of kind `x`.
  const histogram& step_time(step_kind x) const noexcept;

  // -- gauges ------------------------------------------------------------------------------------

  /// The executors seen (in steps, starts or running-sequence gauges), sorted.
  std::vector<std::string> executors() const;

  /// Sum of `executor`'s step durations, in seconds; 0 for an unknown executor.
  double busy_seconds(const std::string& executor) const;

  /// Busy seconds divided by the wall time from the executor's start to now, clamped to [0, 1];
  /// 0 for an unknown executor or an empty wall time.
  double busy_ratio(const std::string& executor) const;

  /// Steps `executor` ran; 0 for an unknown executor.
  uint64_t executor_steps(const std::string& executor) const;

  /// The device `executor` said it runs on ("cuda:1"); empty when unknown.
  std::string executor_device(const std::string& executor) const;

  /// The last value of `set_queue_depth`.
  std::size_t queue_depth() const noexcept { return queue_depth_; }

  /// The last value of `set_running_sequences` for `executor`; 0 when never set.
  std::size_t running_sequences(const std::string& executor) const;

  /// The block gauges of `executor`'s latest step since it started; std::nullopt for an
  /// executor without a block pool (every step it ran reported 0 blocks of each kind), one that
  /// ran no step since it started, or an unknown one.
  std::optional<kv_block_gauges> kv_blocks(const std::string& executor) const;

  // -- summary ---------------------------------------------------------------------------------

  /// The main numbers, for the log line and the bench command's table.
  pipeline::summary summarize() const;

 private:
  // -- member types ------------------------------------------------------------------------------

  /// The busy time of one executor.
  struct executor_busy {
    time_point started;
    double busy_seconds = 0;
    uint64_t steps = 0;
  };

  // -- member variables --------------------------------------------------------------------------

  clock_function now_;
  std::array<uint64_t, outcome_count> requests_{};
  uint64_t finished_stop_ = 0;
  uint64_t finished_length_ = 0;
  uint64_t prompt_tokens_total_ = 0;
  uint64_t generation_tokens_total_ = 0;
  uint64_t prefix_cache_queries_total_ = 0;
  uint64_t prefix_cache_hits_total_ = 0;
  // The span of the recorded requests, for tokens per second.
  time_point first_arrival_ = time_point::max();
  time_point last_end_ = time_point::min();
  histogram queue_time_;
  histogram time_to_first_token_;
  histogram inter_token_latency_;
  histogram time_per_output_token_;
  histogram e2e_latency_;
  histogram request_prompt_tokens_;
  histogram request_output_tokens_;
  histogram batch_size_;
  histogram padding_fraction_;
  std::array<histogram, step_kind_count> step_time_;
  std::map<std::string, executor_busy> busy_;
  std::map<std::string, std::size_t> running_sequences_;
  // Executor -> its latest step's block gauges; only executors with a block pool.
  std::map<std::string, kv_block_gauges> kv_blocks_;
  // Executor -> device, from `executor_started`.
  std::map<std::string, std::string> devices_;
  std::size_t queue_depth_ = 0;
};

}  // namespace conveyor::pipeline
