/*
 * CUDA device discovery and the GPU backend's entries. The persistent
 * cooperative solve kernel is built on top of these (see cuda/gpu.h).
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "cuda/launch.h"

extern "C" {
#include "common/log.h"
#include "cuda/gpu.h"
}

extern "C" int ps_gpu_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no device" error */
        return 0;
    }
    return n;
}

extern "C" int ps_gpu_device_current(void)
{
    int d = 0;
    if (cudaGetDevice(&d) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return d;
}

extern "C" void ps_gpu_device_use(int index)
{
    if (cudaSetDevice(index) != cudaSuccess)
        cudaGetLastError(); /* its set-ups then fail with their own errors */
}

extern "C" int ps_gpu_device_describe(int index, char *buf, size_t len)
{
    if (index < 0 || index >= ps_gpu_device_count()) {
        if (buf && len)
            snprintf(buf, len, "no GPU %d", index);
        return PS_ERR_NO_GPU;
    }
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, index) != cudaSuccess)
        return PS_ERR_NO_GPU;
    int coop = 0;
    cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, index);
    snprintf(buf, len, "%s, sm_%d%d, %d SMs, %.1f GiB, cooperative %s",
             prop.name, prop.major, prop.minor, prop.multiProcessorCount,
             (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0),
             coop ? "yes" : "no");
    return PS_CONVERGED;
}

extern "C" int ps_gpu_device_identity(int index, ps_gpu_identity *id)
{
    cudaDeviceProp prop;
    memset(id, 0, sizeof *id);
    if (index < 0 || index >= ps_gpu_device_count())
        return PS_ERR_NO_GPU;
    if (cudaGetDeviceProperties(&prop, index) != cudaSuccess ||
        cudaDriverGetVersion(&id->driver) != cudaSuccess) {
        cudaGetLastError();
        return PS_ERR_NO_GPU;
    }
    snprintf(id->name, sizeof id->name, "%.*s", (int)sizeof id->name - 1, prop.name);
    id->cc_major = prop.major;
    id->cc_minor = prop.minor;
    id->sms = prop.multiProcessorCount;
    return PS_CONVERGED;
}

extern "C" int ps_gpu_usable(const ps_options *o)
{
    PS_RETURN_ERROR_IF(o, ps_gpu_device_count() < 1, PS_ERR_NO_GPU,
                       "no CUDA device is present");
    int coop = 0;
    cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0);
    PS_RETURN_ERROR_IF(o, !coop, PS_ERR_GPU_UNSUPPORTED,
                       "device 0 does not support cooperative launch");
    ps_gpu_kernel_info ki;
    PS_RETURN_ERROR_IF(o, ps_gpu_kernel_attrs(PS_PRECISION_SINGLE, 0, 0, &ki) != PS_CONVERGED,
                       PS_ERR_GPU_UNSUPPORTED,
                       "device 0 cannot run this build's kernels (no kernel image for its "
                       "architecture; rebuild with -Dgpu_arch)");
    return PS_CONVERGED;
}

