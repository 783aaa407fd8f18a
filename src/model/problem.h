/*
 * The problem as the backends see it: the validated, copied arrays of a
 * ps_problem_desc (docs/model.md).
 */
#ifndef PS_SRC_PROBLEM_H
#define PS_SRC_PROBLEM_H

#include "model/problem_fields.h"
#include "persolve.h"

/* The largest sizes a problem may have (ps_problem_validate). */
#define PS_MAX_NS ((size_t)1 << 31)
#define PS_MAX_NT ((size_t)1 << 26)

/* The fields of ps_problem_desc (model/problem_fields.h), owned: every
 * optional array absent from the description is NULL, b1 never is. */
struct ps_problem {
    size_t ns, nt, nc; /* nc >= 1 */
    size_t nq;         /* VOPs (0: no SAR limit) */
    unsigned zero_axes; /* PS_AXIS_* bits of the axes not designed whose G is 0 at every step
                           (ps_design_axis_zero); derived at creation */
    int real_channel;  /* 1: one channel of real sensitivity (a B1 scale, no b1map, or a
                          one-channel b1map without imaginary parts); derived at creation */
#define PS_MEMBER_ARRAY(name, ...) double *name;
    PS_PROBLEM_ARRAYS(PS_MEMBER_ARRAY)
#undef PS_MEMBER_ARRAY
#define PS_MEMBER_REAL(name, ...) double name;
    PS_PROBLEM_REALS(PS_MEMBER_REAL)
#undef PS_MEMBER_REAL
    ps_loss loss;
    double *b1_max_channel; /* [nc] per-channel peak limits, or NULL (then b1_max for all) */
    double sar_max, tr;     /* the SAR limit, W/kg, and its averaging time, s (with nq > 0) */
    unsigned design_g;      /* designed gradient axes (PS_AXIS_* bits), 0: none */
    double smax, gmax;      /* their slew (G/cm/s) and amplitude (G/cm, 0: none) limits */
    int g_end;              /* 1: the designed axes end at zero */
    double slew_scale[3];   /* per axis a: kappa_a, the slew variable t_k = kappa_a (x_k - x_{k-1}) of the
                               optimizer's (model/design.h); derived at creation */
};

/* Number of designed gradient axes. */
static inline size_t ps_problem_ng(const ps_problem *p)
{
    return (size_t)((p->design_g & 1u) + (p->design_g >> 1 & 1u) + (p->design_g >> 2 & 1u));
}

/* A view of spins [j0, j0 + count) of p (j0 + count <= p->ns): the same
 * problem with ns = count and every per-spin array offset to spin j0;
 * nothing is copied, so it is valid while p is and is never freed. */
void ps_problem_spin_view(const ps_problem *p, size_t j0, size_t count, ps_problem *out);

/* The loss's scale, sum_j w_j (ns without weights; 1 when every weight is
 * 0): a unit of the penalty weight is worth a spin's loss. */
double ps_problem_loss_scale(const ps_problem *p);

/* 1 if the problem has a peak limit (b1_max or one per channel). */
static inline int ps_problem_has_b1max(const ps_problem *p)
{
    return isfinite(p->b1_max) || p->b1_max_channel != NULL;
}

/* The peak limit of channel c (PS_B1MAX_NONE without one). */
static inline double ps_problem_b1max_of(const ps_problem *p, size_t c)
{
    return p->b1_max_channel ? p->b1_max_channel[c] : p->b1_max;
}

#endif /* PS_SRC_PROBLEM_H */
