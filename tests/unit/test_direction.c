/*
 * The direction decision of the GPU kernels (ps_solver_direction_warp: one
 * warp, lane l owning pair l) against the CPU's ps_solver_direction, bit
 * for bit (checkasm style): random L-BFGS states of memory m in {1, 3, 8,
 * 17, 32}, k of m pairs, random newest slot, dots of random pairs with
 * positive curvature (descent directions), plus states that must fall back
 * to steepest descent (negative curvature, a non-finite dot, no pairs) and
 * states that a limit stops. The outputs are poisoned (NaN) first; the
 * coefficients, g.d, the phase, the status and the line-search state must
 * agree in every bit, and the first field that does not is reported.
 *
 * Built twice: with PS_TEST_GPU on the GPU (gpu suite; exits 77 without a
 * usable GPU), else with host threads as the warp's lanes (unit suite:
 * the same source of the warp form, not the GPU's code).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifdef PS_TEST_GPU
#include "gpu_suite.h"
#endif
#include "test_util.h"
#include "unit/lbfgs_pairs.h"
#include "unit/warp_direction.h"

#ifdef PS_TEST_GPU
enum { NSTATES = 4000, NSTATES_QUICK = 800 }; /* PS_GPU_TEST_QUICK: under compute-sanitizer */
#else
enum { NSTATES = 800, NSTATES_QUICK = 800 }; /* 32 threads on barriers: slow */
#endif
enum { NVEC = 40 };
enum { K_DESCENT, K_NEGATIVE, K_NONFINITE, K_EMPTY, K_LIMIT, K_KINDS };

/* A random state in phase DIRECTION of the given kind; *elapsed for the
 * time limit. */
static void make_state(ps_solver *s, double *elapsed, uint64_t *seed, int m, int kind)
{
    static double S[PS_MAX_MEMORY * NVEC], Y[PS_MAX_MEMORY * NVEC], g[NVEC];
    ps_solver_init(s, m, 5, 20, 1000, 5000, 1e-6, 1e-9, 1e-4, 0.9, 60.0,
                   tu_uniform(seed, 0.0, 1e-6));
    s->phase = PS_PHASE_DIRECTION;
    s->iteration = 1 + (int64_t)(tu_next(seed) % 900);
    s->evaluations = s->iteration + 1 + (int64_t)(tu_next(seed) % 900);
    s->f = tu_uniform(seed, -2.0, 2.0);
    *elapsed = tu_uniform(seed, 0.0, 50.0);

    int k = 1 + (int)(tu_next(seed) % (uint64_t)m);
    int newest = (int)(tu_next(seed) % (uint64_t)m);
    int n = k + 2 + (int)(tu_next(seed) % (uint64_t)(NVEC - k - 1));
    lp_pairs(seed, n, k, S, Y, g);
    /* a random scale, so that gamma and the dots are not all near 1 */
    double scale = exp(tu_uniform(seed, -5.0, 5.0));
    for (int j = 0; j < k * n; j++)
        S[j] *= scale;
    if (kind == K_NEGATIVE) /* y = -A s for the newest pair: gamma < 0 */
        for (int j = 0; j < n; j++)
            Y[(k - 1) * n + j] = -Y[(k - 1) * n + j];
    lp_fill(&s->lb, m, k, newest, n, S, Y, g);
    s->gnorm = sqrt(s->lb.gg);
    if (kind == K_NONFINITE) {
        int sl = lp_slot(m, k, newest, (int)(tu_next(seed) % (uint64_t)k));
        if (tu_next(seed) & 1)
            s->lb.sg[sl] = NAN;
        else
            s->lb.yg[sl] = INFINITY;
    }
    if (kind == K_EMPTY)
        s->lb.k = 0;
    if (kind == K_LIMIT) {
        switch (tu_next(seed) % 3) {
        case 0: s->iteration = s->max_iterations; break;
        case 1: s->evaluations = s->max_evaluations + 1; break;
        default: *elapsed = s->time_limit; break;
        }
    }
    /* the outputs, poisoned */
    for (int i = 0; i < PS_MAX_MEMORY; i++)
        s->lb.cs[i] = s->lb.cy[i] = NAN;
    s->lb.cg = s->lb.gd = NAN;
    memset(&s->ls, 0xff, sizeof s->ls);
}

/* The fields the decision writes, in the order they are reported. */
typedef struct field {
    const char *name;
    size_t off;
    int count;     /* elements */
    int is_double; /* else int */
} field;

#define FD(name, member, count) {name, offsetof(ps_solver, member), count, 1}
#define FI(name, member, count) {name, offsetof(ps_solver, member), count, 0}
static const field fields[] = {
    FI("phase", phase, 1),
    FI("status", status, 1),
    FI("resume_phase", resume_phase, 1),
    FI("lb.k", lb.k, 1),
    FD("lb.cs", lb.cs, PS_MAX_MEMORY),
    FD("lb.cy", lb.cy, PS_MAX_MEMORY),
    FD("lb.cg", lb.cg, 1),
    FD("lb.gd", lb.gd, 1),
    FD("ls.f0", ls.f0, 1),
    FD("ls.dg0", ls.dg0, 1),
    FD("ls.a_prev", ls.a_prev, 1),
    FD("ls.f_prev", ls.f_prev, 1),
    FD("ls.dg_prev", ls.dg_prev, 1),
    FD("ls.a_lo", ls.a_lo, 1),
    FD("ls.f_lo", ls.f_lo, 1),
    FD("ls.dg_lo", ls.dg_lo, 1),
    FD("ls.a_hi", ls.a_hi, 1),
    FD("ls.f_hi", ls.f_hi, 1),
    FD("ls.dg_hi", ls.dg_hi, 1),
    FD("ls.alpha", ls.alpha, 1),
    FD("ls.c1", ls.c1, 1),
    FD("ls.c2", ls.c2, 1),
    FD("ls.feps", ls.feps, 1),
    FD("ls.f_best", ls.f_best, 1),
    FI("ls.phase", ls.phase, 1),
    FI("ls.trials", ls.trials, 1),
    FI("ls.max_trials", ls.max_trials, 1),
    FI("ls.pad_", ls.pad_, 1),
};

/* 1 if got and ref agree in every bit; else prints the first differing
 * field (then any other byte) and returns 0. */
static int same_state(const ps_solver *got, const ps_solver *ref, int index, const char *what)
{
    const char *g = (const char *)got, *r = (const char *)ref;
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        const field *F = &fields[f];
        size_t size = F->is_double ? sizeof(double) : sizeof(int);
        for (int i = 0; i < F->count; i++) {
            size_t off = F->off + (size_t)i * size;
            if (memcmp(g + off, r + off, size) == 0)
                continue;
            char name[48];
            if (F->count > 1)
                snprintf(name, sizeof name, "%s[%d]", F->name, i);
            else
                snprintf(name, sizeof name, "%s", F->name);
            if (F->is_double) {
                double a, b;
                memcpy(&a, g + off, sizeof a);
                memcpy(&b, r + off, sizeof b);
                printf("state %d (%s): %s: warp %.17g, sequential %.17g\n", index, what, name, a, b);
            } else {
                int a, b;
                memcpy(&a, g + off, sizeof a);
                memcpy(&b, r + off, sizeof b);
                printf("state %d (%s): %s: warp %d, sequential %d\n", index, what, name, a, b);
            }
            return 0;
        }
    }
    for (size_t off = 0; off < sizeof *got; off++) {
        if (g[off] != r[off]) {
            printf("state %d (%s): byte %zu of ps_solver differs\n", index, what, off);
            return 0;
        }
    }
    return 1;
}

static void warp_direction_bits(void **state)
{
    static const int ms[5] = {1, 3, 8, 17, 32};
    static const char *const kinds[K_KINDS] = {"descent", "negative curvature", "non-finite dot",
                                               "no pairs", "limit"};
    const int n = getenv("PS_GPU_TEST_QUICK") ? NSTATES_QUICK : NSTATES;
    ps_solver *cpu = malloc((size_t)n * sizeof *cpu), *warp = malloc((size_t)n * sizeof *warp);
    double *elapsed = malloc((size_t)n * sizeof *elapsed);
    int *kind = malloc((size_t)n * sizeof *kind), *mem = malloc((size_t)n * sizeof *mem);
    uint64_t seed = 2024;
    for (int i = 0; i < n; i++) {
        /* mostly descent directions; every fourth state a fallback or a stop */
        kind[i] = i % 4 ? K_DESCENT : 1 + (int)(tu_next(&seed) % (K_KINDS - 1));
        mem[i] = ms[tu_next(&seed) % 5];
        make_state(&cpu[i], &elapsed[i], &seed, mem[i], kind[i]);
    }
    memcpy(warp, cpu, (size_t)n * sizeof *cpu);
    for (int i = 0; i < n; i++)
        ps_solver_direction(&cpu[i], elapsed[i]);
    assert_int_equal(td_direction_warp(warp, elapsed, n), 0);

    int bad = 0, trial = 0, steepest = 0, stopped = 0;
    for (int i = 0; i < n; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s, m=%d", kinds[kind[i]], mem[i]);
        if (!same_state(&warp[i], &cpu[i], i, what) && ++bad >= 10)
            break;
        if (cpu[i].phase == PS_PHASE_TRIAL)
            trial++;
        if (cpu[i].phase == PS_PHASE_TRIAL && cpu[i].lb.k == 0)
            steepest++;
        if (cpu[i].phase == PS_PHASE_DONE)
            stopped++;
    }
    printf("%d states: %d line searches begun (%d along steepest descent), %d stopped by a limit, "
           "%d differing\n", n, trial, steepest, stopped, bad);
    assert_int_equal(bad, 0);
    /* every path was taken */
    assert_true(trial - steepest > n / 2);
    assert_true(steepest > n / 20);
    assert_true(stopped > n / 40);
    free(cpu);
    free(warp);
    free(elapsed);
    free(kind);
    free(mem);
}

/*
 * The update decision (ps_solver_update_warp) against ps_solver_update:
 * states of the direction test put in phase UPDATE, the batched dots of
 * random pairs (a kept pair, or one with s.y <= 0 that clears the memory,
 * in one state of eight), and the accepted f below, at or above the
 * tolerances, so that the convergence tests take every branch.
 */
static void warp_update_bits(void **state)
{
    static const int ms[5] = {1, 3, 8, 17, 32};
    const int n = getenv("PS_GPU_TEST_QUICK") ? NSTATES_QUICK : NSTATES;
    ps_solver *cpu = malloc((size_t)n * sizeof *cpu), *warp = malloc((size_t)n * sizeof *warp);
    double *f = malloc((size_t)n * sizeof *f), *red = malloc((size_t)n * TD_RED * sizeof *red);
    uint64_t seed = 77;
    for (int i = 0; i < n; i++) {
        double elapsed;
        const int m = ms[tu_next(&seed) % 5];
        make_state(&cpu[i], &elapsed, &seed, m, K_DESCENT);
        ps_solver_direction(&cpu[i], elapsed); /* a real line search to accept */
        cpu[i].phase = PS_PHASE_UPDATE;
        cpu[i].ls.alpha = tu_uniform(&seed, 0.1, 2.0);
        cpu[i].gnorm0 = 1.0; /* gtol 1e-6: converged when g.g <= 1e-12 */
        double *r = red + (size_t)i * TD_RED;
        for (int q = 0; q < TD_RED; q++)
            r[q] = tu_uniform(&seed, -1.0, 1.0);
        const int ns = ps_lbfgs_next_slot(&cpu[i].lb);
        r[ns] = i % 8 == 7 ? -fabs(r[ns]) : fabs(r[ns]) + 1e-3;  /* s.y */
        r[m + ns] = fabs(r[m + ns]) + 1e-3;                      /* y.y */
        r[4 * m] = tu_uniform(&seed, 0.0, 2.0) * 1e-12; /* g.g */
        if (i % 3 == 0)
            r[4 * m] *= 1e12;
        f[i] = cpu[i].f - tu_uniform(&seed, -1e-9, 1e-3) * fabs(cpu[i].f);
    }
    memcpy(warp, cpu, (size_t)n * sizeof *cpu);
    for (int i = 0; i < n; i++)
        ps_solver_update(&cpu[i], f[i], red + (size_t)i * TD_RED);
    assert_int_equal(td_update_warp(warp, f, red, n), 0);
    int bad = 0, kept = 0, cleared = 0, done = 0;
    for (int i = 0; i < n; i++) {
        if (!same_state(&warp[i], &cpu[i], i, "update") && ++bad >= 10)
            break;
        if (cpu[i].lb.k == 0)
            cleared++;
        else
            kept++;
        if (cpu[i].phase == PS_PHASE_DONE)
            done++;
    }
    printf("%d updates: %d pairs kept, %d memories cleared, %d converged, %d differing\n", n, kept,
           cleared, done, bad);
    assert_int_equal(bad, 0);
    assert_true(cleared > n / 20 && kept > n / 2);
    assert_true(done > 0 && done < n);
    free(cpu);
    free(warp);
    free(f);
    free(red);
}

int main(void)
{
#ifdef PS_TEST_GPU
    if (tu_no_gpu())
        return 77;
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(warp_direction_bits),
        cmocka_unit_test(warp_update_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
