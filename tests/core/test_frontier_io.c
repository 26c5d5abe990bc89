/* plans.prs, the frontier's store (src/core/frontier_io.c), against bad input:
 *   - a point the reader would refuse (a figure not finite, a negative energy) is never written;
 *   - the reader refuses, with file:line, a file of no points (text in memory may have none), time
 *     units outside 0..2^62, energies negative or not finite, an evaluated time that is no whole
 *     number of units, and more points than PRS_MAX_FRONTIER_POINTS;
 *   - the reader's memory is bounded by the pipeline: a line longer than any the writer makes, a
 *     file of NUL bytes (/dev/zero) and an endless line are refused after a bounded read. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "frontier_int.h"
#include "perseus/limits.h"
#include "perseus/planner.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* What the writer makes of two_points(): line 11 and 12 are the points. */
static const char GOOD[] = "perseus-plans 1\n"
                           "stages 1\n"
                           "microbatches 1\n"
                           "schedule 1f1b\n"
                           "virtual_stages 1\n"
                           "unit_time 0.001\n"
                           "blocking_power 83.64\n"
                           "cost_model exp\n"
                           "points 2\n"
                           "base 1410 1410\n"
                           "p 100 10.0 0.5 0.1 10.5\n"
                           "p 90 11.0 0.25 0.09 11.5 0:1500\n";

static prs_pipeline pipe1(void)
{
    prs_pipeline p = {0};
    p.stages = 1;
    p.microbatches = 1;
    p.schedule = PRS_SCHEDULE_1F1B;
    p.virtual_stages = 1;
    p.unit_time_s = 0.001;
    p.blocking_power_w = 83.64;
    return p;
}

/* The frontier of GOOD, with the second point's energy replaced by e2. */
static prs_frontier *two_points(double e2)
{
    prs_pipeline p = pipe1();
    int base[] = {1410, 1410}, op = 0, freq = 1500;
    prs_frontier *f = prs__frontier_new(&p, PRS_COST_EXP, base);
    assert_non_null(f);
    prs_frontier_point a = {100, 0.1, 10.0, 0.5, 0.1, 10.5, 0};
    prs_frontier_point b = {90, 0.09, e2, 0.25, 0.09, 11.5, 0};
    assert_int_equal(prs__frontier_push(f, &a, NULL, NULL, 0), 0);
    assert_int_equal(prs__frontier_push(f, &b, &op, &freq, 1), 0);
    return f;
}

static void test_round_trip(void **state)
{
    (void)state;
    prs_frontier *f = two_points(11.0);
    char *text = NULL;
    size_t len = 0;
    prs_error err = {0, ""};
    assert_int_equal(prs_frontier_to_plans(f, &text, &len, &err), 0);
    assert_string_equal(text, GOOD);
    prs_frontier *back = NULL;
    assert_int_equal(prs_frontier_from_plans("mem", text, len, &back, &err), 0);
    assert_int_equal(prs_frontier_size(back), 2);
    prs_frontier_free(back);
    free(text);
    prs_frontier_free(f);
}

/* A point's bound (hull) is written as "bound=J" before its changes and read back; a bad one is
 * refused naming the line; frontier-detail.csv ends with the bound column (empty: unknown). */
static void test_bound_round_trip(void **state)
{
    (void)state;
    prs_frontier *f = two_points(11.0);
    f->pts[1].bound_j = 10.25;
    char *text = NULL;
    size_t len = 0;
    prs_error err = {0, ""};
    assert_int_equal(prs_frontier_to_plans(f, &text, &len, &err), 0);
    assert_non_null(strstr(text, "p 90 11.0 0.25 0.09 11.5 bound=10.25 0:1500\n"));
    prs_frontier *back = NULL;
    assert_int_equal(prs_frontier_from_plans("mem", text, len, &back, &err), 0);
    assert_true(prs_frontier_point_at(back, 0)->bound_j == 0);
    assert_true(prs_frontier_point_at(back, 1)->bound_j == 10.25);
    int clocks[2];
    assert_int_equal(prs_frontier_plan(back, 1, clocks, &err), 0);
    assert_int_equal(clocks[0], 1500);
    prs_frontier_free(back);
    char *bad = strstr(text, "bound=10.25");
    memcpy(bad, "bound=-1.25", 11);
    assert_int_equal(prs_frontier_from_plans("mem", text, len, &back, &err), PRS_EPARSE);
    assert_non_null(strstr(err.msg, "mem:12"));
    assert_non_null(strstr(err.msg, "bound"));
    free(text);
    char dir[] = "/tmp/prs_test_fio_XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    assert_int_equal(prs_frontier_save(f, dir, &err), 0);
    snprintf(path, sizeof path, "%s/frontier-detail.csv", dir);
    FILE *in = fopen(path, "r");
    assert_non_null(in);
    char line[256];
    assert_non_null(fgets(line, sizeof line, in));
    assert_string_equal(line,
                        "index,time_units,time,energy,cost_change,eval_time,eval_energy,bound\n");
    assert_non_null(fgets(line, sizeof line, in));
    assert_string_equal(line, "0,100,0.1,10.0,0.5,0.1,10.5,\n");
    assert_non_null(fgets(line, sizeof line, in));
    assert_string_equal(line, "1,90,0.09,11.0,0.25,0.09,11.5,10.25\n");
    fclose(in);
    const char *names[] = {"frontier.csv", "frontier-detail.csv", "plans.prs"};
    for (size_t i = 0; i < NELEM(names); i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        remove(path);
    }
    rmdir(dir);
    prs_frontier_free(f);
}

static void test_writer_refuses_non_finite(void **state)
{
    (void)state;
    const double bad[] = {NAN, INFINITY, -1.0};
    char dir[] = "/tmp/prs_test_fio_XXXXXX";
    assert_non_null(mkdtemp(dir));
    for (size_t i = 0; i < NELEM(bad); i++) {
        prs_frontier *f = two_points(bad[i]);
        prs_error err = {0, ""};
        assert_int_equal(prs_frontier_save(f, dir, &err), PRS_ERANGE);
        assert_non_null(
            strstr(err.msg, "point 1: energy is not a finite number >= 0: not written"));
        char *text = NULL;
        size_t len = 0;
        assert_int_equal(prs_frontier_to_plans(f, &text, &len, &err), PRS_ERANGE);
        assert_null(text);
        prs_frontier_free(f);
    }
    char path[64];
    snprintf(path, sizeof path, "%s/plans.prs", dir);
    assert_int_not_equal(access(path, F_OK), 0); /* nothing written */
    assert_int_equal(rmdir(dir), 0);
}

/* GOOD with line `lineno` (1-based) replaced by `line`, parsed: the code and message. */
static int parse_with(int lineno, const char *line, prs_error *err)
{
    char text[4096];
    size_t o = 0;
    const char *s = GOOD;
    for (int n = 1; *s; n++) {
        const char *nl = strchr(s, '\n');
        size_t len = (size_t)(nl - s);
        o += (size_t)snprintf(text + o, sizeof text - o, "%.*s\n",
                              n == lineno ? (int)strlen(line) : (int)len, n == lineno ? line : s);
        s = nl + 1;
    }
    prs_frontier *f = NULL;
    int rc = prs_frontier_from_plans("t.prs", text, o, &f, err);
    prs_frontier_free(f);
    return rc;
}

static void expect_refused(int lineno, const char *line, const char *want)
{
    prs_error err = {0, ""};
    assert_int_equal(parse_with(lineno, line, &err), PRS_EPARSE);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "t.prs:%d: ", lineno);
    if (strncmp(err.msg, prefix, strlen(prefix)) != 0 || !strstr(err.msg, want))
        fail_msg("line '%s': message '%s' lacks '%s%s'", line, err.msg, prefix, want);
}

static void test_reader_refuses_bad_points(void **state)
{
    (void)state;
    prs_error err = {0, ""};
    assert_int_equal(parse_with(0, "", &err), 0);
    const char *units = "time units outside 0..2^62";
    expect_refused(11, "p -5 10.0 0.5 0.1 10.5", units);
    expect_refused(11, "p 9223372036854775807 10.0 0.5 0.1 10.5", units);
    expect_refused(11, "p -9223372036854775807 10.0 0.5 0.1 10.5", units);
    const char *energy = "energy is not a finite number >= 0";
    expect_refused(11, "p 100 -1 0.5 0.1 10.5", energy);
    expect_refused(11, "p 100 nan 0.5 0.1 10.5", "bad number"); /* not a number to the parser */
    expect_refused(11, "p 100 1e999 0.5 0.1 10.5", "bad number");
    expect_refused(12, "p 90 11.0 0.25 0.09 -11.5 0:1500", "evaluated energy is not a finite");
    const char *eval = "evaluated time is not a whole number >= 0 of unit_time";
    expect_refused(11, "p 100 10.0 0.5 0.1005 10.5", eval);
    expect_refused(11, "p 100 10.0 0.5 -0.1 10.5", eval);
    expect_refused(11, "p 100 10.0 0.5 1e300 10.5", eval);
    expect_refused(9, "points 100000001", "expected 'points N' with N at most 100000000");
}

/* points 0: a plans file holds at least one plan; the text in memory (a server's job whose
 * planner found none) may hold none. */
static void test_no_points(void **state)
{
    (void)state;
    const char *text =
        "perseus-plans 1\nstages 1\nmicrobatches 1\nschedule 1f1b\nvirtual_stages 1\n"
        "unit_time 0.001\nblocking_power 83.64\ncost_model exp\npoints 0\n"
        "base 1410 1410\n";
    prs_frontier *f = NULL;
    prs_error err = {0, ""};
    assert_int_equal(prs_frontier_from_plans("mem", text, strlen(text), &f, &err), 0);
    assert_int_equal(prs_frontier_size(f), 0);
    prs_frontier_free(f);
    char dir[] = "/tmp/prs_test_fio_XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/plans.prs", dir);
    FILE *out = fopen(path, "w");
    assert_non_null(out);
    fputs(text, out);
    assert_int_equal(fclose(out), 0);
    assert_int_equal(prs_frontier_load(dir, &f, &err), PRS_EPARSE);
    assert_null(f);
    assert_non_null(strstr(err.msg, "plans.prs:9: points 0: a plans file holds at least one plan"));
    unlink(path);
    rmdir(dir);
}

/* A 10 MB line, a file of NUL bytes: refused after reading at most a line's bound. */
static void test_reader_bounded(void **state)
{
    (void)state;
    size_t n = 10u << 20;
    char *text = malloc(sizeof GOOD + n);
    assert_non_null(text);
    memcpy(text, GOOD, sizeof GOOD - 1);
    memset(text + sizeof GOOD - 1, 'a', n);
    prs_frontier *f = NULL;
    prs_error err = {0, ""};
    assert_int_equal(prs_frontier_from_plans("t.prs", text, sizeof GOOD - 1 + n, &f, &err),
                     PRS_EPARSE);
    assert_non_null(strstr(err.msg, "t.prs:13: line too long"));
    memset(text, 'p', n); /* a first line of 10 MB */
    assert_int_equal(prs_frontier_from_plans("t.prs", text, n, &f, &err), PRS_EPARSE);
    assert_non_null(strstr(err.msg, "t.prs:1: line too long"));
    memcpy(text, GOOD, sizeof GOOD - 1);
    memset(text + 200, 'b', n - 200); /* the base line, endless */
    assert_int_equal(prs_frontier_from_plans("t.prs", text, n, &f, &err), PRS_EPARSE);
    assert_non_null(strstr(err.msg, "line too long"));
    free(text);

    char dir[] = "/tmp/prs_test_fio_XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/plans.prs", dir);
    assert_int_equal(symlink("/dev/zero", path), 0);
    assert_int_equal(prs_frontier_load(dir, &f, &err), PRS_EPARSE);
    assert_non_null(strstr(err.msg, "plans.prs:1: embedded NUL byte"));
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_bound_round_trip),
        cmocka_unit_test(test_writer_refuses_non_finite),
        cmocka_unit_test(test_reader_refuses_bad_points),
        cmocka_unit_test(test_no_points),
        cmocka_unit_test(test_reader_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
