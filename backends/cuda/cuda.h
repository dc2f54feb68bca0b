/* The CUDA backend's internal interface: the renderer (backends/cuda/cuda_render.c), the GEMM planner
 * (backends/cuda/cuda_gemm.c) and the runtime (backends/cuda/cuda*.c) meet here.
 *
 * Nothing here needs CUDA's headers: rendering and GEMM planning are plain text and arithmetic,
 * so they are testable on machines with no GPU; only backends/cuda/cuda*.c talks to the driver,
 * NVRTC and cuBLASLt (loaded with dlopen).
 */
#ifndef MINIC_CUDA_H
#define MINIC_CUDA_H

#include "backends/c_expr.h"

/* What the generated code is for. */
typedef struct mc_cuda_target {
    int sm;       /* compute capability as major*10 + minor: 90 on Hopper */
    int num_sms;  /* multiprocessors: grid sizes are multiples of it */
    /* tuning (0: the defaults); the runtime reads them from MINIC_CUDA_PW_UNROLL and
     * MINIC_CUDA_BLOCKS_PER_SM for experiments */
    int pw_unroll;     /* pointwise chunks per thread per loop iteration (1..8) */
    int blocks_per_sm; /* grid-stride grids are capped at this many blocks per SM; < 0: no cap */
    int red_chunks;    /* row-per-block reductions: chunks per thread (MINIC_CUDA_RED_CHUNKS) */
} mc_cuda_target;

/* A rendered kernel: source, entry point, launch shape and the parameters it takes. Parameter
 * i is the device address of kp buffer param[i], or of the GEMM scratch buffer where param[i]
 * is MC_CUDA_PARAM_SCRATCH, or of the error word where it is MC_CUDA_PARAM_ERROR. */
#define MC_CUDA_PARAM_SCRATCH (-1)
#define MC_CUDA_PARAM_ERROR (-2) /* the gathers' error word (int[2]: check + 1, index) */
#define MC_CUDA_PARAM_SIZES (-3) /* run-time sizes: struct mc_sz by value, from sizes[] */
#define MC_CUDA_MAX_SIZES 16     /* slots of one kernel's run-time sizes */
#define MC_CUDA_PARAM_SPLITK (-4) /* a split-K conv's f32 partial sums and tile counters: zeroed
                                     when allocated, and left zeroed by every kernel that uses it
                                     (the program's kernels run one after another, so one region
                                     of the largest size serves them all) */
typedef struct mc_cuda_code {
    mc_strbuf src;     /* the whole translation unit: prelude, then the kernel */
    size_t body;       /* offset of the kernel after the prelude (for dumps) */
    char entry[96];
    int64_t grid[3];
    int block;
    int smem;      /* dynamic shared memory bytes */
    int *param;    /* malloc'd */
    int nparams;
    int vec;       /* elements per thread access (1: scalar), for dump and tests */
    const char *scheme; /* "pointwise", "row-per-warp", "row-per-block", "gemm-tiled", "gemm-dot",
                           "gemv-n", "gemv-t", ... */
    /* mc_cuda_render_sized: the values of the kernel's run-time sizes for the binding it was
     * rendered for (the MC_CUDA_PARAM_SIZES parameter); grid as well is this binding's */
    long long sizes[MC_CUDA_MAX_SIZES];
    int nsizes;
} mc_cuda_code;

/* Run-time sizes of one kernel being rendered (mc_cuda_render_sized): the kernel list's table
 * (NULL: every size a literal, as always) and the binding the launch is for. Each distinct
 * size the source needs is a slot of the kernel's `S_` parameter: a product of dims (in a
 * fixed order) times a constant over a divisor, whose value for this binding goes to
 * out->sizes. The source depends on the table only, never on the binding. */
typedef struct mc_cuda_sizes {
    const mc_dims *dims;
    const int64_t *values;
    mc_cuda_code *out;
    int64_t key[MC_CUDA_MAX_SIZES][MC_MAX_RANK + 3]; /* nsym, dims.., constant, divisor */
    bool error; /* more slots than MC_CUDA_MAX_SIZES, or a size past int64 */
} mc_cuda_sizes;
/* The product of f[0..n) over div (exact at every binding: the caller makes sure), as a
 * literal or `S_.v[slot]` (the slot made here on first use) in buf. */
const char *mc_cuda_size(mc_cuda_sizes *z, const int64_t *f, int n, int64_t div, char *buf, size_t size);

typedef struct mc_cuda_gemm_plan mc_cuda_gemm_plan;
/* Render kernel `ki` of kp for target t. `align[b]` is the byte alignment (a power of two,
 * at most 256) of buffer b's device address. A GEMM kernel comes with its plan: when the plan
 * uses cuBLASLt (use_lt) it is rendered as its epilogue only, a pointwise kernel over
 * [batch.., M, N] that reads the accumulator from a contiguous scratch buffer of dtype
 * scratch_dtype (cuBLASLt wrote it); otherwise whole (the warp-dot kernel when the plan says
 * small, else a tiled GEMM, with the epilogue inlined). Other kernels pass NULL. Returns
 * MC_ERR_SYSTEM on OOM or IR it cannot express (an internal error naming the kernel). */
mc_status mc_cuda_render(const kir_program *kp, int ki, const mc_cuda_target *t, const int *align,
                         const mc_cuda_gemm_plan *gemm, mc_cuda_code *out);
void mc_cuda_code_free(mc_cuda_code *c);
/* Kernel ki of a kernel list whose sizes are expressions (kir_program.dims, kir/kir.h "Sizes
 * known when the program runs"), rendered once for every binding: the source reads each size
 * that is not a constant from its last parameter (`const mc_sz S_`, MC_CUDA_PARAM_SIZES) and
 * depends on the list alone, so every binding's program loads the same cubin; out->sizes and
 * the grid are for binding `values`. Every choice the static renderer makes from a size (the
 * vector width, 32- or 64-bit indices, a reduction's schedule) is made from what holds at
 * every binding: divisibility shown by the expression's coefficients, the declared maxima.
 * `gemm`: the binding's GEMM plan (its epilogue kernel, when cuBLASLt runs the product).
 * MC_OK with why[0] set when the kernel cannot be rendered so (a whole generated GEMM, a
 * scan, attention over symbolic lengths, a reduction over a symbolic extent without a
 * maximum): why says what, and the caller renders the bound kernel instead. */
mc_status mc_cuda_render_sized(const kir_program *sized, const int64_t *values, int ki, const mc_cuda_target *t,
                               const int *align, const mc_cuda_gemm_plan *gemm, mc_cuda_code *out, char *why,
                               size_t why_size);
/* An attention kernel (backends/cuda/cuda_attention.c): flash attention on tensor cores for
 * f16/bf16 on sm_80 and later, on the FMA units otherwise (f32 keeps its tolerance without
 * TF32). mc_cuda_render calls it for KIR_ATTENTION kernels. */
mc_status mc_cuda_render_attention(const kir_program *kp, int ki, const mc_cuda_target *t, const int *align,
                                   const int64_t *values, mc_cuda_code *out);

/* ---- GEMMs through cuBLASLt ------------------------------------------------------------------
 * cuBLASLt is column-major: minic computes row-major D[M,N] = A[M,K] B[K,N] as the
 * column-major D'(N x M) = B'(N x K) A'(K x M), so cuBLASLt's "A" is minic's B. */

typedef enum {
    MC_LT_EPI_DEFAULT,
    MC_LT_EPI_BIAS,
    MC_LT_EPI_RELU,
    MC_LT_EPI_RELU_BIAS,
    MC_LT_EPI_GELU,      /* the tanh approximation (cuBLASLt's only GELU) */
    MC_LT_EPI_GELU_BIAS,
} mc_lt_epilogue;

/* One matrix operand as cuBLASLt sees it: column-major rows x cols with leading dimension ld,
 * `trans` when the op is a transpose of the stored matrix. buffer -1: the scratch buffer. */
typedef struct mc_lt_matrix {
    int buffer;
    int64_t offset;                   /* elements */
    mc_dtype dtype;
    bool trans;
    int64_t rows, cols, ld;           /* of the stored matrix */
    int64_t batch_stride;             /* elements between inner-batched matrices */
    int64_t outer_stride[MC_MAX_RANK];/* per outer batch dimension */
} mc_lt_matrix;

struct mc_cuda_gemm_plan {
    bool use_lt;      /* false: a generated GEMM kernel does it all (layout cuBLASLt can't take,
                         or small) */
    bool small;       /* the generated warp-dot kernel beats cuBLASLt (then !use_lt) */
    /* few rows (<= GEMV_MAX_ROWS, cuda_gemm.c): the generated GEMV kernel, which reads B once
     * with 16-byte loads and runs the whole epilogue (then !use_lt, !small) */
    bool gemv;
    /* an implicit-GEMM conv (kir_gemm.conv): the generated tensor-core kernel
     * (backends/cuda/cuda_render.c, render_conv_mma) with the epilogue inlined (then !use_lt);
     * conv_bm x conv_bn is its CTA tile, chosen by shape (mc_cuda_conv_tile) */
    bool conv;
    int conv_bm, conv_bn;
    int conv_split;        /* > 1: K split over that many CTAs per tile, summed in
                              MC_CUDA_PARAM_SPLITK (MINIC_CUDA_CONV_SPLITK=S) */
    int64_t conv_ws_bytes; /* the bytes of that region the kernel needs */
    bool gemv_t;      /* gemv: B contiguous along K (a transposed weight: the tied LM head);
                         else contiguous along N (a linear layer's [K, N]) */
    bool gemv_fold;   /* gemv: B is the same matrix at every batch index, whose rows are folded
                         into M; else a batch loop over grid z, M rows each */
    int64_t gemv_rows;/* gemv: rows of one GEMV (M times the folded batch) */
    bool autotune;    /* large enough (>= 1 GFLOP a call) to time cuBLASLt's candidates */
    bool full;        /* true: the epilogue is cuBLASLt's; false: D is the f32 scratch buffer and
                         a generated epilogue kernel follows */
    mc_lt_epilogue epi;
    const char *why_not_full; /* when !full: what the epilogue has that cuBLASLt cannot do */
    float alpha, beta;
    bool tf32;
    int bias_buffer;  /* -1: none */
    int64_t bias_offset;
    mc_lt_matrix a, b, c, d; /* cuBLASLt's A (= minic's B), B (= minic's A), C, D */
    int64_t m, n, k;  /* cuBLASLt's: m = minic's N, n = minic's M */
    int64_t batch;    /* matrices per call (strided batch) */
    int nouter;       /* outer batch dimensions looped over with one call per index */
    int64_t outer_shape[MC_MAX_RANK];
    int64_t calls;    /* product of outer_shape */
    int64_t scratch_elems; /* !full: elements of scratch needed */
    mc_dtype scratch_dtype;/* !full: f32, or the f16/bf16 every store of the epilogue writes
                              (half the traffic; acc is rounded once more, within docs/FORMAT.md §6) */
    /* full, f16/bf16, D a whole graph output whose rows are not 16-byte aligned (N = 50257):
     * cuBLASLt computes and writes D with its rows padded to pad_ld elements (a multiple of 16
     * bytes; m = pad_ld); the output buffer holds pad_rows x pad_ld elements and its download
     * drops the padding.
     * pad_buffer -1: D is written as the graph lays it out. */
    int pad_buffer;
    int64_t pad_rows, pad_cols, pad_ld;
    int64_t pad_slack; /* bytes the padded rows read past A's (and the bias's) end */
};

/* The CTA tile (rows of C_out x output pixels) of an implicit-GEMM conv of m output channels
 * over `pixels` output pixels (batch included) on `sms` multiprocessors (cuda_render.c). */
void mc_cuda_conv_tile(int64_t m, int64_t pixels, int sms, int *bm, int *bn);
/* The conv fields of p (conv, its tile, its K split) for conv kernel k on `sms` SMs. */
void mc_cuda_conv_plan(const kir_kernel *k, int sms, mc_cuda_gemm_plan *p);
/* The same for conv kernel ki of a kernel list compiled once whose batch is symbolic, bound to
 * this binding as `bound`: the tile the same for every binding (its source reads the batch and
 * the K split when it runs), the split the binding's. */
void mc_cuda_conv_plan_sized(const kir_program *sized, int ki, const kir_kernel *bound, int sms,
                             mc_cuda_gemm_plan *p);
/* false with MINIC_CUDA_SIZED_CONV=0: such a conv is rendered for each binding (the path before) */
bool mc_cuda_sized_conv(void);
/* Decide how kernel ki (a KIR_GEMM) runs: which epilogue cuBLASLt takes, operand layouts and
 * batching, gemv (very few rows, B contiguous along N or K: the generated GEMV kernel; not with
 * MINIC_NO_GEMV=1), small (few rows, both operands contiguous along K: the generated warp-dot
 * kernel beats a cuBLASLt call) and autotune. Never fails: layouts it cannot map give use_lt = false.
 * The one place a GEMM's size decides anything. */
void mc_cuda_gemm_plan_make(const kir_program *kp, int ki, mc_cuda_gemm_plan *plan);
/* The same for kernel ki of a binding of a symbolic kernel list, sk its kernel there (NULL: as
 * above): the layout holds for every binding (a symbolic M, N or K of 1 here is not taken as 1). */
void mc_cuda_gemm_plan_make_sized(const kir_program *kp, int ki, const kir_kernel *sk, mc_cuda_gemm_plan *plan);
/* Whether two plans describe the same cuBLASLt problem (shapes, layouts, dtypes, epilogue,
 * batching) over possibly different buffers: then one algorithm choice serves both. */
bool mc_cuda_gemm_same_shape(const mc_cuda_gemm_plan *a, const mc_cuda_gemm_plan *b);
/* A one-line description of the plan for dump_code. */
void mc_cuda_gemm_plan_describe(const mc_cuda_gemm_plan *plan, mc_strbuf *sb);

/* ---- whole programs ------------------------------------------------------------------------ */

/* How one kernel runs: a rendered kernel (code.src non-empty), a cuBLASLt GEMM, or both (a
 * GEMM whose epilogue kernel reads the scratch accumulator). */
typedef struct mc_cuda_kernel_plan {
    bool is_gemm;
    mc_cuda_gemm_plan gemm;  /* is_gemm */
    bool has_code;
    mc_cuda_code code;       /* has_code */
} mc_cuda_kernel_plan;

/* Byte alignment of each buffer's device address when program-owned buffers start on 256-byte
 * boundaries and temps at their planned arena offsets (the runtime's layout). `align` has
 * kp->nbuffers entries. */
void mc_cuda_buffer_align(const kir_program *kp, int *align);
/* Plan and render every kernel of kp (plans: kp->nkernels entries, malloc'd; free with
 * mc_cuda_plans_free). */
mc_status mc_cuda_plan_program(const kir_program *kp, const mc_cuda_target *t, const int *align,
                               mc_cuda_kernel_plan **plans);
void mc_cuda_plans_free(mc_cuda_kernel_plan *plans, int n);
/* The same for kp, one binding (`values`) of the kernel list `sized` compiled once for every
 * binding (mc_program.sized): each kernel rendered from `sized` (mc_cuda_render_sized), the
 * GEMMs planned with this binding's sizes (cuBLASLt's layouts per (m, n, k)), except that a
 * GEMM whose sizes are symbolic goes to cuBLASLt where its layout allows rather than to a
 * generated GEMV or warp-dot kernel made for its size. A kernel that cannot be rendered so is
 * rendered from kp (this binding's sizes in its source): *specialized counts them and why
 * holds the first one's reason. */
mc_status mc_cuda_plan_program_sized(const kir_program *kp, const kir_program *sized, const int64_t *values,
                                     const mc_cuda_target *t, const int *align, mc_cuda_kernel_plan **plans,
                                     int *specialized, char *why, size_t why_size);
/* CUDA graphs instantiated and not yet destroyed, over every program of the process: a
 * symbolic program keeps one per binding in its cache (runtime/symbolic.c, at most 8), so
 * this stays bounded however many bindings run (tests/test_symbolic.c). */
int mc_cuda_live_graphs(void);
/* Does kernel k use a size that is not a constant (cuda_render.c)? */
bool mc_cuda_kernel_sized(const kir_kernel *k);

/* Compile n CUDA sources to cubins for sm_<sm> with NVRTC, in parallel threads, through the
 * disk cache (backends/cuda/cuda_nvrtc.c; needs NVRTC but no driver). cubins[i] is malloc'd.
 * *compiled counts the sources that missed the cache. A failure names the kernel, NVRTC's log
 * and the path of a file holding the failing source. When compiling takes longer than a
 * second, progress goes to note(note_ctx, ...) (NULL: nowhere), never to a stream. */
bool mc_cuda_have_nvrtc(void); /* NVRTC loads (else the error says why) */
mc_status mc_cuda_compile(const char *const *srcs, const char *const *entries, int n, int sm,
                          mc_note_fn note, void *note_ctx, void **cubins, size_t *sizes,
                          int *compiled);
/* Delete the cache entries of these sources for sm_<sm> (the backend does so when the driver
 * refuses a cached cubin, then compiles them afresh). */
void mc_cuda_cache_evict(const char *const *srcs, int n, int sm);
/* A source's cache key: minic's version, NVRTC's version, every option (the architecture among
 * them) and the whole source (malloc'd; NULL when out of memory). */
char *mc_cuda_cache_key(int nvrtc_major, int nvrtc_minor, const char *const *opts, int nopts,
                        const char *src);

#endif
