/*
 * One problem's spins split over ranks (README "Several GPUs"), on the
 * one GPU a test machine has: ranks sharing the device
 * (PERSOLVE_GPU_DEVICES=0,0: the exchange through a buffer in its memory)
 * and one rank through the exchange (PERSOLVE_GPU_EXCHANGE=device, and
 * =nccl: a one-rank NCCL communicator with its symmetric window and LSA
 * barrier, when libnccl.so.2 is there). Checks: one rank without the
 * exchange is today's solve bit for bit; through the exchange the same
 * bits with either transport; two and three ranks agree with one GPU to
 * float64 rounding at the start and over the first iterations (single
 * channel, three channels, designed gradient axes with their penalty
 * rounds; the staged kernel class, fixed and designed) and give the same bits run to run; pauses, yields and
 * checkpoint hops end bit-identical to an uninterrupted run of the ranks;
 * a checkpoint of two ranks resumes on one GPU and on the CPU; bad rank
 * lists and counts are refused with PS_ERR_OPTION. Exits 77 without a
 * usable GPU.
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

/* The ranks of the next runs: PERSOLVE_GPU_DEVICES and
 * PERSOLVE_GPU_EXCHANGE (NULL: unset). */
static void ranks_env(const char *devices, const char *exchange)
{
    if (devices)
        setenv("PERSOLVE_GPU_DEVICES", devices, 1);
    else
        unsetenv("PERSOLVE_GPU_DEVICES");
    if (exchange)
        setenv("PERSOLVE_GPU_EXCHANGE", exchange, 1);
    else
        unsetenv("PERSOLVE_GPU_EXCHANGE");
}

/* The log of the last run, kept (a refused NCCL says why). */
static char last_log[512];
static void keep_log(void *user, int level, const char *file, int line, const char *msg)
{
    (void)user;
    printf("log %d %s:%d: %s\n", level, file, line, msg);
    snprintf(last_log, sizeof last_log, "%s", msg);
}

/* A design of p from x0 with the ranks of (devices, exchange): status, r, x. */
static int ranked(const ps_problem *p, const ps_options *o, const double *x0, const char *devices,
                  const char *exchange, double *x, ps_result *r)
{
    ranks_env(devices, exchange);
    last_log[0] = '\0';
    const int st = design(p, o, x0, x, r);
    ranks_env(NULL, NULL);
    return st;
}

static void same_bits(const ps_result *a, const double *xa, const ps_result *b, const double *xb, size_t n)
{
    assert_int_equal(a->status, b->status);
    assert_int_equal(a->history_len, b->history_len);
    for (size_t i = 0; i < a->history_len; i++)
        assert_memory_equal(&a->history[i].f, &b->history[i].f, sizeof(double));
    assert_memory_equal(xa, xb, n * sizeof *xa);
}

/* The problems of these tests: one real channel, three channels, the x
 * and y gradient designed with the penalty rounds of gmax and g_end; then
 * with G_z = 0, one channel fixed and designed (the PS_GPU_STAGED kernel
 * class, each rank's kernel too). */
#define N_CASES 5
static ps_problem *case_problem(int c, size_t ns, double **x0)
{
    ps_problem *p;
    switch (c) {
    case 0:
        return designed_problem(71, ns, 120, 0, PS_LOSS_MLS, 1, 0.0, 0, 1.0, 0, 0, x0);
    case 1:
        return designed_problem(72, ns, 100, 3, PS_LOSS_FULL, 0, 0.0, 0, 1.0, 0, 1, x0);
    case 2:
        return designed_problem(73, ns, 90, 0, PS_LOSS_MLS, 1, 0.0, PS_AXIS_X | PS_AXIS_Y, 0.7, 1, 0, x0);
    case 3:
        p = designed_problem_z(74, ns, 110, 0, PS_LOSS_MLS, 1, 0.0, 0, 1.0, 0, 0, 1, x0);
        assert_int_equal(ps_gpu_kernel_class(p), PS_GPU_STAGED);
        return p;
    default:
        p = designed_problem_z(75, ns, 95, 0, PS_LOSS_MLS, 0, 0.0, PS_AXIS_X | PS_AXIS_Y, 0.7, 1, 0, 1, x0);
        assert_int_equal(ps_gpu_kernel_class(p), PS_GPU_DESIGNED | PS_GPU_STAGED);
        return p;
    }
}

/*
 * One rank: with PERSOLVE_GPU_DEVICES=0 (no exchange) today's solve bit
 * for bit; through the exchange (device buffer, and NCCL when it loads)
 * the same bits with either transport, run to run, and today's f to
 * float64 rounding (the blocks' partials summed in another order).
 */
static void one_rank(void **state)
{
    (void)state;
    double *x0;
    ps_problem *p = case_problem(2, 300, &x0);
    const size_t n = ps_problem_nx(p);
    ps_options o = opts(PS_BACKEND_GPU, PS_PRECISION_DOUBLE);
    o.log = keep_log;
    o.max_iterations = quick() ? 4 : 12;
    double *xa = malloc(n * sizeof *xa), *xb = malloc(n * sizeof *xb), *xc = malloc(n * sizeof *xc);
    ps_result a, b, c;
    const int sa = ranked(p, &o, x0, NULL, NULL, xa, &a);
    assert_true(sa >= 0);
    assert_int_equal(ranked(p, &o, x0, "0", NULL, xb, &b), sa);
    same_bits(&a, xa, &b, xb, n);
    ps_result_free(&b);

    assert_true(ranked(p, &o, x0, "0", "device", xb, &b) >= 0);
    printf("one rank: f0 %.17g without the exchange, %.17g through it\n", a.history[0].f, b.history[0].f);
    assert_true(fabs(b.history[0].f - a.history[0].f) <= 1e-13 * fabs(a.history[0].f));
    assert_int_equal(ranked(p, &o, x0, "0", "device", xc, &c), b.status);
    same_bits(&b, xb, &c, xc, n);
    ps_result_free(&c);

    const int sn = ranked(p, &o, x0, "0", "nccl", xc, &c);
    if (sn == PS_ERR_NO_GPU && (strstr(last_log, "libnccl.so.2") || strstr(last_log, "device communicator"))) {
        /* no NCCL of this build's version here, or one that refuses
         * symmetric memory to a one-rank communicator (2.28.3 does) */
        printf("one rank through NCCL: not run (%s)\n", last_log);
    } else {
        assert_true(sn >= 0);
        printf("one rank through NCCL: status %d, f %.17g\n", sn, c.f);
        same_bits(&b, xb, &c, xc, n); /* the same rows, the same sums */
    }
    ps_result_free(&a);
    ps_result_free(&b);
    ps_result_free(&c);
    free(xa), free(xb), free(xc), free(x0);
    ps_problem_free(p);
}

/*
 * Two and three ranks on the one device against one GPU (float64): f at
 * the start to 1e-12, the first iterations' f to 1e-9 (the trajectory
 * separates later by the sums' last bits), and run to run bit for bit;
 * float32 run to run bit for bit.
 */
static void several_ranks(void **state)
{
    (void)state;
    static const char *const lists[] = {"0,0", "0,0,0"};
    for (int c = 0; c < N_CASES; c++)
        for (int li = 0; li < (quick() ? 1 : 2); li++) {
            double *x0;
            ps_problem *p = case_problem(c, 301 + (size_t)c, &x0); /* not a multiple of the ranks */
            const size_t n = ps_problem_nx(p);
            ps_options o = opts(PS_BACKEND_GPU, PS_PRECISION_DOUBLE);
            o.max_iterations = quick() ? 3 : 8;
            double *x1 = malloc(n * sizeof *x1), *x2 = malloc(n * sizeof *x2), *x3 = malloc(n * sizeof *x3);
            ps_result r1, r2, r3;
            const int s1 = ranked(p, &o, x0, NULL, NULL, x1, &r1);
            const int s2 = ranked(p, &o, x0, lists[li], NULL, x2, &r2);
            assert_true(s1 >= 0 && s2 >= 0 && r1.history_len > 0 && r2.history_len > 0);
            printf("case %d, ranks %s: status %d / %d, f0 %.17g / %.17g, f %.17g / %.17g (%s)\n", c, lists[li], s1,
                   s2, r1.history[0].f, r2.history[0].f, r1.f, r2.f, r2.device);
            assert_non_null(strstr(r2.device, "rank 0 of")); /* the ranks ran, not one GPU */
            assert_true(fabs(r2.history[0].f - r1.history[0].f) <= 1e-12 * fabs(r1.history[0].f));
            for (size_t i = 1; i < r1.history_len && i < r2.history_len && i < 4; i++)
                assert_true(fabs(r2.history[i].f - r1.history[i].f) <= 1e-9 * fabs(r1.history[i].f));
            assert_int_equal(ranked(p, &o, x0, lists[li], NULL, x3, &r3), s2);
            same_bits(&r2, x2, &r3, x3, n);
            ps_result_free(&r3);
            ps_result_free(&r2);
            ps_options o32 = o;
            o32.precision = PS_PRECISION_SINGLE;
            assert_true(ranked(p, &o32, x0, lists[li], NULL, x2, &r2) >= 0);
            assert_int_equal(ranked(p, &o32, x0, lists[li], NULL, x3, &r3), r2.status);
            same_bits(&r2, x2, &r3, x3, n);
            ps_result_free(&r1), ps_result_free(&r2), ps_result_free(&r3);
            free(x1), free(x2), free(x3), free(x0);
            ps_problem_free(p);
        }
}

/*
 * Two ranks steered: pauses, yields and checkpoint hops at random moments
 * end bit-identical to an uninterrupted run of the two ranks (the
 * designed problem, through its penalty rounds); then a checkpoint of the
 * two ranks taken while paused resumes on one GPU and on the CPU to the
 * end.
 */
static void ranks_steered(void **state)
{
    (void)state;
    uint64_t seed = 77;
    double *x0;
    ps_problem *p = case_problem(2, quick() ? 96 : 400, &x0);
    const size_t n = ps_problem_nx(p);
    ps_options o = opts(PS_BACKEND_GPU, PS_PRECISION_SINGLE);
    o.max_iterations = 300;
    o.ftol = 1e-3;
    o.past = 3;
    double *xr = malloc(n * sizeof *xr), *x = malloc(n * sizeof *x);
    ps_result ref;
    const double t0 = now_s();
    const int sref = ranked(p, &o, x0, "0,0", NULL, xr, &ref);
    const double per_eval = (now_s() - t0) / (double)(ref.evaluations > 0 ? ref.evaluations : 1);
    printf("two ranks: reference status %d, %lld iterations, %d rounds\n", sref, (long long)ref.iterations,
           ref.rounds);
    assert_true(sref >= 0);
    setenv("PERSOLVE_GPU_DEVICES", "0,0", 1);
    int stops = 0, hops = 0;
    for (int round = 0; round < (quick() ? 1 : 3); round++) {
        ps_result r;
        assert_int_equal(steered_run(p, &o, x0, n, &seed, per_eval, &stops, &hops, &r, x), sref);
        same_bits(&ref, xr, &r, x, n);
        ps_result_free(&r);
    }
    printf("two ranks: %d stops obeyed (%d checkpoint hops), every run bit-identical\n", stops, hops);
    assert_true(stops >= 1);

    /* paused mid-run, checkpointed, resumed elsewhere */
    for (int where = 0; where < 2; where++) {
        memcpy(x, x0, n * sizeof *x);
        setenv("PERSOLVE_GPU_DEVICES", "0,0", 1);
        ps_run *run = NULL;
        assert_int_equal(ps_solve_start(p, &o, x, &run), 0);
        sleep_us((long)(20e6 * per_eval));
        assert_int_equal(ps_run_pause(run), 0);
        if (wait_for(run, PS_RUN_PAUSED) != PS_RUN_PAUSED) {
            ps_run_free(run);
            continue; /* finished first */
        }
        const ps_snapshot s = snap(run);
        void *buf;
        size_t len;
        assert_int_equal(ps_run_checkpoint(run, &buf, &len), 0);
        ps_run_free(run);
        unsetenv("PERSOLVE_GPU_DEVICES");
        ps_options oe = o;
        oe.backend = where ? PS_BACKEND_CPU : PS_BACKEND_GPU;
        assert_int_equal(ps_solve_resume(p, &oe, buf, len, &run), 0);
        free(buf);
        ps_result r;
        memset(&r, 0, sizeof r);
        const int st = ps_run_wait(run, 120.0, &r, x);
        ps_run_free(run);
        printf("two ranks paused at iteration %lld (f %.9g), resumed on the %s: status %d, %lld iterations, f %.9g\n",
               (long long)s.iteration, s.f, where ? "CPU" : "GPU", st, (long long)r.iterations, r.f);
        assert_true(st >= 0);
        assert_true(r.iterations >= s.iteration);
        ps_result_free(&r);
    }
    unsetenv("PERSOLVE_GPU_DEVICES");
    ps_result_free(&ref);
    free(xr), free(x), free(x0);
    ps_problem_free(p);
}

/*
 * A time limit ends two ranks together: it is decided on rank 0's clock
 * (carried in its row), so no rank stops while another waits at the next
 * exchange (which would hang this test).
 */
static void ranks_time_limit(void **state)
{
    (void)state;
    double *x0;
    ps_problem *p = case_problem(0, 2000, &x0);
    const size_t n = ps_problem_nx(p);
    ps_options o = opts(PS_BACKEND_GPU, PS_PRECISION_SINGLE);
    o.max_iterations = 0;
    o.gtol = 0.0;
    o.ftol = 0.0;
    double *x = malloc(n * sizeof *x);
    for (int i = 0; i < (quick() ? 2 : 20); i++) {
        ps_result r;
        o.time_limit = 0.002 + 0.001 * i;
        const int st = ranked(p, &o, x0, "0,0", NULL, x, &r);
        assert_true(st == PS_TIME_LIMIT || st >= 0);
        if (i == 0)
            printf("two ranks, time limit %.3f s: status %d after %lld iterations\n", o.time_limit, st,
                   (long long)r.iterations);
        ps_result_free(&r);
    }
    free(x), free(x0);
    ps_problem_free(p);
}

/* Rank lists and counts that cannot run: PS_ERR_OPTION, nothing run. */
static void ranks_refused(void **state)
{
    (void)state;
    double *x0;
    ps_problem *p = case_problem(0, 64, &x0);
    const size_t n = ps_problem_nx(p);
    ps_options o = opts(PS_BACKEND_GPU, PS_PRECISION_SINGLE);
    o.max_iterations = 2;
    double *x = malloc(n * sizeof *x);
    ps_result r;
    static const char *const bad[] = {"99", "0,x", "-1", ",", "0,,0", "0 1", "0,", " 0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(ranked(p, &o, x0, bad[i], NULL, x, &r), PS_ERR_OPTION);
        ps_result_free(&r);
    }
    assert_int_equal(ranked(p, &o, x0, "0", "carrier-pigeon", x, &r), PS_ERR_OPTION);
    ps_result_free(&r);
    /* more GPUs than the machine has */
    ps_gpu_options g;
    ps_gpu_options_default(&g);
    g.gpus = PS_GPU_MAX_GPUS;
    o.gpu = &g;
    if (ps_gpu_count() < PS_GPU_MAX_GPUS) {
        assert_int_equal(ranked(p, &o, x0, NULL, NULL, x, &r), PS_ERR_OPTION);
        ps_result_free(&r);
    }
    g.gpus = PS_GPU_MAX_GPUS + 1;
    assert_int_equal(ranked(p, &o, x0, NULL, NULL, x, &r), PS_ERR_OPTION);
    ps_result_free(&r);
    /* a batch runs on one GPU */
    g.gpus = 2;
    ps_batch *b = NULL;
    assert_int_equal(ps_batch_create(&o, &b), PS_ERR_OPTION);
    assert_null(b);
    free(x), free(x0);
    ps_problem_free(p);
    /* more ranks than spins */
    ps_problem *q = case_problem(0, 2, &x0);
    o.gpu = NULL;
    x = malloc(ps_problem_nx(q) * sizeof *x);
    assert_int_equal(ranked(q, &o, x0, "0,0,0", NULL, x, &r), PS_ERR_OPTION);
    ps_result_free(&r);
    free(x), free(x0);
    ps_problem_free(q);
}

int main(void)
{
    /* quick, under compute-sanitizer, which runs one kernel at a time: the
     * ranks sharing the device would wait for each other for ever */
    const struct CMUnitTest quick_tests[] = {
        cmocka_unit_test(one_rank),
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_rank),
        cmocka_unit_test(several_ranks),
        cmocka_unit_test(ranks_steered),
        cmocka_unit_test(ranks_time_limit),
        cmocka_unit_test(ranks_refused),
    };
    return TU_RUN_GPU_SUITE(quick_tests, tests);
}
