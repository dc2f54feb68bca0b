/* The CPU backend's internal interface, shared by backends/cpu/llvm*.c only.
 *
 *   llvm_backend.c  the mc_backend_cpu slots: module build, optimization, object code, disk
 *                   cache, ORC LLJIT, the thread pool that runs the kernels
 *   llvm_target.c   the target: the host, or the CPU that mc_options.cpu_target names
 *   llvm_block.c    what every kernel is built from: the function, loops, a view's loads and
 *                   stores at a point, one block of kernel IR instructions at a point
 *   llvm_plan.c     the plan of a pointwise or reduction kernel: merged dimensions, rows and
 *                   chunks, non-temporal stores, prefetches, the row cache, the pipeline
 *   llvm_kernel.c   pointwise and reduction kernels: loop nests over the kernel IR's index space,
 *                   vectorized along the innermost axis, with strided loads and stores
 *   llvm_gemm.c     GEMM kernels: packing, a register-tiled micro-kernel, the fused epilogue
 *   llvm_attention.c attention kernels: online softmax over key blocks, queries along the lanes
 *   llvm_math.c     one value per kernel IR instruction: arithmetic, conversions and the
 *                   transcendentals as branch-free polynomial code on vectors
 *
 * Every kernel becomes one function with the same signature:
 *
 *     void NAME(i8 **buffers, i64 begin, i64 end, i8 *scratch)
 *
 * `buffers` holds the base address of each kernel IR buffer of c->kp (the backend generates each
 * kernel against a program of its own buffers, numbered in the order its views name them, so
 * that kernels differing only in their buffers are one function); [begin, end) is the part of
 * the kernel's parallel index space this call computes (rows of a pointwise or reduction
 * kernel, tiles of a GEMM), so the thread pool splits a kernel by calling it on disjoint
 * ranges; `scratch` is the calling thread's workspace (GEMM packing buffers),
 * `llvm_kernel_info.scratch_bytes` long.
 */
#ifndef MINIC_LLVM_H
#define MINIC_LLVM_H

#include "backends/backend.h"

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

/* The machine the code is generated for: the host, or the CPU that mc_options.cpu_target names
 * (llvm_backend.c). Every generated function depends on these facts (part of the cache key). */
typedef struct llvm_target {
    const char *triple, *cpu, *features; /* features: the host's detected ones, "" for a named CPU
                                          * (LLVM takes that CPU's own) */
    int vector_bits;  /* widest float vector the target runs natively: 128, 256 or 512 */
    bool fma;
    bool runnable;    /* this machine has every feature of the target (the host: always) */
    char lacks[256];  /* where not: the features it lacks, comma-separated */
} llvm_target;

/* Everything a program's object code depends on: the compile cache's key is made of these
 * (llvm_backend.c), each part with its length so that no part can run into the next. A change
 * to any part is a different key, hence a miss (tests/test_cache.c changes each). */
typedef struct llvm_key_parts {
    const char *minic_version;   /* the library's version */
    const char *codegen_version; /* CODEGEN_VERSION: bumped when generated code changes meaning */
    const char *llvm_version;    /* LLVM_VERSION_STRING */
    const char *triple, *cpu, *features; /* the host target */
    const char *passes;          /* the optimization pipeline */
    const char *machine;         /* code generation settings: opt level, relocation, code model */
    const char *options;         /* the program's options that reach the code */
    const char *kernels;         /* per kernel: name, split, scratch, packing, shared code */
    const char *ir;              /* the module as printed */
} llvm_key_parts;
char *llvm_cache_key(const llvm_key_parts *parts); /* malloc'd; NULL when out of memory */

/* ---- llvm_target.c ------------------------------------------------------------------------- */

/* Detect the host once (LLVM's native target): MC_ERR_SYSTEM where LLVM cannot generate code
 * for this machine. The backend's probe; the functions below need it done. */
mc_status llvm_host_probe(void);
/* The target mc_options.cpu_target names: NULL, "" and "host" are the host; an x86-64 CPU as
 * LLVM 14 names it, with that CPU's own features; anything else is MC_ERR_INPUT. Targets live
 * until the process ends. */
mc_status llvm_target_resolve(const char *name, const llvm_target **out);
/* MC_OK where this machine can run code for t, else MC_ERR_SYSTEM naming what it lacks. */
mc_status llvm_target_check_runnable(const llvm_target *t);
/* An LLVM target machine for t; NULL with *error set (an LLVM message) on failure. */
LLVMTargetMachineRef llvm_target_machine(const llvm_target *t, char **error);
/* Its settings as they enter the cache key (opt level, relocation model, code model). */
extern const char LLVM_MACHINE_SETTINGS[];

/* ---- llvm_compile.c ------------------------------------------------------------------------ */

/* The optimization pipeline every module runs (in the cache key). */
extern const char LLVM_OPT_PIPELINE[];
/* A module compiles in at most this many parts (one object file each). */
enum { LLVM_MAX_PARTS = 8 };
/* Optimize mod (verified, with t's triple and data layout) and compile it to object code for
 * t, in parts on pool's threads when it has several and kp several kernels: *blob (malloc'd)
 * holds the objects (the compile cache stores it as is). */
mc_status llvm_compile(const llvm_target *t, LLVMModuleRef mod, LLVMTargetMachineRef tm, const kir_program *kp,
                       mc_threadpool *pool, void **blob, size_t *blob_size);
/* Whether a blob (from the cache) is well formed: a count and sizes that fit. */
bool llvm_blob_valid(const void *blob, size_t size);
/* A JIT holding one program's code. */
typedef struct llvm_jit {
    struct LLVMOrcOpaqueLLJIT *jit; /* LLVMOrcLLJITRef */
    char error[256];                /* what the JIT's session reported besides the error it returned */
} llvm_jit;
/* Link a blob's objects into a fresh JIT (the host functions and f16 conversions defined) and
 * look up each of `names` into fns[i]. */
mc_status llvm_jit_load(llvm_jit *j, const void *blob, size_t blob_size, const char *const *names, int nnames,
                        void **fns);
void llvm_jit_dispose(llvm_jit *j);

/* What the runtime needs to launch a kernel. */
typedef struct llvm_kernel_info {
    int64_t units;          /* the parallel index space: calls cover [0, units) */
    int64_t grain;          /* pool split: <= 0 static contiguous ranges, else dynamic chunks */
    bool serial;            /* too small to be worth waking the pool */
    int elide;              /* a GEMM that packs its B from what the `elide` kernels just before
                               it read (llvm_im2col): the runtime skips the copies among them */
    int64_t scratch_bytes;  /* per-thread workspace */
    /* A GEMM whose B operand is a param reads B packed once into a persistent buffer (bytes
     * > 0), which it finds in buffers[c->kp->nbuffers + kernel index]; the runtime fills it with
     * llvm_pack_b at the first run and whenever the param is bound again. */
    struct llvm_packed_b {
        int64_t bytes;          /* k * np floats; 0: B is not packed ahead */
        int buffer;             /* the kp buffer (a param) */
        mc_dtype dtype;
        int64_t offset;         /* B[kk, j] = buffer[offset + kk * stride_k + j * stride_n] */
        int64_t k, n, stride_k, stride_n;
        int64_t kc;             /* rows per K block */
        int nr;                 /* panel width */
        int64_t np;             /* n rounded up to nr */
    } packed_b;
    /* A kernel generated from a symbolic kernel list (llvm_ctx.dims): its parallel index space
     * is a run-time value, units = units_const * prod_i ceil(units_dim[i] / units_div[i]) for
     * the binding, which the backend evaluates (units, serial) when it prepares each binding. */
    bool sized;
    int nunits_dims;
    int64_t units_dim[MC_MAX_RANK + 1], units_div[MC_MAX_RANK + 1], units_const;
} llvm_kernel_info;

typedef struct llvm_packed_b llvm_packed_b;

/* A conv's im2col matrix that need not exist: the GEMM kernel's B (cols, [batch, K, N]
 * contiguous, a temp only it reads) is written by the T = `taps` copy kernels just before it,
 * each copying one window of a padded x (a strided view of one buffer) into rows t, t + T, ...
 * (passes/decompose.c's conv). Element (b, k, n) of B is then
 *     x[tap_off[k % T] + (k / T) s_c + b s_n + (n / ow) s_h + (n % ow) s_w],
 * which the GEMM's packing reads directly, and the copies are skipped (llvm_kernel_info.elide). */
enum { LLVM_IM2COL_MAX_TAPS = 128 };
typedef struct llvm_im2col {
    int buffer;                 /* x's program buffer (emit_kernel adds a view of it: `view`) */
    int view;
    int64_t taps, tap_off[LLVM_IM2COL_MAX_TAPS];
    int64_t s_n, s_c, s_h, s_w, ow;
    int64_t elide;              /* the kernels just before the GEMM that it makes unnecessary */
    /* pad: x above is the padded input, and the kernels before the copies that pad it (zero
     * fills and the concat's copies, decompose's pad_with) are elided too: B is read from the
     * unpadded input u (`buffer` is then u's), element (b, k, n) being, with t = k % T, c = k / T,
     * h = (n / ow) sth + tap_h[t] - ph and w = (n % ow) stw + tap_w[t] - pw,
     *     u[u_off + b s_n + c s_c + h u_h + w u_w]   where 0 <= h < H and 0 <= w < W, else 0. */
    bool pad;
    int64_t tap_h[LLVM_IM2COL_MAX_TAPS], tap_w[LLVM_IM2COL_MAX_TAPS];
    int64_t sth, stw, ph, pw, H, W, u_off, u_h, u_w;
} llvm_im2col;

/* Does GEMM kernel `kernel` of kp read such a B (llvm_gemm.c)? With allow_pad, through the
 * unpadded input where the padding's copies allow it. */
bool llvm_match_im2col(const kir_program *kp, int kernel, bool allow_pad, llvm_im2col *ic);

/* The number of K blocks of a packed B, and the packing of blocks [begin, end) of B (the
 * param's host array) into dst, converted to f32 (llvm_gemm.c, next to the code that reads
 * it). Threads may pack disjoint block ranges at once. */
int64_t llvm_packed_b_blocks(const llvm_packed_b *pb);
void llvm_pack_b(const llvm_packed_b *pb, const void *src, float *dst, int64_t begin, int64_t end);

/* Host functions the generated code calls by name, defined in every JIT (llvm_compile.c) as
 * absolute symbols: sin and cos of a double, with libm's full range reduction, for the rare
 * vectors whose f32 arguments are too large for the inline reduction (llvm_math.c). */
#define LLVM_HOST_SIN "minic_host_sin"
#define LLVM_HOST_COS "minic_host_cos"
double llvm_host_sin(double x);
double llvm_host_cos(double x);

/* The state of building one module. */
typedef struct llvm_ctx {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;         /* positioned in the function being built */
    const llvm_target *target;
    const kir_program *kp;
    int lanes;                /* f32 lanes of the vectors loops use (2 native vectors) */
    int native_lanes;         /* f32 lanes of one native vector */
    int threads;              /* the threads that will run the kernels (GEMMs split their work by it) */
    LLVMTypeRef t_f32, t_f64, t_i1, t_i8, t_i16, t_i32, t_i64, t_void, t_ptr_i8;
    /* the function being built */
    LLVMValueRef fn;
    LLVMBasicBlockRef entry;  /* allocas and buffer bases; branches to the body when finished */
    LLVMBuilderRef entry_b;   /* positioned at the end of `entry` */
    const struct llvm_im2col *im2col; /* the GEMM being built may read B through it, or NULL */
    /* Sizes read when the kernel runs (a symbolic kernel list, kir/kir.h "Sizes known when the
     * program runs"): the list's table of expressions, NULL where every size is a constant.
     * Each distinct symbolic size a function needs is a slot of the i64 array the runtime puts
     * after the kernel's buffers, the packed B and the error word (buffers[nbuffers + 2]);
     * llvm_size loads it once in the entry block. The slots are numbered in the order the
     * emitter first asks for them, so the IR depends on the table alone, never on a binding. */
    const mc_dims *dims;
    int nslots, slots_cap;    /* slots the function asked for; room in the two arrays (grown) */
    int64_t *slot_dim;        /* per slot: its dim */
    LLVMValueRef *slot_value; /* per slot: its load */
    bool slots_overflow;      /* out of memory growing them: the kernel is generated per binding */
} llvm_ctx;

/* Dim d (a size, or an expression of kir_program.dims) as an i64 value: a constant, or the
 * run-time size of its slot. */
LLVMValueRef llvm_size(llvm_ctx *c, int64_t d);
/* A bound on dim d over every binding: d itself for a constant, its declared maximum, or
 * `otherwise` where none is declared. */
int64_t llvm_size_max(const llvm_ctx *c, int64_t d, int64_t otherwise);

/* ---- llvm_math.c: values ------------------------------------------------------------------- */

/* The LLVM type of a kernel IR value of dtype d, `width` lanes (1: a scalar). Floats are f32,
 * i32 is i32, bool is i1, whatever the storage type. */
LLVMTypeRef llvm_value_type(llvm_ctx *c, mc_dtype d, int width);
LLVMValueRef llvm_const_f32(llvm_ctx *c, double v, int width);
LLVMValueRef llvm_const_i32(llvm_ctx *c, int64_t v, int width);
LLVMValueRef llvm_const_i64(llvm_ctx *c, int64_t v);
LLVMValueRef llvm_const_value(llvm_ctx *c, mc_dtype d, double v, int width); /* KI_CONST */
LLVMValueRef llvm_splat(llvm_ctx *c, LLVMValueRef scalar, int width);
/* An intrinsic by name, overloaded on `types` (e.g. "llvm.fmuladd" on <8 x float>). */
LLVMValueRef llvm_call_intrinsic(llvm_ctx *c, const char *name, LLVMTypeRef *types, int ntypes,
                                 LLVMValueRef *args, int nargs);
/* v (f32 lanes) kept within the range of dtype d: +-inf where a rounding cast to f16 or bf16
 * would overflow, v itself otherwise and for other dtypes (mc_saturate_to_dtype). */
LLVMValueRef llvm_saturate(llvm_ctx *c, mc_dtype d, LLVMValueRef v, int width);
/* op (a KI_OP primitive or MC_OP_CAST) on args of dtype `in` giving dtype `out`. */
LLVMValueRef llvm_emit_op(llvm_ctx *c, mc_op op, mc_dtype in, mc_dtype out, LLVMValueRef *args,
                          int width);
/* exp(x - max) where the i1 `in_range` says that every lane is in [-87, 1] (not NaN): a shorter
 * exp without a per-vector range check then (2.2 ulp near the max, 4.8 at worst); else, where
 * the i1 `below_max` (NULL: none) says every lane is at most 1, -inf or NaN (a finite max: a
 * masked row), llvm_emit_exp_softmax; the checked exp otherwise (a softmax row whose max and
 * min are known). */
LLVMValueRef llvm_emit_exp_in_range(llvm_ctx *c, LLVMValueRef x, int w, LLVMValueRef in_range,
                                    LLVMValueRef below_max);
/* exp(y) for y <= 1, -inf (0) and NaN (NaN) without a branch: a softmax's exp(x - max) where
 * masked scores are -inf (llvm_math.c: exp_softmax_body says how). */
LLVMValueRef llvm_emit_exp_softmax(llvm_ctx *c, LLVMValueRef y, int w);
/* The same with results below 2^-126 flushed to 0 (no subnormal: x86 takes a slow assist for
 * each), for sums known to be at least 1 (llvm_attention.c). */
LLVMValueRef llvm_emit_exp_softmax_ftz(llvm_ctx *c, LLVMValueRef y, int w);
/* Reduction steps: acc op= x, for op in MC_OP_SUM/MAX/MIN on dtype d (sum of i32 in i64). */
LLVMValueRef llvm_reduce_step(llvm_ctx *c, mc_op op, mc_dtype d, LLVMValueRef acc, LLVMValueRef x);
/* acc = max (MC_OP_MAX) or min of f32 acc and x, a NaN x dropped or kept as it falls: for a
 * reduction whose NaNs reach the outputs another way. One instruction on x86. */
LLVMValueRef llvm_reduce_step_lax(llvm_ctx *c, mc_op op, LLVMValueRef acc, LLVMValueRef x);
LLVMValueRef llvm_reduce_identity(llvm_ctx *c, mc_op op, mc_dtype d, int width);
/* Combine the lanes of a vector accumulator into a scalar with a halving tree. */
LLVMValueRef llvm_reduce_lanes(llvm_ctx *c, mc_op op, mc_dtype d, LLVMValueRef acc, int width);
/* The accumulator's type (i64 for an i32 sum) and its final conversion to the value type. */
LLVMTypeRef llvm_acc_type(llvm_ctx *c, mc_op op, mc_dtype d, int width);
LLVMValueRef llvm_acc_finish(llvm_ctx *c, mc_op op, mc_dtype d, LLVMValueRef acc);
/* Convert an f32 value to the bit pattern of bf16/f16 (i16), rounding to nearest even. */
LLVMValueRef llvm_f32_to_half_bits(llvm_ctx *c, mc_dtype d, LLVMValueRef x, int width);
LLVMValueRef llvm_half_bits_to_f32(llvm_ctx *c, mc_dtype d, LLVMValueRef bits, int width);

/* ---- llvm_block.c -------------------------------------------------------------------------- */

/* Where one evaluation of a block happens: `width` lanes along index-space dimension
 * `lane_dim` starting at idx[...] (i64), with each view's element offset at lane 0. */
typedef struct llvm_point {
    int width;
    int lane_dim;                     /* -1 when width == 1 */
    LLVMValueRef idx[MC_MAX_RANK];    /* i64 index of each dimension at lane 0 */
    LLVMValueRef *view_offset;        /* per view: i64 element offset at lane 0 (or NULL) */
    const int64_t (*stride)[MC_MAX_RANK]; /* per view: strides in elements */
    LLVMValueRef acc;                 /* GEMM epilogue: the accumulator, `width` lanes */
    const int *dim_of;                /* kernel IR dimension -> dimension of idx (NULL: same) */
    const bool *nontemporal;          /* per view: vector stores are non-temporal, the address
                                         aligned to the vector (NULL: none) */
} llvm_point;

/* The base pointer of buffer `buf`, typed for its storage dtype, loaded from the buffers
 * argument (cached per function in `bases`). */
LLVMValueRef llvm_buffer_base(llvm_ctx *c, LLVMValueRef buffers, LLVMValueRef *bases, int buf);
/* Load element(s) of view `v` at the point, converted to the compute type. */
LLVMValueRef llvm_load_view(llvm_ctx *c, const kir_kernel *k, int v, LLVMValueRef base,
                            const llvm_point *pt);
/* Store `value` (compute type, pt->width lanes) through view v at the point. */
void llvm_store_view(llvm_ctx *c, const kir_kernel *k, int v, LLVMValueRef base,
                     const llvm_point *pt, LLVMValueRef value);
/* Evaluate the instructions of block `blk` at the point into cur[]; `row` holds values of row
 * blocks (scalars) computed earlier; rowvals the reductions' results. Then its stores. */
void llvm_emit_block(llvm_ctx *c, const kir_kernel *k, int blk, LLVMValueRef *bases,
                     const llvm_point *pt, LLVMValueRef *cur, LLVMValueRef *row,
                     LLVMValueRef *rowvals);
/* An alloca in the function's entry block (so mem2reg promotes it). */
LLVMValueRef llvm_entry_alloca(llvm_ctx *c, LLVMTypeRef type, const char *name);
/* Start a kernel function (the signature above) and position the builder in its body; finish
 * it after its last instruction (returns void). */
void llvm_begin_function(llvm_ctx *c, const char *name);
void llvm_finish_function(llvm_ctx *c);
/* The block that instruction i belongs to. */
int llvm_block_of(const kir_kernel *k, int i);

/* Build the function of a GEMM kernel (llvm_gemm.c). */
mc_status llvm_emit_gemm_kernel(llvm_ctx *c, const kir_kernel *k, llvm_kernel_info *info);
/* Does GEMM kernel k (of c->kp) compute C^T = B^T A^T (llvm_gemm.c: its B, an im2col matrix,
 * is then packed as A and never read through the padding's source)? */
bool llvm_gemm_swaps(llvm_ctx *c, const kir_kernel *k);
/* Build the function of an attention kernel (llvm_attention.c). */
mc_status llvm_emit_attention_kernel(llvm_ctx *c, const kir_kernel *k, llvm_kernel_info *info);

/* A counted loop: for (i = begin; i < end; i += step). Use as
 *     llvm_loop L; llvm_loop_begin(c, &L, begin, end, step, "j"); ... L.index ...; llvm_loop_end(c, &L); */
typedef struct llvm_loop {
    LLVMValueRef index;  /* i64, valid inside the body */
    LLVMValueRef var;    /* its alloca */
    LLVMValueRef step;
    LLVMBasicBlockRef head, body, exit;
} llvm_loop;
void llvm_loop_begin(llvm_ctx *c, llvm_loop *L, LLVMValueRef begin, LLVMValueRef end,
                     LLVMValueRef step, const char *name);
void llvm_loop_end(llvm_ctx *c, llvm_loop *L);
/* llvm_loop_end with a hint for LLVM's unroller on the back edge: `unroll` copies of the body
 * (1: do not unroll). */
void llvm_loop_end_unroll(llvm_ctx *c, llvm_loop *L, int unroll);

/* ---- llvm_plan.c --------------------------------------------------------------------------- */

/* Values that a later loop block of a reduction kernel would compute again (softmax's exp:
 * once for the row's sum, again for the output) are kept in the calling thread's scratch, one
 * f32 row per value, while the row is walked the first time, and loaded the second time. */
typedef struct llvm_row_cache {
    int *save;        /* per instruction: the scratch row its value is saved to, or -1 */
    int *load;        /* per instruction: the scratch row it is loaded from instead, or -1 */
    int rows;         /* scratch rows in use */
    int64_t extent;   /* elements per row: the reduced extent */
    int dim;          /* the merged dimension a point's position in the row is along */
    LLVMValueRef shift; /* elements added to every access (a pipelined kernel's second set), or NULL */
} llvm_row_cache;

typedef struct llvm_loop_plan {
    bool pointwise;                 /* no reductions: every block per point, in one loop */
    int rank, nrow;                 /* after merging; rows are [0, nrow) */
    int64_t shape[MC_MAX_RANK];
    int dim_of[MC_MAX_RANK];        /* kernel dimension -> merged dimension */
    int64_t (*stride)[MC_MAX_RANK]; /* per view, merged */
    int64_t rows;                   /* product of the row dimensions */
    int64_t chunk, nchunks;         /* pointwise: the last axis in chunks */
    bool *nontemporal;              /* per view: its stores are non-temporal where aligned */
    bool any_nontemporal;
    bool stores_unread;             /* no buffer the kernel stores to is loaded by it */
    bool *prefetch;                 /* per view: later loop blocks prefetch its next row */
    int first_loop;                 /* the first loop block (-1: none) */
    bool *lax;                      /* per reduction: a max/min whose NaN handling is not needed */
} llvm_loop_plan;

/* A loop kernel's reductions as emitted: k's own (plan_scaled_extrema may have changed what they
 * fold) and plan_exp_ranges's after them, in `k`, a copy of the kernel with `reds`. */
typedef struct llvm_red_plan {
    kir_kernel k;
    kir_reduce *reds;  /* NULL: a kernel without reductions, emitted as it is */
    int *guard;        /* per instruction: plan_exp_ranges's min reduction, or -1 (NULL: none) */
    double *scale;     /* per reduction: plan_scaled_extrema's factor, or 0 */
} llvm_red_plan;

/* The merged index space of kernel k and its memory plan (non-temporal stores, prefetches);
 * pl's arrays are malloc'd, and freed by the caller even on failure. */
mc_status llvm_plan_loops(llvm_ctx *c, const kir_kernel *k, llvm_loop_plan *pl);
/* A block whose instructions include a transcendental. */
bool llvm_block_is_heavy(const kir_kernel *k, int blk);
/* pl->lax: the max and min reductions whose NaN handling is not needed. */
mc_status llvm_plan_lax(llvm_ctx *c, const kir_kernel *k, llvm_loop_plan *pl);
/* The reductions as emitted (rp->reds NULL: k as it is); free with llvm_red_plan_free. */
mc_status llvm_plan_reductions(llvm_ctx *c, const kir_kernel *k, llvm_red_plan *rp);
void llvm_red_plan_free(llvm_red_plan *rp);
/* The row cache of a reduction kernel (rc's arrays malloc'd, NULL where there is none). */
mc_status llvm_plan_row_cache(llvm_ctx *c, const kir_kernel *k, const llvm_loop_plan *pl, llvm_row_cache *rc);
/* The loop block that runs the last one for the previous row (a pipelined kernel), or -1. */
int llvm_plan_pipeline(llvm_ctx *c, const kir_kernel *k, const llvm_loop_plan *pl);

/* llvm_emit_block with a loop kernel's plan: values saved to or loaded from the row cache `rc`
 * (NULL: none), and `guard` (per instruction: llvm_red_plan's, NULL: none) for exp(x - max)
 * in rows whose range is known (llvm_block.c). */
void llvm_emit_block_planned(llvm_ctx *c, const kir_kernel *k, int blk, LLVMValueRef *bases, const llvm_point *pt,
                             LLVMValueRef *cur, LLVMValueRef *row, LLVMValueRef *rowvals, const llvm_row_cache *rc,
                             const int *guard);

/* ---- llvm_kernel.c ------------------------------------------------------------------------- */

/* Build the function of a pointwise, copy or reduction kernel. */
mc_status llvm_emit_loop_kernel(llvm_ctx *c, const kir_kernel *k, llvm_kernel_info *info);
/* The launch of a kernel generated with run-time sizes (info->sized) for one binding: units and
 * serial from symbol values `values` of table dims, and `bound`, the same kernel bound to them
 * (kir_bind). Nothing for other kernels. An MC_ERR_INPUT naming the size where one of the
 * kernel's sizes is below 1 at this binding. */
mc_status llvm_info_bind(llvm_kernel_info *info, const kir_kernel *bound, const mc_dims *dims,
                         const int64_t *values);

#endif
