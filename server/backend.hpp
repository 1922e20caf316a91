// The server's only view of Conveyor: an abstract completion backend that runs requests and
// reports their output step by step. No CAF, torch or Asio types cross this line.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/sampling.hpp"
#include "sampling/sampling_params.hpp"

namespace conveyor {

// Declared in common/error.hpp; an opaque declaration keeps CAF headers out of this one.
enum class ec : uint8_t;

}  // namespace conveyor

namespace conveyor::server {

// -- requests ------------------------------------------------------------------------------------

/// One completion to run: a single prompt with its sampling settings. The server has validated
/// every field (ranges: conveyor::sampling_limits) and filled absent ones from
/// `completion_backend::defaults()`.
struct completion_request {
  /// The prompt text (UTF-8, may be empty).
  std::string prompt;
  /// When not empty, the prompt as token ids, used as given (no BOS added); `prompt` is then
  /// unused.
  std::vector<int32_t> prompt_tokens;
  /// Whether the tokenizer adds its special tokens (BOS before the prompt): `add_special_tokens`
  /// of a completion; false for a rendered chat template, which writes `bos_token` itself when
  /// its model wants one.
  bool add_bos = true;
  /// Sampling and stopping, as the pipeline and the sampler take them. An absent seed means
  /// any; log-probabilities are reported through `completion_step::logprobs`.
  sampling::sampling_params params;
  /// Scheduling priority; higher runs earlier. 0 is normal.
  int32_t priority = 0;
  /// Deadline in seconds from arrival, in (0, max_timeout_s] (common/deadline.hpp); absent means
  /// the backend's own limit.
  std::optional<double> timeout_s;
};

/// Values the server uses for fields that a request leaves out (`conveyor serve` sets them from
/// the configuration's `[generation]`, checked at start).
struct completion_defaults : sampling_defaults {
  /// Token ids of the vocabulary are in [0, vocab_size); 0 when unknown (ids in requests are then
  /// checked by the pipeline only).
  int32_t vocab_size = 0;
};

/// Token counts of one finished completion.
struct completion_usage {
  /// Tokens in the prompt.
  int32_t prompt_tokens = 0;
  /// Tokens generated.
  int32_t completion_tokens = 0;
  /// Prompt tokens read from the executor's prefix cache instead of computed (OpenAI's
  /// `usage.prompt_tokens_details.cached_tokens`).
  int32_t cached_tokens = 0;
};

// -- events --------------------------------------------------------------------------------------

/// An alternative token at one position: its text and log-probability.
struct top_logprob {
  /// The text the token adds there ("" for a control token, or a byte that does not complete a
  /// character).
  std::string token;
  /// Natural log; -infinity when the distribution sampled from excludes it (top_k, top_p).
  float logprob = 0.0f;
};

/// One position's log-probabilities: the token there and the most likely alternatives.
struct token_logprob {
  /// The token's text (as `top_logprob::token`).
  std::string token;
  /// Natural log; NaN for the first token of a prompt (nothing precedes it).
  float logprob = 0.0f;
  /// The most likely tokens there, most likely first (as many as the request asked for).
  std::vector<top_logprob> top;
};

/// What the backend reports of one request at once: one message of the pipeline (one step's
/// output, or the request's end). Its parts count in this order: the prompt's log-probabilities,
/// the tokens' log-probabilities, the text, then the end.
struct completion_step {
  /// The prompt tokens' log-probabilities, for a request that asked for them (`prompt_logprobs`):
  /// once, in a step before (or with) the first token's. Empty otherwise.
  std::vector<token_logprob> prompt_logprobs;
  /// The log-probabilities of the tokens of `text` (with an end token that adds no text, its
  /// own), for a request that asked for them (`logprobs` >= 0). Empty otherwise.
  std::vector<token_logprob> logprobs;
  /// New text: already filtered for stop strings and cut at UTF-8 boundaries; may be empty.
  std::string text;
  /// How the step ends the request, if it does.
  enum class end_kind : uint8_t { none, finished, failed } end = end_kind::none;
  /// For `finished`: "stop" (EOS or a stop string) or "length".
  std::string finish_reason;
  /// For `finished`: the request's token counts.
  completion_usage usage;
  /// For `failed`: why the request failed or was cancelled.
  conveyor::ec code{};
  /// For `failed`: what went wrong, for humans.
  std::string message;
};

/// Where the backend reports one request. The backend calls `on_step` from any thread, one call
/// at a time and in order; exactly one step ends the request (`end` finished or failed), and it
/// is the last. It may come from inside `submit` (e.g. a full queue). The server handles each
/// step as one event (one post onto the connection's strand, the step's stream events written
/// together). `on_step` never blocks and never calls back into the backend: it posts onto the
/// connection's strand and returns. It stays safe to call after the client or the whole server
/// went away (it then does nothing).
struct completion_events {
  /// One step of the request.
  std::function<void(completion_step step)> on_step;
};

/// The server's grip on one submitted request.
class request_handle {
 public:
  virtual ~request_handle() = default;

  /// Asks the backend to stop the request (the client went away, the server is shutting down
  /// or another choice of the same HTTP request failed). Idempotent, thread-safe, never blocks.
  /// The backend still ends the request with its last step (usually failed with
  /// `ec::cancelled`), which the server then ignores.
  virtual void cancel() = 0;
};

// -- the backend ---------------------------------------------------------------------------------

/// What the HTTP server needs from Conveyor. All member functions are called from the server's
/// I/O threads, so none may block (no waiting on an actor's reply).
class completion_backend {
 public:
  virtual ~completion_backend() = default;

  /// Starts one completion. Returns at once with a handle (never null); the outcome arrives
  /// through `events`. May throw only on a bug; the server then answers 500.
  virtual std::shared_ptr<request_handle> submit(completion_request req,
                                                 completion_events events) = 0;

  /// The model's name, as `GET /v1/models` and every completion report it.
  virtual std::string model_name() const = 0;

  /// Collects the Prometheus text (format 0.0.4) for `GET /metrics` and passes it to `reply`,
  /// from any thread, exactly once. The server appends its own `conveyor_http_*` series.
  virtual void collect_metrics(std::function<void(std::string text)> reply) = 0;

  /// Values for fields a request leaves out.
  virtual completion_defaults defaults() const { return {}; }

  // -- the tokenizer (`POST /tokenize`, `POST /detokenize`); these never block ------------------

  /// Whether `tokenize` and `detokenize` work; false answers those routes with 501.
  virtual bool has_tokenizer() const { return false; }

  /// The token ids of `text` as the pipeline would see them, BOS first when `add_bos`; the
  /// tokenizer's error (a text it cannot finish) when it fails.
  virtual expected<std::vector<int32_t>> tokenize(const std::string& text, bool add_bos) const {
    (void)text;
    (void)add_bos;
    return std::vector<int32_t>{};
  }

  /// The text of `ids` (each within [0, defaults().vocab_size)), as a prompt of these ids
  /// reads: control tokens (BOS, EOS) give no text.
  virtual std::string detokenize(const std::vector<int32_t>& ids) const {
    (void)ids;
    return {};
  }

  /// Tokens per sequence, prompt and generated together; 0 when unknown.
  virtual int32_t max_model_len() const { return 0; }
};

}  // namespace conveyor::server
