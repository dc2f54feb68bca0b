/* A persistent pool of worker threads for the CPU backend.
 *
 * Threads start once, when a program is prepared, and live until it is freed: a kernel launch is
 * a write of (function, context, range, chunk) and the publication of a new job word, never a
 * thread start. The caller takes part as thread 0, so a pool of n threads starts n - 1 workers
 * and a pool of one runs everything inline with no synchronization at all.
 *
 * Every job is cut into chunks that any thread may take: `grain` indices each, or, for grain
 * <= 0, one balanced contiguous range per thread. Chunks are claimed from one 64-bit word, the
 * job's number in the high 32 bits and the next unclaimed index in the low 32, by compare-and-
 * swap, and the caller waits until every index has been *completed*, not until every worker
 * has reported. So a worker that is slow to wake (descheduled on a machine whose other core
 * is busy, or asleep) costs nothing: the caller takes its chunks, and the job is done when the
 * work is; a late worker finds the job number changed or no index left and goes back to wait.
 * A claim succeeds only while its job is still the current one, so a late worker never runs a
 * chunk of a job it did not read: the job's fields are atomics (reading them late is harmless),
 * a claim is a compare-and-swap of the word it read before them, and the caller closes a job
 * (index all ones) once every index is claimed, before it writes the next job's fields.
 *
 * Idle workers spin briefly on the job word (a launch costs well under a microsecond when
 * kernels follow each other) and then sleep on a condition variable, so a pool that waits
 * between runs costs no CPU time on a shared machine. The caller, waiting for chunks other
 * threads hold, spins and then yields its core, which lets a preempted worker finish sooner.
 *
 * One caller at a time: a pool belongs to one program, whose mutex serialises its runs (debug
 * builds assert it; two callers would reset each other's counters and wait forever).
 */
#include "support/support.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { SPIN_ITERATIONS = 4000, WAIT_SPINS_BEFORE_YIELD = 4000 };

#define INDEX_BITS 32
#define INDEX_MASK ((UINT64_C(1) << INDEX_BITS) - 1)

struct mc_threadpool {
    int nthreads;              /* including the caller */
    pthread_t *workers;        /* nthreads - 1 */
    int started;               /* workers actually started */
    pthread_mutex_t lock;
    pthread_cond_t wake;       /* workers sleep here between jobs */
    atomic_int sleepers;       /* workers waiting on `wake` (or about to) */
    atomic_uint_fast64_t word; /* job number << 32 | next unclaimed index */
    atomic_int_fast64_t completed; /* indices of the current job that have run */
    atomic_bool quit;
    /* the current job, written before its word is published */
    _Atomic(mc_parallel_fn) fn;
    _Atomic(void *) ctx;
    atomic_int_fast64_t n, chunk;
#ifndef NDEBUG
    atomic_bool running;       /* a caller is in mc_threadpool_run (debug builds check: one) */
#endif
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

/* Take and run chunks of job `job` as thread t until none is left or the job is no longer the
 * current one. */
static void take_chunks(mc_threadpool *pool, uint64_t job, int t)
{
    for (;;) {
        uint64_t w = atomic_load(&pool->word);
        if (w >> INDEX_BITS != job)
            return;
        int64_t begin = (int64_t)(w & INDEX_MASK);
        int64_t n = atomic_load_explicit(&pool->n, memory_order_relaxed);
        int64_t chunk = atomic_load_explicit(&pool->chunk, memory_order_relaxed);
        mc_parallel_fn fn = atomic_load_explicit(&pool->fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&pool->ctx, memory_order_relaxed);
        if (begin >= n)
            return;
        int64_t end = begin + chunk < n ? begin + chunk : n;
        /* the claim succeeds only if the word did not move since it was read: then the job
         * was current (and its fields the ones read) all along */
        if (!atomic_compare_exchange_weak(&pool->word, &w, (job << INDEX_BITS) | (uint64_t)end))
            continue;
        fn(ctx, begin, end, t);
        atomic_fetch_add(&pool->completed, end - begin);
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
        uint64_t job = atomic_load(&pool->word) >> INDEX_BITS;
        for (int spin = 0; job == seen && spin < SPIN_ITERATIONS && !atomic_load(&pool->quit); spin++) {
            cpu_relax();
            job = atomic_load(&pool->word) >> INDEX_BITS;
        }
        if (job == seen) {
            pthread_mutex_lock(&pool->lock);
            atomic_fetch_add(&pool->sleepers, 1);
            while ((job = atomic_load(&pool->word) >> INDEX_BITS) == seen && !atomic_load(&pool->quit))
                pthread_cond_wait(&pool->wake, &pool->lock);
            atomic_fetch_sub(&pool->sleepers, 1);
            pthread_mutex_unlock(&pool->lock);
        }
        if (atomic_load(&pool->quit))
            return NULL;
        seen = job;
        take_chunks(pool, job, index);
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
    if (threads > MC_MAX_THREADS)
        return mc_fail(MC_ERR_INPUT, "thread count %d is too large (at most %d)", threads, MC_MAX_THREADS);
    mc_threadpool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return mc_fail(MC_ERR_SYSTEM, "out of memory creating a thread pool");
    pool->nthreads = threads;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    atomic_init(&pool->sleepers, 0);
    atomic_init(&pool->word, 0);
    atomic_init(&pool->completed, 0);
    atomic_init(&pool->quit, false);
    atomic_init(&pool->fn, NULL);
    atomic_init(&pool->ctx, NULL);
    atomic_init(&pool->n, 0);
    atomic_init(&pool->chunk, 1);
#ifndef NDEBUG
    atomic_init(&pool->running, false);
#endif
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
    int threads = pool ? pool->nthreads : 1;
    int64_t chunk = grain > 0 ? grain : (n + threads - 1) / threads;
    /* one chunk, one thread, a pool that did not fully start, or more indices than the job
     * word holds: run it here */
    if (!pool || threads <= 1 || chunk >= n || pool->started < threads - 1 || (uint64_t)n >= INDEX_MASK) {
        fn(ctx, 0, n, 0);
        return;
    }
#ifndef NDEBUG
    /* one caller at a time (the program's mutex sees to it): two would reset each other's
     * counters and wait forever */
    MC_ASSERT(!atomic_exchange(&pool->running, true));
#endif
    uint64_t job = ((atomic_load(&pool->word) >> INDEX_BITS) + 1) & INDEX_MASK;
    if (job == 0)
        job = 1; /* 0 is what workers start out having seen */
    atomic_store_explicit(&pool->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&pool->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&pool->n, n, memory_order_relaxed);
    atomic_store_explicit(&pool->chunk, chunk, memory_order_relaxed);
    atomic_store(&pool->completed, 0);
    atomic_store(&pool->word, job << INDEX_BITS); /* publishes the fields above */
    if (atomic_load(&pool->sleepers) > 0) {
        pthread_mutex_lock(&pool->lock);
        pthread_cond_broadcast(&pool->wake);
        pthread_mutex_unlock(&pool->lock);
    }
    take_chunks(pool, job, 0);
    /* every index is claimed: close the job, so that no late claim can succeed once the
     * fields are rewritten for the next one (a claim from (job, n) would otherwise match) */
    atomic_store(&pool->word, (job << INDEX_BITS) | INDEX_MASK);
    for (int spin = 0; atomic_load(&pool->completed) < n; spin++) {
        if (spin < WAIT_SPINS_BEFORE_YIELD)
            cpu_relax();
        else
            sched_yield();
    }
#ifndef NDEBUG
    atomic_store(&pool->running, false);
#endif
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
