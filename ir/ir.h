/* The graph IR: SSA tensor values with dtype, shape, operands, typed attributes and the place in
 * the source they came from. Every value is a node; a node's index is its mc_value. Nodes are
 * appended in definition order, so operands always come before their users and a forward walk
 * over g->nodes is a topological order (passes that rewrite the graph keep this true).
 *
 * The operator facts live in one list, ir/ops.def, expanded here into mc_op and mc_op_table.
 * Memory: a graph owns one arena (names, operand lists, source text); nodes are one growable
 * array, so a graph of n operators costs O(n).
 */
#ifndef MINIC_IR_H
#define MINIC_IR_H

#include "support/support.h"

#include <stdarg.h>

/* ---- operators ---------------------------------------------------------------------------- */

typedef enum {
    MC_KIND_LEAF,    /* input, param, const */
    MC_KIND_UNARY,   /* float ops; neg/abs also i32 */
    MC_KIND_BINARY,  /* broadcasting */
    MC_KIND_COMPARE, /* broadcasting, result bool */
    MC_KIND_SELECT,  /* where(cond, a, b) */
    MC_KIND_CAST,
    MC_KIND_REDUCE,  /* attrs: axes (list), keepdim */
    MC_KIND_NORM,    /* softmax, log_softmax (axis), layernorm, rmsnorm (eps) */
    MC_KIND_MATMUL,
    MC_KIND_SHAPE,
    MC_KIND_CREATE,
    MC_KIND_SPATIAL, /* composites over channels-first data and padding: conv, pools, pad, batchnorm */
    MC_KIND_GATHER,  /* gather(x, idx, axis): a load whose place along one axis is data */
    MC_KIND_COLLECTIVE, /* allreduce(x): the sum over the ranks of a tensor-parallel program */
} mc_op_kind;

typedef enum {
#define X(id, name, kind, min_in, max_in, flops, expr, operands, attrs, required, dtypes, flags) \
    MC_OP_##id,
#include "ir/ops.def"
#undef X
    MC_NUM_OPS
} mc_op;

/* The attribute keys of the .graph format (`axis=1`); ops.def says which operator takes which. */
typedef enum {
    MC_ATTR_AXIS, MC_ATTR_KEEPDIM, MC_ATTR_START, MC_ATTR_END, MC_ATTR_PERM, MC_ATTR_SHAPE,
    MC_ATTR_EPS, MC_ATTR_VALUE, MC_ATTR_TO, MC_ATTR_DTYPE, MC_ATTR_ALPHA, MC_ATTR_MIN, MC_ATTR_MAX,
    MC_ATTR_STEP, MC_ATTR_PADS, MC_ATTR_KERNEL, MC_ATTR_STRIDE, MC_ATTR_PADDING, MC_ATTR_DILATION,
    MC_ATTR_GROUPS, MC_NUM_ATTRS
} mc_attr_key;
extern const char *const mc_attr_names[MC_NUM_ATTRS]; /* "axis", "keepdim", ... */
#define MC_ATTR_BIT(key) (1u << (key))

typedef struct mc_op_info {
    const char *name;   /* as written in .graph files */
    mc_op_kind kind;
    int min_in, max_in; /* max_in -1: any number */
    int flops;          /* per output element, for primitives */
    const char *expr;   /* C/CUDA expression over a, b, c; NULL where passes lower it first */
    const char *operands; /* for people: "x", "a, b", "x, w, b?" ("" for none) */
    unsigned attrs;     /* MC_ATTR_BIT of every key it takes */
    unsigned required;  /* the keys it must be given */
    unsigned dtypes;    /* MC_DTYPE_BIT of every dtype it computes on (mc_op_accepts_dtype) */
    unsigned flags;     /* MC_OP_COMPOSITE, MC_OP_HEAVY */
} mc_op_info;

#define MC_DTYPE_BIT(d) (1u << (d))
enum {
    MC_OP_COMPOSITE = 1u << 0, /* decomposed into primitives by passes/decompose.c */
    MC_OP_HEAVY = 1u << 1,     /* a transcendental: tens of instructions per element */
};

extern const mc_op_info mc_op_table[MC_NUM_OPS];
bool mc_op_parse(const char *name, size_t len, mc_op *out); /* NULL-safe lookup by name */
bool mc_op_is_composite(mc_op op); /* ops.def's COMPOSITE: softmax, log_softmax, ... */
bool mc_op_is_heavy(mc_op op);     /* ops.def's HEAVY: exp, log, tanh, ... */
/* Does op accept values of dtype d (docs/FORMAT.md §1)? For where: its a and b; for cast, iota and full:
 * the result. The one rule mc_node_infer checks (ir/infer.c). */
bool mc_op_accepts_dtype(mc_op op, mc_dtype d);

/* ---- dtypes ------------------------------------------------------------------------------- */

bool mc_dtype_is_float(mc_dtype d);
uint16_t mc_f16_from_double(double x);  /* round to nearest even, overflow to inf, NaN kept */
uint16_t mc_bf16_from_double(double x); /* round to nearest even */
double mc_f16_to_double(uint16_t h);
double mc_bf16_to_double(uint16_t h);
float mc_f32_from_double(double x);
/* Round x to what dtype d can hold (float: nearest even; i32: truncate toward zero and
 * saturate, NaN -> 0; bool: x != 0). */
double mc_round_to_dtype(double x, mc_dtype d);
/* x kept within the range of dtype d: for f16 and bf16, +-inf where a rounding cast to d would
 * give it (|x| >= 65520, >= 0x1.ffp127), else x unchanged (its extra precision kept); other
 * dtypes: x. What every backend does to a half-typed value that is not stored (a fused
 * intermediate): it keeps f32 precision but never a value its type cannot hold. */
double mc_saturate_to_dtype(double x, mc_dtype d);
/* Load element i of a host array of dtype d as a double; store a double (rounded) there. */
double mc_load_element(const void *data, mc_dtype d, int64_t i);
void mc_store_element(void *data, mc_dtype d, int64_t i, double x);

/* ---- the graph ---------------------------------------------------------------------------- */

typedef struct mc_attrs {
    int64_t list[MC_MAX_RANK]; /* axes (reductions), perm (transpose), shape (reshape, expand,
                                  iota, full); normalized: axes non-negative and sorted */
    int nlist;
    bool has_list;             /* reductions: false = every axis; transpose: false = reverse */
    bool keepdim;
    int64_t axis;              /* softmax, log_softmax, slice, concat, iota: non-negative */
    int64_t start, end;        /* slice: start in [0, size), then every step-th index before end
                                  (exclusive; MC_END: to the axis's end in the step's direction) */
    int64_t step;              /* slice: not 0; negative walks backward */
    double value;              /* const, full: the number; layernorm, rmsnorm: eps */
    int64_t per;               /* const: 0, or a dim n: the value is value / n (mean's 1/n over a
                                  symbolic axis, passes/decompose.c; lowered to KI_SIZE) */
    bool times;                /* const with per: value * n instead (a symbolic length as a value:
                                  update's and argmax's bounds; KI_SIZE's `times`) */
    mc_dtype dtype;            /* cast: target; iota, full: result dtype */
    double alpha;              /* leaky_relu: the slope below 0 */
    double lo, hi;             /* clip: the bounds that has_lo, has_hi say are given */
    bool has_lo, has_hi;
    int64_t pads[2 * MC_MAX_RANK]; /* pad: before each axis, then after each axis */
    int npads;
    /* conv, maxpool, avgpool: per spatial axis (1 or 2); inference fills in the defaults
     * (stride 1, a pool's stride its kernel, padding 0, dilation 1) */
    int64_t kernel[2], stride[2], padding[2], dilation[2];
    int nkernel, nstride, npadding, ndilation;
    int64_t groups;            /* conv */
    int64_t kchunk;            /* a conv's implicit-GEMM matmul (passes/decompose.c): 0, its K
                                  as (c, ky, kx); kc > 0, as (c / kc, ky, kx, c % kc), which
                                  its weights [M, K] are laid out in too (kir_conv.kc) */
} mc_attrs;

/* The attributes an operator starts from before a .graph file sets any: softmax's axis -1,
 * concat's 0, layernorm's eps 1e-5, rmsnorm's 1e-6, iota's dtype i32, full's f32, slice's
 * start and end MC_END (slice: from the first end the step walks from, to the other), step 1; everything else zero (reductions: every axis; transpose: reversed). */
mc_attrs mc_op_default_attrs(mc_op op);

/* A map from names to node indices (open addressing, names not copied: they must outlive it).
 * The graph keeps one to reject a name used twice; the printer and the verifier build their
 * own. Entries may go stale when a pass rewrites g->nodes: check a hit against the node. */
typedef struct mc_name_map {
    const char **keys;
    int32_t *values;
    uint32_t *hashes; /* of each key, so that probing rarely touches the strings */
    size_t cap, count;
} mc_name_map;
bool mc_name_map_put(mc_name_map *m, const char *key, int32_t value); /* false only on OOM */
int32_t mc_name_map_get(const mc_name_map *m, const char *key);       /* -1 when absent */
void mc_name_map_free(mc_name_map *m);

typedef struct mc_node {
    mc_op op;
    mc_dtype dtype;
    int rank;
    int64_t shape[MC_MAX_RANK];
    int nin;
    int32_t *in;      /* operand values, all < this node's index */
    mc_attrs attr;
    const char *name; /* the user's name, or NULL (printed as t<index>) */
    int line, col;    /* where it was defined in the graph file; 0 when built through the API */
    mc_op origin;     /* the user's operator this node came from (differs after decomposition) */
    int32_t user;     /* the node of the user's graph this one stands for: its own index where
                         the user built it, carried by every rewrite (ir/graph.c, passes/rewrite.c)
                         so lowering names buffers after the user's values without a search */
    bool materialize; /* fusion stores it in a kernel of its own instead of recomputing it inside
                         a user's group (passes/fold.c: folded weights, computed over params
                         once per run rather than once per activation); rewrites carry it */
} mc_node;

/* Symbolic dimensions (ir/dims.c): a dim <= MC_DIM_SYM_BASE is expression k of the graph's
 * table, encoded MC_DIM_SYM_BASE - k; every other dim is a size >= 1 as before. */
#define MC_MAX_SYMS 16
#define MC_DIM_SYM_BASE (INT64_MIN / 2)
typedef struct mc_dims mc_dims;

struct mc_graph {
    const char *name;  /* the `graph NAME` statement, or NULL */
    const char *file;  /* the graph file's path, or NULL for the C API */
    const char *text;  /* the graph file's text (for error carets), or NULL */
    mc_node *nodes;
    int nnodes, cap;
    int32_t *outputs;
    int noutputs;
    bool failed;       /* a builder failed: outputs can't be set */
    mc_arena arena;
    mc_name_map names; /* user names -> node index, kept by declare/set_name (may go stale) */
    mc_dims *dims;     /* symbols and dimension expressions; NULL while the graph has none */
};

/* Append a node: checks operand count, dtypes and shapes for op, infers the result type and
 * normalizes attributes (negative axes, slice clamping, `-1` in reshape). On a mistake it sets
 * the error (with the node's file:line:col when line > 0) and returns MC_ERROR. */
mc_value mc_graph_add(mc_graph *g, mc_op op, const mc_value *in, int nin, const mc_attrs *attr,
                      int line, int col);
/* Check n's operand count, dtypes and shapes against its operator (operands are g's nodes
 * n->in[..], valid indices), fill n->dtype, rank and shape and normalize n->attr. Leaves:
 * INPUT/PARAM check the dtype and shape already in n; CONST takes attr.dtype and shape [].
 * Errors name the operator and, when n->line > 0, the place in g->file. Idempotent on its own
 * result, which is what lets the verifier re-run it after every pass. */
mc_status mc_node_infer(const mc_graph *g, mc_node *n);
/* A name a .graph file can spell: [A-Za-z_][A-Za-z0-9_.]* and not a reserved word. */
bool mc_name_is_valid(const char *name);

/* Declare an input or param (op MC_OP_INPUT / MC_OP_PARAM). */
mc_value mc_graph_declare(mc_graph *g, mc_op op, const char *name, mc_dtype dtype,
                          const int64_t *shape, int rank, int line, int col);
int64_t mc_node_numel(const mc_node *n);
const char *mc_node_name(const mc_graph *g, int index, char *buf, size_t size); /* name or tN */
mc_graph *mc_graph_clone(const mc_graph *g); /* a deep copy (passes work on one); NULL on OOM */

/* Check every invariant: operands before users, types as inference gives, outputs valid.
 * Returns MC_OK or an internal-error message naming the pass (for the pass manager). */
mc_status mc_graph_verify(const mc_graph *g, const char *after_pass);

/* ---- symbolic dimensions (ir/dims.c) ------------------------------------------------------ */

bool mc_dim_is_sym(int64_t d);               /* an expression of the table, not a size */
bool mc_dim_valid(const mc_graph *g, int64_t d); /* a size >= 1 or an expression g has */
/* Declare symbol `name` (or find it) with maximum max (0: none; a second, different maximum is
 * an error at line:col); returns its dim, or 0 with the error set (and g->failed). */
int64_t mc_dim_declare(mc_graph *g, const char *name, size_t len, int64_t max, int line, int col);
int mc_dim_find_sym(const mc_graph *g, const char *name, size_t len); /* its index, or -1 */
int mc_graph_num_syms(const mc_graph *g);        /* 0: a static graph */
const char *mc_dim_sym_name(const mc_graph *g, int k);
int64_t mc_dim_sym_max(const mc_graph *g, int k); /* 0: none declared */
int mc_dim_as_sym(const mc_graph *g, int64_t d);  /* the symbol d is exactly, or -1 */
/* Arithmetic on dims (sizes or expressions); false when the result is not a positive size or
 * an expression (overflow, a polynomial too large, a quotient that is not exact). */
bool mc_dim_add(const mc_graph *g, int64_t a, int64_t b, int64_t *out);
bool mc_dim_add_const(const mc_graph *g, int64_t a, int64_t c, int64_t *out);
bool mc_dim_mul(const mc_graph *g, int64_t a, int64_t b, int64_t *out);
bool mc_dim_div_exact(const mc_graph *g, int64_t a, int64_t b, int64_t *out);
/* The least value d takes over every binding (each symbol >= 1): false when there is none that
 * can be shown (a symbol's term with a negative coefficient: `4 - T`). `T - 1` gives 0. */
bool mc_dim_lower_bound(const mc_graph *g, int64_t d, int64_t *lo);
bool mc_dim_uses_sym(const mc_graph *g, int64_t d, int k); /* does symbol k appear in d? */
/* d's size when symbol k has values[k]; false on overflow. */
bool mc_dim_eval(const mc_graph *g, int64_t d, const int64_t *values, int64_t *out);
/* The same over a table alone (a kernel program's copy, kir/kir.h): */
bool mc_dims_eval(const mc_dims *t, int64_t d, const int64_t *values, int64_t *out);
const char *mc_dims_str(const mc_dims *t, int64_t d, char *buf, size_t size);
int mc_dims_num_syms(const mc_dims *t);
/* Is d a multiple of m at every binding (a constant that is; an expression each of whose
 * coefficients is)? False where that cannot be shown. */
bool mc_dims_multiple_of(const mc_dims *t, int64_t d, int64_t m);
/* d's largest value over the bindings within the declared maxima: false when a symbol it uses
 * has no maximum, a coefficient is negative, or the value overflows. */
bool mc_dims_max(const mc_dims *t, int64_t d, int64_t *out);
const char *mc_dim_str(const mc_graph *g, int64_t d, char *buf, size_t size); /* "B*T*12", "7" */
void mc_dims_free(mc_dims *t);
mc_dims *mc_dims_clone(const mc_dims *t); /* NULL for NULL or on OOM */
/* A static copy of symbolic graph g with symbol k bound to values[k] (each >= 1): every type
 * and shape list evaluated and inferred again. A binding that breaks what the symbolic types
 * assumed (a slice inside a symbolic axis that is now too short) is MC_ERR_INPUT naming the
 * node's place and the binding. */
mc_status mc_graph_specialize(const mc_graph *g, const int64_t *values, mc_graph **out);

/* The scalar meaning of every primitive (ir/semantics.c), the one definition every evaluator
 * uses: op applied to a, b, c where the operands have dtype `operand` (compare and where: of
 * their value operands) and the result has dtype `result`, in double and unrounded. i32
 * arithmetic wraps and divides toward zero (x / 0 = 0); MC_OP_CAST rounds to `result`. */
double mc_op_apply(mc_op op, mc_dtype operand, mc_dtype result, double a, double b, double c);
/* Reductions: the start value (0, -inf, +inf) and one step acc (op) x; i32 sums wrap, and a
 * NaN anywhere makes max and min NaN. */
double mc_reduce_identity(mc_op op);
double mc_reduce_step(mc_op op, mc_dtype dtype, double acc, double x);
/* Reduce an integer modulo 2^32 into the i32 range (two's complement). */
double mc_wrap_i32(int64_t v);
/* update's run-time error (MC_ERR_INPUT at the operator's place in g's file, or unlocated):
 * pos outside [0, size - len] along axis. bound 0: pos is exact; 1: pos or more; -1: pos or
 * less (a kernel sees pos through an i32 index that saturates: passes/decompose.c). */
mc_status mc_update_pos_fail(const mc_graph *g, int line, int col, int64_t pos, int bound, int64_t len,
                             int64_t size, int axis);

/* The float64 evaluation of a graph (ir/eval.c): the oracle of docs/FORMAT.md §6. Inputs and
 * params are given as host arrays in their own dtype (inputs[i] for node i, NULL for others);
 * outputs come back as doubles, one malloc'd array per graph output, unrounded when `exact`,
 * or rounded to each value's dtype at every node when not (the reference backend's rule).
 * i32 arithmetic wraps and x / 0 is 0 (as kir/kir.h defines for every backend). */
mc_status mc_graph_eval(const mc_graph *g, const void *const *inputs, bool exact,
                        double **outputs);
/* The same over the n rank graphs of a tensor-parallel program (passes/shard.c: one node
 * structure, shapes that may differ), evaluated in lockstep: allreduce is the sum over the ranks
 * of its operand, in rank order, the same on every rank (mc_graph_eval: one rank, x itself).
 * inputs[r] is rank r's array as above; outputs[r * noutputs + p] is rank r's output p. */
mc_status mc_graph_eval_ranks(const mc_graph *const *g, int nranks, const void *const *const *inputs,
                              bool exact, double **outputs);

#endif
