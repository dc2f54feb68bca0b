/* Loading the CUDA driver, NVRTC and cuBLASLt at run time (see cuda_api.h).
 *
 * Each library is opened once per process under a pthread_once; the outcome (tables or the
 * reason they are missing) is kept, so the probe, `--backend auto` and every program see the
 * same answer without reopening anything. Library names are tried from the most specific
 * (the soname of the CUDA release minic was built against) to the toolkit's own directory.
 */
#include "backends/cuda/cuda_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mc_cuda_api cu_api;
static mc_nvrtc_api nvrtc_api;
static mc_lt_api lt_api;
static char cu_err[1024], nvrtc_err[1024], lt_err[1024];
static bool cu_ok, nvrtc_ok, lt_ok;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT, nvrtc_once = PTHREAD_ONCE_INIT,
                      lt_once = PTHREAD_ONCE_INIT;

#ifndef MINIC_CUDA_ROOT
#define MINIC_CUDA_ROOT "/usr/local/cuda"
#endif

static void *open_first(const char *const *names, char *tried, size_t size)
{
    tried[0] = '\0';
    for (int i = 0; names[i]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
        size_t n = strlen(tried);
        snprintf(tried + n, size - n, "%s%s", n ? ", " : "", names[i]);
    }
    return NULL;
}

/* dlsym a table entry; `sym` is the name the header maps `name` to (cuMemAlloc_v2, ...). */
#define STR2(x) #x
#define STR(x) STR2(x)
#define LOAD(api, lib, name, err)                                                            \
    do {                                                                                     \
        void *f_ = dlsym(lib, STR(name));                                                    \
        if (!f_) {                                                                           \
            snprintf(err, sizeof err, "%s has no symbol %s", what, STR(name));               \
            return;                                                                          \
        }                                                                                    \
        memcpy(&api.name, &f_, sizeof f_);                                                   \
    } while (0)

static const char *cu_what(CUresult r)
{
    const char *s = NULL;
    if (cu_api.cuGetErrorString && cu_api.cuGetErrorString(r, &s) == CUDA_SUCCESS && s)
        return s;
    return "unknown error";
}

const char *mc_cuda_errstr(CUresult r)
{
    static __thread char buf[160];
    const char *name = NULL;
    if (!cu_api.cuGetErrorName || cu_api.cuGetErrorName(r, &name) != CUDA_SUCCESS || !name)
        name = "CUDA error";
    snprintf(buf, sizeof buf, "%s (%s)", name, cu_what(r));
    return buf;
}

static void load_nvrtc(void);
static void load_lt(void);

/* NVRTC and cuBLASLt are hundreds of megabytes of shared objects, and a program needs them only
 * after the driver is up and its context made (200-400 ms on an H100 host without the
 * persistence daemon). So once libcuda is open, a thread opens them while this one runs cuInit:
 * whoever asks for them first waits in pthread_once for what is left of the thread's work.
 * MINIC_CUDA_PRELOAD=0 opens them on demand instead (to time the difference). */
static void *preload_main(void *arg)
{
    (void)arg;
    pthread_once(&nvrtc_once, load_nvrtc);
    pthread_once(&lt_once, load_lt);
    return NULL;
}

static void start_preload(void)
{
    const char *e = getenv("MINIC_CUDA_PRELOAD");
    if (e && strcmp(e, "0") == 0)
        return;
    pthread_attr_t a;
    pthread_t t;
    if (pthread_attr_init(&a) != 0)
        return;
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_create(&t, &a, preload_main, NULL); /* if it fails, each opens on demand */
    pthread_attr_destroy(&a);
}

static void load_driver(void)
{
    static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
    const char *what = "libcuda";
    char tried[256];
    void *h = open_first(names, tried, sizeof tried);
    if (!h) {
        snprintf(cu_err, sizeof cu_err, "no CUDA driver: could not load %s", tried);
        return;
    }
#define X(name) LOAD(cu_api, h, name, cu_err);
    MC_CU_FUNCS(X)
#undef X
    start_preload();
    CUresult r = cu_api.cuInit(0);
    if (r == CUDA_ERROR_NO_DEVICE) {
        snprintf(cu_err, sizeof cu_err, "no CUDA device: the driver found no GPU");
        return;
    }
    if (r != CUDA_SUCCESS) {
        snprintf(cu_err, sizeof cu_err, "the CUDA driver failed to initialize: %s",
                 mc_cuda_errstr(r));
        return;
    }
    int version = 0, count = 0;
    cu_api.cuDriverGetVersion(&version);
    if (version < 12000) {
        snprintf(cu_err, sizeof cu_err,
                 "CUDA driver too old: it supports CUDA %d.%d, minic needs 12.0 or newer",
                 version / 1000, version % 1000 / 10);
        return;
    }
    r = cu_api.cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS || count == 0) {
        snprintf(cu_err, sizeof cu_err, "no CUDA device: the driver reports %d GPUs", count);
        return;
    }
    cu_ok = true;
}

static void load_nvrtc(void)
{
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
                                        MINIC_CUDA_ROOT "/lib64/libnvrtc.so", NULL};
    const char *what = "libnvrtc";
    char tried[512];
    void *h = open_first(names, tried, sizeof tried);
    if (!h) {
        snprintf(nvrtc_err, sizeof nvrtc_err, "no NVRTC: could not load %s", tried);
        return;
    }
#define X(name) LOAD(nvrtc_api, h, name, nvrtc_err);
    MC_NVRTC_FUNCS(X)
#undef X
    nvrtc_api.nvrtcVersion(&nvrtc_api.major, &nvrtc_api.minor);
    nvrtc_ok = true;
}

static void load_lt(void)
{
    static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so.12",
                                        "libcublasLt.so", MINIC_CUDA_ROOT "/lib64/libcublasLt.so",
                                        NULL};
    const char *what = "libcublasLt";
    char tried[512];
    void *h = open_first(names, tried, sizeof tried);
    if (!h) {
        snprintf(lt_err, sizeof lt_err, "no cuBLASLt: could not load %s", tried);
        return;
    }
#define X(name) LOAD(lt_api, h, name, lt_err);
    MC_LT_FUNCS(X)
#undef X
    lt_ok = true;
}

const mc_cuda_api *mc_cuda_load(void)
{
    pthread_once(&cu_once, load_driver);
    if (!cu_ok) {
        mc_fail(MC_ERR_SYSTEM, "%s", cu_err);
        return NULL;
    }
    return &cu_api;
}

const mc_nvrtc_api *mc_nvrtc_load(void)
{
    pthread_once(&nvrtc_once, load_nvrtc);
    if (!nvrtc_ok) {
        mc_fail(MC_ERR_SYSTEM, "%s", nvrtc_err);
        return NULL;
    }
    return &nvrtc_api;
}

const mc_lt_api *mc_lt_load(void)
{
    pthread_once(&lt_once, load_lt);
    if (!lt_ok) {
        mc_fail(MC_ERR_SYSTEM, "%s", lt_err);
        return NULL;
    }
    return &lt_api;
}
