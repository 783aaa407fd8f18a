/*
 * Independent float64 reference of docs/model.md (see ref_bloch.h).
 *
 * Written from the specification alone, on purpose in a different form
 * from src/model/bloch_math.h: the rotation is Rodrigues' formula in the unit
 * axis n = b/|b| and the angle phi = |b| dt,
 *
 *     M' = M cos(phi) - (n x M) sin(phi) + n (n.M) (1 - cos(phi)),
 *
 * with 1 - cos(phi) evaluated as 2 sin^2(phi/2) (the same number, without
 * the cancellation that would otherwise spoil its derivative for small
 * phi). At |b| = 0 exactly the step is the identity and its derivative is
 * the limit dM'/db = -dt [db]_x M (the first-order term of R(n, -phi) M =
 * M - dt b x M + O(|b|^2)).
 *
 * Channels (SPEC 1.1): the field of spin j at step k is the complex sum
 * b1 = sum_c S_jc (u_ck + i v_ck) (without a b1map one channel with
 * S_j1 = s_j), b = gamma (Re b1, Im b1, G.r) + (0, 0, 2 pi df), written
 * here as a sum of dual numbers.
 *
 * Derivatives: every step is evaluated on dual numbers carrying the
 * derivatives with respect to (u_1k, v_1k, .., u_Nck, v_Nck, Mx_{k-1},
 * My_{k-1}, Mz_{k-1}), so each step's Jacobian, the complex sum over
 * channels included, is exact to rounding, with no formula for the adjoint
 * or for the chain rule over channels written by hand. The reverse sweep
 * then runs over the stored trajectory.
 */
#include "reference/ref_bloch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* ---- dual numbers: value + derivatives w.r.t. (u_c, v_c .., Mx, My, Mz) ---- */

#define ND (2 * REF_MAX_NC + 3)
/* derivative slot of u_c, v_c and M_i */
#define DU(c) (2 * (c))
#define DV(c) (2 * (c) + 1)
#define DM(nc, i) (2 * (nc) + (i))

typedef struct {
    double v;
    double d[ND];
} dual;

static dual dconst(double v)
{
    dual r;
    r.v = v;
    for (int i = 0; i < ND; i++)
        r.d[i] = 0.0;
    return r;
}

/* Independent variable number `which` with derivative `slope`. */
static dual dvar(double v, int which, double slope)
{
    dual r = dconst(v);
    r.d[which] = slope;
    return r;
}

static dual dadd(dual a, dual b)
{
    dual r;
    r.v = a.v + b.v;
    for (int i = 0; i < ND; i++)
        r.d[i] = a.d[i] + b.d[i];
    return r;
}

static dual dsub(dual a, dual b)
{
    dual r;
    r.v = a.v - b.v;
    for (int i = 0; i < ND; i++)
        r.d[i] = a.d[i] - b.d[i];
    return r;
}

static dual dmul(dual a, dual b)
{
    dual r;
    r.v = a.v * b.v;
    for (int i = 0; i < ND; i++)
        r.d[i] = a.d[i] * b.v + a.v * b.d[i];
    return r;
}

static dual dscale(dual a, double s)
{
    dual r;
    r.v = a.v * s;
    for (int i = 0; i < ND; i++)
        r.d[i] = a.d[i] * s;
    return r;
}

static dual ddiv(dual a, dual b)
{
    dual r;
    r.v = a.v / b.v;
    for (int i = 0; i < ND; i++)
        r.d[i] = (a.d[i] - r.v * b.d[i]) / b.v;
    return r;
}

/* sqrt of a positive dual. */
static dual dsqrt(dual a)
{
    dual r;
    r.v = sqrt(a.v);
    for (int i = 0; i < ND; i++)
        r.d[i] = a.d[i] / (2.0 * r.v);
    return r;
}

static dual dsin(dual a)
{
    dual r;
    double c = cos(a.v);
    r.v = sin(a.v);
    for (int i = 0; i < ND; i++)
        r.d[i] = c * a.d[i];
    return r;
}

static dual dcos(dual a)
{
    dual r;
    double s = sin(a.v);
    r.v = cos(a.v);
    for (int i = 0; i < ND; i++)
        r.d[i] = -s * a.d[i];
    return r;
}

/* ---- one step on duals ---- */

/*
 * The step of docs/model.md for one spin on dual numbers: field b[3]
 * (rad/s), M m[3], then relaxation when relax != 0. Writes M' into out[3].
 */
static void dual_step(const dual b[3], double dt, int relax, double e1,
                      double e2, const dual m[3], dual out[3])
{
    dual nb2 = dadd(dadd(dmul(b[0], b[0]), dmul(b[1], b[1])), dmul(b[2], b[2]));
    if (nb2.v == 0.0) {
        /* No field: identity, with the derivative of the limit
         * M' = M - dt (b x M), i.e. dM' = dM - dt (db x M) at b = 0. */
        for (int i = 0; i < 3; i++) {
            int i1 = (i + 1) % 3, i2 = (i + 2) % 3;
            /* (db x M)_i = db_i1 M_i2 - db_i2 M_i1 */
            dual cr = dsub(dmul(b[i1], m[i2]), dmul(b[i2], m[i1]));
            /* b is zero in value, so cr carries only db x M */
            out[i] = dsub(m[i], dscale(cr, dt));
        }
    } else {
        dual nb = dsqrt(nb2);
        dual phi = dscale(nb, dt);
        dual n[3] = {ddiv(b[0], nb), ddiv(b[1], nb), ddiv(b[2], nb)};
        dual c = dcos(phi);
        dual s = dsin(phi);
        dual sh = dsin(dscale(phi, 0.5));
        dual omc = dscale(dmul(sh, sh), 2.0); /* 1 - cos(phi) */
        dual nm =
            dadd(dadd(dmul(n[0], m[0]), dmul(n[1], m[1])), dmul(n[2], m[2]));
        dual nxm[3] = {
            dsub(dmul(n[1], m[2]), dmul(n[2], m[1])),
            dsub(dmul(n[2], m[0]), dmul(n[0], m[2])),
            dsub(dmul(n[0], m[1]), dmul(n[1], m[0])),
        };
        dual nmo = dmul(nm, omc);
        for (int i = 0; i < 3; i++)
            out[i] =
                dadd(dsub(dmul(m[i], c), dmul(nxm[i], s)), dmul(n[i], nmo));
    }
    if (relax) {
        out[0] = dscale(out[0], e2);
        out[1] = dscale(out[1], e2);
        out[2] = dadd(dscale(out[2], e1), dconst(1.0 - e1));
    }
}

void ref_step(const double b[3], double dt, int relax, double e1, double e2,
              const double m[3], double out[3])
{
    dual bd[3], md[3], od[3];
    for (int i = 0; i < 3; i++) {
        bd[i] = dconst(b[i]);
        md[i] = dconst(m[i]);
    }
    dual_step(bd, dt, relax, e1, e2, md, od);
    for (int i = 0; i < 3; i++)
        out[i] = od[i].v;
}

/* ---- per-spin parameters ---- */

typedef struct {
    double gamma; /* rad/s/G */
    size_t nc;    /* channels */
    double gS[REF_MAX_NC][2]; /* gamma S_jc (Re, Im), rad/s/G */
    double r[3];  /* cm */
    double wz;    /* 2 pi df_j, rad/s */
    double m0[3];
    int relax;
    double e1, e2;
} spin;

static double gamma_of(const ps_problem_desc *d)
{
    double gb = d->gamma_bar > 0 ? d->gamma_bar : PS_GAMMA_BAR_DEFAULT;
    return 2.0 * M_PI * gb;
}

size_t ref_nc(const ps_problem_desc *d)
{
    return d->nc ? d->nc : 1;
}

static void spin_of(const ps_problem_desc *d, size_t j, spin *sp)
{
    sp->gamma = gamma_of(d);
    sp->nc = ref_nc(d);
    for (size_t c = 0; c < sp->nc; c++) {
        if (d->b1map) { /* [ns][nc][2] */
            sp->gS[c][0] = sp->gamma * d->b1map[2 * (j * sp->nc + c)];
            sp->gS[c][1] = sp->gamma * d->b1map[2 * (j * sp->nc + c) + 1];
        } else {
            sp->gS[c][0] = sp->gamma * (d->b1scale ? d->b1scale[j] : 1.0);
            sp->gS[c][1] = 0.0;
        }
    }
    for (int i = 0; i < 3; i++)
        sp->r[i] = d->r[3 * j + i];
    sp->wz = 2.0 * M_PI * (d->df ? d->df[j] : 0.0);
    if (d->m0) {
        for (int i = 0; i < 3; i++)
            sp->m0[i] = d->m0[3 * j + i];
    } else {
        sp->m0[0] = 0.0;
        sp->m0[1] = 0.0;
        sp->m0[2] = 1.0;
    }
    sp->relax = d->t1 != NULL || d->t2 != NULL;
    sp->e1 = d->t1 ? exp(-d->dt / d->t1[j]) : 1.0;
    sp->e2 = d->t2 ? exp(-d->dt / d->t2[j]) : 1.0;
}

/*
 * Step k (1-based) of spin sp from m[3] on duals: the derivatives of M_k
 * with respect to (u_ck, v_ck for every c, M_{k-1}) land in out[i].d.
 */
static void spin_step(const ps_problem_desc *d, const spin *sp, const double *x,
                      size_t k, const double m[3], dual out[3])
{
    size_t nt = d->nt, nc = sp->nc;
    const double *g = d->g + 3 * (k - 1);
    /* b = gamma (Re b1, Im b1, G.r) + (0, 0, 2 pi df), rad/s, with
     * b1 = sum_c S_c (u_c + i v_c):
     *   Re: sum_c (Re S_c u_c - Im S_c v_c),  Im: sum_c (Re S_c v_c + Im S_c u_c) */
    dual b[3];
    b[0] = dconst(0.0);
    b[1] = dconst(0.0);
    for (size_t c = 0; c < nc; c++) {
        dual uc = dvar(x[2 * c * nt + k - 1], DU(c), 1.0);
        dual vc = dvar(x[(2 * c + 1) * nt + k - 1], DV(c), 1.0);
        b[0] = dadd(b[0], dsub(dscale(uc, sp->gS[c][0]), dscale(vc, sp->gS[c][1])));
        b[1] = dadd(b[1], dadd(dscale(vc, sp->gS[c][0]), dscale(uc, sp->gS[c][1])));
    }
    b[2] = dconst(sp->gamma *
                      (g[0] * sp->r[0] + g[1] * sp->r[1] + g[2] * sp->r[2]) +
                  sp->wz);
    dual md[3];
    for (int i = 0; i < 3; i++)
        md[i] = dvar(m[i], DM(nc, i), 1.0);
    dual_step(b, d->dt, sp->relax, sp->e1, sp->e2, md, out);
}

static int desc_ok(const ps_problem_desc *d, const double *x)
{
    return d && x && d->r && d->target && d->g && d->ns > 0 && d->nt > 0 &&
           ref_nc(d) <= REF_MAX_NC && (ref_nc(d) == 1 || d->b1map);
}

int ref_trajectory(const ps_problem_desc *d, const double *x, size_t j,
                   double *traj)
{
    if (!desc_ok(d, x) || !traj || j >= d->ns)
        return -1;
    spin sp;
    spin_of(d, j, &sp);
    for (int i = 0; i < 3; i++)
        traj[i] = sp.m0[i];
    for (size_t k = 1; k <= d->nt; k++) {
        dual out[3];
        spin_step(d, &sp, x, k, traj + 3 * (k - 1), out);
        for (int i = 0; i < 3; i++)
            traj[3 * k + i] = out[i].v;
    }
    return 0;
}

int ref_simulate(const ps_problem_desc *d, const double *x, double *m)
{
    if (!desc_ok(d, x) || !m)
        return -1;
    double *traj = malloc(sizeof(double) * 3 * (d->nt + 1));
    if (!traj)
        return -1;
    for (size_t j = 0; j < d->ns; j++) {
        ref_trajectory(d, x, j, traj);
        memcpy(m + 3 * j, traj + 3 * d->nt, 3 * sizeof(double));
    }
    free(traj);
    return 0;
}

/*
 * Loss of one spin, written from docs/model.md (Losses), and dL/dM into lam[3]:
 *   full: w |M - Mt|^2          xy: w ((Mx-Mtx)^2 + (My-Mty)^2)
 *   mls:  w (sqrt(Mx^2+My^2+1e-12) - sqrt(Mtx^2+Mty^2))^2
 *   z:    w (Mz - Mtz)^2
 */
static double ref_loss(int loss, double w, const double m[3],
                       const double mt[3], double lam[3])
{
    double l = 0.0;
    lam[0] = lam[1] = lam[2] = 0.0;
    if (loss == PS_LOSS_FULL || loss == PS_LOSS_XY) {
        int n = loss == PS_LOSS_FULL ? 3 : 2;
        for (int i = 0; i < n; i++) {
            double e = m[i] - mt[i];
            l += w * e * e;
            lam[i] = 2.0 * w * e;
        }
    } else if (loss == PS_LOSS_MLS) {
        double a = sqrt(m[0] * m[0] + m[1] * m[1] + 1e-12);
        double at = sqrt(mt[0] * mt[0] + mt[1] * mt[1]);
        l = w * (a - at) * (a - at);
        /* d a / d Mx = Mx / a */
        lam[0] = 2.0 * w * (a - at) * m[0] / a;
        lam[1] = 2.0 * w * (a - at) * m[1] / a;
    } else {
        double e = m[2] - mt[2];
        l = w * e * e;
        lam[2] = 2.0 * w * e;
    }
    return l;
}

int ref_eval(const ps_problem_desc *d, const double *x, double *f, double *grad,
             double *m)
{
    if (!desc_ok(d, x) || !f)
        return -1;
    size_t nt = d->nt, nc = ref_nc(d), nx = 2 * nc * nt;
    double *traj = malloc(sizeof(double) * 3 * (nt + 1));
    if (!traj)
        return -1;
    if (grad)
        for (size_t i = 0; i < nx; i++)
            grad[i] = 0.0;

    double loss = 0.0;
    for (size_t j = 0; j < d->ns; j++) {
        spin sp;
        spin_of(d, j, &sp);
        ref_trajectory(d, x, j, traj);
        const double *mN = traj + 3 * nt;
        if (m)
            memcpy(m + 3 * j, mN, 3 * sizeof(double));
        double lam[3];
        loss += ref_loss((int)d->loss, d->w ? d->w[j] : 1.0, mN,
                         d->target + 3 * j, lam);
        if (!grad)
            continue;
        /* Reverse sweep over the stored trajectory: with lam = dL/dM_k,
         *   dL/du_ck += lam . dM_k/du_ck,   dL/dv_ck += lam . dM_k/dv_ck,
         *   dL/dM_{k-1} = (dM_k/dM_{k-1})^T lam. */
        for (size_t k = nt; k >= 1; k--) {
            dual out[3];
            spin_step(d, &sp, x, k, traj + 3 * (k - 1), out);
            double nl[3] = {0.0, 0.0, 0.0};
            for (size_t c = 0; c < nc; c++) {
                double gu = 0.0, gv = 0.0;
                for (int i = 0; i < 3; i++) {
                    gu += lam[i] * out[i].d[DU(c)];
                    gv += lam[i] * out[i].d[DV(c)];
                }
                grad[2 * c * nt + k - 1] += gu;
                grad[(2 * c + 1) * nt + k - 1] += gv;
            }
            for (int i = 0; i < 3; i++)
                for (int a = 0; a < 3; a++)
                    nl[a] += lam[i] * out[i].d[DM(nc, a)];
            for (int a = 0; a < 3; a++)
                lam[a] = nl[a];
        }
    }
    free(traj);

    /* power penalty lambda sum_c sum_k (u_ck^2 + v_ck^2) */
    double pen = 0.0;
    for (size_t i = 0; i < nx; i++) {
        pen += x[i] * x[i];
        if (grad)
            grad[i] += 2.0 * d->lambda * x[i];
    }
    *f = loss + d->lambda * pen;
    return 0;
}

/* ---- random test problems ---- */

void ref_problem_free(ref_problem *rp)
{
    if (!rp)
        return;
    free(rp->r);
    free(rp->target);
    free(rp->df);
    free(rp->b1scale);
    free(rp->b1map);
    free(rp->w);
    free(rp->m0);
    free(rp->t1);
    free(rp->t2);
    free(rp->g);
    free(rp->b1);
    free(rp->x);
    free(rp->z);
    memset(rp, 0, sizeof *rp);
}

/* A uniformly random unit vector. */
static void unit_vector(uint64_t *s, double *v)
{
    double n2;
    do {
        for (int i = 0; i < 3; i++)
            v[i] = tu_uniform(s, -1.0, 1.0);
        n2 = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
    } while (n2 > 1.0 || n2 < 1e-4);
    double n = sqrt(n2);
    for (int i = 0; i < 3; i++)
        v[i] /= n;
}

int ref_problem_random(const ref_problem_opts *o, ref_problem *rp)
{
    memset(rp, 0, sizeof *rp);
    if (o->nc > REF_MAX_NC)
        return -1;
    size_t ns = o->ns, nt = o->nt, nc = o->nc ? o->nc : 1, nx = 2 * nc * nt;
    uint64_t s = o->seed;
    rp->r = malloc(3 * ns * sizeof(double));
    rp->target = malloc(3 * ns * sizeof(double));
    rp->df = malloc(ns * sizeof(double));
    rp->b1scale = malloc(ns * sizeof(double));
    rp->w = malloc(ns * sizeof(double));
    rp->m0 = malloc(3 * ns * sizeof(double));
    rp->g = malloc(3 * nt * sizeof(double));
    rp->b1 = malloc(nx * sizeof(double));
    rp->x = malloc(nx * sizeof(double));
    rp->z = malloc(nx * sizeof(double));
    int bad = !rp->r || !rp->target || !rp->df || !rp->b1scale || !rp->w ||
              !rp->m0 || !rp->g || !rp->b1 || !rp->x || !rp->z;
    if (o->nc > 0) {
        rp->b1map = malloc(2 * nc * ns * sizeof(double));
        bad |= !rp->b1map;
    }
    if (o->relax != REF_RELAX_NONE) {
        rp->t1 = malloc(ns * sizeof(double));
        rp->t2 = malloc(ns * sizeof(double));
        bad |= !rp->t1 || !rp->t2;
    }
    if (bad) {
        ref_problem_free(rp);
        return -1;
    }
    double dt = 4e-6, T = (double)nt * dt;
    for (size_t j = 0; j < ns; j++) {
        for (int i = 0; i < 3; i++)
            rp->r[3 * j + i] = tu_uniform(&s, -3.0, 3.0);
        unit_vector(&s, rp->target + 3 * j);
        unit_vector(&s, rp->m0 + 3 * j);
        rp->df[j] = tu_uniform(&s, -300.0, 300.0);
        rp->b1scale[j] = tu_uniform(&s, 0.7, 1.3);
        rp->w[j] = tu_uniform(&s, 0.0, 2.0);
        if (o->relax == REF_RELAX_MILD) {
            rp->t1[j] = tu_uniform(&s, 1.0, 5.0) * T;
            rp->t2[j] = tu_uniform(&s, 0.3, 1.0) * rp->t1[j];
        } else if (o->relax == REF_RELAX_STRONG) {
            rp->t1[j] = tu_uniform(&s, 0.5, 2.0) * T;
            rp->t2[j] = tu_uniform(&s, 0.05, 0.5) * T;
        }
    }
    if (ns > 1)
        rp->w[ns - 1] = 0.0; /* a spin that must not contribute */
    if (o->zero_spin) {
        rp->r[0] = rp->r[1] = rp->r[2] = 0.0;
        rp->df[0] = 0.0;
        rp->w[0] = 1.0;
    }
    /* smooth waveform of a few cycles per axis plus noise, G/cm */
    double ph[3] = {tu_uniform(&s, 0, 6.3), tu_uniform(&s, 0, 6.3),
                    tu_uniform(&s, 0, 6.3)};
    for (size_t k = 0; k < nt; k++) {
        double t = (double)k / (double)nt;
        rp->g[3 * k] =
            1.5 * sin(2 * M_PI * 3.0 * t + ph[0]) + tu_uniform(&s, -0.5, 0.5);
        rp->g[3 * k + 1] =
            1.5 * cos(2 * M_PI * 2.0 * t + ph[1]) + tu_uniform(&s, -0.5, 0.5);
        rp->g[3 * k + 2] =
            0.8 * sin(2 * M_PI * 1.0 * t + ph[2]) + tu_uniform(&s, -0.5, 0.5);
    }
    /* pulse: a bias (a net flip of ~0.6 rad per 40 steps) plus noise, G;
     * with nc channels each channel's pulse scaled by 1/sqrt(nc), so that
     * the field, a sum over channels of random phases, has about the
     * single-channel size */
    double amp = o->nc > 0 ? 1.0 / sqrt((double)nc) : 1.0;
    for (size_t c = 0; c < nc; c++) {
        double *x = rp->x + 2 * c * nt, *z = rp->z + 2 * c * nt;
        double *b1 = rp->b1 + 2 * c * nt;
        for (size_t k = 0; k < nt; k++) {
            x[k] = amp * (0.15 + tu_uniform(&s, -0.3, 0.3));
            x[nt + k] = amp * (-0.05 + tu_uniform(&s, -0.3, 0.3));
            z[k] = tu_uniform(&s, -1.8, 1.8);
            z[nt + k] = tu_uniform(&s, -1.8, 1.8);
            if (o->zero_spin && k % 3 == 1)
                x[k] = x[nt + k] = z[k] = z[nt + k] = 0.0;
            b1[2 * k] = x[k];
            b1[2 * k + 1] = x[nt + k];
        }
    }
    /* complex sensitivities: |S| 0.4..1.2, any phase, and a spin with a
     * purely imaginary S on channel 0 and a real one elsewhere */
    if (o->nc > 0) {
        for (size_t j = 0; j < ns; j++)
            for (size_t c = 0; c < nc; c++) {
                double a = tu_uniform(&s, 0.4, 1.2);
                double phase = tu_uniform(&s, -M_PI, M_PI);
                rp->b1map[2 * (j * nc + c)] = a * cos(phase);
                rp->b1map[2 * (j * nc + c) + 1] = a * sin(phase);
            }
        if (ns > 1) {
            rp->b1map[2 * nc] = 0.0;  /* spin 1, channel 0: S = 0.9 i */
            rp->b1map[2 * nc + 1] = 0.9;
            if (nc > 1) {
                rp->b1map[2 * nc + 2] = 0.7; /* channel 1: S = 0.7 */
                rp->b1map[2 * nc + 3] = 0.0;
            }
        }
        free(rp->b1scale);
        rp->b1scale = NULL;
    }
    ps_problem_desc *d = &rp->d;
    memset(d, 0, sizeof *d);
    d->ns = ns;
    d->nt = nt;
    d->nc = o->nc;
    d->b1map = rp->b1map;
    d->r = rp->r;
    d->target = rp->target;
    d->df = rp->df;
    d->b1scale = rp->b1scale;
    d->w = rp->w;
    d->m0 = rp->m0;
    d->t1 = rp->t1;
    d->t2 = rp->t2;
    d->g = rp->g;
    d->b1 = rp->b1;
    d->dt = dt;
    d->gamma_bar = PS_GAMMA_BAR_DEFAULT;
    d->lambda = o->lambda;
    d->loss = o->loss;
    d->b1_max = o->b1_max;
    return 0;
}
