// Which OpenBLAS kernels fit the processor: the rule, and what the loaded library runs here.
#include "kernels/blas_kernels.hpp"

#include <fstream>
#include <string>

#include <gtest/gtest.h>

using namespace conveyor::kernels;

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

// The features as the kernel reports them to programs (/proc/cpuinfo's flags), where it does.
TEST(blas_kernels, the_processors_features_are_the_kernels_flags) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(cpuinfo, line))
    if (line.rfind("flags", 0) == 0) {
      flags = line.substr(line.find(':') + 1) + " ";
      break;
    }
  const auto f = processor_vector_features();
#if defined(__x86_64__)
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags to compare with";
  auto has = [&](const char* flag) {
    return flags.find(std::string{" "} + flag + " ") != std::string::npos;
  };
  EXPECT_EQ(f.avx2_fma, has("avx2") && has("fma")) << flags;
  EXPECT_EQ(f.avx512, has("avx512f") && has("avx512bw") && has("avx512dq") && has("avx512vl"))
      << flags;
  EXPECT_EQ(f.avx512_bf16, f.avx512 && has("avx512_bf16")) << flags;
#else
  EXPECT_FALSE(f.avx2_fma || f.avx512 || f.avx512_bf16);
#endif
}
