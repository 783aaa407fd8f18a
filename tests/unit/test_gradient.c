/*
 * The exact gradient of the discrete map (docs/model.md) against central
 * finite differences in float64, for every loss type, with and without
 * relaxation, with and without a b1_max reparametrization, with lambda = 0
 * and lambda > 0, on random problems (random positions, df, B1 scale,
 * weights including a zero, m0 and targets on the unit sphere, a random
 * three-axis gradient waveform and a random pulse). Spin 0 of every problem
 * sits at r = 0 with df = 0 and the pulse is zero at every third step, so
 * that spin has |b| = 0 exactly there: the gradient must be right at the
 * rotation's series limit, and the finite differences step across it.
 * Several transmit channels (SPEC 1.1): the same checks for nc = 1, 2, 3
 * and 8 through random complex b1maps, over all 2 nc Nt unknowns.
 *
 * Accuracy of the check: F is O(10) and computed to ~1e-15 relative, so the
 * rounding part of a central difference is ~eps |F| / h; with h = 1e-6
 * times the scale of the variables (h ~ 3e-7 G for the pulse, ~2e-6 for z)
 * that is ~1e-8 against gradients of O(1), and the truncation part
 * h^2 |F'''|/6 is smaller still. The assertion is |fd - g| <= 1e-6 max|g|
 * for every element: two orders of magnitude above the expected noise, and
 * five below the size of any missing or wrong term.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "cpu/objective.h"
#include "model/bloch_math.h"
#include "model/design.h"
#include "persolve.h"
#include "reference/ref_bloch.h"
#include "test_util.h"

#define NS 12
#define NT                                                                     \
    47 /* segments of 7 steps in src/cpu/objective.c, the last one partial */
#define FD_REL_STEP 1e-6
#define FD_TOL 1e-6
#define B1MAX 0.2 /* G: below the random pulse's peaks, so tanh saturates */

typedef struct grad_case {
    ps_loss loss;
    int relax;
    double lambda;
    int b1max;
    size_t nc; /* 0: one channel by the B1 scale; >= 1: a complex b1map */
} grad_case;

/* F (and optionally the gradient) in the chosen variables. */
typedef int (*objective_fn)(const ps_problem *p, const double *x, double *f,
                            double *grad);

static int eval_pulse(const ps_problem *p, const double *x, double *f,
                      double *grad)
{
    ps_options o;
    ps_options_default(&o);
    o.backend = PS_BACKEND_CPU;
    o.precision = PS_PRECISION_DOUBLE;
    o.threads = 1; /* thousands of tiny evaluations: no thread start-up per
                      call (results do not depend on the thread count, see
                      test_eval_reference) */
    return ps_eval(p, &o, x, f, grad);
}

static int eval_z(const ps_problem *p, const double *x, double *f, double *grad)
{
    return ps_objective_cpu(p, PS_PRECISION_DOUBLE, 1, x, f, grad, NULL);
}

/*
 * Central differences of fn at x (n variables) against its gradient.
 * Prints the worst element and returns the worst |fd - g| / max|g|.
 */
static double fd_check(const char *what, const ps_problem *p, objective_fn fn,
                       const double *x0, size_t n)
{
    double *x = malloc(n * sizeof *x), *g = malloc(n * sizeof *g);
    assert_non_null(x);
    assert_non_null(g);
    memcpy(x, x0, n * sizeof *x);
    double f = PS_POISON;
    tu_poison(g, n);
    assert_int_equal(fn(p, x, &f, g), PS_CONVERGED);
    assert_true(isfinite(f) && f != PS_POISON);

    double scale = 0.0, gmax = 0.0;
    for (size_t i = 0; i < n; i++) {
        scale = fmax(scale, fabs(x0[i]));
        assert_true(g[i] != PS_POISON && isfinite(g[i]));
        gmax = fmax(gmax, fabs(g[i]));
    }
    assert_true(gmax > 0.0);
    double h = FD_REL_STEP * scale;
    size_t worst = 0;
    double worst_err = -1.0, worst_fd = 0.0;
    for (size_t i = 0; i < n; i++) {
        double fp, fm;
        x[i] = x0[i] + h;
        assert_int_equal(fn(p, x, &fp, NULL), PS_CONVERGED);
        x[i] = x0[i] - h;
        assert_int_equal(fn(p, x, &fm, NULL), PS_CONVERGED);
        x[i] = x0[i];
        /* the actual step is (x0 + h) - (x0 - h), exact up to rounding */
        double fd = (fp - fm) / ((x0[i] + h) - (x0[i] - h));
        double err = fabs(fd - g[i]);
        if (err > worst_err) {
            worst_err = err;
            worst = i;
            worst_fd = fd;
        }
    }
    double rel = worst_err / gmax;
    printf("%-44s max|g| %.3e worst [%3zu] g %+.12e fd %+.12e rel %.2e %s\n",
           what, gmax, worst, g[worst], worst_fd, rel,
           rel <= FD_TOL ? "ok" : "FAIL");
    free(x);
    free(g);
    return rel;
}

/*
 * dF/dz from dF/db by the chain rule of b = bm tanh(r) z / r, r = |z|,
 * written here independently of src/model/bloch_math.h:
 *   db/dz = bm [ t I + (t'(r)/r) z z^T ],  t = tanh(r)/r,
 *   t'(r)/r = (r sech^2(r) - tanh(r)) / r^3  (-> -2/3 as r -> 0).
 */
static void chain_rule(double bm, const double *z, const double *gb, double *gz,
                       size_t nt)
{
    for (size_t k = 0; k < nt; k++) {
        double p = z[k], q = z[nt + k], r = hypot(p, q);
        double t, tpr;
        if (r == 0.0) {
            t = 1.0;
            tpr = -2.0 / 3.0;
        } else {
            double th = tanh(r), ch = cosh(r);
            t = th / r;
            tpr = (r / (ch * ch) - th) / (r * r * r);
        }
        double zg = p * gb[k] + q * gb[nt + k];
        gz[k] = bm * (t * gb[k] + tpr * p * zg);
        gz[nt + k] = bm * (t * gb[nt + k] + tpr * q * zg);
    }
}

static void run_case(const grad_case *c, uint64_t seed)
{
    ref_problem_opts ro = {
        .ns = NS,
        .nt = NT,
        .loss = c->loss,
        .relax = c->relax,
        .lambda = c->lambda,
        .b1_max = c->b1max ? B1MAX : PS_B1MAX_NONE,
        .zero_spin = 1,
        .nc = c->nc,
        .seed = seed,
    };
    ref_problem rp;
    assert_int_equal(ref_problem_random(&ro, &rp), 0);
    ps_problem *p = NULL;
    assert_int_equal(ps_problem_create(&rp.d, &p), PS_CONVERGED);
    const size_t nc = c->nc ? c->nc : 1, nx = 2 * nc * NT;
    assert_int_equal(ps_problem_nx(p), nx);
    const char *rl[3] = {"none", "mild", "strong"};
    char what[192], chan[32] = "";
    if (c->nc)
        snprintf(chan, sizeof chan, "nc %d ", (int)c->nc);

    /* gradient w.r.t. the physical pulse (ps_eval) */
    snprintf(what, sizeof what, "%s%s relax %s lambda %g pulse%s", chan,
             ps_loss_name(c->loss), rl[c->relax], c->lambda,
             c->b1max ? " (b1_max set)" : "");
    assert_true(fd_check(what, p, eval_pulse, rp.x, nx) <= FD_TOL);

    if (c->b1max) {
        /* gradient w.r.t. the optimizer's z (ps_objective_cpu) */
        snprintf(what, sizeof what, "%s%s relax %s lambda %g b1_max z", chan,
                 ps_loss_name(c->loss), rl[c->relax], c->lambda);
        assert_true(fd_check(what, p, eval_z, rp.z, nx) <= FD_TOL);

        /* the pulse of any z respects the peak constraint on every channel,
         * and F(z) = F(pulse(z)) */
        double *b = malloc(4 * nx * sizeof *b);
        assert_non_null(b);
        double *gz = b + nx, *gb = b + 2 * nx, *gzr = b + 3 * nx, fz, fb;
        tu_poison(b, nx);
        ps_design_pulse_of_x(p, rp.z, b);
        for (size_t ch = 0; ch < nc; ch++)
            for (size_t k = 0; k < NT; k++)
                assert_true(hypot(b[2 * ch * NT + k], b[(2 * ch + 1) * NT + k]) <
                            B1MAX);
        assert_int_equal(eval_z(p, rp.z, &fz, gz), PS_CONVERGED);
        assert_int_equal(eval_pulse(p, b, &fb, NULL), PS_CONVERGED);
        assert_true(fabs(fz - fb) <= 1e-14 * fabs(fb));

        /* and dF/dz equals the chain rule, channel by channel, applied to
         * the independent reference's dF/db (1e-10 relative to max|g|: both
         * exact, float64) */
        double fr;
        assert_int_equal(ref_eval(&rp.d, b, &fr, gb, NULL), 0);
        for (size_t ch = 0; ch < nc; ch++)
            chain_rule(B1MAX, rp.z + 2 * ch * NT, gb + 2 * ch * NT,
                       gzr + 2 * ch * NT, NT);
        double gmax = 0.0;
        for (size_t i = 0; i < nx; i++)
            gmax = fmax(gmax, fabs(gzr[i]));
        assert_true(tu_compare("  dF/dz vs chain rule on the reference", gz,
                               gzr, nx, 1e-10 * gmax, 0.0));
        free(b);
    }
    ps_problem_free(p);
    ref_problem_free(&rp);
}

/* Every loss, relaxation none/mild, b1_max off/on, lambda = 0. */
static void test_fd_all_losses(void **state)
{
    (void)state;
    uint64_t seed = 1000;
    for (int loss = 0; loss < 4; loss++)
        for (int relax = 0; relax < 2; relax++)
            for (int b1max = 0; b1max < 2; b1max++) {
                grad_case c = {(ps_loss)loss, relax, 0.0, b1max, 0};
                run_case(&c, seed++);
            }
}

/* lambda > 0 (the power penalty's gradient 2 lambda b, and through z),
 * with strong relaxation (T2 a fraction of the pulse). */
static void test_fd_lambda(void **state)
{
    (void)state;
    uint64_t seed = 2000;
    for (int loss = 0; loss < 4; loss++) {
        grad_case c = {(ps_loss)loss, REF_RELAX_STRONG, 0.7, loss % 2, 0};
        run_case(&c, seed++);
    }
}

/*
 * Several transmit channels (SPEC 1.1): nc = 1, 2, 3, 8 through random
 * complex b1maps (spin 1 with a purely imaginary S on channel 0), every
 * loss, each twice: mild relaxation with lambda = 0 and no peak limit, and
 * strong relaxation with lambda = 0.7 and b1_max (the gradient in the
 * reparametrized z of every channel as well). Every one of the 2 nc Nt
 * elements is checked, so a channel's u and v swapped, a wrong sign of
 * Im S or a channel left out fails.
 */
static void test_fd_channels(void **state)
{
    (void)state;
    const size_t ncs[4] = {1, 2, 3, 8};
    uint64_t seed = 4000;
    for (int ni = 0; ni < 4; ni++)
        for (int loss = 0; loss < 4; loss++) {
            grad_case a = {(ps_loss)loss, REF_RELAX_MILD, 0.0, 0, ncs[ni]};
            run_case(&a, seed++);
            grad_case b = {(ps_loss)loss, REF_RELAX_STRONG, 0.7, 1, ncs[ni]};
            run_case(&b, seed++);
        }
}

/* The finite-difference check can fail: ps_eval's gradient with one
 * element of the last channel moved by 1e-5 max|g| (ten times the
 * tolerance) must be caught, for every loss. */
static size_t perturb_index;
static double perturb_by;

static int eval_pulse_perturbed(const ps_problem *p, const double *x, double *f,
                                double *grad)
{
    int st = eval_pulse(p, x, f, grad);
    if (grad)
        grad[perturb_index] += perturb_by;
    return st;
}

static void test_fd_check_catches(void **state)
{
    (void)state;
    for (int loss = 0; loss < 4; loss++) {
        ref_problem_opts ro = {.ns = NS, .nt = NT, .loss = (ps_loss)loss,
                               .relax = REF_RELAX_MILD, .lambda = 0.3,
                               .b1_max = PS_B1MAX_NONE, .zero_spin = 1,
                               .nc = 3, .seed = 4500 + (uint64_t)loss};
        ref_problem rp;
        assert_int_equal(ref_problem_random(&ro, &rp), 0);
        ps_problem *p = NULL;
        assert_int_equal(ps_problem_create(&rp.d, &p), PS_CONVERGED);
        size_t nx = 2 * 3 * NT;
        double f, *g = malloc(nx * sizeof *g);
        assert_non_null(g);
        assert_int_equal(eval_pulse(p, rp.x, &f, g), PS_CONVERGED);
        double gmax = 0.0;
        for (size_t i = 0; i < nx; i++)
            gmax = fmax(gmax, fabs(g[i]));
        perturb_index = (5 * NT + 17) % nx; /* v of channel 2, step 17 */
        perturb_by = 10.0 * FD_TOL * gmax;
        char what[96];
        snprintf(what, sizeof what, "nc 3 %s, perturbed (must FAIL)",
                 ps_loss_name((ps_loss)loss));
        assert_true(fd_check(what, p, eval_pulse_perturbed, rp.x, nx) > FD_TOL);
        free(g);
        ps_problem_free(p);
        ref_problem_free(&rp);
    }
}

/*
 * Only the |b| = 0 spin: r = 0, df = 0, and a pulse that is zero at every
 * third step, so the chain has exact identity steps between rotations, plus
 * an all-zero pulse (every step the identity; the gradient is then the
 * first-order term of the rotation alone).
 */
static void test_fd_zero_field_spin(void **state)
{
    (void)state;
    for (int loss = 0; loss < 4; loss++) {
        ref_problem_opts ro = {.ns = 1,
                               .nt = NT,
                               .loss = (ps_loss)loss,
                               .relax = loss % 2,
                               .lambda = 0.0,
                               .b1_max = PS_B1MAX_NONE,
                               .zero_spin = 1,
                               .seed = 3000 + (uint64_t)loss};
        ref_problem rp;
        assert_int_equal(ref_problem_random(&ro, &rp), 0);
        /* m0 off the z axis so that every loss has a gradient at x = 0 */
        rp.m0[0] = 0.6;
        rp.m0[1] = 0.0;
        rp.m0[2] = 0.8;
        ps_problem *p = NULL;
        assert_int_equal(ps_problem_create(&rp.d, &p), PS_CONVERGED);
        char what[96];
        snprintf(what, sizeof what, "%s |b|=0 spin, pulse zero every 3rd",
                 ps_loss_name((ps_loss)loss));
        assert_true(fd_check(what, p, eval_pulse, rp.x, 2 * NT) <= FD_TOL);

        /* all-zero pulse: x0 = 0, so the FD step is taken absolute, 1e-7 G */
        double x[2 * NT] = {0}, g[2 * NT], f;
        tu_poison(g, 2 * NT);
        assert_int_equal(eval_pulse(p, x, &f, g), PS_CONVERGED);
        double gmax = 0.0, worst = 0.0;
        for (size_t i = 0; i < 2 * NT; i++) {
            assert_true(isfinite(g[i]) && g[i] != PS_POISON);
            gmax = fmax(gmax, fabs(g[i]));
        }
        for (size_t i = 0; i < 2 * NT; i++) {
            double fp, fm, h = 1e-7;
            x[i] = h;
            assert_int_equal(eval_pulse(p, x, &fp, NULL), PS_CONVERGED);
            x[i] = -h;
            assert_int_equal(eval_pulse(p, x, &fm, NULL), PS_CONVERGED);
            x[i] = 0.0;
            worst = fmax(worst, fabs((fp - fm) / (2 * h) - g[i]));
        }
        printf("%-44s max|g| %.3e worst rel %.2e\n", "  all-zero pulse", gmax,
               worst / gmax);
        /* dM/dv = gamma s dt (-Mz, 0, Mx) != 0 for this m0, every loss */
        assert_true(gmax > 0.0);
        assert_true(worst <= FD_TOL * fmax(gmax, 1e-3));
        ps_problem_free(p);
        ref_problem_free(&rp);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fd_all_losses),
        cmocka_unit_test(test_fd_lambda),
        cmocka_unit_test(test_fd_zero_field_spin),
        cmocka_unit_test(test_fd_channels),
        cmocka_unit_test(test_fd_check_catches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
