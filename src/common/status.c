/*
 * Status texts (ps_strerror), status messages and the library version.
 */
#include <stdarg.h>
#include <stdio.h>

#include "common/status.h"
#include "persolve.h"
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
    case PS_CONSTRAINT_VIOLATED: return "converged, but a constraint is still violated after the last penalty round";
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
    case PS_ERR_CHANNELS: return "transmit channels inconsistent (nc, b1map, b1scale)";
    case PS_ERR_GRADIENT: return "gradient design malformed (design_g, smax, gmax, g_end)";
    case PS_ERR_RF_MASK: return "rf_mask malformed (a value other than 0 or 1)";
    case PS_ERR_SCALE: return "the problem's scales leave float32's range (a factor outside [1e-30, 1e30], a rotation a step above 1e30 rad, an overflowing penalty)";
    case PS_ERR_SAR: return "SAR constraint malformed (VOP not Hermitian or not positive semidefinite, sar_max or tr)";
    default: return "unknown status";
    }
}

int ps_status_msg(char *buf, size_t len, int status, const char *fmt, ...)
{
    if (buf && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, len, fmt, ap);
        va_end(ap);
    }
    return status;
}
