// The embedding API: spawn the whole pipeline in any CAF actor system.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "common/error.hpp"
#include "config/config.hpp"
#include "pipeline/actors.hpp"

namespace conveyor::gpu {
class device_provider;
}  // namespace conveyor::gpu

namespace conveyor::tokenizers {
class tokenizer;
}  // namespace conveyor::tokenizers

namespace conveyor {

/// What an embedder (or a test) may change about how executors are placed. The defaults are what
/// `conveyor serve` and `conveyor worker` use.
struct spawn_options {
  /// The CUDA devices to place executors on and resolve `executors = "auto"` against; nullptr
  /// asks libtorch and the CUDA runtime (gpu::system_devices()). Must outlive the spawn call.
  const gpu::device_provider* devices = nullptr;
  /// Maps an executor's configured device ("cuda:1") to the device its model is loaded on;
  /// empty loads it on the configured device. Names, logs and metrics keep the configured device.
  /// Tests map every device to "cpu" to run a faked device list without CUDA.
  std::function<std::string(const std::string& device)> device_map;
  /// False leaves spawn_pipeline's local executors unattached: they take no work until the
  /// embedder sends each `(attach, batcher_ref{front})`. Tests use it to fill the waiting queue
  /// before any executor can take from it.
  bool attach_executors = true;
};

/// A running pipeline: the typed handle to talk to, and what it is made of.
struct pipeline_handle {
  /// Send `generate` and `cancel` here.
  pipeline_actor front;
  metrics_actor metrics;
  std::vector<executor_actor> executors;
  /// The pool of tokenizer workers.
  tokenizer_actor tokenizers;
  /// One connector per `cluster.remote` worker (see remote_connector.hpp).
  std::vector<connector_actor> connectors;
  /// The served model's name ("stories260K").
  std::string model_name;
  /// Tokens per sequence (prompt plus generated), the smallest over the executors.
  int32_t context = 0;
  /// The tokenizer the pipeline's tokenizer workers use: immutable, safe from any thread
  /// (the HTTP server's /tokenize and /detokenize call it directly).
  std::shared_ptr<const tokenizers::tokenizer> tokenizer;
};

/// The tokenizer file of `cfg`: `model.tokenizer` when set, else the one that goes with the
/// model (model::default_tokenizer_for), resolved like the model (model::resolve_path).
std::string tokenizer_file(const config::pipeline& cfg);

/// Loads the model on every executor of `cfg`, spawns tokenizers, batcher, executors and metrics,
/// and wires them; with `cluster.remote`, also one connector per worker (the actor system must
/// load the middleman and register `add_message_types`). Before loading anything it checks the
/// placement (gpu::check_placement): errors (a bad model file, a device that is not visible, a
/// device or host whose memory is too small) name the problem.
expected<pipeline_handle> spawn_pipeline(caf::actor_system& system, const config::pipeline& cfg,
                                         const spawn_options& options = {});

/// The local executors of a configuration, spawned and not yet attached to any batcher.
struct executor_group {
  std::vector<executor_actor> executors;
  /// Tokens per sequence, the smallest over the executors.
  int32_t context = 0;
  /// The served model's name.
  std::string model_name;
};

/// Loads the model once per executor of `cfg` (`executors = "auto"`: one per device of
/// `options.devices`, else one CPU executor) and spawns them unattached: each pulls once it hears
/// `(attach, batcher)`. Their names are `name_prefix` + device + ":" + position ("cuda:1:1", or
/// "host:port/cpu:0" on a worker). What serve and `conveyor worker` share.
expected<executor_group> spawn_executors(caf::actor_system& system, const config::pipeline& cfg,
                                         metrics_actor metrics, const std::string& name_prefix,
                                         const spawn_options& options = {});

/// Stops every actor of the pipeline (running requests end as failed: "pipeline stopped").
void stop_pipeline(const pipeline_handle& handle);

}  // namespace conveyor
