#!/usr/bin/env python3
"""Run minic's generated CUDA pointwise kernels on the host and compare them with the ref
interpreter, without a GPU: each case is a small graph that fuses into pointwise kernels
(padded pools, gathers at computed or given indices, a reversed slice), its kernels as `minic dump
--stage code --backend cuda` prints them (prelude included), compiled by g++ with host_cuda.h (the
few CUDA names the prelude and a pointwise kernel use; blocks and threads run one after the other,
which a grid-stride loop without barriers allows), every buffer bounds-checked, its outputs
compared with `minic run --backend ref`. A case may expect a failed gather check (mc_err).
EMU_MUTATE='a=>b' (||-separated) replaces text in the kernels, to see a check fail. `--fuzz N
[SEED]`: N random graphs of index arithmetic gathering from a table (fuzz_graph).

    MINIC=build-test/minic python3 scripts/pool_emulate/emulate.py [CASE...]
    (needs numpy and g++ >= 12 for _Float16)
"""
import os, re, subprocess, sys, tempfile
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MINIC = os.environ.get("MINIC", os.path.join(HERE, "../../build-test/minic"))

# name: (graph text, {input: numpy array or None (minic's generator)}, expect a failed check)
def idx(shape, lo, hi, seed=1):
    return np.random.default_rng(seed).integers(lo, hi, size=shape).astype(np.int32)

CASES = {
    "maxpool_f16": ("input x : f16[2,3,9,11]\ny = maxpool(x, kernel=[3,3], stride=[2,2], padding=[1,1])\noutput y\n", {}, False),
    "maxpool_bf16_s1": ("input x : bf16[2,2,7,6]\ny = maxpool(x, kernel=[3,3], stride=[1,1], padding=[1,1])\noutput y\n", {}, False),
    "maxpool_f32_k2p1": ("input x : f32[1,4,8,8]\ny = maxpool(x, kernel=[2,2], stride=[2,2], padding=[1,1])\noutput y\n", {}, False),
    "maxpool_v2": ("input x : f16[2,3,12,20]\ny = maxpool(x, kernel=[3,3], stride=[2,2], padding=[1,1])\noutput y\n", {}, False),
    "maxpool_v8": ("input x : f16[2,3,12,32]\ny = maxpool(x, kernel=[3,3], stride=[2,2], padding=[1,1])\noutput y\n", {}, False),
    "avgpool_v8": ("input x : f32[2,3,12,16]\ny = avgpool(x, kernel=[3,3], stride=[2,2], padding=[1,1])\noutput y\n", {}, False),
    "maxpool_1d": ("input x : f16[2,3,13]\ny = maxpool(x, kernel=[3], stride=[2], padding=[1])\noutput y\n", {}, False),
    "avgpool_f16": ("input x : f16[2,3,9,11]\ny = avgpool(x, kernel=[3,3], stride=[2,2], padding=[1,1])\noutput y\n", {}, False),
    "maxpool_special": ("input x : f16[1,2,5,6]\ny = maxpool(x, kernel=[3,3], stride=[2,2], padding=[1,1])\noutput y\n",
                        {"x": np.array([np.nan, np.inf, -np.inf, 65504, -65504, 0.5] * 10, np.float16).reshape(1, 2, 5, 6)},
                        False),
    "avgpool_bf16": ("input x : bf16[2,2,6,7]\ny = avgpool(x, kernel=[3,3], stride=[2,2], padding=[1,1])\noutput y\n", {}, False),
    "avgpool_f32_k5": ("input x : f32[1,2,10,7]\ny = avgpool(x, kernel=[5,5], stride=[3,2], padding=[2,2])\noutput y\n", {}, False),
    "gather_ids": ("input w : f32[10,8]\ninput ids : i32[3,5]\ny = gather(w, ids)\noutput y\n",
                   {"ids": idx((3, 5), -10, 10)}, False),
    "gather_ids_bad": ("input w : f32[10,8]\ninput ids : i32[3,5]\ny = gather(w, ids)\noutput y\n",
                       {"ids": np.array([[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [1, 2, 10, 3, 4]], np.int32)}, True),
    "gather_axis1_relu": ("input w : f16[4,12,6]\ninput ids : i32[7]\nt = gather(w, ids, axis=1)\ny = relu(t)\noutput y\n",
                          {"ids": idx((7,), -12, 12)}, False),
    "gather_reversed": ("input w : f16[10,64]\ni = iota(shape=[10], axis=0)\nm = full(shape=[10], value=-1, dtype=i32)\n"
                        "j = sub(m, i)\ny = gather(w, j)\noutput y\n", {}, False),
    "gather_reversed_scalar": ("input w : f32[9,3]\ni = iota(shape=[4,9], axis=1)\nm = full(shape=[4,9], value=-1, dtype=i32)\n"
                               "j = sub(m, i)\ny = gather(w, j)\noutput y\n", {}, False),
    "slice_reverse": ("input x : f32[4,9,5]\ny = slice(x, axis=1, start=-1, end=-10, step=-2)\noutput y\n", {}, False),
    "conv_im2col": ("input x : f16[2,3,7,6]\ninput w : f16[4,3,3,3]\ny = conv(x, w, stride=[2,1], padding=[1,1])\noutput y\n",
                    {}, False),
}
# A conv's kernels: the im2col gather (pointwise, emulated) feeds a GEMM (not): the gathered
# columns are compared with numpy's im2col instead. name: (kh, kw, stride, padding)
IM2COL = {"conv_im2col": (3, 3, (2, 1), (1, 1))}
ENV = {"conv_im2col": {"MINIC_CUDA_IMPLICIT_CONV": "0"}, "maxpool_v2": {"MINIC_CUDA_GATHER_VEC": "2"},
       "maxpool_v8": {"MINIC_CUDA_GATHER_VEC": "0"}, "avgpool_v8": {"MINIC_CUDA_GATHER_VEC": "0"}}

HOST = r'''
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#define __device__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(n)
#define __restrict__
#define __align__(n) alignas(n)
struct emu_dim3 { unsigned x, y, z; };
static emu_dim3 threadIdx, blockIdx, gridDim, blockDim;
typedef _Float16 __half;
struct __nv_bfloat16 { uint16_t b; };
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline float __half2float(__half h) { return (float)h; }
static inline __half __float2half_rn(float f) { return (__half)f; }
static inline float __bfloat162float(__nv_bfloat16 h) { uint32_t u = (uint32_t)h.b << 16; float f; memcpy(&f, &u, 4); return f; }
static inline __nv_bfloat16 __float2bfloat16_rn(float x) {
  uint32_t u; memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {(uint16_t)((u >> 16) | 0x40)};
  return {(uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline int atomicCAS(int *p, int cmp, int v) { int o = *p; if (o == cmp) *p = v; return o; }
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int) { abort(); return v; }
'''

MAIN = r'''
template <class T> static T *zeros(size_t n) { return (T *)calloc(n, sizeof(T)); }
template <class T> static T *load(const char *path, size_t n) {
  T *v = zeros<T>(n);
  FILE *f = fopen(path, "rb");
  if (!f || fread(v, sizeof(T), n, f) != n) { fprintf(stderr, "cannot read %s\n", path); exit(2); }
  fclose(f);
  return v;
}
int main(int argc, char **argv) {
  int err[2] = {0, 0};
  int *mc_err = err;
  (void)argc; (void)mc_err;
%(decls)s
  gridDim = {%(grid)d, 1, 1}; blockDim = {%(block)d, 1, 1};
  for (unsigned b = 0; b < %(grid)du; b++)
    for (unsigned t = 0; t < %(block)du; t++) {
      blockIdx = {b, 0, 0}; threadIdx = {t, 0, 0};
      %(name)s(%(args)s);
    }
%(saves)s
  printf("err %d %d\n", err[0], err[1]);
  return 0;
}
'''

CTYPE = {"f32": ("float", np.float32), "f16": ("__half", np.float16), "bf16": ("__nv_bfloat16", np.uint16),
         "i32": ("int", np.int32), "bool": ("bool", np.bool_)}


def run(cmd, env=None, **kw):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(cmd, env=e, capture_output=True, text=True, **kw)


def bf16_of(a):
    """float32 array -> bf16 bits (round to nearest even), as minic stores them."""
    u = a.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def case(name, tmp):
    text, given, expect_fail = CASES[name]
    env = ENV.get(name, {})
    g = os.path.join(tmp, name + ".graph")
    with open(g, "w") as f:
        f.write("graph " + name + "\n" + text)
    inputs = {}
    args = [MINIC, "run", g, "--backend", "ref", "--quiet", "--save-inputs", os.path.join(tmp, name + ".in.safetensors")]
    for k, v in given.items():
        p = os.path.join(tmp, "%s.%s.npy" % (name, k))
        np.save(p, v)
        args += ["--input", "%s=%s" % (k, p)]
    out_ref = os.path.join(tmp, name + ".ref.npy")
    r = run(args + ["--output", out_ref], env)
    if expect_fail is None:  # whatever ref says
        expect_fail = r.returncode != 0
        if expect_fail and "outside" not in r.stderr and "gather" not in r.stderr:
            return "FAIL: ref: " + r.stderr
    if expect_fail:
        if r.returncode == 0:
            return "FAIL: ref accepted the bad index"
    elif r.returncode != 0:
        return "FAIL: ref: " + r.stderr
    # every input the run used, as raw arrays (safetensors: a JSON header then the bytes)
    import json, struct
    with open(os.path.join(tmp, name + ".in.safetensors"), "rb") as f:
        blob = f.read()
    (hl,) = struct.unpack("<Q", blob[:8])
    hdr = json.loads(blob[8:8 + hl])
    for k, meta in hdr.items():
        if k == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        raw = blob[8 + hl + a:8 + hl + b]
        with open(os.path.join(tmp, "%s.%s.raw" % (name, k)), "wb") as f:
            f.write(raw)
        inputs[k] = meta
    code = run([MINIC, "dump", g, "--stage", "code", "--backend", "cuda", "--quiet"], env, check=True).stdout
    fused = run([MINIC, "dump", g, "--stage", "fused", "--backend", "cuda", "--quiet"], env, check=True).stdout
    bufs = {}
    for mm in re.finditer(r"^\s+b(\d+)\(([\w.]+)\) (\w+) (\w+)\[(\d+)\]", fused, re.M):
        bufs[int(mm.group(1))] = (mm.group(2), mm.group(3), mm.group(4), int(mm.group(5)))
    kernels = code.split("// ---- kernel ")[1:]
    kirs = fused.split("\nkernel ")[1:]
    assert len(kernels) == len(kirs), "kernel lists differ"
    # buffers: inputs from their raw files, every other one zero-filled; kernels run in order
    decls, saves = [], []
    for b, (nm, kind, dt, n) in sorted(bufs.items()):
        ct = CTYPE[dt][0]
        if kind in ("input", "param"):
            decls.append('  %s *B%d = load<%s>("%s", %d);' % (ct, b, ct, os.path.join(tmp, "%s.%s.raw" % (name, nm)), n))
        else:
            decls.append("  %s *B%d = zeros<%s>(%d);" % (ct, b, ct, n))
        if kind == "output":
            saves.append('  { FILE *f = fopen("%s", "wb"); fwrite(B%d, sizeof(%s), %d, f); fclose(f); }'
                         % (os.path.join(tmp, name + ".out.raw"), b, ct, n))
    srcs, calls = [], []
    for ki, (k, kk) in enumerate(zip(kernels, kirs)):
        m = re.search(r"// launch: grid \((\d+), (\d+), (\d+)\), block (\d+), (\S+)", k)
        if name in IM2COL and m and m.group(5) != "pointwise":
            break
        if not m or m.group(5) != "pointwise" or int(m.group(2)) != 1:
            return "SKIP: kernel %d is not a pointwise kernel (%s)" % (ki, m.group(5) if m else "?")
        grid, block = int(m.group(1)), int(m.group(4))
        body = k[k.index("/* minic kernel"):]
        sig = re.search(r'extern "C" __global__ void __launch_bounds__\([^)]*\) (\w+)\(([^)]*)\)', body)
        order = []
        for mm in re.finditer(r"^\s+v\d+ = b(\d+)\(", kk, re.M):
            if int(mm.group(1)) not in order:
                order.append(int(mm.group(1)))
        params = [p.strip() for p in sig.group(2).split(",")]
        cargs = []
        for p in params:
            mm = re.search(r"\bp(\d+)$", p)
            if mm:
                cargs.append("B%d" % order[int(mm.group(1))])
            elif p.endswith("mc_err"):
                cargs.append("mc_err")
            else:
                return "SKIP: parameter " + p
        body = body.replace(sig.group(0), "static void %s(%s)" % (sig.group(1), sig.group(2)))
        for rule in filter(None, os.environ.get("EMU_MUTATE", "").split("||")):
            a, b = rule.split("=>")
            body = body.replace(a, b)
        srcs.append(body)
        if name in IM2COL: # keep the columns: the last pointwise kernel's store
            sv = re.search(r"^\s+store v(\d+) <-", kk, re.M).group(1)
            col = int(re.search(r"^\s+v%s = b(\d+)\(" % sv, kk, re.M).group(1))
            saves[:] = ['  { FILE *f = fopen("%s", "wb"); fwrite(B%d, sizeof(__half), %d, f); fclose(f); }'
                        % (os.path.join(tmp, name + ".out.raw"), col, bufs[col][3])]
        calls.append(MAIN_LAUNCH % {"grid": grid, "block": block, "name": sig.group(1), "args": ", ".join(cargs)})
    prelude = code[code.index("#define MC_INF"):code.index("// launch:")]
    prelude = "\n".join(l for l in prelude.split("\n") if not l.startswith("//"))
    main = MAIN.replace("%(decls)s", "\n".join(decls)).replace("%(saves)s", "\n".join(saves))
    main = re.sub(r"  gridDim = .*?\n    }\n", lambda _: "\n".join(calls) + "\n", main, flags=re.S)
    cc = os.path.join(tmp, name + ".cc")
    with open(cc, "w") as f:
        f.write(HOST + prelude + "\n" + "\n".join(srcs) + main)
    exe = os.path.join(tmp, name + ".exe")
    r = run(["g++", "-std=c++17", "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
             "-Wno-unused-variable", "-Wno-unused-but-set-variable", "-o", exe, cc])
    if r.returncode != 0:
        return "FAIL: g++:\n" + r.stderr[:3000]
    r = run([exe], {"ASAN_OPTIONS": "detect_leaks=0"})
    if r.returncode != 0:
        return "FAIL: the kernel: " + r.stderr[:3000]
    err = [int(x) for x in r.stdout.split()[1:3]]
    if expect_fail:
        return "ok (check %d failed at index %d)" % (err[0], err[1]) if err[0] != 0 else "FAIL: the bad index passed"
    if err[0] != 0:
        return "FAIL: a gather check failed (check %d, index %d)" % (err[0], err[1])
    ref = np.load(out_ref)
    dt = [v for v in bufs.values() if v[1] == "output"][0][2]
    if name in IM2COL:
        kh, kw, st, pd = IM2COL[name]
        x = np.fromfile(os.path.join(tmp, name + ".x.raw"), dtype=np.float16).reshape([int(d) for d in inputs["x"]["shape"]])
        n, c, h, w = x.shape
        xp = np.pad(x, ((0, 0), (0, 0), (pd[0], pd[0]), (pd[1], pd[1])))
        oh, ow = (h + 2 * pd[0] - kh) // st[0] + 1, (w + 2 * pd[1] - kw) // st[1] + 1
        ref = np.zeros((n, c, kh * kw, oh * ow), np.float16)
        for u in range(kh):
            for v in range(kw):
                ref[:, :, u * kw + v, :] = xp[:, :, u:u + st[0] * (oh - 1) + 1:st[0], v:v + st[1] * (ow - 1) + 1:st[1]].reshape(n, c, -1)
        dt = "f16"
    got = np.fromfile(os.path.join(tmp, name + ".out.raw"), dtype=CTYPE[dt][1])
    if dt == "bf16":
        got = (got.astype(np.uint32) << 16).view(np.float32)
        ref = (ref.astype(np.uint32) << 16).view(np.float32) if ref.dtype == np.uint16 else ref.astype(np.float32)
    got = got.reshape(ref.shape).astype(np.float64)
    ref = ref.astype(np.float64)
    np.seterr(invalid="ignore")
    same = (got == ref) | (np.isnan(got) & np.isnan(ref))
    tol = np.abs(got - ref) <= 1e-3 * (1 + np.abs(ref)) if dt in ("f16", "bf16") else np.abs(got - ref) <= 1e-6 * (1 + np.abs(ref))
    if not np.all(same | tol):
        bad = np.argwhere(~(same | tol))[:5]
        return "FAIL: %d of %d differ, e.g. at %s: %s vs ref %s" % (np.sum(~(same | tol)), ref.size, bad[0],
                                                                    got[tuple(bad[0])], ref[tuple(bad[0])])
    vec = ",".join(re.findall(r"vector width (\d+)", code))
    return "ok (%d values, %d kernel%s, vector width %s, %s)" % (ref.size, len(kernels), "s" if len(kernels) > 1 else "", vec,
                                                 "no gather check" if "mc_gather_index(v" not in code else "checked gathers")


MAIN_LAUNCH = '''  gridDim = {%(grid)d, 1, 1}; blockDim = {%(block)d, 1, 1};
  for (unsigned b = 0; b < %(grid)du; b++)
    for (unsigned t = 0; t < %(block)du; t++) {
      blockIdx = {b, 0, 0}; threadIdx = {t, 0, 0};
      %(name)s(%(args)s);
    }'''


def fuzz_graph(seed):
    """A random graph of index arithmetic over two iotas (every i32 operator kir_facts reads, of
    both signs, divisions by constants and by values) whose result indexes a table, and is also
    added to the gathered rows: the kernel's folded compares, aliases, plain divisions and
    unchecked gathers against ref (an out-of-range index must fail both)."""
    import random
    r = random.Random(seed)
    A, B, R = r.choice([3, 4, 5]), r.choice([2, 6, 7, 8]), r.choice([5, 9, 16])
    lines = ["input w : f32[%d,4]" % R, "i = iota(shape=[%d,%d], axis=1)" % (A, B),
             "j = iota(shape=[%d,%d], axis=0)" % (A, B)]
    vals = ["i", "j"]
    for n in range(r.randint(2, 9)):
        a, b = r.choice(vals), r.choice(vals)
        k = r.choice([-7, -3, -2, -1, 0, 1, 2, 3, 4, 5, 8])
        op = r.choice(["add", "sub", "mulk", "mul", "divk", "divk", "div", "maximum", "minimum", "where", "abs",
                       "neg", "clip"])
        v = "v%d" % n
        if op in ("add", "sub", "maximum", "minimum", "mul", "div"):
            lines.append("%s = %s(%s, %s)" % (v, op, a, b))
        elif op == "mulk":
            lines.append("%s = mul(%s, %d)" % (v, a, k))
        elif op == "divk":
            lines.append("%s = div(%s, %d)" % (v, a, k))
        elif op == "where":
            lines.append("c%d = %s(%s, %s)" % (n, r.choice(["lt", "le", "gt", "ge", "eq", "ne"]), a, b))
            lines.append("%s = where(c%d, %s, %s)" % (v, n, a, r.choice(vals)))
        elif op == "clip":
            lo = r.randint(-3, 3)
            lines.append("%s = clip(%s, min=%d, max=%d)" % (v, a, lo, lo + r.randint(0, 12)))
        else:
            lines.append("%s = %s(%s)" % (v, op, a))
        vals.append(v)
    idx = vals[-1]
    if r.random() < 0.6:  # usually kept inside the table, as a pool's clamp does
        lines.append("q = clip(%s, min=%d, max=%d)" % (idx, -R if r.random() < 0.3 else 0, R - 1))
        idx = "q"
    lines += ["y = gather(w, %s)" % idx, "f = cast(%s, to=f32)" % r.choice(vals),
              "e = reshape(f, shape=[%d,%d,1])" % (A, B), "z = add(y, e)", "output z"]
    return "\n".join(lines) + "\n"


def fuzz(n, first):
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(first, first + n):
            text = fuzz_graph(seed)
            name = "fuzz%d" % seed
            CASES[name] = (text, {}, None)
            res = case(name, tmp)
            if not res.startswith("ok"):
                print("%s: %s\n%s" % (name, res, text))
                failed += res.startswith("FAIL")
    print("fuzz: %d graphs from seed %d, %d failed" % (n, first, failed))
    return failed


def main():
    if sys.argv[1:2] == ["--fuzz"]:  # --fuzz N [FIRST_SEED]
        sys.exit(1 if fuzz(int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 0) else 0)
    names = sys.argv[1:] or list(CASES)
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n in names:
            res = case(n, tmp)
            print("%-22s %s" % (n, res))
            failed += res.startswith("FAIL")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
