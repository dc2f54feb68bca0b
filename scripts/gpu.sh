#!/usr/bin/env bash
# The one script a GPU machine runs (through the device tool, from a staged copy of the tree):
# build minic with the CUDA backend, run the whole test suite with the CUDA backend as the
# default, compute-sanitizer on the CUDA tests and the examples, the fixture timings, and the
# benchmark suite beside PyTorch (bench/gpu_bench.sh). Logs and a summary table go to $OUT
# (or ./gpu-out), the summary also to stdout, last, so the device tool's tail shows it.
#
#   [MINIC_PEERS=DIR] bash scripts/gpu.sh [tests|cudatests] [sanitize] [fixtures] [bench] [peers] [peaks]
#   (default: all but cudatests, which runs only the CUDA tests; --help says this)
#
# The `peers` stage runs DIR/torch_gpu.py, the PyTorch peer, which lives outside this
# repository in the project's shared folder: MINIC_PEERS, default ../shared/peers relative to the
# repository's root (a relative MINIC_PEERS is taken from the directory you run this in). Where
# the tree is staged without its parent folder, stage the peers too and point MINIC_PEERS there;
# without them the stage is skipped, and says so.
set -uo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
    echo "usage: [MINIC_PEERS=DIR] bash scripts/gpu.sh [tests|cudatests] [sanitize] [fixtures] [bench] [peers] [peaks]"
    echo "  default stages: tests sanitize fixtures bench peers peaks; logs go to \$OUT (default ./gpu-out)"
    echo "  MINIC_PEERS  the peer scripts' directory (torch_gpu.py); default ../shared/peers from the"
    echo "               repository's root"
    exit 0
fi
if [ -n "${MINIC_PEERS:-}" ]; then
    MINIC_PEERS=$(cd "$MINIC_PEERS" 2>/dev/null && pwd) || { echo "gpu.sh: MINIC_PEERS is not a directory" >&2; exit 1; }
fi
cd "$(dirname "$0")/.."
PEERS=${MINIC_PEERS:-$(cd .. && pwd)/shared/peers}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
stages=${*:-tests sanitize fixtures bench peers peaks}
has() { [[ " $stages " == *" $1 "* ]]; }
log=$OUT/gpu.log
summary=$OUT/summary.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }

{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv; } >"$log" 2>&1
say "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)  date: $(date -u +%F)"

if [ -d .deps/cmocka ]; then export CMOCKA_ROOT=$PWD/.deps/cmocka; export LD_LIBRARY_PATH=$(echo $PWD/.deps/cmocka/usr/lib/*):${LD_LIBRARY_PATH:-}; fi
t0=$(date +%s)
if ! cmake -S . -B build-gpu -DMINIC_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="-Wno-error=maybe-uninitialized" >>"$log" 2>&1 ||
   ! cmake --build build-gpu -j"$(nproc)" >>"$log" 2>&1; then
    say "BUILD FAILED (see gpu.log)"; tail -40 "$log"; exit 1
fi
say "build: ok ($(( $(date +%s) - t0 )) s)"
export MINIC_BIN=$PWD/build-gpu/minic MINIC_BACKEND=cuda XDG_CACHE_HOME=$PWD/build-gpu/cache

if has tests; then
    (cd build-gpu && ctest --output-on-failure -j4 --timeout 300 ${CTEST_EXCLUDE:+-E $CTEST_EXCLUDE}) >"$OUT/ctest.log" 2>&1
    say "tests: $(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)"
    grep -E "^\s*[0-9]+/[0-9]+ Test.*(Failed|Skipped|Timeout|\*\*\*)" "$OUT/ctest.log" | head -20 | tee -a "$summary"
    for t in test_cuda_run test_cuda_compile; do
        ./build-gpu/$t >>"$OUT/ctest.log" 2>&1; say "$t: exit $?"
    done
fi

if has cudatests && ! has tests; then
    for t in test_cuda_run test_cuda_compile; do
        (cd build-gpu && MINIC_SRC=$PWD/.. ./$t) >>"$OUT/ctest.log" 2>&1; say "$t: exit $?"
    done
fi

if has sanitize; then
    san=$OUT/sanitizer.log; : >"$san"
    run_san() { echo "== $*" >>"$san"; compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$@" >>"$san" 2>&1; echo $?; }
    say "compute-sanitizer test_cuda_run: exit $(run_san ./build-gpu/test_cuda_run)"
    for g in examples/*.graph; do
        for f in "" --no-fuse; do
            say "compute-sanitizer $(basename "$g") $f: exit $(run_san ./build-gpu/minic run "$g" --backend cuda $f)"
        done
    done
    grep -E "ERROR SUMMARY" "$san" | sort | uniq -c | tee -a "$summary"
fi

if has fixtures; then
    MINIC_CUDA_BENCH=1 ./build-gpu/test_cuda_run >"$OUT/fixtures.txt" 2>&1
    cat "$OUT/fixtures.txt" | tee -a "$summary"
fi

if has bench; then
    bash bench/gpu_bench.sh "$OUT/bench.txt" >>"$log" 2>&1
    cat "$OUT/bench.txt" | tee -a "$summary"
fi

# PyTorch's SDPA backends (flash, cuDNN, efficient, math) on the attention graphs' shapes
if has peers; then
    PYTHONUNBUFFERED=1 timeout 300 python3 bench/gpu/attention_peers.py --json "$OUT/attention_peers.json" \
        >"$OUT/attention_peers.txt" 2>&1
    say "attention peers (PyTorch SDPA, same run): exit $?"
    grep -v '^JSON' "$OUT/attention_peers.txt" | tee -a "$summary"
fi
if has peers && [ ! -f "$PEERS/torch_gpu.py" ]; then
    say "peers: skipped (no torch_gpu.py in $PEERS: set MINIC_PEERS)"
elif has peers; then
    PYTHONUNBUFFERED=1 timeout ${PEERS_TIMEOUT:-420} python3 "$PEERS/torch_gpu.py" >"$OUT/torch.log" 2>&1
    grep '^JSON' "$OUT/torch.log" | sed 's/^JSON //' >"$OUT/torch.json"
    tail -3 "$OUT/torch.log" | cut -c1-2000 >>"$summary"
    # One table: minic beside the peers of this same run, with the ratios.
    [ -s "$OUT/bench.txt" ] && [ -s "$OUT/torch.json" ] &&
        python3 bench/table.py "$OUT/bench.txt" "$OUT/torch.json" $([ -s "$OUT/attention_peers.json" ] && echo "$OUT/attention_peers.json") |
            tee "$OUT/table.txt" >>"$summary"
fi
# peaks (helper `peaks`): measured ceilings, then a profile that uses them (docs/PROFILING.md).
if has peaks; then
    timeout 300 ./build-gpu/minic peaks --backend cuda >"$OUT/peaks.txt" 2>&1
    say "minic peaks --backend cuda: exit $?"
    cat "$OUT/peaks.txt" | tee -a "$summary"
    timeout 120 ./build-gpu/minic run bench/gpu/mlp.graph --backend cuda --profile \
        --profile-json "$OUT/mlp_profile.json" --roofline "$OUT/mlp_roofline.svg" >"$OUT/mlp_profile.txt" 2>&1
    say "minic run bench/gpu/mlp.graph --profile: exit $?"
    grep -A12 '^profile:' "$OUT/mlp_profile.txt" | tee -a "$summary"
fi
echo "==== summary"
cat "$summary"
