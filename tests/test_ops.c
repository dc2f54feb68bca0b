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
/* floor, ceil and round by the integer part (|x| < 2^52 here, else x is an integer already) */
static double ref_floor(double x)
{
    if (isnan(x) || isinf(x) || fabs(x) >= 0x1p52 || x == 0)
        return x;
    double t = (double)(int64_t)x; /* toward zero */
    return t > x ? t - 1 : (t == 0 && x < 0 ? -1 : t);
}
static double ref_ceil(double x) { return x == 0 || isnan(x) ? x : -ref_floor(-x); }
static double ref_round(double x)
{
    double f = ref_floor(x), d = x - f;
    if (isnan(x) || isinf(x) || x == 0)
        return x;
    double r = d > 0.5 ? f + 1 : d < 0.5 ? f : (fmod(f, 2) == 0 ? f : f + 1); /* ties to even */
    return r == 0 ? copysign(0.0, x) : r;
}
static double ref_sign(double x) { return isnan(x) || x == 0 ? x : copysign(1.0, x); }
/* softplus = log(1 + e^x) = x + log(1 + e^-x), each form where its exp is small */
static double ref_softplus(double x)
{
    if (isnan(x))
        return x;
    return x > 0 ? x + log1p(1.0 / exp(x)) : log1p(exp(x));
}
static mc_value leaky_relu_02(mc_graph *g, mc_value x) { return mc_leaky_relu(g, x, 0.2); }
static double ref_leaky_relu_02(double x) { return x >= 0 || isnan(x) ? x : x / 5.0; }
static mc_value clip_both(mc_graph *g, mc_value x) { return mc_clip(g, x, &(double){-0.5}, &(double){0.75}); }
static double ref_clip_both(double x) { return isnan(x) ? x : (x < -0.5 ? -0.5 : (x > 0.75 ? 0.75 : x)); }
static mc_value clip_max(mc_graph *g, mc_value x) { return mc_clip(g, x, NULL, &(double){0.25}); }
static double ref_clip_max(double x) { return isnan(x) || x <= 0.25 ? x : 0.25; }
static mc_value clip_min(mc_graph *g, mc_value x) { return mc_clip(g, x, &(double){-1}, NULL); }
static double ref_clip_min(double x) { return isnan(x) || x >= -1 ? x : -1; }
static mc_value clip_crossed(mc_graph *g, mc_value x) { return mc_clip(g, x, &(double){1}, &(double){-1}); }
static double ref_clip_crossed(double x) { return isnan(x) ? x : -1; } /* min > max: max */
static mc_value clip_i32(mc_graph *g, mc_value x) { return mc_clip(g, x, &(double){-3}, &(double){100}); }
static double ref_clip_i32(double x) { return x < -3 ? -3 : (x > 100 ? 100 : x); }

static double ref_and(double a, double b) { return a * b != 0; }
static double ref_or(double a, double b) { return a + b != 0; }
static double ref_xor(double a, double b) { return a + b == 1; }
static double ref_not(double x) { return 1 - x; }
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

/* Halves (ties round to even), values just off them, large and tiny magnitudes. */
static void prepare_halves(const op_case *c, void *const *in)
{
    static const double v[15] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 0.49999997, -0.50000006,
                                 1e7 + 0.5, -4.75, 30, -40, 1e-30, -90};
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

/* ---- argmax, argmin, cumsum of x [3, 5, 4] ------------------------------------------------------ */

typedef struct {
    int op;       /* 0 argmax, 1 argmin, 2 cumsum */
    int axis;
    bool keepdim;
    int prep;     /* 0 random, 1 ties, 2 NaNs and infinities */
} arg_spec;

static const arg_spec arg_specs[] = {
    {0, 1, false, 0}, {1, -1, true, 0}, {0, 0, false, 1}, {1, 2, false, 1}, {0, -2, true, 2},
    {1, 1, false, 2}, {2, 1, false, 0}, {2, 0, false, 0}, {2, -1, false, 2}, {0, 2, false, 1},
    {2, 2, false, 1},
};

static const int64_t arg_shape[3] = {3, 5, 4};

static mc_status build_arg(const op_case *c, mc_graph *g)
{
    const arg_spec *s = &arg_specs[c->variant];
    mc_value x = mc_input(g, "x", c->dtype, SHAPE(3, 5, 4));
    mc_value y = s->op == 0 ? mc_argmax(g, x, s->axis, s->keepdim)
               : s->op == 1 ? mc_argmin(g, x, s->axis, s->keepdim) : mc_cumsum(g, x, s->axis);
    return OUTPUTS(g, y);
}

/* Ties: values from {-1, 0, 1, 2} so that rows repeat their extremes; NaN and infinities at
 * scattered places (a row with a NaN after its largest value, one with -inf and +inf). */
static void prepare_arg(const op_case *c, void *const *in)
{
    const arg_spec *s = &arg_specs[c->variant];
    for (int i = 0; s->prep == 1 && i < 60; i++)
        mc_store_element(in[0], c->dtype, i, (double)((i * 7 + i / 5) % 4) - 1);
    if (s->prep == 2) {
        static const int at[6] = {3, 17, 18, 30, 44, 59};
        static const double v[6] = {NAN, INFINITY, -INFINITY, NAN, NAN, -INFINITY};
        for (int i = 0; i < 6; i++)
            mc_store_element(in[0], c->dtype, at[i], v[i]);
    }
}

static void expect_arg(const op_case *c, double *const *in, double **out)
{
    const arg_spec *s = &arg_specs[c->variant];
    int axis = s->axis < 0 ? s->axis + 3 : s->axis, len = (int)arg_shape[axis];
    int64_t stride[3] = {20, 4, 1};
    for (int e = 0; e < 60; e++) {
        int idx[3] = {e / 20, e / 4 % 5, e % 4};
        if (idx[axis] != 0)
            continue; /* one row per position with index 0 along the axis */
        const double *x = in[0] + e;
        int64_t st = stride[axis];
        /* the output position: x's with the axis dropped (or kept at 0: the same order) */
        int o = 0;
        for (int d = 0; d < 3; d++)
            if (d != axis)
                o = o * (int)arg_shape[d] + idx[d];
        if (s->op == 2) {
            for (int i = 0; i < len; i++) {
                double sum = 0;
                for (int j = 0; j <= i; j++)
                    sum += x[j * st];
                out[0][e + i * st] = c->dtype == MC_I32 ? (double)(int32_t)(int64_t)sum : sum;
            }
            continue;
        }
        /* the extreme among non-NaN values, then the first NaN if any, else the first equal */
        double ext = s->op == 0 ? -INFINITY : INFINITY;
        int first_nan = -1, pick = -1;
        for (int j = 0; j < len; j++) {
            double v = x[j * st];
            if (v != v && first_nan < 0)
                first_nan = j;
            if (v == v)
                ext = s->op == 0 ? fmax(ext, v) : fmin(ext, v);
        }
        for (int j = len - 1; j >= 0; j--)
            if (x[j * st] == ext)
                pick = j;
        out[0][o] = first_nan >= 0 ? first_nan : pick;
    }
}

/* ---- cumsum along long axes (a scan: O(n) per row; kir/kir.h) --------------------------------- */

typedef struct {
    int64_t shape[3];
    int rank, axis;
    int form; /* 0 cumsum; 1 0.5 * cumsum(|x|) (fused prologue and epilogue); 2 the exclusive
                 reverse cumsum ONNX's CumSum(exclusive=1, reverse=1) imports as (slices with step -1,
                 minus x); 3 cumsum(x - max(x)) (a row reduction before it) and relu of it, both
                 outputs */
} scan_spec;

static const scan_spec scan_specs[] = {
    {{2, 4097}, 2, 1, 0},    {{4097, 3}, 2, 0, 0}, {{3, 4097, 2}, 3, 1, 0}, {{2, 4097}, 2, -1, 0},
    {{4097}, 1, 0, 0},       {{2, 4097}, 2, 1, 1}, {{3, 4097}, 2, 1, 2},    {{4097, 2}, 2, 0, 3},
    {{5, 1, 3}, 3, 1, 0},
};

static mc_status build_scan(const op_case *c, mc_graph *g)
{
    const scan_spec *s = &scan_specs[c->variant];
    mc_value x = mc_input(g, "x", c->dtype, s->shape, s->rank);
    int axis = s->axis < 0 ? s->axis + s->rank : s->axis;
    if (s->form == 1)
        return OUTPUTS(g, mc_mul(g, mc_cumsum(g, mc_abs(g, x), axis), mc_scalar(g, 0.5, c->dtype)));
    if (s->form == 2) {
        mc_value r = mc_slice_step(g, x, axis, MC_END, MC_END, -1);
        mc_value y = mc_slice_step(g, mc_cumsum(g, r, axis), axis, MC_END, MC_END, -1);
        return OUTPUTS(g, mc_sub(g, y, x));
    }
    if (s->form == 3) {
        mc_value y = mc_cumsum(g, mc_sub(g, x, mc_max(g, x, &axis, 1, true)), axis);
        return OUTPUTS(g, y, mc_relu(g, y));
    }
    return OUTPUTS(g, mc_cumsum(g, x, s->axis));
}

static void expect_scan(const op_case *c, double *const *in, double **out)
{
    const scan_spec *s = &scan_specs[c->variant];
    int axis = s->axis < 0 ? s->axis + s->rank : s->axis;
    int64_t n = s->shape[axis], inner = 1, outer = 1;
    for (int d = 0; d < s->rank; d++) {
        if (d < axis)
            outer *= s->shape[d];
        if (d > axis)
            inner *= s->shape[d];
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t q = 0; q < inner; q++) {
            const double *x = in[0] + o * n * inner + q;
            double *y = out[0] + o * n * inner + q;
            double m = -INFINITY, acc = 0;
            for (int64_t i = 0; i < n; i++)
                m = fmax(m, x[i * inner]);
            if (s->form == 2) { /* the sum of the elements after i */
                for (int64_t i = n - 1; i >= 0; i--) {
                    y[i * inner] = acc;
                    acc += x[i * inner];
                }
                continue;
            }
            for (int64_t i = 0; i < n; i++) {
                double v = s->form == 1 ? fabs(x[i * inner]) : s->form == 3 ? x[i * inner] - m : x[i * inner];
                acc += v;
                y[i * inner] = s->form == 1 ? 0.5 * acc : c->dtype == MC_I32 ? (double)(int32_t)(int64_t)acc : acc;
                if (s->form == 3)
                    out[1][o * n * inner + q + i * inner] = acc > 0 ? acc : 0;
            }
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
    UNARY(floor, F32, false, 0), UNARY(ceil, F32, false, 0), UNARY(round, F32, false, 0),
    UNARY(sign, F32, false, 0), UNARY(softplus, F32, false, 0), UNARY(floor, F16, false, 0),
    UNARY(ceil, BF16, false, 0), UNARY(round, F16, false, 0), UNARY(softplus, BF16, false, 0),
    UNARY(sign, BF16, false, 0),
    UNARY_SPECIAL(floor), UNARY_SPECIAL(ceil), UNARY_SPECIAL(round), UNARY_SPECIAL(sign),
    UNARY_SPECIAL(softplus),
    {"round_halves", build_unary, expect_unary, prepare_halves, MC_F32, 0, mc_round, NULL, ref_round, NULL, 0, false, 0, NULL},
    {"floor_halves", build_unary, expect_unary, prepare_halves, MC_F32, 0, mc_floor, NULL, ref_floor, NULL, 0, false, 0, NULL},
    {"ceil_halves", build_unary, expect_unary, prepare_halves, MC_F32, 0, mc_ceil, NULL, ref_ceil, NULL, 0, false, 0, NULL},
    {"softplus_wide", build_unary, expect_unary, prepare_halves, MC_F32, 0, mc_softplus, NULL, ref_softplus, NULL, 0, false, 0, NULL},
    {"sign_i32", build_unary, expect_unary, prepare_i32_edges, MC_I32, 0, mc_sign, NULL, ref_sign, NULL, 0, false, 0, NULL},
    {"leaky_relu_f32", build_unary, expect_unary, NULL, MC_F32, 0, leaky_relu_02, NULL, ref_leaky_relu_02, NULL, 0, false, 0, NULL},
    {"leaky_relu_special_values", build_unary, expect_unary, prepare_special_unary, MC_F32, 0, leaky_relu_02, NULL, ref_leaky_relu_02, NULL, 0, false, 0, NULL},
    {"leaky_relu_bf16", build_unary, expect_unary, NULL, MC_BF16, 0, leaky_relu_02, NULL, ref_leaky_relu_02, NULL, 0, false, 0, NULL},
    {"clip_f32", build_unary, expect_unary, NULL, MC_F32, 0, clip_both, NULL, ref_clip_both, NULL, 0, false, 0, NULL},
    {"clip_special_values", build_unary, expect_unary, prepare_special_unary, MC_F32, 0, clip_both, NULL, ref_clip_both, NULL, 0, false, 0, NULL},
    {"clip_max_only_f16", build_unary, expect_unary, NULL, MC_F16, 0, clip_max, NULL, ref_clip_max, NULL, 0, false, 0, NULL},
    {"clip_min_only", build_unary, expect_unary, prepare_special_unary, MC_F32, 0, clip_min, NULL, ref_clip_min, NULL, 0, false, 0, NULL},
    {"clip_min_above_max", build_unary, expect_unary, prepare_special_unary, MC_F32, 0, clip_crossed, NULL, ref_clip_crossed, NULL, 0, false, 0, NULL},
    {"clip_i32", build_unary, expect_unary, prepare_i32_edges, MC_I32, 0, clip_i32, NULL, ref_clip_i32, NULL, 0, false, 0, NULL},

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
    BINARY(and, BOOL, NULL, false), BINARY(or, BOOL, NULL, false), BINARY(xor, BOOL, NULL, false),
    UNARY(not, BOOL, false, 0),
    VARIANT("where_f32", where, NULL, F32, 0), VARIANT("where_scalar_operand", where, NULL, F32, 1),
    VARIANT("where_bool", where, NULL, BOOL, 0), VARIANT("where_f16", where, NULL, F16, 0),
    VARIANT("where_i32", where, NULL, I32, 0), VARIANT("where_i32_scalar_operand", where, NULL, I32, 1),

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
    VARIANT("argmax_axis1", arg, prepare_arg, F32, 0), VARIANT("argmin_last_keepdim", arg, prepare_arg, F32, 1),
    VARIANT("argmax_ties_axis0", arg, prepare_arg, F32, 2), VARIANT("argmin_ties_i32", arg, prepare_arg, I32, 3),
    VARIANT("argmax_nan_inf_keepdim", arg, prepare_arg, F32, 4), VARIANT("argmin_nan_inf", arg, prepare_arg, F32, 5),
    VARIANT("argmax_ties_f16", arg, prepare_arg, F16, 9), VARIANT("argmin_bf16", arg, prepare_arg, BF16, 1),
    VARIANT("argmax_i32", arg, prepare_arg, I32, 0),
    VARIANT("cumsum_axis1", arg, prepare_arg, F32, 6), VARIANT("cumsum_axis0", arg, prepare_arg, F32, 7),
    VARIANT("cumsum_last_nan_inf", arg, prepare_arg, F32, 8), VARIANT("cumsum_i32", arg, prepare_arg, I32, 10),
    VARIANT("cumsum_f16", arg, prepare_arg, F16, 6), VARIANT("cumsum_bf16_axis0", arg, prepare_arg, BF16, 7),
    VARIANT("cumsum_long_f32", scan, NULL, F32, 0), VARIANT("cumsum_long_axis0", scan, NULL, F32, 1),
    VARIANT("cumsum_long_middle_f16", scan, NULL, F16, 2), VARIANT("cumsum_long_bf16", scan, NULL, BF16, 3),
    VARIANT("cumsum_long_i32", scan, NULL, I32, 4), VARIANT("cumsum_long_fused", scan, NULL, F32, 5),
    VARIANT("cumsum_long_reverse_exclusive", scan, NULL, F32, 6), VARIANT("cumsum_long_after_max", scan, NULL, F32, 7),
    VARIANT("cumsum_long_fused_bf16", scan, NULL, BF16, 5), VARIANT("cumsum_axis_of_one", scan, NULL, F32, 8),
    VARIANT("cumsum_long_reverse_exclusive_f16", scan, NULL, F16, 6),

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
