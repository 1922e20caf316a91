// ggml's block layouts against the PyPI gguf package (tests/fixtures/quant_blocks/, written by
// tools/fixtures/make_quant_blocks.py): dequantize_row gives the package's float32 bits for
// every type, quantize_row its bytes for Q8_0 and Q4_0; float16 conversion both ways.
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/quant_blocks.hpp"
#include "tests/kernels/quant_fixture.hpp"

using namespace conveyor::kernels;
using namespace conveyor::kernels::testing;

namespace {

uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof(b));
  return b;
}

TEST(QuantBlocks, SizesAreGgmls) {
  EXPECT_EQ(quant_block_elements(quant_type::q8_0), 32);
  EXPECT_EQ(quant_block_bytes(quant_type::q8_0), 34);
  EXPECT_EQ(quant_block_elements(quant_type::q4_0), 32);
  EXPECT_EQ(quant_block_bytes(quant_type::q4_0), 18);
  EXPECT_EQ(quant_block_elements(quant_type::q4_k), 256);
  EXPECT_EQ(quant_block_bytes(quant_type::q4_k), 144);
  EXPECT_EQ(quant_block_elements(quant_type::q6_k), 256);
  EXPECT_EQ(quant_block_bytes(quant_type::q6_k), 210);
  EXPECT_STREQ(quant_type_name(quant_type::q4_k), "Q4_K");
}

TEST(QuantBlocks, DequantizeEqualsTheGgufPackageBitForBit) {
  for (quant_type type : all_quant_types) {
    const quant_fixture f(type);
    ASSERT_EQ(int64_t(f.dequantized.size()), f.count() * quant_block_elements(type));
    std::vector<float> got(f.dequantized.size());
    dequantize_row(type, f.blocks.data(), got.data(), int64_t(got.size()));
    int64_t differing = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (bits_of(got[i]) != bits_of(f.dequantized[i])) {
        if (differing++ < 5)
          ADD_FAILURE() << quant_type_name(type) << " number " << i << ": " << got[i]
                        << " != " << f.dequantized[i];
      }
    EXPECT_EQ(differing, 0) << quant_type_name(type);
  }
}

TEST(QuantBlocks, QuantizeEqualsTheGgufPackageByteForByte) {
  for (quant_type type : {quant_type::q8_0, quant_type::q4_0}) {
    const quant_fixture f(type);
    const auto src = read_floats(file_name(type) + ".src.f32");
    ASSERT_EQ(src.size(), f.dequantized.size());
    std::vector<uint8_t> got(f.blocks.size(), 0xAA);
    quantize_row(type, src.data(), got.data(), int64_t(src.size()));
    const int64_t bb = quant_block_bytes(type);
    for (int64_t b = 0; b < f.count(); ++b)
      EXPECT_EQ(0, std::memcmp(&got[size_t(b * bb)], &f.blocks[size_t(b * bb)], size_t(bb)))
          << quant_type_name(type) << " block " << b;
  }
}

TEST(QuantBlocks, RefusesWhatItCannotDo) {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> out(512);
  EXPECT_THROW(quantize_row(quant_type::q4_k, x.data(), out.data(), 256), std::invalid_argument);
  EXPECT_THROW(quantize_row(quant_type::q8_0, x.data(), out.data(), 33), std::invalid_argument);
  EXPECT_THROW(dequantize_row(quant_type::q6_k, out.data(), x.data(), 32), std::invalid_argument);
}

TEST(QuantBlocks, Float16RoundTripsEveryNumber) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float v = from_f16(uint16_t(h));
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(from_f16(to_f16(v)))) << h;
      continue;
    }
    EXPECT_EQ(to_f16(v), h) << h;
  }
}

TEST(QuantBlocks, Float16RoundsToNearestEven) {
  EXPECT_EQ(from_f16(0x3c00), 1.0f);
  EXPECT_EQ(from_f16(0x0001), std::ldexp(1.0f, -24));  // the smallest subnormal
  EXPECT_EQ(from_f16(0x7bff), 65504.0f);
  EXPECT_EQ(from_f16(0xc000), -2.0f);
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties go to the even one, 1.
  EXPECT_EQ(to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(to_f16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  // Halfway between the two smallest subnormals, and below half the smallest.
  EXPECT_EQ(to_f16(1.5f * std::ldexp(1.0f, -24)), 0x0002);
  EXPECT_EQ(to_f16(0.5f * std::ldexp(1.0f, -24)), 0x0000);
  EXPECT_EQ(to_f16(0.6f * std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(to_f16(65520.0f), 0x7c00);  // halfway to 65536: infinity
  EXPECT_EQ(to_f16(-1e9f), 0xfc00);
}

}  // namespace
