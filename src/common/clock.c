/* The monotonic clock (common/clock.h). */
#include "common/clock.h"

double ps_monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct timespec ps_monotonic_after(double seconds)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    const double s = seconds > 1e9 ? 1e9 : seconds;
    const time_t whole = (time_t)s;
    const long ns = t.tv_nsec + (long)((s - (double)whole) * 1e9);
    t.tv_sec += whole + ns / 1000000000L;
    t.tv_nsec = ns % 1000000000L;
    return t;
}
