/*
 * A GPU run the host steers while its persistent kernel runs (cuda/run.cu):
 * the asynchronous runs of opt/run.c drive it. The kernel stops at control
 * points (one per evaluation) to obey the command in the control block
 * (cuda/control.h); between launches the whole state lives in device
 * memory and can be copied to and from a CPU driver (opt/driver.h), which is
 * what checkpoints store: a GPU checkpoint resumes on the CPU and back.
 */
#ifndef PS_SRC_GPU_RUN_H
#define PS_SRC_GPU_RUN_H

#include <stdint.h>

#include "cuda/control.h"
#include "cuda/launch.h"
#include "opt/driver.h"
#include "persolve.h"

typedef struct ps_gpu_run ps_gpu_run;

/* The progress the kernel published last (a consistent copy). */
typedef struct ps_gpu_progress {
    uint64_t sequence, heartbeat;
    int64_t iteration, evaluations;
    double f, gnorm, step, seconds;
    int phase, state; /* state: PS_RUN_RUNNING or PS_RUN_PAUSED */
    int round;        /* penalty round */
    int idle;         /* PAUSED and every block waiting at a control point */
} ps_gpu_progress;

/* Device data for p from the optimizer variables z[2 nt], solver in START,
 * control on; cfg NULL: the launch shape ps_gpu_resolve_config picks (the
 * options' forced fields, else the tune cache, else the heuristic);
 * scratch (may be NULL): the host buffer its upload image reuses.
 * Nothing is launched. */
int ps_gpu_run_create(const ps_problem *p, const ps_options *o,
                      const ps_gpu_config *cfg, const double *z,
                      ps_gpu_scratch *scratch, ps_gpu_run **out);
/* The same on o's GPUs (ps_gpu_options.gpus, cuda/ranks.h): one run on
 * each, rank 0's the handle; every call below then serves them all (the
 * commands, the progress and the state are rank 0's, which every rank
 * shares). One GPU: ps_gpu_run_create on that device. */
int ps_gpu_run_create_ranks(const ps_problem *p, const ps_options *o, const double *z, ps_gpu_run **out);
/* At least n free control blocks in the process's list now (one pinned
 * allocation per 64), so that the runs a batch sets up while its kernel
 * runs take them without a pinned allocation then: an allocation between
 * two commands of different streams may serialize them (CUDA's implicit
 * synchronization), and a kernel launched before an allocation does not
 * see it under compute-sanitizer. Runs created meanwhile on other threads
 * take from the same list. A ps_status. */
int ps_gpu_run_reserve(size_t n);
/* The ranks of a run (1: one GPU). */
int ps_gpu_run_ranks(const ps_gpu_run *g);
/* Waits for a launched kernel, then releases everything. */
void ps_gpu_run_free(ps_gpu_run *g);

/* The run's launch shape and dynamic shared memory a block. */
void ps_gpu_run_shape(const ps_gpu_run *g, ps_gpu_config *cfg, size_t *smem);

/* One cooperative launch on the run's stream, from the stored state. */
int ps_gpu_run_launch(ps_gpu_run *g);
/* Wait for the launched kernel (no-op if none). */
int ps_gpu_run_sync(ps_gpu_run *g);
/* The command the kernel obeys at its next control point (PS_GPU_CMD_*). */
void ps_gpu_run_command(ps_gpu_run *g, int cmd);
void ps_gpu_run_progress(const ps_gpu_run *g, ps_gpu_progress *out);
/* Sum of the CUDA-event times of the launches so far. */
double ps_gpu_run_kernel_seconds(const ps_gpu_run *g);
/* "NAME (grid G x B, SB spins x P segments, float32)" */
void ps_gpu_run_describe(const ps_gpu_run *g, char *buf, size_t len);
/* Before a relaunch (after a yield): solve seconds so far, and f at the
 * accepted trial when the state is in its UPDATE phase. */
void ps_gpu_run_set_resume(ps_gpu_run *g, double seconds, double ft);

/*
 * The state into a driver of the same size (solver, vectors, history,
 * solve seconds), while no kernel runs or while it is paused and idle
 * (the controller stored the state before it published PAUSED, idle).
 */
int ps_gpu_run_download(ps_gpu_run *g, ps_driver *d);
/*
 * The same in two parts, for a batch whose problems leave their teams
 * often and whose vectors are rarely wanted: the head (the solver state,
 * x, the history and the solve seconds: what results, progress and the
 * scheduler read) at every exit, the tail (g, gt, d, S, Y and the trial
 * point xt) only when a checkpoint needs it. The tail leaves d->s as it
 * is (a host-side cancel since the head stays).
 */
int ps_gpu_run_download_head(ps_gpu_run *g, ps_driver *d);
int ps_gpu_run_download_tail(ps_gpu_run *g, ps_driver *d);
/* A driver's state onto the device (a resumed checkpoint); no kernel running. */
int ps_gpu_run_upload(ps_gpu_run *g, const ps_driver *d);

#endif /* PS_SRC_GPU_RUN_H */
