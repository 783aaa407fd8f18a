/*
 * HDF5 files (docs/file-format.md): problem round trip with every optional
 * dataset, result and eval files read back with the HDF5 API, and malformed
 * files, each of which must give an error naming the dataset (or the file)
 * and leave no HDF5 handle open.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "common/memory.h"
#include "io/h5io.h"
#include "opt/checkpoint.h"
#include "persolve.h"
#include "test_util.h"

#define NS 7
#define NT 5

/* Arrays of a problem with every optional field set. */
typedef struct full_problem {
    double r[NS * 3], target[NS * 3], df[NS], b1scale[NS], w[NS], m0[NS * 3];
    double t1[NS], t2[NS], g[NT * 3], b1[NT * 2];
    ps_problem_desc d;
} full_problem;

static void make_full(full_problem *fp, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < NS * 3; i++) {
        fp->r[i] = tu_uniform(&s, -2, 2);
        fp->target[i] = tu_uniform(&s, -1, 1);
        fp->m0[i] = tu_uniform(&s, -1, 1);
    }
    for (size_t j = 0; j < NS; j++) {
        fp->df[j] = tu_uniform(&s, -100, 100);
        fp->b1scale[j] = tu_uniform(&s, 0.8, 1.2);
        fp->w[j] = tu_uniform(&s, 0.0, 2.0);
        fp->t1[j] = tu_uniform(&s, 0.5, 2.0);
        fp->t2[j] = tu_uniform(&s, 0.01, 0.2);
    }
    for (size_t k = 0; k < NT * 3; k++)
        fp->g[k] = tu_uniform(&s, -1, 1);
    for (size_t k = 0; k < NT * 2; k++)
        fp->b1[k] = tu_uniform(&s, -0.05, 0.05);
    ps_problem_desc *d = &fp->d;
    ps_problem_desc_init(d);
    d->ns = NS;
    d->nt = NT;
    d->r = fp->r;
    d->target = fp->target;
    d->df = fp->df;
    d->b1scale = fp->b1scale;
    d->w = fp->w;
    d->m0 = fp->m0;
    d->t1 = fp->t1;
    d->t2 = fp->t2;
    d->g = fp->g;
    d->b1 = fp->b1;
    d->dt = 4e-6;
    d->gamma_bar = 4200.5;
    d->lambda = 0.125;
    d->loss = PS_LOSS_MLS;
    d->b1_max = 0.3;
}

/* No HDF5 object (file, dataset, group, attribute, type) left open. */
static void assert_no_open_handles(void)
{
    ssize_t n = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
    if (n != 0)
        printf("open HDF5 objects: %zd\n", n);
    assert_int_equal(n, 0);
}

static void assert_same(const double *a, const double *b, size_t n,
                        const char *what)
{
    if (!a || !b) {
        printf("%s: %s is NULL\n", what, a ? "read" : "written");
        fail();
    }
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&a[i], &b[i], sizeof(double)) != 0) {
            printf("%s[%zu]: %.17g != %.17g\n", what, i, a[i], b[i]);
            fail();
        }
    }
}

/* The error message must contain `needle`. */
static void assert_msg(const char *msg, const char *needle)
{
    if (!strstr(msg, needle)) {
        printf("message \"%s\" does not contain \"%s\"\n", msg, needle);
        fail();
    }
}

static ps_problem *create_full(full_problem *fp, uint64_t seed)
{
    make_full(fp, seed);
    ps_problem *p = NULL;
    assert_int_equal(ps_problem_create(&fp->d, &p), PS_CONVERGED);
    assert_non_null(p);
    return p;
}

/* Write p to path, then free it. */
static void write_and_free(const char *path, ps_problem *p)
{
    char err[512];
    int st = ps_h5_write_problem(path, p, err, sizeof err);
    if (st)
        printf("%s\n", err);
    assert_int_equal(st, 0);
    ps_problem_free(p);
}

/* Write p to path (kept). */
static void write_kept(const char *path, const ps_problem *p)
{
    char err[512];
    int st = ps_h5_write_problem(path, p, err, sizeof err);
    if (st)
        printf("%s\n", err);
    assert_int_equal(st, 0);
    assert_no_open_handles();
}

/* Write the full problem to path. */
static void write_full(const char *path)
{
    full_problem fp;
    write_and_free(path, create_full(&fp, 42));
}

/* Read path, expect success. */
static void expect_read_ok(const char *path)
{
    char err[512];
    ps_problem *p = NULL;
    int st = ps_h5_read_problem(path, &p, err, sizeof err);
    if (st)
        printf("%s -> %d: %s\n", path, st, err);
    assert_int_equal(st, 0);
    assert_non_null(p);
    ps_problem_free(p);
    assert_no_open_handles();
}

/* Read path, expect status `want` and a message containing both needles. */
static void expect_read_error(const char *path, int want, const char *n1,
                              const char *n2)
{
    char err[512];
    memset(err, 'x', sizeof err);
    ps_problem *p = (ps_problem *)(uintptr_t)1;
    int st = ps_h5_read_problem(path, &p, err, sizeof err);
    printf("%s -> %d: %s\n", path, st, err);
    assert_int_equal(st, want);
    assert_null(p);
    assert_msg(err, path);
    if (n1)
        assert_msg(err, n1);
    if (n2)
        assert_msg(err, n2);
    assert_no_open_handles();
}

/* ---- round trips ---------------------------------------------------- */

static herr_t append_attr_name(hid_t loc, const char *name,
                               const H5A_info_t *info, void *user)
{
    (void)loc;
    (void)info;
    char *list = user;
    size_t n = strlen(list);
    snprintf(list + n, 256 - n, "%s%s", n ? "," : "", name);
    return 0;
}

/* The root attributes of path in the order they are stored. */
static void stored_root_attrs(const char *path, char list[256])
{
    list[0] = '\0';
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    hsize_t idx = 0;
    assert_true(H5Aiterate2(f, H5_INDEX_NAME, H5_ITER_NATIVE, &idx,
                            append_attr_name, list) >= 0);
    H5Fclose(f);
}

static void test_roundtrip_full(void **state)
{
    (void)state;
    const char *path = "io_full.h5";
    full_problem fp;
    char err[512];
    ps_problem *p = create_full(&fp, 7);
    assert_int_equal(ps_h5_write_problem(path, p, err, sizeof err), 0);
    assert_no_open_handles();

    ps_problem *q = NULL;
    int st = ps_h5_read_problem(path, &q, err, sizeof err);
    if (st)
        printf("%s\n", err);
    assert_int_equal(st, 0);
    assert_no_open_handles();

    ps_problem_desc a, b;
    assert_int_equal(ps_problem_describe(p, &a), 0);
    assert_int_equal(ps_problem_describe(q, &b), 0);
    assert_int_equal(b.ns, NS);
    assert_int_equal(b.nt, NT);
    assert_same(b.r, a.r, NS * 3, "r");
    assert_same(b.target, a.target, NS * 3, "target");
    assert_same(b.df, a.df, NS, "df");
    assert_same(b.b1scale, a.b1scale, NS, "b1scale");
    assert_same(b.w, a.w, NS, "w");
    assert_same(b.m0, a.m0, NS * 3, "m0");
    assert_same(b.t1, a.t1, NS, "t1");
    assert_same(b.t2, a.t2, NS, "t2");
    assert_same(b.g, a.g, NT * 3, "g");
    assert_same(b.b1, a.b1, NT * 2, "b1");
    /* and against the source arrays, not only the library's copy */
    assert_same(b.df, fp.df, NS, "df (source)");
    assert_same(b.b1, fp.b1, NT * 2, "b1 (source)");
    assert_true(b.dt == 4e-6);
    assert_true(b.gamma_bar == 4200.5);
    assert_true(b.lambda == 0.125);
    assert_true(b.b1_max == 0.3);
    assert_int_equal(b.loss, PS_LOSS_MLS);
    /* the attributes in the order files have always had them */
    char attrs[256];
    stored_root_attrs(path, attrs);
    printf("root attributes: %s\n", attrs);
    assert_string_equal(attrs, "dt,gamma_bar,lambda,loss,b1_max");

    /* the start pulse as the solver sees it */
    double x0[2 * NT], x1[2 * NT], xr[2 * NT];
    tu_poison(xr, 2 * NT);
    assert_int_equal(ps_problem_x0(p, x0), 0);
    assert_int_equal(ps_problem_x0(q, x1), 0);
    assert_same(x1, x0, 2 * NT, "x0");
    assert_int_equal(ps_h5_read_pulse(path, 1, NT, xr, err, sizeof err), 0);
    for (size_t k = 0; k < NT; k++) {
        assert_true(xr[k] == fp.b1[2 * k]);
        assert_true(xr[NT + k] == fp.b1[2 * k + 1]);
    }
    assert_no_open_handles();
    ps_problem_free(q);
    ps_problem_free(p);
}

static void test_roundtrip_minimal(void **state)
{
    (void)state;
    const char *path = "io_min.h5";
    full_problem fp;
    char err[512];
    make_full(&fp, 9);
    fp.d.df = fp.d.b1scale = fp.d.w = fp.d.m0 = fp.d.t1 = fp.d.t2 = NULL;
    fp.d.b1 = NULL;
    fp.d.gamma_bar = PS_GAMMA_BAR_DEFAULT;
    fp.d.lambda = 0.0;
    fp.d.loss = PS_LOSS_Z;
    fp.d.b1_max = PS_B1MAX_NONE;
    ps_problem *p = NULL, *q = NULL;
    assert_int_equal(ps_problem_create(&fp.d, &p), 0);
    assert_int_equal(ps_h5_write_problem(path, p, err, sizeof err), 0);
    assert_int_equal(ps_h5_read_problem(path, &q, err, sizeof err), 0);
    ps_problem_desc b;
    assert_int_equal(ps_problem_describe(q, &b), 0);
    assert_null(b.df);
    assert_null(b.b1scale);
    assert_null(b.w);
    assert_null(b.m0);
    assert_null(b.t1);
    assert_null(b.t2);
    assert_same(b.r, fp.r, NS * 3, "r");
    assert_same(b.g, fp.g, NT * 3, "g");
    for (size_t k = 0; k < 2 * NT; k++)
        assert_true(b.b1[k] == 0.0);
    assert_int_equal(b.loss, PS_LOSS_Z);
    assert_true(isinf(b.b1_max));
    assert_true(b.gamma_bar == PS_GAMMA_BAR_DEFAULT);

    /* b1_max is absent from the file when there is no constraint */
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    assert_int_equal(H5Aexists(f, "b1_max"), 0);
    assert_int_equal(H5Aexists(f, "dt"), 1);
    assert_int_equal(H5Lexists(f, "/spins/df", H5P_DEFAULT), 0);
    H5Fclose(f);
    assert_no_open_handles();
    ps_problem_free(q);
    ps_problem_free(p);
}

/* ---- HDF5 readers for the checks ----------------------------------- */

/* Dataset `name` of f, which must be float64 of shape want[rank]. */
static double *read_dset_n(hid_t f, const char *name, int rank, const hsize_t *want)
{
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    if (ds < 0) {
        printf("%s: missing\n", name);
        return NULL;
    }
    hid_t sp = H5Dget_space(ds);
    hsize_t dims[H5S_MAX_RANK] = {0};
    int r = H5Sget_simple_extent_ndims(sp);
    H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    hid_t t = H5Dget_type(ds);
    int ok = r == rank && H5Tget_class(t) == H5T_FLOAT && H5Tget_size(t) == 8;
    H5Tclose(t);
    size_t n = 1;
    for (int i = 0; i < rank && ok; i++) {
        ok = dims[i] == want[i];
        n *= (size_t)want[i];
    }
    if (!ok) {
        printf("%s: rank %d [%llu,%llu,%llu], expected float64 of rank %d\n", name, r,
               (unsigned long long)dims[0], (unsigned long long)dims[1],
               (unsigned long long)dims[2], rank);
        H5Dclose(ds);
        return NULL;
    }
    double *buf = malloc(n * sizeof(double));
    herr_t e = H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    H5Dclose(ds);
    if (e < 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static double *read_dset(hid_t f, const char *name, int rank, hsize_t d0,
                         hsize_t d1)
{
    const hsize_t want[2] = {d0, d1};
    return read_dset_n(f, name, rank, want);
}

static double read_attr_d(hid_t loc, const char *name)
{
    double v = NAN;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Aread(a, H5T_NATIVE_DOUBLE, &v) >= 0);
    H5Aclose(a);
    return v;
}

static long long read_attr_i(hid_t loc, const char *name)
{
    long long v = -12345;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    assert_true(a >= 0);
    hid_t t = H5Aget_type(a);
    assert_int_equal(H5Tget_class(t), H5T_INTEGER);
    H5Tclose(t);
    assert_true(H5Aread(a, H5T_NATIVE_LLONG, &v) >= 0);
    H5Aclose(a);
    return v;
}

static void read_attr_s(hid_t loc, const char *name, char *buf, size_t len)
{
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    assert_true(a >= 0);
    hid_t t = H5Aget_type(a);
    assert_int_equal(H5Tget_class(t), H5T_STRING);
    /* fixed-length: the text in the attribute, not in the global heap */
    assert_true(H5Tis_variable_str(t) == 0);
    size_t n = H5Tget_size(t);
    char *s = calloc(n + 1, 1);
    assert_non_null(s);
    assert_true(H5Aread(a, t, s) >= 0);
    snprintf(buf, len, "%s", s);
    free(s);
    H5Tclose(t);
    H5Aclose(a);
}

/* A pulse x[nx] in [-0.1, 0.1] G and, when grad is not NULL, a gradient
 * grad[nx] in [-3, 3] drawn alongside, then a magnetization m[NS][3]. */
static void random_outputs(uint64_t seed, size_t nx, double *x, double *grad, double *m)
{
    uint64_t s = seed;
    for (size_t i = 0; i < nx; i++) {
        x[i] = tu_uniform(&s, -0.1, 0.1);
        if (grad)
            grad[i] = tu_uniform(&s, -3, 3);
    }
    for (size_t i = 0; i < NS * 3; i++)
        m[i] = tu_uniform(&s, -1, 1);
}

/* ---- result and eval files ----------------------------------------- */

static void test_result_file(void **state)
{
    (void)state;
    const char *path = "io_result.h5";
    full_problem fp;
    char err[512];
    ps_problem *p = create_full(&fp, 11);
    double x[2 * NT], m[NS * 3];
    random_outputs(5, 2 * NT, x, NULL, m);
    ps_progress hist[3];
    for (int i = 0; i < 3; i++) {
        hist[i].iteration = i;
        hist[i].f = 10.0 - i;
        hist[i].gnorm = 1.0 / (i + 1);
        hist[i].step = i ? 0.5 * i : 0.0;
        hist[i].evaluations = 1 + 2 * i;
        hist[i].seconds = 0.25 * i;
        hist[i].round = i / 2;
        hist[i].reserved = 0;
    }
    ps_result r;
    memset(&r, 0, sizeof r);
    r.status = PS_MAX_ITERATIONS;
    r.iterations = 2;
    r.evaluations = 5;
    r.f = 8.0;
    r.gnorm = 1.0 / 3;
    r.seconds = 0.5;
    r.backend = PS_BACKEND_CPU;
    snprintf(r.device, sizeof r.device, "test device \"7\"");
    r.history = hist;
    r.history_len = 3;
    r.rounds = 1;

    int st = ps_h5_write_result(path, p, x, m, &r, err, sizeof err);
    if (st)
        printf("%s\n", err);
    assert_int_equal(st, 0);
    assert_no_open_handles();

    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    double *rm = read_dset(f, "/result/m", 2, NS, 3);
    assert_same(rm, m, NS * 3, "/result/m");
    double *h = read_dset(f, "/result/history", 2, 3, 7);
    assert_non_null(h);
    for (int i = 0; i < 3; i++) {
        double want[7] = {(double)hist[i].iteration, hist[i].f, hist[i].gnorm,
                          hist[i].step, (double)hist[i].evaluations,
                          hist[i].seconds, (double)hist[i].round};
        assert_same(&h[7 * i], want, 7, "/result/history row");
    }
    {
        hid_t hd = H5Dopen2(f, "/result/history", H5P_DEFAULT);
        char cols[128];
        read_attr_s(hd, "columns", cols, sizeof cols);
        assert_string_equal(cols, "iteration,f,gnorm,step,evaluations,seconds,round");
        H5Dclose(hd);
    }
    /* the constraints of a problem with one peak limit and no VOPs: the
     * limit per channel, the peak of x, one round of weight 0 */
    double *peak = read_dset(f, "/result/constraints/peak_b1", 1, 1, 0);
    double *lim = read_dset(f, "/result/constraints/b1_max", 1, 1, 0);
    assert_non_null(peak);
    assert_non_null(lim);
    double want_peak = 0.0;
    for (size_t k = 0; k < NT; k++)
        want_peak = fmax(want_peak, hypot(x[k], x[NT + k]));
    assert_true(peak[0] == want_peak);
    assert_true(lim[0] == 0.3);
    assert_false(H5Lexists(f, "/result/constraints/sar", H5P_DEFAULT) > 0);
    {
        hid_t cg = H5Gopen2(f, "/result/constraints", H5P_DEFAULT);
        assert_true(cg >= 0);
        assert_int_equal(read_attr_i(cg, "rounds"), 1);
        assert_true(read_attr_d(cg, "mu") == 0.0);
        assert_true(read_attr_d(cg, "violation") == 0.0);
        H5Gclose(cg);
    }
    free(peak);
    free(lim);
    double *b1 = read_dset(f, "/pulse/b1", 2, NT, 2);
    assert_non_null(b1);
    for (size_t k = 0; k < NT; k++) {
        assert_true(b1[2 * k] == x[k]);
        assert_true(b1[2 * k + 1] == x[NT + k]);
    }
    double *rr = read_dset(f, "/spins/r", 2, NS, 3);
    assert_same(rr, fp.r, NS * 3, "/spins/r");
    hid_t g = H5Gopen2(f, "/result", H5P_DEFAULT);
    assert_true(g >= 0);
    assert_int_equal(read_attr_i(g, "status"), PS_MAX_ITERATIONS);
    assert_int_equal(read_attr_i(g, "iterations"), 2);
    assert_int_equal(read_attr_i(g, "evaluations"), 5);
    assert_true(read_attr_d(g, "f") == 8.0);
    char sbuf[256];
    read_attr_s(g, "backend", sbuf, sizeof sbuf);
    assert_string_equal(sbuf, "cpu");
    read_attr_s(g, "device", sbuf, sizeof sbuf);
    assert_string_equal(sbuf, "test device \"7\"");
    read_attr_s(f, "loss", sbuf, sizeof sbuf);
    assert_string_equal(sbuf, "mls");
    assert_true(read_attr_d(f, "dt") == 4e-6);
    H5Gclose(g);
    H5Fclose(f);
    free(rm);
    free(h);
    free(b1);
    free(rr);

    /* A result file is also a problem file that starts from the result. */
    ps_problem *q = NULL;
    assert_int_equal(ps_h5_read_problem(path, &q, err, sizeof err), 0);
    double xq[2 * NT];
    assert_int_equal(ps_problem_x0(q, xq), 0);
    assert_same(xq, x, 2 * NT, "x0 of the result file");
    ps_problem_free(q);

    /* No temporary file is left beside it. */
    DIR *dir = opendir(".");
    assert_non_null(dir);
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (strncmp(e->d_name, "io_result.h5.tmp", 16) == 0) {
            printf("left over: %s\n", e->d_name);
            fail();
        }
    }
    closedir(dir);
    assert_no_open_handles();
    ps_problem_free(p);
}

static void test_eval_file(void **state)
{
    (void)state;
    const char *path = "io_eval.h5";
    full_problem fp;
    char err[512];
    ps_problem *p = create_full(&fp, 13);
    double x[2 * NT], grad[2 * NT], m[NS * 3], gg[NT * 3];
    random_outputs(6, 2 * NT, x, grad, m);
    uint64_t s = 21;
    for (size_t i = 0; i < NT * 3; i++)
        gg[i] = tu_uniform(&s, -5, 5);
    assert_int_equal(ps_h5_write_eval(path, p, x, 0.75, grad, gg, m, err, sizeof err), 0);
    assert_no_open_handles();

    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    double *g = read_dset(f, "/eval/gradient", 2, NT, 2);
    assert_non_null(g);
    for (size_t k = 0; k < NT; k++) {
        assert_true(g[2 * k] == grad[k]);          /* dF/du_k */
        assert_true(g[2 * k + 1] == grad[NT + k]); /* dF/dv_k */
    }
    double *rg = read_dset(f, "/eval/gradient_g", 2, NT, 3);
    assert_same(rg, gg, NT * 3, "/eval/gradient_g");
    free(rg);
    hid_t ev = H5Gopen2(f, "/eval", H5P_DEFAULT);
    assert_true(ev >= 0);
    assert_true(read_attr_d(ev, "f") == 0.75);
    H5Gclose(ev);
    double *rm = read_dset(f, "/result/m", 2, NS, 3);
    assert_same(rm, m, NS * 3, "/result/m");
    double *b1 = read_dset(f, "/pulse/b1", 2, NT, 2);
    assert_non_null(b1);
    assert_true(b1[0] == x[0] && b1[1] == x[NT]);
    H5Fclose(f);
    free(g);
    free(rm);
    free(b1);
    assert_no_open_handles();
    ps_problem_free(p);
}

/* ---- malformed files ------------------------------------------------ */

static hid_t open_rw(const char *path)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    return f;
}

/* Replace dataset `name` by one of type `type` and shape dims[rank]
 * (rank 0: a scalar), values fill + step i (element i). */
static void replace_dset_n(const char *path, const char *name, hid_t type, int rank,
                           const hsize_t *dims, double fill, double step)
{
    hid_t f = open_rw(path);
    if (H5Lexists(f, name, H5P_DEFAULT) > 0)
        assert_true(H5Ldelete(f, name, H5P_DEFAULT) >= 0);
    hid_t sp = rank ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t ds = H5Dcreate2(f, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(ds >= 0);
    size_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= (size_t)dims[i];
    double *buf = malloc((n ? n : 1) * sizeof(double));
    for (size_t i = 0; i < n; i++)
        buf[i] = fill + step * (double)i;
    if (n > 0)
        assert_true(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    free(buf);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Fclose(f);
}

static void replace_dset(const char *path, const char *name, hid_t type,
                         int rank, hsize_t d0, hsize_t d1, double fill)
{
    const hsize_t dims[2] = {d0, d1};
    replace_dset_n(path, name, type, rank, dims, fill, 0.0);
}

/* Replace dataset `name` by a chunked float64 one of shape [d0,d1] (d1 0:
 * [d0]) in chunks of `rows` rows, behind the optional filter `filter` (0:
 * none). Left open for the caller's writes (it closes it, and f). */
static hid_t chunked_dset(const char *path, hid_t *f, const char *name, hsize_t d0, hsize_t d1,
                          hsize_t rows, int filter)
{
    *f = open_rw(path);
    assert_true(H5Ldelete(*f, name, H5P_DEFAULT) >= 0);
    const int rank = d1 ? 2 : 1;
    hsize_t dims[2] = {d0, d1}, chunk[2] = {rows, d1};
    hid_t sp = H5Screate_simple(rank, dims, NULL), pl = H5Pcreate(H5P_DATASET_CREATE);
    assert_true(H5Pset_chunk(pl, rank, chunk) >= 0);
    if (filter)
        assert_true(H5Pset_filter(pl, (H5Z_filter_t)filter, H5Z_FLAG_OPTIONAL, 0, NULL) >= 0);
    hid_t ds = H5Dcreate2(*f, name, H5T_IEEE_F64LE, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    assert_true(ds >= 0);
    H5Pclose(pl);
    H5Sclose(sp);
    return ds;
}

/* ... never written (a few bytes on disk whatever its size). */
static void huge_dset(const char *path, const char *name, hsize_t d0, hsize_t d1)
{
    hid_t f, ds = chunked_dset(path, &f, name, d0, d1, 1024, 0);
    H5Dclose(ds);
    H5Fclose(f);
}

/* ... [d0] behind filter 32000 (LZF, which this HDF5 library lacks), its
 * one chunk written raw as if filtered. */
static void filtered_dset(const char *path, const char *name, hsize_t d0)
{
    hid_t f, ds = chunked_dset(path, &f, name, d0, 0, d0, 32000);
    unsigned char raw[64] = {1, 2, 3};
    const hsize_t at[1] = {0};
    assert_true(H5Dwrite_chunk(ds, H5P_DEFAULT, 0, at, sizeof raw, raw) >= 0);
    H5Dclose(ds);
    H5Fclose(f);
}

/* Replace the group `name` by a float64 dataset [3], or dataset `name` by
 * one without values (null: a null dataspace). */
static void dataset_for(const char *path, const char *name, int null)
{
    hid_t f = open_rw(path);
    assert_true(H5Ldelete(f, name, H5P_DEFAULT) >= 0);
    const hsize_t dims[1] = {3};
    const double v[3] = {0.0, 0.0, 0.0};
    hid_t sp = null ? H5Screate(H5S_NULL) : H5Screate_simple(1, dims, NULL);
    hid_t ds = H5Dcreate2(f, name, H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(ds >= 0);
    if (!null)
        assert_true(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Fclose(f);
}

/* Set element i of the float64 dataset `name` to v. */
static void poke(const char *path, const char *name, size_t i, double v)
{
    hid_t f = open_rw(path);
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    assert_true(ds >= 0);
    hid_t sp = H5Dget_space(ds);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    double *buf = malloc((size_t)n * sizeof(double));
    assert_true(H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    buf[i] = v;
    assert_true(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    free(buf);
    H5Sclose(sp);
    H5Dclose(ds);
    H5Fclose(f);
}

static void delete_link(const char *path, const char *name)
{
    hid_t f = open_rw(path);
    assert_true(H5Ldelete(f, name, H5P_DEFAULT) >= 0);
    H5Fclose(f);
}

static void set_root_attr_string(const char *path, const char *name,
                                 const char *value)
{
    hid_t f = open_rw(path);
    if (H5Aexists(f, name) > 0)
        H5Adelete(f, name);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(value) + 1);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Awrite(a, t, value) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    H5Fclose(f);
}

static void set_root_attr_vlen_string(const char *path, const char *name, const char *value)
{
    hid_t f = open_rw(path);
    if (H5Aexists(f, name) > 0)
        H5Adelete(f, name);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Awrite(a, t, &value) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    H5Fclose(f);
}

static void set_root_attr_int(const char *path, const char *name, int v)
{
    hid_t f = open_rw(path);
    if (H5Aexists(f, name) > 0)
        H5Adelete(f, name);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, name, H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Awrite(a, H5T_NATIVE_INT, &v) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Fclose(f);
}

/* Replace dataset `name` by a scalar string. */
static void replace_dset_string(const char *path, const char *name)
{
    hid_t f = open_rw(path);
    if (H5Lexists(f, name, H5P_DEFAULT) > 0)
        assert_true(H5Ldelete(f, name, H5P_DEFAULT) >= 0);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, 4);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t ds = H5Dcreate2(f, name, t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(ds >= 0);
    assert_true(H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, "abc") >= 0);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Tclose(t);
    H5Fclose(f);
}

static void set_root_attr_double(const char *path, const char *name, double v)
{
    hid_t f = open_rw(path);
    if (H5Aexists(f, name) > 0)
        H5Adelete(f, name);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, name, H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Awrite(a, H5T_NATIVE_DOUBLE, &v) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Fclose(f);
}

static void test_missing_dataset(void **state)
{
    (void)state;
    write_full("io_bad_missing.h5");
    delete_link("io_bad_missing.h5", "/spins/target");
    expect_read_error("io_bad_missing.h5", PS_ERR_FILE, "/spins/target", "missing");

    write_full("io_bad_nogroup.h5");
    delete_link("io_bad_nogroup.h5", "/pulse");
    expect_read_error("io_bad_nogroup.h5", PS_ERR_FILE, "/pulse/g", "missing");

    /* /spins/r and /pulse/g, which set Ns and Nt, are read before the others */
    write_full("io_bad_missing.h5");
    delete_link("io_bad_missing.h5", "/spins/target");
    delete_link("io_bad_missing.h5", "/pulse/g");
    expect_read_error("io_bad_missing.h5", PS_ERR_FILE, "/pulse/g", "missing");
}

static void test_wrong_shape(void **state)
{
    (void)state;
    const char *path = "io_bad_shape.h5";
    write_full(path);
    replace_dset(path, "/spins/r", H5T_IEEE_F64LE, 2, NS, 2, 0.0);
    expect_read_error(path, PS_ERR_FILE, "/spins/r", "[7,2]");

    write_full(path);
    replace_dset(path, "/spins/df", H5T_IEEE_F64LE, 1, NS + 1, 0, 0.0);
    expect_read_error(path, PS_ERR_FILE, "/spins/df", "shape");

    write_full(path);
    replace_dset(path, "/spins/w", H5T_IEEE_F64LE, 2, NS, 1, 1.0);
    expect_read_error(path, PS_ERR_FILE, "/spins/w", "shape");

    write_full(path);
    replace_dset(path, "/pulse/b1", H5T_IEEE_F64LE, 2, NT, 3, 0.0);
    expect_read_error(path, PS_ERR_FILE, "/pulse/b1", "[5,3]");

    write_full(path);
    replace_dset(path, "/spins/m0", H5T_IEEE_F64LE, 2, NS - 1, 3, 0.0);
    expect_read_error(path, PS_ERR_FILE, "/spins/m0", "shape");

    write_full(path);
    replace_dset(path, "/spins/r", H5T_IEEE_F64LE, 2, 0, 3, 0.0);
    expect_read_error(path, PS_ERR_SIZE, "/spins/r", "0 rows");

    write_full(path);
    replace_dset(path, "/spins/t1", H5T_IEEE_F64LE, 0, 0, 0, 1.0);
    expect_read_error(path, PS_ERR_FILE, "/spins/t1", "scalar");

    /* row counts past the problem's limits: refused before any allocation */
    write_full(path);
    huge_dset(path, "/spins/r", ((hsize_t)1 << 31) + 1, 3);
    expect_read_error(path, PS_ERR_SIZE, "/spins/r", "more than the Ns limit of 2^31");
    write_full(path);
    huge_dset(path, "/pulse/g", ((hsize_t)1 << 26) + 1, 3);
    expect_read_error(path, PS_ERR_SIZE, "/pulse/g", "more than the Nt limit of 2^26");

    /* a row count that differs from the one an earlier dataset set: that
     * one is named */
    write_full(path);
    replace_dset(path, "/pulse/g", H5T_IEEE_F64LE, 2, NT - 1, 3, 0.0);
    expect_read_error(path, PS_ERR_FILE, "/pulse/b1: wrong shape: expected [Nt,2] = [4,2], got [5,2]",
                      "; Nt = 4 is the rows of /pulse/g");
    write_full(path);
    replace_dset(path, "/spins/r", H5T_IEEE_F64LE, 2, NS - 2, 3, 0.0);
    expect_read_error(path, PS_ERR_FILE, "wrong shape", "; Ns = 5 is the rows of /spins/r");

    /* no values, a dataset where a group belongs, a filter the library lacks */
    write_full(path);
    dataset_for(path, "/spins/df", 1);
    expect_read_error(path, PS_ERR_FILE, "/spins/df: empty: the dataset has no values", NULL);
    write_full(path);
    dataset_for(path, "/spins", 0);
    expect_read_error(path, PS_ERR_FILE, "/spins is a dataset where the group that holds", NULL);
    write_full(path);
    dataset_for(path, "/pulse", 0);
    expect_read_error(path, PS_ERR_FILE, "/pulse is a dataset where the group that holds", NULL);
    write_full(path);
    filtered_dset(path, "/spins/df", NS);
    expect_read_error(path, PS_ERR_FILE, "/spins/df: cannot read data: it is compressed with HDF5 "
                      "filter 32000", "which this HDF5 library does not have");

    /* read_pulse with the wrong Nt */
    write_full(path);
    char err[512];
    double x[2 * (NT + 1)];
    assert_int_equal(ps_h5_read_pulse(path, 1, NT + 1, x, err, sizeof err),
                     PS_ERR_FILE);
    assert_msg(err, "/pulse/b1");
    assert_msg(err, path);
    assert_no_open_handles();
}

static void test_wrong_type(void **state)
{
    (void)state;
    const char *path = "io_bad_type.h5";
    write_full(path);
    replace_dset_string(path, "/pulse/g");
    expect_read_error(path, PS_ERR_FILE, "/pulse/g", "string");

    /* integers are numbers (MATLAB writes whole numbers so) */
    write_full(path);
    replace_dset(path, "/pulse/g", H5T_STD_I32LE, 2, NT, 3, 2.0);
    {
        ps_problem *qi = NULL;
        char e2[512];
        assert_int_equal(ps_h5_read_problem(path, &qi, e2, sizeof e2), 0);
        ps_problem_desc di;
        ps_problem_describe(qi, &di);
        assert_true(di.g[0] == 2.0 && di.g[3 * NT - 1] == 2.0);
        ps_problem_free(qi);
    }
    write_full(path);
    set_root_attr_int(path, "dt", 1);
    {
        ps_problem *qi = NULL;
        char e2[512];
        assert_int_equal(ps_h5_read_problem(path, &qi, e2, sizeof e2), 0);
        ps_problem_desc di;
        ps_problem_describe(qi, &di);
        assert_true(di.dt == 1.0);
        ps_problem_free(qi);
    }

    /* a variable-length string (as h5py writes a str) is read too */
    write_full(path);
    set_root_attr_vlen_string(path, "loss", "z");
    {
        ps_problem *qi = NULL;
        char e2[512];
        assert_int_equal(ps_h5_read_problem(path, &qi, e2, sizeof e2), 0);
        ps_problem_desc di;
        ps_problem_describe(qi, &di);
        assert_int_equal(di.loss, PS_LOSS_Z);
        ps_problem_free(qi);
    }

    write_full(path);
    set_root_attr_string(path, "dt", "4e-6");
    expect_read_error(path, PS_ERR_FILE, "dt", "string");

    write_full(path);
    set_root_attr_double(path, "loss", 2.0);
    expect_read_error(path, PS_ERR_FILE, "loss", "string");

    write_full(path);
    set_root_attr_string(path, "loss", "l2");
    expect_read_error(path, PS_ERR_LOSS, "loss", "l2");

    /* a fixed-length string loss (as MATLAB writes it) is accepted */
    write_full(path);
    set_root_attr_string(path, "loss", "xy");
    ps_problem *q = NULL;
    char err[512];
    assert_int_equal(ps_h5_read_problem(path, &q, err, sizeof err), 0);
    ps_problem_desc d;
    ps_problem_describe(q, &d);
    assert_int_equal(d.loss, PS_LOSS_XY);
    ps_problem_free(q);

    /* float32 data are read as double */
    replace_dset(path, "/spins/df", H5T_IEEE_F32LE, 1, NS, 0, 12.5);
    assert_int_equal(ps_h5_read_problem(path, &q, err, sizeof err), 0);
    ps_problem_describe(q, &d);
    assert_true(d.df[NS - 1] == 12.5);
    ps_problem_free(q);

    write_full(path);
    delete_link(path, "/spins/w");
    {
        hid_t f = open_rw(path);
        hid_t g = H5Gcreate2(f, "/spins/w", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Gclose(g);
        H5Fclose(f);
    }
    expect_read_error(path, PS_ERR_FILE, "/spins/w", "dataset");
}

static void test_missing_attribute(void **state)
{
    (void)state;
    const char *path = "io_bad_attr.h5";
    write_full(path);
    hid_t f = open_rw(path);
    assert_true(H5Adelete(f, "dt") >= 0);
    H5Fclose(f);
    expect_read_error(path, PS_ERR_FILE, "dt", "missing");

    write_full(path);
    set_root_attr_double(path, "dt", -1.0);
    expect_read_error(path, PS_ERR_DT, "dt", NULL);
}

static void test_bad_values(void **state)
{
    (void)state;
    const char *path = "io_bad_value.h5";
    write_full(path);
    poke(path, "/spins/df", 3, NAN);
    expect_read_error(path, PS_ERR_NONFINITE, "/spins/df", "NaN");

    write_full(path);
    poke(path, "/spins/w", 2, -1.0);
    expect_read_error(path, PS_ERR_NEGATIVE, "/spins/w", NULL);

    write_full(path);
    poke(path, "/spins/t2", 0, 0.0);
    expect_read_error(path, PS_ERR_RELAXATION, "/spins/t2", NULL);

    write_full(path);
    poke(path, "/spins/b1", 1, INFINITY);
    expect_read_error(path, PS_ERR_NONFINITE, "/spins/b1", NULL);

    write_full(path);
    poke(path, "/pulse/b1", 4, NAN);
    expect_read_error(path, PS_ERR_NONFINITE, "/pulse/b1", NULL);
}

static void test_truncated(void **state)
{
    (void)state;
    const char *path = "io_truncated.h5";
    write_full(path);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_size > 1000);
    assert_int_equal(truncate(path, st.st_size / 2), 0);
    expect_read_error(path, PS_ERR_FILE, "truncated", NULL);
}

static void test_not_hdf5(void **state)
{
    (void)state;
    const char *path = "io_text.h5";
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("this is not an HDF5 file\n", f);
    fclose(f);
    expect_read_error(path, PS_ERR_FILE, "not an HDF5 file", NULL);

    char err[512];
    double x[2 * NT];
    assert_int_equal(ps_h5_read_pulse(path, 1, NT, x, err, sizeof err), PS_ERR_FILE);
    assert_msg(err, path);
}

static void test_nonexistent(void **state)
{
    (void)state;
    expect_read_error("io_no_such_file.h5", PS_ERR_FILE, "No such file", NULL);
    expect_read_error(".", PS_ERR_FILE, "directory", NULL);
}

/* ---- writing ---------------------------------------------------------- */

static void test_write_errors(void **state)
{
    (void)state;
    full_problem fp;
    char err[512];
    ps_problem *p = create_full(&fp, 3);
    const char *bad = "io_no_such_dir/x.h5";
    assert_int_equal(ps_h5_write_problem(bad, p, err, sizeof err), PS_ERR_FILE);
    printf("%s\n", err);
    assert_msg(err, bad);
    assert_no_open_handles();

    /* Overwriting an existing file replaces it whole. */
    const char *path = "io_overwrite.h5";
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("old contents", f);
    fclose(f);
    assert_int_equal(ps_h5_write_problem(path, p, err, sizeof err), 0);
    ps_problem *q = NULL;
    assert_int_equal(ps_h5_read_problem(path, &q, err, sizeof err), 0);
    ps_problem_free(q);

    /* NULL arguments */
    assert_int_equal(ps_h5_write_problem(NULL, p, err, sizeof err), PS_ERR_NULL);
    assert_int_equal(ps_h5_write_problem(path, NULL, err, sizeof err), PS_ERR_NULL);
    assert_int_equal(ps_h5_read_problem(path, NULL, err, sizeof err), PS_ERR_NULL);
    assert_int_equal(ps_h5_read_problem(NULL, &q, err, sizeof err), PS_ERR_NULL);
    assert_int_equal(ps_h5_write_result(path, p, NULL, NULL, NULL, err, sizeof err),
                     PS_ERR_NULL);
    assert_no_open_handles();
    ps_problem_free(p);
}

/* ---- several transmit channels ---------------------------------------- */

#define NC 3

/* A problem of NC channels: a complex B1 map, a start pulse per channel,
 * no B1 scale. */
typedef struct channel_problem {
    double r[NS * 3], target[NS * 3], df[NS], g[NT * 3];
    double b1map[NS * NC * 2], b1[NC * NT * 2];
    ps_problem_desc d;
} channel_problem;

/* The arrays and description of a channel problem (not created). */
static void fill_channels(channel_problem *cp, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < NS * 3; i++) {
        cp->r[i] = tu_uniform(&s, -2, 2);
        cp->target[i] = tu_uniform(&s, -1, 1);
    }
    for (size_t j = 0; j < NS; j++)
        cp->df[j] = tu_uniform(&s, -100, 100);
    for (size_t k = 0; k < NT * 3; k++)
        cp->g[k] = tu_uniform(&s, -1, 1);
    for (size_t i = 0; i < NS * NC * 2; i++)
        cp->b1map[i] = tu_uniform(&s, -0.5, 0.5);
    for (size_t i = 0; i < NC * NT * 2; i++)
        cp->b1[i] = tu_uniform(&s, -0.05, 0.05);
    ps_problem_desc *d = &cp->d;
    ps_problem_desc_init(d);
    d->ns = NS;
    d->nt = NT;
    d->nc = NC;
    d->r = cp->r;
    d->target = cp->target;
    d->df = cp->df;
    d->g = cp->g;
    d->b1map = cp->b1map;
    d->b1 = cp->b1;
    d->dt = 4e-6;
    d->loss = PS_LOSS_XY;
}

static ps_problem *create_channels(channel_problem *cp, uint64_t seed)
{
    fill_channels(cp, seed);
    ps_problem *p = NULL;
    assert_int_equal(ps_problem_create(&cp->d, &p), PS_CONVERGED);
    return p;
}

static void write_channels(const char *path)
{
    channel_problem cp;
    write_and_free(path, create_channels(&cp, 21));
}

static void test_roundtrip_channels(void **state)
{
    (void)state;
    const char *path = "io_channels.h5";
    channel_problem cp;
    char err[512];
    ps_problem *p = create_channels(&cp, 5);
    write_kept(path, p);

    /* the datasets as a user sees them */
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    const hsize_t map_dims[3] = {NS, NC, 2}, b1_dims[3] = {NC, NT, 2};
    double *map = read_dset_n(f, "/spins/b1map", 3, map_dims);
    double *b1 = read_dset_n(f, "/pulse/b1", 3, b1_dims);
    assert_same(map, cp.b1map, NS * NC * 2, "/spins/b1map");
    assert_same(b1, cp.b1, NC * NT * 2, "/pulse/b1");
    assert_false(H5Lexists(f, "/spins/b1", H5P_DEFAULT) > 0);
    H5Fclose(f);
    free(map);
    free(b1);

    ps_problem *q = NULL;
    int st = ps_h5_read_problem(path, &q, err, sizeof err);
    if (st)
        printf("%s\n", err);
    assert_int_equal(st, 0);
    assert_no_open_handles();
    ps_problem_desc a, b;
    assert_int_equal(ps_problem_describe(p, &a), 0);
    assert_int_equal(ps_problem_describe(q, &b), 0);
    assert_int_equal(b.nc, NC);
    assert_int_equal(ps_problem_nc(q), NC);
    assert_null(b.b1scale);
    assert_same(b.b1map, cp.b1map, NS * NC * 2, "b1map (source)");
    assert_same(b.b1, cp.b1, NC * NT * 2, "b1 (source)");
    assert_same(b.r, a.r, NS * 3, "r");
    assert_same(b.target, a.target, NS * 3, "target");
    assert_same(b.df, a.df, NS, "df");
    assert_same(b.g, a.g, NT * 3, "g");
    assert_int_equal(b.loss, PS_LOSS_XY);

    /* the start pulse in solver layout, from the problem and from the file */
    double x0[2 * NC * NT], xr[2 * NC * NT];
    tu_poison(xr, 2 * NC * NT);
    assert_int_equal(ps_problem_x0(q, x0), 0);
    assert_int_equal(ps_h5_read_pulse(path, NC, NT, xr, err, sizeof err), 0);
    assert_same(xr, x0, 2 * NC * NT, "read_pulse");
    for (size_t c = 0; c < NC; c++)
        for (size_t k = 0; k < NT; k++) {
            assert_true(xr[2 * c * NT + k] == cp.b1[(c * NT + k) * 2]);
            assert_true(xr[(2 * c + 1) * NT + k] == cp.b1[(c * NT + k) * 2 + 1]);
        }
    /* of another channel count: refused, naming the dataset and the shapes */
    assert_int_equal(ps_h5_read_pulse(path, 2, NT, xr, err, sizeof err), PS_ERR_FILE);
    printf("%s\n", err);
    assert_msg(err, "/pulse/b1");
    assert_msg(err, "[2,5,2]");
    assert_msg(err, "got [3,5,2]");
    assert_int_equal(ps_h5_read_pulse(path, 1, NT, xr, err, sizeof err), PS_ERR_FILE);
    printf("%s\n", err);
    assert_msg(err, "expected [Nt,2] = [5,2], got [3,5,2]");
    assert_no_open_handles();
    ps_problem_free(q);
    ps_problem_free(p);
}

/* Write the result file rpath of p (x, m, r) and the eval file epath (x,
 * f = 0.5, grad, m); both must succeed. */
static void write_result_and_eval(const char *rpath, const char *epath, const ps_problem *p,
                                  const double *x, const double *grad, const double *m,
                                  const ps_result *r)
{
    char err[512];
    int st = ps_h5_write_result(rpath, p, x, m, r, err, sizeof err);
    if (!st)
        st = ps_h5_write_eval(epath, p, x, 0.5, grad, NULL, m, err, sizeof err);
    if (st)
        printf("%s\n", err);
    assert_int_equal(st, 0);
    assert_no_open_handles();
}

static void test_channels_result_and_eval(void **state)
{
    (void)state;
    const char *rpath = "io_channels_result.h5", *epath = "io_channels_eval.h5";
    channel_problem cp;
    char err[512];
    ps_problem *p = create_channels(&cp, 8);
    double x[2 * NC * NT], grad[2 * NC * NT], m[NS * 3];
    random_outputs(9, 2 * NC * NT, x, grad, m);
    ps_progress hist[2] = {{.iteration = 0, .f = 2.0}, {.iteration = 1, .f = 1.0}};
    ps_result r = {0};
    r.status = PS_CONVERGED;
    r.iterations = 1;
    r.f = 1.0;
    r.history = hist;
    r.history_len = 2;
    write_result_and_eval(rpath, epath, p, x, grad, m, &r);

    const hsize_t dims[3] = {NC, NT, 2};
    hid_t f = H5Fopen(rpath, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    double *b1 = read_dset_n(f, "/pulse/b1", 3, dims);
    assert_non_null(b1);
    H5Fclose(f);
    f = H5Fopen(epath, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    double *g = read_dset_n(f, "/eval/gradient", 3, dims);
    double *eb1 = read_dset_n(f, "/pulse/b1", 3, dims);
    assert_non_null(g);
    assert_same(eb1, b1, NC * NT * 2, "eval /pulse/b1");
    H5Fclose(f);
    for (size_t c = 0; c < NC; c++)
        for (size_t k = 0; k < NT; k++) {
            const size_t row = (c * NT + k) * 2;
            assert_true(b1[row] == x[2 * c * NT + k]);           /* u_ck */
            assert_true(b1[row + 1] == x[(2 * c + 1) * NT + k]); /* v_ck */
            assert_true(g[row] == grad[2 * c * NT + k]);         /* dF/du_ck */
            assert_true(g[row + 1] == grad[(2 * c + 1) * NT + k]);
        }
    free(b1);
    free(eb1);
    free(g);

    /* the result file is a problem file of the same channels */
    ps_problem *q = NULL;
    assert_int_equal(ps_h5_read_problem(rpath, &q, err, sizeof err), 0);
    assert_int_equal(ps_problem_nc(q), NC);
    double xr[2 * NC * NT];
    assert_int_equal(ps_h5_read_pulse(rpath, NC, NT, xr, err, sizeof err), 0);
    assert_same(xr, x, 2 * NC * NT, "result pulse");
    ps_problem_free(q);
    assert_no_open_handles();
    ps_problem_free(p);
}

static void test_channels_malformed(void **state)
{
    (void)state;
    const char *path = "io_bad_channels.h5";

    /* /spins/b1map: rank, rows, width, an empty or too large Nc */
    write_channels(path);
    replace_dset_n(path, "/spins/b1map", H5T_IEEE_F64LE, 2, (hsize_t[]){NS, 2}, 0.5, 1e-3);
    expect_read_error(path, PS_ERR_FILE, "/spins/b1map: wrong shape: expected [Ns,Nc,2] = [7,Nc,2]",
                      "got [7,2]");
    write_channels(path);
    replace_dset_n(path, "/spins/b1map", H5T_IEEE_F64LE, 3, (hsize_t[]){NS + 1, NC, 2}, 0.5, 1e-3);
    expect_read_error(path, PS_ERR_FILE, "/spins/b1map", "got [8,3,2]");
    write_channels(path);
    replace_dset_n(path, "/spins/b1map", H5T_IEEE_F64LE, 3, (hsize_t[]){NS, NC, 3}, 0.5, 1e-3);
    expect_read_error(path, PS_ERR_FILE, "/spins/b1map", "got [7,3,3]");
    write_channels(path);
    replace_dset_n(path, "/spins/b1map", H5T_IEEE_F64LE, 3, (hsize_t[]){NS, 0, 2}, 0.5, 1e-3);
    expect_read_error(path, PS_ERR_SIZE, "/spins/b1map", "Nc = 0 channels");
    write_channels(path);
    replace_dset_n(path, "/spins/b1map", H5T_IEEE_F64LE, 3, (hsize_t[]){NS, PS_MAX_CHANNELS + 1, 2}, 0.5, 1e-3);
    expect_read_error(path, PS_ERR_SIZE, "/spins/b1map: 65 channels", "limit of 64");

    /* /pulse/b1 of another Nc than /spins/b1map's, of rank 2 or 4, empty */
    write_channels(path);
    replace_dset_n(path, "/pulse/b1", H5T_IEEE_F64LE, 3, (hsize_t[]){2, NT, 2}, 0.0, 1e-3);
    expect_read_error(path, PS_ERR_FILE, "/pulse/b1: wrong shape: expected [Nc,Nt,2] = [3,5,2], got [2,5,2]",
                      "/spins/b1map");
    write_channels(path);
    replace_dset_n(path, "/pulse/b1", H5T_IEEE_F64LE, 2, (hsize_t[]){NT, 2}, 0.0, 1e-3);
    expect_read_error(path, PS_ERR_FILE, "/pulse/b1", "got [5,2]");
    write_channels(path);
    replace_dset_n(path, "/pulse/b1", H5T_IEEE_F64LE, 4, (hsize_t[]){NC, NT, 2, 1}, 0.0, 1e-3);
    expect_read_error(path, PS_ERR_FILE, "/pulse/b1", "got [3,5,2,1]");
    write_channels(path);
    replace_dset_n(path, "/pulse/b1", H5T_IEEE_F64LE, 3, (hsize_t[]){NC, 0, 2}, 0.0, 1e-3);
    expect_read_error(path, PS_ERR_FILE, "/pulse/b1", "got [3,0,2]");
    /* a /pulse/b1 of several channels without a /spins/b1map */
    write_full(path);
    replace_dset_n(path, "/pulse/b1", H5T_IEEE_F64LE, 3, (hsize_t[]){NC, NT, 2}, 0.0, 1e-3);
    expect_read_error(path, PS_ERR_FILE, "/pulse/b1: wrong shape: expected [Nt,2] = [5,2], got [3,5,2]",
                      "one channel: no /spins/b1map");
    write_channels(path);
    delete_link(path, "/spins/b1map");
    expect_read_error(path, PS_ERR_FILE, "/pulse/b1", "no /spins/b1map");

    /* both a B1 scale and a B1 map */
    write_channels(path);
    replace_dset_n(path, "/spins/b1", H5T_IEEE_F64LE, 1, (hsize_t[]){NS}, 1.0, 1e-3);
    expect_read_error(path, PS_ERR_CHANNELS, "/spins/b1map", "/spins/b1 ");

    /* non-finite elements, named */
    write_channels(path);
    poke(path, "/spins/b1map", (4 * NC + 2) * 2 + 1, NAN);
    expect_read_error(path, PS_ERR_NONFINITE, "/spins/b1map", "b1map[4][2][1] is NaN");
    write_channels(path);
    poke(path, "/pulse/b1", (1 * NT + 3) * 2, INFINITY);
    expect_read_error(path, PS_ERR_NONFINITE, "/pulse/b1", "b1[1][3][0] is Inf");
    char err[512];
    double x[2 * NC * NT];
    assert_int_equal(ps_h5_read_pulse(path, NC, NT, x, err, sizeof err), PS_ERR_NONFINITE);
    assert_msg(err, "/pulse/b1: channel 1, row 3 is not finite");
    assert_no_open_handles();
}

/* One channel: a rank-3 [1,Nt,2] pulse is the [Nt,2] one; a one-channel
 * B1 map gives nc = 1 and keeps the rank-2 pulse. */
static void test_one_channel_forms(void **state)
{
    (void)state;
    const char *path = "io_one_channel.h5";
    full_problem fp;
    char err[512];
    write_full(path);
    ps_problem *p = NULL, *q = NULL;
    assert_int_equal(ps_h5_read_problem(path, &p, err, sizeof err), 0);
    {
        hid_t f = open_rw(path);
        const hsize_t dims[2] = {NT, 2};
        double *b1 = read_dset_n(f, "/pulse/b1", 2, dims);
        assert_non_null(b1);
        H5Fclose(f);
        replace_dset_n(path, "/pulse/b1", H5T_IEEE_F64LE, 3, (hsize_t[]){1, NT, 2}, 0.0, 1e-3);
        f = open_rw(path);
        hid_t ds = H5Dopen2(f, "/pulse/b1", H5P_DEFAULT);
        assert_true(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, b1) >= 0);
        H5Dclose(ds);
        H5Fclose(f);
        free(b1);
    }
    assert_int_equal(ps_h5_read_problem(path, &q, err, sizeof err), 0);
    double x0[2 * NT], x1[2 * NT], xr[2 * NT];
    assert_int_equal(ps_problem_x0(p, x0), 0);
    assert_int_equal(ps_problem_x0(q, x1), 0);
    assert_same(x1, x0, 2 * NT, "x0 of [1,Nt,2]");
    assert_int_equal(ps_h5_read_pulse(path, 1, NT, xr, err, sizeof err), 0);
    assert_same(xr, x0, 2 * NT, "read_pulse of [1,Nt,2]");
    ps_problem_free(q);
    ps_problem_free(p);

    /* a complex map of one channel in place of the B1 scale */
    make_full(&fp, 4);
    double map[NS * 2];
    for (size_t j = 0; j < NS; j++) {
        map[2 * j] = fp.b1scale[j];
        map[2 * j + 1] = 0.25;
    }
    fp.d.b1scale = NULL;
    fp.d.b1map = map;
    fp.d.nc = 1;
    assert_int_equal(ps_problem_create(&fp.d, &p), 0);
    assert_int_equal(ps_h5_write_problem(path, p, err, sizeof err), 0);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    const hsize_t mdims[3] = {NS, 1, 2}, bdims[2] = {NT, 2};
    double *m = read_dset_n(f, "/spins/b1map", 3, mdims);
    double *b = read_dset_n(f, "/pulse/b1", 2, bdims);
    assert_same(m, map, NS * 2, "one-channel b1map");
    assert_same(b, fp.b1, NT * 2, "one-channel b1");
    H5Fclose(f);
    free(m);
    free(b);
    assert_int_equal(ps_h5_read_problem(path, &q, err, sizeof err), 0);
    ps_problem_desc d;
    ps_problem_describe(q, &d);
    assert_int_equal(d.nc, 1);
    assert_same(d.b1map, map, NS * 2, "one-channel b1map read");
    ps_problem_free(q);
    ps_problem_free(p);
    assert_no_open_handles();
}

/* ---- local SAR (VOPs) and per-channel peak limits ---------------------- */

#define NQ 2

/* A channel problem with NQ VOPs and one peak limit per channel. */
typedef struct sar_problem {
    channel_problem cp;
    double vop[NQ * NC * NC * 2], b1max[NC];
} sar_problem;

/*
 * Q_q = 0.05 I + sum_{j<2} w_j w_j^H of random complex w_j: Hermitian
 * (the same products on both sides of the diagonal) and positive definite.
 */
static void random_vops(double *vop, size_t nq, size_t nc, uint64_t *s)
{
    for (size_t q = 0; q < nq; q++) {
        double w[2][PS_MAX_CHANNELS][2];
        for (int j = 0; j < 2; j++)
            for (size_t a = 0; a < nc; a++) {
                w[j][a][0] = tu_uniform(s, -1, 1);
                w[j][a][1] = tu_uniform(s, -1, 1);
            }
        for (size_t a = 0; a < nc; a++)
            for (size_t c = 0; c < nc; c++) {
                double re = a == c ? 0.05 : 0.0, im = 0.0;
                for (int j = 0; j < 2; j++) {
                    re += w[j][a][0] * w[j][c][0] + w[j][a][1] * w[j][c][1];
                    im += w[j][a][1] * w[j][c][0] - w[j][a][0] * w[j][c][1];
                }
                vop[2 * ((q * nc + a) * nc + c)] = re;
                vop[2 * ((q * nc + a) * nc + c) + 1] = im;
            }
    }
}

static ps_problem *create_sar(sar_problem *sp, uint64_t seed)
{
    fill_channels(&sp->cp, seed);
    uint64_t s = seed + 100;
    random_vops(sp->vop, NQ, NC, &s);
    for (size_t c = 0; c < NC; c++)
        sp->b1max[c] = 0.1 + 0.05 * (double)c;
    ps_problem_desc *d = &sp->cp.d;
    d->nq = NQ;
    d->vop = sp->vop;
    d->sar_max = 3.25;
    d->tr = 0.02;
    d->b1_max_channel = sp->b1max;
    ps_problem *p = NULL;
    assert_int_equal(ps_problem_create(d, &p), PS_CONVERGED);
    return p;
}

static void write_sar(const char *path)
{
    sar_problem sp;
    write_and_free(path, create_sar(&sp, 31));
}

/* The shape [rank] of dataset `name` of path into dims; returns the rank. */
static int dset_shape(const char *path, const char *name, hsize_t *dims)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    assert_true(ds >= 0);
    hid_t sp = H5Dget_space(ds);
    int rank = H5Sget_simple_extent_ndims(sp);
    H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    H5Dclose(ds);
    H5Fclose(f);
    return rank;
}

/* Elements of attribute `name` of object `obj` of path into v[n] (which
 * must be its count); returns the attribute's rank. */
static int read_attr_vec(const char *path, const char *obj, const char *name, double *v,
                         size_t n)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t a = H5Aopen_by_name(f, obj, name, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0);
    hid_t sp = H5Aget_space(a);
    int rank = H5Sget_simple_extent_ndims(sp);
    assert_int_equal(H5Sget_simple_extent_npoints(sp), n);
    H5Sclose(sp);
    assert_true(H5Aread(a, H5T_NATIVE_DOUBLE, v) >= 0);
    H5Aclose(a);
    H5Fclose(f);
    return rank;
}

/* Replace (or add) attribute `name` of object `obj` by one of file type
 * `type` and shape dims[rank] (rank 0: a scalar) holding v. */
static void set_attr_n(const char *path, const char *obj, const char *name, hid_t type,
                       int rank, const hsize_t *dims, const double *v)
{
    hid_t f = open_rw(path);
    hid_t o = H5Oopen(f, obj, H5P_DEFAULT);
    assert_true(o >= 0);
    if (H5Aexists(o, name) > 0)
        assert_true(H5Adelete(o, name) >= 0);
    hid_t sp = rank ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(o, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Awrite(a, H5T_NATIVE_DOUBLE, v) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Oclose(o);
    H5Fclose(f);
}

static void delete_attr(const char *path, const char *obj, const char *name)
{
    hid_t f = open_rw(path);
    assert_true(H5Adelete_by_name(f, obj, name, H5P_DEFAULT) >= 0);
    H5Fclose(f);
}

/* Read path, which must give a problem of the same hash as p. */
static ps_problem *read_same(const char *path, const ps_problem *p)
{
    char err[512];
    ps_problem *q = NULL;
    int st = ps_h5_read_problem(path, &q, err, sizeof err);
    if (st)
        printf("%s\n", err);
    assert_int_equal(st, 0);
    if (ps_problem_hash(q) != ps_problem_hash(p)) {
        printf("%s: problem hash %016llx, written %016llx\n", path,
               (unsigned long long)ps_problem_hash(q), (unsigned long long)ps_problem_hash(p));
        fail();
    }
    return q;
}

static void test_roundtrip_sar(void **state)
{
    (void)state;
    const char *path = "io_sar.h5";
    sar_problem sp;
    ps_problem *p = create_sar(&sp, 17);
    write_kept(path, p);

    /* the file as a user sees it: /sar/vop [Nq,Nc,Nc,2] with sar_max and
     * tr on it, b1_max a root attribute [Nc] */
    hsize_t dims[H5S_MAX_RANK];
    assert_int_equal(dset_shape(path, "/sar/vop", dims), 4);
    assert_true(dims[0] == NQ && dims[1] == NC && dims[2] == NC && dims[3] == 2);
    double v[NC];
    assert_int_equal(read_attr_vec(path, "/sar/vop", "sar_max", v, 1), 0);
    assert_true(v[0] == 3.25);
    assert_int_equal(read_attr_vec(path, "/sar/vop", "tr", v, 1), 0);
    assert_true(v[0] == 0.02);
    assert_int_equal(read_attr_vec(path, "/", "b1_max", v, NC), 1);
    assert_same(v, sp.b1max, NC, "attribute b1_max");
    char attrs[256];
    stored_root_attrs(path, attrs);
    assert_string_equal(attrs, "dt,gamma_bar,lambda,loss,b1_max");

    /* read back: the same problem, the same hash (a checkpoint resumes) */
    ps_problem *q = read_same(path, p);
    assert_no_open_handles();
    ps_problem_desc b;
    assert_int_equal(ps_problem_describe(q, &b), 0);
    assert_int_equal(b.nq, NQ);
    assert_same(b.vop, sp.vop, NQ * NC * NC * 2, "/sar/vop read");
    assert_int_equal(ps_problem_nq(q), NQ);
    assert_same(b.vop, sp.vop, NQ * NC * NC * 2, "vop");
    assert_true(b.sar_max == 3.25);
    assert_true(b.tr == 0.02);
    assert_true(isinf(b.b1_max));
    assert_same(b.b1_max_channel, sp.b1max, NC, "b1_max_channel");
    assert_same(b.b1map, sp.cp.b1map, NS * NC * 2, "b1map");
    ps_problem_free(q);
    ps_problem_free(p);

    /* one channel: /sar/vop [Nq,1,1,2], the scalar b1_max beside it */
    full_problem fp;
    make_full(&fp, 19);
    double vop1[3 * 2] = {2.0, 0.0, 0.5, 0.0, 1.25, 0.0};
    fp.d.nq = 3;
    fp.d.vop = vop1;
    fp.d.sar_max = 0.75;
    fp.d.tr = 5e-3;
    assert_int_equal(ps_problem_create(&fp.d, &p), 0);
    write_kept(path, p);
    assert_int_equal(dset_shape(path, "/sar/vop", dims), 4);
    assert_true(dims[0] == 3 && dims[1] == 1 && dims[2] == 1 && dims[3] == 2);
    assert_int_equal(read_attr_vec(path, "/", "b1_max", v, 1), 0);
    assert_true(v[0] == 0.3);
    q = read_same(path, p);
    ps_problem_describe(q, &b);
    assert_int_equal(b.nq, 3);
    assert_same(b.vop, vop1, 6, "one-channel vop");
    assert_true(b.b1_max == 0.3);
    assert_null(b.b1_max_channel);
    ps_problem_free(q);
    ps_problem_free(p);

    /* a problem without VOPs has no /sar group */
    write_full(path);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_false(H5Lexists(f, "/sar", H5P_DEFAULT) > 0);
    H5Fclose(f);
    assert_no_open_handles();
}

static void test_sar_result_and_eval(void **state)
{
    (void)state;
    const char *rpath = "io_sar_result.h5", *epath = "io_sar_eval.h5";
    sar_problem sp;
    ps_problem *p = create_sar(&sp, 23);
    double x[2 * NC * NT], grad[2 * NC * NT], m[NS * 3];
    random_outputs(29, 2 * NC * NT, x, grad, m);
    ps_progress hist[4];
    memset(hist, 0, sizeof hist);
    for (int i = 0; i < 4; i++) {
        hist[i].iteration = i;
        hist[i].f = 4.0 - i;
        hist[i].round = i < 2 ? 0 : i - 1; /* rounds 0, 0, 1, 2 */
    }
    ps_result r;
    memset(&r, 0, sizeof r);
    r.status = PS_CONSTRAINT_VIOLATED;
    r.iterations = 3;
    r.f = 1.0;
    r.history = hist;
    r.history_len = 4;
    r.rounds = 3;
    r.mu = 100.0;
    r.violation = 2.5e-2;
    write_result_and_eval(rpath, epath, p, x, grad, m, &r);

    /* /result/constraints: the values of ps_constraints at x, the limits */
    double peak[NC], sar[NQ];
    tu_poison(peak, NC);
    tu_poison(sar, NQ);
    assert_int_equal(ps_constraints(p, x, peak, sar), 0);
    for (size_t q = 0; q < NQ; q++)
        assert_true(sar[q] > 0.0);
    hid_t f = H5Fopen(rpath, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    double *fpeak = read_dset(f, "/result/constraints/peak_b1", 1, NC, 0);
    double *flim = read_dset(f, "/result/constraints/b1_max", 1, NC, 0);
    double *fsar = read_dset(f, "/result/constraints/sar", 1, NQ, 0);
    assert_same(fpeak, peak, NC, "peak_b1");
    assert_same(flim, sp.b1max, NC, "b1_max");
    assert_same(fsar, sar, NQ, "sar");
    free(fpeak);
    free(flim);
    free(fsar);
    hid_t g = H5Gopen2(f, "/result/constraints", H5P_DEFAULT);
    assert_true(g >= 0);
    assert_int_equal(read_attr_i(g, "rounds"), 3);
    assert_true(read_attr_d(g, "mu") == 100.0);
    assert_true(read_attr_d(g, "violation") == 2.5e-2);
    H5Gclose(g);
    hid_t ds = H5Dopen2(f, "/result/constraints/sar", H5P_DEFAULT);
    assert_true(read_attr_d(ds, "sar_max") == 3.25);
    H5Dclose(ds);
    g = H5Gopen2(f, "/result", H5P_DEFAULT);
    assert_int_equal(read_attr_i(g, "status"), PS_CONSTRAINT_VIOLATED);
    H5Gclose(g);
    double *h = read_dset(f, "/result/history", 2, 4, 7);
    assert_non_null(h);
    for (int i = 0; i < 4; i++)
        assert_true(h[7 * i + 6] == (double)hist[i].round);
    free(h);
    H5Fclose(f);

    /* both files read back as the problem, VOPs and limits included */
    ps_problem *q = read_same(rpath, p);
    double xr[2 * NC * NT];
    assert_int_equal(ps_problem_x0(q, xr), 0);
    assert_same(xr, x, 2 * NC * NT, "x0 of the result file");
    ps_problem_free(q);
    q = read_same(epath, p);
    ps_problem_free(q);
    assert_no_open_handles();
    ps_problem_free(p);
}

static void test_sar_malformed(void **state)
{
    (void)state;
    const char *path = "io_bad_sar.h5";
    const size_t q1 = 2 * NC * NC; /* the first element of VOP 1 */

    /* not Hermitian, not positive semidefinite, not finite: named as /sar/vop */
    write_sar(path);
    poke(path, "/sar/vop", q1 + 2 * (0 * NC + 2) + 1, 0.75); /* Im Q_1[0][2] */
    expect_read_error(path, PS_ERR_SAR, "/sar/vop: ", "vop[1] is not Hermitian");
    write_sar(path);
    poke(path, "/sar/vop", q1 + 2 * (1 * NC + 1), -5.0); /* Q_1[1][1] < 0 */
    expect_read_error(path, PS_ERR_SAR, "/sar/vop: ", "vop[1] is not positive semidefinite");
    write_sar(path);
    poke(path, "/sar/vop", q1 + 2 * (2 * NC + 1) + 1, NAN);
    expect_read_error(path, PS_ERR_NONFINITE, "/sar/vop: element [1][2][1][1]", "is NaN");
    write_sar(path);
    poke(path, "/sar/vop", 0, -INFINITY);
    expect_read_error(path, PS_ERR_NONFINITE, "/sar/vop: element [0][0][0][0]", "is Inf");

    /* the shape: VOPs of another channel count, rank, width, empty, too many */
    write_sar(path);
    replace_dset_n(path, "/sar/vop", H5T_IEEE_F64LE, 4, (hsize_t[]){NQ, 2, 2, 2}, 1.0, 0.0);
    expect_read_error(path, PS_ERR_FILE,
                      "/sar/vop: wrong shape: expected [Nq,Nc,Nc,2] = [Nq,3,3,2], got [2,2,2,2]",
                      "VOPs of Nc = 2 channels, but the problem has Nc = 3 (those of /spins/b1map)");
    write_full(path); /* one channel without a b1map: VOPs [Nq,1,1,2] */
    {
        hid_t f = open_rw(path);
        H5Gclose(H5Gcreate2(f, "/sar", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
        H5Fclose(f);
    }
    replace_dset_n(path, "/sar/vop", H5T_IEEE_F64LE, 4, (hsize_t[]){1, 2, 2, 2}, 1.0, 0.0);
    expect_read_error(path, PS_ERR_FILE, "/sar/vop", "Nc = 2 channels, but the problem has Nc = 1 "
                      "(no /spins/b1map)");
    write_sar(path);
    replace_dset_n(path, "/sar/vop", H5T_IEEE_F64LE, 3, (hsize_t[]){NQ, NC, NC}, 1.0, 0.0);
    expect_read_error(path, PS_ERR_FILE, "/sar/vop: wrong shape", "got [2,3,3]");
    write_sar(path);
    replace_dset_n(path, "/sar/vop", H5T_IEEE_F64LE, 4, (hsize_t[]){NQ, NC, NC, 3}, 1.0, 0.0);
    expect_read_error(path, PS_ERR_FILE, "/sar/vop: wrong shape", "got [2,3,3,3]");
    write_sar(path);
    replace_dset_n(path, "/sar/vop", H5T_IEEE_F64LE, 4, (hsize_t[]){0, NC, NC, 2}, 1.0, 0.0);
    expect_read_error(path, PS_ERR_SIZE, "/sar/vop", "Nq = 0 rows");
    write_sar(path);
    replace_dset_n(path, "/sar/vop", H5T_IEEE_F64LE, 4,
                   (hsize_t[]){PS_MAX_VOPS + 1, NC, NC, 2}, 1.0, 0.0);
    expect_read_error(path, PS_ERR_SIZE, "/sar/vop: 257 VOPs", "limit of 256");
    write_sar(path);
    replace_dset_string(path, "/sar/vop");
    expect_read_error(path, PS_ERR_FILE, "/sar/vop", "string");

    /* its attributes: both required, float64 scalars, sar_max and tr > 0 */
    write_sar(path);
    delete_attr(path, "/sar/vop", "sar_max");
    expect_read_error(path, PS_ERR_FILE, "/sar/vop: attribute sar_max: missing", NULL);
    write_sar(path);
    delete_attr(path, "/sar/vop", "tr");
    expect_read_error(path, PS_ERR_FILE, "/sar/vop: attribute tr: missing", NULL);
    write_sar(path);
    set_attr_n(path, "/sar/vop", "sar_max", H5T_IEEE_F64LE, 0, NULL, (double[]){NAN});
    expect_read_error(path, PS_ERR_NONFINITE, "/sar/vop: attribute sar_max", "NaN");
    write_sar(path);
    set_attr_n(path, "/sar/vop", "sar_max", H5T_IEEE_F64LE, 0, NULL, (double[]){-1.0});
    expect_read_error(path, PS_ERR_SAR, "/sar/vop: attribute sar_max", "must be finite and > 0");
    write_sar(path);
    set_attr_n(path, "/sar/vop", "tr", H5T_IEEE_F64LE, 0, NULL, (double[]){0.0});
    expect_read_error(path, PS_ERR_SAR, "/sar/vop: attribute tr", "tr = 0 must be");
    write_sar(path);
    set_attr_n(path, "/sar/vop", "tr", H5T_IEEE_F64LE, 0, NULL, (double[]){NAN});
    expect_read_error(path, PS_ERR_NONFINITE, "/sar/vop: attribute tr", "tr is NaN");
    write_sar(path);
    set_attr_n(path, "/sar/vop", "tr", H5T_IEEE_F64LE, 1, (hsize_t[]){2}, (double[]){1.0, 2.0});
    expect_read_error(path, PS_ERR_FILE, "/sar/vop: attribute tr: wrong shape", "a scalar");
    write_sar(path);
    set_attr_n(path, "/sar/vop", "sar_max", H5T_STD_I32LE, 0, NULL, (double[]){2.0});
    expect_read_ok(path); /* an integer is a number */

    /* both a B1 scale and a B1 map, VOPs or not */
    write_sar(path);
    replace_dset_n(path, "/spins/b1", H5T_IEEE_F64LE, 1, (hsize_t[]){NS}, 1.0, 1e-3);
    expect_read_error(path, PS_ERR_CHANNELS, "/spins/b1map", "/spins/b1 ");
}

/* The root attribute b1_max: a vector [Nc] (one limit per channel), any
 * other one-element attribute (one limit), nothing else. */
static void test_b1max_forms(void **state)
{
    (void)state;
    const char *path = "io_b1max.h5";
    char err[512];
    ps_problem *q = NULL;
    ps_problem_desc d;
    const double lim[NC] = {0.25, 0.5, 0.125}; /* float32 too */

    /* [Nc]: one limit per channel */
    write_channels(path);
    set_attr_n(path, "/", "b1_max", H5T_IEEE_F64LE, 1, (hsize_t[]){NC}, lim);
    assert_int_equal(ps_h5_read_problem(path, &q, err, sizeof err), 0);
    ps_problem_describe(q, &d);
    assert_true(isinf(d.b1_max));
    assert_same(d.b1_max_channel, lim, NC, "b1_max [Nc]");
    ps_problem_free(q);
    /* float32 is read as double */
    set_attr_n(path, "/", "b1_max", H5T_IEEE_F32LE, 1, (hsize_t[]){NC}, lim);
    assert_int_equal(ps_h5_read_problem(path, &q, err, sizeof err), 0);
    ps_problem_describe(q, &d);
    assert_same(d.b1_max_channel, lim, NC, "b1_max [Nc] float32");
    ps_problem_free(q);
    /* one element, of rank 0, 1 or 2: one limit, for several channels too */
    const int ranks[3] = {0, 1, 2};
    for (int i = 0; i < 3; i++) {
        set_attr_n(path, "/", "b1_max", H5T_IEEE_F64LE, ranks[i], (hsize_t[]){1, 1}, lim);
        assert_int_equal(ps_h5_read_problem(path, &q, err, sizeof err), 0);
        ps_problem_describe(q, &d);
        assert_true(d.b1_max == lim[0]);
        assert_null(d.b1_max_channel);
        ps_problem_free(q);
    }
    /* one channel: [1] is [Nc], the limit of the one channel; a scalar or
     * [1,1] one limit (the same constraint, told apart by the problem) */
    write_full(path);
    set_attr_n(path, "/", "b1_max", H5T_IEEE_F64LE, 1, (hsize_t[]){1}, lim);
    assert_int_equal(ps_h5_read_problem(path, &q, err, sizeof err), 0);
    ps_problem_describe(q, &d);
    assert_true(isinf(d.b1_max));
    assert_same(d.b1_max_channel, lim, 1, "b1_max [1] of one channel");
    ps_problem_free(q);
    set_attr_n(path, "/", "b1_max", H5T_IEEE_F64LE, 2, (hsize_t[]){1, 1}, lim);
    assert_int_equal(ps_h5_read_problem(path, &q, err, sizeof err), 0);
    ps_problem_describe(q, &d);
    assert_true(d.b1_max == lim[0]);
    assert_null(d.b1_max_channel);
    ps_problem_free(q);
    /* and both forms round-trip with their hash */
    full_problem fp;
    ps_problem *p = NULL;
    make_full(&fp, 37);
    fp.d.b1_max = PS_B1MAX_NONE;
    fp.d.b1_max_channel = lim;
    assert_int_equal(ps_problem_create(&fp.d, &p), 0);
    write_kept(path, p);
    q = read_same(path, p);
    ps_problem_describe(q, &d);
    assert_same(d.b1_max_channel, lim, 1, "b1_max_channel of one channel");
    ps_problem_free(q);
    ps_problem_free(p);
    make_full(&fp, 37);
    assert_int_equal(ps_problem_create(&fp.d, &p), 0);
    write_kept(path, p);
    q = read_same(path, p);
    ps_problem_describe(q, &d);
    assert_true(d.b1_max == 0.3);
    assert_null(d.b1_max_channel);
    ps_problem_free(q);
    ps_problem_free(p);

    /* another length than Nc, a matrix, NaN, a limit <= 0, not a float */
    write_channels(path);
    set_attr_n(path, "/", "b1_max", H5T_IEEE_F64LE, 1, (hsize_t[]){2}, lim);
    expect_read_error(path, PS_ERR_FILE, "attribute b1_max: wrong length: 2 limits",
                      "Nc = 3 channels");
    write_full(path);
    set_attr_n(path, "/", "b1_max", H5T_IEEE_F64LE, 1, (hsize_t[]){3}, lim);
    expect_read_error(path, PS_ERR_FILE, "attribute b1_max: wrong length: 3 limits",
                      "Nc = 1 channel (no /spins/b1map)");
    write_channels(path);
    set_attr_n(path, "/", "b1_max", H5T_IEEE_F64LE, 2, (hsize_t[]){NC, 1}, lim);
    expect_read_error(path, PS_ERR_FILE, "attribute b1_max: wrong shape",
                      "expected a scalar or [Nc] = [3]");
    write_channels(path);
    set_attr_n(path, "/", "b1_max", H5T_IEEE_F64LE, 1, (hsize_t[]){NC}, (double[]){0.2, NAN, 0.1});
    expect_read_error(path, PS_ERR_B1MAX, "attribute b1_max", "nan (channel 1) is not a peak limit");
    write_channels(path);
    set_attr_n(path, "/", "b1_max", H5T_IEEE_F64LE, 1, (hsize_t[]){NC}, (double[]){0.2, 0.1, 0.0});
    expect_read_error(path, PS_ERR_B1MAX, "attribute b1_max", "0 (channel 2) is not a peak limit");
    write_channels(path);
    set_attr_n(path, "/", "b1_max", H5T_IEEE_F64LE, 1, (hsize_t[]){NC},
               (double[]){0.2, INFINITY, 0.1});
    expect_read_error(path, PS_ERR_B1MAX, "attribute b1_max", "inf (channel 1) is not a peak limit");
    write_channels(path);
    set_attr_n(path, "/", "b1_max", H5T_IEEE_F64LE, 0, NULL, (double[]){NAN});
    expect_read_error(path, PS_ERR_B1MAX, "attribute b1_max", "nan");
    write_channels(path);
    set_attr_n(path, "/", "b1_max", H5T_STD_I32LE, 1, (hsize_t[]){NC}, (double[]){1, 2, 3});
    expect_read_ok(path); /* an integer is a number */
    /* absence is the only "no limit": Inf, a negative value and 0 are errors */
    write_channels(path);
    set_attr_n(path, "/", "b1_max", H5T_IEEE_F64LE, 0, NULL, (double[]){INFINITY});
    expect_read_error(path, PS_ERR_B1MAX, "attribute b1_max", "inf is not a peak limit");
    write_channels(path);
    set_attr_n(path, "/", "b1_max", H5T_IEEE_F64LE, 0, NULL, (double[]){-0.1});
    expect_read_error(path, PS_ERR_B1MAX, "attribute b1_max", "-0.1 is not a peak limit");
    write_channels(path);
    set_attr_n(path, "/", "b1_max", H5T_IEEE_F64LE, 0, NULL, (double[]){0.0});
    expect_read_error(path, PS_ERR_B1MAX, "attribute b1_max", "0 is not a peak limit");
}

/* ---- gradient design and RF mask ------------------------------------- */

/* The full problem with the axes `axes` designed (smax 2e4 G/cm/s, gmax
 * 0.8 G/cm, g_end) and an RF mask holding steps 1 and 3 at zero; mask[NT]
 * is the caller's storage. */
static ps_problem *create_designed(full_problem *fp, uint64_t seed, unsigned axes, double *mask)
{
    make_full(fp, seed);
    for (size_t k = 0; k < NT; k++)
        mask[k] = k == 1 || k == 3 ? 0.0 : 1.0;
    fp->d.rf_mask = mask;
    fp->d.design_g = axes;
    fp->d.smax = 2e4;
    fp->d.gmax = 0.8;
    fp->d.g_end = 1;
    ps_problem *p = NULL;
    assert_int_equal(ps_problem_create(&fp->d, &p), PS_CONVERGED);
    return p;
}

static void write_designed(const char *path)
{
    full_problem fp;
    double mask[NT];
    write_and_free(path, create_designed(&fp, 51, PS_AXIS_X | PS_AXIS_Z, mask));
}

static void test_roundtrip_gradient(void **state)
{
    (void)state;
    const char *path = "io_grad.h5";
    full_problem fp;
    double mask[NT];
    char sbuf[64];
    ps_problem *p = create_designed(&fp, 41, PS_AXIS_X | PS_AXIS_Z, mask);
    write_kept(path, p);
    ps_problem *q = read_same(path, p);
    ps_problem_desc b;
    assert_int_equal(ps_problem_describe(q, &b), 0);
    assert_int_equal(b.design_g, PS_AXIS_X | PS_AXIS_Z);
    assert_true(b.smax == 2e4 && b.gmax == 0.8 && b.g_end == 1);
    assert_same(b.rf_mask, mask, NT, "rf_mask");
    assert_same(b.g, fp.g, NT * 3, "g");
    assert_int_equal(ps_problem_nx(q), 2 * NT + 2 * NT);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    read_attr_s(f, "design_g", sbuf, sizeof sbuf);
    assert_string_equal(sbuf, "xz");
    assert_true(read_attr_d(f, "smax") == 2e4);
    assert_true(read_attr_d(f, "gmax") == 0.8);
    assert_int_equal(read_attr_i(f, "g_end"), 1);
    double *rm = read_dset(f, "/pulse/rf_mask", 1, NT, 0);
    assert_same(rm, mask, NT, "/pulse/rf_mask");
    free(rm);
    H5Fclose(f);
    ps_problem_free(q);
    ps_problem_free(p);

    /* every subset of the axes; without gmax and g_end no gmax attribute */
    for (unsigned axes = 1; axes < 8; axes++) {
        make_full(&fp, 42 + axes);
        fp.d.design_g = axes;
        fp.d.smax = 1.5e4;
        assert_int_equal(ps_problem_create(&fp.d, &p), PS_CONVERGED);
        write_kept(path, p);
        q = read_same(path, p);
        assert_int_equal(ps_problem_describe(q, &b), 0);
        assert_int_equal(b.design_g, axes);
        assert_true(b.smax == 1.5e4 && b.gmax == 0.0 && b.g_end == 0);
        assert_null(b.rf_mask);
        f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        assert_int_equal(H5Aexists(f, "gmax"), 0);
        assert_int_equal(read_attr_i(f, "g_end"), 0);
        assert_int_equal(H5Lexists(f, "/pulse/rf_mask", H5P_DEFAULT), 0);
        H5Fclose(f);
        ps_problem_free(q);
        ps_problem_free(p);
    }

    /* numbers written as integers (h5py's for a Python int) are read too */
    write_designed(path);
    const double v15 = 15000.0, v4 = 4.0, v0 = 0.0;
    set_attr_n(path, "/", "smax", H5T_STD_I64LE, 0, NULL, &v15);
    set_attr_n(path, "/", "gmax", H5T_STD_I32LE, 0, NULL, &v4);
    set_attr_n(path, "/", "g_end", H5T_STD_I64LE, 0, NULL, &v0);
    char err[512];
    assert_int_equal(ps_h5_read_problem(path, &q, err, sizeof err), 0);
    assert_int_equal(ps_problem_describe(q, &b), 0);
    assert_true(b.smax == 15000.0 && b.gmax == 4.0 && b.g_end == 0);
    ps_problem_free(q);
    /* a fixed-length string names the axes as well */
    set_root_attr_string(path, "design_g", "y");
    assert_int_equal(ps_h5_read_problem(path, &q, err, sizeof err), 0);
    assert_int_equal(ps_problem_describe(q, &b), 0);
    assert_int_equal(b.design_g, PS_AXIS_Y);
    ps_problem_free(q);
    assert_no_open_handles();
}

static void test_gradient_malformed(void **state)
{
    (void)state;
    const char *path = "io_bad_grad.h5";
    const double two[2] = {1e4, 2e4};
    const hsize_t n2[1] = {2};
    static const char *const bad_axes[] = {"yx", "", "xx", "w", "x,y", "XY"};
    for (size_t i = 0; i < sizeof bad_axes / sizeof bad_axes[0]; i++) {
        write_designed(path);
        set_root_attr_string(path, "design_g", bad_axes[i]);
        char want[64];
        snprintf(want, sizeof want, "'%s' is not a set of gradient axes", bad_axes[i]);
        expect_read_error(path, PS_ERR_GRADIENT, "attribute design_g", want);
    }
    write_designed(path);
    set_root_attr_double(path, "design_g", 3.0);
    expect_read_error(path, PS_ERR_FILE, "attribute design_g: wrong type", "string");

    write_designed(path);
    set_root_attr_string(path, "smax", "fast");
    expect_read_error(path, PS_ERR_FILE, "attribute smax: wrong type", "integer or float");
    write_designed(path);
    set_attr_n(path, "/", "smax", H5T_IEEE_F64LE, 1, n2, two);
    expect_read_error(path, PS_ERR_FILE, "attribute smax: wrong shape", "2 values");
    write_designed(path);
    delete_attr(path, "/", "smax");
    expect_read_error(path, PS_ERR_GRADIENT, "attribute smax", "smax is missing");
    /* values the validation refuses, named by their attribute */
    static const struct {
        const char *attr;
        double v;
        int status;
        const char *msg;
    } bad_values[] = {
        {"smax", NAN, PS_ERR_NONFINITE, "smax is NaN"},
        {"smax", -1.0, PS_ERR_GRADIENT, "smax = -1 must be finite and > 0"},
        {"gmax", -1.0, PS_ERR_GRADIENT, "gmax = -1 must be"},
        {"g_end", 0.5, PS_ERR_GRADIENT, "g_end = 0.5 must be 0 or 1"},
        {"g_end", 2.0, PS_ERR_GRADIENT, "g_end = 2 must be 0 or 1"},
    };
    for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++) {
        char where[64];
        write_designed(path);
        set_root_attr_double(path, bad_values[i].attr, bad_values[i].v);
        snprintf(where, sizeof where, "attribute %s: ", bad_values[i].attr);
        expect_read_error(path, bad_values[i].status, where, bad_values[i].msg);
    }
    write_designed(path);
    delete_attr(path, "/", "gmax");
    expect_read_error(path, PS_ERR_GRADIENT, "attribute g_end", "g_end needs gmax");
    /* limits without designed axes */
    write_designed(path);
    delete_attr(path, "/", "design_g");
    expect_read_error(path, PS_ERR_GRADIENT, "attribute smax", "without design_g");
    write_full(path);
    set_root_attr_double(path, "gmax", 4.0);
    expect_read_error(path, PS_ERR_GRADIENT, "attribute gmax", "without design_g");
}

static void test_rf_mask_malformed(void **state)
{
    (void)state;
    const char *path = "io_bad_mask.h5";
    write_designed(path);
    replace_dset(path, "/pulse/rf_mask", H5T_IEEE_F64LE, 1, NT + 1, 0, 1.0);
    expect_read_error(path, PS_ERR_FILE, "/pulse/rf_mask: wrong shape", "expected [Nt] = [5], got [6]");
    write_designed(path);
    replace_dset(path, "/pulse/rf_mask", H5T_IEEE_F64LE, 2, NT, 1, 1.0);
    expect_read_error(path, PS_ERR_FILE, "/pulse/rf_mask: wrong shape", "got [5,1]");
    write_designed(path);
    replace_dset(path, "/pulse/rf_mask", H5T_STD_I32LE, 1, NT, 0, 1.0);
    expect_read_ok(path); /* an integer mask, as MATLAB writes it */
    write_designed(path);
    poke(path, "/pulse/rf_mask", 3, 0.5);
    expect_read_error(path, PS_ERR_RF_MASK, "/pulse/rf_mask: ", "rf_mask[3] = 0.5 must be 0 or 1");
    write_designed(path);
    poke(path, "/pulse/rf_mask", 2, -1.0);
    expect_read_error(path, PS_ERR_RF_MASK, "/pulse/rf_mask: ", "rf_mask[2] = -1 must be 0 or 1");
    write_designed(path);
    poke(path, "/pulse/rf_mask", 4, NAN);
    expect_read_error(path, PS_ERR_NONFINITE, "/pulse/rf_mask: ", "rf_mask[4] is NaN");
    /* a mask of zeros and ones alone is fine; so is one without designed axes */
    write_full(path);
    replace_dset(path, "/pulse/rf_mask", H5T_IEEE_F64LE, 1, NT, 0, 0.0);
    poke(path, "/pulse/rf_mask", 2, 1.0);
    char err[512];
    ps_problem *q = NULL;
    assert_int_equal(ps_h5_read_problem(path, &q, err, sizeof err), 0);
    ps_problem_desc b;
    assert_int_equal(ps_problem_describe(q, &b), 0);
    for (size_t k = 0; k < NT; k++)
        assert_true(b.rf_mask[k] == (k == 2 ? 1.0 : 0.0));
    ps_problem_free(q);
    assert_no_open_handles();
}

static void test_gradient_result_and_eval(void **state)
{
    (void)state;
    const char *rpath = "io_grad_result.h5", *epath = "io_grad_eval.h5";
    full_problem fp;
    double mask[NT];
    char err[512], sbuf[64];
    ps_problem *p = create_designed(&fp, 61, PS_AXIS_Y | PS_AXIS_Z, mask);
    const size_t nx = ps_problem_nx(p), nrf = 2 * NT;
    assert_int_equal(nx, nrf + 2 * NT);
    double x[4 * NT], grad[4 * NT], m[NS * 3], gg[NT * 3];
    random_outputs(71, nx, x, grad, m);
    for (size_t i = 0; i < NT * 3; i++)
        gg[i] = 0.25 * (double)i - 1.0;
    ps_result r;
    memset(&r, 0, sizeof r);
    r.status = PS_CONVERGED;
    r.rounds = 3;
    r.mu = 100.0;
    r.violation = 1e-4;
    int st = ps_h5_write_result(rpath, p, x, m, &r, err, sizeof err);
    if (!st)
        st = ps_h5_write_eval(epath, p, x, 0.5, grad, gg, m, err, sizeof err);
    if (st)
        printf("%s\n", err);
    assert_int_equal(st, 0);
    assert_no_open_handles();

    /* /pulse/g: x the problem's, y and z x's waveforms */
    double want_g[NT * 3];
    for (size_t k = 0; k < NT; k++) {
        want_g[3 * k] = fp.g[3 * k];
        want_g[3 * k + 1] = x[nrf + k];
        want_g[3 * k + 2] = x[nrf + NT + k];
    }
    const char *both[2] = {rpath, epath};
    for (int i = 0; i < 2; i++) {
        hid_t f = H5Fopen(both[i], H5F_ACC_RDONLY, H5P_DEFAULT);
        double *g = read_dset(f, "/pulse/g", 2, NT, 3);
        assert_same(g, want_g, NT * 3, "/pulse/g");
        free(g);
        double *rm = read_dset(f, "/pulse/rf_mask", 1, NT, 0);
        assert_same(rm, mask, NT, "/pulse/rf_mask");
        free(rm);
        H5Fclose(f);
    }
    /* the report: per designed axis y, z */
    hid_t f = H5Fopen(rpath, H5F_ACC_RDONLY, H5P_DEFAULT);
    double *pg = read_dset(f, "/result/constraints/peak_g", 1, 2, 0);
    double *ps = read_dset(f, "/result/constraints/peak_slew", 1, 2, 0);
    double *pe = read_dset(f, "/result/constraints/end_g", 1, 2, 0);
    assert_non_null(pg);
    assert_non_null(ps);
    assert_non_null(pe);
    for (int i = 0; i < 2; i++) {
        double want[3];
        tu_waveform_values(x + nrf + (size_t)i * NT, NT, 1, fp.d.dt, want);
        printf("axis %c: %g %g %g\n", "yz"[i], pg[i], ps[i], pe[i]);
        assert_true(pg[i] == want[0] && ps[i] == want[1] && pe[i] == want[2]);
    }
    free(pg);
    free(ps);
    free(pe);
    hid_t cg = H5Gopen2(f, "/result/constraints", H5P_DEFAULT);
    read_attr_s(cg, "design_g", sbuf, sizeof sbuf);
    assert_string_equal(sbuf, "yz");
    assert_int_equal(read_attr_i(cg, "rf_free_steps"), NT - 2);
    assert_int_equal(read_attr_i(cg, "rounds"), 3);
    H5Gclose(cg);
    H5Fclose(f);
    double lim;
    read_attr_vec(rpath, "/result/constraints/peak_g", "gmax", &lim, 1);
    assert_true(lim == 0.8);
    read_attr_vec(rpath, "/result/constraints/peak_slew", "smax", &lim, 1);
    assert_true(lim == 2e4);
    read_attr_vec(rpath, "/result/constraints/end_g", "g_end", &lim, 1);
    assert_true(lim == 1.0);
    f = H5Fopen(epath, H5F_ACC_RDONLY, H5P_DEFAULT);
    double *rg = read_dset(f, "/eval/gradient_g", 2, NT, 3);
    assert_same(rg, gg, NT * 3, "/eval/gradient_g");
    free(rg);
    H5Fclose(f);

    /* the whole point reads back from either file, the waveforms included */
    for (int i = 0; i < 2; i++) {
        double xr[4 * NT];
        tu_poison(xr, nx);
        st = ps_h5_read_x(both[i], p, xr, err, sizeof err);
        if (st)
            printf("%s\n", err);
        assert_int_equal(st, 0);
        assert_same(xr, x, nx, "x read back");
    }
    /* a result file is a problem that starts from the result, g included */
    ps_problem *q = NULL;
    assert_int_equal(ps_h5_read_problem(rpath, &q, err, sizeof err), 0);
    double x0[4 * NT];
    assert_int_equal(ps_problem_x0(q, x0), 0);
    assert_same(x0 + nrf, x + nrf, 2 * NT, "designed waveforms of x0");
    ps_problem_free(q);
    /* a waveform that is not finite on a designed axis, named */
    poke(rpath, "/pulse/g", 3 * 2 + 2, INFINITY);
    double xr[4 * NT];
    memset(err, 'x', sizeof err);
    st = ps_h5_read_x(rpath, p, xr, err, sizeof err);
    printf("%s\n", err);
    assert_int_equal(st, PS_ERR_NONFINITE);
    assert_msg(err, rpath);
    assert_msg(err, "/pulse/g: row 2 is not finite on the designed axis z");
    /* on an axis not designed, it is not read */
    poke(rpath, "/pulse/g", 3 * 2 + 2, 0.0);
    poke(rpath, "/pulse/g", 3 * 4, NAN);
    assert_int_equal(ps_h5_read_x(rpath, p, xr, err, sizeof err), 0);
    assert_no_open_handles();
    ps_problem_free(p);
}

/*
 * An attribute that exists but cannot be read is an error, never a
 * default: every byte of the attribute lambda from its name to its value
 * (the name, its datatype and dataspace) is changed in turn, and each file
 * read (in a child process, which no corruption can crash or hang; names
 * checked strictly, so that a changed name is an unknown attribute)
 * either gives lambda exactly or fails; lambda at its default (0) from a
 * file that holds 0.125 would be a silent misreading. (A changed message
 * type before the name makes libhdf5 skip the whole message as one it
 * does not know: the attribute is then absent for any reader; a changed
 * value is another value, which no reader can tell without a checksum.)
 */
static void test_unreadable_attribute(void **state)
{
    (void)state;
    const char *path = "io_attr_bytes.h5", *bad = "io_attr_bytes_bad.h5";
    write_full(path);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static unsigned char b[1 << 16];
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    assert_true(n > 0 && n < sizeof b);
    size_t at = 0;
    for (size_t i = 0; i + 6 <= n && !at; i++)
        if (!memcmp(b + i, "lambda", 6))
            at = i;
    assert_true(at > 0);
    /* strict: a changed name is an unknown attribute (without --strict a
     * warning names it) */
    const ps_h5_read_opts strict = {.strict = 1};
    int ok = 0, failed = 0;
    /* the value 0.125 (float64, little-endian) ends the attribute's bytes */
    const unsigned char value[8] = {0, 0, 0, 0, 0, 0, 0xc0, 0x3f};
    size_t end = at;
    while (end + 8 <= n && memcmp(b + end, value, 8) != 0)
        end++;
    assert_true(end + 8 <= n && end < at + 96);
    for (size_t i = at; i < end; i++) {
        unsigned char save = b[i];
        b[i] ^= 0xff;
        f = fopen(bad, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(b, 1, n, f), n);
        fclose(f);
        b[i] = save;
        ps_problem *p = NULL;
        char err[512];
        int st = ps_h5_read_problem_isolated(bad, &strict, 10.0, &p, err, sizeof err);
        if (st) {
            failed++;
            continue;
        }
        ps_problem_desc d;
        ps_problem_describe(p, &d);
        if (d.lambda != 0.125)
            printf("byte %zu changed: lambda read as %g\n", i, d.lambda);
        assert_true(d.lambda == 0.125);
        ps_problem_free(p);
        ok++;
    }
    printf("%d files read lambda exactly, %d refused\n", ok, failed);
    assert_true(failed > 0);
}

static void count_reading(void *user, uint64_t bytes)
{
    *(uint64_t *)user += bytes;
}

/* A small file that declares arrays larger than the memory can hold
 * (twice; four times through the isolated reader) is refused before they
 * are filled; the reader tells opts->reading the bytes of each array,
 * the isolated one too (from the child's reports, whose time limit grows
 * by them). */
static void test_declared_too_large(void **state)
{
    (void)state;
    const char *path = "io_declared_large.h5";
    write_full(path);
    uint64_t told = 0, told_iso = 0;
    ps_h5_read_opts o = {.reading = count_reading, .warn_user = &told};
    char err[512];
    ps_problem *p = NULL;
    assert_int_equal(ps_h5_read_problem_ex(path, &o, &p, err, sizeof err), 0);
    ps_problem_desc d;
    assert_int_equal(ps_problem_describe(p, &d), 0);
    assert_true(told >= (uint64_t)d.ns * 3 * 8 && told % 8 == 0); /* /spins/r and the rest */
    ps_problem_free(p);
    p = NULL;
    o.warn_user = &told_iso;
    assert_int_equal(ps_h5_read_problem_isolated(path, &o, 0.0, &p, err, sizeof err), 0);
    printf("arrays told: %llu bytes, %llu through the isolated reader\n",
           (unsigned long long)told, (unsigned long long)told_iso);
    assert_true(told_iso == told);
    ps_problem_free(p);
    p = NULL;

    /* [2^20,3] = 25.2 MB of unwritten chunks, against 60 MB of memory:
     * refused where four copies are held (the isolated reader), read
     * where two are */
    huge_dset(path, "/spins/r", (hsize_t)1 << 20, 3);
    o.memory = 60e6;
    told_iso = 0;
    memset(err, 'x', sizeof err);
    int st = ps_h5_read_problem_isolated(path, &o, 0.0, &p, err, sizeof err);
    printf("isolated -> %d: %s\n", st, err);
    assert_int_equal(st, PS_ERR_NO_MEMORY);
    assert_null(p);
    assert_msg(err, "/spins/r: [1048576,3] is 0.0252 GB; a problem's arrays are held four times");
    assert_msg(err, "0.06 GB of memory is available");
    st = ps_h5_read_problem_ex(path, &o, &p, err, sizeof err);
    printf("in the process -> %d: %s\n", st, err);
    assert_int_equal(st, PS_ERR_FILE); /* read; then /spins/target has 7 rows, not 2^20 */
    assert_msg(err, "/spins/target");
    /* 20 MB: refused at /spins/r, two copies */
    o.memory = 20e6;
    st = ps_h5_read_problem_ex(path, &o, &p, err, sizeof err);
    printf("in the process, 20 MB -> %d: %s\n", st, err);
    assert_int_equal(st, PS_ERR_NO_MEMORY);
    assert_msg(err, "is 0.0252 GB; a problem's arrays are held twice");
    assert_no_open_handles();

    /* this machine's memory, as the default */
    const double mem = ps_memory_bytes();
    printf("ps_memory_bytes: %.4g GB\n", mem / 1e9);
    assert_true(mem > 1e8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_full),
        cmocka_unit_test(test_roundtrip_minimal),
        cmocka_unit_test(test_result_file),
        cmocka_unit_test(test_eval_file),
        cmocka_unit_test(test_missing_dataset),
        cmocka_unit_test(test_wrong_shape),
        cmocka_unit_test(test_wrong_type),
        cmocka_unit_test(test_unreadable_attribute),
        cmocka_unit_test(test_declared_too_large),
        cmocka_unit_test(test_missing_attribute),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_not_hdf5),
        cmocka_unit_test(test_nonexistent),
        cmocka_unit_test(test_write_errors),
        cmocka_unit_test(test_roundtrip_channels),
        cmocka_unit_test(test_channels_result_and_eval),
        cmocka_unit_test(test_channels_malformed),
        cmocka_unit_test(test_one_channel_forms),
        cmocka_unit_test(test_roundtrip_sar),
        cmocka_unit_test(test_sar_result_and_eval),
        cmocka_unit_test(test_sar_malformed),
        cmocka_unit_test(test_b1max_forms),
        cmocka_unit_test(test_roundtrip_gradient),
        cmocka_unit_test(test_gradient_malformed),
        cmocka_unit_test(test_rf_mask_malformed),
        cmocka_unit_test(test_gradient_result_and_eval),
    };
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
