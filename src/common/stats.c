/* Order statistics of timings (common/stats.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/stats.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void ps_sort_doubles(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
}

double ps_median(const double *v, size_t n)
{
    double *s = malloc(n * sizeof *s);
    if (!s)
        return NAN;
    memcpy(s, v, n * sizeof *s);
    ps_sort_doubles(s, n);
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

double ps_quantile(double *v, size_t n, double q)
{
    ps_sort_doubles(v, n);
    int k = (int)ceil(q * (double)n) - 1;
    return v[k < 0 ? 0 : k >= (int)n ? (int)n - 1 : k];
}
