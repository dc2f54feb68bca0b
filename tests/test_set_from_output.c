/* mc_program_set_from_output (include/minic.h): one program's output handed to another's (or
 * its own) input without a trip through the host where both live on one device; and
 * mc_program_share_params: params given once for two programs (on ref and cpu the memory is
 * shared: checked by pointer, copy-on-bind on either side, either freeing order; cuda copies).
 *
 * On every backend it runs on: the errors (src not run, index out of range, a name dst does
 * not declare, a wrong dtype, a wrong shape, NULL arguments), each MC_ERR_INPUT naming both
 * programs, the output and the input; the value copied (and a copy: src running again or being
 * freed does not change it); the later of a set_from_output and an mc_program_set wins, in both
 * orders, after the program has run (on cuda: after its CUDA graph was captured, which must
 * read the buffer the copy wrote); mc_program_save_inputs writes the value given on the device;
 * a program feeding its own output back step after step; an `output x` of an input x given
 * back to x; symbolic programs on either side (dst's symbols bound from the output's shape);
 * a tensor-parallel program on either side; two backends (through the host); two threads
 * handing outputs both ways between two programs at once (no deadlock).
 *
 * Backends: ref and cpu, and cuda where a GPU is usable (else "cuda: skipped: no GPU");
 * MINIC_TEST_BACKEND=ref|cpu|cuda runs that one only (cuda without a GPU: "skipped: no GPU",
 * exit 77).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "runtime/runtime.h"

static mc_backend_kind backends[3];
static int nbackends;

static mc_program *compile_opt(const char *text, mc_backend_kind kind, bool fuse, int devices)
{
    mc_graph *g = mc_test_parse(text);
    mc_options opt = mc_test_options();
    opt.backend = kind;
    opt.fuse = fuse;
    opt.quiet = true;
    opt.devices = devices;
    if (kind == MC_BACKEND_CUDA && devices == 0)
        opt.cuda_graph = 1; /* a replay must read what the copy wrote */
    mc_program *p = NULL;
    if (mc_program_compile(g, &opt, &p) != MC_OK)
        fail_msg("compile on %s: %s", mc_backend_name(kind), mc_error_message());
    mc_graph_free(g);
    return p;
}

static mc_program *compile(const char *text, mc_backend_kind kind)
{
    return compile_opt(text, kind, true, 0);
}

static void set_floats(mc_program *p, const char *name, const float *v, int n)
{
    if (mc_program_set(p, name, v, (size_t)n * sizeof *v) != MC_OK)
        fail_msg("set %s: %s", name, mc_error_message());
}

static void run(mc_program *p)
{
    if (mc_program_run(p) != MC_OK)
        fail_msg("run on %s: %s", mc_program_backend(p), mc_error_message());
}

static void handoff(mc_program *dst, const char *name, mc_program *src, int index)
{
    if (mc_program_set_from_output(dst, name, src, index) != MC_OK)
        fail_msg("set_from_output(%s <- %d) on %s: %s", name, index, mc_program_backend(dst), mc_error_message());
}

/* Output index of p is exactly want (n floats; the graphs here compute exact values). */
static void expect(mc_program *p, int index, const float *want, int n, const char *what)
{
    mc_tensor t;
    assert_int_equal(mc_program_output(p, index, &t), MC_OK);
    assert_int_equal(t.dtype, MC_F32);
    assert_int_equal(t.bytes, (size_t)n * sizeof(float));
    const float *got = t.data;
    for (int i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("%s on %s: element %d is %g, expected %g", what, mc_program_backend(p), i, (double)got[i],
                     (double)want[i]);
}

/* The call fails with MC_ERR_INPUT and a message holding every one of the NULL-ended words. */
static void expect_error(mc_status st, const char *const *words)
{
    assert_int_equal(st, MC_ERR_INPUT);
    const char *m = mc_error_message();
    for (; *words; words++)
        if (!strstr(m, *words))
            fail_msg("the message lacks '%s': %s", *words, m);
}

static const char producer[] = "graph producer\n"
                               "input x : f32[2, 3]\n"
                               "y = add(x, x)\n"
                               "t = transpose(x)\n"
                               "output y, t\n";
static const char consumer[] = "graph consumer\n"
                               "input c : f32[2, 3]\n"
                               "input h : f16[2, 3]\n"
                               "input e : f32[3, 2]\n"
                               "param w : f32[2, 3]\n"
                               "z = add(c, w)\n"
                               "he = cast(h, to=f32)\n"
                               "et = transpose(e)\n"
                               "s = add(he, et)\n"
                               "output z, s\n";

static const float x0[6] = {0, 1, 2, 3, 4, 5}, x1[6] = {10, 20, 30, 40, 50, 60};
static const float w10[6] = {100, 100, 100, 100, 100, 100}, other[6] = {-1, -2, -3, -4, -5, -6};

static void errors_on(mc_backend_kind kind)
{
    mc_program *a = compile(producer, kind), *b = compile(consumer, kind);
    static const char *const not_run[] = {"producer", "has not run yet", "'y'", "'c'", "consumer", NULL};
    expect_error(mc_program_set_from_output(b, "c", a, 0), not_run);
    set_floats(a, "x", x0, 6);
    run(a);
    static const char *const range[] = {"output 2 of program 'producer' is out of range", "2 outputs", NULL};
    expect_error(mc_program_set_from_output(b, "c", a, 2), range);
    static const char *const negative[] = {"output -1 of program 'producer' is out of range", NULL};
    expect_error(mc_program_set_from_output(b, "c", a, -1), negative);
    static const char *const name[] = {"output 0 ('y', f32[2, 3]) of program 'producer'",
                                       "graph 'consumer' has no input or param named 'cc'", NULL};
    expect_error(mc_program_set_from_output(b, "cc", a, 0), name);
    static const char *const computed[] = {"'z' is computed by graph 'consumer'", NULL};
    expect_error(mc_program_set_from_output(b, "z", a, 0), computed);
    static const char *const dtype[] = {"output 0 ('y', f32[2, 3]) of program 'producer' does not fit input 'h' "
                                        "of program 'consumer', declared f16[2, 3]", NULL};
    expect_error(mc_program_set_from_output(b, "h", a, 0), dtype);
    static const char *const shape[] = {"output 1 ('t', f32[3, 2]) of program 'producer' does not fit input 'c' "
                                        "of program 'consumer', declared f32[2, 3]", NULL};
    expect_error(mc_program_set_from_output(b, "c", a, 1), shape);
    static const char *const no_dst[] = {"no destination program", NULL};
    expect_error(mc_program_set_from_output(NULL, "c", a, 0), no_dst);
    static const char *const no_src[] = {"no source program", NULL};
    expect_error(mc_program_set_from_output(b, "c", NULL, 0), no_src);
    static const char *const no_name[] = {"no input name", NULL};
    expect_error(mc_program_set_from_output(b, NULL, a, 0), no_name);
    /* nothing was bound by the failures: c still has no value */
    set_floats(b, "w", w10, 6);
    assert_int_equal(mc_program_set(b, "h", (const uint16_t[6]){0}, 12), MC_OK);
    set_floats(b, "e", x0, 6);
    static const char *const unbound[] = {"input 'c' has no value", NULL};
    expect_error(mc_program_run(b), unbound);
    mc_program_free(a);
    mc_program_free(b);
}

static void test_errors(void **state)
{
    (void)state;
    for (int i = 0; i < nbackends; i++)
        errors_on(backends[i]);
}

static void values_on(mc_backend_kind kind)
{
    mc_program *a = compile(producer, kind), *b = compile(consumer, kind);
    float want[6], zero_s[6];
    set_floats(a, "x", x0, 6);
    run(a);
    set_floats(b, "w", w10, 6);
    assert_int_equal(mc_program_set(b, "h", (const uint16_t[6]){0}, 12), MC_OK);
    handoff(b, "e", a, 1); /* t = transpose(x): s = 0 + transpose(t) = x */
    set_floats(b, "c", other, 6);
    run(b); /* the first run (cuda: eager, then captured) */
    for (int i = 0; i < 6; i++)
        want[i] = other[i] + 100;
    expect(b, 0, want, 6, "z from mc_program_set");
    expect(b, 1, x0, 6, "s from a transposed output");
    memcpy(zero_s, x0, sizeof zero_s);

    /* set_from_output after mc_program_set, after a run: the copy wins */
    handoff(b, "c", a, 0);
    set_floats(a, "x", x1, 6); /* src runs again: the copy b holds does not change */
    run(a);
    run(b);
    for (int i = 0; i < 6; i++)
        want[i] = 2 * x0[i] + 100;
    expect(b, 0, want, 6, "z from y");
    run(b); /* again: nothing uploaded over it */
    expect(b, 0, want, 6, "z from y, second run");

    /* mc_program_set after set_from_output: the host value wins */
    handoff(b, "c", a, 0);
    set_floats(b, "c", other, 6);
    run(b);
    for (int i = 0; i < 6; i++)
        want[i] = other[i] + 100;
    expect(b, 0, want, 6, "z after set replaced the copy");

    /* a param from an output, and the inputs written back to a file: the device's values */
    handoff(b, "c", a, 0);
    handoff(b, "w", a, 0);
    char path[4096];
    snprintf(path, sizeof path, "%s/inputs_%s.safetensors", mc_test_tmpdir(), mc_backend_name(kind));
    assert_int_equal(mc_program_save_inputs(b, path), MC_OK);
    mc_safetensors *st = NULL;
    assert_int_equal(mc_safetensors_open(path, &st), MC_OK);
    mc_array arr;
    for (int k = 0; k < 2; k++) {
        assert_int_equal(mc_safetensors_get(st, k ? "w" : "c", &arr), MC_OK);
        assert_int_equal(arr.bytes, sizeof want);
        for (int i = 0; i < 6; i++)
            assert_true(((const float *)arr.data)[i] == 2 * x1[i]);
    }
    mc_safetensors_close(st);
    mc_program_free(a); /* b's copies outlive a */
    run(b);
    for (int i = 0; i < 6; i++)
        want[i] = 4 * x1[i];
    expect(b, 0, want, 6, "z = y + y after the producer was freed");
    expect(b, 1, zero_s, 6, "s unchanged");
    /* the other two ways to read an output (on cuda each reads it back from the GPU) */
    float got[6];
    assert_int_equal(mc_program_read_output(b, 0, got, sizeof got), MC_OK);
    assert_memory_equal(got, want, sizeof got);
    snprintf(path, sizeof path, "%s/outputs_%s.safetensors", mc_test_tmpdir(), mc_backend_name(kind));
    run(b);
    assert_int_equal(mc_program_save_outputs(b, path), MC_OK);
    assert_int_equal(mc_safetensors_open(path, &st), MC_OK);
    assert_int_equal(mc_safetensors_get(st, "z", &arr), MC_OK);
    assert_memory_equal(arr.data, want, sizeof want);
    assert_int_equal(mc_safetensors_get(st, "s", &arr), MC_OK);
    assert_memory_equal(arr.data, zero_s, sizeof zero_s);
    mc_safetensors_close(st);
    mc_program_free(b);
}

static void test_values(void **state)
{
    (void)state;
    for (int i = 0; i < nbackends; i++)
        values_on(backends[i]);
}

static const char step[] = "graph step\n"
                           "input s : f32[4]\n"
                           "input inc : f32[4]\n"
                           "s2 = add(s, inc)\n"
                           "m = mul(s, 2.0)\n"
                           "output s2, m\n";
static const char passthrough[] = "graph passthrough\n"
                                  "input x : f32[4]\n"
                                  "y = add(x, x)\n"
                                  "output x, y\n";

static void self_feeding_on(mc_backend_kind kind, bool fuse)
{
    mc_program *p = compile_opt(step, kind, fuse, 0);
    const float s0[4] = {1, 2, 3, 4}, inc[4] = {0.5f, -1, 2, 8};
    set_floats(p, "s", s0, 4);
    set_floats(p, "inc", inc, 4);
    for (int k = 0; k < 6; k++) {
        run(p);
        float want[4], m[4];
        for (int i = 0; i < 4; i++) {
            want[i] = s0[i] + (float)(k + 1) * inc[i];
            m[i] = 2 * (s0[i] + (float)k * inc[i]);
        }
        expect(p, 0, want, 4, "s after a step");
        expect(p, 1, m, 4, "m read the state handed back");
        handoff(p, "s", p, 0);
    }
    mc_program_free(p);

    p = compile_opt(passthrough, kind, fuse, 0);
    const float x[4] = {1, -2, 3, 0.25f}, y[4] = {2, -4, 6, 0.5f};
    set_floats(p, "x", x, 4);
    run(p);
    handoff(p, "x", p, 0); /* output 0 is input x itself */
    run(p);
    expect(p, 0, x, 4, "x given back to itself");
    expect(p, 1, y, 4, "y");
    mc_program_free(p);
}

static void test_self_feeding(void **state)
{
    (void)state;
    for (int i = 0; i < nbackends; i++) {
        self_feeding_on(backends[i], true);
        self_feeding_on(backends[i], false);
    }
}

static const char symprod[] = "graph symprod\n"
                              "input x : f32[N, 3]\n"
                              "y = add(x, x)\n"
                              "output y\n";
static const char symcons[] = "graph symcons\n"
                              "input c : f32[M, 3]\n"
                              "input d : f32[M, 4]\n"
                              "z = add(c, c)\n"
                              "output z\n";

static void symbolic_on(mc_backend_kind kind)
{
    mc_program *sp = compile(symprod, kind), *sc = compile(symcons, kind), *b = compile(consumer, kind);
    set_floats(sp, "x", x0, 6); /* N = 2 */
    run(sp);
    /* symbolic src into a static dst: the output's bound shape [2, 3] */
    handoff(b, "c", sp, 0);
    set_floats(b, "w", w10, 6);
    assert_int_equal(mc_program_set(b, "h", (const uint16_t[6]){0}, 12), MC_OK);
    set_floats(b, "e", x0, 6);
    run(b);
    float want[6];
    for (int i = 0; i < 6; i++)
        want[i] = 2 * x0[i] + 100;
    expect(b, 0, want, 6, "z from a symbolic program's output");
    /* into a symbolic dst: M bound from the output's shape */
    handoff(sc, "c", sp, 0);
    set_floats(sc, "d", (const float[8]){0}, 8); /* M = 2 */
    run(sc);
    for (int i = 0; i < 6; i++)
        want[i] = 4 * x0[i];
    expect(sc, 0, want, 6, "z of a symbolic dst");
    mc_tensor t;
    assert_int_equal(mc_program_output(sc, 0, &t), MC_OK);
    assert_int_equal(t.shape[0], 2);
    static const char *const shape[] = {"output 0 ('y', f32[2, 3]) of program 'symprod' does not fit program "
                                        "'symcons'", "'d'", NULL};
    expect_error(mc_program_set_from_output(sc, "d", sp, 0), shape);
    /* a static src into a symbolic dst, and a new binding of M from a later output */
    mc_program *sp3 = compile(symprod, kind);
    set_floats(sp3, "x", (const float[9]){1, 2, 3, 4, 5, 6, 7, 8, 9}, 9); /* N = 3 */
    run(sp3);
    handoff(sc, "c", sp3, 0);
    set_floats(sc, "d", (const float[12]){0}, 12); /* the value given under M = 2 was dropped */
    run(sc);
    assert_int_equal(mc_program_output(sc, 0, &t), MC_OK);
    assert_int_equal(t.shape[0], 3);
    expect(sc, 0, (const float[9]){4, 8, 12, 16, 20, 24, 28, 32, 36}, 9, "z with M = 3");
    mc_program_free(sp3);
    mc_program_free(sp);
    mc_program_free(sc);
    mc_program_free(b);
}

static void test_symbolic(void **state)
{
    (void)state;
    for (int i = 0; i < nbackends; i++)
        symbolic_on(backends[i]);
}

static const char linear_graph[] = "graph lin\n"
                                   "input x : f32[2, 4]\n"
                                   "param w : f32[4, 4]\n"
                                   "param v : f32[4, 4]\n"
                                   "h = linear(x, w)\n"
                                   "r = relu(h)\n"
                                   "o = linear(r, v)\n"
                                   "output o\n";

/* Tensor-parallel programs (ranks are threads here, on ref and cpu) on both sides. */
static void parallel_on(mc_backend_kind kind)
{
    mc_program *one = compile(linear_graph, kind), *par = compile_opt(linear_graph, kind, true, 2);
    const float x[8] = {1, 2, 3, 4, -1, 0, 2, 1};
    float w[16];
    for (int i = 0; i < 16; i++)
        w[i] = i % 5 == 0 ? 1.0f : 0.0f; /* exact sums */
    set_floats(one, "x", x, 8);
    set_floats(one, "w", w, 16);
    set_floats(par, "w", w, 16);
    for (int i = 0; i < 16; i++)
        w[i] = (float)(i % 3) - 1; /* v: -1, 0, 1 */
    set_floats(one, "v", w, 16);
    set_floats(par, "v", w, 16);
    run(one);
    mc_tensor t;
    assert_int_equal(mc_program_output(one, 0, &t), MC_OK);
    float want[8];
    memcpy(want, t.data, sizeof want);
    /* a parallel dst: the value split over its ranks */
    set_floats(par, "x", (const float[8]){0}, 8);
    run(par);
    handoff(par, "x", one, 0); /* x := o of the unsharded program */
    set_floats(one, "x", want, 8);
    run(one);
    run(par);
    assert_int_equal(mc_program_output(one, 0, &t), MC_OK);
    memcpy(want, t.data, sizeof want);
    expect(par, 0, want, 8, "a parallel dst");
    /* a parallel src: its rank 0's output */
    handoff(one, "x", par, 0);
    set_floats(par, "x", want, 8); /* the same value, through the host */
    run(one);
    run(par);
    assert_int_equal(mc_program_output(par, 0, &t), MC_OK);
    memcpy(want, t.data, sizeof want);
    expect(one, 0, want, 8, "from a parallel src");
    mc_program_free(one);
    mc_program_free(par);
}

static void test_parallel(void **state)
{
    (void)state;
    for (int i = 0; i < nbackends; i++)
        if (backends[i] != MC_BACKEND_CUDA) /* one GPU per rank: not on a machine with one */
            parallel_on(backends[i]);
}

/* Every ordered pair of the backends here: through the host. */
static void test_cross_backend(void **state)
{
    (void)state;
    for (int i = 0; i < nbackends; i++)
        for (int j = 0; j < nbackends; j++) {
            if (i == j)
                continue;
            mc_program *a = compile(producer, backends[i]), *b = compile(consumer, backends[j]);
            set_floats(a, "x", x0, 6);
            run(a);
            handoff(b, "c", a, 0);
            set_floats(b, "w", w10, 6);
            assert_int_equal(mc_program_set(b, "h", (const uint16_t[6]){0}, 12), MC_OK);
            handoff(b, "e", a, 1);
            mc_program_free(a);
            run(b);
            float want[6];
            for (int k = 0; k < 6; k++)
                want[k] = 2 * x0[k] + 100;
            expect(b, 0, want, 6, "z across backends");
            expect(b, 1, x0, 6, "s across backends");
            mc_program_free(b);
        }
}

/* ---- mc_program_share_params ---- */

static const char share_a[] = "graph share_a\n"
                              "input x : f32[2, 3]\n"
                              "param w : f32[2, 3]\n"
                              "param v : f32[3]\n"
                              "param m : f32[3, 3]\n"
                              "xw = mul(x, w)\n"
                              "z = add(xw, v)\n"
                              "l = linear(x, m)\n"
                              "output z, l\n";
static const char share_b[] = "graph share_b\n"
                              "input x : f32[2, 3]\n"
                              "param w : f32[2, 3]\n"
                              "param v : f32[4]\n"
                              "param u : f32[2, 3]\n"
                              "param m : f32[3, 3]\n"
                              "xw = mul(x, w)\n"
                              "z = add(xw, u)\n"
                              "l = linear(x, m)\n"
                              "vv = add(v, v)\n"
                              "output z, l, vv\n";

static const float W1[6] = {1, 2, 3, 4, 5, 6}, W2[6] = {-1, -1, -1, -1, -1, -1}, W3[6] = {7, 7, 7, 7, 7, 7};
static const float M1[9] = {1, 0, 0, 0, 2, 0, 0, 0, 3}, M2[9] = {0, 1, 0, 1, 0, 0, 0, 0, 1};

/* z = x * w + u and l = x @ m^T of share_b with u = 0 */
static void expect_b(mc_program *b, const float *w, const float *m, const char *what)
{
    float z[6], l[6];
    for (int i = 0; i < 6; i++)
        z[i] = x0[i] * w[i];
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 3; c++) {
            l[r * 3 + c] = 0;
            for (int k = 0; k < 3; k++)
                l[r * 3 + c] += x0[r * 3 + k] * m[c * 3 + k];
        }
    run(b);
    expect(b, 0, z, 6, what);
    expect(b, 1, l, 6, what);
}

static void share(mc_program *dst, mc_program *src, int *n)
{
    if (mc_program_share_params(dst, src, n) != MC_OK)
        fail_msg("share_params on %s <- %s: %s", mc_program_backend(dst), mc_program_backend(src), mc_error_message());
}

static void share_between(mc_backend_kind ka, mc_backend_kind kb)
{
    bool alias = ka != MC_BACKEND_CUDA && kb != MC_BACKEND_CUDA;
    mc_program *a = compile(share_a, ka), *b = compile(share_b, kb);
    set_floats(a, "w", W1, 6);
    set_floats(a, "v", (const float[3]){1, 2, 3}, 3);
    set_floats(a, "m", M1, 9);
    int n = -1;
    share(b, a, &n);
    assert_int_equal(n, 2); /* w and m: v has another shape, u is not a's */
    if (alias) {
        assert_ptr_equal(b->host[mc_program_find(b, "w")], a->host[mc_program_find(a, "w")]);
        assert_ptr_equal(b->host[mc_program_find(b, "m")], a->host[mc_program_find(a, "m")]);
    }
    set_floats(b, "x", x0, 6);
    set_floats(b, "u", (const float[6]){0}, 6);
    set_floats(b, "v", (const float[4]){1, 2, 3, 4}, 4);
    expect_b(b, W1, M1, "b with a's params");
    /* a binds again: a copy of its own; b keeps what it shared */
    set_floats(a, "w", W2, 6);
    set_floats(a, "m", M2, 9);
    if (alias)
        assert_ptr_not_equal(b->host[mc_program_find(b, "w")], a->host[mc_program_find(a, "w")]);
    expect_b(b, W1, M1, "b after a bound w and m again");
    set_floats(a, "x", x0, 6);
    run(a);
    float za[6];
    for (int i = 0; i < 6; i++)
        za[i] = x0[i] * W2[i] + (float)(1 + i % 3);
    expect(a, 0, za, 6, "a with its new w");
    /* shared again, then b binds: a keeps its value */
    share(b, a, &n);
    expect_b(b, W2, M2, "b with a's new params");
    set_floats(b, "w", W3, 6);
    expect_b(b, W3, M2, "b with its own w");
    run(a);
    expect(a, 0, za, 6, "a after b bound w");
    /* freed in either order: the other still runs on the shared memory (ASan would tell) */
    share(b, a, &n);
    mc_program_free(a);
    expect_b(b, W2, M2, "b after a was freed");
    a = compile(share_a, ka);
    set_floats(a, "w", W1, 6);
    set_floats(a, "v", (const float[3]){1, 2, 3}, 3);
    set_floats(a, "m", M1, 9);
    set_floats(a, "x", x0, 6);
    share(b, a, &n);
    mc_program_free(b);
    run(a);
    for (int i = 0; i < 6; i++)
        za[i] = x0[i] * W1[i] + (float)(1 + i % 3);
    expect(a, 0, za, 6, "a after b was freed");
    mc_program_free(a);

    /* generated params are shared too; a later fill with another seed leaves b's alone */
    a = compile(share_a, ka);
    b = compile(share_b, kb);
    assert_int_equal(mc_program_fill_random(a, 1), MC_OK);
    share(b, a, &n);
    assert_int_equal(n, 2);
    float w1[6], m1[9];
    mc_fill_random(w1, MC_F32, 6, 1, "w");
    mc_fill_random(m1, MC_F32, 9, 1, "m");
    assert_int_equal(mc_program_fill_random(a, 2), MC_OK);
    set_floats(b, "x", x0, 6);
    set_floats(b, "u", (const float[6]){0}, 6);
    set_floats(b, "v", (const float[4]){0}, 4);
    float z[6];
    for (int i = 0; i < 6; i++)
        z[i] = x0[i] * w1[i];
    run(b);
    expect(b, 0, z, 6, "b with a's generated w of seed 1");
    mc_program_free(a);
    mc_program_free(b);
}

static void test_share_params(void **state)
{
    (void)state;
    for (int i = 0; i < nbackends; i++)
        for (int j = 0; j < nbackends; j++)
            share_between(backends[i], backends[j]);
    /* the errors, and a program shared with itself */
    mc_program *a = compile(share_a, backends[0]), *sp = compile(symprod, backends[0]);
    mc_program *par = compile_opt(linear_graph, backends[0] == MC_BACKEND_CUDA ? MC_BACKEND_REF : backends[0], true, 2);
    int n = -1;
    assert_int_equal(mc_program_share_params(a, a, &n), MC_OK);
    assert_int_equal(n, 0);
    static const char *const sym[] = {"mc_program_share_params(program 'share_a', program 'symprod'): the second is "
                                      "a program with symbolic dimensions", NULL};
    expect_error(mc_program_share_params(a, sp, NULL), sym);
    static const char *const tp[] = {"the first is tensor parallel", NULL};
    expect_error(mc_program_share_params(par, a, NULL), tp);
    static const char *const none[] = {"no destination program", NULL};
    expect_error(mc_program_share_params(NULL, a, NULL), none);
    static const char *const no_src[] = {"no source program", NULL};
    expect_error(mc_program_share_params(a, NULL, NULL), no_src);
    mc_program_free(a);
    mc_program_free(sp);
    mc_program_free(par);
}

/* Two threads hand outputs both ways between two programs at once: the mutexes are taken in
 * one order, so neither waits for ever. */
typedef struct {
    mc_program *dst, *src;
    int failures;
} pair_job;

static void *pair_worker(void *arg)
{
    pair_job *j = arg;
    for (int k = 0; k < 300; k++)
        if (mc_program_set_from_output(j->dst, "s", j->src, 0) != MC_OK)
            j->failures++;
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    for (int i = 0; i < nbackends; i++) {
        mc_program *p = compile(step, backends[i]), *q = compile(step, backends[i]);
        const float s0[4] = {1, 2, 3, 4}, inc[4] = {1, 1, 1, 1};
        mc_program *both[2] = {p, q};
        for (int k = 0; k < 2; k++) {
            set_floats(both[k], "s", s0, 4);
            set_floats(both[k], "inc", inc, 4);
            run(both[k]);
        }
        pair_job jobs[2] = {{.dst = p, .src = q}, {.dst = q, .src = p}};
        pthread_t t[2];
        for (int k = 0; k < 2; k++)
            assert_int_equal(pthread_create(&t[k], NULL, pair_worker, &jobs[k]), 0);
        for (int k = 0; k < 2; k++)
            assert_int_equal(pthread_join(t[k], NULL), 0);
        assert_int_equal(jobs[0].failures + jobs[1].failures, 0);
        /* whichever copy came last, each s is s0 + inc now (both outputs are) */
        for (int k = 0; k < 2; k++) {
            run(both[k]);
            expect(both[k], 0, (const float[4]){3, 4, 5, 6}, 4, "after the threads");
        }
        mc_program_free(p);
        mc_program_free(q);
    }
}

int main(void)
{
    int rc = mc_test_backends(backends, &nbackends);
    if (rc)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),     cmocka_unit_test(test_values),
        cmocka_unit_test(test_self_feeding), cmocka_unit_test(test_symbolic),
        cmocka_unit_test(test_parallel),   cmocka_unit_test(test_cross_backend),
        cmocka_unit_test(test_threads),    cmocka_unit_test(test_share_params),
    };
    return mc_test_run(tests);
}
