/*
 * The persistent kernel's entry points (the kernel itself: cuda/kernel.cuh)
 * and its single-channel instances without designed gradient axes; the
 * channels kernels are cuda/kernel_channels.cu's, those with designed axes
 * cuda/kernel_designed.cu's.
 */
#include <cuda_runtime.h>

#include "cuda/kernel.cuh"

extern "C" {
#include "common/log.h"
}

using namespace ps_gpu;

template <typename R> static void *kernel_ptr(int regcap, int kclass)
{
    if (kclass == PS_GPU_NOGRAD)
        return regcap ? (void *)persistent_solve_kernel<R, 2, 0, 0, GR_NONE>
                      : (void *)persistent_solve_kernel<R, 1, 0, 0, GR_NONE>;
    if (kclass == PS_GPU_STAGED && sizeof(R) == sizeof(float))
        return regcap ? (void *)persistent_solve_kernel<float, 2, 0, 0, GR_STAGED>
                      : (void *)persistent_solve_kernel<float, 1, 0, 0, GR_STAGED>;
    return regcap ? (void *)persistent_solve_kernel<R, 2, 0, 0> : (void *)persistent_solve_kernel<R, 1, 0, 0>;
}

extern "C" void *ps_gpu_kernel_ptr(int precision, int regcap, int kclass)
{
    if (kclass & PS_GPU_DESIGNED)
        return designed_kernel_ptr(precision, regcap, kclass);
    if (PS_GPU_CLASS_CHANNELS(kclass))
        return channels_kernel_ptr(precision, regcap, kclass);
    return precision == PS_PRECISION_DOUBLE ? kernel_ptr<double>(regcap, kclass)
                                            : kernel_ptr<float>(regcap, kclass);
}

extern "C" int ps_gpu_kernel_attrs(int precision, int regcap, int kclass, ps_gpu_kernel_info *info)
{
    cudaFuncAttributes fa;
    void *k = ps_gpu_kernel_ptr(precision, regcap, kclass);
    if (cudaFuncGetAttributes(&fa, k) != cudaSuccess) {
        cudaGetLastError();
        return PS_ERR_NO_GPU;
    }
    info->registers = fa.numRegs;
    info->local_bytes = (int)fa.localSizeBytes;
    info->static_smem = (int)fa.sharedSizeBytes;
    info->max_threads = fa.maxThreadsPerBlock;
    return PS_CONVERGED;
}

/* The persistent kernel on a set-up context: one cooperative launch. */
int ps_gpu::launch_persistent(context *c, const ps_options *o, double *ms)
{
    int st = PS_CONVERGED;
    cudaEvent_t ev0 = NULL, ev1 = NULL;
    void *k = ps_gpu_kernel_ptr(c->precision, c->cfg.regcap, c->kclass);
    void *params[] = {&c->a};
    CUDA_TRY(o, cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c->smem),
             PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaEventCreate(&ev0), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaEventCreate(&ev1), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaEventRecord(ev0, 0), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaLaunchCooperativeKernel(k, dim3(c->cfg.grid), dim3(c->cfg.block), params, c->smem, 0),
             PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaEventRecord(ev1, 0), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaDeviceSynchronize(), PS_ERR_GPU_LAUNCH);
    event_ms(ev0, ev1, ms);
out:
    if (ev0)
        cudaEventDestroy(ev0);
    if (ev1)
        cudaEventDestroy(ev1);
    return st;
}

