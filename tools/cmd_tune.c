/*
 * persolve tune [PRESET|FILE]: every candidate launch shape of the
 * persistent kernel measured on one problem (ps_gpu_tune), a table with the
 * fastest marked, the choice written to the tune cache that
 * solve_persistent() reads, and with --json FILE the same as JSON.
 *
 * persolve tune --batch N [PRESET|FILE]: the team shapes (block and team
 * size) of a GPU batch of N copies of the problem (ps_gpu_tune_batch)
 * instead, the fastest written to the cache's batch entry that
 * ps_batch_start() reads.
 *
 * On the CPU backend (--backend cpu, or auto without a usable GPU) there
 * is no launch shape: the solve's speed there depends on its thread count,
 * so each count is measured instead and the fastest reported (tune_cpu).
 * --backend gpu without a usable GPU: a message and exit 6
 * (PS_EXIT_NO_GPU).
 */
#include "cmd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/stats.h"
#include "cuda/gpu.h"
#include "persolve_gpu.h"

/* The progress line on a terminal while the shapes are measured. */
typedef struct tune_progress {
    int show;
} tune_progress;

static void on_measured(void *user, const ps_tune_shape *s, size_t index, size_t count)
{
    const tune_progress *tp = user;
    if (!tp->show)
        return;
    fprintf(stderr, "\r  measured %zu of %zu shapes (block %d, %d spins x %d segments)\033[K", index + 1,
            count, s->block, s->spins_per_tile, s->segments);
    if (index + 1 == count)
        fputs("\r\033[K", stderr);
    fflush(stderr);
}

/* The library's log during tune: the last error kept for the message, a
 * warning (a stale, corrupt or unfitting cache entry) shown at once. */
static void tune_log(void *user, int level, const char *file, int line, const char *msg)
{
    ps_cli_log_capture(user, level, file, line, msg);
    if (level == PS_LOG_WARNING)
        ps_cli_error("warning: %s", msg);
}

static int ran(const ps_tune_shape *s)
{
    return isfinite(s->seconds_per_iteration);
}

/* '*' the fastest, 'h' the heuristic's, 'c' the cached row, for row i. */
static void marks(int best, int heuristic, int cached, int i, char *buf)
{
    int n = 0;
    if (i == best)
        buf[n++] = '*';
    if (i == heuristic)
        buf[n++] = 'h';
    if (i == cached)
        buf[n++] = 'c';
    buf[n] = '\0';
}

static void shape_text(const ps_tune_shape *s, char *buf, size_t len)
{
    snprintf(buf, len, "block %d, %d spins x %d segments, <= %d registers, %d blocks per SM (grid %d)",
             s->block, s->spins_per_tile, s->segments, s->max_registers, s->blocks_per_sm, s->grid);
}

static void print_table(FILE *f, const ps_tune_report *r)
{
    const ps_tune_shape *best = r->best >= 0 ? &r->shapes[r->best] : NULL;
    fprintf(f, "\n  %-4s %5s %3s %4s %6s %5s %6s %8s %8s %7s %7s %5s %10s %7s %6s\n", "", "block", "SB", "P",
            "maxreg", "regs", "local", "smem st", "smem dyn", "fit/SM", "used/SM", "grid", "ms/iter",
            "x best", "evals");
    for (size_t i = 0; i < r->count; i++) {
        const ps_tune_shape *s = &r->shapes[i];
        char mk[4], ms[32], ratio[32];
        marks(r->best, r->heuristic, r->cached, (int)i, mk);
        if (ran(s)) {
            snprintf(ms, sizeof ms, "%.4f", 1e3 * s->seconds_per_iteration);
            snprintf(ratio, sizeof ratio, "%.2f", best ? s->seconds_per_iteration / best->seconds_per_iteration : NAN);
        } else {
            snprintf(ms, sizeof ms, "failed");
            snprintf(ratio, sizeof ratio, "-");
        }
        fprintf(f, "  %-4s %5d %3d %4d %6d %5d %6d %8d %8d %7d %7d %5d %10s %7s %6lld%s%s\n", mk, s->block,
                s->spins_per_tile, s->segments, s->max_registers, s->registers, s->local_bytes, s->static_smem,
                s->dynamic_smem, s->resident_blocks, s->blocks_per_sm, s->grid, ms, ratio,
                (long long)s->evaluations, ran(s) ? "" : ": ", ran(s) ? "" : ps_strerror(s->status));
    }
    fflush(f);
}

static void json_shape(FILE *f, const ps_tune_shape *s, int last)
{
    fprintf(f,
            "    {\"block\": %d, \"spins_per_tile\": %d, \"segments\": %d, \"max_registers\": %d, "
            "\"registers\": %d, \"local_bytes\": %d, \"static_smem\": %d, \"dynamic_smem\": %d, "
            "\"resident_blocks_per_sm\": %d, \"blocks_per_sm\": %d, \"grid\": %d, \"status\": %d, "
            "\"iterations\": %lld, \"evaluations\": %lld, \"seconds_per_iteration\": ",
            s->block, s->spins_per_tile, s->segments, s->max_registers, s->registers, s->local_bytes,
            s->static_smem, s->dynamic_smem, s->resident_blocks, s->blocks_per_sm, s->grid, s->status,
            (long long)s->iterations, (long long)s->evaluations);
    ps_json_number(f, s->seconds_per_iteration);
    fputs(", \"f\": ", f);
    ps_json_number(f, s->f);
    fprintf(f, "}%s\n", last ? "" : ",");
}

/* What the JSON of either table starts with. */
typedef struct json_head {
    const ps_cli *cli;
    const ps_options *o;
    const char *spec;     /* the problem as given */
    const ps_problem *p;
    const char *date;
    const char *device, *cache_key, *cache_path;
    int sms, cache_written, best, heuristic, cached;
} json_head;

/* A memory file for path (written whole or not at all: ps_cli_memfile_commit)
 * begun with h's fields; NULL (said) without memory. */
static FILE *json_open(ps_cli_memfile *mf, const char *path, const json_head *h)
{
    FILE *f = ps_cli_json_report(mf, path, h->cli, h->date);
    if (!f)
        return NULL;
    fputs(",\n  \"gpu\": ", f);
    ps_json_string(f, h->device);
    fputs(",\n  \"problem\": ", f);
    ps_json_string(f, h->spec);
    fprintf(f, ",\n  \"ns\": %zu,\n  \"nt\": %zu", ps_problem_ns(h->p), ps_problem_nt(h->p));
    fputs(",\n  \"precision\": ", f);
    ps_json_string(f, ps_cli_precision_name(h->o->precision));
    fprintf(f, ",\n  \"iterations\": %lld,\n  \"repeats\": %d,\n  \"memory\": %d,\n  \"sms\": %d",
            (long long)h->cli->iters, h->cli->repeats, h->o->memory, h->sms);
    fputs(",\n  \"cache_key\": ", f);
    ps_json_string(f, h->cache_key);
    fputs(",\n  \"cache_path\": ", f);
    ps_json_string(f, h->cache_path);
    fprintf(f, ",\n  \"cache_written\": %s,\n  \"best\": %d,\n  \"heuristic\": %d,\n  \"cached\": %d",
            h->cache_written ? "true" : "false", h->best, h->heuristic, h->cached);
    return f;
}

static int write_json(const char *path, const json_head *h, const ps_tune_report *r)
{
    ps_cli_memfile mf;
    FILE *f = json_open(&mf, path, h);
    if (!f)
        return PS_EXIT_INPUT;
    fputs(",\n  \"shapes\": [\n", f);
    for (size_t i = 0; i < r->count; i++)
        json_shape(f, &r->shapes[i], i + 1 == r->count);
    fputs("  ]\n}\n", f);
    return ps_cli_memfile_commit(&mf, path);
}

/* ---- what the solo and the batch table share ---- */

static void print_problem(const char *spec, const ps_problem *p, const ps_options *o)
{
    printf("problem:    %s (Ns %zu, Nt %zu), %s spins, L-BFGS memory %d\n", spec, ps_problem_ns(p),
           ps_problem_nt(p), o->precision == PS_PRECISION_DOUBLE ? "float64" : "float32", o->memory);
}

/* Nothing measured: the message, and the exit code. */
static int tune_failed(int st, const ps_cli_log *log)
{
    ps_cli_error("tune: %s%s%s", ps_strerror(st), log->msg[0] ? ": " : "", log->msg);
    return st == PS_ERR_NO_GPU || st == PS_ERR_GPU_UNSUPPORTED ? PS_EXIT_NO_GPU : ps_cli_exit_code(st);
}

/* After a table: where the cache went, the error of st if any; the exit code. */
static int tune_outcome(const ps_cli *cli, int st, const ps_cli_log *log, int written, const char *path)
{
    if (written)
        printf("cache:      written to %s\n", path);
    else if (cli->no_write)
        printf("cache:      not written (%s); it is %s\n", cli->gpu.tune_cache ? "--no-write" : "--no-cache",
               path[0] ? path : "(no cache directory)");
    if (st == 0)
        return PS_EXIT_OK;
    ps_cli_error("tune: %s%s%s", ps_strerror(st), log->msg[0] ? ": " : "", log->msg);
    return st == PS_ERR_FILE ? PS_EXIT_INPUT : ps_cli_exit_code(st);
}

/* The JSON file written (jc, its exit code): said; the exit code given code. */
static int tune_json(const char *path, int jc, int code)
{
    if (jc == PS_EXIT_OK)
        printf("json:       %s\n", path);
    return code == PS_EXIT_OK ? jc : code;
}

/* ---- --batch N: the team shape (block and team size) of a batch ---- */

static int team_ran(const ps_tune_team *t)
{
    return isfinite(t->seconds_per_iteration);
}

static void print_teams(FILE *f, const ps_tune_batch_report *r)
{
    const ps_tune_team *best = r->best >= 0 ? &r->teams[r->best] : NULL;
    fprintf(f, "\n  %-4s %6s %11s %6s %10s %10s %7s %8s  %s\n", "", "block", "team blocks", "teams", "seconds",
            "ms/iter", "x best", "evals", "status");
    for (size_t i = 0; i < r->count; i++) {
        const ps_tune_team *t = &r->teams[i];
        char mk[4], sec[32], ms[32], ratio[32];
        marks(r->best, r->heuristic, r->cached, (int)i, mk);
        if (team_ran(t)) {
            snprintf(sec, sizeof sec, "%.4f", t->seconds);
            snprintf(ms, sizeof ms, "%.4f", 1e3 * t->seconds_per_iteration);
            snprintf(ratio, sizeof ratio, "%.2f", best ? t->seconds / best->seconds : NAN);
        } else {
            snprintf(sec, sizeof sec, "-");
            snprintf(ms, sizeof ms, "-");
            snprintf(ratio, sizeof ratio, "-");
        }
        fprintf(f, "  %-4s %6d %11d %6d %10s %10s %7s %8lld  %s\n", mk, t->block, t->team_blocks, t->teams, sec, ms,
                ratio, (long long)t->evaluations, team_ran(t) ? "ok" : ps_strerror(t->status));
    }
    fflush(f);
}

static int write_batch_json(const char *path, const json_head *h, const ps_tune_batch_report *r)
{
    ps_cli_memfile mf;
    FILE *f = json_open(&mf, path, h);
    if (!f)
        return PS_EXIT_INPUT;
    fprintf(f, ",\n  \"copies\": %d,\n  \"teams\": [\n", r->copies);
    for (size_t i = 0; i < r->count; i++) {
        const ps_tune_team *t = &r->teams[i];
        fprintf(f,
                "    {\"block\": %d, \"team_blocks\": %d, \"teams\": %d, \"status\": %d, \"iterations\": %lld, "
                "\"evaluations\": %lld, \"seconds\": ",
                t->block, t->team_blocks, t->teams, t->status, (long long)t->iterations, (long long)t->evaluations);
        ps_json_number(f, t->seconds);
        fputs(", \"seconds_per_iteration\": ", f);
        ps_json_number(f, t->seconds_per_iteration);
        fprintf(f, "}%s\n", i + 1 == r->count ? "" : ",");
    }
    fputs("  ]\n}\n", f);
    return ps_cli_memfile_commit(&mf, path);
}

/* tune --batch N: measure, print, write; returns the exit code. */
static int tune_batch(const ps_cli *cli, const ps_options *o, ps_cli_log *log, const ps_problem *p, const char *spec,
                      const char *json_path, const ps_tune_settings *s)
{
    ps_tune_batch_report r;
    char date[64];
    int code;
    ps_cli_utc_now(date, sizeof date);
    printf("persolve tune --batch %d  %s\n", cli->bench_batch, date);
    print_problem(spec, p, o);
    printf("copies:     %d, copy k from x0 scaled by 1 + 0.01 k, in one GPU batch\n", cli->bench_batch);
    printf("runs:       per team shape one warm-up batch, then the median of %d batches of %lld\n"
           "            iterations per copy (gtol = ftol = 0); time = the batch's, from its\n"
           "            start to its end, ms/iter that over one copy's iterations\n",
           cli->repeats, (long long)cli->iters);
    printf("columns:    block the threads per block, team blocks the blocks per team, teams\n"
           "            the teams the kernel had; '*' fastest, 'h' the heuristic's shape,\n"
           "            'c' the cached one\n");
    fflush(stdout);

    log->msg[0] = '\0';
    int st = ps_gpu_tune_batch(p, cli->bench_batch, o, s, &r);
    if (r.count == 0) {
        code = tune_failed(st, log);
        goto done;
    }
    printf("gpu:        %s\n", r.device);
    printf("cache key:  %s\n", r.cache_key);
    print_teams(stdout, &r);
    printf("\n");
    if (r.best >= 0) {
        const ps_tune_team *b = &r.teams[r.best];
        printf("best:       teams of %d blocks of %d threads (%d teams): %.4f s, %.4f ms per iteration\n",
               b->team_blocks, b->block, b->teams, b->seconds, 1e3 * b->seconds_per_iteration);
        if (r.heuristic >= 0 && team_ran(&r.teams[r.heuristic])) {
            const ps_tune_team *h = &r.teams[r.heuristic];
            printf("heuristic:  teams of %d blocks of %d threads: %.4f s (%.2fx the best)\n", h->team_blocks,
                   h->block, h->seconds, h->seconds / b->seconds);
        }
    }
    code = tune_outcome(cli, st, log, r.cache_written, r.cache_path);
    if (cli->json_file) {
        const json_head h = {cli,      o,           spec,         p,     date,
                             r.device, r.cache_key, r.cache_path, r.sms, r.cache_written,
                             r.best,   r.heuristic, r.cached};
        code = tune_json(json_path, write_batch_json(json_path, &h, &r), code);
    }
done:
    ps_tune_batch_report_free(&r);
    return code;
}

/* ---- the CPU backend: its thread counts ---- */

typedef struct cpu_count {
    int threads;     /* 0: the OpenMP default */
    int st;          /* the last solve's status */
    double seconds;  /* median wall time per iteration (NAN: failed) */
    long long evaluations;
    double f;
} cpu_count;

/* One solve of `iters` iterations from x0 at `threads` threads: its wall
 * time per iteration in *secs. */
static int cpu_solve(const ps_problem *p, const ps_options *o, int threads, int64_t iters, double *x,
                     double *secs, cpu_count *c)
{
    ps_options run = *o;
    ps_result r;
    memset(&r, 0, sizeof r);
    run.backend = PS_BACKEND_CPU;
    run.threads = threads;
    ps_cli_bench_limits(&run, iters);
    ps_problem_x0(p, x);
    int st = solve_persistent(p, &run, x, &r);
    int ok = ps_cli_has_iterates(st, &r);
    *secs = ok ? r.seconds / (double)(r.iterations > 0 ? r.iterations : 1) : NAN;
    c->st = st;
    c->evaluations = (long long)r.evaluations;
    c->f = r.f;
    ps_result_free(&r);
    return ok;
}

/* --backend cpu, or auto without a GPU (why: the reason, or NULL): the
 * counts 1, 2, 4, ... below the OpenMP default and the default itself,
 * each one warm-up solve and the median of R solves of the same
 * iterations (--iters, fewer when a solve would take more than
 * PS_CLI_CPU_RUN_BUDGET); nothing is cached (the CPU has no launch shape:
 * --threads chooses the count). */
static int tune_cpu(const ps_cli *cli, ps_options *o, ps_cli_log *log, const ps_problem *p, const char *spec,
                    const char *json_path, const char *why)
{
    const size_t n = ps_problem_nx(p);
    double *x = malloc(n * sizeof *x), *t = malloc((size_t)cli->repeats * sizeof *t), secs = NAN;
    cpu_count c[16];
    int nc = 0, deflt = 0, code = PS_EXIT_OK;
    if (!x || !t) {
        free(x), free(t);
        ps_cli_error("out of memory");
        return PS_EXIT_SOLVER;
    }
    char date[64];
    ps_cli_utc_now(date, sizeof date);
    if (why)
        ps_cli_error("tune: no usable GPU (%s): the CPU backend's thread counts (--backend auto)", why);
    /* the default's warm-up sizes the runs */
    log->other[0] = '\0';
    ps_options dflt = *o;
    dflt.threads = 0;
    const int64_t iters = ps_cli_cpu_fit_iterations(p, &dflt, cli->iters, x, &deflt);
    if (iters == 0) {
        ps_cli_error("tune: the CPU solve failed%s%s", log->other[0] ? ": " : "", log->other);
        free(x), free(t);
        return PS_EXIT_SOLVER;
    }
    for (int k = 1; k < deflt && nc < 15; k *= 2)
        c[nc++] = (cpu_count){k, 0, NAN, 0, NAN};
    c[nc++] = (cpu_count){0, 0, NAN, 0, NAN};

    printf("persolve tune  %s\n", date);
    print_problem(spec, p, o);
    printf("backend:    cpu, %d threads by default (OpenMP); the CPU has no launch shape, so the\n"
           "            thread counts are measured\n", deflt);
    printf("runs:       per count one warm-up solve, then the median of %d solves of %lld iterations\n"
           "            (gtol = ftol = 0); time = the solve's wall time / iterations\n",
           cli->repeats, (long long)iters);
    fflush(stdout);
    int best = -1;
    for (int i = 0; i < nc; i++) {
        int ok = 1;
        for (int r = -1; r < cli->repeats && ok; r++) {
            ok = cpu_solve(p, o, c[i].threads, iters, x, &secs, &c[i]);
            if (r >= 0)
                t[r] = secs;
        }
        c[i].seconds = ok ? ps_median(t, (size_t)cli->repeats) : NAN;
        if (ok && (best < 0 || c[i].seconds < c[best].seconds))
            best = i;
    }
    printf("\n  %-4s %12s %10s %7s %6s\n", "", "threads", "ms/iter", "x best", "evals");
    for (int i = 0; i < nc; i++) {
        char label[32], ms[32] = "failed", ratio[32] = "-";
        snprintf(label, sizeof label, c[i].threads ? "%d" : "%d (default)", c[i].threads ? c[i].threads : deflt);
        if (isfinite(c[i].seconds)) {
            snprintf(ms, sizeof ms, "%.4f", 1e3 * c[i].seconds);
            snprintf(ratio, sizeof ratio, "%.2f", c[i].seconds / c[best].seconds);
        }
        printf("  %-4s %12s %10s %7s %6lld%s%s\n", i == best ? "*" : "", label, ms, ratio, c[i].evaluations,
               isfinite(c[i].seconds) ? "" : ": ", isfinite(c[i].seconds) ? "" : ps_strerror(c[i].st));
    }
    printf("\n");
    if (best < 0) {
        ps_cli_error("tune: no thread count ran");
        code = PS_EXIT_SOLVER;
    } else {
        const int bt = c[best].threads ? c[best].threads : deflt;
        printf("best:       --threads %d: %.4f ms per iteration\n", bt, 1e3 * c[best].seconds);
        printf("cache:      none on the CPU: pass --threads %d (or set OMP_NUM_THREADS)\n", bt);
    }
    if (cli->json_file) {
        ps_cli_memfile mf;
        FILE *f = ps_cli_json_report(&mf, json_path, cli, date);
        if (!f) {
            code = code == PS_EXIT_OK ? PS_EXIT_INPUT : code;
        } else {
            fputs(",\n  \"backend\": \"cpu\",\n  \"problem\": ", f);
            ps_json_string(f, spec);
            fprintf(f, ",\n  \"ns\": %zu,\n  \"nt\": %zu,\n  \"precision\": ", ps_problem_ns(p),
                    ps_problem_nt(p));
            ps_json_string(f, ps_cli_precision_name(o->precision));
            fprintf(f, ",\n  \"iterations\": %lld,\n  \"repeats\": %d,\n  \"default_threads\": %d,\n"
                       "  \"best_threads\": %d,\n  \"counts\": [\n", (long long)iters, cli->repeats, deflt,
                    best < 0 ? 0 : c[best].threads ? c[best].threads : deflt);
            for (int i = 0; i < nc; i++) {
                fprintf(f, "    {\"threads\": %d, \"default\": %s, \"status\": %d, \"evaluations\": %lld, "
                           "\"seconds_per_iteration\": ", c[i].threads ? c[i].threads : deflt,
                        c[i].threads ? "false" : "true", c[i].st, c[i].evaluations);
                ps_json_number(f, c[i].seconds);
                fputs(", \"f\": ", f);
                ps_json_number(f, c[i].f);
                fprintf(f, "}%s\n", i + 1 == nc ? "" : ",");
            }
            fputs("  ]\n}\n", f);
            code = tune_json(json_path, ps_cli_memfile_commit(&mf, json_path), code);
        }
    }
    free(x), free(t);
    return code;
}

int ps_cmd_tune(const ps_cli *cli)
{
    ps_options o = cli->opts;
    ps_cli_log log;
    ps_problem *p = NULL;
    ps_tune_report r;
    ps_bench_size sz;
    char base[256], json_path[4096], date[64], why[256];
    int code;

    memset(&r, 0, sizeof r);
    if ((code = ps_cli_check_options(&o, &log)) != PS_EXIT_OK)
        return code;
    o.log = tune_log;
    if (cli->json_file &&
        (code = ps_cli_output_path(cli->json_file, "", "", 1, json_path, sizeof json_path)) != PS_EXIT_OK)
        return code;
    /* S, M, L, T name the benchmark sizes; anything else is a preset spec or a file */
    if (ps_cli_bench_sizes(cli->input, &sz, 1, why, sizeof why) != 1)
        snprintf(sz.spec, sizeof sz.spec, "%s", cli->input);
    if ((code = ps_cli_load_problem(sz.spec, &p, base, sizeof base)) != PS_EXIT_OK)
        return code;
    const ps_cli_file in = {"", sz.spec, "the problem file tuned on"};
    const ps_cli_file out = {"--json", cli->json_file ? json_path : NULL, "the report"};
    if ((code = ps_cli_check_distinct(&in, 1, &out, 1)) != PS_EXIT_OK) {
        ps_problem_free(p);
        return code;
    }
    int st = o.backend == PS_BACKEND_CPU ? PS_ERR_NO_GPU : ps_gpu_usable(&o);
    if (st != 0) {
        const char *reason = log.msg[0] ? log.msg : !ps_have_cuda() ? "built without CUDA" : ps_strerror(st);
        if (cli->bench_batch && o.backend == PS_BACKEND_CPU) {
            ps_cli_error("tune --batch measures a GPU batch's team shapes: not with --backend cpu");
            ps_problem_free(p);
            return PS_EXIT_USAGE;
        }
        if (o.backend == PS_BACKEND_GPU || cli->bench_batch) {
            ps_cli_error("tune: no usable GPU (%s): %s can only be measured on a GPU%s", reason,
                         cli->bench_batch ? "batch team shapes" : "launch shapes",
                         cli->bench_batch ? "" : "; --backend cpu measures the CPU backend's thread counts");
            ps_problem_free(p);
            return PS_EXIT_NO_GPU;
        }
        code = tune_cpu(cli, &o, &log, p, sz.spec, json_path,
                        o.backend == PS_BACKEND_CPU ? NULL : reason);
        ps_problem_free(p);
        return code;
    }

    ps_tune_settings s;
    tune_progress tp = {isatty(STDERR_FILENO)};
    ps_tune_settings_default(&s);
    s.iterations = (int)cli->iters;
    s.repeats = cli->repeats;
    s.write_cache = !cli->no_write;
    if (cli->bench_batch) {
        code = tune_batch(cli, &o, &log, p, sz.spec, json_path, &s);
        ps_problem_free(p);
        return code;
    }
    s.measured = on_measured;
    s.user = &tp;
    ps_cli_utc_now(date, sizeof date);
    printf("persolve tune  %s\n", date);
    print_problem(sz.spec, p, &o);
    printf("runs:       per shape one warm-up solve, then the median of %d solves of %lld iterations\n"
           "            (gtol = ftol = 0); time = the solve kernel's (CUDA events) / iterations\n",
           cli->repeats, (long long)cli->iters);
    printf("columns:    SB spins per tile, P time segments (block / SB), maxreg the kernel build's\n"
           "            register cap, regs registers per thread, local the local memory bytes per\n"
           "            thread, smem static and dynamic shared memory bytes per block, fit/SM the\n"
           "            blocks that fit on an SM (occupancy API), used/SM and grid the cooperative\n"
           "            grid; '*' fastest, 'h' the heuristic's shape, 'c' the cached one\n");
    fflush(stdout);

    log.msg[0] = '\0';
    st = ps_gpu_tune(p, &o, &s, &r);
    if (r.count == 0) {
        code = tune_failed(st, &log);
        goto done;
    }
    printf("gpu:        %s\n", r.device);
    printf("cache key:  %s\n", r.cache_key);
    print_table(stdout, &r);
    printf("\n");
    if (r.best >= 0) {
        char text[256];
        const ps_tune_shape *b = &r.shapes[r.best];
        shape_text(b, text, sizeof text);
        printf("best:       %s: %.4f ms per iteration\n", text, 1e3 * b->seconds_per_iteration);
        if (r.heuristic >= 0 && ran(&r.shapes[r.heuristic]))
            printf("heuristic:  %.4f ms per iteration (%.2fx the best)\n",
                   1e3 * r.shapes[r.heuristic].seconds_per_iteration,
                   r.shapes[r.heuristic].seconds_per_iteration / b->seconds_per_iteration);
    }
    code = tune_outcome(cli, st, &log, r.cache_written, r.cache_path);
    if (cli->json_file) {
        const json_head h = {cli,      &o,          sz.spec,      p,     date,
                             r.device, r.cache_key, r.cache_path, r.sms, r.cache_written,
                             r.best,   r.heuristic, r.cached};
        code = tune_json(json_path, write_json(json_path, &h, &r), code);
    }
done:
    ps_tune_report_free(&r);
    ps_problem_free(p);
    return code;
}
