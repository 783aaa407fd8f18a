/*
 * Batches (persolve.h, ps_batch_*): many problems, one queue, on either
 * backend. Every problem is an asynchronous run (opt/run_impl.h) that the
 * batch schedules instead of its own worker:
 *   - the CPU backend: W workers (ps_options.threads, else the cores); a
 *     problem's run solves with one thread (threads = 1, its solo shape),
 *     and the batch keeps at most W of them running. A pause of a running
 *     problem is a yield of its run (the worker exits, freeing the core for
 *     the next queued problem); resume queues it again.
 *   - the GPU backend: ONE persistent kernel (cuda/batch.h) whose teams take
 *     problems from a queue in mapped memory. Each problem is a GPU run set
 *     up with the team's shape; the batch steers it through the run's
 *     control block (a pause parks it on the device) and, whenever it leaves
 *     its team, copies its state into the run's driver, from which results
 *     and checkpoints come exactly as for a solo run.
 * One scheduler thread per started batch does the scheduling; the caller's
 * calls only change requests under the batch's mutex and wake it. Lock
 * order: the batch's mutex, then a run's.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/hash.h"
#include "common/log.h"
#include "cuda/batch.h"
#include "cuda/gpu.h"
#include "cuda/launch.h"
#include "cuda/run.h"
#include "model/design.h"
#include "opt/backend.h"
#include "opt/checkpoint.h"
#include "opt/driver.h"
#include "opt/options.h"
#include "opt/run_impl.h"
#include "persolve_gpu.h"
#include "tune/cache.h"
#include "tune/gpu_options.h"
#include "tune/tune.h"

/* Where a problem is, as the batch sees it. */
enum { IT_QUEUED = 0, IT_RUNNING = 1, IT_PARKED = 2, IT_FINISHED = 3 };

typedef struct item {
    const ps_problem *p; /* borrowed */
    double *x0;          /* [nx] the start pulse */
    void *blob;          /* a restored run's checkpoint, until its run exists */
    size_t blob_len;
    ps_run *r;           /* its run, once set up (CPU: when first scheduled) */
    int state;           /* IT_* */
    int paused;          /* ps_batch_pause: park it, keep it parked */
    int cancel;          /* ps_batch_cancel: end it */
    int status;          /* final status once FINISHED */
    uint64_t order;      /* queue order (smaller first) */
    /* GPU */
    int inq;             /* pushed onto the device queue, no exit since */
    uint64_t exits;      /* exits seen */
    int tail;            /* its run's driver lacks the device's vectors (taken
                          * at an exit: ps_gpu_run_download_head) */
} item;

struct ps_batch {
    ps_options o;         /* validated copy (o.gpu points to gpu_o) */
    ps_gpu_options gpu_o;
    ps_backend use;
    int fell_back;
    pthread_mutex_t mu;
    pthread_cond_t cv;    /* state changes (the scheduler broadcasts) and requests */
    item *items;
    size_t n, cap;
    item **pick;          /* [cap]: the problems a GPU scheduler pass queues, in order */
    int state;            /* ps_batch_state */
    int yield_req;        /* a yield of the whole batch asked for and not withdrawn */
    int quit;             /* the scheduler ends (ps_batch_free) */
    int error;            /* a launch error of the batch */
    uint64_t qseq;
    pthread_t thread;
    int thread_live;
    double t0, t_done;    /* monotonic start of the current running stretch; seconds before it */
    /* CPU */
    int workers;
    /* GPU */
    ps_gpu_batch *gb;
    ps_gpu_scratch scratch; /* the problems' set-up images, one after the other */
    int stream_setup;       /* the start set up the first problems only (gpu_setup_more the rest) */
    size_t setup_next;      /* items before it set up or finished (gpu_setup_more) */
    int team_blocks, block;
    double setup_seconds; /* host time of the problems' device setup */
};

/* ---- problems ---- */

/* The final status of a run that finished (run mutex not held). */
static int run_status(ps_run *r)
{
    return ps_run_wait(r, 0.0, NULL, NULL);
}

/* A problem ended without a run (a setup error). */
static void item_fail(item *it, int st)
{
    it->status = st;
    it->state = IT_FINISHED;
}

static void item_queue(ps_batch *b, item *it)
{
    it->order = ++b->qseq;
    it->state = IT_QUEUED;
}

/* ---- the GPU backend ---- */

/* The command of problem it's kernel-side control block. */
static void gpu_command(ps_batch *b, item *it)
{
    int cmd = PS_GPU_CMD_NONE;
    if (it->cancel)
        cmd = PS_GPU_CMD_CANCEL;
    else if (it->paused)
        cmd = PS_GPU_CMD_PAUSE;
    else if (b->yield_req)
        cmd = PS_GPU_CMD_YIELD;
    if (it->r && it->r->gpu)
        ps_gpu_run_command(it->r->gpu, cmd);
}

/* The team shape a problem is set up for: the batch's block, team_blocks
 * blocks, the tile of the heuristic (or the options' forced tile), no
 * register cap. */
static ps_gpu_config team_config(const ps_batch *b)
{
    ps_gpu_config cfg = {b->team_blocks, b->block, 0, 0, 0};
    const ps_gpu_options *g = ps_gpu_options_of(&b->o);
    if (g->gpu_spins_per_tile) {
        cfg.sb = g->gpu_spins_per_tile;
        cfg.segs = b->block / cfg.sb;
    }
    return cfg;
}

/* The shared memory a block of problem it's team needs, from its launch
 * shape alone (what its set-up will take); 0 when the shape cannot be
 * resolved (its set-up then fails with the reason). */
static size_t item_smem(const ps_batch *b, const item *it)
{
    if (it->r && it->r->gpu) {
        ps_gpu_config c;
        size_t s;
        ps_gpu_run_shape(it->r->gpu, &c, &s);
        return s;
    }
    const ps_gpu_config in = team_config(b);
    ps_gpu_config c;
    if (ps_gpu_resolve_config(it->p, &b->o, &in, &c))
        return 0;
    return ps_gpu_config_smem(it->p, b->o.precision, &c, 1);
}

/* A problem's run on the device at the team shape (team_config); its
 * upload image in scratch. */
static int gpu_setup_run(ps_batch *b, item *it, ps_gpu_scratch *scratch)
{
    ps_run *r;
    int st = ps_run_impl_create(it->p, &b->o, it->x0, b->fell_back, &r);
    if (st)
        return st;
    if (it->blob) {
        st = ps_checkpoint_load(it->p, &r->o, it->blob, it->blob_len, &r->drv);
        if (!st)
            ps_design_pulse_of_x(it->p, r->drv.x, r->x0);
    }
    if (!st) {
        const ps_gpu_config cfg = team_config(b);
        st = ps_gpu_run_create(it->p, &r->o, &cfg, r->drv.x, scratch, &r->gpu);
        if (!st && (r->drv.s.phase != PS_PHASE_START || r->drv.s.restart))
            st = ps_gpu_run_upload(r->gpu, &r->drv);
    }
    if (st) {
        ps_run_impl_destroy(r);
        return st;
    }
    free(it->blob);
    it->blob = NULL;
    it->r = r;
    pthread_mutex_lock(&r->mu);
    if (ps_driver_done(&r->drv)) {
        ps_run_impl_finish(r);
    } else {
        r->state = PS_RUN_RUNNING;
        ps_run_impl_publish(r);
    }
    pthread_mutex_unlock(&r->mu);
    return PS_CONVERGED;
}

/* The same, its host time added to the batch's set-up seconds. */
static int gpu_setup(ps_batch *b, item *it)
{
    const double t = ps_monotonic_seconds();
    int st = gpu_setup_run(b, it, &b->scratch);
    b->setup_seconds += ps_monotonic_seconds() - t;
    return st;
}

/* The set-ups at the start, shared by the caller and up to
 * SETUP_THREADS - 1 workers: each takes the next candidate (each
 * problem's set-up touches only its own item and run, and CUDA's calls
 * are thread-safe); the caller's image buffer is the batch's, each
 * worker has its own. */
enum { SETUP_THREADS = 4, SETUP_PER_THREAD = 8 };

typedef struct setup_share {
    ps_batch *b;
    size_t end;  /* items 0..end-1 are the candidates */
    size_t next; /* the next candidate (atomic) */
    int device;  /* the caller's current device */
} setup_share;

/* A problem the start sets up: neither finished nor set up. */
static int setup_wanted(const item *it)
{
    return it->state != IT_FINISHED && !it->r;
}

static void setup_take(setup_share *sh, ps_gpu_scratch *scratch)
{
    for (;;) {
        const size_t k = __atomic_fetch_add(&sh->next, 1, __ATOMIC_RELAXED);
        if (k >= sh->end)
            return;
        item *it = &sh->b->items[k];
        if (!setup_wanted(it))
            continue;
        const int st = gpu_setup_run(sh->b, it, scratch);
        if (st)
            item_fail(it, st);
    }
}

static void *setup_worker(void *arg)
{
    setup_share *sh = arg;
    ps_gpu_scratch scratch = {NULL, 0};
    ps_gpu_device_use(sh->device);
    setup_take(sh, &scratch);
    free(scratch.p);
    return NULL;
}

/* The first `most` problems not set up yet (and not finished), on one
 * thread or, with many, several (README "Batches", Set-up); the wall time
 * is added to the set-up seconds. */
static void gpu_setup_first(ps_batch *b, size_t most)
{
    const double t = ps_monotonic_seconds();
    size_t n = 0, end = 0;
    while (end < b->n && n < most)
        n += (size_t)setup_wanted(&b->items[end++]);
    setup_share sh = {b, end, 0, ps_gpu_device_current()};
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    size_t want = n / SETUP_PER_THREAD;
    if (want > SETUP_THREADS)
        want = SETUP_THREADS;
    if (cores > 0 && want > (size_t)cores)
        want = (size_t)cores;
    pthread_t th[SETUP_THREADS];
    size_t started = 0;
    for (size_t w = 1; w < want; w++)
        if (pthread_create(&th[started], NULL, setup_worker, &sh) == 0)
            started++;
    setup_take(&sh, &b->scratch);
    for (size_t w = 0; w < started; w++)
        pthread_join(th[w], NULL);
    b->setup_seconds += ps_monotonic_seconds() - t;
}

/* Attach a set-up problem to the kernel's batch; errors finish it. */
static void gpu_attach(ps_batch *b, size_t i)
{
    item *it = &b->items[i];
    int st = ps_gpu_batch_attach(b->gb, (int)i, it->r->gpu);
    if (st) {
        ps_run_impl_destroy(it->r);
        it->r = NULL;
        item_fail(it, st);
        return;
    }
    if (ps_driver_done(&it->r->drv))
        item_fail(it, run_status(it->r));
}

/* The batch kernel's shape (README "Batches"): b->block and
 * b->team_blocks. With no team size forced
 * (options.batch_team_blocks), tune_cache set and every unfinished
 * problem of one size class: the tune cache's entry for that class and
 * their number (ps_gpu_tune_batch) if it is valid. Else the heuristics:
 * the block of ps_tune_batch_block (options.gpu_block when forced) and the
 * forced team size or ps_tune_team_default's. Where they came from is
 * logged (info): the batch's report has no field for it. */
static int batch_kernel_shape(ps_batch *b, int sms)
{
    const ps_gpu_options *g = ps_gpu_options_of(&b->o);
    size_t n = 0, ns = 0, nt = 0;
    const ps_problem *first = NULL;
    int one_class = 1, single = 1;
    ps_tune_class c0, c;
    for (size_t i = 0; i < b->n; i++) {
        const item *it = &b->items[i];
        if (it->state == IT_FINISHED)
            continue;
        n++;
        if (ps_problem_ns(it->p) > ns)
            ns = ps_problem_ns(it->p);
        if (ps_problem_nt(it->p) > nt)
            nt = ps_problem_nt(it->p);
        if (ps_gpu_channels(it->p) != 0)
            single = 0;
        if (!first) {
            first = it->p;
            ps_tune_problem_class(first, b->o.precision, &c0);
        } else if (one_class) {
            ps_tune_problem_class(it->p, b->o.precision, &c);
            one_class = !memcmp(&c, &c0, sizeof c);
        }
    }
    if (!g->batch_team_blocks && g->tune_cache && first && one_class) {
        ps_tune_entry e;
        char path[1024];
        const int t = ps_tune_cached_shape(first, &b->o, n, sms, &b->block, &e, path, sizeof path);
        if (t > 0) {
            ps_log(&b->o, PS_LOG_INFO, __FILE__, __LINE__,
                   "batch team size from the tune cache %s: %d blocks of %d threads per team for %zu problems "
                   "(measured %.4g ms per iteration on %s)",
                   path, t, b->block, n, 1e3 * e.seconds_per_iteration, e.date);
            b->team_blocks = t;
            return PS_CONVERGED;
        }
    }
    b->block = ps_tune_batch_block(g, single, nt);
    int bps;
    const int fit = ps_tune_batch_kernel_fit(&b->o, b->block, &bps);
    if (fit)
        return fit;
    const int resident = bps * sms;
    if (g->batch_team_blocks) {
        ps_log(&b->o, PS_LOG_INFO, __FILE__, __LINE__,
               "batch team size %d blocks of %d threads: forced (options.batch_team_blocks)", g->batch_team_blocks,
               b->block);
        b->team_blocks = g->batch_team_blocks;
    } else {
        b->team_blocks = ps_tune_team_default(g, resident, n, b->block, single, ns);
        ps_log(&b->o, PS_LOG_INFO, __FILE__, __LINE__,
               "batch team size %d blocks of %d threads: the heuristic (%d co-resident blocks over %zu problems%s)",
               b->team_blocks, b->block, resident, n,
               g->tune_cache && !one_class ? "; the tune cache has no entry for problems of several size classes"
                                           : "");
    }
    PS_RETURN_ERROR_IF(&b->o, b->team_blocks > resident, PS_ERR_OPTION,
                       "options.batch_team_blocks: %d exceeds the %d co-resident blocks", b->team_blocks, resident);
    return PS_CONVERGED;
}

/* At the start: the team shape, every problem set up, the kernel's batch. */
static int gpu_start(ps_batch *b)
{
    ps_gpu_identity id;
    if (ps_gpu_device_identity(0, &id))
        return PS_ERR_NO_GPU;
    int st = batch_kernel_shape(b, id.sms);
    if (st)
        return st;
    /* the blocks' shared memory: the most a problem's shape needs; the
     * problems to set up (todo) */
    size_t smem = 0, todo = 0;
    int kclass = -1;
    b->stream_setup = 1; /* one kernel class: the lean kernel serves them all */
    b->setup_next = 0;
    for (size_t i = 0; i < b->n; i++) {
        const item *it = &b->items[i];
        if (it->state == IT_FINISHED)
            continue;
        todo += (size_t)setup_wanted(it);
        const size_t s = item_smem(b, it);
        if (s > smem)
            smem = s;
        const int k = PS_GPU_CLASS_BASE(ps_gpu_kernel_class(it->p));
        if (kclass >= 0 && k != kclass)
            b->stream_setup = 0;
        kclass = k;
    }
    /* the control blocks of every set-up now, those after the launch too:
     * no pinned allocation beside the kernel for them */
    st = ps_gpu_run_reserve(todo);
    PS_RETURN_ERROR_IF(&b->o, st, st, "batch: pinned memory for the control blocks of %zu problems", todo);
    st = ps_gpu_batch_create(&b->o, b->o.precision, b->block, b->team_blocks, smem, PS_BATCH_MAX, &b->gb);
    if (st)
        return st;
    /* the problems the teams take first now, the others while the kernel
     * runs (gpu_setup_more); problems of several kernel classes all now (a
     * launch's kernel is chosen from what is queued at the launch) */
    gpu_setup_first(b, b->stream_setup ? (size_t)ps_gpu_batch_teams(b->gb) : (size_t)-1);
    for (size_t i = 0; i < b->n; i++)
        if (b->items[i].r && b->items[i].state != IT_FINISHED)
            gpu_attach(b, i);
    return PS_CONVERGED;
}

/* While the kernel runs: set-ups of queued problems that have none yet, in
 * order, for about budget seconds (the scheduler holds the batch's mutex
 * meanwhile); each is attached and then queued by gpu_step. The items
 * before b->setup_next are all set up or finished (a problem never loses
 * its run but by finishing), so a pass starts there; a paused problem not
 * set up yet holds that mark where it is until it is set up. */
static void gpu_setup_more(ps_batch *b, double budget)
{
    const double t0 = ps_monotonic_seconds();
    int settled = 1; /* every item before i set up or finished */
    for (size_t i = b->setup_next; i < b->n; i++) {
        item *it = &b->items[i];
        const int now = setup_wanted(it) && it->state == IT_QUEUED;
        if (now) {
            const int st = gpu_setup(b, it);
            if (st)
                item_fail(it, st);
            else
                gpu_attach(b, i);
        }
        settled = settled && !setup_wanted(it);
        if (settled)
            b->setup_next = i + 1;
        if (now && ps_monotonic_seconds() - t0 > budget)
            return;
    }
}

/* Run r ended by the error st (its mutex held): the solve finished with it. */
static void run_fail(ps_run *r, int st)
{
    r->drv.error = st;
    if (!ps_driver_done(&r->drv))
        ps_solver_finish(&r->drv.s, st);
}

/* Problem it's run has finished (its mutex held, released here): the run
 * published as finished, the problem's status its. */
static void item_finish_run(item *it)
{
    ps_run *r = it->r;
    ps_run_impl_finish(r);
    pthread_mutex_unlock(&r->mu);
    it->status = run_status(r);
    it->state = IT_FINISHED;
}

/* A problem left its team (or was skipped): its state into its run, all
 * but the vectors, which stay on the device until a checkpoint wants them
 * (item_blob): the copies of a batch's exits are the scheduler's, one
 * after the other, and most problems finish without one. */
static void gpu_exited(ps_batch *b, item *it, int reason)
{
    ps_run *r = it->r;
    it->inq = 0;
    pthread_mutex_lock(&r->mu);
    int st = ps_gpu_run_download_head(r->gpu, &r->drv);
    it->tail = 1;
    if (st)
        run_fail(r, st);
    if (it->cancel && !ps_driver_done(&r->drv))
        ps_driver_cancel(&r->drv);
    if (reason == PS_GPU_EXIT_FINISHED || ps_driver_done(&r->drv)) {
        item_finish_run(it);
        return;
    }
    if (it->paused || b->yield_req) {
        /* parked: PAUSED for a pause of the problem, YIELDED for the batch's */
        r->state = it->paused ? PS_RUN_PAUSED : PS_RUN_YIELDED;
        r->heartbeat++;
        ps_run_impl_publish(r);
        pthread_mutex_unlock(&r->mu);
        if (it->paused)
            it->state = IT_PARKED;
        else
            item_queue(b, it); /* back in the queue when the batch resumes */
        return;
    }
    pthread_mutex_unlock(&r->mu);
    item_queue(b, it); /* a pause withdrawn after the kernel took it: on */
}

/* A problem ended by the batch's error st: its run, if it has one, too
 * (as gpu_exited ends a failed download), so that its result and snapshot
 * say so. */
static void gpu_item_fail(item *it, int st)
{
    it->inq = 0;
    if (!it->r) {
        item_fail(it, st);
        return;
    }
    pthread_mutex_lock(&it->r->mu);
    run_fail(it->r, st);
    item_finish_run(it);
}

/* qsort: items by queue order. */
static int by_order(const void *x, const void *y)
{
    const item *a = *(item *const *)x, *b = *(item *const *)y;
    return (a->order > b->order) - (a->order < b->order);
}

/* One pass of the GPU scheduler (batch mutex held). */
static void gpu_step(ps_batch *b)
{
    int running = ps_gpu_batch_running(b->gb);
    if (running < 0) {
        b->error = running;
        running = 0;
    }
    if (!running)
        ps_gpu_batch_sync(b->gb);
    /* exits (after the kernel's end too: its last ones) */
    for (size_t i = 0; i < b->n; i++) {
        item *it = &b->items[i];
        if (!it->inq)
            continue;
        int reason;
        const uint64_t n = ps_gpu_batch_exit(b->gb, (int)i, &reason);
        if (n > it->exits) {
            it->exits = n;
            gpu_exited(b, it, reason);
        }
    }
    /* the kernel failed (or could not be launched): no launch follows, so
     * every problem not finished (queued, paused, not yet set up) ends with
     * the error instead of waiting for one */
    if (!running && b->error)
        for (size_t i = 0; i < b->n; i++)
            if (b->items[i].state != IT_FINISHED)
                gpu_item_fail(&b->items[i], b->error);
    /* running problems seen from their runs */
    for (size_t i = 0; i < b->n; i++) {
        item *it = &b->items[i];
        if (it->inq && it->state == IT_QUEUED)
            it->state = IT_RUNNING; /* on the device queue or a team */
    }
    if (b->yield_req)
        return;
    /* queued problems onto the device queue, in order; while a lean kernel
     * (one path) runs, only those of its path: the others wait for the next
     * launch, which takes the mixed kernel when the paths differ */
    const int kpath = running ? ps_gpu_batch_launched_path(b->gb) : -1;
    size_t k = 0;
    for (size_t i = 0; i < b->n; i++) {
        item *it = &b->items[i];
        if (it->state == IT_QUEUED && !it->inq && it->r &&
            (kpath < 0 || ps_gpu_batch_path(it->r->gpu) == kpath))
            b->pick[k++] = it;
    }
    if (k > 1)
        qsort(b->pick, k, sizeof *b->pick, by_order);
    for (size_t j = 0; j < k; j++) {
        item *next = b->pick[j];
        gpu_command(b, next);
        pthread_mutex_lock(&next->r->mu);
        next->r->state = PS_RUN_RUNNING;
        ps_run_impl_publish(next->r);
        pthread_mutex_unlock(&next->r->mu);
        next->inq = 1;
        next->state = IT_RUNNING;
        ps_gpu_batch_push(b->gb, (int)(next - b->items));
    }
    /* a launch for what is queued: the lean kernel of their path when they
     * share one, else the mixed kernel */
    int pending = 0, path = -2;
    for (size_t i = 0; i < b->n; i++)
        if (b->items[i].inq) {
            const int p = ps_gpu_batch_path(b->items[i].r->gpu);
            pending = 1;
            path = path == -2 || path == p ? p : -1;
        }
    if (pending && !running && !b->error) {
        int st = ps_gpu_batch_launch(b->gb, path);
        if (st)
            b->error = st;
    }
    /* after the launch, which they would delay: set-ups of problems still
     * without one, queued at the next pass (when the kernel has drained
     * meanwhile, that costs the next launch one pass, about 50 us) */
    if (b->stream_setup && !b->error)
        gpu_setup_more(b, 1e-3);
}

/* ---- the CPU backend ---- */

static void cpu_step(ps_batch *b)
{
    int running = 0;
    for (size_t i = 0; i < b->n; i++) {
        item *it = &b->items[i];
        if (it->state != IT_RUNNING)
            continue;
        ps_snapshot s;
        ps_run_snapshot(it->r, &s);
        if (s.state == PS_RUN_FINISHED) {
            it->status = s.status;
            it->state = IT_FINISHED;
        } else if (s.state == PS_RUN_YIELDED) {
            if (it->cancel) {
                ps_run_cancel(it->r);
                it->status = run_status(it->r);
                it->state = IT_FINISHED;
            } else if (it->paused) {
                it->state = IT_PARKED;
            } else {
                item_queue(b, it); /* the batch's yield, or a pause withdrawn */
            }
        } else {
            running++;
        }
    }
    if (b->yield_req)
        return;
    while (running < b->workers) {
        item *next = NULL;
        for (size_t i = 0; i < b->n; i++) {
            item *it = &b->items[i];
            if (it->state == IT_QUEUED && (!next || it->order < next->order))
                next = it;
        }
        if (!next)
            break;
        int st = PS_CONVERGED;
        if (next->r) {
            st = ps_run_resume(next->r);
        } else {
            ps_options o1 = b->o;
            o1.threads = 1; /* the problem's shape: one thread */
            o1.backend = PS_BACKEND_CPU;
            o1.progress = NULL;
            st = next->blob ? ps_solve_resume(next->p, &o1, next->blob, next->blob_len, &next->r)
                            : ps_solve_start(next->p, &o1, next->x0, &next->r);
            free(next->blob);
            next->blob = NULL;
        }
        if (st) {
            item_fail(next, st);
            continue;
        }
        next->state = IT_RUNNING;
        running++;
    }
}

/* ---- the scheduler ---- */

static int all_finished(const ps_batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->items[i].state != IT_FINISHED)
            return 0;
    return 1;
}

/* The kernel runs (GPU), or a worker solves (CPU). */
static int any_running(const ps_batch *b)
{
    if (b->gb)
        return ps_gpu_batch_running(b->gb) == 1;
    for (size_t i = 0; i < b->n; i++)
        if (b->items[i].state == IT_RUNNING)
            return 1;
    return 0;
}

static double batch_seconds(const ps_batch *b)
{
    return b->state == PS_BATCH_RUNNING ? b->t_done + ps_monotonic_seconds() - b->t0 : b->t_done;
}

static void *scheduler(void *arg)
{
    ps_batch *b = arg;
    pthread_mutex_lock(&b->mu);
    while (!b->quit) {
        if (b->state == PS_BATCH_RUNNING) {
            if (b->use == PS_BACKEND_GPU)
                gpu_step(b);
            else
                cpu_step(b);
            if (b->yield_req && !any_running(b)) {
                if (b->gb)
                    gpu_step(b); /* the ended kernel's last exits, and its time */
                b->t_done = batch_seconds(b);
                b->state = PS_BATCH_YIELDED;
                pthread_cond_broadcast(&b->cv);
            } else if (all_finished(b) && !any_running(b)) {
                if (b->gb)
                    ps_gpu_batch_sync(b->gb); /* its time */
                b->t_done = batch_seconds(b);
                b->state = PS_BATCH_FINISHED;
                pthread_cond_broadcast(&b->cv);
            }
        }
        /* the GPU's exits are looked at every 50 us while its kernel runs;
         * the CPU's runs every millisecond */
        const double tick = b->state != PS_BATCH_RUNNING ? 1.0 : b->use == PS_BACKEND_GPU ? 50e-6 : 1e-3;
        const struct timespec t = ps_monotonic_after(tick);
        pthread_cond_timedwait(&b->cv, &b->mu, &t);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

/* ---- the API ---- */

static int batch_new(const ps_options *o, ps_batch **out)
{
    ps_batch *b = calloc(1, sizeof *b);
    if (!b)
        return PS_ERR_NO_MEMORY;
    int st = ps_take_options(o, &b->o);
    if (!st && b->o.gpu) {
        b->gpu_o = *b->o.gpu;
        b->o.gpu = &b->gpu_o;
        if (b->gpu_o.gpus > 1 || b->gpu_o.gpus < 0) { /* its problems are small: one GPU's teams */
            ps_log(&b->o, PS_LOG_ERROR, __FILE__, __LINE__,
                   "options.gpu->gpus %d: a batch runs on one GPU (its problems in teams of its blocks)",
                   b->gpu_o.gpus);
            st = PS_ERR_OPTION;
        }
    }
    if (!st)
        st = ps_pick_backend(&b->o, &b->use, &b->fell_back);
    if (st) {
        free(b);
        return st;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (b->o.threads > 0) {
        b->workers = b->o.threads;
    } else {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        b->workers = c > 0 ? (int)c : 1;
    }
    b->state = PS_BATCH_IDLE;
    *out = b;
    return PS_CONVERGED;
}

int ps_batch_create(const ps_options *o, ps_batch **out)
{
    if (!out)
        return PS_ERR_NULL;
    *out = NULL;
    return batch_new(o, out);
}

/* Room for one more problem (mutex held). */
static int grow(ps_batch *b)
{
    if (b->n < b->cap)
        return PS_CONVERGED;
    if (b->n >= PS_BATCH_MAX)
        return PS_ERR_SIZE;
    size_t cap = b->cap ? 2 * b->cap : 16;
    if (cap > PS_BATCH_MAX)
        cap = PS_BATCH_MAX;
    item *v = realloc(b->items, cap * sizeof *v);
    if (!v)
        return PS_ERR_NO_MEMORY;
    b->items = v;
    item **pick = realloc(b->pick, cap * sizeof *pick);
    if (!pick)
        return PS_ERR_NO_MEMORY;
    b->pick = pick;
    b->cap = cap;
    return PS_CONVERGED;
}

/* A new problem (mutex held); x0 NULL: the problem's. */
static int add_item(ps_batch *b, const ps_problem *p, const double *x0, size_t *index)
{
    int st = grow(b);
    if (st) {
        if (st == PS_ERR_SIZE)
            ps_log(&b->o, PS_LOG_ERROR, __FILE__, __LINE__, "a batch holds at most %d problems", PS_BATCH_MAX);
        return st;
    }
    const size_t n = ps_problem_nx(p);
    item *it = &b->items[b->n];
    memset(it, 0, sizeof *it);
    it->p = p;
    it->x0 = malloc(n * sizeof(double));
    if (!it->x0)
        return PS_ERR_NO_MEMORY;
    if (x0)
        memcpy(it->x0, x0, n * sizeof(double));
    else
        ps_problem_x0(p, it->x0);
    if (index)
        *index = b->n;
    b->n++;
    item_queue(b, it);
    return PS_CONVERGED;
}

int ps_batch_add(ps_batch *b, const ps_problem *p, const double *x0, size_t *index)
{
    if (!b || !p)
        return PS_ERR_NULL;
    pthread_mutex_lock(&b->mu);
    size_t i = b->n;
    int st = add_item(b, p, x0, &i);
    if (!st) {
        if (index)
            *index = i;
        item *it = &b->items[i];
        st = ps_check_x(&b->o, it->x0, ps_problem_nx(p));
        if (st) {
            item_fail(it, st);
        } else if (b->use == PS_BACKEND_GPU && b->gb) {
            /* started: set up for the team shape now, queued by the scheduler */
            st = gpu_setup(b, it);
            if (st)
                item_fail(it, st);
            else
                gpu_attach(b, i);
            if (it->state == IT_FINISHED)
                st = it->status < 0 ? it->status : PS_CONVERGED;
        }
        if (b->state == PS_BATCH_FINISHED && it->state != IT_FINISHED) {
            b->state = PS_BATCH_RUNNING;
            b->t0 = ps_monotonic_seconds();
        }
        pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    return st;
}

int ps_batch_start(ps_batch *b)
{
    if (!b)
        return PS_ERR_NULL;
    pthread_mutex_lock(&b->mu);
    int st = PS_CONVERGED;
    if (b->state != PS_BATCH_IDLE || b->thread_live) {
        ps_log(&b->o, PS_LOG_ERROR, __FILE__, __LINE__, "batch already started");
        st = PS_ERR_STATE;
        goto out;
    }
    if (b->use == PS_BACKEND_GPU) {
        st = gpu_start(b);
        if (st && b->o.backend == PS_BACKEND_AUTO && ps_gpu_can_fall_back(st)) {
            ps_log(&b->o, PS_LOG_WARNING, __FILE__, __LINE__,
                   "backend auto: GPU batch unavailable (%s), running on the CPU", ps_strerror(st));
            for (size_t i = 0; i < b->n; i++)
                if (b->items[i].r) {
                    ps_run_impl_destroy(b->items[i].r);
                    b->items[i].r = NULL;
                    if (b->items[i].state == IT_FINISHED)
                        item_queue(b, &b->items[i]);
                }
            ps_gpu_batch_free(b->gb);
            b->gb = NULL;
            b->use = PS_BACKEND_CPU;
            b->fell_back = 1;
            st = PS_CONVERGED;
        }
        if (st)
            goto out;
    }
    b->state = PS_BATCH_RUNNING;
    b->t0 = ps_monotonic_seconds();
    if (pthread_create(&b->thread, NULL, scheduler, b) != 0) {
        b->state = PS_BATCH_IDLE;
        st = PS_ERR_NO_MEMORY;
        goto out;
    }
    b->thread_live = 1;
out:
    pthread_mutex_unlock(&b->mu);
    return st;
}

int ps_batch_progress(const ps_batch *cb, ps_batch_report *out)
{
    if (!cb || !out)
        return PS_ERR_NULL;
    ps_batch *b = (ps_batch *)cb; /* the lock is not part of the value */
    ps_batch_report v;
    memset(&v, 0, sizeof v);
    pthread_mutex_lock(&b->mu);
    int64_t slow = -1, slow_all = -1;
    for (size_t i = 0; i < b->n; i++) {
        const item *it = &b->items[i];
        int64_t iters = 0;
        if (it->r) {
            ps_snapshot s;
            ps_run_snapshot(it->r, &s);
            iters = s.iteration;
        }
        v.iterations += iters;
        if (slow_all < 0 || iters < slow_all)
            slow_all = iters;
        int state = it->state;
        if (state == IT_RUNNING && b->gb && b->state != PS_BATCH_RUNNING)
            state = IT_QUEUED; /* on the device queue of a yielded batch */
        switch (state) {
        case IT_QUEUED: v.queued++; break;
        case IT_RUNNING: v.running++; break;
        case IT_PARKED: v.paused++; break;
        default:
            v.finished++;
            v.failed += it->status < 0;
            break;
        }
        if (it->state != IT_FINISHED && (slow < 0 || iters < slow))
            slow = iters;
    }
    v.problems = b->n;
    v.slowest_iteration = slow >= 0 ? slow : slow_all >= 0 ? slow_all : 0;
    v.seconds = batch_seconds(b);
    v.state = b->state;
    if (b->state != PS_BATCH_IDLE)
        v.teams = b->gb ? ps_gpu_batch_teams(b->gb) : b->workers;
    if (b->gb) {
        v.team_blocks = b->team_blocks;
        v.block = b->block;
        v.team_barrier = ps_gpu_batch_barrier(b->gb);
        v.kernel_seconds = ps_gpu_batch_kernel_seconds(b->gb);
    }
    v.setup_seconds = b->setup_seconds;
    pthread_mutex_unlock(&b->mu);
    *out = v;
    return PS_CONVERGED;
}

#define CHECK_INDEX(b, i)                                                                          \
    do {                                                                                           \
        if ((i) >= (b)->n) {                                                                       \
            ps_log(&(b)->o, PS_LOG_ERROR, __FILE__, __LINE__, "batch problem %zu of %zu", (size_t)(i), \
                   (b)->n);                                                                        \
            pthread_mutex_unlock(&(b)->mu);                                                        \
            return PS_ERR_SIZE;                                                                    \
        }                                                                                          \
    } while (0)

int ps_batch_snapshot(const ps_batch *cb, size_t i, ps_snapshot *s)
{
    if (!cb || !s)
        return PS_ERR_NULL;
    ps_batch *b = (ps_batch *)cb;
    pthread_mutex_lock(&b->mu);
    CHECK_INDEX(b, i);
    const item *it = &b->items[i];
    if (it->r) {
        ps_run_snapshot(it->r, s);
    } else {
        memset(s, 0, sizeof *s);
        s->state = it->state == IT_FINISHED ? PS_RUN_FINISHED : it->state == IT_PARKED ? PS_RUN_PAUSED
                                                                                         : PS_RUN_RUNNING;
        s->status = it->state == IT_FINISHED ? it->status : PS_RUNNING;
        s->phase = it->state == IT_FINISHED ? PS_PHASE_DONE : PS_PHASE_START;
        s->idle = it->state != IT_RUNNING && it->state != IT_QUEUED;
    }
    if (it->state == IT_PARKED) {
        s->state = PS_RUN_PAUSED;
        s->idle = 1;
    }
    pthread_mutex_unlock(&b->mu);
    return PS_CONVERGED;
}

/* Pause, resume or cancel one problem (mutex held). */
static int pause_one(ps_batch *b, item *it)
{
    if (it->state == IT_FINISHED)
        return PS_ERR_STATE;
    if (it->paused)
        return PS_CONVERGED;
    it->paused = 1;
    if (it->state == IT_QUEUED && !it->inq) {
        it->state = IT_PARKED;
        /* a GPU problem's run says PAUSED (it has no worker of its own); a
         * CPU problem's run stays YIELDED, so that resuming it starts its
         * worker again */
        if (it->r && it->r->gpu) {
            pthread_mutex_lock(&it->r->mu);
            it->r->state = PS_RUN_PAUSED;
            ps_run_impl_publish(it->r);
            pthread_mutex_unlock(&it->r->mu);
        }
    } else if (b->use == PS_BACKEND_GPU) {
        gpu_command(b, it);
    } else if (it->state == IT_RUNNING) {
        ps_run_yield(it->r);
    }
    return PS_CONVERGED;
}

static int resume_one(ps_batch *b, item *it)
{
    if (it->state == IT_FINISHED || !it->paused)
        return PS_ERR_STATE;
    it->paused = 0;
    if (it->state == IT_PARKED) {
        item_queue(b, it);
    } else if (b->use == PS_BACKEND_GPU) {
        gpu_command(b, it); /* withdrawn before the kernel obeyed */
    } else if (it->state == IT_RUNNING) {
        ps_run_resume(it->r); /* withdraw the yield, if not yet obeyed */
    }
    return PS_CONVERGED;
}

static void cancel_one(ps_batch *b, item *it)
{
    if (it->state == IT_FINISHED)
        return;
    it->cancel = 1;
    if ((it->state == IT_QUEUED && !it->inq) || it->state == IT_PARKED) {
        if (it->r) {
            ps_run_cancel(it->r);
            if (it->r->state != PS_RUN_FINISHED) { /* a GPU problem's run (no worker) */
                pthread_mutex_lock(&it->r->mu);
                ps_driver_cancel(&it->r->drv);
                ps_run_impl_finish(it->r);
                pthread_mutex_unlock(&it->r->mu);
            }
            it->status = run_status(it->r);
        } else {
            it->status = PS_CANCELLED;
        }
        it->state = IT_FINISHED;
    } else if (b->use == PS_BACKEND_GPU) {
        gpu_command(b, it);
    } else {
        ps_run_cancel(it->r);
    }
}

typedef int (*one_fn)(ps_batch *, item *);

static int for_problems(ps_batch *b, size_t i, one_fn fn, int all_ok)
{
    if (!b)
        return PS_ERR_NULL;
    pthread_mutex_lock(&b->mu);
    int st = PS_CONVERGED;
    if (i == PS_BATCH_ALL) {
        for (size_t k = 0; k < b->n; k++) {
            int s = fn(b, &b->items[k]);
            if (!all_ok && s)
                st = s;
        }
    } else {
        CHECK_INDEX(b, i);
        st = fn(b, &b->items[i]);
        if (st == PS_ERR_STATE)
            ps_log(&b->o, PS_LOG_ERROR, __FILE__, __LINE__, "batch problem %zu: nothing to %s", i,
                   fn == pause_one ? "pause (it has finished)" : "resume (it is not paused)");
    }
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return st;
}

int ps_batch_pause(ps_batch *b, size_t i)
{
    return for_problems(b, i, pause_one, 1);
}

/* Resume the whole batch after a yield (mutex held). */
static void resume_batch(ps_batch *b)
{
    if (!b->yield_req)
        return;
    b->yield_req = 0;
    if (b->gb) {
        for (size_t i = 0; i < b->n; i++)
            if (b->items[i].inq)
                gpu_command(b, &b->items[i]);
        ps_gpu_batch_stop(b->gb, 0);
    }
    if (b->state == PS_BATCH_YIELDED) {
        b->state = PS_BATCH_RUNNING;
        b->t0 = ps_monotonic_seconds();
    }
}

int ps_batch_resume(ps_batch *b, size_t i)
{
    if (!b)
        return PS_ERR_NULL;
    if (i == PS_BATCH_ALL) {
        pthread_mutex_lock(&b->mu);
        resume_batch(b);
        pthread_mutex_unlock(&b->mu);
        return for_problems(b, i, resume_one, 1);
    }
    return for_problems(b, i, resume_one, 0);
}

static int cancel_fn(ps_batch *b, item *it)
{
    cancel_one(b, it);
    return PS_CONVERGED;
}

int ps_batch_cancel(ps_batch *b, size_t i)
{
    if (b && i == PS_BATCH_ALL) {
        pthread_mutex_lock(&b->mu);
        resume_batch(b); /* the kernel runs again to end what it holds */
        pthread_mutex_unlock(&b->mu);
    }
    return for_problems(b, i, cancel_fn, 1);
}

int ps_batch_wait(ps_batch *b, double timeout_s)
{
    if (!b)
        return PS_ERR_NULL;
    if (timeout_s != timeout_s)
        return PS_ERR_NONFINITE;
    const struct timespec deadline = ps_monotonic_after(timeout_s > 0 ? timeout_s : 0.0);
    pthread_mutex_lock(&b->mu);
    int st = PS_RUNNING;
    for (;;) {
        if (b->state == PS_BATCH_FINISHED || (b->state == PS_BATCH_IDLE && all_finished(b))) {
            st = b->error ? b->error : PS_CONVERGED;
            break;
        }
        if (b->state == PS_BATCH_IDLE) {
            ps_log(&b->o, PS_LOG_ERROR, __FILE__, __LINE__, "wait on a batch not started");
            st = PS_ERR_STATE;
            break;
        }
        if (timeout_s == 0)
            break;
        if (timeout_s < 0)
            pthread_cond_wait(&b->cv, &b->mu);
        else if (pthread_cond_timedwait(&b->cv, &b->mu, &deadline) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&b->mu);
    return st;
}

int ps_batch_yield(ps_batch *b)
{
    if (!b)
        return PS_ERR_NULL;
    pthread_mutex_lock(&b->mu);
    if (b->state == PS_BATCH_RUNNING) {
        b->yield_req = 1;
        if (b->gb) {
            ps_gpu_batch_stop(b->gb, 1);
            for (size_t i = 0; i < b->n; i++)
                if (b->items[i].inq)
                    gpu_command(b, &b->items[i]);
        } else {
            for (size_t i = 0; i < b->n; i++)
                if (b->items[i].state == IT_RUNNING)
                    ps_run_yield(b->items[i].r);
        }
        pthread_cond_broadcast(&b->cv);
        while (b->state == PS_BATCH_RUNNING && b->yield_req)
            pthread_cond_wait(&b->cv, &b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    return PS_CONVERGED;
}

/* ---- checkpoints ---- */

/*
 * Layout (native byte order; a run's blob checks its own machine fields):
 *   "PSBATCH\0", u32 version 1, u32 reserved, u64 n,
 *   per problem: u32 kind (0 start pulse, 1 run checkpoint, 2 failed at
 *   setup), u32 paused, i32 status, u32 reserved, u64 len, len bytes (the
 *   pulse's nx doubles, the run's blob, nothing),
 *   u64 FNV-1a of everything before.
 */
#define PS_BATCH_MAGIC "PSBATCH"
enum { KIND_START = 0, KIND_RUN = 1, KIND_FAILED = 2 };

typedef struct buf {
    unsigned char *p;
    size_t len, cap;
    int err;
} buf;

static void put(buf *w, const void *data, size_t n)
{
    if (w->err)
        return;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + n)
            cap *= 2;
        unsigned char *q = realloc(w->p, cap);
        if (!q) {
            w->err = PS_ERR_NO_MEMORY;
            return;
        }
        w->p = q;
        w->cap = cap;
    }
    memcpy(w->p + w->len, data, n);
    w->len += n;
}

/* A run's checkpoint (batch mutex held, the problem not on a team). */
static int item_blob(item *it, void **blob, size_t *len)
{
    ps_run *r = it->r;
    if (!r->gpu)
        return ps_run_checkpoint(r, blob, len);
    pthread_mutex_lock(&r->mu);
    int st = PS_CONVERGED;
    if (it->tail && (st = ps_gpu_run_download_tail(r->gpu, &r->drv)) == PS_CONVERGED)
        it->tail = 0;
    if (!st)
        st = ps_checkpoint_save(r->p, &r->o, &r->drv, blob, len);
    pthread_mutex_unlock(&r->mu);
    return st;
}

int ps_batch_checkpoint(const ps_batch *cb, void **out, size_t *out_len)
{
    if (out)
        *out = NULL;
    if (out_len)
        *out_len = 0;
    if (!cb || !out || !out_len)
        return PS_ERR_NULL;
    ps_batch *b = (ps_batch *)cb;
    pthread_mutex_lock(&b->mu);
    int st = PS_CONVERGED;
    buf w = {0};
    if (b->state == PS_BATCH_RUNNING) {
        ps_log(&b->o, PS_LOG_ERROR, __FILE__, __LINE__, "checkpoint of a running batch: yield it first");
        st = PS_ERR_STATE;
        goto out;
    }
    put(&w, PS_BATCH_MAGIC, 8);
    {
        const uint32_t head[2] = {1, 0};
        const uint64_t n = b->n;
        put(&w, head, sizeof head);
        put(&w, &n, sizeof n);
    }
    for (size_t i = 0; i < b->n && !st; i++) {
        item *it = &b->items[i];
        void *blob = NULL;
        size_t len = 0;
        uint32_t kind = KIND_START;
        if (it->r) {
            kind = KIND_RUN;
            st = item_blob(it, &blob, &len);
        } else if (it->blob) {
            kind = KIND_RUN;
            blob = it->blob;
            len = it->blob_len;
        } else if (it->state == IT_FINISHED && it->status < 0) {
            kind = KIND_FAILED;
        } else if (it->state == IT_FINISHED) { /* cancelled before it ran */
            kind = KIND_FAILED;
        } else {
            blob = it->x0;
            len = ps_problem_nx(it->p) * sizeof(double);
        }
        if (st)
            break;
        const uint32_t h[4] = {kind, (uint32_t)it->paused, (uint32_t)it->status, 0};
        const uint64_t l = len;
        put(&w, h, sizeof h);
        put(&w, &l, sizeof l);
        put(&w, blob, len);
        if (kind == KIND_RUN && blob != it->blob)
            free(blob);
    }
    if (!st && !w.err) {
        const uint64_t sum = ps_fnv1a(PS_FNV_OFFSET, w.p, w.len);
        put(&w, &sum, sizeof sum);
    }
    if (!st)
        st = w.err;
out:
    pthread_mutex_unlock(&b->mu);
    if (st) {
        free(w.p);
        return st;
    }
    *out = w.p;
    *out_len = w.len;
    return PS_CONVERGED;
}

#define BAD_BLOB(o, ...)                                                                           \
    do {                                                                                           \
        ps_log((o), PS_LOG_ERROR, __FILE__, __LINE__, __VA_ARGS__);                                \
        st = PS_ERR_CHECKPOINT;                                                                    \
        goto out;                                                                                  \
    } while (0)

int ps_batch_restore(const ps_options *o, const ps_problem *const *problems, size_t n, const void *data,
                     size_t len, ps_batch **out)
{
    if (out)
        *out = NULL;
    if (!out || !data || (n && !problems))
        return PS_ERR_NULL;
    for (size_t i = 0; i < n; i++)
        if (!problems[i])
            return PS_ERR_NULL;
    ps_batch *b;
    int st = batch_new(o, &b);
    if (st)
        return st;
    const unsigned char *p = data, *end = p + len;
    uint32_t head[2];
    uint64_t count, sum;
    if (len < 8 + sizeof head + sizeof count + sizeof sum || memcmp(p, PS_BATCH_MAGIC, 8))
        BAD_BLOB(&b->o, "batch checkpoint: not a batch checkpoint, or truncated");
    memcpy(&sum, end - sizeof sum, sizeof sum);
    if (ps_fnv1a(PS_FNV_OFFSET, p, len - sizeof sum) != sum)
        BAD_BLOB(&b->o, "batch checkpoint: checksum mismatch (corrupted or truncated)");
    end -= sizeof sum;
    p += 8;
    memcpy(head, p, sizeof head);
    p += sizeof head;
    memcpy(&count, p, sizeof count);
    p += sizeof count;
    if (head[0] != 1)
        BAD_BLOB(&b->o, "batch checkpoint: format version %u, this library reads 1", head[0]);
    if (count != n)
        BAD_BLOB(&b->o, "batch checkpoint of %llu problems; %zu given", (unsigned long long)count, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t h[4];
        uint64_t l;
        if ((size_t)(end - p) < sizeof h + sizeof l)
            BAD_BLOB(&b->o, "batch checkpoint: problem %zu truncated", i);
        memcpy(h, p, sizeof h);
        p += sizeof h;
        memcpy(&l, p, sizeof l);
        p += sizeof l;
        if ((uint64_t)(end - p) < l)
            BAD_BLOB(&b->o, "batch checkpoint: problem %zu truncated", i);
        size_t idx;
        if ((st = add_item(b, problems[i], NULL, &idx)))
            goto out;
        item *it = &b->items[idx];
        const size_t nx = ps_problem_nx(problems[i]);
        if (h[0] == KIND_START) {
            if (l != nx * sizeof(double))
                BAD_BLOB(&b->o, "batch checkpoint: problem %zu has %zu unknowns; its start pulse %llu bytes", i,
                         nx, (unsigned long long)l);
            memcpy(it->x0, p, l);
        } else if (h[0] == KIND_RUN) {
            /* checked against the problem now: a mismatch is the checkpoint's error */
            ps_driver d;
            memset(&d, 0, sizeof d);
            ps_options oc = b->o;
            ps_minimizer mz = {nx, ps_problem_penalized(problems[i]), NULL, NULL, NULL, NULL,
                               ps_penalty_mu0(problems[i], &b->o)};
            double *z = calloc(nx ? nx : 1, sizeof(double));
            int s2 = z ? ps_driver_init(&d, &mz, &oc, z) : PS_ERR_NO_MEMORY;
            free(z);
            if (!s2)
                s2 = ps_checkpoint_load(problems[i], &oc, p, (size_t)l, &d);
            if (!s2)
                ps_design_pulse_of_x(problems[i], d.x, it->x0);
            ps_driver_free(&d);
            if (s2) {
                st = s2 == PS_ERR_NO_MEMORY ? s2 : PS_ERR_CHECKPOINT;
                ps_log(&b->o, PS_LOG_ERROR, __FILE__, __LINE__, "batch checkpoint: problem %zu: %s", i,
                       ps_strerror(s2));
                goto out;
            }
            it->blob = malloc(l);
            if (!it->blob) {
                st = PS_ERR_NO_MEMORY;
                goto out;
            }
            memcpy(it->blob, p, l);
            it->blob_len = l;
        } else if (h[0] == KIND_FAILED) {
            item_fail(it, (int)h[2]);
        } else {
            BAD_BLOB(&b->o, "batch checkpoint: problem %zu of unknown kind %u", i, h[0]);
        }
        if (h[1] && it->state != IT_FINISHED) {
            it->paused = 1;
            it->state = IT_PARKED;
        }
        p += l;
    }
    if (p != end)
        BAD_BLOB(&b->o, "batch checkpoint: %zu bytes after the last problem", (size_t)(end - p));
out:
    if (st) {
        ps_batch_free(b);
        return st;
    }
    *out = b;
    return PS_CONVERGED;
}

int ps_batch_result(const ps_batch *cb, size_t i, ps_result *res, double *x)
{
    if (!cb)
        return PS_ERR_NULL;
    ps_batch *b = (ps_batch *)cb;
    pthread_mutex_lock(&b->mu);
    CHECK_INDEX(b, i);
    item *it = &b->items[i];
    int st = PS_RUNNING;
    if (it->state == IT_FINISHED) {
        if (it->r) {
            st = ps_run_wait(it->r, 0.0, res, x);
        } else {
            st = it->status;
            if (res) { /* never evaluated: f and gnorm are not known */
                memset(res, 0, sizeof *res);
                res->status = st;
                res->backend = b->use;
                res->f = NAN;
                res->gnorm = NAN;
            }
            if (x)
                memcpy(x, it->x0, ps_problem_nx(it->p) * sizeof(double));
        }
    }
    pthread_mutex_unlock(&b->mu);
    return st;
}

size_t ps_batch_size(const ps_batch *cb)
{
    if (!cb)
        return 0;
    ps_batch *b = (ps_batch *)cb;
    pthread_mutex_lock(&b->mu);
    size_t n = b->n;
    pthread_mutex_unlock(&b->mu);
    return n;
}

int ps_batch_shape(const ps_batch *cb, size_t i, ps_gpu_options *gpu, int *threads)
{
    if (!cb)
        return PS_ERR_NULL;
    ps_batch *b = (ps_batch *)cb;
    pthread_mutex_lock(&b->mu);
    CHECK_INDEX(b, i);
    int st = PS_CONVERGED;
    item *it = &b->items[i];
    if (threads)
        *threads = 1;
    if (gpu) {
        ps_gpu_options_default(gpu);
        if (b->use == PS_BACKEND_GPU) {
            if (it->r && it->r->gpu) {
                ps_gpu_config c;
                size_t smem;
                ps_gpu_run_shape(it->r->gpu, &c, &smem);
                gpu->tune_cache = 0;
                gpu->gpu_grid = c.grid;
                gpu->gpu_block = c.block;
                gpu->gpu_spins_per_tile = c.sb;
                gpu->gpu_max_registers = c.regcap ? 64 : 128;
            } else {
                st = PS_ERR_STATE; /* not set up (yet, or it failed) */
            }
        }
    }
    pthread_mutex_unlock(&b->mu);
    return st;
}

void ps_batch_free(ps_batch *b)
{
    if (!b)
        return;
    if (b->thread_live) {
        /* cancel what runs, let the kernel (the workers) end it, then stop */
        ps_batch_cancel(b, PS_BATCH_ALL);
        ps_batch_wait(b, -1.0);
        pthread_mutex_lock(&b->mu);
        b->quit = 1;
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        pthread_join(b->thread, NULL);
    }
    if (b->gb)
        ps_gpu_batch_sync(b->gb);
    for (size_t i = 0; i < b->n; i++) {
        item *it = &b->items[i];
        if (it->r) {
            if (it->r->gpu)
                ps_run_impl_destroy(it->r);
            else
                ps_run_free(it->r);
        }
        free(it->x0);
        free(it->blob);
    }
    ps_gpu_batch_free(b->gb);
    free(b->scratch.p);
    free(b->items);
    free(b->pick);
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
}
