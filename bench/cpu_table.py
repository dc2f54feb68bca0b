#!/usr/bin/env python3
"""One table from bench/cpu_bench.sh's lines: minic beside PyTorch and ONNX Runtime (medians
across the script's repeats, each tool timed by its own timer in the same run), the ratio to
the better peer, and the memory floor.

    python3 bench/cpu_table.py CPU_BENCH_OUTPUT.txt      (bench/cpu_bench.sh runs it last)

floor = the larger of the bytes minic's compiled program moves (its profile) / the copy
bandwidth and its FLOPs / the FMA rate, both measured by `minic peaks` in the same run (a
roofline floor: memory for pointwise, layernorm and softmax, arithmetic for the GEMMs); "x
floor" is minic's time over it. A ratio below 1 means minic is faster. The script measures the
ceilings at the start of every repeat; each repeat's time is divided by the floor from the
ceilings measured just before it, and "x floor" is the median of those ratios ("floor" the
median floor). On a shared machine the memory bandwidth moves by a fifth between minutes
(another tenant), and it moves the times of memory-bound kernels with it: comparing a time
with a ceiling measured at another moment would add that noise to the ratio.
"""
import json, re, statistics, sys

PEER_KEY = {
    "pointwise": "pointwise_f32_4096x4096",
    "layernorm": "layernorm_f32_4096x4096",
    "softmax": "softmax_f32_4096x4096",
    "mlp": "mlp_f32_512x1024x4096",
    "small_mlp": "small_mlp_f32_32x256_4layers",
}


def med(xs):
    return statistics.median(xs) if xs else None


def fmt(x, unit=1.0):
    return "-" if x is None else f"{x / unit:.3g}" if x / unit < 100 else f"{x / unit:.0f}"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    minic, torch, ort, work = {}, {}, {}, {}
    copy = fma = None
    copies, fmas = [], []
    paired = {}  # workload -> [(time, copy rate, FMA rate measured before it)]
    gemm = []
    extra = []
    for line in open(sys.argv[1]):
        line = line.rstrip("\n")
        if line.startswith("CPU: times in us"):
            break  # a table printed before (the script's own): parsed already
        if m := re.match(r"minic (\w+): ([0-9.]+) us", line):
            minic.setdefault(m[1], []).append(float(m[2]))
            paired.setdefault(m[1], []).append((float(m[2]), copy, fma))
            if m[1] == "gemm2048":
                gemm.append(2 * 2048**3 / float(m[2]) / 1e3)
        elif m := re.match(r"peak copy: ([0-9.]+) GB/s", line):
            copy = float(m[1]) * 1e9
            copies.append(copy)
        elif m := re.match(r"peak fma: ([0-9.]+) GFLOP/s", line):
            fma = float(m[1]) * 1e9
            fmas.append(fma)
        elif m := re.match(r"work (\w+): (\d+) flops (\d+) bytes", line):
            work[m[1]] = (int(m[2]), int(m[3]))
        elif line.startswith(("torch: {", "onnxruntime: {")):
            name, _, text = line.partition(": ")
            for k, v in json.loads(text).items():
                (torch if name == "torch" else ort).setdefault(k, []).append(float(v))
        elif line.startswith("mlp example"):
            extra.append(line)
    print("CPU: times in us (medians across repeats); ratio = minic / better peer; "
          "floor = max(bytes / copy rate, FLOPs / FMA rate), both measured before each repeat; "
          "x floor = median over repeats of time / that repeat's floor")
    print(f"{'workload':11} {'minic':>9} {'torch':>9} {'ORT':>9} {'vs best':>8} "
          f"{'floor':>8} {'x floor':>8} {'GFLOP/s':>8}")
    for w, key in PEER_KEY.items():
        t = med(minic.get(w, []))
        pt, po = med(torch.get(key, [])), med(ort.get(key, []))
        best = min([p for p in (pt, po) if p is not None], default=None)
        flops, nbytes = work.get(w, (None, None))
        floors, ratios = [], []
        for tr, c, f in paired.get(w, []):
            fl = max(nbytes / c if nbytes and c else 0, flops / f if flops and f else 0) * 1e6
            if fl:
                floors.append(fl)
                ratios.append(tr / fl)
        floor, ratio = med(floors), med(ratios)
        rate = flops / t / 1e3 if flops and t else None
        print(f"{w:11} {fmt(t):>9} {fmt(pt):>9} {fmt(po):>9} "
              f"{'-' if t is None or best is None else f'{t / best:.2f}x':>8} "
              f"{fmt(floor):>8} {'-' if ratio is None else f'{ratio:.2f}x':>8} "
              f"{fmt(rate):>8}")
    g = med(gemm)
    tg = med(torch.get("sgemm_GFLOPs_torch", []))
    if g is not None:
        print(f"gemm 2048^2 f32: minic {g:.1f} GFLOP/s, PyTorch {fmt(tg)} GFLOP/s"
              + (f" ({g / tg:.2f}x PyTorch's)" if tg else "")
              + (f", {g / max(fmas) * 1e9:.0%} of the best measured FMA rate" if fmas else ""))
    if copies:
        print("ceilings (minic peaks, one measurement per repeat): copy "
              + ", ".join(f"{c / 1e9:.1f}" for c in copies) + " GB/s"
              + ("; f32 FMA " + ", ".join(f"{f / 1e9:.0f}" for f in fmas) + " GFLOP/s" if fmas else ""))
    for line in extra:
        print(line)


if __name__ == "__main__":
    main()
