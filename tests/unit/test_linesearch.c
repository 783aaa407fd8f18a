/*
 * The strong-Wolfe line search of opt/linesearch.h on one-dimensional
 * functions phi(alpha): acceptance, bracketing, zoom, NaN handling and the
 * cubic interpolation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "opt/solver.h"
#include "test_util.h"

typedef double (*phi_fn)(double a, double *dphi);

/* Runs the search from alpha0; returns the action and the trial count. */
static int search(phi_fn phi, double alpha0, ps_linesearch *ls)
{
    double d0, f0 = phi(0.0, &d0);
    ps_ls_begin(ls, f0, d0, alpha0, 1e-4, 0.9, 0.0, 20);
    for (;;) {
        double d, f = phi(ls->alpha, &d);
        int a = ps_ls_next(ls, f, d);
        if (a != PS_LS_TRY)
            return a;
    }
}

static void assert_strong_wolfe(phi_fn phi, const ps_linesearch *ls)
{
    double d0, f0 = phi(0.0, &d0), d, f = phi(ls->alpha, &d);
    assert_true(f <= f0 + 1e-4 * ls->alpha * d0);
    assert_true(fabs(d) <= 0.9 * fabs(d0));
}

/* phi = (a - 3)^2: minimum at 3 */
static double quad3(double a, double *d)
{
    *d = 2.0 * (a - 3.0);
    return (a - 3.0) * (a - 3.0);
}

/* phi = (a - 1e-3)^2 * 1e6: a very short step is needed */
static double steep(double a, double *d)
{
    *d = 2e6 * (a - 1e-3);
    return 1e6 * (a - 1e-3) * (a - 1e-3);
}

/* phi = a^4/4 - a (minimum at 1), NaN beyond a = 2 */
static double nan_far(double a, double *d)
{
    if (a > 2.0) {
        *d = NAN;
        return NAN;
    }
    *d = a * a * a - 1.0;
    return 0.25 * a * a * a * a - a;
}

/* phi = -a: unbounded below, slope never flattens */
static double unbounded(double a, double *d)
{
    *d = -1.0;
    return -a;
}

static void accepts_unit_step(void **state)
{
    ps_linesearch ls;
    /* from alpha = 2.9: Armijo and curvature hold at once */
    assert_int_equal(search(quad3, 2.9, &ls), PS_LS_ACCEPT);
    assert_int_equal(ls.trials, 1);
    assert_true(ls.alpha == 2.9);
}

static void extrapolates(void **state)
{
    ps_linesearch ls;
    assert_int_equal(search(quad3, 0.01, &ls), PS_LS_ACCEPT);
    assert_true(ls.trials > 1);
    assert_strong_wolfe(quad3, &ls);
}

static void zooms_back(void **state)
{
    ps_linesearch ls;
    assert_int_equal(search(steep, 1.0, &ls), PS_LS_ACCEPT);
    assert_strong_wolfe(steep, &ls);
    assert_true(ls.alpha < 2e-3);
}

static void nan_shrinks(void **state)
{
    ps_linesearch ls;
    assert_int_equal(search(nan_far, 100.0, &ls), PS_LS_ACCEPT);
    assert_strong_wolfe(nan_far, &ls);
    assert_true(ls.alpha <= 2.0);
}

static void fails_after_max_trials(void **state)
{
    ps_linesearch ls;
    assert_int_equal(search(unbounded, 1.0, &ls), PS_LS_FAIL);
    assert_int_equal(ls.trials, 20);
}

/* The cubic interpolant of a cubic is exact: its minimizer is found. */
static void cubic_exact(void **state)
{
    /* phi = a^3 - 3a: phi' = 3a^2 - 3, local minimum at a = 1 */
    double x = -1.0;
    double f0 = 0.0, g0 = -3.0, f2 = 8.0 - 6.0, g2 = 12.0 - 3.0;
    assert_true(ps_cubic_min(0.0, f0, g0, 2.0, f2, g2, &x));
    assert_true(fabs(x - 1.0) < 1e-12);
    assert_true(ps_cubic_min(2.0, f2, g2, 0.0, f0, g0, &x));
    assert_true(fabs(x - 1.0) < 1e-12);
    /* no real minimizer: d1^2 < g0 g1 */
    assert_false(ps_cubic_min(0.0, 0.0, 1.0, 1.0, 2.0 / 3.0, 1.0, &x));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accepts_unit_step),
        cmocka_unit_test(extrapolates),
        cmocka_unit_test(zooms_back),
        cmocka_unit_test(nan_shrinks),
        cmocka_unit_test(fails_after_max_trials),
        cmocka_unit_test(cubic_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
