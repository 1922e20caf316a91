// ggml's quantized blocks, bit for bit as GGUF files store them: Q8_0 and Q4_0 (32 numbers and
// one float16 scale per block) and the K-quants Q4_K and Q6_K (256 numbers per super-block with
// 6- or 8-bit sub-block scales). Dequantization as ggml (and the PyPI gguf package) computes it,
// and quantization of floats into Q8_0 and Q4_0 as ggml's reference quantizers do (the
// load-time quantizer of float checkpoints). Torch-free.
#pragma once

#include <cstdint>
#include <cstring>

namespace conveyor::kernels {

/// A quantized block layout of ggml, by the name GGUF gives its type.
enum class quant_type : uint8_t {
  q8_0,  ///< 32 numbers: float16 d, 32 int8 q; x = d q
  q4_0,  ///< 32 numbers: float16 d, 16 bytes of nibbles (low: 0..15, high: 16..31); x = d (q - 8)
  q4_k,  ///< 256: float16 d, dmin, 12 bytes of eight 6-bit scales and mins, 128 bytes of nibbles;
         ///< x = d sc q - dmin m per sub-block of 32
  q6_k,  ///< 256: 128 bytes of low nibbles, 64 of high 2 bits, 16 int8 scales, float16 d;
         ///< x = d sc (q - 32) per group of 16
};

/// Numbers per block: 32 or 256.
int64_t quant_block_elements(quant_type type);

/// Bytes per block: 34 (q8_0), 18 (q4_0), 144 (q4_k), 210 (q6_k).
int64_t quant_block_bytes(quant_type type);

/// GGUF's name of the type ("Q8_0", "Q4_0", "Q4_K", "Q6_K").
const char* quant_type_name(quant_type type);

/// ggml's dequantization of `n` numbers (a multiple of the block) of `type` at `src` into `dst`:
/// the same float32 bits as gguf.quants.dequantize.
void dequantize_row(quant_type type, const void* src, float* dst, int64_t n);

/// ggml's reference quantization (bit-equal to gguf.quants.quantize) of `n` floats (a multiple of
/// 32) into q8_0 or q4_0 blocks at `dst`. Other types throw std::invalid_argument.
void quantize_row(quant_type type, const float* src, void* dst, int64_t n);

/// The float32 value of float16 bits (exact).
float from_f16(uint16_t bits);

/// `x` rounded to the nearest float16 (ties to even) as its bits, as numpy's astype(float16) and
/// the processor's conversion do: subnormals kept, overflow to infinity, NaN stays NaN.
uint16_t to_f16(float x);

}  // namespace conveyor::kernels
