/* The backend interface: what every backend (backends/ref, backends/cpu, backends/cuda)
 * implements, and the parts of a compiled program and of its profile that backends read and
 * fill. The runtime (runtime/program.c) owns a program's lifetime and calls the slots; a backend
 * never includes anything above this floor.
 *
 * A backend is a struct of function pointers with designated initializers; optional slots may
 * be NULL and say so. Host memory for every input, param and output lives in the program
 * (`host[buffer]`, allocated for the buffer kinds KBUF_INPUT, KBUF_PARAM and KBUF_OUTPUT); a
 * backend copies inputs in when they changed (`dirty`) and outputs back after a run, or marks
 * them `stale` and copies them back when the runtime asks (`download`). Backends that run on
 * the host (ref, cpu) use these arrays directly.
 */
#ifndef MINIC_BACKEND_H
#define MINIC_BACKEND_H

#include "backends/comm.h"
#include "kir/kir.h"

#include <pthread.h>

typedef struct mc_profile mc_profile;

typedef struct mc_backend {
    const char *name; /* "ref", "cpu", "cuda" */
    /* What the runtime must know of a backend, instead of comparing names: */
    bool runs_on_host;  /* kernels read and write the program's host arrays in place (ref,
                           cpu): large ones get huge pages, and nothing is copied */
    bool is_gpu;        /* a GPU: the profile's peaks come from the GPU datasheet table and
                           NVML's clocks, not the CPU's measured FMA rate */
    bool no_peaks;      /* no ceilings: the profile shows no %-of-peak (ref: an interpreter
                           is not a device) and nothing is measured for it */
    bool attention;     /* runs KIR_ATTENTION kernels; false: the passes leave attention
                           chains unfused for this backend (mc_compile_options.no_attention) */
    bool conv_gather;   /* conv's im2col as one gather (mc_compile_options.conv_gather): faster
                           on the GPU; the CPU copies window by window, which it does faster */
    bool conv_implicit; /* f16/bf16 convs without groups as one implicit GEMM whose im2col
                           operand is never stored (mc_compile_options.conv_implicit) */
    bool runtime_sizes; /* a symbolic program compiles its kernels once and hands each binding
                           to `prepare` as a kir_bind'ed copy (with the symbolic list in
                           mc_program.sized), which costs this backend no compile (ref: it
                           interprets; cuda: its kernels read their sizes as a parameter;
                           cpu: its LLVM kernels load them from an array after the buffers);
                           false: the runtime compiles the graph per binding
                           (runtime/symbolic.c) */
    /* Optional, with runtime_sizes: why the backend does not take sizes at run time in this
     * process after all (cuda: "MINIC_CUDA_SIZED=0", to compare with compiling per binding);
     * NULL: it does. */
    const char *(*runtime_sizes_off)(void);
    /* Is the backend usable here? MC_OK, or MC_ERR_SYSTEM with a message that says why
     * (no driver, no device, driver too old). Optional: NULL means always available. */
    mc_status (*probe)(void);
    /* Generate and compile code for p->kp, allocate memory. Sets p->state. */
    mc_status (*prepare)(mc_program *p);
    /* Execute the program once: read inputs from p->host where p->dirty says they changed
     * (never a stale one), leave outputs in p->host or, with a `download` slot, mark them
     * p->stale (where p->stale is not NULL) for the runtime to read back when asked. */
    mc_status (*run)(mc_program *p);
    /* Optional: run the kernels marked prep (kir/kir.h, "Prep kernels"), in list order, before
     * the next run: reading params where p->dirty says they changed, as `run` does (cuda:
     * uploads and launches queued on the program's stream, outside any CUDA graph, without
     * waiting; the run queued next on that stream follows them). The runtime calls it through
     * mc_program_prep_params; `run`, `launch`, `time`, `profile` and `run_kernel` never run a
     * prep kernel. NULL: the pipeline marks no kernel prep for this backend. */
    mc_status (*prep)(mc_program *p);
    /* Optional: time every kernel over `iters` runs after a warm-up, into prof. */
    mc_status (*profile)(mc_program *p, int iters, mc_profile *prof);
    /* Optional: median time of one whole execution over `iters` runs after a warm-up, timed on
     * the device where there is one (CUDA events around each replay); for --iters and bench. */
    mc_status (*time)(mc_program *p, int iters, double *median_us);
    /* Optional: the generated source of every kernel (minic dump --stage code). */
    mc_status (*dump_code)(mc_program *p, FILE *out);
    /* Optional, for backends whose buffers live off the host (cuda): copy output buffer `ob`
     * of src, as its last run left it, into input or param buffer `ib` of dst (programs of
     * this backend, of the same dtype and size; dst may be src), without a trip through the
     * host: ordered before dst's next run (a CUDA graph's replay reads that same buffer), and
     * done reading src's buffer before src may run again. *done false with MC_OK: not this
     * pair (another device), the runtime copies through the host instead. After a copy the
     * runtime marks dst's buffer `stale` on the host and not dirty (mc_program_set_from_output). */
    mc_status (*copy_output)(mc_program *dst, int ib, mc_program *src, int ob, bool *done);
    /* Optional: queue one execution like `run` without waiting for it to finish (uploads and
     * launches queued on the program's stream, outputs marked stale): mc_program_run_async.
     * Errors found while queueing are returned here; those the device finds while it runs
     * (a failed check, a failed kernel) by the next `wait`. The runtime calls `wait` before
     * anything reads the program's buffers (download, a copy to another program) and before a
     * synchronous run. Backends without it run synchronously (mc_program_run_async = run). */
    mc_status (*launch)(mc_program *p);
    /* With launch: wait until every queued execution is done and report the first check that
     * failed in any of them (kir_check_fail) or the device's error; the check state is reset. */
    mc_status (*wait)(mc_program *p);
    /* Optional, for backends whose buffers live off the host (cuda): make output buffer ob use
     * input buffer ib's device memory (on) or its own again (off): the program's kernels then
     * write that output straight into the input (mc_program_feed_back, in place; the runtime
     * has checked that it is safe). Every launch argument and captured graph that holds ob's
     * address is remade. *done false with MC_OK: not possible here (a padded buffer, ...), the
     * runtime copies instead. Backends that run on the host need none: the runtime points
     * host[ob] at host[ib]. */
    mc_status (*alias)(mc_program *p, int ob, int ib, bool on, bool *done);
    /* Optional, for backends whose buffers live on a device (cuda): buffer b (an input, param
     * or output) uses the caller's device memory at `addr` (mc_program_bind_memory with device
     * true), or its own again (addr 0: what addr holds is copied into it first, so that the
     * value stays). Like alias, every launch argument and captured graph is remade. The
     * runtime has checked the size and a 256-byte alignment and waited for queued runs. */
    mc_status (*bind_device)(mc_program *p, int b, uint64_t addr);
    /* Optional, for backends whose buffers live on a device (cuda): buffer b (an input, param
     * or output) uses the caller's host memory at data (bytes) in place, mapped into the
     * device's address space (mc_program_bind_memory with MC_MEMORY_HOST_MAPPED): the backend
     * neither uploads it nor reads it back (nor marks it stale), its kernels read and write it
     * there. *done false with MC_OK: not possible here, why[] says why (the runtime copies
     * instead, as for MC_MEMORY_HOST, and notes it). data NULL: the mapping ends, the buffer
     * uses its own memory again (the runtime gives the value to it), the memory is unmapped.
     * The backend's release unmaps whatever is still mapped. The runtime has checked the size
     * and a 256-byte alignment and waited for queued runs. */
    mc_status (*map_host)(mc_program *p, int b, void *data, size_t bytes, bool *done, char *why, size_t why_size);
    /* Optional, with copy_output or stale outputs: copy buffer b from the device into
     * p->host[b], synchronously (an output left on the device after a run, an input given on
     * the device); the runtime then clears p->stale[b]. */
    mc_status (*download)(mc_program *p, int b);
    /* Free p->state and everything it owns. Must accept a half-prepared state. */
    void (*release)(mc_program *p);
    /* Optional, for backends that run on the host: execute kernel `kernel` alone, synchronously
     * (after a full run, so its inputs are in place). Without a `profile` slot, the profiler
     * (runtime/profile.c) times each kernel through this with the host's monotonic clock. */
    mc_status (*run_kernel)(mc_program *p, int kernel);
    /* Optional, for tensor parallelism (mc_options.devices, runtime/parallel.c). comm_init is
     * called once by the runtime, on the thread that compiles, after every rank's program was
     * prepared (each with its rank, nranks and comm set before its prepare) and before the
     * first run: ranks[r] is rank r's program, n of them, all of this backend (the cuda
     * backend creates its NCCL communicators here). comm_release is called once before the
     * ranks are released (their `release` slots), also when comm_init failed. A backend
     * without them runs KIR_COLLECTIVE kernels with the host communicator p->comm (ref, cpu). */
    mc_status (*comm_init)(mc_program **ranks, int n);
    void (*comm_release)(mc_program **ranks, int n);
} mc_backend;

extern const mc_backend mc_backend_ref;  /* backends/ref/: interprets the kernel IR */
extern const mc_backend mc_backend_cpu;  /* backends/cpu/, when built with LLVM */
extern const mc_backend mc_backend_cuda; /* backends/cuda/, with CUDA */

/* One phase of a compile and the time it took (mc_program_phase). */
typedef struct mc_compile_phase {
    char name[32];
    double ms;
} mc_compile_phase;
enum { MC_MAX_COMPILE_PHASES = 24 };
typedef struct mc_symbolic mc_symbolic;
/* The arena of intermediates that every binding of a symbolic program shares when its memory
 * was planned once at the symbols' maxima (runtime/symbolic.c, passes/plan.c
 * mc_plan_memory_like): each binding's temps lie at the same offsets, valid for every binding
 * within the maxima, in one allocation of `bytes`. Its runs never overlap (a symbolic program
 * runs one binding at a time, synchronously, under its mutex), so they can share it. The first
 * binding's prepare allocates it (`addr`: a host pointer on ref and cpu, a device address on
 * cuda), counts that in `allocations` and sets `release` (with `owner`, what release needs),
 * which the symbolic program calls when it is freed, after every binding's program is. A
 * backend's release never frees it. Every binding's kp->arena_bytes is `bytes` (the plan's), and
 * no backend lays out a temp larger than its kp size (cuda pads only outputs' rows), so the arena
 * always holds a binding's temps; cuda keeps an arena of its own (noted) only for a binding
 * whose padded GEMM reads past an intermediate's end (those reads must stay in an allocation).
 * ref and cpu take the host memory from mc_shared_arena_host. */
typedef struct mc_shared_arena {
    int64_t bytes;
    uint64_t addr;      /* 0 until the first prepare allocates it */
    int allocations;
    bool failed;        /* its allocation failed (the runtime then plans every binding on its own) */
    void (*release)(struct mc_shared_arena *a);
    void *owner;
} mc_shared_arena;
enum { MC_EXTERNAL_HOST = 1, MC_EXTERNAL_DEVICE = 2, MC_EXTERNAL_MAPPED = 3 };
/* An output handed back to an input of the same program after every run
 * (mc_program_feed_back): kp buffers ib (the input) and ob (the output). in_place: ob's memory
 * is ib's (host[ob] == host[ib] on a backend that runs on the host; backend->alias on cuda), so
 * the run writes the input itself and nothing is copied; else the runtime copies ob into ib
 * after each run (backend->copy_output, or between the host arrays). own: ob's own host array,
 * restored when the pairing ends. */
typedef struct mc_feedback {
    int ib, ob;
    bool in_place;
    void *own;
} mc_feedback;
typedef struct mc_parallel mc_parallel;

struct mc_program {
    mc_graph *graph;          /* the user's graph, cloned (names, types, lines) */
    kir_program *kp;          /* the kernel list; NULL for a symbolic program */
    mc_symbolic *sym;         /* a graph with symbolic dimensions: its bindings and the programs
                                 compiled per binding (runtime/symbolic.c); NULL otherwise */
    mc_parallel *par;         /* tensor parallel (mc_options.devices >= 1): the plan and the
                                 rank programs (runtime/parallel.c); NULL otherwise. Like a
                                 symbolic program, a parallel one has no kp of its own */
    /* A rank of a parallel program (set before the backend's prepare): its rank in 0..nranks-1,
     * the number of ranks, the host communicator shared by the ranks, and the parallel program
     * it belongs to. nranks 0 (rank 0, comm and parent NULL): not a rank, an ordinary program. */
    int rank, nranks;
    mc_comm *comm;
    mc_program *parent;
    mc_options opt;
    const mc_backend *backend;
    void *state;              /* the backend's */
    void **host;              /* per kp buffer: host array for inputs, params, outputs; else NULL */
    void **host_alloc;        /* per kp buffer: the block host[b] lies in (a reference count, then
                                 the array at the next 64-byte boundary: runtime/program.c,
                                 host_block); programs that share params (mc_program_share_params)
                                 hold one block each a reference; mc_program_free releases */
    bool *bound;              /* per kp buffer: the user gave a value */
    bool *dirty;              /* per kp buffer: host copy changed since the backend last read it */
    bool *has_value;          /* per kp buffer: bound, or filled from the generator */
    bool *stale;              /* per kp buffer: the backend's copy is newer than host[b] (an input
                                 given on the device by mc_program_set_from_output, a cuda output
                                 not read back yet): a backend must not upload host[b], the
                                 runtime reads it back (backend->download) before reading it.
                                 NULL in a program made by hand (tests): never stale */
    int *outputs;             /* per graph output: its kp buffer */
    unsigned char *external;  /* per kp buffer: 0, or bound to the caller's memory
                                 (mc_program_bind_memory): MC_EXTERNAL_HOST (host[b] is the
                                 caller's array), MC_EXTERNAL_DEVICE (backend->bind_device) or
                                 MC_EXTERNAL_MAPPED (host[b] is the caller's array, and the
                                 backend's buffer is that array mapped: backend->map_host; it
                                 is neither uploaded nor read back) */
    int64_t queued;           /* executions queued by mc_program_run_async (backend->launch)
                                 and not waited for yet (backend->wait) */
    struct mc_feedback *feedback; /* mc_program_feed_back's pairs, nfeedback of them */
    int nfeedback;
    double compile_ms;        /* passes + code generation + backend compile */
    mc_compile_phase compile_phases[MC_MAX_COMPILE_PHASES]; /* where compile_ms went, in order */
    int ncompile_phases;
    int kernels_compiled;     /* backend compiles this run (0: all from cache) */
    /* One binding of a symbolic program whose kernels were compiled once (runtime/symbolic.c,
     * backend->runtime_sizes): `sized` is that kernel list with its sizes as expressions
     * (owned by the symbolic program, which outlives this one) and sized_values[k] symbol k's
     * size in this binding; kp is the same list bound to them (kir_bind). A backend that
     * generates code renders it from `sized` (the same source for every binding) and counts
     * in kernels_specialized the kernels it had to render from kp instead (this binding's
     * sizes in their source: runtime/symbolic.c then counts a compilation). NULL otherwise. */
    const kir_program *sized;
    int64_t sized_values[MC_MAX_SYMS];
    int kernels_specialized;
    /* A binding planned at its symbolic program's maxima: the arena its temps lie in (borrowed,
     * shared with the other bindings; the backend's prepare allocates it if addr is 0). NULL:
     * the backend allocates an arena of kp->arena_bytes of its own. */
    mc_shared_arena *arena;
    int64_t runs;             /* completed mc_program_run calls (outputs are valid after one) */
    bool prep_due;            /* the prep kernels (kp->nprep) have not run since a param they read
                                 was bound (or since compile): mc_program_prep_params runs them */
    int64_t preps;            /* times they ran (tests count it) */
    char *notes;              /* mc_program_notes: every note, one per line; NULL when none */
    size_t notes_len;
    void **unread;            /* per graph node: a copy of the value bound to an input or param
                                 that no kernel reads (no buffer), kept for
                                 mc_program_save_inputs; NULL until the first such bind */
    bool seeded;              /* mc_program_fill_random ran: `seed` is its (last) seed */
    uint64_t seed;
    pthread_mutex_t lock;     /* held by every public call that reads or writes the state above
                                 after compile (binding, run, outputs): one call at a time */
    bool lock_ready;          /* lock was initialized (mc_program_free destroys it) */
    double *kernel_clock;     /* set by the profiler (runtime/profile.c) around ordinary runs:
                                 a backend that runs on the host stores mc_now_ms() just before
                                 and just after kernel k at [2k] and [2k+1]; NULL otherwise */
};

/* Record a note about p (include/minic.h: notes): kept for mc_program_notes and handed to
 * p->opt.note, unless p->opt.quiet. The library's one way of telling the user something that
 * is not an error; it never prints. */
/* (backends/backend.c) */
void mc_program_note(mc_program *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Add the time since *since to p's compile phase `name` (a phase seen before grows; past
 * MC_MAX_COMPILE_PHASES names the time goes to the last one) and set *since to now: a compile
 * calls it after each step, so the phases add up to the compile time (backends/backend.c). */
void mc_program_phase(mc_program *p, const char *name, double *since);
/* Run p's prep kernels (backend->prep) when they are due: p->prep_due, or a param they read
 * (kir_buffer.prep_read) dirty or in the caller's memory (which may change behind the
 * program's back, so they run before every run then). Every run calls it first, and so do the
 * backends' `time` and `profile` slots before their warm-up (backends/backend.c). */
mc_status mc_program_prep_params(mc_program *p);
/* The host memory of shared arena a (ref, cpu), allocated by the first binding that asks:
 * 64-byte aligned, zeroed lazily by calloc (no memset of a large arena), released by
 * a->release. NULL with the message set when out of memory (backends/backend.c). */
void *mc_shared_arena_host(mc_shared_arena *a);



/* One kernel execution in a profiled run, on the profile's clock (µs since the first
 * measured run began): the trace draws these as they happened. */
typedef struct mc_profile_event {
    int kernel, run;
    double start_us, end_us;
    char function[96]; /* the device function that ran, where the backend knows it (CUPTI's
                          record: a generated kernel's entry, cuBLASLt's mangled name); else "" */
} mc_profile_event;

/* Put a profiled run's kernel executions on the profile's time line (backends/backend.c):
 * ev[0..n) carry kernel, run (0..iters) and start and end on one clock, any origin; host (NULL:
 * none) the host's times just before and just after each run, host[2i] and host[2i+1], on the
 * same clock (CUPTI's timestamps are comparable with its host clock). Shifts every time so that
 * the first run begins at 0 and writes span[2i], span[2i+1]: run i from launch to finish, its
 * host times where they hold every kernel of the run (1 µs of slack for the clocks'
 * conversion, the span widened over it), else from its first kernel's start to its last one's
 * end. Returns true when the host times were used for every run. */
bool mc_profile_place_runs(mc_profile_event *ev, int n, int iters, const double *host, double *span);

enum { MC_PEAK_SIZES = 4 }; /* mc_profile's memory ceilings by working set */

/* What a backend's `profile` slot fills (runtime/profile.h reads it; the arrays are allocated
 * by mc_profile_init with the counts, the times unknown). */
struct mc_profile {
    const mc_program *program; /* the program profiled (its kp's kernels, in order) */
    int nkernels;              /* == program->kp->nkernels */
    int *launches;             /* per kernel: launches per execution of the program (default 1) */
    double *time_us;           /* per kernel: median time per execution, µs; NaN: not measured
                                  (a zero or negative time is shown as suspect, never hidden) */
    double *peak_flops;        /* per kernel: the device's peak FLOP/s for this kernel's kind and
                                  dtype (tensor cores for an f16 GEMM, ...); 0: unknown */
    double peak_bytes_per_s;   /* the device's memory bandwidth; 0: unknown */
    /* CPU: copy bandwidth measured at smaller working sets (bytes read + written, ascending),
     * the ceiling of a kernel whose bytes are that small: its data stays in the caches, which
     * a DRAM-sized copy does not measure (runtime/peaks.c). nbw_sizes 0: DRAM only. */
    int nbw_sizes;
    double bw_size_bytes[MC_PEAK_SIZES], bw_size_bytes_per_s[MC_PEAK_SIZES];
    double wall_us;            /* median host time of one whole execution; NaN: not measured */
    int iters;                 /* executions measured, after the warm-up */
    char device[128];          /* the device's name ("" where the backend does not say) */
    char clock[256];           /* what the kernel times were measured with ("cuda events") */
    /* runtime/peaks.c (mc_peaks_apply): where the peaks came from and the GPU clocks. */
    const char *peaks_source;  /* "measured", "datasheet" or "none" */
    bool clocks_known;
    double sm_mhz, sm_max_mhz, mem_mhz, mem_max_mhz;
    double clock_scale;        /* applied to the compute peaks; 1 when clocks are unknown */
    char peaks_note[320];      /* how the peaks were obtained (first use, spread, a flag) */
    char wall_clock[64];       /* what the wall time was measured with */
    /* Real timestamps of every kernel in every measured run (NULL where the backend gives
     * none: the trace then lays the median times end to end and says so). */
    mc_profile_event *events;
    int nevents;
    double *run_span_us;       /* [2 * iters]: start and end of each measured run; or NULL */
    char run_clock[96];        /* what the run spans were measured with ("" : the kernels') */
    double kernel_sum_us;      /* median over the runs of the run's kernel time (<= the wall
                                  time of the same runs); NaN: the sum of the kernels' medians */
};

#endif
