/* GPU backend entries for builds without CUDA: no device, clear status. */
#include <stdio.h>

#include "gpu.h"
#include "gpu_launch.h"
#include "log.h"

int ps_gpu_device_count(void)
{
    return 0;
}

int ps_gpu_device_describe(int index, char *buf, size_t len)
{
    if (buf && len)
        snprintf(buf, len, "no GPU (built without CUDA)");
    return PS_ERR_NO_GPU;
}

int ps_gpu_usable(const ps_options *o)
{
    ps_log(o, PS_LOG_INFO, __FILE__, __LINE__,
           "this build of persolve has no CUDA backend");
    return PS_ERR_NO_GPU;
}

int ps_gpu_eval(const ps_problem *p, const ps_options *o, const double *x,
                double *f, double *grad, double *m)
{
    return ps_gpu_usable(o);
}

int ps_gpu_solve(const ps_problem *p, const ps_options *o, double *x,
                 ps_result *r)
{
    return ps_gpu_usable(o);
}

int ps_gpu_solve_variant(const ps_problem *p, const ps_options *o,
                         const ps_gpu_config *cfg, int variant, double *x,
                         ps_result *r)
{
    return ps_gpu_usable(o);
}

int ps_gpu_eval_timing(const ps_problem *p, const ps_options *o,
                       const ps_gpu_config *cfg, const double *x, int repeats,
                       double *kernel_seconds, double *launch_seconds)
{
    return ps_gpu_usable(o);
}
