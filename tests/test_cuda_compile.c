/* Every kernel the CUDA backend can generate compiles with NVRTC — on machines without a GPU.
 *
 * NVRTC needs no driver, so CI compiles (for sm_90 when there is no device) every kernel of
 * the hand-built fixtures (tests/cuda_fixtures.h: pointwise, reductions of every scheme,
 * GEMMs of every plan, in f32, f16 and bf16) and of every example graph once the passes produce
 * kernels; broken CUDA source fails here. The GEMM planner is checked on the same fixtures:
 * which epilogues cuBLASLt takes, which go through scratch, which layouts it cannot take.
 * Prints "skipped: no NVRTC" (exit 77) only where the library is missing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"

#ifdef MINIC_HAVE_CUDA
#include "backends/cuda/cuda.h"
#include "runtime/runtime.h"
#include "cuda_fixtures.h"
#include "cuda_sized.h"

static const mc_cuda_target target = {.sm = 90, .num_sms = 132};

/* Compile every rendered kernel of plans (kp's) with NVRTC. */
static void compile_plans(const kir_program *kp, const mc_cuda_kernel_plan *plans)
{
    mc_status st;
    const char **srcs = calloc((size_t)kp->nkernels + 1, sizeof(char *));
    const char **entries = calloc((size_t)kp->nkernels + 1, sizeof(char *));
    void **cubins = calloc((size_t)kp->nkernels + 1, sizeof(void *));
    size_t *sizes = calloc((size_t)kp->nkernels + 1, sizeof(size_t));
    assert_true(srcs && entries && cubins && sizes);
    int n = 0;
    for (int i = 0; i < kp->nkernels; i++)
        if (plans[i].has_code) {
            srcs[n] = plans[i].code.src.data;
            entries[n] = plans[i].code.entry;
            n++;
        }
    int compiled;
    st = mc_cuda_compile(srcs, entries, n, target.sm, NULL, NULL, cubins, sizes, &compiled);
    if (st != MC_OK) {
        for (int i = 0; i < n; i++)
            fprintf(stderr, "---- %s\n%s\n", entries[i], srcs[i]);
        fail_msg("%s", mc_error_message());
    }
    for (int i = 0; i < n; i++) {
        assert_non_null(cubins[i]);
        assert_true(sizes[i] > 100);
        free(cubins[i]);
    }
    free(srcs);
    free(entries);
    free(cubins);
    free(sizes);
}

/* Plan, render and compile every kernel of kp; returns the plans (caller frees). With `sized`
 * (a symbolic kernel list, kp its binding to `values`): every kernel rendered from it with its
 * sizes read when it runs, none for this binding alone. */
static mc_cuda_kernel_plan *compile_all_sized(const kir_program *kp, const kir_program *sized, const int64_t *values)
{
    int *align = calloc((size_t)kp->nbuffers + 1, sizeof(int));
    assert_non_null(align);
    mc_cuda_buffer_align(kp, align);
    mc_cuda_kernel_plan *plans;
    int specialized = 0;
    char why[200] = "";
    mc_status st = sized ? mc_cuda_plan_program_sized(kp, sized, values, &target, align, &plans, &specialized, why,
                                                      sizeof why)
                         : mc_cuda_plan_program(kp, &target, align, &plans);
    if (st != MC_OK)
        fail_msg("%s", mc_error_message());
    if (specialized != 0)
        fail_msg("%d kernels rendered for one binding (%s)", specialized, why);
    free(align);
    compile_plans(kp, plans);
    return plans;
}

static mc_cuda_kernel_plan *compile_all(const kir_program *kp) { return compile_all_sized(kp, NULL, NULL); }

static void test_pointwise(void **state)
{
    (void)state;
    kir_program *kp = fx_pointwise(64, 256);
    mc_cuda_kernel_plan *pl = compile_all(kp);
    /* x f32 and b bf16 contiguous in the innermost dim: 16-byte f32 vectors, width 4 */
    assert_int_equal(pl[0].code.vec, 4);
    /* the transposed read can't be vectorized, but the f32 store can */
    assert_string_equal(pl[1].code.scheme, "pointwise");
    assert_non_null(strstr(pl[0].code.src.data, "mc_vec<float, 4>"));
    mc_cuda_plans_free(pl, kp->nkernels);
    fx_free(kp);
    /* an odd innermost size forces scalar accesses */
    kp = fx_pointwise(3, 7);
    pl = compile_all(kp);
    assert_int_equal(pl[0].code.vec, 1);
    mc_cuda_plans_free(pl, kp->nkernels);
    fx_free(kp);
}

static void test_reductions(void **state)
{
    (void)state;
    const mc_dtype dts[3] = {MC_F32, MC_F16, MC_BF16};
    for (int i = 0; i < 3; i++) {
        kir_program *kp = fx_softmax(64, 256, dts[i]);
        mc_cuda_kernel_plan *pl = compile_all(kp);
        assert_string_equal(pl[0].code.scheme, "row-per-warp");
        /* the row is read from memory once: later loop blocks use the registers */
        assert_non_null(strstr(pl[0].code.src.data, "rc0["));
        mc_cuda_plans_free(pl, kp->nkernels);
        fx_free(kp);
        kp = fx_layernorm(16, 4096, dts[i]);
        pl = compile_all(kp);
        assert_string_equal(pl[0].code.scheme, "row-per-block");
        assert_non_null(strstr(pl[0].code.src.data, "__syncthreads"));
        mc_cuda_plans_free(pl, kp->nkernels);
        fx_free(kp);
    }
    kir_program *kp = fx_sum_broadcast(50, 300);
    mc_cuda_kernel_plan *pl = compile_all(kp);
    mc_cuda_plans_free(pl, kp->nkernels);
    fx_free(kp);
    kp = fx_full_reduce(100, 1000);
    pl = compile_all(kp);
    mc_cuda_plans_free(pl, kp->nkernels);
    fx_free(kp);
}

static void test_gemms(void **state)
{
    (void)state;
    const mc_dtype dts[3] = {MC_F32, MC_F16, MC_BF16};
    for (int i = 0; i < 3; i++) {
        kir_program *kp = fx_gemms(3, 40, 24, 32, dts[i]);
        mc_cuda_kernel_plan *pl = compile_all(kp);
        /* 0: bias + gelu_tanh, all in cuBLASLt for f16/bf16; in f32 cuBLASLt's approximate GELU
         * would cost accuracy, so the generated epilogue kernel computes it; w^T is a
         * transposed operand */
        assert_true(pl[0].gemm.use_lt);
        if (dts[i] == MC_F32) {
            assert_false(pl[0].gemm.full);
            assert_int_equal(pl[0].gemm.epi, MC_LT_EPI_DEFAULT);
            assert_true(pl[0].has_code);
            assert_non_null(strstr(pl[0].code.src.data, "mc_gelu_tanh("));
            assert_non_null(strstr(pl[0].gemm.why_not_full, "gelu_tanh in f32"));
        } else {
            assert_true(pl[0].gemm.full);
            assert_int_equal(pl[0].gemm.epi, MC_LT_EPI_GELU_BIAS);
            assert_false(pl[0].has_code);
        }
        assert_true(pl[0].gemm.a.trans);
        assert_false(pl[0].gemm.b.trans);
        /* shared weights over a contiguous batch: one GEMM with the batch folded into M */
        assert_int_equal(pl[0].gemm.batch, 1);
        assert_int_equal(pl[0].gemm.n, 3 * 40);
        /* 1: bias then a residual: BIAS with C, beta 1 */
        assert_true(pl[1].gemm.use_lt && pl[1].gemm.full);
        assert_int_equal(pl[1].gemm.epi, MC_LT_EPI_BIAS);
        assert_true(pl[1].gemm.beta == 1.0f);
        /* 2: two stores: scratch and an epilogue kernel */
        assert_true(pl[2].gemm.use_lt);
        assert_false(pl[2].gemm.full);
        assert_true(pl[2].has_code);
        assert_int_equal(pl[2].gemm.scratch_elems, 3 * 40 * 24);
        /* 3: B broadcast along K: a generated GEMM */
        assert_false(pl[3].gemm.use_lt);
        assert_string_equal(pl[3].code.scheme, "gemm-tiled");
        mc_cuda_plans_free(pl, kp->nkernels);
        fx_free(kp);
        /* 26 rows: small enough for the warp-dot kernel, except the K-broadcast layout */
        kp = fx_gemms(2, 13, 70, 300, dts[i]);
        pl = compile_all(kp);
        for (int g = 0; g < 3; g++) {
            assert_false(pl[g].gemm.use_lt);
            assert_true(pl[g].gemm.small);
            assert_string_equal(pl[g].code.scheme, "gemm-dot");
            assert_non_null(strstr(pl[g].code.src.data, "__shfl_xor_sync"));
        }
        assert_false(pl[3].gemm.small);
        assert_string_equal(pl[3].code.scheme, "gemm-tiled");
        mc_cuda_plans_free(pl, kp->nkernels);
        fx_free(kp);
    }
}

/* GEMMs of few rows run as the GEMV kernel (cuda_gemm.c, GEMV_MAX_ROWS): both weight layouts,
 * every float dtype, every epilogue of fx_gemv (bias + gelu, residual, two stores of other
 * dtypes, a strided A, a batched B), rows 1..16 with the batch folded in, N and K that 16-byte
 * vectors don't divide; all compile. MINIC_NO_GEMV=1 gives back the previous plans. */
static void test_gemv(void **state)
{
    (void)state;
    const mc_dtype dts[3] = {MC_F32, MC_F16, MC_BF16};
    /* B, M, N, K, which kernels of fx_gemv (every one compiled with NVRTC: a few sizes get
     * all of them) */
    const int64_t sizes[][5] = {{1, 1, 3072, 768, 0x3f}, {1, 5, 37, 75, 0x3f}, {2, 4, 100, 64, 0x21},
                                {1, 2, 768, 3072, 1},    {1, 16, 200, 96, 1},  {2, 1, 50257, 768, 1},
                                {1, 1, 3, 1, 1}};
    for (int i = 0; i < 3; i++)
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
            for (int trans = 0; trans <= 1; trans++) {
                const int64_t *sz = sizes[z];
                kir_program *kp = fx_gemv(sz[0], sz[1], sz[2], sz[3], dts[i], trans, (unsigned)sz[4]);
                mc_cuda_kernel_plan *pl = compile_all(kp);
                for (int g = 0; g < kp->nkernels; g++) {
                    const mc_cuda_gemm_plan *p = &pl[g].gemm;
                    if (!p->gemv)
                        fail_msg("%s, %lld x %lld x %lld x %lld, trans %d, kernel %d: not a GEMV",
                                 mc_dtype_name(dts[i]), (long long)sz[0], (long long)sz[1],
                                 (long long)sz[2], (long long)sz[3], trans, g);
                    assert_false(p->use_lt);
                    assert_true(pl[g].has_code);
                    /* B is read along N where it is contiguous there and N > 1 (the
                     * transposed [N, 1] weight of K = 1 too), else along K */
                    bool n_contig = (trans ? sz[3] : 1) == 1 && sz[2] > 1;
                    assert_int_equal(p->gemv_t, !n_contig);
                    bool batched = strstr(kp->kernels[g].name, "batched") && sz[0] > 1;
                    assert_int_equal(p->gemv_fold, !batched);
                    assert_int_equal(p->gemv_rows, batched ? sz[1] : sz[0] * sz[1]);
                    assert_string_equal(pl[g].code.scheme, p->gemv_t ? "gemv-t" : "gemv-n");
                    mc_strbuf sb = {0};
                    mc_cuda_gemm_plan_describe(p, &sb);
                    assert_non_null(strstr(sb.data, "generated GEMV"));
                    mc_sb_free(&sb);
                    /* B in 16-byte vectors where its extent along the contiguous axis allows */
                    int per = 16 / (int)mc_dtype_size(dts[i]);
                    int64_t along = p->gemv_t ? sz[3] : sz[2];
                    char vec[64];
                    snprintf(vec, sizeof vec, "mc_vec<%s, %d>",
                             dts[i] == MC_F32 ? "float" : dts[i] == MC_F16 ? "__half" : "__nv_bfloat16",
                             per);
                    if (along % per == 0)
                        assert_non_null(strstr(pl[g].code.src.data, vec));
                    else
                        assert_null(strstr(pl[g].code.src.data, vec));
                    assert_true(pl[g].code.grid[0] >= 1 && pl[g].code.grid[1] >= 1);
                }
                /* the epilogues are inlined */
                assert_non_null(strstr(pl[0].code.src.data, "mc_gelu("));
                if (sz[4] & 4)
                    assert_non_null(strstr(pl[2].code.src.data, "mc_gelu_tanh("));
                mc_cuda_plans_free(pl, kp->nkernels);
                fx_free(kp);
            }
    /* 17 rows: the previous plans; so with MINIC_NO_GEMV=1 at 8 rows (the weight [K, N] goes to
     * cuBLASLt, the transposed one, both operands along K, to the warp-dot kernel) */
    kir_program *kp = fx_gemv(1, 17, 256, 64, MC_BF16, false, 1);
    mc_cuda_kernel_plan *pl = compile_all(kp);
    assert_false(pl[0].gemm.gemv);
    assert_true(pl[0].gemm.use_lt);
    mc_cuda_plans_free(pl, kp->nkernels);
    fx_free(kp);
    /* the LM head at 3 or 8 rows (a weight of 2^24 elements or more): cuBLASLt (GEMV_BIG_*) */
    for (int rows = 3; rows <= 8; rows += 5) {
        kp = fx_gemv(rows, 1, 50257, 768, MC_BF16, true, 1);
        mc_cuda_gemm_plan plan;
        mc_cuda_gemm_plan_make(kp, 0, &plan);
        assert_false(plan.gemv);
        assert_true(plan.use_lt);
        fx_free(kp);
    }
    setenv("MINIC_NO_GEMV", "1", 1);
    for (int trans = 0; trans <= 1; trans++) {
        kp = fx_gemv(2, 4, 256, 64, MC_BF16, trans, 1);
        pl = compile_all(kp);
        assert_false(pl[0].gemm.gemv);
        assert_int_equal(pl[0].gemm.use_lt, !trans);
        assert_int_equal(pl[0].gemm.small, trans);
        mc_cuda_plans_free(pl, kp->nkernels);
        fx_free(kp);
    }
    unsetenv("MINIC_NO_GEMV");
}

static void test_compile_error_names_source(void **state)
{
    (void)state;
    const char *src = "extern \"C\" __global__ void broken_kernel_0(float *p) { p[0] = nope; }\n";
    const char *entry = "broken_kernel_0";
    void *cubin;
    size_t size;
    int compiled;
    mc_status st = mc_cuda_compile(&src, &entry, 1, 90, NULL, NULL, &cubin, &size, &compiled);
    assert_int_equal(st, MC_ERR_SYSTEM);
    const char *msg = mc_error_message();
    assert_non_null(strstr(msg, "broken_kernel_0"));
    assert_non_null(strstr(msg, "nope"));      /* NVRTC's log */
    const char *path = strstr(msg, "source: ");
    assert_non_null(path);
    char file[512];
    assert_int_equal(sscanf(path + 8, "%511[^)]", file), 1);
    FILE *f = fopen(file, "r");
    assert_non_null(f); /* the failing source was saved there */
    fclose(f);
    remove(file);
}

static void test_cache_hit(void **state)
{
    (void)state;
    char src[256];
    /* a source unique to this run, so the first compile misses */
    snprintf(src, sizeof src, "extern \"C\" __global__ void cache_probe_0(float *p) "
                              "{ p[0] = %.17g; }\n", mc_now_ms());
    const char *s = src, *entry = "cache_probe_0";
    void *cubin;
    size_t size;
    int compiled;
    assert_int_equal(mc_cuda_compile(&s, &entry, 1, 90, NULL, NULL, &cubin, &size, &compiled), MC_OK);
    assert_int_equal(compiled, 1);
    free(cubin);
    assert_int_equal(mc_cuda_compile(&s, &entry, 1, 90, NULL, NULL, &cubin, &size, &compiled), MC_OK);
    assert_int_equal(compiled, 0);
    free(cubin);
}

/* NVRTC's failure dump goes to a shared directory ($TMPDIR): a symlink planted at the name it
 * used to take (minic-ENTRY-HASH.cu), or at the next names of the new scheme, is never written
 * through; the dump is a fresh file of ours, mode 0600. */
static void test_failure_dump_never_follows_symlinks(void **state)
{
    (void)state;
    char tmpdir[4200], victim[4300], link[4400];
    snprintf(tmpdir, sizeof tmpdir, "%s/shared_tmp", mc_test_tmpdir());
    mkdir(tmpdir, 0777);
    snprintf(victim, sizeof victim, "%s/victim.txt", mc_test_tmpdir());
    FILE *v = fopen(victim, "w");
    fputs("precious\n", v);
    fclose(v);
    const char *src = "extern \"C\" __global__ void broken_kernel_1(float *p) { p[0] = nope; }\n";
    const char *entry = "broken_kernel_1";
    unsigned long long h = (unsigned long long)mc_hash64(src, strlen(src), 0);
    snprintf(link, sizeof link, "%s/minic-%s-%016llx.cu", tmpdir, entry, h);
    unlink(link);
    assert_int_equal(symlink(victim, link), 0);
    for (int n = 0; n < 16; n++) { /* one kernel: compiled on this thread */
        snprintf(link, sizeof link, "%s/minic-%s-%016llx-%ld-%ld-%d.cu", tmpdir, entry, h,
                 (long)getpid(), (long)gettid(), n);
        unlink(link);
        assert_int_equal(symlink(victim, link), 0);
    }
    const char *old_tmpdir = getenv("TMPDIR");
    char *saved = old_tmpdir ? strdup(old_tmpdir) : NULL;
    setenv("TMPDIR", tmpdir, 1);
    void *cubin;
    size_t size;
    int compiled;
    assert_int_equal(mc_cuda_compile(&src, &entry, 1, 90, NULL, NULL, &cubin, &size, &compiled),
                     MC_ERR_SYSTEM);
    if (saved)
        setenv("TMPDIR", saved, 1);
    else
        unsetenv("TMPDIR");
    free(saved);
    FILE *f = fopen(victim, "r");
    char text[64] = "";
    assert_non_null(fgets(text, sizeof text, f));
    fclose(f);
    assert_string_equal(text, "precious\n");
    const char *at = strstr(mc_error_message(), "source: ");
    assert_non_null(at);
    char file[4400];
    assert_int_equal(sscanf(at + 8, "%4399[^)]", file), 1);
    struct stat st;
    assert_int_equal(lstat(file, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(st.st_uid, geteuid());
    remove(file);
}

/* A source's cache key changes with each thing the cubin depends on. */
static void test_cache_key(void **state)
{
    (void)state;
    const char *opts[5] = {"--gpu-architecture=sm_90", "--include-path=/usr/local/cuda/include",
                           "--std=c++17", "--fmad=true", "--device-as-default-execution-space"};
    const char *src = "extern \"C\" __global__ void k(float *p) { p[0] = 1; }\n";
    char *base = mc_cuda_cache_key(13, 0, opts, 5, src);
    assert_non_null(base);
    assert_non_null(strstr(base, "minic " MINIC_VERSION_STRING " "));
    char *keys[8];
    keys[0] = mc_cuda_cache_key(13, 1, opts, 5, src);  /* NVRTC's version */
    keys[1] = mc_cuda_cache_key(14, 0, opts, 5, src);
    keys[2] = mc_cuda_cache_key(13, 0, opts, 5, "extern \"C\" __global__ void k(float *p) { p[0] = 2; }\n");
    const char *changed[5] = {"--gpu-architecture=sm_80", "--include-path=/opt/cuda/include",
                              "--std=c++20", "--fmad=false", "--relocatable-device-code=true"};
    for (int i = 0; i < 5; i++) { /* every option, the architecture first */
        const char *o[5];
        memcpy(o, opts, sizeof o);
        o[i] = changed[i];
        keys[3 + i] = mc_cuda_cache_key(13, 0, o, 5, src);
    }
    for (int i = 0; i < 8; i++) {
        assert_non_null(keys[i]);
        if (!strcmp(keys[i], base))
            fail_msg("change %d gives the same key", i);
        for (int j = 0; j < i; j++)
            assert_string_not_equal(keys[i], keys[j]);
    }
    for (int i = 0; i < 8; i++)
        free(keys[i]);
    free(base);
}

/* A cached cubin is evicted by mc_cuda_cache_evict (what the backend does when the driver
 * refuses it), and the next compile stores a good one again. */
static void test_cache_evict(void **state)
{
    (void)state;
    char src[256];
    snprintf(src, sizeof src, "extern \"C\" __global__ void evict_probe_0(float *p) "
                              "{ p[0] = %.17g; }\n", mc_now_ms());
    const char *s = src, *entry = "evict_probe_0";
    void *cubin;
    size_t size;
    int compiled;
    assert_int_equal(mc_cuda_compile(&s, &entry, 1, 90, NULL, NULL, &cubin, &size, &compiled), MC_OK);
    assert_int_equal(compiled, 1);
    free(cubin);
    mc_cuda_cache_evict(&s, 1, 80); /* another architecture's entry: this one stays */
    assert_int_equal(mc_cuda_compile(&s, &entry, 1, 90, NULL, NULL, &cubin, &size, &compiled), MC_OK);
    assert_int_equal(compiled, 0);
    free(cubin);
    mc_cuda_cache_evict(&s, 1, 90);
    assert_int_equal(mc_cuda_compile(&s, &entry, 1, 90, NULL, NULL, &cubin, &size, &compiled), MC_OK);
    assert_int_equal(compiled, 1);
    free(cubin);
    assert_int_equal(mc_cuda_compile(&s, &entry, 1, 90, NULL, NULL, &cubin, &size, &compiled), MC_OK);
    assert_int_equal(compiled, 0);
    free(cubin);
}

#ifdef MINIC_HAVE_PASSES
#include <dirent.h>

#include "passes/passes.h"

/* Every kernel of every example graph, fused and unfused, renders and compiles. */
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
        mc_graph *g;
        if (mc_graph_parse_file(mc_test_src(rel), &g) != MC_OK)
            fail_msg("%s", mc_error_message());
        for (int fuse = 0; fuse <= 1; fuse++) {
            mc_compile_options co = {.fuse = fuse, .plan_memory = true, .verify = true};
            kir_program *kp;
            if (mc_compile_kernels(g, &co, &kp) != MC_OK)
                fail_msg("%s: %s", rel, mc_error_message());
            mc_cuda_kernel_plan *pl = compile_all(kp);
            mc_cuda_plans_free(pl, kp->nkernels);
            kir_program_free(kp);
        }
        mc_graph_free(g);
        graphs++;
    }
    closedir(d);
    assert_true(graphs >= 6);
}

/* Symbolic programs (issue 23) compiled once: the kernels of update, argmax/argmin, cumsum (a
 * scan), layernorm over a symbolic axis and slices from its end (gathers) render with their
 * sizes read when they run, in each dtype they take, and compile (bound to B=3, T=5). */
static void test_symbolic_kernels(void **state)
{
    (void)state;
    static const char *const graphs[] = {
        "input c : %s[B, 2, T<=64, 8]\ninput n : %s[B, 2, 1, 8]\ninput p : i32[]\n"
        "u = update(c, n, p, axis=2)\nm = argmax(c, axis=2)\nk = argmin(c, axis=3, keepdim=true)\n"
        "s = cumsum(c, axis=2)\nr = cumsum(c, axis=3)\noutput u, m, k, s, r\n",
        "input x : %s[B, T<=64]\ninput w : %s[T]\ninput v : %s[B, 6]\ny = layernorm(x, w, w, eps=0)\n"
        "e = slice(x, axis=1, start=-2)\nb = slice(v, axis=1, step=-2)\nz = slice(x, axis=1, end=2)\n"
        "output y, e, b, z\n",
    };
    static const char *const dtypes[] = {"f32", "f16", "bf16"};
    const int64_t values[] = {3, 5};
    for (size_t i = 0; i < sizeof graphs / sizeof graphs[0]; i++)
        for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
            char text[1024];
            snprintf(text, sizeof text, graphs[i], dtypes[d], dtypes[d], dtypes[d]);
            mc_graph *g = NULL;
            if (mc_graph_parse_string("sym.graph", text, &g) != MC_OK)
                fail_msg("%s", mc_error_message());
            char refused[MC_COMPILE_REFUSED] = "";
            mc_compile_options co = {.fuse = true, .plan_memory = true, .verify = true, .symbolic = true,
                                     .refused = refused};
            kir_program *sized = NULL, *kp;
            if (mc_compile_kernels(g, &co, &sized) != MC_OK || !sized)
                fail_msg("%s: %s %s", text, mc_error_message(), refused);
            assert_non_null(kp = kir_bind(sized, values));
            mc_plan_memory(kp, true);
            mc_cuda_plans_free(compile_all_sized(kp, sized, values), kp->nkernels);
            kir_program_free(kp);
            kir_program_free(sized);
            mc_graph_free(g);
        }
}

/* The operators of docs/FORMAT.md §2's newer rows (issue 20) render and compile, fused and unfused, in
 * every dtype they take. */
static void test_more_operators(void **state)
{
    (void)state;
    static const char *const graphs[] = {
        "graph a\ninput x : %s[7, 33]\na = floor(x)\nb = ceil(x)\nc = round(x)\nd = sign(x)\n"
        "e = softplus(x)\nf = leaky_relu(x, alpha=0.2)\ng = clip(x, min=-0.5, max=0.5)\n"
        "h = clip(x, max=1)\ns1 = add(a, b)\ns2 = add(c, d)\ns3 = add(e, f)\ns4 = add(g, h)\n"
        "t1 = add(s1, s2)\nt2 = add(s3, s4)\ny = add(t1, t2)\noutput y\n",
        "graph a\ninput x : i32[7, 33]\nd = sign(x)\ng = clip(x, min=-3, max=5)\ny = add(d, g)\noutput y\n",
        "graph a\ninput x : %s[7, 33]\ninput i : i32[7, 33]\np = gt(x, 0)\nq = lt(x, 0.5)\na = and(p, q)\n"
        "o = or(p, q)\ne = xor(a, o)\nn = not(e)\nw = where(n, i, 3)\nr = slice(x, axis=1, step=-1)\n"
        "s = slice(x, axis=0, start=5, end=1, step=-2)\nt = slice(w, axis=1, start=1, step=3)\nu = add(r, x)\n"
        "output n, w, s, t, u\n",
        "graph a\ninput x : %s[7, 33]\ninput i : i32[7, 33]\na = argmax(x, axis=1)\nb = argmin(x, axis=0, keepdim=true)\n"
        "c = argmax(i, axis=-1)\nd = cumsum(x, axis=1)\ne = cumsum(i, axis=0)\nf = relu(d)\noutput a, b, c, e, f\n",
        /* cumsum as a scan (a thread per row walking it): vector loads along a long row with a
         * prologue and an epilogue, a reversed exclusive one, one along a middle axis, i32 */
        "graph a\ninput x : %s[4, 4096]\ninput i : i32[3, 64, 5]\ne = exp(x)\nc = cumsum(e, axis=1)\ny = mul(c, 0.5)\n"
        "r = slice(x, axis=1, step=-1)\nq = cumsum(r, axis=-1)\nt = slice(q, axis=1, step=-1)\nz = sub(t, x)\n"
        "m = cumsum(i, axis=1)\nn = cumsum(x, axis=0)\noutput y, z, m, n\n",
        "graph a\ninput x : %s[2, 4, 9, 8]\nparam w : %s[6, 2, 3, 3]\nparam b : %s[6]\nparam s : %s[4]\n"
        "c = conv(x, w, b, stride=[2, 1], padding=[1, 1], dilation=[1, 2], groups=2)\nr = relu(c)\n"
        "m = maxpool(x, kernel=[3, 3], stride=[2, 2], padding=[1, 1])\na = avgpool(x, kernel=[2, 3], padding=[1, 1])\n"
        "p = pad(x, pads=[0, 0, 1, 0, 0, 1, 0, 2], value=0.5)\nn = batchnorm(x, s, s, s, s)\noutput r, m, a, p, n\n",
        /* batchnorm folded into the conv before it (passes/fold.c): the folded weights' kernels */
        "graph a\ninput x : %s[2, 4, 9, 8]\nparam w : %s[6, 4, 3, 3]\nparam b : %s[6]\nparam s : %s[6]\n"
        "c = conv(x, w, b, padding=[1, 1])\nn = batchnorm(c, s, s, s, s)\nr = relu(n)\noutput r\n",
        /* gather: an embedding plus a position embedding (one kernel, vector rows), a gather
         * along a middle axis with strided indices, one in a reduction's loop and row block */
        "graph a\ninput ids : i32[4, 16]\nparam wte : %s[50, 64]\nparam wpe : %s[16, 64]\n"
        "pos = iota(shape=[4, 16], axis=1)\nt = gather(wte, ids)\np = gather(wpe, pos)\ne = add(t, p)\n"
        "k = gather(wte, ids, axis=-2)\nj = transpose(ids)\nm = gather(wpe, j, axis=0)\n"
        "s = sum(m, axis=-1)\nq = gather(wte, 3)\noutput e, k, m, s, q\n",
        /* update (a composite: a gather of new and a where over the cache), at a run-time pos
         * and at a number, along a middle and the last axis */
        "graph a\ninput c : %s[2, 8, 16]\ninput n : %s[2, 1, 16]\ninput m : %s[2, 8, 3]\ninput p : i32[]\n"
        "y = update(c, n, p, axis=1)\nz = update(c, m, 13, axis=-1)\noutput y, z\n",
    };
    static const char *const dtypes[] = {"f32", "f16", "bf16"};
    int compiled = 0;
    for (size_t i = 0; i < sizeof graphs / sizeof graphs[0]; i++)
        for (int t = 0; t < 3; t++) {
            char text[2048];
            snprintf(text, sizeof text, graphs[i], dtypes[t], dtypes[t], dtypes[t], dtypes[t]);
            mc_graph *g;
            if (mc_graph_parse_string("a.graph", text, &g) != MC_OK)
                fail_msg("%s\n%s", mc_error_message(), text);
            for (int fuse = 0; fuse <= 1; fuse++) {
                mc_compile_options co = {.fuse = fuse, .plan_memory = true, .verify = true};
                kir_program *kp;
                if (mc_compile_kernels(g, &co, &kp) != MC_OK)
                    fail_msg("%s\n%s", mc_error_message(), text);
                mc_cuda_kernel_plan *pl = compile_all(kp);
                compiled += kp->nkernels;
                mc_cuda_plans_free(pl, kp->nkernels);
                kir_program_free(kp);
            }
            mc_graph_free(g);
        }
    assert_true(compiled > 20);
}

/* f16/bf16 convs as the implicit GEMM on tensor cores (mc_compile_options.conv_implicit, the
 * cuda backend's choice): ResNet-18's shapes (a 3x3 layer of each width, the 7x7 stem, the 1x1
 * stride-2 downsample) and odd ones (dilation, asymmetric padding and strides, 1-D, K not a
 * multiple of 8: weights element by element), each one kernel with its bias, residual and relu,
 * category conv, planned as the conv kernel with the tile mc_cuda_conv_tile picks; compiled
 * fused (the first also unfused). A grouped conv keeps the gather and cuBLASLt (no conv plan). */
static void test_implicit_conv_kernels(void **state)
{
    (void)state;
    /* x [n, c, h, w], w [co, c, kh, kw], stride, padding, dilation (per axis), residual */
    static const struct {
        int64_t n, c, h, w, co, kh, kw, s0, s1, p0, p1, d0, d1;
        bool residual;
        int bm, bn; /* the tile expected on 132 SMs */
    } cases[] = {
        {32, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, true, 64, 128},      /* layer 1 */
        {32, 128, 28, 28, 128, 3, 3, 1, 1, 1, 1, 1, 1, false, 64, 128},  /* layer 2 */
        {32, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1, 1, 1, true, 64, 64},    /* layer 3 */
        {32, 256, 14, 14, 512, 3, 3, 2, 2, 1, 1, 1, 1, false, 64, 32},   /* into layer 4 */
        {32, 3, 224, 224, 64, 7, 7, 2, 2, 3, 3, 1, 1, false, 64, 128},   /* the stem */
        {32, 64, 56, 56, 128, 1, 1, 2, 2, 0, 0, 1, 1, false, 64, 128},   /* downsample */
        {512, 64, 56, 56, 256, 3, 3, 1, 1, 1, 1, 1, 1, false, 128, 128}, /* big enough for 128x128 */
        {2, 20, 15, 14, 40, 3, 3, 2, 2, 1, 1, 1, 1, true, 64, 32},       /* K = 180 */
        {2, 8, 12, 12, 24, 3, 3, 1, 1, 2, 2, 2, 2, false, 64, 32},       /* dilated */
        {2, 8, 9, 17, 20, 3, 5, 2, 1, 1, 0, 1, 3, true, 64, 32},         /* asymmetric */
        {32, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1, 1, 1, true, 64, 32},      /* layer 4 */
    };
    static const char *const dtypes[] = {"f16", "bf16"};
    int convs = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int t = 0; t < 2; t++) {
            /* (NVRTC is slow: both dtypes for every third case, one for the others) */
            if (i % 3 != 0 && t != (int)(i % 2))
                continue;
            const char *dt = dtypes[t];
            char text[2048];
            int64_t oh = (cases[i].h + 2 * cases[i].p0 - cases[i].d0 * (cases[i].kh - 1) - 1) / cases[i].s0 + 1;
            int64_t ow = (cases[i].w + 2 * cases[i].p1 - cases[i].d1 * (cases[i].kw - 1) - 1) / cases[i].s1 + 1;
            snprintf(text, sizeof text,
                     "graph a\ninput x : %s[%lld, %lld, %lld, %lld]\nparam w : %s[%lld, %lld, %lld, %lld]\n"
                     "param b : %s[%lld]\ninput r : %s[%lld, %lld, %lld, %lld]\n"
                     "y = conv(x, w, b, stride=[%lld, %lld], padding=[%lld, %lld], dilation=[%lld, %lld])\n"
                     "a = %s\nz = relu(a)\noutput z\n",
                     dt, (long long)cases[i].n, (long long)cases[i].c, (long long)cases[i].h, (long long)cases[i].w,
                     dt, (long long)cases[i].co, (long long)cases[i].c, (long long)cases[i].kh, (long long)cases[i].kw,
                     dt, (long long)cases[i].co, dt, (long long)cases[i].n, (long long)cases[i].co, (long long)oh,
                     (long long)ow, (long long)cases[i].s0, (long long)cases[i].s1, (long long)cases[i].p0,
                     (long long)cases[i].p1, (long long)cases[i].d0, (long long)cases[i].d1,
                     cases[i].residual ? "add(y, r)" : "mul(y, 1)");
            mc_graph *g;
            if (mc_graph_parse_string("a.graph", text, &g) != MC_OK)
                fail_msg("%s\n%s", mc_error_message(), text);
            for (int fuse = 1; fuse >= (i == 0 ? 0 : 1); fuse--) { /* unfused: the first case */
                mc_compile_options co = {.fuse = fuse, .plan_memory = true, .verify = true, .conv_gather = true,
                                         .conv_implicit = true};
                kir_program *kp;
                if (mc_compile_kernels(g, &co, &kp) != MC_OK)
                    fail_msg("%s\n%s", mc_error_message(), text);
                mc_cuda_kernel_plan *pl = compile_all(kp);
                int nconv = 0;
                for (int k = 0; k < kp->nkernels; k++) {
                    if (!pl[k].is_gemm || !pl[k].gemm.conv)
                        continue;
                    nconv++;
                    const kir_kernel *kk = &kp->kernels[k];
                    assert_true(kk->gemm.conv.on);
                    assert_string_equal(pl[k].code.scheme, "conv-implicit-mma");
                    assert_false(pl[k].gemm.use_lt);
                    assert_non_null(strstr(pl[k].code.src.data, "mma.sync.aligned.m16n8k16"));
                    assert_int_equal(kk->flops >= 2 * kk->gemm.m * kk->gemm.n * kk->gemm.k * cases[i].n, 1);
                    if (fuse) { /* conv, bias, residual (or the mul), relu: one kernel */
                        assert_int_equal(kp->nkernels, 1);
                        assert_int_equal(pl[k].gemm.conv_bm, cases[i].bm);
                        assert_int_equal(pl[k].gemm.conv_bn, cases[i].bn);
                        /* K split only where even 64x32 tiles are fewer than 2 per SM */
                        assert_int_equal(pl[k].gemm.conv_split, 1);
                        int64_t out = cases[i].n * cases[i].co * oh * ow, esz = 2;
                        int64_t xb = cases[i].n * cases[i].c * cases[i].h * cases[i].w;
                        int64_t wb = cases[i].co * cases[i].c * cases[i].kh * cases[i].kw;
                        /* x read once (not its im2col), w, b, r (if any), z */
                        assert_int_equal(kk->bytes, esz * (xb + wb + cases[i].co + out * (cases[i].residual ? 2 : 1)));
                    }
                }
                assert_int_equal(nconv, 1);
                convs++;
                mc_cuda_plans_free(pl, kp->nkernels);
                kir_program_free(kp);
            }
            mc_graph_free(g);
        }
    assert_int_equal(convs, 17); /* 15 fused, 2 unfused */
    /* K split three ways (MINIC_CUDA_CONV_SPLITK): the zeroed f32 region is a parameter, as big
     * as the output in f32 plus a counter per tile */
    mc_graph *g;
    if (mc_graph_parse_string("a.graph",
                              "graph a\ninput x : bf16[32, 512, 7, 7]\nparam w : bf16[512, 512, 3, 3]\n"
                              "param b : bf16[512]\ny = conv(x, w, b, padding=[1, 1])\nz = relu(y)\noutput z\n",
                              &g) != MC_OK)
        fail_msg("%s", mc_error_message());
    setenv("MINIC_CUDA_CONV_SPLITK", "3", 1);
    {
        mc_compile_options co = {.fuse = true, .plan_memory = true, .verify = true, .conv_gather = true,
                                 .conv_implicit = true};
        kir_program *kp;
        assert_int_equal(mc_compile_kernels(g, &co, &kp), MC_OK);
        mc_cuda_kernel_plan *pl = compile_all(kp);
        assert_int_equal(kp->nkernels, 1);
        assert_int_equal(pl[0].gemm.conv_split, 3);
        int64_t tiles = (512 / pl[0].gemm.conv_bm) * ((32 * 49 + pl[0].gemm.conv_bn - 1) / pl[0].gemm.conv_bn);
        assert_int_equal(pl[0].gemm.conv_ws_bytes, (512 * 32 * 49 + tiles) * 4);
        assert_int_equal(pl[0].code.param[pl[0].code.nparams - 1], MC_CUDA_PARAM_SPLITK);
        assert_int_equal(pl[0].code.grid[0], tiles * 3);
        mc_cuda_plans_free(pl, kp->nkernels);
        kir_program_free(kp);
    }
    unsetenv("MINIC_CUDA_CONV_SPLITK");
    mc_graph_free(g);
    /* groups: the gather and a batched GEMM, as before */
    if (mc_graph_parse_string("a.graph",
                              "graph a\ninput x : f16[2, 8, 9, 9]\nparam w : f16[8, 4, 3, 3]\n"
                              "y = conv(x, w, padding=[1, 1], groups=2)\noutput y\n", &g) != MC_OK)
        fail_msg("%s", mc_error_message());
    mc_compile_options co = {.fuse = true, .plan_memory = true, .verify = true, .conv_gather = true, .conv_implicit = true};
    kir_program *kp;
    assert_int_equal(mc_compile_kernels(g, &co, &kp), MC_OK);
    for (int k = 0; k < kp->nkernels; k++)
        assert_false(kp->kernels[k].category == KIR_GEMM && kp->kernels[k].gemm.conv.on);
    kir_program_free(kp);
    mc_graph_free(g);
}

/* conv(x, w, b, attrs) of dtype dt with relu after it (and `extra`, a line between them whose
 * value is r, or none), one output z. */
static mc_graph *conv_relu_graph(const char *dt, const char *x, const char *w, int co, const char *attrs,
                                 const char *extra)
{
    char text[1024];
    snprintf(text, sizeof text,
             "graph a\ninput x : %s[%s]\nparam w : %s[%s]\nparam b : %s[%d]\n"
             "y = conv(x, w, b, %s)\n%sz = relu(%s)\noutput z\n",
             dt, x, dt, w, dt, co, attrs, extra ? extra : "", extra ? "r" : "y");
    mc_graph *g;
    if (mc_graph_parse_string("a.graph", text, &g) != MC_OK)
        fail_msg("%s\n%s", mc_error_message(), text);
    return g;
}

/* The conv main loop at every depth (MINIC_CUDA_CONV_STAGES=2, 3, 4: D = 1, 2, 3 tiles in flight;
 * 3 by default): the stem (A
 * through registers), layer 1 with its residual, layer 4 split along K, an odd K of 180 and an
 * asymmetric window compile, in dynamic shared memory (D + 1 buffers) with wait_group D - 1; with
 * 2 or 4 pixels a thread (MINIC_CUDA_CONV_BVEC) too, and the epilogue staged through shared memory
 * (MINIC_CUDA_CONV_SEPI=1) where the pixels allow. */
static void test_implicit_conv_stages(void **state)
{
    (void)state;
    static const struct {
        const char *x, *w, *attrs, *dt;
        int co, stages, split, bvec;
        bool dflt; /* no environment: stages and bvec are what the defaults must pick */
    } cases[] = {
        {"32, 3, 224, 224", "64, 3, 7, 7", "stride=[2, 2], padding=[3, 3]", "f16", 64, 3, 0, 4, false},
        {"32, 64, 56, 56", "64, 64, 3, 3", "padding=[1, 1]", "bf16", 64, 3, 0, 2, false},
        {"32, 512, 7, 7", "512, 512, 3, 3", "padding=[1, 1]", "f16", 512, 3, 2, 4, false},
        {"2, 20, 15, 14", "40, 20, 3, 3", "stride=[2, 2], padding=[1, 1]", "f16", 40, 3, 0, 1, false},
        {"2, 8, 9, 17", "20, 8, 3, 5", "stride=[2, 1], padding=[1, 0], dilation=[1, 3]", "bf16", 20, 4, 0, 2, false},
        {"32, 64, 56, 56", "64, 64, 3, 3", "padding=[1, 1]", "f16", 64, 4, 0, 1, false},
        {"32, 64, 56, 56", "64, 64, 3, 3", "padding=[1, 1]", "f16", 64, 3, 0, 2, true},   /* 32 B a thread */
        {"32, 512, 7, 7", "512, 512, 3, 3", "padding=[1, 1]", "bf16", 512, 3, 0, 4, true}, /* 8 B a thread */
        {"32, 64, 56, 56", "64, 64, 3, 3", "padding=[1, 1]", "f16", 64, 2, 0, 1, false}, /* the first kernel */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char st[8], sp[8];
        mc_graph *g = conv_relu_graph(cases[i].dt, cases[i].x, cases[i].w, cases[i].co, cases[i].attrs, NULL);
        snprintf(st, sizeof st, "%d", cases[i].stages);
        snprintf(sp, sizeof sp, "%d", cases[i].split);
        if (!cases[i].dflt) {
            setenv("MINIC_CUDA_CONV_STAGES", st, 1);
            if (cases[i].split)
                setenv("MINIC_CUDA_CONV_SPLITK", sp, 1);
            snprintf(sp, sizeof sp, "%d", cases[i].bvec);
            setenv("MINIC_CUDA_CONV_BVEC", sp, 1);
            /* the epilogue through shared memory where the pixels come in runs of 4 or 8 */
            setenv("MINIC_CUDA_CONV_SEPI", i == 1 || i == 3 ? "0" : "1", 1);
        }
        mc_compile_options co = {.fuse = true, .plan_memory = true, .verify = true, .conv_gather = true,
                                 .conv_implicit = true};
        kir_program *kp;
        if (mc_compile_kernels(g, &co, &kp) != MC_OK)
            fail_msg("%s\n%s", mc_error_message(), cases[i].x);
        mc_cuda_kernel_plan *pl = compile_all(kp);
        assert_int_equal(kp->nkernels, 1);
        assert_string_equal(pl[0].code.scheme, "conv-implicit-mma");
        assert_int_equal(pl[0].gemm.conv_split, cases[i].split ? cases[i].split : 1);
        int bm = pl[0].gemm.conv_bm, bn = pl[0].gemm.conv_bn;
        /* two buffers: static shared memory, the first kernel's loop */
        assert_int_equal(pl[0].code.smem, cases[i].stages == 2 ? 0 : cases[i].stages * (bm * 40 + 32 * (bn + 8)) * 2);
        /* staged: the stem and layer 1 (56 x 56 pixels, runs of 8: 16-byte stores) */
        bool staged = strstr(pl[0].code.src.data, "float *cs_ = ") != NULL;
        assert_true(staged == (i == 0 || i == 5 || i == 6)); /* 6: by default */
        if (cases[i].stages == 2) {
            assert_non_null(strstr(pl[0].code.src.data, "cp.async.wait_all"));
            assert_null(strstr(pl[0].code.src.data, "mma_tile(cur);"));
            assert_null(strstr(pl[0].code.src.data, "bnv_"));
        } else {
        if (staged)
            assert_non_null(strstr(pl[0].code.src.data, "*(mc_vec<__half, 8> *)(p"));
        char wait[64];
        snprintf(wait, sizeof wait, "      asm volatile(\"cp.async.wait_group %d;", cases[i].stages - 2); /* the loop's */
        /* A where K = 147 (the stem) or 180 goes through registers: no cp.async */
            assert_true((strstr(pl[0].code.src.data, wait) != NULL) == (i != 0 && i != 3));
            assert_non_null(strstr(pl[0].code.src.data, "mma_tile(cur);"));
            /* V pixels a thread: one table entry, one 4- or 8-byte store for V elements */
            assert_true((strstr(pl[0].code.src.data, "bnv_") != NULL) == (cases[i].bvec > 1));
            if (cases[i].bvec == 4)
                assert_non_null(strstr(pl[0].code.src.data, "reinterpret_cast<uint2 *>(&Bs[buf]"));
        }
        mc_cuda_plans_free(pl, kp->nkernels);
        kir_program_free(kp);
        mc_graph_free(g);
        unsetenv("MINIC_CUDA_CONV_SPLITK");
        unsetenv("MINIC_CUDA_CONV_STAGES");
        unsetenv("MINIC_CUDA_CONV_BVEC");
        unsetenv("MINIC_CUDA_CONV_SEPI");
    }
}

/* A conv case of test_implicit_conv_kchunk and _clast: conv(x, w, b) + relu over x [xs] (xs
 * starting with N: a symbolic batch, bound at 8: the source every binding shares; nhwc: x is
 * the transpose of an [xs] input), compiled with co under MINIC_CUDA_CONV_{STAGES, BVEC,
 * SPLITK, TILE} where given (0, NULL: left unset), every kernel planned and compiled by NVRTC. */
typedef struct {
    mc_graph *g;
    kir_program *kp;
    mc_cuda_kernel_plan *pl;
} conv_case;

static conv_case conv_case_compile(mc_compile_options co, const char *dt, const char *xs, bool nhwc, const char *ws,
                                   int co_, const char *attrs, int stages, int bvec, int split, const char *tile)
{
    char text[1024], v[8];
    snprintf(text, sizeof text,
             "graph a\ninput %s : %s[%s]\n%sparam w : %s[%s]\nparam b : %s[%d]\n"
             "y = conv(x, w, b, %s)\nz = relu(y)\noutput z\n",
             nhwc ? "xh" : "x", dt, xs, nhwc ? "x = transpose(xh, perm=[0, 3, 1, 2])\n" : "", dt, ws, dt, co_, attrs);
    conv_case r;
    if (mc_graph_parse_string("a.graph", text, &r.g) != MC_OK)
        fail_msg("%s\n%s", mc_error_message(), text);
    const char *names[3] = {"MINIC_CUDA_CONV_STAGES", "MINIC_CUDA_CONV_BVEC", "MINIC_CUDA_CONV_SPLITK"};
    const int vals[3] = {stages, bvec, split};
    for (int e = 0; e < 3; e++)
        if (vals[e]) {
            snprintf(v, sizeof v, "%d", vals[e]);
            setenv(names[e], v, 1);
        }
    if (tile)
        setenv("MINIC_CUDA_CONV_TILE", tile, 1);
    bool sym = xs[0] == 'N';
    char refused[MC_COMPILE_REFUSED] = "";
    co.fuse = co.plan_memory = co.verify = co.conv_gather = co.conv_implicit = true;
    co.symbolic = sym;
    co.refused = refused;
    if (mc_compile_kernels(r.g, &co, &r.kp) != MC_OK)
        fail_msg("%s %s\n%s", mc_error_message(), refused, text);
    if (sym) {
        int64_t n8[1] = {8};
        kir_program *sized = r.kp;
        r.kp = kir_bind(sized, n8);
        assert_non_null(r.kp);
        kir_program_free(sized);
    }
    r.pl = compile_all(r.kp);
    return r;
}

static void conv_case_free(conv_case *r)
{
    mc_cuda_plans_free(r->pl, r->kp->nkernels);
    kir_program_free(r->kp);
    mc_graph_free(r->g);
    unsetenv("MINIC_CUDA_CONV_STAGES");
    unsetenv("MINIC_CUDA_CONV_BVEC");
    unsetenv("MINIC_CUDA_CONV_SPLITK");
    unsetenv("MINIC_CUDA_CONV_TILE");
}

/* K by chunks of 32 channels (mc_compile_options.conv_kchunk, MINIC_CUDA_CONV_KCHUNK=1): where
 * 32 divides C the weights are re-laid by a copy kernel and the conv kernel's K tile is one
 * window position: its deeper loop loads B by emit_conv_chunk (no K table), at every depth and
 * with 1, 2 or 4 pixels a thread; the first loop (2 buffers) decodes each K row in chunk order.
 * ResNet's 3x3 layers 1 and 4 (64x128 and 64x32 tiles), the stride-2 3x3 and 1x1 into a layer,
 * dilation, a K split, a symbolic batch; the stem (C = 3) keeps the order and the table. */
static void test_implicit_conv_kchunk(void **state)
{
    (void)state;
    static const struct {
        const char *x, *w, *attrs, *dt;
        int co, stages, bvec, split;
        bool chunked;
    } cases[] = {
        {"32, 64, 56, 56", "64, 64, 3, 3", "padding=[1, 1]", "f16", 64, 0, 0, 0, true},
        {"32, 512, 7, 7", "512, 512, 3, 3", "padding=[1, 1]", "bf16", 512, 0, 0, 0, true},
        {"32, 128, 28, 28", "256, 128, 3, 3", "stride=[2, 2], padding=[1, 1]", "f16", 256, 4, 1, 0, true},
        {"32, 64, 56, 56", "128, 64, 1, 1", "stride=[2, 2]", "bf16", 128, 3, 4, 0, true},
        {"2, 32, 12, 11", "40, 32, 3, 3", "padding=[2, 2], dilation=[2, 2]", "f16", 40, 3, 2, 0, true},
        {"32, 512, 7, 7", "512, 512, 3, 3", "padding=[1, 1]", "f16", 512, 3, 4, 2, true},
        {"32, 64, 56, 56", "64, 64, 3, 3", "padding=[1, 1]", "f16", 64, 2, 0, 0, false}, /* the first loop */
        {"32, 3, 224, 224", "64, 3, 7, 7", "stride=[2, 2], padding=[3, 3]", "f16", 64, 0, 0, 0, false},
        {"N<=32, 256, 14, 14", "256, 256, 3, 3", "padding=[1, 1]", "f16", 256, 0, 0, 0, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        conv_case r = conv_case_compile((mc_compile_options){.conv_kchunk = 32}, cases[i].dt, cases[i].x, false,
                                        cases[i].w, cases[i].co, cases[i].attrs, cases[i].stages, cases[i].bvec,
                                        cases[i].split, NULL);
        int nconv = 0, ncopy = 0;
        for (int k = 0; k < r.kp->nkernels; k++) {
            const kir_kernel *kk = &r.kp->kernels[k];
            if (kk->category == KIR_COPY)
                ncopy++;
            if (!r.pl[k].is_gemm || !r.pl[k].gemm.conv)
                continue;
            nconv++;
            const char *src = r.pl[k].code.src.data;
            assert_string_equal(r.pl[k].code.scheme, "conv-implicit-mma");
            assert_int_equal(kk->gemm.conv.kc, cases[i].chunked || cases[i].stages == 2 ? 32 : 0);
            /* the chunk's loads: the window position once a tile, no K table */
            assert_true((strstr(src, "const int cc = kt / ") != NULL) == cases[i].chunked);
            assert_true((strstr(src, "kt_[") != NULL) == !cases[i].chunked);
            if (cases[i].stages == 2)
                assert_non_null(strstr(src, "const int q_ = kk / 32"));
            if (cases[i].bvec == 4)
                assert_non_null(strstr(src, "reinterpret_cast<uint2 *>(&Bs[buf]"));
        }
        assert_int_equal(nconv, 1);
        /* w re-laid by a copy, except a 1x1 window's (the same order) */
        bool relaid = (cases[i].chunked || cases[i].stages == 2) && !strstr(cases[i].w, ", 1, 1");
        if (ncopy != (relaid ? 1 : 0))
            fail_msg("case %d: %d copies", (int)i, ncopy);
        conv_case_free(&r);
    }
}

/* The knobs of issue 20 (timed on the GPU by the lead, off by default): MINIC_CUDA_CONV_BROW=1
 * (the chunked loop reads rows of 8 or 4 pixels as 4-byte words, where the conv steps 1 along
 * x's rows and OW allows), MINIC_CUDA_CONV_SMALL=1 (64x64 tiles and a K split up to four CTAs
 * an SM for small grids), MINIC_CUDA_CONV_MINB=4 (__launch_bounds__ asking 4 CTAs an SM),
 * MINIC_CUDA_CONV_EARLY=1 (the next tile's registers stored before the mma),
 * MINIC_CUDA_CONV_CLAST_INC=1 (the stem's window positions decoded once a tile), and
 * MINIC_CUDA_CONV_BROW=2 (rows of 8 pixels by 16-byte chunks): every
 * kernel compiles with NVRTC at every depth, f16 and bf16, a symbolic batch, the stem. */
static void test_implicit_conv_knobs(void **state)
{
    (void)state;
    static const struct {
        const char *x, *w, *attrs, *dt, *tile;
        int co, stages, bm, bn, split, brow; /* bm, split 0: not checked; brow 8, 4, 0 */
    } cases[] = {
        {"32, 64, 56, 56", "64, 64, 3, 3", "padding=[1, 1]", "f16", NULL, 64, 0, 64, 128, 1, 8},
        {"32, 128, 28, 28", "128, 128, 3, 3", "padding=[1, 1]", "bf16", NULL, 128, 4, 64, 128, 1, 4},
        {"32, 256, 14, 14", "256, 256, 3, 3", "padding=[1, 1]", "f16", NULL, 256, 0, 64, 64, 2, 0},
        {"32, 512, 7, 7", "512, 512, 3, 3", "padding=[1, 1]", "bf16", NULL, 512, 0, 64, 64, 3, 0},
        {"32, 128, 56, 56", "128, 128, 3, 3", "stride=[2, 2], padding=[1, 1]", "f16", NULL, 128, 0, 0, 0, 0, 0},
        {"32, 64, 56, 56", "64, 64, 3, 3", "padding=[1, 1]", "f16", "128x128", 64, 3, 128, 128, 0, 8},
        {"32, 64, 56, 56", "64, 64, 3, 3", "padding=[1, 1]", "f16", NULL, 64, 2, 0, 0, 0, 0}, /* the first loop */
        {"N<=32, 64, 56, 56", "64, 64, 3, 3", "padding=[1, 1]", "f16", NULL, 64, 0, 0, 0, 0, 8},
        {"N<=32, 512, 7, 7", "512, 512, 3, 3", "padding=[1, 1]", "f16", NULL, 512, 0, 64, 64, 0, 0},
        {"32, 3, 224, 224", "64, 3, 7, 7", "stride=[2, 2], padding=[3, 3]", "f16", NULL, 64, 0, 64, 128, 1, 0},
    };
    setenv("MINIC_CUDA_CONV_BROW", "1", 1);
    setenv("MINIC_CUDA_CONV_SMALL", "1", 1);
    setenv("MINIC_CUDA_CONV_MINB", "4", 1);
    setenv("MINIC_CUDA_CONV_EARLY", "1", 1);
    setenv("MINIC_CUDA_CONV_CLAST_INC", "1", 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        conv_case r = conv_case_compile((mc_compile_options){.conv_kchunk = 32, .conv_clast = true}, cases[i].dt,
                                        cases[i].x, false, cases[i].w, cases[i].co, cases[i].attrs, cases[i].stages, 0,
                                        0, cases[i].tile);
        int nconv = 0;
        for (int k = 0; k < r.kp->nkernels; k++) {
            if (!r.pl[k].is_gemm || !r.pl[k].gemm.conv)
                continue;
            nconv++;
            const mc_cuda_gemm_plan *g = &r.pl[k].gemm;
            const char *src = r.pl[k].code.src.data;
            if (cases[i].bm && (g->conv_bm != cases[i].bm || g->conv_bn != cases[i].bn))
                fail_msg("case %d: tile %dx%d", (int)i, g->conv_bm, g->conv_bn);
            if (cases[i].split && g->conv_split != cases[i].split)
                fail_msg("case %d: split %d", (int)i, g->conv_split);
            assert_non_null(strstr(src, ", 4) gemm_conv"));
            /* EARLY: the register set stored before the mma (the stem has none: B by cp.async) */
            const char *loop = strstr(src, "for (int r0 = 0;"), *st = loop ? strstr(loop, "store_b(") : NULL;
            assert_true(cases[i].stages == 2 || !st || st < strstr(loop, "mma_tile(cur)"));
            assert_true((strstr(src, "__byte_perm(rb[") != NULL) == (cases[i].brow != 0));
            assert_true((strstr(src, "const int r0 = kt * 8 + ps_") != NULL) == (strstr(cases[i].w, "3, 7, 7") != NULL));
            if (cases[i].brow)
                assert_non_null(strstr(src, cases[i].brow == 8 ? "reinterpret_cast<uint4 *>(&Bs[buf]"
                                                               : "reinterpret_cast<uint2 *>(&Bs[buf]"));
        }
        assert_int_equal(nconv, 1);
        conv_case_free(&r);
    }
    /* BROW=2: 16-byte chunks where rows of 8 allow (56x56), else BROW=1's words (28x28) */
    setenv("MINIC_CUDA_CONV_BROW", "2", 1);
    static const char *const b16[][2] = {{"32, 64, 56, 56", "64, 64, 3, 3"}, {"N<=32, 64, 56, 56", "64, 64, 3, 3"},
                                         {"32, 128, 28, 28", "128, 128, 3, 3"}};
    for (int i = 0; i < 3; i++) {
        conv_case r = conv_case_compile((mc_compile_options){.conv_kchunk = 32}, i == 1 ? "bf16" : "f16", b16[i][0],
                                        false, b16[i][1], i == 2 ? 128 : 64, "padding=[1, 1]", i == 1 ? 4 : 0, 0, 0, NULL);
        int nconv = 0;
        for (int k = 0; k < r.kp->nkernels; k++)
            if (r.pl[k].is_gemm && r.pl[k].gemm.conv) {
                nconv++;
                const char *src = r.pl[k].code.src.data;
                assert_true((strstr(src, "const uint4 *pw") != NULL) == (i < 2));
                assert_non_null(strstr(src, "__byte_perm(rb["));
            }
        assert_int_equal(nconv, 1);
        conv_case_free(&r);
    }
    unsetenv("MINIC_CUDA_CONV_BROW");
    unsetenv("MINIC_CUDA_CONV_SMALL");
    unsetenv("MINIC_CUDA_CONV_MINB");
    unsetenv("MINIC_CUDA_CONV_EARLY");
    unsetenv("MINIC_CUDA_CONV_CLAST_INC");
}

/* The stem channels-last (mc_compile_options.conv_clast, MINIC_CUDA_CONV_CLAST=1): x padded to
 * 4 (or 8) channels and read as [N, H, W, Cp], the kernel's B by 8- (16-) byte cp.async into a
 * [BN][BK] tile read untransposed, the padded weight rows (K = 196 of 200) by cp.async with a
 * partial last chunk; at every depth and for several tiles; the first loop keeps element loads.
 * An x given channels-last (the transpose of an NHWC input) the same way, 8 channels a load. */
static void test_implicit_conv_clast(void **state)
{
    (void)state;
    static const struct {
        const char *x, *w, *attrs, *dt, *tile;
        int co, stages, cp;
    } cases[] = {
        {"32, 3, 224, 224", "64, 3, 7, 7", "stride=[2, 2], padding=[3, 3]", "f16", NULL, 64, 0, 4},
        {"32, 3, 224, 224", "64, 3, 7, 7", "stride=[2, 2], padding=[3, 3]", "bf16", "64x32", 64, 4, 4},
        {"2, 5, 12, 13", "130, 5, 3, 3", "padding=[1, 1]", "f16", "128x64", 130, 3, 8},
        {"N<=32, 3, 224, 224", "64, 3, 7, 7", "stride=[2, 2], padding=[3, 3]", "f16", NULL, 64, 0, 4},
        {"32, 3, 224, 224", "64, 3, 7, 7", "stride=[2, 2], padding=[3, 3]", "f16", NULL, 64, 2, 4},
        /* x given as the transpose of an NHWC input: K by window positions of all C channels */
        {"32, 56, 56, 64", "64, 64, 3, 3", "padding=[1, 1]", "f16", NULL, 64, 0, 64},
        {"32, 7, 7, 512", "512, 512, 3, 3", "padding=[1, 1]", "bf16", NULL, 512, 4, 512},
        {"2, 11, 9, 24", "40, 24, 3, 3", "stride=[2, 2], padding=[1, 1]", "f16", "128x128", 40, 3, 24},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        conv_case r = conv_case_compile((mc_compile_options){.conv_clast = true}, cases[i].dt, cases[i].x,
                                        cases[i].cp > 8, cases[i].w, cases[i].co, cases[i].attrs, cases[i].stages, 0,
                                        0, cases[i].tile);
        int nconv = 0;
        for (int k = 0; k < r.kp->nkernels; k++) {
            const kir_kernel *kk = &r.kp->kernels[k];
            if (!r.pl[k].is_gemm || !r.pl[k].gemm.conv)
                continue;
            nconv++;
            const char *src = r.pl[k].code.src.data;
            char cpb[32];
            snprintf(cpb, sizeof cpb, "mc_cp%d(&Bs[buf][pn_]", cases[i].cp == 4 ? 8 : 16);
            assert_int_equal(kk->gemm.conv.kc, cases[i].cp);
            assert_int_equal(kk->gemm.conv.c, cases[i].cp);
            assert_true((strstr(src, cpb) != NULL) == (cases[i].stages != 2));
            if (cases[i].stages != 2) {
                assert_non_null(strstr(src, "mc_ldsm4(bf, &Bs[cur][wn0"));
                assert_null(strstr(src, "kt_["));
                assert_non_null(strstr(src, "mc_cp16(&As[buf]")); /* the (padded) weight rows */
            }
        }
        assert_int_equal(nconv, 1);
        conv_case_free(&r);
    }
    /* slot-major loads (MINIC_CUDA_CONV_CLAST_MAP=1): the stem and an NHWC-given layer compile */
    setenv("MINIC_CUDA_CONV_CLAST_MAP", "1", 1);
    for (int i = 0; i < 2; i++) {
        conv_case r = conv_case_compile((mc_compile_options){.conv_clast = true}, "f16", i ? "32, 56, 56, 64" : "32, 3, 224, 224",
                                        i == 1, i ? "64, 64, 3, 3" : "64, 3, 7, 7", 64,
                                        i ? "padding=[1, 1]" : "stride=[2, 2], padding=[3, 3]", 0, 0, 0, NULL);
        int nconv = 0;
        for (int k = 0; k < r.kp->nkernels; k++)
            if (r.pl[k].is_gemm && r.pl[k].gemm.conv) {
                nconv++;
                assert_non_null(strstr(r.pl[k].code.src.data, "[pn0_ + e * "));
            }
        assert_int_equal(nconv, 1);
        conv_case_free(&r);
    }
    unsetenv("MINIC_CUDA_CONV_CLAST_MAP");
}

/* The graph of `text`, or the test fails with the parser's message. */
static mc_graph *graph_of(const char *text)
{
    mc_graph *g;
    if (mc_graph_parse_string("a.graph", text, &g) != MC_OK)
        fail_msg("%s", mc_error_message());
    return g;
}

/* A padded pool's kernel body: its window's indices are clamped into x (kir_facts), so no
 * check, no 64-bit division and no saturation of a maximum of f16 values. */
static void assert_lean_pool(const char *body)
{
    assert_null(strstr(body, "mc_gather_index("));
    assert_null(strstr(body, "mc_div("));
    assert_null(strstr(body, "mc_sat_f16("));
}

/* The padded maxpool after ResNet's stem (a gather whose index moves along the outputs) takes
 * two outputs a thread, 8 with MINIC_CUDA_GATHER_VEC=0; an embedding's gather (one index a row)
 * keeps its vectors either way. Both compile. */
static void test_gather_vec_scalar(void **state)
{
    (void)state;
    mc_graph *g = graph_of("graph a\ninput x : f16[4, 64, 112, 112]\ninput ids : i32[4, 16]\nparam wte : f16[50, 64]\n"
                           "m = maxpool(x, kernel=[3, 3], stride=[2, 2], padding=[1, 1])\n"
                           "t = gather(wte, ids)\nu = relu(t)\noutput m, u\n");
    for (int on = 0; on <= 1; on++) {
        if (!on)
            setenv("MINIC_CUDA_GATHER_VEC", "0", 1);
        mc_compile_options co = {.fuse = true, .plan_memory = true, .verify = true, .conv_gather = true};
        kir_program *kp;
        assert_int_equal(mc_compile_kernels(g, &co, &kp), MC_OK);
        mc_cuda_kernel_plan *pl = compile_all(kp);
        int pools = 0, embeds = 0;
        for (int k = 0; k < kp->nkernels; k++) {
            /* the kernel after the prelude (which defines the helpers) */
            const char *body = pl[k].code.src.data + pl[k].code.body;
            if (strstr(kp->kernels[k].name, "maxpool")) {
                pools++;
                assert_int_equal(pl[k].code.vec, on ? 2 : 8);
                assert_lean_pool(body);
            } else if (strstr(kp->kernels[k].name, "gather")) {
                embeds++;
                assert_true(pl[k].code.vec > 1);
                /* the ids are an input: checked */
                assert_non_null(strstr(body, "mc_gather_index("));
            }
        }
        assert_int_equal(pools, 1);
        assert_int_equal(embeds, 1);
        mc_cuda_plans_free(pl, kp->nkernels);
        kir_program_free(kp);
        unsetenv("MINIC_CUDA_GATHER_VEC");
    }
    mc_graph_free(g);
}

/* Convs over a symbolic batch (f16[N, ...]), compiled once: the implicit-GEMM kernel reads the
 * pixel count N OH OW, its K split and its tiles per split when it runs (the grid is the
 * binding's), so every binding renders the same source, which compiles; the tile is the same
 * for every binding, the split the binding's (K split at batch 1 where the tiles are few). The stem (A through registers), layer 1 (its epilogue staged through shared
 * memory), layer 4, the first kernel's loop (two buffers), pairs and single outputs in the
 * epilogue, with a residual. */
static void test_sized_conv_kernels(void **state)
{
    (void)state;
    static const struct {
        const char *x, *w, *attrs, *dt, *env, *val;
        int co;
    } cases[] = {
        {"N<=32, 3, 224, 224", "64, 3, 7, 7", "stride=[2, 2], padding=[3, 3]", "f16", NULL, NULL, 64},
        {"N, 64, 56, 56", "64, 64, 3, 3", "padding=[1, 1]", "bf16", NULL, NULL, 64},
        {"N<=32, 512, 7, 7", "512, 512, 3, 3", "padding=[1, 1]", "f16", NULL, NULL, 512},
        {"N<=8, 64, 14, 14", "64, 64, 3, 3", "padding=[1, 1]", "f16", "MINIC_CUDA_CONV_STAGES", "2", 64},
        {"N<=8, 64, 14, 14", "64, 64, 3, 3", "padding=[1, 1]", "bf16", "MINIC_CUDA_CONV_SEPI", "0", 64},
        {"N<=8, 20, 15, 13", "40, 20, 3, 3", "stride=[2, 2], padding=[1, 1]", "f16", NULL, NULL, 40},
    };
    const int64_t bindings[][1] = {{1}, {3}, {8}, {2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mc_graph *g = conv_relu_graph(cases[i].dt, cases[i].x, cases[i].w, cases[i].co, cases[i].attrs,
                                      "r = add(y, y)\n");
        if (cases[i].env)
            setenv(cases[i].env, cases[i].val, 1);
        char refused[MC_COMPILE_REFUSED] = "";
        mc_compile_options co = {.fuse = true, .plan_memory = true, .verify = true, .conv_gather = true,
                                 .conv_implicit = true, .symbolic = true, .refused = refused};
        kir_program *sized;
        if (mc_compile_kernels(g, &co, &sized) != MC_OK || !sized)
            fail_msg("%s %s\n%s", mc_error_message(), refused, cases[i].x);
        char *first = NULL;
        int bm = 0, bn = 0;
        for (size_t b = 0; b < sizeof bindings / sizeof bindings[0]; b++) {
            mc_cuda_kernel_plan *pl = NULL;
            int specialized = -1;
            char why[200];
            kir_program *kp = cuda_plan_binding(sized, bindings[b], true, &target, &pl, &specialized, why, sizeof why);
            if (specialized != 0)
                fail_msg("%s: %d kernels rendered for N=%lld (%s)", cases[i].x, specialized, (long long)bindings[b][0], why);
            int nconv = 0;
            for (int k = 0; k < kp->nkernels; k++) {
                if (!pl[k].is_gemm || !pl[k].gemm.conv)
                    continue;
                nconv++;
                const mc_cuda_code *code = &pl[k].code;
                assert_string_equal(code->scheme, "conv-implicit-mma");
                const kir_kernel *kk = &kp->kernels[k];
                int64_t pixels = bindings[b][0] * kk->gemm.n;
                if (b == 0) {
                    first = strdup(code->src.data);
                    bm = pl[k].gemm.conv_bm;
                    bn = pl[k].gemm.conv_bn;
                    assert_non_null(strstr(first, i == 1 ? "pv_ = pix_ < (long long)S_.v[0];" : "pv_ = pix_ < (int)S_.v[0];"));
                    assert_non_null(strstr(first, "  if ((int)S_.v[1] > 1) {"));
                    if (i == 2) /* layer 4 at N=1: 16 tiles of 64x32 (those for N=8), K 4608 split four ways */
                        assert_int_equal(pl[k].gemm.conv_split, 4);
                    const char *srcs[1] = {first}, *entries[1] = {code->entry};
                    void *cubins[1] = {0};
                    size_t sizes[1];
                    int compiled = 0;
                    if (mc_cuda_compile(srcs, entries, 1, target.sm, NULL, NULL, cubins, sizes, &compiled) != MC_OK)
                        fail_msg("%s\n%s", mc_error_message(), first);
                    free(cubins[0]);
                } else {
                    assert_string_equal(code->src.data, first); /* nothing to compile */
                    assert_int_equal(pl[k].gemm.conv_bm, bm);
                    assert_int_equal(pl[k].gemm.conv_bn, bn);
                }
                int64_t tiles = (kk->gemm.m + bm - 1) / bm * ((pixels + bn - 1) / bn), split = pl[k].gemm.conv_split;
                assert_int_equal(code->sizes[0], pixels);
                assert_int_equal(code->sizes[1], split);
                assert_int_equal(code->sizes[2], tiles);
                assert_int_equal(code->grid[0], tiles * split);
                assert_int_equal(pl[k].gemm.conv_ws_bytes, split > 1 ? (kk->gemm.m * pixels + tiles) * 4 : 0);
            }
            assert_int_equal(nconv, 1);
            mc_cuda_plans_free(pl, kp->nkernels);
            kir_program_free(kp);
        }
        if (cases[i].env)
            unsetenv(cases[i].env);
        free(first);
        kir_program_free(sized);
        mc_graph_free(g);
    }
    /* MINIC_CUDA_SIZED_CONV=0: the conv rendered for each binding with its own plan, and said so */
    mc_graph *g;
    if (mc_graph_parse_string("a.graph", "graph a\ninput x : f16[N, 64, 14, 14]\nparam w : f16[64, 64, 3, 3]\n"
                                         "y = conv(x, w, padding=[1, 1])\noutput y\n", &g) != MC_OK)
        fail_msg("%s", mc_error_message());
    char refused[MC_COMPILE_REFUSED] = "";
    mc_compile_options co = {.fuse = true, .plan_memory = true, .verify = true, .conv_gather = true,
                             .conv_implicit = true, .symbolic = true, .refused = refused};
    kir_program *sized;
    assert_int_equal(mc_compile_kernels(g, &co, &sized), MC_OK);
    mc_cuda_kernel_plan *pl = NULL;
    int specialized = -1;
    char why[200];
    setenv("MINIC_CUDA_SIZED_CONV", "0", 1);
    kir_program *kp = cuda_plan_binding(sized, bindings[1], true, &target, &pl, &specialized, why, sizeof why);
    unsetenv("MINIC_CUDA_SIZED_CONV");
    assert_int_equal(specialized, 1);
    assert_non_null(strstr(why, "MINIC_CUDA_SIZED_CONV=0"));
    assert_null(strstr(pl[0].code.src.data, "S_.v["));
    mc_cuda_plans_free(pl, kp->nkernels);
    kir_program_free(kp);
    kir_program_free(sized);
    mc_graph_free(g);
}

/* Attention kernels of every kind render and compile: f32, f16 and bf16 (tensor cores for the
 * 16-bit types), head sizes 32, 80 and 128 (the largest needs more than 48 KB of shared
 * memory), q/k/v as views of a QKV projection (16-byte chunks, cp.async) and as odd strides
 * (plain loads), causal bands, boolean and additive masks, Tq != Tk. */
static void test_attention_kernels(void **state)
{
    (void)state;
    static const char *const dtypes[] = {"f32", "f16", "bf16"};
    static const int heads[] = {32, 80, 128};
    int kernels = 0;
    for (int t = 0; t < 3; t++)
        for (int hd = 0; hd < 3; hd++)
            for (int mask = 0; mask < 3; mask++) {
                const char *dt = dtypes[t];
                int d = heads[hd], tq = 40 + 7 * mask, tk = 70;
                char text[2048];
                if (mask == 0) /* a QKV projection, causal */
                    snprintf(text, sizeof text,
                             "graph a\ninput qkv : %s[2, 70, %d]\nq0 = slice(qkv, axis=2, start=0, end=%d)\n"
                             "k0 = slice(qkv, axis=2, start=%d, end=%d)\nv0 = slice(qkv, axis=2, start=%d, end=%d)\n"
                             "q1 = reshape(q0, shape=[2, 70, 2, %d])\nk1 = reshape(k0, shape=[2, 70, 2, %d])\n"
                             "v1 = reshape(v0, shape=[2, 70, 2, %d])\nq = transpose(q1, perm=[0, 2, 1, 3])\n"
                             "kt = transpose(k1, perm=[0, 2, 3, 1])\nv = transpose(v1, perm=[0, 2, 1, 3])\n"
                             "s0 = matmul(q, kt)\ns = mul(s0, 0.125)\nrow = iota(shape=[70, 70], axis=0)\n"
                             "col = iota(shape=[70, 70], axis=1)\nkeep = ge(row, col)\nm = where(keep, s, -inf)\n"
                             "p = softmax(m)\ny0 = matmul(p, v)\ny1 = transpose(y0, perm=[0, 2, 1, 3])\n"
                             "y = reshape(y1, shape=[2, 70, %d])\noutput y\n",
                             dt, 6 * d, 2 * d, 2 * d, 4 * d, 4 * d, 6 * d, d, d, d, 2 * d);
                else /* separate inputs, rows of odd lengths; a boolean or additive mask */
                    snprintf(text, sizeof text,
                             "graph a\ninput q : %s[2, %d, %d]\ninput kt : %s[2, %d, %d]\ninput v : %s[2, %d, %d]\n"
                             "input mk : %s[%d, %d]\ns0 = matmul(q, kt)\ns = div(s0, 8)\n%s\np = softmax(m)\n"
                             "y = matmul(p, v)\noutput y\n",
                             dt, tq, d, dt, d, tk, dt, tk, d == 128 ? 120 : d + 8, mask == 1 ? "bool" : dt, tq, tk,
                             mask == 1 ? "m = where(mk, s, -inf)" : "m = add(s, mk)");
                mc_graph *g;
                if (mc_graph_parse_string("a.graph", text, &g) != MC_OK)
                    fail_msg("%s\n%s", mc_error_message(), text);
                /* f32 twice: the default kernel (register-blocked up to d = 80) and the previous
                 * one, which MINIC_CUDA_ATTN_F32=old keeps reachable */
                for (int old = 0; old <= (t == 0); old++) {
                    if (old)
                        setenv("MINIC_CUDA_ATTN_F32", "old", 1);
                    mc_compile_options co = {.fuse = true, .plan_memory = true, .verify = true};
                    kir_program *kp;
                    if (mc_compile_kernels(g, &co, &kp) != MC_OK)
                        fail_msg("%s", mc_error_message());
                    mc_cuda_kernel_plan *pl = compile_all(kp);
                    unsetenv("MINIC_CUDA_ATTN_F32");
                    int found = 0;
                    for (int k = 0; k < kp->nkernels; k++)
                        if (kp->kernels[k].category == KIR_ATTENTION) {
                            found++;
                            int dv = mask == 0 ? d : d == 128 ? 120 : d + 8;
                            const char *want = t > 0                          ? "attention-mma"
                                               : !old && d <= 80 && dv <= 80 ? "attention-fma-split"
                                                                              : "attention-fma";
                            assert_string_equal(pl[k].code.scheme, want);
                            if (t > 0 && d == 128)
                                assert_true(pl[k].code.smem > 48 * 1024);
                            /* the split kernel copies 16-byte rows of the QKV projection with
                             * cp.async, and loads kt (columns of keys) element by element */
                            if (strcmp(want, "attention-fma-split") == 0)
                                assert_non_null(strstr(pl[k].code.src.data, mask == 0 ? "mc_cp16(dst" : "x = mc_ld("));
                        }
                    if (found != 1) {
                        kir_print(kp, g, stderr);
                        fail_msg("%d attention kernels in\n%s", found, text);
                    }
                    kernels += found;
                    mc_cuda_plans_free(pl, kp->nkernels);
                    kir_program_free(kp);
                }
                mc_graph_free(g);
            }
    assert_int_equal(kernels, 36);
}

/* The decode kernel (a few queries over a KV cache: flash-decoding, split over the keys)
 * renders and compiles for f32, f16 and bf16: GPT-2's decode step (one query, caches read
 * through le(iota, pos), q/k/v and the output as separate views, 16-byte loads; head size 64),
 * 3 queries with keys given transposed (plain loads) and an additive mask (head size 128), 2
 * queries under a causal band (80); MINIC_CUDA_ATTN_DECODE=0 plans the flash kernels again (not
 * compiled here: test_attention_kernels does). */
static void test_decode_attention_kernels(void **state)
{
    (void)state;
    static const char *const dtypes[] = {"f32", "f16", "bf16"};
    int kernels = 0;
    for (int t = 0; t < 3; t++)
        for (int shape = 0; shape < 3; shape++) {
            const char *dt = dtypes[t];
            int d = shape == 0 ? 64 : shape == 1 ? 128 : 80;
            char text[2048];
            if (shape == 0) /* GPT-2's decode attention: batch 2, 3 heads, cache of 256 */
                snprintf(text, sizeof text,
                         "graph a\ninput q : %s[2, 3, 1, %d]\ninput kc : %s[2, 3, 256, %d]\n"
                         "input vc : %s[2, 3, 256, %d]\ninput pos : i32[]\n"
                         "kt = transpose(kc, perm=[0, 1, 3, 2])\ns0 = matmul(q, kt)\ns = mul(s0, 0.125)\n"
                         "col = iota(shape=[1, 256], axis=1)\nkeep = le(col, pos)\nm = where(keep, s, -inf)\n"
                         "p = softmax(m)\ny0 = matmul(p, vc)\ny1 = transpose(y0, perm=[0, 2, 1, 3])\n"
                         "y = reshape(y1, shape=[2, 1, %d])\noutput y\n",
                         dt, d, dt, d, dt, d, 3 * d);
            else if (shape == 1) /* 3 queries, keys as columns, an additive mask, 1000 keys */
                snprintf(text, sizeof text,
                         "graph a\ninput q : %s[4, 3, %d]\ninput kt : %s[4, %d, 1000]\ninput v : %s[4, 1000, %d]\n"
                         "input mk : %s[3, 1000]\ns0 = matmul(q, kt)\ns = div(s0, 8)\nm = add(s, mk)\n"
                         "p = softmax(m)\ny = matmul(p, v)\noutput y\n",
                         dt, d, dt, d, dt, d, dt);
            else /* 2 queries, causal (bottom-right), 300 keys */
                snprintf(text, sizeof text,
                         "graph a\ninput q : %s[1, 2, %d]\ninput kt : %s[1, %d, 300]\ninput v : %s[1, 300, %d]\n"
                         "s0 = matmul(q, kt)\ns = mul(s0, 0.1)\nrow = iota(shape=[2, 300], axis=0)\n"
                         "col = iota(shape=[2, 300], axis=1)\nrow2 = add(row, 298)\nkeep = ge(row2, col)\n"
                         "m = where(keep, s, -inf)\np = softmax(m)\ny = matmul(p, v)\noutput y\n",
                         dt, d, dt, d, dt, d);
            mc_graph *g;
            if (mc_graph_parse_string("a.graph", text, &g) != MC_OK)
                fail_msg("%s\n%s", mc_error_message(), text);
            mc_compile_options co = {.fuse = true, .plan_memory = true, .verify = true};
            kir_program *kp;
            if (mc_compile_kernels(g, &co, &kp) != MC_OK)
                fail_msg("%s", mc_error_message());
            mc_cuda_kernel_plan *pl = compile_all(kp);
            int found = 0;
            for (int k = 0; k < kp->nkernels; k++) {
                if (kp->kernels[k].category != KIR_ATTENTION)
                    continue;
                found++;
                const char *src = pl[k].code.src.data;
                assert_string_equal(pl[k].code.scheme, "attention-decode");
                /* split over the keys: every shape here has CTAs per batch entry to spare */
                assert_non_null(strstr(src, "__device__ float mc_part["));
                assert_true(pl[k].code.grid[0] > (shape == 0 ? 6u : shape == 1 ? 4u : 1u));
                /* 16-byte loads of V's rows (and K's in GPT-2's layout); keys given as columns
                 * load element by element */
                assert_non_null(strstr(src, t == 0 ? "reinterpret_cast<const float4 *>" : "reinterpret_cast<const uint4 *>"));
                if (shape > 0)
                    assert_non_null(strstr(src, "kr[u][x] = (j < j1) && col <"));
            }
            if (found != 1) {
                kir_print(kp, g, stderr);
                fail_msg("%d attention kernels in\n%s", found, text);
            }
            kernels += found;
            mc_cuda_plans_free(pl, kp->nkernels);
            /* the flash kernels again with MINIC_CUDA_ATTN_DECODE=0 */
            int *align = calloc((size_t)kp->nbuffers + 1, sizeof(int));
            assert_non_null(align);
            mc_cuda_buffer_align(kp, align);
            setenv("MINIC_CUDA_ATTN_DECODE", "0", 1);
            if (mc_cuda_plan_program(kp, &target, align, &pl) != MC_OK)
                fail_msg("%s", mc_error_message());
            unsetenv("MINIC_CUDA_ATTN_DECODE");
            for (int k = 0; k < kp->nkernels; k++)
                if (kp->kernels[k].category == KIR_ATTENTION)
                    assert_string_not_equal(pl[k].code.scheme, "attention-decode");
            mc_cuda_plans_free(pl, kp->nkernels);
            free(align);
            kir_program_free(kp);
            mc_graph_free(g);
        }
    assert_int_equal(kernels, 9);
}


/* g compiled once over its symbols (*sized), then bound to `values` and every kernel rendered
 * from *sized with its sizes read when it runs (none for the binding alone) and compiled; the
 * binding's program is returned, its plans in *pl. conv_gather: as the cuda backend compiles. */
static kir_program *compile_sized(const mc_graph *g, bool conv_gather, const int64_t *values, kir_program **sized,
                                  mc_cuda_kernel_plan **pl)
{
    char refused[MC_COMPILE_REFUSED] = "";
    mc_compile_options co = {.fuse = true, .plan_memory = true, .verify = true, .symbolic = true,
                             .conv_gather = conv_gather, .refused = refused};
    if (mc_compile_kernels(g, &co, sized) != MC_OK || !*sized)
        fail_msg("%s %s", mc_error_message(), refused);
    int specialized = -1;
    char why[200];
    kir_program *kp = cuda_plan_binding(*sized, values, true, &target, pl, &specialized, why, sizeof why);
    if (specialized != 0)
        fail_msg("%d kernels rendered for the binding: %s", specialized, why);
    compile_plans(kp, *pl);
    return kp;
}

/* Kernels of symbolic programs rendered with their sizes read when they run (one source for
 * every binding, mc_cuda_plan_program_sized), none rendered for the binding: the decode kernel
 * over a symbolic cache length in every dtype (its key range and chunks from S_ and the grid),
 * under a band too, and the tiled GEMM where cuBLASLt takes no layout (A read with a step
 * along K). */
static void test_sized_kernels(void **state)
{
    (void)state;
    static const char *const dtypes[] = {"f32", "f16", "bf16"};
    for (int t = 0; t < 4; t++) {
        char text[2048];
        if (t < 3)
            snprintf(text, sizeof text,
                     "graph a\ninput q : %s[B, 3, 1, 64]\ninput kc : %s[B, 3, S<=1024, 64]\n"
                     "input vc : %s[B, 3, S, 64]\ninput mk : %s[B, 1, 1, S]\n"
                     "kt = transpose(kc, perm=[0, 1, 3, 2])\ns0 = matmul(q, kt)\ns1 = mul(s0, 0.125)\n"
                     "s = add(s1, mk)\np = softmax(s)\ny = matmul(p, vc)\noutput y\n",
                     dtypes[t], dtypes[t], dtypes[t], dtypes[t]);
        else
            snprintf(text, sizeof text,
                     "graph a\ninput q : f32[B, 2, 2, 80]\ninput kc : f32[B, 2, S<=1024, 80]\n"
                     "input vc : f32[B, 2, S, 80]\ninput x : f32[B, S, 40]\nparam w : f32[20, 24]\n"
                     "kt = transpose(kc, perm=[0, 1, 3, 2])\ns0 = matmul(q, kt)\n"
                     "row = iota(shape=[2, S], axis=0)\ncol = iota(shape=[2, S], axis=1)\nrs = add(row, 40)\n"
                     "keep = le(col, rs)\nm = where(keep, s0, -inf)\np = softmax(m)\ny = matmul(p, vc)\n"
                     "xs = slice(x, axis=2, start=0, end=40, step=2)\nz = matmul(xs, w)\noutput y, z\n");
        mc_graph *g = graph_of(text);
        const int64_t values[2] = {2, 300};
        kir_program *sized;
        mc_cuda_kernel_plan *pl;
        kir_program *kp = compile_sized(g, false, values, &sized, &pl);
        bool decode = false, tiled = false;
        for (int k = 0; k < kp->nkernels; k++) {
            if (!pl[k].has_code)
                continue;
            decode |= !strcmp(pl[k].code.scheme, "attention-decode");
            tiled |= !strcmp(pl[k].code.scheme, "gemm-tiled");
            if (!strcmp(pl[k].code.scheme, "attention-decode"))
                assert_non_null(strstr(pl[k].code.src.data, "split_n_ = (int)gridDim.x /"));
        }
        assert_true(decode);
        assert_true(tiled == (t == 3));
        mc_cuda_plans_free(pl, kp->nkernels);
        kir_program_free(kp);
        kir_program_free(sized);
        mc_graph_free(g);
    }
}

/* A padded maxpool over a symbolic batch, rendered once with its sizes read when it runs: the
 * window's indices lie along the constant spatial axes, so kir_facts proves them there too (no
 * check, no division). Positions along T<=64 into a table of 64 rows are proven by T's declared
 * maximum; along U, which has none, they keep their check. */
static void test_sized_pool_kernels(void **state)
{
    (void)state;
    mc_graph *g = graph_of("graph a\ninput x : f16[B, 8, 14, 14]\ninput ids : i32[B, T<=64]\ninput jd : i32[B, U]\n"
                           "param wpe : f16[64, 32]\n"
                           "y = maxpool(x, kernel=[3, 3], stride=[2, 2], padding=[1, 1])\n"
                           "pos = iota(shape=[B, T], axis=1)\np = gather(wpe, pos)\nz = relu(p)\n"
                           "pu = iota(shape=[B, U], axis=1)\nq = gather(wpe, pu)\nzu = relu(q)\noutput y, z, zu\n");
    const int64_t values[3] = {3, 17, 70};
    kir_program *sized;
    mc_cuda_kernel_plan *pl;
    kir_program *kp = compile_sized(g, true, values, &sized, &pl);
    int pools = 0, proven = 0, checked = 0;
    for (int k = 0; k < kp->nkernels; k++) {
        if (!pl[k].has_code)
            continue;
        const char *body = pl[k].code.src.data + pl[k].code.body;
        assert_non_null(strstr(body, "S_.v[")); /* sizes read when it runs */
        if (strstr(kp->kernels[k].name, "maxpool")) {
            pools++;
            assert_lean_pool(body);
        } else if (strstr(kp->kernels[k].name, "gather")) {
            proven += strstr(body, "mc_gather_index(") == NULL;
            checked += strstr(body, "mc_gather_index(") != NULL;
        }
    }
    assert_int_equal(pools, 1);
    assert_int_equal(proven, 1);
    assert_int_equal(checked, 1);
    mc_cuda_plans_free(pl, kp->nkernels);
    kir_program_free(kp);
    kir_program_free(sized);
    mc_graph_free(g);
}

/* A KV cache's update (where(sel, new, cache) stored over the cache's own layout) is written
 * for both cases: two buffers (every element stored), or one when mc_program_feed_back makes
 * the output the input itself (mc_same_: the cache neither loaded nor stored outside the new
 * entries); a where whose kept operand is laid out otherwise (broadcast) is not. */
static void test_in_place_update_kernel(void **state)
{
    (void)state;
    static const char *const graphs[] = {
        "graph u\ninput cache : f32[2, 3, 16, 8]\ninput new : f32[2, 3, 1, 8]\ninput pos : i32[]\n"
        "out = update(cache, new, pos, axis=2)\noutput out\n",
        "graph u\ninput cache : bf16[2, 3, 16, 64]\ninput new : bf16[2, 3, 2, 64]\ninput pos : i32[]\n"
        "out = update(cache, new, pos, axis=2)\noutput out\n",
        "graph w\ninput s : f32[4, 64]\ninput keep : bool[4, 64]\nout = where(keep, s, -inf)\noutput out\n",
        "graph b\ninput s : f32[1, 64]\ninput keep : bool[4, 64]\nout = where(keep, s, -inf)\noutput out\n",
    };
    for (int i = 0; i < 4; i++) {
        mc_graph *g;
        if (mc_graph_parse_string("u.graph", graphs[i], &g) != MC_OK)
            fail_msg("%s", mc_error_message());
        mc_compile_options co = {.fuse = true, .plan_memory = true, .verify = true};
        kir_program *kp;
        if (mc_compile_kernels(g, &co, &kp) != MC_OK)
            fail_msg("%s", mc_error_message());
        mc_cuda_kernel_plan *pl = compile_all(kp);
        const char *src = pl[kp->nkernels - 1].code.src.data; /* the last kernel stores out */
        if (i < 3) {
            assert_non_null(strstr(src, "const bool mc_same_ = (const void *)p"));
            assert_non_null(strstr(src, i == 1 ? "mc_same_ ? mc_vec<__nv_bfloat16, 8>{}" : "mc_same_ ? mc_vec<float, 4>{}"));
            assert_non_null(strstr(src, i < 2 ? "if (v" : "if (!v")); /* the mirror: x kept where keep is false */
            assert_null(strstr(src, "__restrict__")); /* two pointers compared */
        } else {
            assert_null(strstr(src, "mc_same_"));
        }
        mc_cuda_plans_free(pl, kp->nkernels);
        kir_program_free(kp);
        mc_graph_free(g);
    }
}
#endif

/* Without a GPU the probe says why, in the words docs/FORMAT.md §3's exit-2 message needs. */
static void test_probe_reason(void **state)
{
    (void)state;
    mc_status st = mc_backend_cuda.probe();
    if (st == MC_OK)
        return; /* a GPU machine: nothing to check here */
    assert_int_equal(st, MC_ERR_SYSTEM);
    const char *msg = mc_error_message();
    assert_true(strstr(msg, "no CUDA driver") || strstr(msg, "no CUDA device") ||
                strstr(msg, "driver too old") || strstr(msg, "failed to initialize"));
}

/* dump_code works without a device: every kernel's source or its cuBLASLt plan. */
static void test_dump_code(void **state)
{
    (void)state;
    kir_program *kp = fx_gemms(3, 40, 24, 32, MC_BF16);
    mc_program p = {.kp = kp, .backend = &mc_backend_cuda};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(mc_backend_cuda.dump_code(&p, f), MC_OK);
    fclose(f);
    assert_non_null(strstr(buf, "cuBLASLt matmul"));
    assert_non_null(strstr(buf, "epilogue=GELU_BIAS"));
    assert_non_null(strstr(buf, "__global__ void __launch_bounds__(256) gemm_gelu_mul_2"));
    assert_non_null(strstr(buf, "gemm_bcast_3"));
    assert_non_null(strstr(buf, "mc_gelu(")); /* the erf form stays exact in the epilogue */
    free(buf);
    fx_free(kp);
    /* f32: no GELU epilogue in cuBLASLt (its approximation costs f32 accuracy); the bias and
     * gelu_tanh run in the generated epilogue kernel, which says why */
    kp = fx_gemms(3, 40, 24, 32, MC_F32);
    p.kp = kp;
    f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(mc_backend_cuda.dump_code(&p, f), MC_OK);
    fclose(f);
    assert_null(strstr(buf, "epilogue=GELU"));
    assert_non_null(strstr(buf, "epilogue=DEFAULT alpha=1 beta=0; f32 scratch then the epilogue kernel "
                                "(gelu_tanh in f32"));
    assert_non_null(strstr(buf, "gemm_bias_gelu_tanh_0"));
    assert_non_null(strstr(buf, "mc_gelu_tanh("));
    free(buf);
    fx_free(kp);
}

int main(void)
{
    if (!mc_cuda_have_nvrtc()) {
        printf("skipped: no NVRTC (%s)\n", mc_error_message());
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pointwise),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_gemms),
        cmocka_unit_test(test_gemv),
        cmocka_unit_test(test_compile_error_names_source),
        cmocka_unit_test(test_cache_hit),
        cmocka_unit_test(test_failure_dump_never_follows_symlinks),
        cmocka_unit_test(test_cache_key),
        cmocka_unit_test(test_cache_evict),
        cmocka_unit_test(test_probe_reason),
        cmocka_unit_test(test_dump_code),
#ifdef MINIC_HAVE_PASSES
        cmocka_unit_test(test_examples),
        cmocka_unit_test(test_attention_kernels),
        cmocka_unit_test(test_decode_attention_kernels),
        cmocka_unit_test(test_sized_kernels),
        cmocka_unit_test(test_sized_pool_kernels),
        cmocka_unit_test(test_in_place_update_kernel),
        cmocka_unit_test(test_more_operators),
        cmocka_unit_test(test_symbolic_kernels),
        cmocka_unit_test(test_implicit_conv_kernels),
        cmocka_unit_test(test_implicit_conv_stages),
        cmocka_unit_test(test_implicit_conv_kchunk),
        cmocka_unit_test(test_implicit_conv_clast),
        cmocka_unit_test(test_implicit_conv_knobs),
        cmocka_unit_test(test_gather_vec_scalar),
        cmocka_unit_test(test_sized_conv_kernels),
#endif
    };
    return mc_test_run(tests);
}
#else
#ifdef MINIC_HAVE_PASSES
#include <dirent.h>

#include "passes/passes.h"

/* Every kernel of every example graph, fused and unfused, renders and compiles. */
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
        mc_graph *g;
        if (mc_graph_parse_file(mc_test_src(rel), &g) != MC_OK)
            fail_msg("%s", mc_error_message());
        for (int fuse = 0; fuse <= 1; fuse++) {
            mc_compile_options co = {.fuse = fuse, .plan_memory = true, .verify = true};
            kir_program *kp;
            if (mc_compile_kernels(g, &co, &kp) != MC_OK)
                fail_msg("%s: %s", rel, mc_error_message());
            mc_cuda_kernel_plan *pl = compile_all(kp);
            mc_cuda_plans_free(pl, kp->nkernels);
            kir_program_free(kp);
        }
        mc_graph_free(g);
        graphs++;
    }
    closedir(d);
    assert_true(graphs >= 6);
}
#endif

/* Without a GPU the probe says why, in the words docs/FORMAT.md §3's exit-2 message needs. */
static void test_probe_reason(void **state)
{
    (void)state;
    mc_status st = mc_backend_cuda.probe();
    if (st == MC_OK)
        return; /* a GPU machine: nothing to check here */
    assert_int_equal(st, MC_ERR_SYSTEM);
    const char *msg = mc_error_message();
    assert_true(strstr(msg, "no CUDA driver") || strstr(msg, "no CUDA device") ||
                strstr(msg, "driver too old") || strstr(msg, "failed to initialize"));
}

/* dump_code works without a device: every kernel's source or its cuBLASLt plan. */
static void test_dump_code(void **state)
{
    (void)state;
    kir_program *kp = fx_gemms(3, 40, 24, 32, MC_BF16);
    mc_program p = {.kp = kp, .backend = &mc_backend_cuda};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(mc_backend_cuda.dump_code(&p, f), MC_OK);
    fclose(f);
    assert_non_null(strstr(buf, "cuBLASLt matmul"));
    assert_non_null(strstr(buf, "epilogue=GELU_BIAS"));
    assert_non_null(strstr(buf, "__global__ void __launch_bounds__(256) gemm_gelu_mul_2"));
    assert_non_null(strstr(buf, "gemm_bcast_3"));
    assert_non_null(strstr(buf, "mc_gelu(")); /* the erf form stays exact in the epilogue */
    free(buf);
    fx_free(kp);
}

int main(void)
{
    printf("skipped: no NVRTC (minic was built without the CUDA backend)\n");
    return 77;
}
#endif
