#!/usr/bin/env bash
# Installs what Conveyor needs on Debian 12 (only what is missing), selects OpenBLAS, and builds.
#   scripts/setup.sh            build the programs (build/)
#   scripts/setup.sh --tests    also what the test suite needs (GoogleTest, curl, and the
#                               openai Python package from PyPI in the virtual environment
#                               tools/venv, pinned in tools/requirements-tests.txt)
# Packages come from Debian's archive, except the test clients and xgrammar's source from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/phases.sh
setup_start=$SECONDS

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

packages=(build-essential cmake ninja-build ccache pkg-config patch curl
  libcaf-dev libtorch-dev libspdlog-dev libboost-dev libsentencepiece-dev
  nlohmann-json3-dev libtomlplusplus-dev libcli11-dev libopenblas0-openmp
  libgtest-dev libbenchmark-dev libpcre2-dev libicu-dev libutfcpp-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The test clients: curl, and Debian's python3 with venv for the openai package.
if [ $with_tests = 1 ]; then
  for p in curl python3 python3-venv clang; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
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

# The venv is made anew when the pinned requirements change (their copy is kept inside it).
if [ $with_tests = 1 ] && ! cmp -s tools/requirements-tests.txt tools/venv/requirements-tests.txt
then
  echo "setup: installing tools/requirements-tests.txt from PyPI into tools/venv" >&2
  rm -rf tools/venv
  /usr/bin/python3 -m venv tools/venv
  tools/venv/bin/pip install --quiet --disable-pip-version-check -r tools/requirements-tests.txt >&2
  cp tools/requirements-tests.txt tools/venv/requirements-tests.txt
fi

# xgrammar's source (structured outputs), built with the project: from PyPI, pinned.
scripts/fetch-xgrammar.sh

# Paths relative to the checkout, so that ccache hits across clones in other folders.
export CCACHE_BASEDIR="$PWD"
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCONVEYOR_TESTS=ON \
  -DCONVEYOR_BENCHMARKS=ON >&2
phase_record "set-up (packages, test clients, downloads)" $((SECONDS - setup_start)) 0
phase "CPU build (build/)" cmake --build build -j "$jobs" >&2

if [ $with_cuda = 1 ]; then
  scripts/setup-cuda.sh
fi
