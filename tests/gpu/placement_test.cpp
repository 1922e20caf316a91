// The placement check with faked devices: visibility, per-device sums, the error's wording.
#include "gpu/placement.hpp"

#include <gtest/gtest.h>

using namespace conveyor;
using namespace conveyor::gpu;

namespace {

constexpr int64_t gib = int64_t{1} << 30;

// 219.6 M parameters (0.82 GiB of float32 weights); a KV cache of 16 slots x 2048 tokens is
// 2 x 16 layers x 8 kv_heads x 64 x 2048 x 16 x 4 bytes = 2 GiB.
model_sizes big_model() {
  return {model::llama_shape{1024, 2816, 16, 16, 8, 32000, 2048, true}, model::compute_dtype::f32};
}

// The parameters of big_model counted by hand: embedding (shared classifier), per layer two
// norms, wq and wo, wk and wv (kv_dim 512), w1, w2 and w3; the final norm.
constexpr int64_t big_model_parameters =
    int64_t{32000} * 1024 +                                                       // embedding
    16 * (2 * 1024 + 1024 * 1024 * 2 + 2 * 512 * 1024 + 3 * 2816 * 1024) + 1024;  // layers, norm

config::executor on(const std::string& device, int64_t slots = 16) {
  config::executor e;
  e.device = device;
  e.slots = slots;
  return e;
}

std::vector<device_info> two_h200s(int64_t free0, int64_t free1) {
  return {{0, "NVIDIA H200", 140 * gib, free0}, {1, "NVIDIA H200", 140 * gib, free1}};
}

std::string error_of(const expected<std::vector<device_demand>>& x) {
  return x ? std::string{"(no error)"} : message_of(x.error());
}

TEST(gpu_placement, sizes_follow_the_formulas) {
  auto m = big_model();
  EXPECT_EQ(weight_bytes(m), big_model_parameters * 4);
  EXPECT_EQ(kv_cache_bytes(m, 16, 2048), 2 * gib);
  EXPECT_EQ(kv_cache_bytes(m, 16, 0), 2 * gib);  // 0: the model's seq_len
  EXPECT_EQ(kv_cache_bytes(m, 8, 1024), gib / 2);
  m.dtype = model::compute_dtype::bf16;
  EXPECT_EQ(weight_bytes(m), big_model_parameters * 2);
  EXPECT_EQ(kv_cache_bytes(m, 16, 2048), gib);
}

// kv_cache.memory_mb replaces slots x context as an executor's KV cache on its device, and a
// budget larger than the device's free memory stops the placement naming both sizes.
TEST(gpu_placement, a_kv_cache_budget_is_what_the_executor_needs_for_its_cache) {
  auto m = big_model();
  m.kv_cache_mb = 3 * 1024;
  EXPECT_EQ(kv_cache_bytes(m, 16, 2048), 3 * gib);
  std::vector<config::executor> xs{on("cuda:0")};
  auto placed = check_placement(xs, two_h200s(100 * gib, 100 * gib), "unused", m);
  ASSERT_TRUE(placed) << error_of(placed);
  EXPECT_EQ((*placed)[0].kv_cache_bytes, 3 * gib);
  m.kv_cache_mb = 200 * 1024;
  const auto refused = error_of(check_placement(xs, two_h200s(100 * gib, 100 * gib), "unused", m));
  EXPECT_NE(refused.find("KV cache 200.0 GiB"), std::string::npos) << refused;
  EXPECT_NE(refused.find("100.0 GiB free"), std::string::npos) << refused;
}

TEST(gpu_placement, workspace_is_the_margin_plus_the_forward_pass) {
  auto m = big_model();
  auto e = on("cuda:0");
  const int64_t w = workspace_bytes(m, e);
  EXPECT_GT(w, cuda_context_margin_bytes);
  e.max_batched_tokens = 8192;  // more tokens per pass, bigger activations and logits
  EXPECT_GT(workspace_bytes(m, e), w);
}

TEST(gpu_placement, executors_that_fit_get_their_demand_per_device) {
  auto m = big_model();
  std::vector<config::executor> xs{on("cuda:1"), on("cpu"), on("cuda")};
  auto placed = check_placement(xs, two_h200s(100 * gib, 100 * gib), "unused", m);
  ASSERT_TRUE(placed) << error_of(placed);
  ASSERT_EQ(placed->size(), 2u);
  const auto& first = (*placed)[0];
  EXPECT_EQ(first.device.index, 0);  // "cuda" is cuda:0
  EXPECT_EQ(first.executors, std::vector<size_t>{2});
  EXPECT_EQ(first.weight_bytes, big_model_parameters * 4);
  EXPECT_EQ(first.kv_cache_bytes, 2 * gib);
  EXPECT_EQ(first.workspace_bytes, workspace_bytes(m, xs[2]));
  EXPECT_EQ((*placed)[1].device.index, 1);
  EXPECT_EQ((*placed)[1].executors, std::vector<size_t>{0});
}

TEST(gpu_placement, executors_on_one_device_are_summed) {
  auto m = big_model();
  // Each needs about 3.9 GiB (0.8 + 2 + a workspace of about 1): one fits in 6 GiB, two do not.
  std::vector<config::executor> one{on("cuda:1")};
  ASSERT_TRUE(check_placement(one, two_h200s(100 * gib, 6 * gib), "unused", m));
  std::vector<config::executor> two{on("cuda:1"), on("cuda:0"), on("cuda:1")};
  auto placed = check_placement(two, two_h200s(100 * gib, 6 * gib), "unused", m);
  ASSERT_FALSE(placed);
  EXPECT_EQ(code_of(placed.error()), ec::bad_config);
  const int64_t workspace = 2 * workspace_bytes(m, two[0]);
  const int64_t weights = 2 * big_model_parameters * 4;
  EXPECT_EQ(error_of(placed), "cuda:1 (NVIDIA H200): needs " +
                                  human_bytes(weights + 4 * gib + workspace) + " (weights " +
                                  human_bytes(weights) + " + KV cache 4.0 GiB + workspace " +
                                  human_bytes(workspace) + " for 2 executors), 6.0 GiB free");
}

TEST(gpu_placement, a_device_that_is_not_visible_is_named_with_its_executor) {
  auto m = big_model();
  std::vector<config::executor> xs{on("cuda:0")};
  EXPECT_EQ(error_of(check_placement(xs, {}, "no CUDA device visible", m)),
            "executors[0]: device cuda:0 is not available: no CUDA device visible");
  std::vector<config::executor> ys{on("cuda:1"), on("cuda:3")};
  EXPECT_EQ(error_of(check_placement(ys, two_h200s(100 * gib, 100 * gib), "unused", m)),
            "executors[1]: device cuda:3 is not available: 2 CUDA device(s) visible (cuda:0 to "
            "cuda:1)");
}

TEST(gpu_placement, every_problem_is_listed_one_per_line) {
  auto m = big_model();
  std::vector<config::executor> xs{on("cuda:2"), on("cuda:0"), on("cuda:5")};
  auto text = error_of(check_placement(xs, two_h200s(gib, 100 * gib), "unused", m));
  EXPECT_EQ(text.substr(0, text.find("needs")),
            "executors[0]: device cuda:2 is not available: 2 CUDA device(s) visible (cuda:0 to "
            "cuda:1)\n"
            "executors[2]: device cuda:5 is not available: 2 CUDA device(s) visible (cuda:0 to "
            "cuda:1)\n"
            "cuda:0 (NVIDIA H200): ");
  EXPECT_NE(text.find("for 1 executor), 1.0 GiB free"), std::string::npos) << text;
}

TEST(gpu_placement, cpu_executors_need_no_device) {
  std::vector<config::executor> xs{on("cpu"), on("cpu")};
  auto placed = check_placement(xs, {}, "no CUDA device visible", big_model());
  ASSERT_TRUE(placed) << error_of(placed);
  EXPECT_TRUE(placed->empty());
}

}  // namespace
