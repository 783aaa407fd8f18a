/*
 * The optimizer's scalar logic: L-BFGS direction in compact form, the
 * strong-Wolfe line search and the stopping tests, as one state machine
 * over phases. Written once, run by the CPU backend and (redundantly, by
 * every block) by the GPU megakernel. Everything here is O(m^2) scalar
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
 */
#ifndef PS_SRC_LBFGS_MATH_H
#define PS_SRC_LBFGS_MATH_H

#include <math.h>
#include <stdint.h>

#include "ps_hd.h"

#define PS_MAX_MEMORY 32 /* largest L-BFGS memory m */
#define PS_MAX_PAST 64   /* largest window of the ftol test */

/* Status values as in persolve.h (duplicated so kernels need no C API). */
#define PS_ST_RUNNING 100
#define PS_ST_CONVERGED 0
#define PS_ST_CONVERGED_FTOL 1
#define PS_ST_MAX_ITERATIONS 2
#define PS_ST_MAX_EVALUATIONS 3
#define PS_ST_TIME_LIMIT 4
#define PS_ST_CANCELLED 5
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

/* ------------------------------------------------------------------------ */
/* Strong-Wolfe line search (Nocedal & Wright, 2nd ed., Alg. 3.5 and 3.6)   */
/* ------------------------------------------------------------------------ */

enum { PS_LS_BRACKET = 0, PS_LS_ZOOM = 1 };
enum { PS_LS_TRY = 0, PS_LS_ACCEPT = 1, PS_LS_FAIL = 2 };

typedef struct ps_linesearch {
    double f0, dg0;                 /* phi(0), phi'(0) < 0 */
    double a_prev, f_prev, dg_prev; /* previous trial (bracketing) */
    double a_lo, f_lo, dg_lo;       /* zoom: best end satisfying decrease */
    double a_hi, f_hi, dg_hi;       /* zoom: other end */
    double alpha;                   /* the trial being evaluated */
    double c1, c2;
    double feps;                    /* absolute noise allowance on f */
    double f_best;                  /* smallest finite phi over the trials */
    int phase, trials, max_trials, pad_;
} ps_linesearch;

/*
 * Minimizer of the cubic interpolating phi and phi' at a and b
 * (Nocedal & Wright eq. 3.59):
 *   d1 = phi'(a) + phi'(b) - 3 (phi(a) - phi(b))/(a - b)
 *   d2 = sign(b - a) sqrt(d1^2 - phi'(a) phi'(b))
 *   x  = b - (b - a) (phi'(b) + d2 - d1)/(phi'(b) - phi'(a) + 2 d2)
 * Returns 0 when it does not exist or is not finite.
 */
PS_HD int ps_cubic_min(double a, double fa, double ga, double b, double fb,
                       double gb, double *x)
{
    double d1 = ga + gb - 3.0 * (fa - fb) / (a - b);
    double disc = d1 * d1 - ga * gb;
    if (!(disc >= 0.0))
        return 0;
    double d2 = sqrt(disc);
    if (b < a)
        d2 = -d2;
    double den = gb - ga + 2.0 * d2;
    if (den == 0.0)
        return 0;
    double r = b - (b - a) * (gb + d2 - d1) / den;
    if (!isfinite(r))
        return 0;
    *x = r;
    return 1;
}

/* Next zoom trial: safeguarded cubic, inside the middle 80% of [lo, hi]. */
PS_HD double ps_ls_zoom_trial(const ps_linesearch *ls)
{
    double lo = ls->a_lo, hi = ls->a_hi;
    double a = fmin(lo, hi), b = fmax(lo, hi), w = b - a;
    double x;
    if (isfinite(ls->f_hi) && isfinite(ls->dg_hi) &&
        ps_cubic_min(lo, ls->f_lo, ls->dg_lo, hi, ls->f_hi, ls->dg_hi, &x) &&
        x >= a + 0.1 * w && x <= b - 0.1 * w)
        return x;
    return 0.5 * (lo + hi); /* bisection */
}

/*
 * feps >= 0 widens the sufficient-decrease test to
 *     phi(alpha) <= phi(0) + c1 alpha phi'(0) + feps
 * (the approximate Wolfe conditions of Hager & Zhang, SIAM J. Optim. 16,
 * 2005, sec. 4), and a trial counts as worse than another only when its f
 * is higher by more than feps: once f's changes along d are below the
 * rounding noise of the float32 objective, the accurate derivative still
 * decides.
 */
PS_HD void ps_ls_begin(ps_linesearch *ls, double f0, double dg0,
                       double alpha0, double c1, double c2, double feps,
                       int max_trials)
{
    ls->f0 = f0;
    ls->dg0 = dg0;
    ls->a_prev = 0.0;
    ls->f_prev = f0;
    ls->f_best = INFINITY;
    ls->dg_prev = dg0;
    ls->a_lo = ls->f_lo = ls->dg_lo = 0.0;
    ls->a_hi = ls->f_hi = ls->dg_hi = 0.0;
    ls->alpha = alpha0;
    ls->c1 = c1;
    ls->c2 = c2;
    ls->feps = feps;
    ls->phase = PS_LS_BRACKET;
    ls->trials = 0;
    ls->max_trials = max_trials;
    ls->pad_ = 0;
}

PS_HD int ps_ls_enter_zoom(ps_linesearch *ls, double alo, double flo,
                           double glo, double ahi, double fhi, double ghi)
{
    ls->phase = PS_LS_ZOOM;
    ls->a_lo = alo;
    ls->f_lo = flo;
    ls->dg_lo = glo;
    ls->a_hi = ahi;
    ls->f_hi = fhi;
    ls->dg_hi = ghi;
    ls->alpha = ps_ls_zoom_trial(ls);
    return PS_LS_TRY;
}

/*
 * Consume phi(alpha) = f and phi'(alpha) = dg for the current trial and
 * decide: ACCEPT (strong Wolfe holds at ls->alpha), TRY (ls->alpha is the
 * next trial) or FAIL (trials exhausted or the interval collapsed). A
 * non-finite f or dg counts as "too far": the step shrinks.
 */
PS_HD int ps_ls_next(ps_linesearch *ls, double f, double dg)
{
    double a = ls->alpha;
    int finite = isfinite(f) && isfinite(dg);
    if (!finite) {
        f = INFINITY;
        dg = INFINITY;
    }
    ls->trials++;
    if (finite && f < ls->f_best)
        ls->f_best = f;
    int armijo = finite && f <= ls->f0 + ls->c1 * a * ls->dg0 + ls->feps;
    int curvature = finite && fabs(dg) <= -ls->c2 * ls->dg0;

    int action;
    if (ls->phase == PS_LS_BRACKET) {
        /* Alg. 3.5 */
        if (!armijo || (ls->trials > 1 && f >= ls->f_prev + ls->feps)) {
            action = ps_ls_enter_zoom(ls, ls->a_prev, ls->f_prev,
                                      ls->dg_prev, a, f, dg);
        } else if (curvature) {
            return PS_LS_ACCEPT;
        } else if (dg >= 0.0) {
            action = ps_ls_enter_zoom(ls, a, f, dg, ls->a_prev, ls->f_prev,
                                      ls->dg_prev);
        } else {
            /* extrapolate: cubic step clipped to [1.1 a, 4 a] */
            double x;
            double lo = 1.1 * a, hi = 4.0 * a;
            if (!ps_cubic_min(ls->a_prev, ls->f_prev, ls->dg_prev, a, f, dg,
                              &x) ||
                x < lo || x > hi)
                x = hi;
            ls->a_prev = a;
            ls->f_prev = f;
            ls->dg_prev = dg;
            ls->alpha = x;
            action = PS_LS_TRY;
        }
    } else {
        /* Alg. 3.6 */
        if (!armijo || f >= ls->f_lo + ls->feps) {
            ls->a_hi = a;
            ls->f_hi = f;
            ls->dg_hi = dg;
        } else {
            if (curvature)
                return PS_LS_ACCEPT;
            if (dg * (ls->a_hi - ls->a_lo) >= 0.0) {
                ls->a_hi = ls->a_lo;
                ls->f_hi = ls->f_lo;
                ls->dg_hi = ls->dg_lo;
            }
            ls->a_lo = a;
            ls->f_lo = f;
            ls->dg_lo = dg;
        }
        double w = fabs(ls->a_hi - ls->a_lo);
        if (w <= 1e-14 * fmax(fabs(ls->a_hi), fabs(ls->a_lo)))
            return PS_LS_FAIL;
        ls->alpha = ps_ls_zoom_trial(ls);
        action = PS_LS_TRY;
    }
    if (ls->trials >= ls->max_trials)
        return PS_LS_FAIL;
    return action;
}

/* ------------------------------------------------------------------------ */
/* L-BFGS direction in compact form                                          */
/* ------------------------------------------------------------------------ */

/*
 * Pairs (s_i, y_i) live in m physical slots of the caller's vector storage;
 * this struct keeps only their dot products, so that the direction needs no
 * vector pass beyond forming d (vector-free L-BFGS: Chen, Wang, Zhou,
 * "Large-scale L-BFGS using MapReduce", NIPS 2014).
 *
 * Compact inverse-Hessian form (Byrd, Nocedal, Schnabel, Math. Prog. 63,
 * 1994, eq. 3.1 / Thm 2.2; Nocedal & Wright 2nd ed. sec. 7.2):
 *
 *   H = gamma I + [S  gamma Y] [ R^-T (D + gamma Y^T Y) R^-1   -R^-T ] [ S^T       ]
 *                              [ -R^-1                          0    ] [ gamma Y^T ]
 *
 * with S, Y the pairs oldest first, R the upper triangle of S^T Y
 * (R_ij = s_i.y_j, i <= j), D = diag(s_i.y_i), gamma = s.y/y.y (newest).
 * With a = S^T g, b = Y^T g:  t = R^-1 a,  p = R^-T ((D + gamma Y^T Y) t - gamma b),
 *
 *   d = -H g = -gamma g - S p + gamma Y t
 *
 * so d is a combination of the basis {s_i, y_i, g} with coefficients
 * (-p_i, gamma t_i, -gamma), and g.d follows from the same dots.
 */
typedef struct ps_lbfgs {
    int m;      /* memory (slots) */
    int k;      /* pairs held, 0..m */
    int newest; /* slot of the newest pair (valid if k > 0) */
    int pad_;
    double sy[PS_MAX_MEMORY][PS_MAX_MEMORY]; /* sy[i][j] = s_i.y_j */
    double yy[PS_MAX_MEMORY][PS_MAX_MEMORY]; /* y_i.y_j */
    double sg[PS_MAX_MEMORY];                /* s_i.g (current g) */
    double yg[PS_MAX_MEMORY];                /* y_i.g */
    double gg;                               /* g.g */
    /* direction d = sum cs_i s_i + cy_i y_i + cg g, and g.d */
    double cs[PS_MAX_MEMORY];
    double cy[PS_MAX_MEMORY];
    double cg;
    double gd;
} ps_lbfgs;

/* Slot the next pair goes into. */
PS_HD int ps_lbfgs_next_slot(const ps_lbfgs *lb)
{
    return lb->k == 0 ? 0 : (lb->newest + 1) % lb->m;
}

/* Steepest descent: d = -g. */
PS_HD void ps_lbfgs_steepest(ps_lbfgs *lb)
{
    for (int i = 0; i < lb->m; i++) {
        lb->cs[i] = 0.0;
        lb->cy[i] = 0.0;
    }
    lb->cg = -1.0;
    lb->gd = -lb->gg;
}

/*
 * Coefficients of d = -H g from the stored dots (formulas above). Falls
 * back to steepest descent (and forgets the pairs) if the result is not a
 * descent direction.
 */
PS_HD void ps_lbfgs_direction(ps_lbfgs *lb)
{
    int k = lb->k, m = lb->m;
    if (k == 0) {
        ps_lbfgs_steepest(lb);
        return;
    }
    int idx[PS_MAX_MEMORY];
    double t[PS_MAX_MEMORY], p[PS_MAX_MEMORY], w[PS_MAX_MEMORY], rd[PS_MAX_MEMORY];
    int first = lb->newest - (k - 1);
    if (first < 0)
        first += m;
    for (int l = 0; l < k; l++) {
        int i = first + l;
        idx[l] = i >= m ? i - m : i;
        rd[l] = 1.0 / lb->sy[idx[l]][idx[l]]; /* 1 / R_ll */
    }
    int nw = lb->newest;
    double gamma = lb->sy[nw][nw] / lb->yy[nw][nw];

    /* t = R^-1 a (back substitution, R upper triangular) */
    for (int l = k - 1; l >= 0; l--) {
        const double *row = lb->sy[idx[l]];
        double acc = lb->sg[idx[l]];
        for (int j = l + 1; j < k; j++)
            acc -= row[idx[j]] * t[j];
        t[l] = acc * rd[l];
    }
    /* w = (D + gamma Y^T Y) t - gamma b */
    for (int l = 0; l < k; l++) {
        const double *row = lb->yy[idx[l]];
        double acc = 0.0;
        for (int j = 0; j < k; j++)
            acc += row[idx[j]] * t[j];
        w[l] = lb->sy[idx[l]][idx[l]] * t[l] + gamma * (acc - lb->yg[idx[l]]);
    }
    /* p = R^-T w (forward substitution, R^T lower triangular) */
    for (int l = 0; l < k; l++) {
        double acc = w[l];
        for (int j = 0; j < l; j++)
            acc -= lb->sy[idx[j]][idx[l]] * p[j];
        p[l] = acc * rd[l];
    }
    for (int i = 0; i < m; i++) {
        lb->cs[i] = 0.0;
        lb->cy[i] = 0.0;
    }
    double gd = -gamma * lb->gg;
    for (int l = 0; l < k; l++) {
        lb->cs[idx[l]] = -p[l];
        lb->cy[idx[l]] = gamma * t[l];
        gd += -p[l] * lb->sg[idx[l]] + gamma * t[l] * lb->yg[idx[l]];
    }
    lb->cg = -gamma;
    lb->gd = gd;
    if (!(gd < 0.0) || !isfinite(gd)) {
        lb->k = 0;
        ps_lbfgs_steepest(lb);
    }
}

/*
 * Layout of the batched reduction after a step, for the pair staged in
 * slot ns = ps_lbfgs_next_slot() (s, y already written there) and the new
 * gradient g, over all m slots i (slots not in use are reduced too and
 * ignored):
 *   red[i]       = s_i . y_ns
 *   red[m + i]   = y_i . y_ns
 *   red[2m + i]  = s_i . g
 *   red[3m + i]  = y_i . g
 *   red[4m]      = g . g
 */
#define PS_RED_LEN(m) (4 * (m) + 1)

/*
 * Take in the reduced dots. The pair is kept if s.y > 0 (it is, under
 * strong Wolfe, up to rounding); otherwise the memory is cleared.
 */
PS_HD void ps_lbfgs_push(ps_lbfgs *lb, const double *red)
{
    int m = lb->m, ns = ps_lbfgs_next_slot(lb);
    double sy = red[ns], yy = red[m + ns];
    if (sy > 0.0 && yy > 0.0 && isfinite(sy) && isfinite(yy)) {
        for (int i = 0; i < m; i++) {
            lb->sy[i][ns] = red[i];
            lb->yy[i][ns] = red[m + i];
            lb->yy[ns][i] = red[m + i];
        }
        lb->newest = ns;
        if (lb->k < m)
            lb->k++;
    } else {
        lb->k = 0;
    }
    for (int i = 0; i < m; i++) {
        lb->sg[i] = red[2 * m + i];
        lb->yg[i] = red[3 * m + i];
    }
    lb->gg = red[4 * m];
}

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
} ps_solver;

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
}

PS_HD void ps_solver_finish(ps_solver *s, int status)
{
    if (s->phase != PS_PHASE_DONE)
        s->resume_phase = s->phase;
    s->status = status;
    s->phase = PS_PHASE_DONE;
}

/*
 * Undo a finish by a limit (iterations, evaluations, time) or a cancel:
 * the solve continues at the phase it stopped in, exactly as if it had
 * never stopped (the limits are checked again there). Returns 1 if the
 * state was reopened.
 */
PS_HD int ps_solver_reopen(ps_solver *s)
{
    int st = s->status;
    if (s->phase != PS_PHASE_DONE ||
        !(st == PS_ST_MAX_ITERATIONS || st == PS_ST_MAX_EVALUATIONS || st == PS_ST_TIME_LIMIT ||
          st == PS_ST_CANCELLED) ||
        !(s->resume_phase == PS_PHASE_DIRECTION || s->resume_phase == PS_PHASE_TRIAL ||
          s->resume_phase == PS_PHASE_UPDATE))
        return 0;
    s->phase = s->resume_phase;
    s->status = PS_ST_RUNNING;
    return 1;
}

/* START: f and g.g at x0 (one evaluation done). */
PS_HD void ps_solver_start(ps_solver *s, double f, double gg)
{
    s->evaluations = 1;
    s->f = f;
    s->gnorm = sqrt(gg);
    s->gnorm0 = s->gnorm;
    s->lb.gg = gg;
    s->fhist[0] = f;
    if (!isfinite(f) || !isfinite(gg)) {
        ps_solver_finish(s, PS_ST_ERR_OBJECTIVE);
        return;
    }
    if (s->gnorm == 0.0) {
        ps_solver_finish(s, PS_ST_CONVERGED);
        return;
    }
    s->phase = PS_PHASE_DIRECTION;
}

/*
 * DIRECTION: the limits that are checked between iterations, then the
 * coefficients of d and the first trial step: 1/||g|| on the first
 * iteration (a unit-length step), 1 afterwards (N&W sec. 3.5).
 */
PS_HD void ps_solver_direction(ps_solver *s, double elapsed)
{
    if (s->max_iterations > 0 && s->iteration >= s->max_iterations) {
        ps_solver_finish(s, PS_ST_MAX_ITERATIONS);
        return;
    }
    if (s->max_evaluations > 0 && s->evaluations >= s->max_evaluations) {
        ps_solver_finish(s, PS_ST_MAX_EVALUATIONS);
        return;
    }
    if (s->time_limit > 0.0 && elapsed >= s->time_limit) {
        ps_solver_finish(s, PS_ST_TIME_LIMIT);
        return;
    }
    ps_lbfgs_direction(&s->lb);
    double alpha0 = s->lb.k == 0 ? 1.0 / s->gnorm : 1.0;
    ps_ls_begin(&s->ls, s->f, s->lb.gd, alpha0, s->c1, s->c2,
                s->fnoise * fabs(s->f), s->max_ls);
    s->phase = PS_PHASE_TRIAL;
}

/* TRIAL: phi(alpha) and phi'(alpha) = g_t.d at the trial point. */
PS_HD void ps_solver_trial(ps_solver *s, double f, double dg)
{
    s->evaluations++;
    int a = ps_ls_next(&s->ls, f, dg);
    if (a == PS_LS_ACCEPT) {
        s->phase = PS_PHASE_UPDATE;
        return;
    }
    if (a == PS_LS_FAIL) {
        /* No trial lowered f by more than its noise allowance: f cannot be
         * decreased at the objective's precision, which is convergence in
         * the sense of the decrease test; any other failure is an error. */
        if (s->iteration > 0 && s->ls.feps > 0.0 && s->ls.f_best >= s->f - s->ls.feps)
            ps_solver_finish(s, PS_ST_CONVERGED_FTOL);
        else
            ps_solver_finish(s, PS_ST_ERR_LINE_SEARCH);
        return;
    }
    if (s->max_evaluations > 0 && s->evaluations >= s->max_evaluations)
        ps_solver_finish(s, PS_ST_MAX_EVALUATIONS);
}

/*
 * UPDATE: the accepted point's f and the batched dots (PS_RED_LEN layout).
 * Then the stopping tests:
 *   gradient:  ||g_k|| <= gtol ||g_0||
 *   decrease:  f_{k-past} - f_k <= max(ftol, fnoise) max(|f_k|, 1e-300)
 *              (k >= past, ftol > 0): a decrease below the objective's
 *              noise allowance is no decrease
 */
PS_HD void ps_solver_update(ps_solver *s, double f, const double *red)
{
    ps_lbfgs_push(&s->lb, red);
    s->step = s->ls.alpha;
    s->f = f;
    s->gnorm = sqrt(s->lb.gg);
    s->iteration++;
    s->fhist[s->iteration % (s->past + 1)] = f;
    if (s->gnorm <= s->gtol * s->gnorm0) {
        ps_solver_finish(s, PS_ST_CONVERGED);
        return;
    }
    if (s->iteration >= s->past) {
        double fold = s->fhist[(s->iteration - s->past) % (s->past + 1)];
        if (s->ftol > 0.0 && fold - f <= fmax(s->ftol, s->fnoise) * fmax(fabs(f), 1e-300)) {
            ps_solver_finish(s, PS_ST_CONVERGED_FTOL);
            return;
        }
    }
    s->phase = PS_PHASE_DIRECTION;
}

#endif /* PS_SRC_LBFGS_MATH_H */
