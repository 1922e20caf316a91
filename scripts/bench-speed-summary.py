#!/usr/bin/env python3
"""Tables of sections 4 and 7 of scripts/bench-speed.sh from its raw folder (docs/benchmarks.md 8).

  scripts/bench-speed-summary.py OUT_DIR

Per round: the stories260K burst in process and through HTTP (stream_interval 1, 4, 8), the
ratios, the client's CPU over the run (the bench's own getrusage) and the server's (from /proc);
then the batch-1 step against the 5 requests/s replay's mean TPOT and decode passes.
"""
import glob
import json
import re
import statistics
import sys

HTTP = [("http", "stories-burst-http-run{}"),
        ("interval 4", "stories-burst-http-interval4-run{}"),
        ("interval 8", "stories-burst-http-interval8-run{}")]


def replay(out, name):
    """(output tokens/s, client CPU s, output tokens, server CPU s or None) of one replay."""
    run = json.load(open(f"{out}/{name}.json"))["runs"][0]
    server = None
    try:
        m = re.search(r"server cpu_s ([\d.]+) ([\d.]+)", open(f"{out}/{name}.client").read())
        if m:
            server = float(m.group(2)) - float(m.group(1))
    except FileNotFoundError:
        pass
    return run["output_tokens_per_s"], run.get("process_cpu_s"), run["output_tokens"], server


def metric(text, name):
    return float(re.search(name + r'\{kind="decode"\} (\S+)', text).group(1))


def bursts(out):
    rounds = len(glob.glob(f"{out}/stories-burst-inprocess-run*.json"))
    if not rounds:
        return
    print("round: in process, then per HTTP setting: tok/s (share of in process), "
          "client CPU s (us per token), server CPU s")
    cols = {}
    for r in range(1, rounds + 1):
        tok, cpu, _, _ = replay(out, f"stories-burst-inprocess-run{r}")
        cols.setdefault("in process tok/s", []).append(tok)
        cols.setdefault("in process CPU s", []).append(cpu)
        cells = [f"{tok:,.0f} ({cpu:.2f} s)"]
        for label, pattern in HTTP:
            t, c, n, s = replay(out, pattern.format(r))
            cols.setdefault(f"{label} tok/s", []).append(t)
            cols.setdefault(f"{label} share", []).append(t / tok)
            cols.setdefault(f"{label} client us/token", []).append(c / n * 1e6)
            if s is not None:
                cols.setdefault(f"{label} server CPU s", []).append(s)
            server = f"{s:.2f}" if s is not None else "-"
            cells.append(f"{t:,.0f} ({t / tok:.0%}), {c:.2f} ({c / n * 1e6:.1f}), {server}")
        print(r, " | ".join(cells))
    print("medians:")
    for key, values in cols.items():
        print(f"  {key}: {statistics.median(values):,.3f}")


def light_load(out):
    rounds = len(glob.glob(f"{out}/r5-step-run*.txt"))
    if not rounds:
        return
    print("round: batch-1 step us | TPOT ms (interval 1, 8) | decode pass ms | TPOT / step")
    ratios = {1: [], 8: []}
    for r in range(1, rounds + 1):
        text = open(f"{out}/r5-step-run{r}.txt").read()
        step = float(re.search(r"bm_decode\S*\s+([\d.]+) us", text).group(1))
        tpot, passes = {}, {}
        for i in (1, 8):
            run = json.load(open(f"{out}/r5-interval{i}-run{r}.json"))["runs"][0]
            tpot[i] = run["tpot_s"]["mean"] * 1e3
            m = open(f"{out}/r5-interval{i}-run{r}.metrics").read()
            passes[i] = (metric(m, "conveyor_step_time_seconds_sum")
                         / metric(m, "conveyor_step_time_seconds_count") * 1e3)
            ratios[i].append(tpot[i] / (step / 1e3))
        print(r, f"{step:.0f} | {tpot[1]:.3f} {tpot[8]:.3f} | {passes[1]:.3f} {passes[8]:.3f} |",
              f"{ratios[1][-1]:.2f} {ratios[8][-1]:.2f}")
    print("median TPOT / step:", {i: round(statistics.median(v), 2) for i, v in ratios.items()})


if __name__ == "__main__":
    bursts(sys.argv[1])
    light_load(sys.argv[1])
