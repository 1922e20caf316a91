#!/usr/bin/env bash
# Rounds of the stories260K burst, in process and through HTTP, with the pool's worker at the
# default priority (nice 0) and at nice $NICE (CONVEYOR_POOL_NICE, an experiment's variable).
# The order of the two alternates each round.
cd /work/main
out=$1; rounds=${2:-5}; nice=${NICE:-19}; mkdir -p $out
port=18199
B=build/apps/conveyor
burst=workloads/stories-burst-n200.jsonl
tok() { python3 -c "import json,sys;d=json.load(open('$1'));r=d['runs'][0];print(round(r['output_tokens_per_s']), round(r.get('process_cpu_s',0),2))"; }
for r in $(seq $rounds); do
  if (( r % 2 )); then order="0 $nice"; else order="$nice 0"; fi
  for n in $order; do
    CONVEYOR_POOL_NICE=$n $B bench --workload $burst --policies continuous -q --json $out/inproc-n$n-$r.json >/dev/null 2>&1
    echo "r$r inproc nice$n $(tok $out/inproc-n$n-$r.json)"
    CONVEYOR_POOL_NICE=$n $B serve --port $port --log-level warn > $out/serve.log 2>&1 &
    pid=$!
    until curl -sf http://127.0.0.1:$port/health >/dev/null; do sleep 0.2; done
    c0=$(awk -v hz=$(getconf CLK_TCK) '{printf "%.2f", ($14+$15)/hz}' /proc/$pid/stat)
    $B bench --workload $burst --target http://127.0.0.1:$port --model stories260K -q --json $out/http-n$n-$r.json >/dev/null 2>&1
    c1=$(awk -v hz=$(getconf CLK_TCK) '{printf "%.2f", ($14+$15)/hz}' /proc/$pid/stat)
    echo "r$r http   nice$n $(tok $out/http-n$n-$r.json) server $c0 $c1"
    kill -INT $pid; wait $pid
  done
done
