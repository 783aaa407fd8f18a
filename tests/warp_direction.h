/*
 * The warp form of the direction decision, ps_solver_direction_warp, on n
 * solver states, for test_direction.c: on the GPU (gpu/direction_kernel.cu,
 * the gpu suite) or with host threads as the lanes (warp_emu.c, the unit
 * suite).
 */
#ifndef PS_TESTS_WARP_DIRECTION_H
#define PS_TESTS_WARP_DIRECTION_H

#include "lbfgs_math.h"

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

#ifdef __cplusplus
}
#endif

#endif /* PS_TESTS_WARP_DIRECTION_H */
