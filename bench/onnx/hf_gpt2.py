#!/usr/bin/env python3
"""Hugging Face's GPT-2 as ONNX files with PyTorch's answers, laid out as tests/onnx_models/run.sh
reads them (DIR/NAME/model.onnx, input[_K].npy, expected[_K].npy), for the GPU machine, where
transformers is installed (issue 22):

    python3 bench/onnx/hf_gpt2.py DIR [--size tiny|small] [--opset 17]

  tiny   GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=211,
         n_positions=128)): small enough to keep in the repository (tests/onnx_models/fixtures),
         so ref and cpu run Hugging Face's own export graph on every CI machine
  small  GPT2Config() (124 M parameters, about 500 MB): the GPU machine only

Random init (seed 0), eager attention, TorchScript exporter, input "input" (int64 ids), output
"logits". Two models per size: NAME_static ([1, 16]) and NAME_dynamic (dim_params batch and seq,
checked at three sizes without --dim). PyTorch's logits are computed on the CPU in f32.
"""
import argparse, os, sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--size", choices=["tiny", "small"], default="tiny")
    ap.add_argument("--opset", type=int, default=17)
    a = ap.parse_args()
    import numpy as np
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    kw = dict(n_layer=2, n_embd=64, n_head=4, vocab_size=211, n_positions=128) if a.size == "tiny" else {}
    try:
        cfg = GPT2Config(attn_implementation="eager", **kw)
    except TypeError:
        cfg = GPT2Config(**kw)
    model = GPT2LMHeadModel(cfg).eval()

    class Ids(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids):
            # an all-ones attention mask, as a caller without padding passes it: without one,
            # transformers looks for packed sequences in the position ids with torch.diff,
            # which the TorchScript exporter cannot export
            return self.m(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits

    net = Ids(model).eval()
    g = torch.Generator().manual_seed(1)
    sizes = {"static": [(1, 16)], "dynamic": [(1, 16), (2, 37), (3, 64 if a.size == "tiny" else 128)]}
    for kind, shapes in sizes.items():
        d = os.path.join(a.dir, f"hf_gpt2_{a.size}_{kind}")
        os.makedirs(d, exist_ok=True)
        ids0 = torch.randint(0, cfg.vocab_size, shapes[0], generator=g)
        dyn = {"input": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}} if kind == "dynamic" else None
        export = dict(input_names=["input"], output_names=["logits"], opset_version=a.opset, dynamic_axes=dyn)
        path = os.path.join(d, "model.onnx")
        try:
            torch.onnx.export(net, (ids0,), path, dynamo=False, **export)
            how = f"TorchScript exporter, opset {a.opset}"
        except TypeError:  # a torch without the dynamo argument
            torch.onnx.export(net, (ids0,), path, **export)
            how = f"TorchScript exporter, opset {a.opset}"
        except Exception as e:
            print(f"TorchScript exporter failed ({type(e).__name__}: {str(e)[:200]}); the dynamo exporter", flush=True)
            export["opset_version"] = max(a.opset, 18)
            torch.onnx.export(net, (ids0,), path, dynamo=True, external_data=False, **export)
            how = f"dynamo exporter, opset {export['opset_version']}"
        for k, shape in enumerate(shapes):
            ids = ids0 if k == 0 else torch.randint(0, cfg.vocab_size, shape, generator=g)
            with torch.no_grad():
                out = net(ids).float().numpy()
            sfx = "" if k == 0 else f"_{k + 1}"
            np.save(os.path.join(d, f"input{sfx}.npy"), ids.numpy())
            np.save(os.path.join(d, f"expected{sfx}.npy"), out)
        print(f"{d}: {how}, {os.path.getsize(path)} bytes, sizes {shapes}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
