/* Simplification: constant folding and algebraic identities.
 *
 * Requires: a decomposed graph. Changes, node by node in order (so chains collapse in one walk):
 *   - a pointwise operator whose operands are all constants becomes a constant (computed with
 *     the kernel IR's own scalar semantics, rounded to its dtype);
 *   - x*1, 1*x, x/1, x+0, 0+x, x-0 become x when that changes neither shape nor dtype;
 *   - neg(neg(x)) becomes x;
 *   - transpose(transpose(x)) becomes one transpose (or x), reshape(reshape(x)) one reshape;
 *     a transpose, reshape, expand or slice that changes nothing becomes x;
 *   - a pointwise operator reading a reshape that splits the last axis of a GEMM's result (or of
 *     pointwise work over one) is computed before the reshape: f(reshape(y), r) becomes
 *     reshape(f(y, reshape(r))) (sink_reshape below), so that it sits in the GEMM's index space
 *     and joins its epilogue. A conv's GEMM is [N, C_out, H*W] and what follows the conv (bias,
 *     relu, a residual add) is [N, C_out, H, W]: without this they would be a kernel of their own.
 *     MINIC_CONV_EPILOGUE=0 in the environment turns this rewrite off (the earlier kernels, for
 *     comparison).
 * Graph outputs are left as they are (an output stays its own value), but for that last rewrite,
 * which keeps the output's name on the reshape. What becomes unused is removed by dce. An allreduce is never folded, not even of a constant: over n ranks it is n
 * times its operand.
 */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

static const mc_node *dst(const mc_rewrite *rw, mc_value v) { return &rw->dst->nodes[v]; }

static bool is_const(const mc_rewrite *rw, mc_value v, double value)
{
    const mc_node *n = dst(rw, v);
    return n->op == MC_OP_CONST && !n->attr.per && n->attr.value == value;
}

static bool same_type(const mc_node *a, const mc_node *b)
{
    return a->dtype == b->dtype && a->rank == b->rank &&
           memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->rank) == 0;
}

static int64_t perm_at(const mc_node *t, int d)
{
    return t->attr.has_list ? t->attr.list[d] : t->rank - 1 - d;
}

/* The simpler value for node n (operands already mapped to in[]), or MC_NONE. */
static mc_value simpler(mc_rewrite *rw, const mc_node *n, const mc_value *in)
{
    mc_op_kind kind = mc_op_table[n->op].kind;
    bool pointwise = kind == MC_KIND_UNARY || kind == MC_KIND_BINARY || kind == MC_KIND_COMPARE ||
                     kind == MC_KIND_SELECT || kind == MC_KIND_CAST;
    if (pointwise) {
        bool all_const = true;
        double v[3] = {0, 0, 0};
        for (int k = 0; k < n->nin && k < 3; k++) {
            all_const = all_const && dst(rw, in[k])->op == MC_OP_CONST && !dst(rw, in[k])->attr.per;
            if (all_const)
                v[k] = dst(rw, in[k])->attr.value;
        }
        if (all_const && n->rank == 0) {
            mc_dtype operand = dst(rw, in[n->op == MC_OP_WHERE ? 1 : 0])->dtype;
            double r = mc_op_apply(n->op, operand, n->dtype, v[0], v[1], v[2]);
            return mc_rewrite_const(rw, n, mc_round_to_dtype(r, n->dtype), n->dtype);
        }
    }
    const mc_node *a = n->nin > 0 && in[0] >= 0 ? dst(rw, in[0]) : NULL;
    const mc_node *b = n->nin > 1 && in[1] >= 0 ? dst(rw, in[1]) : NULL;
    switch (n->op) {
    case MC_OP_MUL:
        if (is_const(rw, in[1], 1) && same_type(a, n))
            return in[0];
        if (is_const(rw, in[0], 1) && same_type(b, n))
            return in[1];
        break;
    case MC_OP_ADD:
        if (is_const(rw, in[1], 0) && same_type(a, n))
            return in[0];
        if (is_const(rw, in[0], 0) && same_type(b, n))
            return in[1];
        break;
    case MC_OP_SUB:
        if (is_const(rw, in[1], 0) && same_type(a, n))
            return in[0];
        break;
    case MC_OP_DIV:
        if (is_const(rw, in[1], 1) && same_type(a, n))
            return in[0];
        break;
    case MC_OP_NEG:
        if (a->op == MC_OP_NEG)
            return a->in[0];
        break;
    case MC_OP_TRANSPOSE: {
        bool identity = true;
        for (int d = 0; d < n->rank; d++)
            identity = identity && perm_at(n, d) == d;
        if (identity)
            return in[0];
        if (a->op == MC_OP_TRANSPOSE) {
            mc_attrs t;
            memset(&t, 0, sizeof t);
            t.has_list = true;
            t.nlist = n->rank;
            identity = true;
            for (int d = 0; d < n->rank; d++) {
                t.list[d] = perm_at(a, (int)perm_at(n, d));
                identity = identity && t.list[d] == d;
            }
            mc_value x = a->in[0];
            return identity ? x : mc_rewrite_node(rw, n, MC_OP_TRANSPOSE, &x, 1, &t);
        }
        break;
    }
    case MC_OP_RESHAPE:
        if (same_type(a, n))
            return in[0];
        if (a->op == MC_OP_RESHAPE) {
            mc_value x = a->in[0];
            if (same_type(dst(rw, x), n))
                return x;
            mc_attrs r;
            memset(&r, 0, sizeof r);
            r.has_list = true;
            r.nlist = n->rank;
            memcpy(r.list, n->shape, sizeof(int64_t) * (size_t)n->rank);
            return mc_rewrite_node(rw, n, MC_OP_RESHAPE, &x, 1, &r);
        }
        break;
    case MC_OP_EXPAND:
    case MC_OP_SLICE:
        if (same_type(a, n) && (n->op == MC_OP_EXPAND || n->attr.step == 1))
            return in[0];
        break;
    case MC_OP_INPUT: case MC_OP_PARAM: case MC_OP_CONST: case MC_OP_ABS: case MC_OP_EXP:
    case MC_OP_LOG: case MC_OP_SQRT: case MC_OP_RSQRT: case MC_OP_RECIP: case MC_OP_TANH:
    case MC_OP_SIGMOID: case MC_OP_RELU: case MC_OP_GELU: case MC_OP_GELU_TANH: case MC_OP_SILU:
    case MC_OP_SIN: case MC_OP_COS: case MC_OP_ERF:
    case MC_OP_FLOOR: case MC_OP_CEIL: case MC_OP_ROUND: case MC_OP_SIGN: case MC_OP_SOFTPLUS:
    case MC_OP_LEAKY_RELU: case MC_OP_CLIP: case MC_OP_POW: case MC_OP_MAXIMUM:
    case MC_OP_MINIMUM: case MC_OP_EQ: case MC_OP_NE: case MC_OP_LT: case MC_OP_LE: case MC_OP_GT:
    case MC_OP_GE: case MC_OP_WHERE: case MC_OP_CAST: case MC_OP_SUM: case MC_OP_MEAN:
    case MC_OP_AND: case MC_OP_OR: case MC_OP_XOR: case MC_OP_NOT:
    case MC_OP_MAX: case MC_OP_MIN: case MC_OP_SOFTMAX: case MC_OP_LOG_SOFTMAX:
    case MC_OP_ARGMAX: case MC_OP_ARGMIN: case MC_OP_CUMSUM: case MC_OP_GATHER: case MC_OP_UPDATE:
    case MC_OP_CONV: case MC_OP_MAXPOOL: case MC_OP_AVGPOOL: case MC_OP_PAD: case MC_OP_BATCHNORM:
    case MC_OP_LAYERNORM: case MC_OP_RMSNORM: case MC_OP_MATMUL: case MC_OP_LINEAR:
    case MC_OP_CONCAT: case MC_OP_IOTA: case MC_OP_FULL: case MC_OP_ALLREDUCE: case MC_NUM_OPS:
        break;
    }
    return MC_NONE;
}

/* Does dst value v come from a GEMM through pointwise work (at most `depth` steps)? */
static bool from_gemm(const mc_rewrite *rw, mc_value v, int depth)
{
    const mc_node *n = dst(rw, v);
    if (n->op == MC_OP_MATMUL)
        return true;
    mc_op_kind kind = mc_op_table[n->op].kind;
    if (depth == 0 || !(kind == MC_KIND_UNARY || kind == MC_KIND_BINARY || kind == MC_KIND_SELECT ||
                        kind == MC_KIND_CAST))
        return false;
    for (int k = 0; k < n->nin; k++)
        if (n->in[k] >= 0 && from_gemm(rw, n->in[k], depth - 1))
            return true;
    return false;
}

/* r = reshape(y) splits y's last axis into r's axes ra-1 .. (ra = y's rank), the others equal.
 * (Sizes may be symbolic: their product is a dim of g's table, [B*T, 768] as [B, T, 768] does
 * not split the last axis.) */
static bool splits_last_axis(const mc_graph *g, const mc_node *r, const mc_node *y)
{
    int ra = y->rank;
    if (ra < 1 || r->rank <= ra)
        return false;
    int64_t p = 1;
    for (int d = ra - 1; d < r->rank; d++)
        if (!mc_dim_mul(g, p, r->shape[d], &p))
            return false;
    return p == y->shape[ra - 1] && memcmp(r->shape, y->shape, sizeof(int64_t) * (size_t)(ra - 1)) == 0;
}

/* The shape operand x (broadcast against n's shape, right-aligned) takes in y's space when the
 * split axes ra-1 .. of n are merged back: each split axis of x is 1 (broadcast), or each is
 * n's. False when x mixes the two (it cannot be read at the merged index). */
static bool merged_shape(const mc_graph *g, const mc_node *x, const mc_node *n, int ra, int64_t *shape)
{
    int64_t e[MC_MAX_RANK];
    int pad = n->rank - x->rank;
    for (int d = 0; d < n->rank; d++)
        e[d] = d < pad ? 1 : x->shape[d - pad];
    bool ones = true, full = true;
    int64_t p = 1;
    for (int d = ra - 1; d < n->rank; d++) {
        ones = ones && e[d] == 1;
        full = full && e[d] == n->shape[d];
        if (!mc_dim_mul(g, p, n->shape[d], &p))
            return false;
    }
    if (!ones && !full)
        return false;
    memcpy(shape, e, sizeof(int64_t) * (size_t)(ra - 1));
    shape[ra - 1] = ones ? 1 : p;
    return true;
}

/* f(.., reshape(y), ..) as reshape(f(.., y, ..)) where the reshape splits the last axis of y,
 * y comes from a GEMM, and nothing else reads the reshape (users: per src node, how many
 * operand slots read it; outputs count too): the other operands are seen in y's space through
 * reshapes (views, which fusion reads through strides), a scalar as it is. MC_NONE when the
 * rewrite does not apply. */
static mc_value sink_reshape(mc_rewrite *rw, const mc_node *n, const mc_value *in, const int *users)
{
    mc_op_kind kind = mc_op_table[n->op].kind;
    if (!(kind == MC_KIND_UNARY || kind == MC_KIND_BINARY || kind == MC_KIND_COMPARE ||
          kind == MC_KIND_SELECT || kind == MC_KIND_CAST) || n->nin > 3)
        return MC_NONE;
    int slot = -1;
    for (int k = 0; k < n->nin && slot < 0; k++) {
        const mc_node *r = dst(rw, in[k]);
        if (r->op == MC_OP_RESHAPE && users[n->in[k]] == 1 &&
            r->rank == n->rank && memcmp(r->shape, n->shape, sizeof(int64_t) * (size_t)n->rank) == 0 &&
            splits_last_axis(rw->dst, r, dst(rw, r->in[0])) && from_gemm(rw, r->in[0], 8))
            slot = k;
    }
    if (slot < 0)
        return MC_NONE;
    mc_value y = dst(rw, in[slot])->in[0];
    int ra = dst(rw, y)->rank;
    mc_value ops[3];
    int64_t shapes[3][MC_MAX_RANK];
    for (int k = 0; k < n->nin; k++)
        if (k != slot && dst(rw, in[k])->rank > 0 && !merged_shape(rw->dst, dst(rw, in[k]), n, ra, shapes[k]))
            return MC_NONE;
    for (int k = 0; k < n->nin; k++) {
        const mc_node *x = dst(rw, in[k]);
        ops[k] = in[k];
        if (k == slot) {
            ops[k] = y;
        } else if (x->rank > 0) {
            if (x->op == MC_OP_RESHAPE && dst(rw, x->in[0])->rank == ra &&
                memcmp(dst(rw, x->in[0])->shape, shapes[k], sizeof(int64_t) * (size_t)ra) == 0) {
                ops[k] = x->in[0];
                continue;
            }
            mc_attrs r;
            memset(&r, 0, sizeof r);
            r.has_list = true;
            r.nlist = ra;
            memcpy(r.list, shapes[k], sizeof(int64_t) * (size_t)ra);
            ops[k] = mc_rewrite_node(rw, n, MC_OP_RESHAPE, &in[k], 1, &r);
        }
    }
    mc_value f = mc_rewrite_node(rw, n, n->op, ops, n->nin, &n->attr);
    if (f < 0)
        return f;
    mc_attrs r;
    memset(&r, 0, sizeof r);
    r.has_list = true;
    r.nlist = n->rank;
    memcpy(r.list, n->shape, sizeof(int64_t) * (size_t)n->rank);
    mc_value v = mc_rewrite_node(rw, n, MC_OP_RESHAPE, &f, 1, &r);
    if (v >= 0 && n->name)
        mc_value_set_name(rw->dst, v, n->name); /* cosmetic: a clash only loses the name */
    return v;
}

static bool sink_reshapes(void)
{
    const char *e = getenv("MINIC_CONV_EPILOGUE");
    return !(e && strcmp(e, "0") == 0);
}

mc_status mc_pass_simplify(mc_graph *g, const mc_compile_options *opt)
{
    (void)opt;
    mc_rewrite rw;
    mc_status st = mc_rewrite_begin(&rw, g);
    if (st != MC_OK)
        return st;
    bool *is_output = calloc((size_t)(g->nnodes > 0 ? g->nnodes : 1), sizeof *is_output);
    int *users = calloc((size_t)(g->nnodes > 0 ? g->nnodes : 1), sizeof *users);
    if (!is_output || !users) {
        free(users);
        free(is_output);
        mc_rewrite_abort(&rw);
        return mc_fail(MC_ERR_SYSTEM, "out of memory in simplify");
    }
    bool sink = sink_reshapes();
    for (int o = 0; o < g->noutputs; o++) {
        is_output[g->outputs[o]] = true;
        users[g->outputs[o]]++;
    }
    for (int i = 0; i < g->nnodes; i++)
        for (int k = 0; k < g->nodes[i].nin; k++)
            if (g->nodes[i].in[k] >= 0)
                users[g->nodes[i].in[k]]++;
    for (int i = 0; i < g->nnodes; i++) {
        const mc_node *n = &g->nodes[i];
        mc_value v = MC_NONE;
        if (n->op != MC_OP_CONCAT && n->nin <= 3 && n->nin > 0) {
            mc_value in[3] = {MC_NONE, MC_NONE, MC_NONE};
            bool ok = true;
            for (int k = 0; k < n->nin; k++) {
                in[k] = n->in[k] >= 0 ? rw.map[n->in[k]] : MC_NONE;
                ok = ok && in[k] >= 0;
            }
            if (ok && !is_output[i])
                v = simpler(&rw, n, in);
            if (ok && v == MC_NONE && sink)
                v = sink_reshape(&rw, n, in, users);
        }
        if (v == MC_NONE)
            v = mc_rewrite_copy(&rw, i);
        if (v < 0) {
            free(users);
            free(is_output);
            mc_rewrite_abort(&rw);
            return mc_error_status() != MC_OK ? mc_error_status() : MC_ERR_SYSTEM;
        }
        rw.map[i] = v;
    }
    free(users);
    free(is_output);
    return mc_rewrite_finish(&rw, g);
}
