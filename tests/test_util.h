/*
 * Small helpers shared by the cmocka tests: seeded random numbers,
 * poisoning, array comparison with atol + rtol*|ref| that reports the
 * worst element (cmocka's assert_float_equal casts to float), and the
 * bound of the tests' waits for a run.
 */
#ifndef PS_TESTS_TEST_UTIL_H
#define PS_TESTS_TEST_UTIL_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The bound of every wait of a test for a run or a batch, s: TU_WAIT_S,
 * unless PS_TEST_WAIT_S (s) sets one (compute-sanitizer's racecheck runs
 * the kernels far slower). */
#define TU_WAIT_S 60.0
static inline double tu_wait_s(void)
{
    const char *e = getenv("PS_TEST_WAIT_S");
    const double v = e ? atof(e) : 0.0;
    return v > 0.0 ? v : TU_WAIT_S;
}

/* The sentinel every output is pre-filled with. */
#define PS_POISON (-1.2345678e300)

static inline void tu_poison(double *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i] = PS_POISON;
}

/* splitmix64: deterministic, seedable, identical everywhere. */
static inline uint64_t tu_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static inline double tu_uniform(uint64_t *s, double lo, double hi)
{
    return lo + (hi - lo) * (double)(tu_next(s) >> 11) * 0x1.0p-53;
}

/*
 * Compare got[n] with ref[n]: every element must satisfy
 * |got - ref| <= atol + rtol*|ref| and not be the poison. Prints the worst
 * element (largest error / tolerance) with `what`, returns 1 if all pass.
 */
static inline int tu_compare(const char *what, const double *got,
                             const double *ref, size_t n, double atol,
                             double rtol)
{
    size_t worst = 0;
    double worst_ratio = -1.0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double tol = atol + rtol * fabs(ref[i]);
        double err = fabs(got[i] - ref[i]);
        double ratio = tol > 0 ? err / tol : (err > 0 ? INFINITY : 0.0);
        if (got[i] == PS_POISON || !isfinite(got[i]) || !(ratio <= 1.0))
            ok = 0;
        if (got[i] == PS_POISON || !isfinite(got[i]))
            ratio = INFINITY;
        if (ratio > worst_ratio) {
            worst_ratio = ratio;
            worst = i;
        }
    }
    if (n > 0)
        printf("%s: n=%zu worst [%zu] got %.17g ref %.17g err %.3g (%.3g of "
               "tolerance) -> %s\n",
               what, n, worst, got[worst], ref[worst],
               fabs(got[worst] - ref[worst]), worst_ratio,
               ok ? "ok" : "FAIL");
    return ok;
}

/*
 * The gradient constraints' values of one axis's waveform g[k stride]
 * (k = 0..nt-1, G/cm), written out independently of the library's:
 * out[0] = max |g_k|, out[1] = max |g_k - g_{k-1}| / dt with g_{-1} = 0,
 * out[2] = |g_{nt-1}|.
 */
static inline void tu_waveform_values(const double *g, size_t nt, size_t stride, double dt,
                                      double out[3])
{
    out[0] = out[1] = 0.0;
    for (size_t k = 0; k < nt; k++) {
        double gk = g[k * stride], prev = k ? g[(k - 1) * stride] : 0.0;
        out[0] = fmax(out[0], fabs(gk));
        out[1] = fmax(out[1], fabs(gk - prev) / dt);
    }
    out[2] = fabs(g[(nt - 1) * stride]);
}

/* The largest |g| and the largest slew over the three axes of a waveform
 * g[nt][3] (tu_waveform_values of each). */
static inline void tu_waveform_peak_slew(const double *g, size_t nt, double dt, double *peak, double *slew)
{
    *peak = *slew = 0.0;
    for (int a = 0; a < 3; a++) {
        double v[3];
        tu_waveform_values(g + a, nt, 3, dt, v);
        *peak = fmax(*peak, v[0]);
        *slew = fmax(*slew, v[1]);
    }
}

#endif /* PS_TESTS_TEST_UTIL_H */
