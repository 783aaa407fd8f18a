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
    unsigned long long gen; /* pauses obeyed so far (control path) */
    int cmd;                /* the command read at the last control point, to obey */
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
 * The scalar decisions, kept out of line: one thread runs them (the
 * direction: one warp), and inlined they would share the kernel's register
 * allocation with the evaluation (spilling in its inner loops).
 */
static __device__ __noinline__ void decide_start(ps_solver *S, double f, double gg)
{
    ps_solver_start(S, f, gg);
}
/* All 32 lanes of one warp (lbfgs_math.h: ps_solver_direction_warp). */
static __device__ __noinline__ void decide_direction(ps_solver *S, double elapsed)
{
    ps_solver_direction_warp(S, elapsed);
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

/* ---- control of a running kernel (gpu_control.h) ---- */

/* The host's command: a system-scope acquire load from mapped memory. */
__device__ __forceinline__ int host_command(const ps_gpu_ctl *c)
{
    int v;
    asm volatile("ld.acquire.sys.b32 %0, [%1];" : "=r"(v) : "l"(&c->command) : "memory");
    return v;
}

/*
 * Publish the progress snapshot (one thread): sequence odd, the fields,
 * sequence even, each step fenced at system scope so that the host never
 * takes a torn copy for a consistent one. The sequence's value lives in
 * device memory (the device is its only writer while a kernel runs).
 */
__device__ inline void publish(const args &a, const ps_solver &S, int state, double seconds)
{
    volatile ps_gpu_ctl *c = a.ctl;
    volatile unsigned long long *cw = a.cw;
    const unsigned long long q = cw[PS_GPU_CW_SEQ];
    c->seq = q + 1;
    __threadfence_system();
    c->iteration = S.iteration;
    c->evaluations = S.evaluations;
    c->f = S.f;
    c->gnorm = S.gnorm;
    c->step = S.iteration > 0 ? S.step : 0.0;
    c->seconds = seconds;
    c->phase = S.phase;
    c->status = S.status;
    c->state = state;
    __threadfence_system();
    c->seq = q + 2;
    cw[PS_GPU_CW_SEQ] = q + 2;
}

/*
 * The control point's read (the controller block's thread 0, once per
 * evaluation, when its share of the evaluation is done: the controller is
 * the last block, whose share of a grid-stride over tiles is never larger
 * than another's, so this usually costs the solve nothing): the heartbeat,
 * the progress, and the host's command into device memory, where every
 * block reads it after the evaluation's barrier.
 */
__device__ inline void control_read(const args &a, const ps_solver &S, double seconds)
{
    const int cmd = host_command(a.ctl);
    volatile unsigned long long *cw = a.cw;
    cw[PS_GPU_CW_COMMAND] = (unsigned long long)cmd;
    const unsigned long long beat = cw[PS_GPU_CW_BEAT] + 1;
    cw[PS_GPU_CW_BEAT] = beat;
    ((volatile ps_gpu_ctl *)a.ctl)->heartbeat = beat;
    publish(a, S, 0 /* PS_RUN_RUNNING */, seconds);
}

/* Sleep with a growing back-off, 1 us up to 32 us. */
__device__ __forceinline__ void backoff(unsigned &ns)
{
    __nanosleep(ns);
    if (ns < 32000u)
        ns *= 2u;
}

/*
 * Obey the command of the control point (every block, after the barrier
 * that ends an evaluation, before its decision: L.S, L.red[0] and the
 * device vectors are a whole solve state there). PAUSE: the controller stores the state (a checkpoint may
 * be taken while paused), publishes PAUSED and sleeps until the host
 * changes the command; the other blocks sleep on the release word in
 * device memory. Then the new command is obeyed the same way. CANCEL ends
 * the solve (DONE, PS_CANCELLED at the last accepted point). Returns 1 for
 * YIELD (the caller stores the state and the kernel exits). t0 moves by
 * the time paused: pauses do not count as solve time.
 */
__device__ inline int obey(const args &a, loop_shared &L, uint64_t &t0)
{
    ps_solver &S = L.S;
    int cmd = L.cmd;
    __syncthreads(); /* every thread has taken the command before it changes */
    while (cmd == PS_GPU_CMD_PAUSE) {
        const uint64_t p0 = global_ns();
        const bool ctrl = (int)blockIdx.x == a.controller;
        if (ctrl) {
            state_copy(a.state, &S);
            if (threadIdx.x == 0)
                a.eval_out[1] = L.red[0]; /* f at an accepted trial (UPDATE) */
        }
        __threadfence_system(); /* the state and the history, for a copy while paused */
        __syncthreads();
        if (threadIdx.x == 0) {
            volatile unsigned long long *cw = a.cw;
            const unsigned long long gen = ++L.gen;
            unsigned ns = 1000u;
            if (ctrl) {
                const double sec = (double)(p0 - t0) * 1e-9;
                publish(a, S, 1 /* PS_RUN_PAUSED */, sec);
                int c;
                while ((c = host_command(a.ctl)) == PS_GPU_CMD_PAUSE)
                    backoff(ns);
                cw[PS_GPU_CW_RELEASE] = gen << 3 | (unsigned long long)c;
                publish(a, S, 0 /* PS_RUN_RUNNING */, sec);
                L.cmd = c;
            } else {
                unsigned long long w;
                while (((w = cw[PS_GPU_CW_RELEASE]) >> 3) != gen)
                    backoff(ns);
                L.cmd = (int)(w & 7u);
            }
        }
        __syncthreads();
        cmd = L.cmd;
        t0 += global_ns() - p0;
        __syncthreads(); /* every thread has taken the command before it changes */
    }
    if (threadIdx.x == 0) {
        L.cmd = PS_GPU_CMD_NONE; /* obeyed */
        if (cmd == PS_GPU_CMD_CANCEL)
            ps_solver_finish(&S, PS_ST_CANCELLED);
    }
    __syncthreads();
    return cmd == PS_GPU_CMD_YIELD;
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

enum { EV_DONE = 0, EV_YIELD = 1, EV_STOPPED = 2 };

/*
 * Evaluate at x + alpha d into gout; leaves the scalars of eval_scalars()
 * in every block's sh[]. Two barriers. With a.ctl, the control point:
 * the controller reads the host's command when its share of the
 * evaluation is done, every block takes it after the evaluation's barrier
 * and obeys it there (the solver state is still before this evaluation's
 * decision, so a yield or a checkpoint taken while paused resumes by
 * evaluating the same point again, bit for bit). Returns EV_DONE,
 * EV_YIELD, or EV_STOPPED (cancelled: the state is DONE).
 */
template <typename R>
__device__ int evaluate_and_reduce(const args &a, cg::grid_group &grid, loop_shared &L,
                                   const double *d, double alpha, double *gout, char *smem,
                                   uint64_t &t0, uint64_t &last)
{
    double *sh = L.sh;
    evaluate<R>(a, a.x, d, alpha, true, smem);
    if (a.ctl && (int)blockIdx.x == a.controller && threadIdx.x == 0)
        control_read(a, L.S, (double)(global_ns() - t0) * 1e-9);
    grid.sync();
    if (a.ctl) {
        // ---- control point (taken before the next barrier: the next read comes after it) ----
        if (threadIdx.x == 0)
            L.cmd = (int)*(volatile unsigned long long *)&a.cw[PS_GPU_CW_COMMAND];
        __syncthreads();
        if (L.cmd != PS_GPU_CMD_NONE) {
            if (obey(a, L, t0))
                return EV_YIELD;
            if (L.S.phase == PS_PHASE_DONE)
                return EV_STOPPED;
        }
    }
    prof_mark(a, last, PS_PROF_EVAL);
    reduce_gradient(a, a.x, d, alpha, gout, (double *)smem, a.rpart + (size_t)blockIdx.x * PS_GPU_RP);
    grid.sync();
    prof_mark(a, last, PS_PROF_REDUCE);
    eval_scalars(a, gridDim.x, sh);
    prof_mark(a, last, PS_PROF_SUMS);
    return EV_DONE;
}

/*
 * Run the phases from the state in L.S until DONE, a yield (returns 1) or,
 * with one_iteration, until an iteration has been completed (after its
 * update). t0: the solve's start (global ns, for the history and
 * *a.elapsed; moved by pauses); elapsed: seconds at the last update, for
 * the time limit. With a.ctl, a control point per evaluation (see
 * evaluate_and_reduce and obey). MODE_EVAL stops after the start
 * evaluation, with f in a.eval_out[0] and the in-kernel time of the
 * evaluation in *a.elapsed.
 */
template <typename R>
__device__ int solve_phases(const args &a, cg::grid_group &grid, loop_shared &L, char *smem,
                            uint64_t &t0, uint64_t &last, double elapsed, bool one_iteration)
{
    ps_solver &S = L.S;
    double *sh = L.sh, *red = L.red;

    if (S.phase == PS_PHASE_START) {
        // ---- evaluate at the start point ----
        const int ev = evaluate_and_reduce<R>(a, grid, L, nullptr, 0.0, a.g, smem, t0, last);
        if (ev == EV_YIELD)
            return 1;
        if (ev == EV_STOPPED)
            return 0;
        if (a.mode == MODE_EVAL) {
            if (blockIdx.x == 0 && threadIdx.x == 0) {
                a.eval_out[0] = sh[3];
                *a.elapsed = (double)(global_ns() - t0) * 1e-9;
            }
            return 0;
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
            // ---- direction (warp 0) ----
            if (threadIdx.x < 32)
                decide_direction(&S, elapsed);
            __syncthreads();
            prof_mark(a, last, PS_PROF_DECIDE_DIRECTION);
            if (S.phase != PS_PHASE_TRIAL)
                break;
            form_direction(a, &S.lb);
            grid.sync();
            prof_mark(a, last, PS_PROF_DIRECTION);
        } else if (phase == PS_PHASE_TRIAL) {
            // ---- line search trial ----
            const int ev = evaluate_and_reduce<R>(a, grid, L, a.d, S.ls.alpha, a.gt, smem, t0, last);
            if (ev == EV_YIELD)
                return 1;
            if (ev == EV_STOPPED)
                continue; /* DONE */
            if (threadIdx.x == 0) {
                red[0] = sh[3]; /* f at the trial, kept for the update */
                decide_trial(&S, sh[3], sh[0]);
            }
            __syncthreads();
            prof_mark(a, last, PS_PROF_DECIDE_TRIAL);
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
            prof_mark(a, last, PS_PROF_DECIDE_UPDATE);
            if (one_iteration)
                return 0;
        }
    }
    return 0;
}

} // namespace ps_gpu

#endif /* PS_SRC_GPU_LOOP_CUH */
