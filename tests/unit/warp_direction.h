/*
 * The warp forms of the direction and update decisions
 * (ps_solver_direction_warp, ps_solver_update_warp) on n solver states, for test_direction.c: on the GPU (gpu/direction_kernel.cu,
 * the gpu suite) or with host threads as the lanes (warp_emu.c, the unit
 * suite).
 */
#ifndef PS_TESTS_WARP_DIRECTION_H
#define PS_TESTS_WARP_DIRECTION_H

#include "opt/solver.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * states[i] (host memory) in and out, elapsed[i] for the time limit. On
 * the GPU each state is decided by warp 0 of its own block of 64 threads,
 * in shared memory as in the solve kernels. Returns 0, or -1 on an error
 * (printed).
 */
int td_direction_warp(ps_solver *states, const double *elapsed, int n);

/*
 * ps_solver_update_warp on n states (phase UPDATE) with the accepted f[i]
 * and the batched dots red[i * TD_RED .. ] (PS_RED_LEN(m) of them), the
 * same way. Returns 0, or -1 on an error (printed).
 */
#define TD_RED PS_RED_LEN(PS_MAX_MEMORY)
int td_update_warp(ps_solver *states, const double *f, const double *red, int n);

#ifdef __cplusplus
}
#endif

#endif /* PS_TESTS_WARP_DIRECTION_H */
