#!/usr/bin/env python3
"""torchvision's ResNet-18 through minic on the host backends (ref, cpu), beside PyTorch.

    python3 bench/onnx/resnet18.py [--minic build-rel/minic] [--backends ref,cpu]
                                   [--iters 5] [--ref-iters 1] [--threads 2]
                                   [--work /tmp/onnx_resnet18] [--out FILE.md]

The model is bench/onnx/models.py's (torchvision's resnet18(weights=None), seed 0, random
batch-norm statistics, eval mode; the network built by hand where torchvision is missing, said
in the table), input [1, 3, 224, 224]. It is exported by the TorchScript exporter at opset 13,
at opset 17, and at opset 17 with a dynamic batch axis (dim_param "batch": imported as a
symbolic dimension, run at batch 1 and 2 by the same import). Each is run by `minic run
--backend B --iters N` (the median per run after a warm-up, and the compile time; ref: --ref-iters) and its output
compared with PyTorch's in float64 (the reference of docs/FORMAT.md §6: relative norm, target
<= 1e-4 with matmuls) and in float32 (max abs error). PyTorch eager's f32 time on the CPU and,
where $ORT names onnxruntime-node (ORT=<dir>/node_modules/onnxruntime-node), ONNX Runtime's CPU
provider on the opset-17 file (bench/cpu/ort_gpt2.js) are beside, with --threads threads as
minic's cpu backend. Writes the table to stdout and to --out when given.
Needs python3-torch; torchvision (Debian's python3-torchvision) is optional.
"""
import argparse, os, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models as gm  # noqa: E402  (bench/onnx/models.py: the model, errors, timing helpers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minic", default=os.environ.get("MINIC_BIN", "build-rel/minic"))
    ap.add_argument("--backends", default="ref,cpu")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--ref-iters", type=int, default=1, help="iterations on ref (~30 s a run at B=1)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", default="/tmp/onnx_resnet18")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    a.minic = os.path.abspath(a.minic)
    import numpy as np
    import torch
    torch.set_num_threads(a.threads)
    os.makedirs(a.work, exist_ok=True)
    module, inputs, _, origin = gm.make_model("resnet18", torch, 0)
    x1 = inputs["input"]
    x2 = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ref64 = {1: module.double()(x1.double()).numpy(), 2: module(x2.double()).numpy()}
        module.float()
        ref32 = {1: module(x1).numpy(), 2: module(x2).numpy()}
        eager_ms = gm.timed(lambda: module(x1), a.iters)
    files = {}
    for b, x in ((1, x1), (2, x2)):
        files[b] = os.path.join(a.work, f"input_b{b}.npy")
        np.save(files[b], x.numpy())
    variants = [("opset13", 13, None), ("opset17", 17, None), ("opset17_dynamic_batch", 17, {0: "batch"})]
    rows = []
    for name, opset, dyn in variants:
        path = os.path.join(a.work, f"resnet18_{name}.onnx")
        axes = {"input": dyn, "output": dyn} if dyn else None
        with torch.no_grad():
            torch.onnx.export(module, (x1,), path, opset_version=opset, input_names=["input"],
                              output_names=["output"], dynamic_axes=axes)
        gm.log(f"{name}: exported")
        for backend in a.backends.split(","):
            for b in ((1, 2) if dyn else (1,)):
                out = os.path.join(a.work, f"out_{name}_{backend}_b{b}.npy")
                cmd = [a.minic, "run", path, "--backend", backend, "--threads", str(a.threads),
                       "--input", f"input={files[b]}",
                       "--output", out, "--iters", str(a.ref_iters if backend == "ref" else a.iters)]
                rc, wall, rss, text = gm.run_child(cmd, os.path.join(a.work, f"{name}_{backend}_b{b}.log"), 3600)
                r = {"variant": name, "backend": backend, "batch": b, "rc": rc}
                if rc == 0:
                    o = np.load(out)
                    r["ms"] = gm.minic_time(text)
                    r["compile_ms"] = gm.minic_compile_ms(text)
                    r["vs64"] = gm.errors(o, ref64[b])
                    r["vs32"] = gm.errors(o, ref32[b])
                else:
                    r["error"] = text.strip().splitlines()[-1:] if text.strip() else ["(no output)"]
                gm.log(f"{name} {backend} B={b}: {r}")
                rows.append(r)
    ort_line = "ONNX Runtime: not run ($ORT unset)."
    if os.environ.get("ORT"):
        d = os.path.join(a.work, "ort")
        os.makedirs(d, exist_ok=True)
        for f in ("model.onnx",):
            if os.path.lexists(os.path.join(d, f)):
                os.remove(os.path.join(d, f))
        os.symlink(os.path.join(a.work, "resnet18_opset17.onnx"), os.path.join(d, "model.onnx"))
        np.save(os.path.join(d, "input.npy"), x1.numpy())
        np.save(os.path.join(d, "expected.npy"), ref32[1])
        js = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cpu", "ort_gpt2.js")
        rc, _, _, text = gm.run_child(["node", js, d, str(a.threads), str(a.iters)], os.path.join(a.work, "ort.log"), 600)
        try:
            import json
            o = json.loads(text.strip().splitlines()[-1])
            ort_line = (f"ONNX Runtime ({o['peer']}, CPU provider, {o['threads']} threads, opset 17, B=1): median "
                        f"{o['median_ms']} ms (min {o['min_ms']}), relative error vs PyTorch f32 {o['rel_error_vs_torch']:.2e}.")
        except Exception:
            ort_line = f"ONNX Runtime failed (exit {rc}): {text.strip()[-200:]}"
        gm.log(ort_line)
    L = [f"# ResNet-18 ({origin}) through minic on the host, [B, 3, 224, 224] f32", "",
         f"minic `{a.minic}`; medians of {a.iters} runs (ref: {a.ref_iters}) after a warm-up (`minic run --iters`); "
         f"minic cpu and PyTorch {torch.__version__} eager f32 on the CPU with {a.threads} threads; PyTorch B=1: "
         f"{eager_ms:.1f} ms. Errors against PyTorch's float64 run (relative norm, docs/FORMAT.md §6: "
         "<= 1e-4) and its float32 run (max abs). " + ort_line, "",
         "| model | backend | B | minic ms | compile ms | rel. norm vs f64 | max abs vs f64 | max abs vs torch f32 |",
         "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r["rc"] != 0:
            L.append(f"| {r['variant']} | {r['backend']} | {r['batch']} | exit {r['rc']}: "
                     f"{' '.join(r['error'])[:100].replace('|', '/')} | | | | |")
            continue
        e64, e32 = r["vs64"], r["vs32"]
        L.append(f"| {r['variant']} | {r['backend']} | {r['batch']} | {gm.fmt(r['ms'], '.1f')} "
                 f"| {gm.fmt(r['compile_ms'], '.0f')} | {gm.fmt(e64.get('rel_norm', e64.get('error')), '.2e')} "
                 f"| {gm.fmt(e64.get('max_abs'), '.2e')} | {gm.fmt(e32.get('max_abs'), '.2e')} |")
    text = "\n".join(L) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    bad = [r for r in rows if r["rc"] != 0 or "rel_norm" not in r["vs64"] or r["vs64"]["rel_norm"] > 1e-4]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
