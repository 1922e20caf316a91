// The packed weight layout and its matrix-product kernel (see packed_matmul.hpp).
#include "kernels/packed_matmul.hpp"
#include "kernels/blas_kernels.hpp"
#include "kernels/huge_pages.hpp"
#include "kernels/parallel_grain.hpp"
#include "kernels/vector8.hpp"
#include "kernels/work_pool.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define CONVEYOR_BF16_DOT_INSTRUCTION 1
#endif

namespace conveyor::kernels {

namespace {

// The vector helpers below are internal (inlined into the kernel clones), so the ABI note GCC
// gives for vector arguments without AVX does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

// The kernel is compiled three times on x86-64: AVX-512 (x86-64-v4), AVX2 + FMA (x86-64-v3) and
// the baseline; the loader picks what the processor runs.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CONVEYOR_MATMUL_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CONVEYOR_MATMUL_CLONES
#endif

#define CONVEYOR_INLINE inline __attribute__((always_inline))

using v16f = float __attribute__((vector_size(64)));
using v16u16 = uint16_t __attribute__((vector_size(32)));
using v16u32 = uint32_t __attribute__((vector_size(64)));

constexpr int64_t width = packed_matrix::panel_width;
constexpr int64_t vectors = width / 16;
static_assert(vectors == 3, "the kernel keeps three vectors of columns per row");
// Rows of x per register block: 8 x 3 accumulators, 3 weight vectors and a broadcast fit the 32
// registers of AVX-512 (fewer registers spill a little; still correct).
constexpr int64_t block_rows = 8;
// Rows of x per task: their inputs stay in the core's cache while its panels stream past.
constexpr int64_t chunk_rows = 128;
// Rows below which a task costs about what streaming its panel of weights costs.
constexpr int64_t streaming_rows = 4;

CONVEYOR_INLINE v16f load(const float* p) {
  v16f v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Sixteen bfloat16 widened to float32: the 16 bits become the high half of each float.
CONVEYOR_INLINE v16f load(const uint16_t* p) {
  v16u16 h;
  std::memcpy(&h, p, sizeof(h));
  const v16u32 bits = __builtin_convertvector(h, v16u32) << 16;
  v16f v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

CONVEYOR_INLINE void store(float* p, v16f v) { std::memcpy(p, &v, sizeof(v)); }

// The sums of R rows of one panel's `cols` columns start from y (accumulate), or the bias, or 0.
template <int R>
CONVEYOR_INLINE void start_sums(v16f (&acc)[R][vectors], float* row, const float* y,
                                int64_t y_stride, int64_t cols, const float* bias,
                                bool accumulate) {
  if (accumulate) {
    for (int r = 0; r < R; ++r) {
      const float* src = y + r * y_stride;
      if (cols < width) {
        std::fill(row, row + width, 0.0f);
        std::memcpy(row, src, size_t(cols) * sizeof(float));
        src = row;
      }
      for (int c = 0; c < vectors; ++c) acc[r][c] = load(src + 16 * c);
    }
  } else {
    std::fill(row, row + width, 0.0f);
    if (bias != nullptr) std::memcpy(row, bias, size_t(cols) * sizeof(float));
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < vectors; ++c) acc[r][c] = load(row + 16 * c);
  }
}

// The sums into R rows of y (`cols` columns of each).
template <int R>
CONVEYOR_INLINE void store_sums(const v16f (&acc)[R][vectors], float* row, float* y,
                                int64_t y_stride, int64_t cols) {
  for (int r = 0; r < R; ++r) {
    float* dst = y + r * y_stride;
    if (cols == width) {
      for (int c = 0; c < vectors; ++c) store(dst + 16 * c, acc[r][c]);
    } else {
      for (int c = 0; c < vectors; ++c) store(row + 16 * c, acc[r][c]);
      std::memcpy(dst, row, size_t(cols) * sizeof(float));
    }
  }
}

// R rows of y (one panel's `cols` columns) = R rows of x times the panel (+ bias, or += y).
template <int R, class T>
CONVEYOR_INLINE void block(const float* __restrict__ x, int64_t x_stride,
                           const T* __restrict__ panel, int64_t k, float* __restrict__ y,
                           int64_t y_stride, int64_t cols, const float* __restrict__ bias,
                           bool accumulate) {
  v16f acc[R][vectors];
  float row[width];
  start_sums<R>(acc, row, y, y_stride, cols, bias, accumulate);
  // Every row sums over the inputs in the same order whatever R: a row's result does not depend
  // on the other rows of the product (the batch it runs in).
  for (int64_t i = 0; i < k; ++i) {
    const T* w = panel + i * width;
    const v16f w0 = load(w), w1 = load(w + 16), w2 = load(w + 32);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float a = x[r * x_stride + i];
      acc[r][0] += a * w0;
      acc[r][1] += a * w1;
      acc[r][2] += a * w2;
    }
  }
  store_sums<R>(acc, row, y, y_stride, cols);
}

// Calls step(r, R) for the blocks of rows [0, m): full blocks of `block_rows`, then the rest.
// `step` must be a CONVEYOR_INLINE_LAMBDA.
template <class Step>
CONVEYOR_INLINE void for_row_blocks(int64_t m, Step&& step) {
  int64_t r = 0;
  for (; r + block_rows <= m; r += block_rows)
    step(r, std::integral_constant<int, block_rows>{});
  switch (m - r) {
#define CONVEYOR_TAIL(R)                       \
  case R:                                      \
    step(r, std::integral_constant<int, R>{}); \
    break;
    CONVEYOR_TAIL(1)
    CONVEYOR_TAIL(2)
    CONVEYOR_TAIL(3)
    CONVEYOR_TAIL(4)
    CONVEYOR_TAIL(5)
    CONVEYOR_TAIL(6)
    CONVEYOR_TAIL(7)
#undef CONVEYOR_TAIL
    default:
      break;
  }
}

// Rows [0, m) of x through panels [first, last).
template <class T>
CONVEYOR_MATMUL_CLONES void multiply_panels(const float* x, int64_t x_stride, int64_t m,
                                            const T* packed, int64_t k, int64_t out, float* y,
                                            int64_t y_stride, const float* bias, bool accumulate,
                                            int64_t first, int64_t last) {
  for (int64_t p = first; p < last; ++p) {
    const T* panel = packed + p * k * width;
    const int64_t col0 = p * width, cols = std::min(width, out - col0);
    const float* b = bias != nullptr ? bias + col0 : nullptr;
    for_row_blocks(m, [&](int64_t r, auto rows) CONVEYOR_INLINE_LAMBDA {
      block<decltype(rows)::value>(x + r * x_stride, x_stride, panel, k,
                                   y + r * y_stride + col0, y_stride, cols, b, accumulate);
    });
  }
}

// -- bf16_dot: pairs of bfloat16 inputs and weights --------------------------------------------

CONVEYOR_INLINE v16u32 load_pairs(const uint16_t* p) {
  v16u32 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

CONVEYOR_INLINE v16f as_floats(v16u32 bits) {
  v16f v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

CONVEYOR_INLINE float as_float(uint32_t bits) {
  float v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

// vdpbf16ps in plain vector code: a is a pair of bfloat16 inputs (the even one in the low half),
// w sixteen columns' pairs of weights; acc += the odd product, then += the even one, as the
// instruction does. Each product of two bfloat16 numbers is exact in float32, so contracting
// them into multiply-adds changes nothing.
CONVEYOR_INLINE v16f dot_pair(v16f acc, uint32_t a, v16u32 w) {
  acc += as_float(a & 0xffff0000u) * as_floats(w & 0xffff0000u);
  acc += as_float(a << 16) * as_floats(w << 16);
  return acc;
}

// R rows of y (one panel's `cols` columns) = R rows of pairs of inputs times the panel's pairs
// of weights (+ bias, or += y).
template <int R>
CONVEYOR_INLINE void block_pairs(const uint32_t* __restrict__ x, int64_t x_stride,
                                 const uint16_t* __restrict__ panel, int64_t pairs,
                                 float* __restrict__ y, int64_t y_stride, int64_t cols,
                                 const float* __restrict__ bias, bool accumulate) {
  v16f acc[R][vectors];
  float row[width];
  start_sums<R>(acc, row, y, y_stride, cols, bias, accumulate);
  for (int64_t i = 0; i < pairs; ++i) {
    const uint16_t* w = panel + i * 2 * width;
    const v16u32 w0 = load_pairs(w), w1 = load_pairs(w + 32), w2 = load_pairs(w + 64);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const uint32_t a = x[r * x_stride + i];
      acc[r][0] = dot_pair(acc[r][0], a, w0);
      acc[r][1] = dot_pair(acc[r][1], a, w1);
      acc[r][2] = dot_pair(acc[r][2], a, w2);
    }
  }
  store_sums<R>(acc, row, y, y_stride, cols);
}

// Rows [0, m) of pairs of inputs (`pairs` per row, rows `pairs` apart) through panels
// [first, last) of a bf16_dot matrix.
CONVEYOR_MATMUL_CLONES void pair_panels_in_vectors(const uint32_t* x, int64_t m,
                                                   const uint16_t* packed, int64_t pairs,
                                                   int64_t out, float* y, int64_t y_stride,
                                                   const float* bias, bool accumulate,
                                                   int64_t first, int64_t last) {
  for (int64_t p = first; p < last; ++p) {
    const uint16_t* panel = packed + p * pairs * 2 * width;
    const int64_t col0 = p * width, cols = std::min(width, out - col0);
    const float* b = bias != nullptr ? bias + col0 : nullptr;
    for_row_blocks(m, [&](int64_t r, auto rows) CONVEYOR_INLINE_LAMBDA {
      block_pairs<decltype(rows)::value>(x + r * pairs, pairs, panel, pairs,
                                         y + r * y_stride + col0, y_stride, cols, b, accumulate);
    });
  }
}

#ifdef CONVEYOR_BF16_DOT_INSTRUCTION
// Compiled for processors with AVX-512 BF16 (chosen at run time). Functions defined here take
// this target, lambdas included; the helpers defined above inline into them.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,avx512bf16")

// block_pairs with the instruction: the same sums, one vdpbf16ps per sixteen columns of a row.
template <int R>
CONVEYOR_INLINE void block_pairs_by_instruction(const uint32_t* __restrict__ x, int64_t x_stride,
                                                const uint16_t* __restrict__ panel,
                                                int64_t pairs, float* __restrict__ y,
                                                int64_t y_stride, int64_t cols,
                                                const float* __restrict__ bias, bool accumulate) {
  v16f acc[R][vectors];
  float row[width];
  start_sums<R>(acc, row, y, y_stride, cols, bias, accumulate);
  __m512 sums[R][vectors];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < vectors; ++c) sums[r][c] = __m512(acc[r][c]);
  for (int64_t i = 0; i < pairs; ++i) {
    const uint16_t* w = panel + i * 2 * width;
    const __m512bh w0 = __m512bh(_mm512_loadu_si512(w)), w1 = __m512bh(_mm512_loadu_si512(w + 32)),
                   w2 = __m512bh(_mm512_loadu_si512(w + 64));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512bh a = __m512bh(_mm512_set1_epi32(int32_t(x[r * x_stride + i])));
      sums[r][0] = _mm512_dpbf16_ps(sums[r][0], a, w0);
      sums[r][1] = _mm512_dpbf16_ps(sums[r][1], a, w1);
      sums[r][2] = _mm512_dpbf16_ps(sums[r][2], a, w2);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < vectors; ++c) acc[r][c] = v16f(sums[r][c]);
  store_sums<R>(acc, row, y, y_stride, cols);
}

// pair_panels_in_vectors with the instruction. Its lambda has this target and for_row_blocks
// the baseline's, so the lambda is called, once per block of rows; every block runs the same
// instruction, so a row's sums do not depend on its block.
void pair_panels_by_instruction(const uint32_t* x, int64_t m, const uint16_t* packed,
                                int64_t pairs, int64_t out, float* y, int64_t y_stride,
                                const float* bias, bool accumulate, int64_t first, int64_t last) {
  for (int64_t p = first; p < last; ++p) {
    const uint16_t* panel = packed + p * pairs * 2 * width;
    const int64_t col0 = p * width, cols = std::min(width, out - col0);
    const float* b = bias != nullptr ? bias + col0 : nullptr;
    for_row_blocks(m, [&](int64_t r, auto rows) {
      block_pairs_by_instruction<decltype(rows)::value>(x + r * pairs, pairs, panel, pairs,
                                                        y + r * y_stride + col0, y_stride, cols,
                                                        b, accumulate);
    });
  }
}

#pragma GCC pop_options

bool processor_has_bf16_dot() {
  return processor_vector_features().avx512_bf16;
}
#else
bool processor_has_bf16_dot() {
  return false;
}
#endif

std::atomic<bool> bf16_dot_allowed{true};

// One input of a bf16_dot product as bfloat16 bits: rounded as the weights are, and numbers
// below float32's normal range made 0 (the instruction reads them so). Branch-free, so that the
// loop below vectorizes.
CONVEYOR_INLINE uint32_t input_bf16(const float* p) {
  uint32_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
  const bool tiny = (bits & 0x7f800000u) == 0;
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  return nan ? (bits >> 16) | 0x0040u : tiny ? (bits >> 16) & 0x8000u : rounded;
}

// The inputs of a bf16_dot product: rows [0, m) of x (k numbers each, rows `x_stride` apart) as
// rows of `pairs` pairs of bfloat16, the even input in the low half (an odd k ends in a 0).
CONVEYOR_MATMUL_CLONES void round_inputs(const float* x, int64_t x_stride, int64_t m, int64_t k,
                                         int64_t pairs, uint32_t* out) {
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * x_stride;
    uint32_t* dst = out + r * pairs;
    for (int64_t i = 0; i < k / 2; ++i)
      dst[i] = input_bf16(xr + 2 * i) | input_bf16(xr + 2 * i + 1) << 16;
    if (k % 2 != 0) dst[pairs - 1] = input_bf16(xr + k - 1);
  }
}

// Rows [0, m) of rounded inputs (`pairs` per row) through panels [first, last).
void multiply_pair_panels(const uint32_t* inputs, int64_t m, const uint16_t* packed,
                          int64_t pairs, int64_t out, float* y, int64_t y_stride,
                          const float* bias, bool accumulate, int64_t first, int64_t last) {
#ifdef CONVEYOR_BF16_DOT_INSTRUCTION
  if (packed_matrix::bf16_dot_instruction()) {
    pair_panels_by_instruction(inputs, m, packed, pairs, out, y, y_stride, bias, accumulate,
                               first, last);
    return;
  }
#endif
  pair_panels_in_vectors(inputs, m, packed, pairs, out, y, y_stride, bias, accumulate, first,
                         last);
}

// The work of one task of a product of `m` rows by a matrix of `k` rows. Tasks are (row chunk,
// panel) pairs, panels innermost; a thread takes a run of them, so that a small product stays on
// one thread. A task streams its panel of weights whatever its rows: below `streaming_rows` it is
// costed as that many, so that a one-row product of a large matrix (memory-bound) splits and a
// small matrix's product (a few microseconds) does not.
int64_t task_cost(int64_t m, int64_t k) {
  return std::max(std::min(m, chunk_rows), streaming_rows) * std::max<int64_t>(k, 1) * width;
}

// y = x W over every panel, split into tasks on the compute pool; `pairs`: W is bf16_dot's.
template <class T>
void multiply_all(const float* x, int64_t x_stride, int64_t m, const T* packed, int64_t k,
                  int64_t out, int64_t panels, float* y, int64_t y_stride, const float* bias,
                  bool accumulate, bool pairs = false) {
  if (m <= 0 || out <= 0) return;
  const int64_t chunks = (m + chunk_rows - 1) / chunk_rows;
  const int64_t grain = grain_for(task_cost(m, k));
  // bf16_dot's inputs are rounded once, here, for every task (the caller waits for them). A
  // buffer per call, so that a product inside another's piece could not overwrite it.
  const int64_t input_pairs = (k + 1) / 2;
  std::vector<uint32_t> inputs;
  if (pairs) {
    inputs.resize(size_t(m * input_pairs));
    round_inputs(x, x_stride, m, k, input_pairs, inputs.data());
  }
  parallel_for(chunks * panels, grain, [&](int64_t begin, int64_t end) {
    while (begin < end) {
      const int64_t chunk = begin / panels, first = begin % panels;
      const int64_t last = std::min(panels, first + (end - begin));
      const int64_t row0 = chunk * chunk_rows, rows = std::min(chunk_rows, m - row0);
      if constexpr (std::is_same_v<T, uint16_t>) {
        if (pairs) {
          multiply_pair_panels(inputs.data() + row0 * input_pairs, rows, packed, input_pairs,
                               out, y + row0 * y_stride, y_stride, bias, accumulate, first, last);
          begin += last - first;
          continue;
        }
      }
      multiply_panels(x + row0 * x_stride, x_stride, rows, packed, k, out,
                      y + row0 * y_stride, y_stride, bias, accumulate, first, last);
      begin += last - first;
    }
  });
}

}  // namespace

bool packed_matrix::wakes_pool(int64_t m, int64_t in, int64_t out) {
  if (m <= 0 || out <= 0) return false;
  const int64_t tasks = (m + chunk_rows - 1) / chunk_rows * ((out + width - 1) / width);
  return tasks >= 2 * grain_for(task_cost(m, in));  // work_pool::run's test for waking
}

int64_t packed_matrix::packed_bytes(int64_t in, int64_t out, weight_format format) {
  const int64_t panels = (out + width - 1) / width;
  if (format == weight_format::f32) return panels * in * width * int64_t(sizeof(float));
  if (format == weight_format::bf16) return panels * in * width * int64_t(sizeof(uint16_t));
  return panels * ((in + 1) / 2) * 2 * width * int64_t(sizeof(uint16_t));
}

packed_matrix::packed_matrix(const float* w, int64_t in, int64_t out, int64_t row_stride,
                             weight_format format, huge_page_arena* arena)
    : packed_matrix(in, out, format, arena) {
  pack([&](int64_t i, int64_t c) { return w[i * row_stride + c]; }, 1);
}

packed_matrix packed_matrix::from_rows(const float* rows, int64_t in, int64_t out,
                                       int64_t row_stride, const float* scale, weight_format format,
                                       huge_page_arena* arena) {
  packed_matrix p(in, out, format, arena);
  // A whole source row (one of W's columns) at a time: read in order, written into the panel.
  if (scale != nullptr)
    p.pack([&](int64_t i, int64_t c) { return rows[c * row_stride + i] * scale[i]; }, in);
  else
    p.pack([&](int64_t i, int64_t c) { return rows[c * row_stride + i]; }, in);
  return p;
}

packed_matrix::packed_matrix(int64_t in, int64_t out, weight_format format, huge_page_arena* arena)
    : in_(in),
      out_(out),
      panels_((out + width - 1) / width),
      format_(format),
      bytes_(packed_bytes(in, out, format)) {
  // Zeroed (an arena's block starts so): the last panel's columns past `out` stay zero.
  if (arena) {
    arena_data_ = arena->take(size_t(bytes_));
  } else {
    own_.resize(size_t(bytes_));
  }
}

template <class Value>
void packed_matrix::pack(Value value, int64_t run) {
  void* storage = const_cast<void*>(data());
  const int64_t in = in_, out = out_;
  // Panel by panel on the compute pool: each writes only its own panel.
  auto each_panel = [&](auto store) {
    parallel_for(panels_, 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const int64_t col0 = p * width, cols = std::min(width, out - col0);
        for (int64_t i0 = 0; i0 < in; i0 += run) {
          const int64_t i1 = std::min(in, i0 + run);
          for (int64_t c = 0; c < cols; ++c)
            for (int64_t i = i0; i < i1; ++i) store(p, i, c, value(i, col0 + c));
        }
      }
    });
  };
  if (format_ == weight_format::f32) {
    auto* dst = static_cast<float*>(storage);
    each_panel(
        [&](int64_t p, int64_t i, int64_t c, float v) { dst[(p * in + i) * width + c] = v; });
  } else if (format_ == weight_format::bf16) {
    auto* dst = static_cast<uint16_t*>(storage);
    each_panel([&](int64_t p, int64_t i, int64_t c, float v) {
      dst[(p * in + i) * width + c] = to_bf16(v);
    });
  } else {
    // Rows 2i and 2i + 1 side by side in each column; an odd last row pairs with zeros.
    const int64_t pairs = (in + 1) / 2;
    auto* dst = static_cast<uint16_t*>(storage);
    each_panel([&](int64_t p, int64_t i, int64_t c, float v) {
      dst[((p * pairs + i / 2) * width + c) * 2 + i % 2] = to_bf16(v);
    });
  }
}

int64_t packed_matrix::bytes() const { return bytes_; }

const void* packed_matrix::data() const { return arena_data_ ? arena_data_ : own_.data(); }

void packed_matrix::multiply(const float* x, int64_t x_stride, int64_t m, float* y,
                             int64_t y_stride, const float* bias, bool accumulate) const {
  if (format_ == weight_format::f32)
    multiply_all(x, x_stride, m, static_cast<const float*>(data()), in_, out_, panels_, y,
                 y_stride, bias, accumulate);
  else
    multiply_all(x, x_stride, m, static_cast<const uint16_t*>(data()), in_, out_, panels_, y,
                 y_stride, bias, accumulate, format_ == weight_format::bf16_dot);
}

bool packed_matrix::bf16_dot_instruction() {
  static const bool has = processor_has_bf16_dot();
  return has && bf16_dot_allowed.load(std::memory_order_relaxed);
}

void packed_matrix::use_bf16_dot_instruction(bool on) {
  bf16_dot_allowed.store(on);
}

}  // namespace conveyor::kernels
