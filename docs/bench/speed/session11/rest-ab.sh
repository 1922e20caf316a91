#!/usr/bin/env bash
# A/B: the pool's workers sent to sleep at the end of each forward pass (CONVEYOR_REST=1, a
# temporary variable) against the default 50 us spin: the s15m batch-1 and batch-64 steps, and the
# r5 replay through HTTP against a fresh server. Alternating order.
cd /work/main
out=$1; rounds=${2:-4}; mkdir -p $out; port=18197
for r in $(seq $rounds); do
  if (( r % 2 )); then order="rest spin"; else order="spin rest"; fi
  for v in $order; do
    if [ $v = rest ]; then export CONVEYOR_REST=1; else unset CONVEYOR_REST; fi
    steps=$(build/benchmarks/conveyor_model_bench --benchmark_filter='bm_decode/model:1/batch:(1|64)/bf16:0/kv_bf16:0' --benchmark_min_time=0.5 2>&1 | awk '/real_time/{printf "%s ", $2}')
    build/apps/conveyor serve --port $port --log-level warn --model synthetic:s15m > $out/serve.log 2>&1 &
    pid=$!
    until curl -sf http://127.0.0.1:$port/health >/dev/null; do sleep 0.2; done
    build/apps/conveyor bench --workload workloads/stories-poisson-r5-n100.jsonl --target http://127.0.0.1:$port --model s15m -q --json $out/r5-$v-$r.json > /dev/null 2>&1
    kill -INT $pid; wait $pid
    tpot=$(python3 -c "import json;r=json.load(open('$out/r5-$v-$r.json'))['runs'][0];print(round(r['tpot_s']['mean']*1e6,1))")
    s1=${steps%% *}
    echo "r$r $v steps_us(b1 b64) $steps tpot_us $tpot ratio $(python3 -c "print(round($tpot/$s1,3))")"
  done
done
