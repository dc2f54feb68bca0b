/* The kernel IR: what fusion produces and what every backend renders.
 *
 * A kir_program is a list of kernels over a set of buffers. Each kernel iterates over an index
 * space `shape[0..rank)` and is a tiny straight-line program per point of that space: loads
 * through strided views, arithmetic, stores. Shape operators never appear here: a transpose,
 * slice, expand or broadcast is a view's offset and strides, so it costs index arithmetic in the
 * consumer, not a copy.
 *
 * The index space splits in two: the first `nrow` dimensions are "row" dimensions, the rest are
 * reduced. A pointwise kernel has nrow == rank and a single row block: one evaluation per point.
 * A reduction kernel runs, for every row, its blocks in order:
 *
 *     for each row r:                      (the nrow leading dims)
 *         block 0 (loop): for each j in the reduced dims: instrs...; reduce into rowval 0
 *         block 1 (row):  instrs using rowval 0 (e.g. 1/sum); row-level stores
 *         block 2 (loop): for each j: instrs using rowvals; element stores (softmax's output)
 *
 * Instructions of a loop block may use instructions of earlier *row* blocks (scalars of the
 * row) and of their own block, never of another loop block: a value needed in two loops is
 * recomputed (the pass duplicates it), which is what lets a backend keep the row on chip.
 * KI_ROWVAL r reads reduction r's result; it is usable after the loop block that computes it.
 *
 * A GEMM kernel computes acc[batch.., m, n] = sum_k A[batch.., m, k] * B[batch.., k, n] in f32,
 * then runs its single row block (the epilogue) over the index space [batch.., M, N] with
 * KI_ACC standing for acc at that point: bias, activation, scaling, residual, stores.
 *
 * Views: element (i_0, .., i_{rank-1}) of the index space is at
 * buffer[offset + sum_d i_d * stride[d]] (in elements of the buffer's dtype). stride 0 along a
 * dimension is a broadcast. In a row block only the first nrow strides matter.
 * GEMM operand views use the same batch strides, then two more: A: stride[nb] along M and
 * stride[nb+1] along K; B: stride[nb] along K and stride[nb+1] along N (nb = batch rank).
 *
 * Stores may go through any view, not only a contiguous one: a value whose only reader was a
 * transpose/reshape copy is stored straight into the copy's buffer through permuted strides.
 * KI_INDEX yields an i32 (iota of another dtype is followed by a cast).
 *
 * Arithmetic: every KI_OP computes in f32 for float dtypes (f16 and bf16 are converted when
 * loaded and rounded when stored), in i32 for i32, and bool for bool; `dtype` is the value's
 * dtype in the graph, so a backend knows what a store converts to.
 */
#ifndef MINIC_KIR_H
#define MINIC_KIR_H

#include "ir/ir.h"

typedef enum { KIR_POINTWISE, KIR_REDUCTION, KIR_GEMM, KIR_COPY } kir_category;

typedef enum {
    KBUF_INPUT,  /* a graph input: bound by the user */
    KBUF_PARAM,  /* a graph param: bound by the user or from --weights */
    KBUF_OUTPUT, /* a graph output: owned by the program, read by the user */
    KBUF_TEMP,   /* an intermediate: lives in the planned arena at `offset` */
} kir_buffer_kind;

typedef struct kir_buffer {
    kir_buffer_kind kind;
    mc_dtype dtype;
    int64_t numel;
    int node;              /* the graph value it holds (for names and provenance) */
    int64_t offset;        /* KBUF_TEMP: byte offset in the arena (memory plan) */
    int first, last;       /* kernels that first write and last read it (for the plan) */
} kir_buffer;

typedef struct kir_view {
    int buffer;
    int64_t offset;              /* in elements */
    int64_t stride[MC_MAX_RANK]; /* per index-space dimension, in elements; 0 = broadcast */
} kir_view;

typedef enum {
    KI_LOAD,   /* view: which kernel view to read at the current point */
    KI_CONST,  /* value */
    KI_INDEX,  /* view: which index-space dimension (iota) */
    KI_ROWVAL, /* view: which reduction's result */
    KI_ACC,    /* GEMM epilogue: the accumulator at this point */
    KI_OP,     /* op applied to arg[0..nin) */
} kir_instr_kind;

typedef struct kir_instr {
    kir_instr_kind kind;
    mc_op op;      /* KI_OP: a primitive with an expression in ops.def, or MC_OP_CAST */
    mc_dtype dtype;/* result dtype */
    int arg[3];    /* KI_OP operands: indices of earlier instructions */
    int view;      /* KI_LOAD: view index; KI_INDEX: dimension; KI_ROWVAL: reduction index */
    double value;  /* KI_CONST */
} kir_instr;

typedef struct kir_block {
    bool loop;   /* true: once per element of the reduced dims; false: once per row */
    int first;   /* instructions [first, first + count) */
    int count;
} kir_block;

typedef struct kir_reduce {
    mc_op op;    /* MC_OP_SUM, MC_OP_MAX or MC_OP_MIN */
    int block;   /* the loop block it accumulates in */
    int value;   /* instruction reduced */
    mc_dtype dtype; /* accumulator semantics: f32 for floats, i32 for i32 */
} kir_reduce;

typedef struct kir_store {
    int block;   /* stores happen in this block, after its instructions */
    int view;
    int value;   /* instruction stored (converted to the buffer's dtype) */
} kir_store;

typedef struct kir_gemm {
    int a, b;        /* views (see above) */
    int64_t m, n, k; /* the index space is [batch.., m, n]; nb = rank - 2 */
    bool tf32;
} kir_gemm;

typedef struct kir_kernel {
    char name[64];          /* pw_fused_mul_add_gelu_3, red_fused_softmax_1, gemm_bias_gelu_0 */
    kir_category category;
    int rank;
    int64_t shape[MC_MAX_RANK];
    int nrow;               /* leading row dimensions; rank - nrow are reduced */
    kir_view *views;
    int nviews;
    kir_instr *code;
    int ncode;
    kir_block *blocks;
    int nblocks;
    kir_reduce *reds;
    int nreds;
    kir_store *stores;
    int nstores;
    kir_gemm gemm;          /* category KIR_GEMM only */
    mc_op *ops;             /* the user's operators it computes (node origins), each once */
    int nops;
    int *lines;             /* their graph-file lines, ascending, each once (none for the API) */
    int nlines;
    int64_t flops, bytes;   /* kir_count() */
} kir_kernel;

typedef struct kir_program {
    kir_buffer *buffers;
    int nbuffers;
    kir_kernel *kernels;
    int nkernels;
    int *graph_buffer;      /* for each graph node: its buffer, or -1 (fused away / a view) */
    int64_t arena_bytes;    /* planned size of all KBUF_TEMP buffers. Two temps may share an
                               offset when one kernel reads the first and writes the second
                               element by element through the same view (passes/plan.c: in
                               place), so a backend must not assume that a kernel's input and
                               output buffers never alias (no `restrict`/noalias on temps). */
    int64_t unplanned_bytes;/* what they would need with a buffer each */
    mc_arena arena;         /* everything above lives here */
} kir_program;

void kir_program_free(kir_program *kp);
/* Check every invariant above (kir/verify.c): blocks, operands within reach, views inside their
 * buffers, and with `planned` the temps inside the arena. MC_OK, or an internal error naming
 * `stage` and the kernel. The pipeline runs it after lowering and after planning when
 * mc_compile_options.verify is set (debug builds, tests, minic dump). */
mc_status kir_verify(const kir_program *kp, const char *stage, bool planned);
/* FLOPs and bytes of a kernel, from its IR (kir/kir.c): a GEMM's 2*M*N*K plus its
 * epilogue's arithmetic; each KI_OP counts its op's flops once per point where it is evaluated;
 * bytes: each distinct buffer read once, each written once, at its dtype's size. */
void kir_count(const kir_program *kp, kir_kernel *k);
/* Print a kernel list readably (minic dump --stage fused). g is the graph given to
 * mc_compile_kernels (buffer nodes refer to it); NULL prints buffers by number only. */
void kir_print(const kir_program *kp, const mc_graph *g, FILE *out);
/* One kernel, as kir_print shows it. */
void kir_print_kernel(const kir_program *kp, const kir_kernel *k, const mc_graph *g, FILE *out);
/* "pointwise", "reduction", "gemm", "copy" (the profile's category names). */
const char *kir_category_name(kir_category c);

#endif
