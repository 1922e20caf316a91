#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (build-asan/: clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, coverage for the fuzzer) and runs each for SECONDS (default 30) on a
# copy of its seed corpus, fuzz/corpus/<target>/. A finding stops the run: the target prints the
# report and leaves the input as build-asan/fuzz-findings/<target>/crash-*; the script exits 1.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/phases.sh
seconds=${1:-30}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(config checkpoint safetensors gguf tokenizer_json tokenize normalizer request_json
                                     http_request template_lexer template_parser template_renderer
                                     output_format tool_call_parser)

scripts/sanitize.sh --configure-only
export CCACHE_BASEDIR="$PWD"
phase "fuzz targets build" cmake --build build-asan -j "$(nproc)" --target "${targets[@]/%/_fuzz}" >&2

work=build-asan/fuzz-run
findings=build-asan/fuzz-findings

# Runs target $1 for $seconds on a copy of its corpus; prints one line; returns 1 on a finding.
run_one() {
  local t=$1 log="$work/$1.log"
  rm -rf "${work:?}/$t"
  mkdir -p "$work/$t" "$findings/$t"
  cp fuzz/corpus/"$t"/* "$work/$t/"
  # -max_total_time bounds the run; the corpus copy grows, never the committed seeds.
  if (cd "$findings/$t" && "../../fuzz/${t}_fuzz" -max_total_time="$seconds" -timeout=10 \
        -rss_limit_mb=4096 -print_final_stats=1 "../../fuzz-run/$t") >"$log" 2>&1; then
    local runs cov
    runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo "?")
    printf 'fuzz: %-15s %6ss  %10s runs  coverage %s  no finding\n' "$t" "$seconds" "$runs" "$cov"
  else
    {
      echo "fuzz: $t FOUND A PROBLEM (input kept in $findings/$t):"
      sed -n '/^==[0-9]*==ERROR\|runtime error\|deadly signal\|^ALARM\|-timeout\|out-of-memory/,$p' \
        "$log" | grep -v '^#[0-9]' | head -60
    } >&2
    return 1
  fi
}

# As many targets at once as there are cores.
start=$SECONDS
status=0
running=0
for t in "${targets[@]}"; do
  if [ $running -ge "$(nproc)" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  run_one "$t" &
  running=$((running + 1))
done
while [ $running -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
phase_record "fuzzing (${#targets[@]} targets x ${seconds} s)" $((SECONDS - start)) $status
exit $status
