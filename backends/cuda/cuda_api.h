/* The CUDA driver, NVRTC and cuBLASLt, reached through function pointers that dlopen fills.
 *
 * minic never links against CUDA: the binary must run its CPU path on machines with no driver.
 * The prototypes come from CUDA's own headers at build time (__typeof__ of each declaration,
 * so a mismatch is a compile error); the libraries are opened on first use, once per process.
 * Versioned entry points (cuMemAlloc_v2, ...) are looked up under the names the headers map
 * them to.
 */
#ifndef MINIC_CUDA_API_H
#define MINIC_CUDA_API_H

#include <cuda.h>
#include <cublasLt.h>
#include <nvrtc.h>

#include "backends/backend.h"

#define MC_CU_FUNCS(X) \
    X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetAttribute) \
    X(cuDeviceGetName) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) \
    X(cuCtxSetCurrent) X(cuGetErrorString) X(cuGetErrorName) X(cuMemAlloc) X(cuMemFree) \
    X(cuMemGetInfo) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpy2DAsync) X(cuMemcpyDtoDAsync) X(cuMemsetD8Async) \
    X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncSetAttribute) \
    X(cuLaunchKernel) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) \
    X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize) \
    X(cuEventElapsedTime) X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiate) \
    X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy) X(cuMemHostRegister) X(cuMemHostUnregister) \
    X(cuMemHostGetDevicePointer)

#define MC_NVRTC_FUNCS(X) \
    X(nvrtcVersion) X(nvrtcCreateProgram) X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize) \
    X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcDestroyProgram) \
    X(nvrtcGetErrorString)

#define MC_LT_FUNCS(X) \
    X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetVersion) X(cublasLtMatmulDescCreate) \
    X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) X(cublasLtMatrixLayoutCreate) \
    X(cublasLtMatrixLayoutDestroy) X(cublasLtMatrixLayoutSetAttribute) \
    X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy) \
    X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul) \
    X(cublasLtMatmulAlgoCheck)

#define MC_DECLARE_FN(name) __typeof__(&name) name;
typedef struct mc_cuda_api {
    MC_CU_FUNCS(MC_DECLARE_FN)
} mc_cuda_api;
typedef struct mc_nvrtc_api {
    MC_NVRTC_FUNCS(MC_DECLARE_FN)
    int major, minor;
} mc_nvrtc_api;
typedef struct mc_lt_api {
    MC_LT_FUNCS(MC_DECLARE_FN)
} mc_lt_api;
#undef MC_DECLARE_FN

/* Open NVRTC (no driver needed). NULL with the error set (MC_ERR_SYSTEM) when it is missing. */
const mc_nvrtc_api *mc_nvrtc_load(void);
/* Open the driver and cuBLASLt, initialize, check there is a device and the driver is new
 * enough. NULL with the error set (MC_ERR_SYSTEM, the reason) otherwise. */
const mc_cuda_api *mc_cuda_load(void);
const mc_lt_api *mc_lt_load(void);
/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a driver result. */
const char *mc_cuda_errstr(CUresult r);

#endif
