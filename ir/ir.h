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

#include "minic.h"

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
} mc_op_kind;

typedef enum {
#define X(id, name, kind, min_in, max_in, flops, expr) MC_OP_##id,
#include "ops.def"
#undef X
    MC_NUM_OPS
} mc_op;

typedef struct mc_op_info {
    const char *name;   /* as written in .graph files */
    mc_op_kind kind;
    int min_in, max_in; /* max_in -1: any number */
    int flops;          /* per output element, for primitives */
    const char *expr;   /* C/CUDA expression over a, b, c; NULL where passes lower it first */
} mc_op_info;

extern const mc_op_info mc_op_table[MC_NUM_OPS];
bool mc_op_parse(const char *name, size_t len, mc_op *out); /* NULL-safe lookup by name */
bool mc_op_is_composite(mc_op op); /* softmax, log_softmax, layernorm, rmsnorm, linear, mean */

/* ---- errors ------------------------------------------------------------------------------- */

/* Set the calling thread's error (mc_error_message). Returns status, so `return mc_fail(...)`. */
mc_status mc_fail(mc_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
mc_status mc_vfail(mc_status status, const char *fmt, va_list ap);
/* An error at a place in a source text: `file:line:col: error: msg`, the line, and a caret. */
mc_status mc_fail_at(mc_status status, const char *file, const char *text, int line, int col,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Broken internal invariants (never the user's mistakes): file and line, then abort. */
#define MC_ASSERT(cond)                                                                        \
    do {                                                                                       \
        if (!(cond)) mc_internal_error(__FILE__, __LINE__, #cond);                            \
    } while (0)
/* A place control never reaches (a switch over every enum value): unconditional, so compilers
 * know the function does not fall off its end at any optimization level. */
#define MC_UNREACHABLE(what) mc_internal_error(__FILE__, __LINE__, what)
_Noreturn void mc_internal_error(const char *file, int line, const char *what);

/* ---- memory ------------------------------------------------------------------------------- */

typedef struct mc_arena_block mc_arena_block;
typedef struct mc_arena {
    mc_arena_block *head; /* newest block first */
} mc_arena;

void *mc_arena_alloc(mc_arena *a, size_t size);           /* zeroed, 16-aligned; NULL on OOM */
char *mc_arena_strdup(mc_arena *a, const char *s);
char *mc_arena_strndup(mc_arena *a, const char *s, size_t n);
void mc_arena_free(mc_arena *a);

/* Checked size arithmetic: false on overflow (every size computation goes through these). */
bool mc_mul_overflows(int64_t a, int64_t b, int64_t *out);
bool mc_add_overflows(int64_t a, int64_t b, int64_t *out);

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
    int64_t start, end;        /* slice: clamped to [0, size], end >= start */
    double value;              /* const, full: the number; layernorm, rmsnorm: eps */
    mc_dtype dtype;            /* cast: target; iota, full: result dtype */
} mc_attrs;

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
} mc_node;

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

/* The float64 evaluation of a graph (ir/eval.c): the numerical oracle of SPEC §6. Inputs and
 * params are given as host arrays in their own dtype (inputs[i] for node i, NULL for others);
 * outputs come back as doubles, one malloc'd array per graph output, unrounded when `exact`,
 * or rounded to each value's dtype at every node when not (the reference backend's rule).
 * i32 arithmetic wraps and x / 0 is 0 (as codegen/kir.h defines for every backend). */
mc_status mc_graph_eval(const mc_graph *g, const void *const *inputs, bool exact,
                        double **outputs);

#endif
