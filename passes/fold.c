/* Folding batchnorm into the conv before it: batchnorm(conv(x, w, b?), scale, bias, mean, var, eps)
 * becomes conv(x, w', b') with
 *
 *     k[o]  = scale[o] / sqrt(var[o] + eps)
 *     w'[o] = w[o] * k[o]
 *     b'[o] = (b[o] - mean[o]) * k[o] + bias[o]      (b = 0 when the conv has none)
 *
 * Needs: the composites as written (it runs before decompose). Folds only when w, b (if any),
 * scale, bias, mean and var are all params, so w' and b' depend on weights alone, and when the
 * conv's only user is the batchnorm (not another node, not a graph output): otherwise the
 * conv's own value is still needed and the graph is left as it was. Where the kernels of the
 * params alone run in every run (mc_compile_options.hoist off: MINIC_HOIST_PARAMS=0, or a
 * backend without a prep slot), only when the conv's weights have no more elements than its
 * output (below: where w' costs less than it saves); else always, since w' and b' are then
 * computed when the params are bound, not in every run (passes/hoist.c).
 *
 * Where w' and b' are computed: params are bound after compilation (mc_program_set, --weights)
 * and may be rebound between runs, so their values do not exist at pass time. w' and b' are
 * therefore graph nodes over the params: small pointwise kernels over the weights (O * I * K
 * elements) instead of a per-activation epilogue, computed in f32 (f16/bf16 params widened) and
 * rounded once to the params' dtype, as the unfolded batchnorm computes. w' and b' are marked
 * `materialize`, so fusion gives each a kernel of its own rather than recomputing b' in the conv's
 * GEMM epilogue; the conv then reads them like any weight and bias, and no batchnorm arithmetic is
 * left over the activations.
 */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

static bool is_param(const mc_graph *g, int v) { return v >= 0 && g->nodes[v].op == MC_OP_PARAM; }

/* Elements of n; INT64_MAX where a dimension is symbolic (a batch bound when the program runs:
 * taken as large). */
static int64_t numel(const mc_node *n)
{
    int64_t e = 1;
    for (int d = 0; d < n->rank; d++) {
        if (mc_dim_is_sym(n->shape[d]) || e > INT64_MAX / n->shape[d])
            return INT64_MAX;
        e *= n->shape[d];
    }
    return e;
}

/* Whether batchnorm node i folds into its conv operand (uses: how many nodes and outputs read
 * each node). */
static bool foldable(const mc_graph *g, int i, const int *uses, bool hoist)
{
    const mc_node *n = &g->nodes[i];
    if (n->op != MC_OP_BATCHNORM || n->in[0] < 0)
        return false;
    const mc_node *c = &g->nodes[n->in[0]];
    if (c->op != MC_OP_CONV || uses[n->in[0]] != 1 || c->dtype != n->dtype)
        return false;
    if (!is_param(g, c->in[1]) || (c->nin > 2 && c->in[2] >= 0 && !is_param(g, c->in[2])))
        return false;
    for (int k = 1; k <= 4; k++)
        if (!is_param(g, n->in[k]))
            return false;
    /* Without hoisting, w' costs a pass over the weights every run; what it saves is batchnorm's few operations
     * per output element (a sqrt and a divide among them). Only where the weights are no more
     * than the conv's outputs does that pay (ResNet-18 at batch 1 on the CPU: its stem and first
     * stage fold, its later stages, whose weights are 3x to 94x their outputs, do not). */
    return hoist || numel(&g->nodes[c->in[1]]) <= numel(c);
}

typedef struct {
    mc_rewrite *rw;
    const mc_node *like; /* the batchnorm: the new nodes' place and origin */
} ctx;

static mc_value op1(ctx *c, mc_op op, mc_value a, const mc_attrs *at)
{
    return mc_rewrite_node(c->rw, c->like, op, &a, 1, at);
}

static mc_value op2(ctx *c, mc_op op, mc_value a, mc_value b)
{
    mc_value in[2] = {a, b};
    return mc_rewrite_node(c->rw, c->like, op, in, 2, NULL);
}

static mc_value cast(ctx *c, mc_value v, mc_dtype d)
{
    if (v < 0 || c->rw->dst->nodes[v].dtype == d)
        return v;
    mc_attrs a;
    memset(&a, 0, sizeof a);
    a.dtype = d;
    return op1(c, MC_OP_CAST, v, &a);
}

static mc_value widen(ctx *c, mc_value v)
{
    mc_dtype d = v >= 0 ? c->rw->dst->nodes[v].dtype : MC_F32;
    return cast(c, v, d == MC_F16 || d == MC_BF16 ? MC_F32 : d);
}

/* conv(x, w', b') for batchnorm node bn over conv node cv. */
static mc_value fold(mc_rewrite *rw, const mc_node *bn, const mc_node *cv)
{
    ctx c = {rw, bn};
    const mc_value *map = rw->map;
    mc_dtype dt = cv->dtype;
    mc_value scale = widen(&c, map[bn->in[1]]), bias = widen(&c, map[bn->in[2]]);
    mc_value mean = widen(&c, map[bn->in[3]]), var = widen(&c, map[bn->in[4]]);
    mc_dtype ct = rw->dst->nodes[scale].dtype;
    mc_value eps = mc_rewrite_const(rw, bn, bn->attr.value, ct);
    mc_value k = op2(&c, MC_OP_DIV, scale, op1(&c, MC_OP_SQRT, op2(&c, MC_OP_ADD, var, eps), NULL));
    const mc_node *wn = &rw->src->nodes[cv->in[1]];
    mc_attrs shape;
    memset(&shape, 0, sizeof shape);
    shape.has_list = true;
    shape.nlist = wn->rank;
    shape.list[0] = wn->shape[0];
    for (int d = 1; d < wn->rank; d++)
        shape.list[d] = 1;
    mc_value w = cast(&c, op2(&c, MC_OP_MUL, widen(&c, map[cv->in[1]]), op1(&c, MC_OP_RESHAPE, k, &shape)), dt);
    bool has_b = cv->nin > 2 && cv->in[2] >= 0;
    mc_value centred = has_b ? op2(&c, MC_OP_SUB, widen(&c, map[cv->in[2]]), mean) : op1(&c, MC_OP_NEG, mean, NULL);
    mc_value b = cast(&c, op2(&c, MC_OP_ADD, op2(&c, MC_OP_MUL, centred, k), bias), dt);
    if (w < 0 || b < 0)
        return MC_ERROR;
    /* computed once per run over the weights, never inside the conv's kernel */
    rw->dst->nodes[w].materialize = rw->dst->nodes[b].materialize = true;
    mc_value in[3] = {map[cv->in[0]], w, b};
    mc_value y = mc_rewrite_node(rw, cv, MC_OP_CONV, in, 3, &cv->attr);
    if (y >= 0 && bn->name)
        mc_value_set_name(rw->dst, y, bn->name);
    return y;
}

mc_status mc_pass_fold(mc_graph *g, const mc_compile_options *opt)
{
    int *uses = calloc((size_t)g->nnodes + 1, sizeof *uses);
    bool *skip = calloc((size_t)g->nnodes + 1, sizeof *skip);
    if (!uses || !skip) {
        free(uses);
        free(skip);
        return mc_fail(MC_ERR_SYSTEM, "out of memory folding batchnorm");
    }
    for (int i = 0; i < g->nnodes; i++)
        for (int k = 0; k < g->nodes[i].nin; k++)
            if (g->nodes[i].in[k] >= 0)
                uses[g->nodes[i].in[k]]++;
    for (int i = 0; i < g->noutputs; i++)
        uses[g->outputs[i]]++;
    int nfold = 0;
    for (int i = 0; i < g->nnodes; i++)
        if (foldable(g, i, uses, opt && opt->hoist)) {
            skip[g->nodes[i].in[0]] = true;
            nfold++;
        }
    if (nfold == 0) {
        free(uses);
        free(skip);
        return MC_OK;
    }
    mc_rewrite rw;
    mc_status st = mc_rewrite_begin(&rw, g);
    if (st != MC_OK) {
        free(uses);
        free(skip);
        return st;
    }
    for (int i = 0; i < g->nnodes && st == MC_OK; i++) {
        const mc_node *n = &g->nodes[i];
        if (skip[i])
            continue; /* the conv: rebuilt at its batchnorm, its only user */
        if (n->op == MC_OP_BATCHNORM && n->in[0] >= 0 && skip[n->in[0]])
            rw.map[i] = fold(&rw, n, &g->nodes[n->in[0]]);
        else
            rw.map[i] = mc_rewrite_copy(&rw, i);
        if (rw.map[i] < 0)
            st = mc_error_status() != MC_OK ? mc_error_status() : mc_fail(MC_ERR_SYSTEM, "fold failed");
    }
    free(uses);
    free(skip);
    if (st != MC_OK) {
        mc_rewrite_abort(&rw);
        return st;
    }
    return mc_rewrite_finish(&rw, g);
}
