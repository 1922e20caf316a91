// Attention over the plain-loop network's KV cache: a bf16 cache must give exactly the bits an
// f32 cache holding the same (bf16-rounded) numbers gives, on the vector code of every head size
// it has and on the scalar loop; both within float32 rounding of a float64 softmax attention;
// and the cache's element conversions against values worked out by hand.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cache_attention.hpp"

using namespace conveyor::kernels;

namespace {

// One kv head's cache of `span` positions in the layout attend_cached reads, from keys and
// values given position-major ([span, hs] each); positions past `span` in the last key block
// hold `stale` (they must be ignored).
template <class T>
struct head_cache {
  std::vector<T> keys_t, values;
};

template <class T>
head_cache<T> lay_out(const std::vector<float>& keys, const std::vector<float>& values,
                      int64_t hs, int64_t span, float stale) {
  const int64_t blocks = (span + 7) / 8;
  head_cache<T> c;
  c.keys_t.resize(size_t(blocks * hs * 8));
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t e = 0; e < hs; ++e)
      for (int64_t l = 0; l < 8; ++l) {
        const int64_t t = b * 8 + l;
        store_cached(&c.keys_t[size_t((b * hs + e) * 8 + l)],
                     t < span ? keys[size_t(t * hs + e)] : stale);
      }
  c.values.resize(size_t(span * hs));
  for (int64_t i = 0; i < span * hs; ++i) store_cached(&c.values[size_t(i)], values[size_t(i)]);
  return c;
}

template <class T>
std::vector<float> attend(const std::vector<float>& q, int64_t g, const head_cache<T>& c,
                          int64_t hs, int64_t span, float scale) {
  const int64_t ctx = (span + 7) / 8 * 8 + 8;
  std::vector<float> scores(size_t(g * ctx + 8)), out(size_t(g * hs));
  attend_cached(hs, q.data(), g, c.keys_t.data(), ctx, c.values.data(), span, scale,
                scores.data(), out.data());
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
