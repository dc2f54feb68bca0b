/* Tensor-parallel programs (mc_options.devices >= 1, docs/PARALLEL.md): one program per rank,
 * run together.
 *
 * A parallel program holds the user's graph and no kernels, like a symbolic one
 * (runtime/symbolic.c): runtime/program.c's public functions hand it here. Compiling makes the
 * sharding plan (passes/shard.c), then rank r's graph, and compiles each as an ordinary program
 * of the same backend with rank r, the number of ranks and one host communicator shared by all
 * (backends/comm.h) set before the backend prepares it; on cuda rank r gets GPU r
 * (mc_options.device). Once every rank is prepared, the backend's comm_init slot (if any) sees
 * them all (NCCL's communicators are made there).
 *
 * Values: binding a declaration of the parent (checked against the user's declaration by
 * program.c, as for any program) splits it for every rank: a param into rank r's part
 * (mc_shard_param_slice; a replicated one whole), an input whole. The parent keeps the value
 * it was given (mc_program.unread) for mc_program_save_inputs. The generator fills the FULL
 * value of each declaration not bound, then splits it, so a sharded run computes from exactly
 * the values of the unsharded run with the same seed.
 *
 * A run runs every rank at once: rank 0 on the calling thread, every other rank on a thread
 * started for this run. A rank that fails aborts the communicator so that the others stop
 * waiting for it; the first real failure (not "another rank failed") is reported. The outputs
 * are rank 0's (every rank holds the same values: outputs are never split).
 *
 * A rank program's parent is the parallel program; mc_program_run on a rank (what the
 * profiler and the timers call, given mc_program_ran's rank 0) runs the whole group, so rank 0
 * can be profiled while every rank runs.
 *
 * The parent's mutex is held by every call here; the ranks are only used under it (the rank
 * threads of one run touch only their own rank).
 */
#include "runtime/runtime.h"

#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "runtime/profile.h"

struct mc_parallel {
    mc_shard_plan *plan;
    int n;
    mc_program **ranks;
    mc_comm *comm;
    bool comm_ready;      /* comm_init succeeded (comm_release is owed either way) */
    bool *given;          /* per node of p->graph: a declaration the caller bound */
};


/* The plan's notes, one program note per line. */
static void plan_notes(mc_program *p, const mc_shard_plan *plan)
{
    const char *notes = mc_shard_plan_notes(plan);
    while (notes && *notes) {
        size_t len = strcspn(notes, "\n");
        if (len > 0)
            mc_program_note(p, "tensor parallel: %.*s", (int)len, notes);
        notes += len + (notes[len] == '\n');
    }
}

mc_status mc_parallel_new(mc_program *p)
{
    int n = p->opt.devices;
    if (mc_graph_num_syms(p->graph) > 0)
        return mc_fail(MC_ERR_INPUT, "--devices %d: graph '%s' has symbolic dimensions; tensor parallelism "
                       "needs static shapes (bind them with --dim first)", n, p->graph->name ? p->graph->name : "");
    mc_parallel *par = calloc(1, sizeof *par);
    if (!par)
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    p->par = par;
    par->n = n;
    par->ranks = calloc((size_t)n, sizeof *par->ranks);
    par->given = calloc((size_t)(p->graph->nnodes > 0 ? p->graph->nnodes : 1), sizeof *par->given);
    if (!par->ranks || !par->given)
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    double t = mc_now_ms();
    mc_status st = mc_shard_plan_make(p->graph, n, &par->plan);
    if (st != MC_OK)
        return st;
    mc_program_phase(p, "sharding plan", &t);
    if ((st = mc_comm_new(n, &par->comm)) != MC_OK)
        return st;
    plan_notes(p, par->plan);
    /* The CPU threads (the caller's number, else one per core) are shared out among the
     * ranks: each rank's pool runs beside the others'. */
    int threads = p->opt.threads;
    if (p->backend->runs_on_host) {
        threads = (threads > 0 ? threads : mc_threadpool_default_threads()) / n;
        if (threads < 1)
            threads = 1;
    }
    int kernels = 0;
    for (int r = 0; r < n && st == MC_OK; r++) {
        mc_graph *rg = NULL;
        st = mc_shard_graph(p->graph, par->plan, r, &rg);
        mc_program_phase(p, "shard graphs", &t);
        if (st != MC_OK)
            break;
        mc_options o = p->opt;
        o.backend = mc_program_backend_kind(p);
        o.devices = 0;
        o.device = r;
        o.threads = threads;
        o.note = mc_program_forward_note; /* rank 0's notes are the program's; the others' repeat them */
        o.note_ctx = p;
        o.quiet = p->opt.quiet || r > 0;
        st = mc_program_compile_rank(rg, &o, p, r, n, par->comm, &par->ranks[r]);
        mc_graph_free(rg);
        if (st == MC_OK) {
            kernels += par->ranks[r]->kernels_compiled;
            mc_program_phase(p, "compile ranks", &t);
        }
    }
    if (st == MC_OK && p->backend->comm_init) {
        st = p->backend->comm_init(par->ranks, n);
        par->comm_ready = st == MC_OK;
        mc_program_phase(p, "communicators", &t);
    }
    if (st != MC_OK)
        return st;
    p->kernels_compiled = kernels;
    mc_program_note(p, "tensor parallel: %d rank%s on the %s backend, %d all-reduce%s per rank", n, n == 1 ? "" : "s",
                    p->backend->name, mc_shard_plan_allreduces(par->plan),
                    mc_shard_plan_allreduces(par->plan) == 1 ? "" : "s");
    return MC_OK;
}

void mc_parallel_free(mc_program *p)
{
    mc_parallel *par = p->par;
    if (!par)
        return;
    bool all = par->ranks != NULL;
    for (int r = 0; all && r < par->n; r++)
        all = par->ranks[r] != NULL;
    /* comm_release sees every rank that was prepared: owed once comm_init may have run */
    if (all && p->backend->comm_release)
        p->backend->comm_release(par->ranks, par->n);
    for (int r = 0; par->ranks && r < par->n; r++)
        mc_program_free(par->ranks[r]);
    free(par->ranks);
    mc_comm_free(par->comm);
    if (par->plan)
        mc_shard_plan_free(par->plan);
    free(par->given);
    free(par);
    p->par = NULL;
}

mc_program *mc_parallel_rank(const mc_program *p, int rank)
{
    return p->par && rank >= 0 && rank < p->par->n ? p->par->ranks[rank] : NULL;
}

/* ---- values ------------------------------------------------------------------------------- */

/* Declaration `node`'s full value to every rank that declares it: a param split, an input
 * whole. */
static mc_status split(mc_program *p, int node, const void *data, size_t bytes)
{
    mc_parallel *par = p->par;
    const mc_node *n = &p->graph->nodes[node];
    void *part = NULL;
    mc_status st = MC_OK;
    for (int r = 0; r < par->n && st == MC_OK; r++) {
        mc_program *rank = par->ranks[r];
        bool declared = false;
        for (int i = 0; i < rank->graph->nnodes && !declared; i++) {
            const mc_node *m = &rank->graph->nodes[i];
            declared = (m->op == MC_OP_INPUT || m->op == MC_OP_PARAM) && m->name && !strcmp(m->name, n->name);
        }
        if (!declared) /* the rank's graph does not read it */
            continue;
        if (n->op == MC_OP_INPUT) {
            st = mc_program_set(rank, n->name, data, bytes);
            continue;
        }
        size_t want = mc_shard_param_bytes(par->plan, p->graph, node, r);
        void *grown = realloc(part, want ? want : 1);
        if (!grown) {
            st = mc_fail(MC_ERR_SYSTEM, "out of memory (%zu bytes)", want);
            break;
        }
        part = grown;
        mc_shard_param_slice(par->plan, p->graph, node, r, data, part);
        st = mc_program_set(rank, n->name, part, want);
    }
    free(part);
    return st;
}

mc_status mc_parallel_bind(mc_program *p, int node, const void *data, size_t bytes)
{
    mc_status st = split(p, node, data, bytes);
    if (st == MC_OK)
        p->par->given[node] = true;
    return st;
}

mc_status mc_parallel_fill_random(mc_program *p, uint64_t seed)
{
    mc_parallel *par = p->par;
    void *full = NULL;
    mc_status st = MC_OK;
    for (int i = 0; i < p->graph->nnodes && st == MC_OK; i++) {
        const mc_node *n = &p->graph->nodes[i];
        if ((n->op != MC_OP_INPUT && n->op != MC_OP_PARAM) || par->given[i])
            continue;
        int64_t numel = mc_node_numel(n), bytes;
        if (mc_mul_overflows(numel, (int64_t)mc_dtype_size(n->dtype), &bytes) || (uint64_t)bytes > SIZE_MAX)
            return mc_fail(MC_ERR_INPUT, "%s '%s' is too large", n->op == MC_OP_PARAM ? "param" : "input", n->name);
        void *grown = realloc(full, bytes ? (size_t)bytes : 1);
        if (!grown) {
            st = mc_fail(MC_ERR_SYSTEM, "out of memory (%lld bytes)", (long long)bytes);
            break;
        }
        full = grown;
        mc_fill_random(full, n->dtype, numel, seed, n->name);
        st = split(p, i, full, (size_t)bytes);
    }
    free(full);
    if (st == MC_OK) {
        p->seeded = true;
        p->seed = seed;
    }
    return st;
}

/* ---- running ------------------------------------------------------------------------------ */

typedef struct rank_run {
    mc_program *program;
    mc_comm *comm;
    mc_status status;
    char message[1024]; /* the rank thread's error message (messages are per thread) */
} rank_run;

static void *run_rank(void *arg)
{
    rank_run *r = arg;
    r->status = mc_program_run_rank(r->program);
    if (r->status != MC_OK) {
        snprintf(r->message, sizeof r->message, "%s", mc_error_message());
        mc_comm_abort(r->comm); /* the others may be waiting for this rank in a collective */
    }
    return NULL;
}

mc_status mc_parallel_run(mc_program *p)
{
    mc_parallel *par = p->par;
    int n = par->n;
    rank_run *runs = calloc((size_t)n, sizeof *runs);
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    bool *started = calloc((size_t)n, sizeof *started);
    if (!runs || !threads || !started) {
        free(runs);
        free(threads);
        free(started);
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    }
    mc_status st = MC_OK;
    for (int r = 0; r < n; r++)
        runs[r] = (rank_run){.program = par->ranks[r], .comm = par->comm};
    for (int r = 1; r < n; r++) {
        if (pthread_create(&threads[r], NULL, run_rank, &runs[r]) != 0) {
            runs[r].status = mc_fail(MC_ERR_SYSTEM, "cannot start the thread of rank %d", r);
            snprintf(runs[r].message, sizeof runs[r].message, "%s", mc_error_message());
            mc_comm_abort(par->comm);
            break;
        }
        started[r] = true;
    }
    run_rank(&runs[0]);
    for (int r = 1; r < n; r++)
        if (started[r])
            pthread_join(threads[r], NULL);
    /* the first failure that is not a consequence of another rank's */
    int failed = -1;
    for (int r = 0; r < n; r++)
        if (runs[r].status != MC_OK && (failed < 0 || (strstr(runs[failed].message, "another rank failed") &&
                                                       !strstr(runs[r].message, "another rank failed"))))
            failed = r;
    if (failed >= 0) {
        st = n > 1 ? mc_fail(runs[failed].status, "rank %d of %d: %s", failed, n, runs[failed].message)
                   : mc_fail(runs[failed].status, "%s", runs[failed].message);
        mc_comm_reset(par->comm);
    }
    free(runs);
    free(threads);
    free(started);
    if (st == MC_OK)
        p->runs++;
    return st;
}

/* ---- timing and profiling every rank at once ----------------------------------------------- */

/* A backend's own timers (`time`, `profile`: CUDA events, CUPTI) time the program they are given,
 * but a collective completes only when every rank takes part: they are called on every rank at
 * once, each rank executing the same runs. */
typedef struct rank_timer {
    mc_program *program;
    mc_comm *comm;
    int iters;
    mc_profile *prof;   /* profile into it; NULL: time */
    double median_us;
    mc_status status;
    char message[1024];
} rank_timer;

static void *time_rank(void *arg)
{
    rank_timer *r = arg;
    mc_program *p = r->program;
    r->status = r->prof ? p->backend->profile(p, r->iters, r->prof)
                        : p->backend->time(p, r->iters, &r->median_us);
    if (r->status != MC_OK) {
        snprintf(r->message, sizeof r->message, "%s", mc_error_message());
        mc_comm_abort(r->comm);
    }
    return NULL;
}

mc_status mc_parallel_time(mc_program *p, int iters, mc_profile *prof, double *median_us)
{
    mc_parallel *par = p->par;
    int n = par->n;
    rank_timer *t = calloc((size_t)n, sizeof *t);
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    mc_profile *own = calloc((size_t)n, sizeof *own); /* the profiles of ranks 1.., dropped */
    bool *started = calloc((size_t)n, sizeof *started);
    mc_status st = t && threads && own && started ? MC_OK : mc_fail(MC_ERR_SYSTEM, "out of memory");
    for (int r = 0; r < n && st == MC_OK; r++) {
        t[r] = (rank_timer){.program = par->ranks[r], .comm = par->comm, .iters = iters};
        if (prof && r == 0)
            t[r].prof = prof;
        else if (prof && (st = mc_profile_init(&own[r], par->ranks[r])) == MC_OK)
            t[r].prof = &own[r];
    }
    for (int r = 1; r < n && st == MC_OK; r++) {
        if (pthread_create(&threads[r], NULL, time_rank, &t[r]) != 0) {
            st = mc_fail(MC_ERR_SYSTEM, "cannot start the thread of rank %d", r);
            mc_comm_abort(par->comm);
            break;
        }
        started[r] = true;
    }
    if (st == MC_OK)
        time_rank(&t[0]);
    for (int r = 1; r < n; r++)
        if (started[r])
            pthread_join(threads[r], NULL);
    int failed = -1;
    for (int r = 0; r < n && st == MC_OK && t; r++)
        if (t[r].status != MC_OK && failed < 0)
            failed = r;
    if (failed >= 0) {
        st = mc_fail(t[failed].status, "rank %d of %d: %s", failed, n, t[failed].message);
        mc_comm_reset(par->comm);
    }
    /* the slowest rank's median: a run ends when its last rank does */
    if (st == MC_OK && median_us) {
        *median_us = 0;
        for (int r = 0; r < n; r++)
            if (t[r].median_us > *median_us)
                *median_us = t[r].median_us;
    }
    for (int r = 1; r < n && own; r++)
        if (t && t[r].prof == &own[r])
            mc_profile_release(&own[r]);
    free(t);
    free(threads);
    free(own);
    free(started);
    return st;
}
