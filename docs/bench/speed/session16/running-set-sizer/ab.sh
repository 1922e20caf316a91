#!/bin/bash
# alternating rounds: 16 slots, 32 slots (sizer), 32 slots start=0
B=build/apps/conveyor
W=workloads/stories-burst-n200.jsonl
for r in $(seq 1 ${ROUNDS:-7}); do
  IFS=, read -ra CFGS <<< "${ORDER:-16 16,32 16,32 0}"; for cfg in "${CFGS[@]}"; do
    set -- $cfg
    v=$($B bench --workload $W --model synthetic:s15m --policies continuous -q --set executors=cpu --set "executors[0].slots=$1" --set "batcher.max_num_seqs=$1" --set "executors[0].running_set_start=$2" 2>&1 | awk '/output tokens\/s/{print $3} /mean batch size/{print $4}' | tr '\n' ' ')
    echo "round $r slots $1 start $2: $v"
  done
done
