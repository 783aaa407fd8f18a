/*
 * The Bloch model of docs/model.md against analytic cases: the sign
 * conventions and the hard-pulse flip, precession under off-resonance, the
 * small-tip Fourier (excitation k-space) relation, relaxation recovery, the
 * identity at |b| = 0; and the rotation/adjoint building blocks of
 * src/model/bloch_math.h (series/direct switch, adjoint vs finite differences).
 *
 * Every analytic case is checked on three implementations: ps_simulate in
 * float64 and float32, and the independent reference of
 * tests/reference/ref_bloch.c (which the other test binaries use as their
 * oracle).
 */
#include <complex.h>
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model/bloch_math.h"
#include "model/design.h"
#include "persolve.h"
#include "reference/ref_bloch.h"
#include "test_util.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#define GB PS_GAMMA_BAR_DEFAULT

/*
 * Tolerances of the analytic comparisons (absolute, on unit-length M):
 * float64: the analytic formulas are exact for the discrete model, so only
 * rounding remains: ~1e-16 per operation, a few hundred steps -> 1e-12 is
 * generous and still 1e10 times smaller than any sign or convention error.
 * float32: unit roundoff 6e-8 per operation, accumulated over nt steps;
 * PS_F32_STEP per step (2 FLT_EPSILON, about 4 roundings of an O(1) value)
 * is a conservative per-step bound (measured: ~3e-8 per step).
 */
#define TOL_F64 1e-12
#define PS_F32_STEP 2.4e-7

/* ps_simulate on the CPU backend in `precision` into m (poisoned first). */
static void simulate(const ps_problem_desc *d, const double *x, int precision,
                     double *m)
{
    ps_problem *p = NULL;
    assert_int_equal(ps_problem_create(d, &p), PS_CONVERGED);
    ps_options o;
    ps_options_default(&o);
    o.backend = PS_BACKEND_CPU;
    o.precision = (ps_precision)precision;
    tu_poison(m, 3 * d->ns);
    assert_int_equal(ps_simulate(p, &o, x, m), PS_CONVERGED);
    ps_problem_free(p);
}

/*
 * Compare ref_simulate and ps_simulate (double, single) with the analytic
 * final magnetization expect[ns][3], with atol tol64 (ref and double) and
 * tol32 (single). Returns 1 when all three agree.
 */
static int check_three(const char *what, const ps_problem_desc *d,
                       const double *x, const double *expect, double tol64,
                       double tol32)
{
    size_t n = 3 * d->ns;
    double *m = malloc(n * sizeof *m);
    assert_non_null(m);
    char name[160];
    int ok = 1;

    tu_poison(m, n);
    assert_int_equal(ref_simulate(d, x, m), 0);
    snprintf(name, sizeof name, "%s (reference, float64)", what);
    ok &= tu_compare(name, m, expect, n, tol64, 0.0);

    simulate(d, x, PS_PRECISION_DOUBLE, m);
    snprintf(name, sizeof name, "%s (ps_simulate, float64)", what);
    ok &= tu_compare(name, m, expect, n, tol64, 0.0);

    simulate(d, x, PS_PRECISION_SINGLE, m);
    snprintf(name, sizeof name, "%s (ps_simulate, float32)", what);
    ok &= tu_compare(name, m, expect, n, tol32, 0.0);

    free(m);
    return ok;
}

/*
 * Hard pulse and sign convention. A constant b1 = B e^{i psi} for T = nt dt
 * on resonance (r = 0, df = 0) rotates about (cos psi, sin psi, 0) by
 * alpha = s 2 pi gamma-bar B T, taking (0,0,1) to
 *     (-sin psi sin alpha, cos psi sin alpha, cos alpha);
 * for real positive b1 (psi = 0) that is +z tipped toward +y. Spins with B1
 * scales s = 1/3, 1, 2, 3.7 see 30, 90, 180 and 333 degrees. Also with a
 * non-default gamma-bar, which must enter the flip the same way.
 */
static void test_hard_pulse(void **state)
{
    (void)state;
    enum { NS = 4, NT = 100 };
    const double svals[NS] = {1.0 / 3.0, 1.0, 2.0, 3.7};
    const double psis[3] = {0.0, 1.1, -2.5};
    const double gbars[2] = {GB, 1000.0};
    double r[3 * NS] = {0}, target[3 * NS] = {0}, g[3 * NT] = {0};
    double x[2 * NT], expect[3 * NS];

    for (int gi = 0; gi < 2; gi++) {
        for (int pi = 0; pi < 3; pi++) {
            ps_problem_desc d;
            ps_problem_desc_init(&d);
            d.ns = NS;
            d.nt = NT;
            d.r = r;
            d.target = target;
            d.g = g;
            d.b1scale = svals;
            d.dt = 4e-6;
            d.gamma_bar = gbars[gi];
            double T = NT * d.dt;
            double B = 0.25 / (gbars[gi] * T); /* 90 degrees at s = 1 */
            double psi = psis[pi];
            for (int k = 0; k < NT; k++) {
                x[k] = B * cos(psi);
                x[NT + k] = B * sin(psi);
            }
            for (int j = 0; j < NS; j++) {
                double alpha = svals[j] * 2.0 * M_PI * gbars[gi] * B * T;
                expect[3 * j] = -sin(psi) * sin(alpha);
                expect[3 * j + 1] = cos(psi) * sin(alpha);
                expect[3 * j + 2] = cos(alpha);
            }
            char what[96];
            snprintf(what, sizeof what, "hard pulse gamma_bar %g psi %g",
                     gbars[gi], psi);
            assert_true(
                check_three(what, &d, x, expect, TOL_F64, NT * PS_F32_STEP));
        }
    }

    /* The convention stated plainly: a small real positive b1 moves +z
     * toward +y (My > 0) and leaves Mx at zero. */
    {
        double r1[3] = {0}, t1[3] = {0}, g1[3] = {0}, x1[2] = {0.01, 0.0};
        double m[3];
        ps_problem_desc d;
        ps_problem_desc_init(&d);
        d.ns = 1;
        d.nt = 1;
        d.r = r1;
        d.target = t1;
        d.g = g1;
        d.dt = 4e-6;
        simulate(&d, x1, PS_PRECISION_DOUBLE, m);
        assert_true(m[1] > 0.0);
        assert_true(fabs(m[0]) < 1e-15);
        assert_true(m[2] < 1.0);
    }
}

/*
 * Hard pulse through several channels (SPEC 1.1): the field a spin sees is
 * b1_j = sum_c S_jc b_c. Three channels with constant pulses b_c and
 * complex sensitivities chosen per spin so that the sum is a known
 * B_j e^{i psi_j}: spin 0 sees channel 0 alone (S = (1, 0, 0)), spin 1
 * channels 1 and 2 with phases that turn i B/2 and -B/2 into B
 * (S = (0, -i, -1)), spin 2 a mix with partial cancellation, spin 3
 * S = 0 on every channel (no field: M stays m0 = (0,0,1)). The flip is then
 * that of the single-channel hard pulse of the summed field, on the
 * reference and on ps_simulate in both precisions.
 */
static void test_hard_pulse_channels(void **state)
{
    (void)state;
    enum { NS = 4, NT = 100, NC = 3 };
    double r[3 * NS] = {0}, target[3 * NS] = {0}, g[3 * NT] = {0};
    double x[2 * NC * NT], expect[3 * NS];
    const double dt = 4e-6, T = NT * dt;
    const double B = 0.25 / (GB * T); /* 90 degrees */
    /* channel pulses b_c (complex, constant over the pulse) */
    const double complex bc[NC] = {B * cexp(0.4 * I), 0.5 * I * B, -0.5 * B};
    /* sensitivities S_jc */
    const double complex S[NS][NC] = {
        {1.0, 0.0, 0.0},
        {0.0, -I, -1.0},
        {0.3 - 0.2 * I, 1.1 * I, 0.7 + 0.5 * I},
        {0.0, 0.0, 0.0},
    };
    double b1map[NS * NC * 2];
    for (int j = 0; j < NS; j++)
        for (int c = 0; c < NC; c++) {
            b1map[2 * (j * NC + c)] = creal(S[j][c]);
            b1map[2 * (j * NC + c) + 1] = cimag(S[j][c]);
        }
    for (int c = 0; c < NC; c++)
        for (int k = 0; k < NT; k++) {
            x[2 * c * NT + k] = creal(bc[c]);
            x[(2 * c + 1) * NT + k] = cimag(bc[c]);
        }
    for (int j = 0; j < NS; j++) {
        double complex b1 = 0.0;
        for (int c = 0; c < NC; c++)
            b1 += S[j][c] * bc[c];
        double psi = carg(b1);
        double alpha = 2.0 * M_PI * GB * cabs(b1) * T;
        expect[3 * j] = -sin(psi) * sin(alpha);
        expect[3 * j + 1] = cos(psi) * sin(alpha);
        expect[3 * j + 2] = cos(alpha);
        printf("spin %d: |b1| = %.4f B, psi %+.4f, flip %.2f deg\n", j,
               cabs(b1) / B, psi, alpha * 180.0 / M_PI);
    }
    /* spin 1 sees B exactly (real), spin 3 nothing */
    assert_true(fabs(expect[3 * 1 + 1] - 1.0) < 1e-12);
    assert_true(expect[3 * 3 + 2] == 1.0);
    ps_problem_desc d;
    ps_problem_desc_init(&d);
    d.ns = NS;
    d.nt = NT;
    d.nc = NC;
    d.r = r;
    d.target = target;
    d.g = g;
    d.b1map = b1map;
    d.dt = dt;
    assert_true(check_three("hard pulse through 3 channels", &d, x, expect,
                            TOL_F64, NT * PS_F32_STEP));
}

/*
 * Precession. With no RF, b = (0, 0, gamma G.r + 2 pi df): the transverse
 * magnetization turns clockwise, Mxy(T) = Mxy(0) exp(-i Phi) with
 * Phi = sum_k (2 pi gamma-bar G_k.r + 2 pi df) dt, and Mz is unchanged.
 * Spins driven by df alone, by the gradient alone, and by both, with start
 * vectors along x, along y and tilted.
 */
static void test_precession_clockwise(void **state)
{
    (void)state;
    enum { NS = 5, NT = 500 };
    double r[3 * NS] = {0, 0, 0, 0, 0, 0, 1.5, 0, 0, 0, -2, 0.5, 0.7, 0.3, -1};
    double df[NS] = {100.0, -250.0, 0.0, 60.0, -35.0};
    double m0[3 * NS] = {1, 0,   0, 1,   0,    0,     0,   1,
                         0, 0.6, 0, 0.8, 0.48, -0.36, -0.8};
    double target[3 * NS] = {0};
    double g[3 * NT], x[2 * NT] = {0}, expect[3 * NS];
    uint64_t seed = 11;
    for (int k = 0; k < NT; k++) {
        g[3 * k] = 0.02 + tu_uniform(&seed, -0.01, 0.01);
        g[3 * k + 1] = 0.01 + tu_uniform(&seed, -0.01, 0.01);
        g[3 * k + 2] = -0.03 + tu_uniform(&seed, -0.01, 0.01);
    }
    ps_problem_desc d;
    ps_problem_desc_init(&d);
    d.ns = NS;
    d.nt = NT;
    d.r = r;
    d.df = df;
    d.m0 = m0;
    d.target = target;
    d.g = g;
    d.dt = 4e-6;
    for (int j = 0; j < NS; j++) {
        double phi = 0.0;
        for (int k = 0; k < NT; k++) {
            double gr = g[3 * k] * r[3 * j] + g[3 * k + 1] * r[3 * j + 1] +
                        g[3 * k + 2] * r[3 * j + 2];
            phi += 2.0 * M_PI * (GB * gr + df[j]) * d.dt;
        }
        double complex mxy = (m0[3 * j] + I * m0[3 * j + 1]) * cexp(-I * phi);
        expect[3 * j] = creal(mxy);
        expect[3 * j + 1] = cimag(mxy);
        expect[3 * j + 2] = m0[3 * j + 2];
    }
    assert_true(
        check_three("precession", &d, x, expect, TOL_F64, NT * PS_F32_STEP));

    /* Clockwise, stated plainly: positive df turns +x toward -y. */
    double m[3 * NS];
    d.nt = 10;
    simulate(&d, x, PS_PRECISION_DOUBLE, m);
    assert_true(m[1] < 0.0 && m[0] > 0.9);     /* df = +100 Hz */
    assert_true(m[3 + 1] > 0.0 && m[3] > 0.9); /* df = -250 Hz */
}

/*
 * Small-tip Fourier relation. Writing Mxy = Mx + i My, the model (dM/dt =
 * M x b on each step) gives exactly
 *     Mxy(T) = i int_0^T gamma s b1(t) Mz(t) exp(-i int_t^T bz) dt,
 * bz = gamma G.r + 2 pi df. Replacing Mz(t) by 1 gives the excitation
 * k-space integral
 *     Mxy(r) ~ i gamma s int b1(t) exp(i 2 pi k(t).r)
 *                            exp(-i 2 pi df (T - t)) dt,
 *     k(t) = -gamma-bar int_t^T G,
 * which for piecewise-constant fields is a sum over steps with the exact
 * integral of each step, dt E(beta_k) exp(-i Phi_k), E(b) = (1 - e^{-ib})/(ib),
 * beta_k = bz_k dt, Phi_k = sum_{m > k} bz_m dt.
 * Error bound: the polar angle after any part of the pulse is at most
 * alpha = gamma s dt sum |b1_k|, so |Mz - 1| <= alpha^2/2 and
 * |Mxy - linear| <= alpha * alpha^2/2 = alpha^3/2. The test uses a complex
 * windowed sinc with alpha ~ 0.1 rad (bound ~5e-4 against a profile of
 * height ~0.1), over a spatial range where the profile varies from its peak
 * to near zero, with df and B1 scale varying per spin. A sign or convention
 * error (conjugate, reversed time, wrong factor 2 pi) changes Mxy by O(alpha).
 */
static void test_small_tip_fourier(void **state)
{
    (void)state;
    enum { NS = 81, NT = 256 };
    double r[3 * NS], df[NS], s[NS], target[3 * NS] = {0};
    double g[3 * NT], x[2 * NT], expect[3 * NS];
    double dt = 4e-6, T = NT * dt, gamma = 2.0 * M_PI * GB;
    for (int j = 0; j < NS; j++) {
        r[3 * j] = -4.0 + 8.0 * j / (NS - 1);
        r[3 * j + 1] = 0.3 * sin(0.2 * j);
        r[3 * j + 2] = 0.0;
        df[j] = 80.0 * sin(0.7 * j);
        s[j] = 0.8 + 0.4 * (j % 7) / 6.0;
    }
    for (int k = 0; k < NT; k++) {
        double t = (k + 0.5) * dt;
        g[3 * k] = 0.3 + 0.1 * sin(2.0 * M_PI * t / T);
        g[3 * k + 1] = 0.05 * cos(2.0 * M_PI * 2.0 * t / T);
        g[3 * k + 2] = 0.0;
        double tc = (t - T / 2) / T, a = 6.0 * tc;
        double sinc = a == 0.0 ? 1.0 : sin(M_PI * a) / (M_PI * a);
        double win = 0.54 + 0.46 * cos(2.0 * M_PI * tc);
        x[k] = sinc * win * cos(3.0 * tc);
        x[NT + k] = sinc * win * sin(3.0 * tc) + 0.05;
    }
    /* scale the pulse to alpha = 0.1 rad at s = 1 */
    double sum = 0.0;
    for (int k = 0; k < NT; k++)
        sum += hypot(x[k], x[NT + k]);
    double scale = 0.1 / (gamma * dt * sum);
    for (int k = 0; k < 2 * NT; k++)
        x[k] *= scale;

    double maxxy = 0.0, tol = 0.0;
    for (int j = 0; j < NS; j++) {
        double complex acc = 0.0;
        double phi_after = 0.0; /* Phi_k, built from the last step back */
        double alpha = 0.0;
        for (int k = NT - 1; k >= 0; k--) {
            double gr = g[3 * k] * r[3 * j] + g[3 * k + 1] * r[3 * j + 1] +
                        g[3 * k + 2] * r[3 * j + 2];
            double beta = (gamma * gr + 2.0 * M_PI * df[j]) * dt;
            double complex e = fabs(beta) < 1e-8
                                   ? 1.0 - I * beta / 2.0
                                   : (1.0 - cexp(-I * beta)) / (I * beta);
            double complex b1 = x[k] + I * x[NT + k];
            acc += gamma * s[j] * b1 * dt * e * cexp(-I * phi_after);
            phi_after += beta;
            alpha += gamma * s[j] * cabs(b1) * dt;
        }
        double complex mxy = I * acc;
        expect[3 * j] = creal(mxy);
        expect[3 * j + 1] = cimag(mxy);
        /* Mz to second order: 1 - |Mxy|^2/2 is within alpha^4 of the truth;
         * compared with the same alpha^3/2 tolerance. */
        expect[3 * j + 2] = 1.0 - 0.5 * creal(mxy * conj(mxy));
        if (cabs(mxy) > maxxy)
            maxxy = cabs(mxy);
        double b = 0.5 * alpha * alpha * alpha;
        if (b > tol)
            tol = b;
    }
    printf("small tip: max |Mxy| %.4g, alpha^3/2 bound %.3g\n", maxxy, tol);
    /* the profile is not trivial: its peak is a good part of alpha */
    assert_true(maxxy > 0.03);
    /* and it varies across the range (excitation is selective) */
    double minxy = 1.0;
    for (int j = 0; j < NS; j++)
        minxy = fmin(minxy, hypot(expect[3 * j], expect[3 * j + 1]));
    assert_true(minxy < 0.3 * maxxy);

    ps_problem_desc d;
    ps_problem_desc_init(&d);
    d.ns = NS;
    d.nt = NT;
    d.r = r;
    d.df = df;
    d.b1scale = s;
    d.target = target;
    d.g = g;
    d.dt = dt;
    assert_true(check_three("small-tip Fourier", &d, x, expect, tol,
                            tol + NT * PS_F32_STEP));
}

/*
 * Relaxation recovery with b1 = 0: per step Mxy *= E2 after a rotation
 * about z, Mz = E1 Mz + 1 - E1, so after t = n dt exactly
 *     Mz(t)  = 1 - (1 - Mz0) exp(-t/T1),
 *     Mxy(t) = Mxy0 exp(-t/T2) exp(-i Phi(t))
 * (rotation about z commutes with the relaxation). Checked for n = 1, 7
 * and 250, with a random gradient waveform and df, start vectors including
 * an inverted one, and T1, T2 per spin (T2 from 0.1 to 1 times T1).
 */
static void test_relaxation_recovery(void **state)
{
    (void)state;
    enum { NS = 6, NTMAX = 250 };
    const int nts[3] = {1, 7, NTMAX};
    double r[3 * NS], df[NS], m0[3 * NS], t1[NS], t2[NS], target[3 * NS] = {0};
    double g[3 * NTMAX], x[2 * NTMAX] = {0}, expect[3 * NS];
    double dt = 4e-6;
    uint64_t seed = 5;
    for (int j = 0; j < NS; j++) {
        for (int i = 0; i < 3; i++)
            r[3 * j + i] = tu_uniform(&seed, -2.0, 2.0);
        df[j] = tu_uniform(&seed, -200.0, 200.0);
        double th = tu_uniform(&seed, 0.0, M_PI),
               ph = tu_uniform(&seed, 0.0, 6.28);
        m0[3 * j] = sin(th) * cos(ph);
        m0[3 * j + 1] = sin(th) * sin(ph);
        m0[3 * j + 2] = cos(th);
        t1[j] = tu_uniform(&seed, 2e-4, 1e-3);
        t2[j] = tu_uniform(&seed, 0.1, 1.0) * t1[j];
    }
    m0[0] = 0.0;
    m0[1] = 0.0;
    m0[2] = -1.0; /* inverted */
    for (int k = 0; k < NTMAX; k++)
        for (int i = 0; i < 3; i++)
            g[3 * k + i] = tu_uniform(&seed, -0.05, 0.05);

    for (int c = 0; c < 3; c++) {
        int nt = nts[c];
        ps_problem_desc d;
        ps_problem_desc_init(&d);
        d.ns = NS;
        d.nt = (size_t)nt;
        d.r = r;
        d.df = df;
        d.m0 = m0;
        d.t1 = t1;
        d.t2 = t2;
        d.target = target;
        d.g = g;
        d.dt = dt;
        double t = nt * dt;
        for (int j = 0; j < NS; j++) {
            double phi = 0.0;
            for (int k = 0; k < nt; k++) {
                double gr = g[3 * k] * r[3 * j] + g[3 * k + 1] * r[3 * j + 1] +
                            g[3 * k + 2] * r[3 * j + 2];
                phi += 2.0 * M_PI * (GB * gr + df[j]) * dt;
            }
            double complex mxy = (m0[3 * j] + I * m0[3 * j + 1]) *
                                 exp(-t / t2[j]) * cexp(-I * phi);
            expect[3 * j] = creal(mxy);
            expect[3 * j + 1] = cimag(mxy);
            expect[3 * j + 2] = 1.0 - (1.0 - m0[3 * j + 2]) * exp(-t / t1[j]);
        }
        char what[64];
        snprintf(what, sizeof what, "relaxation nt %d", nt);
        assert_true(
            check_three(what, &d, x, expect, TOL_F64, nt * PS_F32_STEP));
        /* it really relaxed: the inverted spin recovered toward +1 */
        if (nt == NTMAX)
            assert_true(expect[2] > -0.5);
    }
}

/*
 * Identity at |b| = 0. Zero pulse, zero gradient, df = 0: every step is
 * the identity, so M_Nt = M0 exactly (bit for bit; in float32 mode the
 * float32 rounding of M0), with M0 random and not of unit length. The
 * gradient there is finite and known in closed form: with R = I every
 * lam_k = dL/dM_Nt = 2 w (M0 - Mt), and dM/du_k = gamma s dt (0, Mz, -My),
 * dM/dv_k = gamma s dt (-Mz, 0, Mx) (the first-order term of R(n, -phi)),
 * so for the full loss
 *   dF/du_k = sum_j 2 w_j gamma s_j dt (e_y Mz - e_z My),
 *   dF/dv_k = sum_j 2 w_j gamma s_j dt (e_z Mx - e_x Mz),   e = M0 - Mt,
 * the same for every k. Compared to 1e-12 relative (float64; a sum of ns
 * terms) and 1e-5 (float32 spin loop).
 */
/* ps_design_has_gradient: 0 only for G = 0 at every step with no designed
 * axis (the GPU's PS_GPU_NOGRAD kernel class); one nonzero value of any
 * axis at any step, or a designed axis, makes it 1.
 * ps_design_axis_zero: 1 when the axis is not designed and zero at every
 * step. */
static void test_has_gradient(void **state)
{
    (void)state;
    char err[256];
    ps_problem *inv = NULL, *p = NULL, *q = NULL;
    assert_int_equal(ps_preset_create("inversion:ndf=5,nb1=2,nt=40", &inv, err, sizeof err), PS_CONVERGED);
    assert_int_equal(ps_design_has_gradient(inv), 0);
    for (int c = 0; c < 3; c++)
        assert_int_equal(ps_design_axis_zero(inv, c), 1);
    ps_problem_desc d;
    assert_int_equal(ps_problem_describe(inv, &d), PS_CONVERGED);
    double *g = malloc(3 * d.nt * sizeof *g);
    assert_non_null(g);
    for (size_t i = 0; i < 3 * d.nt; i += 7) { /* every axis and every stretch of the steps */
        memset(g, 0, 3 * d.nt * sizeof *g);
        g[i] = i % 2 ? -1e-6 : 0.25;
        d.g = g;
        assert_int_equal(ps_problem_create(&d, &p), PS_CONVERGED);
        assert_int_equal(ps_design_has_gradient(p), 1);
        for (int c = 0; c < 3; c++)
            assert_int_equal(ps_design_axis_zero(p, c), c != (int)(i % 3));
        d.design_g = 1u << (i % 3); /* that axis designed: not zero, whatever its start */
        d.smax = 1e9;
        assert_int_equal(ps_problem_create(&d, &q), PS_CONVERGED);
        assert_int_equal(ps_design_has_gradient(q), 1);
        for (int c = 0; c < 3; c++)
            assert_int_equal(ps_design_axis_zero(q, c), c != (int)(i % 3));
        ps_problem_free(q);
        d.design_g = 0;
        d.smax = 0.0;
        ps_problem_free(p);
    }
    memset(g, 0, 3 * d.nt * sizeof *g);
    g[0] = -0.0; /* a negative zero is no gradient */
    d.g = g;
    assert_int_equal(ps_problem_create(&d, &p), PS_CONVERGED);
    assert_int_equal(ps_design_has_gradient(p), 0);
    ps_problem_free(p);
    d.design_g = PS_AXIS_Z; /* designed from a zero start: a gradient */
    d.smax = 1e9;
    assert_int_equal(ps_problem_create(&d, &p), PS_CONVERGED);
    assert_int_equal(ps_design_has_gradient(p), 1);
    assert_int_equal(ps_design_axis_zero(p, 2), 0);
    ps_problem_free(p);
    free(g);
    ps_problem_free(inv);
    assert_int_equal(ps_preset_create("slice1d:nz=20,nt=40", &p, err, sizeof err), PS_CONVERGED);
    assert_int_equal(ps_design_has_gradient(p), 1);
    assert_int_equal(ps_design_axis_zero(p, 2), 0); /* the slice select */
    ps_problem_free(p);
    assert_int_equal(ps_preset_create("spiral2d:n=8,nt=60,design_g=xy,smax=15000", &p, err, sizeof err),
                     PS_CONVERGED);
    assert_int_equal(ps_design_has_gradient(p), 1);
    assert_int_equal(ps_design_axis_zero(p, 2), 1); /* the spiral's z */
    ps_problem_free(p);
    assert_int_equal(ps_preset_create("spiral2d:n=8,nt=60,design_g=x,smax=15000", &p, err, sizeof err),
                     PS_CONVERGED);
    assert_int_equal(ps_design_axis_zero(p, 0), 0); /* designed */
    assert_int_equal(ps_design_axis_zero(p, 1), 0); /* fixed, not zero */
    assert_int_equal(ps_design_axis_zero(p, 2), 1);
    ps_problem_free(p);
}

static void test_identity_zero_field(void **state)
{
    (void)state;
    enum { NS = 7, NT = 40 };
    double r[3 * NS], m0[3 * NS], target[3 * NS], s[NS], w[NS];
    double g[3 * NT] = {0}, x[2 * NT] = {0}, m[3 * NS], grad[2 * NT];
    double expect_g[2 * NT];
    double dt = 4e-6, gamma = 2.0 * M_PI * GB;
    uint64_t seed = 99;
    for (int j = 0; j < NS; j++) {
        for (int i = 0; i < 3; i++) {
            r[3 * j + i] = tu_uniform(&seed, -3.0, 3.0);
            m0[3 * j + i] = tu_uniform(&seed, -1.0, 1.0);
            target[3 * j + i] = tu_uniform(&seed, -1.0, 1.0);
        }
        s[j] = tu_uniform(&seed, 0.5, 1.5);
        w[j] = tu_uniform(&seed, 0.1, 2.0);
    }
    ps_problem_desc d;
    ps_problem_desc_init(&d);
    d.ns = NS;
    d.nt = NT;
    d.r = r;
    d.m0 = m0;
    d.target = target;
    d.b1scale = s;
    d.w = w;
    d.g = g;
    d.dt = dt;

    double gu = 0.0, gv = 0.0;
    for (int j = 0; j < NS; j++) {
        const double *M = m0 + 3 * j;
        double e[3] = {M[0] - target[3 * j], M[1] - target[3 * j + 1],
                       M[2] - target[3 * j + 2]};
        double c = 2.0 * w[j] * gamma * s[j] * dt;
        gu += c * (e[1] * M[2] - e[2] * M[1]);
        gv += c * (e[2] * M[0] - e[0] * M[2]);
    }
    for (int k = 0; k < NT; k++) {
        expect_g[k] = gu;
        expect_g[NT + k] = gv;
    }

    ps_problem *p = NULL;
    assert_int_equal(ps_problem_create(&d, &p), PS_CONVERGED);
    ps_options o;
    ps_options_default(&o);
    o.backend = PS_BACKEND_CPU;
    for (int prec = 0; prec < 2; prec++) {
        o.precision = prec ? PS_PRECISION_DOUBLE : PS_PRECISION_SINGLE;
        tu_poison(m, 3 * NS);
        assert_int_equal(ps_simulate(p, &o, x, m), PS_CONVERGED);
        for (int i = 0; i < 3 * NS; i++) {
            double want = prec ? m0[i] : (double)(float)m0[i];
            if (m[i] != want)
                printf("identity: m[%d] = %.17g, want %.17g\n", i, m[i], want);
            assert_true(m[i] == want);
        }
        double f;
        tu_poison(grad, 2 * NT);
        f = PS_POISON;
        assert_int_equal(ps_eval(p, &o, x, &f, grad), PS_CONVERGED);
        assert_true(isfinite(f));
        const char *what = prec ? "gradient at |b| = 0 (float64)"
                                : "gradient at |b| = 0 (float32)";
        double scale = fmax(fabs(gu), fabs(gv));
        assert_true(tu_compare(what, grad, expect_g, 2 * NT,
                               (prec ? 1e-12 : 1e-5) * scale, 0.0));
    }
    /* the reference agrees with the closed form as well */
    double f;
    tu_poison(grad, 2 * NT);
    assert_int_equal(ref_eval(&d, x, &f, grad, NULL), 0);
    assert_true(tu_compare("gradient at |b| = 0 (reference)", grad, expect_g,
                           2 * NT, 1e-12 * fmax(fabs(gu), fabs(gv)), 0.0));
    ps_problem_free(p);
}

/* ---- building blocks of src/model/bloch_math.h ---- */

/* Distance between a and b in units of the float / double spacing at b. */
static double ulps_f(float a, float b)
{
    float sp = nextafterf(fabsf(b), INFINITY) - fabsf(b);
    return fabs((double)a - (double)b) / sp;
}

static double ulps_d(double a, double b)
{
    double sp = nextafter(fabs(b), INFINITY) - fabs(b);
    return fabs(a - b) / sp;
}

/*
 * Continuity at the switch q = PS_SERIES_Q between the Taylor series and
 * the direct formulas, for both precisions: the coefficients at the largest
 * q below the switch and at the switch itself (the exact functions change by
 * far less than an ulp over that gap).
 * - c, A and B must agree to 4 ulps (measured: 0-4).
 * - C = (1 - A)/q on the direct side loses digits to cancellation
 *   (1 - A ~ 0.04), so its jump is measured in ulps of C and bounded where
 *   it matters: C only enters the adjoint multiplied by theta theta^T terms
 *   of size q, next to O(1) terms, so q |jump| must stay below 2 ulps of 1.
 * Each side is also compared with long double evaluations of the exact
 * functions (each branch is accurate where it is used).
 */
/* The start point of a pulse past sqrt(DBL_MAX) under b1_max: clipped to
 * 0.9 b1_max in the pulse's direction, not zeroed by |b|^2 overflowing. */
static void test_reparam_inverse_huge(void **state)
{
    (void)state;
    const double bm = 0.05, z09 = atanh(0.9);
    const double cases[][2] = {{1e160, 0.0}, {-3e200, 4e200}, {1e308, 1e308}, {0.03, -0.04}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double u = cases[i][0], v = cases[i][1], zp, zq;
        ps_reparam_inverse(bm, u, v, &zp, &zq);
        double a = hypot(u, v), r = fmin(a / bm, 0.9);
        assert_true(isfinite(zp) && isfinite(zq));
        assert_true(fabs(hypot(zp, zq) - atanh(r)) <= 1e-12);
        assert_true(zp * u >= 0.0 && zq * v >= 0.0); /* the pulse's direction */
        if (a > bm)
            assert_true(fabs(hypot(zp, zq) - z09) <= 1e-12);
    }
}

static void test_series_switch(void **state)
{
    (void)state;
    const char *names[4] = {"c", "A", "B", "C"};

    /* float */
    {
        float qs[2] = {nextafterf((float)PS_SERIES_Q, 0.0f),
                       (float)PS_SERIES_Q};
        float v[2][4];
        for (int i = 0; i < 2; i++)
            ps_rot_coeffs_jac_f(qs[i], &v[i][0], &v[i][1], &v[i][2], &v[i][3]);
        float c0, A0, B0;
        ps_rot_coeffs_f(qs[0], &c0, &A0, &B0);
        assert_true(c0 == v[0][0] && A0 == v[0][1] && B0 == v[0][2]);
        for (int k = 0; k < 4; k++) {
            double u = ulps_f(v[0][k], v[1][k]);
            printf("switch float %-2s: below %.9g at %.9g jump %.1f ulps\n",
                   names[k], v[0][k], v[1][k], u);
            if (k < 3)
                assert_true(u <= 4.0);
        }
        double jump = fabs((double)v[0][3] - (double)v[1][3]) * PS_SERIES_Q;
        printf("switch float C: q*jump = %.3g (ulp(1) = %.3g)\n", jump,
               (double)FLT_EPSILON);
        assert_true(jump <= 2.0 * FLT_EPSILON);
    }
    /* double */
    {
        double qs[2] = {nextafter(PS_SERIES_Q, 0.0), PS_SERIES_Q};
        double v[2][4];
        for (int i = 0; i < 2; i++)
            ps_rot_coeffs_jac_d(qs[i], &v[i][0], &v[i][1], &v[i][2], &v[i][3]);
        double c0, A0, B0;
        ps_rot_coeffs_d(qs[0], &c0, &A0, &B0);
        assert_true(c0 == v[0][0] && A0 == v[0][1] && B0 == v[0][2]);
        for (int k = 0; k < 4; k++) {
            double u = ulps_d(v[0][k], v[1][k]);
            printf("switch double %-2s: below %.17g at %.17g jump %.1f ulps\n",
                   names[k], v[0][k], v[1][k], u);
            if (k < 3)
                assert_true(u <= 4.0);
        }
        double jump = fabs(v[0][3] - v[1][3]) * PS_SERIES_Q;
        printf("switch double C: q*jump = %.3g (ulp(1) = %.3g)\n", jump,
               DBL_EPSILON);
        assert_true(jump <= 2.0 * DBL_EPSILON);

        /* accuracy of each side against long double, relative to the
         * size of the term in the step (1 for c, A, B; q for C) */
        for (int i = 0; i < 2; i++) {
            long double q = qs[i], ph = sqrtl(q);
            long double ex[4];
            ex[0] = cosl(ph);
            ex[1] = sinl(ph) / ph;
            ex[2] = (1.0L - cosl(ph)) / q;
            ex[3] = (ph - sinl(ph)) / (q * ph);
            for (int k = 0; k < 4; k++) {
                double w = k < 3 ? 1.0 : (double)q;
                double err = (double)fabsl((long double)v[i][k] - ex[k]) * w;
                assert_true(err <= 4.0 * DBL_EPSILON);
            }
        }
    }
}

/*
 * The float32 rotation coefficients between the series and the
 * trigonometric branch (1/4 <= q < 4: the polynomials PS_MID_*) as the
 * CPU computes them (separate multiplies and adds) against long double at
 * 2^17 float32 q spread over the range: A, B, C, cos(phi/2) and
 * sin(phi/2)/phi within 2 ulps, c = cos(phi) within 2e-7 absolute (it
 * crosses 0 at phi = pi/2), and the step's norm without drift. At q = 4
 * the branch past it takes over within a few ulps. (Every float32 q, in
 * both arithmetics: tools/rotation_poly.py --check.)
 */
static void test_mid_range(void **state)
{
    (void)state;
    uint32_t lo, hi;
    float f = (float)PS_SERIES_Q;
    memcpy(&lo, &f, 4);
    f = 4.0f;
    memcpy(&hi, &f, 4);
    double worst[6] = {0}, bsum[30] = {0}, bn[30] = {0};
    const char *names[6] = {"c (abs)", "A", "B", "C", "cos(phi/2)", "sin(phi/2)/phi"};
    for (uint32_t bits = lo; bits < hi; bits += (hi - lo) >> 17) {
        float q;
        memcpy(&q, &bits, 4);
        float v[6];
        ps_rot_coeffs_jac_f(q, &v[0], &v[1], &v[2], &v[3]);
        ps_half_coeffs_f(q, &v[4], &v[5]);
        float c1, A1, B1;
        ps_rot_coeffs_f(q, &c1, &A1, &B1);
        assert_true(c1 == v[0] && A1 == v[1] && B1 == v[2]);
        long double ql = q, ph = sqrtl(ql), ex[6];
        ex[0] = cosl(ph);
        ex[1] = sinl(ph) / ph;
        ex[2] = (1.0L - cosl(ph)) / ql;
        ex[3] = (ph - sinl(ph)) / (ql * ph);
        ex[4] = cosl(ph / 2);
        ex[5] = sinl(ph / 2) / ph;
        /* the step's norm c^2 + q A^2 (1 exactly), by stretch of q */
        const int b = (int)((q - 0.25) / 3.75 * 30);
        bsum[b] += (double)v[0] * v[0] + (double)q * v[1] * v[1] - 1.0;
        bn[b] += 1;
        for (int k = 0; k < 6; k++) {
            double e = (double)fabsl((long double)v[k] - ex[k]);
            if (k > 0) /* in ulps of the exact value (2^-23 relative at most) */
                e /= (double)nextafterf((float)ex[k], INFINITY) - (double)(float)ex[k];
            if (e > worst[k])
                worst[k] = e;
        }
    }
    for (int k = 0; k < 6; k++)
        printf("float32 %-15s for 1/4 <= q < 4: worst %.3g%s\n", names[k], worst[k],
               k ? " ulps" : "");
    for (int k = 0; k < 6; k++)
        assert_true(k ? worst[k] <= 2.0 : worst[k] <= 2e-7);
    /* no drift: the mean of c^2 + q A^2 - 1 over each of 30 stretches of q
     * (1/8 wide) stays at the rounding's noise (a rounded constant term
     * gave 2e-8) */
    double bias = 0.0;
    for (int b = 0; b < 30; b++)
        bias = fmax(bias, fabs(bsum[b] / bn[b]));
    printf("float32 c^2 + q A^2 - 1: largest mean over 30 stretches of q %.3g\n", bias);
    assert_true(bias <= 4e-9);
    /* the switch at q = 4: both sides close to each other */
    float qs[2] = {nextafterf(4.0f, 0.0f), 4.0f}, v[2][4];
    for (int i = 0; i < 2; i++)
        ps_rot_coeffs_jac_f(qs[i], &v[i][0], &v[i][1], &v[i][2], &v[i][3]);
    for (int k = 0; k < 4; k++) {
        double u = k ? ulps_f(v[0][k], v[1][k]) : fabs((double)v[0][k] - (double)v[1][k]);
        printf("switch at q = 4, %-7s: %.9g / %.9g (%.3g%s)\n", names[k], v[0][k], v[1][k], u,
               k ? " ulps" : "");
        assert_true(k ? u <= 8.0 : u <= 4e-7);
    }
}

/* Random theta of length len in a random direction. */
static void theta_of_length(uint64_t *seed, double len, double th[3])
{
    double v[3], n;
    do {
        for (int i = 0; i < 3; i++)
            v[i] = tu_uniform(seed, -1.0, 1.0);
        n = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    } while (n < 0.1 || n > 1.0);
    for (int i = 0; i < 3; i++)
        th[i] = v[i] * len / n;
}

/* Lengths of theta for the step tests: zero, tiny, both sides of the
 * series switch (|theta| = 0.5 <=> q = 0.25), moderate and large. */
static const double theta_lengths[] = {
    0.0, 1e-9, 1e-4, 0.1, 0.5 * (1 - 1e-7), 0.5, 0.5 * (1 + 1e-7),
    0.8, 1.7,  3.1,  7.0};
#define N_LENGTHS (sizeof theta_lengths / sizeof theta_lengths[0])

/*
 * The shared step (ps_bloch_step_d, _f) against the plain Rodrigues step
 * of the reference, with and without relaxation, for every theta length.
 * float64 to 1e-14 (a handful of roundings on O(1) numbers), float32 to
 * 1e-6 (~16 ulps; the float32 theta itself is rounded).
 */
static void test_step_vs_reference(void **state)
{
    (void)state;
    uint64_t seed = 2024;
    double worst_d = 0.0, worst_f = 0.0;
    for (size_t li = 0; li < N_LENGTHS; li++) {
        for (int rep = 0; rep < 20; rep++) {
            double th[3], m[3], out[3];
            theta_of_length(&seed, theta_lengths[li], th);
            for (int i = 0; i < 3; i++)
                m[i] = tu_uniform(&seed, -1.0, 1.0);
            int relax = rep % 2;
            double e1 = tu_uniform(&seed, 0.9, 1.0),
                   e2 = tu_uniform(&seed, 0.8, 1.0);
            ref_step(th, 1.0, relax, e1, e2, m, out);
            double md[3] = {m[0], m[1], m[2]};
            ps_bloch_step_d(th, md, relax, 1.0 - e1, 1.0 - e2);
            float thf[3] = {(float)th[0], (float)th[1], (float)th[2]};
            float mf[3] = {(float)m[0], (float)m[1], (float)m[2]};
            ps_bloch_step_f(thf, mf, relax, (float)(1.0 - e1), (float)(1.0 - e2));
            for (int i = 0; i < 3; i++) {
                worst_d = fmax(worst_d, fabs(md[i] - out[i]));
                worst_f = fmax(worst_f, fabs((double)mf[i] - out[i]));
            }
        }
    }
    printf("step vs reference: worst |diff| float64 %.3g, float32 %.3g\n",
           worst_d, worst_f);
    assert_true(worst_d <= 1e-14);
    assert_true(worst_f <= 1e-6);
}

/* L = lam . step(theta, m) in double. */
static double step_dot(const double th[3], const double m[3], int relax,
                       double e1, double e2, const double lam[3])
{
    double mm[3] = {m[0], m[1], m[2]};
    ps_bloch_step_d(th, mm, relax, 1.0 - e1, 1.0 - e2);
    return lam[0] * mm[0] + lam[1] * mm[1] + lam[2] * mm[2];
}

/*
 * The adjoint step against central finite differences of the forward step:
 * with L = lam . step(theta, M), ps_bloch_adjoint_d must return dL/dtheta
 * and dL/dM. h = 1e-6 on O(1) quantities: truncation ~h^2 |L'''| ~ 1e-11
 * (|theta| up to 7, derivatives of cos/sin stay O(1) per unit of theta),
 * rounding ~1e-16/h = 1e-10, so a 1e-8 absolute tolerance leaves margin and
 * is still far below a wrong term (O(1e-1) or more). At |theta| = 0 the
 * difference straddles zero and near q = 0.25 it straddles the series
 * switch, which is the point. The float version is then compared with the
 * double one (1e-5 absolute: float32 rounding times O(|theta|^2) factors).
 */
static void test_adjoint_vs_fd(void **state)
{
    (void)state;
    uint64_t seed = 77;
    const double h = 1e-6;
    double worst_fd = 0.0, worst_f = 0.0;
    for (size_t li = 0; li < N_LENGTHS; li++) {
        for (int rep = 0; rep < 10; rep++) {
            double th[3], m[3], lam[3], gth[3], lamo[3];
            theta_of_length(&seed, theta_lengths[li], th);
            for (int i = 0; i < 3; i++) {
                m[i] = tu_uniform(&seed, -1.0, 1.0);
                lam[i] = tu_uniform(&seed, -1.0, 1.0);
            }
            int relax = rep % 2;
            double e1 = tu_uniform(&seed, 0.7, 1.0),
                   e2 = tu_uniform(&seed, 0.5, 1.0);
            lamo[0] = lam[0];
            lamo[1] = lam[1];
            lamo[2] = lam[2];
            gth[0] = gth[1] = gth[2] = PS_POISON;
            ps_bloch_adjoint_d(th, m, lamo, relax, 1.0 - e1, 1.0 - e2, gth);
            for (int i = 0; i < 3; i++) {
                double tp[3] = {th[0], th[1], th[2]},
                       tm[3] = {th[0], th[1], th[2]};
                tp[i] += h;
                tm[i] -= h;
                double fd = (step_dot(tp, m, relax, e1, e2, lam) -
                             step_dot(tm, m, relax, e1, e2, lam)) /
                            (2 * h);
                double err = fabs(fd - gth[i]);
                worst_fd = fmax(worst_fd, err);
                if (!(err <= 1e-8))
                    printf(
                        "adjoint dL/dtheta[%d] |theta| %g: %.12g vs fd %.12g\n",
                        i, theta_lengths[li], gth[i], fd);
                assert_true(err <= 1e-8);

                double mp[3] = {m[0], m[1], m[2]}, mn[3] = {m[0], m[1], m[2]};
                mp[i] += h;
                mn[i] -= h;
                fd = (step_dot(th, mp, relax, e1, e2, lam) -
                      step_dot(th, mn, relax, e1, e2, lam)) /
                     (2 * h);
                err = fabs(fd - lamo[i]);
                worst_fd = fmax(worst_fd, err);
                if (!(err <= 1e-8))
                    printf("adjoint dL/dM[%d] |theta| %g: %.12g vs fd %.12g\n",
                           i, theta_lengths[li], lamo[i], fd);
                assert_true(err <= 1e-8);
            }
            float thf[3], mf[3], lf[3], gf[3];
            for (int i = 0; i < 3; i++) {
                thf[i] = (float)th[i];
                mf[i] = (float)m[i];
                lf[i] = (float)lam[i];
            }
            ps_bloch_adjoint_f(thf, mf, lf, relax, (float)(1.0 - e1), (float)(1.0 - e2), gf);
            for (int i = 0; i < 3; i++) {
                worst_f = fmax(worst_f, fabs((double)gf[i] - gth[i]));
                worst_f = fmax(worst_f, fabs((double)lf[i] - lamo[i]));
            }
        }
    }
    printf("adjoint vs FD: worst abs error float64 %.3g; float32 vs float64 "
           "%.3g\n",
           worst_fd, worst_f);
    assert_true(worst_f <= 1e-5);
}

/*
 * The reverse step of model/bloch_math.h (for backward sweeps that recover the
 * states instead of storing them): from M_k = step(M_{k-1}) it must give
 * back M_{k-1} and the same dL/dtheta and dL/dM_{k-1} as ps_bloch_adjoint
 * at M_{k-1}. Undoing relaxation divides by e1, e2 >= 0.7 here, so one
 * step amplifies rounding by at most 1/0.7: float64 to 1e-14, float32 to
 * 2e-6 (the adjoint's terms are O(|theta|^2) <= 50 times the inputs, so
 * the gradients are compared relative to 1 + |theta|^2).
 */
static void test_reverse_adjoint(void **state)
{
    (void)state;
    uint64_t seed = 4242;
    double worst_m = 0.0, worst_g = 0.0, worst_mf = 0.0, worst_gf = 0.0;
    for (size_t li = 0; li < N_LENGTHS; li++) {
        for (int rep = 0; rep < 10; rep++) {
            double th[3], m[3], lam[3];
            theta_of_length(&seed, theta_lengths[li], th);
            for (int i = 0; i < 3; i++) {
                m[i] = tu_uniform(&seed, -1.0, 1.0);
                lam[i] = tu_uniform(&seed, -1.0, 1.0);
            }
            int relax = rep % 2;
            double e1 = tu_uniform(&seed, 0.7, 1.0),
                   e2 = tu_uniform(&seed, 0.7, 1.0);
            double scale = 1.0 + theta_lengths[li] * theta_lengths[li];

            double la[3] = {lam[0], lam[1], lam[2]}, ga[3];
            ps_bloch_adjoint_d(th, m, la, relax, 1.0 - e1, 1.0 - e2, ga);
            double mk[3] = {m[0], m[1], m[2]}, lr[3] = {lam[0], lam[1], lam[2]};
            double gr[3] = {PS_POISON, PS_POISON, PS_POISON};
            ps_bloch_step_d(th, mk, relax, 1.0 - e1, 1.0 - e2);
            /* decrements a = 1 - e, increments b = 1/e - 1 */
            ps_bloch_reverse_adjoint_d(th, mk, lr, relax, 1.0 - e1, 1.0 - e2,
                                       1.0 / e1 - 1.0, 1.0 / e2 - 1.0, gr);
            for (int i = 0; i < 3; i++) {
                worst_m = fmax(worst_m, fabs(mk[i] - m[i]));
                worst_g = fmax(worst_g, fabs(gr[i] - ga[i]) / scale);
                worst_g = fmax(worst_g, fabs(lr[i] - la[i]) / scale);
            }

            float thf[3], mf[3], lf[3], gf[3];
            for (int i = 0; i < 3; i++) {
                thf[i] = (float)th[i];
                mf[i] = (float)m[i];
                lf[i] = (float)lam[i];
            }
            ps_bloch_step_f(thf, mf, relax, (float)(1.0 - e1), (float)(1.0 - e2));
            ps_bloch_reverse_adjoint_f(thf, mf, lf, relax, (float)(1.0 - e1),
                                       (float)(1.0 - e2), (float)(1.0 / e1 - 1.0),
                                       (float)(1.0 / e2 - 1.0), gf);
            for (int i = 0; i < 3; i++) {
                worst_mf = fmax(worst_mf, fabs((double)mf[i] - m[i]));
                worst_gf = fmax(worst_gf, fabs((double)gf[i] - ga[i]) / scale);
                worst_gf = fmax(worst_gf, fabs((double)lf[i] - la[i]) / scale);
            }
        }
    }
    printf("reverse step: M_{k-1} recovered to %.3g (float64), %.3g (float32); "
           "adjoint vs ps_bloch_adjoint %.3g (float64), %.3g (float32)\n",
           worst_m, worst_mf, worst_g, worst_gf);
    assert_true(worst_m <= 1e-14);
    assert_true(worst_g <= 1e-14);
    assert_true(worst_mf <= 2e-6);
    assert_true(worst_gf <= 2e-6);
}

/*
 * Composed affine maps (segment composition of model/bloch_math.h): T starts as
 * [I | 0] and takes 60 steps of random theta (lengths up to 3.1 rad) with
 * relaxation on every other segment; T_lin M0 + T_t must equal the same
 * steps applied one by one (ps_bloch_step) and the plain reference step.
 * float64 to 1e-13 (60 steps of O(1) rounding), float32 to 60 PS_F32_STEP.
 */
static void test_affine_composition(void **state)
{
    (void)state;
    enum { NSTEP = 60 };
    uint64_t seed = 606;
    double worst_d = 0.0, worst_f = 0.0;
    for (int seg = 0; seg < 8; seg++) {
        int relax = seg % 2;
        double T[12] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
        float Tf[12] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
        double m0[3], ms[3], mr[3];
        for (int i = 0; i < 3; i++)
            m0[i] = ms[i] = mr[i] = tu_uniform(&seed, -1.0, 1.0);
        for (int k = 0; k < NSTEP; k++) {
            double th[3];
            theta_of_length(&seed, theta_lengths[k % 10], th);
            double e1 = tu_uniform(&seed, 0.95, 1.0),
                   e2 = tu_uniform(&seed, 0.9, 1.0);
            ps_affine_step_d(th, T, relax, 1.0 - e1, 1.0 - e2);
            float thf[3] = {(float)th[0], (float)th[1], (float)th[2]};
            ps_affine_step_f(thf, Tf, relax, (float)(1.0 - e1), (float)(1.0 - e2));
            ps_bloch_step_d(th, ms, relax, 1.0 - e1, 1.0 - e2);
            double out[3];
            ref_step(th, 1.0, relax, e1, e2, mr, out);
            mr[0] = out[0];
            mr[1] = out[1];
            mr[2] = out[2];
        }
        for (int i = 0; i < 3; i++) {
            double md = T[4 * i] * m0[0] + T[4 * i + 1] * m0[1] +
                        T[4 * i + 2] * m0[2] + T[4 * i + 3];
            double mf = (double)Tf[4 * i] * m0[0] +
                        (double)Tf[4 * i + 1] * m0[1] +
                        (double)Tf[4 * i + 2] * m0[2] + (double)Tf[4 * i + 3];
            worst_d = fmax(worst_d, fmax(fabs(md - ms[i]), fabs(md - mr[i])));
            worst_f = fmax(worst_f, fabs(mf - mr[i]));
        }
    }
    printf("affine composition over %d steps: float64 %.3g, float32 %.3g\n",
           NSTEP, worst_d, worst_f);
    assert_true(worst_d <= 1e-13);
    assert_true(worst_f <= NSTEP * PS_F32_STEP);
}

/*
 * The slew parametrization of a designed gradient axis (SPEC 1.2,
 * model/design.h): the start waveform's round trip g -> t -> g, the
 * clipping of a start slew at 0.9 smax, |slew| < smax for any t, and the
 * chain rule (reverse cumulative sum, atan) against central differences
 * of a smooth function of the waveform.
 */
static void test_slew_parametrization(void **state)
{
    (void)state;
    enum { N = 57 };
    const double smax = 15000.0, dt = 4e-6; /* 150 T/m/s in G/cm/s, 4 us */
    const double kappa = 0.37; /* the optimizer's scale: t = kappa x */
    uint64_t seed = 77;
    double g[N], t[N], g2[N], s[N];
    /* round trip: slews within 0.8 smax */
    double prev = 0.0;
    for (int k = 0; k < N; k++) {
        s[k] = tu_uniform(&seed, -0.8 * smax, 0.8 * smax);
        g[k] = prev + dt * s[k];
        prev = g[k];
    }
    ps_slew_variables(smax, kappa, dt, 0.0, N, g, t);
    ps_slew_waveform(smax, kappa, dt, N, t, g2);
    double worst = 0.0, gmax = 0.0;
    for (int k = 0; k < N; k++) {
        worst = fmax(worst, fabs(g2[k] - g[k]));
        gmax = fmax(gmax, fabs(g[k]));
    }
    printf("slew round trip: max |g(t(g)) - g| = %.2e of max |g| %.3e\n", worst, gmax);
    assert_true(worst <= 1e-12 * gmax);
    /* clipping: a jump of 2 smax dt in one step is followed at 0.9 smax
     * over the next two steps */
    double jump[3] = {0.0, 2.0 * smax * dt, 2.0 * smax * dt}, tj[3], sj;
    ps_slew_variables(smax, kappa, dt, 0.0, 3, jump, tj);
    /* the slews of the variables: t_k = kappa (x_k - x_{k-1}) */
    sj = ps_slew_of_t(smax, ps_slew_t(kappa, tj[1], tj[0]));
    const double sj2 = ps_slew_of_t(smax, ps_slew_t(kappa, tj[2], tj[1]));
    printf("clipped start slew %.6f smax, next %.6f smax\n", sj / smax, sj2 / smax);
    assert_true(fabs(sj - 0.9 * smax) <= 1e-12 * smax);
    assert_true(fabs(sj2 - 0.9 * smax) <= 1e-12 * smax);
    ps_slew_variables(smax, kappa, dt, 0.0, 3, (const double[3]){0.0, -jump[1], 0.0}, tj);
    assert_true(fabs(ps_slew_of_t(smax, ps_slew_t(kappa, tj[1], tj[0])) + 0.9 * smax) <= 1e-12 * smax);
    /* with gmax the start is clipped to it: the round trip's waveform is g
     * within gmax, gmax where g is above it (the slews here allow that) */
    const double gm = 0.5 * gmax;
    ps_slew_variables(smax, kappa, dt, gm, N, g, t);
    ps_slew_waveform(smax, kappa, dt, N, t, g2);
    size_t clipped = 0;
    for (int k = 0; k < N; k++) {
        const double want = fmin(gm, fmax(-gm, g[k]));
        clipped += want != g[k];
        assert_true(fabs(g2[k]) <= gm * (1.0 + 1e-12));
        if (k == 0 || fabs(want - fmin(gm, fmax(-gm, g[k - 1]))) <= 0.8 * smax * dt)
            assert_true(fabs(g2[k] - want) <= 1e-12 * gmax);
    }
    printf("gmax clipping: %zu of %d steps clipped\n", clipped, N);
    assert_true(clipped > 0);
    ps_slew_variables(smax, kappa, dt, 0.0, N, g, t); /* the unclipped start again */
    /* any t: |s| < smax, also where atan rounds to pi/2 it stays <= smax */
    const double ts[] = {0.0, 1.0, -3.0, 1e3, -1e8, 1e300, -1e300};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        assert_true(fabs(ps_slew_of_t(smax, ts[i])) <= smax);
    assert_true(fabs(ps_slew_of_t(smax, 1e3)) < smax);

    /* chain rule: F(g) = sum_k w_k g_k + 0.5 c_k g_k^2 */
    double w[N], c[N], gg[N], gt[N];
    for (int k = 0; k < N; k++) {
        w[k] = tu_uniform(&seed, -1.0, 1.0);
        c[k] = tu_uniform(&seed, 0.0, 50.0);
    }
    ps_slew_waveform(smax, kappa, dt, N, t, g2);
    for (int k = 0; k < N; k++)
        gg[k] = w[k] + c[k] * g2[k];
    ps_slew_backward(smax, kappa, dt, N, t, gg, gt);
    double err = 0.0, big = 0.0;
    for (int i = 0; i < N; i++) {
        double tp[N], fp = 0.0, fm = 0.0, h = 1e-6 * fmax(1.0, fabs(t[i]));
        memcpy(tp, t, sizeof tp);
        for (int sgn = 0; sgn < 2; sgn++) {
            tp[i] = t[i] + (sgn ? -h : h);
            ps_slew_waveform(smax, kappa, dt, N, tp, g);
            double f = 0.0;
            for (int k = 0; k < N; k++)
                f += w[k] * g[k] + 0.5 * c[k] * g[k] * g[k];
            if (sgn)
                fm = f;
            else
                fp = f;
        }
        double fd = (fp - fm) / ((t[i] + h) - (t[i] - h));
        err = fmax(err, fabs(fd - gt[i]));
        big = fmax(big, fabs(gt[i]));
    }
    printf("slew chain rule vs central differences: worst %.2e of max |dF/dt| %.3e\n", err, big);
    assert_true(big > 0.0 && err <= 1e-7 * big);
    /* in place (gt may equal gg) */
    memcpy(s, gg, sizeof s);
    ps_slew_backward(smax, kappa, dt, N, t, s, s);
    assert_memory_equal(s, gt, sizeof s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hard_pulse),
        cmocka_unit_test(test_slew_parametrization),
        cmocka_unit_test(test_hard_pulse_channels),
        cmocka_unit_test(test_precession_clockwise),
        cmocka_unit_test(test_small_tip_fourier),
        cmocka_unit_test(test_relaxation_recovery),
        cmocka_unit_test(test_identity_zero_field),
        cmocka_unit_test(test_has_gradient),
        cmocka_unit_test(test_reparam_inverse_huge),
        cmocka_unit_test(test_series_switch),
        cmocka_unit_test(test_mid_range),
        cmocka_unit_test(test_step_vs_reference),
        cmocka_unit_test(test_adjoint_vs_fd),
        cmocka_unit_test(test_reverse_adjoint),
        cmocka_unit_test(test_affine_composition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
