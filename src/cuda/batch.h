/*
 * The GPU side of a batch (cuda/batch.cu; opt/batch.c drives it): ONE
 * persistent cooperative kernel whose grid is split into teams of blocks.
 * Each team takes a problem from a queue in mapped host memory, solves it
 * with the phases of a solo solve (cuda/loop.cuh) under its own barrier
 * (cuda/team.cuh), and takes the next when the problem finishes or parks
 * (a pause or a yield of that problem: its state stays in its run's device
 * memory). The problems are GPU runs (cuda/run.h) set up with the team's
 * launch shape; the host steers each through its own control block, as a
 * solo run, and learns of its exits from a record per problem.
 */
#ifndef PS_SRC_CUDA_BATCH_H
#define PS_SRC_CUDA_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/launch.h"
#include "cuda/run.h"
#include "persolve.h"

typedef struct ps_gpu_batch ps_gpu_batch;

/* The most blocks a team that is a thread-block cluster has (the portable
 * cluster size; options.batch_team_barrier); the least is 2. */
#define PS_GPU_CLUSTER_MAX_BLOCKS 8
static inline int ps_gpu_cluster_team_ok(int team_blocks)
{
    return team_blocks >= 2 && team_blocks <= PS_GPU_CLUSTER_MAX_BLOCKS;
}

/* Why a problem left its team (ps_gpu_batch_exit). */
enum {
    PS_GPU_EXIT_PARKED = 1,   /* a pause or yield obeyed: the state stored, not done */
    PS_GPU_EXIT_FINISHED = 2, /* the solve ended (DONE; cancelled included) */
    PS_GPU_EXIT_SKIPPED = 3,  /* taken from the queue with a command pending: not run */
};

/*
 * A batch of at most cap problems for blocks of `block` threads, teams of
 * team_blocks blocks and `smem` bytes of dynamic shared memory a block
 * (raised to the most that keeps the kernel's blocks per SM, so that
 * problems added later fit too): as many teams as the GPU holds
 * co-resident. PS_ERR_GPU_LAUNCH (logged) when not even one team fits.
 */
int ps_gpu_batch_create(const ps_options *o, int precision, int block, int team_blocks, size_t smem,
                        int cap, ps_gpu_batch **out);
/* Waits for a launched kernel, then releases everything (not the runs). */
void ps_gpu_batch_free(ps_gpu_batch *b);

/* Teams of the kernel; dynamic shared memory a block has. */
int ps_gpu_batch_teams(const ps_gpu_batch *b);
size_t ps_gpu_batch_smem(const ps_gpu_batch *b);
/* The teams' barrier: PS_TEAM_BARRIER_RANGE or PS_TEAM_BARRIER_CLUSTER. */
int ps_gpu_batch_barrier(const ps_gpu_batch *b);

/*
 * Make run g problem `index` of the batch: its arguments onto the device
 * (the solve seconds and f at an accepted trial from its resume values),
 * before it is pushed. The run was created with the team's shape (grid =
 * team_blocks, the batch's block, no register cap). PS_ERR_SIZE (logged)
 * when it needs more shared memory than the batch's blocks have.
 */
int ps_gpu_batch_attach(ps_gpu_batch *b, int index, ps_gpu_run *g);
/* Queue problem `index` (attached) for the next team free; one caller at a time. */
void ps_gpu_batch_push(ps_gpu_batch *b, int index);
/* 1: teams take no more problems and exit once theirs park (a yield); 0: go on. */
void ps_gpu_batch_stop(ps_gpu_batch *b, int stop);

/* The kernel path of a run's problem (its kernel class: 0..5). */
int ps_gpu_batch_path(const ps_gpu_run *g);
/* One cooperative launch on the batch's stream (returns at once) of the
 * kernel of one path (a lean kernel: every problem it is given must be of
 * that path), or of -1: the mixed kernel, which takes any problem. */
int ps_gpu_batch_launch(ps_gpu_batch *b, int path);
/* The path of the last launch. */
int ps_gpu_batch_launched_path(const ps_gpu_batch *b);
/* 1 while the launched kernel runs, 0 when none runs (it ended, or none
 * was launched), or an error of the launch (logged). */
int ps_gpu_batch_running(ps_gpu_batch *b);
/* Wait for the launched kernel (no-op if none); its time into the total. */
int ps_gpu_batch_sync(ps_gpu_batch *b);
/* Exits of problem `index` so far, and the reason of the last. */
uint64_t ps_gpu_batch_exit(const ps_gpu_batch *b, int index, int *reason);
/* CUDA-event time of the launches so far. */
double ps_gpu_batch_kernel_seconds(const ps_gpu_batch *b);

/* The batch kernel's blocks per SM for `block` threads and smem bytes (0: none fit). */
int ps_gpu_batch_blocks_per_sm(int precision, int block, size_t smem);

#endif /* PS_SRC_CUDA_BATCH_H */
