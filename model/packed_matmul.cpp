// The packed weight layout and its matrix-product kernel (see packed_matmul.hpp).
#include "model/packed_matmul.hpp"
#include "model/parallel_grain.hpp"
#include "model/work_pool.hpp"

#include <algorithm>
#include <cstring>


namespace conveyor::model {

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

// R rows of y (one panel's `cols` columns) = R rows of x times the panel (+ bias, or += y).
template <int R, class T>
CONVEYOR_INLINE void block(const float* __restrict__ x, int64_t x_stride,
                           const T* __restrict__ panel, int64_t k, float* __restrict__ y,
                           int64_t y_stride, int64_t cols, const float* __restrict__ bias,
                           bool accumulate) {
  v16f acc[R][vectors];
  float row[width];
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
    int64_t r = 0;
    for (; r + block_rows <= m; r += block_rows)
      block<block_rows>(x + r * x_stride, x_stride, panel, k, y + r * y_stride + col0, y_stride,
                        cols, b, accumulate);
    const float* xr = x + r * x_stride;
    float* yr = y + r * y_stride + col0;
    switch (m - r) {
#define CONVEYOR_TAIL(R) \
  case R:                \
    block<R>(xr, x_stride, panel, k, yr, y_stride, cols, b, accumulate); \
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
}

template <class T>
void multiply_all(const float* x, int64_t x_stride, int64_t m, const T* packed, int64_t k,
                  int64_t out, int64_t panels, float* y, int64_t y_stride, const float* bias,
                  bool accumulate) {
  if (m <= 0 || out <= 0) return;
  const int64_t chunks = (m + chunk_rows - 1) / chunk_rows;
  // Tasks are (row chunk, panel) pairs, panels innermost; a thread takes a run of them, so that
  // a small product stays on one thread. A task streams its panel of weights whatever its rows:
  // below `streaming_rows` it is costed as that many, so that a one-row product of a large
  // matrix (memory-bound) splits and a small matrix's product (a few microseconds) does not.
  const int64_t task_cost =
      std::max(std::min(m, chunk_rows), streaming_rows) * std::max<int64_t>(k, 1) * width;
  const int64_t grain = grain_for(task_cost);
  parallel_for(chunks * panels, grain, [&](int64_t begin, int64_t end) {
    while (begin < end) {
      const int64_t chunk = begin / panels, first = begin % panels;
      const int64_t last = std::min(panels, first + (end - begin));
      const int64_t row0 = chunk * chunk_rows, rows = std::min(chunk_rows, m - row0);
      multiply_panels(x + row0 * x_stride, x_stride, rows, packed, k, out,
                      y + row0 * y_stride, y_stride, bias, accumulate, first, last);
      begin += last - first;
    }
  });
}

}  // namespace

packed_matrix::packed_matrix(const float* w, int64_t in, int64_t out, int64_t row_stride,
                             weight_format format)
    : in_(in), out_(out), panels_((out + width - 1) / width), format_(format) {
  const size_t size = size_t(panels_ * in * width);
  auto pack = [&](auto& dst, auto convert) {
    dst.assign(size, convert(0.0f));
    for (int64_t p = 0; p < panels_; ++p) {
      const int64_t col0 = p * width, cols = std::min(width, out - col0);
      for (int64_t i = 0; i < in; ++i) {
        const float* src = w + i * row_stride + col0;
        auto* panel_row = dst.data() + (p * in + i) * width;
        for (int64_t c = 0; c < cols; ++c) panel_row[c] = convert(src[c]);
      }
    }
  };
  if (format == weight_format::f32)
    pack(f32_, [](float v) { return v; });
  else
    pack(bf16_, [](float v) { return to_bf16(v); });
}

int64_t packed_matrix::bytes() const {
  return int64_t(f32_.size() * sizeof(float) + bf16_.size() * sizeof(uint16_t));
}

void packed_matrix::multiply(const float* x, int64_t x_stride, int64_t m, float* y,
                             int64_t y_stride, const float* bias, bool accumulate) const {
  if (format_ == weight_format::f32)
    multiply_all(x, x_stride, m, f32_.data(), in_, out_, panels_, y, y_stride, bias, accumulate);
  else
    multiply_all(x, x_stride, m, bf16_.data(), in_, out_, panels_, y, y_stride, bias, accumulate);
}

}  // namespace conveyor::model
