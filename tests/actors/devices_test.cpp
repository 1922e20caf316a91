// Executors on devices this process cannot use: spawn_pipeline refuses at start, before loading
// any model, with an error that names the executor. Runs in both builds without a GPU.
#include <string>

#include <gtest/gtest.h>
#include <caf/all.hpp>

#include "actors/caf_error.hpp"
#include "actors/spawn.hpp"
#include "gpu/devices.hpp"

using namespace conveyor;

namespace {

class executor_devices : public ::testing::Test {
 protected:
  static caf::actor_system_config& init(caf::actor_system_config& cfg) {
    add_error_category(cfg);
    cfg.set("logger.verbosity", caf::atom("quiet"));
    return cfg;
  }

  /// A configuration with one executor per device, in order.
  static config::pipeline with_devices(std::initializer_list<std::string> devices) {
    config::pipeline cfg;
    cfg.auto_executors = false;
    for (const auto& d : devices) {
      config::executor e;
      e.device = d;
      e.threads = 1;
      cfg.executors.push_back(e);
    }
    cfg.metrics.interval_s = 0;
    return cfg;
  }

  /// Why `device` is not available, as the error says it, on a machine without a GPU.
  static std::string reason_without_gpu() {
    return gpu::built_with_cuda()
               ? "no CUDA device visible"
               : "this build's libtorch has no CUDA (the CUDA build: scripts/setup.sh --cuda)";
  }

  caf::actor_system_config cfg;
  caf::actor_system sys{init(cfg)};
};

}  // namespace

TEST_F(executor_devices, cuda_0_without_a_gpu_fails_at_start_naming_the_executor) {
  if (gpu::visible_gpus() > 0) GTEST_SKIP() << "a CUDA device is visible: cuda:0 is available";
  auto h = spawn_pipeline(sys, with_devices({"cpu", "cuda:0"}));
  ASSERT_FALSE(h) << "spawn_pipeline accepted cuda:0 without a GPU";
  EXPECT_EQ(code_of(h.error()), ec::bad_config);
  EXPECT_EQ(message_of(h.error()),
            "executors[1]: device cuda:0 is not available: " + reason_without_gpu());
}

TEST_F(executor_devices, cuda_without_an_index_is_the_first_gpu) {
  if (gpu::visible_gpus() > 0) GTEST_SKIP() << "a CUDA device is visible: cuda is available";
  auto h = spawn_pipeline(sys, with_devices({"cuda"}));
  ASSERT_FALSE(h);
  EXPECT_EQ(message_of(h.error()),
            "executors[0]: device cuda is not available: " + reason_without_gpu());
}

TEST_F(executor_devices, a_gpu_beyond_the_visible_ones_fails_at_start_on_any_machine) {
  const size_t n = gpu::visible_gpus();
  const std::string device = "cuda:" + std::to_string(n);
  std::string reason = reason_without_gpu();
  if (n > 0)
    reason = std::to_string(n) + " CUDA device(s) visible (cuda:0 to cuda:" +
             std::to_string(n - 1) + ")";
  auto h = spawn_pipeline(sys, with_devices({"cpu", "cpu", device}));
  ASSERT_FALSE(h);
  EXPECT_EQ(message_of(h.error()),
            "executors[2]: device " + device + " is not available: " + reason);
  // A worker's executors (`conveyor worker`) are checked the same way.
  auto group = spawn_executors(sys, with_devices({device}), metrics_actor{}, "host:1/");
  ASSERT_FALSE(group);
  EXPECT_EQ(message_of(group.error()),
            "executors[0]: device " + device + " is not available: " + reason);
}
