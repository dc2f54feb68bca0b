#!/usr/bin/env python3
"""Greedy GPT-2 small decoding: examples/gpt2_generate beside Hugging Face's generate (issue 23).

    python3 bench/models/gpt2_generate_hf.py --gen build-gpu/gpt2_generate [--out DIR]
        [--prompt-len 128] [--new 128] [--batch 1] [--dtypes f32,bf16] [--backend cuda]
        [--max-seq 256] [--compile]

Builds GPT-2 small as bench/models/gpt2.py does (GPT2Config, random init, seed 0: nothing is
downloaded), writes its weights with gpt2.py's weights() (the graph's param names, and wpe) to
DIR/gen_{dt}.safetensors, draws a prompt of random ids (seed 1), then, per dtype:
  * minic: the example with --backend (a prefill program, then one decode program run per token,
    caches handed from run to run through host copies), its ids and its prefill/decode tokens/s;
  * HF: greedy generate (do_sample=False, exactly --new tokens: min_new_tokens = max_new_tokens)
    on the same model and prompt, eager, and with --compile also a static cache under
    torch.compile; its time per token after the prefill (generate's time minus one forward over
    the prompt, divided by --new - 1);
and prints one table, with whether the ids equal HF's (expected in f32; bf16 may part where two
logits round together). Written for the GPU machine; not run on the CPU-only build machine
where it was written (no PyTorch there).
"""
import argparse, os, re, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gen", default="build/gpt2_generate")
    ap.add_argument("--out", default="gpt2-generate-out")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--max-seq", type=int, default=256)
    ap.add_argument("--compile", action="store_true", help="also HF with a static cache under torch.compile")
    a = ap.parse_args()
    import torch
    from safetensors.torch import save_file
    from transformers import GPT2Config, GPT2LMHeadModel
    from gpt2 import weights

    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    cfg = GPT2Config(attn_implementation="eager")
    model = GPT2LMHeadModel(cfg).eval()
    L = cfg.n_layer
    ids = torch.randint(0, cfg.vocab_size, (1, a.prompt_len), generator=torch.Generator().manual_seed(1))
    prompt = ",".join(str(int(i)) for i in ids[0])
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    tdt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
    w = weights(model, L)
    rows = []
    for dt in a.dtypes.split(","):
        wpath = os.path.join(a.out, f"gen_{dt}.safetensors")
        save_file({k: v.to(tdt[dt]) for k, v in w.items()}, wpath)
        cmd = [a.gen, "--weights", wpath, "--layers", str(L), "--heads", str(cfg.n_head), "--dmodel", str(cfg.n_embd),
               "--vocab", str(cfg.vocab_size), "--positions", str(cfg.n_positions), "--max-seq", str(a.max_seq),
               "--prompt", prompt, "--new", str(a.new), "--batch", str(a.batch), "--dtype", dt, "--backend", a.backend]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"minic {dt} failed ({p.returncode}): {p.stderr.strip()[-800:]}", flush=True)
            continue
        print(p.stdout, flush=True)
        mids = [int(x) for x in re.search(r"^ids: (\S+)", p.stdout, re.M).group(1).split(",")]
        dec = re.search(r"^decode: +([\d.]+) ms per step, ([\d.]+) tokens/s", p.stdout, re.M)
        pre = re.search(r"^prefill: +([\d.]+) ms, ([\d.]+) tokens/s", p.stdout, re.M)

        m = GPT2LMHeadModel(cfg).eval()
        m.load_state_dict(model.state_dict())
        m = m.to(dev, tdt[dt])
        x = ids.repeat(a.batch, 1).to(dev)
        mask = torch.ones_like(x)

        def gen(mm, **kw):
            return mm.generate(x, attention_mask=mask, do_sample=False, max_new_tokens=a.new, min_new_tokens=a.new,
                               pad_token_id=cfg.eos_token_id, **kw)

        def timed(fn, reps=3):
            best = float("inf")
            out = None
            for _ in range(reps):
                torch.cuda.synchronize() if dev == "cuda" else None
                t0 = time.perf_counter()
                out = fn()
                torch.cuda.synchronize() if dev == "cuda" else None
                best = min(best, time.perf_counter() - t0)
            return best, out

        with torch.no_grad():
            gen(m)  # warm-up
            t_gen, out = timed(lambda: gen(m))
            t_fwd, _ = timed(lambda: m(x, attention_mask=mask).logits)
            hids = out[0, a.prompt_len:].tolist()
            eager_ms = (t_gen - t_fwd) / (a.new - 1) * 1e3
            comp_ms = float("nan")
            if a.compile:
                mc = GPT2LMHeadModel(cfg).eval()
                mc.load_state_dict(model.state_dict())
                mc = mc.to(dev, tdt[dt])
                mc.generation_config.cache_implementation = "static"
                mc.forward = torch.compile(mc.forward)
                gen(mc)
                t_c, _ = timed(lambda: gen(mc))
                comp_ms = (t_c - t_fwd) / (a.new - 1) * 1e3
        same = mids == hids
        first = next((i for i, (u, v) in enumerate(zip(mids, hids)) if u != v), None)
        rows.append(f"| {dt} | {float(dec.group(1)):.3f} | {float(dec.group(2)):.0f} | {float(pre.group(2)):.0f} | "
                    f"{eager_ms:.3f} | {comp_ms:.3f} | {'equal' if same else f'differ from token {first}'} |")
        del m
    lines = [f"GPT-2 small greedy decoding, batch {a.batch}, prompt {a.prompt_len}, {a.new} new tokens, "
             f"max-seq {a.max_seq}, minic --backend {a.backend}, device "
             f"{torch.cuda.get_device_name() if dev == 'cuda' else 'cpu'}",
             "| dtype | minic ms/token (decode) | minic decode tokens/s | minic prefill tokens/s | "
             "HF eager ms/token | HF static+compile ms/token | ids vs HF |",
             "| --- | --- | --- | --- | --- | --- | --- |"] + rows
    table = "\n".join(lines)
    print(table)
    open(os.path.join(a.out, "generate_table.txt"), "w").write(table + "\n")


if __name__ == "__main__":
    main()
