/*
 * The backend choice and the checks every entry point makes first
 * (opt/backend.h).
 */
#include <math.h>
#include <stdio.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "common/log.h"
#include "cpu/objective.h"
#include "cuda/gpu.h"
#include "opt/backend.h"

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

void ps_cpu_device(const ps_options *o, char *buf, size_t len)
{
    int nthreads = 1;
#ifdef _OPENMP
    nthreads = o->threads > 0 ? o->threads : omp_get_max_threads();
#endif
    snprintf(buf, len, "cpu: %d thread%s, %s, %s", nthreads, nthreads == 1 ? "" : "s",
             o->precision == PS_PRECISION_SINGLE ? "float32 spins" : "float64 spins",
             ps_cpu_isa() == PS_CPU_ISA_AVX512 ? "AVX-512"
             : ps_cpu_isa() == PS_CPU_ISA_AVX2 ? "AVX2"
                                               : "baseline vectors");
}
