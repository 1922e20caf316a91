// Runs jobs that may take long (grammar compilation) on threads of their own, waiting for each
// at most a time limit, with a cap on how many run at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/error.hpp"

namespace conveyor::grammar {

/// Runs jobs on threads of its own and waits for each at most `limit`. A job past the limit is
/// left to finish on its thread (C++ cannot stop it): the caller gets ec::bad_request at once,
/// and the job's work is not lost when it fills a cache. At most `max_running` jobs run at once,
/// those left behind included; one more is refused with ec::rejected_queue_full, so that
/// requests whose grammars never finish cannot pile up threads. The threads are started as
/// needed (up to `max_running`) and kept for the next jobs; they outlive the runner while a job
/// runs, and end with the process. Thread-safe.
class bounded_runner {
 public:
  bounded_runner(std::chrono::milliseconds limit, int32_t max_running)
      : state_(std::make_shared<state>()), limit_(limit), max_running_(max_running) {}

  ~bounded_runner() {
    std::lock_guard<std::mutex> lock{state_->mutex};
    state_->stopping = true;
    state_->changed.notify_all();
  }

  bounded_runner(const bounded_runner&) = delete;
  bounded_runner& operator=(const bounded_runner&) = delete;

  /// Runs `job`, returning its result, its error, or the error of a passed limit or a full
  /// runner; `what` names the job in those errors ("compiling the grammar of 'response_format'").
  template <class T>
  expected<T> run(const std::string& what, std::function<expected<T>()> job) {
    struct slot {
      std::optional<expected<T>> result;
    };
    auto done = std::make_shared<slot>();
    std::unique_lock<std::mutex> lock{state_->mutex};
    if (state_->running >= max_running_)
      return make_error(ec::rejected_queue_full,
                        what + ": " + std::to_string(max_running_) +
                            " grammars are compiling already; try again later");
    ++state_->running;
    // The job stores its result under the lock; the slot outlives a caller that left.
    state_->jobs.push_back([done, job = std::move(job)](std::mutex& m) {
      auto r = job();
      std::lock_guard<std::mutex> held{m};
      done->result = std::move(r);
    });
    if (state_->idle < int32_t(state_->jobs.size())) {
      // A new thread: fewer wait for work than jobs are queued (the running jobs hold the
      // others).
      std::thread([shared = state_] { work(shared); }).detach();
    } else {
      state_->changed.notify_all();
    }
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
    /// A job was queued, or the runner ends.
    std::condition_variable changed;
    /// A job finished.
    std::condition_variable finished;
    std::deque<std::function<void(std::mutex&)>> jobs;
    int32_t running = 0;
    /// Threads waiting for a job.
    int32_t idle = 0;
    bool stopping = false;
  };

  /// A thread's loop: takes queued jobs until the runner ends.
  static void work(std::shared_ptr<state> s) {
    std::unique_lock<std::mutex> lock{s->mutex};
    for (;;) {
      if (s->jobs.empty()) {
        if (s->stopping) return;
        ++s->idle;
        s->changed.wait(lock, [&] { return !s->jobs.empty() || s->stopping; });
        --s->idle;
        continue;
      }
      auto job = std::move(s->jobs.front());
      s->jobs.pop_front();
      lock.unlock();
      job(s->mutex);
      lock.lock();
      --s->running;
      s->finished.notify_all();
    }
  }

  std::shared_ptr<state> state_;
  std::chrono::milliseconds limit_;
  int32_t max_running_;
};

}  // namespace conveyor::grammar
