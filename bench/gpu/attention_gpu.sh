#!/usr/bin/env bash
# One GPU call for the fused attention kernel (issue 17): build, correctness on the CUDA backend
# (test_attention against the float64 oracle, the CUDA tests, compute-sanitizer on small
# attention graphs), timings of the attention graphs and the GPT-2 blocks fused and unfused,
# PyTorch's SDPA backends and the GPT-2 block peer in the same run, one ncu report of the
# kernel. Each step has its own time limit, most important first. Logs under $OUT; the summary
# is printed last.
#
#   [MINIC_PEERS=DIR] bash bench/gpu/attention_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S=$OUT/summary.txt; : >"$S"
say() { echo "$*" | tee -a "$S"; }
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 ))s"; }
say "device: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | head -1)  $(date -u)"
if [ -d .deps/cmocka ]; then export CMOCKA_ROOT=$PWD/.deps/cmocka; export LD_LIBRARY_PATH=$(echo $PWD/.deps/cmocka/usr/lib/*):${LD_LIBRARY_PATH:-}; fi
if ! { cmake -S . -B build-gpu -DMINIC_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="-Wno-error=maybe-uninitialized" &&
       cmake --build build-gpu -j"$(nproc)"; } >"$OUT/build.log" 2>&1; then
    say "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1
fi
say "build ok $(el)"
B=$PWD/build-gpu; export XDG_CACHE_HOME=$B/cache MINIC_SRC=$PWD
# 1. correctness: every case fused and unfused on ref and cuda against float64
timeout 200 $B/test_attention >"$OUT/test_attention.log" 2>&1; say "test_attention: exit $? $(el)"
grep -E "FAILED|PASSED|error|skipped|\[  ERROR" "$OUT/test_attention.log" | head -20 | tee -a "$S"
# 2. small graphs under compute-sanitizer, and minic bench (fused/unfused vs float64) on them
G=$(mktemp -d)
for dt in f32 bf16 f16; do for T in 200 131; do g=$G/attn_${dt}_$T.graph
cat >"$g" <<G
graph attn_${dt}_$T
input q : $dt[2, 3, $T, 64]
input k : $dt[2, 3, $T, 64]
input v : $dt[2, 3, $T, 64]
kt  = transpose(k, perm=[0, 1, 3, 2])
s0  = matmul(q, kt)
s   = mul(s0, 0.125)
row = iota(shape=[$T, $T], axis=0)
col = iota(shape=[$T, $T], axis=1)
keep = ge(row, col)
sm  = where(keep, s, -inf)
p   = softmax(sm, axis=-1)
y   = matmul(p, v)
output y
G
done; done
for g in $G/*.graph; do
    timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/minic run "$g" --backend cuda >>"$OUT/sanitizer.log" 2>&1
    r1=$?
    timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/minic run "$g" --backend cuda >>"$OUT/sanitizer.log" 2>&1
    r2=$?
    timeout 60 $B/minic bench "$g" --backend cuda >>"$OUT/sanitizer.log" 2>&1
    say "$(basename $g): memcheck $r1 racecheck $r2 bench(vs f64) $?"
done
grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizer.log" | sort | uniq -c | tee -a "$S"
say "$(el)"
# 3. timings: minic fused/unfused
printf "%-22s %-8s %10s %s\n" workload mode median_us note | tee -a "$S"
for name in attention_bf16 attention_long_bf16 attention gpt2_block_bf16 gpt2_block; do
    for mode in fused unfused; do
        [ $mode = unfused ] && [ -n "${ATTN_QUICK:-}" ] && continue
        flag=; [ $mode = unfused ] && flag=--no-fuse
        o=$(timeout 60 $B/minic run bench/gpu/$name.graph --backend cuda --iters 100 $flag 2>&1); rc=$?
        echo "== $name $mode"$'\n'"$o" >>"$OUT/bench.log"
        us=$(echo "$o" | grep -oE "time: [0-9.]+ us" | grep -oE "[0-9.]+" | head -1)
        note=; [ $rc -ne 0 ] && note="exit $rc $(echo "$o" | grep -i error | head -1 | cut -c1-100)"
        if [[ $name == attention* ]] && [ -n "$us" ]; then
            note="$note$(grep -E '^input q' bench/gpu/$name.graph | grep -oE '\[[0-9, ]+\]' | tr -d '[],' |
                awk -v us="$us" '{ f = 4 * $4 * $1 * $2 * $3 * ($3 + 1) / 2; printf "%.1f TFLOP/s", f / us / 1e6 }')"
        fi
        printf "%-22s %-8s %10s %s\n" $name $mode "${us:--}" "$note" | tee -a "$S"
    done
done
# variants of the tensor-core kernel (experiment knobs of backends/cuda/cuda_attention.c)
for v in ${ATTN_VARIANTS-"MINIC_CUDA_ATTN_WM=2" "MINIC_CUDA_ATTN_MINB=4" "MINIC_CUDA_ATTN_MINB=3"}; do
    for name in attention_bf16 attention_long_bf16; do
        o=$(env $v timeout 60 $B/minic run bench/gpu/$name.graph --backend cuda --iters 100 2>&1)
        us=$(echo "$o" | grep -oE "time: [0-9.]+ us" | grep -oE "[0-9.]+" | head -1)
        printf "%-22s %-8s %10s %s\n" $name variant "${us:--}" "$v" | tee -a "$S"
    done
done
timeout 60 $B/minic run bench/gpu/gpt2_block_bf16.graph --backend cuda --profile --iters 20 >"$OUT/profile.txt" 2>&1
grep -A16 '^profile' "$OUT/profile.txt" | head -20 >>"$S"; cat "$OUT/profile.txt" >>"$OUT/bench.log"; rm -f "$OUT/profile.txt"
say "$(el)"
# 4. PyTorch SDPA backends, same run
PYTHONUNBUFFERED=1 timeout 120 python3 bench/gpu/attention_peers.py >"$OUT/attention_peers.txt" 2>&1
say "attention_peers: exit $? $(el)"; grep -v '^JSON' "$OUT/attention_peers.txt" | tail -16 | tee -a "$S"
[ -n "${ATTN_QUICK:-}" ] && { echo "==== summary"; cat "$S"; exit 0; }
# 5. ncu of the bf16 kernel
timeout 90 ncu --kernel-name regex:attn -c 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats \
    $B/minic run bench/gpu/attention_bf16.graph --backend cuda >"$OUT/ncu_attention_bf16.txt" 2>&1
say "ncu: exit $? $(el)"
grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Compute \(SM\) Throughput|Memory Throughput|Shared Memory Config|Block Limit|Dynamic Shared" "$OUT/ncu_attention_bf16.txt" | head -14 | tee -a "$S"
# 6. the CUDA tests
for t in test_cuda_run test_cuda_compile; do
    (cd $B && timeout 120 ./$t) >>"$OUT/cudatests.log" 2>&1; r=$?; say "$t: exit $r $(el)"
    [ $r -ne 0 ] && grep -E "FAILED|ERROR|error|fail" "$OUT/cudatests.log" | head -12 | cut -c1-300 | tee -a "$S"
done
# 7. the GPT-2 block peer (torch_gpu.py's function), eager and torch.compile
if [ -f "${MINIC_PEERS:-/nonexistent}/torch_gpu.py" ]; then
    left=$(( ${BUDGET_S:-540} - $(date +%s) + T0 ))
    [ $left -gt 30 ] && { PYTHONUNBUFFERED=1 timeout $left python3 bench/gpu/block_peer.py "$MINIC_PEERS/torch_gpu.py" >>"$OUT/attention_peers.txt" 2>&1; say "block_peer: exit $? $(el)"; grep -v JSON "$OUT/attention_peers.txt" | tail -4 | tee -a "$S"; }
fi
echo "==== summary"; cat "$S"
