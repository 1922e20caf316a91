#!/bin/bash
# Alternating rounds of the r5 replay over HTTP against a fresh s15m server: threads unpinned
# (none), or the two compute threads on cores 0 and 1 and every other thread of the server on
# the core of the compute thread with the lower (lo) or higher (hi) thread id.
#   pin-ab.sh OUT ROUNDS
set -u
cd /work/main
out=$1 rounds=$2; mkdir -p "$out"
port=18124
serve() { build/apps/conveyor serve --port $port --log-level warn --model synthetic:s15m >"$out/serve.log" 2>&1 & pid=$!
  until curl -sf http://127.0.0.1:$port/health >/dev/null; do sleep 0.2; done; }
stop() { kill -INT $pid; wait $pid; }
threads_cpu() { for t in /proc/$pid/task/*; do echo "$(basename $t) $(awk '{print $14+$15}' $t/stat)"; done | sort; }
for r in $(seq 1 "$rounds"); do
  build/benchmarks/conveyor_model_bench --benchmark_filter='bm_decode/model:1/batch:1/bf16:0/kv_bf16:0' \
    --benchmark_min_time=0.5 >"$out/step-run$r.txt" 2>&1
  for mode in ${MODES:-none lo hi}; do
    serve
    threads_cpu >"$out/t0"
    build/apps/conveyor bench --workload workloads/stories-burst-n200.jsonl --target http://127.0.0.1:$port \
      --model s15m -q >/dev/null
    threads_cpu >"$out/t1"
    read -r a b < <(join "$out/t0" "$out/t1" | awk '{print $3-$2, $1}' | sort -rn | head -2 | awk '{print $2}' | sort -n | tr '\n' ' ')
    if [ $mode != none ]; then
      for t in /proc/$pid/task/*; do taskset -pc 1 "$(basename $t)" >/dev/null; done
      if [ $mode = lo ]; then taskset -pc 0 "$b" >/dev/null; else taskset -pc 0 "$a" >/dev/null; fi
    fi
    echo "round $r mode $mode compute threads $a $b" >>"$out/log"
    build/apps/conveyor bench --workload workloads/stories-poisson-r5-n100.jsonl --target http://127.0.0.1:$port \
      --model s15m -q --json "$out/r5-$mode-run$r.json" >"$out/r5-$mode-run$r.txt"
    curl -s http://127.0.0.1:$port/metrics >"$out/r5-$mode-run$r.metrics"
    stop
  done
done
