#!/usr/bin/env bash
# One-off (thirteenth session, docs/benchmarks.md section 8): the r5 replay's TPOT over the
# batch-1 step with executors[0].min_prefill_tokens 16 (the default) and 64, in alternating rounds.
#   min-prefill-ab.sh OUT_DIR ROUNDS ["16 64"]
# Files are named r5-delay<VALUE>-run<R> so that session12/r5-ratio.py reads them (VALUE is the
# min_prefill_tokens here, not a stream delay).
set -euo pipefail
out=$1 rounds=$2 values=${3:-16 64}
mkdir -p "$out"; out=$(realpath "$out")
cd "$(dirname "$0")/../../../.."
b=build port=18123
for r in $(seq 1 "$rounds"); do
  $b/benchmarks/conveyor_model_bench --benchmark_filter='bm_decode/model:1/batch:1/bf16:0/kv_bf16:0' \
    --benchmark_min_time=0.5 >"$out/r5-step-run$r.txt" 2>&1
  for v in $values; do
    $b/apps/conveyor serve --port $port --log-level warn --model synthetic:s15m \
      --set executors=cpu --set "executors[0].min_prefill_tokens=$v" >"$out/serve.log" 2>&1 &
    pid=$!
    until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do kill -0 $pid; sleep 0.2; done
    $b/apps/conveyor bench --workload workloads/stories-poisson-r5-n100.jsonl --target "http://127.0.0.1:$port" \
      --model s15m -q --json "$out/r5-delay$v-run$r.json" >"$out/r5-delay$v-run$r.txt"
    curl -s "http://127.0.0.1:$port/metrics" >"$out/r5-delay$v-run$r.metrics"
    kill -INT $pid; wait $pid || true
  done
done
python3 docs/bench/speed/session12/r5-ratio.py "$out" "$rounds" "$values"
