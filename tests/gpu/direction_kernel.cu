/*
 * The direction and update decisions of the GPU kernels for
 * test_direction.c: one block per state, the state (and the update's
 * dots) copied into shared memory, warp 0 running ps_solver_direction_warp
 * or ps_solver_update_warp out of line (as cuda/loop.cuh's decide_direction
 * and decide_update) while the block's other warp waits at the barrier.
 */
#include <cuda_runtime.h>
#include <stdio.h>

extern "C" {
#include "opt/solver.h"
}
#include "unit/warp_direction.h"

static __device__ __noinline__ void decide(ps_solver *S, double elapsed)
{
    ps_solver_direction_warp(S, elapsed);
}

static __device__ __noinline__ void decide_update(ps_solver *S, double f, const double *red)
{
    ps_solver_update_warp(S, f, red);
}

/* what 0: the direction (arg: elapsed); 1: the update (arg: f, with red) */
static __global__ void direction_kernel(ps_solver *states, const double *arg, const double *red, int what)
{
    __shared__ double R[TD_RED];
    for (int i = threadIdx.x; i < TD_RED && red; i += blockDim.x)
        R[i] = red[(size_t)blockIdx.x * TD_RED + i];
    __shared__ ps_solver S;
    const int words = (int)(sizeof(ps_solver) / sizeof(unsigned long long));
    unsigned long long *g = (unsigned long long *)(states + blockIdx.x);
    unsigned long long *s = (unsigned long long *)&S;
    for (int i = threadIdx.x; i < words; i += blockDim.x)
        s[i] = g[i];
    __syncthreads();
    if (threadIdx.x < 32) {
        if (what == 0)
            decide(&S, arg[blockIdx.x]);
        else
            decide_update(&S, arg[blockIdx.x], R);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < words; i += blockDim.x)
        g[i] = s[i];
}

#define TRY(call)                                                                          \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            st = -1;                                                                       \
            goto out;                                                                      \
        }                                                                                  \
    } while (0)

static int run(ps_solver *states, const double *arg, const double *red, int n, int what)
{
    static_assert(sizeof(ps_solver) % sizeof(unsigned long long) == 0, "ps_solver is not 8-byte sized");
    int st = 0;
    ps_solver *d_states = NULL;
    double *d_arg = NULL, *d_red = NULL;
    TRY(cudaMalloc((void **)&d_states, (size_t)n * sizeof *d_states));
    TRY(cudaMalloc((void **)&d_arg, (size_t)n * sizeof *d_arg));
    TRY(cudaMemcpy(d_states, states, (size_t)n * sizeof *d_states, cudaMemcpyHostToDevice));
    TRY(cudaMemcpy(d_arg, arg, (size_t)n * sizeof *d_arg, cudaMemcpyHostToDevice));
    if (red) {
        TRY(cudaMalloc((void **)&d_red, (size_t)n * TD_RED * sizeof *d_red));
        TRY(cudaMemcpy(d_red, red, (size_t)n * TD_RED * sizeof *d_red, cudaMemcpyHostToDevice));
    }
    direction_kernel<<<n, 64>>>(d_states, d_arg, d_red, what);
    TRY(cudaGetLastError());
    TRY(cudaDeviceSynchronize());
    TRY(cudaMemcpy(states, d_states, (size_t)n * sizeof *d_states, cudaMemcpyDeviceToHost));
out:
    cudaFree(d_states);
    cudaFree(d_arg);
    cudaFree(d_red);
    return st;
}

extern "C" int td_direction_warp(ps_solver *states, const double *elapsed, int n)
{
    return run(states, elapsed, NULL, n, 0);
}

extern "C" int td_update_warp(ps_solver *states, const double *f, const double *red, int n)
{
    return run(states, f, red, n, 1);
}
