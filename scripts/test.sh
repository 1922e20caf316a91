#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite: the CPU build (build/, Debian's
# libtorch), then, wherever nvcc is installed, the CUDA build (build-cuda/, scripts/setup-cuda.sh)
# and its test suite. Tests that need a GPU skip, saying so, on a machine without one. Then the
# sanitizer builds (build-asan/, build-tsan/) and the fuzz targets (docs/reliability.md).
# It ends with a table of its phases and their minutes (scripts/lib/phases.sh), whatever failed.
#
# Usage: scripts/test.sh   (CONVEYOR_FUZZ_SECONDS: each fuzz target's run, default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/phases.sh
CONVEYOR_PHASES=$(mktemp)
export CONVEYOR_PHASES
trap 'phase_table "$CONVEYOR_PHASES"; rm -f "$CONVEYOR_PHASES"' EXIT
scripts/setup.sh --tests
status=0
phase "CPU suite (build/)" ctest --test-dir build --output-on-failure -j 2 --timeout 600 ||
  status=$?
if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null; then
  echo "test: the CUDA build (build-cuda/) and its tests" >&2
  phase "CUDA set-up and build (build-cuda/)" scripts/setup-cuda.sh --no-benchmarks
  phase "CUDA suite (build-cuda/)" ctest --test-dir build-cuda --output-on-failure -j 2 \
    --timeout 600 || status=$?
else
  echo "test: CUDA build skipped: no nvcc (neither /usr/local/cuda/bin/nvcc nor one on the PATH)" >&2
fi
# The suite under the sanitizers (clang: AddressSanitizer + UndefinedBehaviorSanitizer for every
# suite and every fuzz target's corpus, ThreadSanitizer for the pipeline, actor, server and
# grammar suites against a CAF built with it, scripts/caf-tsan.sh), then a short run of each fuzz
# target (the long runs: docs/reliability.md).
fuzz_seconds=${CONVEYOR_FUZZ_SECONDS:-20}
echo "test: sanitizers (scripts/sanitize.sh) and fuzzers (scripts/fuzz.sh $fuzz_seconds)" >&2
scripts/sanitize.sh || status=$?
scripts/fuzz.sh "$fuzz_seconds" || status=$?
exit $status
