/*
 * The CPU worker of an asynchronous run (opt/run_impl.h): a POSIX thread
 * drives the solver state machine (opt/driver.h) one phase at a time and
 * stops at the control point between two phases to publish progress and
 * obey requests.
 */
#include <pthread.h>

#include "cpu/objective.h"
#include "opt/driver.h"
#include "opt/run.h"
#include "opt/run_impl.h"

int ps_run_bloch_eval(void *ctx, const double *x, double mu, double *f, double *g, double *viol)
{
    const ps_run_bloch_ctx *b = ctx;
    return ps_objective_cpu_penalty(b->p, b->precision, b->threads, mu, x, f, g, NULL, viol);
}

/*
 * The worker: a control point before every phase. Pause waits on the
 * condition variable; yield and cancel end the thread (the driver stays in
 * the handle).
 */
void *ps_run_cpu_worker(void *arg)
{
    ps_run *r = arg;
    pthread_mutex_lock(&r->mu);
    ps_driver_clock_start(&r->drv);
    for (;;) {
        /* ---- control point ---- */
        r->heartbeat++;
        if (r->requests & PS_REQ_CANCEL)
            ps_driver_cancel(&r->drv);
        if (ps_driver_done(&r->drv))
            break;
        if (r->requests & PS_REQ_PAUSE && !(r->requests & PS_REQ_YIELD)) {
            ps_driver_clock_stop(&r->drv);
            r->state = PS_RUN_PAUSED;
            ps_run_impl_publish(r);
            pthread_cond_broadcast(&r->cv);
            while (r->requests == PS_REQ_PAUSE)
                pthread_cond_wait(&r->cv, &r->mu);
            r->state = PS_RUN_RUNNING;
            ps_driver_clock_start(&r->drv);
            continue; /* a new control point: cancel or yield may be pending */
        }
        if (r->requests & PS_REQ_YIELD) {
            ps_run_impl_yielded(r);
            pthread_mutex_unlock(&r->mu);
            return NULL;
        }
        ps_run_impl_publish(r);
        pthread_mutex_unlock(&r->mu);
        /* ---- one phase, unlocked ---- */
        ps_driver_step(&r->drv);
        pthread_mutex_lock(&r->mu);
    }
    ps_run_impl_finish(r);
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

int ps_run_start_cpu(const ps_problem *p, const ps_options *o,
                     const double *x0, int fell_back, ps_run **out)
{
    ps_run *r;
    *out = NULL;
    int st = ps_run_impl_create(p, o, x0, fell_back, &r);
    if (st)
        return st;
    return ps_run_impl_launch(r, out);
}
