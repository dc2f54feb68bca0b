#!/usr/bin/env bash
# Every operator has a conformance row: each operator `minic ops` lists (the op table, ir/ops.def)
# appears in the graph of at least one case of the conformance tables (tests/test_ops.c,
# test_ops_shape.c, test_ops_graphs.c; tests/ops_conformance.h says what a case checks).
# An operator added to ops.def without a case fails here, by name.
set -u
build=${MINIC_BUILD:-$(dirname "$0")/../build}
bin=${MINIC_BIN:-$build/minic}
list=$(mktemp)
trap 'rm -f "$list"' EXIT
for t in test_ops test_ops_shape test_ops_graphs; do
  [ -x "$build/$t" ] || { echo "skipped: $t is not built (no cmocka)"; exit 77; }
  MINIC_OPS_COVERAGE=$list "$build/$t" >/dev/null || { echo "FAIL: $t could not list its cases"; exit 1; }
done
ops=$("$bin" ops | awk 'NR > 1 && /^[a-z_]+\(/ { sub(/\(.*/, "", $1); print $1 }' | sort -u)
[ "$(echo "$ops" | wc -l)" -gt 40 ] || { echo "FAIL: minic ops listed too few operators: $ops"; exit 1; }
missing=0
for op in $ops; do
  if ! grep -q "^$op " "$list"; then
    echo "FAIL: operator $op has no conformance case"
    missing=$((missing + 1))
  fi
done
echo "op_coverage: $(echo "$ops" | wc -l) operators, $(wc -l <"$list") (operator, case) pairs, $missing without a case"
[ "$missing" -eq 0 ]
