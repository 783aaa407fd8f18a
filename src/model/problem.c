/*
 * Problem creation: validation of every field of a ps_problem_desc and a
 * private copy of its arrays.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "model/design.h"
#include "model/problem.h"

/* ps_problem_desc (include/persolve.h) holds the fields of the lists and
 * nothing more: a member added there without its row fails here. */
#define DESC_ARRAY(name, ...) const double *name;
#define DESC_REAL(name, ...) double name;
struct desc_of_the_lists {
    size_t ns, nt, nc, nq;
    PS_PROBLEM_ARRAYS(DESC_ARRAY)
    PS_PROBLEM_REALS(DESC_REAL)
    ps_loss loss;
    /* the constraints' members outside the lists (their own rules below) */
    const double *b1_max_channel;
    double sar_max, tr;
    unsigned design_g;
    double smax, gmax;
    int g_end;
};
#undef DESC_REAL
#undef DESC_ARRAY
_Static_assert(sizeof(struct desc_of_the_lists) == sizeof(ps_problem_desc),
               "a member of ps_problem_desc has no row in model/problem_fields.h");
_Static_assert(offsetof(struct desc_of_the_lists, tr) == offsetof(ps_problem_desc, tr) &&
                   offsetof(struct desc_of_the_lists, g_end) == offsetof(ps_problem_desc, g_end),
               "ps_problem_desc: the constraints' members moved");
#define DESC_AT(name, ...)                                                                 \
    _Static_assert(offsetof(struct desc_of_the_lists, name) == offsetof(ps_problem_desc, name), \
                   "ps_problem_desc." #name " is not where model/problem_fields.h lists it");
PS_PROBLEM_ARRAYS(DESC_AT)
#undef DESC_AT

void ps_problem_desc_init(ps_problem_desc *d)
{
    if (!d)
        return;
    memset(d, 0, sizeof *d);
    d->gamma_bar = PS_GAMMA_BAR_DEFAULT;
    d->loss = PS_LOSS_FULL;
    d->b1_max = PS_B1MAX_NONE;
}

/* First non-finite element of a[n], or n. */
static size_t first_nonfinite(const double *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i]))
            return i;
    return n;
}

/* Checks an array of n values, if given: finite, and what `rule` asks.
 * Messages name an element [i][a][c][w] of [n / (side^2 width)][side][side]
 * [width] when side > 1 (then mid = side^2), else [i][j][w] of
 * [n / (mid width)][mid][width] when mid > 1, else [i][w] of
 * [n / width][width] (or [i]). */
static int check_array(const char *name, const double *a, size_t n, size_t mid, size_t side,
                       size_t width, int rule, char *msg, size_t len)
{
    if (!a)
        return PS_CONVERGED;
    size_t i = first_nonfinite(a, n);
    if (i < n) {
        if (side > 1) /* [n / (side side width)][side][side][width] */
            return ps_status_msg(msg, len, PS_ERR_NONFINITE, "%s[%zu][%zu][%zu][%zu] is %s", name,
                                 i / (mid * width), i / width / side % side, i / width % side, i % width,
                                 isnan(a[i]) ? "NaN" : "Inf");
        if (mid > 1)
            return ps_status_msg(msg, len, PS_ERR_NONFINITE, "%s[%zu][%zu][%zu] is %s", name,
                                 i / (mid * width), i / width % mid, i % width,
                                 isnan(a[i]) ? "NaN" : "Inf");
        if (width > 1)
            return ps_status_msg(msg, len, PS_ERR_NONFINITE, "%s[%zu][%zu] is %s", name,
                        i / width, i % width, isnan(a[i]) ? "NaN" : "Inf");
        return ps_status_msg(msg, len, PS_ERR_NONFINITE, "%s[%zu] is %s", name, i,
                    isnan(a[i]) ? "NaN" : "Inf");
    }
    if (rule == PS_RULE_MASK) {
        for (i = 0; i < n; i++)
            if (a[i] != 0.0 && a[i] != 1.0)
                return ps_status_msg(msg, len, PS_ERR_RF_MASK, "%s[%zu] = %g must be 0 or 1", name, i, a[i]);
    } else if (rule != PS_RULE_FINITE) {
        int strict = rule == PS_RULE_RELAXATION;
        int status = strict ? PS_ERR_RELAXATION : PS_ERR_NEGATIVE;
        for (i = 0; i < n; i++) {
            if (strict ? !(a[i] > 0.0) : !(a[i] >= 0.0))
                return ps_status_msg(msg, len, status, "%s[%zu] = %g must be %s %g",
                            name, i, a[i], strict ? ">" : ">=", 0.0);
        }
    }
    return PS_CONVERGED;
}

/* The SAR constraint: nq and vop together, positive sar_max and tr; each
 * VOP (once finite) Hermitian and positive semidefinite. */
static int check_vops(const ps_problem_desc *d, char *msg, size_t len);
static int check_scales(const ps_problem_desc *d, char *msg, size_t len);

/* The designed gradient axes and their limits. */
static int gradient_validate(const ps_problem_desc *d, char *msg, size_t len)
{
    if (d->design_g & ~(unsigned)(PS_AXIS_X | PS_AXIS_Y | PS_AXIS_Z))
        return ps_status_msg(msg, len, PS_ERR_GRADIENT, "design_g = %u has bits beyond the axes x, y, z (1, 2, 4)",
                             d->design_g);
    if (isnan(d->smax) || isnan(d->gmax))
        return ps_status_msg(msg, len, PS_ERR_NONFINITE, "%s is NaN", isnan(d->smax) ? "smax" : "gmax");
    if (d->g_end != 0 && d->g_end != 1)
        return ps_status_msg(msg, len, PS_ERR_GRADIENT, "g_end = %d must be 0 or 1", d->g_end);
    if (!d->design_g) {
        if (d->gmax != 0.0 || d->g_end || d->smax != 0.0)
            return ps_status_msg(msg, len, PS_ERR_GRADIENT, "%s given without design_g (no axis is designed)",
                                 d->smax != 0.0 ? "smax" : d->gmax != 0.0 ? "gmax" : "g_end");
        return PS_CONVERGED;
    }
    if (d->smax == 0.0)
        return ps_status_msg(msg, len, PS_ERR_GRADIENT,
                             "smax is missing: design_g needs the slew-rate limit (G/cm/s: 150 T/m/s is 15000)");
    if (!isfinite(d->smax) || !(d->smax > 0.0))
        return ps_status_msg(msg, len, PS_ERR_GRADIENT, "smax = %g must be finite and > 0 (G/cm/s) with design_g",
                             d->smax);
    if (!isfinite(d->gmax) || d->gmax < 0.0)
        return ps_status_msg(msg, len, PS_ERR_GRADIENT, "gmax = %g must be finite and > 0 (G/cm; 0: none)", d->gmax);
    if (d->g_end && d->gmax == 0.0)
        return ps_status_msg(msg, len, PS_ERR_GRADIENT, "g_end needs gmax (|g(T)| <= constraint_tol gmax)");
    return PS_CONVERGED;
}

static int ps_sar_validate(const ps_problem_desc *d, char *msg, size_t len)
{
    if (d->nq > PS_MAX_VOPS)
        return ps_status_msg(msg, len, PS_ERR_SIZE, "nq = %zu is too large (at most %d VOPs)", d->nq,
                             PS_MAX_VOPS);
    if (d->nq == 0) {
        if (d->vop)
            return ps_status_msg(msg, len, PS_ERR_SAR, "vop is given with nq = 0");
        return PS_CONVERGED;
    }
    if (!d->vop)
        return ps_status_msg(msg, len, PS_ERR_NULL, "vop is NULL with nq = %zu", d->nq);
    if (isnan(d->sar_max) || isnan(d->tr))
        return ps_status_msg(msg, len, PS_ERR_NONFINITE, "%s is NaN", isnan(d->sar_max) ? "sar_max" : "tr");
    if (!isfinite(d->sar_max) || !(d->sar_max > 0.0))
        return ps_status_msg(msg, len, PS_ERR_SAR, "sar_max = %g must be finite and > 0", d->sar_max);
    if (!isfinite(d->tr) || !(d->tr > 0.0))
        return ps_status_msg(msg, len, PS_ERR_SAR, "tr = %g must be finite and > 0", d->tr);
    return PS_CONVERGED;
}

int ps_problem_validate(const ps_problem_desc *d, char *msg, size_t len)
{
    int st;
    if (msg && len)
        msg[0] = '\0';
    if (!d)
        return ps_status_msg(msg, len, PS_ERR_NULL, "problem description is NULL");
    if (d->ns == 0 || d->nt == 0)
        return ps_status_msg(msg, len, PS_ERR_SIZE, "%s is 0", d->ns == 0 ? "ns" : "nt");
    if (d->ns > PS_MAX_NS)
        return ps_status_msg(msg, len, PS_ERR_SIZE, "ns = %zu is too large (at most 2^31 spins)", d->ns);
    if (d->nt > PS_MAX_NT)
        return ps_status_msg(msg, len, PS_ERR_SIZE, "nt = %zu is too large (at most 2^26 time steps)", d->nt);
    if (d->nc > PS_MAX_CHANNELS)
        return ps_status_msg(msg, len, PS_ERR_SIZE, "nc = %zu is too large (at most %d channels)",
                             d->nc, PS_MAX_CHANNELS);
    if (d->b1map && d->b1scale)
        return ps_status_msg(msg, len, PS_ERR_CHANNELS,
                             "b1map and b1scale are both given (a B1 scale is the b1map of one channel)");
    if (PS_NC_OF(d) > 1 && !d->b1map)
        return ps_status_msg(msg, len, PS_ERR_CHANNELS, "nc = %zu channels need a b1map", d->nc);
#define REQUIRE(name, rows, width, channels, presence, rule, group, dataset, label) \
    if (presence == PS_FIELD_REQUIRED && !d->name)                            \
        return ps_status_msg(msg, len, PS_ERR_NULL, "%s is NULL", label);
    PS_PROBLEM_ARRAYS(REQUIRE)
#undef REQUIRE
    if (!isfinite(d->dt))
        return ps_status_msg(msg, len, PS_ERR_NONFINITE, "dt is %s",
                    isnan(d->dt) ? "NaN" : "Inf");
    if (!(d->dt > 0.0))
        return ps_status_msg(msg, len, PS_ERR_DT, "dt = %g must be > 0", d->dt);
    if (!isfinite(d->gamma_bar))
        return ps_status_msg(msg, len, PS_ERR_NONFINITE, "gamma_bar is not finite");
    if (d->gamma_bar < 0.0)
        return ps_status_msg(msg, len, PS_ERR_DT, "gamma_bar = %g must be > 0 (0: default)",
                    d->gamma_bar);
    if (!isfinite(d->lambda))
        return ps_status_msg(msg, len, PS_ERR_NONFINITE, "lambda is not finite");
    if (d->lambda < 0.0)
        return ps_status_msg(msg, len, PS_ERR_NEGATIVE, "lambda = %g must be >= 0",
                    d->lambda);
    if ((int)d->loss < 0 || (int)d->loss > 3)
        return ps_status_msg(msg, len, PS_ERR_LOSS, "loss = %d is not a loss type",
                    (int)d->loss);
    if (isnan(d->b1_max) || !(d->b1_max > 0.0))
        return ps_status_msg(msg, len, PS_ERR_B1MAX, "b1_max = %g must be > 0",
                    d->b1_max);
    if (d->b1_max_channel) {
        if (isfinite(d->b1_max))
            return ps_status_msg(msg, len, PS_ERR_B1MAX,
                                 "b1_max = %g and b1_max_channel are both given (one limit or one per channel)",
                                 d->b1_max);
        for (size_t c = 0; c < PS_NC_OF(d); c++)
            if (!isfinite(d->b1_max_channel[c]) || !(d->b1_max_channel[c] > 0.0))
                return ps_status_msg(msg, len, isnan(d->b1_max_channel[c]) ? PS_ERR_NONFINITE : PS_ERR_B1MAX,
                                     "b1_max_channel[%zu] = %g must be finite and > 0", c,
                                     d->b1_max_channel[c]);
    }
    if ((st = ps_sar_validate(d, msg, len)) || (st = gradient_validate(d, msg, len)))
        return st;
#define CHECK(name, rows, width, channels, presence, rule, ...)               \
    if ((st = check_array(#name, d->name, PS_FIELD_COUNT(d, rows, width, channels),   \
                          PS_NC_OF(d) == 1   ? 1                                       \
                          : channels == PS_CH_INNER ? PS_NC_OF(d)                      \
                          : channels == PS_CH_OUTER ? d->rows                          \
                          : channels == PS_CH_SQUARE ? PS_NC_OF(d) * PS_NC_OF(d)       \
                                                    : 1,                               \
                          channels == PS_CH_SQUARE ? PS_NC_OF(d) : 0,                  \
                          width, rule, msg, len)))                                     \
        return st;
    PS_PROBLEM_ARRAYS(CHECK)
#undef CHECK
    if ((st = check_scales(d, msg, len)))
        return st;
    return d->nq ? check_vops(d, msg, len) : PS_CONVERGED;
}

/*
 * The model's scales within float32's range (the spin loops' default
 * arithmetic), so that a problem whose numbers are each finite cannot
 * overflow the model or lose its pulse to underflow. Each factor the spin
 * loops hold in float32 within [PS_MIN_SCALE, PS_MAX_SCALE] (or 0 where
 * 0 is a value): the rotation a step per G, 2 pi gamma_bar dt; the B1
 * sensitivities; the pulse's peak (its limit, else the start pulse's
 * peak); the positions, the gradient and the off-resonance. Then the
 * products, a step's rotation (rad) by the pulse at its peak, by the
 * gradient at the farthest spin and by the largest off-resonance, at most
 * PS_MAX_SCALE; lambda's power penalty within float64; the designed axes'
 * start waveform at most PS_MAX_GMAX_RATIO times gmax (the limit's penalty
 * grows with the square of the ratio). Each message starts with the field
 * to blame, which the file reader turns into its dataset or attribute.
 * Physical problems are 20 and more orders of magnitude inside these
 * bounds.
 */
#define PS_MAX_SCALE 1e30
#define PS_MIN_SCALE 1e-30
#define PS_MAX_GMAX_RATIO 1e15
static int outside(double v, int zero_ok)
{
    return !(v <= PS_MAX_SCALE) || (v < PS_MIN_SCALE && !(zero_ok && v == 0.0));
}

static int check_scales(const ps_problem_desc *d, char *msg, size_t len)
{
    const size_t ns = d->ns, nt = d->nt, nc = PS_NC_OF(d);
    const double gb = d->gamma_bar > 0.0 ? d->gamma_bar : PS_GAMMA_BAR_DEFAULT;
    const double turn = 2.0 * 3.14159265358979323846 * gb * d->dt; /* rad a step per G */
    double smax = d->b1map ? 0.0 : 1.0, rmax[3] = {0.0, 0.0, 0.0}, dfmax = 0.0;
    for (size_t j = 0; j < ns; j++) {
        for (size_t c = 0; d->b1map && c < nc; c++)
            smax = fmax(smax, hypot(d->b1map[2 * (j * nc + c)], d->b1map[2 * (j * nc + c) + 1]));
        if (d->b1scale)
            smax = j ? fmax(smax, fabs(d->b1scale[j])) : fabs(d->b1scale[j]);
        for (int a = 0; a < 3; a++)
            rmax[a] = fmax(rmax[a], fabs(d->r[3 * j + a]));
        if (d->df)
            dfmax = fmax(dfmax, fabs(d->df[j]));
    }
    /* the peak: the limits' largest (and lowest), else the start pulse's */
    double peak = 0.0, lowest = HUGE_VAL;
    const char *peak_of = "b1: the start pulse's peak";
    if (d->b1_max_channel || isfinite(d->b1_max)) {
        for (size_t c = 0; c < nc; c++) {
            const double bm = d->b1_max_channel ? d->b1_max_channel[c] : d->b1_max;
            peak = fmax(peak, bm);
            lowest = fmin(lowest, bm);
        }
        peak_of = d->b1_max_channel ? "b1_max_channel: the largest limit" : "b1_max";
    } else {
        for (size_t i = 0; d->b1 && i < nc * nt; i++)
            peak = fmax(peak, hypot(d->b1[2 * i], d->b1[2 * i + 1]));
    }
    double gr = 0.0, gpeak = 0.0, gabs = 0.0;
    for (size_t k = 0; k < nt; k++) {
        double s = 0.0;
        for (int a = 0; a < 3; a++) {
            s += fabs(d->g[3 * k + a]) * rmax[a];
            gabs = fmax(gabs, fabs(d->g[3 * k + a]));
            if (d->design_g >> a & 1u)
                gpeak = fmax(gpeak, fabs(d->g[3 * k + a]));
        }
        gr = fmax(gr, s);
    }
    const double r_abs = fmax(rmax[0], fmax(rmax[1], rmax[2]));
    /* the factors */
    if (outside(turn, 0))
        return ps_status_msg(msg, len, PS_ERR_SCALE,
                             "dt = %g s, gamma_bar = %g Hz/G: the rotation a step per G, 2 pi gamma_bar dt "
                             "= %g rad/G, is outside [%g, %g] (float32's range)",
                             d->dt, gb, turn, PS_MIN_SCALE, PS_MAX_SCALE);
    if (outside(smax, 1))
        return ps_status_msg(msg, len, PS_ERR_SCALE,
                             "%s: the largest B1 sensitivity %g is outside [%g, %g] (float32's range)",
                             d->b1map ? "b1map" : "b1scale", smax, PS_MIN_SCALE, PS_MAX_SCALE);
    if (isfinite(lowest) && lowest < PS_MIN_SCALE)
        return ps_status_msg(msg, len, PS_ERR_SCALE, "%s %g G is outside [%g, %g] G (float32's range)",
                             d->b1_max_channel ? "b1_max_channel: the smallest limit" : "b1_max", lowest,
                             PS_MIN_SCALE, PS_MAX_SCALE);
    if (outside(peak, !isfinite(lowest)))
        return ps_status_msg(msg, len, PS_ERR_SCALE, "%s %g G is outside [%g, %g] G (float32's range)",
                             peak_of, peak, PS_MIN_SCALE, PS_MAX_SCALE);
    if (outside(r_abs, 1))
        return ps_status_msg(msg, len, PS_ERR_SCALE,
                             "r: the largest |coordinate| %g cm is outside [%g, %g] (float32's range)", r_abs,
                             PS_MIN_SCALE, PS_MAX_SCALE);
    if (outside(gabs, 1))
        return ps_status_msg(msg, len, PS_ERR_SCALE,
                             "g: the largest |component| %g G/cm is outside [%g, %g] (float32's range)",
                             gabs, PS_MIN_SCALE, PS_MAX_SCALE);
    if (outside(dfmax, 1))
        return ps_status_msg(msg, len, PS_ERR_SCALE,
                             "df: the largest |df| %g Hz is outside [%g, %g] (float32's range)", dfmax,
                             PS_MIN_SCALE, PS_MAX_SCALE);
    /* the products: a step's rotations */
    const double rf = turn * peak * smax, grad = turn * gr, off = 2.0 * 3.14159265358979323846 * d->dt * dfmax;
    if (!(rf <= PS_MAX_SCALE))
        return ps_status_msg(msg, len, PS_ERR_SCALE,
                             "%s %g G: the pulse's rotation a step there, 2 pi gamma_bar dt |b1| |S| = %g "
                             "rad (dt = %g s), is above %g rad (float32 overflows)",
                             peak_of, peak, rf, d->dt, PS_MAX_SCALE);
    if (!(grad <= PS_MAX_SCALE))
        return ps_status_msg(msg, len, PS_ERR_SCALE,
                             "g: the gradient's rotation a step at the farthest spin, 2 pi gamma_bar dt "
                             "|g.r| = %g rad (dt = %g s), is above %g rad (float32 overflows)",
                             grad, d->dt, PS_MAX_SCALE);
    if (!(off <= PS_MAX_SCALE))
        return ps_status_msg(msg, len, PS_ERR_SCALE,
                             "df: the off-resonance's rotation a step, 2 pi dt |df| = %g rad (dt = %g s), "
                             "is above %g rad (float32 overflows)", off, d->dt, PS_MAX_SCALE);
    /* the power penalty and its gradient 2 lambda b at the peak (1 G where
     * the start pulse is zero and there is no limit) within float64 */
    const double bp = peak > 0.0 ? peak : 1.0;
    if (!(d->lambda * bp * bp * (double)(nc * nt) <= 1e300 && 2.0 * d->lambda * bp <= 1e300))
        return ps_status_msg(msg, len, PS_ERR_SCALE,
                             "lambda = %g: the power penalty lambda sum |b|^2 at a peak of %g G over %zu "
                             "samples overflows float64", d->lambda, bp, nc * nt);
    if (d->design_g && d->gmax > 0.0 && !(gpeak <= PS_MAX_GMAX_RATIO * d->gmax))
        return ps_status_msg(msg, len, PS_ERR_SCALE,
                             "gmax = %g G/cm is %g times below the designed axes' start waveform (peak "
                             "%g G/cm): more than %g, where the limit's penalty overflows",
                             d->gmax, gpeak / d->gmax, gpeak, PS_MAX_GMAX_RATIO);
    return PS_CONVERGED;
}

/*
 * Hermitian: |Q_ab - conj(Q_ba)| <= 1e-9 max |Q| for every a, b. Positive
 * semidefinite: the Cholesky factorization of Q + eps I succeeds, eps =
 * 1e-10 nc max |Q_aa| (a matrix whose eigenvalues are all >= 0 up to
 * rounding passes, one with an eigenvalue below -eps does not).
 */
static int check_vops(const ps_problem_desc *d, char *msg, size_t len)
{
    const size_t nc = PS_NC_OF(d);
    double *L = malloc(2 * nc * nc * sizeof *L);
    if (!L)
        return ps_status_msg(msg, len, PS_ERR_NO_MEMORY, "no memory to check the VOPs");
    int st = PS_CONVERGED;
    for (size_t q = 0; q < d->nq && !st; q++) {
        const double *Q = d->vop + 2 * nc * nc * q;
        double big = 0.0, diag = 0.0;
        for (size_t i = 0; i < nc * nc; i++)
            big = fmax(big, hypot(Q[2 * i], Q[2 * i + 1]));
        for (size_t a = 0; a < nc; a++)
            diag = fmax(diag, fabs(Q[2 * (a * nc + a)]));
        for (size_t a = 0; a < nc && !st; a++)
            for (size_t b = a; b < nc && !st; b++) {
                const double *x = Q + 2 * (a * nc + b), *y = Q + 2 * (b * nc + a);
                if (hypot(x[0] - y[0], x[1] + y[1]) > 1e-9 * big)
                    st = ps_status_msg(msg, len, PS_ERR_SAR,
                                       "vop[%zu] is not Hermitian: Q[%zu][%zu] = %g%+gi but conj(Q[%zu][%zu]) = %g%+gi",
                                       q, a, b, x[0], x[1], b, a, y[0], -y[1]);
            }
        /* complex Cholesky, lower triangle L (row-major, Re/Im) */
        const double eps = 1e-10 * (double)nc * diag + 1e-300;
        for (size_t j = 0; j < nc && !st; j++) {
            double djj = Q[2 * (j * nc + j)] + eps;
            for (size_t k = 0; k < j; k++)
                djj -= L[2 * (j * nc + k)] * L[2 * (j * nc + k)] + L[2 * (j * nc + k) + 1] * L[2 * (j * nc + k) + 1];
            if (!(djj > 0.0)) {
                st = ps_status_msg(msg, len, PS_ERR_SAR,
                                   "vop[%zu] is not positive semidefinite (its Cholesky factorization fails at row %zu)",
                                   q, j);
                break;
            }
            const double ljj = sqrt(djj);
            L[2 * (j * nc + j)] = ljj;
            L[2 * (j * nc + j) + 1] = 0.0;
            for (size_t i = j + 1; i < nc; i++) {
                /* L_ij = (Q_ij - sum_k L_ik conj(L_jk)) / L_jj */
                double re = Q[2 * (i * nc + j)], im = Q[2 * (i * nc + j) + 1];
                for (size_t k = 0; k < j; k++) {
                    const double ar = L[2 * (i * nc + k)], ai = L[2 * (i * nc + k) + 1];
                    const double br = L[2 * (j * nc + k)], bi = -L[2 * (j * nc + k) + 1];
                    re -= ar * br - ai * bi;
                    im -= ar * bi + ai * br;
                }
                L[2 * (i * nc + j)] = re / ljj;
                L[2 * (i * nc + j) + 1] = im / ljj;
            }
        }
    }
    free(L);
    return st;
}

/* A copy of a[n], or NULL when a is; zeros instead when a is NULL and
 * `zeros` is set. *oom is set if memory runs out. */
static double *dup_array(const double *a, size_t n, int zeros, int *oom)
{
    if (!a && !zeros)
        return NULL;
    double *c = a ? malloc(n * sizeof *c) : calloc(n, sizeof *c);
    if (!c) {
        *oom = 1;
        return NULL;
    }
    if (a)
        memcpy(c, a, n * sizeof *c);
    return c;
}

int ps_problem_create(const ps_problem_desc *d, ps_problem **out)
{
    if (!out)
        return PS_ERR_NULL;
    *out = NULL;
    int st = ps_problem_validate(d, NULL, 0);
    if (st)
        return st;
    ps_problem *p = calloc(1, sizeof *p);
    if (!p)
        return PS_ERR_NO_MEMORY;
    int oom = 0;
    p->ns = d->ns;
    p->nt = d->nt;
    p->nc = PS_NC_OF(d);
    p->nq = d->nq;
    p->sar_max = d->nq ? d->sar_max : 0.0;
    p->tr = d->nq ? d->tr : 0.0;
    p->b1_max_channel = dup_array(d->b1_max_channel, p->nc, 0, &oom);
    p->design_g = d->design_g;
    p->smax = d->design_g ? d->smax : 0.0;
    p->gmax = d->design_g ? d->gmax : 0.0;
    p->g_end = d->design_g ? d->g_end : 0;
    for (size_t a = 0; a < 3; a++)
        p->slew_scale[a] = p->design_g >> a & 1u ? ps_slew_scale(d, a) : 1.0;
    p->zero_axes = 0;
    for (unsigned c = 0; c < 3; c++) {
        int zero = !(p->design_g >> c & 1u);
        for (size_t k = 0; zero && k < p->nt; k++)
            zero = d->g[3 * k + c] == 0.0;
        p->zero_axes |= (unsigned)zero << c;
    }
    p->real_channel = p->nc == 1;
    for (size_t j = 0; p->real_channel && d->b1map && j < p->ns; j++)
        p->real_channel = d->b1map[2 * j + 1] == 0.0;
#define COPY(name, rows, width, channels, presence, ...)                      \
    p->name = dup_array(d->name, PS_FIELD_COUNT(d, rows, width, channels),     \
                        presence == PS_FIELD_START, &oom);
    PS_PROBLEM_ARRAYS(COPY)
#undef COPY
#define COPY_REAL(name, ...) p->name = d->name;
    PS_PROBLEM_REALS(COPY_REAL)
#undef COPY_REAL
    if (!(d->gamma_bar > 0.0))
        p->gamma_bar = PS_GAMMA_BAR_DEFAULT;
    p->loss = d->loss;
    if (oom) {
        ps_problem_free(p);
        return PS_ERR_NO_MEMORY;
    }
    *out = p;
    return PS_CONVERGED;
}

void ps_problem_spin_view(const ps_problem *p, size_t j0, size_t count, ps_problem *out)
{
    *out = *p;
    out->ns = count;
#define VIEW(name, rows, width, channels, ...)                                \
    if (p->name && &p->rows == &p->ns)                                        \
        out->name = p->name + j0 * (size_t)(width) *                          \
                                  ((channels) == PS_CH_INNER ? p->nc : (size_t)1);
    PS_PROBLEM_ARRAYS(VIEW)
#undef VIEW
}

void ps_problem_free(ps_problem *p)
{
    if (!p)
        return;
#define FREE(name, ...) free(p->name);
    PS_PROBLEM_ARRAYS(FREE)
#undef FREE
    free(p->b1_max_channel);
    free(p);
}

int ps_problem_describe(const ps_problem *p, ps_problem_desc *d)
{
    if (!p || !d)
        return PS_ERR_NULL;
    d->ns = p->ns;
    d->nt = p->nt;
    d->nc = p->nc;
    d->nq = p->nq;
    d->b1_max_channel = p->b1_max_channel;
    d->sar_max = p->sar_max;
    d->tr = p->tr;
    d->design_g = p->design_g;
    d->smax = p->smax;
    d->gmax = p->gmax;
    d->g_end = p->g_end;
#define DESCRIBE(name, ...) d->name = p->name;
    PS_PROBLEM_ARRAYS(DESCRIBE)
    PS_PROBLEM_REALS(DESCRIBE)
#undef DESCRIBE
    d->loss = p->loss;
    return PS_CONVERGED;
}

int ps_problem_x0(const ps_problem *p, double *x)
{
    if (!p || !x)
        return PS_ERR_NULL;
    ps_design_x_of_rows(p->nc, p->nt, p->b1, x);
    ps_design_hold(p, x);
    /* the designed axes' start: the problem's waveform */
    for (size_t i = 0; i < ps_problem_ng(p); i++) {
        const size_t a = ps_design_axis(p, i);
        for (size_t k = 0; k < p->nt; k++)
            x[PS_X_G(p->nc, p->nt, i, k)] = p->g[3 * k + a];
    }
    return PS_CONVERGED;
}

size_t ps_problem_ns(const ps_problem *p)
{
    return p ? p->ns : 0;
}

size_t ps_problem_nt(const ps_problem *p)
{
    return p ? p->nt : 0;
}

size_t ps_problem_nc(const ps_problem *p)
{
    return p ? p->nc : 0;
}

size_t ps_problem_nq(const ps_problem *p)
{
    return p ? p->nq : 0;
}

double ps_problem_loss_scale(const ps_problem *p)
{
    double W = 0.0;
    for (size_t j = 0; p->w && j < p->ns; j++)
        W += p->w[j];
    if (!p->w)
        W = (double)p->ns;
    return W > 0.0 ? W : 1.0;
}

int ps_problem_penalized(const ps_problem *p)
{
    return p && (p->nq > 0 || (p->design_g && (p->gmax > 0.0 || p->g_end)));
}
