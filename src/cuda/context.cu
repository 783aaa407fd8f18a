/*
 * A problem and a start point set up on the device (cuda/context.cuh):
 * the per-spin records, the buffers of the args struct, the resolved
 * launch shape and the solver state in its START phase; and the result of
 * a run copied back.
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/context.cuh"
#include "cuda/launch.h"
#include "cuda/phases.cuh"

extern "C" {
#include "common/log.h"
#include "model/design.h"
#include "model/problem.h"
#include "opt/options.h"
}

using namespace ps_gpu;

/* Build the per-spin records and the gdt rows from row -1 (zeroed memory:
 * model/design.h, cuda/args.cuh) in precision R;
 * with S (the channels kernel), every spin's dt gamma S_jc [ns][nc][2]. */
template <typename R>
static void spin_records(const ps_problem *p, R *spin, R *gdt, double *w, double *m0, R *S)
{
    for (size_t j = 0; j < p->ns; j++) {
        R *s = spin + j * SP_STRIDE;
        ps_spin_consts c;
        ps_design_spin(p, j, &c);
        s[SP_R0] = (R)c.r[0];
        s[SP_R1] = (R)c.r[1];
        s[SP_R2] = (R)c.r[2];
        s[SP_GS] = (R)c.gS[0][0]; /* the single-channel kernel's real B1 scale */
        s[SP_WZ] = (R)c.wz;
        s[SP_A1] = (R)c.a1;
        s[SP_A2] = (R)c.a2;
        s[SP_B1] = (R)c.b1;
        s[SP_B2] = (R)c.b2;
        w[j] = c.w;
        for (int i = 0; i < 3; i++)
            m0[3 * j + i] = c.m0[i];
        for (size_t q = 0; S && q < p->nc; q++) {
            S[2 * (j * p->nc + q)] = (R)c.gS[q][0];
            S[2 * (j * p->nc + q) + 1] = (R)c.gS[q][1];
        }
    }
    for (size_t k = 0; k < p->nt; k++) { /* the rows of cuda/args.cuh; the guards and fourth values stay 0 */
        double g[3];
        ps_design_gdt(p, k, g);
        for (int c = 0; c < 3; c++)
            gdt[GDT_ROW0 + 4 * k + c] = (R)g[c];
    }
}

/*
 * A context's buffers, in one device allocation (one allocation, one
 * free, one upload): those uploaded at the set-up first, in the order of the host
 * image that one copy uploads, x (the first vector of vec) last among
 * them; then the rest. Each starts at a multiple of 256 bytes.
 */
enum {
    BUF_SPIN,   /* [ns][SP_STRIDE] R */
    BUF_GDT,    /* [gdt_elems(nt)] R, the gdt rows from row -1 */
    BUF_SPINS,  /* [ns][nc][2] R (channels kernel) */
    BUF_TARGET, /* [ns][3] */
    BUF_W,      /* [ns] */
    BUF_M0,     /* [ns][3] */
    BUF_CONS,   /* the constraints (context_create_t) */
    BUF_STATE,  /* ps_solver */
    BUF_VEC,    /* x, g, gt, d, S[m], Y[m], each [n]: x uploaded, the rest zeroed */
    BUF_PART,   /* the partials and outputs (context_create_t) */
    BUF_GDTB,   /* [copies][gdt_elems(nt)] R, the gdt copies (designed axes): the
                 * team's one (gteam) or the G blocks' own, of BUF_GDT, made at the
                 * set-up, their fixed axes never written again */
    BUF_HIST,   /* [hist_cap] ps_progress */
    BUF_CLOCK,  /* [1] unsigned long long */
    BUF_COUNT
};

/* Doubles at the start of BUF_PART before the partials: elapsed and
 * eval_out[2], padded to 256 bytes so that gpart stays aligned. */
#define PART_HEAD 32
/* ... of which the first are zeroed at the set-up: elapsed, eval_out[2] */
#define PART_ZEROED 3

struct arena_layout {
    size_t off[BUF_COUNT + 1]; /* off[BUF_COUNT]: the allocation's size */
    size_t upload;             /* bytes of the host image: up to the end of x */
};

static void arena_plan(const size_t bytes[BUF_COUNT], size_t x_bytes, arena_layout *L)
{
    size_t at = 0;
    for (int i = 0; i < BUF_COUNT; i++) {
        L->off[i] = at;
        at += (bytes[i] + 255) & ~(size_t)255;
    }
    L->off[BUF_COUNT] = at;
    L->upload = L->off[BUF_VEC] + x_bytes;
}

/*
 * Device memory from the stream-ordered allocator (where the device has
 * memory pools; else cudaMalloc and cudaFree): cudaFree (even of NULL)
 * and cudaFreeHost wait for every kernel running on the device, so a run
 * set up or released while other kernels run (a problem added to a
 * running batch, solo runs on other streams, a paused kernel waiting for
 * its host) would wait for them; cudaMallocAsync and cudaFreeAsync do
 * not. The allocation is complete before it is used on any stream
 * (synchronized here); the free comes after every use (the run's kernel
 * has ended).
 */
/* Per device (several GPUs: each rank's), set up at its first allocation:
 * 0 not yet, 1 memory pools, 2 cudaMalloc and cudaFree. */
enum { POOL_DEVICES = 64 };
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned char pool_kind[POOL_DEVICES];

/* The device's default pool keeps what is freed for the process (with
 * the default threshold 0 it gives memory back to the driver at each
 * synchronization, which, like cudaFree, may wait for running kernels). */
static int pool_keep(int dev)
{
    cudaMemPool_t pool;
    uint64_t keep = UINT64_MAX;
    int has = 0;
    if (cudaDeviceGetAttribute(&has, cudaDevAttrMemoryPoolsSupported, dev) != cudaSuccess || !has) {
        cudaGetLastError();
        return 2;
    }
    if (cudaDeviceGetDefaultMemPool(&pool, dev) != cudaSuccess ||
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess)
        cudaGetLastError(); /* a pool that gives memory back still works */
    return 1;
}

/* 1 if the current device allocates from its pool. */
static int pools(void)
{
    int dev = 0;
    cudaGetDevice(&dev);
    if (dev < 0 || dev >= POOL_DEVICES)
        return 0;
    pthread_mutex_lock(&pool_mu);
    if (!pool_kind[dev])
        pool_kind[dev] = (unsigned char)pool_keep(dev);
    const int k = pool_kind[dev];
    pthread_mutex_unlock(&pool_mu);
    return k == 1;
}

cudaError_t ps_gpu::device_alloc(void **p, size_t bytes)
{
    if (!pools())
        return cudaMalloc(p, bytes);
    cudaError_t e = cudaMallocAsync(p, bytes, cudaStreamPerThread);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(cudaStreamPerThread);
    return e;
}

void ps_gpu::device_free(void *p)
{
    if (!p) /* cudaFree(NULL) too would wait for the running kernels */
        return;
    if (pools())
        cudaFreeAsync(p, cudaStreamPerThread);
    else
        cudaFree(p);
}

/*
 * Set up a run: launch shape, the host image of what is uploaded, one
 * device allocation, one upload, the args struct and the solver state in
 * its START phase (see cuda/context.cuh).
 */
template <typename R>
static int context_create_t(const ps_problem *p, const ps_options *o, const ps_gpu_config *cfg_in,
                            int mode, const double *x, int want_m, context *c, const ps_problem *whole,
                            ps_gpu_scratch *scratch)
{
    int st = PS_CONVERGED;
    const size_t ns = p->ns, nt = p->nt, n = ps_problem_nx(p); /* the RF's, then the designed axes' */
    const int m = o->memory;
    args a;
    memset(&a, 0, sizeof a);
    memset(c, 0, sizeof *c);
    char *d_arena = NULL, *h_img = NULL, *h_own = NULL;

    ps_gpu_config cfg;
    st = ps_gpu_resolve_config(p, o, cfg_in, &cfg);
    if (st)
        return st;
    const int G = cfg.grid, tb = cfg.block;
    const int ntiles = (int)((ns + cfg.sb - 1) / cfg.sb);
    /* a batch's set-up (scratch): the batch kernel runs the class's base phases (cuda/batch.cu) */
    const int channels = ps_gpu_channels(p), designed = p->design_g != 0;
    const int kclass = scratch ? PS_GPU_CLASS_BASE(ps_gpu_kernel_class(p)) : ps_gpu_kernel_class(p);
    const size_t smem = ps_gpu_config_smem(p, o->precision, &cfg, scratch != NULL);
    /* the constraints: [n_b1] per-channel limits, [n_mask] the RF mask, then
     * with VOPs [n_vop] their matrices vop [nq][nc][nc][2], bsar [nt][nc][2]
     * the pulse, spart [nq][G] + sarw [G][2 nq] the SAR partials */
    const size_t n_b1 = p->b1_max_channel ? p->nc : 0, n_vop = 2 * p->nq * p->nc * p->nc;
    const size_t n_mask = p->rf_mask ? nt : 0;
    const size_t n_cons = n_b1 + n_mask + (p->nq ? n_vop + 2 * nt * p->nc + 3 * p->nq * (size_t)G : 0);
    /* elapsed, eval_out[2] (in PART_HEAD doubles, so that the state, the
     * vectors and they are one range: context.cuh, xfer), gpart[G][n],
     * lpart[G], rpart[G][RP], rdot[4 MAX_MEMORY][G], m_out[ns][3], gpen[G][4]
     * (designed axes) and gtot[G][4] (gteam) */
    /* designed axes: the team forms the waveforms in the single-channel
     * kernel for pulses of PS_GPU_WAVEFORM_TEAM_STEPS steps a thread or
     * more, each block for shorter ones and in the channels kernels
     * (cuda/gradient.cuh team_waveform) */
    const int gteam = designed && !channels && nt >= (size_t)PS_GPU_WAVEFORM_TEAM_STEPS * tb;
    const size_t copies = gteam ? 1 : (size_t)G;
    const size_t n_part = PART_HEAD + (size_t)G * n + G + (size_t)G * PS_GPU_RP + (size_t)4 * PS_MAX_MEMORY * G +
                          3 * ns + (designed ? (size_t)(gteam ? 8 : 4) * G : 0);
    const size_t n_vec = (4 + 2 * (size_t)m) * n;
    const int kmode = mode == MODE_SOLVE ? MODE_SOLVE : MODE_EVAL; /* the kernel's */
    int hist_cap = kmode == MODE_EVAL ? 1
                   : o->max_iterations > 0 && o->max_iterations < 1000000
                       ? (int)o->max_iterations + 1
                       : 1000001;
    size_t bytes[BUF_COUNT];
    bytes[BUF_SPIN] = ns * SP_STRIDE * sizeof(R);
    bytes[BUF_GDT] = gdt_elems(nt) * sizeof(R);
    bytes[BUF_SPINS] = channels ? 2 * ns * p->nc * sizeof(R) : 0;
    bytes[BUF_TARGET] = 3 * ns * sizeof(double);
    bytes[BUF_W] = ns * sizeof(double);
    bytes[BUF_M0] = 3 * ns * sizeof(double);
    bytes[BUF_CONS] = n_cons * sizeof(double);
    bytes[BUF_STATE] = sizeof(ps_solver);
    bytes[BUF_VEC] = n_vec * sizeof(double);
    bytes[BUF_PART] = n_part * sizeof(double);
    bytes[BUF_GDTB] = designed ? copies * gdt_elems(nt) * sizeof(R) : 0;
    bytes[BUF_HIST] = (size_t)hist_cap * sizeof(ps_progress);
    bytes[BUF_CLOCK] = sizeof(unsigned long long);
    arena_layout L;
    arena_plan(bytes, n * sizeof(double), &L);

    /* the host image of the uploaded buffers, zeroed. g, gt, d, S and Y
     * start at zero; elapsed = 0 (the time limit's clock before the first
     * update); eval_out (the end seconds and f of a launch) defined before
     * one ends; gpen (designed axes) defined before a launch that starts
     * in UPDATE reads it (unused there), and gtot's counts of published
     * totals equal (cuda/gradient.cuh waveform_totals). With a scratch (a batch's
     * set-ups, made also while its kernel holds every SM) those zeros go
     * up with the image through the copy engine: a cudaMemset is a kernel,
     * which waits for free SMs, so a set-up beside a running batch would
     * wait for the batch (and for the same reason the gdt copies go up
     * from the image too, not as device copies). Without, the
     * image ends at x and the zeros are memsets. */
    const size_t zeros_end = L.off[BUF_PART] + PART_ZEROED * sizeof(double);
    const size_t gpen_bytes = designed ? (size_t)(gteam ? 8 : 4) * G * sizeof(double) : 0; /* gpen, gtot */
    const size_t gdtb_host = scratch ? bytes[BUF_GDTB] : 0; /* after the zeros of gpen */
    const size_t upload = scratch ? zeros_end : L.upload;
    if (scratch) {
        const size_t need = upload + gpen_bytes + gdtb_host;
        if (scratch->cap < need) {
            void *q = realloc(scratch->p, need);
            if (!q)
                return PS_ERR_NO_MEMORY;
            scratch->p = q;
            scratch->cap = need;
        }
        h_img = (char *)scratch->p;
        memset(h_img, 0, need);
    } else if (!(h_img = h_own = (char *)calloc(1, L.upload))) {
        return PS_ERR_NO_MEMORY;
    }
    {
        double *h_cons = (double *)(h_img + L.off[BUF_CONS]);
        spin_records<R>(p, (R *)(h_img + L.off[BUF_SPIN]), (R *)(h_img + L.off[BUF_GDT]),
                        (double *)(h_img + L.off[BUF_W]), (double *)(h_img + L.off[BUF_M0]),
                        channels ? (R *)(h_img + L.off[BUF_SPINS]) : NULL);
        memcpy(h_img + L.off[BUF_TARGET], p->target, bytes[BUF_TARGET]);
        if (n_b1)
            memcpy(h_cons, p->b1_max_channel, n_b1 * sizeof(double));
        if (n_mask)
            memcpy(h_cons + n_b1, p->rf_mask, n_mask * sizeof(double));
        if (p->nq)
            memcpy(h_cons + n_b1 + n_mask, p->vop, n_vop * sizeof(double));
        ps_solver *h_state = (ps_solver *)(h_img + L.off[BUF_STATE]);
        ps_solver_init(h_state, m, o->past, o->max_linesearch, o->max_iterations, o->max_evaluations, o->gtol,
                       o->ftol, o->c1, o->c2, o->time_limit, ps_options_fnoise(o));
        if (mode == MODE_SOLVE && ps_problem_penalized(p)) /* SAR, gradient limits */
            ps_solver_set_rounds(h_state, ps_options_max_rounds(o), ps_options_constraint_tol(o),
                                 ps_penalty_mu0(whole ? whole : p, o));
        memcpy(h_img + L.off[BUF_VEC], x, n * sizeof(double));
        for (size_t k = 0; gdtb_host && k < copies; k++) /* the copies of the gdt rows */
            memcpy(h_img + upload + gpen_bytes + k * bytes[BUF_GDT], h_img + L.off[BUF_GDT], bytes[BUF_GDT]);
    }

    CUDA_TRY(o, device_alloc((void **)&d_arena, L.off[BUF_COUNT]), PS_ERR_GPU_MEMORY);
    CUDA_TRY(o, cudaMemcpy(d_arena, h_img, upload, cudaMemcpyHostToDevice), PS_ERR_GPU_LAUNCH);
    if (gdtb_host) { /* the gdt copies, from the image */
        CUDA_TRY(o, cudaMemcpy(d_arena + L.off[BUF_GDTB], h_img + upload + gpen_bytes, gdtb_host,
                               cudaMemcpyHostToDevice),
                 PS_ERR_GPU_LAUNCH);
    } else if (bytes[BUF_GDTB]) { /* the gdt copies: the problem's, doubled on the device */
        char *cp = d_arena + L.off[BUF_GDTB];
        const size_t one = bytes[BUF_GDT];
        CUDA_TRY(o, cudaMemcpyAsync(cp, d_arena + L.off[BUF_GDT], one, cudaMemcpyDeviceToDevice, cudaStreamPerThread),
                 PS_ERR_GPU_LAUNCH);
        for (size_t have = 1; have < copies; have *= 2) {
            const size_t more = have < copies - have ? have : copies - have;
            CUDA_TRY(o, cudaMemcpyAsync(cp + have * one, cp, more * one, cudaMemcpyDeviceToDevice, cudaStreamPerThread),
                     PS_ERR_GPU_LAUNCH);
        }
        CUDA_TRY(o, cudaStreamSynchronize(cudaStreamPerThread), PS_ERR_GPU_LAUNCH);
    }

    {
        double *d_vec = (double *)(d_arena + L.off[BUF_VEC]), *d_part = (double *)(d_arena + L.off[BUF_PART]);
        double *d_cons = n_cons ? (double *)(d_arena + L.off[BUF_CONS]) : NULL;
        a.ns = (int)ns;
        a.nt = (int)nt;
        a.n = (int)n;
        a.sb = cfg.sb;
        a.segs = cfg.segs;
        a.ntiles = ntiles;
        a.loss = (int)p->loss;
        a.relax = p->t1 || p->t2;
        a.des = ps_problem_design(p, mode == MODE_EVAL);
        if (a.des.b1max_c)
            a.des.b1max_c = d_cons; /* the device's copy */
        if (a.des.rf_mask)
            a.des.rf_mask = d_cons + n_b1;
        a.sar = ps_problem_sar(p);
        if (p->nq) {
            a.sar.vop = d_cons + n_b1 + n_mask;
            a.bsar = d_cons + n_b1 + n_mask + n_vop;
            a.spart = a.bsar + 2 * nt * p->nc;
            a.sarw = a.spart + p->nq * (size_t)G;
        }
        a.memory = m;
        a.stage_pulse = ps_gpu_stage_pulse(o->precision, nt, channels);
        a.gv = (int)((n + tb - 1) / tb) < G ? (int)((n + tb - 1) / tb) : G;
        a.team0 = 0; /* the whole grid, until a batch's team takes the problem (cuda/batch.cu) */
        a.nteam = G;
        a.kclass = kclass;
        a.gdtb = bytes[BUF_GDTB] ? d_arena + L.off[BUF_GDTB] : NULL;
        a.prof = ps_gpu_profile_buffer();
        a.spin = d_arena + L.off[BUF_SPIN];
        a.spinS = channels ? d_arena + L.off[BUF_SPINS] : NULL;
        a.nc = (int)p->nc;
        a.gdt = (const R *)(d_arena + L.off[BUF_GDT]) + GDT_ROW0; /* row 0 */
        a.target = (double *)(d_arena + L.off[BUF_TARGET]);
        a.w = (double *)(d_arena + L.off[BUF_W]);
        a.m0 = (double *)(d_arena + L.off[BUF_M0]);
        a.x = d_vec;
        a.g = d_vec + n;
        a.gt = d_vec + 2 * n;
        a.d = d_vec + 3 * n;
        a.S = d_vec + 4 * n;
        a.Y = d_vec + (4 + (size_t)m) * n;
        a.elapsed = d_part;
        a.eval_out = d_part + 1;
        a.gpart = d_part + PART_HEAD;
        a.lpart = a.gpart + (size_t)G * n;
        a.rpart = a.lpart + G;
        a.rdot = a.rpart + (size_t)G * PS_GPU_RP;
        a.m_out = want_m ? a.rdot + (size_t)4 * PS_MAX_MEMORY * G : NULL;
        a.gpen = designed ? a.rdot + (size_t)4 * PS_MAX_MEMORY * G + 3 * ns : NULL;
        a.gtot = gteam ? a.gpen + (size_t)4 * G : NULL;
        a.gteam = gteam;
        a.state = (ps_solver *)(d_arena + L.off[BUF_STATE]);
        a.hist = (ps_progress *)(d_arena + L.off[BUF_HIST]);
        a.hist_cap = hist_cap;
        a.mode = kmode;
    }
    /* the zeros of the image comment above: one range (BUF_VEC's rest,
     * the padding, BUF_PART's first PART_ZEROED), then gpen */
    if (!scratch)
        CUDA_TRY(o, cudaMemset(a.g, 0, (size_t)((char *)(a.elapsed + PART_ZEROED) - (char *)a.g)),
                 PS_ERR_GPU_LAUNCH);
    if (designed)
        CUDA_TRY(o, scratch ? cudaMemcpy(a.gpen, h_img + upload, gpen_bytes, cudaMemcpyHostToDevice)
                            : cudaMemset(a.gpen, 0, gpen_bytes),
                 PS_ERR_GPU_LAUNCH);

    c->a = a;
    c->cfg = cfg;
    c->smem = smem;
    c->precision = o->precision;
    c->channels = channels;
    c->designed = designed;
    c->kclass = kclass;
    c->d_arena = d_arena;
    c->xfer = L.off[BUF_STATE];
    c->xfer_bytes = L.off[BUF_PART] + 3 * sizeof(double) - L.off[BUF_STATE];
    c->d_clock = (unsigned long long *)(d_arena + L.off[BUF_CLOCK]);
    d_arena = NULL;
out:
    device_free(d_arena);
    free(h_own);
    if (st)
        memset(c, 0, sizeof *c);
    return st;
}

int ps_gpu::context_create(const ps_problem *p, const ps_options *o, const ps_gpu_config *cfg_in,
                           int mode, const double *x, int want_m, context *c, const ps_problem *whole,
                           ps_gpu_scratch *scratch)
{
    return o->precision == PS_PRECISION_DOUBLE
               ? context_create_t<double>(p, o, cfg_in, mode, x, want_m, c, whole, scratch)
               : context_create_t<float>(p, o, cfg_in, mode, x, want_m, c, whole, scratch);
}

void ps_gpu::context_destroy(context *c)
{
    device_free(c->d_arena);
    memset(c, 0, sizeof *c);
}

int ps_gpu::context_result(const context *c, const ps_options *o, double *x, ps_result *r)
{
    int st = PS_CONVERGED;
    const size_t n = (size_t)c->a.n;
    ps_solver *h_state = (ps_solver *)malloc(sizeof(ps_solver));
    if (!h_state)
        return PS_ERR_NO_MEMORY;
    CUDA_TRY(o, cudaMemcpy(h_state, c->a.state, sizeof(ps_solver), cudaMemcpyDeviceToHost), PS_ERR_GPU_LAUNCH);
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
        CUDA_TRY(o, cudaMemcpy(r->history, c->a.hist, rows * sizeof(ps_progress), cudaMemcpyDeviceToHost),
                 PS_ERR_GPU_LAUNCH);
        r->history_len = rows;
        r->status = h_state->status;
        r->iterations = h_state->iteration;
        r->evaluations = h_state->evaluations;
        r->f = h_state->f;
        r->gnorm = h_state->gnorm;
        r->rounds = h_state->evaluations > 0 ? h_state->round + 1 : 0;
        r->mu = h_state->constrained ? h_state->mu : 0.0;
        r->violation = h_state->constrained ? h_state->viol : 0.0;
        r->backend = PS_BACKEND_GPU;
        st = h_state->status;
    }
out:
    free(h_state);
    return st;
}

