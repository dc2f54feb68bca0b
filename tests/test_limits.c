/* Resource limits: what minic does with graphs at and past the edge of what it can hold.
 *
 * Each case gives either a clear error (status, and a message that says what is wrong) or a
 * correct result; none may crash, overflow the stack, take quadratic time or try to allocate
 * more memory than the machine has. Cases: rank above MC_MAX_RANK, dimensions whose product
 * overflows int64, element counts beyond host memory (refused at compile, before any
 * allocation), attribute lists longer than any rank, a 10^6-operator graph (parse and check,
 * peak RSS measured), a chain of 200,000 dependent adds run on the reference backend with
 * fusion on and off (no recursion as deep as the graph in any pass), and very long lines.
 *
 * The big graphs are generated here as text, so the test needs no data files; they run under
 * the sanitizers in CI, which is why sizes are what a sanitized build handles in seconds.
 */
#include "testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "runtime/runtime.h"

/* ---- a growable text buffer ------------------------------------------------------------------ */

typedef struct {
    char *s;
    size_t len, cap;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        assert_true(n >= 0);
        if (t->s && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        t->cap = t->cap ? t->cap * 2 + (size_t)n : 4096 + (size_t)n;
        t->s = realloc(t->s, t->cap);
        assert_non_null(t->s);
    }
}

static mc_status parse(const char *src, mc_graph **g)
{
    *g = NULL;
    return mc_graph_parse_string("limits.graph", src, g);
}

/* Parse must fail with MC_ERR_INPUT and a message containing `want`. */
static void expect_parse_error(const char *src, const char *want)
{
    mc_graph *g = NULL;
    mc_status st = parse(src, &g);
    assert_int_equal(st, MC_ERR_INPUT);
    assert_null(g);
    const char *msg = mc_error_message();
    if (!strstr(msg, want))
        fail_msg("expected '%s' in: %s", want, msg);
    assert_non_null(strstr(msg, "limits.graph:"));
}

/* ---- rank and shape --------------------------------------------------------------------------- */

static void test_rank_above_max(void **state)
{
    (void)state;
    expect_parse_error("input x : f32[1, 1, 1, 1, 1, 1, 1, 1, 1]\noutput x\n", "most is 8");
    /* Rank 8 is fine. */
    mc_graph *g = NULL;
    assert_int_equal(parse("input x : f32[1, 2, 1, 2, 1, 2, 1, 2]\ny = neg(x)\noutput y\n", &g),
                     MC_OK);
    mc_graph_free(g);
    /* Through the C API: the declaration and a reshape to rank 9 fail, the graph says so. */
    g = mc_graph_new("rank");
    int64_t shape[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    assert_int_equal(mc_input(g, "x", MC_F32, shape, 9), MC_ERROR);
    assert_int_equal(mc_error_status(), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "8"));
    mc_value y = mc_input(g, "y", MC_F32, shape, 8);
    assert_true(y >= 0);
    assert_int_equal(mc_reshape(g, y, shape, 9), MC_ERROR);
    assert_int_equal(mc_expand(g, y, shape, 9), MC_ERROR);
    assert_int_equal(mc_input(g, "z", MC_F32, shape, -1), MC_ERROR);
    assert_int_equal(mc_graph_set_outputs(g, &y, 1), MC_ERR_INPUT); /* a builder failed */
    mc_graph_free(g);
}

static void test_shape_overflow(void **state)
{
    (void)state;
    /* 2^32 * 2^32 = 2^64: the product overflows int64. */
    expect_parse_error("input x : f32[4294967296, 4294967296]\noutput x\n", "overflow");
    /* Each dimension fits, the product of four does not. */
    expect_parse_error("input x : f32[100000, 100000, 100000, 100000]\noutput x\n", "overflow");
    /* A dimension that does not fit int64 at all. */
    expect_parse_error("input x : f32[99999999999999999999]\noutput x\n", "");
    /* Element counts whose bytes overflow (numel * 8 > INT64_MAX). */
    expect_parse_error("input x : f32[2305843009213693952]\noutput x\n", "overflow");
    /* reshape and expand to overflowing shapes. */
    expect_parse_error("input x : f32[4]\ny = expand(x, shape=[4294967296, 4294967296, 4])\n"
                       "output y\n", "overflow");
    expect_parse_error("input x : f32[4]\ny = reshape(x, shape=[4294967296, 4294967296, -1])\n"
                       "output y\n", "");
    expect_parse_error("input x : f32[4]\ny = full(shape=[4294967296, 4294967296])\noutput y\n",
                       "overflow");
    /* The C API checks the same. */
    mc_graph *g = mc_graph_new("overflow");
    int64_t big[2] = {INT64_C(4294967296), INT64_C(4294967296)};
    assert_int_equal(mc_input(g, "x", MC_F32, big, 2), MC_ERROR);
    assert_non_null(strstr(mc_error_message(), "overflow"));
    int64_t neg[2] = {4, -3};
    assert_int_equal(mc_input(g, "y", MC_F32, neg, 2), MC_ERROR);
    int64_t zero[1] = {0};
    assert_int_equal(mc_input(g, "z", MC_F32, zero, 1), MC_ERROR);
    assert_int_equal(mc_full(g, big, 2, 1.0, MC_F32), MC_ERROR);
    mc_graph_free(g);
}

/* Counts that fit int64 but not in memory: a clear MC_ERR_SYSTEM at compile, nothing
 * allocated (under ASan a calloc of petabytes would itself be a fatal report). */
static void test_beyond_host_memory(void **state)
{
    (void)state;
    const char *srcs[] = {
        /* 4 PB input (and output) */
        "input x : f32[1000000, 1000000, 1000]\ny = add(x, 1)\noutput y\n",
        /* small input, 800 PB output made by expand and a broadcast */
        "input x : f32[1, 1000]\ny = expand(x, shape=[200000000, 1000000, 1000])\n"
        "z = mul(y, 2)\noutput z\n",
        /* the intermediate is the big one: a reduction of a huge broadcast */
        "input x : f32[1000000]\ny = reshape(x, shape=[1000000, 1])\nz = mul(y, x)\n"
        "w = mul(z, z)\ns = sum(w)\noutput s\n",
    };
    for (size_t i = 0; i < sizeof srcs / sizeof *srcs; i++)
        for (int fuse = 0; fuse < 2; fuse++) {
            mc_graph *g = NULL;
            assert_int_equal(parse(srcs[i], &g), MC_OK);
            mc_options opt = mc_options_default();
            opt.backend = MC_BACKEND_REF;
            opt.fuse = fuse;
            mc_program *p = NULL;
            mc_status st = mc_program_compile(g, &opt, &p);
            if (i == 2 && fuse) {
                /* fused, the 10^12-element product is never stored: it compiles */
                assert_int_equal(st, MC_OK);
                mc_program_free(p);
            } else {
                if (st != MC_ERR_SYSTEM)
                    fail_msg("case %zu fuse %d: status %d: %s", i, fuse, st, mc_error_message());
                assert_null(p);
                assert_non_null(strstr(mc_error_message(), "memory"));
            }
            mc_graph_free(g);
        }
}

/* ---- attribute lists ------------------------------------------------------------------------- */

static void test_huge_attribute_lists(void **state)
{
    (void)state;
    text t = {0};
    const char *ops[] = {"reshape(x, shape=[", "expand(x, shape=[", "sum(x, axis=[",
                         "transpose(x, perm=[", "full(shape=[", "iota(axis=0, shape=["};
    for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
        t.len = 0;
        put(&t, "input x : f32[4]\ny = %s", ops[o]);
        for (int i = 0; i < 100000; i++)
            put(&t, "%s1", i ? ", " : "");
        put(&t, "])\noutput y\n");
        expect_parse_error(t.s, "too many entries");
    }
    /* 100,000 positional operands: concat takes any number; a list of that many is fine. */
    t.len = 0;
    put(&t, "input x : f32[1]\ny = concat(");
    for (int i = 0; i < 100000; i++)
        put(&t, "%sx", i ? ", " : "");
    put(&t, ", axis=0)\noutput y\n");
    mc_graph *g = NULL;
    mc_status st = parse(t.s, &g);
    if (st == MC_OK) {
        const mc_node *y = &g->nodes[g->outputs[0]];
        assert_int_equal(y->shape[0], 100000);
    } else {
        assert_int_equal(st, MC_ERR_INPUT); /* a limit, said clearly */
        assert_non_null(strstr(mc_error_message(), "operand"));
    }
    mc_graph_free(g);
    /* The C API: lists longer than a rank are refused by the builders. */
    g = mc_graph_new("lists");
    int64_t four[1] = {4};
    mc_value x = mc_input(g, "x", MC_F32, four, 1);
    int axes[1000];
    for (int i = 0; i < 1000; i++)
        axes[i] = 0;
    assert_int_equal(mc_sum(g, x, axes, 1000, false), MC_ERROR);
    assert_int_equal(mc_transpose(g, x, axes, 1000), MC_ERROR);
    assert_int_equal(mc_concat(g, NULL, 3, 0), MC_ERROR);
    mc_graph_free(g);
    free(t.s);
}

/* ---- big graphs ---------------------------------------------------------------------------- */

/* Peak resident memory of this process in kB since the last reset_peak_rss (VmHWM; Linux
 * resets it when "5" is written to /proc/self/clear_refs). */
static void reset_peak_rss(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

static long peak_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    if (kb < 0) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        kb = ru.ru_maxrss;
    }
    return kb;
}

/* 10^6 operators: parse and check in bounded memory. The bound is generous for a sanitized
 * build (ASan's shadow and redzones roughly double the heap) and far below what a quadratic
 * structure would need. */
static void test_million_operators(void **state)
{
    (void)state;
    const int n = 1000000;
    text t = {0};
    put(&t, "graph big\ninput x : f32[4]\nv0 = add(x, 1)\n");
    for (int i = 1; i < n; i++)
        put(&t, "v%d = mul(v%d, 1.0001)\n", i, i - 1);
    put(&t, "output v%d\n", n - 1);
    reset_peak_rss();
    long before = peak_rss_kb(); /* the text is already here */
    double t0 = mc_now_ms();
    mc_graph *g = NULL;
    mc_status st = parse(t.s, &g);
    if (st != MC_OK)
        fail_msg("%s", mc_error_message());
    assert_int_equal(mc_graph_verify(g, "test"), MC_OK);
    /* 10^6 operators plus their constants and the input */
    assert_true(g->nnodes >= n + 1);
    double ms = mc_now_ms() - t0;
    long after = peak_rss_kb();
    FILE *devnull = fopen("/dev/null", "w");
    assert_non_null(devnull);
    assert_int_equal(mc_graph_print(g, devnull), MC_OK);
    fclose(devnull);
    print_message("10^6 operators: parse + verify %.0f ms, peak RSS %ld MB -> %ld MB "
                  "(text %zu MB)\n", ms, before / 1024, after / 1024, t.len >> 20);
    assert_true(after - before < 3L * 1024 * 1024); /* < 3 GB more, sanitized */
    mc_graph_free(g);
    free(t.s);
}

/* A chain of `n` dependent adds: y = x + 1 + 1 + ... on the ref backend, fused and unfused.
 * Every pass and the backend must handle a dependency chain as long as the graph without
 * recursing along it. The result is checked against the same float additions done here. */
static void run_chain(int n)
{
    text t = {0};
    put(&t, "input x : f32[3]\nv0 = add(x, 1)\n");
    for (int i = 1; i < n; i++)
        put(&t, "v%d = add(v%d, 1)\n", i, i - 1);
    put(&t, "output v%d\n", n - 1);
    mc_graph *g = NULL;
    if (parse(t.s, &g) != MC_OK)
        fail_msg("%s", mc_error_message());
    free(t.s);
    const float x[3] = {0.25f, -0.5f, 3.0f};
    for (int fuse = 0; fuse < 2; fuse++) {
        mc_options opt = mc_options_default();
        opt.backend = MC_BACKEND_REF;
        opt.fuse = fuse;
        mc_program *p = NULL;
        double t0 = mc_now_ms();
        if (mc_program_compile(g, &opt, &p) != MC_OK)
            fail_msg("fuse %d: %s", fuse, mc_error_message());
        double t1 = mc_now_ms();
        assert_int_equal(mc_program_set(p, "x", x, sizeof x), MC_OK);
        assert_int_equal(mc_program_run(p), MC_OK);
        double t2 = mc_now_ms();
        mc_tensor out;
        assert_int_equal(mc_program_output(p, 0, &out), MC_OK);
        assert_int_equal(out.bytes, sizeof x);
        const float *y = out.data;
        for (int i = 0; i < 3; i++) {
            float want = x[i];
            for (int k = 0; k < n; k++)
                want += 1.0f;
            if (y[i] != want)
                fail_msg("fuse %d: element %d is %g, expected %g", fuse, i, y[i], want);
        }
        print_message("chain of %d adds, %s: %d kernels, compile %.0f ms, run %.0f ms\n", n,
                      fuse ? "fused" : "unfused", p->kp->nkernels, t1 - t0, t2 - t1);
        if (!fuse)
            assert_int_equal(p->kp->nkernels, n);
        else
            assert_true(p->kp->nkernels < n / 8); /* fused into long kernels, but bounded ones */
        mc_program_free(p);
    }
    mc_graph_free(g);
}

static void test_deep_chain(void **state)
{
    (void)state;
    run_chain(200000);
}

/* Very long lines: a comment, a name and an error on a line of a million characters. The
 * message stays short (quoted text is cut), the location is right. */
static void test_long_lines(void **state)
{
    (void)state;
    const size_t n = 1000000;
    text t = {0};
    put(&t, "input x : f32[2]  # ");
    for (size_t i = 0; i < n; i++)
        put(&t, "%c", 'a' + (int)(i % 26));
    put(&t, "\n");
    char *name = malloc(n + 1);
    assert_non_null(name);
    memset(name, 'n', n);
    name[0] = '_';
    name[n] = 0;
    put(&t, "%s = neg(x)\noutput %s\n", name, name);
    mc_graph *g = NULL;
    if (parse(t.s, &g) != MC_OK)
        fail_msg("%s", mc_error_message());
    mc_options opt = mc_options_default();
    opt.backend = MC_BACKEND_REF;
    mc_program *p = NULL;
    assert_int_equal(mc_program_compile(g, &opt, &p), MC_OK);
    assert_int_equal(mc_program_fill_random(p, 1), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK);
    mc_tensor out;
    assert_int_equal(mc_program_output(p, 0, &out), MC_OK);
    assert_string_equal(out.name, name);
    mc_program_free(p);
    mc_graph_free(g);

    /* An error at the end of a long line: the column is exact, the message bounded. */
    t.len = 0;
    put(&t, "input x : f32[2]\ny = add(x, ");
    for (size_t i = 0; i < n; i++)
        put(&t, " ");
    put(&t, "%s)\noutput y\n", name);
    assert_int_equal(parse(t.s, &g), MC_ERR_INPUT);
    const char *msg = mc_error_message();
    char want[64];
    snprintf(want, sizeof want, "limits.graph:2:%zu:", n + 12);
    if (!strstr(msg, want))
        fail_msg("expected '%s' at the start of: %.200s", want, msg);
    assert_true(strlen(msg) < 8192);
    free(name);
    free(t.s);
}

/* The thread count: the command line and the library take the same range (MC_MAX_THREADS),
 * so no count passes one and fails in the other, on any backend. */
static void test_thread_limit(void **state)
{
    (void)state;
    mc_graph *g = NULL;
    assert_int_equal(parse("input x : f32[4]\ny = neg(x)\noutput y\n", &g), MC_OK);
    mc_backend_kind kinds[] = {MC_BACKEND_REF, MC_BACKEND_CPU};
    for (int k = 0; k < 2; k++) {
#ifndef MINIC_HAVE_CPU_BACKEND
        if (kinds[k] == MC_BACKEND_CPU)
            continue;
#endif
        mc_options opt = mc_options_default();
        opt.backend = kinds[k];
        opt.quiet = true;
        mc_program *p = NULL;
        opt.threads = MC_MAX_THREADS + 1;
        assert_int_equal(mc_program_compile(g, &opt, &p), MC_ERR_INPUT);
        assert_null(p);
        char want[64];
        snprintf(want, sizeof want, "0 to %d", MC_MAX_THREADS);
        if (!strstr(mc_error_message(), want))
            fail_msg("expected '%s' in: %s", want, mc_error_message());
        opt.threads = -1;
        assert_int_equal(mc_program_compile(g, &opt, &p), MC_ERR_INPUT);
    }
    mc_graph_free(g);

    char args[256], *out = NULL, *err = NULL;
    const char *graph = mc_test_src("examples/layernorm.graph");
    snprintf(args, sizeof args, "run '%s' --backend ref --quiet --threads %d", graph, MC_MAX_THREADS + 1);
    assert_int_equal(mc_test_minic(args, &out, &err), 1);
    char want[64];
    snprintf(want, sizeof want, "from 0 to %d", MC_MAX_THREADS);
    if (!strstr(err, want))
        fail_msg("expected '%s' in: %s", want, err);
    free(out);
    free(err);
    /* the largest count the command line takes is one the library takes (ref starts no threads) */
    snprintf(args, sizeof args, "run '%s' --backend ref --quiet --threads %d", graph, MC_MAX_THREADS);
    int rc = mc_test_minic(args, &out, &err);
    if (rc != 0)
        fail_msg("--threads %d: exit %d: %s", MC_MAX_THREADS, rc, err);
    free(out);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_million_operators), /* first: its peak RSS is its own */
        cmocka_unit_test(test_rank_above_max),
        cmocka_unit_test(test_shape_overflow),
        cmocka_unit_test(test_beyond_host_memory),
        cmocka_unit_test(test_huge_attribute_lists),
        cmocka_unit_test(test_long_lines),
        cmocka_unit_test(test_deep_chain),
        cmocka_unit_test(test_thread_limit),
    };
    return mc_test_run(tests);
}
