/*
 * The solve loop of the GPU backend, one block's view: the phases of the
 * solver state machine (opt/solver.h) with the device phases of
 * cuda/phases.cuh between grid-wide barriers. Written once and run by
 *   - the persistent megakernel (cuda/solve.cu): the whole solve, START to
 *     DONE, in one cooperative launch;
 *   - the CUDA-graph variant (cuda/variants.cu): one cooperative launch per
 *     pass of a conditional WHILE node, each running one iteration.
 * Every block keeps its own copy of the solver state in shared memory and
 * takes every decision redundantly from the same reduced values, so the
 * phases need no host and no atomics, only grid barriers (the one atomic
 * count is the control path's, which no result depends on).
 *
 * Per iteration with one line-search trial, three grid barriers:
 *   direction      the accepted step applied (x, g, new pair),
 *                  d = -H g from the stored dots           | sync
 *   trial          (designed axes, long: the gdt rows      | sync)
 *                  evaluate at x + alpha d (partials)      | sync
 *                  (several GPUs: the ranks' rows          | sync, ranks, sync)
 *                  reduce gradient, g_t.d and the update's
 *                  batched dots (partials)                 | sync
 *                  sums                                    (control point)
 *                  -> accept? -> update's dots, stop? -> next direction
 * The update's dots are taken with every trial's reduction, before the
 * line search has decided (trial_dots): an accepted step costs no pass
 * and no barrier of its own, and the vectors move in the next direction
 * pass (or in a pass of their own when the solve stops there).
 * The control point (with a.ctl, asynchronous runs: cuda/control.h) costs no
 * barrier of its own: the control thread reads the host's command in the
 * phase before the barrier, every block takes it after the barrier.
 */
#ifndef PS_SRC_GPU_LOOP_CUH
#define PS_SRC_GPU_LOOP_CUH

#include <cooperative_groups.h>
#include <stdint.h>
#include <utility>

#include "cuda/control.cuh"
#include "cuda/launch.h"
#include "cuda/phases.cuh"

namespace ps_gpu {

namespace cg = cooperative_groups;

/*
 * The scalar decisions, kept out of line: thread 0 runs the start and the
 * line search's, warp 0 the direction's and the update's (lane l owning
 * pair l), and inlined they would share the kernel's register allocation
 * with the evaluation (spilling in its inner loops).
 */
static __device__ __noinline__ void decide_start(ps_solver *S, double f, double gg, double viol)
{
    ps_solver_start(S, f, gg, viol);
}
/* All 32 lanes of one warp (opt/solver.h: ps_solver_direction_warp). */
static __device__ __noinline__ void decide_direction(ps_solver *S, double elapsed)
{
    ps_solver_direction_warp(S, elapsed);
}
static __device__ __noinline__ void decide_trial(ps_solver *S, double f, double dg, double viol)
{
    ps_solver_trial(S, f, dg, viol);
}
/* by warp 0 (all 32 lanes) */
static __device__ __noinline__ void decide_update(ps_solver *S, double f, const double *red)
{
    ps_solver_update_warp(S, f, red);
}

/* Block 0 appends one history row (seconds since the solve began). */
__device__ inline void record(const args &a, const ps_solver &S, double seconds)
{
    if (team_rank(a) == 0 && threadIdx.x == 0 && S.iteration < a.hist_cap) {
        ps_progress *h = a.hist + S.iteration;
        h->iteration = S.iteration;
        h->f = S.f;
        h->gnorm = S.gnorm;
        h->step = S.iteration > 0 ? S.step : 0.0;
        h->evaluations = S.evaluations;
        h->seconds = seconds;
        h->round = ps_solver_row_round(&S);
        h->reserved = 0;
    }
}

/*
 * The scalars of an evaluation from the per-block partials of G blocks,
 * the same fixed order in every block (and in the host-driven variant's
 * one-block kernel): L.sums[0] = g.d, [1] = g.g, [2] = b.b (RF power),
 * [3] = f = loss + lambda b.b (+ the SAR penalty, L.viol its violation:
 * cuda/constraints.cuh); with dots (a trial), also the update's
 * dots into L.red, their g.g copied from L.sums[1]. With cmd >= 0 (thread
 * 0's value), L.cmd = cmd for the whole block too. DG: f gains mu times
 * each designed axis's penalty, with a.gteam the sum of the G blocks' rows
 * of a.gpen (warp_sum_partials' order), the violation the largest of the
 * rows', else the block's own row (cuda/gradient.cuh), the violation
 * the largest of it and the SAR's (the CPU's order: the SAR's penalty,
 * then each axis's).
 */
template <int NCH, int DG = 0>
__device__ inline void eval_scalars(const args &a, int G, bool dots, loop_shared &L, int cmd = -1)
{
    const int m = a.memory, Q = 4 + (dots ? 4 * m : 0);
    /* the blocks with update dots: those with an item of the reduction */
    const int GD = NCH || DG ? min(reduce_items<NCH, DG>(a), G) : dot_blocks(a.nt, G);
    const int warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (!NCH && DG && a.gteam) /* the designed axes' penalties and violation: the blocks' rows */
        team_penalties(a, G, L.gpen);
    for (int q = warp; q < Q; q += nw) { /* one warp per sum */
        if (q < 4) {
            const double v = warp_sum_partials(a.rpart + q, G, PS_GPU_RP);
            if ((threadIdx.x & 31) == 0)
                L.sums[q] = v;
        } else {
            const double v = warp_sum_partials(a.rdot + (size_t)(q - 4) * G, GD, 1);
            if ((threadIdx.x & 31) == 0)
                L.red[q - 4] = v;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        L.sums[3] += a.des.lambda * L.sums[2];
        L.sums[3] += sar_penalty<NCH>(a, L.S.mu, &L.viol);
        if (DG) { /* a.gteam: the sums of the blocks' rows; else the block's own row */
            const double *pen = !NCH && a.gteam ? L.gpen : a.gpen + (size_t)4 * team_rank(a);
            for (int i = 0; i < a.des.ng; i++)
                L.sums[3] += L.S.mu * pen[i];
            L.viol = fmax(L.viol, pen[3]);
        }
        L.red[4 * m] = L.sums[1];
        if (cmd >= 0)
            L.cmd = cmd;
    }
    __syncthreads();
}

/*
 * Evaluate at x + alpha d into gout; leaves the scalars of eval_scalars()
 * in every block's L.sums (and L.red). ns >= 0 (a trial): the update's dots for the
 * pair that slot ns would take too (trial_dots). Two barriers (DG with
 * a.gteam: three, the designed waveforms' before the evaluation). With a.ctl,
 * the control thread publishes the progress when its share of the
 * evaluation is done, watches the host's command until every block's is
 * (control_watch), reads it again during the reduction, and every block
 * obeys it after the reduction's barrier and the sums: the solver state
 * is still before this evaluation's decision there, so a yield or a
 * checkpoint taken while paused resumes by evaluating the same point
 * again, bit for bit (the evaluation changes only gout and the partials).
 * Block 0 stores the solve's seconds in *a.elapsed (the time limit's
 * clock: an accepted trial's is the update's). Returns EV_DONE, EV_YIELD,
 * or EV_STOPPED (cancelled: the state is DONE).
 */
template <typename R, int NCH, int DG, int GR = GR_GLOBAL>
__device__ int evaluate_and_reduce(const args &a, cg::grid_group &grid, loop_shared &L,
                                   const double *d, double alpha, int ns, double *gout, char *smem,
                                   uint64_t &t0, uint64_t &last)
{
    // ---- designed axes, long pulses: the waveforms at x + alpha d, once over the team ----
    if (DG && team_waveform<NCH>(a)) {
        waveform_totals(a, a.x, d, alpha, (double *)smem);
        waveform_rows<R>(a, a.x, d, alpha, L.S.mu, true, (double *)smem);
        team_sync(a, grid);
    }

    // ---- evaluate: the blocks' partials at x + alpha d ----
    evaluate<R, NCH, DG, GR>(a, a.x, d, alpha, true, smem, L.S.mu);
    sar_partials<NCH>(a, a.x, d, alpha);
    eval_barrier(a, grid, L, t0, last, PS_PROF_EVAL);

    // ---- several GPUs: the ranks' rows, and rank 0's command (cuda/ranks.cuh) ----
    int cmd = control_issue(a);
    partial_rows src = block_rows(a);
    if (a.rk.on) {
        src = rank_exchange(a, control_thread(a), &cmd, t0);
        prof_mark(a, last, PS_PROF_EXCHANGE);
    }

    // ---- reduce: gradient and scalars' partials (a trial: the update's dots too) ----
    reduce_gradient<NCH, DG>(a, src, a.x, d, alpha, L.S.mu, gout, (double *)smem,
                             a.rpart + (size_t)team_rank(a) * PS_GPU_RP);
    prof_mark(a, last, PS_PROF_REDUCE);
    if (ns >= 0) {
        trial_dots<NCH, DG>(a, alpha, ns, gout, (double *)smem);
        if (team_rank(a) == 0 && threadIdx.x == 0) /* several GPUs: rank 0's clock, for the same decisions */
            *a.elapsed = a.rk.on ? src.g[a.n + 2] : (double)(global_ns() - t0) * 1e-9;
    }
    reduce_barrier(a, grid, L, cmd, t0, last, PS_PROF_UPDATE);

    // ---- sums: every block, the same fixed order ----
    eval_scalars<NCH, DG>(a, a.nteam, ns >= 0, L, control_posted(a));
    prof_mark(a, last, PS_PROF_SUMS);

    // ---- control point (the evaluation changed no state: still before its decision) ----
    return a.ctl ? control_obey(a, L, t0) : EV_DONE;
}

/*
 * UPDATE: the accepted trial's f (L.ft) and dots (L.red) into the state
 * (warp 0), its history row at the update's seconds (*a.elapsed, into
 * elapsed); every thread's pending step becomes (alpha, ns), applied by
 * the next direction pass or apply_pass. With one_iteration the step is
 * applied at once and it returns 1: the iteration is complete.
 */
__device__ inline int take_update(const args &a, loop_shared &L, uint64_t &last, double &elapsed, double alpha,
                                  int ns, bool one_iteration, double &pend_alpha, int &pend_slot)
{
    elapsed = *(volatile double *)a.elapsed;
    if (threadIdx.x < 32) {
        decide_update(&L.S, L.ft, L.red);
        record(a, L.S, elapsed);
    }
    pend_alpha = alpha;
    pend_slot = ns;
    block_barrier(a, last, PS_PROF_DECIDE_UPDATE);
    if (!one_iteration)
        return 0;
    apply_pass(a, pend_alpha, pend_slot);
    return 1;
}

/*
 * Run the phases from the state in L.S until DONE, a yield (returns 1) or,
 * with one_iteration, until an iteration has been completed (after its
 * update, the step applied). t0: the solve's start (global ns, for the
 * history and *a.elapsed; moved by pauses); elapsed: seconds at the last
 * update, for the time limit. With a.ctl, a control point after every
 * evaluation (see control_obey and obey); it leaves no step pending.
 * MODE_EVAL stops after the start evaluation, with f in a.eval_out[0]
 * and the in-kernel time of the evaluation in *a.elapsed. Always inlined:
 * a call would pass the kernel's parameters by address, which copies
 * them to local memory and turns every read of a field in the spin loops
 * into a local load. GR: how the single-channel spin loops take the
 * gradient rows (cuda/evaluate.cuh, GR_GLOBAL).
 */
template <typename R, int NCH, int DG, int GR = GR_GLOBAL>
__device__ __forceinline__ int solve_phases(const args &a, cg::grid_group &grid, loop_shared &L, char *smem,
                            uint64_t &t0, uint64_t &last, double elapsed, bool one_iteration)
{
    ps_solver &S = L.S;
    double *sums = L.sums;
    /* an accepted step whose vectors have not moved yet (slot -1: none);
     * the same in every thread */
    double pend_alpha = 0.0;
    int pend_slot = -1;

    /* The single-channel kernel without designed axes takes its first
     * START here, before the loop (a new penalty round's START, and every
     * START of the channels kernels and of the designed ones, in the loop):
     * where the evaluation is placed moves the compiler's register
     * allocation, and each kernel measured fastest this way (README, issue
     * 15's figures; the designed single-channel kernel: its evaluations 5%
     * faster with the first START in the loop, H200). */
    if (!NCH && !DG && S.phase == PS_PHASE_START) {
        // ---- evaluate at the start point ----
        const int ev = evaluate_and_reduce<R, NCH, DG, GR>(a, grid, L, nullptr, 0.0, -1, a.g, smem, t0, last);
        if (ev == EV_YIELD)
            return 1;
        if (ev == EV_STOPPED)
            return 0;
        if (a.mode == MODE_EVAL) {
            if (team_rank(a) == 0 && threadIdx.x == 0) {
                a.eval_out[0] = sums[3];
                *a.elapsed = (double)(global_ns() - t0) * 1e-9;
            }
            return 0;
        }
        if (threadIdx.x == 0) {
            const bool row = !S.restart;
            decide_start(&S, sums[3], sums[1], L.viol);
            if (row)
                record(a, S, (double)(global_ns() - t0) * 1e-9);
        }
        __syncthreads();
    }

    for (;;) {
        /* every thread takes the phase, the trial step and the next slot
         * before the decisions may change them */
        const int phase = S.phase;
        const double alpha = S.ls.alpha;
        const int ns = ps_lbfgs_next_slot(&S.lb);
        __syncthreads();
        if (phase == PS_PHASE_DONE) {
            if (pend_slot >= 0) /* the last accepted step */
                apply_pass(a, pend_alpha, pend_slot);
            break;
        }
        if (phase == PS_PHASE_START) {
            // ---- evaluate at the start point, or at x for a new penalty round ----
            if (pend_slot >= 0) { /* the round's last accepted step first */
                apply_pass(a, pend_alpha, pend_slot);
                pend_slot = -1;
                team_sync(a, grid);
            }
            const int ev = evaluate_and_reduce<R, NCH, DG, GR>(a, grid, L, nullptr, 0.0, -1, a.g, smem, t0, last);
            if (ev == EV_YIELD)
                return 1;
            if (ev == EV_STOPPED)
                continue; /* DONE */
            if (a.mode == MODE_EVAL) {
                if (team_rank(a) == 0 && threadIdx.x == 0) {
                    a.eval_out[0] = sums[3];
                    *a.elapsed = (double)(global_ns() - t0) * 1e-9;
                }
                return 0;
            }
            if (threadIdx.x == 0) {
                const bool row = !S.restart; /* a new round's start has no row */
                decide_start(&S, sums[3], sums[1], L.viol);
                if (row)
                    record(a, S, (double)(global_ns() - t0) * 1e-9);
            }
            __syncthreads();
        } else if (phase == PS_PHASE_DIRECTION) {
            // ---- direction (warp 0) ----
            if (threadIdx.x < 32)
                decide_direction(&S, elapsed);
            block_barrier(a, last, PS_PROF_DECIDE_DIRECTION);
            if (S.phase != PS_PHASE_TRIAL)
                continue; /* DONE */
            const int cmd = control_issue(a);
            form_direction(a, &S.lb, pend_alpha, pend_slot);
            pend_slot = -1;
            direction_barrier(a, grid, L, cmd, t0, last, PS_PROF_DIRECTION);
        } else if (phase == PS_PHASE_TRIAL) {
            // ---- line search trial, with the update's dots ----
            const int ev = evaluate_and_reduce<R, NCH, DG, GR>(a, grid, L, a.d, alpha, ns, a.gt, smem, t0, last);
            if (ev == EV_YIELD)
                return 1;
            if (ev == EV_STOPPED)
                continue; /* DONE */
            if (threadIdx.x == 0) {
                L.ft = sums[3]; /* f at the trial, kept for the update */
                decide_trial(&S, sums[3], sums[0], L.viol);
            }
            block_barrier(a, last, PS_PROF_DECIDE_TRIAL);
            const bool accepted = S.phase == PS_PHASE_UPDATE;
            __syncthreads(); /* every thread has the decision before the update changes it */
            if (accepted && take_update(a, L, last, elapsed, alpha, ns, one_iteration, pend_alpha, pend_slot))
                return 0; /* one iteration done */
        } else {
            // ---- update of a launch in the UPDATE phase (from a checkpoint
            // of the CPU backend): the partials the trial's reduction would
            // have left were made by update_partials_kernel before the launch ----
            if (team_rank(a) == 0 && threadIdx.x == 0)
                *a.elapsed = (double)(global_ns() - t0) * 1e-9;
            team_sync(a, grid);
            eval_scalars<NCH, DG>(a, a.nteam, true, L);
            if (take_update(a, L, last, elapsed, alpha, ns, one_iteration, pend_alpha, pend_slot))
                return 0; /* one iteration done */
        }
    }
    return 0;
}

} // namespace ps_gpu

#endif /* PS_SRC_GPU_LOOP_CUH */
