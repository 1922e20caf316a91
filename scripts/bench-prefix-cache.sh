#!/usr/bin/env bash
# The prefix cache's goals in docs/benchmarks.md, measured side by side in one run:
#   scripts/bench-prefix-cache.sh BEFORE_BUILD_DIR AFTER_BUILD_DIR OUT_DIR [ROUNDS]
# SECTIONS="2 3" runs only those of the numbered parts below (default: all). BEFORE is a build of
# the code before the paged KV cache (section 1 only; its model bench needs the s42m decode rows,
# benchmarks/model_bench.cpp's model 2); AFTER is this build, whose `conveyor bench` is the one
# client of every server. Rounds alternate the two sides (default 5). Nothing else should run
# meanwhile.
set -euo pipefail
before=$(realpath "$1") after=$(realpath "$2") out=$3 rounds=${4:-5}
mkdir -p "$out"
out=$(realpath "$out")
cd "$(dirname "$0")/.."
port=${CONVEYOR_BENCH_PORT:-18124}
client="$after/apps/conveyor"
pid=
sections=${SECTIONS:-1 2 3 4 5}
want() { [[ " $sections " == *" $1 "* ]]; }

# shellcheck source=scripts/bench-server.sh
source scripts/bench-server.sh

# NAME BENCH-ARGS...: one run of `conveyor bench` against the running server.
bench() {
  local name=$1
  shift
  "$client" bench --target "http://127.0.0.1:$port" -q --json "$out/$name.json" "$@" \
    >"$out/$name.txt"
  echo "$name: $(grep -E 'TTFT turns 2|hit rate|out tok/s|TTFT ms' "$out/$name.txt" | tr -s ' ' |
    tr '\n' ';')"
}

# 1. The decode step through block tables against the contiguous cache before it: s15m and
# s42m at batch 16 and 64 (f32), BEFORE and AFTER alternating.
if want 1; then
  filter='bm_decode/model:(1|2)/batch:(16|64)/bf16:0/kv_bf16:0'
  for r in $(seq 1 "$rounds"); do
    for side in before after; do
      dir=$before
      [ $side = after ] && dir=$after
      "$dir/benchmarks/conveyor_model_bench" --benchmark_filter="$filter" \
        --benchmark_min_time=1 >"$out/decode-$side-run$r.txt" 2>&1
      echo "decode $side run $r: $(grep -E '^bm_decode' "$out/decode-$side-run$r.txt" |
        awk '{printf "%s %s us; ", $1, $2}')"
    done
  done
fi

# 2. Multi-turn chat on synthetic:s42m (512 tokens of context: a system prompt of about 180
# tokens of the stories tokenizer, 4 turns of replies of 32 tokens, conversations starting at
# 2 per second): caching on and off.
conversation=(--kind conversations --rate 2 --conversations 32 --turns 4 --system-tokens 90
              --user-words 4,8 --reply-tokens 32 --temperature 0 --ignore-eos --seed 1)
if want 2; then
  for r in $(seq 1 "$rounds"); do
    for caching in true false; do
      serve "$after" --set executors=cpu --model synthetic:s42m \
        --set "kv_cache.prefix_caching=$caching"
      bench "s42m-chat-caching-$caching-run$r" "${conversation[@]}"
      stop
    done
  done
fi

# The 1B-class model of sections 3 and 5: a Hugging Face directory of TinyLlama 1.1B's shape with
# random bf16 weights (scripts/make-bench-1b.py DIR: 0.97 billion parameters, its vocabulary that of
# the 512-token tokenizer it gets, so that every reply is text), with a chat template.
one_b=${CONVEYOR_BENCH_1B:-/tmp/bench-1b}

# 3. Multi-turn chat on the 1B-class model (bf16 weights): 8 conversations of 4 turns, a system
# prompt of about 400 tokens, replies of 32 tokens; once each way.
if want 3; then
  for caching in true false; do
    serve "$after" --set executors=cpu --model "$one_b" --set model.dtype=bf16 \
      --set "kv_cache.prefix_caching=$caching"
    bench "1b-chat-caching-$caching" --kind conversations --rate 0.05 --conversations 8 \
      --turns 4 --system-tokens 200 --user-words 4,10 --reply-tokens 32 --temperature 0 \
      --ignore-eos --seed 1
    stop
  done
fi

# 4. No sharing at all: the shipped s15m burst, caching on and off alternating.
if want 4; then
  for r in $(seq 1 "$rounds"); do
    for caching in true false; do
      serve "$after" --set executors=cpu --model synthetic:s15m \
        --set "kv_cache.prefix_caching=$caching"
      bench "s15m-burst-caching-$caching-run$r" --workload workloads/stories-burst-n200.jsonl \
        --model s15m
      stop
    done
  done
fi

# 5. A cached 400-token prefix against a cold one on the 1B-class model (bf16): independent
# requests behind one system prompt of about 400 tokens, one every 10 s.
if want 5; then
  for caching in true false; do
    serve "$after" --set executors=cpu --model "$one_b" --set model.dtype=bf16 \
      --set "kv_cache.prefix_caching=$caching"
    bench "1b-prefix-caching-$caching" --kind shared-prefix --rate 0.1 --requests 8 \
      --system-tokens 200 --user-words 4,10 --reply-tokens 8 --temperature 0 --ignore-eos \
      --seed 1
    stop
  done
fi
