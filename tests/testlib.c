/* Shared test helpers (see testlib.h). */
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return calloc(1, 1);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

const char *mc_test_tmpdir(void)
{
    static char dir[4096];
    if (!dir[0]) {
        const char *build = getenv("MINIC_BUILD");
        snprintf(dir, sizeof dir, "%s/testtmp/%d", build ? build : "/tmp", (int)getpid());
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
        if (system(cmd) != 0)
            fail_msg("cannot create %s", dir);
    }
    return dir;
}

int mc_test_minic(const char *args, char **out, char **err)
{
    const char *bin = getenv("MINIC_BIN");
    if (!bin)
        bin = "build/minic";
    char o[4200], e[4200];
    snprintf(o, sizeof o, "%s/stdout.txt", mc_test_tmpdir());
    snprintf(e, sizeof e, "%s/stderr.txt", mc_test_tmpdir());
    size_t n = strlen(bin) + strlen(args) + 2 * sizeof o + 32;
    char *cmd = malloc(n);
    snprintf(cmd, n, "%s %s </dev/null >'%s' 2>'%s'", bin, args, o, e);
    int st = system(cmd);
    free(cmd);
    if (out)
        *out = slurp(o);
    if (err)
        *err = slurp(e);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

const char *mc_test_write_file(const char *name, const void *data, size_t size)
{
    static char paths[8][4200];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, sizeof paths[0], "%s/%s", mc_test_tmpdir(), name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, size, f), size);
    fclose(f);
    return p;
}

const char *mc_test_src(const char *rel)
{
    static char paths[8][4200];
    static int next;
    char *p = paths[next++ % 8];
    const char *src = getenv("MINIC_SRC");
    snprintf(p, sizeof paths[0], "%s/%s", src ? src : ".", rel);
    return p;
}

double mc_test_rel_error(const double *a, const double *b, int64_t n)
{
    double num = 0, den = 0, maxabs = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(b[i]) || isinf(b[i])) {
            if (!(isnan(a[i]) && isnan(b[i])) && a[i] != b[i])
                return INFINITY;
            continue;
        }
        if (isnan(a[i]) || isinf(a[i]))
            return INFINITY;
        double d = a[i] - b[i];
        num += d * d;
        den += b[i] * b[i];
        if (fabs(d) > maxabs)
            maxabs = fabs(d);
    }
    return den == 0 ? maxabs : sqrt(num) / sqrt(den);
}

#ifdef MINIC_HAVE_CUDA
#include "runtime/runtime.h"
#endif

bool mc_test_have_gpu(void)
{
#ifdef MINIC_HAVE_CUDA
    return mc_backend_cuda.probe() == MC_OK;
#else
    return false;
#endif
}

int mc_test_backends(mc_backend_kind out[3], int *n)
{
    const char *only = getenv("MINIC_TEST_BACKEND");
    bool gpu = mc_test_have_gpu();
    *n = 0;
    if (only && *only) {
        mc_backend_kind k;
        if (!strcmp(only, "ref"))
            k = MC_BACKEND_REF;
        else if (!strcmp(only, "cpu"))
            k = MC_BACKEND_CPU;
        else if (!strcmp(only, "cuda"))
            k = MC_BACKEND_CUDA;
        else {
            fprintf(stderr, "MINIC_TEST_BACKEND=%s: expected ref, cpu or cuda\n", only);
            return 1;
        }
        if (k == MC_BACKEND_CUDA && !gpu) {
            printf("skipped: no GPU\n");
            return 77;
        }
        out[(*n)++] = k;
    } else {
        out[(*n)++] = MC_BACKEND_REF;
#ifdef MINIC_HAVE_CPU_BACKEND
        out[(*n)++] = MC_BACKEND_CPU;
#endif
        if (gpu)
            out[(*n)++] = MC_BACKEND_CUDA;
        else
            printf("cuda: skipped: no GPU\n");
    }
    for (int i = 0; i < *n; i++)
        printf("backend %s\n", mc_backend_name(out[i]));
    return 0;
}

const char *mc_test_cpu_target(void)
{
    const char *t = getenv("MINIC_TEST_CPU_TARGET");
    return t && t[0] && strcmp(t, "host") != 0 ? t : NULL;
}

mc_options mc_test_options(void)
{
    mc_options opt = mc_options_default();
    opt.cpu_target = mc_test_cpu_target();
    return opt;
}

mc_graph *mc_test_parse(const char *text)
{
    mc_graph *g = NULL;
    if (mc_graph_parse_string("t.graph", text, &g) != MC_OK)
        fail_msg("parse: %s", mc_error_message());
    return g;
}

/* Whether this machine runs the CPU backend's code for mc_test_cpu_target(): a one-node
 * program compiled for it and run. MC_ERR_SYSTEM (features missing, no CPU backend): skip;
 * MC_ERR_INPUT (a name the backend does not know): a broken test setup, which fails. */
void mc_test_check_cpu_target(void)
{
    const char *target = mc_test_cpu_target();
    if (!target)
        return;
    mc_graph *g = mc_graph_new("probe");
    int64_t shape[1] = {4};
    mc_value y = mc_exp(g, mc_input(g, "x", MC_F32, shape, 1));
    mc_status st = g ? mc_graph_set_outputs(g, &y, 1) : MC_ERR_SYSTEM;
    mc_options opt = mc_test_options();
    opt.backend = MC_BACKEND_CPU;
    opt.quiet = true;
    mc_program *p = NULL;
    if (st == MC_OK && (st = mc_program_compile(g, &opt, &p)) == MC_OK && (st = mc_program_fill_random(p, 0)) == MC_OK)
        st = mc_program_run(p);
    mc_program_free(p);
    mc_graph_free(g);
    if (st == MC_OK) {
        printf("CPU target: %s (MINIC_TEST_CPU_TARGET)\n", target);
        return;
    }
    fflush(stdout);
    if (st == MC_ERR_SYSTEM) {
        fprintf(stderr, "skipped: MINIC_TEST_CPU_TARGET=%s: %s\n", target, mc_error_message());
        _exit(77);
    }
    fprintf(stderr, "error: MINIC_TEST_CPU_TARGET=%s: %s\n", target, mc_error_message());
    _exit(1);
}

int mc_test_exit(int failed)
{
    if (failed) {
        fflush(stdout);
        fprintf(stderr, "%d test(s) failed (above); exiting without the leak check, which would report "
                        "what the failed tests left allocated\n", failed);
        fflush(stderr);
        _exit(1);
    }
    return 0;
}

int mc_test_run_group(const char *name, const struct CMUnitTest *tests, size_t n)
{
    mc_test_check_cpu_target();
    /* MINIC_TEST_FILTER=PATTERN: only the tests whose names match (cmocka's * and ?) */
    const char *filter = getenv("MINIC_TEST_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    return mc_test_exit(_cmocka_run_group_tests(name, tests, n, NULL, NULL));
}
