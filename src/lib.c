/*
 * Options, status texts, logging and build information.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/gpu.h"
#include "cuda/launch.h"
#include "opt/solver.h"
#include "common/log.h"
#include "opt/options.h"
#include "tune/gpu_options.h"
#include "ps_config.h"

const char *ps_version(void)
{
    return PS_VERSION;
}

const char *ps_strerror(int status)
{
    switch (status) {
    case PS_CONVERGED: return "converged (gradient norm below gtol)";
    case PS_CONVERGED_FTOL: return "converged (relative decrease of f below ftol)";
    case PS_MAX_ITERATIONS: return "maximum number of iterations reached";
    case PS_MAX_EVALUATIONS: return "maximum number of evaluations reached";
    case PS_TIME_LIMIT: return "time limit reached";
    case PS_CANCELLED: return "cancelled";
    case PS_YIELDED: return "yielded";
    case PS_RUNNING: return "still running";
    case PS_ERR_NULL: return "a required pointer is NULL";
    case PS_ERR_SIZE: return "invalid size (Ns or Nt is 0 or too large)";
    case PS_ERR_NONFINITE: return "NaN or Inf in the input";
    case PS_ERR_DT: return "dt or gamma_bar is not positive";
    case PS_ERR_NEGATIVE: return "negative weight or lambda";
    case PS_ERR_RELAXATION: return "T1 or T2 is not positive";
    case PS_ERR_LOSS: return "unknown loss type";
    case PS_ERR_B1MAX: return "b1_max is not positive";
    case PS_ERR_OPTION: return "invalid option value";
    case PS_ERR_LINE_SEARCH: return "line search failed (returned the last good point)";
    case PS_ERR_OBJECTIVE: return "objective is not finite at the start point";
    case PS_ERR_NO_MEMORY: return "out of host memory";
    case PS_ERR_NO_GPU: return "no usable GPU";
    case PS_ERR_GPU_UNSUPPORTED: return "GPU does not support cooperative launch";
    case PS_ERR_GPU_MEMORY: return "out of GPU memory";
    case PS_ERR_GPU_LAUNCH: return "GPU kernel launch or execution failed";
    case PS_ERR_NOT_IMPLEMENTED: return "not implemented in this build";
    case PS_ERR_PRESET: return "unknown preset or bad preset parameter";
    case PS_ERR_FILE: return "file missing, unreadable or malformed";
    case PS_ERR_STATE: return "not allowed in the run's current state";
    case PS_ERR_CHECKPOINT: return "checkpoint corrupted, truncated or not for this problem and settings";
    default: return "unknown status";
    }
}

void ps_log(const ps_options *o, int level, const char *file, int line,
            const char *fmt, ...)
{
    if (!o || !o->log)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    o->log(o->log_user, level, file, line, msg);
}

void ps_options_default(ps_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->backend = PS_BACKEND_AUTO;
    o->precision = PS_PRECISION_SINGLE;
    o->memory = 8;
    o->max_iterations = 1000;
    o->max_evaluations = 0;
    o->time_limit = 0.0;
    o->gtol = 1e-5;
    o->ftol = 1e-7;
    o->past = 10;
    o->c1 = 1e-4;
    o->c2 = 0.9;
    o->max_linesearch = 20;
    o->threads = 0;
}

/* The pointer to the GPU options took the place of the tune and GPU launch
 * fields: on LP64 ps_options keeps its size and the offsets of the fields
 * before them. */
_Static_assert(sizeof(void *) != 8 ||
                   sizeof(ps_options) - offsetof(ps_options, gpu) == 16 * sizeof(int64_t),
               "ps_options: gpu, reserved_int and reserved[] must fill exactly 16 int64 words");

#define OPT_CHECK(cond, ...) PS_RETURN_ERROR_IF(o, !(cond), PS_ERR_OPTION, __VA_ARGS__)

int ps_options_validate(const ps_options *o)
{
    if (!o)
        return PS_ERR_NULL;
    OPT_CHECK(o->backend == PS_BACKEND_AUTO || o->backend == PS_BACKEND_CPU ||
                  o->backend == PS_BACKEND_GPU,
              "options.backend: %d is not auto, cpu or gpu", (int)o->backend);
    OPT_CHECK(o->precision == PS_PRECISION_SINGLE ||
                  o->precision == PS_PRECISION_DOUBLE,
              "options.precision: %d is not single or double", (int)o->precision);
    OPT_CHECK(o->memory >= 1 && o->memory <= PS_MAX_MEMORY,
              "options.memory: %d is outside 1..%d", o->memory, PS_MAX_MEMORY);
    OPT_CHECK(o->max_iterations >= 0, "options.max_iterations: %lld is negative",
              (long long)o->max_iterations);
    OPT_CHECK(o->max_evaluations >= 0,
              "options.max_evaluations: %lld is negative",
              (long long)o->max_evaluations);
    OPT_CHECK(isfinite(o->time_limit) && o->time_limit >= 0.0,
              "options.time_limit: %g is not a finite value >= 0", o->time_limit);
    OPT_CHECK(isfinite(o->gtol) && o->gtol >= 0.0,
              "options.gtol: %g is not a finite value >= 0", o->gtol);
    OPT_CHECK(isfinite(o->ftol) && o->ftol >= 0.0,
              "options.ftol: %g is not a finite value >= 0", o->ftol);
    OPT_CHECK(o->past >= 1 && o->past <= PS_MAX_PAST,
              "options.past: %d is outside 1..%d", o->past, PS_MAX_PAST);
    OPT_CHECK(o->c1 > 0.0 && o->c1 < o->c2 && o->c2 < 1.0,
              "options.c1, c2: need 0 < c1 < c2 < 1, got c1 = %g, c2 = %g",
              o->c1, o->c2);
    OPT_CHECK(o->max_linesearch >= 1 && o->max_linesearch <= 100,
              "options.max_linesearch: %d is outside 1..100", o->max_linesearch);
    OPT_CHECK(isfinite(o->fnoise) && o->fnoise >= 0.0 && o->fnoise < 1.0,
              "options.fnoise: %g is outside [0, 1)", o->fnoise);
    OPT_CHECK(o->threads >= 0 && o->threads <= 4096,
              "options.threads: %d is outside 0..4096", o->threads);
    if (o->gpu) {
        int st = ps_gpu_options_validate(o); /* tune/gpu_options.c */
        if (st)
            return st;
    }
    OPT_CHECK(o->reserved_int == 0, "options.reserved_int is not zero");
    for (size_t i = 0; i < sizeof o->reserved / sizeof o->reserved[0]; i++)
        OPT_CHECK(o->reserved[i] == 0, "options.reserved[%zu] is not zero", i);
    return PS_CONVERGED;
}

double ps_options_fnoise(const ps_options *o)
{
    if (o->fnoise > 0.0)
        return o->fnoise;
    return o->precision == PS_PRECISION_SINGLE ? 1e-5 : 1e-12;
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
