// The actor that `conveyor worker` publishes: it lets a server's batcher feed this worker's
// executors.
#pragma once

#include <vector>

#include <caf/fwd.hpp>

#include "pipeline/actors.hpp"

namespace conveyor {

/// Spawns the worker front of `executors`: `(attach, batcher)` makes each of them pull from that
/// batcher (a later attach, e.g. from a restarted server, replaces the earlier one) and replies
/// with their number. Publish it with `system.middleman().publish(...)`.
worker_actor spawn_worker_front(caf::actor_system& system, std::vector<executor_actor> executors);

}  // namespace conveyor
