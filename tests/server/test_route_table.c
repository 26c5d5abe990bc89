/* router.c: the route table matched alone, without a server: each path and method to its
 * route, the 405 methods of a known path, and the ids and pipeline indexes a path holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "http.h"

#define ID "AbCdEfGh_-012345" /* 16 base64url characters: a well-formed job id */

static route_match find(const char *method, const char *url)
{
    route_match m;
    route_find(method, url, &m);
    return m;
}

static void test_each_route(void **state)
{
    (void)state;
    static const struct {
        const char *method, *url;
        enum route route;
    } cases[] = {
        {"GET", "/healthz", R_HEALTHZ},
        {"GET", "/metrics", R_METRICS},
        {"GET", "/v1/jobs", R_LIST},
        {"POST", "/v1/jobs", R_CREATE},
        {"GET", "/v1/jobs/" ID, R_STATUS},
        {"DELETE", "/v1/jobs/" ID, R_DELETE},
        {"POST", "/v1/jobs/" ID "/ranks", R_REGISTER},
        {"GET", "/v1/jobs/" ID "/schedule", R_SCHEDULE},
        {"POST", "/v1/jobs/" ID "/results", R_RESULTS},
        {"POST", "/v1/jobs/" ID "/stragglers", R_STRAGGLER_SET},
        {"DELETE", "/v1/jobs/" ID "/stragglers/3", R_STRAGGLER_CLEAR},
        {"POST", "/v1/jobs/" ID "/power_cap", R_POWER_CAP_SET},
        {"DELETE", "/v1/jobs/" ID "/power_cap", R_POWER_CAP_CLEAR},
        {"GET", "/v1/jobs/" ID "/frontier", R_FRONTIER},
        {"POST", "/v1/jobs/" ID "/complete", R_COMPLETE},
        {"GET", "/v1/jobs/" ID "/profile", R_PROFILE_GET},
        {"POST", "/v1/jobs/" ID "/profile", R_PROFILE_PUT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        route_match m = find(cases[i].method, cases[i].url);
        assert_int_equal(m.route, cases[i].route);
        assert_true(m.method_ok);
        assert_non_null(m.def);
        assert_non_null(m.def->handler);
        int job_route = strncmp(cases[i].url, "/v1/jobs/", 9) == 0;
        assert_int_equal(m.has_id, job_route);
        if (job_route) assert_string_equal(m.id, ID);
    }
}

/* The cluster routes: {cid} takes a well-formed id like {id}, but is no job's (has_id 0: the job
 * table is not consulted for it). */
static void test_cluster_routes(void **state)
{
    (void)state;
    static const struct {
        const char *method, *url;
        enum route route;
    } cases[] = {
        {"POST", "/v1/clusters", R_CLUSTER_CREATE},
        {"GET", "/v1/clusters/" ID, R_CLUSTER_GET},
        {"DELETE", "/v1/clusters/" ID, R_CLUSTER_DELETE},
        {"POST", "/v1/clusters/" ID "/loads", R_CLUSTER_LOAD},
        {"GET", "/v1/clusters/" ID "/desired", R_CLUSTER_DESIRED},
        {"POST", "/v1/clusters/" ID "/profile", R_CLUSTER_PROFILE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        route_match m = find(cases[i].method, cases[i].url);
        assert_int_equal(m.route, cases[i].route);
        assert_true(m.method_ok);
        assert_int_equal(m.has_id, 0);
        if (i > 0) assert_string_equal(m.id, ID);
    }
    assert_int_equal(find("GET", "/v1/clusters/not-an-id!").route, R_UNKNOWN);
    assert_string_equal(route_name(R_CLUSTER_DESIRED), "get_cluster_desired");
    assert_string_equal(route_name(R_UNKNOWN), "unknown");
}

static void test_other_methods(void **state)
{
    (void)state;
    /* A known path with another method: 405 with the path's methods; the route is the path's
     * POST row, else its first. */
    route_match m = find("PUT", "/v1/jobs");
    assert_int_equal(m.route, R_CREATE);
    assert_false(m.method_ok);
    assert_string_equal(m.allow, "GET, POST");
    m = find("PUT", "/v1/jobs/" ID);
    assert_int_equal(m.route, R_STATUS);
    assert_string_equal(m.allow, "GET, DELETE");
    m = find("GET", "/v1/jobs/" ID "/power_cap");
    assert_int_equal(m.route, R_POWER_CAP_SET);
    assert_false(m.method_ok);
    assert_string_equal(m.allow, "POST, DELETE");
    m = find("PUT", "/v1/jobs/" ID "/profile");
    assert_int_equal(m.route, R_PROFILE_PUT);
    assert_true(m.def->profile_body); /* a body sent to it is bounded as an upload's */
    m = find("HEAD", "/healthz");
    assert_int_equal(m.route, R_HEALTHZ);
    assert_false(m.method_ok);
    assert_string_equal(m.allow, "GET");
}

static void test_unknown_paths(void **state)
{
    (void)state;
    static const char *const urls[] = {
        "",
        "/",
        "/healthz/",
        "/v1/jobsX",
        "/v1/jobs/",
        "/v1/jobs/short",
        "/v1/jobs/" ID "/",
        "/v1/jobs/" ID "/nope",
        "/v1/jobs/" ID "x/schedule",
        "/v1/jobs//schedule",
        "/v1/jobs/" ID "/stragglers/",
        "/v1/jobs/" ID "/stragglers/-1",
        "/v1/jobs/" ID "/stragglers/+1",
        "/v1/jobs/" ID "/stragglers/3x",
        "/v1/jobs/" ID "/stragglers/65536",
        "/v1/jobs/" ID "/stragglers/3/",
        "/v1/jobs/" ID "/schedule/extra",
    };
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        route_match m = find("GET", urls[i]);
        assert_int_equal(m.route, R_UNKNOWN);
        assert_null(m.def);
        assert_false(m.has_id);
        assert_false(m.method_ok);
    }
}

static void test_pipeline_index_and_auth(void **state)
{
    (void)state;
    route_match m = find("DELETE", "/v1/jobs/" ID "/stragglers/65535");
    assert_int_equal(m.route, R_STRAGGLER_CLEAR);
    assert_int_equal(m.dp, 65535);
    m = find("DELETE", "/v1/jobs/" ID "/stragglers/007");
    assert_int_equal(m.dp, 7);
    assert_int_equal(find("GET", "/v1/jobs").def->auth, AUTH_ADMIN);
    assert_int_equal(find("POST", "/v1/jobs").def->auth, AUTH_CREATE);
    assert_int_equal(find("GET", "/metrics").def->auth, AUTH_METRICS);
    assert_int_equal(find("GET", "/healthz").def->auth, AUTH_NONE);
    assert_int_equal(find("GET", "/v1/jobs/" ID).def->auth, AUTH_JOB_OR_ADMIN);
    assert_int_equal(find("DELETE", "/v1/jobs/" ID).def->auth, AUTH_JOB_OR_ADMIN);
    assert_int_equal(find("GET", "/v1/jobs/" ID "/schedule").def->auth, AUTH_JOB);
    assert_string_equal(route_name(R_CREATE), "create_job");
    assert_string_equal(route_name(R_UNKNOWN), "unknown");
    assert_string_equal(route_name(N_ROUTES), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_route),
        cmocka_unit_test(test_cluster_routes),
        cmocka_unit_test(test_other_methods),
        cmocka_unit_test(test_unknown_paths),
        cmocka_unit_test(test_pipeline_index_and_auth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
