/*
 * L-BFGS with a strong-Wolfe line search on the CPU, for any objective with
 * a gradient: the driver that runs the phases of lbfgs_math.h.
 */
#ifndef PS_SRC_MINIMIZE_H
#define PS_SRC_MINIMIZE_H

#include <stddef.h>

#include "lbfgs_math.h"
#include "persolve.h"

/* f and g = grad f at x[n]; returns 0 or a ps_status error. */
typedef int (*ps_objective_fn)(void *ctx, const double *x, double *f,
                               double *g);

typedef struct ps_minimizer {
    size_t n;              /* number of variables */
    ps_objective_fn eval;  /* the objective */
    void *ctx;             /* passed to eval */
    /* optional: called for every accepted step with the line search state
     * (f0, dg0, alpha) and phi(alpha), phi'(alpha) */
    void (*on_accept)(void *ctx, const ps_linesearch *ls, double f, double dg);
    void *ctx_accept;
} ps_minimizer;

/*
 * Minimize from x[n] (in: start, out: best point). Options are used as
 * validated by the caller (memory, tolerances, limits, progress callback).
 * Fills r (status, iterations, evaluations, f, gnorm, seconds, history;
 * the other fields are left as they are) and returns r->status.
 */
int ps_minimize_cpu(const ps_minimizer *mz, const ps_options *o, double *x,
                    ps_result *r);

#endif /* PS_SRC_MINIMIZE_H */
