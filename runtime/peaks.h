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
    /* CPU: the same copy at working sets that fit the caches (MC_PEAK_SIZES sizes, bytes read +
     * written in all threads, ascending; 0: not measured), each the best of `reps`. */
    double size_bytes[MC_PEAK_SIZES], size_bytes_per_s[MC_PEAK_SIZES];
    double fma_flops_per_s;      /* CPU: f32 vector FMA rate on all threads (2 FLOPs per FMA) */
    double gemm_flops_per_s[MC_NUM_DTYPES]; /* GPU: GEMM rate per input dtype; 0: not measured */
    double sm_mhz;               /* GPU: SM clock while measuring; 0: unknown */
    int threads;                 /* CPU: threads used */
    /* Each ceiling is the best of `reps` short measurements; the spread is (best - worst) /
     * best, in percent (0: one measurement or not measured). */
    int reps;
    double copy_spread_pct, fma_spread_pct, gemm_spread_pct;
    /* CPU: the datasheet FMA ceiling (cores x FMA units x vector width x 2 x clock, from
     * /proc/cpuinfo and cpuid); 0: unknown. When the measured rate disagrees with it by more
     * than 2x, `disagrees` is set and the profile uses the datasheet ceiling (flagged). */
    double datasheet_fma_flops_per_s;
    bool disagrees;
    int online_cpus;             /* the machine the entry was measured on: CPUs online */
    char not_cached[256];        /* mc_peaks_get: why a fresh measurement was not cached ("") */
} mc_peaks;

typedef struct mc_clocks {
    bool known;
    double sm_mhz, sm_max_mhz, mem_mhz, mem_max_mhz;
} mc_clocks;

typedef struct mc_peaks_config {
    int threads;          /* 0: one per online CPU */
    size_t copy_bytes;    /* per buffer; 0: 128 MiB or less when memory is short */
    int reps;             /* 0: 9 */
    int64_t fma_iters;    /* per thread; 0: 2,000,000 (a few ms); timed by each thread's CPU
                             clock, so a busy machine's other processes do not count */
} mc_peaks_config;

/* The cache file of a device: $XDG_CACHE_HOME/minic/peaks/NAME.txt (else ~/.cache/...), NAME
 * the device name with every character but [A-Za-z0-9._-] as '_'. false when there is no home. */
bool mc_peaks_path(const char *device, char *path, size_t size);
mc_status mc_peaks_save(const mc_peaks *pk);
/* true when a cache entry for `device` exists and parses (pk filled). */
bool mc_peaks_load(const char *device, mc_peaks *pk);

mc_status mc_peaks_measure_cpu(const mc_peaks_config *cfg, mc_peaks *pk);
/* The CPU's datasheet f32 FMA ceiling in FLOP/s for `threads` threads (0: all online CPUs):
 * physical cores used x 2 FMA units x vector lanes (16 with AVX-512, 8 with AVX2+FMA, 4
 * otherwise) x 2 FLOPs x the clock (cpufreq's maximum, else /proc/cpuinfo's MHz). 0 when the
 * clock is unknown. `why` (may be NULL) gets the factors in words. */
double mc_peaks_cpu_datasheet(int threads, char *why, size_t why_size);
/* GPU: the same ceilings through the cuda backend (GEMM 8192^3 per dtype, a 1 GiB device copy),
 * best of several; MC_ERR_SYSTEM without a GPU. pk->device is the name profiles report. */
mc_status mc_peaks_measure_cuda(mc_peaks *pk);
/* Is a cache entry usable: written by this binary or a newer one's run (the file is not older
 * than the executable) on the same machine (same number of online CPUs)? */
bool mc_peaks_fresh(const mc_peaks *pk);
/* Cached peaks for `device` if fresh, else measured now (CPU when !gpu, else GPU) and cached.
 * false when neither works (pk zeroed). `measured_now` (may be NULL) says which. */
bool mc_peaks_get(const char *device, bool gpu, mc_peaks *pk, bool *measured_now);
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
