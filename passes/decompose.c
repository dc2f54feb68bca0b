/* Decomposition: composites into primitives, so fusion sees one vocabulary.
 *
 * Requires: a verified graph. Changes: every softmax, log_softmax, layernorm, rmsnorm, linear
 * and mean becomes the primitives people write on paper:
 *
 *   softmax(x)      e = exp(x - max(x)); e / sum(e)                 (max and sum keepdim)
 *   log_softmax(x)  d = x - max(x); d - log(sum(exp(d)))
 *   layernorm(x)    c = x - sum(x)/n; c * rsqrt(sum(c*c)/n + eps) * w + b   (last axis)
 *   rmsnorm(x)      x * rsqrt(sum(x*x)/n + eps) * w
 *   linear(x, w, b) matmul(x, transpose(w)) + b
 *   mean(x)         sum(x) * (1/n)
 *
 * Every new node keeps the composite's line and origin, and the last one its name, so kernels
 * are still named and attributed after the user's operators. Fusion puts each normalization
 * back together as one kernel (a reduction with its prologue and epilogue).
 */
#include "passes/passes.h"

#include <string.h>

typedef struct {
    mc_rewrite *rw;
    const mc_node *n; /* the composite */
} ctx;

static mc_value op1(ctx *c, mc_op op, mc_value a)
{
    return mc_rewrite_node(c->rw, c->n, op, &a, 1, NULL);
}

static mc_value op2(ctx *c, mc_op op, mc_value a, mc_value b)
{
    mc_value in[2] = {a, b};
    return mc_rewrite_node(c->rw, c->n, op, in, 2, NULL);
}

static mc_value constant(ctx *c, double v, mc_dtype d) { return mc_rewrite_const(c->rw, c->n, v, d); }

/* A reduction over one axis (or a list) keeping dims. */
static mc_value reduce(ctx *c, mc_op op, mc_value x, const int64_t *axes, int naxes, bool keepdim)
{
    mc_attrs a;
    memset(&a, 0, sizeof a);
    a.has_list = true;
    a.nlist = naxes;
    memcpy(a.list, axes, sizeof(int64_t) * (size_t)naxes);
    a.keepdim = keepdim;
    return mc_rewrite_node(c->rw, c->n, op, &x, 1, &a);
}

static mc_value softmax(ctx *c, mc_value x, bool log_form)
{
    int64_t axis = c->n->attr.axis;
    mc_value m = reduce(c, MC_OP_MAX, x, &axis, 1, true);
    mc_value d = op2(c, MC_OP_SUB, x, m);
    mc_value e = op1(c, MC_OP_EXP, d);
    mc_value s = reduce(c, MC_OP_SUM, e, &axis, 1, true);
    if (log_form)
        return op2(c, MC_OP_SUB, d, op1(c, MC_OP_LOG, s));
    return op2(c, MC_OP_DIV, e, s);
}

/* sum(v)/n over the last axis, keepdim. */
static mc_value row_mean(ctx *c, mc_value v, const mc_node *x)
{
    int64_t axis = x->rank - 1;
    mc_value s = reduce(c, MC_OP_SUM, v, &axis, 1, true);
    return op2(c, MC_OP_MUL, s, constant(c, 1.0 / (double)x->shape[axis], x->dtype));
}

static mc_value norm(ctx *c, const mc_value *in, bool layernorm)
{
    const mc_node *x = &c->rw->src->nodes[c->n->in[0]];
    mc_value v = in[0];
    if (layernorm)
        v = op2(c, MC_OP_SUB, v, row_mean(c, v, x));
    mc_value var = row_mean(c, op2(c, MC_OP_MUL, v, v), x);
    mc_value r = op1(c, MC_OP_RSQRT, op2(c, MC_OP_ADD, var, constant(c, c->n->attr.value, x->dtype)));
    mc_value y = op2(c, MC_OP_MUL, op2(c, MC_OP_MUL, v, r), in[1]);
    return layernorm ? op2(c, MC_OP_ADD, y, in[2]) : y;
}

static mc_value linear(ctx *c, const mc_value *in)
{
    const mc_node *x = &c->rw->src->nodes[c->n->in[0]];
    mc_attrs t;
    memset(&t, 0, sizeof t);
    t.has_list = true;
    t.nlist = 2;
    t.list[0] = 1;
    t.list[1] = 0;
    mc_value wt = mc_rewrite_node(c->rw, c->n, MC_OP_TRANSPOSE, &in[1], 1, &t);
    mc_value xv = in[0];
    if (x->rank == 1) { /* [in] -> [1, in], and back after the product */
        mc_attrs r;
        memset(&r, 0, sizeof r);
        r.has_list = true;
        r.nlist = 2;
        r.list[0] = 1;
        r.list[1] = x->shape[0];
        xv = mc_rewrite_node(c->rw, c->n, MC_OP_RESHAPE, &xv, 1, &r);
    }
    mc_value y = op2(c, MC_OP_MATMUL, xv, wt);
    if (x->rank == 1) {
        mc_attrs r;
        memset(&r, 0, sizeof r);
        r.has_list = true;
        r.nlist = 1;
        r.list[0] = c->n->shape[0];
        y = mc_rewrite_node(c->rw, c->n, MC_OP_RESHAPE, &y, 1, &r);
    }
    if (c->n->nin > 2 && c->n->in[2] >= 0)
        y = op2(c, MC_OP_ADD, y, in[2]);
    return y;
}

static mc_value mean(ctx *c, mc_value x)
{
    const mc_node *xn = &c->rw->src->nodes[c->n->in[0]];
    mc_attrs a = c->n->attr;
    mc_value s = mc_rewrite_node(c->rw, c->n, MC_OP_SUM, &x, 1, &a);
    int64_t count = mc_node_numel(xn) / (mc_node_numel(c->n) > 0 ? mc_node_numel(c->n) : 1);
    return op2(c, MC_OP_MUL, s, constant(c, 1.0 / (double)count, c->n->dtype));
}

mc_status mc_pass_decompose(mc_graph *g)
{
    mc_rewrite rw;
    mc_status st = mc_rewrite_begin(&rw, g);
    if (st != MC_OK)
        return st;
    for (int i = 0; i < g->nnodes; i++) {
        const mc_node *n = &g->nodes[i];
        if (!mc_op_is_composite(n->op)) {
            rw.map[i] = mc_rewrite_copy(&rw, i);
        } else {
            ctx c = {&rw, n};
            mc_value in[3] = {MC_NONE, MC_NONE, MC_NONE};
            for (int k = 0; k < n->nin && k < 3; k++)
                in[k] = n->in[k] >= 0 ? rw.map[n->in[k]] : MC_NONE;
            mc_value v = MC_ERROR;
            switch (n->op) {
            case MC_OP_SOFTMAX: v = softmax(&c, in[0], false); break;
            case MC_OP_LOG_SOFTMAX: v = softmax(&c, in[0], true); break;
            case MC_OP_LAYERNORM: v = norm(&c, in, true); break;
            case MC_OP_RMSNORM: v = norm(&c, in, false); break;
            case MC_OP_LINEAR: v = linear(&c, in); break;
            case MC_OP_MEAN: v = mean(&c, in[0]); break;
            case MC_OP_INPUT: case MC_OP_PARAM: case MC_OP_CONST: case MC_OP_NEG: case MC_OP_ABS:
            case MC_OP_EXP: case MC_OP_LOG: case MC_OP_SQRT: case MC_OP_RSQRT: case MC_OP_RECIP:
            case MC_OP_TANH: case MC_OP_SIGMOID: case MC_OP_RELU: case MC_OP_GELU:
            case MC_OP_GELU_TANH: case MC_OP_SILU: case MC_OP_SIN: case MC_OP_COS: case MC_OP_ERF:
            case MC_OP_ADD: case MC_OP_SUB: case MC_OP_MUL: case MC_OP_DIV: case MC_OP_POW:
            case MC_OP_MAXIMUM: case MC_OP_MINIMUM: case MC_OP_EQ: case MC_OP_NE: case MC_OP_LT:
            case MC_OP_LE: case MC_OP_GT: case MC_OP_GE: case MC_OP_WHERE: case MC_OP_CAST:
            case MC_OP_SUM: case MC_OP_MAX: case MC_OP_MIN: case MC_OP_MATMUL:
            case MC_OP_TRANSPOSE: case MC_OP_RESHAPE: case MC_OP_EXPAND: case MC_OP_SLICE:
            case MC_OP_CONCAT: case MC_OP_IOTA: case MC_OP_FULL: case MC_NUM_OPS:
                MC_UNREACHABLE("not a composite");
            }
            if (v >= 0 && n->name)
                mc_value_set_name(rw.dst, v, n->name);
            rw.map[i] = v;
        }
        if (rw.map[i] < 0) {
            mc_rewrite_abort(&rw);
            return mc_error_status() != MC_OK ? mc_error_status() : mc_fail(MC_ERR_SYSTEM, "decompose failed");
        }
    }
    return mc_rewrite_finish(&rw, g);
}
