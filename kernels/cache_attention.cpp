// Attention over the plain-loop network's KV cache (see cache_attention.hpp): eight-wide vector
// code for the common head sizes, a scalar loop for the others; float32 or bf16 cache elements.
#include "kernels/cache_attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/vector8.hpp"

namespace conveyor::kernels {

namespace {

using namespace vec8;

// Softmax attention of g query heads (q: g x hs, contiguous) over `span` positions of one kv
// head's cache, block by block (cache_attention.hpp): into out (g x hs). Rows of `scores` are
// ctx (a multiple of 8) apart. HS > 0 fixes hs at compile time. Every inner loop runs over
// contiguous memory. Eight-wide vectors (GCC vector extensions, so that it vectorizes whatever the
// optimizer decides) for head sizes that are multiples of 8. Keys and values are float32 or bf16
// (T = uint16_t), widened eight at a time in registers; every sum is float32. Each position's
// arithmetic is the same wherever its block is, so a cache shared or copied between sequences
// gives each of them the same bits.
template <int HS, class T>
CONVEYOR_VECTOR_CLONES void attend(const float* __restrict__ q, int64_t g,
                                   const cache_blocks<T>& cache, int64_t ctx, int64_t span,
                                   float scale, float* __restrict__ scores,
                                   float* __restrict__ out) {
  static_assert(HS % 8 == 0, "vector attention needs a head size that is a multiple of 8");
  constexpr int64_t blocks = HS / 8;
  const int64_t bs = cache.block_size, stride = cache.stride;
  const int32_t* table = cache.table;
  const int64_t body = span - span % 8;
  // Scores of the g heads, eight positions at a time: eight positions of keys are HS runs of
  // eight, so the eight scores stay in registers (four partial sums, for the multiply-add
  // latency) and a block's keys are read as one contiguous run. The last eight may hold positions
  // past `span` (stale or zero): their lanes are written and ignored.
  // The cache is read from memory, not from the processor's caches, at a large batch: while the
  // scores of eight positions are summed, the keys `ahead` eights on (in the next block at a
  // block's end) and the values of the eight positions (which the weighted sum below reads) are
  // fetched, so that the two streams are in flight together.
  constexpr int64_t line = 64 / sizeof(T), ahead = 2;
  for (int64_t b = 0, t0 = 0; t0 < span; ++b) {
    const T* __restrict__ kblock = cache.keys + table[b] * stride;
    const T* __restrict__ vblock = cache.values + table[b] * stride;
    for (int64_t c = 0; c < bs && t0 < span; c += 8, t0 += 8) {
      if (t0 + 8 * ahead < span) {
        const int64_t next = c + 8 * ahead;
        const T* k_ahead =
            next < bs ? kblock + next * HS : cache.keys + table[b + 1] * stride + (next - bs) * HS;
        for (int64_t l = 0; l < 8 * HS; l += line) __builtin_prefetch(k_ahead + l);
      }
      const T* v8 = vblock + c * HS;
      for (int64_t l = 0, n = std::min<int64_t>(8, span - t0) * HS; l < n; l += line)
        __builtin_prefetch(v8 + l);
      const T* eight = kblock + c * HS;
      for (int64_t j = 0; j < g; ++j) {
        const float* qj = q + j * HS;
        v8f acc0 = {}, acc1 = {}, acc2 = {}, acc3 = {};
        for (int64_t e = 0; e < HS; e += 4) {
          acc0 += qj[e] * load8(eight + 8 * e);
          acc1 += qj[e + 1] * load8(eight + 8 * (e + 1));
          acc2 += qj[e + 2] * load8(eight + 8 * (e + 2));
          acc3 += qj[e + 3] * load8(eight + 8 * (e + 3));
        }
        store8(scores + j * ctx + t0, ((acc0 + acc1) + (acc2 + acc3)) * scale);
      }
    }
  }
  for (int64_t j = 0; j < g; ++j) {
    float* sj = scores + j * ctx;
    v8f top8 = load8(sj);
    for (int64_t t = 8; t < body; t += 8) {
      const v8f x = load8(sj + t);
      top8 = x > top8 ? x : top8;
    }
    float top = sj[0];
    for (int64_t l = 0; l < 8 && l < body; ++l) top = std::max(top, top8[l]);
    for (int64_t t = body; t < span; ++t) top = std::max(top, sj[t]);
    v8f sum8 = {};
    for (int64_t t = 0; t < body; t += 8) {
      const v8f e = exp8_nonpositive(load8(sj + t) - top);
      store8(sj + t, e);
      sum8 += e;
    }
    float total = 0.0f;
    for (int64_t l = 0; l < 8; ++l) total += sum8[l];
    for (int64_t t = body; t < span; ++t) total += sj[t] = exp_nonpositive(sj[t] - top);
    const float inv = 1.0f / total;
    // Weighted sum of the values, head elements in registers. Small heads (one or two vectors)
    // keep `lanes` partial sums over interleaved positions, so that at least four multiply-adds
    // are in flight instead of one chain waiting on each; they are added in a fixed order. A
    // block holds a multiple of `lanes` positions, so position t goes to partial sum t % lanes
    // but for the last span % lanes positions, which go to the first.
    constexpr int64_t lanes = blocks >= 4 ? 1 : 4 / blocks;
    v8f acc[lanes][blocks] = {};
    // Position t's weighted values (at vt) into the partial sum `sum`.
    auto add = [&](v8f* sum, int64_t t, const T* vt) CONVEYOR_INLINE_LAMBDA {
      const float w = sj[t] * inv;
      for (int64_t e = 0; e < blocks; ++e) sum[e] += w * load8(vt + 8 * e);
    };
    const int64_t grouped = span - span % lanes;
    for (int64_t b = 0, t = 0; t < span; ++b) {
      const T* vblock = cache.values + table[b] * stride;
      const int64_t end = std::min(span, t + bs);
      for (; t + lanes <= std::min(end, grouped); t += lanes)
        for (int64_t u = 0; u < lanes; ++u) add(acc[u], t + u, vblock + (t + u - b * bs) * HS);
      for (; t < end; ++t) add(acc[0], t, vblock + (t - b * bs) * HS);
    }
    for (int64_t u = 1; u < lanes; ++u)
      for (int64_t e = 0; e < blocks; ++e) acc[0][e] += acc[u][e];
    for (int64_t e = 0; e < blocks; ++e) store8(out + j * HS + 8 * e, acc[0][e]);
  }
}

// The same for any head size, one lane at a time.
template <class T>
void attend_scalar(int64_t hs, const float* __restrict__ q, int64_t g, const cache_blocks<T>& cache,
                   int64_t ctx, int64_t span, float scale, float* __restrict__ scores,
                   float* __restrict__ out) {
  const int64_t bs = cache.block_size;
  // The eight positions from t0 (a multiple of 8) of the keys, and position t of the values.
  auto keys_at = [&](int64_t t0) {
    return cache.keys + cache.table[t0 / bs] * cache.stride + (t0 % bs) * hs;
  };
  auto values_at = [&](int64_t t) {
    return cache.values + cache.table[t / bs] * cache.stride + (t % bs) * hs;
  };
  for (int64_t j = 0; j < g; ++j) {
    // Scores eight positions at a time (eight positions of keys are hs runs of eight) kept in
    // registers across the head elements. The last eight may hold positions past `span`:
    // those scores are ignored. Rows of `scores` are ctx (a multiple of 8) apart.
    float* sj = scores + j * ctx;
    const float* qj = q + j * hs;
    for (int64_t t0 = 0; t0 < span; t0 += 8) {
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      const T* eight = keys_at(t0);
      for (int64_t e = 0; e < hs; ++e) {
        const float qe = qj[e] * scale;
        for (int64_t l = 0; l < 8; ++l) acc[l] += qe * load_cached(eight[e * 8 + l]);
      }
      for (int64_t l = 0; l < 8; ++l) sj[t0 + l] = acc[l];
    }
    // Reductions in eight independent lanes, so that they vectorize without -ffast-math.
    constexpr int64_t lanes = 8;
    float top_lane[lanes], sum_lane[lanes];
    for (int64_t l = 0; l < lanes; ++l) top_lane[l] = sj[0], sum_lane[l] = 0.0f;
    const int64_t body = span - span % lanes;
    for (int64_t t = 0; t < body; t += lanes)
      for (int64_t l = 0; l < lanes; ++l) top_lane[l] = std::max(top_lane[l], sj[t + l]);
    float top = sj[0];
    for (int64_t l = 0; l < lanes; ++l) top = std::max(top, top_lane[l]);
    for (int64_t t = body; t < span; ++t) top = std::max(top, sj[t]);
    for (int64_t t = 0; t < span; ++t) sj[t] = exp_nonpositive(sj[t] - top);
    for (int64_t t = 0; t < body; t += lanes)
      for (int64_t l = 0; l < lanes; ++l) sum_lane[l] += sj[t + l];
    float total = 0.0f;
    for (int64_t l = 0; l < lanes; ++l) total += sum_lane[l];
    for (int64_t t = body; t < span; ++t) total += sj[t];
    const float inv = 1.0f / total;
    for (int64_t t = 0; t < span; ++t) sj[t] *= inv;
  }
  std::fill(out, out + g * hs, 0.0f);
  for (int64_t t = 0; t < span; ++t) {
    const T* vt = values_at(t);
    for (int64_t j = 0; j < g; ++j) {
      const float w = scores[j * ctx + t];
      float* oj = out + j * hs;
      for (int64_t e = 0; e < hs; ++e) oj[e] += w * load_cached(vt[e]);
    }
  }
}

}  // namespace

// attend<HS> with the head size known at compile time for the common sizes, so that the inner
// loops unroll and vectorize; other sizes take the general loop.
template <class T>
void attend_cached(int64_t hs, const float* q, int64_t g, const cache_blocks<T>& cache, int64_t ctx,
                   int64_t span, float scale, float* scores, float* out) {
#define CONVEYOR_ATTEND(HS) attend<HS, T>(q, g, cache, ctx, span, scale, scores, out)
  switch (hs) {
    case 8:
      return CONVEYOR_ATTEND(8);
    case 16:
      return CONVEYOR_ATTEND(16);
    case 32:
      return CONVEYOR_ATTEND(32);
    case 48:
      return CONVEYOR_ATTEND(48);
    case 64:
      return CONVEYOR_ATTEND(64);
    case 96:
      return CONVEYOR_ATTEND(96);
    case 128:
      return CONVEYOR_ATTEND(128);
    default:
      return attend_scalar(hs, q, g, cache, ctx, span, scale, scores, out);
  }
#undef CONVEYOR_ATTEND
}

template void attend_cached<float>(int64_t, const float*, int64_t, const cache_blocks<float>&,
                                   int64_t, int64_t, float, float*, float*);
template void attend_cached<uint16_t>(int64_t, const float*, int64_t, const cache_blocks<uint16_t>&,
                                      int64_t, int64_t, float, float*, float*);

}  // namespace conveyor::kernels
