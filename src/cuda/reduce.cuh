/*
 * Fixed-order reductions of the GPU solve: block sums, the sum of the
 * blocks' partial gradients with the design's penalty and chain rule
 * (reduce_gradient), and the update's batched dots taken with every
 * trial (trial_dots). No atomics: the same launch shape gives the same
 * bits.
 */
#ifndef PS_SRC_CUDA_REDUCE_CUH
#define PS_SRC_CUDA_REDUCE_CUH

#include "cuda/args.cuh"
#include "cuda/constraints.cuh"
#include "cuda/gradient.cuh"
#include "cuda/ranks.cuh"
#include "cuda/sums.cuh"

namespace ps_gpu {

/* Shared memory of reduce_gradient and trial_dots (scratch: [warps][2][32]
 * and [warps][4 m] doubles). */
__host__ __device__ inline size_t reduce_smem_bytes(int tb)
{
    return (size_t)((tb + 31) / 32) * (4 * PS_MAX_MEMORY > 64 ? 4 * PS_MAX_MEMORY : 64) * sizeof(double);
}

/* The items of the reduction (reduce_gradient): chunks of 32 steps, with
 * channels (NCH) (channel, chunk) pairs, then with designed axes (DG)
 * (designed axis, chunk) pairs. */
template <int NCH, int DG>
__device__ __forceinline__ int reduce_items(const args &a)
{
    const int chunks = (a.nt + 31) / 32;
    return (NCH ? chunks * a.nc : chunks) + (DG ? a.des.ng * chunks : 0);
}

/*
 * ---- reduce gradient ----
 * gout = sum over the rows of src (the blocks' partial gradients; with
 * several GPUs the ranks' rows, cuda/ranks.cuh) + the SAR penalty's
 * gradient at weight mu (NCH > 0 with VOPs: cuda/constraints.cuh) + 2
 * lambda b, through the b1_max chain rule; block partials of gout.d,
 * gout.gout and the RF power sum b.b, and the block's loss, into
 * a.rpart[block][0..3].
 *
 * A block takes 32 consecutive time steps at a time (lane l: step
 * c*32 + l, so that a warp's loads of a partial row are coalesced);
 * warp w sums the partial rows b = w, w + nw, ... in order (the losses:
 * block b carries row b's, b < src.count), then warp 0
 * sums the warps' sums in warp order: a fixed order for a fixed launch
 * shape (all variants run this with the same one). With channels (NCH)
 * the block takes (channel, chunk) pairs q = block + i grid, channel
 * q / chunks, in that order. DG (designed gradient axes): the items
 * q >= nq_rf after them are (designed axis, chunk) pairs: at each index k
 * the sums over the blocks' rows at k and k + 1 are R_k and R_{k+1}
 * (cuda/gradient.cuh), then the chain rule of model/design.h,
 * dF/dx_k = kappa (dF/dt_k - dF/dt_{k+1}) (at the physical point,
 * dF/dg_k = R_k itself).
 */
template <int NCH, int DG = 0>
__device__ inline void reduce_gradient(const args &a, partial_rows src, const double *x, const double *d,
                                       double alpha, double mu, double *gout, double *scratch, double *out4)
{
    if (threadIdx.x < 32)
        sar_weights<NCH>(a, mu);
    const int nt = a.nt, G = a.nteam, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nw = blockDim.x >> 5, chunks = (nt + 31) / 32, nq = NCH ? chunks * a.nc : chunks;
    double *wsum = scratch; /* [nw][2][32] */
    /* [3]: the block's loss, carried along so that one sum over blocks
     * gives all four scalars of an evaluation */
    double acc[4] = {0.0, 0.0, 0.0,
                     threadIdx.x == 0 && team_rank(a) < src.count ? src.loss[team_rank(a) * src.lstride] : 0.0};
    for (int q = team_rank(a); q < nq; q += G) {
        const int ch = NCH ? q / chunks : 0, c = NCH ? q - ch * chunks : q;
        const int k = c * 32 + lane;
        const bool ok = k < nt;
        double u = 0.0, v = 0.0, zp = 0.0, zq = 0.0;
        if (warp == 0 && ok) /* the pulse's loads issued with the partials' */
            pulse_at<NCH>(a, x, d, alpha, ch, k, &u, &v, &zp, &zq);
        double gu = 0.0, gv = 0.0;
        if (ok)
            for (int b = warp; b < src.count; b += nw) {
                gu += src.g[b * src.stride + PS_X_U(nt, ch, k)];
                gv += src.g[b * src.stride + PS_X_V(nt, ch, k)];
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
            sar_step_grad<NCH>(a, ch, k, &gu, &gv);
            ps_design_step_grad(&a.des, ch, k, zp, zq, u, v, gu, gv, &gu, &gv);
            const int iu = PS_X_U(nt, ch, k), iv = PS_X_V(nt, ch, k);
            gout[iu] = gu;
            gout[iv] = gv;
            if (d)
                acc[0] += gu * d[iu] + gv * d[iv];
            acc[1] += gu * gu + gv * gv;
            acc[2] += ps_design_power(u, v);
        }
        __syncthreads(); /* wsum is taken before the next chunk writes it */
    }
    /* DG: the block's next items, (designed axis, chunk) pairs after the RF's */
    for (int q = team_rank(a) + (team_rank(a) < nq ? (nq - team_rank(a) + G - 1) / G * G : 0);
         DG && q < reduce_items<NCH, DG>(a); q += G) {
        const int i = (q - nq) / chunks, k = (q - nq - i * chunks) * 32 + lane;
        const bool ok = k < nt, ok1 = k + 1 < nt;
        const int ix = PS_X_G(a.nc, nt, i, k);
        double r = 0.0, r1 = 0.0; /* R_k, R_{k+1} (the same bits as lane + 1's R_k) */
        if (ok)
            for (int b = warp; b < src.count; b += nw) {
                r += src.g[b * src.stride + ix];
                if (ok1)
                    r1 += src.g[b * src.stride + ix + 1];
            }
        wsum[(warp * 2) * 32 + lane] = r;
        wsum[(warp * 2 + 1) * 32 + lane] = r1;
        __syncthreads();
        if (warp == 0 && ok) {
            r = r1 = 0.0;
            for (int w = 0; w < nw; w++) {
                r += wsum[(w * 2) * 32 + lane];
                r1 += wsum[(w * 2 + 1) * 32 + lane];
            }
            double gv = r;
            if (a.des.slew) { /* dF/dt_k and dF/dt_{k+1} (0 past the last step), then the difference's rule */
                const double kappa = des_kappa(a.des, i), xk = point_at(x, d, alpha, ix);
                const double tk = ps_slew_t(kappa, xk, k > 0 ? point_at(x, d, alpha, ix - 1) : 0.0);
                const double gt = ps_slew_grad(a.des.smax, a.des.dt, tk, r);
                const double gt1 =
                    ok1 ? ps_slew_grad(a.des.smax, a.des.dt, ps_slew_t(kappa, point_at(x, d, alpha, ix + 1), xk), r1)
                        : 0.0;
                gv = kappa * (gt - gt1);
            }
            gout[ix] = gv;
            if (d)
                acc[0] += gv * d[ix];
            acc[1] += gv * gv;
        }
        __syncthreads();
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
 * dots of the PS_RED_LEN layout (opt/lbfgs.h) but g.g (the evaluation's
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
 * dots are not summed: eval_scalars takes those of the first
 * min(items, grid) blocks). A fixed order for a fixed launch
 * shape, whether it runs after the reduction or alone. Every thread of
 * the block calls it; scratch: [warps][4m] doubles (reduce_smem_bytes);
 * ends with a barrier. With channels (NCH) or designed axes (DG) the
 * block takes the items of reduce_gradient (reduce_items): the 64
 * elements of a (channel, chunk) pair, u then v, and the 32 of a
 * (designed axis, chunk) pair; the gradient it reads is the block's own
 * from reduce_gradient (no barrier between them).
 */
template <int NCH, int DG = 0>
__device__ inline void trial_dots(const args &a, double alpha, int ns, const double *gt, double *scratch)
{
    const int nt = a.nt, n = a.n, m = a.memory, G = a.nteam, chunks = (nt + 31) / 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int nq = NCH || DG ? reduce_items<NCH, DG>(a) : chunks, nq_rf = NCH ? chunks * a.nc : chunks;
    const int mine = team_rank(a) < nq ? (nq - team_rank(a) + G - 1) / G : 0;
    const int per = 64; /* elements of an item */
    const int items = mine * per, busy = min(nw, (items + 31) / 32); /* warps with elements */
    if (!mine)
        return;
    for (int j0 = 0; j0 < m; j0 += 4) {
        double acc[16];
#pragma unroll
        for (int q = 0; q < 16; q++)
            acc[q] = 0.0;
        for (int it = threadIdx.x; it < items; it += blockDim.x) {
            int i;
            if (NCH || DG) { /* item q: (channel, chunk), then (designed axis, chunk) */
                const int q = team_rank(a) + (it >> 6) * G, half = (it >> 5) & 1;
                if (DG && q >= nq_rf) {
                    const int ax = (q - nq_rf) / chunks, k = (q - nq_rf - ax * chunks) * 32 + (it & 31);
                    if (half || k >= nt)
                        continue;
                    i = PS_X_G(a.nc, nt, ax, k);
                } else {
                    const int ch = NCH ? q / chunks : 0, k = (q - ch * chunks) * 32 + (it & 31);
                    if (k >= nt)
                        continue;
                    i = half ? PS_X_V(nt, ch, k) : PS_X_U(nt, ch, k);
                }
            } else {
                const int k = (team_rank(a) + (it >> 6) * G) * 32 + (it & 31);
                if (k >= nt)
                    continue;
                i = k + ((it >> 5) & 1) * nt;
            }
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
        a.rdot[(size_t)q * G + team_rank(a)] = v;
    }
    __syncthreads(); /* scratch is free again */
}

/*
 * The partials a trial's reduction leaves for its update, from g_t in
 * memory (a launch in the UPDATE phase: update_partials_kernel): g_t.g_t
 * in the reduction's order (a.rpart[block][1]) and the dots (trial_dots).
 * scratch: reduce_smem_bytes.
 */
template <int NCH, int DG = 0>
__device__ inline void update_partials(const args &a, double alpha, int ns, double *scratch)
{
    const int nt = a.nt, chunks = (nt + 31) / 32, nq_rf = NCH ? chunks * a.nc : chunks;
    const int nq = DG ? reduce_items<NCH, DG>(a) : nq_rf;
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
    if (threadIdx.x < 32) {
        for (int q = team_rank(a); q < nq; q += a.nteam) {
            if (DG && q >= nq_rf) { /* a designed axis's chunk */
                const int i = (q - nq_rf) / chunks, k = (q - nq_rf - i * chunks) * 32 + (int)threadIdx.x;
                if (k < nt) {
                    const double gv = a.gt[PS_X_G(a.nc, nt, i, k)];
                    acc[1] += gv * gv;
                }
                continue;
            }
            const int ch = NCH ? q / chunks : 0, c = NCH ? q - ch * chunks : q;
            const int k = c * 32 + (int)threadIdx.x;
            if (k < nt) {
                const double gu = a.gt[PS_X_U(nt, ch, k)], gv = a.gt[PS_X_V(nt, ch, k)];
                acc[1] += gu * gu + gv * gv;
            }
        }
    }
    trial_dots<NCH, DG>(a, alpha, ns, a.gt, scratch);
    block_partials(acc, 4, scratch, a.rpart + (size_t)team_rank(a) * PS_GPU_RP);
}

} // namespace ps_gpu

#endif /* PS_SRC_CUDA_REDUCE_CUH */
