/*
 * The device side of the control protocol (cuda/control.h): the control
 * thread reads the host's command, publishes progress snapshots and
 * heartbeats, acknowledges and obeys pauses, yields and cancels at the
 * control points of the solve loop (cuda/loop.cuh). No result depends on
 * any of it: the solve's bits are the same with control on or off.
 */
#ifndef PS_SRC_CUDA_CONTROL_CUH
#define PS_SRC_CUDA_CONTROL_CUH

#include <cooperative_groups.h>
#include <stdint.h>
#include <utility>

#include "cuda/args.cuh"
#include "cuda/launch.h"
#include "cuda/ranks.cuh"
#include "cuda/team.cuh"

namespace ps_gpu {

namespace cg = cooperative_groups;

/* What one block keeps in shared memory across the phases. */
struct loop_shared {
    ps_solver S;            /* the block's copy of the solver state */
    double sums[4];         /* last evaluation: g.d, g.g, b.b, f */
    double viol;            /* last evaluation: the largest relative violation of the
                               penalty constraints (0: none or met) */
    double red[PS_RED_LEN(PS_MAX_MEMORY)]; /* a trial's update dots (PS_RED_LEN layout) */
    double ft;              /* f at the last trial, taken by its update (a launch in the
                               UPDATE phase: a.ft_in) */
    unsigned long long gen; /* pauses obeyed so far (control path) */
    unsigned long long nev; /* evaluations of this launch (the control thread's count) */
    int cmd;                /* the command read at the last control point, to obey */
    volatile int acked;     /* a pause acknowledged during an evaluation, not yet obeyed
                               (the control thread's; volatile: no other thread loads it,
                               not even speculatively) */
    double gpen[4];         /* last evaluation, designed axes (a.gteam): each axis's
                               penalty at mu = 1, then the largest violation (eval_scalars) */
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
    c->round = S.round;
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
    const unsigned long long target = ++L.nev * (unsigned long long)a.nteam;
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
 * changes the command (several GPUs: rank 0's host; the other ranks'
 * controllers wait for rank 0's release); the other blocks sleep on the
 * release word in device memory. Then the new command is obeyed the same way. CANCEL ends
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
    if (a.batch && cmd == PS_GPU_CMD_PAUSE)
        cmd = PS_GPU_CMD_YIELD; /* a batch's problem parks, and its team moves on */
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
                if (a.rk.on && a.rk.rank > 0) { /* rank 0 ends the pause (cuda/ranks.cuh) */
                    unsigned long long w;
                    while (((w = ranks_release_load(a.rk)) >> 3) != gen)
                        backoff(ns);
                    c = (int)(w & 7u);
                } else {
                    while ((c = host_command(a.ctl)) == PS_GPU_CMD_PAUSE)
                        backoff(ns);
                    if (a.rk.on)
                        ranks_release(a.rk, gen, c);
                }
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

/* ---- the barriers of the solve loop, with what control and the profile
 * do at each (cuda/loop.cuh places them) ---- */

/* Benchmark profile: block 0 adds the time since the last mark to prof[i]. */
__device__ __forceinline__ void prof_mark(const args &a, uint64_t &last, int i)
{
    if (a.prof && team_rank(a) == 0 && threadIdx.x == 0) {
        uint64_t now = global_ns();
        a.prof[i] += now - last;
        last = now;
    }
}

/* The block's barrier after a decision, then profile mark `mark`. */
__device__ __forceinline__ void block_barrier(const args &a, uint64_t &last, int mark)
{
    __syncthreads();
    prof_mark(a, last, mark);
}

/* The control thread issues its read of the host's command (0 elsewhere
 * or without control), to be used after the phase that follows. */
__device__ __forceinline__ int control_issue(const args &a)
{
    return control_thread(a) ? host_command_issue(a.ctl) : 0;
}

/* The command the control thread posted before the last barrier (thread
 * 0 of every block, with control on; -1 otherwise). */
__device__ __forceinline__ int control_posted(const args &a)
{
    return a.ctl && threadIdx.x == 0 ? (int)*(volatile unsigned long long *)&a.cw[PS_GPU_CW_CMD] : -1;
}

/*
 * The evaluation's grid barrier, then profile mark `mark`. With control
 * on the barrier is split: every block arrives, then says so
 * (eval_share_done); the control thread publishes the progress and
 * watches the host's command until all have (control_watch), its block's
 * wait not delaying the others'.
 */
__device__ __forceinline__ void eval_barrier(const args &a, cg::grid_group &grid, loop_shared &L, uint64_t t0,
                                             uint64_t &last, int mark)
{
    if (a.ctl) {
        team_token token = team_arrive(a, grid);
        if (threadIdx.x == 0)
            eval_share_done(a);
        if (control_thread(a)) {
            control_progress(a, L, (double)(global_ns() - t0) * 1e-9);
            control_watch(a, L, t0);
        }
        team_wait(a, grid, token);
    } else {
        team_sync(a, grid);
    }
    prof_mark(a, last, mark);
}

/* The reduction's grid barrier, the control thread having posted the
 * command cmd (control_issue's) for the control point after it; then
 * profile mark `mark`. */
__device__ __forceinline__ void reduce_barrier(const args &a, cg::grid_group &grid, loop_shared &L, int cmd,
                                               uint64_t t0, uint64_t &last, int mark)
{
    if (control_thread(a))
        control_post(a, L, cmd, t0);
    team_sync(a, grid);
    prof_mark(a, last, mark);
}

/* The direction's grid barrier; a pause read with the direction (cmd,
 * control_issue's) is acknowledged before it (the state will not move:
 * the trial's evaluation changes none) and obeyed at the evaluation's
 * control point, which reads the command again. Then profile mark `mark`. */
__device__ __forceinline__ void direction_barrier(const args &a, cg::grid_group &grid, loop_shared &L, int cmd,
                                                  uint64_t t0, uint64_t &last, int mark)
{
    if (control_thread(a) && cmd == PS_GPU_CMD_PAUSE && !L.acked)
        control_ack(a, L, global_ns(), t0);
    team_sync(a, grid);
    prof_mark(a, last, mark);
}

} // namespace ps_gpu

#endif /* PS_SRC_CUDA_CONTROL_CUH */
