// Inside the product over quantized weights (quant_matmul.cpp): the 8-bit input rows and one
// kernel per instruction set, each computing rows [first, last) of W against a run of input
// rows. The vector kernels are one body (quant_matmul_vector.inc) compiled per instruction set
// (quant_matmul_avx2.cpp, quant_matmul_avx_vnni.cpp, quant_matmul_avx512_vnni.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/quant_matmul.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CONVEYOR_QUANT_VECTOR_KERNELS 1
#else
#define CONVEYOR_QUANT_VECTOR_KERNELS 0
#endif

namespace conveyor::kernels {

/// Input rows quantized per block of `block` numbers (32 for Q8_0 and Q4_0 weights, 256 for the
/// K-quants): q = round(x / d), |q| <= 127, d = max |x| / 127 in float32; for blocks of 256 also
/// the sum of each 16 q. Rows are stored in groups of `group_rows` (the last group may have
/// fewer): block b of each row of a group, row after row, then block b + 1, so that a kernel
/// finds a tile of rows at fixed offsets from one pointer.
struct quantized_inputs {
  static constexpr int64_t group_rows = 8;

  int64_t m = 0;
  int64_t in = 0;
  int64_t block = 32;
  std::vector<int8_t> q;      ///< m * in
  std::vector<float> d;       ///< m * in / block
  std::vector<int16_t> sums;  ///< m * in / 16 for blocks of 256

  /// Rows in the group of row r.
  int64_t rows_in_group(int64_t r) const {
    const int64_t first = r / group_rows * group_rows;
    return m - first < group_rows ? m - first : group_rows;
  }

  /// Where block b of row r is, counted in blocks.
  int64_t slot(int64_t r, int64_t b) const {
    const int64_t first = r / group_rows * group_rows;
    return first * (in / block) + b * rows_in_group(r) + (r - first);
  }

  const int8_t* q_at(int64_t r, int64_t b) const { return q.data() + slot(r, b) * block; }
  float d_at(int64_t r, int64_t b) const { return d[size_t(slot(r, b))]; }
  const int16_t* sums_at(int64_t r, int64_t b) const {
    return sums.data() + slot(r, b) * (block / 16);
  }
};

/// Rows [0, m) of x (`in` numbers each, rows `x_stride` apart) quantized for weights of `type`.
void quantize_inputs(quant_type type, const float* x, int64_t x_stride, int64_t m, int64_t in,
                     quantized_inputs& out);

/// y[r, o] for o in [first, last), r in [r0, r0 + rows): weight row o (at w + o * row_bytes)
/// times input row r, plus bias[o], or added to y with `accumulate`; on the kernel of `path`.
void multiply_rows(quant_isa path, quant_type type, const uint8_t* w, int64_t row_bytes,
                   int64_t first, int64_t last, const quantized_inputs& a, int64_t r0, int64_t rows,
                   float* y, int64_t y_stride, const float* bias, bool accumulate);

#define CONVEYOR_QUANT_KERNEL_DECLARATION                                                         \
  void multiply_rows(quant_type type, const uint8_t* w, int64_t row_bytes, int64_t first,         \
                     int64_t last, const quantized_inputs& a, int64_t r0, int64_t rows, float* y, \
                     int64_t y_stride, const float* bias, bool accumulate);

namespace scalar {
CONVEYOR_QUANT_KERNEL_DECLARATION
}
namespace avx2 {
CONVEYOR_QUANT_KERNEL_DECLARATION
}
namespace avx_vnni {
CONVEYOR_QUANT_KERNEL_DECLARATION
}
namespace avx512_vnni {
CONVEYOR_QUANT_KERNEL_DECLARATION
}

#undef CONVEYOR_QUANT_KERNEL_DECLARATION

}  // namespace conveyor::kernels
