/* The pass manager: the graph passes as one flat list, then fusion, lowering and planning.
 *
 * mc_run_passes clones the user's graph and runs the graph passes in order on the clone,
 * verifying after each when asked (the tests always ask), so a pass that breaks an invariant
 * is named in the error. `minic dump --stage NAME` stops after pass NAME. mc_compile_kernels
 * is the whole compiler: passes, fusion (or one kernel per primitive with fuse off), lowering
 * to the kernel IR, memory planning and the FLOP/byte count of every kernel.
 */
#include "passes/passes.h"

#include <string.h>

static const mc_pass pass_decompose = {"decompose", mc_pass_decompose};
static const mc_pass pass_simplify = {"simplify", mc_pass_simplify};
static const mc_pass pass_cse = {"cse", mc_pass_cse};
static const mc_pass pass_dce = {"dce", mc_pass_dce};

const mc_pass *const mc_graph_passes[] = {
    &pass_decompose, /* composites into primitives */
    &pass_simplify,  /* constant folding, identities, shape operator chains */
    &pass_cse,       /* common subexpressions */
    &pass_dce,       /* what no output needs */
    NULL,
};

static bool known_stage(const char *name)
{
    if (strcmp(name, "ir") == 0)
        return true;
    for (int i = 0; mc_graph_passes[i]; i++)
        if (strcmp(mc_graph_passes[i]->name, name) == 0)
            return true;
    return false;
}

mc_status mc_run_passes(const mc_graph *g, const mc_compile_options *opt, const char *stop_after,
                        mc_graph **out)
{
    *out = NULL;
    if (stop_after && !known_stage(stop_after)) {
        char names[256] = "ir";
        size_t len = strlen(names);
        for (int i = 0; mc_graph_passes[i] && len < sizeof names; i++)
            len += (size_t)snprintf(names + len, sizeof names - len, ", %s", mc_graph_passes[i]->name);
        return mc_fail(MC_ERR_INPUT, "unknown stage '%s' (stages: %s, fused, code)", stop_after, names);
    }
    mc_graph *c = mc_graph_clone(g);
    if (!c)
        return mc_fail(MC_ERR_SYSTEM, "out of memory copying the graph");
    if (!(stop_after && strcmp(stop_after, "ir") == 0))
        for (int i = 0; mc_graph_passes[i]; i++) {
            const mc_pass *p = mc_graph_passes[i];
            mc_status st = p->run(c);
            if (st == MC_OK && opt && opt->verify)
                st = mc_graph_verify(c, p->name);
            if (st != MC_OK) {
                mc_graph_free(c);
                return st;
            }
            if (stop_after && strcmp(stop_after, p->name) == 0)
                break;
        }
    *out = c;
    return MC_OK;
}

mc_compile_options mc_compile_options_for(const mc_options *opt)
{
    mc_compile_options co = {.fuse = opt->fuse, .plan_memory = opt->plan_memory, .tf32 = opt->tf32};
#ifndef NDEBUG
    co.verify = true;
#endif
    return co;
}

mc_status mc_compile_kernels(const mc_graph *g, const mc_compile_options *opt, kir_program **out)
{
    *out = NULL;
    mc_compile_options defaults = {.fuse = true, .plan_memory = true};
    if (!opt)
        opt = &defaults;
    mc_graph *pg;
    mc_status st = mc_run_passes(g, opt, NULL, &pg);
    if (st != MC_OK)
        return st;
    mc_fusion f;
    st = mc_fuse(pg, opt->fuse, &f);
    if (st == MC_OK) {
        st = mc_lower(&f, g, opt, out);
        mc_fusion_free(&f);
    }
    mc_graph_free(pg);
    if (st == MC_OK && opt->verify)
        st = kir_verify(*out, "lower", false);
    if (st == MC_OK) {
        mc_plan_memory(*out, opt->plan_memory);
        if (opt->verify)
            st = kir_verify(*out, "plan", true);
    }
    if (st != MC_OK) {
        kir_program_free(*out);
        *out = NULL;
        return st;
    }
    for (int k = 0; k < (*out)->nkernels; k++)
        kir_count(*out, &(*out)->kernels[k]);
    return MC_OK;
}
