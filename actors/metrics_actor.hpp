// The metrics actor: timing events in, Prometheus text, JSON and log lines out.
#pragma once

#include <caf/fwd.hpp>

#include "pipeline/actors.hpp"

namespace conveyor {

/// Spawns the metrics actor; it logs a summary line every `interval_s` seconds (0: never).
metrics_actor spawn_metrics(caf::actor_system& system, double interval_s);

}  // namespace conveyor
