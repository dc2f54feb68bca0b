/* Common-subexpression elimination.
 *
 * Requires: a graph. Changes: a node equal to an earlier one (same operator, dtype, shape,
 * operands after renaming, attributes; constants by value and dtype) is replaced by it. Graph
 * outputs are never replaced, so two outputs stay two values, and neither is an allreduce: each
 * is a collective operation of its own (docs/FORMAT.md §2), the same on every rank. Nodes are hashed into an
 * open-addressing table (so a graph of a million nodes is not quadratic); equal hashes are
 * compared field by field, and the earliest equal node wins.
 */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull + (h >> 29); }

static uint64_t bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static bool same_attrs(const mc_attrs *a, const mc_attrs *b)
{
    return a->nlist == b->nlist && memcmp(a->list, b->list, sizeof(int64_t) * (size_t)a->nlist) == 0 &&
           a->has_list == b->has_list && a->keepdim == b->keepdim && a->axis == b->axis &&
           a->start == b->start && a->end == b->end && a->step == b->step && bits(a->value) == bits(b->value) && a->per == b->per &&
           a->times == b->times && a->dtype == b->dtype && bits(a->alpha) == bits(b->alpha) && a->has_lo == b->has_lo &&
           a->has_hi == b->has_hi && (!a->has_lo || bits(a->lo) == bits(b->lo)) &&
           (!a->has_hi || bits(a->hi) == bits(b->hi)) && a->npads == b->npads &&
           memcmp(a->pads, b->pads, sizeof(int64_t) * (size_t)a->npads) == 0 && a->groups == b->groups && a->kchunk == b->kchunk &&
           memcmp(a->kernel, b->kernel, sizeof a->kernel) == 0 && memcmp(a->stride, b->stride, sizeof a->stride) == 0 &&
           memcmp(a->padding, b->padding, sizeof a->padding) == 0 &&
           memcmp(a->dilation, b->dilation, sizeof a->dilation) == 0;
}

static uint64_t node_hash(const mc_node *n)
{
    uint64_t h = mix(1469598103934665603ull, (uint64_t)n->op);
    h = mix(h, (uint64_t)n->dtype);
    for (int d = 0; d < n->rank; d++)
        h = mix(h, (uint64_t)n->shape[d]);
    for (int k = 0; k < n->nin; k++)
        h = mix(h, (uint64_t)(int64_t)n->in[k]);
    return mix(h, bits(n->attr.value));
}

static bool same_node(const mc_node *a, const mc_node *b)
{
    return a->op == b->op && a->dtype == b->dtype && a->rank == b->rank &&
           memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->rank) == 0 && a->nin == b->nin &&
           (a->nin == 0 || memcmp(a->in, b->in, sizeof(int32_t) * (size_t)a->nin) == 0) && same_attrs(&a->attr, &b->attr);
}

mc_status mc_pass_cse(mc_graph *g, const mc_compile_options *opt)
{
    (void)opt;
    size_t n = (size_t)(g->nnodes > 0 ? g->nnodes : 1), cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    bool *is_output = calloc(n, sizeof *is_output);
    uint64_t *hash = calloc(n, sizeof *hash);
    int32_t *table = malloc(cap * sizeof *table); /* node index per slot, -1 empty */
    mc_rewrite rw;
    mc_status st = is_output && hash && table ? mc_rewrite_begin(&rw, g)
                                              : mc_fail(MC_ERR_SYSTEM, "out of memory in cse");
    if (st != MC_OK) {
        free(is_output);
        free(hash);
        free(table);
        return st;
    }
    for (size_t s = 0; s < cap; s++)
        table[s] = -1;
    for (int o = 0; o < g->noutputs; o++)
        is_output[g->outputs[o]] = true;
    for (int i = 0; i < g->nnodes && st == MC_OK; i++) {
        mc_value v = mc_rewrite_copy(&rw, i);
        if (v < 0) {
            st = mc_error_status() != MC_OK ? mc_error_status() : MC_ERR_SYSTEM;
            break;
        }
        const mc_node *n = &rw.dst->nodes[v];
        hash[v] = node_hash(n);
        rw.map[i] = v;
        bool keep = is_output[i] || n->op == MC_OP_INPUT || n->op == MC_OP_PARAM || n->op == MC_OP_ALLREDUCE;
        size_t s = (size_t)hash[v] & (cap - 1);
        for (; table[s] >= 0; s = (s + 1) & (cap - 1)) {
            int j = table[s];
            if (!keep && hash[j] == hash[v] && same_node(&rw.dst->nodes[j], n)) {
                rw.map[i] = j; /* the copy just made is dead; dce removes it */
                break;
            }
        }
        if (table[s] < 0)
            table[s] = v; /* new: later nodes may be replaced by it */
    }
    free(is_output);
    free(hash);
    free(table);
    if (st != MC_OK) {
        mc_rewrite_abort(&rw);
        return st;
    }
    return mc_rewrite_finish(&rw, g);
}
