/*
 * persolve tune [PRESET|FILE]: every candidate launch shape of the
 * persistent kernel measured on one problem (ps_gpu_tune), a table with the
 * fastest marked, the choice written to the tune cache that
 * solve_persistent() reads, and with --json FILE the same as JSON.
 *
 * Without a usable GPU there is nothing to measure: a message and exit 6
 * (PS_EXIT_NO_GPU).
 */
#include "cmd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static void marks(const ps_tune_report *r, int i, char *buf)
{
    int n = 0;
    if (i == r->best)
        buf[n++] = '*';
    if (i == r->heuristic)
        buf[n++] = 'h';
    if (i == r->cached)
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
        marks(r, (int)i, mk);
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

static int write_json(const char *path, const ps_cli *cli, const ps_options *o, const char *spec,
                      const ps_problem *p, const char *date, const ps_tune_report *r)
{
    ps_cli_memfile mf; /* written whole or not at all */
    FILE *f = ps_cli_memfile_open(&mf);
    if (!f) {
        ps_cli_error("%s: cannot write: out of memory", path);
        return PS_EXIT_INPUT;
    }
    char cmd[4096];
    ps_cli_command_line(cli, cmd, sizeof cmd);
    fputs("{\n  \"persolve\": ", f);
    ps_json_string(f, ps_version());
    fputs(",\n  \"gpu\": ", f);
    ps_json_string(f, r->device);
    fputs(",\n  \"date\": ", f);
    ps_json_string(f, date);
    fputs(",\n  \"command\": ", f);
    ps_json_string(f, cmd);
    fputs(",\n  \"problem\": ", f);
    ps_json_string(f, spec);
    fprintf(f, ",\n  \"ns\": %zu,\n  \"nt\": %zu", ps_problem_ns(p), ps_problem_nt(p));
    fputs(",\n  \"precision\": ", f);
    ps_json_string(f, ps_cli_precision_name(o->precision));
    fprintf(f, ",\n  \"iterations\": %lld,\n  \"repeats\": %d,\n  \"memory\": %d,\n  \"sms\": %d",
            (long long)cli->iters, cli->repeats, o->memory, r->sms);
    fputs(",\n  \"cache_key\": ", f);
    ps_json_string(f, r->cache_key);
    fputs(",\n  \"cache_path\": ", f);
    ps_json_string(f, r->cache_path);
    fprintf(f, ",\n  \"cache_written\": %s,\n  \"best\": %d,\n  \"heuristic\": %d,\n  \"cached\": %d",
            r->cache_written ? "true" : "false", r->best, r->heuristic, r->cached);
    fputs(",\n  \"shapes\": [\n", f);
    for (size_t i = 0; i < r->count; i++)
        json_shape(f, &r->shapes[i], i + 1 == r->count);
    fputs("  ]\n}\n", f);
    return ps_cli_memfile_commit(&mf, path);
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
    int st = ps_gpu_usable(&o);
    if (st != 0) {
        const char *reason = log.msg[0] ? log.msg : !ps_have_cuda() ? "built without CUDA" : ps_strerror(st);
        ps_cli_error("tune: no usable GPU (%s): launch shapes can only be measured on a GPU; "
                     "without one, solves run on the CPU and need no tuning", reason);
        ps_problem_free(p);
        return PS_EXIT_NO_GPU;
    }

    ps_tune_settings s;
    tune_progress tp = {isatty(STDERR_FILENO)};
    ps_tune_settings_default(&s);
    s.iterations = (int)cli->iters;
    s.repeats = cli->repeats;
    s.write_cache = !cli->no_write;
    s.measured = on_measured;
    s.user = &tp;
    ps_cli_utc_now(date, sizeof date);
    printf("persolve tune  %s\n", date);
    printf("problem:    %s (Ns %zu, Nt %zu), %s spins, L-BFGS memory %d\n", sz.spec, ps_problem_ns(p),
           ps_problem_nt(p), o.precision == PS_PRECISION_DOUBLE ? "float64" : "float32", o.memory);
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
        ps_cli_error("tune: %s%s%s", ps_strerror(st), log.msg[0] ? ": " : "", log.msg);
        code = st == PS_ERR_NO_GPU || st == PS_ERR_GPU_UNSUPPORTED ? PS_EXIT_NO_GPU : ps_cli_exit_code(st);
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
    if (r.cache_written)
        printf("cache:      written to %s\n", r.cache_path);
    else if (cli->no_write)
        printf("cache:      not written (%s); it is %s\n", cli->gpu.tune_cache ? "--no-write" : "--no-cache",
               r.cache_path[0] ? r.cache_path : "(no cache directory)");
    if (st != 0) {
        ps_cli_error("tune: %s%s%s", ps_strerror(st), log.msg[0] ? ": " : "", log.msg);
        code = st == PS_ERR_FILE ? PS_EXIT_INPUT : ps_cli_exit_code(st);
    }
    if (cli->json_file) {
        int jc = write_json(json_path, cli, &o, sz.spec, p, date, &r);
        if (jc == PS_EXIT_OK)
            printf("json:       %s\n", json_path);
        else if (code == PS_EXIT_OK)
            code = jc;
    }
done:
    ps_tune_report_free(&r);
    ps_problem_free(p);
    return code;
}
