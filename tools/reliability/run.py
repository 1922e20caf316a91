#!/usr/bin/python3
"""Reliability harness of `conveyor serve`: overload, hostile clients, soak (docs/reliability.md).

    python3 tools/reliability/run.py capacity --server-binary build/apps/conveyor
    python3 tools/reliability/run.py overload --server-binary build/apps/conveyor --seconds 60
    python3 tools/reliability/run.py hostile  --server-binary build/apps/conveyor
    python3 tools/reliability/run.py soak     --server-binary build/apps/conveyor --seconds 1200

Each mode starts its own server on a free port, prints a summary and the invariants it checked,
writes everything to --json, and exits 0 when every invariant held, 1 when one failed, 2 when
the harness itself could not run (e.g. the server would not start).
Python 3 standard library only.
"""

import argparse
import asyncio
import json
import os
import platform
import resource
import sys
import tempfile
import time

import capacity
import common
import expected
import server as srvmod

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def token_range(text):
    lo, _, hi = text.partition(",")
    lo, hi = int(lo), int(hi or lo)
    if not 1 <= lo <= hi:
        raise argparse.ArgumentTypeError("want LO,HI with 1 <= LO <= HI")
    return lo, hi


def parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)

    def common_flags(sp, seconds, sets_help=""):
        sp.add_argument("--server-binary", default=os.path.join(REPO_ROOT, "build/apps/conveyor"),
                        help="the conveyor binary (default: build/apps/conveyor)")
        sp.add_argument("--seconds", type=float, default=seconds,
                        help=f"length of the mode's main phase (default {seconds:g})")
        sp.add_argument("--json", help="write the full results here")
        sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="extra server config overrides, passed as --set" + sets_help)
        sp.add_argument("--log", help="server log file (default: a file in the temp dir)")
        sp.add_argument("--seed", type=int, default=1, help="random seed of the workload")
        sp.add_argument("--tokens", type=token_range, default=(8, 60), metavar="LO,HI",
                        help="max_tokens of each request, uniform in [LO, HI] (at most 60: the "
                             "run.c reference is 60 tokens long; default 8,60)")

    def capacity_flags(sp):
        sp.add_argument("--capacity", type=float,
                        help="requests/s the server sustains; skips the closed-loop measurement")
        sp.add_argument("--capacity-clients", type=int, default=32,
                        help="concurrent streaming clients of the capacity run (default 32)")
        sp.add_argument("--capacity-seconds", type=float, default=10,
                        help="measured seconds of the capacity run (default 10)")
        sp.add_argument("--capacity-warmup", type=float, default=2,
                        help="seconds before the capacity run counts (default 2)")

    def watch_flags(sp):
        sp.add_argument("--health-period", type=float, default=0.2,
                        help="seconds between /health polls (default 0.2)")
        sp.add_argument("--max-health-ms", type=float, default=1000,
                        help="invariant: slowest /health answer (default 1000)")
        sp.add_argument("--health-addr", default="127.0.0.3",
                        help="source address of the /health poller (in the watcher "
                             "process), its own as a load balancer's would be (the load comes "
                             "from the default route, 127.0.0.1, or overload's --load-addrs; "
                             "the hostile attackers from 127.0.0.2), so that a per-address "
                             "connection limit reached by them does not refuse it; '' for the "
                             "default route (default 127.0.0.3)")

    c = sub.add_parser("capacity", help="only the closed-loop capacity measurement")
    common_flags(c, 10)
    capacity_flags(c)

    o = sub.add_parser("overload", help="Poisson arrivals at FACTOR x capacity")
    common_flags(o, 60)
    capacity_flags(o)
    watch_flags(o)
    o.add_argument("--factor", type=float, default=5, help="offered load / capacity (default 5)")
    o.add_argument("--max-queue", type=int, default=64,
                   help="sets batcher.max_queued_requests so the bound is reached quickly; "
                        "0 keeps the server's value (default 64)")
    o.add_argument("--no-stream", action="store_true", help="non-streamed requests")
    o.add_argument("--max-inflight", type=int, default=512,
                   help="the client's own cap on requests in flight, so that the load's "
                        "connections stay below the server's max_connections (1024): beyond it "
                        "the server refuses everyone with 503, /health too. An arrival beyond "
                        "the cap is skipped and counted (default 512)")
    o.add_argument("--drain-wait-s", type=float, default=120,
                   help="how long accepted requests may take to finish after the last arrival")
    o.add_argument("--max-reject-ms", type=float, default=500,
                   help="invariant: p99 of the watcher's probes' 429s, from connecting to the "
                        "answer's head (default 500)")
    o.add_argument("--load-addrs", default="127.0.1.1,127.0.1.2,127.0.1.3,127.0.1.4",
                   help="comma-separated source addresses of the load's connections, in turn "
                        "(loopback aliases; as from that many clients, so that the server's "
                        "per-address connection limit is not what refuses the excess); '' for "
                        "the default route (default 127.0.1.1,127.0.1.2,127.0.1.3,127.0.1.4)")
    o.add_argument("--probe-addrs", default="127.0.1.1,127.0.0.4",
                   help="source addresses of the watcher's refusal probes, one of the load's "
                        "(meeting the limits it meets) and one of their own "
                        "(default 127.0.1.1,127.0.0.4)")
    o.add_argument("--probe-period", type=float, default=0.1,
                   help="seconds between rounds of refusal probes (default 0.1)")
    o.add_argument("--max-rss-mib", type=float, default=1024,
                   help="invariant: the server's peak RSS, VmHWM (default 1024)")

    h = sub.add_parser("hostile", help="hostile clients while a good client measures latency")
    common_flags(h, 30)
    watch_flags(h)
    h.add_argument("--idle-timeout-s", type=int, default=10,
                   help="sets server.idle_timeout_s so idle hostile connections end within the "
                        "run; 0 keeps the server's value (default 10)")
    h.add_argument("--baseline-s", type=float, default=10,
                   help="seconds the good client measures before the attack (default 10)")
    h.add_argument("--after-s", type=float, default=5,
                   help="seconds the good client measures after the attack ended (default 5)")
    h.add_argument("--close-wait-s", type=float,
                   help="after the attack, how long hostile connections may stay open before "
                        "that counts as a leak (default: 2 x idle timeout + 10 s)")
    h.add_argument("--attacker-addrs", default="127.0.0.2",
                   help="comma-separated source addresses of the attackers (loopback aliases "
                        "127.0.0.0/8 work on Linux); the good client uses the default route "
                        "(default 127.0.0.2)")
    h.add_argument("--good-max-tokens", type=int, default=32,
                   help="max_tokens of the good client's requests (default 32)")
    h.add_argument("--good-keepalive", action="store_true",
                   help="the good client reuses one connection (default: a new one per request,"
                        " as a new user would)")
    h.add_argument("--idle", type=int, default=2000,
                   help="idle connections that never send a byte (default 2000; capped by the "
                        "harness's open-file limit)")
    h.add_argument("--trickle", type=int, default=50,
                   help="connections that send an endless header a byte at a time (default 50)")
    h.add_argument("--trickle-interval-ms", type=float, default=200,
                   help="pause between trickled bytes (default 200)")
    h.add_argument("--never-read", type=int, default=2,
                   help="connections that send a streaming request and never read (default 2)")
    h.add_argument("--never-read-prompts", type=int, default=8,
                   help="prompts in each never-read request (the prompt array), so that its "
                        "stream (about 190 bytes a token) outgrows the server's stream buffer "
                        "(default 8)")
    h.add_argument("--stream-buffer-bytes", type=int, default=65536,
                   help="sets server.max_stream_buffer_bytes where the server has that key, so "
                        "the never-read streams reach the bound; 0 keeps the server's value "
                        "(default 65536)")
    h.add_argument("--never-read-tokens", type=int, default=400,
                   help="max_tokens of each never-read prompt (default 400)")
    h.add_argument("--half-close", type=int, default=20,
                   help="connections that send a request, then shutdown(SHUT_WR) (default 20)")
    h.add_argument("--probe-rounds", type=int, default=3,
                   help="rounds of oversized-header, oversized-body and invalid-UTF-8 probes "
                        "(default 3)")
    h.add_argument("--max-p99-ratio", type=float, default=5.0,
                   help="invariant: good client's p99 under attack <= max(RATIO x baseline "
                        "p99, baseline p99 + --p99-slack-ms) (default 5)")
    h.add_argument("--p99-slack-ms", type=float, default=100,
                   help="see --max-p99-ratio (default 100)")
    h.add_argument("--fd-slack", type=int, default=4,
                   help="invariant: open fds after the attack <= before + SLACK (default 4)")
    h.add_argument("--rss-slack-mib", type=float, default=64,
                   help="invariant: RSS after the attack <= before + SLACK (default 64)")

    s = sub.add_parser("soak", help="Poisson load at a fraction of capacity with cancellations")
    common_flags(s, 1200)
    capacity_flags(s)
    watch_flags(s)
    s.add_argument("--load", type=float, default=0.7, help="offered load / capacity (default 0.7)")
    s.add_argument("--cancel-frac", type=float, default=0.10,
                   help="share of requests the client closes mid-stream (default 0.10)")
    s.add_argument("--disconnect-frac", type=float, default=0.05,
                   help="share of requests the client resets right after the 200 head "
                        "(default 0.05)")
    s.add_argument("--max-inflight", type=int, default=5000,
                   help="the client's own cap on requests in flight (default 5000)")
    s.add_argument("--drain-wait-s", type=float, default=120,
                   help="how long requests may take to finish after the last arrival")
    s.add_argument("--settle-s", type=float, default=30,
                   help="how long the outcome counters may take to add up (default 30)")
    s.add_argument("--max-rss-slope", type=float, default=2.0,
                   help="invariant: RSS slope over the second half, MiB/min (default 2)")
    s.add_argument("--fd-slack", type=int, default=4,
                   help="invariant: open fds at the end <= at the start + SLACK (default 4)")
    return p


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


def main(argv=None):
    args = parser().parse_args(argv)
    if args.tokens[1] > 60:
        print("--tokens: at most 60 (the run.c reference's length)", file=sys.stderr)
        return 2
    if not os.access(args.server_binary, os.X_OK):
        print(f"--server-binary {args.server_binary}: not an executable file "
              "(build it: cmake --build build --target conveyor)", file=sys.stderr)
        return 2
    fd_limit = raise_fd_limit()
    reference = expected.Reference(REPO_ROOT)

    sets = []
    if args.mode == "overload" and args.max_queue > 0:
        sets.append(f"batcher.max_queued_requests={args.max_queue}")
    if args.mode == "hostile" and args.idle_timeout_s > 0:
        sets.append(f"server.idle_timeout_s={args.idle_timeout_s}")
    if args.mode == "hostile" and args.stream_buffer_bytes > 0:
        keys = srvmod.effective_config(args.server_binary, REPO_ROOT, [])
        if "server.max_stream_buffer_bytes" in keys:
            sets.append(f"server.max_stream_buffer_bytes={args.stream_buffer_bytes}")
    sets += args.set
    log_path = args.log or os.path.join(tempfile.gettempdir(),
                                        f"conveyor-reliability-{args.mode}-{os.getpid()}.log")
    srv = srvmod.Server(args.server_binary, REPO_ROOT, sets, log_path)
    out = {"mode": args.mode, "argv": sys.argv, "args": {k: v for k, v in vars(args).items()},
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                       "python": platform.python_version(), "harness_fd_limit": fd_limit},
           "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    try:
        srv.start()
    except srvmod.ServerError as e:
        print(f"cannot start the server: {e}", file=sys.stderr)
        return 2
    out["server"] = {"command": srv.command(), "port": srv.port, "pid": srv.proc.pid,
                     "log": log_path, "fd_limit": srv.fd_limit()}
    print(f"server: pid {srv.proc.pid} on {srv.host}:{srv.port}, log {log_path}")
    print(f"        {' '.join(srv.command())}")
    inv = common.Invariants()
    try:
        asyncio.run(run_mode(args, srv, reference, inv, out))
    except KeyboardInterrupt:
        srv.kill()
        return 130
    finally:
        code = srv.stop()
        out["server"]["exit_code"] = code
        out["server"]["stop_seconds"] = srv.stop_seconds
    inv.check("the server exits 0 on SIGTERM", code == 0,
              f"exit code {code} after {srv.stop_seconds and round(srv.stop_seconds, 2)} s")
    out["invariants"] = inv.items
    out["passed"] = inv.passed()
    print("invariants:")
    print(inv.report())
    print("PASSED" if out["passed"] else "FAILED")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2, default=str)
        print(f"results: {args.json}")
    return 0 if out["passed"] else 1


async def run_mode(args, srv, reference, inv, out):
    sampler = common.Sampler(srv)
    if args.mode == "capacity":
        args.capacity_seconds = args.seconds
    if args.mode in ("capacity", "overload", "soak"):
        if getattr(args, "capacity", None) and args.mode != "capacity":
            cap_rps = args.capacity
            out["capacity"] = {"requests_per_s": cap_rps, "given": True}
            print(f"capacity: {cap_rps} req/s (given)")
        else:
            cap = await capacity.measure(srv.host, srv.port, reference, args.capacity_clients,
                                         args.capacity_seconds, args.capacity_warmup,
                                         args.tokens, args.seed)
            out["capacity"] = cap
            print(capacity.summary_line(cap))
            capacity.check(inv, cap)
            cap_rps = cap["requests_per_s"]
            if cap_rps <= 0:
                return
    if args.mode == "overload":
        import overload
        res = await overload.run(args, srv, reference, cap_rps, sampler, inv)
        out["overload"] = res
        print(overload.summary(res))
    elif args.mode == "hostile":
        import hostile
        res = await hostile.run(args, srv, reference, sampler, inv)
        out["hostile"] = res
        print(hostile.summary(res))
    elif args.mode == "soak":
        import soak
        res = await soak.run(args, srv, reference, cap_rps, sampler, inv)
        out["soak"] = res
        print(soak.summary(res))
    out["samples"] = sampler.samples


if __name__ == "__main__":
    sys.exit(main())
