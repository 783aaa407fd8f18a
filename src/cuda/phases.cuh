/*
 * Device phases of the GPU solve, shared by the persistent megakernel and
 * the comparison variants: each is a __device__ function that one block
 * runs over its share of the work, between grid-wide barriers that the
 * caller places. Scalars come from opt/lbfgs_math.h, the Bloch step from
 * model/bloch_math.h: the math is the CPU backend's.
 *
 * Work layout of an evaluation. Spins are grouped in tiles of SB spins; a
 * block of TB = P * SB threads takes one tile at a time (grid-stride over
 * tiles), thread t owning spin js = t % SB of the tile and time segment
 * p = t / SB of P equal segments:
 *   composite  each thread composes its segment's steps into one affine
 *              map T_p (3x4: rotation and relaxation), in shared memory;
 *   scan       one thread per spin applies the P maps in order (segment
 *              start states), takes the loss and dL/dM_Nt, and carries the
 *              adjoint back through the maps' linear parts (segment-end
 *              adjoints);
 *   replay     each thread walks its segment backward from the segment's
 *              end state (reverse step + adjoint, model/bloch_math.h), and the SB
 *              threads of a segment sum their dF/du_k, dF/dv_k with warp
 *              shuffles in a fixed order into the block's partial gradient
 *              (its tiles added in tile order).
 * The partial gradients of all blocks are then summed per time step in a
 * fixed order (reduce_gradient): no atomics, so results are bit-identical
 * for a given launch shape.
 */
#ifndef PS_SRC_GPU_PHASES_CUH
#define PS_SRC_GPU_PHASES_CUH

#include <cooperative_groups.h>
#include <stdint.h>

extern "C" {
#include "model/bloch_math.h"
#include "cuda/control.h"
#include "opt/lbfgs_math.h"
}

namespace ps_gpu {

/* Precision dispatch onto the _f/_d functions of model/bloch_math.h. */
__device__ __forceinline__ void affine_step(const float th[3], float T[12], int relax, float a1, float a2)
{
    ps_affine_step_f(th, T, relax, a1, a2);
}
__device__ __forceinline__ void affine_step(const double th[3], double T[12], int relax, double a1, double a2)
{
    ps_affine_step_d(th, T, relax, a1, a2);
}
__device__ __forceinline__ void quat_step(const float th[3], float Q[4])
{
    ps_quat_step_f(th, Q);
}
__device__ __forceinline__ void quat_step(const double th[3], double Q[4])
{
    ps_quat_step_d(th, Q);
}
__device__ __forceinline__ void quat_to_affine(const float Q[4], float T[12])
{
    ps_quat_to_affine_f(Q, T);
}
__device__ __forceinline__ void quat_to_affine(const double Q[4], double T[12])
{
    ps_quat_to_affine_d(Q, T);
}
__device__ __forceinline__ void reverse_adjoint(const float th[3], float m[3], float lam[3], int relax,
                                                float a1, float a2, float b1, float b2, float gth[3])
{
    ps_bloch_reverse_adjoint_f(th, m, lam, relax, a1, a2, b1, b2, gth);
}
__device__ __forceinline__ void reverse_adjoint(const double th[3], double m[3], double lam[3], int relax,
                                                double a1, double a2, double b1, double b2, double gth[3])
{
    ps_bloch_reverse_adjoint_d(th, m, lam, relax, a1, a2, b1, b2, gth);
}

/* Fused multiply-add in either precision (the build contracts nothing
 * itself: model/bloch_math.h says why). */
__device__ __forceinline__ float fmar(float a, float b, float c)
{
    return fmaf(a, b, c);
}
__device__ __forceinline__ double fmar(double a, double b, double c)
{
    return fma(a, b, c);
}

/* Per-spin constants in the spin loop's precision: position, dt gamma s,
 * dt 2 pi df, relaxation decrements a = 1 - exp(-dt/T) and their inverse
 * increments b = exp(dt/T) - 1 (model/bloch_math.h). */
enum { SP_R0, SP_R1, SP_R2, SP_GS, SP_WZ, SP_A1, SP_A2, SP_B1, SP_B2, SP_STRIDE };

/* Everything a phase reads or writes: device pointers and sizes. */
struct args {
    /* problem */
    int ns, nt, n;          /* spins, steps, n = 2 nt */
    int sb, segs, ntiles;   /* spins per tile, segments (P), tiles */
    int loss, relax, has_b1max, memory;
    int stage_pulse;        /* 1: each block stages the trial pulse in shared memory */
    int gv;                 /* blocks that run the vector phases: ceil(n / block), <= grid */
    double lambda, b1max;
    const void *spin;       /* [ns][SP_STRIDE] R */
    const void *gdt;        /* [nt][3] R: dt gamma G_k, rad/cm */
    const double *target;   /* [ns][3] */
    const double *w;        /* [ns] */
    const double *m0;       /* [ns][3] */
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
};

enum { MODE_SOLVE = 0, MODE_EVAL = 1 };
/*
 * Per-block partials of an evaluation's scalars, one row of PS_GPU_RP
 * per block: g.d, g.g, b.b, loss.
 */
#define PS_GPU_RP 4

__device__ __forceinline__ uint64_t global_ns()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Pulse (u, v) at step k of the point x + alpha d (d may be NULL). */
__device__ __forceinline__ void pulse_at(const args &a, const double *x, const double *d, double alpha,
                                         int k, double *u, double *v, double *zp, double *zq)
{
    double p = x[k], q = x[a.nt + k];
    if (d) {
        p = ps_trial_coord(p, alpha, d[k]);
        q = ps_trial_coord(q, alpha, d[a.nt + k]);
    }
    *zp = p;
    *zq = q;
    if (a.has_b1max)
        ps_reparam_forward(a.b1max, p, q, u, v);
    else {
        *u = p;
        *v = q;
    }
}

/* Rotation vector of step k for a spin; the pulse from the block's staged
 * copy pul[2k], pul[2k+1] if there is one, else from x + alpha d. */
template <typename R>
__device__ __forceinline__ void theta_at(const args &a, const R *sp, const R *gdt, const R *pul,
                                         const double *x, const double *d, double alpha, int k,
                                         R th[3])
{
    R u, v;
    if (pul) {
        u = pul[2 * k];
        v = pul[2 * k + 1];
    } else {
        double ud, vd, zp, zq;
        pulse_at(a, x, d, alpha, k, &ud, &vd, &zp, &zq);
        u = (R)ud;
        v = (R)vd;
    }
    const R *gk = gdt + 3 * k;
    th[0] = sp[SP_GS] * u;
    th[1] = sp[SP_GS] * v;
    th[2] = fmar(gk[2], sp[SP_R2], fmar(gk[1], sp[SP_R1], fmar(gk[0], sp[SP_R0], sp[SP_WZ])));
}

/* Steps buffered per warp before the gradient is summed over spins
 * (fewer in float64, whose staging buffer is twice the size). */
template <typename R> struct stage_depth { static const int value = 16; };
template <> struct stage_depth<double> { static const int value = 8; };
#define PS_GPU_STAGE (stage_depth<R>::value)

/* Largest staged pulse (bytes of shared memory per block). */
#define PS_GPU_PULSE_SMEM (48 * 1024)

/* Dynamic shared memory of the evaluation; pulse_len = nt if staged, else 0. */
template <typename R>
__host__ __device__ inline size_t eval_smem_bytes(int sb, int segs, int pulse_len)
{
    size_t tb = (size_t)sb * segs;
    return (size_t)sb * 4 * sizeof(double)    /* per-spin loss and dL/dM_Nt */
           + (size_t)2 * pulse_len * sizeof(R) /* staged pulse */
           + tb * 12 * sizeof(R)               /* prefix-composed segment maps */
           + tb * 9 * sizeof(R)                /* suffix products of their linear parts */
           + (tb + 31) / 32 * 2 * PS_GPU_STAGE * 33 * sizeof(R); /* gradient staging */
}

/*
 * ---- evaluate ----
 * F's spin part and (if grad) the block's partial gradient w.r.t. the
 * pulse, at x + alpha d. Writes a.gpart[block][*] and a.lpart[block].
 */
template <typename R>
__device__ void evaluate(const args &a, const double *x, const double *d, double alpha, bool grad,
                         char *smem)
{
    const int sb = a.sb, P = a.segs, nt = a.nt;
    const int t = threadIdx.x, js = t % sb, p = t / sb;
    double *lossbuf = (double *)smem;          /* [sb] */
    double *lamf = lossbuf + sb;               /* [sb][3] dL/dM_Nt */
    R *pul = a.stage_pulse ? (R *)(lamf + 3 * sb) : nullptr; /* [nt][2] */
    R *Tm = (R *)(lamf + 3 * sb) + (a.stage_pulse ? 2 * (size_t)nt : 0); /* [P*sb][12] */
    R *Vm = Tm + (size_t)P * sb * 12;          /* [P*sb][9] */
    R *Stage = Vm + (size_t)P * sb * 9;        /* [warps][2][PS_GPU_STAGE][33] */
    const R *spin = (const R *)a.spin, *gdt = (const R *)a.gdt;

    const int kseg = (nt + P - 1) / P;         /* uniform trip count: shuffles need the whole warp */
    const int k0 = p * kseg;
    double loss_acc = 0.0;
    double *gp = a.gpart + (size_t)blockIdx.x * a.n; /* this block's partial gradient */
    bool first = true;                               /* no tile added into gp yet */

    if (pul) {
        for (int k = t; k < nt; k += blockDim.x) {
            double ud, vd, zp, zq;
            pulse_at(a, x, d, alpha, k, &ud, &vd, &zp, &zq);
            pul[2 * k] = (R)ud;
            pul[2 * k + 1] = (R)vd;
        }
        __syncthreads();
    }

    for (int tile = blockIdx.x; tile < a.ntiles; tile += gridDim.x) {
        const int j = tile * sb + js;
        const bool valid = j < a.ns;
        const R *sp = spin + (size_t)(valid ? j : a.ns - 1) * SP_STRIDE;
        R spl[SP_STRIDE];
        for (int c = 0; c < SP_STRIDE; c++)
            spl[c] = sp[c];
        const int relax = a.relax;

        /* composite: T_p = product of the segment's step maps (a unit
         * quaternion when there is no relaxation: 16 FMA a step) */
        R T[12] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
        if (relax) {
            for (int i = 0; i < kseg; i++) {
                int k = k0 + i;
                if (k >= nt)
                    break;
                R th[3];
                theta_at<R>(a, spl, gdt, pul, x, d, alpha, k, th);
                affine_step(th, T, relax, spl[SP_A1], spl[SP_A2]);
            }
        } else {
            R Q[4] = {1, 0, 0, 0};
            for (int i = 0; i < kseg; i++) {
                int k = k0 + i;
                if (k >= nt)
                    break;
                R th[3];
                theta_at<R>(a, spl, gdt, pul, x, d, alpha, k, th);
                quat_step(th, Q);
            }
            quat_to_affine(Q, T);
        }
        /*
         * scan over segments, log2(P) levels (Hillis-Steele), per spin:
         *   C_p = T_p o T_{p-1} o ... o T_0        (prefix: segment end states)
         *   V_p = L_{P-1} ... L_{p+1} L_p          (suffix of the linear parts:
         *                                           segment end adjoints)
         */
        R V[9] = {T[0], T[1], T[2], T[4], T[5], T[6], T[8], T[9], T[10]};
        for (int c = 0; c < 12; c++)
            Tm[(size_t)t * 12 + c] = T[c];
        for (int c = 0; c < 9; c++)
            Vm[(size_t)t * 9 + c] = V[c];
        __syncthreads();
        for (int off = 1; off < P; off *= 2) {
            R Tp[12], Vn[9];
            const bool hp = p >= off, hn = p + off < P;
            if (hp)
                for (int c = 0; c < 12; c++)
                    Tp[c] = Tm[(size_t)(t - off * sb) * 12 + c];
            if (hn)
                for (int c = 0; c < 9; c++)
                    Vn[c] = Vm[(size_t)(t + off * sb) * 9 + c];
            __syncthreads();
            if (hp) { /* T <- T o Tp */
                R o[12];
                for (int r = 0; r < 3; r++) {
                    for (int c = 0; c < 4; c++)
                        o[4 * r + c] = fmar(T[4 * r + 2], Tp[8 + c],
                                            fmar(T[4 * r + 1], Tp[4 + c], T[4 * r] * Tp[c]));
                    o[4 * r + 3] += T[4 * r + 3];
                }
                for (int c = 0; c < 12; c++) {
                    T[c] = o[c];
                    Tm[(size_t)t * 12 + c] = o[c];
                }
            }
            if (hn) { /* V <- Vn V */
                R o[9];
                for (int r = 0; r < 3; r++)
                    for (int c = 0; c < 3; c++)
                        o[3 * r + c] = fmar(Vn[3 * r + 2], V[6 + c],
                                            fmar(Vn[3 * r + 1], V[3 + c], Vn[3 * r] * V[c]));
                for (int c = 0; c < 9; c++) {
                    V[c] = o[c];
                    Vm[(size_t)t * 9 + c] = o[c];
                }
            }
            __syncthreads();
        }

        /* segment end state M = C_p(m0); the last segment's is M_Nt */
        R m[3];
        {
            double m0[3] = {0.0, 0.0, 1.0};
            if (valid)
                for (int c = 0; c < 3; c++)
                    m0[c] = a.m0[3 * j + c];
            for (int r = 0; r < 3; r++)
                m[r] = fmar(T[4 * r + 2], (R)m0[2],
                            fmar(T[4 * r + 1], (R)m0[1], fmar(T[4 * r], (R)m0[0], T[4 * r + 3])));
        }
        if (p == P - 1) {
            double lam_d[3] = {0, 0, 0}, loss = 0.0;
            if (valid) {
                double md[3] = {(double)m[0], (double)m[1], (double)m[2]};
                loss = ps_spin_loss(a.loss, a.w[j], md, a.target + 3 * j, lam_d);
                if (a.m_out)
                    for (int c = 0; c < 3; c++)
                        a.m_out[3 * j + c] = md[c];
            }
            lossbuf[js] = loss;
            for (int c = 0; c < 3; c++)
                lamf[3 * js + c] = lam_d[c];
        }
        __syncthreads();
        if (t == 0)
            for (int i = 0; i < sb; i++)
                loss_acc += lossbuf[i];

        /* replay: backward through the segment, gradient summed over the tile's spins */
        if (grad) {
            /* segment end adjoint: V_{p+1}^T dL/dM_Nt */
            R lam[3], lf[3] = {(R)lamf[3 * js], (R)lamf[3 * js + 1], (R)lamf[3 * js + 2]};
            if (p == P - 1) {
                for (int c = 0; c < 3; c++)
                    lam[c] = lf[c];
            } else {
                const R *Vq = Vm + (size_t)(t + sb) * 9;
                for (int c = 0; c < 3; c++)
                    lam[c] = fmar(Vq[6 + c], lf[2], fmar(Vq[3 + c], lf[1], Vq[c] * lf[0]));
            }
            const R gs = spl[SP_GS];
            /*
             * Each step's dF/du_k, dF/dv_k of the warp's lanes go to a
             * staging buffer [2][PS_GPU_STAGE][33]; every PS_GPU_STAGE steps
             * the warp sums them over each segment's spins (lanes g*sb ..
             * g*sb + sb - 1 in order), one (component, step, segment) per
             * lane, and adds them to the block's partial gradient.
             */
            const int lane = t & 31, ngroups = 32 / sb, pw = (t & ~31) / sb;
            R *stg = Stage + (size_t)(t >> 5) * 2 * PS_GPU_STAGE * 33;
            int nb = 0, itop = kseg - 1;
            for (int i = kseg - 1; i >= 0; i--) {
                int k = k0 + i;
                R gx = 0, gy = 0;
                if (k < nt) {
                    R th[3], gth[3];
                    theta_at<R>(a, spl, gdt, pul, x, d, alpha, k, th);
                    reverse_adjoint(th, m, lam, relax, spl[SP_A1], spl[SP_A2], spl[SP_B1],
                                    spl[SP_B2], gth);
                    gx = gth[0] * gs;
                    gy = gth[1] * gs;
                }
                stg[nb * 33 + lane] = gx;
                stg[(PS_GPU_STAGE + nb) * 33 + lane] = gy;
                nb++;
                if (nb == PS_GPU_STAGE || i == 0) {
                    __syncwarp();
                    const int per = nb * ngroups;
                    for (int it = lane; it < 2 * per; it += 32) {
                        const int c = it / per, rem = it - c * per, r = rem / ngroups,
                                  g = rem - r * ngroups;
                        const R *row = stg + (c * PS_GPU_STAGE + r) * 33 + g * sb;
                        R sum = 0;
                        for (int l = 0; l < sb; l++)
                            sum += row[l];
                        const int kk = (pw + g) * kseg + itop - r;
                        if (kk < nt) {
                            double *dst = gp + (size_t)c * nt + kk;
                            *dst = (first ? 0.0 : *dst) + (double)sum;
                        }
                    }
                    __syncwarp();
                    nb = 0;
                    itop = i - 1;
                }
            }
        }
        first = false;
        __syncthreads(); /* shared buffers are reused by the next tile */
    }
    if (first && grad) /* a block without tiles adds nothing */
        for (int i = t; i < a.n; i += blockDim.x)
            gp[i] = 0.0;
    if (t == 0)
        a.lpart[blockIdx.x] = loss_acc;
}

/*
 * The end of a block sum: once each warp w has stored its Q sums at
 * scratch[w * Q + q], out[q] = those sums added in warp order, the one
 * fixed order of block_partials and update. The barrier before makes
 * scratch complete, the one after makes out visible to the whole block.
 */
__device__ inline void sum_warps(const double *scratch, int Q, int nw, double *out)
{
    __syncthreads();
    for (int q = threadIdx.x; q < Q; q += blockDim.x) {
        double v = 0.0;
        for (int w = 0; w < nw; w++)
            v += scratch[w * Q + q];
        out[q] = v;
    }
    __syncthreads();
}

/*
 * Block-wide sums of q values per thread (vals[q]) into a.rpart[block][q],
 * in a fixed order (warp shuffles, then warps in order).
 */
__device__ inline void block_partials(const double *vals, int Q, double *scratch, double *out)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    for (int q = 0; q < Q; q++) {
        double v = vals[q];
        for (int off = 16; off > 0; off /= 2)
            v += __shfl_down_sync(0xffffffffu, v, off);
        if (lane == 0)
            scratch[warp * Q + q] = v;
    }
    sum_warps(scratch, Q, nw, out);
}

/*
 * The sum of per-block partials p[b * stride] over b = 0..G-1 by one
 * warp, the same fixed order in every block: lane l sums b = l, l+32,
 * ..., then a fixed xor tree over lanes (every lane returns the sum).
 */
__device__ inline double warp_sum_partials(const double *p, int G, int stride)
{
    double s = 0.0;
    for (int b = threadIdx.x & 31; b < G; b += 32)
        s += p[(size_t)b * stride];
    for (int off = 16; off > 0; off /= 2)
        s += __shfl_xor_sync(0xffffffffu, s, off);
    return s;
}

/* Shared memory of reduce_gradient and trial_dots (scratch: [warps][2][32]
 * and [warps][4 m] doubles). */
__host__ __device__ inline size_t reduce_smem_bytes(int tb)
{
    return (size_t)((tb + 31) / 32) * (4 * PS_MAX_MEMORY > 64 ? 4 * PS_MAX_MEMORY : 64) * sizeof(double);
}

/*
 * ---- reduce gradient ----
 * gout = sum over blocks of the partial gradients + 2 lambda b, through
 * the b1_max chain rule; block partials of gout.d, gout.gout and the RF
 * power sum b.b, and the block's loss, into a.rpart[block][0..3].
 *
 * A block takes 32 consecutive time steps at a time (lane l: step
 * c*32 + l, so that a warp's loads of a partial row are coalesced);
 * warp w sums the partial rows b = w, w + nw, ... in order, then warp 0
 * sums the warps' sums in warp order: a fixed order for a fixed launch
 * shape (all variants run this with the same one).
 */
__device__ inline void reduce_gradient(const args &a, const double *x, const double *d, double alpha,
                                       double *gout, double *scratch, double *out4)
{
    const int nt = a.nt, G = gridDim.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nw = blockDim.x >> 5, chunks = (nt + 31) / 32;
    double *wsum = scratch; /* [nw][2][32] */
    /* [3]: the block's loss, carried along so that one sum over blocks
     * gives all four scalars of an evaluation */
    double acc[4] = {0.0, 0.0, 0.0, threadIdx.x == 0 ? a.lpart[blockIdx.x] : 0.0};
    for (int c = blockIdx.x; c < chunks; c += G) {
        const int k = c * 32 + lane;
        const bool ok = k < nt;
        double u = 0.0, v = 0.0, zp = 0.0, zq = 0.0;
        if (warp == 0 && ok) /* the pulse's loads issued with the partials' */
            pulse_at(a, x, d, alpha, k, &u, &v, &zp, &zq);
        double gu = 0.0, gv = 0.0;
        if (ok)
            for (int b = warp; b < G; b += nw) {
                gu += a.gpart[(size_t)b * a.n + k];
                gv += a.gpart[(size_t)b * a.n + nt + k];
            }
        wsum[(warp * 2) * 32 + lane] = gu;
        wsum[(warp * 2 + 1) * 32 + lane] = gv;
        __syncthreads();
        if (warp == 0 && ok) {
            gu = 0.0;
            gv = 0.0;
            for (int w = 0; w < nw; w++) {
                gu += wsum[(w * 2) * 32 + lane];
                gv += wsum[(w * 2 + 1) * 32 + lane];
            }
            gu += 2.0 * a.lambda * u;
            gv += 2.0 * a.lambda * v;
            if (a.has_b1max)
                ps_reparam_backward(a.b1max, zp, zq, gu, gv, &gu, &gv);
            gout[k] = gu;
            gout[nt + k] = gv;
            if (d)
                acc[0] += gu * d[k] + gv * d[nt + k];
            acc[1] += gu * gu + gv * gv;
            acc[2] += u * u + v * v;
        }
        __syncthreads(); /* wsum is taken before the next chunk writes it */
    }
    block_partials(acc, 4, scratch, out4);
}

/*
 * Warp sum of NV values per lane (NV a power of two <= 32), scattered:
 * lane l returns the sum over the warp's lanes of v[l % NV]. The lane
 * bits above NV are summed whole (NV shuffles each), then each lower
 * level halves the values a lane holds, keeping the half whose index bit
 * matches its lane bit (NV/2 + ... + 1 shuffles): 31 shuffles for 16 or
 * 32 sums instead of 5 per sum. A fixed order: the same bits every run.
 * (The levels are a template recursion, not a loop: with a loop the
 * compiler kept v[] in local memory.)
 */
template <int H, int NV> struct scatter_level {
    __device__ __forceinline__ static void run(double (&v)[NV], unsigned lane)
    {
        const bool up = (lane & (unsigned)H) != 0;
#pragma unroll
        for (int k = 0; k < H; k++) {
            const double lo = v[k], hi = v[k + H];
            const double keep = up ? hi : lo, give = up ? lo : hi;
            v[k] = keep + __shfl_xor_sync(0xffffffffu, give, H);
        }
        scatter_level<H / 2, NV>::run(v, lane);
    }
};
template <int NV> struct scatter_level<0, NV> {
    __device__ __forceinline__ static void run(double (&)[NV], unsigned) {}
};

template <int NV>
__device__ __forceinline__ double warp_sum_scatter(double (&v)[NV])
{
    static_assert(NV >= 1 && NV <= 32 && (NV & (NV - 1)) == 0, "NV: a power of two <= 32");
#pragma unroll
    for (int h = 16; h >= NV; h >>= 1)
#pragma unroll
        for (int k = 0; k < NV; k++)
            v[k] += __shfl_xor_sync(0xffffffffu, v[k], h);
    scatter_level<NV / 2, NV>::run(v, threadIdx.x & 31u);
    return v[0];
}

/*
 * ---- the update's batched dots, taken with the trial's reduction ----
 * For the step x_t = x + alpha d to the trial just reduced (gradient gt),
 * the pair it would store in slot ns, s = x_t - x and y = gt - g, and the
 * dots of the PS_RED_LEN layout (opt/lbfgs_math.h) but g.g (the evaluation's
 * g.g is g_t.g_t): s_j.y, y_j.y, s_j.g_t, y_j.g_t over the slots j, slot
 * ns holding the new pair. Computed for every trial, before the line
 * search has decided, so that an accepted step needs no pass and no
 * barrier of its own (the vectors move in the next direction pass:
 * apply_step). Each block takes the elements of its chunks of 32 time
 * steps in reduce_gradient (chunk c = block + i grid; element (i, e, l):
 * step c*32 + l of component e), spread over its threads; four pairs at a
 * time, one scattered warp sum of 16 values each, then the warps' sums
 * in warp order: the block's partial of dot q goes to
 * a.rdot[q * grid + block]. Blocks without a chunk write nothing (their
 * dots are not summed: dot_blocks). A fixed order for a fixed launch
 * shape, whether it runs after the reduction or alone. Every thread of
 * the block calls it; scratch: [warps][4m] doubles (reduce_smem_bytes);
 * ends with a barrier.
 */
__device__ inline void trial_dots(const args &a, double alpha, int ns, const double *gt, double *scratch)
{
    const int nt = a.nt, n = a.n, m = a.memory, G = gridDim.x, chunks = (nt + 31) / 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int mine = (int)blockIdx.x < chunks ? (chunks - (int)blockIdx.x + G - 1) / G : 0;
    const int items = mine * 64, busy = min(nw, (items + 31) / 32); /* warps with elements */
    if (!mine)
        return;
    for (int j0 = 0; j0 < m; j0 += 4) {
        double acc[16];
#pragma unroll
        for (int q = 0; q < 16; q++)
            acc[q] = 0.0;
        for (int it = threadIdx.x; it < items; it += blockDim.x) {
            const int k = ((int)blockIdx.x + (it >> 6) * G) * 32 + (it & 31);
            if (k >= nt)
                continue;
            const int i = k + ((it >> 5) & 1) * nt;
            const double x = a.x[i], g = a.g[i], gv = gt[i];
            const double yv = gv - g, sv = ps_trial_coord(x, alpha, a.d[i]) - x;
            double sj[4], yj[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const size_t o = (size_t)(j0 + u < m ? j0 + u : j0) * n + i; /* in range */
                sj[u] = a.S[o];
                yj[u] = a.Y[o];
            }
#pragma unroll
            for (int u = 0; u < 4; u++) {
                if (j0 + u == ns) { /* the new pair */
                    sj[u] = sv;
                    yj[u] = yv;
                }
                if (j0 + u < m) {
                    acc[u] += sj[u] * yv;      /* s_j . y_ns */
                    acc[4 + u] += yj[u] * yv;  /* y_j . y_ns */
                    acc[8 + u] += sj[u] * gv;  /* s_j . g_t */
                    acc[12 + u] += yj[u] * gv; /* y_j . g_t */
                }
            }
        }
        if (warp < busy) {
            const double r = warp_sum_scatter<16>(acc);
            const int kind = lane >> 2, j = j0 + (lane & 3);
            if (lane < 16 && j < m)
                scratch[warp * 4 * m + kind * m + j] = r;
        }
    }
    __syncthreads();
    for (int q = threadIdx.x; q < 4 * m; q += blockDim.x) {
        double v = 0.0;
        for (int w = 0; w < busy; w++)
            v += scratch[w * 4 * m + q];
        a.rdot[(size_t)q * G + blockIdx.x] = v;
    }
    __syncthreads(); /* scratch is free again */
}

/* The blocks that hold update dots: those with a chunk of 32 steps. */
__host__ __device__ inline int dot_blocks(int nt, int G)
{
    const int chunks = (nt + 31) / 32;
    return chunks < G ? chunks : G;
}

/*
 * The partials a trial's reduction leaves for its update, from g_t in
 * memory (a launch in the UPDATE phase: update_partials_kernel): g_t.g_t
 * in the reduction's order (a.rpart[block][1]) and the dots (trial_dots).
 * scratch: reduce_smem_bytes.
 */
__device__ inline void update_partials(const args &a, double alpha, int ns, double *scratch)
{
    const int nt = a.nt;
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
    if (threadIdx.x < 32) {
        for (int c = blockIdx.x; c < (nt + 31) / 32; c += gridDim.x) {
            const int k = c * 32 + (int)threadIdx.x;
            if (k < nt)
                acc[1] += a.gt[k] * a.gt[k] + a.gt[nt + k] * a.gt[nt + k];
        }
    }
    trial_dots(a, alpha, ns, a.gt, scratch);
    block_partials(acc, 4, scratch, a.rpart + (size_t)blockIdx.x * PS_GPU_RP);
}

/*
 * ---- apply an accepted step ---- at element i: x_t = x + alpha d, the
 * pair s = x_t - x, y = g_t - g into slot ns, x <- x_t, g <- g_t (the
 * same values trial_dots took). Returns s and y.
 */
__device__ __forceinline__ void apply_step(const args &a, double alpha, int ns, int i, double *s, double *y)
{
    const size_t o = (size_t)ns * a.n + i;
    const double x = a.x[i], gt = a.gt[i];
    const double xt = ps_trial_coord(x, alpha, a.d[i]);
    *s = xt - x;
    *y = gt - a.g[i];
    a.S[o] = *s;
    a.Y[o] = *y;
    a.x[i] = xt;
    a.g[i] = gt;
}

/* The step alone (a solve that stops after it), on the first gv blocks. */
__device__ inline void apply_pass(const args &a, double alpha, int ns)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += a.gv * blockDim.x) {
        double s, y;
        apply_step(a, alpha, ns, i, &s, &y);
    }
}

/*
 * ---- direction ---- d = cg g + sum_j cs_j s_j + cy_j y_j, on the first
 * gv blocks; with ns >= 0 the accepted step (alpha, slot ns) is applied
 * first, element by element (the new pair from registers).
 */
__device__ inline void form_direction(const args &a, const ps_lbfgs *lb, double alpha, int ns)
{
    const int n = a.n, m = a.memory;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += a.gv * blockDim.x) {
        double sn = 0.0, yn = 0.0;
        if (ns >= 0)
            apply_step(a, alpha, ns, i, &sn, &yn);
        double v = lb->cg * a.g[i];
        for (int j = 0; j < m; j++) {
            const double sj = j == ns ? sn : a.S[(size_t)j * n + i];
            const double yj = j == ns ? yn : a.Y[(size_t)j * n + i];
            v += lb->cs[j] * sj + lb->cy[j] * yj;
        }
        a.d[i] = v;
    }
}

} // namespace ps_gpu

#endif /* PS_SRC_GPU_PHASES_CUH */
