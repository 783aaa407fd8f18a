/*
 * solve_persistent() on the GPU: ONE cooperative kernel runs the whole
 * L-BFGS solve. Every block keeps its own copy of the solver state machine
 * (lbfgs_math.h) in shared memory and takes every decision redundantly
 * from the same reduced values, so phases are separated by grid.sync()
 * alone: no host round trip, no relaunch, no atomics.
 *
 * Per iteration with one line-search trial, four grid barriers:
 *   direction      d = -H g from the stored dots           | sync
 *   trial          evaluate at x + alpha d (partials)      | sync
 *                  reduce gradient, g_t.d partials         | sync  -> accept?
 *   update         s, y, x, g, batched dots (partials)     | sync  -> stop?
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_launch.h"
#include "gpu_phases.cuh"

extern "C" {
#include "gpu.h"
#include "log.h"
#include "objective.h"
#include "options.h"
#include "problem.h"
}

namespace cg = cooperative_groups;
using namespace ps_gpu;

/* Block 0 appends one history row. */
__device__ static void record(const args &a, const ps_solver &S, double seconds)
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
__device__ __forceinline__ static void prof_mark(const args &a, uint64_t &last, int i)
{
    if (a.prof && blockIdx.x == 0 && threadIdx.x == 0) {
        uint64_t now = global_ns();
        a.prof[i] += now - last;
        last = now;
    }
}

/*
 * Evaluate at x + alpha d into gout; leaves in every block's shared sh[]:
 * gout.d in sh[0], gout.gout in sh[1], the RF power b.b in sh[2] and
 * f = loss + lambda b.b in sh[3]. Two barriers.
 */
template <typename R>
__device__ static void evaluate_and_reduce(const args &a, cg::grid_group &grid, const double *d,
                                           double alpha, double *gout, char *smem, double *sh,
                                           uint64_t &last)
{
    evaluate<R>(a, a.x, d, alpha, true, smem);
    grid.sync();
    prof_mark(a, last, PS_PROF_EVAL);
    reduce_gradient(a, a.x, d, alpha, gout, (double *)smem, a.rpart + (size_t)blockIdx.x * PS_GPU_RP);
    grid.sync();
    prof_mark(a, last, PS_PROF_REDUCE);
    sum_partials(a.rpart, gridDim.x, 3, PS_GPU_RP, sh);
    sum_partials(a.lpart, gridDim.x, 1, 1, sh + 3);
    prof_mark(a, last, PS_PROF_SUMS);
    if (threadIdx.x == 0)
        sh[3] += a.lambda * sh[2];
    __syncthreads();
}

/* MINB: __launch_bounds__ minimum blocks of PS_GPU_MAX_THREADS per SM (1:
 * up to 128 registers a thread, 2: up to 64). */
template <typename R, int MINB>
__global__ void __launch_bounds__(PS_GPU_MAX_THREADS, MINB) persistent_solve_kernel(args a)
{
    cg::grid_group grid = cg::this_grid();
    extern __shared__ __align__(16) char smem[];
    __shared__ ps_solver S;
    __shared__ double sh[4];
    __shared__ double red[PS_GPU_RP];
    const uint64_t t0 = global_ns();
    uint64_t last = t0;
    if (threadIdx.x == 0)
        S = *a.state;
    __syncthreads();

    // ---- evaluate at the start point ----
    evaluate_and_reduce<R>(a, grid, nullptr, 0.0, a.g, smem, sh, last);
    if (a.mode == MODE_EVAL) {
        if (blockIdx.x == 0 && threadIdx.x == 0)
            a.eval_out[0] = sh[3];
        return;
    }
    if (threadIdx.x == 0) {
        ps_solver_start(&S, sh[3], sh[1]);
        record(a, S, (double)(global_ns() - t0) * 1e-9);
    }
    __syncthreads();
    double elapsed = 0.0;

    while (S.phase != PS_PHASE_DONE) {
        if (S.phase == PS_PHASE_DIRECTION) {
            // ---- direction ----
            if (threadIdx.x == 0)
                ps_solver_direction(&S, elapsed);
            __syncthreads();
            prof_mark(a, last, PS_PROF_DECIDE);
            if (S.phase != PS_PHASE_TRIAL)
                break;
            form_direction(a, &S.lb);
            grid.sync();
            prof_mark(a, last, PS_PROF_DIRECTION);
        } else if (S.phase == PS_PHASE_TRIAL) {
            // ---- line search trial ----
            evaluate_and_reduce<R>(a, grid, a.d, S.ls.alpha, a.gt, smem, sh, last);
            if (threadIdx.x == 0) {
                red[0] = sh[3]; /* f at the trial, kept for the update */
                ps_solver_trial(&S, sh[3], sh[0]);
            }
            __syncthreads();
            prof_mark(a, last, PS_PROF_DECIDE);
        } else {
            // ---- update: accept the step, new pair, batched dots ----
            update(a, S.ls.alpha, ps_lbfgs_next_slot(&S.lb), (double *)smem,
                   a.rpart + (size_t)blockIdx.x * PS_GPU_RP);
            if (blockIdx.x == 0 && threadIdx.x == 0)
                *a.elapsed = (double)(global_ns() - t0) * 1e-9;
            grid.sync();
            prof_mark(a, last, PS_PROF_UPDATE);
            double ft = red[0];
            sum_partials(a.rpart, a.gv, PS_RED_LEN(a.memory), PS_GPU_RP, red + 1);
            prof_mark(a, last, PS_PROF_SUMS);
            elapsed = *(volatile double *)a.elapsed;
            if (threadIdx.x == 0) {
                ps_solver_update(&S, ft, red + 1);
                record(a, S, elapsed);
            }
            __syncthreads();
            prof_mark(a, last, PS_PROF_DECIDE);
        }
    }
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *a.state = S;
}

/* ------------------------------------------------------------------------ */
/* Host side                                                                */
/* ------------------------------------------------------------------------ */

#define CUDA_TRY(o, call, status)                                                          \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            ps_log((o), PS_LOG_ERROR, __FILE__, __LINE__, "%s: %s", #call,                 \
                   cudaGetErrorString(e_));                                                \
            cudaGetLastError();                                                            \
            st = (status);                                                                 \
            goto out;                                                                      \
        }                                                                                  \
    } while (0)

template <typename R> static void *kernel_ptr(int regcap)
{
    return regcap ? (void *)persistent_solve_kernel<R, 2> : (void *)persistent_solve_kernel<R, 1>;
}

extern "C" int ps_gpu_kernel_attrs(int precision, int regcap, ps_gpu_kernel_info *info)
{
    cudaFuncAttributes fa;
    void *k = precision == PS_PRECISION_DOUBLE ? kernel_ptr<double>(regcap) : kernel_ptr<float>(regcap);
    if (cudaFuncGetAttributes(&fa, k) != cudaSuccess) {
        cudaGetLastError();
        return PS_ERR_NO_GPU;
    }
    info->registers = fa.numRegs;
    info->local_bytes = (int)fa.localSizeBytes;
    info->static_smem = (int)fa.sharedSizeBytes;
    info->max_threads = fa.maxThreadsPerBlock;
    return PS_CONVERGED;
}

/* Spins per tile and segments for a block of tb threads (heuristic, see
 * gpu_launch.h): the largest tile (<= 32 spins) that still gives every
 * block of the grid a tile. */
extern "C" void ps_gpu_default_config(size_t ns, size_t nt, int grid_blocks, int tb, int *sb,
                                      int *segs)
{
    int s = 32;
    while (s > 1 && (ns + s - 1) / s < (size_t)grid_blocks)
        s /= 2;
    *sb = s;
    *segs = tb / s;
}

extern "C" int ps_gpu_max_blocks_per_sm(int precision, int regcap, int tb, size_t smem)
{
    void *k = precision == PS_PRECISION_DOUBLE ? kernel_ptr<double>(regcap) : kernel_ptr<float>(regcap);
    int bps = 0;
    if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, k, tb, smem) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return bps;
}

extern "C" int ps_gpu_resolve_config(const ps_problem *p, const ps_options *o,
                                     const ps_gpu_config *in, ps_gpu_config *out)
{
    ps_gpu_config c = {0, 0, 0, 0, 0};
    if (in)
        c = *in;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) {
        cudaGetLastError();
        return PS_ERR_NO_GPU;
    }
    int tb = c.block ? c.block : PS_GPU_DEFAULT_THREADS;
    PS_RETURN_ERROR_IF(o, tb < 32 || tb > PS_GPU_MAX_THREADS || tb % 32, PS_ERR_OPTION,
                       "GPU block size %d is not a multiple of 32 in 32..%d", tb, PS_GPU_MAX_THREADS);
    int G = c.grid ? c.grid : PS_GPU_BLOCKS_PER_SM * sms;
    int sb = c.sb, segs = c.segs;
    for (int pass = 0; pass < 2; pass++) {
        if (!c.sb || !c.segs)
            ps_gpu_default_config(p->ns, p->nt, G, tb, &sb, &segs);
        size_t smem = ps_gpu_dyn_smem(o->precision, sb, segs, tb, p->nt);
        int bps = ps_gpu_max_blocks_per_sm(o->precision, c.regcap, tb, smem);
        PS_RETURN_ERROR_IF(o, bps < 1, PS_ERR_GPU_LAUNCH,
                           "a block of %d threads with %zu bytes of shared memory does not fit on an SM",
                           tb, smem);
        int cap = bps * sms;
        if (c.grid) {
            PS_RETURN_ERROR_IF(o, c.grid > cap, PS_ERR_GPU_LAUNCH,
                               "grid of %d blocks exceeds the %d co-resident blocks (%d per SM)",
                               c.grid, cap, bps);
            break;
        }
        int want = (bps < PS_GPU_BLOCKS_PER_SM ? bps : PS_GPU_BLOCKS_PER_SM) * sms;
        if (want == G)
            break;
        G = want;
    }
    PS_RETURN_ERROR_IF(o, sb < 1 || sb > 32 || (sb & (sb - 1)) || sb * segs != tb, PS_ERR_OPTION,
                       "tile of %d spins x %d segments does not match a block of %d threads", sb, segs, tb);
    out->grid = G;
    out->block = tb;
    out->sb = sb;
    out->segs = segs;
    out->regcap = c.regcap;
    return PS_CONVERGED;
}

static unsigned long long *prof_dev = NULL;

extern "C" int ps_gpu_profile_enable(int on)
{
    if (on && !prof_dev) {
        if (cudaMalloc(&prof_dev, PS_GPU_PROF * sizeof(unsigned long long)) != cudaSuccess) {
            cudaGetLastError();
            prof_dev = NULL;
            return PS_ERR_GPU_MEMORY;
        }
        cudaMemset(prof_dev, 0, PS_GPU_PROF * sizeof(unsigned long long));
    } else if (!on && prof_dev) {
        cudaFree(prof_dev);
        prof_dev = NULL;
    }
    return PS_CONVERGED;
}

extern "C" int ps_gpu_profile_read(unsigned long long out[PS_GPU_PROF])
{
    if (!prof_dev)
        return PS_ERR_NULL;
    cudaMemcpy(out, prof_dev, PS_GPU_PROF * sizeof(unsigned long long), cudaMemcpyDeviceToHost);
    cudaMemset(prof_dev, 0, PS_GPU_PROF * sizeof(unsigned long long));
    return PS_CONVERGED;
}

extern "C" unsigned long long *ps_gpu_profile_buffer(void)
{
    return prof_dev;
}

/* 1 if the trial pulse of nt steps is staged in shared memory. */
extern "C" int ps_gpu_stage_pulse(int precision, size_t nt)
{
    size_t rs = precision == PS_PRECISION_DOUBLE ? sizeof(double) : sizeof(float);
    return 2 * nt * rs <= PS_GPU_PULSE_SMEM;
}

template <typename R>
static size_t dyn_smem_bytes(int sb, int segs, int tb, int pulse_len)
{
    size_t ev = eval_smem_bytes<R>(sb, segs, pulse_len);
    size_t rd = (size_t)((tb + 31) / 32) * PS_GPU_RP * sizeof(double);
    return ev > rd ? ev : rd;
}

extern "C" size_t ps_gpu_dyn_smem(int precision, int sb, int segs, int tb, size_t nt)
{
    int pl = ps_gpu_stage_pulse(precision, nt) ? (int)nt : 0;
    return precision == PS_PRECISION_DOUBLE ? dyn_smem_bytes<double>(sb, segs, tb, pl)
                                            : dyn_smem_bytes<float>(sb, segs, tb, pl);
}

/* Build the per-spin records in precision R. */
template <typename R>
static void spin_records(const ps_problem *p, R *spin, R *gdt)
{
    double gamma = 2.0 * 3.14159265358979323846 * p->gamma_bar;
    for (size_t j = 0; j < p->ns; j++) {
        R *s = spin + j * SP_STRIDE;
        double e1 = p->t1 ? exp(-p->dt / p->t1[j]) : 1.0;
        double e2 = p->t2 ? exp(-p->dt / p->t2[j]) : 1.0;
        s[SP_R0] = (R)p->r[3 * j];
        s[SP_R1] = (R)p->r[3 * j + 1];
        s[SP_R2] = (R)p->r[3 * j + 2];
        s[SP_GS] = (R)(p->dt * gamma * (p->b1scale ? p->b1scale[j] : 1.0));
        s[SP_WZ] = (R)(p->dt * 2.0 * 3.14159265358979323846 * (p->df ? p->df[j] : 0.0));
        s[SP_E1] = (R)e1;
        s[SP_E2] = (R)e2;
        s[SP_IE1] = (R)(1.0 / e1);
        s[SP_IE2] = (R)(1.0 / e2);
    }
    for (size_t k = 0; k < p->nt; k++)
        for (int c = 0; c < 3; c++)
            gdt[3 * k + c] = (R)(p->dt * gamma * p->g[3 * k + c]);
}

static double wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/*
 * One launch of the persistent kernel. mode MODE_SOLVE: x (optimizer
 * variables) in/out, r filled. MODE_EVAL: physical pulse x, f, grad, m.
 */
template <typename R>
static int run_kernel(const ps_problem *p, const ps_options *o, const ps_gpu_config *cfg_in,
                      int mode, double *x, ps_result *r, double *f_out, double *g_out,
                      double *m_out)
{
    int st = PS_CONVERGED;
    const size_t ns = p->ns, nt = p->nt, n = 2 * nt;
    const int m = o->memory;
    args a;
    memset(&a, 0, sizeof a);
    void *d_spin = NULL, *d_gdt = NULL;
    double *d_target = NULL, *d_w = NULL, *d_m0 = NULL, *d_vec = NULL, *d_part = NULL;
    ps_solver *d_state = NULL;
    ps_progress *d_hist = NULL;
    R *h_spin = NULL, *h_gdt = NULL;
    double *h_w = NULL, *h_m0 = NULL;
    ps_solver *h_state = NULL;
    cudaEvent_t ev0 = NULL, ev1 = NULL;
    double t_start = wall_seconds();

    ps_gpu_config cfg;
    st = ps_gpu_resolve_config(p, o, cfg_in, &cfg);
    if (st)
        return st;
    const int G = cfg.grid, tb = cfg.block;
    const int ntiles = (int)((ns + cfg.sb - 1) / cfg.sb);
    const size_t smem = ps_gpu_dyn_smem(o->precision, cfg.sb, cfg.segs, tb, nt);
    int hist_cap = mode == MODE_EVAL ? 1
                   : o->max_iterations > 0 && o->max_iterations < 1000000
                       ? (int)o->max_iterations + 1
                       : 1000001;

    /* host staging */
    h_spin = (R *)malloc(ns * SP_STRIDE * sizeof(R));
    h_gdt = (R *)malloc(3 * nt * sizeof(R));
    h_w = (double *)malloc(ns * sizeof(double));
    h_m0 = (double *)malloc(3 * ns * sizeof(double));
    h_state = (ps_solver *)malloc(sizeof(ps_solver));
    if (!h_spin || !h_gdt || !h_w || !h_m0 || !h_state) {
        st = PS_ERR_NO_MEMORY;
        goto out;
    }
    spin_records<R>(p, h_spin, h_gdt);
    for (size_t j = 0; j < ns; j++) {
        h_w[j] = p->w ? p->w[j] : 1.0;
        for (int c = 0; c < 3; c++)
            h_m0[3 * j + c] = p->m0 ? p->m0[3 * j + c] : (c == 2 ? 1.0 : 0.0);
    }
    ps_solver_init(h_state, m, o->past, o->max_linesearch, o->max_iterations,
                   o->max_evaluations, o->gtol, o->ftol, o->c1, o->c2, o->time_limit,
                   ps_options_fnoise(o));

    /* device buffers */
    CUDA_TRY(o, cudaMalloc(&d_spin, ns * SP_STRIDE * sizeof(R)), PS_ERR_GPU_MEMORY);
    CUDA_TRY(o, cudaMalloc(&d_gdt, 3 * nt * sizeof(R)), PS_ERR_GPU_MEMORY);
    CUDA_TRY(o, cudaMalloc(&d_target, 3 * ns * sizeof(double)), PS_ERR_GPU_MEMORY);
    CUDA_TRY(o, cudaMalloc(&d_w, ns * sizeof(double)), PS_ERR_GPU_MEMORY);
    CUDA_TRY(o, cudaMalloc(&d_m0, 3 * ns * sizeof(double)), PS_ERR_GPU_MEMORY);
    /* x, g, gt, d, S[m], Y[m] */
    CUDA_TRY(o, cudaMalloc(&d_vec, (4 + 2 * (size_t)m) * n * sizeof(double)), PS_ERR_GPU_MEMORY);
    /* gpart[ntiles][n], lpart[G], rpart[G][RP], elapsed, eval_out, m_out[ns][3] */
    CUDA_TRY(o, cudaMalloc(&d_part, ((size_t)ntiles * n + G + (size_t)G * PS_GPU_RP + 2 + 3 * ns) * sizeof(double)),
             PS_ERR_GPU_MEMORY);
    CUDA_TRY(o, cudaMalloc(&d_state, sizeof(ps_solver)), PS_ERR_GPU_MEMORY);
    CUDA_TRY(o, cudaMalloc(&d_hist, (size_t)hist_cap * sizeof(ps_progress)), PS_ERR_GPU_MEMORY);
    CUDA_TRY(o, cudaMemset(d_vec, 0, (4 + 2 * (size_t)m) * n * sizeof(double)), PS_ERR_GPU_LAUNCH);

    CUDA_TRY(o, cudaMemcpy(d_spin, h_spin, ns * SP_STRIDE * sizeof(R), cudaMemcpyHostToDevice), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpy(d_gdt, h_gdt, 3 * nt * sizeof(R), cudaMemcpyHostToDevice), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpy(d_target, p->target, 3 * ns * sizeof(double), cudaMemcpyHostToDevice), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpy(d_w, h_w, ns * sizeof(double), cudaMemcpyHostToDevice), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpy(d_m0, h_m0, 3 * ns * sizeof(double), cudaMemcpyHostToDevice), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpy(d_vec, x, n * sizeof(double), cudaMemcpyHostToDevice), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpy(d_state, h_state, sizeof(ps_solver), cudaMemcpyHostToDevice), PS_ERR_GPU_LAUNCH);

    a.ns = (int)ns;
    a.nt = (int)nt;
    a.n = (int)n;
    a.sb = cfg.sb;
    a.segs = cfg.segs;
    a.ntiles = ntiles;
    a.loss = (int)p->loss;
    a.relax = p->t1 || p->t2;
    a.has_b1max = mode == MODE_SOLVE && ps_problem_has_b1max(p);
    a.memory = m;
    a.stage_pulse = ps_gpu_stage_pulse(o->precision, nt);
    a.gv = (int)((n + tb - 1) / tb) < G ? (int)((n + tb - 1) / tb) : G;
    a.prof = ps_gpu_profile_buffer();
    a.lambda = p->lambda;
    a.b1max = a.has_b1max ? p->b1_max : 0.0;
    a.spin = d_spin;
    a.gdt = d_gdt;
    a.target = d_target;
    a.w = d_w;
    a.m0 = d_m0;
    a.x = d_vec;
    a.g = d_vec + n;
    a.gt = d_vec + 2 * n;
    a.d = d_vec + 3 * n;
    a.S = d_vec + 4 * n;
    a.Y = d_vec + (4 + (size_t)m) * n;
    a.gpart = d_part;
    a.lpart = d_part + (size_t)ntiles * n;
    a.rpart = a.lpart + G;
    a.elapsed = a.rpart + (size_t)G * PS_GPU_RP;
    a.eval_out = a.elapsed + 1;
    a.m_out = m_out ? a.eval_out + 1 : NULL;
    a.state = d_state;
    a.hist = d_hist;
    a.hist_cap = hist_cap;
    a.mode = mode;

    {
        void *k = kernel_ptr<R>(cfg.regcap);
        void *params[] = {&a};
        CUDA_TRY(o, cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                 PS_ERR_GPU_LAUNCH);
        CUDA_TRY(o, cudaEventCreate(&ev0), PS_ERR_GPU_LAUNCH);
        CUDA_TRY(o, cudaEventCreate(&ev1), PS_ERR_GPU_LAUNCH);
        CUDA_TRY(o, cudaEventRecord(ev0, 0), PS_ERR_GPU_LAUNCH);
        CUDA_TRY(o, cudaLaunchCooperativeKernel(k, dim3(G), dim3(tb), params, smem, 0), PS_ERR_GPU_LAUNCH);
        CUDA_TRY(o, cudaEventRecord(ev1, 0), PS_ERR_GPU_LAUNCH);
        CUDA_TRY(o, cudaDeviceSynchronize(), PS_ERR_GPU_LAUNCH);
    }

    if (mode == MODE_EVAL) {
        CUDA_TRY(o, cudaMemcpy(f_out, a.eval_out, sizeof(double), cudaMemcpyDeviceToHost), PS_ERR_GPU_LAUNCH);
        if (g_out)
            CUDA_TRY(o, cudaMemcpy(g_out, a.g, n * sizeof(double), cudaMemcpyDeviceToHost), PS_ERR_GPU_LAUNCH);
        if (m_out)
            CUDA_TRY(o, cudaMemcpy(m_out, a.m_out, 3 * ns * sizeof(double), cudaMemcpyDeviceToHost), PS_ERR_GPU_LAUNCH);
        goto out;
    }
    CUDA_TRY(o, cudaMemcpy(h_state, d_state, sizeof(ps_solver), cudaMemcpyDeviceToHost), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpy(x, a.x, n * sizeof(double), cudaMemcpyDeviceToHost), PS_ERR_GPU_LAUNCH);
    {
        size_t rows = (size_t)h_state->iteration + 1;
        if (rows > (size_t)hist_cap)
            rows = (size_t)hist_cap;
        r->history = (ps_progress *)malloc(rows * sizeof(ps_progress));
        if (!r->history) {
            st = PS_ERR_NO_MEMORY;
            goto out;
        }
        CUDA_TRY(o, cudaMemcpy(r->history, d_hist, rows * sizeof(ps_progress), cudaMemcpyDeviceToHost),
                 PS_ERR_GPU_LAUNCH);
        r->history_len = rows;
        float ms = 0.0f;
        cudaEventElapsedTime(&ms, ev0, ev1);
        r->status = h_state->status;
        r->iterations = h_state->iteration;
        r->evaluations = h_state->evaluations;
        r->f = h_state->f;
        r->gnorm = h_state->gnorm;
        r->backend = PS_BACKEND_GPU;
        r->kernel_seconds = 1e-3 * ms;
        st = h_state->status;
    }
out:
    if (ev0)
        cudaEventDestroy(ev0);
    if (ev1)
        cudaEventDestroy(ev1);
    cudaFree(d_spin);
    cudaFree(d_gdt);
    cudaFree(d_target);
    cudaFree(d_w);
    cudaFree(d_m0);
    cudaFree(d_vec);
    cudaFree(d_part);
    cudaFree(d_state);
    cudaFree(d_hist);
    free(h_spin);
    free(h_gdt);
    free(h_w);
    free(h_m0);
    free(h_state);
    if (r)
        r->seconds = wall_seconds() - t_start;
    return st;
}

extern "C" int ps_gpu_solve_config(const ps_problem *p, const ps_options *o,
                                   const ps_gpu_config *cfg, double *x, ps_result *r)
{
    int st = ps_gpu_usable(o);
    if (st)
        return st;
    size_t n = 2 * p->nt;
    double *z = (double *)malloc(n * sizeof(double));
    if (!z)
        return PS_ERR_NO_MEMORY;
    ps_objective_from_pulse(p, x, z);
    st = o->precision == PS_PRECISION_DOUBLE
             ? run_kernel<double>(p, o, cfg, MODE_SOLVE, z, r, NULL, NULL, NULL)
             : run_kernel<float>(p, o, cfg, MODE_SOLVE, z, r, NULL, NULL, NULL);
    if (r->history_len > 0)
        ps_objective_pulse(p, z, x);
    free(z);
    if (r->history_len > 0) {
        ps_gpu_config used;
        ps_gpu_resolve_config(p, o, cfg, &used);
        char name[128];
        ps_gpu_device_describe(0, name, sizeof name);
        char *comma = strchr(name, ',');
        if (comma)
            *comma = '\0';
        snprintf(r->device, sizeof r->device, "%.48s (grid %d x %d%s, %d spins x %d segments, %s)",
                 name, used.grid, used.block, used.regcap ? " regcap" : "", used.sb, used.segs,
                 o->precision == PS_PRECISION_DOUBLE ? "float64" : "float32");
    }
    return st;
}

extern "C" int ps_gpu_solve(const ps_problem *p, const ps_options *o, double *x, ps_result *r)
{
    return ps_gpu_solve_config(p, o, NULL, x, r);
}

extern "C" int ps_gpu_eval(const ps_problem *p, const ps_options *o, const double *x, double *f,
                           double *grad, double *m)
{
    int st = ps_gpu_usable(o);
    if (st)
        return st;
    size_t n = 2 * p->nt;
    double *xc = (double *)malloc(n * sizeof(double));
    if (!xc)
        return PS_ERR_NO_MEMORY;
    memcpy(xc, x, n * sizeof(double));
    ps_result r;
    memset(&r, 0, sizeof r);
    st = o->precision == PS_PRECISION_DOUBLE
             ? run_kernel<double>(p, o, NULL, MODE_EVAL, xc, &r, f, grad, m)
             : run_kernel<float>(p, o, NULL, MODE_EVAL, xc, &r, f, grad, m);
    free(xc);
    return st;
}
