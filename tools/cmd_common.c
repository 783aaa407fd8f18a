/*
 * Helpers shared by the subcommands of `persolve`.
 */
#include "cmd.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io/h5io.h"
#include "model/design.h"

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
    if (log && level == PS_LOG_ERROR)
        snprintf(log->msg, sizeof log->msg, "%s", msg ? msg : "");
}

int ps_cli_check_options(ps_options *o, ps_cli_log *log)
{
    log->msg[0] = '\0';
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

int ps_cli_load_problem(const char *arg, ps_problem **out, char *base,
                        size_t baselen)
{
    char ferr[512], perr[512];
    struct stat st;
    *out = NULL;
    if (stat(arg, &st) == 0) {
        int s = ps_h5_read_problem(arg, out, ferr, sizeof ferr);
        if (s != 0) {
            ps_cli_error("%s", ferr);
            return ps_cli_exit_code(s) == PS_EXIT_SOLVER ? PS_EXIT_SOLVER
                                                         : PS_EXIT_INPUT;
        }
        file_base(arg, base, baselen);
        return PS_EXIT_OK;
    }
    int file_errno = errno;
    int s = ps_preset_create(arg, out, perr, sizeof perr);
    if (s != 0) {
        if (s == PS_ERR_NO_MEMORY) {
            ps_cli_error("%s: out of memory", arg);
            return PS_EXIT_SOLVER;
        }
        ps_cli_error("'%s' is neither a file (%s) nor a preset (%s)", arg,
                     strerror(file_errno), perr[0] ? perr : ps_strerror(s));
        return PS_EXIT_INPUT;
    }
    const char *colon = strchr(arg, ':');
    size_t n = colon ? (size_t)(colon - arg) : strlen(arg);
    snprintf(base, baselen, "%.*s", (int)n, arg);
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

/* max_k |b_ck| of channel c of x, G. */
static double peak_of_channel(size_t nt, const double *x, size_t c)
{
    double peak = 0.0;
    for (size_t k = 0; k < nt; k++) {
        double a = hypot(x[PS_X_U(nt, c, k)], x[PS_X_V(nt, c, k)]);
        peak = a > peak ? a : peak;
    }
    return peak;
}

void ps_cli_json_channels(FILE *f, const ps_problem *p, const double *x)
{
    const size_t nc = ps_problem_nc(p), nt = ps_problem_nt(p);
    fprintf(f, ",\n  \"channels\": %zu,\n  \"peak_b1\": ", nc);
    if (!x) {
        fputs("null", f);
        return;
    }
    fputc('[', f);
    for (size_t c = 0; c < nc; c++) {
        if (c)
            fputs(", ", f);
        ps_json_number(f, peak_of_channel(nt, x, c));
    }
    fputc(']', f);
}

void ps_cli_text_channels(FILE *f, int width, const ps_problem *p, const double *x)
{
    const size_t nc = ps_problem_nc(p), nt = ps_problem_nt(p);
    fprintf(f, "%-*s%zu\n", width, "channels", nc);
    if (!x)
        return;
    fprintf(f, "%-*s", width, "peak |b1|");
    for (size_t c = 0; c < nc; c++)
        fprintf(f, "%s%.4g", c ? " " : "", peak_of_channel(nt, x, c));
    fputs(" G\n", f);
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
