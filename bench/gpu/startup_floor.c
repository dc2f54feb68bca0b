/* What the CUDA libraries themselves cost a process before its first kernel: the floor under
 * minic's cached compile time (issue 21). Each step is timed with the monotonic clock, the way
 * `minic run --verbose` times its compile phases, and nothing of minic is involved:
 *
 *     dlopen libcuda + cuInit, cuDevicePrimaryCtxRetain, dlopen libnvrtc + nvrtcVersion,
 *     dlopen libcublasLt + cublasLtCreate, and a first cublasLtMatmulAlgoGetHeuristic.
 *
 * Then the same with the context made on a second thread while the first opens the libraries,
 * to see what overlap can save. Build (no CUDA libraries needed at link time):
 *
 *     cc -O2 -I/usr/local/cuda/include bench/gpu/startup_floor.c -o startup_floor -ldl -lpthread
 *
 * Run it as a fresh process each time (the driver keeps nothing between processes unless the
 * persistence daemon runs): `for i in 1 2 3; do ./startup_floor; done`.
 */
#define _GNU_SOURCE
#include <cublasLt.h>
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double cpu_ms(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
           (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

static void *must_open(const char *const *names)
{
    for (int i = 0; names[i]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
    }
    fprintf(stderr, "startup_floor: cannot open %s\n", names[0]);
    exit(2);
}

static void *sym(void *h, const char *name)
{
    void *f = dlsym(h, name);
    if (!f) {
        fprintf(stderr, "startup_floor: no symbol %s\n", name);
        exit(2);
    }
    return f;
}

typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*get_fn)(CUdevice *, int);
typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*setcur_fn)(CUcontext);

static const char *const cuda_names[] = {"libcuda.so.1", NULL};
static const char *const nvrtc_names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
                                          "/usr/local/cuda/lib64/libnvrtc.so", NULL};
static const char *const lt_names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so",
                                       "/usr/local/cuda/lib64/libcublasLt.so", NULL};

static CUcontext ctx;
static double t_init, t_ctx;

static void *driver(void *arg)
{
    (void)arg;
    double t = now_ms();
    void *h = must_open(cuda_names);
    if (((init_fn)sym(h, "cuInit"))(0) != CUDA_SUCCESS) {
        fprintf(stderr, "startup_floor: cuInit failed\n");
        exit(2);
    }
    t_init = now_ms() - t;
    t = now_ms();
    CUdevice dev;
    ((get_fn)sym(h, "cuDeviceGet"))(&dev, 0);
    if (((retain_fn)sym(h, "cuDevicePrimaryCtxRetain"))(&ctx, dev) != CUDA_SUCCESS) {
        fprintf(stderr, "startup_floor: no context\n");
        exit(2);
    }
    ((setcur_fn)sym(h, "cuCtxSetCurrent"))(ctx);
    t_ctx = now_ms() - t;
    return NULL;
}

static double t_nvrtc, t_lt_open, t_lt_create, t_heur;

static void libraries(void)
{
    double t = now_ms();
    void *n = must_open(nvrtc_names);
    int major = 0, minor = 0;
    ((int (*)(int *, int *))sym(n, "nvrtcVersion"))(&major, &minor);
    t_nvrtc = now_ms() - t;
    t = now_ms();
    void *l = must_open(lt_names);
    t_lt_open = now_ms() - t;
    (void)l;
}

static void lt_first_calls(void)
{
    void *l = must_open(lt_names);
    double t = now_ms();
    cublasLtHandle_t h;
    if (((cublasStatus_t(*)(cublasLtHandle_t *))sym(l, "cublasLtCreate"))(&h) !=
        CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "startup_floor: cublasLtCreate failed\n");
        exit(2);
    }
    t_lt_create = now_ms() - t;
    t = now_ms();
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    ((cublasStatus_t(*)(cublasLtMatmulDesc_t *, cublasComputeType_t, cudaDataType_t))sym(
        l, "cublasLtMatmulDescCreate"))(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasStatus_t (*layout)(cublasLtMatrixLayout_t *, cudaDataType, uint64_t, uint64_t,
                             int64_t) = sym(l, "cublasLtMatrixLayoutCreate");
    layout(&la, CUDA_R_16BF, 768, 4096, 768);
    layout(&lb, CUDA_R_16BF, 768, 2304, 768);
    layout(&lc, CUDA_R_16BF, 2304, 4096, 2304);
    cublasLtMatmulPreference_t pref;
    ((cublasStatus_t(*)(cublasLtMatmulPreference_t *))sym(l, "cublasLtMatmulPreferenceCreate"))(
        &pref);
    cublasLtMatmulHeuristicResult_t res[1];
    int found = 0;
    cublasOperation_t tr = CUBLAS_OP_T;
    ((cublasStatus_t(*)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void *,
                        size_t))sym(l, "cublasLtMatmulDescSetAttribute"))(
        desc, CUBLASLT_MATMUL_DESC_TRANSA, &tr, sizeof tr);
    ((cublasStatus_t(*)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                        cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                        cublasLtMatmulPreference_t, int, cublasLtMatmulHeuristicResult_t *,
                        int *))sym(l, "cublasLtMatmulAlgoGetHeuristic"))(h, desc, lb, la, lc, lc,
                                                                          pref, 1, res, &found);
    t_heur = now_ms() - t;
}

int main(int argc, char **argv)
{
    bool overlap = argc > 1 && strcmp(argv[1], "--overlap") == 0;
    double t0 = now_ms();
    if (overlap) {
        pthread_t th;
        pthread_create(&th, NULL, driver, NULL);
        libraries();
        pthread_join(th, NULL);
    } else {
        driver(NULL);
        libraries();
    }
    double t_ready = now_ms() - t0;
    lt_first_calls();
    double total = now_ms() - t0;
    printf("startup_floor%s: cuInit %.1f ms, primary context %.1f ms, NVRTC open %.1f ms, "
           "cuBLASLt open %.1f ms, cublasLtCreate %.1f ms, first heuristic %.1f ms; "
           "libraries and context ready at %.1f ms, all %.1f ms wall, %.1f ms CPU\n",
           overlap ? " (context on a thread)" : "", t_init, t_ctx, t_nvrtc, t_lt_open,
           t_lt_create, t_heur, t_ready, total, cpu_ms());
    return 0;
}
