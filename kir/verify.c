/* The kernel IR's verifier: every invariant kir.h states, checked after lowering and again after
 * memory planning (the pipeline runs it where it runs the graph verifier: debug builds, tests,
 * `minic dump`). A failure is a bug in a pass, never the user's mistake, so the message names
 * the stage, the kernel and what is broken, for a developer to read.
 *
 * What it checks: buffers have a dtype, a positive size and, once planned, a place inside the
 * arena; blocks tile the instruction list in order; every operand is an earlier instruction of
 * the same block or of an earlier row block (a loop block never reads another loop block);
 * loads, indices, row values and the accumulator name things that exist; reductions accumulate
 * in loop blocks; every element a view can touch over the kernel's index space lies inside its
 * buffer (GEMM operands over their own [batch.., rows, cols] spaces); a collective's two views
 * contiguous, of one float dtype, disjoint or the same elements.
 */
#include "kir/kir.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *stage;
    const kir_program *kp;
    const kir_kernel *k;
    bool planned;
} checker;

static mc_status broken(const checker *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static mc_status broken(const checker *c, const char *fmt, ...)
{
    char detail[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return mc_fail(MC_ERR_SYSTEM, "internal error: kernel IR after %s: %s%s%s", c->stage,
                   c->k ? "kernel " : "", c->k ? c->k->name : "", detail);
}

/* The lowest and highest element a view reaches over dims [0, ndim) of `shape`. */
static void view_extent(const int64_t *stride, const int64_t *shape, int ndim, int64_t offset,
                        int64_t *lo, int64_t *hi)
{
    *lo = *hi = offset;
    for (int d = 0; d < ndim; d++) {
        int64_t step = stride[d] * (shape[d] - 1);
        if (step < 0)
            *lo += step;
        else
            *hi += step;
    }
}

static mc_status check_view_range(const checker *c, int v, const int64_t *shape, int ndim)
{
    const kir_view *w = &c->k->views[v];
    int64_t lo, hi;
    view_extent(w->stride, shape, ndim, w->offset, &lo, &hi);
    const kir_buffer *b = &c->kp->buffers[w->buffer];
    if (lo < 0 || hi >= b->numel)
        return broken(c, ": view %lld reaches element %lld outside its buffer", (long long)(v), (long long)(lo < 0 ? lo : hi));
    return MC_OK;
}

/* Is instruction `arg` readable from an instruction of block `block`? */
static bool readable(const kir_kernel *k, const int *block_of, int arg, int at, int block)
{
    if (arg < 0 || arg >= at)
        return false;
    int from = block_of[arg];
    return from == block || (from < block && !k->blocks[from].loop);
}

/* Is view v one of attention kernel k's operands (q, k, v or a mask)? */
static bool attention_operand(const kir_kernel *k, int v)
{
    const kir_attention *a = &k->attn;
    if (v == a->q || v == a->k || v == a->v)
        return true;
    for (int s = 0; s < a->nsteps; s++)
        if (a->steps[s].view == v)
            return true;
    return false;
}

/* An attention kernel's operands and steps: views that exist, inside their buffers over their
 * own [batch.., rows, cols] spaces, masks of the right dtype, a shape that matches. */
static mc_status check_attention(const checker *c)
{
    const kir_kernel *k = c->k;
    const kir_attention *a = &k->attn;
    int nb = k->rank - 2;
    if (k->rank < 2 || k->shape[nb] != a->tq || k->shape[nb + 1] != a->dv || a->tk < 1 || a->d < 1 ||
        a->nsteps < 0 || a->nsteps > KIR_MAX_STEPS)
        return broken(c, ": attention shape or steps do not match (tq %lld, dv %lld, %d steps)",
                      (long long)a->tq, (long long)a->dv, a->nsteps);
    int64_t shape[MC_MAX_RANK];
    memcpy(shape, k->shape, sizeof shape);
    const int views[3] = {a->q, a->k, a->v};
    const int64_t rows[3] = {a->tq, a->tk, a->tk}, cols[3] = {a->d, a->d, a->dv};
    for (int o = 0; o < 3 + a->nsteps; o++) {
        int v = o < 3 ? views[o] : a->steps[o - 3].view;
        if (o >= 3) {
            kir_step_kind kind = a->steps[o - 3].kind;
            bool wants_view = kind == KIR_STEP_WHERE || kind == KIR_STEP_ADD;
            if (!wants_view) {
                if (v != -1)
                    return broken(c, ": attention step %d has a view it does not read", o - 3);
                continue;
            }
        }
        if (v < 0 || v >= k->nviews)
            return broken(c, ": attention operand %d names view %d", o, v);
        mc_dtype dt = c->kp->buffers[k->views[v].buffer].dtype;
        if (o >= 3 && (a->steps[o - 3].kind == KIR_STEP_WHERE) != (dt == MC_BOOL))
            return broken(c, ": attention step %d reads a mask of dtype %s", o - 3, mc_dtype_name(dt));
        if (o < 3 || a->steps[o - 3].kind == KIR_STEP_ADD) {
            if (!mc_dtype_is_float(dt))
                return broken(c, ": attention operand %d is of dtype %s", o, mc_dtype_name(dt));
        }
        shape[nb] = o < 3 ? rows[o] : a->tq;
        shape[nb + 1] = o < 3 ? cols[o] : a->tk;
        mc_status st = check_view_range(c, v, shape, k->rank);
        if (st != MC_OK)
            return st;
    }
    if (a->skip && (a->skip_lo <= -KIR_BAND_OPEN || a->skip_hi >= KIR_BAND_OPEN))
        return broken(c, ": attention skips with an open bound");
    return MC_OK;
}

/* A collective kernel (kir.h): two views of one float dtype, each `count` contiguous elements
 * over the 1-D index space [count], disjoint or the very same elements. */
static mc_status check_collective(const checker *c)
{
    const kir_kernel *k = c->k;
    const kir_collective *co = &k->coll;
    if (co->in < 0 || co->in >= k->nviews || co->out < 0 || co->out >= k->nviews || co->in == co->out)
        return broken(c, ": collective views %d and %d", co->in, co->out);
    if (k->rank != 1 || k->nrow != 1 || k->shape[0] != co->count)
        return broken(c, ": collective space is not [%lld]", (long long)co->count);
    const kir_view *in = &k->views[co->in], *out = &k->views[co->out];
    if (in->stride[0] != 1 || out->stride[0] != 1)
        return broken(c, ": collective views are not contiguous");
    const kir_buffer *bi = &c->kp->buffers[in->buffer], *bo = &c->kp->buffers[out->buffer];
    if (bi->dtype != bo->dtype || !mc_dtype_is_float(bi->dtype))
        return broken(c, ": collective over %s and %s", mc_dtype_name(bi->dtype), mc_dtype_name(bo->dtype));
    if (bo->kind == KBUF_INPUT || bo->kind == KBUF_PARAM)
        return broken(c, ": collective writes an input or param");
    bool same_buffer = in->buffer == out->buffer ||
                       (bi->kind == KBUF_TEMP && bo->kind == KBUF_TEMP && c->planned);
    if (same_buffer) { /* the same elements, or none in common (offsets in bytes) */
        int64_t size = (int64_t)mc_dtype_size(bi->dtype);
        int64_t a = in->offset * size + (in->buffer == out->buffer ? 0 : bi->offset);
        int64_t b = out->offset * size + (in->buffer == out->buffer ? 0 : bo->offset);
        int64_t len = co->count * size;
        if (a != b && a < b + len && b < a + len)
            return broken(c, ": collective input and output partly overlap");
    }
    return MC_OK;
}

static mc_status check_kernel(const checker *c, int *block_of)
{
    const kir_kernel *k = c->k;
    const kir_program *kp = c->kp;
    if (k->rank < 0 || k->rank > MC_MAX_RANK || k->nrow < 0 || k->nrow > k->rank)
        return broken(c, ": rank %lld with %lld row dims", (long long)(k->rank), (long long)(k->nrow));
    for (int d = 0; d < k->rank; d++)
        if (k->shape[d] < 1)
            return broken(c, ": dimension %lld has size %lld", (long long)(d), (long long)(k->shape[d]));
    for (int v = 0; v < k->nviews; v++)
        if (k->views[v].buffer < 0 || k->views[v].buffer >= kp->nbuffers)
            return broken(c, ": view %lld names buffer %lld", (long long)(v), (long long)(k->views[v].buffer));
    int next = 0; /* blocks tile [0, ncode) in order */
    for (int b = 0; b < k->nblocks; b++) {
        if (k->blocks[b].first != next || k->blocks[b].count < 0)
            return broken(c, ": block %lld starts at %lld", (long long)(b), (long long)(k->blocks[b].first));
        for (int i = 0; i < k->blocks[b].count; i++)
            block_of[next + i] = b;
        next += k->blocks[b].count;
    }
    if (next != k->ncode)
        return broken(c, ": blocks cover %lld of %lld instructions", (long long)(next), (long long)(k->ncode));
    bool gemm = k->category == KIR_GEMM, attention = k->category == KIR_ATTENTION;
    if (attention) {
        mc_status st = check_attention(c);
        if (st != MC_OK)
            return st;
    }
    if (k->category == KIR_COLLECTIVE) {
        mc_status st = check_collective(c);
        if (st != MC_OK)
            return st;
    }
    for (int i = 0; i < k->ncode; i++) {
        const kir_instr *in = &k->code[i];
        int b = block_of[i];
        switch (in->kind) {
        case KI_LOAD:
            if (in->view < 0 || in->view >= k->nviews)
                return broken(c, ": instruction %lld loads view %lld", (long long)(i), (long long)(in->view));
            break;
        case KI_INDEX:
            if (in->view < 0 || in->view >= k->rank)
                return broken(c, ": instruction %lld indexes dimension %lld", (long long)(i), (long long)(in->view));
            break;
        case KI_ROWVAL:
            if (in->view < 0 || in->view >= k->nreds ||
                (k->reds[in->view].block >= b && !(k->reds[in->view].scan && k->reds[in->view].block == b)))
                return broken(c, ": instruction %lld reads reduction %lld before it is done", (long long)(i), (long long)(in->view));
            break;
        case KI_ACC:
            if (!gemm && !attention)
                return broken(c, ": instruction %lld reads an accumulator outside a GEMM or attention", (long long)(i));
            break;
        case KI_CONST: break;
        case KI_SIZE:
            return broken(c, ": instruction %lld is a size in a program bound to its sizes", (long long)(i));
        case KI_GATHER: {
            if (in->view < 0 || in->view >= k->nviews || in->stride < 0 || in->size < 1 || in->check < 0 ||
                in->check >= kp->nchecks || !readable(k, block_of, in->arg[0], i, b) || in->dtype != kp->buffers[k->views[in->view].buffer].dtype ||
                k->code[in->arg[0]].dtype != MC_I32)
                return broken(c, ": instruction %lld is a malformed gather", (long long)(i));
            /* the last index stays inside the buffer where index 0 does (check_view_range) */
            const kir_view *vw = &k->views[in->view];
            int64_t hi = vw->offset + (in->size - 1) * in->stride;
            for (int d = 0; d < k->rank; d++)
                hi += vw->stride[d] > 0 ? vw->stride[d] * (k->shape[d] - 1) : 0;
            if (hi >= kp->buffers[vw->buffer].numel)
                return broken(c, ": gather %lld reaches element %lld of a buffer of %lld", (long long)(i), (long long)hi,
                               (long long)kp->buffers[vw->buffer].numel);
            break;
        }
        case KI_OP: {
            int nin = mc_op_table[in->op].max_in;
            if (in->op != MC_OP_CAST && !mc_op_table[in->op].expr)
                return broken(c, ": instruction %lld is operator %lld, which has no expression", (long long)(i), (long long)(in->op));
            for (int a = 0; a < nin && a < 3; a++)
                if (!readable(k, block_of, in->arg[a], i, b))
                    return broken(c, ": instruction %lld reads instruction %lld out of its reach", (long long)(i), (long long)(in->arg[a]));
            break;
        }
        }
    }
    for (int r = 0; r < k->nreds; r++) {
        const kir_reduce *red = &k->reds[r];
        if (red->block < 0 || red->block >= k->nblocks || !k->blocks[red->block].loop ||
            !readable(k, block_of, red->value, k->ncode, red->block))
            return broken(c, ": reduction %lld does not reduce a value its loop block can read", (long long)(r));
    }
    if (kir_kernel_scans(k)) { /* a scan walks its one reduced dimension in order (kir/kir.h) */
        int loops = 0;
        for (int b = 0; b < k->nblocks; b++)
            loops += k->blocks[b].loop;
        if (k->category != KIR_REDUCTION || k->nreds != 1 || loops != 1 || k->rank - k->nrow != 1 ||
            k->reds[0].op != MC_OP_SUM)
            return broken(c, ": a scan must be a kernel's only reduction (a sum), over one reduced dimension in one loop block");
    }
    for (int s = 0; s < k->nstores; s++) {
        const kir_store *st = &k->stores[s];
        if (st->block < 0 || st->block >= k->nblocks || st->view < 0 || st->view >= k->nviews ||
            !readable(k, block_of, st->value, k->ncode, st->block))
            return broken(c, ": store %lld is out of reach of its block (value %lld)", (long long)(s), (long long)(st->value));
        const kir_buffer *buf = &kp->buffers[k->views[st->view].buffer];
        if (buf->kind == KBUF_INPUT || buf->kind == KBUF_PARAM)
            return broken(c, ": store %lld writes an input or param (buffer %lld)", (long long)(s), (long long)(k->views[st->view].buffer));
        if (k->prep && buf->kind != KBUF_TEMP) /* a run's output must be made by the run */
            return broken(c, ": prep kernel's store %lld writes an output (buffer %lld)", (long long)(s),
                          (long long)(k->views[st->view].buffer));
    }
    if (k->prep && (k->category == KIR_COLLECTIVE || k->nstores == 0))
        return broken(c, ": a prep kernel that is a collective or stores nothing");
    /* every view inside its buffer: epilogue and pointwise views over the index space (a view
     * read only in row blocks moves along the row dims only, so those are the ones counted
     * when the kernel reduces); GEMM operands over [batch.., rows, cols] */
    int nb = k->rank - 2;
    for (int v = 0; v < k->nviews; v++) {
        mc_status st;
        if (attention && attention_operand(k, v)) {
            continue; /* check_attention did */
        } else if (gemm && (v == k->gemm.a || v == k->gemm.b)) {
            int64_t shape[MC_MAX_RANK];
            memcpy(shape, k->shape, sizeof shape);
            shape[nb] = k->gemm.m;
            shape[nb + 1] = k->gemm.k;
            int rank = v == k->gemm.a ? k->rank : kir_gemm_b_shape(k, shape);
            st = check_view_range(c, v, shape, rank);
        } else {
            bool in_loop = false;
            for (int i = 0; i < k->ncode; i++)
                if ((k->code[i].kind == KI_LOAD || k->code[i].kind == KI_GATHER) && k->code[i].view == v &&
                    k->blocks[block_of[i]].loop)
                    in_loop = true;
            for (int s = 0; s < k->nstores; s++)
                if (k->stores[s].view == v && k->blocks[k->stores[s].block].loop)
                    in_loop = true;
            st = check_view_range(c, v, k->shape, in_loop || gemm ? k->rank : k->nrow);
        }
        if (st != MC_OK)
            return st;
    }
    if (gemm && (k->gemm.a < 0 || k->gemm.a >= k->nviews || k->gemm.b < 0 || k->gemm.b >= k->nviews ||
                 k->rank < 2 || k->shape[nb] != k->gemm.m || k->shape[nb + 1] != k->gemm.n))
        return broken(c, ": GEMM operands or shape do not match (m %lld, n %lld)", (long long)(k->gemm.m), (long long)(k->gemm.n));
    const kir_conv *cv = &k->gemm.conv;
    if (gemm && cv->on &&
        (nb + 3 > MC_MAX_RANK || k->gemm.k != cv->c * cv->kh * cv->kw || cv->kc < 0 || (cv->kc > 0 && cv->c % cv->kc != 0) || k->gemm.n != cv->oh * cv->ow ||
         cv->sh < 1 || cv->sw < 1 || cv->dh < 1 || cv->dw < 1 || cv->ph < 0 || cv->pw < 0 ||
         cv->oh != (cv->h + 2 * cv->ph - cv->dh * (cv->kh - 1) - 1) / cv->sh + 1 ||
         cv->ow != (cv->w + 2 * cv->pw - cv->dw * (cv->kw - 1) - 1) / cv->sw + 1))
        return broken(c, ": its im2col operand does not match (k %lld, n %lld)", (long long)k->gemm.k,
                      (long long)k->gemm.n);
    return MC_OK;
}

mc_status kir_verify(const kir_program *kp, const char *stage, bool planned)
{
    checker c = {.stage = stage, .kp = kp, .planned = planned};
    if (kp->dims) /* sizes are expressions: checked for each binding, once bound (kir_bind) */
        return MC_OK;
    for (int b = 0; b < kp->nbuffers; b++) {
        const kir_buffer *buf = &kp->buffers[b];
        if ((int)buf->dtype < 0 || buf->dtype >= MC_NUM_DTYPES || buf->numel < 1)
            return broken(&c, ": buffer %lld has dtype %lld or no elements", (long long)(b), (long long)(buf->dtype));
        int64_t bytes = buf->numel * (int64_t)mc_dtype_size(buf->dtype);
        if (planned && buf->kind == KBUF_TEMP &&
            (buf->offset < 0 || buf->offset > kp->arena_bytes - bytes))
            return broken(&c, ": temp buffer %lld at offset %lld lies outside the arena", (long long)(b), (long long)(buf->offset));
    }
    int most = 1;
    for (int k = 0; k < kp->nkernels; k++)
        if (kp->kernels[k].ncode > most)
            most = kp->kernels[k].ncode;
    int *block_of = calloc((size_t)most, sizeof *block_of);
    if (!block_of)
        return mc_fail(MC_ERR_SYSTEM, "out of memory verifying the kernel IR");
    mc_status st = MC_OK;
    for (int k = 0; k < kp->nkernels && st == MC_OK; k++) {
        c.k = &kp->kernels[k];
        st = check_kernel(&c, block_of);
    }
    free(block_of);
    return st;
}
