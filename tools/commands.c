/* What each minic subcommand does: run, bench, check, dump (docs/FORMAT.md §3).
 *
 * Each command is a straight line: parse the graph, compile, bind, run, report. Errors from the
 * library are printed as the library words them (cli_library_error) and mapped to the exit
 * status; nothing is written to a file the user named until everything before it succeeded,
 * and the library writes files through a temporary name, so a failure never leaves half a file.
 *
 * Every file the command writes is named on stderr (`minic: wrote FILE`, docs/FORMAT.md §3) unless
 * --quiet, as are the library's notes (tools/minic.c hands it a callback that prints them).
 *
 * `bench` and `run --profile` use only what every backend has (run, and the optional time and
 * profile slots); the profile's own logic lives in runtime/profile.c so that the profiler work
 * extends one place.
 */
#include "tools/cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend/onnx.h"
#include "passes/passes.h"
#include "runtime/profile.h"
#include "runtime/runtime.h"

/* ---- shared steps -------------------------------------------------------------------------- */

/* The ONNX model the graph came from, when it did (MODEL.onnx): it owns the graph and holds
 * the params' values and the names' way back. One model per process. */
static mc_onnx *onnx_model;

static bool ends_with(const char *s, const char *suffix);

/* An ONNX file: named .onnx, or a protobuf whose first field is ModelProto's ir_version
 * (field 1, varint: byte 0x08) where a .graph file would start with text. */
static bool is_onnx(const char *path)
{
    if (ends_with(path, ".onnx"))
        return true;
    /* only a regular file is looked into (a FIFO must not block here: the parser refuses it) */
    int fd;
    struct stat info;
    if (mc_file_open_regular(path, &fd, &info) != MC_OK)
        return false;
    unsigned char first = 0;
    bool onnx = read(fd, &first, 1) == 1 && first == 0x08;
    close(fd);
    return onnx;
}

static void print_unsupported(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "minic: unsupported: %s\n", line);
}

/* The unsupported-node lines of a first import, held back until it is known whether they are
 * the answer (a second import with fixed sizes may follow). */
typedef struct held_lines {
    char *text;
    size_t len;
} held_lines;

static void hold_unsupported(void *ctx, const char *line)
{
    held_lines *h = ctx;
    size_t n = strlen(line);
    char *t = realloc(h->text, h->len + n + 2);
    if (!t)
        return;
    memcpy(t + h->len, line, n);
    t[h->len + n] = '\n';
    t[h->len + n + 1] = '\0';
    h->text = t;
    h->len += n + 1;
}

/* An ONNX model: its dim_params become symbolic dimensions, bound when it runs (from --input
 * files or --dim, as a .graph file's). Where the importer cannot compute a shape over a symbolic
 * dimension and --dim gives sizes, the model is imported again with those sizes fixed. */
static bool dims_fixed_at_load; /* load_onnx imported the model with the --dim sizes fixed */

static int load_onnx(const cli_args *a, mc_graph **g)
{
    unsigned flags = a->f64_as_f32 ? MC_ONNX_F64_AS_F32 : 0;
    held_lines held = {0};
    mc_status st = mc_onnx_load(a->graph_path, flags, hold_unsupported, &held, &onnx_model);
    if (st != MC_OK && a->ndims > 0) {
        free(held.text);
        st = mc_onnx_load_with_dims(a->graph_path, flags, a->dims, a->ndims, print_unsupported, NULL, &onnx_model);
        dims_fixed_at_load = st == MC_OK;
        if (st == MC_OK && !a->opt.quiet)
            fprintf(stderr, "minic: %s: imported with the --dim sizes fixed (a shape computation over its symbolic "
                            "dimensions is not supported)\n", a->graph_path);
    } else {
        for (char *line = held.text, *end; line && *line; line = end + 1) {
            end = strchr(line, '\n');
            *end = '\0';
            print_unsupported(NULL, line);
        }
        free(held.text);
    }
    if (st != MC_OK)
        return cli_library_error(st);
    *g = (mc_graph *)mc_onnx_graph(onnx_model);
    return CLI_OK;
}

static void free_graph(mc_graph *g);

/* --dim for a graph without symbolic dimensions names nothing: an error for every command (run
 * ignored it), as a name the graph does not have is. */
static int check_dims_apply(const cli_args *a, mc_graph *g)
{
    if (!a->ndims || dims_fixed_at_load || mc_graph_num_syms(g) > 0)
        return CLI_OK;
    free_graph(g);
    return cli_error(CLI_USER, "--dim %s=%lld: %s has no symbolic dimension '%s' (it has none)", a->dims[0].name,
                     (long long)a->dims[0].size, a->graph_path, a->dims[0].name);
}

static int load_graph(const cli_args *a, mc_graph **g)
{
    int rc;
    if (is_onnx(a->graph_path))
        rc = load_onnx(a, g);
    else {
        mc_status st = mc_graph_parse_file(a->graph_path, g);
        rc = st == MC_OK ? CLI_OK : cli_library_error(st);
    }
    if (rc == CLI_OK && (rc = check_dims_apply(a, *g)) != CLI_OK)
        *g = NULL;
    return rc;
}


/* check, dump and bench of a graph with symbolic dimensions (a .graph file's, an ONNX model's
 * dim_params): with --dim for each, the graph specialised to those sizes (docs/FORMAT.md §1);
 * `need`: without them it is an error. An ONNX model imported with the --dim sizes fixed has
 * none left. */
static int load_bound_graph(const cli_args *a, mc_graph **g, bool need)
{
    int rc = load_graph(a, g);
    if (rc != CLI_OK || (!a->ndims && !need) || (onnx_model && !mc_graph_num_syms(*g)))
        return rc;
    int nsyms = mc_graph_num_syms(*g);
    int64_t values[MC_MAX_SYMS] = {0};
    for (int i = 0; i < a->ndims && rc == CLI_OK; i++) {
        int k = mc_dim_find_sym(*g, a->dims[i].name, strlen(a->dims[i].name));
        if (k < 0)
            rc = cli_error(CLI_USER, "--dim %s=%lld: %s has no symbolic dimension '%s'", a->dims[i].name,
                           (long long)a->dims[i].size, a->graph_path, a->dims[i].name);
        else if (mc_dim_sym_max(*g, k) && a->dims[i].size > mc_dim_sym_max(*g, k))
            rc = cli_error(CLI_USER, "--dim %s=%lld: above the maximum %s<=%lld that %s declares", a->dims[i].name,
                           (long long)a->dims[i].size, a->dims[i].name, (long long)mc_dim_sym_max(*g, k), a->graph_path);
        else
            values[k] = a->dims[i].size;
    }
    for (int k = 0; k < nsyms && rc == CLI_OK; k++)
        if (!values[k])
            rc = cli_error(CLI_USER, "%s: dimension '%s' is unbound: give its size with --dim %s=SIZE", a->graph_path,
                           mc_dim_sym_name(*g, k), mc_dim_sym_name(*g, k));
    mc_graph *s = NULL;
    if (rc == CLI_OK && nsyms > 0) {
        mc_status st = mc_graph_specialize(*g, values, &s);
        if (st != MC_OK)
            rc = cli_library_error(st);
    }
    if (s) {
        if (!onnx_model) /* an ONNX model's graph goes with the model (free_graph) */
            mc_graph_free(*g);
        *g = s;
    }
    if (rc != CLI_OK) {
        free_graph(*g);
        *g = NULL;
    }
    return rc;
}

/* g, and the ONNX model it came from (whose own graph g is, or was specialised from) */
static void free_graph(mc_graph *g)
{
    if (onnx_model) {
        if (g != mc_onnx_graph(onnx_model))
            mc_graph_free(g);
        mc_onnx_free(onnx_model);
        onnx_model = NULL;
        return;
    }
    mc_graph_free(g);
}

/* --input NAME: a minic name, or an ONNX model's own name for it */
static const char *input_name(const char *name)
{
    const char *mapped = onnx_model ? mc_onnx_minic_name(onnx_model, name) : NULL;
    return mapped ? mapped : name;
}

/* --weights for an ONNX model: the tensors of the file that are params override the model's
 * values (by ONNX name, else by minic name, as `minic import --weights-out` writes them); the
 * others are ignored. */
static mc_status override_weights(mc_program *p, const char *path)
{
    mc_safetensors *st;
    mc_status s = mc_safetensors_open(path, &st);
    for (int k = 0; s == MC_OK && k < mc_safetensors_count(st); k++) {
        const char *name = mc_safetensors_name(st, k);
        const char *mapped = mc_onnx_minic_name(onnx_model, name);
        if (!mapped)
            mapped = name; /* not an ONNX name: perhaps minic's (w_0 for 'w/0') */
        const mc_onnx_tensor *param = NULL;
        for (int i = 0; mapped && i < onnx_model->nparams; i++)
            if (!strcmp(onnx_model->params[i].name, mapped))
                param = &onnx_model->params[i];
        if (!param)
            continue; /* not a param: ignored, as --weights ignores extra tensors */
        if (!strcmp(mapped, name)) {
            s = mc_program_load_file(p, name, path);
            continue;
        }
        /* under its ONNX name: the same checks as by name */
        mc_array arr;
        s = mc_safetensors_get(st, name, &arr);
        bool same = s == MC_OK && arr.dtype == param->dtype && arr.rank == param->rank;
        for (int d = 0; same && d < arr.rank; d++)
            same = arr.shape[d] == param->shape[d];
        if (s == MC_OK && !same)
            s = mc_fail(MC_ERR_INPUT, "%s: tensor '%s' does not match param %s (%s, rank %d)", path,
                        name, mapped, mc_dtype_name(param->dtype), param->rank);
        if (s == MC_OK)
            s = mc_program_set(p, mapped, arr.data, arr.bytes);
    }
    if (st)
        mc_safetensors_close(st);
    return s;
}

static const char *shape_string(mc_dtype dtype, const int64_t *shape, int rank, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s[", mc_dtype_name(dtype));
    for (int d = 0; d < rank && n > 0 && (size_t)n < size; d++)
        n += snprintf(buf + n, size - (size_t)n, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, "]");
    return buf;
}

static bool ends_with(const char *s, const char *suffix)
{
    if (!s)
        return false;
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* --dim (a .graph file's symbolic dimensions), --weights, then every --input, then the
 * generator for the rest; then --save-inputs, before anything runs, so that a run that fails
 * can be repeated from the file too. */
static int bind_inputs(const cli_args *a, mc_program *p)
{
    mc_status st = MC_OK;
    for (int i = 0; i < a->ndims && p->sym && st == MC_OK; i++) /* else specialised already */
        st = mc_program_set_dim(p, a->dims[i].name, a->dims[i].size);
    if (st == MC_OK && onnx_model) {
        st = mc_onnx_bind(onnx_model, p);
        if (st == MC_OK && a->weights)
            st = override_weights(p, a->weights);
    } else if (st == MC_OK && a->weights)
        st = mc_program_load_weights(p, a->weights);
    for (int i = 0; i < a->ninputs && st == MC_OK; i++)
        st = mc_program_load_file(p, input_name(a->inputs[i].name), a->inputs[i].path);
    if (st == MC_OK)
        st = mc_program_fill_random(p, a->seed);
    if (st == MC_OK && a->save_inputs) {
        st = mc_program_save_inputs(p, a->save_inputs);
        if (st == MC_OK && !a->opt.quiet)
            fprintf(stderr, "minic: wrote %s\n", a->save_inputs);
    }
    return st == MC_OK ? CLI_OK : cli_library_error(st);
}

/* The library does not print: why the compile cache is off, if it is, is said here, once. */
static void cache_note(const mc_options *opt)
{
    static bool said;
    const char *note = mc_cache_note();
    if (note && !said && !opt->quiet)
        fprintf(stderr, "minic: note: %s\n", note);
    said |= note != NULL;
}

static int compile(const mc_graph *g, const mc_options *opt, mc_program **p)
{
    mc_status st = mc_program_compile(g, opt, p);
    cache_note(opt);
    return st == MC_OK ? CLI_OK : cli_library_error(st);
}

static mc_status run_program(void *p) { return mc_program_run(p); }

/* Median time of one run in µs: the backend's timer where it has one, else the host clock (a
 * tensor-parallel program, or a rank of one: every rank's run, from the first start to the
 * last end, which one device's timer does not see). */
static mc_status time_program(mc_program *p, int iters, double *median_us, const char **clock)
{
    if (p->backend->time && !p->par && !p->parent) {
        *clock = "backend timer";
        return p->backend->time(p, iters, median_us);
    }
    mc_program *par = p->par ? p : p->parent && p->parent->par ? p->parent : NULL;
    if (p->backend->time && par) { /* a tensor-parallel program, or its rank 0 (what ran) */
        *clock = "backend timer on every rank at once, the slowest rank's";
        return mc_parallel_time(par, iters, NULL, median_us);
    }
    *clock = "host clock";
    return mc_time_median(run_program, p, iters, median_us);
}

static void print_value(double x, mc_dtype d)
{
    if (d == MC_BOOL)
        printf("%s", x != 0 ? "true" : "false");
    else if (d == MC_I32)
        printf("%.0f", x);
    else
        printf("%.6g", x);
}

/* name: dtype[shape]; the first values; sum and sum of |x| in double. */
static void print_output(const mc_tensor *t)
{
    char type[160];
    int64_t n = (int64_t)(t->bytes / mc_dtype_size(t->dtype));
    printf("%s: %s\n  values:", t->name, shape_string(t->dtype, t->shape, t->rank, type, sizeof type));
    for (int64_t i = 0; i < n && i < 8; i++) {
        putchar(' ');
        print_value(mc_load_element(t->data, t->dtype, i), t->dtype);
    }
    printf("%s (%lld elements)\n", n > 8 ? " ..." : "", (long long)n);
    double sum = 0, abs_sum = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = mc_load_element(t->data, t->dtype, i);
        sum += x;
        abs_sum += fabs(x);
    }
    printf("  checksum: sum=%.9g sum_abs=%.9g\n", sum, abs_sum);
}

static int64_t bytes_moved(const mc_program *p)
{
    int64_t total = 0;
    for (int k = 0; k < p->kp->nkernels; k++) {
        kir_count(p->kp, &p->kp->kernels[k]);
        total += p->kp->kernels[k].bytes;
    }
    return total;
}

/* docs/FORMAT.md §3: a file the command wrote is named on stderr unless --quiet. */
static void say_wrote(const cli_args *a, const char *path)
{
    if (!a->opt.quiet)
        fprintf(stderr, "minic: wrote %s\n", path);
}

/* ---- run ----------------------------------------------------------------------------------- */

static int run_profile(const cli_args *a, mc_program *p)
{
    mc_profile prof;
    mc_status st = mc_profile_init(&prof, p);
    if (st != MC_OK)
        return cli_library_error(st);
    st = mc_profile_collect(p, a->iters ? a->iters : 10, &prof);
    if (st == MC_OK && a->profile)
        mc_profile_print(&prof, stdout);
    if (st == MC_OK && a->profile_json && (st = mc_profile_write_json(&prof, a->profile_json)) == MC_OK)
        say_wrote(a, a->profile_json);
    if (st == MC_OK && a->trace && (st = mc_profile_write_trace(&prof, a->trace)) == MC_OK)
        say_wrote(a, a->trace);
    if (st == MC_OK && a->roofline && (st = mc_profile_write_roofline(&prof, a->roofline)) == MC_OK)
        say_wrote(a, a->roofline);
    mc_profile_release(&prof);
    return st == MC_OK ? CLI_OK : cli_library_error(st);
}

/* --verbose: where the time to the first result went, on stderr (phases as in the profile). */
static void say_times(const mc_program *p, const mc_program *ran, const double *ms)
{
    fprintf(stderr, "minic: time to the first result %.1f ms: read the graph %.1f ms, compile %.1f ms, "
                    "bind inputs %.1f ms, first run %.1f ms\nminic: compile %.1f ms:",
            ms[0] + ms[1] + ms[2] + ms[3], ms[0], ms[1], ms[2], ms[3], p->compile_ms);
    for (int i = 0; i < p->ncompile_phases; i++)
        fprintf(stderr, "%s %s %.1f ms", i ? "," : "", p->compile_phases[i].name, p->compile_phases[i].ms);
    fprintf(stderr, " (%d kernels%s, %d compiled, the rest from the cache)\n", ran ? ran->kp->nkernels : 0,
            p->par ? " per rank" : "", p->kernels_compiled);
}

int cli_run(const cli_args *a)
{
    mc_graph *g = NULL;
    mc_program *p = NULL;
    double ms[4] = {0}, t = mc_now_ms(); /* read, compile, bind, first run */
    int rc = load_graph(a, &g);
    if (rc == CLI_OK && a->output && ends_with(a->output, ".npy") && g->noutputs != 1)
        rc = cli_error(CLI_USER, "--output %s: a .npy file holds one array but the graph has %d outputs (use .safetensors)",
                       a->output, g->noutputs);
    ms[0] = mc_now_ms() - t;
    t += ms[0];
    if (rc == CLI_OK)
        rc = compile(g, &a->opt, &p);
    ms[1] = mc_now_ms() - t;
    t += ms[1];
    if (rc == CLI_OK)
        rc = bind_inputs(a, p);
    ms[2] = mc_now_ms() - t;
    t += ms[2];
    if (rc == CLI_OK) {
        mc_status st = mc_program_run(p);
        if (st != MC_OK)
            rc = cli_library_error(st);
        ms[3] = mc_now_ms() - t;
        if (rc == CLI_OK && a->verbose)
            say_times(p, mc_program_ran(p), ms);
    }
    mc_program *ran = rc == CLI_OK ? mc_program_ran(p) : NULL; /* symbolic: the binding's program */
    if (rc == CLI_OK) {
        char prep[96] = ""; /* kernels of the params alone (docs/FORMAT.md §5) */
        if (ran->kp->nprep > 0)
            snprintf(prep, sizeof prep, " (%d from the params alone: run when they are bound)", ran->kp->nprep);
        if (p->par)
            printf("%s: backend %s, %s, tensor parallel over %d ranks, %d kernels per rank%s, compiled in %.1f ms\n",
                   a->graph_path, mc_program_backend(p), a->opt.fuse ? "fused" : "unfused", a->opt.devices,
                   ran->kp->nkernels, prep, p->compile_ms);
        else
            printf("%s: backend %s, %s, %d kernels%s, compiled in %.1f ms\n", a->graph_path,
                   mc_program_backend(p), a->opt.fuse ? "fused" : "unfused", ran->kp->nkernels, prep,
                   ran->compile_ms);
        for (int i = 0; i < mc_program_num_outputs(p); i++) {
            mc_tensor t;
            if (mc_program_output(p, i, &t) == MC_OK)
                print_output(&t);
        }
        fflush(stdout);
    }
    if (rc == CLI_OK && a->output) {
        mc_status st = mc_program_save_outputs(p, a->output);
        if (st != MC_OK)
            rc = cli_library_error(st);
        else
            say_wrote(a, a->output);
    }
    if (rc == CLI_OK && a->iters) {
        double us;
        const char *clock;
        mc_status st = time_program(ran, a->iters, &us, &clock);
        if (st != MC_OK)
            rc = cli_library_error(st);
        else
            printf("time: %.2f us per run (median of %d runs after a warm-up, %s)\n", us, a->iters,
                   clock);
    }
    if (rc == CLI_OK && (a->profile || a->profile_json || a->trace || a->roofline))
        rc = run_profile(a, ran);
    mc_program_free(p);
    free_graph(g);
    return rc;
}

/* ---- bench --------------------------------------------------------------------------------- */

/* ||a - b|| / ||b|| (max |a - b| when ||b|| is 0); inf where a non-finite value disagrees. */
static double relative_error(const double *a, const double *b, int64_t n)
{
    double diff = 0, norm = 0, max_abs = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) {
            bool same = (isnan(a[i]) && isnan(b[i])) || a[i] == b[i];
            if (!same)
                return INFINITY;
            continue;
        }
        double d = a[i] - b[i];
        diff += d * d;
        norm += b[i] * b[i];
        if (fabs(d) > max_abs)
            max_abs = fabs(d);
    }
    return norm > 0 ? sqrt(diff) / sqrt(norm) : max_abs;
}

/* The tolerance of docs/FORMAT.md §6 for an output of dtype d. */
static double tolerance(const mc_graph *g, mc_dtype d)
{
    bool matmul = false;
    for (int i = 0; i < g->nnodes; i++)
        matmul |= g->nodes[i].op == MC_OP_MATMUL || g->nodes[i].op == MC_OP_LINEAR;
    if (d == MC_F32)
        return matmul ? 1e-4 : 1e-5;
    if (d == MC_F16 || d == MC_BF16)
        return 1e-2;
    return 0; /* i32, bool: exact */
}

static double *output_as_doubles(mc_program *p, int i)
{
    mc_tensor t;
    if (mc_program_output(p, i, &t) != MC_OK)
        return NULL;
    int64_t n = (int64_t)(t.bytes / mc_dtype_size(t.dtype));
    double *x = malloc((size_t)(n > 0 ? n : 1) * sizeof *x);
    for (int64_t k = 0; x && k < n; k++)
        x[k] = mc_load_element(t.data, t.dtype, k);
    return x;
}

/* The values the fused program was given, per graph node, for mc_graph_eval and the unfused
 * program. Declarations the kernels never read get generated values of their own. */
static int gather_inputs(const cli_args *a, const mc_graph *g, mc_program *fused,
                         const void **inputs, void **owned)
{
    for (int i = 0; i < g->nnodes; i++) {
        const mc_node *n = &g->nodes[i];
        if (n->op != MC_OP_INPUT && n->op != MC_OP_PARAM)
            continue;
        int b = mc_program_find(fused, n->name);
        if (b >= 0) {
            inputs[i] = fused->host[b];
            continue;
        }
        if (fused->par && fused->unread && fused->unread[i]) { /* tensor parallel: the value given */
            inputs[i] = fused->unread[i];
            continue;
        }
        int64_t numel = mc_node_numel(n), bytes;
        if (mc_mul_overflows(numel, (int64_t)mc_dtype_size(n->dtype), &bytes))
            return cli_error(CLI_USER, "%s: '%s' is too large", a->graph_path, n->name);
        owned[i] = calloc((size_t)(bytes > 0 ? bytes : 1), 1);
        if (!owned[i])
            return cli_error(CLI_SYSTEM, "out of memory");
        mc_fill_random(owned[i], n->dtype, numel, a->seed, n->name);
        inputs[i] = owned[i];
    }
    return CLI_OK;
}

static int bench_compare(const cli_args *a, const mc_graph *g, mc_program *fused,
                         mc_program *unfused, const void **inputs)
{
    int no = g->noutputs;
    double **ref = calloc((size_t)no, sizeof *ref);
    if (!ref)
        return cli_error(CLI_SYSTEM, "out of memory");
    mc_status st = mc_graph_eval(g, inputs, true, ref);
    int rc = st == MC_OK ? CLI_OK : cli_library_error(st);
    bool disagree = false;
    for (int i = 0; i < no && rc == CLI_OK; i++) {
        double *f = output_as_doubles(fused, i), *u = output_as_doubles(unfused, i);
        mc_tensor t;
        mc_program_output(fused, i, &t);
        int64_t n = (int64_t)(t.bytes / mc_dtype_size(t.dtype));
        if (!f || !u) {
            rc = cli_error(CLI_SYSTEM, "out of memory");
        } else {
            double ef = relative_error(f, ref[i], n), eu = relative_error(u, ref[i], n);
            double efu = relative_error(f, u, n), tol = tolerance(g, t.dtype);
            bool ok = efu <= tol;
            disagree |= !ok;
            char tol_text[32] = "exact";
            if (tol > 0)
                snprintf(tol_text, sizeof tol_text, "%.0e", tol);
            printf("output %s: error vs float64: fused %.3g, unfused %.3g (%s); fused vs unfused "
                   "%.3g, tolerance %s: %s\n",
                   t.name, ef, eu, ef < eu ? "fused closer" : ef > eu ? "unfused closer" : "equal",
                   efu, tol_text, ok ? "agree" : "DISAGREE");
        }
        free(f);
        free(u);
    }
    for (int i = 0; i < no; i++)
        free(ref[i]);
    free(ref);
    if (rc == CLI_OK && disagree)
        rc = cli_error(CLI_USER, "%s: fused and unfused outputs disagree beyond the tolerance of docs/FORMAT.md §6",
                       a->graph_path);
    return rc;
}

int cli_bench(const cli_args *a)
{
    mc_graph *g = NULL;
    mc_program *fused = NULL, *unfused = NULL;
    const void **inputs = NULL;
    void **owned = NULL;
    int iters = a->iters ? a->iters : 10;
    int rc = load_bound_graph(a, &g, true);
    mc_options fo = a->opt, uo = a->opt;
    fo.fuse = true;
    uo.fuse = false;
    if (rc == CLI_OK)
        rc = compile(g, &fo, &fused);
    if (rc == CLI_OK) {
        uo.backend = a->opt.backend;
        uo.quiet = true; /* the fallback note, if any, was said for the fused compile */
        rc = compile(g, &uo, &unfused);
    }
    if (rc == CLI_OK)
        rc = bind_inputs(a, fused);
    if (rc == CLI_OK) {
        inputs = calloc((size_t)g->nnodes, sizeof *inputs);
        owned = calloc((size_t)g->nnodes, sizeof *owned);
        rc = inputs && owned ? gather_inputs(a, g, fused, inputs, owned)
                             : cli_error(CLI_SYSTEM, "out of memory");
    }
    for (int i = 0; rc == CLI_OK && i < g->nnodes; i++) {
        const mc_node *n = &g->nodes[i];
        if (n->op != MC_OP_INPUT && n->op != MC_OP_PARAM)
            continue;
        int64_t bytes = mc_node_numel(n) * (int64_t)mc_dtype_size(n->dtype); /* checked above */
        mc_status st = mc_program_set(unfused, n->name, inputs[i], (size_t)bytes);
        if (st != MC_OK)
            rc = cli_library_error(st);
    }
    double tf = 0, tu = 0;
    const char *clock = "";
    if (rc == CLI_OK) {
        mc_status st = mc_program_run(fused);
        if (st == MC_OK)
            st = mc_program_run(unfused);
        if (st == MC_OK)
            st = time_program(fused, iters, &tf, &clock);
        if (st == MC_OK)
            st = time_program(unfused, iters, &tu, &clock);
        if (st != MC_OK)
            rc = cli_library_error(st);
    }
    if (rc == CLI_OK) {
        printf("bench %s: backend %s, median of %d runs after a warm-up (%s)\n", a->graph_path,
               mc_program_backend(fused), iters, clock);
        printf("  %-8s %8s %14s %14s %12s\n", "", "kernels", "time_us/run", "bytes moved",
               "compile_ms");
        if (fused->par)
            printf("  tensor parallel over %d ranks: kernels and bytes are rank 0's\n", a->opt.devices);
        mc_program *fr = mc_program_ran(fused), *ur = mc_program_ran(unfused);
        printf("  %-8s %8d %14.2f %14lld %12.1f\n", "fused", fr->kp->nkernels, tf,
               (long long)bytes_moved(fr), fused->compile_ms);
        printf("  %-8s %8d %14.2f %14lld %12.1f\n", "unfused", ur->kp->nkernels, tu,
               (long long)bytes_moved(ur), unfused->compile_ms);
        printf("  speedup: %.2fx\n", tf > 0 ? tu / tf : 0.0);
        fflush(stdout);
        rc = bench_compare(a, g, fused, unfused, inputs);
    }
    if (owned)
        for (int i = 0; i < g->nnodes; i++)
            free(owned[i]);
    free(owned);
    free(inputs);
    mc_program_free(fused);
    mc_program_free(unfused);
    free_graph(g);
    return rc;
}

/* ---- check and dump ------------------------------------------------------------------------ */

/* An ONNX name inside a comment: quotes, backslashes, control characters (a newline would end
 * the comment and start a statement of the file) and non-ASCII bytes (a graph file must be
 * UTF-8, an ONNX name need not be) as \xHH. */
static void print_quoted(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch < 0x20 || ch >= 0x7f || ch == '\'' || ch == '\\') /* bytes, not always UTF-8 */
            fprintf(f, "\\x%02x", ch);
        else
            fputc(ch, f);
    }
    fputc('\'', f);
}

/* The way back to an ONNX model's names, where minic renamed them (docs/FORMAT.md §7), as
 * comments: `# onnx input x_1 = 'x:0'`. check prints them after the graph; import writes them
 * into the .graph file. */
static void print_onnx_names(FILE *f, const mc_graph *g)
{
    for (int k = 0; k < onnx_model->ninputs; k++)
        if (strcmp(onnx_model->inputs[k].name, onnx_model->inputs[k].onnx_name)) {
            fprintf(f, "# onnx input %s = ", onnx_model->inputs[k].name);
            print_quoted(f, onnx_model->inputs[k].onnx_name);
            fputc('\n', f);
        }
    for (int k = 0; k < onnx_model->nparams; k++)
        if (strcmp(onnx_model->params[k].name, onnx_model->params[k].onnx_name)) {
            fprintf(f, "# onnx initializer %s = ", onnx_model->params[k].name);
            print_quoted(f, onnx_model->params[k].onnx_name);
            fputc('\n', f);
        }
    for (int k = 0; k < onnx_model->noutputs; k++) {
        const char *name = g->nodes[g->outputs[k]].name;
        if (name && strcmp(name, onnx_model->out_onnx[k])) {
            fprintf(f, "# onnx output %s = ", name);
            print_quoted(f, onnx_model->out_onnx[k]);
            fputc('\n', f);
        }
    }
}

int cli_check(const cli_args *a)
{
    mc_graph *g = NULL;
    int rc = load_bound_graph(a, &g, false);
    if (rc == CLI_OK) {
        mc_status st = mc_graph_print(g, stdout);
        if (st != MC_OK)
            rc = cli_library_error(st);
    }
    if (rc == CLI_OK && onnx_model)
        print_onnx_names(stdout, g);
    free_graph(g);
    return rc;
}

static int dump_code(const cli_args *a, const mc_graph *g)
{
    mc_program *p = NULL;
    int rc = CLI_OK;
    mc_status st = mc_program_compile(g, &a->opt, &p);
    if (st == MC_ERR_SYSTEM && a->opt.backend == MC_BACKEND_CUDA) {
        /* No usable GPU: CUDA source can still be rendered, for the default target. */
        char why[1024];
        snprintf(why, sizeof why, "%s", mc_error_message());
        st = mc_program_compile_unprepared(g, &a->opt, &p);
        if (st == MC_OK && !a->opt.quiet)
            fprintf(stderr, "minic: note: %s; showing the code for the default target\n", why);
        else if (st != MC_OK)
            mc_fail(st, "%s", why);
    }
    if (st != MC_OK)
        rc = cli_library_error(st);
    if (rc == CLI_OK && !p->backend->dump_code)
        rc = cli_error(CLI_USER, "--stage code: the %s backend generates no source (use --backend cpu or cuda)",
                       p->backend->name);
    if (rc == CLI_OK) {
        mc_status st = p->backend->dump_code(p, stdout);
        if (st != MC_OK)
            rc = cli_library_error(st);
    }
    mc_program_free(p);
    return rc;
}

static int dump_fused(const cli_args *a, const mc_graph *g)
{
    mc_compile_options co = mc_compile_options_of_backend(&a->opt);
    co.verify = true;
    kir_program *kp = NULL;
    mc_status st = mc_compile_kernels(g, &co, &kp);
    if (st != MC_OK)
        return cli_library_error(st);
    kir_print(kp, g, stdout);
    printf("kernels: %d; temporaries: planned peak %lld bytes, unplanned %lld bytes\n",
           kp->nkernels, (long long)kp->arena_bytes, (long long)kp->unplanned_bytes);
    kir_program_free(kp);
    return CLI_OK;
}

/* shard: the tensor-parallel plan for --devices N ranks and rank 0's graph. */
static int dump_shard(const cli_args *a, const mc_graph *g)
{
    if (a->opt.devices < 1)
        return cli_error(CLI_USER, "--stage shard: give the number of ranks with --devices N");
    mc_status st = mc_shard_print(g, a->opt.devices, 0, stdout);
    return st == MC_OK ? CLI_OK : cli_library_error(st);
}

/* ir, a graph pass, fuse, lower or plan: the pass manager prints what that stage made. */
static int dump_stage(const cli_args *a, const mc_graph *g)
{
    mc_compile_options co = mc_compile_options_of_backend(&a->opt);
    co.verify = true;
    mc_status st = mc_dump_stage(g, &co, a->stage, stdout);
    if (st == MC_ERR_INPUT && !strncmp(mc_error_message(), "unknown stage", 13)) {
        /* the nearest stage first, as for an unknown option (docs/FORMAT.md §3) */
        const char *names[32];
        int n = 0;
        for (int k = 0; mc_dump_stages[k] && n < 29; k++)
            names[n++] = mc_dump_stages[k];
        names[n++] = "fused";
        names[n++] = "code";
        names[n++] = "shard";
        char near[256];
        const char *list = strchr(mc_error_message(), '(');
        if (list && mc_suggest(a->stage, strlen(a->stage), names, n, near, sizeof near))
            return cli_error(CLI_USER, "--stage: unknown stage '%s' (did you mean %s? %s", a->stage, near, list + 1);
        return cli_error(CLI_USER, "--stage: %s", mc_error_message());
    }
    return st == MC_OK ? CLI_OK : cli_library_error(st);
}

int cli_dump(const cli_args *a)
{
    mc_graph *g = NULL;
    int rc = load_bound_graph(a, &g, false);
    if (rc != CLI_OK)
        return rc;
    if (!strcmp(a->stage, "fused"))
        rc = dump_fused(a, g);
    else if (!strcmp(a->stage, "code"))
        rc = dump_code(a, g);
    else if (!strcmp(a->stage, "shard"))
        rc = dump_shard(a, g);
    else
        rc = dump_stage(a, g);
    free_graph(g);
    return rc;
}

/* ---- import -------------------------------------------------------------------------------- */

static mc_status print_graph_to(FILE *f, void *g)
{
    mc_status st = mc_graph_print(g, f);
    if (st == MC_OK)
        print_onnx_names(f, g);
    return st;
}

int cli_import(const cli_args *a)
{
    if (!a->out_graph)
        return cli_error(CLI_USER, "import: no output file (-o OUT.graph)");
    mc_graph *g = NULL;
    /* the dim_params stay symbolic in the text graph; with --dim, the sizes given */
    int rc = load_bound_graph(a, &g, false);
    if (rc == CLI_OK && !onnx_model) {
        free_graph(g);
        return cli_error(CLI_USER, "import: %s is not an ONNX model", a->graph_path);
    }
    /* both files or neither: a graph whose weights could not be written is removed again */
    if (rc == CLI_OK) {
        mc_status st = mc_file_write_atomic(a->out_graph, print_graph_to, g);
        if (st != MC_OK)
            rc = cli_library_error(st);
    }
    if (rc == CLI_OK && a->weights_out) {
        mc_status st = mc_onnx_save_weights(onnx_model, a->weights_out);
        if (st != MC_OK) {
            rc = cli_library_error(st);
            remove(a->out_graph);
        }
    }
    if (rc == CLI_OK && !a->opt.quiet) {
        fprintf(stderr, "minic: wrote %s\n", a->out_graph);
        if (a->weights_out)
            fprintf(stderr, "minic: wrote %s\n", a->weights_out);
    }
    free_graph(g);
    return rc;
}
