/*
 * Batches (ps_batch_*): every problem's result equals, bit for bit, a solo
 * solve forced to its shape (ps_batch_shape), with mixed sizes, channel
 * counts, designed gradients and both precisions, more problems than
 * teams or workers; problems added while the batch runs; pauses, resumes
 * and cancels of single problems at random moments while the others run
 * (no hang, no lost or repeated iteration, every result that was not
 * cancelled bit-identical); a yield of the whole batch and its checkpoint
 * restored into a new batch; the edge cases (no problems, a problem that
 * fails alone, indices out of range, calls in the wrong state, corrupted
 * checkpoints). Every wait is bounded: a hang fails the test instead.
 * Built twice: for the CPU backend (suite unit: workers) and, with
 * PS_TEST_GPU, for the GPU backend (suite gpu: teams of one persistent
 * kernel, and a yielded batch giving the GPU to another solve).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "persolve.h"
#include "persolve_gpu.h"
#include "test_util.h"

#ifdef PS_TEST_GPU
#include "cuda/gpu.h"
#include "gpu_suite.h"
#define TEST_BACKEND PS_BACKEND_GPU
#else
#define TEST_BACKEND PS_BACKEND_CPU
#endif

#define ITERS 40

/* Mixed sizes, channel counts (ptx2d: 8 channels), a designed gradient
 * (of 2100 steps: on the GPU formed by the team, cuda/gradient.cuh, where
 * the storm's shorter one is formed by every block). */
static const char *const specs[] = {
    "slice1d:nz=60,nt=80",
    "ptx2d:n=10,nt=40",
    "slice1d:nz=40,nt=120,b1_max=0.4",
    "spiral2d:n=8,nt=2100,design_g=xy,smax=15000,gmax=4",
    "slice1d:nz=80,nt=60",
    "ptx2d:n=8,nt=30,nc=2",
    "slice1d:nz=30,nt=90",
};
#define NSPEC (sizeof specs / sizeof specs[0])

static char last_log[512];

static void log_sink(void *user, int level, const char *file, int line, const char *msg)
{
    (void)user, (void)level, (void)file, (void)line;
    snprintf(last_log, sizeof last_log, "%s", msg);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000L, 1000L * (us % 1000000L)};
    nanosleep(&ts, NULL);
}

static ps_problem *make_problem(const char *spec)
{
    ps_problem *p = NULL;
    char err[256];
    int st = ps_preset_create(spec, &p, err, sizeof err);
    if (st)
        printf("%s: %s\n", spec, err);
    assert_int_equal(st, 0);
    return p;
}

static ps_options batch_opts(int precision, int workers)
{
    ps_options o;
    ps_options_default(&o);
    o.backend = TEST_BACKEND;
    o.precision = precision;
    o.max_iterations = ITERS;
    o.threads = workers; /* CPU: workers of the batch */
    o.log = log_sink;
    return o;
}

/* The problems of a test. */
typedef struct set {
    ps_problem *p[NSPEC];
    size_t n;
} set;

static void set_make(set *s, size_t n)
{
    s->n = n;
    for (size_t i = 0; i < n; i++)
        s->p[i] = make_problem(specs[i % NSPEC]);
}

static void set_free(set *s)
{
    for (size_t i = 0; i < s->n; i++)
        ps_problem_free(s->p[i]);
}

/*
 * A started batch of the problems spec[0..n) (into s), with options o of
 * `workers` workers, no convergence test and `iters` iterations (or a line
 * search that ends at the noise floor, the same in the batch and solo):
 * long enough that calls made while it runs find its problems running.
 */
static ps_batch *start_long(set *s, const char *const *spec, size_t n, int workers, int iters, ps_options *o)
{
    s->n = n;
    for (size_t i = 0; i < n; i++)
        s->p[i] = make_problem(spec[i]);
    *o = batch_opts(PS_PRECISION_SINGLE, workers);
    o->max_iterations = iters;
    o->gtol = 0.0;
    o->ftol = 0.0;
    ps_batch *b = NULL;
    assert_int_equal(ps_batch_create(o, &b), 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ps_batch_add(b, s->p[i], NULL, NULL), 0);
    assert_int_equal(ps_batch_start(b), 0);
    return b;
}

/* A finished problem's outcome. */
typedef struct outcome {
    int status;
    double *x;
    ps_result r;
} outcome;

static void outcome_free(outcome *u)
{
    free(u->x);
    ps_result_free(&u->r);
    memset(u, 0, sizeof *u);
}

static void batch_outcome(const ps_batch *b, size_t i, const ps_problem *p, outcome *u)
{
    u->x = malloc(ps_problem_nx(p) * sizeof(double));
    tu_poison(u->x, ps_problem_nx(p));
    u->status = ps_batch_result(b, i, &u->r, u->x);
}

/* The solo solve forced to problem i's shape in b. */
static void solo_outcome(const ps_batch *b, size_t i, const ps_problem *p, const ps_options *bo, outcome *u)
{
    ps_gpu_options g;
    int threads = 0;
    assert_int_equal(ps_batch_shape(b, i, &g, &threads), 0);
    ps_options o = *bo;
    o.threads = threads;
    o.gpu = &g;
    u->x = malloc(ps_problem_nx(p) * sizeof(double));
    ps_problem_x0(p, u->x);
    u->status = solve_persistent(p, &o, u->x, &u->r);
}

/* Bit for bit: status, counts, f, every history row's f, x. */
static int same_outcome(const char *what, const outcome *a, const outcome *b, size_t nx)
{
    int ok = a->status == b->status && a->r.iterations == b->r.iterations &&
             a->r.evaluations == b->r.evaluations && !memcmp(&a->r.f, &b->r.f, sizeof a->r.f) &&
             a->r.history_len == b->r.history_len && !memcmp(a->x, b->x, nx * sizeof(double));
    for (size_t k = 0; ok && k < a->r.history_len; k++)
        ok = !memcmp(&a->r.history[k].f, &b->r.history[k].f, sizeof(double)) &&
             a->r.history[k].iteration == (int64_t)k;
    if (!ok)
        printf("%s: status %d/%d, %lld/%lld iterations, %lld/%lld evaluations, f %.17g/%.17g\n", what,
               a->status, b->status, (long long)a->r.iterations, (long long)b->r.iterations,
               (long long)a->r.evaluations, (long long)b->r.evaluations, a->r.f, b->r.f);
    return ok;
}

static int wait_bounded(ps_batch *b)
{
    int st = ps_batch_wait(b, tu_wait_s());
    if (st == PS_RUNNING)
        fail_msg("batch did not finish within %.0f s", tu_wait_s());
    return st;
}

/* Problem i of b (p, named `what`) equals its solo solve at its shape bit
 * for bit; its status and iterations into *status, *iterations (either may
 * be NULL). */
static void expect_solo(const ps_batch *b, size_t i, const ps_problem *p, const ps_options *o, const char *what,
                        int *status, int64_t *iterations)
{
    outcome u, v;
    batch_outcome(b, i, p, &u);
    solo_outcome(b, i, p, o, &v);
    assert_true(same_outcome(what, &u, &v, ps_problem_nx(p)));
    if (status)
        *status = u.status;
    if (iterations)
        *iterations = u.r.iterations;
    outcome_free(&u);
    outcome_free(&v);
}

/* Every problem of the set (made by set_make) against its solo solve; each
 * ended with iterates and without an error. */
static void check_against_solo(const set *s, const ps_batch *b, const ps_options *o)
{
    for (size_t i = 0; i < s->n; i++) {
        char what[128];
        snprintf(what, sizeof what, "problem %zu (%s)", i, specs[i % NSPEC]);
        int status;
        int64_t iterations;
        expect_solo(b, i, s->p[i], o, what, &status, &iterations);
        assert_true(status >= 0);
        assert_true(iterations > 0);
    }
}

/* barrier: the GPU teams' (PS_TEAM_BARRIER_*; the CPU has none) */
static void equals_solo(int precision, int barrier)
{
    set s;
    set_make(&s, NSPEC);
    ps_options o = batch_opts(precision, 2); /* more problems than workers */
#ifdef PS_TEST_GPU
    ps_gpu_options g;
    ps_gpu_options_default(&g);
    g.batch_team_blocks = 4;
    g.batch_team_barrier = barrier;
    o.gpu = &g;
#else
    (void)barrier;
#endif
    ps_batch *b = NULL;
    assert_int_equal(ps_batch_create(&o, &b), 0);
    for (size_t i = 0; i < s.n; i++) {
        size_t idx = 99;
        assert_int_equal(ps_batch_add(b, s.p[i], NULL, &idx), 0);
        assert_int_equal(idx, i);
    }
    assert_int_equal(ps_batch_size(b), s.n);
    const double t = now_s();
    assert_int_equal(ps_batch_start(b), 0);
    assert_int_equal(wait_bounded(b), 0);
    printf("batch of %zu problems (%s): %.3f s\n", s.n, precision ? "float64" : "float32", now_s() - t);
    ps_batch_report rep;
    assert_int_equal(ps_batch_progress(b, &rep), 0);
    assert_int_equal(rep.problems, s.n);
    assert_int_equal(rep.finished, s.n);
    assert_int_equal(rep.failed, 0);
    assert_int_equal(rep.state, PS_BATCH_FINISHED);
#ifdef PS_TEST_GPU
    assert_int_equal(rep.team_barrier, barrier == PS_TEAM_BARRIER_CLUSTER ? PS_TEAM_BARRIER_CLUSTER
                                                                          : PS_TEAM_BARRIER_RANGE);
    /* the report's block is the one every problem ran with: 512 threads,
     * the set has problems of the channels kernels (ptx2d) */
    assert_int_equal(rep.team_blocks, 4);
    assert_int_equal(rep.block, 512);
    for (size_t i = 0; i < s.n; i++) {
        ps_gpu_options shape;
        assert_int_equal(ps_batch_shape(b, i, &shape, NULL), 0);
        assert_int_equal(shape.gpu_block, rep.block);
        assert_int_equal(shape.gpu_grid, 4);
    }
#else
    assert_int_equal(rep.block, 0);
    assert_int_equal(rep.team_blocks, 0);
#endif
    check_against_solo(&s, b, &o);
    ps_batch_free(b);
    set_free(&s);
}

static void test_equals_solo_single(void **state)
{
    (void)state;
    equals_solo(PS_PRECISION_SINGLE, PS_TEAM_BARRIER_RANGE);
}

static void test_equals_solo_double(void **state)
{
    (void)state;
    equals_solo(PS_PRECISION_DOUBLE, PS_TEAM_BARRIER_AUTO);
}

#ifdef PS_TEST_GPU
/* Teams as thread-block clusters: the same bits as the solo solves; a
 * team that cannot be a cluster is a clear error at the start. */
static void test_cluster_teams(void **state)
{
    (void)state;
    equals_solo(PS_PRECISION_SINGLE, PS_TEAM_BARRIER_CLUSTER);
    ps_options o = batch_opts(PS_PRECISION_SINGLE, 2);
    ps_gpu_options g;
    ps_gpu_options_default(&g);
    g.batch_team_blocks = 1;
    g.batch_team_barrier = PS_TEAM_BARRIER_CLUSTER;
    o.gpu = &g;
    ps_batch *b = NULL;
    assert_int_equal(ps_batch_create(&o, &b), 0);
    ps_problem *p = make_problem("inversion");
    assert_int_equal(ps_batch_add(b, p, NULL, NULL), 0);
    assert_int_equal(ps_batch_start(b), PS_ERR_OPTION);
    ps_batch_free(b);
    ps_problem_free(p);
}
#endif

/* Problems added while the batch runs, and more after it has finished. */
static void test_add_while_running(void **state)
{
    (void)state;
    set s;
    set_make(&s, 6);
    ps_options o = batch_opts(PS_PRECISION_SINGLE, 2);
    ps_batch *b = NULL;
    assert_int_equal(ps_batch_create(&o, &b), 0);
    assert_int_equal(ps_batch_add(b, s.p[0], NULL, NULL), 0);
    assert_int_equal(ps_batch_add(b, s.p[1], NULL, NULL), 0);
    assert_int_equal(ps_batch_start(b), 0);
    for (size_t i = 2; i < 5; i++) {
        sleep_us(2000);
        assert_int_equal(ps_batch_add(b, s.p[i], NULL, NULL), 0);
    }
    assert_int_equal(wait_bounded(b), 0);
    /* a finished batch takes more */
    assert_int_equal(ps_batch_add(b, s.p[5], NULL, NULL), 0);
    assert_int_equal(wait_bounded(b), 0);
    check_against_solo(&s, b, &o);
    ps_batch_free(b);
    set_free(&s);
}

/*
 * Problems of one kernel class (the GPU runs the lean kernel of their
 * path), then one of another class added while it runs (it waits for the
 * next launch, of the mixed kernel or its own): all equal their solo solves.
 */
static void test_one_class_then_another(void **state)
{
    (void)state;
    static const char *const one[] = {"slice1d:nz=60,nt=80", "slice1d:nz=40,nt=60", "slice1d:nz=50,nt=70",
                                      "ptx2d:n=10,nt=40"};
    set s;
    s.n = 4;
    for (size_t i = 0; i < s.n; i++)
        s.p[i] = make_problem(one[i]);
    ps_options o = batch_opts(PS_PRECISION_SINGLE, 2);
    o.max_iterations = 200;
    ps_batch *b = NULL;
    assert_int_equal(ps_batch_create(&o, &b), 0);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(ps_batch_add(b, s.p[i], NULL, NULL), 0);
    assert_int_equal(ps_batch_start(b), 0);
    sleep_us(1000);
    assert_int_equal(ps_batch_add(b, s.p[3], NULL, NULL), 0);
    assert_int_equal(wait_bounded(b), 0);
    for (size_t i = 0; i < s.n; i++)
        expect_solo(b, i, s.p[i], &o, one[i], NULL, NULL);
    ps_batch_free(b);
    set_free(&s);
}

/*
 * Pauses, resumes and cancels of single problems at random moments while
 * the others run: every problem that was not cancelled ends bit-identical
 * to its solo solve; a cancelled one ends cancelled (or finished before
 * the cancel reached it) with a prefix of the solo history.
 */
static void test_steering_storm(void **state)
{
    (void)state;
    /* larger than the other tests' problems: the calls find them running */
    static const char *const big[NSPEC] = {
        "slice1d:nz=300,nt=200",
        "ptx2d:n=16,nt=60",
        "slice1d:nz=200,nt=300,b1_max=0.4",
        "spiral2d:n=14,nt=200,design_g=xy,smax=15000,gmax=4",
        "slice1d:nz=250,nt=150",
        "ptx2d:n=12,nt=50,nc=2",
        "slice1d:nz=150,nt=250",
    };
    set s;
    ps_options o;
    ps_batch *b = start_long(&s, big, NSPEC, 3, 400, &o);
    /* PS_TEST_SEED varies the calls' order and moments (a stress loop) */
    uint64_t rng = getenv("PS_TEST_SEED") ? strtoull(getenv("PS_TEST_SEED"), NULL, 10) : 12345;
    int cancelled[NSPEC] = {0};
    int ops = 0;
    const double t_end = now_s() + tu_wait_s();
    for (; ops < 400 && now_s() < t_end; ops++) {
        const size_t i = (size_t)(tu_next(&rng) % s.n);
        const unsigned what = (unsigned)(tu_next(&rng) % 16);
        int st;
        if (what < 7) {
            st = ps_batch_pause(b, i);
            assert_true(st == 0 || st == PS_ERR_STATE);
        } else if (what < 15) {
            st = ps_batch_resume(b, i);
            assert_true(st == 0 || st == PS_ERR_STATE);
        } else if (!cancelled[i] && (i % 3) == 0) {
            assert_int_equal(ps_batch_cancel(b, i), 0);
            cancelled[i] = 1;
        }
        ps_snapshot snap;
        assert_int_equal(ps_batch_snapshot(b, i, &snap), 0);
        ps_batch_report rep;
        assert_int_equal(ps_batch_progress(b, &rep), 0);
        assert_int_equal(rep.queued + rep.running + rep.paused + rep.finished, s.n);
        sleep_us((long)(tu_next(&rng) % 5000));
    }
    ps_batch_report mid;
    assert_int_equal(ps_batch_progress(b, &mid), 0);
    printf("%d steering calls; then %zu finished, %zu running, %zu paused, %zu queued\n", ops, mid.finished,
           mid.running, mid.paused, mid.queued);
    assert_int_equal(ps_batch_resume(b, PS_BATCH_ALL), 0);
    assert_int_equal(wait_bounded(b), 0);
    for (size_t i = 0; i < s.n; i++) {
        outcome u, v;
        batch_outcome(b, i, s.p[i], &u);
        solo_outcome(b, i, s.p[i], &o, &v);
        char what[64];
        snprintf(what, sizeof what, "problem %zu", i);
        if (!cancelled[i] || u.status != PS_CANCELLED) {
            assert_true(same_outcome(what, &u, &v, ps_problem_nx(s.p[i])));
        } else {
            assert_true(u.r.iterations <= v.r.iterations);
            for (size_t k = 0; k < u.r.history_len; k++)
                assert_memory_equal(&u.r.history[k].f, &v.r.history[k].f, sizeof(double));
        }
        outcome_free(&u);
        outcome_free(&v);
    }
    ps_batch_free(b);
    set_free(&s);
}

/*
 * A problem paused while it waits in the queue, before it is set up (on
 * the GPU the start sets up the first teams' problems only, the rest
 * after the launch): it stays parked at iteration 0 while every other
 * problem finishes, and after its resume it ends equal to its solo solve.
 */
static void test_pause_before_setup(void **state)
{
    (void)state;
    enum { COPIES = 48 }; /* more than the heuristic makes teams on an H200 (33 of 8 blocks) */
    ps_problem *p = make_problem("slice1d:nz=256,nt=60");
    ps_options o = batch_opts(PS_PRECISION_SINGLE, 2);
    o.max_iterations = 60;
#ifdef PS_TEST_GPU
    ps_gpu_options g; /* the heuristic's teams, not a cached size */
    ps_gpu_options_default(&g);
    g.tune_cache = 0;
    o.gpu = &g;
#endif
    ps_batch *b = NULL;
    assert_int_equal(ps_batch_create(&o, &b), 0);
    for (int i = 0; i < COPIES; i++)
        assert_int_equal(ps_batch_add(b, p, NULL, NULL), 0);
    assert_int_equal(ps_batch_start(b), 0);
    const size_t last = COPIES - 1;
    assert_int_equal(ps_batch_pause(b, last), 0);
    ps_batch_report rep;
    assert_int_equal(ps_batch_progress(b, &rep), 0);
    if ((size_t)rep.teams >= COPIES) /* every problem set up at the start: not this test's path */
        printf("note: %d teams for %d problems; none set up after the launch\n", rep.teams, COPIES);
    const double t_end = now_s() + tu_wait_s();
    do {
        sleep_us(1000);
        assert_int_equal(ps_batch_progress(b, &rep), 0);
    } while (rep.finished < COPIES - 1 && !rep.failed && now_s() < t_end);
    assert_int_equal(rep.failed, 0);
    assert_int_equal(rep.finished, COPIES - 1);
    assert_int_equal(rep.paused, 1);
    ps_snapshot snap;
    assert_int_equal(ps_batch_snapshot(b, last, &snap), 0);
    assert_int_equal(snap.iteration, 0);
    assert_int_equal(ps_batch_resume(b, last), 0);
    assert_int_equal(wait_bounded(b), 0);
    expect_solo(b, last, p, &o, "the problem paused before its set-up", NULL, NULL);
    expect_solo(b, 0, p, &o, "the first problem", NULL, NULL);
    ps_batch_free(b);
    ps_problem_free(p);
}

/*
 * A yield of the whole batch mid-way (on the GPU another solve runs
 * meanwhile), its checkpoint restored into a new batch over the same
 * problems, one problem paused across it: every result equals the solo
 * solve's.
 */
static void test_yield_checkpoint(void **state)
{
    (void)state;
    set s;
    set_make(&s, 5);
    ps_options o = batch_opts(PS_PRECISION_SINGLE, 2);
    o.max_iterations = 80;
    ps_batch *b = NULL;
    assert_int_equal(ps_batch_create(&o, &b), 0);
    for (size_t i = 0; i < s.n; i++)
        assert_int_equal(ps_batch_add(b, s.p[i], NULL, NULL), 0);
    assert_int_equal(ps_batch_pause(b, 1), 0); /* parked before it starts */
    assert_int_equal(ps_batch_start(b), 0);
    sleep_us(3000);
    assert_int_equal(ps_batch_yield(b), 0);
    ps_batch_report rep;
    assert_int_equal(ps_batch_progress(b, &rep), 0);
    assert_int_equal(rep.state, PS_BATCH_YIELDED);
    assert_int_equal(rep.running, 0);
    printf("yielded: %zu finished, %zu paused, %zu queued, %lld iterations\n", rep.finished, rep.paused,
           rep.queued, (long long)rep.iterations);
    {
        /* the device (the cores) are free: another solve completes */
        ps_problem *q = make_problem("slice1d:nz=20,nt=40");
        ps_options oq = batch_opts(PS_PRECISION_SINGLE, 0);
        oq.max_iterations = 10;
        double *xq = malloc(ps_problem_nx(q) * sizeof(double));
        ps_problem_x0(q, xq);
        ps_result rq;
        assert_true(solve_persistent(q, &oq, xq, &rq) >= 0);
        ps_result_free(&rq);
        free(xq);
        ps_problem_free(q);
    }
    void *blob = NULL;
    size_t len = 0;
    int cst = ps_batch_checkpoint(b, &blob, &len);
    if (cst)
        printf("checkpoint: %s (%s)\n", ps_strerror(cst), last_log);
    assert_int_equal(cst, 0);
    assert_true(len > 0);
    /* corrupted, truncated, and of another set of problems: refused */
    {
        ps_batch *c = NULL;
        unsigned char *bad = malloc(len);
        memcpy(bad, blob, len);
        bad[len / 2] ^= 1;
        assert_int_equal(ps_batch_restore(&o, (const ps_problem *const *)s.p, s.n, bad, len, &c),
                         PS_ERR_CHECKPOINT);
        assert_null(c);
        assert_int_equal(ps_batch_restore(&o, (const ps_problem *const *)s.p, s.n, blob, len - 9, &c),
                         PS_ERR_CHECKPOINT);
        assert_int_equal(ps_batch_restore(&o, (const ps_problem *const *)s.p, s.n - 1, blob, len, &c),
                         PS_ERR_CHECKPOINT);
        const ps_problem *swapped[5] = {s.p[1], s.p[0], s.p[2], s.p[3], s.p[4]};
        assert_int_equal(ps_batch_restore(&o, swapped, s.n, blob, len, &c), PS_ERR_CHECKPOINT);
        free(bad);
    }
    /* the original may go on too: resume and finish it */
    assert_int_equal(ps_batch_resume(b, PS_BATCH_ALL), 0);
    assert_int_equal(wait_bounded(b), 0);
    check_against_solo(&s, b, &o);

    ps_batch *c = NULL;
    assert_int_equal(ps_batch_restore(&o, (const ps_problem *const *)s.p, s.n, blob, len, &c), 0);
    free(blob);
    assert_int_equal(ps_batch_start(c), 0);
    /* problem 1 was paused: it stays so until resumed */
    assert_int_equal(ps_batch_wait(c, 0.5), PS_RUNNING);
    ps_snapshot snap;
    assert_int_equal(ps_batch_snapshot(c, 1, &snap), 0);
    assert_int_equal(snap.state, PS_RUN_PAUSED);
    assert_int_equal(ps_batch_resume(c, 1), 0);
    assert_int_equal(wait_bounded(c), 0);
    check_against_solo(&s, c, &o);
    ps_batch_free(c);
    ps_batch_free(b);
    set_free(&s);
}

/*
 * Yields of the whole batch again and again (each with a checkpoint taken
 * while yielded, and a pause or a resume of one problem between), then
 * the end: every result equals its solo solve.
 */
static void test_yield_storm(void **state)
{
    (void)state;
    static const char *const big[4] = {"slice1d:nz=300,nt=200", "ptx2d:n=14,nt=50", "slice1d:nz=200,nt=250",
                                       "spiral2d:n=12,nt=150,design_g=xy,smax=15000,gmax=4"};
    set s;
    ps_options o;
    ps_batch *b = start_long(&s, big, 4, 2, 300, &o);
    uint64_t rng = 777;
    int yields = 0;
    const double t_end = now_s() + tu_wait_s();
    while (ps_batch_wait(b, 0.0) == PS_RUNNING && yields < 30 && now_s() < t_end) {
        sleep_us(1000 + (long)(tu_next(&rng) % 4000));
        assert_int_equal(ps_batch_yield(b), 0);
        ps_batch_report rep;
        assert_int_equal(ps_batch_progress(b, &rep), 0);
        assert_true(rep.state == PS_BATCH_YIELDED || rep.state == PS_BATCH_FINISHED);
        assert_int_equal(rep.running, 0);
        void *blob = NULL;
        size_t len = 0;
        assert_int_equal(ps_batch_checkpoint(b, &blob, &len), 0);
        free(blob);
        const size_t i = (size_t)(tu_next(&rng) % s.n);
        if (tu_next(&rng) & 1)
            ps_batch_pause(b, i);
        else
            ps_batch_resume(b, i);
        assert_int_equal(ps_batch_resume(b, PS_BATCH_ALL), 0);
        yields++;
    }
    printf("%d yields\n", yields);
    assert_int_equal(ps_batch_resume(b, PS_BATCH_ALL), 0);
    assert_int_equal(wait_bounded(b), 0);
    for (size_t i = 0; i < s.n; i++)
        expect_solo(b, i, s.p[i], &o, big[i], NULL, NULL);
    ps_batch_free(b);
    set_free(&s);
}

/* No problems, a problem failing alone, wrong indices and states. */
static void test_edges(void **state)
{
    (void)state;
    ps_options o = batch_opts(PS_PRECISION_SINGLE, 2);
    ps_batch *b = NULL;
    ps_batch_report rep;
    /* zero problems */
    assert_int_equal(ps_batch_create(&o, &b), 0);
    assert_int_equal(ps_batch_wait(b, 0.0), 0); /* nothing to wait for */
    assert_int_equal(ps_batch_start(b), 0);
    assert_int_equal(ps_batch_start(b), PS_ERR_STATE);
    assert_int_equal(wait_bounded(b), 0);
    assert_int_equal(ps_batch_progress(b, &rep), 0);
    assert_int_equal(rep.problems, 0);
    assert_int_equal(ps_batch_result(b, 0, NULL, NULL), PS_ERR_SIZE);
    assert_int_equal(ps_batch_pause(b, 3), PS_ERR_SIZE);
    ps_batch_free(b);

    /* NULLs and bad options */
    assert_int_equal(ps_batch_create(&o, NULL), PS_ERR_NULL);
    ps_options bad = o;
    bad.memory = 0;
    assert_int_equal(ps_batch_create(&bad, &b), PS_ERR_OPTION);
    assert_null(b);
    assert_int_equal(ps_batch_add(NULL, NULL, NULL, NULL), PS_ERR_NULL);
    assert_int_equal(ps_batch_wait(NULL, 1.0), PS_ERR_NULL);
    ps_batch_free(NULL);

    /* a start pulse with a NaN fails alone; the others finish */
    set s;
    set_make(&s, 3);
    assert_int_equal(ps_batch_create(&o, &b), 0);
    assert_int_equal(ps_batch_wait(b, NAN), PS_ERR_NONFINITE);
    assert_int_equal(ps_batch_add(b, s.p[0], NULL, NULL), 0);
    double *x = malloc(ps_problem_nx(s.p[1]) * sizeof(double));
    ps_problem_x0(s.p[1], x);
    x[3] = NAN;
    size_t idx = 0;
    assert_int_equal(ps_batch_add(b, s.p[1], x, &idx), PS_ERR_NONFINITE);
    assert_int_equal(idx, 1);
    free(x);
    assert_int_equal(ps_batch_add(b, s.p[2], NULL, NULL), 0);
    assert_int_equal(ps_batch_wait(b, 1.0), PS_ERR_STATE); /* not started */
    assert_int_equal(ps_batch_start(b), 0);
    void *blob = NULL;
    size_t len = 0;
    assert_int_equal(ps_batch_wait(b, tu_wait_s()), 0);
    assert_int_equal(ps_batch_result(b, 1, NULL, NULL), PS_ERR_NONFINITE);
    assert_true(ps_batch_result(b, 0, NULL, NULL) >= 0);
    assert_true(ps_batch_result(b, 2, NULL, NULL) >= 0);
    assert_int_equal(ps_batch_progress(b, &rep), 0);
    assert_int_equal(rep.failed, 1);
    assert_int_equal(rep.finished, 3);
    assert_int_equal(ps_batch_pause(b, 0), PS_ERR_STATE);  /* finished */
    assert_int_equal(ps_batch_resume(b, 0), PS_ERR_STATE); /* not paused */
    assert_int_equal(ps_batch_cancel(b, 0), 0);            /* nothing to do */
    assert_int_equal(ps_batch_checkpoint(b, &blob, &len), 0); /* a finished batch */
    free(blob);
    ps_batch_free(b);

    /* a running batch's checkpoint is refused; free cancels what runs */
    o.max_iterations = 100000;
    o.gtol = 0;
    o.ftol = 0;
    assert_int_equal(ps_batch_create(&o, &b), 0);
    for (size_t i = 0; i < s.n; i++)
        assert_int_equal(ps_batch_add(b, s.p[i], NULL, NULL), 0);
    assert_int_equal(ps_batch_start(b), 0);
    sleep_us(5000);
    assert_int_equal(ps_batch_checkpoint(b, &blob, &len), PS_ERR_STATE);
    assert_null(blob);
    const double t = now_s();
    ps_batch_free(b);
    assert_true(now_s() - t < TU_WAIT_S); /* a fixed bound: free must not hang */
    set_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equals_solo_single),
        cmocka_unit_test(test_equals_solo_double),
#ifdef PS_TEST_GPU
        cmocka_unit_test(test_cluster_teams),
#endif
        cmocka_unit_test(test_add_while_running),
        cmocka_unit_test(test_one_class_then_another),
        cmocka_unit_test(test_steering_storm),
        cmocka_unit_test(test_pause_before_setup),
        cmocka_unit_test(test_yield_checkpoint),
        cmocka_unit_test(test_yield_storm),
        cmocka_unit_test(test_edges),
    };
#ifdef PS_TEST_GPU
    const struct CMUnitTest quick[] = {
        cmocka_unit_test(test_equals_solo_single),
#ifdef PS_TEST_GPU
        cmocka_unit_test(test_cluster_teams),
#endif
        cmocka_unit_test(test_yield_checkpoint),
        cmocka_unit_test(test_edges),
    };
    /* not in the quick subset: test_add_while_running and
     * test_pause_before_setup, whose problems are set up after the kernel's
     * launch (memcheck knows only the allocations made before a launch, and
     * reports the kernel's accesses to later ones as out of bounds; README
     * "Running the GPU tests") */
    return tu_run_gpu_suite(quick, sizeof quick / sizeof quick[0], tests, sizeof tests / sizeof tests[0]);
#else
    return cmocka_run_group_tests(tests, NULL, NULL);
#endif
}
