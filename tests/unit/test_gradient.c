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
 * and 8 through random complex b1maps, over all 2 nc Nt unknowns. The
 * constraints (SPEC 1.3): the local-SAR penalty of a penalty round active
 * (random Hermitian VOPs, some violated, some not) with one peak limit per
 * channel, in the optimizer's variables, against finite differences and
 * against the penalty written here from the SPEC formulas on top of the
 * independent reference.
 *
 * Accuracy of the check: F is O(10) and computed to ~1e-15 relative, so the
 * rounding part of a central difference is ~eps |F| / h; with h = 1e-6
 * times the scale of the variables (h ~ 3e-7 G for the pulse, ~2e-6 for z)
 * that is ~1e-8 against gradients of O(1), and the truncation part
 * h^2 |F'''|/6 is smaller still. The assertion is |fd - g| <= 1e-6 max|g|
 * for every element: two orders of magnitude above the expected noise, and
 * five below the size of any missing or wrong term.
 */
#include <complex.h>
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
#define NT 47
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

/*
 * ---- the SAR penalty (SPEC 1.3) ----
 * SAR_q = (dt / TR) sum_k b_k^H Q_q b_k and the round's penalty
 * mu sum_q max(0, SAR_q / sar_max - 1)^2, written here in plain complex
 * arithmetic (the library's is src/model/constraints.h).
 */
#define SAR_NQ 5
#define SAR_TR 0.01
#define SAR_MU 3.7

static double sar_mu; /* the penalty weight eval_z_penalty evaluates at */

static int eval_z_penalty(const ps_problem *p, const double *x, double *f, double *grad)
{
    return ps_objective_cpu_penalty(p, PS_PRECISION_DOUBLE, 1, sar_mu, x, f, grad, NULL, NULL);
}

/* Random Hermitian positive definite VOPs Q = A A^H / nc + 0.1 I. */
static void random_vops(size_t nc, uint64_t seed, double *vop)
{
    double A[2 * REF_MAX_NC * REF_MAX_NC];
    for (size_t q = 0; q < SAR_NQ; q++) {
        for (size_t i = 0; i < 2 * nc * nc; i++)
            A[i] = tu_uniform(&seed, -1.0, 1.0);
        double *Q = vop + 2 * nc * nc * q;
        for (size_t a = 0; a < nc; a++)
            for (size_t c = 0; c < nc; c++) {
                double complex acc = a == c ? 0.1 : 0.0;
                for (size_t l = 0; l < nc; l++)
                    acc += (A[2 * (a * nc + l)] + I * A[2 * (a * nc + l) + 1]) *
                           conj(A[2 * (c * nc + l)] + I * A[2 * (c * nc + l) + 1]) / (double)nc;
                Q[2 * (a * nc + c)] = creal(acc);
                Q[2 * (a * nc + c) + 1] = a == c ? 0.0 : cimag(acc);
            }
    }
}

/* SAR_q of the physical pulse b (layout of x) into sar[SAR_NQ]. */
static void sar_values(size_t nc, size_t nt, double dt, const double *vop, const double *b, double *sar)
{
    for (size_t q = 0; q < SAR_NQ; q++) {
        const double *Q = vop + 2 * nc * nc * q;
        double sum = 0.0;
        for (size_t k = 0; k < nt; k++)
            for (size_t a = 0; a < nc; a++)
                for (size_t c = 0; c < nc; c++) {
                    double complex ba = b[2 * a * nt + k] + I * b[(2 * a + 1) * nt + k];
                    double complex bc = b[2 * c * nt + k] + I * b[(2 * c + 1) * nt + k];
                    sum += creal(conj(ba) * (Q[2 * (a * nc + c)] + I * Q[2 * (a * nc + c) + 1]) * bc);
                }
        sar[q] = dt / SAR_TR * sum;
    }
}

/*
 * nc channels, every loss, strong relaxation, lambda > 0, one peak limit
 * per channel and the SAR penalty at mu = SAR_MU with sar_max between the
 * VOPs' SAR values (at least one violated and one met, none within 0.1%
 * of the limit, where the penalty's second derivative jumps: a thousand
 * times the finite differences' step): dF/dz against
 * finite differences, and F and dF/dz against the reference's F and dF/db
 * plus the penalty written here, through the chain rule of every channel's
 * own limit. The penalty's share of the gradient is asserted large enough
 * to matter.
 */
static void run_sar_case(ps_loss loss, size_t nc, uint64_t seed)
{
    ref_problem_opts ro = {.ns = NS, .nt = NT, .loss = loss, .relax = REF_RELAX_STRONG,
                           .lambda = 0.3, .b1_max = PS_B1MAX_NONE, .zero_spin = 1,
                           .nc = nc, .seed = seed};
    ref_problem rp;
    assert_int_equal(ref_problem_random(&ro, &rp), 0);
    const size_t nx = 2 * nc * NT;
    double vop[2 * SAR_NQ * REF_MAX_NC * REF_MAX_NC], bm[REF_MAX_NC], sar[SAR_NQ];
    random_vops(nc, seed + 77, vop);
    uint64_t s2 = seed + 91;
    for (size_t c = 0; c < nc; c++)
        bm[c] = tu_uniform(&s2, 0.15, 0.3);
    ps_problem_desc d = rp.d;
    d.b1_max = PS_B1MAX_NONE;
    d.b1_max_channel = bm;
    d.nq = SAR_NQ;
    d.vop = vop;
    d.tr = SAR_TR;
    d.sar_max = 1.0; /* placed below, once the pulse's SAR is known */
    ps_problem *p = NULL;
    assert_int_equal(ps_problem_create(&d, &p), PS_CONVERGED);
    double *z = malloc(5 * nx * sizeof *z);
    assert_non_null(z);
    double *b = z + nx, *gz = z + 2 * nx, *gb = z + 3 * nx, *gzr = z + 4 * nx;
    ps_design_x_of_pulse(p, rp.x, z);
    ps_design_pulse_of_x(p, z, b);
    sar_values(nc, NT, d.dt, vop, b, sar);
    /* sar_max in the middle of the widest gap between two SAR values */
    double sorted[SAR_NQ], smax = 0.0, gap = -1.0;
    memcpy(sorted, sar, sizeof sorted);
    for (size_t i = 1; i < SAR_NQ; i++)
        for (size_t j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
            double t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    for (size_t i = 1; i < SAR_NQ; i++)
        if (sorted[i] - sorted[i - 1] > gap) {
            gap = sorted[i] - sorted[i - 1];
            smax = 0.5 * (sorted[i] + sorted[i - 1]);
        }
    ps_problem_free(p);
    d.sar_max = smax;
    assert_int_equal(ps_problem_create(&d, &p), PS_CONVERGED);
    int violated = 0, met = 0;
    double pen = 0.0, w[SAR_NQ];
    for (size_t q = 0; q < SAR_NQ; q++) {
        double c = sar[q] / smax - 1.0;
        assert_true(fabs(c) >= 1e-3);
        violated += c > 0.0;
        met += c < 0.0;
        pen += c > 0.0 ? c * c : 0.0;
        w[q] = c > 0.0 ? SAR_MU * 2.0 * c / smax * d.dt / SAR_TR : 0.0;
    }
    assert_true(violated >= 1 && met >= 1);

    char what[160];
    snprintf(what, sizeof what, "nc %zu %s SAR penalty (%d of %d violated), b1_max per channel z",
             nc, ps_loss_name(loss), violated, SAR_NQ);
    sar_mu = SAR_MU;
    assert_true(fd_check(what, p, eval_z_penalty, z, nx) <= FD_TOL);

    /* against the reference plus the penalty written here */
    double fz, fr, viol = -1.0;
    tu_poison(gz, nx);
    assert_int_equal(ps_objective_cpu_penalty(p, PS_PRECISION_DOUBLE, 1, SAR_MU, z, &fz, gz, NULL, &viol),
                     PS_CONVERGED);
    assert_int_equal(ref_eval(&d, b, &fr, gb, NULL), 0);
    fr += SAR_MU * pen;
    double vmax = 0.0;
    for (size_t q = 0; q < SAR_NQ; q++)
        vmax = fmax(vmax, sar[q] / smax - 1.0);
    printf("  F %.15e, reference + penalty %.15e; violation %.6f (here %.6f)\n", fz, fr, viol, vmax);
    assert_true(fabs(fz - fr) <= 1e-12 * fabs(fr));
    assert_true(fabs(viol - vmax) <= 1e-12);
    for (size_t q = 0; q < SAR_NQ; q++) /* + sum_q w_q 2 Q_q b_k */
        for (size_t k = 0; k < NT; k++)
            for (size_t a = 0; a < nc; a++) {
                const double *Q = vop + 2 * nc * nc * q;
                double complex qb = 0.0;
                for (size_t c = 0; c < nc; c++)
                    qb += (Q[2 * (a * nc + c)] + I * Q[2 * (a * nc + c) + 1]) *
                          (b[2 * c * NT + k] + I * b[(2 * c + 1) * NT + k]);
                gb[2 * a * NT + k] += w[q] * 2.0 * creal(qb);
                gb[(2 * a + 1) * NT + k] += w[q] * 2.0 * cimag(qb);
            }
    double gmax = 0.0, share = 0.0, g0;
    for (size_t c = 0; c < nc; c++)
        chain_rule(bm[c], z + 2 * c * NT, gb + 2 * c * NT, gzr + 2 * c * NT, NT);
    for (size_t i = 0; i < nx; i++)
        gmax = fmax(gmax, fabs(gzr[i]));
    assert_true(tu_compare("  dF/dz vs the reference + penalty, chain rule per channel", gz, gzr, nx,
                           1e-10 * gmax, 0.0));
    /* the penalty moves the gradient by far more than the tolerances */
    double *g0v = malloc(nx * sizeof *g0v);
    assert_non_null(g0v);
    assert_int_equal(ps_objective_cpu_penalty(p, PS_PRECISION_DOUBLE, 1, 0.0, z, &g0, g0v, NULL, NULL),
                     PS_CONVERGED);
    for (size_t i = 0; i < nx; i++)
        share = fmax(share, fabs(gz[i] - g0v[i]));
    printf("  penalty's share of the gradient: max %.3e of max|g| %.3e\n", share, gmax);
    assert_true(share >= 1e-2 * gmax);
    free(g0v);
    free(z);
    ps_problem_free(p);
    ref_problem_free(&rp);
}

static void test_fd_sar(void **state)
{
    (void)state;
    const size_t ncs[4] = {1, 2, 3, 8};
    uint64_t seed = 6000;
    for (int ni = 0; ni < 4; ni++)
        for (int loss = 0; loss < 4; loss++)
            run_sar_case((ps_loss)loss, ncs[ni], seed++);
}

/*
 * dF/dG (the gradient with respect to the gradient waveform, every axis:
 * SPEC 3's /eval/gradient_g, and what a designed axis's chain rule starts
 * from) against central differences of F in the problem's G, for every
 * loss, with relaxation and lambda, one channel and three: each of the 3
 * Nt elements, the problem rebuilt with G_ka moved by +-h.
 */
static void test_fd_gradient_g(void **state)
{
    (void)state;
    uint64_t seed = 8000;
    for (int nci = 0; nci < 2; nci++)
        for (int loss = 0; loss < 4; loss++) {
            ref_problem_opts ro = {.ns = NS, .nt = NT, .loss = (ps_loss)loss, .relax = 1 + loss % 2,
                                   .lambda = 0.3, .b1_max = PS_B1MAX_NONE, .zero_spin = 1,
                                   .nc = nci ? 3 : 0, .seed = seed++};
            ref_problem rp;
            assert_int_equal(ref_problem_random(&ro, &rp), 0);
            ps_problem *p = NULL;
            assert_int_equal(ps_problem_create(&rp.d, &p), PS_CONVERGED);
            const size_t nx = ps_problem_nx(p);
            double f, *grad = malloc(nx * sizeof *grad), gg[3 * NT], g0[3 * NT], *g = (double *)rp.d.g;
            tu_poison(gg, 3 * NT);
            assert_int_equal(ps_objective_cpu_pulse_g(p, PS_PRECISION_DOUBLE, 1, rp.x, &f, grad, gg),
                             PS_CONVERGED);
            /* the same F and pulse gradient as ps_eval */
            double fe, *ge = malloc(nx * sizeof *ge);
            assert_int_equal(eval_pulse(p, rp.x, &fe, ge), PS_CONVERGED);
            assert_memory_equal(&f, &fe, sizeof f);
            assert_memory_equal(grad, ge, nx * sizeof *ge);
            memcpy(g0, g, sizeof g0);
            double gmax = 0.0, scale = 0.0, worst = 0.0;
            size_t wi = 0;
            for (size_t i = 0; i < 3 * NT; i++) {
                assert_true(gg[i] != PS_POISON && isfinite(gg[i]));
                gmax = fmax(gmax, fabs(gg[i]));
                scale = fmax(scale, fabs(g0[i]));
            }
            const double h = 1e-6 * scale;
            for (size_t i = 0; i < 3 * NT; i++) {
                double fpm[2];
                for (int sgn = 0; sgn < 2; sgn++) {
                    g[i] = g0[i] + (sgn ? -h : h);
                    ps_problem *q = NULL;
                    assert_int_equal(ps_problem_create(&rp.d, &q), PS_CONVERGED);
                    assert_int_equal(eval_pulse(q, rp.x, &fpm[sgn], NULL), PS_CONVERGED);
                    ps_problem_free(q);
                }
                g[i] = g0[i];
                const double fd = (fpm[0] - fpm[1]) / ((g0[i] + h) - (g0[i] - h));
                if (fabs(fd - gg[i]) > worst) {
                    worst = fabs(fd - gg[i]);
                    wi = i;
                }
            }
            printf("dF/dG nc %d %-4s: max|dF/dG| %.3e worst [%3zu] rel %.2e %s\n", nci ? 3 : 1,
                   ps_loss_name((ps_loss)loss), gmax, wi, worst / gmax, worst <= FD_TOL * gmax ? "ok" : "FAIL");
            assert_true(gmax > 0.0 && worst <= FD_TOL * gmax);
            free(grad);
            free(ge);
            ps_problem_free(p);
            ref_problem_free(&rp);
        }
}

/*
 * Designed gradient axes (SPEC 1.2): xy with one channel, xyz with three,
 * every loss, relaxation, lambda, the penalty round's gmax and g_end terms
 * active (gmax below the start waveform's peak, so some steps violate):
 * the gradient in the optimizer's variables (RF and slew variables t)
 * against central differences, the physical gradient's designed part
 * against finite differences in g, and that part equal to dF/dG's columns.
 */
static double gd_mu;
static int eval_z_gd(const ps_problem *p, const double *x, double *f, double *grad)
{
    return ps_objective_cpu_penalty(p, PS_PRECISION_DOUBLE, 1, gd_mu, x, f, grad, NULL, NULL);
}

static void test_fd_designed_axes(void **state)
{
    (void)state;
    uint64_t seed = 9000;
    for (int v = 0; v < 2; v++)
        for (int loss = 0; loss < 4; loss++) {
            ref_problem_opts ro = {.ns = NS, .nt = NT, .loss = (ps_loss)loss, .relax = 1 + loss % 2,
                                   .lambda = 0.2, .b1_max = v ? B1MAX : PS_B1MAX_NONE, .zero_spin = 1,
                                   .nc = v ? 3 : 0, .seed = seed++};
            ref_problem rp;
            assert_int_equal(ref_problem_random(&ro, &rp), 0);
            ps_problem_desc d = rp.d;
            d.design_g = v ? PS_AXIS_X | PS_AXIS_Y | PS_AXIS_Z : PS_AXIS_X | PS_AXIS_Y;
            double smax, peak;
            tu_waveform_peak_slew(d.g, NT, d.dt, &peak, &smax);
            d.smax = 2.0 * smax;  /* the start's slews unclipped */
            d.gmax = 0.7 * peak; /* violated at some steps */
            d.g_end = 1;
            ps_problem *p = NULL;
            assert_int_equal(ps_problem_create(&d, &p), PS_CONVERGED);
            const size_t nrf = 2 * (v ? 3 : 1) * NT, ng = v ? 3 : 2, nx = ps_problem_nx(p);
            assert_int_equal(nx, nrf + ng * NT);
            assert_true(ps_problem_penalized(p));
            double *x = malloc(4 * nx * sizeof *x), *z = x + nx, *gp = x + 2 * nx, *gz = x + 3 * nx;
            assert_int_equal(ps_problem_x0(p, x), PS_CONVERGED);
            memcpy(x, rp.x, nrf * sizeof *x); /* the random pulse, the problem's g */
            ps_design_x_of_pulse(p, x, z);
            { /* the start is clipped to gmax: move the waveforms off the penalty's kink */
                double zmax = 0.0;
                for (size_t i = nrf; i < nx; i++)
                    zmax = fmax(zmax, fabs(z[i]));
                for (size_t i = nrf; i < nx; i++)
                    z[i] += 0.02 * zmax * tu_uniform(&seed, -1.0, 1.0);
            }
            char what[160];
            snprintf(what, sizeof what, "designed %s nc %d %s (gmax, g_end), z and t", v ? "xyz" : "xy", v ? 3 : 1,
                     ps_loss_name((ps_loss)loss));
            gd_mu = 2.3;
            assert_true(fd_check(what, p, eval_z_gd, z, nx) <= FD_TOL);
            /* the loss's part alone (the penalty's gradient dominates above) */
            gd_mu = 0.0;
            snprintf(what, sizeof what, "designed %s nc %d %s, z and t, no penalty", v ? "xyz" : "xy", v ? 3 : 1,
                     ps_loss_name((ps_loss)loss));
            assert_true(fd_check(what, p, eval_z_gd, z, nx) <= FD_TOL);
            /* the penalty is active and its violation reported */
            double f0, f1, viol = 0.0;
            assert_int_equal(ps_objective_cpu_penalty(p, PS_PRECISION_DOUBLE, 1, 0.0, z, &f0, gz, NULL, NULL), 0);
            assert_int_equal(ps_objective_cpu_penalty(p, PS_PRECISION_DOUBLE, 1, 2.3, z, &f1, gz, NULL, &viol), 0);
            assert_true(f1 > f0 && viol > 0.1);
            /* physical: the designed part is dF/dg, the columns of dF/dG */
            snprintf(what, sizeof what, "designed %s nc %d %s, pulse and g", v ? "xyz" : "xy", v ? 3 : 1,
                     ps_loss_name((ps_loss)loss));
            assert_true(fd_check(what, p, eval_pulse, x, nx) <= FD_TOL);
            double f, gg[3 * NT];
            assert_int_equal(ps_objective_cpu_pulse_g(p, PS_PRECISION_DOUBLE, 1, x, &f, gp, gg), 0);
            for (size_t i = 0; i < ng; i++)
                for (size_t k = 0; k < NT; k++)
                    assert_memory_equal(&gp[nrf + i * NT + k], &gg[3 * k + i], sizeof(double));
            free(x);
            ps_problem_free(p);
            ref_problem_free(&rp);
        }
}

/*
 * The RF mask: the held steps are constants. In the optimizer's variables
 * (evaluated with the held steps zeroed, as every start and evaluation
 * has them) and at the physical pulse (ps_eval, which zeroes them itself)
 * the gradient against central differences, exactly zero at the held
 * steps; ps_eval of an x with garbage at the held steps equals ps_eval of
 * the same x with zeros there, bit for bit; one channel and three (the
 * latter with b1_max, designed axes and active gmax/g_end penalties).
 */
static int eval_z_held(const ps_problem *p, const double *x, double *f, double *grad)
{
    const size_t n = ps_problem_nx(p);
    double *h = malloc(n * sizeof *h);
    assert_non_null(h);
    memcpy(h, x, n * sizeof *h);
    ps_design_hold(p, h);
    int st = ps_objective_cpu_penalty(p, PS_PRECISION_DOUBLE, 1, gd_mu, h, f, grad, NULL, NULL);
    free(h);
    return st;
}

static void test_fd_rf_mask(void **state)
{
    (void)state;
    uint64_t seed = 9100;
    for (int v = 0; v < 2; v++) {
        ref_problem_opts ro = {.ns = NS, .nt = NT, .loss = v ? PS_LOSS_MLS : PS_LOSS_XY, .relax = 1,
                               .lambda = 0.1, .b1_max = v ? B1MAX : PS_B1MAX_NONE, .zero_spin = 1,
                               .nc = v ? 3 : 0, .seed = seed++};
        ref_problem rp;
        assert_int_equal(ref_problem_random(&ro, &rp), 0);
        double mask[NT];
        size_t held = 0;
        for (size_t k = 0; k < NT; k++) {
            mask[k] = (k % 5 == 1 || (k >= 30 && k < 36)) ? 0.0 : 1.0; /* scattered and a block */
            held += mask[k] == 0.0;
        }
        ps_problem_desc d = rp.d;
        d.rf_mask = mask;
        double rows[2 * 3 * NT]; /* the random pulse as the start, nonzero at the held steps too */
        ps_design_rows_of_x(v ? 3 : 1, NT, rp.x, rows);
        d.b1 = rows;
        if (v) { /* designed x, penalties active */
            d.design_g = PS_AXIS_X;
            double smax = 0.0, peak = 0.0, prev = 0.0;
            for (size_t k = 0; k < NT; k++) {
                smax = fmax(smax, fabs(d.g[3 * k] - prev) / d.dt);
                peak = fmax(peak, fabs(d.g[3 * k]));
                prev = d.g[3 * k];
            }
            d.smax = 2.0 * smax;
            d.gmax = 0.7 * peak;
            d.g_end = 1;
        }
        ps_problem *p = NULL;
        assert_int_equal(ps_problem_create(&d, &p), PS_CONVERGED);
        const size_t nc = v ? 3 : 1, nx = ps_problem_nx(p);
        double *x = malloc(4 * nx * sizeof *x), *z = x + nx, *g1 = x + 2 * nx, *g2 = x + 3 * nx;
        assert_non_null(x);
        /* x0 holds the masked steps at zero although the start pulse has values there */
        assert_int_equal(ps_problem_x0(p, x), PS_CONVERGED);
        size_t zeroed = 0; /* held steps whose start pulse was not zero */
        for (size_t c = 0; c < nc; c++)
            for (size_t k = 0; k < NT; k++) {
                const double u = x[PS_X_U(NT, c, k)], v2 = x[PS_X_V(NT, c, k)];
                if (mask[k] == 0.0) {
                    assert_true(u == 0.0 && v2 == 0.0);
                    zeroed += rp.x[PS_X_U(NT, c, k)] != 0.0;
                } else {
                    assert_true(u == rp.x[PS_X_U(NT, c, k)] && v2 == rp.x[PS_X_V(NT, c, k)]);
                }
            }
        assert_true(zeroed > held / 2);
        ps_design_x_of_pulse(p, x, z);
        if (v) { /* the start is clipped to gmax: move the waveform off the penalty's kink */
            double zmax = 0.0;
            for (size_t i = 2 * nc * NT; i < nx; i++)
                zmax = fmax(zmax, fabs(z[i]));
            for (size_t i = 2 * nc * NT; i < nx; i++)
                z[i] += 0.02 * zmax * tu_uniform(&seed, -1.0, 1.0);
        }
        char what[128];
        gd_mu = v ? 1.7 : 0.0;
        snprintf(what, sizeof what, "rf_mask (%zu held) nc %zu%s, z", held, nc, v ? " designed x" : "");
        assert_true(fd_check(what, p, eval_z_held, z, nx) <= FD_TOL);
        snprintf(what, sizeof what, "rf_mask (%zu held) nc %zu%s, pulse", held, nc, v ? " designed x" : "");
        assert_true(fd_check(what, p, eval_pulse, x, nx) <= FD_TOL);
        /* exactly zero at the held steps, in both variables */
        double f1, f2;
        tu_poison(g1, nx);
        assert_int_equal(eval_z_held(p, z, &f1, g1), PS_CONVERGED);
        tu_poison(g2, nx);
        assert_int_equal(eval_pulse(p, x, &f2, g2), PS_CONVERGED);
        for (size_t c = 0; c < nc; c++)
            for (size_t k = 0; k < NT; k++)
                if (mask[k] == 0.0)
                    assert_true(g1[PS_X_U(NT, c, k)] == 0.0 && g1[PS_X_V(NT, c, k)] == 0.0 &&
                                g2[PS_X_U(NT, c, k)] == 0.0 && g2[PS_X_V(NT, c, k)] == 0.0);
        /* garbage at the held steps changes nothing */
        memcpy(z, x, nx * sizeof *x);
        for (size_t c = 0; c < nc; c++)
            for (size_t k = 0; k < NT; k++)
                if (mask[k] == 0.0)
                    z[PS_X_U(NT, c, k)] = z[PS_X_V(NT, c, k)] = 0.37 + (double)k;
        assert_int_equal(eval_pulse(p, z, &f1, g1), PS_CONVERGED);
        assert_true(f1 == f2);
        assert_memory_equal(g1, g2, nx * sizeof *g1);
        free(x);
        ps_problem_free(p);
        ref_problem_free(&rp);
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
        cmocka_unit_test(test_fd_sar),
        cmocka_unit_test(test_fd_gradient_g),
        cmocka_unit_test(test_fd_designed_axes),
        cmocka_unit_test(test_fd_rf_mask),
        cmocka_unit_test(test_fd_check_catches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
