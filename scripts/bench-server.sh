# Starting and stopping the server of a benchmark script (sourced by scripts/bench-*.sh): the
# caller sets `port` and `out`; `pid` holds the running server.

# BUILD_DIR serve-args...: starts that build's `conveyor serve` on $port, logging to
# $out/serve.log, and waits until it answers /health.
serve() {
  local build=$1
  shift
  "$build/apps/conveyor" serve --port "$port" --log-level warn "$@" >"$out/serve.log" 2>&1 &
  pid=$!
  until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do
    kill -0 "$pid" 2>/dev/null || { cat "$out/serve.log"; exit 1; }
    sleep 0.2
  done
}

# Stops the server the way Ctrl-C does and waits for it.
stop() {
  kill -INT "$pid"
  wait "$pid" || true
}
