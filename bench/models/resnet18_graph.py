#!/usr/bin/env python3
"""ResNet-18 written as a minic .graph with its batchnorms over params (so passes/fold.c folds
those whose conv's weights are no larger than its output), and a .safetensors of seeded weights
whose batchnorm variances are positive (minic's own generator draws params from [-1, 1), which
would make var + eps negative). Python's standard library only.

    python3 bench/models/resnet18_graph.py OUT_DIR [--batch B] [--size S] [--dtype f32|f16|bf16]
                                           [--var-input]

writes OUT_DIR/resnet18.graph and OUT_DIR/weights.safetensors. --var-input declares every
batchnorm's var an input instead (nothing folds: the unfolded twin, given the same values with
--input c<i>.v=FILE.npy, or left to the generator for timing only).
Then, e.g.:  minic bench OUT_DIR/resnet18.graph --weights OUT_DIR/weights.safetensors --backend cuda
"""
import argparse, json, math, os, random, struct


def half_bits(x, dtype):
    if dtype == "bf16":
        b = struct.unpack("<I", struct.pack("<f", x))[0]
        return (b + 0x7FFF + ((b >> 16) & 1)) >> 16  # round to nearest even
    return struct.unpack("<H", struct.pack("<e", x))[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"])
    ap.add_argument("--var-input", action="store_true")
    a = ap.parse_args()
    dt, rng = a.dtype, random.Random(0)
    lines = ["graph resnet18", f"input x : {dt}[{a.batch}, 3, {a.size}, {a.size}]"]
    tensors = {}  # name -> (shape, values)
    count = [0]

    def param(name, shape, values):
        lines.append(f"param {name} : {dt}[{', '.join(map(str, shape))}]")
        tensors[name] = (shape, values)

    def conv_bn(x, cin, cout, k, s, p, relu):
        i = count[0]
        count[0] += 1
        bound = 1 / math.sqrt(cin * k * k)
        param(f"c{i}.w", [cout, cin, k, k], [rng.uniform(-bound, bound) for _ in range(cout * cin * k * k)])
        param(f"c{i}.s", [cout], [rng.uniform(0.5, 1.5) for _ in range(cout)])
        param(f"c{i}.b", [cout], [rng.uniform(-0.2, 0.2) for _ in range(cout)])
        param(f"c{i}.m", [cout], [rng.uniform(-0.2, 0.2) for _ in range(cout)])
        var = [rng.uniform(0.05, 1.0) for _ in range(cout)]
        if a.var_input:
            lines.append(f"input c{i}.v : {dt}[{cout}]")
        else:
            param(f"c{i}.v", [cout], var)
        lines.append(f"c{i} = conv({x}, c{i}.w, stride=[{s}, {s}], padding=[{p}, {p}])")
        lines.append(f"n{i} = batchnorm(c{i}, c{i}.s, c{i}.b, c{i}.m, c{i}.v)")
        if not relu:
            return f"n{i}"
        lines.append(f"r{i} = relu(n{i})")
        return f"r{i}"

    h = conv_bn("x", 3, 64, 7, 2, 3, True)
    lines.append(f"p0 = maxpool({h}, kernel=[3, 3], stride=[2, 2], padding=[1, 1])")
    h, cin, j = "p0", 64, 0
    for cout, s in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for blk in range(2):
            st = s if blk == 0 else 1
            y = conv_bn(conv_bn(h, cin, cout, 3, st, 1, True), cout, cout, 3, 1, 1, False)
            sc = conv_bn(h, cin, cout, 1, st, 0, False) if st != 1 or cin != cout else h
            lines += [f"a{j} = add({y}, {sc})", f"o{j} = relu(a{j})"]
            h, cin, j = f"o{j}", cout, j + 1
    lines.append(f"g = mean({h}, axis=[2, 3])")
    param("fc.w", [1000, 512], [rng.uniform(-0.04, 0.04) for _ in range(512000)])
    param("fc.b", [1000], [rng.uniform(-0.04, 0.04) for _ in range(1000)])
    lines += ["y = linear(g, fc.w, fc.b)", "output y"]

    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "resnet18.graph"), "w") as f:
        f.write("\n".join(lines) + "\n")
    size = 4 if dt == "f32" else 2
    header, off = {}, 0
    for name, (shape, vals) in tensors.items():
        n = len(vals) * size
        header[name] = {"dtype": {"f32": "F32", "f16": "F16", "bf16": "BF16"}[dt], "shape": shape,
                        "data_offsets": [off, off + n]}
        off += n
    hj = json.dumps(header).encode()
    hj += b" " * (-len(hj) % 8)
    with open(os.path.join(a.out, "weights.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj)
        for name, (shape, vals) in tensors.items():
            if dt == "f32":
                f.write(struct.pack(f"<{len(vals)}f", *vals))
            else:
                f.write(struct.pack(f"<{len(vals)}H", *(half_bits(v, dt) for v in vals)))
    print(f"wrote {a.out}/resnet18.graph ({count[0]} conv+batchnorm) and {a.out}/weights.safetensors")


if __name__ == "__main__":
    main()
