// What a request is on its way through the pipeline: the client's ask, the tokenized work item
// the batcher queues, what the sink hears, and the time stamps of every stage.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "common/error.hpp"
#include "grammar/compiled_grammar.hpp"
#include "pipeline/timing.hpp"
#include "sampling/sampling_params.hpp"

namespace conveyor {

/// Identifies a request for its whole life; unique within one pipeline.
using request_id = uint64_t;

/// Nanoseconds on the steady clock of this machine (so that messages stay serializable).
using stamp = int64_t;

/// Now, as a stamp.
inline stamp now_stamp() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Seconds between two stamps.
inline double seconds_between(stamp from, stamp to) {
  return double(to - from) * 1e-9;
}

/// How a request ended (finished, cancelled, expired, rejected, failed): exactly once each.
using pipeline::outcome;

/// Why a finished request stopped: "stop" (end token or stop string) or "length".
using pipeline::finish_reason;

/// Converts a stamp to a time point of the steady clock.
inline std::chrono::steady_clock::time_point to_time_point(stamp s) {
  return std::chrono::steady_clock::time_point{std::chrono::nanoseconds{s}};
}

/// Time stamps of one request's stages (0 = not reached).
struct request_times {
  stamp arrival = 0;
  stamp tokenized = 0;
  stamp queued = 0;
  stamp admitted = 0;
  stamp first_token = 0;
  stamp finished = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, request_times& x) {
  return f(caf::meta::type_name("request_times"), x.arrival, x.tokenized, x.queued, x.admitted,
           x.first_token, x.finished);
}

/// A client's request as it enters the pipeline.
struct generate_request {
  /// 0 lets the pipeline assign one; the assigned id is in every message the sink receives.
  request_id id = 0;
  std::string prompt;
  /// When not empty, used instead of tokenizing `prompt` (BOS included).
  std::vector<int32_t> prompt_tokens;
  /// Whether tokenizing `prompt` puts BOS first; false for a rendered chat template that
  /// writes `bos_token` itself.
  bool add_bos = true;
  /// Sampling and stopping. The HTTP server's requests come with a seed (pipeline_backend draws
  /// one when the client gave none), so that a request run again samples the same.
  sampling::sampling_params params;
  /// Higher runs first; FIFO within one level.
  int32_t priority = 0;
  /// Seconds from arrival until the request expires; 0 uses the pipeline's default.
  double timeout_s = 0;
  /// When the client sent it (0: when the pipeline received it).
  stamp arrival = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, generate_request& x) {
  return f(caf::meta::type_name("generate_request"), x.id, x.prompt, x.prompt_tokens, x.add_bos,
           x.params, x.priority, x.timeout_s, x.arrival);
}

/// A tokenized request, as the batcher queues it and an executor runs it.
struct sequence_request {
  request_id id = 0;
  std::vector<int32_t> prompt;
  sampling::sampling_params params;
  int32_t priority = 0;
  /// Absolute deadline on the steady clock of the machine holding the request; 0 for none. It
  /// never crosses machines: a work_item carries what is left of it (deadline_left).
  stamp deadline = 0;
  request_times times;
  /// Tokens queued before this one arrived; ties of priority go first-come first-served.
  uint64_t sequence_number = 0;
  /// `params.constraint` compiled, when it is active: by a tokenizer worker in this process.
  /// Never sent to another machine: a remote executor compiles the constraint on arrival.
  std::shared_ptr<const grammar::compiled_grammar> grammar;

  /// The tokens this request can occupy: prompt plus its generation limit.
  int64_t token_cost() const { return int64_t(prompt.size()) + params.max_tokens; }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sequence_request& x) {
  return f(caf::meta::type_name("sequence_request"), x.id, x.prompt, x.params, x.priority,
           x.deadline, x.times, x.sequence_number);
}

/// A deadline on its way to another machine: what is left of it, not the stamp, since a stamp
/// of this machine's steady clock means nothing on another host's (there it would expire at
/// once or never). The receiver rebuilds the deadline against its own clock.
struct deadline_left {
  /// False when the request has no deadline.
  bool set = false;
  /// Nanoseconds left when it was sent; 0 or less when it had already passed.
  int64_t nanoseconds = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, deadline_left& x) {
  return f(caf::meta::type_name("deadline_left"), x.set, x.nanoseconds);
}

/// What is left of `deadline` (0: none) at `now`, on the sender's clock.
deadline_left left_of(stamp deadline, stamp now);

/// The deadline on the receiver's clock of what was `left` when sent, received at `now`; 0 when
/// there is none. One that had passed is at or before `now`, so it expires at once.
stamp deadline_from(const deadline_left& left, stamp now);

/// A token with its log-probability and its text, as an alternative at one position.
struct token_alternative {
  int32_t token = 0;
  /// -infinity when the distribution sampled from excludes it (top_k, top_p).
  float logprob = 0.0f;
  /// The text it adds at that position (incremental_detokenizer::peek; "" for a control token
  /// or a byte that does not complete a character).
  std::string text;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, token_alternative& x) {
  return f(caf::meta::type_name("token_alternative"), x.token, x.logprob, x.text);
}

/// One position's log-probabilities: the token there and the most likely alternatives.
struct token_logprob {
  /// The token, its log-probability (NaN for a prompt's first token, which has none) and text.
  token_alternative chosen;
  /// The most likely tokens, most likely first.
  std::vector<token_alternative> top;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, token_logprob& x) {
  return f(caf::meta::type_name("token_logprob"), x.chosen, x.top);
}

/// New output of one request from one step: text safe to show (UTF-8 complete, stop strings
/// held back) and the token ids behind it.
struct token_chunk {
  request_id id = 0;
  std::string text;
  std::vector<int32_t> tokens;
  // -- log-probabilities --
  /// When the request asked for them: one per token of `tokens`, in order, and one more for an
  /// end token that ended the request (it is in no chunk's `tokens` and adds no text).
  std::vector<token_logprob> logprobs{};
  /// When the request asked for them: the prompt's tokens (first chunk only).
  std::vector<token_logprob> prompt_logprobs{};
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, token_chunk& x) {
  return f(caf::meta::type_name("token_chunk"), x.id, x.text, x.tokens, x.logprobs,
           x.prompt_logprobs);
}

/// The one final message of a request.
struct request_result {
  request_id id = 0;
  outcome how = outcome::finished;
  /// For finished requests.
  finish_reason reason = finish_reason::none;
  /// For the others: what went wrong (ec::rejected_queue_full, ec::expired, ...).
  ec code = ec::none;
  std::string message;
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  /// Prompt tokens looked up in the executor's prefix cache (0 where caching is off or the
  /// request was not admitted), and those found there: read from cached KV blocks instead of
  /// computed.
  int32_t cache_queried_tokens = 0;
  int32_t cached_tokens = 0;
  request_times times;
  /// Text still held back when the request ended (empty unless it ended mid-character).
  std::string tail;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, request_result& x) {
  return f(caf::meta::type_name("request_result"), x.id, x.how, x.reason, x.code, x.message,
           x.prompt_tokens, x.completion_tokens, x.cache_queried_tokens, x.cached_tokens, x.times,
           x.tail);
}

/// The timing event of a request's end, from the stamps and counts of its result.
pipeline::request_timing timing_of(const request_result& r);

/// Builds the final message of a request that ends without finishing.
request_result make_failure(request_id id, outcome how, ec code, std::string message,
                            const request_times& times, int32_t prompt_tokens = 0,
                            int32_t completion_tokens = 0);

}  // namespace conveyor
