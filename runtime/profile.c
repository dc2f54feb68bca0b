/* The profile report (docs/FORMAT.md §5): collecting times, deriving rates, printing the table and
 * writing the JSON object. See profile.h for where each number comes from.
 *
 * Collection runs the program `iters` times after one warm-up and takes medians: means are
 * wrecked by one slow outlier (LESSONS.md). The wall time is always measured here, on the host
 * clock around mc_program_run, so it includes launches and copies; the kernel times come from
 * the backend only, so the two can be compared (device-busy % = kernel time / wall time).
 *
 * Nothing unknown is printed as a number: a kernel the backend did not time shows "-" in the
 * table and null in the JSON, and a rate above 100% of peak is flagged as suspect.
 */
#include "runtime/profile.h"
#include "runtime/peaks.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

mc_status mc_profile_init(mc_profile *prof, const mc_program *p)
{
    memset(prof, 0, sizeof *prof);
    prof->program = p;
    prof->nkernels = p->kp->nkernels;
    size_t n = prof->nkernels > 0 ? (size_t)prof->nkernels : 1;
    prof->launches = calloc(n, sizeof *prof->launches);
    prof->time_us = calloc(n, sizeof *prof->time_us);
    prof->peak_flops = calloc(n, sizeof *prof->peak_flops);
    if (!prof->launches || !prof->time_us || !prof->peak_flops) {
        mc_profile_release(prof);
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    }
    for (int k = 0; k < prof->nkernels; k++) {
        kir_count(p->kp, &p->kp->kernels[k]);
        prof->launches[k] = 1;
        prof->time_us[k] = NAN;
    }
    prof->wall_us = NAN;
    prof->peaks_source = "none";
    prof->clock_scale = 1;
    return MC_OK;
}

void mc_profile_release(mc_profile *prof)
{
    free(prof->launches);
    free(prof->time_us);
    free(prof->peak_flops);
    prof->launches = NULL;
    prof->time_us = prof->peak_flops = NULL;
}

/* The CPU's name from /proc/cpuinfo ("" where there is none). */
static void host_cpu_name(char *buf, size_t size)
{
    buf[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        const char *v = strchr(line, ':');
        if (!v)
            break;
        v += 1 + strspn(v + 1, " \t");
        snprintf(buf, size, "%.*s", (int)strcspn(v, "\n"), v);
        break;
    }
    fclose(f);
}

/* Host backends: each kernel alone, `iters` times (after the warm-up run), median per kernel. */
static mc_status time_kernels_on_host(mc_program *p, int iters, mc_profile *prof)
{
    int n = prof->nkernels;
    double *t = calloc((size_t)iters * (size_t)(n > 0 ? n : 1), sizeof *t);
    if (!t)
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    mc_status st = MC_OK;
    for (int i = 0; i < iters && st == MC_OK; i++)
        for (int k = 0; k < n && st == MC_OK; k++) {
            double t0 = mc_now_ms();
            st = p->backend->run_kernel(p, k);
            t[(size_t)k * (size_t)iters + (size_t)i] = (mc_now_ms() - t0) * 1000.0;
        }
    for (int k = 0; k < n && st == MC_OK; k++) {
        prof->time_us[k] = mc_median(&t[(size_t)k * (size_t)iters], iters);
        prof->launches[k] = 1;
    }
    free(t);
    if (!prof->device[0])
        host_cpu_name(prof->device, sizeof prof->device);
    if (!prof->clock[0])
        snprintf(prof->clock, sizeof prof->clock, "host clock");
    return st;
}

static mc_status run_program(void *p) { return mc_program_run(p); }

mc_status mc_profile_collect(mc_program *p, int iters, mc_profile *prof)
{
    if (iters < 1)
        iters = 1;
    prof->iters = iters;
    mc_status st = mc_time_median(run_program, p, iters, &prof->wall_us);
    if (st == MC_OK && p->backend->profile)
        st = p->backend->profile(p, iters, prof);
    else if (st == MC_OK && p->backend->run_kernel)
        st = time_kernels_on_host(p, iters, prof);
    if (st == MC_OK)
        mc_peaks_apply(prof); /* measured ceilings, clock scaling (runtime/peaks.c) */
    return st;
}

mc_kernel_rates mc_profile_kernel_rates(const mc_profile *prof, int k)
{
    const kir_kernel *kern = &prof->program->kp->kernels[k];
    mc_kernel_rates r = {.bound = "unknown"};
    if (kern->bytes > 0)
        r.intensity = (double)kern->flops / (double)kern->bytes;
    double t = prof->time_us[k];
    if (!(t > 0))
        return r;
    r.flops_per_s = (double)kern->flops / (t * 1e-6);
    r.bytes_per_s = (double)kern->bytes / (t * 1e-6);
    double pf = prof->peak_flops[k], pb = prof->peak_bytes_per_s;
    if (pf > 0)
        r.pct_peak_flops = 100.0 * r.flops_per_s / pf;
    if (pb > 0)
        r.pct_peak_bw = 100.0 * r.bytes_per_s / pb;
    if (pf > 0 && pb > 0) {
        /* Far from both roofs and short: launch or latency bound. Otherwise the side of the
         * ridge point (peak FLOP/s / peak bytes/s) the kernel's intensity falls on. */
        if (r.pct_peak_flops < 10 && r.pct_peak_bw < 10 && t < 20)
            r.bound = "latency";
        else
            r.bound = r.intensity < pf / pb ? "memory" : "compute";
    }
    return r;
}

int64_t mc_profile_peak_memory(const mc_program *p)
{
    int64_t total = p->kp->arena_bytes;
    for (int b = 0; b < p->kp->nbuffers; b++) {
        const kir_buffer *buf = &p->kp->buffers[b];
        int64_t bytes, sum;
        if (buf->kind == KBUF_TEMP ||
            mc_mul_overflows(buf->numel, (int64_t)mc_dtype_size(buf->dtype), &bytes) ||
            mc_add_overflows(total, bytes, &sum))
            continue;
        total = sum;
    }
    return total;
}

static const char *category_name(kir_category c)
{
    switch (c) {
    case KIR_POINTWISE: return "pointwise";
    case KIR_REDUCTION: return "reduction";
    case KIR_GEMM: return "gemm";
    case KIR_COPY: return "copy";
    case KIR_ATTENTION: return "attention";
    }
    return "?";
}

/* "matmul,add,gelu" and "8-9" or "8,10" into buf. */
static const char *ops_string(const kir_kernel *k, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < k->nops && n + 1 < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? "," : "", mc_op_table[k->ops[i]].name);
    return buf;
}

static const char *lines_string(const kir_kernel *k, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < k->nlines && n + 1 < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%d", i ? "," : "", k->lines[i]);
    if (!k->nlines)
        snprintf(buf, size, "-");
    return buf;
}

static const mc_profile *sort_profile; /* qsort has no context argument */

static int by_time(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    double x = sort_profile->time_us[i], y = sort_profile->time_us[j];
    x = isnan(x) ? -INFINITY : x; /* slowest first; unmeasured last */
    y = isnan(y) ? -INFINITY : y;
    if (x != y)
        return (x < y) - (x > y);
    return (i > j) - (i < j);
}

/* Numbers that cannot be true are shown, and flagged, never hidden (LESSONS.md). */
static const char *suspect(const mc_profile *prof, int k, const mc_kernel_rates *r)
{
    double t = prof->time_us[k];
    if (!isnan(t) && t <= 0)
        return "  (suspect: zero or negative time)";
    if (r->pct_peak_flops > 100 || r->pct_peak_bw > 100)
        return "  (suspect: above peak)";
    return "";
}

static void print_number(FILE *out, int width, double value, int precision)
{
    if (value > 0 || value == 0)
        fprintf(out, " %*.*f", width, precision, value);
    else
        fprintf(out, " %*s", width, "-");
}

void mc_profile_print(const mc_profile *prof, FILE *out)
{
    const mc_program *p = prof->program;
    const kir_program *kp = p->kp;
    int n = prof->nkernels;
    int *order = calloc(n > 0 ? (size_t)n : 1, sizeof *order);
    if (!order)
        return;
    for (int k = 0; k < n; k++)
        order[k] = k;
    sort_profile = prof;
    qsort(order, (size_t)n, sizeof *order, by_time);

    double kernel_us = 0;
    bool timed = false;
    int launches = 0;
    int64_t flops = 0, bytes = 0;
    for (int k = 0; k < n; k++) {
        if (!isnan(prof->time_us[k])) {
            kernel_us += prof->time_us[k];
            timed = true;
        }
        launches += prof->launches[k];
        flops += kp->kernels[k].flops;
        bytes += kp->kernels[k].bytes;
    }
    fprintf(out, "profile: backend %s%s%s, %s, %d kernels, median of %d runs after a warm-up\n",
            p->backend->name, prof->device[0] ? " on " : "", prof->device,
            p->opt.fuse ? "fused" : "unfused", n, prof->iters);
    fprintf(out, "peaks: %s", prof->peaks_source ? prof->peaks_source : "none");
    if (prof->clocks_known)
        fprintf(out, "; clocks: SM %.0f/%.0f MHz, memory %.0f/%.0f MHz (compute peaks x%.3f)\n",
                prof->sm_mhz, prof->sm_max_mhz, prof->mem_mhz, prof->mem_max_mhz,
                prof->clock_scale);
    else
        fprintf(out, "; clocks unknown (no scaling)\n");
    int width = 24;
    for (int k = 0; k < n; k++)
        if ((int)strlen(kp->kernels[k].name) > width)
            width = (int)strlen(kp->kernels[k].name);
    fprintf(out, "%-*s %-9s %9s %6s %8s %9s %9s %6s %6s %8s %-7s %-6s %s\n",
            width, "kernel", "category", "time_us", "%time", "launches", "GFLOP/s", "GB/s",
            "%pkF", "%pkBW",
            "FLOP/B", "bound", "lines", "ops");
    for (int i = 0; i < n; i++) {
        int k = order[i];
        const kir_kernel *kern = &kp->kernels[k];
        mc_kernel_rates r = mc_profile_kernel_rates(prof, k);
        double t = prof->time_us[k];
        char ops[256], lines[128];
        fprintf(out, "%-*s %-9s", width, kern->name, category_name(kern->category));
        if (isnan(t))
            fprintf(out, " %9s", "-");
        else
            fprintf(out, " %9.2f", t);
        print_number(out, 6, t > 0 && kernel_us > 0 ? 100.0 * t / kernel_us : -1, 1);
        fprintf(out, " %8d", prof->launches[k]);
        print_number(out, 9, t > 0 ? r.flops_per_s * 1e-9 : -1, 2);
        print_number(out, 9, t > 0 ? r.bytes_per_s * 1e-9 : -1, 2);
        print_number(out, 6, r.pct_peak_flops > 0 ? r.pct_peak_flops : -1, 1);
        print_number(out, 6, r.pct_peak_bw > 0 ? r.pct_peak_bw : -1, 1);
        fprintf(out, " %8.2f %-7s %-6s %s%s\n", r.intensity, r.bound,
                lines_string(kern, lines, sizeof lines), ops_string(kern, ops, sizeof ops),
                suspect(prof, k, &r));
    }
    free(order);
    /* By category: where the time (or, unmeasured, the traffic) goes. */
    for (int c = KIR_POINTWISE; c <= KIR_ATTENTION; c++) {
        int count = 0;
        double us = 0;
        int64_t cb = 0, cf = 0;
        for (int k = 0; k < n; k++) {
            if (kp->kernels[k].category != (kir_category)c)
                continue;
            count++;
            us += prof->time_us[k] > 0 ? prof->time_us[k] : 0;
            cb += kp->kernels[k].bytes;
            cf += kp->kernels[k].flops;
        }
        if (!count)
            continue;
        fprintf(out, "%-10s %3d kernels", category_name((kir_category)c), count);
        if (timed)
            fprintf(out, ", %10.2f us (%5.1f%%)", us, kernel_us > 0 ? 100.0 * us / kernel_us : 0.0);
        fprintf(out, ", %lld FLOPs, %lld bytes\n", (long long)cf, (long long)cb);
    }
    fprintf(out, "totals: %d kernels, %d launches per run, %lld FLOPs, %lld bytes moved\n", n,
            launches, (long long)flops, (long long)bytes);
    if (timed)
        fprintf(out, "        kernel time %.2f us (%s), ", kernel_us,
                prof->clock[0] ? prof->clock : "backend timer");
    else
        fprintf(out, "        kernel time not measured by the %s backend, ", p->backend->name);
    if (!isnan(prof->wall_us))
        fprintf(out, "wall time %.2f us per run", prof->wall_us);
    if (timed && prof->wall_us > 0) {
        double busy = 100.0 * kernel_us / prof->wall_us;
        fprintf(out, ", device busy %.1f%%%s", busy,
                busy > 100 ? " (suspect: kernels timed one by one took longer than whole runs)" : "");
    }
    fprintf(out, "\n        peak memory %lld bytes, compile %.1f ms\n",
            (long long)mc_profile_peak_memory(p), p->compile_ms);
}

/* ---- JSON ---------------------------------------------------------------------------------- */

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_number(FILE *f, double x)
{
    if (isfinite(x) && x >= 0)
        fprintf(f, "%.6g", x);
    else
        fputs("null", f);
}

static mc_status write_json(FILE *f, void *ctx)
{
    const mc_profile *prof = ctx;
    const mc_program *p = prof->program;
    const kir_program *kp = p->kp;
    fprintf(f, "{ \"backend\": ");
    json_string(f, p->backend->name);
    fprintf(f, ", \"device\": ");
    json_string(f, prof->device[0] ? prof->device : "host");
    fprintf(f, ", \"fused\": %s, \"iters\": %d, \"peaks_source\": ", p->opt.fuse ? "true" : "false",
            prof->iters);
    json_string(f, prof->peaks_source ? prof->peaks_source : "none");
    if (prof->clocks_known)
        fprintf(f, ", \"clocks\": { \"sm_mhz\": %.0f, \"sm_max_mhz\": %.0f, \"mem_mhz\": %.0f, "
                   "\"mem_max_mhz\": %.0f, \"scale\": %.6g }",
                prof->sm_mhz, prof->sm_max_mhz, prof->mem_mhz, prof->mem_max_mhz, prof->clock_scale);
    else
        fprintf(f, ", \"clocks\": null");
    fprintf(f, ",\n  \"kernels\": [");
    double kernel_us = 0;
    bool timed = false;
    int launches = 0;
    for (int k = 0; k < prof->nkernels; k++) {
        const kir_kernel *kern = &kp->kernels[k];
        mc_kernel_rates r = mc_profile_kernel_rates(prof, k);
        double t = prof->time_us[k];
        if (!isnan(t)) {
            kernel_us += t;
            timed = true;
        }
        launches += prof->launches[k];
        fprintf(f, "%s\n    { \"name\": ", k ? "," : "");
        json_string(f, kern->name);
        fprintf(f, ", \"category\": ");
        json_string(f, category_name(kern->category));
        fprintf(f, ", \"ops\": [");
        for (int i = 0; i < kern->nops; i++) {
            fprintf(f, "%s", i ? ", " : "");
            json_string(f, mc_op_table[kern->ops[i]].name);
        }
        fprintf(f, "], \"lines\": [");
        for (int i = 0; i < kern->nlines; i++)
            fprintf(f, "%s%d", i ? ", " : "", kern->lines[i]);
        fprintf(f, "], \"launches\": %d, \"time_us\": ", prof->launches[k]);
        if (isfinite(t))
            fprintf(f, "%.6g", t); /* even when suspect: never hidden */
        else
            fputs("null", f);
        fprintf(f, ", \"flops\": %lld, \"bytes\": %lld, \"pct_peak_flops\": ",
                (long long)kern->flops, (long long)kern->bytes);
        json_number(f, prof->peak_flops[k] > 0 && t > 0 ? r.pct_peak_flops : -1);
        fprintf(f, ", \"pct_peak_bw\": ");
        json_number(f, prof->peak_bytes_per_s > 0 && t > 0 ? r.pct_peak_bw : -1);
        fprintf(f, ", \"intensity\": ");
        json_number(f, r.intensity);
        fprintf(f, ", \"bound\": ");
        json_string(f, r.bound);
        if (suspect(prof, k, &r)[0])
            fprintf(f, ", \"suspect\": true");
        fprintf(f, " }");
    }
    fprintf(f, "\n  ],\n  \"totals\": { \"kernels\": %d, \"launches_per_run\": %d, \"kernel_time_us\": ",
            prof->nkernels, launches);
    json_number(f, timed ? kernel_us : -1);
    fprintf(f, ", \"wall_time_us\": ");
    json_number(f, prof->wall_us);
    fprintf(f, ", \"peak_memory_bytes\": %lld, \"compile_ms\": ",
            (long long)mc_profile_peak_memory(p));
    json_number(f, p->compile_ms);
    fprintf(f, " } }\n");
    return MC_OK;
}

/* Written to a temporary name and renamed (mc_file_write_atomic): never a partial file. */
mc_status mc_profile_write_json(const mc_profile *prof, const char *path)
{
    return mc_file_write_atomic(path, write_json, (void *)prof);
}

/* ---- trace --------------------------------------------------------------------------------- */

static mc_status write_trace(FILE *f, void *ctx)
{
    const mc_profile *prof = ctx;
    const mc_program *p = prof->program;
    const kir_program *kp = p->kp;
    int measured = 0;
    for (int k = 0; k < prof->nkernels; k++)
        measured += !isnan(prof->time_us[k]);
    fprintf(f, "{ \"displayTimeUnit\": \"ns\",\n  \"otherData\": { \"backend\": ");
    json_string(f, p->backend->name);
    fprintf(f, ", \"device\": ");
    json_string(f, prof->device[0] ? prof->device : "host");
    fprintf(f, ", \"iters\": %d, \"kernels_timed\": %d, \"kernels\": %d },\n", prof->iters,
            measured, prof->nkernels);
    fprintf(f, "  \"traceEvents\": [\n"
               "    { \"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 0, \"args\": { \"name\": \"minic\" } },\n"
               "    { \"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 1, \"args\": { \"name\": \"host\" } },\n"
               "    { \"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 2, \"args\": { \"name\": \"device\" } }");
    double wall = isfinite(prof->wall_us) && prof->wall_us > 0 ? prof->wall_us : 0;
    fprintf(f, ",\n    { \"name\": \"run\", \"cat\": \"host\", \"ph\": \"X\", \"ts\": 0, \"dur\": %.3f, "
               "\"pid\": 1, \"tid\": 1, \"args\": { \"median_of\": %d } }",
            wall, prof->iters);
    double ts = 0;
    for (int k = 0; k < prof->nkernels; k++) {
        const kir_kernel *kern = &kp->kernels[k];
        double t = prof->time_us[k];
        if (!(t > 0))
            continue; /* unmeasured (or a suspect time, which the table shows) */
        fprintf(f, ",\n    { \"name\": ");
        json_string(f, kern->name);
        fprintf(f, ", \"cat\": ");
        json_string(f, category_name(kern->category));
        fprintf(f, ", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, \"pid\": 1, \"tid\": 2, "
                   "\"args\": { \"flops\": %lld, \"bytes\": %lld, \"launches\": %d } }",
                ts, t, (long long)kern->flops, (long long)kern->bytes, prof->launches[k]);
        ts += t;
    }
    fprintf(f, "\n  ] }\n");
    return MC_OK;
}

/* Written to a temporary name and renamed (mc_file_write_atomic): never a partial file. */
mc_status mc_profile_write_trace(const mc_profile *prof, const char *path)
{
    return mc_file_write_atomic(path, write_trace, (void *)prof);
}

/* ---- roofline ------------------------------------------------------------------------------ */

static double log_floor10(double x) { return pow(10, floor(log10(x))); }
static double log_ceil10(double x) { return pow(10, ceil(log10(x))); }

static mc_status write_roofline(FILE *f, void *ctx)
{
    const mc_profile *prof = ctx;
    const kir_program *kp = prof->program->kp;
    /* Axis ranges (log-log): intensity in FLOP/byte, rate in FLOP/s. */
    double xmin = INFINITY, xmax = 0, ymin = INFINITY, ymax = 0, peak_max = 0, peak_min = INFINITY;
    for (int k = 0; k < prof->nkernels; k++) {
        mc_kernel_rates r = mc_profile_kernel_rates(prof, k);
        if (r.intensity > 0) {
            xmin = fmin(xmin, r.intensity);
            xmax = fmax(xmax, r.intensity);
        }
        if (r.flops_per_s > 0) {
            ymin = fmin(ymin, r.flops_per_s);
            ymax = fmax(ymax, r.flops_per_s);
        }
        peak_max = fmax(peak_max, prof->peak_flops[k]);
        if (prof->peak_flops[k] > 0)
            peak_min = fmin(peak_min, prof->peak_flops[k]);
    }
    double bw = prof->peak_bytes_per_s;
    if (peak_max > 0 && bw > 0) { /* every roof's ridge point inside the plot */
        xmin = fmin(xmin, peak_min / bw);
        xmax = fmax(xmax, peak_max / bw);
        ymax = fmax(ymax, peak_max);
    }
    if (!(xmin < INFINITY)) xmin = 0.1;
    if (!(xmax > 0)) xmax = 10;
    if (!(ymin < INFINITY)) ymin = 1e6;
    if (!(ymax > 0)) ymax = 1e12;
    xmin = log_floor10(xmin / 2), xmax = log_ceil10(xmax * 2);
    ymin = log_floor10(ymin / 2), ymax = log_ceil10(ymax * 2);

    const double W = 900, H = 600, L = 90, R = 260, T = 50, B = 70; /* plot margins */
    const double pw = W - L - R, ph = H - T - B;
#define SX(x) (L + pw * (log10(x) - log10(xmin)) / (log10(xmax) - log10(xmin)))
#define SY(y) (T + ph * (1 - (log10(y) - log10(ymin)) / (log10(ymax) - log10(ymin))))
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"24\" font-size=\"15\">Roofline: %s on ", L,
            prof->program->backend->name);
    {
        const char *d = prof->device[0] ? prof->device : "host";
        for (; *d; d++)
            fprintf(f, *d == '<' ? "&lt;" : *d == '&' ? "&amp;" : *d == '>' ? "&gt;" : "%c", *d);
    }
    fprintf(f, " (%s)</text>\n", prof->program->opt.fuse ? "fused" : "unfused");
    fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"black\"/>\n",
            L, T, pw, ph);
    for (double x = xmin; x <= xmax * 1.001; x *= 10)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#ddd\"/>"
                   "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%g</text>\n",
                SX(x), T, SX(x), T + ph, SX(x), T + ph + 16, x);
    for (double y = ymin; y <= ymax * 1.001; y *= 10)
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                   "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                L, SY(y), L + pw, SY(y), L - 6, SY(y) + 4, y / 1e9);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">arithmetic intensity (FLOP/byte)</text>\n",
            L + pw / 2, H - 24);
    fprintf(f, "<text transform=\"translate(24 %.0f) rotate(-90)\" text-anchor=\"middle\">GFLOP/s</text>\n",
            T + ph / 2);
    /* One roof per distinct compute peak: min(peak, intensity * bandwidth). */
    if (bw > 0) {
        double drawn[8];
        int ndrawn = 0;
        for (int k = 0; k < prof->nkernels; k++) {
            double peak = prof->peak_flops[k];
            bool seen = !(peak > 0);
            for (int i = 0; i < ndrawn && !seen; i++)
                seen = drawn[i] == peak;
            if (seen || ndrawn == 8)
                continue;
            drawn[ndrawn++] = peak;
            double ridge = peak / bw, x0 = fmax(xmin, ymin / bw);
            fprintf(f, "<polyline fill=\"none\" stroke=\"#c33\" stroke-width=\"2\" points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\"/>"
                       "<text x=\"%.1f\" y=\"%.1f\" fill=\"#c33\">%.1f TFLOP/s</text>\n",
                    SX(x0), SY(x0 * bw), SX(ridge), SY(peak), SX(xmax), SY(peak), SX(xmax) - 4 - 80,
                    SY(peak) - 6, peak / 1e12);
        }
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" fill=\"#c33\">memory: %.0f GB/s</text>\n", L + 8,
                T + 16, bw / 1e9);
    } else {
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" fill=\"#c33\">device peaks unknown: no roof</text>\n",
                L + 8, T + 16);
    }
    /* Kernels: a point each (at the left edge when they do no arithmetic), and a legend. */
    static const char *colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                                   "#e377c2", "#17becf", "#bcbd22"};
    int legend = 0;
    for (int k = 0; k < prof->nkernels; k++) {
        mc_kernel_rates r = mc_profile_kernel_rates(prof, k);
        const char *c = colors[k % 8];
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" fill=\"%s\">%d %s%s</text>\n", W - R + 12,
                T + 14.0 * legend++, c, k, kp->kernels[k].name,
                isnan(prof->time_us[k]) ? " (not timed)" : r.flops_per_s > 0 ? "" : " (no FLOPs)");
        if (!(r.flops_per_s > 0))
            continue;
        double x = r.intensity > 0 ? r.intensity : xmin;
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"><title>%s: %.3g GFLOP/s, "
                   "%.3g FLOP/B</title></circle><text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">%d</text>\n",
                SX(x), SY(r.flops_per_s), c, kp->kernels[k].name, r.flops_per_s / 1e9, r.intensity,
                SX(x) + 7, SY(r.flops_per_s) - 5, c, k);
    }
#undef SX
#undef SY
    fprintf(f, "</svg>\n");
    return MC_OK;
}

/* Written to a temporary name and renamed (mc_file_write_atomic): never a partial file. */
mc_status mc_profile_write_roofline(const mc_profile *prof, const char *path)
{
    return mc_file_write_atomic(path, write_roofline, (void *)prof);
}
