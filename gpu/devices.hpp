// Device discovery: which accelerators this process can use. Torch-free, so that actors/ and
// apps/ can include it.
#pragma once

#include <cstddef>
#include <string>

namespace conveyor::gpu {

/// True when this build's libtorch has CUDA (CONVEYOR_WITH_CUDA).
bool built_with_cuda();

/// The CUDA devices libtorch sees (honouring CUDA_VISIBLE_DEVICES); 0 without CUDA.
size_t visible_gpus();

/// One line for logs, e.g. "2 CUDA device(s): NVIDIA H200 (139 GiB), ..." or
/// "no CUDA device (CPU build)".
std::string describe_devices();

}  // namespace conveyor::gpu
