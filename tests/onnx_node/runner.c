/* Runs ONNX's backend node tests (onnx/backend/test/data/node/<test>/: model.onnx and
 * test_data_set_0/{input,output}_N.pb) through minic on one backend and writes one line per
 * test: "NAME<TAB>pass" or "NAME<TAB>fail<TAB>REASON" (tests/onnx_node/run.sh reads them).
 *
 *   onnx_node_runner DATA_DIR BACKEND OUT.tsv [TEST..]
 *
 * A test passes when every output has ONNX's shape and every element is within
 * atol + rtol * |expected| (rtol 1e-3, atol 1e-7 as ONNX's own runner uses for f32; f16/bf16
 * outputs rtol 1e-2, atol 1e-3 as docs/FORMAT.md §6 allows), NaN where NaN is expected;
 * integers and bools exactly (ONNX 1.12 stores BFLOAT16 tensors as UINT16 bits: read as such).
 * Inputs that the model uses only as shapes, axes or indices are
 * given to the importer (mc_onnx_load_frozen): minic compiles for fixed shapes.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frontend/onnx.h"
#include "minic.h"

#define MAX_IO 64

static int count_files(const char *dir, const char *prefix)
{
    int n = 0;
    char path[4096];
    for (;;) {
        snprintf(path, sizeof path, "%s/%s_%d.pb", dir, prefix, n);
        struct stat st;
        if (stat(path, &st) != 0)
            return n;
        n++;
    }
}

static void oneline(char *s)
{
    for (; *s; s++)
        if (*s == '\n' || *s == '\t' || *s == '\r')
            *s = ' ';
}

static void quiet_note(void *ctx, const char *note) { (void)ctx; (void)note; }

/* ONNX 1.12 writes a BFLOAT16 test tensor as UINT16 holding the bits (read as i32 here): the
 * bits become the bf16 values. */
static bool bf16_bits(mc_onnx_tensor *t)
{
    size_t n = t->bytes / sizeof(int32_t);
    uint16_t *b = malloc(n ? 2 * n : 1);
    if (!b)
        return false;
    for (size_t k = 0; k < n; k++)
        b[k] = (uint16_t)((const int32_t *)t->data)[k];
    free(t->data);
    t->data = b;
    t->bytes = 2 * n;
    t->dtype = MC_BF16;
    return true;
}

/* Run one test; on failure write the reason to why. */
static bool run_test(const char *dir, mc_backend_kind backend, char *why, size_t size)
{
    char model[4096], data[4096];
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    snprintf(data, sizeof data, "%s/test_data_set_0", dir);
    int nin = count_files(data, "input"), nout = count_files(data, "output");
    if (nin > MAX_IO || nout > MAX_IO) {
        snprintf(why, size, "too many inputs or outputs");
        return false;
    }
    char *files[MAX_IO];
    for (int k = 0; k < nin; k++) {
        files[k] = malloc(4200);
        snprintf(files[k], 4200, "%s/input_%d.pb", data, k);
    }
    mc_onnx *m = NULL;
    mc_program *p = NULL;
    bool ok = false;
    mc_status st = mc_onnx_load_frozen(model, MC_ONNX_F64_AS_F32, NULL, NULL, (const char *const *)files, nin, &m);
    if (st != MC_OK) {
        const char *msg = mc_error_message();
        const char *colon = strstr(msg, "model.onnx: ");
        msg = colon ? colon + 12 : msg;
        const char *list = strstr(msg, "cannot be imported:");
        if (list) { /* the nodes' own lines */
            msg = list + strlen("cannot be imported:");
            while (*msg == ' ' || *msg == '\n')
                msg++;
        }
        snprintf(why, size, "%s", msg);
        goto done;
    }
    mc_options opt = mc_options_default();
    opt.backend = backend;
    opt.quiet = true;
    opt.note = quiet_note;
    if ((st = mc_program_compile(mc_onnx_graph(m), &opt, &p)) != MC_OK) {
        snprintf(why, size, "compile: %s", mc_error_message());
        goto done;
    }
    if ((st = mc_onnx_bind(m, p)) != MC_OK) {
        snprintf(why, size, "bind: %s", mc_error_message());
        goto done;
    }
    for (int k = 0; k < m->ninputs; k++) {
        mc_onnx_tensor t;
        int pos = m->inputs[k].position;
        if (pos < 0 || pos >= nin) {
            snprintf(why, size, "input %d has no data file", pos);
            goto done;
        }
        if ((st = mc_onnx_read_tensor_file(files[pos], true, &t)) != MC_OK) {
            snprintf(why, size, "input: %s", mc_error_message());
            goto done;
        }
        if (m->inputs[k].dtype == MC_BF16 && t.dtype == MC_I32 && !bf16_bits(&t)) {
            snprintf(why, size, "input: out of memory");
            free(t.data);
            goto done;
        }
        st = mc_program_set(p, m->inputs[k].name, t.data, t.bytes);
        free(t.data);
        if (st != MC_OK) {
            snprintf(why, size, "input: %s", mc_error_message());
            goto done;
        }
    }
    if ((st = mc_program_fill_random(p, 0)) != MC_OK || (st = mc_program_run(p)) != MC_OK) {
        snprintf(why, size, "run: %s", mc_error_message());
        goto done;
    }
    if (mc_program_num_outputs(p) != nout) {
        snprintf(why, size, "%d outputs, the test has %d", mc_program_num_outputs(p), nout);
        goto done;
    }
    ok = true;
    for (int k = 0; k < nout && ok; k++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/output_%d.pb", data, k);
        mc_onnx_tensor want;
        if (mc_onnx_read_tensor_file(path, true, &want) != MC_OK) {
            snprintf(why, size, "expected output: %s", mc_error_message());
            ok = false;
            break;
        }
        mc_tensor got;
        mc_program_output(p, k, &got);
        bool same_shape = got.rank == want.rank;
        for (int d = 0; same_shape && d < got.rank; d++)
            same_shape = got.shape[d] == want.shape[d];
        if (!same_shape) {
            snprintf(why, size, "output %d: shape of rank %d, expected rank %d", k, got.rank, want.rank);
            ok = false;
        } else {
            int64_t n = (int64_t)(want.bytes / mc_dtype_size(want.dtype));
            bool half = got.dtype == MC_F16 || got.dtype == MC_BF16;
            double rtol = half ? 1e-2 : 1e-3, atol = half ? 1e-3 : 1e-7;
            for (int64_t e = 0; e < n; e++) {
                double x = mc_load_element(got.data, got.dtype, e), y = mc_load_element(want.data, want.dtype, e);
                if (got.dtype == MC_BF16 && want.dtype == MC_I32) /* the bits, as UINT16 (bf16_bits) */
                    y = mc_bf16_to_double((uint16_t)((const int32_t *)want.data)[e]);
                bool good = (isnan(y) && isnan(x)) || x == y || fabs(x - y) <= atol + rtol * fabs(y);
                if (!good) {
                    snprintf(why, size, "numerics: output %d element %lld is %.9g, expected %.9g", k,
                             (long long)e, x, y);
                    ok = false;
                    break;
                }
            }
        }
        free(want.data);
    }
done:
    for (int k = 0; k < nin; k++)
        free(files[k]);
    mc_program_free(p);
    mc_onnx_free(m);
    return ok;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: onnx_node_runner DATA_DIR ref|cpu|cuda OUT.tsv [TEST..]\n");
        return 2;
    }
    mc_backend_kind backend = !strcmp(argv[2], "cpu") ? MC_BACKEND_CPU
                              : !strcmp(argv[2], "cuda") ? MC_BACKEND_CUDA : MC_BACKEND_REF;
    char **names = NULL;
    int n = 0;
    if (argc > 4) {
        names = argv + 4;
        n = argc - 4;
    } else {
        DIR *d = opendir(argv[1]);
        if (!d) {
            fprintf(stderr, "onnx_node_runner: cannot open %s\n", argv[1]);
            return 2;
        }
        struct dirent *e;
        int cap = 0;
        while ((e = readdir(d))) {
            if (strncmp(e->d_name, "test_", 5))
                continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 1024;
                names = realloc(names, (size_t)cap * sizeof *names);
            }
            names[n++] = strdup(e->d_name);
        }
        closedir(d);
        qsort(names, (size_t)n, sizeof *names, by_name);
    }
    FILE *out = fopen(argv[3], "w");
    if (!out) {
        fprintf(stderr, "onnx_node_runner: cannot write %s\n", argv[3]);
        return 2;
    }
    int passed = 0;
    for (int k = 0; k < n; k++) {
        char dir[4096], why[1024] = "";
        snprintf(dir, sizeof dir, "%s/%s", argv[1], names[k]);
        bool ok = run_test(dir, backend, why, sizeof why);
        passed += ok;
        oneline(why);
        if (strlen(why) > 300)
            strcpy(why + 296, "...");
        fprintf(out, "%s\t%s%s%s\n", names[k], ok ? "pass" : "fail", ok ? "" : "\t", ok ? "" : why);
        fflush(out);
    }
    fclose(out);
    printf("onnx_node_runner: %s: %d of %d passed\n", argv[2], passed, n);
    if (argc <= 4) {
        for (int k = 0; k < n; k++)
            free(names[k]);
        free(names);
    }
    return 0;
}
