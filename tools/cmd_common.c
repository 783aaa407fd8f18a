/*
 * Helpers shared by the subcommands of `persolve`.
 */
#include "cmd.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "io/h5io.h"

/* Length of the valid UTF-8 sequence at s (1-4), or 0. */
static int utf8_len(const unsigned char *s)
{
    if (s[0] < 0x80)
        return 1;
    /* lead bytes: c2-df two, e0-ef three, f0-f4 four; others none */
    const int n = s[0] < 0xc2 || s[0] > 0xf4 ? 0 : s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : 4;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

/*
 * One line on stderr: "persolve: " and the message, which may quote text
 * from a file: control characters and bytes that are not UTF-8 are
 * written as \xNN.
 */
void ps_cli_error(const char *fmt, ...)
{
    char msg[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fputs("persolve: ", stderr);
    for (const unsigned char *q = (const unsigned char *)msg; *q;) {
        int n = utf8_len(q);
        if (n == 0 || (n == 1 && (*q < 0x20 || *q == 0x7f))) {
            fprintf(stderr, "\\x%02x", *q);
            q++;
        } else {
            fwrite(q, 1, (size_t)n, stderr);
            q += n;
        }
    }
    fputc('\n', stderr);
}

void ps_cli_log_capture(void *user, int level, const char *file, int line,
                        const char *msg)
{
    ps_cli_log *log = user;
    (void)file;
    (void)line;
    if (log && level == PS_LOG_ERROR) {
        snprintf(log->msg, sizeof log->msg, "%s", msg ? msg : "");
        if (!file || !strstr(file, "cuda/"))
            snprintf(log->other, sizeof log->other, "%s", msg ? msg : "");
    }
}

const char *ps_cli_log_reason(const ps_cli_log *log, int st)
{
    const int gpu = st == PS_ERR_NO_GPU || st == PS_ERR_GPU_UNSUPPORTED ||
                    st == PS_ERR_GPU_MEMORY || st == PS_ERR_GPU_LAUNCH;
    return gpu ? log->msg : log->other;
}

int ps_cli_check_options(ps_options *o, ps_cli_log *log)
{
    log->msg[0] = '\0';
    log->other[0] = '\0';
    o->log = ps_cli_log_capture;
    o->log_user = log;
    int st = ps_options_validate(o);
    if (st != 0) {
        ps_cli_error("invalid options: %s", log->msg[0] ? log->msg
                                                       : ps_strerror(st));
        return PS_EXIT_USAGE;
    }
    return PS_EXIT_OK;
}

void ps_cli_bench_limits(ps_options *o, int64_t iters)
{
    o->max_iterations = iters;
    o->max_evaluations = 0;
    o->time_limit = 0.0;
    o->gtol = 0.0;
    o->ftol = 0.0;
    o->progress = NULL;
}

int ps_cli_has_iterates(int st, const ps_result *r)
{
    return (st >= 0 || st == PS_ERR_LINE_SEARCH) && r->history_len > 0;
}

int64_t ps_cli_cpu_fit_iterations(const ps_problem *p, const ps_options *o, int64_t iters, double *x,
                                  int *threads)
{
    ps_options one = *o;
    ps_result r;
    int64_t fit = 0;
    memset(&r, 0, sizeof r);
    one.backend = PS_BACKEND_CPU;
    ps_cli_bench_limits(&one, 1);
    ps_problem_x0(p, x);
    if (ps_cli_has_iterates(solve_persistent(p, &one, x, &r), &r)) {
        const double secs = r.seconds / (double)(r.iterations > 0 ? r.iterations : 1);
        fit = iters;
        if (secs > 0.0 && secs * (double)iters > PS_CLI_CPU_RUN_BUDGET)
            fit = (int64_t)fmax(1.0, floor(PS_CLI_CPU_RUN_BUDGET / secs));
        if (threads && sscanf(r.device, "cpu: %d", threads) != 1)
            *threads = 0;
    }
    ps_result_free(&r);
    return fit;
}

/* base name of path without a trailing ".h5" / ".hdf5" */
static void file_base(const char *path, char *base, size_t len)
{
    const char *slash = strrchr(path, '/');
    const char *b = slash ? slash + 1 : path;
    size_t n = strlen(b);
    if (n > 3 && !strcmp(b + n - 3, ".h5"))
        n -= 3;
    else if (n > 5 && !strcmp(b + n - 5, ".hdf5"))
        n -= 5;
    if (n == 0) {
        b = "problem";
        n = strlen(b);
    }
    snprintf(base, len, "%.*s", (int)n, b);
}

/* --strict of the command being run (ps_cli_set_strict), and its signal
 * flag (ps_cli_set_cancel). */
static int cli_strict;
static const volatile sig_atomic_t *cli_cancel;

void ps_cli_set_cancel(const volatile sig_atomic_t *flag)
{
    cli_cancel = flag;
}

void ps_cli_set_strict(int strict)
{
    cli_strict = strict;
}

/* A warning of the file reader, on its own line. */
static void cli_read_warning(void *user, const char *msg)
{
    (void)user;
    ps_cli_error("warning: %s", msg);
}

void ps_cli_preset_base(const char *spec, char *base, size_t len)
{
    /* "spiral2d:n=16,nt=300" -> "spiral2d_n=16_nt=300": a name that keeps
     * the parameters, without the characters a shell or a file name
     * would trip on */
    size_t j = 0;
    for (const char *q = spec; *q && j + 1 < len; q++) {
        unsigned char ch = (unsigned char)*q;
        base[j++] = ch == ':' || ch == ',' ? '_'
                    : isalnum(ch) || ch == '=' || ch == '.' || ch == '-' || ch == '+' ||
                              ch == '_'
                        ? (char)ch
                        : '_';
    }
    if (len)
        base[j < len ? j : len - 1] = '\0';
}

int ps_cli_load_problem(const char *arg, ps_problem **out, char *base,
                        size_t baselen)
{
    char ferr[1024], perr[512];
    struct stat st;
    *out = NULL;
    if (stat(arg, &st) == 0) {
        /* read in a child process: no file can crash or hang this one; a
         * FIFO, device or directory is refused before it is opened */
        ps_h5_read_opts ro = {.strict = cli_strict, .warn = cli_read_warning, .cancel = cli_cancel};
        int s = ps_h5_read_problem_isolated(arg, &ro, 0.0, out, ferr, sizeof ferr);
        if (s == PS_CANCELLED) {
            ps_cli_error("%s", ferr);
            return PS_EXIT_CANCELLED;
        }
        if (s != 0) {
            ps_cli_error("%s", ferr);
            return s == PS_ERR_NO_MEMORY ? PS_EXIT_SOLVER : PS_EXIT_INPUT;
        }
        file_base(arg, base, baselen);
        return PS_EXIT_OK;
    }
    int file_errno = errno;
    int s = ps_preset_create(arg, out, perr, sizeof perr);
    if (s != 0) {
        if (s == PS_ERR_NO_MEMORY) {
            ps_cli_error("%s: out of memory%s%s", arg, perr[0] ? ": " : "", perr);
            return PS_EXIT_SOLVER;
        }
        if (s == PS_ERR_SCALE) /* the spec parsed; its problem's scales are out of range */
            ps_cli_error("'%s': the problem it makes leaves float32's range: %s", arg, perr);
        else if (strstr(perr, " is Inf") || strstr(perr, " is NaN"))
            /* the spec parsed, but the problem it makes holds Inf or NaN */
            ps_cli_error("'%s': a parameter overflows: the problem it makes is not finite "
                         "(%s); choose smaller values", arg, perr);
        else
            ps_cli_error("'%s' is neither a file (%s) nor a preset (%s)", arg,
                         strerror(file_errno), perr[0] ? perr : ps_strerror(s));
        return PS_EXIT_INPUT;
    }
    ps_cli_preset_base(arg, base, baselen);
    return PS_EXIT_OK;
}

int ps_cli_output_path(const char *given, const char *base, const char *suffix,
                       int replaced, char *buf, size_t len)
{
    int n = given ? snprintf(buf, len, "%s", given)
                  : snprintf(buf, len, "%s%s", base, suffix);
    if (n < 0 || (size_t)n >= len) {
        ps_cli_error("output file name too long");
        return PS_EXIT_INPUT;
    }
    /* The directory must exist and be writable (for the temporary file). */
    char dir[4096];
    const char *slash = strrchr(buf, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == buf)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - buf), buf);
    struct stat st;
    if (stat(dir, &st) != 0) {
        ps_cli_error("%s: cannot write: directory %s: %s", buf, dir,
                     strerror(errno));
        return PS_EXIT_INPUT;
    }
    if (!S_ISDIR(st.st_mode)) {
        ps_cli_error("%s: cannot write: %s is not a directory", buf, dir);
        return PS_EXIT_INPUT;
    }
    if (access(dir, W_OK) != 0) {
        ps_cli_error("%s: cannot write: directory %s: %s", buf, dir,
                     strerror(errno));
        return PS_EXIT_INPUT;
    }
    if (stat(buf, &st) == 0 && S_ISDIR(st.st_mode)) {
        ps_cli_error("%s: cannot write: is a directory", buf);
        return PS_EXIT_INPUT;
    }
    if (replaced && lstat(buf, &st) == 0) {
        if (S_ISLNK(st.st_mode)) {
            ps_cli_error("%s: cannot write: is a symbolic link (the file is replaced, "
                         "not written through: give the path it points to)", buf);
            return PS_EXIT_INPUT;
        }
        if (!S_ISREG(st.st_mode)) {
            ps_cli_error("%s: cannot write: not a regular file", buf);
            return PS_EXIT_INPUT;
        }
        if (access(buf, W_OK) != 0) {
            ps_cli_error("%s: cannot write: %s", buf, strerror(errno));
            return PS_EXIT_INPUT;
        }
    }
    return PS_EXIT_OK;
}

/* Whether paths a and b name the same file (the same name, or both exist
 * and are one inode). */
int ps_cli_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (strcmp(a, b) == 0)
        return 1;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

int ps_cli_check_distinct(const ps_cli_file *in, size_t nin, const ps_cli_file *out,
                          size_t nout)
{
    struct stat st;
    for (size_t j = 0; j < nout; j++) {
        if (!out[j].path)
            continue;
        for (size_t i = 0; i < nin; i++)
            if (in[i].path && stat(in[i].path, &st) == 0 && ps_cli_same_file(out[j].path, in[i].path)) {
                ps_cli_error("%s %s: is %s", out[j].opt, out[j].path, in[i].role);
                return PS_EXIT_USAGE;
            }
        for (size_t i = 0; i < j; i++)
            if (out[i].path && ps_cli_same_file(out[j].path, out[i].path)) {
                ps_cli_error("%s %s: is also %s", out[j].opt, out[j].path, out[i].role);
                return PS_EXIT_USAGE;
            }
    }
    return PS_EXIT_OK;
}

FILE *ps_cli_json_report(ps_cli_memfile *m, const char *path, const ps_cli *cli, const char *date)
{
    FILE *f = ps_cli_memfile_open(m);
    if (!f) {
        ps_cli_error("%s: cannot write: out of memory", path);
        return NULL;
    }
    char cmd[4096];
    ps_cli_command_line(cli, cmd, sizeof cmd);
    fputs("{\n  \"persolve\": ", f);
    ps_json_string(f, ps_version());
    fputs(",\n  \"date\": ", f);
    ps_json_string(f, date);
    fputs(",\n  \"command\": ", f);
    ps_json_string(f, cmd);
    return f;
}

FILE *ps_cli_memfile_open(ps_cli_memfile *m)
{
    m->buf = NULL;
    m->len = 0;
    m->f = open_memstream(&m->buf, &m->len);
    return m->f;
}

int ps_cli_memfile_commit(ps_cli_memfile *m, const char *path)
{
    int bad = !m->f || fclose(m->f) != 0;
    m->f = NULL;
    char tmp[4096 + PS_TEMP_SUFFIX_MAX];
    ps_replace_step step = bad ? PS_REPLACE_CREATE
                               : ps_replace_file(path, 0644, m->buf, m->len, tmp, sizeof tmp);
    int e = errno;
    free(m->buf);
    m->buf = NULL;
    if (bad) {
        ps_cli_error("%s: cannot write: out of memory", path);
        return PS_EXIT_INPUT;
    }
    if (step != PS_REPLACE_DONE) {
        ps_cli_error("%s: cannot write: %s (the file is left as it was)", path,
                     e ? strerror(e) : "no progress");
        return PS_EXIT_INPUT;
    }
    return PS_EXIT_OK;
}

void ps_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

void ps_json_number(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.17g", v);
    else
        fputs("null", f);
}

/* A JSON array of v[n]. */
static void json_array(FILE *f, const double *v, size_t n)
{
    fputc('[', f);
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputs(", ", f);
        ps_json_number(f, v[i]);
    }
    fputc(']', f);
}

/* v[n] on one line, "%.4g" each, then the unit. */
static void text_values(FILE *f, const double *v, size_t n, const char *unit)
{
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%.4g", i ? " " : "", v[i]);
    fprintf(f, " %s", unit);
}

int ps_cli_constraint_values(const ps_problem *p, const double *x, ps_cli_constraints *out)
{
    ps_problem_desc d;
    memset(out, 0, sizeof *out);
    int st = ps_problem_describe(p, &d);
    if (st)
        return st;
    out->nc = ps_problem_nc(p);
    out->nq = ps_problem_nq(p);
    out->has_limit = d.b1_max_channel != NULL || isfinite(d.b1_max);
    for (size_t c = 0; c < out->nc; c++)
        out->limit[c] = d.b1_max_channel ? d.b1_max_channel[c] : d.b1_max;
    out->sar_max = d.sar_max;
    out->tr = d.tr;
    out->design_g = d.design_g;
    ps_design_g_name(d.design_g, out->axes, sizeof out->axes);
    out->ng = strlen(out->axes);
    out->smax = d.smax;
    out->gmax = d.gmax;
    out->g_end = d.g_end;
    out->nt = d.nt;
    for (size_t k = 0; k < d.nt; k++)
        out->rf_free += !d.rf_mask || d.rf_mask[k] != 0.0;
    if (!x)
        return 0;
    double gp[3], sl[3], ge[3];
    st = ps_constraints(p, x, out->peak, out->sar);
    if (!st)
        st = ps_gradient_constraints(p, x, gp, sl, ge);
    for (size_t a = 0, i = 0; a < 3 && !st; a++)
        if (d.design_g >> a & 1u) { /* the designed axes, in order */
            out->gpeak[i] = gp[a];
            out->slew[i] = sl[a];
            out->gend[i++] = ge[a];
        }
    out->have_values = st == 0;
    return st;
}

/* A JSON array of v[n], or null when `have` is 0. */
static void json_array_or_null(FILE *f, const double *v, size_t n, int have)
{
    if (have)
        json_array(f, v, n);
    else
        fputs("null", f);
}

/* A JSON number, or null when it is not set (not > 0). */
static void json_limit(FILE *f, double v)
{
    if (v > 0.0)
        ps_json_number(f, v);
    else
        fputs("null", f);
}

void ps_cli_json_channels(FILE *f, const ps_problem *p, const double *x)
{
    ps_cli_constraints k;
    ps_cli_constraint_values(p, x, &k);
    fprintf(f, ",\n  \"channels\": %zu,\n  \"peak_b1\": ", k.nc);
    if (k.have_values)
        json_array(f, k.peak, k.nc);
    else
        fputs("null", f);
    fputs(",\n  \"b1_max\": ", f);
    if (k.has_limit)
        json_array(f, k.limit, k.nc);
    else
        fputs("null", f);
    fprintf(f, ",\n  \"nq\": %zu,\n  \"sar\": ", k.nq);
    if (k.nq && k.have_values)
        json_array(f, k.sar, k.nq);
    else
        fputs("null", f);
    fputs(",\n  \"sar_max\": ", f);
    if (k.nq)
        ps_json_number(f, k.sar_max);
    else
        fputs("null", f);
    fputs(",\n  \"design_g\": ", f);
    if (k.ng)
        ps_json_string(f, k.axes);
    else
        fputs("null", f);
    fputs(",\n  \"peak_g\": ", f);
    json_array_or_null(f, k.gpeak, k.ng, k.ng && k.have_values);
    fputs(",\n  \"gmax\": ", f);
    json_limit(f, k.gmax);
    fputs(",\n  \"peak_slew\": ", f);
    json_array_or_null(f, k.slew, k.ng, k.ng && k.have_values);
    fputs(",\n  \"smax\": ", f);
    json_limit(f, k.smax);
    fputs(",\n  \"end_g\": ", f);
    json_array_or_null(f, k.gend, k.ng, k.ng && k.have_values);
    fprintf(f, ",\n  \"g_end\": %s,\n  \"rf_free_steps\": %zu", k.g_end ? "true" : "false",
            k.rf_free);
}

void ps_cli_text_channels(FILE *f, int width, const ps_problem *p, const double *x)
{
    ps_cli_constraints k;
    ps_cli_constraint_values(p, x, &k);
    if (k.nc > 1) { /* one channel: the lines it has always had */
        fprintf(f, "%-*s%zu\n", width, "channels", k.nc);
        if (k.have_values) {
            fprintf(f, "%-*s", width, "peak |b1|");
            text_values(f, k.peak, k.nc, "G");
            if (k.has_limit) {
                fputs(", b1_max ", f);
                text_values(f, k.limit, k.nc, "G");
            }
            fputc('\n', f);
        }
    }
    if (k.nq && k.have_values) {
        fprintf(f, "%-*s", width, "SAR");
        text_values(f, k.sar, k.nq, "W/kg");
        fprintf(f, ", sar_max %.4g W/kg\n", k.sar_max);
    }
    if (k.ng) {
        fprintf(f, "%-*s%s designed\n", width, "gradient", k.axes);
        if (k.have_values) {
            fprintf(f, "%-*s", width, "max |g|");
            text_values(f, k.gpeak, k.ng, "G/cm");
            if (k.gmax > 0.0)
                fprintf(f, ", gmax %.4g G/cm", k.gmax);
            fprintf(f, "\n%-*s", width, "max slew");
            text_values(f, k.slew, k.ng, "G/cm/s");
            fprintf(f, ", smax %.4g G/cm/s\n%-*s", k.smax, width, "|g(T)|");
            text_values(f, k.gend, k.ng, "G/cm");
            fputs(k.g_end ? ", g_end: to return to 0\n" : "\n", f);
        }
    }
    if (k.rf_free < k.nt)
        fprintf(f, "%-*s%zu of %zu steps\n", width, "RF free", k.rf_free, k.nt);
}

const char *ps_cli_backend_name(ps_backend b)
{
    switch (b) {
    case PS_BACKEND_AUTO: return "auto";
    case PS_BACKEND_CPU: return "cpu";
    case PS_BACKEND_GPU: return "gpu";
    }
    return "unknown";
}

const char *ps_cli_team_barrier_name(int barrier)
{
    switch (barrier) {
    case PS_TEAM_BARRIER_RANGE: return "range";
    case PS_TEAM_BARRIER_CLUSTER: return "cluster";
    }
    return "none";
}

const char *ps_cli_precision_name(ps_precision p)
{
    return p == PS_PRECISION_DOUBLE ? "double" : "single";
}

void ps_cli_command_line(const ps_cli *cli, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < cli->argc && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? " " : "", cli->argv[i]);
}

void ps_cli_utc_now(char *buf, size_t len)
{
    time_t now = time(NULL);
    struct tm tm_utc;
    gmtime_r(&now, &tm_utc);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm_utc);
}
