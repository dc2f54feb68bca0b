/* Attention kernels (KIR_ATTENTION) as LLVM IR: flash attention on the CPU.
 *
 * The output's rows are queries; a unit of parallel work is one batch entry (batch and head)
 * and a block of BQ = NQ vectors of queries, and the queries lie along the vector lanes, so
 * that the online softmax is vertical arithmetic (no horizontal reduction anywhere):
 *
 *   per unit (batch b, queries i0 .. i0+BQ):          <- threads take units, the costly first
 *     Qt[d][r] = q[b, i0 + r, d]                       packed once, f32, transposed
 *     m[r] = -inf, l[r] = 0, Ot[c][r] = 0
 *     for each block of BK keys j0.. that some query of the unit keeps (bands: causal skips
 *     the blocks above the diagonal):
 *       St[jj][r] = steps(sum_d k[b, j0+jj, d] * Qt[d][r])   MK keys x NQ vectors in registers,
 *                                                          k's elements broadcast from memory
 *       m' = max(m, max_jj St)   alpha = exp(m - m')   (1 where m == m', so -inf stays -inf)
 *       Pt[jj][r] = exp(St[jj][r] - m')   l = l alpha + sum_jj Pt   (exp_softmax_ftz: -inf -> 0,
 *                                          and so does anything under 2^-126: no subnormals)
 *       Ot[c][r] = Ot[c][r] alpha + sum_jj v[b, j0+jj, c] * Pt[jj][r]   MC columns x NQ vectors
 *     out[b, i0 + r, c] = Ot[c][r] / l[r]               the kernel's row block (its store)
 *
 * k and v are read in place through their strides (a slice of a QKV projection costs nothing)
 * and converted from f16/bf16 as they are broadcast; only q is packed (a leading scale step
 * folded in). The next tile's k rows and the block's v rows are prefetched: a row is a few
 * cache lines, too short for the hardware's stream prefetchers. Under a band, the vectors of
 * queries that keep none of a tile's keys skip its products, and the exp and PV loops run in
 * segments of keys by the first vector that keeps them, so a diagonal block costs about half.
 * The output is stored with the columns along the lanes where its columns are contiguous
 * (L x L tiles of Ot transposed in registers). A query whose scores
 * are all -inf keeps m = -inf and l = 0, so its output is 0/0 = NaN, as the unfused softmax
 * gives; a NaN or +inf score makes its p, hence l, NaN. Rows past Tq in the last block are
 * computed from the last query (clamped) and never stored; keys past the block's end are
 * -inf and left out of the PV sum. The score steps are constants; sizes and strides too, but
 * in a kernel from a symbolic list (llvm_ctx.dims), where any of them may be read when it runs.
 */
#include "backends/cpu/llvm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define B (c->b)

enum { NQMAX = 4, MKMAX = 16, ACCMAX = 32 }; /* bounds of the plan's nq, mk and mc, and of mk nq and mc nq */
#define TARGET_BK 64        /* keys per block: scores of one block, BK x BQ floats, stay in L1 */

typedef struct attn_plan {
    int nb;                  /* batch rank */
    int64_t nbatch, nqb;     /* batch entries; query blocks per entry */
    int L, nq, bq, mk, mc, bk; /* lanes; query vectors per unit, and queries (nq L); keys per QK tile;
                                columns per PV tile; keys per block */
    int first_step;          /* 1 where the first score step, a multiplication, is folded into q's packing */
    const kir_attention *a;
    mc_dtype qt, kt, vt;     /* operand dtypes */
    int64_t qs_i, qs_d, ks_j, ks_d, vs_j, vs_c; /* operand strides */
    int64_t qt_off, st_off, ot_off, m_off, l_off, floats; /* scratch layout, in floats */
} attn_plan;

static LLVMValueRef i64c(llvm_ctx *c, int64_t v) { return llvm_const_i64(c, v); }

static LLVMValueRef min64(llvm_ctx *c, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, a, b, ""), a, b, "");
}

static LLVMValueRef max64(llvm_ctx *c, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSGT, a, b, ""), a, b, "");
}

static LLVMValueRef add64(llvm_ctx *c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWAdd(B, a, b, ""); }
/* a times a stride or size b: a constant, or read at run time (llvm_size) */
static LLVMValueRef mul64(llvm_ctx *c, LLVMValueRef a, int64_t b) { return LLVMBuildNSWMul(B, a, llvm_size(c, b), ""); }
/* m times a stride s, as an i64: a constant where s is one, else read at run time */
static LLVMValueRef times64(llvm_ctx *c, int64_t s, int64_t m)
{
    return mc_dim_is_sym(s) ? LLVMBuildNSWMul(B, llvm_size(c, s), i64c(c, m), "") : i64c(c, m * s);
}
/* d - 1 for a size d (a constant, or read at run time) */
static LLVMValueRef last64(llvm_ctx *c, int64_t d) { return LLVMBuildSub(B, llvm_size(c, d), i64c(c, 1), ""); }

static LLVMTypeRef vtype(llvm_ctx *c, int L) { return LLVMVectorType(c->t_f32, (unsigned)L); }

/* A pointer to float `off` of the scratch area. */
static LLVMValueRef sptr(llvm_ctx *c, LLVMValueRef scratch, LLVMValueRef off)
{
    return LLVMBuildInBoundsGEP2(B, c->t_f32, scratch, &off, 1, "");
}

static LLVMValueRef load_vec(llvm_ctx *c, LLVMValueRef scratch, LLVMValueRef off, int L)
{
    LLVMValueRef p = LLVMBuildBitCast(B, sptr(c, scratch, off), LLVMPointerType(vtype(c, L), 0), "");
    LLVMValueRef v = LLVMBuildLoad2(B, vtype(c, L), p, "");
    LLVMSetAlignment(v, 4);
    return v;
}

static void store_vec(llvm_ctx *c, LLVMValueRef scratch, LLVMValueRef off, LLVMValueRef v, int L)
{
    LLVMValueRef p = LLVMBuildBitCast(B, sptr(c, scratch, off), LLVMPointerType(vtype(c, L), 0), "");
    LLVMSetAlignment(LLVMBuildStore(B, v, p), 4);
}

static LLVMValueRef load_f(llvm_ctx *c, LLVMValueRef scratch, LLVMValueRef off)
{
    LLVMValueRef v = LLVMBuildLoad2(B, c->t_f32, sptr(c, scratch, off), "");
    LLVMSetAlignment(v, 4);
    return v;
}

static void store_f(llvm_ctx *c, LLVMValueRef scratch, LLVMValueRef off, LLVMValueRef v)
{
    LLVMSetAlignment(LLVMBuildStore(B, v, sptr(c, scratch, off)), 4);
}

/* One element of a buffer of dtype d at element offset off, as f32 (bool: 0 or 1). */
static LLVMValueRef load_elem(llvm_ctx *c, LLVMValueRef base, mc_dtype d, LLVMValueRef off)
{
    LLVMTypeRef t = d == MC_F32 ? c->t_f32 : d == MC_BOOL ? c->t_i8 : c->t_i16;
    LLVMValueRef p = LLVMBuildInBoundsGEP2(B, t, base, &off, 1, "");
    LLVMValueRef v = LLVMBuildLoad2(B, t, p, "");
    LLVMSetAlignment(v, (unsigned)mc_dtype_size(d));
    if (d == MC_F32)
        return v;
    if (d == MC_BOOL)
        return LLVMBuildUIToFP(B, v, c->t_f32, "");
    return llvm_half_bits_to_f32(c, d, v, 1);
}

static LLVMValueRef fmuladd(llvm_ctx *c, LLVMValueRef a, LLVMValueRef b, LLVMValueRef d)
{
    LLVMTypeRef t = LLVMTypeOf(a);
    LLVMValueRef args[3] = {a, b, d};
    return llvm_call_intrinsic(c, "llvm.fmuladd", &t, 1, args, 3);
}

/* max(a, b) as compare and select: a NaN b is dropped (its p is NaN anyway: see the top). */
static LLVMValueRef fmax_(llvm_ctx *c, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGT, b, a, ""), b, a, "");
}

static mc_status make_plan(llvm_ctx *c, const kir_kernel *k, attn_plan *g)
{
    memset(g, 0, sizeof *g);
    const kir_attention *a = &k->attn;
    g->a = a;
    g->nb = k->rank - 2;
    if (g->nb < 0 || k->nblocks != 1 || k->blocks[0].loop || k->nreds != 0)
        return mc_fail(MC_ERR_SYSTEM, "internal error: attention kernel %s must have one row block", k->name);
    g->nbatch = 1; /* 0 where a batch dimension is symbolic (llvm_ctx.dims): counted per binding */
    for (int d = 0; d < g->nb; d++)
        g->nbatch = mc_dim_is_sym(k->shape[d]) ? 0 : g->nbatch * k->shape[d];
    g->L = c->native_lanes;
    bool wide = c->target->vector_bits >= 512; /* 32 vector registers */
    g->nq = 4;
    g->mk = wide ? 6 : 3;
    g->mc = wide ? 6 : 3;
    g->bq = g->nq * g->L;
    g->bk = (TARGET_BK + g->mk - 1) / g->mk * g->mk;
    g->nqb = mc_dim_is_sym(a->tq) ? 0 : (a->tq + g->bq - 1) / g->bq; /* 0: ceil(Tq / bq) when it runs */
    const kir_view *q = &k->views[a->q], *kv = &k->views[a->k], *v = &k->views[a->v];
    g->qt = c->kp->buffers[q->buffer].dtype;
    g->kt = c->kp->buffers[kv->buffer].dtype;
    g->vt = c->kp->buffers[v->buffer].dtype;
    g->qs_i = q->stride[g->nb], g->qs_d = q->stride[g->nb + 1];
    g->ks_j = kv->stride[g->nb], g->ks_d = kv->stride[g->nb + 1];
    g->vs_j = v->stride[g->nb], g->vs_c = v->stride[g->nb + 1];
    g->first_step = a->nsteps > 0 && a->steps[0].kind == KIR_STEP_MUL;
    g->qt_off = 0;
    g->st_off = g->qt_off + a->d * g->bq;
    g->ot_off = g->st_off + (int64_t)g->bk * g->bq;
    g->m_off = g->ot_off + a->dv * g->bq;
    g->l_off = g->m_off + g->bq;
    g->floats = g->l_off + g->bq;
    return MC_OK;
}

/* The lanes l of a vector whose l >= lo (or l <= hi): i64 scalar bounds clamped to the lanes,
 * compared with the lane numbers as i32. */
static LLVMValueRef lanes_from(llvm_ctx *c, int L, LLVMValueRef lo, bool upper)
{
    LLVMValueRef lanes[64];
    for (int l = 0; l < L; l++)
        lanes[l] = llvm_const_i32(c, l, 1);
    LLVMValueRef b = upper ? max64(c, min64(c, lo, i64c(c, L - 1)), i64c(c, -1)) : max64(c, min64(c, lo, i64c(c, L)), i64c(c, 0));
    b = llvm_splat(c, LLVMBuildTrunc(B, b, c->t_i32, ""), L);
    return LLVMBuildICmp(B, upper ? LLVMIntSLE : LLVMIntSGE, LLVMConstVector(lanes, (unsigned)L), b, "");
}

/* The score steps from g->first_step on one vector s of queries ibase + lane (ibase an i64
 * scalar; iclamp: those indices clamped to the last query, an i64 vector) and key j (an i64
 * scalar). */
static LLVMValueRef apply_steps(llvm_ctx *c, const kir_kernel *k, const attn_plan *g, LLVMValueRef s,
                                LLVMValueRef ibase, LLVMValueRef iclamp, LLVMValueRef j, LLVMValueRef *bases,
                                LLVMValueRef *batch_off)
{
    int L = g->L;
    for (int t = g->first_step; t < g->a->nsteps; t++) {
        const kir_attn_step *st = &g->a->steps[t];
        LLVMValueRef fill = llvm_const_f32(c, st->value, L);
        switch (st->kind) {
        case KIR_STEP_MUL: s = LLVMBuildFMul(B, s, llvm_const_f32(c, st->value, L), ""); break;
        case KIR_STEP_DIV: s = LLVMBuildFDiv(B, s, llvm_const_f32(c, st->value, L), ""); break;
        case KIR_STEP_BAND: { /* lo <= j - i <= hi, i = ibase + lane: lane <= x - lo, lane >= x - hi */
            LLVMValueRef x = LLVMBuildSub(B, j, ibase, ""), keep = NULL;
            if (st->lo > -KIR_BAND_OPEN)
                keep = lanes_from(c, L, LLVMBuildSub(B, x, i64c(c, st->lo), ""), true);
            if (st->hi < KIR_BAND_OPEN) {
                LLVMValueRef h = lanes_from(c, L, LLVMBuildSub(B, x, i64c(c, st->hi), ""), false);
                keep = keep ? LLVMBuildAnd(B, keep, h, "") : h;
            }
            if (keep)
                s = LLVMBuildSelect(B, keep, s, fill, "");
            break;
        }
        case KIR_STEP_WHERE: case KIR_STEP_ADD: {
            const kir_view *mv = &k->views[st->view];
            mc_dtype md = c->kp->buffers[mv->buffer].dtype;
            LLVMValueRef base = llvm_buffer_base(c, LLVMGetParam(c->fn, 0), bases, mv->buffer);
            LLVMValueRef off = add64(c, batch_off[st->view], mul64(c, j, mv->stride[g->nb + 1]));
            LLVMValueRef m;
            if (mv->stride[g->nb] == 0) {
                m = llvm_splat(c, load_elem(c, base, md, off), L);
            } else { /* one element per query: queries are strided in a [Tq, Tk] mask */
                LLVMValueRef offs = LLVMBuildAdd(B, llvm_splat(c, off, L),
                                                 LLVMBuildMul(B, iclamp, llvm_splat(c, llvm_size(c, mv->stride[g->nb]), L), ""), "");
                m = LLVMGetUndef(vtype(c, L));
                for (int l = 0; l < L; l++) {
                    LLVMValueRef o = LLVMBuildExtractElement(B, offs, llvm_const_i32(c, l, 1), "");
                    m = LLVMBuildInsertElement(B, m, load_elem(c, base, md, o), llvm_const_i32(c, l, 1), "");
                }
            }
            if (st->kind == KIR_STEP_ADD) {
                s = LLVMBuildFAdd(B, s, m, "");
            } else {
                LLVMValueRef set = LLVMBuildFCmp(B, LLVMRealONE, m, llvm_const_f32(c, 0, L), "");
                if (!st->keep)
                    set = LLVMBuildNot(B, set, "");
                s = LLVMBuildSelect(B, set, s, fill, "");
            }
            break;
        }
        }
    }
    return s;
}

/* Prefetch the row of `len` elements of dtype dt at element offset off of base into the
 * caches, a line at a time (a prefetch never faults; the offsets stay inside the view anyway). */
static void prefetch_row(llvm_ctx *c, LLVMValueRef base, mc_dtype dt, LLVMValueRef off, int64_t len, int64_t stride)
{
    int64_t es = mc_dtype_size(dt), per_line = stride == 1 ? 64 / es : 1;
    LLVMTypeRef t = dt == MC_F32 ? c->t_f32 : dt == MC_BOOL ? c->t_i8 : c->t_i16;
    for (int64_t e = 0; e < len; e += per_line) {
        LLVMValueRef o = add64(c, off, times64(c, stride, e));
        LLVMValueRef ptr = LLVMBuildGEP2(B, t, base, &o, 1, "");
        LLVMValueRef args[4] = {LLVMBuildBitCast(B, ptr, c->t_ptr_i8, ""), llvm_const_i32(c, 0, 1),
                                llvm_const_i32(c, 3, 1), llvm_const_i32(c, 1, 1)};
        LLVMTypeRef pt8 = c->t_ptr_i8;
        llvm_call_intrinsic(c, "llvm.prefetch", &pt8, 1, args, 4);
    }
}

/* Under a band (a->skip: j - i <= skip_hi for every kept pair), the first vector of the unit's
 * queries that keeps key j: vector n holds the queries i0 + nL .. i0 + nL + L - 1, so it keeps
 * nothing of j when j - skip_hi - i0 > nL + L - 1; that is n < floor((j - skip_hi - i0) / L).
 * Clamped to [0, NQ - 1] (the unit's keys stop where its last vector's do). */
static LLVMValueRef first_vector(llvm_ctx *c, const attn_plan *g, LLVMValueRef j, LLVMValueRef i0)
{
    const int NQ = g->nq;
    LLVMValueRef t = LLVMBuildSub(B, j, add64(c, i0, i64c(c, g->a->skip_hi)), "");
    LLVMValueRef n = LLVMBuildSDiv(B, max64(c, t, i64c(c, 0)), i64c(c, g->L), "");
    return min64(c, n, i64c(c, NQ - 1));
}

/* St for keys [j0 + kt, j0 + kt + MK) of the block (those at or past jend: -inf), the block's
 * running max bmax[] updated. */
static void emit_qk_tile(llvm_ctx *c, const kir_kernel *k, const attn_plan *g, LLVMValueRef *bases,
                         LLVMValueRef *batch_off, LLVMValueRef scratch, LLVMValueRef j0, LLVMValueRef kt,
                         LLVMValueRef jend, LLVMValueRef *ibase, LLVMValueRef *iclamp, LLVMValueRef *accv,
                         LLVMValueRef *bmax, LLVMValueRef n0)
{
    const int L = g->L, MK = g->mk, NQ = g->nq;
    LLVMTypeRef vt = vtype(c, L);
    const kir_attention *a = g->a;
    LLVMValueRef kbase = llvm_buffer_base(c, LLVMGetParam(c->fn, 0), bases, k->views[a->k].buffer);
    LLVMValueRef j[MKMAX], krow[MKMAX];
    for (int m = 0; m < MK; m++) {
        j[m] = add64(c, j0, add64(c, kt, i64c(c, m)));
        LLVMValueRef jl = min64(c, j[m], LLVMBuildSub(B, jend, i64c(c, 1), "")); /* loads stay inside */
        krow[m] = add64(c, batch_off[a->k], mul64(c, jl, g->ks_j));
    }
    for (int i = 0; i < MK * NQ; i++)
        LLVMBuildStore(B, LLVMConstNull(vt), accv[i]);
    /* the next tile's rows of k (a row is a few lines, too short for the hardware's stream
     * prefetchers, and the first touch of each comes from L3 after a large GEMM) */
    for (int m = 0; m < MK; m++) {
        LLVMValueRef jn = min64(c, add64(c, j[m], i64c(c, MK)), last64(c, a->tk));
        prefetch_row(c, kbase, g->kt, add64(c, batch_off[a->k], mul64(c, jn, g->ks_j)), a->d, g->ks_d);
    }
    /* the products, for the vectors from n0 on (one loop per n0): those below keep none of the
     * tile's keys, and the band steps below make their scores -inf whatever the products */
    LLVMBasicBlockRef merge = NULL, cases[NQMAX];
    if (n0) {
        merge = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "kt_done");
        for (int n = 0; n < NQ; n++)
            cases[n] = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "kt_from");
        LLVMValueRef sw = LLVMBuildSwitch(B, n0, cases[0], NQ - 1);
        for (int n = 1; n < NQ; n++)
            LLVMAddCase(sw, i64c(c, n), cases[n]);
    }
    for (int nfirst = 0; nfirst < (n0 ? NQ : 1); nfirst++) {
        if (n0)
            LLVMPositionBuilderAtEnd(B, cases[nfirst]);
        llvm_loop D;
        llvm_loop_begin(c, &D, i64c(c, 0), i64c(c, a->d), i64c(c, 1), "d");
        LLVMValueRef qv[NQMAX];
        for (int n = nfirst; n < NQ; n++)
            qv[n] = load_vec(c, scratch, add64(c, i64c(c, g->qt_off + n * L), mul64(c, D.index, g->bq)), L);
        LLVMValueRef doff = mul64(c, D.index, g->ks_d);
        for (int m = 0; m < MK; m++) {
            LLVMValueRef kvl = llvm_splat(c, load_elem(c, kbase, g->kt, add64(c, krow[m], doff)), L);
            for (int n = nfirst; n < NQ; n++) {
                LLVMValueRef acc = LLVMBuildLoad2(B, vt, accv[m * NQ + n], "");
                LLVMBuildStore(B, fmuladd(c, kvl, qv[n], acc), accv[m * NQ + n]);
            }
        }
        llvm_loop_end(c, &D);
        if (n0)
            LLVMBuildBr(B, merge);
    }
    if (n0)
        LLVMPositionBuilderAtEnd(B, merge);
    LLVMValueRef neg_inf = llvm_const_f32(c, -INFINITY, L);
    for (int m = 0; m < MK; m++) {
        LLVMValueRef inside = llvm_splat(c, LLVMBuildICmp(B, LLVMIntSLT, j[m], jend, ""), L);
        for (int n = 0; n < NQ; n++) {
            LLVMValueRef s = LLVMBuildLoad2(B, vt, accv[m * NQ + n], "");
            s = apply_steps(c, k, g, s, ibase[n], iclamp[n], j[m], bases, batch_off);
            s = LLVMBuildSelect(B, inside, s, neg_inf, "");
            store_vec(c, scratch, add64(c, i64c(c, g->st_off + n * L), mul64(c, add64(c, kt, i64c(c, m)), g->bq)), s, L);
            LLVMBuildStore(B, fmax_(c, LLVMBuildLoad2(B, vt, bmax[n], ""), s), bmax[n]);
        }
    }
}

/* Ot[c0 .. c0+cols) += sum over the block's valid keys of v[j, c] * Pt[jj] (after Ot *= alpha). */
static void emit_pv_tile(llvm_ctx *c, const kir_kernel *k, const attn_plan *g, LLVMValueRef *bases,
                         LLVMValueRef *batch_off, LLVMValueRef scratch, LLVMValueRef j0, const LLVMValueRef *seg,
                         int nseg, LLVMValueRef c0, int cols, LLVMValueRef *alpha, LLVMValueRef *accv)
{
    const int L = g->L, NQ = g->nq;
    LLVMTypeRef vt = vtype(c, L);
    const kir_attention *a = g->a;
    LLVMValueRef vbase = llvm_buffer_base(c, LLVMGetParam(c->fn, 0), bases, k->views[a->v].buffer);
    LLVMValueRef ot = add64(c, i64c(c, g->ot_off), mul64(c, c0, g->bq)); /* Ot[c0][0] */
    for (int m = 0; m < cols; m++)
        for (int n = 0; n < NQ; n++) {
            LLVMValueRef o = load_vec(c, scratch, add64(c, ot, i64c(c, m * g->bq + n * L)), L);
            LLVMBuildStore(B, LLVMBuildFMul(B, o, alpha[n], ""), accv[m * NQ + n]);
        }
    /* segment s: the keys [seg[s], seg[s + 1]) of the block, which the vectors below s do not
     * keep (their p are 0) */
    for (int sg = 0; sg < nseg; sg++) {
        llvm_loop J;
        llvm_loop_begin(c, &J, seg[sg], seg[sg + 1], i64c(c, 1), "jj");
        LLVMValueRef pv[NQMAX] = {NULL};
        for (int n = sg; n < NQ; n++)
            pv[n] = load_vec(c, scratch, add64(c, i64c(c, g->st_off + n * L), mul64(c, J.index, g->bq)), L);
        LLVMValueRef vrow = add64(c, add64(c, batch_off[a->v], mul64(c, add64(c, j0, J.index), g->vs_j)), mul64(c, c0, g->vs_c));
        for (int m = 0; m < cols; m++) {
            LLVMValueRef vv = llvm_splat(c, load_elem(c, vbase, g->vt, add64(c, vrow, times64(c, g->vs_c, m))), L);
            for (int n = sg; n < NQ; n++) {
                LLVMValueRef acc = LLVMBuildLoad2(B, vt, accv[m * NQ + n], "");
                LLVMBuildStore(B, fmuladd(c, vv, pv[n], acc), accv[m * NQ + n]);
            }
        }
        llvm_loop_end(c, &J);
    }
    for (int m = 0; m < cols; m++)
        for (int n = 0; n < NQ; n++)
            store_vec(c, scratch, add64(c, ot, i64c(c, m * g->bq + n * L)), LLVMBuildLoad2(B, vt, accv[m * NQ + n], ""), L);
}

/* The kernel's row block at output (batch, i, col) with acc = value (width lanes along the
 * queries, or one element). */
static void emit_output(llvm_ctx *c, const kir_kernel *k, const attn_plan *g, LLVMValueRef *bases,
                        LLVMValueRef *batch_idx, LLVMValueRef *batch_off, LLVMValueRef i, LLVMValueRef col,
                        LLVMValueRef value, int width, LLVMValueRef *cur, LLVMValueRef *offs,
                        const int64_t (*strides)[MC_MAX_RANK])
{
    int nb = g->nb;
    llvm_point pt = {.width = width, .lane_dim = width > 1 ? nb : -1, .stride = strides, .view_offset = offs};
    for (int d = 0; d < nb; d++)
        pt.idx[d] = batch_idx[d];
    pt.idx[nb] = i;
    pt.idx[nb + 1] = col;
    for (int v = 0; v < k->nviews; v++)
        offs[v] = add64(c, batch_off[v], add64(c, mul64(c, i, strides[v][nb]), mul64(c, col, strides[v][nb + 1])));
    pt.acc = value;
    llvm_emit_block(c, k, 0, bases, &pt, cur, NULL, NULL);
}

/* Whether the output is stored with the columns along the vector lanes: where every stored
 * view's columns are contiguous. Ot holds the queries along the lanes; stored as they are, one
 * vector goes to BQ rows of the output, a scalar store each, and rows a multiple of 4 KiB
 * apart (a [B, T, H * D] layout such as the GPT-2 block's, 3 KiB a row) fall into a few L1
 * sets, so that each column's stores evict the lines the previous column wrote. */
static bool cols_along_lanes(const kir_kernel *k, const attn_plan *g)
{
    int ns = 0;
    for (int s = 0; s < k->nstores; s++) {
        const kir_view *v = &k->views[k->stores[s].view];
        if (v->stride[g->nb + 1] != 1)
            return false;
        ns++;
    }
    return ns > 0;
}

/* v[0 .. L) (row t: lanes along the other axis) transposed in place: L log2(L) shuffles, each
 * stage swapping the off-diagonal h x h blocks of every 2h x 2h block. */
static void transpose_vecs(llvm_ctx *c, LLVMValueRef *v, int L)
{
    LLVMValueRef lo[64], hi[64];
    for (int h = L / 2; h >= 1; h /= 2) {
        for (int l = 0; l < L; l++) {
            lo[l] = llvm_const_i32(c, (l & h) ? L + l - h : l, 1);
            hi[l] = llvm_const_i32(c, (l & h) ? L + l : l + h, 1);
        }
        LLVMValueRef mlo = LLVMConstVector(lo, (unsigned)L), mhi = LLVMConstVector(hi, (unsigned)L);
        for (int i = 0; i < L; i++) {
            if (i & h)
                continue;
            LLVMValueRef a = v[i], b = v[i + h];
            v[i] = LLVMBuildShuffleVector(B, a, b, mlo, "");
            v[i + h] = LLVMBuildShuffleVector(B, a, b, mhi, "");
        }
    }
}

/* out[b, i0 + r, c] = Ot[c][r] / l[r] for the columns [0, cols) (a multiple of L) of a full
 * query block: L x L tiles of Ot (columns x queries) scaled, transposed in registers, and
 * stored one query row at a time with the columns along the lanes. */
static void emit_output_transposed(llvm_ctx *c, const kir_kernel *k, const attn_plan *g, LLVMValueRef *bases,
                                   LLVMValueRef *batch_idx, LLVMValueRef *batch_off, LLVMValueRef scratch,
                                   LLVMValueRef i0, int64_t cols, LLVMValueRef *cur, LLVMValueRef *offs,
                                   const int64_t (*strides)[MC_MAX_RANK])
{
    int L = g->L, nb = g->nb;
    LLVMValueRef one = llvm_const_f32(c, 1, L);
    llvm_loop N, C;
    llvm_loop_begin(c, &N, i64c(c, 0), i64c(c, g->bq), i64c(c, L), "otn");
    LLVMValueRef inv = LLVMBuildFDiv(B, one, load_vec(c, scratch, add64(c, i64c(c, g->l_off), N.index), L), "");
    llvm_loop_begin(c, &C, i64c(c, 0), i64c(c, cols), i64c(c, L), "otc");
    LLVMValueRef v[64];
    LLVMValueRef base = add64(c, add64(c, i64c(c, g->ot_off), N.index), mul64(c, C.index, g->bq));
    for (int t = 0; t < L; t++)
        v[t] = LLVMBuildFMul(B, load_vec(c, scratch, add64(c, base, i64c(c, (int64_t)t * g->bq)), L), inv, "");
    transpose_vecs(c, v, L);
    for (int t = 0; t < L; t++) {
        LLVMValueRef i = add64(c, i0, add64(c, N.index, i64c(c, t)));
        llvm_point pt = {.width = L, .lane_dim = nb + 1, .stride = strides, .view_offset = offs};
        for (int d = 0; d < nb; d++)
            pt.idx[d] = batch_idx[d];
        pt.idx[nb] = i;
        pt.idx[nb + 1] = C.index;
        for (int w = 0; w < k->nviews; w++)
            offs[w] = add64(c, batch_off[w], add64(c, mul64(c, i, strides[w][nb]), mul64(c, C.index, strides[w][nb + 1])));
        pt.acc = v[t];
        llvm_emit_block(c, k, 0, bases, &pt, cur, NULL, NULL);
    }
    llvm_loop_end(c, &C);
    llvm_loop_end(c, &N);
}

mc_status llvm_emit_attention_kernel(llvm_ctx *c, const kir_kernel *k, llvm_kernel_info *info)
{
    attn_plan g;
    mc_status st = make_plan(c, k, &g);
    if (st != MC_OK)
        return st;
    const kir_attention *a = g.a;
    const int L = g.L, nb = g.nb, MK = g.mk, MCOL = g.mc, NQ = g.nq;
    LLVMTypeRef vt = vtype(c, L);
    llvm_begin_function(c, k->name);
    LLVMValueRef buffers = LLVMGetParam(c->fn, 0), begin = LLVMGetParam(c->fn, 1), end = LLVMGetParam(c->fn, 2);
    LLVMValueRef scratch = LLVMBuildBitCast(c->entry_b, LLVMGetParam(c->fn, 3), LLVMPointerType(c->t_f32, 0), "scratch");
    size_t nviews = (size_t)(k->nviews ? k->nviews : 1);
    LLVMValueRef *bases = calloc((size_t)c->kp->nbuffers + 1, sizeof *bases);
    LLVMValueRef *batch_off = calloc(nviews, sizeof *batch_off), *offs = calloc(nviews, sizeof *offs);
    LLVMValueRef *cur = calloc((size_t)(k->ncode ? k->ncode : 1), sizeof *cur);
    int64_t(*strides)[MC_MAX_RANK] = calloc(nviews, sizeof *strides);
    if (!bases || !batch_off || !offs || !cur || !strides) {
        free(bases), free(batch_off), free(offs), free(cur), free(strides);
        return mc_fail(MC_ERR_SYSTEM, "out of memory generating kernel %s", k->name);
    }
    for (int v = 0; v < k->nviews; v++)
        memcpy(strides[v], k->views[v].stride, sizeof strides[v]);
    LLVMValueRef qbase = llvm_buffer_base(c, buffers, bases, k->views[a->q].buffer);
    LLVMValueRef accv[ACCMAX], bmax[NQMAX], alpha_v[NQMAX], muse_v[NQMAX], lsum_v[NQMAX];
    for (int i = 0; i < ACCMAX; i++)
        accv[i] = llvm_entry_alloca(c, vt, "acc");
    for (int n = 0; n < NQ; n++) {
        bmax[n] = llvm_entry_alloca(c, vt, "bmax");
        alpha_v[n] = llvm_entry_alloca(c, vt, "alpha");
        muse_v[n] = llvm_entry_alloca(c, vt, "muse");
        lsum_v[n] = llvm_entry_alloca(c, vt, "lsum");
    }

    /* for u in [begin, end): (batch entry, query block), the costliest query blocks first */
    llvm_loop U;
    llvm_loop_begin(c, &U, begin, end, i64c(c, 1), "unit");
    LLVMValueRef nqb = g.nqb ? i64c(c, g.nqb)
                             : LLVMBuildSDiv(c->entry_b, LLVMBuildAdd(c->entry_b, llvm_size(c, a->tq), i64c(c, g.bq - 1), ""),
                                             i64c(c, g.bq), "nqb");
    LLVMValueRef qb = LLVMBuildSub(B, LLVMBuildSub(B, nqb, i64c(c, 1), ""), LLVMBuildSRem(B, U.index, nqb, ""), "qb");
    LLVMValueRef bt = LLVMBuildSDiv(B, U.index, nqb, "");
    LLVMValueRef batch_idx[MC_MAX_RANK];
    for (int d = nb - 1; d >= 0; d--) {
        batch_idx[d] = d == 0 ? bt : LLVMBuildSRem(B, bt, llvm_size(c, k->shape[d]), "");
        if (d > 0)
            bt = LLVMBuildSDiv(B, bt, llvm_size(c, k->shape[d]), "");
    }
    for (int v = 0; v < k->nviews; v++) {
        LLVMValueRef off = llvm_size(c, k->views[v].offset);
        for (int d = 0; d < nb; d++)
            off = add64(c, off, mul64(c, batch_idx[d], k->views[v].stride[d]));
        batch_off[v] = off;
    }
    LLVMValueRef i0 = mul64(c, qb, g.bq);
    LLVMValueRef nrows = min64(c, i64c(c, g.bq), LLVMBuildSub(B, llvm_size(c, a->tq), i0, ""));
    /* query indices along the lanes, and clamped to the last query for loads */
    LLVMValueRef ibase[NQMAX], iclamp[NQMAX];
    for (int n = 0; n < NQ; n++) {
        LLVMValueRef lanes[64];
        for (int l = 0; l < L; l++)
            lanes[l] = LLVMConstInt(c->t_i64, (unsigned long long)(n * L + l), 0);
        ibase[n] = add64(c, i0, i64c(c, n * L));
        LLVMValueRef ivec = LLVMBuildAdd(B, llvm_splat(c, i0, L), LLVMConstVector(lanes, (unsigned)L), "");
        LLVMValueRef last = llvm_splat(c, last64(c, a->tq), L);
        iclamp[n] = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSGT, ivec, last, ""), last, ivec, "");
    }

    /* Qt[d][r] = q[i0 + r, d] (rows past Tq: the last row): L x L tiles transposed in
     * registers where q is f32 with contiguous rows, else one element at a time */
    if (g.qt == MC_F32 && g.qs_d == 1 && a->d % L == 0) {
        llvm_loop N, Dc;
        llvm_loop_begin(c, &N, i64c(c, 0), i64c(c, g.bq), i64c(c, L), "qn");
        llvm_loop_begin(c, &Dc, i64c(c, 0), i64c(c, a->d), i64c(c, L), "qd");
        LLVMValueRef v[64];
        for (int t = 0; t < L; t++) {
            LLVMValueRef i = min64(c, add64(c, i0, add64(c, N.index, i64c(c, t))), last64(c, a->tq));
            LLVMValueRef off = add64(c, add64(c, batch_off[a->q], mul64(c, i, g.qs_i)), Dc.index);
            LLVMValueRef p = LLVMBuildInBoundsGEP2(B, c->t_f32, qbase, &off, 1, "");
            p = LLVMBuildBitCast(B, p, LLVMPointerType(vt, 0), "");
            v[t] = LLVMBuildLoad2(B, vt, p, "");
            LLVMSetAlignment(v[t], 4);
        }
        transpose_vecs(c, v, L);
        if (g.first_step)
            for (int u = 0; u < L; u++)
                v[u] = LLVMBuildFMul(B, v[u], llvm_const_f32(c, a->steps[0].value, L), "");
        LLVMValueRef base = add64(c, add64(c, i64c(c, g.qt_off), N.index), mul64(c, Dc.index, g.bq));
        for (int u = 0; u < L; u++)
            store_vec(c, scratch, add64(c, base, i64c(c, (int64_t)u * g.bq)), v[u], L);
        llvm_loop_end(c, &Dc);
        llvm_loop_end(c, &N);
    } else {
        llvm_loop R;
        llvm_loop_begin(c, &R, i64c(c, 0), i64c(c, g.bq), i64c(c, 1), "qr");
        LLVMValueRef i = min64(c, add64(c, i0, R.index), last64(c, a->tq));
        LLVMValueRef qrow = add64(c, batch_off[a->q], mul64(c, i, g.qs_i));
        llvm_loop Dl;
        llvm_loop_begin(c, &Dl, i64c(c, 0), i64c(c, a->d), i64c(c, 1), "qd");
        LLVMValueRef x = load_elem(c, qbase, g.qt, add64(c, qrow, mul64(c, Dl.index, g.qs_d)));
        if (g.first_step)
            x = LLVMBuildFMul(B, x, LLVMConstReal(c->t_f32, a->steps[0].value), "");
        store_f(c, scratch, add64(c, add64(c, i64c(c, g.qt_off), mul64(c, Dl.index, g.bq)), R.index), x);
        llvm_loop_end(c, &Dl);
        llvm_loop_end(c, &R);
    }
    /* m = -inf, l = 0, Ot = 0 */
    for (int n = 0; n < NQ; n++) {
        store_vec(c, scratch, i64c(c, g.m_off + n * L), llvm_const_f32(c, -INFINITY, L), L);
        store_vec(c, scratch, i64c(c, g.l_off + n * L), llvm_const_f32(c, 0, L), L);
    }
    {
        llvm_loop O;
        llvm_loop_begin(c, &O, i64c(c, 0), i64c(c, a->dv * g.bq), i64c(c, L), "oz");
        store_vec(c, scratch, add64(c, i64c(c, g.ot_off), O.index), llvm_const_f32(c, 0, L), L);
        llvm_loop_end(c, &O);
    }
    /* the keys some query of the unit keeps: [jlo, jhi) */
    LLVMValueRef jlo = i64c(c, 0), jhi = llvm_size(c, a->tk);
    if (a->skip) {
        jlo = max64(c, jlo, add64(c, i0, i64c(c, a->skip_lo)));
        jhi = min64(c, jhi, add64(c, add64(c, i0, nrows), i64c(c, a->skip_hi)));
    }
    llvm_loop J;
    llvm_loop_begin(c, &J, jlo, jhi, i64c(c, g.bk), "kb");
    LLVMValueRef j0 = J.index;
    LLVMValueRef nvalid = min64(c, i64c(c, g.bk), LLVMBuildSub(B, jhi, j0, ""));
    LLVMValueRef jend = add64(c, j0, nvalid);
    for (int n = 0; n < NQ; n++)
        LLVMBuildStore(B, llvm_const_f32(c, -INFINITY, L), bmax[n]);
    { /* the block's rows of v, read by the PV tiles after the scores */
        LLVMValueRef vbase = llvm_buffer_base(c, buffers, bases, k->views[a->v].buffer);
        llvm_loop V;
        llvm_loop_begin(c, &V, i64c(c, 0), nvalid, i64c(c, 1), "pfv");
        prefetch_row(c, vbase, g.vt, add64(c, batch_off[a->v], mul64(c, add64(c, j0, V.index), g.vs_j)), a->dv, g.vs_c);
        llvm_loop_end(c, &V);
    }
    {
        llvm_loop T;
        llvm_loop_begin(c, &T, i64c(c, 0), nvalid, i64c(c, MK), "kt");
        /* under a band, the tile's products only for the vectors that keep one of its keys */
        LLVMValueRef n0 = a->skip ? first_vector(c, &g, add64(c, j0, T.index), i0) : NULL;
        emit_qk_tile(c, k, &g, bases, batch_off, scratch, j0, T.index, jend, ibase, iclamp, accv, bmax, n0);
        llvm_loop_end(c, &T);
    }
    /* the new max, the rescaling of what came before, the max each exp subtracts */
    LLVMValueRef neg_inf = llvm_const_f32(c, -INFINITY, L), one = llvm_const_f32(c, 1, L), zero = llvm_const_f32(c, 0, L);
    for (int n = 0; n < NQ; n++) {
        LLVMValueRef m_old = load_vec(c, scratch, i64c(c, g.m_off + n * L), L);
        LLVMValueRef m_new = fmax_(c, m_old, LLVMBuildLoad2(B, vt, bmax[n], ""));
        LLVMValueRef same = LLVMBuildFCmp(B, LLVMRealOEQ, m_old, m_new, "");
        LLVMValueRef alpha = llvm_emit_exp_softmax_ftz(c, LLVMBuildFSub(B, m_old, m_new, ""), L);
        LLVMBuildStore(B, LLVMBuildSelect(B, same, one, alpha, ""), alpha_v[n]);
        LLVMValueRef empty = LLVMBuildFCmp(B, LLVMRealOEQ, m_new, neg_inf, "");
        LLVMBuildStore(B, LLVMBuildSelect(B, empty, zero, m_new, ""), muse_v[n]);
        store_vec(c, scratch, i64c(c, g.m_off + n * L), m_new, L);
        LLVMBuildStore(B, zero, lsum_v[n]);
    }
    /* The block's keys in segments by the first vector that keeps them (under a band): segment
     * s, keys [seg[s], seg[s + 1]), is nothing to the vectors below s, whose p are 0 there and
     * are neither computed nor summed nor multiplied */
    LLVMValueRef seg[NQMAX + 1];
    int nseg = a->skip ? NQ : 1;
    seg[0] = i64c(c, 0);
    seg[nseg] = nvalid;
    for (int n = 1; n < nseg; n++) /* the first key of the block that vector n - 1 does not keep */
        seg[n] = max64(c, seg[n - 1], min64(c, nvalid, LLVMBuildSub(B, add64(c, i0, i64c(c, a->skip_hi + (int64_t)n * L)), j0, "")));
    /* Pt = exp(St - m), and its sums */
    for (int sg = 0; sg < nseg; sg++) {
        llvm_loop P;
        llvm_loop_begin(c, &P, seg[sg], seg[sg + 1], i64c(c, 1), "pe");
        for (int n = sg; n < NQ; n++) {
            LLVMValueRef off = add64(c, i64c(c, g.st_off + n * L), mul64(c, P.index, g.bq));
            LLVMValueRef s = load_vec(c, scratch, off, L);
            LLVMValueRef p = llvm_emit_exp_softmax_ftz(c, LLVMBuildFSub(B, s, LLVMBuildLoad2(B, vt, muse_v[n], ""), ""), L);
            store_vec(c, scratch, off, p, L);
            LLVMBuildStore(B, LLVMBuildFAdd(B, LLVMBuildLoad2(B, vt, lsum_v[n], ""), p, ""), lsum_v[n]);
        }
        llvm_loop_end(c, &P);
    }
    LLVMValueRef alpha[NQMAX];
    for (int n = 0; n < NQ; n++) {
        alpha[n] = LLVMBuildLoad2(B, vt, alpha_v[n], "");
        LLVMValueRef l = load_vec(c, scratch, i64c(c, g.l_off + n * L), L);
        store_vec(c, scratch, i64c(c, g.l_off + n * L), fmuladd(c, l, alpha[n], LLVMBuildLoad2(B, vt, lsum_v[n], "")), L);
    }
    /* Ot = Ot alpha + V' Pt, MC columns at a time, then the columns left, by segments */
    int64_t full_cols = a->dv / MCOL * MCOL;
    if (full_cols > 0) {
        llvm_loop C;
        llvm_loop_begin(c, &C, i64c(c, 0), i64c(c, full_cols), i64c(c, MCOL), "pvc");
        emit_pv_tile(c, k, &g, bases, batch_off, scratch, j0, seg, nseg, C.index, MCOL, alpha, accv);
        llvm_loop_end(c, &C);
    }
    if (a->dv > full_cols)
        emit_pv_tile(c, k, &g, bases, batch_off, scratch, j0, seg, nseg, i64c(c, full_cols), (int)(a->dv - full_cols),
                     alpha, accv);
    llvm_loop_end(c, &J);

    /* out = Ot / l: vectors along the queries in a full block, one element at a time else */
    LLVMValueRef full = LLVMBuildICmp(B, LLVMIntEQ, nrows, i64c(c, g.bq), "");
    LLVMBasicBlockRef bfull = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "out_full");
    LLVMBasicBlockRef bedge = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "out_edge");
    LLVMBasicBlockRef bdone = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "out_done");
    LLVMBuildCondBr(B, full, bfull, bedge);
    LLVMPositionBuilderAtEnd(B, bfull);
    {
        LLVMValueRef inv[NQMAX];
        for (int n = 0; n < NQ; n++)
            inv[n] = LLVMBuildFDiv(B, one, load_vec(c, scratch, i64c(c, g.l_off + n * L), L), "");
        /* the columns in whole vectors: transposed in registers, stored along the columns */
        int64_t tcols = cols_along_lanes(k, &g) ? a->dv / L * L : 0;
        if (tcols > 0)
            emit_output_transposed(c, k, &g, bases, batch_idx, batch_off, scratch, i0, tcols, cur, offs,
                                   (const int64_t(*)[MC_MAX_RANK])strides);
        llvm_loop C;
        llvm_loop_begin(c, &C, i64c(c, tcols), i64c(c, a->dv), i64c(c, 1), "oc");
        for (int n = 0; n < NQ; n++) {
            LLVMValueRef o = load_vec(c, scratch, add64(c, i64c(c, g.ot_off + n * L), mul64(c, C.index, g.bq)), L);
            emit_output(c, k, &g, bases, batch_idx, batch_off, add64(c, i0, i64c(c, n * L)), C.index,
                        LLVMBuildFMul(B, o, inv[n], ""), L, cur, offs, (const int64_t(*)[MC_MAX_RANK])strides);
        }
        llvm_loop_end(c, &C);
    }
    LLVMBuildBr(B, bdone);
    LLVMPositionBuilderAtEnd(B, bedge);
    {
        llvm_loop R, C;
        llvm_loop_begin(c, &R, i64c(c, 0), nrows, i64c(c, 1), "er");
        LLVMValueRef inv = LLVMBuildFDiv(B, LLVMConstReal(c->t_f32, 1.0), load_f(c, scratch, add64(c, i64c(c, g.l_off), R.index)), "");
        llvm_loop_begin(c, &C, i64c(c, 0), i64c(c, a->dv), i64c(c, 1), "ec");
        LLVMValueRef o = load_f(c, scratch, add64(c, add64(c, i64c(c, g.ot_off), mul64(c, C.index, g.bq)), R.index));
        emit_output(c, k, &g, bases, batch_idx, batch_off, add64(c, i0, R.index), C.index, LLVMBuildFMul(B, o, inv, ""), 1,
                    cur, offs, (const int64_t(*)[MC_MAX_RANK])strides);
        llvm_loop_end(c, &C);
        llvm_loop_end(c, &R);
    }
    LLVMBuildBr(B, bdone);
    LLVMPositionBuilderAtEnd(B, bdone);
    llvm_loop_end(c, &U);
    llvm_finish_function(c);

    info->grain = 1;
    if (g.nbatch && g.nqb && !mc_dim_is_sym(a->tk)) {
        info->units = g.nbatch * g.nqb;
        int64_t flops = g.nbatch * a->tq * a->tk * (a->d + a->dv) * 2;
        info->serial = flops < (1 << 20) || info->units < 2;
    } else { /* units = batch.. * ceil(Tq / bq), for each binding (llvm_info_bind) */
        info->sized = true;
        info->units_const = 1;
        for (int d = 0; d < nb; d++) {
            info->units_dim[info->nunits_dims] = k->shape[d];
            info->units_div[info->nunits_dims++] = 1;
        }
        info->units_dim[info->nunits_dims] = a->tq;
        info->units_div[info->nunits_dims++] = g.bq;
    }
    info->scratch_bytes = g.floats * 4 + 64;
    free(bases), free(batch_off), free(offs), free(cur), free(strides);
    return MC_OK;
}
