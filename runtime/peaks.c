/* Device ceilings (see peaks.h and docs/PROFILING.md): the datasheet table, the measured-ceiling
 * cache, the CPU measurements of `minic peaks`, and how a profile's peaks are chosen and scaled.
 *
 * The cache is a small text file of `key value` lines per device name, so a person can read and
 * delete it; it is written to a temporary name and renamed. A ceiling is the best of several
 * short measurements (a slow repetition is the machine being busy, never the hardware being
 * faster than it is), and the spread between best and worst is kept beside it. An entry older
 * than the running binary, or measured on a machine with another number of CPUs, is measured
 * again on first use (mc_peaks_get), so a profile always has peaks without a manual step. The CPU FMA loop keeps
 * many independent vector accumulators so the FMA units, not their latency, set the rate; on
 * x86-64 it is compiled for AVX2+FMA and used only when the CPU has them.
 */
#include "runtime/peaks.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- datasheet ----------------------------------------------------------------------------- */

bool mc_peaks_datasheet(const char *device, double *f32, double *tf32, double *tc16, double *bw)
{
    *f32 = *tf32 = *tc16 = *bw = 0;
    if (!strncmp(device, "NVIDIA H100", 11) || !strncmp(device, "NVIDIA H200", 11)) {
        bool pcie = strstr(device, "PCIe") != NULL;
        *f32 = pcie ? 51.2e12 : 66.9e12;
        *tf32 = pcie ? 378e12 : 494e12;
        *tc16 = pcie ? 756e12 : 989e12;
        *bw = !strncmp(device, "NVIDIA H200", 11) ? 4.8e12 : pcie ? 2.0e12 : 3.35e12;
        return true;
    }
    if (!strncmp(device, "NVIDIA A100", 11)) {
        *f32 = 19.5e12;
        *tf32 = 156e12;
        *tc16 = 312e12;
        *bw = strstr(device, "80GB") ? 2.039e12 : 1.555e12;
        return true;
    }
    return false;
}

/* ---- cache --------------------------------------------------------------------------------- */

bool mc_peaks_path(const char *device, char *path, size_t size)
{
    char name[128];
    size_t n = 0;
    for (const char *c = device; *c && n + 1 < sizeof name; c++)
        name[n++] = (strchr("._-", *c) || (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') ||
                     (*c >= 'A' && *c <= 'Z'))
                        ? *c
                        : '_';
    name[n] = '\0';
    if (!n)
        snprintf(name, sizeof name, "host");
    char dir[4096];
    if (!mc_cache_dir("peaks", false, dir, sizeof dir))
        return false;
    int w = snprintf(path, size, "%s/%s.txt", dir, name);
    return w > 0 && (size_t)w < size;
}

static const char *gemm_key[MC_NUM_DTYPES] = {"gemm_f32_flops_per_s", "gemm_f16_flops_per_s",
                                              "gemm_bf16_flops_per_s", NULL, NULL};

static mc_status write_peaks(FILE *f, void *ctx)
{
    const mc_peaks *pk = ctx;
    fprintf(f, "device %s\nthreads %d\ncopy_bytes_per_s %.6g\nfma_flops_per_s %.6g\nsm_mhz %.6g\n",
            pk->device, pk->threads, pk->copy_bytes_per_s, pk->fma_flops_per_s, pk->sm_mhz);
    fprintf(f, "reps %d\ncopy_spread_pct %.3g\nfma_spread_pct %.3g\ngemm_spread_pct %.3g\n"
               "datasheet_fma_flops_per_s %.6g\ndisagrees %d\nonline_cpus %d\n",
            pk->reps, pk->copy_spread_pct, pk->fma_spread_pct, pk->gemm_spread_pct,
            pk->datasheet_fma_flops_per_s, pk->disagrees ? 1 : 0, pk->online_cpus);
    for (int d = 0; d < MC_NUM_DTYPES; d++)
        if (gemm_key[d])
            fprintf(f, "%s %.6g\n", gemm_key[d], pk->gemm_flops_per_s[d]);
    for (int s = 0; s < MC_PEAK_SIZES; s++)
        if (pk->size_bytes[s] > 0)
            fprintf(f, "copy_at %.0f %.6g\n", pk->size_bytes[s], pk->size_bytes_per_s[s]);
    return MC_OK;
}

mc_status mc_peaks_save(const mc_peaks *pk)
{
    char path[4096], dir[4096];
    if (!mc_peaks_path(pk->device, path, sizeof path))
        return mc_fail(MC_ERR_SYSTEM, "no cache directory (neither XDG_CACHE_HOME nor HOME is set)");
    if (!mc_cache_dir("peaks", true, dir, sizeof dir))
        return mc_fail(MC_ERR_SYSTEM, "%s: cannot create the directory: %s", dir, strerror(errno));
    return mc_file_write_atomic(path, write_peaks, (void *)pk);
}

/* A "copy_at BYTES RATE" line of the cache (its value part): kept where both numbers are
 * positive and finite and BYTES is above the sizes before it (an entry is untrusted). */
static void add_size(mc_peaks *pk, const char *v)
{
    char *end;
    double bytes = strtod(v, &end), rate = strtod(end, NULL);
    int s = 0;
    while (s < MC_PEAK_SIZES && pk->size_bytes[s] > 0)
        s++;
    if (s == MC_PEAK_SIZES || !isfinite(bytes) || !isfinite(rate) || !(bytes > 0) || !(rate > 0) ||
        bytes > 0x1p52 ||
        (s > 0 && !(bytes > pk->size_bytes[s - 1])))
        return;
    pk->size_bytes[s] = bytes;
    pk->size_bytes_per_s[s] = rate;
}

bool mc_peaks_load(const char *device, mc_peaks *pk)
{
    memset(pk, 0, sizeof *pk);
    char path[4096];
    if (!mc_peaks_path(device, path, sizeof path))
        return false;
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[512];
    bool named = false;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *v = strchr(line, ' ');
        if (!v)
            continue;
        *v++ = '\0';
        double x = strtod(v, NULL);
        if (!isfinite(x) || x < 0)
            x = 0;
        if (!strcmp(line, "device")) {
            named = !strcmp(v, device); /* two names may map to one file name */
            snprintf(pk->device, sizeof pk->device, "%s", v);
        } else if (!strcmp(line, "threads"))
            pk->threads = (int)fmin(x, 1 << 20);
        else if (!strcmp(line, "copy_bytes_per_s"))
            pk->copy_bytes_per_s = x;
        else if (!strcmp(line, "fma_flops_per_s"))
            pk->fma_flops_per_s = x;
        else if (!strcmp(line, "sm_mhz"))
            pk->sm_mhz = x;
        else if (!strcmp(line, "reps"))
            pk->reps = (int)fmin(x, 1 << 20);
        else if (!strcmp(line, "copy_spread_pct"))
            pk->copy_spread_pct = x;
        else if (!strcmp(line, "fma_spread_pct"))
            pk->fma_spread_pct = x;
        else if (!strcmp(line, "gemm_spread_pct"))
            pk->gemm_spread_pct = x;
        else if (!strcmp(line, "datasheet_fma_flops_per_s"))
            pk->datasheet_fma_flops_per_s = x;
        else if (!strcmp(line, "disagrees"))
            pk->disagrees = x != 0;
        else if (!strcmp(line, "online_cpus"))
            pk->online_cpus = (int)fmin(x, 1 << 20);
        else if (!strcmp(line, "copy_at"))
            add_size(pk, v);
        else
            for (int d = 0; d < MC_NUM_DTYPES; d++)
                if (gemm_key[d] && !strcmp(line, gemm_key[d]))
                    pk->gemm_flops_per_s[d] = x;
    }
    fclose(f);
    if (!named)
        memset(pk, 0, sizeof *pk);
    return named;
}

static int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)fmin((double)n, 1 << 20) : 1;
}

bool mc_peaks_fresh(const mc_peaks *pk)
{
    char path[4096];
    struct stat cache, exe;
    if (!pk->device[0] || !mc_peaks_path(pk->device, path, sizeof path) || stat(path, &cache) != 0)
        return false;
    if (stat("/proc/self/exe", &exe) == 0 && cache.st_mtime < exe.st_mtime)
        return false; /* older than the binary: the measuring code may have changed */
    return pk->online_cpus == online_cpus();
}

/* Best (largest) rate of n and the spread (best - worst) / best in percent. */
static double best_of(const double *rate, int n, double *spread_pct)
{
    double best = 0, worst = INFINITY;
    for (int i = 0; i < n; i++) {
        best = fmax(best, rate[i]);
        worst = fmin(worst, rate[i]);
    }
    *spread_pct = best > 0 && n > 1 ? 100.0 * (best - worst) / best : 0;
    return best;
}

/* ---- CPU measurements ---------------------------------------------------------------------- */

typedef struct worker {
    char *dst;
    const char *src;
    size_t bytes;
    int64_t iters;
    float sink;
    void *(*fn)(void *);
    double cpu_s; /* the thread's own CPU time running fn */
} worker;

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* fn on this thread, timed by the thread's CPU clock: on a busy machine the time another
 * process holds the core is not counted, so the rate is the core's, not the machine's load. */
static void *cpu_timed(void *arg)
{
    worker *w = arg;
    double t0 = thread_cpu_s();
    w->fn(w);
    w->cpu_s = thread_cpu_s() - t0;
    return NULL;
}

static void *copy_worker(void *arg)
{
    worker *w = arg;
    memcpy(w->dst, w->src, w->bytes);
    return NULL;
}

/* A copy that stays in the caches: the same two buffers copied back and forth `iters` times
 * (dst to src on odd passes, so no pass repeats the one before it). */
static void *cached_copy_worker(void *arg)
{
    worker *w = arg;
    for (int64_t i = 0; i < w->iters; i++) {
        if (i & 1)
            memcpy((char *)w->src, w->dst, w->bytes);
        else
            memcpy(w->dst, w->src, w->bytes);
    }
    return NULL;
}

typedef float v8f __attribute__((vector_size(32)));
#define NACC 12 /* independent accumulators: enough to cover FMA latency x pipes */
#define ACCS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

/* Never instrumented: sanitizer checks on the accumulators would measure the checks. The
 * accumulators are named variables (not an array) so they stay in registers. */
#define NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))

NO_SANITIZE static void *fma_worker_generic(void *arg)
{
    worker *w = arg;
    volatile float seed = 1e-3f;
    v8f m = {0}, a = {0};
    for (int l = 0; l < 8; l++) {
        m[l] = 0.999f;
        a[l] = seed;
    }
#define DECL(i) v8f acc##i = a * (float)(i);
#define STEP(i) acc##i = acc##i * m + a;
#define SUM(i) s += acc##i;
    ACCS(DECL)
    for (int64_t it = 0; it < w->iters; it++) {
        ACCS(STEP)
    }
    v8f s = {0};
    ACCS(SUM)
    w->sink = s[0] + s[7];
    return NULL;
}
#undef STEP

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* The same loop as fused multiply-adds on AVX2 + FMA (the build may forbid contraction). */
NO_SANITIZE __attribute__((target("avx2,fma"))) static void *fma_worker_avx2(void *arg)
{
    worker *w = arg;
    volatile float seed = 1e-3f;
    __m256 m = _mm256_set1_ps(0.999f), a = _mm256_set1_ps(seed);
#undef DECL
#undef SUM
#define DECL(i) __m256 acc##i = _mm256_mul_ps(a, _mm256_set1_ps((float)(i)));
#define STEP(i) acc##i = _mm256_fmadd_ps(acc##i, m, a);
#define SUM(i) s = _mm256_add_ps(s, acc##i);
    ACCS(DECL)
    for (int64_t it = 0; it < w->iters; it++) {
        ACCS(STEP)
    }
    __m256 s = _mm256_setzero_ps();
    ACCS(SUM)
    float out[8];
    _mm256_storeu_ps(out, s);
    w->sink = out[0] + out[7];
    return NULL;
}
#undef DECL
#undef STEP
#undef SUM
/* 512-bit vectors, for CPUs with AVX-512 (the JIT's code uses them there). */
NO_SANITIZE __attribute__((target("avx512f"))) static void *fma_worker_avx512(void *arg)
{
    worker *w = arg;
    volatile float seed = 1e-3f;
    __m512 m = _mm512_set1_ps(0.999f), a = _mm512_set1_ps(seed);
#define DECL(i) __m512 acc##i = _mm512_mul_ps(a, _mm512_set1_ps((float)(i)));
#define STEP(i) acc##i = _mm512_fmadd_ps(acc##i, m, a);
#define SUM(i) s = _mm512_add_ps(s, acc##i);
    ACCS(DECL)
    for (int64_t it = 0; it < w->iters; it++) {
        ACCS(STEP)
    }
    __m512 s = _mm512_setzero_ps();
    ACCS(SUM)
    float out[16];
    _mm512_storeu_ps(out, s);
    w->sink = out[0] + out[15];
    return NULL;
}
#endif
#undef DECL
#undef STEP
#undef SUM

/* Run fn on n threads; the wall time in seconds, or -1 when a thread cannot start. */
static double run_threads(void *(*fn)(void *), worker *w, int n)
{
    pthread_t *t = calloc((size_t)n, sizeof *t);
    if (!t)
        return -1;
    double t0 = mc_now_ms();
    int started = 0;
    for (; started < n; started++)
        if (pthread_create(&t[started], NULL, fn, &w[started]) != 0)
            break;
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    double s = (mc_now_ms() - t0) * 1e-3;
    free(t);
    return started == n ? s : -1;
}

static size_t available_memory(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    size_t kb = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %zu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024;
}

static void host_name(char *buf, size_t size)
{
    snprintf(buf, size, "host");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        const char *v = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !v)
            continue;
        v += 1 + strspn(v + 1, " \t");
        snprintf(buf, size, "%.*s", (int)strcspn(v, "\n"), v);
        break;
    }
    if (f)
        fclose(f);
}

mc_status mc_peaks_measure_cpu(const mc_peaks_config *cfg, mc_peaks *pk)
{
    memset(pk, 0, sizeof *pk);
    host_name(pk->device, sizeof pk->device);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int n = cfg->threads > 0 ? cfg->threads : online > 0 ? (int)online : 1;
    int reps = cfg->reps > 0 ? cfg->reps : 9;
    size_t bytes = cfg->copy_bytes;
    if (!bytes) {
        bytes = (size_t)128 << 20;
        size_t avail = available_memory();
        if (avail && bytes > avail / 8)
            bytes = avail / 8;
    }
    bytes = bytes / (size_t)n / 64 * 64;
    if (bytes == 0)
        return mc_fail(MC_ERR_INPUT, "peaks: copy buffers too small for %d threads", n);
    size_t total = bytes * (size_t)n;
    pk->threads = n;
    char *src = malloc(total), *dst = malloc(total);
    worker *w = calloc((size_t)n, sizeof *w);
    double *t = calloc((size_t)reps, sizeof *t);
    mc_status st = MC_OK;
    if (!src || !dst || !w || !t) {
        st = mc_fail(MC_ERR_SYSTEM, "peaks: out of memory for %zu-byte copy buffers", total);
        goto done;
    }
    memset(src, 1, total); /* fault the pages in before timing */
    memset(dst, 0, total);
    for (int r = 0; r < reps && st == MC_OK; r++) {
        for (int i = 0; i < n; i++)
            w[i] = (worker){.dst = dst + (size_t)i * bytes, .src = src + (size_t)i * bytes,
                            .bytes = bytes};
        t[r] = run_threads(copy_worker, w, n);
        if (!(t[r] > 0))
            st = mc_fail(MC_ERR_SYSTEM, "peaks: cannot start %d threads", n);
    }
    if (st == MC_OK) {
        for (int r = 0; r < reps; r++)
            t[r] = 2.0 * (double)total / t[r];
        pk->copy_bytes_per_s = best_of(t, reps, &pk->copy_spread_pct);
    }
    /* Working sets of 32 KiB to 16 MiB per thread (source + destination): the rates a kernel
     * whose data fits a core's L1, L2 or the shared cache can reach. No cache sizes are read
     * (sysfs may not have them, cpuid's L3 may be the whole package's): a kernel is held to the
     * rate measured at the smallest of these sizes that holds its bytes, else to the DRAM copy
     * (runtime/profile.c mc_profile_bw_peak). Each thread's bytes over its own CPU time, like the
     * FMA rate: the copies are short, and thread start-up or another process would count. */
    for (int s = 0; s < MC_PEAK_SIZES && st == MC_OK; s++) {
        size_t per = ((size_t)32 << 10 << (3 * s)) / 2 / 64 * 64; /* one buffer of a thread */
        if (per >= bytes)
            break;
        int64_t loops = (int64_t)(((size_t)256 << 20) / (2 * per * (size_t)n)) + 1;
        double spread;
        for (int r = 0; r < reps && st == MC_OK; r++) {
            for (int i = 0; i < n; i++)
                w[i] = (worker){.dst = dst + (size_t)i * bytes, .src = src + (size_t)i * bytes,
                                .bytes = per, .iters = loops, .fn = cached_copy_worker};
            if (!(run_threads(cpu_timed, w, n) > 0))
                st = mc_fail(MC_ERR_SYSTEM, "peaks: cannot start %d threads", n);
            t[r] = 0;
            for (int i = 0; i < n && st == MC_OK; i++)
                t[r] += w[i].cpu_s > 0 ? 2.0 * (double)per * (double)loops / w[i].cpu_s : 0;
        }
        if (st == MC_OK) {
            pk->size_bytes[s] = 2.0 * (double)per * (double)n;
            pk->size_bytes_per_s[s] = best_of(t, reps, &spread);
        }
    }

    void *(*fma)(void *) = fma_worker_generic;
    double lanes = 8;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        fma = fma_worker_avx2;
    if (__builtin_cpu_supports("avx512f")) {
        fma = fma_worker_avx512; /* the JIT uses 512-bit vectors here: so must the ceiling */
        lanes = 16;
    }
#endif
    int64_t iters = cfg->fma_iters > 0 ? cfg->fma_iters : 2000000;
    for (int r = 0; r < reps && st == MC_OK; r++) {
        for (int i = 0; i < n; i++)
            w[i] = (worker){.iters = iters, .fn = fma};
        if (!(run_threads(cpu_timed, w, n) > 0))
            st = mc_fail(MC_ERR_SYSTEM, "peaks: cannot start %d threads", n);
        /* Each thread's FLOPs over its own CPU time: the rate of n cores running at once. */
        t[r] = 0;
        for (int i = 0; i < n && st == MC_OK; i++)
            t[r] += w[i].cpu_s > 0 ? 2.0 * lanes * NACC * (double)iters / w[i].cpu_s : 0;
    }
    if (st == MC_OK) {
        pk->fma_flops_per_s = best_of(t, reps, &pk->fma_spread_pct);
        pk->reps = reps;
        pk->online_cpus = online_cpus();
        pk->datasheet_fma_flops_per_s = mc_peaks_cpu_datasheet(n, NULL, 0);
        double ds = pk->datasheet_fma_flops_per_s;
        pk->disagrees = ds > 0 && (pk->fma_flops_per_s > 2 * ds || pk->fma_flops_per_s < ds / 2);
    }
done:
    free(src);
    free(dst);
    free(w);
    free(t);
    return st;
}

/* One number from /proc/cpuinfo's first block ("cpu cores", "siblings", "cpu MHz"); 0: none. */
static double cpuinfo_number(const char *key)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    double x = 0;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f)) {
        const char *v = strchr(line, ':');
        if (v && !strncmp(line, key, n) && (line[n] == ' ' || line[n] == '\t')) {
            x = strtod(v + 1, NULL);
            break;
        }
    }
    if (f)
        fclose(f);
    return isfinite(x) && x > 0 ? x : 0;
}

double mc_peaks_cpu_datasheet(int threads, char *why, size_t why_size)
{
    int online = online_cpus();
    int n = threads > 0 ? threads : online;
    /* Hyper-threads share a core's FMA units: count cores, not threads. */
    double cores_per_pkg = cpuinfo_number("cpu cores"), siblings = cpuinfo_number("siblings");
    double cores = n;
    if (cores_per_pkg > 0 && siblings > cores_per_pkg)
        cores = fmax(1, floor(n * cores_per_pkg / siblings));
    double mhz = 0;
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
    if (f) {
        double khz = 0;
        if (fscanf(f, "%lf", &khz) == 1 && khz > 0)
            mhz = khz / 1000;
        fclose(f);
    }
    const char *clock_from = "cpufreq maximum";
    if (!(mhz > 0)) {
        mhz = cpuinfo_number("cpu MHz");
        clock_from = "/proc/cpuinfo";
    }
    double lanes = 4;
    const char *isa = "SSE";
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        lanes = 8, isa = "AVX2+FMA";
    if (__builtin_cpu_supports("avx512f"))
        lanes = 16, isa = "AVX-512";
#endif
    double units = 2; /* FMA pipes per core on every recent x86 core (an upper bound) */
    if (why && why_size)
        snprintf(why, why_size, "%.0f cores x %.0f FMA units x %.0f f32 lanes (%s) x 2 FLOPs x %.0f MHz (%s)",
                 cores, units, lanes, isa, mhz, clock_from);
    return mhz > 0 ? cores * units * lanes * 2 * mhz * 1e6 : 0;
}

/* Times (µs) of `reps` timings of g on the cuda backend, one execution each after a warm-up. */
static mc_status time_graph_cuda(mc_graph *g, mc_value out, int reps, double *us)
{
    mc_options opt = mc_options_default();
    opt.backend = MC_BACKEND_CUDA;
    opt.quiet = true;
    mc_program *p = NULL;
    mc_status st = mc_graph_set_outputs(g, &out, 1);
    if (st == MC_OK)
        st = mc_program_compile(g, &opt, &p);
    if (st == MC_OK)
        st = mc_program_fill_random(p, 1);
    if (st == MC_OK)
        st = mc_program_run(p);
    if (st == MC_OK && !p->backend->time)
        st = mc_fail(MC_ERR_SYSTEM, "peaks: the %s backend cannot time a run", p->backend->name);
    for (int r = 0; r < reps && st == MC_OK; r++)
        st = p->backend->time(p, 3, &us[r]);
    if (st == MC_OK && !(us[0] > 0))
        st = mc_fail(MC_ERR_SYSTEM, "peaks: a GPU timing gave no time");
    mc_program_free(p);
    return st;
}

/* The GPU's name as the cuda backend's profile reports it. */
static mc_status cuda_device_name(char *name, size_t size)
{
    mc_graph *g = mc_graph_new("peaks_name");
    int64_t shape[1] = {1};
    mc_value x = mc_input(g, "x", MC_F32, shape, 1), y = mc_neg(g, x);
    mc_options opt = mc_options_default();
    opt.backend = MC_BACKEND_CUDA;
    opt.quiet = true;
    mc_program *p = NULL;
    mc_profile prof;
    mc_status st = mc_graph_set_outputs(g, &y, 1);
    if (st == MC_OK)
        st = mc_program_compile(g, &opt, &p);
    if (st == MC_OK)
        st = mc_program_fill_random(p, 1);
    if (st == MC_OK)
        st = mc_program_run(p);
    if (st == MC_OK && !p->backend->profile)
        st = mc_fail(MC_ERR_SYSTEM, "peaks: the %s backend has no profile", p->backend->name);
    if (st == MC_OK && (st = mc_profile_init(&prof, p)) == MC_OK) {
        st = p->backend->profile(p, 1, &prof); /* not mc_profile_collect: no peaks wanted */
        snprintf(name, size, "%s", prof.device);
        mc_profile_release(&prof);
    }
    mc_program_free(p);
    mc_graph_free(g);
    if (st == MC_OK && !name[0])
        st = mc_fail(MC_ERR_SYSTEM, "peaks: the cuda backend did not name its GPU");
    return st;
}

mc_status mc_peaks_measure_cuda(mc_peaks *pk)
{
    memset(pk, 0, sizeof *pk);
    enum { REPS = 5 };
    double us[REPS], rate[REPS], spread = 0;
    mc_status st = cuda_device_name(pk->device, sizeof pk->device);
    const mc_dtype dts[] = {MC_F32, MC_F16, MC_BF16};
    const int64_t n = 8192;
    for (int i = 0; i < 3 && st == MC_OK; i++) {
        mc_graph *g = mc_graph_new("peaks_gemm");
        int64_t shape[2] = {n, n};
        mc_value a = mc_input(g, "a", dts[i], shape, 2), b = mc_input(g, "b", dts[i], shape, 2);
        memset(us, 0, sizeof us);
        st = time_graph_cuda(g, mc_matmul(g, a, b), REPS, us);
        mc_graph_free(g);
        for (int r = 0; r < REPS && st == MC_OK; r++)
            rate[r] = us[r] > 0 ? 2.0 * (double)n * (double)n * (double)n / (us[r] * 1e-6) : 0;
        if (st == MC_OK) {
            pk->gemm_flops_per_s[dts[i]] = best_of(rate, REPS, &spread);
            pk->gemm_spread_pct = fmax(pk->gemm_spread_pct, spread);
        }
        mc_clocks c;
        if (st == MC_OK && i == 2 && mc_nvml_clocks(pk->device, &c))
            pk->sm_mhz = c.sm_mhz; /* the clock the GEMM rates were reached at */
    }
    if (st == MC_OK) {
        mc_graph *g = mc_graph_new("peaks_copy");
        int64_t elems = (int64_t)1 << 28, shape[1] = {elems};
        mc_value x = mc_input(g, "x", MC_F32, shape, 1);
        memset(us, 0, sizeof us);
        st = time_graph_cuda(g, mc_neg(g, x), REPS, us);
        mc_graph_free(g);
        for (int r = 0; r < REPS && st == MC_OK; r++)
            rate[r] = us[r] > 0 ? 2.0 * 4.0 * (double)elems / (us[r] * 1e-6) : 0;
        if (st == MC_OK)
            pk->copy_bytes_per_s = best_of(rate, REPS, &pk->copy_spread_pct);
    }
    pk->reps = REPS;
    pk->online_cpus = online_cpus();
    return st;
}

bool mc_peaks_get(const char *device, bool gpu, mc_peaks *pk, bool *measured_now)
{
    if (measured_now)
        *measured_now = false;
    if (mc_peaks_load(device, pk) && mc_peaks_fresh(pk))
        return true;
    /* Measure now: a failure keeps the profile going on datasheet peaks (or none). */
    mc_status st;
    if (gpu) {
        st = mc_peaks_measure_cuda(pk);
        if (st == MC_OK && strcmp(pk->device, device) != 0)
            st = mc_fail(MC_ERR_SYSTEM, "peaks: measured %s, profiling %s", pk->device, device);
    } else {
        mc_peaks_config cfg = {0};
        st = mc_peaks_measure_cpu(&cfg, pk);
        snprintf(pk->device, sizeof pk->device, "%s", device);
    }
    if (st != MC_OK) {
        memset(pk, 0, sizeof *pk);
        return false;
    }
    /* Not cached (no home, a read-only cache): measured again next time, still correct. */
    if (measured_now)
        *measured_now = true;
    if (mc_peaks_save(pk) != MC_OK)
        snprintf(pk->not_cached, sizeof pk->not_cached, "%s", mc_error_message());
    return true;
}

/* ---- applying peaks to a profile ----------------------------------------------------------- */

/* A GPU's datasheet ceilings for each kernel: a GEMM's tensor-core rate for its input dtype
 * (TF32 where the f32 GEMM may use it), the f32 FMA rate for everything else. */
static void apply_datasheet(mc_profile *prof)
{
    const kir_program *kp = prof->program->kp;
    double f32, tc16, tf32, bw;
    mc_peaks_datasheet(prof->device, &f32, &tf32, &tc16, &bw); /* 0 where unknown */
    prof->peak_bytes_per_s = bw;
    for (int k = 0; k < prof->nkernels; k++) {
        const kir_kernel *kk = &kp->kernels[k];
        double peak = f32;
        if (kk->category == KIR_GEMM) {
            mc_dtype d = kp->buffers[kk->views[kk->gemm.a].buffer].dtype;
            peak = d == MC_F32 ? (kk->gemm.tf32 ? tf32 : f32) : tc16;
        } else if (kk->category == KIR_ATTENTION) { /* f16/bf16 on tensor cores, f32 on FMA */
            peak = kp->buffers[kk->views[kk->attn.q].buffer].dtype == MC_F32 ? f32 : tc16;
        }
        prof->peak_flops[k] = peak;
    }
}

void mc_peaks_apply_with(mc_profile *prof, const mc_peaks *measured, const mc_clocks *clocks)
{
    const kir_program *kp = prof->program->kp;
    bool gpu = prof->program->backend->is_gpu;
    bool any = prof->peak_bytes_per_s > 0;
    for (int k = 0; k < prof->nkernels; k++)
        any = any || prof->peak_flops[k] > 0;
    prof->peaks_source = any ? "datasheet" : "none";
    prof->clock_scale = 1;
    bool *is_measured = calloc((size_t)(prof->nkernels > 0 ? prof->nkernels : 1), sizeof(bool));
    if (measured && is_measured) {
        bool used = false;
        if (measured->copy_bytes_per_s > 0) {
            prof->peak_bytes_per_s = measured->copy_bytes_per_s;
            used = true;
            prof->nbw_sizes = 0;
            for (int s = 0; !gpu && s < MC_PEAK_SIZES && measured->size_bytes[s] > 0; s++) {
                prof->bw_size_bytes[s] = measured->size_bytes[s];
                prof->bw_size_bytes_per_s[s] = measured->size_bytes_per_s[s];
                prof->nbw_sizes = s + 1;
            }
        }
        for (int k = 0; k < prof->nkernels; k++) {
            const kir_kernel *kk = &kp->kernels[k];
            double peak = 0;
            if (gpu && kk->category == KIR_GEMM && !kk->gemm.tf32)
                peak = measured->gemm_flops_per_s[kp->buffers[kk->views[kk->gemm.a].buffer].dtype];
            else if (gpu && kk->category == KIR_ATTENTION)
                peak = measured->gemm_flops_per_s[kp->buffers[kk->views[kk->attn.q].buffer].dtype];
            else if (!gpu)
                peak = measured->disagrees && measured->datasheet_fma_flops_per_s > 0
                           ? measured->datasheet_fma_flops_per_s
                           : measured->fma_flops_per_s;
            if (peak > 0) {
                prof->peak_flops[k] = peak;
                is_measured[k] = used = true;
            }
        }
        if (used)
            prof->peaks_source = "measured";
        size_t n = strlen(prof->peaks_note);
        if (used && measured->reps > 1 && n < sizeof prof->peaks_note)
            n += (size_t)snprintf(prof->peaks_note + n, sizeof prof->peaks_note - n,
                                  "%sbest of %d, spread copy %.0f%%, %s %.0f%%", n ? "; " : "",
                                  measured->reps, measured->copy_spread_pct, gpu ? "GEMM" : "FMA",
                                  gpu ? measured->gemm_spread_pct : measured->fma_spread_pct);
        if (used && !gpu && measured->disagrees && n < sizeof prof->peaks_note)
            snprintf(prof->peaks_note + n, sizeof prof->peaks_note - n,
                     "%sFLAG: measured FMA %.1f GFLOP/s disagrees >2x with the datasheet %.1f "
                     "GFLOP/s, which is used", n ? "; " : "", measured->fma_flops_per_s * 1e-9,
                     measured->datasheet_fma_flops_per_s * 1e-9);
    }
    prof->clocks_known = gpu && clocks && clocks->known && clocks->sm_max_mhz > 0;
    if (prof->clocks_known) {
        prof->sm_mhz = clocks->sm_mhz;
        prof->sm_max_mhz = clocks->sm_max_mhz;
        prof->mem_mhz = clocks->mem_mhz;
        prof->mem_max_mhz = clocks->mem_max_mhz;
        prof->clock_scale = clocks->sm_mhz / clocks->sm_max_mhz;
        double measured_scale = measured && measured->sm_mhz > 0
                                    ? clocks->sm_mhz / measured->sm_mhz
                                    : prof->clock_scale;
        for (int k = 0; k < prof->nkernels; k++)
            prof->peak_flops[k] *= is_measured && is_measured[k] ? measured_scale : prof->clock_scale;
    }
    free(is_measured);
}

void mc_peaks_apply(mc_profile *prof)
{
    mc_peaks pk;
    bool now = false;
    const mc_backend *b = prof->program->backend;
    bool have = prof->device[0] && !b->no_peaks && mc_peaks_get(prof->device, b->is_gpu, &pk, &now);
    if (now && !pk.not_cached[0])
        snprintf(prof->peaks_note, sizeof prof->peaks_note, "measured on first use and cached");
    else if (now)
        snprintf(prof->peaks_note, sizeof prof->peaks_note, "measured on first use, not cached: %.200s",
                 pk.not_cached);
    mc_clocks c = {0};
    if (prof->program->backend->is_gpu) {
        apply_datasheet(prof);
        mc_nvml_clocks(prof->device, &c);
    }
    mc_peaks_apply_with(prof, have ? &pk : NULL, &c);
}
