#!/usr/bin/env python3
"""Run minic's generated implicit-GEMM conv kernel on the host and compare it with the ref
interpreter, without a GPU: each case is a conv graph (x, w, b and a residual r as inputs,
relu(conv + r)), its conv kernel rendered for sm_90 (`minic dump --stage code --backend cuda`,
with the case's MINIC_CUDA_CONV_* settings) and compiled by g++ with conv_emu.h (one thread per
CUDA thread, barriers for __syncthreads, ldmatrix and mma.sync as warp-wide exchanges, cp.async
as a copy at issue, every buffer its own allocation under AddressSanitizer), its output compared
with `minic run --backend ref`. The weights the kernel reads are re-laid here as decompose
re-lays them (kir_conv.kc). Index, fragment and bounds errors show; races and timing do not.

    MINIC=build-test/minic /usr/bin/python3 scripts/conv_emulate/cases.py [CASE...]
    (needs numpy and g++ >= 12 for _Float16)

EMU_MUTATE='a=>b' replaces text in the kernel, to see a check fail."""
import os, re, subprocess, sys, tempfile
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../attn_emulate"))
import emulate  # noqa: E402
MINIC = os.environ.get("MINIC", os.path.join(HERE, "../../build-test/minic"))

# name: (n, c, h, w, co, kh, kw, stride, padding, dilation, dtype, env)
K1 = {"MINIC_CUDA_CONV_KCHUNK": "1"}  # (the defaults since 19:10; said for the cases' sake)
OLD = {"MINIC_CUDA_CONV_KCHUNK": "0", "MINIC_CUDA_CONV_CLAST": "0"}  # the kernels before: the K table
CASES = {
    "chunk_3x3": (2, 64, 10, 9, 72, 3, 3, (1, 1), (1, 1), (1, 1), "f16", K1),
    "chunk_3x3_bf16_v4": (2, 64, 10, 9, 72, 3, 3, (1, 1), (1, 1), (1, 1), "bf16", dict(K1, MINIC_CUDA_CONV_BVEC="4")),
    "chunk_3x3_v1": (2, 64, 10, 9, 40, 3, 3, (1, 1), (1, 1), (1, 1), "f16", dict(K1, MINIC_CUDA_CONV_BVEC="1")),
    "chunk_s2_c96": (3, 96, 11, 9, 64, 3, 3, (2, 2), (1, 1), (1, 1), "f16", K1),
    "chunk_dilated_s4": (2, 32, 12, 11, 24, 3, 3, (1, 1), (2, 2), (2, 2), "f16", dict(K1, MINIC_CUDA_CONV_STAGES="4")),
    "chunk_1x1_s2": (2, 64, 9, 10, 130, 1, 1, (2, 2), (0, 0), (1, 1), "bf16", K1),
    "chunk_asym": (2, 32, 9, 17, 20, 3, 5, (2, 1), (1, 0), (1, 3), "f16", K1),
    "chunk_first_loop": (2, 64, 10, 9, 72, 3, 3, (1, 1), (1, 1), (1, 1), "f16", dict(K1, MINIC_CUDA_CONV_STAGES="2")),
    "chunk_tile_128": (2, 64, 10, 9, 72, 3, 3, (1, 1), (1, 1), (1, 1), "f16", dict(K1, MINIC_CUDA_CONV_TILE="128x128")),
    "clast_stem": (2, 3, 23, 23, 16, 7, 7, (2, 2), (3, 3), (1, 1), "f16", {"MINIC_CUDA_CONV_CLAST": "1"}),
    "clast_stem_bf16_s4": (2, 3, 23, 21, 72, 7, 7, (2, 2), (3, 3), (1, 1), "bf16",
                           {"MINIC_CUDA_CONV_CLAST": "1", "MINIC_CUDA_CONV_STAGES": "4"}),
    "clast_c5_tile_128": (2, 5, 12, 13, 130, 3, 3, (1, 1), (1, 1), (1, 1), "f16",
                          {"MINIC_CUDA_CONV_CLAST": "1", "MINIC_CUDA_CONV_TILE": "128x64"}),
    "clast_first_loop": (2, 3, 23, 23, 16, 7, 7, (2, 2), (3, 3), (1, 1), "f16",
                         {"MINIC_CUDA_CONV_CLAST": "1", "MINIC_CUDA_CONV_STAGES": "2"}),
    "clast_nhwc_input": (2, 64, 10, 9, 72, 3, 3, (1, 1), (1, 1), (1, 1), "f16", {"MINIC_CUDA_CONV_CLAST": "1", "_nhwc": "1"}),
    "clast_nhwc_c24_s2_bf16": (3, 24, 11, 9, 40, 3, 3, (2, 2), (1, 1), (1, 1), "bf16",
                               {"MINIC_CUDA_CONV_CLAST": "1", "_nhwc": "1", "MINIC_CUDA_CONV_BVEC": "4"}),
    "slots_stem": (2, 3, 23, 23, 16, 7, 7, (2, 2), (3, 3), (1, 1), "f16", {"MINIC_CUDA_CONV_CLAST_MAP": "1"}),
    "slots_nhwc_c64": (2, 64, 10, 9, 72, 3, 3, (1, 1), (1, 1), (1, 1), "f16", {"MINIC_CUDA_CONV_CLAST_MAP": "1", "_nhwc": "1"}),
    "slots_nhwc_c24_s2_t128": (3, 24, 11, 9, 40, 3, 3, (2, 2), (1, 1), (1, 1), "bf16",
                               {"MINIC_CUDA_CONV_CLAST_MAP": "1", "_nhwc": "1", "MINIC_CUDA_CONV_TILE": "128x128"}),
    "slots_c5_s4": (2, 5, 12, 13, 130, 3, 3, (1, 1), (1, 1), (1, 1), "f16",
                    {"MINIC_CUDA_CONV_CLAST_MAP": "1", "MINIC_CUDA_CONV_STAGES": "4", "MINIC_CUDA_CONV_TILE": "64x32"}),
    # MINIC_CUDA_CONV_BROW=1: rows of 8 (OW 16, 8) or 4 (OW 12) pixels read as 4-byte words
    "brow_3x3_v8": (2, 64, 10, 16, 72, 3, 3, (1, 1), (1, 1), (1, 1), "f16", {"MINIC_CUDA_CONV_BROW": "1"}),
    "brow_3x3_v4_bf16": (3, 32, 9, 12, 40, 3, 3, (1, 1), (1, 1), (1, 1), "bf16", {"MINIC_CUDA_CONV_BROW": "1"}),
    "brow_dilated_sy2_s4": (2, 32, 13, 10, 24, 3, 3, (2, 1), (2, 3), (2, 2), "f16",
                            {"MINIC_CUDA_CONV_BROW": "1", "MINIC_CUDA_CONV_STAGES": "4"}),
    "brow_tile_128_5x5": (2, 64, 9, 8, 130, 5, 5, (1, 1), (2, 2), (1, 1), "f16",
                          {"MINIC_CUDA_CONV_BROW": "1", "MINIC_CUDA_CONV_TILE": "128x128"}),
    "brow_tile_64x32_1x3": (2, 64, 6, 8, 72, 1, 3, (1, 1), (0, 1), (1, 1), "bf16",
                            {"MINIC_CUDA_CONV_BROW": "1", "MINIC_CUDA_CONV_TILE": "64x32"}),
    # MINIC_CUDA_CONV_BROW=2: rows of 8 pixels as two aligned 16-byte chunks (W, OW multiples of 8);
    # a 3x7 window padded 3 along W shifts by every s in 0..7 but 4
    "brow16_3x3": (2, 64, 10, 16, 72, 3, 3, (1, 1), (1, 1), (1, 1), "f16", {"MINIC_CUDA_CONV_BROW": "2"}),
    "brow16_3x7_bf16_early": (2, 32, 9, 16, 40, 3, 7, (1, 1), (1, 3), (1, 1), "bf16",
                              {"MINIC_CUDA_CONV_BROW": "2", "MINIC_CUDA_CONV_EARLY": "1"}),
    "brow16_tile_128_s4": (2, 64, 9, 24, 130, 3, 3, (1, 1), (1, 1), (1, 1), "f16",
                           {"MINIC_CUDA_CONV_BROW": "2", "MINIC_CUDA_CONV_TILE": "128x128", "MINIC_CUDA_CONV_STAGES": "4"}),
    "brow16_falls_back_v4": (3, 32, 9, 12, 40, 3, 3, (1, 1), (1, 1), (1, 1), "bf16", {"MINIC_CUDA_CONV_BROW": "2"}),
    # MINIC_CUDA_CONV_EARLY=1: the next tile's registers stored before this tile's mma
    "early_chunk_s4": (2, 64, 10, 9, 72, 3, 3, (1, 1), (1, 1), (1, 1), "f16",
                       {"MINIC_CUDA_CONV_EARLY": "1", "MINIC_CUDA_CONV_STAGES": "4"}),
    "early_brow_bf16": (2, 64, 10, 16, 72, 3, 3, (1, 1), (1, 1), (1, 1), "bf16",
                        {"MINIC_CUDA_CONV_EARLY": "1", "MINIC_CUDA_CONV_BROW": "1"}),
    "early_table_stem": (2, 3, 23, 23, 16, 7, 7, (2, 2), (3, 3), (1, 1), "f16", dict(OLD, MINIC_CUDA_CONV_EARLY="1")),
    # MINIC_CUDA_CONV_CLAST_INC=1: the channels-last window positions decoded once a tile
    "inc_stem": (2, 3, 23, 23, 16, 7, 7, (2, 2), (3, 3), (1, 1), "f16", {"MINIC_CUDA_CONV_CLAST_INC": "1"}),
    "inc_stem_bf16_s4_early": (2, 3, 23, 21, 72, 7, 7, (2, 2), (3, 3), (1, 1), "bf16",
                               {"MINIC_CUDA_CONV_CLAST_INC": "1", "MINIC_CUDA_CONV_STAGES": "4", "MINIC_CUDA_CONV_EARLY": "1"}),
    "inc_stem_t64x128": (2, 3, 23, 23, 16, 7, 7, (2, 2), (3, 3), (1, 1), "f16",
                         {"MINIC_CUDA_CONV_CLAST_INC": "1", "MINIC_CUDA_CONV_TILE": "64x128"}),
    "inc_c5_3x3": (2, 5, 12, 13, 40, 3, 3, (1, 1), (1, 1), (1, 1), "f16", {"MINIC_CUDA_CONV_CLAST_INC": "1"}),
    "inc_c5_dilated_t128": (2, 5, 12, 13, 130, 3, 3, (1, 1), (2, 2), (2, 2), "f16",
                            {"MINIC_CUDA_CONV_CLAST_INC": "1", "MINIC_CUDA_CONV_TILE": "128x64"}),
    "table_3x3": (2, 64, 10, 9, 72, 3, 3, (1, 1), (1, 1), (1, 1), "f16", OLD),
    "table_stem": (2, 3, 23, 23, 16, 7, 7, (2, 2), (3, 3), (1, 1), "f16", OLD),
}

# attn_emulate's driver (a thread per CUDA thread, CTAs one at a time) with conv_emu.h and its
# globals (the operands' type, the warp exchanges' slots)
MAIN = emulate.MAIN.replace('#include "emu.h"\n', '#include "conv_emu.h"\nbool emu_bf16 = BF16;\n'
                            'const void *emu_ptr[32][32];\nunsigned emu_frag[32][32][6];\n', 1)


def to_bits(a, dt):
    """float64 array -> uint16 storage of f16 or bf16 (round to nearest even)"""
    if dt == "f16":
        return a.astype(np.float16).view(np.uint16)
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bits(b, dt):
    if dt == "f16":
        return b.view(np.float16).astype(np.float64)
    return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def run_case(name, spec, work):
    n, c, h, w, co, kh, kw, st, pd, dl, dt, env = spec
    oh = (h + 2 * pd[0] - dl[0] * (kh - 1) - 1) // st[0] + 1
    ow = (w + 2 * pd[1] - dl[1] * (kw - 1) - 1) // st[1] + 1
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    g = os.path.join(d, "c.graph")
    nhwc = "_nhwc" in env  # x given as the transpose of an [N, H, W, C] input
    xdecl = (f"input xh : {dt}[{n}, {h}, {w}, {c}]\nx = transpose(xh, perm=[0, 3, 1, 2])\n" if nhwc
             else f"input x : {dt}[{n}, {c}, {h}, {w}]\n")
    with open(g, "w") as f:
        f.write(f"graph c\n{xdecl}input w : {dt}[{co}, {c}, {kh}, {kw}]\n"
                f"input b : {dt}[{co}]\ninput r : {dt}[{n}, {co}, {oh}, {ow}]\n"
                f"y = conv(x, w, b, stride=[{st[0]}, {st[1]}], padding=[{pd[0]}, {pd[1]}], "
                f"dilation=[{dl[0]}, {dl[1]}])\na = add(y, r)\nz = relu(a)\noutput z\n")
    rng = np.random.default_rng(len(name))
    vals = {"x": rng.uniform(-1, 1, (n, c, h, w)), "w": rng.uniform(-1, 1, (co, c, kh, kw)) / np.sqrt(c * kh * kw),
            "b": rng.uniform(-0.5, 0.5, (co,)), "r": rng.uniform(-0.5, 0.5, (n, co, oh, ow))}
    bits = {k: to_bits(v, dt) for k, v in vals.items()}
    if nhwc:
        bits["xh"] = np.ascontiguousarray(bits.pop("x").transpose(0, 2, 3, 1))
        vals["xh"] = vals.pop("x").transpose(0, 2, 3, 1)
    args = []
    for k, v in bits.items():
        p = os.path.join(d, k + ".npy")
        np.save(p, v.view(np.float16) if dt == "f16" else v)  # bf16 below
        args += ["--input", f"{k}={p}"]
    if dt == "bf16":  # .npy has no bf16: minic takes the safetensors form
        import json, struct
        hdr, off, blob = {}, 0, b""
        for k, v in bits.items():
            shape = list(vals[k].shape)
            hdr[k] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + v.nbytes]}
            off += v.nbytes
            blob += v.tobytes()
        hj = json.dumps(hdr).encode()
        hj += b" " * ((8 - len(hj) % 8) % 8)
        st_path = os.path.join(d, "in.safetensors")
        with open(st_path, "wb") as f:
            f.write(struct.pack("<Q", len(hj)) + hj + blob)
        args = sum((["--input", f"{k}={st_path}"] for k in bits), [])
    out_ref = os.path.join(d, "ref.safetensors")
    r = subprocess.run([MINIC, "run", g, "--backend", "ref", "--quiet", "--output", out_ref] + args,
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"{name}: ref run failed: {r.stdout[-800:]} {r.stderr[-800:]}")
    ref = read_safetensors(out_ref)["z"]
    e = dict(os.environ)
    e["MINIC_CUDA_CONV_SPLITK"] = "1"  # (small grids would split K: atomics, not emulated)
    e.update({k: v for k, v in env.items() if not k.startswith("_")})
    code = subprocess.run([MINIC, "dump", g, "--stage", "code", "--backend", "cuda", "--quiet"], env=e,
                          capture_output=True, text=True, check=True).stdout
    fused = subprocess.run([MINIC, "dump", g, "--stage", "fused", "--backend", "cuda", "--quiet"], env=e,
                           capture_output=True, text=True, check=True).stdout
    kern = [k for k in code.split("// ---- kernel ") if "conv-implicit-mma" in k]
    assert len(kern) == 1, "want one conv kernel"
    k = kern[0]
    m = re.search(r"// launch: grid \((\d+), 1, 1\), block (\d+), conv-implicit-mma", k)
    grid, block = int(m.group(1)), int(m.group(2))
    body = k[k.index("/* minic kernel"):]
    for fn in ("mc_mma", "mc_ldsm4", "mc_ldsm4t", "mc_cp16", "mc_cp8"):
        body = re.sub(r"MC_D void %s\(.*?\n}\n" % fn, "", body, flags=re.S)
    body = re.sub(r"MC_D void mc_cp_(commit|wait1)\(\).*\n", "", body)
    body = re.sub(r'asm volatile\("cp\.async\.wait_(group \d+|all);\\n" ::: "memory"\);', ";", body)
    body = body.replace("extern __shared__ __align__(16) unsigned short smem_[];",
                        "static unsigned short smem_[131072] __attribute__((aligned(16)));")
    sig = re.search(r'extern "C" __global__ void __launch_bounds__\([^)]*\) (\w+)\(([^)]*)\)', body)
    body = body.replace(sig.group(0), "static void emu_kernel(%s)" % sig.group(2))
    mut = os.environ.get("EMU_MUTATE")
    if mut:
        a, b = mut.split("=>")
        assert a in body, "mutation target not found"
        body = body.replace(a, b)
    with open(os.path.join(d, "kernel.inc"), "w") as f:
        f.write(body)
    # the kernel's buffers, in the order of its views (its parameters)
    bufs = {int(mm.group(1)): (mm.group(2), int(mm.group(4)))
            for mm in re.finditer(r"^\s+b(\d+)\((\w+)\) \w+ (\w+)\[(\d+)\]", fused, re.M)}
    kfused = fused[fused.index("\nkernel gemm_conv"):]
    kfused = kfused.split("\nkernel ")[1]
    order = []
    for mm in re.finditer(r"^\s+v\d+ = b(\d+)\(", kfused, re.M):
        if int(mm.group(1)) not in order:
            order.append(int(mm.group(1)))
    views = {int(mm.group(1)): (int(mm.group(2)), [int(t) for t in mm.group(4).split()])
             for mm in re.finditer(r"^\s+v(\d+) = b(\d+)\((\w+)\) \[\+\d+; strides ([-\d ]+)\]", kfused, re.M)}
    ga = re.search(r"gemm: m \d+ n \d+ k (\d+)  a v(\d+)  b v(\d+)", kfused)
    kk, va, vb = int(ga.group(1)), int(ga.group(2)), int(ga.group(3))
    chunked = "K by channel chunks" in kfused
    clast = chunked and views[vb][1][1] == 1  # x channels-last, padded to cp channels (decompose)
    xnhwc = bits["xh"] if nhwc else bits["x"].transpose(0, 2, 3, 1)
    wl, xl = bits["w"], None if nhwc else bits["x"]
    if clast:
        cp = kk // (kh * kw)
        xl = np.zeros((n, h, w, cp), np.uint16)
        xl[..., :c] = xnhwc
        w4 = np.zeros((co, kh, kw, cp), np.uint16)
        w4[..., :c] = bits["w"].transpose(0, 2, 3, 1)
        rows = views[va][1][1]  # the padded rows' stride
        wl = np.zeros((co, rows), np.uint16)
        wl[:, :kk] = w4.reshape(co, kk)
        kc = cp
    elif chunked:  # decompose's re-laid weights: [co, c/kc, kh kw, kc]
        kc = 32
        wl = wl.reshape(co, c // kc, kc, kh * kw).transpose(0, 1, 3, 2)
    else:
        kc = 0
    data = {"b": bits["b"], "r": bits["r"], "z": np.zeros(ref.shape, np.uint16),
            views[va][0]: wl, views[vb][0]: xl}
    decl, pargs, outs = [], [], []
    for p, b in enumerate(order):
        bname, numel = bufs[b]
        arr = np.ascontiguousarray(data[b if b in data else bname]).ravel()
        assert arr.size == numel, (bname, arr.size, numel)
        arr.tofile(os.path.join(d, f"p{p}.bin"))
        ctype = "__half" if dt == "f16" else "__nv_bfloat16"
        decl.append(f'{ctype} *a{p} = new {ctype}[{numel}]; {{ FILE *f = fopen("{d}/p{p}.bin", "rb"); '
                    f'if (fread(a{p}, 2, {numel}, f) != {numel}) return 3; fclose(f); }}')
        pargs.append(f"a{p}")
        if bname == "z":
            outs.append(f'{{ FILE *f = fopen("{d}/out.bin", "wb"); fwrite(a{p}, 2, {numel}, f); fclose(f); }}')
    src = MAIN.replace("BF16", "true" if dt == "bf16" else "false").replace("PARAMDECL", "\n  ".join(decl)) \
        .replace("PARAMARGS", ", ".join(pargs)).replace("PARAMOUT", "\n  ".join(outs))
    with open(os.path.join(d, "main.cc"), "w") as f:
        f.write(src)
    att = os.path.join(HERE, "../attn_emulate")
    subprocess.run(["g++", "-std=c++17", "-O1", "-w", "-fsanitize=address", "-I", HERE, "-I", att, "-I", d, "-o",
                    os.path.join(d, "emu"), os.path.join(d, "main.cc"), os.path.join(att, "emu_rt.cc"), "-lpthread"],
                   check=True)
    r = subprocess.run([os.path.join(d, "emu"), str(grid), str(block)], capture_output=True, text=True,
                       env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))
    if r.returncode != 0 or "oob 0" not in r.stdout:
        print(r.stdout[-2000:], r.stderr[-3000:])
        return False, f"{name}: the emulation failed (rc {r.returncode})"
    got = from_bits(np.fromfile(os.path.join(d, "out.bin"), np.uint16), dt).reshape(ref.shape)
    err = np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30)
    tol = 1e-2 if dt == "f16" else 4e-2
    line = f"{name}: grid {grid} block {block}{f' kc {kc}' if kc else ''}{' channels-last' if clast else ''} {dt}: max error {err:.2e} (of the largest |z|)"
    return err <= tol and np.all(np.isfinite(got)), line


def read_safetensors(path):
    import json, struct
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        buf = raw[8 + n + a:8 + n + b]
        dt = v["dtype"]
        if dt == "F16":
            arr = np.frombuffer(buf, np.float16).astype(np.float64)
        elif dt == "BF16":
            arr = from_bits(np.frombuffer(buf, np.uint16).copy(), "bf16")
        else:
            arr = np.frombuffer(buf, np.float32).astype(np.float64)
        out[k] = arr.reshape(v["shape"])
    return out


def main():
    names = sys.argv[1:] or list(CASES)
    work = tempfile.mkdtemp(prefix="conv_emu_")
    bad = 0
    for nm in names:
        ok, line = run_case(nm, CASES[nm], work)
        print(("ok   " if ok else "FAIL ") + line, flush=True)
        bad += not ok
    print(f"{len(names) - bad} of {len(names)} cases match the ref interpreter")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
