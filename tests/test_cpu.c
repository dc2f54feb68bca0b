/* The CPU backend (backends/cpu/llvm*.c) on hand-built kernel IR programs, against a float64
 * interpreter of the kernel IR (tests/cuda_fixtures.h, shared with the CUDA tests).
 *
 * Each fixture runs at sizes that exercise the vector body, the scalar remainder and the
 * row/chunk splitting (odd sizes, sizes below one vector, long rows), with 1 and 2 threads;
 * GEMMs at sizes with edge tiles in M and N, K above one K block (partial sums), a transposed
 * operand, a batch-broadcast operand, f16/bf16 operands and epilogues of every kind. Also: the
 * thread pool runs every index exactly once under both splits; a second prepare of the same
 * program is served from the disk cache (also when it was compiled in parts on two threads);
 * the dumped IR names kernels and nothing of the user's; non-temporal stores give the same
 * results whatever the output buffer's alignment; softmax's exp is computed once per element;
 * softmax's exp pass prefetches the next row; where their rows allow, softmax and layernorm run
 * the output pass of the previous row inside the pass before it (pipelined), with the same
 * results; a named CPU target sets the vector width and FMA, code for a CPU this machine lacks
 * the features of dumps but does not run, and f16 works without F16C.
 *
 * Results are checked under the CPU target CTest runs the test for (MINIC_TEST_CPU_TARGET: the
 * host, x86-64-v3 or x86-64-v4); what the code generator chooses only on x86-64-v3 and
 * x86-64-v4 named here (code_for), never on the host, which differs from machine to machine.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "runtime/runtime.h"
#include "cuda_fixtures.h"

/* A program around a hand-built kernel list, as mc_program_compile would make it. */
typedef struct fake {
    mc_program p;
    void **ref;      /* per buffer: the interpreter's arrays (temps included) */
} fake;

static double uniform(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0 * 2 - 1;
}

static void fake_init(fake *f, kir_program *kp, int threads, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    f->p.kp = kp;
    f->p.opt.fuse = true; /* mc_options_default() lives with mc_program_compile */
    f->p.opt.threads = threads;
    f->p.opt.cpu_target = mc_test_cpu_target(); /* the CPU target CTest runs this test under */
    f->p.host = calloc((size_t)kp->nbuffers, sizeof *f->p.host);
    f->ref = calloc((size_t)kp->nbuffers, sizeof *f->ref);
    for (int b = 0; b < kp->nbuffers; b++) {
        const kir_buffer *kb = &kp->buffers[b];
        size_t bytes = (size_t)kb->numel * mc_dtype_size(kb->dtype);
        f->ref[b] = calloc(bytes ? bytes : 1, 1);
        if (kb->kind != KBUF_TEMP)
            f->p.host[b] = calloc(bytes ? bytes : 1, 1);
        if (kb->kind == KBUF_INPUT || kb->kind == KBUF_PARAM) {
            for (int64_t i = 0; i < kb->numel; i++) {
                double v = uniform(&seed) * 2;
                if (kb->dtype == MC_I32)
                    v = floor(v * 5);
                fx_put(f->p.host[b], kb->dtype, i, v);
            }
            memcpy(f->ref[b], f->p.host[b], bytes);
        }
    }
}

static void fake_free(fake *f)
{
    for (int b = 0; b < f->p.kp->nbuffers; b++) {
        free(f->p.host[b]);
        free(f->ref[b]);
    }
    free(f->p.host);
    free(f->ref);
}

static bool has_gemm(const kir_program *kp)
{
    for (int i = 0; i < kp->nkernels; i++)
        if (kp->kernels[i].category == KIR_GEMM)
            return true;
    return false;
}

/* Every output of the CPU backend's run against the interpreter's (docs/FORMAT.md §6). */
static void compare_outputs(fake *f, const char *what)
{
    kir_program *kp = f->p.kp;
    bool gemm = has_gemm(kp);
    for (int b = 0; b < kp->nbuffers; b++) {
        const kir_buffer *kb = &kp->buffers[b];
        if (kb->kind != KBUF_OUTPUT)
            continue;
        double *got = malloc((size_t)kb->numel * sizeof *got), *want = malloc((size_t)kb->numel * sizeof *want);
        for (int64_t i = 0; i < kb->numel; i++) {
            got[i] = fx_get(f->p.host[b], kb->dtype, i);
            want[i] = fx_get(f->ref[b], kb->dtype, i);
        }
        if (kb->dtype == MC_I32 || kb->dtype == MC_BOOL) {
            for (int64_t i = 0; i < kb->numel; i++)
                if (got[i] != want[i])
                    fail_msg("%s: buffer %d element %lld: got %g, want %g", what, b, (long long)i, got[i], want[i]);
        } else {
            double tol = kb->dtype == MC_F32 ? (gemm ? 1e-4 : 1e-5) : 1e-2;
            double err = mc_test_rel_error(got, want, kb->numel);
            if (!(err <= tol)) {
                for (int64_t i = 0; i < kb->numel && i < 8; i++)
                    fprintf(stderr, "  [%lld] got %.9g want %.9g\n", (long long)i, got[i], want[i]);
                fail_msg("%s: buffer %d (%s): relative error %g > %g", what, b, mc_dtype_name(kb->dtype), err, tol);
            }
        }
        free(got);
        free(want);
    }
}

/* The backend's dump of p's generated code (malloc'd). */
static char *dumped_code(mc_program *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    assert_int_equal(mc_backend_cpu.dump_code(p, out), MC_OK);
    fclose(out);
    return text;
}

/* Compile kp for the CPU, run it, and compare every output with the interpreter. */
static void check_program(kir_program *kp, int threads, const char *what)
{
    fake f;
    fake_init(&f, kp, threads, 42);
    fx_eval(kp, f.ref);
    mc_status st = mc_backend_cpu.prepare(&f.p);
    if (st != MC_OK)
        fail_msg("%s: prepare: %s", what, mc_error_message());
    assert_int_equal(mc_backend_cpu.run(&f.p), MC_OK);
    /* run twice: a second run must give the same (no state left behind) */
    assert_int_equal(mc_backend_cpu.run(&f.p), MC_OK);
    compare_outputs(&f, what);
    mc_backend_cpu.release(&f.p);
    assert_null(f.p.state);
    fake_free(&f);
}

static void test_pointwise(void **state)
{
    (void)state;
    static const int64_t sizes[][2] = {{64, 256}, {3, 7}, {1, 1}, {5, 33}, {2, 40000}, {300, 17}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int threads = 1; threads <= 2; threads++) {
            kir_program *kp = fx_pointwise(sizes[i][0], sizes[i][1]);
            char what[64];
            snprintf(what, sizeof what, "pointwise %lldx%lld t%d", (long long)sizes[i][0], (long long)sizes[i][1], threads);
            check_program(kp, threads, what);
            fx_free(kp);
        }
}

static void test_reductions(void **state)
{
    (void)state;
    mc_dtype dts[3] = {MC_F32, MC_F16, MC_BF16};
    for (int i = 0; i < 3; i++) {
        kir_program *kp = fx_softmax(64, 256, dts[i]);
        check_program(kp, 2, "softmax 64x256");
        fx_free(kp);
        kp = fx_softmax(7, 37, dts[i]);
        check_program(kp, 1, "softmax 7x37");
        fx_free(kp);
        kp = fx_layernorm(16, 4096, dts[i]);
        check_program(kp, 2, "layernorm 16x4096");
        fx_free(kp);
        kp = fx_layernorm(5, 9, dts[i]);
        check_program(kp, 2, "layernorm 5x9");
        fx_free(kp);
    }
    kir_program *kp = fx_full_reduce(100, 1000);
    check_program(kp, 2, "full reduce 100x1000");
    fx_free(kp);
    kp = fx_full_reduce(1, 3);
    check_program(kp, 1, "full reduce 1x3");
    fx_free(kp);
}

/* sum over axis 0 of x [R, C] (a column reduction: the reduced axis is strided) and a max
 * over a middle axis of [A, B, C] (two row dims around the reduced one) */
static void test_strided_reductions(void **state)
{
    (void)state;
    int64_t R = 33, C = 21;
    kir_program *kp = fx_program();
    int x = fx_buffer(kp, KBUF_INPUT, MC_F32, R * C);
    int y = fx_buffer(kp, KBUF_OUTPUT, MC_F32, C);
    kir_kernel *k = fx_kernel(kp, "red_sum_0", KIR_REDUCTION, 2, (int64_t[]){C, R}, 1);
    int vx = fx_view(k, x, 0, (int64_t[]){1, C});
    int vy = fx_view(k, y, 0, (int64_t[]){1, 0});
    fx_block(k, true);
    fx_reduce(k, MC_OP_SUM, fx_load(k, vx, MC_F32), MC_F32);
    fx_block(k, false);
    fx_store(k, vy, fx_other(k, KI_ROWVAL, MC_F32, 0));
    int z = fx_buffer(kp, KBUF_OUTPUT, MC_I32, 4 * 6);
    kir_kernel *k2 = fx_kernel(kp, "red_max_1", KIR_REDUCTION, 3, (int64_t[]){4, 6, 5}, 2);
    int xi = fx_buffer(kp, KBUF_INPUT, MC_I32, 4 * 5 * 6);
    int vxi = fx_view(k2, xi, 0, (int64_t[]){30, 1, 6}); /* x[a, c, b]: reduce the middle axis */
    int vz = fx_view(k2, z, 0, (int64_t[]){6, 1, 0});
    fx_block(k2, true);
    fx_reduce(k2, MC_OP_MAX, fx_load(k2, vxi, MC_I32), MC_I32);
    fx_block(k2, false);
    fx_store(k2, vz, fx_other(k2, KI_ROWVAL, MC_I32, 0));
    check_program(kp, 2, "strided reductions");
    fx_free(kp);
}

static void test_gemm(void **state)
{
    (void)state;
    mc_dtype dts[3] = {MC_F32, MC_F16, MC_BF16};
    for (int i = 0; i < 3; i++) {
        kir_program *kp = fx_gemms(3, 40, 24, 32, dts[i]);
        check_program(kp, 2, "gemms 3x40x24x32");
        fx_free(kp);
    }
    /* edges everywhere, K over one block (partial sums), one thread and two */
    kir_program *kp = fx_gemms(2, 61, 45, 300, MC_F32);
    check_program(kp, 1, "gemms 2x61x45x300 t1");
    fx_free(kp);
    kp = fx_gemms(1, 130, 290, 600, MC_F32);
    check_program(kp, 2, "gemms 1x130x290x600 t2");
    fx_free(kp);
    /* the split into units follows the threads (column blocks of whole panels, as many as the
     * threads or four a thread, rows only when the columns run out): odd counts, more threads
     * than panels, and one panel of 301 rows (split in 3 and 7 row blocks) */
    int64_t odd[][4] = {{1, 130, 290, 600}, {2, 61, 45, 300}, {1, 7, 33, 40}, {1, 301, 20, 300}}; /* (N <= K: fx_gemms) */
    for (int i = 0; i < 4; i++)
        for (int t = 3; t <= 7; t += 4) {
            char what[64];
            snprintf(what, sizeof what, "gemms %lldx%lldx%lldx%lld t%d", (long long)odd[i][0], (long long)odd[i][1],
                     (long long)odd[i][2], (long long)odd[i][3], t);
            kp = fx_gemms(odd[i][0], odd[i][1], odd[i][2], odd[i][3], MC_F32);
            check_program(kp, t, what);
            fx_free(kp);
        }
    /* one thread, more rows than a row block holds (MAX_ROWS: its partial sums bounded) */
    kp = fx_gemms(1, 1300, 24, 300, MC_F32);
    check_program(kp, 1, "gemms 1x1300x24x300 t1");
    fx_free(kp);
    kp = fx_gemms(2, 1, 1, 1, MC_F32);
    check_program(kp, 2, "gemms 2x1x1x1");
    fx_free(kp);
}

/* A plain matmul with A transposed (A's K axis contiguous in memory is not), B row-major: few
 * rows (A read in place) and many (A packed, K over one block). */
static void check_gemm_transposed_a(int64_t M, int64_t N, int64_t K)
{
    kir_program *kp = fx_program();
    int a = fx_buffer(kp, KBUF_INPUT, MC_F32, K * M); /* stored [K, M] */
    int b = fx_buffer(kp, KBUF_INPUT, MC_F32, K * N);
    int y = fx_buffer(kp, KBUF_OUTPUT, MC_F32, M * N);
    kir_kernel *k = fx_kernel(kp, "gemm_0", KIR_GEMM, 2, (int64_t[]){M, N}, 2);
    k->gemm.m = M;
    k->gemm.n = N;
    k->gemm.k = K;
    k->gemm.a = fx_view(k, a, 0, (int64_t[]){1, M});
    k->gemm.b = fx_view(k, b, 0, (int64_t[]){N, 1});
    fx_block(k, false);
    int acc = fx_other(k, KI_ACC, MC_F32, 0);
    fx_store(k, fx_view_contig(k, y), fx_op(k, MC_OP_RELU, MC_F32, acc, 0, 0));
    check_program(kp, 2, "gemm A^T");
    fx_free(kp);
}

static void test_gemm_transposed_a(void **state)
{
    (void)state;
    check_gemm_transposed_a(50, 70, 90);
    check_gemm_transposed_a(150, 40, 300);
}

/* ---- what the generated code looks like --------------------------------------------------
 *
 * A test may assert what the generated code computes on every machine, but what the code
 * generator chooses (vector width, non-temporal stores, pipelining, prefetches, FMA, ...) only
 * for a CPU it names: the host's CPU differs from machine to machine. So the checks of the code's
 * shape compile for x86-64-v3 (AVX2, 256-bit vectors) and x86-64-v4 (AVX-512), which any x86-64
 * machine can compile for (it need not run the code), and the same programs then run under the
 * CPU target CTest gives the test (host, x86-64-v3 or x86-64-v4) for their results. */

#if defined(__x86_64__)
static const char *const PINNED[2] = {"x86-64-v3", "x86-64-v4"};
enum { NPINNED = 2 };
#else
static const char *const PINNED[1] = {NULL}; /* only x86-64 CPUs can be named */
enum { NPINNED = 0 };
#endif

/* The code generated for kp on CPU `cpu`, compiled but not run (malloc'd). */
static char *code_for(kir_program *kp, const char *cpu)
{
    mc_program p = {.kp = kp, .opt = {.fuse = true, .threads = 2, .cpu_target = cpu}}; /* no buffers: not run */
    if (mc_backend_cpu.prepare(&p) != MC_OK)
        fail_msg("%s: prepare: %s", cpu, mc_error_message());
    char *text = dumped_code(&p);
    char attr[64];
    snprintf(attr, sizeof attr, "\"target-cpu\"=\"%s\"", cpu);
    if (!strstr(text, attr))
        fail_msg("the code compiled for %s does not name that CPU (%s)", cpu, attr);
    mc_backend_cpu.release(&p);
    return text;
}

/* The CPU backend's one error for code this machine cannot run: compiled for a CPU with
 * features it lacks, the program dumps but refuses to run (it would stop on an illegal
 * instruction); an unknown CPU name is refused when compiling, with names that are known. */
static void test_cpu_targets(void **state)
{
    (void)state;
    kir_program *kp = fx_pointwise(3, 7);
    fake f;
    fake_init(&f, kp, 1, 2);
    f.p.opt.cpu_target = "x86_64-v3";
    assert_int_equal(mc_backend_cpu.prepare(&f.p), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "unknown CPU target 'x86_64-v3'"));
    assert_non_null(strstr(mc_error_message(), "did you mean 'x86-64-v3'?"));
    assert_non_null(strstr(mc_error_message(), "x86-64-v4"));
    mc_backend_cpu.release(&f.p);
    f.p.opt.cpu_target = "i686"; /* known to LLVM, but without 64-bit mode */
    assert_int_equal(mc_backend_cpu.prepare(&f.p), MC_ERR_INPUT);
    mc_backend_cpu.release(&f.p);
#if defined(__x86_64__)
    /* No x86-64 CPU has every feature: knl's avx512er, avx512pf and prefetchwt1 only ever came
     * with Xeon Phi, and znver3's sse4a, clzero and mwaitx are AMD's; this machine lacks one. */
    const char *foreign[2] = {"knl", "znver3"};
    for (int i = 0; i < 2; i++) {
        f.p.opt.cpu_target = foreign[i];
        assert_int_equal(mc_backend_cpu.prepare(&f.p), MC_OK);
        char *text = dumped_code(&f.p);
        assert_non_null(strstr(text, "define void @pw_"));
        free(text);
        mc_status st = mc_backend_cpu.run(&f.p);
        mc_backend_cpu.release(&f.p);
        if (st == MC_OK)
            continue; /* this machine has every feature of that one */
        assert_int_equal(st, MC_ERR_SYSTEM);
        const char *msg = mc_error_message();
        if (!strstr(msg, "cannot run code compiled for CPU target") || !strstr(msg, foreign[i]) ||
            !strstr(msg, "it lacks "))
            fail_msg("%s: unexpected message: %s", foreign[i], msg);
        print_message("%s here: %s\n", foreign[i], msg);
    }
#endif
    /* the host, however named */
    const char *host[3] = {NULL, "", "host"};
    for (int i = 0; i < 3; i++) {
        f.p.opt.cpu_target = host[i];
        assert_int_equal(mc_backend_cpu.prepare(&f.p), MC_OK);
        assert_int_equal(mc_backend_cpu.run(&f.p), MC_OK);
        mc_backend_cpu.release(&f.p);
    }
    fake_free(&f);
    fx_free(kp);
}

/* The vector width and FMA follow the pinned CPU, not the host: two vectors of 8 floats per
 * step on x86-64-v3, of 16 on x86-64-v4, of 4 on x86-64 (SSE2); gelu's exact product x * x is an
 * FMA where the CPU has one (x86-64-v3 and v4), a product in double on x86-64. */
static void test_vector_width_follows_target(void **state)
{
    (void)state;
    if (NPINNED == 0) {
        print_message("not x86-64: no CPU can be named here\n");
        return;
    }
    kir_program *kp = fx_pointwise(64, 256);
    const char *cpus[3] = {"x86-64", "x86-64-v3", "x86-64-v4"};
    const char *vec[3] = {"<8 x float>", "<16 x float>", "<32 x float>"};
    for (int i = 0; i < 3; i++) {
        char *text = code_for(kp, cpus[i]);
        if (!strstr(text, vec[i]))
            fail_msg("%s: no %s in the generated code", cpus[i], vec[i]);
        for (int j = i + 1; j < 3; j++)
            if (strstr(text, vec[j]))
                fail_msg("%s: %s in the generated code", cpus[i], vec[j]);
        if ((i > 0) != (strstr(text, "@llvm.fma.") != NULL))
            fail_msg("%s: %s in the generated code", cpus[i], i > 0 ? "no FMA" : "an FMA");
        free(text);
    }
    fx_free(kp);
}

/* f16 <-> f32 on a CPU without F16C (x86-64: LLVM calls __gnu_f2h_ieee and __gnu_h2f_ieee, which
 * the backend gives the JIT) give what F16C computes (x86-64-v3), bit for bit: every f16 to f32,
 * and to f16 the f32 values with every sign, exponent and top 10 mantissa bits and, below
 * them, 0, 1, the bits just under and over the tie and the tie itself (rounding to even, in the
 * normal and the subnormal f16 range, at the overflow threshold, NaN payloads), then random
 * patterns. */
static void test_f16_without_f16c(void **state)
{
    (void)state;
    if (NPINNED == 0) {
        print_message("not x86-64: no CPU can be named here\n");
        return;
    }
    enum { LOWS = 6, RANDOM = 1 << 18 };
    const uint32_t lows[LOWS] = {0, 1, 0xfff, 0x1000, 0x1001, 0x1fff};
    int64_t n = (int64_t)LOWS << 19 | RANDOM, nh = 1 << 16;
    kir_program *kp = fx_program();
    int x = fx_buffer(kp, KBUF_INPUT, MC_F32, n), y = fx_buffer(kp, KBUF_OUTPUT, MC_F16, n);
    int h = fx_buffer(kp, KBUF_INPUT, MC_F16, nh), z = fx_buffer(kp, KBUF_OUTPUT, MC_F32, nh);
    kir_kernel *k = fx_kernel(kp, "pw_to_f16_0", KIR_POINTWISE, 1, (int64_t[]){n}, 1);
    fx_block(k, false);
    fx_store(k, fx_view_contig(k, y), fx_op(k, MC_OP_CAST, MC_F16, fx_load(k, fx_view_contig(k, x), MC_F32), 0, 0));
    k = fx_kernel(kp, "pw_to_f32_1", KIR_POINTWISE, 1, (int64_t[]){nh}, 1);
    fx_block(k, false);
    fx_store(k, fx_view_contig(k, z), fx_op(k, MC_OP_CAST, MC_F32, fx_load(k, fx_view_contig(k, h), MC_F16), 0, 0));
    uint32_t *xs = malloc((size_t)n * sizeof *xs), seed = 12345;
    assert_non_null(xs);
    for (int64_t i = 0; i < (int64_t)LOWS << 19; i++)
        xs[i] = (uint32_t)(i / LOWS) << 13 | lows[i % LOWS];
    for (int64_t i = (int64_t)LOWS << 19; i < n; i++)
        xs[i] = seed = seed * 1664525u + 1013904223u;
    const char *cpus[2] = {"x86-64", "x86-64-v3"};
    void *got[2][2] = {{NULL}};
    for (int t = 0; t < 2; t++) {
        fake f;
        fake_init(&f, kp, 2, 1);
        f.p.opt.cpu_target = cpus[t];
        memcpy(f.p.host[x], xs, (size_t)n * sizeof *xs);
        uint16_t *hs = f.p.host[h];
        for (int64_t i = 0; i < nh; i++)
            hs[i] = (uint16_t)i;
        if (mc_backend_cpu.prepare(&f.p) != MC_OK)
            fail_msg("%s: prepare: %s", cpus[t], mc_error_message());
        char *text = dumped_code(&f.p);
        if (t == 0 && !strstr(text, " x half>"))
            fail_msg("%s: no conversion to half in the generated code", cpus[t]);
        free(text);
        mc_status st = mc_backend_cpu.run(&f.p);
        if (st == MC_OK) {
            got[t][0] = f.p.host[y], got[t][1] = f.p.host[z];
            f.p.host[y] = f.p.host[z] = NULL; /* kept */
        } else {
            print_message("%s does not run here: %s\n", cpus[t], mc_error_message());
        }
        mc_backend_cpu.release(&f.p);
        fake_free(&f);
    }
    if (!got[0][0])
        fail_msg("x86-64 code does not run on this x86-64 machine");
    if (got[1][0]) {
        const uint16_t *a = got[0][0], *b = got[1][0];
        for (int64_t i = 0; i < n; i++)
            if (a[i] != b[i])
                fail_msg("f32 %08x to f16: %04x without F16C, %04x with", xs[i], a[i], b[i]);
        if (memcmp(got[0][1], got[1][1], (size_t)nh * 4) != 0)
            for (int64_t i = 0; i < nh; i++)
                if (memcmp((const uint32_t *)got[0][1] + i, (const uint32_t *)got[1][1] + i, 4) != 0)
                    fail_msg("f16 %04llx to f32: %08x without F16C, %08x with", (long long)i,
                             ((const uint32_t *)got[0][1])[i], ((const uint32_t *)got[1][1])[i]);
    } else {
        print_message("x86-64-v3 does not run here: the conversions without F16C were not compared\n");
    }
    for (int t = 0; t < 2; t++)
        free(got[t][0]), free(got[t][1]);
    free(xs);
    fx_free(kp);
}

/* Stores to a large output that the kernel never reads bypass the caches (non-temporal), on
 * addresses aligned to a whole vector, after single steps that reach that alignment. The
 * results must be right however the caller's buffer is aligned: shifted by whole elements
 * (peeling), and the vector stores are aligned ones only where the address allows.
 *
 * A softmax or layernorm is pipelined (its last pass runs for the previous row inside the pass
 * before it) where every row of the output starts on a whole step of the loop (two native
 * vectors: 16 elements on x86-64-v3, 32 on x86-64-v4), since that loop takes the same aligned
 * positions in every row: rows of 4096 on both, rows of 4112 f16 on x86-64-v3 only (8224
 * bytes: every other row starts half a cache line into a 64-byte AVX-512 step of 32 f16), rows
 * of 4100 on neither. */
static void test_nontemporal_stores(void **state)
{
    (void)state;
    enum { N = 7 };
    kir_program *kps[N] = {fx_pw_bench(1024, 4100, false), fx_pw_bench(1, (4 << 20) + 5, false),
                           fx_softmax(1024, 4100, MC_F32), fx_layernorm(2048, 4100, MC_F16),
                           fx_softmax(1031, 4096, MC_F32), fx_softmax(2048, 4112, MC_F16),
                           fx_layernorm(1024, 4096, MC_F32)};
    const char *names[N] = {"pointwise 1024x4100", "pointwise 1x4194309", "softmax 1024x4100",
                            "layernorm f16 2048x4100", "softmax 1031x4096", "softmax f16 2048x4112",
                            "layernorm 1024x4096"};
    /* pipelined on [x86-64-v3, x86-64-v4] */
    const bool pipelined[N][2] = {{false, false}, {false, false}, {false, false}, {false, false},
                                  {true, true},   {true, false},  {true, true}};
    for (int c = 0; c < N; c++) {
        kir_program *kp = kps[c];
        for (int t = 0; t < NPINNED; t++) {
            char *text = code_for(kp, PINNED[t]);
            if (!strstr(text, "!nontemporal") || !strstr(text, "@llvm.x86.sse.sfence"))
                fail_msg("%s on %s: no non-temporal stores (or no fence) in the generated code", names[c], PINNED[t]);
            /* softmax's exp pass over a row prefetches the next row */
            if (c == 2 && !strstr(text, "@llvm.prefetch"))
                fail_msg("%s on %s: no prefetch of the next row in the generated code", names[c], PINNED[t]);
            if (pipelined[c][t] != (strstr(text, "\npipelined:") != NULL))
                fail_msg("%s on %s: %s pipelined", names[c], PINNED[t], pipelined[c][t] ? "not" : "unexpectedly");
            free(text);
        }
        fake f;
        fake_init(&f, kp, c == 4 ? 3 : 2, 5);
        fx_eval(kp, f.ref);
        if (mc_backend_cpu.prepare(&f.p) != MC_OK)
            fail_msg("%s: prepare: %s", names[c], mc_error_message());
        int big = -1; /* the large output */
        for (int b = 0; b < kp->nbuffers; b++)
            if (kp->buffers[b].kind == KBUF_OUTPUT && (big < 0 || kp->buffers[b].numel > kp->buffers[big].numel))
                big = b;
        const kir_buffer *kb = &kp->buffers[big];
        size_t esize = mc_dtype_size(kb->dtype), bytes = (size_t)kb->numel * esize;
        /* aligned to two AVX-512 vectors (a whole step of the pipelined loop), 128 bytes over */
        char *mem = aligned_alloc(128, (bytes + 255) / 128 * 128);
        assert_non_null(mem);
        void *own = f.p.host[big];
        size_t shifts[] = {0, esize, 3 * esize, 16, 32, 64};
        for (size_t i = 0; i < sizeof shifts / sizeof shifts[0]; i++) {
            memset(mem, 0xff, bytes + 128); /* NaN wherever a store is missed */
            f.p.host[big] = mem + shifts[i];
            assert_int_equal(mc_backend_cpu.run(&f.p), MC_OK);
            char what[96];
            snprintf(what, sizeof what, "%s, output shifted by %zu bytes", names[c], shifts[i]);
            compare_outputs(&f, what);
            /* the bytes around the output are untouched */
            assert_true((unsigned char)mem[0] == 0xff || shifts[i] == 0);
            assert_true((unsigned char)mem[shifts[i] + bytes] == 0xff);
        }
        f.p.host[big] = own;
        free(mem);
        mc_backend_cpu.release(&f.p);
        fake_free(&f);
        fx_free(kp);
    }
}

/* fx_softmax, also storing each row's max (a second output, in the row block) */
static kir_program *softmax_storing_max(int64_t R, int64_t C)
{
    kir_program *kp = fx_program();
    int x = fx_buffer(kp, KBUF_INPUT, MC_F32, R * C);
    int y = fx_buffer(kp, KBUF_OUTPUT, MC_F32, R * C);
    int m = fx_buffer(kp, KBUF_OUTPUT, MC_F32, R);
    kir_kernel *k = fx_kernel(kp, "red_fused_softmax_0", KIR_REDUCTION, 2, (int64_t[]){R, C}, 1);
    int vx = fx_view_contig(k, x), vy = fx_view_contig(k, y), vm = fx_view(k, m, 0, (int64_t[]){1, 0});
    fx_block(k, true);
    fx_reduce(k, MC_OP_MAX, fx_load(k, vx, MC_F32), MC_F32);
    fx_block(k, false);
    fx_store(k, vm, fx_other(k, KI_ROWVAL, MC_F32, 0));
    fx_block(k, true);
    int e1 = fx_op(k, MC_OP_EXP, MC_F32, fx_op(k, MC_OP_SUB, MC_F32, fx_load(k, vx, MC_F32),
                                               fx_other(k, KI_ROWVAL, MC_F32, 0), 0), 0, 0);
    fx_reduce(k, MC_OP_SUM, e1, MC_F32);
    fx_block(k, true);
    int e2 = fx_op(k, MC_OP_EXP, MC_F32, fx_op(k, MC_OP_SUB, MC_F32, fx_load(k, vx, MC_F32),
                                               fx_other(k, KI_ROWVAL, MC_F32, 0), 0), 0, 0);
    fx_store(k, vy, fx_op(k, MC_OP_DIV, MC_F32, e2, fx_other(k, KI_ROWVAL, MC_F32, 1), 0));
    return kp;
}

/* A softmax's max need not keep NaNs (plan_lax: a NaN in a row reaches every output through
 * the sum anyway), and then is a plain compare-and-select ("lax_max" in the code). Rows with a NaN
 * first, in the middle and in the scalar remainder, with +inf, all -inf, and plain ones give
 * the interpreter's results (NaN where it has NaN). Where the row max is an output too, the
 * max must keep its NaNs, and does. */
static void test_lax_max(void **state)
{
    (void)state;
    for (int c = 0; c < 3; c++) {
        int64_t R = 7, C = c == 1 ? 64 : 37;
        kir_program *kp = c < 2 ? fx_softmax(R, C, MC_F32) : softmax_storing_max(R, C);
        const char *what = c == 0 ? "softmax 7x37" : c == 1 ? "softmax 7x64" : "softmax storing its max";
        fake f;
        fake_init(&f, kp, 2, 11);
        float *x = f.p.host[0];
        x[0 * C + 0] = NAN;
        x[1 * C + 20] = NAN;
        x[2 * C + C - 1] = NAN;
        x[3 * C + 5] = INFINITY;
        for (int64_t j = 0; j < C; j++)
            x[4 * C + j] = -INFINITY;
        x[5 * C + 3] = NAN, x[5 * C + 4] = INFINITY;
        memcpy(f.ref[0], x, (size_t)(R * C) * sizeof *x);
        fx_eval(kp, f.ref);
        for (int t = 0; t < NPINNED; t++) {
            char *text = code_for(kp, PINNED[t]);
            if ((c < 2) != (strstr(text, "%lax_max") != NULL))
                fail_msg("%s on %s: the max %s its NaNs", what, PINNED[t], c < 2 ? "keeps" : "drops");
            free(text);
        }
        if (mc_backend_cpu.prepare(&f.p) != MC_OK)
            fail_msg("%s: prepare: %s", what, mc_error_message());
        assert_int_equal(mc_backend_cpu.run(&f.p), MC_OK);
        compare_outputs(&f, what);
        const float *y = f.p.host[1];
        for (int64_t r = 0; r < 6; r++) /* rows 0-2 and 5: all NaN; 3: NaN (inf - inf); 4: NaN */
            for (int64_t j = 0; j < C; j++)
                if (!isnan(y[r * C + j]))
                    fail_msg("%s: row %lld element %lld is %g, not NaN", what, (long long)r, (long long)j, y[r * C + j]);
        if (c == 2)
            for (int64_t r = 0; r < 3; r++)
                if (!isnan(((const float *)f.p.host[2])[r]))
                    fail_msg("%s: the max of row %lld (which has a NaN) is not NaN", what, (long long)r);
        mc_backend_cpu.release(&f.p);
        fake_free(&f);
        fx_free(kp);
    }
}

/* softmax's exp(x - max) skips its per-vector range check in rows whose range the max pass
 * measured (plan_exp_ranges), and its max reduces x rather than x * 0.125 (plan_scaled_extrema).
 * Rows that must not take the short path: one whose spread after scaling exceeds 86 (a
 * subnormal result), a NaN with a payload, +inf, all -inf, a single -inf, and values near
 * 1e30 (|max| > 2^24); one at a spread of exactly 86 may. Each gives the interpreter's
 * results: NaN where it has NaN, exactly 0 for exp(-inf), the subnormal within two of its
 * units. Small rows, rows with a vector remainder, rows large enough for the pipelined loop
 * with non-temporal stores, and rows too long for the row cache (the last pass computes exp
 * again, for the previous row inside the exp pass and alone after the last row). */
static void test_exp_row_range(void **state)
{
    (void)state;
    const int64_t shapes[4][2] = {{10, 64}, {10, 37}, {1024, 4100}, {110, 40000}};
    for (int c = 0; c < 4; c++) {
        int64_t R = shapes[c][0], C = shapes[c][1];
        char what[64];
        snprintf(what, sizeof what, "softmax %lldx%lld", (long long)R, (long long)C);
        kir_program *kp = fx_softmax(R, C, MC_F32);
        fake f;
        fake_init(&f, kp, 2, 5);
        float *x = f.p.host[0];
        uint32_t payload = 0x7fc01234u;
        x[1 * C + 3] = -720;                 /* row 1: exp(-90), subnormal */
        memcpy(&x[2 * C + 5], &payload, 4); /* row 2: a NaN with a payload */
        x[3 * C + C - 1] = INFINITY;         /* row 3: inf - inf */
        for (int64_t j = 0; j < C; j++)      /* row 4: all -inf */
            x[4 * C + j] = -INFINITY;
        x[5 * C + 7] = -INFINITY;            /* row 5: exp(-inf) = 0 */
        for (int64_t j = 0; j < C; j++)      /* row 6: |max| > 2^24 */
            x[6 * C + j] = 1e30f * (1 + (float)j / (float)C);
        for (int64_t j = 0; j < C; j++)      /* row 7: spread exactly 86 */
            x[7 * C + j] = j % 2 ? 0 : -688;
        memcpy(f.ref[0], x, (size_t)(R * C) * sizeof *x);
        fx_eval(kp, f.ref);
        for (int t = 0; t < NPINNED; t++) {
            char *text = code_for(kp, PINNED[t]);
            if (!strstr(text, "row_in_range"))
                fail_msg("%s on %s: the exp keeps its per-vector range check", what, PINNED[t]);
            free(text);
        }
        if (mc_backend_cpu.prepare(&f.p) != MC_OK)
            fail_msg("%s: prepare: %s", what, mc_error_message());
        assert_int_equal(mc_backend_cpu.run(&f.p), MC_OK);
        compare_outputs(&f, what);
        const float *y = f.p.host[1], *want = f.ref[1];
        for (int64_t r = 2; r <= 4; r++)
            for (int64_t j = 0; j < C; j++)
                if (!isnan(y[r * C + j]))
                    fail_msg("%s: row %lld element %lld is %g, not NaN", what, (long long)r, (long long)j,
                             y[r * C + j]);
        if (y[5 * C + 7] != 0)
            fail_msg("%s: exp(-inf) gave %g, not 0", what, y[5 * C + 7]);
        if (!(fabsf(y[1 * C + 3] - want[1 * C + 3]) <= 2 * 0x1p-149f) || !(want[1 * C + 3] > 0))
            fail_msg("%s: exp(-90) / sum is %g, the interpreter's %g", what, y[1 * C + 3], want[1 * C + 3]);
        for (int64_t r = 0; r < R; r++)
            for (int64_t j = 0; j < C; j++)
                if (!isnan(want[r * C + j]) &&
                    !(fabsf(y[r * C + j] - want[r * C + j]) <= 1e-6f * want[r * C + j] + 0x1p-148f))
                    fail_msg("%s: row %lld element %lld: %.9g, the interpreter's %.9g", what, (long long)r,
                             (long long)j, y[r * C + j], want[r * C + j]);
        mc_backend_cpu.release(&f.p);
        fake_free(&f);
        fx_free(kp);
    }
}

/* A max of x * c with c > 0 folds x and scales the total once (plan_scaled_extrema): the row
 * max it stores must be bit for bit the max of the f32 products, c = 0.3 (not a power of 2),
 * with negative rows, rows of one sign and a row whose products overflow to inf. */
static void test_scaled_max(void **state)
{
    (void)state;
    int64_t R = 6, C = 37;
    kir_program *kp = fx_program();
    int x = fx_buffer(kp, KBUF_INPUT, MC_F32, R * C);
    int m = fx_buffer(kp, KBUF_OUTPUT, MC_F32, R);
    int n = fx_buffer(kp, KBUF_OUTPUT, MC_F32, R);
    kir_kernel *k = fx_kernel(kp, "red_max_min_0", KIR_REDUCTION, 2, (int64_t[]){R, C}, 1);
    int vx = fx_view_contig(k, x);
    int vm = fx_view(k, m, 0, (int64_t[]){1, 0}), vn = fx_view(k, n, 0, (int64_t[]){1, 0});
    fx_block(k, true);
    int s = fx_op(k, MC_OP_MUL, MC_F32, fx_load(k, vx, MC_F32), fx_const(k, 0.3, MC_F32), 0);
    fx_reduce(k, MC_OP_MAX, s, MC_F32);
    fx_reduce(k, MC_OP_MIN, s, MC_F32);
    fx_block(k, false);
    fx_store(k, vm, fx_other(k, KI_ROWVAL, MC_F32, 0));
    fx_store(k, vn, fx_other(k, KI_ROWVAL, MC_F32, 1));
    fake f;
    fake_init(&f, kp, 1, 9);
    float *xs = f.p.host[0];
    for (int64_t j = 0; j < C; j++) {
        xs[1 * C + j] = -1 - (float)j / 7;   /* all negative */
        xs[2 * C + j] = 1e-3f * (float)(j + 1); /* all positive */
    }
    xs[3 * C + 11] = 3e38f;                   /* 0.3 * 3e38 is finite; */
    xs[4 * C + 12] = -3.4e38f, xs[4 * C + 13] = 3.4e38f;
    xs[5 * C + 0] = 1e-40f;                   /* a subnormal product */
    if (mc_backend_cpu.prepare(&f.p) != MC_OK)
        fail_msg("prepare: %s", mc_error_message());
    assert_int_equal(mc_backend_cpu.run(&f.p), MC_OK);
    for (int64_t r = 0; r < R; r++) {
        float hi = -INFINITY, lo = INFINITY;
        for (int64_t j = 0; j < C; j++) {
            float p = xs[r * C + j] * 0.3f;
            hi = p > hi ? p : hi, lo = p < lo ? p : lo;
        }
        float got_hi = ((const float *)f.p.host[m])[r], got_lo = ((const float *)f.p.host[n])[r];
        if (memcmp(&got_hi, &hi, 4) != 0 || memcmp(&got_lo, &lo, 4) != 0)
            fail_msg("row %lld: max %.9g min %.9g, the f32 products give %.9g and %.9g", (long long)r, got_hi,
                     got_lo, hi, lo);
    }
    mc_backend_cpu.release(&f.p);
    fake_free(&f);
    fx_free(kp);
}

/* The memory plan puts a kernel's output where its dead input was (temporaries at one arena
 * offset): such a kernel reads what it overwrites, so it must neither recompute points it has
 * stored (the non-temporal loops' overlapping end steps) nor take loads of that memory as
 * unchanged. Large enough for non-temporal stores, rows not a multiple of the vector. */
static void test_in_place_temps(void **state)
{
    (void)state;
    int64_t R = 1024, C = 4100, shape[2] = {1024, 4100};
    kir_program *kp = fx_program();
    int x = fx_buffer(kp, KBUF_INPUT, MC_F32, R * C);
    int t = fx_buffer(kp, KBUF_TEMP, MC_F32, R * C);
    int u = fx_buffer(kp, KBUF_TEMP, MC_F32, R * C);
    int y = fx_buffer(kp, KBUF_OUTPUT, MC_F32, R * C);
    kp->buffers[u].offset = kp->buffers[t].offset; /* u overwrites t in place */
    kir_kernel *k0 = fx_kernel(kp, "pw_mul_0", KIR_POINTWISE, 2, shape, 2);
    int vx = fx_view_contig(k0, x), vt = fx_view_contig(k0, t);
    fx_block(k0, false);
    fx_store(k0, vt, fx_op(k0, MC_OP_MUL, MC_F32, fx_load(k0, vx, MC_F32), fx_const(k0, 2, MC_F32), 0));
    kir_kernel *k1 = fx_kernel(kp, "pw_add_1", KIR_POINTWISE, 2, shape, 2);
    int vt1 = fx_view_contig(k1, t), vu = fx_view_contig(k1, u);
    fx_block(k1, false);
    fx_store(k1, vu, fx_op(k1, MC_OP_ADD, MC_F32, fx_load(k1, vt1, MC_F32), fx_const(k1, 1, MC_F32), 0));
    kir_kernel *k2 = fx_kernel(kp, "pw_gelu_2", KIR_POINTWISE, 2, shape, 2);
    int vu2 = fx_view_contig(k2, u), vy = fx_view_contig(k2, y);
    fx_block(k2, false);
    fx_store(k2, vy, fx_op(k2, MC_OP_GELU, MC_F32, fx_load(k2, vu2, MC_F32), 0, 0));
    check_program(kp, 2, "in-place temporaries");
    fx_free(kp);
}

/* Calls of minic_exp in the code generated for kp on CPU `cpu` (before inlining). */
static int exp_calls(kir_program *kp, const char *cpu)
{
    char *text = code_for(kp, cpu);
    int n = 0;
    for (const char *p = text; (p = strstr(p, "call ")) != NULL; p++) {
        const char *eol = strchr(p, '\n');
        const char *e = strstr(p, "@minic_exp_f32x");
        if (e && (!eol || e < eol))
            n++;
    }
    free(text);
    return n;
}

/* softmax computes exp(x - max) in two loop blocks (for the sum, then for the output): the
 * second loads the first's values from the per-thread row cache instead (one call in the vector
 * loop, one in the scalar remainder). The same kernel with a different scale in the last block
 * must compute it again (and give the interpreter's results either way). */
static void test_row_cache(void **state)
{
    (void)state;
    kir_program *kp = fx_softmax(7, 37, MC_F32);
    for (int t = 0; t < NPINNED; t++)
        assert_int_equal(exp_calls(kp, PINNED[t]), 2);
    check_program(kp, 2, "softmax 7x37, exp cached");
    fx_free(kp);
    kp = fx_softmax(7, 37, MC_F32);
    kir_kernel *k = &kp->kernels[0];
    for (int i = k->blocks[k->nblocks - 1].first; i < k->ncode; i++)
        if (k->code[i].kind == KI_CONST)
            k->code[i].value = 0.25; /* the last block's scale: exp(0.25 x - max) */
    for (int t = 0; t < NPINNED; t++)
        assert_int_equal(exp_calls(kp, PINNED[t]), 4);
    check_program(kp, 2, "softmax-like 7x37, different exp");
    fx_free(kp);
}

/* A GEMM's param B is packed once, at the first run: binding a new value (dirty) must repack
 * it, a run without a change must not need to. Small M (A read in place) and large M (A
 * packed), K over one block, N over several column blocks. */
static void test_gemm_param_update(void **state)
{
    (void)state;
    int64_t sizes[2][3] = {{32, 200, 300}, {150, 70, 90}}; /* M, N, K (N <= K: see fx_gemms) */
    for (int t = 0; t < 2; t++) {
        kir_program *kp = fx_gemms(2, sizes[t][0], sizes[t][1], sizes[t][2], MC_F32);
        fake f;
        fake_init(&f, kp, 2, 5);
        f.p.dirty = calloc((size_t)kp->nbuffers, sizeof *f.p.dirty);
        assert_non_null(f.p.dirty);
        assert_int_equal(mc_backend_cpu.prepare(&f.p), MC_OK);
        for (int round = 0; round < 3; round++) {
            if (round > 0) {
                /* a new weight (buffer 1, [N, K]) as mc_program_set would bind it */
                float *w = f.p.host[1];
                for (int64_t i = 0; i < kp->buffers[1].numel; i++)
                    w[i] = (float)(((i * 7 + round * 13) % 17) - 8) / 8.0f;
                memcpy(f.ref[1], w, (size_t)kp->buffers[1].numel * sizeof *w);
                f.p.dirty[1] = true;
            }
            fx_eval(kp, f.ref);
            assert_int_equal(mc_backend_cpu.run(&f.p), MC_OK);
            assert_false(f.p.dirty[1]);
            assert_int_equal(mc_backend_cpu.run(&f.p), MC_OK);
            compare_outputs(&f, round ? "gemm after a new weight" : "gemm with a packed weight");
        }
        mc_backend_cpu.release(&f.p);
        free(f.p.dirty);
        fake_free(&f);
        fx_free(kp);
    }
}

/* A conv-shaped GEMM: a param weight A [M, K] shared by the batch entries, an input B
 * [batch, K, N] with N narrow, a bias along M and relu, then a second kernel adding a residual.
 * The backend may compute such a GEMM swapped (C^T = B^T A^T, the weight packed once as B; the
 * tile's lanes then run along M); MINIC_GEMM_SWAP=0 and =1 force either way, so both are checked
 * here whatever the host's vector width makes the default. A new weight must repack it. */
static kir_program *conv_gemms(int64_t nbatch, int64_t M, int64_t N, int64_t K, mc_dtype d)
{
    kir_program *kp = fx_program();
    int w = fx_buffer(kp, KBUF_PARAM, d, M * K);
    int x = fx_buffer(kp, KBUF_INPUT, d, nbatch * K * N);
    int bias = fx_buffer(kp, KBUF_PARAM, d, M);
    int res = fx_buffer(kp, KBUF_INPUT, d, nbatch * M * N);
    int y0 = fx_buffer(kp, KBUF_OUTPUT, d, nbatch * M * N);
    int y1 = fx_buffer(kp, KBUF_OUTPUT, MC_F32, nbatch * M * N);
    for (int g = 0; g < 2; g++) {
        kir_kernel *k = fx_kernel(kp, g ? "gemm_add_1" : "gemm_bias_relu_0", KIR_GEMM, 3, (int64_t[]){nbatch, M, N}, 3);
        k->gemm.m = M;
        k->gemm.n = N;
        k->gemm.k = K;
        k->gemm.a = fx_view(k, w, 0, (int64_t[]){0, K, 1});
        k->gemm.b = fx_view(k, x, 0, (int64_t[]){K * N, N, 1});
        fx_block(k, false);
        int acc = fx_other(k, KI_ACC, MC_F32, 0);
        if (g == 0) {
            int a = fx_op(k, MC_OP_ADD, MC_F32, acc, fx_load(k, fx_view(k, bias, 0, (int64_t[]){0, 1, 0}), d), 0);
            fx_store(k, fx_view_contig(k, y0), fx_op(k, MC_OP_RELU, d, a, 0, 0));
        } else {
            fx_store(k, fx_view_contig(k, y1), fx_op(k, MC_OP_ADD, MC_F32, acc, fx_load(k, fx_view_contig(k, res), d), 0));
        }
    }
    return kp;
}

static void test_gemm_swapped(void **state)
{
    (void)state;
    /* nbatch, M, N, K: 49 columns (ResNet's last convs), 10 (narrower than a tile's rows
     * would be wide), M with an edge tile either way, K over several blocks */
    int64_t sizes[4][4] = {{1, 96, 49, 600}, {2, 100, 10, 300}, {1, 7, 3, 5}, {3, 70, 33, 257}};
    const char *modes[2] = {"0", "1"};
    for (int m = 0; m < 2; m++) {
        assert_int_equal(setenv("MINIC_GEMM_SWAP", modes[m], 1), 0);
        for (int t = 0; t < 4; t++) {
            mc_dtype d = t == 3 ? MC_BF16 : MC_F32;
            kir_program *kp = conv_gemms(sizes[t][0], sizes[t][1], sizes[t][2], sizes[t][3], d);
            char what[96];
            snprintf(what, sizeof what, "conv-shaped gemm %lldx%lldx%lldx%lld swap=%s", (long long)sizes[t][0],
                     (long long)sizes[t][1], (long long)sizes[t][2], (long long)sizes[t][3], modes[m]);
            check_program(kp, 2, what);
            fx_free(kp);
        }
        /* a new weight (buffer 0) is packed again */
        kir_program *kp = conv_gemms(2, 96, 49, 600, MC_F32);
        fake f;
        fake_init(&f, kp, 2, 5);
        f.p.dirty = calloc((size_t)kp->nbuffers, sizeof *f.p.dirty);
        assert_non_null(f.p.dirty);
        assert_int_equal(mc_backend_cpu.prepare(&f.p), MC_OK);
        for (int round = 0; round < 3; round++) {
            if (round > 0) {
                float *w = f.p.host[0];
                for (int64_t i = 0; i < kp->buffers[0].numel; i++)
                    w[i] = (float)(((i * 5 + round * 11) % 13) - 6) / 6.0f;
                memcpy(f.ref[0], w, (size_t)kp->buffers[0].numel * sizeof *w);
                f.p.dirty[0] = true;
            }
            fx_eval(kp, f.ref);
            assert_int_equal(mc_backend_cpu.run(&f.p), MC_OK);
            compare_outputs(&f, round ? "conv-shaped gemm after a new weight" : "conv-shaped gemm");
        }
        mc_backend_cpu.release(&f.p);
        free(f.p.dirty);
        fake_free(&f);
        fx_free(kp);
    }
    assert_int_equal(unsetenv("MINIC_GEMM_SWAP"), 0);
}

/* A conv as passes/decompose.c lowers it: x padded into a temp xp (zeros, then x's copy into
 * the interior), the kh x kw window copies of xp into cols [nimg, C kh kw, OH OW], the GEMM
 * w [Co, C kh kw] x cols with relu. The CPU backend packs such a GEMM's B from xp itself and
 * skips the copies (llvm_im2col); with `reader`, a later kernel also reads cols (copied into
 * a second output), so the copies must run. */
static kir_program *im2col_conv(int64_t nimg, int64_t C, int64_t H, int64_t W, int64_t Co, int kh, int kw, int stride,
                                int pad, bool reader)
{
    int64_t Hp = H + 2 * pad, Wp = W + 2 * pad, OH = (Hp - kh) / stride + 1, OW = (Wp - kw) / stride + 1;
    int64_t O = OH * OW, T = kh * kw, K = C * T;
    kir_program *kp = fx_program();
    int x = fx_buffer(kp, KBUF_INPUT, MC_F32, nimg * C * H * W);
    int w = fx_buffer(kp, KBUF_PARAM, MC_F32, Co * K);
    int xp = fx_buffer(kp, KBUF_TEMP, MC_F32, nimg * C * Hp * Wp);
    int cols = fx_buffer(kp, KBUF_TEMP, MC_F32, nimg * K * O);
    int y = fx_buffer(kp, KBUF_OUTPUT, MC_F32, nimg * Co * O);
    kir_kernel *k = fx_kernel(kp, "pw_zero_0", KIR_POINTWISE, 1, (int64_t[]){nimg * C * Hp * Wp}, 1);
    fx_block(k, false);
    fx_store(k, fx_view_contig(k, xp), fx_const(k, 0, MC_F32));
    k = fx_kernel(kp, "copy_pad_1", KIR_COPY, 4, (int64_t[]){nimg, C, H, W}, 4);
    fx_block(k, false);
    int v = fx_load(k, fx_view_contig(k, x), MC_F32);
    fx_store(k, fx_view(k, xp, pad * Wp + pad, (int64_t[]){C * Hp * Wp, Hp * Wp, Wp, 1}), v);
    for (int t = 0; t < T; t++) {
        char name[32];
        snprintf(name, sizeof name, "copy_conv_%d", 2 + t);
        k = fx_kernel(kp, name, KIR_COPY, 5, (int64_t[]){nimg, C, 1, OH, OW}, 5);
        fx_block(k, false);
        v = fx_load(k, fx_view(k, xp, (t / kw) * Wp + t % kw, (int64_t[]){C * Hp * Wp, Hp * Wp, 0, stride * Wp, stride}), MC_F32);
        fx_store(k, fx_view(k, cols, t * O, (int64_t[]){K * O, T * O, O, OW, 1}), v);
    }
    k = fx_kernel(kp, "gemm_conv_11", KIR_GEMM, 3, (int64_t[]){nimg, Co, O}, 3);
    k->gemm.m = Co;
    k->gemm.n = O;
    k->gemm.k = K;
    k->gemm.a = fx_view(k, w, 0, (int64_t[]){0, K, 1});
    k->gemm.b = fx_view(k, cols, 0, (int64_t[]){K * O, O, 1});
    fx_block(k, false);
    fx_store(k, fx_view_contig(k, y), fx_op(k, MC_OP_RELU, MC_F32, fx_other(k, KI_ACC, MC_F32, 0), 0, 0));
    if (reader) {
        int y2 = fx_buffer(kp, KBUF_OUTPUT, MC_F32, nimg * K * O);
        k = fx_kernel(kp, "copy_cols_12", KIR_COPY, 1, (int64_t[]){nimg * K * O}, 1);
        fx_block(k, false);
        fx_store(k, fx_view_contig(k, y2), fx_load(k, fx_view_contig(k, cols), MC_F32));
    }
    /* live ranges, as lowering records them (the plan is not run here: every temp has its own
     * place) */
    for (int b = 0; b < kp->nbuffers; b++)
        kp->buffers[b].first = kp->buffers[b].last = -1;
    for (int i = 0; i < kp->nkernels; i++)
        for (int q = 0; q < kp->kernels[i].nviews; q++) {
            kir_buffer *b = &kp->buffers[kp->kernels[i].views[q].buffer];
            if (b->first < 0)
                b->first = i;
            b->last = i;
        }
    return kp;
}

static void test_gemm_im2col(void **state)
{
    (void)state;
    /* nimg, C, H, W, Co, kh, kw, stride, pad: 3x3 stride 1 (rows of 7 outputs: vectors cross
     * output rows), stride 2 (gathers), a wide row (plain loads), 1x5, a 7x7 stride 2 with rows
     * of 20 outputs (a stem: the even elements of two loads), 64 outputs channels over 7x7
     * positions (the GEMM swaps: its A^T packed from xp) */
    int64_t cases[6][9] = {{2, 3, 7, 7, 5, 3, 3, 1, 1}, {1, 4, 8, 9, 7, 3, 3, 2, 1}, {1, 2, 5, 40, 3, 3, 3, 1, 1},
                           {2, 3, 3, 11, 4, 1, 5, 1, 0}, {1, 3, 9, 40, 4, 7, 7, 2, 3}, {2, 8, 7, 7, 64, 3, 3, 1, 1}};
    for (int c = 0; c < 6; c++)
        for (int reader = 0; reader < 2; reader++) {
            int64_t *a = cases[c];
            kir_program *kp = im2col_conv(a[0], a[1], a[2], a[3], a[4], (int)a[5], (int)a[6], (int)a[7], (int)a[8], reader);
            char what[96];
            snprintf(what, sizeof what, "conv as im2col copies and a gemm, case %d%s", c, reader ? ", cols read again" : "");
            check_program(kp, 2, what);
            /* the GEMM packs from xp where nothing else reads cols (a choice of the backend
             * that does not depend on the CPU) */
            fake f;
            fake_init(&f, kp, 2, 42);
            assert_int_equal(mc_backend_cpu.prepare(&f.p), MC_OK);
            char *text = dumped_code(&f.p);
            if (reader)
                assert_null(strstr(text, "im2col_taps"));
            else
                assert_non_null(strstr(text, "im2col_taps"));
            free(text);
            mc_backend_cpu.release(&f.p);
            fake_free(&f);
            fx_free(kp);
        }
}

/* ---- the thread pool ------------------------------------------------------------------------ */

typedef struct count_job {
    int *hits;
    int nthreads;
    int bad_thread;
} count_job;

static void count_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    count_job *j = ctx;
    if (thread < 0 || thread >= j->nthreads)
        __atomic_store_n(&j->bad_thread, 1, __ATOMIC_RELAXED);
    for (int64_t i = begin; i < end; i++)
        __atomic_fetch_add(&j->hits[i], 1, __ATOMIC_RELAXED);
}

static void test_threadpool(void **state)
{
    (void)state;
    int counts[] = {1, 2, 3, 5};
    for (size_t t = 0; t < sizeof counts / sizeof counts[0]; t++) {
        mc_threadpool *pool;
        assert_int_equal(mc_threadpool_new(counts[t], &pool), MC_OK);
        assert_int_equal(mc_threadpool_size(pool), counts[t]);
        for (int64_t n = 1; n <= 1000; n = n * 3 + 1) {
            for (int64_t grain = 0; grain <= 7; grain += 7) {
                int *hits = calloc((size_t)n, sizeof *hits);
                count_job j = {.hits = hits, .nthreads = counts[t]};
                for (int rep = 0; rep < 3; rep++)
                    mc_threadpool_run(pool, n, grain, count_range, &j);
                for (int64_t i = 0; i < n; i++)
                    assert_int_equal(hits[i], 3);
                assert_int_equal(j.bad_thread, 0);
                free(hits);
            }
        }
        mc_threadpool_free(pool);
    }
    mc_threadpool *pool;
    assert_int_equal(mc_threadpool_new(-1, &pool), MC_ERR_INPUT);
    assert_null(pool);
    assert_int_equal(mc_threadpool_new(0, &pool), MC_OK);
    assert_int_equal(mc_threadpool_size(pool), mc_threadpool_default_threads());
    mc_threadpool_free(pool);
}

/* ---- cache and dump -------------------------------------------------------------------------- */

static mc_status run_fake(void *p)
{
    return mc_backend_cpu.run(p);
}

static void test_cache_and_dump(void **state)
{
    (void)state;
    if (getenv("MINIC_NO_CACHE"))
        unsetenv("MINIC_NO_CACHE");
    /* a size no other test uses, so the first prepare here is a miss in a fresh cache */
    kir_program *kp = fx_softmax(11, 1237, MC_F32);
    fake f;
    fake_init(&f, kp, 1, 7);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/cache", mc_test_tmpdir());
    setenv("XDG_CACHE_HOME", dir, 1);
    assert_int_equal(mc_backend_cpu.prepare(&f.p), MC_OK);
    assert_int_equal(f.p.kernels_compiled, 1);
    char *text = dumped_code(&f.p);
    assert_non_null(strstr(text, "define void @red_fused_softmax_0("));
    assert_non_null(strstr(text, "minic_exp_f32x"));
    free(text);
    mc_backend_cpu.release(&f.p);
    double t0 = mc_now_ms();
    assert_int_equal(mc_backend_cpu.prepare(&f.p), MC_OK);
    double warm = mc_now_ms() - t0;
    assert_int_equal(f.p.kernels_compiled, 0); /* from the cache */
    assert_int_equal(mc_backend_cpu.run(&f.p), MC_OK);
    fx_eval(kp, f.ref);
    double *got = malloc(11 * 1237 * sizeof *got), *want = malloc(11 * 1237 * sizeof *want);
    for (int i = 0; i < 11 * 1237; i++) {
        got[i] = ((float *)f.p.host[1])[i];
        want[i] = ((float *)f.ref[1])[i];
    }
    assert_true(mc_test_rel_error(got, want, 11 * 1237) < 1e-5);
    free(got);
    free(want);
    double us;
    assert_null(mc_backend_cpu.time); /* host backends are timed by the caller's loop */
    assert_int_equal(mc_time_median(run_fake, &f.p, 5, &us), MC_OK);
    assert_true(us > 0 && us < 1e6);
    fprintf(stderr, "prepare from cache: %.1f ms; run %.1f us\n", warm, us);
    mc_backend_cpu.release(&f.p);
    fake_free(&f);
    fx_free(kp);
}

/* A stack of identical layers: y = relu(relu(x @ w1^T + b1) @ w2^T + b2) @ ... (each a GEMM with
 * its own weight and bias, the same shapes), then a pointwise sigmoid twice. Kernels that only
 * differ in their buffers share one function (the dump says so) and each still computes with
 * its own buffers, its own packed weight included, also after one weight is rebound. */
static void test_shared_kernel_code(void **state)
{
    (void)state;
    enum { LAYERS = 3 };
    int64_t M = 20, D = 40;
    kir_program *kp = fx_program();
    int h = fx_buffer(kp, KBUF_INPUT, MC_F32, M * D), w[LAYERS];
    for (int l = 0; l < LAYERS; l++) {
        w[l] = fx_buffer(kp, KBUF_PARAM, MC_F32, D * D);
        int b = fx_buffer(kp, KBUF_PARAM, MC_F32, D);
        int out = fx_buffer(kp, l == LAYERS - 1 ? KBUF_OUTPUT : KBUF_TEMP, MC_F32, M * D);
        char name[32];
        snprintf(name, sizeof name, "gemm_bias_relu_%d", l);
        kir_kernel *k = fx_kernel(kp, name, KIR_GEMM, 2, (int64_t[]){M, D}, 2);
        k->gemm.m = M;
        k->gemm.n = D;
        k->gemm.k = D;
        k->gemm.a = fx_view(k, h, 0, (int64_t[]){D, 1});
        k->gemm.b = fx_view(k, w[l], 0, (int64_t[]){1, D});
        fx_block(k, false);
        int a = fx_op(k, MC_OP_ADD, MC_F32, fx_other(k, KI_ACC, MC_F32, 0),
                      fx_load(k, fx_view(k, b, 0, (int64_t[]){0, 1}), MC_F32), 0);
        fx_store(k, fx_view_contig(k, out), fx_op(k, MC_OP_RELU, MC_F32, a, 0, 0));
        h = out;
    }
    for (int l = 0; l < 2; l++) {
        int out = fx_buffer(kp, KBUF_OUTPUT, MC_F32, M * D);
        char name[32];
        snprintf(name, sizeof name, "pw_fused_sigmoid_%d", LAYERS + l);
        kir_kernel *k = fx_kernel(kp, name, KIR_POINTWISE, 2, (int64_t[]){M, D}, 2);
        fx_block(k, false);
        fx_store(k, fx_view_contig(k, out), fx_op(k, MC_OP_SIGMOID, MC_F32, fx_load(k, fx_view_contig(k, h), MC_F32), 0, 0));
        h = out;
    }
    for (int t = 0; t < NPINNED; t++) {
        char *text = code_for(kp, PINNED[t]);
        assert_non_null(strstr(text, "define void @gemm_bias_relu_0("));
        assert_null(strstr(text, "define void @gemm_bias_relu_2("));
        assert_non_null(strstr(text, "; kernel gemm_bias_relu_2 runs the code of gemm_bias_relu_0"));
        assert_non_null(strstr(text, "; kernel pw_fused_sigmoid_4 runs the code of pw_fused_sigmoid_3"));
        free(text);
    }
    fake f;
    fake_init(&f, kp, 2, 3);
    f.p.dirty = calloc((size_t)kp->nbuffers, sizeof *f.p.dirty);
    assert_non_null(f.p.dirty);
    assert_int_equal(mc_backend_cpu.prepare(&f.p), MC_OK);
    for (int round = 0; round < 2; round++) {
        if (round == 1) { /* a new second weight */
            float *wv = f.p.host[w[1]];
            for (int64_t i = 0; i < D * D; i++)
                wv[i] = (float)((i % 7) - 3) / 16.0f;
            memcpy(f.ref[w[1]], wv, (size_t)(D * D) * sizeof *wv);
            f.p.dirty[w[1]] = true;
        }
        fx_eval(kp, f.ref);
        assert_int_equal(mc_backend_cpu.run(&f.p), MC_OK);
        compare_outputs(&f, round ? "shared code, new weight" : "shared code");
    }
    mc_backend_cpu.release(&f.p);
    free(f.p.dirty);
    fake_free(&f);
    fx_free(kp);
}

/* With two threads a cold compile runs in parts (each a share of the kernels, its own object
 * file); the parts are cached together and a second prepare loads them all. */
static void test_compile_in_parts(void **state)
{
    (void)state;
    if (getenv("MINIC_NO_CACHE"))
        unsetenv("MINIC_NO_CACHE");
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/cache_parts", mc_test_tmpdir());
    setenv("XDG_CACHE_HOME", dir, 1);
    kir_program *kp = fx_gemms(2, 17, 23, 29, MC_F32); /* 4 kernels, sizes no other test uses */
    fake f;
    fake_init(&f, kp, 2, 11);
    fx_eval(kp, f.ref);
    for (int round = 0; round < 2; round++) {
        assert_int_equal(mc_backend_cpu.prepare(&f.p), MC_OK);
        assert_int_equal(f.p.kernels_compiled, round == 0 ? kp->nkernels : 0);
        assert_int_equal(mc_backend_cpu.run(&f.p), MC_OK);
        compare_outputs(&f, round == 0 ? "compiled in parts" : "parts from the cache");
        mc_backend_cpu.release(&f.p);
    }
    fake_free(&f);
    fx_free(kp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threadpool),
        cmocka_unit_test(test_pointwise),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_strided_reductions),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_gemm_transposed_a),
        cmocka_unit_test(test_cpu_targets),
        cmocka_unit_test(test_vector_width_follows_target),
        cmocka_unit_test(test_f16_without_f16c),
        cmocka_unit_test(test_nontemporal_stores),
        cmocka_unit_test(test_row_cache),
        cmocka_unit_test(test_lax_max),
        cmocka_unit_test(test_exp_row_range),
        cmocka_unit_test(test_scaled_max),
        cmocka_unit_test(test_in_place_temps),
        cmocka_unit_test(test_gemm_param_update),
        cmocka_unit_test(test_gemm_swapped),
        cmocka_unit_test(test_gemm_im2col),
        cmocka_unit_test(test_cache_and_dump),
        cmocka_unit_test(test_compile_in_parts),
        cmocka_unit_test(test_shared_kernel_code),
    };
    return mc_test_run(tests);
}
