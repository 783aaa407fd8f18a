/*
 * Designed gradient axes on the GPU (SPEC 1.2 and 1.3, model/design.h,
 * model/constraints.h): what the DG kernels (template flag DG = 1) add to
 * the evaluation and the reduction.
 *
 *   waveform_totals  start of every evaluation, before a team barrier
 *   waveform_rows    (a.gteam 1: the single-channel kernel, pulses of
 *                    PS_GPU_WAVEFORM_TEAM_STEPS steps a thread or more): the
 *                    designed waveforms g_ik at x + alpha d, formed once
 *                    over the team, each block a share of the steps; the
 *                    slews dt s_k = dt smax (2/pi) atan(t_k) of the slew
 *                    variables t_k = kappa_i (x_k - x_{k-1}), the shares'
 *                    sums (totals, published with a count: each block
 *                    waits only for the totals of the shares before its
 *                    own), and g_k = sum_{j<=k} dt s_j as the sum of the
 *                    shares before plus a fixed-order block scan in
 *                    double (the same bits in every variant, for a given
 *                    launch shape); the team's gdt rows (cuda/args.cuh)
 *                    in the spin loop's precision (the problem's gdt on
 *                    the fixed axes, dt gamma g_k on the designed ones),
 *                    which the spin loops read after the team barrier
 *                    instead of a.gdt: in a.gdtb, made once at the set-up
 *                    (cuda/context.cu), its designed axes written here;
 *                    the limits' penalty at mu = 1 and the violation
 *                    over the share into the block's row of
 *                    a.gpen; the designed part of the blocks' partial
 *                    gradients preset: block 0's to the penalty's gradient
 *                    at the round's mu, the others' to 0.
 *   form_gradient    (a.gteam 0: shorter pulses, where the team barrier
 *                    costs more than the per-block formation saves, and
 *                    the channels kernels) the
 *                    same, each block for every step into its own gdt
 *                    copy, a thread a chunk of consecutive steps, the
 *                    penalty in each block's row of a.gpen; no barrier.
 *   replay           (cuda/evaluate.cuh) stages the adjoint's gth_z per step
 *                    beside (gx, gy), and each flush adds
 *                    dt gamma sum_l r_l,a gth_z,l over the tile's spins l to
 *                    the block's partial dF/dg_k of each designed axis
 *                    (flush_designed: axes x and y with the sums of u and
 *                    v, in one pass over the spins; flush_gradient: the
 *                    channels kernels, and the third axis).
 *   reverse_rows     end of the evaluation, in the optimizer's variables:
 *                    each block turns its partial rows into their reverse
 *                    cumulative sums, so that reduce_gradient's sum over
 *                    the blocks is R_k = sum_{j>=k} dF/dg_j at once.
 *   reduce_gradient  (cuda/reduce.cuh) per designed index k the sums over
 *                    the blocks at k and k + 1, R_k and R_{k+1}, then
 *                    dF/dt_k = ps_slew_grad(t_k, R_k) and
 *                    dF/dx_k = kappa_i (dF/dt_k - dF/dt_{k+1}) (at the
 *                    physical point, MODE_EVAL: dF/dg_k itself);
 *                    eval_scalars adds mu times the penalty (a.gteam:
 *                    the sum of the blocks' rows; else the block's own
 *                    row) to f and takes the largest violation with the
 *                    SAR's.
 */
#ifndef PS_SRC_CUDA_GRADIENT_CUH
#define PS_SRC_CUDA_GRADIENT_CUH

#include "cuda/args.cuh"
#include "cuda/sums.cuh"
#include "cuda/team.cuh"

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
 * warps' violations, [88, 91) waveform_rows' carries; block_scan uses
 * [0, N warps). */
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

/* Whether the team forms the designed waveforms: a.gteam, in the
 * single-channel kernel only (the channels kernels' register allocation
 * measured fastest without the team's code, cuda/context.cu). */
template <int NCH> __host__ __device__ __forceinline__ bool team_waveform(const args &a)
{
    return !NCH && a.gteam;
}

/* The steps [*s0, *s1) of the block's share of the designed waveforms
 * (waveform_totals, waveform_rows): the team's blocks take contiguous
 * shares of ceil(nt / G) steps in step order, the same on every axis
 * (blocks past nt: none). */
__device__ __forceinline__ void waveform_share(const args &a, int *s0, int *s1)
{
    const int len = (a.nt + a.nteam - 1) / a.nteam;
    *s0 = min(a.nt, team_rank(a) * len);
    *s1 = min(a.nt, *s0 + len);
}

/* dt s_k of a designed axis of scale kappa from its variables x_k and
 * x_{k-1} at the point (model/design.h: s_k = smax (2/pi) atan(t_k),
 * t_k = kappa (x_k - x_{k-1})). */
__device__ __forceinline__ double dt_slew(const ps_design &des, double kappa, double xk, double xprev)
{
    return des.dt * ps_slew_of_t(des.smax, ps_slew_t(kappa, xk, xprev));
}

/* dt_slew of every designed axis at step k of x + alpha d; 0 where !in
 * and on the axes past ng. */
__device__ __forceinline__ void step_slews(const args &a, const double *x, const double *d, double alpha, int k,
                                           bool in, double (&v)[3])
{
#pragma unroll
    for (int i = 0; i < 3; i++) {
        v[i] = 0.0;
        if (in && i < a.des.ng) {
            const int x0 = PS_X_G(a.nc, a.nt, i, 0);
            const double xk = point_at(x, d, alpha, x0 + k);
            const double xprev = k > 0 ? point_at(x, d, alpha, x0 + k - 1) : 0.0;
            v[i] = dt_slew(a.des, des_kappa(a.des, i), xk, xprev);
        }
    }
}

/* The block's row of a.gpen: the per-thread penalties pen of each axis
 * summed in a fixed order (block_partials), then the largest of the
 * threads' violations viol. Every thread calls it; scr:
 * PS_GPU_DG_SCRATCH doubles ([0, 68) the sums, [72, 88) the warps'
 * violations); the caller's barrier follows. */
__device__ inline void penalty_row(const args &a, const double (&pen)[3], double viol, double *scr)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    const double vals[4] = {pen[0], pen[1], pen[2], 0.0};
    block_partials(vals, 4, scr, scr + 64);
    for (int o = 16; o > 0; o /= 2)
        viol = fmax(viol, __shfl_xor_sync(0xffffffffu, viol, o));
    if (lane == 0)
        scr[72 + warp] = viol;
    __syncthreads();
    if (threadIdx.x == 0) {
        double v = 0.0;
        for (int w = 0; w < nw; w++)
            v = fmax(v, scr[72 + w]);
        double *row = a.gpen + (size_t)4 * team_rank(a);
        row[0] = scr[64];
        row[1] = scr[65];
        row[2] = scr[66];
        row[3] = v;
    }
}

/* The count of a block's published share totals (cuda/gradient.cuh
 * waveform_totals): the first word of column 3 of its row of a.gtot. */
__device__ __forceinline__ unsigned *gtot_count(const args &a, int b)
{
    return reinterpret_cast<unsigned *>(a.gtot + (size_t)4 * b + 3);
}

/*
 * ---- the designed waveforms of an evaluation, 1 of 2 (every block) ----
 * g_ik = sum_{j<=k} dt s_j at x + alpha d is formed once over the team,
 * each block its share of the steps (waveform_share), by this and
 * waveform_rows, then a team barrier that the caller places before the
 * evaluation (cuda/loop.cuh evaluate_and_reduce; the host-driven variant:
 * a launch each). The blocks are all resident (a cooperative launch), so
 * a block that waits for the totals before its share is not waiting for
 * one that cannot run. This one: the sum of dt s_k over the block's share,
 * per designed axis, into its row of a.gtot (a fixed-order block sum of
 * each round of blockDim.x steps, the rounds in order), published by
 * raising the block's count (gtot_count, release at GPU scope) to the
 * evaluations formed so far. Every block publishes once per evaluation,
 * so the counts stay equal from one evaluation (and launch) to the next;
 * they start at 0 (cuda/context.cu). At the physical point (no slew
 * variables: g is x's tail) nothing. Every thread calls it; scr:
 * PS_GPU_DG_SCRATCH doubles; ends with a barrier.
 */
__device__ inline void waveform_totals(const args &a, const double *x, const double *d, double alpha, double *scr)
{
    if (!a.des.slew)
        return;
    int s0, s1;
    waveform_share(a, &s0, &s1);
    double tot[3] = {0.0, 0.0, 0.0};
    for (int r0 = s0; r0 < s1; r0 += blockDim.x) {
        double v[3];
        step_slews(a, x, d, alpha, r0 + (int)threadIdx.x, r0 + (int)threadIdx.x < s1, v);
        const double vals[4] = {v[0], v[1], v[2], 0.0};
        block_partials(vals, 4, scr, scr + 64); /* ends with a barrier: scr[64..67] for every thread */
#pragma unroll
        for (int i = 0; i < 3; i++)
            tot[i] += scr[64 + i];
    }
    if (threadIdx.x == 0) {
        double *row = a.gtot + (size_t)4 * team_rank(a);
        unsigned *count = gtot_count(a, team_rank(a));
        const unsigned c = *count + 1u; /* only this thread writes it */
#pragma unroll
        for (int i = 0; i < 3; i++)
            row[i] = tot[i];
        __threadfence();
        store_release_gpu(count, c);
    }
    __syncthreads();
}

/*
 * ---- the designed waveforms, 2 of 2 (every block, after
 * waveform_totals; a team barrier follows before the evaluation) ----
 * The block's share of g_ik: the totals of the shares before it (a.gtot's
 * rows 0 .. b - 1, each once its count has reached this evaluation's,
 * summed in warp_sum_partials' fixed order), then a round
 * of blockDim.x steps at a time the round's carry plus the exclusive block
 * scan of its dt s_k in thread order (block_scan) plus dt s_k (at the
 * physical point: x's tail itself). Into
 *   - the team's gdt rows (a.gdtb, which holds the fixed axes from the
 *     set-up, cuda/context.cu) at the share's steps, dt gamma g_k in the
 *     spin loop's precision R;
 *   - the block's row of a.gpen: the penalty of each axis's limits at
 *     mu = 1 over the share (ps_gradient_penalty a step at a time, the end
 *     condition with the last; a fixed-order block sum) and the share's
 *     largest violation (eval_scalars sums the rows and takes the largest);
 *   - with grad, the designed rows of block 0's partial gradient at the
 *     share's steps, preset: the penalty's gradient at weight mu (0 on the
 *     ranks other than 0); every other block zeroes its own designed rows
 *     (replay adds into the preset rows).
 * Every thread calls it; scr: PS_GPU_DG_SCRATCH doubles; ends with a
 * barrier.
 */
template <typename R>
__device__ inline void waveform_rows(const args &a, const double *x, const double *d, double alpha, double mu,
                                     bool grad, double *scr)
{
    const ps_design &des = a.des;
    const int nt = a.nt, tb = blockDim.x, t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const int b = team_rank(a);
    const bool pgrad = grad && a.rk.rank == 0; /* once over the ranks */
    R *gdt = (R *)a.gdtb + GDT_ROW0;
    double *gp0 = a.gpart; /* the designed rows of block 0's partial gradient */
    int s0, s1;
    waveform_share(a, &s0, &s1);
    if (des.slew && warp < des.ng) { /* warp i: the shares before this one, axis i, once published */
        const unsigned c = load_acquire_gpu(gtot_count(a, b)); /* this evaluation's count: the block's own */
        double before = 0.0;
        for (int j = lane; j < b; j += 32) {
            while ((int)(load_acquire_gpu(gtot_count(a, j)) - c) < 0)
                ;
            before += __ldcg(a.gtot + (size_t)4 * j + warp);
        }
        for (int off = 16; off > 0; off /= 2) /* warp_sum_partials' order */
            before += __shfl_xor_sync(0xffffffffu, before, off);
        if (lane == 0)
            scr[88 + warp] = before;
    }
    __syncthreads();
    double carry[3] = {0.0, 0.0, 0.0}; /* g at the step before the round */
    if (des.slew)
#pragma unroll
        for (int i = 0; i < 3; i++)
            carry[i] = i < des.ng ? scr[88 + i] : 0.0;
    double pen[3] = {0.0, 0.0, 0.0}, viol = 0.0;
    for (int r0 = s0; r0 < s1; r0 += tb) {
        const int k = r0 + t;
        const bool in = k < s1;
        double v[3] = {0.0, 0.0, 0.0}, e[3] = {0.0, 0.0, 0.0};
        if (des.slew) {
            step_slews(a, x, d, alpha, k, in, v);
#pragma unroll
            for (int i = 0; i < 3; i++)
                e[i] = v[i];
            block_scan<3>(e, scr);
        }
#pragma unroll
        for (int i = 0; i < 3; i++)
            if (in && i < des.ng) {
                const int ix = PS_X_G(a.nc, nt, i, k), ge = k == nt - 1 ? des.g_end : 0;
                const double g = des.slew ? carry[i] + e[i] + v[i] : point_at(x, d, alpha, ix);
                gdt[4 * k + des_axis(des, i)] = (R)(des.dtg * g);
                pen[i] += ps_gradient_penalty(des.gmax, ge, 1.0, 1, &g, nullptr, &viol);
                if (grad) {
                    double dg = 0.0, unused = 0.0;
                    if (pgrad)
                        ps_gradient_penalty(des.gmax, ge, mu, 1, &g, &dg, &unused);
                    gp0[ix] = dg;
                }
            }
        if (des.slew && r0 + tb < s1) { /* another round: g at this round's last step */
            if (t == tb - 1)
#pragma unroll
                for (int i = 0; i < 3; i++)
                    scr[88 + i] = carry[i] + e[i] + v[i];
            __syncthreads();
#pragma unroll
            for (int i = 0; i < 3; i++)
                carry[i] = scr[88 + i];
        }
    }
    if (grad && b != 0) /* the block's own designed rows (consecutive in x) */
        for (int q = t; q < des.ng * nt; q += tb)
            a.gpart[(size_t)b * a.n + PS_X_G(a.nc, nt, 0, 0) + q] = 0.0;
    penalty_row(a, pen, viol, scr);
    __syncthreads(); /* scr free */
}

/*
 * The designed axes' penalties at mu = 1 and their largest violation, from
 * the G blocks' rows of a.gpen that waveform_rows left (each over its
 * share): pen[i] the sum over the rows (warp_sum_partials' fixed order,
 * the same bits in every block; 0 past ng), pen[3] the largest
 * violation. A warp a value, from the block's last warp; the caller's
 * barrier makes pen visible (eval_scalars).
 */
__device__ inline void team_penalties(const args &a, int G, double *pen)
{
    const int lane = threadIdx.x & 31, nw = (int)(blockDim.x >> 5);
    for (int i = nw - 1 - (int)(threadIdx.x >> 5); i < 4; i += nw) { /* the last warp first */
        double v = 0.0;
        if (i == 3) {
            for (int b = lane; b < G; b += 32)
                v = fmax(v, a.gpen[(size_t)4 * b + 3]);
            for (int off = 16; off > 0; off /= 2)
                v = fmax(v, __shfl_xor_sync(0xffffffffu, v, off));
        } else if (i < a.des.ng) {
            v = warp_sum_partials(a.gpen + i, G, 4);
        }
        if (lane == 0)
            pen[i] = v;
    }
}

/*
 * ---- the designed waveforms of an evaluation, formed by every block
 * (a.gteam 0: short pulses and the channels kernels; else
 * waveform_totals and waveform_rows) ----
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
    const int nt = a.nt, tb = blockDim.x, t = threadIdx.x;
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
                        buf[q] = dt_slew(des, kappa, xk, xprev);
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
    penalty_row(a, pen, viol, scr);
    __syncthreads(); /* gdt and gp for the whole block; scr free */
}

/*
 * The designed part of a flush of replay (cuda/evaluate.cuh; the channels
 * kernels, and the single-channel one's third axis from i0 = 2: it sums
 * the first two with u and v): per
 * (designed axis i >= i0, staged step r, segment g) the sum over the segment's
 * spins l of r_l,i gth_z,l (the tile's positions rtile [ng][sb], the
 * warp's staged gth_z sgz [PS_GPU_STAGE][PS_GPU_STAGE_LD]; cuda/sums.cuh
 * dot_row), times dt gamma, added to
 * the block's partial dF/dg_i,k; one item per lane, the items
 * it = ((i PS_GPU_STAGE) + r) 2^lgg + g decomposed by shifts (2^lgg
 * segments in a warp; steps r >= nb not staged).
 */
template <typename R>
__device__ __forceinline__ void flush_gradient(const args &a, const R *sgz, const R *rtile, int nb, int lgg,
                                               int sb, int pw, int kseg, int itop, int lane, double *gp,
                                               int i0 = 0)
{
    constexpr int SL = stage_log2<R>::value;
    for (int it = lane; it < ((a.des.ng - i0) << (SL + lgg)); it += 32) {
        const int i = i0 + (it >> (SL + lgg)), r = (it >> lgg) & ((1 << SL) - 1), g = it & ((1 << lgg) - 1);
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
 * block's first tile, stored), and for designed axis c (if below ng) the
 * sums of r_l,c gth_z,l with the tile's positions rtile [ng][sb], times dt
 * gamma, added to the partial dF/dg_c,kk (preset rows: always added). One
 * pass over the spins (sums.cuh sum_dots_row): the bits of a sum_row and a
 * dot_row. A third axis is summed apart (flush_gradient from i0 = 2, the
 * same bits as in one pass): with one axis an item, the item's code is
 * shorter (H100: MG's solve evaluations 4.4% faster, README).
 */
template <typename R>
__device__ __forceinline__ void flush_designed(const args &a, const R *row, const R *z, const R *rtile, int c,
                                               int sb, int kk, bool first, double *gp)
{
    const int nt = a.nt;
    double *dst = gp + (c ? PS_X_V((size_t)nt, 0, kk) : PS_X_U((size_t)nt, 0, kk));
    const double p0 = first ? 0.0 : *dst;
    R out[3];
    if (a.des.ng > c) {
        const R *const rq[2] = {rtile + c * sb, nullptr};
        double *d1 = gp + PS_X_G(1, nt, c, kk);
        const double p1 = *d1;
        sum_dots_row<1>(row, z, rq, sb, out);
        *dst = p0 + (double)out[0];
        *d1 = p1 + a.des.dtg * (double)out[1];
    } else {
        *dst = p0 + (double)sum_row(row, sb);
    }
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
