/*
 * The helpers of src/common: FNV-1a 64.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/hash.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fnv1a_vectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
