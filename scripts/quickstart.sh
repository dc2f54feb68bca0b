#!/usr/bin/env bash
# Quick start: install what minic needs (scripts/deps.sh), build it into build/, and run the
# example MLP block with its per-kernel profile.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
echo
echo "+ build/minic run examples/mlp.graph --profile"
build/minic run examples/mlp.graph --profile
