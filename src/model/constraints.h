/*
 * The hardware constraints met by penalty (SPEC 1.3): local SAR over
 * virtual observation points (VOPs). Written once, compiled into the CPU
 * backend (C11) and the CUDA kernels (__host__ __device__), all in double;
 * the peak RF limit is exact by the reparametrization (model/design.h)
 * and needs no penalty.
 *
 * SAR. Nq Hermitian, positive semidefinite matrices Q_q [Nc x Nc] (W/kg
 * per G^2, layout [q][a][c][2] = (Re, Im) Q_q[a][c]) and the pulse of step
 * k over the channels, b_k = (b_1k .. b_Nck):
 *     SAR_q = (dt / TR) sum_k b_k^H Q_q b_k
 * Each backend sums the per-step forms in its own fixed order (the CPU in
 * step order, the GPU by block partials) and scales the sum once.
 *
 * Penalty. With the scaled constraint c_q = SAR_q / sar_max - 1 (<= 0 when
 * met) and the round's weight mu (opt/solver.h):
 *     P = mu sum_q max(0, c_q)^2
 *     dP/du_ak = sum_q w_q 2 Re (Q_q b_k)_a,  dP/dv_ak = sum_q w_q 2 Im (Q_q b_k)_a,
 *     w_q = mu 2 max(0, c_q) (dt / TR) / sar_max
 * (b^H Q b = sum_a conj(b_a) (Q b)_a is real for a Hermitian Q, and its
 * derivative in u_a, v_a is twice the real and imaginary part of (Q b)_a).
 * The violation a round ends with is max(0, max_q c_q).
 */
#ifndef PS_SRC_MODEL_CONSTRAINTS_H
#define PS_SRC_MODEL_CONSTRAINTS_H

#include <math.h>
#include <stddef.h>

#include "common/ps_hd.h"

/* The SAR constraint of a problem as the math sees it. */
typedef struct ps_sar {
    int nq, nc;         /* VOPs (0: none), channels */
    const double *vop;  /* [nq][nc][nc][2]; a device pointer in the GPU's copy */
    double scale;       /* dt / TR */
    double sar_max;     /* W/kg */
} ps_sar;

/* (Q b)_a of one step (Re into *re, Im into *im) for the VOP Q
 * [nc][nc][2], the pulse's channel c at u[c s], v[c s]. */
PS_HD void ps_sar_qb(const double *Q, int nc, int a, const double *u, const double *v, size_t s,
                     double *re, double *im)
{
    double r = 0.0, i = 0.0;
    for (int c = 0; c < nc; c++) {
        const double qr = Q[2 * (a * nc + c)], qi = Q[2 * (a * nc + c) + 1];
        const double br = u[c * s], bi = v[c * s];
        r += qr * br - qi * bi;
        i += qr * bi + qi * br;
    }
    *re = r;
    *im = i;
}

/* b^H Q b of one step: sum_a Re conj(b_a) (Q b)_a. */
PS_HD double ps_sar_quad(const double *Q, int nc, const double *u, const double *v, size_t s)
{
    double acc = 0.0;
    for (int a = 0; a < nc; a++) {
        double re, im;
        ps_sar_qb(Q, nc, a, u, v, s, &re, &im);
        acc += u[a * s] * re + v[a * s] * im;
    }
    return acc;
}

/* SAR_q from the sum of its per-step forms. */
PS_HD double ps_sar_of_sum(const ps_sar *S, double quad_sum)
{
    return S->scale * quad_sum;
}

/* The scaled constraint c_q of SAR_q (<= 0: met). */
PS_HD double ps_sar_excess(const ps_sar *S, double sar)
{
    return sar / S->sar_max - 1.0;
}

/* The penalty mu sum_q max(0, c_q)^2 of the SAR values sar[nq], in q
 * order; *viol = max(0, max_q c_q). */
PS_HD double ps_sar_penalty(const ps_sar *S, double mu, const double *sar, double *viol)
{
    double p = 0.0, v = 0.0;
    for (int q = 0; q < S->nq; q++) {
        const double c = ps_sar_excess(S, sar[q]);
        if (c > 0.0) {
            p += c * c;
            v = c > v ? c : v;
        }
    }
    *viol = v;
    return mu * p;
}

/* The weight w_q of VOP q's per-step gradient 2 (Q_q b_k) (0 when met). */
PS_HD double ps_sar_weight(const ps_sar *S, double mu, double sar)
{
    const double c = ps_sar_excess(S, sar);
    return c > 0.0 ? mu * 2.0 * c * S->scale / S->sar_max : 0.0;
}

/* The penalty's gradient at channel a of one step, added to (gu, gv):
 * sum_q w[q] 2 (Re, Im)(Q_q b_k)_a, in q order (VOPs of weight 0 skipped). */
PS_HD void ps_sar_step_grad(const ps_sar *S, const double *w, int a, const double *u,
                            const double *v, size_t s, double *gu, double *gv)
{
    for (int q = 0; q < S->nq; q++) {
        if (w[q] == 0.0)
            continue;
        double re, im;
        ps_sar_qb(S->vop + (size_t)2 * S->nc * S->nc * q, S->nc, a, u, v, s, &re, &im);
        *gu += w[q] * 2.0 * re;
        *gv += w[q] * 2.0 * im;
    }
}

/*
 * The limits of a designed gradient axis (SPEC 1.3), waveform g[nt] (G/cm):
 * |g_k| <= gmax (gmax > 0) with c_k = |g_k| / gmax - 1, and with g_end the
 * return to zero, c_end = g_{nt-1} / gmax (an equality: penalized on both
 * sides). The penalty mu (sum_k max(0, c_k)^2 + c_end^2) is returned, its
 * gradient added to dg[nt] (may be NULL), and *viol raised to the largest
 * of max_k c_k and |c_end|. The slew limit needs no penalty: it is exact
 * by the parametrization (model/design.h).
 */
PS_HD double ps_gradient_penalty(double gmax, int g_end, double mu, size_t nt, const double *g, double *dg,
                                 double *viol)
{
    double p = 0.0;
    if (!(gmax > 0.0))
        return 0.0;
    for (size_t k = 0; k < nt; k++) {
        const double c = fabs(g[k]) / gmax - 1.0;
        if (c > 0.0) {
            p += c * c;
            if (dg)
                dg[k] += mu * 2.0 * c * (g[k] > 0.0 ? 1.0 : -1.0) / gmax;
            *viol = c > *viol ? c : *viol;
        }
    }
    if (g_end) {
        const double e = g[nt - 1] / gmax;
        p += e * e;
        if (dg)
            dg[nt - 1] += mu * 2.0 * e / gmax;
        *viol = fabs(e) > *viol ? fabs(e) : *viol;
    }
    return mu * p;
}

/* ---- host (model/constraints.c) ---- */

#include "persolve.h"

/* The SAR constraint of p (nq 0 without VOPs), the host's pointers. */
ps_sar ps_problem_sar(const ps_problem *p);

/* SAR_q of the pulse b[nx] (layout of x) into sar[nq], steps in order. */
void ps_sar_values(const ps_sar *S, size_t nt, const double *b, double *sar);

/* The largest |b_ck| over the steps of each channel c of the pulse b[nx]
 * into peak[nc]. */
void ps_peak_values(size_t nc, size_t nt, const double *b, double *peak);

/* The limits' values of one axis's waveform g[k stride] (k = 0..nt-1, G/cm)
 * of steps dt (s): out[0] = max_k |g_k| (G/cm), out[1] = max_k |g_k -
 * g_{k-1}| / dt with g_{-1} = 0 (G/cm/s), out[2] = |g_{nt-1}| (G/cm). */
void ps_gradient_values(size_t nt, double dt, const double *g, size_t stride, double out[3]);

#endif /* PS_SRC_MODEL_CONSTRAINTS_H */
