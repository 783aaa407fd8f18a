/*
 * persolve design with several problems (more than one PRESET|FILE, or
 * --batch LIST): one batch (ps_batch_*), solved together (on the GPU in
 * one persistent launch, on the CPU by worker threads), and per problem
 * the result file a solo `persolve design` writes, in the directory -o DIR
 * as NNN_NAME.h5 (NNN its number in the batch from 000, NAME the preset
 * spec or the file's base name with the characters a file name would trip
 * on replaced by '_').
 *
 * The main thread loops as the solo command's does: an aggregate progress
 * line from ps_batch_progress on a terminal (problems done, running,
 * paused, queued; the slowest unfinished problem's iteration; seconds),
 * the signals, the periodic checkpoint, a wait with a short timeout.
 *   SIGINT, SIGTERM  ps_batch_cancel(every problem): each ends with
 *                    PS_CANCELLED and its best point, and every result is
 *                    still written (exit 130). A second SIGINT kills.
 *   SIGTSTP          ps_batch_yield() (every state kept, the GPU or the CPU
 *                    workers freed), then SIGSTOP; once continued,
 *                    ps_batch_resume(PS_BATCH_ALL).
 * --checkpoint FILE --every S yields the batch every S seconds, writes
 * ps_batch_checkpoint()'s blob to FILE with an atomic replace and resumes
 * it; one more is written at the end. --resume FILE continues such a
 * checkpoint (ps_batch_restore) over the same problems in the same order.
 */
#include "cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"

static volatile sig_atomic_t batch_signal = 0; /* SIGINT or SIGTERM */
static volatile sig_atomic_t batch_tstp = 0;   /* SIGTSTP */

static void on_signal(int sig)
{
    batch_signal = sig;
}

static void on_tstp(int sig)
{
    (void)sig;
    batch_tstp = 1;
}

#define PROGRESS_INTERVAL 0.1 /* s: at most ~10 redraws per second */
#define POLL_INTERVAL 0.05    /* s: the main loop's wait for the end */

/* One problem of the batch. */
typedef struct batch_item {
    const char *input; /* PRESET|FILE as given (an argument, or a line of the list) */
    int line;          /* its line in --batch LIST (0: the command line) */
    ps_problem *p;
    char out[4096];    /* its result file */
} batch_item;

typedef struct batch_cmd {
    const ps_cli *cli;
    batch_item *items;
    size_t n, cap;
    char *list_text;   /* the lines of --batch LIST (items point into it) */
    ps_batch *b;
    int show;          /* draw the progress line */
    int drawn;
    double last_draw;
    int cancelled;     /* ps_batch_cancel was called */
    int teams;         /* the most teams (workers) seen running */
} batch_cmd;

/* "LIST:7: problem 3 ('spec')" or "problem 3 ('spec')": where a message
 * about item i belongs. */
static void item_where(const batch_cmd *c, size_t i, char *buf, size_t len)
{
    const batch_item *it = &c->items[i];
    if (it->line > 0)
        snprintf(buf, len, "%s:%d: problem %zu ('%s')", c->cli->batch_list, it->line, i,
                 it->input);
    else
        snprintf(buf, len, "problem %zu ('%s')", i, it->input);
}

static int add_item(batch_cmd *c, const char *input, int line)
{
    if (c->n >= PS_BATCH_MAX) {
        ps_cli_error("more than %d problems (PS_BATCH_MAX)", PS_BATCH_MAX);
        return PS_EXIT_USAGE;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        batch_item *v = realloc(c->items, cap * sizeof *v);
        if (!v) {
            ps_cli_error("out of memory");
            return PS_EXIT_SOLVER;
        }
        c->items = v;
        c->cap = cap;
    }
    batch_item *it = &c->items[c->n++];
    memset(it, 0, sizeof *it);
    it->input = input;
    it->line = line;
    return PS_EXIT_OK;
}

/*
 * --batch LIST: one PRESET|FILE a line (a file name relative to the
 * current directory); blank lines and lines whose first non-blank
 * character is '#' are skipped, blanks around an entry ignored (and a
 * CR before the newline, and a UTF-8 byte order mark).
 */
static int read_list(batch_cmd *c, const char *path)
{
    /* O_NONBLOCK: a FIFO is refused below instead of blocking the open */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        ps_cli_error("--batch %s: cannot read: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return PS_EXIT_INPUT;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        ps_cli_error("--batch %s: cannot read: not a regular file", path);
        fclose(f);
        return PS_EXIT_INPUT;
    }
    /* the whole file, its lines cut in place */
    size_t cap = (size_t)st.st_size + 1, len = 0;
    char *text = malloc(cap);
    if (!text) {
        fclose(f);
        ps_cli_error("out of memory");
        return PS_EXIT_SOLVER;
    }
    len = fread(text, 1, cap - 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(text);
        ps_cli_error("--batch %s: cannot read: %s", path, strerror(errno));
        return PS_EXIT_INPUT;
    }
    text[len] = '\0';
    c->list_text = text;
    if (memchr(text, '\0', len)) {
        ps_cli_error("--batch %s: not a text file (a NUL byte)", path);
        return PS_EXIT_INPUT;
    }
    int line = 0, code = PS_EXIT_OK;
    char *start = text;
    if (!strncmp(start, "\xef\xbb\xbf", 3)) /* a UTF-8 byte order mark */
        start += 3;
    for (char *p = start; p && *p && code == PS_EXIT_OK;) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        line++;
        char *e = p + strlen(p);
        while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
            *--e = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p && *p != '#')
            code = add_item(c, p, line);
        p = nl ? nl + 1 : NULL;
    }
    if (code == PS_EXIT_OK && c->n == 0) {
        ps_cli_error("--batch %s: no problem in it (only blank lines and comments)", path);
        return PS_EXIT_INPUT;
    }
    return code;
}

/* mkdir -p dir; then dir must be a writable directory. */
static int make_dir(const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        ps_cli_error("-o %s: name too long", dir);
        return PS_EXIT_INPUT;
    }
    for (char *q = path + 1;; q++) {
        if (*q == '/' || *q == '\0') {
            char keep = *q;
            *q = '\0';
            if (mkdir(path, 0777) != 0 && errno != EEXIST) {
                ps_cli_error("-o %s: cannot create %s: %s", dir, path, strerror(errno));
                return PS_EXIT_INPUT;
            }
            *q = keep;
            if (!keep)
                break;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        ps_cli_error("-o %s: not a directory (several problems write one result file each "
                     "into the directory -o DIR)", dir);
        return PS_EXIT_INPUT;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        ps_cli_error("-o %s: cannot write there: %s", dir, strerror(errno));
        return PS_EXIT_INPUT;
    }
    return PS_EXIT_OK;
}

static int check_collisions(batch_cmd *c);

/* Load every problem and name its result file. */
static int load_items(batch_cmd *c, ps_options *o, ps_cli_log *log)
{
    const ps_cli *cli = c->cli;
    int width = 3;
    for (size_t k = c->n - 1; k >= 1000; k /= 10)
        width++;
    for (size_t i = 0; i < c->n; i++) {
        batch_item *it = &c->items[i];
        char base[256], name[160], where[4400];
        int code = ps_cli_load_problem(it->input, &it->p, base, sizeof base);
        if (code != PS_EXIT_OK) {
            item_where(c, i, where, sizeof where);
            ps_cli_error("%s: not loaded", where);
            return code;
        }
        ps_cli_preset_base(base, name, sizeof name);
        /* -o DIR: DIR/NNN_NAME.h5; without: NAME_result.h5 here, as a solo design */
        char path[4096];
        int len = cli->output ? snprintf(path, sizeof path, "%s%s%0*zu_%s.h5", cli->output,
                                         cli->output[strlen(cli->output) - 1] == '/' ? "" : "/",
                                         width, i, name)
                              : snprintf(path, sizeof path, "%s_result.h5", base);
        if (len < 0 || (size_t)len >= sizeof path) {
            ps_cli_error("%s%s: result file name too long", cli->output ? "-o " : "",
                         cli->output ? cli->output : path);
            return PS_EXIT_INPUT;
        }
        if ((code = ps_cli_output_path(path, "", "", 1, it->out, sizeof it->out)) != PS_EXIT_OK)
            return code;
        if (!cli->resume) {
            /* a start the optimizer cannot leave is refused before anything runs */
            double *x = malloc(ps_problem_nx(it->p) * sizeof(double));
            if (!x) {
                ps_cli_error("out of memory");
                return PS_EXIT_SOLVER;
            }
            int st = ps_problem_x0(it->p, x);
            code = st ? ps_cli_exit_code(st) : ps_cli_check_start(it->p, o, log, x);
            free(x);
            if (code != PS_EXIT_OK) {
                item_where(c, i, where, sizeof where);
                ps_cli_error("%s: refused", where);
                return code;
            }
        }
    }
    return check_collisions(c);
}

/* The (device, inode) of a file that exists, and which problem's input it is. */
typedef struct file_id {
    dev_t dev;
    ino_t ino;
    size_t item;
} file_id;

static int file_id_cmp(const void *a, const void *b)
{
    const file_id *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino)
        return x->ino < y->ino ? -1 : 1;
    return 0;
}

/* The input file that is the existing file `path`, or NULL (inputs sorted). */
static const file_id *input_file_of(const file_id *inputs, size_t n, const char *path)
{
    struct stat st;
    if (n == 0 || stat(path, &st) != 0)
        return NULL;
    file_id key = {st.st_dev, st.st_ino, 0};
    return bsearch(&key, inputs, n, sizeof key, file_id_cmp);
}

static const batch_cmd *sort_cmd; /* the batch whose results out_cmp compares */
static int out_cmp(const void *a, const void *b)
{
    const size_t i = *(const size_t *)a, j = *(const size_t *)b;
    const int d = strcmp(sort_cmd->items[i].out, sort_cmd->items[j].out);
    return d ? d : (i > j) - (i < j);
}

/* Without -o DIR, two problems of one name would write one result file. */
static int check_result_names(const batch_cmd *c)
{
    size_t *order = malloc((c->n ? c->n : 1) * sizeof *order);
    if (!order) {
        ps_cli_error("out of memory");
        return PS_EXIT_SOLVER;
    }
    for (size_t i = 0; i < c->n; i++)
        order[i] = i;
    sort_cmd = c;
    qsort(order, c->n, sizeof *order, out_cmp);
    int code = PS_EXIT_OK;
    for (size_t k = 1; k < c->n && code == PS_EXIT_OK; k++)
        if (strcmp(c->items[order[k - 1]].out, c->items[order[k]].out) == 0) {
            ps_cli_error("problems %zu and %zu would both write %s: give -o DIR (numbered "
                         "result files in DIR)", order[k - 1], order[k], c->items[order[k]].out);
            code = PS_EXIT_USAGE;
        }
    free(order);
    return code;
}

/* The files written never replace an input problem file (a result file
 * or the checkpoint), and the checkpoint is no result file. Inputs are
 * found by their inode, in n log n. */
static int check_collisions(batch_cmd *c)
{
    const ps_cli *cli = c->cli;
    if (!cli->output) {
        int code = check_result_names(c);
        if (code != PS_EXIT_OK)
            return code;
    }
    file_id *inputs = malloc((c->n ? c->n : 1) * sizeof *inputs);
    size_t m = 0;
    int code = PS_EXIT_OK;
    if (!inputs) {
        ps_cli_error("out of memory");
        return PS_EXIT_SOLVER;
    }
    for (size_t i = 0; i < c->n; i++) {
        struct stat st;
        if (stat(c->items[i].input, &st) == 0)
            inputs[m++] = (file_id){st.st_dev, st.st_ino, i};
    }
    qsort(inputs, m, sizeof *inputs, file_id_cmp);
    for (size_t j = 0; j < c->n && code == PS_EXIT_OK; j++) {
        const file_id *in = input_file_of(inputs, m, c->items[j].out);
        if (in) {
            ps_cli_error("%s%s%sthe result file %s of problem %zu is the input problem "
                         "file of problem %zu", cli->output ? "-o " : "",
                         cli->output ? cli->output : "", cli->output ? ": " : "",
                         c->items[j].out, j, in->item);
            code = PS_EXIT_USAGE;
        }
    }
    const file_id *in = cli->checkpoint && code == PS_EXIT_OK
                            ? input_file_of(inputs, m, cli->checkpoint)
                            : NULL;
    if (in) {
        ps_cli_error("--checkpoint %s: is the input problem file of problem %zu",
                     cli->checkpoint, in->item);
        code = PS_EXIT_USAGE;
    }
    free(inputs);
    for (size_t j = 0; cli->checkpoint && j < c->n && code == PS_EXIT_OK; j++)
        if (ps_cli_same_file(cli->checkpoint, c->items[j].out)) {
            ps_cli_error("--checkpoint %s: is also the result file of problem %zu",
                         cli->checkpoint, j);
            code = PS_EXIT_USAGE;
        }
    /* nor the list of problems, nor the checkpoint resumed (which the new
     * checkpoint may replace: it is read whole first) */
    const ps_cli_file reads[] = {{"", cli->batch_list, "the list of problems (--batch)"},
                                 {"", cli->resume, "the checkpoint to resume (--resume)"}};
    const ps_cli_file ck = {"--checkpoint", cli->checkpoint, "the checkpoint"};
    if (code == PS_EXIT_OK)
        code = ps_cli_check_distinct(reads, 1, &ck, 1);
    for (size_t j = 0; j < c->n && code == PS_EXIT_OK && (cli->batch_list || cli->resume); j++) {
        const ps_cli_file res = {cli->output ? "-o" : "the result file", c->items[j].out,
                                 "a result file"};
        code = ps_cli_check_distinct(reads, 2, &res, 1);
    }
    return code;
}

/* ---- the running batch ------------------------------------------------ */

static void draw_progress(batch_cmd *c, const ps_batch_report *pr)
{
    if (!c->show)
        return;
    double t = ps_monotonic_seconds();
    if (c->drawn && t - c->last_draw < PROGRESS_INTERVAL)
        return;
    char failed[48] = "";
    if (pr->failed)
        snprintf(failed, sizeof failed, " (%zu failed)", pr->failed);
    fprintf(stderr,
            "\r  problems %zu/%zu done%s, %zu running, %zu paused, %zu queued   "
            "slowest iter %lld   %8.2f s\033[K",
            pr->finished, pr->problems, failed, pr->running, pr->paused, pr->queued,
            (long long)pr->slowest_iteration, pr->seconds);
    fflush(stderr);
    c->drawn = 1;
    c->last_draw = t;
}

static void clear_progress(batch_cmd *c)
{
    if (c->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        c->drawn = 0;
    }
}

static void resume_all(ps_batch *b)
{
    sigset_t old;
    ps_cli_block_signals(&old); /* a yielded batch starts its workers here */
    ps_batch_resume(b, PS_BATCH_ALL);
    ps_cli_restore_signals(&old);
}

/* The batch's checkpoint into --checkpoint FILE. Returns an exit code. */
static int write_checkpoint(batch_cmd *c)
{
    void *buf = NULL;
    size_t len = 0;
    int st = ps_batch_checkpoint(c->b, &buf, &len);
    return ps_cli_save_checkpoint(c->cli->checkpoint, st, buf, len);
}

/* Every --every seconds: yield (every state kept), write, resume. */
static void periodic_checkpoint(batch_cmd *c)
{
    if (ps_batch_yield(c->b) != 0)
        return;
    write_checkpoint(c);
    if (!batch_signal)
        resume_all(c->b);
}

/* Ctrl-Z: yield, stop; when continued, resume. */
static void suspend(batch_cmd *c)
{
    int yielded = ps_batch_yield(c->b) == 0;
    clear_progress(c);
    raise(SIGSTOP); /* execution continues here after SIGCONT */
    batch_tstp = 0;
    if (yielded)
        resume_all(c->b);
}

/* The main loop until every problem has finished. Returns the last
 * ps_batch_wait status (0, or an error of the batch's launches). */
static int watch(batch_cmd *c)
{
    const ps_cli *cli = c->cli;
    double next_checkpoint = ps_monotonic_seconds() + cli->every;
    for (;;) {
        if (batch_signal && !c->cancelled) {
            c->cancelled = 1;
            ps_batch_cancel(c->b, PS_BATCH_ALL);
            /* a yielded batch (a signal during a periodic checkpoint) ends
             * its cancelled problems without running again */
            resume_all(c->b);
        }
        if (batch_tstp && !c->cancelled)
            suspend(c);
        ps_batch_report pr;
        if (ps_batch_progress(c->b, &pr) == 0) {
            draw_progress(c, &pr);
            if (pr.teams > c->teams)
                c->teams = pr.teams;
        }
        if (cli->every > 0.0 && !c->cancelled && ps_monotonic_seconds() >= next_checkpoint) {
            periodic_checkpoint(c);
            next_checkpoint = ps_monotonic_seconds() + cli->every;
        }
        int st = ps_batch_wait(c->b, POLL_INTERVAL);
        if (st != PS_RUNNING)
            return st;
    }
}

/* ---- results ---------------------------------------------------------- */

typedef struct item_outcome {
    int status;          /* ps_batch_result's */
    int code;            /* its exit code */
    int written;         /* the result file was written */
    int64_t iterations, evaluations;
    double f0, f, seconds;
} item_outcome;

static int is_converged(int status)
{
    return status == PS_CONVERGED || status == PS_CONVERGED_FTOL;
}

/* The whole exit code: 130 when a signal cancelled a problem; else an
 * error of the batch's launches; else the first problem's error (2..6, in
 * the order of the batch); else 1 when a problem did not converge; else 0. */
static int batch_exit_code(const item_outcome *v, size_t n, int batch_code)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].code == PS_EXIT_CANCELLED)
            return PS_EXIT_CANCELLED;
    if (batch_code != PS_EXIT_OK)
        return batch_code;
    int any_one = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].code != PS_EXIT_OK && v[i].code != PS_EXIT_NOT_CONVERGED)
            return v[i].code;
        any_one |= v[i].code == PS_EXIT_NOT_CONVERGED;
    }
    return any_one ? PS_EXIT_NOT_CONVERGED : PS_EXIT_OK;
}

/* Problem i: its result, the final magnetization and the result file;
 * its JSON object into json (NULL: none). */
static void finish_item(batch_cmd *c, const ps_options *o, ps_cli_log *log, size_t i,
                        item_outcome *oc, FILE *json)
{
    batch_item *it = &c->items[i];
    const ps_cli *cli = c->cli;
    char where[4400];
    ps_result r;
    memset(&r, 0, sizeof r);
    memset(oc, 0, sizeof *oc);
    oc->f0 = oc->f = NAN;
    size_t nx = ps_problem_nx(it->p), ns = ps_problem_ns(it->p);
    double *x = malloc(nx * sizeof(double)), *m = malloc(3 * ns * sizeof(double));
    double gnorm_physical = NAN;
    item_where(c, i, where, sizeof where);
    if (!x || !m) {
        ps_cli_error("%s: out of memory", where);
        oc->status = PS_ERR_NO_MEMORY;
        oc->code = PS_EXIT_SOLVER;
        goto out;
    }
    int st = ps_batch_result(c->b, i, &r, x);
    oc->status = st;
    if (st == PS_RUNNING) {
        /* the batch's launches failed before it ended */
        ps_cli_error("%s: did not finish", where);
        r.status = st;
        oc->code = PS_EXIT_SOLVER;
        goto out;
    }
    oc->code = ps_cli_exit_code(st);
    if (batch_signal && st == PS_CANCELLED)
        oc->code = PS_EXIT_CANCELLED;
    oc->iterations = r.iterations;
    oc->evaluations = r.evaluations;
    oc->seconds = r.seconds;
    oc->f0 = r.history && r.history_len > 0 ? r.history[0].f : NAN;
    if (st < 0 && st != PS_ERR_LINE_SEARCH) {
        /* an error of its own that leaves no point: no file */
        if (st == PS_ERR_NO_GPU || st == PS_ERR_GPU_UNSUPPORTED)
            ps_cli_backend_error(o, st, log, "");
        else
            ps_cli_error("%s: solve failed: %s%s%s", where, ps_strerror(st),
                         ps_cli_log_reason(log, st)[0] ? ": " : "", ps_cli_log_reason(log, st));
        if (json)
            ps_cli_design_json(json, cli, o, it->input, it->p, &r, NULL, NAN, NAN, NULL,
                               oc->code);
        goto out;
    }
    if (st == PS_ERR_LINE_SEARCH)
        ps_cli_error("%s: %s", where, ps_strerror(st));
    oc->f = r.f;
    int fc = ps_cli_design_final(it->p, o, log, x, m, &gnorm_physical);
    if (fc != PS_EXIT_OK) {
        ps_cli_error("%s: no result file", where);
        oc->code = fc;
        goto out;
    }
    if (ps_cli_design_save(cli, o, it->input, it->p, &r, x, m, gnorm_physical, it->out) != 0)
        oc->code = PS_EXIT_INPUT;
    else
        oc->written = 1;
    if (json)
        ps_cli_design_json(json, cli, o, it->input, it->p, &r, x, oc->f0, gnorm_physical,
                           oc->written ? it->out : NULL, oc->code);
out:
    ps_result_free(&r);
    free(x);
    free(m);
}

/* One problem's JSON object (text from ps_cli_design_json) inside the
 * array "problems": indented, its index first. */
static void json_embed(FILE *f, const char *obj, size_t i, int last)
{
    fprintf(f, "    {\n      \"index\": %zu,", i);
    const char *p = strchr(obj, '\n'); /* past the opening "{" */
    while (p && *p) {
        const char *e = strchr(p + 1, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n > 1) /* "\n" + a line */
            fprintf(f, "\n    %.*s", (int)(n - 1), p + 1);
        p = e;
    }
    fputs(last ? "\n" : ",\n", f);
}

static void json_or_null(FILE *f, const char *s)
{
    if (s)
        ps_json_string(f, s);
    else
        fputs("null", f);
}

typedef struct batch_totals {
    size_t converged, not_converged, failed, cancelled;
    int64_t iterations, evaluations, slowest;
    double seconds; /* the batch's wall time (ps_batch_progress) */
    int teams;
    int team_blocks;               /* GPU: blocks per team */
    int block;                     /* GPU: threads per block */
    int team_barrier;              /* GPU: PS_TEAM_BARRIER_RANGE or _CLUSTER */
    double setup_seconds, kernel_seconds; /* GPU: set-up on the device, the kernel */
} batch_totals;

static void totals_of(const item_outcome *v, size_t n, batch_totals *t)
{
    for (size_t i = 0; i < n; i++) {
        t->iterations += v[i].iterations;
        t->evaluations += v[i].evaluations;
        if (i == 0 || v[i].iterations > t->slowest)
            t->slowest = v[i].iterations;
        if (v[i].status == PS_CANCELLED)
            t->cancelled++;
        else if (is_converged(v[i].status))
            t->converged++;
        else if (v[i].status >= 0 && v[i].status != PS_RUNNING)
            t->not_converged++;
        else
            t->failed++;
    }
}

/* A short name of a status for the table. */
static const char *status_word(int st, char *buf, size_t len)
{
    switch (st) {
    case PS_CONVERGED: return "converged";
    case PS_CONVERGED_FTOL: return "converged (ftol)";
    case PS_MAX_ITERATIONS: return "max iterations";
    case PS_MAX_EVALUATIONS: return "max evaluations";
    case PS_TIME_LIMIT: return "time limit";
    case PS_CANCELLED: return "cancelled";
    case PS_RUNNING: return "not finished";
    case PS_CONSTRAINT_VIOLATED: return "constraint violated";
    default: snprintf(buf, len, "error %d", st); return buf;
    }
}

static void print_text(const batch_cmd *c, const ps_options *o, const item_outcome *v,
                       const batch_totals *t, const char *device)
{
    FILE *f = stdout;
    fprintf(f, "%5s  %-19s %8s %6s  %-13s  %-13s  %s\n", "#", "status", "iters", "evals", "f0",
            "f", "output");
    for (size_t i = 0; i < c->n; i++) {
        char buf[32];
        fprintf(f, "%5zu  %-19s %8lld %6lld  %13.6e  %13.6e  %s\n", i,
                status_word(v[i].status, buf, sizeof buf),
                (long long)v[i].iterations, (long long)v[i].evaluations, v[i].f0, v[i].f,
                v[i].written ? c->items[i].out : "(not written)");
    }
    fprintf(f, "problems     %zu: %zu converged, %zu not converged, %zu failed, %zu cancelled\n",
            c->n, t->converged, t->not_converged, t->failed, t->cancelled);
    fprintf(f, "iterations   %lld in all, %lld the most of one problem\n",
            (long long)t->iterations, (long long)t->slowest);
    fprintf(f, "seconds      %.3f (the batch's wall time)\n", t->seconds);
    fprintf(f, "backend      %s, %s precision\n",
            device[0] ? device : ps_cli_backend_name(o->backend),
            ps_cli_precision_name(o->precision));
    if (t->teams > 0 && t->team_blocks > 0) /* GPU */
        fprintf(f, "teams        %d of %d blocks of %d threads (%s barrier); set-up %.3f s, kernel %.3f s\n",
                t->teams, t->team_blocks, t->block, ps_cli_team_barrier_name(t->team_barrier), t->setup_seconds, t->kernel_seconds);
    else if (t->teams > 0) /* CPU workers */
        fprintf(f, "workers      %d\n", t->teams);
    fprintf(f, "output       %s\n", c->cli->output ? c->cli->output : ". (NAME_result.h5)");
    if (c->cli->resume)
        fprintf(f, "resumed from %s\n", c->cli->resume);
    if (c->cli->checkpoint)
        fprintf(f, "checkpoint   %s\n", c->cli->checkpoint);
    fflush(f);
}

/* backend: the one that ran (NULL: none ran; o's is given) */
static void print_json(const batch_cmd *c, const ps_options *o, const char *objects,
                       const batch_totals *t, const char *backend, int code)
{
    FILE *f = stdout;
    fputs("{\n  \"problems\": [\n", f);
    fputs(objects, f);
    fprintf(f, "  ],\n  \"batch\": {\n    \"problems\": %zu,\n    \"converged\": %zu,\n"
               "    \"not_converged\": %zu,\n    \"failed\": %zu,\n    \"cancelled\": %zu,\n"
               "    \"iterations\": %lld,\n    \"evaluations\": %lld,\n"
               "    \"slowest_iterations\": %lld,\n    \"seconds\": ",
            c->n, t->converged, t->not_converged, t->failed, t->cancelled,
            (long long)t->iterations, (long long)t->evaluations, (long long)t->slowest);
    ps_json_number(f, t->seconds);
    fprintf(f, ",\n    \"teams\": %d,\n    \"backend\": ", t->teams);
    ps_json_string(f, backend ? backend : ps_cli_backend_name(o->backend));
    fputs(",\n    \"precision\": ", f);
    ps_json_string(f, ps_cli_precision_name(o->precision));
    fprintf(f, ",\n    \"team_blocks\": %d,\n    \"team_blocks_option\": %d,\n    \"block\": %d", t->team_blocks,
            c->cli->gpu.batch_team_blocks, t->block);
    fputs(",\n    \"team_barrier\": ", f);
    ps_json_string(f, ps_cli_team_barrier_name(t->team_barrier));
    fputs(",\n    \"setup_seconds\": ", f);
    ps_json_number(f, t->setup_seconds);
    fputs(",\n    \"kernel_seconds\": ", f);
    ps_json_number(f, t->kernel_seconds);
    fputs(",\n    \"list\": ", f);
    json_or_null(f, c->cli->batch_list);
    fputs(",\n    \"output_dir\": ", f);
    json_or_null(f, c->cli->output);
    fputs(",\n    \"checkpoint\": ", f);
    json_or_null(f, c->cli->checkpoint);
    fputs(",\n    \"resumed_from\": ", f);
    json_or_null(f, c->cli->resume);
    fprintf(f, ",\n    \"exit_code\": %d\n  }\n}\n", code);
    fflush(f);
}

/* Results of every problem, the summary, the exit code. */
static int report(batch_cmd *c, const ps_options *o, ps_cli_log *log, int batch_code,
                  int ck_code)
{
    const ps_cli *cli = c->cli;
    item_outcome *v = calloc(c->n, sizeof *v);
    ps_cli_memfile objs = {NULL, NULL, 0};
    FILE *json = cli->json ? ps_cli_memfile_open(&objs) : NULL;
    if (!v || (cli->json && !json)) {
        free(v);
        if (json)
            fclose(json);
        free(objs.buf);
        ps_cli_error("out of memory");
        return PS_EXIT_SOLVER;
    }
    char device[300] = "";
    const char *backend = NULL;
    for (size_t i = 0; i < c->n; i++) {
        ps_cli_memfile one = {NULL, NULL, 0};
        FILE *jf = json ? ps_cli_memfile_open(&one) : NULL;
        finish_item(c, o, log, i, &v[i], jf);
        if (jf) {
            fclose(jf);
            if (one.buf)
                json_embed(json, one.buf, i, i + 1 == c->n);
            free(one.buf);
        }
        if (!device[0] && v[i].status != PS_RUNNING) {
            ps_result r;
            memset(&r, 0, sizeof r);
            if (ps_batch_result(c->b, i, &r, NULL) != PS_RUNNING && r.device[0])
                backend = ps_cli_backend_name(r.backend);
            if (backend)
                snprintf(device, sizeof device, "%s (%s)", backend,
                         r.device);
            ps_result_free(&r);
        }
    }
    batch_totals t;
    memset(&t, 0, sizeof t);
    totals_of(v, c->n, &t);
    ps_batch_report pr;
    if (ps_batch_progress(c->b, &pr) == 0) {
        t.seconds = pr.seconds;
        t.teams = pr.teams > c->teams ? pr.teams : c->teams;
        t.team_blocks = pr.team_blocks;
        t.block = pr.block;
        t.team_barrier = pr.team_barrier;
        t.setup_seconds = pr.setup_seconds;
        t.kernel_seconds = pr.kernel_seconds;
    }
    int code = batch_exit_code(v, c->n, batch_code);
    if (code == PS_EXIT_OK || code == PS_EXIT_NOT_CONVERGED)
        code = ck_code != PS_EXIT_OK ? ck_code : code;
    if (json) {
        fclose(json);
        print_json(c, o, objs.buf ? objs.buf : "", &t, backend, code);
        free(objs.buf);
    } else if (!cli->quiet) {
        print_text(c, o, v, &t, device);
    }
    free(v);
    return code;
}

int ps_cmd_design_batch(const ps_cli *cli)
{
    ps_options o = cli->opts;
    ps_cli_log log;
    batch_cmd c;
    void *blob = NULL;
    size_t blob_len = 0;
    const ps_problem **problems = NULL;
    int code;

    memset(&c, 0, sizeof c);
    c.cli = cli;
    if ((code = ps_cli_check_options(&o, &log)) != PS_EXIT_OK)
        return code;
    o.progress = NULL; /* the batch's progress is polled */
    ps_cli_catch_signal(SIGINT, on_signal, SA_RESETHAND); /* a second Ctrl-C kills */
    ps_cli_catch_signal(SIGTERM, on_signal, 0);
    ps_cli_set_cancel(&batch_signal);

    for (int i = 0; i < cli->ninputs && code == PS_EXIT_OK; i++)
        code = add_item(&c, cli->inputs[i], 0);
    if (code == PS_EXIT_OK && cli->batch_list)
        code = read_list(&c, cli->batch_list);
    if (code == PS_EXIT_OK)
        code = cli->output ? make_dir(cli->output) : PS_EXIT_OK;
    if (code == PS_EXIT_OK)
        code = load_items(&c, &o, &log);
    if (code == PS_EXIT_OK && cli->checkpoint) {
        char ck[4096];
        code = ps_cli_output_path(cli->checkpoint, "", "", 1, ck, sizeof ck);
    }
    if (code == PS_EXIT_OK && cli->resume)
        code = ps_cli_read_checkpoint(cli->resume, &blob, &blob_len);
    if (code != PS_EXIT_OK)
        goto done;
    if (batch_signal) {
        code = PS_EXIT_CANCELLED;
        goto done;
    }

    /* the batch: created and filled (or restored), then started, with the
     * signals blocked so that its workers leave them to this thread */
    problems = malloc(c.n * sizeof *problems);
    if (!problems) {
        ps_cli_error("out of memory");
        code = PS_EXIT_SOLVER;
        goto done;
    }
    for (size_t i = 0; i < c.n; i++)
        problems[i] = c.items[i].p;
    sigset_t old;
    ps_cli_block_signals(&old);
    log.msg[0] = log.other[0] = '\0';
    int st;
    if (cli->resume) {
        st = ps_batch_restore(&o, problems, c.n, blob, blob_len, &c.b);
    } else {
        st = ps_batch_create(&o, &c.b);
        for (size_t i = 0; i < c.n && st == 0; i++) {
            int ast = ps_batch_add(c.b, problems[i], NULL, NULL);
            /* a problem the batch cannot run is still added, and finishes
             * with its own error (reported with the results) */
            if (ast != 0 && ps_batch_size(c.b) != i + 1)
                st = ast;
        }
    }
    if (st == 0)
        st = ps_batch_start(c.b);
    ps_cli_restore_signals(&old);
    if (st != 0) {
        if (st == PS_ERR_CHECKPOINT)
            ps_cli_error("%s: %s", cli->resume, log.msg[0] ? log.msg : ps_strerror(st));
        else if (st == PS_ERR_NO_GPU || st == PS_ERR_GPU_UNSUPPORTED)
            ps_cli_backend_error(&o, st, &log, "");
        else if (st == PS_ERR_OPTION)
            ps_cli_error("invalid options: %s", log.msg[0] ? log.msg : ps_strerror(st));
        else
            ps_cli_error("batch: %s%s%s", ps_strerror(st),
                         ps_cli_log_reason(&log, st)[0] ? ": " : "", ps_cli_log_reason(&log, st));
        code = ps_cli_exit_code(st);
        goto done;
    }

    c.show = !cli->quiet && isatty(STDERR_FILENO);
    ps_cli_catch_signal(SIGTSTP, on_tstp, 0);
    int wst = watch(&c);
    signal(SIGTSTP, SIG_DFL);
    clear_progress(&c);
    int batch_code = PS_EXIT_OK;
    if (wst != 0) {
        ps_cli_error("batch: %s%s%s", ps_strerror(wst),
                     ps_cli_log_reason(&log, wst)[0] ? ": " : "", ps_cli_log_reason(&log, wst));
        batch_code = ps_cli_exit_code(wst);
    }
    int ck_code = PS_EXIT_OK;
    if (cli->checkpoint) /* a failure is reported; the results are still written */
        ck_code = write_checkpoint(&c);
    code = report(&c, &o, &log, batch_code, ck_code);
done:
    ps_batch_free(c.b);
    free(problems);
    free(blob);
    for (size_t i = 0; i < c.n; i++)
        ps_problem_free(c.items[i].p);
    free(c.items);
    free(c.list_text);
    return code;
}
