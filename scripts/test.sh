#!/usr/bin/env bash
# Build minic with AddressSanitizer and UndefinedBehaviorSanitizer and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build-test -DMINIC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-test -j"$(nproc)"
export MINIC_FULL_TESTS=1 # also the slow checks (tests/quickstart_build.sh: the Release build)
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cd build-test && ctest --output-on-failure -j"$(nproc)"
