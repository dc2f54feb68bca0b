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

/* An event of kernel k in run r from a to b (µs), no function name. */
#define EV(k, r, a, b) {.kernel = (k), .run = (r), .start_us = (a), .end_us = (b)}

/* The trace's lanes (mc_profile_lanes): kernels one after the other share lane 0 however large
 * their gaps; a kernel that overlaps another (a second stream, NCCL beside a GEMM) gets a lane
 * of its own; touching is not overlapping. */
static void test_trace_lanes(void **state)
{
    (void)state;
    int lane[8];
    assert_int_equal(mc_profile_lanes(NULL, 0, lane), 0);
    /* one stream with gaps (a launch gap of 50 us, then back to back) */
    mc_profile_event seq[] = {EV(0, 0, 0, 10), EV(1, 0, 60, 70), EV(2, 0, 70, 75), EV(0, 1, 200, 210)};
    assert_int_equal(mc_profile_lanes(seq, 4, lane), 1);
    for (int e = 0; e < 4; e++)
        assert_int_equal(lane[e], 0);
    /* overlaps: b starts inside a; c inside both; d after a but inside b; e after all */
    mc_profile_event ov[] = {EV(0, 0, 0, 100), EV(1, 0, 50, 150), EV(2, 0, 60, 70),
                             EV(3, 0, 120, 130), EV(4, 0, 150, 160)};
    assert_int_equal(mc_profile_lanes(ov, 5, lane), 3);
    assert_int_equal(lane[0], 0);
    assert_int_equal(lane[1], 1);
    assert_int_equal(lane[2], 2);
    assert_int_equal(lane[3], 0); /* a's lane is free again at 100 */
    assert_int_equal(lane[4], 0); /* touches b's end: no overlap */
    /* records out of order (as concurrent streams deliver them), a tie on start: the longer
     * one keeps the lower lane; a zero-length event takes no room */
    mc_profile_event un[] = {EV(0, 0, 30, 40), EV(1, 0, 0, 10), EV(2, 0, 0, 25), EV(3, 0, 35, 35)};
    assert_int_equal(mc_profile_lanes(un, 4, lane), 2);
    assert_int_equal(lane[2], 0);
    assert_int_equal(lane[1], 1);
    assert_int_equal(lane[0], 0);
    assert_int_equal(lane[3], 1);
}

/* mc_profile_place_runs: the time line starts at the first run's launch; a run spans from its
 * host launch to its synchronize where those hold its kernels, else its kernels' extent. */
static void test_place_runs(void **state)
{
    (void)state;
    /* device clock in ns-derived µs far from 0; host times on the same clock */
    mc_profile_event ev[] = {EV(0, 0, 1005, 1010), EV(1, 0, 1030, 1040), EV(0, 1, 1105, 1110),
                             EV(1, 1, 1112, 1120)};
    double host[] = {1000, 1050, 1100, 1125}, span[4];
    assert_true(mc_profile_place_runs(ev, 4, 2, host, span));
    assert_float_equal(ev[0].start_us, 5, 1e-9); /* launch-to-start gap kept */
    assert_float_equal(ev[1].start_us, 30, 1e-9);
    assert_float_equal(ev[1].end_us, 40, 1e-9);
    assert_float_equal(span[0], 0, 1e-9);
    assert_float_equal(span[1], 50, 1e-9);
    assert_float_equal(span[2], 100, 1e-9);
    assert_float_equal(span[3], 125, 1e-9);
    /* host times that do not hold the kernels (a clock conversion gone wrong): the kernels'
     * extent, and the origin is the first kernel */
    mc_profile_event ev2[] = {EV(0, 0, 1005, 1010), EV(1, 0, 1030, 1040), EV(0, 1, 1105, 1110),
                              EV(1, 1, 1112, 1120)};
    double bad[] = {2000, 2050, 2100, 2125};
    assert_false(mc_profile_place_runs(ev2, 4, 2, bad, span));
    assert_float_equal(ev2[0].start_us, 0, 1e-9);
    assert_float_equal(span[0], 0, 1e-9);
    assert_float_equal(span[1], 35, 1e-9);
    assert_float_equal(span[2], 100, 1e-9);
    assert_float_equal(span[3], 115, 1e-9);
    /* no host times; a run without kernels sits where the one before ended */
    mc_profile_event ev3[] = {EV(0, 0, 10, 20), EV(0, 2, 50, 60)};
    double span3[6];
    assert_false(mc_profile_place_runs(ev3, 2, 3, NULL, span3));
    assert_float_equal(span3[1], 10, 1e-9);
    assert_float_equal(span3[2], 10, 1e-9);
    assert_float_equal(span3[3], 10, 1e-9);
    assert_float_equal(span3[4], 40, 1e-9);
}

static char *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = '\0';
    fclose(f);
    *size = (size_t)n;
    return text;
}

/* The trace from device timestamps as the cuda backend hands them over (here synthetic, on a
 * ref-compiled program): every kernel at its time, a gap kept as a gap, an overlapping kernel
 * in a lane of its own, and the clock named. */
static void test_trace_real_timestamps(void **state)
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
    prof.iters = 2;
    prof.time_us[0] = 10;
    prof.time_us[1] = 20;
    snprintf(prof.clock, sizeof prof.clock, "CUPTI device timestamps, in CUDA graph replays");
    snprintf(prof.run_clock, sizeof prof.run_clock, "CUPTI's host timestamps");
    /* run 0: kernel 0 at 5..15, a 25 us gap, kernel 1 at 40..60; run 1: kernel 1 starts
     * before kernel 0 ends (another stream) */
    static const mc_profile_event ev[] = {EV(0, 0, 1005, 1015), EV(1, 0, 1040, 1060),
                                          EV(0, 1, 1105, 1115), EV(1, 1, 1110, 1130)};
    prof.events = malloc(sizeof ev);
    prof.run_span_us = malloc(4 * sizeof(double));
    assert_non_null(prof.events);
    assert_non_null(prof.run_span_us);
    memcpy(prof.events, ev, sizeof ev);
    snprintf(prof.events[1].function, sizeof prof.events[1].function, "sm90_xmma_gemm_bf16_kernel");
    prof.nevents = 4;
    double host[] = {1000, 1070, 1100, 1140};
    assert_true(mc_profile_place_runs(prof.events, 4, 2, host, prof.run_span_us));
    char path[4200];
    snprintf(path, sizeof path, "%s/trace_lanes.json", mc_test_tmpdir());
    assert_int_equal(mc_profile_write_trace(&prof, path), MC_OK);
    size_t size;
    char *text = read_all(path, &size);
    mc_arena arena = {0};
    mc_json *root;
    if (mc_json_parse(text, size, path, &arena, &root) != MC_OK)
        fail_msg("%s\n%s", mc_error_message(), text);
    const mc_json *other = mc_json_get(root, "otherData");
    assert_non_null(other);
    assert_string_equal(mc_json_get(other, "clock")->text, prof.clock);
    assert_string_equal(mc_json_get(other, "run_clock")->text, prof.run_clock);
    assert_true(!strncmp(mc_json_get(other, "timestamps")->text, "real", 4));
    int64_t lanes;
    assert_true(mc_json_int64(mc_json_get(other, "device_lanes"), &lanes));
    assert_int_equal(lanes, 2);
    int kernels = 0, runs = 0, lane_named = 0;
    for (const mc_json *e = mc_json_get(root, "traceEvents")->first; e; e = e->next) {
        const mc_json *args = mc_json_get(e, "args");
        int64_t tid;
        assert_true(mc_json_int64(mc_json_get(e, "tid"), &tid));
        if (!strcmp(mc_json_get(e, "ph")->text, "M")) {
            if (!strcmp(mc_json_get(e, "name")->text, "thread_name") && tid == 3)
                lane_named += !strcmp(mc_json_get(args, "name")->text, "device, overlapping 1");
            continue;
        }
        double ts = strtod(mc_json_get(e, "ts")->text, NULL);
        double dur = strtod(mc_json_get(e, "dur")->text, NULL);
        int64_t run;
        assert_true(mc_json_int64(mc_json_get(args, "run"), &run));
        if (tid == 1) {
            assert_float_equal(ts, run == 0 ? 0 : 100, 1e-6);
            assert_float_equal(dur, run == 0 ? 70 : 40, 1e-6);
            runs++;
            continue;
        }
        int64_t k, lane;
        assert_true(mc_json_int64(mc_json_get(args, "kernel"), &k));
        assert_true(mc_json_int64(mc_json_get(args, "lane"), &lane));
        assert_int_equal(tid, 2 + lane);
        double off = strtod(mc_json_get(args, "offset_us")->text, NULL);
        if (run == 0 && k == 0) {
            assert_float_equal(ts, 5, 1e-6);
            assert_float_equal(off, 5, 1e-6); /* launch to start */
            assert_int_equal(lane, 0);
        } else if (run == 0 && k == 1) {
            assert_float_equal(ts, 40, 1e-6); /* the gap is kept */
            assert_float_equal(dur, 20, 1e-6);
            assert_float_equal(strtod(mc_json_get(args, "gap_us")->text, NULL), 25, 1e-6);
            assert_int_equal(lane, 0);
            /* the device function that ran (CUPTI's name; ncu's with --print-kernel-base mangled) */
            assert_string_equal(mc_json_get(args, "function")->text, "sm90_xmma_gemm_bf16_kernel");
        } else if (run == 1 && k == 0) {
            assert_float_equal(ts, 105, 1e-6);
            assert_null(mc_json_get(args, "function")); /* unknown: no field */
            assert_int_equal(lane, 0);
        } else {
            assert_float_equal(ts, 110, 1e-6);
            assert_float_equal(off, 10, 1e-6);
            assert_int_equal(lane, 1); /* overlaps kernel 0: its own lane */
            assert_true(strtod(mc_json_get(args, "gap_us")->text, NULL) < 0);
        }
        kernels++;
    }
    assert_int_equal(kernels, 4);
    assert_int_equal(runs, 2);
    assert_int_equal(lane_named, 1);
    mc_arena_free(&arena);
    free(text);
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
        cmocka_unit_test(test_trace_lanes),
        cmocka_unit_test(test_place_runs),
        cmocka_unit_test(test_trace_real_timestamps),
    };
    return mc_test_run(tests);
}
