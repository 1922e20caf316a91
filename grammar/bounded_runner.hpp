// Runs jobs that may take long (grammar compilation) on threads of their own, waiting for each
// at most a time limit, with a cap on how many run at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/error.hpp"

namespace conveyor::grammar {

/// Runs a job on a thread of its own and waits for it at most `limit`. A job past the limit is
/// left to finish on its thread (C++ cannot stop it): the caller gets ec::bad_request at once,
/// and the job's work is not lost when it fills a cache. At most `max_running` jobs run at once,
/// those left behind included; one more is refused with ec::rejected_queue_full, so that
/// requests whose grammars never finish cannot pile up threads. Thread-safe.
class bounded_runner {
 public:
  bounded_runner(std::chrono::milliseconds limit, int32_t max_running)
      : state_(std::make_shared<state>()), limit_(limit), max_running_(max_running) {}

  /// Runs `job`, returning its result, its error, or the error of a passed limit or a full
  /// runner; `what` names the job in those errors ("compiling the grammar of 'response_format'").
  template <class T>
  expected<T> run(const std::string& what, std::function<expected<T>()> job) {
    {
      std::lock_guard<std::mutex> lock{state_->mutex};
      if (state_->running >= max_running_)
        return make_error(ec::rejected_queue_full,
                          what + ": " + std::to_string(max_running_) +
                              " grammars are compiling already; try again later");
      ++state_->running;
    }
    struct slot {
      std::optional<expected<T>> result;
    };
    auto shared = state_;
    auto done = std::make_shared<slot>();
    std::thread([shared, done, job = std::move(job)] {
      auto r = job();
      std::lock_guard<std::mutex> lock{shared->mutex};
      done->result = std::move(r);
      --shared->running;
      shared->finished.notify_all();
    }).detach();
    std::unique_lock<std::mutex> lock{state_->mutex};
    if (!state_->finished.wait_for(lock, limit_, [&] { return done->result.has_value(); }))
      return make_error(ec::bad_request, what + " took longer than " +
                                             std::to_string(limit_.count()) +
                                             " ms (structured_outputs.compile_timeout_ms)");
    return std::move(*done->result);
  }

  /// Waits until no job runs (those past their limit included).
  void wait_until_idle() const {
    std::unique_lock<std::mutex> lock{state_->mutex};
    state_->finished.wait(lock, [&] { return state_->running == 0; });
  }

  /// Jobs running now, those past their limit included.
  int32_t running() const {
    std::lock_guard<std::mutex> lock{state_->mutex};
    return state_->running;
  }

 private:
  /// Shared with the threads, which may outlive the runner.
  struct state {
    std::mutex mutex;
    std::condition_variable finished;
    int32_t running = 0;
  };
  std::shared_ptr<state> state_;
  std::chrono::milliseconds limit_;
  int32_t max_running_;
};

}  // namespace conveyor::grammar
