#!/usr/bin/env python3
"""The implicit-GEMM conv's variants timed in one GPU call (branch convnhwc): ResNet-18 f16 at
batch 32 (the ONNX export of resnet_gpu.py, its error against float64 checked for every variant),
the .graph twin with batchnorms folded at run time (bench/models/resnet18_graph.py), and single
conv layers of ResNet's shapes, each under the environment of every variant given:

    python3 bench/onnx/conv_variants.py --minic build-gpu/minic --out DIR [--iters 30]
        [--variant NAME=ENV,ENV ...]

A variant is a name and MINIC_* settings (none: the defaults). Prints one table (us, medians of
`minic run --iters N`) and writes DIR/variants.md, DIR/profile_NAME.txt (`minic run --profile` of
ResNet-18 by default and as before the chunks, "before")."""
import argparse, os, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resnet_gpu import export, minic_time, rel  # noqa: E402

# Since 19:10 the chunks, the channels-last stem and the scalar pool gathers are the defaults
# (H200 18:52: ResNet-18 1092.0 us against 1357.5 with all three off); "=0" turns each off.
VARIANTS = [  # the most wanted first (a time cap cuts the last); "+": the layers too
    ("default+", ""),
    ("before+", "MINIC_CUDA_CONV_KCHUNK=0,MINIC_CUDA_CONV_CLAST=0,MINIC_CUDA_GATHER_VEC=0"),
    ("no_clast", "MINIC_CUDA_CONV_CLAST=0"),
    ("no_gather_vec", "MINIC_CUDA_GATHER_VEC=0"),
    ("v4+", "MINIC_CUDA_CONV_BVEC=4"),
]

LAYERS = [  # name, x, w, attrs
    ("l1_3x3_64", "32, 64, 56, 56", "64, 64, 3, 3", "padding=[1, 1]"),
    ("l2_3x3_s2", "32, 64, 56, 56", "128, 64, 3, 3", "stride=[2, 2], padding=[1, 1]"),
    ("l2_3x3_128", "32, 128, 28, 28", "128, 128, 3, 3", "padding=[1, 1]"),
    ("l3_3x3_256", "32, 256, 14, 14", "256, 256, 3, 3", "padding=[1, 1]"),
    ("l4_3x3_512", "32, 512, 7, 7", "512, 512, 3, 3", "padding=[1, 1]"),
    ("ds_1x1_s2", "32, 128, 28, 28", "256, 128, 1, 1", "stride=[2, 2]"),
    ("stem_7x7", "32, 3, 224, 224", "64, 3, 7, 7", "stride=[2, 2], padding=[3, 3]"),
    # x given channels-last ([N, H, W, C] transposed): with MINIC_CUDA_CONV_CLAST=1 the kernel
    # loads 8 channels a cp.async (what a layout pass keeping activations NHWC would give)
    ("l1_nhwc", "32, 56, 56, 64", "64, 64, 3, 3", "padding=[1, 1]"),
    ("l3_nhwc", "32, 14, 14, 256", "256, 256, 3, 3", "padding=[1, 1]"),
    ("l4_nhwc", "32, 7, 7, 512", "512, 512, 3, 3", "padding=[1, 1]"),
]


def env_of(spec):
    e = dict(os.environ)
    for kv in filter(None, spec.split(",")):
        k, v = kv.split("=", 1)
        e[k] = v
    return e


def run(minic, args, spec):
    return minic_time(minic, args, env_of(spec))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minic", default="build-gpu/minic")
    ap.add_argument("--out", default="/tmp/conv_variants")
    ap.add_argument("--work", default="/tmp/conv_variants_work")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--variant", action="append", default=[])
    a = ap.parse_args()
    import numpy as np
    variants = [tuple(v.split(":", 1)) if ":" in v else (v, "") for v in a.variant] or VARIANTS
    os.makedirs(a.out, exist_ok=True)
    _, _, _, ref = export(a.work, 32)
    onnx = os.path.join(a.work, "resnet18_f16.onnx")
    xnpy = os.path.join(a.work, "x.npy")
    gdir = os.path.join(a.work, "graph")
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "../models/resnet18_graph.py"), gdir,
                    "--batch", "32", "--dtype", "f16"], check=True)
    for name, x, w, attrs in LAYERS:
        co = w.split(",")[0]
        xin = (f"input xh : f16[{x}]\nx = transpose(xh, perm=[0, 3, 1, 2])\n" if name.endswith("_nhwc")
               else f"input x : f16[{x}]\n")
        with open(os.path.join(a.work, name + ".graph"), "w") as f:
            f.write(f"graph {name}\n{xin}param w : f16[{w}]\nparam b : f16[{co}]\n"
                    f"c = conv(x, w, b, {attrs})\ny = relu(c)\noutput y\n")
    rows = []
    for vname, spec in variants:
        layers_too = vname.endswith("+")
        vname = vname.rstrip("+")
        out = os.path.join(a.work, f"out_{vname}.npy")
        if os.path.exists(out):
            os.remove(out)
        t = run(a.minic, [onnx, "--backend", "cuda", "--iters", str(a.iters), "--quiet", "--input", "input=" + xnpy,
                          "--output", out], spec)
        err = rel(np.load(out), ref) if os.path.exists(out) else float("nan")
        tg = run(a.minic, [os.path.join(gdir, "resnet18.graph"), "--weights", os.path.join(gdir, "weights.safetensors"),
                           "--backend", "cuda", "--iters", str(a.iters), "--quiet"], spec)
        layers = [run(a.minic, [os.path.join(a.work, n + ".graph"), "--backend", "cuda", "--iters", str(a.iters),
                                "--quiet"], spec) if layers_too else float("nan") for n, _, _, _ in LAYERS]
        if vname in ("default", "before"):  # (time: two profiles)
            r = subprocess.run([a.minic, "run", onnx, "--backend", "cuda", "--quiet", "--profile", "--input",
                                "input=" + xnpy], env=env_of(spec), capture_output=True, text=True, timeout=300)
            with open(os.path.join(a.out, f"profile_{vname}.txt"), "w") as f:
                f.write(r.stdout + r.stderr)
        rows.append((vname, spec, t, err, tg, layers))
        print(vname, spec, f"onnx {t:.1f} err {err:.2e} graph {tg:.1f}", " ".join(f"{v:.1f}" for v in layers), flush=True)
    head = ("| variant | env | ResNet-18 onnx | error vs f64 | ResNet-18 .graph | " + " | ".join(n for n, _, _, _ in LAYERS)
            + " |\n|" + " --- |" * (5 + len(LAYERS)) + "\n")
    body = "".join(f"| {v} | {s or '-'} | {t:.1f} | {e:.2e} | {g:.1f} | " + " | ".join(f"{x:.1f}" for x in ls) + " |\n"
                   for v, s, t, e, g, ls in rows)
    with open(os.path.join(a.out, "variants.md"), "w") as f:
        f.write(head + body)
    print(head + body)


if __name__ == "__main__":
    sys.exit(main())
