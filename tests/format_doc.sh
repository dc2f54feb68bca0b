#!/usr/bin/env bash
# docs/FORMAT.md is the reference the code and the help texts cite, so it must keep up with
# them: every operator of ir/ops.def is described in its §2, every option of the command
# (tools/minic.c's table) in its §3, and every "docs/FORMAT.md §N" cited anywhere in the
# sources, scripts, docs and help texts names a section it has. Nothing cites the contract
# ("SPEC §N"), which is not part of this repository.
set -euo pipefail
src=${MINIC_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
doc=$src/docs/FORMAT.md
fail=0
[ -f "$doc" ] || { echo "FAIL: docs/FORMAT.md is missing"; exit 1; }

# A section's text: from its "## N." heading to the next "## ".
section() { awk -v n="$1" '/^## / { on = ($2 == n ".") } on' "$doc"; }

ops=$(sed -n 's/^X([A-Z_0-9]*, *"\([a-z_0-9]*\)", *MC_KIND_\([A-Z]*\).*/\1 \2/p' "$src/ir/ops.def" |
      awk '$2 != "LEAF" { print $1 }')
[ -n "$ops" ] || { echo "FAIL: no operators read from ir/ops.def"; exit 1; }
ops_text=$(section 2)
for op in $ops; do
  grep -qw -- "$op" <<<"$ops_text" || { echo "FAIL: operator '$op' is not in docs/FORMAT.md §2"; fail=1; }
done

options=$(grep -o '^ *{OPT_[A-Z_0-9]*, *"--[a-z0-9-]*"' "$src/tools/minic.c" | grep -o -- '--[a-z0-9-]*')
[ -n "$options" ] || { echo "FAIL: no options read from tools/minic.c"; exit 1; }
cli_text=$(section 3)
for o in $options; do
  grep -qE -- "[\` ]$o([\` ,=]|\$)" <<<"$cli_text" || { echo "FAIL: option '$o' is not in docs/FORMAT.md §3"; fail=1; }
done
for c in run bench check dump peaks; do
  grep -q "minic $c" <<<"$cli_text" || { echo "FAIL: command '$c' is not in docs/FORMAT.md §3"; fail=1; }
done

cd "$src"
# the files on disk (not git's index: a copy of the tree may carry a stale one)
files=$(find . -type f -not -path './build*' -not -path './.git/*' -not -path './.stage/*' -not -path './.deps/*' \( -name '*.[ch]' -o -name '*.def' -o -name '*.sh' -o -name '*.md' -o -name '*.txt' -o -name '*.py' \))
cited=$(grep -ho 'FORMAT\.md §[0-9]*' $files 2>/dev/null | grep -o '[0-9]*$' | sort -u)
for n in $cited; do
  grep -q "^## $n\. " "$doc" || { echo "FAIL: docs/FORMAT.md §$n is cited but has no section"; fail=1; }
done
if grep -n 'SPEC §[0-9]' $files 2>/dev/null; then
  echo "FAIL: the lines above cite the contract's sections (SPEC §N); cite docs/FORMAT.md §N"
  fail=1
fi
[ "$fail" = 0 ] || exit 1
echo "format doc: ok ($(wc -w <<<"$ops") operators, $(wc -w <<<"$options") options, sections cited: $(echo $cited))"
