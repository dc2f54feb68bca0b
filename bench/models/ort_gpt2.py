#!/usr/bin/env python3
"""GPT-2 small (HF, random init, seed 0, as bench/models/gpt2.py builds it) exported to ONNX from
PyTorch at B=1, T=128 (token embeddings in, logits out) and timed in ONNX Runtime on the CPU
(all graph optimizations, N intra-op threads), medians of wall time. Also writes the graph,
weights and input for minic (gpt2.py --write-only) so `minic run --backend cpu` runs the same
model, and x.npy (the input) and ref.npy (PyTorch's logits) beside the .onnx file, so `minic
run FILE.onnx --input x=x.npy` runs the very file ORT ran. Prints JSON lines.

    python3 bench/models/ort_gpt2.py OUTDIR [--threads 2,16] [--iters 20]
"""
import argparse, json, os, subprocess, sys, time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--threads", default="2,16")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--seq", type=int, default=128)
    a = ap.parse_args()
    import numpy as np, torch
    from transformers import GPT2Config, GPT2LMHeadModel
    import onnxruntime as ort
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=12, n_positions=1024, attn_implementation="eager")
    model = GPT2LMHeadModel(cfg).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, a.seq), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        emb = model.transformer.wte(ids)  # HF adds wpe to inputs_embeds itself

    class Wrap(torch.nn.Module):
        def __init__(s, m): super().__init__(); s.m = m
        # an all-ones attention mask: without one, transformers looks for packed sequences with
        # torch.diff, which the TorchScript exporter cannot export (the dynamo fallback then ran)
        def forward(s, x):
            return s.m(inputs_embeds=x, attention_mask=torch.ones(x.shape[:2], dtype=torch.long),
                       use_cache=False).logits
    path = os.path.join(a.out, "gpt2_b1_t%d.onnx" % a.seq)
    err = None
    for dynamo in (False, True):
        try:
            torch.onnx.export(Wrap(model).eval(), (emb,), path, input_names=["x"], output_names=["logits"],
                              opset_version=18 if dynamo else 17, dynamo=dynamo)
            err = None
            break
        except Exception as e:  # report, try the other exporter
            err = f"{type(e).__name__}: {str(e)[:300]}"
    if err:
        print("JSON " + json.dumps(dict(what="onnx export failed", error=err)), flush=True)
        return
    with torch.no_grad():
        ref = model(inputs_embeds=emb).logits.numpy()
    x = emb.numpy()
    # the input and PyTorch's logits beside the model, so `minic run` can run the same file
    np.save(os.path.join(a.out, "x.npy"), x)
    np.save(os.path.join(a.out, "ref.npy"), ref)
    for th in [int(t) for t in a.threads.split(",")]:
        so = ort.SessionOptions()
        so.intra_op_num_threads = th
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        y = s.run(None, {"x": x})[0]
        for _ in range(3):
            s.run(None, {"x": x})
        ts = []
        for _ in range(a.iters):
            t0 = time.perf_counter(); s.run(None, {"x": x}); ts.append((time.perf_counter() - t0) * 1e6)
        ts.sort()
        e = float(np.linalg.norm(y.astype(np.float64) - ref) / np.linalg.norm(ref))
        print("JSON " + json.dumps(dict(what=f"ort cpu gpt2 B=1 T={a.seq}", threads=th, us=ts[len(ts) // 2],
                                        err_vs_torch_f32=e, ort=ort.__version__)), flush=True)
    # torch eager on the CPU, same threads
    for th in [int(t) for t in a.threads.split(",")]:
        torch.set_num_threads(th)
        with torch.no_grad():
            for _ in range(3):
                model(inputs_embeds=emb)
            ts = []
            for _ in range(a.iters):
                t0 = time.perf_counter(); model(inputs_embeds=emb); ts.append((time.perf_counter() - t0) * 1e6)
        ts.sort()
        print("JSON " + json.dumps(dict(what=f"torch eager cpu gpt2 B=1 T={a.seq}", threads=th, us=ts[len(ts) // 2])), flush=True)


if __name__ == "__main__":
    main()
