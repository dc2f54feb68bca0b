#!/usr/bin/env bash
# Issue 21 on the GPU machine in one call: build, GPT-2 small beside HF (gpt2.py), a --profile of
# the bf16 model, compile times cold and cached, the LM head's GEMM at aligned and unaligned N
# (minic and PyTorch), the CPU side beside ONNX Runtime, then the CUDA tests. Results under $OUT.
#   bash bench/models/gpu_run.sh [STAGES...]   (default: all; stages: gpt2 profile compile gemm cpu tests)
#   MINIC_CPU_BUNDLE=FILE.tar.xz: a minic built with LLVM plus its libraries, for the cpu stage
#   XXHASH_DIR=DIR: where xxhash.h is (header-only), when the machine lacks it (the compile cache)
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpt2-gpu-out}; mkdir -p "$OUT"
W=${GPT2_WORK:-/tmp/gpt2w}; mkdir -p "$W"
stages=${*:-gpt2 profile compile gemm cpu tests}
has() { [[ " $stages " == *" $1 "* ]]; }
S=$OUT/steps.txt
step() { echo "== $(date -u +%T) $*" | tee -a "$S"; }
if [ -d .deps/cmocka ]; then export CMOCKA_ROOT=$PWD/.deps/cmocka; export LD_LIBRARY_PATH=$(echo $PWD/.deps/cmocka/usr/lib/*):${LD_LIBRARY_PATH:-}; fi
step build
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >>"$S" 2>&1
nproc >>"$S"; lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-200 >>"$S"
rm -rf build-gpu
cmake -S . -B build-gpu ${XXHASH_DIR:+-DXXHASH_INCLUDE_DIR=$XXHASH_DIR} -DMINIC_WITH_LLVM=OFF -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="-Wno-error=maybe-uninitialized" >"$OUT/build.log" 2>&1 &&
    cmake --build build-gpu -j"$(nproc)" >>"$OUT/build.log" 2>&1 || { step "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
M=$PWD/build-gpu/minic
export XDG_CACHE_HOME=$W/cache
if has gpt2; then
    step "gpt2.py f32,bf16 B=4 T=1024"
    PYTHONUNBUFFERED=1 timeout 360 python3 bench/models/gpt2.py --minic "$M" --out "$W" --dtypes bf16,f32 --iters 20 ${TORCH_DTYPES:+--torch-dtypes $TORCH_DTYPES} >"$OUT/gpt2.log" 2>&1
    echo "exit $?" >>"$OUT/gpt2.log"; tail -8 "$OUT/gpt2.log" | tee -a "$S"
fi
if has profile && [ -f "$W/gpt2_bf16.graph" ]; then
    step "profile bf16"
    timeout 90 "$M" run "$W/gpt2_bf16.graph" --weights "$W/gpt2_bf16.safetensors" --input "x=$W/x_bf16.npy" \
        --iters 20 --profile --profile-json "$OUT/profile_bf16.json" >"$OUT/profile_bf16.txt" 2>&1; echo "exit $?" >>"$OUT/profile_bf16.txt"
    grep -iE "wall|busy|total|lm|logits" "$OUT/profile_bf16.txt" | head -12 | tee -a "$S"
fi
if has compile && [ -f "$W/gpt2_bf16.graph" ]; then
    step "compile times (process time: user+sys; wall)"
    for dt in bf16 f32; do
        for c in cold cached; do
            [ $c = cold ] && rm -rf "$W/ccache"
            XDG_CACHE_HOME=$W/ccache MINIC_CUDA_TRACE=1 /usr/bin/time -f "$dt $c: %e s wall, %U s user, %S s sys, %M KB" \
                "$M" run "$W/gpt2_$dt.graph" --weights "$W/gpt2_$dt.safetensors" --input "x=$W/x_$dt.npy" --iters 1 >"$OUT/compile_${dt}_$c.txt" 2>&1
            grep -E "compiled in|wall" "$OUT/compile_${dt}_$c.txt" | tee -a "$S"
            XDG_CACHE_HOME=$W/ccache /usr/bin/time -f "$dt $c dump-code only: %e s wall, %U s user, %S s sys" \
                "$M" dump "$W/gpt2_$dt.graph" --stage code --backend cuda 2>&1 >/dev/null | tail -1 | tee -a "$S"
        done
    done
fi
if has gemm; then
    step "LM head GEMM: minic"
    for dt in ${GEMM_DTYPES:-bf16 f32}; do for N in ${GEMM_NS:-50257 50264 50304}; do for pad in 1 0; do
        g=$W/lmhead_${dt}_$N.graph
        printf 'graph lmhead\ninput h : %s[4096, 768]\nparam w : %s[%d, 768]\ny = linear(h, w)\noutput y\n' $dt $dt $N >"$g"
        echo "minic $dt N=$N pad=$pad: $(MINIC_CUDA_GEMM_PAD=$pad "$M" run "$g" --iters 30 --quiet --output $W/lm_$pad.npy 2>&1 | grep -E '^time' | head -1)" | tee -a "$S"
        MINIC_CUDA_GEMM_PAD=$pad "$M" run "$g" --iters 10 --profile 2>&1 | grep -E "gemm|wall" | head -3 >>"$OUT/lmhead_profile.txt"
    done; cmp $W/lm_1.npy $W/lm_0.npy && echo "  padded and unpadded outputs identical" | tee -a "$S"; done; done
    if [ -f "$W/gpt2_bf16.graph" ]; then for pad in 1 0; do
        echo "minic gpt2 bf16 fused MINIC_CUDA_GEMM_PAD=$pad: $(MINIC_CUDA_GEMM_PAD=$pad "$M" run "$W/gpt2_bf16.graph" --weights "$W/gpt2_bf16.safetensors" --input "x=$W/x_bf16.npy" --iters 20 --quiet 2>&1 | grep -E '^time')" | tee -a "$S"
    done; fi
    step "LM head GEMM: PyTorch"
    timeout 120 python3 bench/models/lmhead.py 2>&1 | sed 's/^JSON //' | tee "$OUT/lmhead_torch.txt" | tee -a "$S"
fi
if has cpu; then
    step "cpu: ORT and torch eager on this host's CPU, minic --backend cpu (bundle)"
    timeout 200 python3 bench/models/ort_gpt2.py "$W/ort" --threads 2,16 >"$OUT/ort.log" 2>&1; echo "exit $?" >>"$OUT/ort.log"
    grep JSON "$OUT/ort.log" | sed 's/^JSON //' | tee -a "$S"; tail -3 "$OUT/ort.log" >>"$S"
    if [ -n "${MINIC_CPU_BUNDLE:-}" ] && [ -f "$MINIC_CPU_BUNDLE" ]; then
        mkdir -p "$W/cpu" && tar xJf "$MINIC_CPU_BUNDLE" -C "$W/cpu"
        python3 bench/models/gpt2.py --write-only --batch 1 --seq 128 --dtypes f32 --out "$W/c128" >/dev/null 2>&1
        for th in 2 16; do
            LD_LIBRARY_PATH=$W/cpu/lib XDG_CACHE_HOME=$W/cpucache timeout 200 "$W/cpu/minic" run "$W/c128/gpt2_f32.graph" --backend cpu --threads $th \
                --weights "$W/c128/gpt2_f32.safetensors" --input "x=$W/c128/x_f32.npy" --iters 20 2>&1 | grep -E "compiled|^time|error" | sed "s/^/minic cpu threads $th: /" | tee -a "$S"
        done
    fi
fi
if has tests; then
    step "CUDA tests"
    for t in ${CUDA_TESTS:-test_cuda_run test_cuda_compile}; do
        (cd build-gpu && MINIC_SRC=$PWD/.. timeout 200 ./$t) >>"$OUT/ctest.log" 2>&1; echo "$t: exit $?" | tee -a "$S"
    done
fi
step done
