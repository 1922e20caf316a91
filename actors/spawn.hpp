// The embedding API: spawn the whole pipeline in any CAF actor system.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "common/error.hpp"
#include "config/config.hpp"
#include "pipeline/actors.hpp"

namespace conveyor {

/// A running pipeline: the typed handle to talk to, and what it is made of.
struct pipeline_handle {
  /// Send `generate` and `cancel` here.
  pipeline_actor front;
  metrics_actor metrics;
  std::vector<executor_actor> executors;
  /// The pool of tokenizer workers.
  caf::actor tokenizers;
  /// The served model's name ("stories260K").
  std::string model_name;
  /// Tokens per sequence (prompt plus generated), the smallest over the executors.
  int32_t context = 0;
};

/// Loads the model on every executor of `cfg`, spawns tokenizers, batcher, executors and metrics,
/// and wires them. Errors (a bad model file, a KV cache that does not fit) name the problem.
expected<pipeline_handle> spawn_pipeline(caf::actor_system& system, const config::pipeline& cfg);

/// Stops every actor of the pipeline (running requests end as failed: "pipeline stopped").
void stop_pipeline(const pipeline_handle& handle);

}  // namespace conveyor
