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

d = sys.argv[1]
def run(name):
    j = json.load(open(f"{d}/{name}.json"))['runs'][0]
    c = open(f"{d}/{name}.client").read()
    m = re.search(r"server cpu_s ([\d.]+) ([\d.]+)", c)
    scpu = float(m.group(2)) - float(m.group(1)) if m else None
    return j['output_tokens_per_s'], j.get('process_cpu_s'), j['output_tokens'], scpu, j
rows = {}
n = len(glob.glob(f"{d}/stories-burst-inprocess-run*.json"))
print("round inproc http i4 i8 | ratios | client cpu s (http,i4,i8) | server cpu s (http,i4,i8) | inproc cpu")
tab = {k: [] for k in ['in', 'h', 'i4', 'i8', 'rh', 'r4', 'r8', 'ch', 'c4', 'c8', 'sh', 's4', 's8', 'cu_h', 'cu_4', 'cu_8', 'cin']}
for r in range(1, n + 1):
    ip = run(f"stories-burst-inprocess-run{r}")
    h = run(f"stories-burst-http-run{r}")
    i4 = run(f"stories-burst-http-interval4-run{r}")
    i8 = run(f"stories-burst-http-interval8-run{r}")
    vals = [ip[0], h[0], i4[0], i8[0]]
    tab['in'].append(ip[0]); tab['h'].append(h[0]); tab['i4'].append(i4[0]); tab['i8'].append(i8[0])
    tab['rh'].append(h[0]/ip[0]); tab['r4'].append(i4[0]/ip[0]); tab['r8'].append(i8[0]/ip[0])
    tab['ch'].append(h[1]); tab['c4'].append(i4[1]); tab['c8'].append(i8[1])
    tab['sh'].append(h[3]); tab['s4'].append(i4[3]); tab['s8'].append(i8[3])
    tab['cu_h'].append(h[1]/h[2]*1e6); tab['cu_4'].append(i4[1]/i4[2]*1e6); tab['cu_8'].append(i8[1]/i8[2]*1e6)
    tab['cin'].append(ip[1])
    print(r, " ".join(f"{v:,.0f}" for v in vals), "|", " ".join(f"{v/ip[0]:.0%}" for v in vals[1:]), "|",
          f"{h[1]:.2f} {i4[1]:.2f} {i8[1]:.2f}", "|", f"{h[3]:.2f} {i4[3]:.2f} {i8[3]:.2f}", "|", f"{ip[1]:.2f}")
print("medians:", {k: round(statistics.median(v), 3) for k, v in tab.items()})
# r5
steps = sorted(glob.glob(f"{d}/r5-step-run*.txt"))
if steps:
    print("r5 rounds: step_us, TPOT ms (1, 8), pass ms (1, 8), ratio (1, 8)")
    rr = {1: [], 8: []}
    for r in range(1, len(steps) + 1):
        st = float(re.search(r"bm_decode\S*\s+([\d.]+) us", open(f"{d}/r5-step-run{r}.txt").read()).group(1))
        out = [st]
        tp = {}; ps = {}
        for i in (1, 8):
            j = json.load(open(f"{d}/r5-interval{i}-run{r}.json"))['runs'][0]
            tp[i] = j['tpot_s']['mean'] * 1e3
            met = open(f"{d}/r5-interval{i}-run{r}.metrics").read()
            s_ = float(re.search(r'conveyor_step_time_seconds_sum\{kind="decode"\} (\S+)', met).group(1))
            c_ = float(re.search(r'conveyor_step_time_seconds_count\{kind="decode"\} (\S+)', met).group(1))
            ps[i] = s_ / c_ * 1e3
            rr[i].append(tp[i] / (st / 1e3))
        print(r, f"{st:.0f}", f"{tp[1]:.3f} {tp[8]:.3f}", f"{ps[1]:.3f} {ps[8]:.3f}", f"{tp[1]/(st/1e3):.2f} {tp[8]/(st/1e3):.2f}")
    print("median ratio", {k: round(statistics.median(v), 2) for k, v in rr.items()})
