#!/usr/bin/env bash
# Tensor parallelism on a multi-GPU machine (issue 24), run there:
#   OUT=DIR bash bench/tp/tp_gpu.sh [MINIC] [GPUS...]
# For each block graph: one GPU without --devices, then --devices N for every N given (default:
# 1 and every power of two up to the GPUs present): minic's median time (--iters), its output
# against PyTorch's float64 block (check_block.py), the profile's collective rows; then NCCL's
# own all-reduce figure through PyTorch at the same sizes (allreduce_peer.py). Writes
# $OUT/tp_summary.txt.
set -u
M=${1:-build-gpu/minic}; shift || true
OUT=${OUT:-/tmp/tp}; mkdir -p "$OUT"
S=$OUT/tp_summary.txt
export NCCL_NVLS_ENABLE=0
G=$(nvidia-smi -L | wc -l)
NS=${*:-}
if [ -z "$NS" ]; then NS=1; n=2; while [ $n -le "$G" ]; do NS="$NS $n"; n=$((n * 2)); done; fi
say() { echo "$*" | tee -a "$S"; }
say "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x$G, $(date -u), devices: $NS"
for g in gpt2_block_bf16:12 gpt2_block_d4096_bf16:32; do
  name=${g%%:*}; H=${g##*:}; gf=bench/gpu/$name.graph
  timeout -k 5 150 $M run $gf --backend cuda --seed 1 --iters 30 --save-inputs $OUT/$name.in.safetensors \
      --output $OUT/$name.one.npy > $OUT/$name.one.log 2>&1
  say "$name one GPU: exit $? $(grep -E '^time' $OUT/$name.one.log | head -1)"
  outs=$OUT/$name.one.npy
  for n in $NS; do
    timeout -k 5 150 $M run $gf --backend cuda --seed 1 --iters 30 --devices $n --output $OUT/$name.d$n.npy \
        --profile > $OUT/$name.d$n.log 2>&1
    say "$name --devices $n: exit $? $(grep -E '^time' $OUT/$name.d$n.log | head -1)"
    grep -iE 'collective|allreduce|tensor parallel|CUDA graph|clock' $OUT/$name.d$n.log | head -8 | tee -a "$S"
    outs="$outs $OUT/$name.d$n.npy"
  done
  timeout 300 python3 bench/tp/check_block.py $OUT/$name.in.safetensors $H $outs 2>&1 | tee -a "$S"
  rm -f $OUT/$name.in.safetensors $OUT/*.npy
done
for n in $NS; do
  [ "$n" -ge 2 ] || continue
  timeout 200 python3 bench/tp/allreduce_peer.py --gpus $n --sizes 8x1024x768,8x1024x4096 --dtype bf16 2>&1 | grep -v '^JSON' | tee -a "$S"
done
