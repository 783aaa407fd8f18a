/*
 * Problem files read in a child process (io/h5io.h): libhdf5 trusts the
 * structures of the file it reads, and a corrupted file can crash it (a
 * damaged global heap behind a variable-length string makes H5Aread read
 * wild memory) or make it loop. No check of ours before the read can
 * cover every structure it follows, so the read itself is done by a
 * fork()ed child: it parses the file with ps_h5_read_problem_ex and sends
 * the result back through a pipe as records
 *
 *   [u32 kind][u64 length][length bytes]
 *
 * (a warning's text; an error's status and text; the problem's
 * description, then each array of model/problem_fields.h that it has, by
 * its index in the list, and the per-channel peak limits; a pulse; the
 * end). The parent checks the records against the description (every
 * length is the one the description implies) and creates the problem
 * from them, validated again by ps_problem_create. A child killed by a
 * signal, or still running at the time limit, is reported as a corrupt
 * file. The cost is a fork and a copy of the arrays through the pipe
 * (README, "Reliability").
 */
#include "io/h5io.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "common/atomic_file.h"
#include "common/clock.h"
#include "common/memory.h"
#include "model/problem.h"
#include "model/problem_fields.h"

enum {
    ISO_WARNING = 1, /* text */
    ISO_ERROR,       /* int32 status, text */
    ISO_DESC,        /* ps_problem_desc (its pointers meaningless) */
    ISO_ARRAY,       /* u32 index in PS_PROBLEM_ARRAYS, doubles */
    ISO_B1MAX,       /* the per-channel limits [nc] */
    ISO_X,           /* a pulse x[nx] */
    ISO_READING,     /* u64 bytes of the array the child reads next */
    ISO_END,
};

/* The arrays of a description, in list order: where each pointer is, and
 * how many values it has. */
typedef struct iso_array {
    size_t field;
    size_t rows; /* offsetof the row count */
    size_t width;
    int channels;
} iso_array;

#define ISO_ARRAY_ROW(name, rows, width, channels, presence, rule, group, dataset, label) \
    {offsetof(ps_problem_desc, name), offsetof(ps_problem_desc, rows), width, channels},
static const iso_array iso_arrays[] = {PS_PROBLEM_ARRAYS(ISO_ARRAY_ROW)};
#undef ISO_ARRAY_ROW
#define ISO_NARRAYS (sizeof iso_arrays / sizeof iso_arrays[0])

/* Values of array i of d (0 when a count overflows). */
static size_t iso_count(const ps_problem_desc *d, size_t i)
{
    const iso_array *a = &iso_arrays[i];
    const size_t rows = *(const size_t *)((const char *)d + a->rows);
    const size_t nc = d->nc ? d->nc : 1;
    const size_t per = a->channels == PS_CH_NONE     ? 1
                       : a->channels == PS_CH_SQUARE ? nc * nc
                                                     : nc;
    if (nc > PS_MAX_CHANNELS || (rows && a->width * per > SIZE_MAX / sizeof(double) / rows))
        return 0;
    return rows * a->width * per;
}

static const double **iso_slot(ps_problem_desc *d, size_t i)
{
    return (const double **)((char *)d + iso_arrays[i].field);
}

/* ---- the child ---------------------------------------------------------- */

static int iso_send(int fd, uint32_t kind, const void *a, size_t na, const void *b, size_t nb)
{
    unsigned char head[12];
    uint64_t len = (uint64_t)na + nb;
    memcpy(head, &kind, 4);
    memcpy(head + 4, &len, 8);
    if (ps_write_all(fd, head, sizeof head) != 0 || (na && ps_write_all(fd, a, na) != 0) ||
        (nb && ps_write_all(fd, b, nb) != 0))
        return -1;
    return 0;
}

static void iso_send_error(int fd, int32_t status, const char *msg)
{
    iso_send(fd, ISO_ERROR, &status, sizeof status, msg, strlen(msg));
}

static void iso_warn(void *user, const char *msg)
{
    iso_send(*(int *)user, ISO_WARNING, msg, strlen(msg), NULL, 0);
}

static void iso_reading(void *user, uint64_t bytes)
{
    iso_send(*(int *)user, ISO_READING, &bytes, sizeof bytes, NULL, 0);
}

typedef struct iso_problem_job {
    const char *path;
    const ps_h5_read_opts *opts;
} iso_problem_job;

static int iso_child_problem(int fd, void *ctx)
{
    const iso_problem_job *job = ctx;
    ps_h5_read_opts o = {0};
    if (job->opts)
        o = *job->opts;
    o.warn = job->opts && job->opts->warn ? iso_warn : NULL;
    o.warn_user = &fd;
    o.reading = iso_reading;
    o.copies = 4;
    char err[1024];
    ps_problem *p = NULL;
    int st = ps_h5_read_problem_ex(job->path, &o, &p, err, sizeof err);
    if (st) {
        iso_send_error(fd, st, err);
        return 0;
    }
    ps_problem_desc d;
    if ((st = ps_problem_describe(p, &d))) {
        iso_send_error(fd, st, "cannot describe the problem read");
        return 0;
    }
    if (iso_send(fd, ISO_DESC, &d, sizeof d, NULL, 0))
        return 1;
    for (uint32_t i = 0; i < ISO_NARRAYS; i++) {
        const double *a = *iso_slot(&d, i);
        if (a && iso_send(fd, ISO_ARRAY, &i, sizeof i, a, iso_count(&d, i) * sizeof(double)))
            return 1;
    }
    if (d.b1_max_channel &&
        iso_send(fd, ISO_B1MAX, d.b1_max_channel, PS_NC_OF(&d) * sizeof(double), NULL, 0))
        return 1;
    return iso_send(fd, ISO_END, NULL, 0, NULL, 0) ? 1 : 0;
}

typedef struct iso_x_job {
    const char *path;
    const ps_problem *p;
    double *x;
} iso_x_job;

static int iso_child_x(int fd, void *ctx)
{
    const iso_x_job *job = ctx;
    char err[1024];
    int st = ps_h5_read_x(job->path, job->p, job->x, err, sizeof err);
    if (st) {
        iso_send_error(fd, st, err);
        return 0;
    }
    if (iso_send(fd, ISO_X, job->x, ps_problem_nx(job->p) * sizeof(double), NULL, 0))
        return 1;
    return iso_send(fd, ISO_END, NULL, 0, NULL, 0) ? 1 : 0;
}

/* ---- the parent --------------------------------------------------------- */

typedef struct iso_buf {
    unsigned char *data;
    size_t len, cap;
} iso_buf;

static int iso_fail(const char *path, char *err, size_t errlen, int st, const char *fmt,
                    const char *what)
{
    if (err && errlen) {
        int n = snprintf(err, errlen, "%s: ", path);
        if (n >= 0 && (size_t)n < errlen)
            snprintf(err + n, errlen - (size_t)n, fmt, what);
    }
    return st;
}

/*
 * Run fn(fd, ctx) in a child and collect what it writes to fd into *b.
 * Returns 0 when the child ended normally (exit 0), else the error with
 * its message in err. With the default time limit (timeout_s <= 0), each
 * ISO_READING record received adds its bytes at PS_H5_READ_RATE, up to
 * grow_cap bytes in all (the child's counts are not trusted further): the
 * limit is for a reader that loops, and a file may declare (as unwritten
 * chunks) more data than it holds.
 */
static int iso_run(const char *path, int (*fn)(int, void *), void *ctx, double timeout_s,
                   double grow_cap, const volatile sig_atomic_t *cancel, iso_buf *b, char *err,
                   size_t errlen)
{
    int fds[2];
    struct stat st_file;
    const int grows = timeout_s <= 0.0;
    if (grows)
        timeout_s = PS_H5_READ_TIMEOUT + (stat(path, &st_file) == 0
                                              ? (double)st_file.st_size / PS_H5_READ_RATE
                                              : 0.0);
    if (pipe(fds) != 0)
        return iso_fail(path, err, errlen, PS_ERR_FILE, "cannot read: no pipe: %s",
                        strerror(errno));
    fflush(NULL); /* nothing buffered is written twice */
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return iso_fail(path, err, errlen, e == ENOMEM ? PS_ERR_NO_MEMORY : PS_ERR_FILE,
                        "cannot read: cannot start the reading process: %s", strerror(e));
    }
    if (pid == 0) {
        close(fds[0]);
        /* a Ctrl-C reaches the whole process group: the parent decides
         * (it kills this process when it cancels, and dies with it) */
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
#ifdef __linux__
        prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
        if (getppid() != parent)
            _exit(3);
        _exit(fn(fds[1], ctx));
    }
    close(fds[1]);
    double deadline = ps_monotonic_seconds() + timeout_s;
    size_t scanned = 0; /* where the next record not yet looked at starts */
    int timed_out = 0, st = 0;
    for (;;) {
        double left = deadline - ps_monotonic_seconds();
        if (cancel && *cancel) {
            st = iso_fail(path, err, errlen, PS_CANCELLED, "%s",
                          "reading cancelled (signal)");
            break;
        }
        if (left <= 0.0) {
            timed_out = 1;
            break;
        }
        struct pollfd pfd = {fds[0], POLLIN, 0};
        int r = poll(&pfd, 1, left > 1.0 ? 1000 : (int)(left * 1000.0) + 1);
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        if (b->cap - b->len < 65536) {
            size_t cap = b->cap ? 2 * b->cap : 1 << 20;
            unsigned char *nd = realloc(b->data, cap);
            if (!nd) {
                st = iso_fail(path, err, errlen, PS_ERR_NO_MEMORY, "%s",
                              "out of memory reading the file");
                break;
            }
            b->data = nd;
            b->cap = cap;
        }
        ssize_t k = read(fds[0], b->data + b->len, b->cap - b->len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break; /* EOF: the child has ended (or closed) */
        b->len += (size_t)k;
        uint32_t kind;
        uint64_t n;
        while (b->len - scanned >= 12) {
            memcpy(&kind, b->data + scanned, 4);
            memcpy(&n, b->data + scanned + 4, 8);
            if (n > b->len - scanned - 12)
                break;
            if (grows && kind == ISO_READING && n == sizeof n && grow_cap > 0.0) {
                uint64_t bytes;
                memcpy(&bytes, b->data + scanned + 12, sizeof bytes);
                const double add = fmin((double)bytes, grow_cap) / PS_H5_READ_RATE;
                grow_cap -= fmin((double)bytes, grow_cap);
                deadline += add;
                timeout_s += add;
            }
            scanned += 12 + (size_t)n;
        }
    }
    close(fds[0]);
    int ws = 0;
    if (timed_out || st) {
        kill(pid, SIGKILL);
        while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
            ;
    } else {
        /* the child closed the pipe by ending; wait for it, within the limit */
        for (;;) {
            pid_t w = waitpid(pid, &ws, WNOHANG);
            if (w == pid || (w < 0 && errno != EINTR))
                break;
            if (ps_monotonic_seconds() > deadline) {
                timed_out = 1;
                kill(pid, SIGKILL);
                while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
                    ;
                break;
            }
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    if (!st && cancel && *cancel) /* a signal ended the child too */
        st = iso_fail(path, err, errlen, PS_CANCELLED, "%s", "reading cancelled (signal)");
    if (st)
        return st;
    if (timed_out) {
        char t[64];
        snprintf(t, sizeof t, "%.0f", timeout_s);
        return iso_fail(path, err, errlen, PS_ERR_FILE,
                        "corrupt file: reading it did not finish within %s s (the HDF5 library "
                        "loops on it)", t);
    }
    if (WIFSIGNALED(ws)) {
        const char *name = strsignal(WTERMSIG(ws));
        return iso_fail(path, err, errlen, PS_ERR_FILE,
                        "corrupt file: reading it crashed the HDF5 library (%s)",
                        name ? name : "a signal");
    }
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        char t[32];
        snprintf(t, sizeof t, "%d", WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
        return iso_fail(path, err, errlen, PS_ERR_FILE,
                        "corrupt file: the process reading it failed (exit %s)", t);
    }
    return 0;
}

/* The next record of b at *pos: its kind, payload and length. 0, or -1 at
 * a record that does not fit. */
static int iso_next(const iso_buf *b, size_t *pos, uint32_t *kind, const unsigned char **data,
                    size_t *len)
{
    uint64_t n;
    if (b->len - *pos < 12)
        return -1;
    memcpy(kind, b->data + *pos, 4);
    memcpy(&n, b->data + *pos + 4, 8);
    if (n > b->len - *pos - 12)
        return -1;
    *data = b->data + *pos + 12;
    *len = (size_t)n;
    *pos += 12 + (size_t)n;
    return 0;
}

/* An error record: its status and message (the child's, which names the
 * file). */
static int iso_error(const unsigned char *data, size_t len, char *err, size_t errlen)
{
    int32_t st;
    if (len < sizeof st)
        return PS_ERR_FILE;
    memcpy(&st, data, sizeof st);
    if (err && errlen)
        snprintf(err, errlen, "%.*s", (int)(len - sizeof st), (const char *)data + sizeof st);
    return st ? st : PS_ERR_FILE;
}

int ps_h5_read_problem_isolated(const char *path, const ps_h5_read_opts *opts, double timeout_s,
                                ps_problem **out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!out)
        return PS_ERR_NULL;
    *out = NULL;
    if (!path)
        return iso_fail("(null)", err, errlen, PS_ERR_NULL, "%s", "no file name");
    iso_problem_job job = {path, opts};
    iso_buf b = {NULL, 0, 0};
    const double cap = opts && opts->memory > 0.0 ? opts->memory : ps_memory_bytes();
    int st = iso_run(path, iso_child_problem, &job, timeout_s, cap > 0.0 ? cap : 1e12,
                     opts ? opts->cancel : NULL, &b, err, errlen);
    ps_problem_desc d;
    double *arrays[ISO_NARRAYS] = {NULL};
    double b1max[PS_MAX_CHANNELS];
    int have_desc = 0, ended = 0;
    size_t pos = 0;
    while (!st && !ended) {
        uint32_t kind;
        const unsigned char *data;
        size_t len;
        if (iso_next(&b, &pos, &kind, &data, &len)) {
            st = iso_fail(path, err, errlen, PS_ERR_FILE, "%s",
                          "corrupt file: the reading process ended early");
            break;
        }
        switch (kind) {
        case ISO_READING:
            if (len == sizeof(uint64_t) && opts && opts->reading) {
                uint64_t bytes;
                memcpy(&bytes, data, sizeof bytes);
                opts->reading(opts->warn_user, bytes);
            }
            break;
        case ISO_WARNING:
            if (opts && opts->warn) {
                char msg[1024];
                snprintf(msg, sizeof msg, "%.*s", (int)len, (const char *)data);
                opts->warn(opts->warn_user, msg);
            }
            break;
        case ISO_ERROR:
            st = iso_error(data, len, err, errlen);
            break;
        case ISO_DESC:
            if (len != sizeof d || have_desc) {
                st = PS_ERR_FILE;
                break;
            }
            memcpy(&d, data, sizeof d);
            for (size_t i = 0; i < ISO_NARRAYS; i++)
                *iso_slot(&d, i) = NULL;
            d.b1_max_channel = NULL;
            have_desc = 1;
            break;
        case ISO_ARRAY: {
            uint32_t i;
            if (!have_desc || len < sizeof i) {
                st = PS_ERR_FILE;
                break;
            }
            memcpy(&i, data, sizeof i);
            size_t n = i < ISO_NARRAYS ? iso_count(&d, i) : 0;
            if (!n || arrays[i] || len - sizeof i != n * sizeof(double)) {
                st = PS_ERR_FILE;
                break;
            }
            if (!(arrays[i] = malloc(n * sizeof(double)))) {
                st = iso_fail(path, err, errlen, PS_ERR_NO_MEMORY, "%s", "out of memory");
                break;
            }
            memcpy(arrays[i], data + sizeof i, n * sizeof(double));
            *iso_slot(&d, i) = arrays[i];
            break;
        }
        case ISO_B1MAX:
            if (!have_desc || PS_NC_OF(&d) > PS_MAX_CHANNELS ||
                len != PS_NC_OF(&d) * sizeof(double)) {
                st = PS_ERR_FILE;
                break;
            }
            memcpy(b1max, data, len);
            d.b1_max_channel = b1max;
            break;
        case ISO_END:
            ended = 1;
            break;
        default:
            st = PS_ERR_FILE;
        }
        if (st == PS_ERR_FILE && err && errlen && !err[0])
            iso_fail(path, err, errlen, st, "%s", "the reading process sent a malformed record");
    }
    if (!st && !have_desc)
        st = iso_fail(path, err, errlen, PS_ERR_FILE, "%s", "the reading process sent nothing");
    if (!st && (st = ps_problem_create(&d, out)) != 0)
        iso_fail(path, err, errlen, st, "%s", ps_strerror(st));
    for (size_t i = 0; i < ISO_NARRAYS; i++)
        free(arrays[i]);
    free(b.data);
    return st;
}

int ps_h5_read_x_isolated(const char *path, const ps_problem *p, double timeout_s, double *x,
                          char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!p || !x)
        return PS_ERR_NULL;
    if (!path)
        return iso_fail("(null)", err, errlen, PS_ERR_NULL, "%s", "no file name");
    iso_x_job job = {path, p, x};
    iso_buf b = {NULL, 0, 0};
    int st = iso_run(path, iso_child_x, &job, timeout_s, 0.0, NULL, &b, err, errlen);
    size_t pos = 0, nx = ps_problem_nx(p);
    int ended = 0, got = 0;
    while (!st && !ended) {
        uint32_t kind;
        const unsigned char *data;
        size_t len;
        if (iso_next(&b, &pos, &kind, &data, &len)) {
            st = iso_fail(path, err, errlen, PS_ERR_FILE, "%s",
                          "corrupt file: the reading process ended early");
        } else if (kind == ISO_ERROR) {
            st = iso_error(data, len, err, errlen);
        } else if (kind == ISO_X && len == nx * sizeof(double)) {
            memcpy(x, data, len);
            got = 1;
        } else if (kind == ISO_END) {
            ended = 1;
        } else if (kind != ISO_READING) {
            st = iso_fail(path, err, errlen, PS_ERR_FILE, "%s",
                          "the reading process sent a malformed record");
        }
    }
    if (!st && !got)
        st = iso_fail(path, err, errlen, PS_ERR_FILE, "%s", "the reading process sent no pulse");
    free(b.data);
    return st;
}
