/* Dead-code elimination.
 *
 * Requires: a graph. Changes: nodes that no output needs are dropped; inputs and params are
 * kept even when unused, because the program binds them by name. Runs last, after the passes
 * that leave orphans behind (simplify, cse).
 */
#include "passes/passes.h"

#include <stdlib.h>

mc_status mc_pass_dce(mc_graph *g, const mc_compile_options *opt)
{
    (void)opt;
    bool *live = calloc((size_t)(g->nnodes > 0 ? g->nnodes : 1), sizeof *live);
    if (!live)
        return mc_fail(MC_ERR_SYSTEM, "out of memory in dead-code elimination");
    for (int o = 0; o < g->noutputs; o++)
        live[g->outputs[o]] = true;
    bool all = true;
    for (int i = g->nnodes - 1; i >= 0; i--) {
        const mc_node *n = &g->nodes[i];
        if (n->op == MC_OP_INPUT || n->op == MC_OP_PARAM)
            live[i] = true;
        if (!live[i]) {
            all = false;
            continue;
        }
        for (int k = 0; k < n->nin; k++)
            if (n->in[k] >= 0)
                live[n->in[k]] = true;
    }
    if (all) {
        free(live);
        return MC_OK;
    }
    mc_rewrite rw;
    mc_status st = mc_rewrite_begin(&rw, g);
    for (int i = 0; i < g->nnodes && st == MC_OK; i++) {
        if (!live[i])
            continue;
        rw.map[i] = mc_rewrite_copy(&rw, i);
        if (rw.map[i] < 0) {
            mc_rewrite_abort(&rw);
            st = mc_error_status() != MC_OK ? mc_error_status() : MC_ERR_SYSTEM;
        }
    }
    free(live);
    return st == MC_OK ? mc_rewrite_finish(&rw, g) : st;
}
