#!/usr/bin/env bash
# update (docs/FORMAT.md §2) from the command line on every backend here: a cache [2, 6, 3]
# updated along axis 1 with new [2, 2, 3] at a run-time pos. pos 0, 2 and 4 (the start, the
# middle, the last that fits) give the values worked out here (python3 without numpy), fused and
# unfused; a pos outside [0, 4] fails the run with exit 1 at the update's FILE:LINE:COL, the
# message naming pos (saturated ones as "or more"/"or less"), and leaves no output file. A pos
# written as a number is checked when the graph is read. Backends: ref and cpu, and cuda where
# `--backend cuda` runs here (MINIC_TEST_BACKEND=cuda makes a GPU required).
set -euo pipefail
bin=${MINIC_BIN:-build/minic}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cat >"$work/u.graph" <<'G'
input c : f32[2, 6, 3]
input n : f32[2, 2, 3]
input p : i32[]
y = update(c, n, p, axis=1)
output y
G
# c[i] = i, n[j] = 100 + j; the expected result for each good pos, as .npy files and raw f32
python3 - "$work" <<'P'
import struct, sys
w = sys.argv[1]
def save(path, vals, shape, code):
    descr = {'i': '<i4', 'f': '<f4'}[code]
    sh = "()" if not shape else "(" + ", ".join(map(str, shape)) + ")"
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, sh)
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(hdr)) + hdr.encode())
        f.write(struct.pack('<%d%s' % (len(vals), code), *vals))
c = [float(i) for i in range(36)]
n = [100.0 + j for j in range(12)]
save(w + '/c.npy', c, (2, 6, 3), 'f')
save(w + '/n.npy', n, (2, 2, 3), 'f')
for p in (0, 2, 4, 5, -1, 2**31 - 1, -2**31):
    save('%s/p%d.npy' % (w, p), [p], (), 'i')
for p in (0, 2, 4):
    y = list(c)
    for b in range(2):
        for j in range(2):
            for k in range(3):
                y[(b * 6 + p + j) * 3 + k] = n[(b * 2 + j) * 3 + k]
    open('%s/want%d.f32' % (w, p), 'wb').write(struct.pack('<36f', *y))
P

"$bin" dump "$work/u.graph" --stage fused --backend ref >"$work/dump" || fail "dump"
grep -q '^# 1 kernels' "$work/dump" || fail "update is not one kernel: $(head -20 "$work/dump")"

backends="ref"
if "$bin" run "$work/u.graph" --backend cpu --quiet --input p="$work/p0.npy" >/dev/null 2>"$work/cpu_err"; then
  backends="$backends cpu"
elif grep -q "built without it" "$work/cpu_err"; then
  echo "update_run: cpu skipped: $(head -1 "$work/cpu_err")"
else
  fail "cpu: $(head -3 "$work/cpu_err")"
fi
if [ "${MINIC_TEST_BACKEND:-}" = cuda ] || "$bin" run "$work/u.graph" --backend cuda --quiet --input p="$work/p0.npy" >/dev/null 2>&1; then
  backends="$backends cuda"
fi
for b in $backends; do
  for fuse in "" --no-fuse; do
    for p in 0 2 4; do
      "$bin" run "$work/u.graph" --backend "$b" $fuse --quiet --input c="$work/c.npy" --input n="$work/n.npy" \
        --input p="$work/p$p.npy" --output "$work/y.npy" >/dev/null 2>"$work/err" || fail "$b $fuse pos $p: $(cat "$work/err")"
      # the .npy's data: its last 144 bytes
      tail -c 144 "$work/y.npy" | cmp -s - "$work/want$p.f32" || fail "$b $fuse pos $p: wrong values"
      rm -f "$work/y.npy"
    done
    for bad in "5:pos 5 is" "-1:pos -1 is" "2147483647:pos 2147483645 or more is" "-2147483648:pos -2147483646 or less is"; do
      p=${bad%%:*} msg=${bad#*:}
      set +e
      "$bin" run "$work/u.graph" --backend "$b" $fuse --quiet --input c="$work/c.npy" --input n="$work/n.npy" \
        --input p="$work/p$p.npy" --output "$work/y.npy" >"$work/out" 2>"$work/err"
      rc=$?
      set -e
      [ "$rc" -eq 1 ] || fail "$b $fuse pos $p: exit $rc, expected 1: $(cat "$work/err")"
      grep -qF "$work/u.graph:4:5: error: update: $msg outside [0, 4]: 2 entries from pos would not fit axis 1 of 6" "$work/err" ||
        fail "$b $fuse pos $p: $(cat "$work/err")"
      [ ! -e "$work/y.npy" ] || fail "$b $fuse pos $p: an output file was left behind"
    done
  done
  echo "update_run: $b ok"
done

# a decode step's attention over the updated caches, masked to keys 0..pos by le(iota, pos):
# still one attention kernel (passes/attention.c), the mask read as a tensor
cat >"$work/dec.graph" <<'G'
input q : f32[1, 2, 1, 4]
input kc : f32[1, 2, 8, 4]
input vc : f32[1, 2, 8, 4]
input kn : f32[1, 2, 1, 4]
input vn : f32[1, 2, 1, 4]
input pos : i32[]
k = update(kc, kn, pos, axis=2)
v = update(vc, vn, pos, axis=2)
kt = transpose(k, perm=[0, 1, 3, 2])
s0 = matmul(q, kt)
s = mul(s0, 0.5)
col = iota(shape=[1, 8], axis=1)
keep = le(col, pos)
sm = where(keep, s, -inf)
p = softmax(sm, axis=-1)
y = matmul(p, v)
output y, k, v
G
"$bin" dump "$work/dec.graph" --stage fused --backend ref >"$work/dump" || fail "dump of the decode step"
grep -q '^kernel attn_.*(attention)' "$work/dump" || fail "the decode step's attention is not one attention kernel: $(grep '^kernel\|attention not fused' "$work/dump")"
[ "$(grep -c '^kernel pw_fused_update_[0-9]*  (pointwise)  space \[1, 2, 8, 4\]' "$work/dump")" -eq 2 ] ||
  fail "expected one kernel per cache update: $(grep '^kernel' "$work/dump")"

# a pos known when the graph is read is checked then (exit 1, its place)
sed 's/update(c, n, p, axis=1)/update(c, n, 5, axis=1)/' "$work/u.graph" >"$work/const.graph"
set +e
"$bin" check "$work/const.graph" >/dev/null 2>"$work/err"
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "a constant pos 5: exit $rc"
grep -qF "$work/const.graph:4:5: error: update: pos 5 is outside [0, 4]" "$work/err" || fail "constant pos: $(cat "$work/err")"
echo "update_run: ok ($backends)"
