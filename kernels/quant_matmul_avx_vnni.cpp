// The quantized-weight product's vector kernels (quant_matmul_vector.inc) for processors with
// AVX-VNNI (Alder Lake and later, Zen 5); chosen at run time by quant_matmul.cpp.
#include "kernels/quant_matmul_kernels.hpp"

#if CONVEYOR_QUANT_VECTOR_KERNELS
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#pragma GCC target("avx2,fma,f16c,avxvnni")
#pragma GCC diagnostic ignored "-Wpsabi"
#define CONVEYOR_QUANT_NS avx_vnni
#define CONVEYOR_QUANT_ISA 2
#include "kernels/quant_matmul_vector.inc"
#endif
