/* Issue 23's sweep: one symbolic program of a graph over batch B and sequence T (compiled once)
 * against the program compiled for each fixed (B, T), timed the same way, as a table.
 *
 * The graph is a fixed-shape file such as bench/gpu/gpt2_block_bf16.graph whose batch and
 * sequence appear as "8, 1024" and "1024, 1024" (the GPT-2 block's x, reshapes and causal
 * iotas): the sweep makes it symbolic by text (x's type becomes [B<=MAXB, T<=MAXT, ...], MAXB
 * the largest batch of the sweep, every other
 * "8, 1024" is "B, T" and "1024, 1024" is "T, T") and fixed by putting the numbers in. Both run
 * with generated inputs (seed 1) through mc_program_run, which returns when the run is done
 * (a CUDA graph replay after the first run); the time is the median of --iters runs after
 * three warm-up runs. The symbolic program is compiled once and keeps the 8 bindings it ran
 * most recently (runtime/symbolic.c), so each binding is bound and captured on its first run;
 * its compile count is printed at the end. Build and run from the repository root:
 *
 *   cc -O2 -Iinclude bench/gpu/symbolic_sweep.c -Lbuild-gpu -lminic -Wl,-rpath,$PWD/build-gpu \
 *      -o build-gpu/symbolic_sweep
 *   build-gpu/symbolic_sweep bench/gpu/gpt2_block_bf16.graph --batch 1,4,16,64 --seq 16,64,256,1024
 *
 * Or bench/gpu/symbolic_sweep.sh, which does both. Options: --backend NAME (cuda), --iters N
 * (20), --max-seq N (1024, the declared maximum of T), --no-fixed (the symbolic program only),
 * --interleave (the two programs' runs in turns, for a machine whose load drifts: a shared
 * CPU), --threads N (mc_options.threads; the cpu backend's pool).
 */
#include <minic.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = '\0';
    fclose(f);
    return s;
}

/* text with every `from` replaced by `to` (the first one by `first` when not NULL). */
static char *replace(const char *text, const char *from, const char *to, const char *first)
{
    size_t lf = strlen(from), cap = strlen(text) * 2 + 4096, n = 0;
    char *out = malloc(cap);
    bool done_first = first == NULL;
    for (const char *p = text; *p;) {
        if (strncmp(p, from, lf) == 0) {
            const char *r = done_first ? to : first;
            done_first = true;
            size_t lr = strlen(r);
            memcpy(out + n, r, lr);
            n += lr;
            p += lf;
        } else {
            out[n++] = *p++;
        }
        if (n + 256 > cap)
            out = realloc(out, cap *= 2);
    }
    out[n] = '\0';
    return out;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median ms of one mc_program_run over iters runs after 3 warm-ups; < 0 on failure. */
static double time_runs(mc_program *p, int iters)
{
    double *t = calloc((size_t)iters, sizeof *t);
    for (int i = 0; i < 3; i++)
        if (mc_program_run(p) != MC_OK) {
            fprintf(stderr, "run: %s\n", mc_error_message());
            free(t);
            return -1;
        }
    for (int i = 0; i < iters; i++) {
        double t0 = now_ms();
        if (mc_program_run(p) != MC_OK) {
            fprintf(stderr, "run: %s\n", mc_error_message());
            free(t);
            return -1;
        }
        t[i] = now_ms() - t0;
    }
    qsort(t, (size_t)iters, sizeof *t, cmp);
    double m = t[iters / 2];
    free(t);
    return m;
}

/* Both programs timed in turns (--interleave): run i of each one after the other, so that a
 * machine whose load drifts (a shared CPU) slows both alike; medians of iters runs after 3
 * warm-ups each. false on failure. */
static bool time_pair(mc_program *a, mc_program *b, int iters, double *ma, double *mb)
{
    double *ta = calloc((size_t)iters, sizeof *ta), *tb = calloc((size_t)iters, sizeof *tb);
    bool ok = ta && tb;
    for (int i = 0; ok && i < 3; i++)
        ok = mc_program_run(a) == MC_OK && mc_program_run(b) == MC_OK;
    for (int i = 0; ok && i < iters; i++) {
        double t0 = now_ms();
        ok = mc_program_run(a) == MC_OK;
        double t1 = now_ms();
        ok = ok && mc_program_run(b) == MC_OK;
        ta[i] = t1 - t0;
        tb[i] = now_ms() - t1;
    }
    if (ok) {
        qsort(ta, (size_t)iters, sizeof *ta, cmp);
        qsort(tb, (size_t)iters, sizeof *tb, cmp);
        *ma = ta[iters / 2];
        *mb = tb[iters / 2];
    } else {
        fprintf(stderr, "run: %s\n", mc_error_message());
    }
    free(ta);
    free(tb);
    return ok;
}

static int parse_list(const char *s, long *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        out[n++] = strtol(s, (char **)&s, 10);
        if (*s == ',')
            s++;
    }
    return n;
}

static void quiet_note(void *ctx, const char *note) { (void)ctx, (void)note; }

static mc_program *compile_text(const char *name, const char *text, const mc_options *o, double *ms)
{
    mc_graph *g = NULL;
    if (mc_graph_parse_string(name, text, &g) != MC_OK) {
        fprintf(stderr, "%s: %s\n", name, mc_error_message());
        return NULL;
    }
    mc_program *p = NULL;
    double t0 = now_ms();
    mc_status st = mc_program_compile(g, o, &p);
    *ms = now_ms() - t0;
    mc_graph_free(g);
    if (st != MC_OK) {
        fprintf(stderr, "%s: compile: %s\n", name, mc_error_message());
        return NULL;
    }
    return p;
}

int main(int argc, char **argv)
{
    const char *path = NULL, *backend = "cuda";
    long batch[32] = {1, 4, 16, 64}, seq[32] = {16, 64, 256, 1024};
    int nb = 4, ns = 4, iters = 20;
    long maxt = 1024;
    bool fixed = true, interleave = false;
    int threads = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            nb = parse_list(argv[++i], batch, 32);
        else if (!strcmp(argv[i], "--seq") && i + 1 < argc)
            ns = parse_list(argv[++i], seq, 32);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--max-seq") && i + 1 < argc)
            maxt = atol(argv[++i]);
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            backend = argv[++i];
        else if (!strcmp(argv[i], "--no-fixed"))
            fixed = false;
        else if (!strcmp(argv[i], "--interleave"))
            interleave = true;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (argv[i][0] != '-' && !path)
            path = argv[i];
        else {
            fprintf(stderr, "usage: symbolic_sweep GRAPH [--batch 1,4] [--seq 16,64] [--iters N] [--max-seq N] "
                            "[--backend NAME] [--no-fixed] [--interleave] [--threads N]\n");
            return 2;
        }
    }
    if (!path || iters < 1)
        return 2;
    char *text = read_all(path);
    if (!text) {
        fprintf(stderr, "%s: cannot read\n", path);
        return 1;
    }
    mc_options o = mc_options_default();
    o.note = quiet_note; /* kept for mc_program_notes, not printed */
    if (threads > 0)
        o.threads = threads;
    if (!strcmp(backend, "cuda"))
        o.backend = MC_BACKEND_CUDA;
    else if (!strcmp(backend, "cpu"))
        o.backend = MC_BACKEND_CPU;
    else
        o.backend = MC_BACKEND_REF;
    long maxb = 1;
    for (int i = 0; i < nb; i++)
        maxb = batch[i] > maxb ? batch[i] : maxb;
    char first[64]; /* maxima: 32-bit indices where they fit */
    snprintf(first, sizeof first, "[B<=%ld, T<=%ld, ", maxb, maxt);
    char *t1 = replace(text, "[8, 1024, ", "[B, T, ", first);
    char *symtext = replace(t1, "[1024, 1024]", "[T, T]", NULL);
    free(t1);
    double sym_compile = 0;
    mc_program *sp = compile_text("symbolic.graph", symtext, &o, &sym_compile);
    if (!sp)
        return 1;
    const char *notes = mc_program_notes(sp);
    printf("symbolic program: compiled in %.0f ms; notes:\n%s", sym_compile, notes);
    printf("%6s %6s %12s %12s %8s %14s %12s\n", "B", "T", "fixed ms", "symbolic ms", "ratio", "fixed compile", "compilations");
    int worst_b = 0, worst_t = 0;
    double worst = 0;
    int fails = 0;
    for (int bi = 0; bi < nb; bi++)
        for (int ti = 0; ti < ns; ti++) {
            long B = batch[bi], T = seq[ti];
            if (T > maxt)
                continue;
            if (mc_program_set_dim(sp, "B", B) != MC_OK || mc_program_set_dim(sp, "T", T) != MC_OK ||
                mc_program_fill_random(sp, 1) != MC_OK) {
                fprintf(stderr, "bind B=%ld T=%ld: %s\n", B, T, mc_error_message());
                return 1;
            }
            double ms_sym = interleave && fixed ? 0 : time_runs(sp, iters);
            double ms_fix = -1, fix_compile = 0;
            if (fixed) {
                char a[64], b[64];
                snprintf(a, sizeof a, "[%ld, %ld, ", B, T);
                snprintf(b, sizeof b, "[%ld, %ld]", T, T);
                char *f1 = replace(text, "[8, 1024, ", a, NULL);
                char *ftext = replace(f1, "[1024, 1024]", b, NULL);
                free(f1);
                mc_program *fp = compile_text("fixed.graph", ftext, &o, &fix_compile);
                free(ftext);
                if (!fp)
                    return 1;
                if (mc_program_fill_random(fp, 1) != MC_OK)
                    return 1;
                if (interleave && !time_pair(sp, fp, iters, &ms_sym, &ms_fix))
                    ms_sym = -1;
                else if (!interleave)
                    ms_fix = time_runs(fp, iters);
                mc_program_free(fp);
            }
            double ratio = ms_fix > 0 ? ms_sym / ms_fix : 0;
            if (ms_sym < 0)
                fails++;
            if (ratio > worst) {
                worst = ratio;
                worst_b = (int)B;
                worst_t = (int)T;
            }
            printf("%6ld %6ld %12.4f %12.4f %8.3f %12.0f ms %12d\n", B, T, ms_fix, ms_sym, ratio, fix_compile,
                   mc_program_compilations(sp));
            fflush(stdout);
        }
    printf("symbolic program: %d compilation(s) over the sweep; worst ratio %.3f at B=%d T=%d (target <= 1.10)\n",
           mc_program_compilations(sp), worst, worst_b, worst_t);
    notes = mc_program_notes(sp);
    const char *spec = strstr(notes, "compiled for this binding");
    if (spec)
        printf("first per-binding note: %.200s\n", spec);
    mc_program_free(sp);
    free(symtext);
    free(text);
    return fails ? 1 : 0;
}
