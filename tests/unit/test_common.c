/*
 * The helpers of src/common: FNV-1a 64, the monotonic clock, the median
 * and quantiles, files replaced atomically.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/stats.h"

/* The published FNV-1a 64 test vectors, and a hash continued in parts. */
static void test_fnv1a_vectors(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        uint64_t out;
    } v[] = {
        {"", 0xcbf29ce484222325ull},
        {"a", 0xaf63dc4c8601ec8cull},
        {"b", 0xaf63df4c8601f1a5ull},
        {"foobar", 0x85944171f73967e8ull},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        assert_true(ps_fnv1a(PS_FNV_OFFSET, v[i].in, strlen(v[i].in)) == v[i].out);
    assert_true(ps_fnv1a(ps_fnv1a(PS_FNV_OFFSET, "foo", 3), "bar", 3) == 0x85944171f73967e8ull);
}

/* The clock never runs back; a deadline is normalized and lies that far
 * ahead (capped at 1e9 s). */
static void test_monotonic_clock(void **state)
{
    (void)state;
    double t0 = ps_monotonic_seconds(), t1 = ps_monotonic_seconds();
    assert_true(t0 > 0.0 && t1 >= t0);
    const double ahead[] = {0.0, 20e-6, 0.9999999999, 1.5, 3600.25, 1e12};
    for (size_t i = 0; i < sizeof ahead / sizeof ahead[0]; i++) {
        double before = ps_monotonic_seconds();
        struct timespec t = ps_monotonic_after(ahead[i]);
        double after = ps_monotonic_seconds();
        double at = (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
        double want = ahead[i] > 1e9 ? 1e9 : ahead[i];
        assert_true(t.tv_nsec >= 0 && t.tv_nsec < 1000000000L);
        assert_true(at >= before + want - 1e-6 && at <= after + want + 1e-6);
    }
}

/* Median of odd and even counts (v unchanged), nearest-rank quantiles. */
static void test_median_quantile(void **state)
{
    (void)state;
    const double odd[] = {5.0, -1.0, 3.0, 2.0, 4.0};
    double even[] = {8.0, 1.0, 4.0, 2.0};
    double one = 7.0;
    assert_true(ps_median(odd, 5) == 3.0);
    assert_true(odd[0] == 5.0 && odd[1] == -1.0 && odd[4] == 4.0);
    assert_true(ps_median(even, 4) == 3.0);
    assert_true(even[0] == 8.0 && even[3] == 2.0);
    assert_true(ps_median(&one, 1) == 7.0);

    /* nearest rank: the ceil(q n)-th smallest, clamped to 1..n */
    assert_true(ps_quantile(even, 4, 0.5) == 2.0);
    assert_true(even[0] == 1.0 && even[1] == 2.0 && even[2] == 4.0 && even[3] == 8.0);
    assert_true(ps_quantile(even, 4, 0.51) == 4.0);
    assert_true(ps_quantile(even, 4, 0.99) == 8.0);
    assert_true(ps_quantile(even, 4, 0.0) == 1.0);
    assert_true(ps_quantile(even, 4, 1.5) == 8.0);
    double many[200];
    for (int i = 0; i < 200; i++)
        many[i] = (double)((i * 37) % 200);
    assert_true(ps_quantile(many, 200, 0.99) == 197.0);
}

/* The whole file of path, NUL-terminated, into buf[len]; its length or -1. */
static long slurp(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (long)n;
}

/* No temporary file of path is left. */
static void assert_no_temp(const char *path)
{
    char pattern[256];
    glob_t g;
    snprintf(pattern, sizeof pattern, "%s.tmp*", path);
    assert_int_equal(glob(pattern, 0, NULL, &g), GLOB_NOMATCH);
    globfree(&g);
}

/* A new file and a replaced one hold exactly the bytes written; each
 * failing step is reported with its errno and leaves no temporary file. */
static void test_replace_file(void **state)
{
    (void)state;
    const char *path = "common_replace.txt";
    char tmp[256], got[64];
    unlink(path);
    assert_int_equal(ps_replace_file(path, 0644, "first\n", 6, tmp, sizeof tmp), PS_REPLACE_DONE);
    assert_int_equal(slurp(path, got, sizeof got), 6);
    assert_string_equal(got, "first\n");
    assert_int_equal(strncmp(tmp, "common_replace.txt.tmp-", 23), 0);
    assert_int_equal(ps_replace_file(path, 0644, "second", 6, tmp, sizeof tmp), PS_REPLACE_DONE);
    assert_int_equal(slurp(path, got, sizeof got), 6);
    assert_string_equal(got, "second");
    assert_int_equal(ps_replace_file(path, 0644, "", 0, tmp, sizeof tmp), PS_REPLACE_DONE);
    assert_int_equal(slurp(path, got, sizeof got), 0);
    assert_no_temp(path);

    /* the temporary name does not fit tmp[] */
    errno = 0;
    assert_int_equal(ps_replace_file(path, 0644, "x", 1, tmp, 20), PS_REPLACE_CREATE);
    assert_int_equal(errno, ENAMETOOLONG);
    /* no directory to create it in */
    errno = 0;
    assert_int_equal(ps_replace_file("common_none/f.txt", 0644, "x", 1, tmp, sizeof tmp),
                     PS_REPLACE_CREATE);
    assert_int_equal(errno, ENOENT);
    /* a directory in the way of the rename */
    const char *dir = "common_replace_dir";
    rmdir(dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    errno = 0;
    assert_int_equal(ps_replace_file(dir, 0644, "x", 1, tmp, sizeof tmp), PS_REPLACE_RENAME);
    assert_int_equal(errno, EISDIR);
    assert_no_temp(dir);
    assert_int_equal(rmdir(dir), 0);
    assert_int_equal(unlink(path), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fnv1a_vectors),
        cmocka_unit_test(test_monotonic_clock),
        cmocka_unit_test(test_median_quantile),
        cmocka_unit_test(test_replace_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
