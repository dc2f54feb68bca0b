/* Kernels computed from params alone (kir/kir.h, "Prep kernels"; docs/FORMAT.md §5, "Kernels of
 * the params alone"): they run before the first run and again only before a run that follows a
 * new value of a param they read, never as part of a run.
 *
 * On every backend it runs on:
 *   - a param transposed and scaled before a matmul: one prep kernel; the output equals the
 *     float64 oracle; a second run runs no prep; binding the param again runs it once more and
 *     the output is the oracle's for the new value; binding the input alone runs none; queued
 *     runs (mc_program_run_async) after a new value see it; MINIC_HOIST_PARAMS=0 marks none and
 *     gives the same values;
 *   - an output computed from params alone is no prep kernel (outputs are made by every run);
 *   - the param given by mc_program_set_from_output, and fed back from an output after every run
 *     (mc_program_feed_back): the prep kernels run again each time;
 *   - an f16 conv whose weights are re-laid by K chunks (the implicit GEMM: cuda, and ref under
 *     MINIC_REF_IMPLICIT_CONV=1) and a batchnorm folded into a conv (w' and b' over the params):
 *     prep kernels, right after rebinding the weights and the batchnorm's scale;
 *   - a symbolic program (one kernel list, memory planned at the maxima): the prep kernel runs
 *     per binding's program, compiled once, the kept temp shared by the bindings' arena;
 *   - a tensor-parallel program (--devices 2 on ref and cpu): each rank's prep;
 *   - the profile leaves the prep kernels out and says how many there are; dump marks them.
 *
 * Backends: ref and cpu, and cuda where a GPU is usable; MINIC_TEST_BACKEND=ref|cpu|cuda runs
 * that one only (cuda without a GPU: exit 77).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "ir/ir.h"
#include "runtime/runtime.h"

static mc_backend_kind backends[3];
static int nbackends;

static mc_program *compile_with(const mc_graph *g, mc_backend_kind kind, int devices, bool quiet)
{
    mc_options opt = mc_test_options();
    opt.backend = kind;
    opt.quiet = quiet;
    opt.devices = devices;
    if (kind == MC_BACKEND_CUDA)
        opt.cuda_graph = 1; /* the runs replay a graph: the prep kernels must be outside it */
    mc_program *p = NULL;
    if (mc_program_compile(g, &opt, &p) != MC_OK)
        fail_msg("compile on %s: %s", mc_backend_name(kind), mc_error_message());
    return p;
}

static mc_program *compile(const mc_graph *g, mc_backend_kind kind) { return compile_with(g, kind, 0, true); }

/* n values of dtype d (f32 or f16) from seed, uniform in [lo, hi), malloc'd. */
static void *values(mc_dtype d, int64_t n, uint32_t seed, double lo, double hi)
{
    void *v = malloc((size_t)n * mc_dtype_size(d));
    assert_non_null(v);
    uint32_t s = seed * 2654435761u + 12345u;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        double u = lo + (hi - lo) * (double)(s >> 8) / (double)(1u << 24);
        if (d == MC_F16)
            ((uint16_t *)v)[i] = mc_f16_from_double(u);
        else
            ((float *)v)[i] = (float)u;
    }
    return v;
}

/* The values bound in a test: one per declaration of the graph, by name. */
typedef struct bound {
    const char *name;
    void *data;
} bound;

static size_t decl_bytes(const mc_graph *g, const char *name)
{
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].name && !strcmp(g->nodes[i].name, name))
            return (size_t)mc_node_numel(&g->nodes[i]) * mc_dtype_size(g->nodes[i].dtype);
    fail_msg("no declaration %s", name);
    return 0;
}

static void set(mc_program *p, const mc_graph *g, const char *name, const void *data)
{
    if (mc_program_set(p, name, data, decl_bytes(g, name)) != MC_OK)
        fail_msg("set %s on %s: %s", name, mc_program_backend(p), mc_error_message());
}

static void run(mc_program *p)
{
    if (mc_program_run(p) != MC_OK)
        fail_msg("run on %s: %s", mc_program_backend(p), mc_error_message());
}

/* Output `index` of p against g's float64 evaluation over the values v[0..n). */
static void expect_oracle(mc_program *p, const mc_graph *g, const bound *v, int n, int index, double tol,
                          const char *what)
{
    const void **in = calloc((size_t)g->nnodes, sizeof *in);
    assert_non_null(in);
    for (int k = 0; k < n; k++)
        for (int i = 0; i < g->nnodes; i++)
            if (g->nodes[i].name && !strcmp(g->nodes[i].name, v[k].name))
                in[i] = v[k].data;
    double **want = calloc((size_t)g->noutputs, sizeof *want);
    assert_non_null(want);
    if (mc_graph_eval(g, (const void *const *)in, true, want) != MC_OK)
        fail_msg("oracle: %s", mc_error_message());
    mc_tensor t;
    if (mc_program_output(p, index, &t) != MC_OK)
        fail_msg("output: %s", mc_error_message());
    int64_t count = (int64_t)(t.bytes / mc_dtype_size(t.dtype));
    double *got = malloc((size_t)count * sizeof *got);
    assert_non_null(got);
    for (int64_t i = 0; i < count; i++)
        got[i] = mc_load_element(t.data, t.dtype, i);
    double err = mc_test_rel_error(got, want[index], count);
    if (!(err <= tol))
        fail_msg("%s on %s: relative error %g against the oracle (tolerance %g)", what, mc_program_backend(p), err,
                 tol);
    free(got);
    for (int i = 0; i < g->noutputs; i++)
        free(want[i]);
    free(want);
    free(in);
}

/* The prep kernels of p (for a symbolic program: of its last run's binding) and how often they ran. */
static int nprep(mc_program *p) { return mc_program_ran(p) && mc_program_ran(p)->kp ? mc_program_ran(p)->kp->nprep : p->kp->nprep; }
static int64_t preps(mc_program *p) { return mc_program_ran(p) ? mc_program_ran(p)->preps : p->preps; }

static const char *const scaled =
    "graph scaled\n"
    "input x : f32[4, 8]\n"
    "param w : f32[6, 8]\n"
    "t = transpose(w, perm=[1, 0])\n"
    "s = mul(t, 0.5)\n"
    "y = matmul(x, s)\n"
    "output y\n";

static void test_transpose_scale(void **state)
{
    (void)state;
    mc_graph *g = mc_test_parse(scaled);
    for (int i = 0; i < nbackends; i++) {
        mc_program *p = compile_with(g, backends[i], 0, false);
        assert_int_equal(p->kp->nprep, 1);
        assert_non_null(strstr(mc_program_notes(p), "1 kernels computed from the params alone"));
        bound v[2] = {{"x", values(MC_F32, 32, 1, -1, 1)}, {"w", values(MC_F32, 48, 2, -1, 1)}};
        set(p, g, "x", v[0].data);
        set(p, g, "w", v[1].data);
        run(p);
        assert_int_equal(preps(p), 1);
        expect_oracle(p, g, v, 2, 0, 1e-6, "first run");
        run(p); /* nothing bound since: no prep */
        assert_int_equal(preps(p), 1);
        expect_oracle(p, g, v, 2, 0, 1e-6, "second run");
        free(v[1].data);
        v[1].data = values(MC_F32, 48, 3, -2, 2);
        set(p, g, "w", v[1].data);
        run(p);
        assert_int_equal(preps(p), 2);
        expect_oracle(p, g, v, 2, 0, 1e-6, "after binding w again");
        free(v[0].data);
        v[0].data = values(MC_F32, 32, 4, -1, 1);
        set(p, g, "x", v[0].data); /* an input alone: no prep */
        run(p);
        assert_int_equal(preps(p), 2);
        expect_oracle(p, g, v, 2, 0, 1e-6, "after binding x");
        free(v[1].data);
        v[1].data = values(MC_F32, 48, 5, -1, 1);
        set(p, g, "w", v[1].data);
        assert_int_equal(mc_program_run_async(p), MC_OK); /* the prep queued ahead of the run */
        assert_int_equal(mc_program_run_async(p), MC_OK);
        assert_int_equal(mc_program_wait(p), MC_OK);
        assert_int_equal(preps(p), 3);
        expect_oracle(p, g, v, 2, 0, 1e-6, "queued runs after binding w");
        mc_program_free(p);

        setenv("MINIC_HOIST_PARAMS", "0", 1); /* every kernel in every run, as before */
        p = compile(g, backends[i]);
        unsetenv("MINIC_HOIST_PARAMS");
        assert_int_equal(p->kp->nprep, 0);
        set(p, g, "x", v[0].data);
        set(p, g, "w", v[1].data);
        run(p);
        assert_int_equal(preps(p), 0);
        expect_oracle(p, g, v, 2, 0, 1e-6, "MINIC_HOIST_PARAMS=0");
        mc_program_free(p);
        free(v[0].data);
        free(v[1].data);
    }
    mc_graph_free(g);
}

/* An output computed from params alone is made by every run: no prep kernel writes it. */
static void test_output_of_params(void **state)
{
    (void)state;
    mc_graph *g = mc_test_parse("graph out\n"
                        "param w : f32[6, 8]\n"
                        "t = transpose(w, perm=[1, 0])\n"
                        "s = mul(t, 0.5)\n"
                        "output s\n");
    for (int i = 0; i < nbackends; i++) {
        mc_program *p = compile(g, backends[i]);
        assert_int_equal(p->kp->nprep, 0);
        bound v = {"w", values(MC_F32, 48, 6, -1, 1)};
        set(p, g, "w", v.data);
        run(p);
        expect_oracle(p, g, &v, 1, 0, 1e-7, "an output of params");
        free(v.data);
        v.data = values(MC_F32, 48, 7, -1, 1);
        set(p, g, "w", v.data);
        run(p);
        expect_oracle(p, g, &v, 1, 0, 1e-7, "an output of params bound again");
        free(v.data);
        mc_program_free(p);
    }
    mc_graph_free(g);
}

/* The param given by another program's output, then fed back from its own output after every
 * run: each new value runs the prep kernels again. */
static void test_param_from_outputs(void **state)
{
    (void)state;
    mc_graph *g = mc_test_parse("graph fb\n"
                        "input x : f32[4, 8]\n"
                        "param w : f32[6, 8]\n"
                        "t = transpose(w, perm=[1, 0])\n"
                        "s = mul(t, 0.5)\n"
                        "y = matmul(x, s)\n"
                        "w2 = add(w, 1)\n"
                        "output y, w2\n");
    mc_graph *src = mc_test_parse("graph src\ninput a : f32[6, 8]\nb = mul(a, 3)\noutput b\n");
    for (int i = 0; i < nbackends; i++) {
        mc_program *p = compile(g, backends[i]), *q = compile(src, backends[i]);
        assert_int_equal(p->kp->nprep, 1);
        bound v[2] = {{"x", values(MC_F32, 32, 8, -1, 1)}, {"w", values(MC_F32, 48, 9, -1, 1)}};
        float *a = values(MC_F32, 48, 10, -1, 1);
        set(p, g, "x", v[0].data);
        set(p, g, "w", v[1].data);
        run(p);
        assert_int_equal(preps(p), 1);
        set(q, src, "a", a);
        run(q);
        assert_int_equal(mc_program_set_from_output(p, "w", q, 0), MC_OK); /* w = 3a */
        for (int k = 0; k < 48; k++)
            ((float *)v[1].data)[k] = 3 * a[k];
        run(p);
        assert_int_equal(preps(p), 2);
        expect_oracle(p, g, v, 2, 0, 1e-6, "w given by another program's output");
        bool in_place = false;
        assert_int_equal(mc_program_feed_back(p, "w", 1, &in_place), MC_OK); /* w <- w + 1 after each run */
        for (int r = 0; r < 3; r++) {
            run(p); /* reads w, then w becomes w + 1 */
            expect_oracle(p, g, v, 2, 0, 1e-6, "w fed back");
            for (int k = 0; k < 48; k++)
                ((float *)v[1].data)[k] += 1;
        }
        assert_int_equal(preps(p), 4); /* the first run fed back read the value given before */
        free(a);
        free(v[0].data);
        free(v[1].data);
        mc_program_free(p);
        mc_program_free(q);
    }
    mc_graph_free(g);
    mc_graph_free(src);
}

/* A param that the source program feeds its output back to is not shared: src's runs change
 * it, and dst's kernels from the params alone (0.5 w here) would not see the change while its
 * other kernels (x w) would (the review of 2026-11-28). dst keeps its own value. */
static void test_share_fed_back(void **state)
{
    (void)state;
    mc_graph *gs = mc_test_parse("graph src\nparam w : f32[2, 3]\nw2 = add(w, 1)\noutput w2\n");
    mc_graph *gd = mc_test_parse("graph dst\ninput x : f32[1, 2]\nparam w : f32[2, 3]\n"
                                 "s = mul(w, 0.5)\ny = matmul(x, s)\nz = matmul(x, w)\noutput y, z\n");
    for (int i = 0; i < nbackends; i++) {
        mc_program *src = compile(gs, backends[i]), *dst = compile(gd, backends[i]);
        assert_int_equal(dst->kp->nprep, 1);
        float w[6] = {1, 2, 3, 4, 5, 6}, x[2] = {1, 0}, mine[6] = {7, 8, 9, 10, 11, 12};
        set(src, gs, "w", w);
        set(dst, gd, "w", mine);
        set(dst, gd, "x", x);
        bool in_place = false;
        assert_int_equal(mc_program_feed_back(src, "w", 0, &in_place), MC_OK);
        int shared = -1;
        assert_int_equal(mc_program_share_params(dst, src, &shared), MC_OK);
        assert_int_equal(shared, 0);
        for (int r = 0; r < 3; r++) {
            run(dst);
            run(src); /* w of src becomes w + 1 */
            mc_tensor y, z;
            assert_int_equal(mc_program_output(dst, 0, &y), MC_OK);
            assert_int_equal(mc_program_output(dst, 1, &z), MC_OK);
            for (int k = 0; k < 3; k++) {
                assert_float_equal(((const float *)z.data)[k], mine[k], 0);
                assert_float_equal(((const float *)y.data)[k], 0.5f * mine[k], 0);
            }
        }
        mc_program_free(src);
        mc_program_free(dst);
    }
    mc_graph_free(gs);
    mc_graph_free(gd);
}

/* An f16 conv of 32 channels: on cuda (and on ref under MINIC_REF_IMPLICIT_CONV=1) an implicit
 * GEMM whose weights a prep kernel re-lays by K chunks. */
static void test_conv_kchunk(void **state)
{
    (void)state;
    mc_graph *g = mc_test_parse("graph cv\n"
                        "input x : f16[2, 32, 6, 6]\n"
                        "param w : f16[16, 32, 3, 3]\n"
                        "y = conv(x, w, padding=[1, 1])\n"
                        "output y\n");
    for (int i = 0; i < nbackends; i++) {
        setenv("MINIC_REF_IMPLICIT_CONV", "1", 1);
        mc_program *p = compile(g, backends[i]);
        unsetenv("MINIC_REF_IMPLICIT_CONV");
        /* The CPU takes the im2col copies: its weights are a view, its prep kernels the padding's
         * zeros, which read no param. */
        bool reads_w = p->kp->buffers[mc_program_find(p, "w")].prep_read;
        assert_true(reads_w == (backends[i] != MC_BACKEND_CPU));
        bound v[2] = {{"x", values(MC_F16, 2 * 32 * 36, 11, -1, 1)}, {"w", values(MC_F16, 16 * 32 * 9, 12, -0.2, 0.2)}};
        set(p, g, "x", v[0].data);
        set(p, g, "w", v[1].data);
        run(p);
        run(p);
        assert_int_equal(preps(p), p->kp->nprep > 0 ? 1 : 0);
        expect_oracle(p, g, v, 2, 0, 3e-3, "f16 conv");
        free(v[1].data);
        v[1].data = values(MC_F16, 16 * 32 * 9, 13, -0.2, 0.2);
        set(p, g, "w", v[1].data);
        run(p);
        assert_int_equal(preps(p), (p->kp->nprep > 0) + reads_w);
        expect_oracle(p, g, v, 2, 0, 3e-3, "f16 conv after binding w again");
        free(v[0].data);
        free(v[1].data);
        mc_program_free(p);
    }
    mc_graph_free(g);
}

/* relu(batchnorm(conv(x, w, b))) with every statistic a param: folded into w' and b', computed by
 * prep kernels (the weights outnumber the outputs: folded only because they are). */
static void test_batchnorm_fold(void **state)
{
    (void)state;
    mc_graph *g = mc_test_parse("graph bn\n"
                        "input x : f32[1, 8, 4, 4]\n"
                        "param w : f32[16, 8, 3, 3]\n"
                        "param b : f32[16]\n"
                        "param scale : f32[16]\n"
                        "param bias : f32[16]\n"
                        "param mean : f32[16]\n"
                        "param var : f32[16]\n"
                        "c = conv(x, w, b, padding=[1, 1])\n"
                        "n = batchnorm(c, scale, bias, mean, var)\n"
                        "y = relu(n)\n"
                        "output y\n");
    for (int i = 0; i < nbackends; i++) {
        for (int hoist = 1; hoist >= 0; hoist--) {
            if (!hoist)
                setenv("MINIC_HOIST_PARAMS", "0", 1);
            mc_program *p = compile(g, backends[i]);
            unsetenv("MINIC_HOIST_PARAMS");
            if (hoist)
                assert_true(p->kp->nprep >= 2); /* w' and b' */
            else
                assert_int_equal(p->kp->nprep, 0);
            bound v[7] = {{"x", values(MC_F32, 128, 14, -1, 1)},    {"w", values(MC_F32, 1152, 15, -0.3, 0.3)},
                          {"b", values(MC_F32, 16, 16, -1, 1)},     {"scale", values(MC_F32, 16, 17, 0.5, 2)},
                          {"bias", values(MC_F32, 16, 18, -1, 1)},  {"mean", values(MC_F32, 16, 19, -0.5, 0.5)},
                          {"var", values(MC_F32, 16, 20, 0.5, 2)}};
            for (int k = 0; k < 7; k++)
                set(p, g, v[k].name, v[k].data);
            run(p);
            run(p);
            assert_int_equal(preps(p), hoist ? 1 : 0);
            expect_oracle(p, g, v, 7, 0, 1e-5, "batchnorm folded into the conv");
            free(v[3].data);
            v[3].data = values(MC_F32, 16, 21, -2, -0.5); /* a new scale: w' and b' change sign */
            set(p, g, "scale", v[3].data);
            run(p);
            assert_int_equal(preps(p), hoist ? 2 : 0);
            expect_oracle(p, g, v, 7, 0, 1e-5, "batchnorm folded, scale bound again");
            for (int k = 0; k < 7; k++)
                free(v[k].data);
            mc_program_free(p);
        }
    }
    mc_graph_free(g);
}

/* One symbolic program: the prep kernel's kept temp in the arena every binding shares. */
static void test_symbolic(void **state)
{
    (void)state;
    mc_graph *g = mc_test_parse("graph sym\n"
                        "input x : f32[B<=8, 8]\n"
                        "param w : f32[6, 8]\n"
                        "t = transpose(w, perm=[1, 0])\n"
                        "s = mul(t, 0.5)\n"
                        "y = matmul(x, s)\n"
                        "output y\n");
    const int64_t sizes[] = {2, 5, 2, 5, 3};
    for (int i = 0; i < nbackends; i++) {
        mc_program *p = compile(g, backends[i]);
        bound v[2] = {{"x", NULL}, {"w", values(MC_F32, 48, 22, -1, 1)}};
        for (int r = 0; r < 5; r++) {
            if (r == 2) { /* a new w: every binding's prep runs again */
                free(v[1].data);
                v[1].data = values(MC_F32, 48, 23, -1, 1);
            }
            char text[256];
            snprintf(text, sizeof text, "graph sym\ninput x : f32[%lld, 8]\nparam w : f32[6, 8]\n"
                     "t = transpose(w, perm=[1, 0])\ns = mul(t, 0.5)\ny = matmul(x, s)\noutput y\n", (long long)sizes[r]);
            mc_graph *sg = mc_test_parse(text);
            v[0].data = values(MC_F32, sizes[r] * 8, 24 + (uint32_t)r, -1, 1);
            assert_int_equal(mc_program_set(p, "x", v[0].data, (size_t)sizes[r] * 8 * sizeof(float)), MC_OK);
            assert_int_equal(mc_program_set(p, "w", v[1].data, 48 * sizeof(float)), MC_OK);
            run(p);
            assert_int_equal(nprep(p), 1);
            expect_oracle(p, sg, v, 2, 0, 1e-6, "a binding of a symbolic program");
            free(v[0].data);
            mc_graph_free(sg);
        }
        assert_int_equal(mc_program_compilations(p), 1);
        free(v[1].data);
        mc_program_free(p);
    }
    mc_graph_free(g);
}

/* Two ranks on the host (ref, cpu): each rank runs its prep kernels. */
static void test_parallel(void **state)
{
    (void)state;
    mc_graph *g = mc_test_parse(scaled);
    for (int i = 0; i < nbackends; i++) {
        if (backends[i] == MC_BACKEND_CUDA)
            continue; /* one GPU here at most */
        mc_program *p = compile_with(g, backends[i], 2, true);
        bound v[2] = {{"x", values(MC_F32, 32, 30, -1, 1)}, {"w", values(MC_F32, 48, 31, -1, 1)}};
        set(p, g, "x", v[0].data);
        set(p, g, "w", v[1].data);
        run(p);
        expect_oracle(p, g, v, 2, 0, 1e-6, "two ranks");
        free(v[1].data);
        v[1].data = values(MC_F32, 48, 32, -1, 1);
        set(p, g, "w", v[1].data);
        run(p);
        expect_oracle(p, g, v, 2, 0, 1e-6, "two ranks, w bound again");
        mc_program *r0 = mc_parallel_rank(p, 0);
        assert_non_null(r0);
        assert_int_equal(r0->preps, r0->kp->nprep > 0 ? 2 : 0);
        free(v[0].data);
        free(v[1].data);
        mc_program_free(p);
    }
    mc_graph_free(g);
}

/* The profile neither times nor lists the prep kernel, and says how many there are; the dump
 * marks it. */
static void test_profile_and_dump(void **state)
{
    (void)state;
    const char *path = mc_test_write_file("scaled.graph", scaled, strlen(scaled));
    const char *json = mc_test_write_file("scaled.json", "", 0);
    char args[1024], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "run %s --backend ref --profile --iters 2 --profile-json %s", path, json);
    assert_int_equal(mc_test_minic(args, &out, &err), 0);
    assert_non_null(strstr(out, "prep: 1 kernels computed from the params alone"));
    assert_null(strstr(out, "pw_fused_transpose_mul_0 "));
    assert_non_null(strstr(out, "totals: 1 kernels, 1 launches per run"));
    free(out);
    free(err);
    FILE *f = fopen(json, "rb");
    assert_non_null(f);
    char text[8192] = "";
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    assert_non_null(strstr(text, "\"prep_kernels\": [\n    { \"name\": \"pw_fused_transpose_mul_0\""));
    assert_non_null(strstr(text, "\"kernels\": 1, \"prep_kernels\": 1"));
    assert_null(strstr(text, "\"kernels\": [\n    { \"name\": \"pw_fused_transpose_mul_0\""));
    snprintf(args, sizeof args, "dump %s --stage fused --backend ref", path);
    assert_int_equal(mc_test_minic(args, &out, &err), 0);
    assert_non_null(strstr(out, "# 1 prep kernels"));
    assert_non_null(strstr(out, "prep: computed from params alone"));
    assert_non_null(strstr(out, "kept across runs"));
    free(out);
    free(err);
}

int main(void)
{
    int rc = mc_test_backends(backends, &nbackends);
    if (rc)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transpose_scale),
        cmocka_unit_test(test_output_of_params),
        cmocka_unit_test(test_param_from_outputs),
        cmocka_unit_test(test_share_fed_back),
        cmocka_unit_test(test_conv_kchunk),
        cmocka_unit_test(test_batchnorm_fold),
        cmocka_unit_test(test_symbolic),
        cmocka_unit_test(test_parallel),
        cmocka_unit_test(test_profile_and_dump),
    };
    return mc_test_run(tests);
}
