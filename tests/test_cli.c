/* The minic command (SPEC §3): options, exit statuses, the exact error formats, output files,
 * and that the command computes what the library computes.
 *
 * Each test runs the built binary ($MINIC_BIN) through mc_test_minic and looks at its exit
 * status, stdout and stderr. Files it needs (weights, .npy inputs, broken graphs) are written
 * with the library's own writers into the test's temporary directory. Where a value matters,
 * it is compared with the same graph compiled through the C API on the reference backend.
 */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/runtime.h"

static char *out, *err;

static int minic(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int minic(const char *fmt, ...)
{
    char args[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    free(out);
    free(err);
    return mc_test_minic(args, &out, &err);
}

static bool exists(const char *path)
{
    return access(path, F_OK) == 0;
}

static const char *tmp_path(const char *name)
{
    static char paths[8][4200];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, sizeof paths[0], "%s/%s", mc_test_tmpdir(), name);
    return p;
}

/* A small graph with two outputs of different dtypes, every input generated. */
static const char *two_outputs_graph(void)
{
    static const char text[] = "graph two\n"
                               "input x : f32[4, 6]\n"
                               "param w : f32[6]\n"
                               "y = mul(x, w)\n"
                               "s = sum(y, axis=1)\n"
                               "output y, s\n";
    return mc_test_write_file("two.graph", text, sizeof text - 1);
}

#define assert_contains(haystack, needle)                                                       \
    do {                                                                                        \
        if (!strstr((haystack), (needle)))                                                      \
            fail_msg("expected \"%s\" in:\n%s", (needle), (haystack));                          \
    } while (0)

static void assert_starts_with(const char *s, const char *prefix)
{
    if (strncmp(s, prefix, strlen(prefix)) != 0)
        fail_msg("expected a line starting with \"%s\", got:\n%s", prefix, s);
}

/* ---- help and options ---------------------------------------------------------------------- */

static void test_help(void **state)
{
    (void)state;
    assert_int_equal(minic("--help"), 0);
    assert_contains(out, "run");
    assert_contains(out, "bench");
    assert_contains(out, "check");
    assert_contains(out, "dump");
    assert_int_equal(minic("run --help"), 0);
    const char *run_opts[] = {"--backend", "--weights", "--input", "--seed", "--output", "--no-fuse",
                              "--cuda-graph", "--no-cuda-graph", "--iters", "--profile",
                              "--profile-json", "--trace", "--roofline", "--threads", "--tf32", "--quiet"};
    for (size_t i = 0; i < sizeof run_opts / sizeof *run_opts; i++)
        assert_contains(out, run_opts[i]);
    assert_int_equal(minic("check --help"), 0);
    assert_null(strstr(out, "--weights")); /* only what applies to check */
    assert_int_equal(minic("dump --help"), 0);
    assert_contains(out, "--stage");
    assert_int_equal(minic("bench --help"), 0);
    assert_contains(out, "--iters");
    assert_int_equal(minic("%s", ""), 1); /* no command: usage on stderr */
    assert_contains(err, "usage");
}

static void test_bad_options(void **state)
{
    (void)state;
    const char *g = mc_test_src("examples/mlp.graph");
    assert_int_equal(minic("run %s --bogus", g), 1);
    assert_string_equal(err, "minic: error: unknown option '--bogus' for 'minic run' (see minic run --help)\n");
    assert_int_equal(minic("frobnicate %s", g), 1);
    assert_starts_with(err, "minic: error: unknown command 'frobnicate'");
    assert_int_equal(minic("run %s --iters 0", g), 1);
    assert_starts_with(err, "minic: error: --iters:");
    assert_int_equal(minic("run %s --iters 3x", g), 1);
    assert_starts_with(err, "minic: error: --iters:");
    assert_int_equal(minic("run %s --seed -1", g), 1);
    assert_starts_with(err, "minic: error: --seed:");
    assert_int_equal(minic("run %s --backend gpu", g), 1);
    assert_starts_with(err, "minic: error: --backend: unknown backend 'gpu'");
    assert_int_equal(minic("run %s --input x", g), 1);
    assert_starts_with(err, "minic: error: --input:");
    assert_int_equal(minic("run %s --seed", g), 1);
    assert_starts_with(err, "minic: error: option '--seed' needs a value");
    assert_int_equal(minic("run %s --no-fuse=1", g), 1);
    assert_starts_with(err, "minic: error: option '--no-fuse' takes no value");
    assert_int_equal(minic("check %s --weights w.safetensors", g), 1);
    assert_starts_with(err, "minic: error: option '--weights' does not apply to 'minic check'");
    assert_int_equal(minic("run %s %s", g, g), 1);
    assert_starts_with(err, "minic: error: run: unexpected argument");
    assert_int_equal(minic("run"), 1);
    assert_starts_with(err, "minic: error: run: no graph file given");
    assert_int_equal(minic("run %s --output out.txt", g), 1);
    assert_starts_with(err, "minic: error: --output out.txt: unknown format");
    assert_int_equal(minic("dump %s --stage nonsense", g), 1);
    assert_starts_with(err, "minic: error: --stage: unknown stage 'nonsense'");
}

/* ---- errors about files -------------------------------------------------------------------- */

static void test_missing_file(void **state)
{
    (void)state;
    const char *missing = tmp_path("no_such.graph");
    assert_int_equal(minic("run %s --backend ref", missing), 1);
    assert_starts_with(err, "minic: error: ");
    assert_contains(err, missing);
    assert_int_equal(minic("check %s", missing), 1);
    assert_contains(err, missing);
}

static void test_malformed_graph(void **state)
{
    (void)state;
    static const char text[] = "graph bad\n"
                               "input x : f32[4]\n"
                               "y = exp(z)\n"
                               "output y\n";
    const char *path = mc_test_write_file("bad.graph", text, sizeof text - 1);
    char want[4400];
    snprintf(want, sizeof want, "%s:3:9: error: ", path);
    assert_int_equal(minic("run %s --backend ref", path), 1);
    assert_starts_with(err, want);
    assert_contains(err, "y = exp(z)\n"); /* the line, then a caret under z */
    assert_contains(err, "        ^");
    assert_string_equal(out, "");
    assert_int_equal(minic("check %s", path), 1);
    assert_starts_with(err, want);
    assert_int_equal(minic("dump %s --stage ir", path), 1);
    assert_starts_with(err, want);
}

static void test_npy_output_with_two_outputs(void **state)
{
    (void)state;
    const char *g = two_outputs_graph();
    const char *file = tmp_path("two.npy");
    unlink(file);
    assert_int_equal(minic("run %s --backend ref --output %s", g, file), 1);
    assert_starts_with(err, "minic: error: --output ");
    assert_contains(err, "2 outputs");
    assert_false(exists(file));
    /* An unwritable place: an error, and no file (nor a temporary one) left behind. */
    const char *nodir = tmp_path("no_dir/out.safetensors");
    assert_int_equal(minic("run %s --backend ref --output %s", g, nodir), 1);
    assert_starts_with(err, "minic: error: ");
    assert_false(exists(nodir));
}

/* Weights for examples/mlp.graph: every param but `skip`; `bad` gets a wrong shape. */
static const char *mlp_weights(const char *file, const char *skip, const char *bad)
{
    const char *names[] = {"fc1.w", "fc1.b", "fc2.w", "fc2.b", "unused.extra"};
    const int64_t shapes[][2] = {{512, 128}, {512, 0}, {128, 512}, {128, 0}, {3, 0}};
    mc_array arrays[5];
    const char *keep[5];
    int n = 0;
    for (int i = 0; i < 5; i++) {
        if (skip && !strcmp(names[i], skip))
            continue;
        mc_array *a = &arrays[n];
        memset(a, 0, sizeof *a);
        a->dtype = MC_F32;
        a->rank = shapes[i][1] ? 2 : 1;
        a->shape[0] = shapes[i][0];
        a->shape[1] = shapes[i][1];
        if (bad && !strcmp(names[i], bad))
            a->shape[0] += 1;
        int64_t numel = a->shape[0] * (a->rank == 2 ? a->shape[1] : 1);
        a->bytes = (size_t)numel * 4;
        a->data = calloc((size_t)numel, 4);
        mc_fill_random(a->data, MC_F32, numel, 42, names[i]);
        keep[n++] = names[i];
    }
    const char *path = tmp_path(file);
    assert_int_equal(mc_safetensors_write(path, keep, arrays, n), MC_OK);
    for (int i = 0; i < n; i++)
        free(arrays[i].data);
    return path;
}

static void test_weights(void **state)
{
    (void)state;
    const char *g = mc_test_src("examples/mlp.graph");
    const char *good = mlp_weights("good.safetensors", NULL, NULL);
    assert_int_equal(minic("run %s --backend ref --weights %s", g, good), 0);
    char *with_weights = strdup(out);
    assert_int_equal(minic("run %s --backend ref", g), 0);
    assert_string_not_equal(with_weights, out); /* the file's values were used */
    free(with_weights);

    const char *missing = mlp_weights("missing.safetensors", "fc2.w", NULL);
    assert_int_equal(minic("run %s --backend ref --weights %s", g, missing), 1);
    assert_starts_with(err, "minic: error: ");
    assert_contains(err, missing);
    assert_contains(err, "'fc2.w'");

    const char *wrong = mlp_weights("wrong.safetensors", NULL, "fc1.b");
    assert_int_equal(minic("run %s --backend ref --weights %s", g, wrong), 1);
    assert_starts_with(err, "minic: error: ");
    assert_contains(err, "'fc1.b'");
    assert_contains(err, "f32[512]");
    assert_contains(err, "[513]");

    assert_int_equal(minic("run %s --backend ref --weights %s", g, tmp_path("absent.safetensors")), 1);
    assert_contains(err, "absent.safetensors");
}

static void write_npy(const char *path, mc_dtype dtype, const int64_t *shape, int rank)
{
    mc_array a = {.dtype = dtype, .rank = rank};
    int64_t numel = 1;
    for (int d = 0; d < rank; d++)
        numel *= a.shape[d] = shape[d];
    a.bytes = (size_t)numel * mc_dtype_size(dtype);
    a.data = calloc(1, a.bytes);
    mc_fill_random(a.data, dtype, numel, 99, "file");
    assert_int_equal(mc_npy_write(path, &a), MC_OK);
    free(a.data);
}

static void test_inputs(void **state)
{
    (void)state;
    const char *g = mc_test_src("examples/mlp.graph");
    const int64_t good_shape[] = {32, 128}, bad_shape[] = {32, 127};
    const char *good = tmp_path("x.npy"), *f16 = tmp_path("x16.npy"), *shape = tmp_path("xs.npy");
    write_npy(good, MC_F32, good_shape, 2);
    write_npy(f16, MC_F16, good_shape, 2);
    write_npy(shape, MC_F32, bad_shape, 2);

    assert_int_equal(minic("run %s --backend ref --input x=%s", g, good), 0);
    char *given = strdup(out);
    assert_int_equal(minic("run %s --backend ref", g), 0);
    assert_string_not_equal(given, out);
    free(given);

    assert_int_equal(minic("run %s --backend ref --input x=%s", g, f16), 1);
    assert_starts_with(err, "minic: error: ");
    assert_contains(err, f16);
    assert_contains(err, "'x'");
    assert_int_equal(minic("run %s --backend ref --input x=%s", g, shape), 1);
    assert_contains(err, shape);
    assert_contains(err, "f32[32, 128]");
    assert_int_equal(minic("run %s --backend ref --input nosuch=%s", g, good), 1);
    assert_contains(err, "'nosuch'");
    assert_int_equal(minic("run %s --backend ref --input x=%s", g, tmp_path("absent.npy")), 1);
    assert_contains(err, "absent.npy");
}

static void test_cuda_without_gpu(void **state)
{
    (void)state;
    int rc = minic("run %s --backend cuda", mc_test_src("examples/pointwise.graph"));
    if (rc == 0) {
        assert_contains(out, "backend cuda"); /* a GPU is here: then it must work */
        return;
    }
    assert_int_equal(rc, 2);
    assert_starts_with(err, "minic: error: backend 'cuda' is not ");
    assert_true(strlen(err) > strlen("minic: error: backend 'cuda' is not usable: \n")); /* a reason */
    assert_string_equal(out, "");
}

static void test_too_large_for_memory(void **state)
{
    (void)state;
    static const char text[] = "input x : f32[1000000, 1000000]\ny = neg(x)\noutput y\n";
    const char *g = mc_test_write_file("huge.graph", text, sizeof text - 1);
    /* 8 TB: refused before anything is allocated, as a failure of the system (exit 2). */
    assert_int_equal(minic("run %s --backend ref", g), 2);
    assert_starts_with(err, "minic: error: out of memory");
    assert_string_equal(out, "");
}

/* ---- what run computes --------------------------------------------------------------------- */

static void test_every_example_runs(void **state)
{
    (void)state;
    const char *examples[] = {"pointwise", "mlp", "layernorm", "softmax", "small_mlp", "mlp_ln",
                              "gpt2_block"};
    const char *outputs[] = {"y: f32[", "y: f32[", "y: f32[", "y: f32[", "r3: f32[", "z: f32[",
                             "x2: f32["};
    for (int i = 0; i < 7; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "examples/%s.graph", examples[i]);
        int rc = minic("run %s --backend ref", mc_test_src(rel));
        if (rc != 0)
            fail_msg("%s: exit %d\n%s", rel, rc, err);
        assert_contains(out, "backend ref");
        assert_contains(out, outputs[i]);
        assert_contains(out, "checksum: sum=");
        assert_string_equal(err, ""); /* an explicit backend: no notes */
        rc = minic("check %s", mc_test_src(rel));
        if (rc != 0)
            fail_msg("check %s: exit %d\n%s", rel, rc, err);
    }
}

/* Compile a graph file through the API on ref, seed, run: the reference for the CLI's files. */
static mc_program *api_program(const char *path, uint64_t seed, mc_graph **g)
{
    assert_int_equal(mc_graph_parse_file(path, g), MC_OK);
    mc_options opt = mc_options_default();
    opt.backend = MC_BACKEND_REF;
    mc_program *p = NULL;
    if (mc_program_compile(*g, &opt, &p) != MC_OK)
        fail_msg("%s", mc_error_message());
    assert_int_equal(mc_program_fill_random(p, seed), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK);
    return p;
}

static void test_output_round_trip(void **state)
{
    (void)state;
    const char *g = two_outputs_graph();
    const char *file = tmp_path("two.safetensors");
    unlink(file);
    assert_int_equal(minic("run %s --backend ref --seed 5 --output %s", g, file), 0);
    mc_graph *graph;
    mc_program *p = api_program(g, 5, &graph);
    mc_safetensors *st;
    assert_int_equal(mc_safetensors_open(file, &st), MC_OK);
    for (int i = 0; i < 2; i++) {
        mc_tensor t;
        assert_int_equal(mc_program_output(p, i, &t), MC_OK);
        mc_array a;
        assert_int_equal(mc_safetensors_get(st, t.name, &a), MC_OK);
        assert_int_equal(a.dtype, t.dtype);
        assert_int_equal(a.rank, t.rank);
        for (int d = 0; d < t.rank; d++)
            assert_int_equal(a.shape[d], t.shape[d]);
        assert_int_equal(a.bytes, t.bytes);
        assert_memory_equal(a.data, t.data, t.bytes);
    }
    mc_safetensors_close(st);

    /* One output: .npy. */
    const char *npy = tmp_path("mlp_y.npy");
    assert_int_equal(minic("run %s --backend ref --output %s", mc_test_src("examples/mlp.graph"), npy), 0);
    mc_array y;
    assert_int_equal(mc_npy_read(npy, MC_F32, &y), MC_OK);
    assert_int_equal(y.rank, 2);
    assert_int_equal(y.shape[0], 32);
    assert_int_equal(y.shape[1], 128);
    free(y.data);
    mc_program_free(p);
    mc_graph_free(graph);
}

static void test_seed_determinism(void **state)
{
    (void)state;
    const char *g = mc_test_src("examples/mlp.graph");
    assert_int_equal(minic("run %s --backend ref --seed 7", g), 0);
    char *first = strdup(strstr(out, "\n") + 1); /* skip the line with the compile time */
    assert_int_equal(minic("run %s --backend ref --seed 7", g), 0);
    assert_string_equal(first, strstr(out, "\n") + 1);
    assert_int_equal(minic("run %s --backend ref --seed 8", g), 0);
    assert_string_not_equal(first, strstr(out, "\n") + 1);
    free(first);
}

static void test_example_program_matches_cli(void **state)
{
    (void)state;
    const char *build = getenv("MINIC_BUILD");
    char cmd[4400], path[4300];
    snprintf(path, sizeof path, "%s/mlp_example", build ? build : "build");
    snprintf(cmd, sizeof cmd, "'%s' ref > '%s' 2>&1", path, tmp_path("example.txt"));
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(tmp_path("example.txt"), "r");
    assert_non_null(f);
    char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    assert_contains(text, "backend: ref");
    assert_int_equal(minic("run %s --backend ref", mc_test_src("examples/mlp.graph")), 0);
    /* Same seed, same names, same backend: the same values and checksum. */
    const char *summary = strstr(out, "y: f32[32, 128]");
    assert_non_null(summary);
    assert_contains(text, summary);
}

/* ---- timing, profile, bench, dump ---------------------------------------------------------- */

static char *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *text = calloc(1, 1 << 20);
    *size = fread(text, 1, (1 << 20) - 1, f);
    fclose(f);
    return text;
}

static void test_iters_and_profile(void **state)
{
    (void)state;
    const char *g = mc_test_src("examples/mlp.graph");
    const char *json = tmp_path("profile.json"), *trace = tmp_path("trace.json");
    const char *svg = tmp_path("roofline.svg");
    assert_int_equal(minic("run %s --backend ref --iters 3 --profile --profile-json %s --trace %s "
                           "--roofline %s", g, json, trace, svg), 0);
    assert_true(exists(svg));
    assert_contains(out, "time: ");
    assert_contains(out, "median of 3 runs");
    assert_contains(out, "gemm_bias_gelu_0");
    assert_contains(out, "totals: 2 kernels");
    assert_contains(out, "peak memory");

    /* The JSON object of SPEC §5: valid JSON, every required field, integers where required. */
    size_t size;
    char *text = slurp(json, &size);
    mc_arena arena = {0};
    mc_json *root;
    if (mc_json_parse(text, size, json, &arena, &root) != MC_OK)
        fail_msg("%s\n%s", mc_error_message(), text);
    assert_string_equal(mc_json_get(root, "backend")->text, "ref");
    assert_non_null(mc_json_get(root, "device"));
    assert_true(mc_json_get(root, "fused")->boolean);
    const mc_json *kernels = mc_json_get(root, "kernels");
    assert_int_equal(kernels->kind, MC_JSON_ARRAY);
    assert_int_equal(kernels->count, 2);
    const char *fields[] = {"name", "category", "ops", "lines", "launches", "time_us", "flops",
                            "bytes", "pct_peak_flops", "pct_peak_bw", "bound"};
    for (const mc_json *k = kernels->first; k; k = k->next) {
        for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
            if (!mc_json_get(k, fields[i]))
                fail_msg("kernel without \"%s\":\n%s", fields[i], text);
        int64_t flops, bytes;
        assert_true(mc_json_int64(mc_json_get(k, "flops"), &flops) && flops > 0);
        assert_true(mc_json_int64(mc_json_get(k, "bytes"), &bytes) && bytes > 0);
        assert_string_equal(mc_json_get(k, "category")->text, "gemm");
        assert_string_equal(mc_json_get(k, "ops")->first->text, "linear"); /* the user's op */
        /* ref runs on the host: each kernel is timed with the host clock. */
        assert_int_equal(mc_json_get(k, "time_us")->kind, MC_JSON_NUMBER);
    }
    const mc_json *totals = mc_json_get(root, "totals");
    const char *total_fields[] = {"kernels", "launches_per_run", "kernel_time_us", "wall_time_us",
                                  "peak_memory_bytes", "compile_ms"};
    for (size_t i = 0; i < sizeof total_fields / sizeof *total_fields; i++)
        assert_non_null(mc_json_get(totals, total_fields[i]));
    assert_int_equal(mc_json_get(totals, "wall_time_us")->kind, MC_JSON_NUMBER);
    mc_arena_free(&arena);
    free(text);

    /* The trace: Chrome's format, every event with its required fields. */
    text = slurp(trace, &size);
    if (mc_json_parse(text, size, trace, &arena, &root) != MC_OK)
        fail_msg("%s\n%s", mc_error_message(), text);
    const mc_json *events = mc_json_get(root, "traceEvents");
    assert_non_null(events);
    assert_int_equal(events->kind, MC_JSON_ARRAY);
    int complete = 0;
    for (const mc_json *e = events->first; e; e = e->next) {
        assert_non_null(mc_json_get(e, "name"));
        assert_non_null(mc_json_get(e, "ph"));
        assert_non_null(mc_json_get(e, "pid"));
        assert_non_null(mc_json_get(e, "tid"));
        if (!strcmp(mc_json_get(e, "ph")->text, "X")) {
            assert_non_null(mc_json_get(e, "ts"));
            assert_non_null(mc_json_get(e, "dur"));
            complete++;
        }
    }
    assert_int_equal(complete, 1 + 2); /* the host lane's run, the device lane's 2 kernels */
    mc_arena_free(&arena);
    free(text);
}

static void test_no_fuse(void **state)
{
    (void)state;
    const char *g = mc_test_src("examples/mlp.graph");
    assert_int_equal(minic("run %s --backend ref", g), 0);
    assert_contains(out, "fused, 2 kernels");
    assert_int_equal(minic("run %s --backend ref --no-fuse --no-plan", g), 0);
    assert_contains(out, "unfused, ");
    assert_null(strstr(out, "unfused, 2 kernels"));
}

static void test_bench(void **state)
{
    (void)state;
    assert_int_equal(minic("bench %s --backend ref --iters 2", mc_test_src("examples/mlp.graph")), 0);
    assert_contains(out, "fused");
    assert_contains(out, "unfused");
    assert_contains(out, "speedup: ");
    assert_contains(out, "output y: error vs float64");
    assert_contains(out, "agree");
    assert_null(strstr(out, "DISAGREE"));
}

static void test_dump(void **state)
{
    (void)state;
    const char *g = mc_test_src("examples/mlp.graph");
    assert_int_equal(minic("dump %s --stage ir", g), 0);
    assert_contains(out, "linear");
    assert_int_equal(minic("dump %s --stage fused", g), 0);
    assert_contains(out, "planned peak");
    assert_contains(out, "unplanned");
    assert_int_equal(minic("dump %s --stage decompose", g), 0);
    assert_null(strstr(out, "linear(")); /* decomposed */
    assert_int_equal(minic("dump %s --stage code --backend ref", g), 1);
    assert_contains(err, "generates no source");
    /* CUDA source renders without a GPU (for the default target) when CUDA is built. */
    int rc = minic("dump %s --stage code --backend cuda", g);
    if (rc == 0) {
        assert_contains(out, "gemm_bias_gelu_0");
    } else {
        assert_int_equal(rc, 2);
        assert_contains(err, "not available");
    }
}

/* --cpu-target NAME: the cpu backend's code for that CPU (dump shows it: AVX-512's 16-float
 * vectors, two to a step, on x86-64-v4, on any x86-64 machine); an unknown name is the user's
 * mistake (exit 1, with the near name); code this machine cannot run is refused (exit 2). */
static void test_cpu_target(void **state)
{
    (void)state;
#if defined(MINIC_HAVE_CPU_BACKEND) && defined(__x86_64__)
    const char *g = mc_test_src("examples/pointwise.graph");
    assert_int_equal(minic("run --help"), 0);
    assert_contains(out, "--cpu-target NAME");
    assert_int_equal(minic("dump %s --stage code --backend cpu --cpu-target x86-64-v4", g), 0);
    assert_contains(out, "\"target-cpu\"=\"x86-64-v4\"");
    assert_contains(out, "<32 x float>");
    assert_int_equal(minic("dump %s --stage code --backend cpu --cpu-target x86-64-v3", g), 0);
    assert_contains(out, "\"target-cpu\"=\"x86-64-v3\"");
    assert_null(strstr(out, "<32 x float>"));
    assert_int_equal(minic("run %s --backend cpu --cpu-target x86_64-v3", g), 1);
    assert_contains(err, "unknown CPU target 'x86_64-v3': did you mean 'x86-64-v3'?");
    assert_int_equal(minic("run %s --backend cpu --cpu-target ''", g), 1);
    assert_contains(err, "--cpu-target: empty CPU name");
    int rc = minic("run %s --backend cpu --cpu-target knl", g); /* Xeon Phi's features */
    if (rc != 0) {
        assert_int_equal(rc, 2);
        assert_contains(err, "cannot run code compiled for CPU target 'knl': it lacks ");
    }
    assert_int_equal(minic("run %s --backend cpu --cpu-target x86-64", g), 0); /* every x86-64 */
    assert_contains(out, "checksum");
#else
    print_message("no CPU backend, or not x86-64: nothing to check\n");
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_malformed_graph),
        cmocka_unit_test(test_npy_output_with_two_outputs),
        cmocka_unit_test(test_weights),
        cmocka_unit_test(test_inputs),
        cmocka_unit_test(test_cuda_without_gpu),
        cmocka_unit_test(test_too_large_for_memory),
        cmocka_unit_test(test_every_example_runs),
        cmocka_unit_test(test_output_round_trip),
        cmocka_unit_test(test_seed_determinism),
        cmocka_unit_test(test_example_program_matches_cli),
        cmocka_unit_test(test_iters_and_profile),
        cmocka_unit_test(test_no_fuse),
        cmocka_unit_test(test_bench),
        cmocka_unit_test(test_dump),
        cmocka_unit_test(test_cpu_target),
    };
    int failed = mc_test_run(tests);
    free(out);
    free(err);
    return failed;
}
