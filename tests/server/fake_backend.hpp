// A completion backend for tests: it echoes the prompt's words back as tokens from its own
// threads, with knobs to fail, to stream slowly, to hang until cancelled or to hold its events.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "server/backend.hpp"

namespace conveyor::server::test {

/// The words of `prompt`, split on spaces.
std::vector<std::string> words_of(const std::string& prompt);

/// What the fake backend generates for `prompt`: its first `max_tokens` words joined by spaces.
std::string expected_text(const std::string& prompt, int32_t max_tokens);

/// Echoes prompts back, one word per token ("w0", " w1", " w2", ...), one thread per request.
/// Finishes with "stop" when the prompt runs out, "length" at max_tokens.
class fake_backend final : public completion_backend {
 public:
  /// Knobs; set them before requests arrive.
  struct settings {
    /// Pause before each token.
    std::chrono::milliseconds token_delay{1};
    /// Fail inside `submit` (synchronously) with this code.
    std::optional<ec> fail_at_submit;
    /// Fail with `fail_code` after this many tokens (-1: never).
    int32_t fail_after_tokens = -1;
    /// Requests with exactly this prompt fail with `fail_code` on their thread.
    std::optional<std::string> fail_prompt;
    /// The code of `fail_after_tokens` and `fail_prompt`.
    ec fail_code = ec::executor_lost;
    /// Cycle through the prompt's words until max_tokens instead of stopping at its end.
    bool repeat = false;
    /// After the words, wait until cancelled (then fail with `ec::cancelled`).
    bool hang = false;
    /// Keep the events instead of running; `release_held` runs them later.
    bool hold = false;
    /// Each token waits until the test allows it (`allow_tokens`) instead of `token_delay`.
    bool paced = false;
    /// Steps as the pipeline's sink sends them: `tokens_per_step` tokens per step, the last step
    /// also carrying the finish (or an error). Otherwise each token is a step of its own and the
    /// end comes alone.
    bool whole_steps = false;
    /// Tokens per step with `whole_steps`.
    int32_t tokens_per_step = 1;
    /// Prompt tokens a finished request reports as read from the prefix cache (at most its
    /// prompt's words).
    int32_t cached_tokens = 0;
    /// The backend's part of /metrics.
    std::string metrics = "# TYPE fake_requests_total counter\nfake_requests_total 7\n";
  };

  /// Makes the backend with default knobs.
  fake_backend();

  /// Makes the backend.
  explicit fake_backend(settings s);

  /// Stops and joins every request thread.
  ~fake_backend() override;

  /// Changes the knobs for later requests.
  void configure(settings s);

  std::shared_ptr<request_handle> submit(completion_request req, completion_events events) override;
  std::string model_name() const override { return "fake-model"; }
  void collect_metrics(std::function<void(std::string)> reply) override;
  completion_defaults defaults() const override;

  /// Requests submitted so far.
  int submitted() const { return submitted_; }
  /// Requests whose handle got `cancel()`.
  int cancelled() const { return cancelled_; }
  /// Requests that ended on their own (finished).
  int finished() const { return finished_; }
  /// Tokens handed to the server (their step's `on_step` call returned).
  int tokens_sent() const { return tokens_sent_; }
  /// Copies of every submitted request.
  std::vector<completion_request> requests() const;

  /// Runs the held events of every held request: a step with one token, then the finish.
  void release_held();

  /// Lets `n` more tokens through, over all requests of the `paced` setting.
  void allow_tokens(int n);

  /// Polls `pred` until it is true or `timeout` passed; returns its last value.
  static bool eventually(const std::function<bool()>& pred,
                         std::chrono::milliseconds timeout = std::chrono::seconds{5});

 private:
  struct job;
  void run(std::shared_ptr<job> j, settings s);

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  settings settings_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  std::vector<completion_request> requests_;
  std::vector<std::shared_ptr<job>> held_;
  int tokens_allowed_ = 0;
  std::atomic<int> submitted_{0};
  std::atomic<int> cancelled_{0};
  std::atomic<int> finished_{0};
  std::atomic<int> tokens_sent_{0};
};

}  // namespace conveyor::server::test
