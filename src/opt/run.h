/*
 * Asynchronous runs (persolve.h ps_run_*): the handle, its worker thread
 * and the control protocol.
 */
#ifndef PS_SRC_RUN_H
#define PS_SRC_RUN_H

#include "persolve.h"

/*
 * Start a CPU run of problem p from the pulse x0[nx] with validated
 * options o; fell_back is copied into the results. *out is NULL on error.
 */
int ps_run_start_cpu(const ps_problem *p, const ps_options *o,
                     const double *x0, int fell_back, ps_run **out);

/*
 * Start a GPU run (persistent kernel with control points) of p from the
 * pulse x0[nx] with validated options o. *out is NULL on error.
 */
int ps_run_start_gpu(const ps_problem *p, const ps_options *o,
                     const double *x0, ps_run **out);

#endif /* PS_SRC_RUN_H */
