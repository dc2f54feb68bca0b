#!/usr/bin/env python3
"""ResNet-18 (torchvision's layout: the 7x7 stem, a maxpool, four stages of two basic blocks,
global average pool, fc) as an ONNX file with seeded random weights, each batchnorm folded into
its conv's bias as PyTorch's exporter writes it, opset 13, input [1, 3, 224, 224] f32. For the
CPU comparison with ONNX Runtime on a machine without PyTorch: it needs python3-onnx and numpy
only (bench/cpu/resnet18_ort.py exports torchvision's own model where PyTorch is installed).

    python3 bench/cpu/resnet18_synth.py DIR        # writes DIR/model.onnx, DIR/input.npy
    minic run DIR/model.onnx --backend ref --input input=DIR/input.npy --output DIR/expected.npy
    ORT=<dir>/node_modules/onnxruntime-node node bench/cpu/ort_gpt2.js DIR 2 50
    taskset -c 0,1 minic run DIR/model.onnx --backend cpu --threads 2 --iters 50 --input input=DIR/input.npy

(ort_gpt2.js reports its error against DIR/expected.npy: here minic's float64-accumulating
reference rather than PyTorch.)
"""
import os, sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(out):
    rng = np.random.default_rng(0)
    nodes, inits, count = [], [], [0]

    def param(name, arr):
        inits.append(numpy_helper.from_array(arr.astype(np.float32), name))
        return name

    def fresh(prefix):
        count[0] += 1
        return f"{prefix}{count[0]}"

    def conv(x, cin, cout, k, stride, pad, relu):
        name = fresh("conv")
        w = param(name + ".w", rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k)))
        b = param(name + ".b", rng.uniform(-0.1, 0.1, cout))
        y = fresh("t")
        nodes.append(helper.make_node("Conv", [x, w, b], [y], kernel_shape=[k, k], strides=[stride] * 2, pads=[pad] * 4))
        if not relu:
            return y
        r = fresh("t")
        nodes.append(helper.make_node("Relu", [y], [r]))
        return r

    def block(x, cin, cout, stride):
        y = conv(conv(x, cin, cout, 3, stride, 1, True), cout, cout, 3, 1, 1, False)
        identity = conv(x, cin, cout, 1, stride, 0, False) if stride != 1 or cin != cout else x
        s, r = fresh("t"), fresh("t")
        nodes.append(helper.make_node("Add", [y, identity], [s]))
        nodes.append(helper.make_node("Relu", [s], [r]))
        return r

    x = conv("input", 3, 64, 7, 2, 3, True)
    m = fresh("t")
    nodes.append(helper.make_node("MaxPool", [x], [m], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4))
    x, cin = m, 64
    for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        x = block(block(x, cin, cout, stride), cout, cout, 1)
        cin = cout
    g, f = fresh("t"), fresh("t")
    nodes.append(helper.make_node("GlobalAveragePool", [x], [g]))
    nodes.append(helper.make_node("Flatten", [g], [f], axis=1))
    fw = param("fc.w", rng.standard_normal((1000, 512)) * 0.04)
    fb = param("fc.b", rng.uniform(-0.1, 0.1, 1000))
    nodes.append(helper.make_node("Gemm", [f, fw, fb], ["output"], transB=1))
    graph = helper.make_graph(nodes, "resnet18", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1000])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    os.makedirs(out, exist_ok=True)
    onnx.save(model, os.path.join(out, "model.onnx"))
    np.save(os.path.join(out, "input.npy"), rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
    print(f"wrote {out}/model.onnx ({len(nodes)} nodes) and {out}/input.npy")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build(sys.argv[1])
