/* The host communicator (backends/comm.h) with N threads as ranks: the all-reduce's result is
 * the sum in rank order (f32 accumulation for f16 and bf16), bit for bit the same on every
 * rank, in place and out of place, for counts that do not divide by N (and 0); a rank that
 * aborts wakes the others with an error, and a reset communicator works again. Then the ref
 * and cpu backends' KIR_COLLECTIVE kernels (passes/lower.c's allreduce): a copy in an ordinary
 * program, the sum over the ranks when 1, 2 or 3 rank programs share a communicator and run on
 * a thread each. A hang fails through alarm() rather than the CTest timeout.
 */
#include "testlib.h"

#include "backends/comm.h"
#include "runtime/runtime.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_RANKS = 8, ROUNDS = 20 };

typedef struct job {
    mc_comm *comm;
    int rank, n;
    mc_dtype dtype;
    int64_t count;
    bool in_place;
    void *in, *out;        /* this rank's arrays */
    mc_status status[ROUNDS];
    bool abort_early;      /* rank aborts instead of joining (abort test) */
} job;

/* Rank r's element i in round t, a value that sums inexactly in f32 (so order matters). */
static double value(int r, int64_t i, int t)
{
    return ((double)((r * 7919 + i * 104729 + t * 31) % 2001) - 1000.0) / 7.0 + (r == 0 ? 1e7 : 0.0);
}

static void fill(job *j, int t)
{
    for (int64_t i = 0; i < j->count; i++)
        mc_store_element(j->in, j->dtype, i, value(j->rank, i, t) / (j->dtype == MC_F32 ? 1.0 : 1e5));
}

static void *rank_main(void *arg)
{
    job *j = arg;
    for (int t = 0; t < ROUNDS; t++) {
        fill(j, t);
        if (j->abort_early) {
            mc_comm_abort(j->comm);
            j->status[t] = MC_ERR_SYSTEM;
            break;
        }
        j->status[t] = mc_comm_allreduce(j->comm, j->rank, j->in, j->in_place ? j->in : j->out, j->count, j->dtype);
        if (j->status[t] != MC_OK)
            break;
        /* check this round's result now: the next round overwrites it */
        const void *res = j->in_place ? j->in : j->out;
        for (int64_t i = 0; i < j->count; i++) {
            float acc = 0;
            for (int r = 0; r < j->n; r++) {
                double v = value(r, i, t) / (j->dtype == MC_F32 ? 1.0 : 1e5);
                float x = (float)mc_round_to_dtype(v, j->dtype);
                acc = r == 0 ? x : acc + x;
            }
            double want = mc_round_to_dtype(acc, j->dtype), got = mc_load_element(res, j->dtype, i);
            if (want != got) {
                j->status[t] = MC_ERR_INPUT; /* reported by the main thread */
                break;
            }
        }
        if (mc_comm_barrier(j->comm, j->rank) != MC_OK) /* everyone checked before the next fill */
            break;
    }
    return NULL;
}

static void run_ranks(int n, mc_dtype dtype, int64_t count, bool in_place)
{
    mc_comm *comm = NULL;
    assert_int_equal(mc_comm_new(n, &comm), MC_OK);
    assert_int_equal(mc_comm_size(comm), n);
    job jobs[MAX_RANKS];
    pthread_t threads[MAX_RANKS];
    size_t bytes = (size_t)(count > 0 ? count : 1) * mc_dtype_size(dtype);
    for (int r = 0; r < n; r++) {
        jobs[r] = (job){.comm = comm, .rank = r, .n = n, .dtype = dtype, .count = count, .in_place = in_place};
        jobs[r].in = calloc(1, bytes);
        jobs[r].out = calloc(1, bytes);
        assert_non_null(jobs[r].in);
        assert_non_null(jobs[r].out);
    }
    for (int r = 0; r < n; r++)
        assert_int_equal(pthread_create(&threads[r], NULL, rank_main, &jobs[r]), 0);
    for (int r = 0; r < n; r++)
        pthread_join(threads[r], NULL);
    for (int r = 0; r < n; r++) {
        for (int t = 0; t < ROUNDS; t++)
            if (jobs[r].status[t] != MC_OK)
                fail_msg("%d ranks, %s, %lld elements%s: rank %d round %d: %s", n, mc_dtype_name(dtype),
                         (long long)count, in_place ? " in place" : "", r, t,
                         jobs[r].status[t] == MC_ERR_INPUT ? "wrong sum" : "failed");
        /* the same bits on every rank */
        const void *a = in_place ? jobs[0].in : jobs[0].out, *b = in_place ? jobs[r].in : jobs[r].out;
        assert_memory_equal(a, b, (size_t)count * mc_dtype_size(dtype));
    }
    for (int r = 0; r < n; r++) {
        free(jobs[r].in);
        free(jobs[r].out);
    }
    mc_comm_free(comm);
}

static void test_sum_in_rank_order(void **state)
{
    (void)state;
    alarm(120);
    const mc_dtype dtypes[] = {MC_F32, MC_F16, MC_BF16};
    const int ns[] = {1, 2, 3, 4, 8};
    const int64_t counts[] = {0, 1, 5, 1000};
    for (size_t d = 0; d < 3; d++)
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
                for (int in_place = 0; in_place < 2; in_place++)
                    run_ranks(ns[k], dtypes[d], counts[c], in_place);
    alarm(0);
}

/* f16: the sum is rounded once, from f32, not after every addition: 2048 + 1 + 1 added in
 * f16 step by step stays 2048 (the spacing there is 2); in f32, then rounded, it is 2050. */
typedef struct f16_job {
    mc_comm *comm;
    int rank;
    uint16_t value, sum;
    mc_status status;
} f16_job;

static void *f16_rank(void *arg)
{
    f16_job *j = arg;
    j->status = mc_comm_allreduce(j->comm, j->rank, &j->value, &j->sum, 1, MC_F16);
    return NULL;
}

static void test_f16_accumulates_in_f32(void **state)
{
    (void)state;
    alarm(30);
    mc_comm *comm = NULL;
    assert_int_equal(mc_comm_new(3, &comm), MC_OK);
    f16_job jobs[3];
    pthread_t th[3];
    const double values[3] = {2048, 1, 1};
    for (int r = 0; r < 3; r++) {
        jobs[r] = (f16_job){.comm = comm, .rank = r, .value = mc_f16_from_double(values[r])};
        assert_int_equal(pthread_create(&th[r], NULL, f16_rank, &jobs[r]), 0);
    }
    for (int r = 0; r < 3; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < 3; r++) {
        assert_int_equal(jobs[r].status, MC_OK);
        assert_true(mc_f16_to_double(jobs[r].sum) == 2050.0);
    }
    mc_comm_free(comm);
    alarm(0);
}

/* A rank that fails aborts: the others, waiting in the all-reduce, return an error instead of
 * hanging; after a reset the communicator sums again. */
static void test_abort_wakes_the_others(void **state)
{
    (void)state;
    alarm(60);
    enum { N = 4 };
    mc_comm *comm = NULL;
    assert_int_equal(mc_comm_new(N, &comm), MC_OK);
    job jobs[N];
    pthread_t threads[N];
    for (int r = 0; r < N; r++) {
        jobs[r] = (job){.comm = comm, .rank = r, .n = N, .dtype = MC_F32, .count = 64, .abort_early = r == 2};
        jobs[r].in = calloc(64, sizeof(float));
        jobs[r].out = calloc(64, sizeof(float));
        assert_int_equal(pthread_create(&threads[r], NULL, rank_main, &jobs[r]), 0);
    }
    for (int r = 0; r < N; r++)
        pthread_join(threads[r], NULL);
    for (int r = 0; r < N; r++)
        assert_int_equal(jobs[r].status[0], MC_ERR_SYSTEM);
    assert_true(mc_comm_aborted(comm));
    assert_int_equal(mc_comm_barrier(comm, 0), MC_ERR_SYSTEM);
    assert_non_null(strstr(mc_error_message(), "another rank failed"));
    mc_comm_reset(comm);
    assert_false(mc_comm_aborted(comm));
    for (int r = 0; r < N; r++) {
        free(jobs[r].in);
        free(jobs[r].out);
    }
    mc_comm_free(comm);
    run_ranks(N, MC_F32, 100, false); /* a fresh one, after the failure, is unaffected */
    alarm(0);
}

/* Ranks that disagree on the count all fail, with a message naming both. */
typedef struct mismatch_job {
    mc_comm *comm;
    int rank;
    int64_t count;
    mc_status status;
} mismatch_job;

static void *mismatch_rank(void *arg)
{
    mismatch_job *j = arg;
    float in[8] = {0}, out[8];
    j->status = mc_comm_allreduce(j->comm, j->rank, in, out, j->count, MC_F32);
    return NULL;
}

static void test_ranks_must_agree(void **state)
{
    (void)state;
    alarm(30);
    mc_comm *comm = NULL;
    assert_int_equal(mc_comm_new(2, &comm), MC_OK);
    mismatch_job jobs[2] = {{comm, 0, 8, MC_OK}, {comm, 1, 4, MC_OK}};
    pthread_t th[2];
    for (int r = 0; r < 2; r++)
        assert_int_equal(pthread_create(&th[r], NULL, mismatch_rank, &jobs[r]), 0);
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    assert_int_equal(jobs[0].status, MC_ERR_INPUT);
    assert_int_equal(jobs[1].status, MC_ERR_INPUT);
    mc_comm *none = NULL;
    assert_int_equal(mc_comm_new(0, &none), MC_ERR_INPUT);
    assert_null(none);
    mc_comm_free(comm);
    alarm(0);
}

/* ---- the backends' collective kernels ------------------------------------------------------ */

/* A graph with two allreduces: one of a GEMM's result read through a transpose (its output
 * copied to a contiguous place... or not, as fusion decides), one of an input whose result
 * is read transposed. */
static const char collective_graph[] = "graph coll\n"
                                       "input x : f32[4, 8]\n"
                                       "param w : f32[8, 8]\n"
                                       "h = linear(x, w)\n"
                                       "t = transpose(h, perm=[1, 0])\n"
                                       "s = allreduce(t)\n"
                                       "y = add(s, 1.0)\n"
                                       "a = allreduce(x)\n"
                                       "z = transpose(a, perm=[1, 0])\n"
                                       "output y, z\n";

typedef struct rank_job {
    mc_program *p;
    mc_status st;
} rank_job;

static void *rank_run(void *arg)
{
    rank_job *j = arg;
    j->st = mc_program_run_rank(j->p);
    if (j->st != MC_OK)
        mc_comm_abort(j->p->comm);
    return NULL;
}

/* The program's outputs for one rank's x (rank r: x * (r + 1)) and w. */
static void expected(const float *x, const float *w, int n, float *y, float *z)
{
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++) {
            double h = 0, a = 0;
            for (int r = 0; r < n; r++) {
                double hr = 0;
                for (int k = 0; k < 8; k++)
                    hr += (double)x[i * 8 + k] * (r + 1) * w[j * 8 + k];
                h += hr;
                a += (double)x[i * 8 + j] * (r + 1);
            }
            y[j * 4 + i] = (float)(h + 1.0);
            z[j * 4 + i] = (float)a;
        }
}

/* ref and cpu: without ranks an allreduce kernel is a copy; as the ranks of one program (the
 * runtime's rank compile, one thread each) it sums their values. */
static void collective_kernels(mc_backend_kind kind)
{
    alarm(300);
    mc_graph *g = NULL;
    assert_int_equal(mc_graph_parse_string("coll.graph", collective_graph, &g), MC_OK);
    mc_options o = mc_test_options();
    o.backend = kind;
    float x[32], w[64], xs[4][32], y[32], z[32];
    for (int i = 0; i < 32; i++)
        x[i] = (float)(i % 7) * 0.25f - 0.5f;
    for (int i = 0; i < 64; i++)
        w[i] = (float)(i % 5) * 0.125f - 0.25f;
    for (int n = 0; n <= 3; n++) {
        int ranks = n > 0 ? n : 1;
        mc_comm *comm = NULL;
        mc_program *p[3] = {NULL};
        if (n > 0)
            assert_int_equal(mc_comm_new(n, &comm), MC_OK);
        for (int r = 0; r < ranks; r++) {
            mc_status st = n > 0 ? mc_program_compile_rank(g, &o, NULL, r, n, comm, &p[r])
                                 : mc_program_compile(g, &o, &p[r]);
            if (st != MC_OK)
                fail_msg("%s", mc_error_message());
            int collectives = 0;
            for (int k = 0; k < p[r]->kp->nkernels; k++)
                collectives += p[r]->kp->kernels[k].category == KIR_COLLECTIVE;
            assert_int_equal(collectives, 2);
            for (int i = 0; i < 32; i++)
                xs[r][i] = x[i] * (float)(r + 1);
            assert_int_equal(mc_program_set(p[r], "x", xs[r], sizeof xs[r]), MC_OK);
            assert_int_equal(mc_program_set(p[r], "w", w, sizeof w), MC_OK);
        }
        rank_job jobs[3];
        pthread_t th[3];
        for (int r = 0; r < ranks; r++) {
            jobs[r] = (rank_job){.p = p[r]};
            assert_int_equal(pthread_create(&th[r], NULL, rank_run, &jobs[r]), 0);
        }
        for (int r = 0; r < ranks; r++)
            pthread_join(th[r], NULL);
        expected(x, w, ranks, y, z);
        for (int r = 0; r < ranks; r++) {
            assert_int_equal(jobs[r].st, MC_OK);
            mc_tensor ty, tz;
            assert_int_equal(mc_program_output(p[r], 0, &ty), MC_OK);
            assert_int_equal(mc_program_output(p[r], 1, &tz), MC_OK);
            for (int i = 0; i < 32; i++) {
                float gy = ((const float *)ty.data)[i], gz = ((const float *)tz.data)[i];
                if (fabsf(gy - y[i]) > 1e-5f * (1 + fabsf(y[i])) || fabsf(gz - z[i]) > 1e-6f * (1 + fabsf(z[i])))
                    fail_msg("%s, %d ranks, rank %d, element %d: y %g (want %g), z %g (want %g)",
                             mc_backend_name(kind), n, r, i, gy, y[i], gz, z[i]);
            }
            mc_tensor t0;
            assert_int_equal(mc_program_output(p[0], 0, &t0), MC_OK);
            assert_memory_equal(ty.data, t0.data, sizeof y); /* the same bits on every rank */
        }
        for (int r = 0; r < ranks; r++)
            mc_program_free(p[r]);
        mc_comm_free(comm);
    }
    mc_graph_free(g);
    alarm(0);
}

static void test_collective_kernels_ref(void **state)
{
    (void)state;
    collective_kernels(MC_BACKEND_REF);
}

static void test_collective_kernels_cpu(void **state)
{
    (void)state;
#ifdef MINIC_HAVE_CPU_BACKEND
    collective_kernels(MC_BACKEND_CPU);
#else
    print_message("no CPU backend in this build: nothing to check\n");
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sum_in_rank_order),
        cmocka_unit_test(test_f16_accumulates_in_f32),
        cmocka_unit_test(test_abort_wakes_the_others),
        cmocka_unit_test(test_ranks_must_agree),
        cmocka_unit_test(test_collective_kernels_ref),
        cmocka_unit_test(test_collective_kernels_cpu),
    };
    return mc_test_run(tests);
}
