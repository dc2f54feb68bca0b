/* kir_bind: a kernel program whose sizes are expressions of its symbols (kir/kir.h, "Sizes known
 * when the program runs"), evaluated for one binding into a plain program.
 *
 * The copy is what the memory plan, the verifier, the counter and a backend that takes its
 * sizes as constants read, so that everything downstream of lowering works unchanged on one
 * compiled kernel list: binding is arithmetic over the table, never a pass or a compile. Every
 * array is copied into the new program's arena (the source may be freed first); strings too.
 */
#include "kir/kir.h"

#include <stdlib.h>
#include <string.h>

typedef struct binder {
    const kir_program *src;
    kir_program *dst;
    const int64_t *values;
    bool overflow; /* a size past int64 for this binding */
    bool oom;
} binder;

/* Dim d's value (0 and every constant as it is). */
static int64_t size_of(binder *b, int64_t d)
{
    int64_t v = 0;
    if (!mc_dims_eval(b->src->dims, d, b->values, &v))
        b->overflow = true;
    return v;
}

static void *copy(binder *b, const void *from, size_t elem, int n)
{
    size_t bytes = elem * (size_t)(n > 0 ? n : 1);
    void *to = mc_arena_alloc(&b->dst->arena, bytes);
    if (!to) {
        b->oom = true;
        return NULL;
    }
    if (n > 0 && from)
        memcpy(to, from, elem * (size_t)n);
    return to;
}

static void bind_view(binder *b, kir_view *v)
{
    v->offset = size_of(b, v->offset);
    for (int d = 0; d < MC_MAX_RANK; d++)
        v->stride[d] = size_of(b, v->stride[d]);
}

static void bind_code(binder *b, kir_instr *in)
{
    if (in->kind == KI_SIZE) {
        int64_t n = size_of(b, in->size);
        double v = in->times ? in->value * (double)n : in->value / (double)(n ? n : 1);
        *in = (kir_instr){.kind = KI_CONST, .dtype = in->dtype, .value = v};
    } else if (in->kind == KI_GATHER) {
        in->stride = size_of(b, in->stride);
        in->size = size_of(b, in->size);
    }
}

static void bind_kernel(binder *b, kir_kernel *k)
{
    for (int d = 0; d < k->rank; d++)
        k->shape[d] = size_of(b, k->shape[d]);
    k->views = copy(b, k->views, sizeof *k->views, k->nviews);
    k->code = copy(b, k->code, sizeof *k->code, k->ncode);
    k->blocks = copy(b, k->blocks, sizeof *k->blocks, k->nblocks);
    k->reds = copy(b, k->reds, sizeof *k->reds, k->nreds);
    k->stores = copy(b, k->stores, sizeof *k->stores, k->nstores);
    k->ops = copy(b, k->ops, sizeof *k->ops, k->nops);
    k->lines = copy(b, k->lines, sizeof *k->lines, k->nlines);
    if (b->oom)
        return;
    for (int v = 0; v < k->nviews; v++)
        bind_view(b, &k->views[v]);
    for (int i = 0; i < k->ncode; i++)
        bind_code(b, &k->code[i]);
    k->gemm.m = size_of(b, k->gemm.m);
    k->gemm.n = size_of(b, k->gemm.n);
    k->gemm.k = size_of(b, k->gemm.k);
    k->attn.tq = size_of(b, k->attn.tq);
    k->attn.tk = size_of(b, k->attn.tk);
    k->attn.d = size_of(b, k->attn.d);
    k->attn.dv = size_of(b, k->attn.dv);
    k->coll.count = size_of(b, k->coll.count);
    k->flops = k->bytes = 0; /* kir_count, for this binding */
}

kir_program *kir_bind(const kir_program *kp, const int64_t *values)
{
    kir_program *out = calloc(1, sizeof *out);
    if (!out) {
        mc_fail(MC_ERR_SYSTEM, "out of memory binding the kernels' sizes");
        return NULL;
    }
    binder b = {.src = kp, .dst = out, .values = values};
    *out = *kp;
    memset(&out->arena, 0, sizeof out->arena);
    out->dims = NULL;
    out->arena_bytes = out->unplanned_bytes = 0;
    out->buffers = copy(&b, kp->buffers, sizeof *kp->buffers, kp->nbuffers);
    out->kernels = copy(&b, kp->kernels, sizeof *kp->kernels, kp->nkernels);
    out->graph_buffer = copy(&b, kp->graph_buffer, sizeof *kp->graph_buffer, kp->ngraph);
    out->checks = copy(&b, kp->checks, sizeof *kp->checks, kp->nchecks);
    out->notes = copy(&b, NULL, sizeof *out->notes, kp->nnotes);
    for (int i = 0; !b.oom && i < kp->nnotes; i++)
        b.oom = !(out->notes[i] = mc_arena_strdup(&out->arena, kp->notes[i]));
    for (int i = 0; !b.oom && i < kp->nbuffers; i++) {
        out->buffers[i].numel = size_of(&b, kp->buffers[i].numel);
        out->buffers[i].offset = 0; /* the plan places temps per binding */
    }
    for (int i = 0; !b.oom && i < kp->nchecks; i++) {
        out->checks[i].size = size_of(&b, kp->checks[i].size);
        out->checks[i].extent = size_of(&b, kp->checks[i].extent);
    }
    for (int k = 0; !b.oom && k < kp->nkernels; k++)
        bind_kernel(&b, &out->kernels[k]);
    if (b.oom || b.overflow) {
        kir_program_free(out);
        if (b.oom)
            mc_fail(MC_ERR_SYSTEM, "out of memory binding the kernels' sizes");
        else
            mc_fail(MC_ERR_INPUT, "the bound sizes make a buffer or an index larger than 2^63 elements");
        return NULL;
    }
    return out;
}
