/* The view algebra fusion and lowering share: coordinate maps (mc_cmap: where a group evaluates
 * a node, in its own space) and tensor views (mc_tview: offset and strides into a buffer), and
 * how each shape operator and broadcast transforms them. A transpose, slice, expand or reshape
 * is index arithmetic here, never a copy; a reshape maps only where its dimension groups line
 * up (reshape_groups), and a map or view that cannot follow it returns false so the caller
 * stores the value instead.
 */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

/* ---- maps and views ----------------------------------------------------------------------- */

/* Strides and offsets are dims too in a symbolic graph (a product of symbolic sizes is an
 * expression of g's table), or 0 (a broadcast, no offset), which no dim is. Between constants
 * the arithmetic is plain, as it always was. A symbolic product or sum cannot fail for the graphs
 * passes/pipeline.c lets through with symbols (monomials, no negative steps): asserted. */
int64_t mc_stride_mul(const mc_graph *g, int64_t a, int64_t b)
{
    if (!mc_dim_is_sym(a) && !mc_dim_is_sym(b))
        return a * b;
    if (a == 0 || b == 0)
        return 0;
    int64_t out = 0;
    bool ok = mc_dim_mul(g, a, b, &out);
    MC_ASSERT(ok);
    return out;
}

int64_t mc_stride_add(const mc_graph *g, int64_t a, int64_t b)
{
    if (!mc_dim_is_sym(a) && !mc_dim_is_sym(b))
        return a + b;
    if (a == 0 || b == 0)
        return a == 0 ? b : a;
    int64_t out = 0;
    bool ok = mc_dim_add(g, a, b, &out);
    MC_ASSERT(ok);
    return out;
}

void mc_contiguous_strides(const mc_graph *g, const int64_t *shape, int rank, int64_t *strides)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        if (i > 0)
            s = mc_stride_mul(g, s, shape[i]);
    }
}

int64_t mc_shape_numel(const mc_graph *g, const int64_t *shape, int rank)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n = mc_stride_mul(g, n, shape[i]);
    return n;
}

void mc_cmap_identity(mc_cmap *m, int rank)
{
    memset(m, 0, sizeof *m);
    m->rank = rank;
    for (int d = 0; d < rank; d++)
        m->coef[d][d] = 1;
}

bool mc_cmap_equal(const mc_cmap *a, const mc_cmap *b)
{
    if (a->rank != b->rank)
        return false;
    for (int d = 0; d < a->rank; d++)
        if (a->off[d] != b->off[d] || memcmp(a->coef[d], b->coef[d], sizeof a->coef[d]) != 0)
            return false;
    return true;
}

/* NumPy broadcasting: operand x read at the coordinates of result n. */
static void broadcast_map(const mc_node *x, const mc_node *n, const mc_cmap *m, mc_cmap *out)
{
    memset(out, 0, sizeof *out);
    out->rank = x->rank;
    for (int i = 0; i < x->rank; i++) {
        int d = i + n->rank - x->rank;
        if (x->shape[i] == 1)
            continue; /* always coordinate 0 */
        out->off[i] = m->off[d];
        memcpy(out->coef[i], m->coef[d], sizeof out->coef[i]);
    }
}

static int64_t transpose_from(const mc_node *n, int d)
{
    return n->attr.has_list ? n->attr.list[d] : n->rank - 1 - d;
}

/* Reshape groups: runs of input and output dims with equal products (size-1 dims aside).
 * Calls back once per group with [i0, i1) input dims and [o0, o1) output dims. With symbols the
 * products are dims of g's table, equal for every binding exactly when they are the same dim,
 * and a side grows while the other's product is an exact multiple of its own ([B, T, 768] as
 * [B*T, 768]: B grows to B*T; [B*T, 768] as [B, T, 768]: B*T is B times T); where neither
 * divides the other ([B, 2] as [2, B]) both grow until they meet, at the end at the latest,
 * since inference made the sizes' products the same dim. A group of several dims on both
 * sides maps no coordinates (reshape_map_group) and is read through a view of the stored value
 * or copied (passes/fuse.c), as with constant sizes. False only where a product passes the
 * table's limits (mc_reshape_takes_symbols: passes/pipeline.c then compiles per binding). */
typedef bool (*reshape_group_fn)(void *ctx, const mc_node *x, const mc_node *n, int i0, int i1,
                                 int o0, int o1);

static bool reshape_groups(const mc_graph *g, const mc_node *x, const mc_node *n, reshape_group_fn fn, void *ctx)
{
    int i = 0, o = 0;
    for (;;) {
        while (i < x->rank && x->shape[i] == 1)
            i++;
        while (o < n->rank && n->shape[o] == 1)
            o++;
        if (i == x->rank || o == n->rank)
            return i == x->rank && o == n->rank;
        int i0 = i, o0 = o;
        int64_t pi = x->shape[i++], po = n->shape[o++], q;
        while (pi != po) {
            bool grow_in;
            if (!mc_dim_is_sym(pi) && !mc_dim_is_sym(po))
                grow_in = pi < po;
            else if (mc_dim_div_exact(g, po, pi, &q))
                grow_in = true;
            else if (mc_dim_div_exact(g, pi, po, &q))
                grow_in = false;
            else /* neither ([B, 2] as [2, B]): more of both, the input's first */
                grow_in = i < x->rank;
            if (grow_in ? i >= x->rank || !mc_dim_mul(g, pi, x->shape[i++], &pi)
                        : o >= n->rank || !mc_dim_mul(g, po, n->shape[o++], &po))
                return false;
        }
        if (!fn(ctx, x, n, i0, i, o0, o))
            return false;
    }
}

static bool accept_group(void *ctx, const mc_node *x, const mc_node *n, int i0, int i1, int o0, int o1)
{
    (void)ctx, (void)x, (void)n, (void)i0, (void)i1, (void)o0, (void)o1;
    return true;
}

static bool reshape_map_group(void *ctx, const mc_node *x, const mc_node *n, int i0, int i1, int o0,
                              int o1)
{
    const mc_cmap *m = ((const mc_cmap **)ctx)[0];
    mc_cmap *out = ((mc_cmap **)ctx)[1];
    int which = -1, count = 0;
    for (int k = i0; k < i1; k++)
        if (x->shape[k] > 1 || mc_dim_is_sym(x->shape[k])) {
            which = k;
            count++;
        }
    if (count != 1)
        return false; /* input coordinates would be quotients and remainders */
    int64_t s = 1; /* a map's coefficients are numbers: a split of a symbol ([B*T] as [B, T])
                    * is read through a view of the stored value instead */
    for (int d = o1 - 1; d >= o0; d--) {
        if (n->shape[d] > 1 || mc_dim_is_sym(n->shape[d])) {
            out->off[which] += m->off[d] * s;
            for (int j = 0; j < MC_MAX_RANK; j++)
                out->coef[which][j] += m->coef[d][j] * s;
        }
        if (d > o0) {
            if (mc_dim_is_sym(n->shape[d]))
                return false;
            s *= n->shape[d];
        }
    }
    return true;
}

bool mc_cmap_operand(const mc_graph *g, int ni, int slot, const mc_cmap *m, mc_cmap *out)
{
    const mc_node *n = &g->nodes[ni], *x = &g->nodes[n->in[slot]];
    switch (mc_op_table[n->op].kind) {
    case MC_KIND_UNARY:
    case MC_KIND_BINARY:
    case MC_KIND_COMPARE:
    case MC_KIND_SELECT:
    case MC_KIND_CAST: broadcast_map(x, n, m, out); return true;
    case MC_KIND_SHAPE: break;
    case MC_KIND_LEAF: case MC_KIND_REDUCE: case MC_KIND_NORM: case MC_KIND_MATMUL:
    case MC_KIND_CREATE: case MC_KIND_SPATIAL: case MC_KIND_COLLECTIVE:
        return false;
    case MC_KIND_GATHER:
        if (slot != 1)
            return false; /* x is read where the data says */
        /* idx at the result's axes [axis, axis + idx.rank) */
        memset(out, 0, sizeof *out);
        out->rank = x->rank;
        for (int d = 0; d < x->rank; d++) {
            out->off[d] = m->off[n->attr.axis + d];
            memcpy(out->coef[d], m->coef[n->attr.axis + d], sizeof out->coef[d]);
        }
        return true;
    }
    memset(out, 0, sizeof *out);
    out->rank = x->rank;
    switch (n->op) {
    case MC_OP_TRANSPOSE:
        for (int d = 0; d < n->rank; d++) {
            int64_t from = transpose_from(n, d);
            out->off[from] = m->off[d];
            memcpy(out->coef[from], m->coef[d], sizeof out->coef[from]);
        }
        return true;
    case MC_OP_EXPAND: broadcast_map(x, n, m, out); return true;
    case MC_OP_SLICE:
        *out = *m; /* x's coordinate along the axis: start + step * n's */
        out->off[n->attr.axis] = n->attr.start + n->attr.step * m->off[n->attr.axis];
        for (int j = 0; j < MC_MAX_RANK; j++)
            out->coef[n->attr.axis][j] = n->attr.step * m->coef[n->attr.axis][j];
        return true;
    case MC_OP_RESHAPE: {
        const void *ctx[2] = {m, out};
        return reshape_groups(g, x, n, reshape_map_group, (void *)ctx);
    }
    case MC_OP_INPUT: case MC_OP_PARAM: case MC_OP_CONST: case MC_OP_NEG: case MC_OP_ABS:
    case MC_OP_EXP: case MC_OP_LOG: case MC_OP_SQRT: case MC_OP_RSQRT: case MC_OP_RECIP:
    case MC_OP_TANH: case MC_OP_SIGMOID: case MC_OP_RELU: case MC_OP_GELU: case MC_OP_GELU_TANH:
    case MC_OP_SILU: case MC_OP_SIN: case MC_OP_COS: case MC_OP_ERF:
    case MC_OP_FLOOR: case MC_OP_CEIL: case MC_OP_ROUND: case MC_OP_SIGN: case MC_OP_SOFTPLUS:
    case MC_OP_LEAKY_RELU: case MC_OP_CLIP: case MC_OP_ADD:
    case MC_OP_SUB: case MC_OP_MUL: case MC_OP_DIV: case MC_OP_POW: case MC_OP_MAXIMUM:
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
    return false;
}

/* ctx: {the graph (strides may be dims), the view in, the view out} */
static bool reshape_view_group(void *ctx, const mc_node *x, const mc_node *n, int i0, int i1, int o0,
                               int o1)
{
    const mc_graph *g = ((const void **)ctx)[0];
    const mc_tview *in = ((const mc_tview **)ctx)[1];
    mc_tview *out = ((mc_tview **)ctx)[2];
    int last = -1;
    for (int k = i0; k < i1; k++) {
        if (x->shape[k] == 1)
            continue;
        if (last >= 0 && in->stride[last] != mc_stride_mul(g, in->stride[k], x->shape[k]))
            return false; /* merging dims that are not adjacent in memory */
        last = k;
    }
    int64_t s = in->stride[last];
    for (int d = o1 - 1; d >= o0; d--) {
        out->stride[d] = s;
        if (d > o0)
            s = mc_stride_mul(g, s, n->shape[d]);
    }
    return true;
}

bool mc_reshape_takes_symbols(const mc_graph *g, const mc_node *x, const mc_node *n)
{
    return reshape_groups(g, x, n, accept_group, NULL);
}

bool mc_tview_compose(const mc_graph *g, int ni, const mc_tview *in, mc_tview *out)
{
    const mc_node *n = &g->nodes[ni], *x = &g->nodes[n->in[0]];
    memset(out, 0, sizeof *out);
    out->base = in->base;
    out->offset = in->offset;
    switch (n->op) {
    case MC_OP_TRANSPOSE:
        for (int d = 0; d < n->rank; d++)
            out->stride[d] = in->stride[transpose_from(n, d)];
        return true;
    case MC_OP_EXPAND:
        for (int d = 0; d < n->rank; d++) {
            int i = d - (n->rank - x->rank);
            out->stride[d] = (i < 0 || x->shape[i] == 1) ? 0 : in->stride[i];
        }
        return true;
    case MC_OP_SLICE: /* with symbols: a constant start and a positive step (pipeline.c) */
        memcpy(out->stride, in->stride, sizeof out->stride);
        out->offset = mc_stride_add(g, out->offset, mc_stride_mul(g, n->attr.start, in->stride[n->attr.axis]));
        out->stride[n->attr.axis] = mc_stride_mul(g, out->stride[n->attr.axis], n->attr.step);
        return true;
    case MC_OP_RESHAPE: {
        const void *ctx[3] = {g, in, out};
        return reshape_groups(g, x, n, reshape_view_group, (void *)ctx);
    }
    case MC_OP_INPUT: case MC_OP_PARAM: case MC_OP_CONST: case MC_OP_NEG: case MC_OP_ABS:
    case MC_OP_EXP: case MC_OP_LOG: case MC_OP_SQRT: case MC_OP_RSQRT: case MC_OP_RECIP:
    case MC_OP_TANH: case MC_OP_SIGMOID: case MC_OP_RELU: case MC_OP_GELU: case MC_OP_GELU_TANH:
    case MC_OP_SILU: case MC_OP_SIN: case MC_OP_COS: case MC_OP_ERF:
    case MC_OP_FLOOR: case MC_OP_CEIL: case MC_OP_ROUND: case MC_OP_SIGN: case MC_OP_SOFTPLUS:
    case MC_OP_LEAKY_RELU: case MC_OP_CLIP: case MC_OP_ADD:
    case MC_OP_SUB: case MC_OP_MUL: case MC_OP_DIV: case MC_OP_POW: case MC_OP_MAXIMUM:
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
    return false;
}


bool mc_tview_invert(const mc_graph *g, int ni, const mc_tview *v, mc_tview *out)
{
    const mc_node *n = &g->nodes[ni], *in = &g->nodes[n->in[0]];
    memset(out, 0, sizeof *out);
    out->base = v->base;
    out->offset = v->offset;
    if (n->op == MC_OP_TRANSPOSE) {
        for (int d = 0; d < n->rank; d++)
            out->stride[transpose_from(n, d)] = v->stride[d];
        return true;
    }
    if (n->op == MC_OP_RESHAPE) {
        const void *ctx[3] = {g, v, out};
        return reshape_groups(g, n, in, reshape_view_group, (void *)ctx);
    }
    return false; /* a slice or expand sees only part of its operand */
}
