#!/usr/bin/env python3
"""Where PyTorch's time goes in ResNet-18 f16 at batch N (channels-last, cudnn.benchmark on):
the CUDA kernels of one forward pass under torch.profiler, grouped by name, sorted by total time.
The per-kernel peer of `minic run --profile` for issue 20's ResNet target:

    python3 bench/onnx/torch_resnet_kernels.py [--batch 32] [--iters 20]
"""
import argparse
import torch, torchvision


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    m = torchvision.models.resnet18().eval().half().cuda().to(memory_format=torch.channels_last)
    x = torch.randn(a.batch, 3, 224, 224, device="cuda", dtype=torch.half).to(memory_format=torch.channels_last)
    with torch.no_grad():
        for _ in range(10):
            m(x)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
            for _ in range(a.iters):
                m(x)
            torch.cuda.synchronize()
    rows = {}
    for e in p.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            r = rows.setdefault(e.name, [0, 0.0])
            r[0] += 1
            r[1] += e.device_time
    total = sum(t for _, t in rows.values()) / a.iters
    print(f"torch eager channels-last f16 B={a.batch}: {total:.1f} us of kernels per forward")
    for name, (n, t) in sorted(rows.items(), key=lambda kv: -kv[1][1])[:30]:
        print(f"{t / a.iters:9.1f} us {n // a.iters:3d}x  {name[:110]}")


if __name__ == "__main__":
    main()
