/* NCCL, NVIDIA's collective library, for tensor-parallel programs (mc_options.devices): one
 * communicator per GPU, made for all of a parallel program's ranks at once, and the all-reduce
 * a KIR_COLLECTIVE kernel runs on its rank's stream (captured in the CUDA graph like a kernel).
 *
 * Loaded with dlopen on first use, like the driver: the binary starts and runs everything else
 * without it. The library is looked for at MINIC_NCCL (a path), then under its soname, then
 * where PyTorch's wheel puts it (site-packages/nvidia/nccl/lib). NVLink multicast (NVLS) is
 * turned off (NCCL_NVLS_ENABLE=0) before the first communicator is made: on shared machines a
 * program that uses it can put the host's GPUs out of service.
 */
#ifndef MINIC_CUDA_NCCL_H
#define MINIC_CUDA_NCCL_H

#include "backends/cuda/cuda_api.h"

typedef struct mc_nccl_comm mc_nccl_comm; /* NCCL's ncclComm_t, opaque here */

/* One communicator per device of devices[0..n) (rank r on devices[r]) into comms[0..n).
 * MC_ERR_SYSTEM with the reason when NCCL is missing or refuses. */
mc_status mc_nccl_comms(int n, const int *devices, mc_nccl_comm **comms);
void mc_nccl_comm_free(mc_nccl_comm *comm);
/* out = the sum over every rank of in (count elements of dtype), enqueued on stream: every rank
 * must make the same calls in the same order. in == out is allowed. */
mc_status mc_nccl_allreduce(mc_nccl_comm *comm, CUdeviceptr in, CUdeviceptr out, int64_t count,
                            mc_dtype dtype, CUstream stream);
/* "NCCL 2.28.9 (/path/libnccl.so.2)" once loaded; NULL before or when it failed. */
const char *mc_nccl_describe(void);

#endif
