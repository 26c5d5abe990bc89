/* spec.h: the job spec's stored form apart from its wire form. A spec round-trips through the
 * stored form with its version; a stored spec from before the version, or one beyond the API's
 * (possibly tightened) limits but within the capacity, still loads, as a job too; one from a
 * newer server, beyond the capacity or with an unknown field is refused naming the field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "job.h"
#include "server_harness.h"

#define WIRE                                                                                       \
    "{\"model\":\"m\",\"stages\":4,\"microbatches\":8,\"dp\":2,\"clocks_mhz\":[1410,1200,1000],"   \
    "\"blocking_power_w\":83.64,\"power_cap_w\":900,\"straggler\":{\"factor\":1.5,"                \
    "\"iterations\":4}}"

/* A stored form (version 1) whose profiling asks more iterations per clock than the API allows
 * (REQ_MAX_PROFILING_ITERATIONS), as a job created before a tightened limit would. */
#define STORED_OVER_API                                                                            \
    "{\"spec_version\":1,\"stages\":4,\"microbatches\":8,\"dp\":2,\"clocks_mhz\":[1410,1200],"     \
    "\"profiling\":{\"iterations_per_clock\":1500,\"max_iterations_per_clock\":3000}}"

static int stored(const char *text, job_spec *s, prs_error *err)
{
    return spec_from_stored(text, strlen(text), s, err);
}

static void test_round_trip_with_version(void **state)
{
    (void)state;
    job_spec a, b;
    prs_error err = {0, ""};
    assert_int_equal(req_parse_job_spec(WIRE, strlen(WIRE), &a, &err), 0);
    char *text = spec_to_stored(&a);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"spec_version\":1"));
    assert_int_equal(stored(text, &b, &err), 0);
    assert_memory_equal(&a, &b, sizeof a);
    /* The wire form knows no version: a request carrying one is refused as an unknown field. */
    assert_int_equal(req_parse_job_spec(text, strlen(text), &b, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "spec_version"));
    free(text);
    /* The view (job status) is the canonical form, without the version. */
    json_t *v = spec_json(&a);
    assert_null(json_object_get(v, "spec_version"));
    assert_int_equal(json_integer_value(json_object_get(v, "stages")), 4);
    json_decref(v);
}

static void test_unversioned_loads(void **state)
{
    (void)state;
    job_spec a, b;
    prs_error err = {0, ""};
    assert_int_equal(req_parse_job_spec(WIRE, strlen(WIRE), &a, &err), 0);
    json_t *v = spec_json(&a); /* what servers before the version stored */
    char *text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(v);
    assert_int_equal(stored(text, &b, &err), 0);
    assert_memory_equal(&a, &b, sizeof a);
    free(text);
}

static void test_over_api_limit_loads(void **state)
{
    (void)state;
    job_spec s;
    prs_error err = {0, ""};
    /* The API refuses the profiling as a request... */
    const char *wire = STORED_OVER_API;
    json_t *root = json_loads(wire, 0, NULL);
    json_object_del(root, "spec_version");
    char *as_request = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    assert_int_equal(req_parse_job_spec(as_request, strlen(as_request), &s, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "profiling.iterations_per_clock"));
    free(as_request);
    /* ...and the stored form loads it. */
    assert_int_equal(stored(STORED_OVER_API, &s, &err), 0);
    assert_int_equal(s.iterations_per_clock, 1500);
    assert_int_equal(s.max_iterations_per_clock, 3000);
    /* An upgrade that tightens an API limit: the same decoder under the tighter limits refuses a
     * spec the stored form still loads. */
    spec_limits tight = req_spec_limits;
    tight.max_stages = 2;
    const char *four = "{\"stages\":4,\"microbatches\":8,\"dp\":1,\"clocks_mhz\":[1000]}";
    root = json_loads(four, 0, NULL);
    assert_int_equal(spec_decode(root, &tight, &s, &err), PRS_EINVAL);
    assert_string_equal(err.msg, "stages: expected an integer in 1..2");
    json_decref(root);
    assert_int_equal(stored(four, &s, &err), 0);
    assert_int_equal(s.stages, 4);
}

static void test_stored_refusals(void **state)
{
    (void)state;
    job_spec s;
    prs_error err = {0, ""};
    assert_int_equal(stored("{\"spec_version\":2,\"stages\":1,\"microbatches\":1,\"dp\":1,"
                            "\"clocks_mhz\":[1000]}",
                            &s, &err),
                     PRS_EINVAL);
    assert_non_null(strstr(err.msg, "spec_version: 2, from a newer server"));
    assert_int_equal(stored("{\"spec_version\":\"1\",\"stages\":1}", &s, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "spec_version"));
    char over[160];
    snprintf(over, sizeof over, "{\"stages\":%d,\"microbatches\":1,\"dp\":1,\"clocks_mhz\":[1]}",
             SPEC_CAP_STAGES + 1);
    assert_int_equal(stored(over, &s, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "stages: expected an integer"));
    assert_int_equal(stored("{\"stages\":1,\"microbatches\":1,\"dp\":1,\"clocks_mhz\":[1],"
                            "\"extra\":1}",
                            &s, &err),
                     PRS_EINVAL);
    assert_non_null(strstr(err.msg, "unknown field 'extra'"));
    assert_int_equal(stored("not json", &s, &err), PRS_EINVAL);
}

/* A job row whose spec is beyond the API's limits loads as a job. */
static void test_job_loads_over_api_limit(void **state)
{
    (void)state;
    char dir[256], db[300];
    harness_tmpdir(dir, sizeof dir, "spec");
    snprintf(db, sizeof db, "%s/spec.db", dir);
    store *st = NULL;
    assert_int_equal(store_open(db, 0, &st, NULL), 0);
    uint8_t h[32] = {7};
    store_job_row row = {
        "AAAAAAAAAAAAAAAA", h, STORED_OVER_API, "", "registering", "", 0, 0, 0, 1, 0, 0, 0};
    assert_int_equal(store_insert_job(st, &row), 0);
    job *j = NULL;
    int action = 0;
    prs_error err = {0, ""};
    assert_int_equal(job_load(st, &row, &j, &action, &err), 0);
    assert_non_null(j);
    assert_int_equal(j->spec.iterations_per_clock, 1500);
    assert_int_equal(j->world, 8);
    job_free(j);
    store_close(st);
    harness_rmdir(dir);
}

/* change_cost_us: planned with (prs_pipeline.change_cost_s), kept through the stored form,
 * absent from it when 0; a negative, non-numeric or absurd one is refused naming the field. */
static void test_change_cost(void **state)
{
    (void)state;
    const char *w = "{\"stages\":4,\"microbatches\":8,\"dp\":1,\"clocks_mhz\":[1410,1200],"
                    "\"change_cost_us\":250}";
    job_spec a, b;
    prs_error err = {0, ""};
    int prc = req_parse_job_spec(w, strlen(w), &a, &err);
    if (prc) fail_msg("%s", err.msg);
    prs_pipeline pipe;
    spec_pipeline(&a, &pipe);
    assert_true(pipe.change_cost_s == 250 / 1e6);
    char *text = spec_to_stored(&a);
    assert_non_null(strstr(text, "\"change_cost_us\":250"));
    assert_int_equal(stored(text, &b, &err), 0);
    assert_memory_equal(&a, &b, sizeof a);
    free(text);
    assert_int_equal(req_parse_job_spec(WIRE, strlen(WIRE), &a, &err), 0);
    text = spec_to_stored(&a);
    assert_null(strstr(text, "change_cost"));
    free(text);
    const char *bad[] = {"-1", "\"300\"", "1e9", "null"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char t[256];
        snprintf(t, sizeof t,
                 "{\"stages\":4,\"microbatches\":8,\"dp\":1,\"clocks_mhz\":[1410],"
                 "\"change_cost_us\":%s}",
                 bad[i]);
        assert_int_equal(req_parse_job_spec(t, strlen(t), &a, &err), PRS_EINVAL);
        assert_non_null(strstr(err.msg, "change_cost_us"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_with_version),  cmocka_unit_test(test_unversioned_loads),
        cmocka_unit_test(test_over_api_limit_loads),     cmocka_unit_test(test_stored_refusals),
        cmocka_unit_test(test_job_loads_over_api_limit), cmocka_unit_test(test_change_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
