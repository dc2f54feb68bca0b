#!/usr/bin/env python3
"""The embedding of bench/gpu/embedding*.graph beside PyTorch, and the floor both are held to.

    python3 bench/gpu/embedding_peer.py [--minic build-gpu/minic] [--iters N]

For f32 and f16: GPT-2's token embedding (50257 x 768) of 4096 ids (B=4, T=1024) plus the
position embedding (1024 x 768). PyTorch: F.embedding(ids, wte) + wpe[pos] (eager, then
torch.compile), median of N calls each timed by CUDA events. minic: `minic run GRAPH --backend
cuda --iters N --profile-json`, the kernel's own time. The floor: bytes moved (4096 token rows
read, 1024 position rows read, 4096 rows written, the ids) over the copy bandwidth a
device-to-device copy reaches in the same run (issue 20's target: >= 80% of it).
"""
import argparse, json, os, subprocess, sys, tempfile

import torch
import torch.nn.functional as F

B, T, V, D = 4, 1024, 50257, 768


def median_us(fn, iters):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0)
    times.sort()
    return times[len(times) // 2]


def copy_bandwidth(iters):
    x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    us = median_us(lambda: y.copy_(x), iters)
    return 2 * x.numel() / (us * 1e-6)  # bytes read + written per second


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minic", default="build-gpu/minic")
    ap.add_argument("--iters", type=int, default=200)
    a = ap.parse_args()
    bw = copy_bandwidth(a.iters)
    print(f"device-to-device copy: {bw / 1e12:.2f} TB/s (read + write)")
    here = os.path.dirname(os.path.abspath(__file__))
    result = {"copy_bytes_per_s": bw}
    for name, dt in (("embedding", torch.float32), ("embedding_f16", torch.float16)):
        es = torch.finfo(dt).bits // 8
        moved = (B * T * D + T * D + B * T * D) * es + B * T * 4
        floor_us = moved / bw * 1e6
        ids = torch.randint(0, V, (B, T), device="cuda", dtype=torch.int32)
        wte = torch.randn(V, D, device="cuda", dtype=dt)
        wpe = torch.randn(T, D, device="cuda", dtype=dt)
        pos = torch.arange(T, device="cuda")
        eager = lambda: F.embedding(ids, wte) + wpe[pos]
        compiled = torch.compile(eager)
        t_eager = median_us(eager, a.iters)
        t_comp = median_us(compiled, a.iters)
        with tempfile.TemporaryDirectory() as tmp:
            pj = os.path.join(tmp, "p.json")
            subprocess.run([a.minic, "run", os.path.join(here, name + ".graph"), "--backend", "cuda", "--quiet",
                            "--iters", str(a.iters), "--profile-json", pj], check=True, stdout=subprocess.DEVNULL)
            prof = json.load(open(pj))
        t_minic = sum(k["time_us"] for k in prof["kernels"])
        row = {"floor_us": floor_us, "minic_us": t_minic, "eager_us": t_eager, "compile_us": t_comp,
               "minic_pct_of_copy_bw": 100 * floor_us / t_minic, "kernels": len(prof["kernels"])}
        result[name] = row
        print(f"{name}: floor {floor_us:.1f} us ({moved / 1e6:.1f} MB) | minic {t_minic:.1f} us "
              f"({row['minic_pct_of_copy_bw']:.0f}% of copy bandwidth, {row['kernels']} kernel(s)) | "
              f"eager {t_eager:.1f} us | torch.compile {t_comp:.1f} us")
    print("JSON " + json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
