#!/usr/bin/env bash
# A/B: packed weights in huge pages (arena) against 4 KiB pages (CONVEYOR_NO_ARENA=1, temporary).
cd /work/main
out=$1; rounds=${2:-3}; mkdir -p $out
for r in $(seq $rounds); do
  if (( r % 2 )); then order="arena plain"; else order="plain arena"; fi
  for v in $order; do
    if [ $v = plain ]; then export CONVEYOR_NO_ARENA=1; else unset CONVEYOR_NO_ARENA; fi
    step=$(build/benchmarks/conveyor_model_bench --benchmark_filter='bm_decode/model:1/batch:1/bf16:0/kv_bf16:0' --benchmark_min_time=0.5 2>&1 | awk '/real_time/{print $2}')
    CONVEYOR_STEP_DUMP=$out/steps-$v-$r.txt build/apps/conveyor bench --workload workloads/stories-poisson-r5-n100.jsonl --policies continuous --model synthetic:s15m -q --json $out/r5-$v-$r.json > /dev/null 2>&1
    tpot=$(python3 -c "import json;r=json.load(open('$out/r5-$v-$r.json'))['runs'][0];print(round(r['tpot_s']['mean']*1e6,1))")
    echo "r$r $v step_us $step tpot_us $tpot ratio $(python3 -c "print(round($tpot/$step,3))") $(python3 /tmp/s11/an2.py $out/steps-$v-$r.txt)"
  done
done
