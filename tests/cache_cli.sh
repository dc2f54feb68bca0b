#!/usr/bin/env bash
# `minic cache info|clear` and the cache's note, through the command: info counts what a run
# stored, clear removes it, a refused directory is a note on stderr (not with --quiet) and the
# run still works, the help texts say what the command does.
set -uo pipefail
bin=${MINIC_BIN:-build/minic}
src=${MINIC_SRC:-.}
work=$(mktemp -d "${MINIC_BUILD:-/tmp}/cache_cli.XXXXXX")
trap 'chmod -R u+rwx "$work" 2>/dev/null; rm -rf "$work"' EXIT
export XDG_CACHE_HOME=$work/xdg
unset MINIC_NO_CACHE MINIC_CACHE_SIZE
passed=0
failed=0
check() { # check NAME COMMAND...: the command must succeed
  local name=$1
  shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $name"; fi
}
graph=$src/examples/mlp.graph
backend=cpu
MINIC_NO_CACHE=1 "$bin" run "$graph" --backend cpu --quiet >/dev/null 2>&1 || backend=ref

check "help lists cache" grep -q "cache  the compile cache" <("$bin" --help)
check "cache --help names the variables" grep -q "MINIC_CACHE_SIZE" <("$bin" cache --help)
"$bin" cache frobnicate >/dev/null 2>"$work/err"
check "a wrong subcommand is exit status 1" test $? -eq 1
check "... with a message" grep -q "expected 'info' or 'clear'" "$work/err"

"$bin" cache info >"$work/info" 2>&1
check "info on an empty cache" grep -q "total: 0 entries" "$work/info"
check "info names the directory" grep -q "directory: $XDG_CACHE_HOME/minic" "$work/info"
if [ "$backend" = cpu ]; then
  "$bin" run "$graph" --backend cpu --quiet >/dev/null
  "$bin" cache info >"$work/info" 2>&1
  check "info counts the entry a run stored" grep -q "^cpu: 1 entry" "$work/info"
  check "info says the cache is used" grep -q "^state: in use" "$work/info"
  "$bin" cache clear >"$work/clear" 2>&1
  check "clear removes it" grep -q "removed 1 entry" "$work/clear"
  "$bin" cache info >"$work/info" 2>&1
  check "nothing left" grep -q "total: 0 entries" "$work/info"

  chmod 777 "$XDG_CACHE_HOME/minic"
  "$bin" run "$graph" --backend cpu >"$work/out" 2>"$work/err"
  check "a refused directory: the run works" test $? -eq 0
  check "... with a note naming it" grep -q "minic: note: the compile cache is off: $XDG_CACHE_HOME/minic is writable by other users" "$work/err"
  "$bin" run "$graph" --backend cpu --quiet >"$work/out" 2>"$work/err"
  check "... not with --quiet" test ! -s "$work/err"
  "$bin" cache info >"$work/info" 2>&1
  check "info says why it is not used" grep -q "^state: not used: .*writable by other users" "$work/info"
  "$bin" cache clear >/dev/null 2>"$work/err"
  check "clear refuses it" test $? -eq 1
  chmod 700 "$XDG_CACHE_HOME/minic"
fi
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
