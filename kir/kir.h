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
 * An attention kernel (docs/FORMAT.md §2, "attention") computes, for every point (batch.., i, c)
 * of its index space [batch.., Tq, Dv],
 *
 *     s_j = steps(q[batch.., i, :] . k[batch.., j, :])      for every key j < Tk   (f32)
 *     acc = sum_j exp(s_j - max s) v[batch.., j, c] / sum_j exp(s_j - max s)
 *
 * then runs its single row block with KI_ACC standing for acc, like a GEMM's epilogue (a store,
 * nothing else today). The score steps are the scale and masks the graph applied between the
 * two matmuls, in the graph's order (kir_attn_step). A row whose every score is -inf (fully
 * masked) gives NaN, as the unfused softmax does (max -inf, -inf - -inf = NaN). q, k, v and the
 * masks are views like a GEMM's operands: batch strides over the index space's batch dims, then
 * two more: q: stride[nb] along Tq, stride[nb+1] along D; k: along Tk, along D; v: along Tk,
 * along Dv; a mask: along Tq, along Tk (0 where it broadcasts).
 *
 * A gather (KI_GATHER) is the one load whose place is data: with i = arg[0]'s value (i32) and
 * n = size, it reads view `view` at the current point plus (i < 0 ? i + n : i) * stride elements;
 * the view itself does not move along the gathered axis (that axis is not in the index space).
 * An index outside [-n, n) is never read: the load reads index 0 instead, and the run records
 * check `check` (kir_program.checks) with the index, and fails with an input error naming the
 * gather's place once the kernels are done. The first failed check of a run is reported (with
 * several threads or GPU blocks, any one of those that failed).
 *
 * A collective kernel (KIR_COLLECTIVE, the graph's allreduce) sums a value over the ranks of a
 * tensor-parallel program (mc_program.nranks): out = the sum over every rank of its in, the
 * same on every rank. `coll` names two views, in and out, over the 1-D index space [count]
 * with stride 1: each is `count` contiguous elements of its buffer from the view's offset, both
 * of one float dtype. They are either disjoint or the very same elements (the memory plan may
 * put them in place; a communicator must accept in == out, as NCCL does). The kernel also
 * carries the code of the copy out = in (one row block: load in, store out), which is what it
 * computes with one rank or none (nranks <= 1), so the verifier, the counters and the memory
 * plan read it like any kernel, and a backend may run that copy when nranks <= 1.
 *
 * A scan (kir_reduce.scan, the graph's cumsum) is a reduction whose running value is read inside
 * its own loop block: there KI_ROWVAL r is the reduction of the elements before the current one
 * (the exclusive prefix: the identity at the row's first element), so the inclusive cumsum is
 * KI_ROWVAL r + value. Its kernel walks each row's elements in order, one after the other: it
 * has exactly one reduced dimension, one loop block, and that one reduction, a sum (kir/verify.c
 * checks it). The work is O(n) per row of n; rows are independent (the parallel axis). A float
 * scan accumulates in double (f64), and KI_ROWVAL reads that value rounded to f32: a long row's
 * rounding errors do not add up along it (each element is within a few f32 roundings of the exact
 * prefix, as the float64 reference needs: 1e-5 at any length); an i32 scan wraps, as sum does.
 * After the loop block, KI_ROWVAL r is the row's total (rounded to f32 for floats).
 *
 * Sizes known when the program runs (docs/design/symbolic-dimensions.md, step 3). A program
 * lowered from a graph with symbolic dimensions has `dims` (the graph's table of expressions,
 * ir/dims.c): then every size below may be a dim, a constant or an expression of the symbols
 * in the same int64 encoding as the graph's shapes: a buffer's numel, a kernel's shape, a view's
 * offset and strides (0 stays 0: a broadcast), gemm m/n/k, attention tq/tk, a gather's stride
 * and size, a check's size and extent, a collective's count; and KI_SIZE computes `value / n`
 * for a dim n (mean's 1/n over a symbolic axis), or `value * n` (update's and argmax's
 * lengths). kir_bind evaluates all of them for one binding
 * of the symbols into a plain program (KI_SIZE becomes KI_CONST), which is what the verifier,
 * the counter, the memory plan and backends without run-time sizes read; such a program is
 * neither planned nor counted until it is bound. Attention steps (band bounds) stay constants.
 *
 * Prep kernels (passes/hoist.c, mc_compile_options.hoist). A kernel whose every read is a param,
 * or a temp that only prep kernels write (a conv's weights re-laid by K chunks, a batchnorm
 * folded into them), and that writes temps alone (never a graph output), is marked `prep`: its
 * values change only when a param it reads is bound again, so the runtime runs the prep kernels,
 * in list order, before the first run and again before a run that follows such a binding, never
 * as part of a run (nor in a CUDA graph a run replays). Params they read are marked `prep_read`;
 * the temps they write that a run reads are `kept` (the memory plan gives each a place of its
 * own after the shared part of the arena: a run overwrites nothing of them). A kernel over a
 * symbolic size, or with a gather's check or a collective, is never prep.
 *
 * Arithmetic: every KI_OP computes in f32 for float dtypes (f16 and bf16 are converted when
 * loaded and rounded when stored), in i32 for i32, and bool for bool; `dtype` is the value's
 * dtype in the graph, so a backend knows what a store converts to.
 */
#ifndef MINIC_KIR_H
#define MINIC_KIR_H

#include "ir/ir.h"

typedef enum { KIR_POINTWISE, KIR_REDUCTION, KIR_GEMM, KIR_COPY, KIR_ATTENTION, KIR_COLLECTIVE } kir_category;

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
    bool prep_read;        /* KBUF_PARAM: a prep kernel reads it (binding it makes them run again) */
    bool kept;             /* KBUF_TEMP: written by prep kernels and read by a run: it keeps its
                              value across runs, in a place of its own (passes/plan.c) */
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
    KI_GATHER, /* view at the point + index(arg[0]) * stride, checked against size (above) */
    KI_SIZE,   /* value / size (or value * size: `times`), size a dim of kir_program.dims (see
                  "Sizes known when the program runs" above); kir_bind turns it into a KI_CONST */
} kir_instr_kind;

typedef struct kir_instr {
    kir_instr_kind kind;
    mc_op op;      /* KI_OP: a primitive with an expression in ops.def, or MC_OP_CAST */
    mc_dtype dtype;/* result dtype */
    int arg[3];    /* KI_OP operands: indices of earlier instructions */
    int view;      /* KI_LOAD: view index; KI_INDEX: dimension; KI_ROWVAL: reduction index */
    double value;  /* KI_CONST */
    int64_t stride;/* KI_GATHER: elements between consecutive indices of the gathered axis */
    int64_t size;  /* KI_GATHER: the gathered axis's length n; KI_SIZE: the divisor (a dim) */
    int check;     /* KI_GATHER: its entry in kir_program.checks */
    bool times;    /* KI_SIZE: value * size instead of value / size (a symbolic length as a value,
                      exact in i32 and in f32 up to 2^24) */
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
    bool scan;   /* a running reduction (cumsum; see "A scan" above) */
} kir_reduce;

typedef struct kir_store {
    int block;   /* stores happen in this block, after its instructions */
    int view;
    int value;   /* instruction stored (converted to the buffer's dtype) */
} kir_store;

/* A GEMM whose B operand is the im2col of a convolution's input x, never stored: B[k, o] at
 * batch index i is x[i, c, oy sh - ph + ky dh, ox sw - pw + kx dw] (0 where that falls outside
 * x) for k = (c kh + ky) kw + kx and o = oy ow + ox. The B view then addresses x itself: its
 * stride[0..nb) are the batch strides as usual, and stride[nb], stride[nb+1], stride[nb+2]
 * are x's strides along c, y and x (a 1-D conv has h = kh = oh = 1 and stride[nb+1] = 0).
 * Only passes/decompose.c makes one (mc_compile_options.conv_implicit), from a conv without
 * groups; k = c kh kw and n = oh ow. With kc > 0 (mc_compile_options.conv_kchunk) K runs over
 * chunks of kc channels instead, k = (((c / kc) kh + ky) kw + kx) kc + c % kc, and A's columns
 * are in that order: a K tile of kc rows is one window position (ky, kx) over kc channels. */
typedef struct kir_conv {
    bool on;
    int64_t kc;             /* 0, or the K chunk (above): divides c */
    int64_t c, h, w;        /* x's channels and spatial size */
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    int64_t oh, ow;         /* output spatial size */
} kir_conv;

typedef struct kir_gemm {
    int a, b;        /* views (see above) */
    int64_t m, n, k; /* the index space is [batch.., m, n]; nb = rank - 2 */
    bool tf32;
    kir_conv conv;   /* conv.on: B is an im2col view of x (above) */
} kir_gemm;

/* One step of an attention kernel's score chain, applied to s in order. i is the query's index
 * (along Tq), j the key's (along Tk). */
typedef enum {
    KIR_STEP_MUL,   /* s * value (a scale) */
    KIR_STEP_DIV,   /* s / value */
    KIR_STEP_BAND,  /* lo <= j - i <= hi ? s : value (a causal or sliding-window mask made of
                       iota and compares, which costs no memory) */
    KIR_STEP_WHERE, /* mask == keep ? s : value, mask a bool view */
    KIR_STEP_ADD,   /* s + mask, an additive mask view of a float dtype */
} kir_step_kind;

#define KIR_MAX_STEPS 4
#define KIR_BAND_OPEN INT64_MAX /* lo = -KIR_BAND_OPEN or hi = KIR_BAND_OPEN: no bound */

typedef struct kir_attn_step {
    kir_step_kind kind;
    double value;      /* MUL, DIV: the factor; BAND, WHERE: what a masked score becomes */
    int64_t lo, hi;    /* BAND */
    int view;          /* WHERE, ADD: the mask's view; -1 otherwise */
    bool keep;         /* WHERE: the mask value that keeps the score */
} kir_attn_step;

typedef struct kir_attention {
    int q, k, v;               /* views (see above) */
    int64_t tq, tk, d, dv;     /* the index space is [batch.., tq, dv]; nb = rank - 2 */
    kir_attn_step steps[KIR_MAX_STEPS];
    int nsteps;
    /* Pairs with j - i outside [skip_lo, skip_hi] score -inf whatever q, k and the masks hold
     * (bands whose fill is -inf and whose -inf no later step can change), so they add nothing
     * and a kernel may skip whole key blocks of them (a causal mask: those above the
     * diagonal). Both are within (-KIR_BAND_OPEN, KIR_BAND_OPEN) bounds when set. */
    bool skip;
    int64_t skip_lo, skip_hi;
} kir_attention;

/* A collective kernel's operands (see above): views of the kernel, count elements each. */
typedef struct kir_collective {
    int in, out;
    int64_t count;
} kir_collective;

/* A check a kernel makes while it runs: a gather's index range. Backends record the first that
 * fails (check number + 1 and the index) and the run fails with kir_check_fail's message. */
typedef struct kir_check {
    int line, col;          /* the user's gather in the graph file; 0 when built through the API */
    int64_t size;           /* indices must lie in [-size, size) */
    mc_op origin;           /* MC_OP_GATHER, or MC_OP_UPDATE: an update's gather, whose bad index
                               encodes its pos (passes/decompose.c) */
    int axis;               /* MC_OP_UPDATE: the cache's axis and its length */
    int64_t extent;
} kir_check;

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
    kir_attention attn;     /* category KIR_ATTENTION only */
    kir_collective coll;    /* category KIR_COLLECTIVE only */
    mc_op *ops;             /* the user's operators it computes (node origins), each once */
    int nops;
    int *lines;             /* their graph-file lines, ascending, each once (none for the API) */
    int nlines;
    int64_t flops, bytes;   /* kir_count() */
    bool prep;              /* computed from params alone: runs when they are bound, not in every
                               run ("Prep kernels" above) */
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
    kir_check *checks;      /* the run-time checks of every kernel (KI_GATHER.check) */
    int nchecks;
    const char **notes;     /* why attention chains were not fused (kir_print shows them) */
    int nnotes;
    int ngraph;             /* entries of graph_buffer: the user graph's nodes */
    int nprep;              /* kernels marked prep */
    mc_dims *dims;          /* symbolic sizes (above): the graph's table, owned; NULL: every
                               size is a constant */
    mc_arena arena;         /* everything above lives here */
} kir_program;

void kir_program_free(kir_program *kp);
/* kp (with dims) for one binding: symbol k of kp->dims has values[k] (each >= 1). A copy in
 * which every size is a constant and KI_SIZE is a KI_CONST, temps not yet placed (plan it),
 * counts not yet made (kir/bind.c). NULL with MC_ERR_INPUT set when a size overflows, or
 * MC_ERR_SYSTEM when out of memory. */
kir_program *kir_bind(const kir_program *kp, const int64_t *values);
/* Check every invariant above (kir/verify.c): blocks, operands within reach, views inside their
 * buffers, and with `planned` the temps inside the arena. MC_OK, or an internal error naming
 * `stage` and the kernel. The pipeline runs it after lowering and after planning when
 * mc_compile_options.verify is set (debug builds, tests, minic dump). */
mc_status kir_verify(const kir_program *kp, const char *stage, bool planned);
/* FLOPs and bytes of a kernel, from its IR (kir/kir.c): a GEMM's 2*M*N*K plus its
 * epilogue's arithmetic; an attention's 2*(D + Dv) per (query, key) pair its bands keep plus
 * its steps' and softmax's flops per pair (docs/FORMAT.md §5); each KI_OP counts its op's flops
 * once per point where it is evaluated; bytes: each distinct buffer read once, each written
 * once, at its dtype's size. */
void kir_count(const kir_program *kp, kir_kernel *k);
/* The shape a GEMM kernel's B view is read over (for range checks and byte counts): the
 * kernel's batch dims then [k, n], or for an im2col B (kir_conv) [c, h, w]. Returns its rank. */
int kir_gemm_b_shape(const kir_kernel *k, int64_t *shape);
/* The (query, key) pairs of one batch entry of attention kernel k that its bands keep. */
int64_t kir_attention_pairs(const kir_kernel *k);
/* Does key j pass every band of attention a for query i (a step that needs no memory)? */
bool kir_attention_band_keeps(const kir_attention *a, int64_t i, int64_t j);
/* Does kernel k hold a scan (a kir_reduce with scan set)? */
bool kir_kernel_scans(const kir_kernel *k);
/* What each i32 or bool instruction of a kernel is known to be at every point of its index space
 * (kir/range.c): its values lie in [lo, hi] (a bool's 0 false, 1 true; lo == hi: a constant),
 * and `same`, where not -1, is an earlier instruction that always has the same value. Floats:
 * unused. A backend may leave out work they decide (a check that cannot fail, a clamp that
 * never clamps, a division that is one of its operands). */
typedef struct kir_fact {
    int64_t lo, hi;
    int same;
} kir_fact;
/* facts[0..k->ncode). dims: the program's symbolic sizes (kir_program.dims, or NULL), whose
 * declared maxima bound an index along a symbolic axis. With step > 1, where the innermost
 * index takes only the values at, at + step, ... (element `at` of chunks of `step` elements,
 * step dividing its length): the facts at that element. step 1: at every point. False only
 * when out of memory. */
bool kir_facts(const kir_kernel *k, const mc_dims *dims, int step, int at, kir_fact *facts);
/* Whether gather instruction i's check can never fail: 1 where its index provably lies in
 * [0, size) (it is the row itself), -1 where in [-size, 0) (the row is index + size), 0 where
 * not proven (a symbolic size never is). */
int kir_gather_proven(const kir_kernel *k, const kir_fact *facts, int i);
/* Print a kernel list readably (minic dump --stage fused). g is the graph given to
 * mc_compile_kernels (buffer nodes refer to it); NULL prints buffers by number only. */
void kir_print(const kir_program *kp, const mc_graph *g, FILE *out);
/* One kernel, as kir_print shows it. */
void kir_print_kernel(const kir_program *kp, const kir_kernel *k, const mc_graph *g, FILE *out);
/* The input error of a failed check: check number `check` (0-based) saw index `index`. Names
 * the gather's place in g's file (g: the user's graph, or NULL). Returns MC_ERR_INPUT. */
mc_status kir_check_fail(const kir_program *kp, const mc_graph *g, int check, int64_t index);
/* read[v] for every view v of kernel k (k->nviews entries): does k read through it (a load, a
 * gather, a GEMM's or attention's operand, a mask, a collective's input)? */
void kir_kernel_read_views(const kir_kernel *k, bool *read);
/* "pointwise", "reduction", "gemm", "copy", "attention", "collective" (the profile's category
 * names). */
const char *kir_category_name(kir_category c);

#endif
