#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite: the CPU build (build/, Debian's
# libtorch), then, wherever nvcc is installed, the CUDA build (build-cuda/, scripts/setup-cuda.sh)
# and its test suite. Tests that need a GPU skip, saying so, on a machine without one.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
status=0
ctest --test-dir build --output-on-failure -j 2 --timeout 600 || status=$?
if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null; then
  echo "test: the CUDA build (build-cuda/) and its tests" >&2
  scripts/setup-cuda.sh
  ctest --test-dir build-cuda --output-on-failure -j 2 --timeout 600 || status=$?
else
  echo "test: CUDA build skipped: no nvcc (neither /usr/local/cuda/bin/nvcc nor one on the PATH)" >&2
fi
exit $status
