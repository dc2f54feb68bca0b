/* Decomposition: composites into primitives, so fusion sees one vocabulary.
 *
 * Requires: a verified graph. Changes: every softmax, log_softmax, layernorm, rmsnorm, linear
 * and mean becomes the primitives people write on paper:
 *
 *   softmax(x)      e = exp(x - max(x)); e / sum(e)                 (max and sum keepdim)
 *   log_softmax(x)  d = x - max(x); d - log(sum(exp(d)))
 *   layernorm(x)    c = x r - mean(x r); c * rsqrt(max(sum(c*c)/n + eps r r, g)) * w + b
 *   rmsnorm(x)      x * rsqrt(sum(x*x)/n + eps) * w, from sum((x 2^-80)^2) where sum(x*x)
 *                   overflows                                                   (last axis)
 *   linear(x, w, b) matmul(x, transpose(w)) + b
 *   mean(x)         sum(x) * (1/n)
 *   update(c, n, p) where(p <= i < p + len, gather(n, clip(i - p, 0, len - 1)), c) along the axis
 *
 * (and the other composites of ops.def: argmax, pad, the pools, conv, batchnorm, below)
 *
 * cumsum stays one node: fusion and lowering make it a scan (kir/kir.h), a running sum that
 * walks each row once, O(n) for a row of n, accumulated in double for floats (i32 wrapping) and
 * rounded once when stored. (Its first version, the sum over j of where(j <= i, x_j, 0), O(n^2), is still here
 * behind MINIC_QUADRATIC_CUMSUM=1.)
 *
 * The norms scale, as robust norms do (LAPACK's nrm2 scales by the largest element), so that a
 * row of 1e30 (or of +-3e38), whose squares overflow f32, gives O(1) results as in float64 and
 * not zeros or NaN. layernorm scales the row by r, a power of two chosen from its magnitude
 * (sum |x|, a bound on the largest element m: m <= sum <= n m): 1 for every sum up to 2^40, so
 * every other row computes what it did without the scaling (x * 1 and eps * 1 * 1 are exact). With eps = 0, rows below 2^-40 are scaled up
 * instead (with eps > 0 the squares of such a row are negligible beside eps, and rounding them
 * away changes nothing). g, the smallest of eps and FLT_MIN, keeps a constant scaled row
 * (sum(c*c) = 0, eps r r rounded to 0) at 0 * rsqrt(g) = 0 as in float64, where it would be
 * 0 * inf; without eps there is no g. rmsnorm scales its sum of squares instead (below). The
 * sums these need are taken in the pass over the row that was there already: the kernels keep
 * their three passes (layernorm) and two (rmsnorm).
 *
 * Composites on f16 and bf16 compute in f32 between a cast of x (and w, b) and a cast of the
 * result back: their sums and squares are intermediates that the storage type could not hold
 * (a row's sum of squares passes 65504 long before the row does), and a value of a half type
 * is kept within that type's range everywhere (docs/FORMAT.md §2, the backends' saturation).
 *
 * Every new node keeps the composite's line and origin, and the last one its name, so kernels
 * are still named and attributed after the user's operators. Fusion puts each normalization
 * back together as one kernel (a reduction with its prologue and epilogue).
 */
#include "passes/passes.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mc_rewrite *rw;
    const mc_node *n; /* the composite */
    bool conv_gather; /* mc_compile_options.conv_gather */
    bool conv_implicit; /* mc_compile_options.conv_implicit */
    int conv_kchunk;    /* mc_compile_options.conv_kchunk */
    bool conv_clast;    /* mc_compile_options.conv_clast */
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

/* The dtype a composite computes in: f32 for every float dtype (f16 and bf16 are storage). */
static mc_dtype compute_dtype(mc_dtype d) { return d == MC_F16 || d == MC_BF16 ? MC_F32 : d; }

/* v in the compute dtype: a cast where the value's dtype differs. */
static mc_value widen(ctx *c, mc_value v)
{
    const mc_node *n = &c->rw->dst->nodes[v];
    if (compute_dtype(n->dtype) == n->dtype)
        return v;
    mc_attrs a;
    memset(&a, 0, sizeof a);
    a.dtype = compute_dtype(n->dtype);
    return mc_rewrite_node(c->rw, c->n, MC_OP_CAST, &v, 1, &a);
}

/* v back in the composite's own dtype. */
static mc_value narrow(ctx *c, mc_value v)
{
    if (v < 0 || c->rw->dst->nodes[v].dtype == c->n->dtype)
        return v;
    mc_attrs a;
    memset(&a, 0, sizeof a);
    a.dtype = c->n->dtype;
    return mc_rewrite_node(c->rw, c->n, MC_OP_CAST, &v, 1, &a);
}

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
    x = widen(c, x);
    int64_t axis = c->n->attr.axis;
    mc_value m = reduce(c, MC_OP_MAX, x, &axis, 1, true);
    mc_value d = op2(c, MC_OP_SUB, x, m);
    mc_value e = op1(c, MC_OP_EXP, d);
    mc_value s = reduce(c, MC_OP_SUM, e, &axis, 1, true);
    if (log_form)
        return narrow(c, op2(c, MC_OP_SUB, d, op1(c, MC_OP_LOG, s)));
    return narrow(c, op2(c, MC_OP_DIV, e, s));
}

static mc_value over(ctx *c, double value, int64_t n, mc_dtype d);

/* sum(v)/n over the last axis, keepdim. */
static mc_value row_mean(ctx *c, mc_value v, const mc_node *x)
{
    int64_t axis = x->rank - 1;
    mc_value s = reduce(c, MC_OP_SUM, v, &axis, 1, true);
    return op2(c, MC_OP_MUL, s, over(c, 1.0, x->shape[axis], compute_dtype(x->dtype)));
}

static mc_value f32(ctx *c, double v) { return constant(c, v, MC_F32); }

/* a - b + e as an i32 value, a and b dims (or plain numbers; b may be 0): a number where both
 * are sizes (as these constants always were), else the sum of the symbolic dims read when the
 * kernels run (KI_SIZE `times`: +-n exactly) and the rest, so one program serves every
 * binding (update's and argmax's lengths along a symbolic axis). */
static mc_value dim_i32(ctx *c, int64_t a, int64_t b, int64_t e)
{
    if (!mc_dim_is_sym(a) && !mc_dim_is_sym(b))
        return constant(c, (double)(a - b + e), MC_I32);
    mc_value v = MC_NONE;
    if (mc_dim_is_sym(a))
        v = mc_rewrite_const_times(c->rw, c->n, 1.0, a, MC_I32);
    else
        e += a;
    if (mc_dim_is_sym(b)) {
        mc_value nb = mc_rewrite_const_times(c->rw, c->n, -1.0, b, MC_I32);
        v = v == MC_NONE ? nb : op2(c, MC_OP_ADD, v, nb);
    } else {
        e -= b;
    }
    return e ? op2(c, MC_OP_ADD, v, constant(c, (double)e, MC_I32)) : v;
}

/* value / n in dtype d: a number where n is a size, else a constant the kernels compute from
 * n's value when they run (KI_SIZE), so that one compiled program serves every binding. */
static mc_value over(ctx *c, double value, int64_t n, mc_dtype d)
{
    if (!mc_dim_is_sym(n))
        return constant(c, value / (double)n, d);
    return mc_rewrite_const_per(c->rw, c->n, value, n, d);
}
static mc_value mul(ctx *c, mc_value a, mc_value b) { return op2(c, MC_OP_MUL, a, b); }

static mc_value where(ctx *c, mc_value cond, mc_value a, mc_value b)
{
    mc_value in[3] = {cond, a, b};
    return mc_rewrite_node(c->rw, c->n, MC_OP_WHERE, in, 3, NULL);
}

/* The power of two r a row is scaled by, from a = sum(|x|) k, k = 2^-k (T = a / k bounds the
 * row's largest magnitude m: m <= T <= n m): 2^-50, 2^-80 or 2^-110 past T = 2^40, 2^70 or
 * 2^100, so that the scaled row's largest element is at most 2^20 (n squares of it fit f32
 * for any n below 2^31) and above 2^-10 / n (the smallest nonzero difference in the row still
 * squares to a normal number); with scale_up (eps = 0) 2^60 or 2^100 below 2^-40 or 2^-80;
 * else 1. NaN compares false: r = 1, and the NaN goes on. */
static mc_value row_scale(ctx *c, mc_value a, double k, bool scale_up)
{
    static const double down[3][2] = {{0x1p40, 0x1p-50}, {0x1p70, 0x1p-80}, {0x1p100, 0x1p-110}};
    static const double up[2][2] = {{0x1p-40, 0x1p60}, {0x1p-80, 0x1p100}};
    mc_value r = f32(c, 1.0);
    for (int i = 0; i < 3; i++)
        r = where(c, op2(c, MC_OP_GT, a, f32(c, down[i][0] * k)), f32(c, down[i][1]), r);
    for (int i = 0; scale_up && i < 2; i++)
        r = where(c, op2(c, MC_OP_LT, a, f32(c, up[i][0] * k)), f32(c, up[i][1]), r);
    return r;
}

/* 2^-k for the smallest k with 2^k >= n: n values times it sum to at most FLT_MAX, and values
 * above 2^-126 n are scaled exactly (so the sum is 2^-k times the plain sum, rounding and all). */
static double sum_scale(int64_t n)
{
    double c = 1;
    while (c * (double)n > 1)
        c *= 0.5;
    return c;
}

/* layernorm: the row scaled by r (the file's comment says why). Its first pass finds the max
 * and the row's sum times 2^-k (which cannot overflow, and is exact for every value above
 * 2^-126 n), so the mean costs no pass of its own; with eps = 0 it also sums x 2^64 for the
 * rows of tiny values that are scaled up. */
static mc_value layernorm(ctx *c, const mc_value *in)
{
    const mc_node *x = &c->rw->src->nodes[c->n->in[0]];
    double eps = c->n->attr.value;
    int64_t axis = x->rank - 1, n = x->shape[axis];
    /* a symbolic n takes 2^-31, the scale for every n up to 2^31, so that one program serves
     * every length; the mean's 2^31 / n is a KI_SIZE, 2^31 times the f32 1/n, so rows that
     * are not scaled still take the plain sum times 1/n, bit for bit, where x 2^-31 is normal
     * (|x| >= 2^-95; below, it rounds by at most 2^-119 in x's units) */
    double k = mc_dim_is_sym(n) ? 0x1p-31 : sum_scale(n);
    mc_value xf = widen(c, in[0]);
    mc_value xk = mul(c, xf, f32(c, k));
    /* the scale from sum(|x|) 2^-k, a bound on the max (m <= sum <= n m) that costs an add where
     * a NaN-keeping max costs four instructions in the pass that streams the row in */
    mc_value a = reduce(c, MC_OP_SUM, op1(c, MC_OP_ABS, xk), &axis, 1, true);
    mc_value r = row_scale(c, a, k, eps == 0);
    /* mean(x) r = sum(x 2^-k) (2^k / n) r: for rows that are not scaled, the plain sum times
     * 1/n, bit for bit */
    mc_value s = reduce(c, MC_OP_SUM, xk, &axis, 1, true);
    mc_value mean = mul(c, mul(c, s, mc_dim_is_sym(n) ? over(c, 1 / k, n, MC_F32) : f32(c, 1 / (k * (double)n))), r);
    if (eps == 0) {
        mc_value s_up = reduce(c, MC_OP_SUM, mul(c, xf, f32(c, 0x1p64)), &axis, 1, true);
        mc_value up = mul(c, mul(c, s_up, mul(c, f32(c, 0x1p-64), r)), over(c, 1.0, n, MC_F32));
        mean = where(c, op2(c, MC_OP_LT, a, f32(c, 0x1p-40 * k)), up, mean);
    }
    mc_value v = op2(c, MC_OP_SUB, mul(c, xf, r), mean);
    mc_value var = row_mean(c, mul(c, v, v), x);
    mc_value t = op2(c, MC_OP_ADD, var, mul(c, mul(c, f32(c, eps), r), r));
    if (eps > 0)
        t = op2(c, MC_OP_MAXIMUM, t, f32(c, eps < FLT_MIN ? eps : FLT_MIN));
    mc_value y = mul(c, mul(c, v, op1(c, MC_OP_RSQRT, t)), widen(c, in[1]));
    return narrow(c, op2(c, MC_OP_ADD, y, widen(c, in[2])));
}

/* rmsnorm needs no max: it scales the output, not the row. The pass over the row sums x^2 as
 * it is and (x 2^-80)^2, which cannot overflow; a row whose plain sum overflowed takes
 * rsqrt(mean((x 2^-80)^2)) 2^-80, every other row rsqrt(mean(x^2) + eps) bit for bit as before.
 * With eps = 0, rows whose squares underflow are scaled up by 2^64 or 2^100 (x too: 1/rms of a
 * row of subnormals is past FLT_MAX). */
static mc_value rmsnorm(ctx *c, const mc_value *in)
{
    const mc_node *x = &c->rw->src->nodes[c->n->in[0]];
    double eps = c->n->attr.value;
    int64_t axis = x->rank - 1;
    mc_value xf = widen(c, in[0]);
    mc_value q = reduce(c, MC_OP_SUM, mul(c, xf, xf), &axis, 1, true);
    mc_value inv_n = over(c, 1.0, x->shape[axis], MC_F32);
    mc_value rs = op1(c, MC_OP_RSQRT, op2(c, MC_OP_ADD, mul(c, q, inv_n), f32(c, eps)));
    /* (x 2^-80)^2 where the plain sum overflows; with eps = 0, (x 2^64)^2 where it falls below
     * 2^-60 and (x 2^100)^2 where that one does too (a row of subnormals) */
    double scales[3] = {0x1p-80, 0x1p64, 0x1p100};
    mc_value qs[3], a = MC_NONE; /* with eps = 0: the factor x is scaled up by (1, 2^64, 2^100) */
    for (int i = 0; i < (eps == 0 ? 3 : 1); i++) {
        mc_value xs = mul(c, xf, f32(c, scales[i]));
        qs[i] = reduce(c, MC_OP_SUM, mul(c, xs, xs), &axis, 1, true);
        mc_value scaled = op1(c, MC_OP_RSQRT, op2(c, MC_OP_ADD, mul(c, qs[i], inv_n), f32(c, eps * scales[i] * scales[i])));
        if (i == 0) { /* rsqrt of the scaled mean, scaled back: 1/rms is representable */
            rs = where(c, op2(c, MC_OP_GT, q, f32(c, FLT_MAX)), mul(c, scaled, f32(c, scales[0])), rs);
            continue;
        }
        /* 1/rms of a row of subnormals is not: the row is scaled up instead */
        mc_value cond = op2(c, MC_OP_LT, i == 1 ? q : qs[1], f32(c, 0x1p-60));
        rs = where(c, cond, scaled, rs);
        a = where(c, cond, f32(c, scales[i]), a == MC_NONE ? f32(c, 1.0) : a);
    }
    if (a != MC_NONE)
        xf = mul(c, xf, a);
    return narrow(c, mul(c, mul(c, xf, rs), widen(c, in[1])));
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
    x = widen(c, x);
    mc_value s = mc_rewrite_node(c->rw, c->n, MC_OP_SUM, &x, 1, &a);
    int64_t count = 1; /* the product of the reduced dims (a dim: symbolic ones are expressions) */
    for (int d = 0; d < xn->rank; d++) {
        bool reduced = !a.has_list;
        for (int j = 0; j < a.nlist && !reduced; j++)
            reduced = a.list[j] == d;
        if (reduced && !mc_dim_mul(c->rw->dst, count, xn->shape[d], &count))
            return mc_fail(MC_ERR_INPUT, "mean: the count of its reduced elements overflows"), MC_ERROR;
    }
    return narrow(c, op2(c, MC_OP_MUL, s, over(c, 1.0, count, compute_dtype(c->n->dtype))));
}

/* where(x < 0, x * alpha, x): NaN and -0 stay themselves. f16/bf16 compute in f32. */
static mc_value leaky_relu(ctx *c, mc_value x)
{
    mc_dtype d = compute_dtype(c->n->dtype);
    x = widen(c, x);
    mc_value neg = op2(c, MC_OP_LT, x, constant(c, 0.0, d));
    return narrow(c, where(c, neg, mul(c, x, constant(c, c->n->attr.alpha, d)), x));
}

/* minimum(maximum(x, min), max): NaN propagates; min > max gives max, as NumPy and PyTorch. */
static mc_value clip(ctx *c, mc_value x)
{
    mc_dtype d = compute_dtype(c->n->dtype);
    const mc_attrs *at = &c->n->attr;
    x = widen(c, x);
    if (at->has_lo)
        x = op2(c, MC_OP_MAXIMUM, x, constant(c, at->lo, d));
    if (at->has_hi)
        x = op2(c, MC_OP_MINIMUM, x, constant(c, at->hi, d));
    return narrow(c, x);
}

static mc_value iota(ctx *c, const int64_t *shape, int rank, int64_t axis)
{
    mc_attrs a;
    memset(&a, 0, sizeof a);
    a.has_list = true;
    a.nlist = rank;
    memcpy(a.list, shape, sizeof(int64_t) * (size_t)rank);
    a.axis = axis;
    a.dtype = MC_I32;
    return mc_rewrite_node(c->rw, c->n, MC_OP_IOTA, NULL, 0, &a);
}

static mc_value shape_op(ctx *c, mc_op op, mc_value x, const int64_t *list, int n)
{
    mc_attrs a;
    memset(&a, 0, sizeof a);
    a.has_list = true;
    a.nlist = n;
    memcpy(a.list, list, sizeof(int64_t) * (size_t)n);
    return mc_rewrite_node(c->rw, c->n, op, &x, 1, &a);
}

/* argmax (argmin): m = max(x) along the axis; the positions hit are those equal to m, or, in a
 * row holding a NaN (m is NaN), the NaNs; the result is the least hit position, as an i32 min of
 * where(hit, index, n). */
static mc_value argextreme(ctx *c, mc_value x)
{
    const mc_node *xn = &c->rw->src->nodes[c->n->in[0]];
    int64_t axis = c->n->attr.list[0], n = xn->shape[axis];
    bool is_max = c->n->op == MC_OP_ARGMAX;
    x = widen(c, x);
    mc_value m = reduce(c, is_max ? MC_OP_MAX : MC_OP_MIN, x, &axis, 1, true);
    mc_value hit = op2(c, MC_OP_EQ, x, m);
    if (mc_dtype_is_float(xn->dtype))
        hit = where(c, op2(c, MC_OP_NE, m, m), op2(c, MC_OP_NE, x, x), hit);
    mc_value pos = where(c, hit, iota(c, xn->shape, xn->rank, axis), dim_i32(c, n, 0, 0));
    return reduce(c, MC_OP_MIN, pos, &axis, 1, c->n->attr.keepdim);
}

/* cumsum's first version, kept reachable (MINIC_QUADRATIC_CUMSUM=1 in the environment, for
 * comparing and as a fallback should a backend's scan misbehave): the axis moved last, x
 * broadcast to [.., n (i), n (j)], and sum over j of where(j <= i, x_j, 0). O(n^2) work. */
static mc_value cumsum_quadratic(ctx *c, mc_value x)
{
    const mc_node *xn = &c->rw->src->nodes[c->n->in[0]];
    int r = xn->rank;
    int64_t axis = c->n->attr.axis, n = xn->shape[axis], perm[MC_MAX_RANK], inv[MC_MAX_RANK];
    int64_t shape[MC_MAX_RANK], k = 0;
    for (int d = 0; d < r; d++)
        if (d != axis)
            perm[k++] = d;
    perm[r - 1] = axis;
    for (int d = 0; d < r; d++) {
        inv[perm[d]] = d;
        shape[d] = xn->shape[perm[d]];
    }
    x = widen(c, x);
    mc_dtype d = compute_dtype(xn->dtype);
    if (axis != r - 1)
        x = shape_op(c, MC_OP_TRANSPOSE, x, perm, r);
    shape[r] = n;
    shape[r - 1] = 1;
    mc_value row = shape_op(c, MC_OP_RESHAPE, x, shape, r + 1);
    shape[r - 1] = n;
    mc_value all = shape_op(c, MC_OP_EXPAND, row, shape, r + 1);
    int64_t sq[2] = {n, n};
    mc_value keep = op2(c, MC_OP_GE, iota(c, sq, 2, 0), iota(c, sq, 2, 1));
    int64_t last = r;
    mc_value s = reduce(c, MC_OP_SUM, where(c, keep, all, constant(c, 0.0, d)), &last, 1, false);
    if (axis != r - 1)
        s = shape_op(c, MC_OP_TRANSPOSE, s, inv, r);
    return narrow(c, s);
}

/* update(cache, new, pos, axis): with n the cache's axis length and len new's, over i in [0, n)
 *
 *   r      = i - pos                                   (iota along the axis, [n])
 *   idx    = where(ok, minimum(maximum(r, 0), len - 1), bad)
 *   result = where(0 <= r < len, gather(new, idx, axis), cache)
 *
 * ok = (0 <= pos <= n - len) is a scalar; bad, the index of every position when pos is out of
 * range, is pos + len (>= len) past the end or pos - len (< -len) before the start, saturated at
 * i32's limits: always outside gather's [-len, len), so the run fails with the gather's check,
 * whose kir_check names update as its origin and decodes pos from that index (kir/kir.c). One
 * fused kernel: the gather of new and the select of the cache, no backend code of its own. */
/* pos clamped into [0, len) (an index that is always safe to read), and *inside: pos was
 * already in it (where the read counts). Both i32. */
static mc_value clamp_inside(ctx *c, mc_value pos, int64_t len, mc_value *inside)
{
    mc_value zero = constant(c, 0.0, MC_I32);
    *inside = op2(c, MC_OP_AND, op2(c, MC_OP_GE, pos, zero), op2(c, MC_OP_LT, pos, dim_i32(c, len, 0, 0)));
    return op2(c, MC_OP_MINIMUM, op2(c, MC_OP_MAXIMUM, pos, zero), dim_i32(c, len, 0, -1));
}

static mc_value update(ctx *c, const mc_value *in)
{
    const mc_node *cn = &c->rw->src->nodes[c->n->in[0]], *nn = &c->rw->src->nodes[c->n->in[1]];
    int r = cn->rank, axis = (int)c->n->attr.axis;
    int64_t n = cn->shape[axis], len = nn->shape[axis];
    mc_value pos = in[2];
    mc_value i = iota(c, &n, 1, 0);
    mc_value rel = op2(c, MC_OP_SUB, i, pos);
    mc_value zero = constant(c, 0.0, MC_I32);
    mc_value ok = op2(c, MC_OP_AND, op2(c, MC_OP_GE, pos, zero), op2(c, MC_OP_LE, pos, dim_i32(c, n, len, 0)));
    mc_value past = op2(c, MC_OP_ADD, op2(c, MC_OP_MINIMUM, pos, dim_i32(c, INT32_MAX, len, 0)), dim_i32(c, len, 0, 0));
    mc_value before = op2(c, MC_OP_SUB, op2(c, MC_OP_MAXIMUM, pos, dim_i32(c, len, 0, INT32_MIN)), dim_i32(c, len, 0, 0));
    mc_value bad = where(c, op2(c, MC_OP_LT, pos, zero), before, past);
    mc_value inside;
    mc_value idx = where(c, ok, clamp_inside(c, rel, len, &inside), bad);
    mc_attrs ga;
    memset(&ga, 0, sizeof ga);
    ga.axis = axis;
    mc_value gin[2] = {in[1], idx};
    mc_value g = mc_rewrite_node(c->rw, c->n, MC_OP_GATHER, gin, 2, &ga);
    int64_t shape[MC_MAX_RANK];
    for (int d = 0; d < r; d++)
        shape[d] = d == axis ? n : 1;
    if (r > 1)
        inside = shape_op(c, MC_OP_RESHAPE, inside, shape, r);
    return where(c, inside, g, in[0]);
}

/* x padded by before[d] and after[d] elements of `value` along each axis: a concat with `full`
 * blocks per padded axis (copies: a first version). The result is a new node even without
 * padding (a same-shape reshape, which simplify removes), so that the composite's name never
 * lands on its operand. */
static mc_value pad_with(ctx *c, mc_value x, const int64_t *before, const int64_t *after, double value)
{
    const mc_node *xn = &c->rw->dst->nodes[x];
    int r = xn->rank;
    int64_t shape[MC_MAX_RANK];
    memcpy(shape, xn->shape, sizeof(int64_t) * (size_t)r);
    mc_dtype d = xn->dtype;
    bool any = false;
    for (int a = 0; a < r; a++) {
        if (before[a] == 0 && after[a] == 0)
            continue;
        mc_value parts[3];
        int np = 0;
        for (int side = 0; side < 3; side++) { /* before, x, after */
            int64_t k = side == 0 ? before[a] : after[a];
            if (side == 1) {
                parts[np++] = x;
                continue;
            }
            if (k == 0)
                continue;
            mc_attrs f;
            memset(&f, 0, sizeof f);
            memcpy(f.list, shape, sizeof(int64_t) * (size_t)r);
            f.list[a] = k;
            f.nlist = r;
            f.has_list = true;
            f.value = value;
            f.dtype = d;
            parts[np++] = mc_rewrite_node(c->rw, c->n, MC_OP_FULL, NULL, 0, &f);
        }
        mc_attrs ca;
        memset(&ca, 0, sizeof ca);
        ca.axis = a;
        x = mc_rewrite_node(c->rw, c->n, MC_OP_CONCAT, parts, np, &ca);
        if (x < 0)
            return x;
        bool sized = mc_dim_add_const(c->rw->dst, shape[a], before[a] + after[a], &shape[a]);
        MC_ASSERT(sized); /* inference made the padded size already (ir/infer.c) */
        any = true;
    }
    return any ? x : shape_op(c, MC_OP_RESHAPE, x, shape, r);
}

static mc_value pad(ctx *c, mc_value x)
{
    const mc_attrs *at = &c->n->attr;
    int r = c->n->rank;
    return pad_with(c, x, at->pads, at->pads + r, at->value);
}

/* The view of x (padded, [N, C, *S]) that a window position (u[, v]) reads for every output
 * position: strided slices of the spatial axes. */
static mc_value window_view(ctx *c, mc_value xp, int sr, const int64_t *pos, const int64_t *step, const int64_t *out)
{
    for (int i = 0; i < sr; i++) {
        mc_attrs s;
        memset(&s, 0, sizeof s);
        s.axis = 2 + i;
        s.start = pos[i];
        s.end = pos[i] + (out[i] - 1) * step[i] + 1;
        s.step = step[i];
        xp = mc_rewrite_node(c->rw, c->n, MC_OP_SLICE, &xp, 1, &s);
    }
    return xp;
}

/* A padded pool without the padded copy (mc_compile_options.conv_gather): for each window
 * position (u, v), x's element at o s - p + (u, v) per spatial axis, gathered along x's
 * flattened spatial axis (clamped into x) and replaced by `fill` where an axis fell outside;
 * the positions combined with `combine`. The indices are computed from one iota over the
 * flattened output positions O (o0 = o / O1, o1 = o - o0 O1), so every step is pointwise over
 * [N, C, O] (the index work broadcast, never reshaped) and fusion makes the pool one kernel
 * that reads x and writes y. The copies made 4-5 passes over the stem's 112x112 activations in
 * ResNet; window_gather's [K, O] grid would be a reduction over K = 9, a poor shape for one. */
static mc_value pool_gathered(ctx *c, mc_value x, const mc_node *xn, int sr, const int64_t *out, mc_op combine,
                              double fill)
{
    const mc_attrs *at = &c->n->attr;
    int64_t N = xn->shape[0], C = xn->shape[1], P = 1, O = 1, ks[2] = {at->kernel[0], sr > 1 ? at->kernel[1] : 1};
    for (int i = 0; i < sr; i++) {
        P *= xn->shape[2 + i];
        O *= out[i];
    }
    int64_t flat[3] = {N, C, P};
    mc_dtype d = c->rw->dst->nodes[x].dtype;
    x = shape_op(c, MC_OP_RESHAPE, x, flat, 3);
    mc_value o = iota(c, &O, 1, 0), coord[2] = {o, MC_NONE}, base[2];
    if (sr > 1) {
        mc_value w = constant(c, (double)out[1], MC_I32);
        coord[0] = op2(c, MC_OP_DIV, o, w);
        coord[1] = op2(c, MC_OP_SUB, o, op2(c, MC_OP_MUL, coord[0], w));
    }
    for (int i = 0; i < sr; i++) /* o s - p */
        base[i] = op2(c, MC_OP_SUB, op2(c, MC_OP_MUL, coord[i], constant(c, (double)at->stride[i], MC_I32)),
                      constant(c, (double)at->padding[i], MC_I32));
    mc_value acc = MC_NONE;
    for (int64_t u = 0; u < ks[0]; u++)
        for (int64_t v = 0; v < ks[1]; v++) {
            mc_value idx = MC_NONE, inside = MC_NONE;
            for (int i = 0; i < sr; i++) {
                int64_t off = i == 0 ? u : v, L = xn->shape[2 + i];
                mc_value pos = off ? op2(c, MC_OP_ADD, base[i], constant(c, (double)off, MC_I32)) : base[i];
                mc_value in;
                pos = clamp_inside(c, pos, L, &in);
                inside = inside == MC_NONE ? in : op2(c, MC_OP_AND, inside, in);
                idx = idx == MC_NONE ? pos : op2(c, MC_OP_ADD, op2(c, MC_OP_MUL, idx, constant(c, (double)L, MC_I32)), pos);
            }
            mc_attrs ga;
            memset(&ga, 0, sizeof ga);
            ga.axis = 2;
            mc_value gin[2] = {x, idx};
            mc_value t = mc_rewrite_node(c->rw, c->n, MC_OP_GATHER, gin, 2, &ga); /* [N, C, O] */
            t = where(c, inside, t, constant(c, fill, d));
            acc = acc == MC_NONE ? t : op2(c, combine, acc, t);
        }
    int64_t ys[4] = {N, C, out[0], sr > 1 ? out[1] : 0};
    return shape_op(c, MC_OP_RESHAPE, acc, ys, 2 + sr);
}

/* maxpool: the maximum of the kernel's strided views of x padded with -inf; avgpool: their sum
 * (x padded with 0) divided by how many of the window's elements lie inside x, computed from
 * indices: (min(o s - p + k, L) - max(o s - p, 0)) per spatial axis. With padding on a backend
 * that prefers gathers to copies (conv_gather), the windows are gathered instead of copied. */
static mc_value pool(ctx *c, mc_value x)
{
    const mc_attrs *at = &c->n->attr;
    const mc_node *xn = &c->rw->src->nodes[c->n->in[0]];
    int sr = xn->rank - 2;
    bool is_max = c->n->op == MC_OP_MAXPOOL;
    int64_t before[MC_MAX_RANK] = {0}, out[2], k0 = at->kernel[0], k1 = sr > 1 ? at->kernel[1] : 1;
    for (int i = 0; i < sr; i++) {
        before[2 + i] = at->padding[i];
        out[i] = c->n->shape[2 + i];
    }
    bool padded = false;
    for (int i = 0; i < sr; i++)
        padded = padded || at->padding[i] > 0;
    mc_value acc = MC_NONE;
    if (padded && c->conv_gather) {
        acc = pool_gathered(c, is_max ? x : widen(c, x), xn, sr, out, is_max ? MC_OP_MAXIMUM : MC_OP_ADD,
                            is_max ? -INFINITY : 0.0);
    } else {
        x = pad_with(c, widen(c, x), before, before, is_max ? -INFINITY : 0.0);
        for (int64_t u = 0; u < k0; u++)
            for (int64_t v = 0; v < k1; v++) {
                int64_t pos[2] = {u, v};
                mc_value t = window_view(c, x, sr, pos, at->stride, out);
                acc = acc == MC_NONE ? t : op2(c, is_max ? MC_OP_MAXIMUM : MC_OP_ADD, acc, t);
            }
    }
    if (!is_max) {
        mc_value count = MC_NONE;
        for (int i = 0; i < sr; i++) {
            mc_value o = iota(c, out, sr, i); /* [O0] or [O0, O1], broadcast over N and C */
            mc_value lo = op2(c, MC_OP_SUB, op2(c, MC_OP_MUL, o, constant(c, (double)at->stride[i], MC_I32)),
                              constant(c, (double)at->padding[i], MC_I32));
            mc_value hi = op2(c, MC_OP_MINIMUM, op2(c, MC_OP_ADD, lo, constant(c, (double)at->kernel[i], MC_I32)),
                              constant(c, (double)xn->shape[2 + i], MC_I32));
            mc_value ci = op2(c, MC_OP_SUB, hi, op2(c, MC_OP_MAXIMUM, lo, constant(c, 0.0, MC_I32)));
            count = count == MC_NONE ? ci : op2(c, MC_OP_MUL, count, ci);
        }
        mc_attrs ca;
        memset(&ca, 0, sizeof ca);
        ca.dtype = MC_F32;
        count = mc_rewrite_node(c->rw, c->n, MC_OP_CAST, &count, 1, &ca);
        acc = op2(c, MC_OP_DIV, acc, count);
    }
    return narrow(c, acc);
}

/* The same cols without a gather (a backend where a gather per element costs more than copies:
 * the CPU, mc_compile_options.conv_gather off): x padded with 0 (a copy), then each window
 * position's strided view of it, each [N, C, 1, *O], concatenated along axis 2 (a copy each). */
static mc_value conv_cols_copies(ctx *c, mc_value x, int sr, const int64_t *ks, const int64_t *out)
{
    const mc_attrs *at = &c->n->attr;
    const mc_node *xn = &c->rw->src->nodes[c->n->in[0]];
    int64_t before[MC_MAX_RANK] = {0}, K = ks[0] * ks[1];
    for (int i = 0; i < sr; i++)
        before[2 + i] = at->padding[i];
    x = pad_with(c, x, before, before, 0.0);
    mc_value parts[64], *many = parts;
    if (K > 64 && !(many = malloc((size_t)K * sizeof *many))) {
        mc_fail(MC_ERR_SYSTEM, "out of memory decomposing conv");
        return MC_ERROR;
    }
    for (int64_t u = 0; u < ks[0]; u++)
        for (int64_t v = 0; v < ks[1]; v++) {
            int64_t pos[2] = {u * at->dilation[0], sr > 1 ? v * at->dilation[1] : 0};
            mc_value t = window_view(c, x, sr, pos, at->stride, out);
            int64_t s[MC_MAX_RANK] = {xn->shape[0], xn->shape[1], 1, out[0], sr > 1 ? out[1] : 0};
            many[u * ks[1] + v] = shape_op(c, MC_OP_RESHAPE, t, s, 3 + sr);
        }
    mc_attrs ca;
    memset(&ca, 0, sizeof ca);
    ca.axis = 2;
    mc_value cols = mc_rewrite_node(c->rw, c->n, MC_OP_CONCAT, many, (int)K, &ca);
    if (many != parts)
        free(many);
    return cols;
}

/* conv as im2col and a matmul: cols [N, C, K, O] (K = kh kw in w's order, O the output
 * positions) holds, for window position k and output position o, the element of x that k reads
 * at o, or 0 where that falls in the padding. It is one gather along x's flattened spatial axis
 * at indices computed from iotas over [K0, K1, O0, O1] (i = o s + u d - p per spatial axis,
 * clamped into x; `inside` where no axis was clamped), so fusion makes it one kernel that reads
 * x and writes cols, with no padded copy of x and no copy per window position. A 1x1 conv with
 * stride 1 and no padding reads x itself. cols, seen as [N, G, C/G K, O], times w seen as
 * [G, C_out/G, C/G K] is the result [N, G, C_out/G, O] = [N, C_out, *O], plus b. The matmul runs
 * on each backend's GEMM (the CPU's register-tiled micro-kernel, cuBLASLt), which fuses the bias
 * and a pointwise epilogue. */
static mc_value conv_cols(ctx *c, mc_value x, const mc_node *xn, int sr, const int64_t *ks,
                          const int64_t *out, int64_t *K_out, int64_t *O_out)
{
    const mc_attrs *at = &c->n->attr;
    int64_t N = xn->shape[0], C = xn->shape[1], P = 1, K = 1, O = 1;
    bool direct = true, padded = false;
    for (int i = 0; i < sr; i++) {
        P *= xn->shape[2 + i];
        K *= ks[i];
        O *= out[i];
        direct = direct && ks[i] == 1 && at->stride[i] == 1 && at->padding[i] == 0;
        padded = padded || at->padding[i] > 0;
    }
    *K_out = K;
    *O_out = O;
    if (!c->conv_gather && !direct)
        return conv_cols_copies(c, x, sr, ks, out);
    int64_t flat[3] = {N, C, P};
    x = shape_op(c, MC_OP_RESHAPE, x, flat, 3);
    if (direct) /* [N, C, O]: O = P */
        return x;
    /* the index grid [K0, (K1,) O0, (O1)]: window axes first, then output axes */
    int64_t grid[4];
    for (int i = 0; i < sr; i++) {
        grid[i] = ks[i];
        grid[sr + i] = out[i];
    }
    mc_value idx = MC_NONE, inside = MC_NONE;
    for (int i = 0; i < sr; i++) {
        int64_t L = xn->shape[2 + i];
        mc_value u = iota(c, grid, 2 * sr, i), o = iota(c, grid, 2 * sr, sr + i);
        mc_value pos = op2(c, MC_OP_ADD, op2(c, MC_OP_MUL, o, constant(c, (double)at->stride[i], MC_I32)),
                           op2(c, MC_OP_MUL, u, constant(c, (double)at->dilation[i], MC_I32)));
        if (at->padding[i] > 0)
            pos = op2(c, MC_OP_SUB, pos, constant(c, (double)at->padding[i], MC_I32));
        mc_value in = MC_NONE;
        if (padded) {
            pos = clamp_inside(c, pos, L, &in);
            inside = inside == MC_NONE ? in : op2(c, MC_OP_AND, inside, in);
        }
        idx = idx == MC_NONE ? pos : op2(c, MC_OP_ADD, op2(c, MC_OP_MUL, idx, constant(c, (double)L, MC_I32)), pos);
    }
    int64_t ko[2] = {K, O};
    idx = shape_op(c, MC_OP_RESHAPE, idx, ko, 2);
    mc_attrs ga;
    memset(&ga, 0, sizeof ga);
    ga.axis = 2;
    mc_value gin[2] = {x, idx};
    mc_value cols = mc_rewrite_node(c->rw, c->n, MC_OP_GATHER, gin, 2, &ga); /* [N, C, K, O] */
    if (padded)
        cols = where(c, shape_op(c, MC_OP_RESHAPE, inside, ko, 2), cols,
                     constant(c, 0.0, xn->dtype));
    return cols;
}

/* An implicit GEMM (mc_compile_options.conv_implicit): w seen as [C_out, C kh kw] times the
 * im2col of x, which is never stored: one matmul node whose attributes (kernel, stride,
 * padding, dilation) describe the im2col of its B operand x (ir/infer.c), lowered to a GEMM
 * kernel with kir_gemm.conv that the backend renders as one kernel (the CUDA backend's
 * tensor-core implicit GEMM, backends/cuda/cuda_conv.c). It is the conv that the graph and the
 * kernel IR still see, so fusion gives it the GEMM's epilogue (bias, activation, residual),
 * and the verifier, the memory plan and the profile (category conv, its FLOPs and bytes) read
 * one kernel. Taken for f16 and bf16 (tensor cores), without groups (a grouped or depthwise
 * conv keeps the gather and batched GEMM below), with every size but the batch known (the CUDA
 * kernel reads a symbolic batch when it runs), and not for a 1x1 conv with stride 1 and no
 * padding, which is a plain GEMM on x already. */
static bool implicit_applies(const ctx *c, const mc_node *xn, const mc_node *wn, int sr)
{
    const mc_attrs *at = &c->n->attr;
    if (!c->conv_implicit || at->groups != 1 || (xn->dtype != MC_F16 && xn->dtype != MC_BF16) || wn->dtype != xn->dtype)
        return false;
    bool direct = true;
    for (int d = 1; d < xn->rank; d++) /* (only the batch may be symbolic: ir/infer.c) */
        if (mc_dim_is_sym(xn->shape[d]) || mc_dim_is_sym(wn->shape[d]) || mc_dim_is_sym(c->n->shape[d]))
            return false;
    for (int i = 0; i < sr; i++)
        direct = direct && wn->shape[2 + i] == 1 && at->stride[i] == 1 && at->padding[i] == 0;
    return !direct;
}

static mc_value conv_implicit(ctx *c, const mc_value *in, const mc_node *xn, int sr, const int64_t *ks,
                              const int64_t *out)
{
    const mc_attrs *at = &c->n->attr;
    int64_t N = xn->shape[0], C = xn->shape[1], Co = c->n->shape[1], K = 1, O = 1;
    for (int i = 0; i < sr; i++) {
        K *= ks[i];
        O *= out[i];
    }
    mc_attrs ma;
    memset(&ma, 0, sizeof ma);
    ma.nkernel = ma.nstride = ma.npadding = ma.ndilation = sr;
    for (int i = 0; i < sr; i++) {
        ma.kernel[i] = ks[i];
        ma.stride[i] = at->stride[i];
        ma.padding[i] = at->padding[i];
        ma.dilation[i] = at->dilation[i];
    }
    int64_t ws[2] = {Co, C * K}, bs[2] = {Co, 1};
    mc_value w = in[1], x = in[0];
    int64_t kc = c->conv_kchunk;
    const mc_attrs *xa = &c->rw->dst->nodes[x].attr;
    bool given_last = sr == 2 && c->conv_clast && C % 8 == 0 && c->rw->dst->nodes[x].op == MC_OP_TRANSPOSE &&
                      xa->has_list && xa->nlist == 4 && xa->list[0] == 0 && xa->list[1] == 3 && xa->list[2] == 1 &&
                      xa->list[3] == 2;
    if (given_last) {
        /* x given channels-last (the transpose of an [N, H, W, C] tensor, which stays a view):
         * K by window positions of all C channels (kir_conv.kc = C), w as [Co, kh, kw, C] (a copy),
         * so that the CUDA kernel loads 8 channels of a pixel as one cp.async (emit_conv_clast) */
        int64_t last[4] = {0, 2, 3, 1};
        w = shape_op(c, MC_OP_TRANSPOSE, w, last, 4);
        ma.kchunk = C;
    } else if (sr == 2 && c->conv_clast && C < 8) {
        /* channels-last (the stem's 3 channels): x as [N, H, W, Cp] padded with zeros to Cp = 4
         * or 8 channels and read through the view [N, Cp, H, W] (channel stride 1), w as [Co,
         * kh, kw, Cp], K by window positions of Cp channels (kir_conv.kc = Cp): the CUDA kernel
         * loads a pixel's window position as one 8- or 16-byte cp.async (emit_conv_clast). The
         * weight rows padded to a multiple of 8 elements (a slice of a wider copy) so that they
         * load by cp.async too. */
        int64_t Cp = C <= 4 ? 4 : 8, last[4] = {0, 2, 3, 1}, first[4] = {0, 3, 1, 2}, z[4] = {0, 0, 0, 0};
        int64_t more[4] = {0, 0, 0, Cp - C}, KP = K * Cp, KP8 = (KP + 7) / 8 * 8, wf[2] = {Co, KP};
        x = shape_op(c, MC_OP_TRANSPOSE, pad_with(c, shape_op(c, MC_OP_TRANSPOSE, x, last, 4), z, more, 0.0), first, 4);
        w = shape_op(c, MC_OP_RESHAPE, pad_with(c, shape_op(c, MC_OP_TRANSPOSE, w, last, 4), z, more, 0.0), wf, 2);
        if (KP8 > KP) {
            int64_t z2[2] = {0, 0}, m2[2] = {0, KP8 - KP};
            mc_attrs s;
            memset(&s, 0, sizeof s);
            s.axis = 1;
            s.start = 0;
            s.end = KP;
            s.step = 1;
            w = pad_with(c, w, z2, m2, 0.0);
            w = mc_rewrite_node(c->rw, c->n, MC_OP_SLICE, &w, 1, &s);
        }
        ma.kchunk = Cp;
        ws[1] = KP;
    } else if (sr == 2 && kc > 0 && C % kc == 0 && C > 0) {
        /* K by chunks of kc channels (kir_conv.kc): w [Co, C, kh, kw] as [Co, C / kc, kh kw, kc],
         * a copy (the transpose cannot stay a view through the reshape to [Co, K]) made by the
         * kernel that makes w where there is one (a folded batchnorm's) */
        int64_t w4[4] = {Co, C / kc, kc, K}, perm[4] = {0, 1, 3, 2};
        w = shape_op(c, MC_OP_TRANSPOSE, shape_op(c, MC_OP_RESHAPE, w, w4, 4), perm, 4);
        ma.kchunk = kc;
    }
    mc_value mm[2] = {shape_op(c, MC_OP_RESHAPE, w, ws, 2), x};
    mc_value y = mc_rewrite_node(c->rw, c->n, MC_OP_MATMUL, mm, 2, &ma); /* [N, C_out, O] */
    if (in[2] != MC_NONE && in[2] >= 0)
        y = op2(c, MC_OP_ADD, y, shape_op(c, MC_OP_RESHAPE, in[2], bs, 2));
    int64_t ys[4] = {N, Co, out[0], sr > 1 ? out[1] : 0};
    (void)O;
    return shape_op(c, MC_OP_RESHAPE, y, ys, 2 + sr);
}

static mc_value conv(ctx *c, const mc_value *in)
{
    const mc_attrs *at = &c->n->attr;
    const mc_node *xn = &c->rw->src->nodes[c->n->in[0]], *wn = &c->rw->src->nodes[c->n->in[1]];
    int sr = xn->rank - 2;
    int64_t N = xn->shape[0], C = xn->shape[1], Co = wn->shape[0], G = at->groups;
    int64_t ks[2] = {wn->shape[2], sr > 1 ? wn->shape[3] : 1}, out[2] = {1, 1}, K, O;
    for (int i = 0; i < sr; i++)
        out[i] = c->n->shape[2 + i];
    if (implicit_applies(c, xn, wn, sr))
        return conv_implicit(c, in, xn, sr, ks, out);
    mc_value cols = conv_cols(c, in[0], xn, sr, ks, out, &K, &O);
    /* without groups the GEMM is [N, C_out, O], so that pointwise work after the conv maps
     * onto its index space (O split into the spatial axes) and joins its epilogue */
    int g1 = G == 1 ? 0 : 1;
    int64_t cs[4] = {N, G, C / G * K, O}, ws[3] = {G, Co / G, C / G * K}, bs[3] = {G, Co / G, 1};
    cols = shape_op(c, MC_OP_RESHAPE, cols, g1 ? cs : (int64_t[]){N, C * K, O}, 3 + g1);
    mc_value w = shape_op(c, MC_OP_RESHAPE, in[1], ws + 1 - g1, 2 + g1);
    mc_value y = op2(c, MC_OP_MATMUL, w, cols);
    if (in[2] != MC_NONE && in[2] >= 0) /* in the GEMM's own index space: its epilogue */
        y = op2(c, MC_OP_ADD, y, shape_op(c, MC_OP_RESHAPE, in[2], bs + 1 - g1, 2 + g1));
    int64_t ys[4] = {N, Co, out[0], sr > 1 ? out[1] : 0};
    return shape_op(c, MC_OP_RESHAPE, y, ys, 2 + sr);
}

/* (x - mean) * (scale / sqrt(var + eps)) + bias, the [C] operands seen as [C, 1, ..]. */
static mc_value batchnorm(ctx *c, mc_value x, const mc_node *n)
{
    const mc_node *xn = &c->rw->src->nodes[n->in[0]];
    int64_t s[MC_MAX_RANK];
    s[0] = xn->shape[1];
    for (int d = 1; d < xn->rank - 1; d++)
        s[d] = 1;
    mc_value p[4];
    for (int i = 0; i < 4; i++)
        p[i] = shape_op(c, MC_OP_RESHAPE, widen(c, c->rw->map[n->in[1 + i]]), s, xn->rank - 1);
    mc_value inv = op2(c, MC_OP_DIV, p[0], op1(c, MC_OP_SQRT, op2(c, MC_OP_ADD, p[3], f32(c, n->attr.value))));
    mc_value y = op2(c, MC_OP_ADD, mul(c, op2(c, MC_OP_SUB, widen(c, x), p[2]), inv), p[1]);
    return narrow(c, y);
}

bool mc_slice_rewritten(const mc_graph *g, const mc_node *n)
{
    if (n->op != MC_OP_SLICE)
        return false;
    const mc_node *x = &g->nodes[n->in[0]];
    bool symbolic = false;
    for (int d = 0; d < x->rank; d++)
        symbolic |= mc_dim_is_sym(x->shape[d]);
    return symbolic && (n->attr.start == MC_END || n->attr.start < 0 || n->attr.step < 0);
}

/* A slice of a symbolic operand that mc_slice_rewritten names. Over a symbolic axis its
 * attributes are as written (ir/infer.c: step 1): a missing start is 0, and a start from the end,
 * n + start, is only known when it runs, so the slice is a gather of x along the axis at
 * iota + n + start (its count, end - start, is fixed); a backward step over a fixed axis is a
 * gather at start + step iota. The gather reads x through strides and checks its indices; the
 * bounds themselves are checked for each binding beforehand (ir/dims.c). */
static mc_value slice_symbolic(ctx *c, mc_value x)
{
    const mc_node *xn = &c->rw->src->nodes[c->n->in[0]];
    mc_attrs a = c->n->attr;
    int64_t axis = a.axis;
    if (a.start == MC_END && a.step == 1) {
        a.start = 0;
        return mc_rewrite_node(c->rw, c->n, MC_OP_SLICE, &x, 1, &a);
    }
    int64_t count = c->n->shape[axis];
    mc_value i = iota(c, &count, 1, 0);
    if (a.step != 1)
        i = op2(c, MC_OP_MUL, i, constant(c, (double)a.step, MC_I32));
    mc_value first = mc_dim_is_sym(xn->shape[axis]) ? dim_i32(c, xn->shape[axis], 0, a.start)
                                                     : constant(c, (double)a.start, MC_I32);
    mc_attrs ga;
    memset(&ga, 0, sizeof ga);
    ga.axis = axis;
    mc_attrs to;
    memset(&to, 0, sizeof to);
    to.dtype = MC_I32;
    if (xn->dtype == MC_BOOL) /* gather takes numbers: a bool is gathered as 0 and 1 */
        x = mc_rewrite_node(c->rw, c->n, MC_OP_CAST, &x, 1, &to);
    mc_value gin[2] = {x, op2(c, MC_OP_ADD, i, first)};
    mc_value v = mc_rewrite_node(c->rw, c->n, MC_OP_GATHER, gin, 2, &ga);
    to.dtype = MC_BOOL;
    return xn->dtype == MC_BOOL ? mc_rewrite_node(c->rw, c->n, MC_OP_CAST, &v, 1, &to) : v;
}

static bool quadratic_cumsum(void)
{
    const char *e = getenv("MINIC_QUADRATIC_CUMSUM");
    return e && strcmp(e, "1") == 0;
}

mc_status mc_pass_decompose(mc_graph *g, const mc_compile_options *opt)
{
    mc_rewrite rw;
    mc_status st = mc_rewrite_begin(&rw, g);
    if (st != MC_OK)
        return st;
    for (int i = 0; i < g->nnodes; i++) {
        const mc_node *n = &g->nodes[i];
        /* (the quadratic cumsum adds an axis: not for an operand of the most axes) */
        if (!mc_op_is_composite(n->op) && !(n->op == MC_OP_CUMSUM && n->rank < MC_MAX_RANK && quadratic_cumsum()) &&
            !mc_slice_rewritten(g, n)) {
            rw.map[i] = mc_rewrite_copy(&rw, i);
        } else {
            ctx c = {&rw, n, opt && opt->conv_gather, opt && opt->conv_implicit, opt ? opt->conv_kchunk : 0,
                     opt && opt->conv_clast};
            mc_value in[3] = {MC_NONE, MC_NONE, MC_NONE};
            for (int k = 0; k < n->nin && k < 3; k++)
                in[k] = n->in[k] >= 0 ? rw.map[n->in[k]] : MC_NONE;
            mc_value v = MC_ERROR;
            switch (n->op) {
            case MC_OP_SOFTMAX: v = softmax(&c, in[0], false); break;
            case MC_OP_LOG_SOFTMAX: v = softmax(&c, in[0], true); break;
            case MC_OP_LAYERNORM: v = layernorm(&c, in); break;
            case MC_OP_RMSNORM: v = rmsnorm(&c, in); break;
            case MC_OP_LINEAR: v = linear(&c, in); break;
            case MC_OP_MEAN: v = mean(&c, in[0]); break;
            case MC_OP_LEAKY_RELU: v = leaky_relu(&c, in[0]); break;
            case MC_OP_CLIP: v = clip(&c, in[0]); break;
            case MC_OP_ARGMAX: case MC_OP_ARGMIN: v = argextreme(&c, in[0]); break;
            case MC_OP_CUMSUM: v = cumsum_quadratic(&c, in[0]); break; /* MINIC_QUADRATIC_CUMSUM=1 */
            case MC_OP_UPDATE: v = update(&c, in); break;
            case MC_OP_SLICE: v = slice_symbolic(&c, in[0]); break; /* mc_slice_rewritten */
            case MC_OP_PAD: v = pad(&c, in[0]); break;
            case MC_OP_MAXPOOL: case MC_OP_AVGPOOL: v = pool(&c, in[0]); break;
            case MC_OP_CONV: v = conv(&c, in); break;
            case MC_OP_BATCHNORM: v = batchnorm(&c, in[0], n); break;
            case MC_OP_INPUT: case MC_OP_PARAM: case MC_OP_CONST: case MC_OP_NEG: case MC_OP_ABS:
            case MC_OP_EXP: case MC_OP_LOG: case MC_OP_SQRT: case MC_OP_RSQRT: case MC_OP_RECIP:
            case MC_OP_TANH: case MC_OP_SIGMOID: case MC_OP_RELU: case MC_OP_GELU:
            case MC_OP_GELU_TANH: case MC_OP_SILU: case MC_OP_SIN: case MC_OP_COS: case MC_OP_ERF:
            case MC_OP_FLOOR: case MC_OP_CEIL: case MC_OP_ROUND: case MC_OP_SIGN: case MC_OP_SOFTPLUS:
            case MC_OP_ADD: case MC_OP_SUB: case MC_OP_MUL: case MC_OP_DIV: case MC_OP_POW:
            case MC_OP_MAXIMUM: case MC_OP_MINIMUM: case MC_OP_EQ: case MC_OP_NE: case MC_OP_LT:
            case MC_OP_LE: case MC_OP_GT: case MC_OP_GE: case MC_OP_WHERE: case MC_OP_CAST:
            case MC_OP_AND: case MC_OP_OR: case MC_OP_XOR: case MC_OP_NOT:
            case MC_OP_SUM: case MC_OP_MAX: case MC_OP_MIN: case MC_OP_MATMUL:
            case MC_OP_TRANSPOSE: case MC_OP_RESHAPE: case MC_OP_EXPAND:
            case MC_OP_CONCAT: case MC_OP_IOTA: case MC_OP_FULL: case MC_OP_GATHER:
            case MC_OP_ALLREDUCE: case MC_NUM_OPS:
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
