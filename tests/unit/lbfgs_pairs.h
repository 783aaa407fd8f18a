/*
 * Random L-BFGS memories for the direction tests: k pairs (s_i, y_i) in
 * R^n with y_i = A s_i, A = diag(lam), lam log-uniform in [0.1, 10] (so
 * s_i.y_i > 0), stored oldest first in slots (first + l) mod m of a
 * ps_lbfgs whose dots are computed here. What the direction must never
 * read holds NaN: slots not in use, indices past m, and the stale half of
 * sy (s_i.y_j with pair i newer than pair j, which ps_lbfgs_push leaves
 * from the pairs a slot held before).
 */
#ifndef PS_TESTS_LBFGS_PAIRS_H
#define PS_TESTS_LBFGS_PAIRS_H

#include <math.h>
#include <stdint.h>

#include "opt/solver.h"
#include "test_util.h"

/* Pairs oldest first: S[l*n .. l*n + n), Y likewise; g the gradient. */
static inline void lp_pairs(uint64_t *seed, int n, int k, double *S, double *Y, double *g)
{
    double lam[64];
    for (int j = 0; j < n && j < 64; j++)
        lam[j] = exp(tu_uniform(seed, log(0.1), log(10.0)));
    for (int l = 0; l < k; l++) {
        for (int j = 0; j < n; j++) {
            S[l * n + j] = tu_uniform(seed, -1.0, 1.0);
            Y[l * n + j] = lam[j] * S[l * n + j];
        }
    }
    for (int j = 0; j < n; j++)
        g[j] = tu_uniform(seed, -1.0, 1.0);
}

static inline double lp_dot(const double *a, const double *b, int n)
{
    double s = 0.0;
    for (int j = 0; j < n; j++)
        s += a[j] * b[j];
    return s;
}

/* Slot of pair l of k with the newest pair in slot `newest`. */
static inline int lp_slot(int m, int k, int newest, int l)
{
    return ((newest - (k - 1) + l) % m + m) % m;
}

/* The dots of the pairs into lb (memory m, k pairs, newest slot). */
static inline void lp_fill(ps_lbfgs *lb, int m, int k, int newest, int n, const double *S,
                           const double *Y, const double *g)
{
    lb->m = m;
    lb->k = k;
    lb->newest = newest;
    lb->pad_ = 0;
    for (int i = 0; i < PS_MAX_MEMORY; i++) {
        for (int j = 0; j < PS_MAX_MEMORY; j++)
            lb->sy[i][j] = lb->yy[i][j] = NAN;
        lb->sg[i] = lb->yg[i] = NAN;
    }
    for (int l = 0; l < k; l++) {
        int sl = lp_slot(m, k, newest, l);
        for (int j = 0; j < k; j++) {
            int sj = lp_slot(m, k, newest, j);
            if (l <= j)
                lb->sy[sl][sj] = lp_dot(S + l * n, Y + j * n, n);
            lb->yy[sl][sj] = lp_dot(Y + l * n, Y + j * n, n);
        }
        lb->sg[sl] = lp_dot(S + l * n, g, n);
        lb->yg[sl] = lp_dot(Y + l * n, g, n);
    }
    lb->gg = lp_dot(g, g, n);
}

#endif /* PS_TESTS_LBFGS_PAIRS_H */
