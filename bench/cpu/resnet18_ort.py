#!/usr/bin/env python3
"""ResNet-18 at batch 1 on the CPU: minic's cpu backend beside ONNX Runtime on the same file and
the same cores (issue 20's CPU target: minic within 1.5x of ONNX Runtime).

    python3 bench/cpu/resnet18_ort.py --minic build-rel/minic [--cpus 0,1] [--rounds 3]
                                      [--iters 30] [--work /tmp/rn18_ort] [--old]

The model: torchvision's resnet18(weights=None), seed 0, every batch norm's running mean
uniform in [-0.1, 0.1) and variance in [0.5, 1.5), eval mode, exported by PyTorch's TorchScript
exporter at opset 17 with the input named `input` ([1, 3, 224, 224], seed 1); the reference is
PyTorch's output in float64. Each round times ONNX Runtime's CPU provider (2 intra-op threads,
all graph optimizations, 3 warm-ups, then --iters runs: the median and minimum), then `minic run
--backend cpu --threads N --iters ITERS` (its median after a warm-up), each under `taskset -c
CPUS`; rounds alternate so that a busy minute of a shared machine hits both. With --old, each
round also runs minic with MINIC_IM2COL=1 MINIC_GEMM_SWAP=0 (the im2col copies kept, no operand
swap: the CPU GEMM paths before 2026-11-28 06:00); --variant NAME:VAR=VALUE,.. adds a run with
those environment variables (e.g. "no epilogue:MINIC_CONV_EPILOGUE=0"). ONNX Runtime is Python's onnxruntime when it
imports, else onnxruntime-node through bench/cpu/ort_gpt2.js ($ORT names its directory).
Prints one line per round and the medians over the rounds. Needs numpy, torch, torchvision.
"""
import argparse, json, os, statistics, subprocess, sys, time


def export(work):
    import numpy as np
    import torch
    import torchvision
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "model.onnx")
    if os.path.exists(path) and os.path.exists(os.path.join(work, "expected64.npy")):
        return path
    torch.manual_seed(0)
    m = torchvision.models.resnet18(weights=None).eval()
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.1, 0.1)
            mod.running_var.uniform_(0.5, 1.5)
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.onnx.export(m, (x,), path, input_names=["input"], output_names=["output"], opset_version=17)
        ref = m.double()(x.double()).numpy()
    np.save(os.path.join(work, "input.npy"), x.numpy())
    np.save(os.path.join(work, "expected64.npy"), ref)
    np.save(os.path.join(work, "expected.npy"), ref.astype("f4"))
    return path


def rel_error(got, want):
    import numpy as np
    got, want = got.astype("f8"), want.astype("f8")
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def ort_python(work, threads, iters):
    import numpy as np
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    s = ort.InferenceSession(os.path.join(work, "model.onnx"), so, providers=["CPUExecutionProvider"])
    x = np.load(os.path.join(work, "input.npy"))
    for _ in range(3):
        s.run(None, {"input": x})
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        y = s.run(None, {"input": x})[0]
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts), min(ts), rel_error(y, np.load(os.path.join(work, "expected64.npy")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minic", default=os.environ.get("MINIC_BIN", "build-rel/minic"))
    ap.add_argument("--cpus", default="0,1")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--work", default="/tmp/rn18_ort")
    ap.add_argument("--old", action="store_true")
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME:VAR=VALUE[,VAR=VALUE..]: also run minic with those environment variables "
                         "(BIN=PATH: another minic binary)")
    a = ap.parse_args()
    import numpy as np
    model = export(a.work)
    here = os.path.dirname(os.path.abspath(__file__))
    cpu_cmd = ["taskset", "-c", a.cpus]
    if a.cpus == "":
        cpu_cmd = []
    try:
        import onnxruntime  # noqa: F401
        python_ort = True
    except ImportError:
        python_ort = False
    want = np.load(os.path.join(a.work, "expected64.npy"))
    variants = [("minic", {})] + ([("minic old", {"MINIC_IM2COL": "1", "MINIC_GEMM_SWAP": "0"})] if a.old else [])
    for v in a.variant:
        name, _, envs = v.partition(":")
        variants.append((name, dict(e.split("=", 1) for e in envs.split(",") if e)))
    res = {"ORT": []}
    for name, _ in variants:
        res[name] = []
    for r in range(a.rounds):
        if python_ort:
            o = subprocess.run(cpu_cmd + [sys.executable, "-c",
                               "import sys, json; sys.path.insert(0, %r); import resnet18_ort as b; "
                               "print(json.dumps(b.ort_python(%r, %d, %d)))" % (here, a.work, a.threads, a.iters)],
                               capture_output=True, text=True)
            med, mn, err = json.loads(o.stdout.strip().splitlines()[-1]) if o.returncode == 0 else (float("nan"),) * 3
        else:
            o = subprocess.run(cpu_cmd + ["node", os.path.join(here, "ort_gpt2.js"), a.work, str(a.threads), str(a.iters)],
                               capture_output=True, text=True)
            d = json.loads(o.stdout.strip().splitlines()[-1]) if o.returncode == 0 else {}
            med, mn, err = d.get("median_ms", float("nan")), d.get("min_ms", float("nan")), d.get("rel_error_vs_torch", float("nan"))
        if o.returncode != 0:
            print("ORT failed:", o.stderr[-500:], file=sys.stderr)
        res["ORT"].append(med)
        line = f"round {r + 1}: ORT {med:.2f} ms (min {mn:.2f}, error {err:.2e})"
        for name, env in variants:
            out = os.path.join(a.work, "minic_out.npy")
            env = dict(env)
            binary = env.pop("BIN", a.minic)  # a variant may name another minic binary
            o = subprocess.run(cpu_cmd + [binary, "run", model, "--backend", "cpu", "--threads", str(a.threads),
                               "--iters", str(a.iters), "--input", "input=" + os.path.join(a.work, "input.npy"),
                               "--output", out, "--quiet"], env=dict(os.environ, **env), capture_output=True, text=True)
            t = [l for l in (o.stdout + o.stderr).splitlines() if l.startswith("time:")]
            ms = float(t[0].split()[1]) / 1e3 if o.returncode == 0 and t else float("nan")
            err = rel_error(np.load(out), want) if o.returncode == 0 else float("nan")
            if o.returncode != 0:
                print(name, "failed:", o.stderr[-500:], file=sys.stderr)
            res[name].append(ms)
            line += f" | {name} {ms:.2f} ms (error {err:.2e})"
        print(line, flush=True)
    ort_med = statistics.median(res["ORT"])
    summary = f"medians of {a.rounds} rounds: ORT {ort_med:.2f} ms"
    for name, _ in variants:
        m = statistics.median(res[name])
        summary += f", {name} {m:.2f} ms ({m / ort_med:.2f}x ORT)"
    print(summary)


if __name__ == "__main__":
    main()
