/*
 * Public entry points: ps_eval, ps_simulate and solve_persistent (on both
 * backends an asynchronous run (opt/run.c) waited for; on the GPU that run
 * launches the persistent kernel), results, loss names and build
 * information.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "cpu/objective.h"
#include "cuda/gpu.h"
#include "model/constraints.h"
#include "model/design.h"
#include "model/problem.h"
#include "opt/backend.h"
#include "opt/run.h"
#include "ps_config.h"

/* One evaluation on the chosen backend: f, and grad and m where not NULL,
 * at x with the steps the RF mask holds set to zero. With grad_g (dF/dG,
 * then m is NULL) the CPU's alone: the GPU does not compute it yet. */
static int evaluate_once(const ps_problem *p, const ps_options *o,
                         const double *x, double *f, double *grad, double *m,
                         double *grad_g)
{
    ps_options opt;
    int st = ps_take_options(o, &opt);
    if (st)
        return st;
    const size_t nx = ps_problem_nx(p);
    if ((st = ps_check_x(&opt, x, nx)))
        return st;
    ps_backend use;
    int fell_back;
    if ((st = ps_pick_backend(&opt, &use, &fell_back)))
        return st;
    double *held = NULL;
    if (p->rf_mask) { /* the pulse's held steps are zero whatever x says */
        if (!(held = malloc(nx * sizeof *held)))
            return PS_ERR_NO_MEMORY;
        memcpy(held, x, nx * sizeof *held);
        ps_design_hold(p, held);
        x = held;
    }
    st = PS_ERR_NOT_IMPLEMENTED;
    if (use == PS_BACKEND_GPU && !grad_g)
        st = ps_gpu_eval(p, &opt, x, f, grad, m);
    if (use != PS_BACKEND_GPU || (opt.backend == PS_BACKEND_AUTO && ps_gpu_can_fall_back(st))) {
        if (grad_g) {
            double *g = grad ? grad : malloc(nx * sizeof *g);
            st = g ? ps_objective_cpu_pulse_g(p, opt.precision, opt.threads, x, f, g, grad_g)
                   : PS_ERR_NO_MEMORY;
            if (g != grad)
                free(g);
        } else {
            st = ps_objective_cpu_pulse(p, opt.precision, opt.threads, x, f, grad, m);
        }
    }
    free(held);
    return st;
}

int ps_eval(const ps_problem *p, const ps_options *o, const double *x,
            double *f, double *grad)
{
    if (!p || !x || !f)
        return PS_ERR_NULL;
    return evaluate_once(p, o, x, f, grad, NULL, NULL);
}

int ps_eval_g(const ps_problem *p, const ps_options *o, const double *x, double *f,
              double *grad, double *grad_g)
{
    if (!p || !x || !f || !grad_g)
        return PS_ERR_NULL;
    return evaluate_once(p, o, x, f, grad, NULL, grad_g);
}

int ps_simulate(const ps_problem *p, const ps_options *o, const double *x,
                double *m)
{
    double f;
    if (!p || !x || !m)
        return PS_ERR_NULL;
    return evaluate_once(p, o, x, &f, NULL, m, NULL);
}

/* The checks of the constraints' functions: p and x given, x[nx] finite. */
static int check_point(const ps_problem *p, const double *x)
{
    if (!p || !x)
        return PS_ERR_NULL;
    const size_t nx = ps_problem_nx(p);
    for (size_t i = 0; i < nx; i++)
        if (!isfinite(x[i]))
            return PS_ERR_NONFINITE;
    return PS_CONVERGED;
}

int ps_constraints(const ps_problem *p, const double *x, double *peak, double *sar)
{
    int st = check_point(p, x);
    if (st)
        return st;
    if (peak)
        ps_peak_values(p->nc, p->nt, x, peak);
    if (sar && p->nq) {
        const ps_sar S = ps_problem_sar(p);
        ps_sar_values(&S, p->nt, x, sar);
    }
    return PS_CONVERGED;
}

int ps_gradient_constraints(const ps_problem *p, const double *x, double gpeak[3],
                            double slew[3], double gend[3])
{
    int st = check_point(p, x);
    if (st)
        return st;
    for (size_t a = 0, i = 0; a < 3; a++) {
        /* a designed axis's waveform from x (the i-th after the pulse), else p's */
        const int designed = p->design_g >> a & 1u;
        const double *g = designed ? x + PS_X_G(p->nc, p->nt, i++, 0) : p->g + a;
        double v[3];
        ps_gradient_values(p->nt, p->dt, g, designed ? 1 : 3, v);
        if (gpeak)
            gpeak[a] = v[0];
        if (slew)
            slew[a] = v[1];
        if (gend)
            gend[a] = v[2];
    }
    return PS_CONVERGED;
}

/* A solve: an asynchronous run on the chosen backend, waited for. */
static int solve_wait(const ps_problem *p, const ps_options *o, double *x,
                      ps_backend use, int fell_back, ps_result *r)
{
    ps_run *run;
    int st = use == PS_BACKEND_GPU ? ps_run_start_gpu(p, o, x, &run)
                                   : ps_run_start_cpu(p, o, x, fell_back, &run);
    if (st) {
        r->status = st;
        return st;
    }
    st = ps_run_wait(run, -1.0, r, x);
    ps_run_free(run);
    return st;
}

int solve_persistent(const ps_problem *p, const ps_options *o, double *x,
                     ps_result *r)
{
    if (!r)
        return PS_ERR_NULL;
    memset(r, 0, sizeof *r);
    ps_options opt;
    int st = PS_ERR_NULL;
    if (p && x) {
        st = ps_take_options(o, &opt);
        if (!st)
            st = ps_check_x(&opt, x, ps_problem_nx(p));
    }
    ps_backend use = PS_BACKEND_CPU;
    if (!st)
        st = ps_pick_backend(&opt, &use, &r->fell_back);
    if (st) {
        r->status = st;
        return st;
    }
    r->backend = use;
    if (use == PS_BACKEND_GPU) {
        st = solve_wait(p, &opt, x, PS_BACKEND_GPU, 0, r);
        if (!(opt.backend == PS_BACKEND_AUTO && ps_gpu_can_fall_back(st)))
            return st;
        ps_log(&opt, PS_LOG_WARNING, __FILE__, __LINE__,
               "backend auto: GPU solve unavailable (%s), running on the CPU",
               ps_strerror(st));
        ps_result_free(r);
        memset(r, 0, sizeof *r);
        r->fell_back = 1;
    }
    r->backend = PS_BACKEND_CPU;
    return solve_wait(p, &opt, x, PS_BACKEND_CPU, r->fell_back, r);
}

void ps_result_free(ps_result *r)
{
    if (!r)
        return;
    free(r->history);
    r->history = NULL;
    r->history_len = 0;
}

static const char *const loss_names[] = {"full", "xy", "mls", "z"};

int ps_loss_parse(const char *name, ps_loss *out)
{
    if (!name || !out)
        return PS_ERR_NULL;
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, loss_names[i]) == 0) {
            *out = (ps_loss)i;
            return PS_CONVERGED;
        }
    }
    return PS_ERR_LOSS;
}

const char *ps_loss_name(ps_loss loss)
{
    if ((int)loss < 0 || (int)loss > 3)
        return NULL;
    return loss_names[loss];
}

static const char axis_letters[3] = {'x', 'y', 'z'};

int ps_design_g_parse(const char *name, unsigned *axes)
{
    if (!name || !axes)
        return PS_ERR_NULL;
    unsigned bits = 0;
    size_t a = 0; /* the next axis a letter may name: each once, in order */
    for (const char *c = name; *c; c++) {
        while (a < 3 && *c != axis_letters[a])
            a++;
        if (a == 3)
            return PS_ERR_GRADIENT;
        bits |= 1u << a++;
    }
    if (!bits)
        return PS_ERR_GRADIENT;
    *axes = bits;
    return PS_CONVERGED;
}

int ps_design_g_name(unsigned axes, char *buf, size_t len)
{
    if (!buf)
        return PS_ERR_NULL;
    if (len < 4 || axes & ~(unsigned)(PS_AXIS_X | PS_AXIS_Y | PS_AXIS_Z))
        return len < 4 ? PS_ERR_SIZE : PS_ERR_GRADIENT;
    size_t n = 0;
    for (size_t a = 0; a < 3; a++)
        if (axes >> a & 1u)
            buf[n++] = axis_letters[a];
    buf[n] = '\0';
    return PS_CONVERGED;
}

int ps_have_cuda(void)
{
    return PS_HAVE_CUDA;
}

int ps_have_openmp(void)
{
    return PS_HAVE_OPENMP;
}

int ps_gpu_count(void)
{
    return ps_gpu_device_count();
}

int ps_gpu_describe(int index, char *buf, size_t len)
{
    if (!buf || len == 0)
        return PS_ERR_NULL;
    return ps_gpu_device_describe(index, buf, len);
}
