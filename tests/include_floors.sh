#!/usr/bin/env bash
# Includes run only downward (README "How it is built"): support <- ir <- kir <- passes <- backends
# <- runtime <- tools, with frontend beside kir (it builds graph IR, knows nothing of kernels).
# A file may include headers of its own folder and of lower floors; the three backends include
# backends/*.h but never each other. Fails naming every include that runs upward or sideways.
set -u
cd "${MINIC_SRC:-$(dirname "$0")/..}" || exit 2
floor() {
  case "$1" in
    include/*) echo 0 ;; support/*) echo 1 ;; ir/*) echo 2 ;; kir/*) echo 3 ;; frontend/*) echo 3 ;;
    passes/*) echo 4 ;; backends/ref/*|backends/cpu/*|backends/cuda/*) echo 6 ;; backends/*) echo 5 ;;
    runtime/*) echo 7 ;; tools/*) echo 8 ;; *) echo -1 ;;
  esac
}
bad=0 checked=0
# the files on disk (not git's index: a copy of the tree may carry a stale one)
for f in $(find support ir kir frontend passes backends runtime tools -type f | sort); do
  case "$f" in *.c|*.h|*.def) ;; *) continue ;; esac
  mine=$(floor "$f")
  dir=$(dirname "$f")
  while IFS= read -r inc; do
    [ -n "$inc" ] || continue
    checked=$((checked + 1))
    case "$inc" in */*) target=$inc ;; *) target=$dir/$inc ;; esac
    [ "$inc" = minic.h ] && target=include/minic.h
    if [ ! -e "$target" ]; then
      echo "$f: includes \"$inc\", which is not a file of the tree (write it from the root: \"folder/file.h\")"
      bad=$((bad + 1)); continue
    fi
    theirs=$(floor "$target")
    [ "$(dirname "$target")" = "$dir" ] && continue
    if [ "$theirs" -ge "$mine" ]; then
      echo "$f (floor $mine) includes $target (floor $theirs): includes run only downward"
      bad=$((bad + 1))
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done
echo "include_floors: $checked includes checked, $bad upward or sideways"
[ "$bad" -eq 0 ] && [ "$checked" -gt 50 ]
