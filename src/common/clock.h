/*
 * The monotonic clock (CLOCK_MONOTONIC): solve times, timeouts and the
 * CLI's progress and benchmark timers all run on it.
 */
#ifndef PS_SRC_CLOCK_H
#define PS_SRC_CLOCK_H

#include <time.h>

/* Seconds on the monotonic clock (from an arbitrary start). */
double ps_monotonic_seconds(void);

/* The time `seconds` (>= 0, capped at 1e9) from now on the monotonic
 * clock, as a deadline for a condition variable that runs on it. */
struct timespec ps_monotonic_after(double seconds);

#endif /* PS_SRC_CLOCK_H */
