/*
 * Designed gradient axes on the GPU (SPEC 1.2 and 1.3, model/design.h,
 * model/constraints.h): what the DG kernels (template flag DG = 1) add to
 * the evaluation and the reduction, with no grid barrier of their own.
 *
 *   form_gradient    start of every evaluation, every block: the designed
 *                    waveforms g_ik at x + alpha d, the slews
 *                    dt s_k = dt smax (2/pi) atan(t_k) of the slew
 *                    variables t_k = kappa_i (x_k - x_{k-1}) in parallel
 *                    (coalesced, into shared memory) and
 *                    g_k = sum_{j<=k} dt s_j by a fixed-order block scan
 *                    in double per axis (each thread a chunk of
 *                    consecutive steps; the same bits in every block
 *                    and every variant, for a given block size); the
 *                    block's own gdt rows (cuda/args.cuh) in the spin
 *                    loop's precision (the problem's gdt on the fixed
 *                    axes, dt gamma g_k on the designed ones), which the
 *                    spin loops read instead of a.gdt: in a.gdtb, made
 *                    once at the set-up (cuda/context.cu), its designed
 *                    axes written here; the limits' penalty at mu = 1 and
 *                    its violation into the block's row of a.gpen; the
 *                    designed part of the block's partial gradient preset:
 *                    block 0's to the penalty's gradient at the round's mu,
 *                    the others' to 0.
 *   replay           (cuda/evaluate.cuh) stages the adjoint's gth_z per step
 *                    beside (gx, gy), and each flush adds
 *                    dt gamma sum_l r_l,a gth_z,l over the tile's spins l to
 *                    the block's partial dF/dg_k of each designed axis
 *                    (flush_designed: with the sums of u and v, in one pass
 *                    over the spins; flush_gradient: the channels kernels).
 *   reverse_rows     end of the evaluation, in the optimizer's variables:
 *                    each block turns its partial rows into their reverse
 *                    cumulative sums, so that reduce_gradient's sum over
 *                    the blocks is R_k = sum_{j>=k} dF/dg_j at once.
 *   reduce_gradient  (cuda/reduce.cuh) per designed index k the sums over
 *                    the blocks at k and k + 1, R_k and R_{k+1}, then
 *                    dF/dt_k = ps_slew_grad(t_k, R_k) and
 *                    dF/dx_k = kappa_i (dF/dt_k - dF/dt_{k+1}) (at the
 *                    physical point, MODE_EVAL: dF/dg_k itself);
 *                    eval_scalars adds mu times the penalty to f and takes
 *                    the largest violation with the SAR's.
 */
#ifndef PS_SRC_CUDA_GRADIENT_CUH
#define PS_SRC_CUDA_GRADIENT_CUH

#include "cuda/args.cuh"
#include "cuda/sums.cuh"

namespace ps_gpu {

/* The i-th designed axis and its slew scale by constant indices (a
 * runtime index into the kernel's parameters would copy them to local
 * memory). */
__device__ __forceinline__ int des_axis(const ps_design &des, int i)
{
    return i == 0 ? des.axis[0] : i == 1 ? des.axis[1] : des.axis[2];
}
__device__ __forceinline__ double des_kappa(const ps_design &des, int i)
{
    return i == 0 ? des.kappa[0] : i == 1 ? des.kappa[1] : des.kappa[2];
}

/* Doubles of the evaluation's scratch for the designed axes (shared
 * memory, 16-byte aligned, after the gradient staging):
 * [0, 64) block_partials' [warps][4], [64, 68) its sums, [72, 88) the
 * warps' violations; block_scan uses [0, N warps). */
#define PS_GPU_DG_SCRATCH 96

/*
 * Exclusive scan over the block's threads in thread order of N values a
 * thread (the designed axes'): v[q] becomes the sum of v[q] of the
 * threads before it (0 in thread 0). A fixed order, the same bits in every
 * block for a given block size (and whatever N: the values are scanned
 * apart): Hillis-Steele shuffles in each warp, then the warps before in
 * order. Every thread calls it; scr: [warps][N] doubles; two barriers.
 */
template <int N> __device__ inline void block_scan(double (&v)[N], double *scr)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    double inc[N];
#pragma unroll
    for (int q = 0; q < N; q++)
        inc[q] = v[q];
    for (int off = 1; off < 32; off *= 2)
#pragma unroll
        for (int q = 0; q < N; q++) {
            const double y = __shfl_up_sync(0xffffffffu, inc[q], off);
            if (lane >= off)
                inc[q] += y;
        }
    if (lane == 31)
        for (int q = 0; q < N; q++)
            scr[N * warp + q] = inc[q];
    __syncthreads();
#pragma unroll
    for (int q = 0; q < N; q++) {
        double before = 0.0;
        for (int w = 0; w < warp; w++)
            before += scr[N * w + q];
        const double prev = __shfl_up_sync(0xffffffffu, inc[q], 1); /* the lane before's inclusive sum */
        v[q] = lane ? before + prev : before;
    }
    __syncthreads(); /* scr is read before it is written again */
}

/* The steps [*k0, *k1) of thread t of tb: contiguous chunks of
 * ceil(nt / tb) steps in step order (rev: thread t takes chunk tb - 1 - t,
 * so that thread order is descending step order). */
__device__ __forceinline__ void thread_steps(int nt, int t, int tb, bool rev, int *k0, int *k1)
{
    const int len = (nt + tb - 1) / tb, c = rev ? tb - 1 - t : t;
    *k0 = min(nt, c * len);
    *k1 = min(nt, *k0 + len);
}

/* The coordinate j of the point x + alpha d (d may be NULL). */
__device__ __forceinline__ double point_at(const double *x, const double *d, double alpha, int j)
{
    return d ? ps_trial_coord(x[j], alpha, d[j]) : x[j];
}

/*
 * ---- the designed waveforms of an evaluation (every block) ----
 * At x + alpha d (d may be NULL): g_ik of every designed axis i (in the
 * optimizer's variables the cumulative sum of dt s_k, s_k of
 * t_k = kappa_i (x_k - x_{k-1}), model/design.h; at the physical point
 * x's tail itself), the block's gdt rows (R; cuda/args.cuh), its row of
 * a.gpen (the penalty of each axis's limits at mu = 1, per step by
 * ps_gradient_penalty over one step, the end condition with the last;
 * then the largest violation), and with grad the designed part of the
 * block's partial gradient gp preset (block 0: the penalty's gradient at
 * weight mu; the others, and every block of ranks other than 0: 0).
 *
 * An axis at a time, in rounds of at most cap steps through buf (cap
 * doubles of shared memory that the evaluation uses later; nt <= cap is
 * one round): the round's dt s_k (or g_k) into buf, thread after thread
 * (coalesced loads of x and d); then each thread a chunk of consecutive
 * steps (thread_steps): its sum, one block scan for the sums of the chunks
 * before, and its g_k in step order with their penalty; then the gdt rows
 * and gp's rows thread after thread again. Every thread calls it; scr:
 * PS_GPU_DG_SCRATCH doubles; ends with a barrier.
 */
template <typename R>
__device__ inline void form_gradient(const args &a, const double *x, const double *d, double alpha, double mu,
                                     bool grad, R *gdt, double *gp, double *buf, int cap, double *scr)
{
    const ps_design &des = a.des;
    const int nt = a.nt, tb = blockDim.x, t = threadIdx.x, lane = t & 31, warp = t >> 5, nw = (tb + 31) >> 5;
    const bool pgrad = grad && team_rank(a) == 0 && a.rk.rank == 0; /* once over the blocks (and the ranks) */
    /* the block's copy in a.gdtb holds the fixed axes from the set-up (cuda/context.cu) */
    double pen[3] = {0.0, 0.0, 0.0}, viol = 0.0;
#pragma unroll
    for (int i = 0; i < 3; i++)
        if (i < des.ng) {
            const int ax = des_axis(des, i), x0 = PS_X_G(a.nc, nt, i, 0);
            const double kappa = des_kappa(des, i);
            double carry = 0.0; /* g at the step before the round */
            for (int r0 = 0; r0 < nt; r0 += cap) {
                const int len = min(cap, nt - r0);
                for (int q = t; q < len; q += tb) { /* dt s_k, or g_k itself */
                    const int k = r0 + q;
                    const double xk = point_at(x, d, alpha, x0 + k);
                    if (des.slew) {
                        const double xprev = k > 0 ? point_at(x, d, alpha, x0 + k - 1) : 0.0;
                        buf[q] = des.dt * ps_slew_of_t(des.smax, ps_slew_t(kappa, xk, xprev));
                    } else {
                        buf[q] = xk;
                    }
                }
                __syncthreads();
                int c0, c1;
                thread_steps(len, t, tb, false, &c0, &c1);
                double acc = 0.0;
                if (des.slew) { /* the chunks before: g_{c0 - 1} */
                    double off[1] = {0.0};
                    for (int q = c0; q < c1; q++)
                        off[0] += buf[q];
                    block_scan<1>(off, scr);
                    acc = carry + off[0];
                }
                for (int q = c0; q < c1; q++) {
                    double g = buf[q];
                    if (des.slew) {
                        acc += g;
                        g = acc;
                        buf[q] = g;
                    }
                    const int ge = r0 + q == nt - 1 ? des.g_end : 0;
                    pen[i] += ps_gradient_penalty(des.gmax, ge, 1.0, 1, &g, nullptr, &viol);
                }
                __syncthreads();
                for (int q = t; q < len; q += tb) { /* the block's gdt, gp's preset rows */
                    const int k = r0 + q;
                    double g = buf[q];
                    gdt[4 * k + ax] = (R)(des.dtg * g);
                    if (grad) {
                        double dg = 0.0, unused = 0.0;
                        if (pgrad)
                            ps_gradient_penalty(des.gmax, k == nt - 1 ? des.g_end : 0, mu, 1, &g, &dg, &unused);
                        gp[x0 + k] = dg;
                    }
                }
                carry = buf[len - 1];
                __syncthreads(); /* buf is read before the next round writes it */
            }
        }
    /* the penalties: a fixed-order block sum; the violation: the largest */
    const double vals[4] = {pen[0], pen[1], pen[2], 0.0};
    block_partials(vals, 4, scr, scr + 64);
    for (int o = 16; o > 0; o /= 2)
        viol = fmax(viol, __shfl_xor_sync(0xffffffffu, viol, o));
    if (lane == 0)
        scr[72 + warp] = viol;
    __syncthreads();
    if (t == 0) {
        double v = 0.0;
        for (int w = 0; w < nw; w++)
            v = fmax(v, scr[72 + w]);
        double *row = a.gpen + (size_t)4 * team_rank(a);
        row[0] = scr[64];
        row[1] = scr[65];
        row[2] = scr[66];
        row[3] = v;
    }
    __syncthreads(); /* gdt and gp for the whole block; scr free */
}

/*
 * The designed part of a flush of replay (cuda/evaluate.cuh; the channels
 * kernels: the single-channel one sums these items with u and v): per
 * (designed axis i, staged step r, segment g) the sum over the segment's
 * spins l of r_l,i gth_z,l (the tile's positions rtile [ng][sb], the
 * warp's staged gth_z sgz [PS_GPU_STAGE][PS_GPU_STAGE_LD]; cuda/sums.cuh
 * dot_row), times dt gamma, added to
 * the block's partial dF/dg_i,k; one item per lane, the items
 * it = ((i PS_GPU_STAGE) + r) 2^lgg + g decomposed by shifts (2^lgg
 * segments in a warp; steps r >= nb not staged).
 */
template <typename R>
__device__ __forceinline__ void flush_gradient(const args &a, const R *sgz, const R *rtile, int nb, int lgg,
                                               int sb, int pw, int kseg, int itop, int lane, double *gp)
{
    constexpr int SL = stage_log2<R>::value;
    for (int it = lane; it < (a.des.ng << (SL + lgg)); it += 32) {
        const int i = it >> (SL + lgg), r = (it >> lgg) & ((1 << SL) - 1), g = it & ((1 << lgg) - 1);
        const int kk = (pw + g) * kseg + itop - r;
        if (r >= nb || kk >= a.nt)
            continue;
        const R sum = dot_row(rtile + i * sb, sgz + r * PS_GPU_STAGE_LD + g * sb, sb);
        gp[PS_X_G(a.nc, a.nt, i, kk)] += a.des.dtg * (double)sum;
    }
}

/*
 * One item of a flush of the single-channel replay (cuda/evaluate.cuh)
 * with designed axes: component c (u 0, v 1) at step kk of a segment, its
 * staged values row, the segment's staged gth_z z; the sum of row over the
 * segment's spins into the block's partial dF/d(u, v)_kk (first: the
 * block's first tile, stored), and for the designed axes i = c and c + 2
 * (those below ng) the sums of r_l,i gth_z,l with the tile's positions
 * rtile [ng][sb], times dt gamma, added to the partial dF/dg_i,kk (preset
 * rows: always added). One pass over the spins (sums.cuh sum_dots_row):
 * the bits of a sum_row and a dot_row per value.
 */
template <typename R>
__device__ __forceinline__ void flush_designed(const args &a, const R *row, const R *z, const R *rtile, int c,
                                               int sb, int kk, bool first, double *gp)
{
    const int nt = a.nt, nd = (a.des.ng > c) + (a.des.ng > c + 2);
    const R *const rq[2] = {rtile + c * sb, rtile + (c + 2) * sb};
    double *dst = gp + (c ? PS_X_V((size_t)nt, 0, kk) : PS_X_U((size_t)nt, 0, kk));
    double *d1 = gp + PS_X_G(1, nt, c, kk), *d2 = gp + PS_X_G(1, nt, c + 2, kk);
    const double p0 = first ? 0.0 : *dst, p1 = nd > 0 ? *d1 : 0.0, p2 = nd > 1 ? *d2 : 0.0;
    R out[3];
    if (nd == 2)
        sum_dots_row<2>(row, z, rq, sb, out);
    else if (nd == 1)
        sum_dots_row<1>(row, z, rq, sb, out);
    else
        sum_dots_row<0>(row, z, rq, sb, out);
    *dst = p0 + (double)out[0];
    if (nd > 0)
        *d1 = p1 + a.des.dtg * (double)out[1];
    if (nd > 1)
        *d2 = p2 + a.des.dtg * (double)out[2];
}

/*
 * ---- reverse cumulative sums (end of an evaluation, every block) ----
 * Each designed row of the block's partial gradient gp becomes
 * R_k = sum_{j>=k} row_j. An axis at a time, in rounds of at most cap
 * steps from the last (buf: cap doubles of shared memory that the
 * evaluation is done with; nt <= cap is one round): the round's rows into
 * buf (coalesced loads), each thread a chunk of consecutive steps, the
 * chunks in descending order over the threads (thread_steps), so that one
 * block scan gives each chunk the sum of the rows after it (and the
 * rounds after, carry); then its steps from the last, and the round back
 * to gp (coalesced stores). Every thread calls it; scr: [warps] doubles;
 * ends with a barrier.
 */
__device__ inline void reverse_rows(const args &a, double *gp, double *buf, int cap, double *scr)
{
    const int nt = a.nt, tb = blockDim.x, t = threadIdx.x;
#pragma unroll
    for (int i = 0; i < 3; i++)
        if (i < a.des.ng) {
            double *row = gp + PS_X_G(a.nc, nt, i, 0);
            double carry = 0.0; /* R at the round's end: the sum of the rounds after it */
            for (int r1 = nt; r1 > 0; r1 -= cap) {
                const int r0 = max(0, r1 - cap), len = r1 - r0;
                for (int q = t; q < len; q += tb)
                    buf[q] = row[r0 + q];
                __syncthreads();
                int c0, c1;
                thread_steps(len, t, tb, true, &c0, &c1);
                double off[1] = {0.0};
                for (int q = c1 - 1; q >= c0; q--)
                    off[0] += buf[q];
                block_scan<1>(off, scr);
                double acc = carry + off[0];
                for (int q = c1 - 1; q >= c0; q--) {
                    acc += buf[q];
                    buf[q] = acc;
                }
                __syncthreads();
                for (int q = t; q < len; q += tb)
                    row[r0 + q] = buf[q];
                carry = buf[0];
                __syncthreads(); /* buf is read before the next round writes it */
            }
        }
}

/* Shared memory the designed axes add to an evaluation. */
template <typename R> __host__ __device__ inline size_t dg_smem_bytes(int sb)
{
    return 16 + PS_GPU_DG_SCRATCH * sizeof(double) + (size_t)3 * sb * sizeof(R);
}

} // namespace ps_gpu

#endif /* PS_SRC_CUDA_GRADIENT_CUH */
