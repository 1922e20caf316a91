// What the torch-operation network needs that exists on CUDA alone: pinned staging memory,
// waiting for a device, and CUDA graphs of the decode step. Every CUDA call of model/ is behind
// CONVEYOR_WITH_CUDA in device_support.cpp; on other builds and devices these do the plain
// thing (plain memory, nothing to wait for, the step run eagerly). Internal to model/.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace conveyor::model {

/// "cpu", "cuda" (the first GPU) or "cuda:N" as a torch device; "cuda" gets index 0.
c10::Device parse_device(const std::string& name);

/// Why `device` cannot be used in this process ("" when it can), e.g. "this libtorch build has
/// no CUDA" or "2 CUDA device(s) visible".
std::string device_unavailable(const c10::Device& device);

/// An empty host tensor of the shape of `like` and of `type` for staging the inputs and outputs
/// of `device`: pinned (page-locked) memory for a GPU, so that copies can run asynchronously.
at::Tensor host_staging_like(const at::Tensor& like, c10::ScalarType type,
                             const c10::Device& device);

/// Waits until `device` finished the work queued on its current stream (no-op on the CPU).
void synchronize(const c10::Device& device);

/// Bytes that torch's allocator holds for live tensors on `device`; -1 on the CPU (not tracked).
int64_t device_memory_allocated(const c10::Device& device);

/// Returns the memory torch's allocator keeps cached on `device` to the driver (no-op on the CPU).
void release_cached_memory(const c10::Device& device);

/// True when this build captures CUDA graphs (CONVEYOR_WITH_CUDA and CONVEYOR_CUDA_GRAPHS).
bool cuda_graphs_built();

/// The decode step of each batch-size bucket captured once as a CUDA graph and then replayed.
/// On the CPU, or in a build without CUDA graphs, `run` simply calls the step.
class step_graphs {
 public:
  /// Graphs on `device` when it is a GPU and `enabled`.
  step_graphs(const c10::Device& device, bool enabled);
  ~step_graphs();
  step_graphs(const step_graphs&) = delete;
  step_graphs& operator=(const step_graphs&) = delete;

  /// True when `run` captures and replays graphs.
  bool active() const { return active_; }

  /// Runs `step` for `bucket`: the first time eagerly (warming up) and captured as a graph, then
  /// by replaying that graph. `step` must read its inputs from the same device memory every time.
  void run(int64_t bucket, const std::function<void()>& step);

  /// Number of graphs captured so far.
  size_t captured() const;

 private:
  struct graphs;
  c10::Device device_;
  bool active_ = false;
  std::unique_ptr<graphs> graphs_;
};

}  // namespace conveyor::model
