// Device providers: names, indices, human units, listed and real providers.
#include "gpu/devices.hpp"

#include <gtest/gtest.h>

using namespace conveyor::gpu;

namespace {

constexpr int64_t gib = int64_t{1} << 30;

TEST(gpu_devices, names_and_indices) {
  EXPECT_EQ(device_name(0), "cuda:0");
  EXPECT_EQ(device_name(12), "cuda:12");
  EXPECT_EQ(cuda_index("cuda"), 0);
  EXPECT_EQ(cuda_index("cuda:0"), 0);
  EXPECT_EQ(cuda_index("cuda:7"), 7);
  EXPECT_EQ(cuda_index("cuda:1234"), 1234);
  EXPECT_EQ(cuda_index("cpu"), -1);
  EXPECT_EQ(cuda_index("cuda:"), -1);
  EXPECT_EQ(cuda_index("cuda:x"), -1);
  EXPECT_EQ(cuda_index("cudax"), -1);
}

TEST(gpu_devices, human_bytes_uses_binary_units) {
  EXPECT_EQ(human_bytes(0), "0 B");
  EXPECT_EQ(human_bytes(1023), "1023 B");
  EXPECT_EQ(human_bytes(1024), "1.0 KiB");
  EXPECT_EQ(human_bytes(512 * (int64_t{1} << 20)), "512.0 MiB");
  EXPECT_EQ(human_bytes(2 * gib), "2.0 GiB");
  EXPECT_EQ(human_bytes(int64_t(3.2 * double(gib))), "3.2 GiB");
  EXPECT_EQ(human_bytes(2048 * gib), "2.0 TiB");
}

TEST(gpu_devices, a_listed_provider_numbers_its_devices_and_describes_them) {
  listed_devices fake{{{7, "Fake GPU", 80 * gib, 79 * gib}, {7, "Other GPU", 40 * gib, 10 * gib}}};
  auto ds = fake.devices();
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds[0].index, 0);
  EXPECT_EQ(ds[1].index, 1);
  EXPECT_EQ(describe_devices(fake),
            "2 CUDA device(s): cuda:0 Fake GPU (80.0 GiB, 79.0 GiB free), cuda:1 Other GPU "
            "(40.0 GiB, 10.0 GiB free)");
  listed_devices none{{}, "no CUDA device visible"};
  EXPECT_EQ(describe_devices(none), "no CUDA device visible");
}

TEST(gpu_devices, the_system_provider_agrees_with_libtorch) {
  const auto& real = system_devices();
  EXPECT_EQ(real.devices().size(), visible_gpus());
  if (!built_with_cuda()) {
    EXPECT_TRUE(real.devices().empty());
    EXPECT_EQ(real.none_visible_reason(),
              "this build's libtorch has no CUDA (the CUDA build: scripts/setup.sh --cuda)");
    EXPECT_EQ(describe_devices(), "no CUDA device (CPU build of libtorch)");
  }
  for (const auto& d : real.devices()) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.total_bytes, 0);
    EXPECT_LE(d.free_bytes, d.total_bytes);
  }
}

}  // namespace
