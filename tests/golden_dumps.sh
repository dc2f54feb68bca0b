#!/usr/bin/env bash
# Golden generated code: every example and bench graph, fused and unfused, dumped as kernel IR
# (`--stage fused`) and as CUDA source (`--stage code --backend cuda`, rendered for sm_90 where
# no GPU is present), hashed, and compared with tests/golden/dumps.sha256. A change that alters
# any kernel shows up here by name. When the change is meant, regenerate the list and commit it
# with the change: MINIC_GOLDEN_UPDATE=1 bash tests/golden_dumps.sh (it says which dumps moved).
set -u
src=${MINIC_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
bin=${MINIC_BIN:-$src/build/minic}
cd "$src" || exit 2
list=tests/golden/dumps.sha256
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cuda=yes
if ! "$bin" dump examples/mlp.graph --stage code --backend cuda --quiet >/dev/null 2>&1; then
  cuda=no # built without the CUDA backend
fi
for g in examples/*.graph bench/*/*.graph; do
  for mode in fused unfused; do
    flag=; [ $mode = unfused ] && flag=--no-fuse
    name=$(echo "$g" | tr / _)
    "$bin" dump "$g" --stage fused $flag --quiet >"$tmp/$name.$mode.kir" 2>&1 || { echo "FAIL: dump $g --stage fused $flag"; exit 1; }
    if [ $cuda = yes ]; then
      "$bin" dump "$g" --stage code --backend cuda $flag --quiet >"$tmp/$name.$mode.cu" 2>&1 || { echo "FAIL: dump $g --stage code --backend cuda $flag"; exit 1; }
    fi
  done
done
mkdir "$tmp/d" && mv "$tmp"/*.kir "$tmp/d"/ && { [ $cuda = no ] || mv "$tmp"/*.cu "$tmp/d"/; }
(cd "$tmp/d" && sha256sum -- * | sort -k 2) >"$tmp/now.sha256"
n=$(wc -l <"$tmp/now.sha256")
if [ "${MINIC_GOLDEN_UPDATE:-0}" = 1 ]; then
  [ -f "$list" ] && diff <(sort -k 2 "$list") "$tmp/now.sha256" | sed -n 's/^> [0-9a-f]*  /changed or new: /p'
  cp "$tmp/now.sha256" "$list"
  echo "golden_dumps: wrote $list ($n dumps)"
  exit 0
fi
[ -f "$list" ] || { echo "FAIL: $list is missing (MINIC_GOLDEN_UPDATE=1 makes it)"; exit 1; }
if [ $cuda = no ]; then
  grep -v '\.cu$' "$list" | sort -k 2 >"$tmp/want.sha256"
  echo "golden_dumps: skipped: the CUDA sources (built without the CUDA backend)"
else
  sort -k 2 "$list" >"$tmp/want.sha256"
fi
moved=$(join -1 2 -2 2 "$tmp/want.sha256" "$tmp/now.sha256" | awk '$2 != $3 {print $1}')
missing=$(join -v 1 -1 2 -2 2 "$tmp/want.sha256" "$tmp/now.sha256" | awk '{print $1}')
if [ -n "$moved$missing" ]; then
  for d in $moved; do echo "FAIL: generated code changed: $d"; done
  for d in $missing; do echo "FAIL: no longer generated: $d"; done
  echo "(if the change is meant: MINIC_GOLDEN_UPDATE=1 bash tests/golden_dumps.sh, and commit the list)"
  exit 1
fi
echo "golden_dumps: $n dumps identical to $list"
