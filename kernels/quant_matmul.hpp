// The matrix product over ggml's quantized weights (Q8_0, Q4_0, Q4_K, Q6_K; quant_blocks.hpp), as
// llama.cpp's CPU backend computes it: each row of the input is quantized per block to 8 bits
// (blocks of 32 with a float scale for Q8_0 and Q4_0 weights, blocks of 256 with sums per 16 for
// the K-quants), the weights' 4-, 6- and 8-bit numbers are multiplied with those in integers
// (exact), and each block's integer sum is scaled in float32. The weights stay in ggml's blocks
// (Q4_K and Q6_K: 8 rows' blocks interleaved, the same bytes), so a decode step reads 4.5 (Q4_0,
// Q4_K), 6.6 (Q6_K) or 8.5 (Q8_0) bits per weight instead of 16.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/quant_blocks.hpp"

namespace conveyor::kernels {

class huge_page_arena;

/// The instruction sets the products can run on, lowest first. Every one computes the same
/// integer sums; the vector ones (`avx2`, `avx_vnni`, `avx512_vnni`) also scale and add them in
/// the same float32 order, so they give the same bits; `scalar` adds Q8_0 and Q4_0 block by
/// block, and Q4_K and Q6_K in the vector kernels' order (the same bits there too).
enum class quant_isa : uint8_t {
  scalar,       ///< plain C++: every processor
  avx2,         ///< vpmaddubsw + vpmaddwd (AVX2, FMA, F16C)
  avx_vnni,     ///< vpdpbusd / vpdpwssd on 256 bits (AVX-VNNI: Alder Lake, Zen 5)
  avx512_vnni,  ///< vpdpbusd / vpdpwssd with AVX-512 VL (Ice Lake, Zen 4); Q6_K on 512 bits
};

/// The name of `isa`: "scalar", "avx2", "avx-vnni", "avx512-vnni".
const char* quant_isa_name(quant_isa isa);

/// A weight matrix W [out, in]: `out` rows of `in` numbers (`in` a multiple of the type's
/// block), each row `in / block` blocks as a GGUF tensor stores them (ggml's dims {in, out}).
/// Copied once into memory of its own or the arena's next `packed_bytes`, the arena outliving
/// this matrix and its copies: Q8_0 and Q4_0 as ggml's blocks are, Q4_K and Q6_K with the blocks
/// of 8 rows interleaved (quant_interleave.hpp), so that a batch's kernel multiplies 8 weight
/// rows in the lanes of one vector. Immutable after construction, so any thread may multiply.
class quantized_matrix {
 public:
  quantized_matrix() = default;

  /// W from `rows` (out * in / block blocks, row after row). Throws std::invalid_argument when
  /// `in` is not a positive multiple of the block or `out` is not positive.
  quantized_matrix(quant_type type, const void* rows, int64_t in, int64_t out,
                   huge_page_arena* arena = nullptr);

  /// The bytes an `in` x `out` matrix of `type` takes (Q4_K and Q6_K: whole groups of 8 rows).
  static int64_t packed_bytes(quant_type type, int64_t in, int64_t out);

  /// Numbers per row of W (the length of an input row).
  int64_t in() const { return in_; }

  /// Rows of W (the length of an output row).
  int64_t out() const { return out_; }

  quant_type type() const { return type_; }

  /// Bytes the blocks take (Q4_K and Q6_K: `out` rounded up to a multiple of 8 rows).
  int64_t bytes() const { return bytes_; }

  /// Where the blocks are.
  const void* data() const { return arena_data_ ? arena_data_ : own_.data(); }

  /// y[m, out] = x[m, in] W^T, plus `bias[out]` when not null; with `accumulate`, y += x W^T
  /// instead (bias ignored). Each row of y is computed by the same operations in the same order
  /// whatever m and the other rows (batch-invariant, bit for bit). Rows of x are `x_stride`
  /// floats apart, rows of y `y_stride`. Runs on the compute pool (work_pool.hpp) when the
  /// product is large enough to pay for it.
  void multiply(const float* x, int64_t x_stride, int64_t m, float* y, int64_t y_stride,
                const float* bias = nullptr, bool accumulate = false) const;

  /// The instruction set the products run on now: the best this processor has, at most the
  /// limit.
  static quant_isa isa();

  /// The best instruction set this processor has.
  static quant_isa best_isa();

  /// Whether this processor runs `isa` (AVX-512 VNNI does not imply AVX-VNNI: Zen 4 has the
  /// first only).
  static bool has_isa(quant_isa isa);

  /// Products run on the best instruction set this processor has at or below `highest` from now
  /// on (tests compare every path the processor has); best_isa() lifts the limit.
  static void limit_isa(quant_isa highest);

 private:
  quant_type type_ = quant_type::q8_0;
  int64_t in_ = 0;
  int64_t out_ = 0;
  int64_t row_bytes_ = 0;
  std::vector<uint8_t> own_;          // the blocks, unless in an arena
  const void* arena_data_ = nullptr;  // the blocks in an arena
  int64_t bytes_ = 0;
};

}  // namespace conveyor::kernels
