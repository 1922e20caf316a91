#!/usr/bin/env bash
# The HTTP server's own ceiling (docs/benchmarks.md, "The HTTP path's ceiling"): `conveyor serve`
# with the `trivial` model (fixed logits, no arithmetic) streams to CLIENTS concurrent clients of
# `conveyor bench --target` (a burst: every request at t = 0, each generating TOKENS tokens).
# Prints the bench's table, then the CPU time of the client process (getrusage of the bench, a
# child of this script's Python wrapper) and of the server (/proc/PID/stat over the run), so that
# the client's cost is stated apart from the server's.
#
#   scripts/http-ceiling.sh                      # 64 clients x 4000 tokens
#   CLIENTS=64 TOKENS=500 scripts/http-ceiling.sh   # a smoke run of a few seconds
#
# Settings (environment): BUILD (build; another build directory measures other code, e.g. the
# code of an older commit), SERVER (the binary that serves; default: the build's conveyor, which is
# always the client), CLIENTS (64), TOKENS (4000), PORT (a free one), THREADS (the server's
# io_threads, 1), INTERVAL (the server's stream_interval; unset: the server's default),
# JSON (a file for the bench's JSON results; default: a temporary one).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD:-$root/build}"
clients="${CLIENTS:-64}"
tokens="${TOKENS:-4000}"
port="${PORT:-}"
io_threads="${THREADS:-1}"
interval_args=()
[[ -n "${INTERVAL:-}" ]] && interval_args=(--set "server.stream_interval=$INTERVAL")
conveyor="$build/apps/conveyor"
# The server may be another binary (e.g. the code before the step planner), measured by the same client.
server_bin="${SERVER:-$conveyor}"
python="$root/tools/venv/bin/python"
[[ -x "$python" ]] || python=python3
[[ -x "$conveyor" ]] || { echo "http-ceiling: $conveyor is not built" >&2; exit 1; }
if [[ -z "$port" ]]; then
  # A port that is free now (the kernel's choice).
  port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
fi
json="${JSON:-$(mktemp --suffix=.json)}"
log="$(mktemp --suffix=.log)"
# The context holds the prompt (a few words) and every generated token.
context=$((tokens + 64))

"$server_bin" serve --model trivial --port "$port" --log-level warn --set executors=cpu \
  --set "executors[0].slots=$clients" --set "executors[0].context=$context" \
  --set "server.io_threads=$io_threads" --set "generation.max_tokens=$tokens" \
  "${interval_args[@]}" >"$log" 2>&1 &
server=$!
stop_server() {
  kill -TERM "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
}
trap stop_server EXIT
for _ in $(seq 1 200); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  kill -0 "$server" 2>/dev/null || { echo "http-ceiling: the server did not start:" >&2; cat "$log" >&2; exit 1; }
  sleep 0.1
done

# utime + stime of a process in clock ticks (fields 14 and 15 of /proc/PID/stat).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
ticks_per_s=$(getconf CLK_TCK)
server_before=$(cpu_ticks "$server")

# Greedy where the bench can ask for it (its --temperature flag), so that the trivial model's
# uniform logits cost an argmax per token, not a softmax over the vocabulary.
sampling=()
if "$conveyor" bench --help 2>/dev/null | grep -q -- '--temperature'; then
  sampling=(--temperature 0)
fi
# The bench as a child of a small Python wrapper that reports the child's getrusage.
"$python" - "$conveyor" bench --target "http://127.0.0.1:$port" --rate inf "${sampling[@]}" \
  --requests "$clients" --max-tokens "$tokens,$tokens" --prompt-words 4,4 --json "$json" <<'EOF'
import resource, subprocess, sys, time
start = time.monotonic()
rc = subprocess.call(sys.argv[1:])
wall = time.monotonic() - start
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"client CPU: {r.ru_utime:.2f} s user + {r.ru_stime:.2f} s system over {wall:.2f} s wall "
      f"({(r.ru_utime + r.ru_stime) / wall:.2f} cores)")
with open(sys.argv[-1] + ".client", "w") as f:
    f.write(f"{r.ru_utime + r.ru_stime} {wall}\n")
sys.exit(rc)
EOF

server_after=$(cpu_ticks "$server")
read -r client_cpu _ <"$json.client"
"$python" - "$json" "$client_cpu" "$(( server_after - server_before ))" "$ticks_per_s" <<'EOF'
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
client_cpu, server_ticks, hz = float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
server_cpu = server_ticks / hz
for r in runs:
    tokens, wall = r["output_tokens"], r["wall_s"]
    print(f"server: {r['completed']} of {r['requests']} streams, {tokens} output tokens in "
          f"{wall:.2f} s: {r['output_tokens_per_s']:.0f} output tokens/s")
    if tokens:
        print(f"server CPU: {server_cpu:.2f} s ({server_cpu / wall:.2f} cores), "
              f"{1e6 * server_cpu / tokens:.2f} us per token; client CPU: "
              f"{1e6 * client_cpu / tokens:.2f} us per token")
EOF
rm -f "$json.client" "$log"
