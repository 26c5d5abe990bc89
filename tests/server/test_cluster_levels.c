/* An inference cluster's periodic levels in perseusd (docs/api.md, "Inference clusters"; the
 * decisions are the emulator's: tests/infer/test_infer_online.c), against a server running in
 * this process, each load report carrying its time (at_unix: the cluster's clock, no waiting):
 *   - within a pool period nothing changes, whatever the load; at the period the pool level moves
 *     to the optimum for the past period's peak when the saving over the next period exceeds the
 *     change's cost (its TP group re-formed for free: reshard_s 0), and the answer says when,
 *     why and what came of it, the counters and the gauges agree;
 *   - the same change, costly (reshard_s 3600), is skipped, with its saving and cost given;
 *   - a load the instances in force cannot carry re-plans both levels at once and scales up;
 *     with emergencies off it waits for the period;
 *   - a restart keeps the levels' state: the same answer, and the next reports go on from it
 *     (no decision before the next period, the same skip at it); a row written before the levels
 *     existed (its load without their state) starts them afresh from its latest load.
 * The synthetic H100 profile's LL pool takes one TP-4 instance at 1 request/s, one TP-2 at 0.2
 * (a change of mix: TP-2 re-formed over the TP-4's GPUs), two TP-4 at 3. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "infer_synth.h"
#include "perseus/server.h"
#include "server_harness.h"

#define CTOK "create-secret"
#define T0 1800000000.0 /* the first report's time */

static prs_server *srv;
static int port;
static char dir[256];
static char *profile;

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
    if (prs_server_start(&cfg, &srv, &err) != 0) {
        fprintf(stderr, "server: %s\n", err.msg);
        return -1;
    }
    port = prs_server_port(srv);
    return 0;
}

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
    harness_tmpdir(dir, sizeof dir, "cluster_levels");
    if (!dir[0]) return -1;
    return start_server();
}

static int teardown(void **state)
{
    (void)state;
    prs_server_stop(srv);
    harness_rmdir(dir);
    free(profile);
    return 0;
}

static http_reply call(const char *method, const char *path, const char *tok, const char *body)
{
    return http_do(port, method, path, tok, body, body ? strlen(body) : 0, NULL);
}

/* A cluster of 32 GPUs, periods 600 / 300 / 60 s, with extra's fields: its id and token. */
static void declare(const char *extra, char *id, char *tok)
{
    json_t *o =
        json_pack("{s:s, s:i, s:s, s:i, s:i, s:i, s:i, s:i, s:{}}", "name", "levels", "gpus", 32,
                  "profile_csv", profile, "probe_requests", 200, "clocks", 3, "cluster_period_s",
                  600, "pool_period_s", 300, "peak_window_s", 60, "pools");
    json_t *x = json_loads(extra, 0, NULL);
    assert_non_null(x);
    json_object_update(o, x);
    json_decref(x);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    http_reply r = call("POST", "/v1/clusters", CTOK, text);
    free(text);
    if (r.status != 201) fprintf(stderr, "declare: %d %s\n", r.status, r.body);
    assert_int_equal(r.status, 201);
    snprintf(id, 64, "%s", json_str(r.json, "cluster_id"));
    snprintf(tok, 96, "%s", json_str(r.json, "token"));
    http_reply_free(&r);
}

/* Report LL at rate r, dt seconds after T0: the answer (the desired configuration). */
static json_t *report(const char *id, const char *tok, double dt, double r)
{
    char path[128], body[160];
    snprintf(path, sizeof path, "/v1/clusters/%s/loads", id);
    snprintf(body, sizeof body, "{\"rates_rps\": {\"LL\": %g}, \"at_unix\": %.1f}", r, T0 + dt);
    http_reply a = call("POST", path, tok, body);
    if (a.status != 200) fprintf(stderr, "load: %d %s\n", a.status, a.body);
    assert_int_equal(a.status, 200);
    json_t *o = json_incref(a.json);
    http_reply_free(&a);
    return o;
}

/* Instances of TP tp the answer wants in LL. */
static int want(json_t *d, int tp)
{
    json_t *a = json_object_get(json_object_get(json_object_get(d, "pools"), "LL"), "instances");
    json_t *x;
    size_t i;
    json_array_foreach(a, i, x)
    {
        if (json_integer_value(json_object_get(x, "tp")) == tp)
            return (int)json_integer_value(json_object_get(x, "count"));
    }
    return -1;
}

static json_t *levels(json_t *d, const char *what)
{
    return json_object_get(json_object_get(d, "levels"), what);
}

static long decisions(json_t *d, const char *kind)
{
    return (long)json_integer_value(json_object_get(levels(d, "decisions"), kind));
}

/* The pool level's latest action: at dt after T0, for reason, with outcome. */
static void pool_act(json_t *d, double dt, const char *reason, const char *outcome)
{
    json_t *a = levels(d, "pool");
    assert_true(json_is_object(a));
    assert_true(json_real_value(json_object_get(a, "at_unix")) == T0 + dt);
    assert_string_equal(json_str(a, "reason"), reason);
    assert_string_equal(json_str(a, "outcome"), outcome);
}

/* The counter of kind on /metrics for cluster id. */
static long counter(const char *id, const char *kind)
{
    http_reply m = call("GET", "/metrics", NULL, NULL);
    assert_int_equal(m.status, 200);
    char key[160];
    snprintf(key, sizeof key, "perseus_cluster_level_decisions_total{cluster=\"%s\",kind=\"%s\"} ",
             id, kind);
    const char *at = strstr(m.body, key);
    assert_non_null(at);
    long v = atol(at + strlen(key));
    http_reply_free(&m);
    return v;
}

/* LL at 1 request/s, then 0.2 through the first pool period: the answer at each step. */
static json_t *fall(const char *id, const char *tok)
{
    json_t *d = report(id, tok, 0, 1);
    assert_int_equal(want(d, 4), 1);
    assert_int_equal(want(d, 2), 0);
    pool_act(d, 0, "initial", "changed");
    long gen = (long)json_integer_value(json_object_get(d, "generation"));
    for (int dt = 60; dt < 300; dt += 60) { /* within the period: nothing moves */
        json_decref(d);
        d = report(id, tok, dt, 0.2);
        assert_int_equal(want(d, 4), 1);
        pool_act(d, 0, "initial", "changed");
        assert_int_equal(json_integer_value(json_object_get(d, "generation")), gen);
    }
    json_decref(d);
    return report(id, tok, 300, 0.2);
}

static void test_period_change(void **state)
{
    (void)state;
    char id[64], tok[96];
    declare("{\"reshard_s\": 0}", id, tok);
    json_t *d = fall(id, tok);
    assert_int_equal(want(d, 4), 0); /* the period: the optimum for 0.2, TP 2 */
    assert_int_equal(want(d, 2), 1);
    pool_act(d, 300, "period", "changed");
    json_t *a = levels(d, "pool");
    assert_true(json_real_value(json_object_get(a, "saving_j")) >
                json_real_value(json_object_get(a, "cost_j")));
    assert_int_equal(decisions(d, "pool_changed"), 1);
    assert_int_equal(decisions(d, "pool_skipped"), 0);
    assert_int_equal(counter(id, "pool_changed"), 1);
    json_t *rec = levels(d, "reconfigurations");
    assert_int_equal(json_integer_value(json_object_get(rec, "reshard")), 1);
    assert_int_equal(json_integer_value(json_object_get(rec, "stop")), 1);
    /* The cluster level waits for its own period (600 s). */
    assert_string_equal(json_str(levels(d, "cluster"), "reason"), "initial");
    json_decref(d);
    d = report(id, tok, 600, 0.2);
    assert_string_equal(json_str(levels(d, "cluster"), "reason"), "period");
    assert_int_equal(decisions(d, "cluster_period"), 1);
    json_decref(d);
}

static void test_skip_then_restart(void **state)
{
    (void)state;
    char id[64], tok[96], path[128];
    declare("{\"reshard_s\": 3600}", id, tok);
    json_t *d = fall(id, tok);
    assert_int_equal(want(d, 4), 1); /* the same change does not pay for itself */
    assert_int_equal(want(d, 2), 0);
    pool_act(d, 300, "period", "skipped");
    json_t *a = levels(d, "pool");
    double saving = json_real_value(json_object_get(a, "saving_j"));
    assert_true(saving > 0 && saving < json_real_value(json_object_get(a, "cost_j")));
    assert_int_equal(decisions(d, "pool_skipped"), 1);
    assert_int_equal(counter(id, "pool_skipped"), 1);
    json_decref(d);
    /* A restart keeps the state. */
    snprintf(path, sizeof path, "/v1/clusters/%s/desired", id);
    http_reply before = call("GET", path, tok, NULL);
    prs_server_stop(srv);
    srv = NULL;
    assert_int_equal(start_server(), 0);
    http_reply after = call("GET", path, tok, NULL);
    assert_int_equal(after.status, 200);
    json_object_del(before.json, "generation");
    json_object_del(after.json, "generation");
    assert_true(json_equal(before.json, after.json));
    http_reply_free(&before);
    http_reply_free(&after);
    /* ... and goes on from it: nothing within the period, the same skip at the next. */
    d = report(id, tok, 360, 0.2);
    pool_act(d, 300, "period", "skipped");
    assert_int_equal(decisions(d, "pool_skipped"), 1);
    json_decref(d);
    d = report(id, tok, 600, 0.2);
    pool_act(d, 600, "period", "skipped");
    assert_int_equal(decisions(d, "pool_skipped"), 2);
    assert_int_equal(want(d, 4), 1);
    json_decref(d);
}

static void test_emergency(void **state)
{
    (void)state;
    char id[64], tok[96], off_id[64], off_tok[96];
    declare("{}", id, tok);
    declare("{\"emergencies\": false}", off_id, off_tok);
    const char *ids[2] = {id, off_id}, *toks[2] = {tok, off_tok};
    for (int i = 0; i < 2; i++) {
        json_t *d = report(ids[i], toks[i], 0, 0.2);
        assert_int_equal(want(d, 2), 1);
        json_decref(d);
        d = report(ids[i], toks[i], 30, 3); /* more than one TP-2 instance carries */
        if (i == 0) {
            assert_true(want(d, 4) * 4 + want(d, 2) * 2 + want(d, 8) * 8 >= 8);
            pool_act(d, 30, "emergency", "changed");
            assert_string_equal(json_str(levels(d, "cluster"), "reason"), "emergency");
            assert_int_equal(decisions(d, "pool_emergency"), 1);
            assert_int_equal(decisions(d, "cluster_emergency"), 1);
        } else {
            assert_int_equal(want(d, 2), 1); /* waits for the period */
            assert_int_equal(want(d, 4), 0);
            pool_act(d, 0, "initial", "changed");
            json_decref(d);
            d = report(ids[i], toks[i], 300, 3);
            assert_true(want(d, 4) * 4 + want(d, 2) * 2 + want(d, 8) * 8 >= 8);
            pool_act(d, 300, "period", "changed");
        }
        json_decref(d);
    }
}

/* A stored load without the levels' state, as a database of the version before them holds. */
static void test_old_row(void **state)
{
    (void)state;
    char id[64], tok[96], db[300], sql[256], path[128];
    declare("{}", id, tok);
    json_t *d = report(id, tok, 0, 0.2);
    json_decref(d);
    d = report(id, tok, 30, 1); /* an emergency: the state has something to lose */
    assert_int_equal(decisions(d, "pool_emergency"), 1);
    json_decref(d);
    prs_server_stop(srv);
    srv = NULL;
    snprintf(db, sizeof db, "%s/test.db", dir);
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    snprintf(sql, sizeof sql, "UPDATE clusters SET load='{\"rates_rps\":{\"LL\":1}}' WHERE id='%s'",
             id);
    assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    assert_int_equal(start_server(), 0);
    snprintf(path, sizeof path, "/v1/clusters/%s/desired", id);
    http_reply r = call("GET", path, tok, NULL);
    assert_int_equal(r.status, 200);
    pool_act(r.json, 30, "initial", "changed"); /* afresh: the latest load as a first report */
    assert_int_equal(decisions(r.json, "pool_emergency"), 0);
    assert_int_equal(want(r.json, 4), 1);
    http_reply_free(&r);
    d = report(id, tok, 90, 0.2); /* within the new first period: nothing moves */
    pool_act(d, 30, "initial", "changed");
    assert_int_equal(want(d, 4), 1);
    json_decref(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_period_change),
        cmocka_unit_test(test_skip_then_restart),
        cmocka_unit_test(test_emergency),
        cmocka_unit_test(test_old_row),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
