// What one benchmark run measured: a record per request, and the numbers a report shows.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace conveyor::bench {

// -- per request ---------------------------------------------------------------------------------

/// How a request of the benchmark ended.
enum class request_status : uint8_t {
  /// It produced its tokens (finish reason stop or length).
  completed,
  /// The server refused it (queue full, prompt too long, bad input; HTTP 4xx and 429).
  rejected,
  /// Anything else: expired, cancelled, executor lost, HTTP 5xx, connection errors.
  failed,
};

/// Returns "completed", "rejected" or "failed".
const char* to_string(request_status x);

/// The measurements of one request. Times are seconds after the scheduled arrival (t0 +
/// arrival_s), so that a late send counts against the server, as an open-loop client sees it.
struct request_record {
  request_status status = request_status::failed;
  /// Output tokens received.
  int32_t output_tokens = 0;
  /// When each output chunk with tokens (or non-empty text over HTTP) arrived; the first is the
  /// time to first token.
  std::vector<double> chunk_times;
  /// When the request ended (its result or the end of the stream).
  double end = 0;
  /// What went wrong, for rejected and failed requests.
  std::string message;
  /// The turn of a conversation this request was (1 for the first); 0 outside conversations.
  int32_t turn = 0;
  /// The generated text (over HTTP: the chunks' text joined); a conversation sends it back as
  /// the assistant's message of the next turn.
  std::string text;
  /// From the response's usage: the prompt's tokens, and of those the ones the server read from
  /// its prefix cache (`usage.prompt_tokens_details.cached_tokens`); unset when not reported.
  std::optional<int32_t> prompt_tokens;
  std::optional<int32_t> cached_tokens;
  /// The request asked for an output format (--json-schema-fraction).
  bool constrained = false;
};

/// Counters a progress line reads while a run goes on (written by the run's threads).
struct run_progress {
  /// Requests sent so far.
  std::atomic<std::size_t> sent{0};
  /// Requests that ended so far, with any status.
  std::atomic<std::size_t> ended{0};
};

// -- statistics ----------------------------------------------------------------------------------

/// Mean and percentiles of a set of samples (numpy's linear percentiles); NaN when empty.
struct distribution {
  std::size_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
};

/// Computes the distribution of `samples` (any order).
distribution describe(const std::vector<double>& samples);

/// Everything a report shows about one run (one policy, or the target, on one workload).
struct run_summary {
  /// "continuous", "seed", "sequential" or the target URL.
  std::string name;
  /// Mean arrival rate of the workload (requests / last arrival), or the --rate it was made with;
  /// infinity for a burst.
  double rate = 0;
  std::size_t requests = 0;
  std::size_t completed = 0;
  std::size_t rejected = 0;
  std::size_t failed = 0;
  /// Seconds from t0 to the end of the last request.
  double wall_s = 0;
  /// Completed requests per wall second.
  double requests_per_s = 0;
  /// Output tokens of completed requests.
  uint64_t output_tokens = 0;
  /// Output tokens per wall second.
  double output_tokens_per_s = 0;
  /// Seconds from scheduled arrival to the first token, completed requests.
  distribution ttft;
  /// (end - first token) / (output tokens - 1), completed requests with 2+ tokens.
  distribution tpot;
  /// Gaps between consecutive chunks of a request, pooled over completed requests.
  distribution itl;
  /// Seconds from scheduled arrival to the end, completed requests.
  distribution e2e;
  /// From the pipeline's metrics (in-process runs); NaN for a target.
  double batch_size_mean = 0;
  double padding_fraction = 0;
  double executor_busy_ratio = 0;
  /// CPU seconds of the bench process over the run (t0 to the last end), all of its threads: for
  /// a target the client's own cost, in process the pipeline's and the driver's together; NaN
  /// until the caller sets it.
  double process_cpu_s = 0;
  /// Chat workloads (records with a turn): the TTFT of completed requests by turn, turn 1 first,
  /// and over turns 2 and later; empty and count 0 for other workloads.
  std::vector<distribution> ttft_by_turn;
  distribution ttft_later_turns;
  /// Sums over completed requests that reported usage: prompt tokens, and those of them read from
  /// the prefix cache (a missing count is 0).
  uint64_t prompt_tokens = 0;
  uint64_t cached_tokens = 0;
  /// cached_tokens / prompt_tokens; NaN when no request reported a cached count.
  double prefix_cache_hit_rate = 0;
  /// The TPOT of completed requests that asked for no output format and of those that asked for
  /// one (`request_record::constrained`), the completed ones of the latter and their output
  /// tokens: what constrained neighbours cost the others.
  distribution tpot_unconstrained;
  distribution tpot_constrained;
  std::size_t constrained_completed = 0;
  uint64_t constrained_output_tokens = 0;
  /// The E2E latencies of completed requests, sorted (for the CDF chart).
  std::vector<double> e2e_sorted;
};

/// Summarizes the records of one run; the pipeline's numbers are left NaN.
run_summary summarize(std::string name, double rate, const std::vector<request_record>& records,
                      double wall_s);

}  // namespace conveyor::bench
