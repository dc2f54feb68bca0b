/* `minic peaks [--backend cpu|cuda]`: measure this machine's ceilings once and cache them by
 * device name (runtime/peaks.c), so every later --profile takes its percentages against what
 * the hardware really did rather than a datasheet (docs/PROFILING.md).
 *
 * The measurements are runtime/peaks.c's (the same ones a profile makes on first use when the
 * cache has no fresh entry): the CPU's copy bandwidth and FMA rate, the GPU's GEMM rate per
 * dtype (8192^3 through minic's own kernels) and device copy bandwidth, each the best of
 * several short measurements with the spread printed beside it. It needs no CUDA headers.
 */
#include "tools/cli.h"

#include <stdio.h>
#include <string.h>

#include "ir/ir.h"
#include "runtime/peaks.h"

int cli_peaks(int argc, char **argv)
{
    const char *backend = "cpu";
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: minic peaks [--backend cpu|cuda]\n"
                   "measure this machine's ceilings (cpu: memory copy bandwidth, also at working sets\n"
                   "that fit the caches, and f32 FMA rate;\n"
                   "cuda: device copy bandwidth and GEMM rate per dtype) and cache them, keyed by\n"
                   "device name, under $XDG_CACHE_HOME/minic/peaks/; --profile uses them, and measures\n"
                   "them itself on first use when the cache has none (or one older than minic)\n");
            return CLI_OK;
        }
        if (!strncmp(argv[i], "--backend=", 10)) {
            backend = argv[i] + 10;
        } else if (!strcmp(argv[i], "--backend")) {
            if (i + 1 >= argc)
                return cli_error(CLI_USER, "option '--backend' needs a value (cpu|cuda)");
            backend = argv[++i];
        } else {
            static const char *const known[] = {"--backend", "--help"};
            char near[64];
            if (mc_suggest(argv[i], strlen(argv[i]), known, 2, near, sizeof near))
                return cli_error(CLI_USER, "peaks: unknown option '%s' (did you mean %s? usage: "
                                 "minic peaks [--backend cpu|cuda])", argv[i], near);
            return cli_error(CLI_USER, "peaks: unknown option '%s' (usage: minic peaks [--backend cpu|cuda])", argv[i]);
        }
    }
    mc_peaks pk;
    if (!strcmp(backend, "cpu")) {
        mc_peaks_config cfg = {0};
        if (mc_peaks_measure_cpu(&cfg, &pk) != MC_OK)
            return cli_error(mc_error_status() == MC_ERR_INPUT ? CLI_USER : CLI_SYSTEM, "peaks: %s",
                             mc_error_message());
    } else if (!strcmp(backend, "cuda")) {
        if (mc_peaks_measure_cuda(&pk) != MC_OK)
            return cli_error(CLI_SYSTEM, "peaks: %s", mc_error_message());
    } else {
        return cli_error(CLI_USER, "peaks: unknown backend '%s' (expected cpu or cuda)", backend);
    }
    /* The numbers are printed even when they cannot be cached (then exit 2, saying why). */
    bool saved = mc_peaks_save(&pk) == MC_OK;
    char path[4096], why_not[512];
    snprintf(why_not, sizeof why_not, "%s", saved ? "" : mc_error_message());
    if (!mc_peaks_path(pk.device, path, sizeof path))
        snprintf(path, sizeof path, "nowhere");
    printf("peaks of %s (measured, best of %d, %s %s):\n", pk.device, pk.reps,
           saved ? "cached in" : "NOT cached in", path);
    printf("  copy bandwidth  %10.1f GB/s (read + write; spread %.0f%%)\n",
           pk.copy_bytes_per_s * 1e-9, pk.copy_spread_pct);
    for (int s = 0; s < MC_PEAK_SIZES && pk.size_bytes[s] > 0; s++)
        printf("  copy in %5.0f KiB %8.1f GB/s (the ceiling of kernels of at most that many bytes)\n",
               pk.size_bytes[s] / 1024, pk.size_bytes_per_s[s] * 1e-9);
    if (pk.fma_flops_per_s > 0)
        printf("  f32 FMA rate    %10.1f GFLOP/s (%d threads; spread %.0f%%)\n",
               pk.fma_flops_per_s * 1e-9, pk.threads, pk.fma_spread_pct);
    if (pk.datasheet_fma_flops_per_s > 0) {
        char why[256];
        mc_peaks_cpu_datasheet(pk.threads, why, sizeof why);
        printf("  datasheet FMA   %10.1f GFLOP/s (%s)%s\n", pk.datasheet_fma_flops_per_s * 1e-9, why,
               pk.disagrees ? "\n  FLAG: the measurement disagrees with the datasheet by more than 2x "
                              "(a busy machine, or a throttled clock); profiles use the datasheet" : "");
    }
    for (int d = 0; d < MC_NUM_DTYPES; d++)
        if (pk.gemm_flops_per_s[d] > 0)
            printf("  GEMM %-5s      %10.1f TFLOP/s (8192^3)\n", mc_dtype_name((mc_dtype)d),
                   pk.gemm_flops_per_s[d] * 1e-12);
    if (pk.gemm_spread_pct > 0)
        printf("  GEMM spread     %10.0f%%\n", pk.gemm_spread_pct);
    if (pk.sm_mhz > 0)
        printf("  at SM clock     %10.0f MHz\n", pk.sm_mhz);
    if (!saved)
        return cli_error(CLI_SYSTEM, "peaks: measured, but not cached: %s", why_not);
    return CLI_OK;
}
