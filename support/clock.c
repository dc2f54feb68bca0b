/* Time: the monotonic clock, the median every timing in minic reports, and the one loop that
 * times something on the host (warm-up, N runs, median).
 */
#include "support/support.h"

#include <stdlib.h>
#include <time.h>

double mc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Every timing in minic reports a median (means are wrecked by outliers): one definition. */
double mc_median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, compare_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

mc_status mc_time_median(mc_status (*run)(void *ctx), void *ctx, int iters, double *median_us)
{
    if (iters < 1)
        iters = 1;
    double *t = malloc((size_t)iters * sizeof *t);
    if (!t)
        return mc_fail(MC_ERR_SYSTEM, "out of memory timing the program");
    mc_status st = run(ctx); /* warm-up: pages touched, caches and threads awake */
    for (int i = 0; i < iters && st == MC_OK; i++) {
        double t0 = mc_now_ms();
        st = run(ctx);
        t[i] = (mc_now_ms() - t0) * 1000.0;
    }
    if (st == MC_OK)
        *median_us = mc_median(t, iters);
    free(t);
    return st;
}
