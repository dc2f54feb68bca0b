#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on the shapes of bench/gpu/attention*.graph, once per
SDPA backend (flash, cuDNN, memory-efficient, math), so that minic's fused attention kernel is
compared with each in the same run on the same GPU.

    python3 bench/gpu/attention_peers.py [--iters N] [--json FILE]

Causal self-attention, scale 1/sqrt(D), q/k/v of shape [B, H, T, D] from torch.randn. Each
backend: 10 warm-up calls, then N calls each timed by its own pair of CUDA events; the median
is reported. TFLOP/s counts 4*D FLOPs per kept (q, k) pair (docs/FORMAT.md §5): causal keeps T(T+1)/2
pairs per (batch, head). A backend that does not support a shape or dtype prints its error.
Prints a table and a line `JSON {...}` (times in us).
"""
import argparse, json, sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [  # name (the graph's), B, H, T, D, dtype
    ("attention", 8, 12, 1024, 64, torch.float32),
    ("attention_bf16", 8, 12, 1024, 64, torch.bfloat16),
    ("attention_long_bf16", 1, 12, 4096, 64, torch.bfloat16),
]
BACKENDS = [
    ("flash", SDPBackend.FLASH_ATTENTION),
    ("cudnn", SDPBackend.CUDNN_ATTENTION),
    ("efficient", SDPBackend.EFFICIENT_ATTENTION),
    ("math", SDPBackend.MATH),
]


def causal_flops(B, H, T, D):
    return 4.0 * D * B * H * T * (T + 1) / 2


def time_us(fn, iters):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    t = sorted(a.elapsed_time(b) for a, b in ev)
    return t[len(t) // 2] * 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    res = {}
    print(f"{'workload':22} {'backend':10} {'median_us':>10} {'TFLOP/s':>8}")
    for name, B, H, T, D, dt in SHAPES:
        q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=dt) for _ in range(3))
        fl = causal_flops(B, H, T, D)
        res[name] = {"B": B, "H": H, "T": T, "D": D, "dtype": str(dt)[6:], "flops": fl}
        for bname, be in BACKENDS:
            try:
                with sdpa_kernel(be), torch.no_grad():
                    f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    f()
                    us = time_us(f, args.iters)
                res[name][bname] = round(us, 2)
                print(f"{name:22} {bname:10} {us:10.1f} {fl / us / 1e6:8.1f}", flush=True)
            except Exception as e:  # backend unsupported for this shape/dtype, or out of memory
                msg = str(e).splitlines()[0][:100] if str(e) else type(e).__name__
                print(f"{name:22} {bname:10} {'-':>10} {'-':>8}  ({msg})", flush=True)
                torch.cuda.empty_cache()
    line = json.dumps(res)
    print("JSON " + line)
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(line + "\n")


if __name__ == "__main__":
    sys.exit(main())
