/*
 * The CPU driver of the solver state machine (lbfgs_math.h) over any
 * smooth objective: it does each phase's O(n) vector work; the scalar
 * decisions are the shared ones the GPU megakernel takes too.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "minimize.h"
#include "options.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct cpu_run {
    const ps_minimizer *mz;
    const ps_options *o;
    size_t n;             /* 2 nt */
    int m;                /* memory */
    double *x, *g;        /* [n] current point and gradient (optimizer variables) */
    double *xt, *gt;      /* [n] trial point and gradient */
    double *d;            /* [n] search direction */
    double *S, *Y;        /* [m][n] pairs s_i = x_{i+1} - x_i, y_i = g_{i+1} - g_i */
    double *red;          /* [4m+1] batched dots */
    ps_result *r;
    size_t hist_cap;
    double t0;
} cpu_run;

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* Record a history row and report progress; returns nonzero to cancel. */
static int record(cpu_run *c, const ps_solver *s)
{
    ps_result *r = c->r;
    if (r->history_len == c->hist_cap) {
        size_t cap = c->hist_cap ? 2 * c->hist_cap : 64;
        ps_progress *h = realloc(r->history, cap * sizeof *h);
        if (!h)
            return -1;
        r->history = h;
        c->hist_cap = cap;
    }
    ps_progress *row = &r->history[r->history_len++];
    row->iteration = s->iteration;
    row->f = s->f;
    row->gnorm = s->gnorm;
    row->step = s->iteration > 0 ? s->step : 0.0;
    row->evaluations = s->evaluations;
    row->seconds = now_seconds() - c->t0;
    if (c->o->progress)
        return c->o->progress(c->o->progress_user, row) ? 1 : 0;
    return 0;
}

/*
 * The batched reduction after an accepted step (PS_RED_LEN layout of
 * lbfgs_math.h): one pass over the vectors, sums in index order.
 */
static void batched_dots(cpu_run *c, int ns)
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

int ps_minimize_cpu(const ps_minimizer *mz, const ps_options *o, double *xio,
                    ps_result *r)
{
    cpu_run c = {0};
    /* the outcome fields; backend and device are the caller's */
    r->history = NULL;
    r->history_len = 0;
    r->iterations = r->evaluations = 0;
    r->f = r->gnorm = NAN;
    c.mz = mz;
    c.o = o;
    c.n = mz->n;
    c.m = o->memory;
    c.r = r;
    c.t0 = now_seconds();
    size_t n = c.n;
    c.x = malloc(n * sizeof(double));
    c.g = malloc(n * sizeof(double));
    c.xt = malloc(n * sizeof(double));
    c.gt = malloc(n * sizeof(double));
    c.d = malloc(n * sizeof(double));
    c.S = calloc((size_t)c.m * n, sizeof(double));
    c.Y = calloc((size_t)c.m * n, sizeof(double));
    c.red = malloc(PS_RED_LEN(c.m) * sizeof(double));
    int st = PS_CONVERGED;
    if (!c.x || !c.g || !c.xt || !c.gt || !c.d || !c.S || !c.Y || !c.red) {
        st = PS_ERR_NO_MEMORY;
        goto done;
    }
    memcpy(c.x, xio, n * sizeof(double));

    ps_solver s;
    ps_solver_init(&s, o->memory, o->past, o->max_linesearch,
                   o->max_iterations, o->max_evaluations, o->gtol, o->ftol,
                   o->c1, o->c2, o->time_limit, ps_options_fnoise(o));
    double ft = 0.0;
    while (s.phase != PS_PHASE_DONE) {
        switch (s.phase) {
        case PS_PHASE_START: { /* ---- evaluate at x0 ---- */
            double f;
            st = mz->eval(mz->ctx, c.x, &f, c.g);
            if (st)
                goto done;
            ps_solver_start(&s, f, dot(c.g, c.g, n));
            if (record(&c, &s))
                ps_solver_finish(&s, PS_ST_CANCELLED);
            break;
        }
        case PS_PHASE_DIRECTION: { /* ---- direction ---- */
            ps_solver_direction(&s, now_seconds() - c.t0);
            if (s.phase != PS_PHASE_TRIAL)
                break;
            const ps_lbfgs *lb = &s.lb;
            for (size_t i = 0; i < n; i++)
                c.d[i] = lb->cg * c.g[i];
            for (int j = 0; j < c.m; j++) {
                const double *sj = c.S + (size_t)j * n, *yj = c.Y + (size_t)j * n;
                double a = lb->cs[j], b = lb->cy[j];
                if (a == 0.0 && b == 0.0)
                    continue;
                for (size_t i = 0; i < n; i++)
                    c.d[i] += a * sj[i] + b * yj[i];
            }
            break;
        }
        case PS_PHASE_TRIAL: { /* ---- line search trial ---- */
            double alpha = s.ls.alpha;
            for (size_t i = 0; i < n; i++)
                c.xt[i] = c.x[i] + alpha * c.d[i];
            st = mz->eval(mz->ctx, c.xt, &ft, c.gt);
            if (st)
                goto done;
            double dg = dot(c.gt, c.d, n);
            ps_solver_trial(&s, ft, dg);
            if (s.phase == PS_PHASE_UPDATE && mz->on_accept)
                mz->on_accept(mz->ctx_accept, &s.ls, ft, dg);
            break;
        }
        case PS_PHASE_UPDATE: { /* ---- accept, new pair, batched dots ---- */
            int ns = ps_lbfgs_next_slot(&s.lb);
            double *sn = c.S + (size_t)ns * n, *yn = c.Y + (size_t)ns * n;
            for (size_t i = 0; i < n; i++) {
                sn[i] = c.xt[i] - c.x[i];
                yn[i] = c.gt[i] - c.g[i];
            }
            double *t = c.x;
            c.x = c.xt;
            c.xt = t;
            t = c.g;
            c.g = c.gt;
            c.gt = t;
            batched_dots(&c, ns);
            ps_solver_update(&s, ft, c.red);
            if (record(&c, &s) && s.phase != PS_PHASE_DONE)
                ps_solver_finish(&s, PS_ST_CANCELLED);
            break;
        }
        default:
            ps_solver_finish(&s, PS_ST_ERR_OBJECTIVE);
            break;
        }
    }
    st = s.status;
    r->iterations = s.iteration;
    r->evaluations = s.evaluations;
    r->f = s.f;
    r->gnorm = s.gnorm;
    memcpy(xio, c.x, n * sizeof(double));
done:
    r->status = st;
    r->seconds = now_seconds() - c.t0;
    free(c.x);
    free(c.g);
    free(c.xt);
    free(c.gt);
    free(c.d);
    free(c.S);
    free(c.Y);
    free(c.red);
    return st;
}

