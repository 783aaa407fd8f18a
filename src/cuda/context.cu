/*
 * A problem and a start point set up on the device (cuda/context.cuh):
 * the per-spin records, the buffers of the args struct, the resolved
 * launch shape and the solver state in its START phase; and the result of
 * a run copied back.
 */
#include <cuda_runtime.h>
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

/* Build the per-spin records and gdt_k (model/design.h) in precision R;
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
    const size_t ns = p->ns, nt = p->nt, n = ps_problem_nx(p); /* the RF's, then the designed axes' */
    const int m = o->memory;
    args a;
    memset(&a, 0, sizeof a);
    memset(c, 0, sizeof *c);
    void *d_spin = NULL, *d_gdt = NULL, *d_spinS = NULL, *d_gdtb = NULL;
    double *d_target = NULL, *d_w = NULL, *d_m0 = NULL, *d_vec = NULL, *d_part = NULL, *d_cons = NULL;
    ps_solver *d_state = NULL;
    ps_progress *d_hist = NULL;
    R *h_spin = NULL, *h_gdt = NULL, *h_S = NULL;
    double *h_w = NULL, *h_m0 = NULL;
    ps_solver *h_state = NULL;

    ps_gpu_config cfg;
    st = ps_gpu_resolve_config(p, o, cfg_in, &cfg);
    if (st)
        return st;
    const int G = cfg.grid, tb = cfg.block;
    const int ntiles = (int)((ns + cfg.sb - 1) / cfg.sb);
    const int channels = ps_gpu_channels(p), kclass = ps_gpu_kernel_class(p), designed = p->design_g != 0;
    const size_t smem = ps_gpu_dyn_smem(o->precision, cfg.sb, cfg.segs, tb, nt, kclass);
    const int stage_gdt = designed && ps_gpu_stage_gdt(o->precision, cfg.sb, cfg.segs, tb, nt, channels);
    /* the constraints: b1max_c [nc], vop [nq][nc][nc][2], bsar [nt][nc][2],
     * spart [nq][G], sarw [G][2 nq] */
    const size_t n_b1 = p->b1_max_channel ? p->nc : 0, n_vop = 2 * p->nq * p->nc * p->nc;
    const size_t n_mask = p->rf_mask ? nt : 0;
    /* [n_b1] per-channel limits, [n_mask] the RF mask, then with VOPs [n_vop] their
     * matrices, [nt][nc][2] the pulse, [nq][G] + [G][2 nq] the SAR partials */
    const size_t n_cons = n_b1 + n_mask + (p->nq ? n_vop + 2 * nt * p->nc + 3 * p->nq * (size_t)G : 0);
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
    if (channels)
        h_S = (R *)malloc(2 * ns * p->nc * sizeof(R));
    if (!h_spin || !h_gdt || !h_w || !h_m0 || !h_state || (channels && !h_S)) {
        st = PS_ERR_NO_MEMORY;
        goto out;
    }
    spin_records<R>(p, h_spin, h_gdt, h_w, h_m0, h_S);
    ps_solver_init(h_state, m, o->past, o->max_linesearch, o->max_iterations,
                   o->max_evaluations, o->gtol, o->ftol, o->c1, o->c2, o->time_limit,
                   ps_options_fnoise(o));
    if (mode == MODE_SOLVE && ps_problem_penalized(p)) /* SAR, gradient limits */
        ps_solver_set_rounds(h_state, ps_options_max_rounds(o), ps_options_constraint_tol(o), ps_penalty_mu0(p, o));

    /* device buffers */
    CUDA_TRY(o, cudaMalloc(&d_spin, ns * SP_STRIDE * sizeof(R)), PS_ERR_GPU_MEMORY);
    CUDA_TRY(o, cudaMalloc(&d_gdt, 3 * nt * sizeof(R)), PS_ERR_GPU_MEMORY);
    if (channels) {
        CUDA_TRY(o, cudaMalloc(&d_spinS, 2 * ns * p->nc * sizeof(R)), PS_ERR_GPU_MEMORY);
        CUDA_TRY(o, cudaMemcpy(d_spinS, h_S, 2 * ns * p->nc * sizeof(R), cudaMemcpyHostToDevice),
                 PS_ERR_GPU_LAUNCH);
    }
    CUDA_TRY(o, cudaMalloc(&d_target, 3 * ns * sizeof(double)), PS_ERR_GPU_MEMORY);
    CUDA_TRY(o, cudaMalloc(&d_w, ns * sizeof(double)), PS_ERR_GPU_MEMORY);
    CUDA_TRY(o, cudaMalloc(&d_m0, 3 * ns * sizeof(double)), PS_ERR_GPU_MEMORY);
    /* x, g, gt, d, S[m], Y[m] */
    CUDA_TRY(o, cudaMalloc(&d_vec, (4 + 2 * (size_t)m) * n * sizeof(double)), PS_ERR_GPU_MEMORY);
    /* gpart[G][n], lpart[G], rpart[G][RP], rdot[4 MAX_MEMORY][G], elapsed, eval_out[2], m_out[ns][3],
     * gpen[G][4] (designed axes) */
    CUDA_TRY(o, cudaMalloc(&d_part, ((size_t)G * n + G + (size_t)G * PS_GPU_RP + (size_t)4 * PS_MAX_MEMORY * G + 3 +
                                     3 * ns + (designed ? (size_t)4 * G : 0)) * sizeof(double)),
             PS_ERR_GPU_MEMORY);
    if (designed && !stage_gdt) /* the blocks' gdt copies [G][nt][3] */
        CUDA_TRY(o, cudaMalloc(&d_gdtb, (size_t)G * 3 * nt * sizeof(R)), PS_ERR_GPU_MEMORY);
    if (n_cons) {
        CUDA_TRY(o, cudaMalloc(&d_cons, n_cons * sizeof(double)), PS_ERR_GPU_MEMORY);
        CUDA_TRY(o, cudaMemset(d_cons, 0, n_cons * sizeof(double)), PS_ERR_GPU_LAUNCH);
        if (n_b1)
            CUDA_TRY(o, cudaMemcpy(d_cons, p->b1_max_channel, n_b1 * sizeof(double), cudaMemcpyHostToDevice),
                     PS_ERR_GPU_LAUNCH);
        if (n_mask)
            CUDA_TRY(o, cudaMemcpy(d_cons + n_b1, p->rf_mask, n_mask * sizeof(double), cudaMemcpyHostToDevice),
                     PS_ERR_GPU_LAUNCH);
        if (p->nq)
            CUDA_TRY(o, cudaMemcpy(d_cons + n_b1 + n_mask, p->vop, n_vop * sizeof(double), cudaMemcpyHostToDevice),
                     PS_ERR_GPU_LAUNCH);
    }
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
    a.stage_gdt = stage_gdt;
    a.gdtb = d_gdtb;
    a.prof = ps_gpu_profile_buffer();
    a.spin = d_spin;
    a.spinS = d_spinS;
    a.nc = (int)p->nc;
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
    a.gpen = designed ? a.eval_out + 2 + 3 * ns : NULL;
    a.state = d_state;
    a.hist = d_hist;
    a.hist_cap = hist_cap;
    a.mode = mode;
    /* elapsed = 0: the time limit's clock before the first update; and
     * eval_out (the end seconds and f of a launch) defined before one ends */
    CUDA_TRY(o, cudaMemset(a.elapsed, 0, 3 * sizeof(double)), PS_ERR_GPU_LAUNCH);
    if (designed) /* defined before a launch that starts in UPDATE reads it (unused there) */
        CUDA_TRY(o, cudaMemset(a.gpen, 0, (size_t)4 * G * sizeof(double)), PS_ERR_GPU_LAUNCH);

    c->a = a;
    c->cfg = cfg;
    c->smem = smem;
    c->precision = o->precision;
    c->d_spin = d_spin;
    c->d_spinS = d_spinS;
    c->channels = channels;
    c->designed = designed;
    c->kclass = kclass;
    c->d_gdtb = d_gdtb;
    c->d_gdt = d_gdt;
    c->d_target = d_target;
    c->d_w = d_w;
    c->d_m0 = d_m0;
    c->d_vec = d_vec;
    c->d_part = d_part;
    c->d_cons = d_cons;
    c->d_state = d_state;
    c->d_hist = d_hist;
    d_spin = d_gdt = d_spinS = d_gdtb = NULL;
    d_target = d_w = d_m0 = d_vec = d_part = d_cons = NULL;
    d_state = NULL;
    d_hist = NULL;
out:
    cudaFree(d_spin);
    cudaFree(d_spinS);
    cudaFree(d_gdtb);
    cudaFree(d_gdt);
    cudaFree(d_target);
    cudaFree(d_w);
    cudaFree(d_m0);
    cudaFree(d_vec);
    cudaFree(d_part);
    cudaFree(d_cons);
    cudaFree(d_state);
    cudaFree(d_hist);
    free(h_spin);
    free(h_S);
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
    cudaFree(c->d_spinS);
    cudaFree(c->d_gdtb);
    cudaFree(c->d_gdt);
    cudaFree(c->d_target);
    cudaFree(c->d_w);
    cudaFree(c->d_m0);
    cudaFree(c->d_vec);
    cudaFree(c->d_part);
    cudaFree(c->d_cons);
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

