// The product over quantized weights (see quant_matmul.hpp): the input rows quantized to 8 bits,
// then one kernel per instruction set over (weight rows) x (input rows), chosen at run time.
#include "kernels/quant_matmul.hpp"
#include "kernels/huge_pages.hpp"
#include "kernels/parallel_grain.hpp"
#include "kernels/quant_matmul_kernels.hpp"
#include "kernels/work_pool.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace conveyor::kernels {

namespace {

// Input rows per task: their quantized numbers stay in the core's cache while its weight rows
// stream past.
constexpr int64_t chunk_rows = 64;
// Weight rows per task.
constexpr int64_t row_group = 16;
// Rows below which a task costs about what streaming its weight rows costs.
constexpr int64_t streaming_rows = 4;

std::atomic<uint8_t> isa_limit{uint8_t(quant_isa::avx512_vnni)};

// Bit i: the processor runs quant_isa(i).
uint8_t detect_isas() {
  uint8_t isas = 1u << uint8_t(quant_isa::scalar);
#if CONVEYOR_QUANT_VECTOR_KERNELS
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  if (!avx2) return isas;
  isas |= 1u << uint8_t(quant_isa::avx2);
  if (__builtin_cpu_supports("avxvnni")) isas |= 1u << uint8_t(quant_isa::avx_vnni);
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni"))
    isas |= 1u << uint8_t(quant_isa::avx512_vnni);
#endif
  return isas;
}

uint8_t processor_isas() {
  static const uint8_t isas = detect_isas();
  return isas;
}

// The best of the processor's instruction sets at or below `limit`.
quant_isa best_upto(uint8_t limit) {
  for (int i = limit; i > 0; --i)
    if (processor_isas() & (1u << i)) return quant_isa(i);
  return quant_isa::scalar;
}

// One block of 8-bit inputs: round(x / d) with d = max |x| / 127 (0 for a block of zeros), as
// ggml's quantize_row_q8_0 computes it but with d kept in float32. Rounding half away from zero
// as roundf does, in operations that vectorize: x / d lies within [-127, 127] (and a rounding),
// so truncation to int is exact and so is the remainder.
void quantize_input_block(const float* x, int64_t n, int8_t* q, float* d) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float scale = amax / 127.0f;
  const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] * inverse;
    const int32_t t = int32_t(v);
    const float rest = v - float(t);
    const int32_t r = t + int32_t(rest >= 0.5f) - int32_t(rest <= -0.5f);
    q[i] = int8_t(std::min(127, std::max(-127, r)));
  }
  *d = scale;
}

}  // namespace

void quantize_inputs(quant_type type, const float* x, int64_t x_stride, int64_t m, int64_t in,
                     quantized_inputs& out) {
  const int64_t block = type == quant_type::q4_k || type == quant_type::q6_k ? 256 : 32;
  out.m = m;
  out.in = in;
  out.block = block;
  out.q.resize(size_t(m * in));
  out.d.resize(size_t(m * (in / block)));
  out.sums.resize(block == 256 ? size_t(m * (in / 16)) : 0);
  // Rows on the compute pool when there are enough of them.
  parallel_for(m, grain_for(in * 4), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * x_stride;
      for (int64_t b = 0; b < in / block; ++b) {
        const int64_t slot = out.slot(r, b);
        int8_t* q = out.q.data() + slot * block;
        quantize_input_block(xr + b * block, block, q, out.d.data() + slot);
        if (block == 256)
          for (int g = 0; g < 16; ++g) {
            int sum = 0;
            for (int i = 0; i < 16; ++i) sum += q[g * 16 + i];
            out.sums[size_t(slot * 16 + g)] = int16_t(sum);
          }
      }
    }
  });
}

namespace scalar {

namespace {

uint16_t read_u16(const uint8_t* p) {
  return uint16_t(p[0] | (p[1] << 8));
}

void scale_min_k4(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// One weight row times one input row, block after block.
float dot_row(quant_type type, const uint8_t* w, const quantized_inputs& a, int64_t r) {
  const int64_t blocks = a.in / a.block;
  float acc = 0.0f;
  switch (type) {
    case quant_type::q8_0:
      for (int64_t b = 0; b < blocks; ++b, w += 34) {
        const int8_t* x = a.q_at(r, b);
        int32_t sum = 0;
        for (int i = 0; i < 32; ++i) sum += int8_t(w[2 + i]) * x[i];
        acc += float(sum) * (from_f16(read_u16(w)) * a.d_at(r, b));
      }
      break;
    case quant_type::q4_0:
      for (int64_t b = 0; b < blocks; ++b, w += 18) {
        const int8_t* x = a.q_at(r, b);
        int32_t sum = 0;
        for (int i = 0; i < 16; ++i)
          sum += ((w[2 + i] & 0xF) - 8) * x[i] + ((w[2 + i] >> 4) - 8) * x[i + 16];
        acc += float(sum) * (from_f16(read_u16(w)) * a.d_at(r, b));
      }
      break;
    case quant_type::q4_k:
      for (int64_t b = 0; b < blocks; ++b, w += 144) {
        const int8_t* x = a.q_at(r, b);
        const int16_t* sums = a.sums_at(r, b);
        const float d = from_f16(read_u16(w)), dmin = from_f16(read_u16(w + 2));
        const uint8_t* q = w + 16;
        int32_t isum = 0, msum = 0;
        for (int s = 0; s < 8; ++s) {
          int sc, m;
          scale_min_k4(s, w + 4, sc, m);
          const uint8_t* qs = q + 32 * (s / 2);
          const int shift = 4 * (s % 2);
          int32_t dot = 0;
          for (int l = 0; l < 32; ++l) dot += ((qs[l] >> shift) & 0xF) * x[32 * s + l];
          isum += sc * dot;
          msum += m * (sums[2 * s] + sums[2 * s + 1]);
        }
        acc += float(isum) * (d * a.d_at(r, b));
        acc -= float(msum) * (dmin * a.d_at(r, b));
      }
      break;
    case quant_type::q6_k:
      for (int64_t b = 0; b < blocks; ++b, w += 210) {
        const int8_t* x = a.q_at(r, b);
        const uint8_t* ql = w;
        const uint8_t* qh = w + 128;
        const int8_t* sc = reinterpret_cast<const int8_t*>(w + 192);
        int32_t isum = 0;
        for (int n = 0; n < 2; ++n)
          for (int k = 0; k < 4; ++k)
            for (int half = 0; half < 2; ++half) {
              const int g = 8 * n + 2 * k + half;
              int32_t dot = 0;
              for (int l = 16 * half; l < 16 * half + 16; ++l) {
                const uint8_t low = ql[64 * n + l + 32 * (k % 2)];
                const int q =
                    ((k < 2 ? low & 0xF : low >> 4) | (((qh[32 * n + l] >> (2 * k)) & 3) << 4)) -
                    32;
                dot += q * x[128 * n + 32 * k + l];
              }
              isum += sc[g] * dot;
            }
        acc += float(isum) * (from_f16(read_u16(w + 208)) * a.d_at(r, b));
      }
      break;
  }
  return acc;
}

}  // namespace

void multiply_rows(quant_type type, const uint8_t* w, int64_t row_bytes, int64_t first,
                   int64_t last, const quantized_inputs& a, int64_t r0, int64_t rows, float* y,
                   int64_t y_stride, const float* bias, bool accumulate) {
  for (int64_t o = first; o < last; ++o)
    for (int64_t r = r0; r < r0 + rows; ++r) {
      const float dot = dot_row(type, w + o * row_bytes, a, r);
      float& out = y[r * y_stride + o];
      out = accumulate ? out + dot : bias != nullptr ? dot + bias[o] : dot;
    }
}

}  // namespace scalar

const char* quant_isa_name(quant_isa isa) {
  switch (isa) {
    case quant_isa::scalar:
      return "scalar";
    case quant_isa::avx2:
      return "avx2";
    case quant_isa::avx_vnni:
      return "avx-vnni";
    case quant_isa::avx512_vnni:
      return "avx512-vnni";
  }
  return "?";
}

quant_isa quantized_matrix::best_isa() {
  return best_upto(uint8_t(quant_isa::avx512_vnni));
}

bool quantized_matrix::has_isa(quant_isa isa) {
  return (processor_isas() & (1u << uint8_t(isa))) != 0;
}

quant_isa quantized_matrix::isa() {
  return best_upto(isa_limit.load());
}

void quantized_matrix::limit_isa(quant_isa highest) {
  isa_limit.store(uint8_t(highest));
}

int64_t quantized_matrix::packed_bytes(quant_type type, int64_t in, int64_t out) {
  return in / quant_block_elements(type) * quant_block_bytes(type) * out;
}

quantized_matrix::quantized_matrix(quant_type type, const void* rows, int64_t in, int64_t out,
                                   huge_page_arena* arena)
    : type_(type), in_(in), out_(out) {
  if (in <= 0 || in % quant_block_elements(type) != 0 || out <= 0)
    throw std::invalid_argument(std::string("quantized_matrix: ") + quant_type_name(type) +
                                " rows of " + std::to_string(in) + " numbers (" +
                                std::to_string(out) + " rows) are not whole blocks");
  row_bytes_ = in / quant_block_elements(type) * quant_block_bytes(type);
  bytes_ = packed_bytes(type, in, out);
  void* storage;
  if (arena != nullptr) {
    arena_data_ = storage = arena->take(size_t(bytes_));
  } else {
    own_.resize(size_t(bytes_));
    storage = own_.data();
  }
  std::memcpy(storage, rows, size_t(bytes_));
}

void quantized_matrix::multiply(const float* x, int64_t x_stride, int64_t m, float* y,
                                int64_t y_stride, const float* bias, bool accumulate) const {
  if (m <= 0 || out_ <= 0) return;
  // The inputs are quantized once, here, for every task (a buffer per call, so that a product
  // inside another's piece could not overwrite it).
  quantized_inputs inputs;
  quantize_inputs(type_, x, x_stride, m, in_, inputs);
  const quant_isa path = isa();
  const auto* w = static_cast<const uint8_t*>(data());
  const int64_t chunks = (m + chunk_rows - 1) / chunk_rows;
  const int64_t groups = (out_ + row_group - 1) / row_group;
  const int64_t cost = std::max(std::min(m, chunk_rows), streaming_rows) * in_ * row_group;
  parallel_for(chunks * groups, grain_for(cost), [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t chunk = task / groups, group = task % groups;
      const int64_t r0 = chunk * chunk_rows, rows = std::min(chunk_rows, m - r0);
      const int64_t first = group * row_group, last = std::min(out_, first + row_group);
      multiply_rows(path, type_, w, row_bytes_, first, last, inputs, r0, rows, y, y_stride, bias,
                    accumulate);
    }
  });
}

void multiply_rows(quant_isa path, quant_type type, const uint8_t* w, int64_t row_bytes,
                   int64_t first, int64_t last, const quantized_inputs& a, int64_t r0, int64_t rows,
                   float* y, int64_t y_stride, const float* bias, bool accumulate) {
  switch (path) {
#if CONVEYOR_QUANT_VECTOR_KERNELS
    case quant_isa::avx512_vnni:
      avx512_vnni::multiply_rows(type, w, row_bytes, first, last, a, r0, rows, y, y_stride, bias,
                                 accumulate);
      return;
    case quant_isa::avx_vnni:
      avx_vnni::multiply_rows(type, w, row_bytes, first, last, a, r0, rows, y, y_stride, bias,
                              accumulate);
      return;
    case quant_isa::avx2:
      avx2::multiply_rows(type, w, row_bytes, first, last, a, r0, rows, y, y_stride, bias,
                          accumulate);
      return;
#endif
    default:
      scalar::multiply_rows(type, w, row_bytes, first, last, a, r0, rows, y, y_stride, bias,
                            accumulate);
  }
}

}  // namespace conveyor::kernels
