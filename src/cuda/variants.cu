/*
 * The comparison variants of the GPU solve (README, `persolve bench`):
 * the same phases (cuda/phases.cuh), the same solver state machine
 * (opt/solver.h) and the same launch shape (grid G, block, spins per tile,
 * segments, gv) as the persistent kernel, so the per-block partials, every
 * reduction and therefore every iterate are bit-identical to it. What
 * differs is who sequences the phases.
 *
 * (a) host loop: ordinary kernel launches per phase, data kept on the
 *     device. After each evaluation a one-block kernel sums the per-block
 *     partials in the fixed order and takes the solver's decisions (the
 *     trial; if accepted, the update from the dots the reduction took and
 *     the next direction); it writes the outcome (phase, next trial step,
 *     the accepted step still to apply) into mapped pinned memory and the
 *     host, after a stream synchronization, launches the next phase. Per
 *     iteration with one trial: 4 launches and 1 host round trip.
 *     The ps_solver_* calls run in that kernel (thread 0; the direction:
 *     warp 0) rather than on the host, so that all three variants take
 *     every decision with the same device code, compiled with the same
 *     flags (the CUDA build contracts nothing, --fmad=false in meson.build,
 *     and the direction runs in its warp form). The host still waits for
 *     every decision.
 * (b) graph: a CUDA graph whose conditional WHILE node has one cooperative
 *     kernel as its body; each pass loads the solver state from device
 *     memory, runs one iteration of the shared loop (cuda/loop.cuh; the first
 *     pass also evaluates the start point), stores the state and sets the
 *     condition to "not DONE". One graph launch per solve.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "cuda/context.cuh"
#include "cuda/launch.h"
#include "cuda/loop.cuh"
#include "cuda/phases.cuh"

extern "C" {
#include "common/log.h"
}

using namespace ps_gpu;

/* ------------------------------------------------------------------------ */
/* (a) host-driven loop                                                     */
/* ------------------------------------------------------------------------ */

/* What the decision kernel reports to the host (mapped pinned memory). */
struct hl_report {
    int phase;        /* PS_PHASE_* after the decision */
    int slot;         /* slot of the next pair (the next trial's update dots) */
    double alpha;     /* the next trial step */
    int apply_slot;   /* an accepted step to apply: its pair's slot, or -1 */
    double apply_alpha;
};

enum { HL_START = 0, HL_TRIAL = 1 };

/* Designed axes, a.gteam: the waveforms at x + alpha d (cuda/gradient.cuh), step
 * 1 (waveform_totals) or 2 (waveform_rows, at the round's penalty
 * weight), one launch each before the evaluation's. */
template <typename R>
__global__ void __launch_bounds__(PS_GPU_MAX_THREADS) host_waveform_kernel(args a, const double *d, double alpha,
                                                                            int step)
{
    __shared__ double scr[PS_GPU_DG_SCRATCH];
    if (step == 1)
        waveform_totals(a, a.x, d, alpha, scr);
    else
        waveform_rows<R>(a, a.x, d, alpha, a.state->mu, true, scr);
}

/* Evaluate at x + alpha d: per-block partial gradients and losses (NCH:
 * the single-channel or the channels evaluation, cuda/evaluate.cuh; DG:
 * with designed gradient axes, a.gteam: after host_waveform_kernel's two
 * steps). */
template <typename R, int MINB, int NCH, int DG>
__global__ void __launch_bounds__(PS_GPU_MAX_THREADS, MINB)
host_evaluate_kernel(args a, const double *d, double alpha)
{
    extern __shared__ __align__(16) char smem[];
    evaluate<R, NCH, DG>(a, a.x, d, alpha, true, smem, DG ? a.state->mu : 0.0);
    sar_partials<NCH>(a, a.x, d, alpha);
}

/* Gradient into gout and the per-block partials of gout.d, gout.gout, b.b;
 * for a trial (slot >= 0) the update's dots too. */
template <int NCH, int DG>
__global__ void __launch_bounds__(PS_GPU_MAX_THREADS)
host_reduce_kernel(args a, const double *d, double alpha, int slot, double *gout)
{
    extern __shared__ __align__(16) char smem[];
    reduce_gradient<NCH, DG>(a, block_rows(a), a.x, d, alpha, a.state->mu, gout, (double *)smem,
                             a.rpart + (size_t)blockIdx.x * PS_GPU_RP);
    if (slot >= 0)
        trial_dots<NCH, DG>(a, alpha, slot, gout, (double *)smem);
}

/* The accepted step (slot >= 0), then d from the coefficients the last
 * decision left in the state (form), or the step alone. */
__global__ void __launch_bounds__(PS_GPU_MAX_THREADS) host_direction_kernel(args a, double alpha, int slot,
                                                                             int form)
{
    if (form)
        form_direction(a, &a.state->lb, alpha, slot);
    else
        apply_pass(a, alpha, slot);
}

/*
 * One block: the fixed-order sums of the partials of G blocks, then the
 * solver's decisions, as the persistent kernel takes them (what: HL_START,
 * or HL_TRIAL with the trial's update dots, for the pair of slot `slot`
 * and step alpha); after START and an accepted trial's update also the
 * next direction's decision. seconds: host time since the solve began
 * (history, time limit). NCH, DG: the evaluation's kernel class (the
 * blocks that hold update dots, the penalties).
 */
template <int NCH, int DG>
__global__ void __launch_bounds__(PS_GPU_MAX_THREADS)
host_decide_kernel(args a, int G, int what, int slot, double alpha, double seconds, hl_report *out)
{
    __shared__ loop_shared L;
    ps_solver &S = L.S;
    state_copy(&S, a.state);
    __syncthreads();
    /* the persistent kernel's clock before the first update */
    const double elapsed = what == HL_START && S.iteration == 0 ? 0.0 : seconds;
    eval_scalars<NCH, DG>(a, G, what == HL_TRIAL, L); /* the penalties if the problem has them */
    /* thread 0 alone reads and writes S until the warp's barrier */
    if (threadIdx.x == 0) {
        if (what == HL_START) {
            const bool row = !S.restart; /* a new penalty round's start has no row */
            decide_start(&S, L.sums[3], L.sums[1], L.viol);
            if (row)
                record(a, S, seconds);
        } else {
            L.ft = L.sums[3];
            decide_trial(&S, L.sums[3], L.sums[0], L.viol);
        }
    }
    /* the update and the direction by the whole warp 0 */
    if (threadIdx.x < 32) {
        __syncwarp(); /* thread 0's decision, for the warp */
        const bool accepted = S.phase == PS_PHASE_UPDATE;
        if (accepted) {
            decide_update(&S, L.ft, L.red);
            record(a, S, seconds);
        }
        if (S.phase == PS_PHASE_DIRECTION)
            decide_direction(&S, elapsed);
        if (threadIdx.x == 0) {
            out->apply_slot = accepted ? slot : -1;
            out->apply_alpha = alpha;
        }
    }
    __syncthreads();
    state_copy(a.state, &S);
    if (threadIdx.x == 0) {
        out->phase = S.phase;
        out->slot = ps_lbfgs_next_slot(&S.lb);
        out->alpha = S.ls.alpha;
    }
}

template <typename R, int NCH, int DG>
static int host_loop_t(context *c, const ps_options *o, double *ms)
{
    int st = PS_CONVERGED;
    const args &a = c->a;
    const int G = c->cfg.grid, tb = c->cfg.block, gv = a.gv;
    const size_t smem = c->smem, smem_r = reduce_smem_bytes(tb);
    void (*eval_k)(args, const double *, double) =
        c->cfg.regcap ? host_evaluate_kernel<R, 2, NCH, DG> : host_evaluate_kernel<R, 1, NCH, DG>;
    timed_stream ts = {};
    hl_report *rep = NULL, *drep = NULL;
    hl_report r;
    int fresh = 0; /* a new direction was decided: form d before its first trial */
    double t0;

    CUDA_TRY(o, cudaFuncSetAttribute((const void *)eval_k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
             PS_ERR_GPU_LAUNCH);
    st = timed_stream_create(&ts, o);
    if (st)
        goto out;
    CUDA_TRY(o, cudaHostAlloc((void **)&rep, sizeof *rep, cudaHostAllocMapped), PS_ERR_GPU_MEMORY);
    CUDA_TRY(o, cudaHostGetDevicePointer((void **)&drep, rep, 0), PS_ERR_GPU_LAUNCH);

    t0 = wall_seconds();
    CUDA_TRY(o, cudaEventRecord(ts.ev0, ts.s), PS_ERR_GPU_LAUNCH);
    memset(&r, 0, sizeof r);
    r.phase = PS_PHASE_START;
    r.apply_slot = -1;
    for (;;) {
        const int was_start = r.phase == PS_PHASE_START;
        if (r.phase == PS_PHASE_START) {
            // ---- evaluate at the start point, or at x for a new penalty
            // round (after the last accepted step of the round before) ----
            if (r.apply_slot >= 0)
                host_direction_kernel<<<gv, tb, 0, ts.s>>>(a, r.apply_alpha, r.apply_slot, 0);
            if (DG && team_waveform<NCH>(a))
                for (int step = 1; step <= 2; step++)
                    host_waveform_kernel<R><<<G, tb, 0, ts.s>>>(a, nullptr, 0.0, step);
            eval_k<<<G, tb, smem, ts.s>>>(a, nullptr, 0.0);
            host_reduce_kernel<NCH, DG><<<G, tb, smem_r, ts.s>>>(a, nullptr, 0.0, -1, a.g);
            host_decide_kernel<NCH, DG><<<1, tb, 0, ts.s>>>(a, G, HL_START, -1, 0.0, wall_seconds() - t0, drep);
        } else if (r.phase == PS_PHASE_TRIAL) {
            // ---- the accepted step and the direction (once per iteration),
            // line search trial with the update's dots ----
            if (fresh)
                host_direction_kernel<<<gv, tb, 0, ts.s>>>(a, r.apply_alpha, r.apply_slot, 1);
            if (DG && team_waveform<NCH>(a))
                for (int step = 1; step <= 2; step++)
                    host_waveform_kernel<R><<<G, tb, 0, ts.s>>>(a, a.d, r.alpha, step);
            eval_k<<<G, tb, smem, ts.s>>>(a, a.d, r.alpha);
            host_reduce_kernel<NCH, DG><<<G, tb, smem_r, ts.s>>>(a, a.d, r.alpha, r.slot, a.gt);
            host_decide_kernel<NCH, DG><<<1, tb, 0, ts.s>>>(a, G, HL_TRIAL, r.slot, r.alpha, wall_seconds() - t0,
                                                   drep);
        } else if (r.phase == PS_PHASE_DONE) {
            if (r.apply_slot >= 0) /* the last accepted step */
                host_direction_kernel<<<gv, tb, 0, ts.s>>>(a, r.apply_alpha, r.apply_slot, 0);
            break;
        } else {
            ps_log(o, PS_LOG_ERROR, __FILE__, __LINE__, "host loop: unexpected solver phase %d", r.phase);
            st = PS_ERR_GPU_LAUNCH;
            goto out;
        }
        CUDA_TRY(o, cudaGetLastError(), PS_ERR_GPU_LAUNCH);
        CUDA_TRY(o, cudaStreamSynchronize(ts.s), PS_ERR_GPU_LAUNCH);
        memcpy(&r, rep, sizeof r); /* written by the decision kernel before the sync */
        /* a start or an update: a new direction was decided */
        fresh = was_start || r.apply_slot >= 0;
    }
    CUDA_TRY(o, cudaGetLastError(), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaEventRecord(ts.ev1, ts.s), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaEventSynchronize(ts.ev1), PS_ERR_GPU_LAUNCH);
    *ms = timed_stream_ms(&ts);
out:
    if (rep)
        cudaFreeHost(rep);
    timed_stream_destroy(&ts);
    return st;
}

template <int DG> static int host_loop_of(context *c, const ps_options *o, double *ms)
{
    if (c->channels == 8)
        return c->precision == PS_PRECISION_DOUBLE ? host_loop_t<double, 8, DG>(c, o, ms)
                                                   : host_loop_t<float, 8, DG>(c, o, ms);
    if (c->channels)
        return c->precision == PS_PRECISION_DOUBLE ? host_loop_t<double, 1, DG>(c, o, ms)
                                                   : host_loop_t<float, 1, DG>(c, o, ms);
    return c->precision == PS_PRECISION_DOUBLE ? host_loop_t<double, 0, DG>(c, o, ms)
                                               : host_loop_t<float, 0, DG>(c, o, ms);
}

int ps_gpu::solve_host_loop(context *c, const ps_options *o, double *ms)
{
    return c->designed ? host_loop_of<1>(c, o, ms) : host_loop_of<0>(c, o, ms);
}

/* ------------------------------------------------------------------------ */
/* (b) CUDA graph with a conditional WHILE node                              */
/* ------------------------------------------------------------------------ */

/*
 * The body of the WHILE node: one iteration of the shared loop from the
 * state in device memory (the first pass starts with the start
 * evaluation), then the state back and the loop condition.
 */
template <typename R, int MINB, int NCH, int DG>
__global__ void __launch_bounds__(PS_GPU_MAX_THREADS, MINB)
graph_iteration_kernel(args a, unsigned long long *clock0, cudaGraphConditionalHandle cond)
{
    cg::grid_group grid = cg::this_grid();
    if (!grid.is_valid())
        __trap(); /* launched without the cooperative attribute */
    extern __shared__ __align__(16) char smem[];
    __shared__ loop_shared L;
    const uint64_t now = global_ns();
    uint64_t last = now;
    state_copy(&L.S, a.state);
    __syncthreads();
    /* the solve's clock starts with the first pass (only block 0 uses it) */
    const bool first = L.S.phase == PS_PHASE_START && !L.S.restart;
    uint64_t t0 = first ? now : *(volatile unsigned long long *)clock0;
    if (first && blockIdx.x == 0 && threadIdx.x == 0)
        *clock0 = now;

    if (L.S.phase != PS_PHASE_DONE) {
        // ---- one iteration (cuda/loop.cuh) ----
        solve_phases<R, NCH, DG>(a, grid, L, smem, t0, last, *(volatile double *)a.elapsed, true);
        // ---- the state back for the next pass ----
        if (L.S.phase == PS_PHASE_DONE)
            grid.sync(); /* a pass that stopped at once had no barrier: all blocks have read the state */
        if (blockIdx.x == 0)
            state_copy(a.state, &L.S);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0)
        cudaGraphSetConditional(cond, L.S.phase != PS_PHASE_DONE ? 1u : 0u);
    /* The next pass is a new launch on the same shared memory, and it
     * starts by writing L.S: racecheck does not see the launch boundary of
     * a WHILE node's body, so the last reads of L.S end at a barrier. */
    __syncthreads();
}

template <typename R, int NCH, int DG>
static int graph_t(context *c, const ps_options *o, double *ms)
{
    int st = PS_CONVERGED;
    const int G = c->cfg.grid, tb = c->cfg.block;
    void *k = c->cfg.regcap ? (void *)graph_iteration_kernel<R, 2, NCH, DG>
                            : (void *)graph_iteration_kernel<R, 1, NCH, DG>;
    timed_stream ts = {};
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaGraphConditionalHandle cond;
    cudaGraphNode_t wnode = NULL, knode = NULL;
    cudaGraphNodeParams cp = {}, kp = {}; /* zeroed, as the API requires */
    cudaLaunchAttributeValue coop;
    cudaGraph_t body;
    void *params[] = {&c->a, &c->d_clock, &cond};
    int bps = 0, sms = 0, dev = 0;

    /* the body kernel must fit the persistent kernel's grid co-resident */
    CUDA_TRY(o, cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c->smem),
             PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, k, tb, c->smem), PS_ERR_GPU_LAUNCH);
    cudaGetDevice(&dev);
    CUDA_TRY(o, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), PS_ERR_GPU_LAUNCH);
    if (bps * sms < G) {
        ps_log(o, PS_LOG_ERROR, __FILE__, __LINE__,
               "graph variant: its kernel fits %d co-resident blocks, the launch shape has %d", bps * sms, G);
        st = PS_ERR_GPU_LAUNCH;
        goto out;
    }
    st = timed_stream_create(&ts, o);
    if (st)
        goto out;

    /* graph: WHILE (cond) { graph_iteration_kernel }, cond = 1 at each launch */
    CUDA_TRY(o, cudaGraphCreate(&graph, 0), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaGraphConditionalHandleCreate(&cond, graph, 1, cudaGraphCondAssignDefault), PS_ERR_GPU_LAUNCH);
    cp.type = cudaGraphNodeTypeConditional;
    cp.conditional.handle = cond;
    cp.conditional.type = cudaGraphCondTypeWhile;
    cp.conditional.size = 1;
    CUDA_TRY(o, cudaGraphAddNode(&wnode, graph, NULL, NULL, 0, &cp), PS_ERR_GPU_LAUNCH);
    body = cp.conditional.phGraph_out[0];

    kp.type = cudaGraphNodeTypeKernel;
    kp.kernel.func = k;
    kp.kernel.gridDim = dim3(G);
    kp.kernel.blockDim = dim3(tb);
    kp.kernel.sharedMemBytes = (unsigned)c->smem;
    kp.kernel.kernelParams = params;
    CUDA_TRY(o, cudaGraphAddNode(&knode, body, NULL, NULL, 0, &kp), PS_ERR_GPU_LAUNCH);
    memset(&coop, 0, sizeof coop);
    coop.cooperative = 1;
    if (cudaGraphKernelNodeSetAttribute(knode, cudaLaunchAttributeCooperative, &coop) != cudaSuccess) {
        /* older drivers: capture a cooperative launch into the body instead */
        cudaGetLastError();
        ps_log(o, PS_LOG_INFO, __FILE__, __LINE__, "graph variant: capturing the cooperative body kernel");
        CUDA_TRY(o, cudaGraphDestroyNode(knode), PS_ERR_GPU_LAUNCH);
        CUDA_TRY(o, cudaStreamBeginCaptureToGraph(ts.s, body, NULL, NULL, 0, cudaStreamCaptureModeRelaxed),
                 PS_ERR_GPU_LAUNCH);
        CUDA_TRY(o, cudaLaunchCooperativeKernel(k, dim3(G), dim3(tb), params, c->smem, ts.s), PS_ERR_GPU_LAUNCH);
        CUDA_TRY(o, cudaStreamEndCapture(ts.s, &body), PS_ERR_GPU_LAUNCH);
    }
    CUDA_TRY(o, cudaGraphInstantiate(&exec, graph, 0), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaGraphUpload(exec, ts.s), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaStreamSynchronize(ts.s), PS_ERR_GPU_LAUNCH);

    // ---- the solve: one graph launch ----
    CUDA_TRY(o, cudaEventRecord(ts.ev0, ts.s), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaGraphLaunch(exec, ts.s), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaEventRecord(ts.ev1, ts.s), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaStreamSynchronize(ts.s), PS_ERR_GPU_LAUNCH);
    *ms = timed_stream_ms(&ts);
out:
    if (exec)
        cudaGraphExecDestroy(exec);
    if (graph)
        cudaGraphDestroy(graph);
    timed_stream_destroy(&ts);
    return st;
}

template <int DG> static int graph_of(context *c, const ps_options *o, double *ms)
{
    if (c->channels == 8)
        return c->precision == PS_PRECISION_DOUBLE ? graph_t<double, 8, DG>(c, o, ms)
                                                   : graph_t<float, 8, DG>(c, o, ms);
    if (c->channels)
        return c->precision == PS_PRECISION_DOUBLE ? graph_t<double, 1, DG>(c, o, ms)
                                                   : graph_t<float, 1, DG>(c, o, ms);
    return c->precision == PS_PRECISION_DOUBLE ? graph_t<double, 0, DG>(c, o, ms) : graph_t<float, 0, DG>(c, o, ms);
}

int ps_gpu::solve_graph(context *c, const ps_options *o, double *ms)
{
    return c->designed ? graph_of<1>(c, o, ms) : graph_of<0>(c, o, ms);
}
