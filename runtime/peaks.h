/* Device ceilings for the profile's "% of peak" (docs/PROFILING.md): what `minic peaks`
 * measures on this machine and caches by device name, the GPU clocks read through NVML, and how
 * both are applied to a collected profile (measured ceilings replace datasheet ones; GPU compute
 * peaks are scaled by the current SM clock over its maximum).
 *
 * Split so the arithmetic is testable without a device: mc_peaks_apply_with takes the measured
 * ceilings and the clocks as arguments; mc_peaks_apply reads them from the cache and NVML.
 */
#ifndef MINIC_PEAKS_H
#define MINIC_PEAKS_H

#include "runtime/profile.h"

typedef struct mc_peaks {
    char device[128];            /* the name the entry is keyed by */
    double copy_bytes_per_s;     /* memory copy bandwidth, read + write bytes; 0: not measured */
    double fma_flops_per_s;      /* CPU: f32 vector FMA rate on all threads (2 FLOPs per FMA) */
    double gemm_flops_per_s[MC_NUM_DTYPES]; /* GPU: GEMM rate per input dtype; 0: not measured */
    double sm_mhz;               /* GPU: SM clock while measuring; 0: unknown */
    int threads;                 /* CPU: threads used */
} mc_peaks;

typedef struct mc_clocks {
    bool known;
    double sm_mhz, sm_max_mhz, mem_mhz, mem_max_mhz;
} mc_clocks;

typedef struct mc_peaks_config {
    int threads;          /* 0: one per online CPU */
    size_t copy_bytes;    /* per buffer; 0: 512 MiB or less when memory is short */
    int reps;             /* 0: 5 */
    int64_t fma_iters;    /* per thread; 0: 20,000,000 */
} mc_peaks_config;

/* The cache file of a device: $XDG_CACHE_HOME/minic/peaks/NAME.txt (else ~/.cache/...), NAME
 * the device name with every character but [A-Za-z0-9._-] as '_'. false when there is no home. */
bool mc_peaks_path(const char *device, char *path, size_t size);
mc_status mc_peaks_save(const mc_peaks *pk);
/* true when a cache entry for `device` exists and parses (pk filled). */
bool mc_peaks_load(const char *device, mc_peaks *pk);

mc_status mc_peaks_measure_cpu(const mc_peaks_config *cfg, mc_peaks *pk);
/* Dense datasheet peaks by device-name prefix; false (all 0) for an unknown device. */
bool mc_peaks_datasheet(const char *device, double *f32, double *tf32, double *tc16, double *bw);

/* NVML (runtime/nvml.c, dlopen'ed at run time): the clocks of the GPU named `device` (or of
 * GPU 0 when no name matches). false and c->known == false without NVML. */
bool mc_nvml_clocks(const char *device, mc_clocks *c);

/* Apply measured ceilings (NULL: none) and clocks (NULL or !known: no scaling) to prof, whose
 * datasheet peaks are already filled (or none). Sets prof->peaks_source, clocks, clock_scale. */
void mc_peaks_apply_with(mc_profile *prof, const mc_peaks *measured, const mc_clocks *clocks);
/* The same with the cache entry for prof->device and, for a GPU backend, its datasheet peaks
 * (mc_peaks_datasheet by device name) and NVML's clocks. */
void mc_peaks_apply(mc_profile *prof);

#endif
