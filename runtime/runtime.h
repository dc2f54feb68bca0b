/* The runtime: a compiled program (the pipeline, then a backend), its host tensors, binding by
 * name, and the file formats inputs, weights and outputs travel in.
 *
 * mc_program_compile runs the pass pipeline (passes/passes.h) to get a kir_program, then hands
 * it to a backend through the interface in backends/backend.h.
 */
#ifndef MINIC_RUNTIME_H
#define MINIC_RUNTIME_H

#include "backends/backend.h"
#include "passes/passes.h"

/* Find the buffer of an input or param by name; -1 if none. */
int mc_program_find(const mc_program *p, const char *name);
/* The element count and dtype of buffer b, as the graph declares it. */
int64_t mc_program_numel(const mc_program *p, int b);
/* Compile for an explicit backend without probing or preparing it (p->state stays NULL), for
 * `minic dump --stage code` on a machine without the device: only dump_code may be called, and
 * only on a backend whose dump_code accepts an unprepared program (cuda). */
mc_status mc_program_compile_unprepared(const mc_graph *g, const mc_options *opt,
                                        mc_program **out);

/* ---- symbolic programs (runtime/symbolic.c) ----------------------------------------------- */

/* A program of a graph with symbolic dimensions: runtime/program.c's public functions hand
 * every call on it (under its mutex) to these. */
mc_status mc_symbolic_new(mc_program *p);
void mc_symbolic_free(mc_program *p);
mc_status mc_symbolic_set_dim(mc_program *p, const char *name, int64_t size);
mc_status mc_symbolic_set(mc_program *p, const char *name, const void *data, size_t bytes);
mc_status mc_symbolic_load_file(mc_program *p, const char *name, const char *path);
mc_status mc_symbolic_load_weights(mc_program *p, const char *path);
mc_status mc_symbolic_fill_random(mc_program *p, uint64_t seed);
/* Bind declaration `node` to an array of dtype and shape (mc_program_set_from_output's value,
 * another program's output as its last run bound it): checked and unified as a file's array. */
mc_status mc_symbolic_set_array(mc_program *p, int node, mc_dtype dtype, const int64_t *shape, int rank,
                                const void *data, size_t bytes);
mc_status mc_symbolic_run(mc_program *p);
/* A program of static graph g (one binding's specialisation of a symbolic graph) over kernels
 * compiled once for every binding and bound to this one (kir_bind, planned, counted): host
 * memory and the backend's prepare, no passes. Takes kp (freed on failure). `sized` (the
 * kernels compiled once, borrowed: it must outlive the program) and values (the binding) go
 * to the backend (mc_program.sized); arena (borrowed, or NULL) is the arena planned at the
 * maxima that the bindings share (mc_program.arena). */
mc_status mc_program_instantiate(const mc_graph *g, kir_program *kp, const kir_program *sized, const int64_t *values,
                                 mc_shared_arena *arena, const mc_options *opt, mc_program **out);
mc_status mc_symbolic_save_inputs(mc_program *p, const char *path);
mc_program *mc_symbolic_current(const mc_program *p); /* the last run's program, or NULL */
int mc_symbolic_compilations(const mc_program *p);
/* The arena that p's bindings share when its memory was planned once at the maxima: its bytes
 * (0: none, each binding plans and allocates its own) and, in *allocations, how many times it
 * was allocated (1 from the first run on: the tests check that no binding allocates another). */
int64_t mc_symbolic_arena(const mc_program *p, int *allocations);
/* Programs of bindings kept in p's cache (at most 8, least recently run dropped): on cuda each
 * holds its CUDA graph. 0 for a program without symbols. */
int mc_symbolic_cached(const mc_program *p);
/* runtime/program.c: the error for a name p's graph does not declare (a computed value, else
 * the nearest declared names or their list), for symbolic.c's binding calls too. */
mc_status mc_program_undeclared(const mc_program *p, const char *name, const char *where);
/* The compile options a program on opt's backend gets (the backend's attention and conv
 * choices; AUTO picked as a compile picks it), for `minic dump`'s stages, which compile no
 * program: what they print is what that backend runs. */
mc_compile_options mc_compile_options_of_backend(const mc_options *opt);
/* The pipeline's options for compiling opt's graph to backend b (what b fuses and decomposes:
 * attention, conv's gather or implicit GEMM); b NULL: the defaults. */
mc_compile_options mc_compile_options_for_backend(const mc_options *opt, const mc_backend *b);
/* The note that kp's prep kernels (kir/kir.h, "Prep kernels") run when the params are bound,
 * where it has any: once per compile (a symbolic program's kernel list, not each binding's). */
void mc_program_note_prep(mc_program *p, const kir_program *kp);
/* ---- tensor-parallel programs (runtime/parallel.c) ---------------------------------------- */

/* A program compiled with mc_options.devices >= 1: the plan and one program per rank.
 * runtime/program.c's public functions hand calls on it (under its mutex) to these. */
mc_status mc_parallel_new(mc_program *p);
void mc_parallel_free(mc_program *p);
/* Split a checked value of declaration `node` (of p->graph) into every rank. */
mc_status mc_parallel_bind(mc_program *p, int node, const void *data, size_t bytes);
mc_status mc_parallel_fill_random(mc_program *p, uint64_t seed);
mc_status mc_parallel_run(mc_program *p);
/* The backend's own timer on every rank at once (a collective needs them all): with prof, every
 * rank's `profile` slot, rank 0's into prof (a profile of rank 0's program); else every rank's
 * `time` slot, *median_us the slowest rank's median. p is the parallel program; its backend
 * has the slot. */
mc_status mc_parallel_time(mc_program *p, int iters, mc_profile *prof, double *median_us);
mc_program *mc_parallel_rank(const mc_program *p, int rank); /* NULL when there is none */

/* For the programs that symbolic and parallel programs compile inside them: the backend kind
 * a program already chose (so that they compile for it, not for `auto`), and a note callback
 * (ctx: the outer program) that hands their notes to the outer program. */
mc_backend_kind mc_program_backend_kind(const mc_program *p);
void mc_program_forward_note(void *ctx, const char *note);

/* ---- ranks of tensor-parallel programs ------------------------------------------------------ */

/* mc_program_compile of one rank: rank, nranks, comm and parent (the parallel program, or
 * NULL) set before the backend's prepare (runtime/program.c). */
mc_status mc_program_compile_rank(const mc_graph *g, const mc_options *opt, mc_program *parent, int rank,
                                  int nranks, mc_comm *comm, mc_program **out);
/* Run rank p alone, on the calling thread, without its mutex: every rank's thread of a
 * parallel run calls it, all at once (their collectives meet in the communicator). */
mc_status mc_program_run_rank(mc_program *p);

/* The program that ran last: p itself, or for a symbolic p the one compiled for the binding
 * of its last run (NULL before a run), for a parallel one its rank 0 (whose mc_program_run
 * runs every rank). What `minic run` profiles and times. */
mc_program *mc_program_ran(mc_program *p);
/* Forget every value bound to p's inputs and params (and the generator's seed). */
void mc_program_unbind(mc_program *p);

/* ---- files (runtime/npy.c, runtime/safetensors.c) ----------------------------------------- */

typedef struct mc_array {
    mc_dtype dtype;
    int rank;
    int64_t shape[MC_MAX_RANK];
    void *data;   /* malloc'd, numel * dtype size bytes */
    size_t bytes;
} mc_array;

/* Read a .npy file. `want` is the dtype the caller expects: bf16 is accepted as <u2, and i32
 * as <i8 when every value fits (narrowed; else an error naming the first that does not). Every
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
/* The file's own words for a tensor, "F64[512]" (its dtype as the file spells it, even one
 * minic does not read, and its shape), into buf; false when there is no such tensor. For
 * messages that must tell "absent" from "present but unusable". */
bool mc_safetensors_describe(const mc_safetensors *st, const char *name, char *buf, size_t size);
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

/* ---- helpers ------------------------------------------------------------------------------ */

/* Fill n elements of dtype d from the seeded generator: stream chosen by (seed, name);
 * f32/f16/bf16 uniform in [-1, 1), i32 in 0..9, bool random. Same values on every backend. */
void mc_fill_random(void *data, mc_dtype d, int64_t n, uint64_t seed, const char *name);

#endif
