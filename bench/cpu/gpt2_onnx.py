#!/usr/bin/python3
"""A decoder of GPT-2 small's sizes (12 layers, d_model 768, 12 heads, vocabulary 50257, context
1024; the GPT-2-style decoder of tests/onnx_models/models.py, erf GELU, tied LM head) exported
from PyTorch 1.13 (Debian's python3-torch) to ONNX at B=1, T=128, with its input ids and
PyTorch's logits beside it, for bench/cpu/gpt2_onnx.sh:

    /usr/bin/python3 bench/cpu/gpt2_onnx.py OUT_DIR [--seq 128] [--opset 13] [--decode P]

-> OUT_DIR/{model.onnx, input.npy (int64 ids), expected.npy (f32 logits)}. With --decode P the
model is one decoding step instead (issue 23's CPU point): the ids of one new token [1, 1] and
`past`, the keys and values of P earlier tokens stacked [layers, 2, 1, heads, P, 64], in; the
logits [1, 1, vocab] (`output`) and `present` [layers, 2, 1, heads, P + 1, 64] (the past with
the new token's keys and values concatenated) out, as Hugging Face's decoders without a static
cache do; OUT_DIR gets past.npy too (a real prefix's keys and values). Random weights,
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


class Step(torch.nn.Module):
    """One decoding step of `gpt` at position P: attention over the P cached keys and values
    and the new token's own (no mask needed: the new token sees every earlier one)."""

    def __init__(self, gpt, pos):
        super().__init__()
        self.gpt, self.pos = gpt, pos

    def forward(self, ids, past):
        g = self.gpt
        x = g.wte(ids) + g.wpe.weight[self.pos]
        present = []
        for i, blk in enumerate(g.blocks):
            b, t, d = x.shape
            h = blk.heads
            q, k, v = blk.qkv(blk.ln1(x)).split(d, dim=2)
            q = q.view(b, t, h, d // h).transpose(1, 2)
            k = torch.cat([past[i, 0], k.view(b, t, h, d // h).transpose(1, 2)], dim=2)
            v = torch.cat([past[i, 1], v.view(b, t, h, d // h).transpose(1, 2)], dim=2)
            present.append(torch.stack([k, v]))
            s = (q @ k.transpose(-2, -1)) * (1.0 / (d // h) ** 0.5)
            y = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, t, d)
            x = x + blk.proj(y)
            x = x + blk.out(torch.nn.functional.gelu(blk.fc(blk.ln2(x))))
        return g.ln(x) @ g.wte.weight.t(), torch.stack(present)


def prefix_cache(gpt, ids):
    """The keys and values of every block over the prompt `ids` [1, P]: [layers, 2, 1, heads, P, 64]."""
    x = gpt.wte(ids) + gpt.wpe(torch.arange(ids.shape[1], dtype=torch.long))
    kv = []
    for blk in gpt.blocks:
        b, t, d = x.shape
        h = blk.heads
        _, k, v = blk.qkv(blk.ln1(x)).split(d, dim=2)
        kv.append(torch.stack([k.view(b, t, h, d // h).transpose(1, 2),
                               v.view(b, t, h, d // h).transpose(1, 2)]))
        x = blk(x)
    return torch.stack(kv)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--opset", type=int, default=13)
    ap.add_argument("--decode", type=int, metavar="P", help="export one decoding step after P tokens")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    model = GPT(vocab=50257, ctx=1024, d=768, heads=12, layers=12).eval()
    for m in model.modules():  # GPT-2's initialisation scale: N(0, 0.02) weights
        if isinstance(m, (torch.nn.Linear, torch.nn.Embedding)):
            torch.nn.init.normal_(m.weight, 0.0, 0.02)
    if a.decode is not None:
        if not 1 <= a.decode < 1024:
            ap.error("--decode P: P from 1 to 1023")
        with torch.no_grad():
            prompt = torch.randint(0, 50257, (1, a.decode + 1),
                                   generator=torch.Generator().manual_seed(1))
            past = prefix_cache(model, prompt[:, :-1])
            step = Step(model, a.decode).eval()
            ids = prompt[:, -1:]
            y, present = step(ids, past)
            # the step is the whole model's last position over the prompt
            whole = model(prompt)[:, -1:]
            err = float((y - whole).norm() / whole.norm())
            assert err < 1e-5, f"the decoding step differs from the whole model: {err:.3g}"
            torch.onnx.export(step, (ids, past), os.path.join(a.out, "model.onnx"),
                              opset_version=a.opset, input_names=["input", "past"],
                              output_names=["output", "present"])
        np.save(os.path.join(a.out, "past.npy"), past.numpy().astype(np.float32))
    else:
        ids = torch.randint(0, 50257, (1, a.seq), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            y = model(ids)
            torch.onnx.export(model, (ids,), os.path.join(a.out, "model.onnx"), opset_version=a.opset,
                              input_names=["input"], output_names=["output"])
    np.save(os.path.join(a.out, "input.npy"), ids.numpy())
    np.save(os.path.join(a.out, "expected.npy"), y.numpy().astype(np.float32))
    size = os.path.getsize(os.path.join(a.out, "model.onnx"))
    what = f"one decoding step after {a.decode} tokens" if a.decode is not None else f"T={a.seq}"
    print(f"gpt2_onnx: {a.out}/model.onnx ({size / 1e6:.0f} MB), {what}, opset {a.opset}")


main()
