/* zeus_wire.h: the translation between Zeus's wire format and API v1 — 1F1B order, clocks for
 * pipe-schedule entries that are not computations, results as v1 iterations (numbering, the
 * M + 1 forwards of a first iteration, empty energy lists, blocking power) and bad input named. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "zeus_wire.h"

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);
    assert_non_null(v);
    return v;
}

static void test_1f1b_order(void **state)
{
    (void)state;
    unsigned char kind[8];
    long mb[8];
    /* Zeus master's recording, stage 0 of 4 with 4 microbatches: F F F F B B B B (3 warm-up
     * forwards, one steady pair, 3 cool-down backwards); the last stage alternates. */
    zw_1f1b_order(4, 0, 4, kind, mb);
    const unsigned char first[8] = {1, 1, 1, 1, 2, 2, 2, 2};
    assert_memory_equal(kind, first, 8);
    zw_1f1b_order(4, 3, 4, kind, mb);
    const unsigned char last[8] = {1, 2, 1, 2, 1, 2, 1, 2};
    assert_memory_equal(kind, last, 8);
    assert_int_equal(mb[6], 3);
    zw_1f1b_order(4, 1, 4, kind, mb);
    const unsigned char mid[8] = {1, 1, 1, 2, 1, 2, 2, 2};
    assert_memory_equal(kind, mid, 8);
}

static void test_power_states_keep_previous_clock(void **state)
{
    (void)state;
    /* load F p2p F B step: leading load takes the first computation's clock, p2p and step the
     * clock of the computation before them. */
    const unsigned char sched[] = {ZW_OTHER,   ZW_FORWARD,  ZW_OTHER,
                                   ZW_FORWARD, ZW_BACKWARD, ZW_OTHER};
    const long clocks[] = {1305, 1200, 1290};
    json_t *v = zw_power_states(2, sched, 6, clocks, 3);
    char *s = json_dumps(v, JSON_COMPACT);
    assert_string_equal(s, "{\"rank\":2,\"power_states\":[1305,1305,1305,1200,1290,1290]}");
    free(s);
    json_decref(v);
}

static void test_rank_and_schedule_checks(void **state)
{
    (void)state;
    prs_error err = {0, ""};
    zw_rank r;
    json_t *b = parse("{\"job_id\":\"j\",\"rank\":1,\"dp_rank\":0,\"pp_rank\":1,\"tp_rank\":0,"
                      "\"pipe_schedule\":[\"p2p\",\"forward\",\"backward\",\"forward\","
                      "\"backward\"],\"power_state_range\":[1200,1410,1200]}");
    assert_int_equal(zw_parse_rank(b, 1, &r, &err), 0);
    assert_int_equal(r.nclocks, 2); /* repeats dropped, highest first */
    assert_int_equal(r.clocks_mhz[0], 1410);
    /* stage 1 of 2, 2 microbatches: warm-up 0, so F B F B is right */
    assert_int_equal(zw_check_schedule(&r, 2, 2, &err), 0);
    /* stage 0 of 2 would warm up with one forward: refused, naming the entry */
    r.pp = 0;
    assert_int_equal(zw_check_schedule(&r, 2, 2, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "pipe_schedule[2]"));
    zw_rank_free(&r);
    json_decref(b);
    b = parse("{\"rank\":1,\"dp_rank\":0,\"pp_rank\":1,\"tp_rank\":0,"
              "\"available_frequencies\":[1410, 1.5]}");
    assert_int_equal(zw_parse_rank(b, 0, &r, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "available_frequencies[1]"));
    zw_rank_free(&r);
    json_decref(b);
}

/* Two iterations of a rank of stage 3 of 4 with 2 microbatches (F B F B): the first reports
 * M + 1 forwards (the first dropped), the second has no forward energies. */
static void test_result_to_v1(void **state)
{
    (void)state;
    json_t *b = parse("{\"rank\":3,\"iter_time\":[1.0,1.0],\"iter_energy\":[300.0,250.0],"
                      "\"time_breakdown\":{\"forward\":[[9.0,0.1,0.1],[0.1,0.1]],"
                      "\"backward\":[[0.2,0.2],[0.2,0.2]],\"load\":[[],[]]},"
                      "\"energy_breakdown\":{\"forward\":[[99.0,20.0,20.0],[]],"
                      "\"backward\":[[40.0,40.0],[40.0,40.0]],\"load\":[]}}");
    const long clocks[] = {1410, 1395, 1380, 1365}; /* F0 B0 F1 B1 */
    zw_served sv = {4, 3, 2, clocks, 5};
    long next = 7, rank = -1;
    size_t n = 0;
    json_t *its = NULL;
    prs_error err = {0, ""};
    assert_int_equal(zw_result_to_v1(b, &sv, &next, &rank, &n, &its, &err), 0);
    assert_int_equal(rank, 3);
    assert_int_equal(n, 2);
    assert_int_equal(next, 9);
    assert_int_equal(json_array_size(its), 2);
    json_t *i0 = json_array_get(its, 0), *i1 = json_array_get(its, 1);
    assert_int_equal(json_integer_value(json_object_get(i0, "iteration")), 7);
    assert_int_equal(json_integer_value(json_object_get(i1, "iteration")), 8);
    json_t *w0 = json_object_get(i0, "windows");
    assert_int_equal(json_array_size(w0), 4);
    /* the extra first forward (9 s) is gone; F1 ran at the clock of computation 2 */
    json_t *f1 = json_array_get(w0, 1);
    assert_string_equal(json_string_value(json_object_get(f1, "instruction")), "forward");
    assert_int_equal(json_integer_value(json_object_get(f1, "microbatch")), 1);
    assert_int_equal(json_integer_value(json_object_get(f1, "clock_mhz")), 1380);
    assert_true(json_real_value(json_object_get(f1, "time_s")) == 0.1);
    /* blocking power: (300 - 120 J) over (1.0 - 0.6 s) */
    double bp = json_real_value(json_object_get(i0, "blocking_power_w"));
    assert_true(bp > 449.999 && bp < 450.001);
    assert_int_equal(json_integer_value(json_object_get(i0, "clock_mhz")), 1410);
    /* iteration 2: no forward energies, so backward windows only */
    assert_int_equal(json_array_size(json_object_get(i1, "windows")), 2);
    json_decref(its);
    json_decref(b);
}

static void test_result_bad_input(void **state)
{
    (void)state;
    const long clocks[] = {1410, 1410, 1410, 1410};
    zw_served sv = {4, 3, 2, clocks, -1};
    long next = 0, rank;
    size_t n;
    json_t *its;
    const struct {
        const char *body, *field;
    } bad[] = {
        {"{\"iter_time\":[1.0]}", "rank"},
        {"{\"rank\":0,\"iter_time\":[1.0,\"x\"]}", "iter_time[1]"},
        {"{\"rank\":0,\"iter_time\":[1.0],\"iter_energy\":[1.0,2.0]}", "iter_energy"},
        {"{\"rank\":0,\"iter_time\":[1.0],\"time_breakdown\":{\"backward\":[[0.1,-0.1]]},"
         "\"energy_breakdown\":{\"backward\":[[1.0,1.0]]}}",
         "time_breakdown.backward[0][1]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        prs_error err = {0, ""};
        json_t *b = parse(bad[i].body);
        assert_int_equal(zw_result_to_v1(b, &sv, &next, &rank, &n, &its, &err), PRS_EINVAL);
        assert_non_null(strstr(err.msg, bad[i].field));
        assert_null(its);
        json_decref(b);
    }
    /* running (round -1): no iteration-level clock */
    prs_error err = {0, ""};
    json_t *b = parse("{\"rank\":0,\"iter_time\":[1.0]}");
    assert_int_equal(zw_result_to_v1(b, &sv, &next, &rank, &n, &its, &err), 0);
    assert_null(json_object_get(json_array_get(its, 0), "clock_mhz"));
    assert_null(json_object_get(json_array_get(its, 0), "energy_j"));
    json_decref(its);
    json_decref(b);
}

static void test_parse_job(void **state)
{
    (void)state;
    prs_error err = {0, ""};
    zw_job j;
    json_t *b = parse("{\"job_id\":\"\",\"pp_degree\":4,\"dp_degree\":2,\"tp_degree\":1,"
                      "\"world_size\":8,\"job_metadata\":\"run-7\",\"extra\":[1]}");
    assert_int_equal(zw_parse_job(b, &j, &err), 0);
    assert_int_equal(j.microbatches, 0);
    assert_string_equal(j.model, "run-7");
    json_decref(b);
    b = parse("{\"pp_degree\":4,\"dp_degree\":2,\"tp_degree\":1,\"world_size\":6}");
    assert_int_equal(zw_parse_job(b, &j, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "world_size"));
    json_decref(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_1f1b_order),
        cmocka_unit_test(test_power_states_keep_previous_clock),
        cmocka_unit_test(test_rank_and_schedule_checks),
        cmocka_unit_test(test_result_to_v1),
        cmocka_unit_test(test_result_bad_input),
        cmocka_unit_test(test_parse_job),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
