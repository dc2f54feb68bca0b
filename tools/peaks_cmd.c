/* `minic peaks [--backend cpu|cuda]`: measure this machine's ceilings once and cache them by
 * device name (runtime/peaks.c), so every later --profile takes its percentages against what
 * the hardware really did rather than a datasheet (docs/PROFILING.md).
 *
 * The GPU part goes through the public C API and the cuda backend's `time` slot: an 8192^3
 * matmul per dtype (f32 without TF32, f16, bf16) for the GEMM rates, and a 1 GiB elementwise
 * device copy (y = -x, read + write bytes) for the bandwidth, so it measures exactly the
 * kernels minic generates and launches. It needs no CUDA headers.
 */
#include "tools/cli.h"

#include <stdio.h>
#include <string.h>

#include "ir/ir.h"
#include "runtime/peaks.h"

/* Median µs of one execution of g on the cuda backend (after a warm-up), -1 on failure. */
static double time_graph_cuda(mc_graph *g, mc_value out, int iters)
{
    mc_options opt = mc_options_default();
    opt.backend = MC_BACKEND_CUDA;
    mc_program *p = NULL;
    double us = -1;
    if (mc_graph_set_outputs(g, &out, 1) != MC_OK || mc_program_compile(g, &opt, &p) != MC_OK)
        return -1;
    if (mc_program_fill_random(p, 1) == MC_OK && mc_program_run(p) == MC_OK && p->backend->time &&
        p->backend->time(p, iters, &us) != MC_OK)
        us = -1;
    mc_program_free(p);
    return us;
}

static int measure_cuda(mc_peaks *pk)
{
    memset(pk, 0, sizeof *pk);
    /* The device's name: from a tiny compiled program's profile. */
    const mc_dtype dts[] = {MC_F32, MC_F16, MC_BF16};
    const int64_t n = 8192;
    for (int i = 0; i < 3; i++) {
        mc_graph *g = mc_graph_new("peaks_gemm");
        int64_t shape[2] = {n, n};
        mc_value a = mc_input(g, "a", dts[i], shape, 2), b = mc_input(g, "b", dts[i], shape, 2);
        double us = time_graph_cuda(g, mc_matmul(g, a, b), 10);
        mc_graph_free(g);
        if (us <= 0)
            return cli_error(CLI_SYSTEM, "peaks: %s", mc_error_message());
        pk->gemm_flops_per_s[dts[i]] = 2.0 * (double)n * (double)n * (double)n / (us * 1e-6);
        if (i == 2) {
            mc_clocks c;
            if (mc_nvml_clocks(NULL, &c))
                pk->sm_mhz = c.sm_mhz; /* the clock the GEMM rates were reached at */
        }
    }
    mc_graph *g = mc_graph_new("peaks_copy");
    int64_t elems = (int64_t)1 << 28, shape[1] = {elems};
    mc_value x = mc_input(g, "x", MC_F32, shape, 1);
    double us = time_graph_cuda(g, mc_neg(g, x), 20);
    mc_graph_free(g);
    if (us <= 0)
        return cli_error(CLI_SYSTEM, "peaks: %s", mc_error_message());
    pk->copy_bytes_per_s = 2.0 * 4.0 * (double)elems / (us * 1e-6);
    return CLI_OK;
}

int cli_peaks(int argc, char **argv)
{
    const char *backend = "cpu";
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: minic peaks [--backend cpu|cuda]\n"
                   "measure this machine's ceilings (cpu: memory copy bandwidth and f32 FMA rate;\n"
                   "cuda: device copy bandwidth and GEMM rate per dtype) and cache them, keyed by\n"
                   "device name, under $XDG_CACHE_HOME/minic/peaks/; --profile then uses them\n");
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
        int rc = measure_cuda(&pk);
        if (rc != CLI_OK)
            return rc;
        /* Keyed by the name the cuda backend reports in profiles. */
        mc_graph *g = mc_graph_new("peaks_name");
        int64_t shape[1] = {1};
        mc_value x = mc_input(g, "x", MC_F32, shape, 1), y = mc_neg(g, x);
        mc_options opt = mc_options_default();
        opt.backend = MC_BACKEND_CUDA;
        mc_program *p = NULL;
        mc_profile prof;
        if (mc_graph_set_outputs(g, &y, 1) == MC_OK && mc_program_compile(g, &opt, &p) == MC_OK &&
            mc_program_fill_random(p, 1) == MC_OK && mc_profile_init(&prof, p) == MC_OK) {
            if (mc_profile_collect(p, 1, &prof) == MC_OK)
                snprintf(pk.device, sizeof pk.device, "%s", prof.device);
            mc_profile_release(&prof);
        }
        mc_program_free(p);
        mc_graph_free(g);
        if (!pk.device[0])
            return cli_error(CLI_SYSTEM, "peaks: cannot read the GPU's name: %s", mc_error_message());
    } else {
        return cli_error(CLI_USER, "peaks: unknown backend '%s' (expected cpu or cuda)", backend);
    }
    if (mc_peaks_save(&pk) != MC_OK)
        return cli_error(CLI_SYSTEM, "peaks: %s", mc_error_message());
    char path[4096];
    mc_peaks_path(pk.device, path, sizeof path);
    printf("peaks of %s (measured, cached in %s):\n", pk.device, path);
    printf("  copy bandwidth  %10.1f GB/s (read + write)\n", pk.copy_bytes_per_s * 1e-9);
    if (pk.fma_flops_per_s > 0)
        printf("  f32 FMA rate    %10.1f GFLOP/s (%d threads)\n", pk.fma_flops_per_s * 1e-9,
               pk.threads);
    for (int d = 0; d < MC_NUM_DTYPES; d++)
        if (pk.gemm_flops_per_s[d] > 0)
            printf("  GEMM %-5s      %10.1f TFLOP/s (8192^3)\n", mc_dtype_name((mc_dtype)d),
                   pk.gemm_flops_per_s[d] * 1e-12);
    if (pk.sm_mhz > 0)
        printf("  at SM clock     %10.0f MHz\n", pk.sm_mhz);
    return CLI_OK;
}
