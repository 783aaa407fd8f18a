/*
 * The benchmark's phase profile: a device buffer of ns per phase that
 * block 0 of the persistent kernel adds to when it is enabled
 * (PS_PROF_*, cuda/launch.h).
 */
#include <cuda_runtime.h>
#include <string.h>

#include "cuda/launch.h"

static unsigned long long *prof_dev = NULL;
static int prof_device; /* the device prof_dev is on */

extern "C" int ps_gpu_profile_enable(int on)
{
    if (on && !prof_dev) {
        if (cudaMalloc(&prof_dev, PS_GPU_PROF * sizeof(unsigned long long)) != cudaSuccess) {
            cudaGetLastError();
            prof_dev = NULL;
            return PS_ERR_GPU_MEMORY;
        }
        cudaMemset(prof_dev, 0, PS_GPU_PROF * sizeof(unsigned long long));
        cudaGetDevice(&prof_device);
    } else if (!on && prof_dev) {
        cudaFree(prof_dev);
        prof_dev = NULL;
    }
    return PS_CONVERGED;
}

extern "C" int ps_gpu_profile_read(unsigned long long out[PS_GPU_PROF])
{
    if (!prof_dev)
        return PS_ERR_NULL;
    cudaMemcpy(out, prof_dev, PS_GPU_PROF * sizeof(unsigned long long), cudaMemcpyDeviceToHost);
    cudaMemset(prof_dev, 0, PS_GPU_PROF * sizeof(unsigned long long));
    return PS_CONVERGED;
}

/* The buffer, for a run set up on its device (else NULL: a rank of a run
 * on several GPUs elsewhere). */
extern "C" unsigned long long *ps_gpu_profile_buffer(void)
{
    int dev = 0;
    cudaGetDevice(&dev);
    return dev == prof_device ? prof_dev : NULL;
}

