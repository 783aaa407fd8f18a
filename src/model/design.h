/*
 * The design variables: what the optimizer's unknowns x are and how the
 * Bloch model sees them. Written once, compiled into the CPU backend (C11)
 * and the CUDA kernels (__host__ __device__); nothing else builds the
 * layout of x, the rotation vector theta, the chain rule back to x, the
 * power penalty or the peak reparametrization (docs/model.md).
 *
 * Layout. x has nx = 2 Nc Nt reals, channel-major, each channel's u half
 * first:
 *     x[PS_X_U(nt, c, k)] = u_ck = x[2 c Nt + k],
 *     x[PS_X_V(nt, c, k)] = v_ck = x[(2 c + 1) Nt + k]     (k = 0..Nt-1)
 * (channel c's RF pulse b_c = u_c + i v_c in G, or with a finite b1_max the
 * variables z = (p, q) of the reparametrization below, per channel and
 * step). One channel: u_1..u_Nt, v_1..v_Nt.
 *
 * Pulse. Without b1_max, (u, v) = (p, q). With a peak limit bm_c of
 * channel c (b1_max for all, or b1_max_channel[c]):
 *     b = bm_c tanh(|z|) z/|z|        (model/bloch_math.h, ps_reparam_*)
 * so that |b_ck| < bm_c for every x.
 *
 * Rotation vector of step k for spin j (rad), from the per-spin constants
 * gS_jc = dt gamma S_jc (the complex sensitivity of channel c; one channel
 * without a B1 map: S_j1 = s_j, the real B1 scale), wz = dt 2 pi df_j, the
 * position r_j and the per-step gradient rotation gdt_k = dt gamma G_k
 * (rad/cm): with the field b1_jk = sum_c gS_jc (u_ck + i v_ck),
 *     theta = (Re b1_jk, Im b1_jk, gdt_k . r_j + wz)
 * (one real channel: (gs u_k, gs v_k, ...), gs = dt gamma s_j).
 *
 * Chain rule. With gth = dL/dtheta of step k for spin j (the adjoint,
 * model/bloch_math.h), the spin's share of the loss gradient is, per
 * channel, with gS_jc = gr + i gi,
 *     dL/du_ck += gr gth_x + gi gth_y,   dL/dv_ck += -gi gth_x + gr gth_y
 * (one real channel: gs gth_x, gs gth_y);
 * summed over the spins (each backend in its own fixed order and in its
 * accumulation's precision: double on the CPU, the spin loop's on the
 * GPU, whose per-step sums over a tile's spins are in that precision), then per
 * step the power penalty and the reparametrization:
 *     dF/db_k = dL/db_k + 2 lambda b_k,    dF/dz_k = (db/dz)^T dF/db_k.
 *
 * Objective: F = sum_j loss_j + lambda sum_c sum_k (u_ck^2 + v_ck^2).
 */
#ifndef PS_SRC_MODEL_DESIGN_H
#define PS_SRC_MODEL_DESIGN_H

#include <math.h>
#include <stddef.h>

#include "common/ps_hd.h"
#include "model/bloch_math.h"
#include "persolve.h"

/* ---- layout of x ---- */

/* Number of unknowns for nc channels of nt time steps. */
#define PS_DESIGN_NX(nc, nt) (2 * (nc) * (nt))
/* Index of the i-th designed gradient axis's step k in x, after the RF
 * (SPEC 1.2: the designed axes in the order x, y, z): its slew variable
 * t_ik in the optimizer's variables, its waveform g_ik (G/cm) at the
 * physical point. */
#define PS_X_G(nc, nt, i, k) (2 * (nc) * (nt) + (i) * (nt) + (k))
/* Index of u_ck and v_ck in x (and in every vector of the optimizer). */
#define PS_X_U(nt, c, k) (2 * (c) * (nt) + (k))
#define PS_X_V(nt, c, k) ((2 * (c) + 1) * (nt) + (k))

/* What maps x to the pulse and the pulse to F's penalty. */
typedef struct ps_design {
    int has_b1max;          /* 1: x holds the reparametrized z, |b_c| < the channel's limit */
    double b1max;           /* G, the limit of every channel (has_b1max, b1max_c NULL) */
    double lambda;          /* power penalty weight, >= 0 */
    const double *b1max_c;  /* [nc] G, one limit per channel, or NULL (b1max for all);
                               a device pointer in the GPU's copy */
    const double *rf_mask;  /* [nt] 1: the RF is free at step k, 0: held at zero (its
                               gradient is zero); NULL: free everywhere; a device pointer in
                               the GPU's copy */
    /* designed gradient axes (SPEC 1.2; ng 0: none) */
    int ng;                 /* how many */
    int axis[3];            /* the axis (0 x, 1 y, 2 z) of the i-th, in the order x, y, z */
    double kappa[3];        /* the i-th's slew scale: t = kappa x (below) */
    double smax, gmax;      /* slew limit, G/cm/s; amplitude limit, G/cm (0: none) */
    int g_end;              /* 1: the axes return to zero at the last step */
    double dt, dtg;         /* time step, s; dt gamma, rad/G/s */
    int slew;               /* 1: x's designed-axis part holds the optimizer's slew
                               variables, 0: the waveforms g themselves (physical) */
} ps_design;

/* The peak limit of channel c (with has_b1max). */
PS_HD double ps_design_b1max(const ps_design *d, int c)
{
    return d->b1max_c ? d->b1max_c[c] : d->b1max;
}

/* ---- pulse of step k from its variables ---- */

/* (p, q) = (x[PS_X_U], x[PS_X_V]) of one step of channel c -> the pulse
 * (u, v), G. */
PS_HD void ps_design_pulse(const ps_design *d, int c, double p, double q, double *u, double *v)
{
    if (d->has_b1max) {
        ps_reparam_forward(ps_design_b1max(d, c), p, q, u, v);
    } else {
        *u = p;
        *v = q;
    }
}

/* The same for a problem of one channel, whose limit is b1max (its
 * b1max_c is NULL: ps_problem_design), without the per-channel lookup: the
 * single-channel GPU kernel's, in its inner loops. */
PS_HD void ps_design_pulse_one(const ps_design *d, double p, double q, double *u, double *v)
{
    if (d->has_b1max) {
        ps_reparam_forward(d->b1max, p, q, u, v);
    } else {
        *u = p;
        *v = q;
    }
}

/* The inverse for start points: (p, q) from a pulse (u, v) of channel c,
 * projected strictly inside |b| < b1max[c] (model/bloch_math.h,
 * ps_reparam_inverse). */
PS_HD void ps_design_from_pulse(const ps_design *d, int c, double u, double v, double *p, double *q)
{
    if (d->has_b1max) {
        ps_reparam_inverse(ps_design_b1max(d, c), u, v, p, q);
    } else {
        *p = u;
        *q = v;
    }
}

/* ---- rotation vector and the spin's chain rule, per precision ---- */

/*
 * ps_design_theta: theta = (gs u, gs v, gdt.r + wz) of one step for one
 * spin and one channel of real sensitivity gs. The z component's
 * multiply-adds are fused on the GPU (PS_FMA_*), in the order written:
 * wz + gdt_x r_x, + gdt_y r_y, + gdt_z r_z.
 * ps_design_theta_nograd: the same where gdt = 0 at every step (no
 * gradient, none designed: an inversion or a non-selective pulse), theta_z
 * = wz without the gradient's row: the values of ps_design_theta at gdt =
 * 0 and a finite r (a zero's sign aside), so a spin loop may take either.
 * ps_design_theta_channels: the same for nc channels of complex
 * sensitivities gS[c] = (gr, gi) and pulse values u[c s], v[c s] (stride
 * s): the first channel's real part as above, then its imaginary part and
 * the other channels added, x += gr u - gi v, y += gr v + gi u, so that
 * one channel with gi = 0 gives the bits of ps_design_theta. Its two
 * parts: ps_design_theta_first (the first channel) and ps_design_theta_add
 * (one more channel added), for a loop that takes the channels outside the
 * spins (cpu/objective_tmpl.h).
 *
 * ps_design_spin_grad: the spin's share (gu, gv) = gs (gth_x, gth_y) of
 * dL/du_k, dL/dv_k for one real channel; ps_design_spin_grad_channel: that
 * of channel (gr, gi): (gr gth_x + gi gth_y, gr gth_y - gi gth_x), the
 * bits of ps_design_spin_grad when gi = 0.
 */
/* The first channel's imaginary part, and one more channel, added to th
 * (macros, so that ps_design_theta_channels and its two parts expand to the
 * same operations). */
#define PS_DESIGN_THETA_IMAG(FMA, gi, u, v, th)                                         \
    do {                                                                                \
        (th)[0] = FMA(-(gi), (v), (th)[0]);                                             \
        (th)[1] = FMA((gi), (u), (th)[1]);                                              \
    } while (0)
#define PS_DESIGN_THETA_ADD(FMA, gr, gi, u, v, th)                                      \
    do {                                                                                \
        (th)[0] = FMA(-(gi), (v), FMA((gr), (u), (th)[0]));                             \
        (th)[1] = FMA((gi), (u), FMA((gr), (v), (th)[1]));                              \
    } while (0)
#define PS_DESIGN_SPIN_MATH(R, SFX, FMA)                                                \
    PS_HD void ps_design_theta_##SFX(R gs, R u, R v, const R gdt[3], const R r[3], R wz, \
                                     R th[3])                                           \
    {                                                                                   \
        th[0] = gs * u;                                                                 \
        th[1] = gs * v;                                                                 \
        th[2] = FMA(gdt[2], r[2], FMA(gdt[1], r[1], FMA(gdt[0], r[0], wz)));            \
    }                                                                                   \
    PS_HD void ps_design_theta_nograd_##SFX(R gs, R u, R v, R wz, R th[3])             \
    {                                                                                   \
        th[0] = gs * u;                                                                 \
        th[1] = gs * v;                                                                 \
        th[2] = wz;                                                                     \
    }                                                                                   \
    PS_HD void ps_design_theta_first_##SFX(R gr, R gi, R u, R v, const R gdt[3],         \
                                           const R r[3], R wz, R th[3])                 \
    {                                                                                   \
        ps_design_theta_##SFX(gr, u, v, gdt, r, wz, th);                                \
        PS_DESIGN_THETA_IMAG(FMA, gi, u, v, th);                                        \
    }                                                                                   \
    PS_HD void ps_design_theta_add_##SFX(R gr, R gi, R u, R v, R th[3])                  \
    {                                                                                   \
        PS_DESIGN_THETA_ADD(FMA, gr, gi, u, v, th);                                     \
    }                                                                                   \
    PS_HD void ps_design_theta_channels_##SFX(int nc, const R (*gS)[2], const R *u,      \
                                              const R *v, size_t s, const R gdt[3],     \
                                              const R r[3], R wz, R th[3])              \
    {                                                                                   \
        ps_design_theta_##SFX(gS[0][0], u[0], v[0], gdt, r, wz, th);                    \
        PS_DESIGN_THETA_IMAG(FMA, gS[0][1], u[0], v[0], th);                            \
        for (int c = 1; c < nc; c++) {                                                  \
            const R uc = u[c * s], vc = v[c * s];                                       \
            PS_DESIGN_THETA_ADD(FMA, gS[c][0], gS[c][1], uc, vc, th);                   \
        }                                                                               \
    }                                                                                   \
    PS_HD void ps_design_spin_grad_##SFX(R gs, const R gth[3], R *gu, R *gv)            \
    {                                                                                   \
        *gu = gth[0] * gs;                                                              \
        *gv = gth[1] * gs;                                                              \
    }                                                                                   \
    PS_HD void ps_design_spin_grad_channel_##SFX(R gr, R gi, const R gth[3], R *gu,      \
                                                 R *gv)                                 \
    {                                                                                   \
        *gu = FMA(gi, gth[1], gth[0] * gr);                                             \
        *gv = FMA(-gi, gth[0], gth[1] * gr);                                            \
    }
PS_DESIGN_SPIN_MATH(float, f, PS_FMA_F)
PS_DESIGN_SPIN_MATH(double, d, PS_FMA_D)
#undef PS_DESIGN_SPIN_MATH

/* ---- per step, after the sum over spins ---- */

/* The power penalty's term of one step: u^2 + v^2 (F adds lambda times
 * the sum over steps; the GPU sums these per step in its reduction's
 * order, the CPU the squares in the order of x: ps_design_power_sum). */
PS_HD double ps_design_power(double u, double v)
{
    return u * u + v * v;
}

/*
 * dF/dx of step k of channel c from the loss gradient (gu, gv) = dL/db_ck
 * summed over the spins (and the constraints' penalty gradient, if any:
 * model/constraints.h), at the pulse (u, v) = b_ck of the variables (p, q):
 * the power penalty's 2 lambda b_ck added, then through the
 * reparametrization. A step the RF mask holds at zero has no gradient:
 * its variables are constants (zero from the start, and the optimizer
 * never moves them).
 */
PS_HD void ps_design_step_grad(const ps_design *d, int c, int k, double p, double q, double u, double v,
                               double gu, double gv, double *gp, double *gq)
{
    if (d->rf_mask && d->rf_mask[k] == 0.0) {
        *gp = 0.0;
        *gq = 0.0;
        return;
    }
    gu += 2.0 * d->lambda * u;
    gv += 2.0 * d->lambda * v;
    if (d->has_b1max) {
        ps_reparam_backward(ps_design_b1max(d, c), p, q, gu, gv, gp, gq);
    } else {
        *gp = gu;
        *gq = gv;
    }
}

/* ---- a designed gradient axis (SPEC 1.2) ----
 *
 * The variables of a designed axis are slew variables t_k (k = 0..Nt-1):
 *     s_k = smax (2/pi) atan(t_k)          |s_k| < smax exactly (G/cm/s)
 *     g_k = dt sum_{i<=k} s_i              (g_{-1} = 0; G/cm)
 * and the gradient's chain rule back to t, from dF/dg_k:
 *     dF/ds_i = dt sum_{k>=i} dF/dg_k      (the reverse cumulative sum)
 *     dF/dt_i = dF/ds_i smax (2/pi) / (1 + t_i^2)
 * A start waveform g gives t from its differences s_k = (g_k - g'_{k-1})/dt
 * to the waveform g' of the variables so far (g'_{-1} = 0), clipped to
 * 0.9 smax (strictly inside the limit, where atan is not yet flat):
 * t_k = tan((pi/2) s_k / smax). Where g's slew is within 0.9 smax, g' = g;
 * elsewhere g' follows g as fast as 0.9 smax allows. With gmax, g is
 * clipped to |g| <= gmax first: the start meets both limits (not g_end).
 *
 * The optimizer's variables. The slew variables are a scaled difference
 * of the optimizer's x (a linear change of variables, x_{-1} = 0):
 *     t_k = kappa_a (x_k - x_{k-1}),   kappa_a = 1 / (rmax_a dt smax)
 * (rmax_a = max_j |r_ja|, 1 cm if 0). Where the slews are well inside
 * the limit, g_k ~ dt smax (2/pi) kappa_a x_k: x is the waveform itself,
 * scaled so that a unit of x_k turns any spin at step k by at most
 * (2/pi) gamma dt rad, as 1 G of RF does. Both matter to L-BFGS, whose
 * first Hessian guess is one scalar: in t itself the slew variables'
 * gradient is 10 to 1000 times the RF's, and a penalty on g (gmax, g_end)
 * has the Hessian C^T C of the cumulative sum C, conditioned like Nt^2;
 * in x it is nearly diagonal. The chain rule back to x:
 *     dF/dx_k = kappa_a (dF/dt_k - dF/dt_{k+1})      (dF/dt_Nt = 0)
 */

/* s of one slew variable t, and ds/dt. */
PS_HD double ps_slew_of_t(double smax, double t)
{
    return smax * (2.0 / 3.14159265358979323846) * atan(t);
}

PS_HD double ps_slew_dt(double smax, double t)
{
    return smax * (2.0 / 3.14159265358979323846) / (1.0 + t * t);
}

/* The slew variable of a slew s, |s| clipped to 0.9 smax first. */
PS_HD double ps_t_of_slew(double smax, double s)
{
    const double lim = 0.9 * smax;
    s = s > lim ? lim : s < -lim ? -lim : s;
    return tan((3.14159265358979323846 / 2.0) * s / smax);
}

/* t_k of step k from x_k and x_{k-1} (0 for k = 0). */
PS_HD double ps_slew_t(double kappa, double x, double xprev)
{
    return kappa * (x - xprev);
}

/* One axis's waveform g[nt] from its variables x[nt] (in step order). */
PS_HD void ps_slew_waveform(double smax, double kappa, double dt, size_t nt, const double *x, double *g)
{
    double acc = 0.0, xprev = 0.0;
    for (size_t k = 0; k < nt; k++) {
        const double xk = x[k];
        acc += dt * ps_slew_of_t(smax, ps_slew_t(kappa, xk, xprev));
        g[k] = acc;
        xprev = xk;
    }
}

/* The variables x[nt] of a start waveform g[nt] (above; x may equal g),
 * the waveform clipped to |g| <= gmax first when gmax > 0 (so that the
 * start meets the amplitude limit too). */
PS_HD void ps_slew_variables(double smax, double kappa, double dt, double gmax, size_t nt, const double *g,
                             double *x)
{
    double prev = 0.0, xprev = 0.0; /* g' of the steps so far, as ps_slew_waveform sums it */
    for (size_t k = 0; k < nt; k++) {
        double gk = g[k];
        if (gmax > 0.0)
            gk = gk > gmax ? gmax : gk < -gmax ? -gmax : gk;
        x[k] = xprev + ps_t_of_slew(smax, (gk - prev) / dt) / kappa;
        prev += dt * ps_slew_of_t(smax, ps_slew_t(kappa, x[k], xprev));
        xprev = x[k];
    }
}

/* dF/dt_k from R_k = sum_{i>=k} dF/dg_i (the reverse cumulative sum) at
 * t_k: the atan chain rule, dt R_k ds/dt. */
PS_HD double ps_slew_grad(double smax, double dt, double t, double R)
{
    return dt * R * ps_slew_dt(smax, t);
}

/* dF/dx[nt] from dF/dg[nt] at x (gx may equal gg): the reverse cumulative
 * sum from the last step, the atan chain rule, then the difference's. */
PS_HD void ps_slew_backward(double smax, double kappa, double dt, size_t nt, const double *x, const double *gg,
                            double *gx)
{
    double acc = 0.0, gt_next = 0.0; /* dF/dt_{k+1} */
    for (size_t k = nt; k-- > 0;) {
        acc += gg[k];
        const double gt = ps_slew_grad(smax, dt, ps_slew_t(kappa, x[k], k ? x[k - 1] : 0.0), acc);
        gx[k] = kappa * (gt - gt_next);
        gt_next = gt;
    }
}

/* ---- a problem's design (host, model/design.c) ---- */

/* The design of p: physical = 1 evaluates at the pulse itself (x = b,
 * whatever b1_max is), 0 in the optimizer's variables. */
ps_design ps_problem_design(const ps_problem *p, int physical);

/* The pulse b[nx] of the variables x[nx] (b may equal x), and the inverse
 * (x strictly inside the b1_max constraint; x may equal b); both hold the
 * steps the RF mask holds at zero at zero. */
void ps_design_pulse_of_x(const ps_problem *p, const double *x, double *b);
/* Sets the pulse variables of the steps the RF mask holds to zero in x[nx]. */
void ps_design_hold(const ps_problem *p, double *x);
/* Between x and rows [nc][nt][2] of (u_ck, v_ck), the layout of files and
 * of ps_problem_desc.b1. */
void ps_design_x_of_rows(size_t nc, size_t nt, const double *rows, double *x);
void ps_design_rows_of_x(size_t nc, size_t nt, const double *x, double *rows);
/* The slew scale kappa_a of axis a for a problem described by d (above). */
double ps_slew_scale(const ps_problem_desc *d, size_t a);
/* The axis (0 x, 1 y, 2 z) of the i-th designed gradient axis. */
size_t ps_design_axis(const ps_problem *p, size_t i);
/* The power sum_i b_i^2 of a pulse b[nx] in the layout of x, in index order. */
double ps_design_power_sum(const double *b, size_t nx);
void ps_design_x_of_pulse(const ps_problem *p, const double *b, double *x);

/* What one spin brings to the model, in double: the backends round it to
 * their precision. */
typedef struct ps_spin_consts {
    double r[3];   /* position, cm */
    double gS[PS_MAX_CHANNELS][2]; /* dt gamma S_jc per channel (Re, Im), rad/G; one
                                      channel without a b1map: (dt gamma s_j, 0) */
    double wz;     /* dt 2 pi df_j, rad */
    double a1, a2; /* relaxation decrements 1 - exp(-dt/T1,2) (0: none) */
    double b1, b2; /* their inverse increments exp(dt/T1,2) - 1 */
    double w;      /* loss weight */
    double m0[3];  /* start magnetization */
} ps_spin_consts;

void ps_design_spin(const ps_problem *p, size_t j, ps_spin_consts *s);

/* gdt_k = dt gamma G_k of step k, rad/cm. */
void ps_design_gdt(const ps_problem *p, size_t k, double gdt[3]);

/* 1 if axis c (0 x, 1 y, 2 z) is not designed and G_c = 0 at every step
 * (its gdt values are 0 in every precision: float32's range is
 * validated); else 0. From the problem's creation (ps_problem.zero_axes). */
int ps_design_axis_zero(const ps_problem *p, int c);
/* 1 if the problem has a gradient: a designed axis, or G_k != 0 at some
 * step; 0 if G = 0 at every step (an inversion, a non-selective pulse). */
int ps_design_has_gradient(const ps_problem *p);

#endif /* PS_SRC_MODEL_DESIGN_H */
