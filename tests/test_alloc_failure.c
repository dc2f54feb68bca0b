/* Allocation failure injected into every step of minic's life: parse, compile (fused and
 * unfused, on the ref and the cpu backend), bind, run, save.
 *
 * This test is linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc (CMakeLists.txt, as
 * the test_*_oom.c tests are), so every allocation the library makes goes through the wrappers
 * of tests/failalloc.c. Unarmed, they call the real functions (__real_malloc resolves to the C
 * library's, or to the sanitizer's interceptor under ASan, so leak checking keeps working).
 * Armed with N, the Nth allocation from then on returns NULL. For each operation the test arms
 * N = 1, 2, ... and runs it, until a run finishes without reaching its Nth allocation: then
 * every allocation of the operation has been made to fail once. Each failing run must return
 * an error status with a message (or, where the library degrades gracefully, succeed with the
 * right result), never crash or abort, leave no output file, and leak nothing: LeakSanitizer
 * checks the whole process at exit, and nothing here frees on the library's behalf.
 *
 * Allocations the C library makes for itself (fopen's buffer, open_memstream) are not
 * wrapped: only the library's own calls are. On the cpu backend that leaves out LLVM's (C++,
 * in libLLVM), so what is tested there is minic's side: the generator, the cache, the JIT
 * set-up, the pool and the buffers. The cpu programs use one thread, so the allocations come
 * in the same order every time, and compile twice: with the compile cache (a hit: the cached
 * object code is loaded) and without it (optimization and code generation run).
 */
#include "testlib.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/runtime.h"

/* Failure injection (tests/failalloc.c): arm(n) makes the nth allocation from now fail. */
static bool injected;

static void arm(long n)
{
    injected = false;
    mc_test_fail_alloc(n - 1);
}

static void disarm(void)
{
    injected = mc_test_alloc_failed();
    mc_test_fail_alloc(-1);
}

/* ---- the operations ------------------------------------------------------------------------ */

static const char *tmp_path(const char *name)
{
    static char paths[4][4200];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, sizeof paths[0], "%s/%s", mc_test_tmpdir(), name);
    return p;
}

static bool file_exists(const char *path) { return access(path, F_OK) == 0; }

/* No temporary left next to an output: the directory holds only what the test put there. */
static int files_in_tmpdir(void)
{
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", mc_test_tmpdir());
    FILE *f = popen(cmd, "r");
    int n = -1;
    if (f) {
        if (fscanf(f, "%d", &n) != 1)
            n = -1;
        pclose(f);
    }
    return n;
}

/* A failing step: status set, a message. */
static void check_failure(mc_status st, const char *what, long n)
{
    if (st == MC_OK)
        return;
    if (st != MC_ERR_SYSTEM && st != MC_ERR_INPUT)
        fail_msg("%s, allocation %ld failing: status %d", what, n, st);
    const char *msg = mc_error_message();
    if (!msg || !msg[0])
        fail_msg("%s, allocation %ld failing: no message", what, n);
}

static void report(const char *what, long n, int graceful)
{
    print_message("%s: %ld allocations, each made to fail once (%d degraded gracefully)\n", what,
                  n - 1, graceful);
}

static void test_parse(void **state)
{
    (void)state;
    const char *path = mc_test_src("examples/mlp.graph");
    long n = 1;
    for (;; n++) {
        mc_graph *g = NULL;
        arm(n);
        mc_status st = mc_graph_parse_file(path, &g);
        disarm();
        if (!injected) {
            assert_int_equal(st, MC_OK);
            mc_graph_free(g);
            break;
        }
        check_failure(st, "parse", n);
        if (st != MC_OK)
            assert_null(g);
        mc_graph_free(g);
    }
    report("parse examples/mlp.graph", n, 0);
    assert_true(n > 10);
}

static mc_graph *load_mlp(void)
{
    mc_graph *g = NULL;
    if (mc_graph_parse_file(mc_test_src("examples/mlp.graph"), &g) != MC_OK)
        fail_msg("%s", mc_error_message());
    return g;
}

static mc_options options(mc_backend_kind kind, bool fuse)
{
    mc_options opt = mc_options_default();
    opt.backend = kind;
    opt.fuse = fuse;
    opt.threads = 1;
    opt.quiet = true;
    return opt;
}

static mc_options ref_options(bool fuse) { return options(MC_BACKEND_REF, fuse); }

/* Run a compiled program on seed-0 inputs; the output's bytes (malloc'd, unwrapped). */
static float *outputs_of(mc_program *p, size_t *bytes)
{
    assert_int_equal(mc_program_fill_random(p, 0), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK);
    mc_tensor t;
    assert_int_equal(mc_program_output(p, 0, &t), MC_OK);
    float *copy = malloc(t.bytes);
    assert_non_null(copy);
    memcpy(copy, t.data, t.bytes);
    *bytes = t.bytes;
    return copy;
}

static void compile_with_failures(mc_backend_kind kind, bool fuse, const char *what)
{
    mc_graph *g = load_mlp();
    mc_options opt = options(kind, fuse);
    mc_program *p = NULL;
    assert_int_equal(mc_program_compile(g, &opt, &p), MC_OK);
    size_t want_bytes;
    float *want = outputs_of(p, &want_bytes);
    mc_program_free(p);
    long n = 1;
    int graceful = 0;
    for (;; n++) {
        p = NULL;
        arm(n);
        mc_status st = mc_program_compile(g, &opt, &p);
        disarm();
        if (!injected) {
            assert_int_equal(st, MC_OK);
            mc_program_free(p);
            break;
        }
        check_failure(st, what, n);
        if (st != MC_OK) {
            assert_null(p);
            continue;
        }
        /* Degraded (e.g. no memory plan): the program must still compute the same. */
        graceful++;
        size_t bytes;
        float *got = outputs_of(p, &bytes);
        assert_int_equal(bytes, want_bytes);
        assert_memory_equal(got, want, bytes);
        free(got);
        mc_program_free(p);
    }
    report(what, n, graceful);
    assert_true(n > 10);
    free(want);
    mc_graph_free(g);
}

static void test_compile_fused(void **state)
{
    (void)state;
    compile_with_failures(MC_BACKEND_REF, true, "compile, ref, fused");
}

static void test_compile_unfused(void **state)
{
    (void)state;
    compile_with_failures(MC_BACKEND_REF, false, "compile, ref, unfused");
}

#ifdef MINIC_HAVE_CPU_BACKEND
/* The cache on (the first compile stores the entry, every later one loads it), then off. */
static void test_compile_cpu(void **state)
{
    (void)state;
    compile_with_failures(MC_BACKEND_CPU, true, "compile, cpu, fused, cached");
    compile_with_failures(MC_BACKEND_CPU, false, "compile, cpu, unfused, cached");
    setenv("MINIC_NO_CACHE", "1", 1);
    compile_with_failures(MC_BACKEND_CPU, true, "compile, cpu, fused, no cache");
    unsetenv("MINIC_NO_CACHE");
}
#endif

/* Binding: random fill, an .npy input and a .safetensors of weights, with failures. */
static void test_bind(void **state)
{
    (void)state;
    mc_graph *g = load_mlp();
    mc_options opt = ref_options(true);
    mc_program *p = NULL;
    assert_int_equal(mc_program_compile(g, &opt, &p), MC_OK);
    /* Files to bind from, written unarmed from the program's own random values. */
    assert_int_equal(mc_program_fill_random(p, 7), MC_OK);
    const char *x_path = tmp_path("x.npy"), *w_path = tmp_path("w.safetensors");
    mc_array x = {.dtype = MC_F32, .rank = 2, .shape = {32, 128}};
    x.data = p->host[mc_program_find(p, "x")];
    x.bytes = 32 * 128 * sizeof(float);
    assert_int_equal(mc_npy_write(x_path, &x), MC_OK);
    const char *names[] = {"fc1.w", "fc1.b", "fc2.w", "fc2.b"};
    const int64_t shapes[4][2] = {{512, 128}, {512, 0}, {128, 512}, {128, 0}};
    mc_array w[4];
    for (int i = 0; i < 4; i++) {
        int b = mc_program_find(p, names[i]);
        assert_true(b >= 0);
        w[i] = (mc_array){.dtype = MC_F32, .rank = shapes[i][1] ? 2 : 1,
                          .shape = {shapes[i][0], shapes[i][1]}, .data = p->host[b],
                          .bytes = (size_t)mc_program_numel(p, b) * sizeof(float)};
    }
    assert_int_equal(mc_safetensors_write(w_path, names, w, 4), MC_OK);
    mc_program_free(p);
    assert_int_equal(mc_program_compile(g, &opt, &p), MC_OK);

    long n = 1;
    for (;; n++) {
        arm(n);
        mc_status st = mc_program_load_npy(p, "x", x_path);
        if (st == MC_OK)
            st = mc_program_load_weights(p, w_path);
        if (st == MC_OK)
            st = mc_program_fill_random(p, 3);
        disarm();
        if (!injected) {
            assert_int_equal(st, MC_OK);
            break;
        }
        check_failure(st, "bind", n);
    }
    report("bind (.npy input, .safetensors weights, random fill)", n, 0);
    mc_program_free(p);
    mc_graph_free(g);
}

/* Run and save: failures in the run, in writing .safetensors and .npy, and in saving the inputs
 * (mc_program_save_inputs). No output file may be left by a failed save, and no temporary
 * beside it. */
static void run_and_save(mc_backend_kind kind, bool fuse)
{
    mc_graph *g = load_mlp();
    mc_options opt = options(kind, fuse);
    mc_program *p = NULL;
    assert_int_equal(mc_program_compile(g, &opt, &p), MC_OK);
    size_t want_bytes;
    float *want = outputs_of(p, &want_bytes);
    int before = files_in_tmpdir();
    long n = 1;
    for (;; n++) {
        arm(n);
        mc_status st = mc_program_run(p);
        disarm();
        if (!injected) {
            assert_int_equal(st, MC_OK);
            break;
        }
        check_failure(st, "run", n);
    }
    char what[64];
    snprintf(what, sizeof what, "run, %s, %s", mc_backend_name(kind), fuse ? "fused" : "unfused");
    report(what, n, 0);
    mc_tensor t;
    assert_int_equal(mc_program_output(p, 0, &t), MC_OK);
    assert_memory_equal(t.data, want, want_bytes);

    const char *outs[] = {"out.safetensors", "out.npy", "inputs.safetensors"};
    for (int o = 0; o < 3; o++) {
        const char *path = tmp_path(outs[o]);
        for (n = 1;; n++) {
            arm(n);
            mc_status st = o < 2 ? mc_program_save_outputs(p, path) : mc_program_save_inputs(p, path);
            disarm();
            if (!injected) {
                assert_int_equal(st, MC_OK);
                break;
            }
            check_failure(st, "save", n);
            if (st != MC_OK) {
                if (file_exists(path))
                    fail_msg("%s: allocation %ld failed, the file exists", path, n);
                if (files_in_tmpdir() != before)
                    fail_msg("%s: allocation %ld failed, a temporary file is left", path, n);
            } else {
                unlink(path);
            }
        }
        report(outs[o], n, 0);
        assert_true(file_exists(path));
        unlink(path);
    }
    free(want);
    mc_program_free(p);
    mc_graph_free(g);
}

static void test_run_and_save_fused(void **state)
{
    (void)state;
    run_and_save(MC_BACKEND_REF, true);
}

static void test_run_and_save_unfused(void **state)
{
    (void)state;
    run_and_save(MC_BACKEND_REF, false);
}

#ifdef MINIC_HAVE_CPU_BACKEND
static void test_run_and_save_cpu(void **state)
{
    (void)state;
    run_and_save(MC_BACKEND_CPU, true);
    run_and_save(MC_BACKEND_CPU, false);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_compile_fused),
        cmocka_unit_test(test_compile_unfused),
        cmocka_unit_test(test_bind),
        cmocka_unit_test(test_run_and_save_fused),
        cmocka_unit_test(test_run_and_save_unfused),
#ifdef MINIC_HAVE_CPU_BACKEND
        cmocka_unit_test(test_compile_cpu),
        cmocka_unit_test(test_run_and_save_cpu),
#endif
    };
    return mc_test_run(tests);
}
