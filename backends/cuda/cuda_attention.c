/* CUDA C for attention kernels (KIR_ATTENTION): flash attention, compiled by NVRTC like every
 * other generated kernel. Shapes, strides, offsets and the score steps are literals.
 *
 * f16 and bf16 (q, k and v of one such dtype, sm_80 and later): tensor cores. One CTA of four
 * warps per (batch entry, 64 queries), the costliest query tiles first; each warp owns 16 query
 * rows. Q is loaded once and kept in registers as mma A fragments. K and V stream through
 * shared memory in tiles of 64 keys, double-buffered (cp.async where rows are 16-byte chunks,
 * plain loads otherwise), rows padded by 16 bytes so that ldmatrix reads are conflict-free.
 * Per tile: S = Q Kᵀ with mma.sync m16n8k16 (f32 accumulators, K fragments by ldmatrix), the
 * score steps and the key bound on the accumulators, the online softmax in registers (row
 * max across the four lanes of a row by shuffles, exp2 with log2 e folded into one FMA, a
 * rescaling factor that is exactly 1 where the max did not move, so a row still all -inf keeps
 * 0 and not NaN), P rounded to the input type and reused in registers as the A operand of
 * O += P V (V fragments by ldmatrix.trans). Key tiles that every query of the CTA's band rules
 * out are never loaded (a causal mask: those above the diagonal). At the end O / l, where a
 * row with no key left has l = 0 and gives NaN, as the unfused softmax does.
 *
 * f32 (and any dtype where the tensor-core kernel does not apply): the same algorithm on the
 * FMA units, f32 throughout, so the result keeps the f32 tolerance without TF32. Two kernels:
 *   - register-blocked (the default for head sizes up to 80, render_fma_split): 4 lanes share
 *     4 query rows, each lane holding a quarter of the head dimension of all 4 rows, so that
 *     each K or V value read from shared memory feeds 4 FMAs; each lane owns one row's scores
 *     (mask, softmax, exp once per score); K/V tiles double-buffered; warps skip the key tiles
 *     their own rows rule out. The shared-memory instructions per FMA are about a third of the
 *     old kernel's, which was bound by them.
 *   - one row per G lanes (larger heads, or MINIC_CUDA_ATTN_F32=old, render_fma): G threads
 *     share a query row (G = 1, 2 or 4 by head size), each holding a slice of q and of the
 *     output row in registers; K and V tiles of 32 keys in shared memory are read as float4
 *     broadcasts, each G-slice padded so the G lanes of a row hit different banks; a score is
 *     the slices' partial dot products summed by shuffles.
 *
 * Decode (every dtype, at most DECODE_MAX_TQ queries per batch entry: a decoder step over its
 * KV cache; render_decode): flash-decoding on the FMA units, the keys of each batch entry split
 * over several CTAs whose partial softmax states the last one to finish merges, so that batch 1
 * keeps the GPU busy; K and V are read once, straight from global memory, 16 bytes a load.
 * MINIC_CUDA_ATTN_DECODE=0 keeps the kernels above for such shapes too.
 */
#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_prelude.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct actx {
    const kir_program *kp;
    const kir_kernel *k;
    const mc_cuda_target *t;
    const int *align;
    mc_strbuf *sb;
    mc_cuda_code *out;
    int nb;
    int *view_param;   /* per view: its parameter */
    const char *I;     /* offset type */
    int minb;          /* min CTAs per SM in __launch_bounds__ (0: none given) */
    int threads;       /* threads per CTA (__launch_bounds__) */
    mc_cuda_sizes z;   /* run-time sizes (mc_cuda_render_sized): z.dims NULL for literals */
    int64_t batch_v, tq_v; /* this binding's batch entries and queries (the grid's) */
} actx;

/* Dim d as C: a literal as always, or (with run-time sizes) `(int)S_.v[slot]`. */
static const char *dim_int(actx *c, int64_t d, char *buf, size_t size)
{
    char x[48];
    mc_cuda_size(&c->z, &d, 1, 1, x, sizeof x);
    snprintf(buf, size, x[0] == 'S' ? "(int)%s" : "%s", x);
    return buf;
}

/* Dim d as a literal or `S_.v[slot]` (a long long), to follow an index-type cast. */
static const char *dim_raw(actx *c, int64_t d, char *buf, size_t size)
{
    return mc_cuda_size(&c->z, &d, 1, 1, buf, size);
}

/* The last query index Tq - 1. */
static const char *last_query(actx *c, char *buf, size_t size)
{
    if (!mc_dim_is_sym(c->k->attn.tq)) {
        snprintf(buf, size, "%lld", (long long)(c->k->attn.tq - 1));
        return buf;
    }
    char x[64];
    snprintf(buf, size, "(%s - 1)", dim_int(c, c->k->attn.tq, x, sizeof x));
    return buf;
}

/* `qt_ = <query tiles - 1> - blockIdx.x / <batch>, bid_ = blockIdx.x % <batch>` for tiles of
 * `rows` queries; *grid the binding's tiles times batch entries. */
static void emit_tile_order(actx *c, int64_t rows, int64_t *grid)
{
    const kir_attention *a = &c->k->attn;
    char last[96], bx[64], tq[64];
    int64_t nqt = (c->tq_v + rows - 1) / rows;
    *grid = nqt * c->batch_v;
    if (mc_dim_is_sym(a->tq))
        snprintf(last, sizeof last, "((%s + %lld) / %lld - 1)", dim_int(c, a->tq, tq, sizeof tq), (long long)(rows - 1),
                 (long long)rows);
    else
        snprintf(last, sizeof last, "%lld", (long long)(nqt - 1));
    char braw[48];
    mc_cuda_size(&c->z, c->k->shape, c->nb, 1, braw, sizeof braw);
    snprintf(bx, sizeof bx, braw[0] == 'S' ? "(int)%s" : "%s", braw);
    mc_sb_printf(c->sb, "  const int qt_ = %s - (int)blockIdx.x / %s, bid_ = (int)blockIdx.x %% %s;\n", last, bx, bx);
}

static const char *storage_type(mc_dtype d)
{
    switch (d) {
    case MC_F16: return "__half";
    case MC_BF16: return "__nv_bfloat16";
    case MC_I32: return "int";
    case MC_BOOL: return "bool";
    case MC_F32: case MC_NUM_DTYPES: break;
    }
    return "float";
}

static const char *cvt_fn(mc_dtype d)
{
    switch (d) {
    case MC_F16: return "mc_cvt_f16";
    case MC_BF16: return "mc_cvt_bf16";
    case MC_I32: return "mc_cvt_i32";
    case MC_BOOL: return "mc_cvt_bool";
    case MC_F32: case MC_NUM_DTYPES: break;
    }
    return "mc_cvt_f32";
}

static mc_dtype view_dtype(const actx *c, int v) { return c->kp->buffers[c->k->views[v].buffer].dtype; }

/* ob<v>: the element offset of view v at the CTA's batch entry (b<d> are its indices). */
static void emit_batch_offsets(actx *c, const char *index)
{
    const kir_kernel *k = c->k;
    mc_sb_printf(c->sb, "  int bt_ = %s;\n", index);
    char x[64];
    for (int d = c->nb - 1; d >= 0; d--) {
        mc_sb_printf(c->sb, "  const int b%d = bt_ %% %s;\n", d, dim_int(c, k->shape[d], x, sizeof x));
        mc_sb_printf(c->sb, "  bt_ /= %s;\n", dim_int(c, k->shape[d], x, sizeof x));
    }
    mc_sb_puts(c->sb, "  (void)bt_;\n");
    for (int v = 0; v < k->nviews; v++) {
        if (c->view_param[v] < 0)
            continue;
        mc_sb_printf(c->sb, "  const %s ob%d = (%s)%s", c->I, v, c->I, dim_raw(c, k->views[v].offset, x, sizeof x));
        for (int d = 0; d < c->nb; d++)
            if (k->views[v].stride[d] != 0)
                mc_sb_printf(c->sb, " + (%s)b%d * (%s)%s", c->I, d, c->I, dim_raw(c, k->views[v].stride[d], x, sizeof x));
        mc_sb_puts(c->sb, ";\n");
    }
}

/* The address expression of view v at row r, column col (C expressions). */
static void view_at(actx *c, int v, const char *r, const char *col)
{
    const kir_view *w = &c->k->views[v];
    char x[48];
    mc_sb_printf(c->sb, "p%d[ob%d", c->view_param[v], v);
    if (w->stride[c->nb] != 0)
        mc_sb_printf(c->sb, " + (%s)(%s) * (%s)%s", c->I, r, c->I, dim_raw(c, w->stride[c->nb], x, sizeof x));
    if (w->stride[c->nb + 1] != 0)
        mc_sb_printf(c->sb, " + (%s)(%s) * (%s)%s", c->I, col, c->I, dim_raw(c, w->stride[c->nb + 1], x, sizeof x));
    mc_sb_puts(c->sb, "]");
}

/* `auto mc_steps = [&](float s, int i, int j) -> float {...};` the score steps in order. Mask
 * loads read at the query clamped to the last one (rows past Tq are computed, never stored). */
static void emit_steps(actx *c)
{
    const kir_attention *a = &c->k->attn;
    mc_strbuf *sb = c->sb;
    mc_sb_puts(sb, "  auto mc_steps = [&](float s, int i, int j) -> float {\n");
    char tq[64], last[96];
    if (a->nsteps > 0)
        mc_sb_printf(sb, "    const int ic = i < %s ? i : %s;\n    (void)ic;\n", dim_int(c, a->tq, tq, sizeof tq),
                     last_query(c, last, sizeof last));
    for (int t = 0; t < a->nsteps; t++) {
        const kir_attn_step *st = &a->steps[t];
        mc_sb_puts(sb, "    s = ");
        switch (st->kind) {
        case KIR_STEP_MUL: mc_sb_puts(sb, "s * "); mc_c_literal(sb, st->value, MC_F32); break;
        case KIR_STEP_DIV: mc_sb_puts(sb, "s / "); mc_c_literal(sb, st->value, MC_F32); break;
        case KIR_STEP_BAND:
            mc_sb_puts(sb, "(true");
            if (st->lo > -KIR_BAND_OPEN)
                mc_sb_printf(sb, " && j - i >= %lld", (long long)st->lo);
            if (st->hi < KIR_BAND_OPEN)
                mc_sb_printf(sb, " && j - i <= %lld", (long long)st->hi);
            mc_sb_puts(sb, ") ? s : ");
            mc_c_literal(sb, st->value, MC_F32);
            break;
        case KIR_STEP_WHERE:
            mc_sb_printf(sb, "((bool)mc_ld(");
            view_at(c, st->view, "ic", "j");
            mc_sb_printf(sb, ") == %s) ? s : ", st->keep ? "true" : "false");
            mc_c_literal(sb, st->value, MC_F32);
            break;
        case KIR_STEP_ADD:
            mc_sb_puts(sb, "s + mc_ld(");
            view_at(c, st->view, "ic", "j");
            mc_sb_puts(sb, ")");
            break;
        }
        mc_sb_puts(sb, ";\n");
    }
    mc_sb_puts(sb, "    (void)i; (void)j;\n    return s;\n  };\n");
}

/* `auto mc_full = [&](int j0, int jend) -> bool {...};` and MC_SCALE: a key tile [j0, jend) is
 * full when it holds MC_BN keys and every band keeps every (query, key) pair of it for the
 * `rows` rows from `base` (rows past Tq included: computed, never stored). On a full tile the score
 * steps reduce to one positive scale, MC_SCALE, which the kernel folds into the exponent's
 * multiplier (max(s) * c = max(s * c) for c > 0): no per-score mask or scale instructions.
 * Chains with a mask loaded from memory, or a scale that is not a positive finite number, never
 * take it (mc_full is false). */
static void emit_full(actx *c, const char *base, const char *rows)
{
    const kir_attention *a = &c->k->attn;
    mc_strbuf *sb = c->sb;
    double scale = 1.0;
    bool ok = true;
    for (int t = 0; t < a->nsteps; t++) {
        const kir_attn_step *st = &a->steps[t];
        switch (st->kind) {
        case KIR_STEP_MUL: scale *= st->value; break;
        case KIR_STEP_DIV: scale /= st->value; break;
        case KIR_STEP_BAND: break;
        case KIR_STEP_WHERE: case KIR_STEP_ADD: ok = false; break;
        }
    }
    ok = ok && scale > 0 && isfinite(scale) && (float)scale > 0 && isfinite((float)scale);
    mc_sb_puts(sb, "#define MC_SCALE ");
    mc_c_literal(sb, ok ? scale : 1.0, MC_F32);
    mc_sb_puts(sb, "\n  auto mc_full = [&](int j0, int jend) -> bool {\n");
    if (!ok) {
        mc_sb_puts(sb, "    (void)j0; (void)jend;\n    return false;\n  };\n");
        return;
    }
    mc_sb_puts(sb, "    return jend - j0 == MC_BN");
    for (int t = 0; t < a->nsteps; t++) {
        const kir_attn_step *st = &a->steps[t];
        if (st->kind != KIR_STEP_BAND)
            continue;
        /* j - i over the tile: from j0 - (base + rows - 1) to j0 + MC_BN - 1 - base */
        if (st->lo > -KIR_BAND_OPEN)
            mc_sb_printf(sb, " && (long long)j0 - (%s + %s - 1) >= %lldLL", base, rows, (long long)st->lo);
        if (st->hi < KIR_BAND_OPEN)
            mc_sb_printf(sb, " && (long long)j0 + MC_BN - 1 - %s <= %lldLL", base, (long long)st->hi);
    }
    mc_sb_puts(sb, ";\n  };\n");
}

static void operand_name(mc_strbuf *sb, int instr, void *ctx)
{
    (void)ctx;
    mc_sb_printf(sb, "v%d", instr);
}

/* `auto mc_store = [&](int i, int col, float acc) {...};` the kernel's row block at (i, col). */
static bool emit_store(actx *c)
{
    const kir_kernel *k = c->k;
    mc_strbuf *sb = c->sb;
    mc_sb_puts(sb, "  auto mc_store = [&](int i, int col, float acc) {\n");
    for (int i = 0; i < k->ncode; i++) {
        const kir_instr *in = &k->code[i];
        mc_sb_printf(sb, "    const %s v%d = ", mc_c_arith_type(in->dtype), i);
        switch (in->kind) {
        case KI_ACC: mc_sb_puts(sb, "acc"); break;
        case KI_CONST: mc_c_literal(sb, in->value, in->dtype); break;
        case KI_OP:
            if (!mc_c_op_expr(sb, k, in, operand_name, c))
                return false;
            break;
        case KI_LOAD: case KI_INDEX: case KI_ROWVAL: case KI_GATHER:
        case KI_SIZE: /* cuda is handed bound programs only (kir_bind) */
            return false; /* lowering makes none: the row block is the accumulator's store */
        }
        mc_sb_puts(sb, ";\n");
    }
    for (int s = 0; s < k->nstores; s++) {
        mc_sb_puts(sb, "    ");
        view_at(c, k->stores[s].view, "i", "col");
        mc_sb_printf(sb, " = %s(v%d);\n", cvt_fn(view_dtype(c, k->stores[s].view)), k->stores[s].value);
    }
    mc_sb_puts(sb, "  };\n");
    return true;
}

static void emit_signature(actx *c)
{
    const kir_kernel *k = c->k;
    mc_cuda_code *out = c->out;
    if (c->minb > 0)
        mc_sb_printf(c->sb, "extern \"C\" __global__ void __launch_bounds__(%d, %d) %s(", c->threads, c->minb,
                     out->entry);
    else
        mc_sb_printf(c->sb, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", c->threads, out->entry);
    for (int p = 0; p < out->nparams; p++) {
        int b = out->param[p];
        if (b == MC_CUDA_PARAM_SIZES) {
            mc_sb_puts(c->sb, ", const mc_sz S_");
            continue;
        }
        bool written = false;
        for (int s = 0; s < k->nstores; s++)
            written = written || k->views[k->stores[s].view].buffer == b;
        mc_sb_printf(c->sb, "%s%s%s *p%d", p ? ", " : "", written ? "" : "const ",
                     storage_type(c->kp->buffers[b].dtype), p);
    }
    mc_sb_puts(c->sb, ")\n{\n");
}

/* The key range of the CTA's queries [i0, i0 + nrows): jlo, jhi. */
static void emit_key_range(actx *c)
{
    const kir_attention *a = &c->k->attn;
    char tk[64];
    mc_sb_printf(c->sb, "  int jlo = 0, jhi = %s;\n", dim_int(c, a->tk, tk, sizeof tk));
    if (a->skip) {
        mc_sb_printf(c->sb, "  jlo = max(jlo, i0 + (%lld));\n", (long long)a->skip_lo);
        mc_sb_printf(c->sb, "  jhi = min(jhi, i0 + nrows + (%lld));\n", (long long)a->skip_hi);
    }
}

/* Can operand view v be copied into shared memory in 16-byte chunks (`per` elements: 8 of a
 * 16-bit type, 4 of f32), rows of `cols` elements? */
static bool chunked_by(const actx *c, int v, int64_t cols, int per)
{
    const kir_view *w = &c->k->views[v];
    if ((int64_t)mc_dtype_size(view_dtype(c, v)) * per != 16)
        return false;
    const mc_dims *t = c->kp->dims;
    if (w->stride[c->nb + 1] != 1 || cols % per != 0 || !mc_dims_multiple_of(t, w->stride[c->nb], per) ||
        !mc_dims_multiple_of(t, w->offset, per) || c->align[w->buffer] < 16)
        return false;
    for (int d = 0; d < c->nb; d++)
        if (!mc_dims_multiple_of(t, w->stride[d], per))
            return false;
    return true;
}

static bool chunked(const actx *c, int v, int64_t cols) { return chunked_by(c, v, cols, 8); }

/* A lambda loading a tile of `rows` rows of operand view v (rows r0 + 0.., valid below rlim,
 * columns below `cols`, zeros elsewhere) into shared memory of row stride `ld` halves. */
static void emit_tile_loader(actx *c, const char *name, int v, int64_t cols, const char *colsp, const char *ld,
                             const char *rows, bool async)
{
    mc_strbuf *sb = c->sb;
    const kir_view *w = &c->k->views[v];
    int p = c->view_param[v];
    mc_sb_printf(sb, "  auto %s = [&](mc_t *dst, int r0, int rlim) {\n", name);
    if (async) {
        mc_sb_printf(sb, "    for (int e = tid; e < %s * (%s / 8); e += 128) {\n", rows, colsp);
        mc_sb_printf(sb, "      const int r = e / (%s / 8), d = (e - r * (%s / 8)) * 8, row = r0 + r;\n", colsp, colsp);
        mc_sb_printf(sb, "      const bool ok = row < rlim && d < %lld;\n", (long long)cols);
        char x[48];
        mc_sb_printf(sb, "      const mc_t *src = ok ? p%d + ob%d + (%s)row * (%s)%s + d : p%d;\n", p, v, c->I, c->I,
                     dim_raw(c, w->stride[c->nb], x, sizeof x), p);
        mc_sb_printf(sb, "      mc_cp16(dst + r * %s + d, src, ok ? 16 : 0);\n", ld);
        mc_sb_puts(sb, "    }\n  };\n");
        return;
    }
    mc_sb_printf(sb, "    for (int e = tid; e < %s * %s; e += 128) {\n", rows, colsp);
    mc_sb_printf(sb, "      const int r = e / %s, d = e - r * %s, row = r0 + r;\n", colsp, colsp);
    char x0[48], x1[48];
    mc_sb_printf(sb, "      mc_t x = mc_zero;\n      if (row < rlim && d < %lld) x = p%d[ob%d + (%s)row * (%s)%s + (%s)d * (%s)%s];\n",
                 (long long)cols, p, v, c->I, c->I, dim_raw(c, w->stride[c->nb], x0, sizeof x0), c->I, c->I,
                 dim_raw(c, w->stride[c->nb + 1], x1, sizeof x1));
    mc_sb_printf(sb, "      dst[r * %s + d] = x;\n    }\n  };\n", ld);
}


/* Can the output go out through shared memory in 16-byte rows? The row block is the plain
 * store of the accumulator into a view of the inputs' 16-bit type, contiguous along Dv. */
static bool staged_output(const actx *c, mc_dtype dt)
{
    const kir_kernel *k = c->k;
    if (k->nstores != 1 || k->ncode != 1 || k->code[0].kind != KI_ACC || k->stores[0].value != 0)
        return false;
    int v = k->stores[0].view;
    return view_dtype(c, v) == dt && chunked(c, v, k->attn.dv);
}

/* The tensor-core kernel (see the top). */
static bool render_tc(actx *c)
{
    const kir_attention *a = &c->k->attn;
    mc_strbuf *sb = c->sb;
    mc_dtype dt = view_dtype(c, a->q);
    int64_t dp = (a->d + 15) / 16 * 16, dvp = (a->dv + 15) / 16 * 16;
    /* 16-row m-tiles per warp (each K/V fragment feeds wm mmas). One: 64 queries per CTA. Two
     * (d, dv <= 64) halve the shared-memory reads per query but take 225-254 registers, so 2 CTAs
     * per SM: H100, causal B8 H12 T1024 D64 bf16 77.7 us with one against 94.5 with two, T4096
     * 131.0 against 135.1 (2026-11-25, same run). Experiments (bench/gpu/attention_gpu.sh):
     * MINIC_CUDA_ATTN_WM=2 takes two where d, dv <= 64; MINIC_CUDA_ATTN_MINB=N asks NVRTC for N
     * CTAs per SM (launch bounds). */
    int wm = 1;
    const char *ew = getenv("MINIC_CUDA_ATTN_WM"), *eb = getenv("MINIC_CUDA_ATTN_MINB");
    if (ew && atoi(ew) == 2 && dp <= 64 && dvp <= 64)
        wm = 2;
    if (eb && atoi(eb) > 0 && atoi(eb) <= 8)
        c->minb = atoi(eb);
    bool kasync = chunked(c, a->k, a->d), vasync = chunked(c, a->v, a->dv), staged = staged_output(c, dt);
    bool bf = dt == MC_BF16;
    mc_sb_printf(sb, "typedef %s mc_t;\n#define MC_T2 %s\n#define MC_PACK %s\n#define MC_PTX \"%s\"\n",
                 bf ? "__nv_bfloat16" : "__half", bf ? "__nv_bfloat162" : "__half2",
                 bf ? "__floats2bfloat162_rn" : "__floats2half2_rn", bf ? "bf16" : "f16");
    mc_sb_puts(sb, mc_cuda_mma_helpers);
    mc_sb_puts(sb, mc_cuda_cp_helpers);
    mc_sb_printf(sb, "#define MC_WM %d\n#define MC_BM (64 * MC_WM)\n#define MC_BN 64\n#define MC_DP %lld\n"
                     "#define MC_DVP %lld\n", wm, (long long)dp, (long long)dvp);
    mc_sb_puts(sb, "#define MC_QS ((MC_DP > MC_DVP ? MC_DP : MC_DVP) + 8)\n#define MC_KS (MC_DP + 8)\n"
                   "#define MC_VS (MC_DVP + 8)\n#define MC_LOG2E 1.4426950408889634f\n");
    emit_signature(c);
    mc_sb_puts(sb, "  extern __shared__ __align__(16) unsigned char mc_smem[];\n"
                   "  mc_t *sQ = (mc_t *)mc_smem, *sK = sQ + MC_BM * MC_QS, *sV = sK + 2 * MC_BN * MC_KS;\n"
                   "  const mc_t mc_zero = MC_PACK(0.0f, 0.0f).x;\n"
                   "  const int tid = (int)threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;\n");
    /* one-dimensional grid: the last query tiles of every batch entry (the costliest under a
     * causal mask) first */
    int64_t grid = 0;
    char tq[64];
    dim_int(c, a->tq, tq, sizeof tq);
    emit_tile_order(c, 64 * wm, &grid);
    mc_sb_puts(sb, "  const int i0 = qt_ * MC_BM;\n");
    mc_sb_printf(sb, "  const int nrows = min(MC_BM, %s - i0);\n", tq);
    emit_batch_offsets(c, "bid_");
    emit_key_range(c);
    emit_steps(c);
    emit_full(c, "i0", "MC_BM");
    if (!staged && !emit_store(c))
        return false;
    emit_tile_loader(c, "load_q", a->q, a->d, "MC_DP", "MC_QS", "MC_BM", false);
    emit_tile_loader(c, "load_k", a->k, a->d, "MC_DP", "MC_KS", "MC_BN", kasync);
    emit_tile_loader(c, "load_v", a->v, a->dv, "MC_DVP", "MC_VS", "MC_BN", vasync);
    mc_sb_printf(sb, "  load_q(sQ, i0, %s);\n", tq);
    mc_sb_puts(sb,
               "  const int ntiles = jhi > jlo ? (jhi - jlo + MC_BN - 1) / MC_BN : 0;\n"
               "  if (ntiles > 0) { load_k(sK, jlo, jhi); load_v(sV, jlo, jhi); }\n"
               "  mc_cp_commit();\n"
               "  __syncthreads();\n"
               "  unsigned qa[MC_WM][MC_DP / 16][4];\n"
               "#pragma unroll\n"
               "  for (int mt = 0; mt < MC_WM; ++mt) {\n"
               "    const mc_t *qb = sQ + (warp * 16 * MC_WM + mt * 16 + g) * MC_QS + t4 * 2;\n"
               "#pragma unroll\n"
               "    for (int ks = 0; ks < MC_DP / 16; ++ks) {\n"
               "      qa[mt][ks][0] = *reinterpret_cast<const unsigned *>(qb + ks * 16);\n"
               "      qa[mt][ks][1] = *reinterpret_cast<const unsigned *>(qb + 8 * MC_QS + ks * 16);\n"
               "      qa[mt][ks][2] = *reinterpret_cast<const unsigned *>(qb + ks * 16 + 8);\n"
               "      qa[mt][ks][3] = *reinterpret_cast<const unsigned *>(qb + 8 * MC_QS + ks * 16 + 8);\n"
               "    }\n"
               "  }\n"
               "  float o[MC_WM][MC_DVP / 8][4], m[MC_WM][2], l[MC_WM][2];\n"
               "#pragma unroll\n"
               "  for (int mt = 0; mt < MC_WM; ++mt) {\n"
               "#pragma unroll\n"
               "    for (int n = 0; n < MC_DVP / 8; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.0f;\n"
               "    m[mt][0] = m[mt][1] = -MC_INF;\n"
               "    l[mt][0] = l[mt][1] = 0.0f;\n"
               "  }\n"
               "  const int rw = i0 + warp * 16 * MC_WM + g; /* the thread's rows: rw + 16 mt + 8 h */\n"
               "  for (int it = 0; it < ntiles; ++it) {\n"
               "    const int j0 = jlo + it * MC_BN, jend = min(j0 + MC_BN, jhi);\n"
               "    if (it + 1 < ntiles) {\n"
               "      load_k(sK + ((it + 1) & 1) * MC_BN * MC_KS, j0 + MC_BN, jhi);\n"
               "      load_v(sV + ((it + 1) & 1) * MC_BN * MC_VS, j0 + MC_BN, jhi);\n"
               "    }\n"
               "    mc_cp_commit();\n"
               "    mc_cp_wait1();\n"
               "    __syncthreads();\n"
               "    const mc_t *cK = sK + (it & 1) * MC_BN * MC_KS, *cV = sV + (it & 1) * MC_BN * MC_VS;\n"
               "    float s[MC_WM][MC_BN / 8][4];\n"
               "#pragma unroll\n"
               "    for (int mt = 0; mt < MC_WM; ++mt)\n"
               "#pragma unroll\n"
               "      for (int n = 0; n < MC_BN / 8; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.0f;\n"
               "#pragma unroll\n"
               "    for (int ks = 0; ks < MC_DP / 16; ++ks)\n"
               "#pragma unroll\n"
               "      for (int n = 0; n < MC_BN / 8; n += 2) {\n"
               "        unsigned b[4];\n"
               "        mc_ldsm4(b, cK + (n * 8 + (lane & 7) + ((lane >> 4) << 3)) * MC_KS + ks * 16 + ((lane >> 3) & 1) * 8);\n"
               "#pragma unroll\n"
               "        for (int mt = 0; mt < MC_WM; ++mt) {\n"
               "          mc_mma(s[mt][n], qa[mt][ks], b[0], b[1]);\n"
               "          mc_mma(s[mt][n + 1], qa[mt][ks], b[2], b[3]);\n"
               "        }\n"
               "      }\n"
               "#pragma unroll\n"
               "    /* a full tile keeps its raw scores: the scale goes into the exponent (cl) */\n"
               "    const bool full = mc_full(j0, jend);\n"
               "    const float cs = full ? MC_SCALE : 1.0f, cl = cs * MC_LOG2E;\n"
               "#pragma unroll\n"
               "    for (int mt = 0; mt < MC_WM; ++mt) {\n"
               "      float mx[2] = {-MC_INF, -MC_INF};\n"
               "      if (full) {\n"
               "#pragma unroll\n"
               "        for (int n = 0; n < MC_BN / 8; ++n)\n"
               "#pragma unroll\n"
               "          for (int e = 0; e < 4; ++e) mx[e >> 1] = fmaxf(mx[e >> 1], s[mt][n][e]);\n"
               "      } else {\n"
               "#pragma unroll\n"
               "        for (int n = 0; n < MC_BN / 8; ++n)\n"
               "#pragma unroll\n"
               "          for (int e = 0; e < 4; ++e) {\n"
               "            const int j = j0 + n * 8 + t4 * 2 + (e & 1);\n"
               "            /* keys past the tile's end load no mask (it would read past the row) */\n"
               "            const float v = j < jend ? mc_steps(s[mt][n][e], rw + 16 * mt + 8 * (e >> 1), j) : -MC_INF;\n"
               "            s[mt][n][e] = v;\n"
               "            mx[e >> 1] = fmaxf(mx[e >> 1], v);\n"
               "          }\n"
               "      }\n"
               "      float u[2];\n"
               "#pragma unroll\n"
               "      for (int h = 0; h < 2; ++h) {\n"
               "        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));\n"
               "        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2)) * cs;\n"
               "        const float mn = fmaxf(m[mt][h], mx[h]);\n"
               "        const float alpha = m[mt][h] == mn ? 1.0f : exp2f((m[mt][h] - mn) * MC_LOG2E);\n"
               "        u[h] = mn == -MC_INF ? 0.0f : mn * MC_LOG2E;\n"
               "        m[mt][h] = mn;\n"
               "        l[mt][h] *= alpha;\n"
               "#pragma unroll\n"
               "        for (int n = 0; n < MC_DVP / 8; ++n) {\n"
               "          o[mt][n][2 * h] *= alpha;\n"
               "          o[mt][n][2 * h + 1] *= alpha;\n"
               "        }\n"
               "      }\n"
               "#pragma unroll\n"
               "      for (int n = 0; n < MC_BN / 8; ++n)\n"
               "#pragma unroll\n"
               "        for (int e = 0; e < 4; ++e) {\n"
               "          s[mt][n][e] = exp2f(fmaf(s[mt][n][e], cl, -u[e >> 1]));\n"
               "          l[mt][e >> 1] += s[mt][n][e];\n"
               "        }\n"
               "    }\n"
               "#pragma unroll\n"
               "    for (int kk = 0; kk < MC_BN / 16; ++kk) {\n"
               "      unsigned pa[MC_WM][4];\n"
               "#pragma unroll\n"
               "      for (int mt = 0; mt < MC_WM; ++mt) {\n"
               "        pa[mt][0] = mc_pack2(s[mt][2 * kk][0], s[mt][2 * kk][1]);\n"
               "        pa[mt][1] = mc_pack2(s[mt][2 * kk][2], s[mt][2 * kk][3]);\n"
               "        pa[mt][2] = mc_pack2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);\n"
               "        pa[mt][3] = mc_pack2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);\n"
               "      }\n"
               "#pragma unroll\n"
               "      for (int n = 0; n < MC_DVP / 8; n += 2) {\n"
               "        unsigned b[4];\n"
               "        mc_ldsm4t(b, cV + (kk * 16 + (lane & 15)) * MC_VS + n * 8 + (lane >> 4) * 8);\n"
               "#pragma unroll\n"
               "        for (int mt = 0; mt < MC_WM; ++mt) {\n"
               "          mc_mma(o[mt][n], pa[mt], b[0], b[1]);\n"
               "          mc_mma(o[mt][n + 1], pa[mt], b[2], b[3]);\n"
               "        }\n"
               "      }\n"
               "    }\n"
               "    __syncthreads();\n"
               "  }\n"
               "  float inv[MC_WM][2];\n"
               "#pragma unroll\n"
               "  for (int mt = 0; mt < MC_WM; ++mt)\n"
               "#pragma unroll\n"
               "    for (int h = 0; h < 2; ++h) {\n"
               "      float t = l[mt][h];\n"
               "      t += __shfl_xor_sync(0xffffffffu, t, 1);\n"
               "      t += __shfl_xor_sync(0xffffffffu, t, 2);\n"
               "      inv[mt][h] = 1.0f / t; /* no key left: 0 / 0, NaN as the unfused softmax */\n"
               "    }\n");
    if (staged) {
        /* O through shared memory (Q's, now free), then 16-byte rows to the output */
        const kir_view *ov = &c->k->views[c->k->stores[0].view];
        mc_sb_puts(sb,
                   "  __syncthreads();\n"
                   "#pragma unroll\n"
                   "  for (int mt = 0; mt < MC_WM; ++mt)\n"
                   "#pragma unroll\n"
                   "    for (int n = 0; n < MC_DVP / 8; ++n)\n"
                   "#pragma unroll\n"
                   "      for (int h = 0; h < 2; ++h) {\n"
                   "        const int r = warp * 16 * MC_WM + mt * 16 + g + 8 * h;\n"
                   "        *reinterpret_cast<unsigned *>(sQ + r * MC_QS + n * 8 + t4 * 2) =\n"
                   "            mc_pack2(o[mt][n][2 * h] * inv[mt][h], o[mt][n][2 * h + 1] * inv[mt][h]);\n"
                   "      }\n"
                   "  __syncthreads();\n");
        mc_sb_printf(sb, "  for (int e = tid; e < nrows * %lld; e += 128) {\n", (long long)(a->dv / 8));
        mc_sb_printf(sb, "    const int r = e / %lld, ch = e - r * %lld;\n", (long long)(a->dv / 8), (long long)(a->dv / 8));
        char x[48];
        mc_sb_printf(sb, "    *reinterpret_cast<uint4 *>(p%d + ob%d + (%s)(i0 + r) * (%s)%s + ch * 8) =\n"
                         "        *reinterpret_cast<const uint4 *>(sQ + r * MC_QS + ch * 8);\n  }\n",
                     c->view_param[c->k->stores[0].view], c->k->stores[0].view, c->I, c->I,
                     dim_raw(c, ov->stride[c->nb], x, sizeof x));
        mc_sb_puts(sb, "}\n");
    } else {
        mc_sb_puts(sb, "#pragma unroll\n"
                       "  for (int mt = 0; mt < MC_WM; ++mt)\n"
                       "#pragma unroll\n"
                       "    for (int n = 0; n < MC_DVP / 8; ++n)\n"
                       "#pragma unroll\n"
                       "      for (int e = 0; e < 4; ++e) {\n"
                       "        const int col = n * 8 + t4 * 2 + (e & 1), i = rw + 16 * mt + 8 * (e >> 1);\n");
        mc_sb_printf(sb, "        if (i < %s && col < %lld) mc_store(i, col, o[mt][n][e] * inv[mt][e >> 1]);\n",
                     tq, (long long)a->dv);
        mc_sb_puts(sb, "      }\n}\n");
    }
    int64_t qs = (dp > dvp ? dp : dvp) + 8;
    c->out->block = 128;
    c->out->grid[0] = grid;
    c->out->grid[1] = 1;
    c->out->smem = (int)((64 * wm * qs + 2 * 64 * (dp + 8) + 2 * 64 * (dvp + 8)) * 2);
    c->out->scheme = "attention-mma";
    return true;
}

/* The FMA kernel (see the top). */
static bool render_fma(actx *c)
{
    const kir_attention *a = &c->k->attn;
    mc_strbuf *sb = c->sb;
    int64_t wide = a->d > a->dv ? a->d : a->dv;
    int G = wide <= 32 ? 1 : wide <= 64 ? 2 : 4;
    int64_t dpg = ((a->d + G - 1) / G + 3) / 4 * 4, dvg = ((a->dv + G - 1) / G + 3) / 4 * 4;
    mc_sb_printf(sb, "#define MC_G %d\n#define MC_RM (128 / MC_G)\n#define MC_BN 32\n#define MC_DPG %lld\n"
                     "#define MC_DVG %lld\n#define MC_KS (MC_G * (MC_DPG + 4))\n#define MC_VS (MC_G * (MC_DVG + 4))\n",
                 G, (long long)dpg, (long long)dvg);
    emit_signature(c);
    int64_t grid = 0;
    char tq[64], last[96];
    dim_int(c, a->tq, tq, sizeof tq);
    last_query(c, last, sizeof last);
    mc_sb_puts(sb, "  __shared__ __align__(16) float sK[MC_BN * MC_KS];\n"
                   "  __shared__ __align__(16) float sV[MC_BN * MC_VS];\n"
                   "  const int tid = (int)threadIdx.x, h = tid % MC_G;\n");
    emit_tile_order(c, 128 / G, &grid);
    mc_sb_puts(sb, "  const int i0 = qt_ * MC_RM, i = i0 + tid / MC_G;\n");
    mc_sb_printf(sb, "  const int nrows = min(MC_RM, %s - i0), ic = i < %s ? i : %s;\n", tq, tq, last);
    emit_batch_offsets(c, "bid_");
    emit_key_range(c);
    emit_steps(c);
    emit_full(c, "i0", "MC_RM");
    if (!emit_store(c))
        return false;
    mc_sb_puts(sb, "  float q[MC_DPG], o[MC_DVG];\n"
                   "#pragma unroll\n"
                   "  for (int x = 0; x < MC_DPG; ++x) {\n"
                   "    const int d = h * MC_DPG + x;\n"
                   "    q[x] = 0.0f;\n");
    mc_sb_printf(sb, "    if (d < %lld) q[x] = mc_ld(", (long long)a->d);
    view_at(c, a->q, "ic", "d");
    mc_sb_puts(sb, ");\n  }\n"
                   "#pragma unroll\n"
                   "  for (int x = 0; x < MC_DVG; ++x) o[x] = 0.0f;\n"
                   "  float m = -MC_INF, l = 0.0f;\n"
                   "  for (int j0 = jlo; j0 < jhi; j0 += MC_BN) {\n"
                   "    __syncthreads();\n"
                   "    for (int e = tid; e < MC_BN * MC_G * MC_DPG; e += 128) {\n"
                   "      const int r = e / (MC_G * MC_DPG), d = e - r * (MC_G * MC_DPG), j = j0 + r;\n"
                   "      float x = 0.0f;\n");
    mc_sb_printf(sb, "      if (j < jhi && d < %lld) x = mc_ld(", (long long)a->d);
    view_at(c, a->k, "j", "d");
    mc_sb_puts(sb, ");\n"
                   "      sK[r * MC_KS + (d / MC_DPG) * (MC_DPG + 4) + d % MC_DPG] = x;\n"
                   "    }\n"
                   "    for (int e = tid; e < MC_BN * MC_G * MC_DVG; e += 128) {\n"
                   "      const int r = e / (MC_G * MC_DVG), d = e - r * (MC_G * MC_DVG), j = j0 + r;\n"
                   "      float x = 0.0f;\n");
    mc_sb_printf(sb, "      if (j < jhi && d < %lld) x = mc_ld(", (long long)a->dv);
    view_at(c, a->v, "j", "d");
    mc_sb_puts(sb, ");\n"
                   "      sV[r * MC_VS + (d / MC_DVG) * (MC_DVG + 4) + d % MC_DVG] = x;\n"
                   "    }\n"
                   "    __syncthreads();\n"
                   "    const int jend = min(j0 + MC_BN, jhi);\n"
                   "    float s[MC_BN];\n"
                   "    float mx = -MC_INF;\n"
                   "#pragma unroll\n"
                   "    for (int jj = 0; jj < MC_BN; ++jj) {\n"
                   "      const float4 *kr = reinterpret_cast<const float4 *>(sK + jj * MC_KS + h * (MC_DPG + 4));\n"
                   "      float acc = 0.0f;\n"
                   "#pragma unroll\n"
                   "      for (int x = 0; x < MC_DPG / 4; ++x) {\n"
                   "        const float4 kv = kr[x];\n"
                   "        acc = fmaf(q[4 * x], kv.x, acc);\n"
                   "        acc = fmaf(q[4 * x + 1], kv.y, acc);\n"
                   "        acc = fmaf(q[4 * x + 2], kv.z, acc);\n"
                   "        acc = fmaf(q[4 * x + 3], kv.w, acc);\n"
                   "      }\n"
                   "#pragma unroll\n"
                   "      for (int w = MC_G / 2; w > 0; w >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, w);\n"
                   "      s[jj] = acc;\n"
                   "    }\n"
                   "    /* a full tile keeps its raw scores: the scale goes into the exponent (cs) */\n"
                   "    const bool full = mc_full(j0, jend);\n"
                   "    const float cs = full ? MC_SCALE : 1.0f;\n"
                   "    if (!full) {\n"
                   "#pragma unroll\n"
                   "      for (int jj = 0; jj < MC_BN; ++jj) {\n"
                   "        const int j = j0 + jj;\n"
                   "        s[jj] = j < jend ? mc_steps(s[jj], i, j) : -MC_INF;\n"
                   "      }\n"
                   "    }\n"
                   "#pragma unroll\n"
                   "    for (int jj = 0; jj < MC_BN; ++jj) mx = fmaxf(mx, s[jj]);\n"
                   "    const float mn = fmaxf(m, mx * cs);\n"
                   "    const float alpha = m == mn ? 1.0f : expf(m - mn), u = mn == -MC_INF ? 0.0f : mn;\n"
                   "    m = mn;\n"
                   "    float ls = 0.0f;\n"
                   "#pragma unroll\n"
                   "    for (int jj = 0; jj < MC_BN; ++jj) {\n"
                   "      s[jj] = expf(fmaf(s[jj], cs, -u));\n"
                   "      ls += s[jj];\n"
                   "    }\n"
                   "    l = l * alpha + ls;\n"
                   "#pragma unroll\n"
                   "    for (int x = 0; x < MC_DVG; ++x) o[x] *= alpha;\n"
                   "#pragma unroll\n"
                   "    for (int jj = 0; jj < MC_BN; ++jj) {\n"
                   "      const float4 *vr = reinterpret_cast<const float4 *>(sV + jj * MC_VS + h * (MC_DVG + 4));\n"
                   "      const float p = s[jj];\n"
                   "#pragma unroll\n"
                   "      for (int x = 0; x < MC_DVG / 4; ++x) {\n"
                   "        const float4 vv = vr[x];\n"
                   "        o[4 * x] = fmaf(p, vv.x, o[4 * x]);\n"
                   "        o[4 * x + 1] = fmaf(p, vv.y, o[4 * x + 1]);\n"
                   "        o[4 * x + 2] = fmaf(p, vv.z, o[4 * x + 2]);\n"
                   "        o[4 * x + 3] = fmaf(p, vv.w, o[4 * x + 3]);\n"
                   "      }\n"
                   "    }\n"
                   "  }\n"
                   "  const float inv = 1.0f / l;\n"
                   "#pragma unroll\n"
                   "  for (int x = 0; x < MC_DVG; ++x) {\n"
                   "    const int col = h * MC_DVG + x;\n");
    mc_sb_printf(sb, "    if (i < %s && col < %lld) mc_store(i, col, o[x] * inv);\n  }\n  (void)nrows;\n}\n",
                 tq, (long long)a->dv);
    c->out->block = 128;
    c->out->grid[0] = grid;
    c->out->grid[1] = 1;
    c->out->smem = 0;
    c->out->scheme = "attention-fma";
    return true;
}

/* A lambda loading MC_BN rows of f32 operand view v (rows r0 + 0.., valid below rlim, columns
 * below `cols`, zeros elsewhere up to `colsp`) into shared memory of row stride `ld` floats:
 * cp.async in 16-byte chunks where the rows allow, plain loads otherwise. */
static void emit_fma_loader(actx *c, const char *name, int v, int64_t cols, int64_t colsp, bool async)
{
    mc_strbuf *sb = c->sb;
    const kir_view *w = &c->k->views[v];
    int p = c->view_param[v];
    mc_sb_printf(sb, "  auto %s = [&](float *dst, int r0, int rlim) {\n", name);
    if (async) {
        mc_sb_printf(sb, "    for (int e = tid; e < MC_BN * %lld; e += MC_NT) {\n", (long long)(colsp / 4));
        mc_sb_printf(sb, "      const int r = e / %lld, d = (e - r * %lld) * 4, row = r0 + r;\n", (long long)(colsp / 4),
                     (long long)(colsp / 4));
        mc_sb_printf(sb, "      const bool ok = row < rlim && d < %lld;\n", (long long)cols);
        char x[48];
        mc_sb_printf(sb, "      const float *src = ok ? p%d + ob%d + (%s)row * (%s)%s + d : p%d;\n", p, v, c->I, c->I,
                     dim_raw(c, w->stride[c->nb], x, sizeof x), p);
        mc_sb_printf(sb, "      mc_cp16(dst + r * %lld + d, src, ok ? 16 : 0);\n    }\n  };\n", (long long)colsp);
        return;
    }
    mc_sb_printf(sb, "    for (int e = tid; e < MC_BN * %lld; e += MC_NT) {\n", (long long)colsp);
    mc_sb_printf(sb, "      const int r = e / %lld, d = e - r * %lld, row = r0 + r;\n", (long long)colsp, (long long)colsp);
    mc_sb_printf(sb, "      float x = 0.0f;\n      if (row < rlim && d < %lld) x = mc_ld(", (long long)cols);
    view_at(c, v, "row", "d");
    mc_sb_printf(sb, ");\n      dst[r * %lld + d] = x;\n    }\n  };\n", (long long)colsp);
}

/* Where the register-blocked FMA kernel applies: head sizes up to 80 (its q and output slices
 * take 2 * 4 * ceil(d / 16) * 4 registers a thread: 160 at d = 80; larger ones spill). */
static bool fma_split_applies(const kir_attention *a)
{
    return a->d <= 80 && a->dv <= 80;
}

/* The register-blocked FMA kernel (f32; see the top): a group of 4 lanes owns 4 query rows.
 * Lane h of a group holds, for each of the 4 rows, the head-dimension chunks 4h, 4h + 16,
 * 4h + 32, ... (4 floats each) of q and of the output: every K or V value a lane reads from
 * shared memory (float4, the group's 4 lanes reading 64 consecutive bytes of one key row, every
 * group the same row: one broadcast wavefront) feeds 4 FMAs, one per row. Register k of lane h
 * holds row k ^ h of the group, so that
 *   - a score is reduced and scattered in 3 shuffles with no selects: after
 *     a0 += a2 (from lane h ^ 2) and a1 += a3 (from h ^ 2), s = a0 + a1 (from h ^ 1) is the
 *     whole score of row h, the lane's own row: the mask, the online softmax and its exp run
 *     once per (row, key), not once per lane;
 *   - the probability and the rescaling factor of register k's row come from lane h ^ k
 *     (__shfl_xor_sync by k).
 * K and V tiles of 32 keys are double-buffered (cp.async where rows are 16-byte chunks); a warp
 * (32 rows) skips the tiles its own rows rule out (causal: above its diagonal), and the
 * full-tile test is made per warp. MINIC_CUDA_ATTN_F32=old picks the previous kernel. */
static bool render_fma_split(actx *c)
{
    const kir_attention *a = &c->k->attn;
    mc_strbuf *sb = c->sb;
    int64_t dp = (a->d + 15) / 16 * 16, dvp = (a->dv + 15) / 16 * 16;
    int nt = 128;
    /* experiments: MINIC_CUDA_ATTN_F32_ROWS=64 takes 64 rows (threads) per CTA; MINIC_CUDA_ATTN_MINB=N
     * asks for N CTAs per SM (236 registers a thread at d = 64 give 2; N = 3 caps them at 168
     * and spills, per ptxas for sm_90) */
    const char *er = getenv("MINIC_CUDA_ATTN_F32_ROWS"), *eb = getenv("MINIC_CUDA_ATTN_MINB");
    if (er && atoi(er) == 64)
        nt = 64;
    if (eb && atoi(eb) > 0 && atoi(eb) <= 8)
        c->minb = atoi(eb);
    bool async = c->t->sm >= 80;
    c->threads = nt;
    bool kasync = async && chunked_by(c, a->k, a->d, 4), vasync = async && chunked_by(c, a->v, a->dv, 4);
    if (kasync || vasync)
        mc_sb_puts(sb, mc_cuda_cp_helpers);
    else
        mc_sb_puts(sb, "MC_D void mc_cp_commit() {}\nMC_D void mc_cp_wait1() {}\n");
    mc_sb_printf(sb, "#define MC_NT %d\n#define MC_BN 32\n#define MC_DP %lld\n#define MC_DVP %lld\n", nt, (long long)dp,
                 (long long)dvp);
    emit_signature(c);
    int64_t grid = 0;
    char tq[64], last[96];
    dim_int(c, a->tq, tq, sizeof tq);
    last_query(c, last, sizeof last);
    mc_sb_puts(sb, "  __shared__ __align__(16) float sK[2 * MC_BN * MC_DP];\n"
                   "  __shared__ __align__(16) float sV[2 * MC_BN * MC_DVP];\n"
                   "  const int tid = (int)threadIdx.x, h = tid & 3;\n");
    emit_tile_order(c, nt, &grid);
    mc_sb_puts(sb, "  /* the CTA's rows from i0; the group's from ig; the lane's own row i; the warp's from w0 */\n"
                   "  const int i0 = qt_ * MC_NT, ig = i0 + (tid & ~3), i = ig + h, w0 = i0 + (tid & ~31);\n");
    mc_sb_printf(sb, "  const int nrows = min(MC_NT, %s - i0);\n", tq);
    emit_batch_offsets(c, "bid_");
    emit_key_range(c);
    emit_steps(c);
    emit_full(c, "w0", "32");
    if (!emit_store(c))
        return false;
    emit_fma_loader(c, "load_k", a->k, a->d, dp, kasync);
    emit_fma_loader(c, "load_v", a->v, a->dv, dvp, vasync);
    mc_sb_puts(sb, "  float q[4][MC_DP / 4], o[4][MC_DVP / 4];\n"
                   "#pragma unroll\n"
                   "  for (int k = 0; k < 4; ++k) {\n");
    mc_sb_printf(sb, "    const int r = min(ig + (k ^ h), %s); /* rows past Tq: computed, never stored */\n", last);
    mc_sb_puts(sb, "#pragma unroll\n"
                   "    for (int x = 0; x < MC_DP / 4; ++x) {\n"
                   "      const int d = (x >> 2) * 16 + h * 4 + (x & 3);\n"
                   "      q[k][x] = 0.0f;\n");
    mc_sb_printf(sb, "      if (d < %lld) q[k][x] = mc_ld(", (long long)a->d);
    view_at(c, a->q, "r", "d");
    mc_sb_puts(sb, ");\n    }\n"
                   "#pragma unroll\n"
                   "    for (int x = 0; x < MC_DVP / 4; ++x) o[k][x] = 0.0f;\n"
                   "  }\n"
                   "  float m = -MC_INF, l = 0.0f;\n"
                   "  const int ntiles = jhi > jlo ? (jhi - jlo + MC_BN - 1) / MC_BN : 0;\n"
                   "  if (ntiles > 0) { load_k(sK, jlo, jhi); load_v(sV, jlo, jhi); }\n"
                   "  mc_cp_commit();\n"
                   "  for (int it = 0; it < ntiles; ++it) {\n"
                   "    const int j0 = jlo + it * MC_BN, jend = min(j0 + MC_BN, jhi);\n"
                   "    if (it + 1 < ntiles) {\n"
                   "      load_k(sK + ((it + 1) & 1) * MC_BN * MC_DP, j0 + MC_BN, jhi);\n"
                   "      load_v(sV + ((it + 1) & 1) * MC_BN * MC_DVP, j0 + MC_BN, jhi);\n"
                   "    }\n"
                   "    mc_cp_commit();\n"
                   "    mc_cp_wait1();\n"
                   "    __syncthreads();\n"
                   "    const float *cK = sK + (it & 1) * MC_BN * MC_DP, *cV = sV + (it & 1) * MC_BN * MC_DVP;\n");
    if (a->skip) {
        /* the warp's rows [w0, w0 + 32) keep keys in [w0 + skip_lo, w0 + 31 + skip_hi] only */
        mc_sb_printf(sb, "    const bool live = (long long)j0 <= (long long)w0 + 31 + (%lldLL) &&\n"
                         "                      (long long)j0 + MC_BN - 1 >= (long long)w0 + (%lldLL);\n",
                     (long long)a->skip_hi, (long long)a->skip_lo);
    } else {
        mc_sb_puts(sb, "    const bool live = true;\n");
    }
    mc_sb_puts(sb, "    if (live) { /* the same for the whole warp: its shuffles see every lane */\n"
                   "      float s[MC_BN];\n"
                   "#pragma unroll\n"
                   "      for (int jj = 0; jj < MC_BN; ++jj) {\n"
                   "        const float4 *kr = reinterpret_cast<const float4 *>(cK + jj * MC_DP) + h;\n"
                   "        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;\n"
                   "#pragma unroll\n"
                   "        for (int x = 0; x < MC_DP / 16; ++x) {\n"
                   "          const float4 kv = kr[4 * x];\n"
                   "#define MC_DOT(A, K) A = fmaf(q[K][4 * x], kv.x, A); A = fmaf(q[K][4 * x + 1], kv.y, A); \\\n"
                   "                  A = fmaf(q[K][4 * x + 2], kv.z, A); A = fmaf(q[K][4 * x + 3], kv.w, A);\n"
                   "          MC_DOT(a0, 0) MC_DOT(a1, 1) MC_DOT(a2, 2) MC_DOT(a3, 3)\n"
                   "#undef MC_DOT\n"
                   "        }\n"
                   "        a0 += __shfl_xor_sync(0xffffffffu, a2, 2);\n"
                   "        a1 += __shfl_xor_sync(0xffffffffu, a3, 2);\n"
                   "        s[jj] = a0 + __shfl_xor_sync(0xffffffffu, a1, 1);\n"
                   "      }\n"
                   "      /* a full tile keeps its raw scores: the scale goes into the exponent (cs) */\n"
                   "      const bool full = mc_full(j0, jend);\n"
                   "      const float cs = full ? MC_SCALE : 1.0f;\n"
                   "      if (!full) {\n"
                   "#pragma unroll\n"
                   "        for (int jj = 0; jj < MC_BN; ++jj) {\n"
                   "          const int j = j0 + jj;\n"
                   "          s[jj] = j < jend ? mc_steps(s[jj], i, j) : -MC_INF;\n"
                   "        }\n"
                   "      }\n"
                   "      float mx = -MC_INF;\n"
                   "#pragma unroll\n"
                   "      for (int jj = 0; jj < MC_BN; ++jj) mx = fmaxf(mx, s[jj]);\n"
                   "      const float mn = fmaxf(m, mx * cs);\n"
                   "      const float alpha = m == mn ? 1.0f : expf(m - mn), u = mn == -MC_INF ? 0.0f : mn;\n"
                   "      m = mn;\n"
                   "      float ls = 0.0f;\n"
                   "#pragma unroll\n"
                   "      for (int jj = 0; jj < MC_BN; ++jj) {\n"
                   "        s[jj] = expf(fmaf(s[jj], cs, -u));\n"
                   "        ls += s[jj];\n"
                   "      }\n"
                   "      l = l * alpha + ls;\n"
                   "#pragma unroll\n"
                   "      for (int k = 0; k < 4; ++k) {\n"
                   "        const float ak = k ? __shfl_xor_sync(0xffffffffu, alpha, k) : alpha;\n"
                   "#pragma unroll\n"
                   "        for (int x = 0; x < MC_DVP / 4; ++x) o[k][x] *= ak;\n"
                   "      }\n"
                   "#pragma unroll\n"
                   "      for (int jj = 0; jj < MC_BN; ++jj) {\n"
                   "        const float4 *vr = reinterpret_cast<const float4 *>(cV + jj * MC_DVP) + h;\n"
                   "        const float p[4] = {s[jj], __shfl_xor_sync(0xffffffffu, s[jj], 1),\n"
                   "                            __shfl_xor_sync(0xffffffffu, s[jj], 2), __shfl_xor_sync(0xffffffffu, s[jj], 3)};\n"
                   "#pragma unroll\n"
                   "        for (int x = 0; x < MC_DVP / 16; ++x) {\n"
                   "          const float4 vv = vr[4 * x];\n"
                   "#pragma unroll\n"
                   "          for (int k = 0; k < 4; ++k) {\n"
                   "            o[k][4 * x] = fmaf(p[k], vv.x, o[k][4 * x]);\n"
                   "            o[k][4 * x + 1] = fmaf(p[k], vv.y, o[k][4 * x + 1]);\n"
                   "            o[k][4 * x + 2] = fmaf(p[k], vv.z, o[k][4 * x + 2]);\n"
                   "            o[k][4 * x + 3] = fmaf(p[k], vv.w, o[k][4 * x + 3]);\n"
                   "          }\n"
                   "        }\n"
                   "      }\n"
                   "    }\n"
                   "    __syncthreads();\n"
                   "  }\n"
                   "  const float inv = 1.0f / l; /* no key left: 0 / 0, NaN as the unfused softmax */\n"
                   "#pragma unroll\n"
                   "  for (int k = 0; k < 4; ++k) {\n"
                   "    const float ik = k ? __shfl_xor_sync(0xffffffffu, inv, k) : inv;\n"
                   "    const int r = ig + (k ^ h);\n"
                   "#pragma unroll\n"
                   "    for (int x = 0; x < MC_DVP / 4; ++x) {\n"
                   "      const int col = (x >> 2) * 16 + h * 4 + (x & 3);\n");
    mc_sb_printf(sb, "      if (r < %s && col < %lld) mc_store(r, col, o[k][x] * ik);\n    }\n  }\n  (void)nrows;\n}\n",
                 tq, (long long)a->dv);
    c->out->block = nt;
    c->out->grid[0] = grid;
    c->out->grid[1] = 1;
    c->out->smem = 0;
    c->out->scheme = "attention-fma-split";
    return true;
}

/* ---- the decode kernel ------------------------------------------------------------------------ */

/* Queries per (batch entry) up to which the decode kernel applies. Each query costs a lane 16
 * registers (its q slice and output slice, 8 columns each) and its scores; at 4 the loads of
 * two keys in flight, q, o and the scores stay under ~128 registers a thread. Every query
 * reuses the same K and V rows, so with Tq <= 4 the kernel stays bound by reading the cache
 * (f32, d 64: 4 * 2 * (64 + 64) flops per 512 bytes of K and V = 2 flops a byte, where an H200's
 * FMA units do about 14), while the flash kernels' 64-query tiles would leave 60 of 64 rows idle
 * and run one CTA per batch entry. */
#define DECODE_MAX_TQ 4

/* The decode kernel's lanes per key (a group): each lane holds 8 columns of q, of a key row
 * and of the output, so G * 8 >= max(d, dv). */
static int decode_group(const kir_attention *a)
{
    int64_t wide = a->d > a->dv ? a->d : a->dv;
    return wide <= 64 ? 8 : wide <= 128 ? 16 : 32;
}

static bool decode_applies(const kir_attention *a)
{
    const char *e = getenv("MINIC_CUDA_ATTN_DECODE");
    if (e && strcmp(e, "0") == 0)
        return false;
    return !mc_dim_is_sym(a->tq) && a->tq <= DECODE_MAX_TQ && (a->d > a->dv ? a->d : a->dv) <= 256;
}

/* Elements of view v per vector load in the decode kernel: 16 bytes (4 f32 or 8 halves) where
 * rows are 16-byte chunks (chunked_by), else 1 (plain loads through mc_ld). */
static int decode_vec(const actx *c, int v, int64_t cols)
{
    mc_dtype dt = view_dtype(c, v);
    int per = dt == MC_F32 ? 4 : (dt == MC_F16 || dt == MC_BF16) ? 8 : 0;
    return per > 0 && chunked_by(c, v, cols, per) ? per : 1;
}

/* The lane's 8 columns of row `row` of view v (vec elements per load, see decode_vec) into
 * float dst[8]: column (x * MC_G + gl) * vec + e is dst[x * vec + e]; zeros past `cols` or
 * where `ok` is false (nothing is read there). */
static void emit_decode_row(actx *c, int v, int vec, int64_t cols, const char *row, const char *ok, const char *dst)
{
    mc_strbuf *sb = c->sb;
    const kir_view *w = &c->k->views[v];
    int p = c->view_param[v];
    char x[48];
    if (vec == 1) {
        mc_sb_puts(sb, "#pragma unroll\n      for (int x = 0; x < 8; ++x) {\n        const int col = x * MC_G + gl;\n");
        mc_sb_printf(sb, "        %s[x] = (%s) && col < %lld ? mc_ld(", dst, ok, (long long)cols);
        view_at(c, v, row, "col");
        mc_sb_puts(sb, ") : 0.0f;\n      }\n");
        return;
    }
    mc_sb_printf(sb, "#pragma unroll\n      for (int x = 0; x < %d; ++x) {\n", 8 / vec);
    mc_sb_printf(sb, "        const int col = (x * MC_G + gl) * %d;\n", vec);
    mc_sb_puts(sb, vec == 4 ? "        float4 t = make_float4(0.0f, 0.0f, 0.0f, 0.0f);\n"
                            : "        uint4 t = make_uint4(0u, 0u, 0u, 0u);\n");
    mc_sb_printf(sb, "        if ((%s) && col < %lld) t = *reinterpret_cast<const %s *>(&p%d[ob%d + (%s)(%s) * (%s)%s + col]);\n",
                 ok, (long long)cols, vec == 4 ? "float4" : "uint4", p, v, c->I, row, c->I,
                 dim_raw(c, w->stride[c->nb], x, sizeof x));
    if (vec == 4) {
        mc_sb_printf(sb, "        %s[4 * x] = t.x; %s[4 * x + 1] = t.y; %s[4 * x + 2] = t.z; %s[4 * x + 3] = t.w;\n",
                     dst, dst, dst, dst);
    } else {
        bool bf = view_dtype(c, v) == MC_BF16;
        mc_sb_printf(sb, "        const %s *h = reinterpret_cast<const %s *>(&t);\n", bf ? "__nv_bfloat162" : "__half2",
                     bf ? "__nv_bfloat162" : "__half2");
        mc_sb_printf(sb, "#pragma unroll\n        for (int e = 0; e < 4; ++e) {\n"
                         "          const float2 f = %s(h[e]);\n"
                         "          %s[8 * x + 2 * e] = f.x;\n          %s[8 * x + 2 * e + 1] = f.y;\n        }\n",
                     bf ? "__bfloat1622float2" : "__half22float2", dst, dst);
    }
    mc_sb_puts(sb, "      }\n");
}

/* With run-time sizes: the key range [jlo_, jhi_) of the bands, as render_decode computes it
 * for the grid, from Tk read when the kernel runs, and the chunks: split_n_ per batch entry (the
 * grid's, so that the host alone decides how many) of chunk_ keys, a multiple of MC_NG. The host
 * rounded its chunk the same way before it counted the chunks, so split_n_ chunks of chunk_
 * keys cover the range whichever way the rounding falls. */
static void emit_decode_chunks(actx *c)
{
    const kir_attention *a = &c->k->attn;
    char tk[64], braw[48];
    mc_cuda_size(&c->z, c->k->shape, c->nb, 1, braw, sizeof braw);
    mc_sb_printf(c->sb, "  const int tk_ = %s;\n", dim_int(c, a->tk, tk, sizeof tk));
    if (a->skip && a->skip_lo > 0)
        mc_sb_printf(c->sb, "  const int jlo_ = (int)min((long long)tk_, %lldLL);\n", (long long)a->skip_lo);
    else
        mc_sb_puts(c->sb, "  const int jlo_ = 0;\n");
    if (a->skip && a->skip_hi <= INT32_MAX) /* larger: past every Tk (at most 2^22) */
        mc_sb_printf(c->sb, "  const int jhi_ = (int)max(0LL, min((long long)tk_, %lldLL));\n",
                     (long long)(a->tq + a->skip_hi));
    else
        mc_sb_puts(c->sb, "  const int jhi_ = tk_;\n");
    mc_sb_printf(c->sb, "  const int nkeys_ = max(jhi_ - jlo_, 0), split_n_ = (int)gridDim.x / (int)%s;\n"
                        "  const int chunk_ = ((nkeys_ + split_n_ - 1) / split_n_ + MC_NG - 1) / MC_NG * MC_NG;\n",
                 braw);
}

/* The decode kernel ("flash-decoding"; the choice is in mc_cuda_render_attention): a few
 * queries per batch entry (Tq <= DECODE_MAX_TQ), typically one token's query over a KV cache.
 * The keys of each batch entry are cut into MC_SPLIT chunks, one CTA of 4 warps per (batch
 * entry, chunk), so that even batch 1 with 12 heads keeps the GPU's SMs reading. In a CTA a
 * group of MC_G lanes takes one key at a time (keys grp, grp + MC_NG, ... of the chunk, MC_U of
 * them loaded at once: their K and V rows in flight together); each lane holds 8 columns of
 * each query, of the key's K and V rows and of its output rows, so a score is 8 FMAs a lane and
 * log2(MC_G) shuffles. Each group keeps its own running max m, sum l and unnormalised output o
 * per query (the online softmax: the same rescaling as the flash kernels, a factor of exactly
 * 1 where the max did not move, so that a query with no key yet keeps l = 0 and not NaN); the
 * groups of a warp merge by shuffles, the 4 warps through shared memory. With one chunk the
 * CTA stores o / l. Otherwise each CTA writes its (m, l, o) to a partial buffer of the module
 * (__device__ globals: every kernel of a program runs on its one stream, one after another,
 * so the identical layers that share a module share them safely), and the CTA that finishes
 * a batch entry last (a counter per batch entry, reset by that CTA for the next run) merges the
 * chunks in chunk order: the result does not depend on which CTA came last. All in one kernel,
 * so a CUDA graph replays it like any other. Merging scales by exp(m_part - m): a query with no
 * key in any chunk has l = 0 and gets 0 / 0 = NaN, as the unfused softmax does.
 *
 * It honours what the flash kernels do: the score steps in order (scale, bands, boolean and
 * additive masks loaded at (query, key)), the key range the bands leave (MC_JLO, MC_JHI: keys
 * outside it are never read), the views' batch, row and column strides and offsets (16-byte
 * vector loads where rows are 16-byte chunks, plain loads otherwise), and the row block (the
 * store through any view, with its conversion).
 *
 * The floor: every kept key's K and V rows are read once, (d + dv) * element size bytes per
 * key and batch entry, plus q, the masks and the output (small). GPT-2 small's decode step at a
 * 256-entry cache, batch 1 (12 heads, d 64): f32 12 * 256 * 128 * 4 = 1.5 MiB per layer, about
 * 0.33 us at an H200's ~4.8 TB/s; bf16 half of it. At such sizes the kernel is bound by a round
 * of DRAM latency (each CTA's keys are loaded at once) and the launch, not by bandwidth. */
static bool render_decode(actx *c)
{
    const kir_attention *a = &c->k->attn;
    mc_strbuf *sb = c->sb;
    bool sized = c->z.dims != NULL;
    int G = decode_group(a), NG = 128 / G, U = a->tq <= 2 ? 4 : 2;
    int vk = decode_vec(c, a->k, a->d), vv = decode_vec(c, a->v, a->dv);
    int64_t batch = c->out->grid[1], tk = a->tk;
    if (sized && mc_dim_is_sym(tk) && !mc_dims_eval(c->kp->dims, tk, c->z.values, &tk))
        c->z.error = true;
    /* the keys some query keeps by the bands: [jlo, jhi) (the flash kernels' emit_key_range
     * with i0 = 0, nrows = tq); this binding's, for the grid */
    int64_t jlo = 0, jhi = tk;
    if (a->skip) {
        if (a->skip_lo > 0)
            jlo = a->skip_lo < tk ? a->skip_lo : tk;
        if (a->skip_hi < tk)
            jhi = a->tq + a->skip_hi < jhi ? a->tq + a->skip_hi : jhi;
    }
    int64_t nkeys = jhi > jlo ? jhi - jlo : 0;
    /* chunks: enough CTAs for about two per SM, each at least 32 keys, a multiple of MC_NG */
    int64_t sms = c->t->num_sms > 0 ? c->t->num_sms : 1;
    int64_t want = (2 * sms + batch - 1) / batch, most = (nkeys + 31) / 32;
    int64_t nsplit = want < most ? want : most;
    /* experiments: MINIC_CUDA_ATTN_DECODE_SPLITS=N caps the chunks per batch entry at N */
    const char *es = getenv("MINIC_CUDA_ATTN_DECODE_SPLITS");
    if (es && atoi(es) > 0 && nsplit > atoi(es))
        nsplit = atoi(es);
    /* with run-time sizes the partial buffer is sized for every binding: at most 4 chunks per
     * SM in all (want's batch * ceil(2 sms / batch) stays below that up to batch 2 sms) */
    int64_t most_parts = 4 * sms;
    if (sized && batch * nsplit > most_parts)
        nsplit = most_parts / batch;
    if (nsplit < 1)
        nsplit = 1;
    int64_t chunk = (nkeys + nsplit - 1) / nsplit;
    chunk = (chunk + NG - 1) / NG * NG;
    nsplit = chunk > 0 ? (nkeys + chunk - 1) / chunk : 1;
    if (nsplit < 1)
        nsplit = 1;
    c->threads = 128;
    mc_sb_printf(sb, "#define MC_G %d\n#define MC_NG %d\n#define MC_U %d\n#define MC_TQ %lld\n#define MC_DV %lld\n"
                     "#define MC_DVP %d\n",
                 G, NG, U, (long long)a->tq, (long long)a->dv, 8 * G);
    if (sized) /* the binding's chunking, read when the kernel runs (emit_decode_chunks) */
        mc_sb_printf(sb, "#define MC_SPLIT split_n_\n#define MC_CHUNK chunk_\n#define MC_JLO jlo_\n#define MC_JHI jhi_\n"
                         "/* per (batch entry, chunk, query): m, l, then o[MC_DV]; at most %lld chunks in all */\n"
                         "__device__ float mc_part[%lld];\n__device__ unsigned mc_count[%lld];\n",
                     (long long)most_parts, (long long)(most_parts * a->tq * (a->dv + 2)), (long long)(most_parts / 2));
    else
        mc_sb_printf(sb, "#define MC_SPLIT %lld\n#define MC_CHUNK %lld\n#define MC_JLO %lld\n#define MC_JHI %lld\n",
                     (long long)nsplit, (long long)chunk, (long long)jlo, (long long)jhi);
    if (!sized && nsplit > 1)
        mc_sb_printf(sb, "/* per (batch entry, chunk, query): m, l, then o[MC_DV] */\n"
                         "__device__ float mc_part[%lld];\n__device__ unsigned mc_count[%lld];\n",
                     (long long)(batch * nsplit * a->tq * (a->dv + 2)), (long long)batch);
    emit_signature(c);
    mc_sb_puts(sb, "  __shared__ float sM[4][MC_TQ], sL[4][MC_TQ], sO[4][MC_TQ][MC_DVP];\n"
                   "  const int tid = (int)threadIdx.x, warp = tid >> 5, lane = tid & 31, gl = lane % MC_G, grp = tid / MC_G;\n");
    if (sized)
        emit_decode_chunks(c);
    mc_sb_puts(sb, "  const int split = (int)blockIdx.x % MC_SPLIT, bid_ = (int)blockIdx.x / MC_SPLIT;\n"
                   "  (void)split;\n");
    emit_batch_offsets(c, "bid_");
    emit_steps(c);
    if (!emit_store(c))
        return false;
    /* q at the K rows' columns */
    mc_sb_puts(sb, "  float q[MC_TQ][8], o[MC_TQ][8], m[MC_TQ], l[MC_TQ];\n"
                   "#pragma unroll\n"
                   "  for (int i = 0; i < MC_TQ; ++i) {\n"
                   "    m[i] = -MC_INF;\n    l[i] = 0.0f;\n"
                   "#pragma unroll\n"
                   "    for (int x = 0; x < 8; ++x) {\n");
    mc_sb_printf(sb, "      const int col = (x / %d * MC_G + gl) * %d + x %% %d;\n", vk, vk, vk);
    mc_sb_printf(sb, "      q[i][x] = col < %lld ? mc_ld(", (long long)a->d);
    view_at(c, a->q, "i", "col");
    mc_sb_puts(sb, ") : 0.0f;\n"
                   "      o[i][x] = 0.0f;\n"
                   "    }\n"
                   "  }\n"
                   "  const int j0 = MC_JLO + split * MC_CHUNK, j1 = min(j0 + MC_CHUNK, MC_JHI);\n"
                   "  for (int jb = j0; jb < j1; jb += MC_NG * MC_U) { /* the same bounds for every lane */\n"
                   "    float kr[MC_U][8], vr[MC_U][8];\n"
                   "#pragma unroll\n"
                   "    for (int u = 0; u < MC_U; ++u) {\n"
                   "      const int j = jb + u * MC_NG + grp;\n");
    emit_decode_row(c, a->k, vk, a->d, "j", "j < j1", "kr[u]");
    emit_decode_row(c, a->v, vv, a->dv, "j", "j < j1", "vr[u]");
    mc_sb_puts(sb, "    }\n"
                   "#pragma unroll\n"
                   "    for (int i = 0; i < MC_TQ; ++i) {\n"
                   "      float s[MC_U], mx = -MC_INF;\n"
                   "#pragma unroll\n"
                   "      for (int u = 0; u < MC_U; ++u) {\n"
                   "        float acc = 0.0f;\n"
                   "#pragma unroll\n"
                   "        for (int x = 0; x < 8; ++x) acc = fmaf(q[i][x], kr[u][x], acc);\n"
                   "#pragma unroll\n"
                   "        for (int w = MC_G / 2; w > 0; w >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, w);\n"
                   "        const int j = jb + u * MC_NG + grp;\n"
                   "        /* keys past the chunk load no mask */\n"
                   "        s[u] = j < j1 ? mc_steps(acc, i, j) : -MC_INF;\n"
                   "        mx = fmaxf(mx, s[u]);\n"
                   "      }\n"
                   "      const float mn = fmaxf(m[i], mx);\n"
                   "      const float alpha = m[i] == mn ? 1.0f : expf(m[i] - mn), sub = mn == -MC_INF ? 0.0f : mn;\n"
                   "      m[i] = mn;\n"
                   "      l[i] *= alpha;\n"
                   "#pragma unroll\n"
                   "      for (int x = 0; x < 8; ++x) o[i][x] *= alpha;\n"
                   "#pragma unroll\n"
                   "      for (int u = 0; u < MC_U; ++u) {\n"
                   "        const float p = expf(s[u] - sub);\n"
                   "        l[i] += p;\n"
                   "#pragma unroll\n"
                   "        for (int x = 0; x < 8; ++x) o[i][x] = fmaf(p, vr[u][x], o[i][x]);\n"
                   "      }\n"
                   "    }\n"
                   "  }\n"
                   "  /* the groups of a warp merge (lanes gl of every group end with the warp's sums) */\n"
                   "#pragma unroll\n"
                   "  for (int off = MC_G; off < 32; off <<= 1)\n"
                   "#pragma unroll\n"
                   "    for (int i = 0; i < MC_TQ; ++i) {\n"
                   "      const float mo = __shfl_xor_sync(0xffffffffu, m[i], off), lo = __shfl_xor_sync(0xffffffffu, l[i], off);\n"
                   "      const float mn = fmaxf(m[i], mo);\n"
                   "      const float fa = m[i] == mn ? 1.0f : expf(m[i] - mn), fb = mo == mn ? 1.0f : expf(mo - mn);\n"
                   "      m[i] = mn;\n"
                   "      l[i] = l[i] * fa + lo * fb;\n"
                   "#pragma unroll\n"
                   "      for (int x = 0; x < 8; ++x) o[i][x] = o[i][x] * fa + __shfl_xor_sync(0xffffffffu, o[i][x], off) * fb;\n"
                   "    }\n"
                   "  if (lane < MC_G) {\n"
                   "#pragma unroll\n"
                   "    for (int i = 0; i < MC_TQ; ++i) {\n"
                   "      if (lane == 0) { sM[warp][i] = m[i]; sL[warp][i] = l[i]; }\n"
                   "#pragma unroll\n"
                   "      for (int x = 0; x < 8; ++x)\n");
    mc_sb_printf(sb, "        sO[warp][i][(x / %d * MC_G + gl) * %d + x %% %d] = o[i][x];\n", vv, vv, vv);
    mc_sb_puts(sb, "    }\n"
                   "  }\n"
                   "  __syncthreads();\n"
                   "  /* the 4 warps merge: a factor of exactly 1 where a warp's max is the max, so that a\n"
                   "   * query with no key keeps l = 0 (then 0 / 0 = NaN, as the unfused softmax) */\n"
                   "  for (int e = tid; e < MC_TQ * MC_DV; e += 128) {\n"
                   "    const int i = e / MC_DV, col = e - i * MC_DV;\n"
                   "    float M = -MC_INF, L = 0.0f, O = 0.0f;\n"
                   "#pragma unroll\n"
                   "    for (int w = 0; w < 4; ++w) M = fmaxf(M, sM[w][i]);\n"
                   "#pragma unroll\n"
                   "    for (int w = 0; w < 4; ++w) {\n"
                   "      const float f = sM[w][i] == M ? 1.0f : expf(sM[w][i] - M);\n"
                   "      L = fmaf(sL[w][i], f, L);\n"
                   "      O = fmaf(sO[w][i][col], f, O);\n"
                   "    }\n");
    if (!sized && nsplit == 1) {
        mc_sb_puts(sb, "    mc_store(i, col, O / L);\n  }\n}\n");
    } else {
        if (sized) /* one chunk or several, as this binding's grid has it */
            mc_sb_puts(sb, "    if (MC_SPLIT == 1) {\n      mc_store(i, col, O / L);\n      continue;\n    }\n");
        mc_sb_puts(sb, "    float *pp = mc_part + ((bid_ * MC_SPLIT + split) * MC_TQ + i) * (MC_DV + 2);\n"
                       "    if (col == 0) { pp[0] = M; pp[1] = L; }\n"
                       "    pp[2 + col] = O;\n"
                       "  }\n");
        if (sized)
            mc_sb_puts(sb, "  if (MC_SPLIT == 1) return; /* the same for every thread of the CTA */\n");
        mc_sb_puts(sb, "  /* the last CTA of the batch entry merges the chunks, in chunk order */\n"
                       "  __shared__ bool sLast;\n"
                       "  __threadfence();\n"
                       "  __syncthreads();\n"
                       "  if (tid == 0) sLast = atomicAdd(&mc_count[bid_], 1u) == (unsigned)(MC_SPLIT - 1);\n"
                       "  __syncthreads();\n"
                       "  if (!sLast) return;\n"
                       "  __threadfence();\n"
                       "  for (int e = tid; e < MC_TQ * MC_DV; e += 128) {\n"
                       "    const int i = e / MC_DV, col = e - i * MC_DV;\n"
                       "    const float *pb = mc_part + (bid_ * MC_SPLIT * MC_TQ + i) * (MC_DV + 2);\n"
                       "    float M = -MC_INF, L = 0.0f, O = 0.0f;\n"
                       "    for (int sp = 0; sp < MC_SPLIT; ++sp) M = fmaxf(M, __ldcg(pb + sp * MC_TQ * (MC_DV + 2)));\n"
                       "    for (int sp = 0; sp < MC_SPLIT; ++sp) {\n"
                       "      const float *ps = pb + sp * MC_TQ * (MC_DV + 2);\n"
                       "      const float ms = __ldcg(ps);\n"
                       "      const float f = ms == M ? 1.0f : expf(ms - M);\n"
                       "      L = fmaf(__ldcg(ps + 1), f, L);\n"
                       "      O = fmaf(__ldcg(ps + 2 + col), f, O);\n"
                       "    }\n"
                       "    mc_store(i, col, O / L);\n"
                       "  }\n"
                       "  if (tid == 0) mc_count[bid_] = 0u; /* for the next run */\n"
                       "}\n");
    }
    c->out->block = 128;
    c->out->grid[0] = batch * nsplit;
    c->out->grid[1] = 1;
    c->out->smem = 0;
    c->out->scheme = "attention-decode";
    return true;
}

mc_status mc_cuda_render_attention(const kir_program *kp, int ki, const mc_cuda_target *t, const int *align,
                                   const int64_t *values, mc_cuda_code *out)
{
    const kir_kernel *k = &kp->kernels[ki];
    const kir_attention *a = &k->attn;
    const mc_dims *dims = values ? kp->dims : NULL;
    actx c = {.kp = kp, .k = k, .t = t, .align = align, .sb = &out->src, .out = out, .nb = k->rank - 2,
              .threads = 128, .z = {.dims = dims, .values = values, .out = out}};
    if (dims && (mc_dim_is_sym(a->d) || mc_dim_is_sym(a->dv)))
        return mc_fail(MC_ERR_SYSTEM, "internal error: attention kernel %s has a symbolic head size", k->name);
    c.view_param = malloc(sizeof *c.view_param * (size_t)(k->nviews + 1));
    out->param = calloc((size_t)k->nviews + 1, sizeof *out->param);
    if (!c.view_param || !out->param) {
        free(c.view_param);
        mc_cuda_code_free(out);
        return mc_fail(MC_ERR_SYSTEM, "out of memory rendering CUDA kernel %s", k->name);
    }
    /* parameters: each buffer once, in the order of its first view; then the sizes */
    int64_t maxoff = 0;
    for (int v = 0; v < k->nviews; v++) {
        int b = k->views[v].buffer, p = 0;
        while (p < out->nparams && out->param[p] != b)
            p++;
        if (p == out->nparams)
            out->param[out->nparams++] = b;
        c.view_param[v] = p;
        int64_t n = kp->buffers[b].numel;
        if (dims && mc_dim_is_sym(n) && !mc_dims_max(dims, n, &n))
            n = INT64_MAX / 2; /* no maximum: 64-bit offsets */
        if (n > maxoff)
            maxoff = n;
    }
    c.I = maxoff + ((int64_t)1 << 24) >= ((int64_t)1 << 31) ? "long long" : "int";
    int64_t batch = 1;
    c.tq_v = a->tq;
    for (int d = 0; d < c.nb; d++) {
        int64_t x = k->shape[d];
        if (dims && mc_dim_is_sym(x) && !mc_dims_eval(dims, x, values, &x))
            c.z.error = true;
        batch *= x;
    }
    if (dims && mc_dim_is_sym(a->tq) && !mc_dims_eval(dims, a->tq, values, &c.tq_v))
        c.z.error = true;
    c.batch_v = batch;
    size_t n = 0;
    for (; k->name[n] && n + 1 < sizeof out->entry; n++) {
        char ch = k->name[n];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
        out->entry[n] = ok ? ch : '_';
    }
    out->entry[n] = '\0';
    mc_dtype dq = view_dtype(&c, a->q);
    bool tc = t->sm >= 80 && (dq == MC_F16 || dq == MC_BF16) && view_dtype(&c, a->k) == dq &&
              view_dtype(&c, a->v) == dq;
    bool decode = decode_applies(a);
    mc_sb_puts(c.sb, mc_cuda_prelude);
    out->body = c.sb->len;
    const char *kind = decode ? "decode, FMA" : tc ? "tensor cores" : "FMA";
    if (dims) /* no binding's sizes in the source */
        mc_sb_printf(c.sb, "/* minic kernel %s (attention, %s): queries and keys read when it runs, d %lld, dv %lld */\n"
                           "struct mc_sz { long long v[%d]; };\n",
                     out->entry, kind, (long long)a->d, (long long)a->dv, MC_CUDA_MAX_SIZES);
    else
        mc_sb_printf(c.sb, "/* minic kernel %s (attention, %s): [%lld batch x %lld queries] x %lld keys, d %lld, dv %lld */\n",
                     out->entry, kind, (long long)batch, (long long)a->tq, (long long)a->tk,
                     (long long)a->d, (long long)a->dv);
    if (dims)
        out->param[out->nparams++] = MC_CUDA_PARAM_SIZES;
    out->grid[1] = batch; /* the renderers read it, then make the grid one-dimensional */
    /* f32: the register-blocked kernel where it applies; MINIC_CUDA_ATTN_F32=old keeps the
     * one-row-per-lane-group kernel (the default until 2026-11-27) reachable */
    const char *ef = getenv("MINIC_CUDA_ATTN_F32");
    bool split = !tc && fma_split_applies(a) && !(ef && strcmp(ef, "old") == 0);
    /* a few queries (a decode step over a KV cache): the decode kernel, for every dtype;
     * MINIC_CUDA_ATTN_DECODE=0 keeps the kernels above (the only ones until 2026-11-28) */
    bool ok = decode ? render_decode(&c) : tc ? render_tc(&c) : split ? render_fma_split(&c) : render_fma(&c);
    out->grid[2] = 1;
    out->vec = 1;
    if (c.z.error)
        out->nsizes = -1; /* mc_cuda_render_sized falls back */
    free(c.view_param);
    if (c.sb->oom || !ok) {
        mc_cuda_code_free(out);
        return c.sb->oom ? mc_fail(MC_ERR_SYSTEM, "out of memory rendering CUDA kernel %s", k->name)
                         : mc_fail(MC_ERR_SYSTEM, "internal error: attention kernel %s has a row block the CUDA "
                                                  "renderer cannot express", k->name);
    }
    return MC_OK;
}
