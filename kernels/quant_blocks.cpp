// ggml's block layouts: dequantization and the Q8_0 / Q4_0 reference quantizers (see
// quant_blocks.hpp). Compiled for the baseline processor only: without FMA the compiler cannot
// contract `d * q - m` into one rounding, so every number rounds where numpy's does.
#include "kernels/quant_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace conveyor::kernels {

namespace {

uint16_t read_u16(const uint8_t* p) {
  return uint16_t(p[0] | (p[1] << 8));
}

void write_u16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
}

// Q4_K's scale and min of sub-block j (0..7) from its 12 packed bytes (ggml's get_scale_min_k4).
void scale_min_k4(int j, const uint8_t* q, uint8_t& sc, uint8_t& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void dequantize_q8_0(const uint8_t* b, float* y) {
  const float d = from_f16(read_u16(b));
  for (int i = 0; i < 32; ++i) y[i] = float(int8_t(b[2 + i])) * d;
}

void dequantize_q4_0(const uint8_t* b, float* y) {
  const float d = from_f16(read_u16(b));
  for (int i = 0; i < 16; ++i) {
    y[i] = d * float((b[2 + i] & 0xF) - 8);
    y[i + 16] = d * float((b[2 + i] >> 4) - 8);
  }
}

void dequantize_q4_k(const uint8_t* b, float* y) {
  const float d = from_f16(read_u16(b)), dmin = from_f16(read_u16(b + 2));
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int j = 0; j < 4; ++j, q += 32, y += 64) {
    uint8_t sc, m;
    scale_min_k4(2 * j, scales, sc, m);
    const float d1 = d * float(sc), m1 = dmin * float(m);
    scale_min_k4(2 * j + 1, scales, sc, m);
    const float d2 = d * float(sc), m2 = dmin * float(m);
    for (int l = 0; l < 32; ++l) {
      // Two roundings, as numpy's `d * q - dm`: the product is kept in a float first.
      const float lo = d1 * float(q[l] & 0xF), hi = d2 * float(q[l] >> 4);
      y[l] = lo - m1;
      y[l + 32] = hi - m2;
    }
  }
}

void dequantize_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = from_f16(read_u16(b + 208));
  for (int n = 0; n < 2; ++n, ql += 64, qh += 32, sc += 8, y += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = (d * float(sc[is + 0])) * float(q1);
      y[l + 32] = (d * float(sc[is + 2])) * float(q2);
      y[l + 64] = (d * float(sc[is + 4])) * float(q3);
      y[l + 96] = (d * float(sc[is + 6])) * float(q4);
    }
  }
}

void quantize_q8_0(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  write_u16(b, to_f16(d));
  for (int i = 0; i < 32; ++i) {
    // roundf (half away from zero) without the library call: x * id lies within [-127, 127]
    // (and a rounding), so truncation is exact and so is the remainder.
    const float v = x[i] * id;
    const int t = int(v);
    const float rest = v - float(t);
    b[2 + i] = uint8_t(int8_t(t + int(rest >= 0.5f) - int(rest <= -0.5f)));
  }
}

void quantize_q4_0(const float* x, uint8_t* b) {
  // The number of largest magnitude, the first one of a tie, with its sign.
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < 32; ++i)
    if (amax < std::fabs(x[i])) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  write_u16(b, to_f16(d));
  for (int i = 0; i < 16; ++i) {
    // x * id lies in [-8, 8]: + 8.5 and truncation round it to 0..16, and 16 becomes 15.
    const float a = x[i] * id, c = x[i + 16] * id;
    const uint8_t lo = uint8_t(std::min(15, int(int8_t(a + 8.5f))));
    const uint8_t hi = uint8_t(std::min(15, int(int8_t(c + 8.5f))));
    b[2 + i] = uint8_t(lo | (hi << 4));
  }
}

}  // namespace

int64_t quant_block_elements(quant_type type) {
  return type == quant_type::q4_k || type == quant_type::q6_k ? 256 : 32;
}

int64_t quant_block_bytes(quant_type type) {
  switch (type) {
    case quant_type::q8_0:
      return 34;
    case quant_type::q4_0:
      return 18;
    case quant_type::q4_k:
      return 144;
    case quant_type::q6_k:
      return 210;
  }
  return 0;
}

const char* quant_type_name(quant_type type) {
  switch (type) {
    case quant_type::q8_0:
      return "Q8_0";
    case quant_type::q4_0:
      return "Q4_0";
    case quant_type::q4_k:
      return "Q4_K";
    case quant_type::q6_k:
      return "Q6_K";
  }
  return "?";
}

void dequantize_row(quant_type type, const void* src, float* dst, int64_t n) {
  const int64_t elements = quant_block_elements(type), bytes = quant_block_bytes(type);
  if (n % elements != 0)
    throw std::invalid_argument(std::string("dequantize_row: ") + std::to_string(n) +
                                " numbers are not whole blocks of " + quant_type_name(type));
  const auto* b = static_cast<const uint8_t*>(src);
  void (*one)(const uint8_t*, float*) = nullptr;
  switch (type) {
    case quant_type::q8_0:
      one = dequantize_q8_0;
      break;
    case quant_type::q4_0:
      one = dequantize_q4_0;
      break;
    case quant_type::q4_k:
      one = dequantize_q4_k;
      break;
    case quant_type::q6_k:
      one = dequantize_q6_k;
      break;
  }
  for (int64_t i = 0; i < n / elements; ++i) one(b + i * bytes, dst + i * elements);
}

void quantize_row(quant_type type, const float* src, void* dst, int64_t n) {
  if (type != quant_type::q8_0 && type != quant_type::q4_0)
    throw std::invalid_argument(std::string("quantize_row: no quantizer for ") +
                                quant_type_name(type));
  if (n % 32 != 0)
    throw std::invalid_argument("quantize_row: " + std::to_string(n) +
                                " numbers are not whole blocks of 32");
  auto* b = static_cast<uint8_t*>(dst);
  const int64_t bytes = quant_block_bytes(type);
  for (int64_t i = 0; i < n / 32; ++i) {
    if (type == quant_type::q8_0)
      quantize_q8_0(src + i * 32, b + i * bytes);
    else
      quantize_q4_0(src + i * 32, b + i * bytes);
  }
}

float from_f16(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // infinity, NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal: mant * 2^-24, exact in float32.
    const float v = float(mant) * 0x1p-24f;
    std::memcpy(&bits, &v, sizeof(bits));
    bits |= sign;
  }
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

uint16_t to_f16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds past 65504: infinity
  if (abs < 0x38800000u) {
    // Below float16's normal range: a multiple of 2^-24, rounded to nearest even by the
    // addition (exact arithmetic in float32 up to the one rounding).
    float a;
    std::memcpy(&a, &abs, sizeof(a));
    const float r = a + 0.5f;  // 0.5 = 2^-1: the sum's last bit weighs 2^-24
    uint32_t rb;
    std::memcpy(&rb, &r, sizeof(rb));
    return uint16_t(sign | (rb - 0x3f000000u));
  }
  // Normal: round the 13 dropped bits to nearest even; a carry moves into the exponent.
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return uint16_t(sign | ((rounded - 0x38000000u) >> 13));
}

}  // namespace conveyor::kernels
