/*
 * The `persolve` binary as a user runs it: spawned with posix_spawn, its
 * stdout, stderr and exit code captured and checked, and the files it
 * writes read back with the HDF5 API. The path of the binary is argv[1].
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>

#include "persolve.h"
#include "../test_util.h" /* by this file's folder: the cli and gpu builds both find it */

extern char **environ;

/* Built twice: the cli suite on the backend auto picks here or the CPU,
 * and with PS_TEST_GPU the checkpoint and signal tests on the GPU (suite
 * gpu, exit 77 without one). */
#ifdef PS_TEST_GPU
#define BACKEND "gpu"
#else
#define BACKEND "cpu"
#endif

static const char *persolve_exe;
static const char *fuzz_exe; /* fuzz_eval, which writes broken files (NULL: not given) */

/* Columns of /result/history: iteration, f, gnorm, step, evaluations,
 * seconds, penalty round. */
#define HIST_COLS 7

#define OUT_FILE "cli_stdout.txt"
#define ERR_FILE "cli_stderr.txt"
#define CAP 65536

typedef struct run_result {
    int code;      /* exit status, or 128 + signal */
    char out[CAP]; /* stdout */
    char err[CAP]; /* stderr */
} run_result;

static void slurp(const char *path, char *buf, size_t len)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* Start persolve with args[] (NULL-terminated, without the program);
 * stderr goes to err_path. */
static pid_t spawn_cli_to(const char *const *args, const char *err_path)
{
    const char *argv[64];
    int n = 0;
    argv[n++] = persolve_exe;
    for (int i = 0; args[i] && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;

    /* the signals the tests send act as for a shell's foreground job,
     * whatever the test runner ignores or blocks */
    posix_spawnattr_t at;
    sigset_t none, dfl;
    posix_spawnattr_init(&at);
    sigemptyset(&none);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGINT);
    sigaddset(&dfl, SIGTERM);
    sigaddset(&dfl, SIGTSTP);
    sigaddset(&dfl, SIGCONT);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &dfl);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, OUT_FILE,
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path,
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    int e = posix_spawn(&pid, persolve_exe, &fa, &at, (char *const *)argv,
                        environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (e != 0) {
        printf("posix_spawn %s: %s\n", persolve_exe, strerror(e));
        fail();
    }
    return pid;
}

static pid_t spawn_cli(const char *const *args)
{
    return spawn_cli_to(args, ERR_FILE);
}

static int wait_code(pid_t pid)
{
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0) {
        if (errno != EINTR) {
            fail();
        }
    }
    if (WIFEXITED(ws))
        return WEXITSTATUS(ws);
    if (WIFSIGNALED(ws))
        return 128 + WTERMSIG(ws);
    return -1;
}

static void collect(run_result *r, int code, const char *const *args)
{
    r->code = code;
    slurp(OUT_FILE, r->out, sizeof r->out);
    slurp(ERR_FILE, r->err, sizeof r->err);
    printf("$ persolve");
    for (int i = 0; args[i]; i++)
        printf(" %s", args[i]);
    printf("\n-> exit %d\n--- stdout\n%s--- stderr\n%s---\n", r->code, r->out,
           r->err);
}

/* Run persolve with the arguments given (NULL-terminated). */
static run_result *run(const char *first, ...)
{
    static run_result r;
    const char *args[64];
    int n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 63; a = va_arg(ap, const char *))
        args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    collect(&r, wait_code(spawn_cli(args)), args);
    return &r;
}

static void assert_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle)) {
        printf("expected to find \"%s\"\n", needle);
        fail();
    }
}

static void assert_code(const run_result *r, int want)
{
    if (r->code != want) {
        printf("exit code %d, expected %d\n", r->code, want);
        fail();
    }
}

/* Where the value of the JSON field "key" begins in s, past `lead` (""
 * for a number, "[" for an array). */
static const char *json_value(const char *s, const char *key, const char *lead)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(s, pat);
    if (p) {
        p += strlen(pat);
        while (*p == ' ')
            p++;
    }
    if (!p || strncmp(p, lead, strlen(lead)) != 0) {
        printf("no \"%s\"%s in the JSON\n", key, *lead ? " array" : "");
        fail();
    }
    return p + strlen(lead);
}

/* The number at p, whose field `what` names in the message; *end past it. */
static double json_parse(const char *p, const char *what, const char **end)
{
    char *stop = NULL;
    double v = strtod(p, &stop);
    if (stop == p) {
        printf("%s is not a number\n", what);
        fail();
    }
    *end = stop;
    return v;
}

/* Value of a JSON number field "key": v in s (flat objects only). */
static double json_number(const char *s, const char *key)
{
    const char *end;
    return json_parse(json_value(s, key, ""), key, &end);
}

/* The JSON array "key": [a, b, ...] of s into v[n], which must be its
 * length. */
static void json_numbers(const char *s, const char *key, double *v, size_t n)
{
    const char *p = json_value(s, key, "[");
    for (size_t i = 0; i < n; i++) {
        v[i] = json_parse(p, key, &p);
        while (*p == ',' || *p == ' ')
            p++;
    }
    if (*p != ']') {
        printf("\"%s\" has more than %zu values\n", key, n);
        fail();
    }
}

/* Number after a line that starts with `label` in text output. */
static double text_number(const char *s, const char *label)
{
    const char *p = s;
    size_t n = strlen(label);
    while (p && *p) {
        if (strncmp(p, label, n) == 0) {
            char *end = NULL;
            double v = strtod(p + n, &end);
            if (end != p + n)
                return v;
        }
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    printf("no line \"%s <number>\"\n", label);
    fail();
    return NAN;
}

/* Dataset `name` of `path` must have shape want[rank]; returns its data. */
static double *h5_read_n(const char *path, const char *name, int rank, const hsize_t *want)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        printf("%s: cannot open\n", path);
        fail();
    }
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    if (ds < 0) {
        printf("%s: no %s\n", path, name);
        H5Fclose(f);
        fail();
    }
    hid_t sp = H5Dget_space(ds);
    hsize_t dims[H5S_MAX_RANK] = {0};
    int got = H5Sget_simple_extent_ndims(sp);
    H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    double *buf = NULL;
    int same = got == rank;
    size_t n = 1;
    for (int i = 0; i < rank && same; i++) {
        same = dims[i] == want[i];
        n *= (size_t)want[i];
    }
    if (same) {
        buf = malloc(n * sizeof(double));
        if (H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
            free(buf);
            buf = NULL;
        }
    } else {
        printf("%s %s: rank %d [%llu,%llu,...], expected rank %d [%llu,%llu,...]\n", path,
               name, got, (unsigned long long)dims[0], (unsigned long long)dims[1], rank,
               (unsigned long long)want[0], (unsigned long long)want[1]);
    }
    H5Dclose(ds);
    H5Fclose(f);
    assert_non_null(buf);
    return buf;
}

/* Dataset `name` of `path` must have shape [d0,d1]; returns its data. */
static double *h5_read(const char *path, const char *name, hsize_t d0,
                       hsize_t d1)
{
    const hsize_t want[2] = {d0, d1};
    return h5_read_n(path, name, 2, want);
}

static double h5_attr(const char *path, const char *obj, const char *name)
{
    double v = NAN;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t a = H5Aopen_by_name(f, obj, name, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0) {
        printf("%s: no attribute %s on %s\n", path, name, obj);
        H5Fclose(f);
        fail();
    }
    assert_true(H5Aread(a, H5T_NATIVE_DOUBLE, &v) >= 0);
    H5Aclose(a);
    H5Fclose(f);
    return v;
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Whether a file whose name begins with `prefix` exists in the working
 * directory (a leftover temporary file). */
static int prefix_exists(const char *prefix)
{
    DIR *d = opendir(".");
    assert_non_null(d);
    int found = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        found |= strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return found;
}

/* Set element [i][j] of the [d0][d1] dataset `name` of `path` to v_ij. */
static void h5_set(const char *path, const char *name, hsize_t d0, hsize_t d1,
                   size_t i, size_t j, double v_ij)
{
    double *v = h5_read(path, name, d0, d1);
    v[i * d1 + j] = v_ij;
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    assert_true(ds >= 0);
    assert_true(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5Dclose(ds);
    H5Fclose(f);
    free(v);
}

/* ---- help, version, usage errors ------------------------------------ */

static void test_help_and_version(void **state)
{
    (void)state;
    run_result *r = run("--help", NULL);
    assert_code(r, 0);
    assert_contains(r->out, "usage: persolve COMMAND");
    assert_contains(r->out, "exit codes");
    assert_contains(r->out, "130");
    assert_contains(r->out, "design PRESET|FILE");

    char ver[64];
    snprintf(ver, sizeof ver, "persolve %d.%d.%d\n", PS_VERSION_MAJOR,
             PS_VERSION_MINOR, PS_VERSION_PATCH);
    r = run("--version", NULL);
    assert_code(r, 0);
    assert_string_equal(r->out, ver);

    static const char *const cmds[] = {"design", "eval", "preset", "info"};
    for (size_t i = 0; i < 4; i++) {
        char want[64];
        snprintf(want, sizeof want, "usage: persolve %s", cmds[i]);
        r = run(cmds[i], "--help", NULL);
        assert_code(r, 0);
        assert_contains(r->out, want);
        r = run(cmds[i], "-h", NULL);
        assert_code(r, 0);
        assert_contains(r->out, want);
    }
    r = run("design", "--help", NULL);
    assert_contains(r->out, "--max-iters");
    assert_contains(r->out, "--time-limit");
    assert_contains(r->out, "exit codes");

    r = run(NULL);
    assert_code(r, 2);
    assert_contains(r->err, "missing command");
    r = run("frobnicate", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "'frobnicate'");
}

static void test_bad_arguments(void **state)
{
    (void)state;
    run_result *r = run("design", "slice1d", "--max-iters", "abc", NULL);
    assert_code(r, 2);
    assert_contains(r->err,
                    "persolve: --max-iters: 'abc' is not a non-negative integer");
    r = run("design", "slice1d", "--max-evals=-3", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--max-evals: '-3'");
    r = run("design", "slice1d", "--backend", "tpu", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--backend: 'tpu'");
    r = run("eval", "slice1d", "--precision", "half", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--precision: 'half'");
    r = run("design", "slice1d", "--gtol", "1e-3x", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--gtol: '1e-3x'");
    r = run("design", "slice1d", "--time-limit", "nan", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--time-limit: 'nan'");
    r = run("design", "slice1d", "--memory", "0", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--memory: '0'");
    r = run("design", "slice1d", "--bogus", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--bogus");
    r = run("design", "slice1d", "--max-iters", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--max-iters: missing value");
    r = run("design", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "PRESET|FILE");
    r = run("preset", "slice1d", "extra", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "'extra'");
    r = run("info", "--x", "f.h5", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--x");
}

static void test_unknown_preset(void **state)
{
    (void)state;
    run_result *r = run("design", "nosuchpreset:n=3", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "nosuchpreset");
    assert_contains(r->err, "No such file"); /* both reasons */
    /* text quoted in a message: control bytes and bytes that are not UTF-8
     * escaped, UTF-8 kept */
    r = run("eval", "cli_no\x01\xff\xc3\xa9.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_no\\x01\\xff\xc3\xa9.h5");
    assert_null(strchr(r->err, '\x01'));
    r = run("preset", "nosuchpreset", "-o", "cli_never.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "nosuchpreset");
    assert_false(file_exists("cli_never.h5"));
    r = run("preset", "slice1d:bogus=1", "-o", "cli_never.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "bogus");
    r = run("eval", "missing_file.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "missing_file.h5");
}

/* ---- preset, eval ------------------------------------------------------ */

static void test_preset_and_eval(void **state)
{
    (void)state;
    unlink("cli_f.h5");
    unlink("cli_e.h5");
    run_result *r = run("preset", "slice1d:nz=50,nt=60", "-o", "cli_f.h5", NULL);
    assert_code(r, 0);
    assert_contains(r->out, "cli_f.h5");
    double *rr = h5_read("cli_f.h5", "/spins/r", 50, 3);
    /* slice1d: z = -2 + 4 i/nz, x = y = 0 */
    assert_true(rr[0] == 0.0 && rr[1] == 0.0);
    assert_true(fabs(rr[3 * 10 + 2] - (-2.0 + 4.0 * 10 / 50)) < 1e-12);
    free(rr);
    free(h5_read("cli_f.h5", "/pulse/b1", 60, 2));

    r = run("eval", "cli_f.h5", "-o", "cli_e.h5", NULL);
    assert_code(r, 0);
    double f = text_number(r->out, "F ");
    double gn = text_number(r->out, "|grad F| ");
    assert_true(isfinite(f) && f > 0.0);
    assert_true(isfinite(gn) && gn > 0.0);

    double *g = h5_read("cli_e.h5", "/eval/gradient", 60, 2);
    double s = 0.0;
    for (int i = 0; i < 120; i++)
        s += g[i] * g[i];
    free(g);
    assert_true(fabs(sqrt(s) - gn) <= 1e-12 * gn);
    assert_true(h5_attr("cli_e.h5", "/eval", "f") == f);
    double *m = h5_read("cli_e.h5", "/result/m", 50, 3);
    for (int j = 0; j < 50; j++) {
        double n = sqrt(m[3 * j] * m[3 * j] + m[3 * j + 1] * m[3 * j + 1] +
                        m[3 * j + 2] * m[3 * j + 2]);
        if (fabs(n - 1.0) > 1e-4) {
            printf("|M[%d]| = %.9f\n", j, n);
            fail();
        }
    }
    free(m);

    /* The preset spec itself gives the same F as its file. */
    r = run("eval", "slice1d:nz=50,nt=60", "--json", "-o", "cli_e2.h5", NULL);
    assert_code(r, 0);
    assert_true(json_number(r->out, "f") == f);
    assert_true(json_number(r->out, "gnorm") == gn);

    /* --x: the pulse of another file (here the same start pulse). */
    r = run("eval", "cli_f.h5", "--x", "cli_e.h5", "-o", "cli_e3.h5", NULL);
    assert_code(r, 0);
    assert_true(text_number(r->out, "F ") == f);
    r = run("eval", "cli_f.h5", "--x", "cli_nonexistent.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_nonexistent.h5");
}

/* ---- design ------------------------------------------------------------ */

static void test_design_json(void **state)
{
    (void)state;
    unlink("cli_r.h5");
    run_result *r = run("design", "slice1d:nz=60,nt=80", "--max-iters", "5",
                        "-o", "cli_r.h5", "--json", NULL);
    assert_true(r->code == 0 || r->code == 1);
    assert_contains(r->out, "\"status\":");
    assert_contains(r->out, "\"output\": \"cli_r.h5\"");
    assert_true(r->out[0] == '{');
    double status = json_number(r->out, "status");
    double iters = json_number(r->out, "iterations");
    double f0 = json_number(r->out, "f0");
    double f = json_number(r->out, "f");
    assert_true(iters >= 1 && iters <= 5);
    assert_true(f < f0);
    assert_int_equal(json_number(r->out, "exit_code"), r->code);
    assert_int_equal(r->code, status == 0 || status == 1 ? 0 : 1);

    double *m = h5_read("cli_r.h5", "/result/m", 60, 3);
    free(m);
    double *h = h5_read("cli_r.h5", "/result/history", (hsize_t)iters + 1, HIST_COLS);
    assert_true(h[0] == 0.0 && h[1] == f0);
    assert_true(h[HIST_COLS * (size_t)iters + 1] == f);
    for (size_t i = 0; i <= (size_t)iters; i++) /* one penalty round: round 0 */
        assert_true(h[HIST_COLS * i + 6] == 0.0);
    free(h);
    assert_true(h5_attr("cli_r.h5", "/result", "status") == status);
    assert_true(h5_attr("cli_r.h5", "/result", "f") == f);
    assert_true(h5_attr("cli_r.h5", "/result", "iterations") == iters);

    /* The result is a problem file: design continues from its pulse. */
    r = run("eval", "cli_r.h5", "--json", "-o", "cli_re.h5", NULL);
    assert_code(r, 0);
    double fe = json_number(r->out, "f");
    assert_true(fabs(fe - f) <= 1e-6 * fabs(f) + 1e-12);
}

static void test_design_text_default_output(void **state)
{
    (void)state;
    /* the default name keeps the preset's parameters */
    const char *def = "slice1d_nz=40_nt=50_result.h5";
    unlink(def);
    run_result *r = run("design", "slice1d:nz=40,nt=50", "--max-iters", "3",
                        "--backend", "cpu", "--precision", "double", NULL);
    assert_true(r->code == 0 || r->code == 1);
    assert_contains(r->out, "status");
    assert_contains(r->out, "iterations   ");
    assert_contains(r->out, "backend      cpu");
    assert_null(strstr(r->out, "fell back")); /* --backend cpu: nothing chosen, nothing fell */
    assert_null(strstr(r->out, "chosen by"));
    assert_contains(r->out, "double precision");
    assert_contains(r->out, "output       slice1d_nz=40_nt=50_result.h5");
    assert_true(file_exists(def));
    assert_null(strstr(r->err, "iter ")); /* no progress line off a terminal */

    unlink(def);
    r = run("design", "slice1d:nz=40,nt=50", "--max-iters", "2", "--quiet", NULL);
    assert_true(r->code == 0 || r->code == 1);
    assert_string_equal(r->out, "");
    assert_true(file_exists(def));
    unlink(def);
    /* auto on a machine without a GPU chose the CPU: said so, not "fell back" */
    r = run("design", "slice1d:nz=40,nt=50", "--max-iters", "2", "-o", "cli_auto.h5", NULL);
    assert_true(r->code == 0 || r->code == 1);
    assert_null(strstr(r->out, "fell back"));
    assert_contains(r->out, "chosen by --backend auto");

    /* an input file's base name gives the default output name */
    r = run("preset", "inversion:ndf=11,nb1=2,nt=30", "-o", "cli_inv.h5", NULL);
    assert_code(r, 0);
    unlink("cli_inv_result.h5");
    r = run("design", "cli_inv.h5", "--max-iters", "2", "--quiet", NULL);
    assert_true(r->code == 0 || r->code == 1);
    assert_true(file_exists("cli_inv_result.h5"));

    r = run("design", "slice1d:nz=20,nt=20", "-o", "cli_no_dir/x.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_no_dir");
}

static void test_design_cancel(void **state)
{
    (void)state;
    unlink("cli_cancel.h5");
    /* float64 and no stopping test but the time limit: still running when
     * the signal comes, and never stopped by a precision floor first */
    const char *args[] = {"design", "spiral2d:n=48,nt=1500", "--backend", "cpu",
                          "--precision", "double", "--gtol", "0", "--ftol", "0",
                          "--max-iters", "0", "--time-limit", "60", "-o",
                          "cli_cancel.h5", "--json", NULL};
    pid_t pid = spawn_cli(args);
    int code = -1, ws = 0;
    struct timespec nap = {0, 300 * 1000 * 1000};
    /* SIGTERM until it ends (the first may come before the handler). */
    for (int i = 0; i < 100; i++) {
        nanosleep(&nap, NULL);
        pid_t w = waitpid(pid, &ws, WNOHANG);
        if (w == pid) {
            code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
            break;
        }
        kill(pid, SIGTERM);
    }
    if (code < 0) {
        kill(pid, SIGKILL);
        code = wait_code(pid);
    }
    run_result *r = malloc(sizeof *r);
    collect(r, code, args);
    assert_code(r, 130);
    assert_true(json_number(r->out, "status") == PS_CANCELLED);
    assert_true(h5_attr("cli_cancel.h5", "/result", "status") == PS_CANCELLED);
    free(h5_read("cli_cancel.h5", "/result/m", 48 * 48, 3));
    free(r);
}

/* Run persolve with stderr on a pseudo-terminal: what it wrote there
 * (static), its exit code into *code. */
static const char *run_on_terminal(const char *const *args, int *code)
{
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    assert_true(master >= 0);
    assert_int_equal(grantpt(master), 0);
    assert_int_equal(unlockpt(master), 0);
    const char *slave = ptsname(master);
    assert_non_null(slave);
    pid_t pid = spawn_cli_to(args, slave);
    static char tty[CAP];
    size_t n = 0;
    for (;;) {
        ssize_t k = read(master, tty + n, sizeof tty - 1 - n);
        if (k <= 0)
            break; /* EIO once the child has closed the terminal */
        n += (size_t)k;
    }
    tty[n] = '\0';
    *code = wait_code(pid);
    close(master);
    printf("terminal: %zu bytes\n", n);
    return tty;
}

static void test_progress_on_terminal(void **state)
{
    (void)state;
    /* stderr on a pseudo-terminal: the live progress line appears; the
     * CPU backend: live progress from the GPU kernel comes with the
     * asynchronous API (the host-control issue). The solve is bounded by
     * time, not iterations, so that it outlasts the first progress poll
     * on any machine (12 iterations of this problem took under the poll's
     * 50 ms on 16 cores, and no line was drawn) */
    const char *args[] = {"design", "spiral2d:n=32,nt=1000", "--max-iters", "1000000", "--time-limit", "0.4",
                          "--backend", "cpu", "-o", "cli_tty.h5", NULL};
    int code = -1;
    const char *tty = run_on_terminal(args, &code);
    assert_true(code == 0 || code == 1);
    assert_non_null(strstr(tty, "\r  iter "));
    assert_non_null(strstr(tty, "   f "));
    assert_non_null(strstr(tty, "|g| "));
    assert_non_null(strstr(tty, "evals "));
    assert_non_null(strstr(tty, "\r\033[K")); /* cleared before the summary */
    run_result *r = malloc(sizeof *r);
    slurp(OUT_FILE, r->out, sizeof r->out);
    assert_non_null(strstr(r->out, "output       cli_tty.h5"));
    assert_null(strstr(r->out, "iter ")); /* progress never on stdout */
    free(r);
}

/* ---- checkpoints and signals -------------------------------------- */

/* Exit code of pid, waiting at most `limit` seconds (then SIGKILL, fail). */
static int wait_bounded(pid_t pid, double limit)
{
    struct timespec nap = {0, 10 * 1000 * 1000};
    for (int i = 0; i < (int)(limit * 100); i++) {
        int ws = 0;
        pid_t w = waitpid(pid, &ws, WNOHANG);
        if (w == pid) {
            if (WIFEXITED(ws))
                return WEXITSTATUS(ws);
            printf("persolve died of signal %d\n", WIFSIGNALED(ws) ? WTERMSIG(ws) : -1);
            return 128 + (WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
        }
        nanosleep(&nap, NULL);
    }
    printf("persolve still running after %.1f s: killed\n", limit);
    kill(pid, SIGKILL);
    wait_code(pid);
    fail();
    return -1;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* /result/history [rows][HIST_COLS] of path: rows into *rows, data returned. */
static double *h5_history(const char *path, size_t *rows)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t ds = H5Dopen2(f, "/result/history", H5P_DEFAULT);
    assert_true(ds >= 0);
    hid_t sp = H5Dget_space(ds);
    hsize_t dims[2] = {0, 0};
    assert_int_equal(H5Sget_simple_extent_ndims(sp), 2);
    H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    H5Dclose(ds);
    H5Fclose(f);
    assert_int_equal(dims[1], HIST_COLS);
    *rows = (size_t)dims[0];
    return h5_read(path, "/result/history", dims[0], HIST_COLS);
}

/*
 * The f column of both histories and /pulse/b1 [nt][2] agree: bit for bit
 * when rtol is 0, else to rtol relative (f row by row, the pulse against
 * its largest sample).
 */
static void assert_close_result(const char *a, const char *b, size_t nt, double rtol)
{
    size_t ra = 0, rb = 0;
    double *ha = h5_history(a, &ra), *hb = h5_history(b, &rb);
    if (ra != rb) {
        printf("%s: %zu history rows, %s: %zu\n", a, ra, b, rb);
        fail();
    }
    for (size_t i = 0; i < ra; i++) {
        double fa = ha[HIST_COLS * i + 1], fb = hb[HIST_COLS * i + 1];
        bool same = rtol == 0.0 ? memcmp(&fa, &fb, sizeof fa) == 0
                                : fabs(fa - fb) <= rtol * fabs(fb);
        if (!same) {
            printf("history f differs at iteration %zu: %.17g vs %.17g\n", i, fa, fb);
            fail();
        }
    }
    free(ha);
    free(hb);
    double *pa = h5_read(a, "/pulse/b1", nt, 2), *pb = h5_read(b, "/pulse/b1", nt, 2);
    double peak = 0.0;
    for (size_t i = 0; i < 2 * nt; i++)
        peak = fmax(peak, fabs(pb[i]));
    for (size_t i = 0; i < 2 * nt; i++) {
        bool same = rtol == 0.0 ? memcmp(&pa[i], &pb[i], sizeof(double)) == 0
                                : fabs(pa[i] - pb[i]) <= rtol * peak;
        if (!same) {
            printf("/pulse/b1 differs at %zu: %.17g vs %.17g\n", i, pa[i], pb[i]);
            fail();
        }
    }
    free(pa);
    free(pb);
}

static void assert_same_result(const char *a, const char *b, size_t nt)
{
    assert_close_result(a, b, nt, 0.0);
}

static void copy_file(const char *from, const char *to, long len, long flip_at)
{
    static char buf[1 << 17];
    FILE *f = fopen(from, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 0 && n < sizeof buf);
    if (len >= 0 && (size_t)len < n)
        n = (size_t)len;
    if (flip_at >= 0) {
        assert_true((size_t)flip_at < n);
        buf[flip_at] ^= 0x10;
    }
    f = fopen(to, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

#define CK_PROBLEM "slice1d:nz=60,nt=80"

static void test_design_checkpoint_resume(void **state)
{
    (void)state;
    unlink("cli_ck.bin");
    unlink("cli_ck_ref.h5");
    unlink("cli_ck_1.h5");
    unlink("cli_ck_2.h5");
    run_result *r = run("design", CK_PROBLEM, "--backend", BACKEND, "--max-iters", "30",
                        "-o", "cli_ck_ref.h5", "--quiet", NULL);
    assert_code(r, 1);
    r = run("design", CK_PROBLEM, "--backend", BACKEND, "--max-iters", "8",
            "--checkpoint", "cli_ck.bin", "-o", "cli_ck_1.h5", NULL);
    assert_code(r, 1);
    assert_contains(r->out, "checkpoint   cli_ck.bin");
    assert_true(file_size("cli_ck.bin") > 0);
    assert_false(prefix_exists("cli_ck.bin.tmp"));
    assert_true(h5_attr("cli_ck_1.h5", "/result", "iterations") == 8);

    /* a new process continues it to 30 iterations: the same run */
    r = run("design", CK_PROBLEM, "--backend", BACKEND, "--resume", "cli_ck.bin",
            "--max-iters", "30", "-o", "cli_ck_2.h5", "--json", NULL);
    assert_code(r, 1);
    assert_contains(r->out, "\"resumed_from\": \"cli_ck.bin\"");
    assert_true(json_number(r->out, "iterations") == 30);
    assert_same_result("cli_ck_ref.h5", "cli_ck_2.h5", 80);

    /* resuming with the same limit ends where the first run ended */
    r = run("design", CK_PROBLEM, "--backend", BACKEND, "--resume", "cli_ck.bin",
            "--max-iters", "8", "-o", "cli_ck_3.h5", "--quiet", NULL);
    assert_code(r, 1);
    assert_same_result("cli_ck_1.h5", "cli_ck_3.h5", 80);

    /* another problem, another algorithmic setting: refused */
    r = run("design", "slice1d:nz=61,nt=80", "--backend", BACKEND, "--resume",
            "cli_ck.bin", "-o", "cli_ck_x.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_ck.bin: checkpoint refused");
    r = run("design", CK_PROBLEM, "--backend", BACKEND, "--resume", "cli_ck.bin",
            "--gtol", "1e-3", "-o", "cli_ck_x.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "gtol");
    r = run("design", CK_PROBLEM, "--backend", BACKEND, "--resume",
            "cli_ck_missing.bin", "-o", "cli_ck_x.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_ck_missing.bin");
    assert_false(file_exists("cli_ck_x.h5"));
}

/*
 * A checkpoint written by an earlier build (persolve 0.1.0 at 36283d2, CPU:
 * `persolve design slice1d:nz=60,nt=80 --backend cpu --max-iters 8
 * --checkpoint FILE`) resumes in this one: on the CPU to the run this
 * build makes from the start, on the GPU to the same number of
 * iterations. Not bit for bit: the rotation adjoint's float rounding has
 * changed since 0.1.0 (its Jacobian form), so the iterates the checkpoint
 * holds differ from this build's in the last float bits and the two runs
 * drift apart by float rounding (about 4e-5 relative in f after 30
 * iterations); a checkpoint of this build resumes bit for bit
 * (test_design_checkpoint_resume).
 */
static void test_design_checkpoint_stored(void **state)
{
    (void)state;
    /* $PS_SOURCE_DIR: a checkout moved elsewhere (tests/gpu/gpu_suite.sh) */
    const char *root = getenv("PS_SOURCE_DIR");
    char ck[4096];
    snprintf(ck, sizeof ck, "%s/tests/data/checkpoint_0.1.0_slice1d.bin", root ? root : PS_SOURCE_DIR);
    unlink("cli_cks_ref.h5");
    unlink("cli_cks.h5");
    run_result *r = run("design", CK_PROBLEM, "--backend", BACKEND, "--resume", ck,
                        "--max-iters", "30", "-o", "cli_cks.h5", "--json", NULL);
    assert_code(r, 1);
    assert_true(json_number(r->out, "iterations") == 30);
    assert_true(h5_attr("cli_cks.h5", "/result", "iterations") == 30);
#ifndef PS_TEST_GPU
    r = run("design", CK_PROBLEM, "--backend", BACKEND, "--max-iters", "30", "-o", "cli_cks_ref.h5",
            "--quiet", NULL);
    assert_code(r, 1);
    assert_close_result("cli_cks_ref.h5", "cli_cks.h5", 80, 1e-3);
#endif
}

static void test_design_checkpoint_corrupt(void **state)
{
    (void)state;
    unlink("cli_ckc.bin");
    run_result *r = run("design", CK_PROBLEM, "--backend", BACKEND, "--max-iters", "4",
                        "--checkpoint", "cli_ckc.bin", "-o", "cli_ckc.h5", "--quiet",
                        NULL);
    assert_code(r, 1);
    long n = file_size("cli_ckc.bin");
    assert_true(n > 1000);

    static const struct {
        const char *file, *why;
        long len, flip;
    } bad[] = {
        {"cli_ckc_trunc.bin", "truncated", -2, -1},
        {"cli_ckc_head.bin", "truncated", 16, -1},
        {"cli_ckc_empty.bin", "truncated", 0, -1},
        {"cli_ckc_flip.bin", "checksum", -1, -3},
        {"cli_ckc_magic.bin", "not a persolve checkpoint", -1, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        long len = bad[i].len == -2 ? n - 100 : bad[i].len;
        long flip = bad[i].flip == -3 ? n / 2 : bad[i].flip;
        copy_file("cli_ckc.bin", bad[i].file, len, flip);
        unlink("cli_ckc_out.h5");
        r = run("design", CK_PROBLEM, "--backend", BACKEND, "--resume", bad[i].file,
                "-o", "cli_ckc_out.h5", NULL);
        assert_code(r, 3);
        char want[128];
        snprintf(want, sizeof want, "persolve: %s: checkpoint refused: ", bad[i].file);
        assert_contains(r->err, want);
        assert_contains(r->err, bad[i].why);
        assert_false(file_exists("cli_ckc_out.h5"));
    }
}

#define SIG_PROBLEM "spiral2d:n=32,nt=1000"
/* Runs long enough (0.5 s and more) for a signal to find them running:
 * on the GPU an iteration of SIG_PROBLEM takes about 45 us, so those run
 * without stopping tests; on the CPU, two threads whatever the machine
 * has (40 iterations ended before the signal at 5.7 ms an iteration;
 * with 16 threads they could too), 500 iterations for the run that is
 * stopped and continued (200 took 1.5 s on a 2-core machine, but ended
 * before the SIGTSTP at 0.4 s once on a GPU machine's faster cores),
 * and no tolerance stops them early. */
#ifdef PS_TEST_GPU
#define LONG_ITERS "100000"
#define STOP_ITERS "30000"
#define SIG_OPTS "--gtol", "0", "--ftol", "0",
#else
#define LONG_ITERS "1000"
#define STOP_ITERS "500"
#define SIG_OPTS "--threads", "2", "--gtol", "0", "--ftol", "0",
#endif

/*
 * Under compute-sanitizer (PS_GPU_TEST_QUICK, as tests/gpu/gpu_suite.sh
 * --sanitize runs the suite) the kernels run many times slower: the run
 * that is stopped and continued is shorter, and every bounded wait longer.
 */
static int sanitized(void)
{
    return getenv("PS_GPU_TEST_QUICK") != NULL;
}

static const char *stop_iters(void)
{
#ifdef PS_TEST_GPU
    if (sanitized())
        return "2000";
#endif
    return STOP_ITERS;
}

/* A bounded wait of s seconds, longer under a sanitizer. */
static double bound_s(double s)
{
    return sanitized() ? 30.0 * s : s;
}

static void test_design_sigint(void **state)
{
    (void)state;
    unlink("cli_int.h5");
    unlink("cli_int.bin");
    const char *args[] = {"design", SIG_PROBLEM, "--backend", BACKEND, SIG_OPTS "--max-iters",
                          LONG_ITERS, "--checkpoint", "cli_int.bin", "-o", "cli_int.h5",
                          "--json", NULL};
    pid_t pid = spawn_cli(args);
    sleep_s(0.5);
    kill(pid, SIGINT);
    int code = wait_bounded(pid, bound_s(10.0));
    run_result *r = malloc(sizeof *r);
    collect(r, code, args);
    assert_code(r, 130);
    assert_true(json_number(r->out, "status") == PS_CANCELLED);
    double iters = json_number(r->out, "iterations");
    assert_true(iters >= 0 && iters < atof(LONG_ITERS));
    assert_true(h5_attr("cli_int.h5", "/result", "status") == PS_CANCELLED);
    free(h5_read("cli_int.h5", "/result/m", 32 * 32, 3));
    assert_true(file_size("cli_int.bin") > 0);
    free(r);

    /* the checkpoint was taken before the cancel: it continues the run */
    char lim[32];
    snprintf(lim, sizeof lim, "%d", (int)iters + 2);
    r = run("design", SIG_PROBLEM, "--backend", BACKEND, SIG_OPTS "--resume", "cli_int.bin",
            "--max-iters", lim, "-o", "cli_int_2.h5", "--json", NULL);
    assert_true(r->code == 0 || r->code == 1);
    if (r->code == 1)
        assert_true(json_number(r->out, "iterations") == iters + 2);
}

static void test_design_stop_continue(void **state)
{
    (void)state;
    unlink("cli_tstp.h5");
    unlink("cli_tstp_ref.h5");
    run_result *r = run("design", SIG_PROBLEM, "--backend", BACKEND, SIG_OPTS "--max-iters",
                        stop_iters(), "-o", "cli_tstp_ref.h5", "--quiet", NULL);
    assert_code(r, 1);

    const char *args[] = {"design", SIG_PROBLEM, "--backend", BACKEND, SIG_OPTS "--max-iters",
                          stop_iters(), "-o", "cli_tstp.h5", "--json", NULL};
    pid_t pid = spawn_cli(args);
    sleep_s(0.4);
    kill(pid, SIGTSTP);
    int stopped = 0, ws = 0;
    struct timespec nap = {0, 10 * 1000 * 1000};
    for (int i = 0; i < (int)(bound_s(5.0) * 100) && !stopped; i++) {
        pid_t w = waitpid(pid, &ws, WNOHANG | WUNTRACED);
        if (w == pid && WIFSTOPPED(ws))
            stopped = 1;
        else if (w == pid)
            break; /* ended before it stopped */
        else
            nanosleep(&nap, NULL);
    }
    if (!stopped) {
        printf("persolve did not stop on SIGTSTP\n");
        kill(pid, SIGKILL);
        if (waitpid(pid, &ws, WNOHANG) == 0)
            wait_code(pid);
        fail();
    }
    /* stopped: no output file yet, and it stays stopped */
    sleep_s(0.3);
    assert_int_equal(waitpid(pid, &ws, WNOHANG | WUNTRACED), 0);
    assert_false(file_exists("cli_tstp.h5"));
    kill(pid, SIGCONT);
    int code = wait_bounded(pid, bound_s(10.0));
    r = malloc(sizeof *r);
    collect(r, code, args);
    assert_code(r, 1);
    assert_true(json_number(r->out, "iterations") == atof(stop_iters()));
    assert_same_result("cli_tstp_ref.h5", "cli_tstp.h5", 1000);
    free(r);
}

static void test_design_checkpoint_every(void **state)
{
    (void)state;
    unlink("cli_ev.bin");
    const char *args[] = {"design", SIG_PROBLEM, "--backend", BACKEND, SIG_OPTS "--max-iters",
                          LONG_ITERS, "--checkpoint", "cli_ev.bin", "--every", "0.2",
                          "-o", "cli_ev.h5", "--quiet", NULL};
    pid_t pid = spawn_cli(args);
    /* a periodic checkpoint appears while the run goes on */
    int seen = 0;
    for (int i = 0; i < (int)(bound_s(3.0) * 100) && !seen; i++) {
        sleep_s(0.01);
        seen = file_size("cli_ev.bin") > 0;
    }
    kill(pid, SIGTERM);
    int code = wait_bounded(pid, bound_s(10.0));
    assert_true(seen);
    assert_int_equal(code, 130);
    assert_false(prefix_exists("cli_ev.bin.tmp"));
    run_result *r = run("design", "--help", NULL);
    assert_contains(r->out, "--checkpoint FILE");
    assert_contains(r->out, "--every S");
    assert_contains(r->out, "--resume FILE");
    assert_contains(r->out, "resumes on the CPU backend and back");
    r = run("design", CK_PROBLEM, "--every", "1", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--every: requires --checkpoint");
}

/* eval at a pulse past the problem's b1_max: evaluated, with a warning */
static void test_eval_b1max_warning(void **state)
{
    (void)state;
    run_result *r = run("preset", "slice1d:nz=20,nt=30,b1_max=0.001", "-o", "cli_b1.h5", NULL);
    assert_code(r, 0);
    r = run("eval", "cli_b1.h5", "--backend", "cpu", "-o", "cli_b1_eval.h5", NULL);
    assert_code(r, 0);
    assert_contains(r->err, "warning: the pulse exceeds b1_max = 0.001 G");
    r = run("preset", "slice1d:nz=20,nt=30,b1_max=10", "-o", "cli_b1.h5", NULL);
    assert_code(r, 0);
    r = run("eval", "cli_b1.h5", "--backend", "cpu", "-o", "cli_b1_eval.h5", NULL);
    assert_code(r, 0);
    assert_null(strstr(r->err, "warning"));
}

/* ---- malformed input, info -------------------------------------------- */

/* Files are written beside their path and renamed over it: a path that is
 * not a regular file, or one of the command's other files, is refused
 * before anything runs, and stays as it was. */
static void test_output_paths(void **state)
{
    (void)state;
    unlink("cli_fifo");
    unlink("cli_link.h5");
    unlink("cli_nan_eval.h5");
    assert_int_equal(mkfifo("cli_fifo", 0644), 0);
    assert_int_equal(symlink("cli_link_target.h5", "cli_link.h5"), 0);
    run_result *r = run("preset", "slice1d:nz=10,nt=10", "-o", "cli_fifo", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_fifo: cannot write: not a regular file");
    struct stat st;
    assert_int_equal(lstat("cli_fifo", &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    r = run("preset", "slice1d:nz=10,nt=10", "-o", "cli_link.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_link.h5: cannot write: is a symbolic link");
    assert_int_equal(lstat("cli_link.h5", &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    unlink("cli_fifo");
    unlink("cli_link.h5");

    r = run("preset", "slice1d:nz=10,nt=10", "-o", "cli_in.h5", NULL);
    assert_code(r, 0);
    r = run("design", "cli_in.h5", "--backend", "cpu", "--max-iters", "2", "--checkpoint",
            "cli_in.h5", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--checkpoint cli_in.h5: is the input problem file");
    r = run("design", "cli_in.h5", "--backend", "cpu", "--max-iters", "2", "-o", "./cli_in.h5",
            NULL);
    assert_code(r, 2);
    assert_contains(r->err, "-o ./cli_in.h5: is the input problem file");
    r = run("design", "cli_in.h5", "--backend", "cpu", "--max-iters", "2", "--checkpoint",
            "cli_same.out", "-o", "cli_same.out", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--checkpoint cli_same.out: is also the result file (-o)");
    /* nor the checkpoint resumed (the next checkpoint may replace it), the
     * --x file, or a problem that bench or tune reads */
    r = run("design", "cli_in.h5", "--backend", "cpu", "--max-iters", "2", "--checkpoint",
            "cli_in.ck", "-o", "cli_in_r.h5", "--quiet", NULL);
    assert_code(r, 1);
    r = run("design", "cli_in.h5", "--backend", "cpu", "--max-iters", "3", "--resume",
            "cli_in.ck", "-o", "cli_in.ck", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "-o cli_in.ck: is the checkpoint to resume (--resume)");
    r = run("design", "cli_in.h5", "--backend", "cpu", "--max-iters", "3", "--resume",
            "cli_in.ck", "--checkpoint", "cli_in.ck", "-o", "cli_in_r.h5", "--quiet", NULL);
    assert_code(r, 1);
    r = run("eval", "cli_in.h5", "--backend", "cpu", "--x", "cli_in_r.h5", "-o", "cli_in_r.h5",
            NULL);
    assert_code(r, 2);
    assert_contains(r->err, "-o cli_in_r.h5: is the pulse's file (--x)");
    r = run("eval", "cli_in.h5", "--backend", "cpu", "-o", "cli_in.h5", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "-o cli_in.h5: is the input problem file");
    r = run("bench", "--backend", "cpu", "--sizes", "cli_in.h5", "--iters", "1", "--json",
            "cli_in.h5", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--json cli_in.h5: is a problem file of --sizes");
    r = run("bench", "--backend", "cpu", "--batch", "2", "cli_in.h5", "--iters", "1", "--json",
            "cli_in.h5", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--json cli_in.h5: is the problem file benchmarked");
    r = run("design", "cli_in.h5", "--backend", "cpu", "--max-iters", "4", "--resume",
            "cli_in.ck", "-o", "cli_in_r2.h5", "--quiet", NULL); /* the checkpoint rewritten */
    assert_true(r->code == 0 || r->code == 1);
    unlink("cli_in.ck");
    unlink("cli_in_r.h5");
    unlink("cli_in_r2.h5");
    r = run("eval", "cli_in.h5", "--backend", "cpu", NULL); /* the problem is intact */
    assert_code(r, 0);

    /* a pulse that overflows the model: F is NaN, which eval reports as a
     * failure; as a problem's start pulse it is refused when read */
    r = run("preset", "slice1d:nz=10,nt=10", "-o", "cli_nan_x.h5", NULL);
    assert_code(r, 0);
    h5_set("cli_nan_x.h5", "/pulse/b1", 10, 2, 7, 1, 1e200);
    r = run("eval", "cli_in.h5", "--x", "cli_nan_x.h5", "--backend", "cpu", "-o", "cli_nan_eval.h5",
            NULL);
    assert_code(r, 4);
    assert_contains(r->err, "is not finite");
    assert_false(file_exists("cli_nan_eval.h5"));
    r = run("design", "cli_nan_x.h5", "--backend", "cpu", "-o", "cli_nan_r.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_nan_x.h5: /pulse/b1: b1: the start pulse's peak 1e+200 G is outside");
    assert_false(file_exists("cli_nan_r.h5"));
    unlink("cli_nan_x.h5");
}

static void test_malformed_file(void **state)
{
    (void)state;
    FILE *f = fopen("cli_text.h5", "w");
    assert_non_null(f);
    fputs("plain text\n", f);
    fclose(f);
    run_result *r = run("eval", "cli_text.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_text.h5");
    assert_contains(r->err, "not an HDF5 file");

    r = run("preset", "slice1d:nz=20,nt=30", "-o", "cli_bad.h5", NULL);
    assert_code(r, 0);
    hid_t h = H5Fopen("cli_bad.h5", H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(h >= 0);
    assert_true(H5Ldelete(h, "/spins/target", H5P_DEFAULT) >= 0);
    H5Fclose(h);
    r = run("eval", "cli_bad.h5", "-o", "cli_bad_eval.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "/spins/target");
    assert_false(file_exists("cli_bad_eval.h5"));
    r = run("design", "cli_bad.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "/spins/target");
}

static void test_info(void **state)
{
    (void)state;
    run_result *r = run("info", NULL);
    assert_code(r, 0);
    assert_contains(r->out, "persolve ");
    assert_contains(r->out, "CUDA ");
    assert_contains(r->out, "OpenMP ");
    int no_gpu = strstr(r->out, "no GPU: the CPU backend will run") != NULL;
    int gpu = strstr(r->out, "GPU 0 ") != NULL;
    assert_true(no_gpu != gpu);

    r = run("info", "--json", NULL);
    assert_code(r, 0);
    assert_contains(r->out, "\"gpus\": [");

    if (no_gpu) {
        /* --backend gpu without a GPU: backend unavailable */
        r = run("design", "slice1d:nz=20,nt=20", "--backend", "gpu", "-o",
                "cli_gpu.h5", NULL);
        assert_code(r, 5);
        assert_contains(r->err, "gpu");
        r = run("design", "slice1d:nz=20,nt=20", "--backend", "gpu", "--json",
                "-o", "cli_gpu.h5", NULL);
        assert_code(r, 5);
        assert_true(json_number(r->out, "status") == PS_ERR_NO_GPU);
        assert_contains(r->out, "\"output\": null");
        assert_false(file_exists("cli_gpu.h5"));
        r = run("eval", "slice1d:nz=20,nt=20", "--backend", "gpu", "-o",
                "cli_gpu.h5", NULL);
        assert_code(r, 5);
    }
}

/* ---- bench ----------------------------------------------------------- */

static void test_bench(void **state)
{
    (void)state;
    run_result *r = run("bench", "--help", NULL);
    assert_code(r, 0);
    assert_contains(r->out, "usage: persolve bench");
    assert_contains(r->out, "--sizes");
    assert_contains(r->out, "--iters");
    assert_contains(r->out, "--repeats");
    assert_contains(r->out, "--json FILE");
    assert_contains(r->out, "host loop");
    assert_contains(r->out, "graph");
    assert_contains(r->out, "spiral2d:n=256,nt=5000");
    r = run("--help", NULL);
    assert_contains(r->out, "bench");

    r = run("bench", "--iters", "0", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--iters: '0'");
    r = run("bench", "--sizes", "S,,M", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--sizes");
    r = run("bench", "--json", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--json: missing value");
    /* an unknown size name: the names are listed */
    r = run("bench", "--backend", "cpu", "--sizes", "S,Q", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "'Q' is neither a file");
    assert_contains(r->err, "--sizes takes the sizes S, M, L, T, P, U, SG, MG, PG");

    /* the CPU row runs everywhere */
    unlink("cli_bench_cpu.json");
    r = run("bench", "--backend", "cpu", "--sizes", "spiral2d:n=8,nt=40", "--iters", "3",
            "--repeats", "1", "--json", "cli_bench_cpu.json", NULL);
    assert_code(r, 0);
    assert_contains(r->out, "spiral2d:n=8,nt=40");
    assert_contains(r->out, "cpu");
    assert_true(file_exists("cli_bench_cpu.json"));
    char json[CAP];
    slurp("cli_bench_cpu.json", json, sizeof json);
    assert_contains(json, "\"command\": ");
    assert_contains(json, "\"date\": ");
    assert_contains(json, "\"variant\": \"cpu\"");
    assert_true(json_number(json, "iterations") == 3);

    r = run("info", NULL);
    int gpu = strstr(r->out, "GPU 0 ") != NULL;
    r = run("bench", "--sizes", "spiral2d:n=8,nt=40", "--iters", "3", "--repeats", "1", "--json",
            "cli_bench.json", NULL);
    if (!gpu) {
        /* no GPU: auto benchmarks the CPU backend, saying why; --backend
         * gpu is "backend unavailable" */
        assert_code(r, 0);
        assert_contains(r->err, "no usable GPU");
        assert_contains(r->err, "the CPU backend alone (--backend auto)");
        assert_contains(r->out, "none (GPU variants skipped)");
        slurp("cli_bench.json", json, sizeof json);
        assert_contains(json, "\"variant\": \"cpu\"");
        r = run("bench", "--backend", "gpu", "--sizes", "spiral2d:n=8,nt=40", NULL);
        assert_code(r, 5);
        assert_contains(r->err, "no usable GPU");
        assert_contains(r->err, "--backend cpu");
        assert_string_equal(r->out, "");
        return;
    }
    assert_code(r, 0);
    assert_contains(r->out, "persistent");
    assert_contains(r->out, "host loop");
    assert_contains(r->out, "graph");
    assert_false(strstr(r->out, " NO") != NULL); /* same iterates */
    slurp("cli_bench.json", json, sizeof json);
    assert_contains(json, "\"gpu\": \"");
    assert_contains(json, "\"same_iterates\": true");
    assert_false(strstr(json, "\"same_iterates\": false") != NULL);
}

/* ---- tune ------------------------------------------------------------ */

static void test_tune(void **state)
{
    (void)state;
    run_result *r = run("tune", "--help", NULL);
    assert_code(r, 0);
    assert_contains(r->out, "usage: persolve tune");
    assert_contains(r->out, "--no-write");
    assert_contains(r->out, "--no-cache");
    assert_contains(r->out, "XDG_CACHE_HOME");
    assert_contains(r->out, "exits 6");
    r = run("--help", NULL);
    assert_contains(r->out, "tune [PRESET|FILE]");
    assert_contains(r->out, "  6 ");
    r = run("design", "--help", NULL);
    assert_contains(r->out, "--gpu-config BLOCK,SB,REGS[,BPS]");
    assert_contains(r->out, "--no-tune-cache");

    r = run("tune", "--iters", "0", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--iters: '0'");
    r = run("design", "slice1d", "--gpu-config", "100,8,64", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--gpu-config: block '100'");

    /* the launch-shape options change nothing on the CPU */
    r = run("design", "slice1d:nz=20,nt=20", "--backend", "cpu", "--max-iters", "3", "--json",
            "--no-tune-cache", "--gpu-config", "256,8,64,2", "-o", "cli_tune_design.h5", NULL);
    assert_code(r, 1);
    assert_true(json_number(r->out, "iterations") == 3);

    r = run("info", NULL);
    int gpu = strstr(r->out, "GPU 0 ") != NULL;
    unlink("cli_tune.json");
    r = run("tune", "spiral2d:n=8,nt=40", "--iters", "2", "--repeats", "1", "--json", "cli_tune.json",
            NULL);
    if (!gpu) {
        /* no GPU: auto measures the CPU backend's thread counts, saying why;
         * --backend gpu is exit 6, nothing written */
        assert_code(r, 0);
        assert_contains(r->err, "tune: no usable GPU");
        assert_contains(r->err, "the CPU backend's thread counts (--backend auto)");
        assert_contains(r->out, "(default)");
        assert_contains(r->out, "best:       --threads ");
        assert_contains(r->out, "cache:      none on the CPU");
        char json[CAP];
        slurp("cli_tune.json", json, sizeof json);
        assert_contains(json, "\"backend\": \"cpu\"");
        assert_true(json_number(json, "iterations") == 2);
        assert_true(json_number(json, "default_threads") >= 1);
        assert_true(json_number(json, "best_threads") >= 1);
        unlink("cli_tune.json");
        r = run("tune", "spiral2d:n=8,nt=40", "--backend", "gpu", "--json", "cli_tune.json", NULL);
        assert_code(r, 6);
        assert_contains(r->err, "no usable GPU");
        assert_contains(r->err, "--backend cpu measures the CPU backend's thread counts");
        assert_string_equal(r->out, "");
        assert_false(file_exists("cli_tune.json"));
        r = run("tune", "--batch", "4", "spiral2d:n=8,nt=40", NULL);
        assert_code(r, 6);
        assert_contains(r->err, "batch team shapes can only be measured on a GPU");
        r = run("tune", "--batch", "4", "spiral2d:n=8,nt=40", "--backend", "cpu", NULL);
        assert_code(r, 2);
        assert_contains(r->err, "tune --batch measures a GPU batch's team shapes: not with --backend cpu");
        /* --backend and --precision everywhere; info --backend gpu tells */
        r = run("info", "--backend", "gpu", NULL);
        assert_code(r, 5);
        assert_contains(r->err, "info --backend gpu: no usable GPU");
        assert_contains(r->out, "GPUs       none");
        r = run("info", "--backend", "cpu", "--precision", "double", NULL);
        assert_code(r, 0);
        r = run("preset", "slice1d:nz=10,nt=10", "-o", "cli_tune_p.h5", "--backend", "cpu",
                "--precision", "double", NULL);
        assert_code(r, 0);
        r = run("export", "cli_tune_p.h5", "--pulseq", "cli_tune_p.seq", "--backend", "cpu", NULL);
        assert_true(r->code == 0 || r->code == 3); /* the option is taken, whatever the export says */
        assert_null(strstr(r->err, "unknown or ambiguous option"));
        unlink("cli_tune_p.h5");
        unlink("cli_tune_p.seq");
        return;
    }
    /* with a GPU: the table, the best marked, the cache written (under
     * PERSOLVE_CACHE_DIR, see main) and read back by the next run */
    assert_code(r, 0);
    assert_contains(r->out, "ms/iter");
    assert_contains(r->out, "fit/SM");
    assert_contains(r->out, "best:");
    assert_contains(r->out, "cache:      written to cli_tune_cache/tune-");
    assert_true(file_exists("cli_tune.json"));
    char json[CAP];
    slurp("cli_tune.json", json, sizeof json);
    assert_contains(json, "\"cache_written\": true");
    assert_contains(json, "\"shapes\": [");
    assert_true(json_number(json, "best") >= 0);
    r = run("tune", "spiral2d:n=8,nt=40", "--iters", "2", "--repeats", "1", "--no-write", "--json",
            "cli_tune.json", NULL);
    assert_code(r, 0);
    assert_contains(r->out, "not written (--no-write)");
    slurp("cli_tune.json", json, sizeof json);
    assert_contains(json, "\"cache_written\": false");
    assert_true(json_number(json, "cached") >= 0); /* the first run's entry was read */
    r = run("design", "spiral2d:n=8,nt=40", "--backend", "gpu", "--max-iters", "2", "--json",
            "--gpu-config", "256,4,0,1", "-o", "cli_tune_design.h5", NULL);
    assert_code(r, 1);
    assert_contains(r->out, "x 256");
    assert_contains(r->out, "4 spins x 64 segments");
}

/* ---- several transmit channels ---------------------------------------- */

#define PC_NS 12
#define PC_NT 40
#define PC_NC 3

static void h5_put(hid_t loc, const char *name, int rank, const hsize_t *dims,
                   const double *data)
{
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t ds = H5Dcreate2(loc, name, H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(ds >= 0);
    assert_true(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(ds);
    H5Sclose(sp);
}

/*
 * A problem of PC_NC channels written by hand, as a user's script would:
 * spins on a line in x, a constant Gx, complex sensitivities that vary
 * over the line (/spins/b1map [Ns,Nc,2]), a 30 degree target and a small
 * start pulse per channel (/pulse/b1 [Nc,Nt,2]).
 */
static void write_channel_problem(const char *path)
{
    static double r[PC_NS * 3], target[PC_NS * 3], map[PC_NS * PC_NC * 2];
    static double g[PC_NT * 3], b1[PC_NC * PC_NT * 2];
    const double flip = 30.0 * M_PI / 180.0;
    for (int j = 0; j < PC_NS; j++) {
        const double x = -2.0 + 4.0 * j / (PC_NS - 1);
        r[3 * j] = x;
        r[3 * j + 1] = r[3 * j + 2] = 0.0;
        target[3 * j] = 0.0;
        target[3 * j + 1] = sin(flip);
        target[3 * j + 2] = cos(flip);
        for (int c = 0; c < PC_NC; c++) {
            const double a = (1.0 + 0.3 * c * x / 2.0) / PC_NC, ph = 2.0 * M_PI * c / PC_NC + 0.2 * x;
            map[(j * PC_NC + c) * 2] = a * cos(ph);
            map[(j * PC_NC + c) * 2 + 1] = a * sin(ph);
        }
    }
    for (int k = 0; k < PC_NT; k++) {
        g[3 * k] = 0.05;
        g[3 * k + 1] = g[3 * k + 2] = 0.0;
    }
    for (int c = 0; c < PC_NC; c++)
        for (int k = 0; k < PC_NT; k++) {
            b1[(c * PC_NT + k) * 2] = 0.01 * cos(2.0 * M_PI * c / PC_NC);
            b1[(c * PC_NT + k) * 2 + 1] = -0.01 * sin(2.0 * M_PI * c / PC_NC);
        }
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t spins = H5Gcreate2(f, "/spins", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t pulse = H5Gcreate2(f, "/pulse", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    h5_put(spins, "r", 2, (hsize_t[]){PC_NS, 3}, r);
    h5_put(spins, "target", 2, (hsize_t[]){PC_NS, 3}, target);
    h5_put(spins, "b1map", 3, (hsize_t[]){PC_NS, PC_NC, 2}, map);
    h5_put(pulse, "g", 2, (hsize_t[]){PC_NT, 3}, g);
    h5_put(pulse, "b1", 3, (hsize_t[]){PC_NC, PC_NT, 2}, b1);
    const double dt = 4e-6;
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "dt", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(H5Awrite(a, H5T_NATIVE_DOUBLE, &dt) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Gclose(pulse);
    H5Gclose(spins);
    H5Fclose(f);
}

/* Dataset `name` of `path` must be [PC_NC,PC_NT,2]; returns its data. */
static double *h5_read_channels(const char *path, const char *name)
{
    const hsize_t want[3] = {PC_NC, PC_NT, 2};
    return h5_read_n(path, name, 3, want);
}

/* "peak_b1": [a, b, c] of a JSON report must be max_k |b_ck| of rows b1
 * [PC_NC][PC_NT][2], exactly (the report prints 17 digits). */
static void check_peaks(const char *json, const double *b1)
{
    double got[PC_NC];
    json_numbers(json, "peak_b1", got, PC_NC);
    for (int c = 0; c < PC_NC; c++) {
        double want = 0.0;
        for (int k = 0; k < PC_NT; k++) {
            double a = hypot(b1[(c * PC_NT + k) * 2], b1[(c * PC_NT + k) * 2 + 1]);
            want = a > want ? a : want;
        }
        if (got[c] != want) {
            printf("peak_b1[%d] = %.17g, expected %.17g\n", c, got[c], want);
            fail();
        }
    }
}

static void test_channels(void **state)
{
    (void)state;
    const char *prob = "cli_pc.h5", *res = "cli_pc_r.h5", *ev = "cli_pc_e.h5";
    write_channel_problem(prob);
    unlink(res);
    unlink(ev);

    /* design on the CPU: the result's pulse in the problem's shape, each
     * channel's peak in the report */
    run_result *r = run("design", prob, "--backend", "cpu", "--max-iters", "5", "-o", res,
                        "--json", NULL);
    if (r->code != 0 && r->code != 1)
        printf("%s\n", r->err);
    assert_true(r->code == 0 || r->code == 1);
    assert_true(json_number(r->out, "channels") == PC_NC);
    assert_true(json_number(r->out, "nt") == PC_NT);
    double f0 = json_number(r->out, "f0"), f = json_number(r->out, "f");
    assert_true(f < f0);
    double *b1 = h5_read_channels(res, "/pulse/b1");
    check_peaks(r->out, b1);
    double *start = h5_read_channels(prob, "/pulse/b1");
    int moved = 0;
    for (int i = 0; i < PC_NC * PC_NT * 2; i++)
        moved |= b1[i] != start[i];
    assert_true(moved);
    free(start);
    free(h5_read(res, "/result/m", PC_NS, 3));

    /* the text summary has a line for the channels and their peaks */
    r = run("design", prob, "--backend", "cpu", "--max-iters", "2", "-o", "cli_pc_t.h5", NULL);
    assert_true(r->code == 0 || r->code == 1);
    assert_true(text_number(r->out, "channels ") == PC_NC);
    assert_contains(r->out, "peak |b1|    ");

    /* eval of the result: the gradient in the shape of /pulse/b1, F as the
     * design's, the same pulse's peaks */
    r = run("eval", res, "--backend", "cpu", "--json", "-o", ev, NULL);
    assert_code(r, 0);
    assert_true(json_number(r->out, "channels") == PC_NC);
    assert_true(json_number(r->out, "f") == f);
    check_peaks(r->out, b1);
    double *g = h5_read_channels(ev, "/eval/gradient");
    double s = 0.0;
    for (int i = 0; i < PC_NC * PC_NT * 2; i++)
        s += g[i] * g[i];
    double gn = json_number(r->out, "gnorm");
    assert_true(fabs(sqrt(s) - gn) <= 1e-12 * gn);
    free(g);
    free(h5_read_channels(ev, "/pulse/b1"));
    r = run("eval", res, "-o", ev, NULL);
    assert_code(r, 0);
    assert_true(text_number(r->out, "channels ") == PC_NC);

    /* --x: the problem at the result's pulse of three channels gives F */
    r = run("eval", prob, "--x", res, "--backend", "cpu", "--json", "-o", ev, NULL);
    assert_code(r, 0);
    assert_true(json_number(r->out, "f") == f);
    /* a pulse of one channel is refused, naming the dataset */
    r = run("preset", "slice1d:nz=10,nt=40", "-o", "cli_pc_1.h5", NULL);
    assert_code(r, 0);
    r = run("eval", prob, "--x", "cli_pc_1.h5", "-o", ev, NULL);
    assert_code(r, 3);
    assert_contains(r->err, "/pulse/b1");
    assert_contains(r->err, "got [40,2]");
    free(b1);
}

/* ---- local SAR: ptx2d:sar=1 ------------------------------------------- */

#define SAR_PROBLEM "ptx2d:n=16,nt=60,sar=1"
#define SAR_NC 8
#define SAR_NT 60
#define SAR_NQ 4

/* Every SAR_q of a JSON report within sar_max (1 + tol); returns the
 * largest SAR_q / sar_max. */
static double sar_ratio(const char *json)
{
    double sar[SAR_NQ];
    json_numbers(json, "sar", sar, SAR_NQ);
    double most = 0.0, sar_max = json_number(json, "sar_max");
    assert_true(sar_max > 0.0);
    for (int q = 0; q < SAR_NQ; q++)
        most = fmax(most, sar[q] / sar_max);
    return most;
}

/*
 * A small design under the SAR limit on the CPU: the start pulse violates
 * it (twice sar_max), the solve ends within sar_max (1 + 1e-3) after more
 * than one penalty round, and the report, the result file's
 * /result/constraints and its history's round column say so.
 */
static void test_sar_design(void **state)
{
    (void)state;
    const char *res = "cli_sar_r.h5";
    unlink(res);
    /* the start pulse: SAR above the limit */
    run_result *r = run("eval", SAR_PROBLEM, "--backend", "cpu", "--json", "-o", "cli_sar_e0.h5",
                        NULL);
    assert_code(r, 0);
    assert_true(json_number(r->out, "nq") == SAR_NQ);
    double x0_ratio = sar_ratio(r->out);
    printf("x0: largest SAR_q / sar_max = %.9g\n", x0_ratio);
    assert_true(fabs(x0_ratio - 2.0) < 1e-9);

    r = run("design", SAR_PROBLEM, "--backend", "cpu", "--threads", "2", "-o", res, "--json",
            NULL);
    double status = json_number(r->out, "status"), rounds = json_number(r->out, "rounds");
    double mu = json_number(r->out, "mu"), viol = json_number(r->out, "violation");
    double ratio = sar_ratio(r->out);
    printf("%s: status %g, %g rounds, mu %g, violation %.3g, largest SAR_q / sar_max %.9g\n",
           SAR_PROBLEM, status, rounds, mu, viol, ratio);
    assert_code(r, 0);
    assert_true(status == PS_CONVERGED || status == PS_CONVERGED_FTOL);
    assert_true(rounds >= 2);
    /* mu0 = the loss's scale (the spins: weights 1), x10 a round */
    const double ns = json_number(r->out, "ns");
    assert_true(ns > 0 && mu == ns * pow(10.0, rounds - 1));
    assert_true(ratio <= 1.0 + 1e-3);
    assert_true(viol <= 1e-3);
    assert_true(fabs(viol - fmax(0.0, ratio - 1.0)) <= 1e-12);
    assert_true(json_number(r->out, "channels") == SAR_NC);
    assert_contains(r->out, "\"b1_max\": null");

    /* /result/constraints: the report's numbers, the limit */
    double sar[SAR_NQ], peak[SAR_NC];
    json_numbers(r->out, "sar", sar, SAR_NQ);
    json_numbers(r->out, "peak_b1", peak, SAR_NC);
    double *fsar = h5_read_n(res, "/result/constraints/sar", 1, (hsize_t[]){SAR_NQ});
    double *fpeak = h5_read_n(res, "/result/constraints/peak_b1", 1, (hsize_t[]){SAR_NC});
    for (int q = 0; q < SAR_NQ; q++)
        assert_true(fsar[q] == sar[q]);
    for (int c = 0; c < SAR_NC; c++)
        assert_true(fpeak[c] == peak[c]);
    free(fsar);
    free(fpeak);
    assert_true(h5_attr(res, "/result/constraints/sar", "sar_max") == json_number(r->out, "sar_max"));
    assert_true(h5_attr(res, "/result/constraints", "rounds") == rounds);
    assert_true(h5_attr(res, "/result/constraints", "mu") == mu);
    assert_true(h5_attr(res, "/result/constraints", "violation") == viol);
    hid_t f = H5Fopen(res, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    assert_false(H5Lexists(f, "/result/constraints/b1_max", H5P_DEFAULT) > 0);
    H5Fclose(f);

    /* the history's round column: from 0, never down, ending at rounds - 1 */
    size_t rows = 0;
    double *h = h5_history(res, &rows);
    assert_true(rows == (size_t)json_number(r->out, "iterations") + 1);
    assert_true(h[6] == 0.0);
    for (size_t i = 1; i < rows; i++)
        if (h[HIST_COLS * i + 6] < h[HIST_COLS * (i - 1) + 6]) {
            printf("history round goes down at row %zu\n", i);
            fail();
        }
    assert_true(h[HIST_COLS * (rows - 1) + 6] == rounds - 1);
    free(h);

    /* the result is a problem file of the same limit: its eval reports the
     * same SAR values */
    r = run("eval", res, "--json", "-o", "cli_sar_e1.h5", NULL);
    assert_code(r, 0);
    double esar[SAR_NQ];
    json_numbers(r->out, "sar", esar, SAR_NQ);
    for (int q = 0; q < SAR_NQ; q++)
        assert_true(esar[q] == sar[q]);

    /* the text summary: SAR per VOP and the rounds */
    r = run("design", SAR_PROBLEM, "--backend", "cpu", "--max-iters", "3", "-o", "cli_sar_t.h5",
            NULL);
    assert_code(r, 1);
    assert_contains(r->out, "SAR          ");
    assert_contains(r->out, "W/kg, sar_max ");
    const double trounds = text_number(r->out, "rounds ");
    assert_true(trounds >= 1 && text_number(r->out, "mu ") == ns * pow(10.0, trounds - 1));
    r = run("eval", res, "-o", "cli_sar_e1.h5", NULL);
    assert_code(r, 0);
    assert_contains(r->out, "SAR       ");
}

/* One light penalty round is not enough: the solve converges with the
 * SAR still above its limit, status 8, exit 1, and the result is written. */
static void test_sar_constraint_violated(void **state)
{
    (void)state;
    unlink("cli_sar_v.h5");
    run_result *r = run("design", SAR_PROBLEM, "--backend", "cpu", "--max-rounds", "1", "--penalty-mu",
                        "0.01", "-o", "cli_sar_v.h5", "--json", NULL);
    assert_code(r, 1);
    assert_true(json_number(r->out, "status") == PS_CONSTRAINT_VIOLATED);
    assert_true(json_number(r->out, "exit_code") == 1);
    assert_true(json_number(r->out, "rounds") == 1);
    const double ns = json_number(r->out, "ns"); /* the loss's scale: weights 1 */
    assert_true(ns > 0 && json_number(r->out, "mu") == 0.01 * ns);
    double viol = json_number(r->out, "violation");
    assert_true(viol > 1e-3);
    assert_true(fabs(viol - (sar_ratio(r->out) - 1.0)) <= 1e-12);
    assert_true(h5_attr("cli_sar_v.h5", "/result", "status") == PS_CONSTRAINT_VIOLATED);
    /* a looser tolerance and a heavier first round are taken */
    r = run("design", SAR_PROBLEM, "--backend", "cpu", "--max-rounds", "1", "--penalty-mu",
            "10", "--constraint-tol", "0.05", "-o", "cli_sar_v.h5", "--json", NULL);
    assert_true(json_number(r->out, "mu") == 10 * ns);
    printf("mu %g, tol 0.05: violation %g\n", 10 * ns, json_number(r->out, "violation"));
    assert_true(json_number(r->out, "violation") < viol);
}

/* The penalty options: parsed, checked with the option named, documented. */
static void test_sar_options(void **state)
{
    (void)state;
    static const char *const bad[][3] = {
        {"--max-rounds", "0", "--max-rounds: '0' is not an integer in 1..64"},
        {"--max-rounds", "65", "--max-rounds: '65'"},
        {"--max-rounds", "2.5", "--max-rounds: '2.5'"},
        {"--constraint-tol", "0", "--constraint-tol: '0' is not a positive number"},
        {"--constraint-tol", "-1e-3", "--constraint-tol: '-1e-3'"},
        {"--constraint-tol", "nan", "--constraint-tol: 'nan'"},
        {"--penalty-mu", "0", "--penalty-mu: '0' is not a positive number"},
        {"--penalty-mu", "inf", "--penalty-mu: 'inf'"},
        {"--penalty-mu", "1e999", "--penalty-mu: '1e999'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        run_result *r = run("design", SAR_PROBLEM, bad[i][0], bad[i][1], "-o", "cli_never.h5",
                            NULL);
        assert_code(r, 2);
        assert_contains(r->err, bad[i][2]);
    }
    assert_false(file_exists("cli_never.h5"));
    run_result *r = run("design", SAR_PROBLEM, "--max-rounds", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--max-rounds: missing value");
    r = run("design", "--help", NULL);
    assert_code(r, 0);
    assert_contains(r->out, "--max-rounds N");
    assert_contains(r->out, "--constraint-tol X");
    assert_contains(r->out, "--penalty-mu X");
    assert_contains(r->out, "still violated after the last penalty round");
    r = run("preset", "--help", NULL);
    assert_contains(r->out, "sar=1");
}

/*
 * The problem written by `persolve preset` is the preset's: a checkpoint
 * of the spec's run resumes on the file (the same problem hash), to the
 * run never stopped.
 */
static void test_sar_file_resume(void **state)
{
    (void)state;
    const char *prob = "cli_sar_p.h5";
    unlink("cli_sar_ck.bin");
    run_result *r = run("preset", SAR_PROBLEM, "-o", prob, NULL);
    assert_code(r, 0);
    assert_contains(r->out, "4 VOPs");
    free(h5_read_n(prob, "/sar/vop", 4, (hsize_t[]){SAR_NQ, SAR_NC, SAR_NC, 2}));
    assert_true(h5_attr(prob, "/sar/vop", "tr") == 0.01);
    r = run("design", SAR_PROBLEM, "--backend", "cpu", "--max-iters", "40", "-o",
            "cli_sar_ref.h5", "--quiet", NULL);
    assert_code(r, 1);
    r = run("design", SAR_PROBLEM, "--backend", "cpu", "--max-iters", "15", "--checkpoint",
            "cli_sar_ck.bin", "-o", "cli_sar_1.h5", "--quiet", NULL);
    assert_code(r, 1);
    r = run("design", prob, "--backend", "cpu", "--max-iters", "40", "--resume",
            "cli_sar_ck.bin", "-o", "cli_sar_2.h5", "--quiet", NULL);
    assert_code(r, 1);
    size_t ra = 0, rb = 0;
    double *ha = h5_history("cli_sar_ref.h5", &ra), *hb = h5_history("cli_sar_2.h5", &rb);
    assert_true(ra == 41 && rb == 41);
    for (size_t i = 0; i < HIST_COLS * ra; i++)
        if (i % HIST_COLS != 5 && memcmp(&ha[i], &hb[i], sizeof(double)) != 0) {
            printf("history [%zu][%zu] differs: %.17g vs %.17g\n", i / HIST_COLS,
                   i % HIST_COLS, ha[i], hb[i]);
            fail();
        }
    free(ha);
    free(hb);
    const hsize_t dims[3] = {SAR_NC, SAR_NT, 2};
    double *pa = h5_read_n("cli_sar_ref.h5", "/pulse/b1", 3, dims);
    double *pb = h5_read_n("cli_sar_2.h5", "/pulse/b1", 3, dims);
    assert_int_equal(memcmp(pa, pb, SAR_NC * SAR_NT * 2 * sizeof(double)), 0);
    free(pa);
    free(pb);
    /* another penalty setting than the checkpoint's: refused, named */
    r = run("design", prob, "--backend", "cpu", "--resume", "cli_sar_ck.bin", "--penalty-mu",
            "10", "-o", "cli_sar_x.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "penalty_mu");
}

/* ---- gradient design, dF/dG and the RF mask --------------------------- */

#define GD_SPEC "spiral2d:n=8,nt=200,design_g=xy,smax=15000,gmax=4,g_end=1"
#define GD_NT 200

/* The string attribute `name` of object `obj` of path into buf[len]. */
static void h5_attr_string(const char *path, const char *obj, const char *name, char *buf,
                           size_t len)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t a = H5Aopen_by_name(f, obj, name, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0);
    hid_t t = H5Aget_type(a);
    assert_int_equal(H5Tget_class(t), H5T_STRING);
    /* written fixed-length: the text in the attribute, not in the heap */
    assert_true(H5Tis_variable_str(t) == 0);
    size_t n = H5Tget_size(t);
    char *v = calloc(n + 1, 1);
    assert_non_null(v);
    assert_true(H5Aread(a, t, v) >= 0);
    snprintf(buf, len, "%s", v);
    free(v);
    H5Tclose(t);
    H5Aclose(a);
    H5Fclose(f);
}

/* Replace the root attribute `name` of path by the string v, fixed-length
 * or (vlen) variable-length, as h5py writes a str: its text in the
 * file's global heap. */
static void h5_put_attr_string(const char *path, const char *name, const char *v, int vlen)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    if (H5Aexists(f, name) > 0)
        H5Adelete(f, name);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, vlen ? H5T_VARIABLE : strlen(v) + 1);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0 && H5Awrite(a, t, vlen ? (const void *)&v : (const void *)v) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    H5Fclose(f);
}

static void h5_set_attr_string(const char *path, const char *name, const char *v)
{
    h5_put_attr_string(path, name, v, 0);
}

/* |a - b| <= rtol |b| */
static void assert_close(const char *what, double a, double b, double rtol)
{
    if (!(fabs(a - b) <= rtol * fabs(b))) {
        printf("%s: %.17g, expected %.17g (rtol %g)\n", what, a, b, rtol);
        fail();
    }
}

static void test_gradient_design(void **state)
{
    (void)state;
    const char *prob = "cli_gd.h5", *res = "cli_gd_r.h5";
    unlink(res);
    run_result *r = run("preset", GD_SPEC, "-o", prob, NULL);
    assert_code(r, 0);
    assert_contains(r->out, "gradient xy designed");
    char axes[16];
    h5_attr_string(prob, "/", "design_g", axes, sizeof axes);
    assert_string_equal(axes, "xy");
    assert_true(h5_attr(prob, "/", "smax") == 15000.0);
    assert_true(h5_attr(prob, "/", "gmax") == 4.0);
    assert_true(h5_attr(prob, "/", "g_end") == 1.0);
    const double dt = h5_attr(prob, "/", "dt");
    double *g0 = h5_read(prob, "/pulse/g", GD_NT, 3);

    r = run("design", prob, "--backend", "cpu", "--max-iters", "20", "--json", "-o", res, NULL);
    assert_true(r->code == 0 || r->code == 1);
    assert_contains(r->out, "\"design_g\": \"xy\"");
    assert_contains(r->out, "\"g_end\": true");
    assert_true(json_number(r->out, "gmax") == 4.0);
    assert_true(json_number(r->out, "smax") == 15000.0);
    assert_true(json_number(r->out, "rf_free_steps") == GD_NT);
    double peak[2], slew[2], end[2];
    json_numbers(r->out, "peak_g", peak, 2);
    json_numbers(r->out, "peak_slew", slew, 2);
    json_numbers(r->out, "end_g", end, 2);
    /* the designed x and y in /pulse/g, z the problem's; the report is theirs */
    double *g = h5_read(res, "/pulse/g", GD_NT, 3);
    double moved = 0.0;
    for (int a = 0; a < 2; a++) {
        double v[3];
        tu_waveform_values(g + a, GD_NT, 3, dt, v);
        printf("axis %d: max |g| %g, max slew %g, |g(T)| %g\n", a, v[0], v[1], v[2]);
        assert_close("peak_g", peak[a], v[0], 1e-15);
        assert_close("peak_slew", slew[a], v[1], 1e-15);
        assert_close("end_g", end[a], v[2], 1e-15);
        assert_true(v[0] > 0.0 && v[1] > 0.0 && v[1] < 15000.0);
        for (size_t k = 0; k < GD_NT; k++)
            moved = fmax(moved, fabs(g[3 * k + a] - g0[3 * k + a]));
    }
    assert_true(moved > 1e-6); /* the design moved the waveforms */
    for (size_t k = 0; k < GD_NT; k++)
        assert_true(g[3 * k + 2] == g0[3 * k + 2]);
    double *fpeak = h5_read_n(res, "/result/constraints/peak_g", 1, (const hsize_t[]){2});
    double *fslew = h5_read_n(res, "/result/constraints/peak_slew", 1, (const hsize_t[]){2});
    double *fend = h5_read_n(res, "/result/constraints/end_g", 1, (const hsize_t[]){2});
    for (int a = 0; a < 2; a++)
        assert_true(fpeak[a] == peak[a] && fslew[a] == slew[a] && fend[a] == end[a]);
    assert_true(h5_attr(res, "/result/constraints/peak_g", "gmax") == 4.0);
    assert_true(h5_attr(res, "/result/constraints/peak_slew", "smax") == 15000.0);
    assert_true(h5_attr(res, "/result/constraints/end_g", "g_end") == 1.0);
    assert_true(h5_attr(res, "/result/constraints", "rf_free_steps") == GD_NT);
    h5_attr_string(res, "/result/constraints", "design_g", axes, sizeof axes);
    assert_string_equal(axes, "xy");
    free(fpeak);
    free(fslew);
    free(fend);

    /* the text summary says the same */
    r = run("design", prob, "--backend", "cpu", "--max-iters", "20", "-o", "cli_gd_t.h5", NULL);
    assert_contains(r->out, "gradient     xy designed");
    assert_contains(r->out, "max |g|      ");
    assert_contains(r->out, "gmax 4 G/cm");
    assert_contains(r->out, "smax 1.5e+04 G/cm/s");
    assert_contains(r->out, "g_end: to return to 0");
    assert_contains(r->out, "rounds       ");

    /* eval at the result, its waveforms included (--x) */
    r = run("eval", prob, "--x", res, "-o", "cli_gd_e.h5", "--json", NULL);
    assert_code(r, 0);
    double *ge = h5_read("cli_gd_e.h5", "/pulse/g", GD_NT, 3);
    assert_int_equal(memcmp(ge, g, 3 * GD_NT * sizeof *g), 0);
    double epeak[2];
    json_numbers(r->out, "peak_g", epeak, 2);
    assert_true(epeak[0] == peak[0] && epeak[1] == peak[1]);
    free(h5_read("cli_gd_e.h5", "/eval/gradient_g", GD_NT, 3));
    free(ge);
    free(g);
    free(g0);

    /* malformed design attributes and keys are named */
    h5_set_attr_string(prob, "design_g", "yx");
    r = run("design", prob, "--backend", "cpu", "-o", "cli_gd_x.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "attribute design_g: 'yx'");
    r = run("eval", "spiral2d:n=8,nt=20,design_g=xy", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "smax is missing: design_g needs the slew-rate limit");
    r = run("preset", "slice1d:design_g=q,smax=1e4", "-o", "cli_gd_x.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "design_g='q'");
}

/* /eval/gradient_g of a problem whose gradient is fixed (two channels, a
 * start pulse that tips the spins, so that G turns them): dF/dG_k against
 * central differences of F in G, the file's /pulse/g moved by +-h. */
static void test_eval_gradient_g(void **state)
{
    (void)state;
    const char *prob = "cli_gg.h5";
    const size_t nt = 40;
    run_result *r = run("preset", "ptx2d:n=8,nc=2,nt=40", "-o", prob, NULL);
    assert_code(r, 0);
    r = run("eval", prob, "--backend", "cpu", "--precision", "double", "-o", "cli_gg_e.h5", NULL);
    assert_code(r, 0);
    double *gg = h5_read("cli_gg_e.h5", "/eval/gradient_g", nt, 3);
    double scale = 0.0;
    for (size_t k = 0; k < nt; k++) {
        assert_true(gg[3 * k + 2] == 0.0); /* every spin at z = 0 */
        scale = fmax(scale, fmax(fabs(gg[3 * k]), fabs(gg[3 * k + 1])));
    }
    printf("max |dF/dG| %g\n", scale);
    assert_true(scale > 1e-3);
    double *g = h5_read(prob, "/pulse/g", nt, 3);
    static const size_t at[4][2] = {{0, 0}, {13, 1}, {27, 0}, {39, 1}};
    const double h = 1e-4;
    for (int i = 0; i < 4; i++) {
        const size_t k = at[i][0], a = at[i][1];
        double f[2];
        for (int side = 0; side < 2; side++) {
            h5_set(prob, "/pulse/g", nt, 3, k, a, g[3 * k + a] + (side ? -h : h));
            r = run("eval", prob, "--backend", "cpu", "--precision", "double", "-o",
                    "cli_gg_d.h5", NULL);
            assert_code(r, 0);
            f[side] = text_number(r->out, "F ");
        }
        h5_set(prob, "/pulse/g", nt, 3, k, a, g[3 * k + a]);
        const double ref = (f[0] - f[1]) / (2.0 * h), got = gg[3 * k + a];
        printf("dF/dG[%zu][%zu]: %.10g, central difference %.10g\n", k, a, got, ref);
        if (!(fabs(got - ref) <= 1e-4 * fabs(ref) + 1e-6 * scale))
            fail();
    }
    free(g);
    free(gg);
}

/* An RF mask in a problem file: the design holds the masked steps at zero
 * and keeps the mask in its result; a bad mask is named. */
static void test_rf_mask(void **state)
{
    (void)state;
    const char *prob = "cli_mask.h5", *res = "cli_mask_r.h5";
    const size_t nt = 40;
    run_result *r = run("preset", "slice1d:nz=30,nt=40", "-o", prob, NULL);
    assert_code(r, 0);
    double mask[40];
    for (size_t k = 0; k < nt; k++)
        mask[k] = k < 6 || k >= 36 ? 0.0 : 1.0;
    hid_t f = H5Fopen(prob, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    const hsize_t dims[1] = {nt};
    h5_put(f, "/pulse/rf_mask", 1, dims, mask);
    H5Fclose(f);

    r = run("design", prob, "--backend", "cpu", "--max-iters", "5", "--json", "-o", res, NULL);
    assert_true(r->code == 0 || r->code == 1);
    assert_true(json_number(r->out, "rf_free_steps") == 30);
    assert_contains(r->out, "\"design_g\": null");
    double *m = h5_read_n(res, "/pulse/rf_mask", 1, dims);
    assert_int_equal(memcmp(m, mask, sizeof mask), 0);
    free(m);
    assert_true(h5_attr(res, "/result/constraints", "rf_free_steps") == 30);
    double *b1 = h5_read(res, "/pulse/b1", nt, 2);
    double inside = 0.0;
    for (size_t k = 0; k < nt; k++) {
        if (mask[k] == 0.0)
            assert_true(b1[2 * k] == 0.0 && b1[2 * k + 1] == 0.0);
        else
            inside = fmax(inside, fabs(b1[2 * k]));
    }
    assert_true(inside > 0.0);
    free(b1);
    r = run("eval", res, "-o", "cli_mask_e.h5", NULL);
    assert_code(r, 0);
    assert_contains(r->out, "RF free   30 of 40 steps");
    assert_null(strstr(r->err, "rf_mask holds"));
    /* a pulse (--x) with RF at held steps: evaluated and written with them zero */
    r = run("preset", "slice1d:nz=30,nt=40", "-o", "cli_mask_free.h5", NULL);
    assert_code(r, 0);
    r = run("eval", prob, "--x", "cli_mask_free.h5", "-o", "cli_mask_e2.h5", NULL);
    assert_code(r, 0);
    assert_contains(r->err, "warning: the pulse has RF at");
    assert_contains(r->err, "of the 10 samples (steps x channels) that /pulse/rf_mask holds at zero");
    b1 = h5_read("cli_mask_e2.h5", "/pulse/b1", nt, 2);
    double *b1free = h5_read("cli_mask_free.h5", "/pulse/b1", nt, 2);
    for (size_t k = 0; k < nt; k++) {
        assert_true(b1[2 * k] == (mask[k] == 0.0 ? 0.0 : b1free[2 * k]));
        assert_true(b1[2 * k + 1] == (mask[k] == 0.0 ? 0.0 : b1free[2 * k + 1]));
    }
    free(b1);
    free(b1free);

    mask[3] = 0.5;
    f = H5Fopen(prob, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t ds = H5Dopen2(f, "/pulse/rf_mask", H5P_DEFAULT);
    assert_true(ds >= 0 && H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, mask) >= 0);
    H5Dclose(ds);
    H5Fclose(f);
    r = run("design", prob, "--backend", "cpu", "-o", "cli_mask_x.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "/pulse/rf_mask: rf_mask[3] = 0.5 must be 0 or 1");
}

/* ---- reliability: broken inputs, failing outputs, silent cases ------- */

/* Attribute `name` of the object obj of path set to the float64 v. */
static void h5_set_attr_double(const char *path, const char *obj, const char *name, double v)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t o = H5Oopen(f, obj, H5P_DEFAULT);
    assert_true(o >= 0);
    if (H5Aexists(o, name) > 0)
        H5Adelete(o, name);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(o, name, H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0 && H5Awrite(a, H5T_NATIVE_DOUBLE, &v) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Oclose(o);
    H5Fclose(f);
}

/* Link `from` of path moved to `to`, or removed (to NULL). */
static void h5_move(const char *path, const char *from, const char *to)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    if (to)
        assert_true(H5Lmove(f, from, f, to, H5P_DEFAULT, H5P_DEFAULT) >= 0);
    else
        assert_true(H5Ldelete(f, from, H5P_DEFAULT) >= 0);
    H5Fclose(f);
}

/* The message is one line, "persolve: ..." (no HDF5 error stack). */
static void assert_one_line(const char *err)
{
    const char *nl = strchr(err, '\n');
    if (strncmp(err, "persolve: ", 10) != 0 || !nl || nl[1] != '\0' ||
        strstr(err, "HDF5-DIAG")) {
        printf("expected one line \"persolve: ...\"\n");
        fail();
    }
}

static void test_corrupt_string_heap(void **state)
{
    (void)state;
    /* the issue's file: a variable-length loss whose global heap collection
     * has the byte at "GCOL" + 27 overwritten; libhdf5 crashes reading it */
    run_result *r = run("preset", "slice1d:nz=30,nt=40", "-o", "cli_heap.h5", NULL);
    assert_code(r, 0);
    h5_put_attr_string("cli_heap.h5", "loss", "full", 1);
    long n = file_size("cli_heap.h5");
    assert_true(n > 0 && n < (1L << 30));
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    FILE *f = fopen("cli_heap.h5", "rb");
    assert_true(f && fread(b, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    long at = -1;
    for (long i = 0; i + 4 <= n && at < 0; i++)
        if (!memcmp(b + i, "GCOL", 4))
            at = i;
    assert_true(at >= 0 && at + 27 < n);
    b[at + 27] = 0x7f;
    f = fopen("cli_heap.h5", "wb");
    assert_true(f && fwrite(b, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    free(b);
    r = run("eval", "cli_heap.h5", "-o", "cli_heap_eval.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_heap.h5: corrupt file");
#ifndef __SANITIZE_ADDRESS__
    assert_one_line(r->err);
#else
    /* AddressSanitizer reports libhdf5's bad read in the reading process
     * first; persolve's own message is still the one last line */
    assert_one_line(strstr(r->err, "persolve: cli_heap.h5: corrupt file"));
#endif
    r = run("design", "cli_heap.h5", "--max-iters", "1", "-o", "cli_heap_r.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "corrupt file");
    assert_false(file_exists("cli_heap_r.h5"));
    /* what persolve writes has its strings in the attributes themselves */
    r = run("preset", "slice1d:nz=30,nt=40", "-o", "cli_heap.h5", NULL);
    n = file_size("cli_heap.h5");
    assert_true(n > 0);
    b = malloc(n > 0 ? (size_t)n : 1);
    f = fopen("cli_heap.h5", "rb");
    n = (long)fread(b, 1, (size_t)n, f);
    fclose(f);
    for (long i = 0; i + 4 <= n; i++)
        assert_true(memcmp(b + i, "GCOL", 4) != 0);
    free(b);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A file on which libhdf5 loops (fuzz_eval's heap attack, seed 6): the
 * reading process is killed at the time limit, and a signal while it
 * reads ends persolve at once. */
static void test_reader_loops(void **state)
{
    (void)state;
    if (!fuzz_exe) {
        skip();
        return;
    }
    pid_t w;
    const char *const gen[] = {"--write", "heap", "6", "cli_loop.h5", NULL};
    const char *argv[8] = {fuzz_exe};
    for (int i = 0; gen[i]; i++)
        argv[i + 1] = gen[i];
    assert_int_equal(posix_spawn(&w, fuzz_exe, NULL, NULL, (char *const *)argv, environ), 0);
    assert_int_equal(wait_code(w), 0);
    const double t0 = now_s();
    run_result *r = run("eval", "cli_loop.h5", "-o", "cli_loop_eval.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_loop.h5: corrupt file: reading it did not finish within 10 s");
    assert_true(now_s() - t0 < 30.0);
    /* SIGTERM while the design reads it: exit 130 at once, nothing written */
    unlink("cli_loop_r.h5");
    const char *args[] = {"design", "cli_loop.h5", "-o", "cli_loop_r.h5", NULL};
    pid_t pid = spawn_cli(args);
    sleep_s(1.0);
    const double t1 = now_s();
    kill(pid, SIGTERM);
    int code = wait_bounded(pid, 5.0);
    r = malloc(sizeof *r);
    collect(r, code, args);
    assert_code(r, 130);
    assert_true(now_s() - t1 < 5.0);
    assert_contains(r->err, "reading cancelled");
    assert_false(file_exists("cli_loop_r.h5"));
    free(r);
}

static void test_special_inputs(void **state)
{
    (void)state;
    /* a FIFO, a directory, a device: refused before they are opened (a
     * FIFO's open would block for ever) */
    unlink("cli_fifo");
    assert_int_equal(mkfifo("cli_fifo", 0644), 0);
    run_result *r = run("design", "cli_fifo", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_fifo: cannot open: is a FIFO, not a regular file");
    r = run("eval", "cli_fifo", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "is a FIFO");
    r = run("eval", "/dev/zero", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "is a character device");
    r = run("eval", ".", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "is a directory");
    r = run("preset", "slice1d:nz=30,nt=40", "-o", "cli_sp.h5", NULL);
    assert_code(r, 0);
    r = run("eval", "cli_sp.h5", "--x", "cli_fifo", "-o", "cli_sp_eval.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "--x: cli_fifo: cannot open: is a FIFO");
    r = run("design", "cli_sp.h5", "--resume", "cli_fifo", "-o", "cli_sp_r.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_fifo: cannot read checkpoint: not a regular file");
    unlink("cli_fifo");
}

static void test_output_unwritable(void **state)
{
    (void)state;
    /* a file size limit stands for a full disk (RLIMIT_FSIZE, no root
     * needed): the write fails with EFBIG, persolve (which ignores
     * SIGXFSZ) reports it in one line, exits 3 and leaves the old file and
     * no temporary one */
    FILE *f = fopen("cli_full.h5", "w");
    assert_non_null(f);
    fputs("old contents", f);
    fclose(f);
    struct rlimit old, small;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    small = old;
    small.rlim_cur = 16384;
    void (*prev)(int) = signal(SIGXFSZ, SIG_DFL);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    run_result *r = run("preset", "slice1d", "-o", "cli_full.h5", NULL);
    int code_preset = r->code;
    static char err_preset[CAP];
    memcpy(err_preset, r->err, CAP);
    r = run("design", "slice1d", "--max-iters", "2", "-o", "cli_full.h5", NULL);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    assert_int_equal(code_preset, 3);
    assert_contains(err_preset, "cli_full.h5: cannot write: File too large");
    assert_one_line(err_preset);
    assert_code(r, 3);
    assert_contains(r->err, "cli_full.h5: cannot write: File too large");
    assert_contains(r->out, "output       (not written)");
    char buf[64];
    slurp("cli_full.h5", buf, sizeof buf);
    assert_string_equal(buf, "old contents");
    assert_false(prefix_exists("cli_full.h5.tmp"));
    unlink("cli_full.h5");
}

static void test_export_refusals(void **state)
{
    (void)state;
    /* a pulse longer than an exported file may hold: refused before any
     * array is sized (dt = 2.3e13 s made the gradient count 2^61, whose
     * byte count wrapped to 0; dt = 1e100 past size_t) */
    run_result *r = run("preset", "spiral2d:n=2,nt=1,dt=23058430115195.371", "-o", "cli_exl.h5", NULL);
    assert_code(r, 0);
    r = run("export", "cli_exl.h5", "--pulseq", "cli_exl.seq", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "is longer than the 16.7772 s");
    assert_one_line(r->err);
    /* (a dt past size_t is refused as a problem: its rotation per G overflows) */
    r = run("preset", "spiral2d:n=2,nt=10,dt=1e100", "-o", "cli_exl.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "dt = 1e+100 s");
    assert_contains(r->err, "the rotation a step per G");
    unlink("cli_exl.h5");

    /* destinations: never a symbolic link, a FIFO or the input itself */
    r = run("preset", "spiral2d:n=4,nt=20", "-o", "cli_ex.h5", NULL);
    assert_code(r, 0);
    unlink("cli_ex_fifo");
    unlink("cli_ex_lnk");
    assert_int_equal(mkfifo("cli_ex_fifo", 0644), 0);
    assert_int_equal(symlink("cli_ex_target", "cli_ex_lnk"), 0);
    r = run("export", "cli_ex.h5", "--pulseq", "cli_ex_fifo", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_ex_fifo: cannot write: not a regular file");
    r = run("export", "cli_ex.h5", "--pulseq", "cli_ex_lnk", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_ex_lnk: cannot write: is a symbolic link");
    r = run("export", "cli_ex.h5", "--pulseq", "cli_ex.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "--pulseq cli_ex.h5: is the input result file");
    struct stat sb;
    assert_int_equal(lstat("cli_ex_fifo", &sb), 0);
    assert_true(S_ISFIFO(sb.st_mode));
    assert_int_equal(lstat("cli_ex_lnk", &sb), 0);
    assert_true(S_ISLNK(sb.st_mode));
    char head[9];
    slurp("cli_ex.h5", head, sizeof head); /* the input is still an HDF5 file */
    assert_memory_equal(head, "\x89HDF\r\n\x1a\n", 8);
    r = run("export", "cli_ex.h5", "--pulseq", "cli_ex.seq", NULL);
    assert_code(r, 0);
    unlink("cli_ex.seq");
    unlink("cli_ex_fifo");
    unlink("cli_ex_lnk");
    unlink("cli_ex.h5");
}

static void test_unknown_names(void **state)
{
    (void)state;
    run_result *r = run("preset", "slice1d:nz=30,nt=40,b1_max=0.2", "-o", "cli_names.h5", NULL);
    assert_code(r, 0);
    /* /spins/T1: no T1 relaxation; b1max: no peak limit, silently */
    double t1[30];
    for (int i = 0; i < 30; i++)
        t1[i] = 0.5;
    hid_t fh = H5Fopen("cli_names.h5", H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(fh >= 0);
    h5_put(fh, "/spins/T1", 1, (const hsize_t[]){30}, t1);
    assert_true(H5Arename(fh, "b1_max", "b1max") >= 0);
    H5Fclose(fh);
    r = run("eval", "cli_names.h5", "-o", "cli_names_eval.h5", NULL);
    assert_code(r, 0);
    assert_contains(r->err, "persolve: warning: cli_names.h5: /spins/T1: unknown dataset, "
                            "ignored (the closest known name is /spins/t1)");
    assert_contains(r->err, "attribute b1max: unknown attribute, ignored (the closest known "
                            "name is b1_max)");
    r = run("eval", "cli_names.h5", "--strict", "-o", "cli_names_eval.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "unknown dataset (the closest known name is /spins/t1) (--strict)");
    r = run("design", "cli_names.h5", "--strict", "--max-iters", "1", "-o", "cli_names_r.h5",
            NULL);
    assert_code(r, 3);
    assert_false(file_exists("cli_names_r.h5"));
}

static void test_bad_limits_and_types(void **state)
{
    (void)state;
    run_result *r = run("preset", "slice1d:nz=30,nt=40", "-o", "cli_lim.h5", NULL);
    assert_code(r, 0);
    /* b1_max = Inf (or a corrupted value reading so) is no "no limit" */
    h5_set_attr_double("cli_lim.h5", "/", "b1_max", INFINITY);
    r = run("eval", "cli_lim.h5", "-o", "cli_lim_eval.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "attribute b1_max: inf is not a peak limit");
    h5_set_attr_double("cli_lim.h5", "/", "b1_max", -1.0);
    r = run("eval", "cli_lim.h5", "-o", "cli_lim_eval.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "attribute b1_max: -1 is not a peak limit");
    /* a transposed array is named as such */
    r = run("preset", "slice1d:nz=30,nt=40", "-o", "cli_lim.h5", NULL);
    double *rr = h5_read("cli_lim.h5", "/spins/r", 30, 3);
    double tr[90];
    for (int i = 0; i < 30; i++)
        for (int j = 0; j < 3; j++)
            tr[j * 30 + i] = rr[i * 3 + j];
    free(rr);
    h5_move("cli_lim.h5", "/spins/r", NULL);
    hid_t fh = H5Fopen("cli_lim.h5", H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(fh >= 0);
    h5_put(fh, "/spins/r", 2, (const hsize_t[]){3, 30}, tr);
    H5Fclose(fh);
    r = run("eval", "cli_lim.h5", "-o", "cli_lim_eval.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "/spins/r: wrong shape: expected [Ns,3], got [3,30] (it looks "
                            "transposed");
}

static void test_zero_start(void **state)
{
    (void)state;
    /* no /pulse/b1: a zero start, a stationary point of the mls loss */
    unlink("cli_zero_r.h5");
    run_result *r = run("preset", "slice1d:nz=30,nt=40", "-o", "cli_zero.h5", NULL);
    assert_code(r, 0);
    h5_move("cli_zero.h5", "/pulse/b1", NULL);
    h5_set_attr_string("cli_zero.h5", "loss", "mls");
    r = run("design", "cli_zero.h5", "-o", "cli_zero_r.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "the start pulse is zero and the gradient of F there is exactly "
                            "zero (a stationary point of the mls loss)");
    assert_false(file_exists("cli_zero_r.h5"));
    /* the full loss is not flat there: the solve runs */
    h5_set_attr_string("cli_zero.h5", "loss", "full");
    r = run("design", "cli_zero.h5", "--max-iters", "3", "-o", "cli_zero_r.h5", NULL);
    assert_true(r->code == 0 || r->code == 1);
    assert_true(text_number(r->out, "iterations") >= 1.0);
}

static void test_reports(void **state)
{
    (void)state;
    /* a peak limit that the result reaches: every step within it to the
     * last bit, and eval of the result does not warn */
    unlink("slice1d_nz=60_nt=80_b1_max=0.01_result.h5");
    run_result *r = run("design", "slice1d:nz=60,nt=80,b1_max=0.01", "--backend", BACKEND,
                        "--precision", "double", "--max-iters", "300", "--json", NULL);
    assert_true(r->code == 0 || r->code == 1);
    const char *res = "slice1d_nz=60_nt=80_b1_max=0.01_result.h5";
    assert_true(file_exists(res));
    double *b = h5_read(res, "/pulse/b1", 80, 2);
    double peak = 0.0;
    for (int k = 0; k < 80; k++)
        peak = fmax(peak, hypot(b[2 * k], b[2 * k + 1]));
    free(b);
    assert_true(peak <= 0.01);
    assert_true(peak > 0.0099); /* the limit is active: the clamp was needed */
    /* the test's norm is the optimizer's; |grad F| is reported as eval
     * computes it */
    double gphys = json_number(r->out, "gnorm_physical"), gtest = json_number(r->out, "gnorm");
    assert_contains(r->out, "\"gnorm_test\": \"optimizer's variables, reparametrized for "
                            "b1_max\"");
    assert_true(isfinite(gphys) && gphys != gtest);
    assert_close("/result gnorm_physical", h5_attr(res, "/result", "gnorm_physical"), gphys,
                 1e-15);
    r = run("eval", res, "--precision", "double", "--backend", BACKEND, "--json", "-o",
            "cli_rep_eval.h5", NULL);
    assert_code(r, 0);
    assert_null(strstr(r->err, "warning"));
    assert_close("eval's |grad F|", json_number(r->out, "gnorm"), gphys, 1e-9);
    /* provenance */
    char buf[4096], version[64];
    r = run("--version", NULL);
    assert_code(r, 0);
    assert_int_equal(sscanf(r->out, "persolve %63s", version), 1);
    h5_attr_string(res, "/result", "persolve_version", buf, sizeof buf);
    assert_string_equal(buf, version);
    h5_attr_string(res, "/result", "input", buf, sizeof buf);
    assert_string_equal(buf, "slice1d:nz=60,nt=80,b1_max=0.01");
    h5_attr_string(res, "/result", "options", buf, sizeof buf);
    assert_contains(buf, "max_iters=300");
    assert_contains(buf, "precision=double");
    h5_attr_string(res, "/result", "command_line", buf, sizeof buf);
    assert_contains(buf, "design slice1d:nz=60,nt=80,b1_max=0.01");
    h5_attr_string(res, "/result", "created", buf, sizeof buf);
    assert_int_equal(strlen(buf), 20);
    assert_true(buf[4] == '-' && buf[10] == 'T' && buf[19] == 'Z');
    h5_attr_string(res, "/result", "build_id", buf, sizeof buf);
    assert_true(strncmp(buf, version, strlen(version)) == 0);
    /* an eval file records the same on /eval, its |grad F| too */
    h5_attr_string("cli_rep_eval.h5", "/eval", "input", buf, sizeof buf);
    assert_string_equal(buf, res);
    h5_attr_string("cli_rep_eval.h5", "/eval", "options", buf, sizeof buf);
    assert_contains(buf, "precision=double");
    h5_attr_string("cli_rep_eval.h5", "/eval", "persolve_version", buf, sizeof buf);
    assert_string_equal(buf, version);
    assert_close("/eval gnorm_physical", h5_attr("cli_rep_eval.h5", "/eval", "gnorm_physical"),
                 gphys, 1e-9);
    unlink(res);
    /* a parameter that overflows is named so */
    r = run("eval", "spiral2d:n=8,nt=50,fov=1e308", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "a parameter overflows");
    assert_null(strstr(r->err, "neither a file"));
}

/* ---- batches: several problems in one design ---------------------------- */

/* Remove dir and the files directly in it. */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char path[4096];
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static size_t count_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The k-th (from 0) occurrence of the JSON number field "key" in s. */
static double json_number_at(const char *s, const char *key, int k)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = s;
    for (int i = 0; i <= k; i++) {
        p = strstr(p, pat);
        if (!p) {
            printf("no occurrence %d of \"%s\" in the JSON\n", k, key);
            fail();
        }
        if (i < k)
            p += strlen(pat);
    }
    return json_number(p, key);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

#define BATCH_A "slice1d:nz=60,nt=80"
#define BATCH_B "spiral2d:n=8,nt=100"

/*
 * Three problems (two presets and a file) in one batch: one result file
 * each, named by number and problem, each bit-identical to a solo design
 * of that problem at one thread; the JSON has one summary per problem and
 * the totals.
 */
static void test_batch_design(void **state)
{
    (void)state;
    remove_dir("cli_batch");
    run_result *r = run("preset", "inversion:ndf=11,nb1=2,nt=30", "-o", "cli_binv.h5", NULL);
    assert_code(r, 0);
    r = run("design", BATCH_A, BATCH_B, "cli_binv.h5", "--backend", "cpu", "--max-iters", "15",
            "--threads", "2", "-o", "cli_batch", "--json", NULL);
    assert_code(r, 1);
    assert_int_equal(count_files("cli_batch"), 3);
    assert_contains(r->out, "\"batch\": {");
    assert_contains(r->out, "\"output_dir\": \"cli_batch\"");
    assert_contains(r->out, "\"input\": \"" BATCH_B "\"");
    assert_contains(r->out, "\"output\": \"cli_batch/001_spiral2d_n=8_nt=100.h5\"");
    assert_true(json_number(r->out, "index") == 0);
    assert_true(json_number_at(r->out, "index", 2) == 2);
    assert_true(json_number_at(r->out, "problems", 1) == 3);
    assert_true(json_number(r->out, "not_converged") == 3);
    assert_true(json_number(r->out, "failed") == 0);
    assert_true(json_number_at(r->out, "exit_code", 3) == 1); /* the batch's */
    double iters = json_number_at(r->out, "iterations", 3);   /* summed */
    assert_true(iters == 45);

    static const struct {
        const char *input, *file;
        size_t nt;
    } solo[] = {
        {BATCH_A, "cli_batch/000_slice1d_nz=60_nt=80.h5", 80},
        {BATCH_B, "cli_batch/001_spiral2d_n=8_nt=100.h5", 100},
        {"cli_binv.h5", "cli_batch/002_cli_binv.h5", 30},
    };
    for (size_t i = 0; i < 3; i++) {
        unlink("cli_bsolo.h5");
        r = run("design", solo[i].input, "--backend", "cpu", "--max-iters", "15", "--threads",
                "1", "-o", "cli_bsolo.h5", "--quiet", NULL);
        assert_code(r, 1);
        assert_same_result("cli_bsolo.h5", solo[i].file, solo[i].nt);
        free(h5_read(solo[i].file, "/result/m", i == 0 ? 60 : i == 1 ? 64 : 22, 3));
        assert_true(h5_attr(solo[i].file, "/result", "iterations") == 15);
    }

    /* the text summary: a row per problem and the totals */
    r = run("design", BATCH_A, BATCH_B, "--backend", "cpu", "--max-iters", "3", "-o",
            "cli_batch", NULL);
    assert_code(r, 1);
    assert_contains(r->out, "max iterations");
    assert_contains(r->out, "cli_batch/000_slice1d_nz=60_nt=80.h5");
    assert_true(text_number(r->out, "problems ") == 2);
    assert_contains(r->out, "output       cli_batch");
    remove_dir("cli_batch");
}

static void test_batch_list_and_errors(void **state)
{
    (void)state;
    remove_dir("cli_blist");
    /* a byte order mark, CR LF line ends, blanks, comments */
    write_text("cli_blist.txt",
               "\xef\xbb\xbf# two problems\r\n\r\n  " BATCH_A "  \r\n# the second\n" BATCH_B);
    run_result *r = run("design", "--batch", "cli_blist.txt", "--backend", "cpu", "--max-iters",
                        "4", "-o", "cli_blist/sub", "--quiet", NULL);
    assert_code(r, 1);
    assert_int_equal(count_files("cli_blist/sub"), 2);
    assert_true(file_exists("cli_blist/sub/000_slice1d_nz=60_nt=80.h5"));
    assert_true(file_exists("cli_blist/sub/001_spiral2d_n=8_nt=100.h5"));
    remove_dir("cli_blist/sub");
    remove_dir("cli_blist");

    /* a bad line: its line number and the entry, nothing solved */
    write_text("cli_blist_bad.txt", BATCH_A "\n\n# comment\nnosuchpreset:n=3\n" BATCH_B "\n");
    r = run("design", "--batch", "cli_blist_bad.txt", "--backend", "cpu", "-o", "cli_blist", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_blist_bad.txt:4:");
    assert_contains(r->err, "nosuchpreset");
    assert_int_equal(count_files("cli_blist"), 0);
    remove_dir("cli_blist");

    /* several problems without -o DIR: each result where a solo design
     * writes it (NAME_result.h5 here); two of one name are refused */
    unlink("slice1d_nz=60_nt=80_result.h5");
    unlink("spiral2d_n=8_nt=100_result.h5");
    r = run("design", BATCH_A, BATCH_B, "--backend", "cpu", "--max-iters", "2", "--json", NULL);
    assert_code(r, 1);
    assert_contains(r->out, "\"output_dir\": null");
    assert_true(file_exists("slice1d_nz=60_nt=80_result.h5"));
    assert_true(file_exists("spiral2d_n=8_nt=100_result.h5"));
    unlink("slice1d_nz=60_nt=80_result.h5");
    unlink("spiral2d_n=8_nt=100_result.h5");
    r = run("design", BATCH_A, BATCH_B, BATCH_A, "--backend", "cpu", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "problems 0 and 2 would both write slice1d_nz=60_nt=80_result.h5: "
                            "give -o DIR");
    assert_false(file_exists("slice1d_nz=60_nt=80_result.h5"));
    /* -o a file; an empty list; a missing list */
    write_text("cli_bfile.h5", "not a directory");
    r = run("design", BATCH_A, BATCH_B, "-o", "cli_bfile.h5", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_bfile.h5: not a directory");
    write_text("cli_blist_empty.txt", "# nothing\n\n   \n");
    r = run("design", "--batch", "cli_blist_empty.txt", "-o", "cli_blist", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_blist_empty.txt: no problem");
    r = run("design", "--batch", "cli_blist_missing.txt", "-o", "cli_blist", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_blist_missing.txt");
    remove_dir("cli_blist");
    /* a checkpoint of a solo run is not a batch's */
    r = run("design", BATCH_A, "--backend", "cpu", "--max-iters", "2", "--checkpoint",
            "cli_bsolo.bin", "-o", "cli_bsolo2.h5", "--quiet", NULL);
    assert_code(r, 1);
    r = run("design", BATCH_A, BATCH_B, "--backend", "cpu", "--resume", "cli_bsolo.bin", "-o",
            "cli_blist", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_bsolo.bin");
    /* a result file or the checkpoint that would replace an input problem file */
    remove_dir("cli_bcol");
    mkdir("cli_bcol", 0755);
    r = run("preset", "slice1d:nz=20,nt=30", "-o", "cli_bcol/001_slice1d_nz=20_nt=30.h5", NULL);
    assert_code(r, 0);
    r = run("design", "cli_bcol/001_slice1d_nz=20_nt=30.h5", "slice1d:nz=20,nt=30", "-o",
            "cli_bcol", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "of problem 1 is the input problem file of problem 0");
    r = run("design", "cli_bcol/001_slice1d_nz=20_nt=30.h5", BATCH_A, "-o", "cli_bcol2",
            "--checkpoint", "cli_bcol/001_slice1d_nz=20_nt=30.h5", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "is the input problem file of problem 0");
    r = run("design", BATCH_A, BATCH_B, "-o", "cli_bcol2", "--checkpoint",
            "cli_bcol2/001_spiral2d_n=8_nt=100.h5", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "is also the result file of problem 1");
    assert_int_equal(count_files("cli_bcol"), 1);
    /* nor the list of problems; and a FIFO as the list is refused, not opened */
    FILE *lf = fopen("cli_bcol/list.txt", "w");
    assert_non_null(lf);
    fprintf(lf, "%s\n%s\n", BATCH_A, BATCH_B);
    fclose(lf);
    r = run("design", "--batch", "cli_bcol/list.txt", "-o", "cli_bcol2", "--checkpoint",
            "cli_bcol/list.txt", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--checkpoint cli_bcol/list.txt: is the list of problems (--batch)");
    assert_int_equal(mkfifo("cli_bcol/list.fifo", 0600), 0);
    r = run("design", "--batch", "cli_bcol/list.fifo", "-o", "cli_bcol2", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "--batch cli_bcol/list.fifo: cannot read: not a regular file");
    remove_dir("cli_bcol");
    remove_dir("cli_bcol2");
    r = run("design", "--help", NULL);
    assert_contains(r->out, "--batch LIST");
    assert_contains(r->out, "--team-blocks N");
    assert_contains(r->out, "NNN_NAME.h5");
    r = run("design", BATCH_A, BATCH_B, "--team-blocks", "x", "-o", "cli_blist", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--team-blocks: 'x'");
    remove_dir("cli_blist");
}

/* Runs long enough for a periodic checkpoint at 0.05 s to find the batch
 * running: on the GPU an iteration takes tens of us, so there the problems
 * of the signal tests (which run 30000 iterations without a line-search
 * failure at the solo shape; one may still end in one, exit 4, the same in
 * both runs) */
#ifdef PS_TEST_GPU
#define BCK_A SIG_PROBLEM
#define BCK_B "spiral2d:n=32,nt=1000,fov=20"
#define BCK_A_FILE "000_spiral2d_n=32_nt=1000.h5"
#define BCK_B_FILE "001_spiral2d_n=32_nt=1000_fov=20.h5"
#define BCK_A_NT 1000
#define BCK_B_NT 1000
#define BCK_ITERS "20000"
#else
/* about 0.5 s a problem on a fast core, without a line-search failure */
#define BCK_A "spiral2d:n=16,nt=300"
#define BCK_B "spiral2d:n=16,nt=300,fov=20"
#define BCK_A_FILE "000_spiral2d_n=16_nt=300.h5"
#define BCK_B_FILE "001_spiral2d_n=16_nt=300_fov=20.h5"
#define BCK_A_NT 300
#define BCK_B_NT 300
#define BCK_ITERS "400"
#endif

/*
 * A running batch's periodic checkpoint, its process killed (SIGKILL),
 * resumed in a new process: every result bit-identical to an
 * uninterrupted batch.
 */
static void test_batch_checkpoint_kill_resume(void **state)
{
    (void)state;
    remove_dir("cli_bck_ref");
    remove_dir("cli_bck");
    unlink("cli_bck.bin");
    run_result *r = run("design", BCK_A, BCK_B, "--backend", BACKEND, "--threads", "2",
                        "--max-iters", BCK_ITERS, "--gtol", "0", "--ftol", "0", "-o",
                        "cli_bck_ref", "--quiet", NULL);
    const int ref_code = r->code;
    assert_true(ref_code == 1 || ref_code == 4);
    const char *args[] = {"design", BCK_A, BCK_B, "--backend", BACKEND, "--threads", "2",
                          "--max-iters", BCK_ITERS, "--gtol", "0", "--ftol", "0", "-o", "cli_bck",
                          "--checkpoint", "cli_bck.bin", "--every", "0.05", "--quiet", NULL};
    pid_t pid = spawn_cli(args);
    int seen = 0, ws = 0, ended = 0;
    for (int i = 0; i < (int)(bound_s(10.0) * 1000) && !seen && !ended; i++) {
        sleep_s(0.001);
        seen = file_size("cli_bck.bin") > 0;
        ended = waitpid(pid, &ws, WNOHANG) == pid;
    }
    if (!ended) {
        kill(pid, SIGKILL);
        wait_code(pid);
    }
    assert_true(seen);
    assert_false(ended); /* killed while running */
    assert_int_equal(count_files("cli_bck"), 0);
    r = run("design", BCK_A, BCK_B, "--backend", BACKEND, "--threads", "2", "--max-iters",
            BCK_ITERS, "--gtol", "0", "--ftol", "0", "-o", "cli_bck", "--resume", "cli_bck.bin",
            "--json", NULL);
    assert_code(r, ref_code);
    assert_contains(r->out, "\"resumed_from\": \"cli_bck.bin\"");
    assert_same_result("cli_bck_ref/" BCK_A_FILE, "cli_bck/" BCK_A_FILE, BCK_A_NT);
    assert_same_result("cli_bck_ref/" BCK_B_FILE, "cli_bck/" BCK_B_FILE, BCK_B_NT);
    /* another problem list: refused */
    r = run("design", BCK_B, BCK_A, "--backend", BACKEND, "-o", "cli_bck", "--resume",
            "cli_bck.bin", NULL);
    assert_code(r, 3);
    assert_contains(r->err, "cli_bck.bin");
    r = run("design", BCK_A, BCK_B, BATCH_A, "--backend", BACKEND, "-o", "cli_bck", "--resume",
            "cli_bck.bin", NULL);
    assert_code(r, 3);
    remove_dir("cli_bck_ref");
    remove_dir("cli_bck");
}

/* a second problem as slow as SIG_PROBLEM, so both are running when the
 * signal comes */
#define SIG_PROBLEM_2 "spiral2d:n=32,nt=1000,fov=20"
#define SIG_FILE_2 "001_spiral2d_n=32_nt=1000_fov=20.h5"

/* Ctrl-C cancels every problem and still writes every result (exit 130). */
static void test_batch_sigint(void **state)
{
    (void)state;
    remove_dir("cli_bint");
    const char *args[] = {"design", SIG_PROBLEM, SIG_PROBLEM_2, "--backend", BACKEND, SIG_OPTS
                          "--max-iters", LONG_ITERS, "--gtol", "0", "--ftol", "0", "-o",
                          "cli_bint", "--json", NULL};
    pid_t pid = spawn_cli(args);
    sleep_s(0.5);
    kill(pid, SIGINT);
    int code = wait_bounded(pid, bound_s(10.0));
    run_result *r = malloc(sizeof *r);
    collect(r, code, args);
    assert_code(r, 130);
#ifdef PS_TEST_GPU
    /* fast there: a problem may have ended in a line-search failure first */
    assert_true(json_number(r->out, "cancelled") >= 1);
#else
    assert_true(json_number(r->out, "cancelled") == 2);
    assert_true(h5_attr("cli_bint/" SIG_FILE_2, "/result", "status") ==
                PS_CANCELLED);
#endif
    assert_true(h5_attr("cli_bint/000_spiral2d_n=32_nt=1000.h5", "/result", "status") ==
                PS_CANCELLED);
    free(h5_read("cli_bint/" SIG_FILE_2, "/result/m", 32 * 32, 3));
    free(r);
    remove_dir("cli_bint");
}

/* On a terminal: the aggregate progress line of a batch. */
static void test_batch_progress_on_terminal(void **state)
{
    (void)state;
    remove_dir("cli_btty");
    const char *args[] = {"design", BCK_A, BCK_B, "--max-iters", "60", "--backend", "cpu",
                          "--threads", "2", "-o", "cli_btty", NULL};
    int code = -1;
    const char *tty = run_on_terminal(args, &code);
    assert_true(code == 0 || code == 1);
    assert_non_null(strstr(tty, "\r  problems "));
    assert_non_null(strstr(tty, "/2 done"));
    assert_non_null(strstr(tty, " running, "));
    assert_non_null(strstr(tty, " paused, "));
    assert_non_null(strstr(tty, " queued"));
    assert_non_null(strstr(tty, "slowest iter "));
    assert_non_null(strstr(tty, "\r\033[K")); /* cleared before the summary */
    run_result *r = malloc(sizeof *r);
    slurp(OUT_FILE, r->out, sizeof r->out);
    assert_null(strstr(r->out, "slowest iter")); /* progress never on stdout */
    assert_non_null(strstr(r->out, "output       cli_btty"));
    free(r);
    remove_dir("cli_btty");
}

static void test_bench_batch(void **state)
{
    (void)state;
    unlink("cli_bbench.json");
    /* long enough (about 0.1 s a variant) for the batch to be seen running */
    run_result *r = run("bench", "--batch", "3", "spiral2d:n=16,nt=200", "--backend", "cpu",
                        "--iters", "15", "--repeats", "1", "--threads", "1", "--json",
                        "cli_bbench.json", NULL);
    assert_code(r, 0);
    assert_contains(r->out, "batch ");
    assert_contains(r->out, "sequence ");
    assert_contains(r->out, "concurrent ");
    assert_contains(r->out, "spin-steps/s");
    assert_null(strstr(r->out, " no\n")); /* at one thread: the same iterates */
    char json[CAP];
    slurp("cli_bbench.json", json, sizeof json);
    assert_contains(json, "\"variant\": \"batch\"");
    assert_contains(json, "\"same_iterates_as_batch\": true");
    assert_true(json_number(json, "copies") == 3);
    assert_true(json_number_at(json, "evaluations", 0) > 0);
    assert_true(json_number_at(json, "spin_steps_per_second", 1) > 0);
    assert_true(json_number_at(json, "batch_speedup", 2) > 0);

    /* --variants: the others are reported as not run */
    unlink("cli_bbench.json");
    r = run("bench", "--batch", "2", "spiral2d:n=16,nt=200", "--backend", "cpu", "--iters", "5", "--repeats",
            "1", "--threads", "1", "--variants", "batch,sequence", "--json", "cli_bbench.json", NULL);
    assert_code(r, 0);
    assert_contains(r->out, "not run (--variants)");
    assert_contains(r->out, "spin-steps/s");
    slurp("cli_bbench.json", json, sizeof json);
    assert_contains(json, "\"variant\": \"concurrent\", \"what\": \"N solo solves started together\", "
                          "\"skipped\": true, \"ran\": false");
    assert_contains(json, "\"same_iterates_as_batch\": true"); /* the sequence's */
    r = run("bench", "--batch", "2", "S", "--variants", "all", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--variants: 'all'");

    r = run("bench", "--batch", "3", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "missing SIZE");
    r = run("bench", "--batch", "0", "S", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--batch: '0'");
    r = run("bench", "S", NULL);
    assert_code(r, 2);
    assert_contains(r->err, "--batch N");
    r = run("bench", "--help", NULL);
    assert_contains(r->out, "--batch N SIZE");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH_TO_PERSOLVE\n", argv[0]);
        return 2;
    }
    persolve_exe = argv[1];
    fuzz_exe = argc > 2 ? argv[2] : NULL;
    /* the tune cache of these runs: its own, never the user's */
    setenv("PERSOLVE_CACHE_DIR", "cli_tune_cache", 1);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
#ifdef PS_TEST_GPU
    if (!strstr(run("info", NULL)->out, "GPU 0 ")) {
        printf("no usable GPU: skipping\n");
        return 77;
    }
    const struct CMUnitTest gpu_tests[] = {
        cmocka_unit_test(test_design_checkpoint_resume),
        cmocka_unit_test(test_design_checkpoint_stored),
        cmocka_unit_test(test_design_checkpoint_corrupt),
        cmocka_unit_test(test_design_sigint),
        cmocka_unit_test(test_design_stop_continue),
        cmocka_unit_test(test_design_checkpoint_every),
        cmocka_unit_test(test_batch_checkpoint_kill_resume),
        cmocka_unit_test(test_batch_sigint),
    };
    return cmocka_run_group_tests(gpu_tests, NULL, NULL);
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_and_version),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_unknown_preset),
        cmocka_unit_test(test_preset_and_eval),
        cmocka_unit_test(test_design_json),
        cmocka_unit_test(test_design_text_default_output),
        cmocka_unit_test(test_design_cancel),
        cmocka_unit_test(test_progress_on_terminal),
        cmocka_unit_test(test_design_checkpoint_resume),
        cmocka_unit_test(test_design_checkpoint_stored),
        cmocka_unit_test(test_design_checkpoint_corrupt),
        cmocka_unit_test(test_design_sigint),
        cmocka_unit_test(test_design_stop_continue),
        cmocka_unit_test(test_design_checkpoint_every),
        cmocka_unit_test(test_malformed_file),
        cmocka_unit_test(test_output_paths),
        cmocka_unit_test(test_eval_b1max_warning),
        cmocka_unit_test(test_channels),
        cmocka_unit_test(test_sar_design),
        cmocka_unit_test(test_sar_constraint_violated),
        cmocka_unit_test(test_sar_options),
        cmocka_unit_test(test_sar_file_resume),
        cmocka_unit_test(test_gradient_design),
        cmocka_unit_test(test_eval_gradient_g),
        cmocka_unit_test(test_rf_mask),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_bench),
        cmocka_unit_test(test_tune),
        cmocka_unit_test(test_corrupt_string_heap),
        cmocka_unit_test(test_special_inputs),
        cmocka_unit_test(test_reader_loops),
        cmocka_unit_test(test_output_unwritable),
        cmocka_unit_test(test_export_refusals),
        cmocka_unit_test(test_unknown_names),
        cmocka_unit_test(test_bad_limits_and_types),
        cmocka_unit_test(test_zero_start),
        cmocka_unit_test(test_reports),
        cmocka_unit_test(test_batch_design),
        cmocka_unit_test(test_batch_list_and_errors),
        cmocka_unit_test(test_batch_checkpoint_kill_resume),
        cmocka_unit_test(test_batch_sigint),
        cmocka_unit_test(test_batch_progress_on_terminal),
        cmocka_unit_test(test_bench_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
