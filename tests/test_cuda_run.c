/* The CUDA backend on a GPU: every fixture kernel (tests/cuda_fixtures.h) against a float64
 * interpreter of the same kernel IR, within SPEC §6, with and without CUDA graphs; inputs
 * changed between runs are uploaded again; a program too large for the GPU fails cleanly.
 * Without a usable GPU it prints "skipped: no GPU" and exits 77.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#ifdef MINIC_HAVE_CUDA
#include "cuda_fixtures.h"
#include "runtime/runtime.h"

static mc_program *make_program(kir_program *kp, int cuda_graph)
{
    mc_program *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->kp = kp;
    p->opt = (mc_options){.backend = MC_BACKEND_CUDA, .fuse = true, .plan_memory = true};
    p->opt.cuda_graph = cuda_graph;
    p->opt.quiet = true;
    p->backend = &mc_backend_cuda;
    int n = kp->nbuffers;
    p->host = calloc((size_t)n, sizeof(void *));
    p->bound = calloc((size_t)n, 1);
    p->dirty = calloc((size_t)n, 1);
    p->has_value = calloc((size_t)n, 1);
    for (int b = 0; b < n; b++) {
        const kir_buffer *buf = &kp->buffers[b];
        if (buf->kind == KBUF_TEMP)
            continue;
        p->host[b] = calloc((size_t)buf->numel + 1, mc_dtype_size(buf->dtype));
        assert_non_null(p->host[b]);
        if (buf->kind != KBUF_OUTPUT) {
            char name[16];
            snprintf(name, sizeof name, "b%d", b);
            mc_fill_random(p->host[b], buf->dtype, buf->numel, 7, name);
            p->dirty[b] = p->bound[b] = p->has_value[b] = true;
        }
    }
    return p;
}

static void free_program(mc_program *p)
{
    if (p->state)
        p->backend->release(p);
    for (int b = 0; b < p->kp->nbuffers; b++)
        free(p->host[b]);
    free(p->host);
    free(p->bound);
    free(p->dirty);
    free(p->has_value);
    free(p);
}

/* Compare every output of p with the interpreter's, run on the same inputs. */
static void check_outputs(const mc_program *p, const char *what)
{
    const kir_program *kp = p->kp;
    void **ref = calloc((size_t)kp->nbuffers, sizeof(void *));
    bool matmul = false;
    for (int k = 0; k < kp->nkernels; k++)
        matmul |= kp->kernels[k].category == KIR_GEMM;
    for (int b = 0; b < kp->nbuffers; b++) {
        const kir_buffer *buf = &kp->buffers[b];
        size_t bytes = (size_t)buf->numel * mc_dtype_size(buf->dtype);
        ref[b] = calloc(bytes + 1, 1);
        if (buf->kind == KBUF_INPUT || buf->kind == KBUF_PARAM)
            memcpy(ref[b], p->host[b], bytes);
    }
    fx_eval(kp, ref);
    for (int b = 0; b < kp->nbuffers; b++) {
        const kir_buffer *buf = &kp->buffers[b];
        if (buf->kind != KBUF_OUTPUT)
            continue;
        double *got = malloc((size_t)buf->numel * sizeof(double));
        double *want = malloc((size_t)buf->numel * sizeof(double));
        for (int64_t i = 0; i < buf->numel; i++) {
            got[i] = mc_load_element(p->host[b], buf->dtype, i);
            want[i] = mc_load_element(ref[b], buf->dtype, i);
        }
        double err = mc_test_rel_error(got, want, buf->numel);
        double tol = buf->dtype == MC_F32 ? (matmul ? 1e-4 : 1e-5)
                     : (buf->dtype == MC_F16 || buf->dtype == MC_BF16) ? 1e-2 : 0;
        if (!(err <= tol))
            fail_msg("%s: buffer %d (%s, %lld elements): relative error %.3g > %.3g", what, b,
                     mc_dtype_name(buf->dtype), (long long)buf->numel, err, tol);
        free(got);
        free(want);
    }
    for (int b = 0; b < kp->nbuffers; b++)
        free(ref[b]);
    free(ref);
}

/* Prepare, run three times (warm-up, capture, replay) with new inputs before the third. */
static void run_and_check(kir_program *kp, const char *what)
{
    for (int graph = 0; graph <= 1; graph++) {
        mc_program *p = make_program(kp, graph ? 1 : 0);
        if (p->backend->prepare(p) != MC_OK)
            fail_msg("%s: prepare: %s", what, mc_error_message());
        for (int run = 0; run < 3; run++) {
            if (run == 2) {
                for (int b = 0; b < kp->nbuffers; b++)
                    if (kp->buffers[b].kind == KBUF_INPUT) {
                        mc_fill_random(p->host[b], kp->buffers[b].dtype, kp->buffers[b].numel,
                                       99, "again");
                        p->dirty[b] = true;
                    }
            }
            /* poison the outputs: every element must be written */
            for (int b = 0; b < kp->nbuffers; b++)
                if (kp->buffers[b].kind == KBUF_OUTPUT)
                    memset(p->host[b], 0xff,
                           (size_t)kp->buffers[b].numel * mc_dtype_size(kp->buffers[b].dtype));
            if (p->backend->run(p) != MC_OK)
                fail_msg("%s: run %d: %s", what, run, mc_error_message());
            char label[128];
            snprintf(label, sizeof label, "%s (graph %s, run %d)", what, graph ? "on" : "off", run);
            check_outputs(p, label);
        }
        double us = 0;
        assert_int_equal(p->backend->time(p, 5, &us), MC_OK);
        assert_true(us > 0);
        free_program(p);
    }
}

static void test_pointwise(void **state)
{
    (void)state;
    int64_t sizes[3][2] = {{64, 256}, {3, 7}, {1000, 1000}};
    for (int i = 0; i < 3; i++) {
        kir_program *kp = fx_pointwise(sizes[i][0], sizes[i][1]);
        run_and_check(kp, "pointwise");
        fx_free(kp);
    }
}

static void test_reductions(void **state)
{
    (void)state;
    const mc_dtype dts[3] = {MC_F32, MC_F16, MC_BF16};
    for (int i = 0; i < 3; i++) {
        kir_program *kp = fx_softmax(64, 256, dts[i]);
        run_and_check(kp, "softmax");
        fx_free(kp);
        kp = fx_softmax(33, 1000, dts[i]);
        run_and_check(kp, "softmax ragged");
        fx_free(kp);
        kp = fx_layernorm(16, 4096, dts[i]);
        run_and_check(kp, "layernorm");
        fx_free(kp);
        kp = fx_layernorm(5, 20000, dts[i]);
        run_and_check(kp, "layernorm long");
        fx_free(kp);
    }
    kir_program *kp = fx_full_reduce(100, 1000);
    run_and_check(kp, "full reduction");
    fx_free(kp);
}

static void test_gemms(void **state)
{
    (void)state;
    const mc_dtype dts[3] = {MC_F32, MC_F16, MC_BF16};
    for (int i = 0; i < 3; i++) {
        kir_program *kp = fx_gemms(3, 40, 24, 32, dts[i]);
        run_and_check(kp, "gemms");
        fx_free(kp);
        kp = fx_gemms(2, 130, 96, 200, dts[i]);
        run_and_check(kp, "gemms larger");
        fx_free(kp);
    }
}

static void test_out_of_memory(void **state)
{
    (void)state;
    kir_program *kp = fx_pointwise(64, 256);
    mc_program *p = make_program(kp, -1);
    /* host arrays of that size aren't needed: prepare fails first */
    kp->buffers[0].numel = (int64_t)1 << 42; /* 16 TiB of f32 */
    kp->kernels[0].shape[0] = ((int64_t)1 << 42) / 256;
    assert_int_equal(p->backend->prepare(p), MC_ERR_SYSTEM);
    assert_non_null(strstr(mc_error_message(), "out of GPU memory"));
    free_program(p);
    fx_free(kp);
}

/* MINIC_CUDA_BENCH=1: time the fixtures at the benchmark suite's sizes (device-timed medians
 * of the `time` slot) and print a table; the suite's own numbers come from bench/gpu_bench.sh
 * once graphs compile end to end. */
static int bench(void)
{
    struct { const char *name; kir_program *kp; double bytes; } w[] = {
        {"copy f32 8192x8192", fx_pw_bench(8192, 8192, true), 2.0 * 8192 * 8192 * 4},
        {"pointwise f32 8192x8192", fx_pw_bench(8192, 8192, false), 2.0 * 8192 * 8192 * 4},
        {"softmax f32 8192x4096", fx_softmax(8192, 4096, MC_F32), 2.0 * 8192 * 4096 * 4},
        {"layernorm f32 8192x4096", fx_layernorm(8192, 4096, MC_F32), 2.0 * 8192 * 4096 * 4},
        {"softmax bf16 8192x4096", fx_softmax(8192, 4096, MC_BF16), 2.0 * 8192 * 4096 * 2},
    };
    printf("%-28s %10s %10s\n", "fixture", "median_us", "GB/s");
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        mc_program *p = make_program(w[i].kp, -1);
        double us = -1;
        if (p->backend->prepare(p) != MC_OK || p->backend->time(p, 50, &us) != MC_OK) {
            printf("%s: %s\n", w[i].name, mc_error_message());
            return 1;
        }
        printf("%-28s %10.1f %10.1f\n", w[i].name, us, w[i].bytes / us / 1e3);
        free_program(p);
        fx_free(w[i].kp);
    }
    return 0;
}

int main(void)
{
    if (getenv("MINIC_CUDA_BENCH") && mc_test_have_gpu())
        return bench();
    if (!mc_test_have_gpu()) {
        printf("skipped: no GPU (%s)\n", mc_error_message());
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pointwise),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_gemms),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
int main(void)
{
    printf("skipped: no GPU (minic was built without the CUDA backend)\n");
    return 77;
}
#endif
