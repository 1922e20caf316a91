#!/usr/bin/env bash
# What requests with an output format cost the requests without one that share their batches:
# `conveyor bench` in process replays one workload with no request formatted and with a share of
# them asking for a fixed JSON schema (--json-schema-fraction), alternating the two in each
# round (the order flips from round to round), on each model; then prints, per model, the
# medians over the rounds of the unformatted requests' TPOT (mean and p99) in both runs, and the
# formatted requests' own.
#
# Usage: scripts/bench-structured.sh [BUILD] [OUT] [ROUNDS]      (default: build, a temporary
#        folder, 5). MODELS (default "stories260K synthetic:s42m"; stories260K is the embedded
#        model), FRACTION (0.5), WORKLOAD (workloads/stories-burst-n200.jsonl) and BENCH_FLAGS
#        (more flags for conveyor bench) change the runs. The JSON reports stay in OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-$(mktemp -d /tmp/bench-structured.XXXXXX)}
rounds=${3:-5}
models=${MODELS:-"stories260K synthetic:s42m"}
fraction=${FRACTION:-0.5}
workload=${WORKLOAD:-workloads/stories-burst-n200.jsonl}
mkdir -p "$out"
run() {  # MODEL FRACTION ROUND
  local flags=()
  [ "$1" = stories260K ] || flags=(--model "$1")
  local file
  file="$out/$(echo "$1" | tr ':/' '--')-f$2-r$3.json"
  # shellcheck disable=SC2086
  "$build/apps/conveyor" bench --workload "$workload" "${flags[@]}" --policies continuous -q \
    --json-schema-fraction "$2" --json "$file" ${BENCH_FLAGS:-} >/dev/null
}
for round in $(seq 1 "$rounds"); do
  for model in $models; do
    if [ $((round % 2)) = 1 ]; then order="0 $fraction"; else order="$fraction 0"; fi
    for f in $order; do
      echo "bench-structured: round $round, $model, fraction $f" >&2
      run "$model" "$f" "$round"
    done
  done
done
python3 - "$out" "$fraction" "$rounds" $models <<'PY'
import json, statistics, sys
out, fraction, rounds, models = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
def report(model, f, r):
    name = model.replace(":", "-").replace("/", "-")
    return json.load(open(f"{out}/{name}-f{f}-r{r}.json"))["runs"][0]
ms = lambda x: "-" if x is None else f"{x * 1e3:.3f}"
print(f"| model | TPOT ms without formatted neighbours, mean / p99 | with {float(fraction):.0%} "
      "asking for the JSON schema, mean / p99 | change of the mean (range) | the formatted "
      "requests' TPOT ms, mean / p99 |")
print("|---|---|---|---|---|")
for model in models:
    free = [report(model, "0", r) for r in range(1, rounds + 1)]
    mixed = [report(model, fraction, r) for r in range(1, rounds + 1)]
    med = lambda runs, key, q: statistics.median(x[key][q] for x in runs)
    ratios = [m["tpot_unconstrained_s"]["mean"] / f["tpot_unconstrained_s"]["mean"] - 1
              for f, m in zip(free, mixed)]
    print(f"| {model} | {ms(med(free, 'tpot_unconstrained_s', 'mean'))} / "
          f"{ms(med(free, 'tpot_unconstrained_s', 'p99'))} | "
          f"{ms(med(mixed, 'tpot_unconstrained_s', 'mean'))} / "
          f"{ms(med(mixed, 'tpot_unconstrained_s', 'p99'))} | "
          f"{statistics.median(ratios):+.1%} ({min(ratios):+.1%} to {max(ratios):+.1%}) | "
          f"{ms(med(mixed, 'tpot_constrained_s', 'mean'))} / "
          f"{ms(med(mixed, 'tpot_constrained_s', 'p99'))} |")
    tokens = statistics.median(m["constrained_output_tokens"] for m in mixed)
    done = statistics.median(m["constrained_completed"] for m in mixed)
    print(f"bench-structured: {model}: {done:.0f} formatted requests completed with {tokens:.0f} "
          f"output tokens (medians); a whole run's output tokens {free[0]['output_tokens']} "
          f"without, {mixed[0]['output_tokens']} with", file=sys.stderr)
PY
echo "bench-structured: reports in $out" >&2
