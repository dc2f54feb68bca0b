/* mc_program_feed_back and mc_program_run_async / mc_program_wait (include/minic.h).
 *
 * On every backend it runs on:
 *   - a KV cache's update fed back to its cache input is done in place (*in_place true) and,
 *     after 12 steps (and after steps queued with mc_program_run_async), the cache holds every
 *     step's column; a pointwise output of the input fed back (x + 1) is in place too;
 *   - the fallbacks, each a copy with the right values: the input read again after the update
 *     (a matmul of the new cache with the old one, which an in-place write would change), an
 *     output read from the input through another view (a transpose: in place it would read
 *     what it already overwrote), a reduction (cumsum);
 *   - binding the input between runs gives that run the bound value, the pairing staying;
 *     output_index -1 ends the pairing (the output keeps the last run's value, the input keeps
 *     the last value fed back and is written no more); a second pairing of the same input
 *     replaces the first;
 *   - queued runs: the outputs read without an explicit wait are those of the last run; an
 *     update position out of range in a queued run is reported (by mc_program_run_async on ref
 *     and cpu, by mc_program_wait or by the next read on cuda), once, and the program then runs
 *     on; mc_program_free with runs queued;
 *   - a param shared with another program and fed back in place: the other keeps its value,
 *     and sharing again skips it;
 *   - the errors (MC_ERR_INPUT): unknown input (did you mean), computed name, output index out
 *     of range, a dtype or shape that does not fit, NULL arguments, a symbolic program.
 *
 * Backends: ref and cpu, and cuda where a GPU is usable (else "cuda: skipped: no GPU");
 * MINIC_TEST_BACKEND=ref|cpu|cuda runs that one only (cuda without a GPU: exit 77).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "minic.h"

static mc_backend_kind backends[3];
static int nbackends;

static mc_program *compile(const char *text, mc_backend_kind kind)
{
    mc_graph *g = NULL;
    if (mc_graph_parse_string("t.graph", text, &g) != MC_OK)
        fail_msg("parse: %s", mc_error_message());
    mc_options opt = mc_test_options();
    opt.backend = kind;
    opt.quiet = true;
    if (kind == MC_BACKEND_CUDA)
        opt.cuda_graph = 1; /* replays must read the re-pointed buffers */
    mc_program *p = NULL;
    if (mc_program_compile(g, &opt, &p) != MC_OK)
        fail_msg("compile on %s: %s", mc_backend_name(kind), mc_error_message());
    mc_graph_free(g);
    return p;
}

static void set(mc_program *p, const char *name, const void *v, size_t bytes)
{
    if (mc_program_set(p, name, v, bytes) != MC_OK)
        fail_msg("set %s: %s", name, mc_error_message());
}

static void run(mc_program *p, bool async)
{
    if ((async ? mc_program_run_async(p) : mc_program_run(p)) != MC_OK)
        fail_msg("run on %s: %s", mc_program_backend(p), mc_error_message());
}

static bool feed(mc_program *p, const char *input, int output)
{
    bool in_place = !output; /* overwritten: checks that the call sets it */
    if (mc_program_feed_back(p, input, output, &in_place) != MC_OK)
        fail_msg("feed_back(%s <- %d) on %s: %s", input, output, mc_program_backend(p), mc_error_message());
    return in_place;
}

/* Output index of p, n floats, equal to want within tol. */
static void expect(mc_program *p, int index, const float *want, int n, double tol, const char *what)
{
    float got[64];
    assert_true(n <= 64);
    if (mc_program_read_output(p, index, got, (size_t)n * sizeof *got) != MC_OK)
        fail_msg("%s on %s: %s", what, mc_program_backend(p), mc_error_message());
    for (int i = 0; i < n; i++)
        if (!(fabs((double)got[i] - (double)want[i]) <= tol))
            fail_msg("%s on %s: element %d is %g, expected %g", what, mc_program_backend(p), i, (double)got[i],
                     (double)want[i]);
}

/* ---- a KV cache, in place --------------------------------------------------------------------- */

static const char cache_graph[] = "graph cache\n"
                                  "input cache : f32[2, 16]\n"
                                  "input new : f32[2, 1]\n"
                                  "input pos : i32[]\n"
                                  "c = update(cache, new, pos, axis=1)\n"
                                  "y = mul(c, 2)\n"
                                  "output c, y\n";

static void cache_on(mc_backend_kind kind, bool async)
{
    mc_program *p = compile(cache_graph, kind);
    float cache[32] = {0}, want[32] = {0}, twice[32];
    for (int i = 0; i < 32; i++)
        cache[i] = want[i] = -1; /* every column not written yet stays -1 */
    set(p, "cache", cache, sizeof cache);
    if (!feed(p, "cache", 0))
        fail_msg("%s: the update of the cache was not fed back in place", mc_backend_name(kind));
    for (int32_t t = 0; t < 12; t++) {
        float nw[2] = {(float)(t + 1), (float)(100 + t)};
        set(p, "new", nw, sizeof nw);
        set(p, "pos", &t, sizeof t);
        run(p, async);
        want[t] = nw[0];
        want[16 + t] = nw[1];
        if (!async || t % 5 == 4) { /* queued: read now and then (an implicit wait) */
            for (int i = 0; i < 32; i++)
                twice[i] = 2 * want[i];
            expect(p, 0, want, 32, 0, "the cache");
            expect(p, 1, twice, 32, 0, "2 * the cache");
        }
    }
    assert_int_equal(mc_program_wait(p), MC_OK);
    expect(p, 0, want, 32, 0, "the cache after 12 steps");
    /* binding the input gives the next run that value, and the pairing stays */
    for (int i = 0; i < 32; i++)
        cache[i] = want[i] = 5;
    set(p, "cache", cache, sizeof cache);
    int32_t pos = 15;
    float nw[2] = {7, 8};
    set(p, "new", nw, sizeof nw);
    set(p, "pos", &pos, sizeof pos);
    run(p, async);
    run(p, async); /* the same column again, from the fed-back cache */
    want[15] = 7;
    want[31] = 8;
    expect(p, 0, want, 32, 0, "the cache after a bind");
    /* -1 ends the pairing: the output keeps its value, the input is written no more */
    assert_false(feed(p, "cache", -1));
    expect(p, 0, want, 32, 0, "the output after the pairing ended");
    pos = 0;
    set(p, "pos", &pos, sizeof pos);
    run(p, async);
    run(p, async);
    want[0] = 7; /* the input as the last run fed back, column 0 written */
    want[16] = 8;
    expect(p, 0, want, 32, 0, "runs after the pairing ended");
    /* a second pairing of the input replaces the first: cache <- 2 * update(cache) */
    feed(p, "cache", 0);
    feed(p, "cache", 1);
    for (int i = 0; i < 32; i++)
        cache[i] = want[i] = 1;
    set(p, "cache", cache, sizeof cache);
    for (int step = 0; step < 3; step++) {
        run(p, async);
        want[0] = 7;
        want[16] = 8;
        for (int i = 0; i < 32; i++)
            want[i] *= 2;
    }
    expect(p, 1, want, 32, 0, "cache <- 2 * update(cache), 3 times");
    mc_program_free(p);
}

static void test_cache_in_place(void **state)
{
    (void)state;
    for (int i = 0; i < nbackends; i++) {
        cache_on(backends[i], false);
        cache_on(backends[i], true);
    }
}

/* ---- other outputs ---------------------------------------------------------------------------- */

/* The input read again after its update (a GEMM of the new cache with the old one): a copy. */
static const char reread_graph[] = "graph reread\n"
                                   "input cache : f32[2, 4]\n"
                                   "input new : f32[2, 1]\n"
                                   "input pos : i32[]\n"
                                   "c = update(cache, new, pos, axis=1)\n"
                                   "ct = transpose(cache)\n"
                                   "m = matmul(c, ct)\n"
                                   "output c, m\n";
static const char *const count_graphs[4] = {
    "graph plus\ninput x : f32[3, 3]\ny = add(x, 1)\noutput y\n",
    "graph flip\ninput x : f32[3, 3]\nt = transpose(x)\noutput t\n",
    "graph scan\ninput x : f32[3, 3]\ns = cumsum(x, axis=1)\noutput s\n",
    "graph sym\ninput x : f32[3, 3]\nt = transpose(x)\ny = add(x, t)\noutput y\n",
};

static void others_on(mc_backend_kind kind, bool async)
{
    mc_program *p = compile(reread_graph, kind);
    float cache[8] = {1, 2, 3, 4, 5, 6, 7, 8}, m[4];
    set(p, "cache", cache, sizeof cache);
    if (feed(p, "cache", 0))
        fail_msg("%s: the cache was fed back in place though a matmul reads it after its update",
                 mc_backend_name(kind));
    for (int32_t t = 0; t < 4; t++) {
        float nw[2] = {(float)(10 + t), (float)(-t)}, c[8];
        memcpy(c, cache, sizeof c);
        c[t] = nw[0];
        c[4 + t] = nw[1];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                m[2 * i + j] = 0;
                for (int k = 0; k < 4; k++)
                    m[2 * i + j] += c[4 * i + k] * cache[4 * j + k];
            }
        set(p, "new", nw, sizeof nw);
        set(p, "pos", &t, sizeof t);
        run(p, async);
        expect(p, 0, c, 8, 0, "the re-read cache");
        expect(p, 1, m, 4, 1e-3, "the new cache times the old one");
        memcpy(cache, c, sizeof c);
    }
    mc_program_free(p);

    /* x <- x + 1 in place; x <- x^T (a copy: another view), x <- cumsum(x) (a copy: a scan),
     * x <- x + x^T (a copy: one pointwise kernel reads x through two views) */
    for (int out = 0; out < 4; out++) {
        p = compile(count_graphs[out], kind);
        float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[9];
        set(p, "x", x, sizeof x);
        bool in_place = feed(p, "x", 0);
        if (in_place != (out == 0))
            fail_msg("%s: graph %d fed back %s", mc_backend_name(kind), out, in_place ? "in place" : "by a copy");
        for (int step = 0; step < 5; step++) {
            run(p, async);
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++)
                    w[3 * i + j] = out == 0   ? x[3 * i + j] + 1
                                   : out == 1 ? x[3 * j + i]
                                   : out == 2 ? x[3 * i + j] + (j ? w[3 * i + j - 1] : 0)
                                              : x[3 * i + j] + x[3 * j + i];
            memcpy(x, w, sizeof x);
        }
        static const char *const what[4] = {"x + 1, 5 times", "x transposed 5 times", "cumsum 5 times",
                                            "x + x^T, 5 times"};
        expect(p, 0, x, 9, 0, what[out]);
        mc_program_free(p);
    }
}

static void test_other_outputs(void **state)
{
    (void)state;
    for (int i = 0; i < nbackends; i++) {
        others_on(backends[i], false);
        others_on(backends[i], true);
    }
}

/* ---- queued runs and their errors -------------------------------------------------------------- */

static void errors_in_queue_on(mc_backend_kind kind)
{
    mc_program *p = compile(cache_graph, kind);
    float cache[32] = {0}, nw[2] = {1, 2};
    set(p, "cache", cache, sizeof cache);
    set(p, "new", nw, sizeof nw);
    feed(p, "cache", 0);
    for (int reader = 0; reader < 2; reader++) {
        int32_t pos = 3;
        set(p, "pos", &pos, sizeof pos);
        run(p, true);
        pos = 16; /* out of range: [0, 15] */
        set(p, "pos", &pos, sizeof pos);
        mc_status st = mc_program_run_async(p);
        if (st == MC_OK) { /* cuda: reported by the next call that waits */
            pos = 4;
            set(p, "pos", &pos, sizeof pos);
            st = mc_program_run_async(p);
            assert_int_equal(st, MC_OK);
            float out[32];
            st = reader ? mc_program_read_output(p, 0, out, sizeof out) : mc_program_wait(p);
        }
        assert_int_equal(st, MC_ERR_INPUT);
        if (!strstr(mc_error_message(), "update: pos 16 is outside [0, 15]"))
            fail_msg("%s: %s", mc_backend_name(kind), mc_error_message());
        assert_int_equal(mc_program_wait(p), MC_OK); /* reported once */
        pos = 5;
        set(p, "pos", &pos, sizeof pos);
        run(p, true); /* and the program runs on */
        assert_int_equal(mc_program_wait(p), MC_OK);
    }
    float want[32];
    if (mc_program_read_output(p, 0, want, sizeof want) != MC_OK)
        fail_msg("%s", mc_error_message());
    assert_true(want[5] == 1 && want[21] == 2);
    int32_t pos = 2;
    set(p, "pos", &pos, sizeof pos);
    for (int i = 0; i < 3; i++)
        run(p, true);
    mc_program_free(p); /* with runs queued */
}

static void test_errors_in_queue(void **state)
{
    (void)state;
    for (int i = 0; i < nbackends; i++)
        errors_in_queue_on(backends[i]);
}

/* A param shared with another program (mc_program_share_params) and fed back in place: the
 * other program keeps its value (ref and cpu share the memory itself). */
static void test_shared_param(void **state)
{
    (void)state;
    static const char text[] = "graph pw\nparam w : f32[3, 3]\ny = add(w, 1)\noutput y\n";
    for (int i = 0; i < nbackends; i++) {
        mc_program *a = compile(text, backends[i]), *b = compile(text, backends[i]);
        float w[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, want[9];
        set(a, "w", w, sizeof w);
        int shared = 0;
        assert_int_equal(mc_program_share_params(b, a, &shared), MC_OK);
        assert_int_equal(shared, 1);
        assert_true(feed(b, "w", 0));
        for (int k = 0; k < 3; k++)
            run(b, true);
        for (int j = 0; j < 9; j++)
            want[j] = w[j] + 3;
        expect(b, 0, want, 9, 0, "the fed-back param after 3 runs");
        run(a, false);
        for (int j = 0; j < 9; j++)
            want[j] = w[j] + 1;
        expect(a, 0, want, 9, 0, "the program that shared it");
        /* sharing into b again skips the param fed back */
        assert_int_equal(mc_program_share_params(b, a, &shared), MC_OK);
        assert_int_equal(shared, 0);
        mc_program_free(a);
        run(b, false);
        for (int j = 0; j < 9; j++)
            want[j] = w[j] + 4;
        expect(b, 0, want, 9, 0, "the fed-back param after the other program was freed");
        mc_program_free(b);
    }
}

static void expect_error(mc_status st, const char *const *words)
{
    assert_int_equal(st, MC_ERR_INPUT);
    for (; *words; words++)
        if (!strstr(mc_error_message(), *words))
            fail_msg("the message lacks '%s': %s", *words, mc_error_message());
}

static void test_errors(void **state)
{
    (void)state;
    for (int i = 0; i < nbackends; i++) {
        mc_program *p = compile(cache_graph, backends[i]);
        bool in_place;
        expect_error(mc_program_feed_back(p, "cahce", 0, &in_place), (const char *[]){"cahce", "did you mean", NULL});
        expect_error(mc_program_feed_back(p, "y", 0, NULL), (const char *[]){"'y' is computed", NULL});
        expect_error(mc_program_feed_back(p, "cache", 2, NULL),
                     (const char *[]){"output 2", "program 'cache'", "out of range", NULL});
        expect_error(mc_program_feed_back(p, "cache", -2, NULL), (const char *[]){"output -2", NULL});
        expect_error(mc_program_feed_back(p, "new", 0, NULL),
                     (const char *[]){"output 0 ('c', f32[2, 16])", "input 'new'", "f32[2, 1]", NULL});
        expect_error(mc_program_feed_back(p, "pos", 1, NULL), (const char *[]){"input 'pos'", "i32[]", NULL});
        expect_error(mc_program_feed_back(NULL, "cache", 0, NULL), (const char *[]){"no program", NULL});
        expect_error(mc_program_feed_back(p, NULL, 0, NULL), (const char *[]){"no input name", NULL});
        expect_error(mc_program_run_async(NULL), (const char *[]){"no program", NULL});
        expect_error(mc_program_wait(NULL), (const char *[]){"no program", NULL});
        /* nothing was paired: a run leaves the cache input as bound */
        float cache[32] = {0}, nw[2] = {3, 4};
        int32_t pos = 1;
        set(p, "cache", cache, sizeof cache);
        set(p, "new", nw, sizeof nw);
        set(p, "pos", &pos, sizeof pos);
        run(p, false);
        run(p, false);
        pos = 2;
        set(p, "pos", &pos, sizeof pos);
        run(p, false);
        float want[32] = {0};
        want[2] = 3;
        want[18] = 4;
        expect(p, 0, want, 32, 0, "no pairing after the failed calls");
        assert_int_equal(mc_program_wait(p), MC_OK);
        mc_program_free(p);
        mc_program *s = compile("graph sym\ninput x : f32[N, 2]\ny = add(x, 1)\noutput y\n", backends[i]);
        expect_error(mc_program_feed_back(s, "x", 0, NULL), (const char *[]){"symbolic", NULL});
        mc_program_free(s);
    }
}

int main(void)
{
    int rc = mc_test_backends(backends, &nbackends);
    if (rc)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_in_place),
        cmocka_unit_test(test_other_outputs),
        cmocka_unit_test(test_errors_in_queue),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_shared_param),
    };
    return mc_test_run(tests);
}
