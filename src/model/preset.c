/*
 * The presets of docs/presets.md, generated exactly from their formulas:
 * "NAME[:key=value,...]".
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/memory.h"
#include "common/status.h"
#include "model/constraints.h"
#include "model/preset.h"
#include "model/problem.h"

#define PS_PI 3.14159265358979323846

typedef struct preset_param {
    const char *key;
    double value;
    int integer; /* must be a whole number >= 1 */
    int positive; /* must be > 0 (reals) */
    double max; /* integers: the largest value allowed (0: 1e8) */
} preset_param;

/* Parameters of one preset, the NULL key that ends them included. */
#define PRESET_PARAMS 24

/* A preset's builder fills d from the parameters; a status other than
 * PS_CONVERGED may come with its own message in err (else ps_preset_create
 * writes one from the status). */
typedef struct preset_def {
    const char *name;
    preset_param params[PRESET_PARAMS];
    int (*build)(const preset_param *prm, ps_problem_desc *d, double *buf[8],
                 char *err, size_t errlen);
} preset_def;

static double param(const preset_param *prm, const char *key)
{
    for (; prm->key; prm++)
        if (strcmp(prm->key, key) == 0)
            return prm->value;
    return 0.0;
}

/* Values a spin of every preset has at least: r, target [3] each, df and
 * the B1 scale. */
#define PRESET_SPIN_DOUBLES 8

static void *xcalloc(size_t n, size_t size, double **slot)
{
    *slot = calloc(n, size);
    return *slot;
}

/*
 * What every preset has: ns spins, nt steps of dt, and the zeroed arrays r
 * and target [ns][3] and g [nt][3], set in d and owned by buf[0..2]. A
 * preset's own arrays take buf[3] on.
 */
static int preset_common(ps_problem_desc *d, size_t ns, size_t nt, double dt,
                         double *buf[8], double **r, double **tg, double **g, char *err,
                         size_t errlen)
{
    if (ns > PS_MAX_NS || nt > PS_MAX_NT) /* before anything is allocated */
        return PS_ERR_SIZE;
    /* arrays that cannot fit are refused before they are filled: at least
     * PRESET_SPIN_DOUBLES a spin, held twice (the preset's and the
     * problem's copy) */
    const double bytes = 2.0 * 8.0 * PRESET_SPIN_DOUBLES * (double)ns, mem = ps_memory_bytes();
    if (mem > 0.0 && bytes > mem)
        return ps_status_msg(err, errlen, PS_ERR_NO_MEMORY,
                             "%zu spins: their arrays take at least %.3g GB (%d values a spin, "
                             "held twice while the problem is made), and %.3g GB of memory is "
                             "available", ns, bytes / 1e9, PRESET_SPIN_DOUBLES, mem / 1e9);
    if (!(*r = xcalloc(3 * ns, sizeof **r, &buf[0])) ||
        !(*tg = xcalloc(3 * ns, sizeof **tg, &buf[1])) ||
        !(*g = xcalloc(3 * nt, sizeof **g, &buf[2])))
        return PS_ERR_NO_MEMORY;
    d->ns = ns;
    d->nt = nt;
    d->r = *r;
    d->target = *tg;
    d->g = *g;
    d->dt = dt;
    return PS_CONVERGED;
}

/* Coordinate i = 0..n-1 of a grid of n points over fov (cm):
 * (i - n/2 + 0.5) fov/n (spiral2d, ptx2d). */
static double grid_coord(size_t i, size_t n, double fov)
{
    return ((double)i - (double)n / 2.0 + 0.5) * fov / (double)n;
}

/*
 * The spiral-in gradient g[nt][3] (G/cm) of resolution res and field of
 * view fov (cm) over T = nt dt (spiral2d, ptx2d):
 *     kmax = 1/(2 res), turns = fov kmax,
 *     kr = kmax (1 - t/T), th = 2 pi turns (1 - t/T),   t_k = k dt,
 *     Gx = -(kr' cos th - kr th' sin th)/gamma-bar,
 *     Gy = -(kr' sin th + kr th' cos th)/gamma-bar,  Gz = 0.
 */
static void spiral_in_gradient(double *g, size_t nt, double dt, double fov,
                               double res, double gb)
{
    double T = (double)nt * dt, kmax = 1.0 / (2.0 * res), turns = fov * kmax;
    double krp = -kmax / T, thp = -2.0 * PS_PI * turns / T;
    for (size_t k = 0; k < nt; k++) {
        double t = (double)k * dt;
        double kr = kmax * (1.0 - t / T), th = 2.0 * PS_PI * turns * (1.0 - t / T);
        g[3 * k] = -(krp * cos(th) - kr * thp * sin(th)) / gb;
        g[3 * k + 1] = -(krp * sin(th) + kr * thp * cos(th)) / gb;
        g[3 * k + 2] = 0.0;
    }
}

/* spiral2d: 2D spiral-in excitation of a disc (docs/presets.md, spiral2d). */
static int build_spiral2d(const preset_param *prm, ps_problem_desc *d,
                          double *buf[8], char *err, size_t errlen)
{
    size_t n = (size_t)param(prm, "n"), nt = (size_t)param(prm, "nt");
    double fov = param(prm, "fov"), dt = param(prm, "dt");
    double flip = param(prm, "flip") * PS_PI / 180.0, res = param(prm, "res");
    double gb = PS_GAMMA_BAR_DEFAULT;
    size_t ns = n * n;
    double *r, *tg, *g, *df, *s;
    int st = preset_common(d, ns, nt, dt, buf, &r, &tg, &g, err, errlen);
    if (st)
        return st;
    if (!(df = xcalloc(ns, sizeof *df, &buf[3])) ||
        !(s = xcalloc(ns, sizeof *s, &buf[4])))
        return PS_ERR_NO_MEMORY;
    double rdisc = fov / 4.0;
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < n; k++) {
            size_t j = i * n + k;
            double x = grid_coord(i, n, fov), y = grid_coord(k, n, fov);
            r[3 * j] = x;
            r[3 * j + 1] = y;
            r[3 * j + 2] = 0.0;
            df[j] = 40.0 * x / fov - 20.0 * y / fov;
            s[j] = 1.0 - 0.2 * (x * x + y * y) / (fov * fov);
            int in = x * x + y * y < rdisc * rdisc;
            tg[3 * j] = 0.0;
            tg[3 * j + 1] = in ? sin(flip) : 0.0;
            tg[3 * j + 2] = in ? cos(flip) : 1.0;
        }
    }
    spiral_in_gradient(g, nt, dt, fov, res, gb);
    d->df = df;
    d->b1scale = s;
    d->loss = PS_LOSS_FULL;
    return PS_CONVERGED;
}

/* slice1d: 1D slice-selective 90 with a Hamming-windowed sinc start. */
static int build_slice1d(const preset_param *prm, ps_problem_desc *d,
                         double *buf[8], char *err, size_t errlen)
{
    size_t nz = (size_t)param(prm, "nz"), nt = (size_t)param(prm, "nt");
    double dt = param(prm, "dt"), thk = param(prm, "thk");
    double tbw = param(prm, "tbw"), trans = param(prm, "trans");
    double gb = PS_GAMMA_BAR_DEFAULT;
    double *r, *tg, *g, *w, *b1;
    int st = preset_common(d, nz, nt, dt, buf, &r, &tg, &g, err, errlen);
    if (st)
        return st;
    if (!(w = xcalloc(nz, sizeof *w, &buf[3])) ||
        !(b1 = xcalloc(2 * nt, sizeof *b1, &buf[4])))
        return PS_ERR_NO_MEMORY;
    for (size_t i = 0; i < nz; i++) {
        double z = -2.0 + 4.0 * (double)i / (double)nz;
        r[3 * i + 2] = z;
        double az = fabs(z);
        if (az < thk / 2.0) {
            tg[3 * i + 1] = 1.0;
            w[i] = 1.0;
        } else {
            tg[3 * i + 2] = 1.0;
            w[i] = az > thk / 2.0 + trans ? 1.0 : 0.0;
        }
    }
    double T = (double)nt * dt;
    double gz = tbw / T / (gb * thk);
    double sum = 0.0;
    for (size_t k = 0; k < nt; k++) {
        g[3 * k + 2] = gz;
        double tc = ((double)k + 0.5) * dt - T / 2.0;
        double a = tbw * tc / T;
        double sinc = a == 0.0 ? 1.0 : sin(PS_PI * a) / (PS_PI * a);
        b1[2 * k] = sinc * (0.54 + 0.46 * cos(2.0 * PS_PI * tc / T));
        sum += b1[2 * k];
    }
    /* scale so that 2 pi gamma-bar dt sum_k u_k = pi/2 */
    double scale = (PS_PI / 2.0) / (2.0 * PS_PI * gb * dt * sum);
    for (size_t k = 0; k < nt; k++)
        b1[2 * k] *= scale;
    d->w = w;
    d->b1 = b1;
    d->loss = PS_LOSS_MLS;
    return PS_CONVERGED;
}

static double linspace(double a, double b, size_t n, size_t i)
{
    return n == 1 ? a : a + (b - a) * (double)i / (double)(n - 1);
}

/* inversion: adiabatic-style inversion over off-resonance and B1 scale. */
static int build_inversion(const preset_param *prm, ps_problem_desc *d,
                         double *buf[8], char *err, size_t errlen)
{
    size_t ndf = (size_t)param(prm, "ndf"), nb1 = (size_t)param(prm, "nb1");
    size_t nt = (size_t)param(prm, "nt");
    double dt = param(prm, "dt");
    size_t ns = ndf * nb1;
    double *r, *tg, *g, *df, *s, *b1;
    int st = preset_common(d, ns, nt, dt, buf, &r, &tg, &g, err, errlen);
    if (st)
        return st;
    if (!(df = xcalloc(ns, sizeof *df, &buf[3])) ||
        !(s = xcalloc(ns, sizeof *s, &buf[4])) ||
        !(b1 = xcalloc(2 * nt, sizeof *b1, &buf[5])))
        return PS_ERR_NO_MEMORY;
    for (size_t i = 0; i < ndf; i++) {
        for (size_t k = 0; k < nb1; k++) {
            size_t j = i * nb1 + k; /* df-major */
            df[j] = linspace(-200.0, 200.0, ndf, i);
            s[j] = linspace(0.9, 1.0, nb1, k);
            tg[3 * j + 2] = -1.0;
        }
    }
    for (size_t k = 0; k < nt; k++)
        b1[2 * k] = 0.05;
    d->df = df;
    d->b1scale = s;
    d->b1 = b1;
    d->loss = PS_LOSS_Z;
    return PS_CONVERGED;
}

/* ---- ptx2d ---- */

/* The object ellipse (x/a)^2 + (y/b)^2 < 1 of one subject over the grid of
 * n x n points on fov (cm). */
typedef struct ptx_object {
    double a, b, fov; /* cm */
    size_t n;
} ptx_object;

/* Whether grid point (x_i, y_k) lies inside the object. */
static int ptx_inside(const ptx_object *o, size_t i, size_t k)
{
    double xa = grid_coord(i, o->n, o->fov) / o->a;
    double yb = grid_coord(k, o->n, o->fov) / o->b;
    return xa * xa + yb * yb < 1.0;
}

/*
 * The points inside the object along one grid line: column i, or the
 * middle row (i = n) for the range of columns that hold any point. The
 * grid is symmetric (x_{n-1-i} = -x_i exactly) and the test monotone in
 * |x| and |y|, so the points form one run [n - end, end) about the middle,
 * where end is the first index from n/2 up that is outside (a run of
 * 2 end - n points; none when end = n/2). Found by bisection, so that a
 * fine grid over a small object costs nothing like n^2.
 */
static size_t ptx_run_end(const ptx_object *o, size_t i)
{
    size_t lo = o->n / 2, hi = o->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int in = i < o->n ? ptx_inside(o, i, mid) : ptx_inside(o, mid, o->n / 2);
        if (in)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Subject q of nsub: its object size obj_q = obj (0.85 + 0.3 q/(nsub-1))
 * (obj when nsub = 1) and ellipse a = obj_q, b = 0.8 obj_q. */
static ptx_object ptx_subject(double obj, size_t q, size_t nsub, size_t n,
                              double fov)
{
    double oq = nsub > 1 ? obj * (0.85 + 0.3 * (double)q / (double)(nsub - 1)) : obj;
    ptx_object o = {oq, 0.8 * oq, fov, n};
    return o;
}

/* Grid points inside the object, or PS_MAX_NS + 1 once there are more. */
static size_t ptx_count(const ptx_object *o)
{
    size_t h = o->n / 2, iend = ptx_run_end(o, o->n), count = 0;
    for (size_t i = o->n - iend; i < iend; i++) {
        size_t end = ptx_run_end(o, i);
        count += end > h ? 2 * end - o->n : 0;
        if (count > PS_MAX_NS)
            return PS_MAX_NS + 1;
    }
    return count;
}

/* ptx2d:sar=1: PTX_NQ VOPs, their TR (s), and the weight of the identity in
 * each, W/kg per G^2 (docs/presets.md). */
#define PTX_NQ 4
#define PTX_TR 10e-3
#define PTX_VOP_FLOOR 0.1

/*
 * The local SAR constraint of ptx2d:sar=1 on d (its nc channels, nt steps
 * of dt and start pulse b1 [nc][nt][2] already set), the VOPs in buf[6]:
 *     Q_q = 0.1 I + v_q v_q^H,   v_q[c] = exp(i 2 pi q c/nc),   q = 0..3
 *     Q_q[a][c] = 0.1 delta_ac + v_q[a] conj(v_q[c])   (exactly Hermitian:
 *                 the products of the same cosines and sines)
 *     TR = 10 ms,   sar_max = max_q SAR_q(x0) / 2,
 *     SAR_q(x0) = (dt / TR) sum_k b_k^H Q_q b_k   (model/constraints.h)
 * so that the start pulse violates every constraint of the largest SAR by
 * a factor of 2.
 */
static int ptx_sar(ps_problem_desc *d, double *buf[8], char *err, size_t errlen)
{
    const size_t nc = d->nc, nt = d->nt;
    double *vop; // [nq][nc][nc][2], W/kg per G^2
    if (!(vop = xcalloc(PTX_NQ * nc * nc * 2, sizeof *vop, &buf[6])))
        return PS_ERR_NO_MEMORY;
    for (size_t q = 0; q < PTX_NQ; q++) {
        double *Q = vop + 2 * nc * nc * q;
        for (size_t a = 0; a < nc; a++) {
            double ta = 2.0 * PS_PI * (double)(q * a) / (double)nc;
            for (size_t c = 0; c < nc; c++) {
                double tc = 2.0 * PS_PI * (double)(q * c) / (double)nc;
                /* (cos ta + i sin ta)(cos tc - i sin tc) */
                Q[2 * (a * nc + c)] = (a == c ? PTX_VOP_FLOOR : 0.0) +
                                      (cos(ta) * cos(tc) + sin(ta) * sin(tc));
                Q[2 * (a * nc + c) + 1] = sin(ta) * cos(tc) - cos(ta) * sin(tc);
            }
        }
    }
    ps_sar S = {PTX_NQ, (int)nc, vop, d->dt / PTX_TR, 1.0};
    double most = 0.0;
    for (size_t q = 0; q < PTX_NQ; q++) {
        const double *Q = vop + 2 * nc * nc * q;
        double sum = 0.0;
        for (size_t k = 0; k < nt; k++) /* channel c of step k: b1[2 (c nt + k)] */
            sum += ps_sar_quad(Q, (int)nc, d->b1 + 2 * k, d->b1 + 2 * k + 1, 2 * nt);
        most = fmax(most, ps_sar_of_sum(&S, sum));
    }
    if (!(most > 0.0) || !isfinite(most))
        return ps_status_msg(err, errlen, PS_ERR_PRESET, "preset 'ptx2d': sar=1 sets sar_max "
                             "to half the start pulse's largest SAR, which is %g here "
                             "(flip=0 gives a start pulse of no SAR)", most);
    d->nq = PTX_NQ;
    d->vop = vop;
    d->tr = PTX_TR;
    d->sar_max = 0.5 * most; // W/kg
    return PS_CONVERGED;
}

/*
 * ptx2d: 2D uniform excitation with nc transmit channels on a ring of
 * coils, over nsub subjects and nb0 B0 offsets (docs/presets.md, ptx2d).
 * Spin order: subject q, then grid point (x_i, y_k) inside its object in
 * grid order (i major), then B0 copy m.
 */
static int build_ptx2d(const preset_param *prm, ps_problem_desc *d,
                       double *buf[8], char *err, size_t errlen)
{
    size_t n = (size_t)param(prm, "n"), nc = (size_t)param(prm, "nc");
    size_t nt = (size_t)param(prm, "nt"), nsub = (size_t)param(prm, "nsub");
    size_t nb0 = (size_t)param(prm, "nb0");
    double fov = param(prm, "fov"), dt = param(prm, "dt");
    double flip = param(prm, "flip") * PS_PI / 180.0, res = param(prm, "res");
    double ring = param(prm, "ring"), height = param(prm, "height");
    double wave = param(prm, "wave"), obj = param(prm, "obj");
    double b0 = param(prm, "b0"), b0off = param(prm, "b0off");
    double sar = param(prm, "sar");
    double gb = PS_GAMMA_BAR_DEFAULT;
    if (sar != 0.0 && sar != 1.0)
        return ps_status_msg(err, errlen, PS_ERR_PRESET, "preset 'ptx2d': sar=%g must be 0 or 1",
                             sar);
    /* the largest subject, q = nsub - 1, inside the field of view and the ring */
    double amax = ptx_subject(obj, nsub - 1, nsub, n, fov).a;
    if (!(amax <= fov / 2.0))
        return ps_status_msg(err, errlen, PS_ERR_PRESET, "preset 'ptx2d': obj=%g (the largest "
                             "subject's half axis %g cm) must fit in the field of view "
                             "(at most fov/2 = %g)", obj, amax, fov / 2.0);
    if (!(amax < ring))
        return ps_status_msg(err, errlen, PS_ERR_PRESET, "preset 'ptx2d': obj=%g (the largest "
                             "subject's half axis %g cm) must lie inside the coil ring "
                             "(less than ring = %g)", obj, amax, ring);
    size_t ns = 0, most = PS_MAX_NS / nb0; /* grid points over the subjects */
    for (size_t q = 0; q < nsub; q++) {
        ptx_object o = ptx_subject(obj, q, nsub, n, fov);
        size_t c = ptx_count(&o);
        if (c == 0)
            return ps_status_msg(err, errlen, PS_ERR_PRESET, "preset 'ptx2d': the object of "
                                 "subject %zu (half axes %g and %g cm) holds no point of the "
                                 "%zu x %zu grid over fov=%g", q, o.a, o.b, n, n, fov);
        if (c > most - ns)
            return PS_ERR_SIZE;
        ns += c;
    }
    ns *= nb0;
    double *r, *tg, *g, *df, *map, *b1;
    int st = preset_common(d, ns, nt, dt, buf, &r, &tg, &g, err, errlen);
    if (st)
        return st;
    if (!(df = xcalloc(ns, sizeof *df, &buf[3])) ||
        !(map = xcalloc(2 * nc * ns, sizeof *map, &buf[4])) ||
        !(b1 = xcalloc(2 * nc * nt, sizeof *b1, &buf[5])))
        return PS_ERR_NO_MEMORY;

    double d0 = sqrt(ring * ring + height * height);
    size_t j = 0;
    for (size_t q = 0; q < nsub; q++) {
        ptx_object o = ptx_subject(obj, q, nsub, n, fov);
        /* coil c at phi_c + psi_q, psi_q = 2 pi q/(nc nsub) */
        double px[PS_MAX_CHANNELS], py[PS_MAX_CHANNELS], ang[PS_MAX_CHANNELS];
        for (size_t c = 0; c < nc; c++) {
            double phi = 2.0 * PS_PI * (double)c / (double)nc;
            double psi = 2.0 * PS_PI * (double)q / (double)(nc * nsub);
            ang[c] = phi + psi;
            px[c] = ring * cos(ang[c]);
            py[c] = ring * sin(ang[c]);
        }
        size_t iend = ptx_run_end(&o, n);
        for (size_t i = n - iend; i < iend; i++) {
            size_t end = ptx_run_end(&o, i);
            for (size_t k = n - end; k < end; k++) {
                double x = grid_coord(i, n, fov), y = grid_coord(k, n, fov);
                double dfq = b0 * (x * x - y * y) / (o.a * o.a);
                /* S_c(r) = d0/(nc d_c) exp(i (phi_c + psi_q + 2 pi (d_c - d0)/wave)) */
                double s[2 * PS_MAX_CHANNELS];
                for (size_t c = 0; c < nc; c++) {
                    double ex = x - px[c], ey = y - py[c];
                    double dc = sqrt(ex * ex + ey * ey + height * height);
                    double mag = d0 / ((double)nc * dc);
                    double ph = ang[c] + 2.0 * PS_PI * (dc - d0) / wave;
                    s[2 * c] = mag * cos(ph);
                    s[2 * c + 1] = mag * sin(ph);
                }
                for (size_t m = 0; m < nb0; m++, j++) {
                    r[3 * j] = x; // [ns][3], cm
                    r[3 * j + 1] = y;
                    df[j] = dfq + linspace(-b0off, b0off, nb0, m); // Hz
                    memcpy(map + 2 * nc * j, s, 2 * nc * sizeof *s); // [ns][nc][2]
                    tg[3 * j + 1] = sin(flip);
                    tg[3 * j + 2] = cos(flip);
                }
            }
        }
    }
    spiral_in_gradient(g, nt, dt, fov, res, gb);
    /* x0: CP mode, b_c = b exp(-i phi_c), b = flip/(2 pi gamma-bar nt dt) */
    double amp = flip / (2.0 * PS_PI * gb * (double)nt * dt);
    for (size_t c = 0; c < nc; c++) {
        double phi = 2.0 * PS_PI * (double)c / (double)nc;
        for (size_t k = 0; k < nt; k++) {
            b1[2 * (c * nt + k)] = amp * cos(phi); // [nc][nt][2], G
            b1[2 * (c * nt + k) + 1] = -amp * sin(phi);
        }
    }
    d->nc = nc;
    d->df = df;
    d->b1map = map;
    d->b1 = b1;
    d->loss = PS_LOSS_MLS;
    return sar == 1.0 ? ptx_sar(d, buf, err, errlen) : PS_CONVERGED;
}

/* Keys common to every preset: lambda (>= 0) and b1_max (> 0, 0 = none). */
#define COMMON_PARAMS {"lambda", 0.0, 0, 0, 0}, {"b1_max", 0.0, 0, 0, 0}

/* Keys of the presets with a gradient: the designed axes (a name, "xy",
 * held as their PS_AXIS_* bits; 0: none), smax (G/cm/s, > 0), gmax (G/cm,
 * >= 0, 0 = none) and g_end (0 or 1), the fields of the same names. */
#define GRADIENT_PARAMS                                                       \
    {"design_g", 0.0, 0, 0, 0}, {"smax", 0.0, 0, 1, 0}, {"gmax", 0.0, 0, 0, 0}, \
        {"g_end", 0.0, 0, 0, 0}

static const preset_def presets[] = {
    {"spiral2d",
     {{"n", 64, 1, 1, 0}, {"nt", 2000, 1, 1, 0}, {"fov", 24, 0, 1, 0}, {"dt", 4e-6, 0, 1, 0},
      {"flip", 30, 0, 0, 0}, {"res", 1.5, 0, 1, 0}, COMMON_PARAMS, GRADIENT_PARAMS,
      {NULL, 0, 0, 0, 0}},
     build_spiral2d},
    {"slice1d",
     {{"nz", 400, 1, 1, 0}, {"nt", 500, 1, 1, 0}, {"dt", 4e-6, 0, 1, 0}, {"thk", 0.5, 0, 1, 0},
      {"tbw", 4, 0, 1, 0}, {"trans", 0.1, 0, 0, 0}, COMMON_PARAMS, GRADIENT_PARAMS,
      {NULL, 0, 0, 0, 0}},
     build_slice1d},
    {"inversion",
     {{"ndf", 201, 1, 1, 0}, {"nb1", 10, 1, 1, 0}, {"nt", 375, 1, 1, 0}, {"dt", 4e-6, 0, 1, 0},
      COMMON_PARAMS, {NULL, 0, 0, 0, 0}},
     build_inversion},
    {"ptx2d",
     {{"n", 64, 1, 1, 0}, {"nc", 8, 1, 1, PS_MAX_CHANNELS}, {"nt", 1000, 1, 1, 0},
      {"fov", 24, 0, 1, 0}, {"dt", 4e-6, 0, 1, 0}, {"flip", 30, 0, 0, 0},
      {"res", 4, 0, 1, 0}, {"ring", 14.4, 0, 1, 0}, {"height", 2, 0, 0, 0},
      {"wave", 12, 0, 1, 0}, {"obj", 10, 0, 1, 0}, {"b0", 30, 0, 0, 0},
      {"nsub", 1, 1, 1, 0}, {"nb0", 1, 1, 1, 0}, {"b0off", 0, 0, 0, 0},
      {"sar", 0, 0, 0, 0}, COMMON_PARAMS, GRADIENT_PARAMS, {NULL, 0, 0, 0, 0}},
     build_ptx2d},
};

static const char *const preset_name_list[] = {"spiral2d", "slice1d",
                                               "inversion", "ptx2d", NULL};

const char *const *ps_preset_names(void)
{
    return preset_name_list;
}

int ps_is_decimal(const char *s)
{
    int digits = 0;
    if (*s == '+' || *s == '-')
        s++;
    for (; *s >= '0' && *s <= '9'; s++)
        digits++;
    if (*s == '.')
        for (s++; *s >= '0' && *s <= '9'; s++)
            digits++;
    if (!digits)
        return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (!(*s >= '0' && *s <= '9'))
            return 0;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return *s == '\0';
}

/* Parse "key=value" pairs separated by ',' into prm (a copy of the defaults). */
static int parse_overrides(const char *name, const char *list,
                           preset_param *prm, char *err, size_t errlen)
{
    const char *p = list;
    unsigned long long seen = 0; /* the keys given so far, by index */
    while (*p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char item[128];
        if (n == 0 || n >= sizeof item || (end && end[1] == '\0'))
            return ps_status_msg(err, errlen, PS_ERR_PRESET, "preset '%s': empty or too long override "
                        "near '%.40s'", name, p);
        memcpy(item, p, n);
        item[n] = '\0';
        char *eq = strchr(item, '=');
        if (!eq)
            return ps_status_msg(err, errlen, PS_ERR_PRESET, "preset '%s': override '%s' is not "
                        "key=value", name, item);
        *eq = '\0';
        const char *key = item, *val = eq + 1;
        preset_param *q = prm;
        while (q->key && strcmp(q->key, key) != 0)
            q++;
        if (!q->key) {
            char keys[256] = "";
            for (preset_param *k = prm; k->key; k++) {
                strncat(keys, k->key, sizeof keys - strlen(keys) - 1);
                if (k[1].key)
                    strncat(keys, ", ", sizeof keys - strlen(keys) - 1);
            }
            return ps_status_msg(err, errlen, PS_ERR_PRESET, "preset '%s': unknown key '%s' (keys: %s)",
                        name, key, keys);
        }
        const unsigned idx = (unsigned)(q - prm);
        if (idx < 64 && (seen >> idx) & 1u)
            return ps_status_msg(err, errlen, PS_ERR_PRESET, "preset '%s': key '%s' given twice",
                                 name, key);
        if (idx < 64)
            seen |= 1ull << idx;
        if (strcmp(key, "design_g") == 0) { /* the one value that is a name */
            unsigned axes;
            if (ps_design_g_parse(val, &axes) != PS_CONVERGED)
                return ps_status_msg(err, errlen, PS_ERR_PRESET, "preset '%s': design_g='%s' "
                                     "must name gradient axes: x, y, z or several of them in "
                                     "that order (xy, xz, yz, xyz)", name, val);
            q->value = axes;
            p += n + (p[n] == ',');
            continue;
        }
        char *stop;
        errno = 0;
        double v = strtod(val, &stop);
        if (!ps_is_decimal(val) || *stop != '\0')
            return ps_status_msg(err, errlen, PS_ERR_PRESET, "preset '%s': %s='%s' is not a number",
                        name, key, val);
        if (errno == ERANGE || !isfinite(v))
            return ps_status_msg(err, errlen, PS_ERR_PRESET, "preset '%s': %s=%s is out of range", name,
                        key, val);
        if (q->integer && (v < 1 || v != floor(v) || v > (q->max > 0 ? q->max : 1e8))) {
            char most[32] = "1e8";
            if (q->max > 0)
                snprintf(most, sizeof most, "%.0f", q->max);
            return ps_status_msg(err, errlen, PS_ERR_PRESET, "preset '%s': %s=%s must be a whole number "
                        "from 1 to %s", name, key, val, most);
        }
        if (q->positive && !(v > 0))
            return ps_status_msg(err, errlen, PS_ERR_PRESET, "preset '%s': %s=%s must be > 0", name,
                        key, val);
        if ((strcmp(key, "lambda") == 0 || strcmp(key, "b1_max") == 0 ||
             strcmp(key, "trans") == 0 || strcmp(key, "b0off") == 0 ||
             strcmp(key, "gmax") == 0) && v < 0)
            return ps_status_msg(err, errlen, PS_ERR_PRESET, "preset '%s': %s=%s must be >= 0", name,
                        key, val);
        if (strcmp(key, "g_end") == 0 && v != 0.0 && v != 1.0)
            return ps_status_msg(err, errlen, PS_ERR_PRESET, "preset '%s': g_end=%s must be 0 "
                                 "or 1", name, val);
        if (strcmp(key, "flip") == 0 && fabs(v) > 360.0)
            return ps_status_msg(err, errlen, PS_ERR_PRESET, "preset '%s': flip=%s must be within "
                        "[-360, 360] degrees", name, val);
        q->value = v;
        p += n;
        if (*p == ',')
            p++;
    }
    return PS_CONVERGED;
}

int ps_preset_create(const char *spec, ps_problem **out, char *err,
                     size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!spec || !out)
        return PS_ERR_NULL;
    *out = NULL;
    const char *colon = strchr(spec, ':');
    size_t nlen = colon ? (size_t)(colon - spec) : strlen(spec);
    const preset_def *def = NULL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strlen(presets[i].name) == nlen &&
            strncmp(presets[i].name, spec, nlen) == 0)
            def = &presets[i];
    if (!def)
        return ps_status_msg(err, errlen, PS_ERR_PRESET, "unknown preset '%.*s' (presets: spiral2d, "
                    "slice1d, inversion, ptx2d)", (int)nlen, spec);
    preset_param prm[PRESET_PARAMS];
    memcpy(prm, def->params, sizeof prm);
    int st = colon ? parse_overrides(def->name, colon + 1, prm, err, errlen) : 0;
    if (st)
        return st;

    ps_problem_desc d;
    ps_problem_desc_init(&d);
    double *buf[8] = {NULL};
    st = def->build(prm, &d, buf, err, errlen);
    if (st == PS_CONVERGED) {
        d.lambda = param(prm, "lambda");
        double bm = param(prm, "b1_max");
        d.b1_max = bm > 0 ? bm : PS_B1MAX_NONE;
        d.design_g = (unsigned)param(prm, "design_g");
        d.smax = param(prm, "smax");
        d.gmax = param(prm, "gmax");
        d.g_end = (int)param(prm, "g_end");
        char msg[200];
        st = ps_problem_validate(&d, msg, sizeof msg);
        if (st) /* the parameters given make an invalid problem */
            ps_status_msg(err, errlen, PS_ERR_PRESET, "preset '%s': %s, from the parameters '%s'", def->name, msg,
                 colon ? colon + 1 : "");
        else
            st = ps_problem_create(&d, out);
    }
    for (int i = 0; i < 8; i++)
        free(buf[i]);
    if (st == PS_ERR_SIZE && !(err && errlen && err[0]))
        ps_status_msg(err, errlen, PS_ERR_PRESET, "preset '%s': the parameters '%s' make more than 2^31 spins "
             "or 2^26 time steps", def->name, colon ? colon + 1 : "");
    if (st == PS_ERR_NO_MEMORY && err && errlen && err[0]) { /* the builder said why */
        char why[512];
        snprintf(why, sizeof why, "%s", err);
        ps_status_msg(err, errlen, PS_ERR_NO_MEMORY, "preset '%s': the parameters '%s' make %s",
                      def->name, colon ? colon + 1 : "", why);
    } else if (st == PS_ERR_NO_MEMORY)
        ps_status_msg(err, errlen, PS_ERR_PRESET, "preset '%s': out of memory", def->name);
    else if (st && st != PS_ERR_SCALE)
        st = PS_ERR_PRESET;
    return st;
}
