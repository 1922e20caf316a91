"""Hostile clients: a good client measures its latency before, during and after an attack run
by attacker.py in another process; the server's RSS and open fds are sampled throughout."""

import asyncio
import json
import os
import sys

import common
import server as srvmod

KINDS = ("idle", "trickle", "never_read", "half_close")


async def good_client(srv, reference, args, log, stop):
    """Sequential greedy requests, each checked against run.c's text; appends (t, Outcome)."""
    pool = common.Pool(srv.host, srv.port)
    while not stop.is_set():
        o = await common.completion(pool, reference, args.good_max_tokens, stream=True,
                                    timeout=60)
        log.append(o)
        if not args.good_keepalive:
            pool.close()
        await asyncio.sleep(0.05)
    pool.close()


def phase_summary(outcomes):
    ok = [o for o in outcomes if o.kind == "ok"]
    s = common.latency_summary([o.latency for o in ok])
    s["kinds"] = common.count_kinds(outcomes)
    s["statuses"] = common.count_statuses(outcomes)
    s["errors"] = common.first_details(outcomes, ("transport_error", "stream_error",
                                                  "http_error", "wrong_text", "rejected"), 3)
    return s


def kind_summary(records, kind):
    rs = [r for r in records if r["kind"] == kind]
    hows = {}
    statuses = {}
    for r in rs:
        hows[r["how"]] = hows.get(r["how"], 0) + 1
        if r["status"] is not None:
            statuses[str(r["status"])] = statuses.get(str(r["status"]), 0) + 1
    lifetimes = [r["t_end"] - r["t_open"] for r in rs
                 if r["t_end"] is not None and r["how"] not in ("still_open", "connect_failed")]
    return {"connections": len(rs), "slots": len({r["slot"] for r in rs}), "how": hows,
            "statuses": statuses,
            "lifetime_s": {"p50": _round(common.percentile(lifetimes, 50)),
                           "p99": _round(common.percentile(lifetimes, 99)),
                           "max": _round(max(lifetimes) if lifetimes else None)},
            "examples": [r["detail"] for r in rs if r["detail"]][:3]}


async def run(args, srv, reference, sampler, inv):
    cfg = srvmod.effective_config(srv.binary, srv.repo_root, srv.sets)
    idle_timeout = cfg.get("server.idle_timeout_s", 60)
    close_wait = args.close_wait_s if args.close_wait_s is not None else 2 * idle_timeout + 10
    fd_room = 0
    try:
        import resource
        fd_room = resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 300
    except (ImportError, ValueError):
        pass
    n_idle = max(0, min(args.idle, fd_room - args.trickle - args.never_read - args.half_close))
    plan = {"host": srv.host, "port": srv.port,
            "addrs": [a.strip() for a in args.attacker_addrs.split(",") if a.strip()],
            "seconds": args.seconds, "close_wait_s": close_wait, "idle": n_idle,
            "trickle": args.trickle, "trickle_interval_s": args.trickle_interval_ms / 1000.0,
            "never_read": args.never_read, "never_read_prompts": args.never_read_prompts,
            "never_read_tokens": args.never_read_tokens, "half_close": args.half_close,
            "probe_rounds": args.probe_rounds,
            "max_header_bytes": cfg.get("server.max_header_bytes", 16384),
            "max_body_bytes": cfg.get("server.max_body_bytes", 1048576)}

    stop = asyncio.Event()
    stop_good = asyncio.Event()
    health = common.Watcher(srv.host, srv.port, sampler.t0, args.health_period,
                            args.health_addr or None)
    await health.start()
    good = []
    watchers = [asyncio.create_task(sampler.run(stop))]
    good_task = asyncio.create_task(good_client(srv, reference, args, good, stop_good))

    phases = {"baseline_start": sampler.now()}
    await asyncio.sleep(args.baseline_s)
    m_before = await srvmod.metrics(srv.host, srv.port)
    before = srv.sample()
    phases["attack_start"] = sampler.now()
    attacker = await asyncio.create_subprocess_exec(
        sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "attacker.py"),
        json.dumps(plan), stdout=asyncio.subprocess.PIPE, limit=1 << 26)
    result = None
    while True:
        line = await attacker.stdout.readline()
        if not line:
            break
        ev = json.loads(line)
        if ev["event"] == "result":
            result = ev
        else:
            phases[ev["event"]] = sampler.now()
    await attacker.wait()
    closed_at = sampler.now()
    await asyncio.sleep(args.after_s)
    phases["end"] = sampler.now()
    stop_good.set()
    await good_task
    after = srv.sample()
    m_after = await srvmod.metrics(srv.host, srv.port)
    stop.set()
    await asyncio.gather(*watchers)
    await health.stop()

    # A good request belongs to the phase it started in (one that started during the attack
    # and ended after it still counts as slowed by it).
    t_attack = phases.get("attack_started", phases["attack_start"])
    t_window_end = phases.get("attack_ended", closed_at)

    def started(o):
        return o.t_start - sampler.t0
    phase_outcomes = {
        "baseline": [o for o in good if started(o) < t_attack],
        "attack": [o for o in good if t_attack <= started(o) < t_window_end],
        "closing": [o for o in good if t_window_end <= started(o) < closed_at],
        "after": [o for o in good if started(o) >= closed_at]}
    records = result["records"] if result else []
    during = sampler.between(phases["attack_start"], closed_at)
    res = {
        "server_limits": {k: v for k, v in cfg.items() if k.startswith("server.")},
        "plan": {k: v for k, v in plan.items() if k not in ("host", "port")},
        "phases_s": {k: round(v, 2) for k, v in phases.items()},
        "good_client": {k: phase_summary(v) for k, v in phase_outcomes.items()},
        "hostile": {k: kind_summary(records, k) for k in KINDS},
        "probes": result["probes"] if result else [],
        "attacker_gave_up": result["gave_up"] if result else None,
        "resources": {
            "before": {"rss_mib": _mib(before["rss_kib"]), "fds": before["fds"]},
            "during_max": {"rss_mib": _mib(max((s["rss_kib"] for s in during), default=None)),
                           "fds": max((s["fds"] for s in during if s["fds"]), default=None)},
            "after": {"rss_mib": _mib(after["rss_kib"]), "fds": after["fds"]},
            "peak_hwm_mib": _mib(after["hwm_kib"]),
        },
        "metrics_delta": {k: m_after[k] - m_before.get(k, 0) for k in m_after
                          if k.startswith("conveyor_http_") and "connections" not in k
                          and m_after[k] != m_before.get(k, 0)},
        "open_connections_after": m_after.get("conveyor_http_connections"),
        "health": health.summary(),
        "log_lines": {"refusing_connection": srv.count_log("refusing a connection"),
                      "slow_client": srv.count_log("reads too slowly|stopped reading"),
                      "warn_or_error": srv.count_log(r"\[(warning|error|critical)\]")},
    }

    alive = srv.alive()
    inv.check("hostile: the server stays up", alive,
              "alive" if alive else f"exited with {srv.proc.returncode}")
    inv.check("hostile: the attacker ran to the end", result is not None,
              "result received" if result else f"attacker exited {attacker.returncode}")
    leaks = {k: v["how"].get("still_open", 0) for k, v in res["hostile"].items()}
    inv.check(f"hostile: every hostile connection closed or refused within {close_wait:g} s "
              "after the attack", sum(leaks.values()) == 0, f"still open: {leaks}")
    # A probe refused at the door (a connection limit: 503 too_many_connections, or 429
    # too_many_connections_per_address where the server limits each address) never reached
    # the check it probes; such refusals of others show in the good client's and /health's
    # results. Every probe kind must get its expected status at least once, and nothing else
    # but such a refusal.
    def at_door(p):
        return p["status"] in (429, 503) and (
            p.get("code") is None or str(p.get("code")).startswith("too_many_connections"))
    bad_probes = [p for p in res["probes"] if not p["ok"] and not at_door(p)]
    refused = [p for p in res["probes"] if not p["ok"] and at_door(p)]
    names = {p["name"] for p in res["probes"]}
    unseen = sorted(n for n in names if not any(p["ok"] and p["name"] == n
                                                 for p in res["probes"]))
    inv.check("hostile: oversized header 431, oversized body 413, invalid UTF-8 400",
              not bad_probes and not unseen and (res["probes"] or args.probe_rounds == 0),
              f"{sum(1 for p in res['probes'] if p['ok'])} of {len(res['probes'])} as expected, "
              f"{len(refused)} refused at the door (a connection limit)" +
              (f"; never as expected: {unseen}" if unseen else "") +
              (f"; unexpected: {[(p['name'], p['status'], p['error']) for p in bad_probes[:4]]}"
               if bad_probes else ""))
    base, att = res["good_client"]["baseline"], res["good_client"]["attack"]
    if base["p99_ms"] is not None and att["p99_ms"] is not None:
        limit = max(args.max_p99_ratio * base["p99_ms"], base["p99_ms"] + args.p99_slack_ms)
        inv.check("hostile: the good client is not slowed (p99 under attack <= "
                  f"max({args.max_p99_ratio:g} x baseline, baseline + {args.p99_slack_ms:g} ms))",
                  att["p99_ms"] <= limit, f"baseline p99 {base['p99_ms']} ms, under attack "
                  f"{att['p99_ms']} ms (limit {round(limit, 1)} ms)")
    else:
        inv.check("hostile: the good client is not slowed", False,
                  f"no successful good request in baseline ({base['n']}) or attack ({att['n']})")
    good_errors = {ph: sum(v for k, v in s["kinds"].items() if k != "ok")
                   for ph, s in res["good_client"].items()}
    inv.check("hostile: the good client got no errors", sum(good_errors.values()) == 0,
              f"errors by phase {good_errors}" +
              (f"; e.g. {att['errors'][:2] or res['good_client']['closing']['errors'][:2]}"
               if sum(good_errors.values()) else ""))
    r = res["resources"]
    inv.check(f"hostile: open fds back to before + {args.fd_slack}",
              r["after"]["fds"] is not None and r["before"]["fds"] is not None
              and r["after"]["fds"] <= r["before"]["fds"] + args.fd_slack,
              f"before {r['before']['fds']}, max during {r['during_max']['fds']}, "
              f"after {r['after']['fds']}")
    inv.check(f"hostile: RSS back to before + {args.rss_slack_mib:g} MiB",
              r["after"]["rss_mib"] is not None and r["before"]["rss_mib"] is not None
              and r["after"]["rss_mib"] <= r["before"]["rss_mib"] + args.rss_slack_mib,
              f"before {r['before']['rss_mib']}, max during {r['during_max']['rss_mib']}, "
              f"after {r['after']['rss_mib']} MiB")
    hs = res["health"]
    inv.check("hostile: /health answered 200 throughout", hs["failures"] == 0,
              f"{hs['failures']} failures of {hs['n']} polls" +
              (f"; first: {hs['first_failures'][:3]}" if hs["failures"] else ""))
    inv.check(f"hostile: /health max latency <= {args.max_health_ms:g} ms",
              hs["max_ms"] is not None and hs["max_ms"] <= args.max_health_ms,
              f"max {common.fmt_ms(hs['max_ms'])} ms")
    return res


def _round(x):
    return None if x is None else round(x, 2)


def _mib(kib):
    return None if kib is None else round(kib / 1024.0, 1)


def summary(res):
    lines = []
    lim = res["server_limits"]
    lines.append("hostile: server limits " + ", ".join(
        f"{k.split('.', 1)[1]}={v}" for k, v in lim.items()
        if k not in ("server.host", "server.port")))
    ph = res["phases_s"]
    lines.append("  phases (s): " + ", ".join(f"{k} {v}" for k, v in ph.items()))
    for name, s in res["good_client"].items():
        lines.append(f"  good client {name:8s}: n {s['n']:4d} p50 {common.fmt_ms(s['p50_ms'])} "
                     f"p99 {common.fmt_ms(s['p99_ms'])} max {common.fmt_ms(s['max_ms'])} ms; "
                     f"{s['statuses']}")
    for kind, s in res["hostile"].items():
        lt = s["lifetime_s"]
        lines.append(f"  {kind:10s}: {s['connections']} connections in {s['slots']} slots; "
                     f"ended {s['how']}; statuses {s['statuses']}; lifetime p50 {lt['p50']} "
                     f"max {lt['max']} s")
    probes = {}
    for p in res["probes"]:
        probes.setdefault(p["name"], []).append(p["status"] if p["status"] is not None
                                                else p["error"])
    lines.append("  probes: " + "; ".join(f"{k} -> {v}" for k, v in probes.items()))
    r = res["resources"]
    lines.append(f"  server RSS MiB before {r['before']['rss_mib']} / max during "
                 f"{r['during_max']['rss_mib']} / after {r['after']['rss_mib']}; fds "
                 f"{r['before']['fds']} / {r['during_max']['fds']} / {r['after']['fds']}")
    lines.append(f"  metrics delta {res['metrics_delta']}")
    lines.append(f"  log lines {res['log_lines']}; /health {res['health']['n']} polls, "
                 f"{res['health']['failures']} failures, max {res['health']['max_ms']} ms")
    return "\n".join(lines)
