/* mc_program_bind_memory and mc_program_bind_output_memory (include/minic.h): inputs, params
 * and outputs in the caller's own memory.
 *
 * On every backend it runs on, host memory: a run reads the caller's input array as it is at
 * that run (changed between runs without a call), a param too (a matmul's weight: the cpu
 * backend repacks it), queued runs as well; an output lands in the caller's array after
 * mc_program_run and after mc_program_wait, and mc_program_output's data is that array; on ref
 * and cpu nothing is copied (a run writes the array while it runs: checked by an output fed to
 * nothing but the caller); binding the name again (mc_program_set) ends the binding without
 * writing into the caller's array; data NULL ends it keeping the value; the errors (size,
 * alignment, unknown name, out-of-range output, device memory on ref and cpu, a fed-back input
 * either way, symbolic); `output x` of an input x bound to the caller's memory holds x. On cuda, also device memory (cuMemAlloc'd here):
 * the kernels read and write it in place, a change to it between runs is seen, ending the
 * binding keeps the value.
 *
 * Backends: ref and cpu, and cuda where a GPU is usable (else "cuda: skipped: no GPU");
 * MINIC_TEST_BACKEND=ref|cpu|cuda runs that one only (cuda without a GPU: exit 77).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "minic.h"
#include <dlfcn.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>

static mc_backend_kind backends[3];
static int nbackends;

/* Is cuda among the backends under test (MINIC_TEST_BACKEND, or a GPU here)? */
static bool testing_cuda(void)
{
    for (int i = 0; i < nbackends; i++)
        if (backends[i] == MC_BACKEND_CUDA)
            return true;
    return false;
}

static void keep_note(void *ctx, const char *note)
{
    (void)ctx;
    (void)note;
}

static mc_program *compile(const char *text, mc_backend_kind kind)
{
    mc_graph *g = NULL;
    if (mc_graph_parse_string("t.graph", text, &g) != MC_OK)
        fail_msg("parse: %s", mc_error_message());
    mc_options opt = mc_test_options();
    opt.backend = kind;
    opt.quiet = false; /* notes kept for mc_program_notes (test_mapped reads them), not printed */
    opt.note = keep_note;
    if (kind == MC_BACKEND_CUDA)
        opt.cuda_graph = 1;
    mc_program *p = NULL;
    if (mc_program_compile(g, &opt, &p) != MC_OK)
        fail_msg("compile on %s: %s", mc_backend_name(kind), mc_error_message());
    mc_graph_free(g);
    return p;
}

static void ok(mc_status st, const char *what)
{
    if (st != MC_OK)
        fail_msg("%s: %s", what, mc_error_message());
}

static void same(const float *got, const float *want, int n, const char *what, const mc_program *p)
{
    for (int i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("%s on %s: element %d is %g, expected %g", what, mc_program_backend(p), i, (double)got[i],
                     (double)want[i]);
}

/* cuda: device memory of the caller's, read and written in place. The driver's calls are
 * looked up here (the tests are built without CUDA's headers). */
typedef int (*cu_fn)();
static void *cu_lib;
static cu_fn cu(const char *name)
{
    if (!cu_lib)
        cu_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    cu_fn f = cu_lib ? (cu_fn)(uintptr_t)dlsym(cu_lib, name) : NULL;
    if (!f)
        fail_msg("libcuda: no %s", name);
    return f;
}

enum { CU_REGISTER_DEVICEMAP = 2, CU_ERROR_ALREADY_REGISTERED = 712 };

/* The test's own hold on GPU 0's primary context, current on this thread: the driver's calls
 * made here need one, also after the programs (which hold it too) are freed. */
static void hold_context(void)
{
    static void *ctx;
    static int dev;
    if (!ctx) {
        assert_int_equal(((int (*)(unsigned))cu("cuInit"))(0), 0);
        assert_int_equal(((int (*)(int *, int))cu("cuDeviceGet"))(&dev, 0), 0);
        assert_int_equal(((int (*)(void **, int))cu("cuDevicePrimaryCtxRetain"))(&ctx, dev), 0);
    }
    assert_int_equal(((int (*)(void *))cu("cuCtxSetCurrent"))(ctx), 0);
}

/* Is [data, data + bytes) page-locked now? Registering it again says so (and when it was not,
 * the registration made to find out is undone). */
static bool page_locked(void *data, size_t bytes)
{
    hold_context();
    int r = ((int (*)(void *, size_t, unsigned))cu("cuMemHostRegister_v2"))(data, bytes, 0);
    if (r == 0)
        assert_int_equal(((int (*)(void *))cu("cuMemHostUnregister"))(data), 0);
    else if (r != CU_ERROR_ALREADY_REGISTERED)
        fail_msg("cuMemHostRegister: error %d", r);
    return r != 0;
}

/* y = x @ w + 1, z = x * 2 */
static const char graph[] = "graph mm\n"
                            "input x : f32[2, 4]\n"
                            "param w : f32[4, 3]\n"
                            "m = matmul(x, w)\n"
                            "y = add(m, 1)\n"
                            "z = mul(x, 2)\n"
                            "output y, z\n";

static void expected(const float *x, const float *w, float *y, float *z)
{
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            y[3 * i + j] = 1;
            for (int k = 0; k < 4; k++)
                y[3 * i + j] += x[4 * i + k] * w[3 * k + j];
        }
    for (int i = 0; i < 8; i++)
        z[i] = 2 * x[i];
}

/* Host memory of the caller's, in pages of their own (cuda maps whole pages). */
static float *host_array(void)
{
    float *a = aligned_alloc(4096, 4096);
    assert_non_null(a);
    memset(a, 0, 4096);
    return a;
}

static void host_on(mc_backend_kind kind, bool async, mc_memory where)
{
    mc_program *p = compile(graph, kind);
    float *x = host_array(), *w = host_array(), *y = host_array(), *z = host_array(), wy[6], wz[8];
    for (int i = 0; i < 8; i++)
        x[i] = (float)(i + 1);
    for (int i = 0; i < 12; i++)
        w[i] = (float)(i % 5) - 2;
    ok(mc_program_bind_memory(p, "x", x, 8 * sizeof *x, where), "bind x");
    ok(mc_program_bind_memory(p, "w", w, 12 * sizeof *w, where), "bind w");
    ok(mc_program_bind_output_memory(p, 0, y, 6 * sizeof *y, where), "bind y");
    ok(mc_program_bind_output_memory(p, 1, z, 8 * sizeof *z, where), "bind z");
    bool mapped = kind == MC_BACKEND_CUDA && where == MC_MEMORY_HOST_MAPPED;
    if (mapped) { /* mapped, not copied: page-locked while bound, and no note of a fallback */
        const char *notes = mc_program_notes(p);
        if (notes && strstr(notes, "not mapped"))
            fail_msg("notes: %s", notes);
        assert_true(page_locked(x, 8 * sizeof *x));
        assert_true(page_locked(z, 8 * sizeof *z));
    }
    for (int step = 0; step < 4; step++) {
        x[step] += 10; /* changed in place between runs: no call */
        w[step * 2] -= 1;
        memset(y, 0, 6 * sizeof *y);
        ok(async ? mc_program_run_async(p) : mc_program_run(p), "run");
        if (async)
            ok(mc_program_wait(p), "wait");
        expected(x, w, wy, wz);
        same(y, wy, 6, "y in the caller's array", p);
        same(z, wz, 8, "z in the caller's array", p);
        mc_tensor t;
        ok(mc_program_output(p, 0, &t), "output");
        assert_ptr_equal(t.data, y);
    }
    /* mc_program_set ends the binding and does not write into the caller's array */
    float x2[8] = {1, 1, 1, 1, 1, 1, 1, 1}, keep[8];
    memcpy(keep, x, sizeof keep);
    ok(mc_program_set(p, "x", x2, sizeof x2), "set x");
    if (mapped)
        assert_false(page_locked(x, 8 * sizeof *x)); /* unmapped when the binding ended */
    ok(mc_program_run(p), "run after set");
    same(x, keep, 8, "the caller's x after mc_program_set", p);
    expected(x2, w, wy, wz);
    same(y, wy, 6, "y from the set x", p);
    x[0] = 1000; /* no longer read */
    ok(mc_program_run(p), "run");
    same(y, wy, 6, "y after the caller's x changed, unbound", p);
    /* NULL ends a binding, keeping the value */
    ok(mc_program_bind_memory(p, "w", NULL, 0, where), "unbind w");
    float wkeep[12];
    memcpy(wkeep, w, sizeof wkeep);
    w[0] = 99;
    ok(mc_program_bind_output_memory(p, 0, NULL, 0, where), "unbind y");
    float y_before[6];
    memcpy(y_before, y, sizeof y_before);
    ok(mc_program_run(p), "run");
    expected(x2, wkeep, wy, wz);
    same(y, y_before, 6, "the caller's y after its binding ended", p);
    float got[6];
    ok(mc_program_read_output(p, 0, got, sizeof got), "read y");
    same(got, wy, 6, "y with w's value kept", p);
    if (mapped) {
        assert_false(page_locked(w, 12 * sizeof *w));
        assert_false(page_locked(y, 6 * sizeof *y));
        assert_true(page_locked(z, 8 * sizeof *z)); /* still bound */
    }
    mc_program_free(p);
    if (mapped)
        assert_false(page_locked(z, 8 * sizeof *z)); /* unmapped when the program was freed */
    free(x);
    free(w);
    free(y);
    free(z);
}

static void test_host(void **state)
{
    (void)state;
    for (int i = 0; i < nbackends; i++) {
        host_on(backends[i], false, MC_MEMORY_HOST);
        host_on(backends[i], true, MC_MEMORY_HOST);
        host_on(backends[i], false, MC_MEMORY_HOST_MAPPED); /* ref and cpu: as MC_MEMORY_HOST */
        host_on(backends[i], true, MC_MEMORY_HOST_MAPPED);
    }
}

static void expect_error(mc_status st, const char *const *words)
{
    assert_int_equal(st, MC_ERR_INPUT);
    for (; *words; words++)
        if (!strstr(mc_error_message(), *words))
            fail_msg("the message lacks '%s': %s", *words, mc_error_message());
}

static void test_errors(void **state)
{
    (void)state;
    for (int i = 0; i < nbackends; i++) {
        mc_program *p = compile(graph, backends[i]);
        _Alignas(256) float buf[16] = {0};
        expect_error(mc_program_bind_memory(p, "x", buf, 4, false),
                     (const char *[]){"input 'x'", "f32[2, 4]", "32 bytes", "4 bytes", NULL});
        expect_error(mc_program_bind_memory(p, "xx", buf, 32, false), (const char *[]){"'xx'", NULL});
        expect_error(mc_program_bind_memory(p, "y", buf, 24, false), (const char *[]){"computed", NULL});
        expect_error(mc_program_bind_memory(p, "x", (char *)buf + 2, 32, false),
                     (const char *[]){"input 'x'", "not aligned to 4 bytes", NULL});
        expect_error(mc_program_bind_output_memory(p, 2, buf, 24, false), (const char *[]){"output 2", "out of range", NULL});
        expect_error(mc_program_bind_output_memory(p, 1, buf, 24, false),
                     (const char *[]){"output 1 ('z')", "32 bytes", NULL});
        expect_error(mc_program_bind_memory(NULL, "x", buf, 32, false), (const char *[]){"no program", NULL});
        expect_error(mc_program_bind_memory(p, "x", buf, 32, 7),
                     (const char *[]){"unknown kind of memory 7", "MC_MEMORY_HOST_MAPPED", NULL});
        expect_error(mc_program_bind_output_memory(p, 0, buf, 24, -1), (const char *[]){"unknown kind", NULL});
        if (backends[i] == MC_BACKEND_CUDA) /* mapped: 256-byte aligned (cuBLASLt's algorithms assume it) */
            expect_error(mc_program_bind_memory(p, "x", (char *)buf + 16, 32, MC_MEMORY_HOST_MAPPED),
                         (const char *[]){"input 'x'", "not aligned to 256 bytes", "aligned_alloc(256", NULL});
        else /* ref and cpu: host memory as any other, aligned to its dtype */
            ok(mc_program_bind_memory(p, "x", (char *)buf + 16, 32, MC_MEMORY_HOST_MAPPED), "bind x mapped");
        expect_error(mc_program_bind_output_memory(NULL, 0, buf, 24, false), (const char *[]){"no program", NULL});
        if (backends[i] != MC_BACKEND_CUDA)
            expect_error(mc_program_bind_memory(p, "x", buf, 32, true),
                         (const char *[]){"device memory needs a program on the cuda backend", NULL});
        else
            expect_error(mc_program_bind_memory(p, "x", (char *)buf + 16, 32, true),
                         (const char *[]){"not aligned to 256 bytes", NULL});
        mc_program_free(p);

        /* fed back inputs and outputs: either order refused */
        p = compile("graph fb\ninput x : f32[4]\ny = add(x, 1)\noutput y, x\n", backends[i]);
        _Alignas(16) float xo[4] = {0}, xin[4] = {1, 2, 3, 4};
        if (mc_program_bind_output_memory(p, 1, xo, sizeof xo, false) == MC_OK) { /* `output x`: a copy of x */
            ok(mc_program_set(p, "x", xin, sizeof xin), "set x");
            ok(mc_program_run(p), "run");
            same(xo, xin, 4, "output x in the caller's array", p);
            ok(mc_program_bind_output_memory(p, 1, NULL, 0, false), "unbind output x");
        } else {
            expect_error(MC_ERR_INPUT, (const char *[]){"output 1 ('x')", "is the input 'x' itself", NULL});
        }
        ok(mc_program_bind_memory(p, "x", buf, 16, false), "bind x");
        expect_error(mc_program_feed_back(p, "x", 0, NULL), (const char *[]){"bound to the caller's memory", NULL});
        ok(mc_program_bind_memory(p, "x", NULL, 0, false), "unbind x");
        ok(mc_program_feed_back(p, "x", 0, NULL), "feed back");
        expect_error(mc_program_bind_memory(p, "x", buf, 16, false), (const char *[]){"is fed back", NULL});
        expect_error(mc_program_bind_output_memory(p, 0, buf, 16, false), (const char *[]){"is fed back", NULL});
        mc_program_free(p);
        p = compile("graph sym\ninput x : f32[N, 2]\ny = add(x, 1)\noutput y\n", backends[i]);
        expect_error(mc_program_bind_memory(p, "x", buf, 16, false), (const char *[]){"symbolic", NULL});
        mc_program_free(p);
    }
}

#ifdef MINIC_HAVE_CUDA_BACKEND

static void test_device(void **state)
{
    (void)state;
    if (!testing_cuda())
        return;
    cu_lib = cu_lib ? cu_lib : dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    assert_non_null(cu_lib);
    int dev = 0;
    void *ctx = NULL;
    unsigned long long dx = 0, dz = 0; /* CUdeviceptr */
    assert_int_equal(((int (*)(unsigned))cu("cuInit"))(0), 0);
    assert_int_equal(((int (*)(int *, int))cu("cuDeviceGet"))(&dev, 0), 0);
    assert_int_equal(((int (*)(void **, int))cu("cuDevicePrimaryCtxRetain"))(&ctx, dev), 0);
    assert_int_equal(((int (*)(void *))cu("cuCtxSetCurrent"))(ctx), 0);
    int (*mem_alloc)(unsigned long long *, size_t) = (int (*)(unsigned long long *, size_t))cu("cuMemAlloc_v2");
    int (*mem_free)(unsigned long long) = (int (*)(unsigned long long))cu("cuMemFree_v2");
    /* synchronous copies: done when they return (the program's own queued work is waited for
     * with mc_program_wait first) */
    int (*htod)(unsigned long long, const void *, size_t) =
        (int (*)(unsigned long long, const void *, size_t))cu("cuMemcpyHtoD_v2");
    int (*dtoh)(void *, unsigned long long, size_t) = (int (*)(void *, unsigned long long, size_t))cu("cuMemcpyDtoH_v2");
    mc_program *p = compile(graph, MC_BACKEND_CUDA);
    assert_int_equal(mem_alloc(&dx, 256), 0);
    assert_int_equal(mem_alloc(&dz, 256), 0);
    float x[8], w[12], y[6], z[8], wy[6], wz[8];
    for (int k = 0; k < 8; k++)
        x[k] = (float)(k - 3);
    for (int k = 0; k < 12; k++)
        w[k] = (float)k / 4;
    ok(mc_program_set(p, "w", w, sizeof w), "set w");
    ok(mc_program_bind_memory(p, "x", (void *)(uintptr_t)dx, sizeof x, true), "bind x on the device");
    ok(mc_program_bind_output_memory(p, 1, (void *)(uintptr_t)dz, sizeof z, true), "bind z on the device");
    for (int step = 0; step < 3; step++) {
        x[step] *= 3;
        assert_int_equal(htod(dx, x, sizeof x), 0);
        ok(step == 1 ? mc_program_run_async(p) : mc_program_run(p), "run");
        ok(mc_program_wait(p), "wait");
        assert_int_equal(dtoh(z, dz, sizeof z), 0);
        expected(x, w, wy, wz);
        same(z, wz, 8, "z in the caller's device memory", p);
        ok(mc_program_read_output(p, 0, y, sizeof y), "read y");
        same(y, wy, 6, "y from x in the caller's device memory", p);
        ok(mc_program_read_output(p, 1, z, sizeof z), "read z");
        same(z, wz, 8, "z read back from the caller's device memory", p);
    }
    /* ending the bindings keeps the values; the caller's memory is then free to go */
    ok(mc_program_bind_memory(p, "x", NULL, 0, true), "unbind x");
    ok(mc_program_bind_output_memory(p, 1, NULL, 0, true), "unbind z");
    assert_int_equal(mem_free(dx), 0);
    assert_int_equal(mem_free(dz), 0);
    ok(mc_program_run(p), "run after the device memory was freed");
    ok(mc_program_read_output(p, 1, z, sizeof z), "read z");
    same(z, wz, 8, "z from x's kept value", p);
    mc_program_free(p);
    ((int (*)(int))cu("cuDevicePrimaryCtxRelease"))(dev);
}
#endif

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* cuda, MC_MEMORY_HOST_MAPPED beyond test_host: memory the caller page-locked itself (used as it
 * is, left registered), memory the driver cannot page-lock (read-only: copied instead, the notes
 * say why; a driver that maps it anyway is fine too), and one array mapped by two programs
 * (unmapped with the last). */
static void test_mapped(void **state)
{
    (void)state;
    if (!testing_cuda())
        return;
    float w[12], y[6], z[8], wy[6], wz[8];
    for (int k = 0; k < 12; k++)
        w[k] = (float)(k % 3) - 1;
    hold_context();
    float *x = host_array();
    for (int k = 0; k < 8; k++)
        x[k] = (float)k / 2;
    assert_int_equal(((int (*)(void *, size_t, unsigned))cu("cuMemHostRegister_v2"))(x, 4096, CU_REGISTER_DEVICEMAP), 0);
    mc_program *p = compile(graph, MC_BACKEND_CUDA);
    ok(mc_program_set(p, "w", w, sizeof w), "set w");
    ok(mc_program_bind_memory(p, "x", x, 8 * sizeof *x, MC_MEMORY_HOST_MAPPED), "bind the caller's page-locked x");
    if (mc_program_notes(p) && strstr(mc_program_notes(p), "not mapped"))
        fail_msg("notes: %s", mc_program_notes(p));
    for (int step = 0; step < 3; step++) {
        x[step] -= 4;
        ok(mc_program_run(p), "run");
        ok(mc_program_read_output(p, 0, y, sizeof y), "read y");
        ok(mc_program_read_output(p, 1, z, sizeof z), "read z");
        expected(x, w, wy, wz);
        same(y, wy, 6, "y from the caller's page-locked x", p);
        same(z, wz, 8, "z from the caller's page-locked x", p);
    }
    ok(mc_program_bind_memory(p, "x", NULL, 0, MC_MEMORY_HOST_MAPPED), "unbind x");
    /* still registered: the caller's own registration, which the program left alone */
    hold_context();
    assert_int_equal(((int (*)(void *))cu("cuMemHostUnregister"))(x), 0);
    float kept[8];
    memcpy(kept, x, sizeof kept);
    free(x);
    ok(mc_program_run(p), "run with x's kept value");
    ok(mc_program_read_output(p, 1, z, sizeof z), "read z");
    expected(kept, w, wy, wz);
    same(z, wz, 8, "z from x's kept value", p);

    float *ro = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(ro != MAP_FAILED);
    for (int k = 0; k < 8; k++)
        ro[k] = (float)(3 - k);
    assert_int_equal(mprotect(ro, 4096, PROT_READ), 0);
    ok(mc_program_bind_memory(p, "x", ro, 8 * sizeof *ro, MC_MEMORY_HOST_MAPPED), "bind read-only x");
    const char *notes = mc_program_notes(p);
    if (notes && strstr(notes, "input 'x': the host memory at"))
        printf("read-only memory: %s\n", strstr(notes, "input 'x': the host memory at"));
    else
        printf("read-only memory: mapped by this driver\n");
    ok(mc_program_run(p), "run with read-only x");
    ok(mc_program_read_output(p, 0, y, sizeof y), "read y");
    expected(ro, w, wy, wz);
    same(y, wy, 6, "y from read-only x", p);
    mc_program_free(p);
    assert_int_equal(munmap(ro, 4096), 0);

    x = host_array();
    for (int k = 0; k < 8; k++)
        x[k] = (float)(k * k) / 8;
    mc_program *a = compile(graph, MC_BACKEND_CUDA), *b = compile(graph, MC_BACKEND_CUDA);
    ok(mc_program_set(a, "w", w, sizeof w), "set w");
    ok(mc_program_set(b, "w", w, sizeof w), "set w");
    ok(mc_program_bind_memory(a, "x", x, 8 * sizeof *x, MC_MEMORY_HOST_MAPPED), "bind x to a");
    ok(mc_program_bind_memory(b, "x", x, 8 * sizeof *x, MC_MEMORY_HOST_MAPPED), "bind x to b");
    ok(mc_program_run(a), "run a");
    mc_program_free(a);
    assert_true(page_locked(x, 8 * sizeof *x)); /* b still maps it */
    ok(mc_program_run(b), "run b");
    ok(mc_program_read_output(b, 0, y, sizeof y), "read y");
    expected(x, w, wy, wz);
    same(y, wy, 6, "y of the second program", b);
    mc_program_free(b);
    assert_false(page_locked(x, 8 * sizeof *x));
    free(x);

    /* two arrays in one page, bound to two inputs: the second's pages overlap the first's
     * mapping (registration is by page), so it is copied instead and the notes say why */
    float *page = host_array();
    float *px = page, *pw = page + 64; /* 256 bytes apart */
    for (int k = 0; k < 8; k++)
        px[k] = (float)(k + 2);
    for (int k = 0; k < 12; k++)
        pw[k] = (float)(k % 4) - 1.5f;
    p = compile(graph, MC_BACKEND_CUDA);
    ok(mc_program_bind_memory(p, "x", px, 8 * sizeof *px, MC_MEMORY_HOST_MAPPED), "bind x in the page");
    ok(mc_program_bind_memory(p, "w", pw, 12 * sizeof *pw, MC_MEMORY_HOST_MAPPED), "bind w in the same page");
    notes = mc_program_notes(p);
    if (!notes || !strstr(notes, "param 'w': the host memory at") || !strstr(notes, "overlap") ||
        !strstr(notes, "copied at each run instead"))
        fail_msg("notes: %s", notes ? notes : "(none)");
    for (int step = 0; step < 2; step++) {
        px[step] += 1; /* mapped: read in place */
        pw[step] -= 1; /* copied: uploaded at each run from the caller's array */
        ok(mc_program_run(p), "run");
        ok(mc_program_read_output(p, 0, y, sizeof y), "read y");
        expected(px, pw, wy, wz);
        same(y, wy, 6, "y from x mapped and w copied", p);
    }
    mc_program_free(p);
    assert_false(page_locked(page, 4096));
    free(page);

    /* what it buys (printed, not asserted: the bus and the driver decide): 16 MB in and out,
     * read and written once, copied (MC_MEMORY_HOST) against mapped */
    enum { N = 1 << 22 };
    float *in = aligned_alloc(4096, sizeof(float) * N), *out = aligned_alloc(4096, sizeof(float) * N);
    assert_true(in && out);
    for (int k = 0; k < N; k++)
        in[k] = (float)(k % 100);
    for (int where = MC_MEMORY_HOST; where <= MC_MEMORY_HOST_MAPPED; where += MC_MEMORY_HOST_MAPPED) {
        mc_program *q = compile("graph big\ninput x : f32[4194304]\ny = mul(x, 3)\noutput y\n", MC_BACKEND_CUDA);
        ok(mc_program_bind_memory(q, "x", in, sizeof(float) * N, where), "bind x");
        ok(mc_program_bind_output_memory(q, 0, out, sizeof(float) * N, where), "bind y");
        ok(mc_program_run(q), "warm-up run");
        double t0 = now_ms();
        for (int r = 0; r < 20; r++)
            ok(mc_program_run(q), "run");
        double ms = (now_ms() - t0) / 20;
        for (int k = 0; k < N; k += 4099)
            if (out[k] != 3 * in[k])
                fail_msg("y[%d] = %g, expected %g", k, (double)out[k], (double)(3 * in[k]));
        printf("16 MB in and out, %s: %.3f ms per run\n", where == MC_MEMORY_HOST ? "copied" : "mapped", ms);
        mc_program_free(q);
    }
    free(in);
    free(out);
}

int main(void)
{
    int rc = mc_test_backends(backends, &nbackends);
    if (rc)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_mapped),
#ifdef MINIC_HAVE_CUDA_BACKEND
        cmocka_unit_test(test_device),
#endif
    };
    return mc_test_run(tests);
}
