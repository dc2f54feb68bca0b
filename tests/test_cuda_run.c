/* The CUDA backend on a GPU: every fixture kernel (tests/cuda_fixtures.h) against a float64
 * interpreter of the same kernel IR within docs/FORMAT.md §6, with and without CUDA graphs; inputs
 * changed between runs are uploaded again; a program too large for the GPU fails cleanly.
 * Without a usable GPU it prints "skipped: no GPU" and exits 77.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#ifdef MINIC_HAVE_CUDA
#include "cuda_fixtures.h"
#include "backends/cuda/cuda.h"
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

/* The interpreter's buffers for p's current inputs (float64 inside, each buffer in its dtype). */
static void **interpret(const mc_program *p)
{
    const kir_program *kp = p->kp;
    void **ref = calloc((size_t)kp->nbuffers, sizeof(void *));
    assert_non_null(ref);
    for (int b = 0; b < kp->nbuffers; b++) {
        const kir_buffer *buf = &kp->buffers[b];
        size_t bytes = (size_t)buf->numel * mc_dtype_size(buf->dtype);
        ref[b] = calloc(bytes + 1, 1);
        assert_non_null(ref[b]);
        if (buf->kind == KBUF_INPUT || buf->kind == KBUF_PARAM)
            memcpy(ref[b], p->host[b], bytes);
    }
    fx_eval(kp, ref);
    return ref;
}

static void free_interpreted(const kir_program *kp, void **ref)
{
    if (!ref)
        return;
    for (int b = 0; b < kp->nbuffers; b++)
        free(ref[b]);
    free(ref);
}

/* Compare every output of p with the interpreter's buffers ref, computed from the same inputs. */
static void check_outputs(const mc_program *p, void **ref, const char *what)
{
    const kir_program *kp = p->kp;
    bool matmul = false;
    for (int k = 0; k < kp->nkernels; k++)
        matmul |= kp->kernels[k].category == KIR_GEMM;
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
}

/* Prepare, run three times (warm-up, capture, replay) with new inputs before the third, with
 * and without a CUDA graph. The inputs are the same seeded values in both modes, so the
 * interpreter runs once per input set (twice in all): on the LM head's shapes it is most of
 * the test's time. */
static void run_and_check(kir_program *kp, const char *what)
{
    void **ref[2] = {NULL, NULL}; /* the first inputs, the new ones */
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
            int set = run == 2;
            if (!ref[set])
                ref[set] = interpret(p);
            char label[128];
            snprintf(label, sizeof label, "%s (graph %s, run %d)", what, graph ? "on" : "off", run);
            check_outputs(p, ref[set], label);
        }
        double us = 0;
        assert_int_equal(p->backend->time(p, 5, &us), MC_OK);
        assert_true(us > 0);
        free_program(p);
    }
    free_interpreted(kp, ref[0]);
    free_interpreted(kp, ref[1]);
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
    kir_program *kp = fx_sum_broadcast(50, 300);
    run_and_check(kp, "sum of a broadcast, i32 division by zero");
    fx_free(kp);
    kp = fx_full_reduce(100, 1000);
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
        /* small: the warp-dot kernel, with edge tiles in M and N and K not a multiple of 32 */
        kp = fx_gemms(2, 13, 70, 300, dts[i]);
        run_and_check(kp, "small gemms");
        fx_free(kp);
        kp = fx_gemms(1, 32, 256, 256, dts[i]);
        run_and_check(kp, "small gemms 32x256x256");
        fx_free(kp);
    }
}

/* GEMMs of few rows on the GEMV kernel (cuda_render.c): both weight layouts, f32/f16/bf16, rows
 * 1..16 (a batch folded in, a batched B looped over), every epilogue of fx_gemv (bias + gelu, a
 * residual, two stores of f32 and f16, a bf16 store, a strided A), N and K that 16-byte vectors
 * don't divide (37, 50257; K 75), K 3072; each checked to run as a GEMV. */
static void test_gemv(void **state)
{
    (void)state;
    const mc_dtype dts[3] = {MC_F32, MC_F16, MC_BF16};
    /* B, M, N, K, which kernels, bf16 only (the interpreter checks every output six times:
     * the LM head's 50257 columns once, its 8-row form at 4099 columns, the same code) */
    const int64_t sizes[][6] = {{1, 1, 3072, 768, 0x3f, 0}, {1, 2, 768, 3072, 0x3f, 0}, {1, 5, 37, 75, 0x3f, 0},
                                {2, 4, 100, 64, 0x3f, 0},   {1, 8, 300, 256, 0x3f, 0}, {1, 16, 200, 96, 0x3f, 0},
                                {1, 1, 50257, 768, 0x9, 1}, {8, 1, 4099, 768, 0x9, 0}, {4, 2, 37, 3072, 0x3f, 0}};
    for (int i = 0; i < 3; i++)
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
            for (int trans = 0; trans <= 1; trans++) {
                const int64_t *sz = sizes[z];
                if (sz[5] && dts[i] != MC_BF16)
                    continue;
                kir_program *kp = fx_gemv(sz[0], sz[1], sz[2], sz[3], dts[i], trans, (unsigned)sz[4]);
                for (int g = 0; g < kp->nkernels; g++) {
                    mc_cuda_gemm_plan plan;
                    mc_cuda_gemm_plan_make(kp, g, &plan);
                    assert_true(plan.gemv && !plan.use_lt);
                }
                char what[128];
                snprintf(what, sizeof what, "gemv %s %lldx%lldx%lldx%lld %s", mc_dtype_name(dts[i]),
                         (long long)sz[0], (long long)sz[1], (long long)sz[2], (long long)sz[3],
                         trans ? "B^T (contiguous along K)" : "B [K, N]");
                run_and_check(kp, what);
                fx_free(kp);
            }
    /* the previous path, for the lead's comparison, still right */
    setenv("MINIC_NO_GEMV", "1", 1);
    for (int trans = 0; trans <= 1; trans++) {
        kir_program *kp = fx_gemv(1, 2, 768, 3072, MC_BF16, trans, 0x3f);
        mc_cuda_gemm_plan plan;
        mc_cuda_gemm_plan_make(kp, 0, &plan);
        assert_false(plan.gemv);
        run_and_check(kp, "MINIC_NO_GEMV=1");
        fx_free(kp);
    }
    unsetenv("MINIC_NO_GEMV");
}

/* Half-precision GEMM outputs whose rows are not 16-byte aligned are written with padded rows
 * on the device (cuda_gemm.c, pad_output_ld) and read back without the padding; aligned ones,
 * f32 and outputs another kernel reads are not padded. */
static void test_gemm_padded_output(void **state)
{
    (void)state;
    const mc_dtype dts[3] = {MC_F32, MC_F16, MC_BF16};
    const int64_t ns[3] = {37, 1001, 64};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            kir_program *kp = fx_gemm_bias(2, 96, ns[j], 72, dts[i]);
            mc_cuda_gemm_plan plan;
            mc_cuda_gemm_plan_make(kp, 0, &plan);
            assert_true(plan.use_lt && plan.full);
            bool pad = dts[i] != MC_F32 && ns[j] % 8 != 0;
            assert_int_equal(plan.pad_buffer, pad ? 3 : -1); /* y */
            if (pad) {
                assert_int_equal(plan.pad_ld, (ns[j] + 7) / 8 * 8);
                assert_int_equal(plan.pad_rows, 2 * 96);
                assert_int_equal(plan.d.ld, plan.pad_ld);
                assert_int_equal(plan.m, plan.pad_ld); /* the padded rows are computed too */
                assert_int_equal(plan.d.rows, plan.pad_ld);
                assert_true(plan.pad_slack > 0);
            }
            char what[64];
            snprintf(what, sizeof what, "gemm + bias %s N=%lld", mc_dtype_name(dts[i]), (long long)ns[j]);
            run_and_check(kp, what);
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

#ifdef MINIC_HAVE_PASSES
#include <dirent.h>
#include <sys/stat.h>

#include "ir/ir.h"

static bool graph_has_matmul(const mc_graph *g)
{
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == MC_OP_MATMUL || g->nodes[i].op == MC_OP_LINEAR)
            return true;
    return false;
}

/* One example through the public API on the CUDA backend vs mc_graph_eval (float64). */
static void check_example(const char *rel, bool fuse, int cuda_graph)
{
    mc_graph *g;
    if (mc_graph_parse_file(mc_test_src(rel), &g) != MC_OK)
        fail_msg("%s", mc_error_message());
    mc_options opt = mc_options_default();
    opt.backend = MC_BACKEND_CUDA;
    opt.fuse = fuse;
    opt.cuda_graph = cuda_graph;
    opt.quiet = true;
    mc_program *p;
    if (mc_program_compile(g, &opt, &p) != MC_OK)
        fail_msg("%s: %s", rel, mc_error_message());
    assert_int_equal(mc_program_fill_random(p, 3), MC_OK);
    /* the oracle's inputs: the program's own host arrays (dead inputs: zeros) */
    const void **in = calloc((size_t)g->nnodes, sizeof(void *));
    void **zeros = calloc((size_t)g->nnodes, sizeof(void *));
    for (int i = 0; i < g->nnodes; i++) {
        const mc_node *n = &g->nodes[i];
        if (n->op != MC_OP_INPUT && n->op != MC_OP_PARAM)
            continue;
        for (int b = 0; b < p->kp->nbuffers; b++) {
            kir_buffer_kind k = p->kp->buffers[b].kind;
            if (p->kp->buffers[b].node == i && (k == KBUF_INPUT || k == KBUF_PARAM))
                in[i] = p->host[b];
        }
        if (!in[i])
            in[i] = zeros[i] = calloc((size_t)mc_node_numel(n) + 1, mc_dtype_size(n->dtype));
    }
    double **ref = calloc((size_t)g->noutputs, sizeof(double *));
    assert_int_equal(mc_graph_eval(g, in, true, ref), MC_OK);
    for (int run = 0; run < 3; run++) {
        if (mc_program_run(p) != MC_OK)
            fail_msg("%s run %d: %s", rel, run, mc_error_message());
        for (int o = 0; o < g->noutputs; o++) {
            mc_tensor t;
            assert_int_equal(mc_program_output(p, o, &t), MC_OK);
            int64_t n = (int64_t)(t.bytes / mc_dtype_size(t.dtype));
            double *got = malloc((size_t)n * sizeof(double) + 8);
            for (int64_t i = 0; i < n; i++)
                got[i] = mc_load_element(t.data, t.dtype, i);
            double err = mc_test_rel_error(got, ref[o], n);
            double tol = t.dtype == MC_F32 ? (graph_has_matmul(g) ? 1e-4 : 1e-5)
                         : (t.dtype == MC_F16 || t.dtype == MC_BF16) ? 1e-2 : 0;
            if (!(err <= tol))
                fail_msg("%s (%s, cuda graph %d, run %d): output %d: relative error %.3g > %.3g",
                         rel, fuse ? "fused" : "unfused", cuda_graph, run, o, err, tol);
            free(got);
        }
    }
    for (int o = 0; o < g->noutputs; o++)
        free(ref[o]);
    free(ref);
    for (int i = 0; i < g->nnodes; i++)
        free(zeros[i]);
    free(zeros);
    free(in);
    mc_program_free(p);
    mc_graph_free(g);
}

static void test_examples(void **state)
{
    (void)state;
    DIR *d = opendir(mc_test_src("examples"));
    assert_non_null(d);
    struct dirent *e;
    int graphs = 0;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 7 || strcmp(e->d_name + n - 6, ".graph") != 0)
            continue;
        char rel[512];
        snprintf(rel, sizeof rel, "examples/%s", e->d_name);
        for (int fuse = 0; fuse <= 1; fuse++)
            for (int graph = 0; graph <= 1; graph++)
                check_example(rel, fuse, graph);
        graphs++;
    }
    closedir(d);
    assert_true(graphs >= 6);
}

/* Compile and run examples/mlp.graph on cuda in the current cache; outputs into *out. */
static int cuda_compile_run(void **out, size_t *bytes)
{
    mc_graph *g;
    assert_int_equal(mc_graph_parse_file(mc_test_src("examples/mlp.graph"), &g), MC_OK);
    mc_options opt = mc_options_default();
    opt.backend = MC_BACKEND_CUDA;
    opt.quiet = true;
    mc_program *p;
    if (mc_program_compile(g, &opt, &p) != MC_OK)
        fail_msg("compile: %s", mc_error_message());
    assert_int_equal(mc_program_fill_random(p, 5), MC_OK);
    if (mc_program_run(p) != MC_OK)
        fail_msg("run: %s", mc_error_message());
    mc_tensor t;
    assert_int_equal(mc_program_output(p, 0, &t), MC_OK);
    *out = malloc(t.bytes);
    memcpy(*out, t.data, t.bytes);
    *bytes = t.bytes;
    int compiled = p->kernels_compiled;
    mc_program_free(p);
    mc_graph_free(g);
    return compiled;
}

/* Issue 19: a bad CUDA entry was never evicted, so every later run failed. A cached cubin that
 * is verified (its hash is right) but that the driver refuses is evicted and compiled again:
 * the run succeeds, and the next one is served from the cache. */
static void test_refused_cubin_is_evicted(void **state)
{
    (void)state;
    char xdg[4200], dir[4300];
    snprintf(xdg, sizeof xdg, "%s/refused_cubin", mc_test_tmpdir());
    mkdir(xdg, 0700);
    char *saved = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    setenv("XDG_CACHE_HOME", xdg, 1);
    snprintf(dir, sizeof dir, "%s/minic/cuda", xdg);
    void *want, *got;
    size_t want_bytes, got_bytes;
    int cold = cuda_compile_run(&want, &want_bytes);
    assert_true(cold > 0);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int planted = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || strstr(e->d_name, ".tmp"))
            continue;
        char path[4600];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        static unsigned char buf[1 << 22];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        mc_cache_entry entry;
        assert_int_equal(mc_cache_entry_parse(buf, n, &entry), MC_ENTRY_OK);
        char *key = strndup(entry.key, entry.key_size);
        size_t size;
        void *bad = mc_cache_entry_encode(key, "not a cubin", 11, &size); /* a valid hash */
        f = fopen(path, "wb");
        fwrite(bad, 1, size, f);
        fclose(f);
        free(bad);
        free(key);
        planted++;
    }
    closedir(d);
    assert_true(planted > 0);
    assert_int_equal(cuda_compile_run(&got, &got_bytes), cold); /* evicted, recompiled */
    assert_memory_equal(got, want, want_bytes);
    free(got);
    assert_int_equal(cuda_compile_run(&got, &got_bytes), 0); /* good entries again */
    assert_memory_equal(got, want, want_bytes);
    free(got);
    free(want);
    if (saved)
        setenv("XDG_CACHE_HOME", saved, 1);
    free(saved);
}
#endif

/* MINIC_CUDA_BENCH=1: time the fixtures at the benchmark suite's sizes (device-timed medians
 * of the `time` slot) and print a table; the suite's own numbers come from bench/gpu_bench.sh
 * once graphs compile end to end. */
static int bench(void)
{
    /* variants of the tuning knobs ("" = the default) */
    static const struct { const char *unroll, *bps, *red; } var[] = {
        {"", "", ""}};
    printf("%-26s %6s %5s %4s %10s %10s\n", "fixture", "unroll", "bps", "red", "median_us",
           "GB/s");
    for (size_t v = 0; v < sizeof var / sizeof var[0]; v++) {
        setenv("MINIC_CUDA_PW_UNROLL", var[v].unroll, 1);
        setenv("MINIC_CUDA_BLOCKS_PER_SM", var[v].bps, 1);
        setenv("MINIC_CUDA_RED_CHUNKS", var[v].red, 1);
        struct { const char *name; kir_program *kp; double bytes; } w[] = {
            {"copy f32 8192x8192", fx_pw_bench(8192, 8192, true), 2.0 * 8192 * 8192 * 4},
            {"pointwise f32 8192x8192", fx_pw_bench(8192, 8192, false), 2.0 * 8192 * 8192 * 4},
            {"softmax f32 8192x4096", fx_softmax(8192, 4096, MC_F32), 2.0 * 8192 * 4096 * 4},
            {"layernorm f32 8192x4096", fx_layernorm(8192, 4096, MC_F32), 2.0 * 8192 * 4096 * 4},
            {"softmax bf16 98304x1024", fx_softmax(98304, 1024, MC_BF16), 2.0 * 98304 * 1024 * 2},
            {"softmax bf16 [8,12,1k,1k]", fx_softmax_shaped(98304, 1024, MC_BF16, true),
             2.0 * 98304 * 1024 * 2},
            {"same, causal -inf mask", fx_softmax_shaped(98304, 1024, MC_BF16, true), 2.0 * 98304 * 1024 * 2},
        };
        for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
            mc_program *p = make_program(w[i].kp, -1);
            if (strstr(w[i].name, "mask")) /* the upper triangle of each [1024, 1024] is -inf */
                for (int64_t e = 0; e < 98304 * 1024; e++)
                    if (e % 1024 > (e / 1024) % 1024)
                        ((uint16_t *)p->host[0])[e] = 0xff80;
            double us = -1;
            if (p->backend->prepare(p) != MC_OK || p->backend->time(p, 50, &us) != MC_OK) {
                printf("%s: %s\n", w[i].name, mc_error_message());
                return 1;
            }
            printf("%-26s %6s %5s %4s %10.1f %10.1f\n", w[i].name, var[v].unroll, var[v].bps,
                   var[v].red, us, w[i].bytes / us / 1e3);
            free_program(p);
            fx_free(w[i].kp);
        }
    }
    unsetenv("MINIC_CUDA_PW_UNROLL");
    unsetenv("MINIC_CUDA_BLOCKS_PER_SM");
    unsetenv("MINIC_CUDA_RED_CHUNKS");
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
        cmocka_unit_test(test_gemm_padded_output),
        cmocka_unit_test(test_gemv),
        cmocka_unit_test(test_out_of_memory),
#ifdef MINIC_HAVE_PASSES
        cmocka_unit_test(test_examples),
        cmocka_unit_test(test_refused_cubin_is_evicted),
#endif
    };
    return mc_test_run(tests);
}
#else
int main(void)
{
    printf("skipped: no GPU (minic was built without the CUDA backend)\n");
    return 77;
}
#endif
