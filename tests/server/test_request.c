/* request.h: strict parsing of API v1 request bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "request.h"

/* The parse, its message copied into msg (REQ_MSG_MAX bytes). */
static int spec(const char *text, job_spec *s, char *msg)
{
    prs_error err = {0, ""};
    int rc = req_parse_job_spec(text, strlen(text), s, &err);
    snprintf(msg, REQ_MSG_MAX, "%.*s", REQ_MSG_MAX - 1, err.msg);
    return rc;
}

#define BASE "\"stages\":4,\"microbatches\":8,\"dp\":2,\"blocking_power_w\":83.64"

static void test_spec_defaults_and_round_trip(void **state)
{
    (void)state;
    job_spec s, back;
    char msg[REQ_MSG_MAX] = "";
    assert_int_equal(spec("{" BASE ",\"clocks_mhz\":[1000,1410,1200]}", &s, msg), 0);
    assert_int_equal(s.stages, 4);
    assert_int_equal(s.tp, 1);
    assert_int_equal(s.schedule, PRS_SCHEDULE_1F1B);
    assert_int_equal(s.nclocks, 3);
    assert_int_equal(s.clocks_mhz[0], 1410); /* sorted high to low */
    assert_int_equal(s.clocks_mhz[2], 1000);
    assert_int_equal(s.min_clock_mhz, 1000);
    assert_int_equal(s.warmup_iterations, 1);
    assert_int_equal(s.iterations_per_clock, 3);
    assert_true(s.skip_dominated);
    assert_true(s.unit_time_s == 0.001);
    assert_string_equal(s.model, "");
    assert_true(s.switch_lead_s == 2.0);

    assert_int_equal(spec("{" BASE ",\"clocks_mhz\":[1410,1395],\"model\":\"gpt3\","
                          "\"schedule\":\"interleaved\",\"virtual_stages\":2,\"tp\":2,"
                          "\"profiling\":{\"warmup_iterations\":0,\"iterations_per_clock\":5,"
                          "\"min_clock_mhz\":1395,\"skip_dominated\":false},"
                          "\"unit_time_s\":0.0005,\"cost_model\":\"hull\","
                          "\"straggler\":{\"factor\":1.5,\"iterations\":4},"
                          "\"reuse_frontier\":false,\"switch_lead_s\":0,\"power_cap_w\":2500.5,"
                          "\"reuse_key\":\"team-secret-key-0001\"}",
                          &s, msg),
                     0);
    json_t *j = spec_json(&s);
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    assert_int_equal(spec(text, &back, msg), 0);
    free(text);
    assert_memory_equal(&s, &back, sizeof s);
    assert_int_equal(back.virtual_stages, 2);
    assert_int_equal(back.cost_model, PRS_COST_HULL);
    assert_false(back.reuse_frontier);
    assert_true(back.straggler_factor == 1.5);
    assert_true(back.switch_lead_s == 0);
    assert_true(back.power_cap_w == 2500.5);
    /* The reuse key is kept only as its SHA-256, which the stored form carries. */
    assert_string_equal(back.reuse_key_sha256,
                        "97577ce84ba68f3a48cbb7d3799d5cd4aacc2e9b06a935520b9236861d2acc0f");
}

/* blocking_power_w is optional (absent or null: the job measures it) and round-trips as null. */
static void test_spec_blocking_power(void **state)
{
    (void)state;
    job_spec s, back;
    char msg[REQ_MSG_MAX] = "";
    const char *none = "{\"stages\":2,\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[1410]}";
    assert_int_equal(spec(none, &s, msg), 0);
    assert_false(s.has_blocking_power);
    assert_true(s.blocking_power_w == 0);
    json_t *j = spec_json(&s);
    assert_true(json_is_null(json_object_get(j, "blocking_power_w")));
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    assert_int_equal(spec(text, &back, msg), 0);
    free(text);
    assert_memory_equal(&s, &back, sizeof s);
    const char *null = "{\"stages\":2,\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[1410],"
                       "\"blocking_power_w\":null}";
    assert_int_equal(spec(null, &back, msg), 0);
    assert_memory_equal(&s, &back, sizeof s);
    const char *given = "{\"stages\":2,\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[1410],"
                        "\"blocking_power_w\":70.5}";
    assert_int_equal(spec(given, &s, msg), 0);
    assert_true(s.has_blocking_power && s.blocking_power_w == 70.5);
    const char *bad[] = {"-1", "\"70\"", "true", "1e6", "[]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char t[160];
        snprintf(t, sizeof t,
                 "{\"stages\":2,\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[1410],"
                 "\"blocking_power_w\":%s}",
                 bad[i]);
        assert_int_equal(spec(t, &s, msg), -1);
        assert_non_null(strstr(msg, "blocking_power_w:"));
    }
}

static void test_spec_errors_name_the_field(void **state)
{
    (void)state;
    struct {
        const char *text, *needle;
    } bad[] = {
        {"not json", "malformed JSON"},
        {"[1]", "expected a JSON object"},
        {"{" BASE "}", "clocks_mhz: required"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"extra\":1}", "unknown field 'extra'"},
        {"{" BASE ",\"clocks_mhz\":[1410,\"x\"]}", "clocks_mhz[1]"},
        {"{" BASE ",\"clocks_mhz\":[1410,0]}", "clocks_mhz[1]"},
        {"{" BASE ",\"clocks_mhz\":[1410,1410]}", "listed twice"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"tp\":1.5}", "tp:"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"schedule\":3}", "schedule:"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"virtual_stages\":2}", "virtual_stages"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"schedule\":\"interleaved\"}", "virtual_stages"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"profiling\":{\"k\":1}}", "profiling: unknown field"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"profiling\":[]}", "profiling: expected an object"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"straggler\":{\"factor\":1.0}}", "straggler.factor:"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"profiling\":{\"warmup_iterations\":-1}}",
         "profiling.warmup_iterations:"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"profiling\":{\"target_se_pct\":200}}",
         "profiling.target_se_pct:"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"unit_time_s\":0}", "unit_time_s"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"model\":\"\\u00e9\"}", "printable ASCII"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"reuse_frontier\":1}", "true or false"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"switch_lead_s\":-0.5}", "switch_lead_s:"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"switch_lead_s\":\"2\"}", "switch_lead_s:"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"power_cap_w\":0}", "power_cap_w:"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"power_cap_w\":\"1e3\"}", "power_cap_w:"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"reuse_key\":\"short\"}", "reuse_key: at least 16"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"reuse_key\":7}", "reuse_key: expected a string"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"reuse_key_sha256\":\"ABC\"}", "reuse_key_sha256:"},
        {"{" BASE ",\"clocks_mhz\":[1410],\"reuse_key\":\"0123456789abcdef\","
         "\"reuse_key_sha256\":\""
         "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\"}",
         "not both"},
        {"{\"stages\":1,\"stages\":1}", "malformed JSON"},
        {"{\"a\\u0001b\":1}", "unknown field 'a?b'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        job_spec s;
        char msg[REQ_MSG_MAX] = "";
        assert_int_equal(spec(bad[i].text, &s, msg), -1);
        if (!strstr(msg, bad[i].needle)) fprintf(stderr, "%s -> %s\n", bad[i].text, msg);
        assert_non_null(strstr(msg, bad[i].needle));
        assert_null(strchr(msg, '\n'));
    }
}

static void test_rank_and_straggler(void **state)
{
    (void)state;
    prs_error err = {0, ""};
    req_rank r;
    const char *ok = "{\"rank\":3,\"dp\":1,\"pp\":1,\"tp\":0,\"gpu\":\"A100 GPU-1234\"}";
    assert_int_equal(req_parse_rank(ok, strlen(ok), &r, &err), 0);
    assert_int_equal(r.rank, 3);
    assert_string_equal(r.gpu, "A100 GPU-1234");
    const char *neg = "{\"rank\":-1,\"dp\":0,\"pp\":0}";
    assert_int_equal(req_parse_rank(neg, strlen(neg), &r, &err), -1);
    req_straggler s;
    const char *both = "{\"dp\":0,\"time_s\":2,\"slowdown\":1.5}";
    assert_int_equal(req_parse_straggler(both, strlen(both), &s, &err), -1);
    const char *none = "{\"dp\":0}";
    assert_int_equal(req_parse_straggler(none, strlen(none), &s, &err), -1);
    const char *t = "{\"dp\":1,\"time_s\":2.5}";
    assert_int_equal(req_parse_straggler(t, strlen(t), &s, &err), 0);
    assert_true(s.time_s == 2.5 && s.slowdown == 0 && s.dp == 1);
    const char *low = "{\"dp\":1,\"slowdown\":0.9}";
    assert_int_equal(req_parse_straggler(low, strlen(low), &s, &err), -1);
}

/* POST /v1/jobs/{id}/power_cap: {"power_cap_w": W}, W > 0; anything else names the field. */
static void test_power_cap(void **state)
{
    (void)state;
    prs_error err = {0, ""};
    double w = -1;
    const char *ok = "{\"power_cap_w\":1200.5}";
    assert_int_equal(req_parse_power_cap(ok, strlen(ok), &w, &err), 0);
    assert_true(w == 1200.5);
    static const char *const bad[] = {"{}",
                                      "{\"power_cap_w\":0}",
                                      "{\"power_cap_w\":-3}",
                                      "{\"power_cap_w\":null}",
                                      "{\"power_cap_w\":1e10}",
                                      "{\"power_cap_w\":5,\"x\":1}",
                                      "[5]",
                                      ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(req_parse_power_cap(bad[i], strlen(bad[i]), &w, &err), -1);
        if (i < 5) assert_non_null(strstr(err.msg, "power_cap_w"));
    }
}

static void test_results(void **state)
{
    (void)state;
    prs_error err = {0, ""};
    const char *msg = err.msg;
    req_results r;
    const char *ok =
        "{\"rank\":1,\"round\":2,\"iterations\":["
        "{\"iteration\":7,\"time_s\":1.5,\"energy_j\":300,\"clock_mhz\":1410,\"windows\":["
        "{\"instruction\":\"forward\",\"microbatch\":0,\"clock_mhz\":1395,\"time_s\":0.05,"
        "\"energy_j\":20},{\"instruction\":\"backward\",\"chunk\":5,\"clock_mhz\":1410,"
        "\"time_s\":0.1,\"energy_j\":40}]},{\"iteration\":8,\"time_s\":1.4}]}";
    assert_int_equal(req_parse_results(ok, strlen(ok), &r, &err), 0);
    assert_int_equal(r.rank, 1);
    assert_int_equal(r.round, 2);
    assert_int_equal(r.niterations, 2);
    assert_int_equal(r.iterations[0].nwindows, 2);
    assert_int_equal(r.iterations[0].windows[0].clock_mhz, 1395);
    assert_int_equal(r.iterations[0].windows[0].chunk, -1);
    assert_int_equal(r.iterations[0].windows[1].chunk, 5);
    assert_int_equal(r.iterations[0].windows[1].instr, PRS_BACKWARD);
    assert_int_equal(r.iterations[1].nwindows, 0);
    assert_int_equal(r.iterations[1].clock_mhz, 0);
    assert_true(r.iterations[0].pace_s == 0 && r.iterations[0].blocking_power_w == 0);
    assert_int_equal(r.iterations[0].plan_id, -1);
    req_results_free(&r);

    const char *paced = "{\"rank\":0,\"iterations\":[{\"iteration\":3,\"time_s\":1.5,"
                        "\"pace_s\":1.25,\"plan_id\":0,\"blocking_power_w\":83.5}]}";
    assert_int_equal(req_parse_results(paced, strlen(paced), &r, &err), 0);
    assert_true(r.iterations[0].pace_s == 1.25);
    assert_int_equal(r.iterations[0].plan_id, 0);
    assert_true(r.iterations[0].blocking_power_w == 83.5);
    req_results_free(&r);

    const char *bad[] = {
        "{\"rank\":1,\"iterations\":[]}",
        "{\"rank\":1}",
        "{\"rank\":1,\"iterations\":[{\"iteration\":1}]}",
        "{\"rank\":1,\"iterations\":[{\"iteration\":1,\"time_s\":0}]}",
        "{\"rank\":1,\"iterations\":[{\"iteration\":1,\"time_s\":1,\"windows\":{}}]}",
        "{\"rank\":1,\"iterations\":[{\"iteration\":1,\"time_s\":1,\"windows\":[{\"instruction\":"
        "\"load\",\"clock_mhz\":1,\"time_s\":1,\"energy_j\":1}]}]}",
        "{\"rank\":1,\"iterations\":[{\"iteration\":1,\"time_s\":1,\"windows\":[{\"instruction\":"
        "\"forward\",\"time_s\":1,\"energy_j\":1}]}]}",
        "{\"rank\":1,\"iterations\":[{\"iteration\":1,\"time_s\":1,\"windows\":[{\"instruction\":"
        "\"forward\",\"clock_mhz\":1,\"time_s\":1,\"energy_j\":-1}]}]}",
        "{\"rank\":1,\"round\":-3,\"iterations\":[{\"iteration\":1,\"time_s\":1}]}",
        "{\"rank\":1,\"iterations\":[{\"iteration\":1,\"time_s\":1,\"x\":1}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(req_parse_results(bad[i], strlen(bad[i]), &r, &err), -1);
        assert_null(r.iterations);
    }

    /* The new per-iteration fields: each bad value is refused with the field named. */
    struct {
        const char *field, *needle;
    } named[] = {
        {"\"pace_s\":0", "iterations[0].pace_s:"},
        {"\"pace_s\":-1", "iterations[0].pace_s:"},
        {"\"pace_s\":\"1\"", "iterations[0].pace_s:"},
        {"\"pace_s\":1e400", "malformed JSON"},
        {"\"plan_id\":-1", "iterations[0].plan_id:"},
        {"\"plan_id\":1.5", "iterations[0].plan_id:"},
        {"\"plan_id\":null", "iterations[0].plan_id:"},
        {"\"blocking_power_w\":0", "iterations[0].blocking_power_w:"},
        {"\"blocking_power_w\":true", "iterations[0].blocking_power_w:"},
        {"\"blocking_power_w\":1e9", "iterations[0].blocking_power_w:"},
    };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        char text[256];
        snprintf(text, sizeof text,
                 "{\"rank\":1,\"iterations\":[{\"iteration\":1,\"time_s\":1,%s}]}", named[i].field);
        assert_int_equal(req_parse_results(text, strlen(text), &r, &err), -1);
        if (!strstr(msg, named[i].needle)) fprintf(stderr, "%s -> %s\n", text, msg);
        assert_non_null(strstr(msg, named[i].needle));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_defaults_and_round_trip),
        cmocka_unit_test(test_spec_errors_name_the_field),
        cmocka_unit_test(test_spec_blocking_power),
        cmocka_unit_test(test_rank_and_straggler),
        cmocka_unit_test(test_power_cap),
        cmocka_unit_test(test_results),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
