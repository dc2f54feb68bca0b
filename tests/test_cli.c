/* The minic command (docs/FORMAT.md §3): options, exit statuses, exact error formats, output files,
 * and that the command computes what the library computes.
 *
 * Each test runs the built binary ($MINIC_BIN) through mc_test_minic and looks at its exit
 * status, stdout and stderr. Files it needs (weights, .npy inputs, broken graphs) are written
 * with the library's own writers into the test's temporary directory. Where a value matters,
 * it is compared with the same graph compiled through the C API on the reference backend.
 */
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "passes/passes.h"
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
    const char *run_opts[] = {"--backend", "--weights", "--input", "--seed", "--output",
                              "--save-inputs", "--no-fuse",
                              "--cuda-graph", "--no-cuda-graph", "--iters", "--profile",
                              "--profile-json", "--trace", "--roofline", "--threads", "--tf32", "--quiet",
                              "--verbose"};
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
    /* every command is in the main help and in the unknown-command error */
    const char *commands[] = {"run", "bench", "check", "dump", "ops", "peaks"};
    assert_int_equal(minic("--help"), 0);
    char *help = strdup(out);
    assert_int_equal(minic("frobnicate"), 1);
    char *unknown = strdup(err);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        char line[32];
        snprintf(line, sizeof line, "\n  %s ", commands[i]);
        assert_contains(help, line);
        assert_contains(unknown, commands[i]);
        assert_int_equal(minic("%s --help", commands[i]), 0);
        assert_contains(out, "usage: minic ");
        assert_contains(out, commands[i]);
    }
    free(help);
    free(unknown);
    /* --version: the project version CMakeLists.txt sets, never a copy of it */
    assert_int_equal(minic("--version"), 0);
    assert_string_equal(out, "minic " MINIC_VERSION_STRING "\n");
    /* --quiet says what it silences, and each of those is silenced (test_wrote_files, test_notes) */
    assert_int_equal(minic("run --help"), 0);
    assert_contains(out, "wrote FILE");
}

/* docs/FORMAT.md §3: an unknown operator, option or command names the nearest valid ones. */
static void test_did_you_mean(void **state)
{
    (void)state;
    const char *g = mc_test_src("examples/mlp.graph");
    assert_int_equal(minic("rnu %s", g), 1);
    assert_starts_with(err, "minic: error: unknown command 'rnu' (did you mean 'run'?");
    assert_int_equal(minic("dmup %s", g), 1);
    assert_contains(err, "did you mean 'dump'?");
    assert_int_equal(minic("frobnicate %s", g), 1);
    assert_null(strstr(err, "did you mean")); /* nothing near: no guess, the list */
    assert_contains(err, "commands: run, bench, check, dump, import, ops, peaks");

    assert_int_equal(minic("run %s --iter 3", g), 1);
    assert_string_equal(err, "minic: error: unknown option '--iter' for 'minic run' (did you mean "
                             "'--iters'? see minic run --help)\n");
    assert_int_equal(minic("run %s --prof", g), 1); /* a prefix of two */
    assert_contains(err, "did you mean '--profile' or '--profile-json'?");
    assert_int_equal(minic("dump %s --stgae fuse", g), 1);
    assert_contains(err, "did you mean '--stage'?");
    assert_int_equal(minic("dump %s --stage fsued", g), 1); /* a stage's name too (it listed them only) */
    assert_starts_with(err, "minic: error: --stage: unknown stage 'fsued' (did you mean 'fused'");
    assert_contains(err, "stages: ir, ");
    assert_int_equal(minic("check %s --bakend ref", g), 1); /* only what applies to check */
    assert_null(strstr(err, "did you mean"));

    static const char text[] = "graph typo\n"
                               "input x : f32[4, 8]\n"
                               "y = sofmax(x, axis=-1)\n"
                               "z = lienar(y, y)\n"
                               "output z\n";
    const char *path = mc_test_write_file("typo.graph", text, sizeof text - 1);
    char want[4400];
    snprintf(want, sizeof want, "%s:3:5: error: unknown operator 'sofmax' (did you mean 'softmax'?)\n",
             path);
    assert_int_equal(minic("check %s", path), 1);
    assert_starts_with(err, want);
    assert_contains(err, "  y = sofmax(x, axis=-1)\n      ^"); /* the line, a caret at the name */
    static const char text2[] = "input x : f32[4]\ny = lienar(x, x)\nz = frobnicate(y)\noutput z\n";
    path = mc_test_write_file("typo2.graph", text2, sizeof text2 - 1);
    assert_int_equal(minic("check %s", path), 1);
    assert_contains(err, ":2:5: error: unknown operator 'lienar' (did you mean 'linear'?)");
    static const char text3[] = "input x : f32[4]\nz = frobnicate(x)\noutput z\n";
    path = mc_test_write_file("typo3.graph", text3, sizeof text3 - 1);
    assert_int_equal(minic("check %s", path), 1);
    assert_contains(err, ":2:5: error: unknown operator 'frobnicate'\n");
    assert_int_equal(minic("ops sofmax"), 1);
    assert_contains(err, "did you mean 'softmax'?");
    assert_int_equal(minic("peaks --backen cpu"), 1); /* refused before anything is measured */
    assert_contains(err, "did you mean '--backend'?");
    assert_int_equal(minic("peaks --backend"), 1);
    assert_contains(err, "'--backend' needs a value");

    /* --input NAME=FILE with a NAME the graph does not declare: the nearest declared names,
     * else the list of them (the file is never read) */
    assert_int_equal(minic("run %s --backend ref --input fc1.x=nothing.npy", g), 1);
    assert_string_equal(err, "minic: error: nothing.npy: graph 'mlp' has no input or param named "
                             "'fc1.x' (did you mean 'fc1.w' or 'fc1.b'?)\n");
    static const char text4[] = "input x : f32[4]\ninput y : f32[4]\nz = add(x, y)\noutput z\n";
    path = mc_test_write_file("unnamed.graph", text4, sizeof text4 - 1);
    assert_int_equal(minic("run %s --backend ref --input activations=nothing.npy", path), 1);
    assert_string_equal(err, "minic: error: nothing.npy: the graph has no input or param named "
                             "'activations' (it declares 'x', 'y')\n");
    /* a value the graph computes is not an input */
    assert_int_equal(minic("run %s --backend ref --input z=nothing.npy", path), 1);
    assert_string_equal(err, "minic: error: nothing.npy: 'z' is computed by the graph at line 3, "
                             "not an input or param\n");
}

/* `minic ops` is the op table and the type rules: every operator of ir/ops.def, the dtypes
 * mc_op_accepts_dtype accepts, every attribute key it takes. */
static void test_ops(void **state)
{
    (void)state;
    assert_int_equal(minic("ops"), 0);
    assert_string_equal(err, "");
    int listed = 0;
    for (int i = 0; i < MC_NUM_OPS; i++) {
        const mc_op_info *info = &mc_op_table[i];
        if (info->kind == MC_KIND_LEAF)
            continue; /* input, param, const: statements, not operators */
        char head[64];
        snprintf(head, sizeof head, "\n%s(", info->name);
        const char *line = strstr(out, head);
        if (!line)
            fail_msg("operator '%s' is not listed:\n%s", info->name, out);
        line++;
        size_t len = strcspn(line, "\n");
        char row[256];
        snprintf(row, sizeof row, "%.*s", (int)len, line);
        char dtypes[64] = "  ";
        for (int d = 0; d < MC_NUM_DTYPES; d++)
            if (mc_op_accepts_dtype((mc_op)i, (mc_dtype)d)) {
                strcat(dtypes, mc_dtype_name((mc_dtype)d));
                strcat(dtypes, " ");
            }
        dtypes[strlen(dtypes) - 1] = '\0'; /* "  f32 f16 bf16 i32" then padding */
        if (!strstr(row, dtypes))
            fail_msg("'%s': expected dtypes \"%s\" in \"%s\"", info->name, dtypes + 2, row);
        for (int k = 0; k < MC_NUM_ATTRS; k++) {
            char with[32], optional[32];
            snprintf(with, sizeof with, "%s=", mc_attr_names[k]);
            snprintf(optional, sizeof optional, "%s?=", mc_attr_names[k]);
            bool shown = strstr(row, with) || strstr(row, optional);
            if (shown != ((info->attrs >> k) & 1))
                fail_msg("'%s': attribute %s %s: \"%s\"", info->name, mc_attr_names[k],
                         shown ? "shown but not taken" : "taken but not shown", row);
        }
        if (mc_op_is_composite((mc_op)i))
            assert_contains(row, "composite");
        listed++;
    }
    /* one row per operator and no other (input, param, const are not operators): the rows
     * are the lines between the header and the first blank line */
    int rows = 0;
    const char *end = strstr(out, "\n\n");
    assert_non_null(end);
    for (const char *c = strchr(out, '\n'); c && c < end; c = strchr(c + 1, '\n'))
        rows++;
    assert_int_equal(rows, listed);
    assert_null(strstr(out, "\ninput("));
    assert_int_equal(minic("ops softmax cast"), 0);
    assert_contains(out, "softmax(x, axis=-1)");
    assert_contains(out, "cast(x, to=DTYPE)");
    assert_null(strstr(out, "\nneg("));
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

/* Edges of the command line: `--` ends the options (getopt's rule); an option before the
 * command, a subcommand of `cache` and `minic help COMMAND`; an input given twice, a symbolic
 * dimension bound to two sizes, and two written files under one name are refused before
 * anything runs. */
static void test_argument_edges(void **state)
{
    (void)state;
    const char *g = mc_test_src("examples/mlp.graph");
    assert_int_equal(minic("check -- %s", g), 0); /* was: unexpected argument '--' */
    assert_contains(out, "output y");
    assert_int_equal(minic("run --backend ref --quiet -- %s", g), 0);
    assert_contains(out, "y: f32[32, 128]");
    assert_int_equal(minic("run -- %s --quiet", g), 1); /* after --, nothing is an option */
    assert_string_equal(err, "minic: error: run: unexpected argument '--quiet' (one graph file only)\n");

    assert_int_equal(minic("--versio"), 1);
    assert_starts_with(err, "minic: error: unknown option '--versio' (did you mean '--version'?");
    assert_int_equal(minic("--backend ref run %s", g), 1);
    assert_starts_with(err, "minic: error: unknown option '--backend' (before a command");
    assert_int_equal(minic("help run"), 0); /* minic run --help */
    assert_starts_with(out, "usage: minic run ");
    assert_int_equal(minic("help ops"), 0);
    assert_starts_with(out, "usage: minic ops ");
    assert_int_equal(minic("cache infoo"), 1);
    assert_string_equal(err, "minic: error: cache: unknown command 'infoo' (did you mean 'info'? usage: minic "
                             "cache info|clear)\n");

    static const char sym[] = "input x : f32[T]\ny = relu(x)\noutput y\n";
    const char *sg = mc_test_write_file("edges_sym.graph", sym, sizeof sym - 1);
    assert_int_equal(minic("run %s --backend ref --quiet --dim T=4 --dim T=5", sg), 1);
    assert_string_equal(err, "minic: error: --dim T=5: 'T' is already bound to 4 by --dim T=4\n");
    /* --dim on a graph without symbolic dimensions names nothing: an error for run too (run
     * ignored it, check refused it) */
    assert_int_equal(minic("run %s --backend ref --quiet --dim T=4", g), 1);
    assert_starts_with(err, "minic: error: --dim T=4: ");
    assert_contains(err, "has no symbolic dimension 'T' (it has none)");
    /* a symbol nothing binds: the error names it and the input that uses it (docs/FORMAT.md §1) */
    static const char sym2[] = "input x : f32[B, 4]\ninput m : f32[T, 4]\ny = sum(x)\nz = sum(m)\noutput y, z\n";
    const char *sg2 = mc_test_write_file("edges_sym2.graph", sym2, sizeof sym2 - 1);
    assert_int_equal(minic("run %s --backend ref --quiet --dim B=2", sg2), 1);
    assert_string_equal(err, "minic: error: dimension 'T' is unbound: give an input whose type uses it, or --dim "
                             "T=INT (mc_program_set_dim); input 'm' (declared f32[T, 4]) uses it and was not given\n");
    assert_int_equal(minic("run %s --backend ref --quiet --dim T=4 --dim T=4", sg), 0); /* the same: fine */
    assert_contains(out, "y: f32[4]");
    assert_int_equal(minic("run %s --backend ref --quiet --input x=a.npy --input x=b.npy", g), 1);
    assert_string_equal(err, "minic: error: --input x=b.npy: 'x' is already given (--input x=a.npy); give "
                             "each input once\n");
    /* a symbolic graph's unknown --input name gets the same hint as any graph's */
    assert_int_equal(minic("run %s --backend ref --quiet --input xx=a.npy", sg), 1);
    assert_string_equal(err, "minic: error: a.npy: the graph has no input or param named 'xx' (did you mean "
                             "'x'?)\n");
    assert_int_equal(minic("run %s --backend ref --quiet --input y=a.npy", sg), 1);
    assert_string_equal(err, "minic: error: a.npy: 'y' is computed by the graph at line 2, not an input or "
                             "param\n");

    const char *st = tmp_path("edges_same.safetensors");
    assert_int_equal(minic("run %s --backend ref --quiet --save-inputs %s --output %s", g, st, st), 1);
    assert_starts_with(err, "minic: error: --output and --save-inputs name the same file");
    assert_false(exists(st));
    const char *js = tmp_path("edges_same.json");
    assert_int_equal(minic("run %s --backend ref --quiet --profile-json %s --trace %s", g, js, js), 1);
    assert_starts_with(err, "minic: error: --profile-json and --trace name the same file");
    assert_false(exists(js));
    /* ... but a device is not a file one write replaces: both to /dev/null is fine */
    assert_int_equal(minic("run %s --backend ref --quiet --profile-json /dev/null --trace /dev/null", g), 0);
}

static char *slurp(const char *path, size_t *size);

/* A summary that cannot be written (stdout on a full disk: /dev/full) is the system's failure,
 * exit status 2 with a message; it was a silent 0 for run, ops and --help. */
static void test_stdout_write_error(void **state)
{
    (void)state;
    if (access("/dev/full", W_OK) != 0) {
        print_message("skipped: no /dev/full\n");
        return;
    }
    const char *bin = getenv("MINIC_BIN");
    const char *forms[] = {"run %s --backend ref --quiet", "check %s", "ops", "--help"};
    for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) {
        char args[4500], cmd[9000];
        snprintf(args, sizeof args, forms[i], mc_test_src("examples/mlp.graph"));
        snprintf(cmd, sizeof cmd, "%s %s </dev/null >/dev/full 2>'%s'", bin ? bin : "build/minic", args,
                 tmp_path("full_err.txt"));
        int status = system(cmd);
        assert_true(WIFEXITED(status));
        if (WEXITSTATUS(status) != 2)
            fail_msg("`minic %s > /dev/full`: exit status %d, expected 2", args, WEXITSTATUS(status));
        size_t size;
        char *text = slurp(tmp_path("full_err.txt"), &size);
        assert_contains(text, "minic: error: ");
        free(text);
    }
}

/* ---- errors about files -------------------------------------------------------------------- */

/* A file of raw bytes: a safetensors header naming fc1.b as `dtype`, the rest of mlp's
 * params as F32, zeros for data. */
static const char *mlp_weights_with(const char *file, const char *dtype, int elem_size)
{
    const char *names[] = {"fc1.w", "fc1.b", "fc2.w", "fc2.b"};
    const int64_t numel[] = {512 * 128, 512, 128 * 512, 128};
    const char *shapes[] = {"[512,128]", "[512]", "[128,512]", "[128]"};
    char header[1024];
    size_t used = (size_t)snprintf(header, sizeof header, "{");
    int64_t offset = 0;
    for (int i = 0; i < 4; i++) {
        int size = i == 1 ? elem_size : 4;
        used += (size_t)snprintf(header + used, sizeof header - used,
                                 "%s\"%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%lld,%lld]}",
                                 i ? "," : "", names[i], i == 1 ? dtype : "F32", shapes[i],
                                 (long long)offset, (long long)(offset + numel[i] * size));
        offset += numel[i] * size;
    }
    used += (size_t)snprintf(header + used, sizeof header - used, "}");
    size_t total = 8 + used + (size_t)offset;
    unsigned char *bytes = calloc(1, total);
    uint64_t n = used;
    memcpy(bytes, &n, 8); /* little-endian host (the formats assume it) */
    memcpy(bytes + 8, header, used);
    const char *path = mc_test_write_file(file, bytes, total);
    free(bytes);
    return path;
}

/* docs/FORMAT.md §4: a tensor in another dtype names both dtypes, never "missing". */
static void test_weights_other_dtype(void **state)
{
    (void)state;
    const char *g = mc_test_src("examples/mlp.graph");
    const char *f64 = mlp_weights_with("f64.safetensors", "F64", 8);
    assert_int_equal(minic("run %s --backend ref --weights %s", g, f64), 1);
    assert_starts_with(err, "minic: error: ");
    assert_contains(err, "'fc1.b'");
    assert_contains(err, "f32[512]");
    assert_contains(err, "F64[512]");
    assert_null(strstr(err, "missing"));
    assert_string_equal(out, "");
    /* the same tensor given by --input NAME=FILE.safetensors: both dtypes named there too */
    assert_int_equal(minic("run %s --backend ref --input fc1.b=%s", g, f64), 1);
    assert_starts_with(err, "minic: error: ");
    assert_contains(err, "'fc1.b'");
    assert_contains(err, "f32[512]");
    assert_contains(err, "F64[512]");
    assert_null(strstr(err, "missing"));
    /* and a tensor the file does not have is missing, with the declaration it was wanted for */
    assert_int_equal(minic("run %s --backend ref --input x=%s", g, f64), 1);
    assert_contains(err, "input 'x' (f32[32, 128]) is missing from the file");
    /* a dtype minic reads but not the declared one: both named too */
    const char *f16 = mlp_weights_with("f16.safetensors", "F16", 2);
    assert_int_equal(minic("run %s --backend ref --weights %s", g, f16), 1);
    assert_contains(err, "'fc1.b'");
    assert_contains(err, "f32[512]");
    assert_contains(err, "f16[512]");
    assert_null(strstr(err, "missing"));
    /* the same file with F32 everywhere runs: the bytes above are what the test meant */
    const char *f32 = mlp_weights_with("f32.safetensors", "F32", 4);
    assert_int_equal(minic("run %s --backend ref --weights %s", g, f32), 0);
}

/* A .npy file of raw bytes: descr, shape (rank 2), n elements of elem bytes. */
static const char *raw_npy(const char *file, const char *descr, int64_t rows, int64_t cols,
                           const void *data, size_t elem)
{
    char header[128];
    int len = snprintf(header, sizeof header,
                       "{'descr': '%s', 'fortran_order': False, 'shape': (%lld, %lld), }", descr,
                       (long long)rows, (long long)cols);
    int total_header = (10 + len + 1 + 63) / 64 * 64 - 10; /* padded so the data is aligned */
    size_t bytes = (size_t)(rows * cols) * elem;
    unsigned char *buf = calloc(1, 10 + (size_t)total_header + bytes);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)(total_header & 0xFF);
    buf[9] = (unsigned char)(total_header >> 8);
    memset(buf + 10, ' ', (size_t)total_header);
    memcpy(buf + 10, header, (size_t)len);
    buf[10 + total_header - 1] = '\n';
    memcpy(buf + 10 + total_header, data, bytes);
    const char *path = mc_test_write_file(file, buf, 10 + (size_t)total_header + bytes);
    free(buf);
    return path;
}

/* docs/FORMAT.md §4: <i8 is read for an i32 input when every value fits; else the first value that does
 * not is named. */
static void test_npy_int64_input(void **state)
{
    (void)state;
    static const char text[] = "input i : i32[2, 3]\ny = mul(i, 2)\noutput y\n";
    const char *g = mc_test_write_file("int.graph", text, sizeof text - 1);
    int64_t fits[6] = {1, -2, 3, 2147483647, -2147483647 - 1, 6};
    const char *good = raw_npy("i8.npy", "<i8", 2, 3, fits, 8);
    assert_int_equal(minic("run %s --backend ref --input i=%s", g, good), 0);
    /* i32 arithmetic wraps: 2^31-1 * 2 = -2, -2^31 * 2 = 0 */
    assert_contains(out, "values: 2 -4 6 -2 0 12 (6 elements)");
    int32_t same[6] = {1, -2, 3, 2147483647, -2147483647 - 1, 6};
    const char *i4 = raw_npy("i4.npy", "<i4", 2, 3, same, 4);
    char *from_i8 = strdup(strchr(out, '\n') + 1); /* after the line with the compile time */
    assert_int_equal(minic("run %s --backend ref --input i=%s", g, i4), 0);
    assert_string_equal(strchr(out, '\n') + 1, from_i8); /* the same values as the <i4 file */
    free(from_i8);

    int64_t too_big[6] = {1, 2, 3, 4, 2147483648LL, -3000000000LL};
    const char *bad = raw_npy("i8_big.npy", "<i8", 2, 3, too_big, 8);
    assert_int_equal(minic("run %s --backend ref --input i=%s", g, bad), 1);
    assert_starts_with(err, "minic: error: ");
    assert_contains(err, bad);
    assert_contains(err, "2147483648");      /* the first value that does not fit */
    assert_null(strstr(err, "-3000000000"));  /* not the second */
    assert_contains(err, "element 4 [1, 1]");
    assert_string_equal(out, "");
    /* <i8 for an f32 input is still refused */
    static const char ftext[] = "input x : f32[2, 3]\ny = neg(x)\noutput y\n";
    const char *fg = mc_test_write_file("f.graph", ftext, sizeof ftext - 1);
    assert_int_equal(minic("run %s --backend ref --input x=%s", fg, good), 1);
    assert_contains(err, "<i8");
}

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

/* --save-inputs writes what the run used; --weights and --input NAME=FILE.safetensors from that
 * file repeat the run exactly. */
static void test_save_inputs(void **state)
{
    (void)state;
    const char *g = mc_test_src("examples/mlp.graph");
    const char *saved = tmp_path("mlp_inputs.safetensors");
    unlink(saved);
    assert_int_equal(minic("run %s --backend ref --seed 11 --save-inputs %s", g, saved), 0);
    char want[4400];
    snprintf(want, sizeof want, "minic: wrote %s\n", saved);
    assert_string_equal(err, want);
    assert_true(exists(saved));
    char *first = strdup(strstr(out, "\n") + 1); /* skip the line with the compile time */
    assert_int_equal(minic("run %s --backend ref --weights %s --input x=%s", g, saved, saved), 0);
    assert_string_equal(first, strstr(out, "\n") + 1);
    assert_string_equal(err, "");
    /* the seed no longer matters: every value comes from the file */
    assert_int_equal(minic("run %s --backend ref --seed 12 --weights %s --input x=%s", g, saved, saved), 0);
    assert_string_equal(first, strstr(out, "\n") + 1);
    assert_int_equal(minic("run %s --backend ref --seed 12", g), 0);
    assert_string_not_equal(first, strstr(out, "\n") + 1);
    free(first);

    /* The file holds the generated values themselves. */
    mc_safetensors *st;
    assert_int_equal(mc_safetensors_open(saved, &st), MC_OK);
    assert_int_equal(mc_safetensors_count(st), 5); /* x, fc1.w, fc1.b, fc2.w, fc2.b */
    mc_array b;
    assert_int_equal(mc_safetensors_get(st, "fc2.b", &b), MC_OK);
    float expect[128];
    mc_fill_random(expect, MC_F32, 128, 11, "fc2.b");
    assert_int_equal(b.bytes, sizeof expect);
    assert_memory_equal(b.data, expect, sizeof expect);
    mc_safetensors_close(st);

    /* --quiet, bench, and the errors: a wrong suffix, a tensor missing from the file. */
    unlink(saved);
    assert_int_equal(minic("run %s --backend ref --quiet --save-inputs %s", g, saved), 0);
    assert_string_equal(err, "");
    assert_true(exists(saved));
    const char *benched = tmp_path("bench_inputs.safetensors");
    unlink(benched);
    assert_int_equal(minic("bench %s --backend ref --iters 1 --save-inputs %s", g, benched), 0);
    assert_true(exists(benched));
    assert_int_equal(minic("run %s --backend ref --save-inputs %s", g, tmp_path("in.npy")), 1);
    assert_starts_with(err, "minic: error: --save-inputs ");
    assert_false(exists(tmp_path("in.npy")));
    const char *outputs = tmp_path("mlp_outputs.safetensors");
    assert_int_equal(minic("run %s --backend ref --output %s", g, outputs), 0);
    assert_int_equal(minic("run %s --backend ref --input x=%s", g, outputs), 1);
    assert_starts_with(err, "minic: error: ");
    assert_contains(err, outputs);
    assert_contains(err, "'x'");
    const char *nowhere = tmp_path("no_such_dir/in.safetensors");
    assert_int_not_equal(minic("run %s --backend ref --save-inputs %s", g, nowhere), 0);
    assert_contains(err, nowhere);
    assert_false(exists(nowhere));
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

/* Read PATH and parse it as JSON into ARENA; the text stays in *TEXT (the caller frees it and
 * the arena). A parse error fails the test with the message and the text. */
static mc_json *load_json(const char *path, mc_arena *arena, char **text)
{
    size_t size;
    *text = slurp(path, &size);
    mc_json *root;
    if (mc_json_parse(*text, size, path, arena, &root) != MC_OK)
        fail_msg("%s\n%s", mc_error_message(), *text);
    return root;
}

/* docs/FORMAT.md §5: the GEMM that computes a conv is category `conv` (it was `gemm`), in the
 * JSON, the table and its by-category lines; its FLOPs are 2·MACs. */
static void test_profile_conv_category(void **state)
{
    (void)state;
    static const char text[] = "input x : f32[1, 2, 5, 5]\n"
                               "param w : f32[3, 2, 3, 3]\n"
                               "y = conv(x, w, padding=[1, 1])\n"
                               "output y\n";
    const char *g = mc_test_write_file("conv_profile.graph", text, sizeof text - 1);
    const char *json = tmp_path("conv_profile.json");
    assert_int_equal(minic("run %s --backend ref --quiet --iters 1 --profile --profile-json %s", g, json), 0);
    assert_contains(out, "\nconv ");
    mc_arena arena = {0};
    char *jtext;
    mc_json *root = load_json(json, &arena, &jtext);
    int convs = 0;
    for (const mc_json *k = mc_json_get(root, "kernels")->first; k; k = k->next) {
        if (strcmp(mc_json_get(k, "category")->text, "conv"))
            continue;
        convs++;
        int64_t flops;
        assert_true(mc_json_int64(mc_json_get(k, "flops"), &flops));
        assert_int_equal(flops, 2 * (1 * 3 * 5 * 5) * (2 * 3 * 3)); /* 2 · outputs · MACs each */
        assert_string_equal(mc_json_get(k, "ops")->first->text, "conv");
    }
    if (convs != 1)
        fail_msg("expected one kernel of category conv:\n%s", jtext);
    mc_arena_free(&arena);
    free(jtext);
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

    /* docs/FORMAT.md §5's JSON object: valid JSON, every required field, integers as required */
    mc_arena arena = {0};
    char *text;
    mc_json *root = load_json(json, &arena, &text);
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
    /* The kernel time comes from the same runs as the wall time: never more than it. */
    assert_true(strtod(mc_json_get(totals, "kernel_time_us")->text, NULL) <=
                strtod(mc_json_get(totals, "wall_time_us")->text, NULL));
    /* The peaks used (ref has none), the groups and the version (docs/FORMAT.md §5). */
    const mc_json *peaks = mc_json_get(root, "peaks");
    assert_non_null(peaks);
    assert_non_null(mc_json_get(peaks, "flops"));
    assert_non_null(mc_json_get(peaks, "bytes_per_s"));
    assert_string_equal(mc_json_get(peaks, "source")->text, "none");
    const mc_json *groups = mc_json_get(root, "groups");
    assert_non_null(groups);
    assert_int_equal(groups->kind, MC_JSON_ARRAY);
    assert_int_equal(groups->count, 2); /* gemm_bias_gelu and gemm_bias_add differ */
    assert_string_equal(mc_json_get(root, "minic_version")->text, MINIC_VERSION_STRING);
    mc_arena_free(&arena);
    free(text);

    /* The trace: Chrome's format, every event with its required fields. */
    root = load_json(trace, &arena, &text);
    /* Chrome's trace event format, field by field (what Perfetto's importer reads): a JSON
     * object with traceEvents; displayTimeUnit "ms" or "ns"; metadata events (ph M) naming the
     * process and threads; complete events (ph X) with a string name and cat, integer pid and
     * tid, numeric ts and dur in microseconds (non-negative), and an args object. The host
     * lane has one event per measured run, the device lane every kernel of every run, each
     * inside its run and at its real time: 3 runs of 2 kernels here. */
    const mc_json *unit = mc_json_get(root, "displayTimeUnit");
    assert_non_null(unit);
    assert_true(!strcmp(unit->text, "ns") || !strcmp(unit->text, "ms"));
    /* which clock the times come from, for the kernels and for the runs */
    const mc_json *other = mc_json_get(root, "otherData");
    assert_non_null(other);
    assert_string_equal(mc_json_get(other, "clock")->text, "host clock in ordinary runs");
    assert_string_equal(mc_json_get(other, "run_clock")->text, "host clock around each run");
    const mc_json *events = mc_json_get(root, "traceEvents");
    assert_non_null(events);
    assert_int_equal(events->kind, MC_JSON_ARRAY);
    int complete = 0, runs = 0, kernels_seen = 0, meta = 0;
    double run_ts[3] = {0}, run_end[3] = {0};
    for (const mc_json *e = events->first; e; e = e->next) {
        assert_int_equal(e->kind, MC_JSON_OBJECT);
        const mc_json *name = mc_json_get(e, "name"), *ph = mc_json_get(e, "ph");
        const mc_json *pid = mc_json_get(e, "pid"), *tid = mc_json_get(e, "tid");
        assert_non_null(name);
        assert_non_null(ph);
        assert_non_null(pid);
        assert_non_null(tid);
        assert_int_equal(name->kind, MC_JSON_STRING);
        assert_int_equal(ph->kind, MC_JSON_STRING);
        int64_t pid_v, tid_v;
        assert_true(mc_json_int64(pid, &pid_v) && mc_json_int64(tid, &tid_v));
        const mc_json *args = mc_json_get(e, "args");
        assert_non_null(args);
        assert_int_equal(args->kind, MC_JSON_OBJECT);
        if (!strcmp(ph->text, "M")) {
            if (!strcmp(name->text, "thread_sort_index")) { /* lanes in order: runs, device */
                int64_t sort_index;
                assert_true(mc_json_int64(mc_json_get(args, "sort_index"), &sort_index));
                assert_int_equal(sort_index, tid_v);
                continue;
            }
            assert_true(!strcmp(name->text, "process_name") || !strcmp(name->text, "thread_name"));
            assert_int_equal(mc_json_get(args, "name")->kind, MC_JSON_STRING);
            meta++;
            continue;
        }
        assert_string_equal(ph->text, "X");
        const mc_json *ts = mc_json_get(e, "ts"), *dur = mc_json_get(e, "dur");
        const mc_json *cat = mc_json_get(e, "cat");
        assert_non_null(ts);
        assert_non_null(dur);
        assert_non_null(cat);
        assert_int_equal(ts->kind, MC_JSON_NUMBER);
        assert_int_equal(dur->kind, MC_JSON_NUMBER);
        assert_int_equal(cat->kind, MC_JSON_STRING);
        double t0 = strtod(ts->text, NULL), d = strtod(dur->text, NULL);
        assert_true(t0 >= 0 && d >= 0);
        const mc_json *run = mc_json_get(args, "run");
        assert_non_null(run); /* real timestamps: every event says which run it belongs to */
        int64_t r;
        assert_true(mc_json_int64(run, &r) && r >= 0 && r < 3);
        if (tid_v == 1) {
            assert_string_equal(cat->text, "run");
            run_ts[r] = t0;
            run_end[r] = t0 + d;
            runs++;
        } else {
            assert_int_equal(tid_v, 2); /* one lane: the kernels of a run never overlap here */
            int64_t lane;
            assert_true(mc_json_int64(mc_json_get(args, "lane"), &lane) && lane == 0);
            assert_string_equal(cat->text, "gemm");
            assert_true(run_end[r] > 0 || r == 0); /* runs come before their kernels */
            assert_true(t0 >= run_ts[r] - 1e-3 && t0 + d <= run_end[r] + 1e-3);
            kernels_seen++;
        }
        complete++;
    }
    assert_int_equal(meta, 3);
    assert_int_equal(runs, 3);
    assert_int_equal(kernels_seen, 3 * 2);
    assert_int_equal(complete, 3 + 3 * 2);
    for (int r = 1; r < 3; r++)
        assert_true(run_ts[r] >= run_end[r - 1] - 1e-3); /* runs in order, not overlapping */
    mc_arena_free(&arena);
    free(text);
}

/* docs/FORMAT.md §5: the grouped view: kernels that are the same code on the same shapes (a layer repeated)
 * are one row with xN under the table, and one entry of the JSON's groups with their summed
 * time; a layer on other shapes is its own group. */
static void test_profile_groups(void **state)
{
    (void)state;
    static const char text[] = "graph layers\n"
                               "input x : f32[8, 16]\n"
                               "param w1 : f32[16, 16]\n"
                               "param w2 : f32[16, 16]\n"
                               "param w3 : f32[16, 16]\n"
                               "param w4 : f32[24, 16]\n"
                               "h1 = linear(x, w1)\n"
                               "a1 = gelu(h1)\n"
                               "h2 = linear(a1, w2)\n"
                               "a2 = gelu(h2)\n"
                               "h3 = linear(a2, w3)\n"
                               "a3 = gelu(h3)\n"
                               "h4 = linear(a3, w4)\n"
                               "a4 = gelu(h4)\n"
                               "output a4\n";
    const char *g = mc_test_write_file("layers.graph", text, sizeof text - 1);
    const char *json = tmp_path("groups.json");
    int rc = minic("run %s --backend ref --iters 2 --profile --profile-json %s", g, json);
    if (rc != 0)
        fail_msg("%s", err);
    assert_contains(out, "grouped (the same code on the same shapes; 2 groups of 4 kernels)");
    assert_contains(out, "x3");
    mc_arena arena = {0};
    char *jt;
    mc_json *root = load_json(json, &arena, &jt);
    const mc_json *groups = mc_json_get(root, "groups");
    assert_int_equal(groups->count, 2);
    int64_t n;
    assert_true(mc_json_int64(mc_json_get(groups->first, "kernels"), &n));
    assert_int_equal(n, 3);
    assert_int_equal(mc_json_get(groups->first, "members")->count, 3);
    assert_true(mc_json_int64(mc_json_get(groups->first->next, "kernels"), &n));
    assert_int_equal(n, 1);
    mc_arena_free(&arena);
    free(jt);
}

/* The sum of the "ms" of every phase after `from` in a line of "name X ms" pairs; -1 if none. */
static double phases_sum(const char *from, int *count)
{
    double sum = 0;
    *count = 0;
    const char *end = strchr(from, '\n');
    for (const char *s = from; (s = strstr(s, " ms")) && (!end || s < end); s += 3) {
        const char *num = s;
        while (num > from && (num[-1] == '.' || (num[-1] >= '0' && num[-1] <= '9')))
            num--;
        sum += strtod(num, NULL);
        (*count)++;
    }
    return *count ? sum : -1;
}

/* Where the compile time goes (issue 21): `--verbose` names the time to the first result and
 * each compile phase, the profile prints them under the totals and its JSON has
 * totals.compile_phases, and the phases add up to the compile time. On the cpu backend the
 * second compile of a graph comes from the kernel cache: no LLVM compile phase. */
static void test_compile_phases(void **state)
{
    (void)state;
    const char *g = mc_test_src("examples/mlp.graph");
    assert_int_equal(minic("run %s --backend ref --verbose", g), 0);
    assert_contains(err, "minic: time to the first result ");
    assert_contains(err, "read the graph ");
    assert_contains(err, "first run ");
    const char *c = strstr(err, "minic: compile ");
    assert_non_null(c);
    double total = strtod(c + strlen("minic: compile "), NULL);
    const char *colon = strchr(c + strlen("minic:"), ':'); /* after "compile X ms" */
    assert_non_null(colon);
    int n;
    double sum = phases_sum(colon, &n);
    assert_true(n >= 6); /* backend choice, graph passes, fusion, lowering, memory plan, ... */
    if (fabs(sum - total) > 0.05 * total + 0.5)
        fail_msg("the phases add up to %.2f ms, the compile took %.2f ms:\n%s", sum, total, err);
    const char *names[] = {"backend choice ", "graph passes ", "fusion ", "lowering ", "memory plan "};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        assert_contains(c, names[i]);
    assert_int_equal(minic("run %s --backend ref --quiet", g), 0);
    assert_null(strstr(err, "time to the first result")); /* only when asked */

    const char *json = tmp_path("phases.json");
    assert_int_equal(minic("run %s --backend ref --iters 1 --profile --profile-json %s", g, json), 0);
    assert_contains(out, "        compile: backend choice ");
    mc_arena arena = {0};
    char *text;
    mc_json *root = load_json(json, &arena, &text);
    const mc_json *totals = mc_json_get(root, "totals");
    const mc_json *phases = mc_json_get(totals, "compile_phases");
    assert_non_null(phases);
    assert_int_equal(phases->kind, MC_JSON_ARRAY);
    assert_true(phases->count >= 6);
    double jsum = 0;
    for (const mc_json *ph = phases->first; ph; ph = ph->next) {
        assert_int_equal(mc_json_get(ph, "name")->kind, MC_JSON_STRING);
        jsum += strtod(mc_json_get(ph, "ms")->text, NULL);
    }
    double compile_ms = strtod(mc_json_get(totals, "compile_ms")->text, NULL);
    assert_true(fabs(jsum - compile_ms) <= 0.05 * compile_ms + 0.5);
    assert_string_equal(phases->first->first->text, "backend choice");
    mc_arena_free(&arena);
    free(text);
#ifdef MINIC_HAVE_CPU_BACKEND
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/phases_cache", mc_test_tmpdir());
    char rm[4400]; /* empty, even where a directory of a reused pid was left behind */
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0)
        fail_msg("cannot empty %s", dir);
    const char *old = getenv("XDG_CACHE_HOME");
    char *saved = old ? strdup(old) : NULL;
    setenv("XDG_CACHE_HOME", dir, 1);
    int rc1 = minic("run %s --backend cpu --verbose", g);
    char *first = strdup(err);
    int rc2 = minic("run %s --backend cpu --verbose", g);
    if (saved) {
        setenv("XDG_CACHE_HOME", saved, 1);
        free(saved);
    } else {
        unsetenv("XDG_CACHE_HOME");
    }
    assert_int_equal(rc1, 0);
    assert_int_equal(rc2, 0);
    assert_contains(first, " LLVM IR ");
    assert_contains(first, " LLVM compile "); /* an empty cache: compiled */
    assert_contains(err, " kernel cache ");
    assert_null(strstr(err, " LLVM compile ")); /* the second time: from the cache */
    assert_contains(err, "2 kernels, 0 compiled");
    free(first);
#endif
}

/* On a machine that has never measured its peaks (an empty cache), --profile on the cpu
 * backend shows measured peaks, percentages and bounds with no other command first, and
 * caches them for the next run. */
static void test_profile_fresh_peaks(void **state)
{
    (void)state;
#ifdef MINIC_HAVE_CPU_BACKEND
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/fresh_peaks_cache", mc_test_tmpdir());
    const char *old = getenv("XDG_CACHE_HOME");
    char *saved = old ? strdup(old) : NULL;
    setenv("XDG_CACHE_HOME", dir, 1);
    const char *g = mc_test_src("examples/mlp.graph");
    int rc = minic("run %s --backend cpu --iters 2 --profile", g);
    if (saved) {
        setenv("XDG_CACHE_HOME", saved, 1);
        free(saved);
    } else {
        unsetenv("XDG_CACHE_HOME");
    }
    assert_int_equal(rc, 0);
    assert_contains(out, "peaks: measured (measured on first use and cached");
    for (const char *line = strstr(out, "\ngemm_"); line; line = strstr(line + 1, "\ngemm_")) {
        const char *end = strchr(line + 1, '\n');
        char row[1024];
        snprintf(row, sizeof row, "%.*s", end ? (int)(end - line - 1) : 1000, line + 1);
        if (!strstr(row, " memory ") && !strstr(row, " compute ") && !strstr(row, " latency "))
            fail_msg("a kernel without a bound: %s", row); /* every kernel has one */
    }
    char peaks_dir[4400];
    snprintf(peaks_dir, sizeof peaks_dir, "%s/minic/peaks", dir);
    assert_true(exists(peaks_dir));
    assert_contains(out, "memory by working set: "); /* the ceilings of kernels that fit caches */
    /* A cache that cannot be written (its directory is a file, which holds even as root): the
     * profile says the peaks were not cached, and `minic peaks` prints its numbers, then says
     * why they are not cached and exits 2. */
    char blocked[4400];
    snprintf(blocked, sizeof blocked, "%s/not_a_dir", mc_test_tmpdir());
    FILE *f = fopen(blocked, "w");
    assert_non_null(f);
    fclose(f);
    old = getenv("XDG_CACHE_HOME");
    saved = old ? strdup(old) : NULL;
    setenv("XDG_CACHE_HOME", blocked, 1);
    int rc_profile = minic("run %s --backend cpu --iters 2 --profile", g);
    char *profile_out = strdup(out);
    int rc_peaks = minic("peaks --backend cpu");
    if (saved) {
        setenv("XDG_CACHE_HOME", saved, 1);
        free(saved);
    } else {
        unsetenv("XDG_CACHE_HOME");
    }
    assert_int_equal(rc_profile, 0);
    assert_non_null(strstr(profile_out, "measured on first use, not cached: "));
    free(profile_out);
    assert_int_equal(rc_peaks, 2);
    assert_contains(out, "NOT cached in");
    assert_contains(out, "copy bandwidth");
    assert_contains(err, "measured, but not cached: ");
#else
    skip();
#endif
}

/* docs/FORMAT.md §3: every file written is named on stderr, unless --quiet. */
static void test_wrote_files(void **state)
{
    (void)state;
    const char *g = mc_test_src("examples/mlp.graph");
    const char *files[] = {tmp_path("w.json"), tmp_path("w_trace.json"), tmp_path("w.svg"),
                           tmp_path("w.safetensors")};
    assert_int_equal(minic("run %s --backend ref --iters 1 --profile-json %s --trace %s "
                           "--roofline %s --output %s", g, files[0], files[1], files[2], files[3]), 0);
    for (int i = 0; i < 4; i++) {
        char line[4400];
        snprintf(line, sizeof line, "minic: wrote %s\n", files[i]);
        assert_contains(err, line);
        assert_null(strstr(out, files[i])); /* stderr, not mixed into the results */
        assert_true(exists(files[i]));
        unlink(files[i]);
    }
    assert_int_equal(minic("run %s --backend ref --iters 1 --quiet --profile-json %s --trace %s "
                           "--roofline %s --output %s", g, files[0], files[1], files[2], files[3]), 0);
    assert_string_equal(err, "");
    for (int i = 0; i < 4; i++)
        assert_true(exists(files[i]));
}

/* The library's notes (auto's fallback) come out of the command, as notes, unless --quiet. */
static void test_notes(void **state)
{
    (void)state;
    const char *g = mc_test_src("examples/pointwise.graph");
    assert_int_equal(minic("run %s", g), 0);
    if (strstr(out, "backend cuda")) {
        assert_string_equal(err, ""); /* a GPU: nothing to say */
        return;
    }
    assert_starts_with(err, "minic: note: ");
    assert_contains(err, "using the ");
    assert_int_equal(minic("run %s --quiet", g), 0);
    assert_string_equal(err, "");
}

/* Every stage the pass manager names is accepted and listed by dump --help, and shows what
 * that stage made. */
static void test_dump_stages(void **state)
{
    (void)state;
    const char *g = mc_test_src("examples/mlp.graph");
    assert_int_equal(minic("dump --help"), 0);
    char *help = strdup(out);
    int n = 0;
    for (int i = 0; mc_dump_stages[i]; i++, n++) {
        char listed[32];
        snprintf(listed, sizeof listed, " %s,", mc_dump_stages[i]);
        assert_contains(help, listed);
        int rc = minic("dump %s --stage %s", g, mc_dump_stages[i]);
        if (rc != 0)
            fail_msg("--stage %s: exit %d\n%s", mc_dump_stages[i], rc, err);
    }
    free(help);
    /* the README's picture: fold → decompose → simplify → cse → dce → fuse → lower → plan */
    const char *picture[] = {"fold", "decompose", "simplify", "cse", "dce", "fuse", "lower", "plan"};
    for (int i = 0; i < 8; i++) {
        bool found = false;
        for (int k = 0; mc_dump_stages[k]; k++)
            found |= !strcmp(mc_dump_stages[k], picture[i]);
        if (!found)
            fail_msg("stage %s is not in mc_dump_stages", picture[i]);
    }
    assert_int_equal(minic("dump %s --stage fuse", g), 0);
    assert_contains(out, "t6 = matmul(x, t5)"); /* the graph after the passes */
    assert_contains(out, "# fusion: 2 groups");
    assert_contains(out, "group 0: gemm, space [32, 512], anchor a\n  members: t6 h a\n  stores: a");
    assert_int_equal(minic("dump %s --stage fuse --no-fuse", g), 0);
    assert_null(strstr(out, "# fusion: 2 groups"));
    assert_int_equal(minic("dump %s --stage lower", g), 0);
    assert_contains(out, "# after lower: 2 kernels");
    assert_contains(out, "kernel gemm_bias_gelu_0");
    assert_contains(out, "b6(a) temp f32[16384] live kernels 0..1");
    assert_null(strstr(out, " at 0,")); /* not placed yet */
    assert_int_equal(minic("dump %s --stage plan", g), 0);
    assert_contains(out, "b6(a) temp f32[16384] at 0, live kernels 0..1");
    assert_contains(out, "kernel gemm_bias_add_1");
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
    /* The fused stage is what the named backend runs: a padded maxpool is one gather kernel on
     * cuda (built or not: then the default choices), the padding's copies on ref. */
    const char *mp = tmp_path("dump_pool.graph");
    FILE *f = fopen(mp, "w");
    assert_non_null(f);
    fputs("input x : f32[2, 3, 9, 8]\ny = maxpool(x, kernel=[3, 3], stride=[2, 2], padding=[1, 1])\noutput y\n", f);
    fclose(f);
    assert_int_equal(minic("dump %s --stage fused --backend ref", mp), 0);
    assert_contains(out, "copy_maxpool");
#ifdef MINIC_HAVE_CUDA
    assert_int_equal(minic("dump %s --stage fused --backend cuda", mp), 0);
    assert_contains(out, "kernels: 1;");
    assert_null(strstr(out, "copy_maxpool"));
#endif
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
        cmocka_unit_test(test_argument_edges),
        cmocka_unit_test(test_stdout_write_error),
        cmocka_unit_test(test_did_you_mean),
        cmocka_unit_test(test_ops),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_malformed_graph),
        cmocka_unit_test(test_npy_output_with_two_outputs),
        cmocka_unit_test(test_weights),
        cmocka_unit_test(test_weights_other_dtype),
        cmocka_unit_test(test_npy_int64_input),
        cmocka_unit_test(test_inputs),
        cmocka_unit_test(test_cuda_without_gpu),
        cmocka_unit_test(test_too_large_for_memory),
        cmocka_unit_test(test_every_example_runs),
        cmocka_unit_test(test_output_round_trip),
        cmocka_unit_test(test_save_inputs),
        cmocka_unit_test(test_seed_determinism),
        cmocka_unit_test(test_example_program_matches_cli),
        cmocka_unit_test(test_iters_and_profile),
        cmocka_unit_test(test_profile_conv_category),
        cmocka_unit_test(test_compile_phases),
        cmocka_unit_test(test_profile_groups),
        cmocka_unit_test(test_profile_fresh_peaks),
        cmocka_unit_test(test_wrote_files),
        cmocka_unit_test(test_notes),
        cmocka_unit_test(test_dump_stages),
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
