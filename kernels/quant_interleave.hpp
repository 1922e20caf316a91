// The interleaved layouts the quantized product keeps Q4_K and Q6_K weights in (quant_matmul.hpp):
// the blocks of 8 weight rows side by side, so that a 256-bit vector holds 4 consecutive numbers
// of each of the 8 rows and one vpdpbusd multiplies them with 4 numbers of an input row (the
// lanes are the 8 output columns: no sums across lanes). The same bytes as ggml's blocks, packed
// otherwise: a row group of 8 rows takes 8 times a row's bytes (the last group padded with rows
// of zeros).
//
// Q4_K, 1152 bytes per block b of a group (8 ggml blocks of 144):
//   [0, 16)     d of rows 0..7 (float16)
//   [16, 32)    dmin of rows 0..7 (float16)
//   [32, 96)    byte 8j + c: the low 4 bits of row c's scale of sub-block j (32 numbers), and in
//               its high 4 bits those of the min
//   [96, 128)   byte 8j + c (j < 4): the high 2 bits of the scale and min of sub-block j (bits
//               0-1, 2-3) and of sub-block j + 4 (bits 4-5, 6-7)
//   [128, 1152) for i = 0..3, k = 0..7, 32 bytes at 128 + 32 (8i + k): byte 4c + e holds row c's
//               number 64i + 4k + e (low 4 bits) and 64i + 32 + 4k + e (high 4 bits)
// Q6_K, 1680 bytes per block b of a group (8 ggml blocks of 210):
//   [0, 16)     d of rows 0..7 (float16)
//   [16, 144)   for p = 0..7, 16 bytes: the int8 scales of groups 2p and 2p + 1 (16 numbers each)
//               of row c at bytes 16 + 16p + 2c and + 1
//   [144, 1680) for t = 0..3, 384 bytes at 144 + 384t, numbers 64t .. 64t + 63:
//               for u = 0..7, 32 bytes at 32u: byte 4c + e holds the low 4 bits of row c's number
//               64t + 4u + e (low 4 bits) and of 64t + 32 + 4u + e (high 4 bits);
//               for v = 0..3, 32 bytes at 256 + 32v: byte 4c + e holds the high 2 bits of row c's
//               number 64t + 4 (v + 4s) + e in bits 2s, 2s + 1 (s = 0..3)
#pragma once

#include <cstdint>

#include "kernels/quant_blocks.hpp"

namespace conveyor::kernels {

/// Rows whose blocks lie side by side.
constexpr int64_t interleaved_rows = 8;

/// Whether products over `type` keep its weights interleaved.
inline bool interleaved(quant_type type) {
  return type == quant_type::q4_k || type == quant_type::q6_k;
}

/// `out` rows of `blocks` ggml blocks of `type` (Q4_K or Q6_K) at `rows`, row after row,
/// interleaved into `dst`: ceil(out / 8) groups, each `blocks` interleaved blocks.
void interleave_rows(quant_type type, const uint8_t* rows, int64_t blocks, int64_t out,
                     uint8_t* dst);

/// Row c (0..7) of interleaved Q4_K block `block`: its 256 numbers (0..15), the scales and mins
/// of its 8 sub-blocks, d and dmin.
void read_interleaved_q4_k(const uint8_t* block, int c, uint8_t q[256], uint8_t scales[8],
                           uint8_t mins[8], float& d, float& dmin);

/// Row c (0..7) of interleaved Q6_K block `block`: its 256 numbers (0..63, before the offset of
/// -32), the scales of its 16 groups, d.
void read_interleaved_q6_k(const uint8_t* block, int c, uint8_t q[256], int8_t scales[16],
                           float& d);

}  // namespace conveyor::kernels
