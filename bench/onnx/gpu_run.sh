#!/usr/bin/env bash
# Issue 22 on the GPU machine, in one call, from the repository root, with the folder that
# bench/onnx/stage.sh staged here carried (default .deps/onnx-gpu):
#   nodes   ONNX's node tests on the cuda backend (tests/onnx_node/runner.c, sharded over the
#           cores), checked against tests/onnx_node/expected_failures.txt: success is
#           "onnx_node: cuda: 763 of 922 passed" (the count of ref and cpu) and no REGRESSION line
#   models  bench/onnx/models.py: ResNet-18 and GPT-2 small exported from PyTorch there, run by
#           minic on cuda, compared with PyTorch and ONNX Runtime, timed beside them; GPT-2's
#           import time and memory against its file size
#   bash bench/onnx/gpu_run.sh [nodes] [models]     (default both; $OUT: where results go)
#   env: JOBS (shards, default nproc), ONNX_NODE_BACKEND (default cuda), MODELS (default
#   resnet18,gpt2,gpt2e), MODELS_ARGS (more options for models.py, e.g. "--compile ''")
# $OUT gets summary.md (also printed last) and onnx_gpu.tgz (every log and table).
set -uo pipefail
cd "$(dirname "$0")/../.."
S=$(cd "${MINIC_ONNX_STAGE:-.deps/onnx-gpu}" && pwd) || { echo "gpu_run.sh: no staged folder (bench/onnx/stage.sh)"; exit 1; }
OUT=${OUT:-$PWD/onnx-gpu-out}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/onnx-gpu.XXXX)   # logs, tarred into $OUT at the end
stages=${*:-nodes models}
has() { [[ " $stages " == *" $1 "* ]]; }
export LD_LIBRARY_PATH=$S/lib:${LD_LIBRARY_PATH:-}
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/onnx-gpu-cache}
sum=$W/summary.md
say() { echo "$*" | tee -a "$sum"; }
say "# issue 22 on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $(date -u +%FT%TZ)"
"$S/minic" --version >/dev/null 2>&1 || say "minic does not start: $("$S/minic" --version 2>&1 | head -3)"

if has nodes; then
    t0=$(date +%s)
    J=${JOBS:-$(nproc)}
    NB=${ONNX_NODE_BACKEND:-cuda}
    mapfile -t tests < <(ls "$S/onnx_node" | grep '^test_')
    for ((k = 0; k < J; k++)); do
        shard=()
        for ((i = k; i < ${#tests[@]}; i += J)); do shard+=("${tests[$i]}"); done
        [ ${#shard[@]} -gt 0 ] && timeout 420 "$S/onnx_node_runner" "$S/onnx_node" "$NB" "$W/shard_$k.tsv" "${shard[@]}" \
            >"$W/shard_$k.log" 2>&1 &
    done
    wait
    cat "$W"/shard_*.tsv >"$W/onnx_node_$NB.tsv"
    python3 tests/onnx_node/report.py --expected tests/onnx_node/expected_failures.txt --doc /dev/null \
        "$NB=$W/onnx_node_$NB.tsv" >"$W/onnx_node_report.txt" 2>&1
    say "## node tests on $NB ($(( $(date +%s) - t0 )) s, $J shards)"
    say '```'
    grep -v "now passes" "$W/onnx_node_report.txt" | head -40 | tee -a "$sum"
    say "(tests listed as failing that pass on $NB: $(grep -c 'now passes' "$W/onnx_node_report.txt"))"
    say '```'
    cp "$W/onnx_node_$NB.tsv" "$OUT/"
fi

if has models; then
    t0=$(date +%s)
    MINIC_BIN=$S/minic timeout 480 python3 bench/onnx/models.py --out "$W/models" ${MODELS:+--models $MODELS} \
        ${MODELS_ARGS:-} \
        >"$W/models.log" 2>&1
    say "## real models (exit $?, $(( $(date +%s) - t0 )) s)"
    if [ -f "$W/models/onnx_models.md" ]; then cat "$W/models/onnx_models.md" >>"$sum"; cat "$W/models/onnx_models.md"
    else tail -30 "$W/models.log" | tee -a "$sum"; fi
fi

cp "$sum" "$OUT/summary.md"
tar czf "$OUT/onnx_gpu.tgz" -C "$W" . && rm -rf "$W"
