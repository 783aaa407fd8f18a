/*
 * Order statistics of timings: the median and nearest-rank quantiles that
 * bench and tune report.
 */
#ifndef PS_SRC_STATS_H
#define PS_SRC_STATS_H

#include <stddef.h>

/* Sort v[n] in ascending order. */
void ps_sort_doubles(double *v, size_t n);

/* The median of v[n] (n >= 1; v is not changed): the middle value, or for
 * an even n the mean of the two middle values. NaN if out of memory. */
double ps_median(const double *v, size_t n);

/* The q-quantile of v[n] (n >= 1) by nearest rank: the ceil(q n)-th
 * smallest value (clamped to 1..n). v is sorted in place. */
double ps_quantile(double *v, size_t n, double q);

#endif /* PS_SRC_STATS_H */
