/*
 * The optimizer on problems with known minima, every stopping rule reached
 * on purpose, and the strong-Wolfe conditions checked on every accepted
 * step. Drives ps_minimize_cpu (the same state machine the Bloch solve and
 * the GPU kernel run) with test objectives.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "opt/driver.h"
#include "test_util.h"
#include "unit/lbfgs_pairs.h"

/* Every accepted step is checked against strong Wolfe (with the line
 * search's documented noise allowance feps). */
typedef struct wolfe_check {
    int64_t accepted, violations;
} wolfe_check;

static void check_wolfe(void *ctx, const ps_linesearch *ls, double f,
                        double dg)
{
    wolfe_check *w = ctx;
    w->accepted++;
    int armijo = f <= ls->f0 + ls->c1 * ls->alpha * ls->dg0 + ls->feps;
    int curv = fabs(dg) <= -ls->c2 * ls->dg0;
    if (!armijo || !curv || !(ls->dg0 < 0)) {
        w->violations++;
        printf("strong Wolfe violated: alpha %g f %.17g f0 %.17g dg %g dg0 %g\n",
               ls->alpha, f, ls->f0, dg, ls->dg0);
    }
}

static ps_options opts(void)
{
    ps_options o;
    ps_options_default(&o);
    o.precision = PS_PRECISION_DOUBLE; /* fnoise 1e-12: strong Wolfe in effect */
    o.max_iterations = 100000;
    o.gtol = 1e-10;
    o.ftol = 0.0;
    return o;
}

/* ---- objectives ---- */

/* Extended Rosenbrock: sum over pairs 100 (x2 - x1^2)^2 + (1 - x1)^2. */
static int rosenbrock(void *ctx, const double *x, double mu, double *f, double *g, double *viol)
{
    size_t n = *(size_t *)ctx;
    double s = 0.0;
    (void)mu;
    *viol = 0.0;
    for (size_t i = 0; i + 1 < n; i += 2) {
        double a = x[i + 1] - x[i] * x[i], b = 1.0 - x[i];
        s += 100.0 * a * a + b * b;
        g[i] = -400.0 * a * x[i] - 2.0 * b;
        g[i + 1] = 200.0 * a;
    }
    *f = s;
    return 0;
}

/* Convex quadratic 0.5 sum lam_i (x_i - c_i)^2, lam log-spaced 1..1e4. */
typedef struct quad {
    size_t n;
    double *lam, *c;
    int sleep_us; /* slow objective for the time limit */
    int nan_from; /* evaluation count from which f is NaN (0: never) */
    int calls;
    int wrong_gradient; /* return -gradient: no descent along d */
    double offset;      /* added to f (a nonzero minimum value) */
} quad;

static int quadratic(void *ctx, const double *x, double mu, double *f, double *g, double *viol)
{
    quad *q = ctx;
    q->calls++;
    (void)mu;
    *viol = 0.0;
    if (q->sleep_us) {
        struct timespec ts = {0, 1000L * q->sleep_us};
        nanosleep(&ts, NULL);
    }
    double s = 0.0;
    for (size_t i = 0; i < q->n; i++) {
        double e = x[i] - q->c[i];
        s += 0.5 * q->lam[i] * e * e;
        g[i] = (q->wrong_gradient ? -1.0 : 1.0) * q->lam[i] * e;
    }
    *f = (q->nan_from && q->calls >= q->nan_from) ? NAN : s + q->offset;
    return 0;
}

static quad make_quad(size_t n, double cond)
{
    quad q = {n, malloc(n * sizeof(double)), malloc(n * sizeof(double)), 0, 0,
              0, 0, 0.0};
    uint64_t seed = 42;
    for (size_t i = 0; i < n; i++) {
        q.lam[i] = pow(cond, (double)i / (double)(n - 1));
        q.c[i] = tu_uniform(&seed, -1.0, 1.0);
    }
    return q;
}

static void free_quad(quad *q)
{
    free(q->lam);
    free(q->c);
}

/* ---- tests ---- */

static void test_rosenbrock(size_t n)
{
    double *x = malloc(n * sizeof *x), *one = malloc(n * sizeof *one);
    for (size_t i = 0; i < n; i++) {
        x[i] = i % 2 ? 1.0 : -1.2;
        one[i] = 1.0;
    }
    wolfe_check w = {0, 0};
    ps_minimizer mz = {n, 0, rosenbrock, &n, check_wolfe, &w, 0.0};
    ps_options o = opts();
    ps_result r;
    int st = ps_minimize_cpu(&mz, &o, x, &r);
    printf("rosenbrock n=%zu: status %d, %lld iterations, %lld evaluations, "
           "f %.3g, accepted %lld\n",
           n, st, (long long)r.iterations, (long long)r.evaluations, r.f,
           (long long)w.accepted);
    assert_int_equal(st, PS_CONVERGED);
    assert_true(tu_compare("x - 1", x, one, n, 1e-6, 0.0));
    assert_true(r.f < 1e-12);
    assert_int_equal(w.violations, 0);
    assert_int_equal(w.accepted, r.iterations);
    assert_int_equal((int64_t)r.history_len, r.iterations + 1);
    ps_result_free(&r);
    free(x);
    free(one);
}

static void rosenbrock_2(void **state)
{
    test_rosenbrock(2);
}

static void rosenbrock_1000(void **state)
{
    test_rosenbrock(1000);
}

static void quadratic_cond_1e4(void **state)
{
    size_t n = 1000;
    quad q = make_quad(n, 1e4);
    double *x = calloc(n, sizeof *x);
    wolfe_check w = {0, 0};
    ps_minimizer mz = {n, 0, quadratic, &q, check_wolfe, &w, 0.0};
    ps_options o = opts();
    ps_result r;
    int st = ps_minimize_cpu(&mz, &o, x, &r);
    printf("quadratic cond 1e4: status %d, %lld iterations, f %.3g\n", st,
           (long long)r.iterations, r.f);
    assert_int_equal(st, PS_CONVERGED);
    /* |x - c| <= ||g|| / min(lam) = ||g|| <= 1e-10 ||g0|| */
    assert_true(tu_compare("x - c", x, q.c, n, 1e-10 * r.history[0].gnorm, 0.0));
    assert_int_equal(w.violations, 0);
    /* history is monotone in f under sufficient decrease */
    for (size_t i = 1; i < r.history_len; i++)
        assert_true(r.history[i].f <= r.history[i - 1].f);
    ps_result_free(&r);
    free(x);
    free_quad(&q);
}

/*
 * Penalty rounds (opt/solver.h) on f(x) = |x - a|^2 subject to |x|^2 <= 1
 * met by penalty: F = f + mu max(0, |x|^2 - 1)^2, violation
 * max(0, |x|^2 - 1); a has |a| = 2, so every round's minimizer violates by
 * about 1/(2 mu) (the constrained minimizer is a/2). n = 50.
 */
typedef struct ball_pen {
    size_t n;
    double a[50];
} ball_pen;

static int ball_penalty(void *ctx, const double *x, double mu, double *f, double *g, double *viol)
{
    const ball_pen *b = ctx;
    double r2 = 0.0, d2 = 0.0;
    for (size_t i = 0; i < b->n; i++) {
        r2 += x[i] * x[i];
        d2 += (x[i] - b->a[i]) * (x[i] - b->a[i]);
    }
    const double c = r2 - 1.0, cp = c > 0.0 ? c : 0.0;
    *f = d2 + mu * cp * cp;
    *viol = cp;
    if (g)
        for (size_t i = 0; i < b->n; i++)
            g[i] = 2.0 * (x[i] - b->a[i]) + mu * 4.0 * cp * x[i];
    return 0;
}

static void penalty_rounds(void **state)
{
    (void)state;
    ball_pen b = {50, {0}};
    uint64_t seed = 11;
    double norm = 0.0;
    for (size_t i = 0; i < b.n; i++) {
        b.a[i] = tu_uniform(&seed, -1.0, 1.0);
        norm += b.a[i] * b.a[i];
    }
    for (size_t i = 0; i < b.n; i++)
        b.a[i] *= 2.0 / sqrt(norm);
    for (int limit = 0; limit < 2; limit++) {
        double x[50] = {0};
        ps_minimizer mz = {b.n, 1, ball_penalty, &b, NULL, NULL, 0.0};
        ps_options o = opts();
        o.max_rounds = limit ? 2 : 0; /* the default 8, then 2 */
        ps_result r;
        int st = ps_minimize_cpu(&mz, &o, x, &r);
        double r2 = 0.0, dist = 0.0;
        for (size_t i = 0; i < b.n; i++) {
            r2 += x[i] * x[i];
            dist = fmax(dist, fabs(x[i] - 0.5 * b.a[i]));
        }
        printf("penalty rounds (max %d): status %d, %d rounds, mu %g, violation %.3e, |x|^2 %.6f, "
               "%lld iterations, %lld evaluations, max|x - a/2| %.2e\n",
               limit ? 2 : 8, st, r.rounds, r.mu, r.violation, r2, (long long)r.iterations,
               (long long)r.evaluations, dist);
        /* the rounds the history shows: non-decreasing, from 0 to the last */
        assert_int_equal(r.history[0].round, 0);
        for (size_t i = 1; i < r.history_len; i++)
            assert_true(r.history[i].round == r.history[i - 1].round ||
                        r.history[i].round == r.history[i - 1].round + 1);
        assert_int_equal(r.history[r.history_len - 1].round, r.rounds - 1);
        assert_true(r.mu == pow(10.0, r.rounds - 1)); /* mu0 = 1, x10 per round */
        assert_true(fabs(r.violation - fmax(0.0, r2 - 1.0)) <= 1e-15);
        if (!limit) {
            assert_true(st == PS_CONVERGED || st == PS_CONVERGED_FTOL);
            assert_true(r.rounds >= 3 && r.rounds <= 8);
            assert_true(r.violation <= 1e-3);
            assert_true(dist <= 1e-3);
            /* f at a round's start jumps up with mu: the history's f is
             * not monotone across rounds, but is within each (up to the
             * line search's noise allowance, fnoise 1e-12 |f|) */
            for (size_t i = 1; i < r.history_len; i++)
                if (r.history[i].round == r.history[i - 1].round)
                    assert_true(r.history[i].f <= r.history[i - 1].f + 1e-12 * fabs(r.history[i - 1].f));
        } else {
            assert_int_equal(st, PS_CONSTRAINT_VIOLATED);
            assert_int_equal(r.rounds, 2);
            assert_true(r.violation > 1e-3);
        }
        ps_result_free(&r);
    }
}

/* Run the quadratic with options o; returns the status. */
static int run_quad(ps_options *o, quad *q, double *x, ps_result *r)
{
    for (size_t i = 0; i < q->n; i++)
        x[i] = 0.0;
    ps_minimizer mz = {q->n, 0, quadratic, q, NULL, NULL, 0.0};
    return ps_minimize_cpu(&mz, o, x, r);
}

static void stop_rules(void **state)
{
    size_t n = 200;
    quad q = make_quad(n, 1e3);
    double *x = malloc(n * sizeof *x);
    ps_result r;
    ps_options o;

    o = opts(); /* gradient */
    o.gtol = 1e-3;
    assert_int_equal(run_quad(&o, &q, x, &r), PS_CONVERGED);
    printf("gtol: %lld iterations, |g| %g |g0| %g\n", (long long)r.iterations,
           r.gnorm, r.history[0].gnorm);
    assert_true(r.gnorm <= 1e-3 * r.history[0].gnorm);
    ps_result_free(&r);

    o = opts(); /* relative decrease over `past` iterations */
    o.gtol = 0.0;
    o.ftol = 1e-6;
    o.past = 3;
    q.offset = 1.0; /* minimum value 1: the relative decrease vanishes */
    assert_int_equal(run_quad(&o, &q, x, &r), PS_CONVERGED_FTOL);
    q.offset = 0.0;
    size_t k = r.history_len - 1;
    assert_true(r.history[k - 3].f - r.history[k].f <= 1e-6 * fabs(r.history[k].f));
    assert_true(r.history[k - 4].f - r.history[k - 1].f > 1e-6 * fabs(r.history[k - 1].f));
    ps_result_free(&r);

    o = opts(); /* iterations */
    o.max_iterations = 7;
    assert_int_equal(run_quad(&o, &q, x, &r), PS_MAX_ITERATIONS);
    assert_int_equal(r.iterations, 7);
    ps_result_free(&r);

    o = opts(); /* evaluations */
    o.max_evaluations = 5;
    assert_int_equal(run_quad(&o, &q, x, &r), PS_MAX_EVALUATIONS);
    assert_true(r.evaluations == 5);
    ps_result_free(&r);

    o = opts(); /* time */
    o.time_limit = 0.05;
    q.sleep_us = 5000;
    assert_int_equal(run_quad(&o, &q, x, &r), PS_TIME_LIMIT);
    assert_true(r.seconds >= 0.05 && r.seconds < 5.0);
    q.sleep_us = 0;
    ps_result_free(&r);

    o = opts(); /* a line search that cannot succeed: gradient of the wrong sign */
    q.wrong_gradient = 1;
    assert_int_equal(run_quad(&o, &q, x, &r), PS_ERR_LINE_SEARCH);
    for (size_t i = 0; i < n; i++) /* the last good point: the start */
        assert_true(x[i] == 0.0);
    assert_true(r.iterations == 0);
    q.wrong_gradient = 0;
    ps_result_free(&r);

    o = opts(); /* NaN at the start point */
    q.calls = 0;
    q.nan_from = 1;
    assert_int_equal(run_quad(&o, &q, x, &r), PS_ERR_OBJECTIVE);
    q.nan_from = 0;
    ps_result_free(&r);

    free(x);
    free_quad(&q);
}

static int cancel_at_3(void *user, const ps_progress *p)
{
    (void)user;
    return p->iteration >= 3;
}

static void cancel_rule(void **state)
{
    size_t n = 100;
    quad q = make_quad(n, 1e3);
    double *x = malloc(n * sizeof *x);
    ps_options o = opts();
    o.progress = cancel_at_3;
    ps_result r;
    assert_int_equal(run_quad(&o, &q, x, &r), PS_CANCELLED);
    assert_int_equal(r.iterations, 3);
    /* the returned x is the point of iteration 3: its f is the history's */
    double f, *g = malloc(n * sizeof *g);
    double viol;
    quadratic(&q, x, 0.0, &f, g, &viol);
    assert_true(f == r.history[3].f && f == r.f);
    ps_result_free(&r);
    free(g);
    free(x);
    free_quad(&q);
}

/* f = 0.5 |x - c|^2 inside the ball |x| <= 0.8, NaN outside. */
typedef struct ball {
    size_t n;
    int nan_calls;
} ball;

static int nan_outside_ball(void *ctx, const double *x, double mu, double *f, double *g, double *viol)
{
    ball *b = ctx;
    double s = 0.0, r2 = 0.0, c = 0.5 / sqrt((double)b->n);
    (void)mu;
    *viol = 0.0;
    for (size_t i = 0; i < b->n; i++) {
        s += 0.5 * (x[i] - c) * (x[i] - c);
        r2 += x[i] * x[i];
        g[i] = x[i] - c;
    }
    if (r2 > 0.64) {
        b->nan_calls++;
        s = NAN;
    }
    *f = s;
    return 0;
}

/* A NaN in a line-search trial shrinks the step instead of poisoning the
 * state: the first trial (unit length step to |x| = 1) is NaN, the search
 * bisects back inside the ball and the solve converges to c. */
static void nan_trial_shrinks(void **state)
{
    size_t n = 50;
    ball b = {n, 0};
    double *x = calloc(n, sizeof *x), *c = malloc(n * sizeof *c);
    for (size_t i = 0; i < n; i++)
        c[i] = 0.5 / sqrt((double)n);
    ps_minimizer mz = {n, 0, nan_outside_ball, &b, NULL, NULL, 0.0};
    ps_options o = opts();
    ps_result r;
    int st = ps_minimize_cpu(&mz, &o, x, &r);
    printf("nan ball: status %d, %lld NaN trials, f %.3g\n", st,
           (long long)b.nan_calls, r.f);
    assert_true(st == PS_CONVERGED);
    assert_true(b.nan_calls >= 1);
    assert_true(isfinite(r.f));
    assert_true(tu_compare("x - c", x, c, n, 1e-8, 0.0));
    ps_result_free(&r);
    free(x);
    free(c);
}

/*
 * The compact L-BFGS direction (ps_lbfgs_direction, column-oriented
 * substitutions) against the inverse Hessian formed densely by the BFGS
 * recursion H <- (I - rho s y^T) H (I - rho y s^T) + rho s s^T from
 * H = gamma I over the pairs oldest first (Nocedal & Wright eq. 7.19):
 * d = -H g and g.d within 1e-12 of |d|, for random pairs in memories of
 * every shape (m, k <= m, newest slot, slots wrapping).
 */
static void direction_dense(void **state)
{
    enum { NMAX = 40 };
    static const int ms[5] = {1, 3, 8, 17, 32};
    double *S = malloc(PS_MAX_MEMORY * NMAX * sizeof *S), *Y = malloc(PS_MAX_MEMORY * NMAX * sizeof *Y);
    double *H = malloc(NMAX * NMAX * sizeof *H);
    double g[NMAX], Hy[NMAX], d[NMAX], dref[NMAX];
    ps_lbfgs *lb = malloc(sizeof *lb);
    uint64_t seed = 7;
    double worst = 0.0;
    for (int trial = 0; trial < 500; trial++) {
        int m = ms[trial % 5];
        int k = 1 + (int)(tu_next(&seed) % (uint64_t)m);
        int newest = (int)(tu_next(&seed) % (uint64_t)m);
        int n = k + 2 + (int)(tu_next(&seed) % (uint64_t)(NMAX - k - 1));
        lp_pairs(&seed, n, k, S, Y, g);
        lp_fill(lb, m, k, newest, n, S, Y, g);
        tu_poison(lb->cs, PS_MAX_MEMORY);
        tu_poison(lb->cy, PS_MAX_MEMORY);
        ps_lbfgs_direction(lb);
        assert_int_equal(lb->k, k); /* a descent direction: no fallback */

        /* H densely, then d_ref = -H g */
        const double *sn = S + (k - 1) * n, *yn = Y + (k - 1) * n;
        double gamma = lp_dot(sn, yn, n) / lp_dot(yn, yn, n);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                H[i * n + j] = i == j ? gamma : 0.0;
        for (int l = 0; l < k; l++) {
            const double *s = S + l * n, *y = Y + l * n;
            double rho = 1.0 / lp_dot(y, s, n);
            for (int i = 0; i < n; i++)
                Hy[i] = lp_dot(H + i * n, y, n);
            double yHy = lp_dot(y, Hy, n);
            for (int i = 0; i < n; i++)
                for (int j = 0; j < n; j++)
                    H[i * n + j] += -rho * (s[i] * Hy[j] + Hy[i] * s[j]) +
                                    (rho * rho * yHy + rho) * s[i] * s[j];
        }
        double dmax = 0.0;
        for (int i = 0; i < n; i++) {
            dref[i] = -lp_dot(H + i * n, g, n);
            dmax = fmax(dmax, fabs(dref[i]));
        }
        /* d from the coefficients: every slot of the m (unused ones 0) */
        for (int i = 0; i < n; i++) {
            double v = lb->cg * g[i];
            for (int l = 0; l < k; l++) {
                int sl = lp_slot(m, k, newest, l);
                v += lb->cs[sl] * S[l * n + i] + lb->cy[sl] * Y[l * n + i];
            }
            d[i] = v;
        }
        for (int l = k; l < m; l++) {
            int sl = lp_slot(m, k, newest, l);
            assert_true(lb->cs[sl] == 0.0 && lb->cy[sl] == 0.0);
        }
        char what[96];
        snprintf(what, sizeof what, "direction m=%d k=%d newest=%d n=%d", m, k, newest, n);
        int ok = 1;
        for (int i = 0; i < n; i++) {
            double e = fabs(d[i] - dref[i]) / dmax;
            worst = fmax(worst, e);
            ok &= e <= 1e-12;
        }
        if (!ok)
            tu_compare(what, d, dref, (size_t)n, 1e-12 * dmax, 0.0);
        assert_true(ok);
        double gd = lp_dot(g, dref, n);
        if (!(fabs(lb->gd - gd) <= 1e-12 * fabs(gd)))
            printf("%s: g.d %.17g ref %.17g\n", what, lb->gd, gd);
        assert_true(fabs(lb->gd - gd) <= 1e-12 * fabs(gd));
    }
    printf("direction vs dense H: 500 memories, worst |d - d_ref| / |d_ref|_inf %.3g\n", worst);
    free(S);
    free(Y);
    free(H);
    free(lb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rosenbrock_2),
        cmocka_unit_test(rosenbrock_1000),
        cmocka_unit_test(quadratic_cond_1e4),
        cmocka_unit_test(stop_rules),
        cmocka_unit_test(penalty_rounds),
        cmocka_unit_test(cancel_rule),
        cmocka_unit_test(nan_trial_shrinks),
        cmocka_unit_test(direction_dense),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
