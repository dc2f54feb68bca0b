#!/usr/bin/env python3
"""The GPT-2 block of bench/gpu/gpt2_block*.graph in float64 (PyTorch, on the GPU when there is
one), from the inputs and params a minic run used (`minic run --save-inputs FILE`), against
minic's outputs (`--output`): relative norm ||out - ref|| / ||ref|| per output file, docs/FORMAT.md §6's
measure. For the tensor-parallel runs of issue 24: the one-GPU run and each --devices N run
against the same oracle.

    python3 bench/tp/check_block.py INPUTS.safetensors HEADS OUT1.npy [OUT2.npy ...]
"""
import sys

import numpy as np
import torch
from safetensors.torch import load_file


def f64(a):
    if a.dtype == np.uint16:  # bf16 as written by minic: the high half of an f32
        a = (a.astype(np.uint32) << 16).view(np.float32)
    return torch.from_numpy(a.astype(np.float64))


def block(t, H):
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    g = {k: v.double().to(dev) for k, v in t.items()}
    x = g["x"]
    B, T, C = x.shape
    ln = lambda v, w, b: torch.nn.functional.layer_norm(v, (C,), w, b, 1e-5)
    h = ln(x, g["ln1.w"], g["ln1.b"])
    qkv = h @ g["attn.w"].T + g["attn.b"]
    q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B, T, H, C // H).transpose(1, 2) for i in range(3))
    s = (q @ k.transpose(-1, -2)) * (C // H) ** -0.5
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool, device=dev).tril(), float("-inf"))
    y = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
    x1 = x + y @ g["proj.w"].T + g["proj.b"]
    f = ln(x1, g["ln2.w"], g["ln2.b"]) @ g["fc.w"].T + g["fc.b"]
    return x1 + torch.nn.functional.gelu(f) @ g["out.w"].T + g["out.b"]


def main():
    t = load_file(sys.argv[1])
    ref = block(t, int(sys.argv[2])).cpu().numpy()
    for path in sys.argv[3:]:
        out = f64(np.load(path)).numpy()
        err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
        print(f"{path}: error vs float64 {err:.3g}{'' if np.isfinite(out).all() else ' (NaN or inf!)'}")


if __name__ == "__main__":
    main()
