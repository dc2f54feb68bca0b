#!/usr/bin/env bash
# The f32 attention kernel (issue 17) and GPT-2 small's f32 error (issue 21) in one short GPU
# call, with minic already built in build-gpu (Release, no LLVM; test_attention and
# test_cuda_compile built too). Stages, most important first, each with its own time limit:
#   tests     test_attention on every backend (cuda included) with the default f32 kernel and
#             with MINIC_CUDA_ATTN_F32=old; test_cuda_compile
#   sanitize  compute-sanitizer memcheck and racecheck on a causal f32 [2, 3, 131, 64] graph
#             (131: not a multiple of any tile), memcheck on a boolean-mask one
#   time      minic run --iters 100: bench/gpu/attention.graph and gpt2_block.graph, default,
#             old, and the 64-row variant; a --profile of the f32 block
#   peers     bench/gpu/attention_peers.py (PyTorch SDPA) and, with MINIC_PEERS, block_peer.py
#             (the GPT-2 block, eager and torch.compile), same run
#   gpt2      bench/models/gpt2.py --dtypes f32: minic (fused, unfused) against HF float64
#             (the error) and torch.compile
#   [MINIC_PEERS=DIR] bash bench/gpu/attention_f32_gpu.sh [STAGES...]   (results under $OUT)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S=$OUT/summary.txt; : >"$S"
say() { echo "$*" | tee -a "$S"; }
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 ))s"; }
stages=${*:-tests sanitize time peers gpt2}
has() { [[ " $stages " == *" $1 "* ]]; }
if [ -d .deps/cmocka ]; then export CMOCKA_ROOT=$PWD/.deps/cmocka; export LD_LIBRARY_PATH=$(echo $PWD/.deps/cmocka/usr/lib/*):${LD_LIBRARY_PATH:-}; fi
B=$PWD/build-gpu; export XDG_CACHE_HOME=$B/cache MINIC_SRC=$PWD
[ -x $B/minic ] || { say "no $B/minic: build first"; exit 1; }
say "device: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | head -1)  $(date -u)"
if has tests; then
    for v in default old; do
        e=; [ $v = old ] && e=MINIC_CUDA_ATTN_F32=old
        (cd $B && env $e timeout 240 ./test_attention) >"$OUT/test_attention_$v.log" 2>&1
        say "test_attention ($v f32 kernel): exit $? $(el)"
        grep -E "FAILED|PASSED|skipped|\[  ERROR|error" "$OUT/test_attention_$v.log" | head -12 | tee -a "$S"
    done
    (cd $B && timeout 200 ./test_cuda_compile) >"$OUT/test_cuda_compile.log" 2>&1; say "test_cuda_compile: exit $? $(el)"
fi
G=$OUT/graphs; mkdir -p "$G"
attn_graph() { # name mask-line...
    cat >"$G/$1.graph" <<X
graph $1
input q : f32[2, 3, 131, 64]
input k : f32[2, 3, 131, 64]
input v : f32[2, 3, 131, 64]
$2
kt  = transpose(k, perm=[0, 1, 3, 2])
s0  = matmul(q, kt)
s   = mul(s0, 0.125)
$3
p   = softmax(sm, axis=-1)
y   = matmul(p, v)
output y
X
}
if has sanitize; then
    attn_graph causal131 "row = iota(shape=[131, 131], axis=0)
col = iota(shape=[131, 131], axis=1)
keep = ge(row, col)" "sm  = where(keep, s, -inf)"
    attn_graph bool131 "input m : bool[131, 131]" "sm  = where(m, s, -inf)"
    for tool in memcheck racecheck; do
        timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $B/minic run "$G/causal131.graph" --backend cuda >"$OUT/san_$tool.log" 2>&1
        say "causal131 $tool: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_$tool.log" | head -1) $(el)"
    done
    timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/minic run "$G/bool131.graph" --backend cuda >"$OUT/san_bool.log" 2>&1
    say "bool131 memcheck: exit $? $(grep -E 'ERROR SUMMARY' "$OUT/san_bool.log" | head -1) $(el)"
    for g in causal131 bool131; do
        timeout 60 $B/minic bench "$G/$g.graph" --backend cuda >"$OUT/bench_$g.log" 2>&1
        say "$g minic bench (fused/unfused vs float64): exit $?"; grep -iE "error|max|rel" "$OUT/bench_$g.log" | head -4 >>"$S"
    done
fi
if has time; then
    printf "%-14s %-28s %10s %s\n" graph variant median_us note | tee -a "$S"
    for name in attention gpt2_block; do
        for v in default MINIC_CUDA_ATTN_F32=old MINIC_CUDA_ATTN_F32_ROWS=64; do
            [ $name = gpt2_block ] && [ $v = MINIC_CUDA_ATTN_F32_ROWS=64 ] && continue
            e=; [ $v != default ] && e=$v
            o=$(env $e timeout 60 $B/minic run bench/gpu/$name.graph --backend cuda --iters 100 2>&1); rc=$?
            echo "== $name $v"$'\n'"$o" >>"$OUT/bench.log"
            us=$(echo "$o" | grep -oE "time: [0-9.]+ us" | grep -oE "[0-9.]+" | head -1)
            note=; [ $rc -ne 0 ] && note="exit $rc $(echo "$o" | grep -i error | head -1 | cut -c1-100)"
            [ $name = attention ] && [ -n "$us" ] && note="$note$(awk -v us="$us" 'BEGIN { printf "%.1f TFLOP/s", 4 * 64 * 96 * 1024 * 1025 / 2 / us / 1e6 }')"
            printf "%-14s %-28s %10s %s\n" $name $v "${us:--}" "$note" | tee -a "$S"
        done
    done
    timeout 60 $B/minic run bench/gpu/gpt2_block.graph --backend cuda --profile --iters 20 >"$OUT/profile_gpt2_block.txt" 2>&1
    grep -A16 '^profile' "$OUT/profile_gpt2_block.txt" | head -20 >>"$S"
    say "$(el)"
fi
if has peers; then
    PYTHONUNBUFFERED=1 timeout 150 python3 bench/gpu/attention_peers.py >"$OUT/attention_peers.txt" 2>&1
    say "attention_peers: exit $? $(el)"; grep -v '^JSON' "$OUT/attention_peers.txt" | tail -16 | tee -a "$S"
    if [ -f "${MINIC_PEERS:-/nonexistent}/torch_gpu.py" ]; then
        PYTHONUNBUFFERED=1 timeout 200 python3 bench/gpu/block_peer.py "$MINIC_PEERS/torch_gpu.py" >"$OUT/block_peer.txt" 2>&1
        say "block_peer: exit $? $(el)"; grep -v JSON "$OUT/block_peer.txt" | tail -4 | tee -a "$S"
    else
        say "block_peer: skipped (MINIC_PEERS not set or no torch_gpu.py there)"
    fi
fi
if has gpt2; then
    PYTHONUNBUFFERED=1 timeout 300 python3 bench/models/gpt2.py --minic $B/minic --out /tmp/gpt2w_f32 --dtypes f32 --iters 20 \
        >"$OUT/gpt2_f32.log" 2>&1
    say "gpt2.py f32: exit $? $(el)"; tail -8 "$OUT/gpt2_f32.log" | tee -a "$S"
fi
echo "==== summary"; cat "$S"
