/* Memory planning: intermediates share one arena by liveness.
 *
 * Requires: a lowered kir_program whose buffers know the first kernel that writes them and the
 * last that reads them. Changes: every KBUF_TEMP gets a byte offset in one arena; arena_bytes is
 * the arena's size and unplanned_bytes what a buffer each would need.
 *
 * Two temps may overlap in memory only when their live ranges [first, last] (in kernel order,
 * inclusive) are disjoint; a kernel that reads one temp and writes another never gets them at
 * the same address, so no kernel runs in place. Placement is greedy best-fit in the order of
 * decreasing size (the classic offset-assignment heuristic): each temp goes to the lowest
 * aligned offset that clashes with no already placed temp live at the same time. Offsets are
 * 256-byte aligned, enough for any vector load a backend may use.
 */
#include "passes.h"

#include <stdlib.h>

#define PLAN_ALIGN 256

static int64_t aligned_size(const kir_buffer *b)
{
    int64_t bytes;
    if (mc_mul_overflows(b->numel, (int64_t)mc_dtype_size(b->dtype), &bytes) ||
        mc_add_overflows(bytes, PLAN_ALIGN - 1, &bytes))
        return INT64_MAX / 4;
    return bytes / PLAN_ALIGN * PLAN_ALIGN;
}

static bool live_together(const kir_buffer *a, const kir_buffer *b)
{
    return a->first <= b->last && b->first <= a->last;
}

void mc_plan_memory(kir_program *kp, bool share)
{
    int n = kp->nbuffers, nt = 0;
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
            if (temps)
                temps[nt++] = b;
        }
    kp->unplanned_bytes = unplanned;
    if (!share || !temps) {
        kp->arena_bytes = unplanned; /* the offsets given above: one range each */
        free(temps);
        return;
    }
    /* Largest first (ties: earliest first), each at the lowest offset that fits. */
    for (int i = 1; i < nt; i++)
        for (int j = i; j > 0; j--) {
            const kir_buffer *a = &kp->buffers[temps[j - 1]], *b = &kp->buffers[temps[j]];
            int64_t sa = aligned_size(a), sb = aligned_size(b);
            if (sa > sb || (sa == sb && a->first <= b->first))
                break;
            int t = temps[j];
            temps[j] = temps[j - 1];
            temps[j - 1] = t;
        }
    for (int i = 0; i < nt; i++) {
        kir_buffer *buf = &kp->buffers[temps[i]];
        int64_t size = aligned_size(buf), offset = 0;
        for (bool moved = true; moved;) {
            moved = false;
            for (int j = 0; j < i; j++) {
                const kir_buffer *o = &kp->buffers[temps[j]];
                int64_t osize = aligned_size(o);
                if (live_together(buf, o) && offset < o->offset + osize && o->offset < offset + size) {
                    offset = o->offset + osize;
                    moved = true;
                }
            }
        }
        buf->offset = offset;
        if (offset + size > arena)
            arena = offset + size;
    }
    kp->arena_bytes = arena;
    free(temps);
}
