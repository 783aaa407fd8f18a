/*
 * The backend choice and the checks every entry point makes first
 * (opt/backend.c), shared by the entry points (lib.c), asynchronous runs
 * (opt/run.c) and tuning (tune/tune.c).
 */
#ifndef PS_SRC_BACKEND_H
#define PS_SRC_BACKEND_H

#include <stddef.h>

#include "persolve.h"

/* Options to use (o, or the defaults when NULL), validated. */
int ps_take_options(const ps_options *o, ps_options *out);

/* PS_ERR_NONFINITE (logged) if x[n] has a NaN or Inf. */
int ps_check_x(const ps_options *o, const double *x, size_t n);

/*
 * Which backend runs: cpu, gpu, or auto (the GPU when it can run the
 * solve, else the CPU, noted in *fell_back).
 */
int ps_pick_backend(const ps_options *o, ps_backend *use, int *fell_back);

/* GPU statuses after which backend auto may run on the CPU. */
int ps_gpu_can_fall_back(int st);

/* "cpu: N threads, float32 spins, AVX2" for ps_result.device (the last: the
 * spin loops' instruction set, cpu/objective.h). */
void ps_cpu_device(const ps_options *o, char *buf, size_t len);

#endif /* PS_SRC_BACKEND_H */
