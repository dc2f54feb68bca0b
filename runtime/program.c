/* Compiled programs: the public mc_program_* functions of include/minic.h.
 *
 * A program is the user's graph (cloned, so names, types and source lines outlive the caller's
 * graph), the kernel list the pass pipeline made of it, a backend, and one host array per
 * input, param and output buffer. Binding writes into those arrays and marks them dirty; the
 * backend copies what is dirty in before a run and leaves the outputs in the host arrays after.
 *
 * Names are resolved against the user's graph, never against the kernel list: an input that
 * the passes found dead has no buffer, but it is still declared, so binding it is checked
 * (size, dtype, shape) and then has nothing to do. Every check that depends on a file happens
 * before anything is copied, so a failed mc_program_load_weights leaves the program as it was.
 *
 * Backend choice (MC_BACKEND_AUTO): cuda when it is built and its probe finds a usable GPU,
 * else cpu when it is built, else ref. The fallback is a note of the program's (mc_program_note:
 * kept for mc_program_notes and handed to the caller's callback), because a user who expected
 * a GPU must not silently get an interpreter; the library itself never prints.
 *
 * Threads: every public call on a program after compile (binding, run, outputs) holds the
 * program's mutex, so calls from several threads on one program are serialised: no hang, no
 * torn state, and each run computes from the bindings it found. The backends keep one
 * execution state per program (arena, thread pool, device buffers), which the mutex protects;
 * different programs share nothing mutable and run in parallel.
 */
#include "runtime/runtime.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "passes/passes.h"

mc_options mc_options_default(void)
{
    return (mc_options){
        .backend = MC_BACKEND_AUTO,
        .fuse = true,
        .plan_memory = true,
        .cuda_graph = -1,
        .tf32 = false,
        .threads = 0,
        .devices = 0,
        .device = 0,
        .quiet = false,
        .note = NULL,
        .note_ctx = NULL,
    };
}

const char *mc_backend_name(mc_backend_kind kind)
{
    switch (kind) {
    case MC_BACKEND_AUTO: return "auto";
    case MC_BACKEND_CUDA: return "cuda";
    case MC_BACKEND_CPU: return "cpu";
    case MC_BACKEND_REF: return "ref";
    }
    return "unknown";
}

/* ---- backend choice ------------------------------------------------------------------------ */

/* The backends this library was built with. MINIC_HAVE_CUDA_BACKEND / MINIC_HAVE_CPU_BACKEND
 * are defined by CMake when the backend's sources are part of the build. */
mc_backend_kind mc_program_backend_kind(const mc_program *p)
{
    if (!strcmp(p->backend->name, "cuda"))
        return MC_BACKEND_CUDA;
    if (!strcmp(p->backend->name, "cpu"))
        return MC_BACKEND_CPU;
    return MC_BACKEND_REF;
}

void mc_program_forward_note(void *ctx, const char *note) { mc_program_note(ctx, "%s", note); }

static const mc_backend *built_backend(mc_backend_kind kind)
{
    switch (kind) {
#ifdef MINIC_HAVE_CUDA_BACKEND
    case MC_BACKEND_CUDA: return &mc_backend_cuda;
#endif
#ifdef MINIC_HAVE_CPU_BACKEND
    case MC_BACKEND_CPU: return &mc_backend_cpu;
#endif
    case MC_BACKEND_REF: return &mc_backend_ref;
    default: return NULL;
    }
}

static mc_status probe(const mc_backend *b)
{
    return b->probe ? b->probe() : MC_OK;
}

const char *mc_program_notes(const mc_program *p)
{
    return p && p->notes ? p->notes : "";
}

/* AUTO: the first usable of cuda, cpu, ref; why says why cuda was passed over. */
static const mc_backend *auto_backend(char *why, size_t n)
{
    snprintf(why, n, "this minic was built without the cuda backend");
    const mc_backend *cuda = built_backend(MC_BACKEND_CUDA);
    if (cuda) {
        if (probe(cuda) == MC_OK)
            return cuda;
        snprintf(why, n, "no usable GPU: %s", mc_error_message());
    }
    const mc_backend *b = built_backend(MC_BACKEND_CPU);
    return b && probe(b) == MC_OK ? b : &mc_backend_ref;
}

static mc_status choose_backend(mc_program *p)
{
    const mc_options *opt = &p->opt;
    const mc_backend **out = &p->backend;
    if (opt->backend != MC_BACKEND_AUTO) {
        const mc_backend *b = built_backend(opt->backend);
        if (!b)
            return mc_fail(MC_ERR_SYSTEM,
                           "backend '%s' is not available: this minic was built without it%s",
                           mc_backend_name(opt->backend),
                           opt->backend == MC_BACKEND_CUDA ? " (no CUDA headers at build time)"
                                                           : " (needs LLVM 14)");
        if (probe(b) != MC_OK) {
            char why[1024]; /* mc_fail overwrites the message it would read */
            snprintf(why, sizeof why, "%s", mc_error_message());
            return mc_fail(MC_ERR_SYSTEM, "backend '%s' is not usable: %s", b->name, why);
        }
        *out = b;
        return MC_OK;
    }
    char why[512];
    *out = auto_backend(why, sizeof why);
    if (*out != built_backend(MC_BACKEND_CUDA))
        mc_program_note(p, "%s; using the %s backend", why, (*out)->name);
    return MC_OK;
}

/* ---- names and sizes ----------------------------------------------------------------------- */

static bool is_declaration(const mc_node *n)
{
    return n->op == MC_OP_INPUT || n->op == MC_OP_PARAM;
}

/* The input or param node called `name` in the user's graph, or -1. */
static int find_declaration(const mc_program *p, const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < p->graph->nnodes; i++) {
        const mc_node *n = &p->graph->nodes[i];
        if (is_declaration(n) && n->name && strcmp(n->name, name) == 0)
            return i;
    }
    return -1;
}

/* The kernel-list buffer that holds user-graph node `node` with one of the given kinds, or -1. */
static int buffer_of(const mc_program *p, int node, bool declarations)
{
    const kir_program *kp = p->kp;
    if (!kp) /* a parallel program: its ranks hold the buffers */
        return -1;
    for (int b = 0; b < kp->nbuffers; b++) {
        kir_buffer_kind k = kp->buffers[b].kind;
        bool decl = k == KBUF_INPUT || k == KBUF_PARAM;
        if (kp->buffers[b].node == node && (declarations ? decl : k == KBUF_OUTPUT))
            return b;
    }
    return -1;
}

int mc_program_find(const mc_program *p, const char *name)
{
    int node = find_declaration(p, name);
    return node < 0 ? -1 : buffer_of(p, node, true);
}

int64_t mc_program_numel(const mc_program *p, int b)
{
    return p->kp->buffers[b].numel;
}

/* "f32[32, 128]" */
static const char *type_string(mc_dtype dtype, const int64_t *shape, int rank, char *buf,
                               size_t size)
{
    int n = snprintf(buf, size, "%s[", mc_dtype_name(dtype));
    for (int d = 0; d < rank && n > 0 && (size_t)n < size; d++)
        n += snprintf(buf + n, size - (size_t)n, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, "]");
    return buf;
}

static const char *node_type(const mc_node *n, char *buf, size_t size)
{
    return type_string(n->dtype, n->shape, n->rank, buf, size);
}

static bool node_bytes(const mc_node *n, size_t *out)
{
    int64_t bytes;
    if (mc_mul_overflows(mc_node_numel(n), (int64_t)mc_dtype_size(n->dtype), &bytes) ||
        (uint64_t)bytes > SIZE_MAX)
        return false;
    *out = (size_t)bytes;
    return true;
}

static const char *kind_word(const mc_node *n)
{
    return n->op == MC_OP_PARAM ? "param" : "input";
}

/* ---- compile and free ---------------------------------------------------------------------- */

/* Host memory that can be had now: MemAvailable from /proc/meminfo, else physical memory;
 * 0 when unknown. Checked before allocating, because an allocation the kernel overcommits
 * succeeds and the process is killed later, when the pages are touched. */
static uint64_t host_memory_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                fclose(f);
                return (uint64_t)kb * 1024;
            }
        fclose(f);
    }
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}

/* Bytes of host memory the program will hold: its inputs, params and outputs, and for the
 * backends that run on the host, the intermediates' arena. */
static mc_status check_host_memory(const mc_program *p)
{
    const kir_program *kp = p->kp;
    int64_t total = 0, bytes;
    if (p->backend->runs_on_host && mc_add_overflows(total, kp->arena_bytes, &total))
        total = INT64_MAX;
    for (int b = 0; b < kp->nbuffers && total < INT64_MAX; b++) {
        const kir_buffer *buf = &kp->buffers[b];
        if (buf->kind == KBUF_TEMP)
            continue;
        if (mc_mul_overflows(buf->numel, (int64_t)mc_dtype_size(buf->dtype), &bytes) ||
            mc_add_overflows(total, bytes, &total))
            total = INT64_MAX;
    }
    uint64_t available = host_memory_available();
    if (available > 0 && (uint64_t)total > available)
        return mc_fail(MC_ERR_SYSTEM,
                       "out of memory: the program needs %lld bytes of host memory, %llu are available",
                       (long long)total, (unsigned long long)available);
    return MC_OK;
}

/* Ask for transparent huge pages (2 MB) under a large host array, before its first touch: a
 * kernel streams through it, and with 4 KB pages the hardware prefetcher stops at every page
 * boundary and the TLB misses every 4 KB (the memory-bound CPU kernels ran 8-10% faster with
 * them). Only a hint; nothing to undo if the kernel refuses. Only for backends whose kernels
 * read the host arrays in place. */
static void advise_huge_pages(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    if (bytes < ((size_t)4 << 20))
        return;
    uintptr_t page = 4096, lo = ((uintptr_t)p + page - 1) & ~(page - 1), hi = ((uintptr_t)p + bytes) & ~(page - 1);
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p, (void)bytes;
#endif
}

/* A host array's allocation: a reference count, then the array from the first 64-byte
 * boundary after it (the CPU kernels' vector loads and non-temporal stores then start aligned:
 * a kernel peels or falls back to plain stores on a misaligned array, and loads that straddle
 * lines cost). Programs that share params (mc_program_share_params) point their host arrays
 * into one block, each holding a reference; the last to let go frees it, in whatever order the
 * programs are freed. NULL (message set) when out of memory. */
typedef struct host_block {
    atomic_int refs;
} host_block;

static void *host_block_new(size_t bytes, void **array)
{
    char *m = calloc(bytes + sizeof(host_block) + 64, 1);
    if (!m) {
        mc_fail(MC_ERR_SYSTEM, "out of memory (%zu bytes of host memory)", bytes);
        return NULL;
    }
    atomic_init(&((host_block *)m)->refs, 1);
    *array = (void *)(((uintptr_t)m + sizeof(host_block) + 63) & ~(uintptr_t)63);
    return m;
}

static void host_block_release(void *m)
{
    if (m && atomic_fetch_sub(&((host_block *)m)->refs, 1) == 1)
        free(m);
}

static bool host_block_shared(void *m)
{
    return m && atomic_load(&((host_block *)m)->refs) > 1;
}

/* Before writing into host[b]: where another program shares its block, take a block of one's
 * own (the other keeps the value it shared). */
static mc_status host_unshare(mc_program *p, int b)
{
    if (!p->host_alloc || !host_block_shared(p->host_alloc[b]))
        return MC_OK;
    size_t bytes = (size_t)p->kp->buffers[b].numel * mc_dtype_size(p->kp->buffers[b].dtype);
    void *array, *m = host_block_new(bytes, &array);
    if (!m)
        return MC_ERR_SYSTEM;
    host_block_release(p->host_alloc[b]);
    p->host_alloc[b] = m;
    p->host[b] = array;
    return MC_OK;
}

static mc_status allocate_host(mc_program *p)
{
    const kir_program *kp = p->kp;
    size_t nb = kp->nbuffers > 0 ? (size_t)kp->nbuffers : 1;
    p->host = calloc(nb, sizeof *p->host);
    p->host_alloc = calloc(nb, sizeof *p->host_alloc);
    p->bound = calloc(nb, sizeof *p->bound);
    p->dirty = calloc(nb, sizeof *p->dirty);
    p->has_value = calloc(nb, sizeof *p->has_value);
    p->stale = calloc(nb, sizeof *p->stale);
    p->external = calloc(nb, sizeof *p->external);
    size_t no = p->graph->noutputs > 0 ? (size_t)p->graph->noutputs : 1;
    p->outputs = calloc(no, sizeof *p->outputs);
    if (!p->host || !p->host_alloc || !p->bound || !p->dirty || !p->has_value || !p->stale || !p->external ||
        !p->outputs)
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    mc_status st = check_host_memory(p);
    if (st != MC_OK)
        return st;
    for (int b = 0; b < kp->nbuffers; b++) {
        const kir_buffer *buf = &kp->buffers[b];
        if (buf->kind == KBUF_TEMP)
            continue;
        int64_t bytes;
        if (buf->numel < 0 || mc_mul_overflows(buf->numel, (int64_t)mc_dtype_size(buf->dtype), &bytes) ||
            (uint64_t)bytes > SIZE_MAX)
            return mc_fail(MC_ERR_INPUT, "a buffer of %lld elements is too large",
                           (long long)buf->numel);
        p->host_alloc[b] = host_block_new((size_t)bytes, &p->host[b]);
        if (!p->host_alloc[b])
            return MC_ERR_SYSTEM;
        if (p->backend->runs_on_host)
            advise_huge_pages(p->host[b], (size_t)bytes);
    }
    for (int i = 0; i < p->graph->noutputs; i++) {
        int node = p->graph->outputs[i];
        int b = buffer_of(p, node, false);
        if (b < 0)
            b = buffer_of(p, node, true); /* `output x` where x is an input or param */
        MC_ASSERT(b >= 0);
        p->outputs[i] = b;
    }
    return MC_OK;
}

/* A zeroed program with its mutex; NULL (message set) when either cannot be had. */
static mc_program *new_program(void)
{
    mc_program *p = calloc(1, sizeof *p);
    if (!p) {
        mc_fail(MC_ERR_SYSTEM, "out of memory");
        return NULL;
    }
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        mc_fail(MC_ERR_SYSTEM, "cannot create the program's mutex");
        return NULL;
    }
    p->lock_ready = true;
    p->prep_due = true; /* the prep kernels run before the first run */
    return p;
}

/* mc_program_compile; for a rank of a parallel program (runtime/parallel.c) with its rank, the
 * number of ranks, the communicator and the parallel program set before the backend prepares
 * it (parent NULL: an ordinary program). */

/* conv's im2col as one gather or as copies (passes/decompose.c): the backend's choice, or
 * MINIC_CONV_GATHER=1 / 0 for every backend (to time both, and to test the gather on ref/cpu). */
static bool conv_gather(const mc_backend *b)
{
    const char *e = getenv("MINIC_CONV_GATHER");
    if (e && (strcmp(e, "0") == 0 || strcmp(e, "1") == 0))
        return e[0] == '1';
    return b->conv_gather;
}

/* conv as an implicit GEMM (passes/decompose.c): the backend's choice, or
 * MINIC_CUDA_IMPLICIT_CONV=0 to keep the im2col gather and cuBLASLt (the path before
 * 2026-11-28, to time both in one run). The ref interpreter reads kir_conv too but keeps the
 * decomposed conv unless MINIC_REF_IMPLICIT_CONV=1 (the tests run the implicit GEMM's kernel IR
 * against the oracle there, on machines without a GPU). */
static bool conv_implicit(const mc_backend *b)
{
    const char *e = getenv("MINIC_CUDA_IMPLICIT_CONV"), *r = getenv("MINIC_REF_IMPLICIT_CONV");
    if (b == &mc_backend_ref)
        return r && strcmp(r, "1") == 0;
    return b->conv_implicit && !(e && strcmp(e, "0") == 0);
}

/* The implicit GEMM's K by chunks of 32 channels (kir_conv.kc), so that the CUDA kernel's K
 * tile is one window position and its loads need no per-element index arithmetic
 * (backends/cuda/cuda_render.c, emit_conv_chunk); on any backend that takes the implicit GEMM
 * (the ref interpreter under MINIC_REF_IMPLICIT_CONV=1 too, for the tests). H200, 18:52 call:
 * ResNet-18 f16 B=32 1148.7 us against 1357.5 with (c, ky, kx), layer 1's 3x3 conv 51.4 against
 * 64.6 (with the stem channels-last). MINIC_CUDA_CONV_KCHUNK=0: the order before. */
static int conv_kchunk(void)
{
    const char *e = getenv("MINIC_CUDA_CONV_KCHUNK");
    return e && strcmp(e, "0") == 0 ? 0 : 32;
}

/* A conv of fewer than 8 channels (ResNet's stem) reads x channels-last, padded to 4 or 8
 * channels, and one given channels-last (the transpose of an NHWC tensor) reads it as it is
 * (passes/decompose.c), so that the CUDA kernel loads each window position of a pixel as one
 * cp.async (emit_conv_clast); the ref interpreter too under MINIC_REF_IMPLICIT_CONV=1. H200,
 * 18:52 call: the stem 122.0 us against 166.4, ResNet-18 1102.5 against 1148.7 with the chunks
 * alone; an NHWC-given 3x3 layer 73.1 against 284.9. MINIC_CUDA_CONV_CLAST=0: as before. */
static bool conv_clast(void)
{
    const char *e = getenv("MINIC_CUDA_CONV_CLAST");
    return !(e && strcmp(e, "0") == 0);
}

/* MINIC_HOIST_PARAMS=0: every kernel runs in every run, those computed from params alone too
 * (kir/kir.h, "Prep kernels"), to compare with running them only when the params are bound. */
static bool hoist_params(void)
{
    const char *e = getenv("MINIC_HOIST_PARAMS");
    return !(e && strcmp(e, "0") == 0);
}

mc_compile_options mc_compile_options_for_backend(const mc_options *opt, const mc_backend *b)
{
    mc_compile_options co = mc_compile_options_for(opt);
    if (b) {
        co.hoist = b->prep && hoist_params();
        co.no_attention = !b->attention;
        co.conv_gather = conv_gather(b);
        co.conv_implicit = conv_implicit(b);
        co.conv_kchunk = co.conv_implicit ? conv_kchunk() : 0;
        co.conv_clast = co.conv_implicit && conv_clast();
    }
    return co;
}

mc_compile_options mc_compile_options_of_backend(const mc_options *opt)
{
    char why[512];
    const mc_backend *b = opt->backend == MC_BACKEND_AUTO ? auto_backend(why, sizeof why)
                                                          : built_backend(opt->backend);
    return mc_compile_options_for_backend(opt, b);
}

static mc_status compile_program(const mc_graph *g, const mc_options *opt, mc_program *parent, int rank,
                                 int nranks, mc_comm *comm, mc_program **out)
{
    if (!out)
        return mc_fail(MC_ERR_INPUT, "mc_program_compile: no place for the result");
    *out = NULL;
    if (!g)
        return mc_fail(MC_ERR_INPUT, "mc_program_compile: no graph");
    if (g->failed)
        return mc_fail(MC_ERR_INPUT, "mc_program_compile: the graph has a failed builder call");
    if (g->noutputs <= 0)
        return mc_fail(MC_ERR_INPUT, "graph '%s' has no outputs (mc_graph_set_outputs)",
                       g->name ? g->name : "");
    mc_options o = opt ? *opt : mc_options_default();
    if ((unsigned)o.backend > MC_BACKEND_REF)
        return mc_fail(MC_ERR_INPUT, "mc_program_compile: unknown backend %d", (int)o.backend);
    if (o.cuda_graph < -1 || o.cuda_graph > 1)
        return mc_fail(MC_ERR_INPUT, "mc_program_compile: cuda_graph must be -1, 0 or 1");
    if (o.threads < 0 || o.threads > MC_MAX_THREADS)
        return mc_fail(MC_ERR_INPUT, "mc_program_compile: threads must be from 0 to %d (got %d)",
                       MC_MAX_THREADS, o.threads);
    if (o.devices < 0 || o.devices > MC_MAX_DEVICES)
        return mc_fail(MC_ERR_INPUT, "mc_program_compile: devices must be from 0 (off) to %d (got %d)",
                       MC_MAX_DEVICES, o.devices);
    if (o.device < 0)
        return mc_fail(MC_ERR_INPUT, "mc_program_compile: device must be 0 or more (got %d)", o.device);

    double t0 = mc_now_ms(), t = t0;
    mc_program *p = new_program();
    if (!p)
        return MC_ERR_SYSTEM;
    p->opt = o;
    p->rank = rank;
    p->nranks = nranks;
    p->comm = comm;
    p->parent = parent;
    mc_status st = choose_backend(p);
    mc_program_phase(p, "backend choice", &t);
    if (st != MC_OK) {
        mc_program_free(p);
        return st;
    }
    p->graph = mc_graph_clone(g);
    if (!p->graph) {
        mc_program_free(p);
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    }
    if (o.devices >= 1) { /* one program per rank (runtime/parallel.c) */
        if ((st = mc_parallel_new(p)) != MC_OK) {
            mc_program_free(p);
            return st;
        }
        p->compile_ms = mc_now_ms() - t0;
        *out = p;
        return MC_OK;
    }
    if (mc_graph_num_syms(g) > 0) { /* compiled per binding when it runs (runtime/symbolic.c) */
        if ((st = mc_symbolic_new(p)) != MC_OK) {
            mc_program_free(p);
            return st;
        }
        *out = p;
        return MC_OK;
    }
    mc_compile_options co = mc_compile_options_for_backend(&o, p->backend);
    mc_pipeline_times pt = {0};
    co.times = &pt;
    st = mc_compile_kernels(p->graph, &co, &p->kp);
    if (st == MC_OK) { /* the pipeline's phases, then whatever was around them */
        static const char *const names[] = {"graph passes", "fusion", "lowering", "memory plan",
                                            "counts"};
        const double ms[] = {pt.passes, pt.fuse, pt.lower, pt.plan, pt.count};
        double sum = 0;
        for (int i = 0; i < 5; i++) {
            double since = mc_now_ms() - ms[i];
            mc_program_phase(p, names[i], &since);
            sum += ms[i];
        }
        t += sum;
        mc_program_phase(p, "graph copy", &t);
    }
    if (st == MC_OK)
        st = allocate_host(p);
    mc_program_phase(p, "host memory", &t);
    if (st == MC_OK) {
        int before = p->ncompile_phases;
        double in_phases = 0;
        for (int i = 0; i < before; i++)
            in_phases += p->compile_phases[i].ms;
        st = p->backend->prepare(p);
        /* the backend's own phases (mc_program_phase), and the rest of its prepare */
        double now = mc_now_ms(), theirs = 0;
        for (int i = 0; i < p->ncompile_phases; i++)
            theirs += p->compile_phases[i].ms;
        theirs -= in_phases;
        t += theirs;
        if (now - t > 0.05 || p->ncompile_phases == before)
            mc_program_phase(p, "backend prepare", &t);
    }
    if (st != MC_OK) {
        mc_program_free(p);
        return st;
    }
    if (rank == 0)
        mc_program_note_prep(p, p->kp);
    p->compile_ms = mc_now_ms() - t0;
    *out = p;
    return MC_OK;
}

void mc_program_note_prep(mc_program *p, const kir_program *kp)
{
    if (kp && kp->nprep > 0)
        mc_program_note(p, "%d kernels computed from the params alone run when the params are bound, not in "
                        "every run (MINIC_HOIST_PARAMS=0: every run)", kp->nprep);
}

mc_status mc_program_instantiate(const mc_graph *g, kir_program *kp, const kir_program *sized, const int64_t *values,
                                 mc_shared_arena *arena, const mc_options *opt, mc_program **out)
{
    *out = NULL;
    double t0 = mc_now_ms(), t = t0;
    mc_program *p = new_program();
    if (!p) {
        kir_program_free(kp);
        return MC_ERR_SYSTEM;
    }
    p->opt = *opt;
    p->kp = kp;
    p->sized = sized;
    p->arena = arena;
    for (int k = 0; sized && k < mc_dims_num_syms(sized->dims) && k < MC_MAX_SYMS; k++)
        p->sized_values[k] = values[k];
    mc_status st = choose_backend(p);
    if (st == MC_OK && !(p->graph = mc_graph_clone(g)))
        st = mc_fail(MC_ERR_SYSTEM, "out of memory");
    if (st == MC_OK)
        st = allocate_host(p);
    mc_program_phase(p, "host memory", &t);
    if (st == MC_OK)
        st = p->backend->prepare(p);
    mc_program_phase(p, "backend prepare", &t);
    if (st != MC_OK) {
        mc_program_free(p);
        return st;
    }
    p->compile_ms = mc_now_ms() - t0;
    *out = p;
    return MC_OK;
}

mc_status mc_program_compile(const mc_graph *g, const mc_options *opt, mc_program **out)
{
    return compile_program(g, opt, NULL, 0, 0, NULL, out);
}

mc_status mc_program_compile_rank(const mc_graph *g, const mc_options *opt, mc_program *parent, int rank,
                                  int nranks, mc_comm *comm, mc_program **out)
{
    return compile_program(g, opt, parent, rank, nranks, comm, out);
}

mc_status mc_program_compile_unprepared(const mc_graph *g, const mc_options *opt,
                                        mc_program **out)
{
    *out = NULL;
    if (!g || !opt || opt->backend == MC_BACKEND_AUTO)
        return mc_fail(MC_ERR_INPUT, "mc_program_compile_unprepared: needs a graph and a backend");
    if (g->noutputs <= 0)
        return mc_fail(MC_ERR_INPUT, "graph '%s' has no outputs", g->name ? g->name : "");
    if (mc_graph_num_syms(g) > 0)
        return mc_fail(MC_ERR_INPUT, "graph '%s' has symbolic dimensions: bind them first (--dim NAME=INT)",
                       g->name ? g->name : "");
    mc_program *p = new_program();
    if (!p)
        return MC_ERR_SYSTEM;
    p->opt = *opt;
    p->backend = built_backend(opt->backend);
    if (!p->backend) {
        mc_program_free(p);
        return mc_fail(MC_ERR_SYSTEM, "backend '%s' is not available: this minic was built without it",
                       mc_backend_name(opt->backend));
    }
    p->graph = mc_graph_clone(g);
    if (!p->graph) {
        mc_program_free(p);
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    }
    mc_compile_options co = mc_compile_options_for_backend(opt, p->backend);
    mc_status st = mc_compile_kernels(p->graph, &co, &p->kp);
    if (st == MC_OK)
        st = allocate_host(p);
    if (st != MC_OK) {
        mc_program_free(p);
        return st;
    }
    *out = p;
    return MC_OK;
}

void mc_program_free(mc_program *p)
{
    if (!p)
        return;
    mc_symbolic_free(p);
    mc_parallel_free(p);
    if (p->backend && p->backend->release && p->kp)
        p->backend->release(p);
    if (p->host_alloc && p->kp)
        for (int b = 0; b < p->kp->nbuffers; b++)
            host_block_release(p->host_alloc[b]);
    free(p->host_alloc);
    free(p->host);
    free(p->bound);
    free(p->dirty);
    free(p->has_value);
    free(p->stale);
    free(p->external);
    free(p->outputs);
    free(p->feedback);
    if (p->unread)
        for (int i = 0; i < p->graph->nnodes; i++)
            free(p->unread[i]);
    free(p->unread);
    free(p->notes);
    if (p->kp)
        kir_program_free(p->kp);
    mc_graph_free(p->graph);
    if (p->lock_ready)
        pthread_mutex_destroy(&p->lock);
    free(p);
}

const char *mc_program_backend(const mc_program *p)
{
    if (!p)
        mc_fail(MC_ERR_INPUT, "mc_program_backend: no program");
    return p && p->backend ? p->backend->name : "none";
}

/* Wait for the executions mc_program_run_async queued (backend->wait): before anything reads
 * or copies the program's buffers, and before a synchronous run. A failure the device found in
 * one of them (a check, a failed kernel) is returned here, once. */
static mc_status deliver(mc_program *p);

static mc_status settle(mc_program *p)
{
    if (!p->queued)
        return MC_OK;
    p->queued = 0;
    mc_status st = p->backend->wait(p);
    return st == MC_OK ? deliver(p) : st;
}

/* Outputs bound to the caller's host memory (mc_program_bind_output_memory) on a backend whose
 * outputs stay on a device: read back into it now, after a run (or the wait of queued runs). */
static mc_status deliver(mc_program *p)
{
    if (p->backend->runs_on_host || !p->stale)
        return MC_OK;
    for (int i = 0; i < p->graph->noutputs; i++) {
        int b = p->outputs[i];
        if (p->external[b] != MC_EXTERNAL_HOST || !p->stale[b])
            continue;
        mc_status st = p->backend->download(p, b);
        if (st != MC_OK)
            return st;
        p->stale[b] = false;
    }
    return MC_OK;
}

/* The program's own host array of buffer b (host[b] while it is not the caller's). */
static void *own_array(const mc_program *p, int b)
{
    return (void *)(((uintptr_t)p->host_alloc[b] + sizeof(host_block) + 63) & ~(uintptr_t)63);
}

/* Buffer b has a new value in a way that leaves it not dirty (given on the device, fed back, the
 * caller's memory taken home): the prep kernels that read it run again before the next run.
 * (A dirty param makes them run too: mc_program_prep_params.) */
static void param_changed(mc_program *p, int b)
{
    if (b >= 0 && p->kp && p->kp->buffers[b].prep_read)
        p->prep_due = true;
}

/* End buffer b's binding to the caller's memory (mc_program_bind_memory): it uses the program's
 * own memory again, holding (keep) what the caller's holds now. */
static mc_status external_end(mc_program *p, int b, bool keep)
{
    if (!p->external || !p->external[b])
        return MC_OK;
    param_changed(p, b);
    if (p->external[b] == MC_EXTERNAL_HOST || p->external[b] == MC_EXTERNAL_MAPPED) {
        if (p->external[b] == MC_EXTERNAL_MAPPED) { /* the device's buffer is its own again */
            bool done = false;
            char why[200];
            mc_status st = settle(p);
            if (st == MC_OK)
                st = p->backend->map_host(p, b, NULL, 0, &done, why, sizeof why);
            if (st != MC_OK)
                return st;
        }
        void *own = own_array(p, b);
        if (keep)
            memcpy(own, p->host[b], (size_t)p->kp->buffers[b].numel * mc_dtype_size(p->kp->buffers[b].dtype));
        p->host[b] = own;
        p->dirty[b] = true; /* an input: uploaded from it at the next run */
        p->stale[b] = false;
    } else {
        mc_status st = settle(p);
        if (st == MC_OK)
            st = p->backend->bind_device(p, b, 0); /* the device's copy comes home */
        if (st != MC_OK)
            return st;
    }
    p->external[b] = 0;
    return MC_OK;
}

/* Make host[b] current: a backend whose buffers live on a device (cuda) marks an output
 * `stale` after a run instead of reading it back, and an input given on the device by
 * mc_program_set_from_output; it is read back here, when the host copy is asked for. */
static mc_status fresh(mc_program *p, int b)
{
    mc_status st = settle(p);
    if (st != MC_OK)
        return st;
    if (!p->stale || !p->stale[b])
        return MC_OK;
    st = p->backend->download(p, b);
    if (st == MC_OK)
        p->stale[b] = false;
    return st;
}

/* ---- the program's mutex ------------------------------------------------------------------- */

/* Each public call below checks its pointers, then runs its body (a static function of the same
 * name without the prefix) with the program's mutex held. */
#define LOCKED(p, call)                                                                        \
    do {                                                                                       \
        pthread_mutex_lock(&(p)->lock);                                                        \
        mc_status locked_status = (call);                                                      \
        pthread_mutex_unlock(&(p)->lock);                                                      \
        return locked_status;                                                                  \
    } while (0)

/* ---- binding ------------------------------------------------------------------------------- */

static mc_status declaration_or_fail(const mc_program *p, const char *name, const char *where,
                                     int *node)
{
    *node = find_declaration(p, name);
    if (*node >= 0)
        return MC_OK;
    const mc_graph *g = p->graph;
    char graph[160] = "the graph";
    if (g->name)
        snprintf(graph, sizeof graph, "graph '%s'", g->name);
    for (int i = 0; i < g->nnodes; i++) /* a value the graph computes cannot be given */
        if (g->nodes[i].name && !strcmp(g->nodes[i].name, name)) {
            char at[32] = "";
            if (g->nodes[i].line > 0)
                snprintf(at, sizeof at, " at line %d", g->nodes[i].line);
            return mc_fail(MC_ERR_INPUT, "%s%s'%s' is computed by %s%s, not an input or param",
                           where ? where : "", where ? ": " : "", name, graph, at);
        }
    /* The nearest declared names, else the list of them (docs/FORMAT.md §3: a wrong name names
     * the valid ones). */
    const char **names = malloc((g->nnodes > 0 ? (size_t)g->nnodes : 1) * sizeof *names);
    int n = 0;
    for (int i = 0; names && i < g->nnodes; i++)
        if (is_declaration(&g->nodes[i]) && g->nodes[i].name)
            names[n++] = g->nodes[i].name;
    char hint[512] = "";
    char near[256];
    if (names && mc_suggest(name, strlen(name), names, n, near, sizeof near)) {
        snprintf(hint, sizeof hint, " (did you mean %s?)", near);
    } else if (names && n > 0) {
        size_t used = (size_t)snprintf(hint, sizeof hint, " (it declares ");
        for (int i = 0; i < n && used < sizeof hint; i++) {
            if (used + strlen(names[i]) + 16 >= sizeof hint) {
                used += (size_t)snprintf(hint + used, sizeof hint - used, ", ...");
                break;
            }
            used += (size_t)snprintf(hint + used, sizeof hint - used, "%s'%s'", i ? ", " : "",
                                     names[i]);
        }
        if (used < sizeof hint)
            snprintf(hint + used, sizeof hint - used, ")");
    }
    free(names);
    if (where)
        return mc_fail(MC_ERR_INPUT, "%s: %s has no input or param named '%s'%s", where, graph,
                       name, hint);
    return mc_fail(MC_ERR_INPUT, "%s has no input or param named '%s'%s", graph, name, hint);
}

/* The same error for runtime/symbolic.c, whose programs bind by name too: name is not declared. */
mc_status mc_program_undeclared(const mc_program *p, const char *name, const char *where)
{
    int node;
    mc_status st = declaration_or_fail(p, name, where, &node);
    return st != MC_OK ? st : mc_fail(MC_ERR_INPUT, "'%s' is declared", name); /* not reached */
}

/* Copy a checked value into node's buffer and mark it bound. A declaration no kernel reads has
 * no buffer: its value is kept aside instead, only so that mc_program_save_inputs can write it
 * (a saved file must hold every param, or --weights refuses it). A parallel program has no
 * buffers: the value goes to its ranks, and is kept aside the same way. */
static mc_status bind(mc_program *p, int node, const void *data, size_t bytes)
{
    if (p->par) { /* split for the ranks; the whole value is kept below, for save_inputs */
        mc_status st = mc_parallel_bind(p, node, data, bytes);
        if (st != MC_OK)
            return st;
    }
    int b = buffer_of(p, node, true);
    if (b >= 0) {
        mc_status st = external_end(p, b, false); /* binding again ends a binding to memory */
        if (st == MC_OK)
            st = host_unshare(p, b);
        if (st != MC_OK)
            return st;
        memcpy(p->host[b], data, bytes);
        p->bound[b] = p->has_value[b] = p->dirty[b] = true;
        p->stale[b] = false;
        return MC_OK;
    }
    if (!p->unread && !(p->unread = calloc((size_t)p->graph->nnodes, sizeof *p->unread)))
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    void *copy = malloc(bytes ? bytes : 1);
    if (!copy)
        return mc_fail(MC_ERR_SYSTEM, "out of memory (%zu bytes)", bytes);
    if (bytes)
        memcpy(copy, data, bytes);
    free(p->unread[node]);
    p->unread[node] = copy;
    return MC_OK;
}

static mc_status program_set(mc_program *p, const char *name, const void *data, size_t bytes)
{
    if (p->sym)
        return mc_symbolic_set(p, name, data, bytes);
    int node;
    if (declaration_or_fail(p, name, NULL, &node) != MC_OK)
        return MC_ERR_INPUT;
    const mc_node *n = &p->graph->nodes[node];
    size_t want = 0;
    char type[128];
    if (!node_bytes(n, &want))
        return mc_fail(MC_ERR_INPUT, "%s '%s' is too large", kind_word(n), name);
    if (bytes != want)
        return mc_fail(MC_ERR_INPUT, "%s '%s' is %s (%zu bytes) but %zu bytes were given",
                       kind_word(n), name, node_type(n, type, sizeof type), want, bytes);
    if (!data && bytes)
        return mc_fail(MC_ERR_INPUT, "mc_program_set: no data for '%s'", name);
    return bind(p, node, data, bytes);
}

mc_status mc_program_set(mc_program *p, const char *name, const void *data, size_t bytes)
{
    if (!p || !name)
        return mc_fail(MC_ERR_INPUT, "mc_program_set: no %s", p ? "name" : "program");
    LOCKED(p, program_set(p, name, data, bytes));
}

/* Check that an array read from `path` fits the declaration of node. */
static mc_status check_array(const mc_program *p, int node, const mc_array *a, const char *path)
{
    const mc_node *n = &p->graph->nodes[node];
    char want[128], got[128];
    bool same = a->dtype == n->dtype && a->rank == n->rank;
    for (int d = 0; same && d < n->rank; d++)
        same = a->shape[d] == n->shape[d];
    if (!same)
        return mc_fail(MC_ERR_INPUT, "%s: %s '%s' is declared %s but the file holds %s", path,
                       kind_word(n), n->name, node_type(n, want, sizeof want),
                       type_string(a->dtype, a->shape, a->rank, got, sizeof got));
    size_t bytes = 0;
    if (!node_bytes(n, &bytes) || bytes != a->bytes)
        return mc_fail(MC_ERR_INPUT, "%s: tensor for '%s' has %zu bytes, expected %zu", path,
                       n->name, a->bytes, bytes);
    return MC_OK;
}

/* The tensor of declaration `node` in st (--weights, or --input NAME=FILE.safetensors). A
 * tensor that is missing says so; one that is there in a dtype minic does not read (F64,
 * I64, ...) names both dtypes, the declared one and the file's, never "missing"
 * (docs/FORMAT.md §4). */
static mc_status safetensors_get_declared(const mc_program *p, const mc_safetensors *st, int node,
                                          const char *path, mc_array *a)
{
    const mc_node *n = &p->graph->nodes[node];
    char type[128], held[160];
    if (!mc_safetensors_describe(st, n->name, held, sizeof held))
        return mc_fail(MC_ERR_INPUT, "%s: %s '%s' (%s) is missing from the file", path,
                       kind_word(n), n->name, node_type(n, type, sizeof type));
    if (mc_safetensors_get(st, n->name, a) == MC_OK)
        return MC_OK;
    char want[16];
    size_t k = 0;
    for (const char *c = mc_dtype_name(n->dtype); *c && k + 1 < sizeof want; c++)
        want[k++] = (char)(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
    want[k] = '\0';
    bool readable = false; /* then it is the rank, past MC_MAX_RANK */
    for (const char *const *d = (const char *const[]){"F32[", "F16[", "BF16[", "I32[", "BOOL[", NULL};
         *d; d++)
        readable |= strncmp(held, *d, strlen(*d)) == 0;
    return mc_fail(MC_ERR_INPUT, "%s: %s '%s' is declared %s but the file holds %s%s%s%s", path,
                   kind_word(n), n->name, node_type(n, type, sizeof type), held,
                   readable ? "" : ", a dtype minic does not read (it reads F32, F16, BF16, I32 "
                                   "and BOOL: store it as ",
                   readable ? "" : want, readable ? "" : ")");
}

static mc_status program_load_npy(mc_program *p, const char *name, const char *path)
{
    if (p->sym)
        return mc_symbolic_load_file(p, name, path);
    int node;
    if (declaration_or_fail(p, name, path, &node) != MC_OK)
        return MC_ERR_INPUT;
    mc_array a = {0};
    char type[128];
    mc_status st = mc_npy_read(path, p->graph->nodes[node].dtype, &a);
    if (st != MC_OK) {
        char why[2048]; /* the reader's message names the file; say which declaration too */
        snprintf(why, sizeof why, "%s", mc_error_message());
        return mc_fail(st, "%s (for %s '%s', declared %s)", why,
                       kind_word(&p->graph->nodes[node]), name,
                       node_type(&p->graph->nodes[node], type, sizeof type));
    }
    st = check_array(p, node, &a, path);
    if (st == MC_OK)
        st = bind(p, node, a.data, a.bytes);
    free(a.data);
    return st;
}

mc_status mc_program_load_npy(mc_program *p, const char *name, const char *path)
{
    if (!p || !name || !path)
        return mc_fail(MC_ERR_INPUT, "mc_program_load_npy: no %s",
                       !p ? "program" : !name ? "name" : "path");
    LOCKED(p, program_load_npy(p, name, path));
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static mc_status program_load_file(mc_program *p, const char *name, const char *path)
{
    if (p->sym)
        return mc_symbolic_load_file(p, name, path);
    if (!ends_with(path, ".safetensors"))
        return program_load_npy(p, name, path);
    int node;
    if (declaration_or_fail(p, name, path, &node) != MC_OK)
        return MC_ERR_INPUT;
    mc_safetensors *st = NULL;
    mc_status s = mc_safetensors_open(path, &st);
    if (s != MC_OK)
        return s;
    mc_array a = {0};
    s = safetensors_get_declared(p, st, node, path, &a);
    if (s == MC_OK)
        s = check_array(p, node, &a, path);
    if (s == MC_OK)
        s = bind(p, node, a.data, a.bytes);
    mc_safetensors_close(st);
    return s;
}

mc_status mc_program_load_file(mc_program *p, const char *name, const char *path)
{
    if (!p || !name || !path)
        return mc_fail(MC_ERR_INPUT, "mc_program_load_file: no %s",
                       !p ? "program" : !name ? "name" : "path");
    LOCKED(p, program_load_file(p, name, path));
}

static mc_status program_load_weights(mc_program *p, const char *path)
{
    if (p->sym)
        return mc_symbolic_load_weights(p, path);
    mc_safetensors *st = NULL;
    mc_status s = mc_safetensors_open(path, &st);
    if (s != MC_OK)
        return s;
    /* Check every param first, then copy: a failure binds nothing. */
    for (int pass = 0; pass < 2 && s == MC_OK; pass++) {
        for (int i = 0; i < p->graph->nnodes && s == MC_OK; i++) {
            const mc_node *n = &p->graph->nodes[i];
            if (n->op != MC_OP_PARAM)
                continue;
            mc_array a = {0};
            s = safetensors_get_declared(p, st, i, path, &a);
            if (s == MC_OK)
                s = check_array(p, i, &a, path);
            if (s == MC_OK && pass == 1)
                s = bind(p, i, a.data, a.bytes);
        }
    }
    mc_safetensors_close(st);
    return s;
}

mc_status mc_program_load_weights(mc_program *p, const char *path)
{
    if (!p || !path)
        return mc_fail(MC_ERR_INPUT, "mc_program_load_weights: no %s", p ? "path" : "program");
    LOCKED(p, program_load_weights(p, path));
}

static mc_status program_fill_random(mc_program *p, uint64_t seed)
{
    if (p->sym)
        return mc_symbolic_fill_random(p, seed);
    if (p->par)
        return mc_parallel_fill_random(p, seed);
    for (int i = 0; i < p->graph->nnodes; i++) {
        const mc_node *n = &p->graph->nodes[i];
        if (!is_declaration(n))
            continue;
        int b = buffer_of(p, i, true);
        if (b < 0 || p->bound[b])
            continue;
        mc_status st = host_unshare(p, b); /* a generated param another program shares */
        if (st != MC_OK)
            return st;
        mc_fill_random(p->host[b], n->dtype, mc_node_numel(n), seed, n->name);
        p->has_value[b] = p->dirty[b] = true;
    }
    p->seeded = true; /* what mc_program_save_inputs generates for unread declarations */
    p->seed = seed;
    return MC_OK;
}

mc_status mc_program_fill_random(mc_program *p, uint64_t seed)
{
    if (!p)
        return mc_fail(MC_ERR_INPUT, "mc_program_fill_random: no program");
    LOCKED(p, program_fill_random(p, seed));
}

/* ---- running and outputs ------------------------------------------------------------------- */

/* Every input and param read by a kernel has a value. Inputs in the caller's host memory are
 * read afresh by every run (cuda uploads them, cpu repacks what it packs of them). */
static mc_status check_bound(mc_program *p)
{
    for (int b = 0; b < p->kp->nbuffers; b++)
        if (p->external[b] == MC_EXTERNAL_HOST && p->kp->buffers[b].kind != KBUF_OUTPUT)
            p->dirty[b] = true;
    for (int b = 0; b < p->kp->nbuffers; b++) {
        const kir_buffer *buf = &p->kp->buffers[b];
        if ((buf->kind == KBUF_INPUT || buf->kind == KBUF_PARAM) && !p->has_value[b]) {
            char name[64];
            return mc_fail(MC_ERR_INPUT,
                           "%s '%s' has no value: bind it (mc_program_set, a file) or call "
                           "mc_program_fill_random",
                           buf->kind == KBUF_PARAM ? "param" : "input",
                           mc_node_name(p->graph, buf->node, name, sizeof name));
        }
    }
    return MC_OK;
}

static mc_status feed_back_after_run(mc_program *p);

static mc_status program_run(mc_program *p)
{
    if (p->sym)
        return mc_symbolic_run(p);
    if (p->par)
        return mc_parallel_run(p);
    mc_status st = settle(p); /* an earlier queued run's failure comes first */
    if (st == MC_OK)
        st = check_bound(p);
    if (st == MC_OK)
        st = mc_program_prep_params(p); /* the kernels of the params alone, when a param changed */
    if (st == MC_OK)
        st = p->backend->run(p);
    if (st != MC_OK)
        return st;
    p->runs++;
    if ((st = deliver(p)) != MC_OK)
        return st;
    return feed_back_after_run(p);
}

/* mc_program_run_async: queued where the backend can queue (cuda), else mc_program_run. */
static mc_status program_run_async(mc_program *p)
{
    if (p->sym || p->par || !p->backend->launch || !p->backend->wait)
        return program_run(p);
    mc_status st = check_bound(p);
    if (st == MC_OK)
        st = mc_program_prep_params(p); /* queued on the stream ahead of the run */
    if (st == MC_OK)
        st = p->backend->launch(p);
    if (st != MC_OK)
        return st;
    p->runs++;
    p->queued++;
    return feed_back_after_run(p);
}

mc_status mc_program_run_async(mc_program *p)
{
    if (!p)
        return mc_fail(MC_ERR_INPUT, "mc_program_run_async: no program");
    if (p->parent)
        return mc_program_run(p->parent);
    LOCKED(p, program_run_async(p));
}

mc_status mc_program_wait(mc_program *p)
{
    if (!p)
        return mc_fail(MC_ERR_INPUT, "mc_program_wait: no program");
    if (p->parent)
        return MC_OK;
    LOCKED(p, settle(p));
}

mc_status mc_program_run(mc_program *p)
{
    if (!p)
        return mc_fail(MC_ERR_INPUT, "mc_program_run: no program");
    if (p->parent) /* a rank runs only with the others: the parallel program runs them all */
        return mc_program_run(p->parent);
    LOCKED(p, program_run(p));
}

mc_status mc_program_run_rank(mc_program *p)
{
    return program_run(p);
}

int mc_program_num_outputs(const mc_program *p)
{
    if (!p)
        mc_fail(MC_ERR_INPUT, "mc_program_num_outputs: no program");
    return p ? p->graph->noutputs : 0;
}

static mc_status program_output(mc_program *p, int index, mc_tensor *out)
{
    if (p->sym && mc_symbolic_current(p))
        return program_output(mc_symbolic_current(p), index, out);
    if (p->par && p->runs > 0)
        return program_output(mc_parallel_rank(p, 0), index, out);
    if (index < 0 || index >= p->graph->noutputs)
        return mc_fail(MC_ERR_INPUT, "mc_program_output: index %d out of range (the graph has %d outputs)",
                       index, p->graph->noutputs);
    if (p->runs == 0)
        return mc_fail(MC_ERR_INPUT, "mc_program_output: the program has not run yet (mc_program_run)");
    mc_status st = fresh(p, p->outputs[index]); /* cuda: read back from the GPU now */
    if (st != MC_OK)
        return st;
    int node = p->graph->outputs[index];
    const mc_node *n = &p->graph->nodes[node];
    static _Thread_local char unnamed[64];
    memset(out, 0, sizeof *out);
    out->name = n->name ? n->name : mc_node_name(p->graph, node, unnamed, sizeof unnamed);
    out->dtype = n->dtype;
    out->rank = n->rank;
    memcpy(out->shape, n->shape, sizeof out->shape);
    out->data = p->host[p->outputs[index]];
    node_bytes(n, &out->bytes);
    return MC_OK;
}

mc_status mc_program_output(mc_program *p, int index, mc_tensor *out)
{
    if (!p || !out)
        return mc_fail(MC_ERR_INPUT, "mc_program_output: no %s", p ? "tensor" : "program");
    LOCKED(p, program_output(p, index, out));
}

static mc_status program_read_output(mc_program *p, int index, void *data, size_t bytes)
{
    mc_tensor t;
    mc_status st = program_output(p, index, &t);
    if (st != MC_OK)
        return st;
    if (bytes != t.bytes)
        return mc_fail(MC_ERR_INPUT, "mc_program_read_output: output %d ('%s') is %zu bytes but %zu were given",
                       index, t.name, t.bytes, bytes);
    if (bytes)
        memcpy(data, t.data, bytes);
    return MC_OK;
}

mc_status mc_program_read_output(mc_program *p, int index, void *data, size_t bytes)
{
    if (!p || (!data && bytes))
        return mc_fail(MC_ERR_INPUT, "mc_program_read_output: no %s", p ? "destination" : "program");
    LOCKED(p, program_read_output(p, index, data, bytes));
}

/* ---- handing an output to an input --------------------------------------------------------- */

/* "program 'gpt2_decode'", or "the program of an unnamed graph", for messages. */
static const char *program_label(const mc_program *p, char *buf, size_t size)
{
    if (p->graph && p->graph->name)
        snprintf(buf, size, "program '%s'", p->graph->name);
    else
        snprintf(buf, size, "the program of an unnamed graph");
    return buf;
}

static mc_status program_set_from_output(mc_program *dst, const char *name, mc_program *src, int index)
{
    char dname[160], sname[160], what[512], out_type[128];
    program_label(dst, dname, sizeof dname);
    program_label(src, sname, sizeof sname);
    if (index < 0 || index >= src->graph->noutputs)
        return mc_fail(MC_ERR_INPUT, "mc_program_set_from_output: output %d of %s is out of range (it has %d "
                       "output%s)", index, sname, src->graph->noutputs, src->graph->noutputs == 1 ? "" : "s");
    mc_program *r = src->runs > 0 ? mc_program_ran(src) : NULL; /* the program whose buffers hold it */
    if (!r || r->runs == 0) {
        const mc_node *o = &src->graph->nodes[src->graph->outputs[index]];
        char unnamed[64];
        return mc_fail(MC_ERR_INPUT, "mc_program_set_from_output: %s %s, so its output %d ('%s') "
                       "has no value to give to '%s' of %s (mc_program_run first)", sname,
                       src->runs == 0 ? "has not run yet" : "has no outputs from its last run", index,
                       o->name ? o->name : mc_node_name(src->graph, src->graph->outputs[index], unnamed, sizeof unnamed),
                       name, dname);
    }
    if (r != dst && r->queued) { /* src's queued runs first: dst's copy reads their output */
        mc_status st = settle(r);
        if (st != MC_OK)
            return st;
    }
    int onode = r->graph->outputs[index], ob = r->outputs[index];
    const mc_node *o = &r->graph->nodes[onode]; /* its shape as bound (a symbolic src's run) */
    char unnamed[64];
    const char *oname = o->name ? o->name : mc_node_name(r->graph, onode, unnamed, sizeof unnamed);
    snprintf(what, sizeof what, "mc_program_set_from_output: output %d ('%s', %s) of %s", index, oname,
             node_type(o, out_type, sizeof out_type), sname);
    int node;
    if (declaration_or_fail(dst, name, what, &node) != MC_OK)
        return MC_ERR_INPUT;
    const mc_node *n = &dst->graph->nodes[node];
    size_t bytes = 0;
    node_bytes(o, &bytes); /* the output was allocated: its size fits */
    const void *data = r->host[ob]; /* on the paths through the host, made fresh first */
    mc_status fst = MC_OK;
    if (dst->sym) { /* values wait on the host until a run compiles or picks their program */
        if ((fst = fresh(r, ob)) != MC_OK)
            return fst;
        mc_status st = mc_symbolic_set_array(dst, node, o->dtype, o->shape, o->rank, data, bytes);
        if (st != MC_OK) {
            char why[1024];
            snprintf(why, sizeof why, "%s", mc_error_message());
            return mc_fail(st, "%s does not fit %s: %s", what, dname, why);
        }
        return MC_OK;
    }
    bool same = o->dtype == n->dtype && o->rank == n->rank;
    for (int d = 0; same && d < n->rank; d++)
        same = o->shape[d] == n->shape[d];
    if (!same) {
        char want[128];
        return mc_fail(MC_ERR_INPUT, "%s does not fit %s '%s' of %s, declared %s", what, kind_word(n), name,
                       dname, node_type(n, want, sizeof want));
    }
    int b = buffer_of(dst, node, true);
    if (!dst->par)
        param_changed(dst, b);
    if (b >= 0 && r == dst && (ob == b || dst->host[ob] == dst->host[b])) {
        /* `output x` of input x given back to x, or an output fed back in place on the host:
         * the input holds it */
        dst->bound[b] = dst->has_value[b] = true;
        return MC_OK;
    }
    if (b >= 0 && !dst->par && (fst = external_end(dst, b, false)) != MC_OK)
        return fst;
    if (b >= 0 && !dst->par && dst->backend == r->backend && dst->backend->copy_output) {
        bool done = false;
        mc_status st = dst->backend->copy_output(dst, b, r, ob, &done);
        if (st != MC_OK)
            return st;
        if (done) {
            dst->bound[b] = dst->has_value[b] = dst->stale[b] = true;
            dst->dirty[b] = false;
            return MC_OK;
        }
    }
    if ((fst = fresh(r, ob)) != MC_OK)
        return fst;
    return bind(dst, node, data, bytes); /* the host arrays (ref, cpu), or through the host */
}

mc_status mc_program_set_from_output(mc_program *dst, const char *input_name, mc_program *src,
                                     int output_index)
{
    if (!dst || !input_name || !src)
        return mc_fail(MC_ERR_INPUT, "mc_program_set_from_output: no %s",
                       !dst ? "destination program" : !input_name ? "input name" : "source program");
    if (dst == src)
        LOCKED(dst, program_set_from_output(dst, input_name, src, output_index));
    /* both mutexes, always in the same order (by address), so that two threads handing outputs
     * both ways between the same two programs cannot deadlock */
    mc_program *first = (uintptr_t)dst < (uintptr_t)src ? dst : src, *second = first == dst ? src : dst;
    pthread_mutex_lock(&first->lock);
    pthread_mutex_lock(&second->lock);
    mc_status st = program_set_from_output(dst, input_name, src, output_index);
    pthread_mutex_unlock(&second->lock);
    pthread_mutex_unlock(&first->lock);
    return st;
}

/* ---- outputs fed back to inputs ----------------------------------------------------------- */

/* Can output buffer ob be written straight into input buffer ib (kp's kernels in order)? Yes
 * when exactly one kernel W writes ob, a pointwise one, through one view that touches every
 * element once; W reads ib, if at all, only through loads of that very view (each point reads
 * the element it then overwrites, so no point sees another's new value); and no kernel after
 * W reads ib (kernels before it read the old value, as they would anyway). A cache's `update`
 * is such a W: where(pos <= i < pos + len, new, cache[i]) stored at i. Anything else (a
 * reader of the old cache after the update, a reduction, a gather from the cache) is not. */
static bool in_place_safe(const kir_program *kp, int ib, int ob)
{
    int writer = -1, store_view = -1;
    for (int k = 0; k < kp->nkernels; k++) {
        const kir_kernel *kk = &kp->kernels[k];
        for (int i = 0; i < kk->nstores; i++)
            if (kk->views[kk->stores[i].view].buffer == ob) {
                if (writer >= 0)
                    return false; /* two stores of ob, or two kernels */
                writer = k;
                store_view = kk->stores[i].view;
            }
    }
    if (writer < 0)
        return false;
    const kir_kernel *w = &kp->kernels[writer];
    if (w->category != KIR_POINTWISE || w->nrow != w->rank)
        return false;
    const kir_view *vs = &w->views[store_view];
    int64_t points = 1; /* the store touches every element of ob once: a permutation */
    for (int d = 0; d < w->rank; d++) {
        points *= w->shape[d];
        if (w->shape[d] > 1 && vs->stride[d] == 0)
            return false;
    }
    if (points != kp->buffers[ob].numel)
        return false;
    for (int v = 0; v < w->nviews; v++) {
        const kir_view *x = &w->views[v];
        if (x->buffer != ib)
            continue;
        if (x->offset != vs->offset)
            return false;
        for (int d = 0; d < w->rank; d++)
            if (w->shape[d] > 1 && x->stride[d] != vs->stride[d])
                return false;
    }
    for (int i = 0; i < w->ncode; i++) /* a gather moves its view by data */
        if (w->code[i].kind == KI_GATHER && w->views[w->code[i].view].buffer == ib)
            return false;
    for (int k = writer + 1; k < kp->nkernels; k++)
        for (int v = 0; v < kp->kernels[k].nviews; v++)
            if (kp->kernels[k].views[v].buffer == ib)
                return false;
    return true;
}

/* The pairing of input buffer ib, or NULL. */
static mc_feedback *feedback_of(mc_program *p, int ib)
{
    for (int i = 0; i < p->nfeedback; i++)
        if (p->feedback[i].ib == ib)
            return &p->feedback[i];
    return NULL;
}

/* End pairing f: ob gets its own memory back, holding what it holds now (the last run's
 * output), and the pairing is removed. */
static mc_status feedback_end(mc_program *p, mc_feedback *f)
{
    if (f->in_place) {
        if (p->backend->runs_on_host) {
            memcpy(f->own, p->host[f->ib], (size_t)p->kp->buffers[f->ob].numel * mc_dtype_size(p->kp->buffers[f->ob].dtype));
            p->host[f->ob] = f->own;
        } else {
            bool done = false;
            mc_status st = p->backend->alias(p, f->ob, f->ib, false, &done);
            if (st != MC_OK)
                return st;
        }
    }
    *f = p->feedback[--p->nfeedback];
    return MC_OK;
}

/* After each run: every output fed back becomes its input's value (nothing to do in place but
 * to say where the value is). */
static mc_status feed_back_after_run(mc_program *p)
{
    for (int i = 0; i < p->nfeedback; i++) {
        const mc_feedback *f = &p->feedback[i];
        int ib = f->ib, ob = f->ob;
        p->bound[ib] = p->has_value[ib] = true;
        param_changed(p, ib);
        if (f->in_place || !p->backend->runs_on_host) {
            bool done = f->in_place;
            if (!done && p->backend->copy_output) {
                mc_status st = p->backend->copy_output(p, ib, p, ob, &done);
                if (st != MC_OK)
                    return st;
            }
            if (done) {
                if (!p->backend->runs_on_host) { /* the device's copy is the value */
                    p->stale[ib] = true;
                    p->dirty[ib] = false;
                } else {
                    p->dirty[ib] = true; /* the cpu backend repacks what it packed of it */
                }
                continue;
            }
        }
        mc_status st = fresh(p, ob); /* between the host arrays (ref, cpu), or through them */
        if (st == MC_OK)
            st = host_unshare(p, ib); /* a param shared with another program keeps its value there */
        if (st != MC_OK)
            return st;
        memcpy(p->host[ib], p->host[ob], (size_t)p->kp->buffers[ib].numel * mc_dtype_size(p->kp->buffers[ib].dtype));
        p->dirty[ib] = true;
        p->stale[ib] = false;
    }
    return MC_OK;
}

static mc_status program_feed_back(mc_program *p, const char *name, int index, bool *in_place)
{
    char pname[160], what[512], out_type[128];
    program_label(p, pname, sizeof pname);
    if (p->sym || p->par)
        return mc_fail(MC_ERR_INPUT, "mc_program_feed_back: %s is %s; outputs are fed back in ordinary "
                       "programs only (mc_program_set_from_output after each run works for it)", pname,
                       p->sym ? "a program with symbolic dimensions" : "tensor parallel (mc_options.devices)");
    if (index < -1 || index >= p->graph->noutputs)
        return mc_fail(MC_ERR_INPUT, "mc_program_feed_back: output %d of %s is out of range (it has %d "
                       "output%s; -1 ends a pairing)", index, pname, p->graph->noutputs,
                       p->graph->noutputs == 1 ? "" : "s");
    int node;
    snprintf(what, sizeof what, "mc_program_feed_back");
    if (index >= 0) {
        int onode = p->graph->outputs[index];
        const mc_node *o = &p->graph->nodes[onode];
        char unnamed[64];
        snprintf(what, sizeof what, "mc_program_feed_back: output %d ('%s', %s) of %s", index,
                 o->name ? o->name : mc_node_name(p->graph, onode, unnamed, sizeof unnamed),
                 node_type(o, out_type, sizeof out_type), pname);
    }
    if (declaration_or_fail(p, name, what, &node) != MC_OK)
        return MC_ERR_INPUT;
    const mc_node *n = &p->graph->nodes[node];
    if (index >= 0) {
        const mc_node *o = &p->graph->nodes[p->graph->outputs[index]];
        bool same = o->dtype == n->dtype && o->rank == n->rank;
        for (int d = 0; same && d < n->rank; d++)
            same = o->shape[d] == n->shape[d];
        if (!same) {
            char want[128];
            return mc_fail(MC_ERR_INPUT, "%s does not fit %s '%s', declared %s", what, kind_word(n), name,
                           node_type(n, want, sizeof want));
        }
    }
    mc_status st = settle(p); /* nothing queued may see the buffers move */
    if (st != MC_OK)
        return st;
    int ib = buffer_of(p, node, true);
    mc_feedback *old = ib >= 0 ? feedback_of(p, ib) : NULL;
    if (old && (st = feedback_end(p, old)) != MC_OK)
        return st;
    if (in_place)
        *in_place = false;
    if (index < 0 || ib < 0) /* ended; or an input no kernel reads: it keeps its value */
        return MC_OK;
    int ob = p->outputs[index];
    if (p->external[ib] || p->external[ob])
        return mc_fail(MC_ERR_INPUT, "%s: %s is bound to the caller's memory (mc_program_bind_%smemory): "
                       "end that binding first (data NULL)", what,
                       p->external[ib] ? "the input" : "the output", p->external[ib] ? "" : "output_");
    if (ob == ib) { /* `output x` of input x: it holds it already */
        if (in_place)
            *in_place = true;
        return MC_OK;
    }
    mc_feedback *grown = realloc(p->feedback, (size_t)(p->nfeedback + 1) * sizeof *grown);
    if (!grown)
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    p->feedback = grown;
    mc_feedback *f = &p->feedback[p->nfeedback++];
    *f = (mc_feedback){.ib = ib, .ob = ob, .own = p->host[ob]};
    bool taken = false; /* another pairing writes ob in place already */
    for (int i = 0; i < p->nfeedback - 1; i++)
        taken |= p->feedback[i].ob == ob && p->feedback[i].in_place;
    if (!taken && !getenv("MINIC_NO_IN_PLACE") && in_place_safe(p->kp, ib, ob)) {
        if (p->backend->runs_on_host) {
            void *before = p->host[ib]; /* a shared param: write into a copy of one's own */
            if ((st = host_unshare(p, ib)) != MC_OK) {
                p->nfeedback--;
                return st;
            }
            if (p->host[ib] != before) { /* the other holder keeps the old block alive */
                memcpy(p->host[ib], before, (size_t)p->kp->buffers[ib].numel * mc_dtype_size(p->kp->buffers[ib].dtype));
                p->dirty[ib] = true;
            }
            p->host[ob] = p->host[ib];
            f->in_place = true;
        } else if (p->backend->alias) {
            bool done = false;
            if ((st = p->backend->alias(p, ob, ib, true, &done)) != MC_OK) {
                p->nfeedback--;
                return st;
            }
            f->in_place = done;
        }
    }
    if (in_place)
        *in_place = f->in_place;
    return MC_OK;
}

mc_status mc_program_feed_back(mc_program *p, const char *input_name, int output_index, bool *in_place)
{
    if (!p || !input_name)
        return mc_fail(MC_ERR_INPUT, "mc_program_feed_back: no %s", p ? "input name" : "program");
    LOCKED(p, program_feed_back(p, input_name, output_index, in_place));
}

/* ---- the caller's own memory -------------------------------------------------------------- */

/* Buffer b (an input, param or output: `label` names it in messages) bound to the caller's
 * memory at data, or (data NULL) that binding ended. The size was checked. */
static mc_status bind_external(mc_program *p, int b, void *data, mc_memory where, const char *label)
{
    bool device = where == MC_MEMORY_DEVICE;
    if (where == MC_MEMORY_HOST_MAPPED && p->backend->runs_on_host)
        where = MC_MEMORY_HOST; /* read and written in place there already */
    for (int i = 0; i < p->nfeedback; i++)
        if (p->feedback[i].ib == b || p->feedback[i].ob == b)
            return mc_fail(MC_ERR_INPUT, "mc_program_bind_memory: %s is fed back (mc_program_feed_back): end "
                           "that pairing first (output -1)", label);
    if (!data)
        return external_end(p, b, true);
    mc_dtype dt = p->kp->buffers[b].dtype;
    if (device && !p->backend->bind_device)
        return mc_fail(MC_ERR_INPUT, "mc_program_bind_memory: %s: device memory needs a program on the cuda "
                       "backend (this one runs on %s); bind host memory", label, p->backend->name);
    size_t align = where == MC_MEMORY_HOST ? mc_dtype_size(dt) : 256;
    if ((uintptr_t)data % align)
        return mc_fail(MC_ERR_INPUT, "mc_program_bind_memory: %s: the %s memory at %p is not aligned to %zu bytes%s",
                       label, device ? "device" : "host", data, align,
                       where == MC_MEMORY_HOST_MAPPED ? " (mapped host memory: aligned_alloc(256, ...))" : "");
    mc_status st = settle(p);
    if (st == MC_OK)
        st = external_end(p, b, false);
    if (st != MC_OK)
        return st;
    bool input = p->kp->buffers[b].kind != KBUF_OUTPUT;
    if (where == MC_MEMORY_HOST_MAPPED) {
        bool done = false;
        char why[300] = "the backend cannot map host memory";
        size_t bytes = (size_t)p->kp->buffers[b].numel * mc_dtype_size(dt);
        if ((st = host_unshare(p, b)) != MC_OK)
            return st;
        if (p->backend->map_host && (st = p->backend->map_host(p, b, data, bytes, &done, why, sizeof why)) != MC_OK)
            return st;
        if (done) {
            p->host[b] = data;
            p->external[b] = MC_EXTERNAL_MAPPED;
            p->dirty[b] = p->stale[b] = false; /* the device reads the caller's memory itself */
            if (input)
                p->bound[b] = p->has_value[b] = true;
            return MC_OK;
        }
        mc_program_note(p, "%s: the host memory at %p is not mapped for the GPU (%s): it is copied at each run "
                        "instead (MC_MEMORY_HOST)", label, data, why);
        device = false;
    }
    if (device) {
        if ((st = p->backend->bind_device(p, b, (uint64_t)(uintptr_t)data)) != MC_OK)
            return st;
        p->external[b] = MC_EXTERNAL_DEVICE;
        if (input) { /* the device holds the value: never uploaded */
            p->stale[b] = true;
            p->dirty[b] = false;
        }
    } else {
        if ((st = host_unshare(p, b)) != MC_OK)
            return st;
        p->host[b] = data;
        p->external[b] = MC_EXTERNAL_HOST;
        p->dirty[b] = true;
        p->stale[b] = false;
    }
    if (input)
        p->bound[b] = p->has_value[b] = true;
    return MC_OK;
}

static mc_status program_bind_memory(mc_program *p, const char *name, void *data, size_t bytes, mc_memory where)
{
    if (p->sym || p->par) {
        char pname[160];
        return mc_fail(MC_ERR_INPUT, "mc_program_bind_memory: %s is %s; memory is bound in ordinary programs only",
                       program_label(p, pname, sizeof pname),
                       p->sym ? "a program with symbolic dimensions" : "tensor parallel (mc_options.devices)");
    }
    int node;
    if (declaration_or_fail(p, name, "mc_program_bind_memory", &node) != MC_OK)
        return MC_ERR_INPUT;
    const mc_node *n = &p->graph->nodes[node];
    size_t want = 0;
    char type[128], label[256];
    node_bytes(n, &want);
    if (data && bytes != want)
        return mc_fail(MC_ERR_INPUT, "mc_program_bind_memory: %s '%s' is %s (%zu bytes) but %zu bytes were given",
                       kind_word(n), name, node_type(n, type, sizeof type), want, bytes);
    int b = buffer_of(p, node, true);
    if (b < 0) /* no kernel reads it: its value only matters to mc_program_save_inputs */
        return data && where != MC_MEMORY_DEVICE ? bind(p, node, data, bytes) : MC_OK;
    snprintf(label, sizeof label, "%s '%s'", kind_word(n), name);
    return bind_external(p, b, data, where, label);
}

static bool memory_kind_ok(const char *call, int where)
{
    if (where >= MC_MEMORY_HOST && where <= MC_MEMORY_HOST_MAPPED)
        return true;
    mc_fail(MC_ERR_INPUT, "%s: unknown kind of memory %d (MC_MEMORY_HOST, MC_MEMORY_DEVICE or "
            "MC_MEMORY_HOST_MAPPED)", call, (int)where);
    return false;
}

mc_status mc_program_bind_memory(mc_program *p, const char *name, void *data, size_t bytes, int where)
{
    if (!p || !name)
        return mc_fail(MC_ERR_INPUT, "mc_program_bind_memory: no %s", p ? "name" : "program");
    if (!memory_kind_ok("mc_program_bind_memory", where))
        return MC_ERR_INPUT;
    LOCKED(p, program_bind_memory(p, name, data, bytes, (mc_memory)where));
}

static mc_status program_bind_output_memory(mc_program *p, int index, void *data, size_t bytes, mc_memory where)
{
    char pname[160], label[256], unnamed[64], type[128];
    program_label(p, pname, sizeof pname);
    if (p->sym || p->par)
        return mc_fail(MC_ERR_INPUT, "mc_program_bind_output_memory: %s is %s; memory is bound in ordinary "
                       "programs only", pname, p->sym ? "a program with symbolic dimensions" : "tensor parallel (mc_options.devices)");
    if (index < 0 || index >= p->graph->noutputs)
        return mc_fail(MC_ERR_INPUT, "mc_program_bind_output_memory: output %d of %s is out of range (it has %d "
                       "output%s)", index, pname, p->graph->noutputs, p->graph->noutputs == 1 ? "" : "s");
    int onode = p->graph->outputs[index], b = p->outputs[index];
    const mc_node *o = &p->graph->nodes[onode];
    const char *oname = o->name ? o->name : mc_node_name(p->graph, onode, unnamed, sizeof unnamed);
    size_t want = 0;
    node_bytes(o, &want);
    if (data && bytes != want)
        return mc_fail(MC_ERR_INPUT, "mc_program_bind_output_memory: output %d ('%s') is %s (%zu bytes) but %zu "
                       "bytes were given", index, oname, node_type(o, type, sizeof type), want, bytes);
    if (p->kp->buffers[b].kind != KBUF_OUTPUT)
        return mc_fail(MC_ERR_INPUT, "mc_program_bind_output_memory: output %d ('%s') of %s is the %s '%s' itself: "
                       "bind that instead (mc_program_bind_memory)", index, oname, pname, kind_word(o), oname);
    snprintf(label, sizeof label, "output %d ('%s')", index, oname);
    return bind_external(p, b, data, where, label);
}

mc_status mc_program_bind_output_memory(mc_program *p, int index, void *data, size_t bytes, int where)
{
    if (!p)
        return mc_fail(MC_ERR_INPUT, "mc_program_bind_output_memory: no program");
    if (!memory_kind_ok("mc_program_bind_output_memory", where))
        return MC_ERR_INPUT;
    LOCKED(p, program_bind_output_memory(p, index, data, bytes, (mc_memory)where));
}

/* ---- params shared between programs -------------------------------------------------------- */

static mc_status program_share_params(mc_program *dst, mc_program *src, int *shared)
{
    int count = 0;
    if (shared)
        *shared = 0;
    if (dst->sym || src->sym || dst->par || src->par) {
        char dname[160], sname[160];
        const mc_program *which = dst->sym || dst->par ? dst : src;
        return mc_fail(MC_ERR_INPUT, "mc_program_share_params(%s, %s): %s is %s; params are shared between "
                       "ordinary programs only", program_label(dst, dname, sizeof dname),
                       program_label(src, sname, sizeof sname), which == dst ? "the first" : "the second",
                       which->sym ? "a program with symbolic dimensions" : "tensor parallel (mc_options.devices)");
    }
    if (dst == src)
        return MC_OK;
    /* aliased where both read the host arrays in place; else a copy (cuda keeps its own) */
    bool alias = dst->backend->runs_on_host && src->backend->runs_on_host;
    for (int i = 0; i < dst->graph->nnodes; i++) {
        const mc_node *n = &dst->graph->nodes[i];
        if (n->op != MC_OP_PARAM || !n->name)
            continue;
        int j = find_declaration(src, n->name);
        if (j < 0)
            continue;
        const mc_node *m = &src->graph->nodes[j];
        bool same = m->op == MC_OP_PARAM && m->dtype == n->dtype && m->rank == n->rank;
        for (int d = 0; same && d < n->rank; d++)
            same = m->shape[d] == n->shape[d];
        int b = buffer_of(dst, i, true), sb = buffer_of(src, j, true);
        if (!same || b < 0 || sb < 0 || !src->has_value[sb] || feedback_of(dst, b) || feedback_of(src, sb) ||
            dst->external[b] || src->external[sb])
            continue; /* another type, read by no kernel on one side, no value to share, or
                         an output is fed back to it in either program (it changes with every
                         run: shared, src's runs would change dst's param behind its back, and
                         dst's kernels computed from the params alone would not see it) */
        mc_status st = fresh(src, sb);
        if (st != MC_OK)
            return st;
        if (alias) {
            atomic_fetch_add(&((host_block *)src->host_alloc[sb])->refs, 1);
            host_block_release(dst->host_alloc[b]);
            dst->host_alloc[b] = src->host_alloc[sb];
            dst->host[b] = src->host[sb];
            dst->bound[b] = dst->has_value[b] = dst->dirty[b] = true; /* dirty: the cpu backend repacks */
            dst->stale[b] = false;
        } else {
            size_t bytes = 0;
            node_bytes(n, &bytes);
            if ((st = bind(dst, i, src->host[sb], bytes)) != MC_OK)
                return st;
        }
        count++;
    }
    if (shared)
        *shared = count;
    return MC_OK;
}

mc_status mc_program_share_params(mc_program *dst, mc_program *src, int *shared)
{
    if (!dst || !src)
        return mc_fail(MC_ERR_INPUT, "mc_program_share_params: no %s program", !dst ? "destination" : "source");
    if (dst == src)
        LOCKED(dst, program_share_params(dst, src, shared));
    mc_program *first = (uintptr_t)dst < (uintptr_t)src ? dst : src, *second = first == dst ? src : dst;
    pthread_mutex_lock(&first->lock);
    pthread_mutex_lock(&second->lock);
    mc_status st = program_share_params(dst, src, shared);
    pthread_mutex_unlock(&second->lock);
    pthread_mutex_unlock(&first->lock);
    return st;
}

static mc_status program_save_outputs(mc_program *p, const char *path)
{
    bool npy = ends_with(path, ".npy"), st = ends_with(path, ".safetensors");
    if (!npy && !st)
        return mc_fail(MC_ERR_INPUT, "%s: unknown output format (expected .safetensors or .npy)", path);
    int n = p->graph->noutputs;
    if (npy && n != 1)
        return mc_fail(MC_ERR_INPUT,
                       "%s: a .npy file holds one array but the graph has %d outputs (use .safetensors)",
                       path, n);
    if (p->runs == 0)
        return mc_fail(MC_ERR_INPUT, "%s: the program has not run yet, there are no outputs", path);
    if (p->sym)
        return program_save_outputs(mc_symbolic_current(p), path);
    if (p->par)
        return program_save_outputs(mc_parallel_rank(p, 0), path);
    mc_array *arrays = calloc((size_t)n, sizeof *arrays);
    const char **names = calloc((size_t)n, sizeof *names);
    char(*unnamed)[64] = calloc((size_t)n, sizeof *unnamed);
    mc_status s = MC_OK;
    if (!arrays || !names || !unnamed)
        s = mc_fail(MC_ERR_SYSTEM, "out of memory");
    for (int i = 0; i < n && s == MC_OK; i++) {
        int node = p->graph->outputs[i];
        const mc_node *nd = &p->graph->nodes[node];
        names[i] = nd->name ? nd->name : mc_node_name(p->graph, node, unnamed[i], sizeof unnamed[i]);
        if ((s = fresh(p, p->outputs[i])) != MC_OK)
            break;
        arrays[i].dtype = nd->dtype;
        arrays[i].rank = nd->rank;
        memcpy(arrays[i].shape, nd->shape, sizeof arrays[i].shape);
        arrays[i].data = p->host[p->outputs[i]];
        node_bytes(nd, &arrays[i].bytes);
    }
    if (s == MC_OK)
        s = npy ? mc_npy_write(path, &arrays[0]) : mc_safetensors_write(path, names, arrays, n);
    free(arrays);
    free(names);
    free(unnamed);
    return s;
}

mc_status mc_program_save_outputs(mc_program *p, const char *path)
{
    if (!p || !path)
        return mc_fail(MC_ERR_INPUT, "mc_program_save_outputs: no %s", p ? "path" : "program");
    LOCKED(p, program_save_outputs(p, path));
}

/* The value of declaration `node` for the file: its buffer, the copy kept for an unread one,
 * or (an unread one never bound) the generator's values for the seed mc_program_fill_random
 * used, which is what a run with that seed would have given it. *owned is set when the value
 * was made here. */
static mc_status declaration_value(mc_program *p, int node, const char *path, const void **data,
                                   void **owned)
{
    const mc_node *n = &p->graph->nodes[node];
    int b = buffer_of(p, node, true);
    *owned = NULL;
    if (b >= 0 && p->has_value[b]) {
        mc_status st = fresh(p, b); /* given on the device (mc_program_set_from_output) */
        if (st != MC_OK)
            return st;
        *data = p->host[b];
        return MC_OK;
    }
    if (b < 0 && p->unread && p->unread[node]) {
        *data = p->unread[node];
        return MC_OK;
    }
    size_t bytes;
    if (b >= 0 || !p->seeded || !node_bytes(n, &bytes))
        return mc_fail(MC_ERR_INPUT, "%s: %s '%s' has no value to save: bind it (mc_program_set, a "
                       "file) or call mc_program_fill_random first", path, kind_word(n), n->name);
    if (!(*owned = malloc(bytes ? bytes : 1)))
        return mc_fail(MC_ERR_SYSTEM, "out of memory (%zu bytes)", bytes);
    mc_fill_random(*owned, n->dtype, mc_node_numel(n), p->seed, n->name);
    *data = *owned;
    return MC_OK;
}

static mc_status program_save_inputs(mc_program *p, const char *path)
{
    if (p->sym)
        return mc_symbolic_save_inputs(p, path);
    if (!ends_with(path, ".safetensors"))
        return mc_fail(MC_ERR_INPUT, "%s: inputs are saved as .safetensors (every input and param "
                       "under its name)", path);
    int n = 0;
    for (int i = 0; i < p->graph->nnodes; i++)
        n += is_declaration(&p->graph->nodes[i]);
    size_t slots = n > 0 ? (size_t)n : 1;
    mc_array *arrays = calloc(slots, sizeof *arrays);
    const char **names = calloc(slots, sizeof *names);
    void **owned = calloc(slots, sizeof *owned);
    mc_status s = MC_OK;
    if (!arrays || !names || !owned)
        s = mc_fail(MC_ERR_SYSTEM, "out of memory");
    for (int i = 0, k = 0; i < p->graph->nnodes && s == MC_OK; i++) {
        const mc_node *nd = &p->graph->nodes[i];
        if (!is_declaration(nd))
            continue;
        const void *data = NULL;
        s = declaration_value(p, i, path, &data, &owned[k]);
        names[k] = nd->name;
        arrays[k].dtype = nd->dtype;
        arrays[k].rank = nd->rank;
        memcpy(arrays[k].shape, nd->shape, sizeof arrays[k].shape);
        arrays[k].data = (void *)data;
        node_bytes(nd, &arrays[k].bytes);
        k++;
    }
    if (s == MC_OK)
        s = mc_safetensors_write(path, names, arrays, n);
    for (int k = 0; owned && k < n; k++)
        free(owned[k]);
    free(owned);
    free(arrays);
    free(names);
    return s;
}

mc_status mc_program_save_inputs(mc_program *p, const char *path)
{
    if (!p || !path)
        return mc_fail(MC_ERR_INPUT, "mc_program_save_inputs: no %s", p ? "path" : "program");
    LOCKED(p, program_save_inputs(p, path));
}

/* ---- symbolic dimensions ------------------------------------------------------------------- */

mc_status mc_program_set_dim(mc_program *p, const char *name, int64_t size)
{
    if (!p || !name)
        return mc_fail(MC_ERR_INPUT, "mc_program_set_dim: no %s", p ? "name" : "program");
    if (!p->sym)
        return mc_fail(MC_ERR_INPUT, "--dim %s=%lld: the graph has no symbolic dimensions", name, (long long)size);
    LOCKED(p, mc_symbolic_set_dim(p, name, size));
}

int mc_program_compilations(const mc_program *p)
{
    if (!p) {
        mc_fail(MC_ERR_INPUT, "mc_program_compilations: no program");
        return 0;
    }
    return p->sym ? mc_symbolic_compilations(p) : 1;
}

mc_program *mc_program_ran(mc_program *p)
{
    if (p->par)
        return p->runs > 0 ? mc_parallel_rank(p, 0) : NULL;
    return p->sym ? mc_symbolic_current(p) : p;
}

void mc_program_unbind(mc_program *p)
{
    for (int b = 0; b < p->kp->nbuffers; b++) {
        kir_buffer_kind k = p->kp->buffers[b].kind;
        if (k == KBUF_INPUT || k == KBUF_PARAM)
            p->bound[b] = p->has_value[b] = p->stale[b] = false;
    }
    if (p->unread)
        for (int i = 0; i < p->graph->nnodes; i++) {
            free(p->unread[i]);
            p->unread[i] = NULL;
        }
    p->seeded = false;
}
