#!/usr/bin/env python3
"""Run minic's generated CUDA attention kernel on the host: the source `minic dump --stage code
--backend cuda` prints, compiled by g++ with emu.h (one std::thread per CUDA thread, barriers for
__syncthreads and for each shuffle, shared memory as statics since blocks run one at a time,
cp.async as a copy, every parameter a bounds-checked pointer). cases.py drives it."""
import os, re, subprocess, sys, random
import numpy as np
MINIC = os.environ.get("MINIC", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../build-test/minic"))
HERE = os.path.dirname(os.path.abspath(__file__))

def dump(graph, env):
    e = dict(os.environ); e.update(env)
    code = subprocess.run([MINIC, "dump", graph, "--stage", "code", "--backend", "cuda", "--quiet"], env=e,
                          capture_output=True, text=True, check=True).stdout
    fused = subprocess.run([MINIC, "dump", graph, "--stage", "fused", "--quiet"], env=e,
                           capture_output=True, text=True, check=True).stdout
    return code, fused

def parse(code, fused):
    kernels = code.split("// ---- kernel ")
    att = [k for k in kernels if "(attention, " in k]
    assert len(att) == 1, "want one attention kernel"
    k = att[0]
    m = re.search(r"// launch: grid \((\d+), (\d+), (\d+)\), block (\d+), (\S+)", k)
    grid, block, scheme = int(m.group(1)), int(m.group(4)), m.group(5)
    body = k[k.index("/* minic kernel"):]
    # drop the cp.async helpers (emulated in emu.h)
    body = re.sub(r"MC_D void mc_cp16\(.*?\n}\n", "", body, flags=re.S)
    body = re.sub(r"MC_D void mc_cp_commit\(\).*\n", "", body)
    body = re.sub(r"MC_D void mc_cp_wait1\(\).*\n", "", body)
    sig = re.search(r'extern "C" __global__ void __launch_bounds__\([^)]*\) (\w+)\(([^)]*)\)', body)
    name, params = sig.group(1), sig.group(2)
    newparams = re.sub(r"(const )?(float|bool|int) \*p(\d+)", lambda mm: "CP<%s> p%s" % (mm.group(2), mm.group(3)), params)
    body = body.replace(sig.group(0), 'static void emu_kernel(%s)' % newparams)
    # buffers and the params' buffers (params: buffers in the order of their first view)
    bufs = {}
    for mm in re.finditer(r"^\s+b(\d+)\((\w+)\) (\w+) (\w+)\[(\d+)\]", fused, re.M):
        bufs[int(mm.group(1))] = (mm.group(2), mm.group(4), int(mm.group(5)))
    kern = fused[fused.index("\nkernel attn"):]
    order = []
    for mm in re.finditer(r"^\s+v\d+ = b(\d+)\(", kern, re.M):
        b = int(mm.group(1))
        if b not in order:
            order.append(b)
    plist = [(p, bufs[b]) for p, b in enumerate(order)]
    return body, grid, block, scheme, plist

MAIN = r'''
#include "emu.h"
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <thread>
template <class T> struct CP {
  T *base; long long n; const char *nm;
  T &operator[](long long i) const { if (i < 0 || i >= n) { fprintf(stderr, "OOB %s[%lld] of %lld\n", nm, i, n); emu_oob++; static T dummy{}; return dummy; } return base[i]; }
  T *operator+(long long i) const { if (i < 0 || i + (long long)(16 / sizeof(T)) > n || ((i * (long long)sizeof(T)) % 16)) { fprintf(stderr, "OOB/misaligned cp %s+%lld of %lld\n", nm, i, n); emu_oob++; return base; } return base + i; }
  operator T *() const { return base; }
};
extern thread_local emu_dim3 threadIdx, blockIdx;
extern long emu_oob;
#include "kernel.inc"
int main(int argc, char **argv) {
  int grid = atoi(argv[1]), block = atoi(argv[2]);
  PARAMDECL
  pthread_barrier_init(&emu_cta, nullptr, block);
  for (int w = 0; w < block / 32; w++) pthread_barrier_init(&emu_warp[w], nullptr, 32);
  for (int b = 0; b < grid; b++) {
    std::vector<std::thread> th;
    for (int t = 0; t < block; t++) th.emplace_back([&, t] { threadIdx = {(unsigned)t, 0, 0}; blockIdx = {(unsigned)b, 0, 0}; emu_kernel(PARAMARGS); });
    for (auto &x : th) x.join();
  }
  PARAMOUT
  printf("oob %ld\n", emu_oob);
  return 0;
}
'''

def run_kernel(tag, body, grid, block, plist, inputs, workdir):
    d = os.path.join(workdir, tag)
    os.makedirs(d, exist_ok=True)
    mut = os.environ.get("EMU_MUTATE")
    if mut and tag == "new":
        a, b = mut.split("=>")
        assert a in body, "mutation target not found"
        body = body.replace(a, b)
    open(os.path.join(d, "kernel.inc"), "w").write(body)
    decl, args, out = [], [], []
    for p, (bname, dt, n) in plist:
        ct = {"f32": "float", "bool": "bool", "i32": "int"}[dt]
        decl.append('%s *a%d = new %s[%d](); { FILE *f = fopen("%s/%s.bin", "rb"); if (f) { if (fread(a%d, sizeof(%s), %d, f) != %d) return 3; fclose(f); } else { for (int e = 0; e < %d; e++) a%d[e] = (%s)1e30; } }'
                    % (ct, p, ct, n, workdir, bname, p, ct, n, n, n, p, ct))
        args.append('CP<%s>{a%d, %d, "%s"}' % (ct, p, n, bname))
        out.append('{ FILE *f = fopen("%s/out_%s.bin", "wb"); fwrite(a%d, sizeof(%s), %d, f); fclose(f); }' % (d, bname, p, ct, n))
    src = MAIN.replace("PARAMDECL", "\n  ".join(decl)).replace("PARAMARGS", ", ".join(args)).replace("PARAMOUT", "\n  ".join(out))
    open(os.path.join(d, "main.cc"), "w").write(src)
    subprocess.run(["g++", "-std=c++17", "-O1", "-w", "-I", HERE, "-I", d, "-o", os.path.join(d, "emu"),
                    os.path.join(d, "main.cc"), os.path.join(HERE, "emu_rt.cc"), "-lpthread"], check=True)
    r = subprocess.run([os.path.join(d, "emu"), str(grid), str(block)], capture_output=True, text=True)
    if r.returncode != 0 or "oob 0" not in r.stdout:
        print(r.stdout[-2000:], r.stderr[-2000:]); raise SystemExit("emulation failed: " + tag)
    return d
