// The product over quantized weights against the float64 product of the weights as the PyPI gguf
// package dequantizes them (tests/fixtures/quant_blocks/), on every instruction set this
// processor has, for every type and batch size; batch invariance and agreement of the vector
// kernels bit for bit.
//
// Tolerances. The kernel rounds each input to 8 bits per block (q = round(x / d), d = max |x| /
// 127: the test computes the same numbers) and multiplies those exactly in integers; only the
// float32 scaling and summing of the block sums rounds. Against W times the rounded inputs in
// float64 the error is a few float32 roundings of terms no larger than sum |w x|: the test allows
// 1e-5 of that sum (about 100 roundings). Against the float inputs, each input also moves by up
// to d / 2, so the bound adds sum |w| d / 2, exactly the worst case of that rounding.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/huge_pages.hpp"
#include "kernels/quant_interleave.hpp"
#include "kernels/quant_matmul.hpp"
#include "kernels/quant_matmul_kernels.hpp"
#include "tests/kernels/quant_fixture.hpp"

using namespace conveyor::kernels;
using namespace conveyor::kernels::testing;

namespace {

int64_t input_block(quant_type type) {
  return type == quant_type::q4_k || type == quant_type::q6_k ? 256 : 32;
}

// x rounded as the kernel rounds its inputs, and each number's half step d / 2.
void round_inputs(quant_type type, const std::vector<float>& x, int64_t x_stride, int64_t m,
                  int64_t in, std::vector<double>& rounded, std::vector<double>& half_step) {
  const int64_t block = input_block(type);
  rounded.assign(size_t(m * in), 0.0);
  half_step.assign(size_t(m * in), 0.0);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t b = 0; b < in; b += block) {
      const float* xb = &x[size_t(r * x_stride + b)];
      float amax = 0.0f;
      for (int64_t i = 0; i < block; ++i) amax = std::max(amax, std::fabs(xb[i]));
      const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
      for (int64_t i = 0; i < block; ++i) {
        const float q = std::min(127.0f, std::max(-127.0f, std::roundf(xb[i] * id)));
        rounded[size_t(r * in + b + i)] = double(q) * double(d);
        half_step[size_t(r * in + b + i)] = 0.5 * double(d);
      }
    }
}

void all_isas_upto_best(std::vector<quant_isa>& out) {
  for (uint8_t i = 0; i <= uint8_t(quant_isa::avx512_vnni); ++i)
    if (quantized_matrix::has_isa(quant_isa(i))) out.push_back(quant_isa(i));
}

struct limit_guard {
  ~limit_guard() { quantized_matrix::limit_isa(quantized_matrix::best_isa()); }
};

struct product_case {
  quant_type type;
  int64_t m, in, out;
  bool bias, accumulate;
};

// Runs the product on `isa` into `y` and checks it against both references.
void check(const product_case& c, quant_isa isa, uint32_t seed, std::vector<float>& y) {
  const quant_fixture f(c.type);
  std::vector<uint8_t> w;
  std::vector<float> numbers;
  f.matrix(c.in, c.out, seed % 7, w, numbers);
  const quantized_matrix q(c.type, w.data(), c.in, c.out);

  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t x_stride = c.in + 5, y_stride = c.out + 3;
  std::vector<float> x(size_t(c.m * x_stride)), bias(size_t(c.out));
  y.assign(size_t(c.m * y_stride), 0.0f);
  for (auto* v : {&x, &bias, &y})
    for (auto& e : *v) e = u(rng);
  // Some rows with a block of zeros or a wide range of magnitudes.
  if (c.m > 1) std::fill(x.begin() + x_stride, x.begin() + x_stride + input_block(c.type), 0.0f);
  if (c.m > 2)
    for (int64_t i = 0; i < c.in; ++i)
      x[size_t(2 * x_stride + i)] *= std::ldexp(1.0f, int(i % 9) - 4);
  const auto y0 = y;

  quantized_matrix::limit_isa(isa);
  EXPECT_EQ(quantized_matrix::isa(), isa);
  q.multiply(x.data(), x_stride, c.m, y.data(), y_stride, c.bias ? bias.data() : nullptr,
             c.accumulate);

  std::vector<double> rounded, half_step;
  round_inputs(c.type, x, x_stride, c.m, c.in, rounded, half_step);
  for (int64_t r = 0; r < c.m; ++r) {
    for (int64_t o = 0; o < c.out; ++o) {
      double start = 0.0;
      if (c.accumulate)
        start = y0[size_t(r * y_stride + o)];
      else if (c.bias)
        start = bias[size_t(o)];
      double exact = start, from_floats = start, mag = std::abs(start), step = 0.0;
      for (int64_t i = 0; i < c.in; ++i) {
        const double wv = numbers[size_t(o * c.in + i)];
        exact += wv * rounded[size_t(r * c.in + i)];
        from_floats += wv * double(x[size_t(r * x_stride + i)]);
        mag += std::abs(wv * rounded[size_t(r * c.in + i)]);
        step += std::abs(wv) * half_step[size_t(r * c.in + i)];
      }
      const double got = y[size_t(r * y_stride + o)];
      const double tight = 1e-5 * mag + 1e-30;
      ASSERT_NEAR(got, exact, tight) << quant_type_name(c.type) << " on " << quant_isa_name(isa)
                                     << " m=" << c.m << " row " << r << " col " << o;
      ASSERT_NEAR(got, from_floats, tight + step * 1.000001)
          << quant_type_name(c.type) << " on " << quant_isa_name(isa) << " m=" << c.m;
    }
    // Columns past `out` untouched.
    for (int64_t o = c.out; o < y_stride && r * y_stride + o < int64_t(y.size()); ++o)
      ASSERT_EQ(y[size_t(r * y_stride + o)], y0[size_t(r * y_stride + o)]);
  }
}

TEST(QuantMatmul, ProductsEqualTheDequantizedWeightsOnEveryPath) {
  limit_guard guard;
  std::vector<quant_isa> isas;
  all_isas_upto_best(isas);
  for (quant_type type : all_quant_types) {
    const int64_t in = type == quant_type::q4_k || type == quant_type::q6_k ? 512 : 96;
    for (int64_t m : {1, 2, 3, 7, 16, 33, 64})
      for (int mode = 0; mode < 3; ++mode) {
        const product_case c{type, m, in, 37, mode == 1, mode == 2};
        std::vector<float> first, y;
        for (quant_isa isa : isas) {
          check(c, isa, uint32_t(m * 3 + mode), y);
          if (HasFatalFailure()) return;
          // The vector kernels compute the same float32 operations in the same order; for the
          // interleaved types (Q4_K, Q6_K) the plain C++ one does too.
          const quant_isa reference = interleaved(type) ? quant_isa::scalar : quant_isa::avx2;
          if (isa == reference) first = y;
          if (isa > reference) {
            EXPECT_EQ(0, std::memcmp(first.data(), y.data(), y.size() * sizeof(float)))
                << quant_type_name(type) << ": " << quant_isa_name(isa) << " differs from "
                << quant_isa_name(reference);
          }
        }
      }
  }
}

TEST(QuantMatmul, LargeProductsOnThePool) {
  // Enough rows and columns to be split over the compute pool and its row chunks.
  limit_guard guard;
  std::vector<quant_isa> isas;
  all_isas_upto_best(isas);
  for (quant_type type : all_quant_types)
    for (quant_isa isa : {isas.front(), isas.back()}) {
      std::vector<float> y;
      check({type, 70, 1024, 300, true, false}, isa, 11, y);
      if (HasFatalFailure()) return;
    }
}

TEST(QuantMatmul, RowsDoNotDependOnTheirBatch) {
  limit_guard guard;
  std::vector<quant_isa> isas;
  all_isas_upto_best(isas);
  for (quant_type type : all_quant_types) {
    const quant_fixture f(type);
    const int64_t in = 1024, out = 133, m = 67;
    std::vector<uint8_t> w;
    std::vector<float> numbers;
    f.matrix(in, out, 3, w, numbers);
    const quantized_matrix q(type, w.data(), in, out);
    std::mt19937 rng(5);
    std::normal_distribution<float> n(0.0f, 1.0f);
    std::vector<float> x(size_t(m * in)), bias(static_cast<size_t>(out));
    for (auto& e : x) e = n(rng);
    for (auto& e : bias) e = n(rng);
    for (quant_isa isa : isas) {
      quantized_matrix::limit_isa(isa);
      std::vector<float> all(size_t(m * out));
      q.multiply(x.data(), in, m, all.data(), out, bias.data());
      for (int64_t r0 : {0, 5, 31, 64})
        for (int64_t rows : {1, 2, 3}) {
          if (r0 + rows > m) continue;
          std::vector<float> part(size_t(rows * out));
          q.multiply(x.data() + r0 * in, in, rows, part.data(), out, bias.data());
          EXPECT_EQ(0, std::memcmp(part.data(), all.data() + r0 * out, part.size() * sizeof(float)))
              << quant_type_name(type) << " on " << quant_isa_name(isa) << " rows " << r0 << "+"
              << rows;
        }
    }
  }
}

TEST(QuantMatmul, MatrixInAnArenaAndItsSizes) {
  // Q8_0 keeps ggml's blocks as they are; Q4_K and Q6_K interleave groups of 8 rows, the last
  // padded.
  const quant_fixture f(quant_type::q8_0);
  std::vector<uint8_t> w;
  std::vector<float> numbers;
  f.matrix(512, 9, 0, w, numbers);
  EXPECT_EQ(quantized_matrix::packed_bytes(quant_type::q8_0, 512, 9), 16 * 34 * 9);
  EXPECT_EQ(quantized_matrix::packed_bytes(quant_type::q4_k, 512, 9), 2 * 144 * 16);
  EXPECT_EQ(quantized_matrix::packed_bytes(quant_type::q6_k, 512, 16), 2 * 210 * 16);
  huge_page_arena arena(size_t(1) << 20);
  const quantized_matrix q(quant_type::q8_0, w.data(), 512, 9, &arena);
  EXPECT_EQ(q.data(), arena.data());
  EXPECT_EQ(q.bytes(), int64_t(w.size()));
  EXPECT_EQ(0, std::memcmp(q.data(), w.data(), w.size()));
  EXPECT_EQ(q.in(), 512);
  EXPECT_EQ(q.out(), 9);
  const quant_fixture k(quant_type::q4_k);
  k.matrix(512, 9, 0, w, numbers);
  const quantized_matrix q4(quant_type::q4_k, w.data(), 512, 9, &arena);
  EXPECT_EQ(q4.data(), static_cast<const uint8_t*>(arena.data()) +
                           huge_page_arena::rounded(size_t(q.bytes())));
  EXPECT_EQ(q4.bytes(), 2 * 144 * 16);
  EXPECT_THROW(quantized_matrix(quant_type::q4_k, w.data(), 500, 9), std::invalid_argument);
  EXPECT_THROW(quantized_matrix(quant_type::q8_0, w.data(), 64, 0), std::invalid_argument);
}

TEST(QuantMatmul, InputsRoundHalfAwayFromZeroAsRoundf) {
  // Blocks whose numbers land exactly on and next to the halfway points of their scale.
  const int64_t in = 512, m = 3;
  std::vector<float> x(size_t(m * in));
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (auto& v : x) v = u(rng);
  for (int64_t i = 0; i < in; ++i) {
    // Row 1: multiples of 0.5 up to 127 (d = 1), so that x / d is a tie or an integer.
    x[size_t(in + i)] = float(int(i % 255) - 127) * (i % 2 == 0 ? 1.0f : 0.5f);
    // Row 2: the float32 neighbours of ties.
    const float tie = float(int(i % 200) - 100) + 0.5f;
    x[size_t(2 * in + i)] = i % 3 == 0 ? tie : std::nextafter(tie, i % 3 == 1 ? 1e9f : -1e9f);
  }
  x[size_t(in)] = 127.0f;
  x[size_t(2 * in)] = 127.0f;
  for (quant_type type : {quant_type::q8_0, quant_type::q6_k}) {
    quantized_inputs a;
    quantize_inputs(type, x.data(), in, m, in, a);
    const int64_t block = input_block(type);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t b = 0; b < in / block; ++b) {
        const float* xb = &x[size_t(r * in + b * block)];
        float amax = 0.0f;
        for (int64_t i = 0; i < block; ++i) amax = std::max(amax, std::fabs(xb[i]));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        ASSERT_EQ(a.d_at(r, b), d);
        for (int64_t i = 0; i < block; ++i)
          ASSERT_EQ(a.q_at(r, b)[i], int8_t(std::roundf(xb[i] * id)))
              << "row " << r << " number " << b * block + i << ": " << xb[i];
      }
    if (type == quant_type::q6_k)
      for (int64_t r = 0; r < m; ++r)
        for (int64_t g = 0; g < in / 16; ++g) {
          int sum = 0;
          for (int i = 0; i < 16; ++i) sum += a.q_at(r, g / 16)[g % 16 * 16 + i];
          ASSERT_EQ(a.sums_at(r, g / 16)[g % 16], sum);
        }
  }
}

TEST(QuantMatmul, NamesTheInstructionSets) {
  EXPECT_STREQ(quant_isa_name(quant_isa::avx512_vnni), "avx512-vnni");
  EXPECT_STREQ(quant_isa_name(quant_isa::avx_vnni), "avx-vnni");
  limit_guard guard;
  quantized_matrix::limit_isa(quant_isa::scalar);
  EXPECT_EQ(quantized_matrix::isa(), quant_isa::scalar);
  quantized_matrix::limit_isa(quant_isa::avx512_vnni);
  EXPECT_EQ(quantized_matrix::isa(), quantized_matrix::best_isa());
}

}  // namespace
