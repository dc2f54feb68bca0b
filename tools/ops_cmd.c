/* `minic ops [OPERATOR..]`: every operator a .graph file may use, with its signature, the
 * dtypes it accepts, its result's dtype and its kind (docs/FORMAT.md §2).
 *
 * Nothing here is a list of operators: the rows are ir/ops.def expanded (names, operands,
 * attribute keys and which are required), the defaults are mc_op_default_attrs, and the dtypes
 * are asked of the type rules (mc_op_accepts_dtype, the function mc_node_infer checks with).
 * An operator added to ops.def appears here without a change to this file, and what this
 * prints is what the parser and the type checker do.
 */
#include "tools/cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"

static const char *kind_name(mc_op op)
{
    switch (mc_op_table[op].kind) {
    case MC_KIND_LEAF: return "leaf";
    case MC_KIND_UNARY: return "unary";
    case MC_KIND_BINARY: return "binary";
    case MC_KIND_COMPARE: return "compare";
    case MC_KIND_SELECT: return "select";
    case MC_KIND_CAST: return "convert";
    case MC_KIND_REDUCE: return "reduce";
    case MC_KIND_NORM: return "normalize";
    case MC_KIND_MATMUL: return "linear algebra";
    case MC_KIND_SHAPE: return "shape";
    case MC_KIND_CREATE: return "create";
    case MC_KIND_SPATIAL: return "spatial";
    case MC_KIND_GATHER: return "index";
    case MC_KIND_COLLECTIVE: return "collective";
    }
    return "?";
}

/* The dtype of the result, in words. */
static const char *result_name(mc_op op)
{
    if (op == MC_OP_ARGMAX || op == MC_OP_ARGMIN)
        return "i32";
    if (op == MC_OP_UPDATE)
        return "cache's";
    switch (mc_op_table[op].kind) {
    case MC_KIND_COMPARE: return "bool";
    case MC_KIND_CAST: return "to";
    case MC_KIND_CREATE: return "dtype";
    case MC_KIND_SELECT: return "a's";
    case MC_KIND_LEAF: case MC_KIND_UNARY: case MC_KIND_BINARY: case MC_KIND_REDUCE:
    case MC_KIND_NORM: case MC_KIND_MATMUL: case MC_KIND_SHAPE: case MC_KIND_SPATIAL:
    case MC_KIND_COLLECTIVE:
        return "same";
    case MC_KIND_GATHER: return "x's";
    }
    return "?";
}

static void append(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t size, const char *fmt, ...)
{
    size_t used = strlen(buf);
    if (used + 1 >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, size - used, fmt, ap);
    va_end(ap);
}

/* `key=TYPE` (required), `key=DEFAULT` (optional), `key?=TYPE` (optional, its absence meaning
 * what the legend says). */
static void append_attribute(char *buf, size_t size, mc_op op, mc_attr_key key,
                             const mc_attrs *def)
{
    const char *name = mc_attr_names[key];
    bool required = mc_op_table[op].required & MC_ATTR_BIT(key);
    bool reduce = mc_op_table[op].kind == MC_KIND_REDUCE;
    switch (key) {
    case MC_ATTR_AXIS:
        if (required)
            append(buf, size, "%s=INT", name);
        else if (reduce)
            append(buf, size, "%s?=INT|[INT..]", name);
        else
            append(buf, size, "%s=%lld", name, (long long)def->axis);
        return;
    case MC_ATTR_KEEPDIM:
        append(buf, size, "%s=%s", name, def->keepdim ? "true" : "false");
        return;
    case MC_ATTR_START:
        if (def->start == MC_END)
            append(buf, size, "%s?=INT", name);
        else
            append(buf, size, "%s=%lld", name, (long long)def->start);
        return;
    case MC_ATTR_STEP:
        append(buf, size, "%s=%lld", name, (long long)def->step);
        return;
    case MC_ATTR_END:
        if (def->end == MC_END)
            append(buf, size, "%s?=INT", name);
        else
            append(buf, size, "%s=%lld", name, (long long)def->end);
        return;
    case MC_ATTR_PERM:
        append(buf, size, "%s%s=[INT..]", name, required ? "" : "?");
        return;
    case MC_ATTR_SHAPE:
        append(buf, size, "%s%s=[INT..]", name, required ? "" : "?");
        return;
    case MC_ATTR_EPS:
    case MC_ATTR_VALUE:
        if (required)
            append(buf, size, "%s=NUMBER", name);
        else
            append(buf, size, "%s=%g", name, def->value);
        return;
    case MC_ATTR_TO:
    case MC_ATTR_DTYPE:
        if (required)
            append(buf, size, "%s=DTYPE", name);
        else
            append(buf, size, "%s=%s", name, mc_dtype_name(def->dtype));
        return;
    case MC_ATTR_ALPHA:
        append(buf, size, "%s=%g", name, def->alpha);
        return;
    case MC_ATTR_MIN:
    case MC_ATTR_MAX:
        append(buf, size, "%s?=NUMBER", name);
        return;
    case MC_ATTR_PADS:
    case MC_ATTR_KERNEL:
        append(buf, size, "%s%s=[INT..]", name, required ? "" : "?");
        return;
    case MC_ATTR_STRIDE:
    case MC_ATTR_PADDING:
    case MC_ATTR_DILATION:
        append(buf, size, "%s?=[INT..]", name);
        return;
    case MC_ATTR_GROUPS:
        append(buf, size, "%s=%lld", name, (long long)def->groups);
        return;
    case MC_NUM_ATTRS:
        return;
    }
}

/* "softmax(x, axis=-1)" */
static void signature(mc_op op, char *buf, size_t size)
{
    const mc_op_info *info = &mc_op_table[op];
    mc_attrs def = mc_op_default_attrs(op);
    snprintf(buf, size, "%s(%s", info->name, info->operands);
    /* in the order docs/FORMAT.md §2 writes them: shape first, dtype last */
    static const mc_attr_key order[] = {MC_ATTR_SHAPE, MC_ATTR_PERM, MC_ATTR_AXIS, MC_ATTR_KEEPDIM,
                                        MC_ATTR_START, MC_ATTR_END, MC_ATTR_STEP, MC_ATTR_KERNEL, MC_ATTR_STRIDE,
                                        MC_ATTR_PADDING, MC_ATTR_DILATION, MC_ATTR_GROUPS, MC_ATTR_PADS,
                                        MC_ATTR_EPS, MC_ATTR_VALUE,
                                        MC_ATTR_ALPHA, MC_ATTR_MIN, MC_ATTR_MAX, MC_ATTR_TO, MC_ATTR_DTYPE};
    _Static_assert(sizeof order / sizeof order[0] == MC_NUM_ATTRS, "every key has its place");
    bool first = !info->operands[0];
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        if (!(info->attrs & MC_ATTR_BIT(order[i])))
            continue;
        append(buf, size, "%s", first ? "" : ", ");
        append_attribute(buf, size, op, order[i], &def);
        first = false;
    }
    append(buf, size, ")");
}

static void print_row(mc_op op)
{
    char sig[160], dtypes[64] = "";
    signature(op, sig, sizeof sig);
    for (int d = 0; d < MC_NUM_DTYPES; d++)
        if (mc_op_accepts_dtype(op, (mc_dtype)d))
            append(dtypes, sizeof dtypes, "%s%s", dtypes[0] ? " " : "", mc_dtype_name((mc_dtype)d));
    printf("%-46s  %-21s  %-7s  %s%s\n", sig, dtypes, result_name(op), kind_name(op),
           mc_op_is_composite(op) ? ", composite" : "");
}

static void print_help(void)
{
    printf("usage: minic ops [OPERATOR..]\n\n"
           "list every operator a .graph file may use (or the ones named): its signature, the\n"
           "dtypes it accepts, its result's dtype and its kind; read from the operator table and\n"
           "the type rules, so it is what the parser and the type checker accept\n");
}

static bool is_operator(const char *name, mc_op *op)
{
    return mc_op_parse(name, strlen(name), op) && mc_op_table[*op].kind != MC_KIND_LEAF;
}

int cli_ops(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            print_help();
            return CLI_OK;
        }
        mc_op op;
        if (argv[i][0] == '-')
            return cli_error(CLI_USER, "ops: unknown option '%s' (usage: minic ops [OPERATOR..])",
                             argv[i]);
        if (!is_operator(argv[i], &op)) {
            const char *names[MC_NUM_OPS];
            int n = 0;
            for (int k = 0; k < MC_NUM_OPS; k++)
                if (mc_op_table[k].kind != MC_KIND_LEAF)
                    names[n++] = mc_op_table[k].name;
            char near[256];
            if (mc_suggest(argv[i], strlen(argv[i]), names, n, near, sizeof near))
                return cli_error(CLI_USER, "ops: unknown operator '%s' (did you mean %s?)", argv[i],
                                 near);
            return cli_error(CLI_USER, "ops: unknown operator '%s' (minic ops lists them all)",
                             argv[i]);
        }
    }
    printf("%-46s  %-21s  %-7s  %s\n", "signature", "dtypes", "result", "kind");
    for (int k = 0; k < MC_NUM_OPS; k++) {
        mc_op op = (mc_op)k;
        if (mc_op_table[op].kind == MC_KIND_LEAF)
            continue;
        bool wanted = argc == 0;
        for (int i = 0; i < argc && !wanted; i++)
            wanted = !strcmp(argv[i], mc_op_table[op].name);
        if (wanted)
            print_row(op);
    }
    printf("\n"
           "KEY=TYPE is a required attribute, KEY=VALUE an optional one and its default; KEY?=TYPE\n"
           "is optional, and without it a reduction takes every axis, transpose reverses the axes\n"
           "and slice runs to the end of the axis. `b?` is an optional operand, `..` any number\n"
           "more. Operands have one dtype (no implicit promotion: use cast); a number operand\n"
           "takes the dtype of the other operand. result: `same` is the operands' dtype, `to` and\n"
           "`dtype` the attribute's. A composite is decomposed into the primitives above before\n"
           "fusion. f16 and bf16 compute in f32 and round once when stored.\n");
    return CLI_OK;
}
