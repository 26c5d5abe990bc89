/* Inference clusters against a server running in this process (docs/api.md, "Inference
 * clusters"): a cluster declared with a synthetic H100 profile given inline, loads that grow and
 * shrink its pools (declared with periods of 0: every report planned at once; the periodic levels
 * are test_cluster_levels.c's) (the desired instances x TP read from the load's answer, from
 * .../desired and from the /metrics gauges, which must agree), bad declarations and loads answered
 * 400 with the field named, a load beyond the GPU budget 422, the tokens (creation, the cluster's
 * own, the administrator's), and a restart that keeps a cluster (same desired configuration) and
 * forgets a deleted one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "infer_synth.h"
#include "perseus/server.h"
#include "server_harness.h"

#define CTOK "create-secret"
#define ATOK "admin-secret"

static prs_server *srv;
static int port;
static char dir[256];
static char *profile; /* the profile CSV, NUL-terminated */

static int start_server(void);

static int setup(void **state)
{
    (void)state;
    prs_infer_roofline r;
    prs_error err = {0, ""};
    const prs_infer_gpu *g = prs_infer_gpu_find("h100");
    size_t len = 0;
    int tps[] = {2, 4, 8};
    if (!g || prs_infer_roofline_init(&r, prs_infer_llm_find("llama2-70b"), g, &err)) return -1;
    int mhz[] = {g->f_max_mhz, g->f_max_mhz - 525, g->f_max_mhz - 1050};
    if (prs_infer_synth_csv(&r, tps, 3, mhz, 3, &profile, &len, &err)) return -1;
    harness_tmpdir(dir, sizeof dir, "cluster");
    if (!dir[0]) return -1;
    return start_server();
}

/* perseusd in this process on the database in dir. */
static int start_server(void)
{
    prs_error err = {0, ""};
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    cfg.port = 0;
    char db[300];
    snprintf(db, sizeof db, "%s/test.db", dir);
    cfg.db_path = db;
    cfg.data_dir = dir;
    cfg.log_fd = -1;
    cfg.threads = 2;
    cfg.create_token = CTOK;
    cfg.admin_token = ATOK;
    if (prs_server_start(&cfg, &srv, &err) != 0) {
        fprintf(stderr, "server: %s\n", err.msg);
        return -1;
    }
    port = prs_server_port(srv);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    prs_server_stop(srv);
    harness_rmdir(dir);
    free(profile);
    return 0;
}

/* A declaration: one TP-2 instance in SS (GPUs g0, g1), a 32-GPU budget, fast probes; extra
 * is merged in (its keys replace the defaults'; a JSON null value removes a key). */
static char *declaration(const char *extra)
{
    json_t *o = json_pack("{s:s, s:i, s:s, s:i, s:i, s:{s:{s:[{s:s, s:i, s:[s,s]}]}}}", "name",
                          "llama", "gpus", 32, "profile_csv", profile, "probe_requests", 200,
                          "clocks", 3, "pools", "SS", "instances", "url", "http://10.0.0.1:8000",
                          "tp", 2, "gpus", "GPU-0", "GPU-1");
    if (extra) {
        json_t *x = json_loads(extra, 0, NULL);
        assert_non_null(x);
        const char *k;
        json_t *v;
        json_object_foreach(x, k, v)
        {
            if (json_is_null(v))
                json_object_del(o, k);
            else
                json_object_set(o, k, v);
        }
        json_decref(x);
    }
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

static http_reply call(const char *method, const char *path, const char *tok, const char *body)
{
    return http_do(port, method, path, tok, body, body ? strlen(body) : 0, NULL);
}

static void expect_error(http_reply r, int status, const char *code, const char *needle)
{
    if (r.status != status || !strstr(r.body ? r.body : "", needle))
        fprintf(stderr, "got %d: %s (want %d, \"%s\")\n", r.status, r.body ? r.body : "", status,
                needle);
    assert_int_equal(r.status, status);
    json_t *e = json_object_get(r.json, "error");
    assert_true(json_is_object(e));
    assert_string_equal(json_str(e, "code"), code);
    assert_non_null(strstr(json_str(e, "message"), needle));
    http_reply_free(&r);
}

/* Declare a cluster (extra merged into the declaration): its id and token. */
static void declare_with(const char *extra, char *id, char *tok)
{
    char *d = declaration(extra);
    http_reply r = call("POST", "/v1/clusters", CTOK, d);
    free(d);
    if (r.status != 201) fprintf(stderr, "declare: %d %s\n", r.status, r.body);
    assert_int_equal(r.status, 201);
    snprintf(id, 64, "%s", json_str(r.json, "cluster_id"));
    snprintf(tok, 96, "%s", json_str(r.json, "token"));
    assert_true(json_is_true(json_object_get(r.json, "has_profile")));
    http_reply_free(&r);
}

static void declare(char *id, char *tok)
{
    declare_with(NULL, id, tok);
}

/* Instances of TP tp the answer's pool wants, and the pool's GPUs. */
static int want(json_t *desired, const char *pool, int tp, int *gpus)
{
    json_t *p = json_object_get(json_object_get(desired, "pools"), pool);
    assert_true(json_is_object(p));
    if (gpus) *gpus = (int)json_integer_value(json_object_get(p, "gpus"));
    json_t *a = json_object_get(p, "instances"), *x;
    size_t i;
    json_array_foreach(a, i, x)
    {
        if (json_integer_value(json_object_get(x, "tp")) == tp)
            return (int)json_integer_value(json_object_get(x, "count"));
    }
    fail_msg("pool %s has no tp %d", pool, tp);
    return -1;
}

/* The gauge perseus_cluster_desired_instances of (id, pool, tp) on /metrics. */
static int gauge(const char *id, const char *pool, int tp)
{
    http_reply m = call("GET", "/metrics", NULL, NULL);
    assert_int_equal(m.status, 200);
    char key[160];
    snprintf(key, sizeof key,
             "perseus_cluster_desired_instances{cluster=\"%s\",pool=\"%s\",tp=\"%d\"} ", id, pool,
             tp);
    const char *at = strstr(m.body, key);
    assert_non_null(at);
    int v = atoi(at + strlen(key));
    http_reply_free(&m);
    return v;
}

static int post_load(const char *id, const char *tok, const char *rates, int *gpus_ss)
{
    char path[128], body[256];
    snprintf(path, sizeof path, "/v1/clusters/%s/loads", id);
    snprintf(body, sizeof body, "{\"rates_rps\":%s}", rates);
    http_reply r = call("POST", path, tok, body);
    if (r.status != 200) fprintf(stderr, "load: %d %s\n", r.status, r.body);
    assert_int_equal(r.status, 200);
    int n = 0, g;
    for (int tp = 2; tp <= 8; tp *= 2)
        n += want(r.json, "SS", tp, &g);
    *gpus_ss = g;
    /* The desired endpoint and the gauges say the same. */
    snprintf(path, sizeof path, "/v1/clusters/%s/desired", id);
    http_reply d = call("GET", path, tok, NULL);
    assert_int_equal(d.status, 200);
    assert_true(json_equal(d.json, r.json));
    for (int tp = 2; tp <= 8; tp *= 2)
        assert_int_equal(gauge(id, "SS", tp), want(d.json, "SS", tp, NULL));
    http_reply_free(&d);
    http_reply_free(&r);
    return n;
}

static void test_loads_grow_and_shrink(void **state)
{
    (void)state;
    char id[64], tok[96], path[128];
    /* Periods of 0: every report planned at once on its own rates (the periodic levels:
     * test_cluster_levels.c). */
    declare_with("{\"cluster_period_s\": 0, \"pool_period_s\": 0}", id, tok);
    /* Before any load: the declared instances are the desired ones. */
    snprintf(path, sizeof path, "/v1/clusters/%s", id);
    http_reply r = call("GET", path, tok, NULL);
    assert_int_equal(r.status, 200);
    json_t *desired = json_object_get(r.json, "desired");
    assert_int_equal(json_integer_value(json_object_get(desired, "generation")), 0);
    assert_int_equal(want(desired, "SS", 2, NULL), 1);
    assert_int_equal(json_array_size(json_object_get(r.json, "instances")), 1);
    http_reply_free(&r);
    assert_int_equal(gauge(id, "SS", 2), 1);

    int g_low, g_high, g_again;
    int n_low = post_load(id, tok, "{\"SS\": 1}", &g_low);
    int n_high = post_load(id, tok, "{\"SS\": 30, \"MM\": 2}", &g_high);
    int n_again = post_load(id, tok, "{\"SS\": 1}", &g_again);
    assert_true(n_low >= 1);
    assert_true(n_high > n_low && g_high > g_low); /* grows with the load */
    assert_int_equal(n_again, n_low);              /* and shrinks back */
    assert_int_equal(g_again, g_low);
    /* A load beyond the budget: 422, the last plan kept. */
    snprintf(path, sizeof path, "/v1/clusters/%s/loads", id);
    expect_error(call("POST", path, tok, "{\"rates_rps\":{\"SS\":100000}}"), 422, "unplannable",
                 "does not fit 32 GPUs");
    assert_int_equal(gauge(id, "SS", 2) + gauge(id, "SS", 4) + gauge(id, "SS", 8), n_again);
    snprintf(path, sizeof path, "/v1/clusters/%s/desired", id);
    r = call("GET", path, tok, NULL);
    assert_non_null(strstr(json_str(r.json, "last_error"), "does not fit"));
    assert_int_equal(json_integer_value(json_object_get(r.json, "generation")), 3);
    http_reply_free(&r);
}

/* A restart keeps the cluster: its token, declaration and profile, and its latest load planned
 * again to the same desired configuration. */
static void test_restart(void **state)
{
    (void)state;
    char id[64], tok[96], path[128];
    int g;
    declare(id, tok);
    int n = post_load(id, tok, "{\"SS\": 12, \"LL\": 0.5}", &g);
    snprintf(path, sizeof path, "/v1/clusters/%s/desired", id);
    http_reply before = call("GET", path, tok, NULL);
    assert_int_equal(before.status, 200);
    prs_server_stop(srv);
    srv = NULL;
    assert_int_equal(start_server(), 0);
    http_reply after = call("GET", path, tok, NULL);
    if (after.status != 200) fprintf(stderr, "after restart: %d %s\n", after.status, after.body);
    assert_int_equal(after.status, 200);
    json_object_del(before.json, "generation"); /* plans made count afresh */
    json_object_del(after.json, "generation");
    assert_true(json_equal(before.json, after.json));
    assert_int_equal(gauge(id, "SS", 2) * 2 + gauge(id, "SS", 4) * 4 + gauge(id, "SS", 8) * 8, g);
    assert_true(n >= 1);
    http_reply_free(&before);
    http_reply_free(&after);
    snprintf(path, sizeof path, "/v1/clusters/%s", id);
    http_reply r = call("GET", path, tok, NULL);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_integer_value(json_object_get(r.json, "loads")), 1);
    assert_true(json_is_true(json_object_get(r.json, "has_profile")));
    http_reply_free(&r);
    /* A deleted cluster stays deleted across a restart. */
    r = call("DELETE", path, tok, NULL);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    prs_server_stop(srv);
    srv = NULL;
    assert_int_equal(start_server(), 0);
    expect_error(call("GET", path, tok, NULL), 404, "not_found", "no such cluster");
}

static void test_bad_declarations(void **state)
{
    (void)state;
    static const struct {
        const char *extra, *needle;
    } cases[] = {
        {"{\"gpus\": 0}", "gpus"},
        {"{\"gpus\": 1}", "gpus: 1, fewer than the 2 GPUs"},
        {"{\"colour\": 1}", "colour"},
        {"{\"max_util\": 1.5}", "max_util"},
        {"{\"pool_period_s\": 0}", "pool_period_s: 0 only with cluster_period_s 0"},
        {"{\"cluster_period_s\": 0}", "cluster_period_s: 0 only with pool_period_s 0"},
        {"{\"cluster_period_s\": 200}", "cluster_period_s: 200, shorter than pool_period_s"},
        {"{\"pool_period_s\": 30}", "pool_period_s: 30, shorter than peak_window_s"},
        {"{\"peak_window_s\": 0}", "peak_window_s"},
        {"{\"peak_window_s\": 1}", "cluster_period_s: at most 1022 peak windows"},
        {"{\"cluster_period_s\": -1}", "cluster_period_s"},
        {"{\"headroom\": 0.5}", "headroom"},
        {"{\"start_s\": -1}", "start_s"},
        {"{\"reshard_s\": 4000}", "reshard_s"},
        {"{\"emergencies\": 1}", "emergencies"},
        {"{\"slo\": {\"ttft_s\": [1, 2]}}", "slo.ttft_s"},
        {"{\"slo\": {\"tbt_s\": -1}}", "slo.tbt_s"},
        {"{\"classes\": {\"in_tokens\": [1024, 256]}}",
         "classes.in_tokens: expected two increasing"},
        {"{\"profile_csv\": \"model,gpu\\nx\"}", "profile"},
        {"{\"profile_csv\": 3}", "profile_csv"},
        {"{\"pools\": {\"XX\": {}}}", "pools.XX: unknown class"},
        {"{\"pools\": []}", "pools"},
        {"{\"pools\": null}", "pools: required"},
        {"{\"pools\": {\"SS\": {\"instances\": [{\"url\": \"ftp://x\", \"tp\": 1, \"gpus\": "
         "[\"a\"]}]}}}",
         "pools.SS.instances[0].url"},
        {"{\"pools\": {\"LL\": {\"instances\": [{\"url\": \"http://x\", \"tp\": 2, \"gpus\": "
         "[\"a\"]}]}}}",
         "pools.LL.instances[0].gpus: 1 GPUs for tp 2"},
        {"{\"pools\": {\"LL\": {\"instances\": [{\"url\": \"http://x\", \"tp\": 9, \"gpus\": "
         "[\"a\"]}]}}}",
         "pools.LL.instances[0].tp"},
        {"{\"pools\": {\"SS\": {\"instances\": [{\"url\": \"http://x\", \"tp\": 2, \"gpus\": "
         "[\"a\", \"a\"]}]}}}",
         "GPU a is declared twice"},
        {"{\"pools\": {\"MM\": {\"instances\": [{\"url\": \"http://x\", \"tp\": 1, \"gpus\": "
         "[\"a\"]}]}}}",
         "tp 1, which the profile does not measure"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *d = declaration(cases[i].extra);
        expect_error(call("POST", "/v1/clusters", CTOK, d), 400, "bad_request", cases[i].needle);
        free(d);
    }
    expect_error(call("POST", "/v1/clusters", CTOK, "{"), 400, "bad_request", "");
}

static void test_bad_loads(void **state)
{
    (void)state;
    char id[64], tok[96], path[128];
    declare(id, tok);
    snprintf(path, sizeof path, "/v1/clusters/%s/loads", id);
    expect_error(call("POST", path, tok, "{\"rates_rps\":{\"XX\":1}}"), 400, "bad_request",
                 "rates_rps.XX: unknown class");
    expect_error(call("POST", path, tok, "{\"rates_rps\":{\"SS\":-1}}"), 400, "bad_request",
                 "rates_rps.SS");
    expect_error(call("POST", path, tok, "{\"rates_rps\":{\"SS\":\"1\"}}"), 400, "bad_request",
                 "rates_rps.SS");
    expect_error(call("POST", path, tok, "{\"rate\":{}}"), 400, "bad_request", "rate");
    expect_error(call("POST", path, tok, "{}"), 400, "bad_request", "rates_rps: required");
    expect_error(call("POST", path, tok, "{\"rates_rps\":{},\"at_unix\":-5}"), 400, "bad_request",
                 "at_unix");
    snprintf(path, sizeof path, "/v1/clusters/%s/profile", id);
    expect_error(call("POST", path, tok, "not,a,profile\n"), 400, "bad_profile", "profile");
    expect_error(call("GET", "/v1/clusters/AAAAAAAAAAAAAAAA", ATOK, NULL), 404, "not_found",
                 "no such cluster");
}

static void test_tokens(void **state)
{
    (void)state;
    char *d = declaration(NULL);
    expect_error(call("POST", "/v1/clusters", NULL, d), 401, "unauthorized", "creation token");
    expect_error(call("POST", "/v1/clusters", "wrong", d), 401, "unauthorized", "creation token");
    free(d);
    char id[64], tok[96], other_id[64], other[96], path[128];
    declare(id, tok);
    declare(other_id, other);
    snprintf(path, sizeof path, "/v1/clusters/%s", id);
    expect_error(call("GET", path, NULL, NULL), 401, "unauthorized", "token");
    expect_error(call("GET", path, other, NULL), 401, "unauthorized", "token");
    http_reply r = call("GET", path, ATOK, NULL); /* the administrator may read */
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    snprintf(path, sizeof path, "/v1/clusters/%s/loads", id);
    expect_error(call("POST", path, ATOK, "{\"rates_rps\":{}}"), 401, "unauthorized", "token");
    snprintf(path, sizeof path, "/v1/clusters/%s/desired", id);
    r = call("GET", path, ATOK, NULL);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    snprintf(path, sizeof path, "/v1/clusters/%s", id);
    r = call("DELETE", path, tok, NULL);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    expect_error(call("GET", path, tok, NULL), 404, "not_found", "no such cluster");
    snprintf(path, sizeof path, "/v1/clusters/%s", other_id);
    r = call("GET", path, other, NULL); /* the other is untouched */
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loads_grow_and_shrink),
        cmocka_unit_test(test_restart),
        cmocka_unit_test(test_bad_declarations),
        cmocka_unit_test(test_bad_loads),
        cmocka_unit_test(test_tokens),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
