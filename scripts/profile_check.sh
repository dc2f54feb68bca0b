#!/usr/bin/env bash
# The profiler's check on a GPU machine, in one call (docs/PROFILING.md, "Checked against
# Nsight Compute"): build (Release, CUDA, no LLVM), the profiler's tests and the CUDA tests,
# then for each graph: a --profile on an empty cache (GPU peaks measured on first use), a plain
# `minic run --iters` (its time: line), Nsight Compute's gpu__time_duration of every launch of
# one execution, the events fallback (MINIC_CUPTI=0), and a second process's kernel names (the
# cached cuBLASLt choice). scripts/profile_compare.py writes the comparison table (its `run` mode
# does the profile and ncu alone, in less time: docs/PROFILING.md). Everything
# goes to $OUT (default ./profile-out); the summary is printed last.
#
#   [PROFILE_TESTS=0] [NCU_REPS=1] bash scripts/profile_check.sh [GRAPH..]
#   default graphs: bench/gpu/gpt2_block_bf16.graph bench/gpu/mlp_bf16.graph; PROFILE_TESTS=0
#   skips the tests and builds only minic, NCU_REPS=1 runs ncu in one process only (a short call)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/profile-out}
mkdir -p "$OUT"
summary=$OUT/summary.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
graphs=${*:-bench/gpu/gpt2_block_bf16.graph bench/gpu/mlp_bf16.graph}
say "device: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null | head -1)  date: $(date -u '+%F %H:%M UTC')"
if [ -d .deps/cmocka ]; then export CMOCKA_ROOT=$PWD/.deps/cmocka; export LD_LIBRARY_PATH=$(echo $PWD/.deps/cmocka/usr/lib/*):${LD_LIBRARY_PATH:-}; fi
t0=$(date +%s)
if ! cmake -S . -B build-gpu -DMINIC_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="-Wno-error=maybe-uninitialized" >"$OUT/build.log" 2>&1 ||
   ! cmake --build build-gpu -j"$(nproc)" $([ "${PROFILE_TESTS:-1}" = 0 ] && echo --target minic) >>"$OUT/build.log" 2>&1; then
    say "BUILD FAILED"; tail -40 "$OUT/build.log"; exit 1
fi
say "build: ok ($(( $(date +%s) - t0 )) s); $(grep 'CUPTI headers' "$OUT/build.log" | head -1)"
M=$PWD/build-gpu/minic
export MINIC_BIN=$M MINIC_SRC=$PWD
export MINIC_CUPTI=${MINIC_CUPTI:-1}   # on by default anyway; explicit so an environment that turned it off does not skew the check
for t in test_profile test_peaks test_cuda_run test_cli; do
    [ "${PROFILE_TESTS:-1}" = 0 ] && break
    [ -x build-gpu/$t ] || continue
    (cd build-gpu && timeout 300 ./$t) >"$OUT/$t.log" 2>&1; say "$t: exit $?"
done
for g in $graphs; do
    n=$(basename "$g" .graph)
    export XDG_CACHE_HOME=$OUT/cache-$n   # empty: peaks and cuBLASLt choices made here
    rm -rf "$XDG_CACHE_HOME"
    s=$(date +%s.%N)
    timeout 300 "$M" run "$g" --backend cuda --iters 50 --profile --profile-json "$OUT/$n.json" \
        --trace "$OUT/$n.trace.json" --roofline "$OUT/$n.svg" >"$OUT/$n.profile.txt" 2>&1
    say "$n --profile (fresh cache): exit $? in $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $s}") s"
    grep -E '^(profile|peaks|kernel times)' "$OUT/$n.profile.txt" | tee -a "$summary"
    grep -E 'wall time' "$OUT/$n.profile.txt" | tee -a "$summary"
    timeout 120 "$M" run "$g" --backend cuda --iters 200 >"$OUT/$n.run.txt" 2>&1
    say "$(grep '^time:' "$OUT/$n.run.txt")"
    MINIC_CUPTI=0 timeout 120 "$M" run "$g" --backend cuda --iters 50 --profile --profile-json "$OUT/$n.events.json" >"$OUT/$n.events.txt" 2>&1
    say "fallback: $(grep '^kernel times' "$OUT/$n.events.txt")"
    for rep in $(seq 1 "${NCU_REPS:-2}"); do  # two processes: the same kernels (cached cuBLASLt choices)
        timeout 200 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
            --csv --print-units base --print-kernel-base mangled --log-file "$OUT/$n.ncu$rep.csv" "$M" run "$g" --backend cuda --iters 2 \
            >"$OUT/$n.ncu$rep.out" 2>&1
        say "ncu $n (process $rep): exit $?"
    done
    [ -f "$OUT/$n.ncu2.csv" ] || cp "$OUT/$n.ncu1.csv" "$OUT/$n.ncu2.csv"
    python3 scripts/profile_compare.py compare "$OUT/$n.json" "$OUT/$n.trace.json" "$OUT/$n.ncu1.csv" \
        --ncu2 "$OUT/$n.ncu2.csv" --run "$OUT/$n.run.txt" --events "$OUT/$n.events.json" 2>&1 | tee -a "$summary"
done
echo "==== summary"
cat "$summary"
