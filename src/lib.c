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
 * at x with the steps the RF mask holds set to zero. */
static int evaluate_once(const ps_problem *p, const ps_options *o,
                         const double *x, double *f, double *grad, double *m)
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
    st = PS_ERR_NO_GPU;
    if (use == PS_BACKEND_GPU)
        st = ps_gpu_eval(p, &opt, x, f, grad, m);
    if (use != PS_BACKEND_GPU || (opt.backend == PS_BACKEND_AUTO && ps_gpu_can_fall_back(st)))
        st = ps_objective_cpu_pulse(p, opt.precision, opt.threads, x, f, grad, m);
    free(held);
    return st;
}

int ps_eval(const ps_problem *p, const ps_options *o, const double *x,
            double *f, double *grad)
{
    if (!p || !x || !f)
        return PS_ERR_NULL;
    return evaluate_once(p, o, x, f, grad, NULL);
}

int ps_simulate(const ps_problem *p, const ps_options *o, const double *x,
                double *m)
{
    double f;
    if (!p || !x || !m)
        return PS_ERR_NULL;
    return evaluate_once(p, o, x, &f, NULL, m);
}

int ps_constraints(const ps_problem *p, const double *x, double *peak, double *sar)
{
    if (!p || !x)
        return PS_ERR_NULL;
    const size_t nx = ps_problem_nx(p);
    for (size_t i = 0; i < nx; i++)
        if (!isfinite(x[i]))
            return PS_ERR_NONFINITE;
    if (peak)
        ps_peak_values(p->nc, p->nt, x, peak);
    if (sar && p->nq) {
        const ps_sar S = ps_problem_sar(p);
        ps_sar_values(&S, p->nt, x, sar);
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
