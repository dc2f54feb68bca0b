#!/usr/bin/env bash
# The README's example output is real: its values and checksum lines are what
# `minic run examples/mlp.graph --backend ref` prints now (times and compile times aside).
set -euo pipefail
src=${MINIC_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
bin=${MINIC_BIN:-$src/build/minic}
out=$("$bin" run "$src/examples/mlp.graph" --backend ref)
for pattern in '^y: f32\[32, 128\]$' '^  values: ' '^  checksum: '; do
  want=$(grep -E "$pattern" "$src/README.md" | head -1)
  got=$(echo "$out" | grep -E "$pattern" | head -1)
  if [ -z "$want" ] || [ "$want" != "$got" ]; then
    echo "FAIL: README.md shows '$want' but minic prints '$got'"
    echo "(refresh the example in README.md with the output of: build/minic run examples/mlp.graph --backend ref --profile)"
    exit 1
  fi
done
echo "readme example: ok"
