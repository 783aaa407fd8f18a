/*
 * The three drivers of the GPU solve (cuda/launch.h: the persistent kernel,
 * the host-driven loop of ordinary kernels, the CUDA graph with a
 * conditional WHILE node) run the same phases with the same launch shape,
 * so they must give bit-identical iterates: the history (f, |g|, step and
 * evaluations of every iteration), the final x, the status and the
 * iteration and evaluation counts. Exits 77 without a usable GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cuda/gpu.h"
#include "cuda/launch.h"
#include "gpu_suite.h"
#include "persolve.h"
#include "test_util.h"

static const char *const names[3] = {"persistent", "host loop", "graph"};

/* Bitwise equality of two doubles (NaN == NaN, -0 != +0). */
static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* A random problem with T1/T2 relaxation, spins off the tile grid. */
static ps_problem *relax_problem(uint64_t seed, size_t ns, size_t nt, ps_loss loss)
{
    double *r = malloc(3 * ns * sizeof *r), *tg = malloc(3 * ns * sizeof *tg);
    double *df = malloc(ns * sizeof *df), *t1 = malloc(ns * sizeof *t1);
    double *t2 = malloc(ns * sizeof *t2), *g = malloc(3 * nt * sizeof *g);
    double *b1 = malloc(2 * nt * sizeof *b1);
    for (size_t j = 0; j < ns; j++) {
        for (int c = 0; c < 3; c++)
            r[3 * j + c] = tu_uniform(&seed, -2.0, 2.0);
        tg[3 * j] = tu_uniform(&seed, -0.5, 0.5);
        tg[3 * j + 1] = tu_uniform(&seed, -0.5, 0.5);
        tg[3 * j + 2] = tu_uniform(&seed, -1.0, 1.0);
        df[j] = tu_uniform(&seed, -200.0, 200.0);
        t1[j] = tu_uniform(&seed, 0.05, 1.0);
        t2[j] = tu_uniform(&seed, 0.01, 0.1);
    }
    for (size_t k = 0; k < nt; k++) {
        double t = (double)k / (double)nt;
        g[3 * k] = 0.5 * sin(6.283185307179586 * 3 * t);
        g[3 * k + 1] = 0.4 * cos(6.283185307179586 * 2 * t);
        g[3 * k + 2] = 0.2;
        b1[2 * k] = 0.02 * tu_uniform(&seed, -1.0, 1.0);
        b1[2 * k + 1] = 0.02 * tu_uniform(&seed, -1.0, 1.0);
    }
    ps_problem_desc d;
    ps_problem_desc_init(&d);
    d.ns = ns;
    d.nt = nt;
    d.r = r;
    d.target = tg;
    d.df = df;
    d.t1 = t1;
    d.t2 = t2;
    d.g = g;
    d.b1 = b1;
    d.dt = 4e-6;
    d.lambda = 0.01;
    d.loss = loss;
    ps_problem *p = NULL;
    assert_int_equal(ps_problem_create(&d, &p), 0);
    free(r), free(tg), free(df), free(t1), free(t2), free(g), free(b1);
    return p;
}

/*
 * Solve p with each variant from its x0 and compare everything bit for
 * bit with the persistent kernel.
 */
static void check_variants(const char *what, ps_problem *p, ps_precision prec, int64_t max_iters,
                           int64_t max_evals, double gtol)
{
    size_t n = 2 * ps_problem_nt(p);
    ps_options o;
    ps_options_default(&o);
    o.backend = PS_BACKEND_GPU;
    o.precision = prec;
    o.max_iterations = max_iters;
    o.max_evaluations = max_evals;
    o.gtol = gtol;
    ps_result r[3];
    double *x[3];
    int st[3];
    for (int v = 0; v < 3; v++) {
        x[v] = malloc(n * sizeof(double));
        assert_non_null(x[v]);
        ps_problem_x0(p, x[v]);
        memset(&r[v], 0, sizeof r[v]);
        r[v].f = PS_POISON;
        st[v] = ps_gpu_solve_variant(p, &o, NULL, v, x[v], &r[v]);
        printf("%-40s %s %-10s: status %3d it %3lld evals %3lld f %.17g  %.1f us/iteration\n", what,
               prec == PS_PRECISION_SINGLE ? "fp32" : "fp64", names[v], st[v], (long long)r[v].iterations,
               (long long)r[v].evaluations, r[v].f,
               1e6 * r[v].kernel_seconds / (double)(r[v].iterations ? r[v].iterations : 1));
    }
    /* the reference ran and did something */
    assert_true(st[0] >= 0);
    assert_int_equal(r[0].status, st[0]);
    assert_true(r[0].iterations >= 1);
    assert_int_equal(r[0].history_len, (size_t)r[0].iterations + 1);
    assert_true(r[0].f != PS_POISON && isfinite(r[0].f));
    assert_true(r[0].kernel_seconds > 0.0);
    /* where the iterates part, if they do: the first differing history row of each variant */
    int parted = 0;
    for (int v = 1; v < 3; v++) {
        size_t rows = r[v].history_len < r[0].history_len ? r[v].history_len : r[0].history_len;
        for (size_t i = 0; i < rows; i++) {
            const ps_progress *a = &r[0].history[i], *b = &r[v].history[i];
            if (a->iteration != b->iteration || a->evaluations != b->evaluations ||
                !same_bits(a->f, b->f) || !same_bits(a->gnorm, b->gnorm) || !same_bits(a->step, b->step)) {
                printf("%s: history row %zu differs: it %lld/%lld evals %lld/%lld f %.17g/%.17g "
                       "gnorm %.17g/%.17g step %.17g/%.17g\n",
                       names[v], i, (long long)a->iteration, (long long)b->iteration,
                       (long long)a->evaluations, (long long)b->evaluations, a->f, b->f, a->gnorm, b->gnorm,
                       a->step, b->step);
                parted = 1;
                break;
            }
        }
    }
    assert_false(parted);
    for (int v = 1; v < 3; v++) {
        assert_int_equal(st[v], st[0]);
        assert_int_equal(r[v].status, r[0].status);
        assert_int_equal(r[v].backend, PS_BACKEND_GPU);
        assert_int_equal(r[v].iterations, r[0].iterations);
        assert_int_equal(r[v].evaluations, r[0].evaluations);
        assert_true(r[v].kernel_seconds > 0.0);
        assert_true(same_bits(r[v].f, r[0].f));
        assert_true(same_bits(r[v].gnorm, r[0].gnorm));
        assert_int_equal(r[v].history_len, r[0].history_len);
        size_t bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if (!same_bits(x[v][i], x[0][i]))
                bad = i;
        if (bad < n) {
            printf("%s: x[%zu] = %.17g, persistent %.17g\n", names[v], bad, x[v][bad], x[0][bad]);
            fail();
        }
    }
    for (int v = 0; v < 3; v++) {
        ps_result_free(&r[v]);
        free(x[v]);
    }
}

static void check_preset(const char *spec, ps_precision prec, int64_t max_iters, int64_t max_evals,
                         double gtol)
{
    ps_problem *p;
    char err[256];
    assert_int_equal(ps_preset_create(spec, &p, err, sizeof err), 0);
    check_variants(spec, p, prec, max_iters, max_evals, gtol);
    ps_problem_free(p);
}

static void variants_slice1d(void **state)
{
    (void)state;
    check_preset("slice1d", PS_PRECISION_SINGLE, 40, 0, 1e-5);
    check_preset("slice1d", PS_PRECISION_DOUBLE, 40, 0, 1e-5);
    /* converged by the gradient test before the iteration limit */
    check_preset("slice1d:nz=100,nt=120", PS_PRECISION_DOUBLE, 500, 0, 1e-3);
}

static void variants_spiral2d(void **state)
{
    (void)state;
    check_preset("spiral2d:n=16,nt=400", PS_PRECISION_SINGLE, 30, 0, 1e-5);
    check_preset("spiral2d:n=16,nt=400", PS_PRECISION_DOUBLE, 30, 0, 1e-5);
}

/* The b1_max reparametrization and the RF power penalty. */
/* A problem without gradient: the PS_GPU_NOGRAD kernel against the host
 * loop and the graph, which run the general loops on its zero rows. */
static void variants_inversion(void **state)
{
    (void)state;
    check_preset("inversion:ndf=101,nt=300", PS_PRECISION_SINGLE, 30, 0, 1e-5);
    check_preset("inversion:ndf=101,nt=300", PS_PRECISION_DOUBLE, 30, 0, 1e-5);
}

static void variants_b1max(void **state)
{
    (void)state;
    check_preset("slice1d:lambda=0.001,b1_max=0.1", PS_PRECISION_SINGLE, 25, 0, 1e-5);
    check_preset("slice1d:lambda=0.001,b1_max=0.1", PS_PRECISION_DOUBLE, 25, 0, 1e-5);
}

/* Relaxation, a loss other than the full one, sizes off the tile grid. */
static void variants_relaxation(void **state)
{
    (void)state;
    ps_problem *p = relax_problem(7, 300, 257, PS_LOSS_MLS);
    check_variants("random relaxation mls 300x257", p, PS_PRECISION_SINGLE, 20, 0, 1e-5);
    check_variants("random relaxation mls 300x257", p, PS_PRECISION_DOUBLE, 20, 0, 1e-5);
    ps_problem_free(p);
}

/* A stop by the evaluation limit, possibly inside a line search. */
static void variants_max_evaluations(void **state)
{
    (void)state;
    for (int64_t e = 5; e <= 8; e++) {
        ps_problem *p;
        char err[256];
        assert_int_equal(ps_preset_create("spiral2d:n=16,nt=400", &p, err, sizeof err), 0);
        char what[64];
        snprintf(what, sizeof what, "spiral2d:n=16,nt=400 max_evals %lld", (long long)e);
        check_variants(what, p, PS_PRECISION_SINGLE, 100, e, 1e-5);
        ps_problem_free(p);
    }
}

static void bad_variant(void **state)
{
    (void)state;
    ps_problem *p;
    char err[256];
    assert_int_equal(ps_preset_create("slice1d:nz=20,nt=20", &p, err, sizeof err), 0);
    ps_options o;
    ps_options_default(&o);
    double x[40];
    ps_problem_x0(p, x);
    ps_result r;
    memset(&r, 0, sizeof r);
    assert_int_equal(ps_gpu_solve_variant(p, &o, NULL, 3, x, &r), PS_ERR_OPTION);
    assert_int_equal(ps_gpu_solve_variant(p, &o, NULL, -1, x, &r), PS_ERR_OPTION);
    ps_problem_free(p);
}

/* The evaluation timing entry the benchmark uses. */
static void eval_timing(void **state)
{
    (void)state;
    ps_problem *p;
    char err[256];
    assert_int_equal(ps_preset_create("spiral2d:n=32,nt=1000", &p, err, sizeof err), 0);
    ps_options o;
    ps_options_default(&o);
    double tk = -1.0, tl = -1.0;
    assert_int_equal(ps_gpu_eval_timing(p, &o, NULL, NULL, 5, &tk, &tl), 0);
    printf("spiral2d:n=32,nt=1000 evaluation: %.2f us in the kernel, %.2f us per launch\n", 1e6 * tk,
           1e6 * tl);
    assert_true(tk > 0.0 && tk < 1.0);
    assert_true(tl >= tk && tl < 1.0);
    /* at a given pulse */
    size_t n = 2 * ps_problem_nt(p);
    double *x = malloc(n * sizeof *x), tk2 = -1.0, tl2 = -1.0;
    ps_problem_x0(p, x);
    for (size_t i = 0; i < n; i++)
        x[i] = 2.0 * x[i] + 1e-3;
    assert_int_equal(ps_gpu_eval_timing(p, &o, NULL, x, 3, &tk2, &tl2), 0);
    printf("  at 2 x0 + 1e-3: %.2f us in the kernel\n", 1e6 * tk2);
    assert_true(tk2 > 0.0 && tk2 < 1.0);
    free(x);
    assert_int_equal(ps_gpu_eval_timing(p, &o, NULL, NULL, 0, &tk, &tl), PS_ERR_OPTION);
    ps_problem_free(p);
}

int main(void)
{
    /* quick: the subset run under compute-sanitizer */
    const struct CMUnitTest quick[] = {
        cmocka_unit_test(variants_relaxation),
        cmocka_unit_test(bad_variant),
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(variants_slice1d),
        cmocka_unit_test(variants_spiral2d),
        cmocka_unit_test(variants_inversion),
        cmocka_unit_test(variants_b1max),
        cmocka_unit_test(variants_relaxation),
        cmocka_unit_test(variants_max_evaluations),
        cmocka_unit_test(bad_variant),
        cmocka_unit_test(eval_timing),
    };
    return TU_RUN_GPU_SUITE(quick, tests);
}
