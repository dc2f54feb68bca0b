/* The reference backend: a plain interpreter of the kernel IR, the oracle every other backend
 * and every fusion decision is checked against.
 *
 * It runs each kernel exactly as kir/kir.h defines it: for every row, the blocks in order;
 * a row block once, a loop block once per element of the reduced dims, accumulating its
 * reductions; a GEMM's accumulator summed over K at every point of its epilogue. Values are
 * doubles; every arithmetic result is rounded to what a kernel computes in (f32 for float
 * dtypes, i32, bool), an f16 or bf16 one also kept within its type's range
 * (mc_saturate_to_dtype), and every store to the buffer's dtype, so the only difference from
 * the generated code is the order of floating-point sums. Inputs, params and outputs are the
 * program's host arrays; intermediates live in one arena laid out by the memory plan, so a
 * planning bug shows up here as wrong numbers. Every access is bounds-checked. A gather's
 * index outside its range fails the run when its kernel is done (the index read is 0). An attention
 * kernel is computed in float64 the straightforward way, a whole row of scores at a time:
 * scores, their steps, softmax (max, exp, sum: a row whose scores are all -inf gives NaN, as the
 * unfused graph does), then each output element's sum over the keys; nothing is skipped. A
 * collective kernel of a rank of a tensor-parallel program sums over the ranks through the
 * host communicator (backends/comm.h); with one rank or none it is the copy its code says.
 */
#include "backends/backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    unsigned char *arena;
    bool own_arena; /* false: the symbolic program's (p->arena), not freed here */
    void **data;    /* per buffer */
} ref_state;

static mc_status ref_prepare(mc_program *p)
{
    const kir_program *kp = p->kp;
    ref_state *s = calloc(1, sizeof *s);
    if (!s)
        return mc_fail(MC_ERR_SYSTEM, "out of memory preparing the reference backend");
    p->state = s;
    s->data = calloc((size_t)(kp->nbuffers > 0 ? kp->nbuffers : 1), sizeof *s->data);
    if ((uint64_t)kp->arena_bytes > SIZE_MAX / 2 || !s->data)
        return mc_fail(MC_ERR_SYSTEM, "out of memory preparing the reference backend");
    mc_shared_arena *shared = p->arena; /* a binding planned at its symbolic program's maxima */
    MC_ASSERT(!shared || shared->bytes == kp->arena_bytes);
    if (shared && !mc_shared_arena_host(shared))
        return MC_ERR_SYSTEM;
    s->own_arena = !shared;
    s->arena = shared ? (unsigned char *)(uintptr_t)shared->addr : calloc((size_t)kp->arena_bytes + 1, 1);
    if (!s->arena)
        return mc_fail(MC_ERR_SYSTEM, "out of memory: the intermediates need %lld bytes",
                       (long long)kp->arena_bytes);
    for (int b = 0; b < kp->nbuffers; b++)
        s->data[b] = kp->buffers[b].kind == KBUF_TEMP ? (void *)(s->arena + kp->buffers[b].offset)
                                                       : p->host[b];
    return MC_OK;
}

static void ref_release(mc_program *p)
{
    ref_state *s = p->state;
    if (!s)
        return;
    if (s->own_arena)
        free(s->arena);
    free(s->data);
    free(s);
    p->state = NULL;
}

typedef struct {
    const kir_program *kp;
    const kir_kernel *k;
    void **data;
    int64_t idx[MC_MAX_RANK];
    double *val, *rowval, *acc;
    double attn_acc;  /* attention: the output at the current point */
    int failed_check; /* the first gather check that failed, or -1 */
    int64_t failed_index;
} kctx;

static int64_t element(const kctx *c, const kir_view *v, int ndims)
{
    int64_t off = v->offset;
    for (int d = 0; d < ndims; d++)
        off += c->idx[d] * v->stride[d];
    MC_ASSERT(off >= 0 && off < c->kp->buffers[v->buffer].numel);
    return off;
}

static double load(const kctx *c, int view)
{
    const kir_view *v = &c->k->views[view];
    return mc_load_element(c->data[v->buffer], c->kp->buffers[v->buffer].dtype, element(c, v, c->k->rank));
}

/* A gather (kir.h): an index outside [-n, n) records the check and reads index 0. */
static double gather(kctx *c, const kir_instr *in)
{
    int64_t i = (int64_t)c->val[in->arg[0]], w = i < 0 ? i + in->size : i;
    if (w < 0 || w >= in->size) {
        if (c->failed_check < 0) {
            c->failed_check = in->check;
            c->failed_index = i;
        }
        w = 0;
    }
    const kir_view *v = &c->k->views[in->view];
    int64_t off = element(c, v, c->k->rank) + w * in->stride;
    MC_ASSERT(off >= 0 && off < c->kp->buffers[v->buffer].numel);
    return mc_load_element(c->data[v->buffer], c->kp->buffers[v->buffer].dtype, off);
}

static double gemm_acc(const kctx *c)
{
    const kir_kernel *k = c->k;
    int nb = k->rank - 2;
    const kir_view *a = &k->views[k->gemm.a], *b = &k->views[k->gemm.b];
    mc_dtype da = c->kp->buffers[a->buffer].dtype, db = c->kp->buffers[b->buffer].dtype;
    int64_t ao = a->offset, bo = b->offset;
    for (int d = 0; d < nb; d++) {
        ao += c->idx[d] * a->stride[d];
        bo += c->idx[d] * b->stride[d];
    }
    ao += c->idx[nb] * a->stride[nb];
    double s = 0;
    if (k->gemm.conv.on) { /* B is the im2col of x (kir/kir.h): 0 in the padding */
        const kir_conv *cv = &k->gemm.conv;
        int64_t o = c->idx[nb + 1], oy = o / cv->ow, ox = o % cv->ow;
        for (int64_t kk = 0; kk < k->gemm.k; kk++) {
            int64_t ch = kk / (cv->kh * cv->kw), ky = kk / cv->kw % cv->kh, kx = kk % cv->kw;
            if (cv->kc > 0) { /* (c / kc, ky, kx, c % kc) */
                int64_t q = kk / cv->kc, r = q % (cv->kh * cv->kw);
                ch = q / (cv->kh * cv->kw) * cv->kc + kk % cv->kc;
                ky = r / cv->kw;
                kx = r % cv->kw;
            }
            int64_t iy = oy * cv->sh - cv->ph + ky * cv->dh, ix = ox * cv->sw - cv->pw + kx * cv->dw;
            if (iy < 0 || iy >= cv->h || ix < 0 || ix >= cv->w)
                continue;
            int64_t ai = ao + kk * a->stride[nb + 1];
            int64_t bi = bo + ch * b->stride[nb] + iy * b->stride[nb + 1] + ix * b->stride[nb + 2];
            MC_ASSERT(ai >= 0 && ai < c->kp->buffers[a->buffer].numel);
            MC_ASSERT(bi >= 0 && bi < c->kp->buffers[b->buffer].numel);
            s += mc_load_element(c->data[a->buffer], da, ai) * mc_load_element(c->data[b->buffer], db, bi);
        }
        return s;
    }
    bo += c->idx[nb + 1] * b->stride[nb + 1];
    for (int64_t kk = 0; kk < k->gemm.k; kk++) {
        int64_t ai = ao + kk * a->stride[nb + 1], bi = bo + kk * b->stride[nb];
        MC_ASSERT(ai >= 0 && ai < c->kp->buffers[a->buffer].numel);
        MC_ASSERT(bi >= 0 && bi < c->kp->buffers[b->buffer].numel);
        s += mc_load_element(c->data[a->buffer], da, ai) * mc_load_element(c->data[b->buffer], db, bi);
    }
    return s;
}

static void run_block(kctx *c, const kir_block *bl)
{
    const kir_kernel *k = c->k;
    for (int i = bl->first; i < bl->first + bl->count; i++) {
        const kir_instr *in = &k->code[i];
        double r = 0;
        switch (in->kind) {
        case KI_LOAD: r = load(c, in->view); break;
        case KI_GATHER: r = gather(c, in); break;
        case KI_CONST: r = mc_round_to_dtype(in->value, in->dtype); break;
        case KI_SIZE: MC_UNREACHABLE("a size in a program bound to its sizes (kir_bind)");
        case KI_INDEX: r = (double)c->idx[in->view]; break;
        case KI_ROWVAL: {
            double v = c->rowval[in->view];
            if (k->reds[in->view].scan && k->reds[in->view].dtype == MC_F32)
                v = mc_round_to_dtype(v, MC_F32); /* a scan's f64 accumulator, read as f32 */
            r = mc_saturate_to_dtype(v, in->dtype);
            break;
        }
        case KI_ACC: r = mc_saturate_to_dtype(k->category == KIR_ATTENTION ? c->attn_acc : gemm_acc(c), in->dtype); break;
        case KI_OP: {
            int first = in->op == MC_OP_WHERE ? 1 : 0;
            mc_dtype operand = k->code[in->arg[first]].dtype;
            r = mc_op_apply(in->op, operand, in->dtype, c->val[in->arg[0]], c->val[in->arg[1]],
                            c->val[in->arg[2]]);
            if (in->op != MC_OP_CAST)
                r = mc_saturate_to_dtype(mc_round_to_dtype(r, mc_dtype_is_float(in->dtype) ? MC_F32 : in->dtype),
                                         in->dtype);
            break;
        }
        }
        c->val[i] = r;
    }
}

static void run_stores(kctx *c, int block, int ndims)
{
    const kir_kernel *k = c->k;
    for (int s = 0; s < k->nstores; s++) {
        const kir_store *st = &k->stores[s];
        if (st->block != block)
            continue;
        const kir_view *v = &k->views[st->view];
        mc_store_element(c->data[v->buffer], c->kp->buffers[v->buffer].dtype, element(c, v, ndims),
                         c->val[st->value]);
    }
}

static void unravel(int64_t i, const int64_t *shape, int from, int to, int64_t *idx)
{
    for (int d = to - 1; d >= from; d--) {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
}

/* Element (batch.., r, col) of attention operand view `view` (a view over [batch.., rows, cols]). */
static double attn_load(const kctx *c, int view, int64_t r, int64_t col)
{
    const kir_view *v = &c->k->views[view];
    int nb = c->k->rank - 2;
    int64_t off = v->offset + r * v->stride[nb] + col * v->stride[nb + 1];
    for (int d = 0; d < nb; d++)
        off += c->idx[d] * v->stride[d];
    MC_ASSERT(off >= 0 && off < c->kp->buffers[v->buffer].numel);
    return mc_load_element(c->data[v->buffer], c->kp->buffers[v->buffer].dtype, off);
}

/* The probabilities of query i (c->idx holds the batch indices) into p[0..tk). */
static void attn_probabilities(const kctx *c, int64_t i, double *p)
{
    const kir_attention *a = &c->k->attn;
    double m = -INFINITY;
    for (int64_t j = 0; j < a->tk; j++) {
        double s = 0;
        for (int64_t d = 0; d < a->d; d++)
            s += attn_load(c, a->q, i, d) * attn_load(c, a->k, j, d);
        for (int t = 0; t < a->nsteps; t++) {
            const kir_attn_step *st = &a->steps[t];
            switch (st->kind) {
            case KIR_STEP_MUL: s *= st->value; break;
            case KIR_STEP_DIV: s /= st->value; break;
            case KIR_STEP_BAND: s = (j - i >= st->lo && j - i <= st->hi) ? s : st->value; break;
            case KIR_STEP_WHERE: s = (attn_load(c, st->view, i, j) != 0) == st->keep ? s : st->value; break;
            case KIR_STEP_ADD: s += attn_load(c, st->view, i, j); break;
            }
        }
        p[j] = s;
        m = mc_reduce_step(MC_OP_MAX, MC_F32, m, s);
    }
    double sum = 0;
    for (int64_t j = 0; j < a->tk; j++)
        sum += p[j] = exp(p[j] - m);
    for (int64_t j = 0; j < a->tk; j++)
        p[j] /= sum;
}

static mc_status run_attention(kctx *c)
{
    const kir_kernel *k = c->k;
    const kir_attention *a = &k->attn;
    int nb = k->rank - 2;
    double *p = malloc(sizeof *p * (size_t)a->tk);
    if (!p)
        return mc_fail(MC_ERR_SYSTEM, "out of memory running kernel %s", k->name);
    int64_t rows = 1;
    for (int d = 0; d <= nb; d++)
        rows *= k->shape[d];
    for (int64_t r = 0; r < rows; r++) {
        unravel(r, k->shape, 0, nb + 1, c->idx);
        attn_probabilities(c, c->idx[nb], p);
        for (int64_t col = 0; col < a->dv; col++) {
            c->idx[nb + 1] = col;
            double acc = 0;
            for (int64_t j = 0; j < a->tk; j++)
                acc += p[j] * attn_load(c, a->v, j, col);
            c->attn_acc = acc;
            for (int b = 0; b < k->nblocks; b++) {
                run_block(c, &k->blocks[b]);
                run_stores(c, b, k->rank);
            }
        }
    }
    free(p);
    return MC_OK;
}

static mc_status run_kernel(const kir_program *kp, const kir_kernel *k, void **data, const mc_graph *g)
{
    kctx c = {.kp = kp, .k = k, .data = data, .failed_check = -1};
    c.val = calloc((size_t)(k->ncode > 0 ? k->ncode : 1), sizeof *c.val);
    c.rowval = calloc((size_t)(k->nreds > 0 ? k->nreds : 1), sizeof *c.rowval);
    if (!c.val || !c.rowval) {
        free(c.val);
        free(c.rowval);
        return mc_fail(MC_ERR_SYSTEM, "out of memory running kernel %s", k->name);
    }
    if (k->category == KIR_ATTENTION) {
        mc_status st = run_attention(&c);
        free(c.val);
        free(c.rowval);
        return st;
    }
    int64_t rows = 1, inner = 1;
    for (int d = 0; d < k->rank; d++) {
        if (d < k->nrow)
            rows *= k->shape[d];
        else
            inner *= k->shape[d];
    }
    for (int64_t r = 0; r < rows; r++) {
        unravel(r, k->shape, 0, k->nrow, c.idx);
        for (int b = 0; b < k->nblocks; b++) {
            const kir_block *bl = &k->blocks[b];
            if (!bl->loop) {
                for (int d = k->nrow; d < k->rank; d++)
                    c.idx[d] = 0;
                run_block(&c, bl);
                run_stores(&c, b, k->nrow);
                continue;
            }
            for (int q = 0; q < k->nreds; q++)
                if (k->reds[q].block == b)
                    c.rowval[q] = mc_reduce_identity(k->reds[q].op);
            for (int64_t j = 0; j < inner; j++) {
                unravel(j, k->shape, k->nrow, k->rank, c.idx);
                run_block(&c, bl);
                for (int q = 0; q < k->nreds; q++) {
                    const kir_reduce *rd = &k->reds[q];
                    if (rd->block != b)
                        continue;
                    if (rd->scan && rd->dtype == MC_F32) /* a float scan accumulates in double (kir/kir.h) */
                        c.rowval[q] += c.val[rd->value];
                    else
                        c.rowval[q] = mc_reduce_step(rd->op, rd->dtype, c.rowval[q], c.val[rd->value]);
                }
                run_stores(&c, b, k->rank);
            }
        }
    }
    free(c.val);
    free(c.rowval);
    return c.failed_check >= 0 ? kir_check_fail(kp, g, c.failed_check, c.failed_index) : MC_OK;
}

/* A collective kernel of a rank (nranks > 1): the host communicator sums the ranks' values.
 * Otherwise it is the copy its code says. */
static mc_status run_collective(mc_program *p, const kir_kernel *k, void **data)
{
    if (p->nranks <= 1 || !p->comm)
        return run_kernel(p->kp, k, data, p->graph);
    const kir_view *in = &k->views[k->coll.in], *out = &k->views[k->coll.out];
    mc_dtype d = p->kp->buffers[in->buffer].dtype;
    size_t size = mc_dtype_size(d);
    return mc_comm_allreduce(p->comm, p->rank, (const char *)data[in->buffer] + in->offset * (int64_t)size,
                             (char *)data[out->buffer] + out->offset * (int64_t)size, k->coll.count, d);
}

/* The host arrays may have moved since prepare (params another program shares,
 * mc_program_share_params, and a copy of one's own again after a bind): take them as they are. */
static void bind_host(mc_program *p, ref_state *s)
{
    for (int b = 0; b < p->kp->nbuffers; b++)
        if (p->kp->buffers[b].kind != KBUF_TEMP)
            s->data[b] = p->host[b];
}

/* The kernels of a run (prep false), or the prep kernels (kir/kir.h, "Prep kernels"). */
static mc_status run_kernels(mc_program *p, bool prep)
{
    ref_state *s = p->state;
    bind_host(p, s);
    for (int k = 0; k < p->kp->nkernels; k++) {
        if (p->kp->kernels[k].prep != prep)
            continue;
        if (p->kernel_clock && !prep)
            p->kernel_clock[2 * k] = mc_now_ms();
        const kir_kernel *kern = &p->kp->kernels[k];
        mc_status st = kern->category == KIR_COLLECTIVE ? run_collective(p, kern, s->data)
                                                        : run_kernel(p->kp, kern, s->data, p->graph);
        if (p->kernel_clock && !prep)
            p->kernel_clock[2 * k + 1] = mc_now_ms();
        if (st != MC_OK)
            return st;
    }
    return MC_OK;
}

static mc_status ref_prep(mc_program *p) { return run_kernels(p, true); }

static mc_status ref_run(mc_program *p)
{
    mc_status st = run_kernels(p, false);
    if (st != MC_OK)
        return st;
    for (int b = 0; b < p->kp->nbuffers; b++)
        if (p->dirty)
            p->dirty[b] = false;
    return MC_OK;
}

/* One kernel alone, for the profiler's per-kernel host timing (added by the cli work). */
static mc_status ref_run_kernel(mc_program *p, int kernel)
{
    ref_state *s = p->state;
    if (p->kp->kernels[kernel].category == KIR_COLLECTIVE && p->nranks > 1)
        return mc_fail(MC_ERR_INPUT, "kernel %s is a collective: it runs only with every rank",
                       p->kp->kernels[kernel].name);
    bind_host(p, s);
    return run_kernel(p->kp, &p->kp->kernels[kernel], s->data, p->graph);
}

const mc_backend mc_backend_ref = {
    .name = "ref",
    .runs_on_host = true,
    .attention = true,
    .runtime_sizes = true, /* an interpreter: a bound kernel list is all it needs */
    .probe = NULL,      /* always available */
    .prepare = ref_prepare,
    .no_peaks = true,
    .run = ref_run,
    .prep = ref_prep,
    .profile = NULL,    /* no per-kernel timing: it is an oracle, not a target */
    .dump_code = NULL,  /* nothing is generated */
    .release = ref_release,
    .run_kernel = ref_run_kernel,
};
