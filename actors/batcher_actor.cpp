// The batcher actor: it owns every request from arrival until an executor ends it.
#include "actors/batcher_actor.hpp"

#include <optional>
#include <unordered_map>

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include "actors/caf_error.hpp"
#include "pipeline/prefix_router.hpp"
#include "pipeline/request_checks.hpp"
#include "pipeline/request_ledger.hpp"

namespace conveyor {

namespace {

using pipeline::request_stage;

/// What the batcher keeps per live request beside the ledger's record.
struct request_handles {
  sink_actor sink;
  /// While running: the executor, to send it a cancel.
  executor_actor executor;
  /// While on a remote executor: the local guard its output goes through (see sink_guard).
  sink_actor guard;
};

/// Forwards one request's chunks and its first result to the sink, then quits, so that any later
/// result is dropped. A remote executor's result and its `done` can be cut apart by a lost
/// connection; the batcher then ends the request through the same guard, and the sink hears
/// exactly one end whichever arrived first.
sink_actor::behavior_type sink_guard(sink_actor::pointer self, sink_actor sink) {
  return {
      [=](token_chunk& chunk) { self->send(sink, std::move(chunk)); },
      [=](request_result& result) {
        self->send(sink, std::move(result));
        self->quit();
      },
  };
}

struct executor_entry {
  executor_actor handle;
  executor_report report;
  /// Its id in the ledger.
  uint64_t id = 0;
};

struct batcher_state {
  static inline const char* name = "batcher";

  batcher_settings settings;
  std::unique_ptr<pipeline::batching_policy> policy;
  std::unique_ptr<pipeline::waiting_queue> queue;
  pipeline::request_ledger<request_handles> ledger;
  std::unordered_map<caf::actor_addr, executor_entry> executors;
  /// Which executor holds a prompt's beginning in its prefix cache.
  pipeline::prefix_router router;
  tokenizer_actor tokenizers;
  metrics_actor metrics;
  request_id next_id = uint64_t{1} << 62;
  bool draining = false;
  std::string drain_message;
  uint64_t timer_generation = 0;
  stamp timer_at = 0;
  timing_batch pending_timings;
  /// The queue depth the metrics actor last heard.
  size_t reported_depth = 0;
};

using batcher_pointer = batcher_actor::stateful_pointer<batcher_state>;

void flush_timings(batcher_pointer self) {
  auto& st = self->state;
  if (st.pending_timings.empty()) return;
  self->send(st.metrics, std::move(st.pending_timings));
  st.pending_timings = timing_batch{};
}

/// Ends a request that no executor holds: the sink hears it, metrics count it.
void end_here(batcher_pointer self, request_id id, outcome how, ec code, std::string message,
              const request_times& times, int32_t prompt_tokens) {
  auto& st = self->state;
  auto* l = st.ledger.find(id);
  if (!l) return;
  auto result = make_failure(id, how, code, std::move(message), times, prompt_tokens);
  st.pending_timings.requests.push_back(timing_of(result));
  self->send(l->handles.guard ? l->handles.guard : l->handles.sink, std::move(result));
  st.ledger.close(id);
}

void arm_timer(batcher_pointer self);

/// Gives work to every executor the policy wants to feed now.
void dispatch(batcher_pointer self) {
  auto& st = self->state;
  const stamp now = now_stamp();
  // Deadlines first: expired requests never reach an executor.
  for (auto& req : st.queue->expire(now))
    end_here(self, req.id, outcome::expired, ec::expired,
             "deadline passed while waiting in the queue", req.times, int32_t(req.prompt.size()));
  // With several executors, the sequences each runs, with those sent and not yet received: what
  // prefix routing weighs (one executor takes everything, unweighed).
  const bool routed = st.executors.size() > 1;
  std::unordered_map<uint64_t, int32_t> loads;
  if (routed)
    for (auto& [addr, e] : st.executors)
      loads[e.id] = e.report.active + st.ledger.in_flight(e.id, e.report.received);
  for (auto& [addr, e] : st.executors) {
    if (st.queue->empty()) break;
    // Requests sent but not yet received count as taken.
    const int32_t in_flight = st.ledger.in_flight(e.id, e.report.received);
    pipeline::executor_view view{e.report.free_slots - in_flight, e.report.active + in_flight};
    if (view.free_slots <= 0) continue;
    // With several executors, a request goes where its prompt's beginning is cached, unless
    // that executor is much busier than this one.
    pipeline::request_filter eligible;
    if (routed)
      eligible = [&, executor = e.id](const sequence_request& r) {
        const auto preferred = st.router.preferred(r.prompt);
        std::optional<int32_t> preferred_load;
        if (preferred) {
          auto load = loads.find(*preferred);
          if (load != loads.end()) preferred_load = load->second;
        }
        return st.router.takes(executor, loads[executor], preferred, preferred_load);
      };
    auto picked = st.policy->select(*st.queue, view, now, eligible);
    if (routed) loads[e.id] += int32_t(picked.size());
    if (picked.empty()) continue;
    std::vector<work_item> items;
    items.reserve(picked.size());
    for (auto& req : picked) {
      auto* l = st.ledger.find(req.id);
      if (!l) continue;
      st.ledger.running(req.id, e.id, req);
      auto& h = l->handles;
      h.executor = e.handle;
      // A request queued again after a lost executor may still have its old guard.
      if (h.guard) caf::anon_send_exit(h.guard, caf::exit_reason::user_shutdown);
      h.guard = nullptr;
      sink_actor delivery = h.sink;
      if (e.handle.node() != self->node()) {
        h.guard = self->spawn(sink_guard, h.sink);
        delivery = h.guard;
      }
      // The deadline travels as what is left of it: the executor may run on another clock.
      const auto left = left_of(req.deadline, now);
      req.deadline = 0;
      items.push_back(work_item{std::move(req), delivery, left});
    }
    st.ledger.sent(e.id, items.size());
    self->send(e.handle, atom::work::value, std::move(items), st.policy->static_batches());
  }
  // The gauge only when it changed: dispatch runs for every request and every pull.
  if (st.queue->size() != st.reported_depth) {
    st.reported_depth = st.queue->size();
    self->send(st.metrics, atom::queue_depth::value, uint64_t{st.reported_depth});
  }
  flush_timings(self);
  arm_timer(self);
}

/// Wakes the batcher at the next deadline or partial-batch flush.
void arm_timer(batcher_pointer self) {
  auto& st = self->state;
  if (st.queue->empty()) return;
  const stamp now = now_stamp();
  stamp at = st.queue->earliest_deadline();
  const stamp retry = st.policy->retry_at(*st.queue, now);
  // A flush time already past was seen by the policy just now: the next pull brings it back.
  if (retry > now && (at == 0 || retry < at)) at = retry;
  if (at == 0 || (st.timer_at != 0 && st.timer_at <= at && st.timer_at > now)) return;
  st.timer_at = at;
  const auto delay = std::chrono::nanoseconds(std::max<stamp>(at - now, 0) + 100000);
  self->delayed_send(self, delay, atom::wakeup::value, ++st.timer_generation);
}

void enqueue(batcher_pointer self, sequence_request req) {
  auto& st = self->state;
  auto* l = st.ledger.find(req.id);
  if (!l) return;
  if (l->cancel_requested) {
    end_here(self, req.id, outcome::cancelled, ec::cancelled, "request cancelled", req.times,
             int32_t(req.prompt.size()));
    return;
  }
  if (st.draining) {
    end_here(self, req.id, outcome::rejected, ec::shutting_down, st.drain_message, req.times,
             int32_t(req.prompt.size()));
    return;
  }
  req.times.queued = now_stamp();
  const auto id = req.id;
  const auto times = req.times;
  const auto prompt_tokens = int32_t(req.prompt.size());
  if (auto full = st.queue->push(std::move(req))) {
    end_here(self, id, outcome::rejected, ec::rejected_queue_full, *full, times, prompt_tokens);
    flush_timings(self);
    return;
  }
  st.ledger.waiting(id);
  dispatch(self);
}

batcher_actor::behavior_type batcher(batcher_pointer self, batcher_settings settings,
                                     tokenizer_actor tokenizers, metrics_actor metrics) {
  auto& st = self->state;
  st.settings = settings;
  st.policy = pipeline::make_policy(settings.options);
  st.queue = std::make_unique<pipeline::waiting_queue>(settings.options.max_queued_requests,
                                                       settings.options.max_queued_tokens);
  st.tokenizers = std::move(tokenizers);
  st.metrics = std::move(metrics);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    auto it = st.executors.find(dm.source);
    if (it == st.executors.end()) return;
    const std::string name = it->second.report.name;
    const uint64_t executor = it->second.id;
    st.executors.erase(it);
    st.router.remove(executor);
    // stop_pipeline stops the executors and the batcher at once: an executor that goes first
    // was stopped, not lost.
    const bool stopped = dm.reason == caf::exit_reason::user_shutdown;
    if (stopped)
      spdlog::info("executor {} stopped", name);
    else
      spdlog::error("executor {} lost: {}", name, caf::to_string(dm.reason));
    // Its requests that streamed nothing run again from the start (their sinks heard nothing);
    // the others fail: their sinks heard part of an answer that cannot resume elsewhere unseen.
    auto plan = st.ledger.lose_executor(executor);
    auto ended_here = [&](request_id id) {
      request_times times;
      if (auto* l = st.ledger.find(id)) times.arrival = l->arrival;
      return times;
    };
    for (auto id : plan.cancelled)
      end_here(self, id, outcome::cancelled, ec::cancelled, "request cancelled", ended_here(id), 0);
    for (auto id : plan.failed)
      end_here(self, id, outcome::failed, ec::executor_lost,
               "executor " + name + " was lost after the request had started streaming",
               ended_here(id), 0);
    size_t requeued = 0;
    for (auto& req : plan.again) {
      if (auto* l = st.ledger.find(req.id)) l->handles.executor = nullptr;
      const auto id = req.id;
      const auto sent_times = req.times;
      const auto prompt_tokens = int32_t(req.prompt.size());
      if (auto full = st.queue->push(std::move(req))) {
        end_here(self, id, outcome::failed, ec::executor_lost,
                 "executor " + name + " was lost and the queue has no room to run it again",
                 sent_times, prompt_tokens);
        continue;
      }
      ++requeued;
    }
    const size_t lost = plan.cancelled.size() + plan.failed.size() + plan.again.size();
    // A stopped executor that ran nothing needs no second line (a clean shutdown logs no error).
    if (!stopped || lost > 0)
      spdlog::log(stopped ? spdlog::level::warn : spdlog::level::err,
                  "executor {} {} ({}): {} running request(s) queued again, {} failed", name,
                  stopped ? "stopped" : "lost", caf::to_string(dm.reason), requeued,
                  lost - requeued);
    dispatch(self);
  });
  return {
      [=](atom::generate, generate_request& req, sink_actor& sink) -> request_id {
        auto& st = self->state;
        if (req.id == 0) req.id = st.next_id++;
        if (req.arrival == 0) req.arrival = now_stamp();
        const auto id = req.id;
        request_times times;
        times.arrival = req.arrival;
        if (!st.ledger.open(id, req.arrival, request_handles{sink, {}, {}})) {
          self->send(
              sink, make_failure(id, outcome::rejected, ec::bad_request,
                                 "request id " + std::to_string(id) + " is already in use", times));
          return id;
        }
        auto reject = [&](ec code, std::string message) {
          end_here(self, id, outcome::rejected, code, std::move(message), times, 0);
          flush_timings(self);
          return id;
        };
        if (st.draining) return reject(ec::shutting_down, st.drain_message);
        if (auto problem = pipeline::check_request(req.params, req.timeout_s))
          return reject(ec::bad_request, std::move(*problem));
        const double timeout = req.timeout_s > 0 ? req.timeout_s : st.settings.default_timeout_s;
        const stamp deadline = timeout > 0 ? req.arrival + stamp(timeout * 1e9) : 0;
        self->request(st.tokenizers, caf::infinite, atom::encode::value, std::move(req))
            .then(
                [=](sequence_request& seq) {
                  seq.deadline = deadline;
                  enqueue(self, std::move(seq));
                },
                [=](caf::error& caf_err) {
                  const auto err = from_caf_error(caf_err);
                  const auto code = code_of(err);
                  end_here(self, id, code == ec::internal ? outcome::failed : outcome::rejected,
                           code == ec::internal ? ec::internal : code, message_of(err), times, 0);
                  flush_timings(self);
                });
        return id;
      },
      [=](atom::cancel, request_id id) {
        auto& st = self->state;
        auto* l = st.ledger.find(id);
        if (!l) return;
        switch (l->stage) {
          case request_stage::tokenizing:
            l->cancel_requested = true;
            break;
          case request_stage::waiting:
            if (auto req = st.queue->remove(id)) {
              end_here(self, id, outcome::cancelled, ec::cancelled, "request cancelled", req->times,
                       int32_t(req->prompt.size()));
              flush_timings(self);
            }
            break;
          case request_stage::running:
            l->cancel_requested = true;
            self->send(l->handles.executor, atom::cancel::value, id);
            break;
        }
      },
      [=](atom::status) {
        auto& st = self->state;
        pipeline_status s;
        const auto counts = st.ledger.counts();
        s.tokenizing = counts.tokenizing;
        s.waiting = counts.waiting;
        s.running = counts.running;
        s.executors = st.executors.size();
        s.draining = st.draining;
        return s;
      },
      [=](atom::prometheus p) { return self->delegate(self->state.metrics, p); },
      [=](atom::snapshot s) { return self->delegate(self->state.metrics, s); },
      [=](atom::drain, std::string& message) {
        auto& st = self->state;
        st.draining = true;
        st.drain_message = message;
        for (auto& req : st.queue->drain())
          end_here(self, req.id, outcome::rejected, ec::shutting_down, message, req.times,
                   int32_t(req.prompt.size()));
        flush_timings(self);
      },
      [=](atom::pull, executor_actor& exec, executor_report& report) {
        auto& st = self->state;
        auto [it, fresh] = st.executors.try_emplace(exec.address());
        if (fresh) {
          it->second.handle = exec;
          it->second.id = st.ledger.add_executor();
          st.router.add(it->second.id);
          self->monitor(exec);
          spdlog::info("executor {} ready", report.name);
        }
        it->second.report = std::move(report);
        dispatch(self);
      },
      [=](atom::done, request_id id, outcome) { self->state.ledger.close(id); },
      [=](atom::started, request_id id) { self->state.ledger.started(id); },
      [=](atom::wakeup, uint64_t generation) {
        auto& st = self->state;
        if (generation != st.timer_generation) return;
        st.timer_at = 0;
        dispatch(self);
      },
  };
}

}  // namespace

batcher_actor spawn_batcher(caf::actor_system& system, batcher_settings settings,
                            tokenizer_actor tokenizers, metrics_actor metrics) {
  return system.spawn(batcher, std::move(settings), std::move(tokenizers), std::move(metrics));
}

}  // namespace conveyor
