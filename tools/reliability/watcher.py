#!/usr/bin/python3
"""The watcher of the load modes: the /health poller and the refusal probes, in a process of
their own, so that what they time is the server's answer and not the wait of a load generator
whose event loop is busy (under 5x overload the load's own loop falls behind by tenths of a
second and more, and every latency it takes includes that). Run by common.Watcher with one
JSON argument (the plan); runs until its stdin closes, then prints one JSON line, the result.

Plan: host, port, t0 (the harness's time.monotonic() origin; the clock is the machine's),
health_period, health_addr (None: the default route), probe_period (0: no probes),
probe_addrs (source addresses to probe from), probe_max_tokens.

A probe is one streamed completion on a fresh connection from each probe address in turn,
timed from the connect to the response head; a 200 is closed right after its head (the server
cancels it), a 429 is read to its end. From the load's own address a probe meets the limits
the load meets (a full queue, the connections per address); it answers how long the server
takes to refuse, whatever the load generator's own lag.
"""

import asyncio
import json
import sys
import time

import common
import httpc


async def probe_once(host, port, addr, max_tokens, timeout=10.0):
    """One probe: {addr, t, status, code, connect_ms, head_ms, error}."""
    rec = {"addr": addr, "t": time.monotonic(), "status": None, "code": None,
           "connect_ms": None, "head_ms": None, "error": None}
    start = time.monotonic()
    conn = None
    try:
        conn = await httpc.connect(host, port, local_addr=addr, timeout=timeout)
        connected = time.monotonic()
        rec["connect_ms"] = round((connected - start) * 1000, 2)
        conn.writer.write(httpc.request_bytes(
            "POST", "/v1/completions", host, common.completion_body(max_tokens, True),
            keep_alive=False))
        head = await asyncio.wait_for(httpc.read_head(conn.reader), timeout)
        rec["head_ms"] = round((time.monotonic() - connected) * 1000, 2)
        rec["status"] = head.status
        if head.status != 200:
            body = await asyncio.wait_for(httpc.read_body(conn.reader, head), timeout)
            try:
                rec["code"] = json.loads(body)["error"]["code"]
            except (ValueError, KeyError, TypeError):
                pass
    except (OSError, httpc.HttpError, asyncio.TimeoutError) as e:
        rec["error"] = f"{type(e).__name__}: {e}"
    finally:
        if conn is not None:
            conn.close()
    return rec


async def probe(plan, stop, records):
    while not stop.is_set():
        started = time.monotonic()
        for addr in plan["probe_addrs"]:
            records.append(await probe_once(plan["host"], plan["port"], addr,
                                            plan["probe_max_tokens"]))
        rest = plan["probe_period"] - (time.monotonic() - started)
        if rest > 0:
            try:
                await asyncio.wait_for(stop.wait(), rest)
            except asyncio.TimeoutError:
                pass


async def main():
    plan = json.loads(sys.argv[1])
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    health = common.HealthPoller(plan["host"], plan["port"], plan["health_period"],
                                 t0=plan["t0"], local_addr=plan.get("health_addr"))
    probes = []
    tasks = [asyncio.create_task(health.run(stop))]
    if plan.get("probe_period", 0) > 0 and plan.get("probe_addrs"):
        tasks.append(asyncio.create_task(probe(plan, stop, probes)))
    await reader.read()  # until the harness closes our stdin
    stop.set()
    await asyncio.gather(*tasks)
    for p in probes:
        p["t"] = round(p["t"] - plan["t0"], 3)
    sys.stdout.write(json.dumps({"health": {"latencies": health.latencies,
                                            "failures": health.failures},
                                 "probes": probes}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
