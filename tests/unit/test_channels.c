/*
 * Transmit channels (SPEC 1.1) on the CPU backend, bit for bit:
 *
 * - One channel through a b1map S_j1 = (s_j, 0) is the B1-scale path: the
 *   same problem given with b1scale s_j and given with nc = 1 (and nc = 0,
 *   which means 1) and that b1map gives memcmp-identical F, gradient and M
 *   in float32 and float64, in the optimizer's variables (ps_objective_cpu,
 *   b1_max's reparametrization included) and at the physical pulse
 *   (ps_eval, ps_simulate), and solve_persistent gives identical
 *   trajectories (status, counts, every history f and gradient norm, the
 *   final x) over 30 iterations. Random problems with df, spins off the
 *   centre, relaxation, b1_max and lambda > 0.
 *
 * - A channel that no spin sees (S = 0 for every spin) changes nothing:
 *   a 2-channel problem whose second channel has S = 0 gives, for the first
 *   channel's pulse, exactly the F, M and first-channel gradient of the
 *   1-channel problem of the first channel's b1map, whatever the second
 *   channel's pulse is, in both precisions. What holds exactly and why:
 *   the field adds the second channel as fma(0, u, th) and fma(-0, v, th),
 *   which return th itself (th + (+-0) = th for th != 0, and +0 for
 *   th = +-0 either way, where the rotation is the same); the second
 *   channel's share of the loss gradient is (0 g_x + 0 g_y, ...) = +-0. With
 *   lambda = 0 this is all: F, M and the first channel's gradient are
 *   bit-identical and the second channel's gradient is zero. With lambda > 0
 *   the second channel's gradient is exactly 2 lambda u_2k (0 + 2 lambda u
 *   is exact), F is bit-identical when that channel's pulse is zero (its
 *   squares add +0 after the first channel's, in the order of x), and
 *   otherwise F exceeds the 1-channel F by lambda sum |b_2k|^2 up to the
 *   rounding of adding that sum to F (a few ulps of F), which is what is
 *   checked there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "cpu/objective.h"
#include "persolve.h"
#include "reference/ref_bloch.h"
#include "test_util.h"

enum { NS = 60, NT = 90 };

static ps_options cpu_options(int precision)
{
    ps_options o;
    ps_options_default(&o);
    o.backend = PS_BACKEND_CPU;
    o.precision = (ps_precision)precision;
    o.threads = 1;
    return o;
}

/* F, gradient and M of one evaluation. */
typedef struct eval_out {
    double f, g[2 * 2 * NT], m[3 * NS];
} eval_out;

static void poison_out(eval_out *e)
{
    e->f = PS_POISON;
    tu_poison(e->g, sizeof e->g / sizeof e->g[0]);
    tu_poison(e->m, sizeof e->m / sizeof e->m[0]);
}

/* ps_objective_cpu (optimizer variables) at z, and ps_eval + ps_simulate
 * (physical) at x, into oz and ox (poisoned first); every element checked
 * written. */
static void evaluate(const ps_problem *p, int precision, const double *z,
                     const double *x, eval_out *oz, eval_out *ox)
{
    size_t nx = ps_problem_nx(p), ns = ps_problem_ns(p);
    poison_out(oz);
    poison_out(ox);
    assert_int_equal(ps_objective_cpu(p, precision, 1, z, &oz->f, oz->g, oz->m),
                     PS_CONVERGED);
    ps_options o = cpu_options(precision);
    assert_int_equal(ps_eval(p, &o, x, &ox->f, ox->g), PS_CONVERGED);
    assert_int_equal(ps_simulate(p, &o, x, ox->m), PS_CONVERGED);
    const eval_out *e[2] = {oz, ox};
    for (int i = 0; i < 2; i++) {
        assert_true(e[i]->f != PS_POISON && isfinite(e[i]->f));
        for (size_t k = 0; k < nx; k++)
            assert_true(e[i]->g[k] != PS_POISON && isfinite(e[i]->g[k]));
        for (size_t k = 0; k < 3 * ns; k++)
            assert_true(e[i]->m[k] != PS_POISON && isfinite(e[i]->m[k]));
    }
}

/* Count of differing bits-patterns between a[n] and b[n] (memcmp per
 * element), printed with the first one. */
static size_t differing(const char *what, const double *a, const double *b,
                        size_t n)
{
    size_t count = 0, first = n;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof a[i]) != 0) {
            if (first == n)
                first = i;
            count++;
        }
    if (count)
        printf("  %s: %zu of %zu differ, first [%zu] %.17g vs %.17g\n", what,
               count, n, first, a[first], b[first]);
    return count;
}

/* A random single-channel problem (b1scale) of the variant `v`. */
static void single_channel_problem(int v, ref_problem *rp)
{
    ref_problem_opts ro = {
        .ns = NS,
        .nt = NT,
        .loss = (ps_loss)(v % 4),
        .relax = v % 3,
        .lambda = v % 2 ? 0.4 : 0.0,
        .b1_max = v % 4 == 1 || v % 4 == 2 ? 0.2 : PS_B1MAX_NONE,
        .zero_spin = v % 2 == 0,
        .seed = 7000 + (uint64_t)v,
    };
    assert_int_equal(ref_problem_random(&ro, rp), 0);
    /* spins off the centre (up to 3 cm) and df up to 300 Hz come with
     * ref_problem_random; make sure of it */
    double rmax = 0.0, dfmax = 0.0;
    for (size_t j = 0; j < NS; j++) {
        rmax = fmax(rmax, fabs(rp->r[3 * j]));
        dfmax = fmax(dfmax, fabs(rp->df[j]));
    }
    assert_true(rmax > 1.0 && dfmax > 100.0);
}

/*
 * The B1-scale problem and its twins through a b1map (s_j, 0) with nc = 1
 * and nc = 0: F, gradient and M memcmp-identical in both precisions, in the
 * optimizer's variables and at the physical pulse.
 */
static void test_b1map_one_channel_is_b1scale(void **state)
{
    (void)state;
    for (int v = 0; v < 8; v++) {
        ref_problem rp;
        single_channel_problem(v, &rp);
        double b1map[2 * NS];
        for (size_t j = 0; j < NS; j++) {
            b1map[2 * j] = rp.b1scale[j];
            b1map[2 * j + 1] = 0.0;
        }
        ps_problem *ps = NULL, *pm[2] = {NULL, NULL};
        assert_int_equal(ps_problem_create(&rp.d, &ps), PS_CONVERGED);
        for (int t = 0; t < 2; t++) {
            ps_problem_desc d = rp.d;
            d.b1scale = NULL;
            d.b1map = b1map;
            d.nc = (size_t)(1 - t); /* 1, then 0 (meaning 1) */
            assert_int_equal(ps_problem_create(&d, &pm[t]), PS_CONVERGED);
            assert_int_equal(ps_problem_nc(pm[t]), 1);
            assert_int_equal(ps_problem_nx(pm[t]), 2 * NT);
        }
        const double *z = rp.d.b1_max < PS_B1MAX_NONE ? rp.z : rp.x;
        for (int prec = 0; prec < 2; prec++) {
            eval_out sz, sx, mz, mx;
            evaluate(ps, prec, z, rp.x, &sz, &sx);
            for (int t = 0; t < 2; t++) {
                evaluate(pm[t], prec, z, rp.x, &mz, &mx);
                size_t bad = 0;
                bad += differing("F (z)", &sz.f, &mz.f, 1);
                bad += differing("gradient (z)", sz.g, mz.g, 2 * NT);
                bad += differing("M (z)", sz.m, mz.m, 3 * NS);
                bad += differing("F (pulse)", &sx.f, &mx.f, 1);
                bad += differing("gradient (pulse)", sx.g, mx.g, 2 * NT);
                bad += differing("M (pulse)", sx.m, mx.m, 3 * NS);
                printf("variant %d (%s, relax %d, lambda %g, b1_max %s) %s, "
                       "b1map nc = %d: F %.17g %s\n",
                       v, ps_loss_name(rp.d.loss), v % 3, rp.d.lambda,
                       rp.d.b1_max < PS_B1MAX_NONE ? "0.2" : "none",
                       prec ? "float64" : "float32", 1 - t, mz.f,
                       bad ? "DIFFERS" : "bit-identical");
                assert_int_equal(bad, 0);
            }
        }
        ps_problem_free(ps);
        ps_problem_free(pm[0]);
        ps_problem_free(pm[1]);
        ref_problem_free(&rp);
    }
}

/* Runs 30 iterations of solve_persistent (CPU) from the problem's x0. */
static void solve30(const ps_problem *p, int precision, double *x, ps_result *r)
{
    ps_options o = cpu_options(precision);
    o.max_iterations = 30;
    o.gtol = 0.0;
    o.ftol = 0.0;
    assert_int_equal(ps_problem_x0(p, x), PS_CONVERGED);
    memset(r, 0, sizeof *r);
    solve_persistent(p, &o, x, r);
}

/*
 * solve_persistent on the B1-scale problem and on its b1map twin: the same
 * status, iterations, evaluations, f, every history row's f, gnorm and step,
 * and the same x, bit for bit, in both precisions.
 */
static void test_b1map_one_channel_solve(void **state)
{
    (void)state;
    const int variants[3] = {1, 2, 3}; /* b1_max with lambda, b1_max, lambda */
    for (int vi = 0; vi < 3; vi++) {
        ref_problem rp;
        single_channel_problem(variants[vi], &rp);
        double b1map[2 * NS];
        for (size_t j = 0; j < NS; j++) {
            b1map[2 * j] = rp.b1scale[j];
            b1map[2 * j + 1] = 0.0;
        }
        ps_problem *ps = NULL, *pm = NULL;
        assert_int_equal(ps_problem_create(&rp.d, &ps), PS_CONVERGED);
        ps_problem_desc d = rp.d;
        d.b1scale = NULL;
        d.b1map = b1map;
        d.nc = 1;
        assert_int_equal(ps_problem_create(&d, &pm), PS_CONVERGED);
        for (int prec = 0; prec < 2; prec++) {
            double xs[2 * NT], xm[2 * NT];
            ps_result rs, rm;
            solve30(ps, prec, xs, &rs);
            solve30(pm, prec, xm, &rm);
            printf("solve variant %d %s: status %d/%d iterations %lld/%lld "
                   "evaluations %lld/%lld f %.17g / %.17g\n",
                   variants[vi], prec ? "float64" : "float32", rs.status,
                   rm.status, (long long)rs.iterations, (long long)rm.iterations,
                   (long long)rs.evaluations, (long long)rm.evaluations, rs.f,
                   rm.f);
            assert_true(rs.status >= 0);
            assert_true(rs.iterations >= 5); /* a trajectory worth comparing */
            assert_int_equal(rs.status, rm.status);
            assert_int_equal(rs.iterations, rm.iterations);
            assert_int_equal(rs.evaluations, rm.evaluations);
            assert_memory_equal(&rs.f, &rm.f, sizeof rs.f);
            assert_memory_equal(&rs.gnorm, &rm.gnorm, sizeof rs.gnorm);
            assert_int_equal(rs.history_len, rm.history_len);
            for (size_t i = 0; i < rs.history_len; i++) {
                const ps_progress *a = &rs.history[i], *b = &rm.history[i];
                assert_int_equal(a->iteration, b->iteration);
                assert_int_equal(a->evaluations, b->evaluations);
                assert_memory_equal(&a->f, &b->f, sizeof a->f);
                assert_memory_equal(&a->gnorm, &b->gnorm, sizeof a->gnorm);
                assert_memory_equal(&a->step, &b->step, sizeof a->step);
            }
            assert_memory_equal(xs, xm, sizeof xs);
            /* and the solve did move: f went down from the start */
            assert_true(rs.history[rs.history_len - 1].f < rs.history[0].f);
            ps_result_free(&rs);
            ps_result_free(&rm);
        }
        ps_problem_free(ps);
        ps_problem_free(pm);
        ref_problem_free(&rp);
    }
}

/*
 * A second channel with S = 0 for every spin (see the top of the file for
 * what holds exactly). Problem A: one channel through a random complex
 * b1map; problem B: the same b1map as channel 0 of two, channel 1 zero.
 */
static void test_unseen_channel(void **state)
{
    (void)state;
    for (int v = 0; v < 8; v++) {
        ref_problem_opts ro = {
            .ns = NS,
            .nt = NT,
            .loss = (ps_loss)(v % 4),
            .relax = v % 3,
            .lambda = v >= 4 ? 0.4 : 0.0,
            .b1_max = PS_B1MAX_NONE,
            .zero_spin = v % 2,
            .nc = 1,
            .seed = 7100 + (uint64_t)v,
        };
        ref_problem rp;
        assert_int_equal(ref_problem_random(&ro, &rp), 0);
        double b1map2[2 * 2 * NS];
        for (size_t j = 0; j < NS; j++) {
            b1map2[4 * j] = rp.b1map[2 * j];
            b1map2[4 * j + 1] = rp.b1map[2 * j + 1];
            b1map2[4 * j + 2] = 0.0;
            b1map2[4 * j + 3] = 0.0;
        }
        ps_problem *pa = NULL, *pb = NULL;
        assert_int_equal(ps_problem_create(&rp.d, &pa), PS_CONVERGED);
        ps_problem_desc d = rp.d;
        d.nc = 2;
        d.b1map = b1map2;
        d.b1 = NULL;
        assert_int_equal(ps_problem_create(&d, &pb), PS_CONVERGED);
        uint64_t s = 99 + (uint64_t)v;
        for (int second = 0; second < 2; second++) {
            /* x of B: channel 0 is A's pulse; channel 1 zero, then random */
            double xb[4 * NT];
            memcpy(xb, rp.x, 2 * NT * sizeof(double));
            for (size_t k = 0; k < 2 * NT; k++)
                xb[2 * NT + k] = second ? tu_uniform(&s, -0.4, 0.4) : 0.0;
            for (int prec = 0; prec < 2; prec++) {
                eval_out ea, eb, ma, mb;
                evaluate(pa, prec, rp.x, rp.x, &ea, &ma);
                evaluate(pb, prec, xb, xb, &eb, &mb);
                size_t bad = 0;
                bad += differing("M (objective)", ea.m, eb.m, 3 * NS);
                bad += differing("M (ps_simulate)", ma.m, mb.m, 3 * NS);
                bad += differing("gradient, channel 0", ea.g, eb.g, 2 * NT);
                bad += differing("gradient, channel 0 (ps_eval)", ma.g, mb.g,
                                 2 * NT);
                double pow2 = 0.0;
                for (size_t k = 0; k < 2 * NT; k++) {
                    /* the unseen channel's gradient is the penalty's alone */
                    double want = 2.0 * rp.d.lambda * xb[2 * NT + k];
                    if (!(eb.g[2 * NT + k] == want && mb.g[2 * NT + k] == want))
                        bad++;
                    pow2 += xb[2 * NT + k] * xb[2 * NT + k];
                }
                int exact_f = rp.d.lambda == 0.0 || !second;
                double fa = ea.f + rp.d.lambda * pow2;
                double ferr = fabs(eb.f - fa) / fabs(fa);
                if (exact_f) {
                    bad += differing("F", &ea.f, &eb.f, 1);
                    bad += differing("F (ps_eval)", &ma.f, &mb.f, 1);
                } else if (!(ferr <= 8 * 2.2e-16 &&
                             fabs(mb.f - fa) <= 8 * 2.2e-16 * fabs(fa))) {
                    bad++;
                }
                printf("unseen channel, variant %d (%s, relax %d, lambda %g, "
                       "channel 1 %s) %s: F %.17g vs %.17g (%s) %s\n",
                       v, ps_loss_name(rp.d.loss), v % 3, rp.d.lambda,
                       second ? "random" : "zero", prec ? "float64" : "float32",
                       eb.f, ea.f,
                       exact_f ? "bit-identical asked"
                               : "+ lambda |b_2|^2 within 8 ulps asked",
                       bad ? "FAIL" : "ok");
                assert_int_equal(bad, 0);
            }
        }
        ps_problem_free(pa);
        ps_problem_free(pb);
        ref_problem_free(&rp);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b1map_one_channel_is_b1scale),
        cmocka_unit_test(test_b1map_one_channel_solve),
        cmocka_unit_test(test_unseen_channel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
