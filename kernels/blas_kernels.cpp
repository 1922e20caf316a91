// OpenBLAS's kernels for this processor (see blas_kernels.hpp).
#include "kernels/blas_kernels.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace conveyor::kernels {

vector_features processor_vector_features() {
  vector_features f;
#if defined(__x86_64__)
  __builtin_cpu_init();
  f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  f.avx512_bf16 = f.avx512 && __builtin_cpu_supports("avx512bf16");
#endif
  return f;
}

std::string fitting_blas_core(std::string_view chosen, const vector_features& features) {
  // OpenBLAS's DYNAMIC_ARCH build names its fallback for an unknown processor "Prescott".
  if (chosen != "Prescott") return "";
  if (features.avx512_bf16) return "Cooperlake";
  if (features.avx512) return "SkylakeX";
  if (features.avx2_fma) return "Haswell";
  return "";
}

std::string blas_core() {
  using get_corename = char* (*)();
  auto name = reinterpret_cast<get_corename>(::dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (name == nullptr) return "";
  const char* core = name();
  return core != nullptr ? core : "";
}

void restart_with_fitting_blas(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // the user's choice, or ours
  const std::string core = blas_core();
  const std::string fitting = fitting_blas_core(core, processor_vector_features());
  if (fitting.empty()) return;
  ::setenv("OPENBLAS_CORETYPE", fitting.c_str(), 1);
  ::execv("/proc/self/exe", argv);
  std::fprintf(stderr,
               "warning: OpenBLAS runs its %s kernels on a processor that fits %s; restarting "
               "with OPENBLAS_CORETYPE=%s failed (%s): set it in the environment\n",
               core.c_str(), fitting.c_str(), fitting.c_str(), std::strerror(errno));
}

}  // namespace conveyor::kernels
