/*
 * ps_options: the defaults, the validation of every field, and the line
 * search's noise allowance (opt/options.h).
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "common/log.h"
#include "model/problem.h"
#include "opt/options.h"
#include "opt/solver.h"
#include "tune/gpu_options.h"

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
    o->max_rounds = PS_DEFAULT_MAX_ROUNDS;
    o->constraint_tol = PS_DEFAULT_CONSTRAINT_TOL;
    o->penalty_mu = PS_DEFAULT_PENALTY_MU;
}

/* The pointer to the GPU options took the place of the tune and GPU launch
 * fields: on LP64 ps_options keeps its size and the offsets of the fields
 * before them. */
_Static_assert(sizeof(void *) != 8 ||
                   sizeof(ps_options) - offsetof(ps_options, gpu) == 16 * sizeof(int64_t),
               "ps_options: gpu, the penalty settings and reserved[] must fill exactly 16 int64 words");

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
    OPT_CHECK(o->max_rounds >= 0 && o->max_rounds <= 64,
              "options.max_rounds: %d is outside 0..64 (0: the default %d)", o->max_rounds,
              PS_DEFAULT_MAX_ROUNDS);
    OPT_CHECK(isfinite(o->constraint_tol) && o->constraint_tol >= 0.0,
              "options.constraint_tol: %g is not a finite value >= 0", o->constraint_tol);
    OPT_CHECK(isfinite(o->penalty_mu) && o->penalty_mu >= 0.0,
              "options.penalty_mu: %g is not a finite value >= 0 (0: the default %g)",
              o->penalty_mu, PS_DEFAULT_PENALTY_MU);
    /* x10 a round for up to 64 rounds: past this the penalty overflows */
    OPT_CHECK(o->penalty_mu <= 1e30,
              "options.penalty_mu: %g is above 1e30 (the penalty's first weight in units of the "
              "loss's scale; the default is %g)", o->penalty_mu, PS_DEFAULT_PENALTY_MU);
    for (size_t i = 0; i < sizeof o->reserved / sizeof o->reserved[0]; i++)
        OPT_CHECK(o->reserved[i] == 0, "options.reserved[%zu] is not zero", i);
    return PS_CONVERGED;
}

int ps_options_max_rounds(const ps_options *o)
{
    return o->max_rounds > 0 ? o->max_rounds : PS_DEFAULT_MAX_ROUNDS;
}

double ps_options_constraint_tol(const ps_options *o)
{
    return o->constraint_tol > 0.0 ? o->constraint_tol : PS_DEFAULT_CONSTRAINT_TOL;
}

double ps_options_penalty_mu(const ps_options *o)
{
    return o->penalty_mu > 0.0 ? o->penalty_mu : PS_DEFAULT_PENALTY_MU;
}

double ps_penalty_mu0(const ps_problem *p, const ps_options *o)
{
    return ps_options_penalty_mu(o) * ps_problem_loss_scale(p);
}

double ps_options_fnoise(const ps_options *o)
{
    if (o->fnoise > 0.0)
        return o->fnoise;
    return o->precision == PS_PRECISION_SINGLE ? 1e-5 : 1e-12;
}
