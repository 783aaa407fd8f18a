/*
 * ---- evaluate ----
 * F's spin part and (if grad) each block's partial gradient with respect
 * to the pulse, at x + alpha d: composite, scan and replay over tiles of
 * SB spins x P time segments (cuda/phases.cuh has the work layout).
 * Writes a.gpart[block][*] (the layout of x) and a.lpart[block].
 */
#ifndef PS_SRC_CUDA_EVALUATE_CUH
#define PS_SRC_CUDA_EVALUATE_CUH

#include <type_traits>

#include "cuda/args.cuh"
#include "cuda/gradient.cuh"

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

/* The design's theta and spin chain rule (model/design.h) in either precision. */
__device__ __forceinline__ void design_theta(float gs, float u, float v, const float gdt[3], const float r[3],
                                             float wz, float th[3])
{
    ps_design_theta_f(gs, u, v, gdt, r, wz, th);
}
__device__ __forceinline__ void design_theta(double gs, double u, double v, const double gdt[3],
                                             const double r[3], double wz, double th[3])
{
    ps_design_theta_d(gs, u, v, gdt, r, wz, th);
}
__device__ __forceinline__ void design_theta_nograd(float gs, float u, float v, float wz, float th[3])
{
    ps_design_theta_nograd_f(gs, u, v, wz, th);
}
__device__ __forceinline__ void design_theta_nograd(double gs, double u, double v, double wz, double th[3])
{
    ps_design_theta_nograd_d(gs, u, v, wz, th);
}
__device__ __forceinline__ void design_theta_channels(int nc, const float (*gS)[2], const float *u, const float *v,
                                                      size_t s, const float gdt[3], const float r[3], float wz,
                                                      float th[3])
{
    ps_design_theta_channels_f(nc, gS, u, v, s, gdt, r, wz, th);
}
__device__ __forceinline__ void design_theta_channels(int nc, const double (*gS)[2], const double *u,
                                                      const double *v, size_t s, const double gdt[3],
                                                      const double r[3], double wz, double th[3])
{
    ps_design_theta_channels_d(nc, gS, u, v, s, gdt, r, wz, th);
}
__device__ __forceinline__ void design_spin_grad_channel(float gr, float gi, const float gth[3], float *gu,
                                                         float *gv)
{
    ps_design_spin_grad_channel_f(gr, gi, gth, gu, gv);
}
__device__ __forceinline__ void design_spin_grad_channel(double gr, double gi, const double gth[3], double *gu,
                                                         double *gv)
{
    ps_design_spin_grad_channel_d(gr, gi, gth, gu, gv);
}
__device__ __forceinline__ void design_spin_grad(float gs, const float gth[3], float *gu, float *gv)
{
    ps_design_spin_grad_f(gs, gth, gu, gv);
}
__device__ __forceinline__ void design_spin_grad(double gs, const double gth[3], double *gu, double *gv)
{
    ps_design_spin_grad_d(gs, gth, gu, gv);
}

/*
 * W (u, v) pairs from shared memory p [W][2] (16-byte aligned) into u[W],
 * v[W] with 16-byte loads: the same values as element loads, a quarter
 * (float, W even) or half (double) of the load instructions.
 */
template <int W>
__device__ __forceinline__ void load_pairs(const float *p, float *u, float *v)
{
#pragma unroll
    for (int i = 0; i < W / 2; i++) {
        const float4 q = reinterpret_cast<const float4 *>(p)[i];
        u[2 * i] = q.x;
        v[2 * i] = q.y;
        u[2 * i + 1] = q.z;
        v[2 * i + 1] = q.w;
    }
    if (W % 2) { /* an odd count: the last pair alone (8-byte aligned) */
        const float2 q = reinterpret_cast<const float2 *>(p)[W - 1];
        u[W - 1] = q.x;
        v[W - 1] = q.y;
    }
}
template <int W>
__device__ __forceinline__ void load_pairs(const double *p, double *u, double *v)
{
#pragma unroll
    for (int i = 0; i < W; i++) {
        const double2 q = reinterpret_cast<const double2 *>(p)[i];
        u[i] = q.x;
        v[i] = q.y;
    }
}

/*
 * How the single-channel spin loops take a step's gradient row (template
 * GR): GR_GLOBAL, the gdt rows in global memory (a.gdt, or the designed
 * copy gdtb), loaded a step ahead (gdt_step); GR_NONE, no gradient (the
 * PS_GPU_NOGRAD kernel class: G = 0 at every step, theta_z = wz, no row
 * loaded); GR_STAGED, a gradient on x and y alone, designed or not (the
 * PS_GPU_STAGED class, float32): the block stages the step's x and y
 * values with its pulse, pul[k] = (u, v, gdt_x, gdt_y), one 16-byte
 * shared load a step, the same values as GR_GLOBAL's loads (gdt_z = 0).
 */
enum { GR_GLOBAL = 0, GR_NONE = 1, GR_STAGED = 2 };

/* Rotation vector of step k for a spin, whose gradient dt gamma G_k is
 * gk[3] (GR_GLOBAL); the pulse from the block's staged copy pul[2k],
 * pul[2k+1] if there is one, else from x + alpha d; GR_STAGED: pulse and
 * gradient from pul[4k .. 4k + 3]. */
template <typename R, int GR = GR_GLOBAL>
__device__ __forceinline__ void theta_at(const args &a, const R *sp, const R gk[3], const R *pul,
                                         const double *x, const double *d, double alpha, int k,
                                         R th[3])
{
    if (GR == GR_STAGED) {
        R u[2], v[2];
        load_pairs<2>(pul + 4 * (size_t)k, u, v); /* (u, v), (gdt_x, gdt_y) */
        const R g[3] = {u[1], v[1], 0};
        design_theta(sp[SP_GS], u[0], v[0], g, sp + SP_R0, sp[SP_WZ], th);
        return;
    }
    R u, v;
    if (pul) {
        u = pul[2 * k];
        v = pul[2 * k + 1];
    } else {
        double ud, vd, zp, zq;
        pulse_at<0>(a, x, d, alpha, 0, k, &ud, &vd, &zp, &zq);
        u = (R)ud;
        v = (R)vd;
    }
    if (GR == GR_NONE)
        design_theta_nograd(sp[SP_GS], u, v, sp[SP_WZ], th);
    else
        design_theta(sp[SP_GS], u, v, gk, sp + SP_R0, sp[SP_WZ], th);
}

/* The same for a spin of nc channels of sensitivities S [nc][2] (the
 * channels kernel: nc = NC, a compile-time count whose S the caller keeps
 * in registers, or a.nc for NC = 0); the pulses of step k from
 * pul[k][nc][2] if staged (with NC, in 16-byte loads: pul and every step's
 * row are 16-byte aligned, evaluate()). */
template <typename R, int NC>
__device__ __forceinline__ void theta_at_channels(const args &a, const R *sp, const R (*S)[2], const R gk[3],
                                                  const R *pul, const double *x, const double *d, double alpha,
                                                  int k, R th[3])
{
    const int nc = NC ? NC : a.nc;
    if (pul && NC && NC % 2 == 0) {
        R u[NC ? NC : 1], v[NC ? NC : 1];
        load_pairs<NC>(pul + (size_t)2 * NC * k, u, v);
        design_theta_channels(NC, S, u, v, 1, gk, sp + SP_R0, sp[SP_WZ], th);
    } else if (pul) {
        const R *pk = pul + (size_t)2 * nc * k;
        design_theta_channels(nc, S, pk, pk + 1, 2, gk, sp + SP_R0, sp[SP_WZ], th);
    } else {
        R u[NC ? NC : PS_MAX_CHANNELS], v[NC ? NC : PS_MAX_CHANNELS];
        for (int c = 0; c < nc; c++) {
            double ud, vd, zp, zq;
            pulse_at(a, x, d, alpha, c, k, &ud, &vd, &zp, &zq);
            u[c] = (R)ud;
            v[c] = (R)vd;
        }
        design_theta_channels(a.nc, S, u, v, 1, gk, sp + SP_R0, sp[SP_WZ], th);
    }
}

/* theta of the single-channel kernel (NCH 0, its gradient rows as GR
 * says), the channels kernel of a.nc channels (1) or of NCH channels
 * (NCH > 1, S in registers). */
template <typename R, int NCH, int GR = GR_GLOBAL>
__device__ __forceinline__ void theta_of(const args &a, const R *sp, const R (*S)[2], const R gk[3], const R *pul,
                                         const double *x, const double *d, double alpha, int k, R th[3])
{
    if (NCH)
        theta_at_channels<R, (NCH > 1 ? NCH : 0)>(a, sp, S, gk, pul, x, d, alpha, k, th);
    else
        theta_at<R, GR>(a, sp, gk, pul, x, d, alpha, k, th);
}

/* Channels a lane sums at once in the gradient's sums over spins (NC
 * channels, NC a multiple of it): 16 bytes of sensitivities per spin, and
 * with a full stage NC/CG (channel group, step) items for every lane of a
 * warp of one segment (float: 2 x 16; double: 4 x 8). */
template <typename R, int NC> struct channel_group {
    static const int value = sizeof(R) == 4 ? (NC % 4 == 0 ? 4 : NC % 2 == 0 ? 2 : 1) : (NC % 2 == 0 ? 2 : 1);
};

/* Largest staged pulse (bytes of shared memory per block): one channel, and
 * several (the channels kernel opts into more shared memory; in float64 the
 * evaluation's other buffers take twice as much, so the pulse gets less). */
#define PS_GPU_PULSE_SMEM (48 * 1024)
#define PS_GPU_PULSE_SMEM_CHANNELS(rs) ((rs) == 8 ? 24 * 1024 : 64 * 1024)

/* Dynamic shared memory of the evaluation; pulse_len = nt (nc nt with
 * channels) if staged, else 0; channels: ps_gpu_channels; designed: the DG
 * kernels' share (cuda/gradient.cuh), whose gradient staging of three row
 * groups a warp lies over the scan's buffers (evaluate()). */
template <typename R>
__host__ __device__ inline size_t eval_smem_bytes(int sb, int segs, int pulse_len, int channels, int designed = 0)
{
    const size_t tb = (size_t)sb * segs;
    const size_t scan = tb * (12 + 9) * sizeof(R); /* prefix-composed segment maps, suffix products */
    const size_t rows = designed ? stage_rows<1>::value : stage_rows<0>::value; /* the replay's row groups */
    const size_t stage = (tb + 31) / 32 * rows * PS_GPU_STAGE * PS_GPU_STAGE_LD * sizeof(R);
    return (designed ? dg_smem_bytes<R>(sb) : 0)
           + (size_t)sb * 4 * sizeof(double)    /* per-spin loss and dL/dM_Nt */
           + (size_t)sb * 2 * channels * sizeof(R) /* the tile's sensitivities */
           + (size_t)2 * pulse_len * sizeof(R) /* staged pulse */
           + 16                                /* Tm's alignment */
           + (designed ? (scan > stage ? scan : stage) : scan + stage); /* scan buffers, gradient staging */
}

/*
 * The gradient dt gamma G_k of step k (row k of gdt rows, cuda/args.cuh)
 * into g: one 16-byte load in float32, two loads in float64.
 */
__device__ __forceinline__ void load_gdt(const float *gdt, int k, float g[3])
{
    const float4 q = *reinterpret_cast<const float4 *>(gdt + 4 * k);
    g[0] = q.x;
    g[1] = q.y;
    g[2] = q.z;
}
__device__ __forceinline__ void load_gdt(const double *gdt, int k, double g[3])
{
    const double2 q = *reinterpret_cast<const double2 *>(gdt + 4 * k);
    g[0] = q.x;
    g[1] = q.y;
    g[2] = gdt[4 * k + 2];
}

/*
 * The gradient of the spin loops' step k into gk. The single-channel
 * kernels (NCH 0) load it one step ahead of its use, so that the step
 * before hides the load's latency (every step's theta waits on it
 * otherwise): gk takes gn, which then takes step kn's (the next step,
 * clamped to one the loop has). The channels kernels load it at its step:
 * ahead, its registers cost them more than the latency (H200, README).
 * GR_NONE and GR_STAGED load none (theta_at takes no gk).
 */
template <typename R, int NCH, int GR = GR_GLOBAL>
__device__ __forceinline__ void gdt_step(const R *gdt, int k, int kn, R gn[3], R gk[3])
{
    if (GR != GR_GLOBAL) {
        gk[0] = gk[1] = gk[2] = 0;
    } else if (NCH) {
        load_gdt(gdt, k, gk);
    } else {
        gk[0] = gn[0];
        gk[1] = gn[1];
        gk[2] = gn[2];
        load_gdt(gdt, kn, gn);
    }
}

/*
 * composite: T_p = the product of the thread's segment's step maps
 * (steps k0 .. k0 + kseg - 1 below nt), an affine map 3x4 (rotation and
 * relaxation); without relaxation a unit quaternion (16 FMA a step), made
 * affine at the end.
 */
template <typename R, int NCH, int DG, int GR>
__device__ __forceinline__ void composite(const args &a, const R *spl, const R (*S)[2], const R *pul,
                                          const R *gdtb, const double *x, const double *d, double alpha, int k0,
                                          int kseg, int relax, R T[12])
{
    const int kend = min(k0 + kseg, a.nt); /* the segment's steps below nt */
    const R *gdt = DG ? gdtb : (const R *)a.gdt; /* DG: the block's copy with the designed axes */
    R gn[3];                                     /* the next step's gdt (gdt_step) */
    if (!NCH && GR == GR_GLOBAL)
        load_gdt(gdt, min(k0, a.nt), gn);
    if (relax) {
        for (int k = k0; k < kend; k++) {
            R gk[3], th[3];
            gdt_step<R, NCH, GR>(gdt, k, k + 1, gn, gk);
            theta_of<R, NCH, GR>(a, spl, S, gk, pul, x, d, alpha, k, th);
            affine_step(th, T, relax, spl[SP_A1], spl[SP_A2]);
        }
    } else {
        R Q[4] = {1, 0, 0, 0};
        for (int k = k0; k < kend; k++) {
            R gk[3], th[3];
            gdt_step<R, NCH, GR>(gdt, k, k + 1, gn, gk);
            theta_of<R, NCH, GR>(a, spl, S, gk, pul, x, d, alpha, k, th);
            quat_step(th, Q);
        }
        quat_to_affine(Q, T);
    }
}

/*
 * scan over segments, log2(P) levels (Hillis-Steele), per spin (thread t
 * holds segment p of spin t % sb):
 *   C_p = T_p o T_{p-1} o ... o T_0        (prefix: segment end states)
 *   V_p = L_{P-1} ... L_{p+1} L_p          (suffix of the linear parts:
 *                                           segment end adjoints)
 * In: T = T_p; out: T = C_p, V = V_p, both also in Tm [P*sb][12] and
 * Vm [P*sb][9] (shared).
 */
template <typename R>
__device__ __forceinline__ void scan(int t, int p, int sb, int P, R *Tm, R *Vm, R T[12], R V[9])
{
    V[0] = T[0]; V[1] = T[1]; V[2] = T[2];
    V[3] = T[4]; V[4] = T[5]; V[5] = T[6];
    V[6] = T[8]; V[7] = T[9]; V[8] = T[10];
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
}

/*
 * The segment end state m = C_p(m0) (the last segment's is M_Nt) and, by
 * the last segment's thread (last) of spin j (tile slot js), the loss and
 * dL/dM_Nt into lossbuf [sb] and lamf [sb][3] (and M_Nt into a.m_out).
 */
template <typename R>
__device__ __forceinline__ void end_state_and_loss(const args &a, int j, bool valid, int js, bool last,
                                                   const R T[12], double *lossbuf, double *lamf, R m[3])
{
    double m0[3] = {0.0, 0.0, 1.0};
    if (valid)
        for (int c = 0; c < 3; c++)
            m0[c] = a.m0[3 * j + c];
    for (int r = 0; r < 3; r++)
        m[r] = fmar(T[4 * r + 2], (R)m0[2], fmar(T[4 * r + 1], (R)m0[1], fmar(T[4 * r], (R)m0[0], T[4 * r + 3])));
    if (last) {
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
}

/*
 * The block's partial gradient so far at dst (0 in its first tile) for a
 * flush's sum: loaded before the sum (partial_early), so that the global
 * load's latency passes under the sum's loads; in the channels kernels
 * with designed axes after it (partial_late), where the early load's
 * registers cost a spill at their register limit (H200: MG evaluation 1.3%
 * slower, M and L 2% faster with the early load, when MG summed its
 * designed axes apart; the single-channel DG flush, flush_designed, now
 * loads its partials early too). The same value either way.
 */
template <int DG> __device__ __forceinline__ double partial_early(bool first, const double *dst)
{
    return DG || first ? 0.0 : *dst;
}
template <int DG> __device__ __forceinline__ double partial_late(bool first, const double *dst, double early)
{
    return DG && !first ? *dst : early;
}

/* The relax flag of a replay loop: a compile-time constant, or the value. */
__device__ __forceinline__ int relax_value(int relax)
{
    return relax;
}
template <int V> __device__ __forceinline__ int relax_value(std::integral_constant<int, V>)
{
    return V;
}

/*
 * replay: thread t walks its segment (steps k0 .. k0 + kseg - 1) backward
 * from the segment's end state m (reverse step + adjoint,
 * model/bloch_math.h) with the segment end adjoint lam = V_{p+1}^T dL/dM_Nt,
 * and the spins' dL/du_k, dL/dv_k (model/design.h, the chain rule) are
 * summed over the tile's spins into the block's partial gradient gp
 * (first: the block's first tile, which stores instead of adding).
 *
 * Each step's values of the warp's lanes go to a staging buffer
 * Stage [warps][2][PS_GPU_STAGE][PS_GPU_STAGE_LD]; every PS_GPU_STAGE steps the warp
 * sums them over each segment's spins (lanes g*sb .. g*sb + sb - 1 in
 * order), one (component, step, segment) per lane, and adds them to gp.
 * DG (designed gradient axes, cuda/gradient.cuh): the steps' gth_z go to
 * a third row group of the warp's block, Stage [warps][3][PS_GPU_STAGE][PS_GPU_STAGE_LD]
 * (one address a step for all three stores), and each flush adds their sums with
 * the tile's positions rtile [ng][sb] to the designed part of gp; theta
 * takes the designed gdt copy gdtb (the team's, or the block's own). A flush's items are numbered
 * ((component PS_GPU_STAGE) + staged step) 2^lgg + segment (2^lgg
 * segments in a warp), so that shifts, not divisions, take them apart.
 */
template <typename R, int NCH, int DG, int GR>
__device__ __forceinline__ void replay(const args &a, const R *spl, const R (*S)[2], const R (*Stile)[2],
                                       const R *pul, const R *gdtb, const R *rtile, const double *x,
                                       const double *d, double alpha, int t, int sb, int k0, int kseg, int relax,
                                       R *Stage, R m[3], R lam[3], double *gp, bool first)
{
    constexpr int SL = stage_log2<R>::value, SM = (1 << SL) - 1;
    const int nt = a.nt;
    const R *gdt = DG ? gdtb : (const R *)a.gdt;
    const R gs = spl[SP_GS];
    const int lane = t & 31, lgg = 5 - (__ffs(sb) - 1), gm = (1 << lgg) - 1, pw = (t & ~31) / sb;
    constexpr int LD = PS_GPU_STAGE_LD;
    R *stg = Stage + (size_t)(t >> 5) * stage_rows<DG>::value * PS_GPU_STAGE * LD;
    R *sgz = DG ? stg + 2 * PS_GPU_STAGE * LD : nullptr;
    R gn[3]; /* the next step's gdt (gdt_step) */
    if (!NCH && GR == GR_GLOBAL)
        load_gdt(gdt, min(k0 + kseg - 1, nt), gn);
    /* PS_GPU_STAGE steps at a time from the segment's last (itop) in a
     * loop of their own, then their flush: no step branches to a flush
     * (H100: M 6% faster than one loop over the steps that flushed every
     * PS_GPU_STAGE-th); the trip counts are the warp's (kseg is uniform) */
    for (int itop = kseg - 1; itop >= 0; itop -= PS_GPU_STAGE) {
        const int nb = min(PS_GPU_STAGE, itop + 1); /* the steps staged */
        /* steps q < q0 lie past nt (the last segment's first): zeros
         * staged, m and lam left as they are (the gdt rows' pipeline
         * takes the guard row) */
        const int q0 = min(nb, max(0, k0 + itop - nt + 1));
        R *sq = stg + lane; /* row q of the group's values: sq[0] u, sq[STAGE LD] v, sq[2 STAGE LD] gth_z */
        for (int q = 0; q < q0; q++, sq += LD) {
            const int k = k0 + itop - q;
            R gk[3];
            gdt_step<R, NCH, GR>(gdt, min(k, nt), min(k - 1, nt), gn, gk);
            sq[0] = 0;
            sq[PS_GPU_STAGE * LD] = 0;
            if (DG)
                sq[2 * PS_GPU_STAGE * LD] = 0;
        }
        /* the steps k < nt; rl: relax, a constant (std::integral_constant)
         * in a loop of its own for each value (no test a step), or the
         * value itself in the single-channel GR_GLOBAL kernels (two loops
         * grew their stack frame from 192 to 280 bytes for no gain, README) */
        auto steps = [&](auto rl) {
            for (int k = k0 + itop - q0, kend = k0 + itop - nb; k > kend; k--, sq += LD) {
                R gk[3], th[3], gth[3], gx, gy;
                gdt_step<R, NCH, GR>(gdt, k, k - 1, gn, gk);
                theta_of<R, NCH, GR>(a, spl, S, gk, pul, x, d, alpha, k, th);
                reverse_adjoint(th, m, lam, relax_value(rl), spl[SP_A1], spl[SP_A2], spl[SP_B1], spl[SP_B2], gth);
                if (NCH) { /* dL/dtheta: the channels' chain rule is the sum's (below) */
                    gx = gth[0];
                    gy = gth[1];
                } else {
                    design_spin_grad(gs, gth, &gx, &gy);
                }
                sq[0] = gx;
                sq[PS_GPU_STAGE * LD] = gy;
                if (DG)
                    sq[2 * PS_GPU_STAGE * LD] = gth[2];
            }
        };
        if (!NCH && GR == GR_GLOBAL)
            steps(relax);
        else if (relax)
            steps(std::integral_constant<int, 1>());
        else
            steps(std::integral_constant<int, 0>());
        __syncwarp();
        if (NCH > 1) {
            /* NCH channels: per (group of CG channels, step, segment) the
             * sums over the segment's spins l of their chain rule
             * (model/design.h) with the spins' sensitivities
             * Stile[l NCH + c], both components; a lane takes a group, its
             * spin's values loaded once for the group's channels (the sums
             * per channel in spin order: the bits of the loop below) */
            constexpr int CG = channel_group<R, NCH>::value, NG = NCH / CG;
            for (int it = lane; it < (NG << (SL + lgg)); it += 32) {
                const int grp = it >> (SL + lgg), r = (it >> lgg) & SM, g = it & gm;
                const int kk = (pw + g) * kseg + itop - r;
                if (r >= nb || kk >= nt)
                    continue;
                const R *rx = stg + r * LD + g * sb, *ry = stg + (PS_GPU_STAGE + r) * LD + g * sb;
                R su[CG], sv[CG];
                double pu[CG], pv[CG]; /* the partials so far (partial_early) */
#pragma unroll
                for (int c = 0; c < CG; c++) {
                    su[c] = sv[c] = 0;
                    pu[c] = partial_early<DG>(first, gp + PS_X_U((size_t)nt, grp * CG + c, kk));
                    pv[c] = partial_early<DG>(first, gp + PS_X_V((size_t)nt, grp * CG + c, kk));
                }
                each_pair(rx, ry, sb, [&](int l, R x, R y) {
                    const R gth2[3] = {x, y, 0};
                    R gr[CG], gi[CG];
                    load_pairs<CG>(&Stile[l * NCH + grp * CG][0], gr, gi);
#pragma unroll
                    for (int c = 0; c < CG; c++) {
                        R gu, gv;
                        design_spin_grad_channel(gr[c], gi[c], gth2, &gu, &gv);
                        su[c] += gu;
                        sv[c] += gv;
                    }
                });
#pragma unroll
                for (int c = 0; c < CG; c++) {
                    const int ch = grp * CG + c;
                    double *du = gp + PS_X_U((size_t)nt, ch, kk), *dv = gp + PS_X_V((size_t)nt, ch, kk);
                    *du = partial_late<DG>(first, du, pu[c]) + (double)su[c];
                    *dv = partial_late<DG>(first, dv, pv[c]) + (double)sv[c];
                }
            }
            if (DG)
                flush_gradient<R>(a, sgz, rtile, nb, lgg, sb, pw, kseg, itop, lane, gp);
        } else if (NCH) {
            /* channels: per (channel c, step, segment) the sums over the
             * segment's spins l of their chain rule (model/design.h) with the
             * spin's sensitivity Stile[l nc + c], both components */
            const int nc = a.nc;
            for (int it = lane; it < (nc << (SL + lgg)); it += 32) {
                const int ch = it >> (SL + lgg), r = (it >> lgg) & SM, g = it & gm;
                const int kk = (pw + g) * kseg + itop - r;
                if (r >= nb || kk >= nt)
                    continue;
                const R *rx = stg + r * LD + g * sb, *ry = stg + (PS_GPU_STAGE + r) * LD + g * sb;
                double *du = gp + PS_X_U((size_t)nt, ch, kk), *dv = gp + PS_X_V((size_t)nt, ch, kk);
                const double pu = partial_early<DG>(first, du), pv = partial_early<DG>(first, dv);
                R su = 0, sv = 0;
                each_pair(rx, ry, sb, [&](int l, R x, R y) {
                    const R gth2[3] = {x, y, 0};
                    R gu, gv;
                    design_spin_grad_channel(Stile[l * nc + ch][0], Stile[l * nc + ch][1], gth2, &gu, &gv);
                    su += gu;
                    sv += gv;
                });
                *du = partial_late<DG>(first, du, pu) + (double)su;
                *dv = partial_late<DG>(first, dv, pv) + (double)sv;
            }
            if (DG)
                flush_gradient<R>(a, sgz, rtile, nb, lgg, sb, pw, kseg, itop, lane, gp);
        } else if (DG) {
            /* one channel, designed axes: per (component c, step, segment)
             * the sum of the staged values of c (u 0, v 1) and the dots
             * r_l,c gth_z,l of designed axis c (below ng), in one pass
             * (flush_designed); a third axis's dots after them */
            for (int it = lane; it < (2 << (SL + lgg)); it += 32) {
                const int c = it >> (SL + lgg), r = (it >> lgg) & SM, g = it & gm;
                const int kk = (pw + g) * kseg + itop - r;
                if (r >= nb || kk >= nt)
                    continue;
                flush_designed<R>(a, stg + (c * PS_GPU_STAGE + r) * LD + g * sb, sgz + r * LD + g * sb, rtile, c,
                                  sb, kk, first, gp);
            }
            if (a.des.ng > 2) /* the third axis: the channels kernels' items */
                flush_gradient<R>(a, sgz, rtile, nb, lgg, sb, pw, kseg, itop, lane, gp, 2);
        } else {
            /* one channel: components u (0), v (1) of the staged values */
            for (int it = lane; it < (2 << (SL + lgg)); it += 32) {
                const int c = it >> (SL + lgg), r = (it >> lgg) & SM, g = it & gm;
                const int kk = (pw + g) * kseg + itop - r;
                if (r >= nb || kk >= nt)
                    continue;
                double *dst = gp + (c ? PS_X_V((size_t)nt, 0, kk) : PS_X_U((size_t)nt, 0, kk)); /* the layout of x */
                const double early = partial_early<DG>(first, dst);
                const R sum = sum_row(stg + (c * PS_GPU_STAGE + r) * LD + g * sb, sb);
                *dst = partial_late<DG>(first, dst, early) + (double)sum;
            }
        }
        __syncwarp();
    }
}

/*
 * NCH 0: the single-channel kernel (a real B1 scale per spin, SP_GS); 1:
 * the channels kernel (a.nc channels of complex sensitivities a.spinS).
 * DG 1: with designed gradient axes (cuda/gradient.cuh: a.gteam, the
 * team's gdt rows and the blocks' preset designed rows made before by
 * waveform_totals and waveform_rows at the same point; else each block's
 * by form_gradient here; mu: the round's penalty weight, for the limits'
 * penalty gradient); DG 0 does exactly what it did before them.
 * GR (NCH 0): how the spin loops take the gradient rows (GR_GLOBAL,
 * GR_NONE with DG 0, or GR_STAGED: the enum's comment above); each a
 * kernel of its own, since a second copy of the loops beside the general
 * ones grows every kernel's stack frame (README).
 */
template <typename R, int NCH, int DG = 0, int GR = GR_GLOBAL>
__device__ void evaluate(const args &a, const double *x, const double *d, double alpha, bool grad, char *smem,
                         double mu = 0.0)
{
    const int sb = a.sb, P = a.segs, nt = a.nt;
    const int t = threadIdx.x, js = t % sb, p = t / sb;
    double *lossbuf = (double *)smem;          /* [sb] */
    double *lamf = lossbuf + sb;               /* [sb][3] dL/dM_Nt */
    /* [nt][2], GR_STAGED: [nt][4] (with the x and y rows), channels: [nt][nc][2] */
    R *pul = a.stage_pulse ? (R *)(lamf + 3 * sb) : nullptr;
    constexpr int PL = GR == GR_STAGED ? 4 : 2; /* a step's values in pul (one channel) */
    /* channels: the tile's sensitivities [sb][nc][2] after the pulse */
    R(*Stile)[2] = NCH ? (R(*)[2])((R *)(lamf + 3 * sb) + (a.stage_pulse ? 2 * (size_t)nt * a.nc : 0)) : nullptr;
    /* [P*sb][12], 16-byte aligned (as are Vm and Stage after it: P sb is a multiple of 32) */
    R *Tm = (R *)smem_align16(smem, NCH ? (const void *)(Stile + (size_t)sb * a.nc)
                                        : (const void *)((R *)(lamf + 3 * sb) + (a.stage_pulse ? PL * (size_t)nt : 0)));
    R *Vm = Tm + (size_t)P * sb * 12;          /* [P*sb][9] */
    /* the replay's staging [warps][stage_rows][PS_GPU_STAGE][PS_GPU_STAGE_LD];
     * DG: over Tm and Vm (free once every thread has taken its lam) */
    constexpr int NR = stage_rows<DG>::value;
    const size_t scan_elems = (size_t)P * sb * 21,
                 stage_elems = (size_t)((blockDim.x + 31) >> 5) * NR * PS_GPU_STAGE * PS_GPU_STAGE_LD;
    R *Stage = DG ? Tm : Vm + (size_t)P * sb * 9;
    R *stage_end = DG ? Tm + (scan_elems > stage_elems ? scan_elems : stage_elems) : Stage + stage_elems;
    const R *spin = (const R *)a.spin;
    /* DG: after the staging, the scratch and the tile's positions on the
     * designed axes [ng][sb]; the gdt rows in a.gdtb, the team's formed
     * before the evaluation (a.gteam: waveform_rows) or the block's own
     * (form_gradient; global memory either way: the spin loops' loads of
     * a known address space, 16 bytes a step); form_gradient uses Tm and
     * Vm as a buffer of cap doubles (free before the tiles), reverse_rows
     * all from the pulse to the staging's end (free after the tiles) */
    double *dscr = DG ? (double *)smem_align16(smem, stage_end) : nullptr;
    const int cap = (int)(scan_elems * sizeof(R) / sizeof(double));
    R *rtile = DG ? (R *)(dscr + PS_GPU_DG_SCRATCH) : nullptr;
    R *gdtb = DG ? (R *)a.gdtb + (team_waveform<NCH>(a) ? 0 : (size_t)team_rank(a) * gdt_elems(nt)) + GDT_ROW0
                 : nullptr;

    const int kseg = (nt + P - 1) / P;         /* uniform trip count: shuffles need the whole warp */
    const int k0 = p * kseg;
    double loss_acc = 0.0;
    double *gp = a.gpart + (size_t)team_rank(a) * a.n; /* this block's partial gradient */
    bool first = true;                               /* no tile added into gp yet */

    if (DG && !team_waveform<NCH>(a)) /* the designed waveforms, the block's gdt, its penalty row and preset rows */
        form_gradient<R>(a, x, d, alpha, mu, grad, gdtb, gp, (double *)Tm, cap, dscr);

    if (pul && !NCH) { /* the trial pulse, once per block (GR_STAGED: with the x and y rows, DG's formed above) */
        for (int k = t; k < nt; k += blockDim.x) {
            double ud, vd, zp, zq;
            pulse_at<0>(a, x, d, alpha, 0, k, &ud, &vd, &zp, &zq);
            pul[PL * k] = (R)ud;
            pul[PL * k + 1] = (R)vd;
            if (GR == GR_STAGED) {
                const R *row = (DG ? gdtb : (const R *)a.gdt) + 4 * k;
                pul[PL * k + 2] = row[0];
                pul[PL * k + 3] = row[1];
            }
        }
        __syncthreads();
    } else if (pul) { /* every channel's, [nt][nc][2] */
        for (int q = t; q < nt * a.nc; q += blockDim.x) {
            const int k = q / a.nc, c = q - k * a.nc;
            double ud, vd, zp, zq;
            pulse_at(a, x, d, alpha, c, k, &ud, &vd, &zp, &zq);
            pul[2 * q] = (R)ud;
            pul[2 * q + 1] = (R)vd;
        }
        __syncthreads();
    }

    for (int tile = team_rank(a); tile < a.ntiles; tile += a.nteam) {
        const int j = tile * sb + js;
        const bool valid = j < a.ns;
        const R *sp = spin + (size_t)(valid ? j : a.ns - 1) * SP_STRIDE;
        R spl[SP_STRIDE];
        for (int c = 0; c < SP_STRIDE; c++)
            spl[c] = sp[c];
        const int relax = a.relax;
        if (DG && p == 0) /* the tile's positions on the designed axes, for their sums */
#pragma unroll
            for (int i = 0; i < 3; i++)
                if (i < a.des.ng)
                    rtile[i * sb + js] = spl[SP_R0 + des_axis(a.des, i)];
        if (NCH) { /* the tile's sensitivities (spins past ns: the last spin's) */
            const R *sS = (const R *)a.spinS;
            for (int q = t; q < sb * a.nc; q += blockDim.x) {
                const int jq = tile * sb + q / a.nc, jc = jq < a.ns ? jq : a.ns - 1;
                const R *s = sS + 2 * ((size_t)jc * a.nc + q % a.nc);
                Stile[q][0] = s[0];
                Stile[q][1] = s[1];
            }
            __syncthreads();
        }
        /* this spin's S: in registers for a compile-time channel count */
        R Sreg[NCH > 1 ? NCH : 1][2];
        if (NCH > 1)
            for (int c = 0; c < NCH; c++) {
                Sreg[c][0] = Stile[(size_t)js * NCH + c][0];
                Sreg[c][1] = Stile[(size_t)js * NCH + c][1];
            }
        const R(*S)[2] = NCH > 1 ? (const R(*)[2])Sreg : NCH ? Stile + (size_t)js * a.nc : nullptr;

        // ---- composite ----
        R T[12] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
        composite<R, NCH, DG, GR>(a, spl, S, pul, gdtb, x, d, alpha, k0, kseg, relax, T);

        // ---- scan, the loss at M_Nt ----
        R V[9];
        scan<R>(t, p, sb, P, Tm, Vm, T, V);
        R m[3];
        end_state_and_loss<R>(a, j, valid, js, p == P - 1, T, lossbuf, lamf, m);
        __syncthreads();
        if (t == 0)
            for (int i = 0; i < sb; i++)
                loss_acc += lossbuf[i];

        // ---- replay, the gradient ----
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
            if (DG)
                __syncthreads(); /* every lam is taken before the replay stages over Vm */
            replay<R, NCH, DG, GR>(a, spl, S, Stile, pul, gdtb, rtile, x, d, alpha, t, sb, k0, kseg, relax,
                                   Stage, m, lam, gp, first);
        }
        first = false;
        __syncthreads(); /* shared buffers are reused by the next tile */
    }
    if (first && grad) /* a block without tiles adds nothing (DG: its designed rows are preset) */
        for (int i = t; i < (DG ? PS_DESIGN_NX(a.nc, nt) : a.n); i += blockDim.x)
            gp[i] = 0.0;
    if (DG && grad && a.des.slew) { /* R_k = sum_{j>=k} dF/dg_j of the block's rows */
        /* the buffer: from the tiles' buffers' start (the pulse, the
         * sensitivities: done with) to the staging's end */
        double *rbuf = (double *)smem_align16(smem, lamf + 3 * sb);
        __syncthreads();
        reverse_rows(a, gp, rbuf, (int)(((char *)stage_end - (char *)rbuf) / sizeof(double)), dscr);
    }
    if (t == 0)
        a.lpart[team_rank(a)] = loss_acc;
}

} // namespace ps_gpu

#endif /* PS_SRC_CUDA_EVALUATE_CUH */
