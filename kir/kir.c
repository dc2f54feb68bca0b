/* The kernel IR's own functions: freeing a program, printing it, counting its FLOPs and bytes.
 *
 * Everything here reads only kir.h's structures, so the printer, the counter and the reference
 * backend agree on one reading of the IR; the scalar meaning of an instruction is
 * mc_op_apply's (ir/semantics.c), the same as the graph evaluator's. The counter follows docs/FORMAT.md §5 and docs/PROFILING.md:
 * a GEMM's 2*M*N*K once, every KI_OP its op's flops at every point where it is evaluated (a row
 * block once per row, a loop block once per element of the row's reduced space), a reduction
 * one accumulation per element it reads; bytes are each distinct buffer read once plus each
 * buffer written once, where "once" means the elements its views touch, capped at its size.
 */
#include "kir/kir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void kir_program_free(kir_program *kp)
{
    if (!kp)
        return;
    mc_dims_free(kp->dims);
    mc_arena_free(&kp->arena);
    free(kp);
}

const char *kir_category_name(kir_category c)
{
    switch (c) {
    case KIR_POINTWISE: return "pointwise";
    case KIR_REDUCTION: return "reduction";
    case KIR_GEMM: return "gemm";
    case KIR_COPY: return "copy";
    case KIR_ATTENTION: return "attention";
    case KIR_COLLECTIVE: return "collective";
    }
    return "?";
}

bool kir_kernel_scans(const kir_kernel *k)
{
    for (int r = 0; r < k->nreds; r++)
        if (k->reds[r].scan)
            return true;
    return false;
}

void kir_kernel_read_views(const kir_kernel *k, bool *read)
{
    for (int v = 0; v < k->nviews; v++)
        read[v] = false;
    for (int i = 0; i < k->ncode; i++)
        if (k->code[i].kind == KI_LOAD || k->code[i].kind == KI_GATHER)
            read[k->code[i].view] = true;
    if (k->category == KIR_GEMM) {
        read[k->gemm.a] = read[k->gemm.b] = true;
    } else if (k->category == KIR_ATTENTION) {
        read[k->attn.q] = read[k->attn.k] = read[k->attn.v] = true;
        for (int s = 0; s < k->attn.nsteps; s++)
            if (k->attn.steps[s].view >= 0)
                read[k->attn.steps[s].view] = true;
    } else if (k->category == KIR_COLLECTIVE) {
        read[k->coll.in] = true;
    }
}

bool kir_attention_band_keeps(const kir_attention *a, int64_t i, int64_t j)
{
    for (int s = 0; s < a->nsteps; s++) {
        const kir_attn_step *st = &a->steps[s];
        if (st->kind == KIR_STEP_BAND && (j - i < st->lo || j - i > st->hi))
            return false;
    }
    return true;
}

int kir_gemm_b_shape(const kir_kernel *k, int64_t *shape)
{
    int nb = k->rank - 2;
    memcpy(shape, k->shape, sizeof(int64_t) * MC_MAX_RANK);
    if (!k->gemm.conv.on) {
        shape[nb] = k->gemm.k;
        shape[nb + 1] = k->gemm.n;
        return k->rank;
    }
    shape[nb] = k->gemm.conv.c;
    shape[nb + 1] = k->gemm.conv.h;
    shape[nb + 2] = k->gemm.conv.w;
    return nb + 3;
}

int64_t kir_attention_pairs(const kir_kernel *k)
{
    const kir_attention *a = &k->attn;
    if (!a->skip)
        return a->tq * a->tk; /* each below 2^31 (the pass checks) */
    int64_t pairs = 0;
    for (int64_t i = 0; i < a->tq; i++) {
        int64_t lo = i + a->skip_lo > 0 ? i + a->skip_lo : 0;
        int64_t hi = i + a->skip_hi < a->tk - 1 ? i + a->skip_hi : a->tk - 1;
        if (hi >= lo)
            pairs += hi - lo + 1;
    }
    return pairs;
}

/* ---- counting ------------------------------------------------------------------------------ */

static int64_t sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    return mc_mul_overflows(a, b, &r) ? INT64_MAX : r;
}

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    return mc_add_overflows(a, b, &r) ? INT64_MAX : r;
}

/* Elements a view touches over dims [0, ndim) of a space of that shape: the dimensions it
 * actually moves along (stride != 0). */
static int64_t view_touches(const int64_t *stride, const int64_t *shape, int ndim)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        if (stride[d] != 0)
            n = sat_mul(n, shape[d]);
    return n;
}

typedef struct {
    int64_t *read, *written; /* per buffer: elements touched */
    bool *seen;              /* per view: already counted (views are deduplicated by the pass) */
} byte_tally;

void kir_count(const kir_program *kp, kir_kernel *k)
{
    int64_t rows = 1, space = 1;
    for (int d = 0; d < k->rank; d++) {
        space = sat_mul(space, k->shape[d]);
        if (d < k->nrow)
            rows = sat_mul(rows, k->shape[d]);
    }
    int64_t flops = 0;
    if (k->category == KIR_GEMM)
        flops = sat_mul(sat_mul(2, sat_mul(space, k->gemm.k)), 1);
    for (int b = 0; b < k->nblocks; b++) {
        const kir_block *bl = &k->blocks[b];
        int64_t points = bl->loop ? space : rows;
        for (int i = bl->first; i < bl->first + bl->count; i++)
            if (k->code[i].kind == KI_OP)
                flops = sat_add(flops, sat_mul(mc_op_table[k->code[i].op].flops, points));
    }
    for (int r = 0; r < k->nreds; r++)
        flops = sat_add(flops, sat_mul(mc_op_table[k->reds[r].op].flops, space));
    int64_t batch = 1;
    if (k->category == KIR_ATTENTION) {
        /* per kept pair: the two dot products, each step, and softmax's max, sub, exp, sum, div */
        for (int d = 0; d < k->rank - 2; d++)
            batch = sat_mul(batch, k->shape[d]);
        int64_t per_pair = 2 * (k->attn.d + k->attn.dv) + k->attn.nsteps + 5;
        flops = sat_add(flops, sat_mul(sat_mul(batch, kir_attention_pairs(k)), per_pair));
    }
    k->flops = flops;

    /* Bytes: which views are read (loads, GEMM operands) and written (stores), and over which
     * dims (a row block's views move only along the row dims). */
    /* Tallies per distinct buffer of the kernel's views (slot s holds buffer slot_buffer[s]),
     * not per buffer of the program: counting every kernel stays linear in the program. */
    size_t nv = (size_t)(k->nviews > 0 ? k->nviews : 1);
    int nslots = 0;
    int *slot_buffer = calloc(nv, sizeof *slot_buffer);
    int *view_slot = calloc(nv, sizeof *view_slot);
    int64_t *read = calloc(nv, sizeof *read);
    int64_t *written = calloc(nv, sizeof *written);
    int *view_dims = calloc((size_t)(k->nviews > 0 ? k->nviews : 1), sizeof *view_dims);
    bool *view_read = calloc((size_t)(k->nviews > 0 ? k->nviews : 1), sizeof *view_read);
    bool *view_written = calloc((size_t)(k->nviews > 0 ? k->nviews : 1), sizeof *view_written);
    if (!read || !written || !view_dims || !view_read || !view_written || !slot_buffer ||
        !view_slot) {
        k->bytes = 0;
        goto done;
    }
    for (int v = 0; v < k->nviews; v++) {
        int s = 0;
        while (s < nslots && slot_buffer[s] != k->views[v].buffer)
            s++;
        if (s == nslots)
            slot_buffer[nslots++] = k->views[v].buffer;
        view_slot[v] = s;
    }
    for (int b = 0; b < k->nblocks; b++) {
        const kir_block *bl = &k->blocks[b];
        int dims = bl->loop ? k->rank : k->nrow;
        for (int i = bl->first; i < bl->first + bl->count; i++)
            if (k->code[i].kind == KI_LOAD) {
                int v = k->code[i].view;
                view_read[v] = true;
                if (dims > view_dims[v])
                    view_dims[v] = dims;
            } else if (k->code[i].kind == KI_GATHER) {
                /* one element per point where it is evaluated (rows of a table, mostly distinct) */
                int64_t points = 1;
                for (int d = 0; d < dims; d++)
                    points = sat_mul(points, k->shape[d]);
                int s = view_slot[k->code[i].view];
                read[s] = sat_add(read[s], points);
            }
    }
    for (int s = 0; s < k->nstores; s++) {
        int v = k->stores[s].view;
        view_written[v] = true;
        int dims = k->blocks[k->stores[s].block].loop ? k->rank : k->nrow;
        if (dims > view_dims[v])
            view_dims[v] = dims;
    }
    for (int v = 0; v < k->nviews; v++) {
        const kir_view *vw = &k->views[v];
        int64_t n = view_touches(vw->stride, k->shape, view_dims[v]);
        if (view_read[v])
            read[view_slot[v]] = sat_add(read[view_slot[v]], n);
        if (view_written[v])
            written[view_slot[v]] = sat_add(written[view_slot[v]], n);
    }
    if (k->category == KIR_GEMM) {
        int nbat = k->rank - 2;
        int64_t ashape[MC_MAX_RANK], bshape[MC_MAX_RANK];
        memcpy(ashape, k->shape, sizeof ashape);
        memcpy(bshape, k->shape, sizeof bshape);
        ashape[nbat] = k->gemm.m;
        ashape[nbat + 1] = k->gemm.k;
        int brank = kir_gemm_b_shape(k, bshape);
        const kir_view *a = &k->views[k->gemm.a], *bv = &k->views[k->gemm.b];
        int sa = view_slot[k->gemm.a], sb = view_slot[k->gemm.b];
        read[sa] = sat_add(read[sa], view_touches(a->stride, ashape, k->rank));
        read[sb] = sat_add(read[sb], view_touches(bv->stride, bshape, brank));
    }
    if (k->category == KIR_ATTENTION) {
        const kir_attention *at = &k->attn;
        int nbat = k->rank - 2;
        int64_t shape[MC_MAX_RANK];
        memcpy(shape, k->shape, sizeof shape);
        const int views[3] = {at->q, at->k, at->v};
        const int64_t rows[3] = {at->tq, at->tk, at->tk}, cols[3] = {at->d, at->d, at->dv};
        for (int o = 0; o < 3 + at->nsteps; o++) {
            int v = o < 3 ? views[o] : at->steps[o - 3].view;
            if (v < 0)
                continue;
            shape[nbat] = o < 3 ? rows[o] : at->tq;
            shape[nbat + 1] = o < 3 ? cols[o] : at->tk;
            read[view_slot[v]] = sat_add(read[view_slot[v]], view_touches(k->views[v].stride, shape, k->rank));
        }
    }
    int64_t bytes = 0;
    for (int s = 0; s < nslots; s++) {
        const kir_buffer *buf = &kp->buffers[slot_buffer[s]];
        int64_t size = (int64_t)mc_dtype_size(buf->dtype);
        int64_t r = read[s] < buf->numel ? read[s] : buf->numel;
        int64_t w = written[s] < buf->numel ? written[s] : buf->numel;
        bytes = sat_add(bytes, sat_mul(sat_add(r, w), size));
    }
    k->bytes = bytes;
done:
    free(slot_buffer);
    free(view_slot);
    free(read);
    free(written);
    free(view_dims);
    free(view_read);
    free(view_written);
}

mc_status kir_check_fail(const kir_program *kp, const mc_graph *g, int check, int64_t index)
{
    MC_ASSERT(check >= 0 && check < kp->nchecks);
    const kir_check *ck = &kp->checks[check];
    if (ck->origin == MC_OP_UPDATE && (index >= ck->size || index < -ck->size)) {
        /* the index is pos + len (pos past the end) or pos - len (pos negative), saturated at
         * i32's limits (passes/decompose.c, update) */
        bool high = index >= ck->size;
        int64_t pos = high ? index - ck->size : index + ck->size;
        int bound = high ? (index >= INT32_MAX ? 1 : 0) : (index <= INT32_MIN ? -1 : 0);
        return mc_update_pos_fail(g, ck->line, ck->col, pos, bound, ck->size, ck->extent, ck->axis);
    }
    if (g && g->file && ck->line > 0)
        return mc_fail_at(MC_ERR_INPUT, g->file, g->text, ck->line, ck->col,
                          "gather: index %lld is outside [%lld, %lld)", (long long)index, (long long)-ck->size,
                          (long long)ck->size);
    return mc_fail(MC_ERR_INPUT, "gather: index %lld is outside [%lld, %lld)", (long long)index,
                   (long long)-ck->size, (long long)ck->size);
}

/* ---- printing ------------------------------------------------------------------------------ */

static const char *buffer_kind_name(kir_buffer_kind k)
{
    switch (k) {
    case KBUF_INPUT: return "input";
    case KBUF_PARAM: return "param";
    case KBUF_OUTPUT: return "output";
    case KBUF_TEMP: return "temp";
    }
    return "?";
}

static void print_buffer_name(const kir_program *kp, int b, const mc_graph *g, FILE *out)
{
    const kir_buffer *buf = &kp->buffers[b];
    char name[64];
    if (g && buf->node >= 0 && buf->node < g->nnodes)
        fprintf(out, "b%d(%s)", b, mc_node_name(g, buf->node, name, sizeof name));
    else
        fprintf(out, "b%d", b);
}

static void print_view(const kir_program *kp, const kir_kernel *k, int v, const mc_graph *g,
                       FILE *out)
{
    const kir_view *vw = &k->views[v];
    fprintf(out, "    v%d = ", v);
    print_buffer_name(kp, vw->buffer, g, out);
    fprintf(out, " [+%lld; strides", (long long)vw->offset);
    for (int d = 0; d < k->rank; d++)
        fprintf(out, " %lld", (long long)vw->stride[d]);
    fprintf(out, "]\n");
}

static void print_instr(const kir_program *kp, const kir_kernel *k, int i, FILE *out)
{
    const kir_instr *in = &k->code[i];
    fprintf(out, "      %%%d = ", i);
    switch (in->kind) {
    case KI_LOAD: fprintf(out, "load v%d", in->view); break;
    case KI_CONST: fprintf(out, "const %.9g", in->value); break;
    case KI_SIZE: {
        char dim[96];
        fprintf(out, "size %.9g %s %s", in->value, in->times ? "*" : "/", mc_dims_str(kp->dims, in->size, dim, sizeof dim));
        break;
    }
    case KI_INDEX: fprintf(out, "index d%d", in->view); break;
    case KI_ROWVAL: fprintf(out, "rowval r%d", in->view); break;
    case KI_ACC: fprintf(out, "acc"); break;
    case KI_GATHER:
        fprintf(out, "gather v%d [%%%d * %lld, n %lld, check %d]", in->view, in->arg[0], (long long)in->stride,
                (long long)in->size, in->check);
        break;
    case KI_OP: {
        int nin = in->op == MC_OP_CAST ? 1 : mc_op_table[in->op].min_in;
        fprintf(out, "%s", mc_op_table[in->op].name);
        for (int a = 0; a < nin && a < 3; a++)
            fprintf(out, " %%%d", in->arg[a]);
        break;
    }
    }
    fprintf(out, " : %s\n", mc_dtype_name(in->dtype));
}

static void print_bound(const char *what, int64_t v, FILE *out)
{
    if (v > -KIR_BAND_OPEN && v < KIR_BAND_OPEN)
        fprintf(out, " %s %lld", what, (long long)v);
}

static void print_attention(const kir_kernel *k, FILE *out)
{
    const kir_attention *a = &k->attn;
    fprintf(out, "  attention: tq %lld tk %lld d %lld dv %lld  q v%d  k v%d  v v%d\n",
            (long long)a->tq, (long long)a->tk, (long long)a->d, (long long)a->dv, a->q, a->k, a->v);
    fprintf(out, "  scores: q.k");
    for (int s = 0; s < a->nsteps; s++) {
        const kir_attn_step *st = &a->steps[s];
        switch (st->kind) {
        case KIR_STEP_MUL: fprintf(out, " -> mul %.9g", st->value); break;
        case KIR_STEP_DIV: fprintf(out, " -> div %.9g", st->value); break;
        case KIR_STEP_BAND:
            fprintf(out, " -> band (j - i");
            print_bound(">=", st->lo, out);
            print_bound("<=", st->hi, out);
            fprintf(out, ") else %.9g", st->value);
            break;
        case KIR_STEP_WHERE:
            fprintf(out, " -> where v%d is %s else %.9g", st->view, st->keep ? "true" : "false", st->value);
            break;
        case KIR_STEP_ADD: fprintf(out, " -> add v%d", st->view); break;
        }
    }
    fprintf(out, " -> softmax -> .v\n");
    if (a->skip)
        fprintf(out, "  skips pairs outside %lld <= j - i <= %lld (%lld of %lld pairs computed)\n",
                (long long)a->skip_lo, (long long)a->skip_hi, (long long)kir_attention_pairs(k),
                (long long)(a->tq * a->tk));
}

void kir_print_kernel(const kir_program *kp, const kir_kernel *k, const mc_graph *g, FILE *out)
{
    fprintf(out, "kernel %s  (%s)  space [", k->name, kir_category_name(k->category));
    for (int d = 0; d < k->rank; d++)
        fprintf(out, "%s%lld", d ? ", " : "", (long long)k->shape[d]);
    fprintf(out, "]");
    if (k->category == KIR_REDUCTION)
        fprintf(out, " rows %d", k->nrow);
    fprintf(out, "\n  ops:");
    for (int i = 0; i < k->nops; i++)
        fprintf(out, " %s", mc_op_table[k->ops[i]].name);
    if (k->nlines > 0) {
        fprintf(out, "  lines:");
        for (int i = 0; i < k->nlines; i++)
            fprintf(out, " %d", k->lines[i]);
    }
    fprintf(out, "  flops: %lld  bytes: %lld\n", (long long)k->flops, (long long)k->bytes);
    if (k->prep)
        fprintf(out, "  prep: computed from params alone, runs when they are bound, not in every run\n");
    if (k->category == KIR_GEMM)
        fprintf(out, "  gemm: m %lld n %lld k %lld  a v%d  b v%d%s\n", (long long)k->gemm.m,
                (long long)k->gemm.n, (long long)k->gemm.k, k->gemm.a, k->gemm.b,
                k->gemm.tf32 ? "  tf32" : "");
    if (k->category == KIR_GEMM && k->gemm.conv.on) {
        const kir_conv *cv = &k->gemm.conv;
        fprintf(out, "  b: im2col of x [%lld, %lld, %lld], window %lldx%lld, stride %lld %lld, padding %lld %lld, "
                     "dilation %lld %lld, out %lldx%lld%s\n",
                (long long)cv->c, (long long)cv->h, (long long)cv->w, (long long)cv->kh, (long long)cv->kw,
                (long long)cv->sh, (long long)cv->sw, (long long)cv->ph, (long long)cv->pw, (long long)cv->dh,
                (long long)cv->dw, (long long)cv->oh, (long long)cv->ow, cv->kc > 0 ? ", K by channel chunks" : "");
    }
    if (k->category == KIR_ATTENTION)
        print_attention(k, out);
    if (k->category == KIR_COLLECTIVE)
        fprintf(out, "  all-reduce: v%d -> v%d, %lld elements, sum over the ranks\n", k->coll.in,
                k->coll.out, (long long)k->coll.count);
    fprintf(out, "  views:\n");
    for (int v = 0; v < k->nviews; v++)
        print_view(kp, k, v, g, out);
    for (int b = 0; b < k->nblocks; b++) {
        const kir_block *bl = &k->blocks[b];
        fprintf(out, "    block %d (%s):\n", b, bl->loop ? "loop" : "row");
        for (int i = bl->first; i < bl->first + bl->count; i++)
            print_instr(kp, k, i, out);
        for (int r = 0; r < k->nreds; r++)
            if (k->reds[r].block == b)
                fprintf(out, "      r%d = %s%s %%%d : %s\n", r, k->reds[r].scan ? "scan " : "",
                        mc_op_table[k->reds[r].op].name, k->reds[r].value, mc_dtype_name(k->reds[r].dtype));
        for (int s = 0; s < k->nstores; s++)
            if (k->stores[s].block == b)
                fprintf(out, "      store v%d <- %%%d\n", k->stores[s].view, k->stores[s].value);
    }
}

void kir_print(const kir_program *kp, const mc_graph *g, FILE *out)
{
    int64_t flops = 0, bytes = 0;
    for (int i = 0; i < kp->nkernels; i++) {
        flops = sat_add(flops, kp->kernels[i].flops);
        bytes = sat_add(bytes, kp->kernels[i].bytes);
    }
    fprintf(out, "# %d kernels, %d buffers; intermediates: %lld bytes planned, %lld unplanned\n",
            kp->nkernels, kp->nbuffers, (long long)kp->arena_bytes,
            (long long)kp->unplanned_bytes);
    fprintf(out, "# total flops %lld, bytes %lld\n", (long long)flops, (long long)bytes);
    if (kp->nprep > 0)
        fprintf(out, "# %d prep kernels: computed from params alone, they run when the params are bound, not in "
                "every run\n", kp->nprep);
    for (int n = 0; n < kp->nnotes; n++)
        fprintf(out, "# %s\n", kp->notes[n]);
    fprintf(out, "buffers:\n");
    for (int b = 0; b < kp->nbuffers; b++) {
        const kir_buffer *buf = &kp->buffers[b];
        fprintf(out, "  ");
        print_buffer_name(kp, b, g, out);
        fprintf(out, " %s %s[%lld]", buffer_kind_name(buf->kind), mc_dtype_name(buf->dtype),
                (long long)buf->numel);
        if (buf->kind == KBUF_TEMP)
            fprintf(out, " at %lld, live kernels %d..%d%s", (long long)buf->offset, buf->first,
                    buf->last, buf->kept ? ", kept across runs" : "");
        fprintf(out, "\n");
    }
    for (int i = 0; i < kp->nkernels; i++) {
        fprintf(out, "\n");
        kir_print_kernel(kp, &kp->kernels[i], g, out);
    }
}
