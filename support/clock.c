/* Time: the monotonic clock and the median every timing in minic reports.
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
