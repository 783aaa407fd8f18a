/*
 * The tune cache files (tune/cache.h). One entry per file, text, nine
 * lines in this order:
 *
 *     persolve tune cache 1
 *     gpu NVIDIA H200
 *     cc 9.0
 *     driver 13000 580.159.04
 *     build 0.1.0+0123456789abcdef
 *     class single ns 14 nt 12 relax 0
 *     shape block 512 sb 4 regcap 0 blocks_per_sm 2
 *     measured 9.480000e-04 s/iteration ns 16384 nt 5000 date 2026-12-01T10:00:00Z
 *     checksum 0123456789abcdef
 *
 * The class line ends with " channels C" for the channels kernel, and
 * with " batch K" in a batch entry (ps_tune_class.batch), whose shape line
 * ends with " team_blocks B"; solo entries have neither, so files written
 * before batch entries existed read the same (format version 1 still).
 *
 * The checksum is the 64-bit FNV-1a hash of every byte before its line.
 * Files are replaced atomically (a temporary file, then rename), so a
 * reader sees the old entry or the new one.
 */
#include "tune/cache.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/atomic_file.h"
#include "common/hash.h"
#include "common/log.h"
#include "cuda/gpu.h"
#include "cuda/launch.h"
#include "model/problem.h"
#include "ps_build_id.h"

#define TUNE_MAGIC "persolve tune cache"
#define TUNE_FORMAT 1
#define TUNE_MAX_BYTES 4096
#define TUNE_LINES 8 /* before the checksum line */

const char *ps_tune_build_id(void)
{
    return PS_BUILD_ID;
}

int ps_tune_round_log2(size_t v)
{
    if (v < 1)
        return 0;
    return (int)floor(log2((double)v) + 0.5);
}

void ps_tune_size_class(size_t ns, size_t nt, int precision, int relax, int channels, ps_tune_class *c)
{
    memset(c, 0, sizeof *c);
    c->channels = channels;
    c->precision = precision;
    c->ns_log2 = ps_tune_round_log2(ns);
    c->nt_log2 = ps_tune_round_log2(nt);
    c->relax = relax != 0;
}

void ps_tune_problem_class(const ps_problem *p, int precision, ps_tune_class *c)
{
    ps_tune_size_class(p->ns, p->nt, precision, p->t1 || p->t2, ps_gpu_channels(p), c);
}

int ps_tune_batch_class(size_t problems)
{
    return 1 + ps_tune_round_log2(problems);
}

static const char *precision_name(int precision)
{
    return precision == PS_PRECISION_DOUBLE ? "double" : "single";
}

/* A version number such as 580.159.04: digits and dots, starting with a digit. */
static int is_version(const char *s)
{
    if (!(*s >= '0' && *s <= '9') || !strchr(s, '.'))
        return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || *s == '.'))
            return 0;
    return 1;
}

/* The NVIDIA kernel module's version from /proc/driver/nvidia/version
 * ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  ..."), or "-". */
static void driver_module(char *buf, size_t len)
{
    char line[512];
    snprintf(buf, len, "-");
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (!f)
        return;
    if (fgets(line, sizeof line, f)) {
        char *save = NULL;
        for (char *t = strtok_r(line, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save)) {
            if (is_version(t)) {
                snprintf(buf, len, "%s", t);
                break;
            }
        }
    }
    fclose(f);
}

int ps_tune_key_current(const ps_problem *p, int precision, ps_tune_key *k)
{
    ps_gpu_identity id;
    memset(k, 0, sizeof *k);
    int st = ps_gpu_device_identity(0, &id);
    if (st)
        return st;
    snprintf(k->gpu, sizeof k->gpu, "%s", id.name);
    k->cc_major = id.cc_major;
    k->cc_minor = id.cc_minor;
    k->driver = id.driver;
    driver_module(k->driver_module, sizeof k->driver_module);
    snprintf(k->build, sizeof k->build, "%s", PS_BUILD_ID);
    ps_tune_problem_class(p, precision, &k->cls);
    return PS_CONVERGED;
}

int ps_tune_key_batch(const ps_problem *p, int precision, int copies, ps_tune_key *k)
{
    int st = ps_tune_key_current(p, precision, k);
    if (!st)
        k->cls.batch = ps_tune_batch_class((size_t)copies);
    return st;
}

static void class_text(const ps_tune_class *c, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s, Ns ~2^%d, Nt ~2^%d, %s", precision_name(c->precision), c->ns_log2,
                     c->nt_log2, c->relax ? "relaxation" : "no relaxation");
    if (c->channels && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, ", %d channels", c->channels);
    if (c->batch && n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ", batches of ~2^%d problems", c->batch - 1);
}

void ps_tune_key_text(const ps_tune_key *k, char *buf, size_t len)
{
    char cls[128];
    class_text(&k->cls, cls, sizeof cls);
    snprintf(buf, len, "%s, sm_%d%d, driver %d (%s), build %s, %s", k->gpu, k->cc_major, k->cc_minor,
             k->driver, k->driver_module, k->build, cls);
}

int ps_tune_cache_dir(char *buf, size_t len)
{
    const char *d = getenv("PERSOLVE_CACHE_DIR");
    int n;
    if (d && *d)
        n = snprintf(buf, len, "%s", d);
    else if ((d = getenv("XDG_CACHE_HOME")) && d[0] == '/')
        n = snprintf(buf, len, "%s/persolve", d);
    else if ((d = getenv("HOME")) && *d)
        n = snprintf(buf, len, "%s/.cache/persolve", d);
    else
        return PS_ERR_FILE;
    return n < 0 || (size_t)n >= len ? PS_ERR_FILE : PS_CONVERGED;
}

/* The GPU name for a file name: lower-case letters and digits, other runs as '-'. */
static void slug(const char *name, char *buf, size_t len)
{
    size_t j = 0;
    for (const char *s = name; *s && j + 1 < len; s++) {
        char ch = *s;
        if (ch >= 'A' && ch <= 'Z')
            ch = (char)(ch - 'A' + 'a');
        if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'))
            buf[j++] = ch;
        else if (j > 0 && buf[j - 1] != '-')
            buf[j++] = '-';
    }
    while (j > 0 && buf[j - 1] == '-')
        j--;
    buf[j] = '\0';
    if (j == 0)
        snprintf(buf, len, "gpu");
}

int ps_tune_cache_path(const ps_tune_key *k, char *buf, size_t len)
{
    char dir[4096], name[49];
    if (ps_tune_cache_dir(dir, sizeof dir))
        return PS_ERR_FILE;
    slug(k->gpu, name, sizeof name);
    char ch[16] = "", bt[24] = "";
    if (k->cls.channels)
        snprintf(ch, sizeof ch, "-ch%d", k->cls.channels);
    if (k->cls.batch)
        snprintf(bt, sizeof bt, "-batch%d", k->cls.batch - 1);
    int n = snprintf(buf, len, "%s/tune-%s-sm%d%d-%s-ns%d-nt%d%s%s%s.txt", dir, name, k->cc_major,
                     k->cc_minor, precision_name(k->cls.precision), k->cls.ns_log2, k->cls.nt_log2,
                     k->cls.relax ? "-relax" : "", ch, bt);
    return n < 0 || (size_t)n >= len ? PS_ERR_FILE : PS_CONVERGED;
}

/* A value that goes into the file as one word: printable, no spaces. */
static int is_word(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s <= ' ' || *s == 0x7f)
            return 0;
    return 1;
}

/* mkdir -p of the directory part of path. */
static int make_parents(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path)
        return 0;
    if ((size_t)(slash - path) >= sizeof dir) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
    for (char *p = dir + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(dir, 0755) != 0 && errno != EEXIST)
                return -1;
            *p = c;
            if (c == '\0')
                break;
        }
    }
    return 0;
}

int ps_tune_cache_write(const char *path, const ps_tune_key *k, const ps_tune_entry *e,
                        const ps_options *o)
{
    char text[TUNE_MAX_BYTES], tmp[4200];
    PS_RETURN_ERROR_IF(o, strchr(k->gpu, '\n') || !is_word(k->driver_module) || !is_word(k->build) ||
                              !is_word(e->date),
                       PS_ERR_FILE, "tune cache %s: a key field is empty or holds a space", path);
    /* the class's channels, only for the channels kernel; a batch entry's
     * class and team size, only for a batch */
    char chs[24] = "", bt[24] = "", team[32] = "";
    if (k->cls.channels)
        snprintf(chs, sizeof chs, " channels %d", k->cls.channels);
    if (k->cls.batch) {
        snprintf(bt, sizeof bt, " batch %d", k->cls.batch);
        snprintf(team, sizeof team, " team_blocks %d", e->team_blocks);
    }
    int n = snprintf(text, sizeof text,
                     TUNE_MAGIC " %d\n"
                     "gpu %s\n"
                     "cc %d.%d\n"
                     "driver %d %s\n"
                     "build %s\n"
                     "class %s ns %d nt %d relax %d%s%s\n"
                     "shape block %d sb %d regcap %d blocks_per_sm %d%s\n"
                     "measured %.6e s/iteration ns %lld nt %lld date %s\n",
                     TUNE_FORMAT, k->gpu, k->cc_major, k->cc_minor, k->driver, k->driver_module,
                     k->build, precision_name(k->cls.precision), k->cls.ns_log2, k->cls.nt_log2,
                     k->cls.relax, chs, bt, e->block, e->sb, e->regcap, e->blocks_per_sm, team,
                     e->seconds_per_iteration, e->ns, e->nt, e->date);
    PS_RETURN_ERROR_IF(o, n < 0 || (size_t)n + 32 > sizeof text, PS_ERR_FILE,
                       "tune cache %s: entry too long", path);
    n += snprintf(text + n, sizeof text - (size_t)n, "checksum %016llx\n",
                  (unsigned long long)ps_fnv1a(PS_FNV_OFFSET, text, (size_t)n));
    PS_RETURN_ERROR_IF(o, strlen(path) + PS_TEMP_SUFFIX_MAX >= sizeof tmp, PS_ERR_FILE,
                       "tune cache %s: file name too long", path);
    PS_RETURN_ERROR_IF(o, make_parents(path) != 0, PS_ERR_FILE,
                       "tune cache %s: cannot create its directory: %s", path, strerror(errno));
    ps_replace_step step = ps_replace_file(path, 0644, text, (size_t)n, tmp, sizeof tmp);
    int err = step == PS_REPLACE_WRITE && errno == 0 ? EIO : errno;
    PS_RETURN_ERROR_IF(o, step == PS_REPLACE_CREATE, PS_ERR_FILE, "tune cache %s: cannot write: %s", tmp,
                       strerror(err));
    PS_RETURN_ERROR_IF(o, step != PS_REPLACE_DONE, PS_ERR_FILE, "tune cache %s: cannot write: %s", path,
                       strerror(err));
    return PS_CONVERGED;
}

/* Log why path is ignored and return `result`. */
#if defined(__GNUC__)
__attribute__((format(printf, 5, 6)))
#endif
static int ignored(const ps_options *o, int line, const char *path, int result, const char *fmt, ...)
{
    char why[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    ps_log(o, PS_LOG_WARNING, __FILE__, line, "tune cache %s ignored (%s): %s", path,
           result == PS_TUNE_CACHE_STALE ? "stale" : "corrupt", why);
    return result;
}

/* The line at *cur (its newline already a NUL); *cur moves to the next. */
static const char *next_line(char **cur)
{
    char *line = *cur;
    *cur += strlen(line) + 1;
    return line;
}

/* The whole line matches the sscanf format with `fields` conversions. */
#define LINE_IS(line, fields, fmt, ...) \
    (sscanf((line), fmt "%n", __VA_ARGS__, &used) == (fields) && (line)[used] == '\0')

/* The class line: "class PRECISION ns A nt B relax R", then an optional
 * " channels C", then an optional " batch K" (fields absent stay 0). */
static int parse_class(const char *line, char prec[8], ps_tune_class *c)
{
    int used = 0;
    if (sscanf(line, "class %7s ns %d nt %d relax %d%n", prec, &c->ns_log2, &c->nt_log2, &c->relax, &used) != 4)
        return 0;
    line += used;
    if (sscanf(line, " channels %d%n", &c->channels, &used) == 1)
        line += used;
    if (sscanf(line, " batch %d%n", &c->batch, &used) == 1)
        line += used;
    return *line == '\0';
}

int ps_tune_cache_read(const char *path, const ps_tune_key *k, ps_tune_entry *e,
                       const ps_options *o)
{
    char buf[TUNE_MAX_BYTES + 2], prec[8], module[32], build[64];
    int ver = 0, used = 0, cc_major = 0, cc_minor = 0, driver = 0;
    ps_tune_class cls;
    memset(&cls, 0, sizeof cls); /* channels and batch 0 when the class line has none */
    memset(e, 0, sizeof *e);

    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) {
            ps_log(o, PS_LOG_INFO, __FILE__, __LINE__, "no tune cache entry %s: the heuristic chooses the %s",
                   path, k->cls.batch ? "team size" : "launch shape");
            return PS_TUNE_CACHE_MISSING;
        }
        return ignored(o, __LINE__, path, PS_TUNE_CACHE_CORRUPT, "cannot read: %s", strerror(errno));
    }
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    int rerr = ferror(f);
    fclose(f);
    if (rerr)
        return ignored(o, __LINE__, path, PS_TUNE_CACHE_CORRUPT, "read error");
    if (n > TUNE_MAX_BYTES)
        return ignored(o, __LINE__, path, PS_TUNE_CACHE_CORRUPT, "larger than %d bytes", TUNE_MAX_BYTES);
    buf[n] = '\0';
    if (strlen(buf) != n)
        return ignored(o, __LINE__, path, PS_TUNE_CACHE_CORRUPT, "holds a NUL byte");

    /* the magic and the format version */
    size_t mlen = strlen(TUNE_MAGIC " ");
    if (strncmp(buf, TUNE_MAGIC " ", mlen) != 0 || sscanf(buf + mlen, "%d", &ver) != 1)
        return ignored(o, __LINE__, path, PS_TUNE_CACHE_CORRUPT, "not a persolve tune cache file");
    if (ver != TUNE_FORMAT)
        return ignored(o, __LINE__, path, PS_TUNE_CACHE_STALE, "format version %d, this build reads %d",
                       ver, TUNE_FORMAT);

    /* the checksum line, last */
    if (n < 2 || buf[n - 1] != '\n')
        return ignored(o, __LINE__, path, PS_TUNE_CACHE_CORRUPT, "truncated (no final newline)");
    char *last = buf + n - 1;
    while (last > buf && last[-1] != '\n')
        last--;
    unsigned long long sum = 0;
    buf[n - 1] = '\0';
    if (!(sscanf(last, "checksum %16llx%n", &sum, &used) == 1 && used == 25 && last[used] == '\0'))
        return ignored(o, __LINE__, path, PS_TUNE_CACHE_CORRUPT, "truncated (no checksum line)");
    if (sum != ps_fnv1a(PS_FNV_OFFSET, buf, (size_t)(last - buf)))
        return ignored(o, __LINE__, path, PS_TUNE_CACHE_CORRUPT, "checksum mismatch");

    /* the fields, one line each */
    int nlines = 0;
    for (char *c = buf; c < last; c++) {
        if (*c == '\n') {
            *c = '\0';
            nlines++;
        }
    }
    if (nlines != TUNE_LINES)
        return ignored(o, __LINE__, path, PS_TUNE_CACHE_CORRUPT, "%d lines before the checksum, not %d",
                       nlines, TUNE_LINES);
    char *cur = buf;
    const char *line[TUNE_LINES];
    for (int i = 0; i < TUNE_LINES; i++)
        line[i] = next_line(&cur);
    const char *gpu = !strncmp(line[1], "gpu ", 4) ? line[1] + 4 : NULL;
    int parsed = gpu && LINE_IS(line[2], 2, "cc %d.%d", &cc_major, &cc_minor) &&
                 LINE_IS(line[3], 2, "driver %d %31s", &driver, module) &&
                 LINE_IS(line[4], 1, "build %63s", build) &&
                 parse_class(line[5], prec, &cls) &&
                 (LINE_IS(line[6], 5, "shape block %d sb %d regcap %d blocks_per_sm %d team_blocks %d",
                          &e->block, &e->sb, &e->regcap, &e->blocks_per_sm, &e->team_blocks) ||
                  LINE_IS(line[6], 4, "shape block %d sb %d regcap %d blocks_per_sm %d", &e->block, &e->sb,
                          &e->regcap, &e->blocks_per_sm)) &&
                 LINE_IS(line[7], 4, "measured %lf s/iteration ns %lld nt %lld date %31s",
                         &e->seconds_per_iteration, &e->ns, &e->nt, e->date);
    if (!parsed || (strcmp(prec, "single") && strcmp(prec, "double")))
        return ignored(o, __LINE__, path, PS_TUNE_CACHE_CORRUPT, "a line does not parse");
    cls.precision = strcmp(prec, "double") ? PS_PRECISION_SINGLE : PS_PRECISION_DOUBLE;

    /* the key */
    if (strcmp(gpu, k->gpu) || cc_major != k->cc_major || cc_minor != k->cc_minor)
        return ignored(o, __LINE__, path, PS_TUNE_CACHE_STALE,
                       "written for %s sm_%d%d, this GPU is %s sm_%d%d", gpu, cc_major, cc_minor, k->gpu,
                       k->cc_major, k->cc_minor);
    if (driver != k->driver || strcmp(module, k->driver_module))
        return ignored(o, __LINE__, path, PS_TUNE_CACHE_STALE,
                       "written with driver %d (%s), this is driver %d (%s)", driver, module, k->driver,
                       k->driver_module);
    if (strcmp(build, k->build))
        return ignored(o, __LINE__, path, PS_TUNE_CACHE_STALE, "written by build %s, this is build %s",
                       build, k->build);
    if (memcmp(&cls, &k->cls, sizeof cls)) {
        char want[128], got[128];
        class_text(&cls, got, sizeof got);
        class_text(&k->cls, want, sizeof want);
        return ignored(o, __LINE__, path, PS_TUNE_CACHE_STALE,
                       "written for size class %s, this problem is %s", got, want);
    }

    /* the shape */
    if (e->block < 32 || e->block > PS_GPU_MAX_THREADS || e->block % 32 || e->sb < 1 || e->sb > 32 ||
        (e->sb & (e->sb - 1)) || (e->regcap != 0 && e->regcap != 1) || e->blocks_per_sm < 1 ||
        e->blocks_per_sm > 32 || !(e->seconds_per_iteration >= 0.0) || !isfinite(e->seconds_per_iteration))
        return ignored(o, __LINE__, path, PS_TUNE_CACHE_CORRUPT,
                       "shape out of range (block %d, spins per tile %d, regcap %d, %d blocks per SM)",
                       e->block, e->sb, e->regcap, e->blocks_per_sm);
    /* the team size: a batch entry's choice, absent from a solo entry */
    if (cls.batch ? e->team_blocks < 1 || e->team_blocks > 65536 : e->team_blocks != 0)
        return ignored(o, __LINE__, path, PS_TUNE_CACHE_CORRUPT,
                       cls.batch ? "team size out of range (%d blocks per team)"
                                 : "a solo entry with a team size (%d blocks per team)",
                       e->team_blocks);
    return PS_TUNE_CACHE_OK;
}

int ps_tune_cache_lookup(const ps_tune_key *k, ps_tune_entry *e, char *path, size_t len, const ps_options *o)
{
    if (ps_tune_cache_path(k, path, len) != PS_CONVERGED) {
        path[0] = '\0';
        ps_log(o, PS_LOG_INFO, __FILE__, __LINE__,
               "no tune cache: neither PERSOLVE_CACHE_DIR, XDG_CACHE_HOME nor HOME is set");
        return 0;
    }
    return ps_tune_cache_read(path, k, e, o) == PS_TUNE_CACHE_OK;
}
