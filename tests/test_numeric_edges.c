/* Numerics at the edges of the formats, on every backend built here (ref, cpu; cuda where a GPU
 * is usable), fused and unfused, against the float64 oracle (mc_graph_eval, exact):
 *
 *   - layernorm and rmsnorm of rows whose squares overflow f32 (|x| about 1e20, 1e30, +-3e38)
 *     or underflow it (1e-30 with eps = 0), constant huge rows, and ordinary rows beside them:
 *     O(1) results as float64 gives, where the unscaled formula returned zeros or NaN;
 *   - f16 and bf16 norms, softmax and mean whose intermediate sums pass the half type's range
 *     (they compute in f32 and are cast back);
 *   - a half-typed value never leaves its type's range, fused or not: f16 mul(h, h) / 300
 *     cast to f32 is inf (it was 1.43e7 fused), exactly where a rounding cast overflows;
 *   - softmax and log_softmax of x * s with a product of 1e37 (the cpu's multiply-add).
 *
 * sin and cos of huge arguments are in tests/test_cpu_math.c (the cpu backend's own code).
 */
#include "testlib.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

/* ---- running a graph everywhere --------------------------------------------------------- */

typedef struct {
    const char *name;
    const void *data; /* in the input's dtype */
    size_t bytes;
} binding;

static mc_graph *parse(const char *text)
{
    mc_graph *g = NULL;
    if (mc_graph_parse_string("edges.graph", text, &g) != MC_OK)
        fail_msg("%s", mc_error_message());
    return g;
}

/* Output o of g run on `kind` (fuse or not) with the bindings, as doubles (malloc'd). */
static double *run_output(const mc_graph *g, mc_backend_kind kind, bool fuse, const binding *b, int nb, int o)
{
    mc_options opt = mc_options_default();
    opt.backend = kind;
    opt.fuse = fuse;
    opt.quiet = true;
    mc_program *p = NULL;
    if (mc_program_compile(g, &opt, &p) != MC_OK)
        fail_msg("%s: %s", mc_backend_name(kind), mc_error_message());
    for (int i = 0; i < nb; i++)
        if (mc_program_set(p, b[i].name, b[i].data, b[i].bytes) != MC_OK)
            fail_msg("%s", mc_error_message());
    assert_int_equal(mc_program_fill_random(p, 3), MC_OK);
    if (mc_program_run(p) != MC_OK)
        fail_msg("%s", mc_error_message());
    mc_tensor t;
    assert_int_equal(mc_program_output(p, o, &t), MC_OK);
    int64_t n = (int64_t)(t.bytes / mc_dtype_size(t.dtype));
    double *out = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    assert_non_null(out);
    for (int64_t i = 0; i < n; i++)
        out[i] = mc_load_element(t.data, t.dtype, i);
    mc_program_free(p);
    return out;
}

/* The float64 oracle's output o (inputs from one unfused ref program, so that the random params
 * are the same), rounded to the output's dtype. */
static double *oracle_output(const mc_graph *g, const binding *b, int nb, int o)
{
    mc_options opt = mc_options_default();
    opt.backend = MC_BACKEND_REF;
    opt.quiet = true;
    mc_program *p = NULL;
    assert_int_equal(mc_program_compile(g, &opt, &p), MC_OK);
    for (int i = 0; i < nb; i++)
        assert_int_equal(mc_program_set(p, b[i].name, b[i].data, b[i].bytes), MC_OK);
    assert_int_equal(mc_program_fill_random(p, 3), MC_OK);
    const void **inputs = calloc((size_t)g->nnodes, sizeof *inputs);
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == MC_OP_INPUT || g->nodes[i].op == MC_OP_PARAM) {
            int buf = mc_program_find(p, g->nodes[i].name);
            inputs[i] = buf >= 0 ? p->host[buf] : NULL;
        }
    double **outs = calloc((size_t)g->noutputs, sizeof *outs);
    if (mc_graph_eval(g, inputs, true, outs) != MC_OK)
        fail_msg("%s", mc_error_message());
    const mc_node *n = &g->nodes[g->outputs[o]];
    double *r = outs[o];
    for (int64_t i = 0; i < mc_node_numel(n); i++)
        r[i] = mc_round_to_dtype(r[i], n->dtype);
    for (int i = 0; i < g->noutputs; i++)
        if (i != o)
            free(outs[i]);
    free(outs);
    free(inputs);
    mc_program_free(p);
    return r;
}

typedef void (*output_check)(const double *got, int64_t n, const char *where);

/* Output o on every backend, fused and unfused: within tol of the oracle (NaN and inf must
 * match it exactly), and `check` (if any) on what it computed. */
static void everywhere(const mc_graph *g, const binding *b, int nb, int o, double tol, output_check check)
{
    const mc_node *n = &g->nodes[g->outputs[o]];
    int64_t len = mc_node_numel(n);
    double *want = oracle_output(g, b, nb, o);
    mc_backend_kind kinds[3] = {MC_BACKEND_REF, MC_BACKEND_CPU, MC_BACKEND_CUDA};
    for (int k = 0; k < 3; k++) {
#ifndef MINIC_HAVE_CPU_BACKEND
        if (kinds[k] == MC_BACKEND_CPU)
            continue;
#endif
        if (kinds[k] == MC_BACKEND_CUDA && !mc_test_have_gpu())
            continue;
        for (int fuse = 0; fuse < 2; fuse++) {
            double *got = run_output(g, kinds[k], fuse, b, nb, o);
            char where[128];
            snprintf(where, sizeof where, "%s, %s, output %d", mc_backend_name(kinds[k]),
                     fuse ? "fused" : "unfused", o);
            double err = mc_test_rel_error(got, want, len);
            if (!(err <= tol)) {
                for (int64_t i = 0; i < len && i < 8; i++)
                    print_error("  [%lld] got %.9g want %.9g\n", (long long)i, got[i], want[i]);
                fail_msg("%s: relative error %.3g > %.3g", where, err, tol);
            }
            if (check)
                check(got, len, where);
            free(got);
        }
    }
    free(want);
}

static void all_finite_and_moderate(const double *got, int64_t n, const char *where)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(got[i]) || fabs(got[i]) > 100)
            fail_msg("%s: element %lld is %.9g (want a finite O(1) value)", where, (long long)i, got[i]);
}

static void all_finite(const double *got, int64_t n, const char *where)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(got[i]))
            fail_msg("%s: element %lld is %.9g, want finite", where, (long long)i, got[i]);
}

/* ---- norms -------------------------------------------------------------------------------- */

enum { ROWS = 8, COLS = 64 };

/* Rows: 1e30 scale, +-3e38, ordinary, 1e-30, constant 1e30, 1e20 (squares 1e40), 3e38 in
 * one element of an ordinary row, 1e35 scale. */
static void norm_rows(float *x)
{
    for (int j = 0; j < COLS; j++) {
        double u = (double)((j * 37) % 61) / 30.0 - 1.0; /* in [-1, 1] */
        x[0 * COLS + j] = (float)(1e30 * u);
        x[1 * COLS + j] = (j * 7) % 3 ? 3e38f : -3e38f;
        x[2 * COLS + j] = (float)(2.5 * u + 0.5);
        x[3 * COLS + j] = (float)(1e-30 * u);
        x[4 * COLS + j] = 1e30f;
        x[5 * COLS + j] = (float)(1e20 * u);
        x[6 * COLS + j] = j == 5 ? 3e38f : (float)u;
        x[7 * COLS + j] = (float)(1e35 * u - 2e34);
    }
}

static void test_norms_of_huge_rows(void **state)
{
    (void)state;
    static float x[ROWS * COLS];
    norm_rows(x);
    char text[512];
    snprintf(text, sizeof text,
             "graph norms\ninput x : f32[%d, %d]\nparam w : f32[%d]\nparam b : f32[%d]\n"
             "y = layernorm(x, w, b, eps=1e-5)\nr = rmsnorm(x, w, eps=1e-6)\noutput y, r\n",
             ROWS, COLS, COLS, COLS);
    mc_graph *g = parse(text);
    binding b[1] = {{"x", x, sizeof x}};
    everywhere(g, b, 1, 0, 1e-5, all_finite_and_moderate);
    everywhere(g, b, 1, 1, 1e-5, all_finite_and_moderate);
    mc_graph_free(g);
}

/* With eps = 0 nothing keeps a row of tiny values from rounding its squares to zero but the
 * scaling: rows of 1e-25 and of subnormals still give O(1) results. */
static void test_norms_of_tiny_rows_without_eps(void **state)
{
    (void)state;
    static float x[4 * COLS];
    for (int j = 0; j < COLS; j++) {
        double u = (double)((j * 37) % 61) / 30.0 - 1.0;
        x[0 * COLS + j] = (float)(1e-25 * u + 3e-25);
        x[1 * COLS + j] = (float)(1e-40 * (u + 1.5)); /* subnormal */
        x[2 * COLS + j] = (float)(u + 2);
        x[3 * COLS + j] = (float)(1e-20 * (u + 1.5));
    }
    char text[512];
    snprintf(text, sizeof text,
             "graph tiny\ninput x : f32[4, %d]\nparam w : f32[%d]\nparam b : f32[%d]\n"
             "y = layernorm(x, w, b, eps=0)\nr = rmsnorm(x, w, eps=0)\noutput y, r\n",
             COLS, COLS, COLS);
    mc_graph *g = parse(text);
    binding b[1] = {{"x", x, sizeof x}};
    /* subnormal inputs carry few bits: the tolerance is the input's own precision there */
    everywhere(g, b, 1, 0, 1e-4, all_finite_and_moderate);
    everywhere(g, b, 1, 1, 1e-4, all_finite_and_moderate);
    mc_graph_free(g);
}

/* f16 and bf16 composites compute in f32: a row of 768 values near +-100 has a sum of squares
 * of 7.7e6, far past f16's 65504, and a softmax or mean over 70000 elements sums past it. */
static void test_half_composites(void **state)
{
    (void)state;
    enum { R = 4, C = 768, LONG = 70000 };
    static uint16_t h[R * C], hb[R * C], hl[LONG];
    for (int i = 0; i < R * C; i++) {
        double v = 100.0 * (double)((i * 37) % 61) / 30.0 - 90.0;
        h[i] = mc_f16_from_double(v);
        hb[i] = mc_bf16_from_double(v * 1e20);
    }
    for (int i = 0; i < LONG; i++)
        hl[i] = mc_f16_from_double(1.0 + (double)(i % 7) / 8.0);
    char text[1024];
    snprintf(text, sizeof text,
             "graph halves\ninput h : f16[%d, %d]\ninput hb : bf16[%d, %d]\ninput hl : f16[1, %d]\n"
             "param w : f16[%d]\nparam b : f16[%d]\nparam wb : bf16[%d]\n"
             "y = layernorm(h, w, b, eps=1e-5)\nr = rmsnorm(hb, wb, eps=1e-6)\n"
             "s = softmax(hl, axis=-1)\nm = mean(hl, axis=-1)\noutput y, r, s, m\n",
             R, C, R, C, LONG, C, C, C);
    mc_graph *g = parse(text);
    binding b[3] = {{"h", h, sizeof h}, {"hb", hb, sizeof hb}, {"hl", hl, sizeof hl}};
    for (int o = 0; o < 4; o++)
        everywhere(g, b, 3, o, 1e-2, all_finite_and_moderate);
    mc_graph_free(g);
}

/* softmax and log_softmax of x * s (s not a power of two) where a product is 1.4e37: the cpu
 * backend fused x * s - max into one multiply-add, whose exact product minus the rounded max
 * left about 1e30 at the max element (exp: inf; the row: inf or NaN). Found by the random
 * graphs with edge values. */
static void test_softmax_of_huge_products(void **state)
{
    (void)state;
    static float x[2 * 8] = {0.9724837f, -0.7233907f, 1.0041326f, -2.5e38f, 0.0f, 1.004711f, 0.9907525f, 0.9762670f,
                             1.5f, -2.0f, 3.0e30f, 0.25f, -1.0f, 2.0f, 0.5f, 7.0f};
    static float sc[8] = {0.43702567f, 0.4337095f, 0.09377360f, -0.05533671f, 0.19965386f, -0.90726876f,
                          0.90996003f, -0.37701476f};
    mc_graph *g = parse("graph sm\ninput x : f32[2, 8]\ninput s : f32[8]\nt = mul(x, s)\n"
                        "y = log_softmax(t, axis=1)\nz = softmax(t, axis=1)\noutput y, z\n");
    binding b[2] = {{"x", x, sizeof x}, {"s", sc, sizeof sc}};
    everywhere(g, b, 2, 0, 1e-5, all_finite);
    everywhere(g, b, 2, 1, 1e-5, all_finite);
    mc_graph_free(g);
}

/* ---- half types keep their range ------------------------------------------------------------ */

static void all_infinite(const double *got, int64_t n, const char *where)
{
    for (int64_t i = 0; i < n; i++)
        if (!isinf(got[i]))
            fail_msg("%s: element %lld is %.9g, want +-inf (the value overflows the half type)", where,
                     (long long)i, got[i]);
}


/* The repro: h * h / 300 of f16 h near the top of its range, cast to f32, was 1.43e7
 * fused (f32 intermediates) and inf unfused (h * h stored as f16). Both are inf now, and the
 * float64 oracle agrees (a half value saturates there too). bf16 the same at 1e20. */
static void test_half_values_saturate(void **state)
{
    (void)state;
    enum { N = 67 };
    static uint16_t h[N], hb[N];
    for (int i = 0; i < N; i++) {
        h[i] = mc_f16_from_double((i % 2 ? -1 : 1) * (60000.0 + 8.0 * i));
        hb[i] = mc_bf16_from_double((i % 3 ? 1 : -1) * 1e20 * (1 + i / 64.0));
    }
    char text[512];
    snprintf(text, sizeof text,
             "graph saturate\ninput h : f16[%d]\ninput hb : bf16[%d]\n"
             "p = mul(h, h)\nq = div(p, 300)\ny = cast(q, to=f32)\n"
             "pb = mul(hb, hb)\nqb = div(pb, 1e10)\nyb = cast(qb, to=f32)\n"
             "a = abs(h)\ns = sum(a, axis=-1)\nys = cast(s, to=f32)\n"
             "output y, yb, ys\n", N, N);
    mc_graph *g = parse(text);
    binding b[2] = {{"h", h, sizeof h}, {"hb", hb, sizeof hb}};
    everywhere(g, b, 2, 0, 0, all_infinite);
    everywhere(g, b, 2, 1, 0, all_infinite);
    everywhere(g, b, 2, 2, 0, all_infinite); /* a sum of f16 past 65504 */
    mc_graph_free(g);

    /* the bound is the rounding cast's: 65504 + 15.99 stays finite (f32 precision while it is
     * not stored), 65504 + 16 = 65520 rounds to 65536 in f16, which is inf */
    static uint16_t top[N];
    for (int i = 0; i < N; i++)
        top[i] = mc_f16_from_double(65504.0);
    mc_graph *g2 = parse("graph bound\ninput h : f16[67]\n"
                         "a = add(h, 15.99)\nya = cast(a, to=f32)\n"
                         "c = add(h, 16)\nyc = cast(c, to=f32)\noutput ya, yc\n");
    binding t[1] = {{"h", top, sizeof top}};
    everywhere(g2, t, 1, 0, 1e-3, all_finite);
    everywhere(g2, t, 1, 1, 0, all_infinite);
    mc_graph_free(g2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_norms_of_huge_rows),
        cmocka_unit_test(test_norms_of_tiny_rows_without_eps),
        cmocka_unit_test(test_half_composites),
        cmocka_unit_test(test_softmax_of_huge_products),
        cmocka_unit_test(test_half_values_saturate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
