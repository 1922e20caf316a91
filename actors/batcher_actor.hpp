// The batcher: the pipeline's front, its waiting queue and the batching policy.
#pragma once

#include <caf/fwd.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "pipeline/actors.hpp"
#include "pipeline/batching.hpp"

namespace conveyor {

/// What the batcher is told at start.
struct batcher_settings {
  pipeline::batcher_options options;
  /// Seconds until a request expires when it names no timeout (0: never).
  double default_timeout_s = 0;
};

/// Spawns the batcher. `tokenizers` encodes prompts; `metrics` hears timings of requests that
/// end before an executor takes them.
batcher_actor spawn_batcher(caf::actor_system& system, batcher_settings settings,
                            tokenizer_actor tokenizers, metrics_actor metrics);

}  // namespace conveyor
