#!/usr/bin/env bash
# Real models through minic (CTest: onnx_models): a GPT-2-style decoder and a small CNN exported
# from PyTorch 1.13 at opsets 13 and 17 (tests/onnx_models/models.py; torchvision's ResNet-18 too
# under MINIC_FULL_TESTS=1 where python3-torchvision is installed), and with dynamic axes
# (dim_params: symbolic dimensions, bound from each input file's shape), run on ref and cpu, each
# output compared with PyTorch's within docs/FORMAT.md §6 (relative norm 1e-4: with matmul).
# Also the models in tests/onnx_models/fixtures and MINIC_ONNX_EXTRA (see below).
# A model minic cannot import yet (the CNN, until minic has conv and pooling) must fail within a
# second with exit status 1 and one `minic: unsupported:` line per node; once it imports, it is
# compared like the others. Without python3-torch only the fixtures run (numpy compares them).
set -uo pipefail
src=${MINIC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${MINIC_BUILD:-$src/build}
bin=${MINIC_BIN:-$build/minic}
# the first python3 with PyTorch: Debian's (/usr/bin) here, the venv's on the GPU machine
py=/usr/bin/python3
for p in /usr/bin/python3 python3; do
  if "$p" -c "import torch" 2>/dev/null; then py=$p; break; fi
done
out=$build/onnx_models
rm -rf "$out"
"$py" "$src/tests/onnx_models/models.py" "$out"
rc=$?
# without PyTorch, only the models kept in the repository run (below)
[ $rc -eq 77 ] && { echo "onnx_models: the models exported here skipped: python3-torch is not installed"; mkdir -p "$out"; rc=0; }
[ $rc -ne 0 ] && { echo "onnx_models: exporting the models failed"; exit 1; }
# models kept in the repository (tests/onnx_models/fixtures: Hugging Face's GPT-2 at a tiny size,
# exported where transformers is, by bench/onnx/hf_gpt2.py) and, with MINIC_ONNX_EXTRA=DIR, every
# model folder in DIR (the same layout: model.onnx, input[_K].npy, expected[_K].npy)
for dir in "$src"/tests/onnx_models/fixtures/*/ ${MINIC_ONNX_EXTRA:+"$MINIC_ONNX_EXTRA"/*/}; do
  [ -f "$dir/model.onnx" ] && cp -a "${dir%/}" "$out/"
done
backends=${MINIC_ONNX_BACKENDS:-ref}
if [ -z "${MINIC_ONNX_BACKENDS:-}" ] && [ "${MINIC_HAVE_CPU:-OFF}" = ON ]; then backends="ref cpu"; fi
fail=0
nmodels=0
for dir in "$out"/*/; do
  [ -f "$dir/model.onnx" ] || continue
  nmodels=$((nmodels + 1))
  name=$(basename "$dir")
  for b in $backends; do
    # every input of the model (a model with dynamic axes has more, of other sizes: its dim_params
    # are bound by the input file when it runs, nothing given at import)
    for input in "$dir"/input*.npy; do
      suffix=$(basename "$input" .npy); suffix=${suffix#input}
      run="$name${suffix:+ (input$suffix)} on $b"
      start=$EPOCHREALTIME
      "$bin" run "$dir/model.onnx" --backend "$b" --input "input=$input" \
        --output "$dir/out_$b$suffix.npy" --quiet >"$dir/stdout_$b.txt" 2>"$dir/stderr_$b.txt"
      st=$?
      secs=$("$py" -c "print(round($EPOCHREALTIME - $start, 3))")
      if [ $st -eq 1 ] && grep -q "^minic: unsupported: " "$dir/stderr_$b.txt"; then
        n=$(grep -c "^minic: unsupported: " "$dir/stderr_$b.txt")
        if [ "$("$py" -c "print(int($secs < 1))")" = 1 ]; then
          echo "onnx_models: $run: not importable yet, $n nodes listed in ${secs}s ($(grep -o '([A-Za-z]*,' "$dir/stderr_$b.txt" | sort -u | tr -d '(,' | tr '\n' ' '))"
        else
          echo "onnx_models: FAIL: $run: the unsupported list took ${secs}s"; fail=1
        fi
        continue
      fi
      if [ $st -ne 0 ]; then
        echo "onnx_models: FAIL: $run: exit $st"; cat "$dir/stderr_$b.txt"; fail=1; continue
      fi
      err=$("$py" -c "import numpy as np, sys
a = np.load(sys.argv[1]).astype(np.float64); b = np.load(sys.argv[2]).astype(np.float64)
print(np.linalg.norm(a - b) / np.linalg.norm(b) if a.shape == b.shape and np.isfinite(a).all() else 'inf')" \
        "$dir/out_$b$suffix.npy" "$dir/expected$suffix.npy")
      if [ "$err" != inf ] && [ "$("$py" -c "print(int($err <= 1e-4))")" = 1 ]; then
        echo "onnx_models: $run: matches PyTorch (relative error $err)"
      else
        echo "onnx_models: FAIL: $run: relative error $err against PyTorch"; fail=1
      fi
    done
  done
done
[ $nmodels -gt 0 ] || { echo "skipped: no models (python3-torch not installed, no fixtures)"; exit 77; }
exit $fail
