"""Overload: open-loop Poisson arrivals at a multiple of the measured capacity."""

import asyncio
import time

import common
import server as srvmod


async def poisson(rate, seconds, rng, launch, max_inflight):
    """Calls `launch()` (which returns a task) at Poisson times for `seconds`; returns the
    arrival bookkeeping (how many, how late the client fell behind its schedule)."""
    tasks = set()
    t0 = time.monotonic()
    next_t = t0
    launched = skipped = 0
    max_lag = 0.0
    lags = []
    while True:
        next_t += rng.expovariate(rate)
        if next_t - t0 >= seconds:
            break
        delay = next_t - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        lag = time.monotonic() - next_t
        max_lag = max(max_lag, lag)
        lags.append(lag)
        if len(tasks) >= max_inflight:
            skipped += 1
            continue
        task = launch()
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        launched += 1
    elapsed = time.monotonic() - t0
    return tasks, {"target_rate": round(rate, 2), "launched": launched,
                   "skipped_inflight_cap": skipped,
                   "achieved_rate": round(launched / max(elapsed, 1e-9), 2),
                   "schedule_lag_p99_ms": round((common.percentile(lags, 99) or 0) * 1000, 1),
                   "schedule_lag_max_ms": round(max_lag * 1000, 1)}


async def run(args, srv, reference, capacity_rps, sampler, inv):
    rng = common.make_rng(args.seed + 1)
    pool = common.Pool(srv.host, srv.port, local_addrs=common.addr_list(args.load_addrs))
    health = common.Watcher(srv.host, srv.port, sampler.t0, args.health_period,
                            args.health_addr or None, args.probe_period,
                            common.addr_list(args.probe_addrs))
    await health.start()
    stop = asyncio.Event()
    watchers = [asyncio.create_task(sampler.run(stop))]
    outcomes = []
    rate = capacity_rps * args.factor
    t_begin = sampler.now()
    before = srv.sample()
    tcp_before = srvmod.tcp_counters()

    async def one():
        n = rng.randint(*args.tokens)
        outcomes.append(await common.completion(pool, reference, n, stream=not args.no_stream))

    def launch():
        return asyncio.create_task(one())

    tasks, arrivals = await poisson(rate, args.seconds, rng, launch, args.max_inflight)
    t_arrivals_end = sampler.now()
    done, pending = await asyncio.wait(tasks, timeout=args.drain_wait_s) if tasks else ((), ())
    for t in pending:
        t.cancel()
    t_end = sampler.now()
    stop.set()
    await asyncio.gather(*watchers)
    await health.stop()
    pool.close()
    tcp_after = srvmod.tcp_counters()

    accepted = [o for o in outcomes if o.status == 200]
    rejected = [o for o in outcomes if o.kind == "rejected"]
    res = {
        "factor": args.factor, "capacity_rps": capacity_rps, "arrivals": arrivals,
        "unfinished_after_drain_wait": len(pending),
        "statuses": common.count_statuses(outcomes), "kinds": common.count_kinds(outcomes),
        "accepted_latency": common.latency_summary([o.latency for o in accepted]),
        "accepted_ttfb": common.latency_summary([o.ttfb for o in accepted]),
        "rejected_latency": common.latency_summary([o.latency for o in rejected]),
        # Where a 429's time went: opening its connection (new ones only; a SYN the kernel
        # dropped costs a 1 s retransmission), and from a connection to the answer's head (the
        # server, and this client's event loop picking the answer up).
        "rejected_by_code": {c: common.latency_summary([o.latency for o in rejected
                                                        if o.code == c])
                             for c in sorted({str(o.code) for o in rejected})},
        "rejected_connect": common.latency_summary([o.connect_s for o in rejected
                                                    if o.connect_s]),
        "rejected_after_connect": common.latency_summary([o.latency - (o.connect_s or 0)
                                                          for o in rejected]),
        "tcp_counters_delta": {k: tcp_after[k] - tcp_before.get(k, 0) for k in tcp_after},
        "rejected_without_retry_after": sum(1 for o in rejected if not o.retry_after),
        "retry_after_values": sorted({o.retry_after for o in rejected if o.retry_after}),
        "accepted_per_s": round(len(accepted) / max(t_end - t_begin, 1e-9), 2),
        "health": health.summary(),
        "probes": health.probe_summary(),
        "rss_before_mib": round((before["rss_kib"] or 0) / 1024, 1),
        "rss": common.rss_summary(sampler.between(t_begin, t_end + 1)),
        "peak_hwm_mib": round((srv.status_kib("VmHWM") or 0) / 1024, 1),
        "drain_s": round(t_end - t_arrivals_end, 2),
        "wrong_text": common.first_details(outcomes, ("wrong_text",)),
        "errors": common.first_details(outcomes, ("transport_error", "stream_error",
                                                  "http_error")),
        "pool_connections_opened": pool.opened,
    }

    alive = srv.alive()
    inv.check("overload: the server stays up", alive,
              "alive" if alive else f"exited with {srv.proc.returncode}")
    wrong = res["kinds"].get("wrong_text", 0)
    inv.check("overload: every accepted text equals run.c's", wrong == 0,
              f"{wrong} wrong of {len(accepted)} accepted" +
              (f"; first: {res['wrong_text'][0]}" if wrong else ""))
    inv.check("overload: the excess was rejected (429 seen)", len(rejected) > 0,
              f"{len(rejected)} rejected of {len(outcomes)} "
              "(none means the load never exceeded the queue bound)")
    inv.check("overload: every 429 has Retry-After", res["rejected_without_retry_after"] == 0,
              f"{res['rejected_without_retry_after']} without; values {res['retry_after_values']}")
    # How long the server takes to refuse, timed by the watcher's probes (the load's own
    # latencies include its event loop's lag, reported beside them).
    probe_429 = [v["total_429"] for v in res["probes"].values() if v["total_429"]["n"]]
    p99 = max((v["p99_ms"] for v in probe_429), default=None)
    inv.check(f"overload: 429 at once (probes' p99 <= {args.max_reject_ms} ms)",
              p99 is not None and p99 <= args.max_reject_ms,
              f"probes' 429s, connect to head: " + "; ".join(
                  f"{a} n {v['total_429']['n']} p99 {common.fmt_ms(v['total_429']['p99_ms'])} "
                  f"max {common.fmt_ms(v['total_429']['max_ms'])} ms"
                  for a, v in res["probes"].items()) +
              ("" if probe_429 else " (no probe was refused: the run cannot tell)") +
              f"; the load saw p99 {common.fmt_ms(res['rejected_latency']['p99_ms'])} ms with "
              f"its schedule lag p99 {arrivals['schedule_lag_p99_ms']} ms")
    others = {k: v for k, v in res["statuses"].items() if k not in ("200", "429")}
    inv.check("overload: only 200 and 429", not others,
              f"others: {others}" + (f"; first errors: {res['errors'][:3]}" if others else ""))
    sterr = res["kinds"].get("stream_error", 0)
    inv.check("overload: accepted streams end with [DONE]", sterr == 0, f"{sterr} broken streams")
    hs = res["health"]
    inv.check("overload: /health answered 200 throughout", hs["failures"] == 0,
              f"{hs['failures']} failures of {hs['n']} polls" +
              (f"; first: {hs['first_failures'][:3]}" if hs["failures"] else ""))
    inv.check(f"overload: /health max latency <= {args.max_health_ms} ms",
              hs["max_ms"] is not None and hs["max_ms"] <= args.max_health_ms,
              f"max {common.fmt_ms(hs['max_ms'])} ms, p99 {common.fmt_ms(hs['p99_ms'])} ms")
    inv.check(f"overload: peak RSS <= {args.max_rss_mib} MiB",
              res["peak_hwm_mib"] <= args.max_rss_mib or not alive,
              f"VmHWM {res['peak_hwm_mib']} MiB (before {res['rss_before_mib']} MiB)")
    inv.check("overload: every request ended", len(pending) == 0,
              f"{len(pending)} still running {args.drain_wait_s} s after the last arrival")
    return res


def summary(res):
    a = res["arrivals"]
    acc, rej, hs = res["accepted_latency"], res["rejected_latency"], res["health"]
    rss = res["rss"]
    return "\n".join([
        f"overload: {a['launched']} arrivals at {a['achieved_rate']}/s (target {a['target_rate']}/s "
        f"= {res['factor']} x {res['capacity_rps']}; schedule lag p99 {a['schedule_lag_p99_ms']} ms; "
        f"{a['skipped_inflight_cap']} skipped at the in-flight cap)",
        f"  statuses {res['statuses']}; accepted {res['accepted_per_s']}/s",
        f"  accepted latency p50 {common.fmt_ms(acc['p50_ms'])} p99 {common.fmt_ms(acc['p99_ms'])} "
        f"max {common.fmt_ms(acc['max_ms'])} ms; 429 latency p50 {common.fmt_ms(rej['p50_ms'])} "
        f"p99 {common.fmt_ms(rej['p99_ms'])} max {common.fmt_ms(rej['max_ms'])} ms "
        f"(Retry-After {res['retry_after_values']})",
        f"  429s by code: " + "; ".join(
            f"{c} n {v['n']} p99 {common.fmt_ms(v['p99_ms'])} ms"
            for c, v in res["rejected_by_code"].items()) +
        f"; new connections {res['rejected_connect']['n']}, connect p99 "
        f"{common.fmt_ms(res['rejected_connect']['p99_ms'])} max "
        f"{common.fmt_ms(res['rejected_connect']['max_ms'])} ms; connection to head p99 "
        f"{common.fmt_ms(res['rejected_after_connect']['p99_ms'])} ms",
        f"  kernel TCP counters (whole machine) {res['tcp_counters_delta']}",
        "  probes (own process): " + "; ".join(
            f"{a}: {v['answers']}, 429 connect to head p50 "
            f"{common.fmt_ms(v['total_429']['p50_ms'])} p99 "
            f"{common.fmt_ms(v['total_429']['p99_ms'])} max "
            f"{common.fmt_ms(v['total_429']['max_ms'])} ms"
            for a, v in res["probes"].items()),
        f"  /health {hs['n']} polls, {hs['failures']} failures, p99 {common.fmt_ms(hs['p99_ms'])} "
        f"max {common.fmt_ms(hs['max_ms'])} ms",
        f"  RSS before {res['rss_before_mib']} MiB, max sampled {rss.get('max_mib')} MiB, "
        f"peak VmHWM {res['peak_hwm_mib']} MiB, last {rss.get('last_mib')} MiB; "
        f"fds max {rss.get('fds_max')}",
    ])
