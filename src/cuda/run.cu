/*
 * A GPU run that the host can steer while its persistent kernel runs
 * (cuda/run.h): the device data of cuda/context.cuh, a control block in
 * mapped pinned host memory (cuda/control.h) and the device words of the
 * control path. The kernel is launched on the run's own non-blocking
 * stream, so the host may read the control block, copy a paused kernel's
 * state for a checkpoint and run other work meanwhile.
 */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/context.cuh"
#include "cuda/run.cuh"
#include "cuda/launch.h"
#include "cuda/phases.cuh"

extern "C" {
#include "common/log.h"
#include "cuda/gpu.h"
#include "cuda/run.h"
}

using namespace ps_gpu;

extern "C" int ps_gpu_run_create(const ps_problem *p, const ps_options *o, const ps_gpu_config *cfg,
                                 const double *z, ps_gpu_run **out)
{
    int st = PS_CONVERGED;
    ps_gpu_ctl *dctl = NULL;
    *out = NULL;
    ps_gpu_run *g = (ps_gpu_run *)calloc(1, sizeof *g);
    if (!g)
        return PS_ERR_NO_MEMORY;
    g->o = *o;
    st = context_create(p, o, cfg, MODE_SOLVE, z, 0, &g->c);
    if (st) {
        free(g);
        return st;
    }
    CUDA_TRY(o, cudaHostAlloc((void **)&g->ctl, sizeof(ps_gpu_ctl), cudaHostAllocMapped), PS_ERR_GPU_MEMORY);
    memset(g->ctl, 0, sizeof(ps_gpu_ctl));
    CUDA_TRY(o, cudaHostGetDevicePointer((void **)&dctl, g->ctl, 0), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMalloc(&g->cw, PS_GPU_CW_LEN * sizeof(unsigned long long)), PS_ERR_GPU_MEMORY);
    CUDA_TRY(o, cudaMemset(g->cw, 0, PS_GPU_CW_LEN * sizeof(unsigned long long)), PS_ERR_GPU_LAUNCH);
    st = timed_stream_create(&g->ks, o);
    if (st)
        goto out;
    CUDA_TRY(o, cudaStreamCreateWithFlags(&g->copies, cudaStreamNonBlocking), PS_ERR_GPU_LAUNCH);
    g->c.a.ctl = dctl;
    g->c.a.cw = g->cw;
    g->c.a.controller = g->c.cfg.grid - 1; /* idle in the vector phases when the grid is larger than gv */
    *out = g;
    return PS_CONVERGED;
out:
    ps_gpu_run_free(g);
    return st;
}

extern "C" void ps_gpu_run_free(ps_gpu_run *g)
{
    if (!g)
        return;
    if (__atomic_load_n(&g->launched, __ATOMIC_ACQUIRE))
        cudaStreamSynchronize(g->ks.s);
    timed_stream_destroy(&g->ks);
    if (g->copies)
        cudaStreamDestroy(g->copies);
    cudaFree(g->cw);
    if (g->ctl)
        cudaFreeHost(g->ctl);
    context_destroy(&g->c);
    cudaGetLastError();
    free(g);
}

extern "C" void ps_gpu_run_command(ps_gpu_run *g, int cmd)
{
    __atomic_store_n(&g->ctl->command, cmd, __ATOMIC_RELEASE);
}

extern "C" void ps_gpu_run_progress(const ps_gpu_run *g, ps_gpu_progress *out)
{
    const ps_gpu_ctl *c = g->ctl;
    ps_gpu_progress v;
    memset(&v, 0, sizeof v);
    /* a kernel that died while it wrote leaves the sequence odd: give up
     * after about a second of retries and report nothing published */
    for (long tries = 0;; tries++) {
        if (tries > (1L << 26)) {
            memset(&v, 0, sizeof v);
            break;
        }
        uint64_t q0 = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
        if (q0 & 1u)
            continue;
        v.iteration = __atomic_load_n(&c->iteration, __ATOMIC_RELAXED);
        v.evaluations = __atomic_load_n(&c->evaluations, __ATOMIC_RELAXED);
        __atomic_load(&c->f, &v.f, __ATOMIC_RELAXED);
        __atomic_load(&c->gnorm, &v.gnorm, __ATOMIC_RELAXED);
        __atomic_load(&c->step, &v.step, __ATOMIC_RELAXED);
        __atomic_load(&c->seconds, &v.seconds, __ATOMIC_RELAXED);
        v.phase = __atomic_load_n(&c->phase, __ATOMIC_RELAXED);
        v.round = __atomic_load_n(&c->round, __ATOMIC_RELAXED);
        v.state = __atomic_load_n(&c->state, __ATOMIC_RELAXED);
        v.idle = __atomic_load_n(&c->idle, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&c->seq, __ATOMIC_RELAXED) == q0) {
            v.sequence = q0;
            break;
        }
    }
    v.heartbeat = __atomic_load_n(&c->heartbeat, __ATOMIC_RELAXED);
    *out = v;
}

extern "C" int ps_gpu_run_launch(ps_gpu_run *g)
{
    int st = PS_CONVERGED, running = 0;
    const ps_options *o = &g->o;
    context *c = &g->c;
    void *k = ps_gpu_kernel_ptr(c->precision, c->cfg.regcap, c->kclass);
    void *params[] = {&c->a};
    CUDA_TRY(o, cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c->smem),
             PS_ERR_GPU_LAUNCH);
    /* the count of blocks done with an evaluation starts again (control_watch) */
    CUDA_TRY(o, cudaMemsetAsync(g->cw + PS_GPU_CW_EVAL_DONE, 0, sizeof(unsigned long long), g->ks.s),
             PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaEventRecord(g->ks.ev0, g->ks.s), PS_ERR_GPU_LAUNCH);
    /* set before the launch: the kernel may pause (and a checkpoint read
     * its state) before the launch call returns */
    __atomic_store_n(&g->launched, 1, __ATOMIC_RELEASE);
    CUDA_TRY(o, cudaLaunchCooperativeKernel(k, dim3(c->cfg.grid), dim3(c->cfg.block), params, c->smem, g->ks.s),
             PS_ERR_GPU_LAUNCH);
    running = 1; /* from here on launched stays set, also on an error:
                    ps_gpu_run_free then waits for the kernel's stream */
    CUDA_TRY(o, cudaEventRecord(g->ks.ev1, g->ks.s), PS_ERR_GPU_LAUNCH);
out:
    if (!running)
        __atomic_store_n(&g->launched, 0, __ATOMIC_RELEASE);
    return st;
}

extern "C" int ps_gpu_run_sync(ps_gpu_run *g)
{
    int st = PS_CONVERGED;
    const ps_options *o = &g->o;
    double ms = 0.0;
    if (!__atomic_load_n(&g->launched, __ATOMIC_ACQUIRE))
        return PS_CONVERGED;
    CUDA_TRY(o, cudaEventSynchronize(g->ks.ev1), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, event_ms(g->ks.ev0, g->ks.ev1, &ms), PS_ERR_GPU_LAUNCH);
    g->kernel_seconds += 1e-3 * ms;
out:
    /* cleared once the kernel has ended (or its sync failed): while it
     * runs, a paused kernel's seconds are its published ones (download) */
    __atomic_store_n(&g->launched, 0, __ATOMIC_RELEASE);
    return st;
}

extern "C" double ps_gpu_run_kernel_seconds(const ps_gpu_run *g)
{
    return g->kernel_seconds;
}

extern "C" int ps_gpu_run_download(ps_gpu_run *g, ps_driver *d)
{
    int st = PS_CONVERGED;
    const ps_options *o = &g->o;
    const args &a = g->c.a;
    const size_t n = (size_t)a.n, m = (size_t)a.memory;
    size_t rows;
    double secs[2] = {0.0, 0.0};
    PS_RETURN_ERROR_IF(o, d->n != n || (size_t)d->m != m, PS_ERR_STATE,
                       "GPU state of %zu variables, memory %zu; the driver has %zu, %d", n, m, d->n, d->m);
    CUDA_TRY(o, cudaMemcpyAsync(&d->s, a.state, sizeof(ps_solver), cudaMemcpyDeviceToHost, g->copies),
             PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpyAsync(d->x, a.x, n * sizeof(double), cudaMemcpyDeviceToHost, g->copies),
             PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpyAsync(d->g, a.g, n * sizeof(double), cudaMemcpyDeviceToHost, g->copies),
             PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpyAsync(d->gt, a.gt, n * sizeof(double), cudaMemcpyDeviceToHost, g->copies),
             PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpyAsync(d->d, a.d, n * sizeof(double), cudaMemcpyDeviceToHost, g->copies),
             PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpyAsync(d->S, a.S, m * n * sizeof(double), cudaMemcpyDeviceToHost, g->copies),
             PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpyAsync(d->Y, a.Y, m * n * sizeof(double), cudaMemcpyDeviceToHost, g->copies),
             PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpyAsync(secs, a.eval_out, 2 * sizeof(double), cudaMemcpyDeviceToHost, g->copies),
             PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaStreamSynchronize(g->copies), PS_ERR_GPU_LAUNCH);
    rows = (size_t)d->s.iteration + 1;
    if (rows > (size_t)a.hist_cap)
        rows = (size_t)a.hist_cap;
    /* nothing evaluated yet: still in START, or cancelled at the control
     * point of the start evaluation (before its decision recorded row 0);
     * a new penalty round's START follows the rows of the iterations done */
    if (!d->s.restart && (d->s.phase == PS_PHASE_START ||
                          (d->s.phase == PS_PHASE_DONE && d->s.resume_phase == PS_PHASE_START &&
                           d->s.status == PS_ST_CANCELLED)))
        rows = 0;
    st = ps_driver_history_reserve(d, rows);
    if (st)
        return st;
    if (rows)
        CUDA_TRY(o, cudaMemcpyAsync(d->history, a.hist, rows * sizeof(ps_progress), cudaMemcpyDeviceToHost,
                                    g->copies),
                 PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaStreamSynchronize(g->copies), PS_ERR_GPU_LAUNCH);
    d->history_len = rows;
    /* the trial point of the current step (the CPU driver keeps it) */
    for (size_t i = 0; i < n; i++)
        d->xt[i] = ps_trial_coord(d->x[i], d->s.ls.alpha, d->d[i]);
    /* solve seconds: the kernel's clock at its end, or, while a kernel is
     * paused, at the pause */
    if (__atomic_load_n(&g->launched, __ATOMIC_ACQUIRE))
        __atomic_load(&g->ctl->seconds, &secs[0], __ATOMIC_ACQUIRE);
    d->elapsed = secs[0];
    d->ft = secs[1]; /* written at the kernel's end and by a pause */
    d->error = 0; /* an objective error is the solver's status */
out:
    return st;
}

/* For a state in the UPDATE phase: the partials its trial's reduction
 * left, which the kernel's update takes (cuda/loop.cuh). */
template <int NCH, int DG>
__global__ void __launch_bounds__(PS_GPU_MAX_THREADS) update_partials_kernel(args a, double alpha, int ns)
{
    extern __shared__ __align__(16) char smem[];
    update_partials<NCH, DG>(a, alpha, ns, (double *)smem);
}

extern "C" int ps_gpu_run_upload(ps_gpu_run *g, const ps_driver *d)
{
    int st = PS_CONVERGED;
    const ps_options *o = &g->o;
    args &a = g->c.a;
    const size_t n = (size_t)a.n, m = (size_t)a.memory;
    size_t rows = d->history_len < (size_t)a.hist_cap ? d->history_len : (size_t)a.hist_cap;
    PS_RETURN_ERROR_IF(o, __atomic_load_n(&g->launched, __ATOMIC_ACQUIRE), PS_ERR_STATE,
                       "upload into a GPU run whose kernel is running");
    PS_RETURN_ERROR_IF(o, d->n != n || (size_t)d->m != m, PS_ERR_STATE,
                       "driver of %zu variables, memory %d; the GPU run has %zu, %zu", d->n, d->m, n, m);
    CUDA_TRY(o, cudaMemcpy(a.state, &d->s, sizeof(ps_solver), cudaMemcpyHostToDevice), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpy(a.x, d->x, n * sizeof(double), cudaMemcpyHostToDevice), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpy(a.g, d->g, n * sizeof(double), cudaMemcpyHostToDevice), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpy(a.gt, d->gt, n * sizeof(double), cudaMemcpyHostToDevice), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpy(a.d, d->d, n * sizeof(double), cudaMemcpyHostToDevice), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpy(a.S, d->S, m * n * sizeof(double), cudaMemcpyHostToDevice), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpy(a.Y, d->Y, m * n * sizeof(double), cudaMemcpyHostToDevice), PS_ERR_GPU_LAUNCH);
    if (rows)
        CUDA_TRY(o, cudaMemcpy(a.hist, d->history, rows * sizeof(ps_progress), cudaMemcpyHostToDevice),
                 PS_ERR_GPU_LAUNCH);
    if (d->s.phase == PS_PHASE_UPDATE) {
        const int tb = g->c.cfg.block;
        void (*k)(args, double, int) = g->c.designed ? (g->c.channels ? update_partials_kernel<1, 1>
                                                                      : update_partials_kernel<0, 1>)
                                       : g->c.channels ? update_partials_kernel<1, 0>
                                                       : update_partials_kernel<0, 0>;
        k<<<g->c.cfg.grid, tb, reduce_smem_bytes(tb)>>>(a, d->s.ls.alpha, ps_lbfgs_next_slot(&d->s.lb));
        CUDA_TRY(o, cudaGetLastError(), PS_ERR_GPU_LAUNCH);
        CUDA_TRY(o, cudaDeviceSynchronize(), PS_ERR_GPU_LAUNCH);
    }
    a.ft_in = d->ft;
    a.t_base = d->elapsed;
out:
    return st;
}

extern "C" void ps_gpu_run_set_resume(ps_gpu_run *g, double seconds, double ft)
{
    g->c.a.t_base = seconds;
    g->c.a.ft_in = ft;
}

extern "C" void ps_gpu_run_shape(const ps_gpu_run *g, ps_gpu_config *cfg, size_t *smem)
{
    *cfg = g->c.cfg;
    *smem = g->c.smem;
}

extern "C" void ps_gpu_run_describe(const ps_gpu_run *g, char *buf, size_t len)
{
    ps_gpu_describe_shape(&g->c.cfg, g->c.precision, buf, len);
}
