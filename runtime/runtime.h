/* The runtime: a compiled program, its host tensors, and the interface every backend fills.
 *
 * mc_program_compile runs the pass pipeline (passes/passes.h) to get a kir_program, then hands
 * it to a backend. Host memory for every input, param and output lives in the program
 * (`host[buffer]`, allocated for the buffer kinds KBUF_INPUT, KBUF_PARAM and KBUF_OUTPUT); a
 * backend copies inputs in when they changed (`dirty`) and outputs back after a run. Backends
 * that run on the host (ref, cpu) may use these arrays directly.
 *
 * A backend is a struct of function pointers with designated initializers; optional slots may
 * be NULL and say so.
 */
#ifndef MINIC_RUNTIME_H
#define MINIC_RUNTIME_H

#include "../codegen/kir.h"

#include <pthread.h>

typedef struct mc_profile mc_profile; /* runtime/profile.h */

typedef struct mc_backend {
    const char *name; /* "ref", "cpu", "cuda" */
    /* Is the backend usable here? MC_OK, or MC_ERR_SYSTEM with a message that says why
     * (no driver, no device, driver too old). Optional: NULL means always available. */
    mc_status (*probe)(void);
    /* Generate and compile code for p->kp, allocate memory. Sets p->state. */
    mc_status (*prepare)(mc_program *p);
    /* Execute the program once: read inputs from p->host where p->dirty says they changed,
     * leave outputs in p->host. */
    mc_status (*run)(mc_program *p);
    /* Optional: time every kernel over `iters` runs after a warm-up, into prof. */
    mc_status (*profile)(mc_program *p, int iters, mc_profile *prof);
    /* Optional: median time of one whole execution over `iters` runs after a warm-up, timed on
     * the device where there is one (CUDA events around each replay); for --iters and bench. */
    mc_status (*time)(mc_program *p, int iters, double *median_us);
    /* Optional: the generated source of every kernel (minic dump --stage code). */
    mc_status (*dump_code)(mc_program *p, FILE *out);
    /* Free p->state and everything it owns. Must accept a half-prepared state. */
    void (*release)(mc_program *p);
    /* Optional, for backends that run on the host: execute kernel `kernel` alone, synchronously
     * (after a full run, so its inputs are in place). Without a `profile` slot, the profiler
     * (runtime/profile.c) times each kernel through this with the host's monotonic clock. */
    mc_status (*run_kernel)(mc_program *p, int kernel);
} mc_backend;

extern const mc_backend mc_backend_ref;  /* runtime/ref_backend.c: interprets the kernel IR */
extern const mc_backend mc_backend_cpu;  /* codegen/llvm*.c, when built with LLVM */
extern const mc_backend mc_backend_cuda; /* codegen/cuda*.c + runtime/cuda*.c, with CUDA */

struct mc_program {
    mc_graph *graph;          /* the user's graph, cloned (names, types, lines) */
    kir_program *kp;          /* the kernel list */
    mc_options opt;
    const mc_backend *backend;
    void *state;              /* the backend's */
    void **host;              /* per kp buffer: host array for inputs, params, outputs; else NULL */
    void **host_alloc;        /* per kp buffer: the allocation host[b] lies in (host[b] is it,
                                 rounded up to 64 bytes); what mc_program_free frees */
    bool *bound;              /* per kp buffer: the user gave a value */
    bool *dirty;              /* per kp buffer: host copy changed since the backend last read it */
    bool *has_value;          /* per kp buffer: bound, or filled from the generator */
    int *outputs;             /* per graph output: its kp buffer */
    double compile_ms;        /* passes + code generation + backend compile */
    int kernels_compiled;     /* backend compiles this run (0: all from cache) */
    int64_t runs;             /* completed mc_program_run calls (outputs are valid after one) */
    pthread_mutex_t lock;     /* held by every public call that reads or writes the state above
                                 after compile (binding, run, outputs): one call at a time */
    bool lock_ready;          /* lock was initialized (mc_program_free destroys it) */
};

/* Find the buffer of an input or param by name; -1 if none. */
int mc_program_find(const mc_program *p, const char *name);
/* The element count and dtype of buffer b, as the graph declares it. */
int64_t mc_program_numel(const mc_program *p, int b);
/* Compile for an explicit backend without probing or preparing it (p->state stays NULL), for
 * `minic dump --stage code` on a machine without the device: only dump_code may be called, and
 * only on a backend whose dump_code accepts an unprepared program (cuda). */
mc_status mc_program_compile_unprepared(const mc_graph *g, const mc_options *opt,
                                        mc_program **out);

/* ---- files (runtime/npy.c, runtime/safetensors.c) ----------------------------------------- */

typedef struct mc_array {
    mc_dtype dtype;
    int rank;
    int64_t shape[MC_MAX_RANK];
    void *data;   /* malloc'd, numel * dtype size bytes */
    size_t bytes;
} mc_array;

/* Read a .npy file. `want` is the dtype the caller expects: bf16 is accepted as <u2. Every
 * header field and the data size are checked; errors name the file and what is wrong. */
mc_status mc_npy_read(const char *path, mc_dtype want, mc_array *out);
/* Write a .npy file (via a temporary name and rename). */
mc_status mc_npy_write(const char *path, const mc_array *a);

typedef struct mc_safetensors mc_safetensors; /* an opened, fully validated file */
mc_status mc_safetensors_open(const char *path, mc_safetensors **out);
/* Look up a tensor: MC_OK with its dtype, shape and bytes (a pointer into the file's data),
 * MC_ERR_INPUT if absent (with a message naming the file and the tensor). */
mc_status mc_safetensors_get(const mc_safetensors *st, const char *name, mc_array *out);
void mc_safetensors_close(mc_safetensors *st);
/* Write named arrays to a .safetensors file (via a temporary name and rename). */
mc_status mc_safetensors_write(const char *path, const char *const *names, const mc_array *arrays,
                               int n);

/* The from-memory cores the file functions call (and the fuzzers drive). `name` is the file
 * name used in messages. mc_npy_parse: `want` as for mc_npy_read, or MC_NUM_DTYPES for "any
 * dtype" (then <u2 is refused as ambiguous); out->data is malloc'd (at least 1 byte).
 * mc_safetensors_parse_memory copies the bytes, so the caller's buffer may go away. */
mc_status mc_npy_parse(const void *data, size_t size, const char *name, mc_dtype want,
                       mc_array *out);
/* The writers' cores: the same bytes to an open stream (no temporary, no rename); `name` is
 * used in messages. For writing to memory (open_memstream) or to a pipe. */
mc_status mc_npy_write_stream(FILE *f, const char *name, const mc_array *a);
mc_status mc_safetensors_write_stream(FILE *f, const char *name, const char *const *names,
                                      const mc_array *arrays, int n);
/* Check an array before writing it: dtype, rank 0..MC_MAX_RANK, non-negative dims, bytes equal
 * to numel * dtype size (checked), data present. Messages read "PATH: WHAT: problem". */
mc_status mc_array_check(const char *path, const char *what, const mc_array *a);
mc_status mc_safetensors_parse_memory(const void *data, size_t size, const char *name,
                                      mc_safetensors **out);
/* The tensors of an opened file, sorted by name (for listing; mc_safetensors_get to read). */
int mc_safetensors_count(const mc_safetensors *st);
const char *mc_safetensors_name(const mc_safetensors *st, int index);

/* ---- JSON reading (runtime/json.c) -------------------------------------------------------- */

/* A strict RFC 8259 reader for small documents (the safetensors header): UTF-8 checked,
 * escapes (\uXXXX with surrogate pairs) decoded, nesting depth limited, duplicate object keys
 * rejected. The tree lives in the caller's arena. Numbers keep their source text, so integers
 * are read exactly with mc_json_int64. */
typedef enum { MC_JSON_NULL, MC_JSON_BOOL, MC_JSON_NUMBER, MC_JSON_STRING, MC_JSON_ARRAY,
               MC_JSON_OBJECT } mc_json_kind;
typedef struct mc_json mc_json;
struct mc_json {
    mc_json_kind kind;
    bool boolean;
    const char *text;   /* STRING: decoded, NUL-terminated (may hold NULs: see len); NUMBER: source */
    size_t len;         /* bytes of text */
    int count;          /* ARRAY, OBJECT: members */
    mc_json *first;     /* ARRAY, OBJECT: first member */
    mc_json *next;      /* the next member of the parent */
    const char *key;    /* member of an OBJECT: its key (decoded) */
    size_t key_len;
};
/* Parse text[0..size) as one JSON value (whitespace around it allowed). Errors (MC_ERR_INPUT)
 * read "NAME: invalid JSON header at byte N: what". */
mc_status mc_json_parse(const char *text, size_t size, const char *name, mc_arena *arena,
                        mc_json **out);
/* The member of an object with this key, or NULL. */
const mc_json *mc_json_get(const mc_json *object, const char *key);
/* A NUMBER that is an integer in int64 range (no fraction or exponent): true and *out. */
bool mc_json_int64(const mc_json *number, int64_t *out);
/* Is s[0..n) well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF)? */
bool mc_json_valid_utf8(const char *s, size_t n);

/* ---- whole files (runtime/fileio.c) ------------------------------------------------------- */

/* Read a regular file into malloc'd memory (plus a NUL after the end). MC_ERR_INPUT when it
 * cannot be opened or is not a regular file, MC_ERR_SYSTEM when memory or reading fails. */
mc_status mc_file_read_all(const char *path, char **data, size_t *size);
/* Write a file all-or-nothing: `write` fills a temporary file in the same directory, which is
 * then flushed, synced and renamed over path. On any failure the temporary is removed and path
 * is untouched. `write` returns MC_OK or a status with its message already set. */
mc_status mc_file_write_atomic(const char *path, mc_status (*write)(FILE *f, void *ctx),
                               void *ctx);

/* ---- the compile cache (runtime/cache.c) -------------------------------------------------- */

/* A content-addressed disk cache: $XDG_CACHE_HOME/minic/<kind>/<hash of key> (else
 * ~/.cache/minic). The key must contain everything the result depends on: the source or IR,
 * the compiler's version, the target architecture and every option. Entries are written to a
 * temporary name and renamed, and stored with their key, so a hash collision is a miss. The
 * cache is an optimization: any failure is a miss, never an error. MINIC_NO_CACHE=1 disables. */
uint64_t mc_hash64(const void *data, size_t n, uint64_t seed);
/* The directory of one kind of cached thing ($XDG_CACHE_HOME/minic/<kind>, else
 * ~/.cache/minic/<kind>), created with its parents when `create`; false when neither variable
 * is set, the path does not fit, or creating it fails. */
bool mc_cache_dir(const char *kind, bool create, char *dir, size_t size);
bool mc_cache_load(const char *kind, const char *key, void **data, size_t *size);
void mc_cache_store(const char *kind, const char *key, const void *data, size_t size);

/* ---- the thread pool (runtime/threadpool.c) ----------------------------------------------- */

/* A persistent pool: threads start in mc_threadpool_new and wait for work until freed, so a
 * kernel launch never starts a thread. The caller runs as thread 0. */
typedef struct mc_threadpool mc_threadpool;
/* Runs indices [begin, end) of a job on thread `thread` (0 .. size-1). */
typedef void (*mc_parallel_fn)(void *ctx, int64_t begin, int64_t end, int thread);
int mc_threadpool_default_threads(void); /* one per core this process may run on */
/* threads == 0: one per core. MC_ERR_INPUT for a negative or absurd count. */
mc_status mc_threadpool_new(int threads, mc_threadpool **out);
int mc_threadpool_size(const mc_threadpool *pool);
/* Run fn over [0, n) and wait for it. grain <= 0: one balanced contiguous range per thread;
 * grain > 0: threads take chunks of `grain` indices until none are left. Not reentrant: one job
 * at a time per pool. A NULL pool runs fn(ctx, 0, n, 0) on the caller. */
void mc_threadpool_run(mc_threadpool *pool, int64_t n, int64_t grain, mc_parallel_fn fn, void *ctx);
void mc_threadpool_free(mc_threadpool *pool);

/* ---- helpers ------------------------------------------------------------------------------ */

/* Fill n elements of dtype d from the seeded generator: stream chosen by (seed, name);
 * f32/f16/bf16 uniform in [-1, 1), i32 in 0..9, bool random. Same values on every backend. */
void mc_fill_random(void *data, mc_dtype d, int64_t n, uint64_t seed, const char *name);
double mc_now_ms(void); /* monotonic clock */
double mc_median(double *t, int n); /* the median of t[0..n) (sorts t in place); n >= 1 */

#endif
