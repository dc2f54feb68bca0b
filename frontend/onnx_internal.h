/* The ONNX importer's private interface, shared by its three files:
 *   frontend/onnx.c     reading the model (wire check, TensorProto data, external files), the
 *                       importer's state, attribute and operand access, host evaluation of
 *                       constants, the node loop and the public mc_onnx_* functions;
 *   frontend/onnx_ops.c the mappings of elementwise, logic, shape and tensor operators
 *                       (Reshape, Concat, Slice, Gather, Cast, reductions, ...);
 *   frontend/onnx_nn.c  the mappings of the network operators: MatMul, Gemm, Einsum, the
 *                       normalizations, Softmax, losses, Resize, LRN, RNN/GRU/LSTM, Conv, pools.
 * An op mapping reads its node's operands (onnx_in_value, onnx_in_const), builds minic values
 * through the C API's builder, and sets its outputs (onnx_set_out, onnx_set_const); when it
 * cannot, it says why (onnx_why) and returns false, and the node loop reports the node.
 */
#ifndef MINIC_FRONTEND_ONNX_INTERNAL_H
#define MINIC_FRONTEND_ONNX_INTERNAL_H

#include "frontend/onnx.h"

#ifdef MINIC_HAVE_ONNX
#include <onnx.pb-c.h>

#define MAX_FOLD_ELEMS (1 << 24) /* host-evaluated constants stay small */
#define MAX_FOLD_TOTAL (1 << 26) /* and all of them together (a hostile file's memory) */

/* ---- host constants ------------------------------------------------------------------------- */

enum {
    T_FLOAT = 1, T_UINT8 = 2, T_INT8 = 3, T_UINT16 = 4, T_INT16 = 5, T_INT32 = 6, T_INT64 = 7,
    T_STRING = 8, T_BOOL = 9, T_FLOAT16 = 10, T_DOUBLE = 11, T_UINT32 = 12, T_UINT64 = 13,
    T_COMPLEX64 = 14, T_COMPLEX128 = 15, T_BFLOAT16 = 16,
};

/* A constant on the host: integers (and bools) in i, floats in f (f32 data kept as float). */
typedef struct htensor {
    int elem;
    int rank;
    int64_t dims[MC_MAX_RANK];
    int64_t n;
    int64_t *i;
    double *f;
    float *f32;
    bool f32_given; /* f32 belongs to a param now (a second param of it copies) */
    bool sym;       /* integers only: some of i[] are symbolic dimensions of the graph (the
                       shape of an input with dim_params, and what shape arithmetic made of it);
                       onnx_in_const hides such a tensor, onnx_in_sconst gives it */
} htensor;

/* ---- the importer's state ------------------------------------------------------------------- */

enum { S_RUNTIME, S_CONST, S_POISON };

typedef struct slot {
    const char *name; /* the ONNX name (in the unpacked model) */
    int state;
    mc_value v;       /* runtime value, or a constant made a graph value; MC_NONE until then */
    htensor *c;
    bool initializer;
} slot;

typedef struct ctx {
    mc_onnx *m;
    mc_graph *g;
    const char *file;  /* for messages */
    char *dir;         /* the model's folder (external data), or NULL: none allowed */
    unsigned flags;
    int64_t opset;
    slot *slots;
    int nslots, cap;
    mc_name_map map;   /* ONNX name -> slot */
    void **allocs;     /* host memory freed at the end (NULL where ownership moved) */
    int nallocs, capallocs;
    char why[512];     /* the reason the current node failed */
    int nbad;          /* nodes reported */
    char report[3000]; /* the first reports, for the error message */
    size_t report_len;
    mc_note_fn note;
    void *note_ctx;
    const char *const *frozen; /* TensorProto files of the graph's inputs, in order, or NULL */
    int nfrozen;
    int64_t folded;    /* elements of the constants computed so far (MAX_FOLD_TOTAL at most) */
    const mc_onnx_dim *dims; /* sizes given for the inputs' dim_params */
    int ndims;
} ctx;

/* ---- attributes ----------------------------------------------------------------------------- */

typedef Onnx__NodeProto node_t;
typedef Onnx__AttributeProto attr_t;

typedef enum { B_ADD, B_SUB, B_MUL, B_DIV, B_EQ, B_LT, B_GT, B_LE, B_GE, B_MAX, B_MIN, B_AND, B_OR } binop;

/* ---- the operators -------------------------------------------------------------------------- */

typedef bool (*op_fn)(ctx *c, const node_t *n);

/* mc_value var = operand k of the node, or return false (the reason is set) */
#define VAL(var, k)                              \
    mc_value var = onnx_in_value(c, n, (k));     \
    if (var < 0)                                 \
        return false;

/* ---- helpers (frontend/onnx.c unless said) -------------------------------------------------- */

/* ONNX element types; a host constant's k-th value as a double or an int64 (saturated) */
const char *onnx_elem_name(int e);
bool onnx_elem_is_int(int e);
bool onnx_elem_is_float(int e);
double onnx_hf(const htensor *t, int64_t k);
int64_t onnx_hi(const htensor *t, int64_t k);
const mc_node *onnx_vnode(ctx *c, mc_value v); /* the graph node of a value */

/* host memory freed with the import; the reason a node fails (returns false) */
void *onnx_c_alloc(ctx *c, size_t bytes);
bool onnx_why(ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* slots: the model's values by ONNX name; host constants (onnx_new_fold: computed here) */
slot *onnx_new_slot(ctx *c, const char *name);
slot *onnx_find_slot(ctx *c, const char *name);
htensor *onnx_new_fold(ctx *c, int elem, int rank, const int64_t *dims);
htensor *onnx_load_tensor(ctx *c, Onnx__TensorProto *tp, bool steal);
bool onnx_map_dtype(ctx *c, int elem, mc_dtype *out);
mc_value onnx_as_value(ctx *c, slot *s);

/* a node's attributes, operands and outputs */
const attr_t *onnx_attr(const node_t *n, const char *name);
int64_t onnx_attr_i(const node_t *n, const char *name, int64_t def);
double onnx_attr_f(const node_t *n, const char *name, double def);
slot *onnx_in_slot(ctx *c, const node_t *n, size_t k);
bool onnx_has_in(const node_t *n, size_t k);
htensor *onnx_in_const(ctx *c, const node_t *n, size_t k);  /* NULL for a symbolic one */
htensor *onnx_in_sconst(ctx *c, const node_t *n, size_t k); /* symbolic ones too */
mc_value onnx_in_value(ctx *c, const node_t *n, size_t k);
void onnx_slot_type(ctx *c, const slot *s, int *elem, int *rank, int64_t *dims);
bool onnx_out_present(const node_t *n, size_t k);
bool onnx_set_slot(ctx *c, const node_t *n, size_t k, int state, mc_value v, htensor *t);
bool onnx_set_out(ctx *c, const node_t *n, size_t k, mc_value v);
bool onnx_set_const(ctx *c, const node_t *n, size_t k, htensor *t);
bool onnx_ints_of(ctx *c, const node_t *n, size_t input, const char *attr_name, int64_t *out,
                  int *count, int max, bool *given);
/* onnx_ints_of where entries may be symbolic dimensions (a shape computed from an input's) */
bool onnx_dims_of(ctx *c, const node_t *n, size_t input, const char *attr_name, int64_t *out,
                  int *count, int max, bool *given);
bool onnx_norm_axis(ctx *c, int64_t axis, int rank, int *out);

/* symbolic dimensions (dim_params): does a shape have one; "[B, T, 768]" for messages */
bool onnx_any_sym(int rank, const int64_t *dims);
const char *onnx_dims_str(ctx *c, int rank, const int64_t *dims, char *buf, size_t size);

/* a dimension (a number, or an expression of symbolic ones) as an i32 scalar that the run
 * computes from the bound sizes: the sum of a full of that many ones (shifted where it may be
 * below 1); MC_ERROR, no error set, where it has no least value over the bindings (`4 - T`) */
mc_value onnx_dim_value(ctx *c, int64_t d);

/* host evaluation: NumPy broadcasting, element-wise folds, copies to a new shape */
bool onnx_broadcast(ctx *c, int ra, const int64_t *a, int rb, const int64_t *b, int *r, int64_t *out);
int64_t onnx_bidx(const htensor *t, int r, const int64_t *shape, int64_t k);
htensor *onnx_fold_binary(ctx *c, binop op, const htensor *a, const htensor *b);
htensor *onnx_fold_copy(ctx *c, const htensor *a, int elem, int rank, const int64_t *dims);

/* building blocks of the mappings */
bool onnx_all_const(ctx *c, const node_t *n);
mc_value onnx_fscalar(ctx *c, mc_value like, double x);
bool onnx_attr_is(const node_t *n, const char *name, const char *def, const char *value);

/* frontend/onnx_ops.c: the product of dims; x with axis moved last (*back undoes it) */
int64_t onnx_numel(int rank, const int64_t *dims);
mc_value onnx_axis_last(ctx *c, mc_value x, int axis, int *back);

/* The op tables of onnx_ops.c and onnx_nn.c: {name, mapping}, ended by {NULL, NULL}. */
typedef struct onnx_op {
    const char *name;
    op_fn fn;
} onnx_op;
extern const onnx_op onnx_tensor_ops[];
extern const onnx_op onnx_nn_ops[];

#endif /* MINIC_HAVE_ONNX */
#endif
