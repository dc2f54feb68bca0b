/* What every kind of CPU kernel is built from (llvm_kernel.c's loop nests, llvm_gemm.c,
 * llvm_attention.c): the kernel function and its entry block, counted loops, the loads and
 * stores of a kernel IR view at a point, and one block of kernel IR instructions evaluated at a
 * point (llvm_math.c gives each instruction's value).
 *
 * A view's load is a vector load where its stride along the vector axis is 1, one scalar
 * broadcast where it is 0 (a broadcast operand), and lane-by-lane loads otherwise, a stride read
 * at run time included (whatever its value at a binding: never 0, dims being at least 1). An
 * f32 add or subtract of a product computed in the same block becomes one llvm.fmuladd
 * (x * s + b): the bandwidth-bound kernels are, on two cores, close to compute-bound too. A
 * loop kernel's plan (llvm_plan.c) may also ask a block to keep values in, or take them from,
 * the row cache, and to compute exp(x - max) in a row whose range is known
 * (llvm_emit_block_planned). A gather checks its index, records a failure in the error word the
 * runtime reads after the kernel, and loads whole vectors where its index is the same in every
 * lane (an embedding's row).
 */
#include "backends/cpu/llvm.h"

#include <llvm-c/DebugInfo.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define B (c->b)

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
    c->nslots = 0;
    c->slots_overflow = false;
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

/* llvm_loop_end with a hint for LLVM's unroller on the back edge: `unroll` copies of the body
 * (1: do not unroll). A loop whose body is long already (a transcendental per element) gains
 * nothing from unrolling and loses to register spills when it is unrolled. */
void llvm_loop_end_unroll(llvm_ctx *c, llvm_loop *L, int unroll)
{
    LLVMBuildStore(B, LLVMBuildNSWAdd(B, L->index, L->step, ""), L->var);
    LLVMValueRef br = LLVMBuildBr(B, L->head);
    LLVMMetadataRef opt[2];
    int nopt = 1;
    if (unroll <= 1) {
        opt[0] = LLVMMDStringInContext2(c->ctx, "llvm.loop.unroll.disable", 24);
    } else {
        opt[0] = LLVMMDStringInContext2(c->ctx, "llvm.loop.unroll.count", 22);
        opt[1] = LLVMValueAsMetadata(llvm_const_i32(c, unroll, 1));
        nopt = 2;
    }
    /* a loop ID is a node whose first operand is itself */
    LLVMMetadataRef tmp = LLVMTemporaryMDNode(c->ctx, NULL, 0);
    LLVMMetadataRef ops[2] = {tmp, LLVMMDNodeInContext2(c->ctx, opt, (size_t)nopt)};
    LLVMMetadataRef id = LLVMMDNodeInContext2(c->ctx, ops, 2);
    LLVMMetadataReplaceAllUsesWith(tmp, id);
    LLVMSetMetadata(br, LLVMGetMDKindIDInContext(c->ctx, "llvm.loop", 9), LLVMMetadataAsValue(c->ctx, id));
    LLVMPositionBuilderAtEnd(B, L->exit);
}

int llvm_block_of(const kir_kernel *k, int i)
{
    for (int b = 0; b < k->nblocks; b++)
        if (i >= k->blocks[b].first && i < k->blocks[b].first + k->blocks[b].count)
            return b;
    MC_UNREACHABLE("instruction outside every block");
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

LLVMValueRef llvm_size(llvm_ctx *c, int64_t d)
{
    if (!mc_dim_is_sym(d) || !c->dims)
        return llvm_const_i64(c, d);
    int slot = 0;
    while (slot < c->nslots && c->slot_dim[slot] != d)
        slot++;
    if (slot == c->nslots) {
        if (slot == c->slots_cap) { /* as many as the kernel has distinct sizes: grown */
            int cap = c->slots_cap ? 2 * c->slots_cap : 16;
            int64_t *dims = realloc(c->slot_dim, (size_t)cap * sizeof *dims);
            if (dims)
                c->slot_dim = dims;
            LLVMValueRef *values = dims ? realloc(c->slot_value, (size_t)cap * sizeof *values) : NULL;
            if (values)
                c->slot_value = values;
            if (!values) {
                c->slots_overflow = true; /* the caller generates this kernel per binding instead */
                return llvm_const_i64(c, 1);
            }
            c->slots_cap = cap;
        }
        /* the sizes array is buffers[nbuffers + 2] (after the packed B and the error word) */
        LLVMValueRef at = llvm_const_i64(c, c->kp->nbuffers + 2);
        LLVMValueRef raw = LLVMBuildLoad2(c->entry_b, c->t_ptr_i8,
                                          LLVMBuildGEP2(c->entry_b, c->t_ptr_i8, LLVMGetParam(c->fn, 0), &at, 1, ""), "");
        LLVMValueRef sizes = LLVMBuildBitCast(c->entry_b, raw, LLVMPointerType(c->t_i64, 0), "sizes");
        LLVMValueRef i = llvm_const_i64(c, slot);
        char name[32];
        snprintf(name, sizeof name, "size%d", slot);
        LLVMValueRef v = LLVMBuildLoad2(c->entry_b, c->t_i64, LLVMBuildGEP2(c->entry_b, c->t_i64, sizes, &i, 1, ""), name);
        c->slot_dim[slot] = d;
        c->slot_value[slot] = v;
        c->nslots++;
    }
    return c->slot_value[slot];
}

int64_t llvm_size_max(const llvm_ctx *c, int64_t d, int64_t otherwise)
{
    if (!mc_dim_is_sym(d))
        return d;
    int64_t m = 0;
    return c->dims && mc_dims_max(c->dims, d, &m) ? m : otherwise;
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

/* off + s * l, lane l's offset along a vector axis of stride s: a constant as always, or a
 * stride read when the kernel runs (a log_softmax over the middle axis of [B, T, T] steps by
 * T), lane by lane either way. nsw: the add's flag, as each caller always built it. */
static LLVMValueRef lane_offset(llvm_ctx *c, LLVMValueRef off, int64_t s, int l, bool nsw)
{
    LLVMValueRef step;
    if (!mc_dim_is_sym(s))
        step = llvm_const_i64(c, s * l);
    else if (l == 0)
        return off;
    else
        step = LLVMBuildNSWMul(B, llvm_size(c, s), llvm_const_i64(c, l), "");
    return nsw ? LLVMBuildNSWAdd(B, off, step, "") : LLVMBuildAdd(B, off, step, "");
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
    } else if (s == 2) {
        /* every other element (a stride-2 pool or slice): two vector loads, the second starting
         * w - 1 further on, so that they cover exactly the lanes' first to last element (both
         * inside the buffer, so all between), and a shuffle of the lanes' elements, in place of
         * w loads lane by lane (ResNet-18's maxpool on a Xeon: 542 us of the network's ~25 ms) */
        LLVMValueRef lo = LLVMBuildLoad2(B, vt, LLVMBuildBitCast(B, element_ptr(c, elem, base, off), LLVMPointerType(vt, 0), ""), "");
        LLVMValueRef hi_off = LLVMBuildNSWAdd(B, off, llvm_const_i64(c, w - 1), "");
        LLVMValueRef hi = LLVMBuildLoad2(B, vt, LLVMBuildBitCast(B, element_ptr(c, elem, base, hi_off), LLVMPointerType(vt, 0), ""), "");
        LLVMSetAlignment(lo, align);
        LLVMSetAlignment(hi, align);
        LLVMValueRef pick[64];
        for (int l = 0; l < w; l++) /* lane l is element 2l: lo's, or hi's 2l - (w - 1) */
            pick[l] = llvm_const_i32(c, 2 * l < w ? 2 * l : w + 2 * l - (w - 1), 1);
        raw = LLVMBuildShuffleVector(B, lo, hi, LLVMConstVector(pick, (unsigned)w), "");
    } else {
        raw = LLVMGetUndef(vt);
        for (int l = 0; l < w; l++) {
            LLVMValueRef o = lane_offset(c, off, s, l, true);
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
        LLVMValueRef store = LLVMBuildStore(B, raw, p);
        if (pt->nontemporal && pt->nontemporal[v]) {
            /* the caller checked that the address is aligned to the whole vector */
            align *= (unsigned)w;
            LLVMMetadataRef one = LLVMValueAsMetadata(llvm_const_i32(c, 1, 1));
            LLVMSetMetadata(store, LLVMGetMDKindIDInContext(c->ctx, "nontemporal", 11),
                            LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, &one, 1)));
        }
        LLVMSetAlignment(store, align);
        return;
    }
    /* Lane by lane, in order, so a broadcast store (stride 0) keeps the last lane as a scalar
     * loop would. */
    for (int l = 0; l < w; l++) {
        LLVMValueRef o = lane_offset(c, off, s, l, true);
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

/* Load (value NULL) or store the row cache's row `slot` at the point. */
static LLVMValueRef row_cache_access(llvm_ctx *c, const llvm_row_cache *rc, const llvm_point *pt, int slot,
                                     LLVMValueRef value)
{
    LLVMTypeRef pf = LLVMPointerType(c->t_f32, 0);
    LLVMValueRef base = LLVMBuildBitCast(B, LLVMGetParam(c->fn, 3), pf, "");
    LLVMValueRef off = LLVMBuildNSWAdd(B, llvm_const_i64(c, slot * rc->extent), pt->idx[rc->dim], "");
    if (rc->shift)
        off = LLVMBuildNSWAdd(B, off, rc->shift, "");
    LLVMValueRef p = LLVMBuildInBoundsGEP2(B, c->t_f32, base, &off, 1, "");
    LLVMTypeRef t = llvm_value_type(c, MC_F32, pt->width);
    p = LLVMBuildBitCast(B, p, LLVMPointerType(t, 0), "");
    LLVMValueRef ins = value ? LLVMBuildStore(B, value, p) : LLVMBuildLoad2(B, t, p, "");
    LLVMSetAlignment(ins, 4);
    return value ? NULL : ins;
}

/* Instruction src's value as an operand in block blk: a row-block value splat across the
 * lanes, or the current evaluation. */
static LLVMValueRef operand(llvm_ctx *c, const kir_kernel *k, int blk, int src, LLVMValueRef *cur, LLVMValueRef *row,
                            int w)
{
    if (row && llvm_block_of(k, src) != blk)
        return llvm_splat(c, row[src], w);
    return cur[src];
}

/* ---- gathers ------------------------------------------------------------------------------ */

/* Whether instruction i of block blk has one value across the lanes of the point: it reads
 * nothing that moves along the vector axis. An embedding's index is such a value (one token
 * per row of the table), so its row is read as whole vectors. */
static bool lane_uniform(const kir_kernel *k, int blk, int i, const llvm_point *pt, const LLVMValueRef *row,
                         int depth)
{
    if (pt->width == 1 || (row && llvm_block_of(k, i) != blk))
        return true;
    if (depth > 16)
        return false;
    const kir_instr *in = &k->code[i];
    switch (in->kind) {
    case KI_CONST: case KI_SIZE: case KI_ROWVAL: return true;
    case KI_LOAD: return pt->stride[in->view][pt->lane_dim] == 0;
    case KI_INDEX: return (pt->dim_of ? pt->dim_of[in->view] : in->view) != pt->lane_dim;
    case KI_ACC: return false;
    case KI_GATHER:
        return pt->stride[in->view][pt->lane_dim] == 0 && lane_uniform(k, blk, in->arg[0], pt, row, depth + 1);
    case KI_OP: {
        int nin = in->op == MC_OP_CAST ? 1 : mc_op_table[in->op].min_in;
        for (int a = 0; a < nin; a++)
            if (!lane_uniform(k, blk, in->arg[a], pt, row, depth + 1))
                return false;
        return true;
    }
    }
    return false;
}

/* Where any of the lanes' indices is out of range: record check `check` and the first such
 * index in the error word (buffers[nbuffers + 1], llvm_backend.c), unless another check was
 * recorded first; then go on (the lanes read index 0). */
static void gather_record_failure(llvm_ctx *c, LLVMValueRef any_bad, LLVMValueRef bad, LLVMValueRef idx, int w,
                                  int check)
{
    LLVMBasicBlockRef fail = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "gather_out_of_range");
    LLVMBasicBlockRef record = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "gather_record");
    LLVMBasicBlockRef cont = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "gather_ok");
    LLVMBuildCondBr(B, any_bad, fail, cont);
    LLVMPositionBuilderAtEnd(B, fail);
    LLVMValueRef at = llvm_const_i64(c, c->kp->nbuffers + 1);
    LLVMValueRef slot = LLVMBuildGEP2(B, c->t_ptr_i8, LLVMGetParam(c->fn, 0), &at, 1, "");
    LLVMValueRef word = LLVMBuildBitCast(B, LLVMBuildLoad2(B, c->t_ptr_i8, slot, ""),
                                         LLVMPointerType(c->t_i32, 0), "gather_error");
    LLVMValueRef first = idx;
    if (w > 1) {
        first = llvm_const_i32(c, 0, 1);
        for (int l = w - 1; l >= 0; l--) {
            LLVMValueRef lane = llvm_const_i32(c, l, 1);
            first = LLVMBuildSelect(B, LLVMBuildExtractElement(B, bad, lane, ""),
                                    LLVMBuildExtractElement(B, idx, lane, ""), first, "");
        }
    }
    LLVMValueRef cx = LLVMBuildAtomicCmpXchg(B, word, llvm_const_i32(c, 0, 1), llvm_const_i32(c, check + 1, 1),
                                             LLVMAtomicOrderingMonotonic, LLVMAtomicOrderingMonotonic, 0);
    LLVMBuildCondBr(B, LLVMBuildExtractValue(B, cx, 1, ""), record, cont);
    LLVMPositionBuilderAtEnd(B, record);
    LLVMValueRef one = llvm_const_i64(c, 1);
    LLVMSetAlignment(LLVMBuildStore(B, first, LLVMBuildInBoundsGEP2(B, c->t_i32, word, &one, 1, "")), 4);
    LLVMBuildBr(B, cont);
    LLVMPositionBuilderAtEnd(B, cont);
}

/* A gather (kir.h): the index checked and wrapped, then the view's element that far along the
 * gathered axis: whole vectors where the index is the same in every lane, else lane by lane. */
static LLVMValueRef emit_gather(llvm_ctx *c, const kir_kernel *k, int blk, const kir_instr *in, LLVMValueRef base,
                                const llvm_point *pt, LLVMValueRef *cur, LLVMValueRef *row)
{
    int w = pt->width, v = in->view;
    LLVMValueRef idx = operand(c, k, blk, in->arg[0], cur, row, w);
    bool uniform = lane_uniform(k, blk, in->arg[0], pt, row, 0);
    int lanes = uniform ? 1 : w;
    LLVMValueRef i = uniform && w > 1 ? LLVMBuildExtractElement(B, idx, llvm_const_i32(c, 0, 1), "") : idx;
    LLVMTypeRef t64 = lanes > 1 ? LLVMVectorType(c->t_i64, (unsigned)lanes) : c->t_i64;
    LLVMValueRef wide = LLVMBuildSExt(B, i, t64, "");
    LLVMValueRef n = llvm_splat(c, llvm_size(c, in->size), lanes), zero = LLVMConstNull(t64);
    LLVMValueRef neg = LLVMBuildICmp(B, LLVMIntSLT, wide, zero, "");
    LLVMValueRef wrapped = LLVMBuildAdd(B, wide, LLVMBuildSelect(B, neg, n, zero, ""), "");
    LLVMValueRef bad = LLVMBuildICmp(B, LLVMIntUGE, wrapped, n, "gather_bad");
    LLVMValueRef safe = LLVMBuildSelect(B, bad, zero, wrapped, "");
    LLVMValueRef any = bad;
    if (lanes > 1) {
        LLVMTypeRef bt = LLVMTypeOf(bad);
        any = llvm_call_intrinsic(c, "llvm.vector.reduce.or", &bt, 1, &bad, 1);
    }
    gather_record_failure(c, any, bad, i, lanes, in->check);
    LLVMValueRef stride = llvm_splat(c, llvm_size(c, in->stride), lanes);
    LLVMValueRef step = LLVMBuildMul(B, safe, stride, "");
    if (uniform) {
        /* the view's offset moved by the index for this one load, then put back */
        LLVMValueRef at = pt->view_offset[v];
        pt->view_offset[v] = LLVMBuildAdd(B, at, step, "");
        LLVMValueRef r = llvm_load_view(c, k, v, base, pt);
        pt->view_offset[v] = at;
        return r;
    }
    mc_dtype d = c->kp->buffers[k->views[v].buffer].dtype;
    LLVMTypeRef elem = storage_type(c, d);
    int64_t s = pt->stride[v][pt->lane_dim];
    LLVMValueRef raw = LLVMGetUndef(LLVMVectorType(elem, (unsigned)w));
    for (int l = 0; l < w; l++) {
        LLVMValueRef lane = llvm_const_i32(c, l, 1);
        LLVMValueRef o = lane_offset(c, pt->view_offset[v], s, l, false);
        o = LLVMBuildAdd(B, o, LLVMBuildExtractElement(B, step, lane, ""), "");
        LLVMValueRef e = LLVMBuildLoad2(B, elem, element_ptr(c, elem, base, o), "");
        LLVMSetAlignment(e, (unsigned)mc_dtype_size(d));
        raw = LLVMBuildInsertElement(B, raw, e, lane, "");
    }
    return from_storage(c, d, raw, w);
}

/* x * y - m where m is a row's max or min (softmax's x * scale - max) must be exactly 0 at the
 * extremal element, as it is when the product is rounded before the subtraction; a multiply-add
 * gives instead the product's rounding error, which is not small in absolute terms (about 1e30
 * for a product of 1e37: exp of it is inf, and the row's softmax NaN). Only a power-of-two
 * constant factor, whose products are exact, keeps the multiply-add (softmax of x * 0.125). */
static bool minus_extremum_needs_rounding(const kir_kernel *k, const kir_instr *product, int sub)
{
    const kir_instr *m = &k->code[sub];
    if (m->kind != KI_ROWVAL || (k->reds[m->view].op != MC_OP_MAX && k->reds[m->view].op != MC_OP_MIN))
        return false;
    for (int i = 0; i < 2; i++) {
        const kir_instr *f = &k->code[product->arg[i]];
        int e;
        if (f->kind == KI_CONST && f->value != 0 && isfinite(f->value) && fabs(frexp(f->value, &e)) == 0.5)
            return false;
    }
    return true;
}

/* An f32 add or subtract of an f32 product computed in the same block, a * b + d (x * s + b,
 * softmax's x * scale - max), as one llvm.fmuladd: a fused multiply-add where the host has
 * one, with one rounding instead of two (the product itself is still emitted; where nothing
 * else uses it, it is deleted as dead code). NULL where the instruction is not of that form. */
static LLVMValueRef contracted(llvm_ctx *c, const kir_kernel *k, int blk, const kir_instr *in, LLVMValueRef *args,
                               LLVMValueRef *cur, LLVMValueRef *row, const llvm_row_cache *rc, int w)
{
    if ((in->op != MC_OP_ADD && in->op != MC_OP_SUB) || in->dtype != MC_F32)
        return NULL;
    for (int a = 0; a < 2; a++) {
        int src = in->arg[a];
        const kir_instr *m = &k->code[src];
        /* a product loaded from the row cache: its operands are not evaluated in this pass */
        if (rc && rc->load && rc->load[src] >= 0)
            continue;
        if (m->kind != KI_OP || m->op != MC_OP_MUL || m->dtype != MC_F32 || llvm_block_of(k, src) != blk ||
            k->code[m->arg[0]].dtype != MC_F32 || k->code[in->arg[1 - a]].dtype != MC_F32)
            continue;
        if (in->op == MC_OP_SUB && a == 0 && minus_extremum_needs_rounding(k, m, in->arg[1]))
            continue;
        LLVMValueRef x = operand(c, k, blk, m->arg[0], cur, row, w);
        LLVMValueRef y = operand(c, k, blk, m->arg[1], cur, row, w);
        LLVMValueRef d = args[1 - a];
        if (in->op == MC_OP_SUB) {
            if (a == 0)
                d = LLVMBuildFNeg(B, d, ""); /* a b - d */
            else
                x = LLVMBuildFNeg(B, x, ""); /* d - a b */
        }
        LLVMValueRef fargs[3] = {x, y, d};
        LLVMTypeRef t = LLVMTypeOf(x);
        return llvm_call_intrinsic(c, "llvm.fmuladd", &t, 1, fargs, 3);
    }
    return NULL;
}

/* Whether a row's exp(x - max) arguments all lie in [-87, 1] (plan_exp_ranges): its max, the
 * minimum and the sum of the same value are finite (no NaN or infinity in the row, so the
 * plain max and min are exact), the minimum is within 86 of the max, and |max| <= 2^24, so the
 * rounding of a subtraction fused into a multiply-add moves an argument by 1 at most. */
static LLVMValueRef row_in_range(llvm_ctx *c, LLVMValueRef max, LLVMValueRef min, LLVMValueRef sum)
{
    LLVMTypeRef f = c->t_f32;
    LLVMValueRef d = LLVMBuildFSub(B, min, max, "");
    LLVMValueRef ok = LLVMBuildFCmp(B, LLVMRealOGE, d, LLVMConstReal(f, -86.0), "");
    LLVMValueRef am = llvm_call_intrinsic(c, "llvm.fabs", &f, 1, &max, 1);
    ok = LLVMBuildAnd(B, ok, LLVMBuildFCmp(B, LLVMRealOLE, am, LLVMConstReal(f, 16777216.0), ""), "");
    LLVMValueRef as = llvm_call_intrinsic(c, "llvm.fabs", &f, 1, &sum, 1);
    return LLVMBuildAnd(B, ok, LLVMBuildFCmp(B, LLVMRealOLT, as, LLVMConstReal(f, INFINITY), ""), "row_in_range");
}

/* Whether a row's exp(x - max) arguments are all at most 1, -inf or NaN: its max is finite and
 * |max| <= 2^24 (a masked row, whose -inf the minimum and the sum of row_in_range see). Such a
 * row takes exp_softmax, which maps -inf to 0 without the checked exp's slow path for every
 * vector that holds one: a causal softmax [16, 512, 512] on one thread 7.8 -> 5.0 ms. */
static LLVMValueRef row_below_max(llvm_ctx *c, LLVMValueRef max)
{
    LLVMTypeRef f = c->t_f32;
    LLVMValueRef am = llvm_call_intrinsic(c, "llvm.fabs", &f, 1, &max, 1);
    return LLVMBuildFCmp(B, LLVMRealOLE, am, LLVMConstReal(f, 16777216.0), "row_below_max");
}

void llvm_emit_block_planned(llvm_ctx *c, const kir_kernel *k, int blk, LLVMValueRef *bases, const llvm_point *pt,
                       LLVMValueRef *cur, LLVMValueRef *row, LLVMValueRef *rowvals, const llvm_row_cache *rc,
                       const int *guard)
{
    const kir_block *bl = &k->blocks[blk];
    int w = pt->width;
    LLVMValueRef buffers = LLVMGetParam(c->fn, 0);
    for (int i = bl->first; i < bl->first + bl->count; i++) {
        const kir_instr *in = &k->code[i];
        LLVMValueRef v = NULL;
        if (rc && rc->load && rc->load[i] >= 0) {
            cur[i] = row_cache_access(c, rc, pt, rc->load[i], NULL);
            continue;
        }
        switch (in->kind) {
        case KI_LOAD: {
            LLVMValueRef base = llvm_buffer_base(c, buffers, bases, k->views[in->view].buffer);
            v = llvm_load_view(c, k, in->view, base, pt);
            break;
        }
        case KI_GATHER: {
            LLVMValueRef base = llvm_buffer_base(c, buffers, bases, k->views[in->view].buffer);
            v = emit_gather(c, k, blk, in, base, pt, cur, row);
            break;
        }
        case KI_CONST: v = llvm_const_value(c, in->dtype, in->value, w); break;
        case KI_SIZE: {
            /* value / n (value * n) with n read at run time, rounded to f32 as kir_bind's constant
             * is; an i32 one is value * n (sized_refusal takes no integer 1/n) */
            if (!mc_dtype_is_float(in->dtype)) {
                MC_ASSERT(in->times && in->dtype == MC_I32);
                LLVMValueRef n = LLVMBuildTrunc(B, llvm_size(c, in->size), c->t_i32, "");
                v = llvm_splat(c, LLVMBuildMul(B, n, LLVMConstInt(c->t_i32, (unsigned long long)(long long)in->value, 1), ""), w);
                break;
            }
            LLVMValueRef n = LLVMBuildSIToFP(B, llvm_size(c, in->size), c->t_f64, "");
            LLVMValueRef k = LLVMConstReal(c->t_f64, in->value);
            LLVMValueRef q = in->times ? LLVMBuildFMul(B, k, n, "") : LLVMBuildFDiv(B, k, n, "");
            v = llvm_splat(c, LLVMBuildFPTrunc(B, q, c->t_f32, ""), w);
            break;
        }
        case KI_INDEX: v = emit_index(c, pt, in->view, in->dtype); break;
        case KI_ROWVAL: MC_ASSERT(rowvals && rowvals[in->view]); v = llvm_splat(c, rowvals[in->view], w); break;
        case KI_ACC: MC_ASSERT(pt->acc); v = pt->acc; break;
        case KI_OP: {
            LLVMValueRef args[3];
            int nin = mc_op_table[in->op].min_in;
            if (in->op == MC_OP_CAST)
                nin = 1;
            for (int a = 0; a < nin; a++) {
                args[a] = operand(c, k, blk, in->arg[a], cur, row, w);
                MC_ASSERT(args[a]);
            }
            if (guard && guard[i] >= 0 && w > 1 && rowvals) {
                /* exp(x - max) of a row whose range is known (plan_exp_ranges) */
                int r = k->code[k->code[in->arg[0]].arg[1]].view, g = guard[i];
                if (rowvals[r] && rowvals[g] && rowvals[g + 1]) {
                    v = llvm_emit_exp_in_range(c, args[0], w, row_in_range(c, rowvals[r], rowvals[g], rowvals[g + 1]),
                                               row_below_max(c, rowvals[r]));
                    break;
                }
            }
            if ((v = contracted(c, k, blk, in, args, cur, row, rc, w)))
                break;
            /* the operands' dtype: where's are its branches, the others' their first operand */
            mc_dtype in_dtype = k->code[in->arg[in->op == MC_OP_WHERE ? 1 : 0]].dtype;
            mc_op op = in->op;
            if (op == MC_OP_DIV && mc_dtype_is_float(in_dtype) && bl->loop && row && llvm_block_of(k, in->arg[1]) != blk) {
                /* by a row's value (softmax's sum): one division per row, a product per element */
                LLVMValueRef inv = LLVMBuildFDiv(B, LLVMConstReal(c->t_f32, 1.0), row[in->arg[1]], "");
                args[1] = llvm_splat(c, inv, w);
                op = MC_OP_MUL;
            }
            v = llvm_emit_op(c, op, in_dtype, in->dtype, args, w);
            break;
        }
        }
        /* a half-typed result that is not a rounding cast keeps f32 precision, within its
         * type's range (mc_saturate_to_dtype) */
        if ((in->kind == KI_OP && in->op != MC_OP_CAST) || in->kind == KI_ACC || in->kind == KI_ROWVAL)
            v = llvm_saturate(c, in->dtype, v, w);
        cur[i] = v;
        if (rc && rc->save && rc->save[i] >= 0)
            row_cache_access(c, rc, pt, rc->save[i], v);
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

void llvm_emit_block(llvm_ctx *c, const kir_kernel *k, int blk, LLVMValueRef *bases,
                     const llvm_point *pt, LLVMValueRef *cur, LLVMValueRef *row,
                     LLVMValueRef *rowvals)
{
    llvm_emit_block_planned(c, k, blk, bases, pt, cur, row, rowvals, NULL, NULL);
}
