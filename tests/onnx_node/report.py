#!/usr/bin/env python3
"""Check the node-test results against tests/onnx_node/expected_failures.txt, or (--update)
rewrite that list and docs/ONNX.md from them.

    report.py --expected FILE --doc docs/ONNX.md [--update] BACKEND=RESULTS.tsv ...

RESULTS.tsv: "test<TAB>pass" or "test<TAB>fail<TAB>reason" per line (tests/onnx_node/runner.c).
The list holds one failing test a line, "test<TAB>reason" (the first failing backend's reason).
"""
import argparse
import re
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--expected", required=True)
ap.add_argument("--doc", required=True)
ap.add_argument("--onnx-version", default="?")
ap.add_argument("--update", action="store_true")
ap.add_argument("results", nargs="+")
args = ap.parse_args()

results = {}  # backend -> {test: (ok, reason)}
for spec in args.results:
    backend, path = spec.split("=", 1)
    r = {}
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            r[parts[0]] = (parts[1] == "pass", parts[2] if len(parts) > 2 else "")
    results[backend] = r
backends = list(results)
tests = sorted(set().union(*[set(r) for r in results.values()]))

failing = {}
for t in tests:
    for b in backends:
        ok, why = results[b].get(t, (False, "not run"))
        if not ok:
            failing[t] = f"{why} [{b}]" if len(backends) > 1 and b != backends[0] else why
            break

def category(reason):
    if "unknown operator" in reason:
        return "unknown operator"
    if "dtype" in reason or "not a tensor" in reason or "bytes were given" in reason:
        return "unsupported dtype or type"
    if reason.startswith("numerics"):
        return "numerics"
    if "zero-size" in reason or "is 0 (minic needs positive sizes)" in reason or "empty slice" in reason:
        return "zero-size tensor"
    if "no opset of the default domain" in reason:
        return "training operators (another domain)"
    return "unsupported attribute or form"

if args.update:
    with open(args.expected, "w") as f:
        f.write("# ONNX node tests that fail on minic, with the reason (tests/onnx_node/run.sh).\n"
                "# Regenerate with MINIC_ONNX_UPDATE=1 ctest -R onnx_node after a change on purpose.\n")
        for t in sorted(failing):
            f.write(f"{t}\t{failing[t]}\n")
    with open(args.doc, "w") as f:
        f.write("# ONNX node tests\n\n")
        f.write("ONNX's backend node tests (`onnx/backend/test/data/node`, generated from Debian 12's "
                f"python3-onnx {args.onnx_version} by `tests/onnx_node/generate.py`) run through "
                "minic by `tests/onnx_node/runner.c` (CTest: `onnx_node`). A test passes when every "
                "output has ONNX's shape and every element is within 1e-7 + 1e-3·|expected| "
                "(f16/bf16: 1e-3 + 1e-2·|expected|), integers and bools exactly (ONNX 1.12 stores BFLOAT16 test tensors as UINT16 bits; "
                "the runner reads them so). The runner reads "
                "DOUBLE tensors as f32 (`--f64-as-f32`) and gives the importer the values of inputs "
                "that decide a shape (used, directly or through shape arithmetic, as shapes, axes, sizes, slice or range bounds, pads, a Compress condition; minic compiles for fixed "
                "shapes). Every failing test is listed in `tests/onnx_node/expected_failures.txt`; "
                "a test outside that list that fails, or one in it that passes, fails CTest.\n\n")
        f.write("| backend | passed | of |\n| --- | --- | --- |\n")
        for b in backends:
            n = sum(1 for t in tests if results[b].get(t, (False,))[0])
            f.write(f"| {b} | {n} | {len(tests)} |\n")
        cats = {}
        for t, why in failing.items():
            cats.setdefault(category(why), []).append(t)
        f.write("\nFailing tests by kind of reason: " +
                ", ".join(f"{k} {len(v)}" for k, v in sorted(cats.items(), key=lambda kv: -len(kv[1]))) + ".\n")
        unknown = {}
        for t, why in failing.items():
            m = re.search(r"\(([A-Za-z0-9]+), opset \d+\): unknown operator", why)
            if m:
                unknown[m.group(1)] = unknown.get(m.group(1), 0) + 1
        f.write("\nUnknown operators, by the number of failing tests that stop at them: " +
                ", ".join(f"{k} {v}" for k, v in sorted(unknown.items(), key=lambda kv: (-kv[1], kv[0]))) + ".\n")
        f.write("\nSome ONNX operators are imported as compositions of minic's operators until minic has "
                "them (docs/FORMAT.md §7): ScatterElements, OneHot and the loss operators through one-hot "
                "masks, Resize as per-axis weight matrices, RNN/GRU/LSTM unrolled. ArgMax, ArgMin, Hardmax, "
                "CumSum, Floor, Ceil and Round are minic's argmax, argmin, cumsum, floor, ceil and round "
                "(select_last_index, exclusive and reverse through a reversing slice and a shift); Gather "
                "and GatherElements are minic's gather (GatherElements on the data flattened, each "
                "element's flat position computed from iotas).\n")
        f.write("\n## Failing tests and why\n\n| test | reason |\n| --- | --- |\n")
        for t in sorted(failing):
            why = failing[t].replace("|", "\\|")
            f.write(f"| `{t}` | {why} |\n")
    print(f"onnx_node: wrote {args.expected} and {args.doc}")
    sys.exit(0)

expected = {}
with open(args.expected) as f:
    for line in f:
        if line.startswith("#") or not line.strip():
            continue
        name, _, why = line.rstrip("\n").partition("\t")
        expected[name] = why
bad = 0
for t in tests:
    if t in failing and t not in expected:
        print(f"onnx_node: REGRESSION: {t} fails: {failing[t]}")
        bad += 1
    elif t not in failing and t in expected:
        print(f"onnx_node: {t} now passes on every backend: remove it from {args.expected} "
              "(MINIC_ONNX_UPDATE=1)")
        bad += 1
for b in backends:
    n = sum(1 for t in tests if results[b].get(t, (False,))[0])
    print(f"onnx_node: {b}: {n} of {len(tests)} passed")
sys.exit(1 if bad else 0)
