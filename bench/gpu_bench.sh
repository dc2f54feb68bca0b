#!/usr/bin/env bash
# The GPU benchmark suite: minic on bench/gpu/*.graph with --backend cuda, fused and unfused,
# device-timed medians over --iters replays, plus the cold (compile) and cached process times
# of the mlp example. Writes a table to $1 (default: stdout). Run from the repository root
# with $MINIC_BIN set (scripts/gpu.sh does).
set -uo pipefail
out=${1:-/dev/stdout}
bin=${MINIC_BIN:-build-gpu/minic}
iters=${ITERS:-100}
{
printf "%-22s %-9s %12s %12s %s\n" workload mode median_us compile_ms note
for g in bench/gpu/*.graph; do
    name=$(basename "$g" .graph)
    for mode in fused unfused; do
        flag=; [ $mode = unfused ] && flag=--no-fuse
        o=$("$bin" run "$g" --backend cuda --iters "$iters" $flag 2>&1)
        rc=$?
        us=$(echo "$o" | grep -oE "time: [0-9.]+ us" | grep -oE "[0-9.]+" | head -1)
        cms=$(echo "$o" | grep -oE "compiled in [0-9.]+ ms" | grep -oE "[0-9.]+" | head -1)
        note=""; [ $rc -ne 0 ] && note="exit $rc: $(echo "$o" | grep -i error | head -1 | cut -c1-120)"
        # attention graphs: TFLOP/s of the causal chain, 4*D FLOPs per kept (q, k) pair (docs/FORMAT.md §5),
        # from q's shape [B, H, T, D] (Tq = Tk, causal: T(T+1)/2 pairs per batch and head)
        if [[ $name == attention* ]] && [ -n "$us" ]; then
            note="$note$(grep -E '^input q' "$g" | grep -oE '\[[0-9, ]+\]' | tr -d '[],' |
                awk -v us="$us" '{ f = 4 * $4 * $1 * $2 * $3 * ($3 + 1) / 2; printf "%.1f TFLOP/s (causal-half)", f / us / 1e6 }')"
        fi
        printf "%-22s %-9s %12s %12s %s\n" "$name" "$mode" "${us:--}" "${cms:--}" "$note"
    done
done
# process time of examples/mlp.graph: cold cache, then cached
cache=$(mktemp -d)
for pass in cold cached; do
    t0=$(date +%s.%N)
    XDG_CACHE_HOME=$cache "$bin" run examples/mlp.graph --backend cuda >/dev/null 2>&1
    rc=$?
    t1=$(date +%s.%N)
    printf "%-22s %-9s %12s %12s %s\n" "mlp_example_process" "$pass" "-" "-" \
        "wall $(awk "BEGIN{printf \"%.3f\", $t1 - $t0}") s, exit $rc"
done
MINIC_CUDA_TRACE=1 XDG_CACHE_HOME=$cache "$bin" run examples/mlp.graph --backend cuda 2>&1 >/dev/null |
    sed 's/^/    /'
rm -rf "$cache"
# where the time goes in the GPT-2 block and the launch-bound small_mlp
for g in gpt2_block_bf16 small_mlp; do
    echo "---- profile $g"
    "$bin" run bench/gpu/$g.graph --backend cuda --profile --iters 20 2>&1 | tail -25
done
# experiment: small GEMMs without a cuBLASLt workspace (no split-K)
for ws in 0 1048576; do
    o=$(MINIC_CUDA_LT_WORKSPACE=$ws "$bin" run bench/gpu/small_mlp.graph --backend cuda --iters 500 2>&1)
    printf "%-22s %-9s %12s %12s %s\n" small_mlp "ws=$ws" \
        "$(echo "$o" | grep -oE "time: [0-9.]+ us" | grep -oE "[0-9.]+" | head -1)" - ""
done
} >"$out"
