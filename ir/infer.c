/* Type and shape inference: the rules of docs/FORMAT.md §1–§2 for every operator of ir/ops.def.
 *
 * mc_node_infer is the single place that decides whether a node is well typed. mc_graph_add
 * runs it before appending a node, and the verifier re-runs it on every node after every pass,
 * so the rules are written once and can't drift between building and checking. It also
 * normalizes attributes into the one form passes and backends read: axes non-negative and
 * sorted (a reduction without `axis` gets the full list; has_list stays false so it prints as
 * written), transpose's default perm spelled out, reshape's -1 resolved, slice bounds clamped.
 * Normalizing is idempotent, which the verifier relies on.
 *
 * Errors are the user's: each message starts with the operator's name and says what was
 * expected ("add: operand dtypes differ: f32 and f16 (use cast)"); when the node came from a
 * graph file it carries file:line:col through mc_fail_at.
 */
#include "ir/ir.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct infer {
    const mc_graph *g;
    mc_node *n;
    const char *op; /* the operator's name, first word of every message */
} infer;

static mc_status fail(const infer *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static mc_status fail(const infer *c, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->n->line > 0)
        return mc_fail_at(MC_ERR_INPUT, c->g->file, c->g->text, c->n->line, c->n->col, "%s: %s",
                          c->op, msg);
    return mc_fail(MC_ERR_INPUT, "%s: %s", c->op, msg);
}

static const mc_node *operand(const infer *c, int i) { return &c->g->nodes[c->n->in[i]]; }

/* "[4, 8]", "[B, T*2]" into buf. */
static const char *shape_str(const mc_graph *g, char *buf, size_t size, const int64_t *shape, int rank)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < rank && used < size; i++) {
        char dim[96];
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "",
                                 mc_dim_str(g, shape[i], dim, sizeof dim));
    }
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

#define SHAPE(node) shape_str(c->g, (char[200]){0}, 200, (node)->shape, (node)->rank)
/* One dimension for a message: "12", "T", "B*T". */
#define DIM(d) mc_dim_str(c->g, (d), (char[96]){0}, 96)

static bool dtype_valid(mc_dtype d) { return (unsigned)d < MC_NUM_DTYPES; }

/* Which dtypes each operator accepts (docs/FORMAT.md §1): ops.def's dtype classes. For where it
 * is the dtype of the selected values; for cast, iota and full the result's.
 * where over i32 values is refused for now (cast them; the contract's version 2 allows it, and
 * FORMAT.md marks it "not yet"); full makes any dtype (a bool's value must be 0 or 1, an i32's
 * an integer). */
static bool dtype_supported(mc_op op, mc_dtype d)
{
    return (mc_op_table[op].dtypes & MC_DTYPE_BIT(d)) != 0;
}

bool mc_op_accepts_dtype(mc_op op, mc_dtype d)
{
    return dtype_valid(d) && dtype_supported(op, d);
}

static mc_status check_dtype(const infer *c, mc_dtype d)
{
    if (dtype_supported(c->n->op, d))
        return MC_OK;
    char list[64] = "";
    int count = 0, total = 0;
    for (int i = 0; i < MC_NUM_DTYPES; i++)
        total += dtype_supported(c->n->op, (mc_dtype)i);
    for (int i = 0; i < MC_NUM_DTYPES; i++) {
        if (!dtype_supported(c->n->op, (mc_dtype)i))
            continue;
        count++;
        const char *sep = count == 1 ? "" : count == total ? " or " : ", ";
        strncat(list, sep, sizeof list - strlen(list) - 1);
        strncat(list, mc_dtype_name((mc_dtype)i), sizeof list - strlen(list) - 1);
    }
    return fail(c, "%s is not supported (%s takes %s; use cast)", mc_dtype_name(d), c->op, list);
}

static mc_status check_same_dtype(const infer *c, const mc_node *a, const mc_node *b)
{
    if (a->dtype == b->dtype)
        return MC_OK;
    return fail(c, "operand dtypes differ: %s and %s (use cast)", mc_dtype_name(a->dtype),
                mc_dtype_name(b->dtype));
}

/* Normalize axis against rank (negative counts from the end). */
static mc_status norm_axis(const infer *c, int64_t *axis, int rank, const char *what)
{
    if (rank == 0)
        return fail(c, "%s=%lld: a scalar has no axes", what, (long long)*axis);
    if (*axis < -rank || *axis >= rank)
        return fail(c, "%s=%lld is out of range for rank %d (expected %d..%d)", what,
                    (long long)*axis, rank, -rank, rank - 1);
    if (*axis < 0)
        *axis += rank;
    return MC_OK;
}

/* Set the result's shape; checks rank, positive dims and that the byte size fits int64. */
static mc_status set_shape(const infer *c, const int64_t *shape, int rank)
{
    if (rank < 0 || rank > MC_MAX_RANK)
        return fail(c, "rank %d is above the maximum of %d", rank, MC_MAX_RANK);
    int64_t numel = 1;
    for (int i = 0; i < rank; i++) {
        if (mc_dim_is_sym(shape[i])) { /* checked when it is bound (ir/dims.c) */
            if (!mc_dim_valid(c->g, shape[i]))
                return fail(c, "dimension %d is not a dimension of this graph (%lld)", i, (long long)shape[i]);
            continue;
        }
        if (shape[i] <= 0)
            return fail(c, "dimension %d is %lld: dimensions must be positive", i,
                        (long long)shape[i]);
        if (mc_mul_overflows(numel, shape[i], &numel))
            return fail(c, "shape %s has too many elements (overflows int64)",
                        shape_str(c->g, (char[200]){0}, 200, shape, rank));
    }
    int64_t bytes;
    if (mc_mul_overflows(numel, 8, &bytes))
        return fail(c, "shape %s has too many elements (overflows int64)",
                    shape_str(c->g, (char[200]){0}, 200, shape, rank));
    if (shape != c->n->shape)
        memmove(c->n->shape, shape, sizeof(int64_t) * (size_t)rank);
    c->n->rank = rank;
    return MC_OK;
}

/* NumPy broadcasting of two shapes into out (rank max(ra, rb)). */
static mc_status broadcast(const infer *c, const int64_t *a, int ra, const int64_t *b, int rb,
                           int64_t *out, int *rout)
{
    int r = ra > rb ? ra : rb;
    int64_t res[MC_MAX_RANK] = {0};
    for (int i = 0; i < r; i++) {
        int64_t da = i < r - ra ? 1 : a[i - (r - ra)];
        int64_t db = i < r - rb ? 1 : b[i - (r - rb)];
        if (da != db && da != 1 && db != 1)
            return fail(c, "shapes %s and %s do not broadcast (axis %d: %s vs %s)",
                        shape_str(c->g, (char[200]){0}, 200, a, ra),
                        shape_str(c->g, (char[200]){0}, 200, b, rb), i - r, DIM(da), DIM(db));
        res[i] = da == 1 ? db : da;
    }
    memcpy(out, res, sizeof(int64_t) * (size_t)r);
    *rout = r;
    return MC_OK;
}

/* An i32 or bool value must be one that dtype holds exactly. */
static mc_status check_value(const infer *c, double v, mc_dtype d)
{
    if (d == MC_I32 && !(v == floor(v) && v >= -2147483648.0 && v <= 2147483647.0))
        return fail(c, "value %.17g is not an integer in i32's range (dtype i32)", v);
    if (d == MC_BOOL && !(v == 0 || v == 1))
        return fail(c, "value %.17g is not 0 or 1 (dtype bool)", v);
    return MC_OK;
}

static mc_status infer_leaf(const infer *c)
{
    mc_node *n = c->n;
    if (n->op == MC_OP_CONST) {
        if (!dtype_valid(n->attr.dtype))
            return fail(c, "invalid dtype %d", (int)n->attr.dtype);
        n->dtype = n->attr.dtype;
        n->rank = 0;
        return check_value(c, n->attr.value, n->dtype);
    }
    if (!dtype_valid(n->dtype))
        return fail(c, "invalid dtype %d", (int)n->dtype);
    return set_shape(c, n->shape, n->rank);
}

static mc_status infer_elementwise(const infer *c)
{
    mc_node *n = c->n;
    const mc_node *a = operand(c, 0);
    mc_status st;
    switch (mc_op_table[n->op].kind) {
    case MC_KIND_UNARY:
        if ((st = check_dtype(c, a->dtype)))
            return st;
        if (n->op == MC_OP_CLIP) {
            if (!n->attr.has_lo && !n->attr.has_hi)
                return fail(c, "expected a bound: 'min', 'max' or both");
            for (int k = 0; k < 2; k++) {
                double v = k ? n->attr.hi : n->attr.lo;
                bool has = k ? n->attr.has_hi : n->attr.has_lo;
                if (has && a->dtype == MC_I32 && !(v == trunc(v) && v >= INT32_MIN && v <= INT32_MAX))
                    return fail(c, "'%s' of an i32 operand must be an integer in the range of i32, got %g",
                                k ? "max" : "min", v);
                if (has && isnan(v))
                    return fail(c, "'%s' is NaN", k ? "max" : "min");
            }
        }
        n->dtype = a->dtype;
        return set_shape(c, a->shape, a->rank);
    case MC_KIND_BINARY:
    case MC_KIND_COMPARE: {
        const mc_node *b = operand(c, 1);
        if ((st = check_same_dtype(c, a, b)) || (st = check_dtype(c, a->dtype)))
            return st;
        n->dtype = mc_op_table[n->op].kind == MC_KIND_COMPARE ? MC_BOOL : a->dtype;
        int64_t shape[MC_MAX_RANK];
        int rank;
        if ((st = broadcast(c, a->shape, a->rank, b->shape, b->rank, shape, &rank)))
            return st;
        return set_shape(c, shape, rank);
    }
    case MC_KIND_SELECT: {
        const mc_node *x = operand(c, 1), *y = operand(c, 2);
        if (a->dtype != MC_BOOL)
            return fail(c, "condition must be bool, not %s (use a compare or cast)",
                        mc_dtype_name(a->dtype));
        if ((st = check_same_dtype(c, x, y)) || (st = check_dtype(c, x->dtype)))
            return st;
        n->dtype = x->dtype;
        int64_t shape[MC_MAX_RANK];
        int rank;
        if ((st = broadcast(c, a->shape, a->rank, x->shape, x->rank, shape, &rank)) ||
            (st = broadcast(c, shape, rank, y->shape, y->rank, shape, &rank)))
            return st;
        return set_shape(c, shape, rank);
    }
    case MC_KIND_CAST:
        if (!dtype_valid(n->attr.dtype))
            return fail(c, "invalid target dtype %d", (int)n->attr.dtype);
        n->dtype = n->attr.dtype;
        return set_shape(c, a->shape, a->rank);
    case MC_KIND_LEAF: case MC_KIND_REDUCE: case MC_KIND_NORM: case MC_KIND_MATMUL:
    case MC_KIND_SHAPE: case MC_KIND_CREATE: case MC_KIND_SPATIAL: case MC_KIND_GATHER:
    case MC_KIND_COLLECTIVE:
        break;
    }
    MC_UNREACHABLE("not an elementwise operator");
}

static mc_status infer_reduce(const infer *c)
{
    mc_node *n = c->n;
    mc_attrs *at = &n->attr;
    const mc_node *x = operand(c, 0);
    mc_status st;
    if ((st = check_dtype(c, x->dtype)))
        return st;
    n->dtype = x->dtype;
    if (!at->has_list) {
        at->nlist = x->rank;
        for (int i = 0; i < x->rank; i++)
            at->list[i] = i;
    } else {
        if (at->nlist == 0)
            return fail(c, "axis=[] reduces nothing (leave out axis to reduce every axis)");
        if (at->nlist < 0 || at->nlist > MC_MAX_RANK)
            return fail(c, "%d axes given, at most %d allowed", at->nlist, MC_MAX_RANK);
        int64_t given[MC_MAX_RANK];
        memcpy(given, at->list, sizeof given);
        unsigned seen = 0;
        for (int i = 0; i < at->nlist; i++) {
            if ((st = norm_axis(c, &at->list[i], x->rank, "axis")))
                return st;
            if (seen & (1u << at->list[i])) {
                int j = 0;
                while (j < i && at->list[j] != at->list[i])
                    j++;
                if (given[j] == given[i])
                    return fail(c, "axis %lld appears twice", (long long)given[i]);
                return fail(c, "axes %lld and %lld are the same axis of a rank-%d tensor",
                            (long long)given[j], (long long)given[i], x->rank);
            }
            seen |= 1u << at->list[i];
        }
        for (int i = 1; i < at->nlist; i++) /* insertion sort: at most 8 */
            for (int j = i; j > 0 && at->list[j - 1] > at->list[j]; j--) {
                int64_t t = at->list[j];
                at->list[j] = at->list[j - 1];
                at->list[j - 1] = t;
            }
    }
    if (n->op == MC_OP_ARGMAX || n->op == MC_OP_ARGMIN) {
        if (at->nlist != 1 || x->rank == 0)
            return fail(c, "expected one axis, got %d", x->rank == 0 ? 0 : at->nlist);
        if (x->shape[at->list[0]] > INT32_MAX)
            return fail(c, "axis %lld is too long for i32 indices", (long long)at->list[0]);
        n->dtype = MC_I32;
    }
    int64_t shape[MC_MAX_RANK];
    int rank = 0, k = 0;
    for (int i = 0; i < x->rank; i++) {
        bool reduced = k < at->nlist && at->list[k] == i;
        k += reduced;
        if (!reduced)
            shape[rank++] = x->shape[i];
        else if (at->keepdim)
            shape[rank++] = 1;
    }
    return set_shape(c, shape, rank);
}

static mc_status check_norm_weight(const infer *c, const mc_node *x, int index, const char *what)
{
    const mc_node *w = operand(c, index);
    mc_status st;
    if ((st = check_same_dtype(c, x, w)))
        return st;
    int64_t last = x->shape[x->rank - 1];
    if (w->rank != 1 || w->shape[0] != last)
        return fail(c, "%s must have shape [%s] (the size of the last axis of %s), not %s",
                    what, DIM(last), SHAPE(x), SHAPE(w));
    return MC_OK;
}

static mc_status infer_norm(const infer *c)
{
    mc_node *n = c->n;
    const mc_node *x = operand(c, 0);
    mc_status st;
    if ((st = check_dtype(c, x->dtype)))
        return st;
    n->dtype = x->dtype;
    if (n->op == MC_OP_SOFTMAX || n->op == MC_OP_LOG_SOFTMAX || n->op == MC_OP_CUMSUM) {
        if ((st = norm_axis(c, &n->attr.axis, x->rank, "axis")))
            return st;
    } else {
        if (x->rank == 0)
            return fail(c, "x must have at least one axis (it normalizes over the last)");
        if ((st = check_norm_weight(c, x, 1, "w")))
            return st;
        if (n->op == MC_OP_LAYERNORM && (st = check_norm_weight(c, x, 2, "b")))
            return st;
        if (!(n->attr.value >= 0) || isinf(n->attr.value))
            return fail(c, "eps must be a finite number >= 0, not %g", n->attr.value);
    }
    return set_shape(c, x->shape, x->rank);
}

static mc_status infer_matmul(const infer *c)
{
    mc_node *n = c->n;
    const mc_node *a = operand(c, 0), *b = operand(c, 1);
    mc_status st;
    if ((st = check_same_dtype(c, a, b)) || (st = check_dtype(c, a->dtype)))
        return st;
    n->dtype = a->dtype;
    int64_t shape[MC_MAX_RANK];
    int rank;
    if (n->op == MC_OP_LINEAR) {
        if (a->rank < 1)
            return fail(c, "x must have at least one axis ([..., in]), not %s", SHAPE(a));
        if (b->rank != 2)
            return fail(c, "w must be [out, in] (rank 2), not %s", SHAPE(b));
        int64_t in = a->shape[a->rank - 1];
        if (b->shape[1] != in)
            return fail(c, "w is %s but x has %s input features (expected [out, %s])",
                        SHAPE(b), DIM(in), DIM(in));
        if (n->nin == 3) {
            const mc_node *bias = operand(c, 2);
            if ((st = check_same_dtype(c, a, bias)))
                return st;
            if (bias->rank != 1 || bias->shape[0] != b->shape[0])
                return fail(c, "b must have shape [%s] (w's out features), not %s",
                            DIM(b->shape[0]), SHAPE(bias));
        }
        memcpy(shape, a->shape, sizeof(int64_t) * (size_t)a->rank);
        shape[a->rank - 1] = b->shape[0];
        return set_shape(c, shape, a->rank);
    }
    if (n->attr.nkernel > 0) {
        /* b's im2col (passes/decompose.c, an implicit-GEMM conv): a [M, C kh kw] @ im2col(b
         * [N, C, *S]) is [N, M, prod(out)] */
        const mc_attrs *at = &n->attr;
        int sr = at->nkernel;
        if (sr > 2 || b->rank != 2 + sr || a->rank != 2)
            return fail(c, "an im2col matmul takes [M, K] and [N, C, *spatial], not %s @ %s", SHAPE(a), SHAPE(b));
        int64_t K = b->shape[1], O = 1;
        for (int i = 0; i < sr; i++) {
            int64_t L = b->shape[2 + i], span = at->dilation[i] * (at->kernel[i] - 1) + 1;
            if (L < 1 || at->kernel[i] < 1 || at->stride[i] < 1 || at->dilation[i] < 1 || at->padding[i] < 0 ||
                L + 2 * at->padding[i] < span)
                return fail(c, "im2col window does not fit %s", SHAPE(b));
            K *= at->kernel[i];
            O *= (L + 2 * at->padding[i] - span) / at->stride[i] + 1;
        }
        if (a->shape[1] != K)
            return fail(c, "inner dimensions differ: %s @ im2col of %s", SHAPE(a), SHAPE(b));
        if (at->kchunk < 0 || (at->kchunk > 0 && b->shape[1] % at->kchunk != 0))
            return fail(c, "an im2col K chunk of %lld does not divide the channels of %s", (long long)at->kchunk,
                        SHAPE(b));
        int64_t s3[3] = {b->shape[0], a->shape[0], O};
        return set_shape(c, s3, 3);
    }
    if (a->rank < 2 || b->rank < 2)
        return fail(c, "operands must have rank >= 2, not %s @ %s", SHAPE(a), SHAPE(b));
    if (a->shape[a->rank - 1] != b->shape[b->rank - 2])
        return fail(c, "inner dimensions differ: %s @ %s", SHAPE(a), SHAPE(b));
    if (broadcast(c, a->shape, a->rank - 2, b->shape, b->rank - 2, shape, &rank))
        /* Say it in matmul's terms: the batch dimensions are what failed. */
        return fail(c, "batch dimensions do not broadcast: %s @ %s", SHAPE(a), SHAPE(b));
    shape[rank] = a->shape[a->rank - 2];
    shape[rank + 1] = b->shape[b->rank - 1];
    return set_shape(c, shape, rank + 2);
}

static mc_status infer_transpose(const infer *c, const mc_node *x)
{
    mc_attrs *at = &c->n->attr;
    if (!at->has_list) {
        at->nlist = x->rank;
        for (int i = 0; i < x->rank; i++)
            at->list[i] = x->rank - 1 - i;
    } else if (at->nlist != x->rank) {
        return fail(c, "perm has %d entries but x has rank %d", at->nlist, x->rank);
    }
    unsigned seen = 0;
    int64_t shape[MC_MAX_RANK];
    mc_status st;
    for (int i = 0; i < at->nlist; i++) {
        int64_t given = at->list[i];
        if ((st = norm_axis(c, &at->list[i], x->rank, "perm entry")))
            return st;
        if (seen & (1u << at->list[i]))
            return fail(c, "perm is not a permutation: axis %lld appears twice", (long long)given);
        seen |= 1u << at->list[i];
        shape[i] = x->shape[at->list[i]];
    }
    return set_shape(c, shape, x->rank);
}

static mc_status check_list(const infer *c, const char *what)
{
    const mc_attrs *at = &c->n->attr;
    if (!at->has_list)
        return fail(c, "%s=[..] is required", what);
    if (at->nlist < 0 || at->nlist > MC_MAX_RANK)
        return fail(c, "%s has %d entries: rank %d is above the maximum of %d", what, at->nlist,
                    at->nlist, MC_MAX_RANK);
    return MC_OK;
}

static mc_status infer_reshape(const infer *c, const mc_node *x)
{
    mc_attrs *at = &c->n->attr;
    mc_status st;
    if ((st = check_list(c, "shape")))
        return st;
    int unknown = -1;
    int64_t known = 1, total = 1;
    for (int i = 0; i < x->rank; i++)
        if (!mc_dim_mul(c->g, total, x->shape[i], &total))
            return fail(c, "x has too many elements (overflows int64)");
    for (int i = 0; i < at->nlist; i++) {
        if (at->list[i] == -1) {
            if (unknown >= 0)
                return fail(c, "shape has more than one -1");
            unknown = i;
        } else if (mc_dim_is_sym(at->list[i]) && !mc_dim_valid(c->g, at->list[i])) {
            return fail(c, "shape entry %lld is not a dimension of this graph", (long long)at->list[i]);
        } else if (!mc_dim_is_sym(at->list[i]) && at->list[i] <= 0) {
            return fail(c, "shape entry %lld is not positive (only one -1 is allowed)",
                        (long long)at->list[i]);
        } else if (!mc_dim_mul(c->g, known, at->list[i], &known)) {
            return fail(c, "shape has too many elements (overflows int64)");
        }
    }
    if (unknown >= 0) {
        if (!mc_dim_div_exact(c->g, total, known, &at->list[unknown]))
            return fail(c, "cannot reshape %s (%s elements) to %s: %s is not a multiple of "
                           "%s", SHAPE(x), DIM(total),
                        shape_str(c->g, (char[200]){0}, 200, at->list, at->nlist), DIM(total), DIM(known));
        known = total;
    }
    if (known != total)
        return fail(c, "cannot reshape %s (%s elements) to %s (%s elements)", SHAPE(x), DIM(total),
                    shape_str(c->g, (char[200]){0}, 200, at->list, at->nlist), DIM(known));
    return set_shape(c, at->list, at->nlist);
}

static mc_status infer_expand(const infer *c, const mc_node *x)
{
    const mc_attrs *at = &c->n->attr;
    mc_status st;
    if ((st = check_list(c, "shape")))
        return st;
    if (at->nlist < x->rank)
        return fail(c, "cannot expand %s to %s: the target has fewer axes", SHAPE(x),
                    shape_str(c->g, (char[200]){0}, 200, at->list, at->nlist));
    int lead = at->nlist - x->rank;
    for (int i = 0; i < x->rank; i++) {
        int64_t d = x->shape[i], t = at->list[lead + i];
        if (d != t && d != 1)
            return fail(c, "cannot expand %s to %s (axis %d is %s, not 1 or %s)", SHAPE(x),
                        shape_str(c->g, (char[200]){0}, 200, at->list, at->nlist), i, DIM(d), DIM(t));
    }
    return set_shape(c, at->list, at->nlist);
}

/* A slice of a symbolic axis of size n keeps its attributes as written (a specialised graph
 * normalizes them for the bound size) and has the size end - start, where a negative or
 * missing bound counts from n: `start=1` gives n - 1, `end=-2` n - 2, `start=0, end=8` 8. That
 * assumes the bounds lie inside the axis (no clamping): ir/dims.c checks it for each binding. */
static mc_status slice_symbolic(const infer *c, const mc_node *x)
{
    const mc_attrs *at = &c->n->attr;
    int64_t n = x->shape[at->axis];
    if (at->step != 1)
        return fail(c, "step=%lld over axis %lld of symbolic size %s: only step 1 is supported there",
                    (long long)at->step, (long long)at->axis, DIM(n));
    int64_t size;
    bool start_from_end = at->start != MC_END && at->start < 0;
    bool end_from_end = at->end == MC_END || at->end < 0;
    int64_t start = at->start == MC_END ? 0 : at->start, end = at->end == MC_END ? 0 : at->end;
    bool ok;
    if (end_from_end && !start_from_end)       /* n + end - start */
        ok = mc_dim_add_const(c->g, n, end - start, &size);
    else if (end_from_end && start_from_end)   /* (n + end) - (n + start) */
        ok = (size = end - start) >= 1;
    else if (start_from_end)                   /* end - (n + start): n varies, so no fixed size */
        ok = false;
    else
        ok = (size = end - start) >= 1;
    if (!ok)
        return fail(c, "start=%lld, end=%lld on axis %lld of symbolic size %s: the slice's size must be "
                       "positive and follow from the bounds (write both from the start, both from the end, "
                       "or a start from the start and the end from the end)",
                    (long long)(at->start == MC_END ? 0 : at->start), (long long)(at->end == MC_END ? 0 : at->end),
                    (long long)at->axis, DIM(n));
    int64_t shape[MC_MAX_RANK];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->rank);
    shape[at->axis] = size;
    return set_shape(c, shape, x->rank);
}

static mc_status infer_slice(const infer *c, const mc_node *x)
{
    mc_attrs *at = &c->n->attr;
    mc_status st;
    if ((st = norm_axis(c, &at->axis, x->rank, "axis")))
        return st;
    int64_t size = x->shape[at->axis], step = at->step;
    if (step == 0)
        return fail(c, "'step' must not be 0");
    if (mc_dim_is_sym(size))
        return slice_symbolic(c, x);
    /* Python's slice.indices: negative positions count from the end; a forward slice clamps
     * them to [0, size], a backward one to [-1, size - 1] (-1: before the first element). */
    int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? size : size - 1;
    int64_t start = at->start == MC_END ? (step > 0 ? 0 : size - 1) : at->start;
    int64_t end = at->end == MC_END ? (step > 0 ? size : -1) : at->end;
    if (at->start != MC_END && start < 0)
        start = start + size < lo ? lo : start + size;
    if (at->end != MC_END && end < 0)
        end = end + size < lo ? lo : end + size;
    start = start > hi ? hi : start;
    end = end > hi ? hi : end;
    int64_t count = step > 0 ? (end - start + step - 1) / step : (start - end + (-step) - 1) / (-step);
    if (count <= 0) {
        char steps[48] = "";
        if (step != 1)
            snprintf(steps, sizeof steps, ", step=%lld", (long long)step);
        return fail(c, "start=%lld, end=%lld%s select nothing from axis %lld of size %lld "
                       "(zero-size dimensions are not supported)",
                    (long long)(at->start == MC_END ? (step > 0 ? 0 : size - 1) : at->start),
                    (long long)(at->end == MC_END ? (step > 0 ? size : -1 - size) : at->end), steps,
                    (long long)at->axis, (long long)size);
    }
    /* normalized: start the first index taken, end one step past the last (MC_END where that
     * is before the first element, so that inferring again gives the same) */
    at->start = start;
    at->end = start + count * step < 0 ? MC_END : start + count * step;
    int64_t shape[MC_MAX_RANK];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->rank);
    shape[at->axis] = count;
    return set_shape(c, shape, x->rank);
}

static mc_status infer_concat(const infer *c, const mc_node *x)
{
    mc_node *n = c->n;
    mc_status st;
    if ((st = norm_axis(c, &n->attr.axis, x->rank, "axis")))
        return st;
    int64_t shape[MC_MAX_RANK];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->rank);
    int axis = (int)n->attr.axis;
    for (int i = 1; i < n->nin; i++) {
        const mc_node *y = operand(c, i);
        if ((st = check_same_dtype(c, x, y)))
            return st;
        if (y->rank != x->rank)
            return fail(c, "operand %d has rank %d but operand 1 has rank %d: %s and %s", i + 1,
                        y->rank, x->rank, SHAPE(x), SHAPE(y));
        for (int d = 0; d < x->rank; d++)
            if (d != axis && y->shape[d] != x->shape[d])
                return fail(c, "shapes %s and %s differ on axis %d (only axis %d may differ)",
                            SHAPE(x), SHAPE(y), d, axis);
        if (!mc_dim_add(c->g, shape[axis], y->shape[axis], &shape[axis]))
            return fail(c, "the result has too many elements (overflows int64)");
    }
    return set_shape(c, shape, x->rank);
}

static mc_status infer_shape_op(const infer *c)
{
    mc_node *n = c->n;
    const mc_node *x = operand(c, 0);
    mc_status st;
    if ((st = check_dtype(c, x->dtype)))
        return st;
    n->dtype = x->dtype;
    switch (n->op) {
    case MC_OP_TRANSPOSE: return infer_transpose(c, x);
    case MC_OP_RESHAPE: return infer_reshape(c, x);
    case MC_OP_EXPAND: return infer_expand(c, x);
    case MC_OP_SLICE: return infer_slice(c, x);
    case MC_OP_CONCAT: return infer_concat(c, x);
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
    case MC_OP_IOTA: case MC_OP_FULL: case MC_OP_ALLREDUCE: case MC_NUM_OPS:
        break;
    }
    MC_UNREACHABLE("not a shape operator");
}

/* A per-spatial-axis list: given with one entry per axis, or left out (its default filled in). */
static mc_status spatial_list(const infer *c, const char *what, int64_t *list, int *n, int sr, int64_t def,
                              const int64_t *defs)
{
    if (*n == 0) {
        for (int i = 0; i < sr; i++)
            list[i] = defs ? defs[i] : def;
        *n = sr;
    } else if (*n != sr) {
        return fail(c, "'%s' has %d entries; x has %d spatial axes", what, *n, sr);
    }
    return MC_OK;
}

static mc_status infer_spatial(const infer *c)
{
    mc_node *n = c->n;
    mc_attrs *at = &n->attr;
    const mc_node *x = operand(c, 0);
    mc_status st;
    if ((st = check_dtype(c, x->dtype)))
        return st;
    n->dtype = x->dtype;
    int64_t shape[MC_MAX_RANK];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->rank);
    if (n->op == MC_OP_PAD) {
        if (at->npads != 2 * x->rank)
            return fail(c, "'pads' has %d entries; a rank-%d x needs %d (the begins, then the ends)", at->npads,
                        x->rank, 2 * x->rank);
        double v = at->value;
        if (x->dtype == MC_I32 && !(v == trunc(v) && v >= INT32_MIN && v <= INT32_MAX))
            return fail(c, "'value' of an i32 operand must be an integer in the range of i32, got %g", v);
        if (x->dtype == MC_BOOL && !(v == 0 || v == 1))
            return fail(c, "'value' of a bool operand must be 0 or 1, got %g", v);
        for (int d = 0; d < x->rank; d++) {
            if (at->pads[d] < 0 || at->pads[x->rank + d] < 0)
                return fail(c, "pads must be >= 0 (constant padding only adds)");
            if (at->pads[d] > INT32_MAX || at->pads[x->rank + d] > INT32_MAX)
                return fail(c, "pads of axis %d are too large", d);
            if (!mc_dim_add_const(c->g, shape[d], at->pads[d] + at->pads[x->rank + d], &shape[d]))
                return fail(c, "axis %d is too large with its padding", d);
        }
        return set_shape(c, shape, x->rank);
    }
    if (n->op == MC_OP_BATCHNORM) {
        if (x->rank < 2)
            return fail(c, "x must have a channel axis (axis 1), not shape %s", SHAPE(x));
        static const char *const names[4] = {"scale", "bias", "mean", "var"};
        for (int i = 1; i < 5; i++) {
            const mc_node *p = operand(c, i);
            if ((st = check_same_dtype(c, x, p)))
                return st;
            if (p->rank != 1 || p->shape[0] != x->shape[1])
                return fail(c, "%s must have shape [%s] (x's channels), not %s", names[i - 1],
                            DIM(x->shape[1]), SHAPE(p));
        }
        if (!(at->value >= 0) || isinf(at->value))
            return fail(c, "eps must be a finite number >= 0, not %g", at->value);
        return set_shape(c, shape, x->rank);
    }
    /* conv, maxpool, avgpool: [N, C, L] or [N, C, H, W] */
    if (x->rank != 3 && x->rank != 4)
        return fail(c, "x must be [N, C, L] or [N, C, H, W] (channels first), not %s", SHAPE(x));
    for (int i = 0; i < n->nin; i++) /* only the batch axis may be symbolic, for now */
        for (int d = i == 0 ? 1 : 0; n->in[i] >= 0 && d < operand(c, i)->rank; d++)
            if (mc_dim_is_sym(operand(c, i)->shape[d]))
                return fail(c, "operand %d has the symbolic dimension %s on axis %d: only the batch "
                               "axis of x may be symbolic", i + 1, DIM(operand(c, i)->shape[d]), d);
    int sr = x->rank - 2;
    int64_t window[2];
    if (n->op == MC_OP_CONV) {
        const mc_node *w = operand(c, 1);
        if ((st = check_same_dtype(c, x, w)))
            return st;
        int64_t groups = at->groups, cin = x->shape[1];
        if (w->rank != x->rank)
            return fail(c, "w must be [C_out, C_in/groups, %s], not %s", sr == 1 ? "k" : "kh, kw", SHAPE(w));
        if (groups < 1 || cin % groups != 0 || w->shape[0] % groups != 0)
            return fail(c, "groups=%lld must divide x's %lld channels and w's %lld output channels",
                        (long long)groups, (long long)cin, (long long)w->shape[0]);
        if (w->shape[1] != cin / groups)
            return fail(c, "w has %lld input channels per group; x's %lld channels in %lld groups need %lld",
                        (long long)w->shape[1], (long long)cin, (long long)groups, (long long)(cin / groups));
        if (n->nin > 2 && n->in[2] >= 0) {
            const mc_node *b = operand(c, 2);
            if ((st = check_same_dtype(c, x, b)))
                return st;
            if (b->rank != 1 || b->shape[0] != w->shape[0])
                return fail(c, "b must have shape [%lld] (w's output channels), not %s", (long long)w->shape[0],
                            SHAPE(b));
        }
        for (int i = 0; i < sr; i++)
            window[i] = w->shape[2 + i];
        shape[1] = w->shape[0];
        if ((st = spatial_list(c, "dilation", at->dilation, &at->ndilation, sr, 1, NULL)))
            return st;
    } else {
        if (at->nkernel != sr)
            return fail(c, "'kernel' has %d entries; x has %d spatial axes", at->nkernel, sr);
        for (int i = 0; i < sr; i++)
            if (at->kernel[i] < 1)
                return fail(c, "the kernel must be at least 1 along every axis");
        memcpy(window, at->kernel, sizeof window);
    }
    if ((st = spatial_list(c, "stride", at->stride, &at->nstride, sr, 1, n->op == MC_OP_CONV ? NULL : window)) ||
        (st = spatial_list(c, "padding", at->padding, &at->npadding, sr, 0, NULL)))
        return st;
    for (int i = 0; i < sr; i++) {
        int64_t dil = n->op == MC_OP_CONV ? at->dilation[i] : 1, span = dil * (window[i] - 1) + 1;
        int64_t len = x->shape[2 + i] + 2 * at->padding[i];
        if (n->op != MC_OP_CONV && 2 * at->padding[i] > window[i])
            return fail(c, "padding %lld is more than half the kernel %lld", (long long)at->padding[i],
                        (long long)window[i]);
        if (at->stride[i] < 1 || dil < 1 || at->padding[i] < 0 || at->padding[i] > INT32_MAX)
            return fail(c, "stride, dilation must be >= 1 and padding >= 0");
        if (len < span)
            return fail(c, "the window (%lld) is larger than spatial axis %d (%lld with padding)", (long long)span,
                        i, (long long)len);
        shape[2 + i] = (len - span) / at->stride[i] + 1;
    }
    return set_shape(c, shape, x->rank);
}

static mc_status infer_update(const infer *c);

/* gather(x, idx, axis): x.shape[:axis] + idx.shape + x.shape[axis+1:], idx i32. */
static mc_status infer_gather(const infer *c)
{
    mc_node *n = c->n;
    if (n->op == MC_OP_UPDATE)
        return infer_update(c);
    const mc_node *x = operand(c, 0), *idx = operand(c, 1);
    mc_status st;
    if ((st = check_dtype(c, x->dtype)))
        return st;
    if (idx->dtype != MC_I32)
        return fail(c, "idx must be i32, not %s (use cast)", mc_dtype_name(idx->dtype));
    if ((st = norm_axis(c, &n->attr.axis, x->rank, "axis")))
        return st;
    if (x->shape[n->attr.axis] > INT32_MAX)
        return fail(c, "axis %lld has %lld entries: more than i32 indices reach", (long long)n->attr.axis,
                    (long long)x->shape[n->attr.axis]);
    int rank = x->rank - 1 + idx->rank;
    if (rank > MC_MAX_RANK)
        return fail(c, "the result would have %d axes (x %s, idx %s); at most %d allowed", rank, SHAPE(x),
                    SHAPE(idx), MC_MAX_RANK);
    n->dtype = x->dtype;
    int64_t shape[MC_MAX_RANK];
    int r = 0, axis = (int)n->attr.axis;
    for (int d = 0; d < axis; d++)
        shape[r++] = x->shape[d];
    for (int d = 0; d < idx->rank; d++)
        shape[r++] = idx->shape[d];
    for (int d = axis + 1; d < x->rank; d++)
        shape[r++] = x->shape[d];
    return set_shape(c, shape, r);
}

/* update(cache, new, pos, axis): cache's type; new has cache's dtype and rank, cache's sizes
 * except along axis, where it has at most as many; pos is an i32 scalar. A pos known here (a
 * number) is checked here; one given at run time is checked by the run (docs/FORMAT.md §2). */
static mc_status infer_update(const infer *c)
{
    mc_node *n = c->n;
    const mc_node *cache = operand(c, 0), *nw = operand(c, 1), *pos = operand(c, 2);
    mc_status st;
    if ((st = check_dtype(c, cache->dtype)))
        return st;
    if (nw->dtype != cache->dtype)
        return fail(c, "new is %s but cache is %s (use cast)", mc_dtype_name(nw->dtype), mc_dtype_name(cache->dtype));
    if (pos->dtype != MC_I32 || pos->rank != 0)
        return fail(c, "pos must be an i32 scalar (i32[]), not %s%s", mc_dtype_name(pos->dtype), SHAPE(pos));
    if ((st = norm_axis(c, &n->attr.axis, cache->rank, "axis")))
        return st;
    int axis = (int)n->attr.axis;
    if (nw->rank != cache->rank)
        return fail(c, "new %s has rank %d but cache %s has rank %d", SHAPE(nw), nw->rank, SHAPE(cache), cache->rank);
    for (int d = 0; d < cache->rank; d++)
        if (d != axis && nw->shape[d] != cache->shape[d])
            return fail(c, "new %s and cache %s differ on axis %d (only axis %d may differ)", SHAPE(nw),
                        SHAPE(cache), d, axis);
    int64_t len = nw->shape[axis], size = cache->shape[axis];
    if (mc_dim_is_sym(len) || mc_dim_is_sym(size)) {
        /* checked for each binding, when the graph specialised to it is inferred again */
    } else if (len > size) {
        return fail(c, "new %s has %lld entries along axis %d, more than cache %s holds (%lld)", SHAPE(nw),
                    (long long)len, axis, SHAPE(cache), (long long)size);
    } else if (size > INT32_MAX) {
        return fail(c, "axis %d has %lld entries: more than an i32 pos reaches", axis, (long long)size);
    }
    if (pos->op == MC_OP_CONST && !mc_dim_is_sym(len) && !mc_dim_is_sym(size)) {
        double p = pos->attr.value;
        if (p < 0 || p > (double)(size - len))
            return fail(c, "pos %lld is outside [0, %lld]: %lld entr%s from pos would not fit axis %d of %lld",
                        (long long)p, (long long)(size - len), (long long)len, len == 1 ? "y" : "ies", axis,
                        (long long)size);
    }
    n->dtype = cache->dtype;
    return set_shape(c, cache->shape, cache->rank);
}

/* allreduce(x): x's dtype (a float) and shape; the sum over ranks changes neither. */
static mc_status infer_collective(const infer *c)
{
    mc_node *n = c->n;
    const mc_node *x = operand(c, 0);
    mc_status st;
    if ((st = check_dtype(c, x->dtype)))
        return st;
    n->dtype = x->dtype;
    return set_shape(c, x->shape, x->rank);
}

static mc_status infer_create(const infer *c)
{
    mc_node *n = c->n;
    mc_attrs *at = &n->attr;
    mc_status st;
    if (!dtype_valid(at->dtype))
        return fail(c, "invalid dtype %d", (int)at->dtype);
    if ((st = check_dtype(c, at->dtype)) || (st = check_list(c, "shape")))
        return st;
    n->dtype = at->dtype;
    if ((st = set_shape(c, at->list, at->nlist)))
        return st;
    if (n->op == MC_OP_FULL)
        return check_value(c, at->value, at->dtype);
    if ((st = norm_axis(c, &at->axis, n->rank, "axis")))
        return st;
    if (at->dtype == MC_I32 && n->shape[at->axis] - 1 > 2147483647)
        return fail(c, "axis %lld has %lld entries: its count does not fit i32",
                    (long long)at->axis, (long long)n->shape[at->axis]);
    return MC_OK;
}

mc_status mc_node_infer(const mc_graph *g, mc_node *n)
{
    MC_ASSERT((unsigned)n->op < MC_NUM_OPS);
    const mc_op_info *info = &mc_op_table[n->op];
    infer c = {g, n, info->name};
    char label[300];
    if ((n->op == MC_OP_INPUT || n->op == MC_OP_PARAM) && n->name) {
        snprintf(label, sizeof label, "%s %s", info->name, n->name);
        c.op = label; /* a declaration is known by its name */
    }
    if (n->nin < info->min_in || (info->max_in >= 0 && n->nin > info->max_in)) {
        if (info->max_in < 0)
            return fail(&c, "expected at least %d operand%s, got %d", info->min_in,
                        info->min_in == 1 ? "" : "s", n->nin);
        if (info->min_in == info->max_in)
            return fail(&c, "expected %d operand%s, got %d", info->min_in,
                        info->min_in == 1 ? "" : "s", n->nin);
        return fail(&c, "expected %d to %d operands, got %d", info->min_in, info->max_in, n->nin);
    }
    switch (info->kind) {
    case MC_KIND_LEAF: return infer_leaf(&c);
    case MC_KIND_UNARY:
    case MC_KIND_BINARY:
    case MC_KIND_COMPARE:
    case MC_KIND_SELECT:
    case MC_KIND_CAST: return infer_elementwise(&c);
    case MC_KIND_REDUCE: return infer_reduce(&c);
    case MC_KIND_NORM: return infer_norm(&c);
    case MC_KIND_MATMUL: return infer_matmul(&c);
    case MC_KIND_SHAPE: return infer_shape_op(&c);
    case MC_KIND_CREATE: return infer_create(&c);
    case MC_KIND_SPATIAL: return infer_spatial(&c);
    case MC_KIND_GATHER: return infer_gather(&c);
    case MC_KIND_COLLECTIVE: return infer_collective(&c);
    }
    MC_UNREACHABLE("unknown operator kind");
}
