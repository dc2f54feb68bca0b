/* The pass pipeline: graph IR in, kernel IR out.
 *
 *   decompose   composites (softmax, layernorm, linear, mean, ...) into primitives
 *   simplify    dead code, common subexpressions, constant folding, algebraic identities,
 *               shape operators folded into views
 *   fuse        group nodes into kernels (pointwise chains, reductions with their prologue and
 *               epilogue, GEMMs with their epilogue); legality in one place
 *   lower       each group to a kir_kernel, with names that say what it does
 *   plan        intermediate buffers share memory by liveness
 *
 * Each graph pass is one file with a comment saying what it needs and what it changes. The
 * pipeline is one flat list (passes/pipeline.c); the verifier runs after each graph pass in
 * debug builds and in the tests; `minic dump --stage NAME` shows the graph after pass NAME.
 */
#ifndef MINIC_PASSES_H
#define MINIC_PASSES_H

#include "../codegen/kir.h"

typedef struct mc_pass {
    const char *name;                    /* for --stage and error messages */
    mc_status (*run)(mc_graph *g);       /* rewrites g in place (may rebuild its node array) */
} mc_pass;

typedef struct mc_compile_options {
    bool fuse;         /* false: one kernel per primitive operator */
    bool plan_memory;  /* false: every temp its own offset */
    bool verify;       /* run mc_graph_verify after every pass */
    bool tf32;
} mc_compile_options;

/* The graph passes in order, NULL-terminated. */
extern const mc_pass *const mc_graph_passes[];

/* Run the graph passes on a clone of g, stopping after pass `stop_after` (NULL: all), and give
 * the resulting graph (for minic dump --stage NAME). */
mc_status mc_run_passes(const mc_graph *g, const mc_compile_options *opt, const char *stop_after,
                        mc_graph **out);
/* The whole pipeline: passes, fusion, lowering, planning. Kernels carry the user's operators
 * and lines (node origins survive decomposition), so the profile speaks the user's terms. */
mc_status mc_compile_kernels(const mc_graph *g, const mc_compile_options *opt, kir_program **out);

#endif
