/*
 * Asynchronous runs (persolve.h ps_run_*): the handle, its worker thread
 * and the control protocol. Internal helpers shared with opt/backend.c.
 */
#ifndef PS_SRC_RUN_H
#define PS_SRC_RUN_H

#include "persolve.h"

/* opt/backend.c: options to use (o, or the defaults when NULL), validated. */
int ps_take_options(const ps_options *o, ps_options *out);

/* opt/backend.c: PS_ERR_NONFINITE (logged) if x[n] has a NaN or Inf. */
int ps_check_x(const ps_options *o, const double *x, size_t n);

/*
 * opt/backend.c: which backend runs: cpu, gpu, or auto (the GPU when it can run
 * the solve, else the CPU, noted in *fell_back).
 */
int ps_pick_backend(const ps_options *o, ps_backend *use, int *fell_back);

/* opt/backend.c: "cpu: N threads, float32 spins" for ps_result.device. */
void ps_cpu_device(const ps_options *o, char *buf, size_t len);

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

/* opt/backend.c: GPU statuses after which backend auto may run on the CPU. */
int ps_gpu_can_fall_back(int st);

#endif /* PS_SRC_RUN_H */
