/* Tensor-parallel programs (mc_options.devices, runtime/parallel.c, docs/PARALLEL.md).
 *
 * On ref, and on cpu where it is built: the GPT-2 block of examples/ (4 heads, d 64) compiled
 * for n = 1, 2 and 4 ranks gives the unsharded program's outputs within docs/FORMAT.md §6 (f32
 * with matmuls: 1e-4), with the generator's values (filled whole, then split) and with params
 * the caller sets; every rank beyond one has its all-reduce kernels; a second run after a new
 * input agrees too; the inputs it saves are the whole values. The profile of a 2-rank run has `collective` rows, timed, with the bytes
 * reduced and busbw = algbw (2(n-1)/n = 1 for two ranks). Bad uses fail clearly: a negative
 * number of devices, a graph with symbolic dimensions, a run with a param left unbound (every
 * rank fails before its collective: nothing hangs). And the command: `--devices 2` prints the
 * same outputs as without it, `--devices 0` is refused naming the option, `--help` lists it,
 * and `--profile` shows collective rows. A hang fails through alarm().
 */
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "passes/passes.h"
#include "runtime/profile.h"
#include "runtime/runtime.h"

static mc_graph *gpt2_block(void)
{
    mc_graph *g = NULL;
    if (mc_graph_parse_file(mc_test_src("examples/gpt2_block.graph"), &g) != MC_OK)
        fail_msg("%s", mc_error_message());
    return g;
}

static mc_options options_for(mc_backend_kind kind, int devices)
{
    mc_options o = mc_test_options();
    o.backend = kind;
    o.devices = devices;
    o.quiet = false;
    return o;
}

/* The output of g (one output, f32) as doubles after a run with `seed`, or, with `params`,
 * after every param was set to params[i] (node order). */
static double *run_output(const mc_graph *g, mc_options o, uint64_t seed, void *const *params, int64_t *n,
                          mc_program **keep)
{
    mc_program *p = NULL;
    if (mc_program_compile(g, &o, &p) != MC_OK)
        fail_msg("compile (%s, devices %d): %s", mc_backend_name(o.backend), o.devices, mc_error_message());
    for (int i = 0; params && i < g->nnodes; i++)
        if (params[i]) {
            const mc_node *nd = &g->nodes[i];
            assert_int_equal(mc_program_set(p, nd->name, params[i], (size_t)mc_node_numel(nd) * mc_dtype_size(nd->dtype)),
                             MC_OK);
        }
    assert_int_equal(mc_program_fill_random(p, seed), MC_OK);
    if (mc_program_run(p) != MC_OK)
        fail_msg("run (%s, devices %d): %s", mc_backend_name(o.backend), o.devices, mc_error_message());
    mc_tensor t;
    assert_int_equal(mc_program_output(p, 0, &t), MC_OK);
    *n = (int64_t)(t.bytes / mc_dtype_size(t.dtype));
    double *x = malloc((size_t)*n * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < *n; i++)
        x[i] = mc_load_element(t.data, t.dtype, i);
    if (keep)
        *keep = p;
    else
        mc_program_free(p);
    return x;
}

static int collective_kernels(const mc_program *rank)
{
    int count = 0;
    for (int k = 0; k < rank->kp->nkernels; k++)
        count += rank->kp->kernels[k].category == KIR_COLLECTIVE;
    return count;
}

static void sharded_equals_unsharded(mc_backend_kind kind)
{
    alarm(600);
    mc_graph *g = gpt2_block();
    int64_t n0, n;
    double *want = run_output(g, options_for(kind, 0), 3, NULL, &n0, NULL);
    const int ranks[] = {1, 2, 4};
    for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++) {
        mc_program *p = NULL;
        double *got = run_output(g, options_for(kind, ranks[i]), 3, NULL, &n, &p);
        assert_int_equal(n, n0);
        double e = mc_test_rel_error(got, want, n);
        if (!(e <= 1e-4))
            fail_msg("%s, %d ranks: relative error %g against the unsharded program", mc_backend_name(kind), ranks[i], e);
        assert_non_null(p->par);
        mc_program *r0 = mc_program_ran(p);
        assert_non_null(r0);
        assert_int_equal(r0->nranks, ranks[i]);
        assert_int_equal(r0->rank, 0);
        assert_ptr_equal(r0->parent, p);
        if (ranks[i] > 1) {
            /* the block's two row-parallel linears: attention's projection and the MLP's output */
            assert_int_equal(collective_kernels(r0), 2);
            assert_int_equal(collective_kernels(mc_parallel_rank(p, ranks[i] - 1)), 2);
        }
        if (!strstr(mc_program_notes(p), "tensor parallel"))
            fail_msg("no tensor-parallel note in:\n%s", mc_program_notes(p));
        /* a new input, run again: still the unsharded program's output */
        mc_tensor x;
        int64_t xn = 2 * 32 * 64;
        float *xv = malloc((size_t)xn * sizeof *xv);
        for (int64_t k = 0; k < xn; k++)
            xv[k] = (float)sin((double)k * 0.37);
        assert_int_equal(mc_program_set(p, "x", xv, (size_t)xn * sizeof *xv), MC_OK);
        assert_int_equal(mc_program_run(p), MC_OK);
        assert_int_equal(mc_program_output(p, 0, &x), MC_OK);
        mc_program *u = NULL;
        mc_options uo = options_for(kind, 0);
        uo.quiet = true;
        assert_int_equal(mc_program_compile(g, &uo, &u), MC_OK);
        assert_int_equal(mc_program_set(u, "x", xv, (size_t)xn * sizeof *xv), MC_OK);
        assert_int_equal(mc_program_fill_random(u, 3), MC_OK);
        assert_int_equal(mc_program_run(u), MC_OK);
        mc_tensor y;
        assert_int_equal(mc_program_output(u, 0, &y), MC_OK);
        double *a = malloc((size_t)xn * sizeof *a), *b = malloc((size_t)xn * sizeof *b);
        for (int64_t k = 0; k < xn; k++) {
            a[k] = ((const float *)x.data)[k];
            b[k] = ((const float *)y.data)[k];
        }
        e = mc_test_rel_error(a, b, xn);
        if (!(e <= 1e-4))
            fail_msg("%s, %d ranks, second run: relative error %g", mc_backend_name(kind), ranks[i], e);
        free(a);
        free(b);
        free(xv);
        mc_program_free(u);
        mc_program_free(p);
        free(got);
    }
    free(want);
    mc_graph_free(g);
    alarm(0);
}

static void test_sharded_equals_unsharded_ref(void **state)
{
    (void)state;
    sharded_equals_unsharded(MC_BACKEND_REF);
}

static void test_sharded_equals_unsharded_cpu(void **state)
{
    (void)state;
#ifdef MINIC_HAVE_CPU_BACKEND
    sharded_equals_unsharded(MC_BACKEND_CPU);
#else
    print_message("no CPU backend in this build: nothing to check\n");
#endif
}

/* Params the caller sets (not the generator's) are split the same way. */
static void test_params_set_by_the_caller(void **state)
{
    (void)state;
    alarm(300);
    mc_graph *g = gpt2_block();
    void **params = calloc((size_t)g->nnodes, sizeof *params);
    for (int i = 0; i < g->nnodes; i++) {
        const mc_node *nd = &g->nodes[i];
        if (nd->op != MC_OP_PARAM)
            continue;
        int64_t numel = mc_node_numel(nd);
        float *v = malloc((size_t)numel * sizeof *v);
        for (int64_t k = 0; k < numel; k++)
            v[k] = (float)(0.05 * cos((double)(k * 7 + i)));
        params[i] = v;
    }
    int64_t n0, n;
    double *want = run_output(g, options_for(MC_BACKEND_REF, 0), 11, params, &n0, NULL);
    double *got = run_output(g, options_for(MC_BACKEND_REF, 2), 11, params, &n, NULL);
    assert_int_equal(n, n0);
    double e = mc_test_rel_error(got, want, n);
    if (!(e <= 1e-4))
        fail_msg("2 ranks with set params: relative error %g", e);
    for (int i = 0; i < g->nnodes; i++)
        free(params[i]);
    free(params);
    free(want);
    free(got);
    mc_graph_free(g);
    alarm(0);
}

/* mc_program_save_inputs of a parallel program writes the whole values (one given, the rest
 * generated): an unsharded program loading that file computes the same output. */
static void test_save_inputs_whole(void **state)
{
    (void)state;
    alarm(300);
    mc_graph *g = gpt2_block();
    mc_options o = options_for(MC_BACKEND_REF, 2);
    o.quiet = true;
    mc_program *p = NULL, *u = NULL;
    assert_int_equal(mc_program_compile(g, &o, &p), MC_OK);
    float w[64 * 64];
    for (int i = 0; i < 64 * 64; i++)
        w[i] = (float)(0.01 * ((i * 37) % 101) - 0.5);
    assert_int_equal(mc_program_set(p, "proj.w", w, sizeof w), MC_OK);
    assert_int_equal(mc_program_fill_random(p, 9), MC_OK);
    const char *path = mc_test_write_file("inputs.safetensors", "", 0);
    assert_int_equal(mc_program_save_inputs(p, path), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK);
    o.devices = 0;
    assert_int_equal(mc_program_compile(g, &o, &u), MC_OK);
    assert_int_equal(mc_program_load_weights(u, path), MC_OK);
    assert_int_equal(mc_program_load_file(u, "x", path), MC_OK);
    assert_int_equal(mc_program_run(u), MC_OK);
    mc_tensor a, b;
    assert_int_equal(mc_program_output(p, 0, &a), MC_OK);
    assert_int_equal(mc_program_output(u, 0, &b), MC_OK);
    int64_t n = (int64_t)(a.bytes / sizeof(float));
    double *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    for (int64_t i = 0; i < n; i++) {
        x[i] = ((const float *)a.data)[i];
        y[i] = ((const float *)b.data)[i];
    }
    double e = mc_test_rel_error(x, y, n);
    if (!(e <= 1e-4))
        fail_msg("unsharded from the saved inputs: relative error %g", e);
    free(x);
    free(y);
    mc_program_free(u);
    mc_program_free(p);
    mc_graph_free(g);
    alarm(0);
}

static void test_profile_has_collective_rows(void **state)
{
    (void)state;
    alarm(300);
    mc_graph *g = gpt2_block();
    mc_options o = options_for(MC_BACKEND_REF, 2);
    o.quiet = true;
    mc_program *p = NULL;
    assert_int_equal(mc_program_compile(g, &o, &p), MC_OK);
    assert_int_equal(mc_program_fill_random(p, 0), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK);
    mc_program *r0 = mc_program_ran(p);
    mc_profile prof;
    assert_int_equal(mc_profile_init(&prof, r0), MC_OK);
    assert_int_equal(mc_profile_collect(r0, 2, &prof), MC_OK);
    int rows = 0;
    for (int k = 0; k < prof.nkernels; k++) {
        if (r0->kp->kernels[k].category != KIR_COLLECTIVE)
            continue;
        rows++;
        mc_kernel_rates r = mc_profile_kernel_rates(&prof, k);
        assert_true(prof.time_us[k] > 0);
        assert_int_equal(r.ranks, 2);
        assert_int_equal(r.coll_bytes, 2 * 32 * 64 * 4); /* the block's [2, 32, 64] f32 activations */
        assert_true(r.algbw > 0);
        assert_true(fabs(r.busbw - r.algbw) <= 1e-9 * r.algbw); /* 2(n-1)/n = 1 */
    }
    assert_int_equal(rows, 2);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    mc_profile_print(&prof, f);
    fclose(f);
    if (!strstr(text, "collective") || !strstr(text, "busbw") || !strstr(text, "rank 0 of 2"))
        fail_msg("no collective rows in:\n%s", text);
    free(text);
    const char *json = mc_test_write_file("profile.json", "", 0);
    assert_int_equal(mc_profile_write_json(&prof, json), MC_OK);
    f = fopen(json, "r");
    char buf[1 << 16];
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    buf[got] = '\0';
    fclose(f);
    if (!strstr(buf, "\"category\": \"collective\"") || !strstr(buf, "\"busbw_gb_per_s\"") ||
        !strstr(buf, "\"ranks\": 2"))
        fail_msg("no collective entry in the JSON:\n%s", buf);
    mc_profile_release(&prof);
    mc_program_free(p);
    mc_graph_free(g);
    alarm(0);
}

static void test_bad_uses(void **state)
{
    (void)state;
    alarm(120);
    mc_graph *g = gpt2_block();
    mc_options o = options_for(MC_BACKEND_REF, -1);
    mc_program *p = NULL;
    assert_int_equal(mc_program_compile(g, &o, &p), MC_ERR_INPUT);
    assert_null(p);
    assert_non_null(strstr(mc_error_message(), "devices"));
    /* a param left unbound: every rank fails before its all-reduce, the run returns */
    o = options_for(MC_BACKEND_REF, 2);
    o.quiet = true;
    assert_int_equal(mc_program_compile(g, &o, &p), MC_OK);
    assert_int_equal(mc_program_run(p), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "has no value"));
    assert_int_equal(mc_program_fill_random(p, 1), MC_OK); /* and it runs after that */
    assert_int_equal(mc_program_run(p), MC_OK);
    mc_program_free(p);
    mc_graph_free(g);
    /* symbolic dimensions */
    static const char text[] = "graph sym\n"
                               "input x : f32[B, 8]\n"
                               "param w : f32[8, 8]\n"
                               "y = linear(x, w)\n"
                               "output y\n";
    assert_int_equal(mc_graph_parse_string("sym.graph", text, &g), MC_OK);
    assert_int_equal(mc_program_compile(g, &o, &p), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "symbolic"));
    mc_graph_free(g);
    alarm(0);
}

/* ---- the command ----------------------------------------------------------------------------- */

static char *out, *err;

/* The sums of the checksum lines of `minic run`'s stdout, in order; how many. */
static int checksums(const char *text, double *sums, int most)
{
    int n = 0;
    for (const char *c = strstr(text, "checksum: sum="); c && n < most; c = strstr(c + 1, "checksum: sum="))
        sums[n++] = strtod(c + strlen("checksum: sum="), NULL);
    return n;
}

static void test_command(void **state)
{
    (void)state;
    alarm(600);
    const char *g = mc_test_src("examples/gpt2_block.graph");
    double one[4], two[4];
    const char *backends[] = {"ref", "cpu"};
    for (int b = 0; b < 2; b++) {
#ifndef MINIC_HAVE_CPU_BACKEND
        if (b == 1)
            break;
#endif
        char args[4096];
        snprintf(args, sizeof args, "run %s --backend %s --seed 5", g, backends[b]);
        assert_int_equal(mc_test_minic(args, &out, &err), 0);
        int n1 = checksums(out, one, 4);
        free(out);
        free(err);
        snprintf(args, sizeof args, "run %s --backend %s --seed 5 --devices 2", g, backends[b]);
        int rc = mc_test_minic(args, &out, &err);
        if (rc != 0)
            fail_msg("minic %s: exit %d\n%s", args, rc, err);
        int n2 = checksums(out, two, 4);
        assert_int_equal(n1, 1);
        assert_int_equal(n2, 1);
        if (!(fabs(one[0] - two[0]) <= 1e-4 * fabs(one[0]) + 1e-3))
            fail_msg("%s: checksum %.9g with --devices 2, %.9g without", backends[b], two[0], one[0]);
        free(out);
        free(err);
    }
    assert_int_equal(mc_test_minic("run examples/gpt2_block.graph --devices 0", &out, &err), 1);
    if (!strstr(err, "--devices: expected a number of ranks from 1 to"))
        fail_msg("stderr: %s", err);
    free(out);
    free(err);
    assert_int_equal(mc_test_minic("run --help", &out, &err), 0);
    if (!strstr(out, "--devices N"))
        fail_msg("run --help does not list --devices:\n%s", out);
    free(out);
    free(err);
    assert_int_equal(mc_test_minic("bench --help", &out, &err), 0);
    if (!strstr(out, "--devices N"))
        fail_msg("bench --help does not list --devices:\n%s", out);
    free(out);
    free(err);
    char args[4096];
    snprintf(args, sizeof args, "run %s --backend ref --devices 2 --profile --iters 2 --quiet", g);
    assert_int_equal(mc_test_minic(args, &out, &err), 0);
    if (!strstr(out, "collective") || !strstr(out, "busbw"))
        fail_msg("no collective rows in:\n%s", out);
    free(out);
    free(err);
    snprintf(args, sizeof args, "bench %s --backend ref --devices 2 --iters 1", g);
    int rc = mc_test_minic(args, &out, &err);
    if (rc != 0 || !strstr(out, "agree"))
        fail_msg("minic %s: exit %d\n%s\n%s", args, rc, out, err);
    free(out);
    free(err);
    out = err = NULL;
    alarm(0);
}

/* minic dump --stage shard: the plan's notes, then rank 0's graph with its local shapes and
 * allreduce nodes; without --devices a user error (exit 1). */
static void test_dump_shard(void **state)
{
    (void)state;
    char args[4096];
    snprintf(args, sizeof args, "dump %s --stage shard --devices 2", mc_test_src("examples/gpt2_block.graph"));
    int rc = mc_test_minic(args, &out, &err);
    if (rc != 0)
        fail_msg("minic %s: exit %d\n%s", args, rc, err);
    assert_non_null(strstr(out, "# sharded"));
    assert_non_null(strstr(out, "allreduce("));
    int allreduces = 0;
    for (const char *c = strstr(out, "allreduce("); c; c = strstr(c + 1, "allreduce("))
        allreduces++;
    assert_int_equal(allreduces, 2);
    free(out);
    free(err);
    snprintf(args, sizeof args, "dump %s --stage shard", mc_test_src("examples/gpt2_block.graph"));
    assert_int_equal(mc_test_minic(args, &out, &err), 1);
    assert_non_null(strstr(err, "--devices"));
    free(out);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sharded_equals_unsharded_ref),
        cmocka_unit_test(test_sharded_equals_unsharded_cpu),
        cmocka_unit_test(test_params_set_by_the_caller),
        cmocka_unit_test(test_save_inputs_whole),
        cmocka_unit_test(test_profile_has_collective_rows),
        cmocka_unit_test(test_bad_uses),
        cmocka_unit_test(test_command),
        cmocka_unit_test(test_dump_shard),
    };
    return mc_test_run(tests);
}
