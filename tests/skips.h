/* Skips that CTest sees. cmocka's skip() leaves the group's result at "passed", so a program
 * whose cases could not run (no shared data set, no fake driver library, a sanitizer build)
 * would be reported as Passed. Such a case calls prs_skip_case(why) instead of skip(), and main
 * returns prs_test_result(cmocka_run_group_tests(...)): 1 if any case failed, else
 * PRS_TEST_SKIPPED (the tests' SKIP_RETURN_CODE in tests/CMakeLists.txt) if any case was skipped,
 * else 0. A program that ran only part of its cases is thus "Skipped", never "Passed", and its
 * output names the cases that did not run and why.
 *
 * A case whose input is part of the project (the shared data set, a fake driver library or a
 * program built from this tree, the source directory) calls prs_skip_input(why): it skips as
 * above on a developer's machine, but fails when the environment variable CI is set (to anything
 * but "", "0" or "false"), so a continuous-integration run never passes by skipping. */
#ifndef PRS_TESTS_SKIPS_H
#define PRS_TESTS_SKIPS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PRS_TEST_SKIPPED 77

static int prs_skipped_cases;

#define prs_skip_case(why)                                                                         \
    do {                                                                                           \
        prs_skipped_cases++;                                                                       \
        print_message("[ SKIPPED  ] %s: %s\n", __func__, (why));                                   \
        skip();                                                                                    \
    } while (0)

/* CI is set: a missing input fails instead of skipping. */
static inline int prs_in_ci(void)
{
    const char *v = getenv("CI");
    return v && *v && strcmp(v, "0") != 0 && strcmp(v, "false") != 0;
}

#define prs_skip_input(why)                                                                        \
    do {                                                                                           \
        if (prs_in_ci()) fail_msg("%s: %s (CI is set: a missing input fails)", __func__, (why));   \
        prs_skip_case(why);                                                                        \
    } while (0)

static inline int prs_test_result(int failed)
{
    if (failed) return 1;
    if (prs_skipped_cases) {
        printf("%d case(s) skipped: reporting the test as skipped (exit %d)\n", prs_skipped_cases,
               PRS_TEST_SKIPPED);
        return PRS_TEST_SKIPPED;
    }
    return 0;
}

#endif
