/* Pointwise, copy and reduction kernels as LLVM IR loop nests.
 *
 * A kernel's index space is first simplified: adjacent dimensions merge when every view that
 * walks them steps through memory as one dimension would (stride[d] == stride[d+1] * size[d+1])
 * and no iota reads them, so a contiguous [4096, 4096] tensor becomes one long axis and a
 * row-broadcast stays two. Then:
 *
 *   pointwise  the last dimension is the loop; all earlier ones are "rows". The loop runs in
 *              vectors of `lanes` elements (two native vectors: AVX2 gives 16 floats) with a
 *              scalar remainder loop; a long last dimension is also cut into chunks so that a
 *              kernel with few rows still splits across threads.
 *   reduction  the leading nrow dimensions are rows; each row runs its blocks in order: a loop
 *              block walks the reduced dimensions (nested scalar loops, the innermost one
 *              vectorized) and folds values into vector accumulators, which a halving tree
 *              combines at the end; a row block runs once, as scalars.
 *
 * A view's load is a vector load where its stride along the vector axis is 1, one scalar
 * broadcast where it is 0 (a broadcast operand), and lane-by-lane loads otherwise. Rows are the
 * parallel axis: the function computes rows [begin, end) so the thread pool can split it.
 * Sums are accumulated in blocks of at most BLOCK elements per lane run before being added to
 * the row's total, which keeps the f32 rounding error of long rows small.
 */
#include "llvm.h"

#include <stdlib.h>
#include <string.h>

#define B (c->b)

enum {
    CHUNK = 8192,          /* pointwise: elements of the last axis per parallel unit, when long */
    SUM_BLOCK = 4096,      /* reductions: elements per partial sum */
    SERIAL_POINTS = 1 << 15, /* kernels smaller than this run on the calling thread */
};

/* ---- functions, allocas, loops ------------------------------------------------------------ */

void llvm_begin_function(llvm_ctx *c, const char *name)
{
    LLVMTypeRef params[4] = {LLVMPointerType(c->t_ptr_i8, 0), c->t_i64, c->t_i64, c->t_ptr_i8};
    LLVMTypeRef fty = LLVMFunctionType(c->t_void, params, 4, 0);
    c->fn = LLVMAddFunction(c->mod, name, fty);
    unsigned nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(c->fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(c->ctx, nounwind, 0));
    LLVMSetValueName2(LLVMGetParam(c->fn, 0), "buffers", 7);
    LLVMSetValueName2(LLVMGetParam(c->fn, 1), "begin", 5);
    LLVMSetValueName2(LLVMGetParam(c->fn, 2), "end", 3);
    LLVMSetValueName2(LLVMGetParam(c->fn, 3), "scratch", 7);
    c->entry = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "entry");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "body");
    LLVMPositionBuilderAtEnd(c->entry_b, c->entry);
    LLVMPositionBuilderAtEnd(B, body);
}

void llvm_finish_function(llvm_ctx *c)
{
    LLVMBuildRetVoid(B);
    LLVMPositionBuilderAtEnd(c->entry_b, c->entry);
    LLVMBuildBr(c->entry_b, LLVMGetNextBasicBlock(c->entry));
}

LLVMValueRef llvm_entry_alloca(llvm_ctx *c, LLVMTypeRef type, const char *name)
{
    return LLVMBuildAlloca(c->entry_b, type, name);
}

void llvm_loop_begin(llvm_ctx *c, llvm_loop *L, LLVMValueRef begin, LLVMValueRef end,
                     LLVMValueRef step, const char *name)
{
    L->var = llvm_entry_alloca(c, c->t_i64, name);
    L->step = step;
    LLVMBuildStore(B, begin, L->var);
    L->head = LLVMAppendBasicBlockInContext(c->ctx, c->fn, name);
    L->body = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "");
    L->exit = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "");
    LLVMBuildBr(B, L->head);
    LLVMPositionBuilderAtEnd(B, L->head);
    L->index = LLVMBuildLoad2(B, c->t_i64, L->var, name);
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, L->index, end, ""), L->body, L->exit);
    LLVMPositionBuilderAtEnd(B, L->body);
}

void llvm_loop_end(llvm_ctx *c, llvm_loop *L)
{
    LLVMBuildStore(B, LLVMBuildNSWAdd(B, L->index, L->step, ""), L->var);
    LLVMBuildBr(B, L->head);
    LLVMPositionBuilderAtEnd(B, L->exit);
}

int llvm_block_of(const kir_kernel *k, int i)
{
    for (int b = 0; b < k->nblocks; b++)
        if (i >= k->blocks[b].first && i < k->blocks[b].first + k->blocks[b].count)
            return b;
    MC_ASSERT(!"instruction outside every block");
}

/* ---- buffers, loads, stores ------------------------------------------------------------------ */

static LLVMTypeRef storage_type(llvm_ctx *c, mc_dtype d)
{
    switch (d) {
    case MC_F32: return c->t_f32;
    case MC_F16: case MC_BF16: return c->t_i16;
    case MC_I32: return c->t_i32;
    default: return c->t_i8;
    }
}

LLVMValueRef llvm_buffer_base(llvm_ctx *c, LLVMValueRef buffers, LLVMValueRef *bases, int buf)
{
    if (!bases[buf]) {
        LLVMValueRef idx = llvm_const_i64(c, buf);
        LLVMValueRef slot = LLVMBuildGEP2(c->entry_b, c->t_ptr_i8, buffers, &idx, 1, "");
        LLVMValueRef raw = LLVMBuildLoad2(c->entry_b, c->t_ptr_i8, slot, "");
        char name[32];
        snprintf(name, sizeof name, "buf%d", buf);
        bases[buf] = LLVMBuildBitCast(c->entry_b, raw,
                                      LLVMPointerType(storage_type(c, c->kp->buffers[buf].dtype), 0), name);
    }
    return bases[buf];
}

/* Storage value(s) -> compute value(s). */
static LLVMValueRef from_storage(llvm_ctx *c, mc_dtype d, LLVMValueRef v, int w)
{
    switch (d) {
    case MC_F16: case MC_BF16: return llvm_half_bits_to_f32(c, d, v, w);
    case MC_BOOL: return LLVMBuildICmp(B, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
    default: return v;
    }
}

static LLVMValueRef to_storage(llvm_ctx *c, mc_dtype d, LLVMValueRef v, int w)
{
    switch (d) {
    case MC_F16: case MC_BF16: return llvm_f32_to_half_bits(c, d, v, w);
    case MC_BOOL: return LLVMBuildZExt(B, v, w == 1 ? c->t_i8 : LLVMVectorType(c->t_i8, (unsigned)w), "");
    default: return v;
    }
}

static LLVMValueRef element_ptr(llvm_ctx *c, LLVMTypeRef elem, LLVMValueRef base, LLVMValueRef off)
{
    return LLVMBuildInBoundsGEP2(B, elem, base, &off, 1, "");
}

LLVMValueRef llvm_load_view(llvm_ctx *c, const kir_kernel *k, int v, LLVMValueRef base,
                            const llvm_point *pt)
{
    mc_dtype d = c->kp->buffers[k->views[v].buffer].dtype;
    LLVMTypeRef elem = storage_type(c, d);
    unsigned align = (unsigned)mc_dtype_size(d);
    LLVMValueRef off = pt->view_offset[v];
    int w = pt->width;
    int64_t s = w > 1 ? pt->stride[v][pt->lane_dim] : 0;
    LLVMValueRef raw;
    if (w == 1 || s == 0) {
        raw = LLVMBuildLoad2(B, elem, element_ptr(c, elem, base, off), "");
        LLVMSetAlignment(raw, align);
        return llvm_splat(c, from_storage(c, d, raw, 1), w);
    }
    LLVMTypeRef vt = LLVMVectorType(elem, (unsigned)w);
    if (s == 1) {
        LLVMValueRef p = LLVMBuildBitCast(B, element_ptr(c, elem, base, off), LLVMPointerType(vt, 0), "");
        raw = LLVMBuildLoad2(B, vt, p, "");
        LLVMSetAlignment(raw, align);
    } else {
        raw = LLVMGetUndef(vt);
        for (int l = 0; l < w; l++) {
            LLVMValueRef o = LLVMBuildNSWAdd(B, off, llvm_const_i64(c, s * l), "");
            LLVMValueRef e = LLVMBuildLoad2(B, elem, element_ptr(c, elem, base, o), "");
            LLVMSetAlignment(e, align);
            raw = LLVMBuildInsertElement(B, raw, e, llvm_const_i32(c, l, 1), "");
        }
    }
    return from_storage(c, d, raw, w);
}

void llvm_store_view(llvm_ctx *c, const kir_kernel *k, int v, LLVMValueRef base,
                     const llvm_point *pt, LLVMValueRef value)
{
    mc_dtype d = c->kp->buffers[k->views[v].buffer].dtype;
    LLVMTypeRef elem = storage_type(c, d);
    unsigned align = (unsigned)mc_dtype_size(d);
    LLVMValueRef off = pt->view_offset[v];
    int w = pt->width;
    LLVMValueRef raw = to_storage(c, d, value, w);
    if (w == 1) {
        LLVMSetAlignment(LLVMBuildStore(B, raw, element_ptr(c, elem, base, off)), align);
        return;
    }
    int64_t s = pt->stride[v][pt->lane_dim];
    if (s == 1) {
        LLVMTypeRef vt = LLVMVectorType(elem, (unsigned)w);
        LLVMValueRef p = LLVMBuildBitCast(B, element_ptr(c, elem, base, off), LLVMPointerType(vt, 0), "");
        LLVMSetAlignment(LLVMBuildStore(B, raw, p), align);
        return;
    }
    /* Lane by lane, in order, so a broadcast store (stride 0) keeps the last lane as a scalar
     * loop would. */
    for (int l = 0; l < w; l++) {
        LLVMValueRef o = LLVMBuildNSWAdd(B, off, llvm_const_i64(c, s * l), "");
        LLVMValueRef e = LLVMBuildExtractElement(B, raw, llvm_const_i32(c, l, 1), "");
        LLVMSetAlignment(LLVMBuildStore(B, e, element_ptr(c, elem, base, o)), align);
    }
}

static LLVMValueRef emit_index(llvm_ctx *c, const llvm_point *pt, int dim, mc_dtype d)
{
    int w = pt->width;
    int pd = pt->dim_of ? pt->dim_of[dim] : dim;
    LLVMValueRef i32 = LLVMBuildTrunc(B, pt->idx[pd], c->t_i32, "");
    LLVMValueRef v = llvm_splat(c, i32, w);
    if (w > 1 && pd == pt->lane_dim) {
        LLVMValueRef lanes[64];
        for (int l = 0; l < w; l++)
            lanes[l] = llvm_const_i32(c, l, 1);
        v = LLVMBuildAdd(B, v, LLVMConstVector(lanes, (unsigned)w), "");
    }
    if (mc_dtype_is_float(d))
        return LLVMBuildSIToFP(B, v, llvm_value_type(c, d, w), "");
    if (d == MC_BOOL)
        return LLVMBuildICmp(B, LLVMIntNE, v, llvm_const_i32(c, 0, w), "");
    return v;
}

void llvm_emit_block(llvm_ctx *c, const kir_kernel *k, int blk, LLVMValueRef *bases,
                     const llvm_point *pt, LLVMValueRef *cur, LLVMValueRef *row,
                     LLVMValueRef *rowvals)
{
    const kir_block *bl = &k->blocks[blk];
    int w = pt->width;
    LLVMValueRef buffers = LLVMGetParam(c->fn, 0);
    for (int i = bl->first; i < bl->first + bl->count; i++) {
        const kir_instr *in = &k->code[i];
        LLVMValueRef v = NULL;
        switch (in->kind) {
        case KI_LOAD: {
            LLVMValueRef base = llvm_buffer_base(c, buffers, bases, k->views[in->view].buffer);
            v = llvm_load_view(c, k, in->view, base, pt);
            break;
        }
        case KI_CONST: v = llvm_const_value(c, in->dtype, in->value, w); break;
        case KI_INDEX: v = emit_index(c, pt, in->view, in->dtype); break;
        case KI_ROWVAL: MC_ASSERT(rowvals && rowvals[in->view]); v = llvm_splat(c, rowvals[in->view], w); break;
        case KI_ACC: MC_ASSERT(pt->acc); v = pt->acc; break;
        case KI_OP: {
            LLVMValueRef args[3];
            int nin = mc_op_table[in->op].min_in;
            if (in->op == MC_OP_CAST)
                nin = 1;
            for (int a = 0; a < nin; a++) {
                int src = in->arg[a];
                if (row && llvm_block_of(k, src) != blk)
                    args[a] = llvm_splat(c, row[src], w);
                else
                    args[a] = cur[src];
                MC_ASSERT(args[a]);
            }
            /* the operands' dtype: where's are its branches, the others' their first operand */
            mc_dtype in_dtype = k->code[in->arg[in->op == MC_OP_WHERE ? 1 : 0]].dtype;
            v = llvm_emit_op(c, in->op, in_dtype, in->dtype, args, w);
            break;
        }
        }
        cur[i] = v;
    }
    for (int s = 0; s < k->nstores; s++) {
        const kir_store *st = &k->stores[s];
        if (st->block != blk)
            continue;
        LLVMValueRef base = llvm_buffer_base(c, buffers, bases, k->views[st->view].buffer);
        LLVMValueRef val = (row && llvm_block_of(k, st->value) != blk) ? llvm_splat(c, row[st->value], w) : cur[st->value];
        llvm_store_view(c, k, st->view, base, pt, val);
    }
}

/* ---- the plan: merged dimensions --------------------------------------------------------- */

typedef struct loop_plan {
    bool pointwise;                 /* no reductions: every block per point, in one loop */
    int rank, nrow;                 /* after merging; rows are [0, nrow) */
    int64_t shape[MC_MAX_RANK];
    int dim_of[MC_MAX_RANK];        /* kernel dimension -> merged dimension */
    int64_t (*stride)[MC_MAX_RANK]; /* per view, merged */
    int64_t rows;                   /* product of the row dimensions */
    int64_t chunk, nchunks;         /* pointwise: the last axis in chunks */
} loop_plan;

static bool dim_indexed(const kir_kernel *k, int d)
{
    for (int i = 0; i < k->ncode; i++)
        if (k->code[i].kind == KI_INDEX && k->code[i].view == d)
            return true;
    return false;
}

/* Views read or written in loop blocks (whose strides along reduced dims matter). */
static void views_in_loops(const kir_kernel *k, bool pointwise, bool *in_loop)
{
    for (int v = 0; v < k->nviews; v++)
        in_loop[v] = pointwise;
    for (int i = 0; i < k->ncode; i++)
        if (k->code[i].kind == KI_LOAD && k->blocks[llvm_block_of(k, i)].loop)
            in_loop[k->code[i].view] = true;
    for (int s = 0; s < k->nstores; s++)
        if (k->blocks[k->stores[s].block].loop)
            in_loop[k->stores[s].view] = true;
}

static mc_status make_plan(const kir_kernel *k, loop_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    pl->pointwise = k->nreds == 0 && k->nrow == k->rank;
    for (int b = 0; b < k->nblocks && pl->pointwise; b++)
        if (k->blocks[b].loop)
            pl->pointwise = false;
    pl->stride = calloc((size_t)(k->nviews ? k->nviews : 1), sizeof *pl->stride);
    bool *in_loop = calloc((size_t)(k->nviews ? k->nviews : 1), sizeof *in_loop);
    if (!pl->stride || !in_loop) {
        free(in_loop);
        return mc_fail(MC_ERR_SYSTEM, "out of memory planning kernel %s", k->name);
    }
    views_in_loops(k, pl->pointwise, in_loop);
    int region_split = pl->pointwise ? 0 : k->nrow; /* merging never crosses rows | reduced */
    int n = 0;
    for (int d = 0; d < k->rank; d++) {
        bool merge = n > 0 && d != region_split && !dim_indexed(k, d) && !dim_indexed(k, d - 1);
        for (int v = 0; v < k->nviews && merge; v++) {
            if (d >= region_split && !in_loop[v])
                continue;
            if (pl->stride[v][n - 1] != k->views[v].stride[d] * k->shape[d])
                merge = false;
        }
        if (merge) {
            pl->shape[n - 1] *= k->shape[d];
            for (int v = 0; v < k->nviews; v++)
                pl->stride[v][n - 1] = k->views[v].stride[d];
        } else {
            pl->shape[n] = k->shape[d];
            for (int v = 0; v < k->nviews; v++)
                pl->stride[v][n] = k->views[v].stride[d];
            if (d == region_split)
                pl->nrow = n;
            n++;
        }
        pl->dim_of[d] = n - 1;
    }
    if (region_split >= k->rank)
        pl->nrow = n;
    pl->rank = n;
    free(in_loop);
    if (pl->pointwise && n > 0)
        pl->nrow = n - 1; /* the last axis is the loop */
    pl->rows = 1;
    for (int d = 0; d < pl->nrow; d++)
        pl->rows *= pl->shape[d];
    pl->nchunks = 1;
    pl->chunk = n > pl->nrow ? pl->shape[n - 1] : 1;
    if (pl->pointwise && n > 0 && pl->shape[n - 1] > 2 * CHUNK) {
        pl->chunk = CHUNK;
        pl->nchunks = (pl->shape[n - 1] + CHUNK - 1) / CHUNK;
    }
    return MC_OK;
}

/* ---- emission ------------------------------------------------------------------------------ */

typedef struct emit_state {
    const kir_kernel *k;
    loop_plan *pl;
    LLVMValueRef *bases;        /* per buffer */
    LLVMValueRef *row;          /* per instruction: row-block scalars */
    LLVMValueRef *cur;          /* per instruction: the current evaluation */
    LLVMValueRef *rowvals;      /* per reduction */
    LLVMValueRef *row_offset;   /* per view: offset of the row's first element */
    LLVMValueRef idx[MC_MAX_RANK];
} emit_state;

/* The innermost loop over [lo, hi) of merged dimension d, `width` lanes at a time, then one
 * lane at a time, evaluating `body` at each step. offsets[] are the views' offsets at index 0
 * of d. */
typedef void (*step_fn)(llvm_ctx *c, emit_state *e, const llvm_point *pt, void *arg);

static void point_at(llvm_ctx *c, emit_state *e, llvm_point *pt, LLVMValueRef *offs, LLVMValueRef *base_offs,
                     int d, LLVMValueRef j, int width)
{
    memset(pt, 0, sizeof *pt);
    pt->width = width;
    pt->lane_dim = width > 1 ? d : -1;
    pt->stride = (const int64_t(*)[MC_MAX_RANK])e->pl->stride;
    pt->dim_of = e->pl->dim_of;
    memcpy(pt->idx, e->idx, sizeof pt->idx);
    pt->idx[d] = j;
    for (int v = 0; v < e->k->nviews; v++)
        offs[v] = LLVMBuildNSWAdd(B, base_offs[v], LLVMBuildNSWMul(B, j, llvm_const_i64(c, e->pl->stride[v][d]), ""), "");
    pt->view_offset = offs;
}

static void inner_loop(llvm_ctx *c, emit_state *e, int d, LLVMValueRef lo, LLVMValueRef hi,
                       int64_t extent, LLVMValueRef *base_offs, step_fn body, void *arg,
                       void (*vector_done)(llvm_ctx *, emit_state *, void *), bool blocked)
{
    int w = c->lanes;
    int nv = e->k->nviews ? e->k->nviews : 1;
    LLVMValueRef *offs = calloc((size_t)nv, sizeof *offs);
    MC_ASSERT(offs);
    llvm_point pt;
    LLVMValueRef vend = lo;
    if (extent >= w) {
        LLVMValueRef n = LLVMBuildSub(B, hi, lo, "");
        vend = LLVMBuildAdd(B, lo, LLVMBuildMul(B, LLVMBuildSDiv(B, n, llvm_const_i64(c, w), ""), llvm_const_i64(c, w), ""), "");
        if (blocked && extent > SUM_BLOCK) {
            llvm_loop outer;
            llvm_loop_begin(c, &outer, lo, vend, llvm_const_i64(c, SUM_BLOCK), "jb");
            LLVMValueRef bend = LLVMBuildAdd(B, outer.index, llvm_const_i64(c, SUM_BLOCK), "");
            bend = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, bend, vend, ""), bend, vend, "");
            llvm_loop L;
            llvm_loop_begin(c, &L, outer.index, bend, llvm_const_i64(c, w), "jv");
            point_at(c, e, &pt, offs, base_offs, d, L.index, w);
            body(c, e, &pt, arg);
            llvm_loop_end(c, &L);
            if (vector_done)
                vector_done(c, e, arg);
            llvm_loop_end(c, &outer);
        } else {
            llvm_loop L;
            llvm_loop_begin(c, &L, lo, vend, llvm_const_i64(c, w), "jv");
            point_at(c, e, &pt, offs, base_offs, d, L.index, w);
            body(c, e, &pt, arg);
            llvm_loop_end(c, &L);
            if (vector_done)
                vector_done(c, e, arg);
        }
    }
    bool exact = extent % w == 0 && (e->pl->nchunks == 1 || e->pl->chunk % w == 0);
    if (!exact || extent < w) {
        llvm_loop L;
        llvm_loop_begin(c, &L, vend, hi, llvm_const_i64(c, 1), "j");
        point_at(c, e, &pt, offs, base_offs, d, L.index, 1);
        body(c, e, &pt, arg);
        llvm_loop_end(c, &L);
    }
    free(offs);
}

/* Pointwise: every block at each point. */
static void pointwise_step(llvm_ctx *c, emit_state *e, const llvm_point *pt, void *arg)
{
    for (int b = 0; b < e->k->nblocks; b++)
        llvm_emit_block(c, e->k, b, e->bases, pt, e->cur, NULL, e->rowvals);
}

/* A loop block with its reductions. */
typedef struct loop_block_arg {
    int blk;
    LLVMValueRef *vacc, *part, *sacc; /* per reduction: allocas (NULL if not in this block) */
} loop_block_arg;

static void loop_step(llvm_ctx *c, emit_state *e, const llvm_point *pt, void *p)
{
    loop_block_arg *a = p;
    llvm_emit_block(c, e->k, a->blk, e->bases, pt, e->cur, e->row, e->rowvals);
    for (int r = 0; r < e->k->nreds; r++) {
        const kir_reduce *rd = &e->k->reds[r];
        if (rd->block != a->blk)
            continue;
        LLVMValueRef slot = pt->width > 1 ? a->part[r] : a->sacc[r];
        LLVMTypeRef t = llvm_acc_type(c, rd->op, rd->dtype, pt->width);
        LLVMValueRef acc = LLVMBuildLoad2(B, t, slot, "");
        /* the value may come from a row block: the same for every element of the loop */
        LLVMValueRef x = llvm_block_of(e->k, rd->value) == a->blk ? e->cur[rd->value]
                                                                 : llvm_splat(c, e->row[rd->value], pt->width);
        MC_ASSERT(x);
        LLVMBuildStore(B, llvm_reduce_step(c, rd->op, rd->dtype, acc, x), slot);
    }
}

/* After a run of vector steps: fold the partial accumulators into the totals. */
static void loop_vector_done(llvm_ctx *c, emit_state *e, void *p)
{
    loop_block_arg *a = p;
    for (int r = 0; r < e->k->nreds; r++) {
        const kir_reduce *rd = &e->k->reds[r];
        if (rd->block != a->blk)
            continue;
        LLVMTypeRef t = llvm_acc_type(c, rd->op, rd->dtype, c->lanes);
        LLVMValueRef total = LLVMBuildLoad2(B, t, a->vacc[r], "");
        LLVMValueRef part = LLVMBuildLoad2(B, t, a->part[r], "");
        LLVMBuildStore(B, llvm_reduce_step(c, rd->op, MC_F32 == rd->dtype ? MC_F32 : rd->dtype, total, part), a->vacc[r]);
        LLVMBuildStore(B, llvm_reduce_identity(c, rd->op, rd->dtype, c->lanes), a->part[r]);
    }
}

/* Nested loops over merged dimensions [d, rank) for a loop block; the last is vectorized. */
static void reduced_loops(llvm_ctx *c, emit_state *e, int d, LLVMValueRef *offs, loop_block_arg *a)
{
    loop_plan *pl = e->pl;
    if (d == pl->rank - 1) {
        inner_loop(c, e, d, llvm_const_i64(c, 0), llvm_const_i64(c, pl->shape[d]), pl->shape[d], offs,
                   loop_step, a, loop_vector_done, true);
        return;
    }
    int nv = e->k->nviews ? e->k->nviews : 1;
    LLVMValueRef *inner = calloc((size_t)nv, sizeof *inner);
    MC_ASSERT(inner);
    llvm_loop L;
    llvm_loop_begin(c, &L, llvm_const_i64(c, 0), llvm_const_i64(c, pl->shape[d]), llvm_const_i64(c, 1), "r");
    e->idx[d] = L.index;
    for (int v = 0; v < e->k->nviews; v++)
        inner[v] = LLVMBuildNSWAdd(B, offs[v], LLVMBuildNSWMul(B, L.index, llvm_const_i64(c, pl->stride[v][d]), ""), "");
    reduced_loops(c, e, d + 1, inner, a);
    llvm_loop_end(c, &L);
    free(inner);
}

static void emit_loop_block(llvm_ctx *c, emit_state *e, int blk)
{
    const kir_kernel *k = e->k;
    int nr = k->nreds ? k->nreds : 1;
    loop_block_arg a = {.blk = blk};
    a.vacc = calloc((size_t)nr, sizeof *a.vacc);
    a.part = calloc((size_t)nr, sizeof *a.part);
    a.sacc = calloc((size_t)nr, sizeof *a.sacc);
    MC_ASSERT(a.vacc && a.part && a.sacc);
    for (int r = 0; r < k->nreds; r++) {
        const kir_reduce *rd = &k->reds[r];
        if (rd->block != blk)
            continue;
        a.vacc[r] = llvm_entry_alloca(c, llvm_acc_type(c, rd->op, rd->dtype, c->lanes), "acc");
        a.part[r] = llvm_entry_alloca(c, llvm_acc_type(c, rd->op, rd->dtype, c->lanes), "part");
        a.sacc[r] = llvm_entry_alloca(c, llvm_acc_type(c, rd->op, rd->dtype, 1), "sacc");
        LLVMBuildStore(B, llvm_reduce_identity(c, rd->op, rd->dtype, c->lanes), a.vacc[r]);
        LLVMBuildStore(B, llvm_reduce_identity(c, rd->op, rd->dtype, c->lanes), a.part[r]);
        LLVMBuildStore(B, llvm_reduce_identity(c, rd->op, rd->dtype, 1), a.sacc[r]);
    }
    if (e->pl->rank > e->pl->nrow) {
        reduced_loops(c, e, e->pl->nrow, e->row_offset, &a);
    } else {
        /* no reduced dimension left (every reduced axis has size 1): one scalar step */
        llvm_point pt = {.width = 1, .lane_dim = -1, .view_offset = e->row_offset,
                         .stride = (const int64_t(*)[MC_MAX_RANK])e->pl->stride, .dim_of = e->pl->dim_of};
        memcpy(pt.idx, e->idx, sizeof pt.idx);
        loop_step(c, e, &pt, &a);
    }
    for (int r = 0; r < k->nreds; r++) {
        const kir_reduce *rd = &k->reds[r];
        if (rd->block != blk)
            continue;
        LLVMValueRef v = LLVMBuildLoad2(B, llvm_acc_type(c, rd->op, rd->dtype, c->lanes), a.vacc[r], "");
        LLVMValueRef s = LLVMBuildLoad2(B, llvm_acc_type(c, rd->op, rd->dtype, 1), a.sacc[r], "");
        LLVMValueRef total = llvm_reduce_step(c, rd->op, rd->dtype == MC_I32 ? MC_I32 : MC_F32,
                                              llvm_reduce_lanes(c, rd->op, rd->dtype, v, c->lanes), s);
        e->rowvals[r] = llvm_acc_finish(c, rd->op, rd->dtype, total);
    }
    free(a.vacc);
    free(a.part);
    free(a.sacc);
}

mc_status llvm_emit_loop_kernel(llvm_ctx *c, const kir_kernel *k, llvm_kernel_info *info)
{
    loop_plan pl;
    mc_status st = make_plan(k, &pl);
    if (st != MC_OK)
        return st;
    emit_state e = {.k = k, .pl = &pl};
    size_t ncode = (size_t)(k->ncode ? k->ncode : 1), nv = (size_t)(k->nviews ? k->nviews : 1);
    e.bases = calloc((size_t)c->kp->nbuffers + 1, sizeof *e.bases);
    e.row = calloc(ncode, sizeof *e.row);
    e.cur = calloc(ncode, sizeof *e.cur);
    e.rowvals = calloc((size_t)(k->nreds ? k->nreds : 1), sizeof *e.rowvals);
    e.row_offset = calloc(nv, sizeof *e.row_offset);
    if (!e.bases || !e.row || !e.cur || !e.rowvals || !e.row_offset) {
        st = mc_fail(MC_ERR_SYSTEM, "out of memory generating kernel %s", k->name);
        goto done;
    }
    llvm_begin_function(c, k->name);
    LLVMValueRef begin = LLVMGetParam(c->fn, 1), end = LLVMGetParam(c->fn, 2);

    /* for u in [begin, end): row = u / nchunks, chunk = u % nchunks */
    llvm_loop U;
    llvm_loop_begin(c, &U, begin, end, llvm_const_i64(c, 1), "u");
    LLVMValueRef rowi = U.index, chunk = NULL;
    if (pl.nchunks > 1) {
        rowi = LLVMBuildSDiv(B, U.index, llvm_const_i64(c, pl.nchunks), "row");
        chunk = LLVMBuildSRem(B, U.index, llvm_const_i64(c, pl.nchunks), "chunk");
    }
    for (int d = 0; d < MC_MAX_RANK; d++)
        e.idx[d] = llvm_const_i64(c, 0);
    LLVMValueRef r = rowi;
    for (int d = pl.nrow - 1; d >= 0; d--) {
        if (d == 0) {
            e.idx[d] = r;
        } else {
            e.idx[d] = LLVMBuildSRem(B, r, llvm_const_i64(c, pl.shape[d]), "");
            r = LLVMBuildSDiv(B, r, llvm_const_i64(c, pl.shape[d]), "");
        }
    }
    for (int v = 0; v < k->nviews; v++) {
        LLVMValueRef off = llvm_const_i64(c, k->views[v].offset);
        for (int d = 0; d < pl.nrow; d++)
            off = LLVMBuildNSWAdd(B, off, LLVMBuildNSWMul(B, e.idx[d], llvm_const_i64(c, pl.stride[v][d]), ""), "");
        e.row_offset[v] = off;
    }

    if (pl.pointwise && pl.rank > 0) {
        int d = pl.rank - 1;
        LLVMValueRef lo = llvm_const_i64(c, 0), hi = llvm_const_i64(c, pl.shape[d]);
        if (pl.nchunks > 1) {
            lo = LLVMBuildNSWMul(B, chunk, llvm_const_i64(c, pl.chunk), "");
            LLVMValueRef h = LLVMBuildNSWAdd(B, lo, llvm_const_i64(c, pl.chunk), "");
            hi = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, h, hi, ""), h, hi, "");
        }
        inner_loop(c, &e, d, lo, hi, pl.shape[d], e.row_offset, pointwise_step, NULL, NULL, false);
    } else {
        llvm_point pt = {.width = 1, .lane_dim = -1, .view_offset = e.row_offset,
                         .stride = (const int64_t(*)[MC_MAX_RANK])pl.stride, .dim_of = pl.dim_of};
        memcpy(pt.idx, e.idx, sizeof pt.idx);
        for (int b = 0; b < k->nblocks; b++) {
            if (k->blocks[b].loop)
                emit_loop_block(c, &e, b);
            else
                llvm_emit_block(c, k, b, e.bases, &pt, e.row, e.row, e.rowvals);
        }
    }
    llvm_loop_end(c, &U);
    llvm_finish_function(c);

    int64_t points = 1;
    for (int d = 0; d < k->rank; d++)
        points *= k->shape[d];
    info->units = pl.rows * pl.nchunks;
    info->grain = 0;
    info->serial = points < SERIAL_POINTS || info->units < 2;
    info->scratch_bytes = 0;
done:
    free(pl.stride);
    free(e.bases);
    free(e.row);
    free(e.cur);
    free(e.rowvals);
    free(e.row_offset);
    return st;
}
