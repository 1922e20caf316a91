#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite: the CPU build (build/, Debian's
# libtorch), then, wherever nvcc is installed, the CUDA build (build-cuda/, scripts/setup-cuda.sh)
# and its test suite. Tests that need a GPU skip, saying so, on a machine without one. Then the
# sanitizer builds (build-asan/, build-tsan/) and the fuzz targets (docs/reliability.md).
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
# The suite under the sanitizers (clang: AddressSanitizer + UndefinedBehaviorSanitizer for every
# suite, ThreadSanitizer for the pipeline, actor and server suites against a CAF built with it,
# scripts/caf-tsan.sh) and each fuzz target for 30 s.
echo "test: sanitizers (scripts/sanitize.sh) and fuzzers (scripts/fuzz.sh 30)" >&2
scripts/sanitize.sh || status=$?
scripts/fuzz.sh 30 || status=$?
exit $status
