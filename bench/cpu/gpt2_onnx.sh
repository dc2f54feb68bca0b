#!/usr/bin/env bash
# GPT-2 small's sizes on the CPU, minic beside ONNX Runtime on the same ONNX file (issue 21's CPU
# point, issue 22's real model at GPT-2 size): bench/cpu/gpt2_onnx.py exports the decoder once
# from PyTorch 1.13 (B=1, T=128, 649 MB), then, ROUNDS times over, `minic run model.onnx
# --backend cpu` (its import, compile and the median run) and ONNX Runtime's CPU provider
# (onnxruntime-node, all optimizations), each with THREADS threads, and both outputs against
# PyTorch's logits. Prints two lines per round (minic's, then ORT's JSON); speed is written down in
# docs/PERFORMANCE.md, not asserted.
#
#   ORT=<dir>/node_modules/onnxruntime-node bash bench/cpu/gpt2_onnx.sh MINIC [THREADS=2] [ROUNDS=3]
#
# Settings: GPT2_ONNX_DIR (default /tmp/minic-gpt2-onnx; an existing export is reused), ITERS
# (default 10), DECODE=P: one decoding step after P tokens instead (gpt2_onnx.py --decode P; the
# ids of one token and the P tokens' keys and values in; default directory
# /tmp/minic-gpt2-decode-P), its tokens/s being 1000 / the step's ms. ORT is installed as ../shared/peers/README.md says
# (`npm install --ignore-scripts onnxruntime-node@1.30.0`).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ] || [ "$1" = --help ] || [ "$1" = -h ]; then
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
  exit $(( $# < 1 ? 2 : 0 ))
fi
minic=$1 threads=${2:-2} rounds=${3:-3}
decode=${DECODE:-} iters=${ITERS:-10}
if [ -n "$decode" ]; then
  dir=${GPT2_ONNX_DIR:-/tmp/minic-gpt2-decode-$decode}
  export_args=(--decode "$decode") inputs=(--input "input=$dir/input.npy" --input "past=$dir/past.npy")
  out=$dir/out_cpu.safetensors # two outputs: the logits and `present`
else
  dir=${GPT2_ONNX_DIR:-/tmp/minic-gpt2-onnx}
  export_args=() inputs=(--input "input=$dir/input.npy") out=$dir/out_cpu.npy
fi
[ -x "$minic" ] || { echo "gpt2_onnx: $minic is not an executable" >&2; exit 2; }
[ -n "${ORT:-}" ] || { echo "gpt2_onnx: set ORT to onnxruntime-node's directory" >&2; exit 2; }
if [ ! -f "$dir/model.onnx" ]; then
  /usr/bin/python3 "$here/gpt2_onnx.py" "$dir" "${export_args[@]}"
fi
err() { /usr/bin/python3 -c "import json, numpy as np, struct, sys
def load(path):  # a .npy, or the logits of a .safetensors file (f32): not 'present'; minic
    if not path.endswith('.safetensors'):  # names ONNX's 'output' output_1 (a reserved word)
        return np.load(path)
    raw = open(path, 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    e = h[[k for k in h if k not in ('__metadata__', 'present')][0]]
    lo, hi = e['data_offsets']
    return np.frombuffer(raw[8 + n + lo:8 + n + hi], np.float32).reshape(e['shape'])
a = load(sys.argv[1]).astype(np.float64); b = np.load(sys.argv[2]).astype(np.float64)
print('%.3g' % (np.linalg.norm(a - b) / np.linalg.norm(b)))" "$1" "$2"; }
for r in $(seq 1 "$rounds"); do
  start=$EPOCHREALTIME
  "$minic" run "$dir/model.onnx" --backend cpu --threads "$threads" --iters "$iters" \
    "${inputs[@]}" --output "$out" --verbose >"$dir/minic.txt" 2>&1
  secs=$(/usr/bin/python3 -c "print(round($EPOCHREALTIME - $start, 1))")
  t=$(grep -o 'time: [0-9.]* us per run' "$dir/minic.txt" | grep -o '[0-9.]*')
  c=$(grep -o 'compiled in [0-9.]* ms' "$dir/minic.txt" | head -1 | grep -o '[0-9.]*')
  echo "round $r: minic cpu $(/usr/bin/python3 -c "print(round($t / 1000, 2))") ms per run" \
    "(median of $iters), compiled in $c ms, whole process ${secs} s, error vs PyTorch $(err "$out" "$dir/expected.npy")"
  echo "round $r: $(ORT=$ORT node "$here/ort_gpt2.js" "$dir" "$threads" "$iters")"
done
