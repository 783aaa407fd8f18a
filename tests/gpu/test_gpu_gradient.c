/*
 * Designed gradient axes (SPEC 1.2, 1.3) on the GPU against the CPU
 * backend, checkasm style: evaluations of random problems with designed
 * axes x, xy and xyz on the single-channel kernel (one real channel) and
 * the channels kernel (3 and 8 channels), every loss, relaxation, the RF
 * mask, outputs poisoned first and the RF's and the waveforms' gradients
 * compared apart, worst element reported; the RF mask without designed
 * axes; a central difference of the GPU's F along the waveforms, and the
 * checks failing for a deliberately wrong gradient; short designs (the
 * in-solve gradient of the slew variables) against the CPU's; a design
 * through the gmax and g_end penalty rounds against the CPU; the three
 * solve variants bit-identical through the rounds; pauses, yields and
 * checkpoint hops ending bit-identical to an uninterrupted run. Exits 77
 * without a usable GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "cuda/launch.h"
#include "gpu_problem.h"
#include "gpu_suite.h"
#include "persolve.h"
#include "persolve_gpu.h"
#include "test_util.h"

static int quick(void)
{
    return getenv("PS_GPU_TEST_QUICK") != NULL;
}

/* Largest |a_i| of a[n]. */
static double amax(const double *a, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i]));
    return m;
}

/*
 * The GPU's F, gradient and M_Nt at x in precision prec against the CPU's
 * (float64), the GPU's outputs poisoned first: the RF's part and the
 * waveforms' part of the gradient compared apart, each with atol relative
 * to its own largest element; with the RF mask, the held steps' gradient
 * exactly zero.
 */
static void check_eval(const ps_problem *p, const double *x, ps_precision prec, const char *what)
{
    const size_t ns = ps_problem_ns(p), n = ps_problem_nx(p), nt = ps_problem_nt(p), nc = ps_problem_nc(p);
    const size_t nrf = 2 * nc * nt;
    ps_problem_desc d;
    assert_int_equal(ps_problem_describe(p, &d), 0);
    double fc, fg = PS_POISON, *gc = malloc(n * sizeof *gc), *gg = malloc(n * sizeof *gg);
    double *mc = malloc(3 * ns * sizeof *mc), *mg = malloc(3 * ns * sizeof *mg);
    ps_options oc = opts(PS_BACKEND_CPU, PS_PRECISION_DOUBLE), og = opts(PS_BACKEND_GPU, prec);
    assert_int_equal(ps_eval(p, &oc, x, &fc, gc), 0);
    assert_int_equal(ps_simulate(p, &oc, x, mc), 0);
    tu_poison(gg, n);
    tu_poison(mg, 3 * ns);
    assert_int_equal(ps_eval(p, &og, x, &fg, gg), 0);
    assert_int_equal(ps_simulate(p, &og, x, mg), 0);
    const int single = prec == PS_PRECISION_SINGLE;
    const double rtol = single ? 1e-3 : 1e-9, atol = single ? 1e-4 : 1e-10;
    char name[240];
    snprintf(name, sizeof name, "%s %s F", what, single ? "fp32" : "fp64");
    assert_true(tu_compare(name, &fg, &fc, 1, 0.0, single ? 1e-5 : 1e-11));
    snprintf(name, sizeof name, "%s %s dF/db", what, single ? "fp32" : "fp64");
    assert_true(tu_compare(name, gg, gc, nrf, atol * amax(gc, nrf), rtol));
    if (n > nrf) {
        snprintf(name, sizeof name, "%s %s dF/dg", what, single ? "fp32" : "fp64");
        assert_true(tu_compare(name, gg + nrf, gc + nrf, n - nrf, atol * amax(gc + nrf, n - nrf), rtol));
    }
    snprintf(name, sizeof name, "%s %s M", what, single ? "fp32" : "fp64");
    assert_true(tu_compare(name, mg, mc, 3 * ns, single ? 2e-4 : 1e-11, 0.0));
    for (size_t k = 0; d.rf_mask && k < nt; k++)
        for (size_t c = 0; c < nc; c++)
            if (d.rf_mask[k] == 0.0) {
                assert_true(gg[2 * c * nt + k] == 0.0);
                assert_true(gg[(2 * c + 1) * nt + k] == 0.0);
            }
    free(gc), free(gg), free(mc), free(mg);
}

/*
 * Random problems with designed axes on both kernels: one real channel
 * (the single-channel kernel), 3 and 8 channels (the channels kernel);
 * x, xy and xyz; every loss; relaxation on and off; b1_max; the RF mask;
 * the gradient limits (evaluated at mu = 0: no penalty in F); sizes that
 * do not divide into tiles or chunks of 32 evenly.
 */
static void eval_designed(void **state)
{
    static const ps_loss losses[] = {PS_LOSS_FULL, PS_LOSS_XY, PS_LOSS_MLS, PS_LOSS_Z};
    static const size_t ncs[] = {0, 3, 8};
    static const unsigned axes[] = {PS_AXIS_X, PS_AXIS_X | PS_AXIS_Y, PS_AXIS_X | PS_AXIS_Y | PS_AXIS_Z};
    static const size_t sizes[][2] = {{37, 101}, {300, 257}, {900, 611}};
    uint64_t seed = 301;
    for (int ci = 0; ci < 3; ci++)
        for (int ai = 0; ai < 3; ai++)
            for (int li = 0; li < 4; li += quick() ? 3 : 1) {
                const int si = (ci + ai + li) % (quick() ? 1 : 3), relax = (ai + li) & 1, mask = li == 1 || li == 2;
                const size_t ns = sizes[si][0], nt = sizes[si][1];
                const double b1max = li == 2 ? 0.08 : 0.0;
                double *x;
                ps_problem *p = designed_problem(seed++, ns, nt, ncs[ci], losses[li], relax, b1max, axes[ai], 0.8,
                                                 li & 1, mask, &x);
                char what[200];
                snprintf(what, sizeof what, "nc %zu design_g %u loss %s relax %d mask %d b1max %g ns %zu nt %zu",
                         ncs[ci], axes[ai], ps_loss_name(losses[li]), relax, mask, b1max, ns, nt);
                check_eval(p, x, PS_PRECISION_SINGLE, what);
                check_eval(p, x, PS_PRECISION_DOUBLE, what);
                ps_problem_free(p);
                free(x);
            }
}

/*
 * Designed x and y with G_z = 0 at every step, one channel: the
 * PS_GPU_STAGED kernel class, whose float32 blocks stage the x and y
 * rows with the pulse (cuda/evaluate.cuh GR_STAGED); every loss,
 * relaxation on and off, the RF mask, b1_max, the limits; sizes that do
 * not divide evenly, the longest staged waveform's neighbourhood (5003
 * steps, and 5121: past PS_GPU_STAGED_STEPS, the rows from global
 * memory again). Both precisions (float64 runs the general kernel).
 */
static void eval_designed_staged(void **state)
{
    static const ps_loss losses[] = {PS_LOSS_FULL, PS_LOSS_XY, PS_LOSS_MLS, PS_LOSS_Z};
    static const size_t sizes[][2] = {{37, 101}, {300, 257}, {900, 611}, {120, 5003}, {64, 5121}};
    uint64_t seed = 1301;
    for (int li = 0; li < 4; li += quick() ? 3 : 1)
        for (int si = 0; si < (quick() ? 2 : 5); si++) {
            /* the 5121 steps without relaxation, as eval_designed_long: in float32 with it and the z
             * loss, F is 1.6e-5 from the CPU's (H100), past this comparison's 1e-5 */
            const int relax = si == 4 ? 0 : (si + li) & 1, mask = li == 1 || li == 2;
            const size_t ns = sizes[si][0], nt = sizes[si][1];
            const double b1max = li == 2 ? 0.08 : 0.0;
            double *x;
            ps_problem *p = designed_problem_z(seed++, ns, nt, 0, losses[li], relax, b1max, PS_AXIS_X | PS_AXIS_Y,
                                               0.8, li & 1, mask, 1, &x);
            assert_int_equal(ps_gpu_kernel_class(p),
                             PS_GPU_DESIGNED | (nt <= PS_GPU_STAGED_STEPS ? PS_GPU_STAGED : 0));
            char what[200];
            snprintf(what, sizeof what, "staged: loss %s relax %d mask %d b1max %g ns %zu nt %zu",
                     ps_loss_name(losses[li]), relax, mask, b1max, ns, nt);
            check_eval(p, x, PS_PRECISION_SINGLE, what);
            check_eval(p, x, PS_PRECISION_DOUBLE, what);
            ps_problem_free(p);
            free(x);
        }
}

/* Long waveforms (5003 steps, the evaluation at the physical point: many
 * steps a thread in the waveform's chunks); both kernels, both
 * precisions. */
static void eval_designed_long(void **state)
{
    static const size_t ncs[] = {0, 4};
    for (int ci = 0; ci < 2; ci++) {
        double *x;
        ps_problem *p = designed_problem(401 + (uint64_t)ci, 120, 5003, ncs[ci], PS_LOSS_XY, ci, 0.0,
                                         PS_AXIS_X | PS_AXIS_Y, 0.8, 1, 0, &x);
        char what[80];
        snprintf(what, sizeof what, "long: nc %zu design_g xy nt 5003", ncs[ci]);
        check_eval(p, x, PS_PRECISION_SINGLE, what);
        check_eval(p, x, PS_PRECISION_DOUBLE, what);
        ps_problem_free(p);
        free(x);
    }
}

/* The RF mask without designed axes: both kernels, both precisions; the
 * held steps' gradient zero; a GPU design keeps them at zero. */
static void rf_mask_only(void **state)
{
    static const size_t ncs[] = {0, 3};
    for (int ci = 0; ci < 2; ci++) {
        const size_t nt = 203, ncs1 = ncs[ci] ? ncs[ci] : 1, n = 2 * ncs1 * nt;
        double *x = malloc(n * sizeof *x);
        ps_problem *p = with_design(random_problem(501 + (uint64_t)ci, 250, nt, ncs[ci], 1, PS_LOSS_FULL, ci, 0.1, x),
                                    0, 0.0, 0, 1);
        assert_int_equal(ps_problem_nx(p), n);
        char what[80];
        snprintf(what, sizeof what, "rf_mask alone nc %zu", ncs[ci]);
        check_eval(p, x, PS_PRECISION_SINGLE, what);
        check_eval(p, x, PS_PRECISION_DOUBLE, what);
        ps_options o = opts(PS_BACKEND_GPU, PS_PRECISION_SINGLE);
        o.max_iterations = 20;
        ps_result r;
        memset(&r, 0, sizeof r);
        assert_true(solve_persistent(p, &o, x, &r) >= 0);
        assert_true(r.f < r.history[0].f);
        for (size_t c = 0; c < ncs1; c++)
            for (size_t k = 0; k < nt; k++)
                if (held(k)) {
                    assert_true(x[2 * c * nt + k] == 0.0);
                    assert_true(x[(2 * c + 1) * nt + k] == 0.0);
                }
        ps_result_free(&r);
        ps_problem_free(p);
        free(x);
    }
}

/*
 * The checks can fail: the GPU's dF/dg (float64) against a central
 * difference of the GPU's own F along a random direction of the waveforms,
 * and the same gradient deliberately wrong (shifted by one step, as an
 * off-by-one cumulative sum would leave it; and scaled by 1.001) failing
 * both that check and the comparison with the CPU.
 */
static void wrong_gradient_fails(void **state)
{
    static const size_t ncs[] = {0, 3};
    for (int ci = 0; ci < 2; ci++) {
        double *x;
        ps_problem *p = designed_problem(601 + (uint64_t)ci, 200, 150, ncs[ci], PS_LOSS_MLS, 1, 0.0,
                                         PS_AXIS_X | PS_AXIS_Y, 0.8, 1, 0, &x);
        const size_t n = ps_problem_nx(p), nrf = 2 * (ncs[ci] ? ncs[ci] : 1) * 150;
        ps_options og = opts(PS_BACKEND_GPU, PS_PRECISION_DOUBLE), oc = opts(PS_BACKEND_CPU, PS_PRECISION_DOUBLE);
        double f, fc, fp, fm, *g = malloc(n * sizeof *g), *gc = malloc(n * sizeof *gc);
        double *v = calloc(n, sizeof *v), *xs = malloc(n * sizeof *xs), *w = malloc(n * sizeof *w);
        assert_int_equal(ps_eval(p, &og, x, &f, g), 0);
        assert_int_equal(ps_eval(p, &oc, x, &fc, gc), 0);
        uint64_t s = 77;
        for (size_t i = nrf; i < n; i++)
            v[i] = tu_uniform(&s, -1.0, 1.0);
        const double h = 1e-6;
        for (size_t i = 0; i < n; i++)
            xs[i] = x[i] + h * v[i];
        assert_int_equal(ps_eval(p, &og, xs, &fp, NULL), 0);
        for (size_t i = 0; i < n; i++)
            xs[i] = x[i] - h * v[i];
        assert_int_equal(ps_eval(p, &og, xs, &fm, NULL), 0);
        const double fd = (fp - fm) / (2.0 * h);
        double dot = 0.0, dshift = 0.0, dscale = 0.0;
        for (size_t i = nrf; i < n; i++) {
            dot += g[i] * v[i];
            dshift += (i + 1 < n ? g[i + 1] : 0.0) * v[i];
            dscale += 1.001 * g[i] * v[i];
        }
        const double tol = 1e-5 * fabs(fd) + 1e-9 * fabs(f);
        printf("nc %zu: central difference %.12g, GPU dF/dg . v %.12g, shifted %.12g, scaled %.12g\n", ncs[ci], fd,
               dot, dshift, dscale);
        assert_true(fabs(dot - fd) <= tol);
        assert_false(fabs(dshift - fd) <= tol);
        assert_false(fabs(dscale - fd) <= tol);
        /* the comparison with the CPU rejects the wrong gradients too */
        for (size_t i = 0; i < n; i++)
            w[i] = i >= nrf && i + 1 < n ? g[i + 1] : g[i];
        const double atol = 1e-10 * amax(gc + nrf, n - nrf);
        assert_true(tu_compare("dF/dg", g + nrf, gc + nrf, n - nrf, atol, 1e-9));
        assert_false(tu_compare("dF/dg shifted (expected to fail)", w + nrf, gc + nrf, n - nrf, atol, 1e-9));
        for (size_t i = nrf; i < n; i++)
            w[i] = 1.001 * g[i];
        assert_false(tu_compare("dF/dg scaled (expected to fail)", w + nrf, gc + nrf, n - nrf, atol, 1e-9));
        ps_problem_free(p);
        free(x), free(g), free(gc), free(v), free(xs), free(w);
    }
}

/*
 * Short designs (no limits: the in-solve gradient of the RF and slew
 * variables, the atan chain rule and the reverse cumulative sum) on the
 * GPU and the CPU in float64: f agrees per iteration, the same status.
 * The last two a long waveform (5003 steps: the slews' scan over many steps a
 * thread; an evaluation at the physical point never scans), the second
 * on a grid of 8 blocks of 64 threads, so that each block's share of the
 * waveform (cuda/gradient.cuh waveform_rows: 626 steps) takes several
 * rounds of 64, for one iteration (the first two, nt 160 on a grid of
 * every SM, leave the last blocks without a share): its trajectory is
 * chaotic (on the CPU alone, a start moved by 1e-14 relative gives f
 * 7e-10 apart after 2 iterations, 1e-5 after 5), so the last bits in
 * which the backends' sums differ would set the later f apart.
 */
static void solve_short(void **state)
{
    static const size_t ncs[] = {0, 3, 0, 0}, nss[] = {300, 300, 120, 120}, nts[] = {160, 160, 5003, 5003};
    static const unsigned axes[] = {PS_AXIS_X | PS_AXIS_Y, PS_AXIS_X | PS_AXIS_Y | PS_AXIS_Z, PS_AXIS_X | PS_AXIS_Y,
                                    PS_AXIS_X | PS_AXIS_Y};
    for (int ci = quick() ? 2 : 0; ci < 4; ci++) { /* quick: the long waveforms (formed by the team) */
        double *x0;
        ps_problem *p = designed_problem(701 + (uint64_t)(ci < 3 ? ci : 2), nss[ci], nts[ci], ncs[ci],
                                         ci == 1 ? PS_LOSS_FULL : PS_LOSS_MLS, 1, ci == 1 ? 0.1 : 0.0, axes[ci], 0.0,
                                         0, ci == 1, &x0);
        const size_t n = ps_problem_nx(p);
        double *xc = malloc(n * sizeof *xc), *xg = malloc(n * sizeof *xg);
        ps_options oc = opts(PS_BACKEND_CPU, PS_PRECISION_DOUBLE), og = opts(PS_BACKEND_GPU, PS_PRECISION_DOUBLE);
        ps_gpu_options small;
        ps_gpu_options_default(&small);
        small.gpu_block = 64;
        small.gpu_spins_per_tile = 8;
        small.gpu_grid = 8;
        if (ci == 3)
            og.gpu = &small;
        oc.max_iterations = og.max_iterations = ci >= 2 ? 1 : 12;
        oc.gtol = og.gtol = oc.ftol = og.ftol = 0.0;
        ps_result rc, rg;
        const int sc = design(p, &oc, x0, xc, &rc), sg = design(p, &og, x0, xg, &rg);
        printf("short design nc %zu nt %zu%s: cpu status %d it %lld f %.12g | gpu status %d it %lld f %.12g (start %.12g)\n",
               ncs[ci], nts[ci], ci == 3 ? " (8 blocks of 64)" : "", sc, (long long)rc.iterations, rc.f, sg,
               (long long)rg.iterations, rg.f, rg.history[0].f);
        assert_int_equal(sc, sg);
        assert_int_equal(rc.history_len, rg.history_len);
        int differ = 0;
        for (size_t i = 0; i < rc.history_len; i++)
            if (fabs(rg.history[i].f - rc.history[i].f) > 1e-9 * fabs(rc.history[i].f)) {
                printf("iteration %zu: cpu f %.17g evals %lld | gpu f %.17g evals %lld\n", i, rc.history[i].f,
                       (long long)rc.history[i].evaluations, rg.history[i].f, (long long)rg.history[i].evaluations);
                differ++;
            }
        assert_int_equal(differ, 0);
        assert_true(rg.f < rg.history[0].f);
        assert_true(tu_compare("short design x", xg, xc, n, 1e-6 * amax(xc, n), 1e-6));
        ps_result_free(&rc);
        ps_result_free(&rg);
        ps_problem_free(p);
        free(x0), free(xc), free(xg);
    }
}

/* The largest relative violation of the limits by the waveforms of x
 * (physical): max_k |g_k| / gmax - 1 and, with g_end, |g_last| / gmax. */
static double limits_violation(const ps_problem *p, const double *x)
{
    ps_problem_desc d;
    assert_int_equal(ps_problem_describe(p, &d), 0);
    const size_t nt = d.nt, nrf = 2 * d.nc * nt, n = ps_problem_nx(p);
    double v = 0.0;
    for (size_t i = nrf; i < n; i++) {
        v = fmax(v, fabs(x[i]) / d.gmax - 1.0);
        if (d.g_end && (i - nrf) % nt == nt - 1)
            v = fmax(v, fabs(x[i]) / d.gmax);
    }
    return v;
}

/*
 * Designs with the gradient limits active (gmax 0.7 of the start's peak,
 * g_end) through the penalty rounds (a decrease test shortens them), on the single-channel and the
 * channels kernel: GPU float64 and CPU the same status and rounds, the
 * limits met within the rounds' tolerance by both (and the reported
 * violation that of x); two GPU runs in float32 bit-identical.
 */
static void solve_limits(void **state)
{
    static const size_t ncs[] = {0, 3};
    if (quick()) { /* under compute-sanitizer: a small design, the GPU's float32 alone (twice) */
        double *x0;
        ps_problem *p = designed_problem(805, 64, 48, 0, PS_LOSS_MLS, 0, 0.0, PS_AXIS_X | PS_AXIS_Y, 0.7, 1, 0, &x0);
        const size_t n = ps_problem_nx(p);
        double *x = malloc(n * sizeof *x);
        ps_options o = opts(PS_BACKEND_GPU, PS_PRECISION_SINGLE);
        o.max_iterations = 1000;
        o.ftol = 1e-3;
        o.past = 3;
        ps_result r;
        const int st = design(p, &o, x0, x, &r);
        printf("limits (quick): status %d, %lld iterations, %d rounds, violation %.3e\n", st, (long long)r.iterations,
               r.rounds, limits_violation(p, x));
        check_rounds(st, &r);
        assert_true(limits_violation(p, x) <= 1e-3 * 1.01);
        same_again(p, &o, x0, n, &r, x);
        ps_result_free(&r);
        ps_problem_free(p);
        free(x0), free(x);
        return;
    }
    for (int ci = 0; ci < 2; ci++) {
        double *x0;
        ps_problem *p = designed_problem(801 + (uint64_t)ci, 250, 120, ncs[ci], PS_LOSS_MLS, 0, 0.0,
                                         PS_AXIS_X | PS_AXIS_Y, 0.7, 1, 0, &x0);
        const size_t n = ps_problem_nx(p);
        printf("limits nc %zu: start violation %.3f\n", ncs[ci], limits_violation(p, x0));
        assert_true(limits_violation(p, x0) > 0.1);
        double *x[3];
        ps_result r[3];
        for (int v = 0; v < 3; v++) {
            ps_options o = opts(v == 0 ? PS_BACKEND_CPU : PS_BACKEND_GPU,
                                v < 2 ? PS_PRECISION_DOUBLE : PS_PRECISION_SINGLE);
            o.max_iterations = 3000;
            o.ftol = 1e-4; /* rounds shorter than by the gradient test alone */
            o.past = 3;
            x[v] = malloc(n * sizeof *x[v]);
            const int st = design(p, &o, x0, x[v], &r[v]);
            printf("limits nc %zu %s %s: status %d, %lld iterations, %d rounds, mu %g, violation %.3e (of x %.3e), "
                   "f %.9g -> %.9g\n",
                   ncs[ci], v ? "gpu" : "cpu", v < 2 ? "fp64" : "fp32", st, (long long)r[v].iterations, r[v].rounds,
                   r[v].mu, r[v].violation, limits_violation(p, x[v]), r[v].history[0].f, r[v].f);
            check_rounds(st, &r[v]);
            assert_true(limits_violation(p, x[v]) <= 1e-3 * 1.01);
            assert_true(fabs(limits_violation(p, x[v]) - r[v].violation) <= 1e-6);
        }
        ps_options o = opts(PS_BACKEND_GPU, PS_PRECISION_SINGLE);
        o.max_iterations = 3000;
        o.ftol = 1e-4;
        o.past = 3;
        rounds_end(p, &o, x0, n, r, x);
        ps_problem_free(p);
        free(x0);
    }
}

/* The host loop and the CUDA graph against the persistent kernel through
 * the limits' penalty rounds (short rounds: a loose decrease test), bit
 * for bit, on both kernels (1 real channel; 3 channels with the RF mask),
 * in both precisions. */
static void variants_designed(void **state)
{
    /* one channel, three channels, and one channel with G_z = 0 (the staged kernel's class) */
    static const size_t ncs[] = {0, 3, 0};
    for (int ci = 0; ci < 3; ci++)
        for (int prec = 0; prec < 2; prec++) {
            double *x0;
            ps_problem *p = designed_problem_z(901 + (uint64_t)ci, 220, 90, ncs[ci], PS_LOSS_FULL, prec, 0.0,
                                               ci == 1 ? PS_AXIS_X | PS_AXIS_Y | PS_AXIS_Z : PS_AXIS_X | PS_AXIS_Y,
                                               0.7, 1, ci == 1, ci == 2, &x0);
            ps_options o = opts(PS_BACKEND_GPU, prec ? PS_PRECISION_DOUBLE : PS_PRECISION_SINGLE);
            o.max_iterations = 300;
            o.ftol = 1e-2;
            o.past = 3;
            char what[64];
            snprintf(what, sizeof what, "designed nc %zu%s", ncs[ci], ci == 2 ? " G_z = 0" : "");
            assert_true(variants_same(p, &o, x0, ps_problem_nx(p), what) >= 2);
            ps_problem_free(p);
            free(x0);
        }
}

/*
 * A designed run with the limits' penalty rounds interrupted at random
 * moments (pause and resume, yield and resume, pause or yield then a
 * checkpoint hop) ends bit-identical to an uninterrupted run: history f
 * and rounds, and x.
 */
static void storm_designed(void **state)
{
    /* one channel with G_z = 0 (the staged kernel's class), one channel, three channels */
    static const size_t ncs[] = {0, 0, 3};
    uint64_t seed = 2026;
    for (int ci = 0; ci < (quick() ? 1 : 3); ci++) {
        double *x0; /* quick (under compute-sanitizer): one small design */
        ps_problem *p = designed_problem_z(1001 + (uint64_t)ci, quick() ? 64 : 300, quick() ? 48 : 150, ncs[ci],
                                           PS_LOSS_MLS, 1, 0.0, PS_AXIS_X | PS_AXIS_Y, 0.7, 1, ci == 2, ci == 0, &x0);
        const size_t n = ps_problem_nx(p);
        ps_options o = opts(PS_BACKEND_GPU, PS_PRECISION_SINGLE);
        o.max_iterations = 400;
        o.ftol = 1e-3;
        o.past = 3;
        double *xr = malloc(n * sizeof *xr), *x = malloc(n * sizeof *x);
        ps_result ref;
        const double t0 = now_s();
        const int sref = design(p, &o, x0, xr, &ref);
        const double per_eval = (now_s() - t0) / (double)(ref.evaluations > 0 ? ref.evaluations : 1);
        printf("storm nc %zu%s: reference status %d, %lld iterations, %d rounds\n", ncs[ci], ci ? "" : " G_z = 0",
               sref, (long long)ref.iterations, ref.rounds);
        assert_true(sref >= 0 && ref.rounds >= 2);
        int stops = 0, hops = 0;
        for (int round = 0; round < (quick() ? 1 : 4); round++) {
            ps_result r;
            assert_int_equal(steered_run(p, &o, x0, n, &seed, per_eval, &stops, &hops, &r, x), sref);
            assert_int_equal(r.history_len, ref.history_len);
            for (size_t i = 0; i < ref.history_len; i++) {
                assert_memory_equal(&r.history[i].f, &ref.history[i].f, sizeof(double));
                assert_int_equal(r.history[i].round, ref.history[i].round);
            }
            assert_memory_equal(x, xr, n * sizeof *x);
            ps_result_free(&r);
        }
        printf("storm nc %zu: %d stops obeyed (%d checkpoint hops), every run bit-identical\n", ncs[ci], stops, hops);
        assert_true(stops >= 2);
        ps_result_free(&ref);
        ps_problem_free(p);
        free(x0), free(xr), free(x);
    }
}

int main(void)
{
    /* quick: the subset run under compute-sanitizer */
    const struct CMUnitTest quick_tests[] = {
        cmocka_unit_test(eval_designed),
        cmocka_unit_test(eval_designed_staged),
        cmocka_unit_test(rf_mask_only),
        cmocka_unit_test(wrong_gradient_fails),
        cmocka_unit_test(solve_short),
        cmocka_unit_test(solve_limits),
        cmocka_unit_test(storm_designed),
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(eval_designed),
        cmocka_unit_test(eval_designed_staged),
        cmocka_unit_test(eval_designed_long),
        cmocka_unit_test(rf_mask_only),
        cmocka_unit_test(wrong_gradient_fails),
        cmocka_unit_test(solve_short),
        cmocka_unit_test(solve_limits),
        cmocka_unit_test(variants_designed),
        cmocka_unit_test(storm_designed),
    };
    return TU_RUN_GPU_SUITE(quick_tests, tests);
}
