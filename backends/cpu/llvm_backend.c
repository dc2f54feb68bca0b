/* The CPU backend (mc_backend_cpu): kernel IR -> LLVM IR -> machine code, run on a thread pool.
 *
 * The code is generated for the host's CPU and the features it reports, or for the CPU that
 * mc_options.cpu_target names ("x86-64-v3", "skylake-avx512": LLVM's names) with that CPU's own
 * features, as LLVM defines them; the vector width and the use of FMA follow the target. Code
 * for a CPU with features this machine lacks compiles (and dumps) but is refused at run time
 * (MC_ERR_SYSTEM), where it would stop on an illegal instruction.
 *
 * prepare() builds one LLVM module holding every kernel of the program (backends/cpu/llvm_kernel.c,
 * llvm_gemm.c; kernels that differ only in their buffers, like the layers of a stack, as one
 * function: build_module), verifies it, and prints it: that text, with minic's and LLVM's
 * versions, the target's CPU name and features, the code generator's settings and the options,
 * is the compile cache's key (llvm_cache_key). On a hit the cached object code, verified by the
 * cache, is used; on a miss the module is optimized (OPT_PIPELINE below, for the target
 * machine) and compiled to object files, in parts on the program's threads
 * (compile_program), which are stored together. Either way ORC's LLJIT links the objects into
 * memory and hands back one function pointer per kernel. So a second run of the same program
 * skips optimization and code generation, which are most of the compile time; building and
 * printing the IR (a few ms) is what the key costs.
 *
 * run() points each kernel at the buffers (host arrays of inputs, params and outputs, the
 * planned arena for intermediates) and calls it over its parallel index space: on the calling
 * thread when the kernel is small, otherwise split across the program's persistent thread pool.
 * GEMMs whose B operand is a param read it from a buffer packed once (llvm_gemm.c): run()
 * packs it first, on the first run and whenever the param was bound again (the program's
 * dirty flags), so weights are not repacked on every call. A collective kernel of a rank of a
 * tensor-parallel program (nranks > 1) is summed by the host communicator (backends/comm.h) on
 * the rank's thread; with one rank or none its compiled code, a copy, runs.
 *
 * User names never reach the IR: functions are named after kir kernels (generated names), and
 * buffers are numbers.
 */
#include "backends/cpu/llvm.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm/Config/llvm-config.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backends/c_expr.h"

#define CODEGEN_VERSION "minic-cpu-4" /* bump when generated code changes meaning */

typedef void (*kernel_fn)(void **buffers, int64_t begin, int64_t end, void *scratch);

typedef struct cpu_kernel {
    kernel_fn fn;
    llvm_kernel_info info;    /* packed_b.buffer is a program buffer */
    int nlocal;               /* buffers the kernel uses, numbered in the order its views name them */
    int *global;              /* local number -> program buffer */
    void **args;              /* its `buffers` argument: nlocal base addresses, then its packed B */
    int same_as;              /* -1, or the earlier kernel whose code this one runs */
    float *packed;            /* GEMM with a param B: B packed (info.packed_b) */
    bool packed_valid;        /* `packed` holds the param's current value */
    bool skipped;             /* an im2col copy whose GEMM reads its source instead (info.elide) */
    int nslots;               /* generated from the symbolic kernel list: its run-time sizes */
    int64_t *slot_dim;        /* per slot: the dim (an expression of mc_program.sized->dims) */
    int64_t *sizes;           /* per slot: its value for this program's binding (args[nlocal + 2]) */
} cpu_kernel;

/* Object code that the bindings of symbolic programs share in memory: kernels generated from
 * the symbolic list are the same IR for every binding, so a new binding takes the objects an
 * earlier one compiled (or read from the disk cache) under the same key, and links them: no
 * compile and no disk read, even with the compile cache off (MINIC_NO_CACHE=1). An entry lives
 * while a program that uses it does (refs). */
typedef struct shared_objects {
    char *key;
    void *obj;
    size_t size;
    int refs;
    struct shared_objects *next;
} shared_objects;

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static shared_objects *shared_list;

/* A copy of the objects under key into *obj, holding a reference in *entry; false: none. */
static bool shared_take(const char *key, void **obj, size_t *size, shared_objects **entry)
{
    pthread_mutex_lock(&shared_lock);
    shared_objects *e = shared_list;
    while (e && strcmp(e->key, key) != 0)
        e = e->next;
    void *copy = e ? malloc(e->size) : NULL;
    if (copy) {
        memcpy(copy, e->obj, e->size);
        e->refs++;
        *obj = copy;
        *size = e->size;
        *entry = e;
    }
    pthread_mutex_unlock(&shared_lock);
    return copy != NULL;
}

/* Keep a copy of the objects under key (nothing when out of memory: the next binding reads
 * the disk cache or compiles, as before). */
static shared_objects *shared_put(const char *key, const void *obj, size_t size)
{
    shared_objects *e = calloc(1, sizeof *e);
    if (e && (e->key = strdup(key)) && (e->obj = malloc(size ? size : 1))) {
        memcpy(e->obj, obj, size);
        e->size = size;
        e->refs = 1;
        pthread_mutex_lock(&shared_lock);
        e->next = shared_list;
        shared_list = e;
        pthread_mutex_unlock(&shared_lock);
        return e;
    }
    if (e)
        free(e->key);
    free(e);
    return NULL;
}

static void shared_drop(shared_objects *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&shared_lock);
    bool last = --e->refs == 0;
    if (last) {
        shared_objects **at = &shared_list;
        while (*at != e)
            at = &(*at)->next;
        *at = e->next;
    }
    pthread_mutex_unlock(&shared_lock);
    if (last) {
        free(e->key);
        free(e->obj);
        free(e);
    }
}

typedef struct cpu_state {
    const llvm_target *target;
    llvm_jit jit;
    cpu_kernel *kernels;
    int nkernels;
    char *ir;                 /* the module as generated (dump_code) */
    void *arena;              /* intermediates */
    bool own_arena;           /* false: the symbolic program's (mc_program.arena), not freed here */
    void **buffers;           /* per kp buffer: base address */
    mc_threadpool *pool;
    int nthreads;
    void *scratch;            /* nthreads * scratch_stride bytes */
    size_t scratch_stride;
    int32_t gather_error[2];  /* a failed gather's check + 1 (0: none) and its index; every
                                 kernel's args[nlocal + 1] points here (llvm_block.c) */
    shared_objects *shared;   /* a binding of a symbolic program: its objects, shared */
} cpu_state;

/* ---- building the module ------------------------------------------------------------------ */

static void set_target_attributes(llvm_ctx *c)
{
    const llvm_target *t = c->target;
    for (LLVMValueRef fn = LLVMGetFirstFunction(c->mod); fn; fn = LLVMGetNextFunction(fn)) {
        if (LLVMIsDeclaration(fn))
            continue;
        LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                                LLVMCreateStringAttribute(c->ctx, "target-cpu", 10, t->cpu, (unsigned)strlen(t->cpu)));
        if (t->features[0]) /* none: the CPU's own */
            LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                                    LLVMCreateStringAttribute(c->ctx, "target-features", 15, t->features,
                                                              (unsigned)strlen(t->features)));
    }
}

/* Kernels that compute the same thing on different buffers (the layers of a stack: small_mlp's
 * four linear+relu) are compiled once. Each kernel is generated against its own numbering of
 * the buffers it uses (in the order its views name them), so such kernels come out as the same
 * function but for its name; the runtime hands each kernel its own table of base addresses.
 * A kernel whose function text and launch facts equal an earlier one's runs that one's code. */
static bool same_launch(const llvm_kernel_info *a, const llvm_kernel_info *b)
{
    const llvm_packed_b *p = &a->packed_b, *q = &b->packed_b;
    if (a->sized != b->sized || a->nunits_dims != b->nunits_dims || a->units_const != b->units_const ||
        memcmp(a->units_dim, b->units_dim, sizeof a->units_dim) != 0 ||
        memcmp(a->units_div, b->units_div, sizeof a->units_div) != 0)
        return false;
    return a->units == b->units && a->grain == b->grain && a->serial == b->serial && a->elide == b->elide &&
           a->scratch_bytes == b->scratch_bytes && p->bytes == q->bytes && p->dtype == q->dtype &&
           p->offset == q->offset && p->k == q->k && p->n == q->n && p->stride_k == q->stride_k &&
           p->stride_n == q->stride_n && p->kc == q->kc && p->nr == q->nr && p->np == q->np;
}

/* Two functions' text from their parameter lists on, equal but for the numbers of metadata
 * nodes (loop hints: each function gets its own nodes of the same content). */
static bool same_code(const char *a, const char *b)
{
    while (*a && *a == *b) {
        bool meta = *a == '!';
        a++;
        b++;
        if (meta) {
            while (*a >= '0' && *a <= '9')
                a++;
            while (*b >= '0' && *b <= '9')
                b++;
        }
    }
    return *a == *b;
}

/* MINIC_IM2COL=1 keeps a conv's im2col copies (for comparison): see llvm_im2col. */
static bool no_im2col(void)
{
    const char *e = getenv("MINIC_IM2COL");
    return e && strcmp(e, "1") == 0;
}

/* Generate kernel i against its own buffer numbering. */
static mc_status emit_kernel(llvm_ctx *c, const kir_program *kp, int i, cpu_kernel *ck, int *local_of)
{
    const kir_kernel *k = &kp->kernels[i];
    c->kp = kp; /* llvm_gemm_swaps and llvm_match_im2col both read kp's buffers */
    /* a conv's GEMM may read its input x instead of the im2col copies: x gets a view (last) */
    llvm_im2col ic;
    bool im2col = k->category == KIR_GEMM && !c->dims && !no_im2col() &&
                  llvm_match_im2col(kp, i, !llvm_gemm_swaps(c, k), &ic);
    int nv = k->nviews + (im2col ? 1 : 0);
    ck->global = malloc((size_t)(nv ? nv : 1) * sizeof *ck->global);
    kir_buffer *lb = malloc((size_t)(nv ? nv : 1) * sizeof *lb);
    kir_view *lv = malloc((size_t)(nv ? nv : 1) * sizeof *lv);
    if (!ck->global || !lb || !lv) {
        free(lb);
        free(lv);
        return mc_fail(MC_ERR_SYSTEM, "out of memory generating kernel %s", k->name);
    }
    ck->nlocal = 0;
    for (int v = 0; v < nv; v++) {
        int b = v < k->nviews ? k->views[v].buffer : ic.buffer;
        if (local_of[b] < 0) {
            local_of[b] = ck->nlocal;
            ck->global[ck->nlocal] = b;
            lb[ck->nlocal++] = kp->buffers[b];
        }
        if (v < k->nviews)
            lv[v] = k->views[v];
        else
            memset(&lv[v], 0, sizeof lv[v]);
        lv[v].buffer = local_of[b];
    }
    for (int l = 0; l < ck->nlocal; l++)
        local_of[ck->global[l]] = -1;
    kir_kernel lk = *k;
    lk.views = lv;
    if (im2col)
        ic.view = k->nviews; /* lk.nviews stays: no instruction reads x */
    c->im2col = im2col ? &ic : NULL;
    kir_program lkp = {.buffers = lb, .nbuffers = ck->nlocal, .kernels = &lk, .nkernels = 1,
                       .arena_bytes = kp->arena_bytes, .unplanned_bytes = kp->unplanned_bytes, .dims = kp->dims};
    c->kp = &lkp;
    mc_status st = k->category == KIR_GEMM        ? llvm_emit_gemm_kernel(c, &lk, &ck->info)
                   : k->category == KIR_ATTENTION ? llvm_emit_attention_kernel(c, &lk, &ck->info)
                                                  : llvm_emit_loop_kernel(c, &lk, &ck->info);
    c->kp = kp;
    c->im2col = NULL;
    if (st == MC_OK && ck->info.packed_b.bytes > 0)
        ck->info.packed_b.buffer = ck->global[ck->info.packed_b.buffer];
    free(lb);
    free(lv);
    return st;
}

/* Why kernel k of a symbolic kernel list cannot be generated with its sizes read at run time
 * (then it is generated for the binding), or NULL. What the emitters take: loop kernels, scans
 * among them (symbolic dimensions do not merge, llvm_plan.c; a view stepping by a symbolic stride
 * along the vector axis is read lane by lane, llvm_block.c); GEMMs (M, N, K, the batch and
 * the strides may be symbolic: the row and column blocks are counted when it runs, the
 * operands packed at strides and offsets read when it runs); attention of a constant head
 * size (Tq, Tk, the batch and the strides: any). */
static const char *sized_refusal(const kir_kernel *k)
{
    switch (k->category) {
    case KIR_ATTENTION: /* Tq, Tk, the batch and the strides may be symbolic: read when it runs */
        if (mc_dim_is_sym(k->attn.d) || mc_dim_is_sym(k->attn.dv)) /* (passes/attention.c fuses none) */
            return "attention with a symbolic head size";
        return NULL;
    case KIR_COLLECTIVE: return "a collective";
    case KIR_GEMM: /* M, N, K, the batch, the strides and offsets: any (llvm_gemm.c) */
        return NULL;
    case KIR_POINTWISE: case KIR_REDUCTION: case KIR_COPY: break;
    }
    for (int i = 0; i < k->ncode; i++)
        if (k->code[i].kind == KI_SIZE && !mc_dtype_is_float(k->code[i].dtype) &&
            !(k->code[i].times && k->code[i].dtype == MC_I32))
            return "an integer 1/n";
    return NULL;
}

/* Generate kernel i from the symbolic kernel list `sized` (its sizes read at run time) where it
 * can be, else from kp (bound to this binding), counted in *specialized with why. */
static mc_status emit_sized_or_bound(llvm_ctx *c, const kir_program *kp, const kir_program *sized, int i, cpu_kernel *ck,
                                     int *local_of, int *specialized, char *why, size_t why_size)
{
    const char *refused = sized ? sized_refusal(&sized->kernels[i]) : "";
    if (!refused) {
        c->dims = sized->dims;
        mc_status st = emit_kernel(c, sized, i, ck, local_of);
        c->dims = NULL;
        if (st != MC_OK)
            return st;
        if (!c->slots_overflow) {
            if (c->nslots > 0 && !(ck->slot_dim = malloc((size_t)c->nslots * sizeof *ck->slot_dim)))
                return mc_fail(MC_ERR_SYSTEM, "out of memory generating kernel %s", kp->kernels[i].name);
            ck->nslots = c->nslots;
            if (c->nslots > 0)
                memcpy(ck->slot_dim, c->slot_dim, (size_t)c->nslots * sizeof *ck->slot_dim);
            return MC_OK;
        }
        LLVMDeleteFunction(LLVMGetNamedFunction(c->mod, kp->kernels[i].name));
        free(ck->global);
        ck->global = NULL;
        memset(&ck->info, 0, sizeof ck->info);
        refused = "out of memory for its run-time sizes";
    }
    if (sized) {
        size_t at = strlen(why);
        snprintf(why + at, why_size - at, "%s%s: %s", at ? "; " : "", kp->kernels[i].name, refused);
        (*specialized)++;
    }
    return emit_kernel(c, kp, i, ck, local_of);
}

/* Generate every kernel into c->mod (one function per distinct kernel): from `sized` (NULL for a
 * static program) where it can be, see emit_sized_or_bound. */
static mc_status build_module(llvm_ctx *c, const kir_program *kp, const kir_program *sized, cpu_kernel *kernels,
                              int *specialized, char *why, size_t why_size)
{
    int *local_of = malloc((size_t)(kp->nbuffers ? kp->nbuffers : 1) * sizeof *local_of);
    char **text = calloc((size_t)(kp->nkernels ? kp->nkernels : 1), sizeof *text);
    mc_status st = local_of && text ? MC_OK : mc_fail(MC_ERR_SYSTEM, "out of memory generating the CPU kernels");
    for (int b = 0; st == MC_OK && b < kp->nbuffers; b++)
        local_of[b] = -1;
    for (int i = 0; st == MC_OK && i < kp->nkernels; i++) {
        kernels[i].same_as = -1;
        if ((st = emit_sized_or_bound(c, kp, sized, i, &kernels[i], local_of, specialized, why, why_size)) != MC_OK)
            break;
        LLVMValueRef fn = LLVMGetNamedFunction(c->mod, kp->kernels[i].name);
        MC_ASSERT(fn);
        text[i] = LLVMPrintValueToString(fn);
        const char *body = strchr(text[i], '('); /* past "define void @NAME" */
        for (int j = 0; j < i && body; j++) {
            const char *other = kernels[j].same_as < 0 && text[j] ? strchr(text[j], '(') : NULL;
            if (other && same_code(body, other) && same_launch(&kernels[i].info, &kernels[j].info)) {
                kernels[i].same_as = j;
                LLVMDeleteFunction(fn);
                break;
            }
        }
    }
    for (int i = 0; text && i < kp->nkernels; i++)
        LLVMDisposeMessage(text[i]);
    free(text);
    free(local_of);
    if (st != MC_OK)
        return st;
    set_target_attributes(c);
    char *msg = NULL;
    if (LLVMVerifyModule(c->mod, LLVMReturnStatusAction, &msg)) {
        mc_status st = mc_fail(MC_ERR_SYSTEM, "CPU backend: generated LLVM IR is invalid (a bug in minic): %s", msg);
        LLVMDisposeMessage(msg);
        return st;
    }
    LLVMDisposeMessage(msg);
    return MC_OK;
}

/* Link a blob and point every kernel at its function (a kernel that shares code, at the one it
 * runs). */
static mc_status load_kernels(cpu_state *s, const kir_program *kp, const void *blob, size_t blob_size)
{
    const char **names = calloc((size_t)kp->nkernels + 1, sizeof *names);
    void **fns = calloc((size_t)kp->nkernels + 1, sizeof *fns);
    mc_status st = names && fns ? MC_OK : mc_fail(MC_ERR_SYSTEM, "out of memory preparing the CPU backend");
    for (int i = 0; st == MC_OK && i < kp->nkernels; i++) {
        int same = s->kernels[i].same_as;
        names[i] = kp->kernels[same < 0 ? i : same].name;
    }
    if (st == MC_OK)
        st = llvm_jit_load(&s->jit, blob, blob_size, names, kp->nkernels, fns);
    for (int i = 0; st == MC_OK && i < kp->nkernels; i++)
        s->kernels[i].fn = (kernel_fn)(uintptr_t)fns[i];
    free(names);
    free(fns);
    return st;
}

/* The module's text for dump_code, then a line per kernel that runs another's code. */
static char *ir_with_notes(const char *ir, const kir_program *kp, const cpu_kernel *kernels)
{
    size_t n = strlen(ir) + 1;
    for (int i = 0; i < kp->nkernels; i++)
        n += (kernels[i].same_as >= 0 || kp->kernels[i].prep ? 2 * sizeof kp->kernels[i].name : 0) + 160;
    char *text = malloc(n);
    if (!text)
        return NULL;
    size_t at = (size_t)snprintf(text, n, "%s", ir);
    for (int i = 0; i < kp->nkernels && at < n; i++)
        if (kernels[i].same_as >= 0)
            at += (size_t)snprintf(text + at, n - at, "; kernel %s runs the code of %s (the same function)\n",
                                   kp->kernels[i].name, kp->kernels[kernels[i].same_as].name);
    for (int i = 0; i < kp->nkernels && at < n; i++)
        if (kp->kernels[i].prep)
            at += (size_t)snprintf(text + at, n - at, "; kernel %s is prep: computed from params alone, it runs "
                                   "when they are bound, not in every run\n", kp->kernels[i].name);
    return text;
}

/* ---- the cache key ------------------------------------------------------------------------ */

#ifndef MINIC_VERSION_STRING
#define MINIC_VERSION_STRING "unknown"
#endif

char *llvm_cache_key(const llvm_key_parts *parts)
{
    const char *names[] = {"minic", "codegen", "llvm", "triple", "cpu", "features", "passes",
                           "machine", "options", "kernels", "ir"};
    const char *values[] = {parts->minic_version, parts->codegen_version, parts->llvm_version,
                            parts->triple, parts->cpu, parts->features, parts->passes,
                            parts->machine, parts->options, parts->kernels, parts->ir};
    mc_strbuf sb = {0};
    /* Each part with its length, so no part can run into the next. */
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = values[i] ? values[i] : "";
        mc_sb_printf(&sb, "%s %zu ", names[i], strlen(v));
        mc_sb_puts(&sb, v);
        mc_sb_puts(&sb, "\n");
    }
    if (sb.oom) {
        mc_sb_free(&sb);
        return NULL;
    }
    return sb.data;
}

/* The cache key of this program: everything its object code depends on. The options that
 * change code (fuse, plan_memory, tf32) change the IR too; they are named anyway. The thread
 * count reaches the code only through the GEMMs' splits (llvm_gemm.c), which are in the IR and
 * in the kernel lines; otherwise a blob compiled in any number of parts loads the same. quiet
 * and the CUDA-only options change nothing. */
static char *cache_key(const llvm_target *t, const char *ir, const kir_program *kp, const cpu_kernel *kernels,
                       const mc_options *opt)
{
    mc_strbuf lines = {0}, options = {0};
    for (int i = 0; i < kp->nkernels; i++)
        mc_sb_printf(&lines, "kernel %s units %lld grain %lld scratch %lld packed %lld code of %d\n",
                     kp->kernels[i].name, (long long)kernels[i].info.units, (long long)kernels[i].info.grain,
                     (long long)kernels[i].info.scratch_bytes, (long long)kernels[i].info.packed_b.bytes,
                     kernels[i].same_as);
    mc_sb_printf(&options, "fuse %d plan_memory %d tf32 %d", opt->fuse, opt->plan_memory, opt->tf32);
    llvm_key_parts parts = {.minic_version = MINIC_VERSION_STRING, .codegen_version = CODEGEN_VERSION,
                            .llvm_version = LLVM_VERSION_STRING, .triple = t->triple, .cpu = t->cpu,
                            .features = t->features, .passes = LLVM_OPT_PIPELINE, .machine = LLVM_MACHINE_SETTINGS,
                            .options = options.data, .kernels = lines.data ? lines.data : "", .ir = ir};
    char *key = lines.oom || options.oom ? NULL : llvm_cache_key(&parts);
    mc_sb_free(&lines);
    mc_sb_free(&options);
    return key;
}

static void cpu_release(mc_program *p)
{
    cpu_state *s = p->state;
    if (!s)
        return;
    mc_threadpool_free(s->pool);
    for (int i = 0; s->kernels && i < s->nkernels; i++) {
        free(s->kernels[i].packed);
        free(s->kernels[i].global);
        free(s->kernels[i].args);
        free(s->kernels[i].slot_dim);
        free(s->kernels[i].sizes);
    }
    llvm_jit_dispose(&s->jit);
    shared_drop(s->shared);
    free(s->kernels);
    free(s->ir);
    if (s->own_arena)
        free(s->arena);
    free(s->buffers);
    free(s->scratch);
    free(s);
    p->state = NULL;
}

static void *aligned_zalloc(size_t bytes)
{
    size_t rounded = (bytes + 63) / 64 * 64;
    void *m = aligned_alloc(64, rounded ? rounded : 64);
    if (m)
        memset(m, 0, rounded ? rounded : 64);
    return m;
}

/* Memory: the arena of intermediates, the per-thread scratch, each kernel's argument array and
 * packed weight. */
/* shared: the arena of a binding planned at its symbolic program's maxima (mc_program.arena), or
 * NULL. */
static mc_status allocate(cpu_state *s, const kir_program *kp, mc_shared_arena *shared)
{
    MC_ASSERT(!shared || shared->bytes == kp->arena_bytes);
    if (shared && !mc_shared_arena_host(shared))
        return MC_ERR_SYSTEM;
    s->own_arena = !shared;
    s->arena = shared ? (void *)(uintptr_t)shared->addr : aligned_zalloc((size_t)kp->arena_bytes);
    int64_t scratch = 0;
    for (int i = 0; i < kp->nkernels; i++)
        if (s->kernels[i].info.scratch_bytes > scratch)
            scratch = s->kernels[i].info.scratch_bytes;
    s->scratch_stride = ((size_t)scratch + 63) / 64 * 64;
    int64_t total;
    if (mc_mul_overflows((int64_t)s->scratch_stride, s->nthreads, &total))
        return mc_fail(MC_ERR_SYSTEM, "CPU backend: workspace size overflows");
    s->scratch = total ? aligned_zalloc((size_t)total) : NULL;
    for (int i = 0; i < kp->nkernels; i++) {
        cpu_kernel *k = &s->kernels[i];
        if (!(k->args = calloc((size_t)k->nlocal + 3, sizeof *k->args)) ||
            (k->nslots > 0 && !(k->sizes = malloc((size_t)k->nslots * sizeof *k->sizes))))
            return mc_fail(MC_ERR_SYSTEM, "out of memory preparing the CPU backend");
        k->args[k->nlocal + 1] = s->gather_error;
        k->args[k->nlocal + 2] = k->sizes;
        if (k->info.packed_b.bytes <= 0)
            continue;
        if (!(k->packed = aligned_zalloc((size_t)k->info.packed_b.bytes)))
            return mc_fail(MC_ERR_SYSTEM, "out of memory allocating %lld bytes for a packed weight",
                           (long long)k->info.packed_b.bytes);
        k->args[k->nlocal] = k->packed;
    }
    if (!s->arena || (total && !s->scratch))
        return mc_fail(MC_ERR_SYSTEM, "out of memory allocating %lld bytes of intermediates",
                       (long long)(kp->arena_bytes + total));
    return MC_OK;
}

/* A fresh module for the target: its context, builders and the types the emitters use. */
static void start_module(llvm_ctx *c, const llvm_target *t, const kir_program *kp, int threads)
{
    *c = (llvm_ctx){.target = t, .kp = kp, .threads = threads > 0 ? threads : mc_threadpool_default_threads()};
    c->native_lanes = t->vector_bits / 32;
    c->lanes = 2 * c->native_lanes;
    c->ctx = LLVMContextCreate();
    c->mod = LLVMModuleCreateWithNameInContext("minic", c->ctx);
    c->b = LLVMCreateBuilderInContext(c->ctx);
    c->entry_b = LLVMCreateBuilderInContext(c->ctx);
    c->t_f32 = LLVMFloatTypeInContext(c->ctx);
    c->t_f64 = LLVMDoubleTypeInContext(c->ctx);
    c->t_i1 = LLVMInt1TypeInContext(c->ctx);
    c->t_i8 = LLVMInt8TypeInContext(c->ctx);
    c->t_i16 = LLVMInt16TypeInContext(c->ctx);
    c->t_i32 = LLVMInt32TypeInContext(c->ctx);
    c->t_i64 = LLVMInt64TypeInContext(c->ctx);
    c->t_void = LLVMVoidTypeInContext(c->ctx);
    c->t_ptr_i8 = LLVMPointerType(c->t_i8, 0);
}

static mc_status cpu_prepare(mc_program *p)
{
    mc_status st = llvm_host_probe();
    if (st != MC_OK)
        return st;
    double t0 = mc_now_ms();
    const kir_program *kp = p->kp;
    cpu_state *s = calloc(1, sizeof *s);
    if (!s)
        return mc_fail(MC_ERR_SYSTEM, "out of memory preparing the CPU backend");
    p->state = s;
    if ((st = llvm_target_resolve(p->opt.cpu_target, &s->target)) != MC_OK)
        return st;
    const llvm_target *t = s->target;
    s->nkernels = kp->nkernels;
    s->kernels = calloc((size_t)(kp->nkernels ? kp->nkernels : 1), sizeof *s->kernels);
    s->buffers = calloc((size_t)kp->nbuffers + 1, sizeof *s->buffers);
    if (!s->kernels || !s->buffers)
        return mc_fail(MC_ERR_SYSTEM, "out of memory preparing the CPU backend");

    llvm_ctx c;
    start_module(&c, t, kp, p->opt.threads);
    char *error = NULL, *key = NULL, *ir = NULL;
    void *obj = NULL;
    size_t obj_size = 0;
    LLVMTargetMachineRef tm = llvm_target_machine(t, &error);
    if (!tm) {
        st = mc_fail(MC_ERR_SYSTEM, "CPU backend: no LLVM target for %s: %s", t->triple, error ? error : "?");
        LLVMDisposeMessage(error);
        goto done;
    }
    LLVMSetTarget(c.mod, t->triple);
    LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(tm);
    char *layout_text = LLVMCopyStringRepOfTargetData(layout);
    LLVMSetDataLayout(c.mod, layout_text);
    LLVMDisposeMessage(layout_text);
    LLVMDisposeTargetData(layout);

    double tp = t0; /* the compile's phases (the profile, minic run --verbose) */
    mc_program_phase(p, "LLVM target", &tp);
    /* a binding of a symbolic program (mc_program.sized): kernels generated from the symbolic
     * list read their sizes when they run, so their IR, hence the cache key, is the same for
     * every binding; the others are generated for this binding and named in a note */
    const kir_program *sized = p->sized && p->sized->nkernels == kp->nkernels ? p->sized : NULL;
    char why[1024] = "";
    p->kernels_specialized = 0;
    if ((st = build_module(&c, kp, sized, s->kernels, &p->kernels_specialized, why, sizeof why)) == MC_OK)
        for (int i = 0; i < kp->nkernels; i++)
            for (int j = i - s->kernels[i].info.elide; j < i; j++)
                s->kernels[j].skipped = kp->kernels[j].category == KIR_COPY; /* not a padding's zeros */
    if (st != MC_OK)
        goto done;
    if (p->kernels_specialized > 0)
        mc_program_note(p, "symbolic dimensions: %d kernel%s compiled for this binding (%s)", p->kernels_specialized,
                        p->kernels_specialized == 1 ? "" : "s", why);
    mc_program_phase(p, "LLVM IR", &tp);
    ir = LLVMPrintModuleToString(c.mod);
    s->ir = ir_with_notes(ir, kp, s->kernels);
    key = cache_key(t, ir, kp, s->kernels, &p->opt);
    if (!s->ir || !key) {
        st = mc_fail(MC_ERR_SYSTEM, "out of memory preparing the CPU backend");
        goto done;
    }
    mc_program_phase(p, "IR text and cache key", &tp);
    /* the threads first: a cold compile runs on them */
    if ((st = mc_threadpool_new(p->opt.threads, &s->pool)) != MC_OK)
        goto done;
    mc_program_phase(p, "threads", &tp);
    s->nthreads = mc_threadpool_size(s->pool);
    p->kernels_compiled = 0;
    /* The cache hands out only verified entries (support/cache.c). One that is well formed there
     * but not a blob of objects here, or that LLVM then refuses, is evicted and compiled
     * afresh: a cache entry never makes a compile fail. Objects another binding shared in
     * memory that do not link are compiled afresh too, but evict nothing: the disk entry under
     * the same key was not read, and whatever it holds is not what failed. */
    bool from_memory = sized && shared_take(key, &obj, &obj_size, &s->shared);
    mc_cache_result cached_result = from_memory ? MC_CACHE_MISS : mc_cache_load("cpu", key, &obj, &obj_size);
    bool from_cache = from_memory || (cached_result == MC_CACHE_HIT && llvm_blob_valid(obj, obj_size));
    mc_program_phase(p, "kernel cache", &tp);
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!from_cache) {
            if (cached_result == MC_CACHE_HIT) /* only what was read from the disk */
                mc_cache_evict("cpu", key);
            free(obj);
            obj = NULL;
            if ((st = llvm_compile(t, c.mod, tm, kp, s->pool, &obj, &obj_size)) != MC_OK)
                goto done;
            mc_cache_store("cpu", key, obj, obj_size);
            p->kernels_compiled = kp->nkernels;
            mc_program_phase(p, "LLVM compile", &tp);
        }
        st = load_kernels(s, kp, obj, obj_size);
        mc_program_phase(p, "JIT load", &tp);
        if (st == MC_OK || !from_cache)
            break;
        llvm_jit_dispose(&s->jit); /* the cached code did not link: compile it instead */
        shared_drop(s->shared);
        s->shared = NULL;
        from_cache = false;
    }
    if (st == MC_OK && sized && !s->shared)
        s->shared = shared_put(key, obj, obj_size);
    if (st != MC_OK)
        goto done;

    for (int i = 0; st == MC_OK && sized && i < kp->nkernels; i++) /* this binding's sizes and launches */
        st = llvm_info_bind(&s->kernels[i].info, &kp->kernels[i], sized->dims, p->sized_values);
    if (st != MC_OK)
        goto done;
    st = allocate(s, kp, p->arena);
    for (int i = 0; st == MC_OK && i < kp->nkernels; i++)
        for (int j = 0; j < s->kernels[i].nslots; j++) {
            bool ok = mc_dims_eval(sized->dims, s->kernels[i].slot_dim[j], p->sized_values, &s->kernels[i].sizes[j]);
            MC_ASSERT(ok); /* kir_bind evaluated every size of the list */
        }
    mc_program_phase(p, "memory", &tp);
done:
    if (tm)
        LLVMDisposeTargetMachine(tm);
    LLVMDisposeMessage(ir);
    free(key);
    free(obj);
    free(c.slot_dim);
    free(c.slot_value);
    LLVMDisposeBuilder(c.b);
    LLVMDisposeBuilder(c.entry_b);
    LLVMDisposeModule(c.mod);
    LLVMContextDispose(c.ctx);
    p->compile_ms += mc_now_ms() - t0;
    return st;
}

/* ---- running -------------------------------------------------------------------------------- */

typedef struct launch {
    cpu_state *s;
    const cpu_kernel *k;
} launch;

static void run_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    launch *l = ctx;
    l->k->fn(l->k->args, begin, end, (char *)l->s->scratch + (size_t)thread * l->s->scratch_stride);
}

typedef struct pack_job {
    const llvm_packed_b *pb;
    const void *src;
    float *dst;
} pack_job;

static void run_pack(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    pack_job *j = ctx;
    llvm_pack_b(j->pb, j->src, j->dst, begin, end);
}

/* Pack the B operands that are params, where not packed yet or the param changed since (a
 * program without dirty flags repacks every time): of the prep kernels or of a run's. */
static void pack_params(mc_program *p, cpu_state *s, bool prep)
{
    for (int i = 0; i < s->nkernels; i++) {
        cpu_kernel *k = &s->kernels[i];
        const llvm_packed_b *pb = &k->info.packed_b;
        if (!k->packed || p->kp->kernels[i].prep != prep || (k->packed_valid && p->dirty && !p->dirty[pb->buffer]))
            continue;
        pack_job j = {.pb = pb, .src = s->buffers[pb->buffer], .dst = k->packed};
        mc_threadpool_run(s->pool, llvm_packed_b_blocks(pb), 1, run_pack, &j);
        k->packed_valid = true;
    }
}

static void bind_buffers(mc_program *p, cpu_state *s)
{
    const kir_program *kp = p->kp;
    for (int b = 0; b < kp->nbuffers; b++)
        s->buffers[b] = kp->buffers[b].kind == KBUF_TEMP ? (char *)s->arena + kp->buffers[b].offset : p->host[b];
    for (int i = 0; i < s->nkernels; i++)
        for (int l = 0; l < s->kernels[i].nlocal; l++)
            s->kernels[i].args[l] = s->buffers[s->kernels[i].global[l]];
}

static void run_kernel(cpu_state *s, int i)
{
    const cpu_kernel *k = &s->kernels[i];
    if (k->skipped)
        return;
    launch l = {.s = s, .k = k};
    if (k->info.serial)
        run_range(&l, 0, k->info.units, 0);
    else
        mc_threadpool_run(s->pool, k->info.units, k->info.grain, run_range, &l);
}

/* A collective kernel of a rank (nranks > 1): the host communicator sums the ranks' values
 * (backends/comm.h), on this rank's thread. Otherwise its compiled code, the copy. */
static mc_status run_collective(mc_program *p, cpu_state *s, int i)
{
    const kir_kernel *k = &p->kp->kernels[i];
    if (p->nranks <= 1 || !p->comm) {
        run_kernel(s, i);
        return MC_OK;
    }
    const kir_view *in = &k->views[k->coll.in], *out = &k->views[k->coll.out];
    mc_dtype d = p->kp->buffers[in->buffer].dtype;
    int64_t size = (int64_t)mc_dtype_size(d);
    return mc_comm_allreduce(p->comm, p->rank, (const char *)s->buffers[in->buffer] + in->offset * size,
                             (char *)s->buffers[out->buffer] + out->offset * size, k->coll.count, d);
}

/* The kernels of a run (prep false), or the prep kernels (kir/kir.h, "Prep kernels"). */
static mc_status run_kernels(mc_program *p, bool prep)
{
    cpu_state *s = p->state;
    mc_status st = llvm_target_check_runnable(s->target);
    if (st != MC_OK)
        return st;
    bind_buffers(p, s);
    pack_params(p, s, prep);
    s->gather_error[0] = s->gather_error[1] = 0;
    for (int i = 0; i < s->nkernels; i++) {
        if (p->kp->kernels[i].prep != prep)
            continue;
        if (p->kernel_clock && !prep)
            p->kernel_clock[2 * i] = mc_now_ms();
        if (p->kp->kernels[i].category == KIR_COLLECTIVE) {
            if ((st = run_collective(p, s, i)) != MC_OK)
                return st;
        } else {
            run_kernel(s, i);
        }
        if (p->kernel_clock && !prep)
            p->kernel_clock[2 * i + 1] = mc_now_ms();
        if (s->gather_error[0] != 0) /* the pool's threads are done: their stores are visible */
            return kir_check_fail(p->kp, p->graph, s->gather_error[0] - 1, s->gather_error[1]);
    }
    return MC_OK;
}

/* The dirty flags stay for the run after it, which repacks what it packs of a changed param. */
static mc_status cpu_prep(mc_program *p) { return run_kernels(p, true); }

static mc_status cpu_run(mc_program *p)
{
    mc_status st = run_kernels(p, false);
    if (st != MC_OK)
        return st;
    for (int b = 0; b < p->kp->nbuffers; b++)
        if (p->dirty)
            p->dirty[b] = false;
    return MC_OK;
}

/* One kernel alone, for the profiler's per-kernel host timing (runtime/profile.c; added by
 * the cli work). Called after a full run, so the buffers are bound and hold their inputs. */
static mc_status cpu_run_kernel(mc_program *p, int kernel)
{
    cpu_state *s = p->state;
    if (kernel < 0 || kernel >= s->nkernels)
        return mc_fail(MC_ERR_INPUT, "CPU backend: no kernel %d", kernel);
    if (p->kp->kernels[kernel].category == KIR_COLLECTIVE && p->nranks > 1)
        return mc_fail(MC_ERR_INPUT, "kernel %s is a collective: it runs only with every rank",
                       p->kp->kernels[kernel].name);
    mc_status st = llvm_target_check_runnable(s->target);
    if (st != MC_OK)
        return st;
    bind_buffers(p, s); /* the host arrays may have moved (mc_program_share_params) */
    pack_params(p, s, p->kp->kernels[kernel].prep);
    s->gather_error[0] = 0;
    run_kernel(s, kernel);
    if (s->gather_error[0] != 0)
        return kir_check_fail(p->kp, p->graph, s->gather_error[0] - 1, s->gather_error[1]);
    return MC_OK;
}

static mc_status cpu_dump_code(mc_program *p, FILE *out)
{
    cpu_state *s = p->state;
    if (!s || !s->ir)
        return mc_fail(MC_ERR_SYSTEM, "CPU backend: no code was generated");
    fputs(s->ir, out);
    return MC_OK;
}

const mc_backend mc_backend_cpu = {
    .name = "cpu",
    .runs_on_host = true,
    .attention = true,
    .runtime_sizes = true,
    .probe = llvm_host_probe,
    .prepare = cpu_prepare,
    .run = cpu_run,
    .prep = cpu_prep,
    .profile = NULL, /* per-kernel timing: not yet */
    .dump_code = cpu_dump_code,
    .release = cpu_release,
    .run_kernel = cpu_run_kernel,
};
