#!/usr/bin/env bash
# Every command the README shows runs as written, in the README's order, and succeeds; and the
# README's example output is real.
#
# The commands are read from README.md itself: every line of a ```sh block, and every `$ `
# line of a plain ``` block (the example run). They run one after another in one shell, in a
# scratch directory where `build` is this build and `examples` the repository's examples, with
# HOME pointing into the scratch directory (the README installs into ~/.local). Each must exit
# with status 0. Then:
#   * the example run prints the values and checksum lines the README shows (times aside);
#   * the run that repeats a run from the files --save-inputs wrote prints that run's checksums;
#   * the program the pkg-config line builds ran (the README runs it with `&& ./mlp`).
#
# Two commands are not run here: `bash scripts/quickstart.sh` and `bash .ci/run` build minic
# and run this very suite (CI runs .ci/run; tests/quickstart_build.sh builds the quick start's
# Release configuration). A build with the sanitizers needs them in the programs that link
# it too: then `cc` is given -fsanitize through a wrapper, as tests/install.sh does.
set -euo pipefail
src=${MINIC_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
build=${MINIC_BUILD:-$src/build}
[ -x "$build/minic" ] || { echo "FAIL: no minic in $build (set MINIC_BUILD)"; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/minic-readme.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT # KEEP=1 keeps the outputs to look at
mkdir -p "$work/run" "$work/home" "$work/bin"
ln -s "$build" "$work/run/build"
ln -s "$src/examples" "$work/run/examples"

# The commands, in order: "sh<TAB>command" for ```sh lines, "example<TAB>command" for `$ ` lines.
awk '/^```/ { if (inblock) { inblock = 0 } else { inblock = 1; lang = substr($0, 4) }; next }
     inblock && lang == "sh" && NF { print "sh\t" $0 }
     inblock && lang == "" && /^\$ / { print "example\t" substr($0, 3) }' "$src/README.md" \
  > "$work/commands.txt"
[ "$(wc -l < "$work/commands.txt")" -ge 10 ] || { echo "FAIL: too few commands read from README.md"; cat "$work/commands.txt"; exit 1; }

if grep -q '^MINIC_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  real_cc=$(command -v cc)
  printf '#!/bin/sh\nexec "%s" -fsanitize=address,undefined "$@"\n' "$real_cc" > "$work/bin/cc"
  chmod +x "$work/bin/cc"
  export PATH="$work/bin:$PATH"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-}:verify_asan_link_order=0
fi

fail=0
(
  cd "$work/run"
  export HOME="$work/home"
  unset PKG_CONFIG_PATH LD_LIBRARY_PATH
  n=0
  while IFS=$'\t' read -r kind cmd; do
    n=$((n + 1))
    case "$cmd" in
      "bash scripts/quickstart.sh"*|"bash .ci/run"*) echo "skipped: $cmd (the build and the suite themselves)"; continue ;;
    esac
    set +e
    eval "$cmd" > "$work/out.$n" 2> "$work/err.$n" < /dev/null
    rc=$?
    set -e
    printf '%s\t%s\t%s\n' "$n" "$rc" "$cmd" >> "$work/ran.txt"
    if [ "$rc" != 0 ]; then
      echo "FAIL: exit status $rc: $cmd"
      sed 's/^/  | /' "$work/out.$n" "$work/err.$n" | tail -20
    else
      echo "ok: $cmd"
    fi
    if [ "$kind" = example ]; then cp "$work/out.$n" "$work/example.txt"; fi
  done < "$work/commands.txt"
)
awk -F'\t' '$2 != 0 { bad = 1 } END { exit bad }' "$work/ran.txt" || fail=1

# The example's output lines are the README's.
for pattern in '^y: f32\[32, 128\]$' '^  values: ' '^  checksum: '; do
  want=$(grep -E -m1 "$pattern" "$src/README.md" || true)
  got=$(grep -E -m1 "$pattern" "$work/example.txt" 2>/dev/null || true)
  if [ -z "$want" ] || [ "$want" != "$got" ]; then
    echo "FAIL: README.md shows '$want' but minic prints '$got'"
    echo "(refresh the example in README.md with the output of: build/minic run examples/mlp.graph --backend ref --profile)"
    fail=1
  fi
done

# A run repeated from the files --save-inputs wrote prints the same checksums.
save=$(awk -F'\t' '$3 ~ /--save-inputs/ { print $1; exit }' "$work/ran.txt")
saved=$(awk -F'\t' '$3 ~ /--save-inputs/ { print $3; exit }' "$work/ran.txt" | sed -n 's/.*--save-inputs \([^ ]*\).*/\1/p')
again=$(awk -F'\t' -v f="$saved" '$3 ~ ("--weights " f) && $3 ~ ("=" f) { print $1; exit }' "$work/ran.txt")
if [ -z "$save" ] || [ -z "$again" ]; then
  echo "FAIL: the README no longer shows a run with --save-inputs and its repetition from that file"
  fail=1
elif ! grep -q 'checksum:' "$work/out.$save" ||
     [ "$(grep checksum: "$work/out.$save")" != "$(grep checksum: "$work/out.$again")" ]; then
  echo "FAIL: the run repeated from $saved prints other checksums:"
  grep checksum: "$work/out.$save" "$work/out.$again" || true
  fail=1
fi

# The pkg-config build's program ran and printed its output (the README runs it with ./mlp).
if ! grep -q 'pkg-config --cflags --libs minic' "$work/ran.txt"; then
  echo "FAIL: the README no longer shows the pkg-config line"
  fail=1
# (grep over the files, not `cat | grep -q`: grep -q stops at the first match, and with pipefail
# cat's SIGPIPE then failed the check whenever the outputs were long)
elif [ ! -x "$work/run/mlp" ] || ! grep -qh '^y: f32\[32, 128\]' "$work"/out.*; then
  echo "FAIL: the program built with pkg-config did not run"
  fail=1
fi

[ "$fail" = 0 ] || exit 1
echo "readme: ok ($(wc -l < "$work/ran.txt") commands ran, each exit status 0)"
