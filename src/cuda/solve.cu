/*
 * solve_persistent() on the GPU: ONE cooperative kernel runs the whole
 * L-BFGS solve. Every block keeps its own copy of the solver state machine
 * (opt/solver.h) in shared memory and takes every decision redundantly
 * from the same reduced values, so phases are separated by grid barriers
 * alone: no host round trip, no relaunch, no atomics that a result depends
 * on. The phases are the
 * shared loop of cuda/loop.cuh (the CUDA-graph variant runs it too, one
 * iteration per launch); the setup of the device data is the context of
 * cuda/context.cuh (shared with the comparison variants of cuda/variants.cu).
 */
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/context.cuh"
#include "cuda/launch.h"
#include "cuda/loop.cuh"
#include "cuda/phases.cuh"

extern "C" {
#include "cuda/gpu.h"
#include "common/log.h"
#include "common/stats.h"
#include "cpu/objective.h"
#include "opt/options.h"
#include "model/design.h"
#include "model/problem.h"
}

using namespace ps_gpu;

/* MINB: __launch_bounds__ minimum blocks of PS_GPU_MAX_THREADS per SM (1:
 * up to 128 registers a thread, 2: up to 64). */
template <typename R, int MINB>
__global__ void __launch_bounds__(PS_GPU_MAX_THREADS, MINB) persistent_solve_kernel(args a)
{
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
    solve_phases<R>(a, grid, L, smem, t0, last, a.t_base, false);
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

/* ------------------------------------------------------------------------ */
/* Host side                                                                */
/* ------------------------------------------------------------------------ */

template <typename R> static void *kernel_ptr(int regcap)
{
    return regcap ? (void *)persistent_solve_kernel<R, 2> : (void *)persistent_solve_kernel<R, 1>;
}

extern "C" void *ps_gpu_kernel_ptr(int precision, int regcap)
{
    return precision == PS_PRECISION_DOUBLE ? kernel_ptr<double>(regcap) : kernel_ptr<float>(regcap);
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

/*
 * Spins per tile SB and segments P = tb / SB for a block of tb threads
 * (heuristic; `persolve tune` measures instead). Per thread, an evaluation
 * costs rounds x (steps of its segment + a scan level's worth per level),
 * rounds = ceil(tiles / grid): the SB (power of two <= 32) with the least
 * cost, the larger SB on ties. min_segs: the fewest segments allowed
 * (relaxation bounds a segment's length, see ps_gpu_min_segments).
 */
extern "C" void ps_gpu_default_config(size_t ns, size_t nt, int grid_blocks, int tb, int min_segs,
                                      int *sb, int *segs)
{
    double best = 0.0;
    *sb = 1;
    for (int s = 1; s <= 32 && s <= tb; s *= 2) {
        int P = tb / s;
        if (s > 1 && P < min_segs)
            break;
        size_t tiles = (ns + s - 1) / s;
        double rounds = (double)((tiles + grid_blocks - 1) / grid_blocks);
        int levels = 0;
        while ((1 << levels) < P)
            levels++;
        double kseg = (double)((nt + P - 1) / P);
        double cost = rounds * (kseg + 2.0 * levels);
        if (s == 1 || cost <= best) {
            best = cost;
            *sb = s;
        }
    }
    *segs = tb / *sb;
}

/*
 * The backward replay runs each segment's relaxation in reverse, which
 * multiplies rounding errors by exp(K dt / T) over a segment of K steps.
 * Segments are kept to K dt max(1/T1, 1/T2) <= 2 (a factor below e^2):
 * the fewest segments that allows, at least 1.
 */
extern "C" int ps_gpu_min_segments(const ps_problem *p)
{
    double rmax = 0.0; /* largest dt / T over the spins */
    for (size_t j = 0; j < p->ns; j++) {
        if (p->t1)
            rmax = fmax(rmax, p->dt / p->t1[j]);
        if (p->t2)
            rmax = fmax(rmax, p->dt / p->t2[j]);
    }
    double segs = ceil((double)p->nt * rmax / 2.0);
    return segs < 1.0 ? 1 : segs > 1e9 ? 1000000000 : (int)segs;
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
    /* the caller's shape, else the options' forced fields, else the tune cache (tune/tune.c) */
    int src = ps_gpu_preferred_config(p, o, sms, &c);
    if (src < 0)
        return src;
    int tb = c.block ? c.block : PS_GPU_DEFAULT_THREADS;
    PS_RETURN_ERROR_IF(o, tb < 32 || tb > PS_GPU_MAX_THREADS || tb % 32, PS_ERR_OPTION,
                       "GPU block size %d is not a multiple of 32 in 32..%d", tb, PS_GPU_MAX_THREADS);
    int G = c.grid ? c.grid : PS_GPU_BLOCKS_PER_SM * sms;
    int sb = c.sb, segs = c.segs;
    const int min_segs = ps_gpu_min_segments(p);
    PS_RETURN_ERROR_IF(o, p->ns > (size_t)(INT_MAX / 3) || p->nt > (size_t)(INT_MAX / 6), PS_ERR_SIZE,
                       "ns = %zu, nt = %zu exceed the GPU backend's 32-bit indexing", p->ns, p->nt);
    for (int pass = 0; pass < 2; pass++) {
        if (!c.sb || !c.segs)
            ps_gpu_default_config(p->ns, p->nt, G, tb, min_segs, &sb, &segs);
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
    size_t rd = reduce_smem_bytes(tb);
    return ev > rd ? ev : rd;
}

extern "C" size_t ps_gpu_dyn_smem(int precision, int sb, int segs, int tb, size_t nt)
{
    int pl = ps_gpu_stage_pulse(precision, nt) ? (int)nt : 0;
    return precision == PS_PRECISION_DOUBLE ? dyn_smem_bytes<double>(sb, segs, tb, pl)
                                            : dyn_smem_bytes<float>(sb, segs, tb, pl);
}

/* Build the per-spin records and gdt_k (model/design.h) in precision R. */
template <typename R>
static void spin_records(const ps_problem *p, R *spin, R *gdt, double *w, double *m0)
{
    for (size_t j = 0; j < p->ns; j++) {
        R *s = spin + j * SP_STRIDE;
        ps_spin_consts c;
        ps_design_spin(p, j, &c);
        s[SP_R0] = (R)c.r[0];
        s[SP_R1] = (R)c.r[1];
        s[SP_R2] = (R)c.r[2];
        s[SP_GS] = (R)c.gs;
        s[SP_WZ] = (R)c.wz;
        s[SP_A1] = (R)c.a1;
        s[SP_A2] = (R)c.a2;
        s[SP_B1] = (R)c.b1;
        s[SP_B2] = (R)c.b2;
        w[j] = c.w;
        for (int i = 0; i < 3; i++)
            m0[3 * j + i] = c.m0[i];
    }
    for (size_t k = 0; k < p->nt; k++) {
        double g[3];
        ps_design_gdt(p, k, g);
        for (int c = 0; c < 3; c++)
            gdt[3 * k + c] = (R)g[c];
    }
}

/*
 * Set up a run: launch shape, host staging, device buffers, uploads, the
 * args struct and the solver state in its START phase (see cuda/context.cuh).
 */
template <typename R>
static int context_create_t(const ps_problem *p, const ps_options *o, const ps_gpu_config *cfg_in,
                            int mode, const double *x, int want_m, context *c)
{
    int st = PS_CONVERGED;
    const size_t ns = p->ns, nt = p->nt, n = PS_DESIGN_NX(nt);
    const int m = o->memory;
    args a;
    memset(&a, 0, sizeof a);
    memset(c, 0, sizeof *c);
    void *d_spin = NULL, *d_gdt = NULL;
    double *d_target = NULL, *d_w = NULL, *d_m0 = NULL, *d_vec = NULL, *d_part = NULL;
    ps_solver *d_state = NULL;
    ps_progress *d_hist = NULL;
    R *h_spin = NULL, *h_gdt = NULL;
    double *h_w = NULL, *h_m0 = NULL;
    ps_solver *h_state = NULL;

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
    spin_records<R>(p, h_spin, h_gdt, h_w, h_m0);
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
    /* gpart[G][n], lpart[G], rpart[G][RP], rdot[4 MAX_MEMORY][G], elapsed, eval_out[2], m_out[ns][3] */
    CUDA_TRY(o, cudaMalloc(&d_part, ((size_t)G * n + G + (size_t)G * PS_GPU_RP + (size_t)4 * PS_MAX_MEMORY * G + 3 +
                                     3 * ns) * sizeof(double)),
             PS_ERR_GPU_MEMORY);
    CUDA_TRY(o, cudaMalloc(&d_state, sizeof(ps_solver)), PS_ERR_GPU_MEMORY);
    CUDA_TRY(o, cudaMalloc(&d_hist, (size_t)hist_cap * sizeof(ps_progress)), PS_ERR_GPU_MEMORY);
    CUDA_TRY(o, cudaMalloc(&c->d_clock, sizeof(unsigned long long)), PS_ERR_GPU_MEMORY);
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
    a.des = ps_problem_design(p, mode != MODE_SOLVE);
    a.memory = m;
    a.stage_pulse = ps_gpu_stage_pulse(o->precision, nt);
    a.gv = (int)((n + tb - 1) / tb) < G ? (int)((n + tb - 1) / tb) : G;
    a.prof = ps_gpu_profile_buffer();
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
    a.lpart = d_part + (size_t)G * n;
    a.rpart = a.lpart + G;
    a.rdot = a.rpart + (size_t)G * PS_GPU_RP;
    a.elapsed = a.rdot + (size_t)4 * PS_MAX_MEMORY * G;
    a.eval_out = a.elapsed + 1;
    a.m_out = want_m ? a.eval_out + 2 : NULL;
    a.state = d_state;
    a.hist = d_hist;
    a.hist_cap = hist_cap;
    a.mode = mode;
    /* elapsed = 0: the time limit's clock before the first update; and
     * eval_out (the end seconds and f of a launch) defined before one ends */
    CUDA_TRY(o, cudaMemset(a.elapsed, 0, 3 * sizeof(double)), PS_ERR_GPU_LAUNCH);

    c->a = a;
    c->cfg = cfg;
    c->smem = smem;
    c->precision = o->precision;
    c->d_spin = d_spin;
    c->d_gdt = d_gdt;
    c->d_target = d_target;
    c->d_w = d_w;
    c->d_m0 = d_m0;
    c->d_vec = d_vec;
    c->d_part = d_part;
    c->d_state = d_state;
    c->d_hist = d_hist;
    d_spin = d_gdt = NULL;
    d_target = d_w = d_m0 = d_vec = d_part = NULL;
    d_state = NULL;
    d_hist = NULL;
out:
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
    if (st) {
        cudaFree(c->d_clock);
        memset(c, 0, sizeof *c);
    }
    return st;
}

int ps_gpu::context_create(const ps_problem *p, const ps_options *o, const ps_gpu_config *cfg_in,
                           int mode, const double *x, int want_m, context *c)
{
    return o->precision == PS_PRECISION_DOUBLE
               ? context_create_t<double>(p, o, cfg_in, mode, x, want_m, c)
               : context_create_t<float>(p, o, cfg_in, mode, x, want_m, c);
}

void ps_gpu::context_destroy(context *c)
{
    cudaFree(c->d_spin);
    cudaFree(c->d_gdt);
    cudaFree(c->d_target);
    cudaFree(c->d_w);
    cudaFree(c->d_m0);
    cudaFree(c->d_vec);
    cudaFree(c->d_part);
    cudaFree(c->d_state);
    cudaFree(c->d_hist);
    cudaFree(c->d_clock);
    memset(c, 0, sizeof *c);
}

int ps_gpu::context_result(const context *c, const ps_options *o, double *x, ps_result *r)
{
    int st = PS_CONVERGED;
    const size_t n = (size_t)c->a.n;
    ps_solver *h_state = (ps_solver *)malloc(sizeof(ps_solver));
    if (!h_state)
        return PS_ERR_NO_MEMORY;
    CUDA_TRY(o, cudaMemcpy(h_state, c->d_state, sizeof(ps_solver), cudaMemcpyDeviceToHost), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpy(x, c->a.x, n * sizeof(double), cudaMemcpyDeviceToHost), PS_ERR_GPU_LAUNCH);
    {
        size_t rows = (size_t)h_state->iteration + 1;
        if (rows > (size_t)c->a.hist_cap)
            rows = (size_t)c->a.hist_cap;
        r->history = (ps_progress *)malloc(rows * sizeof(ps_progress));
        if (!r->history) {
            st = PS_ERR_NO_MEMORY;
            goto out;
        }
        CUDA_TRY(o, cudaMemcpy(r->history, c->d_hist, rows * sizeof(ps_progress), cudaMemcpyDeviceToHost),
                 PS_ERR_GPU_LAUNCH);
        r->history_len = rows;
        r->status = h_state->status;
        r->iterations = h_state->iteration;
        r->evaluations = h_state->evaluations;
        r->f = h_state->f;
        r->gnorm = h_state->gnorm;
        r->backend = PS_BACKEND_GPU;
        st = h_state->status;
    }
out:
    free(h_state);
    return st;
}

/* The persistent kernel on a set-up context: one cooperative launch. */
static int launch_persistent(context *c, const ps_options *o, double *ms)
{
    int st = PS_CONVERGED;
    cudaEvent_t ev0 = NULL, ev1 = NULL;
    void *k = c->precision == PS_PRECISION_DOUBLE ? kernel_ptr<double>(c->cfg.regcap)
                                                  : kernel_ptr<float>(c->cfg.regcap);
    void *params[] = {&c->a};
    CUDA_TRY(o, cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c->smem),
             PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaEventCreate(&ev0), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaEventCreate(&ev1), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaEventRecord(ev0, 0), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaLaunchCooperativeKernel(k, dim3(c->cfg.grid), dim3(c->cfg.block), params, c->smem, 0),
             PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaEventRecord(ev1, 0), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaDeviceSynchronize(), PS_ERR_GPU_LAUNCH);
    event_ms(ev0, ev1, ms);
out:
    if (ev0)
        cudaEventDestroy(ev0);
    if (ev1)
        cudaEventDestroy(ev1);
    return st;
}

/*
 * One run of the persistent kernel. mode MODE_SOLVE: x (optimizer
 * variables) in/out, r filled. MODE_EVAL: physical pulse x, f, grad, m.
 */
static int run_kernel(const ps_problem *p, const ps_options *o, const ps_gpu_config *cfg_in,
                      int mode, double *x, ps_result *r, double *f_out, double *g_out,
                      double *m_out)
{
    context c;
    double ms = 0.0;
    const double t_start = wall_seconds();
    const size_t n = ps_problem_nx(p);
    int st = context_create(p, o, cfg_in, mode, x, m_out != NULL, &c);
    if (st) {
        if (r)
            r->seconds = wall_seconds() - t_start;
        return st;
    }
    st = launch_persistent(&c, o, &ms);
    if (st)
        goto out;
    if (mode == MODE_EVAL) {
        CUDA_TRY(o, cudaMemcpy(f_out, c.a.eval_out, sizeof(double), cudaMemcpyDeviceToHost), PS_ERR_GPU_LAUNCH);
        if (g_out)
            CUDA_TRY(o, cudaMemcpy(g_out, c.a.g, n * sizeof(double), cudaMemcpyDeviceToHost), PS_ERR_GPU_LAUNCH);
        if (m_out)
            CUDA_TRY(o, cudaMemcpy(m_out, c.a.m_out, 3 * p->ns * sizeof(double), cudaMemcpyDeviceToHost),
                     PS_ERR_GPU_LAUNCH);
        goto out;
    }
    st = context_result(&c, o, x, r);
    r->kernel_seconds = 1e-3 * ms;
out:
    context_destroy(&c);
    if (r)
        r->seconds = wall_seconds() - t_start;
    return st;
}

/* "NAME (grid G x B, SB spins x P segments, float32)" of a solve. */
extern "C" void ps_gpu_describe_shape(const ps_gpu_config *c, int precision, char *buf, size_t len)
{
    char name[128];
    ps_gpu_device_describe(0, name, sizeof name);
    char *comma = strchr(name, ',');
    if (comma)
        *comma = '\0';
    snprintf(buf, len, "%.48s (grid %d x %d%s, %d spins x %d segments, %s)", name, c->grid, c->block,
             c->regcap ? " regcap" : "", c->sb, c->segs,
             precision == PS_PRECISION_DOUBLE ? "float64" : "float32");
}

/* ps_gpu_describe_shape of the shape a solve of p with o and cfg runs. */
static void describe_run(const ps_problem *p, const ps_options *o, const ps_gpu_config *cfg,
                         ps_result *r)
{
    ps_gpu_config used;
    ps_gpu_resolve_config(p, o, cfg, &used);
    ps_gpu_describe_shape(&used, o->precision, r->device, sizeof r->device);
}

/* A comparison variant: set up, solve, results, release. */
static int run_variant(const ps_problem *p, const ps_options *o, const ps_gpu_config *cfg,
                       int variant, double *z, ps_result *r)
{
    context c;
    double ms = 0.0, t_start = wall_seconds();
    int st = context_create(p, o, cfg, MODE_SOLVE, z, 0, &c);
    if (st) {
        r->seconds = wall_seconds() - t_start;
        return st;
    }
    st = variant == PS_GPU_HOST_LOOP ? solve_host_loop(&c, o, &ms) : solve_graph(&c, o, &ms);
    if (!st) {
        st = context_result(&c, o, z, r);
        r->kernel_seconds = 1e-3 * ms;
    }
    context_destroy(&c);
    r->seconds = wall_seconds() - t_start;
    return st;
}

extern "C" int ps_gpu_solve_variant(const ps_problem *p, const ps_options *o,
                                    const ps_gpu_config *cfg, int variant, double *x,
                                    ps_result *r)
{
    int st = ps_gpu_usable(o);
    if (st)
        return st;
    PS_RETURN_ERROR_IF(o, variant < PS_GPU_PERSISTENT || variant > PS_GPU_GRAPH, PS_ERR_OPTION,
                       "unknown GPU solve variant %d", variant);
    size_t n = ps_problem_nx(p);
    double *z = (double *)malloc(n * sizeof(double));
    if (!z)
        return PS_ERR_NO_MEMORY;
    ps_design_x_of_pulse(p, x, z);
    st = variant == PS_GPU_PERSISTENT ? run_kernel(p, o, cfg, MODE_SOLVE, z, r, NULL, NULL, NULL)
                                      : run_variant(p, o, cfg, variant, z, r);
    if (r->history_len > 0)
        ps_design_pulse_of_x(p, z, x);
    free(z);
    if (r->history_len > 0)
        describe_run(p, o, cfg, r);
    r->status = st; /* also on the error paths that never reached the result */
    return st;
}

extern "C" int ps_gpu_solve_config(const ps_problem *p, const ps_options *o,
                                   const ps_gpu_config *cfg, double *x, ps_result *r)
{
    return ps_gpu_solve_variant(p, o, cfg, PS_GPU_PERSISTENT, x, r);
}

extern "C" int ps_gpu_eval_timing(const ps_problem *p, const ps_options *o,
                                  const ps_gpu_config *cfg, const double *x_at, int repeats,
                                  double *kernel_seconds, double *launch_seconds)
{
    int st = ps_gpu_usable(o);
    if (st)
        return st;
    PS_RETURN_ERROR_IF(o, repeats < 1, PS_ERR_OPTION, "eval timing: %d repeats", repeats);
    size_t n = ps_problem_nx(p);
    double *x = (double *)malloc(n * sizeof(double));
    double *tk = (double *)malloc((size_t)repeats * sizeof(double));
    double *tl = (double *)malloc((size_t)repeats * sizeof(double));
    context c;
    memset(&c, 0, sizeof c);
    if (!x || !tk || !tl) {
        st = PS_ERR_NO_MEMORY;
        goto done;
    }
    if (x_at)
        memcpy(x, x_at, n * sizeof(double));
    else
        ps_problem_x0(p, x);
    st = context_create(p, o, cfg, MODE_EVAL, x, 0, &c);
    if (st)
        goto done;
    for (int i = -1; i < repeats && !st; i++) { /* i = -1: warm-up */
        double ms = 0.0, in_kernel = 0.0;
        st = launch_persistent(&c, o, &ms);
        if (!st && cudaMemcpy(&in_kernel, c.a.elapsed, sizeof(double), cudaMemcpyDeviceToHost) != cudaSuccess) {
            cudaGetLastError();
            st = PS_ERR_GPU_LAUNCH;
        }
        if (i >= 0) {
            tk[i] = in_kernel;
            tl[i] = 1e-3 * ms;
        }
    }
    context_destroy(&c);
    if (!st) {
        *kernel_seconds = ps_median(tk, (size_t)repeats);
        *launch_seconds = ps_median(tl, (size_t)repeats);
    }
done:
    free(x);
    free(tk);
    free(tl);
    return st;
}

extern "C" int ps_gpu_eval(const ps_problem *p, const ps_options *o, const double *x, double *f,
                           double *grad, double *m)
{
    int st = ps_gpu_usable(o);
    if (st)
        return st;
    size_t n = ps_problem_nx(p);
    double *xc = (double *)malloc(n * sizeof(double));
    if (!xc)
        return PS_ERR_NO_MEMORY;
    memcpy(xc, x, n * sizeof(double));
    ps_result r;
    memset(&r, 0, sizeof r);
    st = run_kernel(p, o, NULL, MODE_EVAL, xc, &r, f, grad, m);
    free(xc);
    return st;
}
