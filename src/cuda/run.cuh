/*
 * The device side of one GPU run (cuda/run.h), as the CUDA sources that
 * drive it see it: cuda/run.cu launches its own persistent kernel, and a
 * batch (cuda/batch.cu) hands it to a team of its kernel.
 */
#ifndef PS_SRC_CUDA_RUN_CUH
#define PS_SRC_CUDA_RUN_CUH

#include "cuda/context.cuh"

extern "C" {
#include "cuda/ranks.h"
#include "cuda/run.h"
}

struct ps_gpu_run {
    ps_gpu::context c;
    ps_options o;            /* copied: the log sink for CUDA errors */
    ps_gpu_ctl *ctl, *dctl;  /* mapped pinned control block (host and device addresses) */
    unsigned long long *cw;  /* [PS_GPU_CW_LEN] device words */
    ps_gpu::timed_stream ks; /* the kernel's stream, the events that time its launches (created
                                at the first launch); transfers, also while a kernel is paused
                                on it, go on the calling thread's default stream */
    int launched;            /* a kernel launched and not yet seen to end (set by the
                                worker before its launch, cleared after its sync; read by
                                a checkpoint under the run's lock: atomic loads/stores) */
    double kernel_seconds;   /* CUDA-event time of all launches */
    char *stage;             /* host image of the context's transfer range (run.cu), or NULL */
    /* several GPUs (cuda/ranks.h): this run is rank 0, its spins the first share, and
       holds the other ranks' runs and the exchange; each rank's run its own device */
    int device;              /* the device of this run's context and kernel */
    int nranks;              /* 1: one GPU */
    ps_gpu_run *peer[PS_MAX_RANKS]; /* ranks 1 .. nranks - 1 (rank 0: this run) */
    ps_gpu_ranks *ranks;     /* the exchange, or NULL */
};

#endif /* PS_SRC_CUDA_RUN_CUH */
