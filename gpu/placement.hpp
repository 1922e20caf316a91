// Placement of executors on CUDA devices: every configured device must be visible, and the
// executors on each device must fit in its free memory. Plain functions, torch-free, testable
// with a faked device list.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "config/config.hpp"
#include "gpu/devices.hpp"
#include "model/causal_lm.hpp"

namespace conveyor::gpu {

// -- model sizes ---------------------------------------------------------------------------------

/// The served model as placement sees it: its shape and the number format executors compute in.
struct model_sizes {
  model::llama_shape shape;
  model::compute_dtype dtype = model::compute_dtype::f32;
  /// The KV cache of each executor (`kv_cache.memory_mb`) in MiB; 0: what its slots x context
  /// take.
  int64_t kv_cache_mb = 0;
};

/// The fixed part of the workspace margin of each executor on a GPU: the CUDA context, cuBLAS's
/// workspace and the caching allocator's slack (512 MiB).
inline constexpr int64_t cuda_context_margin_bytes = int64_t{512} << 20;

/// Bytes of the weights: parameters (llama_shape::parameter_count) x bytes per element.
int64_t weight_bytes(const model_sizes& m);

/// Bytes of one executor's KV cache: `kv_cache_mb` when set, else slots x context
/// (model::kv_cache_bytes; `context` 0 means the model's seq_len).
int64_t kv_cache_bytes(const model_sizes& m, int64_t slots, int64_t context);

/// Bytes of one executor's workspace on a GPU: `cuda_context_margin_bytes` plus the buffers of one
/// forward pass (activations and logits of max(max_batched_tokens, slots, context) tokens, and the
/// decode step's gathered blocks, keys, values and scores of every slot).
int64_t workspace_bytes(const model_sizes& m, const config::executor& e);

// -- placement -----------------------------------------------------------------------------------

/// What the executors placed on one CUDA device need there.
struct device_demand {
  /// The device.
  device_info device;
  /// Positions in the executor list of the executors on it, ascending.
  std::vector<size_t> executors;
  /// Sum over its executors: each holds its own copy of the weights.
  int64_t weight_bytes = 0;
  /// Sum over its executors.
  int64_t kv_cache_bytes = 0;
  /// Sum over its executors.
  int64_t workspace_bytes = 0;

  /// Everything together.
  int64_t total_bytes() const { return weight_bytes + kv_cache_bytes + workspace_bytes; }
};

/// One line for logs and errors: "cuda:1 (NVIDIA H200): needs 3.2 GiB (weights 2.0 GiB + KV cache
/// 1.2 GiB + workspace 1.0 GiB for 2 executors), 130.0 GiB free".
std::string describe(const device_demand& d);

/// Checks where `executors` run before any model is loaded: each "cuda" / "cuda:N" device must be
/// in `devices` (the visible ones, `devices[i].index == i`), and per device the weights, KV caches
/// and workspaces of all its executors together must fit in its free memory. "cpu" executors are
/// not checked here. Returns the demand on each used CUDA device in index order, or an
/// `ec::bad_config` error with every problem on its own line, e.g.
///
///     executors[0]: device cuda:0 is not available: no CUDA device visible
///     executors[3]: device cuda:4 is not available: 2 CUDA device(s) visible (cuda:0 to cuda:1)
///     cuda:1 (NVIDIA H200): needs 3.2 GiB (weights ... for 2 executors), 1.0 GiB free
///
/// `none_visible_reason` says why `devices` is empty (device_provider::none_visible_reason).
expected<std::vector<device_demand>> check_placement(const std::vector<config::executor>& executors,
                                                     const std::vector<device_info>& devices,
                                                     std::string_view none_visible_reason,
                                                     const model_sizes& model);

/// `check_placement` against the devices `provider` lists now.
expected<std::vector<device_demand>> check_placement(const std::vector<config::executor>& executors,
                                                     const device_provider& provider,
                                                     const model_sizes& model);

}  // namespace conveyor::gpu
