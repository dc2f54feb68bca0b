/* Tensor parallelism: the column/row split of a graph's linear layers over n ranks (issue 24).
 *
 * Requires: a valid user graph (before decomposition: linear, layernorm and softmax are still
 * themselves). Produces a plan (which values are split along which dimension) and, per rank, a
 * graph that computes that rank's part: the graph each rank's program compiles as usual.
 *
 * The standard split (Megatron-LM's, as TensorRT-LLM, vLLM and llama.cpp use it): a row-parallel
 * linear `linear(x, W2, b2)` whose input x each rank holds only a slice of along the contracted
 * dimension computes a partial product with the matching rows of W2; an `allreduce` sums the
 * partials, then the bias is added once. The slices of x come from column-parallel linears
 * earlier on (`linear(h, W1, b1)` with h whole on every rank and W1, b1 split by output
 * features), through whatever lies between, as long as every operator there works on the
 * slices independently: pointwise operators (the other operands broadcast or split alike),
 * reshapes and transposes that carry the split dimension along, slices that cut a fused QKV
 * projection into q, k and v, batched matmuls over the split (head) dimension, softmax and
 * reductions over other dimensions. That is an attention block between the QKV projection and
 * the output projection, and an MLP between fc and its output projection.
 *
 * A split descriptor of a value is (dim, outer): its dimension `dim` of size S is viewed as
 * [outer][n][S / (outer·n)] and rank r holds [:, r, :]. outer is 1 except upstream of slices
 * that cut a dimension into equal sections: the fused QKV projection's features are [3][n][C/n]
 * so that each rank's q, k and v are one contiguous third of its part.
 *
 * The analysis tries every linear and matmul whose weight is a param as a row-parallel one, in
 * graph order: it demands the input split along the contracted dimension and propagates demands
 * backwards (region_demand, one rule per operator in region_expand) until they end at params
 * (which are then split) and at operands every rank holds whole. The candidate is refused, and
 * stays replicated, when a demand reaches an input, a graph output, an operator that cannot
 * work on slices (a layernorm over the split dimension, a softmax or reduction over it, a
 * convolution...), a size that does not divide among the ranks, a value split two ways, a value
 * another accepted pair already split, or when a split value (params included) is also read by
 * something outside the region. The plan's notes say, per linear, what was decided and why.
 *
 * Each rank's graph has the same nodes but with local shapes: params split (their names kept),
 * reshape/expand/iota/full shapes and slice bounds scaled, and each row-parallel linear turned
 * into linear-without-bias -> allreduce -> add(bias). Every node is built through mc_graph_add,
 * so each is type-checked, and its shape is checked against the one the plan expects.
 */
#include "passes/passes.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct shard_split {
    int dim;       /* the split dimension, or -1: every rank holds the whole value */
    int64_t outer; /* sections along it: [outer][n][size / (outer * n)] */
} shard_split;

struct mc_shard_plan {
    int n;              /* ranks */
    int nnodes;         /* of the graph the plan was made for */
    shard_split *split; /* per node */
    bool *row;          /* per node: a row-parallel linear or matmul */
    int nrow;
    mc_strbuf notes;    /* one line per decision; notes.oom if an append failed */
};

/* ---- notes ---------------------------------------------------------------------------------- */

static void note(mc_shard_plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(mc_shard_plan *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mc_sb_vprintf(&p->notes, fmt, ap);
    va_end(ap);
    mc_sb_puts(&p->notes, "\n");
}

/* ---- the region of one candidate ----------------------------------------------------------- */

typedef struct region {
    const mc_graph *g;
    mc_shard_plan *plan;
    const int *user_start, *users; /* CSR: the live users of each node */
    const bool *is_output, *claimed;
    int row;        /* the candidate: the row-parallel linear or matmul */
    int *dim;       /* per node: -2 not reached, -1 read whole, >= 0 the split dimension */
    int64_t *outer;
    int *stack, top;
    int *touched, ntouched;
    int *columns, ncolumns; /* the params split as column-parallel weights */
    char why[512];
} region;

static const char *nm(const mc_graph *g, int v, char *buf, size_t size) { return mc_node_name(g, v, buf, size); }

static bool refuse(region *R, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool refuse(region *R, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(R->why, sizeof R->why, fmt, ap);
    va_end(ap);
    return false;
}

static void touch(region *R, int v, int dim, int64_t outer)
{
    if (R->dim[v] == -2)
        R->touched[R->ntouched++] = v;
    R->dim[v] = dim;
    R->outer[v] = outer;
}

/* v is needed split along dim with `outer` sections. */
static bool region_demand(region *R, int v, int dim, int64_t outer)
{
    const mc_graph *g = R->g;
    const mc_node *n = &g->nodes[v];
    char b[160], c[160];
    if (R->dim[v] >= 0) {
        if (R->dim[v] == dim && R->outer[v] == outer)
            return true;
        return refuse(R, "'%s' would be split two ways (dimension %d in %lld sections and dimension %d in %lld)",
                      nm(g, v, b, sizeof b), R->dim[v], (long long)R->outer[v], dim, (long long)outer);
    }
    if (R->dim[v] == -1)
        return refuse(R, "'%s' would be split but is also read whole", nm(g, v, b, sizeof b));
    if (R->claimed[v] && R->plan->split[v].dim < 0)
        return refuse(R, "the split reaches '%s', a row-parallel linear's sum, which every rank holds whole",
                      nm(g, v, b, sizeof b));
    if (R->claimed[v])
        return refuse(R, "'%s' is already split for another linear", nm(g, v, b, sizeof b));
    if (R->is_output[v])
        return refuse(R, "'%s' would be split but is a graph output", nm(g, v, b, sizeof b));
    if (n->op == MC_OP_INPUT)
        return refuse(R, "the split reaches input '%s', which every rank holds whole, before any linear "
                      "that could be split by columns", nm(g, v, b, sizeof b));
    if (dim < 0 || dim >= n->rank)
        return refuse(R, "'%s' has no dimension %d to split", nm(g, v, b, sizeof b), dim);
    int64_t size = n->shape[dim];
    if (mc_dim_is_sym(size))
        return refuse(R, "dimension %d of '%s' is symbolic (%s): only fixed sizes are split", dim,
                      nm(g, v, b, sizeof b), mc_dim_str(g, size, c, sizeof c));
    if (size % (outer * R->plan->n) != 0) {
        if (outer > 1)
            return refuse(R, "dimension %d of '%s' (size %lld, %lld sections) does not divide among %d ranks",
                          dim, nm(g, v, b, sizeof b), (long long)size, (long long)outer, R->plan->n);
        return refuse(R, "dimension %d of '%s' (size %lld) does not divide among %d ranks", dim,
                      nm(g, v, b, sizeof b), (long long)size, R->plan->n);
    }
    touch(R, v, dim, outer);
    R->stack[R->top++] = v;
    return true;
}

/* v is read whole by a node of the region (a broadcast operand, a weight, a bias). */
static bool region_whole(region *R, int v)
{
    char b[160];
    if (R->dim[v] >= 0)
        return refuse(R, "'%s' would be split but is also read whole", nm(R->g, v, b, sizeof b));
    if (R->claimed[v] && R->plan->split[v].dim >= 0)
        return refuse(R, "'%s' is already split for another linear", nm(R->g, v, b, sizeof b));
    if (R->dim[v] == -2)
        touch(R, v, -1, 1);
    return true;
}

/* An operand that broadcasts into a result split along dim: split alike where it has that
 * dimension at full size, else read whole. */
static bool region_broadcast(region *R, int v, int operand, int dim, int64_t outer)
{
    const mc_node *n = &R->g->nodes[v], *a = &R->g->nodes[operand];
    int ad = dim - (n->rank - a->rank);
    if (ad < 0 || a->shape[ad] == 1)
        return region_whole(R, operand);
    return region_demand(R, operand, ad, outer);
}

static int64_t perm_at(const mc_node *t, int d) { return t->attr.has_list ? t->attr.list[d] : t->rank - 1 - d; }

/* reshape: the dimension of x that carries v's split dimension d: the one at the same offset
 * (the product of the dimensions before it, symbolic ones too: equal products are equal dims),
 * of size > 1. The rank parts of v and x are then the same elements in the same order. -1 when
 * there is none. */
static int reshape_source(const mc_graph *g, const mc_node *v, const mc_node *x, int d)
{
    int64_t before = 1, p = 1;
    for (int j = 0; j < d; j++)
        if (!mc_dim_mul(g, before, v->shape[j], &before))
            return -1;
    for (int e = 0; e < x->rank; e++) {
        if (p == before && x->shape[e] != 1)
            return e;
        if (!mc_dim_mul(g, p, x->shape[e], &p))
            return -1;
    }
    return -1;
}

/* The rule of v's operator: v is split along (dim, outer); what must its operands be? */
static bool region_expand(region *R, int v)
{
    const mc_graph *g = R->g;
    const mc_node *n = &g->nodes[v];
    int dim = R->dim[v];
    int64_t outer = R->outer[v];
    char b[160];
    const char *op = mc_op_table[n->op].name;
    switch (mc_op_table[n->op].kind) {
    case MC_KIND_LEAF:
        return true; /* a param: split (an input or a constant never gets here) */
    case MC_KIND_UNARY:
    case MC_KIND_CAST:
        return region_demand(R, n->in[0], dim, outer);
    case MC_KIND_BINARY:
    case MC_KIND_COMPARE:
    case MC_KIND_SELECT:
        for (int k = 0; k < n->nin; k++)
            if (!region_broadcast(R, v, n->in[k], dim, outer))
                return false;
        return true;
    case MC_KIND_REDUCE: {
        const mc_node *x = &g->nodes[n->in[0]];
        bool reduced[MC_MAX_RANK] = {false};
        for (int i = 0; i < n->attr.nlist; i++)
            reduced[n->attr.list[i]] = true;
        int xd = -1;
        for (int e = 0, o = 0; e < x->rank && xd < 0; e++) {
            if (reduced[e] && !n->attr.keepdim)
                continue;
            if (o == dim)
                xd = e;
            o++;
        }
        if (xd < 0 || reduced[xd])
            return refuse(R, "%s '%s' (line %d) reduces over the split dimension", op, nm(g, v, b, sizeof b), n->line);
        return region_demand(R, n->in[0], xd, outer);
    }
    case MC_KIND_NORM:
        if (n->op == MC_OP_LAYERNORM || n->op == MC_OP_RMSNORM) {
            if (dim == n->rank - 1)
                return refuse(R, "its input is normalized over the split dimension (%s '%s', line %d)", op,
                              nm(g, v, b, sizeof b), n->line);
            for (int k = 1; k < n->nin; k++)
                if (!region_whole(R, n->in[k]))
                    return false;
            return region_demand(R, n->in[0], dim, outer);
        }
        if (n->attr.axis == dim)
            return refuse(R, "%s '%s' (line %d) runs along the split dimension", op, nm(g, v, b, sizeof b), n->line);
        return region_demand(R, n->in[0], dim, outer);
    case MC_KIND_MATMUL: {
        const mc_node *a = &g->nodes[n->in[0]], *w = &g->nodes[n->in[1]];
        if (n->op == MC_OP_LINEAR) {
            if (dim == n->rank - 1) { /* column-parallel: x whole, w and b by output features */
                if (!region_whole(R, n->in[0]) || !region_demand(R, n->in[1], 0, outer) ||
                    (n->nin > 2 && !region_demand(R, n->in[2], 0, outer)))
                    return false;
                if (w->op == MC_OP_PARAM)
                    R->columns[R->ncolumns++] = n->in[1];
                return true;
            }
            for (int k = 1; k < n->nin; k++)
                if (!region_whole(R, n->in[k]))
                    return false;
            return region_demand(R, n->in[0], dim, outer);
        }
        if (dim == n->rank - 1) { /* columns of b */
            if (!region_whole(R, n->in[0]) || !region_demand(R, n->in[1], w->rank - 1, outer))
                return false;
            if (w->op == MC_OP_PARAM)
                R->columns[R->ncolumns++] = n->in[1];
            return true;
        }
        if (dim == n->rank - 2) /* rows of a */
            return region_demand(R, n->in[0], a->rank - 2, outer) && region_whole(R, n->in[1]);
        return region_broadcast(R, v, n->in[0], dim, outer) && region_broadcast(R, v, n->in[1], dim, outer);
    }
    case MC_KIND_SHAPE: {
        const mc_node *x = &g->nodes[n->in[0]];
        if (n->op == MC_OP_TRANSPOSE)
            return region_demand(R, n->in[0], (int)perm_at(n, dim), outer);
        if (n->op == MC_OP_EXPAND)
            return region_broadcast(R, v, n->in[0], dim, outer);
        if (n->op == MC_OP_RESHAPE) {
            int e = reshape_source(g, n, x, dim);
            if (e < 0)
                return refuse(R, "reshape '%s' (line %d) moves the split dimension across others", nm(g, v, b, sizeof b),
                              n->line);
            if (x->shape[e] % (outer * R->plan->n) != 0)
                return refuse(R, "dimension %d of '%s' has %lld entries (the heads, where it is reshaped), which do not "
                              "divide among %d ranks", e, nm(g, n->in[0], b, sizeof b), (long long)x->shape[e],
                              R->plan->n);
            return region_demand(R, n->in[0], e, outer);
        }
        if (n->op == MC_OP_SLICE) {
            if (n->attr.axis != dim)
                return region_demand(R, n->in[0], dim, outer);
            int64_t len = n->shape[dim], size = x->shape[dim];
            if (n->attr.step != 1 || size % len != 0 || n->attr.start % len != 0)
                return refuse(R, "slice '%s' (line %d) does not cut the split dimension into equal sections",
                              nm(g, v, b, sizeof b), n->line);
            return region_demand(R, n->in[0], dim, outer * (size / len));
        }
        /* concat */
        if (n->attr.axis == dim)
            return refuse(R, "concat '%s' (line %d) joins along the split dimension", nm(g, v, b, sizeof b), n->line);
        for (int k = 0; k < n->nin; k++)
            if (!region_demand(R, n->in[k], dim, outer))
                return false;
        return true;
    }
    case MC_KIND_CREATE:
        if (n->op == MC_OP_IOTA && n->attr.axis == dim)
            return refuse(R, "iota '%s' (line %d) counts along the split dimension", nm(g, v, b, sizeof b), n->line);
        return true;
    case MC_KIND_SPATIAL:
    case MC_KIND_GATHER:
    case MC_KIND_COLLECTIVE:
        break;
    }
    return refuse(R, "%s '%s' (line %d) cannot be split", op, nm(g, v, b, sizeof b), n->line);
}

/* The weight param of a linear or matmul candidate, or -1. */
static int weight_of(const mc_graph *g, int c)
{
    const mc_node *n = &g->nodes[c];
    if ((n->op != MC_OP_LINEAR && n->op != MC_OP_MATMUL) || n->nin < 2)
        return -1;
    const mc_node *w = &g->nodes[n->in[1]];
    if (w->op != MC_OP_PARAM || w->rank != 2 || g->nodes[n->in[0]].rank < 2)
        return -1;
    return n->in[1];
}

static void region_reset(region *R)
{
    for (int t = 0; t < R->ntouched; t++)
        R->dim[R->touched[t]] = -2;
    R->ntouched = 0;
    R->top = 0;
    R->ncolumns = 0;
    R->why[0] = '\0';
}

/* Try candidate c as a row-parallel linear. On success the region's split values are in
 * R->dim; on refusal R->why says why. */
static bool region_try(region *R, int c)
{
    const mc_graph *g = R->g;
    const mc_node *n = &g->nodes[c];
    const mc_node *x = &g->nodes[n->in[0]];
    char b[160], d[160];
    region_reset(R);
    R->row = c;
    if (R->claimed[c])
        return refuse(R, "it is split by columns for another linear");
    touch(R, c, -1, 1);
    /* the partial product: x and w along the contracted dimension; the bias after the sum */
    if (!region_demand(R, n->in[0], x->rank - 1, 1) ||
        !region_demand(R, n->in[1], n->op == MC_OP_LINEAR ? 1 : 0, 1) ||
        (n->nin > 2 && !region_whole(R, n->in[2])))
        return false;
    while (R->top > 0) {
        int v = R->stack[--R->top];
        if (!region_expand(R, v))
            return false;
    }
    if (R->ncolumns == 0)
        return refuse(R, "no linear before it can be split by columns");
    /* Every reader of a split value must work on the parts: the region's nodes and the
     * candidate itself (which reads x and w). */
    for (int t = 0; t < R->ntouched; t++) {
        int v = R->touched[t];
        if (R->dim[v] < 0)
            continue;
        for (int u = R->user_start[v]; u < R->user_start[v + 1]; u++) {
            int w = R->users[u];
            if (w != c && R->dim[w] < 0)
                return refuse(R, "'%s' would be split but %s '%s' (line %d) reads it whole", nm(g, v, b, sizeof b),
                              mc_op_table[g->nodes[w].op].name, nm(g, w, d, sizeof d), g->nodes[w].line);
        }
    }
    return true;
}

/* ---- the plan ------------------------------------------------------------------------------- */

void mc_shard_plan_free(mc_shard_plan *plan)
{
    if (!plan)
        return;
    free(plan->split);
    free(plan->row);
    mc_sb_free(&plan->notes);
    free(plan);
}

static void note_region(mc_shard_plan *p, const region *R)
{
    const mc_graph *g = R->g;
    char line[900] = "", b[160];
    size_t len = 0;
    for (int i = 1; i < R->ncolumns; i++) /* in graph order */
        for (int j = i; j > 0 && R->columns[j - 1] > R->columns[j]; j--) {
            int t = R->columns[j];
            R->columns[j] = R->columns[j - 1];
            R->columns[j - 1] = t;
        }
    for (int k = 0; k < R->ncolumns; k++) {
        int w = R->columns[k];
        len += (size_t)snprintf(line + len, len < sizeof line ? sizeof line - len : 0, "%s%s (columns", k ? ", " : "",
                                nm(g, w, b, sizeof b));
        if (R->outer[w] > 1 && len < sizeof line)
            len += (size_t)snprintf(line + len, sizeof line - len, ", %lld sections", (long long)R->outer[w]);
        if (len < sizeof line)
            len += (size_t)snprintf(line + len, sizeof line - len, ")");
    }
    const mc_node *c = &g->nodes[R->row];
    char rn[160];
    note(p, "sharded %s / %s (rows): %d ranks, one allreduce after '%s' (line %d)", line,
         nm(g, c->in[1], b, sizeof b), p->n, nm(g, R->row, rn, sizeof rn), c->line);
}

mc_status mc_shard_plan_make(const mc_graph *g, int n, mc_shard_plan **out)
{
    if (!out)
        return mc_fail(MC_ERR_INPUT, "mc_shard_plan_make: no place for the plan (NULL)");
    *out = NULL;
    if (!g || g->failed || g->noutputs == 0)
        return mc_fail(MC_ERR_INPUT, "mc_shard_plan_make: no graph, or one without outputs");
    if (n < 1 || n > 1024)
        return mc_fail(MC_ERR_INPUT, "mc_shard_plan_make: %d ranks: expected 1 to 1024", n);
    int nn = g->nnodes;
    size_t cnt = (size_t)(nn > 0 ? nn : 1);
    mc_shard_plan *p = calloc(1, sizeof *p);
    region R = {.g = g, .plan = p};
    bool *live = calloc(cnt, sizeof *live), *is_output = calloc(cnt, sizeof *is_output);
    bool *claimed = calloc(cnt, sizeof *claimed);
    int *user_start = calloc(cnt + 1, sizeof *user_start);
    int nedges = 0;
    for (int i = 0; i < nn; i++)
        nedges += g->nodes[i].nin;
    int *users = malloc(sizeof *users * (size_t)(nedges > 0 ? nedges : 1));
    int *fill = calloc(cnt, sizeof *fill);
    R.dim = malloc(sizeof *R.dim * cnt);
    R.outer = calloc(cnt, sizeof *R.outer);
    R.stack = malloc(sizeof *R.stack * cnt);
    R.touched = malloc(sizeof *R.touched * cnt);
    R.columns = malloc(sizeof *R.columns * cnt);
    mc_status st = MC_OK;
    if (!p || !live || !is_output || !claimed || !user_start || !users || !fill || !R.dim || !R.outer ||
        !R.stack || !R.touched || !R.columns) {
        st = mc_fail(MC_ERR_SYSTEM, "out of memory planning the sharding");
        goto done;
    }
    p->n = n;
    p->nnodes = nn;
    p->split = malloc(sizeof *p->split * cnt);
    p->row = calloc(cnt, sizeof *p->row);
    if (!p->split || !p->row) {
        st = mc_fail(MC_ERR_SYSTEM, "out of memory planning the sharding");
        goto done;
    }
    for (int i = 0; i < nn; i++) {
        p->split[i] = (shard_split){-1, 1};
        R.dim[i] = -2;
    }
    /* Liveness and the live users of every node. */
    for (int o = 0; o < g->noutputs; o++)
        live[g->outputs[o]] = is_output[g->outputs[o]] = true;
    for (int i = nn - 1; i >= 0; i--)
        for (int k = 0; live[i] && k < g->nodes[i].nin; k++)
            if (g->nodes[i].in[k] >= 0)
                live[g->nodes[i].in[k]] = true;
    for (int i = 0; i < nn; i++)
        for (int k = 0; live[i] && k < g->nodes[i].nin; k++)
            if (g->nodes[i].in[k] >= 0)
                user_start[g->nodes[i].in[k] + 1]++;
    for (int i = 0; i < nn; i++)
        user_start[i + 1] += user_start[i];
    for (int i = 0; i < nn; i++)
        for (int k = 0; live[i] && k < g->nodes[i].nin; k++) {
            int j = g->nodes[i].in[k];
            if (j < 0)
                continue;
            bool dup = false; /* one entry per (operand, user) */
            for (int u = user_start[j]; u < user_start[j] + fill[j] && !dup; u++)
                dup = users[u] == i;
            if (!dup)
                users[user_start[j] + fill[j]++] = i;
        }
    /* users[] of node j: user_start[j] .. user_start[j] + fill[j]; compact the CSR */
    {
        int w = 0;
        for (int j = 0; j < nn; j++) {
            int s = user_start[j], f = fill[j];
            user_start[j] = w;
            memmove(users + w, users + s, sizeof *users * (size_t)f);
            w += f;
        }
        user_start[nn] = w;
    }
    R.user_start = user_start;
    R.users = users;
    R.is_output = is_output;
    R.claimed = claimed;

    /* Candidates in graph order; a refusal is remembered until the end, where a weight that a
     * later pair split by columns needs no line of its own. */
    int ncand = 0;
    char **why = calloc(cnt, sizeof *why);
    if (!why) {
        st = mc_fail(MC_ERR_SYSTEM, "out of memory planning the sharding");
        goto done;
    }
    for (int c = 0; c < nn; c++) {
        if (!live[c] || weight_of(g, c) < 0)
            continue;
        ncand++;
        if (!region_try(&R, c)) {
            why[c] = strdup(R.why);
            continue;
        }
        for (int t = 0; t < R.ntouched; t++) {
            int v = R.touched[t];
            if (R.dim[v] >= 0) {
                claimed[v] = true;
                p->split[v] = (shard_split){R.dim[v], R.outer[v]};
            }
        }
        claimed[c] = true;
        p->row[c] = true;
        p->nrow++;
        note_region(p, &R);
        region_reset(&R);
    }
    int nsplit_lin = 0;
    for (int c = 0; c < nn; c++) {
        char b[160];
        if (live[c] && weight_of(g, c) >= 0 && !p->row[c] && p->split[weight_of(g, c)].dim < 0)
            note(p, "%s stays replicated: %s", nm(g, weight_of(g, c), b, sizeof b), why[c] ? why[c] : "out of memory");
        else if (live[c] && weight_of(g, c) >= 0)
            nsplit_lin++;
        free(why[c]);
    }
    free(why);
    if (ncand == 0)
        note(p, "nothing to split: no linear or matmul has a param weight; 0 allreduces");
    else
        note(p, "%d ranks: %d of %d linear layers split (%d row-parallel), %d allreduce%s per rank", n, nsplit_lin,
             ncand, p->nrow, p->nrow, p->nrow == 1 ? "" : "s");
    if (p->notes.oom)
        st = mc_fail(MC_ERR_SYSTEM, "out of memory planning the sharding");
done:
    free(live);
    free(is_output);
    free(claimed);
    free(user_start);
    free(users);
    free(fill);
    free(R.dim);
    free(R.outer);
    free(R.stack);
    free(R.touched);
    free(R.columns);
    if (st != MC_OK) {
        mc_shard_plan_free(p);
        return st;
    }
    *out = p;
    return MC_OK;
}

const char *mc_shard_plan_notes(const mc_shard_plan *plan)
{
    return plan && plan->notes.data ? plan->notes.data : "";
}
int mc_shard_plan_allreduces(const mc_shard_plan *plan) { return plan ? plan->nrow : 0; }
int mc_shard_plan_ranks(const mc_shard_plan *plan) { return plan ? plan->n : 0; }

int mc_shard_plan_split_dim(const mc_shard_plan *plan, int node)
{
    if (!plan || node < 0 || node >= plan->nnodes)
        return -1;
    return plan->split[node].dim;
}

/* ---- params --------------------------------------------------------------------------------- */

static bool plan_fits(const mc_shard_plan *plan, const mc_graph *g, int node)
{
    return plan && g && plan->nnodes == g->nnodes && node >= 0 && node < g->nnodes;
}

size_t mc_shard_param_bytes(const mc_shard_plan *plan, const mc_graph *g, int node, int rank)
{
    if (!plan_fits(plan, g, node) || rank < 0 || rank >= plan->n)
        return 0;
    const mc_node *n = &g->nodes[node];
    if (n->op != MC_OP_PARAM && n->op != MC_OP_INPUT)
        return 0;
    int64_t numel = mc_node_numel(n);
    if (plan->split[node].dim >= 0)
        numel /= plan->n;
    return (size_t)numel * mc_dtype_size(n->dtype);
}

void mc_shard_param_slice(const mc_shard_plan *plan, const mc_graph *g, int node, int rank, const void *full,
                          void *part)
{
    size_t bytes = mc_shard_param_bytes(plan, g, node, rank);
    if (bytes == 0 || !full || !part)
        return;
    const mc_node *n = &g->nodes[node];
    shard_split s = plan->split[node];
    if (s.dim < 0) {
        memcpy(part, full, bytes);
        return;
    }
    /* full: [pre][outer][n][block][post]; the part: [pre][outer][block][post] */
    int64_t pre = 1, post = (int64_t)mc_dtype_size(n->dtype);
    for (int d = 0; d < s.dim; d++)
        pre *= n->shape[d];
    for (int d = s.dim + 1; d < n->rank; d++)
        post *= n->shape[d];
    int64_t block = n->shape[s.dim] / (s.outer * plan->n);
    size_t run = (size_t)(block * post);
    const char *src = full;
    char *dst = part;
    for (int64_t p = 0; p < pre; p++)
        for (int64_t o = 0; o < s.outer; o++) {
            int64_t section = p * s.outer + o;
            memcpy(dst + (size_t)section * run, src + ((size_t)section * (size_t)plan->n + (size_t)rank) * run, run);
        }
}

/* ---- the rank graphs ------------------------------------------------------------------------ */

static void local_shape(const mc_shard_plan *plan, const mc_node *n, shard_split s, int64_t *shape)
{
    memcpy(shape, n->shape, sizeof(int64_t) * (size_t)n->rank);
    if (s.dim >= 0)
        shape[s.dim] /= plan->n;
}

static void place(mc_graph *dst, mc_value v, const mc_node *like, mc_op origin)
{
    if (v < 0)
        return;
    dst->nodes[v].line = like->line;
    dst->nodes[v].col = like->col;
    dst->nodes[v].origin = origin;
}

/* Node i of g in the rank graph, its operands already there (map). */
static mc_value rank_node(const mc_graph *g, const mc_shard_plan *plan, int i, const mc_value *map, mc_graph *dst)
{
    const mc_node *n = &g->nodes[i];
    shard_split s = plan->split[i];
    int64_t shape[MC_MAX_RANK];
    local_shape(plan, n, s, shape);
    if (n->op == MC_OP_INPUT || n->op == MC_OP_PARAM)
        return mc_graph_declare(dst, n->op, n->name, n->dtype, shape, n->rank, n->line, n->col);
    if (n->op == MC_OP_CONST) {
        mc_value v = mc_scalar(dst, n->attr.value, n->dtype);
        place(dst, v, n, n->origin);
        return v;
    }
    mc_value in[64];
    if (n->nin > 64) {
        mc_fail(MC_ERR_INPUT, "sharding: %s has %d operands, more than 64", mc_op_table[n->op].name, n->nin);
        return MC_ERROR;
    }
    for (int k = 0; k < n->nin; k++)
        in[k] = map[n->in[k]];
    mc_attrs at = n->attr;
    if (plan->row[i]) { /* the partial product, its sum over the ranks, then the bias once */
        mc_value part = mc_graph_add(dst, n->op, in, 2, &at, n->line, n->col);
        place(dst, part, n, n->origin);
        mc_value sum = mc_graph_add(dst, MC_OP_ALLREDUCE, &part, 1, &(mc_attrs){0}, n->line, n->col);
        place(dst, sum, n, MC_OP_ALLREDUCE);
        if (n->op != MC_OP_LINEAR || n->nin < 3)
            return sum;
        mc_value biased = mc_graph_add(dst, MC_OP_ADD, (mc_value[]){sum, in[2]}, 2, &(mc_attrs){0}, n->line, n->col);
        place(dst, biased, n, n->origin);
        return biased;
    }
    if (n->op == MC_OP_RESHAPE || n->op == MC_OP_EXPAND || n->op == MC_OP_IOTA || n->op == MC_OP_FULL) {
        at.has_list = true;
        at.nlist = n->rank;
        memcpy(at.list, shape, sizeof(int64_t) * (size_t)n->rank);
    } else if (n->op == MC_OP_SLICE && s.dim == n->attr.axis) {
        at.start = n->attr.start / plan->n;
        at.end = (n->attr.start + n->shape[s.dim]) / plan->n;
    }
    mc_value v = mc_graph_add(dst, n->op, in, n->nin, &at, n->line, n->col);
    place(dst, v, n, n->origin);
    return v;
}

mc_status mc_shard_graph(const mc_graph *g, const mc_shard_plan *plan, int rank, mc_graph **out)
{
    if (!out)
        return mc_fail(MC_ERR_INPUT, "mc_shard_graph: no place for the graph (NULL)");
    *out = NULL;
    if (!g || !plan || plan->nnodes != g->nnodes)
        return mc_fail(MC_ERR_INPUT, "mc_shard_graph: no graph, or a plan made for another graph");
    if (rank < 0 || rank >= plan->n)
        return mc_fail(MC_ERR_INPUT, "mc_shard_graph: rank %d of %d", rank, plan->n);
    int nn = g->nnodes;
    mc_graph *dst = mc_graph_new(g->name);
    mc_value *map = malloc(sizeof *map * (size_t)(nn > 0 ? nn : 1));
    bool *live = calloc((size_t)(nn > 0 ? nn : 1), sizeof *live);
    mc_status st = MC_OK;
    if (!dst || !map || !live) {
        st = mc_fail(MC_ERR_SYSTEM, "out of memory sharding the graph");
        goto fail;
    }
    if ((g->file && !(dst->file = mc_arena_strdup(&dst->arena, g->file))) ||
        (g->text && !(dst->text = mc_arena_strdup(&dst->arena, g->text))) ||
        (g->dims && !(dst->dims = mc_dims_clone(g->dims)))) {
        st = mc_fail(MC_ERR_SYSTEM, "out of memory sharding the graph");
        goto fail;
    }
    for (int o = 0; o < g->noutputs; o++)
        live[g->outputs[o]] = true;
    for (int i = nn - 1; i >= 0; i--)
        for (int k = 0; live[i] && k < g->nodes[i].nin; k++)
            live[g->nodes[i].in[k]] = true;
    for (int i = 0; i < nn; i++) {
        const mc_node *n = &g->nodes[i];
        map[i] = MC_NONE;
        if (!live[i] && n->op != MC_OP_INPUT && n->op != MC_OP_PARAM)
            continue; /* dead: its operands may be split in ways it cannot read */
        mc_value v = rank_node(g, plan, i, map, dst);
        if (v < 0) {
            st = mc_error_status() != MC_OK ? mc_error_status() : MC_ERR_SYSTEM;
            goto fail;
        }
        int64_t want[MC_MAX_RANK];
        local_shape(plan, n, plan->row[i] ? (shard_split){-1, 1} : plan->split[i], want);
        const mc_node *got = &dst->nodes[v];
        if (got->rank != n->rank || got->dtype != n->dtype ||
            memcmp(got->shape, want, sizeof(int64_t) * (size_t)n->rank) != 0) {
            char b[160];
            st = mc_fail(MC_ERR_SYSTEM, "internal error: sharding '%s' (line %d) gave the wrong local type",
                         nm(g, i, b, sizeof b), n->line);
            goto fail;
        }
        if (n->name && !got->name && n->op != MC_OP_INPUT && n->op != MC_OP_PARAM)
            mc_value_set_name(dst, v, n->name);
        map[i] = v;
    }
    mc_value outs[256];
    mc_value *o = g->noutputs <= 256 ? outs : malloc(sizeof *o * (size_t)g->noutputs);
    if (!o) {
        st = mc_fail(MC_ERR_SYSTEM, "out of memory sharding the graph");
        goto fail;
    }
    for (int k = 0; k < g->noutputs; k++)
        o[k] = map[g->outputs[k]];
    st = mc_graph_set_outputs(dst, o, g->noutputs);
    if (o != outs)
        free(o);
    if (st != MC_OK)
        goto fail;
    free(map);
    free(live);
    *out = dst;
    return MC_OK;
fail:
    mc_graph_free(dst);
    free(map);
    free(live);
    return st;
}

/* ---- printing ------------------------------------------------------------------------------- */

mc_status mc_shard_print(const mc_graph *g, int n, int rank, FILE *out)
{
    mc_shard_plan *plan = NULL;
    mc_status st = mc_shard_plan_make(g, n, &plan);
    if (st != MC_OK)
        return st;
    mc_graph *r = NULL;
    st = mc_shard_graph(g, plan, rank, &r);
    if (st == MC_OK) {
        fprintf(out, "# sharded over %d ranks: rank %d's graph\n", n, rank);
        for (const char *s = mc_shard_plan_notes(plan); *s;) {
            size_t len = strcspn(s, "\n");
            fprintf(out, "# %.*s\n", (int)len, s);
            s += len + (s[len] == '\n');
        }
        st = mc_graph_print(r, out);
    }
    mc_graph_free(r);
    mc_shard_plan_free(plan);
    return st;
}
