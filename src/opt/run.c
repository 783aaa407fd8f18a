/*
 * Asynchronous runs: the handle, its snapshot, the requests and the public
 * ps_run_* functions; each backend's worker lives with its backend
 * (cpu/run_cpu.c, cuda/run_host.c) behind opt/run_impl.h.
 *
 * On the CPU backend a worker thread drives the solver state machine
 * (opt/driver.h) one phase at a time and stops at the control point
 * between two phases to publish progress and obey requests. On the
 * GPU backend the persistent kernel has the control points (cuda/run.h):
 * requests become the command in its control block, progress comes from
 * the snapshot the kernel publishes, and a worker thread waits for each
 * launch to end (yield or done) and copies the device state into the
 * handle's driver, which then serves results and checkpoints exactly as on
 * the CPU (so a checkpoint moves between the backends).
 *
 * Locking: the mutex guards the requests, the state, the driver while no
 * worker runs, and the writer side of the snapshot. The snapshot is a
 * seqlock: the writer makes the sequence odd, writes the fields, makes it
 * even again; a reader retries until it saw the same even sequence before
 * and after its copy. Fields are relaxed atomics so that the race is
 * defined behaviour (Boehm, "Can seqlocks get along with programming
 * language memory models?", MSPC 2012).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "cpu/objective.h"
#include "model/design.h"
#include "opt/backend.h"
#include "opt/checkpoint.h"
#include "opt/driver.h"
#include "opt/options.h"
#include "opt/run.h"
#include "opt/run_impl.h"

static uint64_t bits(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

static double from_bits(uint64_t u)
{
    double v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* Publish the progress (caller holds the mutex: one writer at a time). */
void ps_run_impl_publish(ps_run *r)
{
    ps_run_snap_store *s = &r->snap;
    const ps_solver *sv = &r->drv.s;
    uint64_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
    atomic_store_explicit(&s->seq, q + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&s->iteration, sv->iteration, memory_order_relaxed);
    atomic_store_explicit(&s->evaluations, sv->evaluations, memory_order_relaxed);
    atomic_store_explicit(&s->f, bits(sv->f), memory_order_relaxed);
    atomic_store_explicit(&s->gnorm, bits(sv->gnorm), memory_order_relaxed);
    atomic_store_explicit(&s->step, bits(sv->iteration > 0 ? sv->step : 0.0),
                          memory_order_relaxed);
    atomic_store_explicit(&s->seconds, bits(ps_driver_seconds(&r->drv)),
                          memory_order_relaxed);
    atomic_store_explicit(&s->heartbeat, r->heartbeat, memory_order_relaxed);
    atomic_store_explicit(&s->state, r->state, memory_order_relaxed);
    atomic_store_explicit(&s->phase, sv->phase, memory_order_relaxed);
    atomic_store_explicit(&s->round, sv->round, memory_order_relaxed);
    atomic_store_explicit(&s->status,
                          r->state == PS_RUN_FINISHED ? r->status : PS_RUNNING,
                          memory_order_relaxed);
    uint64_t devseq = 0;
    if (r->gpu) {
        ps_gpu_progress d;
        ps_gpu_run_progress(r->gpu, &d);
        devseq = d.sequence;
    }
    atomic_store_explicit(&s->devseq, devseq, memory_order_relaxed);
    atomic_store_explicit(&s->seq, q + 2, memory_order_release);
}

int ps_run_snapshot(const ps_run *r, ps_snapshot *out)
{
    if (!r || !out)
        return PS_ERR_NULL;
    /* the fields are atomics: reading them through a const handle is fine */
    ps_run_snap_store *s = (ps_run_snap_store *)&r->snap;
    ps_snapshot v;
    uint64_t devseq = 0;
    memset(&v, 0, sizeof v);
    for (;;) {
        uint64_t q0 = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (q0 & 1u)
            continue;
        v.iteration = atomic_load_explicit(&s->iteration, memory_order_relaxed);
        v.evaluations = atomic_load_explicit(&s->evaluations, memory_order_relaxed);
        v.f = from_bits(atomic_load_explicit(&s->f, memory_order_relaxed));
        v.gnorm = from_bits(atomic_load_explicit(&s->gnorm, memory_order_relaxed));
        v.step = from_bits(atomic_load_explicit(&s->step, memory_order_relaxed));
        v.seconds = from_bits(atomic_load_explicit(&s->seconds, memory_order_relaxed));
        v.heartbeat = atomic_load_explicit(&s->heartbeat, memory_order_relaxed);
        v.state = atomic_load_explicit(&s->state, memory_order_relaxed);
        v.phase = atomic_load_explicit(&s->phase, memory_order_relaxed);
        v.round = atomic_load_explicit(&s->round, memory_order_relaxed);
        v.status = atomic_load_explicit(&s->status, memory_order_relaxed);
        devseq = atomic_load_explicit(&s->devseq, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        uint64_t q1 = atomic_load_explicit(&s->seq, memory_order_relaxed);
        if (q0 == q1) {
            v.sequence = q0;
            break;
        }
    }
    /* the host publishes PAUSED once its worker waits */
    v.idle = v.state != PS_RUN_RUNNING;
    if (r->gpu) {
        /* while the kernel runs, its own snapshot once it is newer than
         * the host's (a relaunched kernel has not published yet); the
         * sequence and the heartbeat combine the host's and the device's
         * counters, which both only grow */
        ps_gpu_progress d;
        ps_gpu_run_progress(r->gpu, &d);
        if (v.state == PS_RUN_RUNNING && d.sequence > devseq) {
            v.iteration = d.iteration;
            v.evaluations = d.evaluations;
            v.f = d.f;
            v.gnorm = d.gnorm;
            v.step = d.step;
            v.seconds = d.seconds;
            v.phase = d.phase;
            v.round = d.round;
            v.state = d.state;
            v.idle = d.state == PS_RUN_PAUSED && d.idle;
        }
        v.sequence = (v.sequence << 32) + d.sequence;
        v.heartbeat += d.heartbeat;
    }
    *out = v;
    return PS_CONVERGED;
}

/* The end of a solve (mutex held): outcome published, waiters woken. */
void ps_run_impl_finish(ps_run *r)
{
    ps_driver_clock_stop(&r->drv);
    r->requests = 0;
    r->state = PS_RUN_FINISHED;
    ps_result tmp;
    memset(&tmp, 0, sizeof tmp);
    r->status = ps_driver_outcome(&r->drv, &tmp, NULL);
    r->heartbeat++;
    ps_run_impl_publish(r);
    pthread_cond_broadcast(&r->cv);
}

/* A yield obeyed, by either backend's worker (mutex held): the state is in
 * the driver (and on the device), the requests are cleared. */
void ps_run_impl_yielded(ps_run *r)
{
    ps_driver_clock_stop(&r->drv);
    r->requests = 0;
    if (r->gpu)
        ps_run_gpu_command(r);
    r->state = PS_RUN_YIELDED;
    ps_run_impl_publish(r);
    pthread_cond_broadcast(&r->cv);
}

/* Start a worker (mutex held, no worker alive). */
static int spawn(ps_run *r)
{
    r->state = PS_RUN_RUNNING;
    if (r->gpu) {
        ps_run_gpu_command(r);
        ps_gpu_run_set_resume(r->gpu, r->drv.elapsed, r->drv.ft);
    }
    ps_run_impl_publish(r);
    if (pthread_create(&r->thread, NULL, r->gpu ? ps_run_gpu_worker : ps_run_cpu_worker, r) != 0) {
        r->state = PS_RUN_YIELDED;
        ps_run_impl_publish(r);
        return PS_ERR_NO_MEMORY;
    }
    r->thread_live = 1;
    return PS_CONVERGED;
}

/* Join a worker that has ended or is about to (mutex held). */
static void join(ps_run *r)
{
    if (r->thread_live) {
        r->thread_live = 0;
        pthread_join(r->thread, NULL);
    }
}

/* A handle with its driver set up for p and o, not yet started. */
int ps_run_impl_create(const ps_problem *p, const ps_options *o,
                  const double *x0, int fell_back, ps_run **out)
{
    size_t n = ps_problem_nx(p);
    ps_run *r = calloc(1, sizeof *r);
    if (!r)
        return PS_ERR_NO_MEMORY;
    r->p = p;
    r->o = *o;
    if (o->gpu) {
        r->gpu_o = *o->gpu;
        r->o.gpu = &r->gpu_o;
    }
    r->fell_back = fell_back;
    r->ctx.p = p;
    r->ctx.precision = o->precision;
    r->ctx.threads = o->threads;
    r->x0 = malloc(n * sizeof(double));
    double *z = malloc(n * sizeof(double));
    int st = PS_ERR_NO_MEMORY;
    if (r->x0 && z) {
        memcpy(r->x0, x0, n * sizeof(double));
        ps_design_x_of_pulse(p, x0, z);
        ps_minimizer mz = {n, ps_problem_penalized(p), ps_run_bloch_eval, &r->ctx, NULL, NULL,
                           ps_penalty_mu0(p, o)};
        st = ps_driver_init(&r->drv, &mz, &r->o, z);
    }
    free(z);
    if (st) {
        free(r->x0);
        free(r);
        return st;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    r->status = PS_RUNNING;
    *out = r;
    return PS_CONVERGED;
}

void ps_run_impl_destroy(ps_run *r)
{
    ps_gpu_run_free(r->gpu);
    ps_driver_free(&r->drv);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r->x0);
    free(r);
}

/* Start the worker of a new handle, or finish a handle that is done. */
int ps_run_impl_launch(ps_run *r, ps_run **out)
{
    pthread_mutex_lock(&r->mu);
    int st = PS_CONVERGED;
    if (ps_driver_done(&r->drv))
        ps_run_impl_finish(r);
    else
        st = spawn(r);
    pthread_mutex_unlock(&r->mu);
    if (st) {
        ps_run_impl_destroy(r);
        return st;
    }
    *out = r;
    return PS_CONVERGED;
}

/*
 * A handle for p and validated options on the backend they pick (auto:
 * the GPU, else the CPU, said in the log and the results), from x0 or,
 * with a checkpoint blob, from the state it holds.
 */
static int start_on_backend(const ps_problem *p, const ps_options *opt,
                            const double *x0, const void *buf, size_t len,
                            ps_run **out)
{
    ps_backend use;
    int fell_back = 0;
    int st = ps_pick_backend(opt, &use, &fell_back);
    if (st)
        return st;
    ps_run *r;
    if ((st = ps_run_impl_create(p, opt, x0, fell_back, &r)))
        return st;
    if (buf) {
        if ((st = ps_checkpoint_load(p, &r->o, buf, len, &r->drv))) {
            ps_run_impl_destroy(r);
            return st;
        }
        /* the pulse returned if nothing is evaluated: the checkpoint's */
        ps_design_pulse_of_x(p, r->drv.x, r->x0);
    }
    if (use == PS_BACKEND_GPU && (st = ps_run_gpu_attach(r))) {
        ps_gpu_run_free(r->gpu);
        r->gpu = NULL;
        if (!(opt->backend == PS_BACKEND_AUTO && ps_gpu_can_fall_back(st))) {
            ps_run_impl_destroy(r);
            return st;
        }
        ps_log(opt, PS_LOG_WARNING, __FILE__, __LINE__,
               "backend auto: GPU run unavailable (%s), running on the CPU",
               ps_strerror(st));
        r->fell_back = 1;
    }
    return ps_run_impl_launch(r, out);
}

int ps_solve_start(const ps_problem *p, const ps_options *o, const double *x0,
                   ps_run **out)
{
    if (out)
        *out = NULL;
    if (!p || !x0 || !out)
        return PS_ERR_NULL;
    ps_options opt;
    int st = ps_take_options(o, &opt);
    if (!st)
        st = ps_check_x(&opt, x0, ps_problem_nx(p));
    if (st)
        return st;
    return start_on_backend(p, &opt, x0, NULL, 0, out);
}

int ps_solve_resume(const ps_problem *p, const ps_options *o, const void *buf,
                    size_t len, ps_run **out)
{
    if (out)
        *out = NULL;
    if (!p || !buf || !out)
        return PS_ERR_NULL;
    ps_options opt;
    int st = ps_take_options(o, &opt);
    if (st)
        return st;
    double *x0 = calloc(ps_problem_nx(p), sizeof(double));
    if (!x0)
        return PS_ERR_NO_MEMORY;
    ps_problem_x0(p, x0);
    st = start_on_backend(p, &opt, x0, buf, len, out);
    free(x0);
    return st;
}

int ps_run_pause(ps_run *r)
{
    if (!r)
        return PS_ERR_NULL;
    pthread_mutex_lock(&r->mu);
    int st = PS_CONVERGED;
    if (r->state == PS_RUN_FINISHED)
        st = PS_ERR_STATE;
    else if (r->state == PS_RUN_RUNNING)
        r->requests |= PS_REQ_PAUSE;
    if (r->gpu && r->state == PS_RUN_RUNNING)
        ps_run_gpu_command(r);
    pthread_mutex_unlock(&r->mu);
    return st;
}

int ps_run_yield(ps_run *r)
{
    if (!r)
        return PS_ERR_NULL;
    pthread_mutex_lock(&r->mu);
    int st = PS_CONVERGED;
    if (r->state == PS_RUN_FINISHED) {
        st = PS_ERR_STATE;
    } else if (r->state != PS_RUN_YIELDED) {
        r->requests |= PS_REQ_YIELD;
        pthread_cond_broadcast(&r->cv); /* a paused worker yields */
        if (r->gpu)
            ps_run_gpu_command(r);
    }
    pthread_mutex_unlock(&r->mu);
    return st;
}

int ps_run_resume(ps_run *r)
{
    if (!r)
        return PS_ERR_NULL;
    pthread_mutex_lock(&r->mu);
    int st = PS_CONVERGED;
    switch (r->state) {
    case PS_RUN_PAUSED:
        r->requests &= ~(PS_REQ_PAUSE | PS_REQ_YIELD);
        pthread_cond_broadcast(&r->cv);
        break;
    case PS_RUN_YIELDED:
        join(r); /* the old worker has left the lock for good */
        r->requests &= ~(PS_REQ_PAUSE | PS_REQ_YIELD);
        st = spawn(r);
        break;
    case PS_RUN_RUNNING:
        /* a GPU run stays RUNNING on the host while its kernel is paused */
        if (r->requests & (PS_REQ_PAUSE | PS_REQ_YIELD))
            r->requests &= ~(PS_REQ_PAUSE | PS_REQ_YIELD);
        else
            st = PS_ERR_STATE;
        if (r->gpu) {
            ps_gpu_progress d;
            ps_gpu_run_progress(r->gpu, &d);
            ps_run_gpu_command(r);
            /* a kernel stopped at its control point publishes RUNNING as
             * soon as it reads the resume (within its 32 us back-off):
             * wait for that, 1 s at most, so that a pause that follows is
             * never taken as obeyed on this pause's idle snapshot (a
             * checkpoint would copy a running kernel's state) */
            if (st == PS_CONVERGED && d.state == PS_RUN_PAUSED && d.idle)
                ps_run_gpu_await_publication(r->gpu, d.sequence, 1.0);
        }
        break;
    default:
        st = PS_ERR_STATE;
        break;
    }
    pthread_mutex_unlock(&r->mu);
    return st;
}

int ps_run_cancel(ps_run *r)
{
    if (!r)
        return PS_ERR_NULL;
    pthread_mutex_lock(&r->mu);
    if (r->state == PS_RUN_YIELDED) {
        /* no worker: end it here */
        join(r);
        ps_driver_cancel(&r->drv);
        ps_run_impl_finish(r);
    } else if (r->state != PS_RUN_FINISHED) {
        r->requests |= PS_REQ_CANCEL;
        pthread_cond_broadcast(&r->cv);
        if (r->gpu)
            ps_run_gpu_command(r);
    }
    pthread_mutex_unlock(&r->mu);
    return PS_CONVERGED;
}

/* Copy the outcome of a finished run (mutex held). */
static int copy_result(ps_run *r, ps_result *res, double *x)
{
    const ps_driver *c = &r->drv;
    if (res) {
        memset(res, 0, sizeof *res);
        ps_driver_outcome(c, res, NULL);
        res->fell_back = r->fell_back;
        if (r->gpu) {
            res->backend = PS_BACKEND_GPU;
            res->kernel_seconds = ps_gpu_run_kernel_seconds(r->gpu);
            ps_gpu_run_describe(r->gpu, res->device, sizeof res->device);
        } else {
            res->backend = PS_BACKEND_CPU;
            ps_cpu_device(&r->o, res->device, sizeof res->device);
        }
        if (c->history_len) {
            res->history = malloc(c->history_len * sizeof *res->history);
            if (!res->history) {
                res->status = PS_ERR_NO_MEMORY;
                return res->status;
            }
            memcpy(res->history, c->history, c->history_len * sizeof *res->history);
            res->history_len = c->history_len;
        }
    }
    if (x) {
        if (c->history_len > 0 && !c->error)
            ps_design_pulse_of_x(r->p, c->x, x);
        else
            memcpy(x, r->x0, ps_problem_nx(r->p) * sizeof(double));
    }
    return r->status;
}

int ps_run_wait(ps_run *r, double timeout_s, ps_result *res, double *x)
{
    if (!r)
        return PS_ERR_NULL;
    if (timeout_s != timeout_s)
        return PS_ERR_NONFINITE;
    const struct timespec deadline = ps_monotonic_after(timeout_s > 0 ? timeout_s : 0.0);
    pthread_mutex_lock(&r->mu);
    while (r->state != PS_RUN_FINISHED) {
        if (timeout_s < 0) {
            pthread_cond_wait(&r->cv, &r->mu);
        } else if (timeout_s == 0 ||
                   pthread_cond_timedwait(&r->cv, &r->mu, &deadline) == ETIMEDOUT) {
            break;
        }
    }
    int st = PS_RUNNING;
    if (r->state == PS_RUN_FINISHED)
        st = copy_result(r, res, x);
    pthread_mutex_unlock(&r->mu);
    return st;
}

int ps_run_checkpoint(const ps_run *cr, void **buf, size_t *len)
{
    if (buf)
        *buf = NULL;
    if (len)
        *len = 0;
    if (!cr || !buf || !len)
        return PS_ERR_NULL;
    ps_run *r = (ps_run *)cr; /* the lock is not part of the value */
    pthread_mutex_lock(&r->mu);
    int st = PS_CONVERGED;
    int paused_kernel = 0;
    /*
     * A GPU run stays RUNNING on the host while its kernel is paused: the
     * kernel stores its state once it stops at its control point, after at
     * most the evaluation in flight (a PAUSED it published for a pause
     * since withdrawn may turn RUNNING first). With a pause the request,
     * wait for idle, 10 s at most, in short timed waits on the condition
     * variable: they release the lock, so that a worker whose kernel ended
     * meanwhile (done, or a yield that a resume withdrew after the kernel
     * had read it) can finish the run or launch the kernel again, which
     * then pauses. Everything is looked at again after each wait.
     */
    const double t_end = ps_monotonic_seconds() + 10.0;
    while (r->gpu && r->state == PS_RUN_RUNNING) {
        ps_gpu_progress d;
        ps_gpu_run_progress(r->gpu, &d);
        paused_kernel = d.state == PS_RUN_PAUSED && d.idle && !(r->requests & PS_REQ_CANCEL);
        if (paused_kernel || (r->requests & (PS_REQ_PAUSE | PS_REQ_YIELD | PS_REQ_CANCEL)) != PS_REQ_PAUSE ||
            ps_monotonic_seconds() >= t_end)
            break;
        const struct timespec tick = ps_monotonic_after(20e-6);
        pthread_cond_timedwait(&r->cv, &r->mu, &tick);
    }
    if (r->state == PS_RUN_RUNNING && !paused_kernel) {
        ps_log(&r->o, PS_LOG_ERROR, __FILE__, __LINE__,
               "checkpoint of a running run: pause or yield it first");
        st = PS_ERR_STATE;
    } else {
        /* an idle paused kernel stored its state before it said so */
        if (paused_kernel)
            st = ps_gpu_run_download(r->gpu, &r->drv);
        if (!st)
            st = ps_checkpoint_save(r->p, &r->o, &r->drv, buf, len);
    }
    pthread_mutex_unlock(&r->mu);
    return st;
}

void ps_run_free(ps_run *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    if (r->state != PS_RUN_FINISHED && r->state != PS_RUN_YIELDED) {
        r->requests |= PS_REQ_CANCEL;
        pthread_cond_broadcast(&r->cv);
        if (r->gpu)
            ps_run_gpu_command(r);
        while (r->state != PS_RUN_FINISHED && r->state != PS_RUN_YIELDED)
            pthread_cond_wait(&r->cv, &r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    if (r->thread_live)
        pthread_join(r->thread, NULL);
    ps_run_impl_destroy(r);
}
