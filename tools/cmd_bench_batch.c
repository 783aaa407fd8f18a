/*
 * persolve bench --batch N SIZE: N copies of one problem solved three ways
 * with the same iterations (gtol = ftol = 0, --iters N):
 *   batch        one batch (ps_batch_*): on the GPU one persistent launch
 *                whose teams take the copies from a queue; on the CPU
 *                worker threads of one thread each
 *   sequence     N solo solves one after the other (solve_persistent)
 *   concurrent   N solo solves started together (ps_solve_start N times,
 *                then ps_run_wait on each): on the GPU N cooperative
 *                kernels on N streams, each forced to the batch's team
 *                shape (ps_batch_shape; a kernel that fills the GPU would
 *                leave no room for the others), on the CPU N worker threads
 * Copy k starts from the problem's x0 scaled by 1 + 0.01 k (the copies
 * differ, the work per copy stays alike). Times are wall times of the
 * whole variant, setup included; one warm-up solve precedes them and each
 * variant runs --repeats times, the median counts. Aggregate spin-steps/s
 * = sum over the copies of Ns Nt evaluations / wall time.
 */
#include "cmd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/stats.h"

enum { V_BATCH, V_SEQUENCE, V_CONCURRENT, N_VARIANTS };

static const char *const variant_names[N_VARIANTS] = {"batch", "sequence", "concurrent"};
static const char *const variant_what[N_VARIANTS] = {
    "one batch (ps_batch_*)", "N solo solves, one after the other",
    "N solo solves started together"};

typedef struct copy_out {
    int status;
    int64_t iterations, evaluations;
    double *x;        /* [nx] final pulse */
    double *f;        /* [rows] f per iteration */
    size_t rows;
} copy_out;

typedef struct variant {
    int skipped;      /* not asked for (--variants) */
    int ran;          /* every copy ended with iterates */
    int status;       /* the first failing status (0 when all ran) */
    double *samples;  /* [repeats] wall times, s */
    double seconds;   /* their median */
    int64_t iterations, evaluations; /* summed over the copies (last run) */
    int same;         /* iterates bit-identical to the batch's: 1, 0; -1 n/a */
    int teams;        /* batch: teams or workers */
    int team_blocks;  /* batch, GPU: blocks per team */
    int block;        /* batch, GPU: threads per block */
    int team_barrier; /* batch, GPU: PS_TEAM_BARRIER_RANGE or _CLUSTER */
    double setup, kernel; /* the last run's: batch, GPU: setup and kernel seconds
                             (ps_batch_report); sequence: the solves' kernel seconds */
    char device[128]; /* the first copy's ps_result.device */
    copy_out *copy;   /* [n] the last run's */
} variant;

typedef struct bench_batch {
    const ps_problem *p;
    const ps_options *o;
    size_t n, nx;
    double *x0;       /* [n][nx] the copies' start points */
    ps_cli_log *log;
    ps_gpu_options shape; /* the batch's team shape (ps_batch_shape), for concurrent */
    int have_shape;       /* 1 once the batch's run has given it */
    double bound;         /* concurrent: seconds it may take before it is cancelled */
} bench_batch;

/* Seconds the concurrent variant's cancelled runs get to end. */
#define PS_BENCH_CANCEL_WAIT 10.0

static int has_iterates(int st)
{
    return st >= 0 || st == PS_ERR_LINE_SEARCH;
}

/* Keep copy k's outcome (r's history f, x). */
static int keep_copy(copy_out *c, const ps_result *r, const double *x, size_t nx)
{
    free(c->f);
    c->status = r->status;
    c->iterations = r->iterations;
    c->evaluations = r->evaluations;
    c->rows = r->history_len;
    c->f = malloc((c->rows ? c->rows : 1) * sizeof(double));
    if (!c->f)
        return PS_ERR_NO_MEMORY;
    for (size_t i = 0; i < c->rows; i++)
        c->f[i] = r->history[i].f;
    memcpy(c->x, x, nx * sizeof(double));
    return 0;
}

/* Copy k ended with status rs, result r and pulse x: kept (r freed).
 * Returns 0, or the status that stops the variant. */
static int take_copy(variant *v, size_t k, int rs, ps_result *r, const double *x, size_t nx)
{
    int st = 0;
    if (!has_iterates(rs))
        st = rs;
    else if (keep_copy(&v->copy[k], r, x, nx))
        st = PS_ERR_NO_MEMORY;
    if (k == 0)
        snprintf(v->device, sizeof v->device, "%s", r->device);
    ps_result_free(r);
    return st;
}

/* One timed run of a variant; returns its wall time (NAN on failure). */
static double run_variant(bench_batch *bb, int which, variant *v)
{
    const size_t n = bb->n, nx = bb->nx;
    double *x = malloc(nx * sizeof(double));
    ps_result r;
    int st = 0;
    if (!x)
        return NAN;
    memset(&r, 0, sizeof r);
    bb->log->msg[0] = bb->log->other[0] = '\0';
    double t0 = ps_monotonic_seconds(), t1 = NAN;
    if (which == V_BATCH) {
        ps_batch *b = NULL;
        st = ps_batch_create(bb->o, &b);
        for (size_t k = 0; k < n && st == 0; k++) {
            int ast = ps_batch_add(b, bb->p, bb->x0 + k * nx, NULL);
            if (ast != 0 && ps_batch_size(b) != k + 1)
                st = ast;
        }
        if (st == 0)
            st = ps_batch_start(b);
        ps_batch_report rep;
        while (st == 0) {
            if (ps_batch_progress(b, &rep) == 0 && rep.teams > v->teams)
                v->teams = rep.teams; /* the teams of the running launch */
            if ((st = ps_batch_wait(b, 0.01)) != PS_RUNNING)
                break;
            st = 0;
        }
        t1 = ps_monotonic_seconds();
        if (b && st == 0 && ps_batch_shape(b, 0, &bb->shape, NULL) == 0)
            bb->have_shape = bb->shape.gpu_grid > 0;
        if (b && ps_batch_progress(b, &rep) == 0) {
            v->team_blocks = rep.team_blocks;
            v->block = rep.block;
            v->team_barrier = rep.team_barrier;
            v->setup = rep.setup_seconds;
            v->kernel = rep.kernel_seconds;
        }
        for (size_t k = 0; k < n && st == 0; k++) {
            st = take_copy(v, k, ps_batch_result(b, k, &r, x), &r, x, nx);
        }
        ps_batch_free(b);
    } else if (which == V_SEQUENCE) {
        v->kernel = 0.0;
        for (size_t k = 0; k < n && st == 0; k++) {
            memcpy(x, bb->x0 + k * nx, nx * sizeof(double));
            st = take_copy(v, k, solve_persistent(bb->p, bb->o, x, &r), &r, x, nx);
            v->kernel += r.kernel_seconds;
        }
        t1 = ps_monotonic_seconds();
    } else {
        ps_run **runs = calloc(n, sizeof *runs);
        if (!runs)
            st = PS_ERR_NO_MEMORY;
        ps_options oc = *bb->o;
        if (bb->have_shape)
            oc.gpu = &bb->shape;
        for (size_t k = 0; k < n && st == 0; k++)
            st = ps_solve_start(bb->p, &oc, bb->x0 + k * nx, &runs[k]);
        /* bounded: N cooperative kernels on N streams may take very long */
        int late = 0;
        for (size_t k = 0; k < n && runs && runs[k]; k++) {
            double left = bb->bound - (ps_monotonic_seconds() - t0);
            if (ps_run_wait(runs[k], left > 0 ? left : 0.0, NULL, NULL) == PS_RUNNING)
                late = 1;
        }
        t1 = ps_monotonic_seconds();
        size_t stuck = 0;
        if (late) {
            for (size_t k = 0; k < n; k++)
                if (runs[k])
                    ps_run_cancel(runs[k]);
            ps_cli_error("bench --batch: concurrent: not finished after %.1f s (20 times the slower of "
                         "batch and sequence): cancelled", t1 - t0);
            st = PS_CANCELLED;
            /* a cancelled run ends at its kernel's next control point; one
             * whose kernel never gets there would hold ps_run_free forever:
             * such runs are left to the process's exit, and said */
            const double tc = ps_monotonic_seconds();
            for (size_t k = 0; k < n; k++) {
                const double left = PS_BENCH_CANCEL_WAIT - (ps_monotonic_seconds() - tc);
                if (runs[k] && ps_run_wait(runs[k], left > 0 ? left : 0.0, NULL, NULL) == PS_RUNNING) {
                    runs[k] = NULL;
                    stuck++;
                }
            }
            if (stuck)
                ps_cli_error("bench --batch: concurrent: %zu of %zu cancelled runs did not end within %.0f s; "
                             "left running until the process exits", stuck, n, PS_BENCH_CANCEL_WAIT);
        }
        for (size_t k = 0; k < n && st == 0; k++) {
            st = take_copy(v, k, ps_run_wait(runs[k], -1.0, &r, x), &r, x, nx);
        }
        for (size_t k = 0; k < n && runs; k++)
            ps_run_free(runs[k]);
        free(runs);
    }
    free(x);
    if (st != 0) {
        if (v->status == 0) {
            v->status = st;
            const char *why = ps_cli_log_reason(bb->log, st);
            ps_cli_error("bench --batch: %s: %s%s%s", variant_names[which], ps_strerror(st),
                         why[0] ? ": " : "", why);
        }
        return NAN;
    }
    v->iterations = v->evaluations = 0;
    for (size_t k = 0; k < n; k++) {
        v->iterations += v->copy[k].iterations;
        v->evaluations += v->copy[k].evaluations;
    }
    return t1 - t0;
}

/* Every copy's f history and final x equal the batch's, bit for bit. */
static int same_as(const variant *a, const variant *b, size_t n, size_t nx)
{
    for (size_t k = 0; k < n; k++) {
        const copy_out *x = &a->copy[k], *y = &b->copy[k];
        if (x->status != y->status || x->evaluations != y->evaluations || x->rows != y->rows ||
            memcmp(x->f, y->f, x->rows * sizeof(double)) ||
            memcmp(x->x, y->x, nx * sizeof(double)))
            return 0;
    }
    return 1;
}

static double spin_steps(const bench_batch *bb, const variant *v)
{
    return (double)ps_problem_ns(bb->p) * (double)ps_problem_nt(bb->p) *
           (double)v->evaluations / v->seconds;
}

static int write_json(const char *path, const ps_cli *cli, const bench_batch *bb,
                      const ps_bench_size *sz, const variant *v, const char *date)
{
    ps_cli_memfile mf;
    FILE *f = ps_cli_json_report(&mf, path, cli, date);
    if (!f)
        return PS_EXIT_INPUT;
    fputs(",\n  \"size\": ", f);
    ps_json_string(f, sz->label);
    fputs(",\n  \"spec\": ", f);
    ps_json_string(f, sz->spec);
    fprintf(f, ",\n  \"ns\": %zu, \"nt\": %zu, \"nc\": %zu, \"n\": %zu", ps_problem_ns(bb->p),
            ps_problem_nt(bb->p), ps_problem_nc(bb->p), bb->nx);
    fprintf(f, ",\n  \"copies\": %zu,\n  \"iterations\": %lld,\n  \"repeats\": %d", bb->n,
            (long long)cli->iters, cli->repeats);
    fputs(",\n  \"precision\": ", f);
    ps_json_string(f, ps_cli_precision_name(bb->o->precision));
    fprintf(f, ",\n  \"team_blocks_option\": %d,\n  \"team_blocks\": %d,\n  \"block\": %d,\n  \"team_barrier_option\": ",
            cli->gpu.batch_team_blocks, v[V_BATCH].team_blocks, v[V_BATCH].block);
    ps_json_string(f, cli->gpu.batch_team_barrier == PS_TEAM_BARRIER_AUTO
                          ? "auto"
                          : ps_cli_team_barrier_name(cli->gpu.batch_team_barrier));
    fputs(",\n  \"team_barrier\": ", f);
    ps_json_string(f, ps_cli_team_barrier_name(v[V_BATCH].team_barrier));
    fputs(",\n  \"variants\": [\n", f);
    for (int i = 0; i < N_VARIANTS; i++) {
        const variant *w = &v[i];
        fputs("    {\"variant\": ", f);
        ps_json_string(f, variant_names[i]);
        fputs(", \"what\": ", f);
        ps_json_string(f, variant_what[i]);
        fprintf(f, ", \"skipped\": %s, \"ran\": %s, \"status\": %d", w->skipped ? "true" : "false",
                w->ran ? "true" : "false", w->status);
        if (w->ran) {
            fputs(", \"device\": ", f);
            ps_json_string(f, w->device);
            fputs(", \"seconds\": ", f);
            ps_json_number(f, w->seconds);
            fprintf(f, ", \"iterations\": %lld, \"evaluations\": %lld",
                    (long long)w->iterations, (long long)w->evaluations);
            fputs(", \"spin_steps_per_second\": ", f);
            ps_json_number(f, spin_steps(bb, w));
            fputs(", \"batch_speedup\": ", f);
            ps_json_number(f, v[V_BATCH].ran ? w->seconds / v[V_BATCH].seconds : NAN);
            fprintf(f, ", \"same_iterates_as_batch\": %s",
                    w->same < 0 ? "null" : w->same ? "true" : "false");
            if (i == V_BATCH)
                fprintf(f, ", \"teams\": %d", w->teams);
            fputs(", \"samples_seconds\": [", f);
            for (int s = 0; s < cli->repeats; s++) {
                fputs(s ? ", " : "", f);
                ps_json_number(f, w->samples[s]);
            }
            fputc(']', f);
        }
        fprintf(f, "}%s\n", i + 1 < N_VARIANTS ? "," : "");
    }
    fputs("  ]\n}\n", f);
    return ps_cli_memfile_commit(&mf, path);
}

int ps_cmd_bench_batch(const ps_cli *cli)
{
    ps_options o = cli->opts;
    ps_cli_log log;
    ps_bench_size sz;
    ps_problem *p = NULL;
    variant v[N_VARIANTS];
    bench_batch bb;
    char json_path[4096], date[64], base[256], why[256];
    int code;

    memset(v, 0, sizeof v);
    memset(&bb, 0, sizeof bb);
    if ((code = ps_cli_check_options(&o, &log)) != PS_EXIT_OK)
        return code;
    ps_cli_bench_limits(&o, cli->iters);
    if (cli->json_file && (code = ps_cli_output_path(cli->json_file, "", "", 1, json_path,
                                                     sizeof json_path)) != PS_EXIT_OK)
        return code;
    if (ps_cli_bench_sizes(cli->input, &sz, 1, why, sizeof why) != 1) {
        snprintf(sz.label, sizeof sz.label, "%.63s", cli->input);
        snprintf(sz.spec, sizeof sz.spec, "%s", cli->input);
    }
    if ((code = ps_cli_load_problem(sz.spec, &p, base, sizeof base)) != PS_EXIT_OK)
        return code;
    const ps_cli_file in = {"", sz.spec, "the problem file benchmarked"};
    const ps_cli_file out = {"--json", cli->json_file ? json_path : NULL, "the report"};
    if ((code = ps_cli_check_distinct(&in, 1, &out, 1)) != PS_EXIT_OK) {
        ps_problem_free(p);
        return code;
    }

    bb.p = p;
    bb.o = &o;
    bb.n = (size_t)cli->bench_batch;
    bb.nx = ps_problem_nx(p);
    bb.log = &log;
    bb.bound = 60.0;
    bb.x0 = malloc(bb.n * bb.nx * sizeof(double));
    for (int i = 0; i < N_VARIANTS; i++) {
        v[i].samples = calloc((size_t)cli->repeats, sizeof(double));
        v[i].copy = calloc(bb.n, sizeof(copy_out));
        v[i].same = -1;
        for (size_t k = 0; v[i].copy && k < bb.n; k++)
            if (!(v[i].copy[k].x = malloc(bb.nx * sizeof(double))))
                bb.x0 = (free(bb.x0), NULL);
        if (!v[i].samples || !v[i].copy)
            bb.x0 = (free(bb.x0), NULL);
    }
    if (!bb.x0) {
        ps_cli_error("out of memory");
        code = PS_EXIT_SOLVER;
        goto done;
    }
    ps_problem_x0(p, bb.x0);
    for (size_t k = 1; k < bb.n; k++)
        for (size_t i = 0; i < bb.nx; i++)
            bb.x0[k * bb.nx + i] = bb.x0[i] * (1.0 + 0.01 * (double)k);

    /* warm-up: one solo solve (a GPU context, the caches) */
    {
        double *x = malloc(bb.nx * sizeof(double));
        ps_result r;
        memset(&r, 0, sizeof r);
        int st = x ? (memcpy(x, bb.x0, bb.nx * sizeof(double)), solve_persistent(p, &o, x, &r))
                   : PS_ERR_NO_MEMORY;
        ps_result_free(&r);
        free(x);
        if (!has_iterates(st)) {
            const char *w = ps_cli_log_reason(&log, st);
            if (st == PS_ERR_NO_GPU || st == PS_ERR_GPU_UNSUPPORTED)
                ps_cli_backend_error(&o, st, &log, "");
            else
                ps_cli_error("bench --batch: %s%s%s", ps_strerror(st), w[0] ? ": " : "", w);
            code = ps_cli_exit_code(st);
            goto done;
        }
    }
    ps_cli_utc_now(date, sizeof date);
    printf("persolve bench --batch  %s\n", date);
    printf("size:       %s  %s  (Ns %zu, Nt %zu, Nc %zu, n %zu)\n", sz.label, sz.spec,
           ps_problem_ns(p), ps_problem_nt(p), ps_problem_nc(p), bb.nx);
    printf("copies:     %zu, copy k from x0 scaled by 1 + 0.01 k\n", bb.n);
    printf("runs:       %lld iterations each (gtol = ftol = 0), %s spins, L-BFGS memory %d,\n"
           "            one warm-up solve, median of %d timed runs of each variant; wall\n"
           "            times, setup included\n",
           (long long)cli->iters, o.precision == PS_PRECISION_DOUBLE ? "float64" : "float32",
           o.memory, cli->repeats);
    fflush(stdout);

    const int want = cli->bench_variants ? cli->bench_variants : (1 << N_VARIANTS) - 1;
    for (int i = 0; i < N_VARIANTS; i++) {
        v[i].skipped = !(want & 1 << i);
        v[i].ran = !v[i].skipped;
        if (i == V_CONCURRENT && v[i].ran) { /* 20 times the slower of the others (their first runs) */
            double slow = 0.0;
            for (int j = 0; j < V_CONCURRENT; j++)
                if (v[j].ran && v[j].samples[0] > slow)
                    slow = v[j].samples[0];
            bb.bound = slow > 0.0 ? 20.0 * slow : 60.0;
        }
        for (int s = 0; s < cli->repeats && v[i].ran; s++) {
            v[i].samples[s] = run_variant(&bb, i, &v[i]);
            if (i < V_CONCURRENT) {
                printf("            %s run %d: %.4f s\n", variant_names[i], s + 1, v[i].samples[s]);
                fflush(stdout);
            }
            v[i].ran = isfinite(v[i].samples[s]);
        }
        if (v[i].ran)
            v[i].seconds = ps_median(v[i].samples, (size_t)cli->repeats);
        else if (code == PS_EXIT_OK)
            code = ps_cli_exit_code(v[i].status);
    }
    for (int i = 1; i < N_VARIANTS; i++)
        if (v[i].ran && v[V_BATCH].ran)
            v[i].same = same_as(&v[V_BATCH], &v[i], bb.n, bb.nx);

    printf("backend:    %s\n", v[V_BATCH].device[0] ? v[V_BATCH].device : v[1].device);
    printf("\n  %-12s %-36s %10s %13s %9s %12s %6s\n", "variant", "", "seconds", "spin-steps/s",
           "speed-up", "evaluations", "same");
    for (int i = 0; i < N_VARIANTS; i++) {
        const variant *w = &v[i];
        if (w->skipped) {
            printf("  %-12s %-36s not run (--variants)\n", variant_names[i], variant_what[i]);
            continue;
        }
        if (!w->ran) {
            printf("  %-12s %-36s failed: %s\n", variant_names[i], variant_what[i],
                   ps_strerror(w->status));
            continue;
        }
        char up[32];
        if (v[V_BATCH].ran && i != V_BATCH)
            snprintf(up, sizeof up, "%.2fx", w->seconds / v[V_BATCH].seconds);
        else
            snprintf(up, sizeof up, "-");
        printf("  %-12s %-36s %10.4f %13.3e %9s %12lld %6s\n", variant_names[i], variant_what[i],
               w->seconds, spin_steps(&bb, w), up, (long long)w->evaluations,
               w->same < 0 ? "-" : w->same ? "yes" : "no");
    }
    printf("\ncolumns:    speed-up = the variant's time / the batch's; same = every copy's\n"
           "            iterates (f per iteration, evaluations, final x) bit-identical to\n"
           "            the batch's\n");
    if (v[V_BATCH].teams > 0)
        printf("batch:      %d teams (GPU) or workers (CPU) seen running\n", v[V_BATCH].teams);
    if (v[V_BATCH].team_blocks > 0)
        printf("            %d blocks of %d threads per team (%s barrier); last run: setup %.4f s,\n"
               "            kernel %.4f s (CUDA events); the sequence's kernels %.4f s\n",
               v[V_BATCH].team_blocks, v[V_BATCH].block, ps_cli_team_barrier_name(v[V_BATCH].team_barrier), v[V_BATCH].setup,
               v[V_BATCH].kernel, v[V_SEQUENCE].kernel);
    if (cli->json_file) {
        int jc = write_json(json_path, cli, &bb, &sz, v, date);
        if (jc != PS_EXIT_OK && code == PS_EXIT_OK)
            code = jc;
        else if (jc == PS_EXIT_OK)
            printf("\njson:       %s\n", json_path);
    }
    fflush(stdout);
done:
    for (int i = 0; i < N_VARIANTS; i++) {
        for (size_t k = 0; v[i].copy && k < bb.n; k++) {
            free(v[i].copy[k].x);
            free(v[i].copy[k].f);
        }
        free(v[i].copy);
        free(v[i].samples);
    }
    free(bb.x0);
    ps_problem_free(p);
    return code;
}
