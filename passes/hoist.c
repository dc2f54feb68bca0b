/* Kernels computed from params alone (kir/kir.h, "Prep kernels").
 *
 * Requires: a lowered kir_program (with or without symbolic sizes), before memory planning.
 * Changes: marks `prep` the kernels whose values depend on params and constants alone, counts
 * them in nprep, and marks `prep_read` the params they read. The plan (passes/plan.c) then
 * gives the temps they write for a run to read a place of their own.
 *
 * A kernel is prep when every buffer it reads is a param or a temp that prep kernels alone
 * write, every buffer it writes is a temp that prep kernels alone write (a temp written in
 * parts, a padding's zeros then a copy of an input into it, is prep only if every part is), and
 * nothing in it depends on the run: no gather (its check reports a run's failure), no
 * collective (it meets the other ranks in a run), no size of a symbol (each binding of a
 * symbolic program shares the kept temps' places, so their values must not depend on the
 * binding). Found as the largest such set: start from every kernel that passes the local
 * tests, then drop those whose reads or writes involve a kernel that is not prep, until
 * nothing changes.
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
    bool *foreign = calloc((size_t)nb + 1, sizeof *foreign); /* written by a kernel not (or no longer) prep */
    bool *read = calloc((size_t)maxv, sizeof *read);
    if (!cand || !foreign || !read) { /* out of memory: nothing is hoisted, which is always right */
        free(cand);
        free(foreign);
        free(read);
        return;
    }
    for (int k = 0; k < nk; k++)
        cand[k] = alone_ok(kp, &kp->kernels[k]);
    for (bool changed = true; changed;) {
        changed = false;
        for (int b = 0; b < nb; b++)
            foreign[b] = kp->buffers[b].kind != KBUF_TEMP && kp->buffers[b].kind != KBUF_PARAM;
        for (int k = 0; k < nk; k++) {
            const kir_kernel *q = &kp->kernels[k];
            for (int s = 0; s < q->nstores && !cand[k]; s++)
                foreign[q->views[q->stores[s].view].buffer] = true;
            if (q->category == KIR_COLLECTIVE && !cand[k])
                foreign[q->views[q->coll.out].buffer] = true;
        }
        for (int k = 0; k < nk; k++) {
            const kir_kernel *q = &kp->kernels[k];
            if (!cand[k])
                continue;
            bool ok = true;
            kir_kernel_read_views(q, read);
            for (int v = 0; v < q->nviews && ok; v++)
                ok = !read[v] || !foreign[q->views[v].buffer];
            for (int s = 0; s < q->nstores && ok; s++)
                ok = !foreign[q->views[q->stores[s].view].buffer];
            if (!ok) {
                cand[k] = false;
                changed = true;
            }
        }
    }
    for (int k = 0; k < nk; k++) {
        kir_kernel *q = &kp->kernels[k];
        if (!cand[k])
            continue;
        q->prep = true;
        kp->nprep++;
        kir_kernel_read_views(q, read);
        for (int v = 0; v < q->nviews; v++)
            if (read[v] && kp->buffers[q->views[v].buffer].kind == KBUF_PARAM)
                kp->buffers[q->views[v].buffer].prep_read = true;
    }
    free(cand);
    free(foreign);
    free(read);
}
