/*
 * The solve loop of the GPU backend, one block's view: the phases of the
 * solver state machine (opt/lbfgs_math.h) with the device phases of
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
 *   trial          evaluate at x + alpha d (partials)      | sync
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

#include "cuda/launch.h"
#include "cuda/phases.cuh"

namespace ps_gpu {

namespace cg = cooperative_groups;

/* What one block keeps in shared memory across the phases. */
struct loop_shared {
    ps_solver S;            /* the block's copy of the solver state */
    double sums[4];         /* last evaluation: g.d, g.g, b.b, f */
    double red[PS_RED_LEN(PS_MAX_MEMORY)]; /* a trial's update dots (PS_RED_LEN layout) */
    double ft;              /* f at the last trial, taken by its update (a launch in the
                               UPDATE phase: a.ft_in) */
    unsigned long long gen; /* pauses obeyed so far (control path) */
    unsigned long long nev; /* evaluations of this launch (the control thread's count) */
    int cmd;                /* the command read at the last control point, to obey */
    volatile int acked;     /* a pause acknowledged during an evaluation, not yet obeyed
                               (the control thread's; volatile: no other thread loads it,
                               not even speculatively) */
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
 * The scalar decisions, kept out of line: thread 0 runs the start and the
 * line search's, warp 0 the direction's and the update's (lane l owning
 * pair l), and inlined they would share the kernel's register allocation
 * with the evaluation (spilling in its inner loops).
 */
static __device__ __noinline__ void decide_start(ps_solver *S, double f, double gg)
{
    ps_solver_start(S, f, gg);
}
/* All 32 lanes of one warp (opt/lbfgs_math.h: ps_solver_direction_warp). */
static __device__ __noinline__ void decide_direction(ps_solver *S, double elapsed)
{
    ps_solver_direction_warp(S, elapsed);
}
static __device__ __noinline__ void decide_trial(ps_solver *S, double f, double dg)
{
    ps_solver_trial(S, f, dg);
}
/* by warp 0 (all 32 lanes) */
static __device__ __noinline__ void decide_update(ps_solver *S, double f, const double *red)
{
    ps_solver_update_warp(S, f, red);
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

/* ---- control of a running kernel (cuda/control.h) ---- */

/* The host's command: a system-scope acquire load from mapped memory. */
__device__ __forceinline__ int host_command(const ps_gpu_ctl *c)
{
    int v;
    asm volatile("ld.acquire.sys.b32 %0, [%1];" : "=r"(v) : "l"(&c->command) : "memory");
    return v;
}

/*
 * The same word with a relaxed system-scope load, issued early: the value
 * is waited for only where it is used, so the round trip to host memory
 * overlaps the phase's work. No data rides on a command (the host changes
 * nothing else while a kernel runs), so nothing needs acquire ordering.
 */
__device__ __forceinline__ int host_command_issue(const ps_gpu_ctl *c)
{
    int v;
    asm volatile("ld.relaxed.sys.b32 %0, [%1];" : "=r"(v) : "l"(&c->command) : "memory");
    return v;
}

/*
 * The control thread: lane 0 of the last warp of the controller block
 * (the last block: its share of every grid-stride is never larger than
 * another's, and its last warp's share never larger than another warp's;
 * warp 0 takes the block's decisions).
 */
__device__ __forceinline__ bool control_thread(const args &a)
{
    return a.ctl && (int)blockIdx.x == a.controller && threadIdx.x == ((blockDim.x - 1) & ~31u);
}

/*
 * Publish the progress snapshot (one thread): sequence odd, the fields,
 * sequence even, each step fenced at system scope so that the host never
 * takes a torn copy for a consistent one. The sequence's value lives in
 * device memory (the device is its only writer while a kernel runs).
 * publish_begin makes the sequence odd and returns its even value.
 */
__device__ inline unsigned long long publish_begin(const args &a)
{
    const unsigned long long q = *(volatile unsigned long long *)&a.cw[PS_GPU_CW_SEQ];
    ((volatile ps_gpu_ctl *)a.ctl)->seq = q + 1;
    return q;
}

/* The fields and the even sequence, after a __threadfence_system() that
 * followed publish_begin(). */
__device__ inline void publish_end(const args &a, unsigned long long q, const ps_solver &S, int state,
                                   double seconds, int idle = 0)
{
    volatile ps_gpu_ctl *c = a.ctl;
    c->iteration = S.iteration;
    c->evaluations = S.evaluations;
    c->f = S.f;
    c->gnorm = S.gnorm;
    c->step = S.iteration > 0 ? S.step : 0.0;
    c->seconds = seconds;
    c->phase = S.phase;
    c->status = S.status;
    c->state = state;
    c->idle = idle;
    __threadfence_system();
    c->seq = q + 2;
    *(volatile unsigned long long *)&a.cw[PS_GPU_CW_SEQ] = q + 2;
}

__device__ inline void publish(const args &a, const ps_solver &S, int state, double seconds, int idle = 0)
{
    const unsigned long long q = publish_begin(a);
    __threadfence_system();
    publish_end(a, q, S, state, seconds, idle);
}

/*
 * The progress of the evaluation now running (the control thread, once
 * per evaluation, when its share is done): the heartbeat, then the
 * snapshot (PAUSED still, idle 0, after a pause acknowledged with the
 * direction).
 */
__device__ inline void control_progress(const args &a, const loop_shared &L, double seconds)
{
    volatile unsigned long long *cw = a.cw;
    const unsigned long long beat = cw[PS_GPU_CW_BEAT] + 1;
    cw[PS_GPU_CW_BEAT] = beat;
    ((volatile ps_gpu_ctl *)a.ctl)->heartbeat = beat;
    publish(a, L.S, L.acked ? 1 /* PS_RUN_PAUSED */ : 0 /* PS_RUN_RUNNING */, seconds);
}

/*
 * A pause acknowledged before every block obeys it (the control thread):
 * PAUSED published with the state of the control point to come (L.S is
 * that state already), idle 0.
 */
__device__ inline void control_ack(const args &a, loop_shared &L, uint64_t now, uint64_t t0)
{
    publish(a, L.S, 1 /* PS_RUN_PAUSED */, (double)(now - t0) * 1e-9, 0);
    L.acked = 1;
}

/*
 * The control thread's command for the control point after the next
 * barrier, stored in cw[PS_GPU_CW_CMD] for every block to read; a PAUSE
 * is acknowledged at once, and an acknowledged pause that the host has
 * withdrawn since is RUNNING again (here, before the barrier, where no
 * thread changes the state yet).
 */
__device__ inline void control_post(const args &a, loop_shared &L, int cmd, uint64_t t0)
{
    *(volatile unsigned long long *)&a.cw[PS_GPU_CW_CMD] = (unsigned long long)cmd;
    if (cmd == PS_GPU_CMD_PAUSE && !L.acked) {
        control_ack(a, L, global_ns(), t0);
    } else if (cmd != PS_GPU_CMD_PAUSE && L.acked) {
        publish(a, L.S, 0 /* PS_RUN_RUNNING */, (double)(global_ns() - t0) * 1e-9);
        L.acked = 0;
    }
}

/*
 * A block has arrived at the evaluation's barrier (thread 0, with control
 * on): one relaxed add to the count the control thread watches, after the
 * arrival so that the barrier never waits for it.
 */
__device__ __forceinline__ void eval_share_done(const args &a)
{
    asm volatile("red.relaxed.gpu.global.add.u64 [%0], 1;" ::"l"(&a.cw[PS_GPU_CW_EVAL_DONE]) : "memory");
}

/*
 * The control thread, once its block has arrived at the evaluation's
 * barrier: watch the host's command until every block has (the count of
 * eval_share_done reaches this launch's evaluations times the grid). A
 * PAUSE seen here is acknowledged at once (control_ack); every block obeys
 * it at the control point to come (control_obey; the command is read
 * again for it). The count is read in a tight loop; the command's load is
 * issued ahead and looked at only after PS_GPU_WATCH_NS, by when the round
 * trip to host memory is over: the end of the evaluation is seen without
 * waiting for it.
 */
#define PS_GPU_WATCH_NS 2000u
__device__ inline void control_watch(const args &a, loop_shared &L, uint64_t t0)
{
    const volatile unsigned long long *cw = a.cw;
    const unsigned long long target = ++L.nev * gridDim.x;
    int c = host_command_issue(a.ctl);
    uint64_t issued = global_ns();
    while (cw[PS_GPU_CW_EVAL_DONE] < target) {
        const uint64_t now = global_ns();
        if (now - issued < PS_GPU_WATCH_NS)
            continue;
        if (c == PS_GPU_CMD_PAUSE && !L.acked)
            control_ack(a, L, now, t0);
        c = host_command_issue(a.ctl);
        issued = global_ns();
    }
}

/* Sleep with a growing back-off, 1 us up to 32 us. */
__device__ __forceinline__ void backoff(unsigned &ns)
{
    __nanosleep(ns);
    if (ns < 32000u)
        ns *= 2u;
}

/*
 * Obey the command of a control point (every block, after the barrier,
 * where L.S, L.ft and the device vectors are a whole solve state).
 * PAUSE: the controller stores the state (a checkpoint may be taken while
 * paused), its control thread publishes PAUSED, idle (it may have said
 * PAUSED already: control_ack), and sleeps until the host
 * changes the command; the other blocks sleep on the release word in
 * device memory. Then the new command is obeyed the same way. CANCEL ends
 * the solve (DONE, PS_CANCELLED at the last accepted point). t0 moves by
 * the time paused: pauses do not count as solve time. Returns the command
 * obeyed last (YIELD: the caller stores the state and the kernel exits;
 * CANCEL: the state is DONE), the same in every thread, so that no thread
 * reads the state that thread 0 changes next.
 */
__device__ inline int obey(const args &a, loop_shared &L, uint64_t &t0)
{
    ps_solver &S = L.S;
    int cmd = L.cmd;
    __syncthreads(); /* every thread has taken the command before it changes */
    while (cmd == PS_GPU_CMD_PAUSE) {
        const uint64_t p0 = global_ns();
        const bool ctrl = (int)blockIdx.x == a.controller;
        /* the thread that waits: the control thread in the controller
         * block (the one thread that reads the host's commands and writes
         * the snapshot), thread 0 in the others */
        const bool waiter = ctrl ? control_thread(a) : threadIdx.x == 0;
        unsigned long long q = 0;
        if (ctrl) {
            /* the snapshot made odd first, so that one fence serves both
             * it and the stored state */
            if (waiter) {
                q = publish_begin(a);
                a.eval_out[1] = L.ft; /* f at an accepted trial (UPDATE) */
            }
            state_copy(a.state, &S);
        }
        __threadfence_system(); /* the state and the history, for a copy while paused */
        __syncthreads();
        if (waiter) {
            volatile unsigned long long *cw = a.cw;
            const unsigned long long gen = ++L.gen;
            unsigned ns = 1000u;
            if (ctrl) {
                const double sec = (double)(p0 - t0) * 1e-9;
                publish_end(a, q, S, 1 /* PS_RUN_PAUSED */, sec, 1 /* idle */);
                L.acked = 0;
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
    return cmd;
}

/*
 * The control point, after the barrier that follows the control thread's
 * store of the command into cw[PS_GPU_CW_CMD]: thread 0 takes the command
 * into L.cmd (with the sums: eval_scalars), and after the next
 * __syncthreads every block obeys it (control_obey). Returns EV_DONE (go
 * on), EV_YIELD (store the state and exit) or EV_STOPPED (cancelled: the
 * state is DONE).
 */
enum { EV_DONE = 0, EV_YIELD = 1, EV_STOPPED = 2 };

__device__ inline int control_obey(const args &a, loop_shared &L, uint64_t &t0)
{
    if (L.cmd == PS_GPU_CMD_NONE)
        return EV_DONE;
    const int cmd = obey(a, L, t0);
    return cmd == PS_GPU_CMD_YIELD ? EV_YIELD : cmd == PS_GPU_CMD_CANCEL ? EV_STOPPED : EV_DONE;
}

/*
 * The scalars of an evaluation from the per-block partials of G blocks,
 * the same fixed order in every block (and in the host-driven variant's
 * one-block kernel): L.sums[0] = g.d, [1] = g.g, [2] = b.b (RF power),
 * [3] = f = loss + lambda b.b; with dots (a trial), also the update's
 * dots into L.red, their g.g copied from L.sums[1]. With cmd >= 0 (thread
 * 0's value), L.cmd = cmd for the whole block too.
 */
__device__ inline void eval_scalars(const args &a, int G, bool dots, loop_shared &L, int cmd = -1)
{
    const int m = a.memory, Q = 4 + (dots ? 4 * m : 0), GD = dot_blocks(a.nt, G);
    const int warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
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
        L.sums[3] += a.lambda * L.sums[2];
        L.red[4 * m] = L.sums[1];
        if (cmd >= 0)
            L.cmd = cmd;
    }
    __syncthreads();
}

/*
 * Evaluate at x + alpha d into gout; leaves the scalars of eval_scalars()
 * in every block's L.sums (and L.red). ns >= 0 (a trial): the update's dots for the
 * pair that slot ns would take too (trial_dots). Two barriers. With a.ctl,
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
template <typename R>
__device__ int evaluate_and_reduce(const args &a, cg::grid_group &grid, loop_shared &L,
                                   const double *d, double alpha, int ns, double *gout, char *smem,
                                   uint64_t &t0, uint64_t &last)
{
    evaluate<R>(a, a.x, d, alpha, true, smem);
    if (a.ctl) {
        /* the grid barrier split: every block arrives, then says so
         * (eval_share_done); the control thread watches the host's command
         * until all have, its block's wait not delaying the others' */
        cg::grid_group::arrival_token token = grid.barrier_arrive();
        if (threadIdx.x == 0)
            eval_share_done(a);
        if (control_thread(a)) {
            control_progress(a, L, (double)(global_ns() - t0) * 1e-9);
            control_watch(a, L, t0);
        }
        grid.barrier_wait(std::move(token));
    } else {
        grid.sync();
    }
    prof_mark(a, last, PS_PROF_EVAL);
    int cmd = 0;
    if (control_thread(a))
        cmd = host_command_issue(a.ctl);
    reduce_gradient(a, a.x, d, alpha, gout, (double *)smem, a.rpart + (size_t)blockIdx.x * PS_GPU_RP);
    prof_mark(a, last, PS_PROF_REDUCE);
    if (ns >= 0)
        trial_dots(a, alpha, ns, gout, (double *)smem);
    if (blockIdx.x == 0 && threadIdx.x == 0 && ns >= 0)
        *a.elapsed = (double)(global_ns() - t0) * 1e-9;
    if (control_thread(a))
        control_post(a, L, cmd, t0);
    grid.sync();
    prof_mark(a, last, PS_PROF_UPDATE);
    /* the command for the control point, its load overlapping the sums' */
    int posted = -1;
    if (a.ctl && threadIdx.x == 0)
        posted = (int)*(volatile unsigned long long *)&a.cw[PS_GPU_CW_CMD];
    eval_scalars(a, gridDim.x, ns >= 0, L, posted);
    prof_mark(a, last, PS_PROF_SUMS);
    if (a.ctl) {
        // ---- control point (the evaluation changed no state: still before its decision) ----
        const int ev = control_obey(a, L, t0);
        if (ev != EV_DONE)
            return ev;
    }
    return EV_DONE;
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
    __syncthreads();
    prof_mark(a, last, PS_PROF_DECIDE_UPDATE);
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
 * and the in-kernel time of the evaluation in *a.elapsed.
 */
template <typename R>
__device__ int solve_phases(const args &a, cg::grid_group &grid, loop_shared &L, char *smem,
                            uint64_t &t0, uint64_t &last, double elapsed, bool one_iteration)
{
    ps_solver &S = L.S;
    double *sums = L.sums;
    /* an accepted step whose vectors have not moved yet (slot -1: none);
     * the same in every thread */
    double pend_alpha = 0.0;
    int pend_slot = -1;

    if (S.phase == PS_PHASE_START) {
        // ---- evaluate at the start point ----
        const int ev = evaluate_and_reduce<R>(a, grid, L, nullptr, 0.0, -1, a.g, smem, t0, last);
        if (ev == EV_YIELD)
            return 1;
        if (ev == EV_STOPPED)
            return 0;
        if (a.mode == MODE_EVAL) {
            if (blockIdx.x == 0 && threadIdx.x == 0) {
                a.eval_out[0] = sums[3];
                *a.elapsed = (double)(global_ns() - t0) * 1e-9;
            }
            return 0;
        }
        if (threadIdx.x == 0) {
            decide_start(&S, sums[3], sums[1]);
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
        if (phase == PS_PHASE_DIRECTION) {
            // ---- direction (warp 0) ----
            if (threadIdx.x < 32)
                decide_direction(&S, elapsed);
            __syncthreads();
            prof_mark(a, last, PS_PROF_DECIDE_DIRECTION);
            if (S.phase != PS_PHASE_TRIAL)
                continue; /* DONE */
            int cmd = 0;
            if (control_thread(a))
                cmd = host_command_issue(a.ctl);
            form_direction(a, &S.lb, pend_alpha, pend_slot);
            pend_slot = -1;
            /* a pause read here is acknowledged (the state will not move:
             * the trial's evaluation changes none) and obeyed at the
             * evaluation's control point, which reads the command again */
            if (control_thread(a) && cmd == PS_GPU_CMD_PAUSE && !L.acked)
                control_ack(a, L, global_ns(), t0);
            grid.sync();
            prof_mark(a, last, PS_PROF_DIRECTION);
        } else if (phase == PS_PHASE_TRIAL) {
            // ---- line search trial, with the update's dots ----
            const int ev = evaluate_and_reduce<R>(a, grid, L, a.d, alpha, ns, a.gt, smem, t0, last);
            if (ev == EV_YIELD)
                return 1;
            if (ev == EV_STOPPED)
                continue; /* DONE */
            if (threadIdx.x == 0) {
                L.ft = sums[3]; /* f at the trial, kept for the update */
                decide_trial(&S, sums[3], sums[0]);
            }
            __syncthreads();
            prof_mark(a, last, PS_PROF_DECIDE_TRIAL);
            const bool accepted = S.phase == PS_PHASE_UPDATE;
            __syncthreads(); /* every thread has the decision before the update changes it */
            if (accepted && take_update(a, L, last, elapsed, alpha, ns, one_iteration, pend_alpha, pend_slot))
                return 0; /* one iteration done */
        } else {
            // ---- update of a launch in the UPDATE phase (from a checkpoint
            // of the CPU backend): the partials the trial's reduction would
            // have left were made by update_partials_kernel before the launch ----
            if (blockIdx.x == 0 && threadIdx.x == 0)
                *a.elapsed = (double)(global_ns() - t0) * 1e-9;
            grid.sync();
            eval_scalars(a, gridDim.x, true, L);
            if (take_update(a, L, last, elapsed, alpha, ns, one_iteration, pend_alpha, pend_slot))
                return 0; /* one iteration done */
        }
    }
    return 0;
}

} // namespace ps_gpu

#endif /* PS_SRC_GPU_LOOP_CUH */
