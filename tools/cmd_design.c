/*
 * persolve design PRESET|FILE: the solve from the problem's start pulse (or
 * from a checkpoint, --resume), a live progress line on a terminal, the
 * final magnetization by ps_simulate(), the result file, and a text or
 * JSON summary.
 *
 * The solve runs asynchronously (ps_solve_start / ps_solve_resume) while
 * the main thread loops: it reads ps_run_snapshot() for the progress line,
 * obeys the flags the signal handlers set, writes the periodic checkpoint,
 * and waits for the end with a short timeout.
 *   SIGINT, SIGTERM  ps_run_cancel(): the run ends with PS_CANCELLED at its
 *                    next control point and the best point is still
 *                    written (exit 130). A second SIGINT kills.
 *   SIGTSTP          ps_run_yield(), wait (bounded) until the run reports
 *                    YIELDED, then stop the process with SIGSTOP; once
 *                    continued (SIGCONT, fg), ps_run_resume().
 * --checkpoint FILE --every S pauses the run every S seconds, writes
 * ps_run_checkpoint()'s blob to FILE with an atomic replace and resumes it;
 * one more is written at the end. The same holds on both backends (on the
 * GPU the persistent kernel obeys at its control points, and a yield gives
 * the GPU back).
 */
#include "cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "common/clock.h"
#include "io/h5io.h"
#include "model/design.h"

/* Set by the handlers, read by the main loop (or the progress callback). */
static volatile sig_atomic_t ps_design_signal = 0; /* SIGINT or SIGTERM */
static volatile sig_atomic_t ps_design_tstp = 0;   /* SIGTSTP */

static void on_signal(int sig)
{
    ps_design_signal = sig;
}

static void on_tstp(int sig)
{
    (void)sig;
    ps_design_tstp = 1;
}

void ps_cli_catch_signal(int sig, void (*fn)(int), int flags)
{
    struct sigaction sa, old;
    if (sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN)
        return;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = flags;
    sigaction(sig, &sa, NULL);
}

static void install_signals(void)
{
    ps_cli_catch_signal(SIGINT, on_signal, SA_RESETHAND); /* a second Ctrl-C kills */
    ps_cli_catch_signal(SIGTERM, on_signal, 0);
}

void ps_cli_block_signals(sigset_t *old)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGTSTP);
    pthread_sigmask(SIG_BLOCK, &set, old);
}

void ps_cli_restore_signals(const sigset_t *old)
{
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

void ps_cli_nap(double seconds)
{
    struct timespec ts;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL);
}

typedef struct progress_ctx {
    int show;         /* draw the progress line (stderr is a terminal) */
    int drawn;        /* a line is on the screen */
    double last_draw; /* monotonic seconds of the last redraw */
} progress_ctx;

#define PROGRESS_INTERVAL 0.1 /* s: at most ~10 redraws per second */
#define POLL_INTERVAL 0.05    /* s: the main loop's wait for the end */
#define YIELD_WAIT 10.0       /* s: the longest wait for a yield before stopping */

static void draw_progress(progress_ctx *c, int64_t iteration, double f,
                          double gnorm, int64_t evaluations, double seconds)
{
    if (!c->show)
        return;
    double t = ps_monotonic_seconds();
    if (c->drawn && t - c->last_draw < PROGRESS_INTERVAL)
        return;
    fprintf(stderr,
            "\r  iter %6lld   f %.6e   |g| %.3e   evals %6lld   %8.2f s"
            "\033[K",
            (long long)iteration, f, gnorm, (long long)evaluations, seconds);
    fflush(stderr);
    c->drawn = 1;
    c->last_draw = t;
}

static void clear_progress(progress_ctx *c)
{
    if (c->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        c->drawn = 0;
    }
}

/* The variables of r->gnorm and the convergence test: the optimizer
 * reparametrizes the pulse under a peak limit (b1 = b1_max tanh-like of
 * z) and designed gradient axes (the scaled slew variables). */
static const char *gnorm_test(const ps_problem *p)
{
    ps_problem_desc d;
    if (ps_problem_describe(p, &d) != 0)
        return "physical";
    const int peak = d.b1_max_channel != NULL || isfinite(d.b1_max);
    if (peak && d.design_g)
        return "optimizer's variables, reparametrized for b1_max and the designed gradient";
    if (peak)
        return "optimizer's variables, reparametrized for b1_max";
    if (d.design_g)
        return "optimizer's variables, the designed gradient's scaled slews";
    return "physical";
}

/* Whether p designs gradient axes. */
static int designs_gradient(const ps_problem *p)
{
    ps_problem_desc d;
    return ps_problem_describe(p, &d) == 0 && d.design_g != 0;
}

/*
 * The optimizer keeps |b_ck| < b1_max by construction, but the last
 * rounding of u = b1_max * (...) may land a few ulps above (1e-18 G at
 * b1_max = 0.01): every step past its channel's limit is scaled back onto
 * it and then, while hypot still exceeds it, stepped one ulp towards zero,
 * so the pulse written meets the limit exactly as eval checks it.
 */
static void clamp_to_limits(const ps_problem *p, double *x)
{
    ps_cli_constraints k;
    if (ps_cli_constraint_values(p, NULL, &k) != 0 || !k.has_limit)
        return;
    for (size_t c = 0; c < k.nc; c++)
        for (size_t t = 0; t < k.nt; t++) {
            double *u = &x[PS_X_U(k.nt, c, t)], *v = &x[PS_X_V(k.nt, c, t)];
            const double lim = k.limit[c], a = hypot(*u, *v);
            if (!(a > lim))
                continue;
            *u *= lim / a;
            *v *= lim / a;
            while (hypot(*u, *v) > lim) {
                *u = nextafter(*u, 0.0);
                *v = nextafter(*v, 0.0);
            }
        }
}

/* |grad F| at x in the pulse's own variables (ps_eval), NaN when it
 * cannot be evaluated. */
static double physical_gnorm(const ps_problem *p, const ps_options *o, const double *x)
{
    const size_t nx = ps_problem_nx(p);
    double f, s = 0.0, *g = malloc(nx * sizeof(double));
    if (!g)
        return NAN;
    int st = ps_eval(p, o, x, &f, g);
    for (size_t i = 0; i < nx && !st; i++)
        s += g[i] * g[i];
    free(g);
    return st ? NAN : sqrt(s);
}

/*
 * A start where the gradient is exactly zero (a zero pulse, as a problem
 * without /pulse/b1 has, is a stationary point of the mls and z losses)
 * would end the solve at once as converged. Checked (one evaluation) when
 * the start's RF is zero: an error naming the remedy.
 */
int ps_cli_check_start(const ps_problem *p, const ps_options *o, ps_cli_log *log,
                       const double *x)
{
    const size_t nx = ps_problem_nx(p), nrf = 2 * ps_problem_nc(p) * ps_problem_nt(p);
    for (size_t i = 0; i < nrf; i++)
        if (x[i] != 0.0)
            return PS_EXIT_OK;
    double f, *g = malloc(nx * sizeof(double));
    if (!g) {
        ps_cli_error("out of memory");
        return PS_EXIT_SOLVER;
    }
    ps_options eo = *o;
    eo.progress = NULL;
    int st = ps_eval(p, &eo, x, &f, g);
    size_t nonzero = 0;
    for (size_t i = 0; i < nx && !st; i++)
        nonzero += g[i] != 0.0;
    free(g);
    if (st) {
        const char *why = ps_cli_log_reason(log, st);
        ps_cli_error("evaluating the start pulse: %s%s%s", ps_strerror(st), why[0] ? ": " : "",
                     why);
        return ps_cli_exit_code(st) == PS_EXIT_BACKEND ? PS_EXIT_BACKEND : PS_EXIT_SOLVER;
    }
    if (nonzero)
        return PS_EXIT_OK;
    ps_problem_desc d;
    const char *loss = ps_problem_describe(p, &d) == 0 ? ps_loss_name(d.loss) : NULL;
    ps_cli_error("the start pulse is zero and the gradient of F there is exactly zero (a "
                 "stationary point of the %s loss): the optimizer cannot leave it; give a "
                 "nonzero start pulse (/pulse/b1 in the problem file)", loss ? loss : "");
    return PS_EXIT_INPUT;
}

static int is_converged(int status)
{
    return status == PS_CONVERGED || status == PS_CONVERGED_FTOL;
}

void ps_cli_design_json(FILE *f, const ps_cli *cli, const ps_options *o, const char *input,
                        const ps_problem *p, const ps_result *r, const double *x, double f0,
                        double gnorm_physical, const char *out, int exit_code)
{
    /* a solve that ended in an error other than the line search has no point */
    int ran = r->status >= 0 || r->status == PS_ERR_LINE_SEARCH;
    fputs("{\n  \"status\": ", f);
    fprintf(f, "%d", r->status);
    fputs(",\n  \"status_text\": ", f);
    ps_json_string(f, ps_strerror(r->status));
    fprintf(f, ",\n  \"converged\": %s", is_converged(r->status) ? "true" : "false");
    fprintf(f, ",\n  \"iterations\": %lld", (long long)r->iterations);
    fprintf(f, ",\n  \"evaluations\": %lld", (long long)r->evaluations);
    fputs(",\n  \"f0\": ", f);
    ps_json_number(f, f0);
    fputs(",\n  \"f\": ", f);
    ps_json_number(f, ran ? r->f : NAN);
    fputs(",\n  \"gnorm\": ", f);
    ps_json_number(f, ran ? r->gnorm : NAN);
    fputs(",\n  \"gnorm_test\": ", f);
    ps_json_string(f, gnorm_test(p));
    fputs(",\n  \"gnorm_physical\": ", f);
    ps_json_number(f, ran ? gnorm_physical : NAN);
    fputs(",\n  \"seconds\": ", f);
    ps_json_number(f, r->seconds);
    fputs(",\n  \"backend\": ", f);
    ps_json_string(f, ps_cli_backend_name(ran ? r->backend : o->backend));
    fputs(",\n  \"device\": ", f);
    ps_json_string(f, r->device);
    fprintf(f, ",\n  \"fell_back\": %s", r->fell_back ? "true" : "false");
    fputs(",\n  \"precision\": ", f);
    ps_json_string(f, ps_cli_precision_name(o->precision));
    fprintf(f, ",\n  \"ns\": %zu,\n  \"nt\": %zu", ps_problem_ns(p),
            ps_problem_nt(p));
    ps_cli_json_channels(f, p, ran ? x : NULL);
    /* the penalty rounds (one round without VOPs, mu 0) */
    fputs(",\n  \"rounds\": ", f);
    if (ran)
        fprintf(f, "%d", r->rounds);
    else
        fputs("null", f);
    fputs(",\n  \"mu\": ", f);
    ps_json_number(f, ran ? r->mu : NAN);
    fputs(",\n  \"violation\": ", f);
    ps_json_number(f, ran ? r->violation : NAN);
    fputs(",\n  \"input\": ", f);
    ps_json_string(f, input);
    fputs(",\n  \"output\": ", f);
    if (out)
        ps_json_string(f, out);
    else
        fputs("null", f);
    fputs(",\n  \"checkpoint\": ", f);
    if (cli->checkpoint)
        ps_json_string(f, cli->checkpoint);
    else
        fputs("null", f);
    fputs(",\n  \"resumed_from\": ", f);
    if (cli->resume)
        ps_json_string(f, cli->resume);
    else
        fputs("null", f);
    fprintf(f, ",\n  \"exit_code\": %d\n}\n", exit_code);
    fflush(f);
}

static void print_text(const ps_cli *cli, const ps_options *o, const ps_problem *p,
                       const ps_result *r, const double *x, double f0, double gnorm_physical,
                       const char *out)
{
    FILE *f = stdout;
    fprintf(f, "status       %s (%d)\n", ps_strerror(r->status), r->status);
    fprintf(f, "iterations   %lld\n", (long long)r->iterations);
    fprintf(f, "evaluations  %lld\n", (long long)r->evaluations);
    fprintf(f, "f            %.6e -> %.6e\n", f0, r->f);
    /* the convergence test's norm, in the optimizer's variables; with a
     * reparametrization also |grad F| in the pulse's own */
    if (strcmp(gnorm_test(p), "physical") == 0) {
        fprintf(f, "gnorm        %.3e (|grad F|; the convergence test's)\n", r->gnorm);
    } else {
        fprintf(f, "gnorm        %.3e (the convergence test's, in the %s)\n", r->gnorm,
                gnorm_test(p));
        fprintf(f, "|grad F|     %.3e (physical: u, v in G%s)\n", gnorm_physical,
                designs_gradient(p) ? " and the designed waveforms" : "");
    }
    fprintf(f, "seconds      %.3f\n", r->seconds);
    /* --backend auto chose: on a machine without a usable GPU nothing fell
     * back, the CPU is what auto means there */
    fprintf(f, "backend      %s (%s), %s precision%s\n",
            ps_cli_backend_name(r->backend), r->device,
            ps_cli_precision_name(o->precision),
            o->backend != PS_BACKEND_AUTO ? ""
            : r->fell_back               ? ", chosen by --backend auto (no usable GPU)"
                                         : ", chosen by --backend auto");
    ps_cli_text_channels(f, 13, p, x);
    if (ps_problem_penalized(p)) { /* the penalty rounds of the SAR and gradient limits */
        fprintf(f, "rounds       %d\n", r->rounds);
        fprintf(f, "mu           %.4g\n", r->mu);
        fprintf(f, "violation    %.3e (relative: SAR above sar_max, |g| above gmax, |g(T)| "
                   "over gmax)\n", r->violation);
    }
    fprintf(f, "output       %s\n", out ? out : "(not written)");
    if (cli->resume)
        fprintf(f, "resumed from %s\n", cli->resume);
    if (cli->checkpoint)
        fprintf(f, "checkpoint   %s\n", cli->checkpoint);
    fflush(f);
}

/* ---- checkpoint files ------------------------------------------------ */

/* Write buf to path atomically: a new temporary file beside it
 * (path.tmp-PID-N, never an existing file), fsync, rename over path, fsync
 * of the directory. why[] gets the reason. */
int ps_cli_write_atomic(const char *path, const void *buf, size_t len, char *why,
                       size_t whylen)
{
    char tmp[4200];
    ps_replace_step step = ps_replace_file(path, 0644, buf, len, tmp, sizeof tmp);
    if (step == PS_REPLACE_DONE)
        return 0;
    if (step == PS_REPLACE_CREATE && errno == ENAMETOOLONG)
        snprintf(why, whylen, "%s: file name too long", path);
    else if (step == PS_REPLACE_RENAME)
        snprintf(why, whylen, "%s: cannot replace: %s", path, strerror(errno));
    else
        snprintf(why, whylen, "%s: cannot write: %s", tmp,
                 errno ? strerror(errno) : "no progress");
    return -1;
}

/* The whole file into *buf (malloc). Prints the reason and returns an exit
 * code on failure. */
int ps_cli_read_checkpoint(const char *path, void **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    /* O_NONBLOCK: a FIFO is refused below instead of blocking the open */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (fd >= 0 && !f)
        close(fd);
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0) {
        ps_cli_error("%s: cannot read checkpoint: %s", path, strerror(errno));
        if (f)
            fclose(f);
        return PS_EXIT_INPUT;
    }
    if (!S_ISREG(st.st_mode)) {
        ps_cli_error("%s: cannot read checkpoint: not a regular file", path);
        fclose(f);
        return PS_EXIT_INPUT;
    }
    size_t n = (size_t)st.st_size;
    unsigned char *b = malloc(n ? n : 1);
    if (!b) {
        ps_cli_error("%s: out of memory", path);
        fclose(f);
        return PS_EXIT_SOLVER;
    }
    size_t got = n ? fread(b, 1, n, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (bad || got != n) {
        ps_cli_error("%s: cannot read checkpoint: %s", path,
                     bad ? strerror(errno) : "file changed while reading");
        free(b);
        return PS_EXIT_INPUT;
    }
    *buf = b;
    *len = n;
    return PS_EXIT_OK;
}

/* Every option in effect, "backend=auto precision=single ...", for the
 * result file's provenance. */
static void options_text(const ps_cli *cli, const ps_options *o, char *buf, size_t len)
{
    const ps_gpu_options *g = &cli->gpu;
    snprintf(buf, len,
             "backend=%s precision=%s max_iters=%lld max_evals=%lld time_limit=%g memory=%d "
             "gtol=%g ftol=%g past=%d threads=%d max_rounds=%d constraint_tol=%g "
             "penalty_mu=%g strict=%d checkpoint=%s every=%g resume=%s tune_cache=%s "
             "gpu_config=%d,%d,%d,%d",
             ps_cli_backend_name(o->backend), ps_cli_precision_name(o->precision),
             (long long)o->max_iterations, (long long)o->max_evaluations, o->time_limit,
             o->memory, o->gtol, o->ftol, o->past, o->threads, o->max_rounds,
             o->constraint_tol, o->penalty_mu, cli->strict,
             cli->checkpoint ? cli->checkpoint : "none", cli->every,
             cli->resume ? cli->resume : "none", g->tune_cache ? "yes" : "no", g->gpu_block,
             g->gpu_spins_per_tile, g->gpu_max_registers, g->gpu_blocks_per_sm);
    size_t n = strlen(buf);
    if (ps_cli_is_batch(cli) && n < len) /* a batch: its team shape too */
        snprintf(buf + n, len - n, " team_blocks=%d", g->batch_team_blocks);
}

/* ---- the asynchronous run ------------------------------------------- */

typedef struct design_run {
    ps_run *run;
    const ps_cli *cli;
    progress_ctx *pc;
    uint64_t handled_seq;   /* the PAUSED snapshot already acted on */
    int pause_requested;    /* a periodic checkpoint waits for the pause */
    double next_checkpoint; /* monotonic s of the next periodic one */
    int cancelled;          /* ps_run_cancel was called */
} design_run;

static void resume_run(ps_run *run)
{
    sigset_t old;
    ps_cli_block_signals(&old); /* a yielded run restarts its worker here */
    ps_run_resume(run);
    ps_cli_restore_signals(&old);
}

/* Ctrl-Z: yield, wait (bounded) for YIELDED, stop; when continued, resume. */
static void suspend_run(design_run *d)
{
    int yielded = ps_run_yield(d->run) == 0;
    if (yielded) {
        double t0 = ps_monotonic_seconds();
        ps_snapshot s;
        while (ps_run_snapshot(d->run, &s) == 0 && s.state != PS_RUN_YIELDED &&
               s.state != PS_RUN_FINISHED && ps_monotonic_seconds() - t0 < YIELD_WAIT)
            ps_cli_nap(0.001);
    }
    if (d->pc->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        d->pc->drawn = 0;
    }
    /* SIGSTOP: unlike a re-raised SIGTSTP it also stops an orphaned
     * process group; execution continues here after SIGCONT */
    raise(SIGSTOP);
    ps_design_tstp = 0;
    if (yielded && !ps_design_signal)
        resume_run(d->run);
}

/* The run is PAUSED (snapshot s): write the periodic checkpoint, resume. */
static void on_paused(design_run *d, const ps_snapshot *s)
{
    d->handled_seq = s->sequence;
    if (d->pause_requested) {
        void *b = NULL;
        size_t n = 0;
        if (ps_run_checkpoint(d->run, &b, &n) == 0 && d->cli->checkpoint) {
            char why[4400];
            if (ps_cli_write_atomic(d->cli->checkpoint, b, n, why, sizeof why) != 0)
                ps_cli_error("checkpoint: %s", why);
        }
        free(b);
        d->pause_requested = 0;
        d->next_checkpoint = ps_monotonic_seconds() + d->cli->every;
    }
    if (!d->cancelled)
        resume_run(d->run);
}

/*
 * SIGINT or SIGTERM: cancel. The run ends at its next control point with
 * the best point; its checkpoint (written at the end with --checkpoint)
 * continues the solve when resumed (a cancel is lifted like a limit).
 */
static void cancel_run(design_run *d)
{
    d->cancelled = 1;
    ps_run_cancel(d->run);
}

/* The main loop: progress, signals, periodic checkpoints, until the end. */
static void watch_run(design_run *d)
{
    d->next_checkpoint = ps_monotonic_seconds() + d->cli->every;
    for (;;) {
        if (ps_design_signal && !d->cancelled)
            cancel_run(d);
        if (ps_design_tstp && !d->cancelled)
            suspend_run(d);
        ps_snapshot s;
        ps_run_snapshot(d->run, &s);
        if (s.state == PS_RUN_FINISHED)
            break;
        if (s.evaluations > 0)
            draw_progress(d->pc, s.iteration, s.f, s.gnorm, s.evaluations,
                          s.seconds);
        if (s.state == PS_RUN_PAUSED && s.sequence != d->handled_seq)
            on_paused(d, &s);
        else if (d->cli->every > 0.0 && !d->pause_requested && !d->cancelled &&
                 ps_monotonic_seconds() >= d->next_checkpoint &&
                 ps_run_pause(d->run) == 0)
            d->pause_requested = 1;
        if (ps_run_wait(d->run, POLL_INTERVAL, NULL, NULL) != PS_RUNNING)
            break;
    }
}

/*
 * The last checkpoint: the finished run's. A run stopped by a limit or a
 * cancel continues from it when resumed with the limit raised (the
 * library reopens such a checkpoint); a converged run stays finished.
 * Returns an exit code.
 */
static int final_checkpoint(design_run *d)
{
    void *b = NULL;
    size_t n = 0;
    int st = ps_run_checkpoint(d->run, &b, &n);
    return ps_cli_save_checkpoint(d->cli->checkpoint, st, b, n);
}

int ps_cli_save_checkpoint(const char *path, int st, void *buf, size_t len)
{
    if (st != 0) {
        ps_cli_error("checkpoint: %s", ps_strerror(st));
        return PS_EXIT_SOLVER;
    }
    char why[4400];
    int rc = ps_cli_write_atomic(path, buf, len, why, sizeof why);
    free(buf);
    if (rc != 0) {
        ps_cli_error("checkpoint: %s", why);
        return PS_EXIT_INPUT;
    }
    return PS_EXIT_OK;
}

int ps_cli_design_final(const ps_problem *p, const ps_options *o, ps_cli_log *log, double *x,
                        double *m, double *gnorm_physical)
{
    ps_options so = *o;
    so.progress = NULL;
    so.progress_user = NULL;
    clamp_to_limits(p, x);
    *gnorm_physical = physical_gnorm(p, &so, x);
    int sst = ps_simulate(p, &so, x, m);
    if (sst != 0) {
        ps_cli_error("simulating the final pulse: %s%s%s", ps_strerror(sst),
                     ps_cli_log_reason(log, sst)[0] ? ": " : "", ps_cli_log_reason(log, sst));
        return ps_cli_exit_code(sst);
    }
    return PS_EXIT_OK;
}

int ps_cli_design_save(const ps_cli *cli, const ps_options *o, const char *input,
                       const ps_problem *p, const ps_result *r, const double *x,
                       const double *m, double gnorm_physical, const char *out)
{
    char opts[1024], cmdline[4096], created[32], err[1024];
    options_text(cli, o, opts, sizeof opts);
    ps_cli_command_line(cli, cmdline, sizeof cmdline);
    ps_cli_utc_now(created, sizeof created);
    ps_h5_result_info info = {gnorm_physical, gnorm_test(p), input, cmdline, opts, created};
    int wst = ps_h5_write_result_info(out, p, x, m, r, &info, err, sizeof err);
    if (wst != 0) {
        ps_cli_error("%s", err);
        return PS_EXIT_INPUT;
    }
    return PS_EXIT_OK;
}

void ps_cli_backend_error(const ps_options *o, int st, const ps_cli_log *log,
                          const char *what)
{
    ps_cli_error("backend %s unavailable: %s%s%s (try --backend cpu%s)",
                 ps_cli_backend_name(o->backend), ps_strerror(st),
                 log->msg[0] ? ": " : "", log->msg, what);
}

int ps_cmd_design(const ps_cli *cli)
{
    if (ps_cli_is_batch(cli))
        return ps_cmd_design_batch(cli);

    ps_options o = cli->opts;
    ps_cli_log log;
    ps_problem *p = NULL;
    ps_result r;
    double *x = NULL, *m = NULL, gnorm_physical = NAN;
    void *in_blob = NULL;
    size_t in_len = 0;
    char base[256], out[4096], ckpt[4096];
    progress_ctx pc = {0, 0, 0.0};
    design_run d;
    int code, ck_code = PS_EXIT_OK;

    memset(&r, 0, sizeof r);
    memset(&d, 0, sizeof d);
    if ((code = ps_cli_check_options(&o, &log)) != PS_EXIT_OK)
        return code;
    /* SIGINT and SIGTERM end every stage: reading the problem file stops
     * (its reading process is killed, exit 130); once the problem is read
     * the solve starts cancelled or is cancelled, and the best point (the
     * start, if no step was taken) is written */
    install_signals();
    ps_cli_set_cancel(&ps_design_signal);
    if ((code = ps_cli_load_problem(cli->input, &p, base, sizeof base)) != PS_EXIT_OK)
        return code;
    if ((code = ps_cli_output_path(cli->output, base, "_result.h5", 1, out,
                                   sizeof out)) != PS_EXIT_OK)
        goto done;
    if (cli->checkpoint &&
        (code = ps_cli_output_path(cli->checkpoint, base, "", 1, ckpt,
                                   sizeof ckpt)) != PS_EXIT_OK)
        goto done;
    /* the files written never replace a file read or each other */
    const ps_cli_file reads[] = {{"", cli->input, "the input problem file"},
                                 {"", cli->resume, "the checkpoint to resume (--resume)"}};
    const ps_cli_file writes[] = {{"-o", out, "the result file (-o)"},
                                  {"--checkpoint", cli->checkpoint ? ckpt : NULL, "the checkpoint"}};
    /* (the checkpoint may be the one resumed: it is read whole first) */
    if ((code = ps_cli_check_distinct(reads, 2, writes, 1)) != PS_EXIT_OK ||
        (code = ps_cli_check_distinct(reads, 1, writes, 2)) != PS_EXIT_OK)
        goto done;
    if (cli->resume &&
        (code = ps_cli_read_checkpoint(cli->resume, &in_blob, &in_len)) != PS_EXIT_OK)
        goto done;

    size_t ns = ps_problem_ns(p);
    x = malloc(ps_problem_nx(p) * sizeof(double));
    m = malloc(3 * ns * sizeof(double));
    if (!x || !m) {
        ps_cli_error("out of memory");
        code = PS_EXIT_SOLVER;
        goto done;
    }
    int st = ps_problem_x0(p, x);
    if (st != 0) {
        ps_cli_error("start pulse: %s", ps_strerror(st));
        code = ps_cli_exit_code(st);
        goto done;
    }
    if (!cli->resume && (code = ps_cli_check_start(p, &o, &log, x)) != PS_EXIT_OK)
        goto done;

    pc.show = !cli->quiet && isatty(STDERR_FILENO);
    log.msg[0] = '\0';
    sigset_t old;
    ps_cli_block_signals(&old);
    if (cli->resume)
        st = ps_solve_resume(p, &o, in_blob, in_len, &d.run);
    else
        st = ps_solve_start(p, &o, x, &d.run);
    ps_cli_restore_signals(&old);

    if (st == 0) {
        d.cli = cli;
        d.pc = &pc;
        ps_cli_catch_signal(SIGTSTP, on_tstp, 0);
        watch_run(&d);
        st = ps_run_wait(d.run, -1.0, &r, x);
        signal(SIGTSTP, SIG_DFL);
        clear_progress(&pc);
        if (cli->checkpoint) /* a failure is reported; the result is still written */
            ck_code = final_checkpoint(&d);
    } else if (st == PS_ERR_CHECKPOINT) {
        ps_cli_error("%s: %s", cli->resume,
                     log.msg[0] ? log.msg : ps_strerror(st));
        code = PS_EXIT_INPUT;
        goto done;
    } else {
        r.status = st;
    }
    code = ps_cli_exit_code(st);
    if (ps_design_signal != 0 && st == PS_CANCELLED)
        code = PS_EXIT_CANCELLED;

    /* Errors that leave no usable point: report and stop. */
    if (st < 0 && st != PS_ERR_LINE_SEARCH) {
        if (st == PS_ERR_NO_GPU || st == PS_ERR_GPU_UNSUPPORTED)
            ps_cli_backend_error(&o, st, &log, "");
        else
            ps_cli_error("solve failed: %s%s%s", ps_strerror(st),
                         ps_cli_log_reason(&log, st)[0] ? ": " : "", ps_cli_log_reason(&log, st));
        if (cli->json)
            ps_cli_design_json(stdout, cli, &o, cli->input, p, &r, NULL, NAN, NAN, NULL, code);
        goto done;
    }
    if (st == PS_ERR_LINE_SEARCH)
        ps_cli_error("%s%s%s", ps_strerror(st), log.other[0] ? ": " : "", log.other);

    /* The pulse inside its peak limits to the last bit, |grad F| in the
     * pulse's own variables, the final magnetization, the result file. */
    int sst = ps_cli_design_final(p, &o, &log, x, m, &gnorm_physical);
    if (sst != PS_EXIT_OK) {
        code = sst;
        goto done;
    }
    int wst = ps_cli_design_save(cli, &o, cli->input, p, &r, x, m, gnorm_physical, out);
    if (wst != 0) {
        code = PS_EXIT_INPUT;
    } else if (ck_code != PS_EXIT_OK) {
        code = ck_code;
    }
    const char *written = wst == 0 ? out : NULL;
    double f0 = r.history && r.history_len > 0 ? r.history[0].f : NAN;
    if (cli->json)
        ps_cli_design_json(stdout, cli, &o, cli->input, p, &r, x, f0, gnorm_physical, written,
                           code);
    else if (!cli->quiet)
        print_text(cli, &o, p, &r, x, f0, gnorm_physical, written);
done:
    ps_run_free(d.run);
    free(in_blob);
    ps_result_free(&r);
    free(m);
    free(x);
    ps_problem_free(p);
    return code;
}
