/* ONNX import, the elementwise, logic, shape and tensor operators (frontend/onnx_internal.h).
 *
 * Each mapping builds its node from minic's operators through the C API's builder. Where every
 * operand is a constant known at import time (shape chains: Shape -> Gather -> Concat ->
 * Reshape), the shape operators compute their result on the host instead (onnx_fold_*, fold_slice)
 * and the node stays a constant. Operators minic has no native form of are built from the ones
 * it has (Mod, BitShift, ScatterElements, OneHot as comparisons and selections; GatherElements
 * as a gather on the flattened data).
 */
#include "frontend/onnx_internal.h"

#ifdef MINIC_HAVE_ONNX
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef mc_value (*unary_fn)(mc_graph *, mc_value);
typedef mc_value (*binary_fn)(mc_graph *, mc_value, mc_value);

static const struct { const char *name; unary_fn fn; } unary_ops[] = {
    {"Neg", mc_neg}, {"Abs", mc_abs}, {"Exp", mc_exp}, {"Log", mc_log}, {"Sqrt", mc_sqrt},
    {"Reciprocal", mc_recip}, {"Tanh", mc_tanh}, {"Sigmoid", mc_sigmoid}, {"Relu", mc_relu},
    {"Erf", mc_erf}, {"Sin", mc_sin}, {"Cos", mc_cos},
};

static const struct { const char *name; binary_fn fn; binop fold; } binary_ops[] = {
    {"Add", mc_add, B_ADD}, {"Sub", mc_sub, B_SUB}, {"Mul", mc_mul, B_MUL}, {"Div", mc_div, B_DIV},
    {"Equal", mc_eq, B_EQ}, {"Less", mc_lt, B_LT}, {"Greater", mc_gt, B_GT},
    {"LessOrEqual", mc_le, B_LE}, {"GreaterOrEqual", mc_ge, B_GE},
};

static bool op_unary(ctx *c, const node_t *n)
{
    for (size_t k = 0; k < sizeof unary_ops / sizeof *unary_ops; k++)
        if (!strcmp(n->op_type, unary_ops[k].name)) {
            if (!strcmp(n->op_type, "Neg") && onnx_all_const(c, n) && onnx_in_const(c, n, 0)) {
                htensor *a = onnx_in_const(c, n, 0);
                htensor *z = onnx_fold_copy(c, a, a->elem, a->rank, a->dims);
                if (!z)
                    return false;
                for (int64_t e = 0; e < z->n; e++) {
                    if (z->i)
                        z->i[e] = -z->i[e];
                    else
                        z->f[e] = -z->f[e];
                }
                return onnx_set_const(c, n, 0, z);
            }
            VAL(x, 0);
            return onnx_set_out(c, n, 0, unary_ops[k].fn(c->g, x));
        }
    return onnx_why(c, "internal: no unary operator");
}

/* A value of a host tensor is a symbolic dimension (only a tensor marked sym holds them). */
static bool is_symv(const htensor *t, int64_t k) { return t->sym && mc_dim_is_sym(t->i[k]); }

/* A plain integer constant joined with symbolic dimensions must not hold a number in their
 * encoding's range (below -2^62): it would read as one. */
static bool plain_joins(ctx *c, const htensor *t)
{
    for (int64_t k = 0; t->i && !t->sym && k < t->n; k++)
        if (mc_dim_is_sym(t->i[k]))
            return onnx_why(c, "the constant %lld joined with symbolic dimensions (too negative for a size)",
                            (long long)t->i[k]);
    return true;
}

/* x op y where x or y is a symbolic dimension: arithmetic with mc_dim_* (a result that is no
 * dimension of the graph, or could be below 0 for some binding, is refused); comparisons only
 * where every binding gives the same answer. false with the reason set otherwise. */
static bool sym_binop(ctx *c, binop op, int64_t x, int64_t y, int64_t *z)
{
    mc_graph *g = c->g;
    char xs[96], ys[96];
    mc_dim_str(g, x, xs, sizeof xs);
    mc_dim_str(g, y, ys, sizeof ys);
    int64_t r = 0, lo;
    bool ok = false;
    switch (op) {
    case B_ADD: ok = mc_dim_add(g, x, y, &r); break;
    case B_SUB:
        if (x == y) { /* key_length - query_length of the same T: the number 0, not a size */
            *z = 0;
            return true;
        }
        if (!mc_dim_is_sym(y))
            ok = y != INT64_MIN && mc_dim_add_const(g, x, -y, &r);
        else {
            int64_t ny;
            ok = mc_dim_mul(g, y, -1, &ny) && mc_dim_add(g, x, ny, &r);
        }
        break;
    case B_MUL: ok = (mc_dim_is_sym(x) || x >= 1) && (mc_dim_is_sym(y) || y >= 1) && mc_dim_mul(g, x, y, &r); break;
    case B_DIV: ok = (mc_dim_is_sym(y) || y >= 1) && mc_dim_div_exact(g, x, y, &r); break;
    case B_EQ: case B_LT: case B_GT: case B_LE: case B_GE: {
        /* x - y's sign: equal dims, or a symbolic side whose least value is above the other */
        int sign = 2; /* unknown */
        if (x == y)
            sign = 0;
        else if (mc_dim_is_sym(x) && !mc_dim_is_sym(y) && mc_dim_lower_bound(g, x, &lo) && lo > y)
            sign = 1;
        else if (mc_dim_is_sym(y) && !mc_dim_is_sym(x) && mc_dim_lower_bound(g, y, &lo) && lo > x)
            sign = -1;
        if (sign == 2)
            return onnx_why(c, "comparing %s with %s: the answer depends on the binding of the symbolic dimensions", xs, ys);
        *z = op == B_EQ ? sign == 0 : op == B_LT ? sign < 0 : op == B_GT ? sign > 0 : op == B_LE ? sign <= 0 : sign >= 0;
        return true;
    }
    default:
        return onnx_why(c, "this operator on the symbolic dimension %s", mc_dim_is_sym(x) ? xs : ys);
    }
    if (!ok || (mc_dim_is_sym(r) && (!mc_dim_lower_bound(g, r, &lo) || lo < 0)))
        return onnx_why(c, "%s %s %s is not a size minic can compute for every binding of the symbolic dimensions", xs,
                        op == B_ADD ? "+" : op == B_SUB ? "-" : op == B_MUL ? "*" : "/", ys);
    *z = r;
    return true;
}

/* onnx_fold_binary for integer constants where some values are symbolic dimensions */
static htensor *fold_sym_binary(ctx *c, binop op, const htensor *a, const htensor *b)
{
    int r;
    int64_t shape[MC_MAX_RANK];
    if (!onnx_broadcast(c, a->rank, a->dims, b->rank, b->dims, &r, shape))
        return NULL;
    bool cmp = op >= B_EQ && op <= B_GE;
    htensor *t = onnx_new_fold(c, cmp ? T_BOOL : a->elem, r, shape);
    if (!t)
        return NULL;
    for (int64_t k = 0; k < t->n; k++) {
        int64_t ia = onnx_bidx(a, r, shape, k), ib = onnx_bidx(b, r, shape, k);
        if ((!is_symv(a, ia) && mc_dim_is_sym(a->i[ia])) || (!is_symv(b, ib) && mc_dim_is_sym(b->i[ib]))) {
            onnx_why(c, "the constant %lld met symbolic dimensions (too negative for a size)",
                     (long long)(is_symv(a, ia) ? b->i[ib] : a->i[ia]));
            return NULL;
        }
        if (!is_symv(a, ia) && !is_symv(b, ib)) {
            htensor one_a = *a, one_b = *b; /* one element through the plain fold */
            int64_t va = a->i[ia], vb = b->i[ib];
            one_a.rank = one_b.rank = 0;
            one_a.n = one_b.n = 1;
            one_a.i = &va;
            one_b.i = &vb;
            one_a.sym = one_b.sym = false;
            htensor *z = onnx_fold_binary(c, op, &one_a, &one_b);
            if (!z)
                return NULL;
            t->i[k] = z->i[0];
        } else if (!sym_binop(c, op, a->i[ia], b->i[ib], &t->i[k])) {
            return NULL;
        }
        t->sym |= !cmp && mc_dim_is_sym(t->i[k]);
    }
    return t;
}

static bool op_binary(ctx *c, const node_t *n)
{
    for (size_t k = 0; k < sizeof binary_ops / sizeof *binary_ops; k++)
        if (!strcmp(n->op_type, binary_ops[k].name)) {
            htensor *sa = onnx_in_sconst(c, n, 0), *sb = onnx_in_sconst(c, n, 1);
            if (sa && sb && (sa->sym || sb->sym) && sa->i && sb->i && sa->n <= 4096 && sb->n <= 4096)
                return onnx_set_const(c, n, 0, fold_sym_binary(c, binary_ops[k].fold, sa, sb));
            htensor *a = onnx_in_const(c, n, 0), *b = onnx_in_const(c, n, 1);
            if (a && b && a->n <= MAX_FOLD_ELEMS && b->n <= MAX_FOLD_ELEMS &&
                onnx_elem_is_int(a->elem) == onnx_elem_is_int(b->elem))
                return onnx_set_const(c, n, 0, onnx_fold_binary(c, binary_ops[k].fold, a, b));
            VAL(x, 0);
            VAL(y, 1);
            return onnx_set_out(c, n, 0, binary_ops[k].fn(c->g, x, y));
        }
    return onnx_why(c, "internal: no binary operator");
}

static bool op_pow(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    VAL(y, 1);
    mc_dtype dx = onnx_vnode(c, x)->dtype;
    if (dx == MC_I32) /* integer powers through f32 (exact for the values an i32 holds at that size) */
        return onnx_set_out(c, n, 0, mc_cast(g, mc_pow(g, mc_cast(g, x, MC_F32), onnx_vnode(c, y)->dtype == MC_F32 ? y : mc_cast(g, y, MC_F32)), MC_I32));
    if (onnx_vnode(c, y)->dtype != dx)
        y = mc_cast(g, y, dx);
    return onnx_set_out(c, n, 0, mc_pow(g, x, y));
}

/* Max, Min, Sum, Mean: any number of operands */
static bool op_variadic(ctx *c, const node_t *n)
{
    binary_fn fn = !strcmp(n->op_type, "Max") ? mc_maximum : !strcmp(n->op_type, "Min") ? mc_minimum : mc_add;
    if (n->n_input < 1)
        return onnx_why(c, "no operands");
    VAL(acc, 0);
    for (size_t k = 1; k < n->n_input; k++) {
        VAL(x, k);
        acc = fn(c->g, acc, x);
    }
    if (!strcmp(n->op_type, "Mean") && n->n_input > 1 && acc >= 0) /* else the error stands */
        acc = mc_div(c->g, acc, onnx_fscalar(c, acc, (double)n->n_input));
    return onnx_set_out(c, n, 0, acc);
}

static bool op_logic(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(a, 0);
    if (!strcmp(n->op_type, "Not"))
        return onnx_set_out(c, n, 0, mc_eq(g, a, mc_scalar(g, 0, MC_BOOL)));
    VAL(b, 1);
    if (!strcmp(n->op_type, "Xor"))
        return onnx_set_out(c, n, 0, mc_ne(g, a, b));
    /* where(a, b, false) / where(a, true, b), broadcast by where */
    if (!strcmp(n->op_type, "And"))
        return onnx_set_out(c, n, 0, mc_where(g, a, b, mc_scalar(g, 0, MC_BOOL)));
    return onnx_set_out(c, n, 0, mc_where(g, a, mc_scalar(g, 1, MC_BOOL), b));
}

static bool op_where(ctx *c, const node_t *n)
{
    /* shape arithmetic (exporters write Where(Equal(shape, -1), 1, shape) for Expand), symbolic
     * dimensions too: a selection of integers on the host */
    htensor *tc = onnx_in_const(c, n, 0), *ta = onnx_in_sconst(c, n, 1), *tb = onnx_in_sconst(c, n, 2);
    if (tc && ta && tb && ta->i && tb->i && ta->elem == tb->elem && tc->n <= 4096 && ta->n <= 4096 && tb->n <= 4096) {
        int r1, r;
        int64_t s1[MC_MAX_RANK], shape[MC_MAX_RANK];
        if (!onnx_broadcast(c, tc->rank, tc->dims, ta->rank, ta->dims, &r1, s1) ||
            !onnx_broadcast(c, r1, s1, tb->rank, tb->dims, &r, shape))
            return false;
        if ((ta->sym || tb->sym) && (!plain_joins(c, ta) || !plain_joins(c, tb)))
            return false;
        htensor *z = onnx_new_fold(c, ta->elem, r, shape);
        if (!z)
            return false;
        for (int64_t k = 0; k < z->n; k++) {
            const htensor *from = onnx_hi(tc, onnx_bidx(tc, r, shape, k)) ? ta : tb;
            z->i[k] = from->i[onnx_bidx(from, r, shape, k)];
            z->sym |= is_symv(from, onnx_bidx(from, r, shape, k));
        }
        return onnx_set_const(c, n, 0, z);
    }
    VAL(cond, 0);
    VAL(a, 1);
    VAL(b, 2);
    return onnx_set_out(c, n, 0, mc_where(c->g, cond, a, b));
}

/* Elu-style activations, composed from minic's operators. */
static bool op_activation(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    const char *op = n->op_type;
    VAL(x, 0);
    mc_value zero = onnx_fscalar(c, x, 0), one = onnx_fscalar(c, x, 1), y;
    if (!strcmp(op, "LeakyRelu")) {
        double alpha = onnx_attr_f(n, "alpha", 0.01);
        y = mc_where(g, mc_lt(g, x, zero), mc_mul(g, x, onnx_fscalar(c, x, alpha)), x);
    } else if (!strcmp(op, "PRelu")) {
        VAL(slope, 1);
        y = mc_where(g, mc_lt(g, x, zero), mc_mul(g, x, slope), x);
    } else if (!strcmp(op, "Elu")) {
        double alpha = onnx_attr_f(n, "alpha", 1.0);
        y = mc_where(g, mc_gt(g, x, zero), x, mc_mul(g, mc_sub(g, mc_exp(g, x), one), onnx_fscalar(c, x, alpha)));
    } else if (!strcmp(op, "Selu")) {
        double alpha = onnx_attr_f(n, "alpha", 1.67326319217681884765625);
        double gamma = onnx_attr_f(n, "gamma", 1.05070102214813232421875);
        y = mc_where(g, mc_gt(g, x, zero), x, mc_mul(g, mc_sub(g, mc_exp(g, x), one), onnx_fscalar(c, x, alpha)));
        y = mc_mul(g, y, onnx_fscalar(c, x, gamma));
    } else if (!strcmp(op, "Celu")) {
        double alpha = onnx_attr_f(n, "alpha", 1.0);
        mc_value e = mc_mul(g, mc_sub(g, mc_exp(g, mc_div(g, x, onnx_fscalar(c, x, alpha))), one), onnx_fscalar(c, x, alpha));
        y = mc_add(g, mc_maximum(g, x, zero), mc_minimum(g, e, zero));
    } else if (!strcmp(op, "ThresholdedRelu")) {
        double alpha = onnx_attr_f(n, "alpha", 1.0);
        y = mc_where(g, mc_gt(g, x, onnx_fscalar(c, x, alpha)), x, zero);
    } else if (!strcmp(op, "HardSigmoid") || !strcmp(op, "HardSwish")) {
        bool swish = !strcmp(op, "HardSwish");
        double alpha = swish ? 1.0 / 6 : onnx_attr_f(n, "alpha", 0.2), beta = swish ? 0.5 : onnx_attr_f(n, "beta", 0.5);
        y = mc_add(g, mc_mul(g, x, onnx_fscalar(c, x, alpha)), onnx_fscalar(c, x, beta));
        y = mc_maximum(g, mc_minimum(g, y, one), zero);
        if (swish)
            y = mc_mul(g, x, y);
    } else if (!strcmp(op, "Softsign")) {
        y = mc_div(g, x, mc_add(g, mc_abs(g, x), one));
    } else if (!strcmp(op, "Softplus") || !strcmp(op, "Mish")) {
        /* log(1 + exp(x)) = max(x, 0) + log(1 + exp(-|x|)), without overflow */
        mc_value sp = mc_add(g, mc_maximum(g, x, zero), mc_log(g, mc_add(g, mc_exp(g, mc_neg(g, mc_abs(g, x))), one)));
        y = !strcmp(op, "Mish") ? mc_mul(g, x, mc_tanh(g, sp)) : sp;
    } else if (!strcmp(op, "Shrink")) {
        double lambd = onnx_attr_f(n, "lambd", 0.5), bias = onnx_attr_f(n, "bias", 0.0);
        y = mc_where(g, mc_lt(g, x, onnx_fscalar(c, x, -lambd)), mc_add(g, x, onnx_fscalar(c, x, bias)),
                     mc_where(g, mc_gt(g, x, onnx_fscalar(c, x, lambd)), mc_sub(g, x, onnx_fscalar(c, x, bias)), zero));
    } else if (!strcmp(op, "Tan")) {
        y = mc_div(g, mc_sin(g, x), mc_cos(g, x));
    } else if (!strcmp(op, "Sinh") || !strcmp(op, "Cosh")) {
        mc_value a = mc_exp(g, x), b = mc_exp(g, mc_neg(g, x));
        y = mc_mul(g, !strcmp(op, "Sinh") ? mc_sub(g, a, b) : mc_add(g, a, b), onnx_fscalar(c, x, 0.5));
    } else if (!strcmp(op, "Asinh")) {
        y = mc_log(g, mc_add(g, x, mc_sqrt(g, mc_add(g, mc_mul(g, x, x), one))));
    } else if (!strcmp(op, "Acosh")) {
        y = mc_log(g, mc_add(g, x, mc_sqrt(g, mc_sub(g, mc_mul(g, x, x), one))));
    } else if (!strcmp(op, "Atanh")) {
        y = mc_mul(g, mc_log(g, mc_div(g, mc_add(g, one, x), mc_sub(g, one, x))), onnx_fscalar(c, x, 0.5));
    } else if (!strcmp(op, "Sign")) {
        y = mc_where(c->g, mc_gt(g, x, zero), one, mc_where(c->g, mc_lt(g, x, zero), onnx_fscalar(c, x, -1), zero));
        if (onnx_vnode(c, x)->dtype != MC_I32)
            y = mc_where(g, mc_ne(g, x, x), x, y);
    } else if (!strcmp(op, "IsNaN")) {
        y = mc_ne(g, x, x);
    } else if (!strcmp(op, "IsInf")) {
        bool pos = onnx_attr_i(n, "detect_positive", 1) != 0, neg = onnx_attr_i(n, "detect_negative", 1) != 0;
        mc_value inf = onnx_fscalar(c, x, INFINITY);
        if (pos && neg)
            y = mc_eq(g, mc_abs(g, x), inf);
        else if (pos)
            y = mc_eq(g, x, inf);
        else if (neg)
            y = mc_eq(g, x, onnx_fscalar(c, x, -INFINITY));
        else
            y = mc_lt(g, x, onnx_fscalar(c, x, -INFINITY)); /* never */
    } else {
        return onnx_why(c, "internal: no activation");
    }
    return onnx_set_out(c, n, 0, y);
}

/* ---- shape operators ------------------------------------------------------------------------ */

/* Output 0 is input 0 with a new shape: a constant stays one. */
static bool reshape_to(ctx *c, const node_t *n, int rank, const int64_t *dims)
{
    htensor *a = onnx_in_sconst(c, n, 0);
    if (a && a->n <= MAX_FOLD_ELEMS && !onnx_any_sym(rank, dims)) {
        htensor *z = onnx_fold_copy(c, a, a->elem, rank, dims);
        if (z)
            z->sym = a->sym;
        return onnx_set_const(c, n, 0, z);
    }
    VAL(x, 0);
    for (int d = 0; d < rank; d++)
        if (dims[d] == 0)
            return onnx_why(c, "a zero-size result (minic has no zero-size dimensions)");
    return onnx_set_out(c, n, 0, mc_reshape(c->g, x, dims, rank));
}

static bool in_type(ctx *c, const node_t *n, size_t k, int *elem, int *rank, int64_t *dims)
{
    *elem = 0;
    *rank = 0;
    slot *s = onnx_in_slot(c, n, k);
    if (!s)
        return onnx_why(c, "input %zu is missing", k);
    if (s->state == S_POISON)
        return false;
    onnx_slot_type(c, s, elem, rank, dims);
    return true;
}

/* the product of dims that may be symbolic; false (the reason set) where it is no dimension */
static bool sym_numel(ctx *c, int rank, const int64_t *dims, int64_t *out)
{
    *out = 1;
    for (int d = 0; d < rank; d++)
        if (!mc_dim_mul(c->g, *out, dims[d], out))
            return onnx_why(c, "the size of a shape with symbolic dimensions overflows");
    return true;
}

int64_t onnx_numel(int rank, const int64_t *dims)
{
    int64_t p = 1;
    for (int d = 0; d < rank; d++)
        p *= dims[d];
    return p;
}

static bool op_reshape(ctx *c, const node_t *n)
{
    int elem, rank;
    int64_t dims[MC_MAX_RANK], spec[MC_MAX_RANK], out[MC_MAX_RANK];
    if (!in_type(c, n, 0, &elem, &rank, dims))
        return false;
    int ns;
    bool given;
    if (!onnx_dims_of(c, n, 1, "shape", spec, &ns, MC_MAX_RANK, &given))
        return false;
    if (!given)
        return onnx_why(c, "no shape");
    bool allowzero = onnx_attr_i(n, "allowzero", 0) != 0;
    if (onnx_any_sym(rank, dims) || onnx_any_sym(ns, spec)) {
        /* 0 copies the input's dimension, -1 is left to minic's reshape (an exact quotient of
         * the sizes as polynomials), the rest are sizes or symbolic dimensions */
        for (int k = 0; k < ns; k++) {
            if (spec[k] == 0 && !allowzero && k >= rank)
                return onnx_why(c, "shape entry %d is 0 (copy), but the input has rank %d", k, rank);
            if (!mc_dim_is_sym(spec[k]) && spec[k] < (allowzero ? 1 : 0) && spec[k] != -1)
                return onnx_why(c, "shape entry %lld", (long long)spec[k]);
            out[k] = spec[k] == 0 ? dims[k] : spec[k];
        }
        VAL(x, 0);
        return onnx_set_out(c, n, 0, mc_reshape(c->g, x, out, ns));
    }
    int infer = -1;
    int64_t known = 1, total = onnx_numel(rank, dims);
    for (int k = 0; k < ns; k++) {
        if (spec[k] == 0 && !allowzero) {
            if (k >= rank)
                return onnx_why(c, "shape entry %d is 0 (copy), but the input has rank %d", k, rank);
            out[k] = dims[k];
        } else if (spec[k] == -1) {
            if (infer >= 0)
                return onnx_why(c, "two -1 entries in the shape");
            infer = k;
            out[k] = 1;
        } else if (spec[k] < 0) {
            return onnx_why(c, "shape entry %lld", (long long)spec[k]);
        } else {
            out[k] = spec[k];
        }
        if (k != infer && mc_mul_overflows(known, out[k], &known))
            return onnx_why(c, "the shape's size overflows");
    }
    if (infer >= 0) {
        if (known == 0 || total % known)
            return onnx_why(c, "cannot infer -1: %lld elements into blocks of %lld", (long long)total, (long long)known);
        out[infer] = total / known;
    } else if (known != total) {
        return onnx_why(c, "cannot reshape %lld elements to %lld", (long long)total, (long long)known);
    }
    return reshape_to(c, n, ns, out);
}

static bool op_flatten(ctx *c, const node_t *n)
{
    int elem, rank;
    int64_t dims[MC_MAX_RANK];
    if (!in_type(c, n, 0, &elem, &rank, dims))
        return false;
    int64_t axis = onnx_attr_i(n, "axis", 1);
    if (axis < -rank || axis > rank)
        return onnx_why(c, "axis %lld out of range for rank %d", (long long)axis, rank);
    if (axis < 0)
        axis += rank;
    int64_t out[2];
    if (!sym_numel(c, (int)axis, dims, &out[0]) || !sym_numel(c, rank - (int)axis, dims + axis, &out[1]))
        return false;
    return reshape_to(c, n, 2, out);
}

static bool op_squeeze(ctx *c, const node_t *n)
{
    int elem, rank;
    int64_t dims[MC_MAX_RANK], axes[MC_MAX_RANK], out[MC_MAX_RANK];
    if (!in_type(c, n, 0, &elem, &rank, dims))
        return false;
    int na;
    bool given;
    if (!onnx_ints_of(c, n, 1, "axes", axes, &na, MC_MAX_RANK, &given))
        return false;
    bool drop[MC_MAX_RANK] = {0};
    for (int k = 0; k < na; k++) {
        int a;
        if (!onnx_norm_axis(c, axes[k], rank, &a))
            return false;
        char ds[96];
        if (dims[a] != 1)
            return onnx_why(c, "cannot squeeze axis %d of size %s", a, mc_dim_str(c->g, dims[a], ds, sizeof ds));
        drop[a] = true;
    }
    if (!given && onnx_any_sym(rank, dims))
        return onnx_why(c, "Squeeze without axes over a symbolic dimension (whether it is 1 depends on the binding)");
    int r = 0;
    for (int d = 0; d < rank; d++)
        if (!(given ? drop[d] : dims[d] == 1))
            out[r++] = dims[d];
    return reshape_to(c, n, r, out);
}

static bool op_unsqueeze(ctx *c, const node_t *n)
{
    int elem, rank;
    int64_t dims[MC_MAX_RANK], axes[MC_MAX_RANK], out[MC_MAX_RANK];
    if (!in_type(c, n, 0, &elem, &rank, dims))
        return false;
    int na;
    bool given;
    if (!onnx_ints_of(c, n, 1, "axes", axes, &na, MC_MAX_RANK, &given))
        return false;
    int r = rank + na;
    if (r > MC_MAX_RANK)
        return onnx_why(c, "a result of rank %d (at most %d)", r, MC_MAX_RANK);
    bool ins[MC_MAX_RANK] = {0};
    for (int k = 0; k < na; k++) {
        int a;
        if (!onnx_norm_axis(c, axes[k], r, &a))
            return false;
        if (ins[a])
            return onnx_why(c, "axis %d given twice", a);
        ins[a] = true;
    }
    for (int d = 0, s = 0; d < r; d++)
        out[d] = ins[d] ? 1 : dims[s++];
    return reshape_to(c, n, r, out);
}

static bool op_identity(ctx *c, const node_t *n)
{
    slot *s = onnx_in_slot(c, n, 0);
    if (!s)
        return onnx_why(c, "input 0 is missing");
    if (!strcmp(n->op_type, "Dropout")) {
        /* training with a ratio of 0 keeps every element: inference */
        htensor *tm = onnx_in_const(c, n, 2), *ratio = onnx_in_const(c, n, 1);
        bool keep_all = ratio && ratio->n == 1 && onnx_hf(ratio, 0) == 0;
        if (onnx_has_in(n, 2) && (!tm || (tm->n > 0 && onnx_hi(tm, 0))) && !keep_all)
            return onnx_why(c, "training_mode (only inference is supported)");
        if (onnx_out_present(n, 1)) {
            int elem, rank;
            int64_t dims[MC_MAX_RANK];
            onnx_slot_type(c, s, &elem, &rank, dims);
            if (!onnx_set_out(c, n, 1, mc_full(c->g, dims, rank, 1, MC_BOOL)))
                return false;
        }
    }
    return onnx_set_slot(c, n, 0, s->state, s->v, s->c);
}

static bool op_transpose(ctx *c, const node_t *n)
{
    VAL(x, 0);
    const attr_t *a = onnx_attr(n, "perm");
    int perm[MC_MAX_RANK];
    int np = 0;
    if (a && a->n_ints) {
        if (a->n_ints > MC_MAX_RANK)
            return onnx_why(c, "perm has %zu entries", a->n_ints);
        for (size_t k = 0; k < a->n_ints; k++) {
            if (a->ints[k] < -MC_MAX_RANK || a->ints[k] >= MC_MAX_RANK)
                return onnx_why(c, "perm entry %lld", (long long)a->ints[k]);
            perm[k] = (int)a->ints[k];
        }
        np = (int)a->n_ints;
    }
    return onnx_set_out(c, n, 0, mc_transpose(c->g, x, np ? perm : NULL, np));
}

static bool op_concat(ctx *c, const node_t *n)
{
    if (n->n_input < 1 || n->n_input > 4096)
        return onnx_why(c, "%zu operands", n->n_input);
    int64_t axis = onnx_attr_i(n, "axis", 0);
    /* Every operand a constant: folded here. Each operand is looked up once (a fuzzed Concat
     * of 4096 operands looked them up per element and took minutes). */
    htensor *ts[4096];
    bool all = true, any_sym = false;
    for (size_t k = 0; k < n->n_input && all; k++) {
        ts[k] = onnx_has_in(n, k) ? onnx_in_sconst(c, n, k) : NULL;
        all = !onnx_has_in(n, k) || ts[k];
        any_sym |= ts[k] && ts[k]->sym;
    }
    if (all) {
        htensor *first = ts[0];
        if (!first)
            return onnx_why(c, "input 0 is missing");
        int r = first->rank, ax;
        if (r < 1) /* ONNX's Concat needs rank >= 1; a scalar has no axis to join along */
            return onnx_why(c, "operands of rank 0");
        if (!onnx_norm_axis(c, axis, r, &ax))
            return false;
        int64_t dims[MC_MAX_RANK];
        memcpy(dims, first->dims, sizeof dims);
        dims[ax] = 0;
        for (size_t k = 0; k < n->n_input; k++) {
            htensor *t = ts[k];
            if (!t)
                continue;
            if (t->sym && !t->i)
                return onnx_why(c, "internal: a symbolic constant without integers");
            if (any_sym && !plain_joins(c, t)) /* the plain operands join symbols */
                return false;
            if (t->rank != r)
                return onnx_why(c, "operands of ranks %d and %d", r, t->rank);
            for (int d = 0; d < r; d++)
                if (d != ax && t->dims[d] != first->dims[d])
                    return onnx_why(c, "operand shapes differ at axis %d", d);
            dims[ax] += t->dims[ax];
        }
        int elem = first->elem;
        htensor *z = onnx_new_fold(c, elem, r, dims);
        if (!z)
            return false;
        if (any_sym && !z->i)
            return onnx_why(c, "symbolic dimensions joined with floating-point values");
        z->sym = any_sym;
        /* Only the operands with elements take part below, so that the work is the result's
         * size (operands of shape [N, 0] once made outer x operands empty steps). */
        int nt = 0;
        for (size_t k = 0; k < n->n_input; k++)
            if (ts[k] && onnx_numel(r - ax, ts[k]->dims + ax) > 0)
                ts[nt++] = ts[k];
        int64_t outer = nt > 0 ? onnx_numel(ax, dims) : 0, pos = 0;
        for (int64_t o = 0; o < outer; o++)
            for (int k = 0; k < nt; k++) {
                htensor *t = ts[k];
                int64_t inner = onnx_numel(r - ax, t->dims + ax);
                for (int64_t e = 0; e < inner; e++, pos++) {
                    if (z->i)
                        z->i[pos] = onnx_hi(t, o * inner + e);
                    else
                        z->f[pos] = onnx_hf(t, o * inner + e);
                }
            }
        return onnx_set_const(c, n, 0, z);
    }
    mc_value xs[4096];
    int nx = 0;
    for (size_t k = 0; k < n->n_input; k++) {
        if (!onnx_has_in(n, k))
            continue;
        VAL(x, k);
        xs[nx++] = x;
    }
    int ax;
    if (!onnx_norm_axis(c, axis, onnx_vnode(c, xs[0])->rank, &ax))
        return false;
    return onnx_set_out(c, n, 0, nx == 1 ? xs[0] : mc_concat(c->g, xs, nx, ax));
}

/* Dimension d (>= 0 for every binding: a symbolic start) as an i32 scalar the program computes
 * when it runs (onnx_dim_value); MC_ERROR with the reason set where it may be negative. */
static mc_value dim_value(ctx *c, int64_t d)
{
    int64_t lo;
    char ds[96];
    if (mc_dim_is_sym(d) ? !mc_dim_lower_bound(c->g, d, &lo) || lo < 0 : d < 0) {
        onnx_why(c, "%s may be negative for some binding of the symbolic dimensions",
                 mc_dim_str(c->g, d, ds, sizeof ds));
        return MC_ERROR;
    }
    mc_value v = onnx_dim_value(c, d);
    if (v == MC_ERROR && !c->why[0])
        onnx_why(c, "%s: %s", mc_dim_str(c->g, d, ds, sizeof ds), mc_error_message());
    return v;
}

/* x[start : start + count] along axis ax, where start is symbolic (a KV cache's past length):
 * a gather of iota + start, so an entry outside the axis fails the run with gather's input error
 * (ONNX would clamp; a symbolic bound is assumed inside, as minic's slices of symbolic axes
 * assume theirs). Bools travel as i32. */
static mc_value gather_range(ctx *c, mc_value x, int ax, int64_t start, int64_t count)
{
    mc_graph *g = c->g;
    if (x < 0) /* a failed builder's result (an earlier axis's slice): its error stands */
        return x;
    mc_value idx = mc_iota(g, &count, 1, 0, MC_I32);
    if (start != 0) {
        mc_value s = dim_value(c, start);
        if (s == MC_ERROR)
            return MC_ERROR;
        idx = mc_add(g, idx, s);
    }
    mc_dtype dt = onnx_vnode(c, x)->dtype;
    mc_value y = mc_gather(g, dt == MC_BOOL ? mc_cast(g, x, MC_I32) : x, idx, ax);
    return dt == MC_BOOL && y >= 0 ? mc_cast(g, y, MC_BOOL) : y;
}

/* b - a for dims (sizes or symbolic), false when the difference cannot be shown >= lo for every
 * binding */
static bool dim_sub(ctx *c, int64_t b, int64_t a, int64_t lo_wanted, int64_t *out)
{
    int64_t na, lo;
    if (a == b) {
        *out = 0;
        return lo_wanted <= 0;
    }
    if (!mc_dim_is_sym(a) && !mc_dim_is_sym(b)) {
        *out = b - a;
        return *out >= lo_wanted;
    }
    if (!mc_dim_is_sym(a))
        return a != INT64_MIN && mc_dim_add_const(c->g, b, -a, out) && mc_dim_lower_bound(c->g, *out, &lo) &&
               lo >= lo_wanted;
    return mc_dim_mul(c->g, a, -1, &na) && mc_dim_add(c->g, b, na, out) &&
           mc_dim_lower_bound(c->g, *out, &lo) && lo >= lo_wanted;
}

/* a + b for dims where either may be the number 0 */
static bool dim_add0(ctx *c, int64_t a, int64_t b, int64_t *out)
{
    if (a == 0 || b == 0) {
        *out = a + b;
        return true;
    }
    return mc_dim_add(c->g, a, b, out);
}

/* Python-style bounds of a step-1 slice over a dimension of size dim */
static void clamp_range(int64_t dim, int64_t *start, int64_t *end)
{
    int64_t s = *start, e = *end;
    if (s < 0)
        s = s < -dim ? 0 : s + dim;
    if (s > dim)
        s = dim;
    if (e < 0)
        e = e < -dim ? 0 : e + dim;
    if (e > dim)
        e = dim;
    *start = s;
    *end = e;
}

/* Split of a symbolic axis: each part a slice whose bounds are fixed numbers from the start or
 * from the end where the sizes before or after it are; else, for equal parts, the axis reshaped
 * to [parts, size] and sliced there; else a gather of the part's range (gather_range). */
static bool split_symbolic(ctx *c, const node_t *n, mc_value x, int ax, int64_t dim, int64_t *sizes, int ns,
                           bool given)
{
    mc_graph *g = c->g;
    const mc_node *xn = onnx_vnode(c, x);
    int rank = xn->rank, nout = (int)n->n_output;
    int64_t xs[MC_MAX_RANK];
    memcpy(xs, xn->shape, sizeof xs);
    char ds[96], ps[96];
    mc_dim_str(g, dim, ds, sizeof ds);
    if (!given) {
        int64_t part;
        if (nout < 1 || !mc_dim_div_exact(g, dim, nout, &part))
            return onnx_why(c, "a split of axis %d of symbolic size %s into %d equal parts (not a multiple of %d "
                               "for every binding)", ax, ds, nout, nout);
        for (int k = 0; k < nout; k++)
            sizes[k] = part;
        ns = nout;
    }
    if (ns != nout)
        return onnx_why(c, "%d split sizes for %d outputs", ns, nout);
    int64_t pre[65], suf[65], lo;
    bool equal = true;
    pre[0] = 0;
    for (int k = 0; k < nout; k++) {
        if (mc_dim_is_sym(sizes[k]) ? !mc_dim_lower_bound(g, sizes[k], &lo) || lo < 1 : sizes[k] < 1)
            return onnx_why(c, "split size %s of axis %d (size %s) may be below 1", mc_dim_str(g, sizes[k], ps, sizeof ps),
                            ax, ds);
        if (!dim_add0(c, pre[k], sizes[k], &pre[k + 1]))
            return onnx_why(c, "split sizes too large for axis %d (size %s)", ax, ds);
        equal &= sizes[k] == sizes[0];
    }
    if (pre[nout] != dim)
        return onnx_why(c, "split sizes add up to %s, not %s (axis %d)", mc_dim_str(g, pre[nout], ps, sizeof ps), ds,
                        ax);
    suf[nout] = 0;
    for (int k = nout - 1; k >= 0; k--)
        if (!dim_add0(c, suf[k + 1], sizes[k], &suf[k]))
            return onnx_why(c, "split sizes too large for axis %d (size %s)", ax, ds);
    bool fixed = true; /* every part's bounds numbers from the start or the end */
    for (int k = 0; k <= nout && fixed; k++)
        fixed = !mc_dim_is_sym(pre[k]) || !mc_dim_is_sym(suf[k]);
    mc_value parts = MC_NONE;
    if (!fixed && equal && nout > 1 && rank < MC_MAX_RANK) {
        int64_t rs[MC_MAX_RANK];
        int r = 0;
        for (int d = 0; d < rank; d++) {
            if (d == ax)
                rs[r++] = nout;
            rs[r++] = d == ax ? sizes[0] : xs[d];
        }
        parts = mc_reshape(g, x, rs, rank + 1);
        xs[ax] = sizes[0];
    }
    for (int k = 0; k < nout; k++) {
        mc_value y;
        if (fixed) {
            int64_t s = !mc_dim_is_sym(pre[k]) ? pre[k] : -suf[k];
            int64_t e = !mc_dim_is_sym(pre[k + 1]) ? pre[k + 1] : suf[k + 1] ? -suf[k + 1] : MC_END;
            y = mc_slice(g, x, ax, s, e);
        } else if (parts != MC_NONE) {
            y = mc_reshape(g, mc_slice(g, parts, ax, k, k + 1), xs, rank);
        } else {
            y = gather_range(c, x, ax, pre[k], sizes[k]);
        }
        if (!onnx_set_out(c, n, (size_t)k, y))
            return false;
    }
    return true;
}

static bool op_split(ctx *c, const node_t *n)
{
    VAL(x, 0);
    const mc_node *xn = onnx_vnode(c, x);
    int ax;
    if (!onnx_norm_axis(c, onnx_attr_i(n, "axis", 0), xn->rank, &ax))
        return false;
    int64_t sizes[64];
    int ns;
    bool given;
    if (n->n_output > 64)
        return onnx_why(c, "%zu outputs (at most 64)", n->n_output);
    if (!onnx_dims_of(c, n, 1, "split", sizes, &ns, 64, &given))
        return false;
    int64_t dim = xn->shape[ax];
    int nout = (int)n->n_output;
    if (mc_dim_is_sym(dim) || onnx_any_sym(ns, sizes))
        return split_symbolic(c, n, x, ax, dim, sizes, ns, given);
    if (!given) {
        if (nout < 1)
            return onnx_why(c, "no outputs");
        int64_t part = (dim + nout - 1) / nout;
        for (int k = 0; k < nout; k++)
            sizes[k] = k < nout - 1 ? part : dim - part * (nout - 1);
        ns = nout;
    }
    if (ns != nout)
        return onnx_why(c, "%d split sizes for %d outputs", ns, nout);
    int64_t start = 0;
    for (int k = 0; k < nout; k++) {
        if (sizes[k] <= 0 || sizes[k] > dim - start)
            return onnx_why(c, "split sizes do not fit axis %d of size %lld", ax, (long long)dim);
        if (!onnx_set_out(c, n, (size_t)k, mc_slice(c->g, x, ax, start, start + sizes[k])))
            return false;
        start += sizes[k];
    }
    if (start != dim)
        return onnx_why(c, "split sizes add up to %lld, not %lld", (long long)start, (long long)dim);
    return true;
}

/* a general strided slice of a constant: per axis start, step, count */
static htensor *fold_slice(ctx *c, const htensor *a, const int64_t *start, const int64_t *step, const int64_t *count)
{
    htensor *z = onnx_new_fold(c, a->elem, a->rank, count);
    if (!z)
        return NULL;
    z->sym = a->sym;
    for (int64_t k = 0; k < z->n; k++) {
        int64_t rem = k, src = 0, stride = 1;
        for (int d = a->rank - 1; d >= 0; d--) {
            int64_t coord = rem % count[d];
            rem /= count[d];
            src += (start[d] + coord * step[d]) * stride;
            stride *= a->dims[d];
        }
        if (z->i)
            z->i[k] = onnx_hi(a, src);
        else
            z->f[k] = onnx_hf(a, src);
    }
    return z;
}

/* Slice where an axis or a bound is symbolic: minic's slice of a symbolic axis takes its bounds
 * from the start (>= 0) or from the end (< 0), step 1, and checks for each binding that they lie
 * inside the axis (no clamping). A symbolic bound is taken where it is the axis's own size (an
 * end at the axis's end: x[:T] of an axis of size T). */
static bool slice_symbolic(ctx *c, const node_t *n, int rank, const int64_t *dims, int ns, const int64_t *starts,
                           const int64_t *ends, const int64_t *axes, const int64_t *steps)
{
    const int64_t far = (int64_t)1 << 40; /* beyond any axis: INT64_MAX, INT_MAX, ... clamp to an end */
    htensor *a = onnx_in_sconst(c, n, 0);
    if (a && a->sym)
        return onnx_why(c, "a slice of symbolic dimensions with bounds that depend on symbolic dimensions");
    VAL(x, 0);
    bool seen[MC_MAX_RANK] = {0};
    for (int k = 0; k < ns; k++) {
        int ax;
        if (!onnx_norm_axis(c, axes ? axes[k] : k, rank, &ax))
            return false;
        if (seen[ax])
            return onnx_why(c, "axis %d sliced twice", ax);
        seen[ax] = true;
        int64_t dim = dims[ax], s = starts[k], e = ends[k];
        char ds[96], bs[96];
        mc_dim_str(c->g, dim, ds, sizeof ds);
        int64_t step = steps ? steps[k] : 1;
        if (step != 1 && (mc_dim_is_sym(dim) || mc_dim_is_sym(e)))
            return onnx_why(c, "a step of %lld over axis %d of size %s with a symbolic size or end (only step 1 there)",
                            (long long)step, ax, ds);
        if (mc_dim_is_sym(s)) {
            /* x[P : e] (a KV cache's past length P): the range as a gather (gather_range) */
            int64_t end = e, count;
            char es[96];
            if (e >= far || (!mc_dim_is_sym(e) && !mc_dim_is_sym(dim) && e > dim))
                end = dim; /* to the end (a static end past a static axis clamps to it) */
            else if (!mc_dim_is_sym(e) && e < 0 && !(e > -far && mc_dim_add_const(c->g, dim, e, &end)))
                end = 0;
            if (step != 1 || end == 0 || !dim_sub(c, end, s, 1, &count))
                return onnx_why(c, "start %s, end %s, step %lld on axis %d of size %s: minic takes a symbolic start "
                                   "with step 1 and an end that lies after it for every binding",
                                mc_dim_str(c->g, s, bs, sizeof bs),
                                e >= far ? "(the end)" : mc_dim_str(c->g, e, es, sizeof es), (long long)step, ax, ds);
            x = gather_range(c, x, ax, s, count);
            if (x < 0)
                return onnx_set_out(c, n, 0, x);
            continue;
        }
        if (mc_dim_is_sym(e) && e != dim && !mc_dim_is_sym(dim)) {
            /* x[s:T] of a static axis (a causal mask cut to the sequence): the rows s .. T - 1 as a
             * gather of an iota, whose indices are checked against the axis when it runs */
            int64_t count, lo;
            if (s < 0 || s >= dim || !mc_dim_add_const(c->g, e, -s, &count) ||
                !mc_dim_lower_bound(c->g, count, &lo) || lo < 1)
                return onnx_why(c, "start %lld, end %s on axis %d of size %s: minic takes a symbolic end over a "
                                   "fixed axis only after a start from 0 to the axis's size, and before it",
                                (long long)s, mc_dim_str(c->g, e, bs, sizeof bs), ax, ds);
            x = gather_range(c, x, ax, s, count);
            if (x < 0)
                return onnx_set_out(c, n, 0, x);
            continue;
        }
        if (mc_dim_is_sym(e)) {
            if (e != dim)
                return onnx_why(c, "end %s on axis %d of size %s: a symbolic end other than the axis's size (minic's "
                                   "slice bounds are fixed)", mc_dim_str(c->g, e, bs, sizeof bs), ax, ds);
            e = far;
        }
        if (!mc_dim_is_sym(dim)) { /* a static axis with static bounds (a symbolic end was its size) */
            if (step == 0)
                return onnx_why(c, "a step of 0");
            int64_t cnt;
            if (step > 0) {
                clamp_range(dim, &s, &e);
                cnt = e > s ? (e - s + step - 1) / step : 0;
            } else { /* Python: negative steps clamp to [-1, dim - 1] */
                s = s < 0 ? (s < -dim ? -1 : s + dim) : (s > dim - 1 ? dim - 1 : s);
                e = e < 0 ? (e < -dim ? -1 : e + dim) : (e > dim - 1 ? dim - 1 : e);
                cnt = s > e ? (s - e + (-step) - 1) / (-step) : 0;
            }
            if (cnt == 0)
                return onnx_why(c, "an empty slice (minic has no zero-size dimensions)");
            if (step != 1) { /* the end one step past the last element kept (before index 0: MC_END) */
                int64_t end = s + cnt * step;
                x = mc_slice_step(c->g, x, ax, s, end < 0 ? MC_END : end > dim ? dim : end, step);
            } else if (cnt != dim) {
                x = mc_slice(c->g, x, ax, s, s + cnt);
            }
            continue;
        }
        if (s <= -far)
            s = 0;
        if (e <= -far || e == 0)
            return onnx_why(c, "an empty slice of axis %d of size %s", ax, ds);
        if (e >= far)
            e = MC_END;
        if (s >= far)
            return onnx_why(c, "a start of %lld on axis %d of size %s", (long long)s, ax, ds);
        if (s != 0 || e != MC_END)
            x = mc_slice(c->g, x, ax, s, e);
    }
    return onnx_set_out(c, n, 0, x);
}

static bool op_slice(ctx *c, const node_t *n)
{
    int elem, rank;
    int64_t dims[MC_MAX_RANK];
    if (!in_type(c, n, 0, &elem, &rank, dims))
        return false;
    int64_t starts[MC_MAX_RANK], ends[MC_MAX_RANK], axes[MC_MAX_RANK], steps[MC_MAX_RANK];
    int ns, ne, na, nst;
    bool gs, ge, ga, gst;
    if (!onnx_dims_of(c, n, 1, "starts", starts, &ns, MC_MAX_RANK, &gs) ||
        !onnx_dims_of(c, n, 2, "ends", ends, &ne, MC_MAX_RANK, &ge) ||
        !onnx_ints_of(c, n, 3, "axes", axes, &na, MC_MAX_RANK, &ga) ||
        !onnx_ints_of(c, n, 4, "steps", steps, &nst, MC_MAX_RANK, &gst))
        return false;
    if (!gs || !ge || ns != ne || (ga && na != ns) || (gst && nst != ns))
        return onnx_why(c, "starts, ends, axes and steps disagree");
    if (onnx_any_sym(rank, dims) || onnx_any_sym(ns, starts) || onnx_any_sym(ne, ends))
        return slice_symbolic(c, n, rank, dims, ns, starts, ends, ga ? axes : NULL, gst ? steps : NULL);
    int64_t st[MC_MAX_RANK], sp[MC_MAX_RANK], cnt[MC_MAX_RANK];
    bool seen[MC_MAX_RANK] = {0};
    for (int d = 0; d < rank; d++)
        st[d] = 0, sp[d] = 1, cnt[d] = dims[d];
    for (int k = 0; k < ns; k++) {
        int ax;
        if (!onnx_norm_axis(c, ga ? axes[k] : k, rank, &ax))
            return false;
        if (seen[ax])
            return onnx_why(c, "axis %d sliced twice", ax);
        seen[ax] = true;
        int64_t step = gst ? steps[k] : 1, dim = dims[ax], s = starts[k], e = ends[k];
        if (step == 0)
            return onnx_why(c, "a step of 0");
        if (step > 0) {
            clamp_range(dim, &s, &e);
            cnt[ax] = e > s ? (e - s + step - 1) / step : 0;
        } else {
            /* Python: negative steps clamp to [-1, dim - 1] */
            s = s < 0 ? (s < -dim ? -1 : s + dim) : (s > dim - 1 ? dim - 1 : s);
            e = e < 0 ? (e < -dim ? -1 : e + dim) : (e > dim - 1 ? dim - 1 : e);
            cnt[ax] = s > e ? (s - e + (-step) - 1) / (-step) : 0;
        }
        st[ax] = s;
        sp[ax] = step;
    }
    htensor *a = onnx_in_sconst(c, n, 0);
    if (a && a->n <= MAX_FOLD_ELEMS)
        return onnx_set_const(c, n, 0, fold_slice(c, a, st, sp, cnt));
    VAL(x, 0);
    for (int d = 0; d < rank; d++) {
        if (cnt[d] == 0)
            return onnx_why(c, "an empty slice (minic has no zero-size dimensions)");
        if (sp[d] != 1) { /* the end one step past the last element kept (before index 0: MC_END) */
            int64_t end = st[d] + cnt[d] * sp[d];
            x = mc_slice_step(c->g, x, d, st[d], end < 0 ? MC_END : end > dims[d] ? dims[d] : end, sp[d]);
        } else if (cnt[d] != dims[d])
            x = mc_slice(c->g, x, d, st[d], st[d] + cnt[d]);
    }
    return onnx_set_out(c, n, 0, x);
}

static bool op_expand(ctx *c, const node_t *n)
{
    int elem, rank;
    int64_t dims[MC_MAX_RANK], spec[MC_MAX_RANK], out[MC_MAX_RANK];
    if (!in_type(c, n, 0, &elem, &rank, dims))
        return false;
    int ns;
    bool given;
    if (!onnx_dims_of(c, n, 1, "shape", spec, &ns, MC_MAX_RANK, &given))
        return false;
    int r;
    if (!onnx_broadcast(c, rank, dims, ns, spec, &r, out))
        return false;
    htensor *a = onnx_in_const(c, n, 0);
    if (a && !onnx_any_sym(r, out) && onnx_numel(r, out) <= 4096) {
        htensor *z = onnx_new_fold(c, a->elem, r, out);
        if (!z)
            return false;
        for (int64_t k = 0; k < z->n; k++) {
            if (z->i)
                z->i[k] = onnx_hi(a, onnx_bidx(a, r, out, k));
            else
                z->f[k] = onnx_hf(a, onnx_bidx(a, r, out, k));
        }
        return onnx_set_const(c, n, 0, z);
    }
    VAL(x, 0);
    if (r == rank && !memcmp(out, dims, (size_t)r * sizeof *out))
        return onnx_set_out(c, n, 0, x);
    return onnx_set_out(c, n, 0, mc_expand(c->g, x, out, r));
}

static bool op_tile(ctx *c, const node_t *n)
{
    VAL(x, 0);
    int64_t reps[MC_MAX_RANK];
    int nr;
    bool given;
    if (!onnx_ints_of(c, n, 1, "repeats", reps, &nr, MC_MAX_RANK, &given))
        return false;
    if (nr != onnx_vnode(c, x)->rank)
        return onnx_why(c, "%d repeats for rank %d", nr, onnx_vnode(c, x)->rank);
    for (int d = 0; d < nr; d++) {
        if (reps[d] < 1 || reps[d] > 256)
            return onnx_why(c, "repeat count %lld (1..256 supported)", (long long)reps[d]);
        if (reps[d] > 1) {
            mc_value xs[256];
            for (int k = 0; k < reps[d]; k++)
                xs[k] = x;
            x = mc_concat(c->g, xs, (int)reps[d], d);
        }
    }
    return onnx_set_out(c, n, 0, x);
}

/* Gather through minic's gather: indices known only at run time, or too many constant ones to
 * become slices. INT64 indices are i32 already (narrowed with the importer's range check); an
 * index outside [-n, n) fails the run with gather's input error. Bools travel as i32. */
static bool gather_values(ctx *c, const node_t *n, int ax)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    VAL(idx, 1);
    const mc_node *xn = onnx_vnode(c, x), *in = onnx_vnode(c, idx);
    int r = xn->rank - 1 + in->rank;
    mc_dtype d = xn->dtype, id = in->dtype;
    if (r > MC_MAX_RANK)
        return onnx_why(c, "a result of rank %d", r);
    if (id != MC_I32)
        idx = mc_cast(g, idx, MC_I32);
    if (d == MC_BOOL)
        x = mc_cast(g, x, MC_I32);
    mc_value y = mc_gather(g, x, idx, ax);
    return onnx_set_out(c, n, 0, d == MC_BOOL && y >= 0 ? mc_cast(g, y, MC_BOOL) : y);
}

static bool op_gather(ctx *c, const node_t *n)
{
    int elem, rank;
    int64_t dims[MC_MAX_RANK];
    if (!in_type(c, n, 0, &elem, &rank, dims))
        return false;
    if (rank == 0)
        return onnx_why(c, "a scalar data operand");
    htensor *idx = onnx_in_const(c, n, 1);
    int ax;
    if (!onnx_norm_axis(c, onnx_attr_i(n, "axis", 0), rank, &ax))
        return false;
    if (!idx)
        return gather_values(c, n, ax);
    int r = rank - 1 + idx->rank;
    if (r > MC_MAX_RANK)
        return onnx_why(c, "a result of rank %d", r);
    int64_t out[MC_MAX_RANK];
    int o = 0;
    for (int d = 0; d < ax; d++)
        out[o++] = dims[d];
    for (int d = 0; d < idx->rank; d++)
        out[o++] = idx->dims[d];
    for (int d = ax + 1; d < rank; d++)
        out[o++] = dims[d];
    bool sym_axis = mc_dim_is_sym(dims[ax]); /* indices checked for each binding, by the slices */
    for (int64_t k = 0; k < idx->n && !sym_axis; k++) {
        int64_t i = onnx_hi(idx, k);
        if (i < -dims[ax] || i >= dims[ax])
            return onnx_why(c, "index %lld out of range for axis %d of size %lld", (long long)i, ax, (long long)dims[ax]);
    }
    htensor *a = onnx_in_sconst(c, n, 0);
    if (a && onnx_numel(r, out) <= MAX_FOLD_ELEMS) {
        htensor *z = onnx_new_fold(c, a->elem, r, out);
        if (!z)
            return false;
        z->sym = a->sym;
        int64_t outer = onnx_numel(ax, dims), inner = onnx_numel(rank - ax - 1, dims + ax + 1), pos = 0;
        for (int64_t p = 0; p < outer; p++)
            for (int64_t k = 0; k < idx->n; k++) {
                int64_t i = onnx_hi(idx, k);
                if (i < 0)
                    i += dims[ax];
                for (int64_t e = 0; e < inner; e++, pos++) {
                    int64_t src = (p * dims[ax] + i) * inner + e;
                    if (z->i)
                        z->i[pos] = onnx_hi(a, src);
                    else
                        z->f[pos] = onnx_hf(a, src);
                }
            }
        return onnx_set_const(c, n, 0, z);
    }
    if (idx->n > 256)
        return gather_values(c, n, ax);
    VAL(x, 0);
    mc_value parts[256];
    for (int64_t k = 0; k < idx->n; k++) {
        int64_t i = onnx_hi(idx, k);
        if (sym_axis) /* from the start, or from the end (-1: the last) */
            parts[k] = mc_slice(c->g, x, ax, i, i == -1 ? MC_END : i + 1);
        else
            parts[k] = mc_slice(c->g, x, ax, i < 0 ? i + dims[ax] : i, (i < 0 ? i + dims[ax] : i) + 1);
    }
    mc_value y = idx->n == 1 ? parts[0] : mc_concat(c->g, parts, (int)idx->n, ax);
    if (y < 0)
        return onnx_set_out(c, n, 0, y);
    return onnx_set_out(c, n, 0, mc_reshape(c->g, y, out, r));
}

/* ---- constants and shapes ------------------------------------------------------------------- */

static htensor *ints_tensor(ctx *c, const int64_t *v, int64_t count, bool scalar)
{
    int64_t dims[1] = {count};
    htensor *t = onnx_new_fold(c, T_INT64, scalar ? 0 : 1, dims);
    if (t)
        for (int64_t k = 0; k < count; k++)
            t->i[k] = v[k];
    return t;
}

static bool op_shape(ctx *c, const node_t *n)
{
    int elem, rank;
    int64_t dims[MC_MAX_RANK];
    if (!in_type(c, n, 0, &elem, &rank, dims))
        return false;
    htensor *t;
    if (!strcmp(n->op_type, "Size")) {
        int64_t total;
        if (!sym_numel(c, rank, dims, &total))
            return false;
        t = ints_tensor(c, &total, 1, true);
    } else {
        int64_t s = onnx_attr_i(n, "start", 0), e = onnx_attr_i(n, "end", rank);
        clamp_range(rank, &s, &e);
        t = ints_tensor(c, dims + s, e > s ? e - s : 0, false);
    }
    if (t) /* an input's dim_params: the shape's values are symbolic dimensions */
        t->sym = onnx_any_sym((int)t->n, t->i);
    return onnx_set_const(c, n, 0, t);
}

static bool op_constant(ctx *c, const node_t *n)
{
    const attr_t *a;
    if ((a = onnx_attr(n, "value")) && a->t)
        return onnx_set_const(c, n, 0, onnx_load_tensor(c, a->t, false));
    if ((a = onnx_attr(n, "value_float")) && a->has_f) {
        htensor *t = onnx_new_fold(c, T_FLOAT, 0, NULL);
        if (t)
            t->f[0] = a->f;
        return onnx_set_const(c, n, 0, t);
    }
    if ((a = onnx_attr(n, "value_floats"))) {
        int64_t d[1] = {(int64_t)a->n_floats};
        htensor *t = onnx_new_fold(c, T_FLOAT, 1, d);
        if (t)
            for (size_t k = 0; k < a->n_floats; k++)
                t->f[k] = a->floats[k];
        return onnx_set_const(c, n, 0, t);
    }
    if ((a = onnx_attr(n, "value_int")) && a->has_i)
        return onnx_set_const(c, n, 0, ints_tensor(c, &a->i, 1, true));
    if ((a = onnx_attr(n, "value_ints")))
        return onnx_set_const(c, n, 0, ints_tensor(c, a->ints, (int64_t)a->n_ints, false));
    return onnx_why(c, "a constant that is not a tensor, float(s) or int(s) (sparse or string)");
}

static bool op_constant_of_shape(ctx *c, const node_t *n)
{
    int64_t dims[MC_MAX_RANK];
    int r;
    bool given;
    if (!onnx_dims_of(c, n, 0, "shape", dims, &r, MC_MAX_RANK, &given))
        return false;
    bool sym = onnx_any_sym(r, dims); /* a symbolic shape: minic's full, sized when it runs */
    const attr_t *a = onnx_attr(n, "value");
    htensor *v = a && a->t ? onnx_load_tensor(c, a->t, false) : NULL;
    if (a && !v)
        return false;
    if (v && v->n != 1)
        return onnx_why(c, "a value of %lld elements (expected 1)", (long long)v->n);
    int elem = v ? v->elem : T_FLOAT;
    double x = v ? onnx_hf(v, 0) : 0;
    for (int d = 0; d < r; d++)
        if (dims[d] < 0 && !mc_dim_is_sym(dims[d]))
            return onnx_why(c, "shape entry %lld", (long long)dims[d]);
    if (!sym && onnx_numel(r, dims) <= 4096) {
        htensor *t = onnx_new_fold(c, elem, r, dims);
        if (!t)
            return false;
        for (int64_t k = 0; k < t->n; k++) {
            if (t->i)
                t->i[k] = v ? onnx_hi(v, 0) : 0;
            else
                t->f[k] = x;
        }
        return onnx_set_const(c, n, 0, t);
    }
    mc_dtype d;
    if (!onnx_map_dtype(c, elem, &d))
        return false;
    return onnx_set_out(c, n, 0, mc_full(c->g, dims, r, x, d));
}

/* Range(start, limit, 1) where limit is a symbolic dimension (torch.arange(T)): an iota of
 * limit - start elements, computed when the program runs. */
static bool range_symbolic(ctx *c, const node_t *n, const htensor *s, const htensor *l, const htensor *d)
{
    char ls[96];
    if (!l->sym || !mc_dim_is_sym(l->i[0]) || is_symv(s, 0) || is_symv(d, 0) || onnx_hi(d, 0) != 1)
        return onnx_why(c, "a range whose start or delta is symbolic, or whose delta is not 1, over a symbolic limit");
    int64_t start = onnx_hi(s, 0), count;
    if (start == INT64_MIN || !mc_dim_add_const(c->g, l->i[0], -start, &count))
        return onnx_why(c, "a range from %lld to %s: its length is no dimension", (long long)start,
                        mc_dim_str(c->g, l->i[0], ls, sizeof ls));
    int64_t lo;
    if (mc_dim_is_sym(count) && (!mc_dim_lower_bound(c->g, count, &lo) || lo < 1))
        return onnx_why(c, "a range from %lld to %s may be empty for some binding", (long long)start,
                        mc_dim_str(c->g, l->i[0], ls, sizeof ls));
    mc_dtype dt;
    if (!onnx_map_dtype(c, s->elem, &dt))
        return false;
    if (dt != MC_I32)
        return onnx_why(c, "a range of %s over a symbolic limit (integers only)", onnx_elem_name(s->elem));
    if (start < INT32_MIN || start > INT32_MAX)
        return onnx_why(c, "a range start %lld outside i32", (long long)start);
    mc_value y = mc_iota(c->g, &count, 1, 0, MC_I32);
    if (start != 0 && y >= 0)
        y = mc_add(c->g, y, mc_scalar(c->g, (double)start, MC_I32));
    return onnx_set_out(c, n, 0, y);
}

static bool op_range(ctx *c, const node_t *n)
{
    htensor *ss = onnx_in_sconst(c, n, 0), *sl = onnx_in_sconst(c, n, 1), *sd = onnx_in_sconst(c, n, 2);
    if (ss && sl && sd && ss->n == 1 && sl->n == 1 && sd->n == 1 && (ss->sym || sl->sym || sd->sym))
        return range_symbolic(c, n, ss, sl, sd);
    htensor *s = onnx_in_const(c, n, 0), *l = onnx_in_const(c, n, 1), *d = onnx_in_const(c, n, 2);
    if (!s || !l || !d || s->n != 1 || l->n != 1 || d->n != 1)
        return onnx_why(c, "start, limit and delta must be scalar constants");
    double start = onnx_hf(s, 0), limit = onnx_hf(l, 0), delta = onnx_hf(d, 0);
    if (delta == 0 || !isfinite(start) || !isfinite(limit) || !isfinite(delta))
        return onnx_why(c, "a range with delta 0 or a non-finite bound");
    double cnt = ceil((limit - start) / delta);
    if (cnt < 0)
        cnt = 0;
    if (cnt > MAX_FOLD_ELEMS)
        return onnx_why(c, "a range of %.0f elements", cnt);
    int64_t dims[1] = {(int64_t)cnt};
    htensor *t = onnx_new_fold(c, s->elem, 1, dims);
    if (!t)
        return false;
    for (int64_t k = 0; k < t->n; k++) {
        if (t->i)
            t->i[k] = (int64_t)((uint64_t)onnx_hi(s, 0) + (uint64_t)k * (uint64_t)onnx_hi(d, 0));
        else
            t->f[k] = start + (double)k * delta;
    }
    return onnx_set_const(c, n, 0, t);
}

static bool op_cast(ctx *c, const node_t *n)
{
    int to = (int)onnx_attr_i(n, "to", 0);
    htensor *sa = onnx_in_sconst(c, n, 0);
    /* symbolic dimensions stay integers; cast to another type, they become a tensor that the
     * run computes from the bound sizes (onnx_as_value), cast like any other */
    if (sa && sa->sym && onnx_elem_is_int(to) && to != T_BOOL && to != T_UINT8 && to != T_INT8 &&
        to != T_UINT16 && to != T_INT16) {
        htensor *z = onnx_fold_copy(c, sa, to, sa->rank, sa->dims);
        if (z)
            z->sym = true;
        return onnx_set_const(c, n, 0, z);
    }
    htensor *a = onnx_in_const(c, n, 0);
    if (a && a->n <= MAX_FOLD_ELEMS && (onnx_elem_is_int(to) || onnx_elem_is_float(to))) {
        htensor *z = onnx_new_fold(c, to, a->rank, a->dims);
        if (!z)
            return false;
        for (int64_t k = 0; k < z->n; k++) {
            double x = onnx_hf(a, k);
            if (to == T_BOOL)
                z->i[k] = x != 0;
            else if (z->i)
                z->i[k] = onnx_elem_is_int(a->elem) ? onnx_hi(a, k) : (isnan(x) ? 0 : onnx_hi(a, k));
            else if (to == T_FLOAT)
                z->f[k] = mc_f32_from_double(x);
            else if (to == T_FLOAT16)
                z->f[k] = mc_round_to_dtype(x, MC_F16);
            else if (to == T_BFLOAT16)
                z->f[k] = mc_round_to_dtype(x, MC_BF16);
            else
                z->f[k] = x;
        }
        return onnx_set_const(c, n, 0, z);
    }
    mc_dtype d;
    if (!onnx_map_dtype(c, to, &d))
        return false;
    VAL(x, 0);
    if (onnx_vnode(c, x)->dtype == d)
        return onnx_set_out(c, n, 0, x);
    return onnx_set_out(c, n, 0, mc_cast(c->g, x, d));
}

static bool op_reduce(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    const char *op = n->op_type;
    VAL(x, 0);
    int rank = onnx_vnode(c, x)->rank;
    int64_t axes64[MC_MAX_RANK];
    int na;
    bool given;
    if (!strncmp(op, "Global", 6)) {
        if (rank < 3)
            return onnx_why(c, "an input of rank %d (expected N, C, spatial..)", rank);
        na = rank - 2;
        for (int d = 0; d < na; d++)
            axes64[d] = d + 2;
        given = true;
    } else if (!onnx_ints_of(c, n, 1, "axes", axes64, &na, MC_MAX_RANK, &given)) {
        return false;
    }
    bool keep = onnx_attr_i(n, "keepdims", 1) != 0 || !strncmp(op, "Global", 6);
    if (given && na == 0)
        given = false;
    if (!given && onnx_attr_i(n, "noop_with_empty_axes", 0))
        return onnx_set_out(c, n, 0, x);
    int axes[MC_MAX_RANK];
    for (int k = 0; k < na; k++)
        if (!onnx_norm_axis(c, axes64[k], rank, &axes[k]))
            return false;
    const int *ax = given ? axes : NULL;
    int nax = given ? na : 0;
    if (rank == 0)
        return onnx_set_out(c, n, 0, x);
    mc_value y;
    if (!strcmp(op, "ReduceSum"))
        y = mc_sum(g, x, ax, nax, keep);
    else if (!strcmp(op, "ReduceMean") || !strcmp(op, "GlobalAveragePool"))
        y = mc_mean(g, x, ax, nax, keep);
    else if (!strcmp(op, "ReduceMax") || !strcmp(op, "GlobalMaxPool"))
        y = mc_max(g, x, ax, nax, keep);
    else if (!strcmp(op, "ReduceMin"))
        y = mc_min(g, x, ax, nax, keep);
    else if (!strcmp(op, "ReduceSumSquare"))
        y = mc_sum(g, mc_mul(g, x, x), ax, nax, keep);
    else if (!strcmp(op, "ReduceL1"))
        y = mc_sum(g, mc_abs(g, x), ax, nax, keep);
    else if (!strcmp(op, "ReduceL2"))
        y = mc_sqrt(g, mc_sum(g, mc_mul(g, x, x), ax, nax, keep));
    else if (!strcmp(op, "ReduceLogSum"))
        y = mc_log(g, mc_sum(g, x, ax, nax, keep));
    else if (!strcmp(op, "ReduceLogSumExp"))
        y = mc_log(g, mc_sum(g, mc_exp(g, x), ax, nax, keep));
    else
        return onnx_why(c, "internal: no reduction");
    return onnx_set_out(c, n, 0, y);
}

static bool op_clip(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    mc_value lo = MC_NONE, hi_ = MC_NONE;
    if (c->opset < 11) {
        const attr_t *a = onnx_attr(n, "min"), *b = onnx_attr(n, "max");
        if (a && a->has_f)
            lo = onnx_fscalar(c, x, a->f);
        if (b && b->has_f)
            hi_ = onnx_fscalar(c, x, b->f);
    } else {
        if (onnx_has_in(n, 1) && (lo = onnx_in_value(c, n, 1)) < 0)
            return false;
        if (onnx_has_in(n, 2) && (hi_ = onnx_in_value(c, n, 2)) < 0)
            return false;
    }
    mc_value y = x;
    if (lo != MC_NONE)
        y = mc_maximum(g, y, lo);
    if (hi_ != MC_NONE)
        y = mc_minimum(g, y, hi_);
    return onnx_set_out(c, n, 0, y);
}

static bool op_trilu(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    const mc_node *xn = onnx_vnode(c, x);
    if (xn->rank < 2)
        return onnx_why(c, "an input of rank %d", xn->rank);
    int64_t k = 0;
    if (onnx_has_in(n, 1)) {
        htensor *t = onnx_in_const(c, n, 1);
        if (!t || t->n != 1)
            return onnx_why(c, "k must be a scalar constant");
        k = onnx_hi(t, 0);
    }
    int64_t s[2] = {xn->shape[xn->rank - 2], xn->shape[xn->rank - 1]};
    /* col - row lies in (-rows, cols): a k beyond keeps all or nothing, as the bound does (an
     * i32 one where a size is symbolic: iotas of i32 count below 2^31) */
    int64_t lim = mc_dim_is_sym(s[0]) || mc_dim_is_sym(s[1]) ? INT32_MAX : s[0] + s[1];
    if (k < -lim || k > lim)
        k = k < 0 ? -lim : lim;
    mc_value row = mc_iota(g, s, 2, 0, MC_I32), col = mc_iota(g, s, 2, 1, MC_I32);
    mc_value diff = mc_sub(g, col, row), kk = mc_scalar(g, (double)k, MC_I32);
    mc_value keep = onnx_attr_i(n, "upper", 1) ? mc_ge(g, diff, kk) : mc_le(g, diff, kk);
    return onnx_set_out(c, n, 0, mc_where(c->g, keep, x, mc_scalar(g, 0, xn->dtype)));
}

static bool op_cast_like(ctx *c, const node_t *n)
{
    int elem, rank;
    int64_t dims[MC_MAX_RANK];
    if (!in_type(c, n, 1, &elem, &rank, dims))
        return false;
    mc_dtype d;
    if (!onnx_map_dtype(c, elem, &d))
        return false;
    VAL(x, 0);
    return onnx_set_out(c, n, 0, onnx_vnode(c, x)->dtype == d ? x : mc_cast(c->g, x, d));
}

static bool op_eye_like(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    int elem, rank;
    int64_t dims[MC_MAX_RANK];
    if (!in_type(c, n, 0, &elem, &rank, dims))
        return false;
    if (rank != 2)
        return onnx_why(c, "an input of rank %d (expected 2)", rank);
    mc_dtype d;
    if (!onnx_map_dtype(c, (int)onnx_attr_i(n, "dtype", elem), &d))
        return false;
    int64_t k = onnx_attr_i(n, "k", 0);
    if (k < -dims[0] - dims[1] || k > dims[0] + dims[1])
        k = k < 0 ? -dims[0] - dims[1] : dims[0] + dims[1];
    mc_value diff = mc_sub(g, mc_iota(g, dims, 2, 1, MC_I32), mc_iota(g, dims, 2, 0, MC_I32));
    return onnx_set_out(c, n, 0, mc_cast(g, mc_eq(g, diff, mc_scalar(g, (double)k, MC_I32)), d));
}

static bool op_depth_space(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    const mc_node *xn = onnx_vnode(c, x);
    if (xn->rank != 4)
        return onnx_why(c, "an input of rank %d (expected 4)", xn->rank);
    int64_t b = onnx_attr_i(n, "blocksize", 0), N = xn->shape[0], C = xn->shape[1], H = xn->shape[2], W = xn->shape[3];
    if (b < 1 || b > 1024)
        return onnx_why(c, "blocksize %lld", (long long)b);
    if (!strcmp(n->op_type, "SpaceToDepth")) {
        if (H % b || W % b)
            return onnx_why(c, "height and width not multiples of the block size");
        int64_t s1[6] = {N, C, H / b, b, W / b, b}, s2[4] = {N, C * b * b, H / b, W / b};
        int perm[6] = {0, 3, 5, 1, 2, 4};
        return onnx_set_out(c, n, 0, mc_reshape(g, mc_transpose(g, mc_reshape(g, x, s1, 6), perm, 6), s2, 4));
    }
    if (C % (b * b))
        return onnx_why(c, "channels not a multiple of blocksize^2");
    bool crd = onnx_attr_is(n, "mode", "DCR", "CRD");
    int64_t s1d[6] = {N, b, b, C / (b * b), H, W}, s1c[6] = {N, C / (b * b), b, b, H, W};
    int pd[6] = {0, 3, 4, 1, 5, 2}, pc[6] = {0, 1, 4, 2, 5, 3};
    int64_t s2[4] = {N, C / (b * b), H * b, W * b};
    return onnx_set_out(c, n, 0, mc_reshape(g, mc_transpose(g, mc_reshape(g, x, crd ? s1c : s1d, 6), crd ? pc : pd, 6), s2, 4));
}

/* Mod of integer constants where some values are symbolic dimensions (a size rounded to a
 * multiple): x mod y (y > 0) is the r in [0, y) for which x - r is y times a polynomial with
 * integer coefficients, the same for every binding (x's value at every symbol 1 gives r).
 * Symbolic values are >= 0 (sym_binop), so fmod gives the same. false where some element's
 * remainder depends on the binding (or its divisor is symbolic or not positive): the caller
 * computes it at run time then, from the bound sizes (onnx_as_value); false with the reason
 * set for a remainder by 0. */
static bool mod_symbolic(ctx *c, const node_t *n, const htensor *a, const htensor *b)
{
    mc_graph *g = c->g;
    int r;
    int64_t shape[MC_MAX_RANK], ones[MC_MAX_SYMS];
    for (int k = 0; k < MC_MAX_SYMS; k++)
        ones[k] = 1;
    if (!onnx_broadcast(c, a->rank, a->dims, b->rank, b->dims, &r, shape))
        return false;
    if (onnx_numel(r, shape) > 4096) /* shapes, not data */
        return false;
    bool fmod = onnx_attr_i(n, "fmod", 0) != 0;
    int64_t z[4096];
    for (int64_t k = 0; k < onnx_numel(r, shape); k++) {
        int64_t ia = onnx_bidx(a, r, shape, k), ib = onnx_bidx(b, r, shape, k);
        int64_t x = a->i[ia], y = b->i[ib], v, d, q;
        if (is_symv(b, ib) || (!is_symv(a, ia) && mc_dim_is_sym(x)) || (!is_symv(b, ib) && mc_dim_is_sym(y)))
            return false;
        if (!is_symv(a, ia)) { /* two numbers */
            if (y == 0 || (x == INT64_MIN && y == -1))
                return onnx_why(c, "%lld mod %lld", (long long)x, (long long)y);
            z[k] = x % y;
            if (!fmod && z[k] != 0 && (z[k] < 0) != (y < 0))
                z[k] += y;
        } else {
            if (y < 1 || y > ((int64_t)1 << 40) || !mc_dim_eval(g, x, ones, &v))
                return false; /* (a divisor that large: no overflow in v % y + y below) */
            z[k] = (v % y + y) % y;
            if (!mc_dim_add_const(g, x, -z[k], &d) || !mc_dim_div_exact(g, d, y, &q))
                return false;
        }
    }
    htensor *t = onnx_new_fold(c, a->elem, r, shape);
    if (!t)
        return false;
    memcpy(t->i, z, sizeof *z * (size_t)t->n);
    return onnx_set_const(c, n, 0, t);
}

/* floor(x) until minic has one: t = trunc(x) through i32, minus one where that rounded up. Exact:
 * a float of magnitude 2^23 or more (and inf, NaN) is already an integer and is kept. */
static bool op_mod(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    htensor *a = onnx_in_sconst(c, n, 0), *b = onnx_in_sconst(c, n, 1);
    if (a && b && (a->sym || b->sym) && a->i && b->i && (mod_symbolic(c, n, a, b) || c->why[0]))
        return !c->why[0];
    VAL(x, 0);
    VAL(y, 1);
    bool fmod = onnx_attr_i(n, "fmod", 0) != 0;
    mc_dtype d = onnx_vnode(c, x)->dtype;
    if (d != MC_I32) {
        if (!fmod)
            return onnx_why(c, "a float Mod needs fmod=1");
        /* x - trunc(x / y) * y, trunc(q) = ceil(q) below zero, floor(q) above */
        mc_value q = mc_div(g, x, y);
        mc_value tq = mc_where(g, mc_lt(g, q, onnx_fscalar(c, x, 0)), mc_ceil(g, q), mc_floor(g, q));
        return onnx_set_out(c, n, 0, mc_sub(g, x, mc_mul(g, tq, y)));
    }
    mc_value r = mc_sub(g, x, mc_mul(g, mc_div(g, x, y), y)); /* C's %: the sign of x */
    if (!fmod) {                                               /* Python's: the sign of y */
        mc_value zero = mc_scalar(g, 0, MC_I32);
        mc_value fix = mc_where(g, mc_ne(g, r, zero), mc_ne(g, mc_lt(g, r, zero), mc_lt(g, y, zero)),
                                mc_scalar(g, 0, MC_BOOL));
        r = mc_where(c->g, fix, mc_add(g, r, y), r);
    }
    return onnx_set_out(c, n, 0, r);
}

static bool op_reduce_prod(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    const mc_node *xn = onnx_vnode(c, x);
    int rank = xn->rank;
    int64_t axes64[MC_MAX_RANK], shape[MC_MAX_RANK];
    int na;
    bool given, red[MC_MAX_RANK] = {0};
    if (!onnx_ints_of(c, n, 1, "axes", axes64, &na, MC_MAX_RANK, &given))
        return false;
    if (given && na == 0 && onnx_attr_i(n, "noop_with_empty_axes", 0))
        return onnx_set_out(c, n, 0, x);
    for (int k = 0; k < na; k++) {
        int a;
        if (!onnx_norm_axis(c, axes64[k], rank, &a))
            return false;
        red[a] = true;
    }
    memcpy(shape, xn->shape, sizeof shape);
    int r = 0;
    int64_t out[MC_MAX_RANK];
    for (int d = 0; d < rank; d++) {
        if (na && !red[d]) {
            out[r++] = shape[d];
            continue;
        }
        if (shape[d] > 256)
            return onnx_why(c, "a product over an axis of %lld (up to 256 supported)", (long long)shape[d]);
        mc_value p = mc_slice(g, x, d, 0, 1);
        for (int64_t k = 1; k < shape[d]; k++)
            p = mc_mul(g, p, mc_slice(g, x, d, k, k + 1));
        x = p;
        if (onnx_attr_i(n, "keepdims", 1))
            out[r++] = 1;
    }
    if (x < 0)
        return onnx_set_out(c, n, 0, x);
    return onnx_set_out(c, n, 0, r == rank ? x : mc_reshape(g, x, out, r));
}

static bool op_onehot(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(idx, 0);
    htensor *depth = onnx_in_const(c, n, 1), *values = onnx_in_const(c, n, 2);
    if (!depth || depth->n != 1 || !values || values->n != 2)
        return onnx_why(c, "depth and values must be constants (1 and 2 elements)");
    int64_t dep = onnx_hi(depth, 0);
    if (dep < 1 || dep > INT32_MAX)
        return onnx_why(c, "depth %lld", (long long)dep);
    mc_dtype d;
    if (!onnx_map_dtype(c, values->elem, &d))
        return false;
    const mc_node *in = onnx_vnode(c, idx);
    int r = in->rank + 1, ax;
    if (r > MC_MAX_RANK)
        return onnx_why(c, "a result of rank %d", r);
    if (!onnx_norm_axis(c, onnx_attr_i(n, "axis", -1), r, &ax))
        return false;
    if (in->dtype != MC_I32)
        idx = mc_cast(g, idx, MC_I32);
    mc_value dv = mc_scalar(g, (double)dep, MC_I32);
    idx = mc_where(c->g, mc_lt(g, idx, mc_scalar(g, 0, MC_I32)), mc_add(g, idx, dv), idx);
    int64_t out[MC_MAX_RANK], us[MC_MAX_RANK];
    for (int k = 0, s = 0; k < r; k++) {
        out[k] = k == ax ? dep : in->shape[s];
        us[k] = k == ax ? 1 : in->shape[s];
        if (k != ax)
            s++;
    }
    mc_value hot = mc_eq(g, mc_iota(g, out, r, ax, MC_I32), mc_reshape(g, idx, us, r));
    double off = onnx_hf(values, 0), on = onnx_hf(values, 1);
    return onnx_set_out(c, n, 0, mc_where(c->g, hot, mc_full(g, out, r, on, d), mc_scalar(g, off, d)));
}

/* ArgMax, ArgMin and Hardmax until minic has an argmax: the first (or last) index where x equals
 * its extreme along the axis, as a min (max) reduction over iota. */
/* x reversed along axis: a slice with step -1, or over a symbolic axis of size T (where slices
 * take step 1 only) a gather of the indices -1, -2, .., -T (-1 - iota: from the end) */
static mc_value flip(ctx *c, mc_value x, int axis)
{
    mc_graph *g = c->g;
    if (x < 0) /* a failed builder's result (cumsum's): its error stands */
        return x;
    const mc_node *xn = onnx_vnode(c, x);
    int64_t len = xn->shape[axis];
    if (!mc_dim_is_sym(len))
        return mc_slice_step(g, x, axis, MC_END, MC_END, -1);
    mc_dtype dt = xn->dtype;
    mc_value idx = mc_sub(g, mc_scalar(g, -1, MC_I32), mc_iota(g, &len, 1, 0, MC_I32));
    mc_value y = mc_gather(g, dt == MC_BOOL ? mc_cast(g, x, MC_I32) : x, idx, axis);
    return dt == MC_BOOL && y >= 0 ? mc_cast(g, y, MC_BOOL) : y;
}

/* ArgMax, ArgMin: minic's argmax, argmin (the first index of the extreme; select_last_index:
 * the first of the reversed axis, counted from its end). Hardmax: 1 at argmax, else 0. */
static bool op_argmax(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    bool hard = !strcmp(n->op_type, "Hardmax"), argmin = !strcmp(n->op_type, "ArgMin");
    if (hard && c->opset < 13)
        return onnx_why(c, "Hardmax before opset 13 (the 2-D form)");
    VAL(x, 0);
    const mc_node *xn = onnx_vnode(c, x);
    int rank = xn->rank, ax;
    if (rank == 0)
        return onnx_why(c, "a scalar input");
    if (!onnx_norm_axis(c, onnx_attr_i(n, "axis", hard ? -1 : 0), rank, &ax))
        return false;
    bool last = onnx_attr_i(n, "select_last_index", 0) != 0;
    bool keep = hard || onnx_attr_i(n, "keepdims", 1) != 0;
    int64_t len = xn->shape[ax], top = len - 1;
    char ls[96];
    if (last && mc_dim_is_sym(len) && !mc_dim_add_const(g, len, -1, &top))
        return onnx_why(c, "select_last_index over axis %d of size %s", ax, mc_dim_str(g, len, ls, sizeof ls));
    mc_value src = last ? flip(c, x, ax) : x;
    mc_value idx = argmin ? mc_argmin(g, src, ax, keep) : mc_argmax(g, src, ax, keep);
    if (last) { /* the index from the end: len - 1 - idx (the run computes a symbolic len - 1) */
        mc_value t = onnx_dim_value(c, top);
        if (t < 0) /* a builder's error (len - 1 always has a least value, 0) */
            return onnx_set_out(c, n, 0, t);
        idx = mc_sub(g, t, idx);
    }
    if (!hard)
        return onnx_set_out(c, n, 0, idx);
    mc_value iota = mc_iota(g, xn->shape, rank, ax, MC_I32);
    return onnx_set_out(c, n, 0, mc_cast(g, mc_eq(g, iota, idx), xn->dtype));
}

/* x moved so that `axis` is last (a transpose), and the permutation that moves it back */
mc_value onnx_axis_last(ctx *c, mc_value x, int axis, int *back)
{
    int rank = onnx_vnode(c, x)->rank, perm[MC_MAX_RANK], np = 0;
    for (int k = 0; k < rank; k++)
        if (k != axis)
            perm[np++] = k;
    perm[np++] = axis;
    for (int k = 0; k < rank; k++)
        back[perm[k]] = k;
    return axis == rank - 1 ? x : mc_transpose(c->g, x, perm, rank);
}

/* CumSum: minic's cumsum; exclusive shifts x one place along the axis first (a zero in front,
 * the last element dropped), reverse runs on the reversed axis and reverses the result. */
static bool op_cumsum(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    htensor *at = onnx_in_const(c, n, 1);
    if (!at || at->n != 1)
        return onnx_why(c, "the axis must be a constant");
    const mc_node *xn = onnx_vnode(c, x);
    int rank = xn->rank, ax;
    if (rank == 0)
        return onnx_why(c, "a scalar input");
    if (!onnx_norm_axis(c, onnx_hi(at, 0), rank, &ax))
        return false;
    bool excl = onnx_attr_i(n, "exclusive", 0) != 0, rev = onnx_attr_i(n, "reverse", 0) != 0;
    mc_value y = rev ? flip(c, x, ax) : x;
    if (excl) { /* a zero in front, the last dropped (an end from the end: symbolic axes too) */
        int64_t pads[2 * MC_MAX_RANK] = {0};
        pads[ax] = 1;
        y = mc_slice(g, mc_pad(g, y, pads, 2 * rank, 0), ax, 0, -1);
    }
    y = mc_cumsum(g, y, ax);
    return onnx_set_out(c, n, 0, rev ? flip(c, y, ax) : y);
}

/* GatherElements through minic's gather on the data flattened: each result element's flat
 * position is its own coordinates (iotas) with the index in place of the axis coordinate. An
 * index outside [-len, len) becomes the flat size, so the run fails with gather's input error
 * rather than reading a neighbour. Bools travel as i32. */
static bool gather_elements_flat(ctx *c, const node_t *n, mc_value x, mc_value idx, int ax)
{
    mc_graph *g = c->g;
    const mc_node *xn = onnx_vnode(c, x), *in = onnx_vnode(c, idx);
    int rank = xn->rank;
    int64_t xs[MC_MAX_RANK], is[MC_MAX_RANK], stride[MC_MAX_RANK], total = 1;
    memcpy(xs, xn->shape, sizeof xs);
    memcpy(is, in->shape, sizeof is);
    mc_dtype d = xn->dtype, id = in->dtype;
    for (int k = rank - 1; k >= 0; k--) {
        stride[k] = total;
        total *= xs[k];
    }
    if (id != MC_I32)
        idx = mc_cast(g, idx, MC_I32);
    mc_value len = mc_scalar(g, (double)xs[ax], MC_I32), zero = mc_scalar(g, 0, MC_I32);
    idx = mc_where(g, mc_lt(g, idx, zero), mc_add(g, idx, len), idx);
    mc_value bad = mc_or(g, mc_lt(g, idx, zero), mc_ge(g, idx, len));
    idx = mc_where(g, bad, zero, idx); /* no i32 overflow in the products below */
    mc_value pos = stride[ax] == 1 ? idx : mc_mul(g, idx, mc_scalar(g, (double)stride[ax], MC_I32));
    for (int k = 0; k < rank; k++) {
        if (k == ax || is[k] == 1)
            continue;
        mc_value at = mc_iota(g, is, rank, k, MC_I32);
        pos = mc_add(g, pos, stride[k] == 1 ? at : mc_mul(g, at, mc_scalar(g, (double)stride[k], MC_I32)));
    }
    pos = mc_where(g, bad, mc_scalar(g, (double)total, MC_I32), pos);
    int64_t flat[1] = {total};
    mc_value xf = mc_reshape(g, d == MC_BOOL ? mc_cast(g, x, MC_I32) : x, flat, 1);
    mc_value y = mc_gather(g, xf, pos, 0);
    return onnx_set_out(c, n, 0, d == MC_BOOL && y >= 0 ? mc_cast(g, y, MC_BOOL) : y);
}

/* GatherElements: minic's gather on the flattened data (gather_elements_flat); with symbolic
 * dimensions, a one-hot mask along the axis, summed. */
static bool op_gather_elements(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    VAL(idx, 1);
    const mc_node *xn = onnx_vnode(c, x), *in = onnx_vnode(c, idx);
    int rank = xn->rank, ax, back[MC_MAX_RANK];
    if (in->rank != rank || rank == 0 || rank + 1 > MC_MAX_RANK)
        return onnx_why(c, "indices of rank %d for data of rank %d", in->rank, rank);
    if (!onnx_norm_axis(c, onnx_attr_i(n, "axis", 0), rank, &ax))
        return false;
    bool sym = false;
    int64_t total = 1;
    for (int k = 0; k < rank; k++) {
        sym |= mc_dim_is_sym(xn->shape[k]) || mc_dim_is_sym(in->shape[k]);
        if (!sym && in->shape[k] > xn->shape[k] && k != ax)
            return onnx_why(c, "indices larger than the data at axis %d", k);
        if (!sym)
            total *= xn->shape[k];
    }
    if (!sym && total < INT32_MAX)
        return gather_elements_flat(c, n, x, idx, ax);
    int64_t len = xn->shape[ax];
    mc_dtype d = xn->dtype;
    if (d == MC_BOOL || len > 4096)
        return onnx_why(c, "a one-hot gather of %s over %lld elements (symbolic or more than 2^31 elements)",
                        mc_dtype_name(d), (long long)len);
    int64_t ishape[MC_MAX_RANK];
    memcpy(ishape, in->shape, sizeof ishape);
    for (int k = 0; k < rank; k++) {
        if (k != ax && ishape[k] > xn->shape[k])
            return onnx_why(c, "indices larger than the data at axis %d", k);
        if (k != ax && ishape[k] < xn->shape[k])
            x = mc_slice(g, x, k, 0, ishape[k]);
    }
    /* data: the axis moved last, and a 1 where the indices' axis goes: [.., 1, .., len] */
    mc_value xt = onnx_axis_last(c, x, ax, back);
    int64_t xs[MC_MAX_RANK + 1], hs[MC_MAX_RANK + 1], is[MC_MAX_RANK + 1];
    for (int k = 0; k < rank; k++) {
        xs[k] = k == ax ? 1 : ishape[k];
        hs[k] = ishape[k];
        is[k] = ishape[k];
    }
    xs[rank] = len, hs[rank] = len, is[rank] = 1;
    /* xt is [dims except ax.., len]: reshape to put a 1 at ax */
    xt = mc_reshape(g, xt, xs, rank + 1);
    if (in->dtype != MC_I32)
        idx = mc_cast(g, idx, MC_I32);
    idx = mc_where(c->g, mc_lt(g, idx, mc_scalar(g, 0, MC_I32)), mc_add(g, idx, mc_scalar(g, (double)len, MC_I32)), idx);
    mc_value hot = mc_eq(g, mc_iota(g, hs, rank + 1, rank, MC_I32), mc_reshape(g, idx, is, rank + 1));
    int last[1] = {rank};
    mc_value y;
    if (d == MC_I32)
        y = mc_sum(g, mc_mul(g, xt, mc_cast(g, hot, MC_I32)), last, 1, false);
    else
        y = mc_sum(g, mc_where(g, hot, xt, mc_scalar(g, 0, d)), last, 1, false);
    return onnx_set_out(c, n, 0, y);
}

/* GatherND through minic's gather on the data with its batch axes and its k indexed axes made
 * one, [B * P, rest..]: each index tuple's position there is its batch's number (iotas over the
 * indices' batch axes) times P, plus its coordinates (negative ones counted from the end) times
 * their strides. A coordinate outside [-n, n) makes the position B * P, so the run fails with
 * gather's input error rather than reading a neighbour. Bools travel as i32. */
static bool op_gather_nd(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    VAL(idx, 1);
    const mc_node *xn = onnx_vnode(c, x), *in = onnx_vnode(c, idx);
    int r = xn->rank, q = in->rank;
    int64_t xs[MC_MAX_RANK], is[MC_MAX_RANK];
    memcpy(xs, xn->shape, sizeof xs);
    memcpy(is, in->shape, sizeof is);
    mc_dtype d = xn->dtype;
    if (r < 1 || q < 1)
        return onnx_why(c, "data of rank %d and indices of rank %d (each at least 1)", r, q);
    if (in->dtype != MC_I32)
        return onnx_why(c, "indices of dtype %s", mc_dtype_name(in->dtype));
    int64_t bd = onnx_attr_i(n, "batch_dims", 0), k = is[q - 1];
    if (bd < 0 || bd >= r || bd >= q)
        return onnx_why(c, "batch_dims %lld for data of rank %d and indices of rank %d", (long long)bd, r, q);
    int b = (int)bd;
    if (k < 1 || k > r - b)
        return onnx_why(c, "index tuples of %lld coordinates into data of rank %d with batch_dims %d", (long long)k,
                        r, b);
    int64_t total = 1, batch_stride[MC_MAX_RANK], stride[MC_MAX_RANK];
    for (int a = b + (int)k - 1; a >= 0; a--) {
        if (a < b && is[a] != xs[a])
            return onnx_why(c, "batch axis %d has %lld entries in the indices but %lld in the data", a,
                            (long long)is[a], (long long)xs[a]);
        (a < b ? batch_stride : stride)[a] = total;
        if (mc_mul_overflows(total, xs[a], &total) || total >= INT32_MAX)
            return onnx_why(c, "gathering from more than 2^31 positions");
    }
    int64_t flat[MC_MAX_RANK], pshape[MC_MAX_RANK];
    int fr = 0;
    flat[fr++] = total;
    for (int a = b + (int)k; a < r; a++)
        flat[fr++] = xs[a];
    for (int a = 0; a < q - 1; a++)
        pshape[a] = is[a];
    mc_value zero = mc_scalar(g, 0, MC_I32), pos = MC_NONE, bad = MC_NONE;
    for (int j = 0; j < k; j++) {
        mc_value col = mc_reshape(g, mc_slice(g, idx, q - 1, j, j + 1), pshape, q - 1);
        mc_value len = mc_scalar(g, (double)xs[b + j], MC_I32);
        col = mc_where(g, mc_lt(g, col, zero), mc_add(g, col, len), col);
        mc_value out = mc_or(g, mc_lt(g, col, zero), mc_ge(g, col, len));
        bad = bad == MC_NONE ? out : mc_or(g, bad, out);
        col = mc_where(g, out, zero, col); /* no i32 overflow in the products below */
        if (stride[b + j] != 1)
            col = mc_mul(g, col, mc_scalar(g, (double)stride[b + j], MC_I32));
        pos = pos == MC_NONE ? col : mc_add(g, pos, col);
    }
    for (int a = 0; a < b; a++) {
        if (is[a] == 1)
            continue;
        mc_value at = mc_iota(g, pshape, q - 1, a, MC_I32);
        pos = mc_add(g, pos, mc_mul(g, at, mc_scalar(g, (double)batch_stride[a], MC_I32)));
    }
    pos = mc_where(g, bad, mc_scalar(g, (double)total, MC_I32), pos);
    mc_value xf = mc_reshape(g, d == MC_BOOL ? mc_cast(g, x, MC_I32) : x, flat, fr);
    mc_value y = mc_gather(g, xf, pos, 0);
    return onnx_set_out(c, n, 0, d == MC_BOOL && y >= 0 ? mc_cast(g, y, MC_BOOL) : y);
}

/* BitShift on unsigned values held in i32 (no wrap-around past the type's width) */
static bool op_bitshift(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    VAL(y, 1);
    if (onnx_vnode(c, x)->dtype != MC_I32)
        return onnx_why(c, "a non-integer operand");
    mc_value p2 = mc_cast(g, mc_pow(g, mc_scalar(g, 2, MC_F32), mc_cast(g, y, MC_F32)), MC_I32);
    bool left = onnx_attr_is(n, "direction", "", "LEFT");
    if (!left && !onnx_attr_is(n, "direction", "", "RIGHT"))
        return onnx_why(c, "no direction");
    return onnx_set_out(c, n, 0, left ? mc_mul(g, x, p2) : mc_div(g, x, p2));
}

/* ScatterElements (and Scatter before opset 11) with reduction none or add: the updates summed
 * through a one-hot mask along the axis; positions no index hits keep the data. */
static bool op_scatter_elements(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    VAL(idx, 1);
    VAL(upd, 2);
    const mc_node *xn = onnx_vnode(c, x), *in = onnx_vnode(c, idx), *un = onnx_vnode(c, upd);
    int rank = xn->rank, ax, back[MC_MAX_RANK];
    if (rank == 0 || in->rank != rank || un->rank != rank || rank + 1 > MC_MAX_RANK)
        return onnx_why(c, "indices and updates of another rank than the data");
    if (!onnx_norm_axis(c, onnx_attr_i(n, "axis", 0), rank, &ax))
        return false;
    bool add = onnx_attr_is(n, "reduction", "none", "add");
    if (!add && !onnx_attr_is(n, "reduction", "none", "none"))
        return onnx_why(c, "reduction other than none or add");
    for (int k = 0; k < rank; k++)
        if (in->shape[k] != un->shape[k] || (k != ax && in->shape[k] != xn->shape[k]))
            return onnx_why(c, "indices smaller than the data off the axis");
    int64_t len = xn->shape[ax], ta = in->shape[ax];
    mc_dtype d = xn->dtype;
    if (d == MC_BOOL || len > 4096 || ta > 4096)
        return onnx_why(c, "a scatter of %s over %lld elements", mc_dtype_name(d), (long long)len);
    if (in->dtype != MC_I32)
        idx = mc_cast(g, idx, MC_I32);
    idx = mc_where(c->g, mc_lt(g, idx, mc_scalar(g, 0, MC_I32)), mc_add(g, idx, mc_scalar(g, (double)len, MC_I32)), idx);
    /* [.., ta, 1] against iota [.., ta, len] */
    mc_value it = onnx_axis_last(c, idx, ax, back), ut = onnx_axis_last(c, upd, ax, back);
    int64_t s1[MC_MAX_RANK + 1], s2[MC_MAX_RANK + 1];
    int r = 0;
    for (int k = 0; k < rank; k++)
        if (k != ax)
            s1[r] = s2[r] = in->shape[k], r++;
    s1[r] = s2[r] = ta;
    s1[r + 1] = 1, s2[r + 1] = len;
    mc_value hot = mc_eq(g, mc_iota(g, s2, rank + 1, rank, MC_I32), mc_reshape(g, it, s1, rank + 1));
    mc_value hotv = mc_cast(g, hot, d == MC_I32 ? MC_I32 : d);
    int along[1] = {rank - 1};
    mc_value val = mc_sum(g, mc_mul(g, mc_reshape(g, ut, s1, rank + 1), hotv), along, 1, false);
    mc_value hits = mc_sum(g, mc_cast(g, hot, MC_I32), along, 1, false); /* [.., len] */
    if (ax != rank - 1) {
        val = mc_transpose(g, val, back, rank);
        hits = mc_transpose(g, hits, back, rank);
    }
    if (add)
        val = mc_add(g, val, x);
    return onnx_set_out(c, n, 0, mc_where(c->g, mc_gt(g, hits, mc_scalar(g, 0, MC_I32)), val, x));
}

/* HannWindow, HammingWindow, BlackmanWindow: constants (the size must be known) */
static bool op_window(ctx *c, const node_t *n)
{
    htensor *sz = onnx_in_const(c, n, 0);
    if (!sz || sz->n != 1)
        return onnx_why(c, "the size must be a scalar constant");
    int64_t len = onnx_hi(sz, 0);
    if (len < 1 || len > MAX_FOLD_ELEMS)
        return onnx_why(c, "a window of %lld elements", (long long)len);
    double a0 = 0.5, a1 = 0.5, a2 = 0;
    if (!strcmp(n->op_type, "HammingWindow"))
        a0 = 25.0 / 46, a1 = 21.0 / 46;
    else if (!strcmp(n->op_type, "BlackmanWindow"))
        a0 = 0.42, a1 = 0.5, a2 = 0.08;
    int elem = (int)onnx_attr_i(n, "output_datatype", T_FLOAT);
    if (!onnx_elem_is_float(elem) && !onnx_elem_is_int(elem))
        return onnx_why(c, "output_datatype %s", onnx_elem_name(elem));
    htensor *t = onnx_new_fold(c, elem, 1, &len);
    if (!t)
        return false;
    double N = onnx_attr_i(n, "periodic", 1) ? (double)len : (double)len - 1, pi = 3.14159265358979323846;
    for (int64_t k = 0; k < len; k++) {
        double x = N > 0 ? a0 - a1 * cos(2 * pi * (double)k / N) + a2 * cos(4 * pi * (double)k / N) : a0 - a1 + a2;
        if (t->i)
            t->i[k] = (int64_t)x;
        else
            t->f[k] = elem == T_FLOAT ? mc_f32_from_double(x) : x;
    }
    return onnx_set_const(c, n, 0, t);
}

/* Floor, Ceil, Round (half to even): minic's floor, ceil, round */
static bool op_rounding(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    if (!mc_dtype_is_float(onnx_vnode(c, x)->dtype))
        return onnx_why(c, "a non-float operand");
    const char *op = n->op_type;
    return onnx_set_out(c, n, 0, !strcmp(op, "Floor") ? mc_floor(g, x) : !strcmp(op, "Ceil") ? mc_ceil(g, x) : mc_round(g, x));
}

/* One axis of an edge or reflect Pad: copies of the first/last element, or the elements next
 * to them mirrored (reversed by a slice with step -1), concatenated around x. */
static mc_value pad_axis(ctx *c, mc_value x, int ax, int64_t before, int64_t after, bool edge)
{
    mc_graph *g = c->g;
    const mc_node *xn = onnx_vnode(c, x);
    int64_t L = xn->shape[ax], shape[MC_MAX_RANK];
    memcpy(shape, xn->shape, sizeof shape);
    mc_value parts[3];
    int np = 0;
    if (before > 0) {
        shape[ax] = before;
        parts[np++] = edge ? mc_expand(g, mc_slice(g, x, ax, 0, 1), shape, xn->rank)
                           : mc_slice_step(g, x, ax, before, 0, -1);
    }
    parts[np++] = x;
    if (after > 0) {
        shape[ax] = after;
        parts[np++] = edge ? mc_expand(g, mc_slice(g, x, ax, L - 1, L), shape, xn->rank)
                           : mc_slice_step(g, x, ax, L - 2, L - 2 - after < 0 ? MC_END : L - 2 - after, -1);
    }
    return np == 1 ? x : mc_concat(g, parts, np, ax);
}

/* Pad: constant (minic's pad), edge and reflect (slices and concats); pads, the value and axes
 * as attributes or constant inputs; no negative pads (cropping). */
static bool op_pad(ctx *c, const node_t *n)
{
    bool edge = onnx_attr_is(n, "mode", "constant", "edge"), reflect = onnx_attr_is(n, "mode", "constant", "reflect");
    if (!edge && !reflect && !onnx_attr_is(n, "mode", "constant", "constant"))
        return onnx_why(c, "mode other than constant, edge or reflect");
    VAL(x, 0);
    const mc_node *xn = onnx_vnode(c, x);
    int rank = xn->rank;
    int64_t given_pads[2 * MC_MAX_RANK], axes[MC_MAX_RANK], pads[2 * MC_MAX_RANK] = {0};
    int np = 0, na = rank;
    bool given;
    if (!onnx_ints_of(c, n, 1, "pads", given_pads, &np, 2 * MC_MAX_RANK, &given))
        return false;
    for (int d = 0; d < rank; d++)
        axes[d] = d;
    if (onnx_has_in(n, 3) && !onnx_ints_of(c, n, 3, "axes", axes, &na, MC_MAX_RANK, &given))
        return false;
    if (np != 2 * na)
        return onnx_why(c, "%d pads for %d axes", np, na);
    for (int k = 0; k < na; k++) {
        int ax;
        if (!onnx_norm_axis(c, axes[k], rank, &ax))
            return false;
        pads[ax] = given_pads[k];
        pads[rank + ax] = given_pads[na + k];
    }
    for (int i = 0; i < 2 * rank; i++)
        if (pads[i] < 0)
            return onnx_why(c, "negative pads (cropping)");
    if (edge || reflect) {
        for (int d = 0; d < rank; d++) {
            if (reflect && (pads[d] >= xn->shape[d] || pads[rank + d] >= xn->shape[d]))
                return onnx_why(c, "reflect padding of %lld and %lld on an axis of %lld", (long long)pads[d],
                                (long long)pads[rank + d], (long long)xn->shape[d]);
            if (pads[d] || pads[rank + d])
                x = pad_axis(c, x, d, pads[d], pads[rank + d], edge);
        }
        return onnx_set_out(c, n, 0, x);
    }
    double value = onnx_attr_f(n, "value", 0);
    if (onnx_has_in(n, 2) && !onnx_in_const(c, n, 2)) {
        /* a value known only at run time: zeros padded, then where(inside, x, value) */
        VAL(v, 2);
        const mc_node *vn = onnx_vnode(c, v);
        if (vn->rank > 1 || (vn->rank == 1 && vn->shape[0] != 1))
            return onnx_why(c, "constant_value of more than one element");
        mc_graph *g = c->g;
        mc_value inside = mc_pad(g, mc_full(g, xn->shape, rank, 1, MC_F32), pads, 2 * rank, 0);
        return onnx_set_out(c, n, 0, mc_where(g, mc_ne(g, inside, mc_scalar(g, 0, MC_F32)),
                                              mc_pad(g, x, pads, 2 * rank, 0), v));
    }
    if (onnx_has_in(n, 2)) {
        htensor *v = onnx_in_const(c, n, 2);
        if (v->n != 1)
            return onnx_why(c, "constant_value of %lld elements", (long long)v->n);
        value = onnx_hf(v, 0);
    }
    return onnx_set_out(c, n, 0, mc_pad(c->g, x, pads, 2 * rank, value));
}

/* Compress with its condition known at import time (it decides the output's shape): the kept
 * runs of the axis (of x flattened, without an axis) as slices, concatenated. */
static bool op_compress(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    htensor *cond = onnx_in_const(c, n, 1);
    if (!cond)
        return onnx_why(c, "the condition must be known at import time");
    VAL(x, 0);
    const mc_node *xn = onnx_vnode(c, x);
    int ax = 0;
    if (onnx_attr(n, "axis")) {
        if (!onnx_norm_axis(c, onnx_attr_i(n, "axis", 0), xn->rank, &ax))
            return false;
    } else {
        int64_t total = onnx_numel(xn->rank, xn->shape);
        x = mc_reshape(g, x, &total, 1);
        if (x < 0)
            return onnx_set_out(c, n, 0, x);
    }
    int64_t len = onnx_vnode(c, x)->shape[ax], lim = cond->n < len ? cond->n : len;
    mc_value runs[64];
    int nr = 0;
    for (int64_t k = 0; k < lim;) {
        if (onnx_hf(cond, k) == 0) {
            k++;
            continue;
        }
        int64_t e = k;
        while (e < lim && onnx_hf(cond, e) != 0)
            e++;
        if (nr == 64)
            return onnx_why(c, "a condition of more than 64 runs");
        runs[nr++] = mc_slice(g, x, ax, k, e);
        k = e;
    }
    if (nr == 0)
        return onnx_why(c, "nothing kept (minic has no zero-size dimensions)");
    return onnx_set_out(c, n, 0, nr == 1 ? runs[0] : mc_concat(g, runs, nr, ax));
}

/* ---- the table ---------------------------------------------------------------------------- */

const onnx_op onnx_tensor_ops[] = {
    {"Neg", op_unary}, {"Abs", op_unary}, {"Exp", op_unary}, {"Log", op_unary}, {"Sqrt", op_unary},
    {"Reciprocal", op_unary}, {"Tanh", op_unary}, {"Sigmoid", op_unary}, {"Relu", op_unary},
    {"Erf", op_unary}, {"Sin", op_unary}, {"Cos", op_unary}, {"Add", op_binary}, {"Sub", op_binary},
    {"Mul", op_binary}, {"Div", op_binary}, {"Equal", op_binary}, {"Less", op_binary},
    {"Greater", op_binary}, {"LessOrEqual", op_binary}, {"GreaterOrEqual", op_binary},
    {"Pow", op_pow}, {"Max", op_variadic}, {"Min", op_variadic}, {"Sum", op_variadic},
    {"Mean", op_variadic}, {"And", op_logic}, {"Or", op_logic}, {"Xor", op_logic},
    {"Not", op_logic}, {"Where", op_where}, {"LeakyRelu", op_activation}, {"PRelu", op_activation},
    {"Elu", op_activation}, {"Selu", op_activation}, {"Celu", op_activation},
    {"ThresholdedRelu", op_activation}, {"HardSigmoid", op_activation},
    {"HardSwish", op_activation}, {"Softsign", op_activation}, {"Softplus", op_activation},
    {"Mish", op_activation}, {"Shrink", op_activation}, {"IsNaN", op_activation},
    {"IsInf", op_activation}, {"Reshape", op_reshape}, {"Flatten", op_flatten},
    {"Squeeze", op_squeeze}, {"Unsqueeze", op_unsqueeze}, {"Identity", op_identity},
    {"Dropout", op_identity}, {"Transpose", op_transpose}, {"Concat", op_concat},
    {"Split", op_split}, {"Slice", op_slice}, {"Expand", op_expand}, {"Tile", op_tile},
    {"Gather", op_gather}, {"Shape", op_shape}, {"Size", op_shape}, {"Constant", op_constant},
    {"ConstantOfShape", op_constant_of_shape}, {"Range", op_range}, {"Cast", op_cast},
    {"ReduceSum", op_reduce}, {"ReduceMean", op_reduce}, {"ReduceMax", op_reduce},
    {"ReduceMin", op_reduce}, {"ReduceSumSquare", op_reduce}, {"ReduceL1", op_reduce},
    {"ReduceL2", op_reduce}, {"ReduceLogSum", op_reduce}, {"ReduceLogSumExp", op_reduce},
    {"GlobalAveragePool", op_reduce}, {"GlobalMaxPool", op_reduce}, {"Clip", op_clip},
    {"Trilu", op_trilu}, {"Tan", op_activation}, {"Sinh", op_activation}, {"Cosh", op_activation},
    {"Asinh", op_activation}, {"Acosh", op_activation}, {"Atanh", op_activation},
    {"Sign", op_activation}, {"CastLike", op_cast_like}, {"EyeLike", op_eye_like},
    {"DepthToSpace", op_depth_space}, {"SpaceToDepth", op_depth_space}, {"Mod", op_mod},
    {"ReduceProd", op_reduce_prod}, {"OneHot", op_onehot}, {"ArgMax", op_argmax},
    {"ArgMin", op_argmax}, {"Hardmax", op_argmax}, {"CumSum", op_cumsum},
    {"GatherElements", op_gather_elements}, {"BitShift", op_bitshift},
    {"ScatterElements", op_scatter_elements}, {"Scatter", op_scatter_elements},
    {"HannWindow", op_window}, {"HammingWindow", op_window}, {"BlackmanWindow", op_window},
    {"Floor", op_rounding}, {"Ceil", op_rounding}, {"Round", op_rounding}, {"Pad", op_pad},
    {"Compress", op_compress}, {"GatherND", op_gather_nd},
    {NULL, NULL},
};

#endif /* MINIC_HAVE_ONNX */
