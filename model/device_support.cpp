// The CUDA-only pieces of the torch-operation network; plain fallbacks elsewhere.
#include "model/device_support.hpp"

#include <ATen/ATen.h>

#if defined(CONVEYOR_WITH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#if defined(CONVEYOR_CUDA_GRAPHS)
#include <ATen/cuda/CUDAGraph.h>
#endif
#endif

namespace conveyor::model {

c10::Device parse_device(const std::string& name) {
  c10::Device device{name};
  if (device.is_cuda() && !device.has_index()) device.set_index(0);
  return device;
}

std::string device_unavailable(const c10::Device& device) {
  if (device.is_cpu()) return "";
  if (!device.is_cuda()) return "only \"cpu\" and CUDA devices are supported";
#if defined(CONVEYOR_WITH_CUDA)
  const int visible = at::hasCUDA() ? int(at::getNumGPUs()) : 0;
  if (device.index() < visible) return "";
  return std::to_string(visible) + " CUDA device(s) visible";
#else
  return "this libtorch build has no CUDA";
#endif
}

at::Tensor host_staging_like(const at::Tensor& like, c10::ScalarType type,
                             const c10::Device& device) {
  auto options = at::TensorOptions().dtype(type).device(c10::kCPU);
  if (device.is_cuda()) options = options.pinned_memory(true);
  return at::empty(like.sizes(), options);
}

void synchronize(const c10::Device& device) {
#if defined(CONVEYOR_WITH_CUDA)
  if (device.is_cuda()) at::cuda::getCurrentCUDAStream(device.index()).synchronize();
#else
  (void)device;
#endif
}

int64_t device_memory_allocated(const c10::Device& device) {
#if defined(CONVEYOR_WITH_CUDA)
  if (device.is_cuda()) {
    // The caching allocator knows a device only once CUDA is initialized ("Invalid device
    // argument ... did you call init?" before): a first allocation on it does that.
    (void)at::empty({1}, at::TensorOptions().device(device));
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return stats.allocated_bytes[size_t(c10::CachingAllocator::StatType::AGGREGATE)].current;
  }
#else
  (void)device;
#endif
  return -1;
}

void release_cached_memory(const c10::Device& device) {
#if defined(CONVEYOR_WITH_CUDA)
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#else
  (void)device;
#endif
}

bool cuda_graphs_built() {
#if defined(CONVEYOR_WITH_CUDA) && defined(CONVEYOR_CUDA_GRAPHS)
  return true;
#else
  return false;
#endif
}

#if defined(CONVEYOR_WITH_CUDA) && defined(CONVEYOR_CUDA_GRAPHS)
struct step_graphs::graphs {
  std::map<int64_t, std::unique_ptr<at::cuda::CUDAGraph>> by_bucket;
};
#else
struct step_graphs::graphs {
  std::map<int64_t, int> by_bucket;
};
#endif

step_graphs::step_graphs(const c10::Device& device, bool enabled)
    : device_(device),
      active_(enabled && device.is_cuda() && cuda_graphs_built()),
      graphs_(std::make_unique<graphs>()) {}

step_graphs::~step_graphs() = default;

size_t step_graphs::captured() const {
  return graphs_->by_bucket.size();
}

void step_graphs::run(int64_t bucket, const std::function<void()>& step) {
  if (!active_) return step();
#if defined(CONVEYOR_WITH_CUDA) && defined(CONVEYOR_CUDA_GRAPHS)
  c10::cuda::CUDAGuard device_guard{device_};
  auto& graph = graphs_->by_bucket[bucket];
  if (graph) return graph->replay();
  // Capture on a side stream that first waits for the work queued so far (an event recorded on
  // one stream and blocked on by the other), warming up there (cuBLAS handles, the allocator);
  // the warm-up run computes this step. The current stream then waits for the side stream.
  const auto current = at::cuda::getCurrentCUDAStream(device_.index());
  auto side = at::cuda::getStreamFromPool(false, device_.index());
  at::cuda::CUDAEvent inputs_ready;
  inputs_ready.record(current);
  inputs_ready.block(side);
  {
    c10::cuda::CUDAStreamGuard stream_guard{side};
    step();
    graph = std::make_unique<at::cuda::CUDAGraph>();
    graph->capture_begin();
    step();
    graph->capture_end();
  }
  at::cuda::CUDAEvent step_done;
  step_done.record(side);
  step_done.block(current);
#else
  (void)bucket;
#endif
}

}  // namespace conveyor::model
