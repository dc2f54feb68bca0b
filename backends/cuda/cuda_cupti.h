/* CUPTI's Activity API (the CUDA toolkit's profiling library, as PyTorch's profiler and Nsight
 * Systems use it): every kernel's device start and end timestamps, in ordinary launches and
 * inside CUDA graph replays, without re-launching anything.
 *
 * libcupti is opened with dlopen on first use (never linked: the binary starts without it);
 * the prototypes and the record layout come from the toolkit's headers at build time. Where
 * the library is missing, older than the headers, or refuses, mc_cupti_begin says why and the
 * profiler falls back to CUDA events (backends/cuda/cuda_backend.c), saying so in the header.
 * MINIC_CUPTI=0 in the environment turns it off (to test that fallback); until it has been
 * checked on a GPU it is also off by default and MINIC_CUPTI=1 turns it on (cuda_cupti.c,
 * MC_CUPTI_DEFAULT).
 */
#ifndef MINIC_CUDA_CUPTI_H
#define MINIC_CUDA_CUPTI_H

#include "backends/backend.h"

#include <stdint.h>

typedef struct mc_cupti_kernel {
    uint64_t start_ns, end_ns; /* the device's timestamps (CUPTI's clock, ns) */
    uint32_t correlation;      /* the launch's (or the graph launch's) correlation id */
    uint32_t device;           /* the device it ran on (an ordinal) */
    char name[96];             /* the function's name (an extern "C" entry is unmangled) */
} mc_cupti_kernel;

/* Start recording kernel activity: the kernels of device `device` (an ordinal; -1: every
 * device's). CUPTI is one per process: a tensor-parallel program's other ranks run their own
 * kernels meanwhile, and only the profiled rank's are kept. MC_ERR_SYSTEM with the reason when
 * CUPTI cannot be used. */
mc_status mc_cupti_begin(int device);
/* Deliver every record so far (after the stream was synchronized) into the list that
 * mc_cupti_end returns; `*count` the number of records collected so far. */
mc_status mc_cupti_flush(int *count);
/* CUPTI's timestamp now (ns), on the clock its kernel records use: a host-side time that the
 * device's start and end times can be compared with. MC_ERR_SYSTEM where CUPTI is unusable. */
mc_status mc_cupti_now(uint64_t *ns);
/* Stop recording; *out (malloc'ed, the caller frees) the records in the order CUPTI delivered
 * them, *n their number. */
mc_status mc_cupti_end(mc_cupti_kernel **out, int *n);

#endif
