#!/usr/bin/env bash
# gather on every backend here, from the command line (docs/FORMAT.md §2): an embedding
# plus a position embedding and their add are one kernel; indices in range (negative ones too)
# give the reference backend's checksums, fused and unfused; an index outside [-n, n) fails the
# run with exit 1 and FILE:LINE:COL naming the gather, and leaves no output file. The backends
# are ref and cpu, and cuda where `--backend cuda` runs here (MINIC_TEST_BACKEND=cuda makes a
# GPU required).
set -euo pipefail
bin=${MINIC_BIN:-build/minic}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cat >"$work/emb.graph" <<'G'
graph emb
input ids : i32[4, 3]
param wte : f32[10, 8]
param wpe : f32[3, 8]
pos = iota(shape=[4, 3], axis=1)
t = gather(wte, ids, axis=0)
p = gather(wpe, pos)
y = add(t, p)
output y
G
# .npy files of i32[4, 3] (python3 without numpy)
python3 - "$work" <<'P'
import struct, sys
def save(path, vals):
    hdr = "{'descr': '<i4', 'fortran_order': False, 'shape': (4, 3), }"
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(hdr)) + hdr.encode())
        f.write(struct.pack('<12i', *vals))
save(sys.argv[1] + '/ok.npy', [0, 1, 2, 3, -10, 5, 6, 7, -3, 9, -1, 0])
save(sys.argv[1] + '/high.npy', [0, 1, 2, 3, 4, 5, 6, 7, 12, 9, 1, 0])
save(sys.argv[1] + '/low.npy', [0, 1, 2, 3, -11, 5, 6, 7, 8, 9, 1, 0])
P

"$bin" dump "$work/emb.graph" --stage fused --backend ref >"$work/dump" || fail "dump"
grep -q '^# 1 kernels' "$work/dump" || fail "the embedding, position embedding and add are not one kernel: $(head -20 "$work/dump")"
grep -q 'gather v' "$work/dump" || fail "no gather in the kernel IR"

backends="ref"
# cpu unless this minic was built without LLVM (the GPU machine's build): then say so, loudly
if "$bin" run "$work/emb.graph" --backend cpu --quiet >/dev/null 2>"$work/cpu_err"; then
  backends="$backends cpu"
elif grep -q "built without it" "$work/cpu_err"; then
  echo "gather_run: cpu skipped: $(head -1 "$work/cpu_err")"
else
  fail "cpu: $(head -3 "$work/cpu_err")"
fi
if [ "${MINIC_TEST_BACKEND:-}" = cuda ] || "$bin" run "$work/emb.graph" --backend cuda --quiet >/dev/null 2>&1; then
  backends="$backends cuda"
fi
want=$("$bin" run "$work/emb.graph" --backend ref --quiet --input ids="$work/ok.npy" | grep checksum)
[ -n "$want" ] || fail "no checksum from ref"
for b in $backends; do
  for fuse in "" --no-fuse; do
    got=$("$bin" run "$work/emb.graph" --backend "$b" $fuse --quiet --input ids="$work/ok.npy" | grep checksum) ||
      fail "$b $fuse: the run failed"
    [ "$got" = "$want" ] || fail "$b $fuse: $got, ref: $want"
    for bad in high:12 low:-11; do
      file=${bad%%:*} index=${bad#*:}
      set +e
      "$bin" run "$work/emb.graph" --backend "$b" $fuse --quiet --input ids="$work/$file.npy" \
        --output "$work/y.npy" >"$work/out" 2>"$work/err"
      rc=$?
      set -e
      [ "$rc" -eq 1 ] || fail "$b $fuse $file: exit $rc, expected 1: $(cat "$work/err")"
      grep -qF "$work/emb.graph:6:5: error: gather: index $index is outside [-10, 10)" "$work/err" ||
        fail "$b $fuse $file: $(cat "$work/err")"
      [ ! -e "$work/y.npy" ] || fail "$b $fuse $file: an output file was left behind"
    done
  done
  echo "gather_run: $b ok"
done
