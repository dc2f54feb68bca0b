/* Pointwise, copy and reduction kernels as LLVM IR loop nests, following the plan llvm_plan.c
 * makes of them (merged dimensions, rows, chunks, what the memory-bound kernels do):
 *
 *   pointwise  the last dimension is the loop; all earlier ones are "rows". The loop runs in
 *              vectors of `lanes` elements (two native vectors: AVX2 gives 16 floats; not
 *              unrolled further where the body holds a transcendental, whose two halves then
 *              overlap their latency chains) with a scalar remainder loop.
 *   reduction  the leading nrow dimensions are rows; each row runs its blocks in order: a loop
 *              block walks the reduced dimensions (nested scalar loops, the innermost one
 *              vectorized) and folds values into ACCUMULATORS independent vector accumulators
 *              (one latency-bound chain would be slow), which a halving tree combines at the
 *              end; a row block runs once, as scalars.
 *
 * Rows are the parallel axis: the function computes rows [begin, end) so the thread pool can
 * split it. Sums are accumulated in blocks of at most SUM_BLOCK elements per lane run before
 * being added to the row's total, which keeps the f32 rounding error of long rows small.
 */
#include "backends/cpu/llvm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define B (c->b)

enum {
    SUM_BLOCK = 4096,      /* reductions: elements per partial sum */
    SERIAL_POINTS = 1 << 15, /* kernels smaller than this run on the calling thread */
    ACCUMULATORS = 4,      /* reductions: independent vector accumulators per loop trip */
};

#define PREFETCH_AHEAD_BYTES 8192 /* heavy pointwise kernels: gelu 4.6 -> 4.3 ms (4 KB 4.3, 16 KB 4.4) */

/* ---- emission ------------------------------------------------------------------------------ */

typedef struct emit_state {
    const kir_kernel *k;
    llvm_loop_plan *pl;
    int width;                  /* lanes of the vector loops being emitted */
    bool heavy;                 /* their body is long: no unrolling, one accumulator set */
    bool reducing;              /* the loop block being emitted folds reductions */
    LLVMValueRef *bases;        /* per buffer */
    LLVMValueRef *row;          /* per instruction: row-block scalars */
    LLVMValueRef *cur;          /* per instruction: the current evaluation */
    LLVMValueRef *rowvals;      /* per reduction */
    LLVMValueRef *row_offset;   /* per view: offset of the row's first element */
    LLVMValueRef idx[MC_MAX_RANK];
    bool used_nontemporal;      /* a non-temporal store was emitted: fence before returning */
    llvm_row_cache cache;            /* reduction kernels: values computed once per row walk */
    struct partner *partner;    /* a pipelined kernel: the block loop_step also runs */
    const int *guard;           /* per instruction: plan_exp_ranges's min reduction, or -1 */
    const double *scale;        /* per reduction: plan_scaled_extrema's factor, or 0 */
    int units;                  /* accumulator sets per trip of the loop block being emitted */
    LLVMValueRef *work;         /* work arrays for the emitters (take_work), made with the kernel */
    size_t work_used, work_cap;
} emit_state;

/* Work arrays for the emitters, which are void functions deep in the loop nest: they take them
 * from one block allocated with the kernel (where running out of memory can be reported), in
 * stack order, and give them back. What they can hold at once: a loop block's accumulators,
 * then one array of view offsets per loop level (work_bound). */
static size_t work_bound(const kir_kernel *k)
{
    size_t nv = (size_t)(k->nviews ? k->nviews : 1), nr = (size_t)(k->nreds ? k->nreds : 1);
    return nr * (ACCUMULATORS + 2) + (MC_MAX_RANK + 1) * nv;
}

static LLVMValueRef *take_work(emit_state *e, size_t n)
{
    MC_ASSERT(e->work_used + n <= e->work_cap); /* work_bound is too small: a bug */
    LLVMValueRef *w = e->work + e->work_used;
    memset(w, 0, n * sizeof *w);
    e->work_used += n;
    return w;
}

static void give_back_work(emit_state *e, LLVMValueRef *w)
{
    e->work_used = (size_t)(w - e->work);
}

/* A pipelined reduction kernel (llvm_plan_pipeline) runs its last loop block for the previous row
 * inside the loop block before it for this row, at the same position in the row. */
typedef struct partner {
    int blk;                    /* the last loop block */
    LLVMValueRef *row_offset;   /* per view: the previous row's first element */
    LLVMValueRef idx[MC_MAX_RANK]; /* the previous row's indices */
    LLVMValueRef *row;          /* per instruction: the previous row's row-block values */
    LLVMValueRef *rowvals;      /* per reduction: the previous row's totals */
    LLVMValueRef *offs;         /* per view: work space for the partner's point */
    LLVMValueRef shift;         /* the previous row's row cache set */
} partner;

/* The body of a loop step at one point; `unit` says which of the ACCUMULATORS independent
 * accumulator sets a reduction step folds into. */
typedef void (*step_fn)(llvm_ctx *c, emit_state *e, const llvm_point *pt, int unit, void *arg);
typedef void (*done_fn)(llvm_ctx *c, emit_state *e, void *arg);

static void point_at(llvm_ctx *c, emit_state *e, llvm_point *pt, LLVMValueRef *offs, LLVMValueRef *base_offs,
                     int d, LLVMValueRef j, int width, const bool *nontemporal)
{
    memset(pt, 0, sizeof *pt);
    pt->width = width;
    pt->lane_dim = width > 1 ? d : -1;
    pt->stride = (const int64_t(*)[MC_MAX_RANK])e->pl->stride;
    pt->dim_of = e->pl->dim_of;
    pt->nontemporal = width > 1 ? nontemporal : NULL;
    memcpy(pt->idx, e->idx, sizeof pt->idx);
    pt->idx[d] = j;
    for (int v = 0; v < e->k->nviews; v++)
        offs[v] = LLVMBuildNSWAdd(B, base_offs[v], LLVMBuildNSWMul(B, j, llvm_size(c, e->pl->stride[v][d]), ""), "");
    pt->view_offset = offs;
}

/* One vector loop over [lo, hi) (hi - lo a multiple of the width): `units` steps per trip,
 * each folding into its own accumulator set, so that reductions are not one latency-bound
 * chain. */
static void vector_loop(llvm_ctx *c, emit_state *e, int d, LLVMValueRef lo, LLVMValueRef hi, int units,
                        LLVMValueRef *base_offs, LLVMValueRef *offs, step_fn body, void *arg,
                        const bool *nontemporal)
{
    int w = e->width;
    llvm_point pt;
    llvm_loop L;
    llvm_loop_begin(c, &L, lo, hi, llvm_const_i64(c, (int64_t)w * units), units > 1 ? "jvu" : "jv");
    for (int u = 0; u < units; u++) {
        LLVMValueRef j = u ? LLVMBuildNSWAdd(B, L.index, llvm_const_i64(c, (int64_t)w * u), "") : L.index;
        point_at(c, e, &pt, offs, base_offs, d, j, w, nontemporal);
        body(c, e, &pt, u, arg);
    }
    if (e->heavy)
        llvm_loop_end_unroll(c, &L, 1);
    else
        llvm_loop_end(c, &L);
}

/* lo + (hi - lo) rounded down to a multiple of m */
static LLVMValueRef round_down(llvm_ctx *c, LLVMValueRef lo, LLVMValueRef hi, int64_t m)
{
    LLVMValueRef n = LLVMBuildSub(B, hi, lo, "");
    return LLVMBuildAdd(B, lo, LLVMBuildMul(B, LLVMBuildSDiv(B, n, llvm_const_i64(c, m), ""), llvm_const_i64(c, m), ""), "");
}

/* The vector part of a loop over [lo, vend): for a reduction (`done` given) ACCUMULATORS steps per
 * trip, then single steps, then `done` folds the accumulators into the row's totals; with
 * `blocked`, that happens every SUM_BLOCK elements. */
static void vector_part(llvm_ctx *c, emit_state *e, int d, LLVMValueRef lo, LLVMValueRef vend, int64_t extent,
                        LLVMValueRef *base_offs, LLVMValueRef *offs, step_fn body, void *arg, done_fn done,
                        bool blocked, const bool *nontemporal)
{
    int w = e->width;
    int units = e->reducing && !e->heavy ? e->units : 1;
    blocked = blocked && e->reducing;
    llvm_loop outer;
    LLVMValueRef blo = lo, bhi = vend;
    bool sym = mc_dim_is_sym(extent); /* a length read at run time: every path it may need */
    int64_t most = llvm_size_max(c, extent, INT64_MAX);
    bool outer_loop = blocked && most > SUM_BLOCK;
    if (outer_loop) {
        llvm_loop_begin(c, &outer, lo, vend, llvm_const_i64(c, SUM_BLOCK), "jb");
        blo = outer.index;
        bhi = LLVMBuildAdd(B, outer.index, llvm_const_i64(c, SUM_BLOCK), "");
        bhi = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, bhi, vend, ""), bhi, vend, "");
    }
    LLVMValueRef mid = blo;
    if (units > 1 && most >= (int64_t)w * units) {
        mid = round_down(c, blo, bhi, (int64_t)w * units);
        vector_loop(c, e, d, blo, mid, units, base_offs, offs, body, arg, nontemporal);
    }
    if (units == 1 || sym || extent % ((int64_t)w * units) != 0 || (outer_loop && SUM_BLOCK % (w * units) != 0))
        vector_loop(c, e, d, mid, bhi, 1, base_offs, offs, body, arg, nontemporal);
    if (done)
        done(c, e, arg);
    if (outer_loop)
        llvm_loop_end(c, &outer);
}

/* The address of view v's element at index j of dimension d, as an integer. */
static LLVMValueRef address_at(llvm_ctx *c, emit_state *e, int v, int d, LLVMValueRef j, LLVMValueRef *base_offs)
{
    LLVMValueRef base = llvm_buffer_base(c, LLVMGetParam(c->fn, 0), e->bases, e->k->views[v].buffer);
    LLVMValueRef off = LLVMBuildNSWAdd(B, base_offs[v], LLVMBuildNSWMul(B, j, llvm_size(c, e->pl->stride[v][d]), ""), "");
    LLVMValueRef p = LLVMBuildGEP2(B, LLVMGetElementType(LLVMTypeOf(base)), base, &off, 1, "");
    return LLVMBuildPtrToInt(B, p, c->t_i64, "");
}

/* Where `cond` holds, one plain vector step (no non-temporal stores) at index j of dimension d. */
static void plain_step_if(llvm_ctx *c, emit_state *e, LLVMValueRef cond, int d, LLVMValueRef j,
                          LLVMValueRef *base_offs, LLVMValueRef *offs, step_fn body, void *arg)
{
    LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "then");
    LLVMBasicBlockRef after = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "");
    LLVMBuildCondBr(B, cond, then, after);
    LLVMPositionBuilderAtEnd(B, then);
    llvm_point pt;
    point_at(c, e, &pt, offs, base_offs, d, j, e->width, NULL);
    body(c, e, &pt, 0, arg);
    LLVMBuildBr(B, after);
    LLVMPositionBuilderAtEnd(B, after);
}

/* The vector part of a loop with non-temporal stores, over [lo, hi): when the first such view's
 * elements are aligned to their own size, vectors with non-temporal stores from the first
 * address aligned to a whole vector, provided every other such view is aligned there too;
 * the ends before and after them are one plain vector each (overlapping the aligned ones)
 * where the kernel reads back nothing it stores, else single steps. Otherwise plain vectors.
 * Returns where the vectors ended (the scalar remainder starts). */
static LLVMValueRef nontemporal_part(llvm_ctx *c, emit_state *e, int d, LLVMValueRef lo, LLVMValueRef hi,
                                     int64_t extent, LLVMValueRef *base_offs, LLVMValueRef *offs, step_fn body,
                                     void *arg, done_fn done)
{
    int w = e->width, first = -1;
    for (int v = 0; v < e->k->nviews && first < 0; v++)
        if (e->pl->nontemporal[v])
            first = v;
    MC_ASSERT(first >= 0);
    int64_t esize = (int64_t)mc_dtype_size(c->kp->buffers[e->k->views[first].buffer].dtype);
    int64_t vbytes = esize * w;
    LLVMValueRef addr = address_at(c, e, first, d, lo, base_offs);
    LLVMValueRef ok = LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildAnd(B, addr, llvm_const_i64(c, esize - 1), ""), llvm_const_i64(c, 0), "");
    LLVMValueRef gap = LLVMBuildAnd(B, LLVMBuildSub(B, llvm_const_i64(c, 0), addr, ""), llvm_const_i64(c, vbytes - 1), "");
    LLVMValueRef peel = LLVMBuildUDiv(B, gap, llvm_const_i64(c, esize), "peel");
    LLVMValueRef start = LLVMBuildAdd(B, lo, peel, "");
    start = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, start, hi, ""), start, hi, "");
    if (e->pl->stores_unread) /* the end steps need a whole vector */
        ok = LLVMBuildAnd(B, ok, LLVMBuildICmp(B, LLVMIntSGE, LLVMBuildSub(B, hi, lo, ""), llvm_const_i64(c, w), ""), "");
    for (int v = first + 1; v < e->k->nviews; v++) {
        if (!e->pl->nontemporal[v])
            continue;
        int64_t vb = w * (int64_t)mc_dtype_size(c->kp->buffers[e->k->views[v].buffer].dtype);
        LLVMValueRef a = LLVMBuildAnd(B, address_at(c, e, v, d, start, base_offs), llvm_const_i64(c, vb - 1), "");
        ok = LLVMBuildAnd(B, ok, LLVMBuildICmp(B, LLVMIntEQ, a, llvm_const_i64(c, 0), ""), "");
    }
    LLVMBasicBlockRef nt = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "nt");
    LLVMBasicBlockRef plain = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "plain");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "");
    LLVMBuildCondBr(B, ok, nt, plain);

    LLVMPositionBuilderAtEnd(B, nt);
    llvm_point pt;
    LLVMValueRef nt_end = round_down(c, start, hi, w);
    if (e->pl->stores_unread) {
        /* one plain vector step at lo and one ending at hi cover the ends, the aligned steps
         * between overlap them: recomputing a point is harmless where nothing the kernel
         * stores is read back */
        plain_step_if(c, e, LLVMBuildICmp(B, LLVMIntNE, start, lo, ""), d, lo, base_offs, offs, body, arg);
        vector_part(c, e, d, start, nt_end, extent, base_offs, offs, body, arg, done, false, e->pl->nontemporal);
        plain_step_if(c, e, LLVMBuildICmp(B, LLVMIntNE, nt_end, hi, ""), d,
                      LLVMBuildSub(B, hi, llvm_const_i64(c, w), ""), base_offs, offs, body, arg);
        nt_end = hi;
    } else {
        llvm_loop L;
        llvm_loop_begin(c, &L, lo, start, llvm_const_i64(c, 1), "jpeel");
        point_at(c, e, &pt, offs, base_offs, d, L.index, 1, NULL);
        body(c, e, &pt, 0, arg);
        llvm_loop_end(c, &L);
        vector_part(c, e, d, start, nt_end, extent, base_offs, offs, body, arg, done, false, e->pl->nontemporal);
    }
    LLVMBasicBlockRef nt_last = LLVMGetInsertBlock(B);
    LLVMBuildBr(B, join);

    LLVMPositionBuilderAtEnd(B, plain);
    LLVMValueRef plain_end = round_down(c, lo, hi, w);
    vector_part(c, e, d, lo, plain_end, extent, base_offs, offs, body, arg, done, false, NULL);
    LLVMBasicBlockRef plain_last = LLVMGetInsertBlock(B);
    LLVMBuildBr(B, join);

    LLVMPositionBuilderAtEnd(B, join);
    LLVMValueRef vend = LLVMBuildPhi(B, c->t_i64, "vend");
    LLVMValueRef vals[2] = {nt_end, plain_end};
    LLVMBasicBlockRef from[2] = {nt_last, plain_last};
    LLVMAddIncoming(vend, vals, from, 2);
    e->used_nontemporal = true;
    return vend;
}

static void pointwise_step(llvm_ctx *c, emit_state *e, const llvm_point *pt, int unit, void *arg);

/* The innermost loop over [lo, hi) of merged dimension d: the vector part, then (pointwise) one
 * native vector, then one lane at a time. base_offs[] are the views' offsets at index 0 of d. */
static void inner_loop(llvm_ctx *c, emit_state *e, int d, LLVMValueRef lo, LLVMValueRef hi,
                       int64_t extent, LLVMValueRef *base_offs, step_fn body, void *arg, done_fn done,
                       bool blocked)
{
    int w = e->width;
    int nv = e->k->nviews ? e->k->nviews : 1;
    LLVMValueRef *offs = take_work(e, (size_t)nv);
    llvm_point pt;
    LLVMValueRef vend = lo;
    bool sym = mc_dim_is_sym(extent); /* a length read at run time: a vector part and a remainder */
    bool exact = !sym && extent % w == 0 && (e->pl->nchunks == 1 || e->pl->chunk % w == 0);
    if (sym || extent >= w) {
        if (e->pl->any_nontemporal && !e->reducing) {
            vend = nontemporal_part(c, e, d, lo, hi, extent, base_offs, offs, body, arg, done);
            exact = false;
        } else {
            vend = round_down(c, lo, hi, w);
            vector_part(c, e, d, lo, vend, extent, base_offs, offs, body, arg, done, blocked, NULL);
        }
    }
    if (!exact || (!sym && extent < w)) {
        /* a pointwise row's remainder takes one native vector first where it holds one: rows
         * shorter than the 2 vectors a step (ResNet's 28- and 14-wide rows, the padding's copies
         * of them) were all scalar (never non-temporal: the tail is not aligned) */
        int n = c->native_lanes;
        bool tail = sym || e->pl->nchunks > 1 || extent % w >= n; /* else it never runs: not emitted */
        if (body == pointwise_step && !e->reducing && n > 1 && n < w && tail) {
            LLVMValueRef tend = LLVMBuildNSWAdd(B, vend, LLVMBuildNSWMul(B, LLVMBuildSDiv(B, LLVMBuildNSWSub(B, hi, vend, ""),
                                                                                          llvm_const_i64(c, n), ""),
                                                                             llvm_const_i64(c, n), ""), "");
            llvm_loop T;
            llvm_loop_begin(c, &T, vend, tend, llvm_const_i64(c, n), "jt");
            point_at(c, e, &pt, offs, base_offs, d, T.index, n, NULL);
            body(c, e, &pt, 0, arg);
            llvm_loop_end(c, &T);
            vend = tend;
        }
        llvm_loop L;
        llvm_loop_begin(c, &L, vend, hi, llvm_const_i64(c, 1), "j");
        point_at(c, e, &pt, offs, base_offs, d, L.index, 1, NULL);
        body(c, e, &pt, 0, arg);
        llvm_loop_end(c, &L);
    }
    give_back_work(e, offs);
}

/* Prefetch view v's element at offset `off` into L2 (a prefetch past the buffer's end is
 * harmless: it never faults). */
static void prefetch(llvm_ctx *c, emit_state *e, int v, LLVMValueRef off)
{
    LLVMValueRef base = llvm_buffer_base(c, LLVMGetParam(c->fn, 0), e->bases, e->k->views[v].buffer);
    LLVMValueRef ptr = LLVMBuildGEP2(B, LLVMGetElementType(LLVMTypeOf(base)), base, &off, 1, "");
    LLVMValueRef args[4] = {LLVMBuildBitCast(B, ptr, c->t_ptr_i8, ""), llvm_const_i32(c, 0, 1),
                            llvm_const_i32(c, 2, 1), llvm_const_i32(c, 1, 1)};
    LLVMTypeRef pt8 = c->t_ptr_i8;
    llvm_call_intrinsic(c, "llvm.prefetch", &pt8, 1, args, 4);
}

/* Pointwise: every block at each point; a heavy kernel also prefetches what it streams
 * PREFETCH_AHEAD_BYTES ahead, so that the memory works while it computes. */
static void pointwise_step(llvm_ctx *c, emit_state *e, const llvm_point *pt, int unit, void *arg)
{
    (void)unit, (void)arg;
    for (int b = 0; b < e->k->nblocks; b++)
        llvm_emit_block(c, e->k, b, e->bases, pt, e->cur, NULL, e->rowvals);
    if (e->heavy && pt->width > 1) {
        for (int v = 0; v < e->k->nviews; v++) {
            if (!e->pl->prefetch[v])
                continue;
            int64_t ahead = PREFETCH_AHEAD_BYTES / (int64_t)mc_dtype_size(c->kp->buffers[e->k->views[v].buffer].dtype);
            prefetch(c, e, v, LLVMBuildAdd(B, pt->view_offset[v], llvm_const_i64(c, ahead), ""));
        }
    }
}

/* A loop block with its reductions. */
typedef struct loop_block_arg {
    int blk;
    LLVMValueRef *vacc;   /* per reduction: the row's vector total (NULL if not in this block) */
    LLVMValueRef (*part)[ACCUMULATORS]; /* per reduction: the partial accumulators */
    LLVMValueRef *sacc;   /* per reduction: the scalar remainder's accumulator */
} loop_block_arg;

/* The partner block for the previous row, at pt's position in the row. Its vector stores are
 * non-temporal where the plan says so: llvm_plan_pipeline and the kernel's entry checked that every
 * vector position of such a view is aligned. */
static void partner_step(llvm_ctx *c, emit_state *e, const llvm_point *pt)
{
    partner *p = e->partner;
    int d = e->pl->rank - 1;
    llvm_point q = *pt;
    for (int v = 0; v < e->k->nviews; v++)
        p->offs[v] = LLVMBuildNSWAdd(B, p->row_offset[v], LLVMBuildNSWMul(B, pt->idx[d], llvm_size(c, e->pl->stride[v][d]), ""), "");
    q.view_offset = p->offs;
    for (int r = 0; r < e->pl->nrow; r++)
        q.idx[r] = p->idx[r];
    q.nontemporal = pt->width > 1 ? e->pl->nontemporal : NULL;
    q.acc = NULL;
    LLVMValueRef own = e->cache.shift;
    e->cache.shift = p->shift;
    llvm_emit_block_planned(c, e->k, p->blk, e->bases, &q, e->cur, p->row, p->rowvals, &e->cache, e->guard);
    e->cache.shift = own;
    if (q.nontemporal)
        e->used_nontemporal = true;
}

static void loop_step(llvm_ctx *c, emit_state *e, const llvm_point *pt, int unit, void *p)
{
    loop_block_arg *a = p;
    llvm_emit_block_planned(c, e->k, a->blk, e->bases, pt, e->cur, e->row, e->rowvals, &e->cache, e->guard);
    if (a->blk != e->pl->first_loop && (e->heavy || e->partner) && pt->width > 1) {
        for (int v = 0; v < e->k->nviews; v++) {
            if (!e->pl->prefetch[v])
                continue;
            prefetch(c, e, v, LLVMBuildAdd(B, pt->view_offset[v], llvm_size(c, e->pl->stride[v][e->pl->nrow - 1]), ""));
        }
    }
    for (int r = 0; r < e->k->nreds; r++) {
        const kir_reduce *rd = &e->k->reds[r];
        if (rd->block != a->blk)
            continue;
        LLVMValueRef slot = pt->width > 1 ? a->part[r][unit] : a->sacc[r];
        LLVMTypeRef t = llvm_acc_type(c, rd->op, rd->dtype, pt->width);
        LLVMValueRef acc = LLVMBuildLoad2(B, t, slot, "");
        /* the value may come from a row block: the same for every element of the loop */
        LLVMValueRef x = llvm_block_of(e->k, rd->value) == a->blk ? e->cur[rd->value]
                                                                 : llvm_splat(c, e->row[rd->value], pt->width);
        MC_ASSERT(x);
        LLVMValueRef step = e->pl->lax[r] ? llvm_reduce_step_lax(c, rd->op, acc, x)
                                          : llvm_reduce_step(c, rd->op, rd->dtype, acc, x);
        LLVMBuildStore(B, step, slot);
    }
    if (e->partner)
        partner_step(c, e, pt);
}

/* After a run of vector steps: fold the partial accumulators (pairwise) into the totals. */
static void loop_vector_done(llvm_ctx *c, emit_state *e, void *p)
{
    loop_block_arg *a = p;
    for (int r = 0; r < e->k->nreds; r++) {
        const kir_reduce *rd = &e->k->reds[r];
        if (rd->block != a->blk)
            continue;
        LLVMTypeRef t = llvm_acc_type(c, rd->op, rd->dtype, e->width);
        LLVMValueRef parts[ACCUMULATORS];
        for (int u = 0; u < ACCUMULATORS; u++) {
            parts[u] = LLVMBuildLoad2(B, t, a->part[r][u], "");
            LLVMBuildStore(B, llvm_reduce_identity(c, rd->op, rd->dtype, e->width), a->part[r][u]);
        }
        for (int n = ACCUMULATORS; n > 1; n /= 2)
            for (int u = 0; u < n / 2; u++)
                parts[u] = llvm_reduce_step(c, rd->op, rd->dtype, parts[u], parts[u + n / 2]);
        LLVMValueRef total = LLVMBuildLoad2(B, t, a->vacc[r], "");
        LLVMBuildStore(B, llvm_reduce_step(c, rd->op, rd->dtype, total, parts[0]), a->vacc[r]);
    }
}

/* Nested loops over merged dimensions [d, rank) for a loop block; the last is vectorized. */
static void reduced_loops(llvm_ctx *c, emit_state *e, int d, LLVMValueRef *offs, loop_block_arg *a)
{
    llvm_loop_plan *pl = e->pl;
    if (d == pl->rank - 1) {
        inner_loop(c, e, d, llvm_const_i64(c, 0), llvm_size(c, pl->shape[d]), pl->shape[d], offs,
                   loop_step, a, loop_vector_done, true);
        return;
    }
    int nv = e->k->nviews ? e->k->nviews : 1;
    LLVMValueRef *inner = take_work(e, (size_t)nv);
    llvm_loop L;
    llvm_loop_begin(c, &L, llvm_const_i64(c, 0), llvm_size(c, pl->shape[d]), llvm_const_i64(c, 1), "r");
    e->idx[d] = L.index;
    for (int v = 0; v < e->k->nviews; v++)
        inner[v] = LLVMBuildNSWAdd(B, offs[v], LLVMBuildNSWMul(B, L.index, llvm_size(c, pl->stride[v][d]), ""), "");
    reduced_loops(c, e, d + 1, inner, a);
    llvm_loop_end(c, &L);
    give_back_work(e, inner);
}

/* The lanes of a reduction's loops: two native vectors, or, for a row shorter than that,
 * the widest power of two not above its length (4 at least; the rest of a row is scalar steps).
 * A causal softmax over rows of 16 at AVX-512's 32 lanes ran its every element as a scalar
 * step, exp included: [4, 16, 16] 24 -> 1.2 us on one thread (unfused 4.5). */
static int reduced_width(llvm_ctx *c, const llvm_loop_plan *pl)
{
    int w = c->lanes;
    int64_t extent = pl->rank > pl->nrow ? llvm_size_max(c, pl->shape[pl->rank - 1], INT64_MAX) : 1;
    while (w > 4 && w > extent)
        w /= 2;
    return w;
}

/* One element of a scan (kir/kir.h): KI_ROWVAL reads the running value before the element,
 * then the element is added to it. */
static LLVMTypeRef scan_type(llvm_ctx *c, const kir_reduce *rd)
{
    return rd->dtype == MC_F32 ? c->t_f64 : llvm_acc_type(c, rd->op, rd->dtype, 1); /* f64 for floats */
}

/* The scan's accumulator as KI_ROWVAL reads it: f32 for floats (kir/kir.h). */
static LLVMValueRef scan_value(llvm_ctx *c, const kir_reduce *rd, LLVMValueRef acc)
{
    return rd->dtype == MC_F32 ? LLVMBuildFPTrunc(B, acc, c->t_f32, "") : acc;
}

static void scan_step(llvm_ctx *c, emit_state *e, const llvm_point *pt, int blk, LLVMValueRef slot)
{
    const kir_reduce *rd = &e->k->reds[0];
    LLVMValueRef acc = LLVMBuildLoad2(B, scan_type(c, rd), slot, "prefix");
    e->rowvals[0] = scan_value(c, rd, acc);
    llvm_emit_block_planned(c, e->k, blk, e->bases, pt, e->cur, e->row, e->rowvals, NULL, NULL);
    LLVMValueRef x = llvm_block_of(e->k, rd->value) == blk ? e->cur[rd->value] : e->row[rd->value];
    MC_ASSERT(x);
    LLVMValueRef next = rd->dtype == MC_F32 ? LLVMBuildFAdd(B, acc, LLVMBuildFPExt(B, x, c->t_f64, ""), "")
                                            : llvm_reduce_step(c, rd->op, rd->dtype, acc, x);
    LLVMBuildStore(B, next, slot);
}

/* A scan's loop block: the row's elements one after the other, in order, as scalars (the
 * running sum is one dependency chain: O(n) per row, rows split between threads). */
static void emit_scan_block(llvm_ctx *c, emit_state *e, int blk)
{
    const kir_kernel *k = e->k;
    const kir_reduce *rd = &k->reds[0];
    LLVMTypeRef t = scan_type(c, rd);
    LLVMValueRef slot = llvm_entry_alloca(c, t, "scan");
    LLVMBuildStore(B, LLVMConstNull(t), slot); /* a sum's identity */
    int nv = k->nviews ? k->nviews : 1;
    LLVMValueRef *offs = take_work(e, (size_t)nv);
    llvm_point pt;
    if (e->pl->rank > e->pl->nrow) {
        int d = e->pl->rank - 1; /* the one reduced dimension (kir_verify) */
        llvm_loop L;
        llvm_loop_begin(c, &L, llvm_const_i64(c, 0), llvm_size(c, e->pl->shape[d]), llvm_const_i64(c, 1), "scan");
        point_at(c, e, &pt, offs, e->row_offset, d, L.index, 1, NULL);
        scan_step(c, e, &pt, blk, slot);
        llvm_loop_end(c, &L);
    } else { /* the axis has length 1 */
        memset(&pt, 0, sizeof pt);
        pt.width = 1;
        pt.lane_dim = -1;
        pt.view_offset = e->row_offset;
        pt.stride = (const int64_t(*)[MC_MAX_RANK])e->pl->stride;
        pt.dim_of = e->pl->dim_of;
        memcpy(pt.idx, e->idx, sizeof pt.idx);
        scan_step(c, e, &pt, blk, slot);
    }
    e->rowvals[0] = scan_value(c, rd, LLVMBuildLoad2(B, t, slot, "total"));
    give_back_work(e, offs);
}

static void emit_loop_block(llvm_ctx *c, emit_state *e, int blk)
{
    const kir_kernel *k = e->k;
    if (kir_kernel_scans(k)) {
        emit_scan_block(c, e, blk);
        return;
    }
    int nr = k->nreds ? k->nreds : 1;
    e->heavy = llvm_block_is_heavy(k, blk);
    e->width = reduced_width(c, e->pl);
    e->reducing = false;
    int nblk = 0;
    for (int r = 0; r < k->nreds; r++)
        nblk += k->reds[r].block == blk;
    e->reducing = nblk > 0;
    /* three reductions of four accumulator sets of two vectors would not fit in 16 registers */
    e->units = nblk >= 3 ? 2 : ACCUMULATORS;
    int w = e->width;
    loop_block_arg a = {.blk = blk};
    a.vacc = take_work(e, (size_t)nr);
    a.part = (LLVMValueRef(*)[ACCUMULATORS])take_work(e, (size_t)nr * ACCUMULATORS);
    a.sacc = take_work(e, (size_t)nr);
    for (int r = 0; r < k->nreds; r++) {
        const kir_reduce *rd = &k->reds[r];
        if (rd->block != blk)
            continue;
        LLVMTypeRef vt = llvm_acc_type(c, rd->op, rd->dtype, w), st = llvm_acc_type(c, rd->op, rd->dtype, 1);
        a.vacc[r] = llvm_entry_alloca(c, vt, "acc");
        a.sacc[r] = llvm_entry_alloca(c, st, "sacc");
        LLVMBuildStore(B, llvm_reduce_identity(c, rd->op, rd->dtype, w), a.vacc[r]);
        LLVMBuildStore(B, llvm_reduce_identity(c, rd->op, rd->dtype, 1), a.sacc[r]);
        for (int u = 0; u < ACCUMULATORS; u++) {
            a.part[r][u] = llvm_entry_alloca(c, vt, "part");
            LLVMBuildStore(B, llvm_reduce_identity(c, rd->op, rd->dtype, w), a.part[r][u]);
        }
    }
    if (e->pl->rank > e->pl->nrow) {
        reduced_loops(c, e, e->pl->nrow, e->row_offset, &a);
    } else {
        /* no reduced dimension left (every reduced axis has size 1): one scalar step */
        llvm_point pt = {.width = 1, .lane_dim = -1, .view_offset = e->row_offset,
                         .stride = (const int64_t(*)[MC_MAX_RANK])e->pl->stride, .dim_of = e->pl->dim_of};
        memcpy(pt.idx, e->idx, sizeof pt.idx);
        loop_step(c, e, &pt, 0, &a);
    }
    for (int r = 0; r < k->nreds; r++) {
        const kir_reduce *rd = &k->reds[r];
        if (rd->block != blk)
            continue;
        LLVMValueRef v = LLVMBuildLoad2(B, llvm_acc_type(c, rd->op, rd->dtype, w), a.vacc[r], "");
        LLVMValueRef s = LLVMBuildLoad2(B, llvm_acc_type(c, rd->op, rd->dtype, 1), a.sacc[r], "");
        LLVMValueRef total = llvm_reduce_step(c, rd->op, rd->dtype == MC_I32 ? MC_I32 : MC_F32,
                                              llvm_reduce_lanes(c, rd->op, rd->dtype, v, w), s);
        e->rowvals[r] = llvm_acc_finish(c, rd->op, rd->dtype, total);
        if (e->scale && e->scale[r] != 0) /* plan_scaled_extrema */
            e->rowvals[r] = LLVMBuildFMul(B, e->rowvals[r], LLVMConstReal(c->t_f32, e->scale[r]), "");
    }
    give_back_work(e, a.vacc);
}

/* The indices of row `rowi` (idx[d] for the row dimensions, 0 for the others) and each view's
 * offset at its first element. */
static void row_position(llvm_ctx *c, const kir_kernel *k, const llvm_loop_plan *pl, LLVMValueRef rowi,
                         LLVMValueRef *idx, LLVMValueRef *row_offset)
{
    for (int d = 0; d < MC_MAX_RANK; d++)
        idx[d] = llvm_const_i64(c, 0);
    LLVMValueRef r = rowi;
    for (int d = pl->nrow - 1; d >= 0; d--) {
        if (d == 0) {
            idx[d] = r;
        } else {
            idx[d] = LLVMBuildSRem(B, r, llvm_size(c, pl->shape[d]), "");
            r = LLVMBuildSDiv(B, r, llvm_size(c, pl->shape[d]), "");
        }
    }
    for (int v = 0; v < k->nviews; v++) {
        LLVMValueRef off = llvm_size(c, k->views[v].offset);
        for (int d = 0; d < pl->nrow; d++)
            off = LLVMBuildNSWAdd(B, off, LLVMBuildNSWMul(B, idx[d], llvm_size(c, pl->stride[v][d]), ""), "");
        row_offset[v] = off;
    }
}

/* Blocks [from, to) of a reduction kernel for the row at e->idx. */
static void emit_blocks(llvm_ctx *c, emit_state *e, int from, int to)
{
    const kir_kernel *k = e->k;
    llvm_point pt = {.width = 1, .lane_dim = -1, .view_offset = e->row_offset,
                     .stride = (const int64_t(*)[MC_MAX_RANK])e->pl->stride, .dim_of = e->pl->dim_of};
    memcpy(pt.idx, e->idx, sizeof pt.idx);
    for (int b = from; b < to; b++) {
        if (k->blocks[b].loop)
            emit_loop_block(c, e, b);
        else
            llvm_emit_block(c, k, b, e->bases, &pt, e->row, e->row, e->rowvals);
    }
}

/* The rows [begin, end) of a pipelined kernel (llvm_plan_pipeline): loop block h runs the last
 * block for the previous row. The first row has none: there the last block runs for the same
 * row, from the row cache h has just written at the same position and from zeroed row values,
 * so its stores are garbage that the real run overwrites (nothing reads them: the plan
 * requires that the kernel loads nothing it stores, and rows are split between threads whole). */
static mc_status emit_pipelined_rows(llvm_ctx *c, emit_state *e, int h, LLVMValueRef begin, LLVMValueRef end)
{
    const kir_kernel *k = e->k;
    int last = k->nblocks - 1;
    size_t ncode = (size_t)(k->ncode ? k->ncode : 1), nv = (size_t)(k->nviews ? k->nviews : 1);
    size_t nr = (size_t)(k->nreds ? k->nreds : 1);
    partner p = {.blk = last};
    LLVMValueRef *slot = calloc(ncode, sizeof *slot), *rslot = calloc(nr, sizeof *rslot);
    p.row = calloc(ncode, sizeof *p.row);
    p.rowvals = calloc(nr, sizeof *p.rowvals);
    p.row_offset = calloc(nv, sizeof *p.row_offset);
    p.offs = calloc(nv, sizeof *p.offs);
    if (!slot || !rslot || !p.row || !p.rowvals || !p.row_offset || !p.offs) {
        free(slot), free(rslot), free(p.row), free(p.rowvals), free(p.row_offset), free(p.offs);
        return mc_fail(MC_ERR_SYSTEM, "out of memory generating kernel %s", k->name);
    }
    LLVMValueRef set = llvm_const_i64(c, (int64_t)e->cache.rows * e->cache.extent); /* one row cache set */
    llvm_loop U;
    llvm_loop_begin(c, &U, begin, end, llvm_const_i64(c, 1), "u");
    /* the row values the last block reads, carried from one row to the next in allocas */
    for (int i = 0; i < k->blocks[last].first; i++) {
        if (k->blocks[llvm_block_of(k, i)].loop)
            continue;
        LLVMTypeRef t = llvm_value_type(c, k->code[i].dtype, 1);
        slot[i] = llvm_entry_alloca(c, t, "carry");
        LLVMBuildStore(c->entry_b, LLVMConstNull(t), slot[i]);
        p.row[i] = LLVMBuildLoad2(B, t, slot[i], "");
    }
    for (int i = k->blocks[last].first; i < k->ncode; i++) { /* the totals it reads itself */
        int r = k->code[i].view;
        if (k->code[i].kind != KI_ROWVAL || rslot[r])
            continue;
        LLVMTypeRef t = llvm_value_type(c, k->code[i].dtype, 1);
        rslot[r] = llvm_entry_alloca(c, t, "carry");
        LLVMBuildStore(c->entry_b, LLVMConstNull(t), rslot[r]);
        p.rowvals[r] = LLVMBuildLoad2(B, t, rslot[r], "");
    }
    LLVMValueRef prev = LLVMBuildSub(B, U.index, llvm_const_i64(c, 1), "");
    prev = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, prev, begin, ""), begin, prev, "prev");
    row_position(c, k, e->pl, U.index, e->idx, e->row_offset);
    row_position(c, k, e->pl, prev, p.idx, p.row_offset);
    e->cache.shift = LLVMBuildMul(B, LLVMBuildAnd(B, U.index, llvm_const_i64(c, 1), ""), set, "");
    p.shift = LLVMBuildMul(B, LLVMBuildAnd(B, prev, llvm_const_i64(c, 1), ""), set, "");
    emit_blocks(c, e, 0, h);
    e->partner = &p;
    emit_blocks(c, e, h, h + 1);
    e->partner = NULL;
    emit_blocks(c, e, h + 1, last);
    for (int i = 0; i < k->blocks[last].first; i++) {
        if (!slot[i] || !e->row[i])
            continue;
        MC_ASSERT(LLVMTypeOf(e->row[i]) == LLVMGetAllocatedType(slot[i]));
        LLVMBuildStore(B, e->row[i], slot[i]);
    }
    for (size_t r = 0; r < nr; r++) {
        if (!rslot[r])
            continue;
        MC_ASSERT(e->rowvals[r] && LLVMTypeOf(e->rowvals[r]) == LLVMGetAllocatedType(rslot[r]));
        LLVMBuildStore(B, e->rowvals[r], rslot[r]);
    }
    llvm_loop_end_unroll(c, &U, 1);

    /* the last row's last block, on its own */
    LLVMBasicBlockRef tail = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "tail");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "");
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, begin, end, ""), tail, done);
    LLVMPositionBuilderAtEnd(B, tail);
    LLVMValueRef lastrow = LLVMBuildSub(B, end, llvm_const_i64(c, 1), "");
    row_position(c, k, e->pl, lastrow, e->idx, e->row_offset);
    e->cache.shift = LLVMBuildMul(B, LLVMBuildAnd(B, lastrow, llvm_const_i64(c, 1), ""), set, "");
    for (int i = 0; i < k->blocks[last].first; i++)
        if (slot[i])
            e->row[i] = LLVMBuildLoad2(B, LLVMGetAllocatedType(slot[i]), slot[i], "");
    for (size_t r = 0; r < nr; r++) /* the others were the loop's: not valid out here */
        e->rowvals[r] = rslot[r] ? LLVMBuildLoad2(B, LLVMGetAllocatedType(rslot[r]), rslot[r], "") : NULL;
    emit_blocks(c, e, last, last + 1);
    e->cache.shift = NULL;
    LLVMBuildBr(B, done);
    LLVMPositionBuilderAtEnd(B, done);
    free(slot), free(rslot), free(p.row), free(p.rowvals), free(p.row_offset), free(p.offs);
    return MC_OK;
}

mc_status llvm_emit_loop_kernel(llvm_ctx *c, const kir_kernel *k0, llvm_kernel_info *info)
{
    llvm_red_plan rp;
    mc_status st = llvm_plan_reductions(c, k0, &rp);
    if (st != MC_OK)
        return st;
    const kir_kernel *k = rp.reds ? &rp.k : k0;
    llvm_loop_plan pl;
    st = llvm_plan_loops(c, k, &pl);
    if (st != MC_OK) {
        llvm_red_plan_free(&rp);
        free(pl.stride);
        free(pl.nontemporal);
        free(pl.prefetch);
        free(pl.lax);
        return st;
    }
    emit_state e = {.k = k, .pl = &pl, .guard = rp.guard, .scale = rp.scale};
    size_t ncode = (size_t)(k->ncode ? k->ncode : 1), nv = (size_t)(k->nviews ? k->nviews : 1);
    e.bases = calloc((size_t)c->kp->nbuffers + 1, sizeof *e.bases);
    e.row = calloc(ncode, sizeof *e.row);
    e.cur = calloc(ncode, sizeof *e.cur);
    e.rowvals = calloc((size_t)(k->nreds ? k->nreds : 1), sizeof *e.rowvals);
    e.row_offset = calloc(nv, sizeof *e.row_offset);
    e.work_cap = work_bound(k);
    e.work = calloc(e.work_cap, sizeof *e.work);
    if (!e.bases || !e.row || !e.cur || !e.rowvals || !e.row_offset || !e.work) {
        st = mc_fail(MC_ERR_SYSTEM, "out of memory generating kernel %s", k->name);
        goto done;
    }
    if (kir_kernel_scans(k)) /* one walk per row in order: no row cache, no lax extrema */
        memset(&e.cache, 0, sizeof e.cache);
    else if ((st = llvm_plan_row_cache(c, k, &pl, &e.cache)) != MC_OK || (st = llvm_plan_lax(c, k, &pl)) != MC_OK)
        goto done;
    for (int r = k0->nreds; r < k->nreds; r++) /* plan_exp_ranges's: the sum catches NaN */
        pl.lax[r] = k->reds[r].op == MC_OP_MIN;
    llvm_begin_function(c, k->name);
    LLVMValueRef begin = LLVMGetParam(c->fn, 1), end = LLVMGetParam(c->fn, 2);

    int h = kir_kernel_scans(k) ? -1 : llvm_plan_pipeline(c, k, &pl);
    LLVMBasicBlockRef after = NULL;
    if (h >= 0) {
        /* pipelined where every non-temporal view's buffer is aligned to a whole vector */
        LLVMValueRef ok = LLVMConstInt(c->t_i1, 1, 0);
        for (int s = 0; s < k->nstores; s++) {
            int v = k->stores[s].view, buf = k->views[v].buffer;
            if (!pl.nontemporal[v])
                continue;
            int64_t vbytes = (int64_t)c->lanes * (int64_t)mc_dtype_size(c->kp->buffers[buf].dtype);
            LLVMValueRef base = llvm_buffer_base(c, LLVMGetParam(c->fn, 0), e.bases, buf);
            LLVMValueRef a = LLVMBuildAnd(B, LLVMBuildPtrToInt(B, base, c->t_i64, ""), llvm_const_i64(c, vbytes - 1), "");
            ok = LLVMBuildAnd(B, ok, LLVMBuildICmp(B, LLVMIntEQ, a, llvm_const_i64(c, 0), ""), "");
        }
        LLVMBasicBlockRef piped = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "pipelined");
        LLVMBasicBlockRef plain = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "plain");
        after = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "");
        LLVMBuildCondBr(B, ok, piped, plain);
        LLVMPositionBuilderAtEnd(B, piped);
        if ((st = emit_pipelined_rows(c, &e, h, begin, end)) != MC_OK)
            goto done;
        LLVMBuildBr(B, after);
        LLVMPositionBuilderAtEnd(B, plain);
    }

    /* for u in [begin, end): row = u / nchunks, chunk = u % nchunks */
    llvm_loop U;
    llvm_loop_begin(c, &U, begin, end, llvm_const_i64(c, 1), "u");
    LLVMValueRef rowi = U.index, chunk = NULL;
    if (pl.nchunks > 1) {
        rowi = LLVMBuildSDiv(B, U.index, llvm_const_i64(c, pl.nchunks), "row");
        chunk = LLVMBuildSRem(B, U.index, llvm_const_i64(c, pl.nchunks), "chunk");
    }
    row_position(c, k, &pl, rowi, e.idx, e.row_offset);

    if (pl.pointwise && pl.rank > 0) {
        int d = pl.rank - 1;
        LLVMValueRef lo = llvm_const_i64(c, 0), hi = llvm_size(c, pl.shape[d]);
        if (pl.nchunks > 1) {
            lo = LLVMBuildNSWMul(B, chunk, llvm_const_i64(c, pl.chunk), "");
            LLVMValueRef hc = LLVMBuildNSWAdd(B, lo, llvm_const_i64(c, pl.chunk), "");
            hi = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, hc, hi, ""), hc, hi, "");
        }
        for (int b = 0; b < k->nblocks; b++)
            e.heavy |= llvm_block_is_heavy(k, b);
        /* two native vectors per step even when heavy: the transcendental's two independent
         * halves overlap their latency chains, and a branchy one (gelu's tail) decides once
         * per 2 vectors, which the branch predictor gets right far more often on data that
         * mixes both paths (N(0,1) inputs: pointwise 13.2 -> 9.4 ms, uniform 5.4 -> 5.2 ms) */
        e.width = c->lanes;
        inner_loop(c, &e, d, lo, hi, pl.shape[d], e.row_offset, pointwise_step, NULL, NULL, false);
    } else {
        emit_blocks(c, &e, 0, k->nblocks);
    }
    llvm_loop_end_unroll(c, &U, 1);
    if (after) {
        LLVMBuildBr(B, after);
        LLVMPositionBuilderAtEnd(B, after);
    }
    if (e.used_nontemporal) /* non-temporal stores are weakly ordered: visible before returning */
        llvm_call_intrinsic(c, "llvm.x86.sse.sfence", NULL, 0, NULL, 0);
    llvm_finish_function(c);

    int64_t points = 1;
    bool sized = false;
    for (int d = 0; d < k->rank; d++) {
        sized |= mc_dim_is_sym(k->shape[d]);
        points = sized ? 0 : points * k->shape[d];
    }
    info->grain = 0;
    if (!sized) {
        info->units = pl.rows * pl.nchunks;
        info->serial = points < SERIAL_POINTS || info->units < 2;
    } else { /* units = nchunks * the row dimensions, for each binding (llvm_info_bind) */
        info->sized = true;
        info->units_const = pl.nchunks;
        for (int d = 0; d < k->rank; d++)
            if (pl.dim_of[d] < pl.nrow) {
                info->units_dim[info->nunits_dims] = k->shape[d];
                info->units_div[info->nunits_dims++] = 1;
            }
    }
    info->scratch_bytes = (h >= 0 ? 2 : 1) * e.cache.rows * e.cache.extent * (int64_t)sizeof(float);
done:
    llvm_red_plan_free(&rp);
    free(pl.stride);
    free(pl.nontemporal);
    free(pl.prefetch);
    free(pl.lax);
    free(e.bases);
    free(e.row);
    free(e.cur);
    free(e.rowvals);
    free(e.row_offset);
    free(e.work);
    free(e.cache.save);
    free(e.cache.load);
    return st;
}


mc_status llvm_info_bind(llvm_kernel_info *info, const kir_kernel *bound, const mc_dims *dims, const int64_t *values)
{
    if (!info->sized)
        return MC_OK;
    int64_t units = info->units_const;
    for (int i = 0; i < info->nunits_dims; i++) {
        int64_t x = 0;
        /* kir_bind evaluated the same sizes; a derived one (T - 2 of a slice, say) that is not
         * a size at this binding is the binding's fault, said as such */
        if (!mc_dims_eval(dims, info->units_dim[i], values, &x) || x < 1) {
            char dim[96];
            return mc_fail(MC_ERR_INPUT, "kernel %s: the size %s is %lld at this binding, below 1", bound->name,
                           mc_dims_str(dims, info->units_dim[i], dim, sizeof dim), (long long)x);
        }
        units *= (x + info->units_div[i] - 1) / info->units_div[i];
    }
    info->units = units;
    if (bound->category == KIR_ATTENTION) {
        const kir_attention *a = &bound->attn;
        int64_t flops = a->tq * a->tk * (a->d + a->dv) * 2;
        for (int d = 0; d < bound->rank - 2; d++)
            flops *= bound->shape[d];
        info->serial = flops < (1 << 20) || units < 2;
    } else if (bound->category == KIR_GEMM) {
        int64_t flops = 2 * bound->gemm.m * bound->gemm.n * bound->gemm.k;
        for (int d = 0; d < bound->rank - 2; d++)
            flops *= bound->shape[d];
        info->serial = flops < (1 << 20) || units < 2;
    } else {
        int64_t points = 1;
        for (int d = 0; d < bound->rank; d++)
            points *= bound->shape[d];
        info->serial = points < SERIAL_POINTS || units < 2;
    }
    return MC_OK;
}
