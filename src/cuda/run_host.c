/*
 * The GPU worker of an asynchronous run (opt/run_impl.h), host C code over
 * the interface of cuda/run.h (cuda/run.cu, or cuda/none.c without CUDA):
 * the persistent kernel has the control points; requests become the
 * command in its control block, and a worker thread waits for each launch
 * to end (yield or done) and copies the device state into the handle's
 * driver, which then serves results and checkpoints exactly as on the CPU
 * (so a checkpoint moves between the backends).
 */
#include <pthread.h>

#include "common/clock.h"
#include "cuda/control.h"
#include "cuda/run.h"
#include "opt/driver.h"
#include "opt/run.h"
#include "opt/run_impl.h"

/* Until the kernel publishes a snapshot after sequence seq (a busy wait
 * for short waits), `seconds` at most. */
void ps_run_gpu_await_publication(const ps_gpu_run *g, uint64_t seq, double seconds)
{
    const double t_end = ps_monotonic_seconds() + seconds;
    ps_gpu_progress d;
    do
        ps_gpu_run_progress(g, &d);
    while (d.sequence == seq && ps_monotonic_seconds() < t_end);
}

/* The command for the kernel from the pending requests (mutex held). */
void ps_run_gpu_command(ps_run *r)
{
    int cmd = PS_GPU_CMD_NONE;
    if (r->requests & PS_REQ_CANCEL)
        cmd = PS_GPU_CMD_CANCEL;
    else if (r->requests & PS_REQ_YIELD)
        cmd = PS_GPU_CMD_YIELD;
    else if (r->requests & PS_REQ_PAUSE)
        cmd = PS_GPU_CMD_PAUSE;
    ps_gpu_run_command(r->gpu, cmd);
}

/*
 * The worker of a GPU run: a launch from the state on the device, then
 * (the kernel ended: done, or yielded at a control point) the state into
 * the driver. A kernel that took a yield which the host has withdrawn or
 * overtaken since (a resume, or a cancel, after the kernel had read the
 * command) is not left yielded: a cancel ends the run at the state it
 * stored, otherwise it is launched again with the current command.
 */
void *ps_run_gpu_worker(void *arg)
{
    ps_run *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        pthread_mutex_unlock(&r->mu);
        int st = ps_gpu_run_launch(r->gpu);
        if (!st)
            st = ps_gpu_run_sync(r->gpu);
        pthread_mutex_lock(&r->mu);
        if (!st)
            st = ps_gpu_run_download(r->gpu, &r->drv);
        if (st) {
            r->drv.error = st;
            if (!ps_driver_done(&r->drv))
                ps_solver_finish(&r->drv.s, st);
        }
        if (r->requests & PS_REQ_CANCEL) /* (a no-op on a solve already done) */
            ps_driver_cancel(&r->drv);
        if (ps_driver_done(&r->drv)) {
            ps_run_impl_finish(r);
            break;
        }
        r->heartbeat++;
        if (r->requests & PS_REQ_YIELD) {
            ps_run_impl_yielded(r);
            break;
        }
        /* the yield was withdrawn: on from the stored state */
        ps_run_gpu_command(r);
        ps_gpu_run_set_resume(r->gpu, r->drv.elapsed, r->drv.ft);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* The device side of a new GPU handle, from the driver's state. */
int ps_run_gpu_attach(ps_run *r)
{
    int st = ps_gpu_run_create_ranks(r->p, &r->o, r->drv.x, &r->gpu);
    /* a resumed checkpoint (also one at the START of a new penalty round;
     * a fresh START needs nothing but x) */
    if (!st && (r->drv.s.phase != PS_PHASE_START || r->drv.s.restart))
        st = ps_gpu_run_upload(r->gpu, &r->drv);
    return st;
}

int ps_run_start_gpu(const ps_problem *p, const ps_options *o,
                     const double *x0, ps_run **out)
{
    ps_run *r;
    *out = NULL;
    int st = ps_run_impl_create(p, o, x0, 0, &r);
    if (st)
        return st;
    st = ps_run_gpu_attach(r);
    if (st) {
        ps_run_impl_destroy(r);
        return st;
    }
    return ps_run_impl_launch(r, out);
}
