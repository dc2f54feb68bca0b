/* Shared by the pass tests: compile a graph fused, unfused and unplanned, run each on the
 * reference backend with the same seeded inputs, and compare every output with the float64
 * oracle (mc_graph_eval) within docs/FORMAT.md §6. Header-only (static functions), included by
 * tests/test_passes.c, tests/test_fusion.c and tests/test_random_graphs.c. */
#ifndef MINIC_PASSES_CHECK_H
#define MINIC_PASSES_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "passes/passes.h"
#include "runtime/runtime.h"

static inline bool check_has_matmul(const mc_graph *g)
{
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == MC_OP_MATMUL || g->nodes[i].op == MC_OP_LINEAR)
            return true;
    return false;
}

static inline double check_tolerance(const mc_graph *g, mc_dtype d, double scale)
{
    if (d == MC_I32 || d == MC_BOOL)
        return 0;
    if (d != MC_F32)
        return 1e-2 * scale;
    return (check_has_matmul(g) ? 1e-4 : 1e-5) * scale;
}

/* The backend the checks run on: ref, or MINIC_TEST_BACKEND=cpu|cuda (the random-graph test
 * runs on every backend this way: a CTest entry for cpu, scripts/gpu.sh for cuda). */
static inline mc_backend_kind check_backend(void)
{
    const char *b = getenv("MINIC_TEST_BACKEND");
    if (b && strcmp(b, "cpu") == 0)
        return MC_BACKEND_CPU;
    if (b && strcmp(b, "cuda") == 0)
        return MC_BACKEND_CUDA;
    return MC_BACKEND_REF;
}

/* Compile and run g on the checked backend; outputs as doubles (malloc'd arrays). */
static inline mc_status check_run(const mc_graph *g, bool fuse, bool plan, uint64_t seed, double **outs,
                           mc_program **keep)
{
    mc_options opt = mc_test_options();
    opt.backend = check_backend();
    opt.fuse = fuse;
    opt.plan_memory = plan;
    opt.quiet = true;
    mc_program *p;
    mc_status st = mc_program_compile(g, &opt, &p);
    if (st != MC_OK)
        return st;
    st = mc_program_fill_random(p, seed);
    if (st == MC_OK)
        st = mc_program_run(p);
    for (int o = 0; o < g->noutputs && st == MC_OK; o++) {
        mc_tensor t;
        st = mc_program_output(p, o, &t);
        if (st != MC_OK)
            break;
        int64_t n = mc_node_numel(&g->nodes[g->outputs[o]]);
        outs[o] = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
        for (int64_t e = 0; e < n; e++)
            outs[o][e] = mc_load_element(t.data, t.dtype, e);
    }
    if (keep && st == MC_OK)
        *keep = p;
    else
        mc_program_free(p);
    return st;
}

/* 0 when fused, unfused and unplanned runs all match the oracle; else 1 with `why` filled. */
static inline int check_graph(const mc_graph *g, uint64_t seed, double tol_scale, char *why, size_t whylen)
{
    int no = g->noutputs;
    double **ref = calloc((size_t)no, sizeof *ref);
    double **got = calloc((size_t)no, sizeof *got);
    const void **inputs = calloc((size_t)g->nnodes, sizeof *inputs);
    mc_program *p = NULL;
    int bad = 0;
    /* The unfused program also provides the inputs the oracle sees. */
    mc_status st = check_run(g, false, true, seed, got, &p);
    if (st != MC_OK) {
        snprintf(why, whylen, "unfused compile/run failed: %s", mc_error_message());
        bad = 1;
        goto done;
    }
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == MC_OP_INPUT || g->nodes[i].op == MC_OP_PARAM) {
            int b = mc_program_find(p, g->nodes[i].name);
            inputs[i] = b >= 0 ? p->host[b] : NULL;
        }
    /* The oracle with each value rounded to its dtype (the reference rule): with exact
     * doubles a cast to f16 would be a no-op, and a compare after it would differ. */
    if (mc_graph_eval(g, inputs, false, ref) != MC_OK) {
        snprintf(why, whylen, "oracle failed: %s", mc_error_message());
        bad = 1;
        goto done;
    }
    for (int variant = 0; variant < 3 && !bad; variant++) {
        static const char *names[] = {"unfused", "fused", "fused unplanned"};
        if (variant > 0) {
            for (int o = 0; o < no; o++) {
                free(got[o]);
                got[o] = NULL;
            }
            st = check_run(g, true, variant == 1, seed, got, NULL);
            if (st != MC_OK) {
                snprintf(why, whylen, "%s compile/run failed: %s", names[variant], mc_error_message());
                bad = 1;
                break;
            }
        }
        for (int o = 0; o < no; o++) {
            const mc_node *n = &g->nodes[g->outputs[o]];
            int64_t len = mc_node_numel(n);
            double *r = malloc(sizeof(double) * (size_t)(len > 0 ? len : 1));
            for (int64_t e = 0; e < len; e++) /* the oracle rounded to the output's dtype */
                r[e] = mc_round_to_dtype(ref[o][e], n->dtype);
            double err = mc_test_rel_error(got[o], r, len);
            double tol = check_tolerance(g, n->dtype, tol_scale);
            if (!(err <= tol)) {
                snprintf(why, whylen, "%s: output %d: relative error %.3g > %.3g", names[variant], o, err, tol);
                bad = 1;
            }
            free(r);
        }
    }
done:
    for (int o = 0; o < no; o++) {
        free(ref[o]);
        free(got[o]);
    }
    free(ref);
    free(got);
    free(inputs);
    mc_program_free(p);
    return bad;
}

/* The kernel list of g (fused or not), with attention chains fused or left as they are; caller
 * frees. */
static inline kir_program *check_kernels_with(const mc_graph *g, bool fuse, bool attention)
{
    mc_compile_options co = {.fuse = fuse, .plan_memory = true, .verify = true, .no_attention = !attention};
    kir_program *kp = NULL;
    if (mc_compile_kernels(g, &co, &kp) != MC_OK) {
        fprintf(stderr, "compile failed: %s\n", mc_error_message());
        return NULL;
    }
    return kp;
}

static inline kir_program *check_kernels(const mc_graph *g, bool fuse) { return check_kernels_with(g, fuse, true); }

/* Whether every i32/bool value kernel k computes from indices and constants alone lies, at every
 * point of its index space (a strided sample of at most max_points), within its fact f[i]
 * (kir_facts), and equals the value of its `same`: each instruction evaluated by mc_op_apply,
 * ref's meaning. With vstep > 1, the points whose innermost index is `at` modulo vstep
 * (kir_facts(k, dims, vstep, at, f)). False, with why, at the first value that breaks them. */
static inline bool check_facts_hold(const kir_kernel *k, const kir_fact *f, int vstep, int at, int64_t max_points,
                                    char *why, size_t whylen)
{
    double *val = (double *)calloc((size_t)k->ncode + 1, sizeof *val);
    bool *known = (bool *)calloc((size_t)k->ncode + 1, sizeof *known), ok = val && known;
    int64_t n = 1, coord[MC_MAX_RANK];
    for (int d = 0; d < k->rank; d++)
        n *= k->shape[d];
    int64_t step = n > max_points ? n / max_points + 1 : 1;
    for (int64_t p = 0; p < n && ok; p += step) {
        int64_t t = p;
        for (int d = k->rank - 1; d >= 0; d--) {
            coord[d] = t % k->shape[d];
            t /= k->shape[d];
        }
        if (k->rank > 0 && coord[k->rank - 1] % vstep != at)
            continue;
        for (int i = 0; i < k->ncode && ok; i++) {
            const kir_instr *in = &k->code[i];
            known[i] = in->kind == KI_CONST || (in->kind == KI_INDEX && in->dtype == MC_I32);
            if (in->kind == KI_CONST)
                val[i] = in->value;
            else if (known[i])
                val[i] = (double)coord[in->view];
            if (in->kind == KI_OP) {
                int nin = in->op == MC_OP_CAST ? 1 : mc_op_table[in->op].min_in;
                known[i] = true;
                for (int a = 0; a < nin; a++)
                    known[i] = known[i] && known[in->arg[a]];
                if (!known[i])
                    continue;
                mc_dtype operand = k->code[in->arg[in->op == MC_OP_WHERE ? 1 : 0]].dtype;
                val[i] = mc_op_apply(in->op, operand, in->dtype, val[in->arg[0]], nin > 1 ? val[in->arg[1]] : 0,
                                     nin > 2 ? val[in->arg[2]] : 0);
            }
            if (!known[i] || (in->dtype != MC_I32 && in->dtype != MC_BOOL))
                continue;
            if (val[i] < (double)f[i].lo || val[i] > (double)f[i].hi) {
                snprintf(why, whylen, "%s: %%%d is %g outside [%lld, %lld] at point %lld", k->name, i, val[i],
                         (long long)f[i].lo, (long long)f[i].hi, (long long)p);
                ok = false;
            } else if (f[i].same >= 0 && known[f[i].same] && val[f[i].same] != val[i]) {
                snprintf(why, whylen, "%s: %%%d is %g, not %%%d's %g at point %lld", k->name, i, val[i], f[i].same,
                         val[f[i].same], (long long)p);
                ok = false;
            }
        }
    }
    if (!val || !known)
        snprintf(why, whylen, "out of memory");
    free(val);
    free(known);
    return ok;
}

#endif
