/* GEMM kernels: C[batch.., m, n] = sum_k A[batch.., m, k] B[batch.., k, n], then the fused
 * epilogue, generated as LLVM IR.
 *
 * The structure is the classic one of high-performance BLAS (Goto's algorithm), built per
 * kernel with every size and stride a constant:
 *
 *   for each unit (batch, a block of NC columns, a block of rows)     <- threads take units
 *     for pc in K by KC:           pack B[pc:pc+KC, cols] into NR-wide panels   (L2)
 *       for ic in rows by MC:      pack A[ic:ic+MC, pc:pc+KC] into MR-tall panels (L2/L1)
 *         for jr in cols by NR:
 *           for ir in rows by MR:  micro-kernel: an MR x NR tile in registers, kc FMA steps
 *                                  (MR broadcasts of A times NR/lanes vectors of B)
 *                                  then: first K block? start at 0 : add the partial sums kept
 *                                  in the unit's f32 buffer; last K block? run the epilogue on
 *                                  the registers and store : keep the partial sums
 *
 * Packing reads A and B through their views' strides, so a transposed operand (linear's
 * weight, a transpose folded into a view) costs nothing beyond the packing every GEMM does; it
 * also converts f16/bf16 to f32 and pads edge panels with zeros, so the micro-kernel never
 * sees an edge.
 *
 * Two cases skip the packing that dominates small GEMMs (a 32 x 256 x 256 linear spends as
 * long packing its weight as multiplying). B a param (a weight): the runtime packs all of B
 * once into a persistent buffer (llvm_pack_b, plain C: it runs once, and generating it would
 * cost compile time) laid out as the per-call packing would be (K blocks of KC rows, each a
 * row of NR-wide panels over all of N), again only when the param changes; the column blocks
 * that units take can then be narrow, so a GEMM with few rows still gives every thread work.
 * An f32 A that is small (one MC block of rows) or whose rows are contiguous along K: the
 * micro-kernel broadcasts A's elements from where they are, one pointer per tile row (rows
 * past M clamped to the last one: their results are never stored). Packing A would be
 * repeated for every column block a unit takes (8 times on a 2048^2 matmul, ~10% of its
 * time); a transposed A of many rows is still packed (each k step would touch a new page).
 *
 * The one tile that M cuts short (M % MR rows, a constant) runs a micro-kernel of just those
 * rows: for M = 32, six full tiles of 6 would compute 36 rows. The epilogue (bias,
 * activation, residual, the store with its dtype conversion) runs on full tiles as vectors
 * straight from the accumulators; edge tiles go through a small stack buffer and scalar code.
 * Batch dimensions are a loop over units, each with its own offsets, whatever their strides.
 */
#include "backends/cpu/llvm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#define B (c->b)

enum { MR = 6, MC = 72, NC = 256, MAX_ROWS = 16 * MC };

/* K block: 256 rows (a 32 KiB panel of B at NR = 32 floats, in a 48 KiB L1 beside A's
 * micro-panel). MINIC_GEMM_KC=N (a multiple of 8, 32 to 2048) picks another for every GEMM, an
 * experiment: on a Xeon's 2 cores ResNet-18's layer-4 GEMMs (K = 4608, B the weights packed
 * ahead, streamed from L3) ran at 113 GFLOP/s against 207 for layer 1's (2026-11-28). The value
 * is a constant of the generated code, so the kernel cache keeps one entry per choice. */
static int64_t gemm_kc(void)
{
    const char *e = getenv("MINIC_GEMM_KC");
    long v = e ? strtol(e, NULL, 10) : 0;
    return v >= 32 && v <= 2048 && v % 8 == 0 ? (int64_t)v : 256;
}

typedef struct gemm_plan {
    int nb;                  /* batch rank */
    int64_t nbatch, M, N, K; /* M may be symbolic (llvm_ctx.dims), and nbatch then 0 */
    int nr, nv, lanes;       /* micro-tile width NR = nv vectors of `lanes` */
    int64_t ms, msplit, nblocks;
    int64_t ncb;             /* columns per unit (NC, or narrower when B is packed once) */
    int64_t a_m, a_k, b_k, b_n; /* operand strides */
    bool packed_b;           /* B is a param, packed once by the runtime (llvm_pack_b) */
    bool direct_a;           /* A is read in place by the micro-kernel, not packed */
    bool swap;               /* computes C^T = B^T A^T: A's view plays B, B's plays A (below) */
    int va, vb;              /* the kernel views read as A and as B (swapped or not) */
    int64_t np;              /* packed B: N rounded up to NR, the length of a packed row */
    int64_t packed_bytes;    /* packed B: K * np floats */
    int64_t kc;              /* K block (gemm_kc) */
} gemm_plan;

static LLVMValueRef i64c(llvm_ctx *c, int64_t v) { return llvm_const_i64(c, v); }

static LLVMValueRef min64(llvm_ctx *c, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, a, b, ""), a, b, "");
}

static LLVMValueRef fptr(llvm_ctx *c, LLVMValueRef base, LLVMValueRef off)
{
    return LLVMBuildInBoundsGEP2(B, c->t_f32, base, &off, 1, "");
}

static LLVMValueRef vptr(llvm_ctx *c, LLVMValueRef base, LLVMValueRef off, int lanes)
{
    return LLVMBuildBitCast(B, fptr(c, base, off), LLVMPointerType(LLVMVectorType(c->t_f32, (unsigned)lanes), 0), "");
}

static LLVMTypeRef storage_elem(llvm_ctx *c, mc_dtype d)
{
    return d == MC_F32 ? c->t_f32 : c->t_i16;
}

/* Load `width` consecutive elements (width 1: one) of an operand as f32. */
static LLVMValueRef load_operand(llvm_ctx *c, mc_dtype d, LLVMValueRef base, LLVMValueRef off, int width)
{
    LLVMTypeRef elem = storage_elem(c, d);
    LLVMValueRef p = LLVMBuildInBoundsGEP2(B, elem, base, &off, 1, "");
    LLVMTypeRef t = width == 1 ? elem : LLVMVectorType(elem, (unsigned)width);
    if (width > 1)
        p = LLVMBuildBitCast(B, p, LLVMPointerType(t, 0), "");
    LLVMValueRef v = LLVMBuildLoad2(B, t, p, "");
    LLVMSetAlignment(v, (unsigned)mc_dtype_size(d));
    return d == MC_F32 ? v : llvm_half_bits_to_f32(c, d, v, width);
}

static void store_f32(llvm_ctx *c, LLVMValueRef base, LLVMValueRef off, LLVMValueRef v, int width)
{
    LLVMValueRef p = width == 1 ? fptr(c, base, off) : vptr(c, base, off, width);
    LLVMSetAlignment(LLVMBuildStore(B, v, p), 4);
}

/* Pack `valid` rows (of an R-row panel layout) by kc columns of an operand:
 * dst[p * kc + kk * R + r] = src[off + (p + r) * row_stride + kk * col_stride], zero-padded to
 * a multiple of R rows. */
static void emit_pack(llvm_ctx *c, LLVMValueRef dst, mc_dtype d, LLVMValueRef src, LLVMValueRef off,
                      LLVMValueRef valid, LLVMValueRef kc, int64_t row_stride, int64_t col_stride, int R)
{
    LLVMValueRef total = LLVMBuildMul(B, LLVMBuildSDiv(B, LLVMBuildAdd(B, valid, i64c(c, R - 1), ""), i64c(c, R), ""), i64c(c, R), "");
    llvm_loop P;
    llvm_loop_begin(c, &P, i64c(c, 0), total, i64c(c, R), "pp");
    LLVMValueRef panel = LLVMBuildMul(B, P.index, kc, "");
    LLVMValueRef nvalid = min64(c, i64c(c, R), LLVMBuildSub(B, valid, P.index, ""));
    LLVMValueRef poff = LLVMBuildNSWAdd(B, off, LLVMBuildNSWMul(B, P.index, llvm_size(c, row_stride), ""), "");
    LLVMValueRef full = LLVMBuildICmp(B, LLVMIntEQ, nvalid, i64c(c, R), "");
    LLVMBasicBlockRef bfull = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "pack_full");
    LLVMBasicBlockRef bpart = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "pack_edge");
    LLVMBasicBlockRef bdone = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "pack_done");
    LLVMBuildCondBr(B, full, bfull, bpart);

    /* full panel */
    LLVMPositionBuilderAtEnd(B, bfull);
    if (row_stride == 1) {
        /* rows contiguous: one vector per k */
        llvm_loop K;
        llvm_loop_begin(c, &K, i64c(c, 0), kc, i64c(c, 1), "pk");
        LLVMValueRef v = load_operand(c, d, src, LLVMBuildNSWAdd(B, poff, LLVMBuildNSWMul(B, K.index, llvm_size(c, col_stride), ""), ""), R);
        store_f32(c, dst, LLVMBuildAdd(B, panel, LLVMBuildMul(B, K.index, i64c(c, R), ""), ""), v, R);
        llvm_loop_end(c, &K);
    } else if (col_stride == 1) {
        /* each row contiguous along k: rows in a loop, k in vectors whose lanes go to the
         * row's column of the panel, then the rest of k one at a time */
        int L = c->native_lanes;
        llvm_loop Rl;
        llvm_loop_begin(c, &Rl, i64c(c, 0), i64c(c, R), i64c(c, 1), "pr");
        LLVMValueRef roff = LLVMBuildNSWAdd(B, poff, LLVMBuildNSWMul(B, Rl.index, llvm_size(c, row_stride), ""), "");
        LLVMValueRef dcol = LLVMBuildAdd(B, panel, Rl.index, "");
        LLVMValueRef kv = LLVMBuildMul(B, LLVMBuildSDiv(B, kc, i64c(c, L), ""), i64c(c, L), "");
        llvm_loop K;
        llvm_loop_begin(c, &K, i64c(c, 0), kv, i64c(c, L), "pkv");
        LLVMValueRef v = load_operand(c, d, src, LLVMBuildNSWAdd(B, roff, K.index, ""), L);
        for (int l = 0; l < L; l++) {
            LLVMValueRef at = LLVMBuildMul(B, LLVMBuildAdd(B, K.index, i64c(c, l), ""), i64c(c, R), "");
            store_f32(c, dst, LLVMBuildAdd(B, dcol, at, ""), LLVMBuildExtractElement(B, v, llvm_const_i32(c, l, 1), ""), 1);
        }
        llvm_loop_end(c, &K);
        llvm_loop_begin(c, &K, kv, kc, i64c(c, 1), "pk");
        v = load_operand(c, d, src, LLVMBuildNSWAdd(B, roff, K.index, ""), 1);
        store_f32(c, dst, LLVMBuildAdd(B, dcol, LLVMBuildMul(B, K.index, i64c(c, R), ""), ""), v, 1);
        llvm_loop_end(c, &K);
        llvm_loop_end(c, &Rl);
    } else {
        llvm_loop K;
        llvm_loop_begin(c, &K, i64c(c, 0), kc, i64c(c, 1), "pk");
        LLVMValueRef koff = LLVMBuildNSWAdd(B, poff, LLVMBuildNSWMul(B, K.index, llvm_size(c, col_stride), ""), "");
        for (int r = 0; r < R; r++) {
            LLVMValueRef at = LLVMBuildMul(B, llvm_size(c, row_stride), i64c(c, r), ""); /* a constant where it is one */
            LLVMValueRef v = load_operand(c, d, src, LLVMBuildNSWAdd(B, koff, at, ""), 1);
            store_f32(c, dst, LLVMBuildAdd(B, panel, LLVMBuildAdd(B, LLVMBuildMul(B, K.index, i64c(c, R), ""), i64c(c, r), ""), ""), v, 1);
        }
        llvm_loop_end(c, &K);
    }
    LLVMBuildBr(B, bdone);

    /* edge panel: zeros, then the valid rows */
    LLVMPositionBuilderAtEnd(B, bpart);
    {
        llvm_loop Z;
        llvm_loop_begin(c, &Z, i64c(c, 0), LLVMBuildMul(B, kc, i64c(c, R), ""), i64c(c, 1), "pz");
        store_f32(c, dst, LLVMBuildAdd(B, panel, Z.index, ""), llvm_const_f32(c, 0, 1), 1);
        llvm_loop_end(c, &Z);
        llvm_loop Rl;
        llvm_loop_begin(c, &Rl, i64c(c, 0), nvalid, i64c(c, 1), "pr");
        llvm_loop K;
        llvm_loop_begin(c, &K, i64c(c, 0), kc, i64c(c, 1), "pk");
        LLVMValueRef so = LLVMBuildNSWAdd(B, poff, LLVMBuildNSWAdd(B, LLVMBuildNSWMul(B, Rl.index, llvm_size(c, row_stride), ""),
                                                                  LLVMBuildNSWMul(B, K.index, llvm_size(c, col_stride), ""), ""), "");
        LLVMValueRef v = load_operand(c, d, src, so, 1);
        store_f32(c, dst, LLVMBuildAdd(B, panel, LLVMBuildAdd(B, LLVMBuildMul(B, K.index, i64c(c, R), ""), Rl.index, ""), ""), v, 1);
        llvm_loop_end(c, &K);
        llvm_loop_end(c, &Rl);
    }
    LLVMBuildBr(B, bdone);
    LLVMPositionBuilderAtEnd(B, bdone);
    llvm_loop_end(c, &P);
}

/* The share of an M x N output that whole MR x NR tiles cover (edge tiles compute padding). */
static double tile_use(int64_t M, int64_t N, int nr)
{
    return (double)M / (double)((M + MR - 1) / MR * MR) * (double)N / (double)((N + nr - 1) / nr * nr);
}

/* Swap the operands (compute C^T = B^T A^T, the tile's rows along N and its lanes along M)
 * when A is a param shared by every batch entry (a conv's or linear's weight on the left) and
 * N is narrow: ResNet's last convs are [512, 4608] x [4608, 49], where 49 columns fill 64 lanes
 * of two NR = 32 panels and every unit repacks all of B; swapped, 512 columns are whole panels,
 * the weight is packed once (as a param B is), and only the 49-row A^T is packed per call. */
static bool swap_pays(llvm_ctx *c, const kir_kernel *k, const gemm_plan *g)
{
    const char *e = getenv("MINIC_GEMM_SWAP");
    const kir_view *a = &k->views[k->gemm.a], *b = &k->views[k->gemm.b];
    if (c->kp->buffers[a->buffer].kind != KBUF_PARAM || c->kp->buffers[b->buffer].kind == KBUF_PARAM)
        return false;
    for (int d = 0; d < g->nb; d++)
        if (a->stride[d] != 0)
            return false;
    if (e && (e[0] == '0' || e[0] == '1'))
        return e[0] == '1';
    return tile_use(g->N, g->M, g->nr) > 1.05 * tile_use(g->M, g->N, g->nr);
}

/* Would the MR rows of a tile of an A read in place fall into few L1 sets? Rows whose stride
 * is a multiple of 4 KiB (GPT-2's MLP down-projection, K = 3072: 12 KiB) all map to one set,
 * and MR streams of them plus their prefetches may evict each other on an 8-way L1 (that GEMM
 * ran at 39 GFLOP/s against 129-200 for the others on a Xeon's 2 cores). Packing such an A
 * (contiguous MR-row panels) is an experiment for now, with MINIC_GEMM_ALIAS=1: on the AMD
 * EPYC this was written on (48 KiB 12-way L1) it made that GEMM about 35% slower. */
static bool rows_alias(const gemm_plan *g)
{
    const char *e = getenv("MINIC_GEMM_ALIAS");
    if (mc_dim_is_sym(g->a_m) || g->M <= MC || !e || strcmp(e, "1") != 0)
        return false;
    int64_t sets[MR];
    int distinct = 0;
    for (int r = 0; r < MR; r++) {
        int64_t set = (r * g->a_m * 4) % 4096 / 64;
        bool seen = false;
        for (int q = 0; q < distinct; q++)
            seen |= sets[q] == set;
        if (!seen)
            sets[distinct++] = set;
    }
    return distinct < 3;
}

static mc_status make_plan(llvm_ctx *c, const kir_kernel *k, gemm_plan *g)
{
    memset(g, 0, sizeof *g);
    g->nb = k->rank - 2;
    if (g->nb < 0 || k->gemm.m != k->shape[k->rank - 2] || k->gemm.n != k->shape[k->rank - 1])
        return mc_fail(MC_ERR_SYSTEM, "internal error: GEMM kernel %s has a malformed index space", k->name);
    if (k->nblocks != 1 || k->blocks[0].loop || k->nreds != 0)
        return mc_fail(MC_ERR_SYSTEM, "internal error: GEMM kernel %s must have one row block (its epilogue)", k->name);
    g->M = k->gemm.m;
    g->N = k->gemm.n;
    g->K = k->gemm.k;
    g->kc = gemm_kc();
    g->nbatch = 1; /* 0 where a batch dimension is symbolic: counted per binding */
    for (int d = 0; d < g->nb; d++)
        g->nbatch = mc_dim_is_sym(k->shape[d]) ? 0 : g->nbatch * k->shape[d];
    /* Sizes read at run time (llvm_ctx.dims): M, N, K, the batch dimensions and every stride
     * may be symbolic (a stride along N or K too: the packing reads B, and A where it is
     * packed, element by element at a stride read when it runs, and the epilogue's views go
     * lane by lane, llvm_block.c); the choices below that read them take what holds for every
     * binding: no swap, A read in place only where its rows are contiguous, row blocks of MC
     * rows, no short tile (the full micro-kernel's extra rows are clamped or zero-padded, and
     * never stored), B packed ahead only with a constant N, K, strides and offset, column blocks
     * counted when it runs, K blocked (the partial sums' buffer kept) whatever K is. */
    bool sym_m = mc_dim_is_sym(g->M), sym_nk = mc_dim_is_sym(g->N) || mc_dim_is_sym(g->K);
    for (int v = 0; v < 2; v++) /* sym_nk also for a stride of A or B along M, N or K */
        for (int d = g->nb; d < k->rank; d++)
            sym_nk |= mc_dim_is_sym(k->views[v ? k->gemm.b : k->gemm.a].stride[d]);
    int64_t nbatch = g->nbatch ? g->nbatch : 1; /* for the heuristics */
    g->lanes = c->native_lanes;
    g->nv = 2;
    g->nr = g->nv * g->lanes;
    g->va = k->gemm.a;
    g->vb = k->gemm.b;
    g->swap = !sym_m && !sym_nk && g->nbatch && swap_pays(c, k, g);
    if (g->swap) {
        int64_t t = g->M;
        g->M = g->N;
        g->N = t;
        g->va = k->gemm.b;
        g->vb = k->gemm.a;
    }
    const kir_view *a = &k->views[g->va], *b = &k->views[g->vb];
    /* (swapped: A^T's strides along M and K are B's along N and K, and so on) */
    g->a_m = a->stride[g->nb + (g->swap ? 1 : 0)];
    g->a_k = a->stride[g->nb + (g->swap ? 0 : 1)];
    g->b_k = b->stride[g->nb + (g->swap ? 1 : 0)];
    g->b_n = b->stride[g->nb + (g->swap ? 0 : 1)];
    mc_dtype da = c->kp->buffers[a->buffer].dtype, db = c->kp->buffers[b->buffer].dtype;
    if (!mc_dtype_is_float(da) || !mc_dtype_is_float(db))
        return mc_fail(MC_ERR_SYSTEM, "internal error: GEMM kernel %s on non-float operands", k->name);
    const kir_buffer *bbuf = &c->kp->buffers[b->buffer];
    g->packed_b = bbuf->kind == KBUF_PARAM && !sym_nk && !mc_dim_is_sym(b->offset);
    for (int d = 0; d < g->nb; d++)
        g->packed_b = g->packed_b && b->stride[d] == 0; /* one B for every batch */
    g->np = g->packed_b ? (g->N + g->nr - 1) / g->nr * g->nr : 0;
    int64_t floats = 0, bytes = 0;
    if (g->packed_b && (mc_mul_overflows(g->K, g->np, &floats) || mc_mul_overflows(floats, 4, &bytes)))
        g->packed_b = false; /* too large to hold packed: packed per call, as for inputs */
    g->packed_bytes = g->packed_b ? bytes : 0;
    g->direct_a = da == MC_F32 && ((g->a_k == 1 && (sym_m || !rows_alias(g))) || (!sym_m && g->M <= MC && !g->swap));
    /* Units: a unit is (batch entry, block of columns, block of rows), and the threads take
     * them one at a time. A unit packs what it reads that is not packed ahead: B's columns
     * (unless B is a param, packed once) for its rows, A's rows (unless A is read in place)
     * for its columns. So cutting the rows repeats B's packing in every row block, or, with B
     * packed ahead, its stream from memory; cutting the columns repeats A's packing in every
     * column block, and costs nothing where A is read in place. The columns are cut first, into
     * blocks of whole panels at most NC wide: as many as the threads (a multiple of them) where
     * A is packed, about four a thread where A is read in place (blocks of unequal width then
     * even out); the rows only where the columns run out. ResNet-18's layer-4 convs (swapped:
     * [49, 4608] x [4608, 512], A packed) on 2 threads: 2 units rather than the 4 of a fixed
     * target of 8 units, 930 -> 722 us a conv on an AMD EPYC's 2 cores (2026-11-28). The
     * threads are the program's (llvm_ctx.threads): the split is part of the code, so of the
     * cache key. */
    int64_t T = c->threads > 1 ? c->threads : 1;
    g->ncb = NC;
    if (!mc_dim_is_sym(g->N)) {
        int64_t panels = (g->N + g->nr - 1) / g->nr, per_nc = NC / g->nr;
        int64_t want_blocks = T == 1 ? 1 : (T * (g->direct_a ? 4 : 1) + nbatch - 1) / nbatch;
        int64_t blocks = (panels + per_nc - 1) / per_nc; /* at NC wide */
        if (blocks < want_blocks)
            blocks = want_blocks;
        else if (!g->direct_a)
            blocks = (blocks + T - 1) / T * T;
        if (blocks > panels)
            blocks = panels;
        g->ncb = (panels + blocks - 1) / blocks * g->nr;
    }
    g->nblocks = mc_dim_is_sym(g->N) ? 0 : (g->N + g->ncb - 1) / g->ncb; /* 0: ceil(N / ncb), when it runs */
    int64_t nblocks = g->nblocks ? g->nblocks : 1; /* for the heuristics */
    if (sym_m) {
        g->ms = MC;
        g->msplit = 0; /* ceil(M / MC), when it runs */
        return MC_OK;
    }
    int64_t units = nbatch * nblocks;
    int64_t want = units >= T ? 1 : (T + units - 1) / units;
    int64_t max_split = (g->M + MC - 1) / MC;
    if (want > max_split)
        want = max_split;
    /* and row blocks of at most MAX_ROWS, which bounds the partial sums a unit keeps between K
     * blocks (ms x ncb floats: 1.2 MB; a [100000, 300] x [300, 256] matmul on one thread would
     * keep 102 MB, streamed from memory) */
    if (want < (g->M + MAX_ROWS - 1) / MAX_ROWS)
        want = (g->M + MAX_ROWS - 1) / MAX_ROWS;
    g->ms = ((g->M + want - 1) / want + MR - 1) / MR * MR;
    g->msplit = (g->M + g->ms - 1) / g->ms;
    return MC_OK;
}

/* The epilogue's work arrays, allocated with the kernel (where a failure can be returned). */
typedef struct epilogue_work {
    LLVMValueRef *cur;              /* per instruction */
    LLVMValueRef *offs;             /* per view */
    int64_t (*strides)[MC_MAX_RANK]; /* per view: its strides */
} epilogue_work;

static void epilogue_work_free(epilogue_work *w)
{
    free(w->cur);
    free(w->offs);
    free(w->strides);
}

static bool epilogue_work_alloc(const kir_kernel *k, epilogue_work *w)
{
    size_t ncode = (size_t)(k->ncode ? k->ncode : 1), nviews = (size_t)(k->nviews ? k->nviews : 1);
    w->cur = calloc(ncode, sizeof *w->cur);
    w->offs = calloc(nviews, sizeof *w->offs);
    w->strides = calloc(nviews, sizeof *w->strides);
    if (!w->cur || !w->offs || !w->strides)
        return false;
    for (int v = 0; v < k->nviews; v++)
        memcpy(w->strides[v], k->views[v].stride, sizeof w->strides[v]);
    return true;
}

/* The epilogue of one MR x NR tile at rows [m, m+MR), columns [n, n+NR) (swapped: rows along
 * the kernel's N, columns along its M) of batch offsets
 * `batch_off` (per view). acc[r * nv + v] are the accumulators. */
static void emit_epilogue(llvm_ctx *c, const kir_kernel *k, const gemm_plan *g, const epilogue_work *w,
                          LLVMValueRef *bases, LLVMValueRef *batch_idx, LLVMValueRef *batch_off, LLVMValueRef m,
                          LLVMValueRef n, LLVMValueRef m_end, LLVMValueRef *acc, LLVMValueRef tile)
{
    int nb = g->nb, L = g->lanes;
    int dm = g->swap ? nb + 1 : nb, dn = g->swap ? nb : nb + 1; /* the tile's rows and lanes */
    LLVMValueRef *cur = w->cur, *offs = w->offs;
    const int64_t(*strides)[MC_MAX_RANK] = (const int64_t(*)[MC_MAX_RANK])w->strides;

    LLVMValueRef full_m = LLVMBuildICmp(B, LLVMIntSLE, LLVMBuildAdd(B, m, i64c(c, MR), ""), m_end, "");
    LLVMValueRef full_n = LLVMBuildICmp(B, LLVMIntSLE, LLVMBuildAdd(B, n, i64c(c, g->nr), ""), llvm_size(c, g->N), "");
    LLVMBasicBlockRef bfull = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "epi_full");
    LLVMBasicBlockRef bedge = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "epi_edge");
    LLVMBasicBlockRef bdone = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "epi_done");
    LLVMBuildCondBr(B, LLVMBuildAnd(B, full_m, full_n, ""), bfull, bedge);

    /* The accumulators go to a stack tile either way: the epilogue then runs once per row
     * (a loop, not MR copies of its code), NR lanes at a time on full tiles. */
    LLVMBasicBlockRef at = LLVMGetInsertBlock(B);
    LLVMPositionBuilderBefore(B, LLVMGetBasicBlockTerminator(at));
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < g->nv; v++)
            store_f32(c, tile, i64c(c, r * g->nr + v * L), acc[r * g->nv + v], L);
    LLVMPositionBuilderAtEnd(B, bfull);
    {
        llvm_loop R;
        llvm_loop_begin(c, &R, i64c(c, 0), i64c(c, MR), i64c(c, 1), "fr");
        llvm_point pt = {.width = g->nr, .lane_dim = dn, .stride = strides, .view_offset = offs};
        for (int d = 0; d < nb; d++)
            pt.idx[d] = batch_idx[d];
        pt.idx[dm] = LLVMBuildAdd(B, m, R.index, "");
        pt.idx[dn] = n;
        for (int vi = 0; vi < k->nviews; vi++)
            offs[vi] = LLVMBuildNSWAdd(B, batch_off[vi],
                                       LLVMBuildNSWAdd(B, LLVMBuildNSWMul(B, pt.idx[nb], llvm_size(c, strides[vi][nb]), ""),
                                                       LLVMBuildNSWMul(B, pt.idx[nb + 1], llvm_size(c, strides[vi][nb + 1]), ""), ""), "");
        LLVMValueRef row = LLVMBuildLoad2(B, LLVMVectorType(c->t_f32, (unsigned)g->nr),
                                          vptr(c, tile, LLVMBuildMul(B, R.index, i64c(c, g->nr), ""), g->nr), "");
        LLVMSetAlignment(row, 4);
        pt.acc = row;
        llvm_emit_block(c, k, 0, bases, &pt, cur, NULL, NULL);
        llvm_loop_end(c, &R);
    }
    LLVMBuildBr(B, bdone);

    /* edge tile: one element at a time */
    LLVMPositionBuilderAtEnd(B, bedge);
    LLVMValueRef rows = min64(c, i64c(c, MR), LLVMBuildSub(B, m_end, m, ""));
    LLVMValueRef cols = min64(c, i64c(c, g->nr), LLVMBuildSub(B, llvm_size(c, g->N), n, ""));
    llvm_loop R, C;
    llvm_loop_begin(c, &R, i64c(c, 0), rows, i64c(c, 1), "er");
    llvm_loop_begin(c, &C, i64c(c, 0), cols, i64c(c, 1), "ec");
    {
        llvm_point pt = {.width = 1, .lane_dim = -1, .stride = strides, .view_offset = offs};
        for (int d = 0; d < nb; d++)
            pt.idx[d] = batch_idx[d];
        pt.idx[dm] = LLVMBuildAdd(B, m, R.index, "");
        pt.idx[dn] = LLVMBuildAdd(B, n, C.index, "");
        for (int vi = 0; vi < k->nviews; vi++)
            offs[vi] = LLVMBuildNSWAdd(B, batch_off[vi],
                                       LLVMBuildNSWAdd(B, LLVMBuildNSWMul(B, pt.idx[nb], llvm_size(c, strides[vi][nb]), ""),
                                                       LLVMBuildNSWMul(B, pt.idx[nb + 1], llvm_size(c, strides[vi][nb + 1]), ""), ""), "");
        LLVMValueRef ti = LLVMBuildAdd(B, LLVMBuildMul(B, R.index, i64c(c, g->nr), ""), C.index, "");
        LLVMValueRef a = LLVMBuildLoad2(B, c->t_f32, fptr(c, tile, ti), "");
        pt.acc = a;
        llvm_emit_block(c, k, 0, bases, &pt, cur, NULL, NULL);
    }
    llvm_loop_end(c, &C);
    llvm_loop_end(c, &R);
    LLVMBuildBr(B, bdone);
    LLVMPositionBuilderAtEnd(B, bdone);
}

/* ---- packing a param B ahead (called by the runtime, not generated) ------------------------ */

int64_t llvm_packed_b_blocks(const llvm_packed_b *pb)
{
    return (pb->k + pb->kc - 1) / pb->kc;
}

static float element_f32(mc_dtype d, const void *src, int64_t i)
{
    switch (d) {
    case MC_F32: return ((const float *)src)[i];
    case MC_BF16: return (float)mc_bf16_to_double(((const uint16_t *)src)[i]);
    default: return (float)mc_f16_to_double(((const uint16_t *)src)[i]);
    }
}

/* Block pc of the packed buffer starts at pc * np and holds B[pc:pc+kc, 0:n] as panels of nr
 * columns, each kc rows of nr floats (columns past n are zeros): the layout the kernel's own
 * packing of B produces, for all of N at once. */
void llvm_pack_b(const llvm_packed_b *pb, const void *src, float *dst, int64_t begin, int64_t end)
{
    for (int64_t blk = begin; blk < end; blk++) {
        int64_t pc = blk * pb->kc, kc = pb->k - pc < pb->kc ? pb->k - pc : pb->kc;
        float *block = dst + pc * pb->np;
        for (int64_t j = 0; j < pb->np; j += pb->nr) {
            float *panel = block + j * kc;
            int64_t valid = pb->n - j < pb->nr ? pb->n - j : pb->nr;
            for (int64_t kk = 0; kk < kc; kk++) {
                int64_t row = pb->offset + (pc + kk) * pb->stride_k + j * pb->stride_n;
                float *out = panel + kk * pb->nr;
                if (pb->dtype == MC_F32 && pb->stride_n == 1) {
                    memcpy(out, (const float *)src + row, (size_t)valid * sizeof *out);
                } else {
                    for (int64_t r = 0; r < valid; r++)
                        out[r] = element_f32(pb->dtype, src, row + r * pb->stride_n);
                }
                for (int64_t r = valid; r < pb->nr; r++)
                    out[r] = 0;
            }
        }
    }
}

/* What the micro-kernel reads: A as a packed panel (element (kk, r) at apanel[kk * MR + r]) or
 * in place (row r at arow[r], elements a_k apart); B's packed panel (kc rows of NR). */
typedef struct micro_args {
    const gemm_plan *g;
    LLVMValueRef *accv;       /* MR * nv vector allocas */
    LLVMValueRef apanel, arow[MR], bpanel, kc;
} micro_args;

/* accv = the first `rows` rows of A's tile times B's panel (kc FMA steps of rows x nv
 * vectors); the accumulators of rows past `rows` are zero. */
static void emit_micro_kernel(llvm_ctx *c, const micro_args *ma, int rows)
{
    const gemm_plan *g = ma->g;
    int L = g->lanes, NV = g->nv;
    LLVMTypeRef vt = LLVMVectorType(c->t_f32, (unsigned)L);
    for (int i = 0; i < MR * NV; i++)
        LLVMBuildStore(B, llvm_const_f32(c, 0, L), ma->accv[i]);
    llvm_loop Kl;
    llvm_loop_begin(c, &Kl, i64c(c, 0), ma->kc, i64c(c, 1), "k");
    LLVMValueRef bv[4];
    for (int v = 0; v < NV; v++) {
        LLVMValueRef off = LLVMBuildAdd(B, LLVMBuildMul(B, Kl.index, i64c(c, g->nr), ""), i64c(c, v * L), "");
        bv[v] = LLVMBuildLoad2(B, vt, vptr(c, ma->bpanel, off, L), "");
        LLVMSetAlignment(bv[v], 4);
    }
    for (int r = 0; r < rows; r++) {
        LLVMValueRef a;
        if (g->direct_a) {
            a = LLVMBuildLoad2(B, c->t_f32, fptr(c, ma->arow[r], LLVMBuildMul(B, Kl.index, llvm_size(c, g->a_k), "")), "");
        } else {
            LLVMValueRef off = LLVMBuildAdd(B, LLVMBuildMul(B, Kl.index, i64c(c, MR), ""), i64c(c, r), "");
            a = LLVMBuildLoad2(B, c->t_f32, fptr(c, ma->apanel, off), "");
        }
        LLVMValueRef as = llvm_splat(c, a, L);
        for (int v = 0; v < NV; v++) {
            LLVMValueRef acc = LLVMBuildLoad2(B, vt, ma->accv[r * NV + v], "");
            LLVMValueRef args[3] = {as, bv[v], acc};
            LLVMBuildStore(B, llvm_call_intrinsic(c, "llvm.fmuladd", &vt, 1, args, 3), ma->accv[r * NV + v]);
        }
    }
    llvm_loop_end(c, &Kl);
}

/* ---- a conv's B read from its input (llvm_im2col) ------------------------------------------ */

static bool stores_to(const kir_kernel *k, int buf)
{
    for (int s = 0; s < k->nstores; s++)
        if (k->views[k->stores[s].view].buffer == buf)
            return true;
    return false;
}

static bool uses(const kir_kernel *k, int buf)
{
    for (int v = 0; v < k->nviews; v++)
        if (k->views[v].buffer == buf)
            return true;
    return false;
}

static bool temps_overlap(const kir_program *kp, int a, int b)
{
    const kir_buffer *x = &kp->buffers[a], *y = &kp->buffers[b];
    if (x->kind != KBUF_TEMP || y->kind != KBUF_TEMP)
        return a == b;
    int64_t xe = x->offset + x->numel * (int64_t)mc_dtype_size(x->dtype);
    int64_t ye = y->offset + y->numel * (int64_t)mc_dtype_size(y->dtype);
    return x->offset < ye && y->offset < xe;
}

/* A pointwise kernel that stores the constant 0 (a pad's `full`), into *buf. */
static bool zero_fill(const kir_kernel *q, int *buf)
{
    if (q->category != KIR_POINTWISE || q->nstores != 1 || q->ncode != 1 || q->code[0].kind != KI_CONST ||
        q->code[0].value != 0 || signbit(q->code[0].value) || q->stores[0].value != 0)
        return false;
    *buf = q->views[q->stores[0].view].buffer;
    return true;
}

/* Is temp z written only by zero fills (anywhere in the program)? */
static bool zero_buffer(const kir_program *kp, int z)
{
    if (kp->buffers[z].kind != KBUF_TEMP || kp->buffers[z].dtype != MC_F32)
        return false;
    bool any = false;
    for (int j = 0; j < kp->nkernels; j++) {
        int b;
        if (!stores_to(&kp->kernels[j], z))
            continue;
        if (!zero_fill(&kp->kernels[j], &b) || b != z)
            return false;
        any = true;
    }
    return any;
}

static bool plain_copy(const kir_kernel *q)
{
    return q->category == KIR_COPY && q->nviews == 2 && q->nstores == 1 && q->ncode == 1 && q->code[0].kind == KI_LOAD &&
           q->stores[0].value == 0 && q->nblocks == 1;
}

/* The placement of copy q's [N, C, Hs, Ws] inside its destination, a contiguous [N, C, Hd, Wd]:
 * at rows h0.., columns w0.. */
static bool placed(const kir_program *kp, const kir_kernel *q, int64_t nimg, int64_t *Hd, int64_t *Wd, int64_t *h0, int64_t *w0)
{
    const kir_view *d = &q->views[q->stores[0].view];
    if (q->rank != 4 || q->shape[0] != nimg || d->stride[3] != 1 || d->stride[2] <= 0 || d->stride[1] <= 0 ||
        d->stride[1] % d->stride[2] != 0 || (nimg > 1 && d->stride[0] != d->stride[1] * q->shape[1]) ||
        kp->buffers[d->buffer].numel != nimg * q->shape[1] * d->stride[1] || d->offset < 0 || d->offset >= d->stride[1])
        return false;
    *Wd = d->stride[2];
    *Hd = d->stride[1] / d->stride[2];
    *h0 = d->offset / *Wd;
    *w0 = d->offset % *Wd;
    return *h0 + q->shape[2] <= *Hd && *w0 + q->shape[3] <= *Wd;
}

/* The padding of x (ic->buffer, just matched) by the kernels just before `first`: a run of
 * zero fills and copies that write x (and the buffers it is copied from) from zero buffers and
 * from one interior copy each, one or two levels (decompose pads one axis per concat), down to
 * an unpadded u that the run does not write. On success ic reads u (ic->pad) and `*start` is the
 * run's first kernel. */
static bool match_pad(const kir_program *kp, int kernel, int first, llvm_im2col *ic, int *start)
{
    enum { MAXB = 8 };
    int need[MAXB] = {ic->buffer}, interior[MAXB] = {-1}, nneed = 1, zeros[MAXB], nzeros = 0, r0 = first;
    const kir_kernel *g = &kp->kernels[kernel];
    int64_t nimg = g->shape[0], C = g->gemm.k / ic->taps;
    for (int j = first - 1; j >= 0 && first - j <= 16; j--) {
        const kir_kernel *q = &kp->kernels[j];
        int zb, d, s, i;
        if (zero_fill(q, &zb)) {
            for (i = 0; i < nzeros && zeros[i] != zb; i++)
                ;
            if (i == nzeros)
                break;
            r0 = j;
            continue;
        }
        if (!plain_copy(q))
            break;
        d = q->views[q->stores[0].view].buffer;
        s = q->views[q->code[0].view].buffer;
        for (i = 0; i < nneed && need[i] != d; i++)
            ;
        if (i == nneed)
            break;
        if (zero_buffer(kp, s)) {
            if (nzeros == MAXB)
                return false;
            zeros[nzeros++] = s;
        } else {
            if (interior[i] >= 0 || nneed == MAXB || s == d)
                return false;
            interior[i] = j;
            interior[nneed] = -1;
            need[nneed++] = s;
        }
        r0 = j;
    }
    if (r0 == first || interior[0] < 0)
        return false;
    /* the chain x <- p1 (<- u) */
    int64_t ph = 0, pw = 0, Hd, Wd, h0, w0;
    int level = 0;
    const kir_kernel *q = &kp->kernels[interior[0]];
    if (!placed(kp, q, nimg, &Hd, &Wd, &h0, &w0) || q->shape[1] != C || Wd * Hd != ic->s_c || ic->s_h % Wd != 0)
        return false;
    ic->sth = ic->s_h / Wd;
    ic->stw = ic->s_w;
    for (int64_t t = 0; t < ic->taps; t++) {
        ic->tap_h[t] = ic->tap_off[t] / Wd;
        ic->tap_w[t] = ic->tap_off[t] % Wd;
    }
    for (;;) {
        ph += h0;
        pw += w0;
        const kir_view *sv = &q->views[q->code[0].view];
        int next = -1;
        for (int i = 0; i < nneed; i++)
            if (need[i] == sv->buffer && interior[i] >= 0)
                next = i;
        if (next < 0) { /* u (which the run must not write: checked below) */
            ic->buffer = sv->buffer;
            ic->s_n = nimg > 1 ? sv->stride[0] : 0;
            ic->s_c = sv->stride[1];
            ic->u_h = sv->stride[2];
            ic->u_w = sv->stride[3];
            ic->u_off = sv->offset;
            ic->H = q->shape[2];
            ic->W = q->shape[3];
            break;
        }
        if (++level > 2)
            return false;
        /* the copy reads all of p1, contiguously: p1's own placement gives its shape */
        const kir_kernel *q1 = &kp->kernels[interior[next]];
        int64_t Hd1, Wd1;
        if (!placed(kp, q1, nimg, &Hd1, &Wd1, &h0, &w0) || q1->shape[1] != C || sv->offset != 0 ||
            sv->stride[3] != 1 || sv->stride[2] != Wd1 || sv->stride[1] != Hd1 * Wd1 || q->shape[2] != Hd1 ||
            q->shape[3] != Wd1 || (nimg > 1 && sv->stride[0] != C * Hd1 * Wd1))
            return false;
        q = q1;
    }
    const kir_buffer *ub = &kp->buffers[ic->buffer];
    if (ub->dtype != MC_F32 || ub->numel >= INT32_MAX || ic->u_off < 0 || ic->u_off >= INT32_MAX || ic->H <= 0 || ic->W <= 0)
        return false;
    /* what the run's copies write is read only by the run, the windows and the GEMM (its zero
     * fills still run: other convs' paddings may share their zeros); u is written by none of
     * them (its memory shared with nothing live there) */
    for (int j = r0; j <= kernel; j++) {
        const kir_kernel *w = &kp->kernels[j];
        for (int st = 0; st < w->nstores; st++) {
            int b = w->views[w->stores[st].view].buffer;
            if (temps_overlap(kp, b, ic->buffer))
                return false;
            if (j == kernel || w->category != KIR_COPY)
                continue;
            for (int o = 0; o < kp->nkernels; o++)
                if ((o < r0 || o > kernel) && uses(&kp->kernels[o], b))
                    return false;
        }
    }
    ic->ph = ph;
    ic->pw = pw;
    ic->pad = true;
    *start = r0;
    return true;
}

/* MINIC_IM2COL_PAD=1 keeps the padding's copies (the GEMM reads the padded x). */
static bool keep_pad(void)
{
    const char *e = getenv("MINIC_IM2COL_PAD");
    return e && strcmp(e, "1") == 0;
}

bool llvm_gemm_swaps(llvm_ctx *c, const kir_kernel *k)
{
    gemm_plan g; /* a malformed kernel fails again, with its message, when it is emitted */
    return make_plan(c, k, &g) == MC_OK && g.swap;
}

bool llvm_match_im2col(const kir_program *kp, int kernel, bool allow_pad, llvm_im2col *ic)
{
    const kir_kernel *k = &kp->kernels[kernel];
    memset(ic, 0, sizeof *ic);
    if (k->category != KIR_GEMM || k->rank != 3)
        return false;
    const kir_view *vb = &k->views[k->gemm.b];
    int cols = vb->buffer;
    int64_t K = k->gemm.k, N = k->gemm.n, nimg = k->shape[0];
    const kir_buffer *cb = &kp->buffers[cols];
    if (cb->kind != KBUF_TEMP || cb->dtype != MC_F32 || vb->offset != 0 || vb->stride[1] != N || vb->stride[2] != 1 ||
        (nimg > 1 && vb->stride[0] != K * N) || cb->numel != nimg * K * N)
        return false;
    /* the copies: the kernels just before the GEMM that store into cols */
    int first = kernel;
    while (first > 0 && stores_to(&kp->kernels[first - 1], cols) && kernel - first < LLVM_IM2COL_MAX_TAPS)
        first--;
    int64_t T = kernel - first, C = 0;
    if (T < 1 || K % T != 0)
        return false;
    C = K / T;
    bool seen[LLVM_IM2COL_MAX_TAPS] = {false};
    for (int j = first; j < kernel; j++) {
        const kir_kernel *q = &kp->kernels[j];
        if (q->category != KIR_COPY || q->nviews != 2 || q->nstores != 1 || q->ncode != 1 || q->nblocks != 1 ||
            q->code[0].kind != KI_LOAD || q->stores[0].value != 0 || (q->rank != 4 && q->rank != 5))
            return false;
        const kir_view *dst = &q->views[q->stores[0].view], *src = &q->views[q->code[0].view];
        if (dst->buffer != cols || src->buffer == cols)
            return false;
        const kir_buffer *xb = &kp->buffers[src->buffer];
        int64_t oh = q->rank == 5 ? q->shape[3] : 1, ow = q->shape[q->rank - 1];
        if (xb->dtype != MC_F32 || xb->numel >= INT32_MAX || q->shape[0] != nimg || q->shape[1] != C ||
            q->shape[2] != 1 || oh * ow != N)
            return false;
        /* cols[b, c, t, oh, ow] = x at the window t */
        if ((nimg > 1 && dst->stride[0] != K * N) || dst->stride[1] != T * N || dst->stride[q->rank - 1] != 1 ||
            (q->rank == 5 && dst->stride[3] != ow) || dst->offset % N != 0)
            return false;
        int64_t t = dst->offset / N;
        if (t < 0 || t >= T || seen[t])
            return false;
        seen[t] = true;
        int64_t s_h = q->rank == 5 ? src->stride[3] : 0, s_w = src->stride[q->rank - 1];
        if (j == first) {
            ic->buffer = src->buffer;
            ic->s_n = nimg > 1 ? src->stride[0] : 0;
            ic->s_c = src->stride[1];
            ic->s_h = s_h;
            ic->s_w = s_w;
            ic->ow = ow;
        } else if (src->buffer != ic->buffer || (nimg > 1 && src->stride[0] != ic->s_n) ||
                   src->stride[1] != ic->s_c || s_h != ic->s_h || s_w != ic->s_w || ow != ic->ow) {
            return false;
        }
        if (src->offset < 0 || src->offset >= INT32_MAX)
            return false;
        ic->tap_off[t] = src->offset;
    }
    ic->taps = T;
    /* cols is read by the GEMM alone and written by these copies alone; x is still intact when
     * the GEMM runs (nothing runs in between) and no store of the GEMM can reach it */
    for (int j = 0; j < kp->nkernels; j++)
        if ((j < first || j > kernel) && uses(&kp->kernels[j], cols))
            return false;
    for (int s = 0; s < k->nstores; s++)
        if (temps_overlap(kp, k->views[k->stores[s].view].buffer, ic->buffer))
            return false;
    for (int v = 0; v < k->nviews; v++)
        if (v != k->gemm.b && k->views[v].buffer == cols)
            return false;
    ic->elide = T;
    int start;
    llvm_im2col padded = *ic;
    if (allow_pad && !keep_pad() && ic->s_w > 0 && match_pad(kp, kernel, first, &padded, &start)) {
        *ic = padded;
        ic->elide = kernel - start;
    }
    return true;
}

/* Lane by lane, as the copies load (faster than a gather on the AMD EPYC this was measured on,
 * and free of gathers' microcode costs on Intel): lane l of the result is row[offs[l]] where
 * ok[l], else 0 (offs must point inside the row's buffer where a lane is not ok). */
static LLVMValueRef load_lanes(llvm_ctx *c, LLVMValueRef row, LLVMValueRef offs, LLVMValueRef ok, int L)
{
    LLVMValueRef gv = llvm_const_f32(c, 0, L);
    for (int l = 0; l < L; l++) {
        LLVMValueRef li = llvm_const_i32(c, l, 1);
        LLVMValueRef o = LLVMBuildExtractElement(B, offs, li, "");
        LLVMValueRef e = LLVMBuildLoad2(B, c->t_f32, LLVMBuildInBoundsGEP2(B, c->t_f32, row, &o, 1, ""), "");
        gv = LLVMBuildInsertElement(B, gv, e, li, "");
    }
    return LLVMBuildSelect(B, ok, gv, llvm_const_f32(c, 0, L), "");
}

/* From the lane-by-lane block (current) to `join`, where the vector loaded in block `fast`
 * (already branching to `join`) or the lanes' vector arrives: the phi of the two. */
static LLVMValueRef join_loads(llvm_ctx *c, LLVMTypeRef vt, LLVMBasicBlockRef join, LLVMValueRef fast_v,
                               LLVMBasicBlockRef fast, LLVMValueRef lanes_v)
{
    LLVMBasicBlockRef lanes = LLVMGetInsertBlock(B);
    LLVMBuildBr(B, join);
    LLVMPositionBuilderAtEnd(B, join);
    LLVMValueRef phi = LLVMBuildPhi(B, vt, "");
    LLVMValueRef vals[2] = {fast_v, lanes_v};
    LLVMBasicBlockRef from[2] = {fast, lanes};
    LLVMAddIncoming(phi, vals, from, 2);
    return phi;
}

/* The table of a conv's tap offsets in x (llvm_im2col.tap_off): one per distinct content, named
 * by it, so that convs of the same shapes still come out as the same function (build_module
 * shares their code). */
static LLVMValueRef tap_table(llvm_ctx *c, const llvm_im2col *ic)
{
    LLVMValueRef taps[LLVM_IM2COL_MAX_TAPS];
    for (int64_t t = 0; t < ic->taps; t++)
        taps[t] = LLVMConstInt(c->t_i64, (unsigned long long)ic->tap_off[t], 1);
    uint64_t h = 1469598103934665603ull;
    for (int64_t t = 0; t < ic->taps; t++)
        h = (h ^ (uint64_t)ic->tap_off[t]) * 1099511628211ull;
    char name[64];
    snprintf(name, sizeof name, "im2col_taps_%lld_%016llx", (long long)ic->taps, (unsigned long long)h);
    LLVMValueRef tab = LLVMGetNamedGlobal(c->mod, name);
    if (!tab) {
        tab = LLVMAddGlobal(c->mod, LLVMArrayType(c->t_i64, (unsigned)ic->taps), name);
        LLVMSetInitializer(tab, LLVMConstArray(c->t_i64, taps, (unsigned)ic->taps));
        LLVMSetGlobalConstant(tab, 1);
        LLVMSetLinkage(tab, LLVMPrivateLinkage);
    }
    return tab;
}

/* Where row k = ch T + t of the im2col matrix starts in x (xb: x at the batch entry): its tap's
 * offset plus its channel's. */
static LLVMValueRef tap_row(llvm_ctx *c, const llvm_im2col *ic, LLVMValueRef tab, LLVMValueRef xb, LLVMValueRef t,
                            LLVMValueRef ch)
{
    LLVMValueRef toff = LLVMBuildLoad2(B, c->t_i64, LLVMBuildInBoundsGEP2(B, LLVMArrayType(c->t_i64, (unsigned)ic->taps), tab,
                                                                         (LLVMValueRef[]){i64c(c, 0), t}, 2, ""), "");
    return LLVMBuildInBoundsGEP2(B, c->t_f32, xb, (LLVMValueRef[]){LLVMBuildAdd(B, toff, LLVMBuildMul(B, ch, i64c(c, ic->s_c), ""), "")}, 1, "");
}

/* Pack B[pc:pc+kc, n0:n0+nc] into NR-wide panels (emit_pack's layout) from x through ic: per
 * panel, each vector of lanes gets its columns' offsets in x (n / ow rows down, n % ow along);
 * per k, a plain vector load where the lanes are consecutive in x (stride-1 columns of one
 * output row), else lane by lane (zeros past N). */
static void emit_pack_im2col(llvm_ctx *c, const gemm_plan *g, const llvm_im2col *ic, LLVMValueRef dst,
                             LLVMValueRef x, LLVMValueRef bidx, LLVMValueRef pc, LLVMValueRef kc, LLVMValueRef n0,
                             LLVMValueRef nc)
{
    int L = g->lanes, NV = g->nv, NR = g->nr;
    LLVMTypeRef vt = LLVMVectorType(c->t_f32, (unsigned)L);
    LLVMValueRef tab = tap_table(c, ic);
    LLVMValueRef lane_iota[64];
    for (int l = 0; l < L; l++)
        lane_iota[l] = llvm_const_i32(c, l, 1);
    LLVMValueRef iota = LLVMConstVector(lane_iota, (unsigned)L);
    LLVMValueRef xb = LLVMBuildInBoundsGEP2(B, c->t_f32, x, (LLVMValueRef[]){LLVMBuildMul(B, bidx, i64c(c, ic->s_n), "")}, 1, "");

    LLVMValueRef total = LLVMBuildMul(B, LLVMBuildSDiv(B, LLVMBuildAdd(B, nc, i64c(c, NR - 1), ""), i64c(c, NR), ""), i64c(c, NR), "");
    llvm_loop P;
    llvm_loop_begin(c, &P, i64c(c, 0), total, i64c(c, NR), "ip");
    LLVMValueRef panel = LLVMBuildMul(B, P.index, kc, "");
    LLVMValueRef noff[4], nfirst[4], contig[4], valid[4];
    for (int v = 0; v < NV; v++) {
        LLVMValueRef nv0 = LLVMBuildAdd(B, n0, LLVMBuildAdd(B, P.index, i64c(c, v * L), ""), "");
        LLVMValueRef n32 = LLVMBuildTrunc(B, nv0, c->t_i32, "");
        LLVMValueRef nvec = LLVMBuildAdd(B, llvm_splat(c, n32, L), iota, "");
        valid[v] = LLVMBuildICmp(B, LLVMIntSLT, nvec, llvm_const_i32(c, g->N, L), "");
        LLVMValueRef ov = llvm_const_i32(c, ic->ow, L);
        LLVMValueRef oh = LLVMBuildUDiv(B, nvec, ov, ""), ow = LLVMBuildURem(B, nvec, ov, "");
        noff[v] = LLVMBuildAdd(B, LLVMBuildMul(B, oh, llvm_const_i32(c, ic->s_h, L), ""),
                               LLVMBuildMul(B, ow, llvm_const_i32(c, ic->s_w, L), ""), "");
        LLVMValueRef oh0 = LLVMBuildUDiv(B, nv0, i64c(c, ic->ow), ""), ow0 = LLVMBuildURem(B, nv0, i64c(c, ic->ow), "");
        nfirst[v] = LLVMBuildAdd(B, LLVMBuildMul(B, oh0, i64c(c, ic->s_h), ""), LLVMBuildMul(B, ow0, i64c(c, ic->s_w), ""), "");
        contig[v] = ic->s_w == 1 ? LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntSLE, LLVMBuildAdd(B, ow0, i64c(c, L), ""), i64c(c, ic->ow), ""),
                                                 LLVMBuildICmp(B, LLVMIntSLE, LLVMBuildAdd(B, nv0, i64c(c, L), ""), i64c(c, g->N), ""), "")
                                 : LLVMConstInt(c->t_i1, 0, 0);
    }
    llvm_loop Kl;
    llvm_loop_begin(c, &Kl, i64c(c, 0), kc, i64c(c, 1), "ik");
    LLVMValueRef kk = LLVMBuildAdd(B, pc, Kl.index, "");
    LLVMValueRef t = LLVMBuildURem(B, kk, i64c(c, ic->taps), ""), ch = LLVMBuildUDiv(B, kk, i64c(c, ic->taps), "");
    LLVMValueRef row = tap_row(c, ic, tab, xb, t, ch);
    for (int v = 0; v < NV; v++) {
        LLVMBasicBlockRef bl = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "i2c_load");
        LLVMBasicBlockRef bg = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "i2c_lanes");
        LLVMBasicBlockRef bj = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "i2c_done");
        LLVMBuildCondBr(B, contig[v], bl, bg);
        LLVMPositionBuilderAtEnd(B, bl);
        LLVMValueRef lp = LLVMBuildBitCast(B, LLVMBuildInBoundsGEP2(B, c->t_f32, row, &nfirst[v], 1, ""), LLVMPointerType(vt, 0), "");
        LLVMValueRef lv = LLVMBuildLoad2(B, vt, lp, "");
        LLVMSetAlignment(lv, 4);
        LLVMBuildBr(B, bj);
        LLVMPositionBuilderAtEnd(B, bg);
        /* a lane past N reads the row's first element (inside x) and is zeroed */
        LLVMValueRef safe = LLVMBuildSelect(B, valid[v], noff[v], llvm_const_i32(c, 0, L), "");
        LLVMValueRef gv = load_lanes(c, row, safe, valid[v], L);
        LLVMValueRef phi = join_loads(c, vt, bj, lv, bl, gv);
        store_f32(c, dst, LLVMBuildAdd(B, panel, LLVMBuildAdd(B, LLVMBuildMul(B, Kl.index, i64c(c, NR), ""), i64c(c, v * L), ""), ""), phi, L);
    }
    llvm_loop_end(c, &Kl);
    llvm_loop_end(c, &P);
}

/* A private constant table of n i64s, named by its content (see emit_pack_im2col). */
static LLVMValueRef i64_table(llvm_ctx *c, const char *what, const int64_t *v, int64_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (int64_t t = 0; t < n; t++)
        h = (h ^ (uint64_t)v[t]) * 1099511628211ull;
    char name[80];
    snprintf(name, sizeof name, "%s_%lld_%016llx", what, (long long)n, (unsigned long long)h);
    LLVMValueRef tab = LLVMGetNamedGlobal(c->mod, name);
    if (!tab) {
        LLVMValueRef vals[LLVM_IM2COL_MAX_TAPS];
        for (int64_t t = 0; t < n; t++)
            vals[t] = LLVMConstInt(c->t_i64, (unsigned long long)v[t], 1);
        tab = LLVMAddGlobal(c->mod, LLVMArrayType(c->t_i64, (unsigned)n), name);
        LLVMSetInitializer(tab, LLVMConstArray(c->t_i64, vals, (unsigned)n));
        LLVMSetGlobalConstant(tab, 1);
        LLVMSetLinkage(tab, LLVMPrivateLinkage);
    }
    return tab;
}

static LLVMValueRef table_at(llvm_ctx *c, LLVMValueRef tab, int64_t n, LLVMValueRef i)
{
    return LLVMBuildLoad2(B, c->t_i64, LLVMBuildInBoundsGEP2(B, LLVMArrayType(c->t_i64, (unsigned)n), tab,
                                                             (LLVMValueRef[]){i64c(c, 0), i}, 2, ""), "");
}

/* A swapped conv GEMM's A is the im2col matrix read across (row m an output position, column k
 * a tap of a channel): pack A^T[i0:i0+valid, pc:pc+kc] into MR-tall panels (emit_pack's layout)
 * from x through ic, so that the window copies need not run (each unit packs its rows once:
 * llvm_gemm's split). Per panel, each row's offset in x once (m / ow rows down, m % ow along;
 * a row past `valid` repeats the last valid one: the micro-kernel of the short tile never reads
 * it); per k, the tap and the channel counted along, not divided out. Scalar loads and stores
 * without a mask (a first version selected zeros per element: LLVM made them masked loads,
 * and that packing cost more than the copies it saved). */
static void emit_pack_im2col_a(llvm_ctx *c, const llvm_im2col *ic, LLVMValueRef dst, LLVMValueRef x,
                               LLVMValueRef bidx, LLVMValueRef i0, LLVMValueRef pc, LLVMValueRef kc, LLVMValueRef valid)
{
    LLVMValueRef tab = tap_table(c, ic);
    LLVMValueRef xb = LLVMBuildInBoundsGEP2(B, c->t_f32, x, (LLVMValueRef[]){LLVMBuildMul(B, bidx, i64c(c, ic->s_n), "")}, 1, "");
    LLVMValueRef t_at = llvm_entry_alloca(c, c->t_i64, "tap"), ch_at = llvm_entry_alloca(c, c->t_i64, "chan");
    LLVMValueRef last = LLVMBuildSub(B, valid, i64c(c, 1), "");
    LLVMValueRef total = LLVMBuildMul(B, LLVMBuildSDiv(B, LLVMBuildAdd(B, valid, i64c(c, MR - 1), ""), i64c(c, MR), ""), i64c(c, MR), "");
    llvm_loop P;
    llvm_loop_begin(c, &P, i64c(c, 0), total, i64c(c, MR), "ap");
    LLVMValueRef panel = LLVMBuildMul(B, P.index, kc, "");
    LLVMValueRef off[MR];
    for (int r = 0; r < MR; r++) {
        LLVMValueRef m = LLVMBuildAdd(B, i0, min64(c, LLVMBuildAdd(B, P.index, i64c(c, r), ""), last), "");
        LLVMValueRef oh = LLVMBuildUDiv(B, m, i64c(c, ic->ow), ""), ow = LLVMBuildURem(B, m, i64c(c, ic->ow), "");
        off[r] = LLVMBuildAdd(B, LLVMBuildMul(B, oh, i64c(c, ic->s_h), ""), LLVMBuildMul(B, ow, i64c(c, ic->s_w), ""), "");
    }
    LLVMBuildStore(B, LLVMBuildURem(B, pc, i64c(c, ic->taps), ""), t_at);
    LLVMBuildStore(B, LLVMBuildUDiv(B, pc, i64c(c, ic->taps), ""), ch_at);
    llvm_loop Kl;
    llvm_loop_begin(c, &Kl, i64c(c, 0), kc, i64c(c, 1), "ak");
    LLVMValueRef t = LLVMBuildLoad2(B, c->t_i64, t_at, ""), ch = LLVMBuildLoad2(B, c->t_i64, ch_at, "");
    LLVMValueRef row = tap_row(c, ic, tab, xb, t, ch);
    LLVMValueRef at = LLVMBuildAdd(B, panel, LLVMBuildMul(B, Kl.index, i64c(c, MR), ""), "");
    for (int r = 0; r < MR; r++) {
        LLVMValueRef v = LLVMBuildLoad2(B, c->t_f32, LLVMBuildInBoundsGEP2(B, c->t_f32, row, &off[r], 1, ""), "");
        store_f32(c, dst, LLVMBuildAdd(B, at, i64c(c, r), ""), v, 1);
    }
    LLVMValueRef t1 = LLVMBuildAdd(B, t, i64c(c, 1), "");
    LLVMValueRef wrap = LLVMBuildICmp(B, LLVMIntEQ, t1, i64c(c, ic->taps), "");
    LLVMBuildStore(B, LLVMBuildSelect(B, wrap, i64c(c, 0), t1, ""), t_at);
    LLVMBuildStore(B, LLVMBuildAdd(B, ch, LLVMBuildZExt(B, wrap, c->t_i64, ""), ""), ch_at);
    llvm_loop_end(c, &Kl);
    llvm_loop_end(c, &P);
}

/* emit_pack_im2col from the unpadded input (ic->pad): per panel, each vector of lanes gets its
 * columns' rows and columns in u before the tap (h = oh sth - ph, w = ow stw - pw); per k, the
 * tap's offsets are added and lanes outside [0, H) x [0, W) read 0. A vector of one output row
 * is one masked load at stride 1 (nothing when its row is outside), the even lanes of two at
 * stride 2; at stride 1 a vector across two output rows (rows at least a vector wide) is two
 * masked loads; anything else goes lane by lane. */
static void emit_pack_im2col_pad(llvm_ctx *c, const gemm_plan *g, const llvm_im2col *ic, LLVMValueRef dst,
                                 LLVMValueRef x, LLVMValueRef bidx, LLVMValueRef pc, LLVMValueRef kc, LLVMValueRef n0,
                                 LLVMValueRef nc)
{
    int L = g->lanes, NV = g->nv, NR = g->nr;
    LLVMTypeRef vt = LLVMVectorType(c->t_f32, (unsigned)L), vit = LLVMVectorType(c->t_i32, (unsigned)L);
    LLVMValueRef tab_h = i64_table(c, "im2col_tap_h", ic->tap_h, ic->taps);
    LLVMValueRef tab_w = i64_table(c, "im2col_tap_w", ic->tap_w, ic->taps);
    LLVMValueRef lane_iota[64];
    for (int l = 0; l < L; l++)
        lane_iota[l] = llvm_const_i32(c, l, 1);
    LLVMValueRef iota = LLVMConstVector(lane_iota, (unsigned)L);
    LLVMValueRef xb = LLVMBuildInBoundsGEP2(B, c->t_f32, x, (LLVMValueRef[]){LLVMBuildAdd(B, LLVMBuildMul(B, bidx, i64c(c, ic->s_n), ""), i64c(c, ic->u_off), "")}, 1, "");
    bool rows = ic->stw == 1 && ic->u_w == 1; /* lanes of one output row are consecutive in u */
    /* or every other element of 2L consecutive ones (a stride-2 conv: the stem): two masked
     * loads and the even elements of the pair (a shuffle) in place of L loads lane by lane */
    bool rows2 = ic->stw == 2 && ic->u_w == 1;
    bool crossing = rows && ic->ow >= L; /* a vector spans at most two output rows */
    LLVMValueRef evens[64];
    for (int l = 0; l < L; l++)
        evens[l] = llvm_const_i32(c, 2 * l, 1);

    LLVMValueRef total = LLVMBuildMul(B, LLVMBuildSDiv(B, LLVMBuildAdd(B, nc, i64c(c, NR - 1), ""), i64c(c, NR), ""), i64c(c, NR), "");
    llvm_loop P;
    llvm_loop_begin(c, &P, i64c(c, 0), total, i64c(c, NR), "ip");
    LLVMValueRef panel = LLVMBuildMul(B, P.index, kc, "");
    LLVMValueRef hv[4], wv[4], valid[4], h0[4], w0[4], contig[4], cross[4], split[4];
    for (int v = 0; v < NV; v++) {
        LLVMValueRef nv0 = LLVMBuildAdd(B, n0, LLVMBuildAdd(B, P.index, i64c(c, v * L), ""), "");
        LLVMValueRef nvec = LLVMBuildAdd(B, llvm_splat(c, LLVMBuildTrunc(B, nv0, c->t_i32, ""), L), iota, "");
        valid[v] = LLVMBuildICmp(B, LLVMIntSLT, nvec, llvm_const_i32(c, g->N, L), "");
        LLVMValueRef ov = llvm_const_i32(c, ic->ow, L);
        hv[v] = LLVMBuildSub(B, LLVMBuildMul(B, LLVMBuildUDiv(B, nvec, ov, ""), llvm_const_i32(c, ic->sth, L), ""), llvm_const_i32(c, ic->ph, L), "");
        wv[v] = LLVMBuildSub(B, LLVMBuildMul(B, LLVMBuildURem(B, nvec, ov, ""), llvm_const_i32(c, ic->stw, L), ""), llvm_const_i32(c, ic->pw, L), "");
        LLVMValueRef oh0 = LLVMBuildUDiv(B, nv0, i64c(c, ic->ow), ""), ow0 = LLVMBuildURem(B, nv0, i64c(c, ic->ow), "");
        h0[v] = LLVMBuildSub(B, LLVMBuildMul(B, oh0, i64c(c, ic->sth), ""), i64c(c, ic->ph), "");
        w0[v] = LLVMBuildSub(B, LLVMBuildMul(B, ow0, i64c(c, ic->stw), ""), i64c(c, ic->pw), "");
        contig[v] = rows || rows2 ? LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntSLE, LLVMBuildAdd(B, ow0, i64c(c, L), ""), i64c(c, ic->ow), ""),
                                        LLVMBuildICmp(B, LLVMIntSLE, LLVMBuildAdd(B, nv0, i64c(c, L), ""), i64c(c, g->N), ""), "")
                         : LLVMConstInt(c->t_i1, 0, 0);
        /* or, where a row holds a vector, the lanes of two consecutive output rows: two masked
         * loads, the second's lanes from `split` on (layer 2's 28-wide rows: 3 vectors in 7) */
        if (crossing) {
            split[v] = LLVMBuildSub(B, i64c(c, ic->ow), ow0, "split");
            cross[v] = LLVMBuildICmp(B, LLVMIntSLE, LLVMBuildAdd(B, nv0, i64c(c, L), ""), i64c(c, g->N), "");
        }
    }
    /* per tap t: the masks and offsets, then the channels: k = t, t + T, .. within [pc, pc + kc) */
    llvm_loop Tl;
    llvm_loop_begin(c, &Tl, i64c(c, 0), i64c(c, ic->taps), i64c(c, 1), "it");
    LLVMValueRef t = Tl.index;
    LLVMValueRef th = table_at(c, tab_h, ic->taps, t), tw = table_at(c, tab_w, ic->taps, t);
    LLVMValueRef th32 = llvm_splat(c, LLVMBuildTrunc(B, th, c->t_i32, ""), L), tw32 = llvm_splat(c, LLVMBuildTrunc(B, tw, c->t_i32, ""), L);
    LLVMValueRef Hv = llvm_const_i32(c, ic->H, L), Wv = llvm_const_i32(c, ic->W, L);
    LLVMValueRef cmask[4], cmask2[4], coff[4], lok[4], lsafe[4], xoff[4], xmask[4], xmask2[4];
    for (int v = 0; v < NV; v++) {
        /* one output row: the row h is in u or not; the columns w.. are masked */
        LLVMValueRef h = LLVMBuildAdd(B, h0[v], th, "");
        LLVMValueRef hin = LLVMBuildICmp(B, LLVMIntULT, h, i64c(c, ic->H), "");
        LLVMValueRef ww = LLVMBuildAdd(B, wv[v], tw32, "");
        cmask[v] = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntULT, ww, Wv, ""), llvm_splat(c, hin, L), "");
        if (rows2) {
            /* element e of the pair is column w0 + tw + e */
            LLVMValueRef wb = llvm_splat(c, LLVMBuildTrunc(B, LLVMBuildAdd(B, w0[v], tw, ""), c->t_i32, ""), L);
            LLVMValueRef e0 = LLVMBuildAdd(B, wb, iota, ""), e1 = LLVMBuildAdd(B, e0, llvm_const_i32(c, L, L), "");
            cmask[v] = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntULT, e0, Wv, ""), llvm_splat(c, hin, L), "");
            cmask2[v] = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntULT, e1, Wv, ""), llvm_splat(c, hin, L), "");
        }
        coff[v] = LLVMBuildAdd(B, LLVMBuildMul(B, LLVMBuildSelect(B, hin, h, i64c(c, 0), ""), i64c(c, ic->u_h), ""),
                               LLVMBuildAdd(B, w0[v], tw, ""), "");
        /* lane by lane: a lane outside u (or past N) reads u's row start and is zeroed */
        LLVMValueRef hh = LLVMBuildAdd(B, hv[v], th32, ""), wl = LLVMBuildAdd(B, wv[v], tw32, "");
        lok[v] = LLVMBuildAnd(B, valid[v], LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntULT, hh, Hv, ""),
                                                        LLVMBuildICmp(B, LLVMIntULT, wl, Wv, ""), ""), "");
        LLVMValueRef lo = LLVMBuildAdd(B, LLVMBuildMul(B, hh, llvm_const_i32(c, ic->u_h, L), ""),
                                       LLVMBuildMul(B, wl, llvm_const_i32(c, ic->u_w, L), ""), "");
        lsafe[v] = LLVMBuildSelect(B, lok[v], lo, LLVMConstNull(vit), "");
        if (!crossing)
            continue;
        LLVMValueRef first = LLVMBuildICmp(B, LLVMIntSLT, iota, llvm_splat(c, LLVMBuildTrunc(B, split[v], c->t_i32, ""), L), "");
        xmask[v] = LLVMBuildAnd(B, lok[v], first, "");
        xmask2[v] = LLVMBuildAnd(B, lok[v], LLVMBuildNot(B, first, ""), "");
        /* lane l >= split of a crossing vector: output column l - split of the next row */
        xoff[v] = LLVMBuildAdd(B, LLVMBuildMul(B, LLVMBuildAdd(B, h, i64c(c, ic->sth), ""), i64c(c, ic->u_h), ""),
                               LLVMBuildSub(B, LLVMBuildSub(B, tw, split[v], ""), i64c(c, ic->pw), ""), "");
    }
    /* the first k >= pc of tap t */
    LLVMValueRef k0 = LLVMBuildAdd(B, pc, LLVMBuildURem(B, LLVMBuildSub(B, LLVMBuildAdd(B, t, i64c(c, ic->taps), ""),
                                                                         LLVMBuildURem(B, pc, i64c(c, ic->taps), ""), ""),
                                                         i64c(c, ic->taps), ""), "");
    llvm_loop Kl;
    llvm_loop_begin(c, &Kl, k0, LLVMBuildAdd(B, pc, kc, ""), i64c(c, ic->taps), "ik");
    LLVMValueRef ch = LLVMBuildUDiv(B, Kl.index, i64c(c, ic->taps), "");
    LLVMValueRef kl = LLVMBuildSub(B, Kl.index, pc, "");
    LLVMValueRef row = LLVMBuildInBoundsGEP2(B, c->t_f32, xb, (LLVMValueRef[]){LLVMBuildMul(B, ch, i64c(c, ic->s_c), "")}, 1, "");
    for (int v = 0; v < NV; v++) {
        LLVMBasicBlockRef bl = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "i2c_row");
        LLVMBasicBlockRef bg = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "i2c_lanes");
        LLVMBasicBlockRef bj = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "i2c_done");
        LLVMBasicBlockRef bx = NULL;
        if (crossing) {
            LLVMBasicBlockRef bn = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "i2c_not_row");
            bx = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "i2c_rows");
            LLVMBuildCondBr(B, contig[v], bl, bn);
            LLVMPositionBuilderAtEnd(B, bn);
            LLVMBuildCondBr(B, cross[v], bx, bg);
        } else {
            LLVMBuildCondBr(B, contig[v], bl, bg);
        }
        LLVMPositionBuilderAtEnd(B, bl);
        /* (not inbounds: a masked-off lane may lie before u's start) */
        LLVMValueRef lp = LLVMBuildBitCast(B, LLVMBuildGEP2(B, c->t_f32, row, &coff[v], 1, ""), LLVMPointerType(vt, 0), "");
        LLVMTypeRef mt[2] = {vt, LLVMPointerType(vt, 0)};
        LLVMValueRef margs[4] = {lp, llvm_const_i32(c, 4, 1), cmask[v], llvm_const_f32(c, 0, L)};
        LLVMValueRef lv = llvm_call_intrinsic(c, "llvm.masked.load", mt, 2, margs, 4);
        if (rows2) {
            LLVMValueRef lp2 = LLVMBuildBitCast(B, LLVMBuildGEP2(B, c->t_f32, row, (LLVMValueRef[]){LLVMBuildAdd(B, coff[v], i64c(c, L), "")}, 1, ""),
                                                LLVMPointerType(vt, 0), "");
            LLVMValueRef margs2[4] = {lp2, llvm_const_i32(c, 4, 1), cmask2[v], llvm_const_f32(c, 0, L)};
            LLVMValueRef hi = llvm_call_intrinsic(c, "llvm.masked.load", mt, 2, margs2, 4);
            lv = LLVMBuildShuffleVector(B, lv, hi, LLVMConstVector(evens, (unsigned)L), "");
        }
        LLVMBuildBr(B, bj);
        LLVMBasicBlockRef bl_end = LLVMGetInsertBlock(B);
        LLVMValueRef xv = NULL;
        if (crossing) {
            LLVMPositionBuilderAtEnd(B, bx);
            LLVMValueRef xp2 = LLVMBuildBitCast(B, LLVMBuildGEP2(B, c->t_f32, row, &xoff[v], 1, ""), LLVMPointerType(vt, 0), "");
            LLVMValueRef xp = LLVMBuildBitCast(B, LLVMBuildGEP2(B, c->t_f32, row, &coff[v], 1, ""), LLVMPointerType(vt, 0), "");
            LLVMValueRef xargs[4] = {xp, llvm_const_i32(c, 4, 1), xmask[v], llvm_const_f32(c, 0, L)};
            xv = llvm_call_intrinsic(c, "llvm.masked.load", mt, 2, xargs, 4);
            LLVMValueRef xargs2[4] = {xp2, llvm_const_i32(c, 4, 1), xmask2[v], xv}; /* the first row's lanes pass through */
            xv = llvm_call_intrinsic(c, "llvm.masked.load", mt, 2, xargs2, 4);
            LLVMBuildBr(B, bj);
        }
        LLVMPositionBuilderAtEnd(B, bg);
        LLVMValueRef gv = load_lanes(c, row, lsafe[v], lok[v], L);
        LLVMValueRef phi = join_loads(c, vt, bj, lv, bl_end, gv);
        if (crossing)
            LLVMAddIncoming(phi, &xv, &bx, 1);
        store_f32(c, dst, LLVMBuildAdd(B, panel, LLVMBuildAdd(B, LLVMBuildMul(B, kl, i64c(c, NR), ""), i64c(c, v * L), ""), ""), phi, L);
    }
    llvm_loop_end(c, &Kl);
    llvm_loop_end(c, &Tl);
    llvm_loop_end(c, &P);
}

mc_status llvm_emit_gemm_kernel(llvm_ctx *c, const kir_kernel *k, llvm_kernel_info *info)
{
    gemm_plan g;
    mc_status st = make_plan(c, k, &g);
    if (st != MC_OK)
        return st;
    int nb = g.nb, L = g.lanes, NR = g.nr, NV = g.nv;
    int64_t KC = g.kc;
    const kir_view *va = &k->views[g.va], *vb = &k->views[g.vb];
    mc_dtype da = c->kp->buffers[va->buffer].dtype, db = c->kp->buffers[vb->buffer].dtype;
    /* B read through the copies' source (not when swapped: B^T is then packed as A, per unit,
     * where the copies that run once cost less) */
    const llvm_im2col *im2col = c->im2col && !g.swap && !g.packed_b && nb == 1 ? c->im2col : NULL;
    /* swapped, the same matrix is A (packed per unit from x, never padded: llvm_gemm_swaps) */
    const llvm_im2col *im2col_a = c->im2col && g.swap && !c->im2col->pad && !g.direct_a && nb == 1 ? c->im2col : NULL;
    bool kblocks = mc_dim_is_sym(g.K) || g.K > KC;
    int64_t a_floats = g.direct_a ? 0 : (int64_t)MC * KC, b_floats = g.packed_b ? 0 : (int64_t)KC * NC;
    int64_t c_floats = kblocks ? g.ms * g.ncb : 0;
    int kidx = (int)(k - c->kp->kernels);
    MC_ASSERT(kidx >= 0 && kidx < c->kp->nkernels);

    LLVMValueRef *bases = calloc((size_t)c->kp->nbuffers + 1, sizeof *bases);
    LLVMValueRef *batch_off = calloc((size_t)(k->nviews ? k->nviews : 1), sizeof *batch_off);
    epilogue_work work = {0};
    if (!bases || !batch_off || !epilogue_work_alloc(k, &work)) {
        free(bases);
        free(batch_off);
        epilogue_work_free(&work);
        return mc_fail(MC_ERR_SYSTEM, "out of memory generating kernel %s", k->name);
    }
    llvm_begin_function(c, k->name);
    LLVMValueRef buffers = LLVMGetParam(c->fn, 0), begin = LLVMGetParam(c->fn, 1), end = LLVMGetParam(c->fn, 2);
    LLVMValueRef scratch = LLVMBuildBitCast(c->entry_b, LLVMGetParam(c->fn, 3), LLVMPointerType(c->t_f32, 0), "ws");
    LLVMValueRef Ap = scratch;
    LLVMValueRef Bp = LLVMBuildInBoundsGEP2(c->entry_b, c->t_f32, scratch, (LLVMValueRef[]){i64c(c, a_floats)}, 1, "Bp");
    LLVMValueRef Cb = LLVMBuildInBoundsGEP2(c->entry_b, c->t_f32, scratch, (LLVMValueRef[]){i64c(c, a_floats + b_floats)}, 1, "Cbuf");
    LLVMValueRef tile = LLVMBuildBitCast(c->entry_b, llvm_entry_alloca(c, LLVMArrayType(c->t_f32, (unsigned)(MR * NR)), "tile"),
                                         LLVMPointerType(c->t_f32, 0), "");
    LLVMValueRef abase = llvm_buffer_base(c, buffers, bases, va->buffer);
    LLVMValueRef bbase = llvm_buffer_base(c, buffers, bases, vb->buffer);
    LLVMValueRef bpacked = NULL; /* packed B: buffers[c->kp->nbuffers + kernel index] */
    if (g.packed_b) {
        LLVMValueRef slot = LLVMBuildGEP2(c->entry_b, c->t_ptr_i8, buffers, (LLVMValueRef[]){i64c(c, c->kp->nbuffers + kidx)}, 1, "");
        bpacked = LLVMBuildBitCast(c->entry_b, LLVMBuildLoad2(c->entry_b, c->t_ptr_i8, slot, ""), LLVMPointerType(c->t_f32, 0), "bpacked");
    }
    LLVMTypeRef vt = LLVMVectorType(c->t_f32, (unsigned)L);
    LLVMValueRef accv[MR * 4];
    for (int i = 0; i < MR * NV; i++)
        accv[i] = llvm_entry_alloca(c, vt, "acc");

    /* for u in [begin, end): (batch, column block, row block) */
    llvm_loop U;
    llvm_loop_begin(c, &U, begin, end, i64c(c, 1), "unit");
    LLVMValueRef Mv = llvm_size(c, g.M); /* M, read at run time where symbolic */
    LLVMValueRef msplit = g.msplit ? i64c(c, g.msplit)
                                   : LLVMBuildSDiv(c->entry_b, LLVMBuildAdd(c->entry_b, Mv, i64c(c, g.ms - 1), ""), i64c(c, g.ms), "msplit");
    LLVMValueRef msi = LLVMBuildSRem(B, U.index, msplit, "");
    LLVMValueRef t = LLVMBuildSDiv(B, U.index, msplit, "");
    LLVMValueRef Nv = llvm_size(c, g.N), Kv = llvm_size(c, g.K); /* read at run time where symbolic */
    LLVMValueRef nblocks = g.nblocks ? i64c(c, g.nblocks)
                                     : LLVMBuildSDiv(c->entry_b, LLVMBuildAdd(c->entry_b, Nv, i64c(c, g.ncb - 1), ""),
                                                     i64c(c, g.ncb), "nblocks");
    LLVMValueRef jb = LLVMBuildSRem(B, t, nblocks, "");
    LLVMValueRef bt = LLVMBuildSDiv(B, t, nblocks, "");
    LLVMValueRef batch_idx[MC_MAX_RANK];
    for (int d = nb - 1; d >= 0; d--) {
        batch_idx[d] = d == 0 ? bt : LLVMBuildSRem(B, bt, llvm_size(c, k->shape[d]), "");
        if (d > 0)
            bt = LLVMBuildSDiv(B, bt, llvm_size(c, k->shape[d]), "");
    }
    for (int v = 0; v < k->nviews; v++) {
        LLVMValueRef off = llvm_size(c, k->views[v].offset);
        for (int d = 0; d < nb; d++)
            off = LLVMBuildNSWAdd(B, off, LLVMBuildNSWMul(B, batch_idx[d], llvm_size(c, k->views[v].stride[d]), ""), "");
        batch_off[v] = off;
    }
    LLVMValueRef m0 = LLVMBuildMul(B, msi, i64c(c, g.ms), "m0");
    LLVMValueRef m1 = min64(c, LLVMBuildAdd(B, m0, i64c(c, g.ms), ""), Mv);
    LLVMValueRef n0 = LLVMBuildMul(B, jb, i64c(c, g.ncb), "n0");
    LLVMValueRef nc = min64(c, i64c(c, g.ncb), LLVMBuildSub(B, Nv, n0, ""));

    llvm_loop P;
    llvm_loop_begin(c, &P, i64c(c, 0), Kv, i64c(c, KC), "pc");
    LLVMValueRef kc = min64(c, i64c(c, KC), LLVMBuildSub(B, Kv, P.index, ""));
    LLVMValueRef first = LLVMBuildICmp(B, LLVMIntEQ, P.index, i64c(c, 0), "first");
    LLVMValueRef last = LLVMBuildICmp(B, LLVMIntSGE, LLVMBuildAdd(B, P.index, i64c(c, KC), ""), Kv, "last");
    LLVMValueRef bblock = Bp;
    if (g.packed_b) {
        /* K block pc of the packed B starts at pc * np; column n's panel at n * kc in it */
        bblock = fptr(c, bpacked, LLVMBuildAdd(B, LLVMBuildMul(B, P.index, i64c(c, g.np), ""), LLVMBuildMul(B, n0, kc, ""), ""));
    } else if (im2col) {
        (im2col->pad ? emit_pack_im2col_pad : emit_pack_im2col)(c, &g, im2col, Bp, llvm_buffer_base(c, buffers, bases, k->views[im2col->view].buffer),
                                                               batch_idx[0], P.index, kc, n0, nc);
    } else {
        /* pack B[pc:pc+kc, n0:n0+nc]: panels of NR columns */
        LLVMValueRef boff = LLVMBuildNSWAdd(B, batch_off[g.vb],
                                            LLVMBuildNSWAdd(B, LLVMBuildNSWMul(B, P.index, llvm_size(c, g.b_k), ""),
                                                            LLVMBuildNSWMul(B, n0, llvm_size(c, g.b_n), ""), ""), "");
        emit_pack(c, Bp, db, bbase, boff, nc, kc, g.b_n, g.b_k, NR);
    }

    llvm_loop I;
    llvm_loop_begin(c, &I, m0, m1, i64c(c, MC), "ic");
    LLVMValueRef mc = min64(c, i64c(c, MC), LLVMBuildSub(B, m1, I.index, ""));
    if (!g.direct_a) {
        LLVMValueRef aoff = LLVMBuildNSWAdd(B, batch_off[g.va],
                                            LLVMBuildNSWAdd(B, LLVMBuildNSWMul(B, I.index, llvm_size(c, g.a_m), ""),
                                                            LLVMBuildNSWMul(B, P.index, llvm_size(c, g.a_k), ""), ""), "");
        if (im2col_a)
            emit_pack_im2col_a(c, im2col_a, Ap, llvm_buffer_base(c, buffers, bases, k->views[im2col_a->view].buffer),
                               batch_idx[0], I.index, P.index, kc, mc);
        else
            emit_pack(c, Ap, da, abase, aoff, mc, kc, g.a_m, g.a_k, MR);
    }

    llvm_loop J;
    llvm_loop_begin(c, &J, i64c(c, 0), nc, i64c(c, NR), "jr");
    llvm_loop R;
    llvm_loop_begin(c, &R, i64c(c, 0), mc, i64c(c, MR), "ir");
    /* micro-kernel: MR rows, or, on the one tile that M cuts short, only its rows */
    LLVMValueRef m_tile = LLVMBuildAdd(B, I.index, R.index, "");
    micro_args ma = {.g = &g, .accv = accv, .bpanel = fptr(c, bblock, LLVMBuildMul(B, J.index, kc, "")), .kc = kc};
    if (g.direct_a) {
        /* row r of the tile in place (clamped to the last row: edge rows are never stored) */
        LLVMValueRef at = LLVMBuildNSWAdd(B, batch_off[g.va], LLVMBuildNSWMul(B, P.index, llvm_size(c, g.a_k), ""), "");
        for (int r = 0; r < MR; r++) {
            LLVMValueRef row = min64(c, LLVMBuildAdd(B, m_tile, i64c(c, r), ""), LLVMBuildSub(B, Mv, i64c(c, 1), ""));
            ma.arow[r] = fptr(c, abase, LLVMBuildNSWAdd(B, at, LLVMBuildNSWMul(B, row, llvm_size(c, g.a_m), ""), ""));
        }
    } else {
        ma.apanel = fptr(c, Ap, LLVMBuildMul(B, R.index, kc, ""));
    }
    int rem = mc_dim_is_sym(g.M) ? 0 : (int)(g.M % MR);
    if (rem == 0) {
        emit_micro_kernel(c, &ma, MR);
    } else {
        LLVMBasicBlockRef bfull = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "tile_full");
        LLVMBasicBlockRef bshort = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "tile_short");
        LLVMBasicBlockRef bjoin = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "tile_computed");
        LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLE, LLVMBuildAdd(B, m_tile, i64c(c, MR), ""), i64c(c, g.M), ""),
                        bfull, bshort);
        LLVMPositionBuilderAtEnd(B, bfull);
        emit_micro_kernel(c, &ma, MR);
        LLVMBuildBr(B, bjoin);
        LLVMPositionBuilderAtEnd(B, bshort);
        emit_micro_kernel(c, &ma, rem);
        LLVMBuildBr(B, bjoin);
        LLVMPositionBuilderAtEnd(B, bjoin);
    }
    LLVMValueRef m = LLVMBuildAdd(B, I.index, R.index, "m");
    LLVMValueRef n = LLVMBuildAdd(B, n0, J.index, "n");
    LLVMValueRef acc[MR * 4];
    for (int i = 0; i < MR * NV; i++)
        acc[i] = LLVMBuildLoad2(B, vt, accv[i], "");
    if (kblocks) {
        /* partial sums of earlier K blocks live in Cbuf[(m - m0) * ncb + (n - n0)] */
        LLVMValueRef cbase = LLVMBuildAdd(B, LLVMBuildMul(B, LLVMBuildSub(B, m, m0, ""), i64c(c, g.ncb), ""), J.index, "");
        LLVMBasicBlockRef badd = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "add_partial");
        LLVMBasicBlockRef bjoin = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "partial_done");
        LLVMBasicBlockRef from = LLVMGetInsertBlock(B);
        LLVMBuildCondBr(B, first, bjoin, badd);
        LLVMPositionBuilderAtEnd(B, badd);
        LLVMValueRef summed[MR * 4];
        for (int r = 0; r < MR; r++)
            for (int v = 0; v < NV; v++) {
                LLVMValueRef off = LLVMBuildAdd(B, cbase, i64c(c, r * g.ncb + v * L), "");
                LLVMValueRef old = LLVMBuildLoad2(B, vt, vptr(c, Cb, off, L), "");
                LLVMSetAlignment(old, 4);
                summed[r * NV + v] = LLVMBuildFAdd(B, acc[r * NV + v], old, "");
            }
        LLVMBuildBr(B, bjoin);
        LLVMPositionBuilderAtEnd(B, bjoin);
        for (int i = 0; i < MR * NV; i++) {
            LLVMValueRef phi = LLVMBuildPhi(B, vt, "");
            LLVMValueRef vals[2] = {acc[i], summed[i]};
            LLVMBasicBlockRef blocks[2] = {from, badd};
            LLVMAddIncoming(phi, vals, blocks, 2);
            acc[i] = phi;
        }
        LLVMBasicBlockRef bkeep = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "keep_partial");
        LLVMBasicBlockRef bepi = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "epilogue");
        LLVMBasicBlockRef bnext = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "tile_done");
        LLVMBuildCondBr(B, last, bepi, bkeep);
        LLVMPositionBuilderAtEnd(B, bkeep);
        for (int r = 0; r < MR; r++)
            for (int v = 0; v < NV; v++)
                store_f32(c, Cb, LLVMBuildAdd(B, cbase, i64c(c, r * g.ncb + v * L), ""), acc[r * NV + v], L);
        LLVMBuildBr(B, bnext);
        LLVMPositionBuilderAtEnd(B, bepi);
        emit_epilogue(c, k, &g, &work, bases, batch_idx, batch_off, m, n, m1, acc, tile);
        LLVMBuildBr(B, bnext);
        LLVMPositionBuilderAtEnd(B, bnext);
    } else {
        emit_epilogue(c, k, &g, &work, bases, batch_idx, batch_off, m, n, m1, acc, tile);
    }
    llvm_loop_end(c, &R);
    llvm_loop_end(c, &J);
    llvm_loop_end(c, &I);
    llvm_loop_end(c, &P);
    llvm_loop_end(c, &U);
    llvm_finish_function(c);

    info->grain = 1;
    if (g.nbatch && g.nblocks && !mc_dim_is_sym(g.M) && !mc_dim_is_sym(g.K)) {
        info->units = g.nbatch * g.nblocks * g.msplit;
        int64_t flops = 2 * g.nbatch * g.M * g.N * g.K;
        info->serial = flops < (1 << 20) || info->units < 2;
    } else { /* units = batch.. * ceil(N / ncb) * ceil(M / ms), for each binding (llvm_info_bind) */
        info->sized = true;
        info->units_const = 1;
        for (int d = 0; d < nb; d++) {
            info->units_dim[info->nunits_dims] = k->shape[d];
            info->units_div[info->nunits_dims++] = 1;
        }
        info->units_dim[info->nunits_dims] = g.N;
        info->units_div[info->nunits_dims++] = g.ncb;
        info->units_dim[info->nunits_dims] = g.M;
        info->units_div[info->nunits_dims++] = g.ms;
    }
    info->elide = im2col ? (int)im2col->elide : im2col_a ? (int)im2col_a->elide : 0;
    info->scratch_bytes = (a_floats + b_floats + c_floats) * 4 + 64;
    free(bases);
    free(batch_off);
    epilogue_work_free(&work);
    if (g.packed_b) {
        info->packed_b = (llvm_packed_b){.bytes = g.packed_bytes, .buffer = vb->buffer, .dtype = db,
                                         .offset = vb->offset, .k = g.K, .n = g.N, .stride_k = g.b_k,
                                         .stride_n = g.b_n, .kc = KC, .nr = NR, .np = g.np};
    }
    return MC_OK;
}
