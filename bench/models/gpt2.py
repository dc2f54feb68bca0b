#!/usr/bin/env python3
"""GPT-2 small end to end: Hugging Face's model beside minic, in one run on one machine.

    python3 bench/models/gpt2.py [--minic build/minic] [--out DIR] [--batch 4] [--seq 1024]
                                 [--layers 12] [--dtypes f32,bf16] [--iters 20] [--write-only]

Builds GPT-2 small from GPT2Config (random init, seed 0: nothing is downloaded), writes
  DIR/gpt2_{f32,bf16}.graph      the model as a minic graph: token embeddings in, logits out
  DIR/gpt2_{f32,bf16}.safetensors its weights under the graph's names (Conv1D weights, stored
                                 [in, out] by HF, transposed to PyTorch Linear's [out, in]; the
                                 LM head is the token embedding, tied: one param), and wpe
                                 [n_positions, 768], which examples/gpt2_generate.c reads
  DIR/x_{f32,bf16}.npy           the input: wte[ids] + wpe[pos] for fixed random ids (HF is
                                 given wte[ids] as inputs_embeds: it adds wpe itself)
then times minic (fused and unfused, `minic run --iters`), HF eager and torch.compile in the
same process on the same GPU, and compares every logits tensor with HF in float64 (the
oracle): relative norm ||out - ref|| / ||ref||. Prints one table (and DIR/gpt2_table.txt).

The graph computes exactly what HF's GPT2LMHeadModel computes from inputs_embeds: pre-LN
blocks, causal attention with scale 1/sqrt(64), gelu_tanh (HF's "gelu_new"), final ln_f, the
tied LM head. --write-only writes the files and stops (the CPU side and the ONNX issue use
them too).
"""
import argparse, os, subprocess, sys, time

np = None  # numpy, imported in main (graph_text needs none)



def graph_text(dt, B, T, L, d=768, H=12, V=50257):
    hd = d // H
    lines = [f"graph gpt2_small", f"# GPT-2 small ({L} layers, d={d}, {H} heads), HF GPT2LMHeadModel from inputs_embeds",
             f"input x : {dt}[{B}, {T}, {d}]"]
    for i in range(L):
        p = f"h{i}"
        for name, shape in [("ln_1.w", [d]), ("ln_1.b", [d]), ("attn.w", [3 * d, d]), ("attn.b", [3 * d]),
                            ("proj.w", [d, d]), ("proj.b", [d]), ("ln_2.w", [d]), ("ln_2.b", [d]),
                            ("fc.w", [4 * d, d]), ("fc.b", [4 * d]), ("out.w", [d, 4 * d]), ("out.b", [d])]:
            lines.append(f"param {p}.{name} : {dt}[{', '.join(map(str, shape))}]")
    lines += [f"param ln_f.w : {dt}[{d}]", f"param ln_f.b : {dt}[{d}]", f"param wte : {dt}[{V}, {d}]"]
    lines += [f"row = iota(shape=[{T}, {T}], axis=0)", f"col = iota(shape=[{T}, {T}], axis=1)",
              "keep = ge(row, col)"]
    x = "x"
    for i in range(L):
        p = f"h{i}"
        lines += [
            f"{p}_h = layernorm({x}, {p}.ln_1.w, {p}.ln_1.b, eps=1e-5)",
            f"{p}_qkv = linear({p}_h, {p}.attn.w, {p}.attn.b)",
            f"{p}_q0 = slice({p}_qkv, axis=2, start=0, end={d})",
            f"{p}_k0 = slice({p}_qkv, axis=2, start={d}, end={2 * d})",
            f"{p}_v0 = slice({p}_qkv, axis=2, start={2 * d}, end={3 * d})",
            f"{p}_q1 = reshape({p}_q0, shape=[{B}, {T}, {H}, {hd}])",
            f"{p}_k1 = reshape({p}_k0, shape=[{B}, {T}, {H}, {hd}])",
            f"{p}_v1 = reshape({p}_v0, shape=[{B}, {T}, {H}, {hd}])",
            f"{p}_q = transpose({p}_q1, perm=[0, 2, 1, 3])",
            f"{p}_kt = transpose({p}_k1, perm=[0, 2, 3, 1])",
            f"{p}_v = transpose({p}_v1, perm=[0, 2, 1, 3])",
            f"{p}_s0 = matmul({p}_q, {p}_kt)",
            f"{p}_s = mul({p}_s0, {1.0 / hd ** 0.5!r})",
            f"{p}_sm = where(keep, {p}_s, -inf)",
            f"{p}_p = softmax({p}_sm, axis=-1)",
            f"{p}_y0 = matmul({p}_p, {p}_v)",
            f"{p}_y1 = transpose({p}_y0, perm=[0, 2, 1, 3])",
            f"{p}_y = reshape({p}_y1, shape=[{B}, {T}, {d}])",
            f"{p}_a = linear({p}_y, {p}.proj.w, {p}.proj.b)",
            f"{p}_x1 = add({x}, {p}_a)",
            f"{p}_h2 = layernorm({p}_x1, {p}.ln_2.w, {p}.ln_2.b, eps=1e-5)",
            f"{p}_f = linear({p}_h2, {p}.fc.w, {p}.fc.b)",
            f"{p}_g = gelu_tanh({p}_f)",
            f"{p}_o = linear({p}_g, {p}.out.w, {p}.out.b)",
            f"{p}_x2 = add({p}_x1, {p}_o)",
        ]
        x = f"{p}_x2"
    lines += [f"hf = layernorm({x}, ln_f.w, ln_f.b, eps=1e-5)", "logits = linear(hf, wte)", "output logits"]
    return "\n".join(lines) + "\n"


def weights(model, L):
    """The graph's params from HF's state dict (float32 tensors)."""
    sd = model.state_dict()
    w = {}
    for i in range(L):
        h = f"transformer.h.{i}."
        p = f"h{i}."
        w[p + "ln_1.w"], w[p + "ln_1.b"] = sd[h + "ln_1.weight"], sd[h + "ln_1.bias"]
        w[p + "attn.w"], w[p + "attn.b"] = sd[h + "attn.c_attn.weight"].t(), sd[h + "attn.c_attn.bias"]
        w[p + "proj.w"], w[p + "proj.b"] = sd[h + "attn.c_proj.weight"].t(), sd[h + "attn.c_proj.bias"]
        w[p + "ln_2.w"], w[p + "ln_2.b"] = sd[h + "ln_2.weight"], sd[h + "ln_2.bias"]
        w[p + "fc.w"], w[p + "fc.b"] = sd[h + "mlp.c_fc.weight"].t(), sd[h + "mlp.c_fc.bias"]
        w[p + "out.w"], w[p + "out.b"] = sd[h + "mlp.c_proj.weight"].t(), sd[h + "mlp.c_proj.bias"]
    w["ln_f.w"], w["ln_f.b"] = sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"]
    w["wte"] = sd["transformer.wte.weight"]
    # the position embedding: the graph here takes wte[ids] + wpe[pos] as its input and has no
    # wpe param (minic ignores extra tensors), examples/gpt2_generate.c takes ids and reads it
    w["wpe"] = sd["transformer.wpe.weight"]
    return {k: v.contiguous() for k, v in w.items()}


def rel_err(out, ref):
    out, ref = out.astype(np.float64), ref.astype(np.float64)
    if not np.all(np.isfinite(out)):
        return float("inf")
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minic", default="build/minic")
    ap.add_argument("--out", default="gpt2-out")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--write-only", action="store_true")
    ap.add_argument("--modes", default="fused,unfused",
                    help="minic runs to time: fused, unfused, and tpN (tensor parallel, --devices N)")
    ap.add_argument("--torch-dtypes", default=None,
                    help="time HF eager and torch.compile only in these dtypes (default: --dtypes); "
                         "HF's own error is computed in every dtype")
    a = ap.parse_args()
    global np
    import numpy as np
    import torch
    from safetensors.torch import save_file
    from transformers import GPT2Config, GPT2LMHeadModel

    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=a.layers, n_positions=max(1024, a.seq), attn_implementation="eager")
    model = GPT2LMHeadModel(cfg).eval()
    B, T, L = a.batch, a.seq, a.layers
    ids = torch.randint(0, cfg.vocab_size, (B, T), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        # HF adds the position embeddings to inputs_embeds itself: HF gets the token embeddings,
        # minic's x is the sum (the graph has no wpe)
        tok = model.transformer.wte(ids)
        emb = tok + model.transformer.wpe(torch.arange(T))[None]
    w = weights(model, L)
    dev = "cuda" if torch.cuda.is_available() and a.backend == "cuda" else "cpu"
    rows, results = [], {}
    tdt = {"f32": torch.float32, "bf16": torch.bfloat16}
    for dt in a.dtypes.split(","):
        g = os.path.join(a.out, f"gpt2_{dt}.graph")
        open(g, "w").write(graph_text(dt, B, T, L))
        save_file({k: v.to(tdt[dt]) for k, v in w.items()}, os.path.join(a.out, f"gpt2_{dt}.safetensors"))
        x = emb.to(tdt[dt])
        xp = os.path.join(a.out, f"x_{dt}.npy")
        np.save(xp, x.view(torch.int16).numpy().view(np.uint16) if dt == "bf16" else x.numpy())
    print(f"wrote {a.out}/gpt2_*.graph, *.safetensors, x_*.npy (B={B}, T={T}, {L} layers)", flush=True)
    if a.write_only:
        return

    # the oracle: HF in float64 on the same embeddings
    with torch.no_grad():
        m64 = GPT2LMHeadModel(cfg).eval()
        m64.load_state_dict(model.state_dict())
        m64 = m64.double().to(dev)
        ref = m64(inputs_embeds=tok.double().to(dev)).logits.float().cpu().numpy()
        del m64
    torch.cuda.empty_cache() if dev == "cuda" else None

    def time_torch(fn, iters):
        for _ in range(3):
            fn()
        if dev == "cuda":
            torch.cuda.synchronize()
            ts = []
            for _ in range(iters):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(); fn(); e.record(); torch.cuda.synchronize()
                ts.append(s.elapsed_time(e) * 1e3)
        else:
            ts = []
            for _ in range(iters):
                t0 = time.perf_counter(); fn(); ts.append((time.perf_counter() - t0) * 1e6)
        return float(np.median(ts))

    for dt in a.dtypes.split(","):
        g = os.path.join(a.out, f"gpt2_{dt}.graph")
        st = os.path.join(a.out, f"gpt2_{dt}.safetensors")
        xp = os.path.join(a.out, f"x_{dt}.npy")
        r = {}
        flags = {"fused": [], "unfused": ["--no-fuse"]}
        for mode in a.modes.split(","):
            flag = ["--devices", mode[2:]] if mode.startswith("tp") else flags[mode]
            out = os.path.join(a.out, f"logits_{dt}_{mode}.npy")
            cmd = [a.minic, "run", g, "--backend", a.backend, "--weights", st, "--input", f"x={xp}",
                   "--iters", str(a.iters), "--output", out, "--quiet"] + flag
            t0 = time.time()
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                print(f"minic {dt} {mode} failed ({p.returncode}): {p.stderr.strip()[-800:]}", flush=True)
                continue
            us = [float(l.split()[1]) for l in p.stdout.splitlines() if l.startswith("time:")]
            y = np.load(out)
            if dt == "bf16":
                y = (y.astype(np.uint32) << 16).view(np.float32)
            r[mode] = (us[0] if us else float("nan"), rel_err(y, ref))
            os.remove(out)
            print(f"minic {dt} {mode}: {r[mode][0]:.1f} us, error {r[mode][1]:.3g} ({time.time() - t0:.1f} s)", flush=True)
        # HF eager and torch.compile in this dtype, and HF's own error
        m = GPT2LMHeadModel(cfg).eval()
        m.load_state_dict(model.state_dict())
        m = m.to(dev, tdt[dt])
        xe = tok.to(dev, tdt[dt])
        with torch.no_grad():
            hf_err = rel_err(m(inputs_embeds=xe).logits.float().cpu().numpy(), ref)
        if a.torch_dtypes is not None and dt not in a.torch_dtypes.split(","):
            print(f"torch {dt}: not timed (--torch-dtypes), HF error {hf_err:.3g}", flush=True)
            results[dt] = dict(minic=r, eager=float("nan"), compile=float("nan"), hf_err=hf_err)
            del m
            continue
        with torch.no_grad():
            eager = time_torch(lambda: m(inputs_embeds=xe).logits, a.iters)
            cm = torch.compile(m)
            t0 = time.time()
            cm(inputs_embeds=xe)
            compiled = time_torch(lambda: cm(inputs_embeds=xe).logits, a.iters)
            print(f"torch {dt}: eager {eager:.1f} us, compile {compiled:.1f} us (compile {time.time() - t0:.0f} s), HF error {hf_err:.3g}", flush=True)
        del m, cm
        torch.cuda.empty_cache() if dev == "cuda" else None
        results[dt] = dict(minic=r, eager=eager, compile=compiled, hf_err=hf_err)

    lines = [f"GPT-2 small (HF, random init), B={B}, T={T}, {L} layers, backend {a.backend}, "
             f"device {torch.cuda.get_device_name() if dev == 'cuda' else 'cpu'}, times in ms (medians)",
             "| | minic fused | minic unfused | HF eager | torch.compile | fused / compile | minic error vs HF float64 | HF's own error |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for dt, v in results.items():
        f = v["minic"].get("fused", (float("nan"), float("nan")))
        u = v["minic"].get("unfused", (float("nan"), float("nan")))
        lines.append(f"| {dt} | {f[0] / 1e3:.2f} | {u[0] / 1e3:.2f} | {v['eager'] / 1e3:.2f} | {v['compile'] / 1e3:.2f} | "
                     f"{f[0] / v['compile']:.2f}x | {f[1]:.3g} (unfused {u[1]:.3g}) | {v['hf_err']:.3g} |")
    for dt, v in results.items():
        f = v["minic"].get("fused", (float("nan"), float("nan")))
        for mode, (us, err) in v["minic"].items():
            if mode.startswith("tp"):
                lines.append(f"| {dt} tensor parallel, {mode[2:]} GPUs | {us / 1e3:.2f} | | | | "
                             f"{us / f[0]:.2f}x of 1 GPU | {err:.3g} | |")
    table = "\n".join(lines)
    print(table)
    open(os.path.join(a.out, "gpt2_table.txt"), "w").write(table + "\n")


if __name__ == "__main__":
    main()
