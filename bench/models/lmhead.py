#!/usr/bin/env python3
"""The tied LM head of GPT-2 small, [M, 768] x [768, N], in PyTorch on the GPU: how N's alignment
changes cuBLAS's speed, and what padding costs (a padded GEMM, then the copy into the compact
output). Also the bf16 GEMM rate at 8192^3 (the ceiling the LM head is measured against).
Device timestamps after warm-up, medians; prints JSON lines.

    python3 bench/models/lmhead.py [--m 4096] [--k 768]
"""
import argparse, json
import torch


def med(fn, iters=30):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--k", type=int, default=768)
    a = ap.parse_args()
    M, K = a.m, a.k
    rows = []
    for dt in (torch.bfloat16, torch.float32):
        n = 8192
        x = torch.randn(n, n, device="cuda", dtype=dt); y = torch.randn(n, n, device="cuda", dtype=dt)
        us = med(lambda: x @ y, 10)
        rows.append(dict(what=f"gemm 8192^3 {dt}", us=us, tflops=2 * n ** 3 / us / 1e6))
        del x, y
        h = torch.randn(M, K, device="cuda", dtype=dt)
        for N in (50257, 50264, 50304):
            w = torch.randn(N, K, device="cuda", dtype=dt)
            us = med(lambda: h @ w.t())
            rows.append(dict(what=f"lmhead {dt} N={N}", us=us, tflops=2 * M * N * K / us / 1e6))
        N, NP = 50257, 50264
        w = torch.randn(N, K, device="cuda", dtype=dt)
        wp = torch.zeros(NP, K, device="cuda", dtype=dt); wp[:N] = w
        out = torch.empty(M, N, device="cuda", dtype=dt)
        pad = torch.empty(M, NP, device="cuda", dtype=dt)

        def padded_copy():
            torch.mm(h, wp.t(), out=pad)
            out.copy_(pad[:, :N])
        us = med(padded_copy)
        rows.append(dict(what=f"lmhead {dt} padded {NP} + copy to compact", us=us, tflops=2 * M * N * K / us / 1e6))
        us = med(lambda: out.copy_(pad[:, :N]))
        rows.append(dict(what=f"copy [{M},{NP}] -> [{M},{N}] {dt}", us=us, gbs=2 * M * N * out.element_size() / us / 1e3))
        for chunks in (4, 8, 16):
            mc = M // chunks
            pc = torch.empty(mc, NP, device="cuda", dtype=dt)

            def chunked():
                for i in range(chunks):
                    torch.mm(h[i * mc:(i + 1) * mc], wp.t(), out=pc)
                    out[i * mc:(i + 1) * mc].copy_(pc[:, :N])
            us = med(chunked)
            rows.append(dict(what=f"lmhead {dt} padded, {chunks} M-chunks through an L2-sized scratch", us=us,
                             tflops=2 * M * N * K / us / 1e6))
        # split N: the aligned part (N rounded down to 8) and the tail, both written compact
        N8 = N // 8 * 8

        def split_n():
            out[:, :N8].copy_(h @ w[:N8].t())
            out[:, N8:].copy_(h @ w[N8:].t())
        us = med(split_n)
        rows.append(dict(what=f"lmhead {dt} split N {N8}+{N - N8} (with copies)", us=us, tflops=2 * M * N * K / us / 1e6))
        del h, w, wp, out, pad
        torch.cuda.empty_cache()
    for r in rows:
        print("JSON " + json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
