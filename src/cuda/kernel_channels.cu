/*
 * The persistent kernel's channels instances without designed gradient
 * axes (NCH 1 and 8: cuda/evaluate.cuh), in a translation unit of their
 * own so that ptxas compiles them with flags of their own (meson option
 * channels_register_level): the eight-channel kernel of a universal
 * pulse measured faster with a raised register usage level, the
 * single-channel kernels slower (README, "The channels kernels' register
 * usage level").
 */
#include "cuda/kernel.cuh"

void *ps_gpu::channels_kernel_ptr(int precision, int regcap, int kclass)
{
    const int channels = PS_GPU_CLASS_CHANNELS(kclass);
    return precision == PS_PRECISION_DOUBLE ? channels_kernel_of<double, 0>(regcap, channels)
                                            : channels_kernel_of<float, 0>(regcap, channels);
}
