#!/usr/bin/env bash
# rounds of the stories burst: in process and HTTP, for each XSPIN value
cd /work/main
out=$1; rounds=$2; shift 2; spins="$@"; mkdir -p $out
port=18199
B=build/apps/conveyor
burst=workloads/stories-burst-n200.jsonl
tok() { python3 -c "import json,sys;d=json.load(open('$1'));r=d['runs'][0];print(round(r['output_tokens_per_s']), round(r.get('process_cpu_s',0),2))"; }
for r in $(seq $rounds); do
  for sp in $spins; do
    XSPIN=$sp $B bench --workload $burst --policies continuous -q --json $out/inproc-s$sp-$r.json >/dev/null 2>&1
    echo "r$r inproc s$sp $(tok $out/inproc-s$sp-$r.json)"
    XSPIN=$sp $B serve --port $port --log-level warn > $out/serve.log 2>&1 &
    pid=$!
    until curl -sf http://127.0.0.1:$port/health >/dev/null; do sleep 0.2; done
    c0=$(awk -v hz=$(getconf CLK_TCK) '{printf "%.2f", ($14+$15)/hz}' /proc/$pid/stat)
    $B bench --workload $burst --target http://127.0.0.1:$port --model stories260K -q --json $out/http-s$sp-$r.json >/dev/null 2>&1
    c1=$(awk -v hz=$(getconf CLK_TCK) '{printf "%.2f", ($14+$15)/hz}' /proc/$pid/stat)
    echo "r$r http   s$sp $(tok $out/http-s$sp-$r.json) server $(echo "$c1 - $c0" | bc)"
    kill -INT $pid; wait $pid
  done
done
