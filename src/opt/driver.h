/*
 * L-BFGS with a strong-Wolfe line search on the CPU, for any objective with
 * a gradient: the driver that runs the phases of opt/solver.h.
 *
 * The driver's whole state lives in a ps_driver, advanced one phase at a
 * time by ps_driver_step(). Between two steps the state is complete (no
 * vector work is half done), so a run can stop there, be copied out
 * (opt/checkpoint.h) and continue later, bit-identically.
 */
#ifndef PS_SRC_MINIMIZE_H
#define PS_SRC_MINIMIZE_H

#include <stddef.h>

#include "opt/solver.h"
#include "persolve.h"

/* f and g = grad f at x[n] with the constraints' penalty at weight mu
 * (opt/solver.h, penalty rounds; objectives without such constraints
 * ignore mu), and *viol, the largest relative violation at x (0 when none
 * or met); returns 0 or a ps_status error. */
typedef int (*ps_objective_fn)(void *ctx, const double *x, double mu, double *f,
                               double *g, double *viol);

typedef struct ps_minimizer {
    size_t n;              /* number of variables */
    int constrained;       /* 1: eval has constraints met by penalty (penalty rounds
                              with the options' max_rounds, constraint_tol, penalty_mu) */
    ps_objective_fn eval;  /* the objective */
    void *ctx;             /* passed to eval */
    /* optional: called for every accepted step with the line search state
     * (f0, dg0, alpha) and phi(alpha), phi'(alpha) */
    void (*on_accept)(void *ctx, const ps_linesearch *ls, double f, double dg);
    void *ctx_accept;
    double mu0;            /* the first round's penalty weight (constrained; 0: the options'
                              penalty_mu) */
} ps_minimizer;

/* A suspendable solve: the solver state machine and its vectors. */
typedef struct ps_driver {
    ps_minimizer mz;       /* the objective (copied) */
    const ps_options *o;   /* progress callback (borrowed, may be swapped) */
    size_t n;              /* number of variables */
    int m;                 /* memory */
    int error;             /* a ps_status error that ended the solve, or 0 */
    ps_solver s;           /* the scalar state machine */
    double *x, *g;         /* [n] current point and gradient (optimizer variables) */
    double *xt, *gt;       /* [n] trial point and gradient */
    double *d;             /* [n] search direction */
    double *S, *Y;         /* [m][n] pairs s_i = x_{i+1} - x_i, y_i = g_{i+1} - g_i */
    double *red;           /* [4m+1] batched dots (scratch) */
    double ft;             /* f at the trial point, carried from TRIAL to UPDATE */
    ps_progress *history;  /* [history_len] one row per completed iteration */
    size_t history_len, hist_cap;
    double elapsed;        /* s of solve time before the running segment */
    double t0;             /* monotonic start of the running segment; < 0: stopped */
} ps_driver;

/*
 * Allocate the vectors for mz->n variables and o->memory pairs, copy the
 * start point x0[n] and set the solver to START with o's settings. The
 * clock is stopped (ps_driver_clock_start). On error (PS_ERR_NO_MEMORY)
 * nothing needs freeing, but ps_driver_free is harmless.
 */
int ps_driver_init(ps_driver *c, const ps_minimizer *mz, const ps_options *o,
                   const double *x0);

/* Room for `rows` history rows (the length is the caller's); 0 or
 * PS_ERR_NO_MEMORY. */
int ps_driver_history_reserve(ps_driver *c, size_t rows);

/* Release the vectors and the history; c may be partly initialized. */
void ps_driver_free(ps_driver *c);

/* 1 once the solver reached DONE. */
static inline int ps_driver_done(const ps_driver *c)
{
    return c->s.phase == PS_PHASE_DONE;
}

/*
 * Run one phase (START, DIRECTION, TRIAL or UPDATE) with its vector work.
 * An objective error ends the solve with that status (c->error).
 */
void ps_driver_step(ps_driver *c);

/* End the solve now with PS_CANCELLED at the last accepted point. */
void ps_driver_cancel(ps_driver *c);

/* Solve time: counts only while the clock runs (not across pauses). */
void ps_driver_clock_start(ps_driver *c);
void ps_driver_clock_stop(ps_driver *c);
double ps_driver_seconds(const ps_driver *c);

/*
 * The outcome of a DONE driver: status, iterations, evaluations, f, gnorm,
 * seconds into r (other fields untouched) and the best point into x[n]
 * (left unchanged when the solve ended with an error before a result).
 * The history is not touched. Returns the status.
 */
int ps_driver_outcome(const ps_driver *c, ps_result *r, double *x);

/*
 * Minimize from x[n] (in: start, out: best point). Options are used as
 * validated by the caller (memory, tolerances, limits, progress callback).
 * Fills r (status, iterations, evaluations, f, gnorm, seconds, history;
 * the other fields are left as they are) and returns r->status.
 */
int ps_minimize_cpu(const ps_minimizer *mz, const ps_options *o, double *x,
                    ps_result *r);

#endif /* PS_SRC_MINIMIZE_H */
