#!/usr/bin/env bash
# How parsing, type inference and checking scale with the size of a graph: generates chains of
# N operators (mixed pointwise ops, number operands, reductions, reshapes) and times
# `minic check` on each, with its peak memory. Time and memory per operator should stay flat
# (linear in N); the foundation's goal is under a second for 100,000 operators.
#
#   bench/graph_scale.sh [path/to/minic] [N...]      (default: build/minic 10000 100000 1000000)
set -euo pipefail
minic=${1:-build/minic}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10000 100000 1000000)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

printf '%10s %10s %12s %12s %12s\n' operators seconds 'us/op' 'peak MiB' 'bytes/op'
for n in "${sizes[@]}"; do
    python3 - "$n" > "$dir/g.graph" <<'PY'
import sys
n = int(sys.argv[1])
out = ["graph scale", "input x : f32[16, 64]", "param w : f32[64]"]
prev = "x"
for i in range(n):
    k = i % 6
    if k == 0:   line = f"v{i} = add({prev}, x)"
    elif k == 1: line = f"v{i} = mul({prev}, 0.5)"
    elif k == 2: line = f"v{i} = tanh({prev})"
    elif k == 3: line = f"v{i} = mul({prev}, w)"
    elif k == 4: line = f"v{i} = reshape({prev}, shape=[-1, 64])"
    else:        line = f"v{i} = sub({prev}, 1e-3)"
    out.append(line)
    prev = f"v{i}"
out.append(f"s = sum({prev}, axis=[-1], keepdim=true)")
out.append(f"output {prev}, s")
print("\n".join(out))
PY
    /usr/bin/time -f '%e %M' -o "$dir/time" "$minic" check "$dir/g.graph" > /dev/null
    read -r secs kib < "$dir/time"
    awk -v n="$n" -v s="$secs" -v k="$kib" 'BEGIN {
        printf "%10d %10.2f %12.2f %12.1f %12.0f\n", n, s, s * 1e6 / n, k / 1024, k * 1024 / n }'
done
