/*
 * The GPU backend's runners: a solve or an evaluation on a context
 * (cuda/context.cu) with the persistent kernel (cuda/kernel.cu), the
 * comparison variants (cuda/variants.cu) and the evaluation timing of
 * `persolve bench`.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/context.cuh"
#include "cuda/launch.h"

extern "C" {
#include "common/log.h"
#include "common/stats.h"
#include "cuda/gpu.h"
#include "model/design.h"
#include "model/problem.h"
}

using namespace ps_gpu;

/*
 * One run of the persistent kernel. mode MODE_SOLVE: x (optimizer
 * variables) in/out, r filled. MODE_EVAL: physical pulse x, f, grad, m.
 */
static int run_kernel(const ps_problem *p, const ps_options *o, const ps_gpu_config *cfg_in,
                      int mode, double *x, ps_result *r, double *f_out, double *g_out,
                      double *m_out)
{
    context c;
    double ms = 0.0;
    const double t_start = wall_seconds();
    const size_t n = ps_problem_nx(p);
    int st = context_create(p, o, cfg_in, mode, x, m_out != NULL, &c);
    if (st) {
        if (r)
            r->seconds = wall_seconds() - t_start;
        return st;
    }
    st = launch_persistent(&c, o, &ms);
    if (st)
        goto out;
    if (mode == MODE_EVAL) {
        CUDA_TRY(o, cudaMemcpy(f_out, c.a.eval_out, sizeof(double), cudaMemcpyDeviceToHost), PS_ERR_GPU_LAUNCH);
        if (g_out)
            CUDA_TRY(o, cudaMemcpy(g_out, c.a.g, n * sizeof(double), cudaMemcpyDeviceToHost), PS_ERR_GPU_LAUNCH);
        if (m_out)
            CUDA_TRY(o, cudaMemcpy(m_out, c.a.m_out, 3 * p->ns * sizeof(double), cudaMemcpyDeviceToHost),
                     PS_ERR_GPU_LAUNCH);
        goto out;
    }
    st = context_result(&c, o, x, r);
    r->kernel_seconds = 1e-3 * ms;
out:
    context_destroy(&c);
    if (r)
        r->seconds = wall_seconds() - t_start;
    return st;
}

/* "NAME (grid G x B, SB spins x P segments, float32)" of a solve. */
extern "C" void ps_gpu_describe_shape(const ps_gpu_config *c, int precision, char *buf, size_t len)
{
    char name[128];
    ps_gpu_device_describe(0, name, sizeof name);
    char *comma = strchr(name, ',');
    if (comma)
        *comma = '\0';
    snprintf(buf, len, "%.48s (grid %d x %d%s, %d spins x %d segments, %s)", name, c->grid, c->block,
             c->regcap ? " regcap" : "", c->sb, c->segs,
             precision == PS_PRECISION_DOUBLE ? "float64" : "float32");
}

/* ps_gpu_describe_shape of the shape a solve of p with o and cfg runs. */
static void describe_run(const ps_problem *p, const ps_options *o, const ps_gpu_config *cfg,
                         ps_result *r)
{
    ps_gpu_config used;
    ps_gpu_resolve_config(p, o, cfg, &used);
    ps_gpu_describe_shape(&used, o->precision, r->device, sizeof r->device);
}

/* A comparison variant: set up, solve, results, release. */
static int run_variant(const ps_problem *p, const ps_options *o, const ps_gpu_config *cfg,
                       int variant, double *z, ps_result *r)
{
    context c;
    double ms = 0.0, t_start = wall_seconds();
    int st = context_create(p, o, cfg, MODE_SOLVE, z, 0, &c);
    if (st) {
        r->seconds = wall_seconds() - t_start;
        return st;
    }
    st = variant == PS_GPU_HOST_LOOP ? solve_host_loop(&c, o, &ms) : solve_graph(&c, o, &ms);
    if (!st) {
        st = context_result(&c, o, z, r);
        r->kernel_seconds = 1e-3 * ms;
    }
    context_destroy(&c);
    r->seconds = wall_seconds() - t_start;
    return st;
}

extern "C" int ps_gpu_solve_variant(const ps_problem *p, const ps_options *o,
                                    const ps_gpu_config *cfg, int variant, double *x,
                                    ps_result *r)
{
    int st = ps_gpu_usable(o);
    if (st)
        return st;
    PS_RETURN_ERROR_IF(o, variant < PS_GPU_PERSISTENT || variant > PS_GPU_GRAPH, PS_ERR_OPTION,
                       "unknown GPU solve variant %d", variant);
    size_t n = ps_problem_nx(p);
    double *z = (double *)malloc(n * sizeof(double));
    if (!z)
        return PS_ERR_NO_MEMORY;
    ps_design_x_of_pulse(p, x, z);
    st = variant == PS_GPU_PERSISTENT ? run_kernel(p, o, cfg, MODE_SOLVE, z, r, NULL, NULL, NULL)
                                      : run_variant(p, o, cfg, variant, z, r);
    if (r->history_len > 0)
        ps_design_pulse_of_x(p, z, x);
    free(z);
    if (r->history_len > 0)
        describe_run(p, o, cfg, r);
    r->status = st; /* also on the error paths that never reached the result */
    return st;
}

extern "C" int ps_gpu_solve_config(const ps_problem *p, const ps_options *o,
                                   const ps_gpu_config *cfg, double *x, ps_result *r)
{
    return ps_gpu_solve_variant(p, o, cfg, PS_GPU_PERSISTENT, x, r);
}

extern "C" int ps_gpu_eval_timing(const ps_problem *p, const ps_options *o,
                                  const ps_gpu_config *cfg, const double *x_at, int repeats,
                                  double *kernel_seconds, double *launch_seconds)
{
    int st = ps_gpu_usable(o);
    if (st)
        return st;
    PS_RETURN_ERROR_IF(o, repeats < 1, PS_ERR_OPTION, "eval timing: %d repeats", repeats);
    size_t n = ps_problem_nx(p);
    double *x = (double *)malloc(n * sizeof(double)), *z = (double *)malloc(n * sizeof(double));
    double *tk = (double *)malloc((size_t)repeats * sizeof(double));
    double *tl = (double *)malloc((size_t)repeats * sizeof(double));
    context c;
    memset(&c, 0, sizeof c);
    if (!x || !z || !tk || !tl) {
        st = PS_ERR_NO_MEMORY;
        goto done;
    }
    if (x_at)
        memcpy(x, x_at, n * sizeof(double));
    else
        ps_problem_x0(p, x);
    ps_design_x_of_pulse(p, x, z); /* the solve's variables: its evaluation */
    st = context_create(p, o, cfg, MODE_EVAL_VARS, z, 0, &c);
    if (st)
        goto done;
    for (int i = -1; i < repeats && !st; i++) { /* i = -1: warm-up */
        double ms = 0.0, in_kernel = 0.0;
        st = launch_persistent(&c, o, &ms);
        if (!st && cudaMemcpy(&in_kernel, c.a.elapsed, sizeof(double), cudaMemcpyDeviceToHost) != cudaSuccess) {
            cudaGetLastError();
            st = PS_ERR_GPU_LAUNCH;
        }
        if (i >= 0) {
            tk[i] = in_kernel;
            tl[i] = 1e-3 * ms;
        }
    }
    context_destroy(&c);
    if (!st) {
        *kernel_seconds = ps_median(tk, (size_t)repeats);
        *launch_seconds = ps_median(tl, (size_t)repeats);
    }
done:
    free(x);
    free(z);
    free(tk);
    free(tl);
    return st;
}

extern "C" int ps_gpu_eval(const ps_problem *p, const ps_options *o, const double *x, double *f,
                           double *grad, double *m)
{
    int st = ps_gpu_usable(o);
    if (st)
        return st;
    size_t n = ps_problem_nx(p);
    double *xc = (double *)malloc(n * sizeof(double));
    if (!xc)
        return PS_ERR_NO_MEMORY;
    memcpy(xc, x, n * sizeof(double));
    ps_result r;
    memset(&r, 0, sizeof r);
    st = run_kernel(p, o, NULL, MODE_EVAL, xc, &r, f, grad, m);
    free(xc);
    return st;
}
