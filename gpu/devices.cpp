// Device discovery through libtorch and the CUDA runtime, and the listed devices of tests.
#include "gpu/devices.hpp"

#include <cstdio>

#include <torch/cuda.h>

#if defined(CONVEYOR_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace conveyor::gpu {

namespace {

/// The libtorch-backed provider.
class torch_devices final : public device_provider {
 public:
  std::vector<device_info> devices() const override {
    std::vector<device_info> out;
    const size_t n = visible_gpus();
#if defined(CONVEYOR_WITH_CUDA)
    int previous = 0;
    const bool restore = cudaGetDevice(&previous) == cudaSuccess;
    for (size_t i = 0; i < n; ++i) {
      device_info d;
      d.index = int32_t(i);
      cudaDeviceProp prop{};
      if (cudaGetDeviceProperties(&prop, int(i)) == cudaSuccess) {
        d.name = prop.name;
        d.total_bytes = int64_t(prop.totalGlobalMem);
      }
      // cudaMemGetInfo answers for the current device (creating its primary context, which the
      // executor on that device uses later anyway).
      size_t free = 0, total = 0;
      if (cudaSetDevice(int(i)) == cudaSuccess && cudaMemGetInfo(&free, &total) == cudaSuccess) {
        d.free_bytes = int64_t(free);
        d.total_bytes = int64_t(total);
      }
      if (d.name.empty()) d.name = "CUDA device";
      out.push_back(std::move(d));
    }
    if (restore) cudaSetDevice(previous);
#else
    (void)n;  // a CPU libtorch sees no CUDA device
#endif
    return out;
  }

  std::string none_visible_reason() const override {
    return built_with_cuda()
               ? "no CUDA device visible"
               : "this build's libtorch has no CUDA (the CUDA build: scripts/setup.sh --cuda)";
  }
};

}  // namespace

std::string device_name(int32_t index) {
  return "cuda:" + std::to_string(index);
}

int32_t cuda_index(const std::string& device) {
  if (device == "cuda") return 0;
  if (device.rfind("cuda:", 0) != 0 || device.size() == 5 || device.size() > 9) return -1;
  int32_t n = 0;
  for (size_t i = 5; i < device.size(); ++i) {
    if (device[i] < '0' || device[i] > '9') return -1;
    n = n * 10 + (device[i] - '0');
  }
  return n;
}

std::string human_bytes(int64_t bytes) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double x = double(bytes);
  size_t unit = 0;
  while (x >= 1024 && unit + 1 < std::size(units)) {
    x /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", x, units[unit]);
  return buf;
}

const device_provider& system_devices() {
  static const torch_devices instance;
  return instance;
}

listed_devices::listed_devices(std::vector<device_info> devices, std::string none_visible_reason)
    : devices_(std::move(devices)), reason_(std::move(none_visible_reason)) {
  for (size_t i = 0; i < devices_.size(); ++i) devices_[i].index = int32_t(i);
}

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

std::string describe_devices(const device_provider& provider) {
  const auto devices = provider.devices();
  if (devices.empty()) return provider.none_visible_reason();
  std::string out = std::to_string(devices.size()) + " CUDA device(s)";
  for (const auto& d : devices) {
    out += (d.index == 0 ? ": " : ", ");
    out += device_name(d.index) + " " + d.name + " (" + human_bytes(d.total_bytes) + ", " +
           human_bytes(d.free_bytes) + " free)";
  }
  return out;
}

std::string describe_devices() {
  if (visible_gpus() == 0)
    return built_with_cuda() ? "no CUDA device visible" : "no CUDA device (CPU build of libtorch)";
  return describe_devices(system_devices());
}

}  // namespace conveyor::gpu
