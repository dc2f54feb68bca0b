/* The printer: a typed graph as .graph text that the parser reads back to the same graph.
 *
 * `minic check` and `minic dump --stage ...` print with this, and the tests re-parse what it
 * writes, so the output is real .graph syntax, not a debug format: declarations, one statement
 * per operator with every attribute written out in its normalized form, then `output`. Each
 * operator line ends with its inferred type as a comment (`# f32[64, 256]`), which is what makes
 * `check` useful to a person. Numbers are written with the fewest digits that read back to the
 * same double (at most %.17g), and as inf, -inf, nan.
 *
 * Number operands are CONST nodes: they are written inline where the parser will give them the
 * same dtype back (that of the first operand that is not a number, or f32; bool for where's
 * condition). A constant that is an output, has a
 * user name, or whose dtype the parser could not recover is written as its own statement,
 * `name = full(shape=[], value=V, dtype=D)`. Values without a user name print as t<index>,
 * with `_` appended in the rare case that a user named another value the same.
 */
#include "ir/ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct printer {
    const mc_graph *g;
    FILE *out;
    mc_name_map users; /* the user's names, so that t<index> never collides with one */
    bool *statement;   /* per node: printed as a statement (false only for inlined constants) */
    bool *max_printed; /* per symbol: its `<=MAX` was written (at its first declaration) */
} printer;

static const char *value_name(const printer *p, int i, char *buf, size_t size)
{
    const mc_node *n = &p->g->nodes[i];
    if (n->name)
        return n->name;
    int len = snprintf(buf, size, "t%d", i);
    while (mc_name_map_get(&p->users, buf) >= 0 && (size_t)len + 1 < size) {
        buf[len++] = '_';
        buf[len] = '\0';
    }
    return buf;
}

static void print_number(FILE *out, double v)
{
    if (isnan(v)) {
        fputs("nan", out);
        return;
    }
    if (isinf(v)) {
        fputs(v > 0 ? "inf" : "-inf", out);
        return;
    }
    char buf[40];
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, out);
}

static void print_list(FILE *out, const int64_t *list, int n)
{
    fputc('[', out);
    for (int i = 0; i < n; i++)
        fprintf(out, "%s%lld", i ? ", " : "", (long long)list[i]);
    fputc(']', out);
}

/* A list of dims: sizes, symbols, expressions. `declare`: a declaration's type, where a
 * symbol's maximum is written once (`T<=1024`, at its first use); `minus_one`: reshape's shape,
 * where an expression can only have come from a -1 and is written back as one. */
static void print_dims(const printer *p, const int64_t *list, int n, bool declare, bool minus_one)
{
    FILE *out = p->out;
    fputc('[', out);
    for (int i = 0; i < n; i++) {
        int k = mc_dim_as_sym(p->g, list[i]);
        char buf[256];
        fputs(i ? ", " : "", out);
        if (minus_one && mc_dim_is_sym(list[i]) && k < 0)
            fputs("-1", out);
        else
            fputs(mc_dim_str(p->g, list[i], buf, sizeof buf), out);
        if (declare && k >= 0 && mc_dim_sym_max(p->g, k) && !p->max_printed[k]) {
            fprintf(out, "<=%lld", (long long)mc_dim_sym_max(p->g, k));
            p->max_printed[k] = true;
        }
    }
    fputc(']', out);
}

static void print_type(const printer *p, const mc_node *n, bool declare)
{
    fputs(mc_dtype_name(n->dtype), p->out);
    print_dims(p, n->shape, n->rank, declare, false);
}

/* Would the parser give a number at operand j of n the dtype it has? It gives where's
 * condition bool, and any other number the dtype of the first value operand that is not a
 * number (where's condition aside), or f32 when there is none. */
static bool inline_keeps_dtype(const mc_graph *g, const mc_node *n, int j)
{
    bool select = n->op == MC_OP_WHERE;
    mc_dtype want = MC_F32;
    if (select && j == 0) {
        want = MC_BOOL;
    } else {
        for (int k = select ? 1 : 0; k < n->nin; k++)
            if (g->nodes[n->in[k]].op != MC_OP_CONST) {
                want = g->nodes[n->in[k]].dtype;
                break;
            }
    }
    return g->nodes[n->in[j]].dtype == want;
}

static void print_operand(const printer *p, int v)
{
    const mc_node *n = &p->g->nodes[v];
    if (!p->statement[v]) {
        print_number(p->out, n->attr.value);
        return;
    }
    char buf[48];
    fputs(value_name(p, v, buf, sizeof buf), p->out);
}

static void print_attrs(const printer *p, const mc_node *n)
{
    FILE *out = p->out;
    const mc_attrs *at = &n->attr;
    const char *sep = n->nin > 0 ? ", " : "";
    switch (mc_op_table[n->op].kind) {
    case MC_KIND_CAST:
        fprintf(out, "%sto=%s", sep, mc_dtype_name(at->dtype));
        break;
    case MC_KIND_REDUCE:
        if (at->has_list) {
            fprintf(out, "%saxis=", sep);
            print_list(out, at->list, at->nlist);
        }
        fprintf(out, "%skeepdim=%s", sep, at->keepdim ? "true" : "false");
        break;
    case MC_KIND_NORM:
        if (n->op == MC_OP_SOFTMAX || n->op == MC_OP_LOG_SOFTMAX || n->op == MC_OP_CUMSUM) {
            fprintf(out, "%saxis=%lld", sep, (long long)at->axis);
        } else {
            fprintf(out, "%seps=", sep);
            print_number(out, at->value);
        }
        break;
    case MC_KIND_SHAPE:
        switch (n->op) {
        case MC_OP_TRANSPOSE:
            fprintf(out, "%sperm=", sep);
            print_list(out, at->list, at->nlist);
            break;
        case MC_OP_RESHAPE:
        case MC_OP_EXPAND:
            fprintf(out, "%sshape=", sep);
            print_dims(p, at->list, at->nlist, false, n->op == MC_OP_RESHAPE);
            break;
        case MC_OP_SLICE:
            fprintf(out, "%saxis=%lld", sep, (long long)at->axis);
            if (at->start != MC_END) /* none: over a symbolic axis, kept as written (ir/infer.c) */
                fprintf(out, ", start=%lld", (long long)at->start);
            if (at->end != MC_END)
                fprintf(out, ", end=%lld", (long long)at->end);
            if (at->step != 1)
                fprintf(out, ", step=%lld", (long long)at->step);
            break;
        case MC_OP_CONCAT:
            fprintf(out, "%saxis=%lld", sep, (long long)at->axis);
            break;
        case MC_OP_INPUT: case MC_OP_PARAM: case MC_OP_CONST: case MC_OP_NEG: case MC_OP_ABS:
        case MC_OP_EXP: case MC_OP_LOG: case MC_OP_SQRT: case MC_OP_RSQRT: case MC_OP_RECIP:
        case MC_OP_TANH: case MC_OP_SIGMOID: case MC_OP_RELU: case MC_OP_GELU:
        case MC_OP_GELU_TANH: case MC_OP_SILU: case MC_OP_SIN: case MC_OP_COS: case MC_OP_ERF:
        case MC_OP_FLOOR: case MC_OP_CEIL: case MC_OP_ROUND: case MC_OP_SIGN: case MC_OP_SOFTPLUS:
        case MC_OP_LEAKY_RELU: case MC_OP_CLIP:
        case MC_OP_ADD: case MC_OP_SUB: case MC_OP_MUL: case MC_OP_DIV: case MC_OP_POW:
        case MC_OP_MAXIMUM: case MC_OP_MINIMUM: case MC_OP_EQ: case MC_OP_NE: case MC_OP_LT:
        case MC_OP_LE: case MC_OP_GT: case MC_OP_GE: case MC_OP_WHERE: case MC_OP_CAST:
        case MC_OP_AND: case MC_OP_OR: case MC_OP_XOR: case MC_OP_NOT:
        case MC_OP_SUM: case MC_OP_MEAN: case MC_OP_MAX: case MC_OP_MIN: case MC_OP_SOFTMAX:
        case MC_OP_ARGMAX: case MC_OP_ARGMIN: case MC_OP_CUMSUM: case MC_OP_GATHER: case MC_OP_UPDATE:
        case MC_OP_CONV: case MC_OP_MAXPOOL: case MC_OP_AVGPOOL: case MC_OP_PAD: case MC_OP_BATCHNORM:
        case MC_OP_LOG_SOFTMAX: case MC_OP_LAYERNORM: case MC_OP_RMSNORM: case MC_OP_MATMUL:
        case MC_OP_LINEAR: case MC_OP_IOTA: case MC_OP_FULL: case MC_OP_ALLREDUCE: case MC_NUM_OPS:
            break;
        }
        break;
    case MC_KIND_GATHER:
        fprintf(out, "%saxis=%lld", sep, (long long)at->axis);
        break;
    case MC_KIND_SPATIAL:
        if (n->op == MC_OP_PAD) {
            fprintf(out, "%spads=", sep);
            print_list(out, at->pads, at->npads);
            fputs(", value=", out);
            print_number(out, at->value);
        } else if (n->op == MC_OP_BATCHNORM) {
            fprintf(out, "%seps=", sep);
            print_number(out, at->value);
        } else {
            if (n->op != MC_OP_CONV) {
                fprintf(out, "%skernel=", sep);
                print_list(out, at->kernel, at->nkernel);
            }
            fprintf(out, "%sstride=", sep);
            print_list(out, at->stride, at->nstride);
            fputs(", padding=", out);
            print_list(out, at->padding, at->npadding);
            if (n->op == MC_OP_CONV) {
                fputs(", dilation=", out);
                print_list(out, at->dilation, at->ndilation);
                fprintf(out, ", groups=%lld", (long long)at->groups);
            }
        }
        break;
    case MC_KIND_CREATE:
        fputs("shape=", out);
        print_dims(p, at->list, at->nlist, false, false);
        if (n->op == MC_OP_IOTA) {
            fprintf(out, ", axis=%lld", (long long)at->axis);
        } else {
            fputs(", value=", out);
            print_number(out, at->value);
        }
        fprintf(out, ", dtype=%s", mc_dtype_name(at->dtype));
        break;
    case MC_KIND_UNARY:
        if (n->op == MC_OP_LEAKY_RELU) {
            fprintf(out, "%salpha=", sep);
            print_number(out, at->alpha);
        }
        if (n->op == MC_OP_CLIP && at->has_lo) {
            fprintf(out, "%smin=", sep);
            print_number(out, at->lo);
        }
        if (n->op == MC_OP_CLIP && at->has_hi) {
            fprintf(out, "%smax=", sep);
            print_number(out, at->hi);
        }
        break;
    case MC_KIND_MATMUL:
        if (at->nkernel > 0) { /* an implicit-GEMM conv's im2col of b (passes/decompose.c) */
            fprintf(out, "%sim2col_kernel=", sep);
            print_list(out, at->kernel, at->nkernel);
            fputs(", stride=", out);
            print_list(out, at->stride, at->nstride);
            fputs(", padding=", out);
            print_list(out, at->padding, at->npadding);
            fputs(", dilation=", out);
            print_list(out, at->dilation, at->ndilation);
        }
        break;
    case MC_KIND_LEAF: case MC_KIND_BINARY: case MC_KIND_COMPARE: case MC_KIND_SELECT:
    case MC_KIND_COLLECTIVE:
        break;
    }
}

static void print_node(const printer *p, int i)
{
    const mc_node *n = &p->g->nodes[i];
    FILE *out = p->out;
    char buf[48];
    const char *name = value_name(p, i, buf, sizeof buf);
    if (n->op == MC_OP_INPUT || n->op == MC_OP_PARAM) {
        fprintf(out, "%s %s : ", mc_op_table[n->op].name, name);
        print_type(p, n, true);
        fputc('\n', out);
        return;
    }
    if (n->op == MC_OP_CONST) {
        if (!p->statement[i])
            return;
        fprintf(out, "%s = full(shape=[], value=", name);
        print_number(out, n->attr.value);
        if (n->attr.per) { /* not the file format: only the passes make these (1/n over a symbol, or n itself) */
            char dim[96];
            fprintf(out, "%s(%s)", n->attr.times ? "*" : "/", mc_dim_str(p->g, n->attr.per, dim, sizeof dim));
        }
        fprintf(out, ", dtype=%s)  # ", mc_dtype_name(n->dtype));
        print_type(p, n, false);
        fputc('\n', out);
        return;
    }
    fprintf(out, "%s = %s(", name, mc_op_table[n->op].name);
    for (int j = 0; j < n->nin; j++) {
        if (j)
            fputs(", ", out);
        print_operand(p, n->in[j]);
    }
    print_attrs(p, n);
    fputs(")  # ", out);
    print_type(p, n, false);
    fputc('\n', out);
}

mc_status mc_graph_print(const mc_graph *g, FILE *out)
{
    if (!g || !out)
        return mc_fail(MC_ERR_INPUT, "mc_graph_print: no graph or no file");
    bool max_printed[MC_MAX_SYMS] = {0};
    printer p = {.g = g, .out = out, .max_printed = max_printed};
    p.statement = malloc(sizeof(bool) * (size_t)(g->nnodes > 0 ? g->nnodes : 1));
    if (!p.statement)
        return mc_fail(MC_ERR_SYSTEM, "out of memory printing the graph");
    mc_status st = MC_OK;
    for (int i = 0; i < g->nnodes; i++) {
        const mc_node *n = &g->nodes[i];
        p.statement[i] = n->op != MC_OP_CONST || n->name || n->attr.per;
        if (n->name && !mc_name_map_put(&p.users, n->name, i))
            st = mc_fail(MC_ERR_SYSTEM, "out of memory printing the graph");
        for (int j = 0; j < n->nin; j++)
            if (g->nodes[n->in[j]].op == MC_OP_CONST && !inline_keeps_dtype(g, n, j))
                p.statement[n->in[j]] = true;
    }
    for (int i = 0; i < g->noutputs; i++)
        p.statement[g->outputs[i]] = true;
    if (st == MC_OK) {
        if (g->name && mc_name_is_valid(g->name))
            fprintf(out, "graph %s\n", g->name);
        for (int i = 0; i < g->nnodes; i++)
            print_node(&p, i);
        if (g->noutputs > 0) {
            fputs("output ", out);
            for (int i = 0; i < g->noutputs; i++) {
                char buf[48];
                fprintf(out, "%s%s", i ? ", " : "", value_name(&p, g->outputs[i], buf, sizeof buf));
            }
            fputc('\n', out);
        }
        if (fflush(out) != 0 || ferror(out))
            st = mc_fail(MC_ERR_SYSTEM, "could not write the graph");
    }
    mc_name_map_free(&p.users);
    free(p.statement);
    return st;
}
