/*
 * Designed runs on the CPU (SPEC 1.2, 1.3): a joint RF and gradient solve
 * of a small spiral through the penalty rounds never exceeds smax at any
 * step, ends with |g| <= gmax (1 + 1e-3) (a gmax below the spiral's own
 * peak) and |g(T)| <= 1e-3 gmax, and designs the pulse as well as the
 * fixed spiral does (this small spiral fits its target almost exactly:
 * the joint design's advantage is measured on spiral2d's defaults,
 * README); a
 * solve with an RF mask keeps the held steps at exactly zero and its
 * result evaluates to the f it reports. The limits are computed here from
 * the returned waveform alone.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "persolve.h"
#include "test_util.h"

#define SPEC "spiral2d:n=12,nt=300"

/* The preset's own slew and peak over x and y (G/cm/s, G/cm). */
static void waveform_limits(const ps_problem_desc *d, double *slew, double *peak)
{
    double prev[2] = {0.0, 0.0};
    *slew = *peak = 0.0;
    for (size_t k = 0; k < d->nt; k++)
        for (int a = 0; a < 2; a++) {
            *slew = fmax(*slew, fabs(d->g[3 * k + a] - prev[a]) / d->dt);
            *peak = fmax(*peak, fabs(d->g[3 * k + a]));
            prev[a] = d->g[3 * k + a];
        }
}

/* F at the physical x on the CPU in double. */
static double eval_cpu(const ps_problem *p, const double *x)
{
    double f = -1.0;
    ps_options o;
    ps_options_default(&o);
    o.backend = PS_BACKEND_CPU;
    o.precision = PS_PRECISION_DOUBLE;
    assert_int_equal(ps_eval(p, &o, x, &f, NULL), PS_CONVERGED);
    return f;
}

static void solve_cpu(const ps_problem *p, int64_t iters, double *x, ps_result *r)
{
    ps_options o;
    ps_options_default(&o);
    o.backend = PS_BACKEND_CPU;
    o.precision = PS_PRECISION_DOUBLE;
    o.max_iterations = iters;
    assert_int_equal(ps_problem_x0(p, x), PS_CONVERGED);
    solve_persistent(p, &o, x, r);
}

static void test_joint_spiral_limits(void **state)
{
    (void)state;
    ps_problem *fixed = NULL, *joint = NULL;
    char err[256];
    assert_int_equal(ps_preset_create(SPEC, &fixed, err, sizeof err), PS_CONVERGED);
    ps_problem_desc d;
    assert_int_equal(ps_problem_describe(fixed, &d), PS_CONVERGED);
    double slew0, peak0;
    waveform_limits(&d, &slew0, &peak0);
    d.design_g = PS_AXIS_X | PS_AXIS_Y;
    d.smax = 1.25 * slew0; /* the start is the spiral (its first step clipped) */
    d.gmax = 0.9 * peak0;  /* the spiral's peak violates it (the start is clipped to it) */
    d.g_end = 1;           /* and its end violates this */
    assert_int_equal(ps_problem_create(&d, &joint), PS_CONVERGED);
    const size_t nt = d.nt, nrf = 2 * nt, nx = ps_problem_nx(joint);
    assert_int_equal(nx, nrf + 2 * nt);
    const int64_t iters = 400;
    double *xf = malloc(nrf * sizeof *xf), *xj = malloc(nx * sizeof *xj);
    assert_non_null(xf);
    assert_non_null(xj);
    ps_result rf, rj;
    solve_cpu(fixed, iters, xf, &rf);
    solve_cpu(joint, iters, xj, &rj);
    /* the limits, from the returned waveforms */
    double worst_slew = 0.0, worst_g = 0.0, worst_end = 0.0;
    for (int i = 0; i < 2; i++) {
        const double *g = xj + nrf + i * nt;
        double prev = 0.0;
        for (size_t k = 0; k < nt; k++) {
            worst_slew = fmax(worst_slew, fabs(g[k] - prev) / d.dt);
            worst_g = fmax(worst_g, fabs(g[k]));
            prev = g[k];
        }
        worst_end = fmax(worst_end, fabs(g[nt - 1]));
    }
    printf("fixed: status %d f %.6g; joint: status %d f %.6g, %d rounds, mu %g, violation %.3g\n",
           rf.status, rf.f, rj.status, rj.f, rj.rounds, rj.mu, rj.violation);
    printf("joint: max|slew| %.6f smax, max|g| %.6f gmax, |g(T)| %.2e gmax\n", worst_slew / d.smax,
           worst_g / d.gmax, worst_end / d.gmax);
    assert_true(rj.status == PS_CONVERGED || rj.status == PS_CONVERGED_FTOL || rj.status == PS_MAX_ITERATIONS);
    assert_true(rj.rounds >= 1 && rj.history[0].iteration == 0);
    assert_true(worst_slew < d.smax);
    assert_true(worst_g <= d.gmax * (1.0 + 1e-3));
    assert_true(worst_end <= 1e-3 * d.gmax);
    assert_true(rj.violation <= 1e-3);
    /* the start violated g_end, and the spiral gmax: the rounds did the work, and the
     * amplitude limit binds at the end */
    assert_true(rj.rounds >= 2 && fabs(d.g[3 * (nt - 1)]) > 1e-3 * d.gmax && peak0 > d.gmax);
    assert_true(worst_g >= d.gmax * (1.0 - 1e-3));
    assert_true(rj.f < 1e-4 * rj.history[0].f);
    /* the reported f is the round's objective at the returned point: F plus what is left of
     * the penalty, mu (g(T) / gmax)^2 here */
    const double fe = eval_cpu(joint, xj);
    const double e = xj[nrf + nt - 1] / d.gmax, e2 = xj[nrf + 2 * nt - 1] / d.gmax;
    printf("F %.9g + mu (e_x^2 + e_y^2) = %.9g, reported %.9g\n", fe, fe + rj.mu * (e * e + e2 * e2), rj.f);
    assert_true(fabs(fe + rj.mu * (e * e + e2 * e2) - rj.f) <= 1e-9 * rj.f);
    ps_result_free(&rf);
    ps_result_free(&rj);
    free(xf);
    free(xj);
    ps_problem_free(fixed);
    ps_problem_free(joint);
}

static void test_masked_solve(void **state)
{
    (void)state;
    ps_problem *base = NULL, *p = NULL;
    char err[256];
    assert_int_equal(ps_preset_create("slice1d:nz=100", &base, err, sizeof err), PS_CONVERGED);
    ps_problem_desc d;
    assert_int_equal(ps_problem_describe(base, &d), PS_CONVERGED);
    double *mask = malloc(d.nt * sizeof *mask);
    assert_non_null(mask);
    size_t held = 0;
    for (size_t k = 0; k < d.nt; k++) { /* the first and last 50 steps, and every 7th */
        mask[k] = (k < 50 || k >= d.nt - 50 || k % 7 == 3) ? 0.0 : 1.0;
        held += mask[k] == 0.0;
    }
    d.rf_mask = mask;
    assert_int_equal(ps_problem_create(&d, &p), PS_CONVERGED);
    const size_t nx = ps_problem_nx(p);
    double *x = malloc(nx * sizeof *x);
    assert_non_null(x);
    ps_result r;
    solve_cpu(p, 60, x, &r);
    printf("masked slice1d (%zu of %zu steps held): status %d, %lld iterations, f %.6g -> %.6g\n", held, d.nt,
           r.status, (long long)r.iterations, r.history[0].f, r.f);
    assert_true(r.status >= 0 && r.iterations > 10 && r.f < 0.5 * r.history[0].f);
    size_t moved = 0;
    for (size_t k = 0; k < d.nt; k++) {
        if (mask[k] == 0.0)
            assert_true(x[k] == 0.0 && x[d.nt + k] == 0.0);
        else
            moved += x[k] != d.b1[2 * k];
    }
    assert_true(moved > (d.nt - held) / 2);
    assert_true(eval_cpu(p, x) == r.f);
    ps_result_free(&r);
    free(x);
    free(mask);
    ps_problem_free(p);
    ps_problem_free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_joint_spiral_limits),
        cmocka_unit_test(test_masked_solve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
