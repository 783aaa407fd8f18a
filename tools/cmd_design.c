/*
 * persolve design PRESET|FILE: solve_persistent() from the problem's start
 * pulse, a live progress line on a terminal, the final magnetization by
 * ps_simulate(), the result file, and a text or JSON summary.
 *
 * SIGINT and SIGTERM set a flag that the progress callback turns into a
 * cancel request: the solve ends with PS_CANCELLED at the next iteration
 * and the best point is still written (exit 130). A second SIGINT kills.
 */
#include "cmd.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "h5io.h"

static volatile sig_atomic_t ps_design_signal = 0;

static void on_signal(int sig)
{
    ps_design_signal = sig;
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND; /* a second Ctrl-C gets the default action */
    sigaction(SIGINT, &sa, NULL);
    sa.sa_flags = 0;
    sigaction(SIGTERM, &sa, NULL);
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct progress_ctx {
    int show;         /* draw the progress line (stderr is a terminal) */
    int drawn;        /* a line is on the screen */
    double last_draw; /* monotonic seconds of the last redraw */
} progress_ctx;

#define PROGRESS_INTERVAL 0.1 /* s: at most ~10 redraws per second */

static int on_progress(void *user, const ps_progress *p)
{
    progress_ctx *c = user;
    if (c->show) {
        double t = now_seconds();
        if (!c->drawn || t - c->last_draw >= PROGRESS_INTERVAL) {
            fprintf(stderr,
                    "\r  iter %6lld   f %.6e   |g| %.3e   evals %6lld   %8.2f s"
                    "\033[K",
                    (long long)p->iteration, p->f, p->gnorm,
                    (long long)p->evaluations, p->seconds);
            fflush(stderr);
            c->drawn = 1;
            c->last_draw = t;
        }
    }
    return ps_design_signal != 0;
}

static void clear_progress(progress_ctx *c)
{
    if (c->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        c->drawn = 0;
    }
}

static int is_converged(int status)
{
    return status == PS_CONVERGED || status == PS_CONVERGED_FTOL;
}

static void print_json(const ps_cli *cli, const ps_options *o,
                       const ps_problem *p, const ps_result *r, double f0,
                       const char *out, int exit_code)
{
    FILE *f = stdout;
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
    fputs(",\n  \"input\": ", f);
    ps_json_string(f, cli->input);
    fputs(",\n  \"output\": ", f);
    if (out)
        ps_json_string(f, out);
    else
        fputs("null", f);
    fprintf(f, ",\n  \"exit_code\": %d\n}\n", exit_code);
    fflush(f);
}

static void print_text(const ps_options *o, const ps_result *r, double f0,
                       const char *out)
{
    FILE *f = stdout;
    fprintf(f, "status       %s (%d)\n", ps_strerror(r->status), r->status);
    fprintf(f, "iterations   %lld\n", (long long)r->iterations);
    fprintf(f, "evaluations  %lld\n", (long long)r->evaluations);
    fprintf(f, "f            %.6e -> %.6e\n", f0, r->f);
    fprintf(f, "gnorm        %.3e\n", r->gnorm);
    fprintf(f, "seconds      %.3f\n", r->seconds);
    fprintf(f, "backend      %s (%s), %s precision\n",
            ps_cli_backend_name(r->backend), r->device,
            ps_cli_precision_name(o->precision));
    fprintf(f, "fell back    %s\n", r->fell_back ? "yes" : "no");
    fprintf(f, "output       %s\n", out ? out : "(not written)");
    fflush(f);
}

int ps_cmd_design(const ps_cli *cli)
{
    ps_options o = cli->opts;
    ps_cli_log log;
    ps_problem *p = NULL;
    ps_result r;
    double *x = NULL, *m = NULL;
    char base[256], out[4096], err[1024];
    progress_ctx pc = {0, 0, 0.0};
    int code;

    memset(&r, 0, sizeof r);
    if ((code = ps_cli_check_options(&o, &log)) != PS_EXIT_OK)
        return code;
    install_signals();
    if ((code = ps_cli_load_problem(cli->input, &p, base, sizeof base)) != PS_EXIT_OK)
        return code;
    if ((code = ps_cli_output_path(cli->output, base, "_result.h5", out,
                                   sizeof out)) != PS_EXIT_OK)
        goto done;

    size_t ns = ps_problem_ns(p), nt = ps_problem_nt(p);
    x = malloc(2 * nt * sizeof(double));
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

    pc.show = !cli->quiet && isatty(STDERR_FILENO);
    o.progress = on_progress;
    o.progress_user = &pc;
    st = solve_persistent(p, &o, x, &r);
    clear_progress(&pc);
    code = ps_cli_exit_code(st);
    if (ps_design_signal != 0 && st == PS_CANCELLED)
        code = PS_EXIT_CANCELLED;

    /* Errors that leave no usable point: report and stop. */
    if (st < 0 && st != PS_ERR_LINE_SEARCH) {
        if (st == PS_ERR_NO_GPU || st == PS_ERR_GPU_UNSUPPORTED ||
            st == PS_ERR_NOT_IMPLEMENTED)
            ps_cli_error("backend %s unavailable: %s%s%s (try --backend cpu)",
                         ps_cli_backend_name(o.backend), ps_strerror(st),
                         log.msg[0] ? ": " : "", log.msg);
        else
            ps_cli_error("solve failed: %s%s%s", ps_strerror(st),
                         log.msg[0] ? ": " : "", log.msg);
        if (cli->json)
            print_json(cli, &o, p, &r, NAN, NULL, code);
        goto done;
    }
    if (st == PS_ERR_LINE_SEARCH)
        ps_cli_error("%s%s%s", ps_strerror(st), log.msg[0] ? ": " : "", log.msg);

    /* Final magnetization at the returned point, then the result file. */
    ps_options so = o;
    so.progress = NULL;
    so.progress_user = NULL;
    int sst = ps_simulate(p, &so, x, m);
    if (sst != 0) {
        ps_cli_error("simulating the final pulse: %s%s%s", ps_strerror(sst),
                     log.msg[0] ? ": " : "", log.msg);
        code = ps_cli_exit_code(sst);
        goto done;
    }
    int wst = ps_h5_write_result(out, p, x, m, &r, err, sizeof err);
    if (wst != 0) {
        ps_cli_error("%s", err);
        code = PS_EXIT_INPUT;
    }
    const char *written = wst == 0 ? out : NULL;
    double f0 = r.history && r.history_len > 0 ? r.history[0].f : NAN;
    if (cli->json)
        print_json(cli, &o, p, &r, f0, written, code);
    else if (!cli->quiet)
        print_text(&o, &r, f0, written);
done:
    ps_result_free(&r);
    free(m);
    free(x);
    ps_problem_free(p);
    return code;
}
