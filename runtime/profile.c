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

/* Is kernel k one of a run's? The prep kernels (kir/kir.h, "Prep kernels") run when the params
 * are bound, not in a run: the profile neither times nor lists them (a line says how many). */
static bool per_run(const mc_profile *prof, int k) { return !prof->program->kp->kernels[k].prep; }

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
        prof->launches[k] = per_run(prof, k) ? 1 : 0;
        prof->time_us[k] = NAN;
    }
    prof->wall_us = NAN;
    prof->kernel_sum_us = NAN;
    prof->peaks_source = "none";
    prof->clock_scale = 1;
    return MC_OK;
}

void mc_profile_release(mc_profile *prof)
{
    free(prof->launches);
    free(prof->time_us);
    free(prof->peak_flops);
    free(prof->events);
    free(prof->run_span_us);
    prof->launches = NULL;
    prof->time_us = prof->peak_flops = NULL;
    prof->events = NULL;
    prof->run_span_us = NULL;
    prof->nevents = 0;
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
            if (!per_run(prof, k))
                continue;
            double t0 = mc_now_ms();
            st = p->backend->run_kernel(p, k);
            t[(size_t)k * (size_t)iters + (size_t)i] = (mc_now_ms() - t0) * 1000.0;
        }
    for (int k = 0; k < n && st == MC_OK; k++)
        if (per_run(prof, k)) {
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

/* Host backends: `iters` ordinary runs after a warm-up, the backend storing the host clock
 * around every kernel (p->kernel_clock). The wall time, every kernel's time and the trace
 * all come from these same runs. false in *recorded when the backend stored no clocks. */
static mc_status collect_host_runs(mc_program *p, int iters, mc_profile *prof, bool *recorded)
{
    int n = prof->nkernels;
    size_t nk = n > 0 ? (size_t)n : 1;
    double *clock = malloc(2 * nk * sizeof *clock);
    double *t = malloc((size_t)iters * nk * sizeof *t);
    double *wall = malloc((size_t)iters * sizeof *wall);
    mc_profile_event *ev = calloc((size_t)iters * nk, sizeof *ev);
    double *span = calloc(2 * (size_t)iters, sizeof *span);
    *recorded = false;
    mc_status st = MC_OK;
    if (!clock || !t || !wall || !ev || !span)
        st = mc_fail(MC_ERR_SYSTEM, "out of memory");
    if (st == MC_OK)
        st = mc_program_run(p); /* warm-up: pages touched, caches and threads awake */
    double base = 0;
    int nev = 0;
    bool all = true;
    for (int i = 0; i < iters && st == MC_OK; i++) {
        for (size_t k = 0; k < 2 * nk; k++)
            clock[k] = NAN;
        p->kernel_clock = clock;
        double t0 = mc_now_ms();
        st = mc_program_run(p);
        double t1 = mc_now_ms();
        p->kernel_clock = NULL;
        if (i == 0)
            base = t0;
        wall[i] = (t1 - t0) * 1000.0;
        span[2 * i] = (t0 - base) * 1000.0;
        span[2 * i + 1] = (t1 - base) * 1000.0;
        for (int k = 0; k < n; k++) {
            if (!per_run(prof, k))
                continue;
            double a = clock[2 * k], b = clock[2 * k + 1];
            all = all && isfinite(a) && isfinite(b);
            t[(size_t)k * (size_t)iters + (size_t)i] = (b - a) * 1000.0;
            if (isfinite(a) && isfinite(b))
                ev[nev++] = (mc_profile_event){.kernel = k, .run = i, .start_us = (a - base) * 1000.0,
                                               .end_us = (b - base) * 1000.0};
        }
    }
    p->kernel_clock = NULL;
    if (st == MC_OK && all && n > 0) {
        *recorded = true;
        prof->wall_us = mc_median(wall, iters); /* (mc_median sorts: medians last) */
        for (int i = 0; i < iters; i++) { /* wall[i] becomes run i's kernel time */
            wall[i] = 0;
            for (int k = 0; k < n; k++)
                wall[i] += per_run(prof, k) ? t[(size_t)k * (size_t)iters + (size_t)i] : 0;
        }
        prof->kernel_sum_us = mc_median(wall, iters);
        for (int k = 0; k < n; k++)
            if (per_run(prof, k)) {
                prof->time_us[k] = mc_median(&t[(size_t)k * (size_t)iters], iters);
                prof->launches[k] = 1;
            }
        snprintf(prof->wall_clock, sizeof prof->wall_clock, "host clock, the same runs");
        free(prof->events);
        free(prof->run_span_us);
        prof->events = ev;
        prof->nevents = nev;
        prof->run_span_us = span;
        ev = NULL;
        span = NULL;
        if (!prof->device[0])
            host_cpu_name(prof->device, sizeof prof->device);
        snprintf(prof->clock, sizeof prof->clock, "host clock in ordinary runs");
        snprintf(prof->run_clock, sizeof prof->run_clock, "host clock around each run");
    }
    free(clock);
    free(t);
    free(wall);
    free(ev);
    free(span);
    return st;
}

mc_status mc_profile_collect(mc_program *p, int iters, mc_profile *prof)
{
    if (iters < 1)
        iters = 1;
    prof->iters = iters;
    bool recorded = false;
    mc_status st = MC_OK;
    /* A rank of a tensor-parallel program runs only with the others: its mc_program_run runs
     * them all (runtime/parallel.c), the backend's own timers of one program would not. */
    bool rank = p->parent && p->nranks > 1;
    if (p->backend->runs_on_host && !p->backend->profile)
        st = collect_host_runs(p, iters, prof, &recorded);
    if (st == MC_OK && !recorded) {
        /* The wall time as `minic run --iters` measures it: the backend's own timer of whole
         * runs where it has one (CUDA events around each replay), else the host clock. */
        if (p->backend->time && !rank) {
            st = p->backend->time(p, iters, &prof->wall_us);
            snprintf(prof->wall_clock, sizeof prof->wall_clock, "backend timer, as minic run");
        } else if (p->backend->time && p->parent->par) {
            st = mc_parallel_time(p->parent, iters, NULL, &prof->wall_us);
            snprintf(prof->wall_clock, sizeof prof->wall_clock,
                     "backend timer on every rank at once, the slowest rank's, as minic run");
        } else {
            st = mc_time_median(run_program, p, iters, &prof->wall_us);
            snprintf(prof->wall_clock, sizeof prof->wall_clock, "host clock");
        }
    }
    if (st == MC_OK && !recorded && rank && p->backend->profile && p->parent->par)
        st = mc_parallel_time(p->parent, iters, prof, NULL);
    else if (st == MC_OK && !recorded && rank)
        snprintf(prof->clock, sizeof prof->clock, "not measured: the %s backend times one rank of a "
                 "tensor-parallel program only with the host clock around whole runs", p->backend->name);
    else if (st == MC_OK && !recorded && p->backend->profile)
        st = p->backend->profile(p, iters, prof);
    else if (st == MC_OK && !recorded && p->backend->run_kernel)
        st = time_kernels_on_host(p, iters, prof);
    for (int k = 0; k < prof->nkernels; k++)
        if (!per_run(prof, k)) { /* whatever a backend's timer left there */
            prof->time_us[k] = NAN;
            prof->launches[k] = 0;
        }
    if (st == MC_OK)
        mc_peaks_apply(prof); /* measured ceilings, clock scaling (runtime/peaks.c) */
    return st;
}

double mc_profile_bw_peak(const mc_profile *prof, int k, int64_t *size)
{
    int64_t bytes = prof->program->kp->kernels[k].bytes;
    if (size)
        *size = 0;
    for (int s = 0; s < prof->nbw_sizes; s++)
        if ((double)bytes <= prof->bw_size_bytes[s] && prof->bw_size_bytes_per_s[s] > 0) {
            if (size)
                *size = (int64_t)prof->bw_size_bytes[s];
            return fmax(prof->bw_size_bytes_per_s[s], prof->peak_bytes_per_s);
        }
    return prof->peak_bytes_per_s;
}

mc_kernel_rates mc_profile_kernel_rates(const mc_profile *prof, int k)
{
    const kir_kernel *kern = &prof->program->kp->kernels[k];
    mc_kernel_rates r = {.bound = "unknown"};
    if (kern->bytes > 0)
        r.intensity = (double)kern->flops / (double)kern->bytes;
    double t = prof->time_us[k];
    if (kern->category == KIR_COLLECTIVE) {
        const kir_view *in = &kern->views[kern->coll.in];
        int n = prof->program->nranks > 1 ? prof->program->nranks : 1;
        r.coll_bytes = kern->coll.count * (int64_t)mc_dtype_size(prof->program->kp->buffers[in->buffer].dtype);
        r.ranks = n;
        r.bound = "link";
        if (t > 0) {
            r.algbw = (double)r.coll_bytes / (t * 1e-6);
            r.busbw = r.algbw * 2.0 * (n - 1) / n;
            r.bytes_per_s = (double)kern->bytes / (t * 1e-6);
        }
        return r; /* no FLOP or memory roof: its roof is the link between the ranks */
    }
    if (!(t > 0))
        return r;
    r.flops_per_s = (double)kern->flops / (t * 1e-6);
    r.bytes_per_s = (double)kern->bytes / (t * 1e-6);
    double pf = prof->peak_flops[k], pb = mc_profile_bw_peak(prof, k, NULL);
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
    case KIR_COLLECTIVE: return "collective";
    }
    return "?";
}

/* The category the profile shows (docs/FORMAT.md §5): the kernel IR's, except that the GEMM
 * that computes a graph's `conv` is `conv` (its im2col copies stay `copy`). */
static const char *kernel_category(const kir_kernel *k)
{
    if (k->category == KIR_GEMM)
        for (int i = 0; i < k->nops; i++)
            if (k->ops[i] == MC_OP_CONV)
                return "conv";
    return category_name(k->category);
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

/* The length of a kernel's name without its trailing "_<digits>" (its position in the list). */
size_t mc_profile_base_name_len(const char *name)
{
    size_t n = strlen(name), i = n;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9')
        i--;
    return i < n && i > 1 && name[i - 1] == '_' ? i - 1 : n;
}

/* A hash of the kernel's code as kir_print_kernel shows it, without its first two lines (name;
 * operators, graph lines and counts, compared apart) and with buffer numbers ("b17") erased:
 * two layers' kernels differ only in which buffers they use and where they were written. */
static uint64_t code_hash(const kir_program *kp, const kir_kernel *k)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return 0;
    kir_print_kernel(kp, k, NULL, f);
    fclose(f);
    if (!text)
        return 0;
    size_t o = 0;
    const char *c = strchr(text, '\n'); /* the name line, then ops and graph lines */
    c = c ? strchr(c + 1, '\n') : NULL;
    for (c = c ? c + 1 : text; *c; c++) {
        if (*c == 'b' && c[1] >= '0' && c[1] <= '9' && (c == text || !((c[-1] >= 'a' && c[-1] <= 'z') ||
                                                                     (c[-1] >= 'A' && c[-1] <= 'Z') ||
                                                                     (c[-1] >= '0' && c[-1] <= '9') || c[-1] == '_'))) {
            text[o++] = 'b';
            while (c[1] >= '0' && c[1] <= '9')
                c++;
            continue;
        }
        text[o++] = *c;
    }
    uint64_t h = mc_hash64(text, o, 0x67726f7570ULL);
    free(text);
    return h;
}

/* Kernels that are the same code on the same shapes (a repeated layer): the same name up to
 * its index, category, operators, FLOPs, bytes and code (code_hash). group[k] = the first
 * kernel of k's group. */
void mc_profile_group_of(const mc_profile *prof, int *group)
{
    const kir_program *kp = prof->program->kp;
    uint64_t *h = calloc(prof->nkernels > 0 ? (size_t)prof->nkernels : 1, sizeof *h);
    for (int k = 0; k < prof->nkernels && h; k++)
        h[k] = code_hash(kp, &kp->kernels[k]);
    for (int k = 0; k < prof->nkernels; k++) {
        const kir_kernel *a = &kp->kernels[k];
        group[k] = k;
        for (int j = 0; j < k && h; j++) {
            const kir_kernel *b = &kp->kernels[j];
            size_t la = mc_profile_base_name_len(a->name);
            if (group[j] != j || h[j] != h[k] || la != mc_profile_base_name_len(b->name) ||
                per_run(prof, j) != per_run(prof, k) ||
                strncmp(a->name, b->name, la) != 0 ||
                a->category != b->category || a->flops != b->flops || a->bytes != b->bytes ||
                a->nops != b->nops || memcmp(a->ops, b->ops, (size_t)a->nops * sizeof *a->ops) != 0)
                continue;
            group[k] = j;
            break;
        }
    }
    free(h);
}

typedef struct group_sum {
    int first, count;
    int same_name; /* 1 + the number of earlier groups with the same base name */
    double time_us; /* NaN: some member not timed */
    int launches;
} group_sum;

/* The groups in kernel order; returns how many (sums has room for nkernels). */
static int sum_groups(const mc_profile *prof, const int *group, group_sum *sums)
{
    int n = 0;
    for (int k = 0; k < prof->nkernels; k++) {
        if (!per_run(prof, k))
            continue;
        int g = 0;
        while (g < n && sums[g].first != group[k])
            g++;
        if (g == n) {
            const kir_kernel *a = &prof->program->kp->kernels[group[k]];
            int same = 1;
            for (int j = 0; j < n; j++) {
                const kir_kernel *b = &prof->program->kp->kernels[sums[j].first];
                same += mc_profile_base_name_len(a->name) == mc_profile_base_name_len(b->name) &&
                        !strncmp(a->name, b->name, mc_profile_base_name_len(a->name));
            }
            sums[n++] = (group_sum){.first = group[k], .same_name = same};
        }
        sums[g].count++;
        sums[g].time_us += prof->time_us[k];
        sums[g].launches += prof->launches[k];
    }
    return n;
}

/* "gemm_bias_add", and "gemm_bias_add#2" for a second group of that name on other shapes. */
static void group_name(const kir_kernel *first, int same_name, char *buf, size_t size)
{
    if (same_name > 1)
        snprintf(buf, size, "%.*s#%d", (int)mc_profile_base_name_len(first->name), first->name, same_name);
    else
        snprintf(buf, size, "%.*s", (int)mc_profile_base_name_len(first->name), first->name);
}

static int by_group_time(const void *a, const void *b)
{
    const group_sum *x = a, *y = b;
    double tx = isnan(x->time_us) ? -INFINITY : x->time_us, ty = isnan(y->time_us) ? -INFINITY : y->time_us;
    if (tx != ty)
        return (tx < ty) - (tx > ty);
    return (x->first > y->first) - (x->first < y->first);
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

/* The largest CPU cache in bytes (sysfs), 32 MiB when unknown. */
static int64_t last_level_cache_bytes(void)
{
    int64_t best = 0;
    for (int i = 0; i < 8; i++) {
        char path[128];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        long long v = 0;
        char unit = 0;
        if (fscanf(f, "%lld%c", &v, &unit) >= 1) {
            int64_t b = unit == 'K' ? v << 10 : unit == 'M' ? v << 20 : v;
            if (b > best)
                best = b;
        }
        fclose(f);
    }
    return best > 0 ? best : (int64_t)32 << 20;
}

/* Numbers that cannot be true are shown, and flagged with the reason, never hidden
 * (LESSONS.md). "" when nothing is suspect. */
static const char *suspect(const mc_profile *prof, int k, const mc_kernel_rates *r, char *buf,
                           size_t size)
{
    double t = prof->time_us[k];
    const kir_kernel *kern = &prof->program->kp->kernels[k];
    int64_t at = 0;
    buf[0] = '\0';
    if (!isnan(t) && t <= 0)
        snprintf(buf, size, "  (suspect: zero or negative time)");
    else if (r->pct_peak_bw > 100 && prof->nbw_sizes > 0 && (mc_profile_bw_peak(prof, k, &at), at > 0))
        snprintf(buf, size, "  (suspect: above the copy bandwidth measured for %lld bytes, which "
                 "hold its %lld; the time or the byte count is wrong)", (long long)at,
                 (long long)kern->bytes);
    else if (r->pct_peak_bw > 100 && !prof->program->backend->is_gpu &&
             kern->bytes <= last_level_cache_bytes())
        snprintf(buf, size, "  (above the memory peak: its %lld bytes fit in the CPU's caches, "
                 "faster than the DRAM copy bandwidth the peak measures)", (long long)kern->bytes);
    else if (r->pct_peak_bw > 100)
        snprintf(buf, size, "  (suspect: above the memory peak%s)",
                 prof->program->backend->is_gpu ? "; data resident in L2 can exceed DRAM bandwidth" : "");
    else if (r->pct_peak_flops > 100)
        snprintf(buf, size, "  (suspect: above the compute peak (%s); the peak or the count is wrong)",
                 prof->peaks_source ? prof->peaks_source : "none");
    return buf;
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
    int launches = 0, nrun = 0;
    int64_t flops = 0, bytes = 0;
    for (int k = 0; k < n; k++) {
        if (!per_run(prof, k))
            continue;
        nrun++;
        if (!isnan(prof->time_us[k])) {
            kernel_us += prof->time_us[k];
            timed = true;
        }
        launches += prof->launches[k];
        flops += kp->kernels[k].flops;
        bytes += kp->kernels[k].bytes;
    }
    if (timed && isfinite(prof->kernel_sum_us))
        kernel_us = prof->kernel_sum_us; /* the same runs as the wall time */
    fprintf(out, "profile: backend %s%s%s, %s, %d kernels, ", p->backend->name,
            prof->device[0] ? " on " : "", prof->device, p->opt.fuse ? "fused" : "unfused", nrun);
    if (p->nranks > 0) /* a rank of a tensor-parallel program, timed while every rank runs */
        fprintf(out, "rank %d of %d (tensor parallel), ", p->rank, p->nranks);
    fprintf(out, "median of %d runs after a warm-up\n", prof->iters);
    fprintf(out, "peaks: %s", prof->peaks_source ? prof->peaks_source : "none");
    if (prof->peaks_note[0])
        fprintf(out, " (%s)", prof->peaks_note);
    if (prof->nbw_sizes > 0) { /* the memory ceilings a small kernel is held to (%pkBW) */
        fprintf(out, "; memory by working set:");
        for (int s = 0; s < prof->nbw_sizes; s++)
            fprintf(out, " %.0f KiB %.1f GB/s,", prof->bw_size_bytes[s] / 1024,
                    prof->bw_size_bytes_per_s[s] * 1e-9);
        fprintf(out, " larger %.1f GB/s", prof->peak_bytes_per_s * 1e-9);
    }
    if (prof->clocks_known)
        fprintf(out, "; clocks: SM %.0f/%.0f MHz, memory %.0f/%.0f MHz (compute peaks x%.3f)\n",
                prof->sm_mhz, prof->sm_max_mhz, prof->mem_mhz, prof->mem_max_mhz,
                prof->clock_scale);
    else
        fprintf(out, "; clocks unknown (no scaling)\n");
    if (prof->clock[0])
        fprintf(out, "kernel times: %s\n", prof->clock);
    if (nrun < n)
        fprintf(out, "prep: %d kernels computed from the params alone run when the params are bound, not in "
                "every run (not listed; MINIC_HOIST_PARAMS=0 runs them in every run)\n", n - nrun);
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
        if (!per_run(prof, k))
            continue;
        mc_kernel_rates r = mc_profile_kernel_rates(prof, k);
        double t = prof->time_us[k];
        char ops[256], lines[128], why[256];
        fprintf(out, "%-*s %-9s", width, kern->name, kernel_category(kern));
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
        fprintf(out, " %8.2f %-7s %-6s %s%s", r.intensity, r.bound,
                lines_string(kern, lines, sizeof lines), ops_string(kern, ops, sizeof ops),
                suspect(prof, k, &r, why, sizeof why));
        if (kern->category == KIR_COLLECTIVE) {
            fprintf(out, "  (%lld bytes over %d ranks", (long long)r.coll_bytes, r.ranks);
            if (t > 0)
                fprintf(out, ": algbw %.2f GB/s, busbw %.2f GB/s", r.algbw * 1e-9, r.busbw * 1e-9);
            fprintf(out, ")");
        }
        fputc('\n', out);
    }
    free(order);
    /* The grouped view: a repeated layer's kernels as one row, xN. */
    int *group = calloc(n > 0 ? (size_t)n : 1, sizeof *group);
    group_sum *sums = calloc(n > 0 ? (size_t)n : 1, sizeof *sums);
    int ng = group && sums ? (mc_profile_group_of(prof, group), sum_groups(prof, group, sums)) : nrun;
    if (ng < nrun) {
        qsort(sums, (size_t)ng, sizeof *sums, by_group_time);
        fprintf(out, "grouped (the same code on the same shapes; %d groups of %d kernels):\n", ng, nrun);
        fprintf(out, "%-*s %6s %11s %6s %11s %9s %-7s %s\n", width, "group", "x", "time_us", "%time",
                "us/kernel", "GFLOP/s", "bound", "ops");
        for (int g = 0; g < ng; g++) {
            const kir_kernel *kern = &kp->kernels[sums[g].first];
            mc_kernel_rates r = mc_profile_kernel_rates(prof, sums[g].first);
            char ops[256], name[160];
            group_name(kern, sums[g].same_name, name, sizeof name);
            double t = sums[g].time_us;
            fprintf(out, "%-*s %5sx%d", width, name, "", sums[g].count);
            if (isnan(t))
                fprintf(out, " %11s %6s %11s", "-", "-", "-");
            else
                fprintf(out, " %11.2f %6.1f %11.2f", t, kernel_us > 0 ? 100.0 * t / kernel_us : 0.0,
                        t / sums[g].count);
            print_number(out, 9, t > 0 ? (double)kern->flops * sums[g].count / (t * 1e-6) * 1e-9 : -1, 2);
            fprintf(out, " %-7s %s\n", r.bound, ops_string(kern, ops, sizeof ops));
        }
    }
    free(group);
    free(sums);
    /* By category: where the time (or, unmeasured, the traffic) goes. */
    static const char *const categories[] = {"pointwise", "reduction", "gemm", "conv", "copy", "attention",
                                             "collective"};
    for (size_t c = 0; c < sizeof categories / sizeof categories[0]; c++) {
        int count = 0;
        double us = 0;
        int64_t cb = 0, cf = 0;
        for (int k = 0; k < n; k++) {
            if (!per_run(prof, k) || strcmp(kernel_category(&kp->kernels[k]), categories[c]))
                continue;
            count++;
            us += prof->time_us[k] > 0 ? prof->time_us[k] : 0;
            cb += kp->kernels[k].bytes;
            cf += kp->kernels[k].flops;
        }
        if (!count)
            continue;
        fprintf(out, "%-10s %3d kernels", categories[c], count);
        if (timed)
            fprintf(out, ", %10.2f us (%5.1f%%)", us, kernel_us > 0 ? 100.0 * us / kernel_us : 0.0);
        fprintf(out, ", %lld FLOPs, %lld bytes", (long long)cf, (long long)cb);
        if (!strcmp(categories[c], "collective")) { /* what the all-reduces moved, and at what rate overall */
            int64_t reduced = 0;
            int ranks = 1;
            for (int k = 0; k < n; k++)
                if (kp->kernels[k].category == KIR_COLLECTIVE) {
                    mc_kernel_rates r = mc_profile_kernel_rates(prof, k);
                    reduced += r.coll_bytes;
                    ranks = r.ranks;
                }
            fprintf(out, "; all-reduce of %lld bytes over %d ranks", (long long)reduced, ranks);
            if (timed && us > 0)
                fprintf(out, ", algbw %.2f GB/s, busbw %.2f GB/s", reduced / (us * 1e-6) * 1e-9,
                        reduced / (us * 1e-6) * 1e-9 * 2.0 * (ranks - 1) / ranks);
        }
        fputc('\n', out);
    }
    fprintf(out, "totals: %d kernels, %d launches per run, %lld FLOPs, %lld bytes moved\n", nrun,
            launches, (long long)flops, (long long)bytes);
    if (timed)
        fprintf(out, "        kernel time %.2f us (%s), ", kernel_us,
                prof->clock[0] ? prof->clock : "backend timer");
    else
        fprintf(out, "        kernel time not measured by the %s backend, ", p->backend->name);
    if (!isnan(prof->wall_us))
        fprintf(out, "wall time %.2f us per run (%s)", prof->wall_us,
                prof->wall_clock[0] ? prof->wall_clock : "host clock");
    if (timed && prof->wall_us > 0) {
        double busy = 100.0 * kernel_us / prof->wall_us;
        fprintf(out, ", device busy %.1f%%%s", busy,
                busy > 100 ? " (suspect: the kernel times add up to more than a whole run)" : "");
    }
    fprintf(out, "\n        peak memory %lld bytes, compile %.1f ms\n",
            (long long)mc_profile_peak_memory(p), p->compile_ms);
    if (p->ncompile_phases > 0) { /* where the compile went */
        fprintf(out, "        compile:");
        for (int i = 0; i < p->ncompile_phases; i++)
            fprintf(out, "%s %s %.1f ms", i ? "," : "", p->compile_phases[i].name, p->compile_phases[i].ms);
        fprintf(out, " (%d kernels compiled, the others from the cache)\n", p->kernels_compiled);
    }
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

/* Per kernel: its place among a run's kernels (what the JSON's `kernels`, `members` and the
 * trace's `kernel` count), or -1 for a prep kernel. malloc'd; NULL when out of memory. */
static int *run_positions(const mc_profile *prof, int *nrun)
{
    int *pos = malloc((size_t)(prof->nkernels > 0 ? prof->nkernels : 1) * sizeof *pos);
    *nrun = 0;
    for (int k = 0; pos && k < prof->nkernels; k++)
        pos[k] = per_run(prof, k) ? (*nrun)++ : -1;
    return pos;
}

/* "name", "category", "ops" and "lines" of a kernel's JSON object. */
static void json_kernel_names(FILE *f, const kir_kernel *kern)
{
    fprintf(f, "{ \"name\": ");
    json_string(f, kern->name);
    fprintf(f, ", \"category\": ");
    json_string(f, kernel_category(kern));
    fprintf(f, ", \"ops\": [");
    for (int i = 0; i < kern->nops; i++) {
        fprintf(f, "%s", i ? ", " : "");
        json_string(f, mc_op_table[kern->ops[i]].name);
    }
    fprintf(f, "], \"lines\": [");
    for (int i = 0; i < kern->nlines; i++)
        fprintf(f, "%s%d", i ? ", " : "", kern->lines[i]);
    fprintf(f, "]");
}

static mc_status write_json(FILE *f, void *ctx)
{
    const mc_profile *prof = ctx;
    const mc_program *p = prof->program;
    const kir_program *kp = p->kp;
    int nrun;
    int *pos = run_positions(prof, &nrun);
    if (!pos)
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    fprintf(f, "{ \"backend\": ");
    json_string(f, p->backend->name);
    fprintf(f, ", \"device\": ");
    json_string(f, prof->device[0] ? prof->device : "host");
    fprintf(f, ", \"fused\": %s, \"iters\": %d, \"ranks\": %d, \"rank\": %d, \"peaks_source\": ",
            p->opt.fuse ? "true" : "false", prof->iters, p->nranks > 0 ? p->nranks : 1, p->rank);
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
        if (pos[k] < 0)
            continue; /* a prep kernel: listed apart (below) */
        mc_kernel_rates r = mc_profile_kernel_rates(prof, k);
        double t = prof->time_us[k];
        if (!isnan(t)) {
            kernel_us += t;
            timed = true;
        }
        launches += prof->launches[k];
        fprintf(f, "%s\n    ", pos[k] ? "," : "");
        json_kernel_names(f, kern);
        fprintf(f, ", \"launches\": %d, \"time_us\": ", prof->launches[k]);
        if (isfinite(t))
            fprintf(f, "%.6g", t); /* even when suspect: never hidden */
        else
            fputs("null", f);
        fprintf(f, ", \"flops\": %lld, \"bytes\": %lld, \"pct_peak_flops\": ",
                (long long)kern->flops, (long long)kern->bytes);
        json_number(f, prof->peak_flops[k] > 0 && t > 0 ? r.pct_peak_flops : -1);
        fprintf(f, ", \"pct_peak_bw\": ");
        json_number(f, prof->peak_bytes_per_s > 0 && t > 0 ? r.pct_peak_bw : -1);
        fprintf(f, ", \"peak_bw_bytes_per_s\": ");
        double kpb = mc_profile_bw_peak(prof, k, NULL);
        json_number(f, kpb > 0 ? kpb : -1);
        fprintf(f, ", \"intensity\": ");
        json_number(f, r.intensity);
        fprintf(f, ", \"bound\": ");
        json_string(f, r.bound);
        if (kern->category == KIR_COLLECTIVE) {
            fprintf(f, ", \"collective\": { \"op\": \"allreduce\", \"ranks\": %d, \"bytes\": %lld, "
                       "\"algbw_gb_per_s\": ", r.ranks, (long long)r.coll_bytes);
            json_number(f, t > 0 ? r.algbw * 1e-9 : -1);
            fprintf(f, ", \"busbw_gb_per_s\": ");
            json_number(f, t > 0 ? r.busbw * 1e-9 : -1);
            fprintf(f, " }");
        }
        char why[256];
        if (suspect(prof, k, &r, why, sizeof why)[0]) {
            fprintf(f, ", \"suspect\": %s, \"note\": ", strstr(why, "suspect") ? "true" : "false");
            why[strlen(why) - 1] = '\0'; /* the note without the table's "  (" and ")" */
            json_string(f, why + 3);
        }
        fprintf(f, " }");
    }
    if (timed && isfinite(prof->kernel_sum_us))
        kernel_us = prof->kernel_sum_us;
    /* The kernels of params alone, which run when the params are bound, not in a run: never
     * timed by the profile (docs/FORMAT.md §5). */
    fprintf(f, "\n  ],\n  \"prep_kernels\": [");
    for (int k = 0, m = 0; k < prof->nkernels; k++)
        if (pos[k] < 0) {
            fprintf(f, "%s\n    ", m++ ? "," : "");
            json_kernel_names(f, &kp->kernels[k]);
            fprintf(f, ", \"flops\": %lld, \"bytes\": %lld }", (long long)kp->kernels[k].flops,
                    (long long)kp->kernels[k].bytes);
        }
    fprintf(f, "],\n  \"totals\": { \"kernels\": %d, \"prep_kernels\": %d, \"launches_per_run\": %d, "
               "\"kernel_time_us\": ", nrun, prof->nkernels - nrun, launches);
    json_number(f, timed ? kernel_us : -1);
    fprintf(f, ", \"wall_time_us\": ");
    json_number(f, prof->wall_us);
    fprintf(f, ", \"peak_memory_bytes\": %lld, \"compile_ms\": ",
            (long long)mc_profile_peak_memory(p));
    json_number(f, p->compile_ms);
    fprintf(f, ", \"compile_phases\": [");
    for (int i = 0; i < p->ncompile_phases; i++) {
        fprintf(f, "%s{ \"name\": ", i ? ", " : "");
        json_string(f, p->compile_phases[i].name);
        fprintf(f, ", \"ms\": ");
        json_number(f, p->compile_phases[i].ms);
        fprintf(f, " }");
    }
    fprintf(f, "], \"kernels_compiled\": %d", p->kernels_compiled);
    fprintf(f, ", \"wall_clock\": ");
    json_string(f, prof->wall_clock);
    fprintf(f, ", \"device_busy_pct\": ");
    json_number(f, timed && prof->wall_us > 0 ? 100.0 * kernel_us / prof->wall_us : -1);
    /* The peaks used: the largest compute peak (per-kernel ones differ by dtype and unit). */
    double pf = 0;
    for (int k = 0; k < prof->nkernels; k++)
        pf = fmax(pf, prof->peak_flops[k]);
    fprintf(f, " },\n  \"peaks\": { \"flops\": ");
    json_number(f, pf > 0 ? pf : -1);
    fprintf(f, ", \"bytes_per_s\": ");
    json_number(f, prof->peak_bytes_per_s > 0 ? prof->peak_bytes_per_s : -1);
    fprintf(f, ", \"source\": ");
    json_string(f, prof->peaks_source ? prof->peaks_source : "none");
    fprintf(f, ", \"note\": ");
    json_string(f, prof->peaks_note);
    fprintf(f, ", \"bytes_per_s_by_size\": [");
    for (int s = 0; s < prof->nbw_sizes; s++) {
        fprintf(f, "%s{ \"bytes\": %.0f, \"bytes_per_s\": ", s ? ", " : "", prof->bw_size_bytes[s]);
        json_number(f, prof->bw_size_bytes_per_s[s]);
        fprintf(f, " }");
    }
    fprintf(f, "]");
    fprintf(f, ", \"per_kernel_flops\": [");
    for (int k = 0; k < prof->nkernels; k++) {
        if (pos[k] < 0)
            continue;
        fprintf(f, "%s", pos[k] ? ", " : "");
        json_number(f, prof->peak_flops[k] > 0 ? prof->peak_flops[k] : -1);
    }
    fprintf(f, "] },\n  \"groups\": [");
    int n = prof->nkernels;
    int *group = calloc(n > 0 ? (size_t)n : 1, sizeof *group);
    group_sum *sums = calloc(n > 0 ? (size_t)n : 1, sizeof *sums);
    if (!group || !sums) {
        free(group);
        free(sums);
        free(pos);
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    }
    mc_profile_group_of(prof, group);
    int ng = sum_groups(prof, group, sums);
    for (int g = 0; g < ng; g++) {
        const kir_kernel *kern = &kp->kernels[sums[g].first];
        char name[160];
        group_name(kern, sums[g].same_name, name, sizeof name);
        fprintf(f, "%s\n    { \"name\": ", g ? "," : "");
        json_string(f, name);
        fprintf(f, ", \"kernels\": %d, \"launches\": %d, \"time_us\": ", sums[g].count,
                sums[g].launches);
        json_number(f, sums[g].time_us);
        fprintf(f, ", \"members\": [");
        for (int k = 0, m = 0; k < n; k++)
            if (group[k] == sums[g].first)
                fprintf(f, "%s%d", m++ ? ", " : "", pos[k]);
        fprintf(f, "] }");
    }
    free(group);
    free(sums);
    free(pos);
    fprintf(f, "\n  ],\n  \"minic_version\": ");
    json_string(f, MINIC_VERSION_STRING);
    fprintf(f, " }\n");
    return MC_OK;
}

/* Written to a temporary name and renamed (mc_file_write_atomic): never a partial file. */
mc_status mc_profile_write_json(const mc_profile *prof, const char *path)
{
    return mc_file_write_atomic(path, write_json, (void *)prof);
}

/* ---- trace --------------------------------------------------------------------------------- */

typedef struct lane_item {
    double start, end;
    int index;
} lane_item;

static int by_start(const void *a, const void *b)
{
    const lane_item *x = a, *y = b;
    if (x->start != y->start)
        return (x->start > y->start) - (x->start < y->start);
    if (x->end != y->end)
        return (x->end < y->end) - (x->end > y->end); /* the longer first */
    return (x->index > y->index) - (x->index < y->index);
}

int mc_profile_lanes(const mc_profile_event *ev, int n, int *lane)
{
    if (n <= 0)
        return 0;
    lane_item *item = malloc((size_t)n * sizeof *item);
    double *busy_until = malloc((size_t)n * sizeof *busy_until); /* per lane: its last end */
    if (!item || !busy_until) {
        free(item);
        free(busy_until);
        return -1;
    }
    for (int e = 0; e < n; e++)
        item[e] = (lane_item){.start = ev[e].start_us,
                              .end = ev[e].end_us > ev[e].start_us ? ev[e].end_us : ev[e].start_us,
                              .index = e};
    qsort(item, (size_t)n, sizeof *item, by_start);
    int lanes = 0;
    for (int i = 0; i < n; i++) {
        int l = 0;
        while (l < lanes && busy_until[l] > item[i].start)
            l++;
        if (l == lanes)
            lanes++;
        busy_until[l] = item[i].end;
        lane[item[i].index] = l;
    }
    free(item);
    free(busy_until);
    return lanes;
}

static void trace_thread(FILE *f, int tid, const char *name)
{
    fprintf(f, ",\n    { \"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"args\": { \"name\": ", tid);
    json_string(f, name);
    fprintf(f, " } },\n    { \"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, "
               "\"args\": { \"sort_index\": %d } }", tid, tid);
}

static mc_status write_trace(FILE *f, void *ctx)
{
    const mc_profile *prof = ctx;
    const mc_program *p = prof->program;
    const kir_program *kp = p->kp;
    int measured = 0, nrun;
    for (int k = 0; k < prof->nkernels; k++)
        measured += !isnan(prof->time_us[k]);
    int *pos = run_positions(prof, &nrun); /* the kernels' numbers in the JSON's list */
    if (!pos)
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    bool real = prof->events && prof->run_span_us;
    int *lane = NULL, lanes = 1;
    if (real) {
        lane = malloc((size_t)(prof->nevents > 0 ? prof->nevents : 1) * sizeof *lane);
        lanes = lane ? mc_profile_lanes(prof->events, prof->nevents, lane) : -1;
        if (lanes < 0) {
            free(lane);
            free(pos);
            return mc_fail(MC_ERR_SYSTEM, "out of memory");
        }
        lanes = lanes > 0 ? lanes : 1;
    }
    fprintf(f, "{ \"displayTimeUnit\": \"ns\",\n  \"otherData\": { \"backend\": ");
    json_string(f, p->backend->name);
    fprintf(f, ", \"device\": ");
    json_string(f, prof->device[0] ? prof->device : "host");
    fprintf(f, ", \"iters\": %d, \"kernels_timed\": %d, \"kernels\": %d, \"timestamps\": \"%s\", \"clock\": ",
            prof->iters, measured, nrun,
            real ? "real: every kernel of every measured run"
                 : "synthetic: median times laid end to end");
    json_string(f, prof->clock[0] ? prof->clock : "unknown");
    fprintf(f, ", \"run_clock\": ");
    json_string(f, real && prof->run_clock[0] ? prof->run_clock : real ? "the kernels' clock" : "none");
    fprintf(f, ", \"time_origin\": \"%s\", \"device_lanes\": %d },\n",
            real ? "the start of the first measured run" : "none", lanes);
    fprintf(f, "  \"traceEvents\": [\n"
               "    { \"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 0, \"args\": { \"name\": \"minic\" } }");
    trace_thread(f, 1, real ? "runs" : "run (synthetic)");
    trace_thread(f, 2, "device");
    for (int l = 1; l < lanes; l++) {
        char name[64];
        snprintf(name, sizeof name, "device, overlapping %d", l);
        trace_thread(f, 2 + l, name);
    }
    if (real) {
        /* Every measured run and every kernel in it, at the times they really ran: gaps stay
         * gaps, and a kernel that overlaps another goes to a lane of its own. */
        for (int i = 0; i < prof->iters; i++)
            fprintf(f, ",\n    { \"name\": \"run %d\", \"cat\": \"run\", \"ph\": \"X\", \"ts\": %.3f, "
                       "\"dur\": %.3f, \"pid\": 1, \"tid\": 1, \"args\": { \"run\": %d } }",
                    i, prof->run_span_us[2 * i], prof->run_span_us[2 * i + 1] - prof->run_span_us[2 * i], i);
        for (int e = 0; e < prof->nevents; e++) {
            const mc_profile_event *ev = &prof->events[e];
            const kir_kernel *kern = &kp->kernels[ev->kernel];
            fprintf(f, ",\n    { \"name\": ");
            json_string(f, kern->name);
            fprintf(f, ", \"cat\": ");
            json_string(f, kernel_category(kern));
            fprintf(f, ", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, \"pid\": 1, \"tid\": %d, "
                       "\"args\": { \"kernel\": %d, \"run\": %d, \"lane\": %d, \"offset_us\": %.3f",
                    ev->start_us, ev->end_us - ev->start_us, 2 + lane[e], pos[ev->kernel], ev->run, lane[e],
                    ev->run >= 0 && ev->run < prof->iters ? ev->start_us - prof->run_span_us[2 * ev->run] : 0.0);
            if (ev->function[0]) {
                fprintf(f, ", \"function\": ");
                json_string(f, ev->function);
            }
            if (e > 0 && prof->events[e - 1].run == ev->run) /* since the launch before ended */
                fprintf(f, ", \"gap_us\": %.3f", ev->start_us - prof->events[e - 1].end_us);
            fprintf(f, ", \"flops\": %lld, \"bytes\": %lld } }", (long long)kern->flops,
                    (long long)kern->bytes);
        }
    } else {
        /* No per-launch timestamps from this backend: one run of median times laid end to
         * end, marked as such in every event. */
        double wall = isfinite(prof->wall_us) && prof->wall_us > 0 ? prof->wall_us : 0;
        fprintf(f, ",\n    { \"name\": \"run\", \"cat\": \"run\", \"ph\": \"X\", \"ts\": 0, \"dur\": %.3f, "
                   "\"pid\": 1, \"tid\": 1, \"args\": { \"median_of\": %d, \"synthetic\": true } }",
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
            json_string(f, kernel_category(kern));
            fprintf(f, ", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, \"pid\": 1, \"tid\": 2, "
                       "\"args\": { \"kernel\": %d, \"flops\": %lld, \"bytes\": %lld, \"launches\": %d, "
                       "\"synthetic\": true } }",
                    ts, t, pos[k], (long long)kern->flops, (long long)kern->bytes, prof->launches[k]);
            ts += t;
        }
    }
    fprintf(f, "\n  ] }\n");
    free(lane);
    free(pos);
    return MC_OK;
}

/* Written to a temporary name and renamed (mc_file_write_atomic): never a partial file. */
mc_status mc_profile_write_trace(const mc_profile *prof, const char *path)
{
    return mc_file_write_atomic(path, write_trace, (void *)prof);
}
