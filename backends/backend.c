/* What the backend interface gives every backend besides the structures: the one way to tell
 * the user something that is not an error (the library never prints).
 */
#include "backends/backend.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mc_status mc_program_prep_params(mc_program *p)
{
    const kir_program *kp = p->kp;
    if (!kp || kp->nprep == 0 || !p->backend || !p->backend->prep)
        return MC_OK;
    for (int b = 0; b < kp->nbuffers && !p->prep_due; b++)
        if (kp->buffers[b].prep_read && ((p->dirty && p->dirty[b]) || (p->external && p->external[b])))
            p->prep_due = true;
    if (!p->prep_due)
        return MC_OK;
    mc_status st = p->backend->prep(p);
    if (st != MC_OK)
        return st;
    p->prep_due = false;
    p->preps++;
    return MC_OK;
}

void mc_program_note(mc_program *p, const char *fmt, ...)
{
    if (!p || p->opt.quiet)
        return;
    char note[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(note, sizeof note, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = strlen(note);
    /* Kept best-effort: a note that finds no memory is still handed to the callback. */
    char *grown = realloc(p->notes, p->notes_len + len + 2);
    if (grown) {
        memcpy(grown + p->notes_len, note, len);
        grown[p->notes_len + len] = '\n';
        grown[p->notes_len + len + 1] = '\0';
        p->notes = grown;
        p->notes_len += len + 1;
    }
    if (p->opt.note)
        p->opt.note(p->opt.note_ctx, note);
}

bool mc_profile_place_runs(mc_profile_event *ev, int n, int iters, const double *host, double *span)
{
    if (iters < 1)
        return false;
    double origin = host ? host[0] : INFINITY;
    for (int e = 0; e < n; e++)
        origin = ev[e].start_us < origin ? ev[e].start_us : origin;
    if (!isfinite(origin))
        origin = 0;
    for (int i = 0; i < iters; i++) { /* the kernels' extent of each run (empty: +inf, -inf) */
        span[2 * i] = INFINITY;
        span[2 * i + 1] = -INFINITY;
    }
    for (int e = 0; e < n; e++) {
        ev[e].start_us -= origin;
        ev[e].end_us -= origin;
        int r = ev[e].run;
        if (r < 0 || r >= iters)
            continue;
        span[2 * r] = ev[e].start_us < span[2 * r] ? ev[e].start_us : span[2 * r];
        span[2 * r + 1] = ev[e].end_us > span[2 * r + 1] ? ev[e].end_us : span[2 * r + 1];
    }
    bool agree = host != NULL;
    for (int i = 0; i < iters && agree; i++) {
        double a = host[2 * i] - origin, b = host[2 * i + 1] - origin;
        agree = b >= a && (span[2 * i] > span[2 * i + 1] || /* no kernels: nothing to disagree */
                           (span[2 * i] >= a - 1.0 && span[2 * i + 1] <= b + 1.0));
    }
    for (int i = 0; i < iters; i++) {
        double a = span[2 * i], b = span[2 * i + 1];
        if (agree) {
            double ha = host[2 * i] - origin, hb = host[2 * i + 1] - origin;
            a = a < ha ? a : ha;
            b = b > hb ? b : hb;
        } else if (a > b) { /* a run without kernels: where the run before it ended */
            a = b = i > 0 ? span[2 * i - 1] : 0;
        }
        span[2 * i] = a;
        span[2 * i + 1] = b;
    }
    return agree;
}

void mc_program_phase(mc_program *p, const char *name, double *since)
{
    double now = mc_now_ms();
    double ms = now - *since;
    *since = now;
    if (!p)
        return;
    int i = 0;
    while (i < p->ncompile_phases && strcmp(p->compile_phases[i].name, name) != 0)
        i++;
    if (i == p->ncompile_phases) {
        if (i == MC_MAX_COMPILE_PHASES)
            i--; /* full: the last phase takes the rest */
        else {
            p->ncompile_phases++;
            snprintf(p->compile_phases[i].name, sizeof p->compile_phases[i].name, "%s", name);
            p->compile_phases[i].ms = 0;
        }
    }
    p->compile_phases[i].ms += ms;
}

static void host_arena_release(mc_shared_arena *a)
{
    free(a->owner);
    a->owner = NULL;
    a->addr = 0;
}

void *mc_shared_arena_host(mc_shared_arena *a)
{
    if (!a->addr) {
        char *m = (uint64_t)a->bytes < SIZE_MAX - 128 ? calloc((size_t)a->bytes + 64, 1) : NULL;
        if (!m) {
            a->failed = true;
            mc_fail(MC_ERR_SYSTEM, "out of memory: the intermediates planned at the maxima need %lld bytes",
                    (long long)a->bytes);
            return NULL;
        }
        a->owner = m;
        a->addr = ((uintptr_t)m + 63) & ~(uintptr_t)63;
        a->allocations++;
        a->release = host_arena_release;
    }
    return (void *)(uintptr_t)a->addr;
}
