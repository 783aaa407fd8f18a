/*
 * The problem's fields through creation, describe and the checkpoint's
 * problem hash: every array is copied (the start pulse defaults to zeros,
 * the other optional arrays stay absent), the scalars are kept (gamma_bar
 * 0 becomes the default), and the hash of a problem is pinned to the value
 * that checkpoints already written store, so they still resume.
 */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "opt/checkpoint.h"
#include "persolve.h"
#include "test_util.h"
#include "unit/problem_fixture.h"

/* Every optional array, of values exact in binary. */
static void full_init(base *f)
{
    for (int i = 0; i < 3 * NS; i++) {
        f->r[i] = 0.25 * i - 1;
        f->target[i] = 0.125 * (i % 3);
        f->m0[i] = i % 3 == 2;
    }
    for (int j = 0; j < NS; j++) {
        f->df[j] = 10.5 * j - 3;
        f->b1scale[j] = 1 + 0.0625 * j;
        f->w[j] = 0.5 + j;
        f->t1[j] = 1 + 0.5 * j;
        f->t2[j] = 0.0625 * (j + 1);
    }
    for (int k = 0; k < 3 * NT; k++)
        f->g[k] = 0.03125 * k - 0.1875;
    for (int k = 0; k < 2 * NT; k++)
        f->b1[k] = 0.001953125 * k;
    base_wire(f);
    f->d.dt = 0.0000038147;
    f->d.lambda = 0.25;
    f->d.b1_max = 0.5;
    f->d.loss = PS_LOSS_XY;
}

static uint64_t hash_of(const ps_problem_desc *d)
{
    ps_problem *p = NULL;
    assert_int_equal(ps_problem_create(d, &p), PS_CONVERGED);
    uint64_t h = ps_problem_hash(p);
    ps_problem_free(p);
    return h;
}

/*
 * The hash of presets and of hand-made problems, as checkpoints of format
 * version 1 store it (the values of commit d94f9bf): a change of these
 * values makes every stored checkpoint unresumable.
 */
static void test_hash_pinned(void **state)
{
    (void)state;
    static const struct {
        const char *spec;
        uint64_t hash;
    } presets[] = {
        {"slice1d", 0xb028ad94715cf5daull},
        {"spiral2d", 0xdb94de68f3f3e704ull},
        {"inversion", 0x23a3a9453e71a49bull},
        {"slice1d:nt=64,lambda=0.5,b1_max=0.3", 0xf7a655f81a30c9f5ull},
    };
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        ps_problem *p = NULL;
        char err[256] = "";
        assert_int_equal(ps_preset_create(presets[i].spec, &p, err, sizeof err), 0);
        uint64_t h = ps_problem_hash(p);
        printf("%-40s %016" PRIx64 "\n", presets[i].spec, h);
        assert_true(h == presets[i].hash);
        ps_problem_free(p);
    }

    base f;
    full_init(&f);
    uint64_t h = hash_of(&f.d);
    printf("every array                              %016" PRIx64 "\n", h);
    assert_true(h == 0xc57d57b233b5fe79ull);
    /* the start pulse is not part of the problem */
    f.d.b1 = NULL;
    assert_true(hash_of(&f.d) == 0xc57d57b233b5fe79ull);
    f.d.df = f.d.b1scale = f.d.w = f.d.m0 = f.d.t1 = f.d.t2 = NULL;
    f.d.b1_max = PS_B1MAX_NONE;
    f.d.gamma_bar = 0.0;
    h = hash_of(&f.d);
    printf("required arrays only                     %016" PRIx64 "\n", h);
    assert_true(h == 0xa7f8221c6c83adabull);
}

/*
 * Each array, scalar and size is in the hash (the start pulse excepted):
 * one element changed, an optional array left out, a scalar changed.
 */
static void test_hash_sees_every_field(void **state)
{
    (void)state;
    base f;
    array_ref arr[16];
    full_init(&f);
    const uint64_t h0 = hash_of(&f.d);
    size_t na = arrays_of(&f, arr);
    for (size_t a = 0; a < na; a++) {
        full_init(&f);
        arrays_of(&f, arr);
        arr[a].a[arr[a].n - 1] += 0.5;
        int is_start = strcmp(arr[a].name, "b1") == 0;
        printf("%s changed\n", arr[a].name);
        assert_true((hash_of(&f.d) == h0) == is_start);
    }
    const double **optional[] = {&f.d.df, &f.d.b1scale, &f.d.w,
                                 &f.d.m0, &f.d.t1, &f.d.t2};
    for (size_t i = 0; i < sizeof optional / sizeof optional[0]; i++) {
        full_init(&f);
        *optional[i] = NULL;
        assert_true(hash_of(&f.d) != h0);
    }
    double *scalars[] = {&f.d.dt, &f.d.gamma_bar, &f.d.lambda, &f.d.b1_max};
    for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++) {
        full_init(&f);
        *scalars[i] = (*scalars[i] > 0 ? *scalars[i] : PS_GAMMA_BAR_DEFAULT) * 1.5;
        assert_true(hash_of(&f.d) != h0);
    }
    full_init(&f);
    f.d.loss = PS_LOSS_FULL;
    assert_true(hash_of(&f.d) != h0);
    full_init(&f);
    f.d.ns = NS - 1;
    assert_true(hash_of(&f.d) != h0);
    full_init(&f);
    f.d.nt = NT - 1;
    assert_true(hash_of(&f.d) != h0);
}

/* A 2-channel problem with 2 VOPs and per-channel peak limits, in
 * storage of its own. */
typedef struct sar_base {
    base f;
    double b1map[NS * 2 * 2], vop[2 * 2 * 2 * 2], bm[2];
} sar_base;

static void sar_init(sar_base *s)
{
    full_init(&s->f);
    for (int i = 0; i < NS * 4; i++)
        s->b1map[i] = 0.25 * (i % 5) - 0.5;
    /* Q0 = diag(2, 1); Q1 = [[1, 0.5i], [-0.5i, 1]] (Hermitian, eigenvalues 0.5 and 1.5) */
    static const double q[16] = {2, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0.5, 0, -0.5, 1, 0};
    memcpy(s->vop, q, sizeof q);
    s->bm[0] = 0.3;
    s->bm[1] = 0.4;
    ps_problem_desc *d = &s->f.d;
    d->nc = 2;
    d->b1scale = NULL;
    d->b1map = s->b1map;
    d->b1 = NULL;
    d->b1_max = PS_B1MAX_NONE;
    d->b1_max_channel = s->bm;
    d->nq = 2;
    d->vop = s->vop;
    d->sar_max = 3.2;
    d->tr = 0.01;
}

/* The constraints' fields: validated with clear messages, copied, in the
 * hash when present (and only then). */
static void test_constraints(void **state)
{
    (void)state;
    sar_base s;
    char msg[256];
    sar_init(&s);
    assert_int_equal(ps_problem_validate(&s.f.d, msg, sizeof msg), PS_CONVERGED);
    const uint64_t h0 = hash_of(&s.f.d);
    ps_problem *p = NULL;
    ps_problem_desc out;
    assert_int_equal(ps_problem_create(&s.f.d, &p), PS_CONVERGED);
    assert_int_equal(ps_problem_nq(p), 2);
    assert_int_equal(ps_problem_describe(p, &out), PS_CONVERGED);
    assert_true(out.vop != s.vop && out.b1_max_channel != s.bm);
    assert_memory_equal(out.vop, s.vop, sizeof s.vop);
    assert_memory_equal(out.b1_max_channel, s.bm, sizeof s.bm);
    assert_true(out.sar_max == 3.2 && out.tr == 0.01 && out.nq == 2);
    /* ps_constraints: peaks per channel and SAR_q = dt/TR sum_k b^H Q b */
    double x[2 * 2 * NT] = {0}, peak[2], sar[2];
    x[0] = 0.3;      /* u of channel 0, step 0 */
    x[2 * NT] = 0.4; /* u of channel 1, step 0 */
    x[3 * NT] = 0.1; /* v of channel 1, step 0 */
    assert_int_equal(ps_constraints(p, x, peak, sar), PS_CONVERGED);
    const double sc = s.f.d.dt / 0.01, b1 = 0.4 * 0.4 + 0.1 * 0.1;
    assert_true(peak[0] == 0.3 && fabs(peak[1] - sqrt(b1)) <= 1e-15);
    assert_true(fabs(sar[0] - sc * (2 * 0.09 + b1)) <= 1e-15 * sar[0]);
    /* Q1: |b0|^2 + |b1|^2 + 2 Re(conj(b0) 0.5i b1) = 0.09 + b1 + 2 * 0.3 * Re(0.5i (0.4 + 0.1i)) */
    assert_true(fabs(sar[1] - sc * (0.09 + b1 + 2 * 0.3 * -0.05)) <= 1e-15 * sar[1]);
    ps_problem_free(p);

    /* each field is in the hash */
    double *vals[] = {&s.vop[11], &s.bm[1], &s.f.d.sar_max, &s.f.d.tr};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        sar_init(&s);
        *vals[i] *= 1.25;
        if (i == 0)
            s.vop[13] = -s.vop[11]; /* still Hermitian */
        assert_true(hash_of(&s.f.d) != h0);
    }
    sar_init(&s);
    s.f.d.b1_max_channel = NULL;
    assert_true(hash_of(&s.f.d) != h0);

    static const struct {
        const char *what;
        int status;
        const char *msg;
    } bad[] = {
        {"vop NULL", PS_ERR_NULL, "vop is NULL with nq = 2"},
        {"nq 0 with vop", PS_ERR_SAR, "vop is given with nq = 0"},
        {"too many", PS_ERR_SIZE, "nq = 257 is too large"},
        {"sar_max 0", PS_ERR_SAR, "sar_max = 0 must be finite and > 0"},
        {"tr NaN", PS_ERR_NONFINITE, "tr is NaN"},
        {"tr Inf", PS_ERR_SAR, "tr = inf must be finite and > 0"},
        {"NaN element", PS_ERR_NONFINITE, "vop[1][0][1][1] is NaN"},
        {"not Hermitian", PS_ERR_SAR, "vop[1] is not Hermitian: Q[0][1] = 0+0.5i but conj(Q[1][0]) = 0-0.5i"},
        {"not PSD", PS_ERR_SAR, "vop[0] is not positive semidefinite"},
        {"b1_max too", PS_ERR_B1MAX, "b1_max = 0.2 and b1_max_channel are both given"},
        {"limit 0", PS_ERR_B1MAX, "b1_max_channel[1] = 0 must be finite and > 0"},
        {"limit NaN", PS_ERR_NONFINITE, "b1_max_channel[0] = nan must be finite and > 0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sar_init(&s);
        ps_problem_desc *d = &s.f.d;
        switch (i) {
        case 0: d->vop = NULL; break;
        case 1: d->nq = 0; break;
        case 2: d->nq = PS_MAX_VOPS + 1; break;
        case 3: d->sar_max = 0.0; break;
        case 4: d->tr = NAN; break;
        case 5: d->tr = INFINITY; break;
        case 6: s.vop[8 + 3] = NAN; break;
        case 7: s.vop[8 + 5] = 0.5; break; /* Q1[1][0] = +0.5i: Q1[0][1] is not its conjugate */
        case 8: s.vop[2] = s.vop[4] = 3.0; break; /* [[2, 3], [3, 1]]: an eigenvalue < 0 */
        case 9: d->b1_max = 0.2; break;
        case 10: s.bm[1] = 0.0; break;
        default: s.bm[0] = NAN; break;
        }
        int st = ps_problem_validate(d, msg, sizeof msg);
        printf("%-14s -> %d: %s\n", bad[i].what, st, msg);
        assert_int_equal(st, bad[i].status);
        assert_non_null(strstr(msg, bad[i].msg));
        assert_int_equal(ps_problem_create(d, &p), bad[i].status);
        assert_null(p);
    }
    /* a singular positive semidefinite VOP (v v^H, rank 1) is accepted */
    sar_init(&s);
    static const double rank1[8] = {1, 0, 0, -1, 0, 1, 1, 0}; /* v = (1, i) */
    memcpy(s.vop, rank1, sizeof rank1);
    assert_int_equal(ps_problem_validate(&s.f.d, msg, sizeof msg), PS_CONVERGED);
}

/* Designed gradient axes: their fields validated, in the hash when
 * present, and x holding each designed axis's waveform after the RF. */
static void test_designed_axes_fields(void **state)
{
    (void)state;
    base f;
    char msg[256];
    full_init(&f);
    const uint64_t h0 = hash_of(&f.d);
    f.d.design_g = PS_AXIS_X | PS_AXIS_Z;
    f.d.smax = 15000.0;
    f.d.gmax = 4.0;
    f.d.g_end = 1;
    assert_int_equal(ps_problem_validate(&f.d, msg, sizeof msg), PS_CONVERGED);
    const uint64_t h1 = hash_of(&f.d);
    assert_true(h1 != h0);
    f.d.gmax = 3.0;
    assert_true(hash_of(&f.d) != h1);
    f.d.gmax = 4.0;
    ps_problem *p = NULL;
    assert_int_equal(ps_problem_create(&f.d, &p), PS_CONVERGED);
    assert_int_equal(ps_problem_nx(p), 2 * NT + 2 * NT);
    assert_true(ps_problem_penalized(p));
    double x[4 * NT];
    assert_int_equal(ps_problem_x0(p, x), PS_CONVERGED);
    for (int k = 0; k < NT; k++) {
        assert_true(x[2 * NT + k] == f.g[3 * k]);          /* x axis */
        assert_true(x[3 * NT + k] == f.g[3 * k + 2]);      /* z axis */
    }
    ps_problem_free(p);
    static const struct {
        int status;
        const char *msg;
    } bad[] = {
        {PS_ERR_GRADIENT, "design_g = 9 has bits beyond"},
        {PS_ERR_GRADIENT, "smax is missing: design_g needs the slew-rate limit"},
        {PS_ERR_NONFINITE, "gmax is NaN"},
        {PS_ERR_GRADIENT, "gmax = -1 must be finite"},
        {PS_ERR_GRADIENT, "g_end needs gmax"},
        {PS_ERR_GRADIENT, "g_end = 2 must be 0 or 1"},
        {PS_ERR_GRADIENT, "gmax given without design_g"},
        {PS_ERR_GRADIENT, "smax = -5 must be finite and > 0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        base g;
        full_init(&g);
        g.d.design_g = PS_AXIS_Y;
        g.d.smax = 15000.0;
        switch (i) {
        case 0: g.d.design_g = 9; break;
        case 1: g.d.smax = 0.0; break;
        case 2: g.d.gmax = NAN; break;
        case 3: g.d.gmax = -1.0; break;
        case 4: g.d.g_end = 1; break;
        case 5: g.d.g_end = 2; break;
        case 7: g.d.smax = -5.0; break;
        default: g.d.design_g = 0; g.d.smax = 0.0; g.d.gmax = 4.0; break;
        }
        int st = ps_problem_validate(&g.d, msg, sizeof msg);
        printf("gradient design case %zu -> %d: %s\n", i, st, msg);
        assert_int_equal(st, bad[i].status);
        assert_non_null(strstr(msg, bad[i].msg));
    }
}

/* describe gives back copies of every array and the scalars. */
static void test_create_describe(void **state)
{
    (void)state;
    base f;
    array_ref arr[16];
    full_init(&f);
    f.d.gamma_bar = 4000.0;
    ps_problem *p = NULL;
    assert_int_equal(ps_problem_create(&f.d, &p), PS_CONVERGED);
    /* the problem owns its copies: the caller's arrays may change */
    size_t na = arrays_of(&f, arr);
    for (size_t a = 0; a < na; a++)
        tu_poison(arr[a].a, arr[a].n);
    base ref;
    full_init(&ref);
    ps_problem_desc d;
    memset(&d, 0xff, sizeof d);
    assert_int_equal(ps_problem_describe(p, &d), PS_CONVERGED);
    const double *got[] = {d.r, d.target, d.df, d.b1scale, d.w,
                           d.m0, d.t1, d.t2, d.g, d.b1};
    arrays_of(&ref, arr);
    for (size_t a = 0; a < na; a++) {
        assert_non_null(got[a]);
        assert_true(tu_compare(arr[a].name, got[a], arr[a].a, arr[a].n, 0.0, 0.0));
    }
    assert_int_equal(d.ns, NS);
    assert_int_equal(d.nt, NT);
    assert_true(d.dt == ref.d.dt);
    assert_true(d.gamma_bar == 4000.0);
    assert_true(d.lambda == ref.d.lambda);
    assert_true(d.b1_max == ref.d.b1_max);
    assert_int_equal(d.loss, PS_LOSS_XY);
    ps_problem_free(p);

    /* absent optional arrays stay absent; the start pulse becomes zeros */
    full_init(&f);
    f.d.df = f.d.b1scale = f.d.w = f.d.m0 = f.d.t1 = f.d.t2 = f.d.b1 = NULL;
    f.d.b1_max = PS_B1MAX_NONE;
    f.d.gamma_bar = 0.0;
    assert_int_equal(ps_problem_create(&f.d, &p), PS_CONVERGED);
    memset(&d, 0xff, sizeof d);
    assert_int_equal(ps_problem_describe(p, &d), PS_CONVERGED);
    assert_null(d.df);
    assert_null(d.b1scale);
    assert_null(d.w);
    assert_null(d.m0);
    assert_null(d.t1);
    assert_null(d.t2);
    assert_non_null(d.r);
    assert_non_null(d.target);
    assert_non_null(d.g);
    assert_non_null(d.b1);
    for (size_t k = 0; k < 2 * NT; k++)
        assert_true(d.b1[k] == 0.0);
    assert_true(d.gamma_bar == PS_GAMMA_BAR_DEFAULT);
    assert_true(isinf(d.b1_max));
    double x[2 * NT];
    tu_poison(x, 2 * NT);
    assert_int_equal(ps_problem_x0(p, x), PS_CONVERGED);
    for (size_t k = 0; k < 2 * NT; k++)
        assert_true(x[k] == 0.0);
    ps_problem_free(p);
    ps_problem_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_pinned),
        cmocka_unit_test(test_hash_sees_every_field),
        cmocka_unit_test(test_create_describe),
        cmocka_unit_test(test_constraints),
        cmocka_unit_test(test_designed_axes_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
