/* Operator conformance, part 1: unary, binary, compare, where, cast, reductions, softmax and
 * the normalizations. Each case is a graph built with the public builders and an expectation
 * computed here by a different route (another formula, explicit loops, values by hand); the
 * harness (tests/ops_conformance.h) checks the oracle against it and every available backend
 * against the oracle. Part 2 (matmul, linear, shape and creation operators, whole graphs) is
 * tests/test_ops_shape.c.
 */
#include "ops_conformance.h"

/* ---- independent scalar references ---------------------------------------------------------- */

static double ref_neg(double x) { return -1.0 * x; }
static double ref_abs(double x) { return x < 0 ? -x : x; }
static double ref_exp(double x) { return pow(M_E, x); }
static double ref_log(double x) { return x > 0 ? log2(x) / M_LOG2E : log(x); }
static double ref_sqrt(double x) { return x > 0 && !isinf(x) ? exp(0.5 * log(x)) : sqrt(x); }
static double ref_rsqrt(double x)
{
    if (isnan(x) || x < 0)
        return NAN;
    return x == 0 ? copysign(INFINITY, x) : pow(x, -0.5);
}
static double ref_recip(double x) { return pow(x, -1.0); }
static double ref_tanh(double x) { return 1.0 - 2.0 / (exp(2.0 * x) + 1.0); }
static double ref_sigmoid(double x) { return 0.5 * (1.0 + ref_tanh(0.5 * x)); }
static double ref_relu(double x) { return isnan(x) ? x : fmax(x, 0.0); }
static double ref_gelu(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }
static double ref_gelu_tanh(double x)
{
    /* 0.5 (1 + tanh(z)) == sigmoid(2z) */
    double z = sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    return x / (1.0 + exp(-2.0 * z));
}
static double ref_silu(double x) { return x / (1.0 + exp(-x)); }
static double ref_sin(double x) { return 2.0 * sin(0.5 * x) * cos(0.5 * x); }
static double ref_cos(double x) { return 1.0 - 2.0 * sin(0.5 * x) * sin(0.5 * x); }
static double ref_erf(double x) { return 1.0 - erfc(x); }

static double ref_add(double a, double b) { return a - -b; }
static double ref_sub(double a, double b) { return a + -b; }
static double ref_mul(double a, double b) { return a * b; }
static double ref_div(double a, double b) { return a / b; }
static double ref_pow(double a, double b) { return exp(b * log(a)); }
static double ref_maximum(double a, double b) { return (a != a || b != b) ? NAN : fmax(a, b); }
static double ref_minimum(double a, double b) { return (a != a || b != b) ? NAN : fmin(a, b); }

/* i32: reduce modulo 2^32 into [-2^31, 2^31) (written apart from the oracle's wrap). */
static double wrap32(int64_t v)
{
    int64_t r = v % 4294967296LL;
    if (r >= 2147483648LL)
        r -= 4294967296LL;
    if (r < -2147483648LL)
        r += 4294967296LL;
    return (double)r;
}
static double ref_add_i32(double a, double b) { return wrap32((int64_t)a + (int64_t)b); }
static double ref_sub_i32(double a, double b) { return wrap32((int64_t)a - (int64_t)b); }
static double ref_mul_i32(double a, double b) { return wrap32((int64_t)a * (int64_t)b); }
static double ref_div_i32(double a, double b) { return b == 0 ? 0 : wrap32((int64_t)trunc(a / b)); }
static double ref_neg_i32(double x) { return wrap32(-(int64_t)x); }
static double ref_abs_i32(double x) { return wrap32(x < 0 ? -(int64_t)x : (int64_t)x); }

/* ---- unary -------------------------------------------------------------------------------- */

static mc_status build_unary(const op_case *c, mc_graph *g)
{
    mc_value x = mc_input(g, "x", c->dtype, SHAPE(3, 5));
    return OUTPUTS(g, c->unary(g, x));
}

static void expect_unary(const op_case *c, double *const *in, double **out)
{
    for (int i = 0; i < 15; i++)
        out[0][i] = c->ref1(in[0][i]);
}

/* Special values: NaN, infinities, signed zeros, domain edges. */
static void prepare_special_unary(const op_case *c, void *const *in)
{
    static const double v[15] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, -1, 1, 0.5,
                                 -0.5, 2, -2, 1e-3, 3, -3, 10};
    for (int i = 0; i < 15; i++)
        mc_store_element(in[0], c->dtype, i, v[i]);
}

static void prepare_i32_edges(const op_case *c, void *const *in)
{
    mc_store_element(in[0], MC_I32, 0, INT32_MIN);
    mc_store_element(in[0], MC_I32, 1, INT32_MAX);
    mc_store_element(in[0], MC_I32, 2, -5);
}

/* ---- binary and compare: a [2,1,4] (op) b [3,1] -> [2,3,4] -------------------------------- */

static mc_status build_binary(const op_case *c, mc_graph *g)
{
    mc_value a = mc_input(g, "a", c->dtype, SHAPE(2, 1, 4));
    mc_value b = mc_input(g, "b", c->dtype, SHAPE(3, 1));
    return OUTPUTS(g, c->binary(g, a, b));
}

static void expect_binary(const op_case *c, double *const *in, double **out)
{
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                out[0][(i * 3 + j) * 4 + k] = c->ref2(in[0][i * 4 + k], in[1][j]);
}

static void prepare_nan_inf(const op_case *c, void *const *in)
{
    mc_store_element(in[0], c->dtype, 0, NAN);
    mc_store_element(in[1], c->dtype, 1, NAN);
    mc_store_element(in[0], c->dtype, 2, INFINITY);
    mc_store_element(in[1], c->dtype, 2, -INFINITY);
}

static void prepare_zero_divisor(const op_case *c, void *const *in)
{
    mc_store_element(in[1], c->dtype, 0, 0.0);  /* a / 0 = +-inf */
    mc_store_element(in[0], c->dtype, 5, 0.0);  /* 0 / 0 = NaN */
}

static void prepare_i32_binary(const op_case *c, void *const *in)
{
    mc_store_element(in[0], MC_I32, 0, -7);
    mc_store_element(in[0], MC_I32, 1, INT32_MIN);
    mc_store_element(in[0], MC_I32, 2, INT32_MAX);
    mc_store_element(in[0], MC_I32, 5, -9);
    mc_store_element(in[1], MC_I32, 0, 0);  /* division by zero: defined as 0 */
    mc_store_element(in[1], MC_I32, 1, -1); /* INT32_MIN / -1 and * -1 wrap */
    mc_store_element(in[1], MC_I32, 2, 2);  /* INT32_MAX * 2 wraps; -7 / 2 == -3 */
}

static void prepare_compare(const op_case *c, void *const *in)
{
    if (c->dtype == MC_BOOL)
        return;
    mc_store_element(in[1], c->dtype, 0, mc_load_element(in[0], c->dtype, 0)); /* equal pairs */
    mc_store_element(in[1], c->dtype, 1, mc_load_element(in[0], c->dtype, 5));
    if (mc_dtype_is_float(c->dtype))
        mc_store_element(in[0], c->dtype, 3, NAN); /* every compare false, ne true */
}

static double cmp_eq(double a, double b) { return !(a < b) && !(a > b) && a == a && b == b; }
static double cmp_ne(double a, double b) { return 1.0 - cmp_eq(a, b); }
static double cmp_lt(double a, double b) { return b > a; }
static double cmp_le(double a, double b) { return b >= a; }
static double cmp_gt(double a, double b) { return b < a; }
static double cmp_ge(double a, double b) { return b <= a; }

/* Broadcasting edge cases, each with its own explicit loops (variant). */
static mc_status build_broadcast(const op_case *c, mc_graph *g)
{
    mc_value a, b;
    switch (c->variant) {
    case 0: /* both operands broadcast, same rank */
        a = mc_input(g, "a", MC_F32, SHAPE(2, 1, 3));
        b = mc_input(g, "b", MC_F32, SHAPE(1, 4, 1));
        break;
    case 1: /* the lower-rank operand on the left */
        a = mc_input(g, "a", MC_F32, SHAPE(3));
        b = mc_input(g, "b", MC_F32, SHAPE(2, 3));
        break;
    case 2: /* a rank-0 input */
        a = mc_input(g, "a", MC_F32, NULL, 0);
        b = mc_input(g, "b", MC_F32, SHAPE(2, 2));
        break;
    case 3: /* [1] against [5] */
        a = mc_input(g, "a", MC_F32, SHAPE(5));
        b = mc_input(g, "b", MC_F32, SHAPE(1));
        break;
    default: /* rank 4 against rank 2 with inner broadcast: [4,1,1,2] + [3,1] -> [4,1,3,2] */
        a = mc_input(g, "a", MC_F32, SHAPE(4, 1, 1, 2));
        b = mc_input(g, "b", MC_F32, SHAPE(3, 1));
        break;
    }
    return OUTPUTS(g, mc_sub(g, a, b));
}

static void expect_broadcast(const op_case *c, double *const *in, double **out)
{
    const double *a = in[0], *b = in[1];
    double *o = out[0];
    switch (c->variant) {
    case 0:
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 4; j++)
                for (int k = 0; k < 3; k++)
                    o[(i * 4 + j) * 3 + k] = a[i * 3 + k] - b[j];
        break;
    case 1:
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 3; k++)
                o[i * 3 + k] = a[k] - b[i * 3 + k];
        break;
    case 2:
        for (int i = 0; i < 4; i++)
            o[i] = a[0] - b[i];
        break;
    case 3:
        for (int i = 0; i < 5; i++)
            o[i] = a[i] - b[0];
        break;
    default:
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++)
                for (int k = 0; k < 2; k++)
                    o[(i * 3 + j) * 2 + k] = a[i * 2 + k] - b[j];
        break;
    }
}

/* Number operands (constants) and chains: (x + 0.5) * -2, i32 (xi + 3) / 2. */
static mc_status build_scalar(const op_case *c, mc_graph *g)
{
    if (c->dtype == MC_I32) {
        mc_value x = mc_input(g, "x", MC_I32, SHAPE(3, 4));
        mc_value y = mc_div(g, mc_add(g, x, mc_scalar(g, 3, MC_I32)), mc_scalar(g, -2, MC_I32));
        return OUTPUTS(g, y);
    }
    mc_value x = mc_input(g, "x", c->dtype, SHAPE(3, 4));
    mc_value y = mc_mul(g, mc_add(g, x, mc_scalar(g, 0.5, c->dtype)), mc_scalar(g, -2, c->dtype));
    return OUTPUTS(g, y);
}

static void expect_scalar(const op_case *c, double *const *in, double **out)
{
    for (int i = 0; i < 12; i++)
        out[0][i] = c->dtype == MC_I32 ? trunc((in[0][i] + 3) / -2) : -2 * in[0][i] - 1;
}

/* ---- where ---------------------------------------------------------------------------------- */

static mc_status build_where(const op_case *c, mc_graph *g)
{
    mc_value cond = mc_input(g, "cond", MC_BOOL, SHAPE(2, 1, 4));
    mc_value a = mc_input(g, "a", c->dtype, SHAPE(3, 1));
    mc_value b = c->variant == 1 ? mc_scalar(g, -1, c->dtype) : mc_input(g, "b", c->dtype, SHAPE(4));
    return OUTPUTS(g, mc_where(g, cond, a, b));
}

static void expect_where(const op_case *c, double *const *in, double **out)
{
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) {
                double b = c->variant == 1 ? -1 : in[2][k];
                out[0][(i * 3 + j) * 4 + k] = in[0][i * 4 + k] ? in[1][j] : b;
            }
}

/* ---- cast ----------------------------------------------------------------------------------- */

static mc_status build_cast(const op_case *c, mc_graph *g)
{
    mc_value x = mc_input(g, "x", c->dtype, SHAPE(2, 6));
    return OUTPUTS(g, mc_cast(g, x, c->dtype2));
}

static void prepare_cast(const op_case *c, void *const *in)
{
    if (c->dtype == MC_F32 && c->dtype2 == MC_I32) {
        static const double v[12] = {2.7,  -2.7,  NAN, 3e9, -3e9, 0.99,
                                     -0.99, 1e-30, INFINITY, -INFINITY, 2147483520.0, -0.0};
        for (int i = 0; i < 12; i++)
            mc_store_element(in[0], MC_F32, i, v[i]);
    } else if (mc_dtype_is_float(c->dtype) && c->dtype2 == MC_BOOL) {
        static const double v[4] = {0.0, -0.0, NAN, 1e-30};
        for (int i = 0; i < 4; i++)
            mc_store_element(in[0], c->dtype, i, v[i]);
    } else if (c->dtype == MC_I32) {
        /* INT32_MIN is out of f16's range: inf there, finite in the reference */
        mc_store_element(in[0], MC_I32, 0, c->dtype2 == MC_F16 ? 65504 : INT32_MIN);
        mc_store_element(in[0], MC_I32, 1, -3);
        mc_store_element(in[0], MC_I32, 2, 2049); /* not an f16 */
        mc_store_element(in[0], MC_I32, 3, 0);
    }
}

static void expect_cast(const op_case *c, double *const *in, double **out)
{
    for (int i = 0; i < 12; i++) {
        double x = in[0][i];
        switch (c->dtype2) {
        case MC_I32: out[0][i] = isnan(x) ? 0 : fmin(fmax(trunc(x), -2147483648.0), 2147483647.0); break;
        case MC_BOOL: out[0][i] = x != 0 ? 1 : 0; break;
        default: out[0][i] = x; break; /* exact: no rounding */
        }
    }
}

/* ---- reductions over x [2,3,4] -------------------------------------------------------------- */

typedef mc_value (*reduce_builder)(mc_graph *, mc_value, const int *, int, bool);

typedef struct {
    reduce_builder build;
    char kind; /* 's'um, 'm'ean, 'M'ax, 'n' min */
    int axes[3], naxes; /* naxes -1: every axis (no axis attribute) */
    bool keepdim;
    mc_dtype dtype;
    int special; /* 0 none, 1 a NaN, 2 -inf and a NaN, 3 i32 wrap */
} reduce_spec;

static const reduce_spec reduce_specs[] = {
    {mc_sum, 's', {1}, 1, false, MC_F32, 0},
    {mc_sum, 's', {-1}, 1, true, MC_F32, 0},
    {mc_mean, 'm', {0, 2}, 2, false, MC_F32, 0},
    {mc_max, 'M', {0}, -1, false, MC_F32, 0},
    {mc_min, 'n', {-3, -1}, 2, true, MC_F32, 0},
    {mc_max, 'M', {2}, 1, false, MC_F32, 1},
    {mc_min, 'n', {0}, 1, false, MC_F32, 2},
    {mc_sum, 's', {0}, 1, false, MC_I32, 0},
    {mc_max, 'M', {0}, -1, true, MC_I32, 0},
    {mc_min, 'n', {1}, 1, false, MC_I32, 0},
    {mc_sum, 's', {-1}, 1, false, MC_F16, 0},
    {mc_mean, 'm', {0}, -1, false, MC_BF16, 0},
    {mc_sum, 's', {0, 1, 2}, 3, false, MC_F32, 0},
    {mc_mean, 'm', {1}, 1, true, MC_F32, 0},
    {mc_sum, 's', {0}, -1, false, MC_I32, 3},
    {mc_max, 'M', {-2}, 1, true, MC_BF16, 0},
};

static mc_status build_reduce(const op_case *c, mc_graph *g)
{
    const reduce_spec *r = &reduce_specs[c->variant];
    mc_value x = mc_input(g, "x", r->dtype, SHAPE(2, 3, 4));
    return OUTPUTS(g, r->build(g, x, r->naxes < 0 ? NULL : r->axes, r->naxes < 0 ? 0 : r->naxes,
                               r->keepdim));
}

static void prepare_reduce(const op_case *c, void *const *in)
{
    const reduce_spec *r = &reduce_specs[c->variant];
    if (r->special == 1) {
        mc_store_element(in[0], r->dtype, 5, NAN);
    } else if (r->special == 2) {
        mc_store_element(in[0], r->dtype, 1, -INFINITY);
        mc_store_element(in[0], r->dtype, 14, NAN);
    } else if (r->special == 3) {
        mc_store_element(in[0], MC_I32, 0, INT32_MAX);
        mc_store_element(in[0], MC_I32, 7, INT32_MAX);
    }
}

static void expect_reduce(const op_case *c, double *const *in, double **out)
{
    const reduce_spec *r = &reduce_specs[c->variant];
    const int dims[3] = {2, 3, 4};
    bool red[3] = {r->naxes < 0, r->naxes < 0, r->naxes < 0};
    for (int i = 0; i < r->naxes; i++)
        red[(r->axes[i] + 3) % 3] = true;
    int od[3], count = 1;
    for (int k = 0; k < 3; k++) {
        od[k] = red[k] ? 1 : dims[k];
        count *= red[k] ? dims[k] : 1;
    }
    int nout = od[0] * od[1] * od[2];
    double acc[24];
    int64_t iacc[24] = {0};
    bool seen[24] = {false};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) {
                int o = ((red[0] ? 0 : i) * od[1] + (red[1] ? 0 : j)) * od[2] + (red[2] ? 0 : k);
                double v = in[0][(i * 3 + j) * 4 + k];
                if (r->dtype == MC_I32)
                    iacc[o] += (int64_t)v;
                if (!seen[o]) {
                    acc[o] = v;
                    seen[o] = true;
                    continue;
                }
                if (r->kind == 's' || r->kind == 'm')
                    acc[o] += v;
                else if (isnan(acc[o]) || isnan(v))
                    acc[o] = NAN;
                else if ((r->kind == 'M') == (v > acc[o]))
                    acc[o] = v;
            }
    for (int o = 0; o < nout; o++) {
        if (r->dtype == MC_I32 && r->kind == 's')
            out[0][o] = wrap32(iacc[o]);
        else
            out[0][o] = r->kind == 'm' ? acc[o] / count : acc[o];
    }
}

/* ---- softmax and log_softmax over x [2,3,4] ------------------------------------------------- */

static mc_status build_softmax(const op_case *c, mc_graph *g)
{
    mc_value x = mc_input(g, "x", c->dtype, SHAPE(2, 3, 4));
    int axis = c->variant % 10 - 3; /* variant: axis + 3, plus 10 for log_softmax */
    return OUTPUTS(g, c->variant >= 10 ? mc_log_softmax(g, x, axis) : mc_softmax(g, x, axis));
}

static void prepare_masked(const op_case *c, void *const *in)
{
    mc_store_element(in[0], c->dtype, 0, -INFINITY); /* a masked position, as in attention */
    mc_store_element(in[0], c->dtype, 5, -INFINITY);
    mc_store_element(in[0], c->dtype, 6, 100.0);     /* exp(100) overflows f32: needs the shift */
}

static void expect_softmax(const op_case *c, double *const *in, double **out)
{
    const int dims[3] = {2, 3, 4}, strides[3] = {12, 4, 1};
    int axis = (c->variant % 10 - 3 + 3) % 3;
    for (int base = 0; base < 24; base++) {
        /* one row per element whose coordinate along `axis` is 0 */
        if ((base / strides[axis]) % dims[axis] != 0)
            continue;
        double m = -INFINITY;
        for (int t = 0; t < dims[axis]; t++)
            m = fmax(m, in[0][base + t * strides[axis]]);
        double s = 0;
        for (int t = 0; t < dims[axis]; t++)
            s += exp(in[0][base + t * strides[axis]] - m);
        double lse = m + log(s); /* log-sum-exp */
        for (int t = 0; t < dims[axis]; t++) {
            double x = in[0][base + t * strides[axis]];
            out[0][base + t * strides[axis]] = c->variant >= 10 ? x - lse : exp(x - lse);
        }
    }
}

/* ---- layernorm and rmsnorm ------------------------------------------------------------------ */

static mc_status build_norm(const op_case *c, mc_graph *g)
{
    double eps = c->variant & 1 ? 0.25 : (c->variant & 2 ? 1e-6 : 1e-5);
    mc_value x = mc_input(g, "x", c->dtype, SHAPE(2, 3, 8));
    mc_value w = mc_param(g, "w", c->dtype, SHAPE(8));
    if (c->variant & 2)
        return OUTPUTS(g, mc_rmsnorm(g, x, w, eps));
    mc_value b = mc_param(g, "b", c->dtype, SHAPE(8));
    return OUTPUTS(g, mc_layernorm(g, x, w, b, eps));
}

static void expect_norm(const op_case *c, double *const *in, double **out)
{
    double eps = c->variant & 1 ? 0.25 : (c->variant & 2 ? 1e-6 : 1e-5);
    for (int r = 0; r < 6; r++) {
        const double *x = in[0] + r * 8;
        double s = 0, s2 = 0;
        for (int j = 0; j < 8; j++) {
            s += x[j];
            s2 += x[j] * x[j];
        }
        double mean = s / 8, var = s2 / 8 - mean * mean; /* E[x^2] - E[x]^2, not two passes */
        for (int j = 0; j < 8; j++)
            out[0][r * 8 + j] = c->variant & 2 ? x[j] * in[1][j] / sqrt(s2 / 8 + eps)
                                               : (x[j] - mean) / sqrt(var + eps) * in[1][j] + in[2][j];
    }
}

/* ---- the table ------------------------------------------------------------------------------ */

#define UNARY(op, dt, ...) \
    {#op "_" #dt, build_unary, expect_unary, NULL, MC_##dt, 0, mc_##op, NULL, ref_##op, NULL, 0, __VA_ARGS__, NULL}
#define UNARY_SPECIAL(op) \
    {#op "_special_values", build_unary, expect_unary, prepare_special_unary, MC_F32, 0, mc_##op, NULL, ref_##op, NULL, 0, false, 0, NULL}
#define BINARY(op, dt, prep, pos) \
    {#op "_" #dt, build_binary, expect_binary, prep, MC_##dt, 0, NULL, mc_##op, NULL, ref_##op, 0, pos, 0, NULL}
#define BINARY_I32(op, prep) \
    {#op "_i32", build_binary, expect_binary, prep, MC_I32, 0, NULL, mc_##op, NULL, ref_##op##_i32, 0, false, 0, NULL}
#define COMPARE(op, dt) \
    {#op "_" #dt, build_binary, expect_binary, prepare_compare, MC_##dt, 0, NULL, mc_##op, NULL, cmp_##op, 0, false, 0, NULL}
#define CAST(from, to, name) \
    {"cast_" name, build_cast, expect_cast, prepare_cast, MC_##from, MC_##to, NULL, NULL, NULL, NULL, 0, false, 0, NULL}
#define VARIANT(name, family, prep, dt, v) \
    {name, build_##family, expect_##family, prep, MC_##dt, 0, NULL, NULL, NULL, NULL, v, false, 0, NULL}

static const op_case cases[] = {
    UNARY(neg, F32, false, 0), UNARY(abs, F32, false, 0), UNARY(exp, F32, false, 0),
    UNARY(log, F32, true, 0), UNARY(sqrt, F32, true, 0), UNARY(rsqrt, F32, true, 0),
    UNARY(recip, F32, true, 0), UNARY(tanh, F32, false, 0), UNARY(sigmoid, F32, false, 0),
    UNARY(relu, F32, false, 0), UNARY(gelu, F32, false, 0), UNARY(gelu_tanh, F32, false, 0),
    UNARY(silu, F32, false, 0), UNARY(sin, F32, false, 0), UNARY(cos, F32, false, 0),
    UNARY(erf, F32, false, 0),
    UNARY(exp, F16, false, 0), UNARY(gelu, F16, false, 0), UNARY(sigmoid, F16, false, 0),
    UNARY(neg, F16, false, 0), UNARY(log, F16, true, 0), UNARY(tanh, BF16, false, 0),
    UNARY(silu, BF16, false, 0), UNARY(rsqrt, BF16, true, 0), UNARY(relu, BF16, false, 0),
    UNARY(gelu_tanh, BF16, false, 0), UNARY(erf, BF16, false, 0),
    UNARY_SPECIAL(neg), UNARY_SPECIAL(abs), UNARY_SPECIAL(exp), UNARY_SPECIAL(log),
    UNARY_SPECIAL(sqrt), UNARY_SPECIAL(rsqrt), UNARY_SPECIAL(recip), UNARY_SPECIAL(tanh),
    UNARY_SPECIAL(sigmoid), UNARY_SPECIAL(relu), UNARY_SPECIAL(sin), UNARY_SPECIAL(cos),
    UNARY_SPECIAL(erf),
    {"neg_i32", build_unary, expect_unary, prepare_i32_edges, MC_I32, 0, mc_neg, NULL, ref_neg_i32, NULL, 0, false, 0, NULL},
    {"abs_i32", build_unary, expect_unary, prepare_i32_edges, MC_I32, 0, mc_abs, NULL, ref_abs_i32, NULL, 0, false, 0, NULL},

    BINARY(add, F32, NULL, false), BINARY(sub, F32, NULL, false), BINARY(mul, F32, NULL, false),
    BINARY(div, F32, NULL, false), BINARY(pow, F32, NULL, true),
    BINARY(maximum, F32, NULL, false), BINARY(minimum, F32, NULL, false),
    {"maximum_nan_inf", build_binary, expect_binary, prepare_nan_inf, MC_F32, 0, NULL, mc_maximum, NULL, ref_maximum, 0, false, 0, NULL},
    {"minimum_nan_inf", build_binary, expect_binary, prepare_nan_inf, MC_F32, 0, NULL, mc_minimum, NULL, ref_minimum, 0, false, 0, NULL},
    {"add_nan_inf", build_binary, expect_binary, prepare_nan_inf, MC_F32, 0, NULL, mc_add, NULL, ref_add, 0, false, 0, NULL},
    {"div_by_zero", build_binary, expect_binary, prepare_zero_divisor, MC_F32, 0, NULL, mc_div, NULL, ref_div, 0, false, 0, NULL},
    BINARY(add, F16, NULL, false), BINARY(mul, BF16, NULL, false), BINARY(div, F16, NULL, true),
    BINARY(sub, BF16, NULL, false), BINARY(maximum, F16, prepare_nan_inf, false),
    BINARY(pow, BF16, NULL, true),
    BINARY_I32(add, prepare_i32_binary), BINARY_I32(sub, prepare_i32_binary),
    BINARY_I32(mul, prepare_i32_binary), BINARY_I32(div, prepare_i32_binary),
    {"maximum_i32", build_binary, expect_binary, prepare_i32_binary, MC_I32, 0, NULL, mc_maximum, NULL, ref_maximum, 0, false, 0, NULL},
    {"minimum_i32", build_binary, expect_binary, prepare_i32_binary, MC_I32, 0, NULL, mc_minimum, NULL, ref_minimum, 0, false, 0, NULL},
    VARIANT("broadcast_both_sides", broadcast, NULL, F32, 0),
    VARIANT("broadcast_lower_rank_left", broadcast, NULL, F32, 1),
    VARIANT("broadcast_rank0_input", broadcast, NULL, F32, 2),
    VARIANT("broadcast_size1", broadcast, NULL, F32, 3),
    VARIANT("broadcast_rank4_inner", broadcast, NULL, F32, 4),
    VARIANT("scalar_operands_f32", scalar, NULL, F32, 0),
    VARIANT("scalar_operands_bf16", scalar, NULL, BF16, 0),
    VARIANT("scalar_operands_i32", scalar, NULL, I32, 0),

    COMPARE(eq, F32), COMPARE(ne, F32), COMPARE(lt, F32), COMPARE(le, F32), COMPARE(gt, F32),
    COMPARE(ge, F32), COMPARE(eq, I32), COMPARE(ne, I32), COMPARE(lt, I32), COMPARE(le, I32),
    COMPARE(gt, I32), COMPARE(ge, I32), COMPARE(lt, F16), COMPARE(ge, BF16), COMPARE(eq, BOOL),
    COMPARE(ne, BOOL),
    VARIANT("where_f32", where, NULL, F32, 0), VARIANT("where_scalar_operand", where, NULL, F32, 1),
    VARIANT("where_bool", where, NULL, BOOL, 0), VARIANT("where_f16", where, NULL, F16, 0),

    CAST(F32, I32, "f32_i32"), CAST(F32, BOOL, "f32_bool"), CAST(F32, F16, "f32_f16"),
    CAST(F32, BF16, "f32_bf16"), CAST(F16, F32, "f16_f32"), CAST(BF16, F32, "bf16_f32"),
    CAST(F16, BF16, "f16_bf16"), CAST(BF16, I32, "bf16_i32"), CAST(I32, F32, "i32_f32"),
    CAST(I32, F16, "i32_f16"), CAST(I32, BOOL, "i32_bool"), CAST(BOOL, F32, "bool_f32"),
    CAST(BOOL, I32, "bool_i32"), CAST(F16, BOOL, "f16_bool"),

    VARIANT("sum_axis1", reduce, prepare_reduce, F32, 0),
    VARIANT("sum_axis_neg1_keepdim", reduce, prepare_reduce, F32, 1),
    VARIANT("mean_axes_0_2", reduce, prepare_reduce, F32, 2),
    VARIANT("max_all", reduce, prepare_reduce, F32, 3),
    VARIANT("min_axes_neg3_neg1_keepdim", reduce, prepare_reduce, F32, 4),
    VARIANT("max_nan", reduce, prepare_reduce, F32, 5),
    VARIANT("min_neg_inf_and_nan", reduce, prepare_reduce, F32, 6),
    VARIANT("sum_i32_axis0", reduce, prepare_reduce, I32, 7),
    VARIANT("max_i32_all_keepdim", reduce, prepare_reduce, I32, 8),
    VARIANT("min_i32_axis1", reduce, prepare_reduce, I32, 9),
    VARIANT("sum_f16_last", reduce, prepare_reduce, F16, 10),
    VARIANT("mean_bf16_all", reduce, prepare_reduce, BF16, 11),
    VARIANT("sum_every_axis_listed", reduce, prepare_reduce, F32, 12),
    VARIANT("mean_axis1_keepdim", reduce, prepare_reduce, F32, 13),
    VARIANT("sum_i32_wraps", reduce, prepare_reduce, I32, 14),
    VARIANT("max_bf16_axis_neg2_keepdim", reduce, prepare_reduce, BF16, 15),

    VARIANT("softmax_last", softmax, NULL, F32, 2), VARIANT("softmax_axis0", softmax, NULL, F32, 3),
    VARIANT("softmax_axis1", softmax, NULL, F32, 4), VARIANT("softmax_axis_neg2", softmax, NULL, F32, 1),
    VARIANT("log_softmax_last", softmax, NULL, F32, 12),
    VARIANT("log_softmax_axis1", softmax, NULL, F32, 14),
    VARIANT("softmax_f16", softmax, NULL, F16, 2), VARIANT("log_softmax_bf16_axis0", softmax, NULL, BF16, 13),
    VARIANT("softmax_masked", softmax, prepare_masked, F32, 2),
    VARIANT("log_softmax_masked", softmax, prepare_masked, F32, 12),

    VARIANT("layernorm", norm, NULL, F32, 0), VARIANT("layernorm_eps", norm, NULL, F32, 1),
    VARIANT("layernorm_bf16", norm, NULL, BF16, 0), VARIANT("layernorm_f16", norm, NULL, F16, 0),
    VARIANT("rmsnorm", norm, NULL, F32, 2), VARIANT("rmsnorm_eps", norm, NULL, F32, 3),
    VARIANT("rmsnorm_f16", norm, NULL, F16, 2),
};

int main(void)
{
    return ops_run_table("test_ops", cases, (int)(sizeof cases / sizeof cases[0]));
}
