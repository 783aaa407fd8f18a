/*
 * What the GPU tests of the channels kernel, of the designed gradient
 * axes and of several GPUs share: random problems (with designed axes),
 * the options they run with, the three solve variants compared bit for
 * bit, runs waited for, and checkpoint hops. Include after <cmocka.h>.
 */
#ifndef PS_TESTS_GPU_PROBLEM_H
#define PS_TESTS_GPU_PROBLEM_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/launch.h"
#include "persolve.h"
#include "test_util.h"

#define TWO_PI 6.283185307179586

/*
 * A random problem of nc channels: spins in a 4 cm cube, random df,
 * weights, start magnetization on the unit sphere, optional relaxation, a
 * smooth gradient, sensitivities of modulus 0.2..1 and random phase (with
 * nc = 0: one channel of real B1 scale s_j instead; with as_map and
 * nc = 1: the same scale given as the b1map (s_j, 0)); x[2 nc nt] random.
 */
static inline ps_problem *random_problem(uint64_t seed, size_t ns, size_t nt, size_t nc, int as_map,
                                  ps_loss loss, int relax, double b1max, double *x)
{
    const size_t ncs = nc ? nc : 1;
    double *r = malloc(3 * ns * sizeof *r), *tg = malloc(3 * ns * sizeof *tg);
    double *df = malloc(ns * sizeof *df), *s = malloc(ns * sizeof *s);
    double *w = malloc(ns * sizeof *w), *m0 = malloc(3 * ns * sizeof *m0);
    double *t1 = malloc(ns * sizeof *t1), *t2 = malloc(ns * sizeof *t2);
    double *g = malloc(3 * nt * sizeof *g), *S = malloc(2 * ns * ncs * sizeof *S);
    for (size_t j = 0; j < ns; j++) {
        for (int c = 0; c < 3; c++) {
            r[3 * j + c] = tu_uniform(&seed, -2.0, 2.0);
            tg[3 * j + c] = tu_uniform(&seed, -1.0, 1.0);
        }
        double a = tu_uniform(&seed, 0, TWO_PI), z = tu_uniform(&seed, -1, 1);
        m0[3 * j] = sqrt(1 - z * z) * cos(a);
        m0[3 * j + 1] = sqrt(1 - z * z) * sin(a);
        m0[3 * j + 2] = z;
        df[j] = tu_uniform(&seed, -300.0, 300.0);
        s[j] = tu_uniform(&seed, 0.7, 1.2);
        w[j] = tu_uniform(&seed, 0.0, 2.0);
        t1[j] = tu_uniform(&seed, 2e-3, 1.0);
        t2[j] = tu_uniform(&seed, 1e-3, 0.1);
        for (size_t c = 0; c < ncs; c++) {
            double mag = tu_uniform(&seed, 0.2, 1.0), ph = tu_uniform(&seed, 0, TWO_PI);
            S[2 * (j * ncs + c)] = as_map && nc == 1 ? s[j] : mag * cos(ph);
            S[2 * (j * ncs + c) + 1] = as_map && nc == 1 ? 0.0 : mag * sin(ph);
        }
    }
    for (size_t k = 0; k < nt; k++) {
        double t = (double)k / (double)nt;
        g[3 * k] = 0.5 * sin(TWO_PI * 3 * t);
        g[3 * k + 1] = 0.4 * cos(TWO_PI * 2 * t);
        g[3 * k + 2] = 0.3;
    }
    for (size_t i = 0; i < 2 * ncs * nt; i++)
        x[i] = (0.1 / (double)ncs) * tu_uniform(&seed, -1.0, 1.0);
    ps_problem_desc d;
    ps_problem_desc_init(&d);
    d.ns = ns;
    d.nt = nt;
    d.nc = ncs;
    d.r = r;
    d.target = tg;
    d.df = df;
    d.b1scale = nc == 0 ? s : NULL;
    d.b1map = nc == 0 ? NULL : S;
    d.w = w;
    d.m0 = m0;
    d.t1 = relax ? t1 : NULL;
    d.t2 = relax ? t2 : NULL;
    d.g = g;
    d.dt = 4e-6;
    d.lambda = 0.01;
    d.loss = loss;
    if (b1max > 0.0)
        d.b1_max = b1max;
    ps_problem *p = NULL;
    assert_int_equal(ps_problem_create(&d, &p), 0);
    free(r), free(tg), free(df), free(s), free(w), free(m0), free(t1), free(t2), free(g), free(S);
    return p;
}

/* The library's log, printed (a failed GPU call says why). */
static inline void print_log(void *user, int level, const char *file, int line, const char *msg)
{
    (void)user;
    printf("log %d %s:%d: %s\n", level, file, line, msg);
}

static inline ps_options opts(ps_backend b, ps_precision prec)
{
    ps_options o;
    ps_options_default(&o);
    o.backend = b;
    o.precision = prec;
    o.log = print_log;
    return o;
}

/* The three variants (persistent, host loop, CUDA graph) of one solve of p
 * from x0[n]: the same history f and rounds and the same x, bit for bit;
 * the rounds the persistent run went through. */
static inline int variants_same(const ps_problem *p, const ps_options *o, const double *x0, size_t n, const char *what)
{
    double *x[3];
    ps_result r[3];
    for (int v = 0; v < 3; v++) {
        x[v] = malloc(n * sizeof *x[v]);
        memcpy(x[v], x0, n * sizeof *x0);
        memset(&r[v], 0, sizeof r[v]);
        int st = ps_gpu_solve_variant(p, o, NULL, v, x[v], &r[v]);
        printf("%s %s variant %d: status %d it %lld rounds %d f %.17g\n", what,
               o->precision ? "fp64" : "fp32", v, st, (long long)r[v].iterations,
               r[v].history[r[v].history_len - 1].round + 1, r[v].f);
        assert_true(st >= 0);
    }
    for (int v = 1; v < 3; v++) {
        assert_int_equal(r[v].history_len, r[0].history_len);
        for (size_t i = 0; i < r[0].history_len; i++) {
            assert_memory_equal(&r[v].history[i].f, &r[0].history[i].f, sizeof(double));
            assert_int_equal(r[v].history[i].round, r[0].history[i].round);
        }
        assert_memory_equal(x[v], x[0], n * sizeof *x[0]);
    }
    const int rounds = r[0].history[r[0].history_len - 1].round + 1;
    for (int v = 0; v < 3; v++) {
        ps_result_free(&r[v]);
        free(x[v]);
    }
    return rounds;
}

/* The run's state now (a snapshot). */
static inline ps_snapshot snap(const ps_run *run)
{
    ps_snapshot s;
    assert_int_equal(ps_run_snapshot(run, &s), 0);
    return s;
}

/* Checkpoint the paused run, free it, resume from the blob with o and wait
 * for the end (tu_wait_s) into r and x; the status. */
static inline int resume_from_checkpoint(const ps_problem *p, const ps_options *o, ps_run *run, ps_result *r,
                                  double *x)
{
    void *buf;
    size_t len;
    assert_int_equal(ps_run_checkpoint(run, &buf, &len), 0);
    ps_run_free(run);
    assert_int_equal(ps_solve_resume(p, o, buf, len, &run), 0);
    free(buf);
    memset(r, 0, sizeof *r);
    int st = ps_run_wait(run, tu_wait_s(), r, x);
    ps_run_free(run);
    return st;
}

/* The solve of p from x0[n] with o once more: the status, every history
 * f and x of the earlier run (ref, xref) again, bit for bit. */
static inline void same_again(const ps_problem *p, const ps_options *o, const double *x0, size_t n,
                              const ps_result *ref, const double *xref)
{
    double *x = malloc(n * sizeof *x);
    memcpy(x, x0, n * sizeof *x0);
    ps_result r;
    memset(&r, 0, sizeof r);
    assert_int_equal(solve_persistent(p, o, x, &r), ref->status);
    assert_int_equal(r.history_len, ref->history_len);
    for (size_t i = 0; i < r.history_len; i++)
        assert_memory_equal(&r.history[i].f, &ref->history[i].f, sizeof(double));
    assert_memory_equal(x, xref, n * sizeof *x);
    ps_result_free(&r);
    free(x);
}

/* A design through penalty rounds (status st): converged, in at least two
 * rounds, the history's rounds non-decreasing and its last the result's. */
static inline void check_rounds(int st, const ps_result *r)
{
    assert_true(st == PS_CONVERGED || st == PS_CONVERGED_FTOL);
    assert_true(r->rounds >= 2);
    for (size_t i = 1; i < r->history_len; i++)
        assert_true(r->history[i].round >= r->history[i - 1].round);
    assert_int_equal(r->history[r->history_len - 1].round, r->rounds - 1);
}

/* The end of three designs of p from x0[n] through penalty rounds, r[v]
 * and x[v] of the CPU (float64), the GPU (float64) and the GPU (float32,
 * options o32): the GPU's float64 status and rounds the CPU's, the float32
 * design again the same bits (same_again); frees r and x. */
static inline void rounds_end(const ps_problem *p, const ps_options *o32, const double *x0, size_t n, ps_result r[3],
                              double *x[3])
{
    assert_int_equal(r[1].status, r[0].status);
    assert_int_equal(r[1].rounds, r[0].rounds);
    same_again(p, o32, x0, n, &r[2], x[2]);
    for (int v = 0; v < 3; v++) {
        ps_result_free(&r[v]);
        free(x[v]);
    }
}

/* Steps the test RF mask holds at zero: the first three and every 7th. */
static inline int held(size_t k)
{
    return k < 3 || k % 7 == 0;
}

/*
 * p with the designed axes `axes` (PS_AXIS_* bits, 0: none): smax twice
 * the largest slew of the problem's waveform (its start not clipped), gmax
 * gfrac times its peak (0: none), g_end, and with mask the RF mask of
 * held(). Frees p.
 */
static inline ps_problem *with_design(ps_problem *p, unsigned axes, double gfrac, int g_end, int mask)
{
    ps_problem_desc d;
    assert_int_equal(ps_problem_describe(p, &d), 0);
    const size_t nt = d.nt;
    double smax, peak;
    tu_waveform_peak_slew(d.g, nt, d.dt, &peak, &smax);
    double *m = malloc(nt * sizeof *m);
    for (size_t k = 0; k < nt; k++)
        m[k] = held(k) ? 0.0 : 1.0;
    d.design_g = axes;
    d.smax = axes ? 2.0 * smax : 0.0; /* the limits only with designed axes */
    d.gmax = axes ? gfrac * peak : 0.0;
    d.g_end = axes ? g_end : 0;
    d.rf_mask = mask ? m : NULL;
    ps_problem *q = NULL;
    assert_int_equal(ps_problem_create(&d, &q), 0);
    ps_problem_free(p);
    free(m);
    return q;
}

/* p with G_z = 0 at every step (x and y as they were). Frees p. */
static inline ps_problem *without_gz(ps_problem *p)
{
    ps_problem_desc d;
    assert_int_equal(ps_problem_describe(p, &d), 0);
    double *g = malloc(3 * d.nt * sizeof *g);
    memcpy(g, d.g, 3 * d.nt * sizeof *g);
    for (size_t k = 0; k < d.nt; k++)
        g[3 * k + 2] = 0.0;
    d.g = g;
    ps_problem *q = NULL;
    assert_int_equal(ps_problem_create(&d, &q), 0);
    ps_problem_free(p);
    free(g);
    return q;
}

/* A random designed problem and a physical point x [ps_problem_nx]: the
 * random pulse of random_problem, the waveforms of the problem's start
 * with noise of 0.02 G/cm (the penalties active where gfrac < 1); with
 * z0, G_z = 0 at every step (with one channel and at most
 * PS_GPU_STAGED_STEPS steps, z not designed: the GPU's PS_GPU_STAGED
 * kernel class). */
static inline ps_problem *designed_problem_z(uint64_t seed, size_t ns, size_t nt, size_t nc, ps_loss loss, int relax,
                                             double b1max, unsigned axes, double gfrac, int g_end, int mask, int z0,
                                             double **xout)
{
    const size_t ncs = nc ? nc : 1;
    double *xr = malloc(2 * ncs * nt * sizeof *xr);
    ps_problem *p = random_problem(seed, ns, nt, nc, 1, loss, relax, b1max, xr);
    p = with_design(z0 ? without_gz(p) : p, axes, gfrac, g_end, mask);
    const size_t n = ps_problem_nx(p), nrf = 2 * ncs * nt;
    double *x = malloc(n * sizeof *x);
    assert_int_equal(ps_problem_x0(p, x), 0);
    memcpy(x, xr, nrf * sizeof *x);
    uint64_t s = seed * 7919 + 1;
    for (size_t i = nrf; i < n; i++)
        x[i] += tu_uniform(&s, -0.02, 0.02);
    free(xr);
    *xout = x;
    return p;
}

static inline ps_problem *designed_problem(uint64_t seed, size_t ns, size_t nt, size_t nc, ps_loss loss, int relax,
                                           double b1max, unsigned axes, double gfrac, int g_end, int mask,
                                           double **xout)
{
    return designed_problem_z(seed, ns, nt, nc, loss, relax, b1max, axes, gfrac, g_end, mask, 0, xout);
}

/* One design of p from x0 on the backend and precision: status, result, x. */
static inline int design(const ps_problem *p, const ps_options *o, const double *x0, double *x, ps_result *r)
{
    memcpy(x, x0, ps_problem_nx(p) * sizeof *x);
    memset(r, 0, sizeof *r);
    return solve_persistent(p, o, x, r);
}

static inline double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline void sleep_us(long us)
{
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&t, NULL);
}

/* Poll until the run is in `want` or FINISHED (bounded); the state. */
static inline int wait_for(const ps_run *run, int want)
{
    const double t0 = now_s();
    for (;;) {
        const ps_snapshot s = snap(run);
        if (s.state == want || s.state == PS_RUN_FINISHED)
            return s.state;
        if (now_s() - t0 > tu_wait_s())
            fail_msg("run did not reach state %d", want);
        sleep_us(10);
    }
}

/* Pause (or yield) the run, checkpoint it, free it and resume from the
 * checkpoint: the new handle. */
static inline ps_run *hop(const ps_problem *p, const ps_options *o, ps_run *run)
{
    void *buf;
    size_t len;
    assert_int_equal(ps_run_checkpoint(run, &buf, &len), 0);
    ps_run_free(run);
    ps_run *next = NULL;
    assert_int_equal(ps_solve_resume(p, o, buf, len, &next), 0);
    free(buf);
    return next;
}

/*
 * A run of p from x0[n] with o, interrupted at random moments until it
 * ends (seed; per_eval: seconds of one evaluation, the scale of the
 * waits): pause and resume, yield and resume, pause or yield then a
 * checkpoint hop. Counts the stops obeyed and the hops; returns the
 * status, r and x the run's end.
 */
static inline int steered_run(const ps_problem *p, const ps_options *o, const double *x0, size_t n, uint64_t *seed,
                              double per_eval, int *stops, int *hops, ps_result *r, double *x)
{
    memcpy(x, x0, n * sizeof *x);
    ps_run *run = NULL;
    assert_int_equal(ps_solve_start(p, o, x, &run), 0);
    tu_poison(x, n);
    while (ps_run_wait(run, 0.0, NULL, NULL) == PS_RUNNING) {
        sleep_us((long)(tu_next(seed) % (uint64_t)(3e6 * per_eval + 2)));
        const int what = (int)(tu_next(seed) % 4);
        const int st = what == 1 ? ps_run_yield(run) : ps_run_pause(run);
        if (st == PS_ERR_STATE)
            continue;
        assert_int_equal(st, 0);
        const int want = what == 1 ? PS_RUN_YIELDED : PS_RUN_PAUSED;
        if (wait_for(run, want) != want)
            continue;
        (*stops)++;
        if (what >= 2) {
            run = hop(p, o, run);
            (*hops)++;
        } else {
            assert_int_equal(ps_run_resume(run), 0);
        }
    }
    memset(r, 0, sizeof *r);
    const int st = ps_run_wait(run, tu_wait_s(), r, x);
    ps_run_free(run);
    return st;
}

#endif /* PS_TESTS_GPU_PROBLEM_H */
