#!/usr/bin/env bash
# Rounds of the stories260K burst, in process and through HTTP: the default compute threads (one
# for this model since the tenth session) against --threads 2 (the default before). Columns:
# output tokens/s, the process's CPU seconds (the client's, through HTTP), and the server's CPU
# seconds before and after the burst. The order of the two alternates each round.
cd /work/main
out=$1; rounds=${2:-5}; mkdir -p $out
port=18199
B=build/apps/conveyor
burst=workloads/stories-burst-n200.jsonl
tok() { python3 -c "import json,sys;d=json.load(open('$1'));r=d['runs'][0];print(round(r['output_tokens_per_s']), round(r.get('process_cpu_s',0),2))"; }
for r in $(seq $rounds); do
  if (( r % 2 )); then order="0 2"; else order="2 0"; fi
  for th in $order; do
    $B bench --workload $burst --policies continuous -q --threads $th --json $out/inproc-t$th-$r.json >/dev/null 2>&1
    echo "r$r inproc t$th $(tok $out/inproc-t$th-$r.json)"
    $B serve --port $port --log-level warn --threads $th > $out/serve.log 2>&1 &
    pid=$!
    until curl -sf http://127.0.0.1:$port/health >/dev/null; do sleep 0.2; done
    c0=$(awk -v hz=$(getconf CLK_TCK) '{printf "%.2f", ($14+$15)/hz}' /proc/$pid/stat)
    $B bench --workload $burst --target http://127.0.0.1:$port --model stories260K -q --json $out/http-t$th-$r.json >/dev/null 2>&1
    c1=$(awk -v hz=$(getconf CLK_TCK) '{printf "%.2f", ($14+$15)/hz}' /proc/$pid/stat)
    echo "r$r http   t$th $(tok $out/http-t$th-$r.json) server $c0 $c1"
    kill -INT $pid; wait $pid
  done
done
