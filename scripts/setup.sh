#!/usr/bin/env bash
# Installs what Conveyor needs on Debian 12 (only what is missing), selects OpenBLAS, and builds.
#   scripts/setup.sh            build the programs (build/)
#   scripts/setup.sh --tests    also what the test suite needs (GoogleTest, curl, the openai
#                               npm package in tools/)
set -euo pipefail
cd "$(dirname "$0")/.."

# --cuda: also the CUDA build (build-cuda/, PyTorch's libtorch from PyPI): scripts/setup-cuda.sh.
with_tests=0
with_cuda=0
for arg in "$@"; do
  case "$arg" in
    --tests) with_tests=1 ;;
    --cuda) with_cuda=1 ;;
    *)
      echo "setup: unknown argument '$arg' (known: --tests, --cuda)" >&2
      exit 2
      ;;
  esac
done

packages=(build-essential cmake ninja-build ccache pkg-config
  libcaf-dev libtorch-dev libspdlog-dev libboost-dev libsentencepiece-dev
  nlohmann-json3-dev libtomlplusplus-dev libcli11-dev libopenblas0-openmp
  libgtest-dev libbenchmark-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The test clients: any curl, node and npm on the PATH will do (Node.js may come from elsewhere).
if [ $with_tests = 1 ]; then
  command -v curl >/dev/null || missing+=(curl)
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# libtorch multiplies through libblas.so.3; Debian's default is the slow reference BLAS.
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 || true)
case "$blas" in
  *openblas*) ;;
  *)
    echo "setup: selecting OpenBLAS for libblas.so.3 (was $blas)" >&2
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo update-alternatives --set libblas.so.3-x86_64-linux-gnu \
      /usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3 >&2
    ;;
esac

if [ $with_tests = 1 ] && [ ! -d tools/node_modules/openai ]; then
  echo "setup: installing the openai npm package into tools/" >&2
  (cd tools && npm install --no-audit --no-fund --loglevel=error >&2)
fi

# Paths relative to the checkout, so that ccache hits across clones in other folders.
export CCACHE_BASEDIR="$PWD"
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCONVEYOR_TESTS=ON \
  -DCONVEYOR_BENCHMARKS=ON >&2
cmake --build build -j "$jobs" >&2

if [ $with_cuda = 1 ]; then
  scripts/setup-cuda.sh
fi
