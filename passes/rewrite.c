/* Graph rewriting: the one way the graph passes change a graph.
 *
 * A pass walks the old graph in order and builds a new one, node by node, through
 * mc_graph_add, so every node it makes is type-checked and shape-inferred exactly like a node
 * the user wrote; then the new graph is swapped into the old one's place. Rebuilding costs
 * O(n) per pass and keeps the invariant that a forward walk is a topological order, with no
 * in-place surgery on operand arrays. Each new node keeps the place (line, column) and the
 * origin (the user's operator) and the user's node it stands for, so the profile, the kernel
 * names and the buffers still speak of the user's operators and values after decomposition.
 */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

static char *dup_or_null(mc_arena *a, const char *s) { return s ? mc_arena_strdup(a, s) : NULL; }

mc_status mc_rewrite_begin(mc_rewrite *rw, const mc_graph *src)
{
    memset(rw, 0, sizeof *rw);
    rw->src = src;
    rw->dst = mc_graph_new(src->name);
    rw->map = malloc(sizeof(mc_value) * (size_t)(src->nnodes > 0 ? src->nnodes : 1));
    if (!rw->dst || !rw->map) {
        mc_rewrite_abort(rw);
        return mc_fail(MC_ERR_SYSTEM, "out of memory rewriting the graph");
    }
    for (int i = 0; i < src->nnodes; i++)
        rw->map[i] = MC_NONE;
    rw->dst->file = dup_or_null(&rw->dst->arena, src->file);
    rw->dst->text = dup_or_null(&rw->dst->arena, src->text);
    /* a symbolic graph's types name expressions of its table: the copy keeps the same numbers */
    if (src->dims && !(rw->dst->dims = mc_dims_clone(src->dims))) {
        mc_rewrite_abort(rw);
        return mc_fail(MC_ERR_SYSTEM, "out of memory rewriting the graph");
    }
    if ((src->file && !rw->dst->file) || (src->text && !rw->dst->text)) {
        mc_rewrite_abort(rw);
        return mc_fail(MC_ERR_SYSTEM, "out of memory rewriting the graph");
    }
    return MC_OK;
}

void mc_rewrite_abort(mc_rewrite *rw)
{
    if (rw->dst)
        mc_graph_free(rw->dst);
    free(rw->map);
    rw->dst = NULL;
    rw->map = NULL;
}

static void keep_place(mc_rewrite *rw, mc_value v, const mc_node *like)
{
    if (v < 0)
        return;
    mc_node *n = &rw->dst->nodes[v];
    n->line = like->line;
    n->col = like->col;
    n->origin = like->origin;
    n->user = like->user;
    n->materialize = like->materialize;
}

mc_value mc_rewrite_node(mc_rewrite *rw, const mc_node *like, mc_op op, const mc_value *in,
                         int nin, const mc_attrs *attr)
{
    for (int i = 0; i < nin; i++)
        if (in[i] == MC_ERROR)
            return MC_ERROR;
    mc_attrs none;
    memset(&none, 0, sizeof none);
    mc_value v = mc_graph_add(rw->dst, op, in, nin, attr ? attr : &none, like->line, like->col);
    keep_place(rw, v, like);
    return v;
}

mc_value mc_rewrite_const(mc_rewrite *rw, const mc_node *like, double value, mc_dtype dtype)
{
    mc_value v = mc_scalar(rw->dst, value, dtype);
    keep_place(rw, v, like);
    return v;
}

mc_value mc_rewrite_const_per(mc_rewrite *rw, const mc_node *like, double value, int64_t per, mc_dtype dtype)
{
    mc_value v = mc_rewrite_const(rw, like, value, dtype);
    if (v >= 0 && per)
        rw->dst->nodes[v].attr.per = per; /* mc_scalar makes a node of its own: nothing shares it */
    return v;
}

mc_value mc_rewrite_const_times(mc_rewrite *rw, const mc_node *like, double value, int64_t n, mc_dtype dtype)
{
    mc_value v = mc_rewrite_const_per(rw, like, value, n, dtype);
    if (v >= 0)
        rw->dst->nodes[v].attr.times = true;
    return v;
}

mc_value mc_rewrite_copy(mc_rewrite *rw, int i)
{
    const mc_node *n = &rw->src->nodes[i];
    mc_value v;
    if (n->op == MC_OP_INPUT || n->op == MC_OP_PARAM) {
        v = mc_graph_declare(rw->dst, n->op, n->name, n->dtype, n->shape, n->rank, n->line, n->col);
        keep_place(rw, v, n);
    } else if (n->op == MC_OP_CONST) {
        v = n->attr.times ? mc_rewrite_const_times(rw, n, n->attr.value, n->attr.per, n->dtype)
                          : mc_rewrite_const_per(rw, n, n->attr.value, n->attr.per, n->dtype);
    } else {
        mc_value in[64] = {0};
        mc_value *ins = n->nin <= 64 ? in : malloc(sizeof(mc_value) * (size_t)n->nin);
        if (!ins)
            return mc_fail(MC_ERR_SYSTEM, "out of memory rewriting the graph"), MC_ERROR;
        for (int k = 0; k < n->nin; k++)
            ins[k] = n->in[k] >= 0 ? rw->map[n->in[k]] : n->in[k];
        v = mc_rewrite_node(rw, n, n->op, ins, n->nin, &n->attr);
        if (ins != in)
            free(ins);
    }
    if (v >= 0 && n->name && !rw->dst->nodes[v].name)
        mc_value_set_name(rw->dst, v, n->name); /* cosmetic: a clash only loses the name */
    return v;
}

mc_status mc_rewrite_finish(mc_rewrite *rw, mc_graph *g)
{
    mc_value outs[256] = {0};
    mc_value *o = rw->src->noutputs <= 256 ? outs : malloc(sizeof(mc_value) * (size_t)rw->src->noutputs);
    if (!o) {
        mc_rewrite_abort(rw);
        return mc_fail(MC_ERR_SYSTEM, "out of memory rewriting the graph");
    }
    for (int i = 0; i < rw->src->noutputs; i++)
        o[i] = rw->map[rw->src->outputs[i]];
    mc_status st = mc_graph_set_outputs(rw->dst, o, rw->src->noutputs);
    if (o != outs)
        free(o);
    if (st != MC_OK) {
        mc_rewrite_abort(rw);
        return st;
    }
    mc_graph tmp = *g;
    *g = *rw->dst;
    *rw->dst = tmp;
    mc_rewrite_abort(rw); /* frees the old contents, now in dst */
    return MC_OK;
}
