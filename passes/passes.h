/* The pass pipeline: graph IR in, kernel IR out.
 *
 *   fold        batchnorm into the conv before it when its operands are params
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

#include "kir/kir.h"

struct mc_compile_options;

typedef struct mc_pass {
    const char *name;                    /* for --stage and error messages */
    /* rewrites g in place (may rebuild its node array); opt may be NULL */
    mc_status (*run)(mc_graph *g, const struct mc_compile_options *opt);
} mc_pass;

/* Where mc_compile_kernels' time went (ms), for a caller that asks (mc_compile_options.times). */
typedef struct mc_pipeline_times {
    double passes, fuse, lower, plan, count;
} mc_pipeline_times;

typedef struct mc_compile_options {
    bool fuse;         /* false: one kernel per primitive operator */
    bool plan_memory;  /* false: every temp its own offset */
    bool verify;       /* run mc_graph_verify after every pass */
    bool tf32;
    bool no_attention; /* leave attention chains unfused (a backend that renders no
                          KIR_ATTENTION kernel; passes/attention.c) */
    bool conv_gather;  /* conv's im2col as one gather over computed indices, not a padded copy
                          of x and a copy per window position (passes/decompose.c) */
    bool conv_implicit;/* an f16/bf16 conv without groups as one matmul whose B operand is the
                          im2col of x described by the matmul's attributes (passes/decompose.c),
                          lowered to a GEMM kernel with kir_gemm.conv: the backend renders it */
    int conv_kchunk;   /* > 0 with conv_implicit: a 2-D conv whose channels it divides takes its K
                          in chunks of this many channels (kir_conv.kc), its weights re-laid to
                          match, so that a K tile of that many rows is one window position */
    bool conv_clast;   /* with conv_implicit: a 2-D conv of fewer than 8 channels (the stem) reads
                          x channels-last, padded to 4 or 8 channels (a copy of x and of w), K by
                          window positions of those channels (kir_conv.kc = c); one whose x is the
                          transpose of an NHWC tensor (C a multiple of 8) reads that, kc = C */
    bool hoist;        /* mark the kernels computed from params alone `prep` (passes/hoist.c):
                          the runtime runs them when the params are bound, not in every run;
                          mc_compile_options_for sets it unless MINIC_HOIST_PARAMS=0 */
    mc_pipeline_times *times; /* not NULL: mc_compile_kernels fills in its phases' times */
    bool symbolic;     /* the graph may keep symbolic dimensions (mc_runsizes_refusal said it
                          can): mc_compile_kernels passes, fuses and lowers it into kernels whose
                          sizes are expressions (kir/kir.h), neither planned nor counted: each
                          binding is kir_bind'ed, then planned and counted */
    char *refused;     /* with symbolic: MC_COMPILE_REFUSED bytes; where the graph after the
                          passes does not take symbolic sizes after all, mc_compile_kernels
                          writes why here and returns MC_OK with no program (NULL) */
} mc_compile_options;
enum { MC_COMPILE_REFUSED = 160 };

/* The options the pipeline takes from the user's: verify is on in debug builds (no NDEBUG). */
mc_compile_options mc_compile_options_for(const mc_options *opt);

/* Can one kernel list read g's symbolic sizes when it runs (mc_compile_options.symbolic), or
 * must a program compile g per binding of its symbols (runtime/symbolic.c)? NULL when it can;
 * else why not, in buf, for the program's notes. The one place that decides it (pipeline.c):
 * every value whose type or operands' types hold a symbol must be computed by an operator whose
 * passes and lowering take symbolic sizes. */
const char *mc_runsizes_refusal(const mc_graph *g, char *buf, size_t size);

/* The graph passes in order, NULL-terminated. */
extern const mc_pass *const mc_graph_passes[];

/* Run the graph passes on a clone of g, stopping after pass `stop_after` (NULL: all), and give
 * the resulting graph (for minic dump --stage NAME). */
mc_status mc_run_passes(const mc_graph *g, const mc_compile_options *opt, const char *stop_after,
                        mc_graph **out);
/* The whole pipeline: passes, fusion, lowering, planning. Kernels carry the user's operators
 * and lines (node origins survive decomposition), so the profile speaks the user's terms. */
mc_status mc_compile_kernels(const mc_graph *g, const mc_compile_options *opt, kir_program **out);
/* The stages `minic dump --stage` shows, NULL-terminated: "ir", every graph pass, "fuse",
 * "lower", "plan". */
extern const char *const mc_dump_stages[];
/* Print g after stage: ir and the graph passes as .graph text; fuse as the graph then its
 * fusion groups; lower and plan as the kernel IR (plan: with the temporaries placed). */
mc_status mc_dump_stage(const mc_graph *g, const mc_compile_options *opt, const char *stage,
                        FILE *out);

/* ---- the pieces of the pipeline (one file each) --------------------------------------------- */

mc_status mc_pass_fold(mc_graph *g, const mc_compile_options *opt);      /* passes/fold.c: batchnorm into conv */
mc_status mc_pass_decompose(mc_graph *g, const mc_compile_options *opt); /* passes/decompose.c */
/* Does decompose rewrite slice n of a symbolic operand (a start from the end of a symbolic axis
 * or none, or a backward step: forms whose view would need a run-time or negative offset)? */
bool mc_slice_rewritten(const mc_graph *g, const mc_node *n);
mc_status mc_pass_simplify(mc_graph *g, const mc_compile_options *opt);  /* passes/simplify.c: folding and identities */
mc_status mc_pass_cse(mc_graph *g, const mc_compile_options *opt);       /* passes/cse.c */
mc_status mc_pass_dce(mc_graph *g, const mc_compile_options *opt);       /* passes/dce.c */

/* Graph rewriting (passes/rewrite.c): a pass builds a new graph from the old one node by node
 * and swaps it in, so every node it makes is checked and typed by mc_graph_add. */
typedef struct mc_rewrite {
    const mc_graph *src;
    mc_graph *dst;
    mc_value *map; /* per src node: its value in dst, or MC_NONE */
} mc_rewrite;

mc_status mc_rewrite_begin(mc_rewrite *rw, const mc_graph *src);
/* Copy src node i with its operands mapped (names, place and origin kept). */
mc_value mc_rewrite_copy(mc_rewrite *rw, int i);
/* A new node standing for (part of) src node `like`: its place and origin. */
mc_value mc_rewrite_node(mc_rewrite *rw, const mc_node *like, mc_op op, const mc_value *in,
                         int nin, const mc_attrs *attr);
mc_value mc_rewrite_const(mc_rewrite *rw, const mc_node *like, double value, mc_dtype dtype);
/* A scalar constant value / per, per a dim (ir/dims.c; 0: plain value): 1/n over a symbolic axis. */
mc_value mc_rewrite_const_per(mc_rewrite *rw, const mc_node *like, double value, int64_t per, mc_dtype dtype);
/* A scalar constant value * n, n a dim read when the kernels run (a symbolic length as a value). */
mc_value mc_rewrite_const_times(mc_rewrite *rw, const mc_node *like, double value, int64_t n, mc_dtype dtype);
/* Set dst's outputs to the mapped src outputs and swap dst into g (the old contents freed). */
mc_status mc_rewrite_finish(mc_rewrite *rw, mc_graph *g);
void mc_rewrite_abort(mc_rewrite *rw);

/* ---- tensor parallelism (passes/shard.c; issue 24) ------------------------------------------- */

/* Which linear layers of a graph split over n ranks, column-parallel then row-parallel (the
 * attention block between the QKV and output projections, the MLP between fc and its
 * projection), and what every other value is on each rank: split along one dimension, or whole. */
typedef struct mc_shard_plan mc_shard_plan;
/* Plan g (a valid user graph, before the passes) for n >= 1 ranks. Succeeds on any valid graph:
 * what cannot be split stays replicated, and the notes say why. MC_ERR_INPUT for a bad
 * argument, MC_ERR_SYSTEM when out of memory. */
mc_status mc_shard_plan_make(const mc_graph *g, int n, mc_shard_plan **out);
void mc_shard_plan_free(mc_shard_plan *plan); /* NULL-safe */
/* Rank r's graph (a new graph, the caller frees it): split params keep their names with their
 * local shapes, split values their local shapes (reshape/expand/iota/full shapes and slice
 * bounds follow), and each row-parallel linear(x, w, b) becomes linear(x, w) -> allreduce ->
 * add(b), the bias added once after the sum (matmul(x, w): matmul -> allreduce). Every other
 * node keeps its name, place and operator; dead nodes are left out. Inputs and outputs are the
 * whole values, in g's order, so the rank graphs take g's inputs and give g's outputs (every
 * rank the same). Today the graph is the same for every rank: only params differ by rank. */
mc_status mc_shard_graph(const mc_graph *g, const mc_shard_plan *plan, int rank, mc_graph **out);
/* For a param (or input) of g, by node index of g (the graph the plan was made for): the bytes
 * of rank r's part, and that part copied out of the full value (row-major, mc_dtype_size
 * elements). A replicated value's part is all of it. 0 / nothing for other nodes. */
size_t mc_shard_param_bytes(const mc_shard_plan *plan, const mc_graph *g, int node, int rank);
void mc_shard_param_slice(const mc_shard_plan *plan, const mc_graph *g, int node, int rank,
                          const void *full, void *part);
/* One line per decision ("sharded attn.w (columns, 3 sections) / proj.w (rows): 2 ranks, ...",
 * "fc.w stays replicated: its input is normalized over the split dimension (...)"), then a
 * summary line; "" for NULL. */
const char *mc_shard_plan_notes(const mc_shard_plan *plan);
int mc_shard_plan_allreduces(const mc_shard_plan *plan); /* allreduce nodes in each rank graph */
int mc_shard_plan_ranks(const mc_shard_plan *plan);      /* n */
int mc_shard_plan_split_dim(const mc_shard_plan *plan, int node); /* -1: whole on every rank */
/* `minic dump --stage shard --devices N`: the plan's notes as `#` comments, then rank `rank`'s
 * graph in .graph syntax. */
mc_status mc_shard_print(const mc_graph *g, int n, int rank, FILE *out);

/* ---- fusion and lowering (passes/fuse.c, passes/lower.c, passes/plan.c) --------------------- */

/* A coordinate map: node coordinate d = off[d] + sum_j coef[d][j] * p_j, where p is a point of
 * the group's coordinate space. Shape operators and broadcasting are maps, not copies. */
typedef struct mc_cmap {
    int rank;
    int64_t off[MC_MAX_RANK];
    int64_t coef[MC_MAX_RANK][MC_MAX_RANK];
} mc_cmap;

/* A strided view of a materialized node's buffer, over some node's own dimensions. */
typedef struct mc_tview {
    int base; /* the node whose buffer it reads */
    int64_t offset;
    int64_t stride[MC_MAX_RANK];
} mc_tview;

typedef enum {
    MC_FN_NONE,   /* not computed (dead) */
    MC_FN_LEAF,   /* input or param: a buffer of its own */
    MC_FN_CONST,  /* a scalar constant: inlined wherever it is used */
    MC_FN_VIEW,   /* a shape operator read through `view` */
    MC_FN_MEMBER, /* computed by group `group` */
} mc_fnode_kind;

typedef struct mc_fnode {
    mc_fnode_kind kind;
    int group;
    bool stored;       /* MEMBER: written to a buffer of its own (anchor, output, used outside) */
    bool forced;       /* must be stored: read through a view or as a GEMM operand */
    bool has_view;
    mc_tview view;     /* LEAF, stored MEMBER: contiguous over itself (or, for a value
                          stored straight into a copy's buffer, a view of that); VIEW: composed */
    mc_cmap *maps;     /* MEMBER: the maps it is evaluated at within its group */
    int nmaps;
} mc_fnode;

typedef enum {
    MC_FG_POINTWISE, /* also GEMM epilogues and reductions: see gemm, nred */
    MC_FG_RESHAPE,   /* a reshape that is neither a view nor a map: space = its operand's */
    MC_FG_CONCAT,    /* one copy kernel per operand */
    MC_FG_OUTPUT,    /* a graph output that is a leaf, constant or view: a copy */
    MC_FG_ELIDED,    /* a copy made unnecessary: its source is stored straight into its buffer */
    MC_FG_ATTENTION, /* a recognised attention chain (passes/attention.c), anchored at matmul(p, v) */
    MC_FG_COLLECTIVE, /* one allreduce, alone: its operand is a buffer of its own (contiguous over
                         the operand's shape unless another reader made that operand a strided
                         view first: check fnode.view), its result a buffer of its own */
} mc_fgroup_kind;

typedef struct mc_fgroup {
    mc_fgroup_kind kind;
    int anchor;                  /* the node the group was started from */
    int rank;                    /* the group's coordinate space */
    int64_t shape[MC_MAX_RANK];
    int gemm;                    /* the matmul computed as the GEMM, or -1 */
    int nred;                    /* reductions in the group (a scan counts as one) */
    bool scan;                   /* its reduction is a cumsum: a running sum along one axis, the
                                    group's only reduction, read at the group's own coordinates */
    int gathers;                 /* gathers in the group (never beside a GEMM) */
    bool reduced[MC_MAX_RANK];   /* the reduced dims of the space (when nred > 0) */
    int out_index;               /* MC_FG_OUTPUT: which graph output */
    int attention;               /* MC_FG_ATTENTION: which of mc_fusion's attention chains */
    int nmembers;                /* members so far (fusion caps it: MC_FUSE_MAX_MEMBERS) */
} mc_fgroup;

typedef struct mc_fusion {
    const mc_graph *g;
    mc_fnode *nodes;
    mc_fgroup *groups;
    int ngroups, cap;
    int *order;                  /* groups in execution order */
    struct mc_attention *attention; /* the attention chains found (passes/attention.c) */
    int nattention;
    const char **notes;          /* why candidate chains were not fused, one sentence each */
    int nnotes;
    mc_arena arena;
} mc_fusion;

/* Attention (passes/attention.c): the chain matmul(q, kT) -> scale -> mask -> softmax ->
 * matmul(p, v) of a decomposed graph, found so that fusion makes it one kernel. Steps are those
 * of kir_attn_step, with the graph node each mask step reads. */
typedef struct mc_attention {
    int pv, qk;                        /* the two matmuls; pv is the group's anchor */
    int q, kt, v;                      /* their operands, read through views */
    kir_attn_step steps[KIR_MAX_STEPS];/* view: -1 here (lowering makes them) */
    int step_node[KIR_MAX_STEPS];      /* WHERE, ADD: the mask node; -1 otherwise */
    int nsteps;
    bool skip;
    int64_t skip_lo, skip_hi;          /* as kir_attention's */
    int *members;                      /* nodes computed inside, pv included */
    int nmembers;
    int *band_nodes;                   /* the conditions of BAND steps (iota/compare trees that
                                          nothing else needs are not computed at all) */
    int nband_nodes;
} mc_attention;

/* Find every attention chain of g whose intermediates nothing else reads (users: CSR lists of
 * each node's users; is_output per node). Chains that look like attention (a softmax over the
 * last axis feeding a matmul) but cannot be fused leave a sentence in *notes saying why. All
 * memory in arena. */
mc_status mc_attention_find(const mc_graph *g, const int *user_start, const int *users,
                            const bool *is_output, mc_arena *arena, mc_attention **found,
                            int *nfound, const char ***notes, int *nnotes);

mc_status mc_fuse(const mc_graph *g, const mc_compile_options *opt, mc_fusion *out); /* passes/fuse.c */
void mc_fusion_free(mc_fusion *f);
/* Lower the groups to kernels; `user` is the graph the caller gave (buffers refer to it). */
mc_status mc_lower(const mc_fusion *f, const mc_graph *user, const mc_compile_options *opt,
                   kir_program **out); /* passes/lower.c */
void mc_plan_memory(kir_program *kp, bool share); /* passes/plan.c */
/* Mark the kernels computed from params alone (kir/kir.h, "Prep kernels"): before planning
 * (passes/hoist.c). */
void mc_hoist_params(kir_program *kp);
/* Give kp, one binding of a symbolic program's kernel list (kir_bind), the memory plan of
 * at_max, the same list bound at the symbols' maxima and planned with mc_plan_memory (share),
 * when that plan is valid for kp's sizes: the same temps with the same live ranges, each no
 * larger than at the maxima, and any two that overlap in memory while both are live an in-place
 * pair in kp as well (passes/plan.c). Then every temp gets at_max's offset, kp->arena_bytes is
 * at_max's, and true; else false, kp's temps untouched (plan kp itself), with why[] saying
 * which temp did not fit. */
bool mc_plan_memory_like(kir_program *kp, const kir_program *at_max, char *why, size_t why_size);

/* Map and view algebra shared by fusion and lowering (passes/views.c). */
void mc_cmap_identity(mc_cmap *m, int rank);
/* The map of operand `slot` of node n, given n's map; false when it is not affine (a reshape
 * that merges dimensions). Reductions: the map of their operand when n is at its natural map. */
bool mc_cmap_operand(const mc_graph *g, int n, int slot, const mc_cmap *m, mc_cmap *out);
/* The view of shape node n over its operand's view; false when it needs a copy. */
bool mc_tview_compose(const mc_graph *g, int n, const mc_tview *in, mc_tview *out);
void mc_contiguous_strides(const mc_graph *g, const int64_t *shape, int rank, int64_t *strides);
/* Arithmetic on strides, offsets and sizes that may be dims of g's table (views.c says when). */
int64_t mc_stride_mul(const mc_graph *g, int64_t a, int64_t b);
int64_t mc_stride_add(const mc_graph *g, int64_t a, int64_t b);
int64_t mc_shape_numel(const mc_graph *g, const int64_t *shape, int rank); /* a dim */
/* Can reshape n of x be split into groups of equal products, symbols and all (views.c)? */
bool mc_reshape_takes_symbols(const mc_graph *g, const mc_node *x, const mc_node *n);
bool mc_cmap_equal(const mc_cmap *a, const mc_cmap *b);
/* The view of shape operator n's operand that makes n read as v (a value stored straight into
 * the place a transpose or reshape copy would have put it); false for a slice or expand, which
 * see only part of their operand, or a reshape whose groups do not line up. */
bool mc_tview_invert(const mc_graph *g, int n, const mc_tview *v, mc_tview *out);

#endif
