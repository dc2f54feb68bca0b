#!/usr/bin/env python3
"""The GPT-2 block peer of torch_gpu.py (the shared peers folder), alone: eager and torch.compile
on gpt2_block f32 and bf16 (8 x 1024 x 768), so that a short GPU call can time minic's block
beside the very function the suite's peer runs. Takes the definitions of torch_gpu.py (the text
before its `with torch.no_grad():`) and runs only the two blocks.

    python3 bench/gpu/block_peer.py PEERS_DIR/torch_gpu.py
"""
import json, sys

src = open(sys.argv[1]).read()
defs = src[: src.index("with torch.no_grad():")]
env = {"__name__": "torch_gpu_defs"}
exec(compile(defs, sys.argv[1], "exec"), env)
torch, R, run, block, res = env["torch"], env["R"], env["run"], env["block"], env["res"]
with torch.no_grad():
    C = 768
    p = (R(C), R(C), R(3 * C, C) * .03, R(3 * C), R(C, C) * .03, R(C), R(C), R(C), R(4 * C, C) * .03,
         R(4 * C), R(C, 4 * C) * .03, R(C))
    pb = tuple(t.bfloat16() for t in p)
    run("gpt2_block_bf16_8x1024x768", block, (R(8, 1024, C, dt=torch.bfloat16), *pb), modes=("eager", "compile"))
    run("gpt2_block_f32_8x1024x768", block, (R(8, 1024, C), *p), modes=("eager", "compile"))
print("JSON " + json.dumps(res))
