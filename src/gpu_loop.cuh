/*
 * The solve loop of the GPU backend, one block's view: the phases of the
 * solver state machine (lbfgs_math.h) with the device phases of
 * gpu_phases.cuh between grid-wide barriers. Written once and run by
 *   - the persistent megakernel (gpu_solve.cu): the whole solve, START to
 *     DONE, in one cooperative launch;
 *   - the CUDA-graph variant (gpu_variants.cu): one cooperative launch per
 *     pass of a conditional WHILE node, each running one iteration.
 * Every block keeps its own copy of the solver state in shared memory and
 * takes every decision redundantly from the same reduced values, so the
 * phases need no host and no atomics, only grid.sync().
 *
 * Per iteration with one line-search trial, four grid barriers:
 *   direction      d = -H g from the stored dots           | sync
 *   trial          evaluate at x + alpha d (partials)      | sync
 *                  reduce gradient, g_t.d partials         | sync  -> accept?
 *   update         s, y, x, g, batched dots (partials)     | sync  -> stop?
 */
#ifndef PS_SRC_GPU_LOOP_CUH
#define PS_SRC_GPU_LOOP_CUH

#include <cooperative_groups.h>
#include <stdint.h>

#include "gpu_launch.h"
#include "gpu_phases.cuh"

namespace ps_gpu {

namespace cg = cooperative_groups;

/* What one block keeps in shared memory across the phases. */
struct loop_shared {
    ps_solver S;            /* the block's copy of the solver state */
    double sh[4];           /* last evaluation: g.d, g.g, b.b, f */
    double red[1 + PS_RED_LEN(PS_MAX_MEMORY)]; /* red[0]: f at the accepted trial; red[1..]: batched dots */
};

/* Copy the solver state with every thread of the block (8-byte words);
 * the caller places the barrier. */
__device__ inline void state_copy(ps_solver *dst, const ps_solver *src)
{
    static_assert(sizeof(ps_solver) % sizeof(unsigned long long) == 0, "ps_solver is not 8-byte sized");
    const int words = (int)(sizeof(ps_solver) / sizeof(unsigned long long));
    const unsigned long long *s = (const unsigned long long *)src;
    unsigned long long *d = (unsigned long long *)dst;
    for (int i = threadIdx.x; i < words; i += blockDim.x)
        d[i] = s[i];
}

/*
 * The scalar decisions, kept out of line: one thread runs them, and
 * inlined they would share the kernel's register allocation with the
 * evaluation (spilling in its inner loops).
 */
static __device__ __noinline__ void decide_start(ps_solver *S, double f, double gg)
{
    ps_solver_start(S, f, gg);
}
static __device__ __noinline__ void decide_direction(ps_solver *S, double elapsed)
{
    ps_solver_direction(S, elapsed);
}
static __device__ __noinline__ void decide_trial(ps_solver *S, double f, double dg)
{
    ps_solver_trial(S, f, dg);
}
static __device__ __noinline__ void decide_update(ps_solver *S, double f, const double *red)
{
    ps_solver_update(S, f, red);
}

/* Block 0 appends one history row (seconds since the solve began). */
__device__ inline void record(const args &a, const ps_solver &S, double seconds)
{
    if (blockIdx.x == 0 && threadIdx.x == 0 && S.iteration < a.hist_cap) {
        ps_progress *h = a.hist + S.iteration;
        h->iteration = S.iteration;
        h->f = S.f;
        h->gnorm = S.gnorm;
        h->step = S.iteration > 0 ? S.step : 0.0;
        h->evaluations = S.evaluations;
        h->seconds = seconds;
    }
}

/* Benchmark profile: block 0 adds the time since the last mark to prof[i]. */
__device__ __forceinline__ void prof_mark(const args &a, uint64_t &last, int i)
{
    if (a.prof && blockIdx.x == 0 && threadIdx.x == 0) {
        uint64_t now = global_ns();
        a.prof[i] += now - last;
        last = now;
    }
}

/*
 * The scalars of an evaluation from the per-block partials of G blocks,
 * the same fixed order in every block (and in the host-driven variant's
 * one-block kernel): sh[0] = g.d, sh[1] = g.g, sh[2] = b.b (RF power),
 * sh[3] = f = loss + lambda b.b.
 */
__device__ inline void eval_scalars(const args &a, int G, double *sh)
{
    sum_partials(a.rpart, G, 4, PS_GPU_RP, sh);
    if (threadIdx.x == 0)
        sh[3] += a.lambda * sh[2];
    __syncthreads();
}

/*
 * Evaluate at x + alpha d into gout; leaves the scalars of eval_scalars()
 * in every block's sh[]. Two barriers.
 */
template <typename R>
__device__ void evaluate_and_reduce(const args &a, cg::grid_group &grid, const double *d,
                                    double alpha, double *gout, char *smem, double *sh,
                                    uint64_t &last)
{
    evaluate<R>(a, a.x, d, alpha, true, smem);
    grid.sync();
    prof_mark(a, last, PS_PROF_EVAL);
    reduce_gradient(a, a.x, d, alpha, gout, (double *)smem, a.rpart + (size_t)blockIdx.x * PS_GPU_RP);
    grid.sync();
    prof_mark(a, last, PS_PROF_REDUCE);
    eval_scalars(a, gridDim.x, sh);
    prof_mark(a, last, PS_PROF_SUMS);
}

/*
 * Run the phases from the state in L.S until DONE or, with one_iteration,
 * until an iteration has been completed (after its update). t0: the solve's
 * start (global ns, for the history and *a.elapsed); elapsed: seconds at
 * the last update (0 before the first), for the time limit. MODE_EVAL
 * stops after the start evaluation, with f in a.eval_out[0] and the
 * in-kernel time of the evaluation in *a.elapsed.
 */
template <typename R>
__device__ void solve_phases(const args &a, cg::grid_group &grid, loop_shared &L, char *smem,
                             uint64_t t0, uint64_t &last, double elapsed, bool one_iteration)
{
    ps_solver &S = L.S;
    double *sh = L.sh, *red = L.red;

    if (S.phase == PS_PHASE_START) {
        // ---- evaluate at the start point ----
        evaluate_and_reduce<R>(a, grid, nullptr, 0.0, a.g, smem, sh, last);
        if (a.mode == MODE_EVAL) {
            if (blockIdx.x == 0 && threadIdx.x == 0) {
                a.eval_out[0] = sh[3];
                *a.elapsed = (double)(global_ns() - t0) * 1e-9;
            }
            return;
        }
        if (threadIdx.x == 0) {
            decide_start(&S, sh[3], sh[1]);
            record(a, S, (double)(global_ns() - t0) * 1e-9);
        }
        __syncthreads();
    }

    for (;;) {
        /* every thread takes the phase before thread 0 may change it */
        const int phase = S.phase;
        __syncthreads();
        if (phase == PS_PHASE_DONE)
            break;
        if (phase == PS_PHASE_DIRECTION) {
            // ---- direction ----
            if (threadIdx.x == 0)
                decide_direction(&S, elapsed);
            __syncthreads();
            prof_mark(a, last, PS_PROF_DECIDE);
            if (S.phase != PS_PHASE_TRIAL)
                break;
            form_direction(a, &S.lb);
            grid.sync();
            prof_mark(a, last, PS_PROF_DIRECTION);
        } else if (phase == PS_PHASE_TRIAL) {
            // ---- line search trial ----
            evaluate_and_reduce<R>(a, grid, a.d, S.ls.alpha, a.gt, smem, sh, last);
            if (threadIdx.x == 0) {
                red[0] = sh[3]; /* f at the trial, kept for the update */
                decide_trial(&S, sh[3], sh[0]);
            }
            __syncthreads();
            prof_mark(a, last, PS_PROF_DECIDE);
        } else {
            // ---- update: accept the step, new pair, batched dots ----
            update(a, S.ls.alpha, ps_lbfgs_next_slot(&S.lb), (double *)smem,
                   a.rpart + (size_t)blockIdx.x * PS_GPU_RP + PS_GPU_RP_UPD);
            if (blockIdx.x == 0 && threadIdx.x == 0)
                *a.elapsed = (double)(global_ns() - t0) * 1e-9;
            grid.sync();
            prof_mark(a, last, PS_PROF_UPDATE);
            double ft = red[0];
            sum_partials(a.rpart + PS_GPU_RP_UPD, a.gv, PS_RED_LEN(a.memory), PS_GPU_RP, red + 1);
            prof_mark(a, last, PS_PROF_SUMS);
            elapsed = *(volatile double *)a.elapsed;
            if (threadIdx.x == 0) {
                decide_update(&S, ft, red + 1);
                record(a, S, elapsed);
            }
            __syncthreads();
            prof_mark(a, last, PS_PROF_DECIDE);
            if (one_iteration)
                return;
        }
    }
}

} // namespace ps_gpu

#endif /* PS_SRC_GPU_LOOP_CUH */
