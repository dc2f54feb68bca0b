#!/usr/bin/env python3
"""minic's --profile beside Nsight Compute, kernel by kernel (docs/PROFILING.md).

Run mode (on a GPU machine; runs minic and ncu itself):

  profile_compare.py run [--minic build-gpu/minic] [--ncu ncu] [--iters 50] [--out DIR]
                         [--replay-mode kernel|application] [--strict] GRAPH...

  For each graph: `minic run GRAPH --backend cuda --iters N --profile-json --trace` (CUPTI's
  device timestamps inside the CUDA graph replays), then Nsight Compute on a second process,
  `minic run GRAPH --backend cuda --iters 1` (three executions: the first one launched directly,
  then two graph replays), with

    ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum
        --print-kernel-base mangled --launch-skip 2L --launch-count L [--replay-mode M]

  (L = the profile's launches per run: ncu times the last replay's kernels only, a few seconds).
  `--clock-control base`, ncu's default, locks the SM clock below what an ordinary run gets;
  `--cache-control all` flushes the caches before every kernel: both would compare another
  machine state. Where ncu saw fewer than L kernels (its launch counting skipped past the end),
  it is run once more without --launch-skip and the last L kernels are used. Both processes
  share the kernel cache, so cuBLASLt runs the same algorithm in both (the cached choice).

Compare mode (files written before, e.g. by scripts/profile_check.sh):

  profile_compare.py compare PROFILE.json TRACE.json NCU.csv [--run RUN.txt]
                     [--events EVENTS.json] [--ncu2 NCU2.csv] [--strict]

Matching: the launches of minic's last profiled run (the trace's device lanes, in start order,
each naming its minic kernel and, from CUPTI, the device function) pair with ncu's kernels in
order; every pair whose two names are known must agree (a generated kernel's entry; cuBLASLt's
mangled name, CUPTI truncating it to 95 characters), else the comparison stops and says where.
Per minic kernel: the profile's median time (the sum of its launches per run) beside the sum of
ncu's gpu__time_duration over the same launches; the difference in us and in %, the ratio, and
the issue's target: within 5% for kernels over 10 us, within 1 us for shorter ones. The summary
gives the median per-launch difference: a constant offset there (launch-to-start time included
by one tool and not the other) is reported, never subtracted from the verdict. --strict: exit
status 1 when a kernel misses the target.
"""
import argparse, csv, json, os, re, statistics, subprocess, sys

TARGET_PCT, TARGET_ABS_US, LONG_US = 5.0, 1.0, 10.0


def ncu_rows(path):
    """[(kernel name, us)] in ncu's order, from --csv --print-units base output."""
    text = open(path, errors="replace").read()
    start = text.find('"ID"')
    rows = list(csv.DictReader(text[start:].splitlines())) if start >= 0 else []
    out = []
    for r in rows:
        if not (r.get("Metric Name") or "").startswith("gpu__time_duration"):
            continue
        v = float(r["Metric Value"].replace(",", ""))
        unit = (r.get("Metric Unit") or "nsecond").strip()
        scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3,
                 "ms": 1e3, "second": 1e6, "s": 1e6}.get(unit)
        if scale is None:
            raise SystemExit("%s: unknown unit %r for gpu__time_duration" % (path, unit))
        out.append((r["Kernel Name"], v * scale))
    return out


def last_run_launches(trace):
    """minic's last measured run: [(kernel index, function or '')] in start order; None when
    the trace has no real timestamps."""
    ev = [e for e in trace.get("traceEvents", [])
          if e.get("ph") == "X" and e.get("tid", 0) >= 2 and "run" in e.get("args", {})]
    if not ev:
        return None
    last = max(e["args"]["run"] for e in ev)
    run = sorted((e for e in ev if e["args"]["run"] == last), key=lambda e: e["ts"])
    return [(e["args"]["kernel"], e["args"].get("function", "")) for e in run]


def same_function(minic_fn, ncu_name):
    """True/False where both names are known; CUPTI's names are cut at 95 characters."""
    if not minic_fn or not ncu_name:
        return None
    if len(minic_fn) >= 95 or len(ncu_name) >= 95:
        n = min(len(minic_fn), len(ncu_name))
        return minic_fn[:n] == ncu_name[:n]
    return minic_fn == ncu_name


def base_name(name):
    """A kernel's name without its trailing _<index> (identical kernels share one module)."""
    return re.sub(r"_[0-9]+$", "", name)


def pair(launches, kernels, rows):
    """Pair minic's launches with ncu's rows in order, checking names. Returns (pairs, error):
    pairs[i] = (kernel index, ncu name, us, how) with how 'name' or 'order'."""
    if len(rows) != len(launches):
        return None, "minic ran %d launches per run, ncu timed %d" % (len(launches), len(rows))
    pairs = []
    for i, ((k, fn), (name, us)) in enumerate(zip(launches, rows)):
        kname = kernels[k]["name"]
        same = same_function(fn, name)
        if same is None:
            # no device function from minic (the events fallback's cuBLASLt steps, a host
            # trace): a generated kernel's entry is its name, or the name of the identical
            # kernel whose module it shares; a cuBLASLt GEMM is matched by order
            if name == kname or base_name(name) == base_name(kname):
                same = True
            elif kernels[k]["category"] != "gemm":
                same = False
        if same is False:
            return None, "launch %d: minic ran %s (%s), ncu timed %s" % (
                i, kname, fn or "?", name[:80])
        pairs.append((k, name, us, "name" if same else "order"))
    return pairs, None


def verdict(minic_us, ncu_us):
    d = minic_us - ncu_us
    if ncu_us > LONG_US:
        return abs(d) <= TARGET_PCT / 100.0 * ncu_us
    return abs(d) <= TARGET_ABS_US


def compare(prof, trace, rows, title, events=None, run_time=None, rows2=None, out=sys.stdout):
    """Print the comparison; returns (kernels compared, kernels missing the target), or None."""
    kernels = prof["kernels"]
    w = out.write
    w("\n### %s (%s)\n\n" % (title, prof.get("device", "?")))
    launches = last_run_launches(trace)
    if launches is None:
        w("the trace has no real device timestamps (%s): nothing to compare\n"
          % trace.get("otherData", {}).get("timestamps"))
        return None
    clock = trace.get("otherData", {}).get("clock", "?")
    w("minic: %s; %d launches per run; ncu: %d kernels\n" % (clock, len(launches), len(rows)))
    pairs, err = pair(launches, kernels, rows)
    if err:
        w("no comparison: %s\n" % err)
        return None
    ncu_sum, how, names, per_launch = {}, {}, {}, []
    for k, name, us, h in pairs:
        ncu_sum[k] = ncu_sum.get(k, 0.0) + us
        how.setdefault(k, set()).add(h)
        names.setdefault(k, []).append(name)
    ev_t = {k["name"]: k["time_us"] for k in (events or {}).get("kernels", [])}
    w("\n| kernel | launches | minic us | ncu us | diff us | diff % | ratio | target | matched | events fallback us | ncu kernel |\n")
    w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
    bad = compared = 0
    for k, kern in enumerate(kernels):
        t, n = kern.get("time_us"), ncu_sum.get(k)
        if t is None or n is None:
            w("| %s | %s | %s | %s | | | | | | | |\n" % (kern["name"], kern["launches"], t, n))
            continue
        compared += 1
        d = t - n
        ok = verdict(t, n)
        bad += not ok
        nl = max(1, len(names[k]))
        per_launch.append(d / nl)
        e = ev_t.get(kern["name"])
        w("| %s | %d | %.2f | %.2f | %+.2f | %+.1f%% | %.3f | %s | %s | %s | %s |\n" % (
            kern["name"], kern["launches"], t, n, d, 100.0 * d / n if n else 0.0,
            t / n if n else 0.0, "ok" if ok else "MISS", "+".join(sorted(how[k])),
            "%.2f" % e if e is not None else "-", ", ".join(sorted(set(x[:40] for x in names[k])))))
    w("\nkernels within the target (over %g us: %g%%; shorter: %g us): %d of %d\n"
      % (LONG_US, TARGET_PCT, TARGET_ABS_US, compared - bad, compared))
    if per_launch:
        off, lo, hi = statistics.median(per_launch), min(per_launch), max(per_launch)
        steady = len(per_launch) >= 3 and abs(off) > 0.5 and (lo > 0 or hi < 0) and hi - lo < abs(off)
        w("median difference per launch (minic - ncu): %+.2f us (from %+.2f to %+.2f)%s\n" % (
            off, lo, hi, "; about constant: a fixed cost one tool counts and the other does not"
            if steady else ""))
    tot = prof.get("totals", {})
    if run_time and tot.get("wall_time_us"):
        r, wall = run_time, tot["wall_time_us"]
        w("wall time: profile %.2f us, minic run's time: %.2f us (%+.1f%%)\n" % (wall, r, 100 * (wall - r) / r))
    if tot.get("kernel_time_us") is not None:
        w("kernel time %.2f us, device busy %s%%\n" % (tot["kernel_time_us"], tot.get("device_busy_pct")))
    if rows2 is not None:
        L = len(launches)
        s1, s2 = [x for x, _ in rows[-L:]], [x for x, _ in rows2[-L:]]
        w("same kernels in two processes (ncu's names of one execution): %s\n" % (s1 == s2))
    return compared, bad


def run_ncu(args, graph, path, skip, count):
    cmd = [args.ncu, "--clock-control", "none", "--cache-control", "none",
           "--metrics", "gpu__time_duration.sum", "--csv", "--print-units", "base",
           "--print-kernel-base", "mangled", "--launch-count", str(count)]
    if skip:
        cmd += ["--launch-skip", str(skip)]
    if args.replay_mode:
        cmd += ["--replay-mode", args.replay_mode]
    cmd += ["--log-file", path, args.minic, "run", graph, "--backend", args.backend, "--iters", "1"]
    print("$ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=args.timeout)
    open(path + ".out", "w").write(r.stdout)
    if r.returncode != 0:
        print(r.stdout[-2000:])
        raise SystemExit("ncu failed (exit %d) on %s" % (r.returncode, graph))
    return ncu_rows(path)


def main_run(args):
    os.makedirs(args.out, exist_ok=True)
    total = missed = 0
    for g in args.graphs:
        n = os.path.basename(g).rsplit(".", 1)[0]
        base = os.path.join(args.out, n)
        cmd = [args.minic, "run", g, "--backend", args.backend, "--iters", str(args.iters),
               "--profile", "--profile-json", base + ".json", "--trace", base + ".trace.json"]
        print("$ " + " ".join(cmd), flush=True)
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=args.timeout)
        open(base + ".profile.txt", "w").write(r.stdout)
        if r.returncode != 0:
            print(r.stdout[-2000:])
            raise SystemExit("minic failed (exit %d) on %s" % (r.returncode, g))
        prof = json.load(open(base + ".json"))
        trace = json.load(open(base + ".trace.json"))
        L = prof["totals"]["launches_per_run"]
        rows = run_ncu(args, g, base + ".ncu.csv", 2 * L, L)
        if len(rows) < L:  # ncu counted launches otherwise: every kernel, the last L
            print("ncu timed %d kernels with --launch-skip %d; again without it" % (len(rows), 2 * L))
            rows = run_ncu(args, g, base + ".ncu.csv", 0, 3 * L)[-L:]
        m = re.search(r"time: ([0-9.]+) us", r.stdout)
        res = compare(prof, trace, rows, n, run_time=float(m.group(1)) if m else None)
        if res:
            total += res[0]
            missed += res[1]
        else:
            missed += 1
    print("\nall graphs: %d kernels compared, %d outside the target" % (total, missed))
    return 1 if args.strict and missed else 0


def main_compare(args):
    prof = json.load(open(args.profile))
    trace = json.load(open(args.trace))
    rows = ncu_rows(args.ncu_csv)
    L = len(last_run_launches(trace) or [])
    if L and len(rows) > L:
        rows = rows[-L:]  # every launch of the process: its last execution
    rows2 = ncu_rows(args.ncu2) if args.ncu2 else None
    run_time = None
    if args.run:
        m = re.search(r"time: ([0-9.]+) us", open(args.run).read())
        run_time = float(m.group(1)) if m else None
    events = json.load(open(args.events)) if args.events and os.path.exists(args.events) else None
    title = os.path.basename(args.profile).rsplit(".", 1)[0]
    res = compare(prof, trace, rows, title, events=events, run_time=run_time, rows2=rows2)
    if res is None:
        return 2
    return 1 if args.strict and res[1] else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("run", help="run minic's profile and ncu, then compare")
    r.add_argument("graphs", nargs="+")
    r.add_argument("--minic", default="build-gpu/minic")
    r.add_argument("--ncu", default="ncu")
    r.add_argument("--backend", default="cuda")
    r.add_argument("--iters", type=int, default=50)
    r.add_argument("--out", default="profile-out")
    r.add_argument("--replay-mode", choices=["kernel", "application"], default=None)
    r.add_argument("--timeout", type=int, default=300)
    r.add_argument("--strict", action="store_true")
    c = sub.add_parser("compare", help="compare files written before")
    c.add_argument("profile")
    c.add_argument("trace")
    c.add_argument("ncu_csv")
    c.add_argument("--run")
    c.add_argument("--events")
    c.add_argument("--ncu2")
    c.add_argument("--strict", action="store_true")
    args = ap.parse_args()
    return main_run(args) if args.mode == "run" else main_compare(args)


if __name__ == "__main__":
    sys.exit(main())
