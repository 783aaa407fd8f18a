/*
 * Problem creation: validation of every field of a ps_problem_desc and a
 * private copy of its arrays.
 */
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
    size_t ns, nt, nc;
    PS_PROBLEM_ARRAYS(DESC_ARRAY)
    PS_PROBLEM_REALS(DESC_REAL)
    ps_loss loss;
};
#undef DESC_REAL
#undef DESC_ARRAY
_Static_assert(sizeof(struct desc_of_the_lists) == sizeof(ps_problem_desc),
               "a member of ps_problem_desc has no row in model/problem_fields.h");
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
 * Messages name an element [i][j][w] of [n / (mid width)][mid][width]
 * when mid > 1, else [i][w] of [n / width][width] (or [i]). */
static int check_array(const char *name, const double *a, size_t n, size_t mid,
                       size_t width, int rule, char *msg, size_t len)
{
    if (!a)
        return PS_CONVERGED;
    size_t i = first_nonfinite(a, n);
    if (i < n) {
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
    if (rule != PS_RULE_FINITE) {
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

int ps_problem_validate(const ps_problem_desc *d, char *msg, size_t len)
{
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
    int st;
#define CHECK(name, rows, width, channels, presence, rule, ...)               \
    if ((st = check_array(#name, d->name, PS_FIELD_COUNT(d, rows, width, channels),   \
                          PS_NC_OF(d) == 1   ? 1                                       \
                          : channels == PS_CH_INNER ? PS_NC_OF(d)                      \
                          : channels == PS_CH_OUTER ? d->rows                          \
                                                    : 1,                               \
                          width, rule, msg, len)))                                     \
        return st;
    PS_PROBLEM_ARRAYS(CHECK)
#undef CHECK
    return PS_CONVERGED;
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

void ps_problem_free(ps_problem *p)
{
    if (!p)
        return;
#define FREE(name, ...) free(p->name);
    PS_PROBLEM_ARRAYS(FREE)
#undef FREE
    free(p);
}

int ps_problem_describe(const ps_problem *p, ps_problem_desc *d)
{
    if (!p || !d)
        return PS_ERR_NULL;
    d->ns = p->ns;
    d->nt = p->nt;
    d->nc = p->nc;
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
