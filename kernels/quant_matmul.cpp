// The product over quantized weights (see quant_matmul.hpp): the input rows quantized to 8 bits,
// then one kernel per instruction set over (weight rows) x (input rows), chosen at run time.
#include "kernels/quant_matmul.hpp"
#include "kernels/huge_pages.hpp"
#include "kernels/parallel_grain.hpp"
#include "kernels/quant_interleave.hpp"
#include "kernels/quant_matmul_kernels.hpp"
#include "kernels/work_pool.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

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
    case quant_type::q6_k:
      break;  // interleaved: multiply_interleaved
  }
  return acc;
}

// Rows [first, last) of interleaved Q4_K or Q6_K weights: each block of a weight row read once
// and multiplied with every input row; the same operations per (input row, weight row) as the
// vector kernels, so the same bits.
void multiply_interleaved(quant_type type, const uint8_t* w, int64_t row_bytes, int64_t first,
                          int64_t last, const quantized_inputs& a, int64_t r0, int64_t rows,
                          float* y, int64_t y_stride, const float* bias, bool accumulate) {
  const int64_t blocks = a.in / a.block;
  const int64_t block_bytes = row_bytes / blocks * interleaved_rows;
  std::vector<float> acc(static_cast<size_t>(rows));
  uint8_t q[256], scales[8], mins[8];
  int8_t scales6[16];
  for (int64_t o = first; o < last; ++o) {
    const int c = int(o % interleaved_rows);
    const uint8_t* group = w + (o - c) * row_bytes;
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* block = group + b * block_bytes;
      float d = 0.0f, dmin = 0.0f;
      if (type == quant_type::q4_k)
        read_interleaved_q4_k(block, c, q, scales, mins, d, dmin);
      else
        read_interleaved_q6_k(block, c, q, scales6, d);
      for (int64_t r = r0; r < r0 + rows; ++r) {
        const int8_t* x = a.q_at(r, b);
        const int16_t* sums = a.sums_at(r, b);
        const float xd = a.d_at(r, b);
        float& out = acc[size_t(r - r0)];
        if (type == quant_type::q4_k) {
          int32_t isum = 0, msum = 0;
          for (int j = 0; j < 8; ++j) {
            int32_t dot = 0;
            for (int l = 0; l < 32; ++l) dot += q[32 * j + l] * x[32 * j + l];
            isum += scales[j] * dot;
            msum += mins[j] * (sums[2 * j] + sums[2 * j + 1]);
          }
          out = std::fma(float(isum), d * xd, out);
          out = std::fma(-float(msum), dmin * xd, out);
        } else {
          int32_t isum = 0;
          for (int g = 0; g < 16; ++g) {
            int32_t dot = 0;
            for (int l = 0; l < 16; ++l) dot += (q[16 * g + l] - 32) * x[16 * g + l];
            isum += scales6[g] * dot;
          }
          out = std::fma(float(isum), d * xd, out);
        }
      }
    }
    for (int64_t r = r0; r < r0 + rows; ++r) {
      const float dot = acc[size_t(r - r0)];
      float& out = y[r * y_stride + o];
      out = accumulate ? out + dot : bias != nullptr ? dot + bias[o] : dot;
    }
  }
}

}  // namespace

void multiply_rows(quant_type type, const uint8_t* w, int64_t row_bytes, int64_t first,
                   int64_t last, const quantized_inputs& a, int64_t r0, int64_t rows, float* y,
                   int64_t y_stride, const float* bias, bool accumulate) {
  if (interleaved(type)) {
    multiply_interleaved(type, w, row_bytes, first, last, a, r0, rows, y, y_stride, bias,
                         accumulate);
    return;
  }
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
  if (interleaved(type)) out = (out + interleaved_rows - 1) / interleaved_rows * interleaved_rows;
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
  if (interleaved(type))
    interleave_rows(type, static_cast<const uint8_t*>(rows), in / quant_block_elements(type), out,
                    static_cast<uint8_t*>(storage));
  else
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
