#!/usr/bin/env bash
# Build every libFuzzer target (fuzz/fuzz_*.c, CMake option MINIC_FUZZ) with clang, ASan and
# UBSan, and run each one for a bounded time. Fails on any finding (crash, sanitizer report,
# leak, timeout, out-of-memory); the offending input is left in build-fuzz/artifacts/<target>/.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET=60] [TARGET...]
#
# Seeds come from fuzz/corpus/<name>/ (the target's name without "fuzz_") and are never
# modified: new inputs go to build-fuzz/corpus/<name>/, which persists between runs.
# fuzz/<name>.dict, when present, is passed as a libFuzzer dictionary.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
CC=${CC:-$(command -v clang-14 || command -v clang || true)}
if [ -z "$CC" ]; then
  echo "fuzz: clang not found (set CC)" >&2
  exit 1
fi
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER="$CC" -DMINIC_FUZZ=ON -DMINIC_TESTS=OFF \
  -DMINIC_WITH_LLVM=OFF -DMINIC_WITH_CUDA=OFF -DMINIC_SANITIZE=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz --target fuzzers -j"$jobs" >/dev/null

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for src in fuzz/fuzz_*.c; do
    targets+=("$(basename "$src" .c)")
  done
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# One target per core at a time: each runs alone for its SECONDS, so the wall time is
# about SECONDS x ceil(targets / cores) rather than SECONDS x targets.
run_one() {
  local t=$1 name=${1#fuzz_}
  local work=build-fuzz/corpus/$name artifacts=build-fuzz/artifacts/$name/
  mkdir -p "$work" "$artifacts"
  local args=(-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=16384
              -print_final_stats=1 -artifact_prefix="$artifacts")
  [ -f "fuzz/$name.dict" ] && args+=(-dict="fuzz/$name.dict")
  local seeds=()
  [ -d "fuzz/corpus/$name" ] && seeds+=("fuzz/corpus/$name")
  echo "fuzz: $t for ${secs}s" >&2
  local log=build-fuzz/$t.log
  if ! "build-fuzz/$t" "${args[@]}" "$work" "${seeds[@]}" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz: $t: FINDING (input in $artifacts)" >&2
    return 1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$log" | sed "s/^/fuzz: $t: /" >&2 || true
}
failed=()
pids=()
names=()
for t in "${targets[@]}"; do
  run_one "$t" &
  pids+=($!)
  names+=("$t")
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
    wait -n || true
  done
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || failed+=("${names[$i]}")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: no findings" >&2
