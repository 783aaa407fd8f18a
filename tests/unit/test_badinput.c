/*
 * Invalid arguments: every class returns its own status (persolve.h), the
 * validation message names the field and element, nothing crashes, and the
 * free functions accept NULL. Each case changes one thing in an otherwise
 * valid problem or options struct, so the status can only come from that
 * change.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "opt/solver.h" /* PS_MAX_MEMORY, PS_MAX_PAST */
#include "persolve.h"
#include "persolve_gpu.h"
#include "test_util.h"
#include "unit/problem_fixture.h"

/* A valid problem with every optional array present. */
static void base_init(base *b)
{
    uint64_t s = 3;
    for (int i = 0; i < 3 * NS; i++) {
        b->r[i] = tu_uniform(&s, -1, 1);
        b->target[i] = tu_uniform(&s, -1, 1);
        b->m0[i] = tu_uniform(&s, -1, 1);
    }
    for (int j = 0; j < NS; j++) {
        b->df[j] = tu_uniform(&s, -50, 50);
        b->b1scale[j] = tu_uniform(&s, 0.8, 1.2);
        b->w[j] = tu_uniform(&s, 0.5, 1.5);
        b->t1[j] = tu_uniform(&s, 0.5, 1.0);
        b->t2[j] = tu_uniform(&s, 0.05, 0.1);
    }
    for (int k = 0; k < 3 * NT; k++)
        b->g[k] = tu_uniform(&s, -1, 1);
    for (int k = 0; k < 2 * NT; k++)
        b->b1[k] = tu_uniform(&s, -0.1, 0.1);
    base_wire(b);
    b->d.dt = 4e-6;
    b->d.lambda = 0.1;
    b->d.b1_max = 0.2;
}

/*
 * d must give `status` from ps_problem_validate (with a message containing
 * one of the `names`, NULL-terminated, when given) and from
 * ps_problem_create (with *out cleared).
 */
static void expect_desc(const ps_problem_desc *d, int status,
                        const char *const *names)
{
    char msg[256];
    memset(msg, 'X', sizeof msg);
    int st = ps_problem_validate(d, msg, sizeof msg);
    assert_non_null(memchr(msg, '\0', sizeof msg));
    printf("  validate -> %d (%s) \"%s\"\n", st, ps_strerror(st), msg);
    assert_int_equal(st, status);
    if (status != PS_CONVERGED)
        assert_true(msg[0] != '\0');
    if (names) {
        int found = 0;
        for (const char *const *n = names; *n; n++)
            found |= strstr(msg, *n) != NULL;
        if (!found)
            printf("  message does not name %s\n", names[0]);
        assert_true(found);
    }
    /* no message buffer, and a short one */
    assert_int_equal(ps_problem_validate(d, NULL, 0), status);
    char small[6];
    small[5] = '#';
    assert_int_equal(ps_problem_validate(d, small, 5), status);
    assert_true(small[5] == '#');

    ps_problem *p = (ps_problem *)&st; /* not NULL: must be cleared */
    assert_int_equal(ps_problem_create(d, &p), status);
    if (status == PS_CONVERGED) {
        assert_non_null(p);
        ps_problem_free(p);
    } else {
        assert_null(p);
    }
}

static void test_valid_base(void **state)
{
    (void)state;
    base b;
    base_init(&b);
    expect_desc(&b.d, PS_CONVERGED, NULL);
    /* the optional arrays may all be NULL */
    b.d.df = b.d.b1scale = b.d.w = b.d.m0 = b.d.t1 = b.d.t2 = b.d.b1 = NULL;
    b.d.b1_max = PS_B1MAX_NONE;
    b.d.lambda = 0.0;
    b.d.gamma_bar = 0.0; /* 0: the default */
    expect_desc(&b.d, PS_CONVERGED, NULL);
}

static void test_null_required_arrays(void **state)
{
    (void)state;
    base b;
    printf("r = NULL\n");
    base_init(&b);
    b.d.r = NULL;
    expect_desc(&b.d, PS_ERR_NULL, (const char *const[]){"r", NULL});
    printf("target = NULL\n");
    base_init(&b);
    b.d.target = NULL;
    expect_desc(&b.d, PS_ERR_NULL, (const char *const[]){"target", NULL});
    printf("g = NULL\n");
    base_init(&b);
    b.d.g = NULL;
    expect_desc(&b.d, PS_ERR_NULL, (const char *const[]){"g", NULL});
    printf("desc = NULL\n");
    expect_desc(NULL, PS_ERR_NULL, NULL);
    assert_int_equal(ps_problem_create(&b.d, NULL), PS_ERR_NULL);
}

static void test_sizes(void **state)
{
    (void)state;
    base b;
    base_init(&b);
    printf("ns = 0\n");
    b.d.ns = 0;
    expect_desc(&b.d, PS_ERR_SIZE, (const char *const[]){"ns", NULL});
    base_init(&b);
    printf("nt = 0\n");
    b.d.nt = 0;
    expect_desc(&b.d, PS_ERR_SIZE, (const char *const[]){"nt", NULL});
    /* absurd sizes are refused before any array is read */
    base_init(&b);
    printf("ns = SIZE_MAX\n");
    b.d.ns = SIZE_MAX;
    expect_desc(&b.d, PS_ERR_SIZE, NULL);
    base_init(&b);
    printf("nt = SIZE_MAX / 2\n");
    b.d.nt = SIZE_MAX / 2;
    expect_desc(&b.d, PS_ERR_SIZE, NULL);
}

/*
 * NaN, +Inf and -Inf in each array, at the first, a middle and the last
 * element: PS_ERR_NONFINITE, and the message names the array and the
 * element (as "name[i][c]" for row arrays, or the flat "name[k]").
 */
static void test_nonfinite_arrays(void **state)
{
    (void)state;
    const double bad[3] = {NAN, INFINITY, -INFINITY};
    base b;
    array_ref arr[16];
    base_init(&b);
    size_t na = arrays_of(&b, arr);
    for (size_t a = 0; a < na; a++) {
        size_t pos[3] = {0, arr[a].n / 2, arr[a].n - 1};
        for (int pi = 0; pi < 3; pi++) {
            for (int bi = 0; bi < 3; bi++) {
                base_init(&b);
                arrays_of(&b, arr);
                size_t k = pos[pi];
                arr[a].a[k] = bad[bi];
                char row[64], flat[64];
                if (arr[a].width > 1)
                    snprintf(row, sizeof row, "%s[%zu][%zu]", arr[a].name,
                             k / arr[a].width, k % arr[a].width);
                else
                    snprintf(row, sizeof row, "%s[%zu]", arr[a].name, k);
                snprintf(flat, sizeof flat, "%s[%zu]", arr[a].name, k);
                printf("%s = %g\n", row, bad[bi]);
                expect_desc(&b.d, PS_ERR_NONFINITE,
                            (const char *const[]){row, flat, NULL});
            }
        }
    }
}

static void test_nonfinite_scalars(void **state)
{
    (void)state;
    const double bad[3] = {NAN, INFINITY, -INFINITY};
    base b;
    for (int bi = 0; bi < 3; bi++) {
        printf("dt = %g\n", bad[bi]);
        base_init(&b);
        b.d.dt = bad[bi];
        expect_desc(&b.d, PS_ERR_NONFINITE, (const char *const[]){"dt", NULL});
        printf("lambda = %g\n", bad[bi]);
        base_init(&b);
        b.d.lambda = bad[bi];
        expect_desc(&b.d, PS_ERR_NONFINITE,
                    (const char *const[]){"lambda", NULL});
        printf("gamma_bar = %g\n", bad[bi]);
        base_init(&b);
        b.d.gamma_bar = bad[bi];
        expect_desc(&b.d, PS_ERR_NONFINITE,
                    (const char *const[]){"gamma", NULL});
    }
}

static void test_dt_and_gamma(void **state)
{
    (void)state;
    const double bad[3] = {0.0, -0.0, -4e-6};
    base b;
    for (int i = 0; i < 3; i++) {
        printf("dt = %g\n", bad[i]);
        base_init(&b);
        b.d.dt = bad[i];
        expect_desc(&b.d, PS_ERR_DT, (const char *const[]){"dt", NULL});
    }
    printf("gamma_bar = -1\n");
    base_init(&b);
    b.d.gamma_bar = -1.0;
    expect_desc(&b.d, PS_ERR_DT, (const char *const[]){"gamma", NULL});
}

/* Values each finite whose factors or products leave float32's range:
 * refused, the field to blame first in the message. */
static void test_scales(void **state)
{
    (void)state;
    base b;
    const double two_pi_gb = 2.0 * 3.14159265358979323846 * PS_GAMMA_BAR_DEFAULT;
    printf("dt = 1e30: the rotation a step per G\n");
    base_init(&b);
    b.d.dt = 1e30;
    expect_desc(&b.d, PS_ERR_SCALE, (const char *const[]){"dt = 1e+30 s, gamma_bar = 4257.59 Hz/G: the rotation a step per G", NULL});
    printf("dt = 1e-40: the same, below\n");
    b.d.dt = 1e-40;
    expect_desc(&b.d, PS_ERR_SCALE, (const char *const[]){"dt = 1e-40 s", NULL});
    /* the pulse's rotation a step at the edge: 1e10 rad/G x b1_max just
     * inside and just past 1e30 rad, each factor in range */
    base_init(&b);
    b.d.b1scale = NULL;
    b.d.dt = 1e10 / two_pi_gb;
    b.d.b1_max = 0.999e20;
    expect_desc(&b.d, PS_CONVERGED, NULL);
    b.d.b1_max = 1.002e20;
    expect_desc(&b.d, PS_ERR_SCALE, (const char *const[]){"b1_max 1.002e+20 G: the pulse's rotation a step there", NULL});
    printf("the gradient's rotation at 1e10 rad/G\n");
    b.d.b1_max = 0.2;
    b.g[0] = 1e22;
    expect_desc(&b.d, PS_ERR_SCALE, (const char *const[]){"g: the gradient's rotation a step at the farthest spin", NULL});
    printf("the off-resonance's rotation at 1e10 rad/G\n");
    b.g[0] = 0.5;
    b.df[2] = 1e30;
    expect_desc(&b.d, PS_ERR_SCALE, (const char *const[]){"df: the off-resonance's rotation a step", NULL});
    printf("factors: df 1e35 Hz, g 1e31 G/cm, r 1e-35 cm, b1scale 1e31\n");
    base_init(&b);
    b.df[2] = 1e35;
    expect_desc(&b.d, PS_ERR_SCALE, (const char *const[]){"df: the largest |df| 1e+35 Hz", NULL});
    base_init(&b);
    b.g[4] = -1e31;
    expect_desc(&b.d, PS_ERR_SCALE, (const char *const[]){"g: the largest |component| 1e+31 G/cm", NULL});
    base_init(&b);
    for (int i = 0; i < 3 * NS; i++)
        b.r[i] = 1e-35;
    expect_desc(&b.d, PS_ERR_SCALE, (const char *const[]){"r: the largest |coordinate| 1e-35 cm", NULL});
    base_init(&b);
    b.b1scale[1] = 1e31;
    expect_desc(&b.d, PS_ERR_SCALE, (const char *const[]){"b1scale: the largest B1 sensitivity 1e+31", NULL});
    printf("b1_max 1e-200 G\n");
    base_init(&b);
    b.d.b1_max = 1e-200;
    expect_desc(&b.d, PS_ERR_SCALE, (const char *const[]){"b1_max 1e-200 G is outside", NULL});
    printf("no limit, a start pulse of 1e200 G, then of 1e-35 G\n");
    base_init(&b);
    b.d.b1_max = PS_B1MAX_NONE;
    b.b1[5] = 1e200;
    expect_desc(&b.d, PS_ERR_SCALE, (const char *const[]){"b1: the start pulse's peak 1e+200 G is outside", NULL});
    for (int k = 0; k < 2 * NT; k++)
        b.b1[k] = 1e-35;
    expect_desc(&b.d, PS_ERR_SCALE, (const char *const[]){"b1: the start pulse's peak", NULL});
    for (int k = 0; k < 2 * NT; k++)
        b.b1[k] = 0.0; /* a zero start pulse is a start */
    expect_desc(&b.d, PS_CONVERGED, NULL);
    printf("lambda 1e305\n");
    base_init(&b);
    b.d.lambda = 1e305;
    expect_desc(&b.d, PS_ERR_SCALE, (const char *const[]){"lambda = 1e+305", NULL});
    printf("gmax 1e-20 G/cm under a designed start waveform of about 1 G/cm\n");
    base_init(&b);
    b.d.design_g = PS_AXIS_X;
    b.d.smax = 15000.0;
    b.d.gmax = 1e-20;
    expect_desc(&b.d, PS_ERR_SCALE, (const char *const[]){"gmax = 1e-20 G/cm is", NULL});
    b.d.gmax = 1e-14;
    expect_desc(&b.d, PS_CONVERGED, NULL);
}

static void test_negative(void **state)
{
    (void)state;
    base b;
    for (size_t j = 0; j < NS; j++) {
        printf("w[%zu] < 0\n", j);
        base_init(&b);
        b.w[j] = j == 0 ? -1e-300 : -1.0;
        char name[16];
        snprintf(name, sizeof name, "w[%zu]", j);
        expect_desc(&b.d, PS_ERR_NEGATIVE, (const char *const[]){name, NULL});
    }
    printf("w = 0 is allowed\n");
    base_init(&b);
    b.w[1] = 0.0;
    expect_desc(&b.d, PS_CONVERGED, NULL);
    printf("lambda < 0\n");
    base_init(&b);
    b.d.lambda = -0.1;
    expect_desc(&b.d, PS_ERR_NEGATIVE, (const char *const[]){"lambda", NULL});
}

static void test_relaxation(void **state)
{
    (void)state;
    const double bad[3] = {0.0, -0.0, -1.0};
    base b;
    for (int i = 0; i < 3; i++) {
        for (size_t j = 0; j < NS; j += NS - 1) {
            char name[16];
            printf("t1[%zu] = %g\n", j, bad[i]);
            base_init(&b);
            b.t1[j] = bad[i];
            snprintf(name, sizeof name, "t1[%zu]", j);
            expect_desc(&b.d, PS_ERR_RELAXATION,
                        (const char *const[]){name, NULL});
            printf("t2[%zu] = %g\n", j, bad[i]);
            base_init(&b);
            b.t2[j] = bad[i];
            snprintf(name, sizeof name, "t2[%zu]", j);
            expect_desc(&b.d, PS_ERR_RELAXATION,
                        (const char *const[]){name, NULL});
        }
    }
    /* only one of T1/T2 given is fine */
    base_init(&b);
    b.d.t1 = NULL;
    expect_desc(&b.d, PS_CONVERGED, NULL);
    base_init(&b);
    b.d.t2 = NULL;
    expect_desc(&b.d, PS_CONVERGED, NULL);
}

static void test_loss(void **state)
{
    (void)state;
    const char *names[4] = {"full", "xy", "mls", "z"};
    for (int i = 0; i < 4; i++) {
        ps_loss l = (ps_loss)99;
        assert_int_equal(ps_loss_parse(names[i], &l), PS_CONVERGED);
        assert_int_equal(l, i);
        assert_string_equal(ps_loss_name((ps_loss)i), names[i]);
    }
    const char *bad[] = {"", "ful", "fullx", "XYZ", "magnitude", " z", "z "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ps_loss l = PS_LOSS_XY;
        assert_int_equal(ps_loss_parse(bad[i], &l), PS_ERR_LOSS);
        assert_int_equal(l, PS_LOSS_XY); /* untouched on error */
    }
    ps_loss l;
    assert_int_equal(ps_loss_parse(NULL, &l), PS_ERR_NULL);
    assert_int_equal(ps_loss_parse("full", NULL), PS_ERR_NULL);
    assert_null(ps_loss_name((ps_loss)4));
    assert_null(ps_loss_name((ps_loss)-1));

    const int bad_enum[3] = {4, -1, 1000};
    base b;
    for (int i = 0; i < 3; i++) {
        printf("loss = %d\n", bad_enum[i]);
        base_init(&b);
        b.d.loss = (ps_loss)bad_enum[i];
        expect_desc(&b.d, PS_ERR_LOSS, (const char *const[]){"loss", NULL});
    }
}

static void test_b1max(void **state)
{
    (void)state;
    const double bad[4] = {0.0, -0.2, NAN, -INFINITY};
    base b;
    for (int i = 0; i < 4; i++) {
        printf("b1_max = %g\n", bad[i]);
        base_init(&b);
        b.d.b1_max = bad[i];
        expect_desc(&b.d, PS_ERR_B1MAX, (const char *const[]){"b1_max", NULL});
    }
    printf("b1_max = +Inf (none) and a tiny positive value are fine\n");
    base_init(&b);
    b.d.b1_max = PS_B1MAX_NONE;
    expect_desc(&b.d, PS_CONVERGED, NULL);
    b.d.b1_max = 1e-9;
    expect_desc(&b.d, PS_CONVERGED, NULL);
}

/* The base problem, created: where a case calls the entry points. */
static ps_problem *base_problem(void)
{
    base b;
    base_init(&b);
    ps_problem *p = NULL;
    assert_int_equal(ps_problem_create(&b.d, &p), PS_CONVERGED);
    return p;
}

/* solve_persistent refuses with `status`, in its return and in r.status. */
static void expect_solve_refused(const ps_problem *p, const ps_options *o,
                                 double *x, int status)
{
    ps_result r;
    memset(&r, 0, sizeof r);
    assert_int_equal(solve_persistent(p, o, x, &r), status);
    assert_int_equal(r.status, status);
    ps_result_free(&r);
}

/* ---- options ---- */

static char last_log[512];
static int log_calls;

static void capture_log(void *user, int level, const char *file, int line,
                        const char *msg)
{
    (void)user;
    (void)level;
    assert_non_null(file);
    assert_true(line > 0);
    snprintf(last_log, sizeof last_log, "%s", msg);
    log_calls++;
}

/* One bad options struct: PS_ERR_OPTION from validation (logged, naming
 * `field`) and from every entry point that takes options. */
static void expect_bad_options(const ps_options *bad, const char *field,
                               const ps_problem *p)
{
    ps_options o = *bad;
    o.log = capture_log;
    last_log[0] = '\0';
    log_calls = 0;
    int st = ps_options_validate(&o);
    printf("  %-24s -> %d \"%s\"\n", field, st, last_log);
    assert_int_equal(st, PS_ERR_OPTION);
    assert_true(log_calls >= 1);
    assert_non_null(strstr(last_log, field));

    double x[2 * NT] = {0}, f = PS_POISON, g[2 * NT], m[3 * NS];
    tu_poison(g, 2 * NT);
    assert_int_equal(ps_eval(p, bad, x, &f, g), PS_ERR_OPTION);
    assert_int_equal(ps_simulate(p, bad, x, m), PS_ERR_OPTION);
    expect_solve_refused(p, bad, x, PS_ERR_OPTION);
}

static void test_options(void **state)
{
    (void)state;
    ps_problem *p = base_problem();
    ps_options def, o;
    ps_gpu_options gdef, g;
    ps_options_default(&def);
    ps_gpu_options_default(&gdef);
    assert_int_equal(ps_options_validate(&def), PS_CONVERGED);
    /* documented defaults */
    assert_int_equal(def.backend, PS_BACKEND_AUTO);
    assert_int_equal(def.precision, PS_PRECISION_SINGLE);
    assert_int_equal(def.memory, 8);
    assert_true(def.c1 == 1e-4 && def.c2 == 0.9);
    assert_int_equal(def.max_linesearch, 20);
    assert_null(def.gpu);
    assert_int_equal(gdef.tune_cache, 1);
    assert_int_equal(gdef.gpu_block, 0);
    assert_int_equal(gdef.gpu_spins_per_tile, 0);
    assert_int_equal(gdef.gpu_max_registers, 0);
    assert_int_equal(gdef.gpu_blocks_per_sm, 0);
    o = def;
    o.gpu = &gdef;
    assert_int_equal(ps_options_validate(&o), PS_CONVERGED);

#define BAD(stmt, field)                                                       \
    do {                                                                       \
        o = def;                                                               \
        stmt;                                                                  \
        expect_bad_options(&o, field, p);                                      \
    } while (0)
    BAD(o.memory = 0, "memory");
    BAD(o.memory = -3, "memory");
    BAD(o.memory = PS_MAX_MEMORY + 1, "memory");
    BAD(o.max_iterations = -1, "max_iterations");
    BAD(o.max_evaluations = -1, "max_evaluations");
    BAD(o.time_limit = -1.0, "time_limit");
    BAD(o.time_limit = NAN, "time_limit");
    BAD(o.gtol = -1e-5, "gtol");
    BAD(o.gtol = NAN, "gtol");
    BAD(o.ftol = -1e-7, "ftol");
    BAD(o.ftol = INFINITY, "ftol");
    BAD(o.past = 0, "past");
    BAD(o.past = PS_MAX_PAST + 1, "past");
    BAD(o.c1 = 0.0, "c1");
    BAD(o.c1 = 0.9, "c1");  /* c1 == c2 */
    BAD(o.c1 = 0.95, "c1"); /* c1 > c2 */
    BAD(o.c2 = 1.0, "c2");
    BAD(o.c1 = NAN, "c1");
    BAD(o.max_linesearch = 0, "max_linesearch");
    BAD(o.max_linesearch = 101, "max_linesearch");
    BAD(o.threads = -1, "threads");
    BAD(o.backend = (ps_backend)3, "backend");
    BAD(o.backend = (ps_backend)-1, "backend");
    BAD(o.precision = (ps_precision)2, "precision");
    /* the GPU options through o.gpu */
#define GBAD(stmt, field) BAD((g = gdef, o.gpu = &g, stmt), field)
    GBAD(g.tune_cache = 2, "tune_cache");
    GBAD(g.tune_cache = -1, "tune_cache");
    GBAD(g.gpu_block = 100, "gpu_block");
    GBAD(g.gpu_block = 16, "gpu_block");
    GBAD(g.gpu_block = 1024, "gpu_block");
    GBAD(g.gpu_block = -32, "gpu_block");
    GBAD(g.gpu_spins_per_tile = 3, "gpu_spins_per_tile");
    GBAD(g.gpu_spins_per_tile = 64, "gpu_spins_per_tile");
    GBAD(g.gpu_spins_per_tile = -1, "gpu_spins_per_tile");
    GBAD(g.gpu_max_registers = 96, "gpu_max_registers");
    GBAD(g.gpu_max_registers = -64, "gpu_max_registers");
    GBAD(g.gpu_blocks_per_sm = 33, "gpu_blocks_per_sm");
    GBAD(g.gpu_blocks_per_sm = -1, "gpu_blocks_per_sm");
    GBAD(g.batch_team_barrier = 3, "batch_team_barrier");
    GBAD(g.batch_team_barrier = -1, "batch_team_barrier");
    GBAD(g.reserved[0] = 1, "reserved");
    GBAD(g.reserved[sizeof g.reserved / sizeof g.reserved[0] - 1] = -7, "reserved");
#undef GBAD
    BAD(o.max_rounds = -1, "max_rounds");
    BAD(o.max_rounds = 65, "max_rounds");
    BAD(o.constraint_tol = -1e-3, "constraint_tol");
    BAD(o.constraint_tol = NAN, "constraint_tol");
    BAD(o.penalty_mu = -1.0, "penalty_mu");
    BAD(o.penalty_mu = INFINITY, "penalty_mu");
    BAD(o.penalty_mu = 1.01e30, "above 1e30");
    BAD(o.reserved[0] = 1, "reserved");
    BAD(o.reserved[sizeof o.reserved / sizeof o.reserved[0] - 1] = -7, "reserved");
#undef BAD

    /* the edges of the ranges are valid */
    o = def;
    o.memory = 1;
    assert_int_equal(ps_options_validate(&o), PS_CONVERGED);
    o.memory = PS_MAX_MEMORY;
    assert_int_equal(ps_options_validate(&o), PS_CONVERGED);
    o = def;
    o.max_iterations = 0;
    o.past = PS_MAX_PAST;
    o.max_linesearch = 100;
    assert_int_equal(ps_options_validate(&o), PS_CONVERGED);
    o = def;
    g = gdef;
    o.gpu = &g;
    g.tune_cache = 0;
    g.gpu_block = 32;
    g.gpu_spins_per_tile = 32;
    g.gpu_max_registers = 64;
    g.gpu_blocks_per_sm = 32;
    assert_int_equal(ps_options_validate(&o), PS_CONVERGED);
    g.gpu_block = 512;
    g.gpu_spins_per_tile = 1;
    g.gpu_max_registers = 128;
    g.gpu_blocks_per_sm = 1;
    assert_int_equal(ps_options_validate(&o), PS_CONVERGED);
    assert_int_equal(ps_options_validate(NULL), PS_ERR_NULL);
    ps_options_default(NULL); /* must not crash */
    ps_gpu_options_default(NULL);
    ps_problem_free(p);
}

/* ---- NULL pointers and non-finite x at the entry points ---- */

static void test_null_entry_points(void **state)
{
    (void)state;
    ps_problem *p = base_problem();
    ps_options o;
    ps_options_default(&o);
    o.backend = PS_BACKEND_CPU;
    double x[2 * NT], f, g[2 * NT], m[3 * NS];
    assert_int_equal(ps_problem_x0(p, x), PS_CONVERGED);

    assert_int_equal(ps_eval(NULL, &o, x, &f, g), PS_ERR_NULL);
    assert_int_equal(ps_eval(p, &o, NULL, &f, g), PS_ERR_NULL);
    assert_int_equal(ps_eval(p, &o, x, NULL, g), PS_ERR_NULL);
    /* options and grad may be NULL */
    f = PS_POISON;
    assert_int_equal(ps_eval(p, NULL, x, &f, NULL), PS_CONVERGED);
    assert_true(isfinite(f) && f != PS_POISON);

    assert_int_equal(ps_simulate(NULL, &o, x, m), PS_ERR_NULL);
    assert_int_equal(ps_simulate(p, &o, NULL, m), PS_ERR_NULL);
    assert_int_equal(ps_simulate(p, &o, x, NULL), PS_ERR_NULL);

    assert_int_equal(solve_persistent(p, &o, x, NULL), PS_ERR_NULL);
    expect_solve_refused(NULL, &o, x, PS_ERR_NULL);
    expect_solve_refused(p, &o, NULL, PS_ERR_NULL);

    assert_int_equal(ps_problem_x0(NULL, x), PS_ERR_NULL);
    assert_int_equal(ps_problem_x0(p, NULL), PS_ERR_NULL);
    ps_problem_desc d;
    assert_int_equal(ps_problem_describe(NULL, &d), PS_ERR_NULL);
    assert_int_equal(ps_problem_describe(p, NULL), PS_ERR_NULL);
    assert_int_equal(ps_problem_ns(NULL), 0);
    assert_int_equal(ps_problem_nt(NULL), 0);
    assert_int_equal(ps_problem_ns(p), NS);
    assert_int_equal(ps_problem_nt(p), NT);
    ps_problem_desc_init(NULL);

    ps_problem *q = NULL;
    assert_int_equal(ps_preset_create(NULL, &q, NULL, 0), PS_ERR_NULL);
    assert_null(q);
    assert_int_equal(ps_preset_create("slice1d", NULL, NULL, 0), PS_ERR_NULL);

    char buf[128];
    assert_int_equal(ps_gpu_describe(0, NULL, 0), PS_ERR_NULL);
    assert_int_equal(ps_gpu_describe(-1, buf, sizeof buf), PS_ERR_NO_GPU);
    assert_int_equal(ps_gpu_describe(ps_gpu_count(), buf, sizeof buf),
                     PS_ERR_NO_GPU);

    /* free functions accept NULL, and a zeroed result */
    ps_problem_free(NULL);
    ps_result_free(NULL);
    ps_result r;
    memset(&r, 0, sizeof r);
    ps_result_free(&r);
    ps_problem_free(p);
}

/*
 * NaN or Inf in x: ps_eval and ps_simulate return PS_ERR_NONFINITE and do
 * not write their outputs; solve_persistent refuses such a start point
 * the same way.
 */
static void test_nonfinite_x(void **state)
{
    (void)state;
    ps_problem *p = base_problem();
    ps_options o;
    ps_options_default(&o);
    o.backend = PS_BACKEND_CPU;
    const double bad[3] = {NAN, INFINITY, -INFINITY};
    const size_t pos[3] = {0, NT, 2 * NT - 1}; /* first u, first v, last v */
    for (int bi = 0; bi < 3; bi++) {
        for (int pi = 0; pi < 3; pi++) {
            double x[2 * NT], f = PS_POISON, g[2 * NT], m[3 * NS];
            assert_int_equal(ps_problem_x0(p, x), PS_CONVERGED);
            x[pos[pi]] = bad[bi];
            tu_poison(g, 2 * NT);
            tu_poison(m, 3 * NS);
            assert_int_equal(ps_eval(p, &o, x, &f, g), PS_ERR_NONFINITE);
            assert_int_equal(ps_simulate(p, &o, x, m), PS_ERR_NONFINITE);
            expect_solve_refused(p, &o, x, PS_ERR_NONFINITE);
        }
    }
    ps_problem_free(p);
}

/* ---- transmit channels (SPEC 1.1) ---- */

/* Storage for the base problem with nc channels: a b1map [NS][nc][2] and a
 * start pulse [nc][NT][2] of random values, the b1scale removed. */
enum { MAXC = PS_MAX_CHANNELS + 1 };
typedef struct chan_base {
    base b;
    double b1map[NS * MAXC * 2], b1[MAXC * NT * 2];
} chan_base;

static void chan_init(chan_base *cb, size_t nc)
{
    base_init(&cb->b);
    uint64_t s = 11;
    for (size_t i = 0; i < NS * MAXC * 2; i++)
        cb->b1map[i] = tu_uniform(&s, -1, 1);
    for (size_t i = 0; i < MAXC * NT * 2; i++)
        cb->b1[i] = tu_uniform(&s, -0.1, 0.1);
    cb->b.d.nc = nc;
    cb->b.d.b1scale = NULL;
    cb->b.d.b1map = cb->b1map;
    cb->b.d.b1 = cb->b1;
}

/* The channel counts and their combinations with b1map and b1scale. */
static void test_channels(void **state)
{
    (void)state;
    chan_base cb;
    const size_t good[5] = {0, 1, 2, 3, PS_MAX_CHANNELS};
    for (int i = 0; i < 5; i++) {
        printf("nc = %zu with a b1map\n", good[i]);
        chan_init(&cb, good[i]);
        expect_desc(&cb.b.d, PS_CONVERGED, NULL);
    }
    /* too many channels: refused before any array is read */
    const size_t big[3] = {PS_MAX_CHANNELS + 1, 1000, SIZE_MAX};
    for (int i = 0; i < 3; i++) {
        printf("nc = %zu\n", big[i]);
        chan_init(&cb, big[i]);
        if (big[i] > MAXC)
            cb.b.d.b1map = cb.b.d.b1 = NULL; /* must not be needed */
        expect_desc(&cb.b.d, PS_ERR_SIZE,
                    (const char *const[]){"nc", NULL});
    }
    /* several channels without a b1map (with or without a b1scale) */
    for (size_t nc = 2; nc <= 3; nc++) {
        printf("nc = %zu without a b1map\n", nc);
        chan_init(&cb, nc);
        cb.b.d.b1map = NULL;
        expect_desc(&cb.b.d, PS_ERR_CHANNELS,
                    (const char *const[]){"b1map", NULL});
        printf("nc = %zu with a b1scale and without a b1map\n", nc);
        cb.b.d.b1scale = cb.b.b1scale;
        expect_desc(&cb.b.d, PS_ERR_CHANNELS,
                    (const char *const[]){"b1map", NULL});
    }
    /* a b1map together with a b1scale, for any nc */
    for (int i = 0; i < 4; i++) {
        printf("nc = %zu with both b1map and b1scale\n", good[i]);
        chan_init(&cb, good[i]);
        cb.b.d.b1scale = cb.b.b1scale;
        expect_desc(&cb.b.d, PS_ERR_CHANNELS,
                    (const char *const[]){"b1scale", NULL});
    }
    /* one channel by the B1 scale alone stays valid with nc = 1 */
    base_init(&cb.b);
    cb.b.d.nc = 1;
    expect_desc(&cb.b.d, PS_CONVERGED, NULL);
    /* per-channel limits and sensitivities out of float32's range
     * (PS_ERR_SCALE, the field first) */
    double lim[3] = {0.2, 1e-35, 0.3};
    chan_init(&cb, 3);
    cb.b.d.b1_max = PS_B1MAX_NONE;
    cb.b.d.b1_max_channel = lim;
    expect_desc(&cb.b.d, PS_ERR_SCALE,
                (const char *const[]){"b1_max_channel: the smallest limit 1e-35 G is outside", NULL});
    lim[1] = 1e31;
    expect_desc(&cb.b.d, PS_ERR_SCALE,
                (const char *const[]){"b1_max_channel: the largest limit 1e+31 G is outside", NULL});
    lim[1] = 0.25;
    expect_desc(&cb.b.d, PS_CONVERGED, NULL);
    cb.b1map[2 * (1 * 3 + 2) + 1] = -1e31; /* spin 1, channel 2, Im */
    expect_desc(&cb.b.d, PS_ERR_SCALE,
                (const char *const[]){"b1map: the largest B1 sensitivity 1e+31", NULL});
}

/*
 * NaN and Inf in a b1map [ns][nc][2] and in a start pulse b1 [nc][nt][2]:
 * PS_ERR_NONFINITE, with the element named as b1map[j][c][w] and
 * b1[c][k][w] (one channel: b1[k][w], the [nt][2] form of one pulse).
 */
static void test_channels_nonfinite(void **state)
{
    (void)state;
    const double bad[3] = {NAN, INFINITY, -INFINITY};
    const char *bad_name[3] = {"NaN", "Inf", "Inf"};
    chan_base cb;
    const size_t ncs[3] = {2, 3, 8};
    for (int ni = 0; ni < 3; ni++) {
        size_t nc = ncs[ni];
        /* first, middle and last element, and the last channel's Im */
        const size_t jcw[4][3] = {
            {0, 0, 0}, {1, nc / 2, 1}, {NS - 1, nc - 1, 1}, {NS - 1, 0, 0}};
        const size_t ckw[4][3] = {
            {0, 0, 0}, {nc / 2, NT / 2, 1}, {nc - 1, NT - 1, 1}, {1, 0, 1}};
        for (int pi = 0; pi < 4; pi++)
            for (int bi = 0; bi < 3; bi++) {
                char want[64];
                chan_init(&cb, nc);
                const size_t *e = jcw[pi];
                cb.b1map[2 * (e[0] * nc + e[1]) + e[2]] = bad[bi];
                snprintf(want, sizeof want, "b1map[%zu][%zu][%zu] is %s", e[0],
                         e[1], e[2], bad_name[bi]);
                printf("nc %zu: %s\n", nc, want);
                expect_desc(&cb.b.d, PS_ERR_NONFINITE,
                            (const char *const[]){want, NULL});

                chan_init(&cb, nc);
                e = ckw[pi];
                cb.b1[2 * (e[0] * NT + e[1]) + e[2]] = bad[bi];
                snprintf(want, sizeof want, "b1[%zu][%zu][%zu] is %s", e[0],
                         e[1], e[2], bad_name[bi]);
                printf("nc %zu: %s\n", nc, want);
                expect_desc(&cb.b.d, PS_ERR_NONFINITE,
                            (const char *const[]){want, NULL});
            }
    }
    /* one channel through a b1map: the element is named by spin and
     * component (the channel index, 0, may be written or left out) */
    chan_init(&cb, 1);
    cb.b1map[2 * 2 + 1] = NAN;
    printf("nc 1: b1map[2][.][1] = NaN\n");
    expect_desc(&cb.b.d, PS_ERR_NONFINITE,
                (const char *const[]){"b1map[2][0][1] is NaN",
                                      "b1map[2][1] is NaN", NULL});
    /* one channel's start pulse keeps the [nt][2] form */
    chan_init(&cb, 1);
    cb.b1[2 * 3 + 1] = INFINITY;
    expect_desc(&cb.b.d, PS_ERR_NONFINITE,
                (const char *const[]){"b1[3][1] is Inf", NULL});
}

/* A multi-channel x with a NaN or Inf in any channel is refused by the
 * entry points (x has 2 nc nt elements, all checked). */
static void test_channels_nonfinite_x(void **state)
{
    (void)state;
    enum { NC = 3, NX = 2 * NC * NT };
    chan_base cb;
    chan_init(&cb, NC);
    ps_problem *p = NULL;
    assert_int_equal(ps_problem_create(&cb.b.d, &p), PS_CONVERGED);
    assert_int_equal(ps_problem_nx(p), NX);
    ps_options o;
    ps_options_default(&o);
    o.backend = PS_BACKEND_CPU;
    const size_t pos[4] = {0, 2 * NT, NX - NT, NX - 1}; /* u of channels 0, 1;
                                                          v of channel 2 */
    for (int pi = 0; pi < 4; pi++) {
        double x[NX], f = PS_POISON, g[NX], m[3 * NS];
        assert_int_equal(ps_problem_x0(p, x), PS_CONVERGED);
        assert_int_equal(ps_eval(p, &o, x, &f, g), PS_CONVERGED);
        x[pos[pi]] = pi % 2 ? INFINITY : NAN;
        assert_int_equal(ps_eval(p, &o, x, &f, g), PS_ERR_NONFINITE);
        assert_int_equal(ps_simulate(p, &o, x, m), PS_ERR_NONFINITE);
        expect_solve_refused(p, &o, x, PS_ERR_NONFINITE);
    }
    ps_problem_free(p);
}

/* Asking for the GPU on a machine without one (or a build without CUDA)
 * is its own status, for every entry point. */
static void test_gpu_backend_without_gpu(void **state)
{
    (void)state;
    if (ps_gpu_count() > 0) {
        printf("a GPU is present: nothing to check here\n");
        return;
    }
    ps_problem *p = base_problem();
    ps_options o;
    ps_options_default(&o);
    o.backend = PS_BACKEND_GPU;
    double x[2 * NT] = {0}, f, m[3 * NS];
    int st = ps_eval(p, &o, x, &f, NULL);
    printf("gpu backend without a GPU: %d (%s)\n", st, ps_strerror(st));
    assert_true(st == PS_ERR_NO_GPU || st == PS_ERR_NOT_IMPLEMENTED);
    assert_int_equal(ps_simulate(p, &o, x, m), st);
    expect_solve_refused(p, &o, x, st);
    /* auto falls back to the CPU */
    o.backend = PS_BACKEND_AUTO;
    assert_int_equal(ps_eval(p, &o, x, &f, NULL), PS_CONVERGED);
    ps_problem_free(p);
}

/* ps_strerror: distinct, non-empty text for every status; unknown codes
 * get a non-empty text too. */
static void test_strerror(void **state)
{
    (void)state;
    const char *texts[64];
    int n = 0;
    for (int s = PS_ERR_SCALE; s <= PS_RUNNING; s++) { /* the lowest status to the highest */
        const char *t = ps_strerror(s);
        assert_non_null(t);
        assert_true(t[0] != '\0');
        for (int i = 0; i < n; i++) {
            if (strcmp(texts[i], t) == 0)
                printf("status %d repeats the text of another: \"%s\"\n", s, t ? t : "");
            assert_true(strcmp(texts[i], t) != 0);
        }
        texts[n++] = t;
    }
    const int unknown[] = {PS_RUNNING + 1, 100,     PS_ERR_SCALE - 1,
                           -1000,          INT_MIN, INT_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *t = ps_strerror(unknown[i]);
        assert_non_null(t);
        assert_true(t[0] != '\0');
        /* not the text of a real status */
        for (int k = 0; k < n; k++)
            assert_true(strcmp(texts[k], t) != 0);
    }
    const char *v = ps_version();
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", PS_VERSION_MAJOR, PS_VERSION_MINOR,
             PS_VERSION_PATCH);
    assert_non_null(v);
    assert_string_equal(v, want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_base),
        cmocka_unit_test(test_null_required_arrays),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_nonfinite_arrays),
        cmocka_unit_test(test_nonfinite_scalars),
        cmocka_unit_test(test_dt_and_gamma),
        cmocka_unit_test(test_scales),
        cmocka_unit_test(test_negative),
        cmocka_unit_test(test_relaxation),
        cmocka_unit_test(test_loss),
        cmocka_unit_test(test_b1max),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_null_entry_points),
        cmocka_unit_test(test_nonfinite_x),
        cmocka_unit_test(test_channels),
        cmocka_unit_test(test_channels_nonfinite),
        cmocka_unit_test(test_channels_nonfinite_x),
        cmocka_unit_test(test_gpu_backend_without_gpu),
        cmocka_unit_test(test_strerror),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
