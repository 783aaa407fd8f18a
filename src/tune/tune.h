/*
 * What the tuning of the solo launch shape (tune/tune.c, ps_gpu_tune) and
 * of a batch's team size (tune/tune_batch.c, ps_gpu_tune_batch) share, and
 * the batch's reading of its tuned team size (opt/batch.c).
 */
#ifndef PS_SRC_TUNE_TUNE_H
#define PS_SRC_TUNE_TUNE_H

#include <stddef.h>

#include "persolve.h"
#include "persolve_gpu.h"
#include "tune/cache.h"

/* The options (o, or the defaults) into *opt and the settings (s_in, or
 * the defaults) into *s, validated: PS_ERR_OPTION (logged through opt,
 * naming the field) when not. */
int ps_tune_take(const ps_options *o, const ps_tune_settings *s_in, ps_options *opt, ps_tune_settings *s);

/* A report's head for key k: device 0's SMs and description, k as text
 * and its cache file (empty without a cache directory). PS_ERR_NO_GPU
 * without a device. */
int ps_tune_describe(const ps_tune_key *k, int *sms, char *device, size_t dlen, char *key_text, size_t klen,
                     char *path, size_t plen);

/* Write e (its shape filled in; p's sizes and the date added here) for key
 * k to path, the report's cache file: PS_CONVERGED, or PS_ERR_FILE
 * (logged) when it cannot be written or path is empty. */
int ps_tune_store(const ps_problem *p, const ps_options *o, const ps_tune_key *k, ps_tune_entry *e,
                  const char *path);

/*
 * The tune cache's shape for a batch of `problems` problems of p's size
 * class at o's precision: the entry's blocks per team (> 0), with *block
 * (its threads per block), *e and path[len] (its file) filled, when the
 * entry is valid,
 * its block is o's forced gpu_block (if one is forced) and fits on an SM,
 * and its team fits in the co-resident blocks of `sms` SMs (and is a
 * cluster's size when the teams must be clusters); else 0, the reason
 * logged through o (a missing file as info, the rest as warnings).
 */
int ps_tune_cached_shape(const ps_problem *p, const ps_options *o, size_t problems, int sms, int *block,
                         ps_tune_entry *e, char *path, size_t len);

/* The batch kernel's block by the heuristic: g's gpu_block if forced;
 * else, when `single` (every problem of the single-channel kernels:
 * ps_gpu_channels 0, designed axes or not), PS_GPU_BATCH_SHORT_THREADS if
 * the longest problem has at most PS_GPU_BATCH_SHORT_NT steps (`nt`) and
 * g does not force cluster teams (at most 8 blocks: teams of 1024
 * threads, not measured), else PS_GPU_BATCH_SMALL_THREADS; else
 * PS_GPU_DEFAULT_THREADS. */
int ps_tune_batch_block(const ps_gpu_options *g, int single, size_t nt);

/* The batch kernel's blocks per SM with blocks of `block` threads, as a
 * batch (ps_batch_start) and its tuning count them: PS_ERR_GPU_LAUNCH
 * (logged) when no block fits on an SM. */
int ps_tune_batch_kernel_fit(const ps_options *o, int block, int *bps);

/*
 * The heuristic's blocks per team for a batch of `problems` problems on a
 * batch kernel with `resident` co-resident blocks of `block` threads
 * (README "Batches"): the co-resident blocks over the problems, rounded
 * down, and at least 2 (1 when only one block fits): teams of one block
 * were slower than teams of two in every batch measured (256 T, 120
 * ptx2d), though they leave some problems queued. When `single` (every
 * problem on the single-channel kernels) at least
 * PS_TUNE_TEAM_SINGLE_THREADS threads a team (8 blocks of 256, 16 of 128), but no
 * more blocks than the largest problem (`ns` spins) has tiles of
 * `spins_per_tile` spins (32 when 0: the single-channel kernels' own),
 * and at most `resident`: smaller teams of those kernels were slower at
 * S and T for every batch size measured, though more problems then wait
 * in the queue. In a batch of mixed sizes the largest problem sets the
 * cap. 1 when `resident` < 1.
 */
#define PS_TUNE_TEAM_SINGLE_THREADS 2048
int ps_tune_team_heuristic(int resident, size_t problems, int block, int single, size_t ns, int spins_per_tile);

/* The heuristic's team size under the GPU options `g`: their forced
 * spins per tile, and at most 8 blocks when the teams must be
 * thread-block clusters (the portable cluster size). */
int ps_tune_team_default(const ps_gpu_options *g, int resident, size_t problems, int block, int single, size_t ns);

#endif /* PS_SRC_TUNE_TUNE_H */
