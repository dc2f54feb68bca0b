/* The pass manager: the graph passes as one flat list, then fusion, lowering and planning.
 *
 * mc_run_passes clones the user's graph and runs the graph passes in order on the clone,
 * verifying after each when asked (the tests always ask), so a pass that breaks an invariant
 * is named in the error. mc_compile_kernels is the whole compiler: passes, fusion (or one
 * kernel per primitive with fuse off), lowering to the kernel IR, memory planning and the
 * FLOP/byte count of every kernel. mc_dump_stage (`minic dump --stage NAME`) runs the same
 * steps and stops after any of them, so every stage of the README's pipeline can be looked at.
 */
#include "passes/passes.h"

#include <stdio.h>
#include <string.h>

static const mc_pass pass_fold = {"fold", mc_pass_fold};
static const mc_pass pass_decompose = {"decompose", mc_pass_decompose};
static const mc_pass pass_simplify = {"simplify", mc_pass_simplify};
static const mc_pass pass_cse = {"cse", mc_pass_cse};
static const mc_pass pass_dce = {"dce", mc_pass_dce};

const mc_pass *const mc_graph_passes[] = {
    &pass_fold,      /* batchnorm into the conv before it, over params */
    &pass_decompose, /* composites into primitives */
    &pass_simplify,  /* constant folding, identities, shape operator chains */
    &pass_cse,       /* common subexpressions */
    &pass_dce,       /* what no output needs */
    NULL,
};

/* The stages mc_dump_stage shows: the parsed graph, each graph pass above, then fuse, lower and
 * plan (tests/test_passes.c checks that every graph pass is here). */
const char *const mc_dump_stages[] = {"ir", "fold", "decompose", "simplify", "cse", "dce", "fuse",
                                      "lower", "plan", NULL};

static bool known_stage(const char *name)
{
    if (strcmp(name, "ir") == 0)
        return true;
    for (int i = 0; mc_graph_passes[i]; i++)
        if (strcmp(mc_graph_passes[i]->name, name) == 0)
            return true;
    return false;
}

/* ---- symbolic sizes read when the kernels run --------------------------------------------- */

static bool has_symbol(const mc_node *n)
{
    for (int d = 0; d < n->rank; d++)
        if (mc_dim_is_sym(n->shape[d]))
            return true;
    return false;
}

/* Can concat n's copies be placed: each part's offset, the sizes before it times the axis's
 * stride, an expression of the table (lower.c makes the same ones)? */
static bool concat_offsets(const mc_graph *g, const mc_node *n)
{
    int64_t stride = 1, start = 0;
    for (int d = n->rank - 1; d > n->attr.axis; d--)
        if (!mc_dim_mul(g, stride, n->shape[d], &stride))
            return false;
    for (int k = 0; k + 1 < n->nin; k++) {
        int64_t size = g->nodes[n->in[k]].shape[n->attr.axis], offset;
        if (k == 0)
            start = size;
        else if (!mc_dim_add(g, start, size, &start))
            return false;
        if (!mc_dim_mul(g, start, stride, &offset))
            return false;
    }
    return true;
}

/* Does operator n take symbolic sizes through decompose, fusion and lowering? Pointwise work,
 * reductions and the normalizations over any axis (1/n is KI_SIZE), GEMMs, the shape
 * operators whose views move no offsets (transpose, expand), reshape (its groups of axes by
 * exact quotients of their products: [B, T, 768] as [B, T, 12, 64] or as [B*T, 768]), iota and
 * full (a causal mask), slice from a fixed start with a positive step, concat (offsets are sums
 * of sizes), gather, and the spatial composites (conv and pools over a symbolic batch, the
 * only symbolic axis inference lets them have; pad and batchnorm over any), whose
 * decompositions are made of these. argmax/argmin and update (lengths as values: KI_SIZE
 * `times`), cumsum (a scan, its row length read when it runs), layernorm over any axis (a
 * symbolic n takes the fixed scale 2^-31, decompose.c), a slice from the end of a symbolic
 * axis or backwards (decompose makes it a gather at run-time indices).
 * Not yet: allreduce. */
static bool takes_symbols(const mc_graph *g, const mc_node *n)
{
    switch (mc_op_table[n->op].kind) {
    case MC_KIND_LEAF: case MC_KIND_UNARY: case MC_KIND_BINARY: case MC_KIND_COMPARE:
    case MC_KIND_SELECT: case MC_KIND_CAST:
        return true;
    case MC_KIND_REDUCE:
        return n->op == MC_OP_SUM || n->op == MC_OP_MEAN || n->op == MC_OP_MAX || n->op == MC_OP_MIN ||
               n->op == MC_OP_ARGMAX || n->op == MC_OP_ARGMIN;
    case MC_KIND_NORM:
        return n->op == MC_OP_SOFTMAX || n->op == MC_OP_LOG_SOFTMAX || n->op == MC_OP_RMSNORM ||
               n->op == MC_OP_LAYERNORM || n->op == MC_OP_CUMSUM;
    case MC_KIND_MATMUL:
        return true;
    case MC_KIND_SHAPE:
        if (n->op == MC_OP_RESHAPE)
            return mc_reshape_takes_symbols(g, &g->nodes[n->in[0]], n);
        if (n->op == MC_OP_SLICE) /* its offset start * stride; decompose rewrites the rest */
            return mc_slice_rewritten(g, n) ||
                   (!mc_dim_is_sym(n->attr.start) && n->attr.start != MC_END && n->attr.start >= 0 && n->attr.step >= 1);
        if (n->op == MC_OP_CONCAT)
            return concat_offsets(g, n);
        return n->op == MC_OP_TRANSPOSE || n->op == MC_OP_EXPAND;
    case MC_KIND_CREATE: /* a coordinate or a number at each point: no size in its code */
        return n->op == MC_OP_IOTA || n->op == MC_OP_FULL;
    case MC_KIND_GATHER: /* its stride and checked size are dims in kir, bound per binding */
        return n->op == MC_OP_GATHER || n->op == MC_OP_UPDATE;
    case MC_KIND_SPATIAL: /* decomposed into the operators above (checked again after decompose) */
        return true;
    case MC_KIND_COLLECTIVE:
        return false;
    }
    return false;
}

const char *mc_runsizes_refusal(const mc_graph *g, char *buf, size_t size)
{
    for (int i = 0; i < g->nnodes; i++) {
        const mc_node *n = &g->nodes[i];
        bool symbolic = has_symbol(n);
        for (int k = 0; k < n->nin && !symbolic; k++)
            symbolic = n->in[k] >= 0 && has_symbol(&g->nodes[n->in[k]]);
        if (!symbolic)
            continue;
        char where[32] = "";
        if (n->line > 0)
            snprintf(where, sizeof where, " at line %d", n->line);
        if (!takes_symbols(g, n)) {
            snprintf(buf, size, "%s%s does not take symbolic sizes yet", mc_op_table[n->op].name, where);
            return buf;
        }
        /* every size a view multiplies out is a product of the node's dims: make each once here,
         * so that mc_stride_mul cannot fail later (a polynomial past the table's limit) */
        int64_t numel = 1;
        for (int d = n->rank - 1; d >= 0; d--)
            if (!mc_dim_mul(g, numel, n->shape[d], &numel)) {
                snprintf(buf, size, "the sizes of %s%s are too large an expression", mc_op_table[n->op].name, where);
                return buf;
            }
    }
    return NULL;
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
    if (mc_graph_num_syms(g) > 0 && !(opt && opt->symbolic) && !(stop_after && strcmp(stop_after, "ir") == 0))
        return mc_fail(MC_ERR_INPUT, "the graph has symbolic dimensions (%s%s): the passes need them bound "
                                     "(a program binds them when it runs: minic run --dim NAME=INT or inputs)",
                       mc_dim_sym_name(g, 0), mc_graph_num_syms(g) > 1 ? ", ..." : "");
    mc_graph *c = mc_graph_clone(g);
    if (!c)
        return mc_fail(MC_ERR_SYSTEM, "out of memory copying the graph");
    if (!(stop_after && strcmp(stop_after, "ir") == 0))
        for (int i = 0; mc_graph_passes[i]; i++) {
            const mc_pass *p = mc_graph_passes[i];
            mc_status st = p->run(c, opt);
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
    mc_pipeline_times ignored, *tm = opt->times ? opt->times : &ignored;
    double t = mc_now_ms(), now;
#define LAP(field) (now = mc_now_ms(), tm->field = now - t, t = now)
    mc_graph *pg;
    mc_status st = mc_run_passes(g, opt, NULL, &pg);
    LAP(passes);
    if (st != MC_OK)
        return st;
    char why[MC_COMPILE_REFUSED];
    if (opt->symbolic && mc_graph_num_syms(pg) > 0 && mc_runsizes_refusal(pg, why, sizeof why)) {
        /* the user's graph passed, but a composite became something that does not: the caller
         * compiles per binding instead (runtime/symbolic.c) */
        mc_graph_free(pg);
        MC_ASSERT(opt->refused);
        snprintf(opt->refused, MC_COMPILE_REFUSED, "after the graph passes, %s", why);
        return MC_OK;
    }
    mc_fusion f;
    st = mc_fuse(pg, opt, &f);
    LAP(fuse);
    if (st == MC_OK) {
        st = mc_lower(&f, g, opt, out);
        mc_fusion_free(&f);
    }
    mc_graph_free(pg);
    if (st == MC_OK && opt->verify)
        st = kir_verify(*out, "lower", false);
    if (st == MC_OK && opt->hoist)
        mc_hoist_params(*out); /* before the plan, which gives what they keep a place of its own */
    LAP(lower);
    if (st == MC_OK && (*out)->dims)
        return MC_OK; /* planned and counted per binding, after kir_bind */
    if (st == MC_OK) {
        mc_plan_memory(*out, opt->plan_memory);
        if (opt->verify)
            st = kir_verify(*out, "plan", true);
    }
    LAP(plan);
    if (st != MC_OK) {
        kir_program_free(*out);
        *out = NULL;
        return st;
    }
    for (int k = 0; k < (*out)->nkernels; k++)
        kir_count(*out, &(*out)->kernels[k]);
    LAP(count);
#undef LAP
    return MC_OK;
}

/* ---- minic dump --stage ---------------------------------------------------------------------- */

/* The graph after the passes, then each fusion group in execution order: its kind, its space,
 * its members (nodes computed in it, by the names the printed graph uses) and which of them
 * it writes to memory. */
static mc_status print_fusion(const mc_graph *g, const mc_fusion *f, FILE *out)
{
    mc_status st = mc_graph_print(g, out);
    if (st != MC_OK)
        return st;
    static const char *const kind_names[] = {
        [MC_FG_POINTWISE] = "pointwise", [MC_FG_RESHAPE] = "reshape copy",
        [MC_FG_CONCAT] = "concat copy", [MC_FG_OUTPUT] = "output copy",
        [MC_FG_ELIDED] = "elided copy", [MC_FG_ATTENTION] = "attention",
        [MC_FG_COLLECTIVE] = "collective"};
    fprintf(out, "# fusion: %d groups, in execution order\n", f->ngroups);
    for (int q = 0; q < f->ngroups; q++) {
        int gi = f->order[q];
        const mc_fgroup *G = &f->groups[gi];
        char name[64];
        const char *kind = G->gemm >= 0 ? "gemm" : G->nred > 0 ? "reduction" : kind_names[G->kind];
        if (G->kind == MC_FG_ATTENTION)
            kind = "attention";
        fprintf(out, "group %d: %s, space [", q, kind);
        for (int d = 0; d < G->rank; d++)
            fprintf(out, "%s%lld", d ? ", " : "", (long long)G->shape[d]);
        fprintf(out, "], anchor %s\n  members:", mc_node_name(g, G->anchor, name, sizeof name));
        int stored = 0;
        for (int i = 0; i < g->nnodes; i++)
            if (f->nodes[i].kind == MC_FN_MEMBER && f->nodes[i].group == gi) {
                fprintf(out, " %s", mc_node_name(g, i, name, sizeof name));
                stored += f->nodes[i].stored;
            }
        fprintf(out, "\n  stores:");
        for (int i = 0; i < g->nnodes; i++)
            if (f->nodes[i].kind == MC_FN_MEMBER && f->nodes[i].group == gi && f->nodes[i].stored)
                fprintf(out, " %s", mc_node_name(g, i, name, sizeof name));
        fprintf(out, "%s\n", stored ? "" : " (none)");
    }
    fprintf(out, "# views (shape operators read through strides):");
    int views = 0;
    for (int i = 0; i < g->nnodes; i++)
        if (f->nodes[i].kind == MC_FN_VIEW) {
            char name[64];
            fprintf(out, " %s", mc_node_name(g, i, name, sizeof name));
            views++;
        }
    fprintf(out, "%s\n", views ? "" : " none");
    for (int n = 0; n < f->nnotes; n++)
        fprintf(out, "# %s\n", f->notes[n]);
    return fflush(out) == 0 && !ferror(out) ? MC_OK : mc_fail(MC_ERR_SYSTEM, "could not write the fusion groups");
}

/* The kernel IR straight after lowering: the kernels (with their FLOP and byte counts) and the
 * buffers, whose temporaries have no place yet (that is what plan gives them). */
static void print_lowered(const kir_program *kp, const mc_graph *user, FILE *out)
{
    fprintf(out, "# after lower: %d kernels, %d buffers (temporaries not placed yet: --stage plan)\n",
            kp->nkernels, kp->nbuffers);
    fprintf(out, "buffers:\n");
    static const char *const kinds[] = {[KBUF_INPUT] = "input", [KBUF_PARAM] = "param",
                                        [KBUF_OUTPUT] = "output", [KBUF_TEMP] = "temp"};
    for (int b = 0; b < kp->nbuffers; b++) {
        const kir_buffer *buf = &kp->buffers[b];
        char tmp[64];
        const char *name = buf->node >= 0 && buf->node < user->nnodes
                               ? mc_node_name(user, buf->node, tmp, sizeof tmp) : "";
        fprintf(out, "  b%d(%s) %s %s[%lld]", b, name, kinds[buf->kind], mc_dtype_name(buf->dtype),
                (long long)buf->numel);
        if (buf->kind == KBUF_TEMP)
            fprintf(out, " live kernels %d..%d", buf->first, buf->last);
        fputc('\n', out);
    }
    for (int k = 0; k < kp->nkernels; k++) {
        fputc('\n', out);
        kir_print_kernel(kp, &kp->kernels[k], user, out);
    }
}

mc_status mc_dump_stage(const mc_graph *g, const mc_compile_options *opt, const char *stage,
                        FILE *out)
{
    int index = -1;
    for (int i = 0; mc_dump_stages[i]; i++)
        if (stage && strcmp(stage, mc_dump_stages[i]) == 0)
            index = i;
    if (index < 0) {
        char names[256] = "";
        size_t len = 0;
        for (int i = 0; mc_dump_stages[i] && len < sizeof names; i++)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s, ", mc_dump_stages[i]);
        return mc_fail(MC_ERR_INPUT, "unknown stage '%s' (stages: %sfused, code)",
                       stage ? stage : "(null)", names);
    }
    mc_compile_options defaults = {.fuse = true, .plan_memory = true, .verify = true};
    if (!opt)
        opt = &defaults;
    bool graph_stage = known_stage(stage);
    mc_graph *pg = NULL;
    mc_status st = mc_run_passes(g, opt, graph_stage ? stage : NULL, &pg);
    if (st != MC_OK)
        return st;
    if (graph_stage) {
        st = mc_graph_print(pg, out);
        mc_graph_free(pg);
        return st;
    }
    kir_program *kp = NULL;
    if (strcmp(stage, "plan") == 0) {
        mc_graph_free(pg); /* mc_compile_kernels runs the whole pipeline itself */
        st = mc_compile_kernels(g, opt, &kp);
        if (st == MC_OK)
            kir_print(kp, g, out);
        kir_program_free(kp);
        return st;
    }
    mc_fusion f;
    st = mc_fuse(pg, opt, &f);
    if (st == MC_OK && strcmp(stage, "fuse") == 0) {
        st = print_fusion(pg, &f, out);
    } else if (st == MC_OK) { /* lower */
        st = mc_lower(&f, g, opt, &kp);
        if (st == MC_OK) {
            for (int k = 0; k < kp->nkernels; k++)
                kir_count(kp, &kp->kernels[k]);
            print_lowered(kp, g, out);
            kir_program_free(kp);
        }
    }
    mc_fusion_free(&f); /* mc_fuse leaves f empty when it fails */
    mc_graph_free(pg);
    return st;
}
