// The quantized-weight product's vector kernels (quant_matmul_vector.inc) for processors with
// AVX2, FMA and F16C (Haswell, Zen); chosen at run time by quant_matmul.cpp.
#include "kernels/quant_matmul_kernels.hpp"

#if CONVEYOR_QUANT_VECTOR_KERNELS
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#pragma GCC target("avx2,fma,f16c")
#pragma GCC diagnostic ignored "-Wpsabi"
#define CONVEYOR_QUANT_NS avx2
#define CONVEYOR_QUANT_ISA 1
#include "kernels/quant_matmul_vector.inc"
#endif
