/* Hand-built kernel IR programs for the CUDA tests, and a float64 interpreter of the kernel IR
 * to check them against.
 *
 * The CUDA renderer must handle every shape of kernel the passes can emit: pointwise chains
 * with broadcasts and strided views, reductions with several loop and row blocks (softmax,
 * layernorm), full reductions, GEMMs whose epilogue cuBLASLt takes whole, GEMMs whose epilogue
 * it cannot take, and layouts it cannot take at all. These fixtures build one program of each
 * directly, so the renderer is tested without the passes, and the interpreter (written for
 * obviousness: doubles, the kir.h semantics read literally) gives the expected values.
 * Included by tests/test_cuda_*.c only.
 */
#ifndef MINIC_CUDA_FIXTURES_H
#define MINIC_CUDA_FIXTURES_H

#include "kir/kir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FX_CAP 96
#define FX_KERNELS 64 /* kernels a fixture program holds (a 7x7 conv as im2col copies: 52) */

static inline kir_program *fx_program(void)
{
    kir_program *kp = calloc(1, sizeof *kp);
    kp->buffers = mc_arena_alloc(&kp->arena, FX_CAP * sizeof(kir_buffer));
    kp->kernels = mc_arena_alloc(&kp->arena, FX_KERNELS * sizeof(kir_kernel));
    return kp;
}

static inline void fx_free(kir_program *kp)
{
    mc_arena_free(&kp->arena);
    free(kp);
}

static inline int fx_buffer(kir_program *kp, kir_buffer_kind kind, mc_dtype d, int64_t numel)
{
    kir_buffer *b = &kp->buffers[kp->nbuffers];
    b->kind = kind;
    b->dtype = d;
    b->numel = numel;
    b->node = -1;
    if (kind == KBUF_TEMP) {
        b->offset = kp->arena_bytes;
        int64_t bytes = numel * (int64_t)mc_dtype_size(d);
        kp->arena_bytes += (bytes + 255) / 256 * 256;
    }
    return kp->nbuffers++;
}

static inline kir_kernel *fx_kernel(kir_program *kp, const char *name, kir_category cat, int rank,
                             const int64_t *shape, int nrow)
{
    MC_ASSERT(kp->nkernels < FX_KERNELS);
    kir_kernel *k = &kp->kernels[kp->nkernels++];
    snprintf(k->name, sizeof k->name, "%s", name);
    k->category = cat;
    k->rank = rank;
    memcpy(k->shape, shape, (size_t)rank * sizeof(int64_t));
    k->nrow = nrow;
    k->views = mc_arena_alloc(&kp->arena, FX_CAP * sizeof(kir_view));
    k->code = mc_arena_alloc(&kp->arena, FX_CAP * sizeof(kir_instr));
    k->blocks = mc_arena_alloc(&kp->arena, 8 * sizeof(kir_block));
    k->reds = mc_arena_alloc(&kp->arena, 8 * sizeof(kir_reduce));
    k->stores = mc_arena_alloc(&kp->arena, 8 * sizeof(kir_store));
    return k;
}

static inline int fx_view(kir_kernel *k, int buffer, int64_t offset, const int64_t *stride)
{
    kir_view *v = &k->views[k->nviews];
    v->buffer = buffer;
    v->offset = offset;
    memcpy(v->stride, stride, (size_t)k->rank * sizeof(int64_t));
    return k->nviews++;
}

/* a contiguous view of a row-major tensor with the kernel's shape */
static inline int fx_view_contig(kir_kernel *k, int buffer)
{
    int64_t st[MC_MAX_RANK], s = 1;
    for (int d = k->rank - 1; d >= 0; d--) {
        st[d] = s;
        s *= k->shape[d];
    }
    return fx_view(k, buffer, 0, st);
}

static inline void fx_block(kir_kernel *k, bool loop)
{
    kir_block *b = &k->blocks[k->nblocks++];
    b->loop = loop;
    b->first = k->ncode;
    b->count = 0;
}

static inline int fx_ins(kir_kernel *k, kir_instr ins)
{
    k->code[k->ncode] = ins;
    k->blocks[k->nblocks - 1].count++;
    return k->ncode++;
}

static inline int fx_load(kir_kernel *k, int view, mc_dtype d)
{
    return fx_ins(k, (kir_instr){.kind = KI_LOAD, .dtype = d, .view = view});
}
static inline int fx_const(kir_kernel *k, double v, mc_dtype d)
{
    return fx_ins(k, (kir_instr){.kind = KI_CONST, .dtype = d, .value = v});
}
static inline int fx_op(kir_kernel *k, mc_op op, mc_dtype d, int a, int b, int c)
{
    return fx_ins(k, (kir_instr){.kind = KI_OP, .op = op, .dtype = d, .arg = {a, b, c}});
}
static inline int fx_other(kir_kernel *k, kir_instr_kind kind, mc_dtype d, int view)
{
    return fx_ins(k, (kir_instr){.kind = kind, .dtype = d, .view = view});
}
static inline void fx_store(kir_kernel *k, int view, int value)
{
    k->stores[k->nstores++] = (kir_store){.block = k->nblocks - 1, .view = view, .value = value};
}
static inline int fx_reduce(kir_kernel *k, mc_op op, int value, mc_dtype d)
{
    k->reds[k->nreds] = (kir_reduce){.op = op, .block = k->nblocks - 1, .value = value, .dtype = d};
    return k->nreds++;
}

/* ---- the programs -------------------------------------------------------------------------- */

/* y[f16] = gelu(x * w + b) + (col index as f32), x f32 [R, C], w f32 [C] broadcast, b bf16 [C];
 * z[bool] = x > 0 where the cast to i32 of x*8 is even: compare, cast, where, iota */
static inline kir_program *fx_pointwise(int64_t R, int64_t C)
{
    kir_program *kp = fx_program();
    int x = fx_buffer(kp, KBUF_INPUT, MC_F32, R * C);
    int w = fx_buffer(kp, KBUF_PARAM, MC_F32, C);
    int b = fx_buffer(kp, KBUF_PARAM, MC_BF16, C);
    int y = fx_buffer(kp, KBUF_OUTPUT, MC_F16, R * C);
    int z = fx_buffer(kp, KBUF_OUTPUT, MC_I32, R * C);
    int64_t shape[2] = {R, C};
    kir_kernel *k = fx_kernel(kp, "pw_fused_mul_add_gelu_0", KIR_POINTWISE, 2, shape, 2);
    int vx = fx_view_contig(k, x);
    int vw = fx_view(k, w, 0, (int64_t[]){0, 1});
    int vb = fx_view(k, b, 0, (int64_t[]){0, 1});
    int vy = fx_view_contig(k, y);
    int vz = fx_view_contig(k, z);
    fx_block(k, false);
    int lx = fx_load(k, vx, MC_F32), lw = fx_load(k, vw, MC_F32), lb = fx_load(k, vb, MC_BF16);
    int m = fx_op(k, MC_OP_MUL, MC_F32, lx, lw, 0);
    int a = fx_op(k, MC_OP_ADD, MC_F32, m, fx_op(k, MC_OP_CAST, MC_F32, lb, 0, 0), 0);
    int g = fx_op(k, MC_OP_GELU, MC_F32, a, 0, 0);
    int col = fx_other(k, KI_INDEX, MC_F32, 1);
    int s = fx_op(k, MC_OP_ADD, MC_F32, g, fx_op(k, MC_OP_MUL, MC_F32, col,
                                                   fx_const(k, 0.001, MC_F32), 0), 0);
    fx_store(k, vy, fx_op(k, MC_OP_CAST, MC_F16, s, 0, 0));
    int i8 = fx_op(k, MC_OP_CAST, MC_I32, fx_op(k, MC_OP_MUL, MC_F32, lx, fx_const(k, 8, MC_F32),
                                                0), 0, 0);
    int pos = fx_op(k, MC_OP_GT, MC_BOOL, lx, fx_const(k, 0, MC_F32), 0);
    int sel = fx_op(k, MC_OP_WHERE, MC_I32, pos, i8, fx_other(k, KI_INDEX, MC_I32, 0));
    fx_store(k, vz, fx_op(k, MC_OP_MAXIMUM, MC_I32, sel, fx_const(k, -3, MC_I32), 0));
    /* a second kernel reading the first's output transposed (a strided, uncoalesced view) */
    int t = fx_buffer(kp, KBUF_OUTPUT, MC_F32, R * C);
    int64_t tshape[2] = {C, R};
    kir_kernel *k2 = fx_kernel(kp, "pw_fused_transpose_exp_1", KIR_POINTWISE, 2, tshape, 2);
    int vyt = fx_view(k2, y, 0, (int64_t[]){1, C});
    int vt = fx_view_contig(k2, t);
    fx_block(k2, false);
    fx_store(k2, vt, fx_op(k2, MC_OP_EXP, MC_F32, fx_load(k2, vyt, MC_F16), 0, 0));
    return kp;
}

/* The benchmark suite's pointwise workload, gelu(x * s + b) + x with s, b broadcast along rows
 * (f32 [R, C]); with copy, plain y = x instead (the copy-bandwidth kernel). */
static inline kir_program *fx_pw_bench(int64_t R, int64_t C, bool copy)
{
    kir_program *kp = fx_program();
    int x = fx_buffer(kp, KBUF_INPUT, MC_F32, R * C);
    int sv = fx_buffer(kp, KBUF_PARAM, MC_F32, C);
    int b = fx_buffer(kp, KBUF_PARAM, MC_F32, C);
    int y = fx_buffer(kp, KBUF_OUTPUT, MC_F32, R * C);
    int64_t shape[2] = {R, C};
    kir_kernel *k = fx_kernel(kp, copy ? "copy_0" : "pw_fused_mul_add_gelu_add_0",
                              copy ? KIR_COPY : KIR_POINTWISE, 2, shape, 2);
    int vx = fx_view_contig(k, x), vy = fx_view_contig(k, y);
    fx_block(k, false);
    int lx = fx_load(k, vx, MC_F32);
    if (copy) {
        fx_store(k, vy, lx);
        return kp;
    }
    int ls = fx_load(k, fx_view(k, sv, 0, (int64_t[]){0, 1}), MC_F32);
    int lb = fx_load(k, fx_view(k, b, 0, (int64_t[]){0, 1}), MC_F32);
    int u = fx_op(k, MC_OP_ADD, MC_F32, fx_op(k, MC_OP_MUL, MC_F32, lx, ls, 0), lb, 0);
    fx_store(k, vy, fx_op(k, MC_OP_ADD, MC_F32, fx_op(k, MC_OP_GELU, MC_F32, u, 0, 0), lx, 0));
    return kp;
}

/* softmax(x * scale) over the last axis of x [R, C], as the passes decompose it */
/* attention4: the rows as [R / 12 / C, 12, C] (three row dims), as attention lays them out */
static inline kir_program *fx_softmax_shaped(int64_t R, int64_t C, mc_dtype d, bool attention4)
{
    kir_program *kp = fx_program();
    int x = fx_buffer(kp, KBUF_INPUT, d, R * C);
    int y = fx_buffer(kp, KBUF_OUTPUT, d, R * C);
    int64_t shape[4] = {R, C, 0, 0};
    int rank = 2, nrow = 1;
    if (attention4) {
        shape[0] = R / 12 / C;
        shape[1] = 12;
        shape[2] = C;
        shape[3] = C;
        rank = 4;
        nrow = 3;
    }
    kir_kernel *k = fx_kernel(kp, "red_fused_softmax_0", KIR_REDUCTION, rank, shape, nrow);
    int vx = fx_view_contig(k, x), vy = fx_view_contig(k, y);
    fx_block(k, true);
    int s0 = fx_op(k, MC_OP_MUL, MC_F32, fx_load(k, vx, d), fx_const(k, 0.125, MC_F32), 0);
    fx_reduce(k, MC_OP_MAX, s0, MC_F32);
    fx_block(k, true);
    int s1 = fx_op(k, MC_OP_MUL, MC_F32, fx_load(k, vx, d), fx_const(k, 0.125, MC_F32), 0);
    int e1 = fx_op(k, MC_OP_EXP, MC_F32,
                   fx_op(k, MC_OP_SUB, MC_F32, s1, fx_other(k, KI_ROWVAL, MC_F32, 0), 0), 0, 0);
    fx_reduce(k, MC_OP_SUM, e1, MC_F32);
    fx_block(k, false);
    int inv = fx_op(k, MC_OP_RECIP, MC_F32, fx_other(k, KI_ROWVAL, MC_F32, 1), 0, 0);
    fx_block(k, true);
    int s2 = fx_op(k, MC_OP_MUL, MC_F32, fx_load(k, vx, d), fx_const(k, 0.125, MC_F32), 0);
    int e2 = fx_op(k, MC_OP_EXP, MC_F32,
                   fx_op(k, MC_OP_SUB, MC_F32, s2, fx_other(k, KI_ROWVAL, MC_F32, 0), 0), 0, 0);
    fx_store(k, vy, fx_op(k, MC_OP_MUL, d, e2, inv, 0));
    return kp;
}

static inline kir_program *fx_softmax(int64_t R, int64_t C, mc_dtype d)
{
    return fx_softmax_shaped(R, C, d, false);
}

/* layernorm over the last axis of x [R, C] with weight and bias [C]; also stores the row mean
 * (a row-block store) */
static inline kir_program *fx_layernorm(int64_t R, int64_t C, mc_dtype d)
{
    kir_program *kp = fx_program();
    int x = fx_buffer(kp, KBUF_INPUT, d, R * C);
    int w = fx_buffer(kp, KBUF_PARAM, d, C);
    int b = fx_buffer(kp, KBUF_PARAM, d, C);
    int y = fx_buffer(kp, KBUF_OUTPUT, d, R * C);
    int mean = fx_buffer(kp, KBUF_OUTPUT, MC_F32, R);
    int64_t shape[2] = {R, C};
    kir_kernel *k = fx_kernel(kp, "red_fused_layernorm_0", KIR_REDUCTION, 2, shape, 1);
    int vx = fx_view_contig(k, x), vy = fx_view_contig(k, y);
    int vw = fx_view(k, w, 0, (int64_t[]){0, 1}), vb = fx_view(k, b, 0, (int64_t[]){0, 1});
    int vm = fx_view(k, mean, 0, (int64_t[]){1, 0});
    double invn = 1.0 / (double)C;
    fx_block(k, true);
    fx_reduce(k, MC_OP_SUM, fx_load(k, vx, d), MC_F32);
    fx_block(k, false);
    int mu = fx_op(k, MC_OP_MUL, MC_F32, fx_other(k, KI_ROWVAL, MC_F32, 0),
                   fx_const(k, invn, MC_F32), 0);
    fx_store(k, vm, mu);
    fx_block(k, true);
    int dx = fx_op(k, MC_OP_SUB, MC_F32, fx_load(k, vx, d), mu, 0);
    fx_reduce(k, MC_OP_SUM, fx_op(k, MC_OP_MUL, MC_F32, dx, dx, 0), MC_F32);
    fx_block(k, false);
    int var = fx_op(k, MC_OP_MUL, MC_F32, fx_other(k, KI_ROWVAL, MC_F32, 1),
                    fx_const(k, invn, MC_F32), 0);
    int rstd = fx_op(k, MC_OP_RSQRT, MC_F32,
                     fx_op(k, MC_OP_ADD, MC_F32, var, fx_const(k, 1e-5, MC_F32), 0), 0, 0);
    fx_block(k, true);
    int dx2 = fx_op(k, MC_OP_SUB, MC_F32, fx_load(k, vx, d), mu, 0);
    int n = fx_op(k, MC_OP_MUL, MC_F32, dx2, rstd, 0);
    int o = fx_op(k, MC_OP_ADD, d, fx_op(k, MC_OP_MUL, MC_F32, n, fx_load(k, vw, d), 0),
                  fx_load(k, vb, d), 0);
    fx_store(k, vy, o);
    return kp;
}

/* sum and max over every element of x [R, C] (nrow 0), i32 and f32 */
static inline kir_program *fx_full_reduce(int64_t R, int64_t C)
{
    kir_program *kp = fx_program();
    int x = fx_buffer(kp, KBUF_INPUT, MC_F32, R * C);
    int s = fx_buffer(kp, KBUF_OUTPUT, MC_F32, 1);
    int m = fx_buffer(kp, KBUF_OUTPUT, MC_I32, 1);
    int64_t shape[2] = {R, C};
    kir_kernel *k = fx_kernel(kp, "red_sum_max_0", KIR_REDUCTION, 2, shape, 0);
    int vx = fx_view_contig(k, x);
    int vs = fx_view(k, s, 0, (int64_t[]){0, 0}), vm = fx_view(k, m, 0, (int64_t[]){0, 0});
    fx_block(k, true);
    int l = fx_load(k, vx, MC_F32);
    fx_reduce(k, MC_OP_SUM, l, MC_F32);
    fx_reduce(k, MC_OP_MAX, fx_op(k, MC_OP_CAST, MC_I32,
                                  fx_op(k, MC_OP_MUL, MC_F32, l, fx_const(k, 100, MC_F32), 0), 0,
                                  0),
              MC_I32);
    fx_block(k, false);
    fx_store(k, vs, fx_other(k, KI_ROWVAL, MC_F32, 0));
    fx_store(k, vm, fx_other(k, KI_ROWVAL, MC_I32, 1));
    return kp;
}

/* y[r] = sum over c of x[r] broadcast along c: the reduced value is a row-block scalar; and
 * z[r] = sum over c of (x[r] div_i32 d[c]) with d containing zeros (i32 x / 0 is 0). */
static inline kir_program *fx_sum_broadcast(int64_t R, int64_t C)
{
    kir_program *kp = fx_program();
    int x = fx_buffer(kp, KBUF_INPUT, MC_F32, R);
    int d = fx_buffer(kp, KBUF_INPUT, MC_I32, C);
    int y = fx_buffer(kp, KBUF_OUTPUT, MC_F32, R);
    int z = fx_buffer(kp, KBUF_OUTPUT, MC_I32, R);
    int64_t shape[2] = {R, C};
    kir_kernel *k = fx_kernel(kp, "red_fused_expand_sum_0", KIR_REDUCTION, 2, shape, 1);
    int vx = fx_view(k, x, 0, (int64_t[]){1, 0});
    int vd = fx_view(k, d, 0, (int64_t[]){0, 1});
    fx_block(k, false);
    int lx = fx_load(k, vx, MC_F32);
    int xi = fx_op(k, MC_OP_CAST, MC_I32, fx_op(k, MC_OP_MUL, MC_F32, lx, fx_const(k, 50, MC_F32),
                                                 0), 0, 0);
    fx_block(k, true);
    fx_reduce(k, MC_OP_SUM, lx, MC_F32);
    int q = fx_op(k, MC_OP_DIV, MC_I32, xi, fx_load(k, vd, MC_I32), 0);
    fx_reduce(k, MC_OP_SUM, q, MC_I32);
    fx_block(k, false);
    fx_store(k, fx_view(k, y, 0, (int64_t[]){1, 0}), fx_other(k, KI_ROWVAL, MC_F32, 0));
    fx_store(k, fx_view(k, z, 0, (int64_t[]){1, 0}), fx_other(k, KI_ROWVAL, MC_I32, 1));
    return kp;
}

/* The GEMM fixtures: x [B, M, K] @ w^T (w [N, K], a transposed operand) with
 *   kernel 0: + bias, gelu_tanh           -> cuBLASLt GELU_BIAS, all of it
 *   kernel 1: (acc + bias) + residual x2  -> cuBLASLt BIAS with C = residual, beta 1
 *   kernel 2: erf gelu(acc) * 0.5 , two stores -> scratch + epilogue kernel
 *   kernel 3: B operand broadcast along K (stride 0) -> generated tiled GEMM
 * d is the dtype of everything (f32, f16 or bf16). */
static inline kir_program *fx_gemms(int64_t B, int64_t M, int64_t N, int64_t K, mc_dtype d)
{
    kir_program *kp = fx_program();
    int x = fx_buffer(kp, KBUF_INPUT, d, B * M * K);
    int w = fx_buffer(kp, KBUF_PARAM, d, N * K);
    int bias = fx_buffer(kp, KBUF_PARAM, d, N);
    int res = fx_buffer(kp, KBUF_INPUT, d, B * M * N);
    int y0 = fx_buffer(kp, KBUF_TEMP, d, B * M * N);
    int y1 = fx_buffer(kp, KBUF_OUTPUT, d, B * M * N);
    int y2 = fx_buffer(kp, KBUF_OUTPUT, d, B * M * N);
    int y3 = fx_buffer(kp, KBUF_OUTPUT, MC_F32, B * M * N);
    int y4 = fx_buffer(kp, KBUF_OUTPUT, d, B * M * N);
    int64_t shape[3] = {B, M, N};
    int64_t xs[3] = {M * K, K, 1};    /* A: batch, M, K */
    int64_t ws[3] = {0, 1, K};        /* B = w^T: batch (broadcast), K, N */
    int64_t bs[3] = {0, 0, 1};
    const char *names[4] = {"gemm_bias_gelu_tanh_0", "gemm_bias_add_1", "gemm_gelu_mul_2",
                            "gemm_bcast_3"};
    for (int g = 0; g < 4; g++) {
        kir_kernel *k = fx_kernel(kp, names[g], KIR_GEMM, 3, shape, 3);
        k->gemm.m = M;
        k->gemm.n = N;
        k->gemm.k = K;
        k->gemm.a = fx_view(k, g == 1 ? y0 : x, 0, g == 1 ? (int64_t[]){M * N, N, 1} : xs);
        if (g == 1) {
            /* y0 [B, M, N] is A with K = N: B reads w[n, 0..N) (needs N <= K) */
            k->gemm.k = N;
        }
        k->gemm.b = fx_view(k, w, 0, g == 3 ? (int64_t[]){0, 0, 1} : ws);
        fx_block(k, false);
        int acc = fx_other(k, KI_ACC, MC_F32, 0);
        if (g == 0) {
            int a = fx_op(k, MC_OP_ADD, MC_F32, acc, fx_load(k, fx_view(k, bias, 0, bs), d), 0);
            fx_store(k, fx_view_contig(k, y0), fx_op(k, MC_OP_GELU_TANH, d, a, 0, 0));
        } else if (g == 1) {
            int a = fx_op(k, MC_OP_ADD, MC_F32, fx_load(k, fx_view(k, bias, 0, bs), d), acc, 0);
            int r = fx_op(k, MC_OP_ADD, d, a, fx_load(k, fx_view_contig(k, res), d), 0);
            fx_store(k, fx_view_contig(k, y1), r);
        } else if (g == 2) {
            int ge = fx_op(k, MC_OP_GELU, MC_F32, acc, 0, 0);
            fx_store(k, fx_view_contig(k, y2), ge);
            fx_store(k, fx_view_contig(k, y3),
                     fx_op(k, MC_OP_MUL, MC_F32, ge, fx_const(k, 0.5, MC_F32), 0));
        } else {
            fx_store(k, fx_view_contig(k, y4), acc);
        }
    }
    return kp;
}

/* y = x [B, M, K] @ w^T + bias, w [N, K]: cuBLASLt's BIAS epilogue writes the graph output
 * directly; with N * dtype size not a multiple of 16 and a half dtype, the plan pads its rows
 * (the LM head of GPT-2, N = 50257). */
static inline kir_program *fx_gemm_bias(int64_t B, int64_t M, int64_t N, int64_t K, mc_dtype d)
{
    kir_program *kp = fx_program();
    int x = fx_buffer(kp, KBUF_INPUT, d, B * M * K);
    int w = fx_buffer(kp, KBUF_PARAM, d, N * K);
    int bias = fx_buffer(kp, KBUF_PARAM, d, N);
    int y = fx_buffer(kp, KBUF_OUTPUT, d, B * M * N);
    int64_t shape[3] = {B, M, N};
    kir_kernel *k = fx_kernel(kp, "gemm_bias_0", KIR_GEMM, 3, shape, 3);
    k->gemm.m = M;
    k->gemm.n = N;
    k->gemm.k = K;
    k->gemm.a = fx_view(k, x, 0, (int64_t[]){M * K, K, 1});
    k->gemm.b = fx_view(k, w, 0, (int64_t[]){0, 1, K});
    fx_block(k, false);
    int acc = fx_other(k, KI_ACC, MC_F32, 0);
    int a = fx_op(k, MC_OP_ADD, d, acc, fx_load(k, fx_view(k, bias, 0, (int64_t[]){0, 0, 1}), d), 0);
    fx_store(k, fx_view_contig(k, y), a);
    return kp;
}

/* GEMMs of few rows, as a decoder step has (the GEMV kernel, cuda_render.c): x [B, M, K] times
 * w, where w is [K, N] (trans false: contiguous along N, a linear layer's weight) or [N, K] read
 * transposed (trans: contiguous along K, the tied LM head's embedding). The batch shares w (its
 * rows fold into M) except in kernel 5. `mask` bit g keeps kernel g (large sizes keep the
 * interpreter quick).
 *   kernel 0: gelu(acc + bias)                                -> y0 (d)
 *   kernel 1: acc + residual                                  -> y1 (d)
 *   kernel 2: gelu_tanh(acc) -> y2 (f32); acc * 0.5 -> y3 (f16): two stores, casts
 *   kernel 3: acc + bias                                      -> y4 (bf16)
 *   kernel 4: acc, A strided along K (xt [B, K, M] in memory)  -> y5 (d)
 *   kernel 5: acc with a batched B (wb [B, K, N] or [B, N, K]) -> y6 (d) */
static inline kir_program *fx_gemv(int64_t B, int64_t M, int64_t N, int64_t K, mc_dtype d, bool trans,
                                   unsigned mask)
{
    kir_program *kp = fx_program();
    int x = fx_buffer(kp, KBUF_INPUT, d, B * M * K);
    int w = fx_buffer(kp, KBUF_PARAM, d, N * K);
    int bias = fx_buffer(kp, KBUF_PARAM, d, N);
    int res = fx_buffer(kp, KBUF_INPUT, d, B * M * N);
    int xt = fx_buffer(kp, KBUF_INPUT, d, B * M * K);
    int wb = fx_buffer(kp, KBUF_PARAM, d, B * N * K);
    const mc_dtype yd[7] = {d, d, MC_F32, MC_F16, MC_BF16, d, d};
    const int kernel_of[7] = {0, 1, 2, 2, 3, 4, 5};
    int y[7];
    for (int i = 0; i < 7; i++) /* only the kept kernels' outputs: every output is checked */
        y[i] = mask & (1u << kernel_of[i]) ? fx_buffer(kp, KBUF_OUTPUT, yd[i], B * M * N) : -1;
    int64_t shape[3] = {B, M, N};
    int64_t xs[3] = {M * K, K, 1}, xts[3] = {M * K, 1, M};
    int64_t ws[3] = {0, trans ? 1 : N, trans ? K : 1};
    int64_t wbs[3] = {N * K, trans ? 1 : N, trans ? K : 1};
    int64_t bs[3] = {0, 0, 1};
    const char *names[6] = {"gemv_bias_gelu_0", "gemv_residual_1", "gemv_two_stores_2",
                            "gemv_bias_bf16_3", "gemv_strided_a_4", "gemv_batched_b_5"};
    for (int g = 0; g < 6; g++) {
        if (!(mask & (1u << g)))
            continue;
        kir_kernel *k = fx_kernel(kp, names[g], KIR_GEMM, 3, shape, 3);
        k->gemm.m = M;
        k->gemm.n = N;
        k->gemm.k = K;
        k->gemm.a = fx_view(k, g == 4 ? xt : x, 0, g == 4 ? xts : xs);
        k->gemm.b = fx_view(k, g == 5 ? wb : w, 0, g == 5 ? wbs : ws);
        fx_block(k, false);
        int acc = fx_other(k, KI_ACC, MC_F32, 0);
        if (g == 0) {
            int a = fx_op(k, MC_OP_ADD, MC_F32, acc, fx_load(k, fx_view(k, bias, 0, bs), d), 0);
            fx_store(k, fx_view_contig(k, y[0]), fx_op(k, MC_OP_GELU, d, a, 0, 0));
        } else if (g == 1) {
            fx_store(k, fx_view_contig(k, y[1]),
                     fx_op(k, MC_OP_ADD, d, acc, fx_load(k, fx_view_contig(k, res), d), 0));
        } else if (g == 2) {
            fx_store(k, fx_view_contig(k, y[2]), fx_op(k, MC_OP_GELU_TANH, MC_F32, acc, 0, 0));
            fx_store(k, fx_view_contig(k, y[3]),
                     fx_op(k, MC_OP_MUL, MC_F16, acc, fx_const(k, 0.5, MC_F32), 0));
        } else if (g == 3) {
            fx_store(k, fx_view_contig(k, y[4]),
                     fx_op(k, MC_OP_ADD, MC_BF16, acc, fx_load(k, fx_view(k, bias, 0, bs), d), 0));
        } else {
            fx_store(k, fx_view_contig(k, y[g + 1]), acc);
        }
    }
    return kp;
}

/* ---- a float64 interpreter of the kernel IR ------------------------------------------------ */

/* Independent of the reference backend's loop structure, but with the same scalar meaning of
 * each instruction (mc_op_apply, ir/semantics.c): there is one definition of an operator. */

/* Element i of a buffer, and storing one: f32 directly (the same rounding as the library's
 * converters, which, built without optimization in the sanitizer builds, were most of the
 * time of the tests on large fixtures), other dtypes through the library. */
static inline double fx_get(const void *data, mc_dtype d, int64_t i)
{
    return d == MC_F32 ? (double)((const float *)data)[i] : mc_load_element(data, d, i);
}

static inline void fx_put(void *data, mc_dtype d, int64_t i, double v)
{
    if (d == MC_F32)
        ((float *)data)[i] = (float)v;
    else
        mc_store_element(data, d, i, v);
}


/* Evaluate kp over host buffers (bufs[b]: numel elements of its dtype; temps included). */
static inline void fx_eval(const kir_program *kp, void **bufs)
{
    for (int ki = 0; ki < kp->nkernels; ki++) {
        const kir_kernel *k = &kp->kernels[ki];
        int64_t nrows = 1, nred = 1;
        int redrank = k->category == KIR_GEMM ? 0 : k->rank - k->nrow;
        for (int d = 0; d < k->rank; d++) {
            if (d < k->nrow || k->category == KIR_GEMM)
                nrows *= k->shape[d];
            else
                nred *= k->shape[d];
        }
        double *val = calloc((size_t)k->ncode + 1, sizeof(double));
        double rv[8];
        int64_t idx[MC_MAX_RANK];
        for (int64_t r = 0; r < nrows; r++) {
            int64_t t = r;
            int rowdims = k->category == KIR_GEMM ? k->rank : k->nrow;
            for (int d = rowdims - 1; d >= 0; d--) {
                idx[d] = t % k->shape[d];
                t /= k->shape[d];
            }
            double acc = 0;
            if (k->category == KIR_GEMM) {
                int nb = k->rank - 2;
                const kir_view *A = &k->views[k->gemm.a], *B = &k->views[k->gemm.b];
                int64_t ao = A->offset, bo = B->offset;
                for (int d = 0; d < nb; d++) {
                    ao += idx[d] * A->stride[d];
                    bo += idx[d] * B->stride[d];
                }
                for (int64_t kk = 0; kk < k->gemm.k; kk++)
                    acc += fx_get(bufs[A->buffer], kp->buffers[A->buffer].dtype,
                                           ao + idx[nb] * A->stride[nb] + kk * A->stride[nb + 1]) *
                           fx_get(bufs[B->buffer], kp->buffers[B->buffer].dtype,
                                           bo + kk * B->stride[nb] + idx[nb + 1] * B->stride[nb + 1]);
            }
            for (int b = 0; b < k->nblocks; b++) {
                const kir_block *blk = &k->blocks[b];
                int64_t n = blk->loop ? nred : 1;
                for (int r2 = 0; r2 < k->nreds; r2++)
                    if (k->reds[r2].block == b)
                        rv[r2] = mc_reduce_identity(k->reds[r2].op);
                for (int64_t e = 0; e < n; e++) {
                    if (blk->loop) {
                        int64_t t2 = e;
                        for (int d = k->rank - 1; d >= k->rank - redrank; d--) {
                            idx[d] = t2 % k->shape[d];
                            t2 /= k->shape[d];
                        }
                    }
                    int used_rank = blk->loop || k->category != KIR_REDUCTION ? k->rank : k->nrow;
                    for (int i = blk->first; i < blk->first + blk->count; i++) {
                        const kir_instr *in = &k->code[i];
                        double v = 0;
                        if (in->kind == KI_LOAD) {
                            const kir_view *w = &k->views[in->view];
                            int64_t o = w->offset;
                            for (int d = 0; d < used_rank; d++)
                                o += idx[d] * w->stride[d];
                            v = fx_get(bufs[w->buffer], kp->buffers[w->buffer].dtype, o);
                        } else if (in->kind == KI_CONST) {
                            v = mc_round_to_dtype(in->value, in->dtype);
                        } else if (in->kind == KI_INDEX) {
                            v = mc_round_to_dtype((double)idx[in->view], in->dtype);
                        } else if (in->kind == KI_ROWVAL) {
                            v = rv[in->view];
                        } else if (in->kind == KI_ACC) {
                            v = acc;
                        } else {
                            /* the operands' dtype matters only for i32 arithmetic, whose
                                             results are i32 too */
                            v = mc_op_apply(in->op, in->dtype, in->dtype, val[in->arg[0]],
                                            val[in->arg[1]], val[in->arg[2]]);
                        }
                        val[i] = v;
                    }
                    for (int r2 = 0; r2 < k->nreds; r2++)
                        if (k->reds[r2].block == b)
                            rv[r2] = mc_reduce_step(k->reds[r2].op, k->reds[r2].dtype, rv[r2],
                                                    val[k->reds[r2].value]);
                    for (int s = 0; s < k->nstores; s++) {
                        if (k->stores[s].block != b)
                            continue;
                        const kir_view *w = &k->views[k->stores[s].view];
                        int64_t o = w->offset;
                        for (int d = 0; d < used_rank; d++)
                            o += idx[d] * w->stride[d];
                        fx_put(bufs[w->buffer], kp->buffers[w->buffer].dtype, o,
                                         val[k->stores[s].value]);
                    }
                }
            }
        }
        free(val);
    }
}

#endif
