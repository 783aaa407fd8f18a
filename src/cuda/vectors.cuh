/*
 * The vector phases of the GPU solve, on the first a.gv blocks: the
 * accepted step applied and the L-BFGS direction formed from the stored
 * pairs (opt/lbfgs.h gives the coefficients).
 */
#ifndef PS_SRC_CUDA_VECTORS_CUH
#define PS_SRC_CUDA_VECTORS_CUH

#include "cuda/args.cuh"

namespace ps_gpu {

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
    for (int i = team_rank(a) * blockDim.x + threadIdx.x; i < a.n; i += a.gv * blockDim.x) {
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
    for (int i = team_rank(a) * blockDim.x + threadIdx.x; i < n; i += a.gv * blockDim.x) {
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

#endif /* PS_SRC_CUDA_VECTORS_CUH */
