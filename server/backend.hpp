// The server's only view of Conveyor: an abstract completion backend that runs requests and
// reports their text through callbacks. No CAF, torch or Asio types cross this line.
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
  /// any; log-probabilities are reported through `completion_events::on_logprobs`.
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

/// What one message of the pipeline (one step's output for one request, or its end) brings at
/// once, in the order the single callbacks would report it: the prompt's log-probabilities, the
/// tokens' log-probabilities, the text, then the end (finish or error).
struct completion_step {
  /// As `on_logprobs(..., true)`, when not empty.
  std::vector<token_logprob> prompt_logprobs;
  /// As `on_logprobs(..., false)`, when not empty.
  std::vector<token_logprob> logprobs;
  /// As `on_text`, when not empty.
  std::string text;
  /// How the step ends the request, if it does.
  enum class end_kind : uint8_t { none, finished, failed } end = end_kind::none;
  /// For `finished`: as `on_finish`.
  std::string finish_reason;
  /// For `finished`: as `on_finish`.
  completion_usage usage;
  /// For `failed`: as `on_error`.
  conveyor::ec code{};
  /// For `failed`: as `on_error`.
  std::string message;
};

/// The callbacks of one request. The backend calls them from any thread, one at a time and in
/// order, and calls exactly one of `on_finish` or `on_error` exactly once, last; it may do so
/// from inside `submit` (e.g. a full queue). The callbacks never block and never call back into
/// the backend: they post onto the connection's strand and return. They stay safe to call after
/// the client or the whole server went away (they then do nothing).
struct completion_events {
  /// New text of one step: already filtered for stop strings and cut at UTF-8 boundaries.
  std::function<void(std::string text)> on_text;
  /// The request finished; `finish_reason` is "stop" (EOS or a stop string) or "length".
  std::function<void(std::string finish_reason, completion_usage usage)> on_finish;
  /// The request failed or was cancelled; `message` is for humans.
  std::function<void(conveyor::ec code, std::string message)> on_error;
  // -- log-probabilities --
  /// Log-probabilities of tokens, for requests that asked for them (backends that never report
  /// any may leave it unset; callers check). With `prompt` true: the prompt's tokens, once,
  /// before any other event. Otherwise: the tokens of the next `on_text` (or of `on_finish`),
  /// called before it; a last one for an end token that adds no text.
  std::function<void(std::vector<token_logprob> entries, bool prompt)> on_logprobs;
  // -- one step at once --
  /// Optional: everything of one step in one call, which the server handles as one event (one
  /// post onto the connection's strand, the step's stream events written together). A backend
  /// that has a step's output at once calls it when set instead of the single callbacks above;
  /// the same rules hold (in order, one end exactly once, last).
  std::function<void(completion_step step)> on_step;
};

/// The server's grip on one submitted request.
class request_handle {
 public:
  virtual ~request_handle() = default;

  /// Asks the backend to stop the request (the client went away, the server is shutting down
  /// or another choice of the same HTTP request failed). Idempotent, thread-safe, never blocks.
  /// The backend still ends the request with `on_finish` or `on_error` (usually
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
