/*
 * Entry points: ps_eval, ps_simulate and solve_persistent, and the backend
 * choice. On both backends solve_persistent is an asynchronous run
 * (opt/run.c) waited for; on the GPU that run launches the persistent kernel.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cuda/gpu.h"
#include "common/log.h"
#include "opt/driver.h"
#include "cpu/objective.h"
#include "model/problem.h"
#include "opt/run.h"

int ps_check_x(const ps_options *o, const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        PS_RETURN_ERROR_IF(o, !isfinite(x[i]), PS_ERR_NONFINITE,
                           "x[%zu] is %s", i, isnan(x[i]) ? "NaN" : "Inf");
    return PS_CONVERGED;
}

int ps_take_options(const ps_options *o, ps_options *out)
{
    if (o)
        *out = *o;
    else
        ps_options_default(out);
    return ps_options_validate(out);
}

int ps_pick_backend(const ps_options *o, ps_backend *use, int *fell_back)
{
    *fell_back = 0;
    if (o->backend == PS_BACKEND_CPU) {
        *use = PS_BACKEND_CPU;
        return PS_CONVERGED;
    }
    int st = ps_gpu_usable(o);
    if (st == PS_CONVERGED) {
        *use = PS_BACKEND_GPU;
        return PS_CONVERGED;
    }
    if (o->backend == PS_BACKEND_GPU)
        return st;
    ps_log(o, PS_LOG_INFO, __FILE__, __LINE__,
           "backend auto: no usable GPU (%s), running on the CPU",
           ps_strerror(st));
    *use = PS_BACKEND_CPU;
    *fell_back = 1;
    return PS_CONVERGED;
}

int ps_gpu_can_fall_back(int st)
{
    return st == PS_ERR_NO_GPU || st == PS_ERR_GPU_UNSUPPORTED ||
           st == PS_ERR_GPU_MEMORY || st == PS_ERR_NOT_IMPLEMENTED;
}

/* One evaluation on the chosen backend: f, and grad and m where not NULL. */
static int evaluate_once(const ps_problem *p, const ps_options *o,
                         const double *x, double *f, double *grad, double *m)
{
    ps_options opt;
    int st = ps_take_options(o, &opt);
    if (st)
        return st;
    if ((st = ps_check_x(&opt, x, 2 * p->nt)))
        return st;
    ps_backend use;
    int fell_back;
    if ((st = ps_pick_backend(&opt, &use, &fell_back)))
        return st;
    if (use == PS_BACKEND_GPU) {
        st = ps_gpu_eval(p, &opt, x, f, grad, m);
        if (!(opt.backend == PS_BACKEND_AUTO && ps_gpu_can_fall_back(st)))
            return st;
    }
    return ps_objective_cpu_pulse(p, opt.precision, opt.threads, x, f, grad, m);
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

void ps_cpu_device(const ps_options *o, char *buf, size_t len)
{
    int nthreads = 1;
#ifdef _OPENMP
    nthreads = o->threads > 0 ? o->threads : omp_get_max_threads();
#endif
    snprintf(buf, len, "cpu: %d thread%s, %s", nthreads,
             nthreads == 1 ? "" : "s",
             o->precision == PS_PRECISION_SINGLE ? "float32 spins"
                                                 : "float64 spins");
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
            st = ps_check_x(&opt, x, 2 * p->nt);
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
