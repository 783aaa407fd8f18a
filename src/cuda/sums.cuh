/*
 * Fixed-order sums of the GPU solve: within a block (warp shuffles, then
 * the warps in order) and over the blocks' partials (one warp, the same
 * order in every block). No atomics: the same launch shape gives the same
 * bits.
 */
#ifndef PS_SRC_CUDA_SUMS_CUH
#define PS_SRC_CUDA_SUMS_CUH

namespace ps_gpu {

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

/*
 * The sums over a segment's sb spins of the replay's staged values
 * (cuda/evaluate.cuh), in spin order: row (16-byte aligned) holds one
 * value per spin. Where sb is a multiple of 4 the values come 4 at a time
 * (load4: one 16-byte load in float32, two in float64), the same sums as
 * one value at a time.
 */
__device__ __forceinline__ void load4(const float *p, float v[4])
{
    const float4 q = *reinterpret_cast<const float4 *>(p);
    v[0] = q.x;
    v[1] = q.y;
    v[2] = q.z;
    v[3] = q.w;
}
__device__ __forceinline__ void load4(const double *p, double v[4])
{
    const double2 q0 = reinterpret_cast<const double2 *>(p)[0], q1 = reinterpret_cast<const double2 *>(p)[1];
    v[0] = q0.x;
    v[1] = q0.y;
    v[2] = q1.x;
    v[3] = q1.y;
}

/* f(l, row[l]) for l = 0 .. sb - 1 in order */
template <typename R, typename F> __device__ __forceinline__ void each_value(const R *row, int sb, F f)
{
    if ((sb & 3) == 0) {
        for (int l = 0; l < sb; l += 4) {
            R v[4];
            load4(row + l, v);
#pragma unroll
            for (int e = 0; e < 4; e++)
                f(l + e, v[e]);
        }
    } else {
        for (int l = 0; l < sb; l++)
            f(l, row[l]);
    }
}

/* f(l, x[l], y[l]) for l = 0 .. sb - 1 in order (two rows, both aligned) */
template <typename R, typename F> __device__ __forceinline__ void each_pair(const R *x, const R *y, int sb, F f)
{
    if ((sb & 3) == 0) {
        for (int l = 0; l < sb; l += 4) {
            R u[4], v[4];
            load4(x + l, u);
            load4(y + l, v);
#pragma unroll
            for (int e = 0; e < 4; e++)
                f(l + e, u[e], v[e]);
        }
    } else {
        for (int l = 0; l < sb; l++)
            f(l, x[l], y[l]);
    }
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

/* sum_l row[l] */
template <typename R> __device__ __forceinline__ R sum_row(const R *row, int sb)
{
    R sum = 0;
    each_value(row, sb, [&](int, R v) { sum += v; });
    return sum;
}

/* sum_l r[l] row[l] with fused multiply-adds (r: a row of the tile's
 * positions) */
template <typename R> __device__ __forceinline__ R dot_row(const R *r, const R *row, int sb)
{
    R sum = 0;
    each_pair(r, row, sb, [&](int, R q, R v) { sum = fmar(q, v, sum); });
    return sum;
}

/*
 * sum_l row[l] and, for the ND (0..2) position rows r[q], sum_l r[q][l] z[l]
 * in one pass over the spins: out[0] the sum, out[1 + q] the dots. Each is
 * summed in spin order, as sum_row and dot_row sum it (the same bits); the
 * sums are independent, so that their latencies overlap. Segments of 32
 * spins (the common tile) take the 4-spin groups fully unrolled: no loop
 * to count in a flush item (H100: the designed kernel's solve evaluation
 * 4.4% faster with flush_designed's single axis, README).
 */
template <int ND, typename R>
__device__ __forceinline__ void sum_dots_row(const R *row, const R *z, const R *const (&r)[2], int sb, R out[3])
{
    R sum = 0, dot[2] = {0, 0};
/* spins l .. l + 3 in 16-byte loads; a macro, not a lambda: a lambda
 * (captures by reference) moved the designed kernel's scheduling
 * throughout (H100: 0.887x against this form's 0.890x, README) */
#define PS_SUM_DOTS_GROUP(l)                                                                                       \
    do {                                                                                                           \
        R v[4], zv[4], p[2][4];                                                                                    \
        load4(row + (l), v);                                                                                       \
        if (ND)                                                                                                    \
            load4(z + (l), zv);                                                                                    \
        _Pragma("unroll") for (int q = 0; q < ND; q++) load4(r[q] + (l), p[q]);                                    \
        _Pragma("unroll") for (int e = 0; e < 4; e++)                                                              \
        {                                                                                                          \
            sum += v[e];                                                                                           \
            _Pragma("unroll") for (int q = 0; q < ND; q++) dot[q] = fmar(p[q][e], zv[e], dot[q]);                  \
        }                                                                                                          \
    } while (0)
    if (sb == 32) { /* the common segment: no loop to count */
#pragma unroll
        for (int l = 0; l < 32; l += 4)
            PS_SUM_DOTS_GROUP(l);
    } else if ((sb & 3) == 0) {
        for (int l = 0; l < sb; l += 4)
            PS_SUM_DOTS_GROUP(l);
    } else {
        for (int l = 0; l < sb; l++) {
            sum += row[l];
#pragma unroll
            for (int q = 0; q < ND; q++)
                dot[q] = fmar(r[q][l], z[l], dot[q]);
        }
    }
#undef PS_SUM_DOTS_GROUP
    out[0] = sum;
    out[1] = dot[0];
    out[2] = dot[1];
}

/* The blocks that hold update dots: those with a chunk of 32 steps. */
__host__ __device__ inline int dot_blocks(int nt, int G)
{
    const int chunks = (nt + 31) / 32;
    return chunks < G ? chunks : G;
}

} // namespace ps_gpu

#endif /* PS_SRC_CUDA_SUMS_CUH */
