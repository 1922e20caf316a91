// The executor actor: steps are messages it sends itself, so that new work, cancellations and
// deadlines are handled between steps and an idle executor sleeps in its mailbox.
#include "actors/executor_actor.hpp"

#include <unordered_map>

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

namespace conveyor {

namespace {

struct executor_state {
  static inline const char* name = "executor";
  std::shared_ptr<pipeline::executor_core> core;
  batcher_actor batcher;
  metrics_actor metrics;
  /// Where each running request's output goes, and whether it has streamed anything yet.
  struct running_request {
    sink_actor sink;
    bool started = false;
  };
  std::unordered_map<request_id, running_request> sinks;
  bool step_scheduled = false;
  bool draining = false;
  uint64_t received = 0;
  // What the batcher was last told, to tell it again only when something changed.
  int32_t reported_free = -1;
  int32_t reported_active = -1;
  timing_batch timings;
  stamp last_flush = 0;
};

using executor_pointer = executor_actor::stateful_pointer<executor_state>;

void flush_timings(executor_pointer self, bool force) {
  auto& st = self->state;
  if (st.timings.empty()) return;
  const stamp now = now_stamp();
  // Batches of events, not one message per token: at most every 50 ms unless forced.
  if (!force && now - st.last_flush < 50'000'000 && st.timings.requests.size() < 64) return;
  st.last_flush = now;
  self->send(st.metrics, std::move(st.timings));
  st.timings = timing_batch{};
}

void deliver(executor_pointer self, pipeline::step_output& out) {
  auto& st = self->state;
  for (auto& chunk : out.chunks) {
    auto it = st.sinks.find(chunk.id);
    if (it == st.sinks.end()) continue;
    // The batcher hears `started` before the sink hears the first chunk (same sender, and over
    // the network the same connection), so a request it re-queues has streamed nothing.
    if (!it->second.started) {
      it->second.started = true;
      if (st.batcher) self->send(st.batcher, atom::started::value, chunk.id);
    }
    self->send(it->second.sink, std::move(chunk));
  }
  for (auto& result : out.results) {
    auto it = st.sinks.find(result.id);
    if (it == st.sinks.end()) continue;
    const auto id = result.id;
    const auto how = result.how;
    self->send(it->second.sink, std::move(result));
    if (st.batcher) self->send(st.batcher, atom::done::value, id, how);
    st.sinks.erase(it);
  }
  for (auto& t : out.request_timings) st.timings.requests.push_back(std::move(t));
  for (auto& t : out.step_timings) st.timings.steps.push_back(std::move(t));
  flush_timings(self, !out.results.empty() && !st.core->has_work());
}

void report(executor_pointer self) {
  auto& st = self->state;
  if (st.draining || !st.batcher) return;
  const int32_t free = st.core->free_slots();
  const int32_t active = st.core->active();
  if (free == st.reported_free && active == st.reported_active) return;
  st.reported_free = free;
  st.reported_active = active;
  self->send(st.batcher, atom::pull::value, executor_actor{self},
             executor_report{free, active, st.received, st.core->name()});
  self->send(st.metrics, atom::running::value, st.core->name(), uint64_t(active));
}

/// Ends every running request (their sinks hear `message`) and forgets the batcher's bookkeeping.
/// A lost batcher hears nothing (what it gave this executor is its to re-queue or fail, and its
/// sinks are gone with it); a batcher left for another hears `done` as usual.
void abandon_all(executor_pointer self, const std::string& message, bool batcher_lost) {
  auto& st = self->state;
  pipeline::step_output out;
  st.core->abort_all(outcome::failed, ec::executor_lost, message, out);
  if (batcher_lost) st.batcher = nullptr;
  deliver(self, out);
  st.received = 0;
  st.reported_free = -1;
  st.reported_active = -1;
}

void schedule_step(executor_pointer self) {
  auto& st = self->state;
  if (st.step_scheduled || !st.core->has_work()) return;
  st.step_scheduled = true;
  self->send(self, atom::step::value);
}

executor_actor::behavior_type executor(executor_pointer self,
                                       std::shared_ptr<pipeline::executor_core> core,
                                       int32_t threads, batcher_actor batcher,
                                       metrics_actor metrics) {
  auto& st = self->state;
  st.core = std::move(core);
  st.batcher = std::move(batcher);
  st.metrics = std::move(metrics);
  if (threads > 0) model::set_compute_threads(threads);
  st.timings.started.push_back(pipeline::executor_started{
      st.core->name(), pipeline::timing_clock::now(), st.core->device()});
  flush_timings(self, true);
  if (st.batcher) self->monitor(st.batcher);
  report(self);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    if (!st.batcher || dm.source != st.batcher.address()) return;
    spdlog::warn(
        "executor {}: batcher lost ({}); ending {} running request(s), waiting for an "
        "attach",
        st.core->name(), caf::to_string(dm.reason), st.sinks.size());
    abandon_all(self, "the batcher was lost", true);
  });
  return {
      [=](atom::work, std::vector<work_item>& items, bool static_batch) {
        auto& st = self->state;
        st.received += items.size();
        std::vector<sequence_request> requests;
        requests.reserve(items.size());
        const stamp now = st.core->now();
        for (auto& item : items) {
          st.sinks[item.request.id] = executor_state::running_request{std::move(item.sink), false};
          requests.push_back(std::move(item.request));
          // Rebuilt on this executor's clock from what was left when the batcher sent it.
          requests.back().deadline = deadline_from(item.deadline, now);
        }
        pipeline::step_output out;
        st.core->admit(std::move(requests), static_batch, out);
        deliver(self, out);
        schedule_step(self);
        report(self);
      },
      [=](atom::cancel, request_id id) {
        if (self->state.core->cancel(id)) schedule_step(self);
      },
      [=](atom::step) {
        auto& st = self->state;
        st.step_scheduled = false;
        auto out = st.core->step();
        if (!out.failure.empty())
          spdlog::error("executor {}: step failed: {}", st.core->name(), out.failure);
        deliver(self, out);
        if (!st.core->has_work() && spdlog::should_log(spdlog::level::debug)) {
          // Going idle: what its steps were found to cost (pipeline/step_cost_model.hpp).
          const auto& c = st.core->step_costs().fitted();
          spdlog::debug(
              "executor {}: step costs {:.3f} ms + {:.3f} ms/decode row + {:.4f} ms/prompt token + "
              "{:.4f} ms/1000 attended positions ({} steps)",
              st.core->name(), c.fixed_ms, c.per_row_ms, c.per_token_ms, c.per_kilo_attended_ms,
              st.core->step_costs().samples());
        }
        schedule_step(self);
        report(self);
      },
      [=](atom::drain, std::string& message) {
        auto& st = self->state;
        st.draining = true;
        pipeline::step_output out;
        st.core->abort_all(outcome::failed, ec::shutting_down, message, out);
        deliver(self, out);
        flush_timings(self, true);
      },
      [=](atom::attach, batcher_ref& batcher) {
        auto& st = self->state;
        auto next = std::move(batcher.handle);
        if (st.batcher == next) return;
        if (st.batcher) {
          self->demonitor(st.batcher.address());
          abandon_all(self, "the executor moved to another batcher", false);
        }
        spdlog::info("executor {}: attached to batcher {}", st.core->name(),
                     caf::to_string(next.address()));
        st.batcher = std::move(next);
        st.draining = false;
        self->monitor(st.batcher);
        report(self);
      },
  };
}

}  // namespace

executor_actor spawn_executor(caf::actor_system& system,
                              std::unique_ptr<pipeline::executor_core> core, int32_t threads,
                              batcher_actor batcher, metrics_actor metrics) {
  std::shared_ptr<pipeline::executor_core> shared{std::move(core)};
  return system.spawn<caf::detached>(executor, std::move(shared), threads, std::move(batcher),
                                     std::move(metrics));
}

}  // namespace conveyor
