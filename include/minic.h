/* minic — a small tensor-graph compiler.
 *
 * This is the one public header. A program builds a graph (from a .graph file or with the
 * builder functions below), compiles it for a backend, binds its inputs and params, runs it and
 * reads its outputs:
 *
 *     mc_graph *g;
 *     if (mc_graph_parse_file("mlp.graph", &g) != MC_OK) { puts(mc_error_message()); ... }
 *     mc_options opt = mc_options_default();
 *     mc_program *p;
 *     if (mc_program_compile(g, &opt, &p) != MC_OK) ...
 *     mc_program_fill_random(p, 0);              // inputs and params not bound otherwise
 *     mc_program_run(p);
 *     mc_tensor out; mc_program_output(p, 0, &out);
 *     mc_program_free(p); mc_graph_free(g);
 *
 * Errors: every fallible call returns an mc_status (MC_OK, MC_ERR_INPUT for the caller's
 * mistakes, MC_ERR_SYSTEM for failures of the machine or a tool) and leaves a message that
 * mc_error_message() returns, on the calling thread, until the next failing call. Messages about
 * a place in a graph file read `FILE:LINE:COL: error: MESSAGE`, then the line and a caret.
 * Builder functions return an mc_value; on failure they return MC_ERROR and set the message, and
 * a builder given MC_ERROR as an operand returns MC_ERROR without a new message, so a chain of
 * calls can be checked once at the end (mc_graph_set_outputs fails if any operand failed).
 * Nothing in the library exits, aborts or prints.
 */
#ifndef MINIC_H
#define MINIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MC_MAX_RANK 8 /* the most dimensions a tensor may have */

typedef enum {
    MC_OK = 0,
    MC_ERR_INPUT = 1,  /* the caller's input is wrong: file, option, shape, dtype, weights */
    MC_ERR_SYSTEM = 2, /* the system failed: no GPU, out of memory, a compiler error */
} mc_status;

typedef enum { MC_F32, MC_F16, MC_BF16, MC_I32, MC_BOOL, MC_NUM_DTYPES } mc_dtype;

const char *mc_error_message(void); /* message of the last failed call on this thread */
mc_status mc_error_status(void);    /* its status */
const char *mc_dtype_name(mc_dtype dtype); /* "f32", "f16", "bf16", "i32", "bool" */
size_t mc_dtype_size(mc_dtype dtype);      /* bytes per element: bool is 1 */
bool mc_dtype_parse(const char *name, mc_dtype *out);

/* ---- graphs ------------------------------------------------------------------------------- */

typedef struct mc_graph mc_graph;
typedef int32_t mc_value; /* a value (tensor) in a graph */
#define MC_NONE (-1)      /* an absent optional operand (linear's bias) */
#define MC_ERROR (-2)     /* what a failed builder returns */
#define MC_END INT64_MAX  /* slice: to the end of the axis */

mc_graph *mc_graph_new(const char *name); /* NULL only when out of memory */
void mc_graph_free(mc_graph *g);
mc_status mc_graph_parse_file(const char *path, mc_graph **out);
mc_status mc_graph_parse_string(const char *filename, const char *text, mc_graph **out);
mc_status mc_graph_set_outputs(mc_graph *g, const mc_value *values, int n);
mc_status mc_graph_print(const mc_graph *g, FILE *out); /* the typed graph, in .graph syntax */
mc_status mc_value_set_name(mc_graph *g, mc_value v, const char *name);

/* Declarations. shape has rank entries; rank 0 is a scalar. */
mc_value mc_input(mc_graph *g, const char *name, mc_dtype dtype, const int64_t *shape, int rank);
mc_value mc_param(mc_graph *g, const char *name, mc_dtype dtype, const int64_t *shape, int rank);
mc_value mc_scalar(mc_graph *g, double value, mc_dtype dtype); /* a constant of shape [] */

/* Operators (SPEC §2). Binary, compare and where operands broadcast as in NumPy. */
#define MC_UNARY_BUILDERS(X) \
    X(neg) X(abs) X(exp) X(log) X(sqrt) X(rsqrt) X(recip) X(tanh) X(sigmoid) X(relu) X(gelu) \
    X(gelu_tanh) X(silu) X(sin) X(cos) X(erf)
#define MC_BINARY_BUILDERS(X) \
    X(add) X(sub) X(mul) X(div) X(pow) X(maximum) X(minimum) X(eq) X(ne) X(lt) X(le) X(gt) X(ge)
#define MC_DECLARE_UNARY(op) mc_value mc_##op(mc_graph *g, mc_value x);
#define MC_DECLARE_BINARY(op) mc_value mc_##op(mc_graph *g, mc_value a, mc_value b);
MC_UNARY_BUILDERS(MC_DECLARE_UNARY)
MC_BINARY_BUILDERS(MC_DECLARE_BINARY)
#undef MC_DECLARE_UNARY
#undef MC_DECLARE_BINARY

mc_value mc_where(mc_graph *g, mc_value cond, mc_value a, mc_value b);
mc_value mc_cast(mc_graph *g, mc_value x, mc_dtype to);
/* Reductions: axes == NULL reduces every axis; naxes == 0 with axes != NULL is an error. */
mc_value mc_sum(mc_graph *g, mc_value x, const int *axes, int naxes, bool keepdim);
mc_value mc_mean(mc_graph *g, mc_value x, const int *axes, int naxes, bool keepdim);
mc_value mc_max(mc_graph *g, mc_value x, const int *axes, int naxes, bool keepdim);
mc_value mc_min(mc_graph *g, mc_value x, const int *axes, int naxes, bool keepdim);
mc_value mc_softmax(mc_graph *g, mc_value x, int axis);
mc_value mc_log_softmax(mc_graph *g, mc_value x, int axis);
mc_value mc_layernorm(mc_graph *g, mc_value x, mc_value w, mc_value b, double eps);
mc_value mc_rmsnorm(mc_graph *g, mc_value x, mc_value w, double eps);
mc_value mc_matmul(mc_graph *g, mc_value a, mc_value b);
mc_value mc_linear(mc_graph *g, mc_value x, mc_value w, mc_value b /* or MC_NONE */);
mc_value mc_transpose(mc_graph *g, mc_value x, const int *perm, int n /* 0: reverse */);
mc_value mc_reshape(mc_graph *g, mc_value x, const int64_t *shape, int n);
mc_value mc_expand(mc_graph *g, mc_value x, const int64_t *shape, int n);
mc_value mc_slice(mc_graph *g, mc_value x, int axis, int64_t start, int64_t end /* MC_END */);
mc_value mc_concat(mc_graph *g, const mc_value *xs, int n, int axis);
mc_value mc_iota(mc_graph *g, const int64_t *shape, int n, int axis, mc_dtype dtype);
mc_value mc_full(mc_graph *g, const int64_t *shape, int n, double value, mc_dtype dtype);

/* ---- programs ----------------------------------------------------------------------------- */

typedef enum { MC_BACKEND_AUTO, MC_BACKEND_CUDA, MC_BACKEND_CPU, MC_BACKEND_REF } mc_backend_kind;

typedef struct mc_options {
    mc_backend_kind backend; /* AUTO: cuda when a usable GPU is present, else cpu */
    bool fuse;               /* false: one kernel per primitive operator (the baseline) */
    bool plan_memory;        /* false: every intermediate gets its own buffer */
    int cuda_graph;          /* -1: where eligible (default), 0: never, 1: required */
    bool tf32;               /* allow TF32 for f32 GEMMs on the GPU */
    int threads;             /* CPU threads; 0: one per core */
    /* cpu backend: the CPU to generate code for, as LLVM names it ("x86-64-v3", "x86-64-v4",
     * "haswell", "skylake-avx512", "znver3", ...), with that CPU's own features; NULL or "host"
     * (the default): this machine's CPU and the features it reports. An unknown name fails to
     * compile (MC_ERR_INPUT). Code for a CPU with features this machine lacks compiles and can be
     * dumped, but running it fails (MC_ERR_SYSTEM). Read by mc_program_compile only. */
    const char *cpu_target;
    bool quiet;              /* no notes on stderr (backend fallback, compile progress) */
} mc_options;

typedef struct mc_tensor {
    const char *name;
    mc_dtype dtype;
    int rank;
    int64_t shape[MC_MAX_RANK];
    const void *data; /* host memory, valid until the next run or free of the program */
    size_t bytes;
} mc_tensor;

typedef struct mc_program mc_program;

mc_options mc_options_default(void);
const char *mc_backend_name(mc_backend_kind kind);
mc_status mc_program_compile(const mc_graph *g, const mc_options *opt, mc_program **out);
void mc_program_free(mc_program *p);
const char *mc_program_backend(const mc_program *p); /* "cuda", "cpu" or "ref" */

/* Inputs and params are bound by name; each call checks size (and, for files, dtype and shape). */
mc_status mc_program_set(mc_program *p, const char *name, const void *data, size_t bytes);
mc_status mc_program_load_npy(mc_program *p, const char *name, const char *path);
mc_status mc_program_load_weights(mc_program *p, const char *safetensors_path);
/* Fill every input and param not bound yet from the seeded generator (SPEC §3 --seed). */
mc_status mc_program_fill_random(mc_program *p, uint64_t seed);

mc_status mc_program_run(mc_program *p);
int mc_program_num_outputs(const mc_program *p);
mc_status mc_program_output(mc_program *p, int index, mc_tensor *out);
/* Write every output: .safetensors (by name) or .npy (one output only). Temp file + rename. */
mc_status mc_program_save_outputs(mc_program *p, const char *path);

#ifdef __cplusplus
}
#endif
#endif
