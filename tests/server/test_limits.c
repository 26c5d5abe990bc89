/* Who may create jobs, and how many (docs/server.md, 'Limits'), against a server running in this
 * process: the creation token (required beyond loopback), the caps on jobs, ranks per job and
 * ranks per server (job spam is refused past the cap, and deleting makes room again),
 * DELETE /v1/jobs/{id} (every stored row goes, a planner working on the job is dropped) and the
 * retention of finished jobs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "perseus/gpumodel.h"
#include "perseus/server.h"
#include "server_harness.h"

static const char SPEC1[] = "{\"stages\":1,\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[1410,1000],"
                            "\"blocking_power_w\":80}";

typedef struct srv_ctx {
    prs_server *s;
    int port;
    char dir[256], db[300];
} srv_ctx;

static int start(srv_ctx *x, const prs_server_config *base)
{
    harness_tmpdir(x->dir, sizeof x->dir, "limits");
    if (!x->dir[0]) return -1;
    prs_server_config cfg = *base;
    cfg.port = 0;
    snprintf(x->db, sizeof x->db, "%s/test.db", x->dir);
    cfg.db_path = x->db;
    cfg.data_dir = x->dir;
    cfg.log_fd = -1;
    cfg.threads = 2;
    prs_error err = {0, ""};
    if (prs_server_start(&cfg, &x->s, &err) != 0) {
        fprintf(stderr, "server: %s\n", err.msg);
        return -1;
    }
    x->port = prs_server_port(x->s);
    return 0;
}

static void stop(srv_ctx *x)
{
    prs_server_stop(x->s);
    harness_rmdir(x->dir);
}

/* POST /v1/jobs with `spec` and an optional bearer token: the status; id and token of a created
 * job into id/tok when given. */
static int create(int port, const char *spec, const char *bearer, char *id, char *tok)
{
    http_reply r = http_do(port, "POST", "/v1/jobs", bearer, spec, strlen(spec), NULL);
    int st = r.status;
    if (st == 201 && id) snprintf(id, 64, "%s", json_str(r.json, "job_id"));
    if (st == 201 && tok) snprintf(tok, 96, "%s", json_str(r.json, "token"));
    if (st != 201 && st != 429 && st != 401)
        fprintf(stderr, "create: %d %s\n", st, r.body ? r.body : "");
    http_reply_free(&r);
    return st;
}

static int request(int port, const char *method, const char *id, const char *rest, const char *tok)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s%s", id, rest);
    http_reply r = http_do(port, method, path, tok, NULL, 0, NULL);
    int st = r.status;
    http_reply_free(&r);
    return st;
}

static long count_rows(const char *db, const char *table, const char *id)
{
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    long n = -1;
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE %s=?1", table,
             strcmp(table, "jobs") == 0 ? "id" : "job_id");
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int(st, 0);
    }
    sqlite3_finalize(st);
    sqlite3_close(h);
    return n;
}

/* Whether every row of job id is gone from every table within 30 s (a deleted job's rows are
 * purged by the server's janitor, in batches, after the DELETE's answer). */
static int rows_gone(const char *db, const char *id)
{
    static const char *const TABLES[] = {"jobs",     "ranks",     "measurements", "windows",
                                         "profiles", "frontiers", "pipelines"};
    for (double t0 = harness_now(); harness_now() - t0 < 30; harness_sleep_ms(10)) {
        long left = 0;
        for (int t = 0; t < 7; t++)
            left += count_rows(db, TABLES[t], id);
        if (left == 0) return 1;
    }
    return 0;
}

/* Without a creation token the server refuses to listen beyond loopback; with one, creating a
 * job needs it (401 before the body is read otherwise). */
static void test_create_token(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    cfg.listen_host = "0.0.0.0";
    srv_ctx x;
    harness_tmpdir(x.dir, sizeof x.dir, "limits");
    snprintf(x.db, sizeof x.db, "%s/test.db", x.dir);
    cfg.db_path = x.db;
    cfg.data_dir = x.dir;
    cfg.port = 0;
    cfg.log_fd = -1;
    prs_server *s = NULL;
    prs_error err = {0, ""};
    assert_int_equal(prs_server_start(&cfg, &s, &err), PRS_EINVAL);
    assert_null(s);
    assert_non_null(strstr(err.msg, "--create-token"));
    harness_rmdir(x.dir);

    cfg.create_token = "open-sesame";
    assert_int_equal(start(&x, &cfg), 0);
    assert_int_equal(create(x.port, SPEC1, NULL, NULL, NULL), 401);
    assert_int_equal(create(x.port, SPEC1, "open-sesam", NULL, NULL), 401);
    assert_int_equal(create(x.port, SPEC1, "open-sesame!", NULL, NULL), 401);
    char id[64], tok[96];
    assert_int_equal(create(x.port, SPEC1, "open-sesame", id, tok), 201);
    /* The job's own token, not the creation token, opens the job. */
    assert_int_equal(request(x.port, "GET", id, "", "open-sesame"), 401);
    assert_int_equal(request(x.port, "GET", id, "", tok), 200);
    stop(&x);
}

/* Job spam: past --max-jobs every creation is 429 at once, the server keeps serving, and a
 * deleted job makes room for one more. Ranks per job and per server are capped too. */
static void test_caps(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    cfg.max_jobs = 10;
    cfg.max_world = 8;
    cfg.max_ranks = 60;
    srv_ctx x;
    assert_int_equal(start(&x, &cfg), 0);
    static const char SPEC16[] =
        "{\"stages\":4,\"microbatches\":4,\"dp\":4,\"clocks_mhz\":[1410,1000]}";
    http_reply r = http_do(x.port, "POST", "/v1/jobs", NULL, SPEC16, strlen(SPEC16), NULL);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "--max-world"));
    http_reply_free(&r);
    /* 7 jobs of 8 ranks = 56; an 8th would make 64 > 60. */
    static const char SPEC8[] = "{\"stages\":4,\"microbatches\":4,\"dp\":2,\"clocks_mhz\":[1410]}";
    char ids[64][64], toks[64][96];
    for (int i = 0; i < 7; i++)
        assert_int_equal(create(x.port, SPEC8, NULL, ids[i], toks[i]), 201);
    r = http_do(x.port, "POST", "/v1/jobs", NULL, SPEC8, strlen(SPEC8), NULL);
    assert_int_equal(r.status, 429);
    assert_string_equal(json_str(json_object_get(r.json, "error"), "code"), "too_many_ranks");
    http_reply_free(&r);
    /* 1-rank jobs up to the job cap (59 ranks), then spam: all refused, quickly. */
    for (int n = 7; n < 10; n++)
        assert_int_equal(create(x.port, SPEC1, NULL, ids[n], toks[n]), 201);
    r = http_do(x.port, "POST", "/v1/jobs", NULL, SPEC1, strlen(SPEC1), NULL);
    assert_int_equal(r.status, 429);
    assert_string_equal(json_str(json_object_get(r.json, "error"), "code"), "too_many_jobs");
    http_reply_free(&r);
    double t0 = harness_now();
    int refused = 0;
    for (int i = 0; i < 500; i++)
        refused += create(x.port, SPEC1, NULL, NULL, NULL) == 429;
    double secs = harness_now() - t0;
    print_message("500 creations past the cap: %d refused in %.3f s\n", refused, secs);
    assert_int_equal(refused, 500);
    http_reply h = http_do(x.port, "GET", "/healthz", NULL, NULL, 0, NULL);
    assert_int_equal(h.status, 200);
    assert_int_equal(json_int(h.json, "jobs"), 10);
    http_reply_free(&h);
    /* Deleting one (its token only) makes room for one. */
    assert_int_equal(request(x.port, "DELETE", ids[0], "", toks[1]), 401);
    assert_int_equal(request(x.port, "DELETE", ids[0], "", toks[0]), 200);
    assert_int_equal(request(x.port, "GET", ids[0], "", toks[0]), 404);
    assert_int_equal(request(x.port, "DELETE", ids[0], "", toks[0]), 404);
    assert_int_equal(create(x.port, SPEC1, NULL, NULL, NULL), 201);
    assert_int_equal(create(x.port, SPEC1, NULL, NULL, NULL), 429);
    stop(&x);
}

/* A profile CSV for `stages` stages at the clocks, from the A100 model. */
static int profile_csv(char *csv, size_t cap, int stages, const int *clocks, int nclocks)
{
    const prs_gpu_preset *g = prs_gpu_preset_find("a100");
    int n = snprintf(csv, cap, "stage,instruction,frequency,time,energy\n");
    for (int c = 0; c < stages; c++)
        for (int k = 0; k < nclocks; k++)
            for (int in = 0; in < 2; in++) {
                prs_gpu_work w = g->work[in];
                w.t_ref_s *= 1 + 0.1 * c;
                n += snprintf(csv + n, cap - (size_t)n, "%d,%s,%d,%.9g,%.9g\n", c,
                              in ? "backward" : "forward", clocks[k],
                              prs_gpu_time_s(g, &w, clocks[k]), prs_gpu_energy_j(g, &w, clocks[k]));
            }
    return n;
}

/* DELETE removes the job at once (404 from then on) and every row of it soon after, in any
 * phase, also while a planner works on it. */
static void test_delete(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    srv_ctx x;
    assert_int_equal(start(&x, &cfg), 0);
    static const char SPEC[] = "{\"stages\":4,\"microbatches\":8,\"dp\":1,"
                               "\"clocks_mhz\":[1410,1350,1290,1230,1170,1110,1050,990],"
                               "\"blocking_power_w\":80,\"unit_time_s\":0.0001}";
    static const int CLOCKS[] = {1410, 1350, 1290, 1230, 1170, 1110, 1050, 990};
    char id[64], tok[96], path[128];
    static char csv[65536];
    int n = profile_csv(csv, sizeof csv, 4, CLOCKS, 8);
    for (int round = 0; round < 3; round++) {
        assert_int_equal(create(x.port, SPEC, NULL, id, tok), 201);
        snprintf(path, sizeof path, "/v1/jobs/%s/profile", id);
        http_reply r = http_do(x.port, "POST", path, tok, csv, (size_t)n, NULL);
        assert_int_equal(r.status, 200);
        http_reply_free(&r);
        assert_true(count_rows(x.db, "profiles", id) == 1);
        /* Deleted as soon as uploaded (round 0), once planning has started (1), once planned (2).
         */
        for (double t0 = harness_now(); round > 0 && harness_now() - t0 < 30; harness_sleep_ms(5)) {
            snprintf(path, sizeof path, "/v1/jobs/%s", id);
            http_reply st = http_do(x.port, "GET", path, tok, NULL, 0, NULL);
            int started = json_int(json_object_get(st.json, "planning"), "total") > 0;
            int planned = st.json && strcmp(json_str(st.json, "phase"), "planning") != 0;
            http_reply_free(&st);
            if (round == 1 ? started || planned : planned) break;
        }
        assert_int_equal(request(x.port, "DELETE", id, "", tok), 200);
        assert_int_equal(request(x.port, "GET", id, "", tok), 404);
        assert_true(rows_gone(x.db, id));
    }
    http_reply h = http_do(x.port, "GET", "/healthz", NULL, NULL, 0, NULL);
    assert_int_equal(json_int(h.json, "jobs"), 0);
    http_reply_free(&h);
    stop(&x);
}

/* Finished jobs go once their retention has passed, from memory and the store; others stay. */
static void test_retention(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    cfg.retention_s = 1;
    srv_ctx x;
    assert_int_equal(start(&x, &cfg), 0);
    char done_id[64], done_tok[96], live_id[64], live_tok[96];
    assert_int_equal(create(x.port, SPEC1, NULL, done_id, done_tok), 201);
    assert_int_equal(create(x.port, SPEC1, NULL, live_id, live_tok), 201);
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/complete", done_id);
    http_reply r = http_do(x.port, "POST", path, done_tok, "{}", 2, NULL);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    double t0 = harness_now();
    assert_int_equal(request(x.port, "GET", done_id, "", done_tok), 200);
    /* A bound that holds on an idle machine, plus an allowance for a busy one: 50 times the
     * request just measured. */
    double allowance = 50 * (harness_now() - t0);
    while (request(x.port, "GET", done_id, "", done_tok) == 200 && harness_now() - t0 < 30)
        harness_sleep_ms(50); /* poll interval */
    double secs = harness_now() - t0;
    print_message("finished job deleted %.2f s after it finished (retention 1 s, in whole "
                  "seconds; allowance %.0f ms)\n",
                  secs, 1e3 * allowance);
    assert_int_equal(request(x.port, "GET", done_id, "", done_tok), 404);
    assert_true(secs < 3.5 + allowance);
    assert_true(rows_gone(x.db, done_id));
    assert_int_equal(request(x.port, "GET", live_id, "", live_tok), 200);
    stop(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_token),
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_delete),
        cmocka_unit_test(test_retention),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
