/* Profile numbers (docs/FORMAT.md §5, runtime/profile.c): FLOPs and bytes per kernel against values
 * computed by hand, and the rates, percentages and bounds derived from times and peaks.
 *
 * The counting rule (kir/kir.h, kir_count): a GEMM costs 2*M*N*K (times its batch), once;
 * every arithmetic instruction costs its operator's FLOPs (ir/ops.def: 1 for every arithmetic
 * primitive) at every point where it is evaluated (a row block once per row, a loop block once
 * per element; a value recomputed in a later loop counts again), and every reduction one FLOP
 * per element it accumulates. Bytes: each buffer read once plus each buffer written once, at
 * its element size (a broadcast operand counts its own size, not the broadcast one).
 */
#include "testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "runtime/profile.h"

typedef struct counted {
    int nkernels;
    int64_t flops, bytes;
    kir_category category;
} counted;

/* Compile g fused; the single kernel's counts. */
static counted count(mc_graph *g)
{
    mc_compile_options co = {.fuse = true, .plan_memory = true, .verify = true};
    kir_program *kp = NULL;
    if (mc_compile_kernels(g, &co, &kp) != MC_OK)
        fail_msg("%s", mc_error_message());
    counted c = {.nkernels = kp->nkernels};
    for (int k = 0; k < kp->nkernels; k++) {
        kir_count(kp, &kp->kernels[k]);
        c.flops += kp->kernels[k].flops;
        c.bytes += kp->kernels[k].bytes;
        c.category = kp->kernels[k].category;
    }
    kir_program_free(kp);
    mc_graph_free(g);
    return c;
}

static mc_graph *with_output(mc_graph *g, mc_value y)
{
    assert_int_equal(mc_graph_set_outputs(g, &y, 1), MC_OK);
    return g;
}

static void test_matmul(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("mm");
    const int64_t as[] = {64, 32}, bs[] = {32, 16};
    mc_value y = mc_matmul(g, mc_input(g, "a", MC_F32, as, 2), mc_input(g, "b", MC_F32, bs, 2));
    counted c = count(with_output(g, y));
    assert_int_equal(c.nkernels, 1);
    assert_int_equal(c.category, KIR_GEMM);
    assert_int_equal(c.flops, 2 * 64 * 16 * 32);                /* 2*M*N*K */
    assert_int_equal(c.bytes, (64 * 32 + 32 * 16 + 64 * 16) * 4); /* a, b read; y written */
}

static void test_matmul_f16(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("mm16");
    const int64_t as[] = {64, 32}, bs[] = {32, 16};
    mc_value y = mc_matmul(g, mc_input(g, "a", MC_F16, as, 2), mc_input(g, "b", MC_F16, bs, 2));
    counted c = count(with_output(g, y));
    assert_int_equal(c.flops, 2 * 64 * 16 * 32);
    assert_int_equal(c.bytes, (64 * 32 + 32 * 16 + 64 * 16) * 2); /* 2 bytes per element */
}

static void test_batched_matmul_with_epilogue(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("bmm");
    const int64_t as[] = {4, 8, 16}, bs[] = {4, 16, 8}, cs[] = {8};
    mc_value m = mc_matmul(g, mc_input(g, "a", MC_F32, as, 3), mc_input(g, "b", MC_F32, bs, 3));
    mc_value y = mc_relu(g, mc_add(g, m, mc_param(g, "bias", MC_F32, cs, 1)));
    counted c = count(with_output(g, y));
    assert_int_equal(c.nkernels, 1); /* bias and relu in the GEMM's epilogue */
    assert_int_equal(c.category, KIR_GEMM);
    /* 2*batch*M*N*K for the GEMM, then add and relu at each of the 4*8*8 outputs. */
    assert_int_equal(c.flops, 2 * 4 * 8 * 8 * 16 + 2 * (4 * 8 * 8));
    /* a, b, the bias once (8 elements, not broadcast), y. */
    assert_int_equal(c.bytes, (4 * 8 * 16 + 4 * 16 * 8 + 8 + 4 * 8 * 8) * 4);
}

static void test_pointwise_chain(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("pw");
    const int64_t xs[] = {16, 16};
    mc_value x = mc_input(g, "x", MC_F32, xs, 2);
    mc_value y = mc_gelu(g, mc_add(g, mc_mul(g, x, mc_scalar(g, 2, MC_F32)), mc_scalar(g, 1, MC_F32)));
    counted c = count(with_output(g, y));
    assert_int_equal(c.nkernels, 1);
    assert_int_equal(c.category, KIR_POINTWISE);
    assert_int_equal(c.flops, 3 * 256);     /* mul, add, gelu per element; constants are free */
    assert_int_equal(c.bytes, 2 * 256 * 4); /* x read, y written */
}

static void test_softmax(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("sm");
    const int64_t xs[] = {8, 32};
    mc_value y = mc_softmax(g, mc_input(g, "x", MC_F32, xs, 2), -1);
    counted c = count(with_output(g, y));
    assert_int_equal(c.nkernels, 1);
    assert_int_equal(c.category, KIR_REDUCTION);
    /* Per element (256): max into the row max (1); x - max, exp, sum into the row sum (3);
     * then, for the output, x - max and exp again and the division (3). */
    assert_int_equal(c.flops, (1 + 3 + 3) * 256);
    assert_int_equal(c.bytes, 2 * 256 * 4); /* x read once (the row stays on chip), y written */
}

static void test_layernorm(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("ln");
    const int64_t xs[] = {8, 32}, ws[] = {32};
    mc_value y = mc_layernorm(g, mc_input(g, "x", MC_F32, xs, 2), mc_param(g, "w", MC_F32, ws, 1),
                              mc_param(g, "b", MC_F32, ws, 1), 1e-5);
    counted c = count(with_output(g, y));
    assert_int_equal(c.nkernels, 1);
    /* Per element (256): x * 2^-5, |.|, two sums (4); x * r - mean, square, sum (4); x * r -
     * mean, * rstd, * w, + b (5). Per row (8): the row's scale r (3 compares, 3 wheres), mean =
     * sum * r (2^5 / 32 = 1: 1); var * 1/n, + eps * r * r, max with the floor, rsqrt (6). */
    assert_int_equal(c.flops, (4 + 4 + 5) * 256 + (6 + 1 + 6) * 8);
    assert_int_equal(c.bytes, (256 + 32 + 32 + 256) * 4); /* x, w, b read; y written */
}

/* Rates from a profile with made-up times and peaks. */
static void test_rates_and_bounds(void **state)
{
    (void)state;
    mc_graph *g;
    assert_int_equal(mc_graph_parse_file(mc_test_src("examples/mlp.graph"), &g), MC_OK);
    mc_options opt = mc_options_default();
    opt.backend = MC_BACKEND_REF;
    mc_program *p;
    assert_int_equal(mc_program_compile(g, &opt, &p), MC_OK);
    mc_profile prof;
    assert_int_equal(mc_profile_init(&prof, p), MC_OK);
    assert_int_equal(prof.nkernels, 2);
    const kir_kernel *k0 = &p->kp->kernels[0];
    assert_true(k0->flops > 0 && k0->bytes > 0);
    /* Unmeasured: no rates, bound unknown. */
    mc_kernel_rates r = mc_profile_kernel_rates(&prof, 0);
    assert_true(r.flops_per_s == 0 && r.pct_peak_flops == 0);
    assert_string_equal(r.bound, "unknown");
    assert_float_equal(r.intensity, (double)k0->flops / (double)k0->bytes, 1e-12);

    /* 10 µs; peaks chosen so that the kernel is at 50% of the FLOP peak. */
    prof.time_us[0] = 10;
    double achieved = (double)k0->flops / 10e-6;
    prof.peak_flops[0] = 2 * achieved;
    prof.peak_bytes_per_s = 1e12;
    r = mc_profile_kernel_rates(&prof, 0);
    assert_float_equal(r.flops_per_s, achieved, achieved * 1e-12);
    assert_float_equal(r.pct_peak_flops, 50.0, 1e-9);
    assert_float_equal(r.bytes_per_s, (double)k0->bytes / 10e-6, 1e-3);
    assert_float_equal(r.pct_peak_bw, 100.0 * r.bytes_per_s / 1e12, 1e-9);
    /* Intensity above the ridge point (peak FLOP/s / peak B/s) is compute-bound... */
    assert_true(r.intensity > prof.peak_flops[0] / prof.peak_bytes_per_s);
    assert_string_equal(r.bound, "compute");
    /* ...below it memory-bound; far from both roofs and short, latency-bound. */
    prof.peak_flops[0] = 1e16;
    r = mc_profile_kernel_rates(&prof, 0);
    assert_string_equal(r.bound, r.pct_peak_bw < 10 ? "latency" : "memory");
    prof.time_us[0] = 1000;
    prof.peak_bytes_per_s = 1e6; /* a slow device: far above its bandwidth roof */
    r = mc_profile_kernel_rates(&prof, 0);
    assert_string_equal(r.bound, "memory");

    /* The roofline: a well-formed SVG with one point per timed kernel and a roof. */
    prof.time_us[0] = 10;
    prof.time_us[1] = 20;
    prof.peak_flops[0] = prof.peak_flops[1] = 50e12;
    prof.peak_bytes_per_s = 3e12;
    char svg_path[4200];
    snprintf(svg_path, sizeof svg_path, "%s/roofline.svg", mc_test_tmpdir());
    assert_int_equal(mc_profile_write_roofline(&prof, svg_path), MC_OK);
    FILE *f = fopen(svg_path, "r");
    assert_non_null(f);
    static char svg[1 << 16];
    size_t n = fread(svg, 1, sizeof svg - 1, f);
    svg[n] = '\0';
    fclose(f);
    assert_true(strncmp(svg, "<svg ", 5) == 0);
    assert_non_null(strstr(svg, "</svg>\n"));
    int points = 0;
    for (const char *s = svg; (s = strstr(s, "<g><title>")); s++)
        points++;
    assert_int_equal(points, 2);
    assert_non_null(strstr(svg, "<polyline")); /* the roofs */
    assert_non_null(strstr(svg, "gemm_bias_gelu_0"));
    /* Roofs labelled with value and unit; the two kernels (two groups) in two colours; their
     * number labels apart. */
    assert_non_null(strstr(svg, "f32 FMA peak: 50 TFLOP/s"));
    assert_non_null(strstr(svg, "memory: 3000 GB/s"));
    const char *p0 = strstr(svg, "<g><title>"), *p1 = strstr(p0 + 1, "<g><title>");
    const char *c0 = strstr(p0, "fill=\"#"), *c1 = strstr(p1, "fill=\"#");
    assert_true(c0 && c1 && strncmp(c0, c1, 14) != 0);
    double lx[2], ly[2];
    int nl = 0;
    for (const char *s = svg; nl < 2 && (s = strstr(s, "font-weight=\"bold\" fill=")); s++) {
        const char *t = s;
        while (t > svg && strncmp(t, "<text x=", 8) != 0)
            t--;
        assert_int_equal(sscanf(t, "<text x=\"%lf\" y=\"%lf\"", &lx[nl], &ly[nl]), 2);
        nl++;
    }
    assert_int_equal(nl, 2);
    assert_true(fabs(lx[0] - lx[1]) > 8 || fabs(ly[0] - ly[1]) > 13); /* boxes do not overlap */

    /* A ridge point far left of every kernel (huge bandwidth) still lies inside the frame: the
     * roof never leaves the plot. */
    prof.peak_bytes_per_s = 500e12;
    assert_int_equal(mc_profile_write_roofline(&prof, svg_path), MC_OK);
    f = fopen(svg_path, "r");
    assert_non_null(f);
    n = fread(svg, 1, sizeof svg - 1, f);
    svg[n] = '\0';
    fclose(f);
    double fx, fy, fw, fh;
    const char *frame = strstr(svg, "<rect x=");
    assert_non_null(frame);
    assert_int_equal(sscanf(frame, "<rect x=\"%lf\" y=\"%lf\" width=\"%lf\" height=\"%lf\"", &fx, &fy, &fw, &fh), 4);
    int roofs = 0;
    for (const char *roof = svg; (roof = strstr(roof, "<polyline")); roofs++) {
        roof = strstr(roof, "points=\"");
        assert_non_null(roof);
        roof += strlen("points=\"");
        for (int i = 0; i < 2; i++) {
            double x, y;
            int used = 0;
            assert_int_equal(sscanf(roof, "%lf,%lf%n", &x, &y, &used), 2);
            roof += used;
            assert_true(x >= fx - 0.1 && x <= fx + fw + 0.1);
            assert_true(y >= fy - 0.1 && y <= fy + fh + 0.1);
        }
    }
    assert_int_equal(roofs, 2); /* the compute roof and the memory slope */

    assert_true(mc_profile_peak_memory(p) >= (32 * 128 * 2 + 512 * 128 * 2 + 512 + 128) * 4);
    mc_profile_release(&prof);
    mc_program_free(p);
    mc_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_matmul_f16),
        cmocka_unit_test(test_batched_matmul_with_epilogue),
        cmocka_unit_test(test_pointwise_chain),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_rates_and_bounds),
    };
    return mc_test_run(tests);
}
