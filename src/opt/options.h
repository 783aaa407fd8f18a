/* Internal helpers over ps_options shared by the backends. */
#ifndef PS_SRC_OPTIONS_H
#define PS_SRC_OPTIONS_H

#include "persolve.h"

/* The penalty rounds' defaults (ps_options). */
#define PS_DEFAULT_MAX_ROUNDS 8
#define PS_DEFAULT_CONSTRAINT_TOL 1e-3
#define PS_DEFAULT_PENALTY_MU 1.0

/* The line search's relative noise allowance (ps_options.fnoise, or its
 * automatic value for the precision). */
double ps_options_fnoise(const ps_options *o);

/* The penalty rounds' settings, defaults in place of 0. */
int ps_options_max_rounds(const ps_options *o);
double ps_options_constraint_tol(const ps_options *o);
double ps_options_penalty_mu(const ps_options *o);
/* The first round's penalty weight for p: penalty_mu in units of the
 * loss's scale, mu0 = penalty_mu sum_j w_j (model/problem.h,
 * ps_problem_loss_scale; docs/algorithm.md). */
double ps_penalty_mu0(const ps_problem *p, const ps_options *o);

#endif /* PS_SRC_OPTIONS_H */
