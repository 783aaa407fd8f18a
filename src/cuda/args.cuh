/*
 * What every device phase of the GPU solve reads and writes (the args
 * struct, passed by value to every kernel), the per-spin records, and the
 * design variables at a trial point x + alpha d (model/design.h).
 */
#ifndef PS_SRC_CUDA_ARGS_CUH
#define PS_SRC_CUDA_ARGS_CUH

#include <stdint.h>

extern "C" {
#include "cuda/control.h"
#include "model/bloch_math.h"
#include "model/constraints.h"
#include "model/design.h"
#include "opt/solver.h"
}

namespace ps_gpu {

/* Per-spin constants in the spin loop's precision: position, dt gamma s,
 * dt 2 pi df, relaxation decrements a = 1 - exp(-dt/T) and their inverse
 * increments b = exp(dt/T) - 1 (model/bloch_math.h). */
enum { SP_R0, SP_R1, SP_R2, SP_GS, SP_WZ, SP_A1, SP_A2, SP_B1, SP_B2, SP_STRIDE };

/*
 * The gradient rows gdt (the problem's, args.gdt, and the designed
 * kernels' block copies): dt gamma G_k of step k at 4 k .. 4 k + 2 and
 * 0 at 4 k + 3, so that a step is one 16-byte load in float32 (two loads
 * in float64); rows -1 and nt are zero guards, so that the spin loops'
 * look-ahead loads of the next step need no clamp. A copy holds
 * gdt_elems(nt) values from row -1; the pointer the loops take is its row
 * 0 (GDT_ROW0 values in).
 */
#define GDT_ROW0 4
__host__ __device__ inline size_t gdt_elems(size_t nt)
{
    return 4 * (nt + 2);
}

/* A rank's view of the exchange of a run on several GPUs (cuda/ranks.cuh,
 * cuda/ranks.h); on 0: one GPU, nothing exchanged. */
struct ranks_dev {
    int on;                 /* 1: the exchange runs at every evaluation (n >= 2, or one rank
                               through it: PERSOLVE_GPU_EXCHANGE, cuda/ranks.h) */
    int n, rank;            /* ranks, and this one */
    int nccl;               /* 1: GPUs of an NCCL communicator (win, dcomm); 0: ranks sharing
                               this device (rows one buffer, bar its barrier words) */
    int stride;             /* doubles of a row */
    double *rows;           /* this rank's window: [2][n][stride] rows, then [n] release words */
    unsigned *bar;          /* [2] the ranks' barrier on one device (arrivals, generation) */
    unsigned *seq;          /* exchanges so far (this rank's device word) */
    void *win;              /* ncclWindow_t: the window of rows on every rank */
    const void *dcomm;      /* ncclDevComm, in this rank's device memory */
};

/* Everything a phase reads or writes: device pointers and sizes. */
struct args {
    /* problem */
    int ns, nt, n;          /* spins, steps, n = 2 nc nt + ng nt unknowns (ng designed
                               gradient axes after the RF: PS_X_G, model/design.h) */
    int sb, segs, ntiles;   /* spins per tile, segments (P), tiles */
    int loss, relax, memory;
    int nc;                 /* channels of the channels kernel (its spinS); 1 otherwise */
    int stage_pulse;        /* 1: each block stages the trial pulse in shared memory */
    int gv;                 /* blocks that run the vector phases: ceil(n / block), <= grid */
    ps_design des;          /* x -> pulse and penalty (model/design.h; at the pulse itself
                               for MODE_EVAL) */
    const void *spin;       /* [ns][SP_STRIDE] R */
    const void *gdt;        /* gdt rows (gdt_elems): row k at 4 k, dt gamma G_k, rad/cm */
    const void *spinS;      /* [ns][nc][2] R: dt gamma S_jc (the channels kernel), or NULL */
    const double *target;   /* [ns][3] */
    const double *w;        /* [ns] */
    const double *m0;       /* [ns][3] */
    /* the SAR penalty (the channels kernel; cuda/constraints.cuh) */
    ps_sar sar;             /* nq 0: none; vop a device pointer */
    double *bsar;           /* [nt][nc][2] the evaluated pulse (nq > 0) */
    double *spart;          /* [nq][grid] partial sums of the steps' b^H Q_q b */
    double *sarw;           /* [grid][2 nq] each block's weights w_q, then SAR_q */
    /* optimizer vectors, [n] each, optimizer variables (z with b1max) */
    double *x, *g, *gt, *d;
    double *S, *Y;          /* [memory][n] */
    /* per-block partials */
    double *gpart;          /* [grid][n] partial gradient of each block (its tiles in order) */
    double *lpart;          /* [grid] partial losses */
    double *rpart;          /* [grid][PS_GPU_RP] partials of an evaluation's scalars */
    double *rdot;           /* [4 PS_MAX_MEMORY][grid] a trial's update dots (trial_dots),
                               by block, so that their sum loads are coalesced */
    double *m_out;          /* [ns][3] or NULL */
    /* outcome */
    ps_solver *state;       /* solver state, in: initial, out: final */
    ps_progress *hist;      /* [hist_cap] */
    int hist_cap;
    int mode;               /* MODE_SOLVE | MODE_EVAL */
    double *eval_out;       /* [2] MODE_EVAL: [0] = f; MODE_SOLVE, at the kernel's end:
                               [0] solve seconds, [1] f at the accepted trial */
    double *elapsed;        /* [1] solve seconds at the last update, written by block 0 */
    unsigned long long *prof; /* [PS_GPU_PROF] ns per phase (block 0), or NULL */
    /* control of a running kernel (cuda/control.h) */
    ps_gpu_ctl *ctl;        /* mapped control block, or NULL: no control points */
    unsigned long long *cw; /* [PS_GPU_CW_LEN] device words of the control path */
    int controller;         /* the block that reads commands and publishes progress */
    double t_base;          /* solve seconds before this launch (a resumed run) */
    double ft_in;           /* f at the accepted trial, for a launch in the UPDATE phase */
    /* designed gradient axes (the DG kernels, cuda/gradient.cuh) */
    void *gdtb;             /* gteam ? [gdt_elems(nt)] : [grid][gdt_elems(nt)] R: the team's
                               gdt rows with its designed axes, or each block's (the DG
                               kernels), or NULL */
    double *gpen;           /* [grid][4] each block's gradient-limit penalty per axis at
                               mu = 1 (gteam: over its share of the steps), then its
                               violation */
    /* the team of blocks that solves the problem (cuda/team.cuh): blocks team0 ..
       team0 + nteam - 1 of the grid, which index the per-block arrays above by
       their rank in it (team_rank); a solo solve's team is its whole grid */
    int team0, nteam;
    unsigned *tbar;         /* [2] a batch team's barrier (arrivals, generation), or NULL:
                               the team is the cooperative grid (grid.sync()) */
    int tcluster;           /* 1: the batch team is a thread-block cluster, its barrier
                               the cluster's (cluster.sync()) instead of tbar's */
    int kclass;             /* the kernel class (ps_gpu_kernel_class): a batch's team runs
                               the phases of that class */
    int batch;              /* 1: a problem of a batch (cuda/batch.cu): a PAUSE parks it, as
                               a yield of this problem alone, and its team moves on */
    ranks_dev rk;           /* several GPUs: this rank's share of the spins and the exchange */
    /* designed gradient axes, the single-channel kernel (cuda/gradient.cuh) */
    double *gtot;           /* [grid][4] each block's sums of dt s_k over its share of the
                               steps, per designed axis, and its count (waveform_totals) */
    int gteam;              /* 1: the team forms the designed waveforms, each block a share
                               (waveform_totals, waveform_rows), into one gdt copy; 0: each
                               block forms them into its own (form_gradient) */
};

enum { MODE_SOLVE = 0, MODE_EVAL = 1 };
/*
 * Per-block partials of an evaluation's scalars, one row of PS_GPU_RP
 * per block: g.d, g.g, b.b, loss.
 */
#define PS_GPU_RP 4

/* Steps the evaluation's replay buffers per warp before it sums the
 * gradient over spins (fewer in float64, whose staging buffer is twice
 * the size; cuda/evaluate.cuh), and their log2. */
template <typename R> struct stage_depth { static const int value = 16; };
template <> struct stage_depth<double> { static const int value = 8; };
template <typename R> struct stage_log2 { static const int value = stage_depth<R>::value == 16 ? 4 : 3; };
#define PS_GPU_STAGE (stage_depth<R>::value)
/* The staging rows' stride in values: 32 lanes and a pad of 16 bytes, so
 * that every row starts 16-byte aligned (the sums read a segment's values
 * with 16-byte loads) and the lanes that read 8 consecutive rows at once
 * (32 spins a segment) meet no bank conflict: rows 36 floats (9 16-byte
 * units) or 34 doubles (17) apart. */
template <typename R> struct stage_ld { static const int value = sizeof(R) == 4 ? 36 : 34; };
#define PS_GPU_STAGE_LD (stage_ld<R>::value)
/* Row groups of a warp's staging block: u and v, and with designed
 * gradient axes (DG) gth_z, at a fixed offset from them. */
template <int DG> struct stage_rows { static const int value = DG ? 3 : 2; };

/* The address p in the block's dynamic shared memory smem rounded up to
 * 16 bytes, by an offset from smem, so that the compiler still sees
 * shared-memory addresses (a round trip through an integer would make
 * every access through it a generic one). */
__device__ __forceinline__ char *smem_align16(char *smem, const void *p)
{
    const size_t off = (size_t)((const char *)p - smem);
    return smem + ((off + 15) & ~(size_t)15);
}

/* The block's rank in its team (cuda/team.cuh): blockIdx.x in a solo solve. */
__device__ __forceinline__ int team_rank(const args &a)
{
    return (int)blockIdx.x - a.team0;
}

__device__ __forceinline__ uint64_t global_ns()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Pulse (u, v) of channel c at step k of the point x + alpha d (d may be
 * NULL), and its variables (zp, zq); NCH 0: the single-channel kernel's
 * (c = 0, the one limit). */
template <int NCH = 1>
__device__ __forceinline__ void pulse_at(const args &a, const double *x, const double *d, double alpha,
                                         int c, int k, double *u, double *v, double *zp, double *zq)
{
    const int iu = PS_X_U(a.nt, c, k), iv = PS_X_V(a.nt, c, k);
    double p = x[iu], q = x[iv];
    if (d) {
        p = ps_trial_coord(p, alpha, d[iu]);
        q = ps_trial_coord(q, alpha, d[iv]);
    }
    *zp = p;
    *zq = q;
    if (NCH)
        ps_design_pulse(&a.des, c, p, q, u, v);
    else
        ps_design_pulse_one(&a.des, p, q, u, v);
}

} // namespace ps_gpu

#endif /* PS_SRC_CUDA_ARGS_CUH */
