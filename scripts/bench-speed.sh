#!/usr/bin/env bash
# The measurements behind docs/benchmarks.md (the speed goals), one at a time, with two
# builds side by side in the same run: BEFORE (the code before the change) and AFTER.
#   scripts/bench-speed.sh BEFORE_BUILD_DIR AFTER_BUILD_DIR OUT_DIR [REPEATS]
# SECTIONS="2 3" runs only those of the numbered parts below (default: all).
# Every server is benched by AFTER's `conveyor bench` (the same client for both). Each burst runs
# REPEATS times (default 3); the doc quotes the median. Nothing else should run meanwhile.
set -euo pipefail
before=$(realpath "$1") after=$(realpath "$2") out=$3 repeats=${4:-3}
mkdir -p "$out"
out=$(realpath "$out")
cd "$(dirname "$0")/.."
port=${CONVEYOR_BENCH_PORT:-18123}
client="$after/apps/conveyor"
pid=
sections=${SECTIONS:-1 2 3 4 5 6 7}
want() { [[ " $sections " == *" $1 "* ]]; }

# shellcheck source=scripts/bench-server.sh
source scripts/bench-server.sh

# CPU seconds (user + system) the server process has used so far, from /proc.
server_cpu() {
  awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$pid/stat"
}

# NAME WORKLOAD MODEL [BENCH-ARGS...]: one replay against the running server; beside its report
# go the client's CPU seconds (user + system, from /usr/bin/time, its start included) and the
# server's over the replay (the bench's own table has the client's over the run alone).
over_http() {
  local name=$1 workload=$2 model=$3
  shift 3
  local before_cpu
  before_cpu=$(server_cpu)
  /usr/bin/time -f "client cpu_s %U %S wall_s %e" -o "$out/$name.client" \
    "$client" bench --workload "$workload" --target "http://127.0.0.1:$port" --model "$model" \
    -q --json "$out/$name.json" "$@" >"$out/$name.txt"
  echo "server cpu_s $before_cpu $(server_cpu)" >>"$out/$name.client"
  echo "$name: $(grep -E 'out tok/s|output' "$out/$name.txt" | head -1) $(cat "$out/$name.client")"
}

burst=workloads/stories-burst-n200.jsonl
light=workloads/stories-poisson-r5-n100.jsonl
s15m=(--model synthetic:s15m)
slots() { echo --set executors=cpu --set "executors[0].slots=$1" --set "batcher.max_num_seqs=$1"; }

# 1. The model steps.
want 1 && "$after/benchmarks/conveyor_model_bench" --benchmark_min_time=0.5 >"$out/model-after.txt" 2>&1
want 1 && "$before/benchmarks/conveyor_model_bench" --benchmark_filter='bm_decode/model:1' \
  --benchmark_min_time=0.5 >"$out/model-before.txt" 2>&1

# 2. The s15m burst through HTTP: before and after, 16 and 32 slots.
want 2 && for r in $(seq 1 "$repeats"); do
  for build in before after; do
    dir=$before
    [ $build = after ] && dir=$after
    for n in 16 32; do
      # shellcheck disable=SC2046
      serve "$dir" "${s15m[@]}" $(slots $n)
      over_http "s15m-burst-$build-$n-run$r" $burst s15m
      stop
    done
  done
done

# 3. s15m at 5 requests/s through HTTP: before and after (16 slots), and after with
# server.stream_delay_ms = 0 (every step's events written as they come).
want 3 && for build in before after after-at-once; do
  dir=$before
  [ $build != before ] && dir=$after
  # shellcheck disable=SC2046
  serve "$dir" "${s15m[@]}" $([ $build = after-at-once ] && echo --set server.stream_delay_ms=0)
  over_http "s15m-r5-$build" $light s15m
  stop
done

# 4. The stories260K burst: in process and through HTTP (after), with the client's cost; the
# server pacing its streams (the default: a fast stream's events gathered for up to
# server.stream_delay_ms) and writing every step's events as they come (stream_delay_ms = 0).
want 4 && for r in $(seq 1 "$repeats"); do
  /usr/bin/time -f "client cpu_s %U %S wall_s %e" -o "$out/stories-burst-inprocess-run$r.client" \
    "$client" bench --workload $burst --policies continuous -q \
    --json "$out/stories-burst-inprocess-run$r.json" >"$out/stories-burst-inprocess-run$r.txt"
  serve "$after"
  over_http "stories-burst-http-run$r" $burst stories260K
  stop
  serve "$after" --set server.stream_delay_ms=0
  over_http "stories-burst-http-at-once-run$r" $burst stories260K
  stop
done
# 5. The server's own ceiling (trivial model, 64 streams), before and after, same client.
want 5 && for r in $(seq 1 "$repeats"); do
  SERVER="$before/apps/conveyor" BUILD="$after" JSON="$out/ceiling-before-run$r.json" \
    scripts/http-ceiling.sh >"$out/ceiling-before-run$r.txt" 2>&1
  BUILD="$after" JSON="$out/ceiling-after-run$r.json" scripts/http-ceiling.sh \
    >"$out/ceiling-after-run$r.txt" 2>&1
done

# 6. oneDNN's matmul on the same shapes as bm_matmul, where it is built.
if want 6 && [ -x "$after/benchmarks/conveyor_dnnl_bench" ]; then
  "$after/benchmarks/conveyor_dnnl_bench" --benchmark_min_time=0.5 >"$out/dnnl.txt" 2>&1
fi
# 7. The light load against the batch-1 step, in rounds (the step moves with the machine from
# minute to minute): the s15m step at batch 1, then the 5 requests/s replay against a fresh
# server (after) with each stream delay in STREAM_DELAYS (milliseconds; default "2 0": the
# default pacing, and every step's events written as they come), its decode passes read from
# /metrics.
want 7 && for r in $(seq 1 "$repeats"); do
  "$after/benchmarks/conveyor_model_bench" \
    --benchmark_filter='bm_decode/model:1/batch:1/bf16:0/kv_bf16:0' --benchmark_min_time=0.5 \
    >"$out/r5-step-run$r.txt" 2>&1
  for delay in ${STREAM_DELAYS:-2 0}; do
    serve "$after" "${s15m[@]}" --set server.stream_delay_ms=$delay
    over_http "r5-delay$delay-run$r" $light s15m
    curl -s "http://127.0.0.1:$port/metrics" >"$out/r5-delay$delay-run$r.metrics"
    stop
  done
done
echo "raw results in $out"
