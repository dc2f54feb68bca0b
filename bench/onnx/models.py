#!/usr/bin/env python3
"""Real ONNX models through minic on the GPU machine (issue 22), beside PyTorch and ONNX Runtime.

    python3 bench/onnx/models.py --minic build-gpu/minic --out DIR [--models resnet18,gpt2]
                                 [--backend cuda] [--iters 20] [--work /tmp/onnx_models]
                                 [--compile resnet18,gpt2]

For each model (random init, seed 0, f32, batch 1; nothing is downloaded):
  resnet18  torchvision's resnet18(weights=None), or the same network built here when
            torchvision is missing; input [1, 3, 224, 224]
  gpt2      Hugging Face's GPT2LMHeadModel(GPT2Config()), eager attention; input_ids [1, 128]
            (int64, narrowed to i32 by minic), logits out
  gpt2e     the same GPT-2 from inputs_embeds (no Gather), only where gpt2 failed in minic
it exports the model to ONNX (TorchScript exporter at opset 17, else the dynamo exporter at
opset 18), runs it through `minic run --backend cuda` (the binary from --minic or $MINIC_BIN),
and compares minic's output with PyTorch's (on the GPU, TF32 off) and ONNX Runtime's (CUDA
provider when present, else CPU): max abs error, max abs error / max |ref|, and the relative
norm of docs/FORMAT.md §6 (target <= 1e-4 with matmuls). It times minic (`minic run --iters`: the median
per run, and its compile time), PyTorch eager, torch.compile and ORT (medians of --iters after
warm-ups), and measures minic's import alone (`minic check MODEL.onnx`, a process of its own:
wall time and peak RSS from wait4) against the model's file size (targets: 2 s, 2x the size).
Writes DIR/onnx_models.md (the table), DIR/onnx_models.json and minic's logs under DIR/MODEL/;
the exported models stay under --work.
"""
import argparse, json, os, resource, shutil, subprocess, sys, time


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---- models -----------------------------------------------------------------------------------

def resnet18(torch):
    try:
        import torchvision
        return torchvision.models.resnet18(weights=None), "torchvision"
    except Exception as e:  # ImportError, or a torchvision built for another torch
        log(f"torchvision unavailable ({type(e).__name__}: {str(e)[:120]}): ResNet-18 built here")
    nn = torch.nn

    class Block(nn.Module):
        def __init__(s, cin, cout, stride):
            super().__init__()
            s.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            s.bn1 = nn.BatchNorm2d(cout)
            s.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            s.bn2 = nn.BatchNorm2d(cout)
            s.relu = nn.ReLU(inplace=True)
            s.down = None
            if stride != 1 or cin != cout:
                s.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(s, x):
            y = s.relu(s.bn1(s.conv1(x)))
            y = s.bn2(s.conv2(y))
            return s.relu(y + (s.down(x) if s.down is not None else x))

    class ResNet18(nn.Module):
        def __init__(s, classes=1000):
            super().__init__()
            s.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                   nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
            layers, cin = [], 64
            for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
                layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
                cin = cout
            s.layers = nn.Sequential(*layers)
            s.pool = nn.AdaptiveAvgPool2d(1)
            s.fc = nn.Linear(512, classes)

        def forward(s, x):
            return s.fc(torch.flatten(s.pool(s.layers(s.stem(x))), 1))

    return ResNet18(), "built here"


def make_model(name, torch, seq):
    """(module, example inputs as a dict name -> tensor, output name, origin)"""
    torch.manual_seed(0)
    if name == "resnet18":
        m, origin = resnet18(torch)
        m = m.eval()
        # random batchnorm statistics, so that the normalisation is not the identity
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
        x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
        return m, {"input": x}, "output", origin
    from transformers import GPT2Config, GPT2LMHeadModel
    try:
        cfg = GPT2Config(attn_implementation="eager")
    except TypeError:
        cfg = GPT2Config()
    m = GPT2LMHeadModel(cfg).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, seq), generator=torch.Generator().manual_seed(1))
    if name == "gpt2":
        class Ids(torch.nn.Module):
            def __init__(s, m): super().__init__(); s.m = m
            def forward(s, input_ids): return s.m(input_ids=input_ids, use_cache=False).logits
        return Ids(m).eval(), {"input_ids": ids}, "logits", "transformers"
    with torch.no_grad():
        emb = m.transformer.wte(ids)

    class Embeds(torch.nn.Module):
        def __init__(s, m): super().__init__(); s.m = m
        def forward(s, x): return s.m(inputs_embeds=x, use_cache=False).logits
    return Embeds(m).eval(), {"x": emb}, "logits", "transformers"


def export(torch, module, inputs, out_name, path):
    errs = []
    for dynamo, opset in ((False, 17), (True, 18)):
        try:
            kw = {"dynamo": dynamo}
            try:
                torch.onnx.export(module, tuple(inputs.values()), path, input_names=list(inputs),
                                  output_names=[out_name], opset_version=opset, **kw)
            except TypeError:  # a torch without the dynamo argument
                if dynamo:
                    raise
                torch.onnx.export(module, tuple(inputs.values()), path, input_names=list(inputs),
                                  output_names=[out_name], opset_version=opset)
            return f"{'dynamo' if dynamo else 'torchscript'} exporter, opset {opset}"
        except Exception as e:
            errs.append(f"{'dynamo' if dynamo else 'torchscript'}: {type(e).__name__}: {str(e)[:300]}")
    raise RuntimeError("; ".join(errs))


def folder_size(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)
               if os.path.isfile(os.path.join(d, f)) and not f.endswith((".npy", ".txt", ".log")))


# ---- measurements -----------------------------------------------------------------------------

def errors(out, ref):
    import numpy as np
    out = np.asarray(out, dtype=np.float64).reshape(-1)
    ref = np.asarray(ref, dtype=np.float64).reshape(-1)
    if out.shape != ref.shape:
        return {"error": f"{out.size} elements against {ref.size}"}
    if not np.all(np.isfinite(out)):
        return {"error": f"{int(np.sum(~np.isfinite(out)))} non-finite values"}
    d = np.abs(out - ref)
    nref = float(np.linalg.norm(ref))
    return {"max_abs": float(d.max()), "max_rel": float(d.max() / max(float(np.abs(ref).max()), 1e-30)),
            "rel_norm": float(np.linalg.norm(out - ref) / nref) if nref else float(d.max())}


def timed(fn, iters, sync=None):
    for _ in range(3):
        fn()
    if sync:
        sync()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2] * 1e3  # ms


def run_child(cmd, log_path, timeout):
    """Run cmd in its own process; (rc, wall s, peak RSS bytes, stdout+stderr).

    The peak is the child's own VmHWM (/proc/PID/status), read while it runs: wait4's ru_maxrss
    is not usable here, because Linux carries the parent's high-water mark across fork and exec,
    so a child of this Python process (torch and the model loaded: 1.4-3.3 GB) reported that
    instead of its own (2026-11-27: 'peak/file 6.57' for GPT-2, which was Python's RSS)."""
    t0 = time.perf_counter()
    hwm = 0
    with open(log_path, "w") as lf:
        p = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT)
        deadline = t0 + timeout
        while True:
            try:
                with open(f"/proc/{p.pid}/status") as st:
                    for line in st:
                        if line.startswith("VmHWM:"):
                            hwm = max(hwm, int(line.split()[1]) * 1024)
            except (OSError, ValueError):
                pass
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                p.kill()
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.005)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    with open(log_path) as lf:
        text = lf.read()
    return p.returncode, wall, hwm or ru.ru_maxrss * 1024, text


def minic_time(text):
    for line in text.splitlines():
        if line.startswith("time:"):
            v, unit = line.split()[1:3]
            return float(v) / (1000.0 if unit == "us" else 1.0) if unit in ("us", "ms") else float(v) * 1e3
    return None


def minic_compile_ms(text):
    for line in text.splitlines():
        if "compiled in" in line:
            tail = line.split("compiled in", 1)[1].split()
            return float(tail[0]) * (1000.0 if tail[1].startswith("s") else 1.0)
    return None


# ---- one model ---------------------------------------------------------------------------------

def one(name, a, torch, np, ort):
    d = os.path.join(a.work, name)     # the model and its inputs (large: not under --out)
    logs = os.path.join(a.out, name)   # logs and small results
    os.makedirs(d, exist_ok=True)
    os.makedirs(logs, exist_ok=True)
    r = {"model": name}
    module, inputs, out_name, origin = make_model(name, torch, a.seq)
    r["origin"] = origin
    path = os.path.join(d, "model.onnx")
    t0 = time.perf_counter()
    with torch.no_grad():
        r["export"] = export(torch, module, inputs, out_name, path)
    r["export_s"] = time.perf_counter() - t0
    r["file_bytes"] = folder_size(d)
    log(f"{name}: exported ({r['export']}, {r['file_bytes'] / 1e6:.1f} MB, {r['export_s']:.1f} s)")
    args = []
    for k, v in inputs.items():
        f = os.path.join(d, f"{k}.npy")
        np.save(f, v.numpy())
        args += ["--input", f"{k}={f}"]

    # PyTorch on the GPU (TF32 off, as minic's f32 matmuls), eager and compiled
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    mod = module.to(dev)
    xs = [v.to(dev) for v in inputs.values()]
    sync = torch.cuda.synchronize if dev == "cuda" else None
    with torch.no_grad():
        ref = mod(*xs).float().cpu().numpy()
        r["torch_eager_ms"] = timed(lambda: mod(*xs), a.iters, sync)
        if name in a.compile.split(","):
            try:
                t0 = time.perf_counter()
                cm = torch.compile(mod)
                cm(*xs)
                r["torch_compile_first_s"] = time.perf_counter() - t0
                r["torch_compile_ms"] = timed(lambda: cm(*xs), a.iters, sync)
                r["torch_compile_err"] = errors(cm(*xs).float().cpu().numpy(), ref)
            except Exception as e:
                r["torch_compile_ms"] = f"failed: {type(e).__name__}: {str(e)[:200]}"
    log(f"{name}: torch eager {r['torch_eager_ms']:.3f} ms, compile {r.get('torch_compile_ms')}")

    mod.cpu()
    del mod, xs

    # ONNX Runtime
    if ort is not None:
        provs = ort.get_available_providers()
        use = ["CUDAExecutionProvider", "CPUExecutionProvider"] if "CUDAExecutionProvider" in provs \
            else ["CPUExecutionProvider"]
        try:
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            s = ort.InferenceSession(path, so, providers=use)
            feed = {k: v.numpy() for k, v in inputs.items()}
            ort_out = s.run(None, feed)[0]
            r["ort_provider"] = s.get_providers()[0]
            r["ort_ms"] = timed(lambda: s.run(None, feed), a.iters)
            r["ort_vs_torch"] = errors(ort_out, ref)
        except Exception as e:
            r["ort_ms"] = f"failed: {type(e).__name__}: {str(e)[:200]}"
            ort_out = None
        log(f"{name}: ORT ({r.get('ort_provider')}) {r['ort_ms']}")
    else:
        ort_out = None

    # minic: import alone (memory and time), then the run
    rc, wall, rss, text = run_child([a.minic, "check", path], os.path.join(logs, "minic_check.log"), 120)
    r["import_rc"], r["import_s"], r["import_peak_bytes"] = rc, wall, rss
    r["import_x_file"] = rss / max(r["file_bytes"], 1)
    log(f"{name}: minic check: exit {rc}, {wall:.2f} s, peak {rss / 1e6:.0f} MB "
        f"({r['import_x_file']:.2f}x the file)")
    if rc != 0:
        r["minic_error"] = "\n".join(l for l in text.splitlines() if "minic" in l)[:1500]
    out_npy = os.path.join(d, "minic_out.npy")
    cmd = [a.minic, "run", path, "--backend", a.backend, *args, "--output", out_npy, "--iters", str(a.iters)]
    rc, wall, rss, text = run_child(cmd, os.path.join(logs, "minic_run.log"), 240)
    r["minic_rc"], r["minic_run_wall_s"], r["minic_run_peak_bytes"] = rc, wall, rss
    if rc == 0 and os.path.exists(out_npy):
        out = np.load(out_npy)
        r["minic_ms"] = minic_time(text)
        r["minic_compile_ms"] = minic_compile_ms(text)
        r["minic_vs_torch"] = errors(out, ref)
        if ort_out is not None:
            r["minic_vs_ort"] = errors(out, ort_out)
        # the per-kernel profile, for the record
        run_child(cmd[:-2] + ["--iters", "10", "--profile"], os.path.join(logs, "minic_profile.log"), 240)
    else:
        r["minic_error"] = "\n".join(text.splitlines()[-40:])[:3000]
    log(f"{name}: minic exit {rc}: {r.get('minic_ms')} ms, vs torch {r.get('minic_vs_torch')}")
    return r


def fmt(v, spec=".3f"):
    if v is None:
        return "-"
    if isinstance(v, str):
        return v.replace("|", "/")[:80]
    return format(v, spec)


def table(rows, a):
    L = ["# ONNX models through minic (bench/onnx/models.py)", "",
         f"backend `{a.backend}`, f32, batch 1, medians of {a.iters} runs after warm-ups; "
         "errors against PyTorch on the same GPU (TF32 off). rel_norm: ||out - ref|| / ||ref|| "
         "(docs/FORMAT.md §6: <= 1e-4 with matmuls); max_rel: max |out - ref| / max |ref|.", ""]
    L += ["| model | exporter | minic ms | compile ms | torch eager ms | torch.compile ms | ORT ms (provider) "
          "| minic vs torch: max_abs / max_rel / rel_norm | minic vs ORT: max_abs / rel_norm | ORT vs torch rel_norm |",
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        e = r.get("minic_vs_torch") or {}
        o = r.get("minic_vs_ort") or {}
        ot = r.get("ort_vs_torch") or {}
        if "error" in e:
            mt = e["error"]
        elif e:
            mt = f"{e['max_abs']:.2e} / {e['max_rel']:.2e} / {e['rel_norm']:.2e}"
        else:
            mt = f"minic failed (exit {r.get('minic_rc')})"
        mo = f"{o['max_abs']:.2e} / {o['rel_norm']:.2e}" if "rel_norm" in o else "-"
        L.append(f"| {r['model']} ({r.get('origin', '?')}) | {fmt(r.get('export'))} | {fmt(r.get('minic_ms'))} "
                 f"| {fmt(r.get('minic_compile_ms'), '.0f')} | {fmt(r.get('torch_eager_ms'))} "
                 f"| {fmt(r.get('torch_compile_ms'))} | {fmt(r.get('ort_ms'))} ({r.get('ort_provider', '-')}) "
                 f"| {mt} | {mo} | {fmt(ot.get('rel_norm'), '.2e')} |")
    L += ["", "## Import (`minic check MODEL.onnx`, its own process)", "",
          "| model | file MB | exit | wall s (target <= 2) | peak RSS MB | peak / file (target <= 2) |",
          "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if "import_s" in r:
            L.append(f"| {r['model']} | {r['file_bytes'] / 1e6:.1f} | {r['import_rc']} | {r['import_s']:.2f} "
                     f"| {r['import_peak_bytes'] / 1e6:.0f} | {r['import_x_file']:.2f} |")
    for r in rows:
        if r.get("minic_error"):
            L += ["", f"### {r['model']}: minic's messages", "", "```", r["minic_error"], "```"]
        if r.get("failed"):
            L += ["", f"### {r['model']}: failed", "", "```", r["failed"], "```"]
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minic", default=os.environ.get("MINIC_BIN", "build-gpu/minic"))
    ap.add_argument("--out", default=os.environ.get("OUT", "onnx-models-out"))
    ap.add_argument("--models", default="resnet18,gpt2,gpt2e")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--work", default=os.environ.get("ONNX_WORK", "/tmp/onnx_models"),
                    help="where the exported models go (GPT-2: ~500 MB each)")
    ap.add_argument("--compile", default="resnet18,gpt2",
                    help="models also timed under torch.compile (~30-60 s each; '' for none)")
    a = ap.parse_args()
    a.minic = os.path.abspath(a.minic)
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    import numpy as np
    import torch
    try:
        import onnxruntime as ort
    except Exception as e:
        log(f"no onnxruntime ({e})")
        ort = None
    log(f"torch {torch.__version__}, cuda {torch.cuda.is_available()}, "
        f"ort {getattr(ort, '__version__', None)} {ort.get_available_providers() if ort else ''}, minic {a.minic}")
    rows = []
    for name in a.models.split(","):
        done = {r["model"]: r for r in rows}
        if name == "gpt2e" and "rel_norm" in (done.get("gpt2", {}).get("minic_vs_torch") or {}):
            log("gpt2e: skipped (gpt2 from input_ids ran through minic)")
            continue
        try:
            rows.append(one(name, a, torch, np, ort))
        except Exception as e:
            import traceback
            rows.append({"model": name, "failed": traceback.format_exc()[-2000:]})
            log(f"{name}: FAILED {type(e).__name__}: {e}")
        with open(os.path.join(a.out, "onnx_models.json"), "w") as f:
            json.dump(rows, f, indent=1, default=str)
        with open(os.path.join(a.out, "onnx_models.md"), "w") as f:
            f.write(table(rows, a))
    print(table(rows, a))


if __name__ == "__main__":
    main()
