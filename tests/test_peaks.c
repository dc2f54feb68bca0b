/* Peaks (runtime/peaks.c, runtime/nvml.c): the measured-ceiling cache round trip, the choice
 * between measured and datasheet peaks and its "measured" marking, the clock scaling
 * arithmetic (compute peaks x current/max SM clock; bandwidth never), the "clocks unknown" and
 * suspect paths of the report, and a small CPU measurement. No GPU is needed: the cuda case is
 * a compiled program whose backend says it is a GPU, with clocks passed in by hand.
 */
#include "testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/peaks.h"

static const mc_backend fake_cuda = {.name = "cuda", .is_gpu = true};
static const mc_backend fake_cpu = {.name = "cpu", .runs_on_host = true};

typedef struct fixture {
    mc_graph *g;
    mc_program *p, fake;
    mc_profile prof;
    int gemm;             /* index of the GEMM kernel */
    mc_dtype gemm_dtype;
} fixture;

/* examples/mlp.graph compiled on ref, its profile pointing at a program with `backend`. */
static void setup_fixture(fixture *f, const mc_backend *backend)
{
    memset(f, 0, sizeof *f);
    assert_int_equal(mc_graph_parse_file(mc_test_src("examples/mlp.graph"), &f->g), MC_OK);
    mc_options opt = mc_options_default();
    opt.backend = MC_BACKEND_REF;
    assert_int_equal(mc_program_compile(f->g, &opt, &f->p), MC_OK);
    f->fake = *f->p;
    f->fake.backend = backend;
    assert_int_equal(mc_profile_init(&f->prof, &f->fake), MC_OK);
    f->gemm = -1;
    for (int k = 0; k < f->prof.nkernels; k++)
        if (f->p->kp->kernels[k].category == KIR_GEMM && f->gemm < 0)
            f->gemm = k;
    assert_true(f->gemm >= 0);
    const kir_kernel *kk = &f->p->kp->kernels[f->gemm];
    f->gemm_dtype = f->p->kp->buffers[kk->views[kk->gemm.a].buffer].dtype;
}

static void teardown_fixture(fixture *f)
{
    mc_profile_release(&f->prof);
    mc_program_free(f->p);
    mc_graph_free(f->g);
}

static void use_tmp_cache(void)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/peaks_cache", mc_test_tmpdir());
    setenv("XDG_CACHE_HOME", dir, 1);
}

static void test_cache_round_trip(void **state)
{
    (void)state;
    use_tmp_cache();
    mc_peaks pk = {.copy_bytes_per_s = 3.0e12, .fma_flops_per_s = 1.25e12, .sm_mhz = 1755,
                   .threads = 7};
    snprintf(pk.device, sizeof pk.device, "NVIDIA H100 80GB HBM3");
    pk.gemm_flops_per_s[MC_BF16] = 7.7e14;
    pk.gemm_flops_per_s[MC_F32] = 5.1e13;
    assert_int_equal(mc_peaks_save(&pk), MC_OK);
    char path[4096];
    assert_true(mc_peaks_path(pk.device, path, sizeof path));
    assert_non_null(strstr(path, "/minic/peaks/NVIDIA_H100_80GB_HBM3.txt"));
    mc_peaks back;
    assert_true(mc_peaks_load(pk.device, &back));
    assert_string_equal(back.device, pk.device);
    assert_float_equal(back.copy_bytes_per_s, pk.copy_bytes_per_s, 1e6);
    assert_float_equal(back.fma_flops_per_s, pk.fma_flops_per_s, 1e6);
    assert_float_equal(back.gemm_flops_per_s[MC_BF16], 7.7e14, 1e9);
    assert_float_equal(back.gemm_flops_per_s[MC_F32], 5.1e13, 1e8);
    assert_true(back.gemm_flops_per_s[MC_F16] == 0);
    assert_float_equal(back.sm_mhz, 1755, 1e-9);
    assert_int_equal(back.threads, 7);
    /* Another device, and one whose name maps to the same file name: no entry. */
    assert_false(mc_peaks_load("NVIDIA A100-SXM4-80GB", &back));
    assert_false(mc_peaks_load("NVIDIA H100 80GB/HBM3", &back));
    assert_true(back.copy_bytes_per_s == 0);
}

static void test_datasheet(void **state)
{
    (void)state;
    double f32, tf32, tc16, bw;
    assert_true(mc_peaks_datasheet("NVIDIA H100 80GB HBM3", &f32, &tf32, &tc16, &bw));
    assert_float_equal(tc16, 989e12, 1);   /* dense, not the sparse 1979 */
    assert_float_equal(bw, 3.35e12, 1);
    assert_true(mc_peaks_datasheet("NVIDIA H200", &f32, &tf32, &tc16, &bw));
    assert_float_equal(bw, 4.8e12, 1);
    assert_false(mc_peaks_datasheet("Intel(R) Xeon(R)", &f32, &tf32, &tc16, &bw));
    assert_true(f32 == 0 && bw == 0);
}

/* Datasheet peaks, clocks at half the maximum: compute peaks halve, bandwidth does not. */
static void test_clock_scaling(void **state)
{
    (void)state;
    fixture f;
    setup_fixture(&f, &fake_cuda);
    for (int k = 0; k < f.prof.nkernels; k++)
        f.prof.peak_flops[k] = k == f.gemm ? 989e12 : 66.9e12;
    f.prof.peak_bytes_per_s = 3.35e12;
    mc_clocks c = {.known = true, .sm_mhz = 990, .sm_max_mhz = 1980, .mem_mhz = 2619,
                   .mem_max_mhz = 2619};
    mc_peaks_apply_with(&f.prof, NULL, &c);
    assert_string_equal(f.prof.peaks_source, "datasheet");
    assert_true(f.prof.clocks_known);
    assert_float_equal(f.prof.clock_scale, 0.5, 1e-12);
    assert_float_equal(f.prof.peak_flops[f.gemm], 494.5e12, 1);
    assert_float_equal(f.prof.peak_bytes_per_s, 3.35e12, 1);
    /* The header and the JSON show the clocks. */
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    mc_profile_print(&f.prof, out);
    fclose(out);
    assert_non_null(strstr(buf, "peaks: datasheet"));
    assert_non_null(strstr(buf, "SM 990/1980 MHz"));
    free(buf);
    char path[4200];
    snprintf(path, sizeof path, "%s/peaks_profile.json", mc_test_tmpdir());
    assert_int_equal(mc_profile_write_json(&f.prof, path), MC_OK);
    FILE *j = fopen(path, "r");
    assert_non_null(j);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, j);
    text[n] = '\0';
    fclose(j);
    assert_non_null(strstr(text, "\"peaks_source\": \"datasheet\""));
    assert_non_null(strstr(text, "\"sm_mhz\": 990"));
    teardown_fixture(&f);
}

/* Measured ceilings replace the datasheet ones and are marked; a measured GEMM rate is scaled
 * by the current clock over the clock it was measured at. */
static void test_measured_marking(void **state)
{
    (void)state;
    fixture f;
    setup_fixture(&f, &fake_cuda);
    for (int k = 0; k < f.prof.nkernels; k++)
        f.prof.peak_flops[k] = k == f.gemm ? 989e12 : 66.9e12;
    f.prof.peak_bytes_per_s = 3.35e12;
    mc_peaks m = {.copy_bytes_per_s = 3.0e12, .sm_mhz = 1980};
    m.gemm_flops_per_s[f.gemm_dtype] = 780e12;
    mc_clocks c = {.known = true, .sm_mhz = 1485, .sm_max_mhz = 1980};
    mc_peaks_apply_with(&f.prof, &m, &c);
    assert_string_equal(f.prof.peaks_source, "measured");
    assert_float_equal(f.prof.peak_bytes_per_s, 3.0e12, 1);
    assert_float_equal(f.prof.peak_flops[f.gemm], 780e12 * 0.75, 1);
    for (int k = 0; k < f.prof.nkernels; k++)
        if (k != f.gemm && f.p->kp->kernels[k].category != KIR_GEMM) /* datasheet, scaled */
            assert_float_equal(f.prof.peak_flops[k], 66.9e12 * 0.75, 1);
    teardown_fixture(&f);

    /* A host backend takes the measured FMA rate for every kernel; clocks never apply. */
    setup_fixture(&f, &fake_cpu);
    mc_peaks h = {.copy_bytes_per_s = 2.0e10, .fma_flops_per_s = 4.0e11};
    mc_peaks_apply_with(&f.prof, &h, &c);
    assert_string_equal(f.prof.peaks_source, "measured");
    assert_false(f.prof.clocks_known);
    for (int k = 0; k < f.prof.nkernels; k++)
        assert_float_equal(f.prof.peak_flops[k], 4.0e11, 1);
    assert_float_equal(f.prof.peak_bytes_per_s, 2.0e10, 1);
    teardown_fixture(&f);
}

/* No NVML (or no GPU): clocks unknown, no scaling, said in the header; zero and >100% times
 * are flagged as suspect. */
static void test_no_clocks_and_suspect(void **state)
{
    (void)state;
    setenv("MINIC_NVML", "0", 1);
    mc_clocks c;
    assert_false(mc_nvml_clocks("NVIDIA H100 80GB HBM3", &c));
    assert_false(c.known);
    unsetenv("MINIC_NVML");
    fixture f;
    setup_fixture(&f, &fake_cuda);
    for (int k = 0; k < f.prof.nkernels; k++)
        f.prof.peak_flops[k] = 1e12;
    f.prof.peak_bytes_per_s = 1e12;
    mc_peaks_apply_with(&f.prof, NULL, &c);
    assert_false(f.prof.clocks_known);
    assert_float_equal(f.prof.clock_scale, 1.0, 0);
    assert_float_equal(f.prof.peak_flops[f.gemm], 1e12, 0);
    const kir_kernel *kk = &f.p->kp->kernels[f.gemm];
    f.prof.time_us[f.gemm] = (double)kk->flops / 2e12 * 1e6; /* 200% of the 1 TFLOP/s peak */
    int other = f.gemm == 0 ? 1 : 0;
    f.prof.time_us[other] = 0;
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    mc_profile_print(&f.prof, out);
    fclose(out);
    assert_non_null(strstr(buf, "clocks unknown"));
    assert_non_null(strstr(buf, "suspect: above the compute peak"));
    assert_non_null(strstr(buf, "suspect: zero or negative time"));
    free(buf);
    teardown_fixture(&f);
}

/* A small CPU measurement: positive rates, and the cache entry a profile then uses. */
static void test_measure_cpu(void **state)
{
    (void)state;
    use_tmp_cache();
    mc_peaks_config cfg = {.threads = 2, .copy_bytes = 8 << 20, .reps = 3, .fma_iters = 200000};
    mc_peaks pk;
    assert_int_equal(mc_peaks_measure_cpu(&cfg, &pk), MC_OK);
    assert_true(pk.device[0] != '\0');
    assert_int_equal(pk.threads, 2);
    assert_true(pk.copy_bytes_per_s > 1e8);   /* more than 100 MB/s on any machine */
    assert_true(pk.fma_flops_per_s > 1e8);
    assert_int_equal(mc_peaks_save(&pk), MC_OK);
    mc_peaks back;
    assert_true(mc_peaks_load(pk.device, &back));
    assert_float_equal(back.fma_flops_per_s, pk.fma_flops_per_s, pk.fma_flops_per_s * 1e-5);
    /* The best of the repetitions, their spread, the datasheet beside it. */
    assert_int_equal(back.reps, 3);
    assert_true(back.fma_spread_pct >= 0 && back.fma_spread_pct < 100);
    assert_true(back.online_cpus >= 1);
    /* A fresh entry is used as it is (nothing measured); a stale one (another machine's CPU
     * count) is measured again on first use and rewritten. */
    bool now = true;
    mc_peaks got;
    assert_true(mc_peaks_fresh(&back));
    assert_true(mc_peaks_get(pk.device, false, &got, &now));
    assert_false(now);
    assert_float_equal(got.fma_flops_per_s, pk.fma_flops_per_s, pk.fma_flops_per_s * 1e-5);
    pk.online_cpus += 1;
    assert_int_equal(mc_peaks_save(&pk), MC_OK);
    assert_true(mc_peaks_load(pk.device, &back));
    assert_false(mc_peaks_fresh(&back));
    assert_true(mc_peaks_get(pk.device, false, &got, &now));
    assert_true(now);
    assert_true(mc_peaks_load(pk.device, &back));
    assert_true(mc_peaks_fresh(&back));
    /* The reference interpreter has no peaks, and measures nothing. */
    fixture f;
    setup_fixture(&f, &mc_backend_ref);
    assert_int_equal(mc_program_fill_random(f.p, 0), MC_OK);
    f.prof.program = f.p;
    assert_int_equal(mc_profile_collect(f.p, 1, &f.prof), MC_OK);
    assert_string_equal(f.prof.peaks_source, "none");
    teardown_fixture(&f);
}

/* CPU memory ceilings by working set: measured at several sizes below the DRAM copy, cached
 * (an entry out of order or not a number is dropped), and each kernel held to the rate at the
 * smallest size that holds its bytes, so a kernel whose data stays in the caches is not shown
 * above 100% of a DRAM peak; larger kernels keep the DRAM copy. */
static void test_bandwidth_by_size(void **state)
{
    (void)state;
    use_tmp_cache();
    mc_peaks_config cfg = {.threads = 2, .copy_bytes = 16 << 20, .reps = 2, .fma_iters = 1000};
    mc_peaks pk;
    assert_int_equal(mc_peaks_measure_cpu(&cfg, &pk), MC_OK);
    /* 8 MiB per thread of DRAM copy: 32 KiB, 256 KiB and 2 MiB per thread fit below it */
    assert_float_equal(pk.size_bytes[0], 65536.0, 0);
    assert_float_equal(pk.size_bytes[2], 4194304.0, 0);
    assert_true(pk.size_bytes[3] == 0);
    for (int s = 0; s < 3; s++)
        assert_true(pk.size_bytes_per_s[s] > 1e8);
    assert_int_equal(mc_peaks_save(&pk), MC_OK);
    mc_peaks back;
    assert_true(mc_peaks_load(pk.device, &back));
    for (int s = 0; s < 3; s++)
        assert_float_equal(back.size_bytes_per_s[s], pk.size_bytes_per_s[s], pk.size_bytes_per_s[s] * 1e-5);
    /* An untrusted entry: sizes out of order, negative, not numbers, too many. */
    char path[4096];
    assert_true(mc_peaks_path(pk.device, path, sizeof path));
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fprintf(f, "copy_at 100 5e9\ncopy_at 1e12 -1\ncopy_at nan 1\ncopy_at 3e7 abc\ncopy_at 9e9 1e9\ncopy_at 9e10 1e9\n");
    fclose(f);
    assert_true(mc_peaks_load(pk.device, &back));
    assert_float_equal(back.size_bytes[2], pk.size_bytes[2], 0);
    assert_float_equal(back.size_bytes[3], 9e9, 0); /* the one entry that still fits, in order */
    /* Applied to a CPU profile: mlp's kernels are a few hundred KB. */
    fixture fx;
    setup_fixture(&fx, &fake_cpu);
    mc_peaks m = {.copy_bytes_per_s = 10e9, .fma_flops_per_s = 1e11, .reps = 2,
                  .size_bytes = {64e3, 1e6}, .size_bytes_per_s = {200e9, 80e9}};
    mc_peaks_apply_with(&fx.prof, &m, NULL);
    assert_int_equal(fx.prof.nbw_sizes, 2);
    int64_t bytes = fx.p->kp->kernels[fx.gemm].bytes, size;
    assert_true(bytes > 64000 && bytes <= 1000000);
    assert_float_equal(mc_profile_bw_peak(&fx.prof, fx.gemm, &size), 80e9, 0);
    assert_int_equal(size, 1000000);
    /* 50 GB/s of traffic: 500% of the DRAM copy, 62.5% of the 1 MB ceiling; not suspect */
    fx.prof.time_us[fx.gemm] = (double)bytes / 50e9 * 1e6;
    mc_kernel_rates r = mc_profile_kernel_rates(&fx.prof, fx.gemm);
    assert_float_equal(r.pct_peak_bw, 62.5, 1e-6);
    fx.prof.nbw_sizes = 0; /* DRAM only: 500%, flagged with the reason */
    r = mc_profile_kernel_rates(&fx.prof, fx.gemm);
    assert_float_equal(r.pct_peak_bw, 500, 1e-6);
    fx.prof.nbw_sizes = 2;
    fx.prof.time_us[fx.gemm] = (double)bytes / 160e9 * 1e6; /* 200% of its own ceiling */
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    mc_profile_print(&fx.prof, out);
    fclose(out);
    assert_non_null(strstr(buf, "memory by working set: 62 KiB 200.0 GB/s, 977 KiB 80.0 GB/s, larger 10.0 GB/s"));
    assert_non_null(strstr(buf, "suspect: above the copy bandwidth measured for 1000000 bytes"));
    free(buf);
    /* A GPU profile takes no working-set ceilings. */
    teardown_fixture(&fx);
    setup_fixture(&fx, &fake_cuda);
    mc_peaks_apply_with(&fx.prof, &m, NULL);
    assert_int_equal(fx.prof.nbw_sizes, 0);
    assert_float_equal(mc_profile_bw_peak(&fx.prof, fx.gemm, NULL), 10e9, 0);
    teardown_fixture(&fx);
}

/* The CPU datasheet ceiling: positive where the clock is known, with its factors; a measured
 * rate more than 2x away from it is flagged and the profile takes the datasheet instead. */
static void test_cpu_datasheet_flag(void **state)
{
    (void)state;
    char why[256] = "";
    double ds = mc_peaks_cpu_datasheet(2, why, sizeof why);
    if (ds > 0) {
        assert_non_null(strstr(why, "FMA units"));
        assert_non_null(strstr(why, "MHz"));
    }
    fixture f;
    setup_fixture(&f, &fake_cpu);
    mc_peaks h = {.copy_bytes_per_s = 2.0e10, .fma_flops_per_s = 1.0e10, .reps = 5,
                  .datasheet_fma_flops_per_s = 3.0e11, .disagrees = true};
    mc_peaks_apply_with(&f.prof, &h, NULL);
    for (int k = 0; k < f.prof.nkernels; k++)
        assert_float_equal(f.prof.peak_flops[k], 3.0e11, 1);
    assert_non_null(strstr(f.prof.peaks_note, "FLAG"));
    assert_non_null(strstr(f.prof.peaks_note, "best of 5"));
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    mc_profile_print(&f.prof, out);
    fclose(out);
    assert_non_null(strstr(buf, "disagrees >2x"));
    free(buf);
    teardown_fixture(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_round_trip),
        cmocka_unit_test(test_datasheet),
        cmocka_unit_test(test_clock_scaling),
        cmocka_unit_test(test_measured_marking),
        cmocka_unit_test(test_no_clocks_and_suspect),
        cmocka_unit_test(test_measure_cpu),
        cmocka_unit_test(test_cpu_datasheet_flag),
        cmocka_unit_test(test_bandwidth_by_size),
    };
    return mc_test_run(tests);
}
