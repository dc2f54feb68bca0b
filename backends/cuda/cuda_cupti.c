/* CUPTI activity records for the profiler (see cuda_cupti.h).
 *
 * One recording at a time per process (a profile is one call under the program's lock; two
 * programs profiled at once from two threads serialize on `lock`). CUPTI hands buffers back on
 * its own thread or inside cuptiActivityFlushAll; either way the records are appended under
 * `lock`.
 */
#include "backends/cuda/cuda_cupti.h"

#ifndef MINIC_HAVE_CUPTI
/* Built without CUPTI's headers: every profile falls back to CUDA events. */
mc_status mc_cupti_begin(int device)
{
    return mc_fail(MC_ERR_SYSTEM, "minic was built without CUPTI's headers");
}
mc_status mc_cupti_flush(int *count)
{
    *count = 0;
    return mc_fail(MC_ERR_SYSTEM, "minic was built without CUPTI's headers");
}
mc_status mc_cupti_now(uint64_t *ns)
{
    *ns = 0;
    return mc_fail(MC_ERR_SYSTEM, "minic was built without CUPTI's headers");
}
mc_status mc_cupti_end(mc_cupti_kernel **out, int *n)
{
    *out = NULL;
    *n = 0;
    return mc_fail(MC_ERR_SYSTEM, "minic was built without CUPTI's headers");
}
#else

#include <cupti.h>
#include <dlfcn.h>

/* On by default since scripts/profile_check.sh ran it on an H100 (2026-11-25: every record
 * matched, in CUDA graph replays; docs/PROFILING.md); MINIC_CUPTI=0 turns it off. */
#ifndef MC_CUPTI_DEFAULT
#define MC_CUPTI_DEFAULT 1
#endif
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define CUPTI_FUNCS(X)                                                                          \
    X(cuptiGetVersion) X(cuptiGetResultString) X(cuptiActivityEnable) X(cuptiActivityDisable)  \
    X(cuptiActivityRegisterCallbacks) X(cuptiActivityFlushAll) X(cuptiActivityGetNextRecord)    \
    X(cuptiGetTimestamp)

#define DECLARE_FN(name) __typeof__(&name) name;
static struct {
    CUPTI_FUNCS(DECLARE_FN)
} api;
#undef DECLARE_FN

#ifndef MINIC_CUDA_ROOT
#define MINIC_CUDA_ROOT "/usr/local/cuda"
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_error[512];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool recording, registered;
static int only_device = -1; /* the device whose kernels are kept; -1: all */
static mc_cupti_kernel *records;
static int nrecords, cap;
static bool out_of_memory;

static void load(void)
{
    static const char *const names[] = {
        "libcupti.so", "libcupti.so.13", "libcupti.so.12",
        MINIC_CUDA_ROOT "/extras/CUPTI/lib64/libcupti.so", MINIC_CUDA_ROOT "/lib64/libcupti.so",
        MINIC_CUDA_ROOT "/lib/libcupti.so", MINIC_CUDA_ROOT "/targets/x86_64-linux/lib/libcupti.so",
        NULL};
    void *h = NULL;
    for (int i = 0; names[i] && !h; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(load_error, sizeof load_error, "libcupti.so not found (%s)", dlerror());
        return;
    }
#define LOAD(name)                                                                              \
    do {                                                                                        \
        void *f_ = dlsym(h, #name);                                                             \
        if (!f_) {                                                                              \
            snprintf(load_error, sizeof load_error, "libcupti has no symbol %s", #name);        \
            return;                                                                             \
        }                                                                                       \
        memcpy(&api.name, &f_, sizeof f_);                                                      \
    } while (0);
    CUPTI_FUNCS(LOAD)
#undef LOAD
    uint32_t v = 0;
    if (api.cuptiGetVersion(&v) != CUPTI_SUCCESS || v < CUPTI_API_VERSION) {
        /* An older library may hand back an older record layout than the headers describe. */
        snprintf(load_error, sizeof load_error, "libcupti API version %u is older than the headers' %u",
                 v, (unsigned)CUPTI_API_VERSION);
        api.cuptiGetVersion = NULL;
    }
}

static const char *result_string(CUptiResult r)
{
    const char *s = NULL;
    if (api.cuptiGetResultString && api.cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s)
        return s;
    return "unknown CUPTI error";
}

enum { BUFFER_BYTES = 4 << 20, ALIGN = 8 };

static CUpti_ActivityKind kernel_kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(ALIGN, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *rec = NULL;
    pthread_mutex_lock(&lock);
    while (buffer && api.cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (!recording || (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
                           rec->kind != CUPTI_ACTIVITY_KIND_KERNEL))
            continue;
        /* start, end, correlationId and name sit at the same place in every kernel record
         * version since CUDA 11; the headers' newest is used for their offsets. */
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
        if (only_device >= 0 && k->deviceId != (uint32_t)only_device)
            continue;
        if (nrecords == cap) {
            int ncap = cap ? 2 * cap : 1024;
            mc_cupti_kernel *r = realloc(records, (size_t)ncap * sizeof *r);
            if (!r) {
                out_of_memory = true;
                continue;
            }
            records = r;
            cap = ncap;
        }
        mc_cupti_kernel *o = &records[nrecords++];
        o->start_ns = k->start;
        o->end_ns = k->end;
        o->correlation = k->correlationId;
        o->device = k->deviceId;
        snprintf(o->name, sizeof o->name, "%s", k->name ? k->name : "");
    }
    pthread_mutex_unlock(&lock);
    free(buffer);
}

mc_status mc_cupti_begin(int device)
{
    const char *env = getenv("MINIC_CUPTI");
    if (env && !strcmp(env, "0"))
        return mc_fail(MC_ERR_SYSTEM, "CUPTI turned off (MINIC_CUPTI=0)");
    if (!MC_CUPTI_DEFAULT && !(env && !strcmp(env, "1")))
        return mc_fail(MC_ERR_SYSTEM, "off until checked on a GPU (scripts/profile_check.sh); "
                                      "MINIC_CUPTI=1 turns it on");
    pthread_once(&once, load);
    if (load_error[0] || !api.cuptiGetVersion)
        return mc_fail(MC_ERR_SYSTEM, "%s", load_error[0] ? load_error : "CUPTI unusable");
    pthread_mutex_lock(&lock);
    if (recording) {
        pthread_mutex_unlock(&lock);
        return mc_fail(MC_ERR_SYSTEM, "CUPTI is already recording another profile");
    }
    recording = true;
    only_device = device;
    /* MINIC_CUPTI_SERIAL=1: CUPTI's serialized kernel records (each kernel alone on the GPU, as
     * Nsight Compute runs them), a diagnostic: the default records kernels as they overlap in
     * the real run (docs/PROFILING.md). */
    const char *serial = getenv("MINIC_CUPTI_SERIAL");
    kernel_kind = serial && !strcmp(serial, "1") ? CUPTI_ACTIVITY_KIND_KERNEL
                                                 : CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    nrecords = 0;
    out_of_memory = false;
    pthread_mutex_unlock(&lock);
    CUptiResult r = CUPTI_SUCCESS;
    if (!registered) {
        r = api.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
        registered = r == CUPTI_SUCCESS;
    }
    if (r == CUPTI_SUCCESS)
        r = api.cuptiActivityEnable(kernel_kind);
    if (r != CUPTI_SUCCESS) {
        pthread_mutex_lock(&lock);
        recording = false;
        pthread_mutex_unlock(&lock);
        return mc_fail(MC_ERR_SYSTEM, "CUPTI refused to record kernels: %s", result_string(r));
    }
    return MC_OK;
}

mc_status mc_cupti_flush(int *count)
{
    CUptiResult r = api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    pthread_mutex_lock(&lock);
    *count = nrecords;
    bool oom = out_of_memory;
    pthread_mutex_unlock(&lock);
    if (r != CUPTI_SUCCESS)
        return mc_fail(MC_ERR_SYSTEM, "CUPTI could not flush its records: %s", result_string(r));
    if (oom)
        return mc_fail(MC_ERR_SYSTEM, "out of memory collecting CUPTI records");
    return MC_OK;
}

mc_status mc_cupti_now(uint64_t *ns)
{
    *ns = 0;
    pthread_once(&once, load);
    if (load_error[0] || !api.cuptiGetVersion)
        return mc_fail(MC_ERR_SYSTEM, "%s", load_error[0] ? load_error : "CUPTI unusable");
    CUptiResult r = api.cuptiGetTimestamp(ns);
    if (r != CUPTI_SUCCESS)
        return mc_fail(MC_ERR_SYSTEM, "CUPTI has no timestamp: %s", result_string(r));
    return MC_OK;
}

mc_status mc_cupti_end(mc_cupti_kernel **out, int *n)
{
    int count;
    mc_status st = mc_cupti_flush(&count);
    api.cuptiActivityDisable(kernel_kind);
    api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); /* nothing left behind */
    pthread_mutex_lock(&lock);
    recording = false;
    *out = st == MC_OK ? records : NULL;
    *n = st == MC_OK ? nrecords : 0;
    if (st != MC_OK)
        free(records);
    records = NULL;
    nrecords = cap = 0;
    pthread_mutex_unlock(&lock);
    return st;
}

#endif /* MINIC_HAVE_CUPTI */
