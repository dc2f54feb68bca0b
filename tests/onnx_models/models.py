#!/usr/bin/env python3
"""Export small PyTorch models to ONNX (Debian 12's python3-torch 1.13) with an input and
PyTorch's output beside each, for tests/onnx_models/run.sh:

    models.py OUT_DIR   ->  OUT_DIR/<name>_opset<N>/{model.onnx, input.npy, expected.npy}

gpt: a GPT-2-style decoder (token + position embeddings, 2 pre-LN blocks of causal
self-attention and a GELU MLP, final LayerNorm, tied LM head), vocabulary 96, context 16.
cnn: conv-batchnorm-relu-maxpool twice, global average pool, linear.
resnet18: torchvision's ResNet-18 (weights=None: random init; batch-norm statistics randomised),
on 32x32 images (the network's every layer, at 1/49 of the work of 224x224); only under
MINIC_FULL_TESTS=1 (about a minute in a sanitizer build) and where python3-torchvision is
installed (a line says why it was skipped otherwise).
Random weights, fixed seed, eval mode; opsets 13 and 17, and at opset 17 with dynamic axes
(dim_params: the decoder's batch, its batch and sequence, the CNN's and ResNet's batch), each
with more inputs of other sizes (input_2.npy, expected_2.npy, ...) that the same import must run.
Exit 77 when torch or onnx is missing.
"""
import os
import sys
import warnings

warnings.filterwarnings("ignore")
try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("skipped: python3-torch is not installed", file=sys.stderr)
    sys.exit(77)


class Block(nn.Module):
    def __init__(self, d, heads, ctx):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = heads
        self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx, dtype=torch.bool)))

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.view(b, t, h, d // h).transpose(1, 2)
        k = k.view(b, t, h, d // h).transpose(1, 2)
        v = v.view(b, t, h, d // h).transpose(1, 2)
        s = (q @ k.transpose(-2, -1)) * (1.0 / (d // h) ** 0.5)
        s = s.masked_fill(~self.mask[:t, :t], float("-inf"))
        y = (F.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=96, ctx=16, d=64, heads=4, layers=2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList([Block(d, heads, ctx) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(t, dtype=torch.long))
        for blk in self.blocks:
            x = blk(x)
        return self.ln(x) @ self.wte.weight.t()


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.c2, self.b2 = nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.b1(self.c1(x))), 2)
        x = F.max_pool2d(F.relu(self.b2(self.c2(x))), 2)
        return self.fc(x.mean(dim=(2, 3)))


def export(name, model, x, opset, out, dynamic=None, more=None):
    d = os.path.join(out, f"{name}_opset{opset}")
    os.makedirs(d, exist_ok=True)
    model.eval()
    with torch.no_grad():
        y = model(x)
        axes = {"input": dynamic, "output": dynamic} if dynamic else None
        torch.onnx.export(model, (x,), os.path.join(d, "model.onnx"), opset_version=opset,
                          input_names=["input"], output_names=["output"], dynamic_axes=axes)
    np.save(os.path.join(d, "input.npy"), x.numpy())
    np.save(os.path.join(d, "expected.npy"), y.numpy().astype(np.float32))
    for k, x2 in enumerate(more or [], 2):  # other sizes of the dynamic axes: the same model
        with torch.no_grad():
            np.save(os.path.join(d, f"expected_{k}.npy"), model(x2).numpy().astype(np.float32))
        np.save(os.path.join(d, f"input_{k}.npy"), x2.numpy())


def resnet18():
    """torchvision's ResNet-18, random init with non-trivial batch-norm statistics; None (and a
    line saying so) where torchvision is missing: it is optional (not in scripts/deps.sh)."""
    if os.environ.get("MINIC_FULL_TESTS") != "1":
        print("onnx_models: resnet18: skipped (it runs under MINIC_FULL_TESTS=1)")
        return None
    try:
        import torchvision
    except Exception as e:  # ImportError, or a torchvision built for another torch
        print(f"onnx_models: resnet18: skipped: python3-torchvision is not usable ({type(e).__name__}: {e})")
        return None
    torch.manual_seed(0)
    m = torchvision.models.resnet18(weights=None)
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.1, 0.1)
            mod.running_var.uniform_(0.5, 1.5)
    return m


def main():
    if len(sys.argv) != 2:
        print("usage: models.py OUT_DIR", file=sys.stderr)
        sys.exit(2)
    torch.manual_seed(0)
    gpt, cnn = GPT(), CNN()
    for m in cnn.modules():  # non-trivial batch-norm statistics
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    ids = torch.randint(0, 96, (2, 16))
    img = torch.randn(2, 3, 16, 16)
    for opset in (13, 17):
        export("gpt", gpt, ids, opset, sys.argv[1])
        export("cnn", cnn, img, opset, sys.argv[1])
    export("gpt_dynamic_batch", gpt, ids, 17, sys.argv[1], dynamic={0: "batch"},
           more=[torch.randint(0, 96, (3, 16))])
    export("gpt_dynamic", gpt, ids, 17, sys.argv[1], dynamic={0: "batch", 1: "seq"},
           more=[torch.randint(0, 96, (1, 5)), torch.randint(0, 96, (3, 11))])
    export("cnn_dynamic_batch", cnn, img, 17, sys.argv[1], dynamic={0: "batch"},
           more=[torch.randn(1, 3, 16, 16)])
    rn = resnet18()
    if rn is not None:
        torch.manual_seed(1)
        export("resnet18", rn, torch.randn(1, 3, 32, 32), 13, sys.argv[1])
        export("resnet18_dynamic_batch", rn, torch.randn(2, 3, 32, 32), 17, sys.argv[1], dynamic={0: "batch"},
               more=[torch.randn(1, 3, 32, 32)])


if __name__ == "__main__":
    main()
