#!/usr/bin/env bash
# The conv variants of branch convnhwc in one GPU call (<= 5 minutes), from the repository root
# with build-gpu/ built: the conv conformance rows as before the chunks (=0), then
# bench/onnx/conv_variants.py (ResNet-18 f16 B=32 onnx and .graph, single layers, the defaults
# against each knob off; profiles), then the conv rows with the first loop
# (MINIC_CUDA_CONV_STAGES=2), the pool rows with MINIC_CUDA_GATHER_VEC=0. Results in $OUT
# (tests.txt, variants.md, variants.log, profile_*.txt).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/conv-variants-out}
mkdir -p "$OUT"
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/conv-variants-cache}
T=$OUT/tests.txt
echo "# conv variants, $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $(date -u +%FT%TZ), $(git rev-parse --short HEAD 2>/dev/null)" >"$T"
echo "## test_ops_shape conv rows (ref, cpu, cuda) as before: MINIC_CUDA_CONV_KCHUNK=0 MINIC_CUDA_CONV_CLAST=0" >>"$T"
MINIC_OPS_FILTER='*conv*' MINIC_CUDA_CONV_KCHUNK=0 MINIC_CUDA_CONV_CLAST=0 MINIC_TEST_BACKEND=cuda timeout 100 \
    build-gpu/test_ops_shape >"$OUT/ops_kchunk.log" 2>&1
echo "rc $?" >>"$T"
grep -E "FAIL|ERROR|PASSED|backend cuda|mismatch" "$OUT/ops_kchunk.log" | head -20 >>"$T"
cat "$T"
timeout 175 python3 bench/onnx/conv_variants.py --minic build-gpu/minic --out "$OUT" --iters 30 >"$OUT/variants.log" 2>&1
echo "variants rc $?" >>"$T"
tail -12 "$OUT/variants.log"
echo "## conv rows, cuda, MINIC_CUDA_CONV_STAGES=2" >>"$T"
MINIC_OPS_FILTER='*conv*' MINIC_CUDA_CONV_STAGES=2 MINIC_TEST_BACKEND=cuda timeout 30 \
    build-gpu/test_ops_shape 2>&1 | grep -E "FAIL|ERROR|PASSED|backend cuda|mismatch" | head -20 >>"$T"
echo "## pool rows, cuda, MINIC_CUDA_GATHER_VEC=0" >>"$T"
MINIC_OPS_FILTER='*pool*' MINIC_CUDA_GATHER_VEC=0 MINIC_TEST_BACKEND=cuda timeout 20 \
    build-gpu/test_ops_shape 2>&1 | grep -E "FAIL|ERROR|PASSED|backend cuda|mismatch" | head -20 >>"$T"
tail -8 "$T"
