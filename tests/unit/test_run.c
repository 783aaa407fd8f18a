/*
 * Asynchronous runs: pause, resume, yield and cancel at random moments
 * against an uninterrupted reference (bit-identical ends, no lost or
 * repeated iteration), a reader thread hammering the snapshot, checkpoints
 * (round trips, and corrupted, truncated, foreign and wrong-version blobs
 * refused), and every call in a wrong state or with NULL. Every wait is
 * bounded: a hang fails the test instead.
 * Built twice: for the CPU backend (suite unit) and, with PS_TEST_GPU, for
 * the GPU backend (suite gpu: the persistent kernel's control points, a
 * yielded run giving the GPU to other work, checkpoints moving between the
 * backends).
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "common/hash.h"
#include "opt/checkpoint.h"
#include "persolve.h"
#include "test_util.h"

#ifdef PS_TEST_GPU
#include "cuda/gpu.h"
#include "gpu_suite.h"
#define TEST_BACKEND PS_BACKEND_GPU
#else
#define TEST_BACKEND PS_BACKEND_CPU
#endif

#define SPEC "slice1d:nz=60,nt=80"
#define SPEC_B1MAX "slice1d:nz=60,nt=80,b1_max=0.4"
#define SPEC_SAR "ptx2d:n=12,nt=40,sar=1"
/* The references stop at this limit, short of the float32 noise floor of
 * SPEC (reached near iteration 105), where the way a solve ends (the
 * decrease test, or a line search that fails after a trial below the noise
 * allowance) turns on the last bits of the trajectory. */
#define ITERS 100
#define WAIT_S 20.0 /* bound of every wait for a state or an end */

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

/* The last log message (for the refusal reasons). */
static char last_log[512];

static void log_sink(void *user, int level, const char *file, int line,
                     const char *msg)
{
    snprintf(last_log, sizeof last_log, "%s", msg);
}

static ps_problem *make_problem(const char *spec)
{
    ps_problem *p = NULL;
    char err[256];
    assert_int_equal(ps_preset_create(spec, &p, err, sizeof err), 0);
    return p;
}

static ps_options run_opts(void)
{
    ps_options o;
    ps_options_default(&o);
    o.backend = TEST_BACKEND;
    o.max_iterations = ITERS;
    o.log = log_sink;
    return o;
}

/* An uninterrupted solve: the reference every interrupted run must match. */
typedef struct reference {
    ps_problem *p;
    ps_options o;
    double *x;
    ps_result r;
} reference;

static void reference_make_with(reference *ref, const char *spec, const ps_options *o)
{
    ref->p = make_problem(spec);
    ref->o = *o;
    size_t n = ps_problem_nx(ref->p);
    ref->x = malloc(n * sizeof(double));
    ps_problem_x0(ref->p, ref->x);
    double t = now_s();
    int st = solve_persistent(ref->p, &ref->o, ref->x, &ref->r);
    printf("reference %s: status %d, %lld iterations, %lld evaluations, %.3f s\n",
           spec, st, (long long)ref->r.iterations, (long long)ref->r.evaluations,
           now_s() - t);
    assert_true(st >= 0);
    assert_true(ref->r.iterations > 20);
}

static void reference_make(reference *ref, const char *spec)
{
    const ps_options o = run_opts();
    reference_make_with(ref, spec, &o);
}

static void reference_free(reference *ref)
{
    ps_result_free(&ref->r);
    free(ref->x);
    ps_problem_free(ref->p);
}

/* History rows equal (bitwise f, gnorm, step; counters) in rows [0, len). */
static int history_prefix_equal(const ps_result *a, const ps_result *b,
                                size_t len)
{
    if (a->history_len < len || b->history_len < len)
        return 0;
    for (size_t i = 0; i < len; i++) {
        const ps_progress *u = &a->history[i], *v = &b->history[i];
        if (u->iteration != (int64_t)i || v->iteration != (int64_t)i ||
            memcmp(&u->f, &v->f, sizeof u->f) ||
            memcmp(&u->gnorm, &v->gnorm, sizeof u->gnorm) ||
            memcmp(&u->step, &v->step, sizeof u->step) ||
            u->evaluations != v->evaluations) {
            printf("history row %zu differs: f %.17g vs %.17g\n", i, u->f, v->f);
            return 0;
        }
    }
    return 1;
}

/*
 * The solve's seconds in the history never go back, also across pauses,
 * yields and checkpoints (a resumed run's clock continues from the seconds
 * the checkpoint stored: those of the pause or of the launch's end).
 */
static void assert_seconds_monotonic(const ps_result *r)
{
    for (size_t i = 1; i < r->history_len; i++)
        if (!(r->history[i].seconds >= r->history[i - 1].seconds))
            fail_msg("history seconds go back at row %zu: %.9g after %.9g", i,
                     r->history[i].seconds, r->history[i - 1].seconds);
}

/* The run ended exactly as the reference did. */
static void assert_same_end(const reference *ref, const ps_result *r,
                            const double *x)
{
    assert_seconds_monotonic(r);
    size_t n = ps_problem_nx(ref->p);
    assert_int_equal(r->status, ref->r.status);
    assert_int_equal(r->iterations, ref->r.iterations);
    assert_int_equal(r->evaluations, ref->r.evaluations);
    assert_int_equal(r->history_len, ref->r.history_len);
    assert_memory_equal(&r->f, &ref->r.f, sizeof r->f);
    assert_memory_equal(x, ref->x, n * sizeof *x);
    assert_true(history_prefix_equal(r, &ref->r, r->history_len));
}

/*
 * Poll the snapshot until the run is in `want` or FINISHED; fails the test
 * after WAIT_S. Returns the state reached.
 */
static int wait_state(const ps_run *run, int want)
{
    double t0 = now_s();
    ps_snapshot s;
    for (;;) {
        assert_int_equal(ps_run_snapshot(run, &s), 0);
        if (s.state == want || s.state == PS_RUN_FINISHED)
            return s.state;
        if (now_s() - t0 > WAIT_S)
            fail_msg("run did not reach state %d within %g s (state %d)", want,
                     WAIT_S, s.state);
        sleep_us(10);
    }
}

/*
 * A PAUSED run becomes idle (a GPU kernel may acknowledge a pause while an
 * evaluation is in flight: idle once it stops at its control point), and
 * its progress does not move in between. Bounded.
 */
static void wait_idle(const ps_run *run)
{
    double t0 = now_s();
    ps_snapshot ack, s;
    assert_int_equal(ps_run_snapshot(run, &ack), 0);
    assert_int_equal(ack.state, PS_RUN_PAUSED);
    for (;;) {
        assert_int_equal(ps_run_snapshot(run, &s), 0);
        assert_int_equal(s.state, PS_RUN_PAUSED);
        assert_int_equal(s.iteration, ack.iteration);
        assert_int_equal(s.evaluations, ack.evaluations);
        assert_int_equal(s.phase, ack.phase);
        assert_memory_equal(&s.f, &ack.f, sizeof s.f);
        assert_memory_equal(&s.gnorm, &ack.gnorm, sizeof s.gnorm);
        assert_memory_equal(&s.step, &ack.step, sizeof s.step);
        if (s.idle)
            return;
        if (now_s() - t0 > WAIT_S)
            fail_msg("paused run not idle within %g s", WAIT_S);
        sleep_us(1);
    }
}

/* Final wait, bounded. */
static int finish(ps_run *run, ps_result *r, double *x)
{
    int st = ps_run_wait(run, WAIT_S, r, x);
    if (st == PS_RUNNING)
        fail_msg("run did not finish within %g s", WAIT_S);
    return st;
}

/* A checkpoint resumed with the reference's options ends as the reference
 * (x: [n] scratch, poisoned first). */
static void assert_resumes_to_end(const reference *ref, const void *buf, size_t len, double *x, size_t n)
{
    ps_run *run;
    assert_int_equal(ps_solve_resume(ref->p, &ref->o, buf, len, &run), 0);
    ps_result r;
    tu_poison(x, n);
    finish(run, &r, x);
    assert_same_end(ref, &r, x);
    ps_result_free(&r);
    ps_run_free(run);
}

/* ---- pause, resume, yield, cancel at random moments ---- */

typedef struct counts {
    int pauses, yields, withdrawn, checkpoints, waits, rounds;
} counts;

/* Pause -> checkpoint -> free -> resume from the blob; the new handle. */
static ps_run *checkpoint_hop(const reference *ref, ps_run *run, counts *c)
{
    void *buf;
    size_t len;
    assert_int_equal(ps_run_checkpoint(run, &buf, &len), 0);
    ps_run_free(run);
    ps_run *next = NULL;
    assert_int_equal(ps_solve_resume(ref->p, &ref->o, buf, len, &next), 0);
    assert_non_null(next);
    free(buf);
    c->checkpoints++;
    return next;
}

static void storm_round(const reference *ref, uint64_t *seed, counts *c,
                        long max_sleep_us)
{
    size_t n = ps_problem_nx(ref->p);
    double *x = malloc(n * sizeof *x);
    ps_problem_x0(ref->p, x);
    ps_run *run = NULL;
    assert_int_equal(ps_solve_start(ref->p, &ref->o, x, &run), 0);
    tu_poison(x, n);
    double t0 = now_s();
    while (ps_run_wait(run, 0.0, NULL, NULL) == PS_RUNNING) {
        if (now_s() - t0 > 10 * WAIT_S)
            fail_msg("round did not end");
        sleep_us((long)(tu_next(seed) % (uint64_t)(max_sleep_us + 1)));
        int st;
        switch (tu_next(seed) % 6) {
        case 0: /* pause, then resume */
        case 1:
            st = ps_run_pause(run);
            if (st == PS_ERR_STATE)
                break;
            assert_int_equal(st, 0);
            if (wait_state(run, PS_RUN_PAUSED) == PS_RUN_PAUSED) {
                c->pauses++;
                assert_int_equal(ps_run_wait(run, 0.0, NULL, NULL), PS_RUNNING);
                if (tu_next(seed) % 4 == 0) {
                    run = checkpoint_hop(ref, run, c);
                    break;
                }
                assert_int_equal(ps_run_resume(run), 0);
            }
            break;
        case 2: /* yield, then resume with a new worker */
            st = ps_run_yield(run);
            if (st == PS_ERR_STATE)
                break;
            assert_int_equal(st, 0);
            if (wait_state(run, PS_RUN_YIELDED) == PS_RUN_YIELDED) {
                c->yields++;
                if (tu_next(seed) % 4 == 0) {
                    run = checkpoint_hop(ref, run, c);
                    break;
                }
                assert_int_equal(ps_run_resume(run), 0);
            }
            break;
        case 3: /* a request withdrawn at once (or obeyed, then resumed) */
            st = tu_next(seed) % 2 ? ps_run_pause(run) : ps_run_yield(run);
            if (st == PS_ERR_STATE)
                break;
            st = ps_run_resume(run);
            assert_true(st == 0 || st == PS_ERR_STATE);
            if (st == 0)
                c->withdrawn++;
            break;
        case 4: /* pause while paused, yield while paused */
            if (ps_run_pause(run) == PS_ERR_STATE)
                break;
            if (wait_state(run, PS_RUN_PAUSED) != PS_RUN_PAUSED)
                break;
            assert_int_equal(ps_run_pause(run), 0);
            assert_int_equal(ps_run_yield(run), 0);
            if (wait_state(run, PS_RUN_YIELDED) == PS_RUN_YIELDED) {
                c->yields++;
                assert_int_equal(ps_run_resume(run), 0);
            }
            break;
        default: /* a short bounded wait */
            st = ps_run_wait(run, 1e-4, NULL, NULL);
            assert_true(st == PS_RUNNING || st == ref->r.status);
            c->waits++;
            break;
        }
    }
    ps_result r;
    finish(run, &r, x);
    assert_same_end(ref, &r, x);
    ps_result_free(&r);
    ps_run_free(run);
    free(x);
    c->rounds++;
}

static void control_storm_opts(const char *spec, const ps_options *o, int rounds, int cycles)
{
    reference ref;
    reference_make_with(&ref, spec, o);
    double per_eval = ref.r.seconds / (double)ref.r.evaluations;
    long max_sleep = (long)(3e6 * per_eval) + 1;
    uint64_t seed = 2024;
    counts c = {0};
    /* at least `rounds` rounds, and on until `cycles` stops were obeyed */
    while (c.rounds < rounds || (c.pauses + c.yields < cycles && c.rounds < 100))
        storm_round(&ref, &seed, &c, max_sleep);
    printf("%s: %d rounds bit-identical: %d pause/resume, %d yield/resume, "
           "%d withdrawn requests, %d checkpoint hops, %d timed waits\n",
           spec, c.rounds, c.pauses, c.yields, c.withdrawn, c.checkpoints,
           c.waits);
    assert_true(c.pauses + c.yields >= cycles);
    reference_free(&ref);
}

static void control_storm_spec(const char *spec, int rounds, int cycles)
{
    const ps_options o = run_opts();
    control_storm_opts(spec, &o, rounds, cycles);
}

static void control_storm(void **state)
{
    control_storm_spec(SPEC, 6, 300);
}

static void control_storm_b1max(void **state)
{
    control_storm_spec(SPEC_B1MAX, 2, 60);
}

/*
 * A design with the local-SAR penalty (ptx2d with sar=1: 8 channels, 4
 * VOPs, the start point violating): its penalty rounds, each a new START
 * inside the same run, end bit-identical across pauses, yields and
 * checkpoint hops in any round. The rounds are short (a loose decrease
 * test) so that the reference goes through several of them.
 */
/* Options of the SAR designs: short rounds (a loose decrease test) from
 * a light first weight (1e-3 of the loss's scale), so that several run. */
static ps_options sar_opts(void)
{
    ps_options o = run_opts();
    o.max_iterations = 400;
    o.ftol = 1e-3;
    o.past = 3;
    o.penalty_mu = 1e-3;
    return o;
}

static void control_storm_sar(void **state)
{
    ps_options o = sar_opts();
    reference ref;
    reference_make_with(&ref, SPEC_SAR, &o);
    const ps_progress *last = &ref.r.history[ref.r.history_len - 1];
    printf("%s: %d rounds (%d in the history), mu %g, violation %.3e, status %d\n", SPEC_SAR, ref.r.rounds,
           last->round + 1, ref.r.mu, ref.r.violation, ref.r.status);
    assert_true(ref.r.rounds >= 3);
    reference_free(&ref);
    control_storm_opts(SPEC_SAR, &o, 2, 40);
}

/* The run that a progress callback pauses (pause_from; the GPU build,
 * whose runs are steered from the host, sets no callback). */
typedef struct pauser {
    ps_run *_Atomic run;
    _Atomic int64_t from; /* evaluations of the first row that pauses */
} pauser;

#ifndef PS_TEST_GPU
/*
 * A run that its progress callback pauses once it has reached a target
 * (CPU build; the GPU build steers from the host). The callback runs on
 * the run's worker after each iteration; from the first row at the
 * target's evaluations on it asks for a pause, which the worker takes at
 * its next control point (phase 1, before the next direction): the solve
 * waits there for the test, however loaded the machine is. The handle is
 * known only once ps_solve_start (or ps_solve_resume) has returned: a
 * callback that is to pause waits for it (bounded: it cancels the run if
 * it never comes), so that a row reached before the test stored it pauses
 * too.
 */
static int pause_from(void *user, const ps_progress *row)
{
    pauser *pz = user;
    if (row->evaluations < atomic_load(&pz->from))
        return 0;
    double t0 = now_s();
    ps_run *run;
    while (!(run = atomic_load(&pz->run))) {
        if (now_s() - t0 > WAIT_S)
            return 1;
        sleep_us(10);
    }
    ps_run_pause(run);
    return 0;
}

/* The options of a run that pause_from pauses (pz->run set after the start). */
static ps_options pausing_opts(const ps_options *o, pauser *pz, int64_t from)
{
    ps_options op = *o;
    atomic_store(&pz->run, NULL);
    atomic_store(&pz->from, from);
    op.progress = pause_from;
    op.progress_user = pz;
    return op;
}
#endif

/*
 * A run paused after every iteration (CPU: by its progress callback; GPU:
 * by the host as fast as it can, at the control point after an
 * evaluation), and at the START of a new penalty round (phase START after
 * the first iteration) checkpointed, freed and resumed from the blob: it
 * ends bit-identical to the uninterrupted run. On the CPU every round's
 * start is caught.
 */
static void checkpoint_round_start(void **state)
{
    ps_options o = sar_opts();
    reference ref;
    reference_make_with(&ref, SPEC_SAR, &o);
    size_t n = ps_problem_nx(ref.p);
    double *x = malloc(n * sizeof *x);
    ps_problem_x0(ref.p, x);
    pauser pz;
#ifndef PS_TEST_GPU
    const ps_options op = pausing_opts(&ref.o, &pz, 0); /* every row */
#else
    const ps_options op = ref.o;
#endif
    ps_run *run;
    assert_int_equal(ps_solve_start(ref.p, &op, x, &run), 0);
    atomic_store(&pz.run, run);
    int stops = 0, hops = 0;
    int64_t hop_iter = 0;
    for (;;) {
        if (ps_run_pause(run) == PS_ERR_STATE || wait_state(run, PS_RUN_PAUSED) != PS_RUN_PAUSED)
            break;
        stops++;
        ps_snapshot s;
        assert_int_equal(ps_run_snapshot(run, &s), 0);
        if (s.phase == 0 && s.iteration > hop_iter) { /* a new round's START, once */
            hop_iter = s.iteration;
            void *buf;
            size_t len;
            assert_int_equal(ps_run_checkpoint(run, &buf, &len), 0);
            atomic_store(&pz.run, NULL);
            ps_run_free(run);
            assert_int_equal(ps_solve_resume(ref.p, &op, buf, len, &run), 0);
            atomic_store(&pz.run, run);
            free(buf);
            hops++;
            continue;
        }
        /* the resume taken before the next pause: the run went on (its
         * callback may pause it again at once) */
        const uint64_t beat = s.heartbeat;
        assert_int_equal(ps_run_resume(run), 0);
        while (ps_run_snapshot(run, &s) == 0 && s.state == PS_RUN_PAUSED && s.heartbeat == beat)
            ;
    }
    ps_result r;
    tu_poison(x, n);
    finish(run, &r, x);
    assert_same_end(&ref, &r, x);
    printf("%s: %d rounds; paused at %d control points, %d checkpoint hops at a round's start, "
           "bit-identical end\n", SPEC_SAR, ref.r.rounds, stops, hops);
    assert_true(ref.r.rounds >= 3);
#ifndef PS_TEST_GPU
    assert_int_equal(hops, ref.r.rounds - 1);
#endif
    ps_result_free(&r);
    ps_run_free(run);
    free(x);
    reference_free(&ref);
}

/*
 * Cancel at random moments (also while paused or yielded). CPU build: the
 * request may come late on a loaded machine, and the solve would end
 * first; so each run's progress callback pauses it after its next-to-last
 * iteration (pause_from), where it waits for the request: every run is
 * cancelled mid-solve whatever the load, and a request on time lands
 * wherever the running solve is, as before.
 */
static void cancel_random(void **state)
{
    reference ref;
    reference_make(&ref, SPEC);
    size_t n = ps_problem_nx(ref.p);
    double *x = malloc(n * sizeof *x);
    uint64_t seed = 7;
    int cancelled = 0, resumed = 0, resumed_start = 0;
#ifndef PS_TEST_GPU
    pauser pz;
    const int64_t held = ref.r.history[ref.r.history_len - 2].evaluations;
    int late = 0; /* requests that found the run held there */
#endif
    for (int i = 0; i < 40; i++) {
        ps_problem_x0(ref.p, x);
        ps_run *run;
#ifndef PS_TEST_GPU
        const ps_options o = pausing_opts(&ref.o, &pz, held);
        assert_int_equal(ps_solve_start(ref.p, &o, x, &run), 0);
        atomic_store(&pz.run, run);
#else
        assert_int_equal(ps_solve_start(ref.p, &ref.o, x, &run), 0);
#endif
        /* at a random point of the first half of the solve (not a random
         * time: the count of runs cancelled mid-solve must not depend on
         * the machine's load; the half after it leaves room for the
         * request to land on a busy 2-core machine, where the solve's
         * threads share the cores with other tests); the first at once */
        int64_t target = 0;
        if (i > 0) {
            target = (int64_t)(tu_next(&seed) % (uint64_t)(ref.r.evaluations / 2));
            double t0 = now_s();
            ps_snapshot s;
            do {
                assert_int_equal(ps_run_snapshot(run, &s), 0);
                assert_true(now_s() - t0 < WAIT_S);
            } while (s.evaluations < target && s.state != PS_RUN_FINISHED);
#ifndef PS_TEST_GPU
            late += s.state == PS_RUN_PAUSED;
#endif
        }
        int how = i % 3; /* 0 running, 1 paused, 2 yielded */
        if (how == 1 && ps_run_pause(run) == 0)
            wait_state(run, PS_RUN_PAUSED);
        if (how == 2 && ps_run_yield(run) == 0)
            wait_state(run, PS_RUN_YIELDED);
        assert_int_equal(ps_run_cancel(run), 0);
        ps_result r;
        tu_poison(x, n);
        int st = finish(run, &r, x);
        assert_int_equal(st, r.status);
        if (st == PS_CANCELLED) {
            cancelled++;
            if (r.history_len == 0) { /* before the first evaluation */
                double *x0 = malloc(n * sizeof *x0);
                ps_problem_x0(ref.p, x0);
                assert_memory_equal(x, x0, n * sizeof *x);
                assert_true(isnan(r.f));
                assert_int_equal(r.evaluations, 0);
                free(x0);
                resumed_start++;
            } else {
                /* nothing lost, nothing repeated: the reference's first rows */
                assert_int_equal(r.iterations + 1, (int64_t)r.history_len);
                assert_true(history_prefix_equal(&r, &ref.r, r.history_len));
#ifndef PS_TEST_GPU
                /* after the target, and not past the iteration it was
                 * held at */
                assert_true(r.evaluations >= target);
                assert_true(r.history_len <= ref.r.history_len - 1);
#endif
                /* x is the last accepted point */
                double f;
                assert_int_equal(ps_eval(ref.p, &ref.o, x, &f, NULL), 0);
                assert_memory_equal(&f, &r.f, sizeof f);
                assert_memory_equal(&r.f, &r.history[r.history_len - 1].f, sizeof f);
            }
            /* its checkpoint continues the solve to the reference's end,
             * also when cancelled before its first evaluation was taken */
            void *buf;
            size_t len;
            assert_int_equal(ps_run_checkpoint(run, &buf, &len), 0);
            assert_resumes_to_end(&ref, buf, len, x, n);
            free(buf);
            resumed++;
        } else {
            assert_same_end(&ref, &r, x);
        }
        ps_snapshot s;
        ps_run_snapshot(run, &s);
        assert_int_equal(s.state, PS_RUN_FINISHED);
        assert_int_equal(s.status, st);
        ps_result_free(&r);
        ps_run_free(run);
    }
    printf("cancel: %d of 40 runs cancelled mid-solve, %d continued from their checkpoints to the "
           "reference's end (%d cancelled before their first evaluation was taken)\n",
           cancelled, resumed, resumed_start);
#ifndef PS_TEST_GPU
    /* held before their last iteration, none can end first: all are
     * cancelled (the GPU build's runs, steered from the host, may end
     * before a late request) */
    printf("cancel: %d of 39 requests came after the solve had reached its last iteration "
           "(held there by the progress callback)\n", late);
    assert_int_equal(cancelled, 40);
#else
    assert_true(cancelled >= 20);
#endif
    assert_int_equal(resumed, cancelled); /* (the start's case: resumed_start_point) */
    free(x);
    reference_free(&ref);
}

/* ---- snapshot consistency ---- */

typedef struct hammer {
    const ps_run *run;
    atomic_int stop;
    int64_t reads, errors;
    ps_snapshot *seen; /* distinct publications */
    size_t nseen, cap;
} hammer;

static void *hammer_main(void *arg)
{
    hammer *h = arg;
    ps_snapshot prev;
    memset(&prev, 0, sizeof prev);
    /* stop is set after the end was published: read on until it is seen */
    while (!(atomic_load(&h->stop) && prev.state == PS_RUN_FINISHED)) {
        ps_snapshot s;
        if (ps_run_snapshot(h->run, &s) != 0)
            h->errors++;
        h->reads++;
        if ((s.sequence & 1u) || s.sequence < prev.sequence ||
            s.iteration < prev.iteration || s.evaluations < prev.evaluations ||
            s.heartbeat < prev.heartbeat) {
            if (h->errors++ < 5)
                printf("bad snapshot: seq %llu (prev %llu), iteration %lld "
                       "(prev %lld)\n",
                       (unsigned long long)s.sequence,
                       (unsigned long long)prev.sequence, (long long)s.iteration,
                       (long long)prev.iteration);
        }
        if (s.sequence != prev.sequence && h->nseen < h->cap)
            h->seen[h->nseen++] = s;
        prev = s;
    }
    return NULL;
}

static void snapshot_hammer(void **state)
{
    /* phases long enough for the reader to see most publications */
    reference ref;
    reference_make(&ref, "slice1d:nz=1000,nt=300");
    size_t n = ps_problem_nx(ref.p);
    double *x = malloc(n * sizeof *x);
    ps_problem_x0(ref.p, x);
    ps_run *run;
    assert_int_equal(ps_solve_start(ref.p, &ref.o, x, &run), 0);
    hammer h = {run, 0, 0, 0, NULL, 0, 1u << 18};
    h.seen = malloc(h.cap * sizeof *h.seen);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, hammer_main, &h), 0);
    /* a few pauses and yields: the control thread publishes too */
    uint64_t seed = 99;
    for (int i = 0; i < 20 && ps_run_wait(run, 0.0, NULL, NULL) == PS_RUNNING; i++) {
        sleep_us((long)(tu_next(&seed) % 2000));
        if (i % 2 ? ps_run_pause(run) : ps_run_yield(run))
            break;
        wait_state(run, i % 2 ? PS_RUN_PAUSED : PS_RUN_YIELDED);
        sleep_us(200);
        ps_run_resume(run);
    }
    ps_result r;
    finish(run, &r, x);
    atomic_store(&h.stop, 1);
    pthread_join(th, NULL);
    assert_same_end(&ref, &r, x);

    /* every publication belongs to one moment of the final history */
    int64_t bad = 0, finished = 0, midway = 0, moving = 0, last_it = -1;
    for (size_t i = 0; i < h.nseen; i++) {
        const ps_snapshot *s = &h.seen[i];
        if (s->state == PS_RUN_FINISHED) {
            finished++;
            bad += s->status != r.status || s->iteration != r.iterations;
            continue;
        }
        bad += s->status != PS_RUNNING;
        if (s->evaluations == 0)
            continue; /* before the first evaluation */
        size_t k = (size_t)s->iteration;
        if (k >= r.history_len) {
            bad++;
            continue;
        }
        const ps_progress *row = &r.history[k];
        midway++;
        if (s->state == PS_RUN_RUNNING && s->iteration != last_it) { /* the solve moved */
            moving++;
            last_it = s->iteration;
        }
        if (memcmp(&s->f, &row->f, sizeof s->f) ||
            memcmp(&s->gnorm, &row->gnorm, sizeof s->gnorm) ||
            memcmp(&s->step, &row->step, sizeof s->step) ||
            s->evaluations < row->evaluations ||
            (k + 1 < r.history_len && s->evaluations > r.history[k + 1].evaluations)) {
            if (bad++ < 5)
                printf("torn snapshot: iteration %lld f %.17g (history %.17g), "
                       "evaluations %lld\n",
                       (long long)s->iteration, s->f, row->f,
                       (long long)s->evaluations);
        }
    }
    printf("snapshot: %lld reads, %zu distinct publications checked (%lld mid-solve, "
           "against the history; %lld iterations seen running), %lld errors, "
           "%lld inconsistent\n",
           (long long)h.reads, h.nseen, (long long)midway, (long long)moving,
           (long long)h.errors, (long long)bad);
    assert_int_equal(h.errors, 0);
    assert_int_equal(bad, 0);
    assert_true(finished >= 1);
    /* the reader saw the solve in motion: running at 10 iterations at
     * least (the publications that steering makes do not count; how many
     * of the solve's it catches depends on the machine's timing: a fixed
     * floor, not a fraction of the iterations) */
    assert_true(moving >= 10);
    ps_result_free(&r);
    ps_run_free(run);
    free(h.seen);
    free(x);
    reference_free(&ref);
}

/* ---- checkpoints ---- */

/* A checkpoint of a run paused somewhere in the middle (with trial,
 * paused again until it is before a line-search trial); its iteration and
 * evaluations. */
static int64_t blob_mid_run_at(const reference *ref, int trial, void **buf, size_t *len,
                               int64_t *evaluations)
{
    size_t n = ps_problem_nx(ref->p);
    double *x = malloc(n * sizeof *x);
    ps_snapshot s;
#ifndef PS_TEST_GPU
    /*
     * A pause from the progress callback lands before a direction (phase
     * 1), never before a trial, and one from the test after a resume races
     * the worker through the direction (a few microseconds, in which a
     * test thread that shares the cores with the solve's OpenMP threads
     * seldom gets in). Without a trial: paused by the callback after the
     * first iteration that reaches a third of the evaluations. With one:
     * a run stopped by an evaluation limit at a rejected trial (from a
     * third of the reference's evaluations on, as the reference's history
     * tells: an evaluation between two rows' counts), resumed with the
     * reference's limits (the line search goes on, ps_solver_reopen) and
     * paused at once: the worker's first control point is before its next
     * trial, and the test asks for the pause while the new thread is still
     * starting. If the thread gets there first anyway (a preempted test),
     * the pause lands after that trial (the callback pauses the run after
     * that iteration at the latest: it never runs away), and the run is
     * resumed anew from the same checkpoint.
     */
    pauser pz;
    ps_run *run;
    ps_problem_x0(ref->p, x);
    if (!trial) {
        const ps_options o = pausing_opts(&ref->o, &pz, ref->r.evaluations / 3);
        assert_int_equal(ps_solve_start(ref->p, &o, x, &run), 0);
        atomic_store(&pz.run, run);
        assert_int_equal(wait_state(run, PS_RUN_PAUSED), PS_RUN_PAUSED);
        wait_idle(run);
        assert_int_equal(ps_run_snapshot(run, &s), 0);
    } else {
        const ps_progress *h = ref->r.history;
        int64_t limit = 0;
        for (size_t k = 1; k < ref->r.history_len; k++)
            if (h[k].evaluations - h[k - 1].evaluations >= 2 &&
                (limit == 0 || limit < ref->r.evaluations / 3))
                limit = h[k - 1].evaluations + 1; /* the first trial of iteration k */
        assert_true(limit > 0);
        ps_options o = ref->o;
        o.max_evaluations = limit;
        assert_int_equal(ps_solve_start(ref->p, &o, x, &run), 0);
        ps_result r;
        assert_int_equal(finish(run, &r, x), PS_MAX_EVALUATIONS);
        assert_int_equal(r.evaluations, limit);
        assert_true(r.history[r.history_len - 1].evaluations < limit); /* inside a search */
        ps_result_free(&r);
        void *stopped;
        size_t stopped_len;
        assert_int_equal(ps_run_checkpoint(run, &stopped, &stopped_len), 0);
        ps_run_free(run);
        int tries = 0;
        for (;;) {
            assert_true(tries++ < 100);
            const ps_options op = pausing_opts(&ref->o, &pz, limit);
            assert_int_equal(ps_solve_resume(ref->p, &op, stopped, stopped_len, &run), 0);
            assert_int_equal(ps_run_pause(run), 0);
            atomic_store(&pz.run, run);
            assert_int_equal(wait_state(run, PS_RUN_PAUSED), PS_RUN_PAUSED);
            wait_idle(run);
            assert_int_equal(ps_run_snapshot(run, &s), 0);
            if (s.phase == 2 /* trial */)
                break;
            ps_run_free(run);
        }
        free(stopped);
        printf("checkpoint mid-run: paused before a trial at iteration %lld, %lld evaluations "
               "(a line search stopped by the evaluation limit %lld and resumed; %d tries)\n",
               (long long)s.iteration, (long long)s.evaluations, (long long)limit, tries);
    }
    assert_int_equal(ps_run_checkpoint(run, buf, len), 0);
    ps_run_free(run);
#else
    double t0 = now_s();
    /* a loaded machine can let the solve end between a resume and the next
     * pause: then the whole procedure again, pausing earlier */
    for (int attempt = 0;; attempt++) {
        assert_true(attempt < 6);
        ps_problem_x0(ref->p, x);
        ps_run *run;
        assert_int_equal(ps_solve_start(ref->p, &ref->o, x, &run), 0);
        /* pause after a third of the evaluations (less on a retry) */
        do {
            assert_int_equal(ps_run_snapshot(run, &s), 0);
            assert_true(now_s() - t0 < WAIT_S);
        } while (s.evaluations < ref->r.evaluations / (3 << attempt) && s.state != PS_RUN_FINISHED);
        int finished = s.state == PS_RUN_FINISHED;
        while (!finished) {
            assert_int_equal(ps_run_pause(run), 0);
            if (wait_state(run, PS_RUN_PAUSED) == PS_RUN_FINISHED) {
                finished = 1;
                break;
            }
            wait_idle(run);
            assert_int_equal(ps_run_snapshot(run, &s), 0);
            if (!trial || s.phase == 2 /* trial */)
                break;
            assert_true(now_s() - t0 < WAIT_S);
            assert_int_equal(ps_run_resume(run), 0);
            finished = wait_state(run, PS_RUN_RUNNING) == PS_RUN_FINISHED;
        }
        if (!finished)
            assert_int_equal(ps_run_checkpoint(run, buf, len), 0);
        ps_run_free(run);
        if (!finished)
            break;
    }
#endif
    free(x);
    if (evaluations)
        *evaluations = s.evaluations;
    return s.iteration;
}

/* A checkpoint of the reference's solve paused a third of the way; its
 * iteration. */
static int64_t blob_mid_run(const reference *ref, void **buf, size_t *len)
{
    return blob_mid_run_at(ref, 0, buf, len, NULL);
}

static void checkpoint_round_trip(void **state)
{
    const char *specs[2] = {SPEC, SPEC_B1MAX};
    for (int k = 0; k < 2; k++) {
        reference ref;
        reference_make(&ref, specs[k]);
        size_t n = ps_problem_nx(ref.p);
        double *x = malloc(n * sizeof *x);
        ps_problem_x0(ref.p, x);
        uint64_t seed = 5 + (uint64_t)k;
        long span = (long)(2e5 * ref.r.seconds) + 1;
        ps_run *run;
        assert_int_equal(ps_solve_start(ref.p, &ref.o, x, &run), 0);
        int hops = 0;
        for (;;) {
            /* the first hops at once (their number does not depend on the
             * machine's speed), then at random moments */
            long gap = (long)(tu_next(&seed) % (uint64_t)span);
            sleep_us(hops < 3 ? 0 : gap);
            int yield = tu_next(&seed) % 2;
            if ((yield ? ps_run_yield(run) : ps_run_pause(run)) == PS_ERR_STATE)
                break;
            int want = yield ? PS_RUN_YIELDED : PS_RUN_PAUSED;
            if (wait_state(run, want) != want)
                break;
            void *buf;
            size_t len;
            assert_int_equal(ps_run_checkpoint(run, &buf, &len), 0);
            ps_run_free(run);
            /* a copy in fresh memory, as if read from a file */
            void *copy = malloc(len);
            memcpy(copy, buf, len);
            memset(buf, 0xa5, len);
            free(buf);
            ps_options o = ref.o; /* the same settings, a new struct */
            assert_int_equal(ps_solve_resume(ref.p, &o, copy, len, &run), 0);
            free(copy);
            hops++;
        }
        ps_result r;
        tu_poison(x, n);
        finish(run, &r, x);
        assert_same_end(&ref, &r, x);

        /* a finished run's checkpoint resumes finished, with the same end */
        void *buf;
        size_t len;
        assert_int_equal(ps_run_checkpoint(run, &buf, &len), 0);
        ps_run_free(run);
        assert_int_equal(ps_solve_resume(ref.p, &ref.o, buf, len, &run), 0);
        assert_int_equal(ps_run_wait(run, 0.0, NULL, NULL), ref.r.status);
        ps_result_free(&r);
        tu_poison(x, n);
        finish(run, &r, x);
        assert_same_end(&ref, &r, x);
        ps_result_free(&r);
        ps_run_free(run);
        free(buf);
        printf("%s: %d checkpoint/free/resume hops, bit-identical end\n",
               specs[k], hops);
        assert_true(hops >= 3);
        free(x);
        reference_free(&ref);
    }
}

/* Limits may change on resume; the algorithmic settings may not. */
/*
 * A run stopped by a limit continues from its checkpoint when the limit is
 * raised, bit-identical to a run that never stopped: iterations (the stop
 * is between iterations) and evaluations at every count from 2 to 40 (many
 * stops fall inside a line search, which must go on with its next trial).
 * With the same limits the checkpoint stays finished.
 */
static void limits_lifted(void **state)
{
    reference ref;
    reference_make(&ref, SPEC);
    size_t n = ps_problem_nx(ref.p);
    double *x = malloc(n * sizeof *x);
    int lifted = 0, mid_search = 0;
    for (int kind = 0; kind < 2; kind++) {
        for (int64_t lim = 2; lim <= 40; lim++) {
            ps_options o = ref.o;
            if (kind == 0)
                o.max_iterations = lim;
            else
                o.max_evaluations = lim;
            ps_problem_x0(ref.p, x);
            ps_run *run;
            assert_int_equal(ps_solve_start(ref.p, &o, x, &run), 0);
            ps_result r;
            int st = finish(run, &r, x);
            assert_int_equal(st, kind == 0 ? PS_MAX_ITERATIONS : PS_MAX_EVALUATIONS);
            /* evaluations beyond the iterations' own: stopped inside a search */
            if (kind == 1 && (int64_t)r.history_len > 0 &&
                r.history[r.history_len - 1].evaluations != r.evaluations)
                mid_search++;
            ps_result_free(&r);
            void *buf;
            size_t len;
            assert_int_equal(ps_run_checkpoint(run, &buf, &len), 0);
            ps_run_free(run);
            /* the same limits: finished, the same outcome */
            assert_int_equal(ps_solve_resume(ref.p, &o, buf, len, &run), 0);
            assert_int_equal(ps_run_wait(run, 0.0, NULL, NULL), st);
            ps_run_free(run);
            /* the reference's limits: the reference's end */
            assert_resumes_to_end(&ref, buf, len, x, n);
            free(buf);
            lifted++;
        }
    }
    printf("limits lifted: %d checkpoints continued bit-identically (%d stopped "
           "inside a line search)\n", lifted, mid_search);
    assert_true(mid_search > 0);
    free(x);
    reference_free(&ref);
}

/*
 * A checkpoint resumed with a limit it has already reached stops before
 * it evaluates again (with the state's own count), and that run's
 * checkpoint, resumed with the reference's options, ends as the reference.
 */
static void limits_reached(void **state)
{
    reference ref;
    reference_make(&ref, SPEC);
    size_t n = ps_problem_nx(ref.p);
    double *x = malloc(n * sizeof *x);
    void *buf;
    size_t len;
    int64_t evals = 0;
    int64_t it = blob_mid_run_at(&ref, 1, &buf, &len, &evals);
    for (int kind = 0; kind < 5; kind++) {
        ps_options o = ref.o;
        if (kind == 0)
            o.max_iterations = it;
        else if (kind == 1)
            o.max_evaluations = evals;
        else if (kind == 2)
            o.max_iterations = it > 1 ? it - 1 : 1; /* below: stops, nothing undone */
        else if (kind == 3)
            o.max_evaluations = evals > 1 ? evals - 1 : 1;
        else
            o.time_limit = 1e-9; /* the checkpoint's solve took longer */
        ps_run *run;
        assert_int_equal(ps_solve_resume(ref.p, &o, buf, len, &run), 0);
        ps_result r;
        int st = finish(run, &r, x);
        assert_int_equal(st, kind == 4 ? PS_TIME_LIMIT
                             : kind % 2 == 0 ? PS_MAX_ITERATIONS : PS_MAX_EVALUATIONS);
        assert_int_equal(r.iterations, it);
        assert_int_equal(r.evaluations, evals);
        assert_int_equal((int64_t)r.history_len, it + 1);
        ps_result_free(&r);
        void *b2;
        size_t l2;
        assert_int_equal(ps_run_checkpoint(run, &b2, &l2), 0);
        ps_run_free(run);
        assert_resumes_to_end(&ref, b2, l2, x, n);
        free(b2);
    }
    printf("limits reached: a checkpoint at iteration %lld, %lld evaluations, stopped at once under "
           "five limits and continued to the reference's end\n", (long long)it, (long long)evals);
    free(buf);
    free(x);
    reference_free(&ref);
}

/*
 * A run resumed from a checkpoint taken before the start evaluation, and
 * cancelled before it evaluates, gives the checkpoint's start point as
 * its x (not the problem's).
 */
static void resumed_start_point(void **state)
{
    reference ref;
    reference_make(&ref, SPEC);
    size_t n = ps_problem_nx(ref.p);
    double *x0 = malloc(n * sizeof *x0), *x = malloc(n * sizeof *x);
    ps_problem_x0(ref.p, x0);
    for (size_t i = 0; i < n; i++)
        x0[i] = 0.5 * x0[i] + 1e-3;
    int before = 0;
    for (int k = 0; k < 5; k++) {
        ps_run *run;
        assert_int_equal(ps_solve_start(ref.p, &ref.o, x0, &run), 0);
        assert_int_equal(ps_run_cancel(run), 0);
        ps_result r;
        int st = finish(run, &r, x);
        ps_result_free(&r);
        if (st != PS_CANCELLED) { /* it ended first */
            ps_run_free(run);
            continue;
        }
        void *buf;
        size_t len;
        assert_int_equal(ps_run_checkpoint(run, &buf, &len), 0);
        ps_run_free(run);
        assert_int_equal(ps_solve_resume(ref.p, &ref.o, buf, len, &run), 0);
        free(buf);
        assert_int_equal(ps_run_cancel(run), 0);
        tu_poison(x, n);
        st = finish(run, &r, x);
        if (st == PS_CANCELLED && r.history_len == 0)
            before++;
        /* evaluated or not, no step was taken: x is the start point */
        if (st == PS_CANCELLED)
            assert_memory_equal(x, x0, n * sizeof *x);
        ps_result_free(&r);
        ps_run_free(run);
    }
    printf("resumed start point: %d of 5 resumed runs cancelled before their first evaluation\n", before);
    assert_true(before >= 1);
    free(x0);
    free(x);
    reference_free(&ref);
}

static void checkpoint_options(void **state)
{
    reference ref;
    reference_make(&ref, SPEC);
    void *buf;
    size_t len;
    int64_t at = blob_mid_run(&ref, &buf, &len);
    ps_run *run = NULL;

    ps_options o = ref.o;
    o.max_iterations = at + 3; /* a new limit */
    assert_int_equal(ps_solve_resume(ref.p, &o, buf, len, &run), 0);
    ps_result r;
    finish(run, &r, NULL);
    if (ref.r.iterations > at + 3) {
        assert_int_equal(r.status, PS_MAX_ITERATIONS);
        assert_int_equal(r.iterations, at + 3);
        assert_true(history_prefix_equal(&r, &ref.r, r.history_len));
    }
    ps_result_free(&r);
    ps_run_free(run);

    o = ref.o;
    o.threads = 1; /* results do not depend on the thread count */
    size_t n = ps_problem_nx(ref.p);
    double *x = malloc(n * sizeof *x);
    assert_int_equal(ps_solve_resume(ref.p, &o, buf, len, &run), 0);
    finish(run, &r, x);
    assert_same_end(&ref, &r, x);
    ps_result_free(&r);
    ps_run_free(run);

    const char *names[] = {"memory", "past", "c1", "c2", "gtol", "ftol",
                           "max_linesearch", "precision", "fnoise"};
    for (int i = 0; i < 9; i++) {
        o = ref.o;
        switch (i) {
        case 0: o.memory = 7; break;
        case 1: o.past = 9; break;
        case 2: o.c1 = 2e-4; break;
        case 3: o.c2 = 0.8; break;
        case 4: o.gtol = 1e-6; break;
        case 5: o.ftol = 1e-8; break;
        case 6: o.max_linesearch = 19; break;
        case 7: o.precision = PS_PRECISION_DOUBLE; break;
        default: o.fnoise = 1e-4; break;
        }
        last_log[0] = 0;
        run = (ps_run *)&o; /* must be reset to NULL */
        assert_int_equal(ps_solve_resume(ref.p, &o, buf, len, &run),
                         PS_ERR_CHECKPOINT);
        assert_null(run);
        printf("%s changed: %s\n", names[i], last_log);
        assert_non_null(strstr(last_log, "checkpoint refused"));
    }
    free(x);
    free(buf);
    reference_free(&ref);
}

/* Resume must refuse buf[len]: PS_ERR_CHECKPOINT, NULL handle, a reason. */
static int refused(const reference *ref, const void *buf, size_t len)
{
    ps_run *run = NULL;
    last_log[0] = 0;
    int st = ps_solve_resume(ref->p, &ref->o, buf, len, &run);
    if (st != PS_ERR_CHECKPOINT || run != NULL || !last_log[0]) {
        ps_run_free(run);
        return 0;
    }
    return 1;
}

static void checkpoint_refused(void **state)
{
    reference ref;
    reference_make(&ref, SPEC);
    void *blob;
    size_t len;
    int64_t at = blob_mid_run(&ref, &blob, &len);
    const unsigned char *b = blob;
    unsigned char *work = malloc(len + 1);
    printf("checkpoint: %zu bytes\n", len);

    /* the blob itself is accepted */
    ps_run *run;
    assert_int_equal(ps_solve_resume(ref.p, &ref.o, blob, len, &run), 0);
    ps_run_free(run);

    /* one byte flipped: every header byte, then every 7th, the trailer */
    size_t flips = 0;
    for (size_t i = 0; i < len; i += (i < 256 || i + 16 >= len) ? 1 : 7) {
        memcpy(work, b, len);
        work[i] ^= (unsigned char)(1u << (i % 8));
        if (!refused(&ref, work, len))
            fail_msg("flipped byte %zu accepted", i);
        flips++;
    }
    memcpy(work, b, len);
    work[len / 2] ^= 0xff;
    assert_true(refused(&ref, work, len));
    printf("corrupted (%zu flips): %s\n", flips, last_log);

    /* truncated: every length up to past the header, then a stride, and
     * the last bytes; one byte too many */
    size_t cuts = 0;
    for (size_t l = 0; l < len; l += (l < 300 || l + 16 >= len) ? 1 : 13) {
        if (!refused(&ref, b, l))
            fail_msg("prefix of %zu bytes accepted", l);
        cuts++;
    }
    memcpy(work, b, len);
    work[len] = 0;
    assert_true(refused(&ref, work, len + 1));
    printf("truncated (%zu lengths): %s\n", cuts, last_log);

    /* wrong version, with a valid checksum */
    memcpy(work, b, len);
    uint32_t version = PS_CHECKPOINT_VERSION + 1;
    memcpy(work + 8, &version, sizeof version);
    uint64_t sum = ps_fnv1a(PS_FNV_OFFSET, work, len - 8);
    memcpy(work + len - 8, &sum, sizeof sum);
    assert_true(refused(&ref, work, len));
    printf("wrong version: %s\n", last_log);
    assert_non_null(strstr(last_log, "version"));

    /* a NaN in the point, with a valid checksum (the vectors x, g, xt, gt,
     * d, S, Y end where the history's rows begin) */
    {
        size_t n = ps_problem_nx(ref.p), m = (size_t)ref.o.memory;
        size_t x0 = len - 8 - (size_t)(at + 1) * sizeof(ps_progress) - (5 * n + 2 * m * n) * sizeof(double);
        memcpy(work, b, len);
        double nan = NAN;
        memcpy(work + x0 + 3 * sizeof(double), &nan, sizeof nan);
        sum = ps_fnv1a(PS_FNV_OFFSET, work, len - 8);
        memcpy(work + len - 8, &sum, sizeof sum);
        assert_true(refused(&ref, work, len));
        printf("forged x: %s\n", last_log);
        assert_non_null(strstr(last_log, "non-finite x[3]"));
    }

    /* not a checkpoint at all */
    uint64_t seed = 3;
    for (size_t i = 0; i < len; i++)
        work[i] = (unsigned char)tu_next(&seed);
    assert_true(refused(&ref, work, len));
    memcpy(work, "PSCKPT\0\0", 8);
    assert_true(refused(&ref, work, len));

    /* another problem: other sizes, or the same sizes with other arrays */
    const char *others[] = {"slice1d:nz=61,nt=80", "slice1d:nz=60,nt=81",
                            "slice1d:nz=60,nt=80,thk=0.6",
                            "slice1d:nz=60,nt=80,lambda=0.001"};
    for (int i = 0; i < 4; i++) {
        reference other = ref;
        other.p = make_problem(others[i]);
        assert_true(refused(&other, blob, len));
        printf("%s: %s\n", others[i], last_log);
        ps_problem_free(other.p);
    }
    /* the start pulse is not part of the problem's identity */
    {
        ps_problem_desc d;
        assert_int_equal(ps_problem_describe(ref.p, &d), 0);
        size_t nt = ps_problem_nt(ref.p);
        double *b1 = malloc(2 * nt * sizeof *b1);
        for (size_t i = 0; i < 2 * nt; i++)
            b1[i] = 0.01;
        d.b1 = b1;
        ps_problem *q;
        assert_int_equal(ps_problem_create(&d, &q), 0);
        assert_int_equal(ps_solve_resume(q, &ref.o, blob, len, &run), 0);
        ps_result r;
        double *x = malloc(2 * nt * sizeof *x);
        finish(run, &r, x);
        assert_same_end(&ref, &r, x);
        ps_result_free(&r);
        ps_run_free(run);
        ps_problem_free(q);
        free(b1);
        free(x);
    }
    free(work);
    free(blob);
    reference_free(&ref);
}

/* ---- bad input and wrong states ---- */

static void bad_input(void **state)
{
    assert_int_equal(PS_RUNNING, 7);
    assert_int_equal(PS_ERR_STATE, -20);
    assert_int_equal(PS_ERR_CHECKPOINT, -21);
    assert_string_not_equal(ps_strerror(PS_RUNNING), "unknown status");
    assert_string_not_equal(ps_strerror(PS_ERR_STATE), "unknown status");
    assert_string_not_equal(ps_strerror(PS_ERR_CHECKPOINT), "unknown status");

    ps_problem *p = make_problem("slice1d");
    size_t n = ps_problem_nx(p);
    double *x = malloc(n * sizeof *x);
    ps_problem_x0(p, x);
    ps_options o = run_opts();
    o.precision = PS_PRECISION_DOUBLE;
    o.max_iterations = 0; /* unlimited: it runs until cancelled */
    o.gtol = 0.0;
    o.ftol = 0.0;
    ps_run *run = (ps_run *)x;
    ps_snapshot s;
    void *buf = x;
    size_t len = 1;

    assert_int_equal(ps_solve_start(NULL, &o, x, &run), PS_ERR_NULL);
    assert_null(run);
    assert_int_equal(ps_solve_start(p, &o, NULL, &run), PS_ERR_NULL);
    assert_int_equal(ps_solve_start(p, &o, x, NULL), PS_ERR_NULL);
    assert_int_equal(ps_solve_resume(NULL, &o, x, 8, &run), PS_ERR_NULL);
    assert_int_equal(ps_solve_resume(p, &o, NULL, 8, &run), PS_ERR_NULL);
    assert_int_equal(ps_solve_resume(p, &o, x, 8, NULL), PS_ERR_NULL);
    assert_int_equal(ps_run_snapshot(NULL, &s), PS_ERR_NULL);
    assert_int_equal(ps_run_pause(NULL), PS_ERR_NULL);
    assert_int_equal(ps_run_resume(NULL), PS_ERR_NULL);
    assert_int_equal(ps_run_cancel(NULL), PS_ERR_NULL);
    assert_int_equal(ps_run_yield(NULL), PS_ERR_NULL);
    assert_int_equal(ps_run_wait(NULL, 0.0, NULL, NULL), PS_ERR_NULL);
    assert_int_equal(ps_run_checkpoint(NULL, &buf, &len), PS_ERR_NULL);
    assert_null(buf);
    assert_int_equal(len, 0);
    ps_run_free(NULL);

    /* bad options and start points are refused as by solve_persistent */
    ps_options bad = o;
    bad.memory = 0;
    assert_int_equal(ps_solve_start(p, &bad, x, &run), PS_ERR_OPTION);
    assert_null(run);
    x[3] = NAN;
    assert_int_equal(ps_solve_start(p, &o, x, &run), PS_ERR_NONFINITE);
    ps_problem_x0(p, x);
    bad = o;
    bad.backend = PS_BACKEND_GPU; /* refused without a usable GPU */
    int st = ps_solve_start(p, &bad, x, &run);
    if (st == 0) {
        assert_non_null(run);
        ps_run_free(run);
        run = NULL;
    } else {
        assert_true(st == PS_ERR_NO_GPU || st == PS_ERR_GPU_UNSUPPORTED);
        assert_null(run);
    }

    /* wrong states */
    assert_int_equal(ps_solve_start(p, &o, x, &run), 0);
    assert_int_equal(ps_run_snapshot(run, NULL), PS_ERR_NULL);
    assert_int_equal(ps_run_checkpoint(run, NULL, &len), PS_ERR_NULL);
    assert_int_equal(ps_run_checkpoint(run, &buf, &len), PS_ERR_STATE);
    assert_null(buf);
    assert_int_equal(ps_run_resume(run), PS_ERR_STATE);
    double t = now_s();
    assert_int_equal(ps_run_wait(run, 0.05, NULL, NULL), PS_RUNNING);
    assert_true(now_s() - t >= 0.04);
    assert_int_equal(ps_run_pause(run), 0);
    assert_int_equal(wait_state(run, PS_RUN_PAUSED), PS_RUN_PAUSED);
    wait_idle(run);
    assert_int_equal(ps_run_pause(run), 0);
    assert_int_equal(ps_run_snapshot(run, &s), 0);
    ps_snapshot s2;
    sleep_us(20000);
    assert_int_equal(ps_run_snapshot(run, &s2), 0);
    assert_int_equal(s2.heartbeat, s.heartbeat); /* paused: no work */
    assert_int_equal(s2.sequence, s.sequence);
    /* paused time does not count */
    assert_memory_equal(&s2.seconds, &s.seconds, sizeof s.seconds);
    assert_int_equal(ps_run_wait(run, 0.01, NULL, NULL), PS_RUNNING);
    assert_int_equal(ps_run_checkpoint(run, &buf, &len), 0);
    free(buf);
    assert_int_equal(ps_run_resume(run), 0);
    assert_int_equal(ps_run_yield(run), 0);
    assert_int_equal(wait_state(run, PS_RUN_YIELDED), PS_RUN_YIELDED);
    assert_int_equal(ps_run_yield(run), 0);
    assert_int_equal(ps_run_pause(run), 0); /* a yielded run stays yielded */
    assert_int_equal(ps_run_snapshot(run, &s), 0);
    sleep_us(20000);
    assert_int_equal(ps_run_snapshot(run, &s2), 0);
    assert_int_equal(s2.state, PS_RUN_YIELDED);
    assert_memory_equal(&s2.seconds, &s.seconds, sizeof s.seconds);
    assert_int_equal(ps_run_resume(run), 0);
    assert_int_equal(ps_run_resume(run), PS_ERR_STATE);
    assert_int_equal(ps_run_cancel(run), 0);
    ps_result r;
    assert_int_equal(finish(run, &r, x), PS_CANCELLED);
    ps_result_free(&r);
    /* finished */
    assert_int_equal(ps_run_pause(run), PS_ERR_STATE);
    assert_int_equal(ps_run_yield(run), PS_ERR_STATE);
    assert_int_equal(ps_run_resume(run), PS_ERR_STATE);
    assert_int_equal(ps_run_cancel(run), 0);
    assert_int_equal(ps_run_wait(run, -1.0, NULL, NULL), PS_CANCELLED);
    assert_int_equal(ps_run_checkpoint(run, &buf, &len), 0);
    free(buf);
    ps_run_free(run);

    /* free while running, while paused, while yielded: cancels and joins */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ps_solve_start(p, &o, x, &run), 0);
        sleep_us(2000);
        if (i == 1) {
            ps_run_pause(run);
            wait_state(run, PS_RUN_PAUSED);
        } else if (i == 2) {
            ps_run_yield(run);
            wait_state(run, PS_RUN_YIELDED);
        }
        ps_run_free(run);
    }
    free(x);
    ps_problem_free(p);
}

#ifndef PS_TEST_GPU
/* solve_persistent keeps calling the progress callback (from the worker),
 * and its return value still cancels (CPU backend: the GPU kernel runs
 * alone, its progress is the snapshot). */
static int stop_at_5(void *user, const ps_progress *pr)
{
    int64_t *calls = user;
    assert_int_equal(pr->iteration, *calls);
    (*calls)++;
    return pr->iteration == 5;
}

static void progress_cancel(void **state)
{
    ps_problem *p = make_problem(SPEC);
    size_t n = ps_problem_nx(p);
    double *x = malloc(n * sizeof *x);
    ps_problem_x0(p, x);
    ps_options o = run_opts();
    int64_t calls = 0;
    o.progress = stop_at_5;
    o.progress_user = &calls;
    ps_result r;
    assert_int_equal(solve_persistent(p, &o, x, &r), PS_CANCELLED);
    assert_int_equal(r.iterations, 5);
    assert_int_equal(calls, 6);
    assert_int_equal(r.history_len, 6);
    assert_int_equal(r.backend, PS_BACKEND_CPU);
    assert_non_null(strstr(r.device, "cpu"));
    ps_result_free(&r);
    free(x);
    ps_problem_free(p);
}
#endif

/* The tests both backends run. */
#define BOTH_BACKENDS_TESTS                   \
    cmocka_unit_test(bad_input),              \
        cmocka_unit_test(control_storm),      \
        cmocka_unit_test(control_storm_b1max), \
        cmocka_unit_test(control_storm_sar),  \
        cmocka_unit_test(checkpoint_round_start), \
        cmocka_unit_test(cancel_random),      \
        cmocka_unit_test(snapshot_hammer),    \
        cmocka_unit_test(checkpoint_round_trip), \
        cmocka_unit_test(limits_lifted),      \
        cmocka_unit_test(limits_reached),     \
        cmocka_unit_test(resumed_start_point), \
        cmocka_unit_test(checkpoint_options), \
        cmocka_unit_test(checkpoint_refused)

#ifdef PS_TEST_GPU
/* ---- GPU only ---- */

typedef struct eval_job {
    const ps_problem *p;
    ps_options o;
    const double *x;
    double f;
    int st;
    atomic_int done;
} eval_job;

static void *eval_main(void *arg)
{
    eval_job *j = arg;
    j->st = ps_eval(j->p, &j->o, j->x, &j->f, NULL);
    atomic_store(&j->done, 1);
    return NULL;
}

/*
 * While a run is yielded its kernel has exited: another cooperative kernel
 * that needs every SM (a GPU evaluation of another problem, on another
 * stream) runs to completion. The run then resumes and ends as the
 * reference.
 */
static void yield_frees_gpu(void **state)
{
    reference ref;
    reference_make(&ref, "spiral2d:n=32,nt=1000");
    ps_problem *q = make_problem("inversion");
    size_t nq = ps_problem_nx(q), n = ps_problem_nx(ref.p);
    double *xq = malloc(nq * sizeof *xq), *x = malloc(n * sizeof *x);
    ps_problem_x0(q, xq);
    ps_problem_x0(ref.p, x);
    ps_run *run;
    int yields = 0;
    assert_int_equal(ps_solve_start(ref.p, &ref.o, x, &run), 0);
    for (int i = 0; i < 5; i++) {
        sleep_us(1000);
        if (ps_run_yield(run) != 0 || wait_state(run, PS_RUN_YIELDED) != PS_RUN_YIELDED)
            break;
        eval_job j = {q, ref.o, xq, 0.0, -1, 0};
        pthread_t th;
        double t0 = now_s();
        assert_int_equal(pthread_create(&th, NULL, eval_main, &j), 0);
        while (!atomic_load(&j.done)) {
            if (now_s() - t0 > WAIT_S)
                fail_msg("an evaluation did not run while the solve was yielded");
            sleep_us(100);
        }
        pthread_join(th, NULL);
        assert_int_equal(j.st, 0);
        assert_true(isfinite(j.f));
        printf("yield %d: another kernel ran in %.3f ms while yielded\n", i,
               1e3 * (now_s() - t0));
        yields++;
        assert_int_equal(ps_run_resume(run), 0);
    }
    ps_result r;
    finish(run, &r, x);
    assert_same_end(&ref, &r, x);
    assert_int_equal(r.backend, PS_BACKEND_GPU);
    assert_true(yields >= 3);
    ps_result_free(&r);
    ps_run_free(run);
    free(x);
    free(xq);
    ps_problem_free(q);
    reference_free(&ref);
}

/*
 * A checkpoint taken on one backend resumes on the other: the history up
 * to the checkpoint is kept bit for bit and the solve goes on from there
 * (rounding differs between the backends, so the end is checked for
 * progress, not bits).
 */
static void checkpoint_across_backends(void **state)
{
    for (int dir = 0; dir < 2; dir++) {
        reference ref;
        reference_make(&ref, SPEC);
        if (dir == 1) { /* taken on the CPU, resumed on the GPU */
            ref.o.backend = PS_BACKEND_CPU;
            ps_result_free(&ref.r);
            ps_problem_x0(ref.p, ref.x);
            assert_true(solve_persistent(ref.p, &ref.o, ref.x, &ref.r) >= 0);
        }
        void *buf;
        size_t len;
        int64_t at = blob_mid_run(&ref, &buf, &len);
        ps_run *run;
        ps_options o = ref.o;
        o.backend = dir == 0 ? PS_BACKEND_CPU : PS_BACKEND_GPU;
        assert_int_equal(ps_solve_resume(ref.p, &o, buf, len, &run), 0);
        ps_result r;
        size_t n = ps_problem_nx(ref.p);
        double *x = malloc(n * sizeof *x);
        tu_poison(x, n);
        int st = finish(run, &r, x);
        printf("%s checkpoint at iteration %lld resumed on the %s: status %d, %lld "
               "iterations, f %.10g (uninterrupted %s run: %.10g)\n",
               dir == 0 ? "GPU" : "CPU", (long long)at, dir == 0 ? "CPU" : "GPU", st,
               (long long)r.iterations, r.f, dir == 0 ? "GPU" : "CPU", ref.r.f);
        assert_true(st >= 0);
        assert_int_equal(r.backend, o.backend);
        assert_true(r.iterations > at);
        assert_int_equal(r.history_len, (size_t)r.iterations + 1);
        /* the rows before the checkpoint are the original run's */
        assert_true(history_prefix_equal(&r, &ref.r, (size_t)at + 1));
        for (size_t i = 0; i < n; i++)
            assert_true(isfinite(x[i]));
        assert_true(r.f <= r.history[at].f);
        assert_true(fabs(r.f - ref.r.f) <= 0.05 * fabs(ref.r.f));
        ps_result_free(&r);
        ps_run_free(run);
        free(x);
        free(buf);
        reference_free(&ref);
    }
}

/*
 * A checkpoint of the CPU backend taken just before an update (the
 * accepted trial's vectors not moved yet) resumes on the GPU, whose kernel
 * then takes the update's partials in a pass of its own (otherwise they
 * come with the trial's reduction): the row of that update has the CPU's
 * accepted f bit for bit and its gradient norm to rounding, and two
 * resumes of the same checkpoint end bit-identical.
 */
static void checkpoint_update_phase(void **state)
{
    reference ref;
    reference_make(&ref, SPEC);
    ref.o.backend = PS_BACKEND_CPU;
    ps_result_free(&ref.r);
    ps_problem_x0(ref.p, ref.x);
    assert_true(solve_persistent(ref.p, &ref.o, ref.x, &ref.r) >= 0);
    size_t n = ps_problem_nx(ref.p);
    double *x = malloc(n * sizeof *x);
    ps_problem_x0(ref.p, x);
    ps_run *run;
    assert_int_equal(ps_solve_start(ref.p, &ref.o, x, &run), 0);
    /* pause, resume, ... until a pause lands before an update */
    ps_snapshot s;
    double t0 = now_s();
    int pauses = 0;
    for (;;) {
        assert_int_equal(ps_run_pause(run), 0);
        assert_int_equal(wait_state(run, PS_RUN_PAUSED), PS_RUN_PAUSED);
        assert_int_equal(ps_run_snapshot(run, &s), 0);
        pauses++;
        if (s.phase == 3 && s.iteration >= 3)
            break;
        assert_true(s.iteration < ITERS / 2);
        assert_true(now_s() - t0 < WAIT_S);
        assert_int_equal(ps_run_resume(run), 0);
        do { /* running again, so that the next pause is a new one */
            assert_int_equal(ps_run_snapshot(run, &s), 0);
            assert_true(now_s() - t0 < WAIT_S);
        } while (s.state == PS_RUN_PAUSED);
        assert_int_equal(s.state, PS_RUN_RUNNING);
    }
    void *buf;
    size_t len;
    assert_int_equal(ps_run_checkpoint(run, &buf, &len), 0);
    ps_run_free(run);
    const size_t at = (size_t)s.iteration;
    printf("CPU checkpoint before the update of iteration %zu (after %d pauses)\n", at + 1, pauses);

    ps_options o = ref.o;
    o.backend = PS_BACKEND_GPU;
    ps_result r[2];
    double *xg[2];
    for (int k = 0; k < 2; k++) {
        xg[k] = malloc(n * sizeof *xg[k]);
        tu_poison(xg[k], n);
        assert_int_equal(ps_solve_resume(ref.p, &o, buf, len, &run), 0);
        assert_true(finish(run, &r[k], xg[k]) >= 0);
        ps_run_free(run);
        assert_int_equal(r[k].backend, PS_BACKEND_GPU);
        assert_true(r[k].iterations > (int64_t)at + 1);
        assert_true(history_prefix_equal(&r[k], &ref.r, at + 1));
        const ps_progress *h = &r[k].history[at + 1], *c = &ref.r.history[at + 1];
        printf("update row %zu: GPU f %.17g gnorm %.17g step %.17g, CPU f %.17g gnorm %.17g step %.17g\n",
               at + 1, h->f, h->gnorm, h->step, c->f, c->gnorm, c->step);
        assert_true(h->f == c->f);
        assert_true(h->step == c->step);
        assert_true(fabs(h->gnorm - c->gnorm) <= 1e-12 * c->gnorm);
        assert_true(r[k].f <= h->f);
    }
    assert_int_equal(r[0].iterations, r[1].iterations);
    assert_int_equal(r[0].status, r[1].status);
    assert_true(r[0].f == r[1].f);
    assert_memory_equal(xg[0], xg[1], n * sizeof *xg[0]);
    for (int k = 0; k < 2; k++) {
        ps_result_free(&r[k]);
        free(xg[k]);
    }
    free(buf);
    free(x);
    reference_free(&ref);
}

/* control_paths: the run ends at its iteration limit with the
 * uninterrupted solve's x (xr[n]) and f, bit for bit; frees the run. */
static void finish_as_reference(ps_run *run, double *x, size_t n, const double *xr,
                                const ps_result *ref)
{
    ps_result r;
    tu_poison(x, n);
    assert_int_equal(finish(run, &r, x), PS_MAX_ITERATIONS);
    assert_memory_equal(x, xr, n * sizeof *x);
    assert_memory_equal(&r.f, &ref->f, sizeof r.f);
    ps_result_free(&r);
    ps_run_free(run);
}

/*
 * One short run through every control path (the subset run under
 * compute-sanitizer, where a kernel is thousands of times slower): pause,
 * checkpoint while paused, resume, yield, resume, the end; then a cancel
 * while paused.
 */
static void control_paths(void **state)
{
    ps_problem *p = make_problem("slice1d:nz=20,nt=40");
    size_t n = ps_problem_nx(p);
    double *x = malloc(n * sizeof *x), *xr = malloc(n * sizeof *xr);
    ps_options o = run_opts();
    o.max_iterations = 4;
    ps_result ref, r;
    ps_problem_x0(p, xr);
    assert_int_equal(solve_persistent(p, &o, xr, &ref), PS_MAX_ITERATIONS);
    ps_run *run;
    ps_problem_x0(p, x);
    assert_int_equal(ps_solve_start(p, &o, x, &run), 0);
    assert_int_equal(ps_run_pause(run), 0);
    if (wait_state(run, PS_RUN_PAUSED) == PS_RUN_PAUSED) {
        void *buf;
        size_t len;
        assert_int_equal(ps_run_checkpoint(run, &buf, &len), 0);
        free(buf);
        assert_int_equal(ps_run_resume(run), 0);
    }
    if (ps_run_yield(run) == 0 && wait_state(run, PS_RUN_YIELDED) == PS_RUN_YIELDED)
        assert_int_equal(ps_run_resume(run), 0);
    finish_as_reference(run, x, n, xr, &ref);

    /* pauses withdrawn after 0 to 140 us: some acknowledged while an
     * evaluation runs and withdrawn before the control point obeys them
     * (RUNNING published again before the reduction's barrier), some
     * obeyed; the same end */
    ps_problem_x0(p, x);
    assert_int_equal(ps_solve_start(p, &o, x, &run), 0);
    for (int i = 0; i < 8 && ps_run_pause(run) == 0; i++) {
        sleep_us(20 * i);
        const int rs = ps_run_resume(run);
        assert_true(rs == 0 || rs == PS_ERR_STATE);
    }
    finish_as_reference(run, x, n, xr, &ref);

    ps_problem_x0(p, x);
    assert_int_equal(ps_solve_start(p, &o, x, &run), 0);
    ps_run_pause(run);
    wait_state(run, PS_RUN_PAUSED);
    assert_int_equal(ps_run_cancel(run), 0);
    int st = finish(run, &r, x);
    assert_true(st == PS_CANCELLED || st == PS_MAX_ITERATIONS);
    ps_result_free(&r);
    ps_run_free(run);
    ps_result_free(&ref);
    free(x);
    free(xr);
    ps_problem_free(p);
}

int main(void)
{
    /* quick: the subset run under compute-sanitizer */
    const struct CMUnitTest quick[] = {
        cmocka_unit_test(control_paths),
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(control_paths),
        BOTH_BACKENDS_TESTS,
        cmocka_unit_test(yield_frees_gpu),
        cmocka_unit_test(checkpoint_across_backends),
        cmocka_unit_test(checkpoint_update_phase),
    };
    return TU_RUN_GPU_SUITE(quick, tests);
}
#else
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(progress_cancel),
        BOTH_BACKENDS_TESTS,
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
