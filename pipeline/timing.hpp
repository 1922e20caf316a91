// Timing events: what each stage stamps and sends to the metrics actor (see metrics.hpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace conveyor::pipeline {

// -- clock ---------------------------------------------------------------------------------------

/// The clock of every timing event. Times are `steady_clock` time points and spans are
/// `steady_clock` durations; the metrics registry converts them to seconds (as double).
using timing_clock = std::chrono::steady_clock;

/// A point in time as every stage stamps it.
using time_point = timing_clock::time_point;

/// A span of time as every stage measures it.
using duration = timing_clock::duration;

// -- request outcomes ----------------------------------------------------------------------------

/// How a request ended. Every request ends exactly once, with one of these.
enum class outcome : uint8_t {
  /// The request produced all its tokens (see `finish_reason`).
  finished,
  /// The client cancelled the request or went away.
  cancelled,
  /// The request's deadline passed before it finished.
  expired,
  /// The request was refused (queue full, prompt too long, bad input).
  rejected,
  /// The request failed inside Conveyor (e.g. its executor was lost).
  failed,
};

/// The number of `outcome` values.
inline constexpr std::size_t outcome_count = 5;

/// Returns the name of `x`, e.g. "finished"; the label value in Prometheus text.
const char* to_string(outcome x);

/// Why a finished request stopped generating.
enum class finish_reason : uint8_t {
  /// The request did not finish (any outcome other than `finished`).
  none,
  /// The model produced a stop token or a stop sequence.
  stop,
  /// The request reached its `max_tokens` or the context length.
  length,
};

/// Returns the name of `x`, e.g. "stop".
const char* to_string(finish_reason x);

// -- events --------------------------------------------------------------------------------------

/// The timings of one request, sent once when the request ends. Stamps a request never reached
/// stay unset (a rejected request may never be tokenized, queued or admitted).
struct request_timing {
  /// How the request ended.
  pipeline::outcome outcome = pipeline::outcome::finished;
  /// Why it stopped; `none` unless `outcome` is `finished`.
  finish_reason reason = finish_reason::none;
  /// When the request arrived at the server (or the embedding API).
  time_point arrival;
  /// When the prompt was tokenized.
  std::optional<time_point> tokenized;
  /// When the request entered the batcher's waiting queue.
  std::optional<time_point> queued;
  /// When an executor admitted the request (took it from the queue).
  std::optional<time_point> admitted;
  /// When the first output token was produced.
  std::optional<time_point> first_token;
  /// When the request ended (with any outcome).
  time_point finished;
  /// Tokens in the prompt.
  std::size_t prompt_tokens = 0;
  /// Tokens generated.
  std::size_t output_tokens = 0;
  /// Prompt tokens looked up in the prefix cache, and those found there (request_result's).
  std::size_t cache_queried_tokens = 0;
  std::size_t cached_tokens = 0;
  /// When each output token was produced, in order (the first equals `first_token`). May stay
  /// empty when the producer does not keep per-token stamps; then no inter-token latency is
  /// recorded for the request, the other quantities still are.
  std::vector<time_point> token_times;
};

/// What an executor step did.
enum class step_kind : uint8_t {
  /// The step processed prompts (filled KV caches).
  prefill,
  /// The step generated one token for each running sequence.
  decode,
};

/// The number of `step_kind` values.
inline constexpr std::size_t step_kind_count = 2;

/// Returns the name of `x`, e.g. "prefill"; the label value in Prometheus text.
const char* to_string(step_kind x);

/// The timings of one executor step, sent per step (in batches) by each executor.
struct step_timing {
  /// The executor that ran the step (e.g. "cuda:0"), unique per pipeline.
  std::string executor;
  /// Prefill or decode.
  step_kind kind = step_kind::decode;
  /// Sequences in the step.
  std::size_t batch_size = 0;
  /// Real tokens processed (prompt tokens for prefill, one per sequence for decode).
  std::size_t tokens = 0;
  /// Tokens processed including padding (equal to `tokens` when the policy pads nothing).
  std::size_t padded_tokens = 0;
  /// When the step started.
  time_point start;
  /// How long the step ran.
  duration elapsed{};
  /// The executor's KV-cache blocks after the step: referenced by running sequences, holding a
  /// cached prefix (referenced or not), and free to allocate (free or evictable). All 0 from an
  /// executor without a block pool.
  int32_t kv_blocks_used = 0;
  int32_t kv_blocks_cached = 0;
  int32_t kv_blocks_free = 0;
};

/// Sent once by an executor when it starts; the start of the wall time in its busy ratio.
/// Without it, the start of the executor's first step stands in.
struct executor_started {
  /// The executor, as in `step_timing::executor`.
  std::string executor;
  /// When the executor was ready to run steps.
  time_point at;
  /// The device its model is placed on ("cpu", "cuda:1"); empty when unknown.
  std::string device;
};

}  // namespace conveyor::pipeline
