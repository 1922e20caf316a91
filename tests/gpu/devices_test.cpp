// Device discovery: whether this build has CUDA, how many GPUs it sees, and the one-line
// description for logs. Runs in both builds and on machines with and without a GPU; what it
// expects follows from the build (CONVEYOR_WITH_CUDA) and from the machine's /dev/nvidia* nodes.
#include "gpu/devices.hpp"

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>
#include <sys/stat.h>

namespace conveyor::gpu {

namespace {

/// True when this machine has no NVIDIA device for this process: no /dev/nvidia0 (the driver's
/// node of the first GPU), or CUDA_VISIBLE_DEVICES hides them all.
bool machine_has_no_gpu() {
  struct stat st {};
  if (::stat("/dev/nvidia0", &st) != 0) return true;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return visible != nullptr && (std::string{visible}.empty() || std::string{visible} == "-1");
}

}  // namespace

TEST(devices, the_build_reports_whether_it_has_cuda) {
#if defined(CONVEYOR_WITH_CUDA)
  EXPECT_TRUE(built_with_cuda());
#else
  EXPECT_FALSE(built_with_cuda());
#endif
}

TEST(devices, a_machine_without_a_gpu_reports_none) {
  if (!machine_has_no_gpu()) GTEST_SKIP() << "this machine has an NVIDIA GPU (/dev/nvidia0)";
  EXPECT_EQ(visible_gpus(), 0u);
  EXPECT_EQ(describe_devices(), built_with_cuda() ? "no CUDA device visible"
                                                  : "no CUDA device (CPU build of libtorch)");
}

TEST(devices, a_cpu_build_sees_no_gpu_even_on_a_gpu_machine) {
  if (built_with_cuda()) GTEST_SKIP() << "the CUDA build: see the other tests";
  EXPECT_EQ(visible_gpus(), 0u);
  EXPECT_EQ(describe_devices(), "no CUDA device (CPU build of libtorch)");
}

TEST(devices, the_cuda_build_on_a_gpu_machine_names_each_device) {
  if (!built_with_cuda() || machine_has_no_gpu())
    GTEST_SKIP() << "needs the CUDA build on a machine with an NVIDIA GPU";
  const size_t n = visible_gpus();
  ASSERT_GE(n, 1u);
  const std::string line = describe_devices();
  EXPECT_EQ(line.rfind(std::to_string(n) + " CUDA device(s): cuda:0 ", 0), 0u) << line;
}

}  // namespace conveyor::gpu
