#!/usr/bin/env bash
# Run HERE (Debian 12) before the GPU call: builds minic and the node-test runner with the CUDA
# backend and ONNX on (no LLVM, Release), and stages in one folder what the GPU machine lacks:
#   STAGE/minic, STAGE/onnx_node_runner   the binaries
#   STAGE/lib/libprotobuf-c.so.1*          Debian's libprotobuf-c1 (apt-get download + dpkg -x):
#                                          the GPU machine has no protobuf-c
#   STAGE/onnx_node/                       ONNX's node tests as Debian's python3-onnx 1.12
#                                          generates them (the GPU machine's onnx is another
#                                          version, with another set of tests)
# Then carry STAGE to the GPU machine and run bench/onnx/gpu_run.sh there.
#   bash bench/onnx/stage.sh [STAGE (default .deps/onnx-gpu)]
set -euo pipefail
cd "$(dirname "$0")/../.."
S=${1:-.deps/onnx-gpu}
B=${MINIC_GPU_BUILD:-build-gpu}
rm -rf "$S" && mkdir -p "$S/lib"
cmake -S . -B "$B" -DMINIC_WITH_LLVM=OFF -DMINIC_WITH_CUDA=ON -DMINIC_WITH_ONNX=ON -DMINIC_SANITIZE=OFF \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="-Wno-error=maybe-uninitialized" \
    $(command -v ccache >/dev/null && echo -DCMAKE_C_COMPILER_LAUNCHER=ccache) >"$S/configure.log"
grep -q "CUDA backend: ON;.*ONNX import (protobuf-c): ON" "$S/configure.log" ||
    { echo "stage.sh: CUDA or ONNX is off in $B:" >&2; grep "minic:" "$S/configure.log" >&2; exit 1; }
nice cmake --build "$B" -j"$(nproc)" --target minic onnx_node_runner >/dev/null
cp "$B/minic" "$B/onnx_node_runner" "$S/"
tmp=$(mktemp -d)
(cd "$tmp" && apt-get download libprotobuf-c1 >/dev/null && dpkg -x libprotobuf-c1_*.deb root)
cp -a "$tmp"/root/usr/lib/*/libprotobuf-c.so.1* "$S/lib/"
rm -rf "$tmp"
if [ -f "${MINIC_NODE_DATA:-build-test/onnx_node}/.complete" ]; then
    cp -a "${MINIC_NODE_DATA:-build-test/onnx_node}" "$S/onnx_node"
else
    /usr/bin/python3 tests/onnx_node/generate.py "$S/gen" >/dev/null && mv "$S/gen/node" "$S/onnx_node" && rm -rf "$S/gen"
fi
ldd "$S/minic" | grep -q "not found" && { echo "stage.sh: minic misses a library:" >&2; ldd "$S/minic" >&2; }
echo "staged $(ls "$S/onnx_node" | grep -c '^test_') node tests, $(du -sh "$S" | cut -f1) in $S"
