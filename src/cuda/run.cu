/*
 * A GPU run that the host can steer while its persistent kernel runs
 * (cuda/run.h): the device data of cuda/context.cuh, a control block in
 * mapped pinned host memory (cuda/control.h) and the device words of the
 * control path. The kernel is launched on the run's own non-blocking
 * stream, so the host may read the control block, copy a paused kernel's
 * state for a checkpoint and run other work meanwhile.
 */
#include <cuda_runtime.h>
#include <pthread.h>
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

/*
 * Control blocks come from chunks of mapped pinned memory that live until
 * the process ends: cudaHostAlloc takes milliseconds while a kernel runs
 * (a problem added to a running batch, a solo run started beside others)
 * and cudaFreeHost waits for every running kernel. A run takes a block
 * from the free list and gives it back.
 */
namespace {
enum { CTL_CHUNK = 64 };
struct ctl_slot {
    ps_gpu_ctl *host, *dev;
};
pthread_mutex_t ctl_mu = PTHREAD_MUTEX_INITIALIZER;
ctl_slot *ctl_free_list;
size_t ctl_free_n, ctl_free_cap;
} // namespace

/* CTL_CHUNK more free control blocks (ctl_mu held); CUDA's error. */
static cudaError_t ctl_grow(void)
{
    ps_gpu_ctl *h = NULL, *d = NULL;
    ctl_slot *v = (ctl_slot *)realloc(ctl_free_list, (ctl_free_cap + CTL_CHUNK) * sizeof *v);
    if (!v)
        return cudaErrorMemoryAllocation;
    ctl_free_list = v;
    cudaError_t e = cudaHostAlloc((void **)&h, CTL_CHUNK * sizeof(ps_gpu_ctl), cudaHostAllocMapped);
    if (e != cudaSuccess)
        return e;
    if ((e = cudaHostGetDevicePointer((void **)&d, h, 0)) != cudaSuccess) {
        cudaFreeHost(h);
        return e;
    }
    ctl_free_cap += CTL_CHUNK;
    for (int i = CTL_CHUNK - 1; i >= 0; i--)
        ctl_free_list[ctl_free_n++] = ctl_slot{h + i, d + i};
    return cudaSuccess;
}

/* A zeroed control block (host and device addresses); CUDA's error. */
static cudaError_t ctl_take(ctl_slot *out)
{
    cudaError_t e = cudaSuccess;
    pthread_mutex_lock(&ctl_mu);
    if (!ctl_free_n && (e = ctl_grow()) != cudaSuccess)
        goto out;
    *out = ctl_free_list[--ctl_free_n];
    memset(out->host, 0, sizeof(ps_gpu_ctl));
out:
    pthread_mutex_unlock(&ctl_mu);
    return e;
}

extern "C" int ps_gpu_run_reserve(size_t n)
{
    cudaError_t e = cudaSuccess;
    pthread_mutex_lock(&ctl_mu);
    while (ctl_free_n < n && (e = ctl_grow()) == cudaSuccess)
        ;
    pthread_mutex_unlock(&ctl_mu);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return PS_ERR_GPU_MEMORY;
    }
    return PS_CONVERGED;
}

static void ctl_give(ps_gpu_ctl *host, ps_gpu_ctl *dev)
{
    pthread_mutex_lock(&ctl_mu);
    ctl_free_list[ctl_free_n++] = ctl_slot{host, dev}; /* room: every block came from the list */
    pthread_mutex_unlock(&ctl_mu);
}

/* One run on the current device: p's spins (a rank's share of whole's:
 * the penalty's weight is whole's); scratch as context_create's. */
static int run_create(const ps_problem *p, const ps_problem *whole, const ps_options *o, const ps_gpu_config *cfg,
                      const double *z, ps_gpu_scratch *scratch, ps_gpu_run **out)
{
    int st = PS_CONVERGED;
    ctl_slot ctl;
    *out = NULL;
    ps_gpu_run *g = (ps_gpu_run *)calloc(1, sizeof *g);
    if (!g)
        return PS_ERR_NO_MEMORY;
    g->o = *o;
    g->nranks = 1;
    cudaGetDevice(&g->device);
    st = context_create(p, o, cfg, MODE_SOLVE, z, 0, &g->c, whole, scratch);
    if (st) {
        free(g);
        return st;
    }
    CUDA_TRY(o, ctl_take(&ctl), PS_ERR_GPU_MEMORY);
    g->ctl = ctl.host;
    g->dctl = ctl.dev;
    CUDA_TRY(o, device_alloc((void **)&g->cw, PS_GPU_CW_LEN * sizeof(unsigned long long)), PS_ERR_GPU_MEMORY);
    { /* zeros through the copy engine, not a memset kernel (which would wait
       * for a batch kernel that holds every SM: context_create) */
        static const unsigned long long zero[PS_GPU_CW_LEN] = {0};
        CUDA_TRY(o, cudaMemcpyAsync(g->cw, zero, sizeof zero, cudaMemcpyHostToDevice, cudaStreamPerThread),
                 PS_ERR_GPU_LAUNCH);
    }
    CUDA_TRY(o, cudaStreamSynchronize(cudaStreamPerThread), PS_ERR_GPU_LAUNCH);
    g->c.a.ctl = ctl.dev;
    g->c.a.cw = g->cw;
    g->c.a.controller = g->c.cfg.grid - 1; /* idle in the vector phases when the grid is larger than gv */
    *out = g;
    return PS_CONVERGED;
out:
    ps_gpu_run_free(g);
    return st;
}

extern "C" int ps_gpu_run_create(const ps_problem *p, const ps_options *o, const ps_gpu_config *cfg,
                                 const double *z, ps_gpu_scratch *scratch, ps_gpu_run **out)
{
    return run_create(p, p, o, cfg, z, scratch, out);
}

/* The device of run g current; returns the one that was. */
static int use_device(const ps_gpu_run *g)
{
    int cur = 0;
    cudaGetDevice(&cur);
    if (cur != g->device)
        cudaSetDevice(g->device);
    return cur;
}

static void back_to(int dev)
{
    int cur = 0;
    cudaGetDevice(&cur);
    if (cur != dev)
        cudaSetDevice(dev);
}

/* Rank r of run g (rank 0: g). */
static ps_gpu_run *rank_run(ps_gpu_run *g, int r)
{
    return r ? g->peer[r] : g;
}

/* op(rank's run) for every rank, on its device, in rank order: the first
 * error returned; with every_rank the ranks after an error too (else they
 * are left out). */
template <typename F> static int each_rank(ps_gpu_run *g, bool every_rank, F op)
{
    int st = PS_CONVERGED;
    for (int r = 0; r < g->nranks && (every_rank || !st); r++) {
        ps_gpu_run *q = rank_run(g, r);
        const int cur = use_device(q);
        const int s = op(q);
        back_to(cur);
        if (!st)
            st = s;
    }
    return st;
}

extern "C" int ps_gpu_run_create_ranks(const ps_problem *p, const ps_options *o, const double *z, ps_gpu_run **out)
{
    int dev[PS_MAX_RANKS], n = 0, cur = 0, st;
    ps_gpu_ranks *x = NULL;
    ps_gpu_run *g = NULL;
    *out = NULL;
    if ((st = ps_gpu_rank_devices(o, dev, &n)))
        return st;
    cudaGetDevice(&cur);
    if (n == 1 && !ps_gpu_exchange_forced()) {
        cudaSetDevice(dev[0]);
        st = run_create(p, p, o, NULL, z, NULL, out);
        back_to(cur);
        return st;
    }
    PS_RETURN_ERROR_IF(o, p->ns < (size_t)n, PS_ERR_OPTION, "%d GPUs for %zu spins: at least one spin a GPU", n,
                       p->ns);
    /* a row: the gradient's n, the loss, rank 0's command and seconds; 32-byte aligned */
    st = ps_gpu_ranks_create(o, dev, n, (ps_problem_nx(p) + 3 + 3) & ~(size_t)3, &x);
    if (st)
        return st;
    for (int r = 0; r < n; r++) {
        ps_problem view;
        size_t j0, cnt;
        ps_gpu_config cfg;
        ps_gpu_rank_share(p->ns, n, r, &j0, &cnt);
        ps_problem_spin_view(p, j0, cnt, &view);
        cudaSetDevice(dev[r]);
        if (r == 0) {
            /* every rank has rank 0's launch shape: the sums over a grid's
             * blocks outside the evaluation (the scalars, the update's
             * dots, the SAR's) take the same bits only on the same grid
             * and block; ranks on one device side by side, a share of its
             * blocks each */
            if ((st = ps_gpu_resolve_config(&view, o, NULL, &cfg)))
                goto out;
            if (ps_gpu_ranks_shared(x))
                cfg.grid /= n;
        } else {
            cfg = g->c.cfg;
        }
        ps_gpu_run *q = NULL;
        st = run_create(&view, p, o, &cfg, z, NULL, &q);
        if (st)
            goto out;
        if (r == 0)
            g = q;
        else
            g->peer[r] = q;
        g->nranks = r + 1; /* freed with g from here on */
        if (q->c.cfg.grid < n) {
            ps_log(o, PS_LOG_ERROR, __FILE__, __LINE__, "rank %d's grid of %d blocks: at least one block a rank (%d ranks)",
                   r, q->c.cfg.grid, n);
            st = PS_ERR_OPTION;
            goto out;
        }
        ps_gpu_ranks_view(x, r, (unsigned *)&q->cw[PS_GPU_CW_RANKS], &q->c.a.rk);
        if (r)
            q->c.a.prof = NULL; /* the phase profile is rank 0's */
    }
    g->ranks = x;
    x = NULL;
    *out = g;
    g = NULL;
out:
    back_to(cur);
    ps_gpu_run_free(g);
    ps_gpu_ranks_free(x);
    return st;
}

extern "C" void ps_gpu_run_free(ps_gpu_run *g)
{
    if (!g)
        return;
    for (int r = g->nranks - 1; r >= 1; r--) /* their kernels end with rank 0's */
        ps_gpu_run_free(g->peer[r]);
    const int cur = use_device(g);
    if (__atomic_load_n(&g->launched, __ATOMIC_ACQUIRE))
        cudaStreamSynchronize(g->ks.s);
    timed_stream_destroy(&g->ks);
    device_free(g->cw);
    if (g->ctl)
        ctl_give(g->ctl, g->dctl);
    context_destroy(&g->c);
    cudaGetLastError();
    back_to(cur);
    ps_gpu_ranks_free(g->ranks);
    free(g->stage);
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

/* Everything of a launch but the kernel (its stream, its shared memory,
 * the count of blocks done with an evaluation zeroed, the start event):
 * what can fail before any rank's kernel runs. */
static int run_prepare_one(ps_gpu_run *g)
{
    int st = PS_CONVERGED;
    const ps_options *o = &g->o;
    context *c = &g->c;
    void *k = ps_gpu_kernel_ptr(c->precision, c->cfg.regcap, c->kclass);
    if (!g->ks.s) { /* the run's stream, at its first launch (a batch's problems have none) */
        st = timed_stream_create(&g->ks, o);
        if (st)
            goto out;
    }
    CUDA_TRY(o, cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c->smem),
             PS_ERR_GPU_LAUNCH);
    /* the count of blocks done with an evaluation starts again (control_watch) */
    CUDA_TRY(o, cudaMemsetAsync(g->cw + PS_GPU_CW_EVAL_DONE, 0, sizeof(unsigned long long), g->ks.s),
             PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaEventRecord(g->ks.ev0, g->ks.s), PS_ERR_GPU_LAUNCH);
out:
    return st;
}

/* The kernel, after run_prepare_one. */
static int run_start_one(ps_gpu_run *g)
{
    int st = PS_CONVERGED, running = 0;
    const ps_options *o = &g->o;
    context *c = &g->c;
    void *k = ps_gpu_kernel_ptr(c->precision, c->cfg.regcap, c->kclass);
    void *params[] = {&c->a};
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

static int run_sync_one(ps_gpu_run *g)
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

/* The run's host image of its context's transfer range (context.cuh,
 * xfer), allocated at its first use; NULL when out of memory. */
static char *xfer_stage(ps_gpu_run *g)
{
    if (!g->stage)
        g->stage = (char *)malloc(g->c.xfer_bytes);
    return g->stage;
}

/* Where device buffer dev (inside the transfer range) lies in the image. */
static double *xfer_at(ps_gpu_run *g, const double *dev)
{
    return (double *)(g->stage + ((const char *)dev - (g->c.d_arena + g->c.xfer)));
}

/* The vectors of the stage's image (g, gt, d, S, Y) into d, then the
 * trial point of the current step from x and d (the CPU driver keeps
 * it). */
static void take_vectors(ps_gpu_run *g, ps_driver *d)
{
    const args &a = g->c.a;
    const size_t n = (size_t)a.n, m = (size_t)a.memory;
    const double *v = xfer_at(g, a.g);
    memcpy(d->g, v, n * sizeof(double));
    memcpy(d->gt, v + n, n * sizeof(double));
    memcpy(d->d, v + 2 * n, n * sizeof(double));
    memcpy(d->S, v + 3 * n, m * n * sizeof(double));
    memcpy(d->Y, v + (3 + m) * n, m * n * sizeof(double));
    for (size_t i = 0; i < n; i++)
        d->xt[i] = ps_trial_coord(d->x[i], d->s.ls.alpha, d->d[i]);
}

/* History rows copied with the state, before their number is known: the
 * rows the last progress snapshot counts and HIST_SLACK more, at most
 * HIST_EARLY (the rest, if any, after the state). */
#define HIST_EARLY 1024
#define HIST_SLACK 8

/* PS_ERR_STATE (logged) unless driver d holds as many variables and
 * memory pairs as the run. */
static int same_shape(const ps_gpu_run *g, const ps_driver *d)
{
    const size_t n = (size_t)g->c.a.n, m = (size_t)g->c.a.memory;
    PS_RETURN_ERROR_IF(&g->o, d->n != n || (size_t)d->m != m, PS_ERR_STATE,
                       "GPU state of %zu variables, memory %zu; the driver has %zu, %d", n, m, d->n, d->m);
    return PS_CONVERGED;
}

static size_t hist_early(const ps_gpu_run *g)
{
    const int64_t it = __atomic_load_n(&g->ctl->iteration, __ATOMIC_ACQUIRE);
    size_t rows = (it > 0 ? (size_t)it : 0) + HIST_SLACK;
    if (rows > HIST_EARLY)
        rows = HIST_EARLY;
    return rows < (size_t)g->c.a.hist_cap ? rows : (size_t)g->c.a.hist_cap;
}

/*
 * The run's state into driver d: the head (solver state, x, the end
 * seconds and f, the history), with `vectors` also the tail (g, gt, d, S,
 * Y, and xt). The head is one copy of the range's start up to the end of
 * x (with the tail, one copy of the whole range), the first history rows
 * beside it; one wait, a second only for a history longer than those.
 */
static int run_download_one(ps_gpu_run *g, ps_driver *d, bool vectors)
{
    int st = PS_CONVERGED;
    const ps_options *o = &g->o;
    const context &c = g->c;
    const args &a = c.a;
    const size_t n = (size_t)a.n;
    const size_t early = hist_early(g);
    size_t rows;
    double secs[2] = {0.0, 0.0};
    if ((st = same_shape(g, d)))
        return st;
    char *stage = xfer_stage(g);
    if (!stage || ps_driver_history_reserve(d, early))
        return PS_ERR_NO_MEMORY;
    {
        const char *from = c.d_arena + c.xfer;
        const size_t head = (size_t)((const char *)(a.x + n) - from);
        CUDA_TRY(o, cudaMemcpyAsync(stage, from, vectors ? c.xfer_bytes : head, cudaMemcpyDeviceToHost,
                                    cudaStreamPerThread),
                 PS_ERR_GPU_LAUNCH);
        if (!vectors) /* the end seconds and f, at the range's end */
            CUDA_TRY(o, cudaMemcpyAsync(xfer_at(g, a.eval_out), a.eval_out, 2 * sizeof(double),
                                        cudaMemcpyDeviceToHost, cudaStreamPerThread),
                     PS_ERR_GPU_LAUNCH);
        CUDA_TRY(o, cudaMemcpyAsync(d->history, a.hist, early * sizeof(ps_progress), cudaMemcpyDeviceToHost,
                                    cudaStreamPerThread),
                 PS_ERR_GPU_LAUNCH);
    }
    CUDA_TRY(o, cudaStreamSynchronize(cudaStreamPerThread), PS_ERR_GPU_LAUNCH);
    memcpy(&d->s, stage, sizeof(ps_solver));
    memcpy(d->x, xfer_at(g, a.x), n * sizeof(double));
    memcpy(secs, xfer_at(g, a.eval_out), 2 * sizeof(double));
    if (vectors)
        take_vectors(g, d);
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
    if (rows > early) {
        st = ps_driver_history_reserve(d, rows);
        if (st)
            return st;
        CUDA_TRY(o, cudaMemcpyAsync(d->history + early, a.hist + early, (rows - early) * sizeof(ps_progress),
                                    cudaMemcpyDeviceToHost, cudaStreamPerThread),
                 PS_ERR_GPU_LAUNCH);
        CUDA_TRY(o, cudaStreamSynchronize(cudaStreamPerThread), PS_ERR_GPU_LAUNCH);
    }
    d->history_len = rows;
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

/* The tail alone (g, gt, d, S, Y, then xt from x and d): d->s is not
 * touched. */
static int run_download_tail(ps_gpu_run *g, ps_driver *d)
{
    int st = PS_CONVERGED;
    const ps_options *o = &g->o;
    const args &a = g->c.a;
    const size_t n = (size_t)a.n, m = (size_t)a.memory;
    if ((st = same_shape(g, d)))
        return st;
    if (!xfer_stage(g))
        return PS_ERR_NO_MEMORY;
    CUDA_TRY(o, cudaMemcpyAsync(xfer_at(g, a.g), a.g, (3 + 2 * m) * n * sizeof(double), cudaMemcpyDeviceToHost,
                                cudaStreamPerThread),
             PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaStreamSynchronize(cudaStreamPerThread), PS_ERR_GPU_LAUNCH);
    take_vectors(g, d);
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

static int run_upload_one(ps_gpu_run *g, const ps_driver *d)
{
    int st = PS_CONVERGED;
    const ps_options *o = &g->o;
    args &a = g->c.a;
    const size_t n = (size_t)a.n, m = (size_t)a.memory;
    size_t rows = d->history_len < (size_t)a.hist_cap ? d->history_len : (size_t)a.hist_cap;
    char *stage;
    PS_RETURN_ERROR_IF(o, __atomic_load_n(&g->launched, __ATOMIC_ACQUIRE), PS_ERR_STATE,
                       "upload into a GPU run whose kernel is running");
    if ((st = same_shape(g, d)))
        return st;
    stage = xfer_stage(g);
    if (!stage)
        return PS_ERR_NO_MEMORY;
    /* the state and the vectors in one copy (not elapsed and eval_out:
     * set below, from the driver, for the next launch) */
    memcpy(stage, &d->s, sizeof(ps_solver));
    {
        double *v = xfer_at(g, a.x);
        memcpy(v, d->x, n * sizeof(double));
        memcpy(v + n, d->g, n * sizeof(double));
        memcpy(v + 2 * n, d->gt, n * sizeof(double));
        memcpy(v + 3 * n, d->d, n * sizeof(double));
        memcpy(v + 4 * n, d->S, m * n * sizeof(double));
        memcpy(v + (4 + m) * n, d->Y, m * n * sizeof(double));
        CUDA_TRY(o, cudaMemcpy(g->c.d_arena + g->c.xfer, stage, (size_t)((char *)(v + (4 + 2 * m) * n) - stage),
                               cudaMemcpyHostToDevice),
                 PS_ERR_GPU_LAUNCH);
    }
    if (rows)
        CUDA_TRY(o, cudaMemcpy(a.hist, d->history, rows * sizeof(ps_progress), cudaMemcpyHostToDevice),
                 PS_ERR_GPU_LAUNCH);
    if (d->s.phase == PS_PHASE_UPDATE) {
        const int tb = g->c.cfg.block;
        void (*k)(args, double, int) = g->c.designed ? (g->c.channels ? update_partials_kernel<1, 1>
                                                                      : update_partials_kernel<0, 1>)
                                       : g->c.channels ? update_partials_kernel<1, 0>
                                                       : update_partials_kernel<0, 0>;
        /* on this thread's stream: a device-wide synchronization would
         * wait for the kernels of other runs, or of a batch, that run */
        k<<<g->c.cfg.grid, tb, reduce_smem_bytes(tb), cudaStreamPerThread>>>(a, d->s.ls.alpha,
                                                                            ps_lbfgs_next_slot(&d->s.lb));
        CUDA_TRY(o, cudaGetLastError(), PS_ERR_GPU_LAUNCH);
        CUDA_TRY(o, cudaStreamSynchronize(cudaStreamPerThread), PS_ERR_GPU_LAUNCH);
    }
    a.ft_in = d->ft;
    a.t_base = d->elapsed;
out:
    return st;
}

extern "C" void ps_gpu_run_set_resume(ps_gpu_run *g, double seconds, double ft)
{
    for (int r = 0; r < g->nranks; r++) {
        rank_run(g, r)->c.a.t_base = seconds;
        rank_run(g, r)->c.a.ft_in = ft;
    }
}

extern "C" void ps_gpu_run_shape(const ps_gpu_run *g, ps_gpu_config *cfg, size_t *smem)
{
    *cfg = g->c.cfg;
    *smem = g->c.smem;
}

extern "C" void ps_gpu_run_describe(const ps_gpu_run *g, char *buf, size_t len)
{
    ps_gpu_describe_shape(&g->c.cfg, g->c.precision, buf, len);
    if (g->nranks > 1) {
        const size_t k = strlen(buf);
        snprintf(buf + k, len > k ? len - k : 0, ", rank 0 of %d%s", g->nranks,
                 g->peer[1]->device == g->device ? " sharing one device" : " GPUs");
    }
}

extern "C" int ps_gpu_run_ranks(const ps_gpu_run *g)
{
    return g->nranks;
}

/* ---- the public calls, over the ranks (each on its device) ---- */

extern "C" int ps_gpu_run_launch(ps_gpu_run *g)
{
    /* every rank's kernel: they meet at each evaluation's exchange, so a
     * rank that did not start would hold the others there. What can fail
     * is done for every rank before any kernel starts; the cooperative
     * launches themselves are then of one shape on identical devices */
    const int st = each_rank(g, false, run_prepare_one);
    return st ? st : each_rank(g, false, run_start_one);
}

extern "C" int ps_gpu_run_sync(ps_gpu_run *g)
{
    return each_rank(g, true, run_sync_one);
}

/* Every rank holds the same state (the same decisions from the same
 * reduced values): rank 0's is the run's. */
extern "C" int ps_gpu_run_download(ps_gpu_run *g, ps_driver *d)
{
    const int cur = use_device(g);
    const int st = run_download_one(g, d, true);
    back_to(cur);
    return st;
}

extern "C" int ps_gpu_run_download_head(ps_gpu_run *g, ps_driver *d)
{
    const int cur = use_device(g);
    const int st = run_download_one(g, d, false);
    back_to(cur);
    return st;
}

extern "C" int ps_gpu_run_download_tail(ps_gpu_run *g, ps_driver *d)
{
    const int cur = use_device(g);
    const int st = run_download_tail(g, d);
    back_to(cur);
    return st;
}

extern "C" int ps_gpu_run_upload(ps_gpu_run *g, const ps_driver *d)
{
    return each_rank(g, false, [d](ps_gpu_run *q) { return run_upload_one(q, d); });
}
