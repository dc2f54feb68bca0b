/* The graph verifier: every invariant of ir/ir.h, checked after every pass.
 *
 * Passes rewrite the graph in place, so a bug in one shows up far away unless it is caught at
 * the pass's exit. The verifier checks structure (operator, operand count, operands defined
 * before their users, outputs in range, user names unique) and then re-runs type inference
 * (mc_node_infer, the same function the builder ran) on a copy of every node and compares the
 * dtype and shape it gives with the node's. A failure is the compiler's bug, not the user's:
 * it is reported as MC_ERR_SYSTEM with the pass's name, the node and what is wrong.
 */
#include "ir/ir.h"

#include <stdio.h>
#include <string.h>

static mc_status broken(const mc_graph *g, const char *pass, int index, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static mc_status broken(const mc_graph *g, const char *pass, int index, const char *fmt, ...)
{
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    char where[160] = "";
    if (index >= 0) {
        char buf[32];
        const mc_node *n = &g->nodes[index];
        char line[32] = "";
        if (n->line > 0)
            snprintf(line, sizeof line, ", line %d", n->line);
        snprintf(where, sizeof where, "node %d (%s = %s%s): ", index,
                 mc_node_name(g, index, buf, sizeof buf),
                 (unsigned)n->op < MC_NUM_OPS ? mc_op_table[n->op].name : "?", line);
    }
    return mc_fail(MC_ERR_SYSTEM, "internal error: the graph is invalid after %s: %s%s",
                   pass ? pass : "building", where, what);
}

static const char *shape_str(char *buf, size_t size, const int64_t *shape, int rank)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < rank && i < MC_MAX_RANK && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "",
                                 (long long)shape[i]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

static mc_status verify_node(const mc_graph *g, const char *pass, int i)
{
    const mc_node *n = &g->nodes[i];
    if ((unsigned)n->op >= MC_NUM_OPS)
        return broken(g, pass, i, "invalid operator %d", (int)n->op);
    if ((unsigned)n->origin >= MC_NUM_OPS)
        return broken(g, pass, i, "invalid origin operator %d", (int)n->origin);
    if (n->user < 0)
        return broken(g, pass, i, "no user node (%d)", (int)n->user);
    if (n->nin < 0 || (n->nin > 0 && !n->in))
        return broken(g, pass, i, "bad operand list (%d operands)", n->nin);
    if (n->rank < 0 || n->rank > MC_MAX_RANK)
        return broken(g, pass, i, "rank %d", n->rank);
    for (int j = 0; j < n->nin; j++)
        if (n->in[j] < 0 || n->in[j] >= i)
            return broken(g, pass, i, "operand %d is %d: operands must be defined before their "
                                      "users (node index < %d)", j + 1, n->in[j], i);
    mc_node copy = *n;
    copy.line = 0; /* a plain message, not a caret into the user's file */
    if (mc_node_infer(g, &copy) != MC_OK) {
        char why[1024];
        snprintf(why, sizeof why, "%s", mc_error_message());
        return broken(g, pass, i, "type check fails: %s", why);
    }
    bool same = copy.dtype == n->dtype && copy.rank == n->rank &&
                memcmp(copy.shape, n->shape, sizeof(int64_t) * (size_t)n->rank) == 0;
    if (!same) {
        char have[200], want[200];
        return broken(g, pass, i, "it is %s%s but its operands give %s%s",
                      mc_dtype_name(n->dtype), shape_str(have, sizeof have, n->shape, n->rank),
                      mc_dtype_name(copy.dtype),
                      shape_str(want, sizeof want, copy.shape, copy.rank));
    }
    /* Inference normalizes attributes; a node built by hand must already be in that form. */
    const mc_attrs *a = &n->attr, *b = &copy.attr;
    bool normalized = a->nlist == b->nlist && a->axis == b->axis && a->start == b->start &&
                      a->end == b->end && a->step == b->step;
    for (int k = 0; normalized && k < a->nlist && k < MC_MAX_RANK; k++)
        normalized = a->list[k] == b->list[k];
    if (!normalized)
        return broken(g, pass, i, "its attributes are not normalized (list of %d, axis %lld, "
                                  "start %lld, end %lld; expected list of %d, axis %lld, start "
                                  "%lld, end %lld): build nodes with mc_graph_add",
                      a->nlist, (long long)a->axis, (long long)a->start, (long long)a->end,
                      b->nlist, (long long)b->axis, (long long)b->start, (long long)b->end);
    return MC_OK;
}

mc_status mc_graph_verify(const mc_graph *g, const char *after_pass)
{
    if (!g)
        return broken(g, after_pass, -1, "no graph");
    if (g->nnodes < 0 || g->nnodes > g->cap || (g->nnodes > 0 && !g->nodes))
        return broken(g, after_pass, -1, "bad node array (%d nodes, capacity %d)", g->nnodes,
                      g->cap);
    for (int i = 0; i < g->nnodes; i++) {
        mc_status st = verify_node(g, after_pass, i);
        if (st)
            return st;
    }
    if (g->noutputs < 0 || (g->noutputs > 0 && !g->outputs))
        return broken(g, after_pass, -1, "bad output list (%d outputs)", g->noutputs);
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] < 0 || g->outputs[i] >= g->nnodes)
            return broken(g, after_pass, -1, "output %d is %d, not a node (the graph has %d)",
                          i + 1, g->outputs[i], g->nnodes);
    /* User names are unique: inputs and params are bound by them. */
    mc_name_map seen = {0};
    mc_status st = MC_OK;
    for (int i = 0; i < g->nnodes && st == MC_OK; i++) {
        const char *name = g->nodes[i].name;
        if (!name)
            continue;
        int32_t other = mc_name_map_get(&seen, name);
        if (other >= 0)
            st = broken(g, after_pass, i, "the name '%s' is also node %d's", name, other);
        else if (!mc_name_map_put(&seen, name, i))
            st = mc_fail(MC_ERR_SYSTEM, "out of memory verifying the graph");
    }
    mc_name_map_free(&seen);
    return st;
}
