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
 * Every function that takes a pointer checks it: NULL is an MC_ERR_INPUT (MC_ERROR, false) with
 * a message, except where a NULL is documented as meaning something (mc_graph_new's name,
 * mc_program_compile's options, the reductions' axes, the free functions).
 *
 * Threads: the library keeps no mutable state shared between objects (error messages are per
 * thread), so different graphs and different programs may be built, compiled, run and freed
 * on different threads at the same time, on every backend.
 *   - A graph is not locked: calls that change one graph (builders, set_outputs, set_name)
 *     must come from one thread at a time; compiling or printing it from several threads at
 *     once is fine as long as nobody changes it meanwhile.
 *   - A program is locked: every mc_program_* call on one program holds that program's mutex,
 *     so calls on one program from several threads are serialised (they never hang, never
 *     corrupt each other, each run computes from the bindings it found). A sequence of calls
 *     is not atomic, though: another thread may bind or run between your set and your run, and
 *     mc_program_output's pointer is overwritten by the next run from any thread. To share one
 *     program between threads read results with mc_program_read_output (a copy, under the
 *     mutex) and bind only values that every thread agrees on; for per-thread inputs compile
 *     one program per thread (the compile cache makes the second compile cheap).
 *   - mc_program_free and mc_graph_free must not race with other calls on the same object.
 *
 * Notes: facts that are not errors but that a user may want to hear of (which backend `auto`
 * fell back to, and why; compile progress when compiling takes seconds; a program that runs
 * without a CUDA graph). The library keeps them with the program (mc_program_notes) and, as
 * each arises, hands it to the options' `note` callback, if any: the caller decides whether
 * and where to show them. Nothing in the library exits, aborts or prints.
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

#define MC_MAX_RANK 8       /* the most dimensions a tensor may have */
#define MC_MAX_THREADS 1024 /* the most CPU threads mc_options.threads may ask for */
#define MC_MAX_DEVICES 64   /* the most ranks mc_options.devices may ask for */

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

mc_graph *mc_graph_new(const char *name); /* name may be NULL; NULL only when out of memory */
void mc_graph_free(mc_graph *g);
mc_status mc_graph_parse_file(const char *path, mc_graph **out);
mc_status mc_graph_parse_string(const char *filename, const char *text, mc_graph **out);
mc_status mc_graph_set_outputs(mc_graph *g, const mc_value *values, int n);
mc_status mc_graph_print(const mc_graph *g, FILE *out); /* the typed graph, in .graph syntax */
mc_status mc_value_set_name(mc_graph *g, mc_value v, const char *name);

/* A symbolic dimension (docs/FORMAT.md §1): a size bound when the program runs, from the inputs
 * or mc_program_set_dim. Returns a dim to put into the shapes of mc_input, mc_param, mc_reshape,
 * mc_expand, mc_iota and mc_full, like a size; the same name gives the same dim. max > 0 declares
 * the largest size it may be bound to (0: none; a different second maximum is an error). A
 * maximum also sizes memory: where every symbol of a program has one, its intermediates are
 * planned once at the maxima and allocated once (at most MINIC_ARENA_AT_MAXIMA_BYTES, 1 GiB
 * unless set; above that, or when that allocation fails, each binding plans its own, noted).
 * 0 (not a dim) on an error, with the message set and the graph failed. */
int64_t mc_dim_sym(mc_graph *g, const char *name, int64_t max);

/* Declarations. shape has rank entries; rank 0 is a scalar. */
mc_value mc_input(mc_graph *g, const char *name, mc_dtype dtype, const int64_t *shape, int rank);
mc_value mc_param(mc_graph *g, const char *name, mc_dtype dtype, const int64_t *shape, int rank);
mc_value mc_scalar(mc_graph *g, double value, mc_dtype dtype); /* a constant of shape [] */

/* Operators (docs/FORMAT.md §2). Binary, compare and where operands broadcast as in NumPy. */
#define MC_UNARY_BUILDERS(X) \
    X(neg) X(abs) X(exp) X(log) X(sqrt) X(rsqrt) X(recip) X(tanh) X(sigmoid) X(relu) X(gelu) \
    X(gelu_tanh) X(silu) X(sin) X(cos) X(erf) X(floor) X(ceil) X(round) X(sign) X(softplus)
#define MC_BINARY_BUILDERS(X) \
    X(add) X(sub) X(mul) X(div) X(pow) X(maximum) X(minimum) X(eq) X(ne) X(lt) X(le) X(gt) X(ge)
#define MC_DECLARE_UNARY(op) mc_value mc_##op(mc_graph *g, mc_value x);
#define MC_DECLARE_BINARY(op) mc_value mc_##op(mc_graph *g, mc_value a, mc_value b);
MC_UNARY_BUILDERS(MC_DECLARE_UNARY)
MC_BINARY_BUILDERS(MC_DECLARE_BINARY)
#undef MC_DECLARE_UNARY
#undef MC_DECLARE_BINARY

mc_value mc_where(mc_graph *g, mc_value cond, mc_value a, mc_value b);
/* Logic on bool values (NumPy broadcasting). */
mc_value mc_and(mc_graph *g, mc_value a, mc_value b);
mc_value mc_or(mc_graph *g, mc_value a, mc_value b);
mc_value mc_xor(mc_graph *g, mc_value a, mc_value b);
mc_value mc_not(mc_graph *g, mc_value x);
mc_value mc_cast(mc_graph *g, mc_value x, mc_dtype to);
mc_value mc_leaky_relu(mc_graph *g, mc_value x, double alpha);
/* clip(x, min, max): NULL leaves that bound out (one at least). */
mc_value mc_clip(mc_graph *g, mc_value x, const double *min, const double *max);
/* Reductions: axes == NULL reduces every axis; naxes == 0 with axes != NULL is an error. */
mc_value mc_sum(mc_graph *g, mc_value x, const int *axes, int naxes, bool keepdim);
mc_value mc_mean(mc_graph *g, mc_value x, const int *axes, int naxes, bool keepdim);
mc_value mc_max(mc_graph *g, mc_value x, const int *axes, int naxes, bool keepdim);
mc_value mc_min(mc_graph *g, mc_value x, const int *axes, int naxes, bool keepdim);
/* The index (i32) of the largest / smallest element along one axis: the first on ties, the
 * first NaN where there is one. */
mc_value mc_argmax(mc_graph *g, mc_value x, int axis, bool keepdim);
mc_value mc_argmin(mc_graph *g, mc_value x, int axis, bool keepdim);
/* The running sum along one axis. */
mc_value mc_cumsum(mc_graph *g, mc_value x, int axis);
/* ONNX Gather: x's slices along `axis` picked by the i32 indices idx (negative ones count from
 * the end); shape x.shape[:axis] + idx.shape + x.shape[axis+1:]. An index outside [-n, n) fails
 * mc_program_run with MC_ERR_INPUT (nothing is read there). */
mc_value mc_gather(mc_graph *g, mc_value x, mc_value idx, int axis);
/* A KV cache's write: cache with the entries [pos, pos + new.shape[axis]) along `axis` replaced
 * by new (new: cache's dtype and sizes except along axis, where it has at most as many); pos an
 * i32 scalar (i32[]), usually an input, so that one program serves every step. A pos outside
 * [0, cache.shape[axis] - new.shape[axis]] fails mc_program_run with MC_ERR_INPUT (nothing is
 * written). The result is a new value: the cache operand is not changed in place, unless the
 * result is fed back to the cache input (mc_program_feed_back), which is then written in place. */
mc_value mc_update(mc_graph *g, mc_value cache, mc_value new_, mc_value pos, int axis);
/* The sum of x over the ranks of a tensor-parallel program, the same on every rank (float
 * dtypes; shape and dtype of x). In a graph run as one program: x itself. */
mc_value mc_allreduce(mc_graph *g, mc_value x);
/* Channels first ([N, C, L] or [N, C, H, W]); nspatial entries in each list that is not NULL
 * (NULL: the default: stride 1, a pool's stride its kernel, padding 0, dilation 1). */
mc_value mc_conv(mc_graph *g, mc_value x, mc_value w, mc_value b /* MC_NONE */, const int64_t *stride,
                 const int64_t *padding, const int64_t *dilation, int nspatial, int64_t groups);
mc_value mc_maxpool(mc_graph *g, mc_value x, const int64_t *kernel, const int64_t *stride,
                    const int64_t *padding, int nspatial);
mc_value mc_avgpool(mc_graph *g, mc_value x, const int64_t *kernel, const int64_t *stride,
                    const int64_t *padding, int nspatial);
/* ONNX Pad, constant mode: pads = [begin of each axis.., end of each axis..]. */
mc_value mc_pad(mc_graph *g, mc_value x, const int64_t *pads, int npads, double value);
/* Inference batch normalization over axis 1. */
mc_value mc_batchnorm(mc_graph *g, mc_value x, mc_value scale, mc_value bias, mc_value mean, mc_value var,
                      double eps);
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
/* Every step-th element (step != 0; negative: backward, as Python's x[start:end:step]); start
 * or end MC_END: from / to the end the step walks from / towards. */
mc_value mc_slice_step(mc_graph *g, mc_value x, int axis, int64_t start, int64_t end, int64_t step);
mc_value mc_concat(mc_graph *g, const mc_value *xs, int n, int axis);
mc_value mc_iota(mc_graph *g, const int64_t *shape, int n, int axis, mc_dtype dtype);
mc_value mc_full(mc_graph *g, const int64_t *shape, int n, double value, mc_dtype dtype);

/* ---- programs ----------------------------------------------------------------------------- */

typedef enum { MC_BACKEND_AUTO, MC_BACKEND_CUDA, MC_BACKEND_CPU, MC_BACKEND_REF } mc_backend_kind;

/* Receives one note: a sentence without a trailing newline, valid during the call. It is called
 * from the thread that called mc_program_compile or mc_program_run, or during a compile from
 * one of the library's worker threads; never two calls at once for one program. */
typedef void (*mc_note_fn)(void *ctx, const char *note);

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
    /* Tensor parallelism (docs/PARALLEL.md): 0 (the default): off, one ordinary program. N >= 1:
     * the graph's linear layers are split over N ranks (column- then row-parallel pairs, an
     * all-reduce after each row-parallel one) and one program per rank is compiled; a run runs
     * every rank at once, one thread each, and the outputs are rank 0's, equal to the unsharded
     * program's within docs/FORMAT.md §6. On cuda rank r runs on GPU r (N at most the number of
     * GPUs); on ref and cpu the ranks are threads of this process (any N). 1 runs the same path
     * with one rank. Not for graphs with symbolic dimensions. */
    int devices;
    int device;              /* cuda: the GPU ordinal of an ordinary program (default 0) */
    bool quiet;              /* keep no notes: `note` is not called, mc_program_notes is "" */
    mc_note_fn note;         /* optional: called with each note as it arises (NULL: none) */
    void *note_ctx;          /* handed to note */
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
/* Every note about p so far (compile and runs), one per line, each ending in '\n'; "" when there
 * is none. Valid until the next call that may add one (compile, run) or mc_program_free. */
const char *mc_program_notes(const mc_program *p);

/* Inputs and params are bound by name; each call checks size (and, for files, dtype and shape). */
mc_status mc_program_set(mc_program *p, const char *name, const void *data, size_t bytes);
mc_status mc_program_load_npy(mc_program *p, const char *name, const char *path);
/* name's value from a file: from a .safetensors file, its tensor called name; any other path is
 * read as .npy (mc_program_load_npy). */
mc_status mc_program_load_file(mc_program *p, const char *name, const char *path);
mc_status mc_program_load_weights(mc_program *p, const char *safetensors_path);
/* Bind symbolic dimension `name` (docs/FORMAT.md §1, `minic run --dim NAME=SIZE`) to size: for
 * inputs that are generated, or set with mc_program_set whose size alone cannot tell their
 * shape. Inputs bind the symbols of their types too (a file's shape, or mc_program_set's byte
 * count where one symbol is unknown). Until a run, a binding that contradicts another one
 * (two inputs disagree on T) or exceeds the declared maximum is MC_ERR_INPUT naming the input
 * and the dimension; after a run every binding may change, and a value given before whose type
 * uses a changed symbol is dropped (bind it again, or let the generator fill it). A graph
 * without that symbol: MC_ERR_INPUT. */
mc_status mc_program_set_dim(mc_program *p, const char *name, int64_t size);
/* How many times p compiled code: 1 for a graph without symbolic dimensions, and for one with
 * them whose kernels take their sizes when they run (compiled once by mc_program_compile: a new
 * binding compiles nothing; docs/FORMAT.md §1 says which graphs and backends); for the others,
 * the number of bindings compiled so far (one program per binding is kept, the 8 most recently
 * run, so running again with a binding seen before compiles nothing). */
int mc_program_compilations(const mc_program *p);
/* Fill every input and param not bound yet from the seeded generator (docs/FORMAT.md §3 --seed). */
mc_status mc_program_fill_random(mc_program *p, uint64_t seed);
/* Write every input and param, under its name, with the value it has now (bound or generated)
 * to a .safetensors file (temp file + rename): with --weights and --input NAME=FILE, or
 * mc_program_load_weights and mc_program_load_file, it repeats the run. A declaration that no
 * kernel reads is written with the value it was bound to, else with the generator's values for
 * the last seed mc_program_fill_random used. MC_ERR_INPUT when something has no value yet. */
mc_status mc_program_save_inputs(mc_program *p, const char *path);

/* Run p once with the values bound now; returns when the run is done, with its errors (an
 * unbound input, a gather or update index out of range, a failure of the device). */
mc_status mc_program_run(mc_program *p);
/* Queue a run of p and return without waiting for it where the backend can (cuda: the inputs'
 * uploads and the kernels, or the CUDA graph's replay, are queued on p's stream; the host may
 * then bind, queue the next run, ... while the GPU works); elsewhere (ref, cpu, a program with
 * symbolic dimensions, a tensor-parallel one) it is mc_program_run. The run uses the values
 * bound when this is called (a later mc_program_set is for the next run), and outputs fed back
 * (mc_program_feed_back) are given to their inputs on the device, also without waiting.
 *   - Errors found while queueing (an unbound input, a failed launch) are returned here.
 *     Errors the run meets while it executes (a gather or update index out of range, a failed
 *     kernel) are returned by the next call that waits for p: mc_program_wait, or any call
 *     that reads p's results or must see its runs finished (mc_program_output,
 *     mc_program_read_output, mc_program_save_outputs, mc_program_save_inputs,
 *     mc_program_set_from_output with p as the source of another program, mc_program_feed_back,
 *     mc_program_run), which then fails with that error (the same status and message
 *     mc_program_run would have given) and does nothing else. The error is of the first such
 *     failure in the runs queued since the last wait; the runs after it executed too, from
 *     values that may be wrong, so outputs and fed-back inputs are unspecified after it.
 *   - mc_program_free discards queued runs' errors (it waits for them). */
mc_status mc_program_run_async(mc_program *p);
/* Wait until every run queued with mc_program_run_async has finished; MC_OK, or the first
 * error one of them met (see above). MC_OK at once when nothing is queued. */
mc_status mc_program_wait(mc_program *p);
int mc_program_num_outputs(const mc_program *p);
/* Output `index`'s name, type and data; data points into the program and is overwritten by the
 * next run (from any thread). On cuda an output is read back from the GPU by this call (and
 * by mc_program_read_output and mc_program_save_outputs), not by the run: outputs nobody asks
 * for (a KV cache handed on with mc_program_set_from_output) never cross to the host. */
mc_status mc_program_output(mc_program *p, int index, mc_tensor *out);
/* Copy output `index` (exactly its size in bytes) into data, under the program's mutex: the way
 * to read outputs of a program that several threads run. */
mc_status mc_program_read_output(mc_program *p, int index, void *data, size_t bytes);
/* Give input (or param) `input_name` of dst a copy of output `output_index` of src as src's
 * last run left it, without a trip through the host where both live on one device: the way
 * to hand a KV cache from a prefill program to a decode program, and from each decode step
 * to the next (dst may be src: a program feeding its own output back). Like mc_program_set,
 * the value is a copy (src may run again, or be freed, without changing it) and counts as
 * bound until something binds that name again; binding it again (mc_program_set, a file, this
 * call) replaces it.
 *   - Checks: src must have run; output_index in [0, outputs); dst must declare input_name;
 *     the output's dtype and shape (as its run bound them, for a graph with symbolic
 *     dimensions) must equal the declaration's (a symbolic declaration's symbols are bound
 *     from the output's shape, as a file's shape binds them). Each failure is MC_ERR_INPUT
 *     with a message naming both programs (their graphs' names), the output and the input.
 *   - cuda, both programs on one GPU: a device-to-device copy into the buffer dst's kernels
 *     (and its CUDA graph) read, queued on dst's stream before its next run; nothing is
 *     uploaded for that input at the next run. ref and cpu: a copy between the programs' host
 *     arrays. Otherwise (different backends or GPUs, a dst with symbolic dimensions, whose
 *     values wait on the host until a run picks its compiled program, or a tensor-parallel
 *     dst, whose value is split over its ranks) through the host, as mc_program_set would.
 *     A tensor-parallel src gives its rank 0's output.
 *   - On cuda outputs stay on the GPU until they are asked for (mc_program_output): a cache
 *     handed from run to run this way never crosses to the host.
 * Both programs' mutexes are held during the call (taken in a fixed order: no deadlock when
 * two threads hand outputs both ways between the same two programs). */
mc_status mc_program_set_from_output(mc_program *dst, const char *input_name, mc_program *src,
                                     int output_index);
/* From now on, after every run of p (mc_program_run and mc_program_run_async), give output
 * `output_index`'s value to input (or param) `input_name` of p, as mc_program_set_from_output(p,
 * input_name, p, output_index) after each run would, without a call per run: a decoder's KV
 * caches, its next token ids, its position. One pairing per input: declaring another output
 * for the same input replaces it; output_index -1 ends the pairing (the output keeps the last
 * run's value). Binding the input (mc_program_set, a file) gives the next run that value; the
 * pairing stays.
 *   - In place where it is safe: when the output is computed from the input element by element
 *     in one kernel that reads each element of the input only at the place it writes that
 *     element of the output (an `update` of the input: a KV cache's write), and no later
 *     kernel reads the input, the output's memory is the input's: the run writes its result
 *     into the input directly and nothing is copied. *in_place (may be NULL) is set true then.
 *     Otherwise (another reader of the input after the update, an output computed otherwise)
 *     the output is copied into the input after each run, on the device where p runs on one
 *     (cuda: queued on p's stream), between host arrays on ref and cpu; *in_place false.
 *   - While an output is fed back in place, it and its input are one array: reading the output
 *     after binding the input again gives unspecified values until the next run; and a run
 *     that fails while it executes (an update position out of range) may have written part of
 *     the input: bind it again before running on. A copy is made only after a run that
 *     succeeded.
 *   - Checks: output_index in [-1, outputs); p declares input_name; the output's dtype and
 *     shape equal the declaration's (MC_ERR_INPUT, naming the program, the output and the
 *     input). Programs with symbolic dimensions and tensor-parallel ones: MC_ERR_INPUT.
 *   - Waits for p's queued runs first (mc_program_run_async). MINIC_NO_IN_PLACE=1 in the
 *     environment makes every pairing a copy (for comparing the two). */
mc_status mc_program_feed_back(mc_program *p, const char *input_name, int output_index, bool *in_place);
/* Where memory bound with mc_program_bind_memory / mc_program_bind_output_memory lives, and how
 * a program on cuda takes it: their `where` (an int, so that the `false` and `true` of earlier
 * callers, C or C++, still mean HOST and DEVICE). */
typedef enum mc_memory {
    MC_MEMORY_HOST = 0,        /* host memory: ref and cpu read and write it in place; cuda copies it
                                  (uploaded at each run, outputs read back after it) */
    MC_MEMORY_DEVICE = 1,      /* a CUDA device pointer (cuda only): read and written in place */
    MC_MEMORY_HOST_MAPPED = 2, /* host memory that cuda's kernels read and write in place over the
                                  bus (page-locked and mapped for the GPU while it is bound); on ref
                                  and cpu the same as MC_MEMORY_HOST, in place there already */
} mc_memory;
/* Bind input (or param) `name` of p to the caller's own memory at data (bytes: exactly the
 * declared size), without copying it: every later run reads what that memory holds when the
 * run starts (mc_program_run_async: when it is queued on cuda for MC_MEMORY_HOST, when it
 * executes for MC_MEMORY_DEVICE and MC_MEMORY_HOST_MAPPED), until the name is bound again
 * (mc_program_set, a file, mc_program_set_from_output, this call) or data is NULL, which ends
 * the binding (the input keeps the value the memory holds then, in the program's own memory).
 * The memory must stay valid while it is bound.
 *   - MC_MEMORY_HOST (false): host memory, aligned to the dtype's size. ref and cpu read it in
 *     place, no copy at all; cuda uploads it at each run, straight from it (no copy into the
 *     program).
 *   - MC_MEMORY_DEVICE (true): a CUDA device pointer (a CUdeviceptr cast to void *) on p's GPU,
 *     in the device's primary context, 256-byte aligned: cuda's kernels read it in place,
 *     nothing is uploaded (the first run after binding re-captures the CUDA graph). Not on ref
 *     and cpu, and not for a buffer cuda lays out with padded rows (a GEMM operand's):
 *     MC_ERR_INPUT.
 *   - MC_MEMORY_HOST_MAPPED: host memory, 256-byte aligned (aligned_alloc(256, ...)). cuda
 *     page-locks it and maps it into the GPU's address space (cuMemHostRegister) for as long
 *     as it is bound, and the kernels read it in place over the bus: no upload, no copy, and
 *     the GPU sees what the memory holds when each kernel reads it. Every read of it by a
 *     kernel crosses the bus, so it pays for inputs read once (a token's ids, a position, a
 *     small vector) and for outputs, which are written once; an input that a kernel reads many
 *     times (a GEMM's operand, large weights) is faster uploaded once (MC_MEMORY_HOST). That
 *     is why it is a choice of the caller's, not the default for host memory. The driver
 *     page-locks whole pages: give each mapped array pages of its own (aligned_alloc(4096,
 *     ...), a token's ids and its position in two allocations); an array whose pages another
 *     mapped binding already holds is not mapped. Where it is not mapped (that, page-locking
 *     refused, a buffer laid out with padded rows), the binding falls back to MC_MEMORY_HOST and
 *     p's notes (mc_program_notes) say so and why. ref and cpu: as MC_MEMORY_HOST.
 *   - Checks (MC_ERR_INPUT): the name, the size, the alignment, `where`; not for an input fed
 *     back (mc_program_feed_back), nor in a program with symbolic dimensions or a
 *     tensor-parallel one. Waits for p's queued runs first. */
mc_status mc_program_bind_memory(mc_program *p, const char *name, void *data, size_t bytes, int where);
/* Output `index` of p written into the caller's memory at data (bytes: its size): host
 * memory (MC_MEMORY_HOST): ref and cpu write it in place; cuda copies it there at the end of
 * each mc_program_run, and after runs queued with mc_program_run_async at the next call that
 * waits for them (mc_program_wait). mc_program_output's data then points at it.
 * MC_MEMORY_DEVICE (cuda): the kernels write it in place, and mc_program_output reads it back
 * from there. MC_MEMORY_HOST_MAPPED (cuda): the kernels write the caller's host memory in place,
 * nothing is copied; it holds the result once mc_program_run returns (after
 * mc_program_run_async: once mc_program_wait returns, and not before), and mc_program_output's
 * data points at it. data NULL ends the binding (the output keeps its value). Outputs of
 * earlier runs are not copied into newly bound memory. Checks as for mc_program_bind_memory; an
 * output that is an input itself (`output x`) is bound through the input. */
mc_status mc_program_bind_output_memory(mc_program *p, int index, void *data, size_t bytes, int where);
/* Give every param of dst that src declares under the same name, dtype and shape, and that has a
 * value in src (bound or generated), src's value, without reading the weights twice: a prefill
 * and a decode program of one model load their weights once (mc_program_load_weights on src,
 * then this). *shared (may be NULL) is how many params were shared; the others are left as
 * they were. Those params of dst count as bound.
 *   - ref and cpu (both programs): the memory itself is shared, not copied: the model's
 *     weights are held once. Binding such a param again (in either program: mc_program_set, a
 *     file, mc_program_fill_random for a generated one) gives that program a copy of its own
 *     first, so the other keeps the value it had; the programs may be freed in any order.
 *   - cuda (either program): each program keeps its own copy on its GPU; the value is copied
 *     from src's host array at this call and uploaded at dst's next run (no file read).
 *   - A program with symbolic dimensions or a tensor-parallel one: MC_ERR_INPUT.
 *   - A param either program feeds an output back to (mc_program_feed_back) is not shared: its
 *     value changes with that program's runs.
 * dst == src does nothing. Both mutexes are held, taken in a fixed order. */
mc_status mc_program_share_params(mc_program *dst, mc_program *src, int *shared);
/* Write every output: .safetensors (by name) or .npy (one output only). Temp file + rename. */
mc_status mc_program_save_outputs(mc_program *p, const char *path);

/* ---- ONNX models (docs/FORMAT.md §7) ------------------------------------------------------ */

/* An imported ONNX model: its graph, the values of its params (the model's initializers and the
 * constants that became params) and, for every input, param and output, its ONNX name beside
 * the minic name it was given (invalid characters to '_', a suffix where two would clash).
 * A model with nodes minic cannot import fails (MC_ERR_INPUT) after every such node was seen:
 * each is handed to `note` (may be NULL) as one line "node NAME (OP, opset N): REASON", and the
 * message lists them too (as many as fit). Needs a minic built with protobuf-c
 * (mc_onnx_available); without it every load is MC_ERR_SYSTEM. */
typedef struct mc_onnx mc_onnx;
enum { MC_ONNX_F64_AS_F32 = 1u << 0 }; /* read DOUBLE tensors as f32 (else an error) */
bool mc_onnx_available(void);
mc_status mc_onnx_load(const char *path, unsigned flags, mc_note_fn note, void *note_ctx, mc_onnx **out);
/* The same from memory (a model with external data needs mc_onnx_load: they are read from the
 * model's folder). name is for messages. */
mc_status mc_onnx_load_memory(const void *data, size_t size, const char *name, unsigned flags,
                              mc_note_fn note, void *note_ctx, mc_onnx **out);
/* An input's dim_param (a model exported with dynamic axes) is a symbolic dimension of the graph
 * under its name (invalid characters as '_'), bound when the program runs, as a .graph file's
 * (docs/FORMAT.md §1); the shape computations over it (Shape, Gather, Concat, arithmetic, ... feeding
 * Reshape, Expand, ConstantOfShape, Range, Slice) are evaluated symbolically at import time. A
 * node whose shape computation cannot be (a symbolic slice start, Trilu, ...) is reported as
 * unsupported. mc_onnx_load_with_dims instead fixes the dim_params named here to the sizes given
 * (`minic --dim NAME=SIZE` falls back to it for such models); the others stay symbolic. */
typedef struct mc_onnx_dim {
    const char *name;
    int64_t size;
} mc_onnx_dim;
mc_status mc_onnx_load_with_dims(const char *path, unsigned flags, const mc_onnx_dim *dims,
                                 int ndims, mc_note_fn note, void *note_ctx, mc_onnx **out);
void mc_onnx_free(mc_onnx *m);
const mc_graph *mc_onnx_graph(const mc_onnx *m); /* owned by m */
/* The minic name of an ONNX input, initializer or output name; NULL when there is none. */
const char *mc_onnx_minic_name(const mc_onnx *m, const char *onnx_name);
/* Bind every param of a program compiled from mc_onnx_graph(m) to the model's value. */
mc_status mc_onnx_bind(const mc_onnx *m, mc_program *p);
/* Write the params' values (under their minic names) to a .safetensors file. */
mc_status mc_onnx_save_weights(const mc_onnx *m, const char *path);

/* ---- the compile cache and temporary files ------------------------------------------------ */

/* Compiled kernels are cached on disk ($XDG_CACHE_HOME/minic, else ~/.cache/minic; MINIC_NO_CACHE=1
 * turns it off, MINIC_CACHE_SIZE caps it; docs/RELIABILITY.md). Why the cache is not being used
 * in this process (its directory belongs to another user or is writable by others, a bad
 * MINIC_CACHE_SIZE, a build without xxHash), or NULL. The library does not print: a program
 * shows this note if it wants to. The text stays valid until the process ends. */
const char *mc_cache_note(void);
/* Remove the temporary files of the writes in progress in this process (output files being
 * written, cache entries being stored); those writes then fail. Async-signal-safe: meant for a
 * SIGINT/SIGTERM handler, which should then restore the default action and raise the signal. */
void mc_temp_files_remove(void);

#ifdef __cplusplus
}
#endif
#endif
