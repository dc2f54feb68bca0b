/* Accuracy of the CPU backend's transcendentals (backends/cpu/llvm_math.c), measured in ulps.
 *
 * Each function runs as a generated pointwise kernel (vector body and scalar remainder both,
 * since the inputs' count is not a multiple of the vector width) over inputs that sweep wide
 * ranges: evenly spaced values, every binade of f32 (bit patterns spread from the smallest
 * subnormal to the largest finite), and the special values. The reference is the C library's
 * double-precision function on the same f32 input, and the error of each result is
 *
 *     |got - ref| / ulp(ref),   ulp(r) = 2^(floor(log2 |r|) - 23), at least 2^-149
 *
 * (an ulp of the f32 format at the reference value; in the subnormal range, the subnormal
 * spacing). The bounds asserted, per function and range, are written in the table below; a
 * result that is NaN or infinite must match the reference's class exactly.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "runtime/runtime.h"
#include "cuda_fixtures.h"

static double ref_gelu(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }
static double ref_gelu_tanh(double x)
{
    double u = sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    return x / (1 + exp(-2 * u)); /* 0.5 x (1 + tanh u), without cancellation */
}
static double ref_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double ref_silu(double x) { return x / (1 + exp(-x)); }

typedef struct math_case {
    mc_op op;
    const char *name;
    double (*ref)(double);
    double lo, hi;    /* evenly spaced inputs in [lo, hi] */
    bool binades;     /* also every binade, both signs (positive only for log) */
    double max_ulps;  /* the bound asserted */
} math_case;

/* Measured on this backend (AVX2 host, 2026-11): exp 0.90, log 0.68, tanh 2.30, sigmoid 2.03,
 * silu 2.50, erf 4.94, gelu 17.5 (near x = -1.75: its fast paths' error is absolute, about 1e-7
 * in Phi, so it grows as Phi(x) shrinks; below -1.75 a vector takes the accurate path: 5.78
 * there), gelu_tanh 2.95, sin/cos 0.50 (computed in double), pow 0.50. The bounds leave a little
 * room for other hosts (no FMA: the exact products go through double). */
static const math_case cases[] = {
    {MC_OP_EXP, "exp", exp, -104, 89, true, 1},
    {MC_OP_LOG, "log", log, 0, 1e6, true, 1},
    {MC_OP_TANH, "tanh", tanh, -20, 20, true, 3},
    {MC_OP_SIGMOID, "sigmoid", ref_sigmoid, -120, 120, true, 3},
    {MC_OP_SILU, "silu", ref_silu, -120, 120, true, 3},
    {MC_OP_ERF, "erf", erf, -6, 6, true, 6},
    {MC_OP_GELU, "gelu", ref_gelu, -14, 14, true, 24},
    {MC_OP_GELU, "gelu (tail)", ref_gelu, -14, -1.75, false, 7},
    {MC_OP_GELU_TANH, "gelu_tanh", ref_gelu_tanh, -14, 14, true, 4},
    {MC_OP_SIN, "sin", sin, -1e5, 1e5, false, 1},
    {MC_OP_COS, "cos", cos, -1e5, 1e5, false, 1},
    {MC_OP_SIN, "sin (small)", sin, -10, 10, true, 1},
    {MC_OP_COS, "cos (small)", cos, -10, 10, true, 1},
    /* past 2^26 a vector calls the host's libm per lane (full range reduction) */
    {MC_OP_SIN, "sin (all)", sin, -3.4e38, 3.4e38, true, 1},
    {MC_OP_COS, "cos (all)", cos, -3.4e38, 3.4e38, true, 1},
};

static double ulp_of(double r)
{
    double a = fabs(r);
    if (a < FLT_MIN)
        return ldexp(1, -149);
    int e;
    frexp(a, &e); /* a in [2^(e-1), 2^e) */
    return ldexp(1, e - 1 - 23);
}

/* Error of got against ref in ulps; INFINITY when their classes (NaN, inf) differ. */
static double ulp_error(float got, double ref)
{
    double rf = (double)(float)ref; /* the reference as f32 may overflow to inf: that is right */
    if (isnan(ref) || isnan(got))
        return isnan(ref) && isnan(got) ? 0 : INFINITY;
    if (isinf(rf) || isinf(got))
        return rf == (double)got ? 0 : INFINITY;
    return fabs((double)got - ref) / ulp_of(ref);
}

/* The inputs: n evenly spaced in [lo, hi], then binade sweeps, then specials. */
static float *make_inputs(const math_case *mcase, int64_t *count)
{
    int64_t n = 200003;
    float *x = malloc((size_t)(n + 2 * 254 * 64 + 16) * sizeof *x);
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        x[k++] = (float)(mcase->lo + (mcase->hi - mcase->lo) * (double)i / (double)(n - 1));
    if (mcase->binades) {
        for (uint32_t e = 0; e < 254; e++) {
            for (uint32_t m = 0; m < 64; m++) {
                uint32_t bits = (e << 23) | (m * 131071u % 0x800000u);
                float v;
                memcpy(&v, &bits, sizeof v);
                if (v >= (float)fmin(fabs(mcase->lo), fabs(mcase->hi)) * 2 && mcase->op != MC_OP_LOG)
                    continue; /* outside the range the case covers */
                x[k++] = v;
                if (mcase->op != MC_OP_LOG)
                    x[k++] = -v;
            }
        }
    }
    float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, -1.0f, FLT_MIN, -FLT_MIN, 0.5f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        x[k++] = specials[i];
    *count = k;
    return x;
}

/* Compile kp on the CPU backend and run it once over the host arrays, one per buffer. */
static void run_cpu(kir_program *kp, void **host, int threads)
{
    mc_program p;
    memset(&p, 0, sizeof p);
    p.kp = kp;
    p.opt.threads = threads;
    p.opt.cpu_target = mc_test_cpu_target();
    p.host = host;
    if (mc_backend_cpu.prepare(&p) != MC_OK)
        fail_msg("prepare: %s", mc_error_message());
    assert_int_equal(mc_backend_cpu.run(&p), MC_OK);
    mc_backend_cpu.release(&p);
}

/* One pointwise kernel y = op(x) over n f32 elements, compiled and run on the CPU backend. */
static void run_unary(mc_op op, const float *x, float *y, int64_t n)
{
    kir_program *kp = fx_program();
    int bx = fx_buffer(kp, KBUF_INPUT, MC_F32, n), by = fx_buffer(kp, KBUF_OUTPUT, MC_F32, n);
    kir_kernel *k = fx_kernel(kp, "pw_math_0", KIR_POINTWISE, 1, (int64_t[]){n}, 1);
    int vx = fx_view_contig(k, bx), vy = fx_view_contig(k, by);
    fx_block(k, false);
    fx_store(k, vy, fx_op(k, op, MC_F32, fx_load(k, vx, MC_F32), 0, 0));
    run_cpu(kp, (void *[]){(void *)x, y}, 2);
    fx_free(kp);
}

static void test_unary_accuracy(void **state)
{
    (void)state;
    bool ok = true;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const math_case *mcase = &cases[c];
        int64_t n;
        float *x = make_inputs(mcase, &n);
        float *y = malloc((size_t)n * sizeof *y);
        run_unary(mcase->op, x, y, n);
        double worst = 0;
        float worst_x = 0;
        for (int64_t i = 0; i < n; i++) {
            double e = ulp_error(y[i], mcase->ref((double)x[i]));
            if (!(e <= worst)) {
                worst = e;
                worst_x = x[i];
            }
        }
        printf("%-12s max error %.3f ulp (bound %.0f) at x = %.9g over [%g, %g]%s\n", mcase->name, worst,
               mcase->max_ulps, worst_x, mcase->lo, mcase->hi, mcase->binades ? " and every binade" : "");
        if (!(worst <= mcase->max_ulps)) {
            fprintf(stderr, "%s: %.3f ulp at x = %.9g exceeds the bound %.0f\n", mcase->name, worst, worst_x,
                    mcase->max_ulps);
            ok = false;
        }
        free(x);
        free(y);
    }
    assert_true(ok);
}

/* pow(a, b): magnitudes across the f32 range, negative bases with integer exponents, and
 * C99's special cases (pow(x, 0) = 1, pow(1, y) = 1, pow(-1, +-inf) = 1, zero and infinite
 * bases, NaNs). */
static void test_pow(void **state)
{
    (void)state;
    int64_t n = 0, cap = 400000;
    float *a = malloc((size_t)cap * sizeof *a), *b = malloc((size_t)cap * sizeof *b);
    uint64_t s = 12345;
    for (int i = 0; i < 300000; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(s >> 11) / 9007199254740992.0;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double v = (double)(s >> 11) / 9007199254740992.0;
        a[n] = (float)exp((u * 2 - 1) * 20);     /* e^-20 .. e^20 */
        b[n] = (float)((v * 2 - 1) * 30);        /* results up to ~e^600: overflow included */
        if (i % 3 == 0) {
            a[n] = -a[n];
            b[n] = (float)floor(b[n]);           /* negative base, integer exponent */
        }
        n++;
    }
    float sa[] = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, INFINITY, -INFINITY, NAN, 0.5f, -2.0f, 4.0f};
    float sb[] = {0.0f, -0.0f, 1.0f, -1.0f, 3.0f, 0.5f, INFINITY, -INFINITY, NAN, 2.0f, -3.0f};
    for (size_t i = 0; i < sizeof sa / sizeof sa[0]; i++)
        for (size_t j = 0; j < sizeof sb / sizeof sb[0]; j++) {
            a[n] = sa[i];
            b[n] = sb[j];
            n++;
        }
    kir_program *kp = fx_program();
    int ba = fx_buffer(kp, KBUF_INPUT, MC_F32, n), bb = fx_buffer(kp, KBUF_INPUT, MC_F32, n);
    int by = fx_buffer(kp, KBUF_OUTPUT, MC_F32, n);
    kir_kernel *k = fx_kernel(kp, "pw_pow_0", KIR_POINTWISE, 1, (int64_t[]){n}, 1);
    int va = fx_view_contig(k, ba), vb = fx_view_contig(k, bb), vy = fx_view_contig(k, by);
    fx_block(k, false);
    fx_store(k, vy, fx_op(k, MC_OP_POW, MC_F32, fx_load(k, va, MC_F32), fx_load(k, vb, MC_F32), 0));
    float *y = malloc((size_t)n * sizeof *y);
    run_cpu(kp, (void *[]){a, b, y}, 1);
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = ulp_error(y[i], pow((double)a[i], (double)b[i]));
        if (!(e <= worst)) {
            worst = e;
            at = i;
        }
    }
    printf("%-12s max error %.3f ulp (bound 1) at pow(%.9g, %.9g) = %.9g\n", "pow", worst, a[at], b[at], y[at]);
    assert_true(worst <= 1);
    fx_free(kp);
    free(a);
    free(b);
    free(y);
}

/* softmax's exp(x - max) in a row whose arguments all lie in [-87, 1] (plan_exp_ranges,
 * exp_below_max: ln2 in one part). Each row holds a 0, its max, so x - max = x exactly, and
 * sweeps [-86, 0] or [-2, 0] evenly, or holds every binade below 1 in magnitude (negative):
 * the reference is then exp(x). Measured: 4.8 ulp at worst (near -84), 2.2 for |x| <= 2, as
 * against 0.9 for the exp operator. */
static void test_exp_below_max(void **state)
{
    (void)state;
    const int64_t R = 40, C = 4099;
    kir_program *kp = fx_program();
    int bx = fx_buffer(kp, KBUF_INPUT, MC_F32, R * C), by = fx_buffer(kp, KBUF_OUTPUT, MC_F32, R * C);
    kir_kernel *k = fx_kernel(kp, "red_exp_below_max_0", KIR_REDUCTION, 2, (int64_t[]){R, C}, 1);
    int vx = fx_view_contig(k, bx), vy = fx_view_contig(k, by);
    fx_block(k, true);
    fx_reduce(k, MC_OP_MAX, fx_load(k, vx, MC_F32), MC_F32);
    fx_block(k, true);
    int t = fx_op(k, MC_OP_SUB, MC_F32, fx_load(k, vx, MC_F32), fx_other(k, KI_ROWVAL, MC_F32, 0), 0);
    fx_store(k, vy, fx_op(k, MC_OP_EXP, MC_F32, t, 0, 0));
    float *x = malloc((size_t)(R * C) * sizeof *x), *y = malloc((size_t)(R * C) * sizeof *y);
    for (int64_t r = 0; r < R; r++) {
        for (int64_t j = 0; j < C; j++) {
            double u = (double)((j * 7919 + r * 104729) % C) / (double)(C - 1); /* [0, 1], shuffled */
            if (r % 4 == 3) {
                uint32_t bits = (uint32_t)((j * 2654435761u + (uint64_t)r) % 0x3f800000u); /* below 1 */
                memcpy(&x[r * C + j], &bits, 4);
                x[r * C + j] = -x[r * C + j];
            } else {
                x[r * C + j] = (float)(-u * (r % 4 == 2 ? 2 : 86));
            }
        }
        x[r * C + (r * 37) % C] = 0; /* the max */
    }
    run_cpu(kp, (void *[]){x, y}, 2);
    double worst = 0, worst_near = 0;
    float worst_x = 0;
    for (int64_t i = 0; i < R * C; i++) {
        double e = ulp_error(y[i], exp((double)x[i]));
        if (!(e <= worst))
            worst = e, worst_x = x[i];
        if (x[i] >= -2 && !(e <= worst_near))
            worst_near = e;
    }
    printf("%-12s max error %.3f ulp (bound 5.5) at x - max = %.9g over [-86, 0]; "
           "%.3f (bound 2.5) over [-2, 0]\n", "softmax exp", worst, worst_x, worst_near);
    assert_true(worst <= 5.5);
    assert_true(worst_near <= 2.5);
    fx_free(kp);
    free(x);
    free(y);
}

/* The repro (sin(1e17) was 42.56, sin(1e20) 3.7e36, cos(1e30) inf), as whole programs
 * through the public API on cpu and ref: every result in [-1, 1] and within an ulp of the
 * double sin/cos of the f32 argument, near and far arguments mixed in one vector. */
static void test_trig_huge_arguments(void **state)
{
    (void)state;
    enum { N = 37 };
    float x[N];
    const float far[] = {1e17f, 1e20f, 1e30f, -3e38f, 3.4028235e38f, 1e8f, 67108864.0f, -1.5e9f, 2.5e11f};
    for (int i = 0; i < N; i++)
        x[i] = i % 4 == 1 ? far[(i / 4) % 9] : (float)(i - 18) * 0.37f;
    mc_graph *g = NULL;
    if (mc_graph_parse_string("trig.graph", "graph trig\ninput x : f32[37]\ns = sin(x)\nc = cos(x)\n"
                              "output s, c\n", &g) != MC_OK)
        fail_msg("%s", mc_error_message());
    mc_backend_kind kinds[2] = {MC_BACKEND_CPU, MC_BACKEND_REF};
    for (int b = 0; b < 2; b++) {
        mc_options opt = mc_options_default();
        opt.backend = kinds[b];
        opt.quiet = true;
        mc_program *p = NULL;
        if (mc_program_compile(g, &opt, &p) != MC_OK)
            fail_msg("%s", mc_error_message());
        assert_int_equal(mc_program_set(p, "x", x, sizeof x), MC_OK);
        assert_int_equal(mc_program_run(p), MC_OK);
        for (int o = 0; o < 2; o++) {
            float y[N];
            assert_int_equal(mc_program_read_output(p, o, y, sizeof y), MC_OK);
            double worst = 0;
            for (int i = 0; i < N; i++) {
                double want = o == 0 ? sin((double)x[i]) : cos((double)x[i]);
                if (!(fabsf(y[i]) <= 1.0f))
                    fail_msg("%s: %s(%.9g) = %.9g, outside [-1, 1]", mc_backend_name(kinds[b]),
                             o ? "cos" : "sin", x[i], y[i]);
                double e = ulp_error(y[i], want);
                worst = e > worst ? e : worst;
                if (!(e <= 1))
                    fail_msg("%s: %s(%.9g) = %.9g, want %.9g (%.2f ulp)", mc_backend_name(kinds[b]),
                             o ? "cos" : "sin", x[i], y[i], want, e);
            }
            printf("%s %s: huge arguments within %.3f ulp\n", mc_backend_name(kinds[b]), o ? "cos" : "sin", worst);
        }
        mc_program_free(p);
    }
    mc_graph_free(g);
}

/* A causal softmax (rows that hold -inf take exp_softmax): exp(x - max) at the edge of f32's
 * range, through the public API on cpu and ref. Below -87 the result is subnormal, rounded once
 * (2^-149 at -103.9); below -150 ln2 = -103.97 it is 0, which exp_softmax multiplies as 0 (a
 * multiply that underflows costs a microcode assist on x86), and -inf gives 0. */
static void test_softmax_exp_underflow(void **state)
{
    (void)state;
    enum { T = 16 };
    float x[T * T];
    const float edge[] = {0, -103.9f, -104.1f, -150, -90, -87.5f, -86.9f, -1e30f};
    for (int i = 0; i < T * T; i++)
        x[i] = -(float)(i % 7) * 0.25f;
    for (int j = 0; j < T; j++) /* row 15 keeps every column, row 9 the first ten; sums of 1 */
        x[15 * T + j] = x[9 * T + j] = j < 8 ? edge[j] : -200;
    mc_graph *g = NULL;
    if (mc_graph_parse_string("sm.graph", "graph sm\ninput x : f32[16, 16]\nrow = iota(shape=[16, 16], axis=0)\n"
                              "col = iota(shape=[16, 16], axis=1)\nkeep = ge(row, col)\n"
                              "xm = where(keep, x, -inf)\np = softmax(xm, axis=-1)\noutput p\n", &g) != MC_OK)
        fail_msg("%s", mc_error_message());
    mc_backend_kind kinds[2] = {MC_BACKEND_CPU, MC_BACKEND_REF};
    for (int b = 0; b < 2; b++) {
        mc_options opt = mc_test_options();
        opt.backend = kinds[b];
        opt.quiet = true;
        mc_program *p = NULL;
        if (mc_program_compile(g, &opt, &p) != MC_OK)
            fail_msg("%s", mc_error_message());
        assert_int_equal(mc_program_set(p, "x", x, sizeof x), MC_OK);
        assert_int_equal(mc_program_run(p), MC_OK);
        float y[T * T];
        assert_int_equal(mc_program_read_output(p, 0, y, sizeof y), MC_OK);
        for (int r = 0; r < T; r++) {
            double sum = 0, mx = -INFINITY;
            for (int j = 0; j <= r; j++)
                mx = x[r * T + j] > mx ? x[r * T + j] : mx;
            for (int j = 0; j <= r; j++)
                sum += exp((double)x[r * T + j] - mx);
            for (int j = 0; j < T; j++) {
                float want = j <= r ? (float)(exp((double)x[r * T + j] - mx) / sum) : 0.0f;
                if (!(fabsf(y[r * T + j] - want) <= 1e-6f * want + 0x1p-149f))
                    fail_msg("%s: p[%d][%d] of x %.9g is %.9g, want %.9g", mc_backend_name(kinds[b]), r, j,
                             x[r * T + j], y[r * T + j], want);
            }
        }
        for (int r = 9; r <= 15; r += 6) {
            assert_true(y[r * T + 1] > 0);    /* exp(-103.9): the smallest subnormal */
            assert_true(y[r * T + 2] == 0);   /* exp(-104.1) rounds to 0 */
            assert_true(y[r * T + 3] == 0);
            assert_true(y[r * T + 7] == 0);
        }
        mc_program_free(p);
    }
    mc_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary_accuracy),
        cmocka_unit_test(test_trig_huge_arguments),
        cmocka_unit_test(test_pow),
        cmocka_unit_test(test_exp_below_max),
        cmocka_unit_test(test_softmax_exp_underflow),
    };
    return mc_test_run(tests);
}
