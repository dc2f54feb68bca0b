#!/usr/bin/env python3
"""ResNet-18 in f16 at batch 32 (224x224) and one conv + bias + relu layer of its shapes, minic
beside PyTorch eager and torch.compile (channels-last), on the GPU machine (issue 20's targets):

    python3 bench/onnx/resnet_gpu.py --minic build-gpu/minic [--work DIR] [--batch 32] [--iters 30]
                                     [--dtype f16|bf16]

torchvision's resnet18 (random init, seed 0, batchnorm statistics drawn so the folds matter),
eval, in f16, exported to ONNX (TorchScript exporter, opset 17) and run by `minic run --backend
cuda --iters N` (its median of CUDA-event-timed graph replays). PyTorch: the same module in f16
(NCHW eager, channels-last eager, channels-last torch.compile in its default mode and with
mode="reduce-overhead", i.e. CUDA graphs), timed with CUDA events around 5 calls back to back
(median of N such samples after warm-up). Errors: relative norm against the float64 model
on the same input. The layer: conv 64 -> 64, 3x3, padding 1 over [32, 64, 56, 56] with bias and relu, written as a
.graph. Prints one table per part.

--dtype bf16: ONNX's Conv takes no bfloat16, so minic runs ResNet-18's `.graph` twin instead
(bench/models/resnet18_graph.py: the same layers, its own seeded weights, batchnorms folded
into the convs when the params are bound) and PyTorch the same torchvision module in bf16;
minic's error column is then left out (other weights), its bf16 convs being checked by the
tests (test_ops_shape's conv rows).
"""
import argparse, os, re, statistics, subprocess, sys


def cuda_time(fn, iters, rep=5):
    """Median over iters samples of the time per call, each sample `rep` calls back to back
    between two CUDA events: the GPU's queue stays full, so Python's launch time between calls
    does not count where the GPU is the slower side (with one call per sample, two GPU calls
    of 2026-11-28 gave 941 and 1610 us for the same torch.compile)."""
    import torch
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(rep):
            fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) * 1000.0 / rep)
    return statistics.median(ts)


def minic_time(minic, args, env=None):
    r = subprocess.run([minic, "run"] + args, capture_output=True, text=True, timeout=300, env=env)
    m = re.search(r"^time: ([0-9.]+) us", r.stdout + r.stderr, re.M)
    if r.returncode != 0 or not m:
        print((r.stdout + r.stderr)[-1500:], flush=True)
        return float("nan")
    return float(m.group(1))


def rel(a, b):
    import numpy as np
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def export(work, batch):
    """torchvision's resnet18 as above, in f16, exported to work/resnet18_f16.onnx with its input
    in work/x.npy; returns (the f32 module, the f16 module, the f16 input, the float64 output)."""
    import numpy as np
    import torch
    import torchvision
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    m = torchvision.models.resnet18(weights=None).eval()
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.1, 0.1)
            mod.running_var.uniform_(0.5, 1.5)
    x = torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = m.double()(x.double()).numpy()
    m = m.float()
    mh = m.half()
    xh = x.half()
    torch.onnx.export(mh, (xh,), os.path.join(work, "resnet18_f16.onnx"), input_names=["input"],
                      output_names=["output"], opset_version=17, dynamo=False)
    np.save(os.path.join(work, "x.npy"), xh.numpy())
    return m, mh, xh, ref


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minic", default="build-gpu/minic")
    ap.add_argument("--work", default="/tmp/resnet_gpu")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--dtype", default="f16", choices=["f16", "bf16"])
    a = ap.parse_args()
    import numpy as np
    import torch
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    m, mh, xh, ref = export(a.work, a.batch)
    out_npy = os.path.join(a.work, "out.npy")
    if a.dtype == "f16":
        path = os.path.join(a.work, "resnet18_f16.onnx")
        t_minic = minic_time(a.minic, [path, "--backend", "cuda", "--iters", str(a.iters), "--quiet",
                                       "--input", "input=" + os.path.join(a.work, "x.npy"), "--output", out_npy])
        err_minic = rel(np.load(out_npy), ref) if os.path.exists(out_npy) else float("nan")
    else:
        twin = os.path.join(a.work, "bf16")
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run([sys.executable, os.path.join(here, "..", "models", "resnet18_graph.py"), twin,
                        "--batch", str(a.batch), "--dtype", "bf16"], check=True, capture_output=True)
        t_minic = minic_time(a.minic, [os.path.join(twin, "resnet18.graph"), "--weights",
                                       os.path.join(twin, "weights.safetensors"), "--backend", "cuda",
                                       "--iters", str(a.iters), "--quiet"])
        err_minic = float("nan")
        mh, xh = m.bfloat16(), xh.float().bfloat16()
    dt, tdt = a.dtype, (torch.float16 if a.dtype == "f16" else torch.bfloat16)
    dev = torch.device("cuda")
    mg = mh.to(dev)
    xg = xh.to(dev)
    with torch.no_grad():
        err_torch = rel(mg(xg).float().cpu().numpy(), ref)
        t_eager = cuda_time(lambda: mg(xg), a.iters)
        mcl = mg.to(memory_format=torch.channels_last)
        xcl = xg.to(memory_format=torch.channels_last)
        t_cl = cuda_time(lambda: mcl(xcl), a.iters)
        comp = torch.compile(mcl)
        t_comp_default = cuda_time(lambda: comp(xcl), a.iters)
        # mode="reduce-overhead": the same kernels replayed as a CUDA graph, as minic replays
        comp_ro = torch.compile(mcl, mode="reduce-overhead")
        t_comp_ro = cuda_time(lambda: comp_ro(xcl), a.iters)
        t_comp = min(t_comp_default, t_comp_ro)
    name = torch.cuda.get_device_name()
    print(f"ResNet-18 {dt}, batch {a.batch}, 224x224, {name}, times in us (medians of {a.iters})"
          + ("" if dt == "f16" else "; minic runs the .graph twin (other weights: no error column)"))
    print("| minic | torch eager NCHW | torch eager channels-last | torch.compile channels-last | "
          f"torch.compile reduce-overhead | minic / best compile | minic error | torch {dt} error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    print(f"| {t_minic:.1f} | {t_eager:.1f} | {t_cl:.1f} | {t_comp_default:.1f} | {t_comp_ro:.1f} | "
          f"{t_minic / t_comp:.2f}x | {err_minic:.2e} | {err_torch:.2e} |", flush=True)

    # one conv + bias + relu layer of ResNet's shapes
    B, C, H = a.batch, 64, 56
    g = os.path.join(a.work, "conv.graph")
    with open(g, "w") as f:
        f.write(f"graph conv_layer\ninput x : {dt}[{B}, {C}, {H}, {H}]\nparam w : {dt}[{C}, {C}, 3, 3]\n"
                f"param b : {dt}[{C}]\nc = conv(x, w, b, padding=[1, 1])\ny = relu(c)\noutput y\n")
    t_layer = minic_time(a.minic, [g, "--backend", "cuda", "--iters", str(a.iters), "--quiet"])
    conv = torch.nn.Conv2d(C, C, 3, padding=1).to(tdt).to(dev).to(memory_format=torch.channels_last)
    xl = torch.randn(B, C, H, H, device=dev, dtype=tdt).to(memory_format=torch.channels_last)
    with torch.no_grad():
        f = lambda: torch.relu(conv(xl))
        t_l_eager = cuda_time(f, a.iters)
        fc = torch.compile(f)
        t_l_comp = cuda_time(fc, a.iters)
        fro = torch.compile(f, mode="reduce-overhead")
        t_l_ro = cuda_time(fro, a.iters)
    print(f"conv 64->64 3x3 pad 1 + bias + relu, [{B}, {C}, {H}, {H}] {dt}")
    print("| minic | torch eager channels-last | torch.compile channels-last | torch.compile reduce-overhead | minic / best torch |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| {t_layer:.1f} | {t_l_eager:.1f} | {t_l_comp:.1f} | {t_l_ro:.1f} | "
          f"{t_layer / min(t_l_eager, t_l_comp, t_l_ro):.2f}x |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
