/*
 * The direction decision of the GPU kernels for test_direction.c: one
 * block per state, the state copied into shared memory, warp 0 running
 * ps_solver_direction_warp out of line (as gpu_loop.cuh's
 * decide_direction) while the block's other warp waits at the barrier.
 */
#include <cuda_runtime.h>
#include <stdio.h>

extern "C" {
#include "lbfgs_math.h"
}
#include "warp_direction.h"

static __device__ __noinline__ void decide(ps_solver *S, double elapsed)
{
    ps_solver_direction_warp(S, elapsed);
}

static __global__ void direction_kernel(ps_solver *states, const double *elapsed)
{
    __shared__ ps_solver S;
    const int words = (int)(sizeof(ps_solver) / sizeof(unsigned long long));
    unsigned long long *g = (unsigned long long *)(states + blockIdx.x);
    unsigned long long *s = (unsigned long long *)&S;
    for (int i = threadIdx.x; i < words; i += blockDim.x)
        s[i] = g[i];
    __syncthreads();
    if (threadIdx.x < 32)
        decide(&S, elapsed[blockIdx.x]);
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

extern "C" int td_direction_warp(ps_solver *states, const double *elapsed, int n)
{
    static_assert(sizeof(ps_solver) % sizeof(unsigned long long) == 0, "ps_solver is not 8-byte sized");
    int st = 0;
    ps_solver *d_states = NULL;
    double *d_elapsed = NULL;
    TRY(cudaMalloc((void **)&d_states, (size_t)n * sizeof *d_states));
    TRY(cudaMalloc((void **)&d_elapsed, (size_t)n * sizeof *d_elapsed));
    TRY(cudaMemcpy(d_states, states, (size_t)n * sizeof *d_states, cudaMemcpyHostToDevice));
    TRY(cudaMemcpy(d_elapsed, elapsed, (size_t)n * sizeof *d_elapsed, cudaMemcpyHostToDevice));
    direction_kernel<<<n, 64>>>(d_states, d_elapsed);
    TRY(cudaGetLastError());
    TRY(cudaDeviceSynchronize());
    TRY(cudaMemcpy(states, d_states, (size_t)n * sizeof *d_states, cudaMemcpyDeviceToHost));
out:
    cudaFree(d_states);
    cudaFree(d_elapsed);
    return st;
}
