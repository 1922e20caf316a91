#include "actors/metrics_actor.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include "pipeline/metrics.hpp"
#include "pipeline/metrics_json.hpp"
#include "pipeline/metrics_log.hpp"
#include "pipeline/metrics_prometheus.hpp"

namespace conveyor {

namespace {

struct metrics_state {
  static inline const char* name = "metrics";
  pipeline::metrics_registry registry;
  double interval_s = 0;
};

metrics_actor::behavior_type metrics(metrics_actor::stateful_pointer<metrics_state> self,
                                     double interval_s) {
  self->state.interval_s = interval_s;
  if (interval_s > 0)
    self->delayed_send(self, std::chrono::milliseconds(int64_t(interval_s * 1000)),
                       atom::summary::value);
  return {
      [=](timing_batch& batch) {
        auto& r = self->state.registry;
        for (auto& s : batch.started) r.record(s);
        for (auto& t : batch.requests) r.record(t);
        for (auto& t : batch.steps) r.record(t);
      },
      [=](atom::queue_depth, uint64_t requests) {
        self->state.registry.set_queue_depth(size_t(requests));
      },
      [=](atom::running, const std::string& executor, uint64_t sequences) {
        self->state.registry.set_running_sequences(executor, size_t(sequences));
      },
      [=](atom::prometheus) { return pipeline::prometheus_text(self->state.registry); },
      [=](atom::snapshot) { return pipeline::json_snapshot(self->state.registry); },
      [=](atom::summary) {
        spdlog::info("{}", pipeline::summary_line(self->state.registry));
        const double interval = self->state.interval_s;
        if (interval > 0)
          self->delayed_send(self, std::chrono::milliseconds(int64_t(interval * 1000)),
                             atom::summary::value);
      },
  };
}

}  // namespace

metrics_actor spawn_metrics(caf::actor_system& system, double interval_s) {
  return system.spawn(metrics, interval_s);
}

}  // namespace conveyor
