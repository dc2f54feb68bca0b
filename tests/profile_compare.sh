#!/usr/bin/env bash
# scripts/profile_compare.py, the comparison with Nsight Compute, on the host: its matching,
# verdicts and the ncu command it runs, with files written here and a stand-in for ncu.
# (On a GPU: docs/PROFILING.md, "Checked against Nsight Compute".)
set -u
src=${MINIC_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # check NAME EXPR...: a grep -E on the last output
  local name=$1; shift
  if ! grep -qE -- "$1" "$tmp/out"; then
    echo "FAIL: $name: no line matching '$1' in:"; cat "$tmp/out"; fail=1
  fi
}
cmp_py="python3 $src/scripts/profile_compare.py"

# ---- compare mode: a profile of three kernels, one of them a GEMM of two cuBLASLt launches --
cat >"$tmp/p.json" <<'EOF'
{ "backend": "cuda", "device": "NVIDIA H100 80GB HBM3",
  "kernels": [
    { "name": "red_fused_layernorm_0", "category": "reduction", "launches": 1, "time_us": 8.0 },
    { "name": "gemm_bias_1", "category": "gemm", "launches": 2, "time_us": 100.0 },
    { "name": "red_fused_layernorm_2", "category": "reduction", "launches": 1, "time_us": 30.0 } ],
  "totals": { "launches_per_run": 4, "kernel_time_us": 138.0, "wall_time_us": 150.0, "device_busy_pct": 92 } }
EOF
# two runs; the last one is compared. The second layernorm runs the first one's module.
cat >"$tmp/t.json" <<'EOF'
{ "otherData": { "timestamps": "real: every kernel of every measured run", "clock": "CUPTI device timestamps, in CUDA graph replays" },
  "traceEvents": [
    { "name": "run 0", "ph": "X", "ts": 0, "dur": 150, "pid": 1, "tid": 1, "args": { "run": 0 } },
    { "name": "red_fused_layernorm_0", "ph": "X", "ts": 1, "dur": 8, "pid": 1, "tid": 2, "args": { "kernel": 0, "run": 0, "function": "red_fused_layernorm_0" } },
    { "name": "run 1", "ph": "X", "ts": 200, "dur": 150, "pid": 1, "tid": 1, "args": { "run": 1 } },
    { "name": "gemm_bias_1", "ph": "X", "ts": 215, "dur": 60, "pid": 1, "tid": 2, "args": { "kernel": 1, "run": 1, "function": "sm90_xmma_gemm_bf16_a" } },
    { "name": "red_fused_layernorm_0", "ph": "X", "ts": 201, "dur": 8, "pid": 1, "tid": 2, "args": { "kernel": 0, "run": 1, "function": "red_fused_layernorm_0" } },
    { "name": "gemm_bias_1", "ph": "X", "ts": 276, "dur": 40, "pid": 1, "tid": 3, "args": { "kernel": 1, "run": 1, "function": "sm90_splitk_reduce" } },
    { "name": "red_fused_layernorm_2", "ph": "X", "ts": 320, "dur": 30, "pid": 1, "tid": 2, "args": { "kernel": 2, "run": 1, "function": "red_fused_layernorm_0" } } ] }
EOF
ncu_csv() { # ncu_csv FILE (name us)...: ncu's --csv --print-units base layout
  local f=$1; shift
  { echo '==PROF== Connected to process 1'
    echo '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
    local i=0
    while [ $# -gt 0 ]; do
      printf '"%d","1","minic","h","%s","1","13","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","%s"\n' \
        "$i" "$1" "$(awk "BEGIN{printf \"%.0f\", $2 * 1000}")"
      i=$((i + 1)); shift 2
    done; } >"$f"
}
# an earlier execution's kernels first (compare mode keeps the last L = 4)
ncu_csv "$tmp/n.csv" red_fused_layernorm_0 9 red_fused_layernorm_0 8.6 sm90_xmma_gemm_bf16_a 61 \
  sm90_splitk_reduce 41 red_fused_layernorm_0 33
$cmp_py compare "$tmp/p.json" "$tmp/t.json" "$tmp/n.csv" >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: compare exited $rc"; cat "$tmp/out"; fail=1; }
# short kernel: |8 - 8.6| = 0.6 us <= 1 us; GEMM: 100 vs 102 = -2.0% ok; layernorm_2: 30 vs 33 = -9.1% MISS
check "short kernel, 1 us rule" '^\| red_fused_layernorm_0 \| 1 \| 8\.00 \| 8\.60 \| -0\.60 \| -7\.0% \| 0\.930 \| ok \| name '
check "GEMM's two launches summed" '^\| gemm_bias_1 \| 2 \| 100\.00 \| 102\.00 \| -2\.00 \| -2\.0% \| 0\.980 \| ok \| name '
check "long kernel, 5% rule" '^\| red_fused_layernorm_2 \| 1 \| 30\.00 \| 33\.00 \| -3\.00 \| -9\.1% \| 0\.909 \| MISS \|'
check "count" 'kernels within the target .*: 2 of 3'
check "median offset" 'median difference per launch \(minic - ncu\): -[0-9.]+ us'
check "the clock named" 'minic: CUPTI device timestamps, in CUDA graph replays; 4 launches per run'
$cmp_py compare "$tmp/p.json" "$tmp/t.json" "$tmp/n.csv" --strict >"$tmp/out" 2>&1
[ $? -eq 1 ] || { echo "FAIL: --strict with a kernel outside the target must exit 1"; fail=1; }

# names that do not follow the program: no comparison, and where it broke
ncu_csv "$tmp/bad.csv" red_fused_layernorm_0 8 sm90_other_gemm 61 sm90_splitk_reduce 41 red_fused_layernorm_0 33
$cmp_py compare "$tmp/p.json" "$tmp/t.json" "$tmp/bad.csv" >"$tmp/out" 2>&1
[ $? -eq 2 ] || { echo "FAIL: a name mismatch must exit 2"; cat "$tmp/out"; fail=1; }
check "mismatch named" 'no comparison: launch 1: minic ran gemm_bias_1 \(sm90_xmma_gemm_bf16_a\), ncu timed sm90_other_gemm'
# fewer kernels than one run
ncu_csv "$tmp/short.csv" red_fused_layernorm_0 8
$cmp_py compare "$tmp/p.json" "$tmp/t.json" "$tmp/short.csv" >"$tmp/out" 2>&1
[ $? -eq 2 ] || { echo "FAIL: too few ncu kernels must exit 2"; fail=1; }
check "count mismatch" 'minic ran 4 launches per run, ncu timed 1'
# CUPTI's 95-character names against ncu's full mangled name
long=_Z17cutlass_kernel_with_a_very_long_mangled_name_that_goes_on_and_on_past_ninety_five_characters_v
sed "s/sm90_xmma_gemm_bf16_a/${long:0:95}/" "$tmp/t.json" >"$tmp/t2.json"
ncu_csv "$tmp/long.csv" red_fused_layernorm_0 8 "$long" 61 sm90_splitk_reduce 41 red_fused_layernorm_0 31
$cmp_py compare "$tmp/p.json" "$tmp/t2.json" "$tmp/long.csv" >"$tmp/out" 2>&1
check "truncated name matches" 'kernels within the target .*: 3 of 3'

# ---- run mode: minic on the ref backend, a stand-in for ncu that records its command line ----
if [ -n "${MINIC_BIN:-}" ] && [ -x "$MINIC_BIN" ]; then
  cat >"$tmp/ncu" <<EOF
#!/usr/bin/env python3
import json, sys
a = sys.argv[1:]
open("$tmp/ncu_args", "a").write(" ".join(a) + "\n")
log = a[a.index("--log-file") + 1]
p = json.load(open("$tmp/run/mlp.json"))
rows = ['"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"']
for i, k in enumerate(p["kernels"]):  # the first within 5% (or 1 us), the second far off
    t = k["time_us"] * 1.02 if i == 0 else k["time_us"] * 1.5 + 5
    rows.append('"%d","1","minic","h","%s","1","13","(1, 1, 1)","(1, 1, 1)","0","9.0","s","gpu__time_duration.sum","usecond","%.4f"' % (i, k["name"], t))
open(log, "w").write("\n".join(rows) + "\n")
EOF
  chmod +x "$tmp/ncu"
  $cmp_py run --minic "$MINIC_BIN" --ncu "$tmp/ncu" --backend ref --iters 3 --out "$tmp/run" \
    "$src/examples/mlp.graph" >"$tmp/out" 2>&1
  rc=$?
  [ $rc -eq 0 ] || { echo "FAIL: run mode exited $rc"; cat "$tmp/out"; fail=1; }
  args=$(cat "$tmp/ncu_args" 2>/dev/null)
  for want in "--clock-control none" "--cache-control none" "--metrics gpu__time_duration.sum" \
              "--print-kernel-base mangled" "--launch-count 2" "--launch-skip 4" "run $src/examples/mlp.graph --backend ref --iters 1"; do
    grep -qF -- "$want" <<<"$args" || { echo "FAIL: ncu's command line lacks '$want': $args"; fail=1; }
  done
  check "run mode: first kernel" '^\| gemm_bias_gelu_0 \| 1 \| .* \| ok \| name '
  check "run mode: second kernel" '^\| gemm_bias_add_1 \| 1 \| .* \| MISS \| name '
  check "run mode: summary" 'all graphs: 2 kernels compared, 1 outside the target'
  $cmp_py run --minic "$MINIC_BIN" --ncu "$tmp/ncu" --backend ref --iters 2 --out "$tmp/run" \
    --replay-mode application --strict "$src/examples/mlp.graph" >"$tmp/out" 2>&1
  [ $? -eq 1 ] || { echo "FAIL: run --strict with a miss must exit 1"; fail=1; }
  grep -qF -- "--replay-mode application" "$tmp/ncu_args" || { echo "FAIL: --replay-mode not passed to ncu"; fail=1; }
fi
[ $fail -eq 0 ] && echo "profile_compare: ok"
exit $fail
