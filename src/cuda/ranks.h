/*
 * Several GPUs on one problem, the host side (cuda/ranks.cuh has the
 * kernel's): which devices a run's ranks take, how its spins are shared
 * among them, and the exchange that connects their kernels: an NCCL
 * communicator over the ranks' devices with one symmetric window each
 * (NCCL's device API: the kernels store their rows into the peers'
 * windows and meet at its LSA barrier), or, where ranks share one device
 * (PERSOLVE_GPU_DEVICES repeating an ordinal: a test of the ranks'
 * logic on one GPU), one buffer and a barrier word in its memory.
 * libnccl.so.2 is loaded when a run first needs it, so that the library
 * and the tools run where NCCL is not installed.
 */
#ifndef PS_SRC_CUDA_RANKS_H
#define PS_SRC_CUDA_RANKS_H

#include <stddef.h>

#include "model/problem.h"
#include "persolve.h"
#include "persolve_gpu.h"

/* The most ranks of one run. */
#define PS_MAX_RANKS PS_GPU_MAX_GPUS

typedef struct ps_gpu_ranks ps_gpu_ranks;

/*
 * The devices of a run's ranks: o->gpu.gpus ranks (0 or 1: one, the
 * current device, *n = 1; -1: every visible device) on devices 0..n-1,
 * or, when PERSOLVE_GPU_DEVICES is set (a comma-separated list of device
 * ordinals, which may repeat: "0,0" two ranks on device 0), on those.
 * PS_ERR_OPTION (logged, naming the option or the variable) for more
 * ranks than devices, a bad list or more than PS_MAX_RANKS.
 */
int ps_gpu_rank_devices(const ps_options *o, int dev[PS_MAX_RANKS], int *n);

/* 1 when PERSOLVE_GPU_EXCHANGE asks for the exchange even for one rank. */
int ps_gpu_exchange_forced(void);

/*
 * The spins of rank r of n: [*j0, *j0 + *count), contiguous equal shares
 * in rank order (the ranks' GPUs are one model), every share at least one
 * spin (ns >= n).
 */
void ps_gpu_rank_share(size_t ns, int n, int r, size_t *j0, size_t *count);

/*
 * The exchange of n ranks on devices dev[] whose rows hold `stride`
 * doubles each (cuda/ranks.cuh). The devices must be one GPU model
 * (equal shares, one launch shape; else PS_ERR_OPTION). Devices that
 * repeat share one buffer on that device (every rank must then be on the
 * same device); distinct devices get an NCCL communicator (PS_ERR_NO_GPU,
 * logged, when libnccl.so.2 cannot be loaded or NCCL fails).
 * PERSOLVE_GPU_EXCHANGE forces the transport: nccl (also for one rank: a
 * one-rank communicator) or device (ranks on one device). Leaves the
 * current device as it was.
 */
int ps_gpu_ranks_create(const ps_options *o, const int *dev, int n, size_t stride, ps_gpu_ranks **out);
void ps_gpu_ranks_free(ps_gpu_ranks *x);

/* 1 when two or more ranks share one device (their kernels side by side). */
int ps_gpu_ranks_shared(const ps_gpu_ranks *x);

#endif /* PS_SRC_CUDA_RANKS_H */
