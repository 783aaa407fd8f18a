/*
 * The persistent kernel's instances with designed gradient axes (DG 1:
 * cuda/gradient.cuh), in a translation unit of their own so that ptxas
 * compiles them with flags of their own (meson option
 * designed_register_level). Their spin loops run at the 128-register cap
 * (MINB 1) with a few values spilled, and how ptxas lays those registers
 * out decides their speed (README, "Register pressure decides the
 * designed spin loops", "The designed kernels' register usage level").
 */
#include "cuda/kernel.cuh"

using namespace ps_gpu;

template <typename R> static void *designed_of(int regcap, int kclass)
{
    if (PS_GPU_CLASS_CHANNELS(kclass))
        return channels_kernel_of<R, 1>(regcap, PS_GPU_CLASS_CHANNELS(kclass));
    if ((kclass & PS_GPU_STAGED) && sizeof(R) == sizeof(float)) /* float64 takes its rows from global memory */
        return regcap ? (void *)persistent_solve_kernel<float, 2, 0, 1, GR_STAGED>
                      : (void *)persistent_solve_kernel<float, 1, 0, 1, GR_STAGED>;
    return regcap ? (void *)persistent_solve_kernel<R, 2, 0, 1> : (void *)persistent_solve_kernel<R, 1, 0, 1>;
}

void *ps_gpu::designed_kernel_ptr(int precision, int regcap, int kclass)
{
    return precision == PS_PRECISION_DOUBLE ? designed_of<double>(regcap, kclass) : designed_of<float>(regcap, kclass);
}
