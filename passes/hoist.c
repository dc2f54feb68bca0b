/* Kernels computed from params alone (kir/kir.h, "Prep kernels").
 *
 * Requires: a lowered kir_program (with or without symbolic sizes), before memory planning.
 * Changes: marks `prep` the kernels whose values depend on params and constants alone, counts
 * them in nprep, and marks `prep_read` the params they read. The plan (passes/plan.c) then
 * gives the temps they write for a run to read a place of their own.
 *
 * A kernel is prep when every buffer it reads is a param or a temp that prep kernels alone
 * write, all of them before it in the list (a kernel that reads a temp it writes is not prep),
 * every buffer it writes is a temp that prep kernels alone write (a temp written in
 * parts, a padding's zeros then a copy of an input into it, is prep only if every part is), and
 * nothing in it depends on the run: no gather (its check reports a run's failure), no
 * collective (it meets the other ranks in a run), no size of a symbol (each binding of a
 * symbolic program shares the kept temps' places, so their values must not depend on the
 * binding). Found by a pass in list order (mark_pass), again only where a temp written in
 * parts had a later writer that is not prep: linear in the kernels for every graph without such
 * temps (a chain of 200,000 kernels, tests/test_limits.c).
 */
#include "passes/passes.h"

#include <stdlib.h>

static bool sym(const kir_program *kp, int64_t d) { return kp->dims && mc_dim_is_sym(d); }

/* Does kernel k, on its own, qualify: no gather, no collective, no symbolic size, stores only
 * into temps? */
static bool alone_ok(const kir_program *kp, const kir_kernel *k)
{
    if (k->category == KIR_COLLECTIVE || k->nstores == 0)
        return false;
    for (int i = 0; i < k->ncode; i++)
        if (k->code[i].kind == KI_GATHER || k->code[i].kind == KI_SIZE)
            return false;
    for (int d = 0; d < k->rank; d++)
        if (sym(kp, k->shape[d]))
            return false;
    for (int v = 0; v < k->nviews; v++) {
        const kir_view *w = &k->views[v];
        if (sym(kp, w->offset) || sym(kp, kp->buffers[w->buffer].numel))
            return false;
        for (int d = 0; d < MC_MAX_RANK; d++)
            if (sym(kp, w->stride[d]))
                return false;
    }
    if (k->category == KIR_GEMM && (sym(kp, k->gemm.m) || sym(kp, k->gemm.n) || sym(kp, k->gemm.k)))
        return false;
    if (k->category == KIR_ATTENTION &&
        (sym(kp, k->attn.tq) || sym(kp, k->attn.tk) || sym(kp, k->attn.d) || sym(kp, k->attn.dv)))
        return false;
    for (int s = 0; s < k->nstores; s++)
        if (kp->buffers[k->views[k->stores[s].view].buffer].kind != KBUF_TEMP)
            return false;
    return true;
}

/* One pass in list order (execution order: a value is written before it is read): kernel k is
 * prep when it is a candidate, reads params or temps whose writers all come before it and are
 * prep, and writes no temp that a kernel not prep wrote before. Returns how many candidates it
 * dropped afterwards because a later writer of a temp they write is not prep (a temp written in
 * parts): the pass runs again without them. */
static int mark_pass(kir_program *kp, bool *cand, bool *foreign, const int *last_writer, bool *read)
{
    for (int b = 0; b < kp->nbuffers; b++)
        foreign[b] = kp->buffers[b].kind != KBUF_TEMP && kp->buffers[b].kind != KBUF_PARAM;
    for (int k = 0; k < kp->nkernels; k++) {
        kir_kernel *q = &kp->kernels[k];
        bool ok = cand[k];
        if (ok) {
            kir_kernel_read_views(q, read);
            for (int v = 0; v < q->nviews && ok; v++) {
                int b = q->views[v].buffer;
                ok = !read[v] || kp->buffers[b].kind == KBUF_PARAM || (!foreign[b] && last_writer[b] < k);
            }
        }
        for (int s = 0; s < q->nstores && ok; s++)
            ok = !foreign[q->views[q->stores[s].view].buffer];
        q->prep = ok;
        for (int s = 0; s < q->nstores && !ok; s++)
            foreign[q->views[q->stores[s].view].buffer] = true;
        if (!ok && q->category == KIR_COLLECTIVE)
            foreign[q->views[q->coll.out].buffer] = true;
    }
    int dropped = 0;
    for (int k = 0; k < kp->nkernels; k++) {
        const kir_kernel *q = &kp->kernels[k];
        for (int s = 0; s < q->nstores && q->prep && cand[k]; s++)
            if (foreign[q->views[q->stores[s].view].buffer]) {
                cand[k] = false;
                dropped++;
            }
    }
    return dropped;
}

void mc_hoist_params(kir_program *kp)
{
    int nk = kp->nkernels, nb = kp->nbuffers;
    kp->nprep = 0;
    for (int b = 0; b < nb; b++)
        kp->buffers[b].prep_read = false;
    int maxv = 1;
    for (int k = 0; k < nk; k++) {
        kp->kernels[k].prep = false;
        if (kp->kernels[k].nviews > maxv)
            maxv = kp->kernels[k].nviews;
    }
    bool *cand = calloc((size_t)nk + 1, sizeof *cand);
    bool *foreign = calloc((size_t)nb + 1, sizeof *foreign); /* written by a kernel not prep */
    int *last_writer = malloc(((size_t)nb + 1) * sizeof *last_writer);
    bool *read = calloc((size_t)maxv, sizeof *read);
    if (!cand || !foreign || !last_writer || !read) { /* out of memory: nothing is hoisted, always right */
        free(cand);
        free(foreign);
        free(last_writer);
        free(read);
        return;
    }
    for (int b = 0; b < nb; b++)
        last_writer[b] = -1;
    for (int k = 0; k < nk; k++) {
        const kir_kernel *q = &kp->kernels[k];
        cand[k] = alone_ok(kp, q);
        for (int s = 0; s < q->nstores; s++)
            last_writer[q->views[q->stores[s].view].buffer] = k;
        if (q->category == KIR_COLLECTIVE)
            last_writer[q->views[q->coll.out].buffer] = k;
    }
    while (mark_pass(kp, cand, foreign, last_writer, read) > 0) {
    }
    for (int k = 0; k < nk; k++) {
        kir_kernel *q = &kp->kernels[k];
        if (!q->prep)
            continue;
        kp->nprep++;
        kir_kernel_read_views(q, read);
        for (int v = 0; v < q->nviews; v++)
            if (read[v] && kp->buffers[q->views[v].buffer].kind == KBUF_PARAM)
                kp->buffers[q->views[v].buffer].prep_read = true;
    }
    free(cand);
    free(foreign);
    free(last_writer);
    free(read);
}
