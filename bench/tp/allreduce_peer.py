#!/usr/bin/env python3
"""NCCL's own all-reduce figure, through PyTorch, on the sizes a tensor-parallel minic program
moves: one process per GPU, torch.distributed's all_reduce (sum) timed with CUDA events after a
warm-up, median of --iters. Prints per size: time, algorithm bandwidth (bytes / time) and bus
bandwidth (algbw * 2(n-1)/n, the figure nccl-tests reports), so minic's `collective` rows can be
read against it.

    python3 bench/tp/allreduce_peer.py --gpus 2 --sizes 8x1024x768,8x1024x4096 --dtype bf16
"""
import argparse, json, os, statistics, sys

os.environ["NCCL_NVLS_ENABLE"] = "0"  # no NVLink multicast on shared machines


def worker(rank, n, sizes, dtype, iters, port, q):
    import torch, torch.distributed as dist
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n,
                            device_id=torch.device("cuda", rank))
    dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dtype]
    out = []
    for shape in sizes:
        x = torch.randn(*shape, device="cuda", dtype=dt)
        for _ in range(5):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        t = []
        for _ in range(iters):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); dist.all_reduce(x); b.record(); b.synchronize()
            t.append(a.elapsed_time(b) * 1e3)
        us = statistics.median(t)
        nbytes = x.numel() * x.element_size()
        alg = nbytes / us / 1e3  # GB/s
        out.append({"shape": "x".join(map(str, shape)), "bytes": nbytes, "us": us, "algbw_GBs": alg,
                    "busbw_GBs": alg * 2 * (n - 1) / n})
    if rank == 0:
        q.put(out)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--sizes", default="8x1024x768,8x1024x4096")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--iters", type=int, default=50)
    a = ap.parse_args()
    import torch, torch.multiprocessing as mp
    sizes = [tuple(int(v) for v in s.split("x")) for s in a.sizes.split(",")]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = 29500 + os.getpid() % 1000
    procs = [ctx.Process(target=worker, args=(r, a.gpus, sizes, a.dtype, a.iters, port, q)) for r in range(a.gpus)]
    for p in procs:
        p.start()
    res = q.get(timeout=300)
    for p in procs:
        p.join()
    print(f"PyTorch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, {a.gpus} GPUs, {a.dtype}")
    print("| size | bytes | time µs | algbw GB/s | busbw GB/s |")
    print("| --- | --- | --- | --- | --- |")
    for r in res:
        print(f"| {r['shape']} | {r['bytes']} | {r['us']:.1f} | {r['algbw_GBs']:.1f} | {r['busbw_GBs']:.1f} |")
    print("JSON " + json.dumps(res))


if __name__ == "__main__":
    sys.exit(main())
