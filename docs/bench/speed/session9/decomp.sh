#!/usr/bin/env bash
cd /work/main; out=$1; rounds=$2; mkdir -p $out
B=build/apps/conveyor
t() { python3 -c "import json;r=json.load(open('$1'))['runs'][0];print('tpot %.4f ms itl_p50 %.4f batch %.3f' % (r['tpot_s']['mean']*1e3, r['itl_s']['p50']*1e3, r['batch_size_mean']))"; }
for r in $(seq $rounds); do
  CONVEYOR_THREADS= build/benchmarks/conveyor_model_bench --benchmark_filter='bm_decode/model:1/batch:1/bf16:0/kv_bf16:0' --benchmark_min_time=0.5 2>/dev/null | grep bm_ | awk '{print "step", $2}' > $out/step-$r.txt; echo "r$r $(cat $out/step-$r.txt)"
  $B bench --workload workloads/stories-poisson-r5-n100.jsonl --policies continuous --model synthetic:s15m -q --json $out/A-$r.json >/dev/null 2>&1; echo "r$r A (r5)        $(t $out/A-$r.json)"
  $B bench --workload workloads/stories-poisson-r5-n100.jsonl --policies continuous --model synthetic:s15m --set batcher.max_num_seqs=1 -q --json $out/C-$r.json >/dev/null 2>&1; echo "r$r C (r5, 1 seq) $(t $out/C-$r.json)"
  $B bench --workload /tmp/s9/r5-burst.jsonl --policies continuous --model synthetic:s15m --set batcher.max_num_seqs=1 -q --json $out/B-$r.json >/dev/null 2>&1; echo "r$r B (b2b, 1 seq) $(t $out/B-$r.json)"
done
