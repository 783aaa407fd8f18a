/*
 * The presets of docs/presets.md against their formulas, written here again
 * from the specification: positions, off-resonance, B1 scale, weights,
 * targets, gradient waveform, start pulse, loss, and the override syntax
 * "NAME:key=value,...", plus malformed names, keys and values.
 *
 * Tolerance: the same formulas evaluated in a possibly different order
 * agree to a few ulps; 1e-12 relative (plus 1e-13 of the array's scale for
 * values that cross zero) separates that from any formula error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "persolve.h"
#include "test_util.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#define GB PS_GAMMA_BAR_DEFAULT
#define RTOL 1e-12

static ps_problem *make(const char *spec, ps_problem_desc *d)
{
    ps_problem *p = NULL;
    char err[256] = "";
    int st = ps_preset_create(spec, &p, err, sizeof err);
    if (st != PS_CONVERGED)
        printf("preset '%s': %d %s\n", spec, st, err);
    assert_int_equal(st, PS_CONVERGED);
    assert_non_null(p);
    memset(d, 0, sizeof *d);
    assert_int_equal(ps_problem_describe(p, d), PS_CONVERGED);
    return p;
}

/* |a - b| <= RTOL |b| + atol */
static void near(const char *what, double a, double b, double atol)
{
    if (!(fabs(a - b) <= RTOL * fabs(b) + atol)) {
        printf("%s: got %.17g want %.17g\n", what, a, b);
        fail();
    }
}

/* An optional array that the spec fixes to a constant c: NULL (the
 * library's default, which equals c) or all elements equal to c. */
static void constant_or_null(const char *what, const double *a, size_t n,
                             double c, double dflt)
{
    if (!a) {
        assert_true(c == dflt);
        return;
    }
    for (size_t i = 0; i < n; i++)
        near(what, a[i], c, 0.0);
}

/* The start point in solver layout, poisoned first. */
static double *x0_of(const ps_problem *p, size_t nt)
{
    double *x = malloc(2 * nt * sizeof *x);
    assert_non_null(x);
    tu_poison(x, 2 * nt);
    assert_int_equal(ps_problem_x0(p, x), PS_CONVERGED);
    for (size_t i = 0; i < 2 * nt; i++)
        assert_true(x[i] != PS_POISON);
    return x;
}

/* ---- spiral2d ---- */

/*
 * Every spin and every gradient sample of spiral2d with parameters
 * (n, nt, fov, dt, flip in degrees, res), from docs/presets.md:
 *   x_i = (i - n/2 + 0.5) fov/n, same for y; j = i n + k for (x_i, y_k);
 *   df = 40 x/fov - 20 y/fov; s = 1 - 0.2 (x^2+y^2)/fov^2; w = 1;
 *   T = nt dt, t_k = k dt, kmax = 1/(2 res), turns = fov kmax,
 *   kr = kmax (1 - t/T), th = 2 pi turns (1 - t/T), kr' = -kmax/T,
 *   th' = -2 pi turns/T, Gx = -(kr' cos th - kr th' sin th)/gamma-bar,
 *   Gy = -(kr' sin th + kr th' cos th)/gamma-bar, Gz = 0;
 *   target (0, sin flip, cos flip) inside x^2+y^2 < (fov/4)^2, else (0,0,1);
 *   loss full, lambda 0, x0 = 0.
 */
static void check_spiral(const char *spec, size_t n, size_t nt, double fov,
                         double dt, double flip_deg, double res)
{
    ps_problem_desc d;
    ps_problem *p = make(spec, &d);
    printf("%s: ns %zu nt %zu\n", spec, d.ns, d.nt);
    assert_int_equal(d.ns, n * n);
    assert_int_equal(d.nt, nt);
    near("dt", d.dt, dt, 0.0);
    near("gamma_bar", d.gamma_bar, GB, 0.0);
    assert_int_equal(d.loss, PS_LOSS_FULL);
    assert_true(d.lambda == 0.0);
    assert_true(isinf(d.b1_max));
    assert_null(d.m0);
    assert_null(d.t1);
    assert_null(d.t2);
    constant_or_null("w", d.w, d.ns, 1.0, 1.0);

    double flip = flip_deg * M_PI / 180.0, rd = fov / 4.0;
    size_t inside = 0, outside = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < n; k++) {
            size_t j = i * n + k;
            double x = ((double)i + 0.5 - 0.5 * (double)n) * (fov / (double)n);
            double y = ((double)k + 0.5 - 0.5 * (double)n) * (fov / (double)n);
            near("r.x", d.r[3 * j], x, 1e-13 * fov);
            near("r.y", d.r[3 * j + 1], y, 1e-13 * fov);
            assert_true(d.r[3 * j + 2] == 0.0);
            assert_non_null(d.df);
            near("df", d.df[j], (40.0 * x - 20.0 * y) / fov, 1e-12);
            assert_non_null(d.b1scale);
            near("s", d.b1scale[j], 1.0 - 0.2 * (x * x + y * y) / (fov * fov),
                 0.0);
            double rr = x * x + y * y;
            if (fabs(rr - rd * rd) < 1e-9 * rd * rd)
                continue; /* on the disc's edge: either side is right */
            const double *t = d.target + 3 * j;
            if (rr < rd * rd) {
                inside++;
                assert_true(t[0] == 0.0);
                near("target.y in", t[1], sin(flip), 0.0);
                near("target.z in", t[2], cos(flip), 1e-15);
            } else {
                outside++;
                assert_true(t[0] == 0.0 && t[1] == 0.0 && t[2] == 1.0);
            }
        }
    }
    assert_true(inside > 0 && outside > 0);

    double T = (double)nt * dt, kmax = 0.5 / res, turns = fov * kmax;
    double gmax = 0.0;
    for (size_t k = 0; k < nt; k++) {
        double t = (double)k * dt, a = 1.0 - t / T;
        double kr = kmax * a, th = 2.0 * M_PI * turns * a;
        double dkr = -kmax / T, dth = -2.0 * M_PI * turns / T;
        /* G = -(d/dt)(kr cos th, kr sin th) / gamma-bar */
        double gx = -(dkr * cos(th) - kr * sin(th) * dth) / GB;
        double gy = -(dkr * sin(th) + kr * cos(th) * dth) / GB;
        gmax = fmax(gmax, hypot(gx, gy));
        near("Gx", d.g[3 * k], gx, 1e-13 * 2.0 * M_PI * turns * kmax / T / GB);
        near("Gy", d.g[3 * k + 1], gy,
             1e-13 * 2.0 * M_PI * turns * kmax / T / GB);
        assert_true(d.g[3 * k + 2] == 0.0);
    }
    assert_true(gmax > 0.0);

    /* x0 = 0 */
    double *x = x0_of(p, nt);
    for (size_t i = 0; i < 2 * nt; i++)
        assert_true(x[i] == 0.0);
    free(x);
    ps_problem_free(p);
}

static void test_spiral2d(void **state)
{
    (void)state;
    check_spiral("spiral2d", 64, 2000, 24.0, 4e-6, 30.0, 1.5);
    check_spiral("spiral2d:n=16,nt=100", 16, 100, 24.0, 4e-6, 30.0, 1.5);
    check_spiral("spiral2d:fov=20,flip=90,res=2,dt=2e-6,n=10,nt=333", 10, 333,
                 20.0, 2e-6, 90.0, 2.0);
}

/*
 * Spot values of the default spiral2d computed by hand (not by the loops
 * above): spin 0 is (x, y) = (-11.8125, -11.8125) cm; spin j = 32*64 + 32
 * is (0.1875, 0.1875); the first gradient sample (t = 0, th = 16 pi) is
 * Gx = kmax/T/gamma-bar, Gy = -kmax th'/gamma-bar... written out below.
 */
static void test_spiral2d_spot_values(void **state)
{
    (void)state;
    ps_problem_desc d;
    ps_problem *p = make("spiral2d", &d);
    near("x0", d.r[0], -11.8125, 0.0);
    near("y0", d.r[1], -11.8125, 0.0);
    size_t j = 32 * 64 + 32;
    near("x", d.r[3 * j], 0.1875, 0.0);
    near("y", d.r[3 * j + 1], 0.1875, 0.0);
    near("df", d.df[j], 40.0 * 0.1875 / 24.0 - 20.0 * 0.1875 / 24.0, 0.0);
    /* spin (x, y) = (0.1875, 0.1875) is inside the disc of radius 6 */
    near("target.y", d.target[3 * j + 1], 0.5, 1e-15);
    /* t = 0: kr = kmax = 1/3, th = 2 pi * 8 (cos = 1, sin = 0),
     * kr' = -kmax/T, th' = -16 pi/T, T = 8e-3 s:
     * Gx = -kr'/gamma-bar = (1/3)/8e-3/gamma-bar,
     * Gy = -kr th'/gamma-bar = (1/3)(16 pi/8e-3)/gamma-bar */
    near("Gx[0]", d.g[0], (1.0 / 3.0) / 8e-3 / GB, 1e-15);
    near("Gy[0]", d.g[1], (1.0 / 3.0) * (16.0 * M_PI / 8e-3) / GB, 1e-15);
    /* halfway, t = T/2: kr = kmax/2, th = 8 pi (cos 1, sin 0 again) */
    near("Gx[1000]", d.g[3 * 1000], (1.0 / 3.0) / 8e-3 / GB, 1e-12);
    near("Gy[1000]", d.g[3 * 1000 + 1], (1.0 / 6.0) * (16.0 * M_PI / 8e-3) / GB,
         1e-12);
    ps_problem_free(p);
}

/* ---- slice1d ---- */

/*
 * slice1d with (nz, nt, dt, thk, tbw, trans), from docs/presets.md:
 *   z_i = -2 + 4 i/nz, x = y = 0, df = 0, s = 1;
 *   Gz = tbw/(nt dt)/(gamma-bar thk), Gx = Gy = 0;
 *   |z| < thk/2: target (0,1,0), w 1; |z| > thk/2 + trans: (0,0,1), w 1;
 *   in between: w 0. Loss mls.
 *   x0: tc_k = (k + 0.5) dt - T/2,
 *   u_k = c sinc(tbw tc_k/T) (0.54 + 0.46 cos(2 pi tc_k/T)), v = 0,
 *   with c such that 2 pi gamma-bar dt sum_k u_k = pi/2.
 */
static void check_slice(const char *spec, size_t nz, size_t nt, double dt,
                        double thk, double tbw, double trans)
{
    ps_problem_desc d;
    ps_problem *p = make(spec, &d);
    printf("%s: ns %zu nt %zu\n", spec, d.ns, d.nt);
    assert_int_equal(d.ns, nz);
    assert_int_equal(d.nt, nt);
    near("dt", d.dt, dt, 0.0);
    assert_int_equal(d.loss, PS_LOSS_MLS);
    assert_true(d.lambda == 0.0);
    assert_true(isinf(d.b1_max));
    constant_or_null("df", d.df, nz, 0.0, 0.0);
    constant_or_null("b1scale", d.b1scale, nz, 1.0, 1.0);
    assert_null(d.t1);
    assert_null(d.t2);
    assert_null(d.m0);

    size_t nin = 0, nout = 0, ntr = 0;
    for (size_t i = 0; i < nz; i++) {
        double z = -2.0 + 4.0 * (double)i / (double)nz;
        assert_true(d.r[3 * i] == 0.0 && d.r[3 * i + 1] == 0.0);
        near("z", d.r[3 * i + 2], z, 1e-15);
        double az = fabs(z), w = d.w ? d.w[i] : 1.0;
        const double *t = d.target + 3 * i;
        /* classify only spins clearly away from the edges */
        if (az < thk / 2 - 1e-9) {
            nin++;
            assert_true(t[0] == 0.0 && t[1] == 1.0 && t[2] == 0.0);
            assert_true(w == 1.0);
        } else if (az > thk / 2 + trans + 1e-9) {
            nout++;
            assert_true(t[0] == 0.0 && t[1] == 0.0 && t[2] == 1.0);
            assert_true(w == 1.0);
        } else if (az > thk / 2 + 1e-9 && az < thk / 2 + trans - 1e-9) {
            ntr++;
            assert_non_null(d.w);
            assert_true(w == 0.0);
        }
    }
    printf("  %zu in the slice, %zu outside, %zu in the transition band\n", nin,
           nout, ntr);
    assert_true(nin > 0 && nout > 0 && (trans < 8.0 / nz || ntr > 0));

    double T = (double)nt * dt, gz = tbw / T / (GB * thk);
    for (size_t k = 0; k < nt; k++) {
        assert_true(d.g[3 * k] == 0.0 && d.g[3 * k + 1] == 0.0);
        near("Gz", d.g[3 * k + 2], gz, 0.0);
    }

    double *x = x0_of(p, nt), *u = malloc(nt * sizeof *u);
    assert_non_null(u);
    double sum = 0.0;
    for (size_t k = 0; k < nt; k++) {
        double tc = ((double)k + 0.5) * dt - T / 2.0, a = tbw * tc / T;
        double sinc = a == 0.0 ? 1.0 : sin(M_PI * a) / (M_PI * a);
        u[k] = sinc * (0.54 + 0.46 * cos(2.0 * M_PI * tc / T));
        sum += u[k];
    }
    double c = (M_PI / 2.0) / (2.0 * M_PI * GB * dt * sum);
    double area = 0.0, umax = 0.0;
    for (size_t k = 0; k < nt; k++) {
        umax = fmax(umax, fabs(c * u[k]));
        area += x[k];
    }
    for (size_t k = 0; k < nt; k++) {
        near("u0", x[k], c * u[k], 1e-13 * umax);
        assert_true(x[nt + k] == 0.0);
    }
    /* the scaling itself: a 90-degree area */
    near("2 pi gamma-bar dt sum u", 2.0 * M_PI * GB * dt * area, M_PI / 2.0,
         0.0);
    free(u);
    free(x);
    ps_problem_free(p);
}

static void test_slice1d(void **state)
{
    (void)state;
    check_slice("slice1d", 400, 500, 4e-6, 0.5, 4.0, 0.1);
    check_slice("slice1d:nz=50,nt=64,thk=1,tbw=6,trans=0.2,dt=2e-6", 50, 64,
                2e-6, 1.0, 6.0, 0.2);
    /* odd nt: the sinc's centre falls between samples */
    check_slice("slice1d:nt=101", 400, 101, 4e-6, 0.5, 4.0, 0.1);
}

/* ---- inversion ---- */

/*
 * inversion with (ndf, nb1, nt, dt): r = 0; df = linspace(-200, 200, ndf)
 * with each value repeated nb1 times (df-major: j = i nb1 + k),
 * s = linspace(0.9, 1.0, nb1) tiled; G = 0; target (0,0,-1); loss z;
 * x0: u = 0.05 G, v = 0.
 */
static void check_inversion(const char *spec, size_t ndf, size_t nb1, size_t nt,
                            double dt)
{
    ps_problem_desc d;
    ps_problem *p = make(spec, &d);
    printf("%s: ns %zu nt %zu\n", spec, d.ns, d.nt);
    assert_int_equal(d.ns, ndf * nb1);
    assert_int_equal(d.nt, nt);
    near("dt", d.dt, dt, 0.0);
    assert_int_equal(d.loss, PS_LOSS_Z);
    constant_or_null("w", d.w, d.ns, 1.0, 1.0);
    assert_non_null(d.df);
    assert_non_null(d.b1scale);
    for (size_t i = 0; i < ndf; i++) {
        for (size_t k = 0; k < nb1; k++) {
            size_t j = i * nb1 + k;
            double df = ndf == 1
                            ? -200.0
                            : -200.0 + 400.0 * (double)i / (double)(ndf - 1);
            double s =
                nb1 == 1 ? 0.9 : 0.9 + 0.1 * (double)k / (double)(nb1 - 1);
            near("df", d.df[j], df, 1e-12);
            near("s", d.b1scale[j], s, 0.0);
            for (int c = 0; c < 3; c++)
                assert_true(d.r[3 * j + c] == 0.0);
            assert_true(d.target[3 * j] == 0.0 && d.target[3 * j + 1] == 0.0 &&
                        d.target[3 * j + 2] == -1.0);
        }
    }
    /* the ends of the ranges exactly */
    near("df first", d.df[0], -200.0, 0.0);
    near("df last", d.df[d.ns - 1], 200.0, 0.0);
    near("s last", d.b1scale[d.ns - 1], nb1 == 1 ? 0.9 : 1.0, 0.0);
    for (size_t k = 0; k < 3 * nt; k++)
        assert_true(d.g[k] == 0.0);
    double *x = x0_of(p, nt);
    for (size_t k = 0; k < nt; k++) {
        assert_true(x[k] == 0.05);
        assert_true(x[nt + k] == 0.0);
    }
    free(x);
    ps_problem_free(p);
}

static void test_inversion(void **state)
{
    (void)state;
    check_inversion("inversion", 201, 10, 375, 4e-6);
    check_inversion("inversion:ndf=5,nb1=3,nt=10,dt=1e-5", 5, 3, 10, 1e-5);
    /* df-major, stated on the default: spins 0..9 share df = -200 and run
     * through s = 0.9..1.0; spin 10 starts df = -198 */
    ps_problem_desc d;
    ps_problem *p = make("inversion", &d);
    near("df[9]", d.df[9], -200.0, 0.0);
    near("df[10]", d.df[10], -198.0, 1e-12);
    near("s[9]", d.b1scale[9], 1.0, 0.0);
    near("s[10]", d.b1scale[10], 0.9, 0.0);
    ps_problem_free(p);
}

/* The benchmark sizes of docs/presets.md build with the stated shapes. */
static void test_benchmark_sizes(void **state)
{
    (void)state;
    ps_problem *p = NULL;
    assert_int_equal(ps_preset_create("spiral2d:n=32,nt=1000", &p, NULL, 0),
                     PS_CONVERGED);
    assert_int_equal(ps_problem_ns(p), 1024);
    assert_int_equal(ps_problem_nt(p), 1000);
    ps_problem_free(p);
    assert_int_equal(ps_preset_create("inversion", &p, NULL, 0), PS_CONVERGED);
    assert_int_equal(ps_problem_ns(p), 2010);
    assert_int_equal(ps_problem_nt(p), 375);
    ps_problem_free(p);
}

/* The keys every preset accepts beyond docs/presets.md's own parameters:
 * lambda (>= 0) and b1_max (> 0; 0 means none). */
static void test_common_keys(void **state)
{
    (void)state;
    ps_problem_desc d;
    ps_problem *p = make("slice1d:lambda=0.5,b1_max=0.2", &d);
    assert_true(d.lambda == 0.5);
    assert_true(d.b1_max == 0.2);
    ps_problem_free(p);
    p = make("inversion:b1_max=0", &d);
    assert_true(isinf(d.b1_max) && d.b1_max > 0);
    assert_true(d.lambda == 0.0);
    ps_problem_free(p);
}

/* The list of names: the three presets, NULL-terminated, each buildable. */
static void test_names(void **state)
{
    (void)state;
    const char *const *names = ps_preset_names();
    assert_non_null(names);
    int found[3] = {0, 0, 0};
    size_t n = 0;
    for (; names[n]; n++) {
        found[0] |= strcmp(names[n], "spiral2d") == 0;
        found[1] |= strcmp(names[n], "slice1d") == 0;
        found[2] |= strcmp(names[n], "inversion") == 0;
        ps_problem *p = NULL;
        char spec[64];
        snprintf(spec, sizeof spec, "%s:nt=3", names[n]);
        assert_int_equal(ps_preset_create(spec, &p, NULL, 0), PS_CONVERGED);
        ps_problem_free(p);
    }
    assert_int_equal(n, 3);
    assert_true(found[0] && found[1] && found[2]);
}

/*
 * Malformed specs: PS_ERR_PRESET, *out NULL, and a message that names the
 * offender (the unknown name or key, or the bad key's value).
 */
static void bad(const char *spec, const char *offender)
{
    ps_problem *p = (ps_problem *)&p; /* not NULL: must be cleared */
    char err[256];
    memset(err, 'X', sizeof err);
    int st = ps_preset_create(spec, &p, err, sizeof err);
    printf("bad preset '%s': %d \"%s\"\n", spec, st,
           memchr(err, '\0', sizeof err) ? err : "(not terminated)");
    assert_int_equal(st, PS_ERR_PRESET);
    assert_null(p);
    assert_non_null(memchr(err, '\0', sizeof err));
    assert_non_null(strstr(err, offender));
    /* err may be NULL, and a short buffer is truncated, not overrun */
    assert_int_equal(ps_preset_create(spec, &p, NULL, 0), PS_ERR_PRESET);
    char small[9];
    small[8] = '#';
    assert_int_equal(ps_preset_create(spec, &p, small, 8), PS_ERR_PRESET);
    assert_true(small[8] == '#');
    assert_non_null(memchr(small, '\0', 8));
}

static void test_bad_presets(void **state)
{
    (void)state;
    bad("bogus", "bogus");
    bad("spiral", "spiral");
    bad("spiral2dx:n=4", "spiral2dx");
    bad("", "preset");
    bad("spiral2d:foo=1", "foo");
    bad("spiral2d:n=abc", "abc");
    bad("spiral2d:nt=0", "nt");
    bad("spiral2d:n=0", "n");
    bad("spiral2d:nt=-5", "nt");
    bad("spiral2d:n=2.5", "n");
    bad("spiral2d:dt=0", "dt");
    bad("spiral2d:dt=nan", "dt");
    bad("spiral2d:fov=inf", "fov");
    bad("slice1d:thk=-1", "thk");
    bad("slice1d:nz=", "nz");
    bad("slice1d:ndf=3", "ndf"); /* a key of another preset */
    bad("inversion:nb1=2.5", "nb1");
    bad("inversion:nt=10,zz=1", "zz");
    bad("inversion:nt", "nt"); /* not key=value */
    bad("spiral2d:lambda=-1", "lambda");
    bad("slice1d:b1_max=-0.1", "b1_max");
    /* only plain decimal numbers, and nothing after a last ',' */
    bad("slice1d:nz=0x10", "0x10");
    bad("slice1d:nz= 10", " 10");
    bad("slice1d:nz=10,", "nz=10,");
    bad("slice1d:dt=1e-320", "out of range"); /* underflows */
    bad("slice1d:nz=1e9", "from 1 to 1e8");
    bad("slice1d:trans=-5", "trans");
    bad("spiral2d:flip=1e308", "flip");
    /* sizes past the problem's limits, refused before anything is allocated */
    bad("spiral2d:n=50000", "n=50000");
    bad("inversion:ndf=100000000,nb1=100", "ndf=100000000,nb1=100");
    /* parameters that make the arrays non-finite: named with the message */
    bad("spiral2d:res=1e-300", "res=1e-300");
    bad("slice1d:tbw=1e308", "tbw=1e308");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spiral2d),
        cmocka_unit_test(test_spiral2d_spot_values),
        cmocka_unit_test(test_slice1d),
        cmocka_unit_test(test_inversion),
        cmocka_unit_test(test_benchmark_sizes),
        cmocka_unit_test(test_common_keys),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_bad_presets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
