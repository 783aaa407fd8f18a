/*
 * Golden trajectory: slice1d on the CPU (float64 spins, 40 iterations);
 * f and the evaluation count per iteration must match the committed
 * tests/data/golden_slice1d.txt. The trajectory does not depend on the
 * thread count (fixed lanes, fixed-order sums): the run is repeated with 1
 * and 2 threads and must be bit-identical.
 *
 * Regenerate (after a deliberate algorithm change only):
 *   PS_GOLDEN_WRITE=1 ./tests/test_golden
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "persolve.h"
#include "test_util.h"

#define GOLDEN_REL "/tests/data/golden_slice1d.txt"
#define ITERS 40

/* The committed file: $PS_SOURCE_DIR (a checkout moved elsewhere) or the
 * source directory this test was built from. */
static const char *golden_path(void)
{
    static char path[4096];
    const char *root = getenv("PS_SOURCE_DIR");
    snprintf(path, sizeof path, "%s%s", root ? root : PS_SOURCE_DIR, GOLDEN_REL);
    return path;
}

static void run(int threads, ps_result *r, double *x)
{
    ps_problem *p;
    char err[256];
    assert_int_equal(ps_preset_create("slice1d", &p, err, sizeof err), 0);
    assert_int_equal(ps_problem_x0(p, x), 0);
    ps_options o;
    ps_options_default(&o);
    o.backend = PS_BACKEND_CPU;
    o.precision = PS_PRECISION_DOUBLE;
    o.max_iterations = ITERS;
    o.threads = threads;
    assert_int_equal(solve_persistent(p, &o, x, r), PS_MAX_ITERATIONS);
    ps_problem_free(p);
}

static void golden_slice1d(void **state)
{
    ps_result r1, r2;
    double *x1 = malloc(1000 * sizeof *x1), *x2 = malloc(1000 * sizeof *x2);
    run(1, &r1, x1);
    run(2, &r2, x2);
    assert_int_equal(r1.history_len, ITERS + 1);
    assert_int_equal(r2.history_len, ITERS + 1);
    for (size_t i = 0; i <= ITERS; i++)
        assert_true(r1.history[i].f == r2.history[i].f);
    for (size_t i = 0; i < 1000; i++)
        assert_true(x1[i] == x2[i]);

    if (getenv("PS_GOLDEN_WRITE")) {
        FILE *fp = fopen(golden_path(), "w");
        assert_non_null(fp);
        fprintf(fp, "# slice1d, CPU, float64 spins: iteration f evaluations\n");
        for (size_t i = 0; i <= ITERS; i++)
            fprintf(fp, "%lld %.17g %lld\n", (long long)r1.history[i].iteration,
                    r1.history[i].f, (long long)r1.history[i].evaluations);
        fclose(fp);
    }
    FILE *fp = fopen(golden_path(), "r");
    assert_non_null(fp);
    char line[256];
    assert_non_null(fgets(line, sizeof line, fp)); /* header */
    double got[ITERS + 1], ref[ITERS + 1];
    for (size_t i = 0; i <= ITERS; i++) {
        long long it, ev;
        double f;
        assert_int_equal(fscanf(fp, "%lld %lf %lld", &it, &f, &ev), 3);
        assert_int_equal(it, (long long)i);
        assert_int_equal(ev, (long long)r1.history[i].evaluations);
        ref[i] = f;
        got[i] = r1.history[i].f;
    }
    fclose(fp);
    /* libm may differ in the last bit between systems: 1e-9 relative */
    assert_true(tu_compare("golden f", got, ref, ITERS + 1, 0.0, 1e-9));
    ps_result_free(&r1);
    ps_result_free(&r2);
    free(x1);
    free(x2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(golden_slice1d),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
