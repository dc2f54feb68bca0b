#!/usr/bin/env bash
# SIGINT or SIGTERM while `minic run --output y.npy` writes its output: the process ends by the
# signal (status 130 / 143), and neither y.npy nor its temporary (y.npy.tmp-PID-N) is left.
# Issue 19's repro: "SIGINT leaves y.npy.tmp-PID-0 behind". The output is 64 MiB so that the
# write (and its fsync) lasts long enough to be caught: the signal is sent as soon as the
# temporary appears.
set -uo pipefail
set -m # job control: a background job of a script otherwise starts with SIGINT ignored
bin=${MINIC_BIN:-build/minic}
work=$(mktemp -d "${MINIC_BUILD:-/tmp}/sigint.XXXXXX")
trap 'rm -rf "$work"' EXIT
cat >"$work/big.graph" <<'EOF'
graph big
input x : f32[4096, 4096]
y = neg(x)
output y
EOF
backend=auto

failures=0
for sig in INT TERM; do
  rm -f "$work"/y.npy*
  "$bin" run "$work/big.graph" --backend "$backend" --quiet --output "$work/y.npy" >/dev/null 2>"$work/err" &
  pid=$!
  caught=0
  while true; do
    if compgen -G "$work/y.npy.tmp-*" >/dev/null; then
      kill -"$sig" "$pid"
      caught=1
      break
    fi
    kill -0 "$pid" 2>/dev/null || break
  done
  wait "$pid"
  rc=$?
  left=$(cd "$work" && ls y.npy* 2>/dev/null | tr '\n' ' ')
  if [ $caught -eq 0 ]; then
    echo "FAIL: SIG$sig: the write was over before its temporary could be seen (status $rc)"
    failures=$((failures + 1))
  elif [ -n "$left" ]; then
    echo "FAIL: SIG$sig during the write left: $left"
    failures=$((failures + 1))
  elif [ "$sig" = INT ] && [ $rc -ne 130 ] || [ "$sig" = TERM ] && [ $rc -ne 143 ]; then
    echo "FAIL: SIG$sig: exit status $rc (expected the signal's: 128 + its number)"
    failures=$((failures + 1))
  else
    echo "ok: SIG$sig during the write: status $rc, nothing left"
  fi
done
if [ $failures -eq 0 ]; then echo "2 passed, 0 failed"; else echo "$((2 - failures)) passed, $failures failed"; fi
[ $failures -eq 0 ]
