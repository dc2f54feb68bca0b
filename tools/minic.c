/* The minic command: arguments, help and error reporting (docs/FORMAT.md §3).
 *
 *     minic run|bench|check|dump MODEL.graph [options]
 *     minic ops [OPERATOR..]
 *     minic peaks [--backend cpu|cuda]
 *     minic cache info|clear
 *
 * Every option is one row of `options[]`: its name, its argument, the subcommands it applies
 * to and what it does. The parser and every `--help` text are read off that table, so the help
 * can never list an option the parser does not accept, or accept one the help does not list.
 * Values are checked completely here (a number is a number with nothing after it, a backend is
 * one of four words), and any mistake is an error that names the option, with exit status 1.
 *
 * A mistyped command or option names the nearest valid ones (mc_suggest). `ops`, `peaks` and
 * `cache` take no graph and read their own few arguments (tools/ops_cmd.c, tools/peaks_cmd.c,
 * tools/cache_cmd.c).
 *
 * What each subcommand does is in tools/commands.c; this file only turns argv into cli_args.
 *
 * SIGINT, SIGTERM and SIGHUP: the handler removes the temporaries of the writes in progress
 * (an --output file being written, a cache entry being stored: mc_temp_files_remove), then
 * lets the signal end the process as it would have, so an interrupted run leaves no stray file.
 */
#include "tools/cli.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/ir.h"
#include "passes/passes.h"

enum { CMD_RUN = 1, CMD_BENCH = 2, CMD_CHECK = 4, CMD_DUMP = 8, CMD_OPS = 16, CMD_PEAKS = 32, CMD_CACHE = 64,
       CMD_IMPORT = 128 };

typedef enum {
    OPT_BACKEND, OPT_WEIGHTS, OPT_INPUT, OPT_SEED, OPT_OUTPUT, OPT_SAVE_INPUTS, OPT_NO_FUSE, OPT_NO_PLAN,
    OPT_CUDA_GRAPH, OPT_NO_CUDA_GRAPH, OPT_ITERS, OPT_THREADS, OPT_CPU_TARGET, OPT_TF32, OPT_PROFILE,
    OPT_PROFILE_JSON, OPT_TRACE, OPT_ROOFLINE, OPT_STAGE, OPT_QUIET, OPT_HELP, OPT_F64_AS_F32,
    OPT_OUT_GRAPH, OPT_WEIGHTS_OUT, OPT_DIM, OPT_VERBOSE, OPT_DEVICES,
} option_id;

typedef struct option {
    option_id id;
    const char *name;
    const char *arg;   /* the argument's placeholder, or NULL for a flag */
    int commands;      /* CMD_* mask */
    const char *help;
} option;

#define EXEC (CMD_RUN | CMD_BENCH)
static const option options[] = {
    {OPT_BACKEND, "--backend", "auto|cuda|cpu|ref", EXEC | CMD_DUMP,
     "where to run: auto (default) is cuda when a usable GPU is present, else cpu (else ref);\n"
     "ref is the plain C interpreter used as the correctness oracle"},
    {OPT_WEIGHTS, "--weights", "FILE.safetensors", EXEC,
     "values of the params, by name; dtype and shape must match the declarations; every\n"
     "param must be in the file; extra tensors are ignored"},
    {OPT_INPUT, "--input", "NAME=FILE", EXEC,
     "the value of input (or param) NAME from a .npy file, or from the tensor NAME of a\n"
     ".safetensors file (such as --save-inputs writes); dtype and shape must match its\n"
     "declaration (an i32 may come as <i8 when every value fits in i32); repeatable"},
    {OPT_SEED, "--seed", "N", EXEC,
     "seed for the inputs and params not given by a file (default 0): uniform in [-1, 1)\n"
     "(i32: 0..9, bool: random), the same values on every backend"},
    {OPT_OUTPUT, "--output", "FILE", CMD_RUN,
     "write the outputs: .safetensors holds every output under its name; .npy is allowed\n"
     "when the graph has one output (written to a temporary name, then renamed)"},
    {OPT_SAVE_INPUTS, "--save-inputs", "FILE.safetensors", EXEC,
     "write every input and param the run used (given or generated) under its name, once\n"
     "they are bound and before the run, so the run can be repeated from files:\n"
     "--weights FILE --input NAME=FILE for each input"},
    {OPT_NO_FUSE, "--no-fuse", NULL, CMD_RUN | CMD_DUMP,
     "run every operator as its own kernel (the baseline that `bench` compares with)"},
    {OPT_NO_PLAN, "--no-plan", NULL, EXEC | CMD_DUMP,
     "give every intermediate its own buffer instead of sharing memory by liveness"},
    {OPT_CUDA_GRAPH, "--cuda-graph", NULL, EXEC,
     "cuda backend: capture and replay the whole program as one CUDA graph, and fail if\n"
     "it cannot be captured (with neither flag: captured where eligible, else said why)"},
    {OPT_NO_CUDA_GRAPH, "--no-cuda-graph", NULL, EXEC,
     "cuda backend: launch kernel by kernel, no CUDA graph"},
    {OPT_ITERS, "--iters", "N", EXEC,
     "execute N times after a warm-up and report the median time per run (run: also the\n"
     "runs that --profile measures, default 10; bench: default 10)"},
    {OPT_THREADS, "--threads", "N", EXEC,
     "cpu backend: worker threads (default 0: one per core)"},
    {OPT_DEVICES, "--devices", "N", EXEC | CMD_DUMP,
     "tensor parallel over N ranks (docs/PARALLEL.md): linear layers split by columns then\n"
     "rows, an all-reduce after each row-parallel one, one program per rank, all run at once;\n"
     "cuda: rank r on GPU r (N at most the GPUs present); cpu, ref: N threads, any N. The\n"
     "outputs equal the run without it within docs/FORMAT.md §6; --profile shows rank 0;\n"
     "dump --stage shard: the sharding plan's notes, then rank 0's graph"},
    {OPT_CPU_TARGET, "--cpu-target", "NAME", EXEC | CMD_DUMP,
     "cpu backend: generate code for CPU NAME as LLVM names it (x86-64-v3, x86-64-v4,\n"
     "haswell, skylake-avx512, znver3, ...) instead of for this machine (host, the default);\n"
     "code for a CPU whose features this machine lacks can be dumped but not run"},
    {OPT_TF32, "--tf32", NULL, EXEC | CMD_DUMP,
     "cuda backend: allow TF32 tensor cores for f32 matmuls (less precise; off by default)"},
    {OPT_PROFILE, "--profile", NULL, CMD_RUN,
     "print the per-kernel table: category, operators and lines, launches, time, FLOPs and\n"
     "bytes, rates against the device's peaks, intensity, bound; then the totals"},
    {OPT_PROFILE_JSON, "--profile-json", "FILE", CMD_RUN,
     "write the same profile as one JSON object to FILE"},
    {OPT_TRACE, "--trace", "FILE.json", CMD_RUN,
     "write a Chrome/Perfetto trace (each run and each kernel at its real time)"},
    {OPT_ROOFLINE, "--roofline", "FILE.svg", CMD_RUN,
     "draw every timed kernel on the device's roofline (FLOP/s against FLOP/byte) as SVG"},
    {OPT_STAGE, "--stage", "STAGE", CMD_DUMP,
     "what to print: ir (the parsed graph, default); after a graph pass (decompose, simplify,\n"
     "cse, dce) the graph; after fuse the graph and its fusion groups; after lower or plan\n"
     "the kernel IR (plan: temporaries placed in one arena); fused: as plan, with the planned\n"
     "peak memory; code: the generated source (cpu: LLVM IR, cuda: CUDA C); shard (with\n"
     "--devices N): the sharding plan's notes as comments, then rank 0's graph"},
    {OPT_QUIET, "--quiet", NULL, EXEC | CMD_DUMP | CMD_IMPORT,
     "no notes on stderr: which backend `auto` fell back to, compile progress, a program\n"
     "run without a CUDA graph, the files written (`minic: wrote FILE`)"},
    {OPT_VERBOSE, "--verbose", NULL, CMD_RUN,
     "say on stderr where the time to the first result went: reading the graph, each phase\n"
     "of the compile (passes, code generation, kernel cache, cuBLASLt setup, ...), binding\n"
     "the inputs and the first run"},
    {OPT_F64_AS_F32, "--f64-as-f32", NULL, EXEC | CMD_CHECK | CMD_DUMP | CMD_IMPORT,
     "ONNX models: read DOUBLE tensors as f32 (without it a DOUBLE tensor is an error)"},
    {OPT_DIM, "--dim", "NAME=SIZE", EXEC | CMD_CHECK | CMD_DUMP | CMD_IMPORT,
     "bind the symbolic dimension NAME (docs/FORMAT.md §1: `input x : f32[B, T]`) to SIZE;\n"
     "repeatable. run: for generated inputs (inputs given as files bind the sizes they have);\n"
     "check, dump, bench, import: the graph specialised to these sizes (every one needs a\n"
     "--dim). ONNX models: an input's dim_param is such a dimension; where the importer cannot\n"
     "compute a shape over it, the --dim sizes are fixed when the model is read"},
    {OPT_OUT_GRAPH, "-o", "OUT.graph", CMD_IMPORT,
     "import: the .graph file to write (the model as minic's text format)"},
    {OPT_WEIGHTS_OUT, "--weights-out", "W.safetensors", CMD_IMPORT,
     "import: write the params' values (the model's initializers) to a .safetensors file"},
    {OPT_HELP, "--help", NULL, EXEC | CMD_CHECK | CMD_DUMP | CMD_IMPORT, "show this help"},
};
#define NOPTIONS ((int)(sizeof options / sizeof options[0]))

typedef struct command {
    const char *name;
    int mask;
    const char *usage;
    const char *summary;
} command;

static const command commands[] = {
    {"run", CMD_RUN, "minic run MODEL.graph|MODEL.onnx [options]",
     "compile and execute; print each output's name, dtype, shape, first values and checksum"},
    {"bench", CMD_BENCH, "minic bench MODEL.graph [options]",
     "fused vs unfused: time each, compare both with a float64 evaluation and with each\n"
     "other; exit status 1 when they disagree beyond the tolerance of docs/FORMAT.md §6"},
    {"check", CMD_CHECK, "minic check MODEL.graph",
     "parse, verify and infer types; print the typed graph"},
    {"dump", CMD_DUMP, "minic dump MODEL.graph --stage ir|PASS|fused|code [options]",
     "print the graph before or after the passes, the fused kernels, or the generated source"},
    {"import", CMD_IMPORT, "minic import MODEL.onnx -o OUT.graph [--weights-out W.safetensors]",
     "write an ONNX model as a .graph file and its weights as .safetensors (docs/FORMAT.md §7)"},
    {"ops", CMD_OPS, "minic ops [OPERATOR..]",
     "every operator: its signature, the dtypes it accepts, its result and its kind"},
    {"peaks", CMD_PEAKS, "minic peaks [--backend cpu|cuda]",
     "measure this machine's ceilings (bandwidth, FLOP/s) and cache them for --profile"},
    {"cache", CMD_CACHE, "minic cache info|clear",
     "the compile cache: where it is, its entries and size, its cap; or delete every entry"},
};
#define NCOMMANDS ((int)(sizeof commands / sizeof commands[0]))

/* ---- errors -------------------------------------------------------------------------------- */

int cli_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("minic: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

int cli_library_error(mc_status status)
{
    const char *msg = mc_error_message();
    size_t first = strcspn(msg, "\n");
    /* A message about a place in a graph file already reads `FILE:LINE:COL: error: ...`. */
    const char *tag = strstr(msg, ": error: ");
    if (tag && (size_t)(tag - msg) < first)
        fprintf(stderr, "%s\n", msg);
    else
        fprintf(stderr, "minic: error: %s\n", msg[0] ? msg : "unknown failure");
    return status == MC_ERR_INPUT ? CLI_USER : CLI_SYSTEM;
}

/* The library's notes (backend fallback, compile progress, ...): it never prints, the command
 * does, unless --quiet. */
static void print_note(void *ctx, const char *note)
{
    (void)ctx;
    fprintf(stderr, "minic: note: %s\n", note);
}

/* ---- help ---------------------------------------------------------------------------------- */

static void print_main_help(FILE *out)
{
    fputs("usage: minic COMMAND [MODEL.graph|MODEL.onnx] [options]\n\n"
          "minic compiles a tensor graph (a .graph file or an ONNX model) into fused kernels and\n"
          "runs them on the GPU (cuda), the CPU (cpu) or the reference interpreter (ref).\n\ncommands:\n",
          out);
    for (int c = 0; c < NCOMMANDS; c++) {
        fprintf(out, "  %-6s ", commands[c].name);
        for (const char *s = commands[c].summary; *s; s++) {
            fputc(*s, out);
            if (*s == '\n')
                fputs("         ", out);
        }
        fputc('\n', out);
    }
    fputs("\n`minic COMMAND --help` lists the options of a command.\n"
          "exit status: 0 success; 1 the input is wrong (graph, file, option, shape, dtype,\n"
          "weights); 2 the system failed (no GPU for --backend cuda, out of memory, a compiler).\n",
          out);
}

static void print_command_help(const command *c, FILE *out)
{
    fprintf(out, "usage: %s\n\n", c->usage);
    fprintf(out, "%s\n\noptions:\n", c->summary);
    for (int i = 0; i < NOPTIONS; i++) {
        const option *o = &options[i];
        if (!(o->commands & c->mask))
            continue;
        char head[64];
        snprintf(head, sizeof head, "%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        fprintf(out, "  %s\n      ", head);
        for (const char *s = o->help; *s; s++) {
            fputc(*s, out);
            if (*s == '\n')
                fputs("      ", out);
        }
        if (o->id == OPT_STAGE) { /* the list the pass manager accepts, not a copy of it */
            fputs("\n      stages:", out);
            for (int k = 0; mc_dump_stages[k]; k++)
                fprintf(out, " %s,", mc_dump_stages[k]);
            fputs(" fused, code", out);
        }
        fputc('\n', out);
    }
}

/* ---- values -------------------------------------------------------------------------------- */

static bool parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s < '0' || *s > '9')
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

static bool parse_int(const char *s, int lo, int hi, int *out)
{
    uint64_t v;
    if (!parse_u64(s, &v) || v < (uint64_t)lo || v > (uint64_t)hi)
        return false;
    *out = (int)v;
    return true;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n > m && strcmp(s + n - m, suffix) == 0;
}

static int set_value(cli_args *a, const option *o, const char *v)
{
    switch (o->id) {
    case OPT_BACKEND:
        if (!strcmp(v, "auto")) a->opt.backend = MC_BACKEND_AUTO;
        else if (!strcmp(v, "cuda")) a->opt.backend = MC_BACKEND_CUDA;
        else if (!strcmp(v, "cpu")) a->opt.backend = MC_BACKEND_CPU;
        else if (!strcmp(v, "ref")) a->opt.backend = MC_BACKEND_REF;
        else
            return cli_error(CLI_USER, "--backend: unknown backend '%s' (expected auto, cuda, cpu or ref)", v);
        return CLI_OK;
    case OPT_WEIGHTS:
        if (!*v)
            return cli_error(CLI_USER, "--weights: empty file name");
        a->weights = v;
        return CLI_OK;
    case OPT_INPUT: {
        const char *eq = strchr(v, '=');
        if (!eq || eq == v || !eq[1])
            return cli_error(CLI_USER, "--input: expected NAME=FILE.npy, got '%s'", v);
        for (int i = 0; i < a->ninputs; i++) /* which of two values would be meant is a guess */
            if (strlen(a->inputs[i].name) == (size_t)(eq - v) && !strncmp(a->inputs[i].name, v, (size_t)(eq - v)))
                return cli_error(CLI_USER, "--input %s: '%s' is already given (--input %s=%s); give each input once",
                                 v, a->inputs[i].name, a->inputs[i].name, a->inputs[i].path);
        cli_input *grown = realloc(a->inputs, (size_t)(a->ninputs + 1) * sizeof *grown);
        char *name = strndup(v, (size_t)(eq - v));
        if (!grown || !name) {
            free(name);
            if (grown)
                a->inputs = grown;
            return cli_error(CLI_SYSTEM, "out of memory");
        }
        a->inputs = grown;
        a->inputs[a->ninputs++] = (cli_input){name, eq + 1};
        return CLI_OK;
    }
    case OPT_SEED:
        if (!parse_u64(v, &a->seed))
            return cli_error(CLI_USER, "--seed: expected a non-negative integer, got '%s'", v);
        return CLI_OK;
    case OPT_SAVE_INPUTS:
        if (!ends_with(v, ".safetensors"))
            return cli_error(CLI_USER, "--save-inputs %s: expected a .safetensors file", v);
        a->save_inputs = v;
        return CLI_OK;
    case OPT_OUTPUT:
        if (!ends_with(v, ".safetensors") && !ends_with(v, ".npy"))
            return cli_error(CLI_USER, "--output %s: unknown format (expected a .safetensors or .npy file)", v);
        a->output = v;
        return CLI_OK;
    case OPT_ITERS:
        if (!parse_int(v, 1, 1000000, &a->iters))
            return cli_error(CLI_USER, "--iters: expected an integer from 1 to 1000000, got '%s'", v);
        return CLI_OK;
    case OPT_THREADS:
        if (!parse_int(v, 0, MC_MAX_THREADS, &a->opt.threads))
            return cli_error(CLI_USER, "--threads: expected an integer from 0 to %d, got '%s'", MC_MAX_THREADS, v);
        return CLI_OK;
    case OPT_DEVICES:
        if (!parse_int(v, 1, MC_MAX_DEVICES, &a->opt.devices))
            return cli_error(CLI_USER, "--devices: expected a number of ranks from 1 to %d, got '%s'",
                             MC_MAX_DEVICES, v);
        return CLI_OK;
    case OPT_CPU_TARGET:
        if (!*v)
            return cli_error(CLI_USER, "--cpu-target: empty CPU name (host, x86-64-v3, x86-64-v4, ...)");
        a->opt.cpu_target = v;
        return CLI_OK;
    case OPT_PROFILE_JSON:
        if (!*v)
            return cli_error(CLI_USER, "--profile-json: empty file name");
        a->profile_json = v;
        return CLI_OK;
    case OPT_TRACE:
        if (!*v)
            return cli_error(CLI_USER, "--trace: empty file name");
        a->trace = v;
        return CLI_OK;
    case OPT_ROOFLINE:
        if (!*v)
            return cli_error(CLI_USER, "--roofline: empty file name");
        a->roofline = v;
        return CLI_OK;
    case OPT_STAGE:
        if (!*v)
            return cli_error(CLI_USER, "--stage: empty stage name");
        a->stage = v;
        return CLI_OK;
    case OPT_NO_FUSE: a->opt.fuse = false; return CLI_OK;
    case OPT_NO_PLAN: a->opt.plan_memory = false; return CLI_OK;
    case OPT_CUDA_GRAPH: a->opt.cuda_graph = 1; return CLI_OK;
    case OPT_NO_CUDA_GRAPH: a->opt.cuda_graph = 0; return CLI_OK;
    case OPT_TF32: a->opt.tf32 = true; return CLI_OK;
    case OPT_PROFILE: a->profile = true; return CLI_OK;
    case OPT_VERBOSE: a->verbose = true; return CLI_OK;
    case OPT_QUIET: a->opt.quiet = true; return CLI_OK;
    case OPT_F64_AS_F32: a->f64_as_f32 = true; return CLI_OK;
    case OPT_DIM: {
        const char *eq = strchr(v, '=');
        uint64_t size;
        if (!eq || eq == v || !parse_u64(eq + 1, &size) || size < 1 || size > ((uint64_t)1 << 40))
            return cli_error(CLI_USER, "--dim: expected NAME=SIZE with a positive SIZE, got '%s'", v);
        for (int i = 0; i < a->ndims; i++) /* the same size twice is harmless; two are a contradiction */
            if (strlen(a->dims[i].name) == (size_t)(eq - v) && !strncmp(a->dims[i].name, v, (size_t)(eq - v))) {
                if ((uint64_t)a->dims[i].size == size)
                    return CLI_OK;
                return cli_error(CLI_USER, "--dim %s: '%s' is already bound to %lld by --dim %s=%lld", v,
                                 a->dims[i].name, (long long)a->dims[i].size, a->dims[i].name,
                                 (long long)a->dims[i].size);
            }
        mc_onnx_dim *grown = realloc(a->dims, (size_t)(a->ndims + 1) * sizeof *grown);
        char *name = strndup(v, (size_t)(eq - v));
        if (!grown || !name) {
            free(name);
            if (grown)
                a->dims = grown;
            return cli_error(CLI_SYSTEM, "out of memory");
        }
        a->dims = grown;
        a->dims[a->ndims++] = (mc_onnx_dim){name, (int64_t)size};
        return CLI_OK;
    }
    case OPT_OUT_GRAPH:
        if (!*v)
            return cli_error(CLI_USER, "-o: empty file name");
        a->out_graph = v;
        return CLI_OK;
    case OPT_WEIGHTS_OUT:
        if (!ends_with(v, ".safetensors"))
            return cli_error(CLI_USER, "--weights-out %s: expected a .safetensors file", v);
        a->weights_out = v;
        return CLI_OK;
    case OPT_HELP: return CLI_OK;
    }
    return CLI_OK;
}

/* "unknown option '--iter' for 'minic run' (did you mean '--iters'?)": the nearest of the
 * options that apply to c. */
static int unknown_option(const command *c, const char *arg, size_t len)
{
    const char *names[NOPTIONS];
    int n = 0;
    for (int k = 0; k < NOPTIONS; k++)
        if (options[k].commands & c->mask)
            names[n++] = options[k].name;
    char near[256];
    if (mc_suggest(arg, len, names, n, near, sizeof near))
        return cli_error(CLI_USER, "unknown option '%.*s' for 'minic %s' (did you mean %s? see minic %s --help)",
                         (int)len, arg, c->name, near, c->name);
    if (access(arg, F_OK) == 0) /* a file whose name starts with '-' */
        return cli_error(CLI_USER, "unknown option '%s' for 'minic %s' (to name the file %s, put it after --: "
                         "minic %s -- %s)", arg, c->name, arg, c->name, arg);
    return cli_error(CLI_USER, "unknown option '%.*s' for 'minic %s' (see minic %s --help)",
                     (int)len, arg, c->name, c->name);
}

static bool same_file(const char *x, const char *y)
{
    struct stat sx, sy;
    bool x_exists = stat(x, &sx) == 0;
    if (x_exists && !S_ISREG(sx.st_mode)) /* /dev/null twice: written in place, nothing replaced */
        return false;
    if (!strcmp(x, y))
        return true;
    return x_exists && stat(y, &sy) == 0 && sx.st_dev == sy.st_dev && sx.st_ino == sy.st_ino;
}

/* Two files the command writes (or the model it reads and a file it writes) under one name:
 * one would silently replace the other, so it is refused before anything runs. */
static int distinct_files(const cli_args *a)
{
    const struct {
        const char *option, *path;
    } files[] = {{"the model", a->graph_path}, {"--output", a->output}, {"--save-inputs", a->save_inputs},
                 {"--profile-json", a->profile_json}, {"--trace", a->trace}, {"--roofline", a->roofline},
                 {"-o", a->out_graph}, {"--weights-out", a->weights_out}};
    int n = (int)(sizeof files / sizeof files[0]);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; files[i].path && j < n; j++)
            if (files[j].path && same_file(files[i].path, files[j].path))
                return cli_error(CLI_USER, "%s and %s name the same file '%s' (one would overwrite the other)",
                                 files[i].option, files[j].option, files[j].path);
    return -1;
}

/* Parse argv[2..] for command c. Returns -1 to go on, else an exit status (help: 0). */
static int parse_args(const command *c, int argc, char **argv, cli_args *a)
{
    bool options_done = false;
    for (int i = 2; i < argc; i++) {
        const char *arg = argv[i];
        if (!options_done && (!strcmp(arg, "-h") || !strcmp(arg, "--help"))) {
            print_command_help(c, stdout);
            return CLI_OK;
        }
        if (arg[0] != '-' || !arg[1] || options_done) {
            if (a->graph_path)
                return cli_error(CLI_USER, "%s: unexpected argument '%s' (one graph file only)", c->name, arg);
            a->graph_path = arg;
            continue;
        }
        if (!strcmp(arg, "--")) { /* the end of the options, as getopt: a file may start with '-' */
            options_done = true;
            continue;
        }
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        const option *o = NULL;
        for (int k = 0; k < NOPTIONS; k++)
            if (strlen(options[k].name) == len && !strncmp(options[k].name, arg, len))
                o = &options[k];
        if (!o)
            return unknown_option(c, arg, len);
        if (!(o->commands & c->mask))
            return cli_error(CLI_USER, "option '%s' does not apply to 'minic %s' (see minic %s --help)",
                             o->name, c->name, c->name);
        const char *value = NULL;
        if (o->arg) {
            if (eq)
                value = eq + 1;
            else if (i + 1 < argc)
                value = argv[++i];
            else
                return cli_error(CLI_USER, "option '%s' needs a value (%s)", o->name, o->arg);
        } else if (eq) {
            return cli_error(CLI_USER, "option '%s' takes no value", o->name);
        }
        int st = set_value(a, o, value);
        if (st != CLI_OK)
            return st;
    }
    if (!a->graph_path)
        return cli_error(CLI_USER, "%s: no graph file given (usage: %s)", c->name, c->usage);
    return distinct_files(a);
}

/* "unknown command 'rnu' (did you mean 'run'? commands: run, bench, ...; see minic --help)" */
static int unknown_command(const char *name)
{
    const char *names[NCOMMANDS];
    char list[256] = "";
    for (int i = 0; i < NCOMMANDS; i++) {
        names[i] = commands[i].name;
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", commands[i].name);
    }
    char near[256];
    if (mc_suggest(name, strlen(name), names, NCOMMANDS, near, sizeof near))
        return cli_error(CLI_USER, "unknown command '%s' (did you mean %s? commands: %s; see minic --help)",
                         name, near, list);
    return cli_error(CLI_USER, "unknown command '%s' (commands: %s; see minic --help)", name, list);
}

/* "unknown option '--versio' (did you mean '--version'? ...)" */
static int unknown_top_option(const char *arg)
{
    static const char *const names[] = {"--help", "--version"};
    size_t len = strcspn(arg, "=");
    char near[256];
    if (mc_suggest(arg, len, names, 2, near, sizeof near))
        return cli_error(CLI_USER, "unknown option '%.*s' (did you mean %s? usage: minic COMMAND [MODEL.graph] "
                         "[options]; see minic --help)", (int)len, arg, near);
    return cli_error(CLI_USER, "unknown option '%.*s' (before a command minic takes --help or --version; "
                     "usage: minic COMMAND [MODEL.graph] [options]; see minic --help)", (int)len, arg);
}

static void on_signal(int sig)
{
    mc_temp_files_remove(); /* async-signal-safe */
    /* SA_RESETHAND restored the default action; the signal, blocked while this runs, is
     * delivered again on return and ends the process with the usual status. */
    raise(sig);
}

static void install_signal_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        /* a signal ignored by whoever started us (nohup, a shell's background job) stays so */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        sigaction(sigs[i], &sa, NULL);
    }
}

static int run_command(int argc, char **argv);

/* What the command printed must have reached stdout: a full disk or a closed descriptor
 * (`minic run m.graph > /dev/full`) is the system's failure, not a silent success with the
 * summary lost (coreutils' rule). */
int main(int argc, char **argv)
{
    int status = run_command(argc, argv);
    errno = 0;
    if ((fflush(stdout) != 0 || ferror(stdout)) && status == CLI_OK) { /* else said already */
        int err = errno;
        fprintf(stderr, "minic: error: writing standard output: %s\n", err ? strerror(err) : "I/O error");
        status = CLI_SYSTEM;
    }
    return status;
}

static int run_command(int argc, char **argv)
{
    install_signal_handlers();
    if (argc < 2) {
        print_main_help(stderr);
        return CLI_USER;
    }
    const char *name = argv[1];
    if (!strcmp(name, "help") && argc == 3) { /* `minic help run` is `minic run --help` */
        name = argv[2];
        argv[2] = "--help";
    }
    if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
        print_main_help(stdout);
        return CLI_OK;
    }
    if (!strcmp(name, "--version")) {
        puts("minic " MINIC_VERSION_STRING); /* CMakeLists.txt's project version */
        return CLI_OK;
    }
    const command *c = NULL;
    for (int i = 0; i < NCOMMANDS; i++)
        if (!strcmp(commands[i].name, name))
            c = &commands[i];
    if (!c && name[0] == '-') /* before the command, only --help and --version */
        return unknown_top_option(name);
    if (!c)
        return unknown_command(name);
    if (c->mask == CMD_OPS) /* tools/ops_cmd.c */
        return cli_ops(argc - 2, argv + 2);
    if (c->mask == CMD_PEAKS) /* tools/peaks_cmd.c (measured ceilings for --profile) */
        return cli_peaks(argc - 2, argv + 2);
    if (c->mask == CMD_CACHE) /* tools/cache_cmd.c */
        return cli_cache(argc - 2, argv + 2);

    cli_args a = {.command = c->name, .opt = mc_options_default(), .stage = "ir"};
    int status = parse_args(c, argc, argv, &a);
    if (!a.opt.quiet)
        a.opt.note = print_note;
    if (status < 0) {
        switch (c->mask) {
        case CMD_RUN: status = cli_run(&a); break;
        case CMD_BENCH: status = cli_bench(&a); break;
        case CMD_CHECK: status = cli_check(&a); break;
        case CMD_IMPORT: status = cli_import(&a); break;
        default: status = cli_dump(&a); break; /* CMD_DUMP: ops and peaks returned above */
        }
    }
    for (int i = 0; i < a.ninputs; i++)
        free((char *)a.inputs[i].name);
    free(a.inputs);
    for (int i = 0; i < a.ndims; i++)
        free((char *)a.dims[i].name);
    free(a.dims);
    return status;
}
