/*
 * The persistent kernel: ONE cooperative launch runs the whole L-BFGS
 * solve. Every block keeps its own copy of the solver state machine
 * (opt/solver.h) in shared memory and takes every decision redundantly
 * from the same reduced values, so phases are separated by grid barriers
 * alone: no host round trip, no relaunch, no atomics that a result depends
 * on. The phases are the shared loop of cuda/loop.cuh (the CUDA-graph
 * variant runs it too, one iteration per launch); the device data is a
 * context (cuda/context.cu).
 *
 * Its instances are compiled in three translation units, each with ptxas
 * flags of its own (meson.build: the register usage levels measured
 * fastest for them): cuda/kernel.cu (the single-channel kernels without
 * designed gradient axes, and the entry points), cuda/kernel_channels.cu
 * (the channels kernels without them) and cuda/kernel_designed.cu (every
 * kernel with them, DG 1). Each instance is named in one of them only.
 */
#ifndef PS_SRC_CUDA_KERNEL_CUH
#define PS_SRC_CUDA_KERNEL_CUH

#include <cuda_runtime.h>

#include "cuda/context.cuh"
#include "cuda/launch.h"
#include "cuda/loop.cuh"

/* MINB: __launch_bounds__ minimum blocks of PS_GPU_MAX_THREADS per SM (1:
 * up to 128 registers a thread, 2: up to 64). NCH: 0 one channel of a real
 * B1 scale, 1 a.nc channels of complex sensitivities, 8 eight of them with
 * the count known at compile time (cuda/evaluate.cuh). DG: 1 with designed
 * gradient axes (cuda/gradient.cuh), 0 without (the kernels as before
 * them). GR: how the single-channel spin loops take the gradient rows
 * (cuda/evaluate.cuh): GR_NONE for the PS_GPU_NOGRAD class, GR_STAGED
 * for PS_GPU_STAGED (float32 only: float64 takes its rows from global
 * memory, GR_GLOBAL, as every other class). */
template <typename R, int MINB, int NCH, int DG, int GR = ps_gpu::GR_GLOBAL>
__global__ void __launch_bounds__(PS_GPU_MAX_THREADS, MINB) persistent_solve_kernel(ps_gpu::args a)
{
    using namespace ps_gpu;
    cg::grid_group grid = cg::this_grid();
    extern __shared__ __align__(16) char smem[];
    __shared__ loop_shared L;
    /* the solve's clock, continued from t_base seconds for a resumed run */
    uint64_t t0 = global_ns() - (uint64_t)(a.t_base * 1e9);
    uint64_t last = t0;
    state_copy(&L.S, a.state);
    if (threadIdx.x == 0) {
        L.ft = a.ft_in; /* a launch in the UPDATE phase: f at the accepted trial */
        L.cmd = PS_GPU_CMD_NONE;
        L.nev = 0;
        L.acked = 0;
        L.gen = a.cw ? *(volatile unsigned long long *)&a.cw[PS_GPU_CW_RELEASE] >> 3 : 0;
    }
    __syncthreads();

    // ---- the phases, from the stored state to DONE or a yield (cuda/loop.cuh) ----
    solve_phases<R, NCH, DG, GR>(a, grid, L, smem, t0, last, a.t_base, false);
    if (a.mode == MODE_EVAL)
        return;

    // ---- the state for the host: final, or where a yield stopped ----
    if (blockIdx.x == 0) {
        state_copy(a.state, &L.S);
        if (threadIdx.x == 0) {
            a.eval_out[0] = (double)(global_ns() - t0) * 1e-9; /* solve seconds at the end */
            a.eval_out[1] = L.ft; /* f at the accepted trial (a limit may stop before UPDATE) */
        }
    }
}

namespace ps_gpu {

/* The instance of the channels kernels (NCH 8 for eight channels, the
 * common pTx coil, whose sensitivities stay in registers; NCH 1 for any
 * other count) for DG, at register cap regcap (0: MINB 1, else 2). */
template <typename R, int DG> inline void *channels_kernel_of(int regcap, int channels)
{
    if (channels == 8)
        return regcap ? (void *)persistent_solve_kernel<R, 2, 8, DG> : (void *)persistent_solve_kernel<R, 1, 8, DG>;
    return regcap ? (void *)persistent_solve_kernel<R, 2, 1, DG> : (void *)persistent_solve_kernel<R, 1, 1, DG>;
}

/* The instance for a kernel class with PS_GPU_DESIGNED
 * (cuda/kernel_designed.cu), and for one of the channels kernels without
 * designed axes (cuda/kernel_channels.cu): ps_gpu_kernel_ptr's. */
void *designed_kernel_ptr(int precision, int regcap, int kclass);
void *channels_kernel_ptr(int precision, int regcap, int kclass);

} // namespace ps_gpu

#endif /* PS_SRC_CUDA_KERNEL_CUH */
