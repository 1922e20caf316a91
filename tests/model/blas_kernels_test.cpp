// Which OpenBLAS kernels fit the processor: the rule, and what the loaded library runs here.
#include "model/blas_kernels.hpp"

#include <gtest/gtest.h>

using namespace conveyor::model;

namespace {

vector_features with(bool avx2_fma, bool avx512, bool avx512_bf16) {
  vector_features f;
  f.avx2_fma = avx2_fma;
  f.avx512 = avx512;
  f.avx512_bf16 = avx512_bf16;
  return f;
}

}  // namespace

TEST(blas_kernels, the_fallback_for_an_unknown_processor_is_replaced_by_what_it_runs) {
  EXPECT_EQ(fitting_blas_core("Prescott", with(true, true, true)), "Cooperlake");
  EXPECT_EQ(fitting_blas_core("Prescott", with(true, true, false)), "SkylakeX");
  EXPECT_EQ(fitting_blas_core("Prescott", with(true, false, false)), "Haswell");
  // A processor without AVX2 keeps the fallback: it is what it runs.
  EXPECT_EQ(fitting_blas_core("Prescott", with(false, false, false)), "");
}

TEST(blas_kernels, a_choice_made_by_name_stands) {
  for (const char* chosen : {"SkylakeX", "Cooperlake", "Haswell", "Zen", "Sandybridge", ""})
    EXPECT_EQ(fitting_blas_core(chosen, with(true, true, true)), "") << chosen;
}

TEST(blas_kernels, the_processors_features_imply_each_other) {
  const auto f = processor_vector_features();
  if (f.avx512_bf16) {
    EXPECT_TRUE(f.avx512);
  }
#if defined(__x86_64__)
  // Every processor with AVX-512 has AVX2 and FMA.
  if (f.avx512) {
    EXPECT_TRUE(f.avx2_fma);
  }
#else
  EXPECT_FALSE(f.avx2_fma || f.avx512 || f.avx512_bf16);
#endif
}
