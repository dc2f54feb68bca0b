/* Threads: what include/minic.h promises about concurrent calls, checked bit for bit.
 *
 * On every backend built here (ref, cpu, and cuda where a GPU is usable):
 *   - one program, many threads: THREADS threads run a shared program RUNS times each (and
 *     re-bind its input with the same bytes now and then); every output read with
 *     mc_program_read_output must equal, bit for bit, what one thread computed alone. Before
 *     programs were locked this hung on cpu (callers spinning in one thread pool) and gave wrong
 *     outputs on ref (one arena for two runs).
 *   - different programs, many threads: each thread compiles a graph of its own, binds inputs
 *     of its own every iteration and checks each run against the single-threaded results.
 *   - one graph, many compiles: every thread compiles the same const graph at the same time,
 *     runs it and checks the result (graph cloning, LLVM's start-up, the backend's probe).
 *
 * CI runs this test in the ordinary sanitized build and in a ThreadSanitizer build
 * (scripts/test.sh, build-tsan): TSan sees the library's own memory accesses, which is where
 * the locking lives; the JIT-compiled kernels and LLVM are not instrumented. A hang fails the
 * test through alarm() rather than the CTest timeout. MINIC_THREADS_RUNS=N changes RUNS.
 */
#include "testlib.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { THREADS = 4, INPUTS = 3, MAX_ELEMENTS = 256 * 256 };

static int runs_per_thread = 200;
/* The graph's size, per backend: large enough that runs overlap in time and the cpu backend's
 * kernels are split over its pool (so unlocked runs would collide), small enough for ref. */
static int ROWS, COLS, HIDDEN;

static void size_for(mc_backend_kind kind)
{
    ROWS = kind == MC_BACKEND_REF ? 16 : 256;
    COLS = kind == MC_BACKEND_REF ? 64 : 256;
    HIDDEN = kind == MC_BACKEND_REF ? 32 : 256;
}

/* A graph with a GEMM, a softmax (reduction kernel with several loops), a layernorm and a
 * pointwise chain; `scale` makes the graphs of different threads differ (so their compiled
 * code and cache entries differ too). */
static mc_graph *make_graph(int scale)
{
    char text[1024];
    snprintf(text, sizeof text,
             "graph threads%d\n"
             "input x : f32[%d, %d]\n"
             "param w : f32[%d, %d]\n"
             "param g : f32[%d]\n"
             "param b : f32[%d]\n"
             "h = linear(x, w)\n"
             "s = mul(h, %d.5)\n"
             "y = softmax(s, axis=-1)\n"
             "n = layernorm(x, g, b, eps=1e-5)\n"
             "e = gelu(n)\n"
             "z = sum(e, axis=-1)\n"
             "output y, z\n",
             scale, ROWS, COLS, HIDDEN, COLS, COLS, COLS, scale);
    mc_graph *graph = NULL;
    if (mc_graph_parse_string("threads.graph", text, &graph) != MC_OK)
        fail_msg("%s", mc_error_message());
    return graph;
}

static bool fuse = true; /* set by the shared-program test, which checks both */

static mc_options options(mc_backend_kind kind)
{
    mc_options opt = mc_options_default();
    opt.backend = kind;
    opt.fuse = fuse;
    opt.threads = 2; /* a pool with a worker, even on a one-core machine */
    opt.quiet = true;
    return opt;
}

/* Input k of a family: deterministic values, different for each (k, salt). */
static void input_values(float *x, int k, int salt)
{
    for (int i = 0; i < ROWS * COLS; i++)
        x[i] = (float)((i * 37 + k * 11 + salt * 5) % 23) / 8.0f - 1.4f;
}

typedef struct {
    size_t bytes[2];
    unsigned char *data[2];
} outputs;

static void read_outputs(mc_program *p, outputs *o)
{
    for (int i = 0; i < 2; i++) {
        mc_tensor t;
        if (mc_program_output(p, i, &t) != MC_OK)
            fail_msg("%s", mc_error_message());
        if (!o->data[i]) {
            o->bytes[i] = t.bytes;
            o->data[i] = malloc(t.bytes);
            assert_non_null(o->data[i]);
        }
        assert_int_equal(t.bytes, o->bytes[i]);
        if (mc_program_read_output(p, i, o->data[i], o->bytes[i]) != MC_OK)
            fail_msg("%s", mc_error_message());
    }
}

static void free_outputs(outputs *o)
{
    free(o->data[0]);
    free(o->data[1]);
}

/* Compile g alone, run it on input k (salt) and keep the outputs: the single-threaded truth. */
static void expected_outputs(const mc_graph *g, mc_backend_kind kind, int salt, outputs *want)
{
    mc_options opt = options(kind);
    mc_program *p = NULL;
    if (mc_program_compile(g, &opt, &p) != MC_OK)
        fail_msg("%s", mc_error_message());
    assert_int_equal(mc_program_fill_random(p, 1), MC_OK);
    for (int k = 0; k < INPUTS; k++) {
        static _Thread_local float x[MAX_ELEMENTS];
        input_values(x, k, salt);
        assert_int_equal(mc_program_set(p, "x", x, sizeof(float) * (size_t)(ROWS * COLS)), MC_OK);
        assert_int_equal(mc_program_run(p), MC_OK);
        read_outputs(p, &want[k]);
    }
    mc_program_free(p);
}

static bool same_outputs(const outputs *a, const outputs *b)
{
    for (int i = 0; i < 2; i++)
        if (a->bytes[i] != b->bytes[i] || memcmp(a->data[i], b->data[i], a->bytes[i]) != 0)
            return false;
    return true;
}

/* ---- one program, many threads ------------------------------------------------------------- */

typedef struct {
    mc_program *p;
    const outputs *want;
    const float *x;
    int mismatches, errors;
} shared_job;

static void *shared_worker(void *arg)
{
    shared_job *j = arg;
    outputs got = {0};
    for (int r = 0; r < runs_per_thread; r++) {
        if (r % 16 == 0 && mc_program_set(j->p, "x", j->x, sizeof(float) * ROWS * COLS) != MC_OK)
            j->errors++;
        if (mc_program_run(j->p) != MC_OK) {
            j->errors++;
            continue;
        }
        for (int i = 0; i < 2; i++) {
            if (!got.data[i]) {
                got.bytes[i] = j->want->bytes[i];
                got.data[i] = malloc(got.bytes[i]);
            }
            if (!got.data[i] || mc_program_read_output(j->p, i, got.data[i], got.bytes[i]) != MC_OK)
                j->errors++;
        }
        if (!same_outputs(&got, j->want))
            j->mismatches++;
    }
    free_outputs(&got);
    return NULL;
}

static void shared_program_once(mc_backend_kind kind)
{
    mc_graph *g = make_graph(1);
    outputs want[INPUTS];
    memset(want, 0, sizeof want);
    expected_outputs(g, kind, 0, want);
    mc_options opt = options(kind);
    mc_program *p = NULL;
    if (mc_program_compile(g, &opt, &p) != MC_OK)
        fail_msg("%s", mc_error_message());
    assert_int_equal(mc_program_fill_random(p, 1), MC_OK);
    static float x[MAX_ELEMENTS];
    input_values(x, 0, 0);
    assert_int_equal(mc_program_set(p, "x", x, sizeof(float) * (size_t)(ROWS * COLS)), MC_OK);

    pthread_t th[THREADS];
    shared_job jobs[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (shared_job){.p = p, .want = &want[0], .x = x};
        assert_int_equal(pthread_create(&th[t], NULL, shared_worker, &jobs[t]), 0);
    }
    int mismatches = 0, errors = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        mismatches += jobs[t].mismatches;
        errors += jobs[t].errors;
    }
    print_message("%s: one %s program, %d threads x %d runs: %d mismatches, %d errors\n",
                  mc_backend_name(kind), fuse ? "fused" : "unfused", THREADS, runs_per_thread,
                  mismatches, errors);
    assert_int_equal(errors, 0);
    assert_int_equal(mismatches, 0);
    mc_program_free(p);
    for (int k = 0; k < INPUTS; k++)
        free_outputs(&want[k]);
    mc_graph_free(g);
}

/* Fused, and unfused: one kernel per operator, so more intermediates share the planned arena
 * and two unlocked runs would overwrite each other's. */
static void shared_program(mc_backend_kind kind)
{
    fuse = true;
    shared_program_once(kind);
    fuse = false;
    shared_program_once(kind);
    fuse = true;
}

/* ---- different programs, many threads ------------------------------------------------------ */

typedef struct {
    mc_backend_kind kind;
    const mc_graph *graph; /* a shared graph, or NULL: make one of its own */
    int salt;
    const outputs *want;   /* INPUTS of them */
    int runs;
    int mismatches, errors;
    char error[256];
} own_job;

static void *own_worker(void *arg)
{
    own_job *j = arg;
    mc_graph *mine = j->graph ? NULL : make_graph(2 + j->salt);
    const mc_graph *g = j->graph ? j->graph : mine;
    mc_options opt = options(j->kind);
    mc_program *p = NULL;
    outputs got = {0};
    if (mc_program_compile(g, &opt, &p) != MC_OK || mc_program_fill_random(p, 1) != MC_OK) {
        snprintf(j->error, sizeof j->error, "%s", mc_error_message());
        j->errors++;
        goto done;
    }
    for (int r = 0; r < j->runs; r++) {
        static _Thread_local float x[MAX_ELEMENTS];
        int k = r % INPUTS;
        input_values(x, k, j->salt);
        if (mc_program_set(p, "x", x, sizeof(float) * (size_t)(ROWS * COLS)) != MC_OK || mc_program_run(p) != MC_OK) {
            j->errors++;
            continue;
        }
        for (int i = 0; i < 2; i++) {
            if (!got.data[i]) {
                got.bytes[i] = j->want[k].bytes[i];
                got.data[i] = malloc(got.bytes[i]);
            }
            if (!got.data[i] || mc_program_read_output(p, i, got.data[i], got.bytes[i]) != MC_OK)
                j->errors++;
        }
        if (!same_outputs(&got, &j->want[k]))
            j->mismatches++;
    }
done:
    free_outputs(&got);
    mc_program_free(p);
    mc_graph_free(mine);
    return NULL;
}

static void run_own_jobs(own_job *jobs, const char *what)
{
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, own_worker, &jobs[t]), 0);
    int mismatches = 0, errors = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        mismatches += jobs[t].mismatches;
        errors += jobs[t].errors;
        if (jobs[t].error[0])
            print_error("thread %d: %s\n", t, jobs[t].error);
    }
    print_message("%s: %s, %d threads x %d runs: %d mismatches, %d errors\n",
                  mc_backend_name(jobs[0].kind), what, THREADS, jobs[0].runs, mismatches, errors);
    assert_int_equal(errors, 0);
    assert_int_equal(mismatches, 0);
}

static void own_programs(mc_backend_kind kind)
{
    outputs want[THREADS][INPUTS];
    memset(want, 0, sizeof want);
    own_job jobs[THREADS];
    for (int t = 0; t < THREADS; t++) {
        mc_graph *g = make_graph(2 + t);
        expected_outputs(g, kind, t, want[t]);
        mc_graph_free(g);
        jobs[t] = (own_job){.kind = kind, .salt = t, .want = want[t], .runs = runs_per_thread};
    }
    run_own_jobs(jobs, "a program per thread");
    for (int t = 0; t < THREADS; t++)
        for (int k = 0; k < INPUTS; k++)
            free_outputs(&want[t][k]);
}

static void same_graph_compiled_together(mc_backend_kind kind)
{
    mc_graph *g = make_graph(1);
    outputs want[INPUTS];
    memset(want, 0, sizeof want);
    expected_outputs(g, kind, 0, want);
    for (int round = 0; round < 3; round++) {
        own_job jobs[THREADS];
        for (int t = 0; t < THREADS; t++)
            jobs[t] = (own_job){.kind = kind, .graph = g, .salt = 0, .want = want, .runs = 8};
        run_own_jobs(jobs, "one graph compiled by every thread at once");
    }
    for (int k = 0; k < INPUTS; k++)
        free_outputs(&want[k]);
    mc_graph_free(g);
}

/* ---- the tests ------------------------------------------------------------------------------ */

static void on_every_backend(void (*check)(mc_backend_kind))
{
    size_for(MC_BACKEND_REF);
    check(MC_BACKEND_REF);
#ifdef MINIC_HAVE_CPU_BACKEND
    size_for(MC_BACKEND_CPU);
    check(MC_BACKEND_CPU);
#endif
    size_for(MC_BACKEND_CUDA);
    if (mc_test_have_gpu())
        check(MC_BACKEND_CUDA);
    else
        print_message("cuda: skipped (no usable GPU here)\n");
}

static void test_one_program_many_threads(void **state)
{
    (void)state;
    on_every_backend(shared_program);
}

static void test_a_program_per_thread(void **state)
{
    (void)state;
    on_every_backend(own_programs);
}

static void test_one_graph_compiled_by_every_thread(void **state)
{
    (void)state;
    /* Every thread's compile misses the cache at once and stores the same entry: with the
     * cache on, that is the cache's own concurrency (tested with the cache); here the programs. */
    setenv("MINIC_NO_CACHE", "1", 1);
    on_every_backend(same_graph_compiled_together);
    unsetenv("MINIC_NO_CACHE");
}

int main(void)
{
    const char *runs = getenv("MINIC_THREADS_RUNS");
    if (runs && atoi(runs) > 0)
        runs_per_thread = atoi(runs);
    alarm(540); /* a hang is a failure, not a timeout */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_program_many_threads),
        cmocka_unit_test(test_a_program_per_thread),
        cmocka_unit_test(test_one_graph_compiled_by_every_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
