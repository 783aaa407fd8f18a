/*
 * The control block of a GPU run: one struct in mapped pinned host memory,
 * read and written by the host while the persistent kernel runs
 * (asynchronous runs, opt/run.c and cuda/run.cu).
 *
 *   host -> device  command: what the kernel does at its next control
 *                   point, one per evaluation, after the reduction's
 *                   barrier and the sums (the state is whole there, still
 *                   before that evaluation's decision). One device thread
 *                   (the control thread) reads the command with a
 *                   system-scope load in the reduction and stores it in a
 *                   device word that every block reads after the barrier,
 *                   so that all obey the same value. It also reads the
 *                   command while the direction is formed, and watches it
 *                   while the other blocks still evaluate.
 *   device -> host  a progress snapshot under a sequence counter (odd while
 *                   the device writes it; fenced with __threadfence_system),
 *                   and a heartbeat outside it that grows at every
 *                   evaluation. A PAUSE is acknowledged as soon as the
 *                   control thread reads it, at any of those three places
 *                   (PAUSED published, idle 0: the state will not move
 *                   until resumed), and obeyed at the control point (idle
 *                   1).
 */
#ifndef PS_SRC_GPU_CONTROL_H
#define PS_SRC_GPU_CONTROL_H

#include <stdint.h>

enum {
    PS_GPU_CMD_NONE = 0,   /* run */
    PS_GPU_CMD_PAUSE = 1,  /* wait at the control point (__nanosleep) */
    PS_GPU_CMD_YIELD = 2,  /* store the state in device memory and exit */
    PS_GPU_CMD_CANCEL = 3, /* end with PS_CANCELLED at the last accepted point */
};

typedef struct ps_gpu_ctl {
    int command;           /* PS_GPU_CMD_*: written by the host only */
    int state;             /* PS_RUN_RUNNING or PS_RUN_PAUSED, as the kernel last published */
    int idle;              /* with PAUSED: 1 once the kernel stops at its control point, the
                              state stored (0: the pause is acknowledged, the evaluation in
                              flight still finishing) */
    uint64_t seq;          /* snapshot sequence, odd while the device writes */
    int64_t iteration, evaluations;
    double f, gnorm, step, seconds;
    int phase, status;
    int round, pad_;       /* penalty round */
    uint64_t heartbeat;    /* control points passed (outside the sequence) */
} ps_gpu_ctl;

/* Device words of the control path (device memory, unsigned long long):
 * the command for the next control point (written before the reduction's
 * barrier, read after it; the next write comes after the next evaluation's
 * barrier), the pause release (generation << 3 | command), the snapshot
 * sequence and the heartbeat; the blocks that have arrived at an
 * evaluation's barrier since the launch (zeroed before every launch); a
 * rank's count of exchanges (several GPUs). */
enum {
    PS_GPU_CW_CMD = 0,
    PS_GPU_CW_RELEASE = 1,
    PS_GPU_CW_SEQ = 2,
    PS_GPU_CW_BEAT = 3,
    PS_GPU_CW_EVAL_DONE = 4,
    PS_GPU_CW_RANKS = 5, /* several GPUs: the exchanges so far (cuda/ranks.cuh) */
    PS_GPU_CW_LEN = 6
};

#endif /* PS_SRC_GPU_CONTROL_H */
