/*
 * The Bloch step, its adjoint, the loss and the b1_max reparametrization:
 * the model of docs/model.md, written once and compiled into the CPU
 * backend (C11) and the CUDA kernels (__host__ __device__).
 *
 * Rotation. With theta = b dt (rad), q = |theta|^2, phi = sqrt(q):
 *
 *     M' = R M,   R = c I - A [theta]_x + B theta theta^T
 *     c = cos(phi),  A = sin(phi)/phi,  B = (1 - cos(phi))/q
 *
 * which is Rodrigues' formula for R(n, -phi), n = theta/phi, written in
 * theta so that it is analytic at theta = 0 (A -> 1, B -> 1/2: identity).
 * Near 0 the coefficients come from their Taylor series in q, so nothing is
 * ever divided by phi there.
 *
 * Adjoint (reverse-mode derivative of one step). Given mu = dL/dM' (M' = R M),
 * with C = (1 - A)/q = (phi - sin(phi))/phi^3 (series near 0, like A and B):
 *
 *     dL/dM     = R^T mu = c mu + A (theta x mu) + B theta (theta . mu)
 *     dL/dtheta = J_+ (mu x M') = J_- ((R^T mu) x M)
 *     J_s v     = A v + s B (theta x v) + C theta (theta . v)
 *
 * J_+ is the left Jacobian of the rotation's exponential, J_- its right
 * one; the cross product is the same vector seen after or before the
 * rotation. The GPU's reverse sweep holds M' and takes J_+, the CPU's
 * stored states are M and it takes J_-: 12 multiply-adds for the three
 * components where the expanded derivative of R took about 30.
 *
 * Relaxation after the rotation: Mxy *= E2, Mz = E1 Mz + (1 - E1); its
 * adjoint scales mu by (E2, E2, E1). Both are written with the decrements
 * a = 1 - E = -expm1(-dt/T) (and b = 1/E - 1 = expm1(dt/T) for the
 * inverse), which keep full relative precision in float32.
 *
 * The functions exist in two precisions, generated from model/bloch_math_tmpl.h:
 * suffix _f (float) and _d (double).
 */
#ifndef PS_SRC_BLOCH_MATH_H
#define PS_SRC_BLOCH_MATH_H

#include <math.h>

#include "common/ps_hd.h"

/* Below this q = phi^2 the rotation coefficients use their series. */
#define PS_SERIES_Q 0.25
/* float32: below this q (and from PS_SERIES_Q) they are polynomials
 * (model/bloch_math_tmpl.h, PS_MID_A); past it sine and cosine. */
#define PS_MID_Q_F 4.0

/*
 * Multiply-adds. On the GPU they are explicit fused multiply-adds and the
 * CUDA build contracts nothing itself (--fmad=false): left to the compiler,
 * a*b + c is fused or not depending on the surrounding code, so the same
 * phase inlined into two kernels would round differently and the solve's
 * variants would part. On the CPU they are a*b + c, as written.
 *   PS_FMA(a, b, c) = a b + c,  PS_FMS(a, b, c) = a b - c,
 *   PS_DOT3 = (a0 b0 + a1 b1) + a2 b2
 */
#ifdef __CUDA_ARCH__
#define PS_FMA_F(a, b, c) fmaf((a), (b), (c))
#define PS_FMA_D(a, b, c) fma((a), (b), (c))
#else
#define PS_FMA_F(a, b, c) ((a) * (b) + (c))
#define PS_FMA_D(a, b, c) ((a) * (b) + (c))
#endif
#define PS_FMS(a, b, c) PS_FMA((a), (b), -(c))
#define PS_DOT3(a0, b0, a1, b1, a2, b2) PS_FMA((a2), (b2), PS_FMA((a1), (b1), (a0) * (b0)))

/*
 * float on the GPU: 1/phi from one reciprocal square root (rsqrtf, about 2
 * ulp, refined by one Newton step r <- r + r (1 - q r^2) / 2), and A, B,
 * C, H multiplied by it and its square instead of phi and q divided into
 * them: one reciprocal square root where the CPU takes a square root and
 * IEEE divisions; sin and cos of phi from one sincosf. The CPU keeps the
 * divisions (cheap there).
 */
#ifdef __CUDA_ARCH__
static __device__ __forceinline__ float ps_recip_root_f(float q)
{
    float r = rsqrtf(q);
    return fmaf((float)0.5 * r, fmaf(-q * r, r, (float)1), r);
}
#define PS_RECIP_ROOT(q) ps_recip_root_f(q)
#define PS_RSINCOS(x, s, c) sincosf((x), (s), (c))
#else
#define PS_RSINCOS(x, s, c) ((*(s)) = sinf(x), (*(c)) = cosf(x))
#endif
#define PS_REAL float
#define PS_SFX(name) name##_f
#define PS_RSQRT sqrtf
#define PS_FMA PS_FMA_F
#define PS_SERIES_TERMS 4
#define PS_MID_Q PS_MID_Q_F
#include "model/bloch_math_tmpl.h"

#define PS_REAL double
#define PS_SFX(name) name##_d
#define PS_RSQRT sqrt
#define PS_RSINCOS(x, s, c) ((*(s)) = sin(x), (*(c)) = cos(x))
#define PS_FMA PS_FMA_D
#define PS_SERIES_TERMS 9
#include "model/bloch_math_tmpl.h"

/* Relaxation decrements of one step: a = 1 - exp(-dt/T), b = exp(dt/T) - 1
 * (0, 0 without relaxation: T = 0 stands for "none" here). */
PS_HD void ps_relax_decrements(double dt, double T, double *a, double *b)
{
    if (T > 0.0) {
        *a = -expm1(-dt / T);
        *b = expm1(dt / T);
    } else {
        *a = 0.0;
        *b = 0.0;
    }
}

/* ---- loss (double: evaluated once per spin) ---- */

/* Loss types, same values as ps_loss in persolve.h. */
enum { PS_L_FULL = 0, PS_L_XY = 1, PS_L_MLS = 2, PS_L_Z = 3 };

/*
 * Per-spin loss w * l(M, Mt) and its gradient dL/dM into lam[3]
 * (docs/model.md, Losses):
 *   full: |M - Mt|^2              xy: (Mx-Mtx)^2 + (My-Mty)^2
 *   mls:  (sqrt(Mx^2+My^2+1e-12) - sqrt(Mtx^2+Mty^2))^2
 *   z:    (Mz - Mtz)^2
 */
PS_HD double ps_spin_loss(int loss, double w, const double m[3],
                          const double mt[3], double lam[3])
{
    double ex = m[0] - mt[0], ey = m[1] - mt[1], ez = m[2] - mt[2];
    switch (loss) {
    case PS_L_FULL:
        lam[0] = 2.0 * w * ex; lam[1] = 2.0 * w * ey; lam[2] = 2.0 * w * ez;
        return w * (ex * ex + ey * ey + ez * ez);
    case PS_L_XY:
        lam[0] = 2.0 * w * ex; lam[1] = 2.0 * w * ey; lam[2] = 0.0;
        return w * (ex * ex + ey * ey);
    case PS_L_MLS: {
        double rho = sqrt(m[0] * m[0] + m[1] * m[1] + 1e-12);
        double rt = sqrt(mt[0] * mt[0] + mt[1] * mt[1]);
        double e = rho - rt;
        lam[0] = 2.0 * w * e * m[0] / rho;
        lam[1] = 2.0 * w * e * m[1] / rho;
        lam[2] = 0.0;
        return w * e * e;
    }
    default: /* PS_L_Z */
        lam[0] = 0.0; lam[1] = 0.0; lam[2] = 2.0 * w * ez;
        return w * ez * ez;
    }
}

/* ---- peak constraint by smooth reparametrization (double) ---- */

/*
 * With b1_max = bm, the optimizer's variables z = (p, q) per time step map
 * to the pulse b = (u, v) by
 *
 *     b = bm * t(r) z,   r = |z|,   t(r) = tanh(r)/r
 *
 * so |b| = bm tanh(r) < bm for every z, smoothly, and b ~ bm z near 0.
 * Chain rule: db/dz = bm [ t I + (t'(r)/r) z z^T ], with
 *     t'(r)/r = (r sech^2 r - tanh r)/r^3   (series -2/3 + 8 r^2/15 near 0).
 */
PS_HD void ps_reparam_coeffs(double r2, double *t, double *tp_over_r)
{
    if (r2 < 1e-4) {
        /* tanh(r)/r = 1 - r^2/3 + 2 r^4/15 - 17 r^6/315 */
        *t = 1.0 + r2 * (-1.0 / 3.0 + r2 * (2.0 / 15.0 - r2 * 17.0 / 315.0));
        /* (t'/r) = -2/3 + 8 r^2/15 - 34 r^4/105 */
        *tp_over_r = -2.0 / 3.0 + r2 * (8.0 / 15.0 - r2 * 34.0 / 105.0);
    } else {
        double r = sqrt(r2), th = tanh(r);
        double sech2 = 1.0 - th * th;
        *t = th / r;
        *tp_over_r = (r * sech2 - th) / (r2 * r);
    }
}

/* z (one time step) -> b; bm > 0 and finite. */
PS_HD void ps_reparam_forward(double bm, double zp, double zq, double *u,
                              double *v)
{
    double t, tpr;
    ps_reparam_coeffs(zp * zp + zq * zq, &t, &tpr);
    *u = bm * t * zp;
    *v = bm * t * zq;
}

/* dF/db (gu, gv) -> dF/dz (gp, gq) at z. */
PS_HD void ps_reparam_backward(double bm, double zp, double zq, double gu,
                               double gv, double *gp, double *gq)
{
    double t, tpr;
    ps_reparam_coeffs(zp * zp + zq * zq, &t, &tpr);
    double zg = zp * gu + zq * gv;
    *gp = bm * (t * gu + tpr * zp * zg);
    *gq = bm * (t * gv + tpr * zq * zg);
}

/*
 * Inverse for start points: z = atanh(|b|/bm) b/|b|, with |b| clipped to
 * 0.9 bm so that the start lies strictly inside the constraint, where
 * tanh is not yet saturated (at 0.999 bm, db/dz would be 0.002 bm and the
 * first gradients in z nearly zero).
 */
PS_HD void ps_reparam_inverse(double bm, double u, double v, double *zp,
                              double *zq)
{
    double a2 = u * u + v * v;
    double a = isfinite(a2) ? sqrt(a2) : hypot(u, v); /* |b| past sqrt(DBL_MAX): no overflow */
    if (a == 0.0) {
        *zp = 0.0;
        *zq = 0.0;
        return;
    }
    double ratio = a / bm;
    if (ratio > 0.9)
        ratio = 0.9;
    double r = atanh(ratio);
    *zp = r * u / a;
    *zq = r * v / a;
}

#endif /* PS_SRC_BLOCH_MATH_H */
