#!/usr/bin/env bash
# Conveyor against llama.cpp on the same GGUF files, threads and machine:
#   scripts/bench-gguf.sh BUILD_DIR OUT_DIR [ROUNDS]
# BUILD_DIR is the Conveyor build whose `conveyor serve` is measured; its `conveyor bench` is the
# one HTTP client of both servers. Rounds (default 3) alternate the servers: each round runs
# every server configuration once on every file. Nothing else should run meanwhile.
#
# The model: a TinyLlama-1.1B-shaped Llama with random bf16 weights (scripts/make-bench-1b.py:
# 22 layers, hidden 2048, intermediate 5632, 32 heads on 4 kv heads, the 512-token vocabulary of
# tests/fixtures/tokenizers/llama_spm so that every reply is text), converted by llama.cpp's
# convert_hf_to_gguf.py to BF16 and Q8_0 and by llama-quantize to Q4_K_M. Made once into
# $CONVEYOR_BENCH_GGUF (default ~/.cache/conveyor/bench-gguf; about 5 GB), never committed.
# llama.cpp is scripts/fetch-llama-cpp.sh's build (LLAMA_CPP_DIR overrides its folder).
#
# Each server, per file, per round:
#   start   seconds from its launch until /health answers 200 (the file loaded)
#   single  SINGLE requests one at a time (default 4; prompts of about 100 words, 64 tokens
#           each, greedy, ignore_eos): time to first token and time per output token
#   burst   BURST requests at once (default 32) of 32 tokens each: throughput and latencies
#   rss     the server's peak resident memory (VmHWM) once ready, and after the runs
# llama-server runs with LLAMA_SLOTS parallel slots (default "8 16") and flash attention
# on and off (FLASH, default "on off"); Conveyor with CONVEYOR_SLOTS slots (default 32).
#
# Conveyor runs once per entry of CONVEYOR_VARIANTS (default "default"): NAME or
# NAME:KEY=VALUE,KEY=VALUE, each pair a --set of its start (e.g. "default
# f32:model.dtype=f32 bf16-f32-inputs:model.dtype=bf16,model.bf16_inputs=false").
# Knobs (environment): SIDES ("llama conveyor": which servers), QUANTS ("bf16 q8_0 q4_k_m"),
# THREADS (compute threads of both servers; default every core), SINGLE, BURST, LLAMA_SLOTS,
# FLASH, CONVEYOR_SLOTS, PYTHON (a Python with tools/fixtures/requirements.txt, for the
# converter; default tools/venv-fixtures/bin/python), CONVEYOR_BENCH_PORT.
# llama-bench (the same threads, no HTTP) also measures llama.cpp's prompt processing of 128
# tokens and generation of 32 per file and round: OUT_DIR/llama-bench-QUANT-fa-FA-runR.md
# (LLAMA_BENCH=0 leaves it out).
# Results: OUT_DIR/NAME.{txt,json} per `conveyor bench` run; OUT_DIR/summary.tsv one line per
# server start: seconds to ready, peak RSS, the single requests' mean TTFT and TPOT, the burst's
# output tokens/s and median TTFT, TPOT and end-to-end latency.
set -euo pipefail
build=$(realpath "$1") out=$2 rounds=${3:-3}
mkdir -p "$out"
out=$(realpath "$out")
cd "$(dirname "$0")/.."
port=${CONVEYOR_BENCH_PORT:-18125}
client="$build/apps/conveyor"
pid=
sides=${SIDES:-llama conveyor}
quants=${QUANTS:-bf16 q8_0 q4_k_m}
threads=${THREADS:-$(nproc)}
single=${SINGLE:-4}
burst=${BURST:-32}
llama_slots=${LLAMA_SLOTS:-8 16}
flash=${FLASH:-on off}
conveyor_slots=${CONVEYOR_SLOTS:-32}
conveyor_variants=${CONVEYOR_VARIANTS:-default}
llama_bench=${LLAMA_BENCH:-1}
python=${PYTHON:-tools/venv-fixtures/bin/python}
models=${CONVEYOR_BENCH_GGUF:-${XDG_CACHE_HOME:-$HOME/.cache}/conveyor/bench-gguf}

# shellcheck source=scripts/bench-server.sh
source scripts/bench-server.sh
# A server left by a failed step is stopped on the way out.
trap '[ -z "$pid" ] || kill -INT "$pid" 2>/dev/null || true' EXIT

if [[ " $sides " == *" llama "* ]] || [ ! -f "$models/.done" ]; then
  llama=${LLAMA_CPP_DIR:-$(scripts/fetch-llama-cpp.sh | tail -1)}
fi

# The GGUF files, made once.
if [ ! -f "$models/.done" ]; then
  mkdir -p "$models"
  [ -f "$models/hf/config.json" ] || "$python" scripts/make-bench-1b.py "$models/hf" >&2
  for t in bf16 q8_0; do
    echo "bench-gguf: converting to $t" >&2
    "$python" "$llama/src/convert_hf_to_gguf.py" "$models/hf" --outtype $t \
      --outfile "$models/tinyllama-shape.$t.gguf" >"$models/convert-$t.log" 2>&1
  done
  echo "bench-gguf: quantizing to Q4_K_M" >&2
  "$llama/bin/llama-quantize" "$models/tinyllama-shape.bf16.gguf" \
    "$models/tinyllama-shape.q4_k_m.gguf" Q4_K_M >"$models/quantize.log" 2>&1
  rm -rf "$models/hf"
  touch "$models/.done"
fi

echo -e "run\tready_s\tready_rss_mib\tpeak_rss_mib\tsingle_ttft_ms\tsingle_tpot_ms\tburst_out_tok_s\tburst_ttft_p50_ms\tburst_tpot_p50_ms\tburst_e2e_p50_ms\tnote" >"$out/summary.tsv"

# Seconds since the epoch, to the millisecond.
now() { date +%s.%3N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.2f", a - b }'; }

# CMD...: starts a server on $port, logging to $out/server.log, and waits until /health answers
# 200 (llama-server answers 503 while it loads); sets pid and started (seconds to ready).
launch() {
  local t0
  t0=$(now)
  "$@" >"$out/server.log" 2>&1 &
  pid=$!
  until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do
    kill -0 "$pid" 2>/dev/null || {
      tail -30 "$out/server.log" >&2
      exit 1
    }
    sleep 0.1
  done
  started=$(since "$t0")
  ready_rss=$(peak_rss_mib)
}

# Stops the server (SIGINT, as Ctrl-C) and waits for it.
halt() {
  kill -INT "$pid"
  wait "$pid" || true
  pid=
}

peak_rss_mib() { awk '/^VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status"; }

# NAME BENCH-ARGS...: one `conveyor bench` against the running server, its figures in summary.
bench() {
  local name=$1
  shift
  "$client" bench --target "http://127.0.0.1:$port" --client-threads 1 -q \
    --json "$out/$name.json" "$@" >"$out/$name.txt"
}

# FILE LABEL FIELD: a figure of a `conveyor bench` table (FIELD 1: the mean, 2: p50...).
figure() {
  awk -v label="$2" -v field="$3" 'index($0, label) == 1 {
    sub(/^.*\)/, ""); split($0, parts, "/"); v = parts[field]; gsub(/ /, "", v); print v }' \
    "$1"
}

# FILE: "incomplete" where some requests of the run were rejected or failed.
complete() { awk '/^(rejected|failed) / && $2 != 0 { bad = 1 } END { if (bad) print "incomplete" }' "$1"; }

# NAME: the single and burst runs against the running server, and their line in summary.tsv.
measure() {
  local name=$1 i ttft=() tpot=() note=
  for i in $(seq 1 "$single"); do
    bench "$name-single$i" --rate inf -n 1 --seed "$i" --prompt-words 100,100 \
      --max-tokens 64,64 --temperature 0 --ignore-eos
    ttft+=("$(figure "$out/$name-single$i.txt" "TTFT ms" 1)")
    tpot+=("$(figure "$out/$name-single$i.txt" "TPOT ms" 1)")
    note+=$(complete "$out/$name-single$i.txt")
  done
  bench "$name-burst" --rate inf -n "$burst" --seed 1 --prompt-words 3,40 \
    --max-tokens 32,32 --temperature 0 --ignore-eos
  note+=$(complete "$out/$name-burst.txt")
  local b="$out/$name-burst.txt"
  echo -e "$name\t$started\t$ready_rss\t$(peak_rss_mib)\t$(mean "${ttft[@]}")\t$(mean "${tpot[@]}")\t$(
    awk '/^output tokens\/s/ { print $3 }' "$b")\t$(figure "$b" "TTFT ms" 2)\t$(
    figure "$b" "TPOT ms" 2)\t$(figure "$b" "E2E ms" 2)\t${note:-ok}" >>"$out/summary.tsv"
  echo "$name: ready in ${started}s, peak RSS $(peak_rss_mib) MiB ${note}" >&2
}

mean() { echo "$@" | awk '{ s = 0; for (i = 1; i <= NF; i++) s += $i; printf "%.2f", s / NF }'; }

for r in $(seq 1 "$rounds"); do
  for q in $quants; do
    file="$models/tinyllama-shape.$q.gguf"
    for side in $sides; do
      if [ "$side" = llama ]; then
        # llama.cpp's own step measure, without HTTP: prompt processing of 128 tokens and
        # generation of 32 (tokens/s), flash attention each way.
        for fa in $flash; do
          [ "$llama_bench" = 1 ] || continue
          "$llama/bin/llama-bench" -m "$file" -t "$threads" -p 128 -n 32 -r 2 -fa "$fa" \
            -o md >"$out/llama-bench-$q-fa-$fa-run$r.md" 2>/dev/null
        done
        for slots in $llama_slots; do
          for fa in $flash; do
            launch "$llama/bin/llama-server" -m "$file" --port "$port" -t "$threads" \
              -tb "$threads" -np "$slots" -c $((slots * 512)) --flash-attn "$fa" \
              --no-webui --log-disable
            measure "llama-$q-slots$slots-fa-$fa-run$r"
            halt
          done
        done
      else
        for slots in $conveyor_slots; do
          for variant in $conveyor_variants; do
            sets=()
            if [[ $variant == *:* ]]; then
              IFS=, read -ra pairs <<<"${variant#*:}"
              for p in "${pairs[@]}"; do sets+=(--set "$p"); done
            fi
            t0=$(now)
            serve "$build" --model "$file" --threads "$threads" --set executors=cpu \
              --set "executors[0].slots=$slots" --set "batcher.max_num_seqs=$slots" "${sets[@]}"
            started=$(since "$t0")
            ready_rss=$(peak_rss_mib)
            measure "conveyor-$q-slots$slots-${variant%%:*}-run$r"
            stop
            pid=
          done
        done
      fi
    done
  done
done
echo "summary in $out/summary.tsv" >&2
column -t -s $'\t' "$out/summary.tsv" >&2 || cat "$out/summary.tsv" >&2
