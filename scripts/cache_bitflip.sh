#!/usr/bin/env bash
# Random single-bit flips of the compile cache's entries, each followed by a whole `minic run`:
# every run must exit 0, write outputs identical to a run from a clean cache, and replace the
# damaged entry (a recompile wherever the entry changed). Issue 19's done-when item.
#
#   scripts/cache_bitflip.sh [BACKEND [FLIPS [GRAPH]]]    (defaults: cpu 1000 examples/mlp.graph)
#
# BACKEND cuda needs a GPU: the entries are then the cubins, one per kernel, and each flip
# damages one of them. MINIC_BIN picks the binary (default build/minic). Prints one line per
# failure and ends with "N passed, M failed"; exit status 1 when any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
backend=${1:-cpu}
flips=${2:-1000}
graph=${3:-examples/mlp.graph}
bin=${MINIC_BIN:-build/minic}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export XDG_CACHE_HOME=$work/cache
unset MINIC_NO_CACHE MINIC_CACHE_SIZE

if ! "$bin" run "$graph" --backend "$backend" --quiet --output "$work/want.safetensors" >/dev/null 2>"$work/err"; then
  echo "cache_bitflip: the first run failed:" >&2
  cat "$work/err" >&2
  exit 2
fi
dir=$XDG_CACHE_HOME/minic/$backend
mapfile -t entries < <(find "$dir" -maxdepth 1 -type f ! -name '*.tmp*' | sort)
if [ ${#entries[@]} -eq 0 ]; then
  echo "cache_bitflip: no cache entries in $dir" >&2
  exit 2
fi
mkdir -p "$work/orig"
for e in "${entries[@]}"; do cp "$e" "$work/orig/$(basename "$e")"; done
echo "cache_bitflip: $flips flips over ${#entries[@]} entries of $dir ($backend, $graph)"

passed=0
failed=0
start=$(date +%s)
for ((i = 0; i < flips; i++)); do
  e=${entries[$((RANDOM % ${#entries[@]}))]}
  cp "$work/orig/$(basename "$e")" "$e"
  size=$(stat -c %s "$e")
  bit=$(( ((RANDOM << 15) | RANDOM) % (size * 8) ))
  byte=$((bit / 8))
  old=$(od -An -tu1 -j "$byte" -N1 "$e" | tr -d ' ')
  printf "\\x$(printf %02x $((old ^ (1 << (bit % 8)))))" |
    dd of="$e" bs=1 seek="$byte" conv=notrunc status=none
  cp "$e" "$work/flipped"
  rm -f "$work/got.safetensors"
  "$bin" run "$graph" --backend "$backend" --quiet --output "$work/got.safetensors" >/dev/null 2>"$work/err"
  rc=$?
  why=""
  if [ $rc -ne 0 ]; then
    why="exit status $rc: $(head -c 300 "$work/err")"
  elif ! cmp -s "$work/want.safetensors" "$work/got.safetensors"; then
    why="outputs differ from a clean run"
  elif cmp -s "$e" "$work/flipped"; then
    why="the damaged entry is still there (used as is, not recompiled)"
  fi
  if [ -n "$why" ]; then
    failed=$((failed + 1))
    echo "flip $i: $(basename "$e") bit $bit of $((size * 8)): $why"
  else
    passed=$((passed + 1))
  fi
done
for e in "${entries[@]}"; do cp "$work/orig/$(basename "$e")" "$e"; done
echo "cache_bitflip: $(($(date +%s) - start)) s"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
