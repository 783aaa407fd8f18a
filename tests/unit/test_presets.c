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

#include <complex.h>

#include "common/memory.h"
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

/* ---- ptx2d ---- */

/*
 * ptx2d's parameters, and its spins, sensitivities, gradient and start
 * pulse written again from docs/presets.md (SPEC section 2):
 *   grid x_i = (i - n/2 + 0.5) fov/n, same for y_k; z = 0;
 *   subject q = 0..nsub-1: obj_q = obj (0.85 + 0.3 q/(nsub-1)) (obj when
 *   nsub = 1), psi_q = 2 pi q/(nc nsub); its spins the grid points with
 *   (x/a)^2 + (y/b)^2 < 1, a = obj_q, b = 0.8 obj_q, in grid order (i major),
 *   each repeated nb0 times with df + linspace(-b0off, b0off, nb0);
 *   df = b0 (x^2 - y^2)/obj_q^2;
 *   coil c: phi_c = 2 pi c/nc, p_c = ring (cos, sin)(phi_c + psi_q), z = height,
 *   d_c = |r - p_c|, d0 = sqrt(ring^2 + height^2),
 *   S_c = d0/(nc d_c) exp(i (phi_c + psi_q + 2 pi (d_c - d0)/wave));
 *   target (0, sin flip, cos flip), w = 1, loss mls, lambda 0;
 *   gradient: spiral2d's with this res and fov;
 *   x0: u_ck + i v_ck = exp(-i phi_c) flip/(2 pi gamma-bar nt dt).
 */
typedef struct ptx_par {
    size_t n, nc, nt, nsub, nb0;
    double fov, dt, flip, res, ring, height, wave, obj, b0, b0off;
} ptx_par;

static ptx_par ptx_defaults(void)
{
    ptx_par p = {64, 8, 1000, 1, 1, 24.0, 4e-6, 30.0, 4.0,
                 14.4, 2.0, 12.0, 10.0, 30.0, 0.0};
    return p;
}

static double ptx_x(size_t i, const ptx_par *p)
{
    return ((double)i - (double)p->n / 2.0 + 0.5) * p->fov / (double)p->n;
}

static double ptx_obj(const ptx_par *p, size_t q)
{
    if (p->nsub == 1)
        return p->obj;
    return p->obj * (0.85 + 0.3 * (double)q / (double)(p->nsub - 1));
}

/* (x/a)^2 + (y/b)^2 of grid point (i, k) for subject q */
static double ptx_rho(const ptx_par *p, size_t q, size_t i, size_t k)
{
    double a = ptx_obj(p, q), b = 0.8 * a;
    double x = ptx_x(i, p), y = ptx_x(k, p);
    return (x / a) * (x / a) + (y / b) * (y / b);
}

/* Spins of the parameters, counted over the whole grid. No grid point may
 * lie on an ellipse's edge (within 1e-9), where the two ways of rounding
 * could disagree: the parameters tested are chosen so. */
static size_t ptx_count(const ptx_par *p)
{
    size_t ns = 0;
    for (size_t q = 0; q < p->nsub; q++)
        for (size_t i = 0; i < p->n; i++)
            for (size_t k = 0; k < p->n; k++) {
                double rho = ptx_rho(p, q, i, k);
                assert_true(fabs(rho - 1.0) > 1e-9);
                ns += rho < 1.0 ? p->nb0 : 0;
            }
    return ns;
}

/* S_c of a spin at (x, y, 0) of subject q. */
static void ptx_sens(const ptx_par *p, size_t q, size_t c, double x, double y,
                     double s[2])
{
    double phi = 2.0 * M_PI * (double)c / (double)p->nc;
    double psi = 2.0 * M_PI * (double)q / (double)(p->nc * p->nsub);
    double pc[3] = {p->ring * cos(phi + psi), p->ring * sin(phi + psi), p->height};
    double dc = sqrt((x - pc[0]) * (x - pc[0]) + (y - pc[1]) * (y - pc[1]) +
                     pc[2] * pc[2]);
    double d0 = sqrt(p->ring * p->ring + p->height * p->height);
    double mag = d0 / ((double)p->nc * dc);
    double ph = phi + psi + 2.0 * M_PI * (dc - d0) / p->wave;
    s[0] = mag * cos(ph);
    s[1] = mag * sin(ph);
}

/* Every spin, sensitivity, the gradient and x0 of spec against p. */
static void check_ptx(const char *spec, const ptx_par *p)
{
    ps_problem_desc d;
    ps_problem *pr = make(spec, &d);
    size_t ns = ptx_count(p);
    printf("%s: ns %zu nc %zu nt %zu\n", spec, d.ns, d.nc, d.nt);
    assert_int_equal(d.ns, ns);
    assert_int_equal(d.nt, p->nt);
    assert_int_equal(ps_problem_nc(pr), p->nc);
    assert_int_equal(ps_problem_nx(pr), 2 * p->nc * p->nt);
    near("dt", d.dt, p->dt, 0.0);
    near("gamma_bar", d.gamma_bar, GB, 0.0);
    assert_int_equal(d.loss, PS_LOSS_MLS);
    assert_true(d.lambda == 0.0);
    assert_true(isinf(d.b1_max));
    assert_null(d.b1scale);
    assert_null(d.m0);
    assert_null(d.t1);
    assert_null(d.t2);
    assert_non_null(d.b1map);
    assert_non_null(d.df);
    constant_or_null("w", d.w, d.ns, 1.0, 1.0);
    if (!strstr(spec, "sar=1")) { /* no SAR limit (sar=1: test_ptx2d_sar) */
        assert_int_equal(d.nq, 0);
        assert_null(d.vop);
    }

    double flip = p->flip * M_PI / 180.0;
    size_t j = 0;
    for (size_t q = 0; q < p->nsub; q++) {
        double oq = ptx_obj(p, q);
        for (size_t i = 0; i < p->n; i++) {
            for (size_t k = 0; k < p->n; k++) {
                if (!(ptx_rho(p, q, i, k) < 1.0))
                    continue;
                double x = ptx_x(i, p), y = ptx_x(k, p);
                double df = p->b0 * (x * x - y * y) / (oq * oq);
                for (size_t m = 0; m < p->nb0; m++, j++) {
                    near("r.x", d.r[3 * j], x, 1e-13 * p->fov);
                    near("r.y", d.r[3 * j + 1], y, 1e-13 * p->fov);
                    assert_true(d.r[3 * j + 2] == 0.0);
                    double off = p->nb0 == 1 ? -p->b0off
                                             : -p->b0off + 2.0 * p->b0off * (double)m /
                                                               (double)(p->nb0 - 1);
                    near("df", d.df[j], df + off, 1e-12 * (fabs(p->b0) + p->b0off));
                    for (size_t c = 0; c < p->nc; c++) {
                        double s[2];
                        ptx_sens(p, q, c, x, y, s);
                        const double *got = d.b1map + 2 * (j * p->nc + c);
                        near("Re S", got[0], s[0], 1e-13);
                        near("Im S", got[1], s[1], 1e-13);
                    }
                    assert_true(d.target[3 * j] == 0.0);
                    near("target.y", d.target[3 * j + 1], sin(flip), 0.0);
                    near("target.z", d.target[3 * j + 2], cos(flip), 1e-15);
                }
            }
        }
    }
    assert_int_equal(j, d.ns);

    /* the gradient: spiral2d's with this res, fov, nt and dt, bit for bit */
    char sp[160];
    snprintf(sp, sizeof sp, "spiral2d:n=2,nt=%zu,fov=%.17g,dt=%.17g,res=%.17g", p->nt,
             p->fov, p->dt, p->res);
    ps_problem_desc ds;
    ps_problem *spi = make(sp, &ds);
    for (size_t k = 0; k < 3 * p->nt; k++)
        assert_true(d.g[k] == ds.g[k]);
    ps_problem_free(spi);
    /* and its first sample from the formula: t = 0, th = 2 pi turns,
     * Gx = kmax/T/gamma-bar, Gy = kmax (2 pi turns/T)/gamma-bar */
    double T = (double)p->nt * p->dt, kmax = 0.5 / p->res, turns = p->fov * kmax;
    double scale = 2.0 * M_PI * turns * kmax / T / GB;
    near("Gx[0]", d.g[0], kmax / T / GB, 1e-12 * scale);
    near("Gy[0]", d.g[1], kmax * 2.0 * M_PI * turns / T / GB, 1e-12 * scale);
    assert_true(d.g[2] == 0.0);

    /* x0 in solver layout, every channel: x[2 c nt + k] = u_ck, x[(2c+1) nt + k] = v_ck */
    size_t nx = 2 * p->nc * p->nt;
    double *x0 = malloc(nx * sizeof *x0);
    assert_non_null(x0);
    tu_poison(x0, nx);
    assert_int_equal(ps_problem_x0(pr, x0), PS_CONVERGED);
    double amp = flip / (2.0 * M_PI * GB * (double)p->nt * p->dt);
    for (size_t c = 0; c < p->nc; c++) {
        double phi = 2.0 * M_PI * (double)c / (double)p->nc;
        for (size_t k = 0; k < p->nt; k++) {
            near("u0", x0[2 * c * p->nt + k], amp * cos(phi), 1e-15 * amp);
            near("v0", x0[(2 * c + 1) * p->nt + k], -amp * sin(phi), 1e-15 * amp);
        }
    }
    free(x0);
    ps_problem_free(pr);
}

static void test_ptx2d(void **state)
{
    (void)state;
    ptx_par p = ptx_defaults();
    check_ptx("ptx2d", &p);
    p.nsub = 3;
    p.nb0 = 2;
    check_ptx("ptx2d:nsub=3,nb0=2", &p);
    p.b0off = 40.0;
    p.nb0 = 3;
    check_ptx("ptx2d:nsub=3,nb0=3,b0off=40", &p);
    /* every parameter away from its default; n odd (a grid point at 0) */
    ptx_par o = {15, 3, 50, 2, 2, 20.0, 2e-6, 60.0, 2.0,
                 12.0, -1.5, 9.0, 7.0, -25.0, 10.0};
    check_ptx("ptx2d:n=15,nc=3,nt=50,nsub=2,nb0=2,fov=20,dt=2e-6,flip=60,res=2,"
              "ring=12,height=-1.5,wave=9,obj=7,b0=-25,b0off=10",
              &o);
    /* one channel through a b1 map */
    ptx_par one = ptx_defaults();
    one.nc = 1;
    one.n = 20;
    check_ptx("ptx2d:nc=1,n=20", &one);
}

/*
 * Values of the default ptx2d worked out by hand (not by the loops above).
 * Grid step 24/64 = 0.375 cm, x_i = (i - 31.5) 0.375. The first column
 * inside |x| < 10 is i = 5, x = -9.9375, where (y/8)^2 < 1 - 0.9937^2
 * leaves |y| < 0.89: y = -0.5625, -0.1875, 0.1875, 0.5625 (spins 0..3).
 * A spin at the centre (n odd) has d_c = d0 for every coil, so
 * S_c = exp(i phi_c)/nc, and the CP-mode start gives it the field
 * sum_c S_c b exp(-i phi_c) = b, real.
 */
static void test_ptx2d_spot_values(void **state)
{
    (void)state;
    ps_problem_desc d;
    ps_problem *p = make("ptx2d", &d);
    assert_int_equal(d.ns, 1780);
    assert_int_equal(d.nc, 8);
    double ys[4] = {-0.5625, -0.1875, 0.1875, 0.5625};
    for (int j = 0; j < 4; j++) {
        near("x", d.r[3 * j], -9.9375, 0.0);
        near("y", d.r[3 * j + 1], ys[j], 0.0);
        near("df", d.df[j], 30.0 * (9.9375 * 9.9375 - ys[j] * ys[j]) / 100.0, 1e-12);
    }
    near("x[4]", d.r[3 * 4], -9.5625, 0.0); /* the next column, i = 6 */
    /* spin 0 and coil 4 at (-14.4, 0, 2): d = sqrt(4.4625^2 + 0.5625^2 + 4) */
    double dc = sqrt(4.4625 * 4.4625 + 0.5625 * 0.5625 + 4.0), d0 = sqrt(14.4 * 14.4 + 4.0);
    double ph = M_PI + 2.0 * M_PI * (dc - d0) / 12.0;
    near("Re S[0][4]", d.b1map[2 * 4], d0 / (8.0 * dc) * cos(ph), 1e-15);
    near("Im S[0][4]", d.b1map[2 * 4 + 1], d0 / (8.0 * dc) * sin(ph), 1e-15);
    /* the coil nearest spin 0 is coil 4, the farthest coil 0: |S| largest, smallest */
    double s4 = hypot(d.b1map[8], d.b1map[9]), s0 = hypot(d.b1map[0], d.b1map[1]);
    for (int c = 0; c < 8; c++) {
        double sc = hypot(d.b1map[2 * c], d.b1map[2 * c + 1]);
        assert_true(sc <= s4 && sc >= s0);
    }
    ps_problem_free(p);

    /* n = 15: spin (0, 0) of subject 1 of 2 (psi_1 = 2 pi/(8 * 2)) */
    p = make("ptx2d:n=15,nsub=2", &d);
    size_t half = d.ns / 2, jc = SIZE_MAX;
    for (size_t j = half; j < d.ns; j++)
        if (d.r[3 * j] == 0.0 && d.r[3 * j + 1] == 0.0)
            jc = j;
    assert_true(jc != SIZE_MAX);
    double *x0 = malloc(ps_problem_nx(p) * sizeof *x0);
    assert_non_null(x0);
    assert_int_equal(ps_problem_x0(p, x0), PS_CONVERGED);
    double b = (M_PI / 6.0) / (2.0 * M_PI * GB * 1000 * 4e-6), fr = 0.0, fi = 0.0;
    for (int c = 0; c < 8; c++) {
        double a = 2.0 * M_PI * c / 8.0 + 2.0 * M_PI / 16.0;
        const double *s = d.b1map + 2 * (jc * 8 + (size_t)c);
        near("Re S centre", s[0], cos(a) / 8.0, 1e-15);
        near("Im S centre", s[1], sin(a) / 8.0, 1e-15);
        double u = x0[2 * c * 1000], v = x0[(2 * c + 1) * 1000];
        fr += s[0] * u - s[1] * v;
        fi += s[0] * v + s[1] * u;
    }
    /* subject 1's ring is turned by psi_1: the CP field at its centre is
     * b exp(i psi_1) (x0 uses phi_c alone) */
    near("CP field Re", fr, b * cos(2.0 * M_PI / 16.0), 1e-14 * b);
    near("CP field Im", fi, b * sin(2.0 * M_PI / 16.0), 1e-14 * b);
    /* subject 0's centre: S_c = exp(i phi_c)/8, the field b itself */
    size_t j0 = SIZE_MAX;
    for (size_t j = 0; j < half; j++)
        if (d.r[3 * j] == 0.0 && d.r[3 * j + 1] == 0.0)
            j0 = j;
    assert_true(j0 != SIZE_MAX);
    fr = fi = 0.0;
    for (int c = 0; c < 8; c++) {
        const double *s = d.b1map + 2 * (j0 * 8 + (size_t)c);
        double u = x0[2 * c * 1000], v = x0[(2 * c + 1) * 1000];
        fr += s[0] * u - s[1] * v;
        fi += s[0] * v + s[1] * u;
    }
    near("CP field at the centre", fr, b, 1e-14 * b);
    near("CP field at the centre, Im", fi, 0.0, 1e-14 * b);
    free(x0);
    ps_problem_free(p);
}

/* SPEC's sizes P and U, and nsub = 3, nb0 = 2, counted by ptx_count. */
static void test_ptx2d_sizes(void **state)
{
    (void)state;
    ptx_par p = ptx_defaults();
    ps_problem *pr = NULL;
    assert_int_equal(ps_preset_create("ptx2d", &pr, NULL, 0), PS_CONVERGED);
    assert_int_equal(ps_problem_ns(pr), ptx_count(&p));
    assert_int_equal(ps_problem_ns(pr), 1780);
    assert_int_equal(ps_problem_nx(pr), 16000);
    ps_problem_free(pr);
    p.nsub = 3;
    p.nb0 = 2;
    assert_int_equal(ps_preset_create("ptx2d:nsub=3,nb0=2", &pr, NULL, 0), PS_CONVERGED);
    assert_int_equal(ps_problem_ns(pr), ptx_count(&p));
    assert_int_equal(ps_problem_ns(pr), 10888);
    ps_problem_free(pr);
    p.nsub = 31;
    p.nb0 = 7;
    p.b0off = 100.0;
    assert_int_equal(ps_preset_create("ptx2d:nsub=31,nb0=7,b0off=100", &pr, NULL, 0),
                     PS_CONVERGED);
    assert_int_equal(ps_problem_ns(pr), ptx_count(&p));
    assert_int_equal(ps_problem_ns(pr), 391076);
    assert_int_equal(ps_problem_nc(pr), 8);
    ps_problem_free(pr);
}

/* A short CPU solve of a small ptx2d lowers F from the CP-mode start. */
static void test_ptx2d_solve(void **state)
{
    (void)state;
    ps_problem *p = NULL;
    assert_int_equal(ps_preset_create("ptx2d:n=16,nc=4,nt=100", &p, NULL, 0), PS_CONVERGED);
    size_t nx = ps_problem_nx(p);
    assert_int_equal(nx, 800);
    double *x = malloc(nx * sizeof *x);
    assert_non_null(x);
    assert_int_equal(ps_problem_x0(p, x), PS_CONVERGED);
    ps_options o;
    ps_options_default(&o);
    o.backend = PS_BACKEND_CPU;
    o.precision = PS_PRECISION_DOUBLE;
    o.max_iterations = 20;
    o.threads = 2;
    ps_result r;
    memset(&r, 0, sizeof r);
    int st = solve_persistent(p, &o, x, &r);
    printf("ptx2d:n=16,nc=4,nt=100: status %d, %lld iterations, f %.6g -> %.6g\n", st,
           (long long)r.iterations, r.history_len ? r.history[0].f : NAN, r.f);
    assert_true(st >= 0);
    assert_int_equal(r.backend, PS_BACKEND_CPU);
    assert_true(r.iterations >= 5);
    assert_true(r.history_len >= 1);
    assert_true(r.f < 0.5 * r.history[0].f);
    ps_result_free(&r);
    free(x);
    ps_problem_free(p);
}

/*
 * ptx2d:sar=1 (docs/presets.md): Nq = 4 VOPs Q_q = 0.1 I + v_q v_q^H,
 * v_q[c] = exp(i 2 pi q c/nc), so Q_q[a][c] = 0.1 delta_ac + exp(i 2 pi q
 * (a - c)/nc); TR = 10 ms; sar_max half the largest SAR_q of x0, with
 * SAR_q = (dt/TR) sum_k b_k^H Q_q b_k computed here in complex arithmetic
 * from the formula. For x0 = amp exp(-i phi_c) on every step,
 * v_q^H b = amp sum_c exp(-i 2 pi (q + 1) c/nc), which is nc amp when nc
 * divides q + 1 and 0 otherwise, so
 *     SAR_q(x0) = (dt/TR) nt amp^2 (0.1 nc + (nc | q + 1 ? nc^2 : 0)).
 */
static void check_ptx_sar(const char *spec, size_t nc, size_t nt, double dt, double flip_deg)
{
    ps_problem_desc d;
    ps_problem *p = make(spec, &d);
    printf("%s: ns %zu nc %zu nq %zu sar_max %.9g W/kg\n", spec, d.ns, d.nc, d.nq, d.sar_max);
    assert_int_equal(d.nc, nc);
    assert_int_equal(d.nq, 4);
    assert_int_equal(ps_problem_nq(p), 4);
    assert_non_null(d.vop);
    assert_true(d.tr == 10e-3);

    /* every entry against the formula */
    for (size_t q = 0; q < 4; q++)
        for (size_t a = 0; a < nc; a++)
            for (size_t c = 0; c < nc; c++) {
                double complex want = (a == c ? 0.1 : 0.0) +
                                      cexp(I * 2.0 * M_PI * (double)q *
                                           ((double)a - (double)c) / (double)nc);
                const double *got = d.vop + 2 * ((q * nc + a) * nc + c);
                near("Re Q", got[0], creal(want), 1e-14);
                near("Im Q", got[1], cimag(want), 1e-14);
            }

    /* SAR_q of x0 from the formula, over the problem's own x0 */
    size_t nx = ps_problem_nx(p);
    double *x0 = malloc(nx * sizeof *x0);
    assert_non_null(x0);
    assert_int_equal(ps_problem_x0(p, x0), PS_CONVERGED);
    double sar[4], most = 0.0;
    for (size_t q = 0; q < 4; q++) {
        double sum = 0.0;
        for (size_t k = 0; k < nt; k++) {
            double complex acc = 0.0;
            for (size_t a = 0; a < nc; a++)
                for (size_t c = 0; c < nc; c++) {
                    const double *Q = d.vop + 2 * ((q * nc + a) * nc + c);
                    double complex ba = x0[2 * a * nt + k] + I * x0[(2 * a + 1) * nt + k];
                    double complex bc = x0[2 * c * nt + k] + I * x0[(2 * c + 1) * nt + k];
                    acc += conj(ba) * (Q[0] + I * Q[1]) * bc;
                }
            near("Im b^H Q b", cimag(acc), 0.0, 1e-12 * cabs(acc));
            sum += creal(acc);
        }
        sar[q] = dt / 10e-3 * sum;
        most = fmax(most, sar[q]);
    }
    /* and in closed form for the CP start */
    double amp = flip_deg * M_PI / 180.0 / (2.0 * M_PI * GB * (double)nt * dt);
    for (size_t q = 0; q < 4; q++) {
        double form = dt / 10e-3 * (double)nt * amp * amp *
                      (0.1 * (double)nc + ((q + 1) % nc == 0 ? (double)(nc * nc) : 0.0));
        near("SAR_q(x0), closed form", sar[q], form, 1e-12 * form);
    }
    near("sar_max", d.sar_max, 0.5 * most, 0.0);
    /* x0 violates the limit: its largest SAR is twice sar_max, also as
     * ps_constraints sees it */
    double lib[4];
    tu_poison(lib, 4);
    assert_int_equal(ps_constraints(p, x0, NULL, lib), PS_CONVERGED);
    double lmost = 0.0;
    for (size_t q = 0; q < 4; q++) {
        near("ps_constraints SAR_q", lib[q], sar[q], 0.0);
        lmost = fmax(lmost, lib[q]);
    }
    assert_true(lmost > d.sar_max * (1.0 + 1e-3));
    near("largest SAR_q(x0) / sar_max", lmost / d.sar_max, 2.0, 0.0);
    free(x0);
    ps_problem_free(p);
}

static void test_ptx2d_sar(void **state)
{
    (void)state;
    check_ptx_sar("ptx2d:sar=1", 8, 1000, 4e-6, 30.0);
    /* the hand values of the default: Q_0 = 0.1 I + ones, Q_2[0][1] =
     * exp(-i pi/2) = -i, Q_1[3][1] = exp(i pi/2) = i, every diagonal 1.1 */
    ps_problem_desc d;
    ps_problem *p = make("ptx2d:sar=1", &d);
    const size_t nc = 8;
#define QRE(q, a, c) d.vop[2 * (((q) * nc + (a)) * nc + (c))]
#define QIM(q, a, c) d.vop[2 * (((q) * nc + (a)) * nc + (c)) + 1]
    near("Q_0[0][0]", QRE(0, 0, 0), 1.1, 0.0);
    near("Q_0[2][5]", QRE(0, 2, 5), 1.0, 0.0);
    assert_true(QIM(0, 2, 5) == 0.0);
    near("Re Q_2[0][1]", QRE(2, 0, 1), 0.0, 1e-15);
    near("Im Q_2[0][1]", QIM(2, 0, 1), -1.0, 1e-15);
    near("Re Q_1[3][1]", QRE(1, 3, 1), 0.0, 1e-15);
    near("Im Q_1[3][1]", QIM(1, 3, 1), 1.0, 1e-15);
    for (size_t q = 0; q < 4; q++)
        for (size_t a = 0; a < nc; a++) {
            near("Q_q[a][a]", QRE(q, a, a), 1.1, 1e-15);
            assert_true(QIM(q, a, a) == 0.0);
            for (size_t c = 0; c < nc; c++) { /* Hermitian, exactly */
                assert_true(QRE(q, a, c) == QRE(q, c, a));
                assert_true(QIM(q, a, c) == -QIM(q, c, a));
            }
        }
#undef QRE
#undef QIM
    /* 8 channels: no v_q is the CP mode, so every SAR_q(x0) is the 0.1 I
     * part's, 0.1 nc amp^2 nt dt/TR, and sar_max half of it */
    double amp = (M_PI / 6.0) / (2.0 * M_PI * GB * 1000 * 4e-6);
    near("sar_max of ptx2d:sar=1", d.sar_max, 0.5 * 0.8 * amp * amp * 1000 * 4e-6 / 10e-3,
         0.0 + 1e-13 * d.sar_max);
    ps_problem_free(p);

    /* the rest of the problem is sar=0's */
    ptx_par par = ptx_defaults();
    par.n = 16;
    check_ptx("ptx2d:n=16,sar=1", &par);
    /* with subjects and B0 copies; 4 channels (v_3 is the CP mode: SAR_3
     * is the largest), 1 channel (every Q_q = 1.1), a peak limit */
    check_ptx_sar("ptx2d:n=16,nc=4,nt=50,nsub=3,nb0=2,b0off=20,sar=1", 4, 50, 4e-6, 30.0);
    check_ptx_sar("ptx2d:n=12,nc=1,nt=40,dt=2e-6,flip=45,sar=1", 1, 40, 2e-6, 45.0);
    check_ptx_sar("ptx2d:n=12,nc=3,nt=40,sar=1,b1_max=0.5", 3, 40, 4e-6, 30.0);
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

/* The list of names: the four presets, NULL-terminated, each buildable. */
static void test_names(void **state)
{
    (void)state;
    const char *const *names = ps_preset_names();
    assert_non_null(names);
    int found[4] = {0, 0, 0, 0};
    size_t n = 0;
    for (; names[n]; n++) {
        found[0] |= strcmp(names[n], "spiral2d") == 0;
        found[1] |= strcmp(names[n], "slice1d") == 0;
        found[2] |= strcmp(names[n], "inversion") == 0;
        found[3] |= strcmp(names[n], "ptx2d") == 0;
        ps_problem *p = NULL;
        char spec[64];
        snprintf(spec, sizeof spec, "%s:nt=3", names[n]);
        assert_int_equal(ps_preset_create(spec, &p, NULL, 0), PS_CONVERGED);
        ps_problem_free(p);
    }
    assert_int_equal(n, 4);
    assert_true(found[0] && found[1] && found[2] && found[3]);
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

/* ptx2d's own parameters: counts, sizes, the object, sar. */
static void test_bad_ptx2d(void **state)
{
    (void)state;
    bad("ptx2d:nc=65", "from 1 to 64");
    bad("ptx2d:nc=0", "nc=0");
    bad("ptx2d:nc=2.5", "nc=2.5");
    bad("ptx2d:n=0", "n=0");
    bad("ptx2d:nt=0", "nt=0");
    bad("ptx2d:nsub=0", "nsub=0");
    bad("ptx2d:nb0=0", "nb0=0");
    bad("ptx2d:fov=0", "fov=0");
    bad("ptx2d:dt=-4e-6", "dt=-4e-6");
    bad("ptx2d:res=0", "res=0");
    bad("ptx2d:ring=0", "ring=0");
    bad("ptx2d:wave=-12", "wave=-12");
    bad("ptx2d:obj=0", "obj=0");
    bad("ptx2d:b0off=-1", "b0off=-1 must be >= 0");
    bad("ptx2d:flip=400", "flip=400");
    bad("ptx2d:height=x", "height='x'");
    bad("ptx2d:ndf=3", "ndf"); /* a key of another preset */
    /* the object: inside the field of view and the coil ring, with a grid point */
    bad("ptx2d:obj=12.5", "field of view");
    bad("ptx2d:obj=11,nsub=2", "field of view"); /* the largest subject: 1.15 obj */
    bad("ptx2d:fov=40,obj=15,ring=14.4", "coil ring");
    bad("ptx2d:obj=0.1", "holds no point");
    bad("ptx2d:n=4,obj=3,nsub=3", "subject 0");
    /* sar: 0 or 1, and sar=1 needs a start pulse of some SAR */
    bad("ptx2d:sar=0.5", "sar=0.5 must be 0 or 1");
    bad("ptx2d:sar=2", "sar=2 must be 0 or 1");
    bad("ptx2d:n=8,nt=10,sar=1,flip=0", "flip=0 gives a start pulse of no SAR");
    /* sizes past the problem's limits, refused before anything is allocated */
    bad("ptx2d:n=100000", "n=100000");
    bad("ptx2d:nsub=1000000,nb0=100", "more than 2^31 spins");
    bad("ptx2d:nt=100000000", "nt=100000000");
    /* parameters that make the arrays non-finite */
    bad("ptx2d:res=1e-300", "res=1e-300");
    /* sar=0 and nc=64 are fine */
    ps_problem *p = NULL;
    assert_int_equal(ps_preset_create("ptx2d:sar=0,nc=64,n=8,nt=3", &p, NULL, 0), PS_CONVERGED);
    assert_int_equal(ps_problem_nc(p), 64);
    ps_problem_free(p);
}

/* Spins whose arrays cannot fit in memory: refused before they are
 * allocated, with the count, the bytes and the memory (46,340^2 spins:
 * at least 275 GB). */
static void test_too_large_for_memory(void **state)
{
    (void)state;
    const double mem = ps_memory_bytes(), need = 2.0 * 8.0 * 8.0 * 46340.0 * 46340.0;
    printf("memory %.4g GB, spiral2d:n=46340 needs at least %.4g GB\n", mem / 1e9, need / 1e9);
    if (!(mem > 0.0 && mem < need)) {
        printf("this machine's memory holds it: not checked\n");
        return;
    }
    ps_problem *p = (ps_problem *)&p;
    char err[512];
    int st = ps_preset_create("spiral2d:n=46340,nt=10", &p, err, sizeof err);
    printf("-> %d: %s\n", st, err);
    assert_int_equal(st, PS_ERR_NO_MEMORY);
    assert_null(p);
    assert_non_null(strstr(err, "preset 'spiral2d': the parameters 'n=46340,nt=10' make 2147395600 "
                                "spins: their arrays take at least 275 GB"));
    assert_non_null(strstr(err, "GB of memory is available"));
}

/* The gradient design keys of spiral2d, slice1d and ptx2d: none designed
 * by default; design_g names the axes, smax, gmax and g_end set the limits,
 * and nothing else of the problem changes. */
static void test_gradient_keys(void **state)
{
    (void)state;
    static const char *const base[3] = {"spiral2d:n=8,nt=40", "slice1d:nz=20,nt=30",
                                        "ptx2d:n=16,nc=2,nt=20"};
    static const struct {
        const char *keys;
        unsigned axes;
        double smax, gmax;
        int g_end;
    } cases[] = {
        {"design_g=xy,smax=15000,gmax=4,g_end=1", PS_AXIS_X | PS_AXIS_Y, 15000, 4, 1},
        {"design_g=z,smax=2e4", PS_AXIS_Z, 2e4, 0, 0},
        {"design_g=xyz,smax=1e4,gmax=2.5,g_end=0", 7, 1e4, 2.5, 0},
        {"design_g=yz,smax=3e4,gmax=1", PS_AXIS_Y | PS_AXIS_Z, 3e4, 1, 0},
        {"design_g=xz,smax=5e3,gmax=3,g_end=1", PS_AXIS_X | PS_AXIS_Z, 5e3, 3, 1},
    };
    for (int i = 0; i < 3; i++) {
        ps_problem_desc d0, d;
        ps_problem *p0 = make(base[i], &d0);
        assert_int_equal(d0.design_g, 0);
        assert_true(d0.smax == 0.0 && d0.gmax == 0.0 && d0.g_end == 0);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            char spec[160];
            snprintf(spec, sizeof spec, "%s,%s", base[i], cases[c].keys);
            ps_problem *p = make(spec, &d);
            printf("%s: design_g %u smax %g gmax %g g_end %d\n", spec, d.design_g, d.smax,
                   d.gmax, d.g_end);
            assert_int_equal(d.design_g, cases[c].axes);
            assert_true(d.smax == cases[c].smax && d.gmax == cases[c].gmax);
            assert_int_equal(d.g_end, cases[c].g_end);
            /* the rest is the preset without the keys: the start gradient and pulse */
            assert_int_equal(d.ns, d0.ns);
            assert_int_equal(d.nt, d0.nt);
            assert_int_equal(memcmp(d.g, d0.g, 3 * d.nt * sizeof *d.g), 0);
            assert_int_equal(memcmp(d.b1, d0.b1, 2 * ps_problem_nc(p) * d.nt * sizeof *d.b1), 0);
            size_t ng = (cases[c].axes & 1) + (cases[c].axes >> 1 & 1) + (cases[c].axes >> 2 & 1);
            assert_int_equal(ps_problem_nx(p), (2 * ps_problem_nc(p) + ng) * d.nt);
            ps_problem_free(p);
        }
        ps_problem_free(p0);
    }
}

/* Bad gradient design keys: named with their values. */
static void test_bad_gradient_keys(void **state)
{
    (void)state;
    bad("spiral2d:design_g=yx,smax=1e4", "design_g='yx' must name gradient axes");
    bad("slice1d:design_g=,smax=1e4", "design_g=''");
    bad("ptx2d:design_g=1,smax=1e4", "design_g='1'");
    bad("spiral2d:design_g=xx,smax=1e4", "design_g='xx'");
    bad("spiral2d:design_g=w", "design_g='w'");
    bad("spiral2d:design_g=xy,smax=-1", "smax=-1 must be > 0");
    bad("spiral2d:design_g=xy,smax=0", "smax=0 must be > 0");
    bad("spiral2d:design_g=xy,smax=fast", "smax='fast' is not a number");
    bad("slice1d:design_g=z,smax=1e4,gmax=-4", "gmax=-4 must be >= 0");
    bad("slice1d:design_g=z,smax=1e4,gmax=4,g_end=2", "g_end=2 must be 0 or 1");
    bad("slice1d:design_g=z,smax=1e4,gmax=4,g_end=0.5", "g_end=0.5 must be 0 or 1");
    /* combinations the problem refuses, named with the parameters given */
    bad("spiral2d:design_g=xy", "smax is missing: design_g needs the slew-rate limit");
    bad("spiral2d:smax=15000", "smax given without design_g");
    bad("ptx2d:gmax=4", "gmax given without design_g");
    bad("slice1d:design_g=z,smax=1e4,g_end=1", "g_end needs gmax");
    bad("slice1d:design_g=z,smax=1e4,g_end=1", "design_g=z,smax=1e4,g_end=1");
    /* inversion has no gradient to design */
    bad("inversion:design_g=x,smax=1e4", "unknown key 'design_g'");
    bad("inversion:smax=1e4", "unknown key 'smax'");
    bad("spiral2d:nt=20,n=4,nt=30", "key 'nt' given twice");
    bad("ptx2d:design_g=xy,smax=1e4,design_g=x", "key 'design_g' given twice");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spiral2d),
        cmocka_unit_test(test_spiral2d_spot_values),
        cmocka_unit_test(test_slice1d),
        cmocka_unit_test(test_inversion),
        cmocka_unit_test(test_ptx2d),
        cmocka_unit_test(test_ptx2d_spot_values),
        cmocka_unit_test(test_ptx2d_sizes),
        cmocka_unit_test(test_ptx2d_solve),
        cmocka_unit_test(test_ptx2d_sar),
        cmocka_unit_test(test_bad_ptx2d),
        cmocka_unit_test(test_too_large_for_memory),
        cmocka_unit_test(test_benchmark_sizes),
        cmocka_unit_test(test_common_keys),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_bad_presets),
        cmocka_unit_test(test_gradient_keys),
        cmocka_unit_test(test_bad_gradient_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
