/*
 * The persistent kernel's instances with designed gradient axes (DG 1:
 * cuda/gradient.cuh), in a translation unit of their own so that ptxas
 * compiles them with flags of their own: PS_GPU_DESIGNED_PTXAS in
 * src/meson.build. Their spin loops run at the 128-register cap
 * (MINB 1) with a few values spilled, and how ptxas lays those registers
 * out decides their speed (README, "Register pressure decides the
 * designed spin loops"); the kernels without designed axes keep ptxas's
 * defaults, which measured fastest for them.
 */
#include "cuda/kernel.cuh"

void *ps_gpu::designed_kernel_ptr(int precision, int regcap, int kclass)
{
    if (precision == PS_PRECISION_DOUBLE)
        return kernel_ptr_of<double, 1>(regcap, PS_GPU_CLASS_CHANNELS(kclass));
    if (kclass & PS_GPU_STAGED)
        return regcap ? (void *)persistent_solve_kernel<float, 2, 0, 1, GR_STAGED>
                      : (void *)persistent_solve_kernel<float, 1, 0, 1, GR_STAGED>;
    return kernel_ptr_of<float, 1>(regcap, PS_GPU_CLASS_CHANNELS(kclass));
}
