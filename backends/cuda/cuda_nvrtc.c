/* Compiling generated CUDA C with NVRTC: parallel, cached on disk, with useful failures.
 *
 * A program's kernels are independent, so they compile on a small pool of threads (one per
 * core, at most 16) that take the next source from a shared counter. Each source is looked up
 * first in the disk cache (runtime/cache.c, kind "cuda") under a key holding NVRTC's version,
 * the target architecture, every option and the whole source (prelude included), so a second
 * run of the same graph compiles nothing. Threads never touch the caller's error state: a
 * failure is recorded per job and reported by the calling thread, with NVRTC's log and the
 * path of a file holding the source that failed (written next to the system's temp files).
 */
#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_api.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef MINIC_CUDA_ROOT
#define MINIC_CUDA_ROOT "/usr/local/cuda"
#endif

typedef struct job_set {
    const mc_nvrtc_api *api;
    const char *const *srcs;
    const char *const *entries;
    int n;
    const char *opts[8];
    int nopts;
    char optkey[1024];
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

static char *save_failed_source(const char *entry, const char *src)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    char *path = dup_printf("%s/minic-%s-%016llx.cu", tmp, entry,
                            (unsigned long long)mc_hash64(src, strlen(src), 0));
    if (!path)
        return NULL;
    FILE *f = fopen(path, "w");
    if (!f || fputs(src, f) < 0) {
        if (f)
            fclose(f);
        free(path);
        return NULL;
    }
    fclose(f);
    return path;
}

static void compile_one(job_set *js, int i)
{
    const mc_nvrtc_api *api = js->api;
    const char *src = js->srcs[i];
    char *key = dup_printf("%s\n%s", js->optkey, src);
    if (!key) {
        js->errors[i] = dup_printf("out of memory compiling kernel %s", js->entries[i]);
        return;
    }
    void *data;
    size_t size;
    if (mc_cache_load("cuda", key, &data, &size)) {
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
    const char *root = getenv("CUDA_HOME");
    char incdir[600];
    snprintf(incdir, sizeof incdir, "%s/include", root && *root ? root : MINIC_CUDA_ROOT);
    char probe[700];
    snprintf(probe, sizeof probe, "%s/cuda_fp16.h", incdir);
    if (access(probe, R_OK) != 0)
        return mc_fail(MC_ERR_SYSTEM,
                       "CUDA headers not found: %s is missing (set CUDA_HOME to the toolkit)",
                       probe);
    job_set js = {.api = api, .srcs = srcs, .entries = entries, .n = n, .cubins = cubins,
                  .sizes = sizes, .note = note, .note_ctx = note_ctx};
    char arch[32], inc[640];
    snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d", sm);
    snprintf(inc, sizeof inc, "--include-path=%s", incdir);
    js.opts[js.nopts++] = arch;
    js.opts[js.nopts++] = inc;
    js.opts[js.nopts++] = "--std=c++17";
    js.opts[js.nopts++] = "--fmad=true";
    js.opts[js.nopts++] = "--device-as-default-execution-space";
    int len = snprintf(js.optkey, sizeof js.optkey, "nvrtc %d.%d", api->major, api->minor);
    for (int i = 0; i < js.nopts; i++)
        len += snprintf(js.optkey + len, sizeof js.optkey - (size_t)len, " %s", js.opts[i]);
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
    mc_status st = MC_OK;
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
