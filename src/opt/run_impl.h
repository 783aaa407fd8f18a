/*
 * The handle of an asynchronous run as its workers see it (opt/run.c keeps
 * the handle, the seqlock snapshot, the requests and the public ps_run_*
 * functions; the CPU worker is cpu/run_cpu.c, the GPU worker
 * cuda/run_host.c). Locking and the snapshot protocol: opt/run.c.
 */
#ifndef PS_SRC_RUN_IMPL_H
#define PS_SRC_RUN_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cuda/run.h"
#include "opt/driver.h"
#include "persolve_gpu.h"

/* Requests from the caller, obeyed at the next control point. */
enum { PS_REQ_PAUSE = 1, PS_REQ_YIELD = 2, PS_REQ_CANCEL = 4 };

/* The published snapshot: every field a relaxed atomic (doubles as bits). */
typedef struct ps_run_snap_store {
    _Atomic uint64_t seq;
    _Atomic int64_t iteration, evaluations;
    _Atomic uint64_t f, gnorm, step, seconds, heartbeat;
    _Atomic int state, phase, status, round;
    _Atomic uint64_t devseq; /* GPU runs: the kernel's sequence when the host published */
} ps_run_snap_store;

/* The Bloch objective as the driver's callback. */
typedef struct ps_run_bloch_ctx {
    const ps_problem *p;
    int precision, threads;
} ps_run_bloch_ctx;

struct ps_run {
    const ps_problem *p;   /* borrowed */
    ps_options o;          /* copied at start */
    ps_gpu_options gpu_o;  /* the copy of *o.gpu that o.gpu points to, if given */
    ps_run_bloch_ctx ctx;
    ps_driver drv;
    int fell_back;
    double *x0;            /* [n] the start pulse (returned if nothing was evaluated) */
    pthread_mutex_t mu;
    pthread_cond_t cv;     /* state changes and requests */
    pthread_t thread;
    int thread_live;       /* a worker was started and not joined */
    int requests;          /* PS_REQ_* */
    int state;             /* ps_run_state */
    int status;            /* final status once FINISHED */
    uint64_t heartbeat;
    ps_run_snap_store snap;
    ps_gpu_run *gpu;       /* GPU runs: the device side, else NULL */
};

/* ---- opt/run.c: the handle ---- */

/* A handle with its driver set up for p and o, not yet started. */
int ps_run_impl_create(const ps_problem *p, const ps_options *o, const double *x0,
                  int fell_back, ps_run **out);
/* Release a handle whose worker (if any) has been joined. */
void ps_run_impl_destroy(ps_run *r);
/* Start the worker of a new handle, or finish a handle that is done; on
 * error the handle is destroyed. */
int ps_run_impl_launch(ps_run *r, ps_run **out);
/* Publish the progress (caller holds the mutex: one writer at a time). */
void ps_run_impl_publish(ps_run *r);
/* The end of a solve (mutex held): outcome published, waiters woken. */
void ps_run_impl_finish(ps_run *r);
/* A yield obeyed, by either backend's worker (mutex held): the state is in
 * the driver (and on the device), the requests are cleared. */
void ps_run_impl_yielded(ps_run *r);

/* ---- cpu/run_cpu.c: the CPU worker ---- */

/* The Bloch objective as the driver's callback (ctx: a ps_run_bloch_ctx). */
int ps_run_bloch_eval(void *ctx, const double *x, double mu, double *f, double *g, double *viol);
/* The thread of a CPU run (arg: the ps_run). */
void *ps_run_cpu_worker(void *arg);

/* ---- cuda/run_host.c: the GPU worker ---- */

/* The thread of a GPU run (arg: the ps_run). */
void *ps_run_gpu_worker(void *arg);
/* The command for the kernel from the pending requests (mutex held). */
void ps_run_gpu_command(ps_run *r);
/* The device side of a new GPU handle, from the driver's state. */
int ps_run_gpu_attach(ps_run *r);
/* Until the kernel publishes a snapshot after sequence seq (a busy wait
 * for short waits), `seconds` at most. */
void ps_run_gpu_await_publication(const ps_gpu_run *g, uint64_t seq, double seconds);

#endif /* PS_SRC_RUN_IMPL_H */
