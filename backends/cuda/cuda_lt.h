/* GEMMs through cuBLASLt (backends/cuda/cuda_lt.c), for the CUDA backend (cuda_backend.c): set up
 * once per GEMM kernel at prepare time from its plan (cuda.h's mc_cuda_gemm_plan), launched on
 * every run, freed with the program.
 */
#ifndef MINIC_CUDA_LT_H
#define MINIC_CUDA_LT_H

#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_api.h"

/* cuBLASLt's workspace: one per program, in its device allocation */
#define MC_LT_WORKSPACE_BYTES ((size_t)32 << 20)

typedef struct mc_lt_gemm {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc, ld;
    cublasLtMatmulAlgo_t algo;
    CUdeviceptr *ptr; /* per call: A, B, C, D */
    int align[4];     /* the pointers' common alignments (bytes) the algorithm was chosen for */
} mc_lt_gemm;

/* What a GEMM's setup and launch need of the program. */
typedef struct mc_lt_env {
    const mc_cuda_api *cu;
    const mc_lt_api *lt;
    cublasLtHandle_t handle;
    CUstream stream;
    CUdeviceptr workspace;  /* MC_LT_WORKSPACE_BYTES */
    CUdeviceptr scratch;    /* the matrices with buffer < 0 (mc_lt_matrix) */
    const CUdeviceptr *buf; /* per kp buffer: its device address */
    const char *device;     /* the GPU's name and */
    int sm;                 /* compute capability: part of the cached plans' key */
} mc_lt_env;

/* Descriptors, the pointers of every call, and the algorithm (timed among the heuristic's
 * candidates when p->autotune). The algorithm chosen is kept in the kernel cache (kind
 * `ltplan`, keyed by the problem, its alignments, the workspace, cuBLASLt's version and the GPU's
 * name and compute capability); a later process takes it from there after one
 * cublasLtMatmulAlgoCheck, with no heuristic query (the costliest part of a cached compile);
 * MINIC_CUDA_LT_PLAN_CACHE=0 queries the heuristic every time, as before. `like`, when not NULL, is the setup of an earlier GEMM of the
 * same shapes, layouts and epilogue (another layer of a model): its algorithm is taken when the
 * pointers' alignments agree, with no heuristic query and no timing. *ok false, with MC_OK,
 * when cuBLASLt has no algorithm: the caller falls back to a generated kernel (and frees g). */
mc_status mc_lt_gemm_setup(const mc_lt_env *env, const kir_kernel *k, const mc_cuda_gemm_plan *p,
                           mc_lt_gemm *g, const mc_lt_gemm *like, bool *ok);
/* Enqueue the GEMM's calls on env->stream; `name` (the kernel's) for the error. */
mc_status mc_lt_gemm_launch(const mc_lt_env *env, const mc_cuda_gemm_plan *p, const mc_lt_gemm *g,
                            const char *name);
void mc_lt_gemm_free(const mc_lt_api *lt, mc_lt_gemm *g);

#endif
