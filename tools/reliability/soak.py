"""Soak: Poisson arrivals at a fraction of capacity for a long time, some requests cancelled
mid-stream or reset right after the head; RSS over time; at the end the server's outcome
counters must account for every request exactly once."""

import asyncio
import time

import common
import overload
import server as srvmod


async def run(args, srv, reference, capacity_rps, sampler, inv):
    rng = common.make_rng(args.seed + 2)
    pool = common.Pool(srv.host, srv.port)
    health = common.Watcher(srv.host, srv.port, sampler.t0, args.health_period,
                            args.health_addr or None)
    await health.start()
    stop = asyncio.Event()
    m_before = await srvmod.metrics(srv.host, srv.port)
    before = srv.sample()
    t_begin = sampler.now()
    watchers = [asyncio.create_task(sampler.run(stop))]
    outcomes = []
    planned = {"complete": 0, "cancel": 0, "disconnect": 0}
    lo, hi = args.tokens

    async def one():
        n = rng.randint(max(lo, 2), max(hi, 2))
        r = rng.random()
        if r < args.cancel_frac:
            planned["cancel"] += 1
            o = await common.completion(pool, reference, n, cancel_after_events=rng.randint(1, n - 1))
        elif r < args.cancel_frac + args.disconnect_frac:
            planned["disconnect"] += 1
            o = await common.completion(pool, reference, n, disconnect_after_head=True)
        else:
            planned["complete"] += 1
            o = await common.completion(pool, reference, n)
        outcomes.append(o)

    tasks, arrivals = await overload.poisson(capacity_rps * args.load, args.seconds, rng,
                                             lambda: asyncio.create_task(one()), args.max_inflight)
    t_arrivals_end = sampler.now()
    done, pending = await asyncio.wait(set(tasks), timeout=args.drain_wait_s) if tasks else ((), ())
    for t in pending:
        t.cancel()
    pool.close()

    kinds = common.count_kinds(outcomes)
    k = lambda name: kinds.get(name, 0)  # noqa: E731
    client = {
        # Requests that reached the pipeline: not those refused at the connection (an HTTP
        # error such as 503 too_many_connections) or lost on the way (transport errors).
        "sent": k("ok") + k("wrong_text") + k("rejected") + k("cancelled") + k("disconnected")
        + k("stream_error"),
        "completed": k("ok") + k("wrong_text"),
        "rejected": k("rejected"),
        "cancelled": k("cancelled"),
        "disconnected": k("disconnected"),
        "stream_error": k("stream_error"),
        "http_error": k("http_error"),
        "transport_error": k("transport_error"),
    }
    # The pipeline counts a request when it ends; a cancellation reaches it through the
    # actors. Wait (bounded) until the counters account for every request sent.
    deadline = time.monotonic() + args.settle_s
    while True:
        m_after = await srvmod.metrics(srv.host, srv.port)
        d = srvmod.delta(srvmod.outcomes(m_after), srvmod.outcomes(m_before))
        idle = (m_after.get("conveyor_http_running_completions", 0) == 0
                and m_after.get("conveyor_queue_depth", 0) == 0)
        if (sum(d.values()) >= client["sent"] and idle) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    t_settled = sampler.now()
    await asyncio.sleep(1.5)  # one more resource sample after everything ended
    stop.set()
    await asyncio.gather(*watchers)
    await health.stop()
    after = srv.sample()
    running_seqs = sum(v for key, v in m_after.items()
                       if key.startswith("conveyor_running_sequences"))

    res = {
        "load": args.load, "capacity_rps": capacity_rps, "arrivals": arrivals,
        "planned": planned, "client": client, "kinds": kinds, "server_outcomes_delta": d,
        "http_delta": {key: m_after[key] - m_before.get(key, 0) for key in m_after
                       if key.startswith("conveyor_http_") and "connections" not in key
                       and "running" not in key and m_after[key] != m_before.get(key, 0)},
        "idle_at_end": {"running_completions": m_after.get("conveyor_http_running_completions"),
                        "queue_depth": m_after.get("conveyor_queue_depth"),
                        "running_sequences": running_seqs},
        "completed_latency": common.latency_summary(
            [o.latency for o in outcomes if o.kind == "ok"]),
        "rss": common.rss_summary(sampler.between(t_begin, sampler.now() + 1)),
        "fds_before": before["fds"], "fds_after": after["fds"],
        "health": health.summary(),
        "settle_s": round(t_settled - t_arrivals_end, 2),
        "unfinished_after_drain_wait": len(pending),
        "wrong_text": common.first_details(outcomes, ("wrong_text",)),
        "errors": common.first_details(outcomes, ("transport_error", "stream_error",
                                                  "http_error")),
    }

    alive = srv.alive()
    inv.check("soak: the server stays up", alive,
              "alive" if alive else f"exited with {srv.proc.returncode}")
    inv.check("soak: every completed text equals run.c's", k("wrong_text") == 0,
              f"{k('wrong_text')} wrong of {client['completed']}" +
              (f"; first: {res['wrong_text'][0]}" if k("wrong_text") else ""))
    errs = client["stream_error"] + client["http_error"] + client["transport_error"]
    inv.check("soak: no errors (transport, HTTP other than 200/429, stream error events)",
              errs == 0, f"{errs}" + (f"; first: {res['errors'][:3]}" if errs else ""))
    total = sum(d.values())
    inv.check("soak: every request counted exactly once (sum of conveyor_requests_total)",
              total == client["sent"], f"server {total}, client sent {client['sent']}; "
              f"server {d}")
    inv.check("soak: 429s = outcome rejected", d["rejected"] == client["rejected"],
              f"server rejected {d['rejected']}, client saw {client['rejected']} 429s")
    ended_by_client = client["cancelled"] + client["disconnected"]
    inv.check("soak: finished + cancelled = completed + cancelled/reset by the client",
              d["finished"] + d["cancelled"] == client["completed"] + ended_by_client
              and d["finished"] >= client["completed"],
              f"server finished {d['finished']} + cancelled {d['cancelled']}; client completed "
              f"{client['completed']} + cancelled {client['cancelled']} + reset "
              f"{client['disconnected']} (a cancel that lost the race to the last token counts "
              "as finished)")
    inv.check("soak: nothing expired or failed", d["expired"] == 0 and d["failed"] == 0,
              f"expired {d['expired']}, failed {d['failed']}")
    inv.check("soak: nothing left running at the end",
              not res["idle_at_end"]["running_completions"] and not res["idle_at_end"]["queue_depth"]
              and not running_seqs and not pending, f"{res['idle_at_end']}, client tasks "
              f"unfinished {len(pending)}")
    slope = res["rss"].get("slope_second_half_mib_per_min")
    inv.check(f"soak: RSS flat (second-half slope <= {args.max_rss_slope:g} MiB/min)",
              slope is not None and slope <= args.max_rss_slope,
              f"slope {slope} MiB/min over the second half, {res['rss'].get('slope_mib_per_min')}"
              f" overall; first {res['rss'].get('first_mib')}, last {res['rss'].get('last_mib')},"
              f" max {res['rss'].get('max_mib')} MiB")
    inv.check(f"soak: open fds back to the start + {args.fd_slack}",
              after["fds"] is not None and before["fds"] is not None
              and after["fds"] <= before["fds"] + args.fd_slack,
              f"before {before['fds']}, after {after['fds']}, max {res['rss'].get('fds_max')}")
    hs = res["health"]
    inv.check("soak: /health answered 200 throughout", hs["failures"] == 0,
              f"{hs['failures']} failures of {hs['n']} polls" +
              (f"; first: {hs['first_failures'][:3]}" if hs["failures"] else ""))
    inv.check(f"soak: /health max latency <= {args.max_health_ms:g} ms",
              hs["max_ms"] is not None and hs["max_ms"] <= args.max_health_ms,
              f"max {common.fmt_ms(hs['max_ms'])} ms")
    return res


def summary(res):
    a, c, d, rss = res["arrivals"], res["client"], res["server_outcomes_delta"], res["rss"]
    lat = res["completed_latency"]
    return "\n".join([
        f"soak: {a['launched']} arrivals at {a['achieved_rate']}/s (target {a['target_rate']}/s "
        f"= {res['load']} x {res['capacity_rps']})",
        f"  client: {c}",
        f"  server outcomes (delta): {d}; http: {res['http_delta']}",
        f"  completed latency p50 {common.fmt_ms(lat['p50_ms'])} p99 {common.fmt_ms(lat['p99_ms'])}"
        f" ms; counters settled {res['settle_s']} s after the last arrival",
        f"  RSS MiB first {rss.get('first_mib')} last {rss.get('last_mib')} max {rss.get('max_mib')}"
        f" (VmHWM {rss.get('peak_hwm_mib')}); slope {rss.get('slope_mib_per_min')} MiB/min, "
        f"second half {rss.get('slope_second_half_mib_per_min')}; fds {res['fds_before']} -> "
        f"{res['fds_after']}",
        f"  /health {res['health']['n']} polls, {res['health']['failures']} failures, max "
        f"{res['health']['max_ms']} ms",
    ])
