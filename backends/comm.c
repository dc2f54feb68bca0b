/* The host communicator (backends/comm.h): a barrier and an all-reduce for ranks that are
 * threads of one process.
 *
 * The barrier counts arrivals under a mutex and lets everyone go when the last rank arrives,
 * bumping a generation number so that a rank that hurries into the next barrier cannot be
 * mistaken for a late one of this barrier.
 *
 * The all-reduce publishes each rank's arrays, meets at a barrier, then splits the elements
 * into n contiguous shares: rank r reads every rank's input over share r, sums them in rank
 * order and writes the sum into every rank's output. Each element is summed once, by one
 * thread, so every rank gets the same bits, and an element is read and written by the same
 * rank, so in == out (in place) is safe. A second barrier keeps every rank until all shares
 * are written. The sum starts from rank 0's value (a sum over one rank is rank 0's value,
 * -0 included) and adds the others in f32 (i32 for i32, wrapping), as NCCL sums on a GPU.
 */
#include "backends/comm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct comm_slot {
    const void *in;
    void *out;
    int64_t count;
    mc_dtype dtype;
} comm_slot;

struct mc_comm {
    int n;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int arrived;         /* ranks inside the current barrier */
    uint64_t generation; /* barriers completed */
    bool aborted;
    comm_slot *slots;    /* per rank: its arrays of the collective in progress */
};

mc_status mc_comm_new(int n, mc_comm **out)
{
    *out = NULL;
    if (n < 1)
        return mc_fail(MC_ERR_INPUT, "a communicator needs at least one rank (got %d)", n);
    mc_comm *c = calloc(1, sizeof *c);
    if (!c || !(c->slots = calloc((size_t)n, sizeof *c->slots))) {
        free(c);
        return mc_fail(MC_ERR_SYSTEM, "out of memory creating a communicator of %d ranks", n);
    }
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c->slots);
        free(c);
        return mc_fail(MC_ERR_SYSTEM, "cannot create the communicator's mutex");
    }
    if (pthread_cond_init(&c->wake, NULL) != 0) {
        pthread_mutex_destroy(&c->lock);
        free(c->slots);
        free(c);
        return mc_fail(MC_ERR_SYSTEM, "cannot create the communicator's condition variable");
    }
    c->n = n;
    *out = c;
    return MC_OK;
}

void mc_comm_free(mc_comm *c)
{
    if (!c)
        return;
    pthread_cond_destroy(&c->wake);
    pthread_mutex_destroy(&c->lock);
    free(c->slots);
    free(c);
}

int mc_comm_size(const mc_comm *c)
{
    return c ? c->n : 0;
}

static mc_status aborted_error(int rank)
{
    return mc_fail(MC_ERR_SYSTEM, "rank %d: another rank failed, the collective was abandoned", rank);
}

mc_status mc_comm_barrier(mc_comm *c, int rank)
{
    pthread_mutex_lock(&c->lock);
    if (c->aborted) {
        pthread_mutex_unlock(&c->lock);
        return aborted_error(rank);
    }
    uint64_t mine = c->generation;
    if (++c->arrived == c->n) {
        c->arrived = 0;
        c->generation++;
        pthread_cond_broadcast(&c->wake);
    } else {
        while (c->generation == mine && !c->aborted)
            pthread_cond_wait(&c->wake, &c->lock);
    }
    bool failed = c->generation == mine; /* woken by an abort, not by the last arrival */
    pthread_mutex_unlock(&c->lock);
    return failed ? aborted_error(rank) : MC_OK;
}

void mc_comm_abort(mc_comm *c)
{
    pthread_mutex_lock(&c->lock);
    c->aborted = true;
    pthread_cond_broadcast(&c->wake);
    pthread_mutex_unlock(&c->lock);
}

bool mc_comm_aborted(mc_comm *c)
{
    pthread_mutex_lock(&c->lock);
    bool a = c->aborted;
    pthread_mutex_unlock(&c->lock);
    return a;
}

void mc_comm_reset(mc_comm *c)
{
    pthread_mutex_lock(&c->lock);
    c->aborted = false;
    c->arrived = 0;
    pthread_mutex_unlock(&c->lock);
}

static float load_f32(const void *data, mc_dtype d, int64_t i)
{
    switch (d) {
    case MC_F32: return ((const float *)data)[i];
    case MC_F16: return (float)mc_f16_to_double(((const uint16_t *)data)[i]);
    case MC_BF16: return (float)mc_bf16_to_double(((const uint16_t *)data)[i]);
    case MC_I32: case MC_BOOL: case MC_NUM_DTYPES: break;
    }
    return 0;
}

static void store_f32(void *data, mc_dtype d, int64_t i, float x)
{
    switch (d) {
    case MC_F32: ((float *)data)[i] = x; break;
    case MC_F16: ((uint16_t *)data)[i] = mc_f16_from_double(x); break;
    case MC_BF16: ((uint16_t *)data)[i] = mc_bf16_from_double(x); break;
    case MC_I32: case MC_BOOL: case MC_NUM_DTYPES: break;
    }
}

/* Sum elements [lo, hi) over every rank's input into every rank's output. */
static void reduce_share(const mc_comm *c, mc_dtype d, int64_t lo, int64_t hi)
{
    const comm_slot *s = c->slots;
    if (d == MC_I32) {
        for (int64_t i = lo; i < hi; i++) {
            uint32_t acc = (uint32_t)((const int32_t *)s[0].in)[i];
            for (int r = 1; r < c->n; r++)
                acc += (uint32_t)((const int32_t *)s[r].in)[i];
            for (int r = 0; r < c->n; r++)
                ((int32_t *)s[r].out)[i] = (int32_t)acc;
        }
        return;
    }
    if (d == MC_F32) {
        for (int64_t i = lo; i < hi; i++) {
            float acc = ((const float *)s[0].in)[i];
            for (int r = 1; r < c->n; r++)
                acc += ((const float *)s[r].in)[i];
            for (int r = 0; r < c->n; r++)
                ((float *)s[r].out)[i] = acc;
        }
        return;
    }
    for (int64_t i = lo; i < hi; i++) {
        float acc = load_f32(s[0].in, d, i);
        for (int r = 1; r < c->n; r++)
            acc += load_f32(s[r].in, d, i);
        for (int r = 0; r < c->n; r++)
            store_f32(s[r].out, d, i, acc);
    }
}

mc_status mc_comm_allreduce(mc_comm *c, int rank, const void *in, void *out, int64_t count,
                            mc_dtype dtype)
{
    if (!c || rank < 0 || rank >= c->n)
        return mc_fail(MC_ERR_INPUT, "all-reduce: rank %d is not a rank of the communicator", rank);
    pthread_mutex_lock(&c->lock);
    c->slots[rank] = (comm_slot){.in = in, .out = out, .count = count, .dtype = dtype};
    pthread_mutex_unlock(&c->lock);
    mc_status st = mc_comm_barrier(c, rank);
    if (st != MC_OK)
        return st;
    /* Every rank checks the same slots, so all fail together or none does. */
    for (int r = 0; r < c->n; r++)
        if (c->slots[r].count != count || c->slots[r].dtype != dtype || count < 0 ||
            dtype == MC_BOOL || (unsigned)dtype >= MC_NUM_DTYPES) {
            st = mc_fail(MC_ERR_INPUT, "all-reduce: rank %d gives %lld elements of %s, rank %d %lld of %s "
                         "(every rank must give the same count of a float or i32 dtype)",
                         rank, (long long)count, (unsigned)dtype < MC_NUM_DTYPES ? mc_dtype_name(dtype) : "?", r,
                         (long long)c->slots[r].count,
                         (unsigned)c->slots[r].dtype < MC_NUM_DTYPES ? mc_dtype_name(c->slots[r].dtype) : "?");
            break;
        }
    if (st == MC_OK) {
        int64_t lo = count / c->n * rank + (rank < count % c->n ? rank : count % c->n);
        int64_t hi = lo + count / c->n + (rank < count % c->n ? 1 : 0);
        reduce_share(c, dtype, lo, hi);
    }
    mc_status after = mc_comm_barrier(c, rank); /* no rank leaves before every share is written */
    return st != MC_OK ? st : after;
}
