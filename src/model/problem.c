/*
 * Problem creation: validation of every field of a ps_problem_desc and a
 * private copy of its arrays.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/problem.h"

void ps_problem_desc_init(ps_problem_desc *d)
{
    if (!d)
        return;
    memset(d, 0, sizeof *d);
    d->gamma_bar = PS_GAMMA_BAR_DEFAULT;
    d->loss = PS_LOSS_FULL;
    d->b1_max = PS_B1MAX_NONE;
}

static int fail(char *msg, size_t len, int status, const char *fmt, ...)
{
    if (msg && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, len, fmt, ap);
        va_end(ap);
    }
    return status;
}

/* First non-finite element of a[n], or n. */
static size_t first_nonfinite(const double *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i]))
            return i;
    return n;
}

/* Checks an optional array of n values: finite, and >= lo (or > lo if strict). */
static int check_array(const char *name, const double *a, size_t n,
                       size_t width, int sign_status, double lo, int strict,
                       char *msg, size_t len)
{
    if (!a)
        return PS_CONVERGED;
    size_t i = first_nonfinite(a, n);
    if (i < n) {
        if (width > 1)
            return fail(msg, len, PS_ERR_NONFINITE, "%s[%zu][%zu] is %s", name,
                        i / width, i % width, isnan(a[i]) ? "NaN" : "Inf");
        return fail(msg, len, PS_ERR_NONFINITE, "%s[%zu] is %s", name, i,
                    isnan(a[i]) ? "NaN" : "Inf");
    }
    if (sign_status) {
        for (i = 0; i < n; i++) {
            if (strict ? !(a[i] > lo) : !(a[i] >= lo))
                return fail(msg, len, sign_status, "%s[%zu] = %g must be %s %g",
                            name, i, a[i], strict ? ">" : ">=", lo);
        }
    }
    return PS_CONVERGED;
}

int ps_problem_validate(const ps_problem_desc *d, char *msg, size_t len)
{
    if (msg && len)
        msg[0] = '\0';
    if (!d)
        return fail(msg, len, PS_ERR_NULL, "problem description is NULL");
    if (d->ns == 0 || d->nt == 0)
        return fail(msg, len, PS_ERR_SIZE, "%s is 0", d->ns == 0 ? "ns" : "nt");
    if (d->ns > PS_MAX_NS)
        return fail(msg, len, PS_ERR_SIZE, "ns = %zu is too large (at most 2^31 spins)", d->ns);
    if (d->nt > PS_MAX_NT)
        return fail(msg, len, PS_ERR_SIZE, "nt = %zu is too large (at most 2^26 time steps)", d->nt);
    if (!d->r)
        return fail(msg, len, PS_ERR_NULL, "r (spin positions) is NULL");
    if (!d->target)
        return fail(msg, len, PS_ERR_NULL, "target is NULL");
    if (!d->g)
        return fail(msg, len, PS_ERR_NULL, "g (gradient waveform) is NULL");
    if (!isfinite(d->dt))
        return fail(msg, len, PS_ERR_NONFINITE, "dt is %s",
                    isnan(d->dt) ? "NaN" : "Inf");
    if (!(d->dt > 0.0))
        return fail(msg, len, PS_ERR_DT, "dt = %g must be > 0", d->dt);
    if (!isfinite(d->gamma_bar))
        return fail(msg, len, PS_ERR_NONFINITE, "gamma_bar is not finite");
    if (d->gamma_bar < 0.0)
        return fail(msg, len, PS_ERR_DT, "gamma_bar = %g must be > 0 (0: default)",
                    d->gamma_bar);
    if (!isfinite(d->lambda))
        return fail(msg, len, PS_ERR_NONFINITE, "lambda is not finite");
    if (d->lambda < 0.0)
        return fail(msg, len, PS_ERR_NEGATIVE, "lambda = %g must be >= 0",
                    d->lambda);
    if ((int)d->loss < 0 || (int)d->loss > 3)
        return fail(msg, len, PS_ERR_LOSS, "loss = %d is not a loss type",
                    (int)d->loss);
    if (isnan(d->b1_max) || !(d->b1_max > 0.0))
        return fail(msg, len, PS_ERR_B1MAX, "b1_max = %g must be > 0",
                    d->b1_max);
    size_t ns = d->ns, nt = d->nt;
    int st;
    if ((st = check_array("r", d->r, 3 * ns, 3, 0, 0, 0, msg, len)) ||
        (st = check_array("target", d->target, 3 * ns, 3, 0, 0, 0, msg, len)) ||
        (st = check_array("df", d->df, ns, 1, 0, 0, 0, msg, len)) ||
        (st = check_array("b1scale", d->b1scale, ns, 1, 0, 0, 0, msg, len)) ||
        (st = check_array("w", d->w, ns, 1, PS_ERR_NEGATIVE, 0.0, 0, msg, len)) ||
        (st = check_array("m0", d->m0, 3 * ns, 3, 0, 0, 0, msg, len)) ||
        (st = check_array("t1", d->t1, ns, 1, PS_ERR_RELAXATION, 0.0, 1, msg, len)) ||
        (st = check_array("t2", d->t2, ns, 1, PS_ERR_RELAXATION, 0.0, 1, msg, len)) ||
        (st = check_array("g", d->g, 3 * nt, 3, 0, 0, 0, msg, len)) ||
        (st = check_array("b1", d->b1, 2 * nt, 2, 0, 0, 0, msg, len)))
        return st;
    return PS_CONVERGED;
}

static double *dup_array(const double *a, size_t n, int *oom)
{
    if (!a)
        return NULL;
    double *c = malloc(n * sizeof *c);
    if (!c) {
        *oom = 1;
        return NULL;
    }
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
    size_t ns = d->ns, nt = d->nt;
    int oom = 0;
    p->ns = ns;
    p->nt = nt;
    p->r = dup_array(d->r, 3 * ns, &oom);
    p->target = dup_array(d->target, 3 * ns, &oom);
    p->df = dup_array(d->df, ns, &oom);
    p->b1scale = dup_array(d->b1scale, ns, &oom);
    p->w = dup_array(d->w, ns, &oom);
    p->m0 = dup_array(d->m0, 3 * ns, &oom);
    p->t1 = dup_array(d->t1, ns, &oom);
    p->t2 = dup_array(d->t2, ns, &oom);
    p->g = dup_array(d->g, 3 * nt, &oom);
    if (d->b1) {
        p->b1 = dup_array(d->b1, 2 * nt, &oom);
    } else {
        p->b1 = calloc(2 * nt, sizeof *p->b1);
        oom |= !p->b1;
    }
    p->dt = d->dt;
    p->gamma_bar = d->gamma_bar > 0.0 ? d->gamma_bar : PS_GAMMA_BAR_DEFAULT;
    p->lambda = d->lambda;
    p->b1_max = d->b1_max;
    p->loss = d->loss;
    if (oom) {
        ps_problem_free(p);
        return PS_ERR_NO_MEMORY;
    }
    *out = p;
    return PS_CONVERGED;
}

void ps_problem_free(ps_problem *p)
{
    if (!p)
        return;
    free(p->r);
    free(p->target);
    free(p->df);
    free(p->b1scale);
    free(p->w);
    free(p->m0);
    free(p->t1);
    free(p->t2);
    free(p->g);
    free(p->b1);
    free(p);
}

int ps_problem_describe(const ps_problem *p, ps_problem_desc *d)
{
    if (!p || !d)
        return PS_ERR_NULL;
    d->ns = p->ns;
    d->nt = p->nt;
    d->r = p->r;
    d->target = p->target;
    d->df = p->df;
    d->b1scale = p->b1scale;
    d->w = p->w;
    d->m0 = p->m0;
    d->t1 = p->t1;
    d->t2 = p->t2;
    d->g = p->g;
    d->b1 = p->b1;
    d->dt = p->dt;
    d->gamma_bar = p->gamma_bar;
    d->lambda = p->lambda;
    d->loss = p->loss;
    d->b1_max = p->b1_max;
    return PS_CONVERGED;
}

int ps_problem_x0(const ps_problem *p, double *x)
{
    if (!p || !x)
        return PS_ERR_NULL;
    for (size_t k = 0; k < p->nt; k++) {
        x[k] = p->b1[2 * k];
        x[p->nt + k] = p->b1[2 * k + 1];
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
