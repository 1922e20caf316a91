// The server's side of scale-out: one actor per `conveyor worker` that keeps its executors
// attached to the batcher, reconnecting with back-off whenever the worker is refused or lost.
#pragma once

#include <string>

#include <caf/fwd.hpp>

#include "pipeline/actors.hpp"

namespace conveyor {

/// Back-off of the reconnect loop: the first retry after `initial_s`, doubling up to `max_s`.
struct reconnect_backoff {
  double initial_s = 0.5;
  double max_s = 10.0;
};


/// Spawns the connector of the worker at `address` ("host:port"). It connects, sends the worker
/// `(attach, batcher)` so that the worker's executors pull from `batcher`, monitors the worker and
/// starts over when it is lost. Every refusal or loss is logged once per attempt. Needs the
/// middleman (`cfg.load<caf::io::middleman>()`) and `add_message_types`. Detached: connecting
/// blocks. Stop it with an exit message.
connector_actor spawn_remote_connector(caf::actor_system& system, std::string address,
                                  batcher_actor batcher, reconnect_backoff backoff = {});

}  // namespace conveyor
