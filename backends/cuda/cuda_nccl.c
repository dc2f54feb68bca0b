/* NCCL loaded at run time (see cuda_nccl.h).
 *
 * The prototypes come from the toolkit's nccl.h where it has one (CUDA 13's does), so a
 * mismatch is a compile error, as for the driver; without it, the handful of declarations
 * minic uses are written out below (NCCL's ABI: these values have not changed since 2.x).
 */
#include "backends/cuda/cuda_nccl.h"

#include <dlfcn.h>
#include <glob.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if __has_include(<nccl.h>)
#include <nccl.h>
#else
typedef struct ncclComm *ncclComm_t;
typedef enum { ncclSuccess = 0 } ncclResult_t;
typedef enum { ncclFloat16 = 6, ncclFloat32 = 7, ncclBfloat16 = 9 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;
ncclResult_t ncclGetVersion(int *version);
ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
const char *ncclGetErrorString(ncclResult_t result);
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           CUstream stream);
#endif

#define MC_NCCL_FUNCS(X) \
    X(ncclGetVersion) X(ncclCommInitAll) X(ncclCommDestroy) X(ncclGetErrorString) X(ncclAllReduce)

static struct {
#define X(name) __typeof__(&name) name;
    MC_NCCL_FUNCS(X)
#undef X
} nccl;
static char nccl_err[1024], nccl_desc[600];
static bool nccl_ok;
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;

/* The first match of a glob pattern, into path; false when none. */
static bool first_match(const char *pattern, char *path, size_t size)
{
    glob_t g;
    bool ok = glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0;
    if (ok)
        snprintf(path, size, "%s", g.gl_pathv[0]);
    globfree(&g);
    return ok;
}

static void load_nccl(void)
{
    static const char *const wheels[] = {
        "/usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
        "/usr/local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
        "/usr/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
        "/usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2",
        "/opt/*/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
        NULL};
    char path[512] = "", tried[400] = "";
    const char *env = getenv("MINIC_NCCL");
    void *h = NULL;
    if (env && env[0]) {
        snprintf(path, sizeof path, "%s", env);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            snprintf(nccl_err, sizeof nccl_err, "NCCL: MINIC_NCCL=%s could not be loaded: %s",
                     env, dlerror());
            return;
        }
    }
    if (!h) {
        snprintf(path, sizeof path, "libnccl.so.2");
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    for (int i = 0; !h && wheels[i]; i++)
        if (first_match(wheels[i], path, sizeof path))
            h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(tried, sizeof tried, "libnccl.so.2 and PyTorch's nvidia/nccl/lib");
        snprintf(nccl_err, sizeof nccl_err,
                 "no NCCL: could not load %s (set MINIC_NCCL to the path of libnccl.so.2)",
                 tried);
        return;
    }
#define X(name)                                                                               \
    {                                                                                         \
        void *f_ = dlsym(h, #name);                                                           \
        if (!f_) {                                                                            \
            snprintf(nccl_err, sizeof nccl_err, "NCCL: %s has no symbol %s", path, #name);    \
            return;                                                                           \
        }                                                                                     \
        memcpy(&nccl.name, &f_, sizeof f_);                                                   \
    }
    MC_NCCL_FUNCS(X)
#undef X
    int v = 0;
    nccl.ncclGetVersion(&v);
    /* NCCL_VERSION_CODE: major*10000 + minor*100 + patch since 2.9 */
    snprintf(nccl_desc, sizeof nccl_desc, "NCCL %d.%d.%d (%s)", v / 10000, v / 100 % 100, v % 100,
             path);
    if (v < 20900) {
        snprintf(nccl_err, sizeof nccl_err, "%s is too old: minic needs 2.9 or newer (CUDA graph "
                 "capture of collectives)", nccl_desc);
        return;
    }
    /* No NVLink multicast: a process that uses it can take a shared host's GPUs out of
     * service. Set before the first communicator (NCCL reads it then). */
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    nccl_ok = true;
}

static bool nccl_load(void)
{
    pthread_once(&nccl_once, load_nccl);
    if (!nccl_ok)
        mc_fail(MC_ERR_SYSTEM, "%s", nccl_err);
    return nccl_ok;
}

const char *mc_nccl_describe(void)
{
    return nccl_ok ? nccl_desc : NULL;
}

mc_status mc_nccl_comms(int n, const int *devices, mc_nccl_comm **comms)
{
    if (!nccl_load())
        return MC_ERR_SYSTEM;
    ncclComm_t *c = calloc((size_t)n, sizeof *c);
    if (!c)
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    ncclResult_t r = nccl.ncclCommInitAll(c, n, devices);
    if (r != ncclSuccess) {
        free(c);
        return mc_fail(MC_ERR_SYSTEM, "NCCL: making communicators for %d GPUs failed: %s", n,
                       nccl.ncclGetErrorString(r));
    }
    for (int i = 0; i < n; i++)
        comms[i] = (mc_nccl_comm *)c[i];
    free(c);
    return MC_OK;
}

void mc_nccl_comm_free(mc_nccl_comm *comm)
{
    if (comm && nccl_ok)
        nccl.ncclCommDestroy((ncclComm_t)comm);
}

mc_status mc_nccl_allreduce(mc_nccl_comm *comm, CUdeviceptr in, CUdeviceptr out, int64_t count,
                            mc_dtype dtype, CUstream stream)
{
    ncclDataType_t t;
    switch (dtype) {
    case MC_F32: t = ncclFloat32; break;
    case MC_F16: t = ncclFloat16; break;
    case MC_BF16: t = ncclBfloat16; break;
    default:
        return mc_fail(MC_ERR_SYSTEM, "NCCL: an all-reduce of %s is not supported",
                       mc_dtype_name(dtype));
    }
    ncclResult_t r = nccl.ncclAllReduce((const void *)(uintptr_t)in, (void *)(uintptr_t)out,
                                        (size_t)count, t, ncclSum, (ncclComm_t)comm, stream);
    if (r != ncclSuccess)
        return mc_fail(MC_ERR_SYSTEM, "NCCL: all-reduce of %lld elements failed: %s",
                       (long long)count, nccl.ncclGetErrorString(r));
    return MC_OK;
}
