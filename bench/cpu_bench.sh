#!/usr/bin/env bash
# The CPU benchmark: minic --backend cpu on bench/cpu/*.graph and a 2048^2 f32 GEMM, next to
# the peers (PyTorch eager and ONNX Runtime) measured in the same run.
#
#   [MINIC_PEERS=DIR] bench/cpu_bench.sh [MINIC_BIN] [REPEATS]      (bench/cpu_bench.sh --help)
#
# MINIC_PEERS is the directory of the peer scripts (torch_cpu.py, ort_time.js), which live
# outside this repository, in the project's shared folder; default ../shared/peers, relative to
# the repository's root (a relative MINIC_PEERS is taken from the directory you run this in).
# Prints one line per measurement (median of each tool's own timer over its iterations; the
# whole set is repeated REPEATS times and every repeat is printed, so medians across repeats
# can be taken). Peers are skipped, with a note, where they are not installed:
#   PyTorch: apt-get install -y python3-torch python3-numpy (run with /usr/bin/python3)
#   ONNX Runtime: ORT_DIR=<dir with node_modules/onnxruntime-node> and ORT_MODELS=<dir of
#   ort_export.py's output>.
# Also the compile time of examples/mlp.graph cold (empty cache) and the total process time of
# a run served from the cache. The machine's load is printed first: benchmark when it is quiet.
# Last comes one table (bench/cpu_table.py): medians across repeats, each peer, the ratio to
# the better peer, and the memory floor (the profile's bytes / the copy bandwidth `minic peaks`
# measures in the same run, the best of one measurement per repeat).
set -euo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
    echo "usage: [MINIC_PEERS=DIR] bench/cpu_bench.sh [MINIC_BIN] [REPEATS]"
    echo "  MINIC_BIN    the minic command (default build/minic, from the repository's root)"
    echo "  REPEATS      how many times the whole set is measured (default 3)"
    echo "  MINIC_PEERS  the peer scripts' directory (torch_cpu.py, ort_time.js); default"
    echo "               ../shared/peers from the repository's root; a peer not found is skipped"
    echo "  ORT_DIR, ORT_MODELS  ONNX Runtime's node package and ort_export.py's models"
    exit 0
fi
# A MINIC_PEERS given relative is the caller's; the default is relative to the repository.
if [ -n "${MINIC_PEERS:-}" ]; then
    PEERS=$(cd "$MINIC_PEERS" 2>/dev/null && pwd) || { echo "cpu_bench.sh: MINIC_PEERS=$MINIC_PEERS is not a directory" >&2; exit 1; }
fi
cd "$(dirname "$0")/.."
MINIC=${1:-build/minic}
REPEATS=${2:-3}
PEERS=${PEERS:-../shared/peers}
echo "peers: $PEERS$([ -d "$PEERS" ] || echo ' (not found: the peers are skipped; set MINIC_PEERS)')"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export XDG_CACHE_HOME="$TMP/cache"

measure() {
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"

cat > "$TMP/gemm2048.graph" <<'EOF'
graph gemm2048
input a : f32[2048, 2048]
input b : f32[2048, 2048]
c = matmul(a, b)
output c
EOF

# the machine's ceilings (once per repeat: the table takes the best, since a measurement that
# another tenant of the machine disturbed only understates them)
peaks() {
    "$MINIC" peaks --backend cpu 2>&1 | sed -n 's/^ *copy bandwidth *\([0-9.]*\) GB\/s.*/peak copy: \1 GB\/s/p; s/^ *f32 FMA rate *\([0-9.]*\) GFLOP\/s.*/peak fma: \1 GFLOP\/s/p'
}
# and the bytes and FLOPs each workload's compiled program moves
for w in pointwise layernorm softmax mlp small_mlp; do
    "$MINIC" run "bench/cpu/$w.graph" --backend cpu --profile --iters 2 2>&1 |
        sed -n "s/^totals: .*, \([0-9]*\) FLOPs, \([0-9]*\) bytes moved.*/work $w: \1 flops \2 bytes/p"
done

minic_time() { # graph, iters -> microseconds per run: the median of three processes' medians
    # (three short samples a few seconds apart, so that one burst of another tenant's work
    # does not decide a repeat)
    for i in 1 2 3; do
        "$MINIC" run "$1" --backend cpu --iters "$2" 2>&1 | sed -n 's/^time: \([0-9.]*\) us.*/\1/p'
    done | sort -g | sed -n 2p
}

for rep in $(seq "$REPEATS"); do
    peaks
    for w in pointwise layernorm softmax mlp small_mlp; do
        iters=20
        [ "$w" = small_mlp ] && iters=200
        echo "minic $w: $(minic_time "bench/cpu/$w.graph" $iters) us"
    done
    us=$(minic_time "$TMP/gemm2048.graph" 5)
    echo "minic gemm2048: $us us = $(awk -v us="$us" 'BEGIN { printf "%.1f", 2 * 2048^3 / us / 1e3 }') GFLOP/s"
    if [ ! -f "$PEERS/torch_cpu.py" ]; then
        echo "torch: skipped (no torch_cpu.py in $PEERS: set MINIC_PEERS)"
    elif /usr/bin/python3 -c 'import torch' 2>/dev/null; then
        echo "torch: $(/usr/bin/python3 "$PEERS/torch_cpu.py")"
    else
        echo "torch: skipped (apt-get install -y python3-torch python3-numpy)"
    fi
    if [ ! -f "$PEERS/ort_time.js" ]; then
        echo "onnxruntime: skipped (no ort_time.js in $PEERS: set MINIC_PEERS)"
    elif [ -n "${ORT_DIR:-}" ] && [ -n "${ORT_MODELS:-}" ]; then
        echo "onnxruntime: $(ORT="$ORT_DIR/node_modules/onnxruntime-node" node "$PEERS/ort_time.js" "$ORT_MODELS")"
    else
        echo "onnxruntime: skipped (set ORT_DIR and ORT_MODELS)"
    fi
done

# Compile time of the examples' mlp: cold (empty cache), then total process time from the cache.
rm -rf "$XDG_CACHE_HOME"
"$MINIC" run examples/mlp.graph --backend cpu 2>&1 | sed -n 's/.*compiled in \([0-9.]*\) ms.*/mlp example cold compile: \1 ms/p'
for i in 1 2 3 4 5; do
    s=$(date +%s.%N)
    "$MINIC" run examples/mlp.graph --backend cpu > /dev/null 2>&1
    e=$(date +%s.%N)
    echo "mlp example from cache: $(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.1f", (e - s) * 1000 }') ms total process time"
done
}

measure | tee "$TMP/log.txt"
echo
python3 bench/cpu_table.py "$TMP/log.txt"
