/* Memory planning: intermediates share one arena by liveness.
 *
 * Requires: a lowered kir_program whose buffers know the first kernel that writes them and the
 * last that reads them. Changes: every KBUF_TEMP gets a byte offset in one arena; arena_bytes is
 * the arena's size and unplanned_bytes what a buffer each would need.
 *
 * Two temps may overlap in memory only when their live ranges [first, last] (in kernel order,
 * inclusive) are disjoint, or when one kernel consumes the first and produces the second
 * element by element through the same view (in_place below): then they share one address. Placement is greedy best-fit in the order of
 * decreasing size (the classic offset-assignment heuristic): each temp goes to the lowest
 * aligned offset that clashes with no already placed temp live at the same time. Offsets are
 * 256-byte aligned, enough for any vector load a backend may use. Only pairs of temps live at
 * the same time are ever compared (found by one sweep in kernel order), so a program of 10^5
 * kernels is planned in about linear time, not quadratic.
 *
 * Temps that prep kernels write for a run to read (kir_buffer.kept: kir/kir.h, "Prep kernels")
 * hold their value from one run to the next: each has its own range after the shared part.
 *
 * The source of a copy that writes a GEMM's B operand just before the GEMM (a conv's im2col
 * windows, passes/decompose.c) lives until the GEMM, and so does what the kernels just before
 * those copies read to write that source (the padding's copies of the unpadded input): a
 * backend may then pack B from either and skip the copies (the CPU backend does:
 * backends/cpu/llvm.h, llvm_im2col).
 */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

#define PLAN_ALIGN 256

static int64_t aligned_size(const kir_buffer *b)
{
    int64_t bytes;
    if (mc_mul_overflows(b->numel, (int64_t)mc_dtype_size(b->dtype), &bytes) ||
        mc_add_overflows(bytes, PLAN_ALIGN - 1, &bytes))
        return INT64_MAX / 4;
    return bytes / PLAN_ALIGN * PLAN_ALIGN;
}

typedef struct {
    int64_t size;  /* aligned bytes; later the temp's rank in placement order */
    int first;     /* first kernel */
    int buffer;
} place_key;

static int by_size_cmp(const void *pa, const void *pb)
{
    const place_key *a = pa, *b = pb;
    if (a->size != b->size)
        return a->size > b->size ? -1 : 1;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    return (a->buffer > b->buffer) - (a->buffer < b->buffer);
}

static int by_first_cmp(const void *pa, const void *pb)
{
    const place_key *a = pa, *b = pb;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    return (a->size > b->size) - (a->size < b->size);
}

static int int_cmp(const void *pa, const void *pb)
{
    int a = *(const int *)pa, b = *(const int *)pb;
    return (a > b) - (a < b);
}

static bool same_view(const kir_kernel *k, const kir_view *a, const kir_view *b)
{
    if (a->offset != b->offset)
        return false;
    for (int d = 0; d < k->rank; d++)
        if (a->stride[d] != b->stride[d])
            return false;
    return true;
}

/* May temp `out` take temp `in`'s place? When the one kernel where in dies and out is born
 * reads in only at the very elements it writes out (the same view, element by element: a
 * pointwise or reduction kernel, never a GEMM operand), and never in a block after the first
 * that stores out, each point reads its element before writing it, so in-place is safe. This lets softmax's probabilities overwrite its scores. */
static bool in_place(const kir_program *kp, int in, int out)
{
    const kir_buffer *a = &kp->buffers[in], *b = &kp->buffers[out];
    if (a->last != b->first || a->last < 0 || a->numel != b->numel ||
        mc_dtype_size(a->dtype) != mc_dtype_size(b->dtype))
        return false;
    const kir_kernel *k = &kp->kernels[a->last];
    if (k->category == KIR_ATTENTION)
        return false; /* every output element reads whole rows of q, k and v */
    if (k->category == KIR_GEMM && (k->views[k->gemm.a].buffer == in || k->views[k->gemm.b].buffer == in))
        return false;
    const kir_view *store = NULL;
    for (int s = 0; s < k->nstores; s++) {
        const kir_view *v = &k->views[k->stores[s].view];
        if (v->buffer == out) {
            if (store && !same_view(k, store, v))
                return false;
            if (!k->blocks[k->stores[s].block].loop && k->nrow < k->rank)
                return false; /* a row-level store */
            store = v;
        }
    }
    if (!store)
        return false;
    int first_store_block = k->nblocks;
    for (int s = 0; s < k->nstores; s++)
        if (k->views[k->stores[s].view].buffer == out && k->stores[s].block < first_store_block)
            first_store_block = k->stores[s].block;
    bool reads = false;
    for (int i = 0; i < k->ncode; i++) {
        if (k->code[i].kind == KI_GATHER) {
            int gb = k->views[k->code[i].view].buffer;
            if (gb == in || gb == out)
                return false; /* read at places the data chooses */
            continue;
        }
        if (k->code[i].kind != KI_LOAD)
            continue;
        if (k->views[k->code[i].view].buffer == in && i >= k->blocks[first_store_block].first + k->blocks[first_store_block].count)
            return false; /* read again after the row's elements were overwritten */
        const kir_view *v = &k->views[k->code[i].view];
        if (v->buffer == out)
            return false;
        if (v->buffer == in) {
            if (!same_view(k, v, store))
                return false;
            reads = true;
        }
    }
    return reads;
}

/* See the top: the copies' sources live through the GEMM they feed, and so do, through the
 * kernels just before them that write those sources (a padding's zero fills and copies), the
 * sources of those: the unpadded input, which a backend may read instead of the padded one. */
static void extend_im2col_sources(kir_program *kp)
{
    enum { MAXS = 16 };
    for (int g = 0; g < kp->nkernels; g++) {
        const kir_kernel *k = &kp->kernels[g];
        if (k->category != KIR_GEMM)
            continue;
        int cols = k->views[k->gemm.b].buffer;
        if (kp->buffers[cols].kind != KBUF_TEMP)
            continue;
        int set[MAXS] = {cols}, nset = 1; /* buffers whose writers are followed */
        bool windows = true;              /* still in the copies that write cols */
        for (int j = g - 1; j >= 0; j--) {
            const kir_kernel *q = &kp->kernels[j];
            bool writes_cols = false, writes = false;
            for (int s = 0; s < q->nstores; s++)
                for (int b = 0; b < nset; b++) {
                    writes |= q->views[q->stores[s].view].buffer == set[b];
                    writes_cols |= q->views[q->stores[s].view].buffer == cols;
                }
            if (windows && !writes_cols) {
                windows = false;
                nset--; /* from here on: the windows' sources only */
                memmove(set, set + 1, sizeof *set * (size_t)nset);
                writes = false;
                for (int s = 0; s < q->nstores; s++)
                    for (int b = 0; b < nset; b++)
                        writes |= q->views[q->stores[s].view].buffer == set[b];
            }
            bool loads = false;
            for (int i = 0; i < q->ncode; i++)
                loads |= q->code[i].kind == KI_LOAD;
            /* copies, and pointwise kernels that load nothing (a padding's zeros) */
            if ((windows && q->category != KIR_COPY) || !writes ||
                (q->category != KIR_COPY && (q->category != KIR_POINTWISE || loads)))
                break;
            for (int i = 0; i < q->ncode; i++) {
                if (q->code[i].kind != KI_LOAD)
                    continue;
                int b = q->views[q->code[i].view].buffer;
                kir_buffer *src = &kp->buffers[b];
                if (src->kind == KBUF_TEMP && src->last < g)
                    src->last = g;
                bool seen = false;
                for (int s = 0; s < nset; s++)
                    seen |= set[s] == b;
                if (!seen && nset < MAXS)
                    set[nset++] = b;
            }
        }
    }
}

/* Temps that keep their value across runs (kir/kir.h, "Prep kernels"): written by prep kernels,
 * which run before a run and not during it, and read by the run (by a kernel that is not prep,
 * or live until one: a GEMM that reads its im2col copies' source). They take no part in the
 * sharing by liveness: each gets a place of its own after the shared part of the arena
 * (place_kept). A temp that prep kernels alone read lives within the prep kernels' span in the
 * list, which they run in order, so it shares memory as any other. Out of memory: every temp is
 * kept, which is always correct. */
static void mark_kept(kir_program *kp)
{
    for (int b = 0; b < kp->nbuffers; b++)
        kp->buffers[b].kept = false;
    if (kp->nprep == 0)
        return;
    int maxv = 1;
    for (int k = 0; k < kp->nkernels; k++)
        if (kp->kernels[k].nviews > maxv)
            maxv = kp->kernels[k].nviews;
    bool *by_prep = calloc((size_t)kp->nbuffers + 1, sizeof *by_prep);
    bool *read = calloc((size_t)maxv, sizeof *read);
    if (!by_prep || !read) {
        for (int b = 0; b < kp->nbuffers; b++)
            kp->buffers[b].kept = kp->buffers[b].kind == KBUF_TEMP;
        free(by_prep);
        free(read);
        return;
    }
    for (int k = 0; k < kp->nkernels; k++) {
        const kir_kernel *q = &kp->kernels[k];
        for (int s = 0; s < q->nstores && q->prep; s++)
            by_prep[q->views[q->stores[s].view].buffer] = true;
    }
    for (int k = 0; k < kp->nkernels; k++) {
        const kir_kernel *q = &kp->kernels[k];
        if (q->prep)
            continue;
        kir_kernel_read_views(q, read);
        for (int v = 0; v < q->nviews; v++)
            if (read[v] && by_prep[q->views[v].buffer])
                kp->buffers[q->views[v].buffer].kept = true;
    }
    for (int b = 0; b < kp->nbuffers; b++) {
        kir_buffer *buf = &kp->buffers[b];
        if (by_prep[b] && buf->kind == KBUF_TEMP && buf->last >= 0 && buf->last < kp->nkernels &&
            !kp->kernels[buf->last].prep)
            buf->kept = true;
    }
    free(by_prep);
    free(read);
}

/* The kept temps, each its own range after the first *arena bytes. */
static void place_kept(kir_program *kp, int64_t *arena)
{
    for (int b = 0; b < kp->nbuffers; b++) {
        kir_buffer *buf = &kp->buffers[b];
        if (buf->kind != KBUF_TEMP || !buf->kept)
            continue;
        buf->offset = *arena;
        if (mc_add_overflows(*arena, aligned_size(buf), arena))
            *arena = INT64_MAX / 2;
    }
}

void mc_plan_memory(kir_program *kp, bool share)
{
    int n = kp->nbuffers, nt = 0;
    extend_im2col_sources(kp);
    mark_kept(kp);
    int *temps = malloc(sizeof *temps * (size_t)(n > 0 ? n : 1));
    int64_t unplanned = 0, arena = 0;
    for (int b = 0; b < n; b++)
        if (kp->buffers[b].kind == KBUF_TEMP) {
            kir_buffer *buf = &kp->buffers[b];
            if (buf->first < 0) /* never touched: give it a harmless range */
                buf->first = buf->last = 0;
            int64_t size = aligned_size(buf);
            buf->offset = unplanned;
            if (mc_add_overflows(unplanned, size, &unplanned))
                unplanned = INT64_MAX / 2;
            if (temps && !buf->kept) /* kept temps: after the shared part (place_kept) */
                temps[nt++] = b;
        }
    kp->unplanned_bytes = unplanned;
    if (!share || !temps) {
        kp->arena_bytes = unplanned; /* the offsets given above: one range each */
        free(temps);
        return;
    }
    /* Largest first (ties: earliest first, then buffer order), each at the lowest offset that
     * fits among the temps placed before it that are live at the same time. */
    place_key *keys = malloc(sizeof *keys * (size_t)(nt > 0 ? nt : 1));
    int64_t *degree = calloc((size_t)nt + 1, sizeof *degree);
    if (!keys || !degree) {
        kp->arena_bytes = unplanned; /* out of memory: one range each is still correct */
        free(keys);
        free(degree);
        free(temps);
        return;
    }
    for (int i = 0; i < nt; i++)
        keys[i] = (place_key){.size = aligned_size(&kp->buffers[temps[i]]),
                              .first = kp->buffers[temps[i]].first, .buffer = temps[i]};
    qsort(keys, (size_t)nt, sizeof *keys, by_size_cmp);
    for (int i = 0; i < nt; i++) {
        temps[i] = keys[i].buffer; /* placement order */
        keys[i].size = i; /* now: the rank, for the sweep below */
    }
    /* Pairs live at the same time, found by a sweep in order of first kernel (linear in the
     * pairs), kept per temp as the ranks of the others, ascending: the same temps the plain
     * scan over every earlier one would meet, in the same order. */
    place_key *sweep = malloc(sizeof *sweep * (size_t)(nt > 0 ? nt : 1));
    int *adj = NULL;
    int64_t nedges = 0;
    if (sweep) {
        memcpy(sweep, keys, sizeof *sweep * (size_t)nt);
        qsort(sweep, (size_t)nt, sizeof *sweep, by_first_cmp);
        for (int pass = 0; pass < 2; pass++) {
            for (int a = 0; a < nt; a++) {
                const kir_buffer *ba = &kp->buffers[sweep[a].buffer];
                for (int b = a + 1; b < nt && sweep[b].first <= ba->last; b++) {
                    int ra = (int)sweep[a].size, rb = (int)sweep[b].size;
                    if (pass == 0) {
                        degree[ra + 1]++;
                        degree[rb + 1]++;
                    } else {
                        adj[degree[ra]++] = rb;
                        adj[degree[rb]++] = ra;
                    }
                }
            }
            if (pass == 0) {
                for (int i = 0; i < nt; i++)
                    degree[i + 1] += degree[i];
                nedges = degree[nt];
                adj = malloc(sizeof *adj * (size_t)(nedges > 0 ? nedges : 1));
                if (!adj)
                    break;
            } else {
                for (int i = nt; i > 0; i--) /* filling moved each start to the next one's */
                    degree[i] = degree[i - 1];
                degree[0] = 0;
            }
        }
    }
    if (!sweep || !adj) {
        kp->arena_bytes = unplanned;
        free(sweep);
        free(adj);
        free(keys);
        free(degree);
        free(temps);
        return;
    }
    for (int i = 0; i < nt; i++)
        qsort(adj + degree[i], (size_t)(degree[i + 1] - degree[i]), sizeof *adj, int_cmp);
    for (int i = 0; i < nt; i++) {
        kir_buffer *buf = &kp->buffers[temps[i]];
        int64_t size = aligned_size(buf), offset = -1;
        /* First choice: the place of a temp it may overwrite in place (either direction).
         * Such a temp is live together with it (one dies where the other is born), so both
         * loops run over the live-together temps placed before it, in placement order. */
        for (int64_t ej = degree[i]; ej < degree[i + 1] && adj[ej] < i && offset < 0; ej++) {
            int j = adj[ej], o = temps[j];
            if (!in_place(kp, o, temps[i]) && !in_place(kp, temps[i], o))
                continue;
            int64_t at = kp->buffers[o].offset;
            bool clash = false;
            for (int64_t eq = degree[i]; eq < degree[i + 1] && adj[eq] < i && !clash; eq++) {
                int q = adj[eq];
                const kir_buffer *other = &kp->buffers[temps[q]];
                if (q == j)
                    continue;
                if (other->offset == at && (in_place(kp, temps[q], temps[i]) || in_place(kp, temps[i], temps[q])))
                    continue;
                clash = at < other->offset + aligned_size(other) && other->offset < at + size;
            }
            if (!clash)
                offset = at;
        }
        for (bool moved = offset < 0; moved;) {
            if (offset < 0)
                offset = 0;
            moved = false;
            for (int64_t e = degree[i]; e < degree[i + 1] && adj[e] < i; e++) {
                const kir_buffer *o = &kp->buffers[temps[adj[e]]];
                int64_t osize = aligned_size(o);
                if (offset < o->offset + osize && o->offset < offset + size) {
                    offset = o->offset + osize;
                    moved = true;
                }
            }
        }
        buf->offset = offset;
        if (offset + size > arena)
            arena = offset + size;
    }
    free(sweep);
    free(adj);
    free(keys);
    free(degree);
    place_kept(kp, &arena);
    kp->arena_bytes = arena;
    free(temps);
}

/* ---- one plan for every binding (symbolic programs planned at the maxima) ---------------- */

bool mc_plan_memory_like(kir_program *kp, const kir_program *at_max, char *why, size_t why_size)
{
    why[0] = '\0';
    if (kp->nbuffers != at_max->nbuffers || kp->nkernels != at_max->nkernels) {
        snprintf(why, why_size, "its kernel list differs from the one at the maxima");
        return false;
    }
    extend_im2col_sources(kp);
    mark_kept(kp);
    int n = kp->nbuffers, nt = 0;
    place_key *sweep = malloc(sizeof *sweep * (size_t)(n > 0 ? n : 1));
    if (!sweep) {
        snprintf(why, why_size, "out of memory");
        return false;
    }
    bool ok = true;
    for (int b = 0; b < n && ok; b++) {
        const kir_buffer *x = &kp->buffers[b], *m = &at_max->buffers[b];
        if (x->kind != m->kind || x->kept != m->kept) {
            snprintf(why, why_size, "buffer %d is of another kind", b);
            ok = false;
        } else if (x->kind == KBUF_TEMP) {
            int first = x->first < 0 ? 0 : x->first, last = x->first < 0 ? 0 : x->last;
            if (first != m->first || last != m->last) {
                snprintf(why, why_size, "temp %d lives over other kernels", b);
                ok = false;
            } else if (aligned_size(x) > aligned_size(m)) {
                snprintf(why, why_size, "temp %d needs %lld bytes, more than its %lld at the maxima", b,
                         (long long)aligned_size(x), (long long)aligned_size(m));
                ok = false;
            } else {
                sweep[nt++] = (place_key){.size = aligned_size(x), .first = first, .buffer = b};
            }
        }
    }
    /* Temps live at the same time (a sweep in order of first kernel) must not overlap at kp's
     * sizes unless one overwrites the other in place in kp too. */
    qsort(sweep, (size_t)nt, sizeof *sweep, by_first_cmp);
    for (int a = 0; a < nt && ok; a++) {
        int ba = sweep[a].buffer;
        int64_t oa = at_max->buffers[ba].offset, last = at_max->buffers[ba].last;
        for (int b = a + 1; b < nt && sweep[b].first <= last && ok; b++) {
            int bb = sweep[b].buffer;
            int64_t ob = at_max->buffers[bb].offset;
            if (oa < ob + sweep[b].size && ob < oa + sweep[a].size && !in_place(kp, ba, bb) && !in_place(kp, bb, ba)) {
                snprintf(why, why_size, "temps %d and %d share memory but are not in place at these sizes", ba, bb);
                ok = false;
            }
        }
    }
    free(sweep);
    if (!ok)
        return false;
    int64_t unplanned = 0;
    for (int b = 0; b < n; b++) {
        kir_buffer *x = &kp->buffers[b];
        if (x->kind != KBUF_TEMP)
            continue;
        if (x->first < 0)
            x->first = x->last = 0;
        x->offset = at_max->buffers[b].offset;
        if (mc_add_overflows(unplanned, aligned_size(x), &unplanned))
            unplanned = INT64_MAX / 2;
    }
    kp->unplanned_bytes = unplanned;
    kp->arena_bytes = at_max->arena_bytes;
    return true;
}

