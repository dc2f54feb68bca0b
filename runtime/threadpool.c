/* A persistent pool of worker threads for the CPU backend.
 *
 * Threads start once, when a program is prepared, and live until it is freed: a kernel launch is
 * a write of (function, context, range) and a generation bump, never a thread start. The caller
 * takes part as thread 0, so a pool of n threads starts n - 1 workers and a pool of one runs
 * everything inline with no synchronization at all.
 *
 * Work is split in one of two ways. Static: [0, n) in `threads` contiguous, balanced ranges, one
 * per thread (pointwise and reduction kernels, whose rows cost the same). Dynamic: threads take
 * `grain`-sized chunks from an atomic counter until none are left (GEMM tiles, whose costs vary
 * at the edges). Idle workers spin briefly on the generation counter (a launch costs a few
 * hundred nanoseconds when kernels follow each other) and then sleep on a condition variable, so
 * a pool that waits between runs costs no CPU time on a shared machine.
 */
#include "runtime.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { SPIN_ITERATIONS = 20000 };

struct mc_threadpool {
    int nthreads;              /* including the caller */
    pthread_t *workers;        /* nthreads - 1 */
    int started;               /* workers actually started */
    pthread_mutex_t lock;
    pthread_cond_t wake;       /* workers sleep here between jobs */
    atomic_uint_fast64_t generation; /* bumped once per job */
    atomic_int pending;        /* workers still running the current job */
    atomic_int_fast64_t next;  /* dynamic split: the next unclaimed index */
    atomic_bool quit;
    /* the current job (written before `generation` is bumped) */
    mc_parallel_fn fn;
    void *ctx;
    int64_t n, grain;
};

typedef struct worker_arg {
    mc_threadpool *pool;
    int index;
} worker_arg;

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Thread `t`'s part of the current job. */
static void run_share(mc_threadpool *pool, int t)
{
    if (pool->grain <= 0) {
        int64_t per = pool->n / pool->nthreads, extra = pool->n % pool->nthreads;
        int64_t begin = t * per + (t < extra ? t : extra);
        int64_t end = begin + per + (t < extra ? 1 : 0);
        if (begin < end)
            pool->fn(pool->ctx, begin, end, t);
        return;
    }
    for (;;) {
        int64_t begin = atomic_fetch_add(&pool->next, pool->grain);
        if (begin >= pool->n)
            return;
        int64_t end = begin + pool->grain < pool->n ? begin + pool->grain : pool->n;
        pool->fn(pool->ctx, begin, end, t);
    }
}

static void *worker_main(void *p)
{
    worker_arg *arg = p;
    mc_threadpool *pool = arg->pool;
    int index = arg->index;
    free(arg);
    uint64_t seen = 0;
    for (;;) {
        uint64_t gen = atomic_load(&pool->generation);
        for (int spin = 0; gen == seen && spin < SPIN_ITERATIONS && !atomic_load(&pool->quit); spin++) {
            cpu_relax();
            gen = atomic_load(&pool->generation);
        }
        if (gen == seen) {
            pthread_mutex_lock(&pool->lock);
            while ((gen = atomic_load(&pool->generation)) == seen && !atomic_load(&pool->quit))
                pthread_cond_wait(&pool->wake, &pool->lock);
            pthread_mutex_unlock(&pool->lock);
        }
        if (atomic_load(&pool->quit))
            return NULL;
        seen = gen;
        run_share(pool, index);
        atomic_fetch_sub(&pool->pending, 1);
    }
}

int mc_threadpool_default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0 && CPU_COUNT(&set) < n)
        n = CPU_COUNT(&set);
    return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

mc_status mc_threadpool_new(int threads, mc_threadpool **out)
{
    *out = NULL;
    if (threads < 0)
        return mc_fail(MC_ERR_INPUT, "thread count must not be negative (got %d)", threads);
    if (threads == 0)
        threads = mc_threadpool_default_threads();
    if (threads > 1024)
        return mc_fail(MC_ERR_INPUT, "thread count %d is too large (at most 1024)", threads);
    mc_threadpool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return mc_fail(MC_ERR_SYSTEM, "out of memory creating a thread pool");
    pool->nthreads = threads;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->pending, 0);
    atomic_init(&pool->next, 0);
    atomic_init(&pool->quit, false);
    if (threads > 1) {
        pool->workers = calloc((size_t)threads - 1, sizeof *pool->workers);
        if (!pool->workers) {
            mc_threadpool_free(pool);
            return mc_fail(MC_ERR_SYSTEM, "out of memory creating a thread pool");
        }
        for (int i = 1; i < threads; i++) {
            worker_arg *arg = malloc(sizeof *arg);
            if (arg) {
                arg->pool = pool;
                arg->index = i;
            }
            int err = arg ? pthread_create(&pool->workers[i - 1], NULL, worker_main, arg) : ENOMEM;
            if (err) {
                free(arg);
                mc_threadpool_free(pool);
                return mc_fail(MC_ERR_SYSTEM, "cannot start a worker thread: %s", strerror(err));
            }
            pool->started++;
        }
    }
    *out = pool;
    return MC_OK;
}

int mc_threadpool_size(const mc_threadpool *pool) { return pool ? pool->nthreads : 1; }

void mc_threadpool_run(mc_threadpool *pool, int64_t n, int64_t grain, mc_parallel_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    int useful = pool ? pool->nthreads : 1;
    if (grain > 0 && (n + grain - 1) / grain < useful)
        useful = (int)((n + grain - 1) / grain);
    if (grain <= 0 && n < useful)
        useful = (int)n;
    if (!pool || useful <= 1 || pool->started < pool->nthreads - 1) {
        fn(ctx, 0, n, 0);
        return;
    }
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n = n;
    pool->grain = grain;
    atomic_store(&pool->next, 0);
    atomic_store(&pool->pending, pool->nthreads - 1);
    pthread_mutex_lock(&pool->lock);
    atomic_fetch_add(&pool->generation, 1);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    run_share(pool, 0);
    while (atomic_load(&pool->pending) > 0)
        cpu_relax();
}

void mc_threadpool_free(mc_threadpool *pool)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->lock);
    atomic_store(&pool->quit, true);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 0; i < pool->started; i++)
        pthread_join(pool->workers[i], NULL);
    pthread_mutex_destroy(&pool->lock);
    pthread_cond_destroy(&pool->wake);
    free(pool->workers);
    free(pool);
}
