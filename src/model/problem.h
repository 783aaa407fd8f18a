/*
 * The problem as the backends see it: the validated, copied arrays of a
 * ps_problem_desc (SPEC section 1).
 */
#ifndef PS_SRC_PROBLEM_H
#define PS_SRC_PROBLEM_H

#include "persolve.h"

/* The largest sizes a problem may have (ps_problem_validate). */
#define PS_MAX_NS ((size_t)1 << 31)
#define PS_MAX_NT ((size_t)1 << 26)

struct ps_problem {
    size_t ns, nt;
    double *r;       /* [ns][3], cm */
    double *target;  /* [ns][3] */
    double *df;      /* [ns], Hz, or NULL */
    double *b1scale; /* [ns], or NULL */
    double *w;       /* [ns], or NULL */
    double *m0;      /* [ns][3], or NULL */
    double *t1;      /* [ns], s, or NULL */
    double *t2;      /* [ns], s, or NULL */
    double *g;       /* [nt][3], G/cm */
    double *b1;      /* [nt][2], G (start pulse, zeros if not given) */
    double dt;        /* s */
    double gamma_bar; /* Hz/G */
    double lambda;
    double b1_max;    /* G, or PS_B1MAX_NONE */
    ps_loss loss;
};

/* 1 if the problem has a finite b1_max. */
static inline int ps_problem_has_b1max(const ps_problem *p)
{
    return isfinite(p->b1_max);
}

#endif /* PS_SRC_PROBLEM_H */
