/*
 * persolve GPU API: the launch shape of the persistent kernel, the tune
 * cache and the tuning that fills it. This header is apart from the stable
 * API of persolve.h: what it holds may change with the kernel (the way
 * zstd keeps its ZSTD_STATIC_LINKING_ONLY section apart). No CUDA types
 * appear here.
 */
#ifndef PERSOLVE_GPU_H
#define PERSOLVE_GPU_H

#include "persolve.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* GPU options                                                              */
/* ------------------------------------------------------------------------ */

/** The most GPUs of one solve (ps_gpu_options.gpus). */
#define PS_GPU_MAX_GPUS 16

/** A batch team's barrier (ps_gpu_options.batch_team_barrier). */
enum {
    PS_TEAM_BARRIER_AUTO = 0,
    PS_TEAM_BARRIER_RANGE = 1,
    PS_TEAM_BARRIER_CLUSTER = 2,
};

/*
 * The GPU launch shape (README "Tuning"), given to a solve through
 * ps_options.gpu. Each gpu_* field set forces that part of the shape, the
 * heuristic chooses the rest; with none set, the shape comes from the tune
 * cache when tune_cache is 1 and the cache holds a valid entry for this
 * GPU, build and problem-size class, else from the heuristic. Checked by
 * ps_options_validate() (PS_ERR_OPTION, logged with the field name).
 */
typedef struct ps_gpu_options {
    int tune_cache;          ///< 1: read the tune cache written by `persolve tune` /
                             ///< ps_gpu_tune; 0: never (default 1)
    int gpu_block;           ///< threads per block: 0 = automatic (512; a batch: the tune
                             ///< cache's batch entry, else for problems that all run the
                             ///< single-channel kernels 256, or 128 when none has more
                             ///< than 512 steps and the teams are not clusters: README
                             ///< "Batches"), else a multiple of 32 in 32..512 (default 0)
    int gpu_spins_per_tile;  ///< spins per evaluation tile SB; the block's threads split
                             ///< time into block / SB segments: 0 = automatic, else 1, 2,
                             ///< 4, 8, 16 or 32, at most the block size (default 0)
    int gpu_max_registers;   ///< register cap per thread of the kernel build: 0 =
                             ///< automatic (128), 128 or 64 (default 0)
    int gpu_blocks_per_sm;   ///< blocks per SM in the cooperative grid: 0 = automatic,
                             ///< else 1..32; more than fit is PS_ERR_GPU_LAUNCH (default 0)
    int batch_team_blocks;   ///< blocks per team of a batch (ps_batch_*): 0 = automatic (the
                             ///< tune cache's, ps_gpu_tune_batch, when tune_cache is 1 and
                             ///< the problems share a size class; else the heuristic of
                             ///< README "Batches"), else 1..the co-resident blocks (default 0)
    int gpu_grid;            ///< blocks of the cooperative grid: 0 = automatic (gpu_blocks_per_sm
                             ///< times the SMs), else 1..the co-resident blocks; a batch's
                             ///< team shape as a solo solve (ps_batch_shape) (default 0)
    int batch_team_barrier;  ///< a batch team's barrier (README "Batches"): PS_TEAM_BARRIER_AUTO
                             ///< (0: the range barrier), PS_TEAM_BARRIER_RANGE (a barrier
                             ///< over the team's blocks in device memory) or
                             ///< PS_TEAM_BARRIER_CLUSTER (the team a thread-block cluster,
                             ///< cluster.sync(): teams of 2..8 blocks, sm_90) (default 0)
    int gpus;                ///< GPUs one solve's spins are split over (README "Several GPUs"):
                             ///< 0 or 1 = one (the current device), N >= 2 = devices 0..N-1,
                             ///< -1 = every visible device; an asynchronous run or
                             ///< solve_persistent (ps_eval, ps_simulate and batches use one)
                             ///< (default 0)
    int reserved_int;        ///< must be zero
    int64_t reserved[3];     ///< must be zero
} ps_gpu_options;

/**
 * The shape problem i of a batch (persolve.h, ps_batch_*) runs with, as
 * the options that force a solo solve to it: *gpu (tune_cache 0, gpu_grid
 * = the team's blocks, gpu_block, gpu_spins_per_tile, gpu_max_registers;
 * all automatic on the CPU backend) and *threads (1; either may be NULL).
 * solve_persistent with these (and the batch's other options) gives the
 * problem's iterates bit for bit. PS_ERR_STATE while the problem is not
 * set up on the GPU (before ps_batch_start, or it failed there).
 */
struct ps_batch;
int ps_batch_shape(const struct ps_batch *b, size_t i, ps_gpu_options *gpu, int *threads);

/** Fill *g with the documented defaults (tune_cache 1, the rest 0): the
 * same as ps_options.gpu NULL. */
void ps_gpu_options_default(ps_gpu_options *g);

/* ------------------------------------------------------------------------ */
/* Tuning the GPU launch shape                                              */
/* ------------------------------------------------------------------------ */

/*
 * A cooperative kernel can only use as many blocks as fit on the GPU at
 * once, and the persistent kernel's register count is the maximum over all
 * its phases: the launch shape decides its speed. ps_gpu_tune() measures
 * the candidate shapes on a problem and stores the fastest in the tune
 * cache, which solve_persistent() reads (ps_gpu_options.tune_cache). The cache
 * lives in $PERSOLVE_CACHE_DIR, else $XDG_CACHE_HOME/persolve, else
 * ~/.cache/persolve; its entries are keyed by GPU name, compute capability,
 * driver, build id and problem-size class (README "Tuning").
 */

/** One launch shape of the persistent kernel and what it costs. */
typedef struct ps_tune_shape {
    int block;            ///< threads per block
    int spins_per_tile;   ///< spins per evaluation tile SB
    int segments;         ///< time segments per tile, block / SB
    int max_registers;    ///< register cap of the kernel build: 128 or 64
    int blocks_per_sm;    ///< blocks per SM in the cooperative grid
    int grid;             ///< blocks in the cooperative grid (blocks_per_sm x SMs)
    int registers;        ///< registers per thread of that kernel build
    int local_bytes;      ///< local memory per thread, bytes (the stack of the one-thread decisions and any register spills)
    int static_smem;      ///< static shared memory per block, bytes
    int dynamic_smem;     ///< dynamic shared memory per block, bytes
    int resident_blocks;  ///< blocks of this shape that fit on one SM at once
                          ///< (cudaOccupancyMaxActiveBlocksPerMultiprocessor)
    int status;           ///< ps_status of its last run: >= 0 or PS_ERR_LINE_SEARCH
                          ///< measured, other negatives failed
    int64_t iterations;   ///< iterations of its last timed run
    int64_t evaluations;  ///< evaluations of its last timed run
    double seconds_per_iteration; ///< median over the timed runs of the solve kernel's
                                  ///< time / iterations, s (NaN if it failed)
    double f;             ///< f at the end of its last timed run
} ps_tune_shape;

/** Called by ps_gpu_tune after measuring shape `index` of `count`. */
typedef void (*ps_tune_fn)(void *user, const ps_tune_shape *shape, size_t index,
                           size_t count);

/** The iterations per copy of ps_gpu_tune_batch when its settings are NULL
 * (with 20, the solo tune's default, the problems of a 256-T batch ended
 * before the next ones were set up, and the tune chose a shape 13% slower
 * over 50 iterations: README "Tuning"). */
#define PS_TUNE_BATCH_ITERATIONS 50

typedef struct ps_tune_settings {
    int iterations;       ///< L-BFGS iterations of every timed run (gtol = ftol = 0),
                          ///< 1..1000000 (default 20; a batch's tune with NULL
                          ///< settings PS_TUNE_BATCH_ITERATIONS)
    int repeats;          ///< timed runs per shape after one warm-up run; the median
                          ///< counts, 1..1000 (default 5)
    int write_cache;      ///< 1: store the fastest shape in the tune cache (default 1)
    ps_tune_fn measured;  ///< progress callback (default NULL)
    void *user;           ///< passed to measured
    int64_t reserved[4];  ///< must be zero
} ps_tune_settings;

/** Fill *s with the documented defaults. */
void ps_tune_settings_default(ps_tune_settings *s);

typedef struct ps_tune_report {
    ps_tune_shape *shapes;  ///< [count] the candidates in the order measured (owned)
    size_t count;           ///< number of candidates
    int best;               ///< index of the fastest measured shape, -1 if none ran
    int heuristic;          ///< index of the shape the heuristic picks (no cache)
    int cached;             ///< index of the shape the tune cache held before this
                            ///< run, -1 if none was valid (or o->gpu->tune_cache is 0)
    int cache_written;      ///< 1 if the fastest shape was written to cache_path
    int sms;                ///< streaming multiprocessors of the GPU
    char device[128];       ///< the GPU, as ps_gpu_describe
    char cache_key[320];    ///< the cache key as text
    char cache_path[1024];  ///< the cache file of this GPU, build and size class
} ps_tune_report;

/**
 * Measure every candidate launch shape of the persistent kernel on p:
 * blocks of 128, 256 and 512 threads; both register caps (64 only when
 * the uncapped build needs more than 64 registers); spins per tile 1..32
 * leaving at least the segments the problem's relaxation needs and no
 * more segments than time steps (except at 32 spins per tile); blocks per
 * SM min(resident, 2) and, where more fit, all resident blocks; plus the
 * heuristic's and the cached shape (README "Tuning"). Each shape runs one
 * warm-up solve and s->repeats timed solves of s->iterations iterations
 * from the problem's x0 with o's precision and memory (o's limits,
 * tolerances and o->gpu's gpu_* fields are not used; its tune_cache 0 ignores the
 * cached shape). o and s may be NULL (defaults). r receives the table
 * (ps_tune_report_free), also when the cache cannot be written.
 * Returns PS_CONVERGED (0) when at least one shape ran (and, if asked, the
 * fastest was written to the cache); PS_ERR_NULL; PS_ERR_OPTION (o or s
 * invalid, logged); PS_ERR_NO_GPU or PS_ERR_GPU_UNSUPPORTED (no usable
 * GPU); PS_ERR_NO_MEMORY; PS_ERR_GPU_LAUNCH (no shape ran: see each
 * shape's status); PS_ERR_FILE (all measured, but the cache file could
 * not be written: reason logged, the report is complete).
 */
int ps_gpu_tune(const ps_problem *p, const ps_options *o, const ps_tune_settings *s,
                ps_tune_report *r);

/** Release what a report owns; the struct itself is the caller's. NULL is accepted. */
void ps_tune_report_free(ps_tune_report *r);

/* ------------------------------------------------------------------------ */
/* Tuning the team size of a batch                                          */
/* ------------------------------------------------------------------------ */

/** One team shape of a batch (ps_batch_*) and what the batch took with it. */
typedef struct ps_tune_team {
    int team_blocks;      ///< blocks per team (ps_gpu_options.batch_team_blocks)
    int teams;            ///< teams the batch's kernel had (ps_batch_report.teams)
    int status;           ///< ps_status of its last batch: copy 0's (>= 0 or
                          ///< PS_ERR_LINE_SEARCH) when every copy ran, else the
                          ///< first failing copy's or the batch's error
    int64_t iterations;   ///< iterations of one copy in its last timed batch (the most
                          ///< of any copy)
    int64_t evaluations;  ///< evaluations of all copies in its last timed batch
    double seconds;       ///< median over the timed batches of the batch's host time from
                          ///< ps_batch_start to the end of ps_batch_wait, s (NaN if it failed)
    double seconds_per_iteration; ///< seconds / iterations (NaN if it failed)
    int block;            ///< threads per block (ps_gpu_options.gpu_block)
} ps_tune_team;

typedef struct ps_tune_batch_report {
    ps_tune_team *teams;    ///< [count] the candidates by increasing block, then team_blocks (owned)
    size_t count;           ///< number of candidates
    int best;               ///< index of the fastest measured shape, -1 if none ran
    int heuristic;          ///< index of the heuristic's shape (its block; the co-resident
                            ///< blocks over the copies, with README "Batches"' floor), -1 if
                            ///< it cannot be measured (a cluster barrier forced and not 2..8
                            ///< blocks)
    int cached;             ///< index of the shape the tune cache held before this
                            ///< run, -1 if none was valid (or o->gpu->tune_cache is 0)
    int cache_written;      ///< 1 if the fastest shape was written to cache_path
    int copies;             ///< problems in each batch
    int sms;                ///< streaming multiprocessors of the GPU
    char device[128];       ///< the GPU, as ps_gpu_describe
    char cache_key[320];    ///< the cache key as text (with the batch's size class)
    char cache_path[1024];  ///< the cache file of this GPU, build, size class and batch
                            ///< size class
} ps_tune_batch_report;

/**
 * Measure the team shapes of a GPU batch of `copies` copies of p (copy k
 * from p's x0 scaled by 1 + 0.01 k; README "Tuning"): per block size (o's
 * forced gpu_block; else the heuristic's and, when p runs the
 * single-channel kernels, the other of their two, 128 and 256 threads)
 * 1, 2, 4, ... blocks per team up to the batch kernel's co-resident
 * blocks and the heuristic's team size; and the cached shape. With
 * batch_team_barrier forced to PS_TEAM_BARRIER_CLUSTER only teams of 2..8
 * blocks. Each shape runs one warm-up batch and s->repeats timed batches
 * of s->iterations iterations per copy (gtol = ftol = 0), with o->gpu's
 * gpu_block and batch_team_blocks forced to it and the rest of o as given
 * (o's limits and tolerances are not used; its tune_cache 0 ignores the
 * cached shape; s->measured is not called). The fastest by the batch's
 * time is written to the tune cache's batch entry for this GPU, build,
 * p's size class and the batch size class (round(log2 copies)), which
 * ps_batch_start reads when batch_team_blocks is 0. o and s may be NULL
 * (defaults; with s NULL, PS_TUNE_BATCH_ITERATIONS iterations per copy).
 * r receives the table (ps_tune_batch_report_free), also when the cache
 * cannot be written. Returns PS_CONVERGED (0) when at least one
 * shape ran (and, if asked, the fastest was written to the cache);
 * PS_ERR_NULL; PS_ERR_OPTION (copies outside 1..PS_BATCH_MAX, o or s
 * invalid; logged); PS_ERR_NO_GPU or PS_ERR_GPU_UNSUPPORTED (no usable
 * GPU); PS_ERR_NO_MEMORY; PS_ERR_GPU_LAUNCH (no shape ran: see each
 * shape's status); PS_ERR_FILE (all measured, but the cache file could not
 * be written: reason logged, the report is complete).
 */
int ps_gpu_tune_batch(const ps_problem *p, int copies, const ps_options *o, const ps_tune_settings *s,
                      ps_tune_batch_report *r);

/** Release what a batch report owns; the struct itself is the caller's. NULL is accepted. */
void ps_tune_batch_report_free(ps_tune_batch_report *r);

#ifdef __cplusplus
}
#endif

#endif /* PERSOLVE_GPU_H */
