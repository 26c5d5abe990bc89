/* Rank-level profiles (Zeus master's rank,dp_rank,pp_rank,tp_rank,stage,instruction,frequency,
 * time,energy CSV) read by prs_profile_parse: a stage's ranks combined (time the longest, energy
 * the sum, in file order), and every inconsistency refused with the file and line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "perseus/profile.h"

#define HDR "rank,dp_rank,pp_rank,tp_rank,stage,instruction,frequency,time,energy\n"

static prs_profile *parse(const char *text, prs_error *err)
{
    prs_profile *p = NULL;
    int rc = prs_profile_parse("z.csv", text, strlen(text), &p, err);
    if (rc != PRS_OK) assert_null(p);
    return p;
}

static void expect_fail(const char *text, const char *prefix, const char *word)
{
    prs_error err = {0};
    prs_profile *p = parse(text, &err);
    if (p) {
        prs_profile_free(p);
        fail_msg("accepted: %s", text);
    }
    assert_int_equal(err.code, PRS_EPARSE);
    if (strncmp(err.msg, prefix, strlen(prefix)) != 0 || !strstr(err.msg, word))
        fail_msg("message '%s' lacks '%s' ... '%s'", err.msg, prefix, word);
}

/* Two tensor-parallel ranks per stage, two stages, rows shuffled: one row per group, the
 * slower rank's time, both energies added, groups in the order of their first line. */
static void test_combined(void **state)
{
    (void)state;
    const char *text = HDR "1,0,0,1,0,forward,1410,0.010,3.5\n"
                           "0,0,0,0,0,forward,1410,0.012,4.0\n"
                           "2,0,1,0,1,backward,1410,0.030,9\n"
                           "3,0,1,1,1,backward,1410,0.031,10\n"
                           "0,0,0,0,0,load,1410,0.001,0.1\n"
                           "0,0,0,0,0,forward,1200,0.015,3.0\n"
                           "1,0,0,1,0,forward,1200,0.014,2.5\n";
    prs_error err = {0};
    prs_profile *p = parse(text, &err);
    if (!p) fail_msg("%s", err.msg);
    assert_int_equal(prs_profile_nrows(p), 3);
    const prs_profile_row *r = prs_profile_rows(p);
    assert_int_equal(r[0].stage, 0);
    assert_int_equal(r[0].freq_mhz, 1410);
    assert_true(r[0].time_s == 0.012);
    assert_true(r[0].energy_j == 7.5);
    assert_int_equal(r[0].line, 2);
    assert_int_equal(r[1].stage, 1);
    assert_int_equal(r[1].instr, PRS_BACKWARD);
    assert_true(r[1].time_s == 0.031);
    assert_true(r[1].energy_j == 19);
    assert_int_equal(r[1].line, 4);
    assert_int_equal(r[2].freq_mhz, 1200);
    assert_true(r[2].time_s == 0.015);
    assert_true(r[2].energy_j == 5.5);
    assert_int_equal(r[2].line, 7);
    assert_int_equal(prs_profile_num_stages(p), 2);
    prs_profile_free(p);
}

/* Columns in any order, data-parallel replicas summed too (as Zeus does). */
static void test_any_order_and_dp(void **state)
{
    (void)state;
    const char *text = "stage,instruction,frequency,time,energy,tp_rank,pp_rank,dp_rank,rank\n"
                       "0,forward,1410,0.01,1,0,0,0,0\n"
                       "0,forward,1410,0.02,2,0,0,1,1\n";
    prs_error err = {0};
    prs_profile *p = parse(text, &err);
    if (!p) fail_msg("%s", err.msg);
    assert_int_equal(prs_profile_nrows(p), 1);
    assert_true(prs_profile_rows(p)[0].time_s == 0.02);
    assert_true(prs_profile_rows(p)[0].energy_j == 3);
    prs_profile_free(p);
}

static void test_header_errors(void **state)
{
    (void)state;
    expect_fail("rank,dp_rank,pp_rank,stage,instruction,frequency,time,energy\n"
                "0,0,0,0,forward,1410,0.01,1\n",
                "z.csv:1: ", "missing column 'tp_rank'");
    expect_fail(HDR "0,0,0,0,0,forward,1410,0.01\n", "z.csv:2: ", "expected 9 fields, got 8");
    expect_fail(HDR "0,0,-1,0,0,forward,1410,0.01,1\n",
                "z.csv:2: ", "column 'pp_rank': expected an integer");
    expect_fail(HDR "x,0,0,0,0,forward,1410,0.01,1\n", "z.csv:2: ", "column 'rank'");
}

static void test_inconsistent(void **state)
{
    (void)state;
    /* a rank listed twice for one group */
    expect_fail(
        HDR "0,0,0,0,0,forward,1410,0.01,1\n"
            "1,0,0,1,0,forward,1410,0.01,1\n"
            "0,0,0,0,0,forward,1410,0.02,1\n",
        "z.csv:4: ", "rank 0 has a second row for stage 0 forward at 1410 MHz (first on line 2)");
    /* a stage whose ranks measured different clocks */
    expect_fail(HDR "0,0,0,0,0,forward,1410,0.01,1\n"
                    "1,0,0,1,0,forward,1410,0.01,1\n"
                    "0,0,0,0,0,forward,1395,0.01,1\n",
                "z.csv:4: ", "stage 0 forward at 1395 MHz has no row from rank 1");
    /* a rank whose coordinates change */
    expect_fail(HDR "0,0,0,0,0,forward,1410,0.01,1\n"
                    "0,0,1,0,0,backward,1410,0.01,1\n",
                "z.csv:3: ", "rank 0 is dp 0, pp 1, tp 0 here but dp 0, pp 0, tp 0 on line 2");
    /* two ranks at the same coordinates */
    expect_fail(HDR "0,0,0,0,0,forward,1410,0.01,1\n"
                    "1,0,0,0,0,forward,1410,0.01,1\n",
                "z.csv:3: ", "ranks 0 (line 2) and 1 both claim dp 0, pp 0, tp 0");
    /* a stage on two pipeline positions */
    expect_fail(HDR "0,0,0,0,0,forward,1410,0.01,1\n"
                    "1,0,1,0,0,forward,1410,0.01,1\n",
                "z.csv:3: ", "a stage runs on one pipeline position");
    /* a combined energy above the limit */
    expect_fail(HDR "0,0,0,0,0,forward,1410,0.01,6e11\n"
                    "1,0,0,1,0,forward,1410,0.01,6e11\n",
                "z.csv:2: ", "energy");
    /* only load rows */
    expect_fail(HDR "0,0,0,0,0,load,1410,0.01,1\n", "z.csv: ", "no forward or backward");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_combined),
        cmocka_unit_test(test_any_order_and_dp),
        cmocka_unit_test(test_header_errors),
        cmocka_unit_test(test_inconsistent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
