/* The operator conformance harness, shared by tests/test_ops.c and tests/test_ops_*.c.
 *
 * A case is a graph built through the public builders (include/minic.h) plus an expectation
 * computed in the test by an independent route (explicit loops, a different formula, values
 * worked out by hand). Every case is checked twice:
 *
 *   (a) the oracle: mc_graph_eval(exact) against the expectation, to ~1e-12 for floats and
 *       exactly for i32 and bool; where every operator of the graph is an output and there are
 *       no constants, mc_graph_eval(rounded) must also equal the expectation rounded to the
 *       output's dtype, bit for bit (the f16/bf16 rounding rule of the reference backend);
 *   (b) the backends: for every backend that is available here (ref always, cpu when built
 *       with LLVM, cuda when a GPU is usable), fused and unfused, the compiled program's
 *       outputs against mc_graph_eval(exact) within docs/FORMAT.md §6's tolerances: after a first
 *       run, after a second run on the same inputs (no state may leak from run to run), and
 *       after new values are bound to every input (a changed input must be seen).
 *
 * Cases may also name a graph file (the example workloads): those have no expectation of their
 * own and are checked by part (b) alone.
 *
 * Inputs come from the seeded generator (mc_fill_random, seeded by the case's number), then
 * optionally from the case's `positive` flag (|x| + 1/8, for log and friends) and its
 * `prepare` hook (special values: NaN, inf, zero divisors, INT32_MIN...).
 *
 * A backend that is not available is reported as skipped on stdout, with the reason; nothing
 * is counted as passed that did not run.
 *
 * Adding a case: a build function (declare inputs with mc_input/mc_param one statement at a
 * time, since the order of declaration is the order of `in`, and C leaves the evaluation order
 * of arguments unspecified), an expect function written from the operator's definition for
 * the case's fixed shapes, and a line in a table. A new backend is checked by every case as
 * soon as its kind is added to ops_check_backends.
 */
#ifndef MINIC_OPS_CONFORMANCE_H
#define MINIC_OPS_CONFORMANCE_H

#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "runtime/runtime.h"

/* Part (b): on by default; -DOPS_CHECK_BACKENDS=0 checks the oracle alone. */
#ifndef OPS_CHECK_BACKENDS
#define OPS_CHECK_BACKENDS 1
#endif

#define SHAPE(...) (const int64_t[]){__VA_ARGS__}, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
#define AXES(...) (const int[]){__VA_ARGS__}, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int))
#define OUTPUTS(g, ...) \
    mc_graph_set_outputs(g, (const mc_value[]){__VA_ARGS__}, (int)(sizeof((mc_value[]){__VA_ARGS__}) / sizeof(mc_value)))

typedef struct op_case op_case;
typedef mc_value (*unary_builder)(mc_graph *, mc_value);
typedef mc_value (*binary_builder)(mc_graph *, mc_value, mc_value);

struct op_case {
    const char *name;
    /* Declare inputs, add operators, set the outputs; returns mc_graph_set_outputs' status. */
    mc_status (*build)(const op_case *c, mc_graph *g);
    /* The expectation: `in` holds every input and param as doubles, in declaration order;
     * out[i] has room for output i (pre-filled with NaN). */
    void (*expect)(const op_case *c, double *const *in, double **out);
    /* Optional: overwrite some generated inputs (host arrays in their dtype, declaration order). */
    void (*prepare)(const op_case *c, void *const *in);
    mc_dtype dtype;       /* the case's main dtype */
    mc_dtype dtype2;      /* a second one (cast: the target) */
    unary_builder unary;  /* unary and binary families: the operator... */
    binary_builder binary;
    double (*ref1)(double);          /* ...and its independent reference */
    double (*ref2)(double, double);
    int variant;          /* which variant of a family */
    bool positive;        /* float inputs become |x| + 1/8 */
    double oracle_tol;    /* (a) tolerance for floats; 0: 1e-12 */
    /* Instead of build: a graph file of the source tree (a workload of examples/).
     * Such a case has no expectation of its own (expect NULL): only part (b) runs. */
    const char *graph_file;
};

/* ---- bookkeeping -------------------------------------------------------------------------- */

typedef struct {
    int cases, oracle_checks, rounded_checks;
    int backend_runs[3][2]; /* [ref, cpu, cuda][unfused, fused] */
    char skipped[3][256];   /* why a backend did not run, or "" */
} ops_stats;

static ops_stats ops_totals;

static const char *const ops_backend_names[3] = {"ref", "cpu", "cuda"};

static double ops_tolerance(mc_dtype d, bool has_matmul)
{
    switch (d) {
    case MC_F32: return has_matmul ? 1e-4 : 1e-5;
    case MC_F16:
    case MC_BF16: return 1e-2;
    default: return 0; /* i32, bool: exact */
    }
}

/* Elementwise equality with NaN equal to NaN (i32, bool and bit-exact float checks). */
static int64_t ops_first_mismatch(const double *a, const double *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!(a[i] == b[i] || (isnan(a[i]) && isnan(b[i]))))
            return i;
    return -1;
}

/* Compare one output; on a mismatch print what differs and return false. */
static bool ops_compare(const char *what, const char *case_name, int output, mc_dtype d,
                        const double *got, const double *want, int64_t n, double tol)
{
    if (!mc_dtype_is_float(d) || tol == 0) {
        int64_t i = ops_first_mismatch(got, want, n);
        if (i >= 0)
            print_error("%s: %s, output %d (%s): element %lld is %.17g, expected %.17g\n", case_name,
                     what, output, mc_dtype_name(d), (long long)i, got[i], want[i]);
        return i < 0;
    }
    double err = mc_test_rel_error(got, want, n);
    if (!(err <= tol)) {
        int64_t worst = 0;
        double worst_d = -1;
        for (int64_t i = 0; i < n; i++) {
            double dd = fabs(got[i] - want[i]);
            if (isnan(dd) && !(isnan(got[i]) && isnan(want[i])))
                dd = INFINITY;
            if (dd > worst_d) {
                worst_d = dd;
                worst = i;
            }
        }
        print_error("%s: %s, output %d (%s): relative error %.3g > %.3g (worst element %lld: "
                    "%.17g, expected %.17g)\n", case_name, what, output, mc_dtype_name(d), err, tol,
                    (long long)worst, got[worst], want[worst]);
        return false;
    }
    return true;
}

/* ---- one set of inputs and its oracle values ------------------------------------------------ */

static int64_t ops_numel(const mc_node *n)
{
    int64_t e = 1;
    for (int k = 0; k < n->rank; k++)
        e *= n->shape[k];
    return e;
}

typedef struct {
    int n;                /* inputs and params, in declaration order */
    int *nodes;           /* their node indices */
    void **host;          /* their values in their dtypes */
    double **in;          /* the same as doubles (what expectations read) */
    const void **by_node; /* host arrays by node index (what mc_graph_eval reads) */
    double *exact[8];     /* mc_graph_eval(exact), per output */
} ops_inputs;

static void ops_inputs_free(ops_inputs *s)
{
    for (int k = 0; k < s->n; k++) {
        free(s->host[k]);
        free(s->in[k]);
    }
    for (int o = 0; o < 8; o++)
        free(s->exact[o]);
    free(s->nodes);
    free(s->host);
    free(s->in);
    free(s->by_node);
    memset(s, 0, sizeof *s);
}

/* Generate the inputs from `seed` (then the case's `positive` and `prepare`), and evaluate the
 * oracle on them. False (with a message printed) when the oracle fails. */
static bool ops_inputs_make(const op_case *c, const mc_graph *g, uint64_t seed, ops_inputs *s)
{
    memset(s, 0, sizeof *s);
    size_t nn = (size_t)g->nnodes;
    s->nodes = calloc(nn, sizeof *s->nodes);
    s->host = calloc(nn, sizeof *s->host);
    s->in = calloc(nn, sizeof *s->in);
    s->by_node = calloc(nn, sizeof *s->by_node);
    assert_true(s->nodes && s->host && s->in && s->by_node);
    for (int i = 0; i < g->nnodes; i++) {
        const mc_node *n = &g->nodes[i];
        if (n->op != MC_OP_INPUT && n->op != MC_OP_PARAM)
            continue;
        int64_t numel = ops_numel(n);
        void *h = malloc((size_t)numel * mc_dtype_size(n->dtype));
        assert_non_null(h);
        mc_fill_random(h, n->dtype, numel, seed, n->name);
        if (c->positive && mc_dtype_is_float(n->dtype))
            for (int64_t e = 0; e < numel; e++)
                mc_store_element(h, n->dtype, e, fabs(mc_load_element(h, n->dtype, e)) + 0.125);
        s->host[s->n] = h;
        s->nodes[s->n] = i;
        s->by_node[i] = h;
        s->n++;
    }
    if (c->prepare)
        c->prepare(c, s->host);
    for (int k = 0; k < s->n; k++) {
        const mc_node *n = &g->nodes[s->nodes[k]];
        int64_t numel = ops_numel(n);
        s->in[k] = malloc((size_t)numel * sizeof(double));
        assert_non_null(s->in[k]);
        for (int64_t e = 0; e < numel; e++)
            s->in[k][e] = mc_load_element(s->host[k], n->dtype, e);
    }
    assert_true(g->noutputs <= 8);
    if (mc_graph_eval(g, s->by_node, true, s->exact) != MC_OK) {
        print_error("%s: mc_graph_eval failed: %s\n", c->name, mc_error_message());
        return false;
    }
    return true;
}

/* ---- part (b): the backends ---------------------------------------------------------------- */

#if OPS_CHECK_BACKENDS
/* Is backend b usable here? Fills `why` when not. A backend that is built in must work (its
 * failures are failures, not skips); the GPU is the one thing a machine may lack. */
static bool ops_backend_available(int b, char *why, size_t size)
{
    if (b != 1 && mc_test_cpu_target()) {
        /* an entry for a pinned CPU target checks the CPU backend; the plain entry the others */
        snprintf(why, size, "this entry checks the cpu backend under MINIC_TEST_CPU_TARGET=%s",
                 mc_test_cpu_target());
        return false;
    }
    switch (b) {
    case 0: return true;
    case 1:
#ifdef MINIC_HAVE_CPU_BACKEND
        return true;
#else
        snprintf(why, size, "this build has no CPU backend (LLVM 14 or its sources missing)");
        return false;
#endif
    default:
#ifdef MINIC_HAVE_CUDA_BACKEND
        if (!mc_backend_cuda.probe || mc_backend_cuda.probe() == MC_OK)
            return true;
        snprintf(why, size, "no usable GPU: %s", mc_error_message());
#else
        snprintf(why, size, "this build has no CUDA backend");
#endif
        return false;
    }
}

/* Bind every input of s (when `bind`), run once, compare every output with s's oracle. */
static bool ops_run_and_compare(const op_case *c, const mc_graph *g, mc_program *p,
                                const char *what, const ops_inputs *s, bool bind, bool has_matmul)
{
    for (int k = 0; bind && k < s->n; k++) {
        const mc_node *n = &g->nodes[s->nodes[k]];
        size_t bytes = (size_t)ops_numel(n) * mc_dtype_size(n->dtype);
        if (mc_program_set(p, n->name, s->host[k], bytes) != MC_OK) {
            print_error("%s: %s: binding '%s' failed: %s\n", c->name, what, n->name,
                        mc_error_message());
            return false;
        }
    }
    if (mc_program_run(p) != MC_OK) {
        print_error("%s: %s: run failed: %s\n", c->name, what, mc_error_message());
        return false;
    }
    if (mc_program_num_outputs(p) != g->noutputs) {
        print_error("%s: %s: %d outputs, expected %d\n", c->name, what,
                    mc_program_num_outputs(p), g->noutputs);
        return false;
    }
    bool ok = true;
    for (int o = 0; ok && o < g->noutputs; o++) {
        const mc_node *n = &g->nodes[g->outputs[o]];
        mc_tensor t;
        bool same_type = mc_program_output(p, o, &t) == MC_OK && t.dtype == n->dtype &&
                         t.rank == n->rank && t.data != NULL;
        for (int k = 0; same_type && k < n->rank; k++)
            same_type = t.shape[k] == n->shape[k];
        if (!same_type) {
            print_error("%s: %s: output %d missing or of the wrong type\n", c->name, what, o);
            return false;
        }
        int64_t numel = ops_numel(n);
        double *got = malloc((size_t)numel * sizeof *got);
        assert_non_null(got);
        for (int64_t e = 0; e < numel; e++)
            got[e] = mc_load_element(t.data, t.dtype, e);
        ok = ops_compare(what, c->name, o, n->dtype, got, s->exact[o], numel,
                         ops_tolerance(n->dtype, has_matmul));
        free(got);
    }
    return ok;
}

/* One backend, fused or not: compile; bind the first inputs, run, compare; run again (a
 * program must not carry state from one run to the next); bind the second inputs, run,
 * compare (a changed input must be seen). */
static bool ops_check_backend(const op_case *c, const mc_graph *g, mc_backend_kind kind,
                              const char *what, bool fuse, const ops_inputs *first,
                              const ops_inputs *second, bool has_matmul)
{
    mc_options opt = mc_test_options();
    opt.backend = kind;
    opt.fuse = fuse;
    opt.quiet = true;
    mc_program *p = NULL;
    if (mc_program_compile(g, &opt, &p) != MC_OK) {
        print_error("%s: %s: compile failed: %s\n", c->name, what, mc_error_message());
        return false;
    }
    char again[96], rebound[96];
    snprintf(again, sizeof again, "%s, second run", what);
    snprintf(rebound, sizeof rebound, "%s, new inputs", what);
    bool ok = ops_run_and_compare(c, g, p, what, first, true, has_matmul) &&
              ops_run_and_compare(c, g, p, again, first, false, has_matmul) &&
              (second->n == 0 || ops_run_and_compare(c, g, p, rebound, second, true, has_matmul));
    mc_program_free(p);
    return ok;
}

static bool ops_check_backends(const op_case *c, const mc_graph *g, const ops_inputs *first,
                               const ops_inputs *second)
{
    static const mc_backend_kind kinds[3] = {MC_BACKEND_REF, MC_BACKEND_CPU, MC_BACKEND_CUDA};
    bool has_matmul = false, ok = true;
    for (int i = 0; i < g->nnodes; i++)
        has_matmul |= g->nodes[i].op == MC_OP_MATMUL || g->nodes[i].op == MC_OP_LINEAR;
    for (int b = 0; b < 3; b++) {
        char why[256] = "";
        if (!ops_backend_available(b, why, sizeof why)) {
            snprintf(ops_totals.skipped[b], sizeof ops_totals.skipped[b], "%s", why);
            continue;
        }
        for (int fuse = 0; fuse < 2; fuse++) {
            char what[64];
            snprintf(what, sizeof what, "backend %s (%s)", ops_backend_names[b],
                     fuse ? "fused" : "unfused");
            if (ops_check_backend(c, g, kinds[b], what, fuse, first, second, has_matmul))
                ops_totals.backend_runs[b][fuse]++;
            else
                ok = false;
        }
    }
    return ok;
}
#endif

/* ---- one case ----------------------------------------------------------------------------- */

static void ops_run_case(void **state)
{
    const op_case *c = *state;
    mc_graph *g = NULL;
    if (c->graph_file) {
        if (mc_graph_parse_file(mc_test_src(c->graph_file), &g) != MC_OK)
            fail_msg("%s: %s", c->name, mc_error_message());
    } else {
        g = mc_graph_new(c->name);
        assert_non_null(g);
        if (c->build(c, g) != MC_OK) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", mc_error_message());
            mc_graph_free(g);
            fail_msg("%s: building the graph failed: %s", c->name, msg);
        }
    }
    int nout = g->noutputs;
    double *rounded[8] = {0}, *want[8] = {0};
    ops_inputs first, second = {0};
    uint64_t seed = mc_hash64(c->name, strlen(c->name), 0);
    bool ok = ops_inputs_make(c, g, seed, &first);
    if (!ok)
        goto done;

    /* (a) the oracle against the independent expectation. */
    for (int o = 0; o < nout; o++) {
        int64_t numel = ops_numel(&g->nodes[g->outputs[o]]);
        want[o] = malloc((size_t)numel * sizeof(double));
        assert_non_null(want[o]);
        for (int64_t e = 0; e < numel; e++)
            want[o][e] = NAN;
    }
    if (c->expect)
        c->expect(c, first.in, want);
    for (int o = 0; c->expect && o < nout; o++) {
        const mc_node *n = &g->nodes[g->outputs[o]];
        ok &= ops_compare("mc_graph_eval(exact)", c->name, o, n->dtype, first.exact[o], want[o],
                          ops_numel(n), c->oracle_tol > 0 ? c->oracle_tol : 1e-12);
        ops_totals.oracle_checks++;
    }
    /* Rounded evaluation of a one-level graph (every operator reads only inputs and params,
     * and there are no constants to round): the expectation rounded once per output. */
    bool one_level = true;
    for (int i = 0; i < g->nnodes; i++) {
        const mc_node *n = &g->nodes[i];
        if (n->op == MC_OP_CONST)
            one_level = false;
        for (int k = 0; k < n->nin; k++)
            if (n->in[k] >= 0 && mc_op_table[g->nodes[n->in[k]].op].kind != MC_KIND_LEAF)
                one_level = false;
    }
    if (one_level && c->expect) {
        if (mc_graph_eval(g, first.by_node, false, rounded) != MC_OK) {
            print_error("%s: mc_graph_eval(rounded) failed: %s\n", c->name, mc_error_message());
            ok = false;
            goto done;
        }
        for (int o = 0; o < nout; o++) {
            const mc_node *n = &g->nodes[g->outputs[o]];
            int64_t numel = ops_numel(n);
            double *r = malloc((size_t)numel * sizeof *r);
            assert_non_null(r);
            for (int64_t e = 0; e < numel; e++)
                r[e] = mc_round_to_dtype(want[o][e], n->dtype);
            /* Bit-exact unless the case's own formula is only close (then one ulp of the
             * dtype's rounding may differ): compare within the dtype's tolerance. */
            double tol = c->oracle_tol > 0 ? ops_tolerance(n->dtype, false) : 0;
            ok &= ops_compare("mc_graph_eval(rounded)", c->name, o, n->dtype, rounded[o], r,
                              numel, tol);
            free(r);
            ops_totals.rounded_checks++;
        }
    }

    /* (b) every available backend against the oracle, on two sets of inputs. */
#if OPS_CHECK_BACKENDS
    if (ok && first.n > 0)
        ok = ops_inputs_make(c, g, seed ^ 0x5DEECE66Dull, &second);
    if (ok)
        ok = ops_check_backends(c, g, &first, &second);
#endif
    if (ok)
        ops_totals.cases++;

done:
    for (int o = 0; o < nout; o++) {
        free(rounded[o]);
        free(want[o]);
    }
    ops_inputs_free(&first);
    ops_inputs_free(&second);
    mc_graph_free(g);
    if (!ok)
        fail_msg("%s: see the messages above", c->name);
}

/* Run every case of a table as its own cmocka test, then print what was checked where. */
/* With MINIC_OPS_COVERAGE=FILE the table is not run: the operators of every case's graph are
 * appended to FILE, one name a line (tests/op_coverage.sh checks that every operator of the op
 * table has a conformance row in some table). */
static int ops_list_coverage(const char *path, const op_case *cases, int n)
{
    FILE *f = fopen(path, "a");
    if (!f)
        return 1;
    int failed = 0;
    for (int i = 0; i < n; i++) {
        const op_case *c = &cases[i];
        mc_graph *g = NULL;
        if (c->graph_file) {
            if (mc_graph_parse_file(mc_test_src(c->graph_file), &g) != MC_OK)
                g = NULL;
        } else if ((g = mc_graph_new(c->name)) && c->build(c, g) != MC_OK) {
            mc_graph_free(g);
            g = NULL;
        }
        if (!g) {
            fprintf(stderr, "%s: the graph does not build: %s\n", c->name, mc_error_message());
            failed = 1;
            continue;
        }
        for (int k = 0; k < g->nnodes; k++)
            fprintf(f, "%s %s\n", mc_op_table[g->nodes[k].op].name, c->name);
        mc_graph_free(g);
    }
    fclose(f);
    return failed;
}

static int ops_run_table(const char *group, const op_case *cases, int n)
{
    const char *coverage = getenv("MINIC_OPS_COVERAGE");
    if (coverage && *coverage)
        return ops_list_coverage(coverage, cases, n);
    struct CMUnitTest *tests = calloc((size_t)n, sizeof *tests);
    if (!tests)
        return 1;
    for (int i = 0; i < n; i++)
        tests[i] = (struct CMUnitTest){cases[i].name, ops_run_case, NULL, NULL, (void *)&cases[i]};
    mc_test_check_cpu_target();
    const char *filter = getenv("MINIC_OPS_FILTER"); /* a cmocka pattern: "*conv*" */
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    int failed = _cmocka_run_group_tests(group, tests, (size_t)n, NULL, NULL);
    free(tests);
    printf("%s: %d cases passed; %d oracle checks, %d rounded-evaluation checks\n", group,
           ops_totals.cases, ops_totals.oracle_checks, ops_totals.rounded_checks);
#if OPS_CHECK_BACKENDS
    for (int b = 0; b < 3; b++) {
        if (ops_totals.skipped[b][0])
            printf("%s: backend %s skipped: %s\n", group, ops_backend_names[b], ops_totals.skipped[b]);
        else
            printf("%s: backend %s: %d fused and %d unfused runs matched the oracle\n", group,
                   ops_backend_names[b], ops_totals.backend_runs[b][1], ops_totals.backend_runs[b][0]);
    }
#else
    printf("%s: backends NOT checked: mc_program_* and the backends are not built yet; "
           "only the oracle (part a) ran\n", group);
#endif
    return mc_test_exit(failed);
}

#endif
