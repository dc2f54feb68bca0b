/* The plan of a pointwise, copy or reduction kernel, made before llvm_kernel.c emits its loops.
 *
 * A kernel's index space is first simplified: adjacent dimensions merge when every view that
 * walks them steps through memory as one dimension would (stride[d] == stride[d+1] * size[d+1])
 * and no iota reads them, so a contiguous [4096, 4096] tensor becomes one long axis and a
 * row-broadcast stays two (llvm_plan_loops). A pointwise kernel's last dimension is its loop and
 * the earlier ones are rows, a long last dimension also cut into chunks so that a kernel with
 * few rows still splits across threads; a reduction's leading nrow dimensions are its rows.
 *
 * For the memory-bound kernels, three things keep the memory busy and no busier than it must
 * be: stores to a large buffer the kernel never reads are non-temporal (no read for ownership,
 * no cache pollution), on vector-aligned addresses reached by a peel; a transcendental that a
 * reduction's later pass would compute again (softmax's exp) is kept in a per-thread row cache
 * instead (llvm_plan_row_cache); that heavy later pass prefetches the next row, so that its
 * memory time overlaps the computation instead of following it (a heavy pointwise kernel
 * prefetches a fixed distance ahead); and a reduction's last pass, which streams the results
 * out, runs for the previous row inside the pass before it (llvm_plan_pipeline). A max whose
 * NaNs reach every output through a sum anyway (softmax's) skips its NaN handling
 * (llvm_plan_lax). softmax's exp(x - max) skips its per-vector range check, and takes a shorter
 * exp, in rows whose minimum, maximum and sum show that every argument is in range
 * (plan_exp_ranges), and a max of x * c with c > 0 folds x and scales the row's total
 * (plan_scaled_extrema); llvm_plan_reductions makes both.
 */
#include "backends/cpu/llvm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    CHUNK = 8192,          /* pointwise: elements of the last axis per parallel unit, when long */
    ROW_CACHE_MAX_BYTES = 128 << 10, /* reductions: per-thread scratch for values reused */
};

/* Stores to a buffer at least this large, which the kernel writes and never reads, bypass the
 * caches (non-temporal): the data would only evict the working set on its way to memory, and
 * a normal store first reads each line it writes (read for ownership), a third of the traffic
 * of a copy. Half the L3 of the machines this is tuned on (32 MB), so that an intermediate
 * the next kernel reads back from the cache stays a normal store. */
#define NONTEMPORAL_MIN_BYTES ((int64_t)16 << 20)
#define PREFETCH_MIN_BYTES ((int64_t)4 << 20) /* below it the whole buffer stays in L2/L3 */

/* ---- the plan: merged dimensions --------------------------------------------------------- */

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
        if ((k->code[i].kind == KI_LOAD || k->code[i].kind == KI_GATHER) && k->blocks[llvm_block_of(k, i)].loop)
            in_loop[k->code[i].view] = true;
    for (int s = 0; s < k->nstores; s++)
        if (k->blocks[k->stores[s].block].loop)
            in_loop[k->stores[s].view] = true;
}

/* Whether buffers a and b may share memory: the same buffer, or temporaries whose places in
 * the arena overlap (the memory plan puts a kernel's output where its dead input was). In a
 * kernel generated from a symbolic kernel list (c->dims) any two temps may: they are placed
 * per binding, after the code is made, whatever their sizes. */
static bool buffers_alias(const llvm_ctx *c, int a, int b)
{
    if (a == b)
        return true;
    const kir_buffer *x = &c->kp->buffers[a], *y = &c->kp->buffers[b];
    if (x->kind != KBUF_TEMP || y->kind != KBUF_TEMP)
        return false;
    if (c->dims)
        return true;
    int64_t xb, yb;
    if (mc_mul_overflows(x->numel, (int64_t)mc_dtype_size(x->dtype), &xb) ||
        mc_mul_overflows(y->numel, (int64_t)mc_dtype_size(y->dtype), &yb))
        return true;
    return x->offset < y->offset + yb && y->offset < x->offset + xb;
}

/* Whether the kernel loads from memory that buffer `buf` may share. */
static bool kernel_reads(const llvm_ctx *c, const kir_kernel *k, int buf)
{
    for (int i = 0; i < k->ncode; i++)
        if ((k->code[i].kind == KI_LOAD || k->code[i].kind == KI_GATHER) &&
            buffers_alias(c, k->views[k->code[i].view].buffer, buf))
            return true;
    return false;
}

/* Which views' stores are non-temporal (NONTEMPORAL_MIN_BYTES): contiguous along the vector
 * axis, to a large buffer the kernel never loads from. x86-64 only, where the fence that orders
 * them (sfence) is known. */
static void plan_nontemporal(llvm_ctx *c, const kir_kernel *k, llvm_loop_plan *pl)
{
    if (strncmp(c->target->triple, "x86_64", 6) != 0 || pl->rank == 0)
        return;
    for (int s = 0; s < k->nstores; s++) {
        int v = k->stores[s].view, buf = k->views[v].buffer;
        const kir_buffer *kb = &c->kp->buffers[buf];
        /* not from a symbolic kernel list (c->dims): a buffer's size, hence its bytes, and
         * where temps are placed are the binding's (the conservative choice: plain stores) */
        bool ok = !c->dims && pl->stride[v][pl->rank - 1] == 1 && (pl->pointwise || k->blocks[k->stores[s].block].loop);
        int64_t bytes;
        ok = ok && !mc_mul_overflows(kb->numel, (int64_t)mc_dtype_size(kb->dtype), &bytes) &&
             bytes >= NONTEMPORAL_MIN_BYTES;
        ok = ok && !kernel_reads(c, k, buf);
        pl->nontemporal[v] = ok;
        pl->any_nontemporal |= ok;
    }
    pl->stores_unread = true;
    for (int s = 0; s < k->nstores; s++)
        if (kernel_reads(c, k, k->views[k->stores[s].view].buffer))
            pl->stores_unread = false;
}

/* A reduction kernel walks each row several times: the first loop block streams it from
 * memory, the later ones find it in the cache and compute (softmax: exp). Without help the
 * memory idles while a long computation runs, and the two add up. So the later loop blocks
 * that are heavy (llvm_block_is_heavy), and the one a pipelined kernel runs its last pass in,
 * prefetch the next row of the views the first one streams (contiguous along the reduced
 * axis, from a buffer of at least PREFETCH_MIN_BYTES) into L2, at the position they are at
 * in the current row. Other light passes are short enough for the hardware's own prefetcher,
 * and the extra instructions only cost there. A heavy pointwise kernel prefetches every view
 * it streams a fixed distance ahead (pointwise_step). */
static void plan_prefetch(llvm_ctx *c, const kir_kernel *k, llvm_loop_plan *pl)
{
    pl->first_loop = -1;
    for (int b = 0; b < k->nblocks && pl->first_loop < 0; b++)
        if (k->blocks[b].loop)
            pl->first_loop = b;
    int first = 0, end = k->ncode;
    if (!pl->pointwise) {
        if (pl->first_loop < 0 || pl->nrow == 0 || pl->rank - pl->nrow != 1)
            return;
        first = k->blocks[pl->first_loop].first;
        end = first + k->blocks[pl->first_loop].count;
    }
    if (pl->rank == 0)
        return;
    for (int i = first; i < end; i++) {
        if (k->code[i].kind != KI_LOAD)
            continue;
        int v = k->code[i].view;
        const kir_buffer *kb = &c->kp->buffers[k->views[v].buffer];
        int64_t bytes;
        if (pl->stride[v][pl->rank - 1] == 1 && (pl->pointwise || pl->stride[v][pl->nrow - 1] != 0) &&
            !mc_dim_is_sym(kb->numel) &&
            !mc_mul_overflows(kb->numel, (int64_t)mc_dtype_size(kb->dtype), &bytes) && bytes >= PREFETCH_MIN_BYTES)
            pl->prefetch[v] = true;
    }
}

mc_status llvm_plan_loops(llvm_ctx *c, const kir_kernel *k, llvm_loop_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    pl->pointwise = k->nreds == 0 && k->nrow == k->rank;
    for (int b = 0; b < k->nblocks && pl->pointwise; b++)
        if (k->blocks[b].loop)
            pl->pointwise = false;
    pl->stride = calloc((size_t)(k->nviews ? k->nviews : 1), sizeof *pl->stride);
    pl->nontemporal = calloc((size_t)(k->nviews ? k->nviews : 1), sizeof *pl->nontemporal);
    pl->prefetch = calloc((size_t)(k->nviews ? k->nviews : 1), sizeof *pl->prefetch);
    pl->lax = calloc((size_t)(k->nreds ? k->nreds : 1), sizeof *pl->lax);
    bool *in_loop = calloc((size_t)(k->nviews ? k->nviews : 1), sizeof *in_loop);
    if (!pl->stride || !pl->nontemporal || !pl->prefetch || !pl->lax || !in_loop) {
        free(in_loop);
        return mc_fail(MC_ERR_SYSTEM, "out of memory planning kernel %s", k->name);
    }
    views_in_loops(k, pl->pointwise, in_loop);
    int region_split = pl->pointwise ? 0 : k->nrow; /* merging never crosses rows | reduced */
    int n = 0;
    for (int d = 0; d < k->rank; d++) {
        bool merge = n > 0 && d != region_split && !dim_indexed(k, d) && !dim_indexed(k, d - 1);
        /* symbolic sizes (a kernel list whose sizes are read at run time) do not merge: their
         * products are not numbers here; the constant dimensions around them still do */
        merge = merge && !mc_dim_is_sym(k->shape[d]) && !mc_dim_is_sym(pl->shape[n - 1]);
        for (int v = 0; v < k->nviews && merge; v++) {
            if (d >= region_split && !in_loop[v])
                continue;
            if (mc_dim_is_sym(k->views[v].stride[d]) || mc_dim_is_sym(pl->stride[v][n - 1]) ||
                pl->stride[v][n - 1] != k->views[v].stride[d] * k->shape[d])
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
    pl->rows = 1; /* 0 where a row dimension is symbolic: the backend counts them per binding */
    for (int d = 0; d < pl->nrow; d++)
        pl->rows = mc_dim_is_sym(pl->shape[d]) ? 0 : pl->rows * pl->shape[d];
    pl->nchunks = 1;
    pl->chunk = n > pl->nrow ? pl->shape[n - 1] : 1;
    if (pl->pointwise && n > 0 && !mc_dim_is_sym(pl->shape[n - 1]) && pl->shape[n - 1] > 2 * CHUNK) {
        pl->chunk = CHUNK;
        pl->nchunks = (pl->shape[n - 1] + CHUNK - 1) / CHUNK;
    }
    plan_nontemporal(c, k, pl);
    plan_prefetch(c, k, pl);
    return MC_OK;
}

/* A block whose instructions include a transcendental: its loops are not unrolled and, in a
 * reduction kernel, fold into one accumulator set, which keeps the long body in registers.
 * Like every loop they step two native vectors at a time, whose independent halves overlap
 * their latency chains. */
bool llvm_block_is_heavy(const kir_kernel *k, int blk)
{
    const kir_block *bl = &k->blocks[blk];
    for (int i = bl->first; i < bl->first + bl->count; i++)
        if (k->code[i].kind == KI_OP && mc_op_is_heavy(k->code[i].op))
            return true;
    return false;
}

/* Whether instructions i and j of loop blocks compute the same value at every point: the same
 * operation on the same operands, loads of the same view of a buffer whose memory the kernel
 * never stores to (stored[] marks every buffer that may share memory with a stored one), or
 * one and the same row-block value. */
static bool same_value(const kir_kernel *k, const bool *stored, int i, int j)
{
    if (i == j)
        return true;
    const kir_instr *a = &k->code[i], *b = &k->code[j];
    if (a->kind != b->kind || a->dtype != b->dtype || !k->blocks[llvm_block_of(k, i)].loop ||
        !k->blocks[llvm_block_of(k, j)].loop)
        return false;
    switch (a->kind) {
    case KI_LOAD: {
        const kir_view *va = &k->views[a->view], *vb = &k->views[b->view];
        if (va->buffer != vb->buffer || va->offset != vb->offset || stored[va->buffer])
            return false;
        for (int d = 0; d < k->rank; d++)
            if (va->stride[d] != vb->stride[d])
                return false;
        return true;
    }
    case KI_CONST: return a->value == b->value;
    case KI_SIZE: return a->value == b->value && a->size == b->size && a->times == b->times;
    case KI_INDEX: case KI_ROWVAL: return a->view == b->view;
    case KI_ACC: case KI_GATHER: return false;
    case KI_OP: {
        if (a->op != b->op)
            return false;
        int nin = a->op == MC_OP_CAST ? 1 : mc_op_table[a->op].min_in;
        for (int n = 0; n < nin; n++)
            if (!same_value(k, stored, a->arg[n], b->arg[n]))
                return false;
        return true;
    }
    }
    return false;
}

/* Per buffer: whether it may share memory with one the kernel stores to (NULL: out of memory). */
static bool *stored_buffers(llvm_ctx *c, const kir_kernel *k)
{
    bool *stored = calloc((size_t)c->kp->nbuffers + 1, sizeof *stored);
    for (int s = 0; s < k->nstores && stored; s++)
        for (int b = 0; b < c->kp->nbuffers; b++)
            if (buffers_alias(c, b, k->views[k->stores[s].view].buffer))
                stored[b] = true;
    return stored;
}

/* Float operations whose result is NaN wherever an operand is. */
static bool propagates_nan(const kir_kernel *k, const kir_instr *in)
{
    if (in->kind != KI_OP || !mc_dtype_is_float(in->dtype))
        return false;
    switch (in->op) {
    case MC_OP_NEG: case MC_OP_ABS: case MC_OP_EXP: case MC_OP_LOG: case MC_OP_SQRT: case MC_OP_RSQRT:
    case MC_OP_RECIP: case MC_OP_ADD: case MC_OP_SUB: case MC_OP_MUL: case MC_OP_DIV:
        return true;
    case MC_OP_CAST:
        return mc_dtype_is_float(k->code[in->arg[0]].dtype);
    case MC_OP_INPUT: case MC_OP_PARAM: case MC_OP_CONST: case MC_OP_TANH: case MC_OP_SIGMOID:
    case MC_OP_RELU: case MC_OP_GELU: case MC_OP_GELU_TANH: case MC_OP_SILU: case MC_OP_SIN:
    case MC_OP_COS: case MC_OP_ERF:
    case MC_OP_FLOOR: case MC_OP_CEIL: case MC_OP_ROUND: case MC_OP_SIGN: case MC_OP_SOFTPLUS:
    case MC_OP_LEAKY_RELU: case MC_OP_CLIP: case MC_OP_POW: case MC_OP_MAXIMUM: case MC_OP_MINIMUM:
    case MC_OP_EQ: case MC_OP_NE: case MC_OP_LT: case MC_OP_LE: case MC_OP_GT: case MC_OP_GE:
    case MC_OP_AND: case MC_OP_OR: case MC_OP_XOR: case MC_OP_NOT:
    case MC_OP_WHERE: case MC_OP_SUM: case MC_OP_MEAN: case MC_OP_MAX: case MC_OP_MIN:
    case MC_OP_ARGMAX: case MC_OP_ARGMIN: case MC_OP_CUMSUM: case MC_OP_GATHER: case MC_OP_UPDATE:
    case MC_OP_CONV: case MC_OP_MAXPOOL: case MC_OP_AVGPOOL: case MC_OP_PAD: case MC_OP_BATCHNORM:
    case MC_OP_SOFTMAX: case MC_OP_LOG_SOFTMAX: case MC_OP_LAYERNORM: case MC_OP_RMSNORM:
    case MC_OP_MATMUL: case MC_OP_LINEAR: case MC_OP_TRANSPOSE: case MC_OP_RESHAPE:
    case MC_OP_EXPAND: case MC_OP_SLICE: case MC_OP_CONCAT: case MC_OP_IOTA: case MC_OP_FULL:
    case MC_OP_ALLREDUCE: case MC_NUM_OPS:
        break;
    }
    return false;
}

/* Whether instruction i is NaN wherever `src` is (with src >= 0: an instruction of a loop
 * block, matched by same_value; else the result of reduction `red`): i is such a value, or
 * propagates_nan from one. `seen` marks instructions visited (the code is a DAG). */
static bool nan_follows(const kir_kernel *k, const bool *stored, int i, int src, int red, bool *seen)
{
    const kir_instr *in = &k->code[i];
    if (src >= 0 ? same_value(k, stored, i, src) : in->kind == KI_ROWVAL && in->view == red)
        return true;
    if (seen[i] || !propagates_nan(k, in))
        return false;
    seen[i] = true;
    int nin = in->op == MC_OP_CAST ? 1 : mc_op_table[in->op].min_in;
    for (int n = 0; n < nin; n++)
        if (nan_follows(k, stored, in->arg[n], src, red, seen))
            return true;
    return false;
}

/* A max (or min) reduction r need not propagate NaN where a NaN among its inputs reaches every
 * output anyway: a sum reduction s adds up a value that is NaN wherever r's input is (softmax:
 * exp(x - max) for the same x), and every store is NaN wherever s is. A row with a NaN then
 * gives NaN outputs whatever r's result, and a row without gives the same max. The plain
 * compare-and-select is one instruction (maxps) where the NaN-keeping one is four: softmax
 * 30.8 -> 29.1 us on [16, 4096], 5.4 -> 4.9 ms on [4096, 4096]. */
mc_status llvm_plan_lax(llvm_ctx *c, const kir_kernel *k, llvm_loop_plan *pl)
{
    if (k->nreds < 2)
        return MC_OK;
    bool *stored = stored_buffers(c, k);
    bool *seen = malloc((size_t)k->ncode * sizeof *seen);
    if (!stored || !seen) {
        free(stored), free(seen);
        return mc_fail(MC_ERR_SYSTEM, "out of memory planning kernel %s", k->name);
    }
    for (int r = 0; r < k->nreds; r++) {
        const kir_reduce *rd = &k->reds[r];
        if ((rd->op != MC_OP_MAX && rd->op != MC_OP_MIN) || rd->dtype != MC_F32)
            continue;
        for (int s = 0; s < k->nreds && !pl->lax[r]; s++) {
            if (k->reds[s].op != MC_OP_SUM || k->reds[s].dtype != MC_F32)
                continue;
            memset(seen, 0, (size_t)k->ncode * sizeof *seen);
            bool ok = nan_follows(k, stored, k->reds[s].value, rd->value, -1, seen);
            for (int t = 0; t < k->nstores && ok; t++) {
                memset(seen, 0, (size_t)k->ncode * sizeof *seen);
                ok = nan_follows(k, stored, k->stores[t].value, -1, s, seen);
            }
            pl->lax[r] = ok;
        }
    }
    free(stored), free(seen);
    return MC_OK;
}

/* softmax's exp(x - max) needs no per-vector range check where the row's range is known: its
 * arguments then lie in [-87, 1] (row_in_range). So for every f32 exp of (v - the max of v),
 * v matched by same_value, the kernel gets two more reductions of v in the max's loop block:
 * its minimum (plain minps: a NaN is caught by the sum) and its sum (an addps, which is NaN or
 * infinite wherever a NaN or an infinity is in the row). Rows that pass take the exp for
 * arguments below a max (exp_below_max, two multiply-adds shorter, 2.2 ulp near the max), the
 * others the checked exp, whose special cases they need. The check was seven instructions
 * per two vectors of the exp pass (of about sixty); the extra
 * reductions cost two per vector of the max pass, which waits on memory anyway, and
 * plan_scaled_extrema takes one away again (softmax of x * scale):
 * softmax [64, 4096], one thread: 123.8 -> 117.9 us; [4096, 4096], two threads: 5.16 -> 5.03 ms
 * (medians of 10 and 20 alternating rounds).
 * On success *kx is k with its reductions copied to *reds (NULL for a kernel without any)
 * and the extra ones after them, and (*guard)[i] is, for each such exp i, the index of its
 * minimum reduction (the sum follows it), -1 elsewhere (*guard NULL: no such exp). */
static mc_status plan_exp_ranges(llvm_ctx *c, const kir_kernel *k, kir_kernel *kx, kir_reduce **reds, int **guard)
{
    *reds = NULL, *guard = NULL;
    if (k->nreds == 0 || k->category != KIR_REDUCTION)
        return MC_OK;
    bool *stored = stored_buffers(c, k);
    int *g = malloc((size_t)k->ncode * sizeof *g), *added = calloc((size_t)k->nreds, sizeof *added);
    kir_reduce *rs = malloc((size_t)(3 * k->nreds) * sizeof *rs);
    if (!stored || !g || !added || !rs) {
        free(stored), free(g), free(added), free(rs);
        return mc_fail(MC_ERR_SYSTEM, "out of memory planning kernel %s", k->name);
    }
    memcpy(rs, k->reds, (size_t)k->nreds * sizeof *rs);
    int n = k->nreds;
    for (int i = 0; i < k->ncode; i++) {
        g[i] = -1;
        const kir_instr *in = &k->code[i];
        if (in->kind != KI_OP || in->op != MC_OP_EXP || in->dtype != MC_F32 || !k->blocks[llvm_block_of(k, i)].loop)
            continue;
        const kir_instr *sub = &k->code[in->arg[0]];
        if (sub->kind != KI_OP || sub->op != MC_OP_SUB || sub->dtype != MC_F32 ||
            k->code[sub->arg[1]].kind != KI_ROWVAL)
            continue;
        int r = k->code[sub->arg[1]].view;
        const kir_reduce *rd = &k->reds[r];
        if (rd->op != MC_OP_MAX || rd->dtype != MC_F32 || k->code[rd->value].dtype != MC_F32 ||
            !same_value(k, stored, sub->arg[0], rd->value))
            continue;
        if (!added[r]) {
            added[r] = n;
            rs[n++] = (kir_reduce){.op = MC_OP_MIN, .block = rd->block, .value = rd->value, .dtype = MC_F32};
            rs[n++] = (kir_reduce){.op = MC_OP_SUM, .block = rd->block, .value = rd->value, .dtype = MC_F32};
        }
        g[i] = added[r];
    }
    free(stored), free(added);
    if (n == k->nreds)
        free(g), g = NULL;
    *kx = *k;
    kx->reds = rs;
    kx->nreds = n;
    *reds = rs, *guard = g;
    return MC_OK;
}

/* A max or min of x * c with a constant c > 0 is c times the max or min of x, exactly (rounding
 * is monotonic), so the reduction folds x and its total is multiplied by c once per row:
 * softmax's max pass over x * scale loses its multiply. The sums plan_exp_ranges added
 * (reductions `added` on) fold x too: c times the sum of x is as good a test for NaN and
 * infinities, and an x * c that overflows shows in the scaled max or min. scale[r] is c, or 0
 * where reduction r is left as it is. */
static void plan_scaled_extrema(const kir_kernel *k, kir_reduce *reds, int nreds, int added, double *scale)
{
    for (int r = 0; r < nreds; r++) {
        kir_reduce *rd = &reds[r];
        const kir_instr *m = &k->code[rd->value];
        if ((rd->op != MC_OP_MAX && rd->op != MC_OP_MIN && r < added) || rd->dtype != MC_F32 ||
            m->kind != KI_OP || m->op != MC_OP_MUL || m->dtype != MC_F32)
            continue;
        for (int a = 0; a < 2; a++) {
            const kir_instr *cst = &k->code[m->arg[1 - a]];
            if (cst->kind != KI_CONST || !(cst->value > 0) || !isfinite((float)cst->value) ||
                (float)cst->value == 0 || k->code[m->arg[a]].dtype != MC_F32)
                continue;
            scale[r] = (float)cst->value;
            rd->value = m->arg[a];
            break;
        }
    }
}

void llvm_red_plan_free(llvm_red_plan *rp)
{
    free(rp->reds), free(rp->guard), free(rp->scale);
}

mc_status llvm_plan_reductions(llvm_ctx *c, const kir_kernel *k, llvm_red_plan *rp)
{
    memset(rp, 0, sizeof *rp);
    mc_status st = plan_exp_ranges(c, k, &rp->k, &rp->reds, &rp->guard);
    if (st != MC_OK || !rp->reds)
        return st;
    rp->scale = calloc((size_t)rp->k.nreds, sizeof *rp->scale);
    if (!rp->scale) {
        llvm_red_plan_free(rp);
        return mc_fail(MC_ERR_SYSTEM, "out of memory planning kernel %s", k->name);
    }
    plan_scaled_extrema(k, rp->reds, rp->k.nreds, k->nreds, rp->scale);
    return MC_OK;
}

/* The row cache of a reduction kernel whose reduced dimensions merge into one: each
 * transcendental of a loop block that an earlier loop block computes already is loaded from
 * the scratch row the earlier one saves it to, within ROW_CACHE_MAX_BYTES per thread. */
mc_status llvm_plan_row_cache(llvm_ctx *c, const kir_kernel *k, const llvm_loop_plan *pl, llvm_row_cache *rc)
{
    memset(rc, 0, sizeof *rc);
    if (pl->pointwise || pl->rank - pl->nrow != 1 || k->ncode == 0)
        return MC_OK;
    if (mc_dim_is_sym(pl->shape[pl->rank - 1]))
        return MC_OK; /* a row of a length known only when it runs: no row cache */
    rc->dim = pl->rank - 1;
    rc->extent = pl->shape[rc->dim];
    rc->save = malloc((size_t)k->ncode * sizeof *rc->save);
    rc->load = malloc((size_t)k->ncode * sizeof *rc->load);
    bool *stored = stored_buffers(c, k);
    if (!rc->save || !rc->load || !stored) {
        free(stored);
        return mc_fail(MC_ERR_SYSTEM, "out of memory planning kernel %s", k->name);
    }
    for (int i = 0; i < k->ncode; i++)
        rc->save[i] = rc->load[i] = -1;
    for (int i = 0; i < k->ncode; i++) {
        int bi = llvm_block_of(k, i);
        if (!k->blocks[bi].loop || k->code[i].kind != KI_OP || !mc_op_is_heavy(k->code[i].op))
            continue;
        for (int j = 0; j < k->blocks[bi].first; j++) {
            if (k->code[j].kind != KI_OP || k->code[j].op != k->code[i].op || !same_value(k, stored, i, j))
                continue;
            if (rc->save[j] < 0) {
                if ((rc->rows + 1) * rc->extent * (int64_t)sizeof(float) > ROW_CACHE_MAX_BYTES)
                    break;
                rc->save[j] = rc->rows++;
            }
            rc->load[i] = rc->save[j];
            break;
        }
    }
    free(stored);
    return MC_OK;
}

/* A reduction kernel's passes over a row take turns: the first streams the row in, the middle
 * ones compute from the cache (softmax's exp, layernorm's variance), the last streams the
 * results out; the memory and the core would each wait for the other. So where the last block
 * is a loop block that only stores (no reduction, nothing it stores read by the kernel or
 * stored by another block, every non-temporal vector position aligned), the kernel is
 * pipelined: the loop block before it
 * runs it for the previous row at the same position (partner_step) and prefetches the next
 * row, so the writes of one row and the reads of the next both overlap the computation of
 * this one; the last block runs once more on its own after the last row. The row cache then
 * holds two sets of rows, one per row parity. Softmax 5.8 -> 4.3 ms, layernorm 4.4 -> 3.3 ms,
 * rmsnorm 4.1 -> 3.5 ms at [4096, 4096] on 2 cores. Returns the block that runs the last
 * one, or -1. Whether the buffers themselves are aligned is checked when the kernel runs. */
int llvm_plan_pipeline(llvm_ctx *c, const kir_kernel *k, const llvm_loop_plan *pl)
{
    int last = k->nblocks - 1, h = -1;
    if (pl->pointwise || pl->rank - pl->nrow != 1 || pl->nrow == 0 || !pl->any_nontemporal || !pl->stores_unread ||
        last < 1 || !k->blocks[last].loop)
        return -1;
    for (int b = last - 1; b >= 0 && h < 0; b--)
        if (k->blocks[b].loop)
            h = b;
    if (h < 0)
        return -1;
    for (int r = 0; r < k->nreds; r++)
        if (k->reds[r].block == last)
            return -1;
    const kir_block *bl = &k->blocks[last];
    for (int i = bl->first; i < bl->first + bl->count; i++)
        if (k->code[i].kind == KI_ACC)
            return -1;
    for (int s = 0; s < k->nstores; s++) {
        int v = k->stores[s].view;
        if (k->stores[s].block != last) { /* not deferred: it must not meet the deferred ones */
            for (int t = 0; t < k->nstores; t++)
                if (k->stores[t].block == last &&
                    buffers_alias(c, k->views[v].buffer, k->views[k->stores[t].view].buffer))
                    return -1;
            continue;
        }
        if (!pl->nontemporal[v])
            continue;
        if (k->views[v].offset % c->lanes != 0)
            return -1;
        for (int d = 0; d < pl->nrow; d++)
            if (pl->stride[v][d] % c->lanes != 0)
                return -1;
    }
    return h;
}
