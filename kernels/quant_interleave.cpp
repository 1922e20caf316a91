// The interleaved layouts of Q4_K and Q6_K weights (see quant_interleave.hpp): ggml's blocks read
// number by number (as its dequantize_row_q4_K / q6_K read them) and written side by side.
#include "kernels/quant_interleave.hpp"

#include <cstring>

namespace conveyor::kernels {

namespace {

constexpr int64_t q4_k_bytes = 144, q6_k_bytes = 210;

// ggml's Q4_K block: d, dmin, 12 bytes of 6-bit scales and mins, 128 bytes of numbers.
void read_q4_k(const uint8_t* b, uint8_t q[256], uint8_t scales[8], uint8_t mins[8]) {
  const uint8_t* s = b + 4;
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scales[j] = s[j] & 63;
      mins[j] = s[j + 4] & 63;
    } else {
      scales[j] = uint8_t((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
      mins[j] = uint8_t((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
  }
  for (int i = 0; i < 4; ++i)
    for (int l = 0; l < 32; ++l) {
      q[64 * i + l] = b[16 + 32 * i + l] & 0xF;
      q[64 * i + 32 + l] = b[16 + 32 * i + l] >> 4;
    }
}

// ggml's Q6_K block: 128 bytes of low 4 bits, 64 of high 2 bits, 16 int8 scales, d.
void read_q6_k(const uint8_t* b, uint8_t q[256], int8_t scales[16]) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  std::memcpy(scales, b + 192, 16);
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) {
        const uint8_t low = ql[64 * n + l + 32 * (k % 2)];
        q[128 * n + 32 * k + l] =
            uint8_t((k < 2 ? low & 0xF : low >> 4) | (((qh[32 * n + l] >> (2 * k)) & 3) << 4));
      }
}

void interleave_q4_k(const uint8_t* const src[8], uint8_t* dst) {
  std::memset(dst, 0, 1152);
  for (int c = 0; c < 8; ++c) {
    if (src[c] == nullptr) continue;
    uint8_t q[256], scales[8], mins[8];
    read_q4_k(src[c], q, scales, mins);
    std::memcpy(dst + 2 * c, src[c], 2);
    std::memcpy(dst + 16 + 2 * c, src[c] + 2, 2);
    for (int j = 0; j < 8; ++j) {
      dst[32 + 8 * j + c] = uint8_t((scales[j] & 0xF) | ((mins[j] & 0xF) << 4));
      const int shift = j < 4 ? 0 : 4;
      dst[96 + 8 * (j % 4) + c] |= uint8_t(((scales[j] >> 4) | ((mins[j] >> 4) << 2)) << shift);
    }
    for (int i = 0; i < 4; ++i)
      for (int k = 0; k < 8; ++k)
        for (int e = 0; e < 4; ++e)
          dst[128 + 32 * (8 * i + k) + 4 * c + e] =
              uint8_t(q[64 * i + 4 * k + e] | (q[64 * i + 32 + 4 * k + e] << 4));
  }
}

void interleave_q6_k(const uint8_t* const src[8], uint8_t* dst) {
  std::memset(dst, 0, 1680);
  for (int c = 0; c < 8; ++c) {
    if (src[c] == nullptr) continue;
    uint8_t q[256];
    int8_t scales[16];
    read_q6_k(src[c], q, scales);
    std::memcpy(dst + 2 * c, src[c] + 208, 2);
    for (int p = 0; p < 8; ++p) {
      dst[16 + 16 * p + 2 * c] = uint8_t(scales[2 * p]);
      dst[16 + 16 * p + 2 * c + 1] = uint8_t(scales[2 * p + 1]);
    }
    for (int t = 0; t < 4; ++t) {
      for (int u = 0; u < 8; ++u)
        for (int e = 0; e < 4; ++e)
          dst[144 + 384 * t + 32 * u + 4 * c + e] =
              uint8_t((q[64 * t + 4 * u + e] & 0xF) | ((q[64 * t + 32 + 4 * u + e] & 0xF) << 4));
      for (int v = 0; v < 4; ++v)
        for (int e = 0; e < 4; ++e) {
          uint8_t high = 0;
          for (int s = 0; s < 4; ++s)
            high |= uint8_t((q[64 * t + 4 * (v + 4 * s) + e] >> 4) << (2 * s));
          dst[400 + 384 * t + 32 * v + 4 * c + e] = high;
        }
    }
  }
}

uint16_t read_u16(const uint8_t* p) {
  return uint16_t(p[0] | (p[1] << 8));
}

}  // namespace

void interleave_rows(quant_type type, const uint8_t* rows, int64_t blocks, int64_t out,
                     uint8_t* dst) {
  const int64_t bytes = type == quant_type::q4_k ? q4_k_bytes : q6_k_bytes;
  const int64_t groups = (out + interleaved_rows - 1) / interleaved_rows;
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* src[8];
      for (int c = 0; c < 8; ++c) {
        const int64_t o = g * interleaved_rows + c;
        src[c] = o < out ? rows + (o * blocks + b) * bytes : nullptr;
      }
      uint8_t* block = dst + ((g * blocks + b) * interleaved_rows) * bytes;
      if (type == quant_type::q4_k)
        interleave_q4_k(src, block);
      else
        interleave_q6_k(src, block);
    }
}

void read_interleaved_q4_k(const uint8_t* block, int c, uint8_t q[256], uint8_t scales[8],
                           uint8_t mins[8], float& d, float& dmin) {
  d = from_f16(read_u16(block + 2 * c));
  dmin = from_f16(read_u16(block + 16 + 2 * c));
  for (int j = 0; j < 8; ++j) {
    const uint8_t low = block[32 + 8 * j + c];
    const uint8_t high = uint8_t(block[96 + 8 * (j % 4) + c] >> (j < 4 ? 0 : 4));
    scales[j] = uint8_t((low & 0xF) | ((high & 3) << 4));
    mins[j] = uint8_t((low >> 4) | (((high >> 2) & 3) << 4));
  }
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < 8; ++k)
      for (int e = 0; e < 4; ++e) {
        const uint8_t v = block[128 + 32 * (8 * i + k) + 4 * c + e];
        q[64 * i + 4 * k + e] = v & 0xF;
        q[64 * i + 32 + 4 * k + e] = v >> 4;
      }
}

void read_interleaved_q6_k(const uint8_t* block, int c, uint8_t q[256], int8_t scales[16],
                           float& d) {
  d = from_f16(read_u16(block + 2 * c));
  for (int p = 0; p < 8; ++p) {
    scales[2 * p] = int8_t(block[16 + 16 * p + 2 * c]);
    scales[2 * p + 1] = int8_t(block[16 + 16 * p + 2 * c + 1]);
  }
  for (int t = 0; t < 4; ++t) {
    for (int u = 0; u < 8; ++u)
      for (int e = 0; e < 4; ++e) {
        const uint8_t v = block[144 + 384 * t + 32 * u + 4 * c + e];
        q[64 * t + 4 * u + e] = v & 0xF;
        q[64 * t + 32 + 4 * u + e] = v >> 4;
      }
    for (int v = 0; v < 4; ++v)
      for (int e = 0; e < 4; ++e) {
        const uint8_t high = block[400 + 384 * t + 32 * v + 4 * c + e];
        for (int s = 0; s < 4; ++s)
          q[64 * t + 4 * (v + 4 * s) + e] |= uint8_t(((high >> (2 * s)) & 3) << 4);
      }
  }
}

}  // namespace conveyor::kernels
