#!/usr/bin/env bash
# examples/gpt2_generate.c on a tiny GPT-2 (2 layers, d_model 64, 4 heads, vocab 97, 64
# positions), its random weights written here as .safetensors (python3 without numpy): greedy
# decoding with the KV cache (a prefill program, then a decode program per token with update at
# pos) must give the same ids as running the whole sequence again at every step without a cache
# (--no-cache), on ref and cpu (and cuda where `--backend cuda` runs here; MINIC_TEST_BACKEND=cuda
# makes it required), fused and unfused. The weights are chosen so that the ids vary (more than
# a third of them distinct): a model whose next token follows from the last alone would pass
# without a working cache. The decode loop stays on the device (argmax, ids, position and ids so
# far fed back, the caches in place); --host-loop (the host's argmax, the caches copied) and
# MINIC_NO_IN_PLACE=1 (every output copied) give the same ids. Wrong options, prompts and
# weights are exit 1 with a message.
set -euo pipefail
build=${MINIC_BUILD:-build}
gen=$build/gpt2_generate
[ -x "$gen" ] || { echo "skipped: $gen is not built"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

python3 - "$work/w.safetensors" <<'P'
import json, random, struct, sys
L, d, V, P = 2, 64, 97, 64
r = random.Random(23)
def u(n, a, c=0.0):
    return [c + r.uniform(-a, a) for _ in range(n)]
t = {}
for i in range(L):
    h = "h%d." % i
    t[h + "ln_1.w"], t[h + "ln_1.b"] = ([d], u(d, 0.1, 1.0)), ([d], u(d, 0.1))
    t[h + "attn.w"], t[h + "attn.b"] = ([3 * d, d], u(3 * d * d, 1.0)), ([3 * d], u(3 * d, 0.1))
    t[h + "proj.w"], t[h + "proj.b"] = ([d, d], u(d * d, 1.0)), ([d], u(d, 0.1))
    t[h + "ln_2.w"], t[h + "ln_2.b"] = ([d], u(d, 0.1, 1.0)), ([d], u(d, 0.1))
    t[h + "fc.w"], t[h + "fc.b"] = ([4 * d, d], u(4 * d * d, 0.2)), ([4 * d], u(4 * d, 0.1))
    t[h + "out.w"], t[h + "out.b"] = ([d, 4 * d], u(4 * d * d, 0.1)), ([d], u(d, 0.1))
t["ln_f.w"], t["ln_f.b"] = ([d], u(d, 0.1, 1.0)), ([d], u(d, 0.1))
t["wte"], t["wpe"] = ([V, d], u(V * d, 1.0)), ([P, d], u(P * d, 1.0))
header, data, off = {}, b"", 0
for name, (shape, vals) in t.items():
    b = struct.pack("<%df" % len(vals), *vals)
    header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(b)]}
    data += b
    off += len(b)
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + data)
P

tiny=(--weights "$work/w.safetensors" --layers 2 --heads 4 --dmodel 64 --vocab 97 --positions 64 --max-seq 24)
prompt=(--prompt 5,1,70,2,9,33)
ids() { grep '^ids: ' "$1" | cut -d' ' -f2; }

backends="ref"
if "$gen" "${tiny[@]}" "${prompt[@]}" --new 2 --backend cpu --quiet >/dev/null 2>"$work/cpu_err"; then
  backends="$backends cpu"
elif grep -q "built without it" "$work/cpu_err"; then
  echo "gpt2_generate: cpu skipped: $(head -1 "$work/cpu_err")"
else
  fail "cpu: $(head -3 "$work/cpu_err")"
fi
if [ "${MINIC_TEST_BACKEND:-}" = cuda ] || "$gen" "${tiny[@]}" "${prompt[@]}" --new 2 --backend cuda --quiet >/dev/null 2>&1; then
  backends="$backends cuda"
fi
first=""
for b in $backends; do
  for fuse in "" --no-fuse; do
    # cpu and cuda compile a program per length without the cache: fewer steps there
    new=12
    [ "$b" = ref ] || new=6
    "$gen" "${tiny[@]}" "${prompt[@]}" --new $new --backend "$b" $fuse >"$work/cached" 2>"$work/err" ||
      fail "$b $fuse: $(cat "$work/err")"
    "$gen" "${tiny[@]}" "${prompt[@]}" --new $new --backend "$b" $fuse --no-cache --quiet >"$work/full" 2>"$work/err" ||
      fail "$b $fuse --no-cache: $(cat "$work/err")"
    got=$(ids "$work/cached") want=$(ids "$work/full")
    [ "$(tr ',' '\n' <<<"$got" | wc -l)" -eq $new ] || fail "$b $fuse: expected $new ids, got '$got'"
    [ "$got" = "$want" ] || fail "$b $fuse: with the cache $got, without $want"
    # a model whose next token follows from the last one alone would not need the cache
    [ "$(tr ',' '\n' <<<"$got" | sort -u | wc -l)" -gt $((new / 3)) ] ||
      fail "$b $fuse: too few distinct ids ($got): the model proves little"
    grep -q '^decode: .* tokens/s' "$work/cached" || fail "$b $fuse: no decode tokens/s: $(cat "$work/cached")"
    # the first decode step (the program's warm-up) timed apart: the rest are the steps after it
    grep -q "^decode: .* ($((new - 2)) steps of 1 token, after the first)" "$work/cached" &&
      grep -q '^first step: [0-9.]* ms (the decode program.s first run: its warm-up' "$work/cached" ||
      fail "$b $fuse: the first step not timed apart: $(grep -E '^(decode|first)' "$work/cached")"
    # the step's loop on the device: the 4 caches at least written in place
    inplace=$(sed -n 's/^fed back: 7 outputs, \([0-9]*\) in place$/\1/p' "$work/cached")
    [ -n "$inplace" ] && [ "$inplace" -ge 4 ] || fail "$b $fuse: $(grep '^fed back' "$work/cached")"
    # the loop on the host (argmax of the downloaded logits, caches copied), and every output
    # fed back by a copy: the same ids
    "$gen" "${tiny[@]}" "${prompt[@]}" --new $new --backend "$b" $fuse --host-loop --quiet >"$work/host" 2>"$work/err" ||
      fail "$b $fuse --host-loop: $(cat "$work/err")"
    [ "$(ids "$work/host")" = "$got" ] || fail "$b $fuse: --host-loop $(ids "$work/host"), on the device $got"
    MINIC_NO_IN_PLACE=1 "$gen" "${tiny[@]}" "${prompt[@]}" --new $new --backend "$b" $fuse >"$work/copy" 2>"$work/err" ||
      fail "$b $fuse MINIC_NO_IN_PLACE=1: $(cat "$work/err")"
    [ "$(ids "$work/copy")" = "$got" ] || fail "$b $fuse: copied $(ids "$work/copy"), in place $got"
    grep -q '^fed back: 7 outputs, 0 in place$' "$work/copy" || fail "$b $fuse: MINIC_NO_IN_PLACE=1: $(grep '^fed back' "$work/copy")"
    # the first ids agree across backends too (the 6 cpu makes)
    [ -z "$first" ] || [ "${got:0:${#first}}" = "$first" ] || fail "$b $fuse: $got, ref began $first"
    [ -n "$first" ] || first=$(cut -d, -f1-6 <<<"$got")
    echo "gpt2_generate: $b $fuse ok: $got; $(grep -E '^(prefill|decode):' "$work/cached" | tr '\n' ' ')"
  done
done

# one new token: no decode step, the ids from prefill's history
"$gen" "${tiny[@]}" "${prompt[@]}" --new 1 --backend ref >"$work/one" 2>"$work/err" || fail "--new 1: $(cat "$work/err")"
[ "$(ids "$work/one")" = "${first%%,*}" ] || fail "--new 1: $(ids "$work/one"), expected ${first%%,*}"

# batch 2: each row decodes the same prompt, as batch 1 did
"$gen" "${tiny[@]}" "${prompt[@]}" --new 12 --backend ref --batch 2 >"$work/b2" 2>"$work/err" || fail "batch 2: $(cat "$work/err")"
! grep -q differs "$work/b2" || fail "batch 2: $(cat "$work/b2")"
[ "$(ids "$work/b2")" = "$(ids "$work/cached")" ] 2>/dev/null || [ "$(ids "$work/b2" | cut -d, -f1-6)" = "$first" ] ||
  fail "batch 2: $(ids "$work/b2"), batch 1 began $first"

# wrong uses: exit 1 and a message naming what is wrong
bad() {
  local want=$1; shift
  set +e
  "$gen" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  set -e
  [ "$rc" -eq 1 ] || fail "$*: exit $rc, expected 1: $(cat "$work/err")"
  grep -qF -- "$want" "$work/err" || fail "$*: expected '$want', got: $(cat "$work/err")"
}
bad "token id 97 is outside [0, 97)" "${tiny[@]}" --prompt 1,97 --backend ref
bad "the prompt's 6 tokens and 19 new ones do not fit --max-seq 24" "${tiny[@]}" "${prompt[@]}" --new 19 --backend ref
bad "--max-seq 65 is more than the 64 positions" "${tiny[@]}" "${prompt[@]}" --max-seq 65 --backend ref
bad "--prompt: expected comma-separated token ids" "${tiny[@]}" --prompt 1,,2 --backend ref
bad "--prompt is required" "${tiny[@]}" --backend ref
bad "unknown option '--temperature'" "${tiny[@]}" "${prompt[@]}" --temperature 1
bad "--heads: expected an integer" "${tiny[@]}" "${prompt[@]}" --heads x
bad "--dmodel must be a multiple of --heads" "${tiny[@]}" "${prompt[@]}" --heads 5
bad "$work/w.safetensors" "${tiny[@]}" "${prompt[@]}" --dmodel 32 --backend ref
bad "nope.safetensors" "${tiny[@]}" "${prompt[@]}" --weights "$work/nope.safetensors" --backend ref
"$gen" --help | grep -q -- '--no-cache' || fail "--help does not list --no-cache"
echo "gpt2_generate: ok ($backends)"
