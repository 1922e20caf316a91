// The executor actor: one per device, on its own thread, around an executor_core.
#pragma once

#include <memory>

#include <caf/fwd.hpp>

#include "pipeline/actors.hpp"
#include "pipeline/executor_core.hpp"

namespace conveyor {

/// Spawns a detached executor that pulls work from `batcher` and reports to `metrics`.
/// `threads` > 0 sets torch's intra-op threads on its thread.
executor_actor spawn_executor(caf::actor_system& system,
                              std::unique_ptr<pipeline::executor_core> core, int32_t threads,
                              batcher_actor batcher, metrics_actor metrics);

}  // namespace conveyor
