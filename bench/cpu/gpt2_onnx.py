#!/usr/bin/python3
"""A decoder of GPT-2 small's sizes (12 layers, d_model 768, 12 heads, vocabulary 50257, context
1024; the GPT-2-style decoder of tests/onnx_models/models.py, erf GELU, tied LM head) exported
from PyTorch 1.13 (Debian's python3-torch) to ONNX at B=1, T=128, with its input ids and
PyTorch's logits beside it, for bench/cpu/gpt2_onnx.sh:

    /usr/bin/python3 bench/cpu/gpt2_onnx.py OUT_DIR [--seq 128] [--opset 13]

-> OUT_DIR/{model.onnx, input.npy (int64 ids), expected.npy (f32 logits)}. Random weights,
seed 0: nothing is downloaded. Hugging Face's GPT-2 is exported on the GPU machine instead
(bench/models/ort_gpt2.py); this one needs only Debian's packages.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "onnx_models"))
try:
    import numpy as np
    import torch
    from models import GPT
except ImportError as e:
    print(f"gpt2_onnx: needs python3-torch and python3-numpy ({e})", file=sys.stderr)
    sys.exit(77)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--opset", type=int, default=13)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    model = GPT(vocab=50257, ctx=1024, d=768, heads=12, layers=12).eval()
    for m in model.modules():  # GPT-2's initialisation scale: N(0, 0.02) weights
        if isinstance(m, (torch.nn.Linear, torch.nn.Embedding)):
            torch.nn.init.normal_(m.weight, 0.0, 0.02)
    ids = torch.randint(0, 50257, (1, a.seq), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        y = model(ids)
        torch.onnx.export(model, (ids,), os.path.join(a.out, "model.onnx"), opset_version=a.opset,
                          input_names=["input"], output_names=["output"])
    np.save(os.path.join(a.out, "input.npy"), ids.numpy())
    np.save(os.path.join(a.out, "expected.npy"), y.numpy().astype(np.float32))
    size = os.path.getsize(os.path.join(a.out, "model.onnx"))
    print(f"gpt2_onnx: {a.out}/model.onnx ({size / 1e6:.0f} MB), T={a.seq}, opset {a.opset}")


main()
