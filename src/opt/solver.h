/*
 * The optimizer's scalar logic: L-BFGS direction in compact form, the
 * strong-Wolfe line search and the stopping tests, as one state machine
 * over phases. Written once, run by the CPU backend and (redundantly, by
 * every block) by the GPU megakernel, the direction's coefficients there
 * by one warp (ps_solver_direction_warp). Everything here is O(m^2) scalar
 * work; the O(n) vector work (evaluations, the batched dot products, the
 * vector updates) is the caller's, at the points the phases name.
 *
 * Phases of one solve:
 *   START      caller evaluates f, g at x0 and g.g      -> ps_solver_start
 *   DIRECTION  ps_solver_direction (stops, coefficients) -> caller forms d
 *   TRIAL      caller evaluates at x + alpha d, g_t.d    -> ps_solver_trial
 *   UPDATE     caller stores s = x_t - x, y = g_t - g, moves x, g and
 *              reduces the batched dots                  -> ps_solver_update
 *   DONE       status holds the outcome
 *
 * Penalty rounds (SPEC 1.3, model/constraints.h). With constraints met by
 * penalty the objective is F + mu P at the round's weight mu, and every
 * evaluation also gives the largest relative violation at its point.
 * When a round's solve stops by a convergence test (gradient, decrease,
 * or no decrease above the noise) with the current point violating by
 * more than ctol, and rounds remain, mu grows x10, the L-BFGS memory is
 * cleared and the phase goes back to START: the caller evaluates the
 * current point again (under the new mu; no history row is recorded for
 * it, the next iteration's row carries the new round), and the next
 * round's tests count from there. The last round ending with a violation
 * above ctol ends with PS_ST_CONSTRAINT_VIOLATED.
 */
#ifndef PS_SRC_OPT_SOLVER_H
#define PS_SRC_OPT_SOLVER_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "common/ps_hd.h"

#define PS_MAX_PAST 64   /* largest window of the ftol test */

/* Status values as in persolve.h (duplicated so kernels need no C API). */
#define PS_ST_RUNNING 100
#define PS_ST_CONVERGED 0
#define PS_ST_CONVERGED_FTOL 1
#define PS_ST_MAX_ITERATIONS 2
#define PS_ST_MAX_EVALUATIONS 3
#define PS_ST_TIME_LIMIT 4
#define PS_ST_CANCELLED 5
#define PS_ST_CONSTRAINT_VIOLATED 8
#define PS_ST_ERR_LINE_SEARCH (-10)
#define PS_ST_ERR_OBJECTIVE (-11)

enum ps_phase {
    PS_PHASE_START = 0,
    PS_PHASE_DIRECTION = 1,
    PS_PHASE_TRIAL = 2,
    PS_PHASE_UPDATE = 3,
    PS_PHASE_DONE = 4,
};

/*
 * One coordinate of the trial point x + alpha d, rounded once (a fused
 * multiply-add). Every backend and every phase that needs the trial point
 * (the evaluation, the gradient's chain rule, the accepted step) computes it
 * here: left to the compiler, a*b + c is contracted or not depending on the
 * surrounding code, and two GPU kernels would evaluate points an ulp apart.
 */
PS_HD double ps_trial_coord(double x, double alpha, double d)
{
#ifdef __CUDA_ARCH__
    return __fma_rn(alpha, d, x);
#else
    return fma(alpha, d, x);
#endif
}

#include "opt/lbfgs.h"
#include "opt/lbfgs_warp.h"
#include "opt/linesearch.h"

/* ------------------------------------------------------------------------ */
/* The solver state machine                                                 */
/* ------------------------------------------------------------------------ */

typedef struct ps_solver {
    /* settings */
    int m, past, max_ls, phase;
    int64_t max_iterations, max_evaluations; /* 0 = unlimited */
    double gtol, ftol, c1, c2, time_limit;   /* time_limit 0 = none */
    double fnoise;                           /* relative noise of f (line search) */
    /* progress */
    int status;
    int resume_phase; /* the phase a finish interrupted (a limit or a cancel
                         can be lifted there: checkpoints continue from it) */
    int64_t iteration, evaluations;
    double f, gnorm, gnorm0, step;
    double fhist[PS_MAX_PAST + 1]; /* f after iteration i at [i % (past+1)] */
    ps_lbfgs lb;
    ps_linesearch ls;
    /* penalty rounds (appended: the state of format 1 checkpoints is the
     * prefix up to here, opt/checkpoint.c) */
    int constrained;    /* 1: the objective has constraints met by penalty */
    int round;          /* the current round, 0 .. max_rounds - 1 */
    int max_rounds;
    int restart;        /* 1: START evaluates the current point for a new round */
    int64_t round_iter; /* the iteration the current round began at */
    double mu;          /* penalty weight of the round */
    double ctol;        /* relative violation a round may end with */
    double viol;        /* largest relative violation at the current point */
    double viol_t;      /* the same at the last trial point */
} ps_solver;

/* The size of the state without the penalty rounds (checkpoint format 1). */
#define PS_SOLVER_SIZE_V1 offsetof(ps_solver, constrained)

PS_HD void ps_solver_init(ps_solver *s, int m, int past, int max_ls,
                          int64_t max_iterations, int64_t max_evaluations,
                          double gtol, double ftol, double c1, double c2,
                          double time_limit, double fnoise)
{
    s->m = m;
    s->past = past;
    s->max_ls = max_ls;
    s->phase = PS_PHASE_START;
    s->max_iterations = max_iterations;
    s->max_evaluations = max_evaluations;
    s->gtol = gtol;
    s->ftol = ftol;
    s->c1 = c1;
    s->c2 = c2;
    s->time_limit = time_limit;
    s->fnoise = fnoise;
    s->status = PS_ST_RUNNING;
    s->resume_phase = PS_PHASE_START;
    s->iteration = 0;
    s->evaluations = 0;
    s->f = 0.0;
    s->gnorm = 0.0;
    s->gnorm0 = 0.0;
    s->step = 0.0;
    for (int i = 0; i <= PS_MAX_PAST; i++)
        s->fhist[i] = 0.0;
    s->lb.m = m;
    s->lb.k = 0;
    s->lb.newest = 0;
    s->lb.pad_ = 0;
    for (int i = 0; i < PS_MAX_MEMORY; i++) {
        for (int j = 0; j < PS_MAX_MEMORY; j++) {
            s->lb.sy[i][j] = 0.0;
            s->lb.yy[i][j] = 0.0;
        }
        s->lb.sg[i] = s->lb.yg[i] = s->lb.cs[i] = s->lb.cy[i] = 0.0;
    }
    s->lb.gg = s->lb.cg = s->lb.gd = 0.0;
    ps_ls_begin(&s->ls, 0.0, 0.0, 0.0, c1, c2, 0.0, max_ls);
    /* no penalty rounds (ps_solver_set_rounds) */
    s->constrained = s->round = s->restart = 0;
    s->max_rounds = 1;
    s->round_iter = 0;
    s->mu = s->ctol = s->viol = s->viol_t = 0.0;
}

/* Penalty rounds for an objective with constraints met by penalty: at
 * most max_rounds rounds, the first at weight mu0, each ending when the
 * violation is at most ctol (a state of ps_solver_init has none). */
PS_HD void ps_solver_set_rounds(ps_solver *s, int max_rounds, double ctol, double mu0)
{
    s->constrained = 1;
    s->max_rounds = max_rounds;
    s->ctol = ctol;
    s->mu = mu0;
}

PS_HD void ps_solver_finish(ps_solver *s, int status)
{
    if (s->phase != PS_PHASE_DONE)
        s->resume_phase = s->phase;
    s->status = status;
    s->phase = PS_PHASE_DONE;
}

/*
 * A convergence test passed (status PS_ST_CONVERGED or _FTOL): the solve
 * ends, or, with a violation above ctol and rounds left, the next round
 * begins at the current point (mu x10, memory cleared, phase START).
 */
PS_HD void ps_solver_converged(ps_solver *s, int status)
{
    if (!s->constrained || !(s->viol > s->ctol)) {
        ps_solver_finish(s, status);
        return;
    }
    if (s->round + 1 >= s->max_rounds) {
        ps_solver_finish(s, PS_ST_CONSTRAINT_VIOLATED);
        return;
    }
    s->round++;
    s->mu *= 10.0;
    s->lb.k = 0;
    s->lb.newest = 0;
    s->restart = 1;
    s->phase = PS_PHASE_START;
}

/* The round the current point's f belongs to (a history row's): the
 * update that begins a new round leaves f of the round before. */
PS_HD int ps_solver_row_round(const ps_solver *s)
{
    return s->restart ? s->round - 1 : s->round;
}

/*
 * Undo a finish by a limit (iterations, evaluations, time) or a cancel:
 * the solve continues at the phase it stopped in, exactly as if it had
 * never stopped (the limits are checked again there). A cancel may come
 * before the start point's evaluation was taken (START, also that of a
 * new penalty round): the solve then begins again, at the same point. Returns 1 if the state was reopened.
 */
PS_HD int ps_solver_reopen(ps_solver *s)
{
    int st = s->status, rp = s->resume_phase;
    if (s->phase != PS_PHASE_DONE ||
        !(st == PS_ST_MAX_ITERATIONS || st == PS_ST_MAX_EVALUATIONS || st == PS_ST_TIME_LIMIT ||
          st == PS_ST_CANCELLED) ||
        !(rp == PS_PHASE_DIRECTION || rp == PS_PHASE_TRIAL || rp == PS_PHASE_UPDATE ||
          (rp == PS_PHASE_START && st == PS_ST_CANCELLED && (s->iteration == 0 || s->restart))))
        return 0;
    s->phase = s->resume_phase;
    s->status = PS_ST_RUNNING;
    return 1;
}

/* The iteration, evaluation and time limits (elapsed: the solve's seconds
 * so far): the state finished (returns 1) if one is reached. */
PS_HD int ps_solver_stop_limits(ps_solver *s, double elapsed)
{
    if (s->max_iterations > 0 && s->iteration >= s->max_iterations) {
        ps_solver_finish(s, PS_ST_MAX_ITERATIONS);
        return 1;
    }
    if (s->max_evaluations > 0 && s->evaluations >= s->max_evaluations) {
        ps_solver_finish(s, PS_ST_MAX_EVALUATIONS);
        return 1;
    }
    if (s->time_limit > 0.0 && elapsed >= s->time_limit) {
        ps_solver_finish(s, PS_ST_TIME_LIMIT);
        return 1;
    }
    return 0;
}

/*
 * A state under new limits (a checkpoint resumed with other options): a
 * trial already at the iteration, evaluation or time limit (elapsed: the
 * solve's seconds so far) finishes there, as an uninterrupted run with
 * those limits would have (the other phases check the limits before they
 * evaluate; a trial evaluates first). A later lift continues the trial
 * (ps_solver_reopen). Returns 1 if it finished the state.
 */
PS_HD int ps_solver_limits_reached(ps_solver *s, double elapsed)
{
    return s->phase == PS_PHASE_TRIAL && ps_solver_stop_limits(s, elapsed);
}

/*
 * START: f, g.g and the violation at x0, or at the current point when a
 * round begins (s->restart; the caller records a history row only when
 * it was not set). One evaluation done.
 */
PS_HD void ps_solver_start(ps_solver *s, double f, double gg, double viol)
{
    s->evaluations++;
    s->f = f;
    s->gnorm = sqrt(gg);
    s->gnorm0 = s->gnorm;
    s->lb.gg = gg;
    s->viol = viol;
    s->restart = 0;
    s->round_iter = s->iteration;
    s->fhist[s->iteration % (s->past + 1)] = f;
    if (!isfinite(f) || !isfinite(gg)) {
        ps_solver_finish(s, PS_ST_ERR_OBJECTIVE);
        return;
    }
    if (s->gnorm == 0.0) {
        ps_solver_converged(s, PS_ST_CONVERGED);
        return;
    }
    s->phase = PS_PHASE_DIRECTION;
}

/*
 * DIRECTION: the limits that are checked between iterations, then the
 * coefficients of d and the first trial step: 1/||g|| on the first
 * iteration (a unit-length step), 1 afterwards (N&W sec. 3.5). In three
 * parts, so that a warp can take the middle one (ps_solver_direction_warp).
 */

/* The limits; returns 1 if the solve goes on (else it is DONE). */
PS_HD int ps_solver_direction_limits(ps_solver *s, double elapsed)
{
    return !ps_solver_stop_limits(s, elapsed);
}

/* The line search along d, from the coefficients' g.d. */
PS_HD void ps_solver_direction_begin(ps_solver *s)
{
    double alpha0 = s->lb.k == 0 ? 1.0 / s->gnorm : 1.0;
    ps_ls_begin(&s->ls, s->f, s->lb.gd, alpha0, s->c1, s->c2,
                s->fnoise * fabs(s->f), s->max_ls);
    s->phase = PS_PHASE_TRIAL;
}

PS_HD void ps_solver_direction(ps_solver *s, double elapsed)
{
    if (!ps_solver_direction_limits(s, elapsed))
        return;
    ps_lbfgs_direction(&s->lb);
    ps_solver_direction_begin(s);
}

#ifdef PS_HAVE_WARP
/*
 * ps_solver_direction by one warp, bit for bit (all 32 lanes call it,
 * converged; lane 0's elapsed counts): lane 0 takes the limits and begins
 * the line search, the warp computes the coefficients. Ends with the warp
 * converged; the caller places the barrier before other warps read s.
 */
PS_WARP_FN void ps_solver_direction_warp(ps_solver *s, double elapsed)
{
    int go = 0;
    if (PS_LANE() == 0)
        go = ps_solver_direction_limits(s, elapsed);
    if (PS_SHFL(go, 0)) {
        ps_lbfgs_direction_warp(&s->lb);
        if (PS_LANE() == 0)
            ps_solver_direction_begin(s);
    }
    PS_SYNCWARP();
}
#endif /* PS_HAVE_WARP */

/* TRIAL: phi(alpha), phi'(alpha) = g_t.d and the violation at the trial
 * point. */
PS_HD void ps_solver_trial(ps_solver *s, double f, double dg, double viol)
{
    s->evaluations++;
    s->viol_t = viol;
    int a = ps_ls_next(&s->ls, f, dg);
    if (a == PS_LS_ACCEPT) {
        s->phase = PS_PHASE_UPDATE;
        return;
    }
    if (a == PS_LS_FAIL) {
        /* No trial lowered f by more than its noise allowance: f cannot be
         * decreased at the objective's precision, which is convergence in
         * the sense of the decrease test; any other failure is an error. */
        if (s->iteration > s->round_iter && s->ls.feps > 0.0 && s->ls.f_best >= s->f - s->ls.feps)
            ps_solver_converged(s, PS_ST_CONVERGED_FTOL);
        else
            ps_solver_finish(s, PS_ST_ERR_LINE_SEARCH);
        return;
    }
    if (s->max_evaluations > 0 && s->evaluations >= s->max_evaluations)
        ps_solver_finish(s, PS_ST_MAX_EVALUATIONS);
}

/*
 * The tolerance of a stopping test, tol, or, while the current point
 * violates a constraint and rounds remain, the looser loose 10^-round
 * when larger: an inexact inner solve, tightened round by round as the
 * weight grows (Conn, Gould and Toint 1991; Nocedal and Wright 2006,
 * 17.4), so that a round whose weight is still too small to meet the
 * constraints does not spend the iterations of a full solve.
 */
#define PS_ROUND_GTOL 1e-2 /* a violated round's gradient test, first round */
#define PS_ROUND_FTOL 1e-3 /* and its decrease test */
PS_HD double ps_solver_round_tol(const ps_solver *s, double tol, double loose)
{
    if (!s->constrained || !(s->viol > s->ctol) || s->round + 1 >= s->max_rounds)
        return tol;
    for (int r = 0; r < s->round; r++)
        loose *= 0.1;
    return fmax(tol, loose);
}

/*
 * UPDATE: the accepted point's f and the batched dots (PS_RED_LEN layout);
 * its violation is the trial's. Then the stopping tests, within the round
 * (g_0, k counted from the round's start r):
 *   gradient:  ||g_k|| <= gtol ||g_0||
 *   decrease:  f_{k-past} - f_k <= max(ftol, fnoise) max(|f_k|, 1e-300)
 *              (k - r >= past, ftol > 0): a decrease below the objective's
 *              noise allowance is no decrease
 */
PS_HD void ps_solver_update_tests(ps_solver *s, double f)
{
    s->step = s->ls.alpha;
    s->f = f;
    s->gnorm = sqrt(s->lb.gg);
    s->viol = s->viol_t;
    s->iteration++;
    s->fhist[s->iteration % (s->past + 1)] = f;
    if (s->gnorm <= ps_solver_round_tol(s, s->gtol, PS_ROUND_GTOL) * s->gnorm0) {
        ps_solver_converged(s, PS_ST_CONVERGED);
        return;
    }
    if (s->iteration - s->round_iter >= s->past) {
        double fold = s->fhist[(s->iteration - s->past) % (s->past + 1)];
        const double ftol = ps_solver_round_tol(s, s->ftol, PS_ROUND_FTOL);
        if (ftol > 0.0 && fold - f <= fmax(ftol, s->fnoise) * fmax(fabs(f), 1e-300)) {
            ps_solver_converged(s, PS_ST_CONVERGED_FTOL);
            return;
        }
    }
    s->phase = PS_PHASE_DIRECTION;
}

PS_HD void ps_solver_update(ps_solver *s, double f, const double *red)
{
    ps_lbfgs_push(&s->lb, red);
    ps_solver_update_tests(s, f);
}

#ifdef PS_HAVE_WARP
/*
 * ps_solver_update by one warp, bit for bit (the entries are copies):
 * lane i < m takes pair i's dots, lane 0 the rest. All 32 lanes call it.
 */
PS_WARP_FN void ps_solver_update_warp(ps_solver *s, double f, const double *red)
{
    ps_lbfgs *lb = &s->lb;
    const int ns = ps_lbfgs_next_slot(lb), keep = ps_lbfgs_push_keeps(lb, red), i = PS_LANE();
    if (i < lb->m)
        ps_lbfgs_push_entry(lb, red, ns, keep, i);
    PS_SYNCWARP(); /* every lane has read newest and k */
    if (i == 0) {
        ps_lbfgs_push_finish(lb, red, ns, keep);
        ps_solver_update_tests(s, f);
    }
    PS_SYNCWARP();
}
#endif

#endif /* PS_SRC_OPT_SOLVER_H */
