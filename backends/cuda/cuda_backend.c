/* The CUDA backend: prepare (plan, render, compile, allocate, set up cuBLASLt: cuda_lt.c), run,
 * time, profile, dump, release.
 *
 * Memory: one device allocation per program holds everything: the inputs, params and outputs
 * (each its own 256-byte aligned slot, owned by the program, so a replay needs no copies and an
 * output is never overwritten behind the user's back), the planned arena of intermediates
 * (kp->arena_bytes, buffers at their planned offsets), the f32 scratch that cuBLASLt writes
 * when a generated kernel finishes a GEMM's epilogue, and cuBLASLt's workspace. Every device
 * address is therefore known at prepare time, and so are every kernel's arguments and every
 * cuBLASLt call's pointers: a run is a fixed list of steps.
 *
 * Execution: the first run executes the steps eagerly (the warm-up: module load, cuBLASLt's
 * first calls), then, unless opt.cuda_graph is 0, captures them into one CUDA graph; later runs
 * replay it. A program that cannot be captured runs eagerly and says why once (an error when
 * opt.cuda_graph is 1). Inputs are uploaded only when dirty (and not when given on the device:
 * mc_program_set_from_output copies an output's buffer into an input's, cuda_copy_output);
 * outputs are left on the device after a run, marked stale, and read back only when the runtime
 * asks for one (mc_program_output and the like: cuda_download), so a run whose outputs go on to
 * another program's inputs moves nothing through the host.
 *
 * cuBLASLt: descriptors, layouts and the heuristic's algorithm are made once per GEMM at
 * prepare time with the real pointer alignments; a launch is one cublasLtMatmul per outer batch
 * index. A GEMM cuBLASLt finds no algorithm for falls back to the generated tiled kernel.
 *
 * Failures (no device memory, a failed launch, a cuBLASLt error) become MC_ERR_SYSTEM with a
 * message that names what failed; nothing here aborts.
 */
#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cuda_cupti.h"
#include "backends/cuda/cuda_lt.h"
#include "backends/cuda/cuda_nccl.h"
#include "backends/comm.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct step {
    int kernel;
    bool is_gemm;     /* a cuBLASLt GEMM (then an optional kernel follows as its own step) */
    bool is_coll;     /* a KIR_COLLECTIVE kernel: NCCL's all-reduce (a copy with no communicator) */
    mc_lt_gemm *gemm;
    const mc_cuda_gemm_plan *plan;
    CUfunction fn;
    char entry[96];   /* the generated function's name (CUPTI's records carry it) */
    unsigned grid[3], block, smem;
    CUdeviceptr *argv;
    void **args;
} step;

typedef struct cuda_state {
    const mc_cuda_api *cu;
    const mc_lt_api *lt;
    CUdevice dev;
    int ordinal;              /* the device's number (mc_options.device) */
    CUcontext ctx;
    mc_nccl_comm *comm;       /* a tensor-parallel rank's communicator (comm_init); else NULL */
    bool ctx_retained;
    CUstream stream;
    CUdeviceptr mem;
    size_t mem_bytes;
    CUdeviceptr *buf;         /* per kp buffer */
    CUdeviceptr *home;        /* per kp buffer: its own memory while buf[] points at another
                                 buffer's (cuda_alias: an output written in place into an
                                 input); NULL until the first alias */
    void **mapped;            /* per kp buffer: the caller's host memory that buf[] maps
                                 (cuda_map_host), or NULL; NULL until the first mapping */
    size_t *buf_bytes;
    const mc_cuda_gemm_plan **pitched; /* per kp buffer: the GEMM plan that pads its rows, or NULL */
    CUdeviceptr scratch, workspace;
    CUdeviceptr splitk;       /* split-K convs' zeroed f32 region (MC_CUDA_PARAM_SPLITK), or 0 */
    size_t splitk_bytes;
    CUdeviceptr gather_error; /* int[2]: a failed gather's check + 1 (0: none) and its index;
                                 0 when the program has no gathers */
    int32_t gather_seen[2];   /* its copy on the host after a run */
    mc_cuda_target target;
    char device_name[128];
    mc_cuda_kernel_plan *plans;
    CUmodule *modules;        /* per kernel, or NULL */
    bool *shared;             /* per kernel: modules[i] is held in the shared list (below) */
    int *owner;               /* per kernel: the kernel whose module (and entry) it runs: itself,
                                 or an earlier one whose source differs only by the name */
    cublasLtHandle_t lt_handle;
    mc_lt_gemm *gemms;        /* per kernel */
    step *steps;              /* a run's steps: what execute launches or a CUDA graph replays */
    int nsteps;
    step *prep_steps;         /* the prep kernels' (kir/kir.h, "Prep kernels"): cuda_prep launches
                                 them on the stream before a run, never in a graph */
    int nprep_steps;
    CUgraphExec gexec;
    bool graph_done;          /* capture attempted */
    bool uploaded_once;
} cuda_state;

/* Modules of the bindings of symbolic programs (mc_program.sized), shared: every binding renders
 * the same sources, so the first one's loaded module serves the others (no compile, no cache
 * lookup, no load). Keyed by context and whole source; counted references, unloaded with the
 * last program that holds one. */
typedef struct shared_module {
    CUcontext ctx;
    char *src;
    CUmodule mod;
    int refs;
    struct shared_module *next;
} shared_module;
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static shared_module *shared_modules;

/* The shared module of src in ctx with one more reference, or NULL. */
static CUmodule shared_find(CUcontext ctx, const char *src)
{
    CUmodule m = NULL;
    pthread_mutex_lock(&shared_lock);
    for (shared_module *e = shared_modules; e && !m; e = e->next)
        if (e->ctx == ctx && strcmp(e->src, src) == 0) {
            e->refs++;
            m = e->mod;
        }
    pthread_mutex_unlock(&shared_lock);
    return m;
}

/* Share module m of src (one reference, the caller's); false when out of memory. */
static bool shared_add(CUcontext ctx, const char *src, CUmodule m)
{
    shared_module *e = calloc(1, sizeof *e);
    if (!e || !(e->src = strdup(src))) {
        free(e);
        return false;
    }
    e->ctx = ctx;
    e->mod = m;
    e->refs = 1;
    pthread_mutex_lock(&shared_lock);
    e->next = shared_modules;
    shared_modules = e;
    pthread_mutex_unlock(&shared_lock);
    return true;
}

/* Drop one reference to shared module m; unload it with the last. */
static void shared_release(const mc_cuda_api *cu, CUmodule m)
{
    pthread_mutex_lock(&shared_lock);
    for (shared_module **e = &shared_modules; *e; e = &(*e)->next)
        if ((*e)->mod == m) {
            if (--(*e)->refs == 0) {
                shared_module *dead = *e;
                *e = dead->next;
                cu->cuModuleUnload(dead->mod);
                free(dead->src);
                free(dead);
            }
            break;
        }
    pthread_mutex_unlock(&shared_lock);
}

/* CUDA graphs instantiated and not yet destroyed, in every program (mc_cuda_live_graphs). */
static atomic_int live_graphs;

int mc_cuda_live_graphs(void) { return atomic_load(&live_graphs); }

#define CU_CHECK(call, what)                                                                  \
    do {                                                                                      \
        CUresult r_ = (call);                                                                 \
        if (r_ != CUDA_SUCCESS)                                                               \
            return mc_fail(MC_ERR_SYSTEM, "CUDA: %s failed: %s", what, mc_cuda_errstr(r_));   \
    } while (0)

/* ---- probe --------------------------------------------------------------------------------- */

static mc_status cuda_probe(void)
{
    if (!mc_cuda_load())
        return MC_ERR_SYSTEM;
    if (!mc_nvrtc_load())
        return MC_ERR_SYSTEM;
    return MC_OK;
}

/* What cuda_lt.c needs of the program: the library, the stream and the device addresses. */
static mc_lt_env lt_env(const cuda_state *s)
{
    return (mc_lt_env){.cu = s->cu, .lt = s->lt, .handle = s->lt_handle, .stream = s->stream,
                       .workspace = s->workspace, .scratch = s->scratch, .buf = s->buf,
                       .device = s->device_name, .sm = s->target.sm};
}

/* ---- prepare ------------------------------------------------------------------------------- */

static void cuda_release(mc_program *p);

/* The device memory of a symbolic program's shared arena (mc_shared_arena): it holds its own
 * reference to the primary context, so that it outlives every binding's program. */
typedef struct arena_owner {
    const mc_cuda_api *cu;
    CUdevice dev;
    CUcontext ctx;
} arena_owner;

static void shared_arena_release(mc_shared_arena *a)
{
    arena_owner *o = a->owner;
    if (o) {
        o->cu->cuCtxSetCurrent(o->ctx);
        if (a->addr)
            o->cu->cuMemFree((CUdeviceptr)a->addr);
        o->cu->cuDevicePrimaryCtxRelease(o->dev);
        free(o);
    }
    a->addr = 0;
    a->owner = NULL;
}

static mc_status shared_arena_new(cuda_state *s, mc_shared_arena *a)
{
    arena_owner *o = calloc(1, sizeof *o);
    if (!o)
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    *o = (arena_owner){.cu = s->cu, .dev = s->dev};
    CUresult r = s->cu->cuDevicePrimaryCtxRetain(&o->ctx, s->dev);
    if (r != CUDA_SUCCESS) {
        free(o);
        return mc_fail(MC_ERR_SYSTEM, "CUDA: retaining the context failed: %s", mc_cuda_errstr(r));
    }
    CUdeviceptr mem = 0;
    size_t bytes = ((size_t)a->bytes + 255) / 256 * 256;
    r = s->cu->cuMemAlloc(&mem, bytes ? bytes : 256);
    if (r != CUDA_SUCCESS) { /* nothing kept: the context's reference goes back */
        size_t fr = 0, tot = 0;
        s->cu->cuMemGetInfo(&fr, &tot);
        s->cu->cuDevicePrimaryCtxRelease(s->dev);
        free(o);
        a->failed = true;
        return mc_fail(MC_ERR_SYSTEM,
                       "out of GPU memory: the intermediates planned at the maxima need %.1f MiB on %s, %.1f MiB "
                       "are free (%s)",
                       (double)bytes / (1 << 20), s->device_name, (double)fr / (1 << 20), mc_cuda_errstr(r));
    }
    a->owner = o;
    a->release = shared_arena_release;
    a->addr = (uint64_t)mem;
    a->allocations++;
    return MC_OK;
}

static mc_status layout_memory(mc_program *p, cuda_state *s, size_t *scratch_bytes,
                               bool need_workspace)
{
    const kir_program *kp = p->kp;
    size_t total = 0;
    size_t *off = calloc((size_t)kp->nbuffers + 1, sizeof(size_t));
    s->buf = calloc((size_t)kp->nbuffers + 1, sizeof(CUdeviceptr));
    s->buf_bytes = calloc((size_t)kp->nbuffers + 1, sizeof(size_t));
    if (!off || !s->buf || !s->buf_bytes) {
        free(off);
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    }
    int64_t arena = kp->arena_bytes;
    for (int b = 0; b < kp->nbuffers; b++) {
        const kir_buffer *buf = &kp->buffers[b];
        int64_t bytes;
        if (mc_mul_overflows(buf->numel, (int64_t)mc_dtype_size(buf->dtype), &bytes)) {
            free(off);
            return mc_fail(MC_ERR_SYSTEM, "buffer %d is too large", b);
        }
        s->buf_bytes[b] = (size_t)bytes;
        const mc_cuda_gemm_plan *pad = s->pitched ? s->pitched[b] : NULL;
        if (pad && mc_mul_overflows(pad->pad_rows * pad->pad_ld,
                                    (int64_t)mc_dtype_size(buf->dtype), &bytes)) {
            free(off);
            return mc_fail(MC_ERR_SYSTEM, "buffer %d is too large", b);
        }
        if (buf->kind == KBUF_TEMP) {
            if (buf->offset + bytes > arena)
                arena = buf->offset + bytes;
            continue;
        }
        off[b] = total;
        total += ((size_t)bytes + 255) / 256 * 256;
        if (bytes == 0)
            total += 256;
    }
    /* A binding of a symbolic program planned at its maxima: the temps lie in the arena every
     * binding shares (mc_program.arena), allocated by the first. Temps are never padded
     * (pad_output_ld pads outputs only), so they fit in it. */
    mc_shared_arena *shared = p->arena;
    MC_ASSERT(!shared || arena <= shared->bytes);
    for (int b = 0; shared && b < kp->nbuffers; b++) /* padded rows read past A's end: in s->mem only */
        if (s->pitched && s->pitched[b] && s->pitched[b]->pad_slack > 0 && s->pitched[b]->a.buffer >= 0 &&
            kp->buffers[s->pitched[b]->a.buffer].kind == KBUF_TEMP) {
            mc_program_note(p, "symbolic dimensions: a padded GEMM reads past an intermediate's end: this binding "
                            "has an arena of its own");
            shared = NULL;
        }
    if (shared && !shared->addr) {
        mc_status st = shared_arena_new(s, shared);
        if (st != MC_OK) {
            free(off);
            return st;
        }
    }
    size_t arena_at = total;
    if (!shared)
        total += ((size_t)arena + 255) / 256 * 256;
    size_t scratch_at = total;
    total += (*scratch_bytes + 255) / 256 * 256;
    size_t ws_at = total;
    if (need_workspace)
        total += MC_LT_WORKSPACE_BYTES;
    size_t err_at = total;
    if (kp->nchecks > 0)
        total += 256;
    size_t splitk_at = total;
    total += (s->splitk_bytes + 255) / 256 * 256;
    /* padded GEMMs read a little past their weights (cuda_gemm.c): keep it inside */
    size_t slack = 0;
    for (int b = 0; b < kp->nbuffers; b++)
        if (s->pitched && s->pitched[b] && (size_t)s->pitched[b]->pad_slack > slack)
            slack = (size_t)s->pitched[b]->pad_slack;
    total += (slack + 255) / 256 * 256;
    if (total == 0)
        total = 256;
    CUresult r = s->cu->cuMemAlloc(&s->mem, total);
    if (r != CUDA_SUCCESS) {
        free(off);
        size_t fr = 0, tot = 0;
        s->cu->cuMemGetInfo(&fr, &tot);
        s->mem = 0;
        return mc_fail(MC_ERR_SYSTEM,
                       "out of GPU memory: the program needs %.1f MiB on %s, %.1f MiB are free (%s)",
                       (double)total / (1 << 20), s->device_name, (double)fr / (1 << 20),
                       mc_cuda_errstr(r));
    }
    s->mem_bytes = total;
    CUdeviceptr temps = shared ? (CUdeviceptr)shared->addr : s->mem + arena_at;
    for (int b = 0; b < kp->nbuffers; b++)
        s->buf[b] = kp->buffers[b].kind == KBUF_TEMP ? temps + (CUdeviceptr)kp->buffers[b].offset : s->mem + off[b];
    s->scratch = s->mem + scratch_at;
    s->workspace = need_workspace ? s->mem + ws_at : 0;
    free(off);
    if (s->splitk_bytes > 0) { /* zero once: every kernel that uses it leaves it zeroed */
        s->splitk = s->mem + splitk_at;
        CU_CHECK(s->cu->cuMemsetD8Async(s->splitk, 0, s->splitk_bytes, s->stream), "clearing the split-K sums");
    }
    if (kp->nchecks > 0) {
        s->gather_error = s->mem + err_at;
        CU_CHECK(s->cu->cuMemsetD8Async(s->gather_error, 0, 8, s->stream), "clearing the gathers' error word");
    }
    return MC_OK;
}

/* A generated kernel's arguments: the device addresses of its buffers as s->buf has them now
 * (again after cuda_alias re-points a buffer). */
static void bind_args(cuda_state *s, step *st, const mc_cuda_code *code)
{
    for (int i = 0; i < code->nparams; i++) {
        int b = code->param[i];
        if (b == MC_CUDA_PARAM_SIZES) { /* struct mc_sz by value: the launch copies it */
            st->args[i] = (void *)code->sizes;
            continue;
        }
        st->argv[i] = b == MC_CUDA_PARAM_SCRATCH ? s->scratch : b == MC_CUDA_PARAM_ERROR ? s->gather_error
                      : b == MC_CUDA_PARAM_SPLITK ? s->splitk : s->buf[b];
        st->args[i] = &st->argv[i];
    }
}

/* A step list's kernel arguments bound again to the buffers' addresses now (repoint). */
static void rebind_steps(cuda_state *s, step *list, int n)
{
    for (int i = 0; i < n; i++)
        if (list[i].argv)
            bind_args(s, &list[i], &s->plans[list[i].kernel].code);
}

/* A step list and the argument arrays of its steps (NULL: nothing). */
static void free_steps(step *list, int n)
{
    for (int i = 0; list && i < n; i++) {
        free(list[i].argv);
        free(list[i].args);
    }
    free(list);
}

static mc_status add_kernel_step(cuda_state *s, step *st, int ki, const mc_cuda_code *code)
{
    st->kernel = ki;
    int o = s->owner[ki]; /* the kernel whose function this one runs (itself, or an identical one) */
    snprintf(st->entry, sizeof st->entry, "%s", s->plans[o].code.entry);
    CU_CHECK(s->cu->cuModuleGetFunction(&st->fn, s->modules[o], s->plans[o].code.entry),
             "finding a generated kernel");
    st->grid[0] = (unsigned)code->grid[0];
    st->grid[1] = (unsigned)code->grid[1];
    st->grid[2] = (unsigned)code->grid[2];
    st->block = (unsigned)code->block;
    st->smem = (unsigned)code->smem;
    if (code->smem > 48 * 1024) /* beyond the default limit: the kernel asks for it (attention) */
        CU_CHECK(s->cu->cuFuncSetAttribute(st->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, code->smem),
                 "raising a kernel's shared memory limit");
    st->argv = calloc((size_t)code->nparams + 1, sizeof(CUdeviceptr));
    st->args = calloc((size_t)code->nparams + 1, sizeof(void *));
    if (!st->argv || !st->args)
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    bind_args(s, st, code);
    return MC_OK;
}

static bool ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Whether sources a and b are the same once their entry names ea and eb are taken as equal:
 * the 12 layers of a model give 12 kernels that differ only by their names (parameters are
 * pointers, bound at launch), and one compiled module serves them all. */
static bool same_but_name(const char *a, const char *ea, const char *b, const char *eb)
{
    size_t la = strlen(ea), lb = strlen(eb);
    while (*a && *b) {
        if (strncmp(a, ea, la) == 0 && strncmp(b, eb, lb) == 0 && !ident_char(a[la]) &&
            !ident_char(b[lb])) {
            a += la;
            b += lb;
            continue;
        }
        if (*a++ != *b++)
            return false;
    }
    return *a == *b;
}

/* MINIC_CUDA_TRACE=1: where prepare's time goes, as the program's notes (a developer's
 * switch; the command prints notes on stderr) */
static void trace(mc_program *p, const char *stage, double *t)
{
    static atomic_int trace_on = -1; /* programs prepare on several threads at once */
    int on = atomic_load(&trace_on);
    if (on < 0) {
        on = getenv("MINIC_CUDA_TRACE") != NULL;
        atomic_store(&trace_on, on);
    }
    double before = *t;
    mc_program_phase(p, stage, t); /* the compile's phases (the profile, minic run --verbose) */
    if (on)
        mc_program_note(p, "cuda prepare: %-24s %8.1f ms", stage, *t - before);
}

/* NVRTC's progress notes, into the program's (backends/cuda/cuda_nvrtc.c calls this). */
static void compile_note(void *program, const char *note)
{
    mc_program_note(program, "%s", note);
}

static mc_status cuda_prepare(mc_program *p)
{
    double t0 = mc_now_ms();
    cuda_state *s = calloc(1, sizeof *s);
    if (!s)
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    p->state = s;
    const kir_program *kp = p->kp;
    s->cu = mc_cuda_load();
    if (!s->cu)
        return MC_ERR_SYSTEM;
    const mc_cuda_api *cu = s->cu;
    int ndev = 0;
    CU_CHECK(cu->cuDeviceGetCount(&ndev), "counting the GPUs");
    s->ordinal = p->opt.device;
    if (s->ordinal < 0 || s->ordinal >= ndev)
        return mc_fail(MC_ERR_INPUT, "CUDA: there is no GPU %d: this machine has %d%s",
                       s->ordinal, ndev, p->nranks > 0 ? " (one per rank of --devices)" : "");
    CU_CHECK(cu->cuDeviceGet(&s->dev, s->ordinal), "getting the device");
    CU_CHECK(cu->cuDevicePrimaryCtxRetain(&s->ctx, s->dev), "creating a context");
    s->ctx_retained = true;
    CU_CHECK(cu->cuCtxSetCurrent(s->ctx), "making the context current");
    int major = 0, minor = 0, sms = 0;
    cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, s->dev);
    cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, s->dev);
    cu->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, s->dev);
    cu->cuDeviceGetName(s->device_name, sizeof s->device_name, s->dev);
    s->target.sm = major * 10 + minor;
    s->target.num_sms = sms > 0 ? sms : 1;
    const char *e = getenv("MINIC_CUDA_PW_UNROLL");
    s->target.pw_unroll = e ? atoi(e) : 0;
    e = getenv("MINIC_CUDA_BLOCKS_PER_SM");
    s->target.blocks_per_sm = e ? atoi(e) : 0;
    e = getenv("MINIC_CUDA_RED_CHUNKS");
    s->target.red_chunks = e ? atoi(e) : 0;
    CU_CHECK(cu->cuStreamCreate(&s->stream, CU_STREAM_NON_BLOCKING), "creating a stream");
    trace(p, "driver and context", &t0);

    /* plan with the real alignments: program buffers 256-aligned, temps at their offsets */
    int *align = calloc((size_t)kp->nbuffers + 1, sizeof(int));
    if (!align)
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    mc_cuda_buffer_align(kp, align);
    mc_status st;
    if (p->sized) { /* one binding of kernels compiled once: their sources hold no binding */
        char why[200] = "";
        st = mc_cuda_plan_program_sized(kp, p->sized, p->sized_values, &s->target, align, &s->plans,
                                        &p->kernels_specialized, why, sizeof why);
        if (st == MC_OK && p->kernels_specialized > 0)
            mc_program_note(p, "symbolic dimensions: %d kernel%s compiled for this binding (%s)",
                            p->kernels_specialized, p->kernels_specialized == 1 ? "" : "s", why);
    } else {
        st = mc_cuda_plan_program(kp, &s->target, align, &s->plans);
    }
    if (st != MC_OK) {
        free(align);
        return st;
    }
    trace(p, "plan and render", &t0);
    size_t scratch = 0;
    bool any_lt = false;
    for (int i = 0; i < kp->nkernels; i++) {
        const mc_cuda_kernel_plan *pl = &s->plans[i];
        if (pl->is_gemm && pl->gemm.conv && (size_t)pl->gemm.conv_ws_bytes > s->splitk_bytes)
            s->splitk_bytes = (size_t)pl->gemm.conv_ws_bytes;
        if (pl->is_gemm && pl->gemm.use_lt) {
            any_lt = true;
            size_t bytes = (size_t)pl->gemm.scratch_elems * mc_dtype_size(pl->gemm.scratch_dtype);
            if (!pl->gemm.full && bytes > scratch)
                scratch = bytes;
        }
    }
    if (any_lt) {
        s->lt = mc_lt_load();
        if (!s->lt) {
            free(align);
            return MC_ERR_SYSTEM;
        }
        if (s->lt->cublasLtCreate(&s->lt_handle) != CUBLAS_STATUS_SUCCESS) {
            free(align);
            return mc_fail(MC_ERR_SYSTEM, "cuBLASLt: creating a handle failed");
        }
    }
    trace(p, "cuBLASLt load", &t0);
    s->pitched = calloc((size_t)kp->nbuffers + 1, sizeof *s->pitched);
    if (!s->pitched) {
        free(align);
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    }
    for (int i = 0; i < kp->nkernels; i++) {
        const mc_cuda_kernel_plan *pl = &s->plans[i];
        if (pl->is_gemm && pl->gemm.use_lt && pl->gemm.pad_buffer >= 0)
            s->pitched[pl->gemm.pad_buffer] = &pl->gemm;
    }
    st = layout_memory(p, s, &scratch, any_lt);
    trace(p, "device allocation", &t0);
    if (st != MC_OK) {
        free(align);
        return st;
    }
    /* cuBLASLt descriptors and algorithms; GEMMs it can't run become generated kernels */
    s->gemms = calloc((size_t)kp->nkernels + 1, sizeof(mc_lt_gemm));
    if (!s->gemms) {
        free(align);
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    }
    for (int i = 0; i < kp->nkernels && st == MC_OK; i++) {
        mc_cuda_kernel_plan *pl = &s->plans[i];
        if (!pl->is_gemm || !pl->gemm.use_lt)
            continue;
        bool ok;
        mc_lt_env env = lt_env(s);
        const mc_lt_gemm *like = NULL;
        for (int j = 0; j < i && !like; j++)
            if (s->plans[j].is_gemm && s->plans[j].gemm.use_lt &&
                mc_cuda_gemm_same_shape(&s->plans[j].gemm, &pl->gemm))
                like = &s->gemms[j];
        st = mc_lt_gemm_setup(&env, &kp->kernels[i], &pl->gemm, &s->gemms[i], like, &ok);
        if (st == MC_OK && !ok) {
            mc_lt_gemm_free(s->lt, &s->gemms[i]);
            pl->gemm.use_lt = false;
            if (pl->gemm.pad_buffer >= 0) /* the generated GEMM writes the rows unpadded */
                s->pitched[pl->gemm.pad_buffer] = NULL;
            pl->gemm.pad_buffer = -1;
            mc_cuda_code_free(&pl->code);
            char why[160] = "";
            if (p->sized) /* the tiled GEMM, its sizes read when it runs */
                st = mc_cuda_render_sized(p->sized, p->sized_values, i, &s->target, align, &pl->gemm, &pl->code, why,
                                          sizeof why);
            if (!p->sized || (st == MC_OK && why[0]))
                st = mc_cuda_render(kp, i, &s->target, align, &pl->gemm, &pl->code);
            pl->has_code = st == MC_OK;
            if (st == MC_OK && why[0]) {
                p->kernels_specialized++; /* the tiled GEMM with this binding's sizes */
                mc_program_note(p, "symbolic dimensions: kernel %s compiled for this binding (cuBLASLt has no "
                                "algorithm for it; %s)", kp->kernels[i].name, why);
            }
        }
    }
    free(align);
    if (st != MC_OK)
        return st;
    trace(p, "cuBLASLt setup", &t0);

    /* compile every generated kernel (parallel, cached) and load the modules */
    const char **srcs = calloc((size_t)kp->nkernels + 1, sizeof(char *));
    const char **entries = calloc((size_t)kp->nkernels + 1, sizeof(char *));
    int *which = calloc((size_t)kp->nkernels + 1, sizeof(int));
    void **cubins = calloc((size_t)kp->nkernels + 1, sizeof(void *));
    size_t *sizes = calloc((size_t)kp->nkernels + 1, sizeof(size_t));
    s->modules = calloc((size_t)kp->nkernels + 1, sizeof(CUmodule));
    s->shared = calloc((size_t)kp->nkernels + 1, sizeof(bool));
    s->owner = calloc((size_t)kp->nkernels + 1, sizeof(int));
    if (!srcs || !entries || !which || !cubins || !sizes || !s->modules || !s->shared || !s->owner) {
        st = mc_fail(MC_ERR_SYSTEM, "out of memory");
        goto compiled;
    }
    /* identical kernels (but for their names) share the first one's module */
    for (int i = 0; i < kp->nkernels; i++) {
        s->owner[i] = i;
        const mc_cuda_code *ci = &s->plans[i].code;
        for (int j = 0; j < i && s->plans[i].has_code; j++) {
            const mc_cuda_code *cj = &s->plans[j].code;
            /* the preludes are the same text (checked once, then skipped) */
            if (s->plans[j].has_code && s->owner[j] == j && ci->body == cj->body &&
                memcmp(ci->src.data, cj->src.data, ci->body) == 0 &&
                same_but_name(ci->src.data + ci->body, ci->entry, cj->src.data + cj->body,
                              cj->entry)) {
                s->owner[i] = j;
                break;
            }
        }
    }
    int n = 0;
    for (int i = 0; i < kp->nkernels; i++)
        if (s->plans[i].has_code && s->owner[i] == i) {
            if (p->sized && (s->modules[i] = shared_find(s->ctx, s->plans[i].code.src.data))) {
                s->shared[i] = true; /* another binding's program loaded it */
                continue;
            }
            srcs[n] = s->plans[i].code.src.data;
            entries[n] = s->plans[i].code.entry;
            which[n++] = i;
        }
    int compiled = 0;
    /* The cache hands out only verified cubins; one the driver refuses all the same (written
     * for another driver, say) must not fail every later run: the program's entries are
     * evicted and everything is compiled afresh, once. */
    for (int attempt = 0; attempt < 2; attempt++) {
        st = mc_cuda_compile(srcs, entries, n, s->target.sm, compile_note, p, cubins, sizes,
                             &compiled);
        p->kernels_compiled = compiled;
        trace(p, compiled ? "NVRTC compile" : "kernel cache", &t0);
        if (st != MC_OK)
            break;
        for (int j = 0; j < n && st == MC_OK; j++) {
            CUresult r = cu->cuModuleLoadData(&s->modules[which[j]], cubins[j]);
            if (r != CUDA_SUCCESS)
                st = mc_fail(MC_ERR_SYSTEM, "CUDA: loading kernel %s failed: %s", entries[j],
                             mc_cuda_errstr(r));
        }
        trace(p, "module load", &t0);
        for (int j = 0; j < n && st == MC_OK && p->sized; j++) /* for the other bindings */
            s->shared[which[j]] = shared_add(s->ctx, srcs[j], s->modules[which[j]]);
        if (st == MC_OK || compiled == n || attempt > 0)
            break;
        for (int j = 0; j < n; j++) {
            if (s->modules[which[j]])
                cu->cuModuleUnload(s->modules[which[j]]);
            s->modules[which[j]] = NULL;
            free(cubins[j]);
            cubins[j] = NULL;
        }
        mc_cuda_cache_evict(srcs, n, s->target.sm);
    }
compiled:
    if (cubins)
        for (int j = 0; j < kp->nkernels; j++)
            free(cubins[j]);
    free(srcs);
    free(entries);
    free(which);
    free(cubins);
    free(sizes);
    if (st != MC_OK)
        return st;

    /* the step list */
    s->steps = calloc((size_t)kp->nkernels * 2 + 1, sizeof(step));
    s->prep_steps = calloc((size_t)kp->nprep * 2 + 1, sizeof(step));
    if (!s->steps || !s->prep_steps)
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    for (int i = 0; i < kp->nkernels && st == MC_OK; i++) {
        mc_cuda_kernel_plan *pl = &s->plans[i];
        bool prep = kp->kernels[i].prep; /* never a collective */
        step *list = prep ? s->prep_steps : s->steps;
        int *n = prep ? &s->nprep_steps : &s->nsteps;
        if (kp->kernels[i].category == KIR_COLLECTIVE) {
            step *c = &s->steps[s->nsteps++];
            c->kernel = i;
            c->is_coll = true;
            snprintf(c->entry, sizeof c->entry, "ncclAllReduce");
            continue;
        }
        if (pl->is_gemm && pl->gemm.use_lt) {
            step *g = &list[(*n)++];
            g->kernel = i;
            g->is_gemm = true;
            g->gemm = &s->gemms[i];
            g->plan = &pl->gemm;
        }
        if (pl->has_code)
            st = add_kernel_step(s, &list[(*n)++], i, &pl->code);
    }
    trace(p, "launch steps", &t0);
    return st;
}

/* ---- execution ----------------------------------------------------------------------------- */

/* A collective: NCCL's all-reduce over the ranks, or a copy where the program has no
 * communicator (a graph with allreduce compiled on its own: the sum over one shard). */
static mc_status run_collective(cuda_state *s, const kir_kernel *k, const kir_program *kp)
{
    const kir_view *vi = &k->views[k->coll.in], *vo = &k->views[k->coll.out];
    mc_dtype dt = kp->buffers[vi->buffer].dtype;
    size_t es = mc_dtype_size(dt);
    if (s->pitched[vi->buffer] || s->pitched[vo->buffer])
        return mc_fail(MC_ERR_SYSTEM, "CUDA: kernel %s: an allreduce of a GEMM's padded rows "
                       "is not supported", k->name);
    CUdeviceptr in = s->buf[vi->buffer] + (CUdeviceptr)vi->offset * es;
    CUdeviceptr out = s->buf[vo->buffer] + (CUdeviceptr)vo->offset * es;
    if (s->comm)
        return mc_nccl_allreduce(s->comm, in, out, k->coll.count, dt, s->stream);
    if (in == out)
        return MC_OK;
    CU_CHECK(s->cu->cuMemcpyDtoDAsync(out, in, (size_t)k->coll.count * es, s->stream),
             "copying an allreduce's value");
    return MC_OK;
}

static mc_status run_step(cuda_state *s, const step *st, const kir_program *kp)
{
    if (st->is_coll)
        return run_collective(s, &kp->kernels[st->kernel], kp);
    if (st->is_gemm) {
        mc_lt_env env = lt_env(s);
        return mc_lt_gemm_launch(&env, st->plan, st->gemm, kp->kernels[st->kernel].name);
    }
    CUresult r = s->cu->cuLaunchKernel(st->fn, st->grid[0], st->grid[1], st->grid[2], st->block, 1,
                                       1, st->smem, s->stream, st->args, NULL);
    if (r != CUDA_SUCCESS)
        return mc_fail(MC_ERR_SYSTEM, "CUDA: launching kernel %s failed: %s",
                       kp->kernels[st->kernel].name, mc_cuda_errstr(r));
    return MC_OK;
}

static mc_status run_steps(cuda_state *s, const kir_program *kp)
{
    for (int i = 0; i < s->nsteps; i++) {
        mc_status st = run_step(s, &s->steps[i], kp);
        if (st != MC_OK)
            return st;
    }
    return MC_OK;
}

/* Capture the steps as one graph. On failure: the reason in `why`, the stream left usable. */
static bool capture(cuda_state *s, const kir_program *kp, char *why, size_t size)
{
    const mc_cuda_api *cu = s->cu;
    CUresult r = cu->cuStreamBeginCapture(s->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    if (r != CUDA_SUCCESS) {
        snprintf(why, size, "beginning the capture failed: %s", mc_cuda_errstr(r));
        return false;
    }
    mc_status st = run_steps(s, kp);
    CUgraph graph = NULL;
    r = cu->cuStreamEndCapture(s->stream, &graph);
    if (st != MC_OK || r != CUDA_SUCCESS || !graph) {
        snprintf(why, size, "%s", st != MC_OK ? mc_error_message() : mc_cuda_errstr(r));
        if (graph)
            cu->cuGraphDestroy(graph);
        return false;
    }
    r = cu->cuGraphInstantiate(&s->gexec, graph, 0);
    cu->cuGraphDestroy(graph);
    if (r != CUDA_SUCCESS) {
        s->gexec = NULL;
        snprintf(why, size, "instantiating the graph failed: %s", mc_cuda_errstr(r));
        return false;
    }
    atomic_fetch_add(&live_graphs, 1);
    return true;
}

static mc_status sync_stream(cuda_state *s, const char *what)
{
    CUresult r = s->cu->cuStreamSynchronize(s->stream);
    if (r != CUDA_SUCCESS)
        return mc_fail(MC_ERR_SYSTEM, "CUDA: %s failed: %s", what, mc_cuda_errstr(r));
    return MC_OK;
}

/* One execution of the program's steps (graph replay when captured). */
static mc_status execute(mc_program *p, cuda_state *s)
{
    if (s->gexec) {
        CUresult r = s->cu->cuGraphLaunch(s->gexec, s->stream);
        if (r != CUDA_SUCCESS)
            return mc_fail(MC_ERR_SYSTEM, "CUDA: replaying the program's graph failed: %s",
                           mc_cuda_errstr(r));
        return MC_OK;
    }
    mc_status st = run_steps(s, p->kp);
    if (st != MC_OK)
        return st;
    if (!s->graph_done && p->opt.cuda_graph != 0) {
        /* the first execution was the warm-up; capture for the next ones */
        st = sync_stream(s, "running the program");
        if (st != MC_OK)
            return st;
        s->graph_done = true;
        char why[512];
        if (!capture(s, p->kp, why, sizeof why)) {
            if (p->opt.cuda_graph == 1)
                return mc_fail(MC_ERR_SYSTEM, "the program cannot be captured as a CUDA graph: %s",
                               why);
            mc_program_note(p, "running without a CUDA graph: %s", why);
        }
    }
    return MC_OK;
}

/* Queue the copy of buffer b from the device into p->host[b] (an output after a run, or an
 * input given on the device, for mc_program_save_inputs). */
static mc_status queue_copy_out(mc_program *p, cuda_state *s, int b)
{
    const mc_cuda_gemm_plan *pad = s->pitched[b];
    if (pad) { /* rows padded on the device: copy the rows, drop the padding */
        size_t es = mc_dtype_size(p->kp->buffers[b].dtype);
        CUDA_MEMCPY2D c = {.srcMemoryType = CU_MEMORYTYPE_DEVICE,
                           .srcDevice = s->buf[b],
                           .srcPitch = (size_t)pad->pad_ld * es,
                           .dstMemoryType = CU_MEMORYTYPE_HOST,
                           .dstHost = p->host[b],
                           .dstPitch = (size_t)pad->pad_cols * es,
                           .WidthInBytes = (size_t)pad->pad_cols * es,
                           .Height = (size_t)pad->pad_rows};
        CU_CHECK(s->cu->cuMemcpy2DAsync(&c, s->stream), "copying an output from the GPU");
        return MC_OK;
    }
    CU_CHECK(s->cu->cuMemcpyDtoHAsync(p->host[b], s->buf[b], s->buf_bytes[b], s->stream),
             "copying an output from the GPU");
    return MC_OK;
}

static mc_status upload(mc_program *p, cuda_state *s)
{
    const kir_program *kp = p->kp;
    for (int b = 0; b < kp->nbuffers; b++) {
        kir_buffer_kind k = kp->buffers[b].kind;
        if (k != KBUF_INPUT && k != KBUF_PARAM)
            continue;
        if (!p->host[b] || (p->stale && p->stale[b]) || (s->uploaded_once && !p->dirty[b]) ||
            (s->mapped && s->mapped[b]))
            continue; /* stale: given on the device (cuda_copy_output), the host copy is old;
                         mapped: the kernels read the host memory itself */
        CU_CHECK(s->cu->cuMemcpyHtoDAsync(s->buf[b], p->host[b], s->buf_bytes[b], s->stream),
                 "copying an input to the GPU");
        p->dirty[b] = false;
    }
    s->uploaded_once = true;
    return MC_OK;
}

/* Queue one execution on the program's stream: the dirty inputs' uploads, the steps (or the
 * graph's replay), and for a program made by hand (stale NULL) the outputs' copies back; the
 * outputs are marked stale otherwise. Returns once it is queued (mc_program_run_async); the
 * device's own errors come from cuda_wait. */
static mc_status cuda_launch(mc_program *p)
{
    cuda_state *s = p->state;
    CU_CHECK(s->cu->cuCtxSetCurrent(s->ctx), "making the context current");
    mc_status st = upload(p, s);
    if (st == MC_OK)
        st = execute(p, s);
    if (st != MC_OK) {
        s->cu->cuStreamSynchronize(s->stream);
        return st;
    }
    const kir_program *kp = p->kp;
    for (int b = 0; b < kp->nbuffers; b++) {
        if (kp->buffers[b].kind != KBUF_OUTPUT || !p->host[b] || (s->mapped && s->mapped[b]))
            continue; /* mapped: the kernels wrote the caller's host memory itself */
        if (p->stale) { /* read back when asked for (runtime/program.c: fresh, cuda_download) */
            p->stale[b] = true;
            continue;
        }
        if ((st = queue_copy_out(p, s, b)) != MC_OK) /* a program made by hand (tests) */
            return st;
    }
    return MC_OK;
}

/* Wait for every queued execution; then the gathers' error word, which holds the first check
 * that failed in any of them since the last wait (the kernels never overwrite it). */
static mc_status cuda_wait(mc_program *p)
{
    cuda_state *s = p->state;
    const kir_program *kp = p->kp;
    mc_status st;
    CU_CHECK(s->cu->cuCtxSetCurrent(s->ctx), "making the context current");
    if (!s->gather_error)
        return sync_stream(s, "running the program");
    CU_CHECK(s->cu->cuMemcpyDtoHAsync(s->gather_seen, s->gather_error, sizeof s->gather_seen, s->stream),
             "reading the gathers' error word");
    if ((st = sync_stream(s, "running the program")) != MC_OK || s->gather_seen[0] == 0)
        return st;
    /* an index out of range: clear the word for the next run, then say which */
    CU_CHECK(s->cu->cuMemsetD8Async(s->gather_error, 0, 8, s->stream), "clearing the gathers' error word");
    if ((st = sync_stream(s, "running the program")) != MC_OK)
        return st;
    return kir_check_fail(kp, p->graph, s->gather_seen[0] - 1, s->gather_seen[1]);
}

/* The prep kernels, queued on the program's stream after the uploads of what changed (the
 * params they read), outside any graph: the run queued next on the stream reads their results. */
static mc_status cuda_prep(mc_program *p)
{
    cuda_state *s = p->state;
    CU_CHECK(s->cu->cuCtxSetCurrent(s->ctx), "making the context current");
    mc_status st = upload(p, s);
    for (int i = 0; i < s->nprep_steps && st == MC_OK; i++)
        st = run_step(s, &s->prep_steps[i], p->kp);
    if (st != MC_OK)
        s->cu->cuStreamSynchronize(s->stream);
    return st;
}

static mc_status cuda_run(mc_program *p)
{
    mc_status st = cuda_launch(p);
    return st == MC_OK ? cuda_wait(p) : st;
}

/* mc_program_feed_back in place (backends/backend.h, alias): output buffer ob's address becomes
 * input buffer ib's (on) or its own again (off, after a copy of ib's memory into it, so that
 * the output keeps the last run's value). The kernels' arguments are remade from s->buf, and a
 * captured graph, which holds the old addresses, is dropped: the next run executes the steps
 * and captures again. cuBLASLt and collective steps read s->buf at each launch. The runtime
 * has waited for the stream (nothing queued reads the old addresses). */
/* Buffer b at device address `to` (0: its own memory again, after a copy of what it points at
 * now into it); then the launch arguments and the graph, as above. */
static mc_status repoint(mc_program *p, cuda_state *s, int b, CUdeviceptr to)
{
    const kir_program *kp = p->kp;
    CU_CHECK(s->cu->cuCtxSetCurrent(s->ctx), "making the context current");
    if (!s->home && !(s->home = calloc((size_t)kp->nbuffers + 1, sizeof *s->home)))
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    if (!s->home[b])
        s->home[b] = s->buf[b];
    if (to) {
        s->buf[b] = to;
    } else {
        if (s->buf[b] != s->home[b])
            CU_CHECK(s->cu->cuMemcpyDtoDAsync(s->home[b], s->buf[b], s->buf_bytes[b], s->stream),
                     "copying a buffer back into the program's own memory on the GPU");
        s->buf[b] = s->home[b];
    }
    rebind_steps(s, s->steps, s->nsteps);
    rebind_steps(s, s->prep_steps, s->nprep_steps);
    mc_status st = sync_stream(s, "re-pointing an output on the GPU");
    if (st != MC_OK)
        return st;
    if (s->gexec) {
        s->cu->cuGraphExecDestroy(s->gexec);
        s->gexec = NULL;
        atomic_fetch_sub(&live_graphs, 1);
    }
    s->graph_done = false;
    return MC_OK;
}

static mc_status cuda_alias(mc_program *p, int ob, int ib, bool on, bool *done)
{
    cuda_state *s = p->state;
    *done = false;
    if (!s || s->pitched[ob] || s->pitched[ib] || s->buf_bytes[ob] != s->buf_bytes[ib])
        return MC_OK; /* padded rows: the runtime copies instead */
    mc_status st = repoint(p, s, ob, on ? s->buf[ib] : 0);
    *done = st == MC_OK;
    return st;
}

/* mc_program_bind_memory with a device pointer (backends/backend.h, bind_device). */
static mc_status cuda_bind_device(mc_program *p, int b, uint64_t addr)
{
    cuda_state *s = p->state;
    if (s->pitched[b])
        return mc_fail(MC_ERR_INPUT, "CUDA: this buffer is laid out with padded rows on the GPU (a GEMM's "
                       "operand): it cannot be bound to the caller's device memory; bind host memory instead");
    return repoint(p, s, b, (CUdeviceptr)addr);
}

/* Host memory page-locked and mapped for the GPU (cuda_map_host), counted per range: two buffers
 * (of one program or of several) may map the same memory, and it is unregistered with the last.
 * Memory the caller registered (or allocated page-locked) itself is used as it is and never
 * unregistered here. Registered PORTABLE: mapped for every context. */
typedef struct host_mapping {
    void *data;
    size_t bytes;
    int refs;
    struct host_mapping *next;
} host_mapping;
static pthread_mutex_t mapping_lock = PTHREAD_MUTEX_INITIALIZER;
static host_mapping *mappings;

/* Map [data, data + bytes) for the GPU: its device address in *dev, or *dev 0 and why[] when the
 * driver refuses. */
static void mapping_take(const mc_cuda_api *cu, void *data, size_t bytes, CUdeviceptr *dev, char *why, size_t size)
{
    *dev = 0;
    pthread_mutex_lock(&mapping_lock);
    host_mapping *m = mappings;
    while (m && !(m->data == data && m->bytes == bytes))
        m = m->next;
    bool ours = m != NULL;
    /* pages another mapping of ours holds: refused before the driver is asked, so that the rule
     * minic.h states holds whatever a driver does with a second range in a locked page */
    uintptr_t lo = (uintptr_t)data & ~(uintptr_t)4095, hi = ((uintptr_t)data + bytes + 4095) & ~(uintptr_t)4095;
    for (host_mapping *e = mappings; e && !m; e = e->next) {
        uintptr_t elo = (uintptr_t)e->data & ~(uintptr_t)4095;
        uintptr_t ehi = ((uintptr_t)e->data + e->bytes + 4095) & ~(uintptr_t)4095;
        if (lo < ehi && elo < hi) {
            snprintf(why, size, "its pages overlap other host memory mapped for a binding (%p, %zu bytes): "
                     "bind memory in pages of its own", e->data, e->bytes);
            pthread_mutex_unlock(&mapping_lock);
            return;
        }
    }
    if (!m) {
        CUresult r = cu->cuMemHostRegister(data, bytes, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
        if (r == CUDA_SUCCESS && (m = calloc(1, sizeof *m))) {
            *m = (host_mapping){.data = data, .bytes = bytes, .next = mappings};
            mappings = m;
            ours = true;
        } else if (r == CUDA_SUCCESS) { /* out of memory for the record: give it back */
            cu->cuMemHostUnregister(data);
            snprintf(why, size, "out of memory");
            pthread_mutex_unlock(&mapping_lock);
            return;
        } else if (r != CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
            snprintf(why, size, "cuMemHostRegister refused it: %s", mc_cuda_errstr(r));
            pthread_mutex_unlock(&mapping_lock);
            return;
        } /* else page-locked before by the caller: used as it is */
    }
    CUresult r = cu->cuMemHostGetDevicePointer(dev, data, 0);
    if (r != CUDA_SUCCESS) {
        *dev = 0;
        snprintf(why, size, "%s: %s", ours ? "cuMemHostGetDevicePointer failed"
                                           : "it was page-locked before, without a mapping for the GPU",
                 mc_cuda_errstr(r));
    } else if (*dev % 256) {
        *dev = 0;
        snprintf(why, size, "its address for the GPU is not 256-byte aligned");
    }
    if (*dev && m)
        m->refs++;
    if (!*dev && m && m->refs == 0) { /* registered just now and not usable: undo it */
        cu->cuMemHostUnregister(data);
        for (host_mapping **e = &mappings; *e; e = &(*e)->next)
            if (*e == m) {
                *e = m->next;
                free(m);
                break;
            }
    }
    pthread_mutex_unlock(&mapping_lock);
}

/* One mapping of data fewer; unregistered with the last (if it was registered here). */
static void mapping_drop(const mc_cuda_api *cu, void *data)
{
    pthread_mutex_lock(&mapping_lock);
    for (host_mapping **e = &mappings; *e; e = &(*e)->next)
        if ((*e)->data == data) {
            if (--(*e)->refs == 0) {
                host_mapping *dead = *e;
                *e = dead->next;
                cu->cuMemHostUnregister(dead->data);
                free(dead);
            }
            break;
        }
    pthread_mutex_unlock(&mapping_lock);
}

/* mc_program_bind_memory with MC_MEMORY_HOST_MAPPED (backends/backend.h, map_host): buffer b at
 * the caller's host memory mapped for the GPU, as bind_device points it at device memory. */
static mc_status cuda_map_host(mc_program *p, int b, void *data, size_t bytes, bool *done, char *why, size_t why_size)
{
    cuda_state *s = p->state;
    *done = false;
    CU_CHECK(s->cu->cuCtxSetCurrent(s->ctx), "making the context current");
    if (!data) { /* the buffer's own memory again (holding the value), the memory unmapped */
        if (!s->mapped || !s->mapped[b])
            return MC_OK;
        mc_status st = repoint(p, s, b, 0);
        if (st != MC_OK) /* the kernels may still read it: stays mapped (released with the program) */
            return st;
        mapping_drop(s->cu, s->mapped[b]);
        s->mapped[b] = NULL;
        *done = true;
        return MC_OK;
    }
    if (s->pitched[b]) {
        snprintf(why, why_size, "the buffer is laid out with padded rows on the GPU, a GEMM operand's");
        return MC_OK;
    }
    if (bytes != s->buf_bytes[b]) {
        snprintf(why, why_size, "%zu bytes, the buffer has %zu", bytes, s->buf_bytes[b]);
        return MC_OK;
    }
    if (!s->mapped && !(s->mapped = calloc((size_t)p->kp->nbuffers + 1, sizeof *s->mapped)))
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    if (s->mapped[b]) { /* mapped before: the runtime ends a binding first, but be safe */
        mapping_drop(s->cu, s->mapped[b]);
        s->mapped[b] = NULL;
    }
    CUdeviceptr dev = 0;
    mapping_take(s->cu, data, bytes, &dev, why, why_size);
    if (!dev)
        return MC_OK;
    mc_status st = repoint(p, s, b, dev);
    if (st != MC_OK) {
        mapping_drop(s->cu, data);
        return st;
    }
    s->mapped[b] = data;
    *done = true;
    return MC_OK;
}

/* mc_program_set_from_output (backends/backend.h, copy_output): src's output buffer ob into
 * dst's input buffer ib, the very buffer dst's steps and captured graph read, on dst's stream,
 * so that dst's next run (its uploads, then its kernels or graph replay, all on that stream)
 * comes after it. src's last run is complete (cuda_run waits for its stream). A copy between
 * two programs is waited for here: src runs on its own stream and may overwrite its output as
 * soon as this returns. A program feeding itself needs no wait: its next run is queued behind
 * the copy on the same stream. Programs in different contexts (GPUs): not done here. */
static mc_status cuda_copy_output(mc_program *dst, int ib, mc_program *src, int ob, bool *done)
{
    cuda_state *d = dst->state, *s = src->state;
    *done = false;
    if (!d || !s || d->ctx != s->ctx || (d->pitched && d->pitched[ib]) || d->buf_bytes[ib] != s->buf_bytes[ob])
        return MC_OK; /* through the host */
    *done = d->buf[ib] == s->buf[ob]; /* an output fed back in place (cuda_alias): it is the input */
    if (*done)
        return MC_OK;
    const mc_cuda_api *cu = d->cu;
    CU_CHECK(cu->cuCtxSetCurrent(d->ctx), "making the context current");
    const mc_cuda_gemm_plan *pad = s->pitched ? s->pitched[ob] : NULL;
    if (pad) { /* src's rows padded on the device: copy the rows, drop the padding */
        size_t es = mc_dtype_size(src->kp->buffers[ob].dtype);
        CUDA_MEMCPY2D c = {.srcMemoryType = CU_MEMORYTYPE_DEVICE,
                           .srcDevice = s->buf[ob],
                           .srcPitch = (size_t)pad->pad_ld * es,
                           .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                           .dstDevice = d->buf[ib],
                           .dstPitch = (size_t)pad->pad_cols * es,
                           .WidthInBytes = (size_t)pad->pad_cols * es,
                           .Height = (size_t)pad->pad_rows};
        CU_CHECK(cu->cuMemcpy2DAsync(&c, d->stream), "copying an output to an input on the GPU");
    } else {
        CU_CHECK(cu->cuMemcpyDtoDAsync(d->buf[ib], s->buf[ob], d->buf_bytes[ib], d->stream),
                 "copying an output to an input on the GPU");
    }
    if (dst != src) {
        mc_status st = sync_stream(d, "copying an output to an input on the GPU");
        if (st != MC_OK)
            return st;
    }
    *done = true;
    return MC_OK;
}

/* A stale buffer back into p->host[b]: an output after a run, an input given on the device. */
static mc_status cuda_download(mc_program *p, int b)
{
    cuda_state *s = p->state;
    CU_CHECK(s->cu->cuCtxSetCurrent(s->ctx), "making the context current");
    if (s->mapped && s->mapped[b] == p->host[b])
        return sync_stream(s, "running the program"); /* the kernels wrote host[b] itself */
    mc_status st = queue_copy_out(p, s, b);
    return st == MC_OK ? sync_stream(s, "reading a buffer back from the GPU") : st;
}

/* The run before a timing or a profile: the prep kernels where a param changed (their uploads
 * included), then one execution, which captures the CUDA graph after the first. */
static mc_status warm_up(mc_program *p)
{
    mc_status st = mc_program_prep_params(p);
    return st == MC_OK ? cuda_run(p) : st;
}

static mc_status cuda_time(mc_program *p, int iters, double *median_us)
{
    cuda_state *s = p->state;
    if (iters < 1)
        iters = 1;
    mc_status st = warm_up(p);
    if (st != MC_OK)
        return st;
    const mc_cuda_api *cu = s->cu;
    enum { BATCH = 128 };
    CUevent ev[BATCH + 1];
    for (int i = 0; i <= BATCH; i++)
        CU_CHECK(cu->cuEventCreate(&ev[i], CU_EVENT_DEFAULT), "creating an event");
    double *t = calloc((size_t)iters, sizeof(double));
    if (!t)
        st = mc_fail(MC_ERR_SYSTEM, "out of memory");
    /* back-to-back executions, an event between each: device time per execution */
    for (int done = 0; done < iters && st == MC_OK;) {
        int n = iters - done < BATCH ? iters - done : BATCH;
        cu->cuEventRecord(ev[0], s->stream);
        for (int i = 0; i < n && st == MC_OK; i++) {
            st = execute(p, s);
            cu->cuEventRecord(ev[i + 1], s->stream);
        }
        if (st == MC_OK)
            st = sync_stream(s, "timing the program");
        for (int i = 0; i < n && st == MC_OK; i++) {
            float ms = 0;
            cu->cuEventElapsedTime(&ms, ev[i], ev[i + 1]);
            t[done + i] = (double)ms * 1000.0;
        }
        done += n;
    }
    if (st == MC_OK)
        *median_us = mc_median(t, iters);
    free(t);
    for (int i = 0; i <= BATCH; i++)
        cu->cuEventDestroy(ev[i]);
    return st;
}

/* Which step each CUPTI record of one run belongs to: the generated kernels by name, in launch
 * order; the records between two generated kernels (cuBLASLt's, one or more per call) to the
 * GEMM steps there, `calls` records each, the last taking the rest. -1 per record where the
 * records do not follow the program (then the caller falls back to events). */
/* Does a record of function `name` belong to step a or, past collectives that leave no record
 * (NCCL with one rank copies, it launches nothing), to the generated kernel after them? */
static bool starts_at(const cuda_state *s, int a, const char *name)
{
    for (; a < s->nsteps; a++) {
        if (!s->steps[a].is_coll)
            return !s->steps[a].is_gemm && !strcmp(name, s->steps[a].entry);
        if (strstr(name, "nccl"))
            return true;
    }
    return false;
}

static bool match_run(const cuda_state *s, const mc_cupti_kernel *rec, int n, int *step_of)
{
    int c = 0, got = 0; /* the step expected, records it has had */
    for (int r = 0; r < n; r++) {
        while (c < s->nsteps && s->steps[c].is_gemm) {
            int a = c;
            while (a < s->nsteps && s->steps[a].is_gemm)
                a++;
            bool next_named = starts_at(s, a, rec[r].name);
            if (got > 0 && next_named) { /* the GEMMs are done: on to the generated kernel */
                c = a;
                got = 0;
                break;
            }
            step_of[r] = c;
            got++;
            if (got >= (int)s->steps[c].plan->calls && c + 1 < a) {
                c++;
                got = 0;
            }
            goto next;
        }
        /* a collective: one NCCL kernel, or none (one rank) */
        while (c < s->nsteps && s->steps[c].is_coll) {
            c++;
            got = 0;
            if (strstr(rec[r].name, "nccl")) {
                step_of[r] = c - 1;
                goto next;
            }
        }
        if (c >= s->nsteps || strcmp(rec[r].name, s->steps[c].entry) != 0)
            return false;
        step_of[r] = c++;
        got = 0;
    next:;
    }
    return true;
}

/* Under a tensor-parallel profile, every rank waits here for the others (the host
 * communicator's barrier). CUPTI is one per process: while the recording rank starts it or
 * flushes its records, no rank may have a collective in flight, which would wait for the
 * recording rank's half and never end (a 2-GPU profile hung so on 4 H100s). */
static mc_status rank_barrier(mc_program *p)
{
    return p->nranks > 1 && p->comm ? mc_comm_barrier(p->comm, p->rank) : MC_OK;
}

/* A tensor-parallel rank's share of a profile it does not record: the same executions as the
 * recording rank, so that every collective has all its ranks. */
static mc_status mirror_runs(mc_program *p, cuda_state *s, int iters)
{
    mc_status st = MC_OK;
    for (int it = 0; it < iters && st == MC_OK; it++) {
        st = execute(p, s);
        if (st == MC_OK)
            st = sync_stream(s, "profiling the program");
        if (st == MC_OK)
            st = rank_barrier(p);
    }
    return st;
}

/* Kernel times from CUPTI's device timestamps over `iters` ordinary executions (the CUDA graph
 * replay when the program is captured; nothing re-launched). false in *done when CUPTI is
 * unusable or its records do not follow the program: `why` says which. */
static mc_status profile_cupti(mc_program *p, int iters, mc_profile *prof, bool *done, char *why,
                               size_t why_size)
{
    cuda_state *s = p->state;
    const kir_program *kp = p->kp;
    *done = false;
    if (mc_cupti_begin(s->ordinal) != MC_OK) {
        snprintf(why, why_size, "%s", mc_error_message());
        mc_status st = rank_barrier(p);
        return p->nranks > 1 && st == MC_OK ? mirror_runs(p, s, iters) : st;
    }
    int *run_end = calloc((size_t)iters + 1, sizeof *run_end);
    uint64_t *host_ns = calloc(2 * (size_t)iters, sizeof *host_ns); /* around each run */
    bool host_ok = true;
    mc_status st = rank_barrier(p); /* recording: the other ranks may start */
    if (st == MC_OK && (!run_end || !host_ns))
        st = mc_fail(MC_ERR_SYSTEM, "out of memory");
    for (int it = 0; it < iters && st == MC_OK; it++) {
        host_ok = host_ok && mc_cupti_now(&host_ns[2 * it]) == MC_OK;
        st = execute(p, s);
        if (st == MC_OK)
            st = sync_stream(s, "profiling the program");
        host_ok = host_ok && mc_cupti_now(&host_ns[2 * it + 1]) == MC_OK;
        if (st == MC_OK && mc_cupti_flush(&run_end[it + 1]) != MC_OK)
            snprintf(why, why_size, "%s", mc_error_message());
        if (st == MC_OK)
            st = rank_barrier(p);
    }
    mc_cupti_kernel *rec = NULL;
    int nrec = 0;
    if (mc_cupti_end(&rec, &nrec) != MC_OK && !why[0])
        snprintf(why, why_size, "%s", mc_error_message());
    size_t nk = (size_t)(kp->nkernels > 0 ? kp->nkernels : 1);
    double *t = calloc(nk * (size_t)iters, sizeof *t);
    int *launch = calloc(nk, sizeof *launch);
    int *step_of = calloc((size_t)(nrec > 0 ? nrec : 1), sizeof *step_of);
    mc_profile_event *ev = calloc((size_t)(nrec > 0 ? nrec : 1), sizeof *ev);
    double *span = calloc(2 * (size_t)iters, sizeof *span);
    double *host = calloc(2 * (size_t)iters, sizeof *host);
    if (st == MC_OK && (!t || !launch || !step_of || !ev || !span || !host))
        st = mc_fail(MC_ERR_SYSTEM, "out of memory");
    bool ok = st == MC_OK && !why[0] && nrec > 0 && run_end[iters] == nrec;
    if (st == MC_OK && !why[0] && !ok)
        snprintf(why, why_size, "CUPTI delivered %d kernel records for %d runs", nrec, iters);
    /* Serialized records (MINIC_CUPTI_SERIAL=1) inside a CUDA graph replay came back on an H200
     * (2026-11-28) with no duration but the last kernel's, which held the whole replay: times
     * that would look real. Records most of which last nothing are refused (events instead). */
    int empty = 0;
    for (int r = 0; ok && r < nrec; r++)
        empty += rec[r].end_ns <= rec[r].start_ns;
    if (ok && 2 * empty > nrec) {
        ok = false;
        snprintf(why, why_size, "%d of its %d kernel records have no duration%s", empty, nrec,
                 getenv("MINIC_CUPTI_SERIAL") ? " (MINIC_CUPTI_SERIAL=1 in a CUDA graph replay)" : "");
    }
    uint64_t base = ok ? rec[0].start_ns : 0;
    for (int it = 0; it < iters && ok; it++) {
        int a = run_end[it], b = run_end[it + 1];
        if (b <= a || !match_run(s, rec + a, b - a, step_of + a)) {
            ok = false;
            snprintf(why, why_size, "CUPTI's kernel records of run %d do not follow the program "
                     "(first: %s)", it, b > a ? rec[a].name : "none");
            break;
        }
        for (int r = a; r < b; r++) {
            int k = s->steps[step_of[r]].kernel;
            /* signed: with concurrent streams a later record may start before the first */
            double t0 = (double)(int64_t)(rec[r].start_ns - base) * 1e-3;
            double t1 = (double)(int64_t)(rec[r].end_ns - base) * 1e-3;
            t[(size_t)k * (size_t)iters + (size_t)it] += t1 - t0;
            if (it == 0)
                launch[k]++;
            ev[r] = (mc_profile_event){.kernel = k, .run = it, .start_us = t0, .end_us = t1};
            snprintf(ev[r].function, sizeof ev[r].function, "%s", rec[r].name);
        }
        host[2 * it] = (double)(int64_t)(host_ns[2 * it] - base) * 1e-3;
        host[2 * it + 1] = (double)(int64_t)(host_ns[2 * it + 1] - base) * 1e-3;
    }
    if (ok) {
        /* The time line: the first run's launch at 0, each run from the host's launch to its
         * synchronize (CUPTI's clock) where those hold its kernels, else its kernels' extent. */
        bool hosted = mc_profile_place_runs(ev, nrec, iters, host_ok ? host : NULL, span);
        snprintf(prof->run_clock, sizeof prof->run_clock, "%s",
                 hosted ? "CUPTI's host timestamps, from the launch to the synchronize"
                        : host_ok ? "the kernels' extent (CUPTI's host timestamps did not hold them)"
                                  : "the kernels' extent");
        for (int k = 0; k < kp->nkernels; k++) {
            prof->time_us[k] = mc_median(&t[(size_t)k * (size_t)iters], iters);
            prof->launches[k] = launch[k];
        }
        free(prof->events);
        free(prof->run_span_us);
        prof->events = ev;
        prof->nevents = nrec;
        prof->run_span_us = span;
        ev = NULL;
        span = NULL;
        snprintf(prof->clock, sizeof prof->clock, "CUPTI device timestamps%s",
                 s->gexec ? ", in CUDA graph replays" : "");
        *done = true;
    }
    free(run_end);
    free(host_ns);
    free(host);
    free(rec);
    free(t);
    free(launch);
    free(step_of);
    free(ev);
    free(span);
    return st;
}

static mc_status cuda_profile(mc_program *p, int iters, mc_profile *prof)
{
    cuda_state *s = p->state;
    const kir_program *kp = p->kp;
    const mc_cuda_api *cu = s->cu;
    if (iters < 1)
        iters = 1;
    mc_status st = warm_up(p);
    if (st != MC_OK)
        return st;
    snprintf(prof->device, sizeof prof->device, "%s", s->device_name);
    char why[256] = "";
    bool done = false;
    if (p->nranks > 1 && p->rank > 0) { /* rank 0 records the profile */
        snprintf(prof->clock, sizeof prof->clock, "not recorded (rank %d of %d)", p->rank, p->nranks);
        st = rank_barrier(p); /* until rank 0 records */
        return st == MC_OK ? mirror_runs(p, s, iters) : st;
    }
    st = profile_cupti(p, iters, prof, &done, why, sizeof why);
    if (st != MC_OK || done)
        return st;
    if (p->nranks > 1) { /* the fallback re-launches kernels alone: a rank cannot, collectives wait */
        snprintf(prof->clock, sizeof prof->clock,
                 "not measured: CUPTI is needed with --devices (%.180s)", why);
        return MC_OK;
    }
    /* The fallback: CUDA events around every step of a run outside the graph. */
    snprintf(prof->clock, sizeof prof->clock, "cuda events, re-launched (CUPTI: %.180s)", why);
    int n = s->nsteps;
    CUevent *ev = calloc((size_t)n + 2, sizeof(CUevent)); /* ev[n + 1]: the time line's origin */
    double *t = calloc((size_t)kp->nkernels * (size_t)iters + 1, sizeof(double));
    mc_profile_event *rec = calloc((size_t)n * (size_t)iters + 1, sizeof *rec);
    double *span = calloc(2 * (size_t)iters, sizeof *span);
    if (!ev || !t || !rec || !span) {
        free(ev);
        free(t);
        free(rec);
        free(span);
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    }
    for (int i = 0; i <= n + 1; i++)
        cu->cuEventCreate(&ev[i], CU_EVENT_DEFAULT);
    cu->cuEventRecord(ev[n + 1], s->stream);
    int nrec = 0;
    for (int it = 0; it < iters && st == MC_OK; it++) {
        cu->cuEventRecord(ev[0], s->stream);
        for (int i = 0; i < n && st == MC_OK; i++) {
            st = run_step(s, &s->steps[i], kp);
            cu->cuEventRecord(ev[i + 1], s->stream);
        }
        if (st == MC_OK)
            st = sync_stream(s, "profiling the program");
        /* Each step from the event before it to the event after it, on the time line of the
         * origin event (one stream: the steps cannot overlap; the gaps between runs show). */
        float prev_ms = 0;
        cu->cuEventElapsedTime(&prev_ms, ev[n + 1], ev[0]);
        for (int i = 0; i < n && st == MC_OK; i++) {
            float ms = 0, at_ms = 0;
            cu->cuEventElapsedTime(&ms, ev[i], ev[i + 1]);
            cu->cuEventElapsedTime(&at_ms, ev[n + 1], ev[i + 1]);
            t[(size_t)s->steps[i].kernel * (size_t)iters + (size_t)it] += (double)ms * 1000.0;
            rec[nrec++] = (mc_profile_event){.kernel = s->steps[i].kernel, .run = it,
                                             .start_us = (double)prev_ms * 1000.0,
                                             .end_us = (double)at_ms * 1000.0};
            if (!s->steps[i].is_gemm) /* cuBLASLt's own kernels are not named to us */
                snprintf(rec[nrec - 1].function, sizeof rec[nrec - 1].function, "%s", s->steps[i].entry);
            prev_ms = at_ms;
        }
    }
    if (st == MC_OK) {
        mc_profile_place_runs(rec, nrec, iters, NULL, span);
        free(prof->events);
        free(prof->run_span_us);
        prof->events = rec;
        prof->nevents = nrec;
        prof->run_span_us = span;
        rec = NULL;
        span = NULL;
        snprintf(prof->run_clock, sizeof prof->run_clock, "the events' extent");
    }
    free(rec);
    free(span);
    for (int k = 0; k < kp->nkernels && st == MC_OK; k++) {
        prof->time_us[k] = mc_median(&t[(size_t)k * (size_t)iters], iters);
        int launches = 0;
        for (int i = 0; i < n; i++)
            if (s->steps[i].kernel == k)
                launches += s->steps[i].is_gemm ? (int)s->steps[i].plan->calls : 1;
        prof->launches[k] = launches;
    }
    for (int i = 0; i <= n + 1; i++)
        cu->cuEventDestroy(ev[i]);
    free(ev);
    free(t);
    return st;
}

static mc_status cuda_dump_code(mc_program *p, FILE *out)
{
    cuda_state *s = p->state;
    mc_cuda_kernel_plan *plans = s ? s->plans : NULL;
    mc_cuda_kernel_plan *own = NULL;
    const kir_program *kp = p->kp;
    if (!plans) {
        /* not prepared: render for sm_90 with the runtime's alignments */
        mc_cuda_target t = {.sm = 90, .num_sms = 132};
        int *align = calloc((size_t)kp->nbuffers + 1, sizeof(int));
        if (!align)
            return mc_fail(MC_ERR_SYSTEM, "out of memory");
        mc_cuda_buffer_align(kp, align);
        mc_status st = mc_cuda_plan_program(kp, &t, align, &own);
        free(align);
        if (st != MC_OK)
            return st;
        plans = own;
    }
    bool prelude = false;
    for (int i = 0; i < kp->nkernels; i++) {
        const mc_cuda_kernel_plan *pl = &plans[i];
        fprintf(out, "// ---- kernel %d: %s%s\n", i, kp->kernels[i].name,
                kp->kernels[i].prep ? " (prep: from params alone, runs when they are bound, not in every run)" : "");
        if (kp->kernels[i].category == KIR_COLLECTIVE)
            fprintf(out, "// ncclAllReduce (sum) of %lld elements, on the program's stream\n",
                    (long long)kp->kernels[i].coll.count);
        if (pl->is_gemm) {
            mc_strbuf sb = {0};
            mc_cuda_gemm_plan_describe(&pl->gemm, &sb);
            fprintf(out, "// %s\n", sb.data ? sb.data : "");
            mc_sb_free(&sb);
        }
        if (pl->has_code) {
            if (!prelude) {
                fprintf(out, "// prelude (part of every kernel's source):\n%.*s",
                        (int)pl->code.body, pl->code.src.data);
                prelude = true;
            }
            fprintf(out, "// launch: grid (%lld, %lld, %lld), block %d, %s\n%s\n",
                    (long long)pl->code.grid[0], (long long)pl->code.grid[1],
                    (long long)pl->code.grid[2], pl->code.block, pl->code.scheme,
                    pl->code.src.data + pl->code.body);
        }
    }
    mc_cuda_plans_free(own, kp->nkernels);
    return MC_OK;
}

static void cuda_release(mc_program *p)
{
    cuda_state *s = p->state;
    if (!s)
        return;
    const kir_program *kp = p->kp;
    const mc_cuda_api *cu = s->cu;
    if (cu && s->ctx)
        cu->cuCtxSetCurrent(s->ctx);
    if (cu && s->stream)
        cu->cuStreamSynchronize(s->stream);
    if (s->gexec) {
        cu->cuGraphExecDestroy(s->gexec);
        atomic_fetch_sub(&live_graphs, 1);
    }
    free_steps(s->steps, s->nsteps);
    free_steps(s->prep_steps, s->nprep_steps);
    free(s->home);
    for (int b = 0; s->mapped && b < kp->nbuffers; b++)
        if (s->mapped[b])
            mapping_drop(cu, s->mapped[b]);
    free(s->mapped);
    if (s->gemms && s->lt)
        for (int i = 0; i < kp->nkernels; i++)
            mc_lt_gemm_free(s->lt, &s->gemms[i]);
    free(s->gemms);
    if (s->lt_handle)
        s->lt->cublasLtDestroy(s->lt_handle);
    for (int i = 0; s->modules && i < kp->nkernels; i++) {
        if (s->modules[i] && s->shared && s->shared[i])
            shared_release(cu, s->modules[i]);
        else if (s->modules[i])
            cu->cuModuleUnload(s->modules[i]);
    }
    free(s->modules);
    free(s->shared);
    free(s->owner);
    mc_cuda_plans_free(s->plans, kp->nkernels);
    if (s->mem)
        cu->cuMemFree(s->mem);
    free(s->buf);
    free(s->buf_bytes);
    free(s->pitched);
    if (s->stream)
        cu->cuStreamDestroy(s->stream);
    if (s->ctx_retained)
        cu->cuDevicePrimaryCtxRelease(s->dev);
    free(s);
    p->state = NULL;
}

/* ---- tensor parallel ------------------------------------------------------------------------ */

/* One NCCL communicator per rank, on the ranks' GPUs (each rank prepared on its own). */
static mc_status cuda_comm_init(mc_program **ranks, int n)
{
    int *dev = calloc((size_t)n, sizeof *dev);
    mc_nccl_comm **comms = calloc((size_t)n, sizeof *comms);
    mc_status st = dev && comms ? MC_OK : mc_fail(MC_ERR_SYSTEM, "out of memory");
    for (int r = 0; r < n && st == MC_OK; r++)
        dev[r] = ((cuda_state *)ranks[r]->state)->ordinal;
    if (st == MC_OK)
        st = mc_nccl_comms(n, dev, comms);
    for (int r = 0; r < n && st == MC_OK; r++) {
        ((cuda_state *)ranks[r]->state)->comm = comms[r];
        if (r == 0)
            mc_program_note(ranks[0], "tensor parallel over %d GPUs through %s", n,
                            mc_nccl_describe());
    }
    free(dev);
    free(comms);
    return st;
}

/* The graphs go first: a captured all-reduce holds on to its communicator, and destroying a
 * communicator that a live graph still uses waits for ever (seen on 2 H200s, NCCL 2.28). */
static void cuda_comm_release(mc_program **ranks, int n)
{
    for (int r = 0; r < n; r++) {
        cuda_state *s = ranks[r] ? ranks[r]->state : NULL;
        if (!s || !s->comm)
            continue;
        s->cu->cuCtxSetCurrent(s->ctx);
        s->cu->cuStreamSynchronize(s->stream);
        if (s->gexec) {
            s->cu->cuGraphExecDestroy(s->gexec);
            atomic_fetch_sub(&live_graphs, 1);
        }
        s->gexec = NULL;
    }
    for (int r = 0; r < n; r++) {
        cuda_state *s = ranks[r] ? ranks[r]->state : NULL;
        if (!s || !s->comm)
            continue;
        s->cu->cuCtxSetCurrent(s->ctx);
        mc_nccl_comm_free(s->comm);
        s->comm = NULL;
    }
}

/* MINIC_CUDA_SIZED=0: symbolic programs compile per binding, as before run-time sizes. */
static const char *cuda_sizes_off(void)
{
    const char *e = getenv("MINIC_CUDA_SIZED");
    return e && strcmp(e, "0") == 0 ? "MINIC_CUDA_SIZED=0" : NULL;
}

const mc_backend mc_backend_cuda = {
    .name = "cuda",
    .is_gpu = true,
    .runtime_sizes = true,
    .runtime_sizes_off = cuda_sizes_off,
    .attention = true,
    .conv_gather = true,
    .conv_implicit = true,
    .probe = cuda_probe,
    .prepare = cuda_prepare,
    .run = cuda_run,
    .prep = cuda_prep,
    .launch = cuda_launch,
    .wait = cuda_wait,
    .alias = cuda_alias,
    .bind_device = cuda_bind_device,
    .map_host = cuda_map_host,
    .profile = cuda_profile,
    .time = cuda_time,
    .dump_code = cuda_dump_code,
    .copy_output = cuda_copy_output,
    .download = cuda_download,
    .release = cuda_release,
    .comm_init = cuda_comm_init,
    .comm_release = cuda_comm_release,
};
