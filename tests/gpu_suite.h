/*
 * The main() of the GPU test programs, shared so that they all skip and
 * pick their group the same way: exit 77 (meson counts it as skipped)
 * without a usable GPU, else run the whole group, or with
 * PS_GPU_TEST_QUICK set the quick subset that runs under compute-sanitizer;
 * PS_GPU_TEST_ONLY=PATTERN runs only the tests of the group whose names
 * match it (cmocka's test filter: racecheck, the slowest sanitizer, takes
 * one test at a time). Include after <cmocka.h>.
 */
#ifndef PS_TESTS_GPU_SUITE_H
#define PS_TESTS_GPU_SUITE_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/gpu.h"

/* 1 (after saying so) when no GPU is usable: the caller returns 77. */
static inline int tu_no_gpu(void)
{
    if (ps_gpu_usable(NULL) == 0)
        return 0;
    printf("no usable GPU: skipping\n");
    return 1;
}

static inline int tu_run_gpu_suite(const struct CMUnitTest *quick, size_t nquick,
                                   const struct CMUnitTest *tests, size_t ntests)
{
    if (tu_no_gpu())
        return 77;
    const char *only = getenv("PS_GPU_TEST_ONLY");
    if (only && *only)
        cmocka_set_test_filter(only);
    /* the group names are those cmocka_run_group_tests would give */
    if (getenv("PS_GPU_TEST_QUICK"))
        return _cmocka_run_group_tests("quick", quick, nquick, NULL, NULL);
    return _cmocka_run_group_tests("tests", tests, ntests, NULL, NULL);
}

/* quick and tests: arrays of struct CMUnitTest (their sizes are taken here). */
#define TU_RUN_GPU_SUITE(quick, tests)                                   \
    tu_run_gpu_suite((quick), sizeof(quick) / sizeof((quick)[0]), (tests), \
                     sizeof(tests) / sizeof((tests)[0]))

#endif /* PS_TESTS_GPU_SUITE_H */
