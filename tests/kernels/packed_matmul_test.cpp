// The packed matrix product against a float64 product of the unpacked weights, over shapes that
// hit every row tail, partial panels, strides, bias and accumulation; bfloat16 rounding against
// values worked out by hand; bf16_dot's instruction against its plain vector code, bit for bit.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/huge_pages.hpp"
#include "kernels/packed_matmul.hpp"

using namespace conveyor::kernels;

namespace {

struct shape {
  int64_t m, in, out;
};

// y = x W (+ bias, or + y0) in float64, with W's numbers as the format stores them, and the
// bound on float32 summation error: 1e-5 of the sum of |terms|.
void reference(const std::vector<float>& x, int64_t x_stride, const std::vector<float>& w,
               int64_t w_stride, const shape& s, const float* bias, const std::vector<float>* y0,
               int64_t y_stride, weight_format f, std::vector<double>& want,
               std::vector<double>& bound) {
  want.assign(size_t(s.m * s.out), 0.0);
  bound.assign(size_t(s.m * s.out), 0.0);
  for (int64_t r = 0; r < s.m; ++r)
    for (int64_t c = 0; c < s.out; ++c) {
      double sum = 0.0, mag = 0.0;
      if (y0 != nullptr) sum = (*y0)[size_t(r * y_stride + c)];
      else if (bias != nullptr) sum = bias[c];
      mag = std::abs(sum);
      for (int64_t i = 0; i < s.in; ++i) {
        float wv = w[size_t(i * w_stride + c)];
        float xv = x[size_t(r * x_stride + i)];
        if (f != weight_format::f32) wv = from_bf16(to_bf16(wv));
        if (f == weight_format::bf16_dot) xv = from_bf16(to_bf16(xv));
        const double term = double(xv) * wv;
        sum += term;
        mag += std::abs(term);
      }
      want[size_t(r * s.out + c)] = sum;
      bound[size_t(r * s.out + c)] = 1e-5 * mag + 1e-6;
    }
}

void check(const shape& s, weight_format f, bool with_bias, bool accumulate, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  // Strides wider than the rows, so that row addressing is tested too.
  const int64_t x_stride = s.in + 3, w_stride = s.out + 5, y_stride = s.out + 7;
  std::vector<float> x(size_t(std::max<int64_t>(1, s.m * x_stride))), w(size_t(s.in * w_stride)),
      bias(size_t(s.out)), y(size_t(std::max<int64_t>(1, s.m * y_stride)));
  for (auto* v : {&x, &w, &bias, &y})
    for (auto& e : *v) e = u(rng);
  const auto y0 = y;
  std::vector<double> want, bound;
  reference(x, x_stride, w, w_stride, s, with_bias ? bias.data() : nullptr,
            accumulate ? &y0 : nullptr, y_stride, f, want, bound);
  packed_matrix p(w.data(), s.in, s.out, w_stride, f);
  EXPECT_EQ(p.in(), s.in);
  EXPECT_EQ(p.out(), s.out);
  p.multiply(x.data(), x_stride, s.m, y.data(), y_stride, with_bias ? bias.data() : nullptr,
             accumulate);
  for (int64_t r = 0; r < s.m; ++r) {
    for (int64_t c = 0; c < s.out; ++c)
      ASSERT_NEAR(y[size_t(r * y_stride + c)], want[size_t(r * s.out + c)],
                  bound[size_t(r * s.out + c)])
          << "m " << s.m << " in " << s.in << " out " << s.out << " row " << r << " col " << c;
    // The padding between rows is not written.
    for (int64_t c = s.out; c < y_stride && r * y_stride + c < int64_t(y.size()); ++c)
      ASSERT_EQ(y[size_t(r * y_stride + c)], y0[size_t(r * y_stride + c)]);
  }
}

const shape shapes[] = {{1, 1, 1},    {1, 64, 48},   {3, 64, 47},    {8, 64, 49},
                        {9, 288, 96}, {15, 17, 100}, {64, 288, 864}, {130, 96, 145},
                        {1, 768, 288}, {257, 40, 50}};

}  // namespace

TEST(packed_matmul, f32_equals_the_float64_product_for_every_tail) {
  uint32_t seed = 1;
  for (const auto& s : shapes) check(s, weight_format::f32, false, false, seed++);
}

TEST(packed_matmul, bias_and_accumulation) {
  uint32_t seed = 100;
  for (const auto& s : shapes) {
    check(s, weight_format::f32, true, false, seed++);
    check(s, weight_format::f32, false, true, seed++);
    check(s, weight_format::bf16, true, false, seed++);
    check(s, weight_format::bf16, false, true, seed++);
    check(s, weight_format::bf16_dot, true, false, seed++);
    check(s, weight_format::bf16_dot, false, true, seed++);
  }
}

TEST(packed_matmul, bf16_equals_the_float64_product_of_the_rounded_weights) {
  uint32_t seed = 200;
  for (const auto& s : shapes) check(s, weight_format::bf16, false, false, seed++);
}

TEST(packed_matmul, bf16_dot_equals_the_float64_product_of_the_rounded_inputs_and_weights) {
  uint32_t seed = 300;
  for (const auto& s : shapes) check(s, weight_format::bf16_dot, false, false, seed++);
  // The same through the plain vector code where the processor has the instruction.
  packed_matrix::use_bf16_dot_instruction(false);
  for (const auto& s : shapes) check(s, weight_format::bf16_dot, false, false, seed++);
  packed_matrix::use_bf16_dot_instruction(true);
}

TEST(packed_matmul, bf16_dot_instruction_and_vector_code_give_the_same_bits) {
  if (!packed_matrix::bf16_dot_instruction())
    GTEST_SKIP() << "no AVX-512 BF16 here (the processor lacks it, or the build is not GCC's, "
                    "which alone compiles the instruction path): bf16_dot runs the vector code";
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const auto& s : shapes) {
    std::vector<float> w(size_t(s.in * s.out)), x(size_t(s.m * s.in)), bias(size_t(s.out));
    for (auto* v : {&w, &x, &bias})
      for (auto& e : *v) e = u(rng) * 8.0f;
    packed_matrix p(w.data(), s.in, s.out, s.out, weight_format::bf16_dot);
    std::vector<float> by_instruction(size_t(s.m * s.out)), in_vectors(by_instruction.size());
    p.multiply(x.data(), s.in, s.m, by_instruction.data(), s.out, bias.data());
    packed_matrix::use_bf16_dot_instruction(false);
    EXPECT_FALSE(packed_matrix::bf16_dot_instruction());
    p.multiply(x.data(), s.in, s.m, in_vectors.data(), s.out, bias.data());
    packed_matrix::use_bf16_dot_instruction(true);
    for (size_t i = 0; i < in_vectors.size(); ++i)
      ASSERT_EQ(by_instruction[i], in_vectors[i])
          << "m " << s.m << " in " << s.in << " out " << s.out << " at " << i;
  }
}

TEST(packed_matmul, bf16_halves_the_bytes) {
  std::vector<float> w(size_t(288 * 96), 0.5f);
  packed_matrix a(w.data(), 288, 96, 96, weight_format::f32);
  packed_matrix b(w.data(), 288, 96, 96, weight_format::bf16);
  packed_matrix d(w.data(), 288, 96, 96, weight_format::bf16_dot);
  EXPECT_EQ(a.bytes(), 288 * 96 * 4);
  EXPECT_EQ(b.bytes(), 288 * 96 * 2);
  EXPECT_EQ(d.bytes(), 288 * 96 * 2);
}

TEST(packed_matmul, bf16_rounds_to_nearest_even) {
  // Values worked out by hand from their bits.
  EXPECT_EQ(to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(to_bf16(1.0f + 0x1p-8f), 0x3f80);        // halfway, to the even 1.0
  EXPECT_EQ(to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);    // halfway, to the even 1 + 2^-6
  EXPECT_EQ(to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);  // above halfway: up
  EXPECT_EQ(to_bf16(3.14159265f), 0x4049);           // 0x40490fdb
  EXPECT_EQ(to_bf16(INFINITY), 0x7f80);
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(NAN))));
  EXPECT_EQ(from_bf16(0x3f81), 1.0f + 0x1p-7f);
}

TEST(packed_matmul, a_row_gives_the_same_bits_whatever_the_batch_around_it) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t in = 288, out = 100;
  std::vector<float> w(size_t(in * out)), x(size_t(70 * in));
  for (auto* v : {&w, &x})
    for (auto& e : *v) e = u(rng);
  for (auto f : {weight_format::f32, weight_format::bf16, weight_format::bf16_dot}) {
    packed_matrix p(w.data(), in, out, out, f);
    std::vector<float> alone(static_cast<size_t>(out)), batch(static_cast<size_t>(70 * out));
    p.multiply(x.data() + 13 * in, in, 1, alone.data(), out);
    // Row 13 as the 6th row of a tail block, and inside a full block of eight.
    for (int64_t m : {14, 17, 70}) {
      p.multiply(x.data(), in, m, batch.data(), out);
      for (int64_t c = 0; c < out; ++c)
        ASSERT_EQ(batch[size_t(13 * out + c)], alone[size_t(c)])
            << "format " << int(f) << " m " << m << " col " << c;
    }
  }
}

TEST(packed_matmul, packed_into_an_arena_gives_the_same_bits_as_its_own_memory) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t in = 289, out = 100;  // an odd row count and a partial last panel
  std::vector<float> w(size_t(in * out)), x(size_t(9 * in));
  for (auto* v : {&w, &x})
    for (auto& e : *v) e = u(rng);
  const weight_format formats[] = {weight_format::f32, weight_format::bf16,
                                   weight_format::bf16_dot};
  // Three panels of 48 columns by 289 rows: 4 bytes each, 2, and 2 in pairs of rows (145 pairs).
  const int64_t bytes_by_hand[] = {3 * 289 * 48 * 4, 3 * 289 * 48 * 2, 3 * 145 * 2 * 48 * 2};
  size_t total = 0;
  for (auto f : formats)
    total += huge_page_arena::rounded(size_t(packed_matrix::packed_bytes(in, out, f)));
  huge_page_arena arena(total);
  const auto* begin = static_cast<const uint8_t*>(arena.data());
  for (size_t i = 0; i < 3; ++i) {
    const weight_format f = formats[i];
    packed_matrix own(w.data(), in, out, out, f);
    packed_matrix shared(w.data(), in, out, out, f, &arena);
    EXPECT_EQ(shared.bytes(), own.bytes());
    EXPECT_EQ(own.bytes(), bytes_by_hand[i]);
    EXPECT_EQ(packed_matrix::packed_bytes(in, out, f), bytes_by_hand[i]);
    const auto* at = static_cast<const uint8_t*>(shared.data());
    EXPECT_TRUE(at >= begin && at + shared.bytes() <= begin + arena.size()) << int(f);
    EXPECT_EQ(std::memcmp(own.data(), shared.data(), size_t(own.bytes())), 0) << int(f);
    const packed_matrix copy = shared;  // copies share the arena's weights
    EXPECT_EQ(copy.data(), shared.data());
    std::vector<float> a(size_t(9 * out)), b(size_t(9 * out));
    own.multiply(x.data(), in, 9, a.data(), out);
    copy.multiply(x.data(), in, 9, b.data(), out);
    EXPECT_EQ(a, b) << "format " << int(f);
  }
}

// A matrix given as its rows (W^T, as checkpoints keep it) with a scale per input row folded in
// packs the very bytes of W with each row i scaled by scale[i], in every format; into an arena
// too, whose zeroed block the packing relies on for a partial last panel.
TEST(packed_matmul, from_rows_packs_the_transposed_matrix_with_its_rows_scaled) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t in = 77, out = 101, stride = in + 3;
  std::vector<float> rows(static_cast<size_t>(out * stride));
  std::vector<float> scale(static_cast<size_t>(in)), w(static_cast<size_t>(in * out));
  for (auto* v : {&rows, &scale})
    for (auto& e : *v) e = u(rng);
  for (int64_t i = 0; i < in; ++i)
    for (int64_t c = 0; c < out; ++c)
      w[size_t(i * out + c)] = rows[size_t(c * stride + i)] * scale[size_t(i)];
  for (auto f : {weight_format::f32, weight_format::bf16, weight_format::bf16_dot}) {
    huge_page_arena arena(size_t(packed_matrix::packed_bytes(in, out, f)));
    const packed_matrix want(w.data(), in, out, out, f);
    const auto got =
        packed_matrix::from_rows(rows.data(), in, out, stride, scale.data(), f, &arena);
    ASSERT_EQ(got.bytes(), want.bytes());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), size_t(want.bytes())), 0) << int(f);
  }
  // Without a scale, W^T's numbers as they are.
  for (int64_t i = 0; i < in; ++i)
    for (int64_t c = 0; c < out; ++c) w[size_t(i * out + c)] = rows[size_t(c * stride + i)];
  const packed_matrix want(w.data(), in, out, out, weight_format::f32);
  const auto got =
      packed_matrix::from_rows(rows.data(), in, out, stride, nullptr, weight_format::f32);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), size_t(want.bytes())), 0);
}
