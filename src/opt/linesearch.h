/*
 * The strong-Wolfe line search of the optimizer as a state machine over
 * trials (one evaluation each): bracketing, then zoom with a safeguarded
 * cubic. Scalar work only, written once for both backends.
 */
#ifndef PS_SRC_OPT_LINESEARCH_H
#define PS_SRC_OPT_LINESEARCH_H

#include <math.h>

#include "common/ps_hd.h"

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

#endif /* PS_SRC_OPT_LINESEARCH_H */
