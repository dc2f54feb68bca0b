/* Hostile names: the user's names never reach generated code, and come back intact where they
 * belong (outputs, .safetensors keys).
 *
 * The same graph is built with plain names and with names chosen to break a code generator that
 * pastes them: C and CUDA keywords, identifiers minic itself generates (buf0, acc0, kernel
 * names), names with dots, 10,000-character names; through the parser (with a hostile graph
 * name and file name) and through the C API (whose graph name may be any bytes: quotes,
 * backslashes, comment closers, newlines, printf conversions). The CUDA source (rendered
 * without a GPU, as `minic dump --stage code --backend cuda` does) and the LLVM IR (the cpu
 * backend, when built) must be byte-identical to the plain graph's, and contain none of the
 * strings that only the names hold. Names the grammar does not allow (quotes, backslashes, comment closers,
 * `//`, `#`, `%s`, spaces, non-ASCII and invalid UTF-8) are refused cleanly by the parser (a
 * located error) and by every C API call that takes a name. On the reference backend the
 * outputs carry the user's names, and a .safetensors file written from them has those names as
 * keys; the writer escapes any key properly in its JSON header (checked by reading it back).
 */
#include "testlib.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/runtime.h"

enum { NAME_G, NAME_X, NAME_W, NAME_B, NAME_H, NAME_A, NAME_S, NAME_T, NAME_M, NNAMES };

static const char *const plain[NNAMES] = {"plain", "x", "w", "b", "h", "a", "s", "t", "m"};
static const char *const keywords[NNAMES] = {"__global__", "int", "float", "return", "threadIdx",
                                             "__syncthreads", "main", "blockIdx.x", "define"};
static const char *const generated[NNAMES] = {"kernel", "buf0", "buf1", "acc0",
                                              "pw_fused_gelu_1", "gemm_bias_gelu_0",
                                              "red_fused_softmax_2", "v0", "mc_red_sum"};
static const char *const dotted[NNAMES] = {"_", "__LINE__", "fc1.weight", "_.._", "NULL",
                                           "a.b.c.d", "zq_marker.softmax", "zq_marker.sum",
                                           "__FILE__"};

/* Nine distinct names of 10,000 characters each. */
static char long_storage[NNAMES][10001];
static const char *long_names[NNAMES];

static void make_long_names(void)
{
    for (int i = 0; i < NNAMES; i++) {
        memset(long_storage[i], 'q', 10000);
        long_storage[i][0] = '_';
        long_storage[i][9999] = (char)('a' + i);
        long_storage[i][10000] = 0;
        long_names[i] = long_storage[i];
    }
}

/* ---- building ---------------------------------------------------------------------------- */

static char *graph_text(const char *const n[NNAMES])
{
    const char *fmt = "graph %s\n"
                      "input %s : f32[4, 8]\n"
                      "param %s : f32[16, 8]\n"
                      "param %s : f32[16]\n"
                      "%s = linear(%s, %s, %s)\n"
                      "%s = gelu(%s)\n"
                      "%s = softmax(%s, axis=-1)\n"
                      "%s = sum(%s, axis=[1])\n"
                      "%s = mul(%s, 2)\n"
                      "output %s, %s, %s\n";
    size_t size = 1024;
    for (int i = 0; i < NNAMES; i++)
        size += 4 * strlen(n[i]);
    char *s = malloc(size);
    assert_non_null(s);
    snprintf(s, size, fmt, n[NAME_G], n[NAME_X], n[NAME_W], n[NAME_B], n[NAME_H], n[NAME_X],
             n[NAME_W], n[NAME_B], n[NAME_A], n[NAME_H], n[NAME_S], n[NAME_A], n[NAME_T],
             n[NAME_S], n[NAME_M], n[NAME_A], n[NAME_S], n[NAME_T], n[NAME_M]);
    return s;
}

static mc_graph *parse_named(const char *file, const char *const n[NNAMES])
{
    char *text = graph_text(n);
    mc_graph *g = NULL;
    if (mc_graph_parse_string(file, text, &g) != MC_OK)
        fail_msg("%s", mc_error_message());
    free(text);
    return g;
}

static mc_graph *build_named(const char *graph_name, const char *const n[NNAMES])
{
    mc_graph *g = mc_graph_new(graph_name);
    assert_non_null(g);
    const int64_t xs[] = {4, 8}, ws[] = {16, 8}, bs[] = {16};
    mc_value x = mc_input(g, n[NAME_X], MC_F32, xs, 2);
    mc_value w = mc_param(g, n[NAME_W], MC_F32, ws, 2);
    mc_value b = mc_param(g, n[NAME_B], MC_F32, bs, 1);
    mc_value h = mc_linear(g, x, w, b);
    mc_value a = mc_gelu(g, h);
    mc_value s = mc_softmax(g, a, -1);
    int axis = 1;
    mc_value t = mc_sum(g, s, &axis, 1, false);
    mc_value m = mc_mul(g, a, mc_scalar(g, 2.0, MC_F32));
    assert_int_equal(mc_value_set_name(g, h, n[NAME_H]), MC_OK);
    assert_int_equal(mc_value_set_name(g, a, n[NAME_A]), MC_OK);
    assert_int_equal(mc_value_set_name(g, s, n[NAME_S]), MC_OK);
    assert_int_equal(mc_value_set_name(g, t, n[NAME_T]), MC_OK);
    assert_int_equal(mc_value_set_name(g, m, n[NAME_M]), MC_OK);
    mc_value outs[] = {s, t, m};
    if (mc_graph_set_outputs(g, outs, 3) != MC_OK)
        fail_msg("%s", mc_error_message());
    return g;
}

/* ---- generated code ---------------------------------------------------------------------- */

/* The generated source of g for a backend, or NULL when this build has no such backend. */
static char *code_of(const mc_graph *g, mc_backend_kind backend, bool fuse)
{
    mc_options opt = mc_options_default();
    opt.backend = backend;
    opt.fuse = fuse;
    opt.quiet = true;
    mc_program *p = NULL;
    mc_status st;
    if (backend == MC_BACKEND_CUDA)
        st = mc_program_compile_unprepared(g, &opt, &p); /* renders without a GPU */
    else
        st = mc_program_compile(g, &opt, &p);
    if (st != MC_OK)
        fail_msg("compile for %s: %s", mc_backend_name(backend), mc_error_message());
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_non_null(p->backend->dump_code);
    if (p->backend->dump_code(p, f) != MC_OK)
        fail_msg("dump: %s", mc_error_message());
    fclose(f);
    mc_program_free(p);
    assert_true(len > 100);
    return buf;
}

static void assert_free_of(const char *code, const char *what, const char *label)
{
    if (what[0] && strstr(code, what))
        fail_msg("%s: generated code contains the user's string '%.60s'", label, what);
}

/* Compare one hostile graph's code with the plain graph's on every backend that renders code. */
static void compare_code(const mc_graph *plain_g, const mc_graph *hostile_g,
                         const char *const names[NNAMES], const char *const extra[],
                         const char *label)
{
    mc_backend_kind backends[2];
    int nb = 0;
#ifdef MINIC_HAVE_CUDA_BACKEND
    backends[nb++] = MC_BACKEND_CUDA;
#endif
#ifdef MINIC_HAVE_CPU_BACKEND
    backends[nb++] = MC_BACKEND_CPU;
#endif
    if (nb == 0)
        print_message("skipped: no backend that generates code is built here (%s)\n", label);
    for (int i = 0; i < nb; i++)
        for (int fuse = 0; fuse < 2; fuse++) {
            char *want = code_of(plain_g, backends[i], fuse);
            char *got = code_of(hostile_g, backends[i], fuse);
            if (strcmp(want, got) != 0) {
                size_t k = 0;
                while (want[k] && want[k] == got[k])
                    k++;
                fail_msg("%s, %s, fuse %d: code differs from the plain graph's at byte %zu: "
                         "'%.80s' vs '%.80s'", label, mc_backend_name(backends[i]), fuse, k,
                         want + k, got + k);
            }
            /* Strings that only the names hold (long names, markers, dotted names that are
             * not CUDA's own, like blockIdx.x, which the code is full of anyway). */
            for (int n = 0; n < NNAMES; n++)
                if (strlen(names[n]) > 100 || strstr(names[n], "zq_marker") ||
                    !strcmp(names[n], "fc1.weight") || !strcmp(names[n], "a.b.c.d"))
                    assert_free_of(got, names[n], label);
            for (int e = 0; extra && extra[e]; e++)
                assert_free_of(got, extra[e], label);
            free(want);
            free(got);
        }
}

static void test_code_unaffected_by_names(void **state)
{
    (void)state;
    make_long_names();
    const char *const *sets[] = {keywords, generated, dotted, long_names};
    const char *set_label[] = {"keywords", "generated identifiers", "dotted names", "long names"};
    const char *evil_file = "evil\"*/\n#include \"x.h\"\\%s%n//.graph";
    const char *evil_graph = "g\"*/ /* \\\" %s %n\n#define int float\n// \xc3\xa9 \xff";
    const char *extra[] = {"evil", "#define int", "x.h", NULL};
    mc_graph *plain_parsed = parse_named("plain.graph", plain);
    mc_graph *plain_built = build_named("plain", plain);
    for (size_t s = 0; s < sizeof sets / sizeof *sets; s++) {
        mc_graph *parsed = parse_named(evil_file, sets[s]);
        compare_code(plain_parsed, parsed, sets[s], extra, set_label[s]);
        mc_graph_free(parsed);
        mc_graph *built = build_named(evil_graph, sets[s]);
        compare_code(plain_built, built, sets[s], extra, set_label[s]);
        mc_graph_free(built);
    }
    mc_graph_free(plain_parsed);
    mc_graph_free(plain_built);
}

/* ---- names the grammar refuses ------------------------------------------------------------ */

static const char *const bad_names[] = {
    "a\"b", "a\\b", "a*/b", "/*a", "a//b", "a#b", "a%sb", "%n", "a b", "a\nb", "a\\nb", "1a",
    "a-b", "a;b", "a(b)", "\xc3\xa9", "caf\xc3\xa9", "\xff", "a\xff", "\xe2\x80\x8b", "",
    "graph", "input", "param", "output", "inf", "nan", "true", "false", "f32", "bf16", "bool",
};

static void test_bad_names_refused(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; i++) {
        const char *bad = bad_names[i];
        /* The parser: a located error, no graph. */
        char text[256];
        snprintf(text, sizeof text, "input %s : f32[2]\ny = neg(%s)\noutput y\n", bad, bad);
        mc_graph *g = NULL;
        mc_status st = mc_graph_parse_string("bad.graph", text, &g);
        if (st != MC_ERR_INPUT)
            fail_msg("name '%s': parse status %d", bad, st);
        assert_null(g);
        const char *msg = mc_error_message();
        if (strncmp(msg, "bad.graph:1:", 12) != 0 && strncmp(msg, "bad.graph:2:", 12) != 0)
            fail_msg("name '%s': message not located: %s", bad, msg);
        assert_true(mc_json_valid_utf8(msg, strlen(msg)));
        /* The C API: declarations and mc_value_set_name refuse it. */
        g = mc_graph_new("api");
        const int64_t shape[] = {2};
        assert_int_equal(mc_input(g, bad, MC_F32, shape, 1), MC_ERROR);
        assert_int_equal(mc_error_status(), MC_ERR_INPUT);
        assert_int_equal(mc_param(g, bad, MC_F32, shape, 1), MC_ERROR);
        mc_graph_free(g);
        g = mc_graph_new("api");
        mc_value x = mc_input(g, "x", MC_F32, shape, 1);
        mc_value y = mc_neg(g, x);
        assert_int_equal(mc_value_set_name(g, y, bad), MC_ERR_INPUT);
        assert_int_equal(mc_graph_set_outputs(g, &y, 1), MC_OK); /* the graph is still fine */
        mc_graph_free(g);
    }
    mc_graph *g = mc_graph_new(NULL);
    const int64_t shape[] = {2};
    assert_int_equal(mc_input(g, NULL, MC_F32, shape, 1), MC_ERROR);
    mc_graph_free(g);
}

/* ---- outputs and files on the reference backend -------------------------------------------- */

static void fill(float *v, int n, float scale)
{
    for (int i = 0; i < n; i++)
        v[i] = scale * (float)((i * 37) % 23 - 11) / 11.0f;
}

/* Compile on ref, bind fixed values, run; the program. */
static mc_program *run_ref(const mc_graph *g, const char *const n[NNAMES])
{
    mc_options opt = mc_options_default();
    opt.backend = MC_BACKEND_REF;
    mc_program *p = NULL;
    if (mc_program_compile(g, &opt, &p) != MC_OK)
        fail_msg("%s", mc_error_message());
    float x[32], w[128], b[16];
    fill(x, 32, 1.0f);
    fill(w, 128, 0.5f);
    fill(b, 16, 0.25f);
    assert_int_equal(mc_program_set(p, n[NAME_X], x, sizeof x), MC_OK);
    assert_int_equal(mc_program_set(p, n[NAME_W], w, sizeof w), MC_OK);
    assert_int_equal(mc_program_set(p, n[NAME_B], b, sizeof b), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK);
    return p;
}

static void test_outputs_keep_user_names(void **state)
{
    (void)state;
    make_long_names();
    const char *const *sets[] = {keywords, generated, dotted, long_names};
    mc_graph *pg = parse_named("plain.graph", plain);
    mc_program *pp = run_ref(pg, plain);
    for (size_t s = 0; s < sizeof sets / sizeof *sets; s++) {
        const char *const *n = sets[s];
        mc_graph *g = parse_named("hostile.graph", n);
        mc_program *p = run_ref(g, n);
        const int outs[3] = {NAME_S, NAME_T, NAME_M};
        for (int o = 0; o < 3; o++) {
            mc_tensor want, got;
            assert_int_equal(mc_program_output(pp, o, &want), MC_OK);
            assert_int_equal(mc_program_output(p, o, &got), MC_OK);
            assert_string_equal(got.name, n[outs[o]]);
            assert_int_equal(got.bytes, want.bytes);
            assert_memory_equal(got.data, want.data, want.bytes);
        }
        /* .safetensors: the keys are the user's names, the data the outputs. */
        char path[4200];
        snprintf(path, sizeof path, "%s/hostile_%zu.safetensors", mc_test_tmpdir(), s);
        assert_int_equal(mc_program_save_outputs(p, path), MC_OK);
        mc_safetensors *st = NULL;
        if (mc_safetensors_open(path, &st) != MC_OK)
            fail_msg("%s", mc_error_message());
        assert_int_equal(mc_safetensors_count(st), 3);
        for (int o = 0; o < 3; o++) {
            mc_array a;
            mc_tensor got;
            assert_int_equal(mc_safetensors_get(st, n[outs[o]], &a), MC_OK);
            assert_int_equal(mc_program_output(p, o, &got), MC_OK);
            assert_int_equal(a.bytes, got.bytes);
            assert_memory_equal(a.data, got.data, got.bytes);
        }
        mc_safetensors_close(st);
        unlink(path);
        mc_program_free(p);
        mc_graph_free(g);
    }
    mc_program_free(pp);
    mc_graph_free(pg);
}

/* The writer's JSON escaping, with keys no graph can have but a caller of the writer might. */
static void test_safetensors_keys_escaped(void **state)
{
    (void)state;
    static char long_key[10001];
    memset(long_key, '"', 10000);
    const char *keys[] = {"q\"uote", "back\\slash", "ctl\x01\x1f\n\t\r", "*/ // /*", "%s%n%%",
                          "\xc3\xa9\xe6\x97\xa5\xe6\x9c\xac\xf0\x9f\x98\x80", "\\u0000",
                          "{\"a\":1}", long_key};
    enum { NK = sizeof keys / sizeof *keys };
    mc_array arrays[NK];
    float data[NK][2];
    for (int i = 0; i < NK; i++) {
        data[i][0] = (float)i;
        data[i][1] = -(float)i;
        arrays[i] = (mc_array){.dtype = MC_F32, .rank = 1, .shape = {2}, .data = data[i],
                               .bytes = sizeof data[i]};
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/keys.safetensors", mc_test_tmpdir());
    if (mc_safetensors_write(path, keys, arrays, NK) != MC_OK)
        fail_msg("%s", mc_error_message());
    mc_safetensors *st = NULL;
    if (mc_safetensors_open(path, &st) != MC_OK)
        fail_msg("%s", mc_error_message());
    assert_int_equal(mc_safetensors_count(st), NK);
    for (int i = 0; i < NK; i++) {
        mc_array a;
        if (mc_safetensors_get(st, keys[i], &a) != MC_OK)
            fail_msg("key %d: %s", i, mc_error_message());
        assert_memory_equal(a.data, data[i], sizeof data[i]);
    }
    mc_safetensors_close(st);
    unlink(path);
    /* A key that is not UTF-8 cannot be written as JSON: refused, no file left. */
    const char *bad[] = {"ok", "\xff\xfe"};
    assert_int_equal(mc_safetensors_write(path, bad, arrays, 2), MC_ERR_INPUT);
    assert_int_equal(access(path, F_OK), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_names_refused),
        cmocka_unit_test(test_outputs_keep_user_names),
        cmocka_unit_test(test_safetensors_keys_escaped),
        cmocka_unit_test(test_code_unaffected_by_names),
    };
    return mc_test_run(tests);
}
