/*
 * The L-BFGS direction in compact form from the pairs' dot products
 * (vector-free), and the update that takes in a new pair's batched dots.
 * Scalar work only, written once for both backends; the warp form of the
 * direction is opt/lbfgs_warp.h.
 */
#ifndef PS_SRC_OPT_LBFGS_H
#define PS_SRC_OPT_LBFGS_H

#include <math.h>

#include "common/ps_hd.h"

#define PS_MAX_MEMORY 32 /* largest L-BFGS memory m */

/* ------------------------------------------------------------------------ */
/* L-BFGS direction in compact form                                          */
/* ------------------------------------------------------------------------ */

/*
 * Pairs (s_i, y_i) live in m physical slots of the caller's vector storage;
 * this struct keeps only their dot products, so that the direction needs no
 * vector pass beyond forming d (vector-free L-BFGS: Chen, Wang, Zhou,
 * "Large-scale L-BFGS using MapReduce", NIPS 2014).
 *
 * Compact inverse-Hessian form (Byrd, Nocedal, Schnabel, Math. Prog. 63,
 * 1994, eq. 3.1 / Thm 2.2; Nocedal & Wright 2nd ed. sec. 7.2):
 *
 *   H = gamma I + [S  gamma Y] [ R^-T (D + gamma Y^T Y) R^-1   -R^-T ] [ S^T       ]
 *                              [ -R^-1                          0    ] [ gamma Y^T ]
 *
 * with S, Y the pairs oldest first, R the upper triangle of S^T Y
 * (R_ij = s_i.y_j, i <= j), D = diag(s_i.y_i), gamma = s.y/y.y (newest).
 * With a = S^T g, b = Y^T g:  t = R^-1 a,  p = R^-T ((D + gamma Y^T Y) t - gamma b),
 *
 *   d = -H g = -gamma g - S p + gamma Y t
 *
 * so d is a combination of the basis {s_i, y_i, g} with coefficients
 * (-p_i, gamma t_i, -gamma), and g.d follows from the same dots.
 */
typedef struct ps_lbfgs {
    int m;      /* memory (slots) */
    int k;      /* pairs held, 0..m */
    int newest; /* slot of the newest pair (valid if k > 0) */
    int pad_;
    double sy[PS_MAX_MEMORY][PS_MAX_MEMORY]; /* sy[i][j] = s_i.y_j */
    double yy[PS_MAX_MEMORY][PS_MAX_MEMORY]; /* y_i.y_j */
    double sg[PS_MAX_MEMORY];                /* s_i.g (current g) */
    double yg[PS_MAX_MEMORY];                /* y_i.g */
    double gg;                               /* g.g */
    /* direction d = sum cs_i s_i + cy_i y_i + cg g, and g.d */
    double cs[PS_MAX_MEMORY];
    double cy[PS_MAX_MEMORY];
    double cg;
    double gd;
} ps_lbfgs;

/* Slot the next pair goes into. */
PS_HD int ps_lbfgs_next_slot(const ps_lbfgs *lb)
{
    return lb->k == 0 ? 0 : (lb->newest + 1) % lb->m;
}

/* Steepest descent: d = -g. */
PS_HD void ps_lbfgs_steepest(ps_lbfgs *lb)
{
    for (int i = 0; i < lb->m; i++) {
        lb->cs[i] = 0.0;
        lb->cy[i] = 0.0;
    }
    lb->cg = -1.0;
    lb->gd = -lb->gg;
}

/*
 * The direction's arithmetic, one element at a time. Two forms run it with
 * the same operations in the same order, so that they give the same bits:
 * the sequential one (ps_lbfgs_direction: the CPU backend) and the warp one
 * (ps_lbfgs_direction_warp: the GPU kernels, lane l owning pair l). Both
 * builds keep a*b + c as two roundings (nvcc --fmad=false, C without
 * contraction), so none of these may use fma().
 *
 * Pair l (0 = oldest of the k held) lives in slot (first + l) mod m.
 */
PS_HD int ps_lbfgs_first(const ps_lbfgs *lb)
{
    int first = lb->newest - (lb->k - 1);
    return first < 0 ? first + lb->m : first;
}

/* Slot of pair l, 0 <= l < m. */
PS_HD int ps_lbfgs_slot(int first, int l, int m)
{
    int i = first + l;
    return i >= m ? i - m : i;
}

/* gamma = s.y / y.y of the newest pair */
PS_HD double ps_lbfgs_gamma(const ps_lbfgs *lb)
{
    int nw = lb->newest;
    return lb->sy[nw][nw] / lb->yy[nw][nw];
}

/* 1 / R_ll of the pair in slot s */
PS_HD double ps_lbfgs_rdiag(const ps_lbfgs *lb, int s)
{
    return 1.0 / lb->sy[s][s];
}

/* An unknown of a substitution, once every other column is eliminated. */
PS_HD double ps_lbfgs_solve(double acc, double rd)
{
    return acc * rd;
}

/* Elimination of a solved unknown x with matrix entry r. */
PS_HD double ps_lbfgs_elim(double acc, double r, double x)
{
    return acc - r * x;
}

/* One term of a dot product. */
PS_HD double ps_lbfgs_madd(double acc, double a, double b)
{
    return acc + a * b;
}

/* w_l = D_l t_l + gamma ((Y^T Y t)_l - b_l), with yyt = (Y^T Y t)_l. */
PS_HD double ps_lbfgs_w(double dl, double tl, double gamma, double yyt, double ygl)
{
    return dl * tl + gamma * (yyt - ygl);
}

/* g.d: the part of g alone, then the term of pair l. */
PS_HD double ps_lbfgs_gd0(double gamma, double gg)
{
    return -gamma * gg;
}
PS_HD double ps_lbfgs_gd_term(double pl, double sgl, double gamma, double tl, double ygl)
{
    return -pl * sgl + gamma * tl * ygl;
}

/* The coefficients of the pair in slot s. */
PS_HD void ps_lbfgs_store(ps_lbfgs *lb, int s, double gamma, double tl, double pl)
{
    lb->cs[s] = -pl;
    lb->cy[s] = gamma * tl;
}

/* cg and g.d; steepest descent (the pairs forgotten) if d is not a
 * descent direction. */
PS_HD void ps_lbfgs_conclude(ps_lbfgs *lb, double gamma, double gd)
{
    lb->cg = -gamma;
    lb->gd = gd;
    if (!(gd < 0.0) || !isfinite(gd)) {
        lb->k = 0;
        ps_lbfgs_steepest(lb);
    }
}

/*
 * Coefficients of d = -H g from the stored dots (formulas above). Falls
 * back to steepest descent (and forgets the pairs) if the result is not a
 * descent direction.
 *
 * Order of the arithmetic (the warp form repeats it exactly):
 *   t = R^-1 a, column-oriented back substitution: acc_i = a_i; for l =
 *       k-1 down to 0, t_l = acc_l (1/R_ll), then acc_i -= R_il t_l for
 *       every i < l. Each acc_i thus takes its terms j = k-1 down to i+1.
 *   w_l = D_l t_l + gamma (sum_j (Y^T Y)_jl t_j - b_l), j ascending
 *       (ps_lbfgs_push stores y.y symmetric; column l is read, so that
 *       the warp's lanes read along a row of yy).
 *   p = R^-T w, column-oriented forward substitution: acc_i = w_i; for
 *       l = 0 to k-1, p_l = acc_l (1/R_ll), then acc_i -= R_li p_l for
 *       every i > l (terms j = 0 up to i-1, as a row-oriented form
 *       takes them; only the back substitution's order differs from it).
 *   g.d = -gamma g.g + sum_l (-p_l a_l + gamma t_l b_l), l ascending.
 * The column order lets lane i of a warp update its own acc_i once t_l
 * (p_l) is broadcast: k dependent steps instead of k^2.
 */
PS_HD void ps_lbfgs_direction(ps_lbfgs *lb)
{
    int k = lb->k, m = lb->m;
    if (k == 0) {
        ps_lbfgs_steepest(lb);
        return;
    }
    int idx[PS_MAX_MEMORY];
    double acc[PS_MAX_MEMORY], t[PS_MAX_MEMORY], p[PS_MAX_MEMORY], rd[PS_MAX_MEMORY];
    int first = ps_lbfgs_first(lb);
    double gamma = ps_lbfgs_gamma(lb);
    for (int l = 0; l < k; l++) {
        idx[l] = ps_lbfgs_slot(first, l, m);
        rd[l] = ps_lbfgs_rdiag(lb, idx[l]);
        acc[l] = lb->sg[idx[l]];
    }

    /* t = R^-1 a (back substitution, R upper triangular) */
    for (int l = k - 1; l >= 0; l--) {
        t[l] = ps_lbfgs_solve(acc[l], rd[l]);
        for (int i = 0; i < l; i++)
            acc[i] = ps_lbfgs_elim(acc[i], lb->sy[idx[i]][idx[l]], t[l]);
    }
    /* w = (D + gamma Y^T Y) t - gamma b, into acc */
    for (int l = 0; l < k; l++) {
        double yyt = 0.0;
        for (int j = 0; j < k; j++)
            yyt = ps_lbfgs_madd(yyt, lb->yy[idx[j]][idx[l]], t[j]);
        acc[l] = ps_lbfgs_w(lb->sy[idx[l]][idx[l]], t[l], gamma, yyt, lb->yg[idx[l]]);
    }
    /* p = R^-T w (forward substitution, R^T lower triangular) */
    for (int l = 0; l < k; l++) {
        p[l] = ps_lbfgs_solve(acc[l], rd[l]);
        for (int i = l + 1; i < k; i++)
            acc[i] = ps_lbfgs_elim(acc[i], lb->sy[idx[l]][idx[i]], p[l]);
    }
    double gd = ps_lbfgs_gd0(gamma, lb->gg);
    for (int l = 0; l < k; l++) {
        ps_lbfgs_store(lb, idx[l], gamma, t[l], p[l]);
        gd += ps_lbfgs_gd_term(p[l], lb->sg[idx[l]], gamma, t[l], lb->yg[idx[l]]);
    }
    for (int l = k; l < m; l++) {
        int s = ps_lbfgs_slot(first, l, m);
        lb->cs[s] = 0.0;
        lb->cy[s] = 0.0;
    }
    ps_lbfgs_conclude(lb, gamma, gd);
}


/*
 * Layout of the batched reduction after a step, for the pair staged in
 * slot ns = ps_lbfgs_next_slot() (s, y already written there) and the new
 * gradient g, over all m slots i (slots not in use are reduced too and
 * ignored):
 *   red[i]       = s_i . y_ns
 *   red[m + i]   = y_i . y_ns
 *   red[2m + i]  = s_i . g
 *   red[3m + i]  = y_i . g
 *   red[4m]      = g . g
 */
#define PS_RED_LEN(m) (4 * (m) + 1)

/*
 * Take in the reduced dots. The pair is kept if s.y > 0 (it is, under
 * strong Wolfe, up to rounding); otherwise the memory is cleared.
 */
PS_HD int ps_lbfgs_push_keeps(const ps_lbfgs *lb, const double *red)
{
    int m = lb->m, ns = ps_lbfgs_next_slot(lb);
    double sy = red[ns], yy = red[m + ns];
    return sy > 0.0 && yy > 0.0 && isfinite(sy) && isfinite(yy);
}

/* The dots of pair i (i < m) against the new pair and the new gradient. */
PS_HD void ps_lbfgs_push_entry(ps_lbfgs *lb, const double *red, int ns, int keep, int i)
{
    int m = lb->m;
    if (keep) {
        lb->sy[i][ns] = red[i];
        lb->yy[i][ns] = red[m + i];
        lb->yy[ns][i] = red[m + i];
    }
    lb->sg[i] = red[2 * m + i];
    lb->yg[i] = red[3 * m + i];
}

/* After the entries: the new pair counted (or the memory cleared), g.g. */
PS_HD void ps_lbfgs_push_finish(ps_lbfgs *lb, const double *red, int ns, int keep)
{
    if (keep) {
        lb->newest = ns;
        if (lb->k < lb->m)
            lb->k++;
    } else {
        lb->k = 0;
    }
    lb->gg = red[4 * lb->m];
}

PS_HD void ps_lbfgs_push(ps_lbfgs *lb, const double *red)
{
    int ns = ps_lbfgs_next_slot(lb), keep = ps_lbfgs_push_keeps(lb, red);
    for (int i = 0; i < lb->m; i++)
        ps_lbfgs_push_entry(lb, red, ns, keep, i);
    ps_lbfgs_push_finish(lb, red, ns, keep);
}

#endif /* PS_SRC_OPT_LBFGS_H */
