#!/usr/bin/env python3
"""Registers, spills and main-loop instructions of minic's generated implicit-GEMM conv kernel,
without a GPU: the conv kernel of GRAPH rendered for the default CUDA target (`minic dump
--stage code --backend cuda`, under the given MINIC_* settings), compiled to PTX by nvcc
(-arch=sm_90) and assembled by `ptxas -v`. Prints ptxas's registers and spill bytes and, for
the K loop (the backward branch whose body holds the most mma.sync: the loop unrolled D
tiles), its PTX instructions per mma and the commonest opcodes. PTX, not SASS: predicated
loads show as branches, and every case of a switch counts.

    MINIC=build-test/minic /usr/bin/python3 scripts/conv_emulate/ptx_stats.py G.graph [ENV=V ...]
    (needs /usr/local/cuda/bin/nvcc and ptxas)"""
import os, re, shutil, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")


def main():
    g = sys.argv[1]
    env = dict(os.environ)
    for a in sys.argv[2:]:
        k, v = a.split("=", 1)
        env[k] = v
    minic = env.get("MINIC", os.path.join(HERE, "../../build-test/minic"))
    src = subprocess.run([minic, "dump", g, "--stage", "code", "--backend", "cuda", "--quiet"], env=env,
                         capture_output=True, text=True, check=True).stdout
    parts = re.split(r"^// ---- kernel \d+: .*$", src, flags=re.M)
    prelude = parts[1].split("// launch:")[0]  # the first kernel's part opens with the prelude
    conv = [p for p in parts[1:] if "conv-implicit-mma" in p]
    if not conv:
        raise SystemExit("no implicit-GEMM conv kernel in " + g)
    conv = conv[0]
    launch = re.search(r"// launch: (.*)", conv).group(1)
    body = conv[conv.index("\n", conv.index("// launch:")):]
    work = tempfile.mkdtemp(prefix="ptx_stats_")
    cu, ptx = os.path.join(work, "k.cu"), os.path.join(work, "k.ptx")
    with open(cu, "w") as f:
        f.write(prelude + body)
    subprocess.run([os.path.join(CUDA, "bin/nvcc"), "-arch=sm_90", "-ptx", "-o", ptx, cu], check=True,
                   capture_output=True)
    r = subprocess.run([os.path.join(CUDA, "bin/ptxas"), "-arch=sm_90", "-v", ptx, "-o", os.devnull],
                       capture_output=True, text=True, check=True)
    regs = re.search(r"Used (\d+) registers", r.stderr).group(1)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", r.stderr)
    with open(ptx) as f:
        lines = f.read().splitlines()
    shutil.rmtree(work)
    labels = {m.group(1): i for i, l in enumerate(lines) if (m := re.match(r"\s*(\$\w+):", l))}
    best = None
    for i, l in enumerate(lines):
        m = re.search(r"bra(?:\.uni)?\s+(\$\w+);", l)
        if m and m.group(1) in labels and labels[m.group(1)] < i:
            seg = lines[labels[m.group(1)]:i + 1]
            n = sum("mma.sync" in s for s in seg)
            if n and (best is None or n > best[0]):
                best = (n, seg)
    print(f"{launch}: {regs} registers, spill stores/loads {spill.group(1)}/{spill.group(2)} bytes")
    if best:
        ins = [s.strip() for s in best[1] if s.strip() and not s.strip().startswith(("//", "{", "}"))
               and not s.strip().endswith(":")]
        ops = {}
        for s in ins:
            t = s.split()
            op = (t[1] if t[0].startswith("@") else t[0]).split(".")[0]
            ops[op] = ops.get(op, 0) + 1
        top = " ".join(f"{k}:{v}" for k, v in sorted(ops.items(), key=lambda x: -x[1])[:14])
        print(f"K loop: {len(ins)} PTX instructions, {best[0]} mma.sync: {len(ins) / best[0]:.2f} a mma; {top}")


if __name__ == "__main__":
    main()
