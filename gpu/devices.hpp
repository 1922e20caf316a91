// Device discovery: which CUDA devices this process can use, as plain descriptions behind an
// interface, so that placement and "auto" executors can be tested with a faked device list.
// Torch-free, so that actors/ and apps/ can include it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace conveyor::gpu {

// -- device descriptions --------------------------------------------------------------------------

/// One CUDA device as this process sees it.
struct device_info {
  /// The index the CUDA runtime gives it: "cuda:<index>". With CUDA_VISIBLE_DEVICES set, indices
  /// count the visible devices only (CUDA_VISIBLE_DEVICES=2,3 makes physical GPU 2 "cuda:0").
  int32_t index = 0;
  /// The product name, e.g. "NVIDIA H200".
  std::string name;
  /// Memory of the device, in bytes.
  int64_t total_bytes = 0;
  /// Memory free when it was asked, in bytes (other processes' use already subtracted).
  int64_t free_bytes = 0;
};

/// "cuda:<index>".
std::string device_name(int32_t index);

/// The device index of "cuda" (0) or "cuda:N" (N); -1 for anything else ("cpu").
int32_t cuda_index(const std::string& device);

/// Bytes in human units with binary prefixes: "512 B", "12.0 KiB", "3.2 GiB".
std::string human_bytes(int64_t bytes);

// -- providers -----------------------------------------------------------------------------------

/// Where the list of CUDA devices comes from. `system_devices()` asks libtorch and the CUDA
/// runtime; tests list devices with `listed_devices`.
class device_provider {
 public:
  virtual ~device_provider() = default;

  /// The visible CUDA devices in index order (`devices()[i].index == i`); empty without CUDA.
  virtual std::vector<device_info> devices() const = 0;

  /// Why `devices()` is empty, for errors: "no CUDA device visible" (a CUDA build) or "this
  /// build's libtorch has no CUDA (...)" (a CPU build).
  virtual std::string none_visible_reason() const = 0;
};

/// The real devices: the CUDA devices libtorch sees, with name and memory from
/// cudaGetDeviceProperties and cudaMemGetInfo (CUDA builds only). The CUDA runtime applies
/// CUDA_VISIBLE_DEVICES before anything here sees a device; Conveyor does not parse it.
const device_provider& system_devices();

/// A fixed list of devices: for tests, and for describing what another machine reported.
class listed_devices final : public device_provider {
 public:
  /// `devices` in index order (their `index` fields are renumbered 0, 1, ...).
  explicit listed_devices(std::vector<device_info> devices,
                          std::string none_visible_reason = "no CUDA device visible");

  std::vector<device_info> devices() const override { return devices_; }

  std::string none_visible_reason() const override { return reason_; }

 private:
  std::vector<device_info> devices_;
  std::string reason_;
};

// -- convenience ---------------------------------------------------------------------------------

/// True when this build's libtorch has CUDA (CONVEYOR_WITH_CUDA).
bool built_with_cuda();

/// The CUDA devices libtorch sees (honouring CUDA_VISIBLE_DEVICES); 0 without CUDA.
size_t visible_gpus();

/// One line for logs, e.g. "2 CUDA device(s): cuda:0 NVIDIA H200 (139.8 GiB, 139.2 GiB free),
/// cuda:1 ...", or the provider's `none_visible_reason()`.
std::string describe_devices(const device_provider& provider);

/// `describe_devices(system_devices())`, or without a device "no CUDA device visible" (a CUDA
/// build) or "no CUDA device (CPU build of libtorch)".
std::string describe_devices();

}  // namespace conveyor::gpu
