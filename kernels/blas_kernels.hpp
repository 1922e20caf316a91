// Which kernels OpenBLAS runs on this processor, and the fix for a processor newer than the
// library. Debian 12's OpenBLAS (0.3.21) picks its kernels as it loads, from the processor's
// model number; a processor it does not know (Intel's Emerald Rapids, family 6 model 207, among
// them) gets its Prescott (SSE3) kernels: a float32 product of 64 rows ran at about 30 GFLOP/s
// instead of 150 to 158 with its AVX-512 kernels.
// The library reads OPENBLAS_CORETYPE once, as it loads, so a program can only fix
// the choice by starting again with the variable set. Torch-free.
#pragma once

#include <string>
#include <string_view>

namespace conveyor::kernels {

/// What the processor can run, as far as OpenBLAS's kernels go.
struct vector_features {
  bool avx2_fma = false;     ///< AVX2 and FMA (Intel Haswell and later, AMD Zen)
  bool avx512 = false;       ///< AVX-512 F, BW, DQ and VL (Intel Skylake-SP and later, AMD Zen 4)
  bool avx512_bf16 = false;  ///< AVX-512 BF16 (Intel Cooper Lake, Sapphire Rapids and later)
};

/// This processor's features (all false off x86-64), as the operating system lets programs use
/// them; the packed kernels (packed_matmul.cpp) ask it for AVX-512 BF16 too.
vector_features processor_vector_features();

/// The OPENBLAS_CORETYPE that fits a processor with `features` after OpenBLAS chose the kernels
/// named `chosen` (openblas_get_corename()), or "" when the choice stands. Only OpenBLAS's
/// fallback for a processor it does not know, "Prescott", is replaced: by "Cooperlake" with
/// AVX-512 BF16, "SkylakeX" with AVX-512, "Haswell" with AVX2 and FMA. A choice the library made
/// by name is left alone (and restart_with_fitting_blas leaves alone what the user set).
std::string fitting_blas_core(std::string_view chosen, const vector_features& features);

/// The kernels the loaded OpenBLAS runs ("" without OpenBLAS).
std::string blas_core();

/// Call first in main, before any thread starts: when the loaded OpenBLAS fell back to kernels
/// older than the processor (fitting_blas_core) and OPENBLAS_CORETYPE is unset, sets it and
/// executes this program again with the same arguments. Returns when nothing needs doing, or
/// when the restart failed (with a warning on stderr: the program then runs with the slow
/// kernels).
void restart_with_fitting_blas(char** argv);

}  // namespace conveyor::kernels
