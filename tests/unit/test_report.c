/*
 * What a design reports besides F: the names of the designed gradient axes
 * (ps_design_g_parse, ps_design_g_name), the gradient constraints of a
 * pulse (ps_gradient_constraints) and dF/dG, the gradient with respect to
 * the gradient waveform (ps_eval_g), against central differences of F in G.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "persolve.h"
#include "test_util.h"

#define NS 6
#define NT 12
#define NC 2

/* A problem of NS spins, NT steps and NC channels (b1map) in storage of its
 * own, with a random gradient and start pulse. */
typedef struct small {
    double r[3 * NS], target[3 * NS], df[NS], map[2 * NC * NS], g[3 * NT], b1[2 * NC * NT];
    ps_problem_desc d;
} small;

static void small_fill(small *s, uint64_t seed)
{
    uint64_t z = seed;
    for (size_t i = 0; i < 3 * NS; i++) {
        s->r[i] = tu_uniform(&z, -3, 3);
        s->target[i] = tu_uniform(&z, -1, 1);
    }
    for (size_t j = 0; j < NS; j++)
        s->df[j] = tu_uniform(&z, -50, 50);
    for (size_t i = 0; i < 2 * NC * NS; i++)
        s->map[i] = tu_uniform(&z, -1, 1);
    for (size_t i = 0; i < 3 * NT; i++)
        s->g[i] = tu_uniform(&z, -0.5, 0.5);
    for (size_t i = 0; i < 2 * NC * NT; i++)
        s->b1[i] = tu_uniform(&z, -0.1, 0.1);
    ps_problem_desc *d = &s->d;
    ps_problem_desc_init(d);
    d->ns = NS;
    d->nt = NT;
    d->nc = NC;
    d->r = s->r;
    d->target = s->target;
    d->df = s->df;
    d->b1map = s->map;
    d->g = s->g;
    d->b1 = s->b1;
    d->dt = 4e-6;
    d->loss = PS_LOSS_XY;
}

static ps_problem *small_create(small *s)
{
    ps_problem *p = NULL;
    int st = ps_problem_create(&s->d, &p);
    assert_int_equal(st, PS_CONVERGED);
    return p;
}

static void test_axes_names(void **state)
{
    (void)state;
    static const char *const names[8] = {"", "x", "y", "xy", "z", "xz", "yz", "xyz"};
    char buf[8];
    for (unsigned a = 1; a < 8; a++) {
        unsigned got = 99;
        assert_int_equal(ps_design_g_parse(names[a], &got), PS_CONVERGED);
        assert_int_equal(got, a);
        memset(buf, 'q', sizeof buf);
        assert_int_equal(ps_design_g_name(a, buf, sizeof buf), PS_CONVERGED);
        assert_string_equal(buf, names[a]);
    }
    assert_int_equal(ps_design_g_name(0, buf, 4), PS_CONVERGED);
    assert_string_equal(buf, "");
    static const char *const bad[] = {"", "yx", "xx", "zy", "w", "x ", "X", "xyzx", "x,y"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned got = 99;
        assert_int_equal(ps_design_g_parse(bad[i], &got), PS_ERR_GRADIENT);
        assert_int_equal(got, 99); /* left alone */
    }
    unsigned got;
    assert_int_equal(ps_design_g_parse(NULL, &got), PS_ERR_NULL);
    assert_int_equal(ps_design_g_parse("x", NULL), PS_ERR_NULL);
    assert_int_equal(ps_design_g_name(8, buf, sizeof buf), PS_ERR_GRADIENT);
    assert_int_equal(ps_design_g_name(7, buf, 3), PS_ERR_SIZE);
    assert_int_equal(ps_design_g_name(7, NULL, 4), PS_ERR_NULL);
}

static void test_gradient_constraints(void **state)
{
    (void)state;
    small s;
    small_fill(&s, 3);
    s.d.design_g = PS_AXIS_X | PS_AXIS_Z;
    s.d.smax = 2e5;
    s.d.gmax = 0.4;
    s.d.g_end = 1;
    ps_problem *p = small_create(&s);
    const size_t nx = ps_problem_nx(p);
    assert_int_equal(nx, 2 * NC * NT + 2 * NT);
    double *x = malloc(nx * sizeof *x);
    uint64_t z = 17;
    for (size_t i = 0; i < nx; i++)
        x[i] = tu_uniform(&z, -0.6, 0.6);
    double peak[3], slew[3], end[3];
    tu_poison(peak, 3);
    tu_poison(slew, 3);
    tu_poison(end, 3);
    assert_int_equal(ps_gradient_constraints(p, x, peak, slew, end), PS_CONVERGED);
    /* x from x's first axis block, y the problem's, z x's second block */
    const double *src[3] = {x + 2 * NC * NT, s.g + 1, x + 2 * NC * NT + NT};
    const size_t stride[3] = {1, 3, 1};
    for (int a = 0; a < 3; a++) {
        double want[3];
        tu_waveform_values(src[a], NT, stride[a], s.d.dt, want);
        printf("axis %d: %g %g %g\n", a, peak[a], slew[a], end[a]);
        assert_true(peak[a] == want[0]);
        assert_true(slew[a] == want[1]);
        assert_true(end[a] == want[2]);
        assert_true(want[0] > 0.0 && want[1] > 0.0 && want[2] > 0.0);
    }
    /* any output may be NULL */
    double again[3];
    tu_poison(again, 3);
    assert_int_equal(ps_gradient_constraints(p, x, NULL, again, NULL), PS_CONVERGED);
    assert_memory_equal(again, slew, sizeof again);
    /* a non-finite waveform value; NULL problem or point */
    x[2 * NC * NT + NT + 4] = NAN;
    assert_int_equal(ps_gradient_constraints(p, x, peak, slew, end), PS_ERR_NONFINITE);
    assert_int_equal(ps_gradient_constraints(NULL, x, peak, slew, end), PS_ERR_NULL);
    assert_int_equal(ps_gradient_constraints(p, NULL, peak, slew, end), PS_ERR_NULL);
    free(x);
    ps_problem_free(p);

    /* nothing designed: every axis is the problem's */
    small_fill(&s, 4);
    p = small_create(&s);
    double x0[2 * NC * NT];
    assert_int_equal(ps_problem_x0(p, x0), PS_CONVERGED);
    assert_int_equal(ps_gradient_constraints(p, x0, peak, slew, end), PS_CONVERGED);
    for (int a = 0; a < 3; a++) {
        double want[3];
        tu_waveform_values(s.g + a, NT, 3, s.d.dt, want);
        assert_true(peak[a] == want[0] && slew[a] == want[1] && end[a] == want[2]);
    }
    ps_problem_free(p);
}

static ps_options double_cpu(void)
{
    ps_options o;
    ps_options_default(&o);
    o.backend = PS_BACKEND_CPU;
    o.precision = PS_PRECISION_DOUBLE;
    return o;
}

/* dF/dG of a problem with a fixed gradient against central differences of
 * F in each G_ka (the problem made again with G moved). */
static void test_eval_g_differences(void **state)
{
    (void)state;
    small s;
    small_fill(&s, 5);
    s.d.lambda = 0.3;
    ps_problem *p = small_create(&s);
    const ps_options o = double_cpu();
    double x[2 * NC * NT], grad[2 * NC * NT], gg[3 * NT], ref[3 * NT], f = NAN, f0 = NAN;
    assert_int_equal(ps_problem_x0(p, x), PS_CONVERGED);
    tu_poison(grad, 2 * NC * NT);
    tu_poison(gg, 3 * NT);
    assert_int_equal(ps_eval_g(p, &o, x, &f, grad, gg), PS_CONVERGED);
    /* F and dF/dx are ps_eval's */
    double grad0[2 * NC * NT];
    assert_int_equal(ps_eval(p, &o, x, &f0, grad0), PS_CONVERGED);
    assert_true(f == f0);
    assert_memory_equal(grad, grad0, sizeof grad);
    const double h = 1e-5;
    for (size_t i = 0; i < 3 * NT; i++) {
        const double g0 = s.g[i];
        double fp, fm;
        s.g[i] = g0 + h;
        ps_problem *q = small_create(&s);
        assert_int_equal(ps_eval(q, &o, x, &fp, NULL), PS_CONVERGED);
        ps_problem_free(q);
        s.g[i] = g0 - h;
        q = small_create(&s);
        assert_int_equal(ps_eval(q, &o, x, &fm, NULL), PS_CONVERGED);
        ps_problem_free(q);
        s.g[i] = g0;
        ref[i] = (fp - fm) / (2.0 * h);
    }
    double scale = 0.0;
    for (size_t i = 0; i < 3 * NT; i++)
        scale = fmax(scale, fabs(ref[i]));
    assert_true(scale > 1e-3);
    assert_true(tu_compare("dF/dG", gg, ref, 3 * NT, 1e-6 * scale, 1e-5));
    /* grad may be NULL */
    double gg2[3 * NT];
    tu_poison(gg2, 3 * NT);
    assert_int_equal(ps_eval_g(p, &o, x, &f, NULL, gg2), PS_CONVERGED);
    assert_memory_equal(gg2, gg, sizeof gg);
    /* grad_g may not */
    assert_int_equal(ps_eval_g(p, &o, x, &f, grad, NULL), PS_ERR_NULL);
    assert_int_equal(ps_eval_g(NULL, &o, x, &f, grad, gg), PS_ERR_NULL);
    /* the GPU does not compute it: refused, not run elsewhere */
    ps_options og = o;
    og.backend = PS_BACKEND_GPU;
    int st = ps_eval_g(p, &og, x, &f, grad, gg);
    printf("backend gpu: %d (%s)\n", st, ps_strerror(st));
    assert_true(st == PS_ERR_NOT_IMPLEMENTED || (st == PS_ERR_NO_GPU && ps_gpu_count() == 0));
    ps_problem_free(p);
}

/* With designed axes dF/dG covers every axis, and the designed axes' part
 * of dF/dx is its column. */
static void test_eval_g_designed(void **state)
{
    (void)state;
    small s;
    small_fill(&s, 6);
    s.d.design_g = PS_AXIS_Y;
    s.d.smax = 1e5;
    ps_problem *p = small_create(&s);
    const ps_options o = double_cpu();
    const size_t nx = ps_problem_nx(p);
    double *x = malloc(nx * sizeof *x), *grad = malloc(nx * sizeof *grad), gg[3 * NT];
    uint64_t z = 9;
    for (size_t i = 0; i < nx; i++)
        x[i] = tu_uniform(&z, -0.2, 0.2);
    double f = NAN;
    tu_poison(grad, nx);
    tu_poison(gg, 3 * NT);
    assert_int_equal(ps_eval_g(p, &o, x, &f, grad, gg), PS_CONVERGED);
    double col[NT];
    for (size_t k = 0; k < NT; k++)
        col[k] = gg[3 * k + 1];
    assert_true(tu_compare("designed y", grad + 2 * NC * NT, col, NT, 0.0, 0.0));
    for (size_t i = 0; i < 3 * NT; i++)
        assert_true(isfinite(gg[i]) && gg[i] != PS_POISON);
    free(x);
    free(grad);
    ps_problem_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_axes_names),
        cmocka_unit_test(test_gradient_constraints),
        cmocka_unit_test(test_eval_g_differences),
        cmocka_unit_test(test_eval_g_designed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
