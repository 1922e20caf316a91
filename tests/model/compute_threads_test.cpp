// The compute threads an executor gets when its configuration leaves them to the machine: one for
// a model too small for its decode products to wake the pool's workers, every core otherwise.
// `packed_matrix::wakes_pool`, which decides it, against what the compute pool itself counts; the
// choice on the shapes of real models (stories260K's file, the synthetic s15m).
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "model/causal_lm.hpp"
#include "kernels/packed_matmul.hpp"
#include "kernels/work_pool.hpp"
#include "tests/support/model_files.hpp"

using namespace conveyor::model;
using namespace conveyor::kernels;

namespace {

struct product {
  int64_t m, in, out;
  bool wakes;
};

}  // namespace

TEST(compute_threads, wakes_pool_says_whether_a_product_wakes_a_sleeping_worker) {
  auto& pool = compute_pool();
  const int32_t before = pool.threads();
  pool.resize(2);
  // stories260K's classifier (64 x 512) and gate-and-up (64 x 344) at its 16 slots, the
  // classifier at 32 rows, s15m's classifier (288 x 32000) at one row, a tiny product.
  const product products[] = {{16, 64, 512, false}, {16, 64, 344, false}, {32, 64, 512, true},
                              {1, 288, 32000, true}, {1, 64, 64, false},  {64, 64, 172, true}};
  for (const auto& p : products) {
    SCOPED_TRACE(std::to_string(p.m) + " x " + std::to_string(p.in) + " x " +
                 std::to_string(p.out));
    EXPECT_EQ(packed_matrix::wakes_pool(p.m, p.in, p.out), p.wakes);
    std::vector<float> w(size_t(p.in * p.out), 0.5f), x(size_t(p.m * p.in), 1.0f),
        y(size_t(p.m * p.out), 0.0f);
    const packed_matrix packed(w.data(), p.in, p.out, p.out, weight_format::f32);
    // The worker goes to sleep once it has polled in vain; then the product runs.
    while (pool.sleeping() < 1) std::this_thread::yield();
    const auto wakes = pool.wakes();
    packed.multiply(x.data(), p.in, p.m, y.data(), p.out);
    EXPECT_EQ(pool.wakes() > wakes, p.wakes);
    EXPECT_FLOAT_EQ(y.back(), 0.5f * float(p.in));
  }
  pool.resize(before);
}

TEST(compute_threads, one_for_a_model_whose_decode_steps_never_wake_the_pool) {
  const auto stories = shape_of(conveyor::test::stories_model());
  ASSERT_TRUE(stories) << message_of(stories.error());
  // stories260K (dim 64, vocab 512): no product of a 16-sequence step wakes a worker; its
  // classifier does at 32 sequences.
  EXPECT_EQ(auto_compute_threads(*stories, 16, 2), 1);
  EXPECT_EQ(auto_compute_threads(*stories, 1, 8), 1);
  EXPECT_EQ(auto_compute_threads(*stories, 32, 2), 2);
  EXPECT_EQ(auto_compute_threads(*stories, 64, 4), 4);
}

TEST(compute_threads, every_core_for_a_model_whose_products_wake_the_pool) {
  const auto s15m = shape_of("synthetic:s15m");
  ASSERT_TRUE(s15m) << message_of(s15m.error());
  // Its classifier (288 x 32000) is shared even at one sequence.
  EXPECT_EQ(auto_compute_threads(*s15m, 1, 2), 2);
  EXPECT_EQ(auto_compute_threads(*s15m, 16, 16), 16);
  // One core is one thread whatever the model.
  EXPECT_EQ(auto_compute_threads(*s15m, 16, 1), 1);
  EXPECT_EQ(auto_compute_threads(*s15m, 16, 0), 1);
}
