#!/usr/bin/env bash
# ONNX's backend node tests through minic (docs/ONNX.md), in CTest as `onnx_node`.
#
# The tests are generated from Debian's python3-onnx (tests/onnx_node/generate.py) into the
# build tree, then tests/onnx_node/runner.c runs each on ref and, where it is built, cpu (and
# cuda with MINIC_ONNX_BACKENDS="ref cpu cuda" on a GPU machine). Every test that fails must be
# listed in tests/onnx_node/expected_failures.txt with its reason, and every test listed there
# must fail on at least one backend: a test of a supported operator that starts failing, or a
# listed one that starts passing, fails this test. MINIC_ONNX_UPDATE=1 rewrites the list and
# docs/ONNX.md from this run instead.
set -uo pipefail
src=${MINIC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${MINIC_BUILD:-$src/build}
runner=${MINIC_ONNX_RUNNER:-$build/onnx_node_runner}
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3  # Debian's python3-onnx lives there
data=$build/onnx_node
if [ ! -f "$data/.complete" ]; then
  rm -rf "$data"
  "$py" "$src/tests/onnx_node/generate.py" "$data.tmp" > "$build/onnx_node.version"
  rc=$?
  [ $rc -eq 77 ] && { echo "skipped: python3-onnx/python3-numpy not installed"; exit 77; }
  [ $rc -ne 0 ] && { echo "onnx_node: generating the tests failed"; exit 1; }
  mv "$data.tmp/node" "$data" && rm -rf "$data.tmp" && touch "$data/.complete"
fi
version=$(tail -n1 "$build/onnx_node.version" 2>/dev/null || echo "?")
backends=${MINIC_ONNX_BACKENDS:-ref}
if [ -z "${MINIC_ONNX_BACKENDS:-}" ] && [ "${MINIC_HAVE_CPU:-OFF}" = ON ]; then backends="ref cpu"; fi
for b in $backends; do
  "$runner" "$data" "$b" "$build/onnx_node_$b.tsv" || exit 1
done
args=()
for b in $backends; do args+=("$b=$build/onnx_node_$b.tsv"); done
"$py" "$src/tests/onnx_node/report.py" --onnx-version "$version" \
  --expected "$src/tests/onnx_node/expected_failures.txt" --doc "$src/docs/ONNX.md" \
  ${MINIC_ONNX_UPDATE:+--update} "${args[@]}"
