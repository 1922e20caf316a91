// Eight-wide float vectors (GCC vector extensions) for the plain loops of the CPU network
// (cache_attention.cpp, llama_loops.cpp): loads of float32 and bf16, an exponential that
// vectorizes, and the clones for x86-64-v3. Internal to model/: include only from .cpp files.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace conveyor::kernels::vec8 {

// The eight-wide vector helpers below are internal (inlined, never called across a library
// boundary), so the ABI note GCC gives for vector returns without AVX does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

// Functions marked with this are compiled twice on x86-64: for the baseline and for x86-64-v3
// (AVX2 + FMA); the loader picks what the processor runs. Other targets get the baseline.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CONVEYOR_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CONVEYOR_VECTOR_CLONES
#endif

// A lambda inside a kernel clone is not cloned: inlined, it is compiled for the clone's target
// (else it would take the baseline's, and rows would round differently by block size).
#define CONVEYOR_INLINE_LAMBDA __attribute__((always_inline))

using v8f = float __attribute__((vector_size(32)));
using v8i = int32_t __attribute__((vector_size(32)));
using v8u16 = uint16_t __attribute__((vector_size(16)));
using v8u32 = uint32_t __attribute__((vector_size(32)));

inline v8f load8(const float* p) {
  v8f v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Eight bf16 widened to float32: each one's 16 bits become the high half of a float (zero
// extended to 32 bits, shifted left by 16), as from_bf16 does one at a time.
inline v8f load8(const uint16_t* p) {
  v8u16 h;
  std::memcpy(&h, p, sizeof(h));
  const v8u32 bits = __builtin_convertvector(h, v8u32) << 16;
  v8f v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

inline void store8(float* p, v8f v) {
  std::memcpy(p, &v, sizeof(v));
}

// exp_nonpositive on eight lanes.
inline v8f exp8_nonpositive(v8f x) {
  const v8f floor_x = x * 0.0f - 87.0f;
  x = x < floor_x ? floor_x : x;
  const v8f y = x * 1.44269504088896341f + 0.5f;
  v8i ni = __builtin_convertvector(y, v8i);      // toward zero
  ni += (__builtin_convertvector(ni, v8f) > y);  // -1 where that rounded up: floor
  const v8f n = __builtin_convertvector(ni, v8f);
  const v8f r = x - n * 0.693359375f + n * 2.12194440e-4f;
  v8f p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const v8i bits = (ni + 127) << 23;
  v8f two_n;
  std::memcpy(&two_n, &bits, sizeof(two_n));
  return p * two_n;
}

// exp(x) for x <= 0 in straight-line code that vectorizes (std::exp does not without
// -ffast-math): Cephes' expf, range reduction by ln 2 and a degree-6 polynomial, within 2 ulp.
inline float exp_nonpositive(float x) {
  x = std::max(x, -87.0f);
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, sizeof(two_n));
  return p * two_n;
}

}  // namespace conveyor::kernels::vec8
