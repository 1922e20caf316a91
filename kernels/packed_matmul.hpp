// Weight matrices packed once at load into the layout the CPU kernel reads, and the matrix
// product y = x W over them: the plain-loop network's five products per layer and its classifier.
// BLAS libraries without a pre-packed interface (OpenBLAS) repack the weights on every call;
// packing once removes that, and the kernel keeps a block of rows by three vectors of columns in
// registers. Weights in float32 (the exact reference) or bfloat16 (half the bytes, widened to
// float32 in registers; products and sums stay float32), or bfloat16 weights and inputs summed
// in float32 by AVX-512 BF16's dot product (twice the products per instruction).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace conveyor::kernels {

class huge_page_arena;

/// How a packed matrix stores its numbers.
enum class weight_format : uint8_t {
  f32,   ///< float32: the products equal an unpacked float32 product up to summation order
  bf16,  ///< bfloat16, rounded to nearest even from float32 at packing
  /// bfloat16 weights (as `bf16`) and inputs: each input is rounded to bfloat16 too (those
  /// below float32's normal range become 0), and each output sums the products of pairs of
  /// inputs in float32 as AVX-512 BF16's `vdpbf16ps` does (per pair, the odd input's product,
  /// then the even one's; each product is exact). Where the processor lacks the instruction,
  /// plain vector code does the same arithmetic: the same bits, but for sums below float32's
  /// normal range, which the instruction flushes to zero.
  bf16_dot,
};

/// A weight matrix W [in, out] (row-major: `in` rows of `out` columns) packed in panels of
/// `panel_width` columns, each panel `in` runs of `panel_width` contiguous numbers (`bf16_dot`:
/// in/2 runs, rounded up, of `panel_width` pairs of rows, a column's two numbers side by side);
/// the last panel is padded with zeros. Immutable after construction, so any thread may
/// multiply.
class packed_matrix {
 public:
  /// Columns per panel: three vectors of 16 floats.
  static constexpr int64_t panel_width = 48;

  packed_matrix() = default;

  /// Packs `w` ([in, out], row `i` at w + i * row_stride) in `format`: into memory of its own,
  /// or, given an `arena` (kernels/huge_pages.hpp), into the arena's next `packed_bytes`, the
  /// arena outliving this matrix and its copies.
  packed_matrix(const float* w, int64_t in, int64_t out, int64_t row_stride, weight_format format,
                huge_page_arena* arena = nullptr);

  /// Packs W given as its `out` rows of `in` numbers (W^T, as a PyTorch Linear or a checkpoint
  /// keeps it: W's column c at rows + c * row_stride), each of W's rows i scaled by `scale[i]`
  /// when given (an RMSNorm's weight folded in); as the constructor otherwise.
  static packed_matrix from_rows(const float* rows, int64_t in, int64_t out, int64_t row_stride,
                                 const float* scale, weight_format format,
                                 huge_page_arena* arena = nullptr);

  /// The bytes an `in` x `out` matrix takes packed in `format`.
  static int64_t packed_bytes(int64_t in, int64_t out, weight_format format);

  /// Rows of W (the length of an input row).
  int64_t in() const { return in_; }

  /// Columns of W (the length of an output row).
  int64_t out() const { return out_; }

  weight_format format() const { return format_; }

  /// Bytes the packed numbers take (padding included).
  int64_t bytes() const;

  /// y[m, out] = x[m, in] W, plus `bias[out]` when not null; with `accumulate`, y += x W
  /// instead (bias ignored). Each row of y is summed in the same order whatever m and the
  /// other rows, so a row's result does not depend on the batch it is computed in. Rows of x
  /// are `x_stride` floats apart, rows of y `y_stride`. Runs on the compute pool
  /// (work_pool.hpp) when the product is large enough to pay for it.
  void multiply(const float* x, int64_t x_stride, int64_t m, float* y, int64_t y_stride,
                const float* bias = nullptr, bool accumulate = false) const;

  /// Where the packed weights are.
  const void* data() const;

  /// Whether a product of `m` rows by an `in` x `out` matrix is large enough for `multiply` to
  /// wake a sleeping worker of the compute pool (a smaller one is shared only with workers
  /// that are polling already, or runs on its caller alone).
  static bool wakes_pool(int64_t m, int64_t in, int64_t out);

  /// Whether `bf16_dot` products run on AVX-512 BF16's instruction: true where the processor
  /// has it, unless turned off (tests compare the two ways).
  static bool bf16_dot_instruction();

  /// Turns the instruction off (or on again, where the processor has it) for every product.
  static void use_bf16_dot_instruction(bool on);

 private:
  // Storage for an `in` x `out` matrix in `format`, zeroed.
  packed_matrix(int64_t in, int64_t out, weight_format format, huge_page_arena* arena);
  // Fills the storage with value(i, c) = W[i][c], `run` rows of a panel at a time.
  template <class Value>
  void pack(Value value, int64_t run);

  int64_t in_ = 0;
  int64_t out_ = 0;
  int64_t panels_ = 0;
  weight_format format_ = weight_format::f32;
  std::vector<uint8_t> own_;         // the packed weights, unless in an arena
  const void* arena_data_ = nullptr;  // the packed weights in an arena
  int64_t bytes_ = 0;
};

/// `x` rounded to the nearest bfloat16 (ties to even), as its 16 bits; NaN stays NaN. Inline:
/// the plain-loop network rounds every key and value it caches in bfloat16 with it.
inline uint16_t to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return uint16_t((bits >> 16) | 0x0040u);  // a quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);        // round to nearest, ties to even
  return uint16_t(bits >> 16);
}

/// The float32 value of bfloat16 bits.
inline float from_bf16(uint16_t bits) {
  const uint32_t wide = uint32_t{bits} << 16;
  float x;
  std::memcpy(&x, &wide, sizeof(x));
  return x;
}

}  // namespace conveyor::kernels
