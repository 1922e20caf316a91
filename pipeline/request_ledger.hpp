// The batcher's books: every live request (where it is, which executor runs it, the copy kept to
// run it again), the requests each executor was sent but has not acknowledged, and what becomes
// of an executor's requests when it is lost. Plain and CAF-free: the batcher actor keeps its
// handles (sink, guard, executor) in `Handles` and only turns messages into calls on this.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pipeline/request.hpp"

namespace conveyor::pipeline {

/// Where a live request is.
enum class request_stage : uint8_t { tokenizing, waiting, running };

/// Live requests by stage.
struct stage_counts {
  uint64_t tokenizing = 0;
  uint64_t waiting = 0;
  uint64_t running = 0;
};

/// What becomes of the requests of a lost executor.
struct lost_executor_plan {
  /// Cancelled before the loss: they end as cancelled.
  std::vector<request_id> cancelled;
  /// Their sinks heard part of an answer that cannot resume elsewhere unseen: they fail.
  std::vector<request_id> failed;
  /// Nothing streamed yet: they run again from the start, as they were sent (with the stamps of
  /// admission and first token cleared). Each is in the ledger as waiting already; if the queue
  /// has no room the caller fails it.
  std::vector<sequence_request> again;
};

/// The ledger of live requests and of the executors' in-flight counts. `Handles` is whatever the
/// owner keeps per request (default-constructible).
template <class Handles>
class request_ledger {
 public:
  /// One live request.
  struct entry {
    request_stage stage = request_stage::tokenizing;
    bool cancel_requested = false;
    /// While running: the executor's id (see `executor_id`).
    uint64_t executor = 0;
    /// While running: the request as it was sent, to run it again elsewhere if its executor is
    /// lost before it streamed anything (one copy of the prompt per running request).
    std::optional<sequence_request> sent;
    /// The executor said it streams this request: it cannot run again unseen.
    bool started = false;
    /// When the request arrived (for the result of a request that ends in the batcher).
    stamp arrival = 0;
    Handles handles;
  };

  // -- requests ----------------------------------------------------------------------------------

  /// Records a new request as tokenizing; false (and nothing recorded) when the id is in use.
  bool open(request_id id, stamp arrival, Handles handles) {
    entry e;
    e.arrival = arrival;
    e.handles = std::move(handles);
    return live_.emplace(id, std::move(e)).second;
  }

  /// The request, or null when it is not live.
  entry* find(request_id id) {
    auto it = live_.find(id);
    return it == live_.end() ? nullptr : &it->second;
  }

  /// Forgets a request (it ended).
  void close(request_id id) { live_.erase(id); }

  /// The request waits in the queue.
  void waiting(request_id id) {
    if (auto* e = find(id)) e->stage = request_stage::waiting;
  }

  /// The request was sent to executor `executor` as `req` (kept to run it again if needed).
  void running(request_id id, uint64_t executor, sequence_request req) {
    auto* e = find(id);
    if (!e) return;
    e->stage = request_stage::running;
    e->executor = executor;
    e->sent = std::move(req);
    e->started = false;
  }

  /// The executor streams the request: it cannot run again, its copy is dropped.
  void started(request_id id) {
    if (auto* e = find(id)) {
      e->started = true;
      e->sent.reset();
    }
  }

  /// Live requests by stage.
  stage_counts counts() const {
    stage_counts c;
    for (const auto& [id, e] : live_) {
      if (e.stage == request_stage::tokenizing)
        ++c.tokenizing;
      else if (e.stage == request_stage::waiting)
        ++c.waiting;
      else
        ++c.running;
    }
    return c;
  }

  // -- executors ---------------------------------------------------------------------------------

  /// A new executor's id (never 0, never reused).
  uint64_t add_executor() {
    const uint64_t id = ++last_executor_;
    sent_to_[id] = 0;
    return id;
  }

  /// `n` more requests were sent to `executor`.
  void sent(uint64_t executor, uint64_t n) { sent_to_[executor] += n; }

  /// Requests sent to `executor` that it had not yet received when it reported `received`:
  /// they occupy slots its report still shows as free.
  int32_t in_flight(uint64_t executor, uint64_t received) const {
    auto it = sent_to_.find(executor);
    return it == sent_to_.end() || it->second < received ? 0
                                                          : int32_t(it->second - received);
  }

  /// The executor is gone: its running requests are sorted into the plan, those to run again
  /// become waiting (the caller pushes them into the queue), the others stay live until the
  /// caller ends them.
  lost_executor_plan lose_executor(uint64_t executor) {
    sent_to_.erase(executor);
    lost_executor_plan plan;
    for (auto& [id, e] : live_) {
      if (e.stage != request_stage::running || e.executor != executor) continue;
      e.executor = 0;
      if (e.cancel_requested) {
        plan.cancelled.push_back(id);
      } else if (e.started || !e.sent) {
        plan.failed.push_back(id);
      } else {
        sequence_request req = std::move(*e.sent);
        e.sent.reset();
        req.times.admitted = 0;
        req.times.first_token = 0;
        e.stage = request_stage::waiting;
        plan.again.push_back(std::move(req));
      }
    }
    return plan;
  }

 private:
  std::unordered_map<request_id, entry> live_;
  std::unordered_map<uint64_t, uint64_t> sent_to_;
  uint64_t last_executor_ = 0;
};

}  // namespace conveyor::pipeline
