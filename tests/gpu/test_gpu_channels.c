/*
 * The channels kernel (several transmit channels, complex sensitivities
 * from a b1map) against the CPU backend, checkasm style: evaluations of
 * random multi-channel problems with outputs poisoned first, one channel
 * through a b1map bit for bit the B1-scale path, whole solves on GPU and
 * CPU. Exits 77 without a usable GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cuda/launch.h"
#include "gpu_check.h"
#include "gpu_problem.h"
#include "gpu_suite.h"
#include "persolve.h"
#include "test_util.h"

/* Random problems of 1, 2, 3 and 8 channels, every loss, with and without
 * relaxation and b1_max; sizes that do not divide into tiles evenly. */
static void eval_channels(void **state)
{
    static const ps_loss losses[] = {PS_LOSS_FULL, PS_LOSS_XY, PS_LOSS_MLS, PS_LOSS_Z};
    static const size_t ncs[] = {1, 2, 3, 8};
    static const size_t sizes[][2] = {{37, 101}, {300, 257}, {1500, 499}};
    /* quick (under compute-sanitizer): 3 and 8 channels, two losses, the smallest size */
    int quick = getenv("PS_GPU_TEST_QUICK") != NULL;
    uint64_t seed = 11;
    for (int ci = quick ? 2 : 0; ci < 4; ci++) {
        for (int li = 0; li < 4; li += quick ? 2 : 1) {
            for (int si = 0; si < (quick ? 1 : 3); si++) {
                const size_t ns = sizes[si][0], nt = sizes[si][1], nc = ncs[ci];
                const int relax = (li + si) & 1;
                const double b1max = li == 2 ? 0.08 : 0.0;
                double *x = malloc(2 * nc * nt * sizeof *x);
                ps_problem *p = random_problem(seed++, ns, nt, nc, 1, losses[li], relax, b1max, x);
                char what[128];
                snprintf(what, sizeof what, "nc %zu loss %s relax %d b1max %g ns %zu nt %zu", nc,
                         ps_loss_name(losses[li]), relax, b1max, ns, nt);
                tu_check_eval_gpu(p, x, PS_PRECISION_SINGLE, what, print_log);
                tu_check_eval_gpu(p, x, PS_PRECISION_DOUBLE, what, print_log);
                ps_problem_free(p);
                free(x);
            }
        }
    }
}

/* A pulse of nc nt steps too long to stage in shared memory: the kernel
 * reads it from x + alpha d. */
static void eval_unstaged(void **state)
{
    const size_t ns = 200, nt = 3000, nc = 4;
    double *x = malloc(2 * nc * nt * sizeof *x);
    ps_problem *p = random_problem(5, ns, nt, nc, 1, PS_LOSS_FULL, 0, 0.0, x);
    tu_check_eval_gpu(p, x, PS_PRECISION_SINGLE, "unstaged nc 4 nt 3000", print_log);
    tu_check_eval_gpu(p, x, PS_PRECISION_DOUBLE, "unstaged nc 4 nt 3000", print_log);
    ps_problem_free(p);
    free(x);
}

/*
 * 32 channels of 1000 steps: 64,000 unknowns (the "keep up to at
 * least 64,000 working"; past the register and staged-pulse paths: the
 * runtime channel count, the pulse from x + alpha d), evaluations in both
 * precisions against the CPU, and a 12-iteration float64 design on GPU and
 * CPU whose f agrees per iteration.
 */
static void channels_64k(void **state)
{
    const size_t ns = 150, nt = 1000, nc = 32, n = 2 * nc * nt;
    double *x = malloc(n * sizeof *x), *xc = malloc(n * sizeof *xc), *xg = malloc(n * sizeof *xg);
    ps_problem *p = random_problem(81, ns, nt, nc, 1, PS_LOSS_XY, 1, 0.05, x);
    assert_int_equal(ps_problem_nx(p), 64000);
    tu_check_eval_gpu(p, x, PS_PRECISION_SINGLE, "nc 32 nt 1000 (64,000 unknowns)", print_log);
    tu_check_eval_gpu(p, x, PS_PRECISION_DOUBLE, "nc 32 nt 1000 (64,000 unknowns)", print_log);
    ps_options oc = opts(PS_BACKEND_CPU, PS_PRECISION_DOUBLE), og = opts(PS_BACKEND_GPU, PS_PRECISION_DOUBLE);
    oc.max_iterations = og.max_iterations = 12;
    oc.gtol = og.gtol = oc.ftol = og.ftol = 0.0;
    memcpy(xc, x, n * sizeof *x);
    memcpy(xg, x, n * sizeof *x);
    ps_result rc, rg;
    memset(&rc, 0, sizeof rc);
    memset(&rg, 0, sizeof rg);
    int sc = solve_persistent(p, &oc, xc, &rc), sg = solve_persistent(p, &og, xg, &rg);
    printf("64,000 unknowns: cpu status %d it %lld f %.12g | gpu status %d it %lld f %.12g (start %.12g)\n", sc,
           (long long)rc.iterations, rc.f, sg, (long long)rg.iterations, rg.f, rg.history[0].f);
    assert_int_equal(sc, sg);
    assert_int_equal(rc.history_len, rg.history_len);
    for (size_t i = 0; i < rc.history_len; i++)
        assert_true(fabs(rg.history[i].f - rc.history[i].f) <= 1e-9 * fabs(rc.history[i].f));
    assert_true(rg.f < rg.history[0].f);
    ps_result_free(&rc);
    ps_result_free(&rg);
    ps_problem_free(p);
    free(x), free(xc), free(xg);
}

/* One channel given as a B1 scale and as the b1map (s_j, 0): the same bits
 * on the GPU (the single-channel and the channels kernel), evaluation and
 * a whole solve, in both precisions. */
static void one_channel_bits(void **state)
{
    const size_t ns = 700, nt = 301;
    for (int prec = 0; prec < 2; prec++) {
        for (int b1m = 0; b1m < 2; b1m++) {
            double *xs = malloc(2 * nt * sizeof *xs), *xm = malloc(2 * nt * sizeof *xm);
            ps_problem *ps = random_problem(21, ns, nt, 0, 0, PS_LOSS_MLS, 1, b1m ? 0.1 : 0.0, xs);
            ps_problem *pm = random_problem(21, ns, nt, 1, 1, PS_LOSS_MLS, 1, b1m ? 0.1 : 0.0, xm);
            assert_memory_equal(xs, xm, 2 * nt * sizeof *xs);
            ps_options o = opts(PS_BACKEND_GPU, prec ? PS_PRECISION_DOUBLE : PS_PRECISION_SINGLE);
            double fs = PS_POISON, fm = PS_POISON, *gs = malloc(2 * nt * sizeof *gs), *gm = malloc(2 * nt * sizeof *gm);
            tu_poison(gs, 2 * nt);
            tu_poison(gm, 2 * nt);
            assert_int_equal(ps_eval(ps, &o, xs, &fs, gs), 0);
            assert_int_equal(ps_eval(pm, &o, xm, &fm, gm), 0);
            printf("one channel %s b1max %d: F %.17g (scale) %.17g (map)\n", prec ? "fp64" : "fp32", b1m, fs, fm);
            assert_memory_equal(&fs, &fm, sizeof fs);
            assert_memory_equal(gs, gm, 2 * nt * sizeof *gs);
            o.max_iterations = 25;
            o.gtol = 0.0;
            o.ftol = 0.0;
            ps_result rs, rm;
            memset(&rs, 0, sizeof rs);
            memset(&rm, 0, sizeof rm);
            int ss = solve_persistent(ps, &o, xs, &rs), sm = solve_persistent(pm, &o, xm, &rm);
            assert_int_equal(ss, sm);
            assert_int_equal(rs.history_len, rm.history_len);
            for (size_t i = 0; i < rs.history_len; i++)
                assert_memory_equal(&rs.history[i].f, &rm.history[i].f, sizeof(double));
            assert_memory_equal(xs, xm, 2 * nt * sizeof *xs);
            ps_result_free(&rs);
            ps_result_free(&rm);
            ps_problem_free(ps);
            ps_problem_free(pm);
            free(xs), free(xm), free(gs), free(gm);
        }
    }
}

/* A 4-channel design on GPU and CPU (float64): f agrees per iteration
 * until rounding parts the trajectories (at least the first 10), both
 * decrease f; two GPU runs bit-identical (float32). */
static void solve_channels(void **state)
{
    const size_t ns = 400, nt = 200, nc = 4, n = 2 * nc * nt;
    double *x0 = malloc(n * sizeof *x0), *xc = malloc(n * sizeof *xc), *xg = malloc(n * sizeof *xg);
    ps_problem *p = random_problem(31, ns, nt, nc, 1, PS_LOSS_FULL, 0, 0.0, x0);
    memcpy(xc, x0, n * sizeof *xc);
    memcpy(xg, x0, n * sizeof *xg);
    ps_options oc = opts(PS_BACKEND_CPU, PS_PRECISION_DOUBLE), og = opts(PS_BACKEND_GPU, PS_PRECISION_DOUBLE);
    oc.max_iterations = og.max_iterations = 40;
    oc.gtol = og.gtol = 0.0;
    oc.ftol = og.ftol = 0.0;
    ps_result rc, rg;
    memset(&rc, 0, sizeof rc);
    memset(&rg, 0, sizeof rg);
    int sc = solve_persistent(p, &oc, xc, &rc), sg = solve_persistent(p, &og, xg, &rg);
    size_t agree = 0;
    while (agree < rc.history_len && agree < rg.history_len &&
           fabs(rg.history[agree].f - rc.history[agree].f) <= 1e-9 * fabs(rc.history[agree].f))
        agree++;
    printf("4 channels fp64: cpu status %d it %lld f %.12g | gpu status %d it %lld f %.12g; f agrees to "
           "1e-9 for the first %zu iterations\n",
           sc, (long long)rc.iterations, rc.f, sg, (long long)rg.iterations, rg.f, agree);
    assert_int_equal(sc, sg);
    assert_true(agree >= 10);
    assert_true(rg.f < 0.5 * rg.history[0].f && rc.f < 0.5 * rc.history[0].f);
    ps_result_free(&rc);
    ps_result_free(&rg);

    /* float32 twice: the same bits */
    ps_options o = opts(PS_BACKEND_GPU, PS_PRECISION_SINGLE);
    o.max_iterations = 60;
    double *x2 = malloc(n * sizeof *x2);
    memcpy(xg, x0, n * sizeof *xg);
    memcpy(x2, x0, n * sizeof *x2);
    ps_result r1, r2;
    memset(&r1, 0, sizeof r1);
    memset(&r2, 0, sizeof r2);
    assert_int_equal(solve_persistent(p, &o, xg, &r1), solve_persistent(p, &o, x2, &r2));
    assert_int_equal(r1.history_len, r2.history_len);
    assert_memory_equal(xg, x2, n * sizeof *xg);
    printf("4 channels fp32: %lld iterations, f %.9g -> %.9g, repeat bit-identical\n",
           (long long)r1.iterations, r1.history[0].f, r1.f);
    ps_result_free(&r1);
    ps_result_free(&r2);
    ps_problem_free(p);
    free(x0), free(xc), free(xg), free(x2);
}

/* The host loop and the CUDA graph against the persistent kernel on a
 * 3-channel problem: the same iterates, bit for bit, in both precisions. */
static void variants_channels(void **state)
{
    const size_t ns = 500, nt = 150, nc = 3, n = 2 * nc * nt;
    for (int prec = 0; prec < 2; prec++) {
        double *x0 = malloc(n * sizeof *x0);
        ps_problem *p = random_problem(41, ns, nt, nc, 1, PS_LOSS_MLS, prec, 0.0, x0);
        ps_options o = opts(PS_BACKEND_GPU, prec ? PS_PRECISION_DOUBLE : PS_PRECISION_SINGLE);
        o.max_iterations = 15;
        o.gtol = o.ftol = 0.0;
        variants_same(p, &o, x0, n, "3 channels");
        ps_problem_free(p);
        free(x0);
    }
}

/*
 * The problem p with the local-SAR constraint (SPEC 1.3) added: 4 VOPs
 * Q_q = 0.1 I + v_q v_q^H, v_q[c] = exp(i 2 pi q c / nc) (ptx2d's), TR
 * 10 ms, sar_max half the largest SAR_q of the pulse x, and one peak limit
 * per channel (0.08 .. 0.11 G). Frees p.
 */
static ps_problem *with_sar(ps_problem *p, const double *x)
{
    ps_problem_desc d;
    assert_int_equal(ps_problem_describe(p, &d), 0);
    const size_t nc = d.nc, nq = 4;
    double *vop = malloc(2 * nq * nc * nc * sizeof *vop), bm[PS_MAX_CHANNELS], sar[4];
    for (size_t q = 0; q < nq; q++)
        for (size_t a = 0; a < nc; a++)
            for (size_t c = 0; c < nc; c++) {
                const double ph = TWO_PI * (double)(q * a) / (double)nc - TWO_PI * (double)(q * c) / (double)nc;
                vop[2 * ((q * nc + a) * nc + c)] = (a == c ? 0.1 : 0.0) + cos(ph);
                vop[2 * ((q * nc + a) * nc + c) + 1] = a == c ? 0.0 : sin(ph);
            }
    for (size_t c = 0; c < nc; c++)
        bm[c] = 0.08 + 0.01 * (double)(c % 4);
    d.b1_max = PS_B1MAX_NONE;
    d.b1_max_channel = bm;
    d.nq = nq;
    d.vop = vop;
    d.tr = 0.01;
    d.sar_max = 1.0;
    ps_problem *ps = NULL;
    assert_int_equal(ps_problem_create(&d, &ps), 0);
    assert_int_equal(ps_constraints(ps, x, NULL, sar), 0);
    ps_problem_free(ps);
    d.sar_max = 0.5 * fmax(fmax(sar[0], sar[1]), fmax(sar[2], sar[3]));
    assert_int_equal(ps_problem_create(&d, &ps), 0);
    ps_problem_free(p);
    free(vop);
    return ps;
}

/* Every SAR_q of x within sar_max (1 + tol) (printed); the largest ratio. */
static double sar_ratio(const ps_problem *p, const double *x)
{
    ps_problem_desc d;
    double sar[4], worst = 0.0;
    assert_int_equal(ps_problem_describe(p, &d), 0);
    assert_int_equal(ps_constraints(p, x, NULL, sar), 0);
    for (size_t q = 0; q < d.nq; q++)
        worst = fmax(worst, sar[q] / d.sar_max);
    return worst;
}

/*
 * A 3-channel design with the SAR penalty and per-channel peak limits on
 * the GPU and the CPU (float64): the same status and number of rounds,
 * every SAR_q <= sar_max (1 + 1e-3) at the end on both, the history's
 * rounds non-decreasing; the peaks below their limits; two GPU runs
 * (float32) bit-identical.
 */
static void solve_sar(void **state)
{
    const size_t ns = 300, nt = 80, nc = 3, n = 2 * nc * nt;
    double *x0 = malloc(n * sizeof *x0), *x[3], peak[3];
    ps_problem *p = with_sar(random_problem(61, ns, nt, nc, 1, PS_LOSS_MLS, 0, 0.0, x0), x0);
    printf("SAR problem: start at %.3f of sar_max\n", sar_ratio(p, x0));
    assert_true(sar_ratio(p, x0) >= 1.99);
    ps_result r[3];
    for (int v = 0; v < 3; v++) {
        ps_options o = opts(v == 0 ? PS_BACKEND_CPU : PS_BACKEND_GPU, v < 2 ? PS_PRECISION_DOUBLE : PS_PRECISION_SINGLE);
        o.max_iterations = 2000;
        x[v] = malloc(n * sizeof *x[v]);
        memcpy(x[v], x0, n * sizeof *x0);
        memset(&r[v], 0, sizeof r[v]);
        int st = solve_persistent(p, &o, x[v], &r[v]);
        assert_int_equal(ps_constraints(p, x[v], peak, NULL), 0);
        printf("SAR design %s %s: status %d, %lld iterations, %d rounds, mu %g, violation %.2e, SAR/max %.6f, "
               "f %.9g -> %.9g, peaks %.4f %.4f %.4f\n",
               v ? "gpu" : "cpu", v < 2 ? "fp64" : "fp32", st, (long long)r[v].iterations, r[v].rounds, r[v].mu,
               r[v].violation, sar_ratio(p, x[v]), r[v].history[0].f, r[v].f, peak[0], peak[1], peak[2]);
        check_rounds(st, &r[v]);
        assert_true(sar_ratio(p, x[v]) <= 1.0 + 1e-3);
        for (size_t c = 0; c < nc; c++)
            assert_true(peak[c] < 0.08 + 0.01 * (double)c);
    }
    ps_options o = opts(PS_BACKEND_GPU, PS_PRECISION_SINGLE);
    o.max_iterations = 2000;
    rounds_end(p, &o, x0, n, r, x);
    ps_problem_free(p);
    free(x0);
}

/* The host loop and the CUDA graph against the persistent kernel through
 * the SAR penalty's rounds (a loose decrease test and a light first
 * weight: short rounds, several of them), bit for bit, in both
 * precisions. */
static void variants_sar(void **state)
{
    const size_t ns = 250, nt = 70, nc = 4, n = 2 * nc * nt;
    for (int prec = 0; prec < 2; prec++) {
        double *x0 = malloc(n * sizeof *x0);
        ps_problem *p = with_sar(random_problem(71, ns, nt, nc, 1, PS_LOSS_FULL, prec, 0.0, x0), x0);
        ps_options o = opts(PS_BACKEND_GPU, prec ? PS_PRECISION_DOUBLE : PS_PRECISION_SINGLE);
        o.max_iterations = 300;
        o.ftol = 1e-3;
        o.past = 3;
        o.penalty_mu = 1e-3;
        assert_true(variants_same(p, &o, x0, n, "SAR 4 channels") >= 3);
        ps_problem_free(p);
        free(x0);
    }
}

/*
 * A 3-channel GPU solve paused mid-way, checkpointed, freed and resumed
 * from the checkpoint ends bit-identical to one that was not; a CPU run's
 * checkpoint taken in the UPDATE phase resumes on the GPU (the partials
 * its trial left are made there) and completes.
 */
static void checkpoint_channels(void **state)
{
    const size_t ns = 400, nt = 120, nc = 3, n = 2 * nc * nt;
    double *x0 = malloc(n * sizeof *x0), *xr = malloc(n * sizeof *xr), *x = malloc(n * sizeof *x);
    ps_problem *p = random_problem(51, ns, nt, nc, 1, PS_LOSS_FULL, 1, 0.1, x0);
    ps_options o = opts(PS_BACKEND_GPU, PS_PRECISION_SINGLE);
    o.max_iterations = 200;
    o.gtol = o.ftol = 0.0;
    ps_result ref, r;
    memset(&ref, 0, sizeof ref);
    memcpy(xr, x0, n * sizeof *x0);
    assert_int_equal(solve_persistent(p, &o, xr, &ref), PS_MAX_ITERATIONS);

    ps_run *run;
    memcpy(x, x0, n * sizeof *x0);
    assert_int_equal(ps_solve_start(p, &o, x, &run), 0);
    while (snap(run).iteration < 60 && snap(run).state != PS_RUN_FINISHED)
        ;
    assert_int_equal(ps_run_pause(run), 0);
    while (snap(run).state == PS_RUN_RUNNING)
        ;
    ps_snapshot s = snap(run);
    assert_int_equal(s.state, PS_RUN_PAUSED); /* 200 iterations take longer than this */
    assert_int_equal(resume_from_checkpoint(p, &o, run, &r, x), PS_MAX_ITERATIONS);
    printf("3 channels: paused at iteration %lld, resumed from its checkpoint: f %.9g, uninterrupted %.9g\n",
           (long long)s.iteration, r.f, ref.f);
    assert_int_equal(r.history_len, ref.history_len);
    for (size_t i = 0; i < ref.history_len; i++)
        assert_memory_equal(&r.history[i].f, &ref.history[i].f, sizeof(double));
    assert_memory_equal(x, xr, n * sizeof *x);
    ps_result_free(&r);

    /* a CPU run paused before an update, resumed on the GPU */
    ps_options oc = o;
    oc.backend = PS_BACKEND_CPU;
    memcpy(x, x0, n * sizeof *x0);
    assert_int_equal(ps_solve_start(p, &oc, x, &run), 0);
    int found = 0;
    for (int tries = 0; tries < 2000 && !found && snap(run).state != PS_RUN_FINISHED; tries++) {
        assert_int_equal(ps_run_pause(run), 0);
        while (snap(run).state == PS_RUN_RUNNING)
            ;
        s = snap(run);
        if (s.state == PS_RUN_FINISHED)
            break;
        found = s.phase == 3 /* UPDATE */ && s.iteration >= 2;
        if (!found) {
            assert_int_equal(ps_run_resume(run), 0);
            while (snap(run).state == PS_RUN_PAUSED) /* the resume taken before the next pause */
                ;
        }
    }
    assert_true(found);
    assert_int_equal(resume_from_checkpoint(p, &o, run, &r, x), PS_MAX_ITERATIONS);
    printf("3 channels: a CPU checkpoint at iteration %lld (UPDATE) resumed on the GPU: f %.9g after %lld\n",
           (long long)s.iteration, r.f, (long long)r.iterations);
    assert_true(isfinite(r.f) && r.f < r.history[0].f);
    ps_result_free(&r);
    ps_result_free(&ref);
    ps_problem_free(p);
    free(x0), free(xr), free(x);
}

int main(void)
{
    /* quick: the subset run under compute-sanitizer */
    const struct CMUnitTest quick[] = {
        cmocka_unit_test(eval_channels),
        cmocka_unit_test(one_channel_bits),
        cmocka_unit_test(checkpoint_channels),
        cmocka_unit_test(solve_sar),
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(eval_channels),
        cmocka_unit_test(eval_unstaged),
        cmocka_unit_test(channels_64k),
        cmocka_unit_test(one_channel_bits),
        cmocka_unit_test(solve_channels),
        cmocka_unit_test(variants_channels),
        cmocka_unit_test(checkpoint_channels),
        cmocka_unit_test(solve_sar),
        cmocka_unit_test(variants_sar),
    };
    return TU_RUN_GPU_SUITE(quick, tests);
}
