/* The operator table, expanded from ir/ops.def. */
#include "ir/ir.h"

#include <string.h>

const char *const mc_attr_names[MC_NUM_ATTRS] = {
    [MC_ATTR_AXIS] = "axis", [MC_ATTR_KEEPDIM] = "keepdim", [MC_ATTR_START] = "start",
    [MC_ATTR_END] = "end",   [MC_ATTR_PERM] = "perm",       [MC_ATTR_SHAPE] = "shape",
    [MC_ATTR_EPS] = "eps",   [MC_ATTR_VALUE] = "value",     [MC_ATTR_TO] = "to",
    [MC_ATTR_DTYPE] = "dtype", [MC_ATTR_ALPHA] = "alpha",   [MC_ATTR_MIN] = "min",
    [MC_ATTR_MAX] = "max",     [MC_ATTR_STEP] = "step",     [MC_ATTR_PADS] = "pads",
    [MC_ATTR_KERNEL] = "kernel", [MC_ATTR_STRIDE] = "stride", [MC_ATTR_PADDING] = "padding",
    [MC_ATTR_DILATION] = "dilation", [MC_ATTR_GROUPS] = "groups",
};

/* ops.def names attribute keys without their prefix. */
#define AXIS MC_ATTR_BIT(MC_ATTR_AXIS)
#define KEEPDIM MC_ATTR_BIT(MC_ATTR_KEEPDIM)
#define START MC_ATTR_BIT(MC_ATTR_START)
#define END MC_ATTR_BIT(MC_ATTR_END)
#define PERM MC_ATTR_BIT(MC_ATTR_PERM)
#define SHAPE MC_ATTR_BIT(MC_ATTR_SHAPE)
#define EPS MC_ATTR_BIT(MC_ATTR_EPS)
#define VALUE MC_ATTR_BIT(MC_ATTR_VALUE)
#define TO MC_ATTR_BIT(MC_ATTR_TO)
#define DTYPE MC_ATTR_BIT(MC_ATTR_DTYPE)
#define ALPHA MC_ATTR_BIT(MC_ATTR_ALPHA)
#define MIN MC_ATTR_BIT(MC_ATTR_MIN)
#define MAX MC_ATTR_BIT(MC_ATTR_MAX)
#define STEP MC_ATTR_BIT(MC_ATTR_STEP)
#define PADS MC_ATTR_BIT(MC_ATTR_PADS)
#define KERNEL MC_ATTR_BIT(MC_ATTR_KERNEL)
#define STRIDE MC_ATTR_BIT(MC_ATTR_STRIDE)
#define PADDING MC_ATTR_BIT(MC_ATTR_PADDING)
#define DILATION MC_ATTR_BIT(MC_ATTR_DILATION)
#define GROUPS MC_ATTR_BIT(MC_ATTR_GROUPS)
const mc_op_info mc_op_table[MC_NUM_OPS] = {
/* ...and dtype classes and flags likewise. */
#define FLOAT (MC_DTYPE_BIT(MC_F32) | MC_DTYPE_BIT(MC_F16) | MC_DTYPE_BIT(MC_BF16))
#define I32 MC_DTYPE_BIT(MC_I32)
#define BOOL MC_DTYPE_BIT(MC_BOOL)
#define COMPOSITE MC_OP_COMPOSITE
#define HEAVY MC_OP_HEAVY
#define X(id, name, kind, min_in, max_in, flops, expr, operands, attrs, required, dtypes, flags) \
    [MC_OP_##id] = {name, kind, min_in, max_in, flops, expr, operands, attrs, required, dtypes, flags},
#include "ir/ops.def"
#undef X
};
#undef FLOAT
#undef I32
#undef BOOL
#undef COMPOSITE
#undef HEAVY
#undef AXIS
#undef KEEPDIM
#undef START
#undef END
#undef PERM
#undef SHAPE
#undef EPS
#undef VALUE
#undef TO
#undef DTYPE
#undef ALPHA
#undef MIN
#undef MAX
#undef STEP
#undef PADS
#undef KERNEL
#undef STRIDE
#undef PADDING
#undef DILATION
#undef GROUPS

bool mc_op_parse(const char *name, size_t len, mc_op *out)
{
    for (int i = 0; i < MC_NUM_OPS; i++) {
        const char *n = mc_op_table[i].name;
        if (mc_op_table[i].kind == MC_KIND_LEAF)
            continue; /* input/param/const are statements, not operators */
        if (strlen(n) == len && memcmp(n, name, len) == 0) {
            *out = (mc_op)i;
            return true;
        }
    }
    return false;
}

bool mc_op_is_composite(mc_op op) { return (mc_op_table[op].flags & MC_OP_COMPOSITE) != 0; }
bool mc_op_is_heavy(mc_op op) { return (mc_op_table[op].flags & MC_OP_HEAVY) != 0; }

mc_attrs mc_op_default_attrs(mc_op op)
{
    mc_attrs a = {0};
    a.end = MC_END;
    switch (op) {
    case MC_OP_SOFTMAX: case MC_OP_LOG_SOFTMAX: a.axis = -1; break;
    case MC_OP_LAYERNORM: a.value = 1e-5; break;
    case MC_OP_RMSNORM: a.value = 1e-6; break;
    case MC_OP_IOTA: a.dtype = MC_I32; break;
    case MC_OP_FULL: a.dtype = MC_F32; break;
    case MC_OP_LEAKY_RELU: a.alpha = 0.01; break;
    case MC_OP_CONV: a.groups = 1; break;
    case MC_OP_BATCHNORM: a.value = 1e-5; break;
    case MC_OP_PAD: case MC_OP_MAXPOOL: case MC_OP_AVGPOOL: break;
    case MC_OP_SLICE: a.start = MC_END, a.step = 1; break; /* start MC_END: the step's first end */
    case MC_OP_INPUT: case MC_OP_PARAM: case MC_OP_CONST: case MC_OP_NEG: case MC_OP_ABS:
    case MC_OP_EXP: case MC_OP_LOG: case MC_OP_SQRT: case MC_OP_RSQRT: case MC_OP_RECIP:
    case MC_OP_TANH: case MC_OP_SIGMOID: case MC_OP_RELU: case MC_OP_GELU: case MC_OP_GELU_TANH:
    case MC_OP_SILU: case MC_OP_SIN: case MC_OP_COS: case MC_OP_ERF:
    case MC_OP_FLOOR: case MC_OP_CEIL: case MC_OP_ROUND: case MC_OP_SIGN: case MC_OP_SOFTPLUS:
    case MC_OP_CLIP: case MC_OP_ADD:
    case MC_OP_SUB: case MC_OP_MUL: case MC_OP_DIV: case MC_OP_POW: case MC_OP_MAXIMUM:
    case MC_OP_MINIMUM: case MC_OP_EQ: case MC_OP_NE: case MC_OP_LT: case MC_OP_LE: case MC_OP_GT:
    case MC_OP_GE: case MC_OP_WHERE: case MC_OP_CAST: case MC_OP_SUM: case MC_OP_MEAN:
    case MC_OP_AND: case MC_OP_OR: case MC_OP_XOR: case MC_OP_NOT:
    case MC_OP_MAX: case MC_OP_MIN: case MC_OP_MATMUL: case MC_OP_LINEAR: case MC_OP_TRANSPOSE:
    case MC_OP_ARGMAX: case MC_OP_ARGMIN: case MC_OP_CUMSUM: case MC_OP_GATHER: case MC_OP_UPDATE:
    case MC_OP_RESHAPE: case MC_OP_EXPAND: case MC_OP_CONCAT: case MC_OP_ALLREDUCE: case MC_NUM_OPS:
        break;
    }
    return a;
}
