"""Capacity: C closed-loop streaming clients; completed requests per second after a warm-up."""

import asyncio
import resource
import time

import common


async def measure(host, port, reference, clients, seconds, warmup, tokens, seed):
    """Returns a dict with `requests_per_s` (completions ending inside the measured window
    divided by its length) and the outcome counts."""
    rng = common.make_rng(seed)
    pool = common.Pool(host, port)
    outcomes = []
    t0 = time.monotonic()
    end = t0 + warmup + seconds
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)

    async def client():
        while time.monotonic() < end:
            n = rng.randint(*tokens)
            o = await common.completion(pool, reference, n, stream=True)
            outcomes.append((time.monotonic(), o))
            if o.kind == "transport_error":
                await asyncio.sleep(0.05)

    await asyncio.gather(*(client() for _ in range(clients)))
    pool.close()
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    window = [o for t, o in outcomes if t0 + warmup <= t < end]
    ok = [o for o in window if o.kind == "ok"]
    all_o = [o for _, o in outcomes]
    wall = time.monotonic() - t0
    return {
        "clients": clients, "seconds": seconds, "warmup_s": warmup,
        "max_tokens_range": list(tokens),
        "requests_per_s": round(len(ok) / seconds, 2),
        "tokens_per_s": round(sum(o.max_tokens for o in ok) / seconds, 1),
        "latency": common.latency_summary([o.latency for o in ok]),
        "ttfb": common.latency_summary([o.ttfb for o in ok]),
        "kinds": common.count_kinds(all_o),
        "wrong_text": common.first_details(all_o, ("wrong_text",)),
        "errors": common.first_details(all_o, ("transport_error", "stream_error", "http_error")),
        "client_cpu_share": round((cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime)
                                  / wall, 2),
    }


def check(inv, cap):
    bad = cap["kinds"].get("wrong_text", 0)
    inv.check("capacity: every text equals run.c's", bad == 0,
              f"{bad} wrong of {sum(cap['kinds'].values())}" +
              (f"; first: {cap['wrong_text'][0]}" if bad else ""))
    errs = sum(cap["kinds"].get(k, 0) for k in ("transport_error", "stream_error", "http_error",
                                                   "rejected"))
    inv.check("capacity: no errors in the closed loop", errs == 0,
              f"{errs} errors" + (f"; first: {cap['errors'][:2]}" if errs else ""))
    inv.check("capacity: measured", cap["requests_per_s"] > 0,
              f"{cap['requests_per_s']} requests/s")


def summary_line(cap):
    lat = cap["latency"]
    return (f"capacity: {cap['requests_per_s']} req/s ({cap['tokens_per_s']} tokens/s) with "
            f"{cap['clients']} streaming clients over {cap['seconds']} s; latency p50 "
            f"{common.fmt_ms(lat['p50_ms'])} ms p99 {common.fmt_ms(lat['p99_ms'])} ms; "
            f"client CPU {cap['client_cpu_share']} cores")
