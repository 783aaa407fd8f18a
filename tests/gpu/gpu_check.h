/*
 * The GPU's evaluation against the CPU backend in float64 (checkasm
 * style), shared by the GPU tests: F, the gradient and M_Nt at x, the
 * GPU's outputs poisoned first, compared with atol + rtol |ref| and the
 * worst element reported. Include after <cmocka.h>.
 */
#ifndef PS_TESTS_GPU_CHECK_H
#define PS_TESTS_GPU_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "persolve.h"
#include "test_util.h"

/* prec: the GPU's spin-loop precision; log: the GPU options' log (or NULL). */
static inline void tu_check_eval_gpu(const ps_problem *p, const double *x, ps_precision prec, const char *what,
                                     ps_log_fn log)
{
    size_t ns = ps_problem_ns(p), n = ps_problem_nx(p);
    double fc, fg, *gc = malloc(n * sizeof *gc), *gg = malloc(n * sizeof *gg);
    double *mc = malloc(3 * ns * sizeof *mc), *mg = malloc(3 * ns * sizeof *mg);
    ps_options oc, og;
    ps_options_default(&oc);
    oc.backend = PS_BACKEND_CPU;
    oc.precision = PS_PRECISION_DOUBLE;
    ps_options_default(&og);
    og.backend = PS_BACKEND_GPU;
    og.precision = prec;
    og.log = log;
    assert_int_equal(ps_eval(p, &oc, x, &fc, gc), 0);
    assert_int_equal(ps_simulate(p, &oc, x, mc), 0);
    fg = PS_POISON;
    tu_poison(gg, n);
    tu_poison(mg, 3 * ns);
    assert_int_equal(ps_eval(p, &og, x, &fg, gg), 0);
    assert_int_equal(ps_simulate(p, &og, x, mg), 0);
    double gmax = 0.0;
    for (size_t i = 0; i < n; i++)
        gmax = fmax(gmax, fabs(gc[i]));
    int single = prec == PS_PRECISION_SINGLE;
    char name[200];
    snprintf(name, sizeof name, "%s %s F", what, single ? "fp32" : "fp64");
    assert_true(tu_compare(name, &fg, &fc, 1, 0.0, single ? 1e-5 : 1e-11));
    snprintf(name, sizeof name, "%s %s grad", what, single ? "fp32" : "fp64");
    assert_true(tu_compare(name, gg, gc, n, (single ? 1e-4 : 1e-10) * gmax, single ? 1e-3 : 1e-9));
    snprintf(name, sizeof name, "%s %s M", what, single ? "fp32" : "fp64");
    /* float32 rounding over ~1000 steps: |dM| ~ sqrt(nt) * 1e-7 * (steps' growth) */
    assert_true(tu_compare(name, mg, mc, 3 * ns, single ? 2e-4 : 1e-11, 0.0));
    free(gc), free(gg), free(mc), free(mg);
}

#endif /* PS_TESTS_GPU_CHECK_H */
