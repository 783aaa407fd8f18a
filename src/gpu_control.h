/*
 * The control block of a GPU run: one struct in mapped pinned host memory,
 * read and written by the host while the persistent kernel runs
 * (asynchronous runs, run.c and gpu_run.cu).
 *
 *   host -> device  command: what the kernel does at its next control
 *                   point. There are two kinds, each at a barrier the
 *                   solve already has and where the state is whole: after
 *                   the reduction of every evaluation (the state is still
 *                   before that evaluation's decision) and after the
 *                   direction of every iteration is formed (the state is
 *                   about to evaluate the first trial). One device thread
 *                   (the control thread) reads the command with a
 *                   system-scope load in the phase before the barrier and
 *                   stores it in a device word of that kind, which every
 *                   block reads after the barrier, so that all obey the
 *                   same value.
 *   device -> host  a progress snapshot under a sequence counter (odd while
 *                   the device writes it; fenced with __threadfence_system),
 *                   and a heartbeat outside it that grows at every control
 *                   point. A PAUSE is acknowledged as soon as the control
 *                   thread sees it (PAUSED published, idle 0: the state
 *                   will not move until resumed), before the barrier, and
 *                   obeyed after it (idle 1). While the other blocks still
 *                   evaluate, the control thread watches the command too.
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
    int idle;              /* with PAUSED: 1 once every block waits at a control point (0: the
                              pause is acknowledged, the evaluation in flight still finishing) */
    uint64_t seq;          /* snapshot sequence, odd while the device writes */
    int64_t iteration, evaluations;
    double f, gnorm, step, seconds;
    int phase, status;
    uint64_t heartbeat;    /* control points passed (outside the sequence) */
} ps_gpu_ctl;

/* Device words of the control path (device memory, unsigned long long):
 * the command read for the last control point after an evaluation and
 * after a direction (one word each: a block may still read one while the
 * control thread writes the next control point's word, never the same
 * word, because a grid barrier lies between two writes of one word), the
 * pause release (generation << 3 | command), the snapshot sequence and the
 * heartbeat; the blocks done with their share of evaluations since the
 * launch (zeroed before every launch). */
enum {
    PS_GPU_CW_CMD_EVAL = 0,
    PS_GPU_CW_RELEASE = 1,
    PS_GPU_CW_SEQ = 2,
    PS_GPU_CW_BEAT = 3,
    PS_GPU_CW_CMD_DIRECTION = 4,
    PS_GPU_CW_EVAL_DONE = 5,
    PS_GPU_CW_LEN = 6
};

#endif /* PS_SRC_GPU_CONTROL_H */
