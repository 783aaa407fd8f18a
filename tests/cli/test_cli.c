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

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>

#include "persolve.h"

extern char **environ;

static const char *persolve_exe;

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

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, OUT_FILE,
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path,
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    int e = posix_spawn(&pid, persolve_exe, &fa, NULL, (char *const *)argv,
                        environ);
    posix_spawn_file_actions_destroy(&fa);
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

/* Value of a JSON number field "key": v in s (flat objects only). */
static double json_number(const char *s, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(s, pat);
    if (!p) {
        printf("no \"%s\" in the JSON\n", key);
        fail();
    }
    p += strlen(pat);
    char *end = NULL;
    double v = strtod(p, &end);
    if (end == p) {
        printf("\"%s\" is not a number\n", key);
        fail();
    }
    return v;
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

/* Dataset `name` of `path` must have shape [d0,d1]; returns its data. */
static double *h5_read(const char *path, const char *name, hsize_t d0,
                       hsize_t d1)
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
    hsize_t dims[2] = {0, 0};
    int rank = H5Sget_simple_extent_ndims(sp);
    H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    double *buf = NULL;
    if (rank == 2 && dims[0] == d0 && dims[1] == d1) {
        buf = malloc((size_t)(d0 * d1) * sizeof(double));
        if (H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
            free(buf);
            buf = NULL;
        }
    } else {
        printf("%s %s: shape [%llu,%llu], expected [%llu,%llu]\n", path, name,
               (unsigned long long)dims[0], (unsigned long long)dims[1],
               (unsigned long long)d0, (unsigned long long)d1);
    }
    H5Dclose(ds);
    H5Fclose(f);
    assert_non_null(buf);
    return buf;
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
    double *h = h5_read("cli_r.h5", "/result/history", (hsize_t)iters + 1, 6);
    assert_true(h[0] == 0.0 && h[1] == f0);
    assert_true(h[6 * (size_t)iters + 1] == f);
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
    unlink("slice1d_result.h5");
    run_result *r = run("design", "slice1d:nz=40,nt=50", "--max-iters", "3",
                        "--backend", "cpu", "--precision", "double", NULL);
    assert_true(r->code == 0 || r->code == 1);
    assert_contains(r->out, "status");
    assert_contains(r->out, "iterations   ");
    assert_contains(r->out, "fell back    no");
    assert_contains(r->out, "double precision");
    assert_contains(r->out, "output       slice1d_result.h5");
    assert_true(file_exists("slice1d_result.h5"));
    assert_null(strstr(r->err, "iter ")); /* no progress line off a terminal */

    unlink("slice1d_result.h5");
    r = run("design", "slice1d:nz=40,nt=50", "--max-iters", "2", "--quiet", NULL);
    assert_true(r->code == 0 || r->code == 1);
    assert_string_equal(r->out, "");
    assert_true(file_exists("slice1d_result.h5"));

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

static void test_progress_on_terminal(void **state)
{
    (void)state;
    /* stderr on a pseudo-terminal: the live progress line appears */
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    assert_true(master >= 0);
    assert_int_equal(grantpt(master), 0);
    assert_int_equal(unlockpt(master), 0);
    const char *slave = ptsname(master);
    assert_non_null(slave);
    /* the CPU backend: live progress from the GPU kernel comes with the
     * asynchronous API (the host-control issue) */
    const char *args[] = {"design", "slice1d:nz=100,nt=200", "--max-iters", "20",
                          "--backend", "cpu", "-o", "cli_tty.h5", NULL};
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
    int code = wait_code(pid);
    close(master);
    printf("terminal: %zu bytes\n", n);
    assert_true(code == 0 || code == 1);
    assert_non_null(strstr(tty, "\r  iter      0   f "));
    assert_non_null(strstr(tty, "|g| "));
    assert_non_null(strstr(tty, "evals "));
    assert_non_null(strstr(tty, "\r\033[K")); /* cleared before the summary */
    run_result *r = malloc(sizeof *r);
    slurp(OUT_FILE, r->out, sizeof r->out);
    assert_non_null(strstr(r->out, "output       cli_tty.h5"));
    assert_null(strstr(r->out, "iter ")); /* progress never on stdout */
    free(r);
}

/* ---- malformed input, info -------------------------------------------- */

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
        /* no GPU: a clear message and "backend unavailable" */
        assert_code(r, 5);
        assert_contains(r->err, "no usable GPU");
        assert_contains(r->err, "--backend cpu");
        assert_string_equal(r->out, "");
        r = run("bench", "--backend", "gpu", NULL);
        assert_code(r, 5);
        assert_contains(r->err, "no usable GPU");
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

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH_TO_PERSOLVE\n", argv[0]);
        return 2;
    }
    persolve_exe = argv[1];
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_and_version),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_unknown_preset),
        cmocka_unit_test(test_preset_and_eval),
        cmocka_unit_test(test_design_json),
        cmocka_unit_test(test_design_text_default_output),
        cmocka_unit_test(test_design_cancel),
        cmocka_unit_test(test_progress_on_terminal),
        cmocka_unit_test(test_malformed_file),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_bench),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
