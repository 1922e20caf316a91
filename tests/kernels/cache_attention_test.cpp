// Attention over the plain-loop network's KV cache: a bf16 cache must give exactly the bits an
// f32 cache holding the same (bf16-rounded) numbers gives, on the vector code of every head size
// it has and on the scalar loop; both within float32 rounding of a float64 softmax attention;
// and the cache's element conversions against values worked out by hand.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cache_attention.hpp"

using namespace conveyor::kernels;

namespace {

// One kv head's cache of `span` positions in the layout attend_cached reads, from keys and
// values given position-major ([span, hs] each): blocks of `block_size` positions, block i of the
// sequence in pool block table[i] (the pool holds as many blocks as the table, in any order);
// every other position of the pool (blocks up to the table's largest id) holds `stale` (it must
// be ignored).
template <class T>
struct head_cache {
  std::vector<T> keys, values;
  std::vector<int32_t> table;
  int64_t block_size = 0;
  int64_t hs = 0;

  cache_blocks<T> blocks() const {
    return {keys.data(), values.data(), block_size * hs, table.data(), block_size};
  }
};

// The table 0, 1, 2, ...: a contiguous cache.
std::vector<int32_t> in_order(int64_t blocks) {
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (size_t i = 0; i < table.size(); ++i) table[i] = int32_t(i);
  return table;
}

template <class T>
head_cache<T> lay_out(const std::vector<float>& keys, const std::vector<float>& values, int64_t hs,
                      int64_t span, float stale, int64_t block_size = 8,
                      std::vector<int32_t> table = {}) {
  const int64_t blocks = (span + block_size - 1) / block_size;
  if (table.empty()) table = in_order(blocks);
  head_cache<T> c;
  c.table = table;
  c.block_size = block_size;
  c.hs = hs;
  const size_t pool =
      size_t(*std::max_element(table.begin(), table.end()) + 1) * size_t(block_size * hs);
  c.keys.resize(pool);
  c.values.resize(pool);
  for (size_t i = 0; i < pool; ++i)
    store_cached(&c.keys[i], stale), store_cached(&c.values[i], stale);
  for (int64_t t = 0; t < span; ++t) {
    const int64_t base = table[size_t(t / block_size)] * block_size * hs, off = t % block_size;
    for (int64_t e = 0; e < hs; ++e) {
      store_cached(&c.keys[size_t(base + ((off / 8) * hs + e) * 8 + off % 8)],
                   keys[size_t(t * hs + e)]);
      store_cached(&c.values[size_t(base + off * hs + e)], values[size_t(t * hs + e)]);
    }
  }
  return c;
}

template <class T>
std::vector<float> attend(const std::vector<float>& q, int64_t g, const head_cache<T>& c,
                          int64_t hs, int64_t span, float scale) {
  const int64_t ctx = (span + c.block_size - 1) / c.block_size * c.block_size + 8;
  std::vector<float> scores(size_t(g * ctx + 8)), out(size_t(g * hs));
  attend_cached(hs, q.data(), g, c.blocks(), ctx, span, scale, scores.data(), out.data());
  return out;
}

// Softmax attention in float64 over position-major keys and values.
std::vector<double> reference(const std::vector<float>& q, int64_t g,
                              const std::vector<float>& keys, const std::vector<float>& values,
                              int64_t hs, int64_t span, double scale) {
  std::vector<double> out(size_t(g * hs), 0.0);
  for (int64_t j = 0; j < g; ++j) {
    std::vector<double> s(static_cast<size_t>(span));
    double top = -1e300, total = 0.0;
    for (int64_t t = 0; t < span; ++t) {
      double dot = 0.0;
      for (int64_t e = 0; e < hs; ++e)
        dot += double(q[size_t(j * hs + e)]) * keys[size_t(t * hs + e)];
      s[size_t(t)] = dot * scale;
      top = std::max(top, s[size_t(t)]);
    }
    for (auto& x : s) total += (x = std::exp(x - top));
    for (int64_t t = 0; t < span; ++t)
      for (int64_t e = 0; e < hs; ++e)
        out[size_t(j * hs + e)] += s[size_t(t)] / total * values[size_t(t * hs + e)];
  }
  return out;
}

std::vector<float> rounded(std::vector<float> x) {
  for (auto& v : x) v = from_bf16(to_bf16(v));
  return x;
}

}  // namespace

TEST(cache_attention, a_bf16_cache_gives_the_bits_of_an_f32_cache_of_the_same_numbers) {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int cases = 0, narrowed = 0;
  // Every head size with vector code, and two that take the scalar loop.
  for (int64_t hs : {8, 16, 32, 48, 64, 96, 128, 12, 20})
    for (int64_t g : {1, 3})
      for (int64_t span : {1, 5, 8, 9, 64, 131}) {
        auto fill = [&](int64_t n) {
          std::vector<float> v(static_cast<size_t>(n));
          for (auto& x : v) x = normal(rng);
          return v;
        };
        const auto q = fill(g * hs), keys = fill(span * hs), values = fill(span * hs);
        const float scale = 1.0f / std::sqrt(float(hs));
        const auto keys_r = rounded(keys), values_r = rounded(values);
        const auto bf16 = attend(q, g, lay_out<uint16_t>(keys, values, hs, span, 100.0f), hs,
                                 span, scale);
        const auto f32 = attend(q, g, lay_out<float>(keys_r, values_r, hs, span, 100.0f), hs,
                                span, scale);
        ASSERT_EQ(std::memcmp(bf16.data(), f32.data(), bf16.size() * sizeof(float)), 0)
            << "hs " << hs << ", g " << g << ", span " << span;
        // Both are softmax attention over the rounded numbers, to float32 rounding.
        const auto want = reference(q, g, keys_r, values_r, hs, span, double(scale));
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(bf16[i], want[i], 1e-5 * (1.0 + std::abs(want[i])))
              << "hs " << hs << ", g " << g << ", span " << span << ", element " << i;
        // And the unrounded cache gives something else: the data is not bf16-exact already.
        const auto full = attend(q, g, lay_out<float>(keys, values, hs, span, 100.0f), hs, span,
                                 scale);
        float largest = 0.0f;
        for (size_t i = 0; i < full.size(); ++i)
          largest = std::max(largest, std::abs(full[i] - bf16[i]));
        narrowed += largest > 1e-4f;
        ++cases;
      }
  EXPECT_EQ(cases, 9 * 2 * 6);
  EXPECT_GT(narrowed, cases * 9 / 10) << "bf16 rounding should change nearly every case";
}

// Where the blocks are does not change a bit: the same positions in a contiguous cache and in
// blocks scattered over a pool, for block sizes of 8 to 64, on the vector code and the scalar
// loop (which cross blocks in different places).
TEST(cache_attention, blocks_anywhere_in_the_pool_give_the_bits_of_a_contiguous_cache) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int cases = 0;
  for (int64_t hs : {8, 16, 64, 128, 12})
    for (int64_t block_size : {8, 16, 64})
      for (int64_t span : {1, 15, 16, 17, 100, 203}) {
        auto fill = [&](int64_t n) {
          std::vector<float> v(static_cast<size_t>(n));
          for (auto& x : v) x = normal(rng);
          return v;
        };
        const int64_t g = 2;
        const auto q = fill(g * hs), keys = fill(span * hs), values = fill(span * hs);
        const float scale = 1.0f / std::sqrt(float(hs));
        const int64_t blocks = (span + block_size - 1) / block_size;
        // A pool of twice the blocks, the sequence's in a shuffled half of them.
        auto table = in_order(2 * blocks);
        std::shuffle(table.begin(), table.end(), rng);
        table.resize(size_t(blocks));
        const auto scattered = attend(
            q, g, lay_out<float>(keys, values, hs, span, 1e4f, block_size, table), hs, span, scale);
        const auto contiguous =
            attend(q, g, lay_out<float>(keys, values, hs, span, -1e4f, 8), hs, span, scale);
        ASSERT_EQ(
            std::memcmp(scattered.data(), contiguous.data(), scattered.size() * sizeof(float)), 0)
            << "hs " << hs << ", block size " << block_size << ", span " << span;
        const auto want = reference(q, g, keys, values, hs, span, double(scale));
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(scattered[i], want[i], 1e-5 * (1.0 + std::abs(want[i])));
        ++cases;
      }
  EXPECT_EQ(cases, 5 * 3 * 6);
}

TEST(cache_attention, elements_are_stored_rounded_to_nearest_even_and_read_exactly) {
  uint16_t b = 0;
  store_cached(&b, 1.0f + 0x1p-8f);  // halfway: to the even 1.0
  EXPECT_EQ(b, 0x3f80);
  store_cached(&b, 1.0f + 3 * 0x1p-8f);  // halfway: to the even 1 + 2^-6
  EXPECT_EQ(b, 0x3f82);
  store_cached(&b, -3.14159265f);  // 0xc0490fdb: down to 0xc049
  EXPECT_EQ(b, 0xc049);
  EXPECT_EQ(load_cached(b), -3.140625f);
  store_cached(&b, INFINITY);
  EXPECT_EQ(load_cached(b), INFINITY);
  store_cached(&b, NAN);
  EXPECT_TRUE(std::isnan(load_cached(b)));
  float f = 0.0f;
  store_cached(&f, 1.0f + 0x1p-20f);  // float32 keeps what bf16 would drop
  EXPECT_EQ(load_cached(f), 1.0f + 0x1p-20f);
}
