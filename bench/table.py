#!/usr/bin/env python3
"""One table: minic's fused/unfused medians (bench/gpu_bench.sh's output) beside the peers'
(../shared/peers/torch_gpu.py's JSON line, from the same run), with each ratio.

    python3 bench/table.py BENCH.txt TORCH.json [ATTENTION.json]      (scripts/gpu.sh runs it last)

ATTENTION.json: bench/gpu/attention_peers.py --json's output (PyTorch SDPA per backend on the
attention graphs' shapes); with it a second table gives minic's fused attention beside each
backend, in TFLOP/s of 4*D FLOPs per kept (q, k) pair.

A ratio below 1 means minic is faster. Workloads without a peer show '-'.
"""
import json, sys

PEER_KEY = {
    "pointwise": "pointwise_f32_8192x8192",
    "mlp": "mlp_float32_8192x1024x4096",
    "mlp_bf16": "mlp_bfloat16_8192x1024x4096",
    "layernorm": "layernorm_f32_8192x4096",
    "softmax": "softmax_f32_8192x4096",
    "small_mlp": "small_mlp_f32_32x256_4layers",
    "gpt2_block": "gpt2_block_f32_8x1024x768",
    "gpt2_block_bf16": "gpt2_block_bf16_8x1024x768",
}


def read_minic(path):
    times = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 3 and f[1] in ("fused", "unfused"):
            try:
                times.setdefault(f[0], {})[f[1]] = float(f[2])
            except ValueError:
                pass
    return times


def fmt(x):
    return "-" if x is None else f"{x:.1f}"


def ratio(a, b):
    return "-" if a is None or b is None or b <= 0 else f"{a / b:.2f}x"


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    minic = read_minic(sys.argv[1])
    text = open(sys.argv[2]).read().strip()
    peers = json.loads(text[len("JSON "):] if text.startswith("JSON ") else text) if text else {}
    print("times in us (medians); ratio = minic fused / peer")
    print(f"{'workload':18} {'fused':>9} {'unfused':>9} {'eager':>9} {'compile':>9} {'graphs':>9}"
          f" {'vs eager':>9} {'vs compile':>10} {'vs graphs':>9}")
    for name in sorted(minic):
        m = minic[name]
        p = peers.get(PEER_KEY.get(name, ""), {})
        e, c, r = p.get("eager"), p.get("compile"), p.get("ro")
        f = m.get("fused")
        print(f"{name:18} {fmt(f):>9} {fmt(m.get('unfused')):>9} {fmt(e):>9} {fmt(c):>9} {fmt(r):>9}"
              f" {ratio(f, e):>9} {ratio(f, c):>10} {ratio(f, r):>9}")
    if "copy_GBps" in peers:
        print(f"ceilings (PyTorch, same run): copy {peers['copy_GBps']:.0f} GB/s, "
              f"bf16 GEMM {peers.get('gemm_torch.bfloat16_TFLOPs', 0):.0f} TFLOP/s, "
              f"f32 GEMM {peers.get('gemm_torch.float32_TFLOPs', 0):.1f} TFLOP/s")
    if len(sys.argv) == 4:
        attention_table(minic, json.load(open(sys.argv[3])))


def attention_table(minic, sdpa):
    backends = ("flash", "cudnn", "efficient", "math")
    print("attention: times in us (TFLOP/s, causal half: 4*D per kept pair); ratio = minic fused / peer")
    print(f"{'workload':20} {'minic':>15}" + "".join(f" {b:>15}" for b in backends) +
          "".join(f" {'vs ' + b:>9}" for b in backends[:2]))
    for name in sorted(sdpa):
        p, f = sdpa[name], minic.get(name, {}).get("fused")
        tf = lambda us: "-" if us is None else f"{us:.1f} ({p['flops'] / us / 1e6:.0f})"
        print(f"{name:20} {tf(f):>15}" + "".join(f" {tf(p.get(b)):>15}" for b in backends) +
              "".join(f" {ratio(f, p.get(b)):>9}" for b in backends[:2]))


if __name__ == "__main__":
    main()
