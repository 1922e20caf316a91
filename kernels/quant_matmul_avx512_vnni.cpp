// The quantized-weight product's vector kernels (quant_matmul_vector.inc) for processors with
// AVX-512 VL, BW and VNNI (Ice Lake and later, Zen 4); chosen at run time by quant_matmul.cpp.
#include "kernels/quant_matmul_kernels.hpp"

#if CONVEYOR_QUANT_VECTOR_KERNELS
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#pragma GCC target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")
#pragma GCC diagnostic ignored "-Wpsabi"
// GCC 12's AVX-512 headers start some intrinsics from _mm512_undefined_epi32(), which its own
// flow analysis then reports as maybe uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define CONVEYOR_QUANT_NS avx512_vnni
#define CONVEYOR_QUANT_ISA 3
#include "kernels/quant_matmul_vector.inc"
#endif
