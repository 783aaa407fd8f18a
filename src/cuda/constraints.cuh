/*
 * The penalty constraints on the GPU (local SAR, model/constraints.h),
 * in two pieces placed in the evaluation's existing phases, so that they
 * cost no barrier of their own:
 *   sar_partials  (evaluation phase, before its barrier) each block
 *                 stores the trial pulse of its chunks of 32 steps, every
 *                 channel, in a.bsar, and the partial sums of the steps'
 *                 forms b_k^H Q_q b_k into a.spart[q][block];
 *   sar_weights   (reduction phase, before reduce_gradient) warp 0 of
 *                 every block sums the partials over the blocks in a fixed
 *                 order and keeps SAR_q and the penalty's weights w_q in
 *                 its own row of a.sarw; reduce_gradient adds the
 *                 penalty's gradient per (channel, step) from a.bsar, and
 *                 the sums (eval_scalars) add the penalty to f and take
 *                 the violation.
 * Only the channels kernel (NCH > 0) has them: a problem with VOPs runs
 * it (ps_gpu_channels). Chunks are those of reduce_gradient and trial_dots
 * (chunk c = block + i grid); blocks without one write no partials, and
 * the sums run over dot_blocks(nt, grid) blocks.
 */
#ifndef PS_SRC_CUDA_CONSTRAINTS_CUH
#define PS_SRC_CUDA_CONSTRAINTS_CUH

#include "cuda/args.cuh"
#include "cuda/sums.cuh"

namespace ps_gpu {

/* Evaluation phase: the block's share of a.bsar and of the SAR partials
 * at x + alpha d. Every thread of the block calls it. */
template <int NCH>
__device__ inline void sar_partials(const args &a, const double *x, const double *d, double alpha)
{
    if (!NCH || !a.sar.nq)
        return;
    const int nt = a.nt, nc = a.nc, G = a.nteam, chunks = (nt + 31) / 32;
    const int mine = team_rank(a) < chunks ? (chunks - team_rank(a) + G - 1) / G : 0;
    if (!mine)
        return;
    /* element it: chunk it / (32 nc), channel (it / 32) % nc, step lane it % 32 */
    for (int it = threadIdx.x; it < mine * 32 * nc; it += blockDim.x) {
        const int k = (team_rank(a) + it / (32 * nc) * G) * 32 + (it & 31), c = (it >> 5) % nc;
        if (k < nt) {
            double u, v, zp, zq;
            pulse_at(a, x, d, alpha, c, k, &u, &v, &zp, &zq);
            a.bsar[2 * ((size_t)k * nc + c)] = u;
            a.bsar[2 * ((size_t)k * nc + c) + 1] = v;
        }
    }
    __syncthreads(); /* the block's pulse, for its own warps */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int q = warp; q < a.sar.nq; q += nw) {
        const double *Q = a.sar.vop + (size_t)2 * nc * nc * q;
        double s = 0.0;
        for (int i = 0; i < mine; i++) {
            const int k = (team_rank(a) + i * G) * 32 + lane;
            if (k < nt) {
                const double *b = a.bsar + (size_t)2 * nc * k;
                s += ps_sar_quad(Q, nc, b, b + 1, 2);
            }
        }
        for (int off = 16; off > 0; off /= 2)
            s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0)
            a.spart[(size_t)q * G + team_rank(a)] = s;
    }
}

/* Reduction phase, warp 0 of every block (all 32 lanes): SAR_q and the
 * weights at penalty weight mu into the block's row of a.sarw ([0, nq):
 * w_q, [nq, 2 nq): SAR_q); visible to the warp when it returns. */
template <int NCH>
__device__ inline void sar_weights(const args &a, double mu)
{
    if (!NCH || !a.sar.nq)
        return;
    const int G = a.nteam, GD = dot_blocks(a.nt, G), nq = a.sar.nq;
    double *row = a.sarw + (size_t)2 * nq * team_rank(a);
    for (int q = 0; q < nq; q++) {
        const double sar = ps_sar_of_sum(&a.sar, warp_sum_partials(a.spart + (size_t)q * G, GD, 1));
        if ((threadIdx.x & 31) == 0) {
            row[q] = ps_sar_weight(&a.sar, mu, sar);
            row[nq + q] = sar;
        }
    }
    __syncwarp();
}

/* The penalty's gradient at (channel c, step k), added to (gu, gv), from
 * the block's weights (sar_weights) and the stored pulse. */
template <int NCH>
__device__ __forceinline__ void sar_step_grad(const args &a, int c, int k, double *gu, double *gv)
{
    if (!NCH || !a.sar.nq)
        return;
    const double *b = a.bsar + (size_t)2 * a.nc * k;
    ps_sar_step_grad(&a.sar, a.sarw + (size_t)2 * a.sar.nq * team_rank(a), c, b, b + 1, 2, gu, gv);
}

/* The sums (one thread): the penalty at weight mu from the block's SAR
 * values, added to f; the violation into *viol. */
template <int NCH>
__device__ inline double sar_penalty(const args &a, double mu, double *viol)
{
    *viol = 0.0;
    if (!NCH || !a.sar.nq)
        return 0.0;
    return ps_sar_penalty(&a.sar, mu, a.sarw + (size_t)2 * a.sar.nq * team_rank(a) + a.sar.nq, viol);
}

} // namespace ps_gpu

#endif /* PS_SRC_CUDA_CONSTRAINTS_CUH */
