/* Compiling generated CUDA C with NVRTC: parallel, cached on disk, with useful failures.
 *
 * A program's kernels are independent, so they compile on a small pool of threads (one per
 * core, at most 16) that take the next source from a shared counter. Each source is looked up
 * first in the disk cache (support/cache.c, kind "cuda") under a key holding NVRTC's version,
 * the target architecture, every option and the whole source (prelude included), so a second
 * run of the same graph compiles nothing (the cache verifies every entry before handing it
 * out; a cubin the driver still refuses is evicted by the backend: mc_cuda_cache_evict). Threads
 * never touch the caller's error state: a failure is recorded per job and reported by the
 * calling thread, with NVRTC's log and the path of a file holding the source that failed
 * (written next to the system's temp files under a fresh name, created with O_EXCL|O_NOFOLLOW
 * and mode 0600, so a file or symlink planted there is never written through).
 */
#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_api.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef MINIC_CUDA_ROOT
#define MINIC_CUDA_ROOT "/usr/local/cuda"
#endif
#ifndef MINIC_VERSION_STRING
#define MINIC_VERSION_STRING "unknown"
#endif

enum { MAX_OPTS = 8 };

typedef struct job_set {
    const mc_nvrtc_api *api;
    const char *const *srcs;
    const char *const *entries;
    int n;
    const char *opts[MAX_OPTS];
    int nopts;
    char arch[32], inc[640]; /* storage of two options */
    void **cubins;
    size_t *sizes;
    char **errors;     /* per job: malloc'd message, or NULL */
    int next, done, compiled;
    double start_ms, last_note_ms;
    mc_note_fn note; /* progress, when compiling takes over a second; NULL: none */
    void *note_ctx;
    pthread_mutex_t lock;
} job_set;

static char *dup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *dup_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mc_strbuf sb = {0};
    mc_sb_vprintf(&sb, fmt, ap);
    va_end(ap);
    if (sb.oom) {
        mc_sb_free(&sb);
        return NULL;
    }
    return sb.data;
}

static atomic_uint dump_counter;

static char *save_failed_source(const char *entry, const char *src)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    /* A fresh name each time (pid, thread, counter) and O_EXCL|O_NOFOLLOW: in a shared
     * directory a name can be taken in advance, by a file or a symlink, and must not be
     * written through. */
    unsigned long long h = (unsigned long long)mc_hash64(src, strlen(src), 0);
    for (int attempt = 0; attempt < 100; attempt++) {
        char *path = dup_printf("%s/minic-%s-%016llx-%ld-%ld-%u.cu", tmp, entry, h, (long)getpid(),
                                (long)gettid(), atomic_fetch_add(&dump_counter, 1));
        if (!path)
            return NULL;
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            int err = errno;
            free(path);
            if (err == EEXIST)
                continue;
            return NULL;
        }
        FILE *f = fdopen(fd, "w");
        bool ok = f && fputs(src, f) >= 0;
        if (f)
            ok = fclose(f) == 0 && ok;
        else
            close(fd);
        if (!ok) {
            unlink(path);
            free(path);
            return NULL;
        }
        return path;
    }
    return NULL;
}

char *mc_cuda_cache_key(int nvrtc_major, int nvrtc_minor, const char *const *opts, int nopts,
                        const char *src)
{
    mc_strbuf sb = {0};
    mc_sb_printf(&sb, "minic %s cuda nvrtc %d.%d options", MINIC_VERSION_STRING, nvrtc_major,
                 nvrtc_minor);
    for (int i = 0; i < nopts; i++)
        mc_sb_printf(&sb, " %s", opts[i]);
    mc_sb_printf(&sb, "\nsource %zu\n", strlen(src));
    mc_sb_puts(&sb, src);
    if (sb.oom) {
        mc_sb_free(&sb);
        return NULL;
    }
    return sb.data;
}

/* NVRTC's options for sm_<sm>: js->opts, the arch and include options stored in js. Every
 * option is part of each source's cache key. */
static void set_options(job_set *js, int sm, const char *incdir)
{
    snprintf(js->arch, sizeof js->arch, "--gpu-architecture=sm_%d", sm);
    snprintf(js->inc, sizeof js->inc, "--include-path=%s", incdir);
    js->nopts = 0;
    js->opts[js->nopts++] = js->arch;
    js->opts[js->nopts++] = js->inc;
    js->opts[js->nopts++] = "--std=c++17";
    js->opts[js->nopts++] = "--fmad=true";
    js->opts[js->nopts++] = "--device-as-default-execution-space";
}

static char *job_key(const job_set *js, const char *src)
{
    return mc_cuda_cache_key(js->api->major, js->api->minor, js->opts, js->nopts, src);
}

static void compile_one(job_set *js, int i)
{
    const mc_nvrtc_api *api = js->api;
    const char *src = js->srcs[i];
    char *key = job_key(js, src);
    if (!key) {
        js->errors[i] = dup_printf("out of memory compiling kernel %s", js->entries[i]);
        return;
    }
    void *data;
    size_t size;
    if (mc_cache_load("cuda", key, &data, &size) == MC_CACHE_HIT) {
        js->cubins[i] = data;
        js->sizes[i] = size;
        free(key);
        return;
    }
    nvrtcProgram prog;
    nvrtcResult r = api->nvrtcCreateProgram(&prog, src, js->entries[i], 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        js->errors[i] = dup_printf("NVRTC could not create a program for kernel %s: %s",
                                   js->entries[i], api->nvrtcGetErrorString(r));
        free(key);
        return;
    }
    r = api->nvrtcCompileProgram(prog, js->nopts, js->opts);
    if (r != NVRTC_SUCCESS) {
        size_t logsize = 0;
        api->nvrtcGetProgramLogSize(prog, &logsize);
        char *log = malloc(logsize + 1);
        if (log) {
            log[0] = '\0';
            api->nvrtcGetProgramLog(prog, log);
            log[logsize] = '\0';
        }
        char *path = save_failed_source(js->entries[i], src);
        js->errors[i] = dup_printf("NVRTC failed to compile kernel %s (%s; source: %s):\n%s",
                                   js->entries[i], api->nvrtcGetErrorString(r),
                                   path ? path : "(could not be saved)", log ? log : "");
        free(path);
        free(log);
        api->nvrtcDestroyProgram(&prog);
        free(key);
        return;
    }
    size = 0;
    api->nvrtcGetCUBINSize(prog, &size);
    data = size ? malloc(size) : NULL;
    if (!data || api->nvrtcGetCUBIN(prog, data) != NVRTC_SUCCESS) {
        js->errors[i] = dup_printf("NVRTC produced no cubin for kernel %s", js->entries[i]);
        free(data);
        api->nvrtcDestroyProgram(&prog);
        free(key);
        return;
    }
    api->nvrtcDestroyProgram(&prog);
    mc_cache_store("cuda", key, data, size);
    free(key);
    js->cubins[i] = data;
    js->sizes[i] = size;
    pthread_mutex_lock(&js->lock);
    js->compiled++;
    pthread_mutex_unlock(&js->lock);
}

static void *worker(void *arg)
{
    job_set *js = arg;
    for (;;) {
        pthread_mutex_lock(&js->lock);
        int i = js->next < js->n ? js->next++ : -1;
        pthread_mutex_unlock(&js->lock);
        if (i < 0)
            return NULL;
        compile_one(js, i);
        pthread_mutex_lock(&js->lock);
        js->done++;
        double now = mc_now_ms();
        if (js->note && now - js->start_ms > 1000 &&
            (now - js->last_note_ms > 500 || js->done == js->n)) {
            char note[96]; /* handed over under the lock: one call at a time */
            snprintf(note, sizeof note, "compiling CUDA kernels: %d of %d (%.1f s)", js->done,
                     js->n, (now - js->start_ms) / 1000);
            js->note(js->note_ctx, note);
            js->last_note_ms = now;
        }
        pthread_mutex_unlock(&js->lock);
    }
}

/* The toolkit's include directory (CUDA_HOME, else the build's), checked. */
static mc_status include_dir(char *incdir, size_t size)
{
    const char *root = getenv("CUDA_HOME");
    snprintf(incdir, size, "%s/include", root && *root ? root : MINIC_CUDA_ROOT);
    char probe[700];
    snprintf(probe, sizeof probe, "%s/cuda_fp16.h", incdir);
    if (access(probe, R_OK) != 0)
        return mc_fail(MC_ERR_SYSTEM,
                       "CUDA headers not found: %s is missing (set CUDA_HOME to the toolkit)",
                       probe);
    return MC_OK;
}

void mc_cuda_cache_evict(const char *const *srcs, int n, int sm)
{
    const mc_nvrtc_api *api = mc_nvrtc_load();
    char incdir[600];
    if (!api || include_dir(incdir, sizeof incdir) != MC_OK)
        return;
    job_set js = {.api = api};
    set_options(&js, sm, incdir);
    for (int i = 0; i < n; i++) {
        char *key = job_key(&js, srcs[i]);
        if (key)
            mc_cache_evict("cuda", key);
        free(key);
    }
}

bool mc_cuda_have_nvrtc(void)
{
    return mc_nvrtc_load() != NULL;
}

mc_status mc_cuda_compile(const char *const *srcs, const char *const *entries, int n, int sm,
                          mc_note_fn note, void *note_ctx, void **cubins, size_t *sizes,
                          int *compiled)
{
    *compiled = 0;
    for (int i = 0; i < n; i++) {
        cubins[i] = NULL;
        sizes[i] = 0;
    }
    if (n == 0)
        return MC_OK;
    const mc_nvrtc_api *api = mc_nvrtc_load();
    if (!api)
        return MC_ERR_SYSTEM;
    char incdir[600];
    mc_status st = include_dir(incdir, sizeof incdir);
    if (st != MC_OK)
        return st;
    job_set js = {.api = api, .srcs = srcs, .entries = entries, .n = n, .cubins = cubins,
                  .sizes = sizes, .note = note, .note_ctx = note_ctx};
    set_options(&js, sm, incdir);
    js.errors = calloc((size_t)n, sizeof(char *));
    if (!js.errors)
        return mc_fail(MC_ERR_SYSTEM, "out of memory compiling CUDA kernels");
    pthread_mutex_init(&js.lock, NULL);
    js.start_ms = mc_now_ms();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int nthreads = (int)(cores > 0 ? cores : 1);
    if (nthreads > 16)
        nthreads = 16;
    if (nthreads > n)
        nthreads = n;
    pthread_t th[16];
    int started = 0;
    for (int t = 1; t < nthreads; t++) {
        if (pthread_create(&th[started], NULL, worker, &js) != 0)
            break;
        started++;
    }
    worker(&js); /* the calling thread works too */
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    pthread_mutex_destroy(&js.lock);
    *compiled = js.compiled;
    for (int i = 0; i < n; i++) {
        if (js.errors[i] && st == MC_OK)
            st = mc_fail(MC_ERR_SYSTEM, "%s", js.errors[i]);
        free(js.errors[i]);
    }
    free(js.errors);
    if (st != MC_OK)
        for (int i = 0; i < n; i++) {
            free(cubins[i]);
            cubins[i] = NULL;
        }
    return st;
}
