/* The scalar meaning of every primitive operator, in double: the one definition that the
 * float64 evaluator (ir/eval.c), constant folding (passes/simplify.c), the reference backend
 * (backends/ref) and the tests' own kernel-IR interpreter (tests/cuda_fixtures.h) all call, so
 * they cannot disagree (they once did: relu(NaN) was 0 in one copy and NaN in another).
 *
 * Floats: the textbook formula in double, unrounded (callers round to the dtype they compute
 * in). i32: two's-complement wrap-around, computed in 64-bit integers and reduced modulo 2^32,
 * so the definition itself has no undefined behaviour; division truncates toward zero and
 * x / 0 is 0 (NumPy's answer), INT32_MIN / -1 wraps to INT32_MIN. bool: 0 or 1.
 *
 * The switches list every operator and have no `default:`, so adding an operator to ir/ops.def
 * makes the compiler point here until its meaning is written (or it is said not to be a
 * scalar operation).
 */
#include "ir/ir.h"

#include <math.h>
#include <stdio.h>

double mc_wrap_i32(int64_t v)
{
    uint32_t u = (uint32_t)(uint64_t)v;
    return u <= (uint32_t)INT32_MAX ? (double)u : (double)u - 4294967296.0;
}

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

/* Floats compare NaN as unordered, but maximum/minimum propagate it (docs/FORMAT.md §2). */
static double nan_max(double a, double b) { return (isnan(a) || isnan(b)) ? NAN : (a > b ? a : b); }
static double nan_min(double a, double b) { return (isnan(a) || isnan(b)) ? NAN : (a < b ? a : b); }

double mc_op_apply(mc_op op, mc_dtype operand, mc_dtype result, double a, double b, double c)
{
    bool i32 = operand == MC_I32;
    int64_t ia = i32 ? (int64_t)a : 0, ib = i32 ? (int64_t)b : 0; /* i32 values: exact doubles */
    switch (op) {
    /* unary */
    case MC_OP_NEG: return i32 ? mc_wrap_i32(-ia) : -a;
    case MC_OP_ABS: return i32 ? mc_wrap_i32(ia < 0 ? -ia : ia) : fabs(a);
    case MC_OP_EXP: return exp(a);
    case MC_OP_LOG: return log(a);
    case MC_OP_SQRT: return sqrt(a);
    case MC_OP_RSQRT: return 1.0 / sqrt(a);
    case MC_OP_RECIP: return 1.0 / a;
    case MC_OP_TANH: return tanh(a);
    case MC_OP_SIGMOID: return sigmoid(a);
    case MC_OP_RELU: return isnan(a) ? a : (a > 0 ? a : 0.0);
    case MC_OP_GELU: return 0.5 * a * (1.0 + erf(a / sqrt(2.0)));
    case MC_OP_GELU_TANH: {
        const double k = 0.79788456080286535588; /* sqrt(2 / pi) */
        return 0.5 * a * (1.0 + tanh(k * (a + 0.044715 * a * a * a)));
    }
    case MC_OP_SILU: return a * sigmoid(a);
    case MC_OP_SIN: return sin(a);
    case MC_OP_COS: return cos(a);
    case MC_OP_ERF: return erf(a);
    case MC_OP_FLOOR: return floor(a);
    case MC_OP_CEIL: return ceil(a);
    case MC_OP_ROUND: return nearbyint(a); /* the default rounding mode: half to even */
    case MC_OP_SIGN: return a > 0 ? 1.0 : a < 0 ? -1.0 : a; /* NaN and zeros: themselves */
    case MC_OP_SOFTPLUS: return fmax(a, 0.0) + log1p(exp(-fabs(a))); /* NaN: NaN */
    /* binary */
    case MC_OP_ADD: return i32 ? mc_wrap_i32(ia + ib) : a + b;
    case MC_OP_SUB: return i32 ? mc_wrap_i32(ia - ib) : a - b;
    case MC_OP_MUL: return i32 ? mc_wrap_i32(ia * ib) : a * b; /* |a*b| <= 2^62 */
    case MC_OP_DIV: return i32 ? (ib == 0 ? 0.0 : mc_wrap_i32(ia / ib)) : a / b;
    case MC_OP_POW: return pow(a, b);
    case MC_OP_MAXIMUM: return i32 ? (ia > ib ? a : b) : nan_max(a, b);
    case MC_OP_MINIMUM: return i32 ? (ia < ib ? a : b) : nan_min(a, b);
    /* compare: bool results */
    case MC_OP_EQ: return a == b;
    case MC_OP_NE: return a != b;
    case MC_OP_LT: return a < b;
    case MC_OP_LE: return a <= b;
    case MC_OP_GT: return a > b;
    case MC_OP_GE: return a >= b;
    /* logic on bool values */
    case MC_OP_AND: return a != 0 && b != 0;
    case MC_OP_OR: return a != 0 || b != 0;
    case MC_OP_XOR: return (a != 0) != (b != 0);
    case MC_OP_NOT: return a == 0;
    /* select and convert */
    case MC_OP_WHERE: return a != 0 ? b : c;
    case MC_OP_CAST: return mc_round_to_dtype(a, result);
    /* not scalar operations: leaves, reductions (mc_reduce_step), composites, GEMMs, views and
     * creation have meanings over whole tensors (ir/eval.c) */
    case MC_OP_INPUT: case MC_OP_PARAM: case MC_OP_CONST:
    case MC_OP_LEAKY_RELU: case MC_OP_CLIP: /* composites with attributes: ir/eval.c */
    case MC_OP_SUM: case MC_OP_MEAN: case MC_OP_MAX: case MC_OP_MIN:
    case MC_OP_ARGMAX: case MC_OP_ARGMIN: case MC_OP_CUMSUM: case MC_OP_GATHER: case MC_OP_UPDATE:
    case MC_OP_CONV: case MC_OP_MAXPOOL: case MC_OP_AVGPOOL: case MC_OP_PAD: case MC_OP_BATCHNORM:
    case MC_OP_SOFTMAX: case MC_OP_LOG_SOFTMAX: case MC_OP_LAYERNORM: case MC_OP_RMSNORM:
    case MC_OP_MATMUL: case MC_OP_LINEAR:
    case MC_OP_TRANSPOSE: case MC_OP_RESHAPE: case MC_OP_EXPAND: case MC_OP_SLICE: case MC_OP_CONCAT:
    case MC_OP_IOTA: case MC_OP_FULL:
    case MC_OP_ALLREDUCE: /* a sum over ranks: ir/eval.c */
    case MC_NUM_OPS:
        break;
    }
    MC_UNREACHABLE("not a scalar operator");
}

double mc_reduce_identity(mc_op op)
{
    return op == MC_OP_MAX ? -INFINITY : op == MC_OP_MIN ? INFINITY : 0.0;
}

double mc_reduce_step(mc_op op, mc_dtype dtype, double acc, double x)
{
    if (op == MC_OP_SUM || op == MC_OP_MEAN)
        return dtype == MC_I32 ? mc_wrap_i32((int64_t)acc + (int64_t)x) : acc + x;
    MC_ASSERT(op == MC_OP_MAX || op == MC_OP_MIN);
    return op == MC_OP_MAX ? nan_max(acc, x) : nan_min(acc, x);
}

mc_status mc_update_pos_fail(const mc_graph *g, int line, int col, int64_t pos, int bound, int64_t len,
                             int64_t size, int axis)
{
    char msg[300];
    snprintf(msg, sizeof msg,
             "update: pos %lld%s is outside [0, %lld]: %lld entr%s from pos would not fit axis %d of %lld",
             (long long)pos, bound > 0 ? " or more" : bound < 0 ? " or less" : "", (long long)(size - len),
             (long long)len, len == 1 ? "y" : "ies", axis, (long long)size);
    if (g && g->file && line > 0)
        return mc_fail_at(MC_ERR_INPUT, g->file, g->text, line, col, "%s", msg);
    return mc_fail(MC_ERR_INPUT, "%s", msg);
}
