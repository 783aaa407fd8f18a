/*
 * The control block of a GPU run: one struct in mapped pinned host memory,
 * read and written by the host while the persistent kernel runs
 * (asynchronous runs, run.c and gpu_run.cu).
 *
 *   host -> device  command: what the kernel does at its next control
 *                   point (one per iteration, after the direction is
 *                   decided). One device thread reads it with a
 *                   system-scope acquire load and publishes it through
 *                   device memory before the barrier that ends the
 *                   direction phase, so every block obeys the same value.
 *   device -> host  a progress snapshot under a sequence counter (odd while
 *                   the device writes it; fenced with __threadfence_system),
 *                   and a heartbeat outside it that grows at every control
 *                   point.
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
    uint64_t seq;          /* snapshot sequence, odd while the device writes */
    int64_t iteration, evaluations;
    double f, gnorm, step, seconds;
    int phase, status;
    uint64_t heartbeat;    /* control points passed (outside the sequence) */
} ps_gpu_ctl;

/* Device words of the control path (device memory, unsigned long long):
 * the command read at the last control point, the pause release
 * (generation << 3 | command), the snapshot sequence and the heartbeat. */
enum { PS_GPU_CW_COMMAND = 0, PS_GPU_CW_RELEASE = 1, PS_GPU_CW_SEQ = 2, PS_GPU_CW_BEAT = 3, PS_GPU_CW_LEN = 4 };

#endif /* PS_SRC_GPU_CONTROL_H */
