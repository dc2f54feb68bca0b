#!/usr/bin/env bash
# Build minic with AddressSanitizer and UndefinedBehaviorSanitizer and run the whole test suite,
# then the thread stress test under ThreadSanitizer (build-tsan), then each libFuzzer target for
# MINIC_FUZZ_SECONDS (default 45; 0 skips) with ASan + UBSan (scripts/fuzz.sh): a finding fails
# the run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build-test -DMINIC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-test -j"$(nproc)"
export MINIC_FULL_TESTS=1 # also the slow checks (tests/quickstart_build.sh: the Release build)
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
(cd build-test && ctest --output-on-failure -j"$(nproc)") || status=$?
# CTest only lists the skipped tests: say why each was skipped (its "skipped: ..." line; the CPU
# tests pinned to a CPU target whose features this machine lacks, the GPU tests without a GPU).
awk '/^[0-9]+\/[0-9]+ Testing: / { name = $3 } /^skipped: / { print name ": " $0 }' \
  build-test/Testing/Temporary/LastTest.log
[ "$status" -eq 0 ] || exit "$status"
# ThreadSanitizer: a second, small build (TSan and ASan exclude each other) of the library and
# the thread stress test alone (tests/test_threads.c). tests/tsan.supp lists the reports that
# come from LLVM's uninstrumented internals, each with why it is not a race.
cmake -S . -B build-tsan -DMINIC_SANITIZE_THREAD=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-tsan -j"$(nproc)" --target test_threads
(cd build-tsan && XDG_CACHE_HOME="$PWD/cache" MINIC_THREADS_RUNS=50 \
  TSAN_OPTIONS="suppressions=$PWD/../tests/tsan.supp:halt_on_error=1" ./test_threads)
fuzz_seconds=${MINIC_FUZZ_SECONDS:-45}
if [ "$fuzz_seconds" -gt 0 ]; then
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 bash scripts/fuzz.sh "$fuzz_seconds"
fi
