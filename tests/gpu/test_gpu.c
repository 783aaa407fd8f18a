/*
 * The persistent GPU kernel against the CPU backend (checkasm style):
 * evaluations on random problems with outputs poisoned first, whole solves
 * on every preset, bit-identical repeats. Exits 77 without a usable GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cpu/objective.h"
#include "cuda/gpu.h"
#include "cuda/launch.h"
#include "gpu_check.h"
#include "gpu_suite.h"
#include "persolve.h"
#include "test_util.h"

/* A random problem: spins in a 4 cm cube, random df, B1 scale, weights,
 * start magnetization on the unit sphere, optional relaxation, a random
 * smooth gradient waveform (gk: GK_XYZ; GK_XY, G_z = 0 at every step;
 * GK_NONE, G = 0 at every step) and pulse. */
enum { GK_XYZ, GK_XY, GK_NONE };
static ps_problem *random_problem_g(uint64_t seed, size_t ns, size_t nt, ps_loss loss, int relax,
                                    double t2fix, int gk, double *x)
{
    double *r = malloc(3 * ns * sizeof *r), *tg = malloc(3 * ns * sizeof *tg);
    double *df = malloc(ns * sizeof *df), *s = malloc(ns * sizeof *s);
    double *w = malloc(ns * sizeof *w), *m0 = malloc(3 * ns * sizeof *m0);
    double *t1 = malloc(ns * sizeof *t1), *t2 = malloc(ns * sizeof *t2);
    double *g = malloc(3 * nt * sizeof *g);
    for (size_t j = 0; j < ns; j++) {
        for (int c = 0; c < 3; c++) {
            r[3 * j + c] = tu_uniform(&seed, -2.0, 2.0);
            tg[3 * j + c] = tu_uniform(&seed, -1.0, 1.0);
        }
        double a = tu_uniform(&seed, 0, 6.283185307179586), z = tu_uniform(&seed, -1, 1);
        m0[3 * j] = sqrt(1 - z * z) * cos(a);
        m0[3 * j + 1] = sqrt(1 - z * z) * sin(a);
        m0[3 * j + 2] = z;
        df[j] = tu_uniform(&seed, -300.0, 300.0);
        s[j] = tu_uniform(&seed, 0.7, 1.2);
        w[j] = tu_uniform(&seed, 0.0, 2.0);
        t1[j] = t2fix > 0.0 ? 10.0 * t2fix : tu_uniform(&seed, 2e-3, 1.0);
        t2[j] = t2fix > 0.0 ? t2fix : tu_uniform(&seed, 1e-3, 0.1);
    }
    for (size_t k = 0; k < nt; k++) {
        double t = (double)k / (double)nt;
        g[3 * k] = gk == GK_NONE ? 0.0 : 0.5 * sin(6.283185307179586 * 3 * t);
        g[3 * k + 1] = gk == GK_NONE ? 0.0 : 0.4 * cos(6.283185307179586 * 2 * t);
        g[3 * k + 2] = gk == GK_XYZ ? 0.3 : 0.0;
        x[k] = 0.1 * tu_uniform(&seed, -1.0, 1.0);
        x[nt + k] = 0.1 * tu_uniform(&seed, -1.0, 1.0);
    }
    ps_problem_desc d;
    ps_problem_desc_init(&d);
    d.ns = ns;
    d.nt = nt;
    d.r = r;
    d.target = tg;
    d.df = df;
    d.b1scale = s;
    d.w = w;
    d.m0 = m0;
    d.t1 = relax ? t1 : NULL;
    d.t2 = relax ? t2 : NULL;
    d.g = g;
    d.dt = 4e-6;
    d.lambda = 0.01;
    d.loss = loss;
    ps_problem *p = NULL;
    assert_int_equal(ps_problem_create(&d, &p), 0);
    free(r), free(tg), free(df), free(s), free(w), free(m0), free(t1), free(t2), free(g);
    return p;
}

static ps_problem *random_problem_t2(uint64_t seed, size_t ns, size_t nt, ps_loss loss, int relax,
                                     double t2fix, double *x)
{
    return random_problem_g(seed, ns, nt, loss, relax, t2fix, GK_XYZ, x);
}

/* Random relaxation times (relax != 0) or none. */
static ps_problem *random_problem(uint64_t seed, size_t ns, size_t nt, ps_loss loss, int relax,
                                  double *x)
{
    return random_problem_t2(seed, ns, nt, loss, relax, 0.0, x);
}

static ps_options gpu_opts(ps_precision prec)
{
    ps_options o;
    ps_options_default(&o);
    o.backend = PS_BACKEND_GPU;
    o.precision = prec;
    return o;
}

/* GPU against CPU on random problems of gradient kind gk (GK_*, and the
 * kernel class it makes): every loss, with and without relaxation, at
 * each of the sizes. */
static void eval_random_set(uint64_t seed, const size_t (*sizes)[2], int nsizes, int gk)
{
    static const ps_loss losses[] = {PS_LOSS_FULL, PS_LOSS_XY, PS_LOSS_MLS, PS_LOSS_Z};
    for (int li = 0; li < 4; li++) {
        for (int relax = 0; relax < 2; relax++) {
            for (int si = 0; si < nsizes; si++) {
                size_t ns = sizes[si][0], nt = sizes[si][1];
                double *x = malloc(2 * nt * sizeof *x);
                ps_problem *p = random_problem_g(seed++, ns, nt, losses[li], relax, 0.0, gk, x);
                assert_int_equal(ps_gpu_kernel_class(p), gk == GK_NONE ? PS_GPU_NOGRAD
                                                         : gk == GK_XY  ? PS_GPU_STAGED
                                                                        : 0);
                char what[96];
                snprintf(what, sizeof what, "%sloss %s relax %d ns %zu nt %zu",
                         gk == GK_NONE ? "no gradient, " : gk == GK_XY ? "x and y, " : "", ps_loss_name(losses[li]),
                         relax, ns, nt);
                tu_check_eval_gpu(p, x, PS_PRECISION_SINGLE, what, NULL);
                tu_check_eval_gpu(p, x, PS_PRECISION_DOUBLE, what, NULL);
                ps_problem_free(p);
                free(x);
            }
        }
    }
}

static void eval_random(void **state)
{
    /* sizes that do not divide into tiles or segments evenly */
    static const size_t sizes[][2] = {{1, 7}, {37, 101}, {300, 257}, {1500, 999}};
    eval_random_set(1, sizes, getenv("PS_GPU_TEST_QUICK") ? 2 : 4, GK_XYZ);
}

/* Problems without gradient: the PS_GPU_NOGRAD kernel class, whose spin
 * loops skip the gradient rows; the CPU takes them as zeros. */
static void eval_random_nograd(void **state)
{
    static const size_t sizes[][2] = {{37, 101}, {1500, 999}};
    eval_random_set(1001, sizes, 2, GK_NONE);
}

/* A gradient on x and y alone: the PS_GPU_STAGED kernel class, whose
 * float32 blocks stage the x and y rows with the pulse; up to its longest
 * pulse (PS_GPU_STAGED_STEPS). */
static void eval_random_xy(void **state)
{
    static const size_t sizes[][2] = {{37, 101}, {1500, 999}, {70, PS_GPU_STAGED_STEPS}};
    eval_random_set(2001, sizes, getenv("PS_GPU_TEST_QUICK") ? 2 : 3, GK_XY);
}

/*
 * T2 much shorter than a time segment would be without the relaxation
 * bound on the segment length (ps_gpu_min_segments): the backward replay
 * runs relaxation in reverse, and an unbounded segment amplifies rounding
 * by exp(K dt / T2). 4096 spins, 2000 steps of 4 us, T2 = 50 us and 100 us.
 */
static void eval_short_t2(void **state)
{
    static const double t2s[] = {50e-6, 100e-6};
    for (int i = 0; i < 2; i++) {
        size_t ns = 4096, nt = 2000;
        double *x = malloc(2 * nt * sizeof *x);
        ps_problem *p = random_problem_t2(77 + (uint64_t)i, ns, nt, PS_LOSS_FULL, 1, t2s[i], x);
        printf("T2 = %g s: at least %d segments\n", t2s[i], ps_gpu_min_segments(p));
        char what[64];
        snprintf(what, sizeof what, "short T2 %g", t2s[i]);
        tu_check_eval_gpu(p, x, PS_PRECISION_SINGLE, what, NULL);
        tu_check_eval_gpu(p, x, PS_PRECISION_DOUBLE, what, NULL);
        ps_problem_free(p);
        free(x);
    }
}

/*
 * The same solve on GPU and CPU: same status, f within 1e-4 relative, and
 * two GPU runs bit-identical. Rounding differs between the backends, so
 * the trajectories part after some iterations (printed) and are compared
 * where they stop: float64 runs to a tight gradient tolerance (gtol > 0,
 * ftol off; both reach the same minimizer), float32 (gtol = 0) is the
 * whole solve with the library's default tolerances, as a user runs it.
 */
static void solve_preset_floor(const char *spec, ps_precision prec, int64_t iters, double gtol, double floor0)
{
    ps_problem *p;
    char err[256];
    assert_int_equal(ps_preset_create(spec, &p, err, sizeof err), 0);
    size_t n = ps_problem_nx(p);
    double *xc = malloc(n * sizeof *xc), *xg = malloc(n * sizeof *xg), *xg2 = malloc(n * sizeof *xg2);
    ps_problem_x0(p, xc);
    ps_problem_x0(p, xg);
    ps_problem_x0(p, xg2);
    ps_options oc;
    ps_options_default(&oc);
    oc.backend = PS_BACKEND_CPU;
    oc.precision = prec;
    oc.max_iterations = iters;
    if (gtol > 0.0) {
        oc.gtol = gtol;
        oc.ftol = 0.0;
    }
    ps_options og = oc;
    og.backend = PS_BACKEND_GPU;
    ps_result rc, rg, rg2;
    int sc = solve_persistent(p, &oc, xc, &rc);
    int sg = solve_persistent(p, &og, xg, &rg);
    int sg2 = solve_persistent(p, &og, xg2, &rg2);
    /* where the two trajectories part (f differs by more than 1e-8
     * relative in float64, 1e-5 in float32) */
    double part = prec == PS_PRECISION_DOUBLE ? 1e-8 : 1e-5;
    size_t agree = 0;
    while (agree < rc.history_len && agree < rg.history_len &&
           fabs(rc.history[agree].f - rg.history[agree].f) <= part * fabs(rc.history[agree].f))
        agree++;
    printf("%s %s: cpu status %d it %lld f %.10g (%.2f s) | gpu status %d it %lld f %.10g "
           "(%.4f s kernel, %.1f us/iteration) %s\n",
           spec, prec == PS_PRECISION_SINGLE ? "fp32" : "fp64", sc, (long long)rc.iterations, rc.f,
           rc.seconds, sg, (long long)rg.iterations, rg.f, rg.kernel_seconds,
           1e6 * rg.kernel_seconds / (double)(rg.iterations ? rg.iterations : 1), rg.device);
    printf("    f agrees to %g for the first %zu iterations\n", part, agree);
    assert_int_equal(rg.backend, PS_BACKEND_GPU);
    assert_int_equal(sg, sc);
    /* float64: 1e-4 (the backends compute the same function to ~1e-15).
     * float32 whole solves stop where f decreases by less than the noise
     * allowance (1e-5 relative) per `past` iterations, at points that
     * differ along flat valleys: measured up to 2e-3 apart on the presets */
    double ftol_cmp = prec == PS_PRECISION_DOUBLE ? 1e-4 : 5e-3;
    /* a design whose f goes to 0 ends at float32's floor of f, a fraction
     * floor0 of the start's f, not at a relative precision of f itself */
    const double allowed = fmax(ftol_cmp * fabs(rc.f), floor0 * fabs(rc.history[0].f));
    printf("    f relative difference %.2e (allowed %.0e), difference %.2e of f0 (allowed %.2e of f0); "
           "penalty rounds cpu %d, gpu %d\n",
           fabs(rg.f - rc.f) / fabs(rc.f), ftol_cmp, fabs(rg.f - rc.f) / fabs(rc.history[0].f),
           allowed / fabs(rc.history[0].f), rc.rounds, rg.rounds);
    assert_int_equal(rg.rounds, rc.rounds);
    assert_true(fabs(rg.f - rc.f) <= allowed);
    /* bit-identical repeat */
    assert_int_equal(sg2, sg);
    assert_int_equal(rg2.iterations, rg.iterations);
    assert_int_equal(rg2.evaluations, rg.evaluations);
    assert_true(rg2.f == rg.f);
    assert_int_equal(memcmp(xg, xg2, n * sizeof *xg), 0);
    /* history consistent with the result */
    assert_int_equal(rg.history_len, (size_t)rg.iterations + 1);
    assert_true(rg.history[rg.history_len - 1].f == rg.f);
    ps_result_free(&rc);
    ps_result_free(&rg);
    ps_result_free(&rg2);
    free(xc), free(xg), free(xg2);
    ps_problem_free(p);
}

static void solve_preset(const char *spec, ps_precision prec, int64_t iters, double gtol)
{
    solve_preset_floor(spec, prec, iters, gtol, 0.0);
}

/* The presets' start points: GPU evaluation against the CPU. */
static void eval_presets(void **state)
{
    static const char *specs[] = {"slice1d", "inversion", "spiral2d:n=32,nt=1000"};
    for (int i = 0; i < 3; i++) {
        ps_problem *p;
        char err[256];
        assert_int_equal(ps_preset_create(specs[i], &p, err, sizeof err), 0);
        double *x = malloc(2 * ps_problem_nt(p) * sizeof *x);
        ps_problem_x0(p, x);
        tu_check_eval_gpu(p, x, PS_PRECISION_SINGLE, specs[i], NULL);
        tu_check_eval_gpu(p, x, PS_PRECISION_DOUBLE, specs[i], NULL);
        free(x);
        ps_problem_free(p);
    }
}

static void solve_slice1d(void **state)
{
    solve_preset("slice1d", PS_PRECISION_DOUBLE, 60, 1e-7);
    solve_preset("slice1d", PS_PRECISION_SINGLE, 3000, 0.0);
}

static void solve_inversion(void **state)
{
    solve_preset("inversion", PS_PRECISION_DOUBLE, 25, 1e-7);
    solve_preset("inversion", PS_PRECISION_SINGLE, 3000, 0.0);
}

static void solve_spiral2d(void **state)
{
    solve_preset("spiral2d:n=32,nt=1000", PS_PRECISION_DOUBLE, 100, 1e-7);
    solve_preset("spiral2d:n=32,nt=1000", PS_PRECISION_SINGLE, 3000, 0.0);
}

/* Parallel transmit: 8 channels, and with the SAR penalty's rounds (the
 * same number of rounds on both backends; the SAR values at the end are
 * test_gpu_channels' solve_sar). */
static void solve_ptx2d(void **state)
{
    solve_preset("ptx2d:n=32,nt=400", PS_PRECISION_DOUBLE, 100, 1e-7);
    /* float32 ends near f = 0 (both backends converge by the gradient
     * test; measured f 1.52e-5 on the CPU and 1.90e-5 on the GPU from f0
     * 88.5: 4.3e-8 of f0 apart, against 1e-6 allowed) */
    solve_preset_floor("ptx2d:n=32,nt=400", PS_PRECISION_SINGLE, 3000, 0.0, 1e-6);
    solve_preset("ptx2d:n=32,nt=400,sar=1", PS_PRECISION_SINGLE, 3000, 0.0);
}

/* Every launch shape the solver may pick gives the same evaluation. */
static void configs_agree(void **state)
{
    size_t ns = 200, nt = 300;
    double *x = malloc(2 * nt * sizeof *x);
    ps_problem *p = random_problem(99, ns, nt, PS_LOSS_FULL, 1, x);
    ps_options o = gpu_opts(PS_PRECISION_DOUBLE);
    o.max_iterations = 5;
    static const ps_gpu_config cfgs[] = {
        {0, 128, 32, 4, 0}, {0, 256, 1, 256, 0}, {0, 512, 16, 32, 0}, {0, 64, 2, 32, 0},
        {7, 256, 8, 32, 0},  {0, 512, 32, 16, 1}, {0, 256, 4, 64, 1},
    };
    double fref = 0.0;
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        double *xi = malloc(2 * nt * sizeof *xi);
        memcpy(xi, x, 2 * nt * sizeof *xi);
        ps_result r;
        memset(&r, 0, sizeof r);
        int st = ps_gpu_solve_config(p, &o, &cfgs[i], xi, &r);
        printf("config block %d sb %d segs %d grid %d regcap %d: status %d f %.15g\n",
               cfgs[i].block, cfgs[i].sb, cfgs[i].segs, cfgs[i].grid, cfgs[i].regcap, st, r.f);
        assert_int_equal(st, PS_MAX_ITERATIONS);
        if (i == 0)
            fref = r.f;
        assert_true(fabs(r.f - fref) <= 1e-9 * fabs(fref));
        ps_result_free(&r);
        free(xi);
    }
    ps_problem_free(p);
    free(x);
}

int main(void)
{
    /* quick: the subset run under compute-sanitizer */
    const struct CMUnitTest quick[] = {
        cmocka_unit_test(eval_random),
        cmocka_unit_test(eval_random_nograd),
        cmocka_unit_test(eval_random_xy),
        cmocka_unit_test(configs_agree),
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(eval_random),
        cmocka_unit_test(eval_random_nograd),
        cmocka_unit_test(eval_random_xy),
        cmocka_unit_test(configs_agree),
        cmocka_unit_test(eval_presets),
        cmocka_unit_test(eval_short_t2),
        cmocka_unit_test(solve_slice1d),
        cmocka_unit_test(solve_inversion),
        cmocka_unit_test(solve_spiral2d),
        cmocka_unit_test(solve_ptx2d),
    };
    return TU_RUN_GPU_SUITE(quick, tests);
}
