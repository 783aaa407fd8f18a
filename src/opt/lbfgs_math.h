/*
 * The optimizer's scalar logic: L-BFGS direction in compact form, the
 * strong-Wolfe line search and the stopping tests, as one state machine
 * over phases. Written once, run by the CPU backend and (redundantly, by
 * every block) by the GPU megakernel, the direction's coefficients there
 * by one warp (ps_solver_direction_warp). Everything here is O(m^2) scalar
 * work; the O(n) vector work (evaluations, the batched dot products, the
 * vector updates) is the caller's, at the points the phases name.
 *
 * Phases of one solve:
 *   START      caller evaluates f, g at x0 and g.g      -> ps_solver_start
 *   DIRECTION  ps_solver_direction (stops, coefficients) -> caller forms d
 *   TRIAL      caller evaluates at x + alpha d, g_t.d    -> ps_solver_trial
 *   UPDATE     caller stores s = x_t - x, y = g_t - g, moves x, g and
 *              reduces the batched dots                  -> ps_solver_update
 *   DONE       status holds the outcome
 */
#ifndef PS_SRC_LBFGS_MATH_H
#define PS_SRC_LBFGS_MATH_H

#include <math.h>
#include <stdint.h>

#include "common/ps_hd.h"

#define PS_MAX_MEMORY 32 /* largest L-BFGS memory m */
#define PS_MAX_PAST 64   /* largest window of the ftol test */

/* Status values as in persolve.h (duplicated so kernels need no C API). */
#define PS_ST_RUNNING 100
#define PS_ST_CONVERGED 0
#define PS_ST_CONVERGED_FTOL 1
#define PS_ST_MAX_ITERATIONS 2
#define PS_ST_MAX_EVALUATIONS 3
#define PS_ST_TIME_LIMIT 4
#define PS_ST_CANCELLED 5
#define PS_ST_ERR_LINE_SEARCH (-10)
#define PS_ST_ERR_OBJECTIVE (-11)

enum ps_phase {
    PS_PHASE_START = 0,
    PS_PHASE_DIRECTION = 1,
    PS_PHASE_TRIAL = 2,
    PS_PHASE_UPDATE = 3,
    PS_PHASE_DONE = 4,
};

/*
 * One coordinate of the trial point x + alpha d, rounded once (a fused
 * multiply-add). Every backend and every phase that needs the trial point
 * (the evaluation, the gradient's chain rule, the accepted step) computes it
 * here: left to the compiler, a*b + c is contracted or not depending on the
 * surrounding code, and two GPU kernels would evaluate points an ulp apart.
 */
PS_HD double ps_trial_coord(double x, double alpha, double d)
{
#ifdef __CUDA_ARCH__
    return __fma_rn(alpha, d, x);
#else
    return fma(alpha, d, x);
#endif
}

/* ------------------------------------------------------------------------ */
/* Strong-Wolfe line search (Nocedal & Wright, 2nd ed., Alg. 3.5 and 3.6)   */
/* ------------------------------------------------------------------------ */

enum { PS_LS_BRACKET = 0, PS_LS_ZOOM = 1 };
enum { PS_LS_TRY = 0, PS_LS_ACCEPT = 1, PS_LS_FAIL = 2 };

typedef struct ps_linesearch {
    double f0, dg0;                 /* phi(0), phi'(0) < 0 */
    double a_prev, f_prev, dg_prev; /* previous trial (bracketing) */
    double a_lo, f_lo, dg_lo;       /* zoom: best end satisfying decrease */
    double a_hi, f_hi, dg_hi;       /* zoom: other end */
    double alpha;                   /* the trial being evaluated */
    double c1, c2;
    double feps;                    /* absolute noise allowance on f */
    double f_best;                  /* smallest finite phi over the trials */
    int phase, trials, max_trials, pad_;
} ps_linesearch;

/*
 * Minimizer of the cubic interpolating phi and phi' at a and b
 * (Nocedal & Wright eq. 3.59):
 *   d1 = phi'(a) + phi'(b) - 3 (phi(a) - phi(b))/(a - b)
 *   d2 = sign(b - a) sqrt(d1^2 - phi'(a) phi'(b))
 *   x  = b - (b - a) (phi'(b) + d2 - d1)/(phi'(b) - phi'(a) + 2 d2)
 * Returns 0 when it does not exist or is not finite.
 */
PS_HD int ps_cubic_min(double a, double fa, double ga, double b, double fb,
                       double gb, double *x)
{
    double d1 = ga + gb - 3.0 * (fa - fb) / (a - b);
    double disc = d1 * d1 - ga * gb;
    if (!(disc >= 0.0))
        return 0;
    double d2 = sqrt(disc);
    if (b < a)
        d2 = -d2;
    double den = gb - ga + 2.0 * d2;
    if (den == 0.0)
        return 0;
    double r = b - (b - a) * (gb + d2 - d1) / den;
    if (!isfinite(r))
        return 0;
    *x = r;
    return 1;
}

/* Next zoom trial: safeguarded cubic, inside the middle 80% of [lo, hi]. */
PS_HD double ps_ls_zoom_trial(const ps_linesearch *ls)
{
    double lo = ls->a_lo, hi = ls->a_hi;
    double a = fmin(lo, hi), b = fmax(lo, hi), w = b - a;
    double x;
    if (isfinite(ls->f_hi) && isfinite(ls->dg_hi) &&
        ps_cubic_min(lo, ls->f_lo, ls->dg_lo, hi, ls->f_hi, ls->dg_hi, &x) &&
        x >= a + 0.1 * w && x <= b - 0.1 * w)
        return x;
    return 0.5 * (lo + hi); /* bisection */
}

/*
 * feps >= 0 widens the sufficient-decrease test to
 *     phi(alpha) <= phi(0) + c1 alpha phi'(0) + feps
 * (the approximate Wolfe conditions of Hager & Zhang, SIAM J. Optim. 16,
 * 2005, sec. 4), and a trial counts as worse than another only when its f
 * is higher by more than feps: once f's changes along d are below the
 * rounding noise of the float32 objective, the accurate derivative still
 * decides.
 */
PS_HD void ps_ls_begin(ps_linesearch *ls, double f0, double dg0,
                       double alpha0, double c1, double c2, double feps,
                       int max_trials)
{
    ls->f0 = f0;
    ls->dg0 = dg0;
    ls->a_prev = 0.0;
    ls->f_prev = f0;
    ls->f_best = INFINITY;
    ls->dg_prev = dg0;
    ls->a_lo = ls->f_lo = ls->dg_lo = 0.0;
    ls->a_hi = ls->f_hi = ls->dg_hi = 0.0;
    ls->alpha = alpha0;
    ls->c1 = c1;
    ls->c2 = c2;
    ls->feps = feps;
    ls->phase = PS_LS_BRACKET;
    ls->trials = 0;
    ls->max_trials = max_trials;
    ls->pad_ = 0;
}

PS_HD int ps_ls_enter_zoom(ps_linesearch *ls, double alo, double flo,
                           double glo, double ahi, double fhi, double ghi)
{
    ls->phase = PS_LS_ZOOM;
    ls->a_lo = alo;
    ls->f_lo = flo;
    ls->dg_lo = glo;
    ls->a_hi = ahi;
    ls->f_hi = fhi;
    ls->dg_hi = ghi;
    ls->alpha = ps_ls_zoom_trial(ls);
    return PS_LS_TRY;
}

/*
 * Consume phi(alpha) = f and phi'(alpha) = dg for the current trial and
 * decide: ACCEPT (strong Wolfe holds at ls->alpha), TRY (ls->alpha is the
 * next trial) or FAIL (trials exhausted or the interval collapsed). A
 * non-finite f or dg counts as "too far": the step shrinks.
 */
PS_HD int ps_ls_next(ps_linesearch *ls, double f, double dg)
{
    double a = ls->alpha;
    int finite = isfinite(f) && isfinite(dg);
    if (!finite) {
        f = INFINITY;
        dg = INFINITY;
    }
    ls->trials++;
    if (finite && f < ls->f_best)
        ls->f_best = f;
    int armijo = finite && f <= ls->f0 + ls->c1 * a * ls->dg0 + ls->feps;
    int curvature = finite && fabs(dg) <= -ls->c2 * ls->dg0;

    int action;
    if (ls->phase == PS_LS_BRACKET) {
        /* Alg. 3.5 */
        if (!armijo || (ls->trials > 1 && f >= ls->f_prev + ls->feps)) {
            action = ps_ls_enter_zoom(ls, ls->a_prev, ls->f_prev,
                                      ls->dg_prev, a, f, dg);
        } else if (curvature) {
            return PS_LS_ACCEPT;
        } else if (dg >= 0.0) {
            action = ps_ls_enter_zoom(ls, a, f, dg, ls->a_prev, ls->f_prev,
                                      ls->dg_prev);
        } else {
            /* extrapolate: cubic step clipped to [1.1 a, 4 a] */
            double x;
            double lo = 1.1 * a, hi = 4.0 * a;
            if (!ps_cubic_min(ls->a_prev, ls->f_prev, ls->dg_prev, a, f, dg,
                              &x) ||
                x < lo || x > hi)
                x = hi;
            ls->a_prev = a;
            ls->f_prev = f;
            ls->dg_prev = dg;
            ls->alpha = x;
            action = PS_LS_TRY;
        }
    } else {
        /* Alg. 3.6 */
        if (!armijo || f >= ls->f_lo + ls->feps) {
            ls->a_hi = a;
            ls->f_hi = f;
            ls->dg_hi = dg;
        } else {
            if (curvature)
                return PS_LS_ACCEPT;
            if (dg * (ls->a_hi - ls->a_lo) >= 0.0) {
                ls->a_hi = ls->a_lo;
                ls->f_hi = ls->f_lo;
                ls->dg_hi = ls->dg_lo;
            }
            ls->a_lo = a;
            ls->f_lo = f;
            ls->dg_lo = dg;
        }
        double w = fabs(ls->a_hi - ls->a_lo);
        if (w <= 1e-14 * fmax(fabs(ls->a_hi), fabs(ls->a_lo)))
            return PS_LS_FAIL;
        ls->alpha = ps_ls_zoom_trial(ls);
        action = PS_LS_TRY;
    }
    if (ls->trials >= ls->max_trials)
        return PS_LS_FAIL;
    return action;
}

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
 * The warp form's primitives: CUDA's; or, with PS_WARP_EMULATION (tests
 * only: tests/warp_emu.c), the includer's PS_LANE, PS_SHFL and
 * PS_SYNCWARP, host threads as the lanes.
 */
#if defined(__CUDACC__)
#define PS_HAVE_WARP 1
#define PS_WARP_FN __device__ __forceinline__
#define PS_LANE() ((int)(threadIdx.x & 31u))
#define PS_SHFL(v, src) __shfl_sync(0xffffffffu, (v), (src)) /* lane src's v, to all 32 */
#define PS_SYNCWARP() __syncwarp()
#elif defined(PS_WARP_EMULATION)
#define PS_HAVE_WARP 1
#define PS_WARP_FN static inline
#endif

#ifdef PS_HAVE_WARP
/*
 * ps_lbfgs_direction by one warp, bit for bit: all 32 lanes call it,
 * converged (k <= m <= 32 = PS_MAX_MEMORY); lane l owns pair l: its slot,
 * 1/R_ll, acc_l, t_l and p_l live in its registers, and t_l, p_l reach the
 * other lanes by shuffles, k dependent steps per substitution. Reads of lb
 * (the block's state in shared memory): the back substitution's column
 * R_il, i < l, lies in one bank (an l-way conflict, off the dependent
 * chain: the load does not wait for t_l); everything else is read along
 * rows, one element per lane. Ends with the warp converged.
 */
PS_WARP_FN void ps_lbfgs_direction_warp(ps_lbfgs *lb)
{
    const int lane = PS_LANE();
    const int k = lb->k, m = lb->m;
    if (k == 0) {
        if (lane == 0)
            ps_lbfgs_steepest(lb);
        PS_SYNCWARP();
        return;
    }
    const int own = lane < k;
    const int first = ps_lbfgs_first(lb);
    const double gamma = ps_lbfgs_gamma(lb);
    const int slot = lane < m ? ps_lbfgs_slot(first, lane, m) : 0;
    double rd = 0.0, acc = 0.0, t = 0.0, p = 0.0;
    if (own) {
        rd = ps_lbfgs_rdiag(lb, slot);
        acc = lb->sg[slot];
    }

    /* t = R^-1 a: lane l solves, lanes i < l eliminate column l (its
     * entries loaded a step ahead, off the chain of dependent steps) */
    int sl = lb->newest; /* slot of pair l */
    double r = lane < k - 1 ? lb->sy[slot][sl] : 0.0;
    for (int l = k - 1; l >= 0; l--) {
        const int sn = sl == 0 ? m - 1 : sl - 1;
        const double rn = lane < l - 1 ? lb->sy[slot][sn] : 0.0;
        const double tl = PS_SHFL(ps_lbfgs_solve(acc, rd), l);
        if (lane == l)
            t = tl;
        if (lane < l)
            acc = ps_lbfgs_elim(acc, r, tl);
        r = rn;
        sl = sn;
    }
    /* w_l by lane l, j ascending */
    double yyt = 0.0;
    sl = first;
    for (int j = 0; j < k; j++) {
        const double tj = PS_SHFL(t, j);
        if (own)
            yyt = ps_lbfgs_madd(yyt, lb->yy[sl][slot], tj);
        sl = sl + 1 == m ? 0 : sl + 1;
    }
    if (own)
        acc = ps_lbfgs_w(lb->sy[slot][slot], t, gamma, yyt, lb->yg[slot]);
    /* p = R^-T w: lane l solves, lanes l < i < k eliminate row l (loaded
     * a step ahead) */
    sl = first;
    r = own && lane > 0 ? lb->sy[sl][slot] : 0.0;
    for (int l = 0; l < k; l++) {
        const int sn = sl + 1 == m ? 0 : sl + 1;
        const double rn = own && lane > l + 1 ? lb->sy[sn][slot] : 0.0;
        const double pl = PS_SHFL(ps_lbfgs_solve(acc, rd), l);
        if (lane == l)
            p = pl;
        if (lane > l && own)
            acc = ps_lbfgs_elim(acc, r, pl);
        r = rn;
        sl = sn;
    }
    /* coefficients; g.d summed in l order (every lane the same sum) */
    double e = 0.0;
    if (own) {
        ps_lbfgs_store(lb, slot, gamma, t, p);
        e = ps_lbfgs_gd_term(p, lb->sg[slot], gamma, t, lb->yg[slot]);
    } else if (lane < m) {
        lb->cs[slot] = 0.0;
        lb->cy[slot] = 0.0;
    }
    double gd = ps_lbfgs_gd0(gamma, lb->gg);
    for (int j = 0; j < k; j++)
        gd += PS_SHFL(e, j);
    PS_SYNCWARP(); /* the lanes' cs, cy and reads of k before lane 0's fallback */
    if (lane == 0)
        ps_lbfgs_conclude(lb, gamma, gd);
    PS_SYNCWARP();
}
#endif /* PS_HAVE_WARP */

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

/* ------------------------------------------------------------------------ */
/* The solver state machine                                                 */
/* ------------------------------------------------------------------------ */

typedef struct ps_solver {
    /* settings */
    int m, past, max_ls, phase;
    int64_t max_iterations, max_evaluations; /* 0 = unlimited */
    double gtol, ftol, c1, c2, time_limit;   /* time_limit 0 = none */
    double fnoise;                           /* relative noise of f (line search) */
    /* progress */
    int status;
    int resume_phase; /* the phase a finish interrupted (a limit or a cancel
                         can be lifted there: checkpoints continue from it) */
    int64_t iteration, evaluations;
    double f, gnorm, gnorm0, step;
    double fhist[PS_MAX_PAST + 1]; /* f after iteration i at [i % (past+1)] */
    ps_lbfgs lb;
    ps_linesearch ls;
} ps_solver;

PS_HD void ps_solver_init(ps_solver *s, int m, int past, int max_ls,
                          int64_t max_iterations, int64_t max_evaluations,
                          double gtol, double ftol, double c1, double c2,
                          double time_limit, double fnoise)
{
    s->m = m;
    s->past = past;
    s->max_ls = max_ls;
    s->phase = PS_PHASE_START;
    s->max_iterations = max_iterations;
    s->max_evaluations = max_evaluations;
    s->gtol = gtol;
    s->ftol = ftol;
    s->c1 = c1;
    s->c2 = c2;
    s->time_limit = time_limit;
    s->fnoise = fnoise;
    s->status = PS_ST_RUNNING;
    s->resume_phase = PS_PHASE_START;
    s->iteration = 0;
    s->evaluations = 0;
    s->f = 0.0;
    s->gnorm = 0.0;
    s->gnorm0 = 0.0;
    s->step = 0.0;
    for (int i = 0; i <= PS_MAX_PAST; i++)
        s->fhist[i] = 0.0;
    s->lb.m = m;
    s->lb.k = 0;
    s->lb.newest = 0;
    s->lb.pad_ = 0;
    for (int i = 0; i < PS_MAX_MEMORY; i++) {
        for (int j = 0; j < PS_MAX_MEMORY; j++) {
            s->lb.sy[i][j] = 0.0;
            s->lb.yy[i][j] = 0.0;
        }
        s->lb.sg[i] = s->lb.yg[i] = s->lb.cs[i] = s->lb.cy[i] = 0.0;
    }
    s->lb.gg = s->lb.cg = s->lb.gd = 0.0;
    ps_ls_begin(&s->ls, 0.0, 0.0, 0.0, c1, c2, 0.0, max_ls);
}

PS_HD void ps_solver_finish(ps_solver *s, int status)
{
    if (s->phase != PS_PHASE_DONE)
        s->resume_phase = s->phase;
    s->status = status;
    s->phase = PS_PHASE_DONE;
}

/*
 * Undo a finish by a limit (iterations, evaluations, time) or a cancel:
 * the solve continues at the phase it stopped in, exactly as if it had
 * never stopped (the limits are checked again there). A cancel may come
 * before the start point's evaluation was taken (START): the solve then
 * begins again, at the same point. Returns 1 if the state was reopened.
 */
PS_HD int ps_solver_reopen(ps_solver *s)
{
    int st = s->status, rp = s->resume_phase;
    if (s->phase != PS_PHASE_DONE ||
        !(st == PS_ST_MAX_ITERATIONS || st == PS_ST_MAX_EVALUATIONS || st == PS_ST_TIME_LIMIT ||
          st == PS_ST_CANCELLED) ||
        !(rp == PS_PHASE_DIRECTION || rp == PS_PHASE_TRIAL || rp == PS_PHASE_UPDATE ||
          (rp == PS_PHASE_START && st == PS_ST_CANCELLED && s->iteration == 0)))
        return 0;
    s->phase = s->resume_phase;
    s->status = PS_ST_RUNNING;
    return 1;
}

/* The iteration, evaluation and time limits (elapsed: the solve's seconds
 * so far): the state finished (returns 1) if one is reached. */
PS_HD int ps_solver_stop_limits(ps_solver *s, double elapsed)
{
    if (s->max_iterations > 0 && s->iteration >= s->max_iterations) {
        ps_solver_finish(s, PS_ST_MAX_ITERATIONS);
        return 1;
    }
    if (s->max_evaluations > 0 && s->evaluations >= s->max_evaluations) {
        ps_solver_finish(s, PS_ST_MAX_EVALUATIONS);
        return 1;
    }
    if (s->time_limit > 0.0 && elapsed >= s->time_limit) {
        ps_solver_finish(s, PS_ST_TIME_LIMIT);
        return 1;
    }
    return 0;
}

/*
 * A state under new limits (a checkpoint resumed with other options): a
 * trial already at the iteration, evaluation or time limit (elapsed: the
 * solve's seconds so far) finishes there, as an uninterrupted run with
 * those limits would have (the other phases check the limits before they
 * evaluate; a trial evaluates first). A later lift continues the trial
 * (ps_solver_reopen). Returns 1 if it finished the state.
 */
PS_HD int ps_solver_limits_reached(ps_solver *s, double elapsed)
{
    return s->phase == PS_PHASE_TRIAL && ps_solver_stop_limits(s, elapsed);
}

/* START: f and g.g at x0 (one evaluation done). */
PS_HD void ps_solver_start(ps_solver *s, double f, double gg)
{
    s->evaluations = 1;
    s->f = f;
    s->gnorm = sqrt(gg);
    s->gnorm0 = s->gnorm;
    s->lb.gg = gg;
    s->fhist[0] = f;
    if (!isfinite(f) || !isfinite(gg)) {
        ps_solver_finish(s, PS_ST_ERR_OBJECTIVE);
        return;
    }
    if (s->gnorm == 0.0) {
        ps_solver_finish(s, PS_ST_CONVERGED);
        return;
    }
    s->phase = PS_PHASE_DIRECTION;
}

/*
 * DIRECTION: the limits that are checked between iterations, then the
 * coefficients of d and the first trial step: 1/||g|| on the first
 * iteration (a unit-length step), 1 afterwards (N&W sec. 3.5). In three
 * parts, so that a warp can take the middle one (ps_solver_direction_warp).
 */

/* The limits; returns 1 if the solve goes on (else it is DONE). */
PS_HD int ps_solver_direction_limits(ps_solver *s, double elapsed)
{
    return !ps_solver_stop_limits(s, elapsed);
}

/* The line search along d, from the coefficients' g.d. */
PS_HD void ps_solver_direction_begin(ps_solver *s)
{
    double alpha0 = s->lb.k == 0 ? 1.0 / s->gnorm : 1.0;
    ps_ls_begin(&s->ls, s->f, s->lb.gd, alpha0, s->c1, s->c2,
                s->fnoise * fabs(s->f), s->max_ls);
    s->phase = PS_PHASE_TRIAL;
}

PS_HD void ps_solver_direction(ps_solver *s, double elapsed)
{
    if (!ps_solver_direction_limits(s, elapsed))
        return;
    ps_lbfgs_direction(&s->lb);
    ps_solver_direction_begin(s);
}

#ifdef PS_HAVE_WARP
/*
 * ps_solver_direction by one warp, bit for bit (all 32 lanes call it,
 * converged; lane 0's elapsed counts): lane 0 takes the limits and begins
 * the line search, the warp computes the coefficients. Ends with the warp
 * converged; the caller places the barrier before other warps read s.
 */
PS_WARP_FN void ps_solver_direction_warp(ps_solver *s, double elapsed)
{
    int go = 0;
    if (PS_LANE() == 0)
        go = ps_solver_direction_limits(s, elapsed);
    if (PS_SHFL(go, 0)) {
        ps_lbfgs_direction_warp(&s->lb);
        if (PS_LANE() == 0)
            ps_solver_direction_begin(s);
    }
    PS_SYNCWARP();
}
#endif /* PS_HAVE_WARP */

/* TRIAL: phi(alpha) and phi'(alpha) = g_t.d at the trial point. */
PS_HD void ps_solver_trial(ps_solver *s, double f, double dg)
{
    s->evaluations++;
    int a = ps_ls_next(&s->ls, f, dg);
    if (a == PS_LS_ACCEPT) {
        s->phase = PS_PHASE_UPDATE;
        return;
    }
    if (a == PS_LS_FAIL) {
        /* No trial lowered f by more than its noise allowance: f cannot be
         * decreased at the objective's precision, which is convergence in
         * the sense of the decrease test; any other failure is an error. */
        if (s->iteration > 0 && s->ls.feps > 0.0 && s->ls.f_best >= s->f - s->ls.feps)
            ps_solver_finish(s, PS_ST_CONVERGED_FTOL);
        else
            ps_solver_finish(s, PS_ST_ERR_LINE_SEARCH);
        return;
    }
    if (s->max_evaluations > 0 && s->evaluations >= s->max_evaluations)
        ps_solver_finish(s, PS_ST_MAX_EVALUATIONS);
}

/*
 * UPDATE: the accepted point's f and the batched dots (PS_RED_LEN layout).
 * Then the stopping tests:
 *   gradient:  ||g_k|| <= gtol ||g_0||
 *   decrease:  f_{k-past} - f_k <= max(ftol, fnoise) max(|f_k|, 1e-300)
 *              (k >= past, ftol > 0): a decrease below the objective's
 *              noise allowance is no decrease
 */
PS_HD void ps_solver_update_tests(ps_solver *s, double f)
{
    s->step = s->ls.alpha;
    s->f = f;
    s->gnorm = sqrt(s->lb.gg);
    s->iteration++;
    s->fhist[s->iteration % (s->past + 1)] = f;
    if (s->gnorm <= s->gtol * s->gnorm0) {
        ps_solver_finish(s, PS_ST_CONVERGED);
        return;
    }
    if (s->iteration >= s->past) {
        double fold = s->fhist[(s->iteration - s->past) % (s->past + 1)];
        if (s->ftol > 0.0 && fold - f <= fmax(s->ftol, s->fnoise) * fmax(fabs(f), 1e-300)) {
            ps_solver_finish(s, PS_ST_CONVERGED_FTOL);
            return;
        }
    }
    s->phase = PS_PHASE_DIRECTION;
}

PS_HD void ps_solver_update(ps_solver *s, double f, const double *red)
{
    ps_lbfgs_push(&s->lb, red);
    ps_solver_update_tests(s, f);
}

#ifdef PS_HAVE_WARP
/*
 * ps_solver_update by one warp, bit for bit (the entries are copies):
 * lane i < m takes pair i's dots, lane 0 the rest. All 32 lanes call it.
 */
PS_WARP_FN void ps_solver_update_warp(ps_solver *s, double f, const double *red)
{
    ps_lbfgs *lb = &s->lb;
    const int ns = ps_lbfgs_next_slot(lb), keep = ps_lbfgs_push_keeps(lb, red), i = PS_LANE();
    if (i < lb->m)
        ps_lbfgs_push_entry(lb, red, ns, keep, i);
    PS_SYNCWARP(); /* every lane has read newest and k */
    if (i == 0) {
        ps_lbfgs_push_finish(lb, red, ns, keep);
        ps_solver_update_tests(s, f);
    }
    PS_SYNCWARP();
}
#endif

#endif /* PS_SRC_LBFGS_MATH_H */
