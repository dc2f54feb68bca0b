#!/bin/sh
# Issue 23's sweep (bench/gpu/symbolic_sweep.c): the GPT-2 block made symbolic over batch and
# sequence, one compiled program for every (B, T), against the program compiled for each.
# From the repository root, after building build-gpu (or BUILD=dir):
#   bench/gpu/symbolic_sweep.sh [GRAPH] [options of symbolic_sweep.c]
set -e
BUILD=${BUILD:-build-gpu}
GRAPH=${1:-bench/gpu/gpt2_block_bf16.graph}
[ $# -gt 0 ] && shift
cc -O2 -Iinclude bench/gpu/symbolic_sweep.c -L"$BUILD" -lminic -Wl,-rpath,"$PWD/$BUILD" -o "$BUILD/symbolic_sweep"
exec "$BUILD/symbolic_sweep" "$GRAPH" "$@"
