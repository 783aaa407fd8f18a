/*
 * persolve bench: the GPU solve driven three ways (cuda/launch.h: the
 * persistent kernel, a host-driven loop of ordinary kernels, a CUDA graph
 * with a conditional WHILE node) side by side in one process on the
 * benchmark sizes, optionally with the CPU backend as a fourth row; a text
 * table per size and, with --json FILE, the same as JSON with the GPU, the
 * date and the command line.
 *
 * Every run starts from the problem's x0 with gtol = ftol = 0, so it runs
 * exactly N iterations; one warm-up run, then R timed runs, median. Times:
 * GPU rows the CUDA-event time of the solve proper (ps_result.kernel_seconds:
 * no setup, transfers or graph instantiation), the CPU row the wall time of
 * its solve. Overhead per iteration = (time - evaluations x t_eval) /
 * iterations, with t_eval the median in-kernel time of one evaluation
 * (ps_gpu_eval_timing, in the solve's variables; CPU: of one ps_eval) at
 * the final pulse of the persistent (CPU) run: an evaluation's cost
 * depends on the pulse (small rotations are cheaper), and the start pulse
 * is smaller than the iterates.
 */
#include "cmd.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/stats.h"
#include "cuda/gpu.h"
#include "cuda/launch.h"

#define N_GPU_VARIANTS 4 /* the three of cuda/launch.h, then the persistent kernel with control points */
#define CTL_VARIANT 3
#define CTL_PAUSES 1000  /* pause/resume cycles timed (a 99th percentile of 200 is the second longest) */
#define CTL_YIELDS 100   /* yield/resume cycles timed */

static const char *const variant_names[N_GPU_VARIANTS] = {"persistent", "host loop", "graph",
                                                          "with control"};

/* Latencies of steering a running kernel (medians and 99th percentiles, s). */
typedef struct control_stats {
    int ran, pauses, yields;
    double pause_med, pause_p99, resume_med, resume_p99;
    double idle_med, idle_p99; /* pause request -> kernel stopped, state stored (idle) */
    double yield_med, yield_p99, relaunch_med, relaunch_p99;
} control_stats;

typedef struct bench_row {
    const char *name;     /* "persistent", "host loop", "graph", "cpu" */
    int ran;              /* the timed runs completed */
    int status;           /* status of the last run (or of the failure) */
    int64_t iterations, evaluations;
    double f;
    double seconds;       /* median solve time */
    double *samples;      /* [repeats] solve times, s */
    int repeatable;       /* every run ended at the same f, iterations, evaluations */
    int same;             /* iterates bit-identical to the persistent row: 1, 0; -1 n/a */
    ps_result last;       /* the last timed run (history kept) */
    double *x;            /* its final pulse [nx] */
} bench_row;

typedef struct bench_size {
    ps_bench_size sz;
    ps_problem *p;        /* its problem, loaded before anything is printed */
    size_t ns, nt, nx;    /* spins, steps, unknowns */
    size_t nc;            /* transmit channels */
    char axes[4];         /* the gradient axes designed with the pulse ("": none) */
    double eval_s;        /* GPU: median in-kernel time of one evaluation (0: none) */
    double eval_launch_s; /* GPU: median time of one evaluation launch */
    double cpu_eval_s;    /* CPU: median time of one ps_eval (0: none) */
    int64_t cpu_iters;    /* iterations of the CPU row */
    char device[128];     /* launch shape of the GPU runs */
    int prof_ok;          /* the phase profile below was measured */
    double prof_us[PS_GPU_PROF]; /* persistent kernel: us per iteration in each phase (block 0's clock) */
    double prof_evals;    /* evaluations per iteration of that run */
    bench_row rows[N_GPU_VARIANTS + 1];
    int nrows;
    /* --gpus LIST: the solve split over several GPUs (the "with control" row's path) */
    bench_row grows[8];
    int gcount[8];        /* the GPU count asked (-1: all) */
    double gxchg_us[8];   /* us per evaluation in the exchange (rank 0's clock; 0: not measured) */
    int ngrows;
} bench_size;

/* One solve from x0: variant >= 0 a GPU variant, -1 the CPU backend.
 * *secs: the solve's time. Returns the status; r is the caller's to free. */
static int run_once(const ps_problem *p, const ps_options *o, int variant, double *x,
                    ps_result *r, double *secs)
{
    ps_problem_x0(p, x);
    memset(r, 0, sizeof *r);
    int st;
    if (variant < 0 || variant == CTL_VARIANT) {
        /* the CPU backend, or the GPU solve as solve_persistent runs it:
         * the persistent kernel with its control points, steerable */
        ps_options oc = *o;
        oc.backend = variant < 0 ? PS_BACKEND_CPU : PS_BACKEND_GPU;
        st = solve_persistent(p, &oc, x, r);
        *secs = variant < 0 ? r->seconds : r->kernel_seconds;
    } else {
        st = ps_gpu_solve_variant(p, o, NULL, variant, x, r);
        *secs = r->kernel_seconds;
    }
    return st;
}

/* Warm-up (unless warm), then `repeats` timed runs of one row. */
static void bench_row_run(const ps_problem *p, const ps_options *o, int variant, int repeats,
                          int warm, bench_row *row, ps_cli_log *log)
{
    size_t n = ps_problem_nx(p);
    double secs = 0.0;
    ps_result r;
    row->x = malloc(n * sizeof(double));
    row->samples = calloc((size_t)repeats, sizeof(double));
    row->same = -1;
    if (!row->x || !row->samples) {
        row->status = PS_ERR_NO_MEMORY;
        return;
    }
    if (!warm) {
        log->msg[0] = '\0';
        int st = run_once(p, o, variant, row->x, &r, &secs);
        int ok = ps_cli_has_iterates(st, &r);
        ps_result_free(&r);
        if (!ok) {
            row->status = st;
            ps_cli_error("bench: %s: %s%s%s", row->name, ps_strerror(st), log->msg[0] ? ": " : "",
                         log->msg);
            return;
        }
    }
    row->repeatable = 1;
    for (int i = 0; i < repeats; i++) {
        log->msg[0] = '\0';
        int st = run_once(p, o, variant, row->x, &r, &secs);
        if (!ps_cli_has_iterates(st, &r)) {
            row->status = st;
            ps_cli_error("bench: %s: %s%s%s", row->name, ps_strerror(st), log->msg[0] ? ": " : "",
                         log->msg);
            ps_result_free(&r);
            return;
        }
        row->samples[i] = secs;
        if (i > 0 && (r.f != row->f || r.iterations != row->iterations ||
                      r.evaluations != row->evaluations))
            row->repeatable = 0;
        row->status = st;
        row->iterations = r.iterations;
        row->evaluations = r.evaluations;
        row->f = r.f;
        ps_result_free(&row->last);
        row->last = r;
    }
    row->seconds = ps_median(row->samples, (size_t)repeats);
    row->ran = 1;
}

/* Same iterates as the persistent row: status, counts, f per iteration,
 * evaluations per iteration and the final x, all bit for bit. */
static int same_iterates(const bench_row *a, const bench_row *b, size_t n)
{
    if (a->status != b->status || a->iterations != b->iterations ||
        a->evaluations != b->evaluations || a->last.history_len != b->last.history_len)
        return 0;
    for (size_t i = 0; i < a->last.history_len; i++)
        if (memcmp(&a->last.history[i].f, &b->last.history[i].f, sizeof(double)) ||
            a->last.history[i].evaluations != b->last.history[i].evaluations)
            return 0;
    return memcmp(a->x, b->x, n * sizeof(double)) == 0;
}

/* Median wall time of one CPU ps_eval at the pulse at[] (reps runs after a
 * warm-up). */
static double cpu_eval_seconds(const ps_problem *p, const ps_options *o, const double *at, int reps)
{
    size_t n = ps_problem_nx(p);
    double *x = malloc(n * sizeof *x), *g = malloc(n * sizeof *g), *t = malloc((size_t)reps * sizeof *t);
    double f, m = 0.0;
    ps_options oc = *o;
    oc.backend = PS_BACKEND_CPU;
    if (x && g && t) {
        memcpy(x, at, n * sizeof *x);
        int ok = ps_eval(p, &oc, x, &f, g) == 0;
        for (int i = 0; i < reps && ok; i++) {
            double t0 = ps_monotonic_seconds();
            ok = ps_eval(p, &oc, x, &f, g) == 0;
            t[i] = ps_monotonic_seconds() - t0;
        }
        m = ok ? ps_median(t, (size_t)reps) : 0.0;
    }
    free(x);
    free(g);
    free(t);
    return m;
}

static double per_iter(const bench_row *r)
{
    return r->seconds / (double)(r->iterations > 0 ? r->iterations : 1);
}

/* (time - evaluations x t_eval) / iterations, us; NAN without t_eval. */
static double overhead_us(const bench_row *r, double t_eval)
{
    if (!(t_eval > 0.0))
        return NAN;
    return 1e6 * (r->seconds - (double)r->evaluations * t_eval) /
           (double)(r->iterations > 0 ? r->iterations : 1);
}

static double spin_steps(const bench_size *b, const bench_row *r)
{
    return (double)b->ns * (double)b->nt * (double)r->evaluations / r->seconds;
}

/* The evaluate phase of the profiled solve per evaluation, us (its
 * evaluations at the solve's own points, where the "evaluation" line times
 * one evaluation at the final pulse) */
static double prof_eval_us(const bench_size *b)
{
    return b->prof_us[PS_PROF_EVAL] / b->prof_evals;
}

static const bench_row *persistent_row(const bench_size *b)
{
    return b->nrows > 0 && !strcmp(b->rows[0].name, "persistent") && b->rows[0].ran ? &b->rows[0]
                                                                                      : NULL;
}

static const char *const prof_names[PS_GPU_PROF] = {
    "evaluate", "reduce gradient", "sums", "decide trial", "update dots",
    "decide update", "decide direction", "step + direction", "exchange"};

/* us per iteration of the objective's phases (i < PS_PROF_OBJECTIVE) or
 * of the optimizer's (the others) */
static double prof_part(const bench_size *b, int optimizer)
{
    double t = 0.0;
    for (int i = 0; i < PS_GPU_PROF; i++)
        if ((i >= PS_PROF_OBJECTIVE && i != PS_PROF_EXCHANGE) == optimizer)
            t += b->prof_us[i];
    return t;
}

/*
 * Where the persistent kernel's time goes: one more run with the phase
 * profile on (block 0 adds the time between its marks, cuda/launch.h),
 * per iteration. The marks add a little time of their own.
 */
static void profile_phases(const ps_problem *p, const ps_options *o, bench_size *b)
{
    unsigned long long ns[PS_GPU_PROF];
    size_t n = ps_problem_nx(p);
    double *x = malloc(n * sizeof *x);
    ps_result r;
    memset(&r, 0, sizeof r);
    if (!x || ps_gpu_profile_enable(1) != 0) {
        free(x);
        return;
    }
    ps_gpu_profile_read(ns); /* zeroes the counters */
    ps_problem_x0(p, x);
    int st = ps_gpu_solve_variant(p, o, NULL, PS_GPU_PERSISTENT, x, &r);
    if (ps_cli_has_iterates(st, &r) && r.iterations > 0 && ps_gpu_profile_read(ns) == 0) {
        for (int i = 0; i < PS_GPU_PROF; i++)
            b->prof_us[i] = 1e-3 * (double)ns[i] / (double)r.iterations;
        b->prof_evals = (double)r.evaluations / (double)r.iterations;
        b->prof_ok = 1;
    }
    ps_gpu_profile_enable(0);
    ps_result_free(&r);
    free(x);
}

static void print_size(FILE *f, const bench_size *b, int64_t iters)
{
    const bench_row *pr = persistent_row(b);
    fprintf(f, "\nsize %s  %s  (Ns %zu, Nt %zu, Nc %zu, n %zu%s%s%s)\n", b->sz.label, b->sz.spec,
            b->ns, b->nt, b->nc, b->nx, b->axes[0] ? ", gradient " : "", b->axes,
            b->axes[0] ? " designed" : "");
    if (b->nc > 1 && b->eval_s > 0.0)
        fprintf(f, "  per channel: %.2f ps of the evaluation per spin-step and channel\n",
                1e12 * b->eval_s / ((double)b->ns * (double)b->nt * (double)b->nc));
    if (b->device[0])
        fprintf(f, "  gpu launch:  %s\n", b->device);
    if (b->eval_s > 0.0)
        fprintf(f, "  evaluation:  %.2f us in the kernel, %.2f us as a launch of its own (medians,\n"
                   "               at the final pulse of the persistent run)\n",
                1e6 * b->eval_s, 1e6 * b->eval_launch_s);
    if (b->cpu_eval_s > 0.0)
        fprintf(f, "  evaluation:  %.3f ms on the CPU (median, at the final pulse of its run)\n",
                1e3 * b->cpu_eval_s);
    fprintf(f, "  %-22s %10s %12s %6s %21s %13s %9s %5s\n", "variant", "ms/iter", "overhead us", "evals",
            "final f", "spin-steps/s", "x persist", "same");
    for (int i = 0; i < b->nrows; i++) {
        const bench_row *r = &b->rows[i];
        char name[64];
        if (!strcmp(r->name, "cpu") && r->ran && r->iterations != iters)
            snprintf(name, sizeof name, "cpu (%lld of %lld it)", (long long)r->iterations, (long long)iters);
        else
            snprintf(name, sizeof name, "%s", r->name);
        if (!r->ran) {
            fprintf(f, "  %-22s failed: %s\n", name, ps_strerror(r->status));
            continue;
        }
        double t_eval = strcmp(r->name, "cpu") ? b->eval_s : b->cpu_eval_s;
        double ov = overhead_us(r, t_eval);
        char ovs[32], ratio[32];
        if (isfinite(ov))
            snprintf(ovs, sizeof ovs, "%.2f", ov);
        else
            snprintf(ovs, sizeof ovs, "-");
        if (pr)
            snprintf(ratio, sizeof ratio, "%.2f", per_iter(r) / per_iter(pr));
        else
            snprintf(ratio, sizeof ratio, "-");
        fprintf(f, "  %-22s %10.4f %12s %6lld %21.13e %13.3e %9s %5s%s%s\n", name, 1e3 * per_iter(r), ovs,
                (long long)r->evaluations, r->f, spin_steps(b, r), ratio,
                r->same < 0 ? "-" : r->same ? "yes" : "NO", r->repeatable ? "" : "  (runs differ)",
                r->status == PS_MAX_ITERATIONS ? "" : "  (stopped early)");
    }
    if (b->prof_ok) {
        double total = 0.0;
        fprintf(f, "  persistent kernel, us per iteration by phase (block 0's clock, a run of its own):\n   ");
        for (int i = 0; i < PS_PROF_EXCHANGE; i++) { /* (one GPU: no exchange) */
            fprintf(f, " %s %.1f%s", prof_names[i], b->prof_us[i], i + 1 < PS_PROF_EXCHANGE ? "," : "");
            total += b->prof_us[i];
            if (i == 3 || i == 6)
                fputs("\n   ", f);
        }
        fprintf(f, "; total %.1f\n", total);
        fprintf(f, "    objective (evaluate, reduce, evaluation sums) %.1f, optimizer (the rest) %.1f\n",
                prof_part(b, 0), prof_part(b, 1));
        if (b->prof_evals > 0.0) /* the solve's own evaluations: its trial points, its copy of the code */
            fprintf(f, "    evaluate per evaluation of the solve %.2f us (%.3f evaluations an iteration), %.3e "
                       "spin-steps/s\n",
                    prof_eval_us(b), b->prof_evals, (double)b->ns * (double)b->nt / (1e-6 * prof_eval_us(b)));
    }
    fflush(f);
}

static void json_row(FILE *f, const bench_size *b, const bench_row *r, int repeats, int last)
{
    const bench_row *pr = persistent_row(b);
    double t_eval = strcmp(r->name, "cpu") ? b->eval_s : b->cpu_eval_s;
    fputs("        {\"variant\": ", f);
    ps_json_string(f, r->name);
    fprintf(f, ", \"ran\": %s, \"status\": %d", r->ran ? "true" : "false", r->status);
    fputs(", \"status_text\": ", f);
    ps_json_string(f, ps_strerror(r->status));
    if (r->ran) {
        fprintf(f, ", \"iterations\": %lld, \"evaluations\": %lld", (long long)r->iterations,
                (long long)r->evaluations);
        fputs(", \"f\": ", f);
        ps_json_number(f, r->f);
        fputs(", \"seconds\": ", f);
        ps_json_number(f, r->seconds);
        fputs(", \"ms_per_iteration\": ", f);
        ps_json_number(f, 1e3 * per_iter(r));
        fputs(", \"overhead_us_per_iteration\": ", f);
        ps_json_number(f, overhead_us(r, t_eval));
        fputs(", \"spin_steps_per_second\": ", f);
        ps_json_number(f, spin_steps(b, r));
        fputs(", \"ratio_to_persistent\": ", f);
        ps_json_number(f, pr ? per_iter(r) / per_iter(pr) : NAN);
        fprintf(f, ", \"same_iterates\": %s", r->same < 0 ? "null" : r->same ? "true" : "false");
        fprintf(f, ", \"repeatable\": %s", r->repeatable ? "true" : "false");
        fputs(", \"samples_seconds\": [", f);
        for (int i = 0; i < repeats; i++) {
            if (i)
                fputs(", ", f);
            ps_json_number(f, r->samples[i]);
        }
        fputc(']', f);
    }
    fprintf(f, "}%s\n", last ? "" : ",");
}

static int write_json(const char *path, const ps_cli *cli, const ps_options *o, const char *gpu,
                      const char *date, const bench_size *sizes, int nsizes,
                      const control_stats *ctl, const char *ctl_label)
{
    ps_cli_memfile mf; /* written whole or not at all */
    FILE *f = ps_cli_json_report(&mf, path, cli, date);
    if (!f)
        return PS_EXIT_INPUT;
    fputs(",\n  \"gpu\": ", f);
    if (gpu)
        ps_json_string(f, gpu);
    else
        fputs("null", f);
    fputs(",\n  \"precision\": ", f);
    ps_json_string(f, ps_cli_precision_name(o->precision));
    fprintf(f, ",\n  \"iterations\": %lld,\n  \"repeats\": %d,\n  \"memory\": %d,\n  \"sizes\": [\n",
            (long long)cli->iters, cli->repeats, o->memory);
    for (int s = 0; s < nsizes; s++) {
        const bench_size *b = &sizes[s];
        fputs("    {\"label\": ", f);
        ps_json_string(f, b->sz.label);
        fputs(", \"spec\": ", f);
        ps_json_string(f, b->sz.spec);
        fprintf(f, ", \"ns\": %zu, \"nt\": %zu, \"nc\": %zu, \"n\": %zu", b->ns, b->nt, b->nc,
                b->nx);
        fputs(", \"design_g\": ", f);
        if (b->axes[0])
            ps_json_string(f, b->axes);
        else
            fputs("null", f);
        fputs(", \"device\": ", f);
        ps_json_string(f, b->device);
        fputs(", \"eval_point\": \"final pulse of the persistent (cpu: its own) run\"", f);
        fputs(", \"eval_seconds\": ", f);
        ps_json_number(f, b->eval_s > 0.0 ? b->eval_s : NAN);
        fputs(", \"eval_launch_seconds\": ", f);
        ps_json_number(f, b->eval_launch_s > 0.0 ? b->eval_launch_s : NAN);
        fputs(", \"cpu_eval_seconds\": ", f);
        ps_json_number(f, b->cpu_eval_s > 0.0 ? b->cpu_eval_s : NAN);
        if (b->prof_ok) {
            fputs(", \"phase_us_per_iteration\": {", f);
            for (int i = 0; i < PS_GPU_PROF; i++) {
                fprintf(f, "%s", i ? ", " : "");
                ps_json_string(f, prof_names[i]);
                fputs(": ", f);
                ps_json_number(f, b->prof_us[i]);
            }
            fputc('}', f);
            fputs(", \"evaluate_us_per_evaluation\": ", f);
            ps_json_number(f, b->prof_evals > 0.0 ? prof_eval_us(b) : NAN);
            fputs(", \"objective_us_per_iteration\": ", f);
            ps_json_number(f, prof_part(b, 0));
            fputs(", \"optimizer_us_per_iteration\": ", f);
            ps_json_number(f, prof_part(b, 1));
        }
        fputs(",\n      \"rows\": [\n", f);
        for (int i = 0; i < b->nrows; i++)
            json_row(f, b, &b->rows[i], cli->repeats, i == b->nrows - 1);
        fprintf(f, "      ]}%s\n", s == nsizes - 1 ? "" : ",");
    }
    fputs("  ]", f);
    if (ctl && ctl->ran) {
        /* steering a running solve: host-side seconds, median and 99th percentile */
        fputs(",\n  \"control\": {\"size\": ", f);
        ps_json_string(f, ctl_label);
        fprintf(f, ", \"pauses\": %d, \"yields\": %d", ctl->pauses, ctl->yields);
        const char *names[10] = {"pause_median", "pause_p99", "pause_idle_median", "pause_idle_p99",
                                 "resume_median", "resume_p99", "yield_median", "yield_p99",
                                 "relaunch_median", "relaunch_p99"};
        const double vals[10] = {ctl->pause_med, ctl->pause_p99, ctl->idle_med, ctl->idle_p99,
                                 ctl->resume_med, ctl->resume_p99, ctl->yield_med, ctl->yield_p99,
                                 ctl->relaunch_med, ctl->relaunch_p99};
        for (int i = 0; i < 10; i++) {
            fprintf(f, ", \"%s_seconds\": ", names[i]);
            ps_json_number(f, vals[i]);
        }
        fputc('}', f);
    }
    fputs("\n}\n", f);
    return ps_cli_memfile_commit(&mf, path);
}

static void free_size(bench_size *b)
{
    for (int i = 0; i < b->nrows; i++) {
        ps_result_free(&b->rows[i].last);
        free(b->rows[i].samples);
        free(b->rows[i].x);
    }
    for (int i = 0; i < b->ngrows; i++) {
        ps_result_free(&b->grows[i].last);
        free(b->grows[i].samples);
        free(b->grows[i].x);
    }
    ps_problem_free(b->p);
}

/* Poll the snapshot until it is in want_state with a heartbeat above
 * beat_above (and idle, with want_idle); returns the seconds waited, or
 * -1 after 5 s or if the run finished. */
static double await(const ps_run *run, int want_state, uint64_t beat_above, int want_idle)
{
    double t0 = ps_monotonic_seconds();
    ps_snapshot s;
    do {
        ps_run_snapshot(run, &s);
        if (s.state == PS_RUN_FINISHED)
            return -1.0;
        if (s.state == want_state && s.heartbeat > beat_above && (!want_idle || s.idle))
            return ps_monotonic_seconds() - t0;
    } while (ps_monotonic_seconds() - t0 < 5.0);
    return -1.0;
}

/* Sleep 0 to 2 ms, uniformly (a linear congruential step of *seed). */
static void random_gap(uint64_t *seed)
{
    *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
    struct timespec gap = {0, (long)((*seed >> 33) % 2000000u)};
    nanosleep(&gap, NULL);
}

/*
 * Steering a running solve of p (gtol = ftol = 0, no iteration limit, so
 * that it runs until cancelled): CTL_PAUSES times pause (request to the
 * kernel's published PAUSED, the acknowledgement, and on to idle: the
 * kernel stopped at its control point, the state stored) and
 * resume (request to RUNNING published again), then CTL_YIELDS times yield (request to YIELDED: the kernel has
 * exited and its state is copied) and relaunch (resume to the next control
 * point passed, a new heartbeat). Random gaps of up to 2 ms between them.
 */
static void bench_control(const ps_problem *p, const ps_options *o0, control_stats *cs)
{
    ps_options o = *o0;
    o.backend = PS_BACKEND_GPU;
    o.max_iterations = 0;
    size_t n = ps_problem_nx(p);
    double *x = malloc(n * sizeof *x);
    double *a = malloc(CTL_PAUSES * sizeof *a), *b = malloc(CTL_PAUSES * sizeof *b);
    double *c = malloc(CTL_YIELDS * sizeof *c), *d = malloc(CTL_YIELDS * sizeof *d);
    double *e = malloc(CTL_PAUSES * sizeof *e);
    ps_run *run = NULL;
    uint64_t seed = 12345;
    memset(cs, 0, sizeof *cs);
    if (!x || !a || !b || !c || !d || !e)
        goto out;
    ps_problem_x0(p, x);
    if (ps_solve_start(p, &o, x, &run) != 0)
        goto out;
    if (await(run, PS_RUN_RUNNING, 1, 0) < 0.0) /* a control point passed: warm */
        goto out;
    for (int i = 0; i < CTL_PAUSES; i++) {
        random_gap(&seed);
        double t0 = ps_monotonic_seconds();
        ps_run_pause(run);
        if (await(run, PS_RUN_PAUSED, 0, 0) < 0.0)
            goto out;
        a[cs->pauses] = ps_monotonic_seconds() - t0;
        if (await(run, PS_RUN_PAUSED, 0, 1) < 0.0)
            goto out;
        e[cs->pauses] = ps_monotonic_seconds() - t0;
        t0 = ps_monotonic_seconds();
        ps_run_resume(run);
        if (await(run, PS_RUN_RUNNING, 0, 0) < 0.0)
            goto out;
        b[cs->pauses++] = ps_monotonic_seconds() - t0;
    }
    for (int i = 0; i < CTL_YIELDS; i++) {
        random_gap(&seed);
        double t0 = ps_monotonic_seconds();
        ps_run_yield(run);
        if (await(run, PS_RUN_YIELDED, 0, 0) < 0.0)
            goto out;
        c[cs->yields] = ps_monotonic_seconds() - t0;
        ps_snapshot s;
        ps_run_snapshot(run, &s);
        t0 = ps_monotonic_seconds();
        ps_run_resume(run);
        if (await(run, PS_RUN_RUNNING, s.heartbeat, 0) < 0.0)
            goto out;
        d[cs->yields++] = ps_monotonic_seconds() - t0;
    }
    cs->ran = 1;
    cs->pause_med = ps_quantile(a, (size_t)cs->pauses, 0.5);
    cs->pause_p99 = ps_quantile(a, (size_t)cs->pauses, 0.99);
    cs->idle_med = ps_quantile(e, (size_t)cs->pauses, 0.5);
    cs->idle_p99 = ps_quantile(e, (size_t)cs->pauses, 0.99);
    cs->resume_med = ps_quantile(b, (size_t)cs->pauses, 0.5);
    cs->resume_p99 = ps_quantile(b, (size_t)cs->pauses, 0.99);
    cs->yield_med = ps_quantile(c, (size_t)cs->yields, 0.5);
    cs->yield_p99 = ps_quantile(c, (size_t)cs->yields, 0.99);
    cs->relaunch_med = ps_quantile(d, (size_t)cs->yields, 0.5);
    cs->relaunch_p99 = ps_quantile(d, (size_t)cs->yields, 0.99);
out:
    if (run) {
        ps_run_cancel(run);
        ps_run_wait(run, 10.0, NULL, NULL);
        ps_run_free(run);
    }
    free(x);
    free(a);
    free(b);
    free(c);
    free(d);
    free(e);
}

static void print_control(FILE *f, const char *label, const control_stats *cs)
{
    if (!cs->ran) {
        fprintf(f, "\ncontrol (%s): not measured (the run ended or a wait timed out)\n", label);
        return;
    }
    fprintf(f, "\ncontrol (%s, a running solve; host-side times, median / 99th percentile):\n", label);
    fprintf(f, "  pause    request -> kernel published PAUSED   %9.1f / %9.1f us  (%d)\n",
            1e6 * cs->pause_med, 1e6 * cs->pause_p99, cs->pauses);
    fprintf(f, "           request -> kernel stopped (idle)     %9.1f / %9.1f us\n",
            1e6 * cs->idle_med, 1e6 * cs->idle_p99);
    fprintf(f, "  resume   request -> kernel published RUNNING  %9.1f / %9.1f us\n",
            1e6 * cs->resume_med, 1e6 * cs->resume_p99);
    fprintf(f, "  yield    request -> kernel exited, state read %9.1f / %9.1f us  (%d)\n",
            1e6 * cs->yield_med, 1e6 * cs->yield_p99, cs->yields);
    fprintf(f, "  relaunch resume  -> next control point passed %9.1f / %9.1f us\n",
            1e6 * cs->relaunch_med, 1e6 * cs->relaunch_p99);
}

/*
 * --gpus LIST: the size's solve split over each count of GPUs (the
 * persistent kernel with control points, as solve_persistent runs it),
 * the same iterations and repeats, then one profiled run for the time of
 * the exchange per evaluation.
 */
static void bench_gpus(const ps_cli *cli, const ps_problem *p, const ps_options *o, bench_size *b, ps_cli_log *log)
{
    for (int i = 0; i < cli->bench_ngpus; i++) {
        ps_gpu_options g;
        ps_options ok = *o;
        if (o->gpu)
            g = *o->gpu;
        else
            ps_gpu_options_default(&g);
        g.gpus = cli->bench_gpus[i];
        ok.gpu = &g;
        bench_row *row = &b->grows[b->ngrows];
        b->gcount[b->ngrows++] = g.gpus;
        row->name = "gpus";
        bench_row_run(p, &ok, CTL_VARIANT, cli->repeats, 0, row, log);
        if (!row->ran)
            continue;
        unsigned long long ns[PS_GPU_PROF];
        size_t n = ps_problem_nx(p);
        double *x = malloc(n * sizeof *x);
        ps_result r;
        memset(&r, 0, sizeof r);
        if (x && ps_gpu_profile_enable(1) == 0) {
            double secs;
            ps_gpu_profile_read(ns); /* zeroes the counters */
            int st = run_once(p, &ok, CTL_VARIANT, x, &r, &secs);
            if (ps_cli_has_iterates(st, &r) && r.evaluations > 0 && ps_gpu_profile_read(ns) == 0)
                b->gxchg_us[b->ngrows - 1] = 1e-3 * (double)ns[PS_PROF_EXCHANGE] / (double)r.evaluations;
            ps_gpu_profile_enable(0);
        }
        ps_result_free(&r);
        free(x);
    }
}

static void print_gpus(FILE *f, const bench_size *b)
{
    const bench_row *one = b->nrows > CTL_VARIANT && b->rows[CTL_VARIANT].ran ? &b->rows[CTL_VARIANT] : NULL;
    if (!b->ngrows)
        return;
    fprintf(f, "  the solve over several GPUs (spins split; the \"with control\" row is one GPU):\n");
    fprintf(f, "  %-6s %10s %6s %13s %9s %14s  %s\n", "gpus", "ms/iter", "evals", "spin-steps/s", "x 1 GPU",
            "exchange us/ev", "launch");
    for (int i = 0; i < b->ngrows; i++) {
        const bench_row *r = &b->grows[i];
        char k[16];
        if (b->gcount[i] < 0)
            snprintf(k, sizeof k, "all");
        else
            snprintf(k, sizeof k, "%d", b->gcount[i]);
        if (!r->ran) {
            fprintf(f, "  %-6s failed: %s\n", k, ps_strerror(r->status));
            continue;
        }
        fprintf(f, "  %-6s %10.4f %6lld %13.3e %9.2f %14.2f  %s%s\n", k, 1e3 * per_iter(r),
                (long long)r->evaluations, spin_steps(b, r), one ? per_iter(one) / per_iter(r) : NAN,
                b->gxchg_us[i], r->last.device, r->repeatable ? "" : "  (runs differ)");
    }
    fflush(f);
}

int ps_cmd_bench(const ps_cli *cli)
{
    if (cli->bench_batch)
        return ps_cmd_bench_batch(cli);
    control_stats ctl;
    int ctl_size = -1;
    ps_options o = cli->opts;
    ps_cli_log log;
    ps_bench_size list[PS_BENCH_MAX_SIZES];
    bench_size *sizes = NULL;
    char err[256], json_path[4096], gpu_name[256], date[64];
    int code = PS_EXIT_OK, nsizes;

    if ((code = ps_cli_check_options(&o, &log)) != PS_EXIT_OK)
        return code;
    ps_cli_bench_limits(&o, cli->iters);

    /* which rows: the GPU variants if there is a GPU and the CPU is not
     * asked for; the CPU backend's if asked for, or (auto) without a GPU */
    int run_cpu = o.backend == PS_BACKEND_CPU;
    int gpu_st = ps_gpu_usable(&o);
    int run_gpu = gpu_st == 0;
    if (!run_gpu && !run_cpu) {
        const char *why = log.msg[0] ? log.msg : !ps_have_cuda() ? "built without CUDA" : NULL;
        if (o.backend == PS_BACKEND_GPU) {
            ps_cli_error("bench: no usable GPU%s%s%s: the GPU variants cannot run; "
                         "--backend cpu benchmarks the CPU backend alone",
                         why ? " (" : "", why ? why : "", why ? ")" : "");
            return PS_EXIT_BACKEND;
        }
        ps_cli_error("bench: no usable GPU%s%s%s: the CPU backend alone (--backend auto)",
                     why ? " (" : "", why ? why : "", why ? ")" : "");
        run_cpu = 1;
    }
    gpu_name[0] = '\0';
    if (run_gpu && ps_gpu_describe(0, gpu_name, sizeof gpu_name) != 0)
        snprintf(gpu_name, sizeof gpu_name, "GPU 0");
    if (cli->json_file &&
        (code = ps_cli_output_path(cli->json_file, "", "", 1, json_path, sizeof json_path)) != PS_EXIT_OK)
        return code;

    nsizes = ps_cli_bench_sizes(cli->sizes ? cli->sizes : "S,M,L,T", list, PS_BENCH_MAX_SIZES, err,
                                sizeof err);
    if (nsizes < 1) {
        ps_cli_error("--sizes: %s", err);
        return PS_EXIT_USAGE;
    }
    sizes = calloc((size_t)nsizes, sizeof *sizes);
    if (!sizes) {
        ps_cli_error("out of memory");
        return PS_EXIT_SOLVER;
    }
    /* every size's problem is loaded before anything is printed */
    for (int s = 0; s < nsizes && code == PS_EXIT_OK; s++) {
        char base[256];
        sizes[s].sz = list[s];
        code = ps_cli_load_problem(list[s].spec, &sizes[s].p, base, sizeof base);
        if (code == PS_EXIT_INPUT && !strchr(list[s].spec, ':'))
            ps_cli_error("bench: --sizes takes the sizes %s, problem files and preset specs",
                         ps_cli_bench_size_names());
    }
    /* the report never replaces a problem file it benchmarks */
    for (int s = 0; s < nsizes && code == PS_EXIT_OK && cli->json_file; s++) {
        const ps_cli_file in = {"", list[s].spec, "a problem file of --sizes"};
        const ps_cli_file out = {"--json", json_path, "the report"};
        code = ps_cli_check_distinct(&in, 1, &out, 1);
    }
    if (code != PS_EXIT_OK) {
        for (int s = 0; s < nsizes; s++)
            free_size(&sizes[s]);
        free(sizes);
        return code;
    }
    ps_cli_utc_now(date, sizeof date);

    printf("persolve bench  %s\n", date);
    printf("gpu:        %s\n", run_gpu ? gpu_name : "none (GPU variants skipped)");
    printf("runs:       %lld iterations each (gtol = ftol = 0), %s spins, L-BFGS memory %d,\n"
           "            one warm-up run, median of %d timed runs; GPU times are CUDA events\n"
           "            around the solve (no setup or transfers), the CPU's wall time\n",
           (long long)cli->iters, o.precision == PS_PRECISION_DOUBLE ? "float64" : "float32", o.memory,
           cli->repeats);
    printf("columns:    ms/iter; overhead us = (time - evals x evaluation time) / iterations,\n"
           "            the evaluation timed alone at the run's final pulse;\n"
           "            spin-steps/s = Ns Nt evals / time; x persist = time per iteration /\n"
           "            the persistent kernel's; same = bit-identical iterates (f per\n"
           "            iteration, evaluations, final x) to the persistent kernel\n");
    fflush(stdout);

    for (int s = 0; s < nsizes; s++) {
        bench_size *b = &sizes[s];
        const ps_problem *p = b->p;
        b->ns = ps_problem_ns(p);
        b->nt = ps_problem_nt(p);
        b->nx = ps_problem_nx(p);
        b->nc = ps_problem_nc(p);
        ps_problem_desc d;
        if (ps_problem_describe(p, &d) != 0 || ps_design_g_name(d.design_g, b->axes, sizeof b->axes))
            b->axes[0] = '\0';
        size_t n = b->nx;

        if (run_gpu) {
            for (int v = 0; v < N_GPU_VARIANTS; v++) {
                bench_row *row = &b->rows[b->nrows++];
                row->name = variant_names[v];
                bench_row_run(p, &o, v, cli->repeats, 0, row, &log);
                if (!row->ran && code == PS_EXIT_OK)
                    code = ps_cli_exit_code(row->status);
            }
            log.msg[0] = '\0';
            int st = ps_gpu_eval_timing(p, &o, NULL, b->rows[0].ran ? b->rows[0].x : NULL, cli->repeats,
                                        &b->eval_s, &b->eval_launch_s);
            if (st) {
                ps_cli_error("bench: %s: evaluation timing: %s%s%s", b->sz.label, ps_strerror(st),
                             log.msg[0] ? ": " : "", log.msg);
                b->eval_s = b->eval_launch_s = 0.0;
            }
            profile_phases(p, &o, b);
            bench_gpus(cli, p, &o, b, &log);
            if (ctl_size < 0) { /* steering latencies, on the first size */
                bench_control(p, &o, &ctl);
                ctl_size = s;
            }
            if (b->rows[0].ran) {
                snprintf(b->device, sizeof b->device, "%s", b->rows[0].last.device);
                for (int v = 1; v < N_GPU_VARIANTS; v++) {
                    if (!b->rows[v].ran)
                        continue;
                    b->rows[v].same = same_iterates(&b->rows[0], &b->rows[v], n);
                    if (!b->rows[v].same) {
                        ps_cli_error("bench: %s: the %s variant's iterates differ from the "
                                     "persistent kernel's", b->sz.label, b->rows[v].name);
                        code = PS_EXIT_SOLVER;
                    }
                }
            }
        }
        if (run_cpu) {
            bench_row *row = &b->rows[b->nrows++];
            row->name = "cpu";
            ps_options oc = o;
            oc.backend = PS_BACKEND_CPU;
            int warm = 0;
            b->cpu_iters = cli->iters;
            if (cli->cpu_iters > 0 && cli->cpu_iters < cli->iters)
                b->cpu_iters = cli->cpu_iters;
            if (cli->cpu_iters == 0 && cli->iters > 1) {
                /* a one-iteration warm-up sizes the runs (PS_CLI_CPU_RUN_BUDGET) */
                double *x = malloc(n * sizeof *x);
                int64_t fit = x ? ps_cli_cpu_fit_iterations(p, &oc, cli->iters, x, NULL) : 0;
                if (fit > 0) {
                    b->cpu_iters = fit;
                    warm = 1;
                }
                free(x);
            }
            oc.max_iterations = b->cpu_iters;
            bench_row_run(p, &oc, -1, cli->repeats, warm, row, &log);
            if (!row->ran && code == PS_EXIT_OK)
                code = ps_cli_exit_code(row->status);
            if (row->ran)
                b->cpu_eval_s = cpu_eval_seconds(p, &o, row->x, cli->repeats < 3 ? cli->repeats : 3);
        }
        print_size(stdout, b, cli->iters);
        print_gpus(stdout, b);
        if (ctl_size == s)
            print_control(stdout, b->sz.label, &ctl);
    }
    if (code == PS_EXIT_OK || code == PS_EXIT_SOLVER || code == PS_EXIT_NOT_CONVERGED) {
        int done = 0;
        while (done < nsizes && sizes[done].nrows > 0)
            done++;
        if (cli->json_file) {
            int jc = write_json(json_path, cli, &o, run_gpu ? gpu_name : NULL, date, sizes, done,
                                ctl_size >= 0 ? &ctl : NULL, ctl_size >= 0 ? sizes[ctl_size].sz.label : "");
            if (jc != PS_EXIT_OK && code == PS_EXIT_OK)
                code = jc;
            else if (jc == PS_EXIT_OK)
                printf("\njson:       %s\n", json_path);
        }
    }
    for (int s = 0; s < nsizes; s++)
        free_size(&sizes[s]);
    free(sizes);
    return code;
}
