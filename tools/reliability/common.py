"""What every mode shares: statistics, the resource sampler, the /health poller, the invariant
book and one completion request checked against the run.c reference."""

import asyncio
import json
import os
import random
import sys
import time

import httpc

# -- statistics ----------------------------------------------------------------------------------


def percentile(values, q):
    """The q-th percentile (0..100) by linear interpolation; None for no values."""
    if not values:
        return None
    v = sorted(values)
    if len(v) == 1:
        return v[0]
    pos = (len(v) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def latency_summary(seconds):
    """{n, p50_ms, p90_ms, p99_ms, max_ms} of a list of durations in seconds."""
    def ms(x):
        return None if x is None else round(x * 1000.0, 2)
    return {"n": len(seconds), "p50_ms": ms(percentile(seconds, 50)),
            "p90_ms": ms(percentile(seconds, 90)), "p99_ms": ms(percentile(seconds, 99)),
            "max_ms": ms(max(seconds) if seconds else None)}


def slope_per_minute(points):
    """Least-squares slope of [(t_seconds, y)] in y per minute; None for fewer than 2 points."""
    if len(points) < 2:
        return None
    n = len(points)
    mt = sum(t for t, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    if var == 0:
        return None
    cov = sum((t - mt) * (y - my) for t, y in points)
    return cov / var * 60.0


def fmt_ms(x):
    return "-" if x is None else f"{x:.1f}"


# -- invariants ----------------------------------------------------------------------------------


class Invariants:
    """Named checks with their detail; the run fails when any fails."""

    def __init__(self):
        self.items = []

    def check(self, name, ok, detail):
        self.items.append({"name": name, "ok": bool(ok), "detail": detail})
        return ok

    def passed(self):
        return all(i["ok"] for i in self.items)

    def report(self):
        lines = []
        for i in self.items:
            lines.append(f"  [{'ok' if i['ok'] else 'FAIL'}] {i['name']}: {i['detail']}")
        return "\n".join(lines)


# -- watching the server -------------------------------------------------------------------------


class Sampler:
    """Samples the server's RSS, peak RSS and open fds every `period` seconds."""

    def __init__(self, server, period=1.0):
        self.server = server
        self.period = period
        self.samples = []
        self.t0 = time.monotonic()

    async def run(self, stop):
        while not stop.is_set():
            s = self.server.sample()
            s["t"] -= self.t0
            self.samples.append(s)
            try:
                await asyncio.wait_for(stop.wait(), self.period)
            except asyncio.TimeoutError:
                pass

    def between(self, t_from, t_to):
        """Samples with t_from <= t < t_to (seconds since the sampler began)."""
        return [s for s in self.samples if t_from <= s["t"] < t_to and s["rss_kib"] is not None]

    def now(self):
        return time.monotonic() - self.t0


def rss_summary(samples):
    """first/last/max RSS in MiB and slopes (whole run and second half) in MiB/min."""
    pts = [(s["t"], s["rss_kib"] / 1024.0) for s in samples if s["rss_kib"] is not None]
    if not pts:
        return {}
    half = pts[len(pts) // 2:]
    fds = [s["fds"] for s in samples if s["fds"] is not None]
    hwm = [s["hwm_kib"] for s in samples if s["hwm_kib"] is not None]
    return {"samples": len(pts), "first_mib": round(pts[0][1], 1), "last_mib": round(pts[-1][1], 1),
            "max_mib": round(max(y for _, y in pts), 1),
            "peak_hwm_mib": round(max(hwm) / 1024.0, 1) if hwm else None,
            "slope_mib_per_min": _round(slope_per_minute(pts), 3),
            "slope_second_half_mib_per_min": _round(slope_per_minute(half), 3),
            "fds_first": fds[0] if fds else None, "fds_last": fds[-1] if fds else None,
            "fds_max": max(fds) if fds else None}


def _round(x, n):
    return None if x is None else round(x, n)


class HealthPoller:
    """GET /health every `period` seconds on a fresh connection (as a load balancer would), from
    the source address `local_addr` (None: the default route's). A load balancer is a client of
    its own: from the load's address, the server's per-address connection limit would refuse it
    once the load holds that many connections."""

    def __init__(self, host, port, period=0.2, timeout=5.0, t0=None, local_addr=None):
        self.host, self.port, self.period, self.timeout = host, port, period, timeout
        self.local_addr = local_addr
        self.latencies = []
        self.failures = []  # (t since t0, what)
        self.t0 = time.monotonic() if t0 is None else t0

    async def run(self, stop):
        while not stop.is_set():
            start = time.monotonic()
            try:
                status, _, secs = await asyncio.wait_for(
                    httpc.get(self.host, self.port, "/health", self.timeout,
                              local_addr=self.local_addr), self.timeout)
                self.latencies.append(secs)
                if status != 200:
                    self.failures.append((round(start - self.t0, 3), f"status {status}"))
            except (OSError, httpc.HttpError, asyncio.TimeoutError) as e:
                self.latencies.append(time.monotonic() - start)
                self.failures.append((round(start - self.t0, 3), f"{type(e).__name__}: {e}"))
            rest = self.period - (time.monotonic() - start)
            if rest > 0:
                try:
                    await asyncio.wait_for(stop.wait(), rest)
                except asyncio.TimeoutError:
                    pass

    def summary(self):
        s = latency_summary(self.latencies)
        s["failures"] = len(self.failures)
        s["first_failures"] = self.failures[:10]
        return s


class Watcher:
    """The /health poller (and, with `probe_period`, refusal probes) in a process of their own
    (watcher.py), so that a busy load generator's event loop does not delay what they time.
    `start()`, then `await stop()`; `summary()` is HealthPoller's, `probes` the probe records."""

    def __init__(self, host, port, t0, health_period=0.2, health_addr=None, probe_period=0,
                 probe_addrs=(), probe_max_tokens=8):
        self.plan = {"host": host, "port": port, "t0": t0, "health_period": health_period,
                     "health_addr": health_addr, "probe_period": probe_period,
                     "probe_addrs": list(probe_addrs), "probe_max_tokens": probe_max_tokens}
        self.proc = None
        self.latencies, self.failures, self.probes = [], [], []
        self.error = None

    async def start(self):
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                         "watcher.py"),
            json.dumps(self.plan), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, limit=1 << 26)

    async def stop(self):
        self.proc.stdin.close()
        out, _ = await self.proc.communicate()
        try:
            res = json.loads(out.decode().strip().splitlines()[-1])
            self.latencies = res["health"]["latencies"]
            self.failures = [tuple(f) for f in res["health"]["failures"]]
            self.probes = res["probes"]
        except (ValueError, KeyError, IndexError) as e:
            self.error = f"the watcher exited {self.proc.returncode} without a result ({e})"
            self.failures = [(None, self.error)]

    def summary(self):
        s = latency_summary(self.latencies)
        s["failures"] = len(self.failures)
        s["first_failures"] = self.failures[:10]
        return s

    def probe_summary(self):
        """Per probe address: the probes' statuses and codes, and the time from connect to head
        of the 429s (how long the server takes to refuse) and of all."""
        out = {}
        for addr in self.plan["probe_addrs"]:
            ps = [p for p in self.probes if p["addr"] == addr]
            refused = [p for p in ps if p["status"] == 429]
            answers = {}
            for p in ps:
                key = str(p["status"]) + (f" {p['code']}" if p["code"] else "") \
                    if p["status"] is not None else "error"
                answers[key] = answers.get(key, 0) + 1
            out[addr] = {
                "n": len(ps), "answers": answers,
                "errors": [p["error"] for p in ps if p["error"]][:3],
                "connect": latency_summary([p["connect_ms"] / 1000 for p in ps
                                            if p["connect_ms"] is not None]),
                "head_429": latency_summary([p["head_ms"] / 1000 for p in refused]),
                "total_429": latency_summary([(p["connect_ms"] + p["head_ms"]) / 1000
                                              for p in refused]),
            }
        return out


# -- one completion ------------------------------------------------------------------------------


class Pool:
    """Keep-alive connections to reuse; one idle longer than `max_idle` is closed, not reused,
    so that a request never meets a connection the server's idle timeout just closed. New
    connections come from the source addresses `local_addrs` in turn (None: the default
    route's), as from that many clients."""

    def __init__(self, host, port, max_idle=5.0, local_addrs=None):
        self.host, self.port, self.max_idle = host, port, max_idle
        self.local_addrs = list(local_addrs or [None])
        self.idle = []
        self.opened = 0

    async def take(self):
        now = time.monotonic()
        while self.idle:
            conn = self.idle.pop()
            if now - conn.last_used < self.max_idle:
                return conn
            conn.close()
        addr = self.local_addrs[self.opened % len(self.local_addrs)]
        self.opened += 1
        return await httpc.connect(self.host, self.port, local_addr=addr)

    def give_back(self, conn):
        conn.last_used = time.monotonic()
        self.idle.append(conn)

    def close(self):
        for c in self.idle:
            c.close()
        self.idle.clear()


class Outcome:
    """What one completion request came to, as the client saw it."""

    # kind: "ok" (full text, correct), "wrong_text", "rejected" (429), "http_error" (another
    # status), "cancelled" (we closed mid-stream), "disconnected" (we reset after the head),
    # "transport_error" (connection failed or broke), "stream_error" (an error event)
    # code: the error's `code` of a 429 (too_many_connections_per_address: refused at the
    # door; rejected_queue_full: by the pipeline). connect_s: seconds spent opening a new
    # connection (0 for a reused one), part of latency and ttfb.
    __slots__ = ("kind", "status", "latency", "ttfb", "retry_after", "detail", "max_tokens",
                 "t_start", "code", "connect_s")

    def __init__(self, kind, status=None, latency=None, ttfb=None, retry_after=None,
                 detail=None, max_tokens=None, t_start=None, code=None, connect_s=None):
        self.kind, self.status, self.latency, self.ttfb = kind, status, latency, ttfb
        self.retry_after, self.detail, self.max_tokens = retry_after, detail, max_tokens
        self.t_start, self.code, self.connect_s = t_start, code, connect_s


def completion_body(max_tokens, stream, prompt="Once upon a time"):
    return json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "stream": stream}).encode()


async def completion(pool, reference, max_tokens, stream=True, cancel_after_events=None,
                     disconnect_after_head=False, timeout=300.0):
    """One greedy completion of "Once upon a time", checked against run.c's text.

    `cancel_after_events`: close the connection after that many stream events (a user who
    stops reading). `disconnect_after_head`: reset the connection once the 200 head arrived.
    """
    start = time.monotonic()
    try:
        conn = await pool.take()
    except (OSError, asyncio.TimeoutError) as e:
        return Outcome("transport_error", detail=f"connect: {e}", max_tokens=max_tokens,
                       t_start=start)
    connect_s = 0.0 if conn.requests > 0 else time.monotonic() - start
    conn.requests += 1
    reuse = False
    try:
        conn.writer.write(httpc.request_bytes("POST", "/v1/completions", pool.host,
                                              completion_body(max_tokens, stream)))
        head = await asyncio.wait_for(httpc.read_head(conn.reader), timeout)
        ttfb = time.monotonic() - start
        if head.status == 429:
            body = await asyncio.wait_for(httpc.read_body(conn.reader, head), timeout)
            reuse = head.keep_alive()
            try:
                code = json.loads(body)["error"]["code"]
            except (ValueError, KeyError, TypeError):
                code = None
            return Outcome("rejected", 429, ttfb, ttfb, head.headers.get("retry-after"),
                           max_tokens=max_tokens, t_start=start, code=code, connect_s=connect_s)
        if head.status != 200:
            body = await asyncio.wait_for(httpc.read_body(conn.reader, head), timeout)
            reuse = head.keep_alive()
            return Outcome("http_error", head.status, time.monotonic() - start, ttfb,
                           detail=body[:300].decode("utf-8", "replace"), max_tokens=max_tokens,
                           t_start=start)
        if disconnect_after_head:
            conn.abort()
            return Outcome("disconnected", 200, time.monotonic() - start, ttfb,
                           max_tokens=max_tokens, t_start=start)
        if stream and cancel_after_events is not None:
            seen = [0]

            def on_chunk(chunk):
                seen[0] += chunk.count(b"data: ")
                return seen[0] < cancel_after_events
            body = await asyncio.wait_for(httpc.read_body(conn.reader, head, on_chunk), timeout)
            if body is None:
                conn.close()
                return Outcome("cancelled", 200, time.monotonic() - start, ttfb,
                               max_tokens=max_tokens, t_start=start)
        else:
            body = await asyncio.wait_for(httpc.read_body(conn.reader, head), timeout)
        latency = time.monotonic() - start
        if stream:
            text, finish, error, done = httpc.parse_sse(body)
            if error is not None or not done:
                return Outcome("stream_error", 200, latency, ttfb,
                               detail=json.dumps(error) if error else "no [DONE]",
                               max_tokens=max_tokens, t_start=start)
        else:
            text = json.loads(body)["choices"][0]["text"]
        reuse = head.keep_alive()
        expected = reference.text(max_tokens)
        if text != expected:
            return Outcome("wrong_text", 200, latency, ttfb,
                           detail=f"max_tokens {max_tokens}: got {text!r}, expected {expected!r}",
                           max_tokens=max_tokens, t_start=start)
        return Outcome("ok", 200, latency, ttfb, max_tokens=max_tokens, t_start=start)
    except (OSError, httpc.HttpError, asyncio.TimeoutError, ValueError) as e:
        return Outcome("transport_error", detail=f"{type(e).__name__}: {e}",
                       latency=time.monotonic() - start, max_tokens=max_tokens, t_start=start)
    finally:
        if reuse:
            pool.give_back(conn)
        elif not conn.writer.is_closing():
            conn.close()


def random_max_tokens(rng, lo, hi):
    return rng.randint(lo, hi)


def count_kinds(outcomes):
    counts = {}
    for o in outcomes:
        counts[o.kind] = counts.get(o.kind, 0) + 1
    return counts


def count_statuses(outcomes):
    counts = {}
    for o in outcomes:
        key = str(o.status) if o.status is not None else "none"
        counts[key] = counts.get(key, 0) + 1
    return counts


def first_details(outcomes, kinds, n=5):
    return [o.detail for o in outcomes if o.kind in kinds][:n]


def addr_list(text):
    """Source addresses from a comma-separated flag; [] for none ("" or None)."""
    return [a.strip() for a in (text or "").split(",") if a.strip()]


def make_rng(seed):
    return random.Random(seed)
