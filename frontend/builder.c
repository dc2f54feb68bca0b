/* The C API's graph builder: one function per operator of docs/FORMAT.md §2 (include/minic.h).
 *
 * Each builder only packs its arguments into an mc_attrs and calls mc_graph_add, so the C API
 * and the .graph parser share every type rule and every error message (ir/infer.c). What is
 * checked here is only what the attribute struct can't carry: list lengths, NULL lists. A
 * failed builder returns MC_ERROR and marks the graph failed; a builder handed MC_ERROR returns
 * MC_ERROR quietly (mc_graph_add does that), so a chain of calls is checked once at the end.
 */
#include "ir/ir.h"

#include <string.h>

static mc_value build(mc_graph *g, mc_op op, const mc_value *in, int nin, const mc_attrs *attr)
{
    return mc_graph_add(g, op, in, nin, attr, 0, 0);
}

/* A builder's own mistake (before mc_graph_add could see it). */
static mc_value builder_fail(mc_graph *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static mc_value builder_fail(mc_graph *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mc_vfail(MC_ERR_INPUT, fmt, ap);
    va_end(ap);
    if (g)
        g->failed = true;
    return MC_ERROR;
}

/* Copy a list argument into attr->list; lists are at most MC_MAX_RANK long. */
static bool set_list(mc_graph *g, mc_attrs *at, const char *op, const char *what,
                     const int64_t *list64, const int *list32, int n)
{
    if (n < 0 || n > MC_MAX_RANK) {
        builder_fail(g, "%s: %s has %d entries (at most %d)", op, what, n, MC_MAX_RANK);
        return false;
    }
    if (n > 0 && !list64 && !list32) {
        builder_fail(g, "%s: %s is NULL but has %d entries", op, what, n);
        return false;
    }
    for (int i = 0; i < n; i++)
        at->list[i] = list64 ? list64[i] : list32[i];
    at->nlist = n;
    at->has_list = true;
    return true;
}

static bool any_error(mc_graph *g, const mc_value *in, int n)
{
    for (int i = 0; i < n; i++)
        if (in[i] == MC_ERROR) {
            if (g)
                g->failed = true;
            return true;
        }
    return false;
}

int64_t mc_dim_sym(mc_graph *g, const char *name, int64_t max)
{
    return mc_dim_declare(g, name, name ? strlen(name) : 0, max, 0, 0);
}

mc_value mc_input(mc_graph *g, const char *name, mc_dtype dtype, const int64_t *shape, int rank)
{
    return mc_graph_declare(g, MC_OP_INPUT, name, dtype, shape, rank, 0, 0);
}

mc_value mc_param(mc_graph *g, const char *name, mc_dtype dtype, const int64_t *shape, int rank)
{
    return mc_graph_declare(g, MC_OP_PARAM, name, dtype, shape, rank, 0, 0);
}

mc_value mc_scalar(mc_graph *g, double value, mc_dtype dtype)
{
    mc_attrs at = {.value = value, .dtype = dtype};
    return build(g, MC_OP_CONST, NULL, 0, &at);
}

#define DEFINE_UNARY(name, ID)                                                                 \
    mc_value mc_##name(mc_graph *g, mc_value x) { return build(g, MC_OP_##ID, &x, 1, NULL); }
#define DEFINE_BINARY(name, ID)                                                                \
    mc_value mc_##name(mc_graph *g, mc_value a, mc_value b)                                    \
    {                                                                                          \
        mc_value in[2] = {a, b};                                                               \
        return build(g, MC_OP_##ID, in, 2, NULL);                                              \
    }
DEFINE_UNARY(neg, NEG)
DEFINE_UNARY(abs, ABS)
DEFINE_UNARY(exp, EXP)
DEFINE_UNARY(log, LOG)
DEFINE_UNARY(sqrt, SQRT)
DEFINE_UNARY(rsqrt, RSQRT)
DEFINE_UNARY(recip, RECIP)
DEFINE_UNARY(tanh, TANH)
DEFINE_UNARY(sigmoid, SIGMOID)
DEFINE_UNARY(relu, RELU)
DEFINE_UNARY(gelu, GELU)
DEFINE_UNARY(gelu_tanh, GELU_TANH)
DEFINE_UNARY(silu, SILU)
DEFINE_UNARY(sin, SIN)
DEFINE_UNARY(cos, COS)
DEFINE_UNARY(erf, ERF)
DEFINE_UNARY(floor, FLOOR)
DEFINE_UNARY(ceil, CEIL)
DEFINE_UNARY(round, ROUND)
DEFINE_UNARY(sign, SIGN)
DEFINE_UNARY(softplus, SOFTPLUS)
DEFINE_BINARY(add, ADD)
DEFINE_BINARY(sub, SUB)
DEFINE_BINARY(mul, MUL)
DEFINE_BINARY(div, DIV)
DEFINE_BINARY(pow, POW)
DEFINE_BINARY(maximum, MAXIMUM)
DEFINE_BINARY(minimum, MINIMUM)
DEFINE_BINARY(eq, EQ)
DEFINE_BINARY(ne, NE)
DEFINE_BINARY(lt, LT)
DEFINE_BINARY(le, LE)
DEFINE_BINARY(gt, GT)
DEFINE_BINARY(ge, GE)
#undef DEFINE_UNARY
#undef DEFINE_BINARY

mc_value mc_where(mc_graph *g, mc_value cond, mc_value a, mc_value b)
{
    mc_value in[3] = {cond, a, b};
    return build(g, MC_OP_WHERE, in, 3, NULL);
}

mc_value mc_cast(mc_graph *g, mc_value x, mc_dtype to)
{
    mc_attrs at = {.dtype = to};
    return build(g, MC_OP_CAST, &x, 1, &at);
}

static mc_value reduce(mc_graph *g, mc_op op, mc_value x, const int *axes, int naxes,
                       bool keepdim)
{
    if (any_error(g, &x, 1))
        return MC_ERROR;
    mc_attrs at = {.keepdim = keepdim};
    if (axes && !set_list(g, &at, mc_op_table[op].name, "axis", NULL, axes, naxes))
        return MC_ERROR;
    return build(g, op, &x, 1, &at);
}

mc_value mc_sum(mc_graph *g, mc_value x, const int *axes, int naxes, bool keepdim)
{
    return reduce(g, MC_OP_SUM, x, axes, naxes, keepdim);
}
mc_value mc_mean(mc_graph *g, mc_value x, const int *axes, int naxes, bool keepdim)
{
    return reduce(g, MC_OP_MEAN, x, axes, naxes, keepdim);
}
mc_value mc_max(mc_graph *g, mc_value x, const int *axes, int naxes, bool keepdim)
{
    return reduce(g, MC_OP_MAX, x, axes, naxes, keepdim);
}
mc_value mc_min(mc_graph *g, mc_value x, const int *axes, int naxes, bool keepdim)
{
    return reduce(g, MC_OP_MIN, x, axes, naxes, keepdim);
}

mc_value mc_leaky_relu(mc_graph *g, mc_value x, double alpha)
{
    mc_attrs at = {.alpha = alpha};
    return build(g, MC_OP_LEAKY_RELU, &x, 1, &at);
}

mc_value mc_clip(mc_graph *g, mc_value x, const double *min, const double *max)
{
    mc_attrs at = {.has_lo = min != NULL, .has_hi = max != NULL, .lo = min ? *min : 0, .hi = max ? *max : 0};
    return build(g, MC_OP_CLIP, &x, 1, &at);
}

mc_value mc_argmax(mc_graph *g, mc_value x, int axis, bool keepdim)
{
    mc_attrs at = {.list = {axis}, .nlist = 1, .has_list = true, .keepdim = keepdim};
    return build(g, MC_OP_ARGMAX, &x, 1, &at);
}

mc_value mc_argmin(mc_graph *g, mc_value x, int axis, bool keepdim)
{
    mc_attrs at = {.list = {axis}, .nlist = 1, .has_list = true, .keepdim = keepdim};
    return build(g, MC_OP_ARGMIN, &x, 1, &at);
}

mc_value mc_cumsum(mc_graph *g, mc_value x, int axis)
{
    mc_attrs at = {.axis = axis};
    return build(g, MC_OP_CUMSUM, &x, 1, &at);
}

mc_value mc_allreduce(mc_graph *g, mc_value x) { return build(g, MC_OP_ALLREDUCE, &x, 1, NULL); }

mc_value mc_gather(mc_graph *g, mc_value x, mc_value idx, int axis)
{
    mc_attrs at = {.axis = axis};
    mc_value in[2] = {x, idx};
    return build(g, MC_OP_GATHER, in, 2, &at);
}

mc_value mc_update(mc_graph *g, mc_value cache, mc_value new_, mc_value pos, int axis)
{
    mc_attrs at = {.axis = axis};
    mc_value in[3] = {cache, new_, pos};
    return build(g, MC_OP_UPDATE, in, 3, &at);
}

/* Copy a spatial list (NULL: left to the default). */
static bool set_spatial(mc_graph *g, const char *op, const char *what, int64_t *to, int *n, const int64_t *from,
                        int count)
{
    if (!from)
        return true;
    if (count < 1 || count > 2) {
        builder_fail(g, "%s: '%s' needs 1 or 2 entries (spatial axes), got %d", op, what, count);
        return false;
    }
    memcpy(to, from, sizeof(int64_t) * (size_t)count);
    *n = count;
    return true;
}

mc_value mc_conv(mc_graph *g, mc_value x, mc_value w, mc_value b, const int64_t *stride, const int64_t *padding,
                 const int64_t *dilation, int nspatial, int64_t groups)
{
    mc_attrs at = {.groups = groups};
    if (!set_spatial(g, "conv", "stride", at.stride, &at.nstride, stride, nspatial) ||
        !set_spatial(g, "conv", "padding", at.padding, &at.npadding, padding, nspatial) ||
        !set_spatial(g, "conv", "dilation", at.dilation, &at.ndilation, dilation, nspatial))
        return MC_ERROR;
    mc_value in[3] = {x, w, b};
    return build(g, MC_OP_CONV, in, b == MC_NONE ? 2 : 3, &at);
}

static mc_value pool(mc_graph *g, mc_op op, mc_value x, const int64_t *kernel, const int64_t *stride,
                     const int64_t *padding, int nspatial)
{
    mc_attrs at = {0};
    const char *name = mc_op_table[op].name;
    if (!kernel)
        return builder_fail(g, "%s: the kernel is required", name);
    if (!set_spatial(g, name, "kernel", at.kernel, &at.nkernel, kernel, nspatial) ||
        !set_spatial(g, name, "stride", at.stride, &at.nstride, stride, nspatial) ||
        !set_spatial(g, name, "padding", at.padding, &at.npadding, padding, nspatial))
        return MC_ERROR;
    return build(g, op, &x, 1, &at);
}

mc_value mc_maxpool(mc_graph *g, mc_value x, const int64_t *kernel, const int64_t *stride, const int64_t *padding,
                    int nspatial)
{
    return pool(g, MC_OP_MAXPOOL, x, kernel, stride, padding, nspatial);
}

mc_value mc_avgpool(mc_graph *g, mc_value x, const int64_t *kernel, const int64_t *stride, const int64_t *padding,
                    int nspatial)
{
    return pool(g, MC_OP_AVGPOOL, x, kernel, stride, padding, nspatial);
}

mc_value mc_pad(mc_graph *g, mc_value x, const int64_t *pads, int npads, double value)
{
    mc_attrs at = {.value = value};
    if (!pads || npads < 0 || npads > 2 * MC_MAX_RANK)
        return builder_fail(g, "pad: expected up to %d pads, got %d", 2 * MC_MAX_RANK, pads ? npads : 0);
    memcpy(at.pads, pads, sizeof(int64_t) * (size_t)npads);
    at.npads = npads;
    return build(g, MC_OP_PAD, &x, 1, &at);
}

mc_value mc_batchnorm(mc_graph *g, mc_value x, mc_value scale, mc_value bias, mc_value mean, mc_value var,
                      double eps)
{
    mc_value in[5] = {x, scale, bias, mean, var};
    mc_attrs at = {.value = eps};
    return build(g, MC_OP_BATCHNORM, in, 5, &at);
}

mc_value mc_softmax(mc_graph *g, mc_value x, int axis)
{
    mc_attrs at = {.axis = axis};
    return build(g, MC_OP_SOFTMAX, &x, 1, &at);
}

mc_value mc_log_softmax(mc_graph *g, mc_value x, int axis)
{
    mc_attrs at = {.axis = axis};
    return build(g, MC_OP_LOG_SOFTMAX, &x, 1, &at);
}

mc_value mc_layernorm(mc_graph *g, mc_value x, mc_value w, mc_value b, double eps)
{
    mc_value in[3] = {x, w, b};
    mc_attrs at = {.value = eps};
    return build(g, MC_OP_LAYERNORM, in, 3, &at);
}

mc_value mc_rmsnorm(mc_graph *g, mc_value x, mc_value w, double eps)
{
    mc_value in[2] = {x, w};
    mc_attrs at = {.value = eps};
    return build(g, MC_OP_RMSNORM, in, 2, &at);
}

mc_value mc_matmul(mc_graph *g, mc_value a, mc_value b)
{
    mc_value in[2] = {a, b};
    return build(g, MC_OP_MATMUL, in, 2, NULL);
}

mc_value mc_linear(mc_graph *g, mc_value x, mc_value w, mc_value b)
{
    mc_value in[3] = {x, w, b};
    return build(g, MC_OP_LINEAR, in, b == MC_NONE ? 2 : 3, NULL);
}

mc_value mc_transpose(mc_graph *g, mc_value x, const int *perm, int n)
{
    if (any_error(g, &x, 1))
        return MC_ERROR;
    mc_attrs at = {0};
    if (n != 0 && !set_list(g, &at, "transpose", "perm", NULL, perm, n))
        return MC_ERROR;
    return build(g, MC_OP_TRANSPOSE, &x, 1, &at);
}

static mc_value shape_op(mc_graph *g, mc_op op, mc_value x, const int64_t *shape, int n)
{
    if (any_error(g, &x, 1))
        return MC_ERROR;
    mc_attrs at = {0};
    if (!set_list(g, &at, mc_op_table[op].name, "shape", shape, NULL, n))
        return MC_ERROR;
    return build(g, op, &x, 1, &at);
}

mc_value mc_reshape(mc_graph *g, mc_value x, const int64_t *shape, int n)
{
    return shape_op(g, MC_OP_RESHAPE, x, shape, n);
}

mc_value mc_expand(mc_graph *g, mc_value x, const int64_t *shape, int n)
{
    return shape_op(g, MC_OP_EXPAND, x, shape, n);
}

mc_value mc_slice(mc_graph *g, mc_value x, int axis, int64_t start, int64_t end)
{
    mc_attrs at = {.axis = axis, .start = start, .end = end, .step = 1};
    return build(g, MC_OP_SLICE, &x, 1, &at);
}

mc_value mc_slice_step(mc_graph *g, mc_value x, int axis, int64_t start, int64_t end, int64_t step)
{
    mc_attrs at = {.axis = axis, .start = start, .end = end, .step = step};
    return build(g, MC_OP_SLICE, &x, 1, &at);
}

mc_value mc_and(mc_graph *g, mc_value a, mc_value b)
{
    mc_value in[2] = {a, b};
    return build(g, MC_OP_AND, in, 2, NULL);
}

mc_value mc_or(mc_graph *g, mc_value a, mc_value b)
{
    mc_value in[2] = {a, b};
    return build(g, MC_OP_OR, in, 2, NULL);
}

mc_value mc_xor(mc_graph *g, mc_value a, mc_value b)
{
    mc_value in[2] = {a, b};
    return build(g, MC_OP_XOR, in, 2, NULL);
}

mc_value mc_not(mc_graph *g, mc_value x) { return build(g, MC_OP_NOT, &x, 1, NULL); }

mc_value mc_concat(mc_graph *g, const mc_value *xs, int n, int axis)
{
    if (n < 1 || !xs)
        return builder_fail(g, "concat: expected at least 1 operand, got %d", n < 0 ? 0 : n);
    mc_attrs at = {.axis = axis};
    return build(g, MC_OP_CONCAT, xs, n, &at);
}

mc_value mc_iota(mc_graph *g, const int64_t *shape, int n, int axis, mc_dtype dtype)
{
    mc_attrs at = {.axis = axis, .dtype = dtype};
    if (!set_list(g, &at, "iota", "shape", shape, NULL, n))
        return MC_ERROR;
    return build(g, MC_OP_IOTA, NULL, 0, &at);
}

mc_value mc_full(mc_graph *g, const int64_t *shape, int n, double value, mc_dtype dtype)
{
    mc_attrs at = {.value = value, .dtype = dtype};
    if (!set_list(g, &at, "full", "shape", shape, NULL, n))
        return MC_ERROR;
    return build(g, MC_OP_FULL, NULL, 0, &at);
}
