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

/* The blocks that hold update dots: those with a chunk of 32 steps. */
__host__ __device__ inline int dot_blocks(int nt, int G)
{
    const int chunks = (nt + 31) / 32;
    return chunks < G ? chunks : G;
}

} // namespace ps_gpu

#endif /* PS_SRC_CUDA_SUMS_CUH */
