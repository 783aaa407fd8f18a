/*
 * The CPU driver of the solver state machine (opt/solver.h) over any
 * smooth objective: it does each phase's O(n) vector work; the scalar
 * decisions are the shared ones the GPU megakernel takes too.
 */
#include <stdlib.h>
#include <string.h>
#include "common/clock.h"
#include "opt/driver.h"
#include "opt/options.h"

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

void ps_driver_clock_start(ps_driver *c)
{
    if (c->t0 < 0.0)
        c->t0 = ps_monotonic_seconds();
}

void ps_driver_clock_stop(ps_driver *c)
{
    if (c->t0 >= 0.0) {
        c->elapsed += ps_monotonic_seconds() - c->t0;
        c->t0 = -1.0;
    }
}

double ps_driver_seconds(const ps_driver *c)
{
    return c->elapsed + (c->t0 >= 0.0 ? ps_monotonic_seconds() - c->t0 : 0.0);
}

int ps_driver_init(ps_driver *c, const ps_minimizer *mz, const ps_options *o,
                   const double *x0)
{
    memset(c, 0, sizeof *c);
    c->mz = *mz;
    c->o = o;
    c->n = mz->n;
    c->m = o->memory;
    c->t0 = -1.0;
    size_t n = c->n;
    c->x = malloc(n * sizeof(double));
    c->g = calloc(n, sizeof(double));
    c->xt = calloc(n, sizeof(double));
    c->gt = calloc(n, sizeof(double));
    c->d = calloc(n, sizeof(double));
    c->S = calloc((size_t)c->m * n, sizeof(double));
    c->Y = calloc((size_t)c->m * n, sizeof(double));
    c->red = calloc(PS_RED_LEN(c->m), sizeof(double));
    if (!c->x || !c->g || !c->xt || !c->gt || !c->d || !c->S || !c->Y ||
        !c->red) {
        ps_driver_free(c);
        return PS_ERR_NO_MEMORY;
    }
    memcpy(c->x, x0, n * sizeof(double));
    ps_solver_init(&c->s, o->memory, o->past, o->max_linesearch,
                   o->max_iterations, o->max_evaluations, o->gtol, o->ftol,
                   o->c1, o->c2, o->time_limit, ps_options_fnoise(o));
    if (mz->constrained)
        ps_solver_set_rounds(&c->s, ps_options_max_rounds(o), ps_options_constraint_tol(o),
                             mz->mu0 > 0.0 ? mz->mu0 : ps_options_penalty_mu(o));
    return PS_CONVERGED;
}

void ps_driver_free(ps_driver *c)
{
    free(c->x);
    free(c->g);
    free(c->xt);
    free(c->gt);
    free(c->d);
    free(c->S);
    free(c->Y);
    free(c->red);
    free(c->history);
    c->x = c->g = c->xt = c->gt = c->d = c->S = c->Y = c->red = NULL;
    c->history = NULL;
    c->history_len = c->hist_cap = 0;
}

void ps_driver_cancel(ps_driver *c)
{
    if (!ps_driver_done(c))
        ps_solver_finish(&c->s, PS_ST_CANCELLED);
}

int ps_driver_history_reserve(ps_driver *c, size_t rows)
{
    if (rows <= c->hist_cap)
        return PS_CONVERGED;
    size_t cap = c->hist_cap ? 2 * c->hist_cap : 64;
    if (cap < rows)
        cap = rows;
    ps_progress *h = realloc(c->history, cap * sizeof *h);
    if (!h)
        return PS_ERR_NO_MEMORY;
    c->history = h;
    c->hist_cap = cap;
    return PS_CONVERGED;
}

/* Record a history row and report progress; returns 1 to cancel (the
 * progress callback asked for it), -1 when the history cannot grow. */
static int record(ps_driver *c)
{
    const ps_solver *s = &c->s;
    if (ps_driver_history_reserve(c, c->history_len + 1))
        return -1;
    ps_progress *row = &c->history[c->history_len++];
    row->iteration = s->iteration;
    row->f = s->f;
    row->gnorm = s->gnorm;
    row->step = s->iteration > 0 ? s->step : 0.0;
    row->evaluations = s->evaluations;
    row->seconds = ps_driver_seconds(c);
    row->round = ps_solver_row_round(s);
    row->reserved = 0;
    if (c->o->progress)
        return c->o->progress(c->o->progress_user, row) ? 1 : 0;
    return 0;
}

/*
 * The batched reduction after an accepted step (PS_RED_LEN layout of
 * opt/solver.h): one pass over the vectors, sums in index order.
 */
static void batched_dots(ps_driver *c, int ns)
{
    size_t n = c->n;
    int m = c->m;
    const double *yn = c->Y + (size_t)ns * n;
    for (int i = 0; i < m; i++) {
        const double *si = c->S + (size_t)i * n, *yi = c->Y + (size_t)i * n;
        c->red[i] = dot(si, yn, n);
        c->red[m + i] = dot(yi, yn, n);
        c->red[2 * m + i] = dot(si, c->g, n);
        c->red[3 * m + i] = dot(yi, c->g, n);
    }
    c->red[4 * m] = dot(c->g, c->g, n);
}

/* An objective error: the solve ends with it. */
static void fail(ps_driver *c, int st)
{
    c->error = st;
    ps_solver_finish(&c->s, st);
}

/* A history row was recorded (rc of record()): out of memory ends the
 * solve with that error, a cancel request ends a solve still running. */
static void after_record(ps_driver *c, int rc)
{
    if (rc < 0)
        fail(c, PS_ERR_NO_MEMORY);
    else if (rc > 0 && c->s.phase != PS_PHASE_DONE)
        ps_solver_finish(&c->s, PS_ST_CANCELLED);
}

void ps_driver_step(ps_driver *c)
{
    ps_solver *s = &c->s;
    const ps_minimizer *mz = &c->mz;
    size_t n = c->n;
    switch (s->phase) {
    case PS_PHASE_START: { /* ---- evaluate at x0 (or at x for a new round) ---- */
        double f, viol = 0.0;
        int st = mz->eval(mz->ctx, c->x, s->mu, &f, c->g, &viol);
        if (st) {
            fail(c, st);
            break;
        }
        const int row = !s->restart; /* a new round's start has no row of its own */
        ps_solver_start(s, f, dot(c->g, c->g, n), viol);
        if (row)
            after_record(c, record(c));
        break;
    }
    case PS_PHASE_DIRECTION: { /* ---- direction ---- */
        ps_solver_direction(s, ps_driver_seconds(c));
        if (s->phase != PS_PHASE_TRIAL)
            break;
        const ps_lbfgs *lb = &s->lb;
        for (size_t i = 0; i < n; i++)
            c->d[i] = lb->cg * c->g[i];
        for (int j = 0; j < c->m; j++) {
            const double *sj = c->S + (size_t)j * n, *yj = c->Y + (size_t)j * n;
            double a = lb->cs[j], b = lb->cy[j];
            if (a == 0.0 && b == 0.0)
                continue;
            for (size_t i = 0; i < n; i++)
                c->d[i] += a * sj[i] + b * yj[i];
        }
        break;
    }
    case PS_PHASE_TRIAL: { /* ---- line search trial ---- */
        double alpha = s->ls.alpha;
        for (size_t i = 0; i < n; i++)
            c->xt[i] = ps_trial_coord(c->x[i], alpha, c->d[i]);
        double viol = 0.0;
        int st = mz->eval(mz->ctx, c->xt, s->mu, &c->ft, c->gt, &viol);
        if (st) {
            fail(c, st);
            break;
        }
        double dg = dot(c->gt, c->d, n);
        ps_solver_trial(s, c->ft, dg, viol);
        if (s->phase == PS_PHASE_UPDATE && mz->on_accept)
            mz->on_accept(mz->ctx_accept, &s->ls, c->ft, dg);
        break;
    }
    case PS_PHASE_UPDATE: { /* ---- accept, new pair, batched dots ---- */
        int ns = ps_lbfgs_next_slot(&s->lb);
        double *sn = c->S + (size_t)ns * n, *yn = c->Y + (size_t)ns * n;
        for (size_t i = 0; i < n; i++) {
            sn[i] = c->xt[i] - c->x[i];
            yn[i] = c->gt[i] - c->g[i];
        }
        double *t = c->x;
        c->x = c->xt;
        c->xt = t;
        t = c->g;
        c->g = c->gt;
        c->gt = t;
        batched_dots(c, ns);
        ps_solver_update(s, c->ft, c->red);
        after_record(c, record(c));
        break;
    }
    default:
        ps_solver_finish(s, PS_ST_ERR_OBJECTIVE);
        break;
    }
}

int ps_driver_outcome(const ps_driver *c, ps_result *r, double *x)
{
    r->seconds = ps_driver_seconds(c);
    /* an objective error ends the solve with its status, and x, f and the
     * counts still describe the last accepted point (x0 if none) */
    r->status = c->error ? c->error : c->s.status;
    r->iterations = c->s.iteration;
    r->evaluations = c->s.evaluations;
    r->rounds = c->s.evaluations > 0 ? c->s.round + 1 : 0;
    r->mu = c->s.constrained ? c->s.mu : 0.0;
    r->violation = c->s.constrained ? c->s.viol : 0.0;
    if (c->history_len > 0) {
        r->f = c->s.f;
        r->gnorm = c->s.gnorm;
    } else { /* cancelled before the first evaluation */
        r->f = r->gnorm = NAN;
    }
    if (x)
        memcpy(x, c->x, c->n * sizeof(double));
    return r->status;
}

int ps_minimize_cpu(const ps_minimizer *mz, const ps_options *o, double *xio,
                    ps_result *r)
{
    /* the outcome fields; backend and device are the caller's */
    r->history = NULL;
    r->history_len = 0;
    r->iterations = r->evaluations = 0;
    r->f = r->gnorm = NAN;
    ps_driver c;
    int st = ps_driver_init(&c, mz, o, xio);
    if (st) {
        r->status = st;
        r->seconds = 0.0;
        return st;
    }
    ps_driver_clock_start(&c);
    while (!ps_driver_done(&c))
        ps_driver_step(&c);
    ps_driver_clock_stop(&c);
    st = ps_driver_outcome(&c, r, xio);
    r->history = c.history; /* handed over */
    r->history_len = c.history_len;
    c.history = NULL;
    ps_driver_free(&c);
    return st;
}
