/*
 * The device side of one GPU run (cuda/run.h), as the CUDA sources that
 * drive it see it: cuda/run.cu launches its own persistent kernel, and a
 * batch (cuda/batch.cu) hands it to a team of its kernel.
 */
#ifndef PS_SRC_CUDA_RUN_CUH
#define PS_SRC_CUDA_RUN_CUH

#include "cuda/context.cuh"

extern "C" {
#include "cuda/run.h"
}

struct ps_gpu_run {
    ps_gpu::context c;
    ps_options o;            /* copied: the log sink for CUDA errors */
    ps_gpu_ctl *ctl;         /* mapped pinned control block (host address) */
    unsigned long long *cw;  /* [PS_GPU_CW_LEN] device words */
    ps_gpu::timed_stream ks;         /* the kernel's stream, the events that time its launches */
    cudaStream_t copies;     /* transfers while a kernel is paused on ks.s */
    int launched;            /* a kernel launched and not yet seen to end (set by the
                                worker before its launch, cleared after its sync; read by
                                a checkpoint under the run's lock: atomic loads/stores) */
    double kernel_seconds;   /* CUDA-event time of all launches */
};

#endif /* PS_SRC_CUDA_RUN_CUH */
