#!/usr/bin/env python3
"""Checks of the f32 attention kernels without a GPU (issue 17): each case is a graph, its
attention kernel rendered by minic as for sm_90, run on the host by emulate.py, default kernel
and MINIC_CUDA_ATTN_F32=old, compared with numpy in float64 (NaN where a row keeps no key).
Index and lane-mapping errors show; races, timing and the hardware's own rounding do not (the
GPU run's test_attention and compute-sanitizer cover those).

    MINIC=build-test/minic python3 scripts/attn_emulate/cases.py [CASE...]   (needs numpy, g++)

Environment variables given to it reach minic (MINIC_CUDA_ATTN_F32_ROWS=64 tries 64-row CTAs);
EMU_MUTATE='a=>b' replaces text in the default kernel, to see a check fail."""
import os, sys, shutil, subprocess, tempfile, numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emulate import dump, parse, run_kernel

def graph(name, B, H, tq, tk, d, dv, mask, scale, qkv=False, window=0):
    L = ["graph %s" % name]
    if qkv:
        hd = H * d
        L.append("input qkv : f32[%d, %d, %d]" % (B, tq, 3 * hd))
        for i, n in enumerate("qkv"):
            L.append("%s0 = slice(qkv, axis=2, start=%d, end=%d)" % (n, i * hd, (i + 1) * hd))
            L.append("%s1 = reshape(%s0, shape=[%d, %d, %d, %d])" % (n, n, B, tq, H, d))
            L.append("%s = transpose(%s1, perm=[0, 2, 1, 3])" % (n, n))
    else:
        L.append("input q : f32[%d, %d, %d, %d]" % (B, H, tq, d))
        L.append("input k : f32[%d, %d, %d, %d]" % (B, H, tk, d))
        L.append("input v : f32[%d, %d, %d, %d]" % (B, H, tk, dv))
    L.append("kt = transpose(k, perm=[0, 1, 3, 2])")
    L.append("s0 = matmul(q, kt)")
    L.append("sc = mul(s0, %r)" % scale)
    cur = "sc"
    if mask in ("causal", "window"):
        L += ["row = iota(shape=[%d, %d], axis=0)" % (tq, tk), "col = iota(shape=[%d, %d], axis=1)" % (tq, tk),
              "row2 = add(row, %d)" % (tk - tq), "keep = ge(row2, col)", "mk = where(keep, sc, -inf)"]
        cur = "mk"
        if mask == "window":
            L += ["dist = sub(row2, col)", "near = lt(dist, %d)" % window, "mk2 = where(near, mk, -inf)"]
            cur = "mk2"
    elif mask == "bool":
        L += ["input m : bool[%d, %d]" % (tq, tk), "mk = where(m, sc, -inf)"]; cur = "mk"
    elif mask == "drop":
        L += ["input m : bool[%d, 1, 1, %d]" % (B, tk), "mk = where(m, -inf, sc)"]; cur = "mk"
    elif mask == "add":
        L += ["input m : f32[%d, %d]" % (tq, tk), "mk = add(sc, m)"]; cur = "mk"
    L += ["p = softmax(%s, axis=-1)" % cur, "y = matmul(p, v)", "output y"]
    return "\n".join(L) + "\n"

def reference(c, x):
    B, H, tq, tk, d, dv, mask, scale = c[:8]
    if c[8]:
        hd = H * d
        qkv = x["qkv"].reshape(B, tq, 3 * hd).astype(np.float64)
        q, k, v = [qkv[:, :, i * hd:(i + 1) * hd].reshape(B, tq, H, d).transpose(0, 2, 1, 3) for i in range(3)]
    else:
        q = x["q"].reshape(B, H, tq, d).astype(np.float64)
        k = x["k"].reshape(B, H, tk, d).astype(np.float64)
        v = x["v"].reshape(B, H, tk, dv).astype(np.float64)
    s = np.einsum("bhid,bhjd->bhij", q, k) * scale
    if mask in ("causal", "window"):
        i = np.arange(tq)[:, None] + (tk - tq); j = np.arange(tk)[None, :]
        keep = i >= j
        if mask == "window":
            keep = keep & (i - j < c[9])
        s = np.where(keep, s, -np.inf)
    elif mask == "bool":
        s = np.where(x["m"].reshape(tq, tk).astype(bool), s, -np.inf)
    elif mask == "drop":
        s = np.where(x["m"].reshape(B, 1, 1, tk).astype(bool), -np.inf, s)
    elif mask == "add":
        s = s + x["m"].reshape(tq, tk).astype(np.float64)
    with np.errstate(invalid="ignore"):
        mx = s.max(-1, keepdims=True)
        e = np.exp(s - mx)
        p = e / e.sum(-1, keepdims=True)
    return np.einsum("bhij,bhjd->bhid", p, v)

CASES = [
    # B, H, tq, tk, d, dv, mask, scale, qkv, window
    ("causal70", 1, 2, 70, 70, 64, 64, "causal", 0.125, False, 0),
    ("causal200", 1, 2, 200, 200, 64, 64, "causal", 0.125, False, 0),
    ("causal_tq50_tk140_d32", 2, 1, 50, 140, 32, 32, "causal", 0.17, False, 0),
    ("bool45_d80", 1, 2, 45, 45, 80, 80, "bool", 0.11, False, 0),
    ("add37_d40", 1, 2, 37, 61, 40, 40, "add", 0.15, False, 0),
    ("drop_d64_dv32", 2, 2, 33, 77, 64, 32, "drop", 0.125, False, 0),
    ("none_d48", 1, 1, 150, 90, 48, 48, "none", 0.2, False, 0),
    ("window150", 1, 1, 150, 150, 64, 64, "window", 0.125, False, 7),
    ("qkv_causal", 2, 3, 140, 140, 64, 64, "causal", 0.125, True, 0),
    ("huge", 1, 1, 60, 60, 64, 64, "causal", 1e3, False, 0),
    ("plain_d30", 1, 2, 75, 75, 30, 30, "causal", 0.18, False, 0),
]

def main(sel):
    keep = bool(os.environ.get("EMU_WORK"))
    work = os.environ.get("EMU_WORK") or tempfile.mkdtemp(prefix="attn_emulate_")
    rng = np.random.default_rng(1)
    ok = True
    for c in CASES:
        name = c[0]
        if sel and name not in sel:
            continue
        c = c[1:]
        gdir = os.path.join(work, name); os.makedirs(gdir, exist_ok=True)
        gp = os.path.join(gdir, "g.graph")
        open(gp, "w").write(graph(name, *c))
        x = {}
        B, H, tq, tk, d, dv, mask = c[:7]
        if c[8]:
            x["qkv"] = rng.standard_normal(B * tq * 3 * H * d).astype(np.float32)
        else:
            x["q"] = rng.standard_normal(B * H * tq * d).astype(np.float32)
            x["k"] = rng.standard_normal(B * H * tk * d).astype(np.float32)
            x["v"] = rng.standard_normal(B * H * tk * dv).astype(np.float32)
        if mask == "bool":
            m = rng.random((tq, tk)) < 0.6
            m[3, :] = False  # a row with no key: NaN
            x["m"] = m.astype(np.uint8)
        elif mask == "drop":
            m = rng.random((B, 1, 1, tk)) < 0.3
            x["m"] = m.astype(np.uint8)
        elif mask == "add":
            x["m"] = (rng.standard_normal(tq * tk) * 3).astype(np.float32)
        for n, a in x.items():
            a.tofile(os.path.join(gdir, n + ".bin"))
        ref = reference(c, x)
        outs = {}
        for tag, env in (("new", {}), ("old", {"MINIC_CUDA_ATTN_F32": "old"})):
            code, fused = dump(gp, env)
            body, grid, block, scheme, plist = parse(code, fused)
            dd = run_kernel(tag, body, grid, block, plist, x, gdir)
            y = np.fromfile(os.path.join(dd, "out_y.bin"), dtype=np.float32).astype(np.float64)
            outs[tag] = (y, scheme)
        refy = ref.reshape(-1)
        for tag, (y, scheme) in outs.items():
            nan_ok = np.array_equal(np.isnan(y), np.isnan(refy))
            f = ~np.isnan(refy)
            err = np.linalg.norm(y[f] - refy[f]) / np.linalg.norm(refy[f])
            good = nan_ok and err < 1e-5
            ok = ok and good
            print("%-24s %-4s %-22s rel err %.2e nan-match %s %s" % (name, tag, scheme, err, nan_ok, "ok" if good else "FAIL"))
    if not keep:
        shutil.rmtree(work)
    return ok

if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1:]) else 1)
