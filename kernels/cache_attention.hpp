// Attention of one step's row over the KV cache of the CPU's plain-loop network
// (llama_loops.cpp), and how a number is stored in that cache: float32, or bfloat16 (rounded to
// nearest even when written, widened exactly to float32 when read; every sum is float32).
// Torch-free.
#pragma once

#include <cstdint>

#include "kernels/packed_matmul.hpp"

namespace conveyor::kernels {

/// Stores `x` as a cache element: itself in a float32 cache.
inline void store_cached(float* p, float x) { *p = x; }

/// Stores `x` as a cache element: its bfloat16 bits, rounded to nearest even, in a bf16 cache.
inline void store_cached(uint16_t* p, float x) { *p = to_bf16(x); }

/// A float32 cache element as float32.
inline float load_cached(float x) { return x; }

/// A bf16 cache element (its bits) as float32, exactly.
inline float load_cached(uint16_t x) { return from_bf16(x); }

/// Where one kv head's cache of one sequence is: blocks of `block_size` positions (a multiple
/// of 8), block i of the sequence (positions i*block_size ..) at `table[i]` of the pool. In a pool
/// block `b`, the keys are at keys + b * stride: blocks of eight positions, each transposed, so
/// that element e of the block's position p is at [((p / 8) * hs + e) * 8 + p % 8]; the values
/// at values + b * stride, position p's at [p * hs]. (A contiguous cache is the table 0, 1, 2, ..
/// with a stride of block_size * hs.)
template <class T>
struct cache_blocks {
  const T* keys = nullptr;
  const T* values = nullptr;
  int64_t stride = 0;
  const int32_t* table = nullptr;
  int64_t block_size = 0;
};

/// Softmax attention of `g` query heads (`q`: g x hs, contiguous, row j the query of head j)
/// over positions 0..span-1 of one kv head's cache `cache`, into `out` (g x hs); positions past
/// `span` in the last block (stale or zero) are ignored. Scores are scaled by `scale`. `scores`
/// is scratch of g rows `ctx` apart (ctx a multiple of 8, at least span rounded up). T, the
/// cache's element, is float or uint16_t (the bits of bf16, widened in registers). Head sizes 8,
/// 16, 32, 48, 64, 96 and 128 take eight-wide vector code; any other a scalar loop. The result
/// depends only on the numbers cached at the positions and on `q`: not on which pool blocks
/// hold them.
template <class T>
void attend_cached(int64_t hs, const float* q, int64_t g, const cache_blocks<T>& cache, int64_t ctx,
                   int64_t span, float scale, float* scores, float* out);

extern template void attend_cached<float>(int64_t, const float*, int64_t,
                                          const cache_blocks<float>&, int64_t, int64_t, float,
                                          float*, float*);
extern template void attend_cached<uint16_t>(int64_t, const float*, int64_t,
                                             const cache_blocks<uint16_t>&, int64_t, int64_t, float,
                                             float*, float*);

}  // namespace conveyor::kernels
