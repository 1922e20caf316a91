// Device discovery through libtorch.
#include "gpu/devices.hpp"

#include <torch/cuda.h>

#if defined(CONVEYOR_WITH_CUDA)
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#endif

namespace conveyor::gpu {

bool built_with_cuda() {
#if defined(CONVEYOR_WITH_CUDA)
  return true;
#else
  return false;
#endif
}

size_t visible_gpus() {
  // Both are false/0 on a CPU libtorch; on a CUDA one without a driver they are too.
  if (!torch::cuda::is_available()) return 0;
  return torch::cuda::device_count();
}

std::string describe_devices() {
  const size_t n = visible_gpus();
  if (n == 0)
    return built_with_cuda() ? "no CUDA device visible" : "no CUDA device (CPU build of libtorch)";
  std::string out = std::to_string(n) + " CUDA device(s)";
#if defined(CONVEYOR_WITH_CUDA)
  for (size_t i = 0; i < n; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, int(i)) != cudaSuccess) continue;
    out += (i == 0 ? ": " : ", ");
    out += "cuda:" + std::to_string(i) + " " + prop.name + " (" +
           std::to_string(prop.totalGlobalMem >> 30) + " GiB)";
  }
#endif
  return out;
}

}  // namespace conveyor::gpu
