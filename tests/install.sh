#!/usr/bin/env bash
# The installed package works for a user: `cmake --install` into a temporary prefix, then
# examples/mlp.c is built against it twice -- by a tiny CMake project with find_package(minic),
# and by one compiler line with pkg-config, with no rpath or LD_LIBRARY_PATH of our own (the
# .pc file's Libs carries the rpath) -- and both programs run and print the same output.
# The installed `minic` command runs too.
#
# Run by CTest (MINIC_BUILD, MINIC_SRC set) or by hand: bash tests/install.sh [BUILD_DIR].
set -euo pipefail
src=${MINIC_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
build=${MINIC_BUILD:-${1:-$src/build}}
work=$(mktemp -d "${TMPDIR:-/tmp}/minic-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

for tool in cmake cc pkg-config; do
  command -v $tool >/dev/null || { echo "skipped: $tool not found"; exit 77; }
done

cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/minic.h bin/minic; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
libdir=$(find "$prefix" -name 'libminic.so' -printf '%h\n' | head -1)
[ -n "$libdir" ] && [ -e "$libdir/libminic.a" ] || { echo "FAIL: libminic.so/.a not installed"; exit 1; }
[ -e "$libdir/pkgconfig/minic.pc" ] || { echo "FAIL: minic.pc not installed"; exit 1; }
[ -e "$libdir/cmake/minic/minicConfig.cmake" ] || { echo "FAIL: CMake package not installed"; exit 1; }

# A library built with the sanitizers needs them in its users too.
flags=""
if grep -q '^MINIC_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  flags="-fsanitize=address,undefined"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-}:verify_asan_link_order=0:detect_leaks=1
fi

# 1. find_package(minic) from a CMake project.
mkdir -p "$work/proj"
cp "$src/examples/mlp.c" "$work/proj/"
cat > "$work/proj/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.20)
project(uses_minic C)
find_package(minic REQUIRED)
add_executable(mlp mlp.c)
target_link_libraries(mlp PRIVATE minic::minic)
EOF
cmake -S "$work/proj" -B "$work/proj/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" >/dev/null
cmake --build "$work/proj/build" >/dev/null
"$work/proj/build/mlp" ref > "$work/cmake.txt"

# 2. One compiler line with pkg-config.
export PKG_CONFIG_PATH=$libdir/pkgconfig
cc $flags "$src/examples/mlp.c" -o "$work/mlp_pc" $(pkg-config --cflags --libs minic)
unset LD_LIBRARY_PATH
"$work/mlp_pc" ref > "$work/pkgconfig.txt" || { echo "FAIL: the pkg-config build exits $?"; exit 1; }

grep -q '^y: f32\[32, 128\]' "$work/cmake.txt" || { echo "FAIL: unexpected output:"; cat "$work/cmake.txt"; exit 1; }
cmp "$work/cmake.txt" "$work/pkgconfig.txt" || { echo "FAIL: the two builds disagree"; exit 1; }

# 3. The installed command.
"$prefix/bin/minic" run "$src/examples/mlp.graph" --backend ref > "$work/cli.txt"
grep -q 'checksum: sum=' "$work/cli.txt" || { echo "FAIL: installed minic:"; cat "$work/cli.txt"; exit 1; }
# The example and the command agree (same seed and names, same backend).
grep -F -q "$(grep 'checksum' "$work/cmake.txt")" "$work/cli.txt" || {
  echo "FAIL: mlp.c and minic run disagree"; cat "$work/cmake.txt" "$work/cli.txt"; exit 1; }
echo "install: ok (find_package, pkg-config, installed minic)"
