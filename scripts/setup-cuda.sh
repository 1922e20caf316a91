#!/usr/bin/env bash
# The CUDA build: every target compiled against PyTorch 2.11.0's libtorch for CUDA 13.0 (the
# version on the H200 machines this project borrows), with CUDA and CUDA graphs on, in build-cuda/.
# Called by `scripts/setup.sh --cuda` and scripts/test.sh after the Debian packages are in place.
#
#   torch      pip install --no-deps torch==2.11.0 into a virtual environment outside the clone,
#              ${CONVEYOR_CUDA_VENV:-~/.cache/conveyor/torch-2.11.0-cu130}, reused while valid
#   CUDA       the toolkit of nvcc (/usr/local/cuda/bin/nvcc or the one on the PATH): headers,
#              cudart, cuBLAS, cuDNN, NCCL, ... Of the wheel's multi-GB CUDA dependencies only
#              the three libraries a toolkit does not ship come from PyPI: cuSPARSELt, NVSHMEM,
#              cuFile (about 300 MB)
#   checks     before building: nvcc is CUDA 13; the CUDA headers torch includes are there; every
#              library libtorch needs is found by the loader; torch and the Debian libraries use
#              the same C++ ABI; a tiny program using torch's CUDA headers compiles, links and runs
#
# The CPU build (build/, Debian's libtorch 1.13) never runs this and downloads nothing.
#
# Usage: scripts/setup-cuda.sh [--no-benchmarks]   (--no-benchmarks: the programs and tests only,
#                                                  as scripts/test.sh builds them)
set -euo pipefail
cd "$(dirname "$0")/.."
benchmarks=ON
for arg in "$@"; do
  case "$arg" in
    --no-benchmarks) benchmarks=OFF ;;
    *)
      echo "setup-cuda: unknown argument '$arg' (known: --no-benchmarks)" >&2
      exit 2
      ;;
  esac
done

torch_version=2.11.0
# What the wheel needs that a CUDA 13.0 toolkit lacks, at the versions torch 2.11.0 pins. They
# install into the venv's nvidia/ folder, which libtorch's RUNPATH already searches.
pypi_extras=(nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5 "nvidia-cufile==1.15.1.6.*")
venv=${CONVEYOR_CUDA_VENV:-$HOME/.cache/conveyor/torch-$torch_version-cu130}
build=build-cuda

log() { echo "setup-cuda: $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

# -- the CUDA toolkit -----------------------------------------------------------------------------
nvcc=""
if [ -x /usr/local/cuda/bin/nvcc ]; then
  nvcc=/usr/local/cuda/bin/nvcc
elif command -v nvcc >/dev/null; then
  nvcc=$(command -v nvcc)
fi
[ -n "$nvcc" ] || die "no nvcc (neither /usr/local/cuda/bin/nvcc nor one on the PATH): install \
the CUDA 13.0 toolkit"
cuda_home=$(cd "$(dirname "$(readlink -f "$nvcc")")/.." && pwd)
cuda_version=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
case "$cuda_version" in
  13.*) ;;
  *) die "$nvcc is CUDA ${cuda_version:-of unknown version}; torch $torch_version from PyPI is \
built for CUDA 13.0" ;;
esac
cuda_lib=$cuda_home/lib64
[ -d "$cuda_lib" ] || cuda_lib=$cuda_home/lib
log "CUDA $cuda_version in $cuda_home"

# The headers torch's CUDA headers include (ATen/cuda/CUDAContext.h, CUDAGraph.h, ...).
missing=()
for header in cuda.h cuda_runtime.h cuda_runtime_api.h cuda_fp16.h cuda_bf16.h cublas_v2.h \
  cublasLt.h cusparse.h cusolverDn.h nvrtc.h; do
  [ -e "$cuda_home/include/$header" ] || missing+=("$header")
done
[ ${#missing[@]} = 0 ] || die "the CUDA toolkit in $cuda_home lacks headers that torch's CUDA \
headers include: ${missing[*]}"

# -- torch in its virtual environment -------------------------------------------------------------
# Outside the clone, so that fresh clones (CI) reuse it; pip's cache stays on. A stamp written
# last marks a complete install; a lock keeps two setups from installing at once.
stamp="torch==$torch_version ${pypi_extras[*]} (no deps)"
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
site() { "$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
if [ -f "$venv/.conveyor-stamp" ] && [ "$(cat "$venv/.conveyor-stamp")" = "$stamp" ] &&
  [ -f "$(site)/torch/share/cmake/Torch/TorchConfig.cmake" ]; then
  log "reusing torch $torch_version in $venv"
else
  log "installing torch $torch_version (about 530 MB) and ${pypi_extras[*]} into $venv"
  if ! python3 -m venv --help >/dev/null 2>&1; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
      python3-venv >&2
  fi
  rm -rf "$venv"
  python3 -m venv "$venv"
  # --no-deps: the wheel's own dependencies are the CUDA 13 libraries (several GB, which the
  # toolkit already has) and Python packages that only `import torch` needs; C++ needs neither.
  "$venv/bin/pip" install --disable-pip-version-check -q --no-deps "torch==$torch_version" \
    "${pypi_extras[@]}" >&2
  echo "$stamp" >"$venv/.conveyor-stamp"
fi
torch_dir=$(site)/torch
flock -u 9

# -- the libraries libtorch needs -----------------------------------------------------------------
# What the loader finds: libtorch's RUNPATH (the venv's nvidia/ folders) and the system's
# ld.so.cache, where the CUDA toolkit registers $cuda_lib. libcuda.so.1 is the NVIDIA driver:
# only a machine with a GPU has it, and only libcaffe2_nvrtc.so (loaded on demand) links it.
declare -A needed_by=()
for lib in libtorch.so libtorch_cuda.so libtorch_cuda_linalg.so libc10_cuda.so \
  libtorch_nvshmem.so libcaffe2_nvrtc.so; do
  while read -r soname; do
    [ "$soname" = libcuda.so.1 ] || [ -n "${needed_by[$soname]:-}" ] || needed_by[$soname]=$lib
  done < <(ldd "$torch_dir/lib/$lib" | awk '/not found/ {print $1}')
done
if [ ${#needed_by[@]} -gt 0 ]; then
  what=()
  hint=""
  for soname in "${!needed_by[@]}"; do
    what+=("$soname (needed by ${needed_by[$soname]})")
    case "$soname" in
      libcusparseLt.* | libnvshmem* | libcufile*)
        hint+=" $soname comes from PyPI into $venv: delete $venv and run again." ;;
      *)
        if [ -e "$cuda_lib/$soname" ]; then
          hint+=" $cuda_lib has $soname but the loader does not search it: add $cuda_lib to \
/etc/ld.so.conf.d/ and run ldconfig (as the CUDA installer does), or to LD_LIBRARY_PATH."
        else
          hint+=" $soname is not in the CUDA toolkit ($cuda_lib)."
        fi
        ;;
    esac
  done
  die "libraries that torch $torch_version needs are not found: ${what[*]}.$hint"
fi
ldconfig -p | grep 'libcuda\.so\.1 ' >/dev/null ||
  log "no libcuda.so.1 (the NVIDIA driver): fine for building and the tests that need no GPU"

# -- the C++ ABI ----------------------------------------------------------------------------------
# torch's wheels since 2.7 use the C++11 ABI, as Debian's libraries do; a std::string of one
# ABI is not the other's, so mixing them fails to link (or worse). std::__cxx11 names in the
# exported symbols tell which one a library uses.
abi_of() {
  # (grep without -q reads all of nm's output: no SIGPIPE under pipefail)
  if nm -D --defined-only "$1" 2>/dev/null | grep '__cxx11' >/dev/null; then echo "C++11 ABI"; else
    echo "pre-C++11 ABI (_GLIBCXX_USE_CXX11_ABI=0)"
  fi
}
torch_abi=$(abi_of "$torch_dir/lib/libc10.so")
debian_abi=$(abi_of /usr/lib/x86_64-linux-gnu/libcaf_core.so)
[ "$torch_abi" = "$debian_abi" ] || die "torch $torch_version ($torch_dir/lib/libc10.so) uses the \
$torch_abi but the Debian libraries (libcaf_core.so, spdlog, ...) use the $debian_abi: they \
cannot be linked together; use a build of torch with the $debian_abi"
log "torch and the Debian libraries both use the $torch_abi"

# -- a probe: torch's CUDA headers compile, libtorch_cuda links and loads -------------------------
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
cat >"$probe/probe.cpp" <<'EOF'
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <torch/cuda.h>
#include <iostream>
int main() { std::cout << int(torch::cuda::device_count()) << " CUDA device(s) visible\n"; }
EOF
if ! g++ -std=c++17 -w "$probe/probe.cpp" -o "$probe/probe" -isystem "$torch_dir/include" \
  -isystem "$torch_dir/include/torch/csrc/api/include" -isystem "$cuda_home/include" \
  -L"$torch_dir/lib" -Wl,-rpath,"$torch_dir/lib" -Wl,--no-as-needed -ltorch -ltorch_cuda \
  -ltorch_cpu -lc10_cuda -lc10 -L"$cuda_lib" -lcudart >"$probe/log" 2>&1; then
  head -20 "$probe/log" >&2
  die "a program using torch's CUDA headers does not compile or link (above)"
fi
"$probe/probe" >"$probe/out" 2>&1 || {
  cat "$probe/out" >&2
  die "a program linked with libtorch_cuda does not run (above)"
}
log "probe linked with libtorch_cuda: $(cat "$probe/out")"

# -- configure and build --------------------------------------------------------------------------
# torch's folder first in CMAKE_PREFIX_PATH: Debian's libtorch-dev is installed too.
# TORCH_CUDA_ARCH_LIST only quiets torch's GPU detection: Conveyor compiles no CUDA kernels.
export CCACHE_BASEDIR="$PWD"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCONVEYOR_TESTS=ON \
  -DCONVEYOR_BENCHMARKS=$benchmarks -DCONVEYOR_REQUIRE_CUDA=ON -DCONVEYOR_CUDA_GRAPHS=ON \
  -DCMAKE_PREFIX_PATH="$torch_dir" -DCUDAToolkit_ROOT="$cuda_home" \
  -DCMAKE_CUDA_COMPILER="$nvcc" -DTORCH_CUDA_ARCH_LIST=9.0 >&2
cmake --build "$build" -j "$(nproc)" >&2

# Compiled with the venv's torch headers (no header of Debian's libtorch-dev in any object's
# dependencies) and run on the venv's libtorch, not Debian's.
debian_headers=$(ninja -C "$build" -t deps | grep -cE '^ +/usr/include/(ATen|c10|caffe2|torch)/' ||
  true)
[ "$debian_headers" = 0 ] || die "$build compiled $debian_headers header(s) of Debian's \
libtorch-dev (/usr/include/{ATen,c10,caffe2,torch}): see ninja -C $build -t deps"
for lib in libtorch_cpu.so libtorch_cuda.so libc10.so; do
  path=$(ldd "$build/apps/conveyor" | awk -v lib="$lib" '$1 == lib {print $3}')
  case "$path" in
    "$torch_dir"/*) ;;
    *) die "$build/apps/conveyor loads $lib from '${path:-nowhere}', not $torch_dir/lib" ;;
  esac
done
log "linked $build/apps/conveyor against libtorch_cpu, libtorch_cuda and libc10 in $torch_dir/lib"
