#!/usr/bin/env python3
"""Write the benchmark workloads of ../shared/peers/README.md as .graph files.

    python3 bench/workloads.py small DIR   # examples/: small sizes, < 1 s on the reference backend
    python3 bench/workloads.py gpu DIR     # the GPU sizes the peers measure
    python3 bench/workloads.py cpu DIR     # the CPU sizes the peers measure

One description per workload, so the examples and the benchmarks cannot drift apart.
"""
import os, sys

SIZES = {
    "small": dict(pw=(64, 256), mlp=(32, 128, 512), ln=(64, 256), sm=(64, 256), gpt=(2, 32, 64, 4)),
    "gpu": dict(pw=(8192, 8192), mlp=(8192, 1024, 4096), ln=(8192, 4096), sm=(8192, 4096), gpt=(8, 1024, 768, 12)),
    "cpu": dict(pw=(4096, 4096), mlp=(512, 1024, 4096), ln=(4096, 4096), sm=(4096, 4096), gpt=(2, 128, 768, 12)),
}


def pointwise(r, c, dt="f32"):
    return f"""graph pointwise
# gelu(x * s + b) + x, s and b broadcast along rows
input x : {dt}[{r}, {c}]
param s : {dt}[{c}]
param b : {dt}[{c}]
t = mul(x, s)
u = add(t, b)
g = gelu(u)
y = add(g, x)
output y
"""


def mlp(m, d, h, dt="f32", final_ln=False):
    name = "mlp_ln" if final_ln else "mlp"
    text = f"""graph {name}
# linear -> gelu -> linear + x (PyTorch Linear: weights are [out, in])
input x      : {dt}[{m}, {d}]
param fc1.w  : {dt}[{h}, {d}]
param fc1.b  : {dt}[{h}]
param fc2.w  : {dt}[{d}, {h}]
param fc2.b  : {dt}[{d}]
h = linear(x, fc1.w, fc1.b)
a = gelu(h)
o = linear(a, fc2.w, fc2.b)
y = add(o, x)
"""
    if final_ln:
        text += f"""param ln.w : {dt}[{d}]
param ln.b : {dt}[{d}]
z = layernorm(y, ln.w, ln.b, eps=1e-5)
output z
"""
    else:
        text += "output y\n"
    return text


def layernorm(r, c):
    return f"""graph layernorm
input x : f32[{r}, {c}]
param w : f32[{c}]
param b : f32[{c}]
y = layernorm(x, w, b, eps=1e-5)
output y
"""


def softmax(r, c):
    return f"""graph softmax
input x : f32[{r}, {c}]
s = mul(x, 0.125)
y = softmax(s, axis=-1)
output y
"""


def small_mlp(m=32, d=256, layers=4):
    lines = ["graph small_mlp", "# 4 x (linear 256->256, relu): launch-bound", f"input x : f32[{m}, {d}]"]
    for i in range(layers):
        lines += [f"param l{i}.w : f32[{d}, {d}]", f"param l{i}.b : f32[{d}]"]
    prev = "x"
    for i in range(layers):
        lines += [f"h{i} = linear({prev}, l{i}.w, l{i}.b)", f"r{i} = relu(h{i})"]
        prev = f"r{i}"
    lines.append(f"output {prev}")
    return "\n".join(lines) + "\n"


def gpt2_block(b, t, c, heads, dt="f32"):
    d = c // heads
    return f"""graph gpt2_block
# pre-LayerNorm GPT-2 block: causal self-attention ({heads} heads) + MLP
input x      : {dt}[{b}, {t}, {c}]
param ln1.w  : {dt}[{c}]
param ln1.b  : {dt}[{c}]
param attn.w : {dt}[{3 * c}, {c}]
param attn.b : {dt}[{3 * c}]
param proj.w : {dt}[{c}, {c}]
param proj.b : {dt}[{c}]
param ln2.w  : {dt}[{c}]
param ln2.b  : {dt}[{c}]
param fc.w   : {dt}[{4 * c}, {c}]
param fc.b   : {dt}[{4 * c}]
param out.w  : {dt}[{c}, {4 * c}]
param out.b  : {dt}[{c}]
h    = layernorm(x, ln1.w, ln1.b, eps=1e-5)
qkv  = linear(h, attn.w, attn.b)
q0   = slice(qkv, axis=2, start=0, end={c})
k0   = slice(qkv, axis=2, start={c}, end={2 * c})
v0   = slice(qkv, axis=2, start={2 * c}, end={3 * c})
q1   = reshape(q0, shape=[{b}, {t}, {heads}, {d}])
k1   = reshape(k0, shape=[{b}, {t}, {heads}, {d}])
v1   = reshape(v0, shape=[{b}, {t}, {heads}, {d}])
q    = transpose(q1, perm=[0, 2, 1, 3])
kt   = transpose(k1, perm=[0, 2, 3, 1])
v    = transpose(v1, perm=[0, 2, 1, 3])
s0   = matmul(q, kt)
s    = mul(s0, {1.0 / d ** 0.5!r})
row  = iota(shape=[{t}, {t}], axis=0)
col  = iota(shape=[{t}, {t}], axis=1)
keep = ge(row, col)
sm   = where(keep, s, -inf)
p    = softmax(sm, axis=-1)
y0   = matmul(p, v)
y1   = transpose(y0, perm=[0, 2, 1, 3])
y    = reshape(y1, shape=[{b}, {t}, {c}])
a    = linear(y, proj.w, proj.b)
x1   = add(x, a)
h2   = layernorm(x1, ln2.w, ln2.b, eps=1e-5)
f    = linear(h2, fc.w, fc.b)
g    = gelu(f)
o    = linear(g, out.w, out.b)
x2   = add(x1, o)
output x2
"""


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in SIZES:
        sys.exit(__doc__)
    size, out = sys.argv[1], sys.argv[2]
    s = SIZES[size]
    os.makedirs(out, exist_ok=True)
    files = {
        "pointwise": pointwise(*s["pw"]),
        "mlp": mlp(*s["mlp"]),
        "mlp_ln": mlp(*s["mlp"], final_ln=True),
        "layernorm": layernorm(*s["ln"]),
        "softmax": softmax(*s["sm"]),
        "small_mlp": small_mlp(),
        "gpt2_block": gpt2_block(*s["gpt"]),
    }
    if size != "small":
        files["mlp_bf16"] = mlp(*s["mlp"], dt="bf16")
        files["gpt2_block_bf16"] = gpt2_block(*s["gpt"], dt="bf16")
    for name, text in files.items():
        with open(os.path.join(out, name + ".graph"), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
