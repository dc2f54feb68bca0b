#!/usr/bin/env python3
"""minic's --profile beside Nsight Compute (scripts/profile_check.sh).

  profile_compare.py PROFILE.json TRACE.json NCU1.csv NCU2.csv RUN.txt EVENTS.json

Pairs the launches of minic's last profiled run (the trace's device lane, in start order, each
naming its minic kernel) with ncu's launches of the last execution of its own process (the last
L rows, L = launches per run), position by position; checks the generated kernels' names agree;
sums ncu's gpu__time_duration per minic kernel and prints one markdown table: kernel, minic
(CUPTI) median, ncu, difference, verdict (over 10 us: within 5%; shorter: within 1 us), and the
events fallback's time. Then the wall time beside `minic run`'s time:, and whether ncu saw the
same kernel names in two processes.
"""
import csv, json, re, sys

prof_path, trace_path, ncu1, ncu2, run_path, events_path = sys.argv[1:7]
prof = json.load(open(prof_path))
trace = json.load(open(trace_path))
kernels = prof["kernels"]

def ncu_rows(path):
    text = open(path).read()
    start = text.find('"ID"')
    rows = list(csv.DictReader(text[start:].splitlines())) if start >= 0 else []
    out = []
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "nsecond")
        scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}.get(unit, 1e-3)
        out.append((r["Kernel Name"], v * scale))
    return out

ev = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("tid", 0) >= 2]  # every device lane
if not ev or "run" not in ev[0].get("args", {}):
    print("trace has no real device timestamps (synthetic): %s" % trace.get("otherData", {}).get("timestamps"))
    sys.exit(0)
last = max(e["args"]["run"] for e in ev)
run = sorted([e for e in ev if e["args"]["run"] == last], key=lambda e: e["ts"])
L = len(run)
n1, n2 = ncu_rows(ncu1), ncu_rows(ncu2)
print("\n### %s (%s)\n" % (prof_path.split("/")[-1].replace(".json", ""), prof["device"]))
print("launches per run: minic %d; ncu rows: %d and %d" % (L, len(n1), len(n2)))
if len(n1) < L:
    print("ncu saw fewer launches than one run: no comparison")
    sys.exit(0)
tail = n1[-L:]
ncu_sum = {}
names = {}
for e, (name, us) in zip(run, tail):
    k = e["args"]["kernel"]
    ncu_sum[k] = ncu_sum.get(k, 0.0) + us
    names.setdefault(k, []).append(name)
events = {}
try:
    for k in json.load(open(events_path))["kernels"]:
        events[k["name"]] = k["time_us"]
except Exception:
    pass
print("\n| kernel | launches | minic CUPTI us | ncu us | diff | target | events fallback us | ncu kernel names |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
bad = 0
for k, kern in enumerate(kernels):
    t = kern["time_us"]
    n = ncu_sum.get(k)
    if t is None or n is None:
        print("| %s | %s | %s | %s | | | | |" % (kern["name"], kern["launches"], t, n))
        continue
    d = t - n
    ok = abs(d) <= 0.05 * n if n > 10 else abs(d) <= 1.0
    bad += not ok
    short = ", ".join(sorted(set(x[:48] for x in names.get(k, []))))
    ev_t = events.get(kern["name"])
    print("| %s | %d | %.2f | %.2f | %+.2f (%+.1f%%) | %s | %s | %s |" % (
        kern["name"], kern["launches"], t, n, d, 100 * d / n, "ok" if ok else "MISS",
        "%.2f" % ev_t if ev_t is not None else "-", short))
print("\nkernels outside the target: %d of %d" % (bad, len(kernels)))
m = re.search(r"time: ([0-9.]+) us", open(run_path).read())
wall = prof["totals"]["wall_time_us"]
if m and wall:
    r = float(m.group(1))
    print("wall time: profile %.2f us, minic run time: %.2f us (%+.1f%%)" % (wall, r, 100 * (wall - r) / r))
print("kernel time %.2f us, device busy %s%%" % (prof["totals"]["kernel_time_us"] or 0, prof["totals"].get("device_busy_pct")))
s1 = [x for x, _ in n1[-L:]]
s2 = [x for x, _ in n2[-L:]] if len(n2) >= L else []
print("same kernels in two processes (ncu names of one execution): %s" % (s1 == s2))
