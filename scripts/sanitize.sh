#!/usr/bin/env bash
# The test suite under the sanitizers, with clang:
#   build-asan/: AddressSanitizer + UndefinedBehaviorSanitizer (and libFuzzer's coverage, so that
#                scripts/fuzz.sh uses the same build): every test suite;
#   build-tsan/: ThreadSanitizer: the pipeline, actor, server and grammar suites (only what they
#                link is built), against a CAF built with ThreadSanitizer too (scripts/caf-tsan.sh,
#                kept in ~/.cache/conveyor): Debian's libcaf is not instrumented, and messages
#                crossing threads inside it look like races. CONVEYOR_TSAN_SUITES chooses other
#                suites.
# Both trees are unity builds (CONVEYOR_UNITY, cmake/ConveyorHelpers.cmake: 16 files of a target
# compiled as one), which halves their build; the CPU build (build/) compiles every file alone. Each build and each suite is a phase of scripts/test.sh's table (scripts/lib/phases.sh).
# Any report fails the test that made it (halt_on_error; UBSan does not recover).
# Usage: scripts/sanitize.sh [--configure-only] [asan|tsan]...
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/phases.sh
configure_only=0
kinds=()
for a in "$@"; do
  case "$a" in
    --configure-only) configure_only=1 ;;
    asan | tsan) kinds+=("$a") ;;
    *) echo "usage: scripts/sanitize.sh [--configure-only] [asan|tsan]..." >&2; exit 2 ;;
  esac
done
[ ${#kinds[@]} -gt 0 ] || kinds=(asan tsan)
[ $configure_only = 0 ] || kinds=(asan)

command -v clang++ >/dev/null || {
  echo "sanitize: clang++ is missing: apt-get install clang" >&2
  exit 1
}
export CCACHE_BASEDIR="$PWD"
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp"
jobs=$(nproc)
status=0
for kind in "${kinds[@]}"; do
  dir=build-$kind
  if [ "$kind" = asan ]; then
    flags=(-DCONVEYOR_SANITIZE=ON -DCONVEYOR_FUZZ=ON)
  else
    caf=$(phase "CAF with ThreadSanitizer (cached)" scripts/caf-tsan.sh)
    flags=(-DCONVEYOR_TSAN=ON -DCAF_INCLUDE_DIR="$caf/include"
           -DCAF_CORE_LIBRARY="$caf/lib/libcaf_core.so" -DCAF_IO_LIBRARY="$caf/lib/libcaf_io.so")
  fi
  CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER=clang++ -DCONVEYOR_TESTS=ON -DCONVEYOR_BENCHMARKS=OFF \
    -DCONVEYOR_UNITY=ON "${flags[@]}" >&2
  [ $configure_only = 0 ] || exit 0
  if [ "$kind" = asan ]; then
    echo "sanitize: AddressSanitizer + UndefinedBehaviorSanitizer, every suite ($dir/)" >&2
    phase "ASan+UBSan build (with the fuzz targets)" cmake --build "$dir" -j "$jobs" >&2
    phase "ASan+UBSan suite" ctest --test-dir "$dir" --output-on-failure -j 2 --timeout 900 ||
      status=$?
  else
    # The suites with threads of their own: the executor core, the actor pipeline, the server.
    suites=(${CONVEYOR_TSAN_SUITES:-pipeline_tests actors_tests server_tests grammar_tests})
    echo "sanitize: ThreadSanitizer, suites ${suites[*]} ($dir/)" >&2
    phase "TSan build (${#suites[@]} suites)" cmake --build "$dir" -j "$jobs" --target "${suites[@]}" >&2
    label=$(IFS='|'; echo "${suites[*]}")
    phase "TSan suite" ctest --test-dir "$dir" --output-on-failure -j 2 --timeout 900 \
      -L "^($label)\$" || status=$?
  fi
done
exit $status
