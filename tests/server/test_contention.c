/* What one client may cost the others (docs/server.md, 'Contention'): a job route refuses a
 * request without the job's token from its headers, before any of its body is read; the bearer
 * scheme is case-insensitive; an administrator's token deletes any job; an unfinished job that
 * nobody asks about is deleted after --job-idle-timeout, freeing its place; a flood of idle
 * connections past --max-connections leaves new clients a prompt 503 (not a wait in the
 * listening backlog) and the log quiet; and a DELETE acknowledged before a kill -9 stays done,
 * its rows purged after the restart. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "perseus/server.h"
#include "server_harness.h"
#include "sim_ranks.h"

static const char SPEC[] = "{\"stages\":2,\"microbatches\":4,\"dp\":1,"
                           "\"clocks_mhz\":[1410,1290],\"blocking_power_w\":80}";

typedef struct srv {
    char dir[256], db[300], log[300];
    prs_server *s;
    int port, log_fd;
} srv;

static srv g;

static void start(prs_server_config *cfg)
{
    harness_tmpdir(g.dir, sizeof g.dir, "contention");
    assert_true(g.dir[0] != '\0');
    snprintf(g.db, sizeof g.db, "%s/test.db", g.dir);
    snprintf(g.log, sizeof g.log, "%s/server.log", g.dir);
    g.log_fd = open(g.log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    assert_true(g.log_fd >= 0);
    cfg->port = 0;
    cfg->db_path = g.db;
    cfg->data_dir = g.dir;
    cfg->log_fd = g.log_fd;
    cfg->log_level = PRS_LOG_WARN;
    prs_error err = {0, ""};
    assert_int_equal(prs_server_start(cfg, &g.s, &err), 0);
    g.port = prs_server_port(g.s);
}

static int teardown(void **state)
{
    (void)state;
    prs_server_stop(g.s);
    g.s = NULL;
    if (g.log_fd >= 0) close(g.log_fd);
    g.log_fd = -1;
    harness_rmdir(g.dir);
    return 0;
}

static int create(int port, const char *create_token, char id[64], char tok[96])
{
    http_reply r = http_do(port, "POST", "/v1/jobs", create_token, SPEC, strlen(SPEC), NULL);
    snprintf(id, 64, "%s", json_str(r.json, "job_id"));
    snprintf(tok, 96, "%s", json_str(r.json, "token"));
    int st = r.status;
    http_reply_free(&r);
    return st;
}

static int status_of(int port, const char *method, const char *id, const char *token)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    http_reply r = http_do(port, method, path, token, NULL, 0, NULL);
    int st = r.status;
    http_reply_free(&r);
    return st;
}

/* Send only the headers of a request announcing a body of `declared` bytes, and wait (at most
 * 10 s) for an answer without sending any of it: its status, or 0 when none came. */
static int answer_before_body(int port, const char *path, const char *auth, size_t declared)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char head[512];
    int n = snprintf(head, sizeof head,
                     "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%sContent-Type: text/csv\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     path, auth ? auth : "", auth ? "\r\n" : "", declared);
    assert_int_equal(send(fd, head, (size_t)n, MSG_NOSIGNAL), n);
    char buf[512];
    ssize_t got = recv(fd, buf, sizeof buf - 1, 0);
    close(fd);
    if (got < 12) return 0;
    buf[got] = '\0';
    return strncmp(buf, "HTTP/1.1 ", 9) == 0 ? atoi(buf + 9) : 0;
}

static void test_token_before_body(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    start(&cfg);
    char id[64], tok[96], other[64], other_tok[96], path[160];
    assert_int_equal(create(g.port, NULL, id, tok), 201);
    assert_int_equal(create(g.port, NULL, other, other_tok), 201);
    snprintf(path, sizeof path, "/v1/jobs/%s/profile", id);
    /* 16 MiB announced (the profile limit), none sent: refused from the headers. */
    assert_int_equal(answer_before_body(g.port, path, NULL, (size_t)16 << 20), 401);
    char auth[160];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", other_tok);
    assert_int_equal(answer_before_body(g.port, path, auth, (size_t)16 << 20), 401);
    snprintf(path, sizeof path, "/v1/jobs/%s/results", id);
    assert_int_equal(answer_before_body(g.port, path, NULL, (size_t)1 << 20), 401);
    assert_int_equal(
        answer_before_body(g.port, "/v1/jobs/AAAAAAAAAAAAAAAA/results", auth, (size_t)1 << 20),
        404);
    /* The job's own token is let through to send its body (a bad one here: 400, not 401). */
    http_reply r = http_do(g.port, "POST", path, tok, "{}", 2, NULL);
    assert_int_equal(r.status, 400);
    http_reply_free(&r);
}

static int connect_idle(int port);
static long count_in_file(const char *path, const char *needle);

static long count_measurements(const char *db, const char *id)
{
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    long n = -1;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h, "SELECT count(*) FROM measurements WHERE job_id=?1", -1, &st, NULL) ==
            SQLITE_OK) {
        sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int(st, 0);
    }
    sqlite3_finalize(st);
    sqlite3_close(h);
    return n;
}

/* A rank cannot make the store hold more profiling rows than its rounds ask: of 10 iterations
 * posted to a round that asks 3 (1 warm-up, 2 measured), 3 are stored; of 10 late ones for
 * that round posted during the next, 3 more. All are acknowledged. */
static void test_profiling_rows_capped(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    start(&cfg);
    sim_job j;
    assert_int_equal(sim_create(g.port, sim_sweep_spec(1, 4, 1), 1, 4, 1, &j), 201);
    assert_int_equal(sim_register_all(&j), 1);
    int clocks[8];
    for (int round = 0; round < 2; round++) {
        for (int k = 0; k < 8; k++)
            clocks[k] = 1410;
        json_t *its = json_array();
        for (long n = 0; n < 10; n++)
            json_array_append_new(its, sim_iteration(&j, 0, 10L * round + n, clocks, 1, 0));
        assert_int_equal(sim_post(&j, 0, 0, its), 200);
        assert_int_equal(count_measurements(g.db, j.id), 3 * (round + 1));
    }
    assert_int_equal(j.acked, 20);
}

/* With a metrics token, /metrics needs it; without one, a server listening beyond loopback
 * leaves out the per-job series (they name job ids and models). */
static void test_metrics_not_to_anyone(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    cfg.metrics_token = "metrics-token-for-the-test-0123";
    start(&cfg);
    char id[64], tok[96];
    assert_int_equal(create(g.port, NULL, id, tok), 201);
    http_reply r = http_do(g.port, "GET", "/metrics", NULL, NULL, 0, NULL);
    assert_int_equal(r.status, 401);
    http_reply_free(&r);
    r = http_do(g.port, "GET", "/metrics", tok, NULL, 0, NULL);
    assert_int_equal(r.status, 401);
    http_reply_free(&r);
    r = http_do(g.port, "GET", "/metrics", cfg.metrics_token, NULL, 0, NULL);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, id));
    http_reply_free(&r);
    teardown(NULL);

    prs_server_config_default(&cfg);
    cfg.listen_host = "0.0.0.0";
    cfg.create_token = "create-token-for-the-test-012345";
    start(&cfg);
    assert_int_equal(create(g.port, cfg.create_token, id, tok), 201);
    r = http_do(g.port, "GET", "/metrics", NULL, NULL, 0, NULL);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "perseusd_jobs_loaded 1"));
    assert_null(strstr(r.body, "perseusd_job_"));
    assert_null(strstr(r.body, id));
    http_reply_free(&r);
}

/* Requests libmicrohttpd refuses itself (a malformed request line, a header line without a
 * colon, bad chunked framing, HTTP/9.9) are the client's mistakes: logged at warn, not error. */
static void test_client_mistakes_not_errors(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    start(&cfg);
    static const char *const BAD[] = {
        "GET / HTTP/9.9\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nBad Header\r\n\r\n",
        "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\n",
    };
    for (int i = 0; i < 3; i++) {
        int fd = connect_idle(g.port);
        assert_true(fd >= 0);
        struct timeval tv = {10, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        size_t n = strlen(BAD[i]);
        assert_int_equal(send(fd, BAD[i], n, MSG_NOSIGNAL), (ssize_t)n);
        char buf[512];
        ssize_t got = recv(fd, buf, sizeof buf - 1, 0);
        close(fd);
        assert_true(got > 12);
        buf[got] = '\0';
        int status = atoi(buf + 9);
        assert_true(status == 400 || status == 505);
    }
    /* The answers went out after the log lines were written. */
    assert_int_equal(count_in_file(g.log, "level=error"), 0);
    assert_true(count_in_file(g.log, "msg=http_daemon") >= 3);
}

/* Two Transfer-Encoding headers are refused (libmicrohttpd reads only the first; a proxy might
 * frame the body by the other). */
static void test_two_transfer_encodings(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    start(&cfg);
    char id[64], tok[96], path[128], hdr[300];
    assert_int_equal(create(g.port, NULL, id, tok), 201);
    snprintf(path, sizeof path, "/v1/jobs/%s/results", id);
    snprintf(hdr, sizeof hdr,
             "Authorization: Bearer %s\r\nTransfer-Encoding: chunked\r\n"
             "Transfer-Encoding: identity\r\n",
             tok);
    /* By hand: http_do would add a Content-Length. The chunked body is empty. */
    int fd = connect_idle(g.port);
    assert_true(fd >= 0);
    char req[600];
    int n = snprintf(req, sizeof req, "POST %s HTTP/1.1\r\nHost: x\r\n%s\r\n0\r\n\r\n", path, hdr);
    assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[1024];
    ssize_t got = recv(fd, buf, sizeof buf - 1, 0);
    close(fd);
    assert_true(got > 12);
    buf[got] = '\0';
    assert_int_equal(atoi(buf + 9), 400);
    assert_non_null(strstr(buf, "Transfer-Encoding"));
}

/* The bearer scheme's name is case-insensitive, and more than one space may follow it. */
static void test_bearer_any_case(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    start(&cfg);
    char id[64], tok[96], path[128], hdr[200];
    assert_int_equal(create(g.port, NULL, id, tok), 201);
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    static const char *const SCHEMES[] = {"bearer ", "BEARER ", "Bearer   ", "bEaReR\t"};
    for (int i = 0; i < 4; i++) {
        snprintf(hdr, sizeof hdr, "Authorization: %s%s\r\n", SCHEMES[i], tok);
        http_reply r = http_do(g.port, "GET", path, NULL, NULL, 0, hdr);
        assert_int_equal(r.status, 200);
        http_reply_free(&r);
    }
    snprintf(hdr, sizeof hdr, "Authorization: Bearerx%s\r\n", tok);
    http_reply r = http_do(g.port, "GET", path, NULL, NULL, 0, hdr);
    assert_int_equal(r.status, 401);
    http_reply_free(&r);
}

/* The administrator's token lists the jobs, reads and deletes any job, and does nothing else. */
static void test_admin_delete(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    cfg.admin_token = "admin-token-for-the-test-0123456789";
    start(&cfg);
    char a[64], atok[96], b[64], btok[96];
    assert_int_equal(create(g.port, NULL, a, atok), 201);
    assert_int_equal(create(g.port, NULL, b, btok), 201);
    assert_int_equal(status_of(g.port, "DELETE", a, btok), 401); /* another job's token */
    assert_int_equal(status_of(g.port, "DELETE", a, "wrong"), 401);
    assert_int_equal(status_of(g.port, "GET", a, cfg.admin_token), 200); /* reads a status */
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/complete", a);
    http_reply rc = http_do(g.port, "POST", path, cfg.admin_token, "{}", 2, NULL);
    assert_int_equal(rc.status, 401); /* ... and changes nothing */
    http_reply_free(&rc);
    /* GET /v1/jobs: every job, by id, for the administrator alone. */
    http_reply l = http_do(g.port, "GET", "/v1/jobs", cfg.admin_token, NULL, 0, NULL);
    assert_int_equal(l.status, 200);
    assert_int_equal(json_int(l.json, "count"), 2);
    json_t *jobs = json_object_get(l.json, "jobs");
    assert_int_equal(json_array_size(jobs), 2);
    const char *first = json_str(json_array_get(jobs, 0), "job_id");
    const char *second = json_str(json_array_get(jobs, 1), "job_id");
    assert_true(strcmp(first, second) < 0);
    assert_true((strcmp(first, a) == 0 && strcmp(second, b) == 0) ||
                (strcmp(first, b) == 0 && strcmp(second, a) == 0));
    assert_string_equal(json_str(json_array_get(jobs, 0), "phase"), "registering");
    http_reply_free(&l);
    l = http_do(g.port, "GET", "/v1/jobs", atok, NULL, 0, NULL);
    assert_int_equal(l.status, 401); /* a job's token lists nothing */
    http_reply_free(&l);
    l = http_do(g.port, "GET", "/v1/jobs", NULL, NULL, 0, NULL);
    assert_int_equal(l.status, 401);
    http_reply_free(&l);
    assert_int_equal(status_of(g.port, "DELETE", a, cfg.admin_token), 200);
    assert_int_equal(status_of(g.port, "GET", a, atok), 404);
    assert_int_equal(status_of(g.port, "GET", b, btok), 200);
    assert_int_equal(status_of(g.port, "DELETE", b, btok), 200); /* the owner's still works */
    http_reply h = http_do(g.port, "GET", "/healthz", NULL, NULL, 0, NULL);
    assert_int_equal(json_int(h.json, "jobs"), 0);
    http_reply_free(&h);
}

/* An unfinished job nobody asks about is deleted after the idle timeout and frees its place
 * (--max-jobs 2 is full before); a job polled meanwhile stays. */
static void test_idle_expiry(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    cfg.job_idle_timeout_s = 2;
    cfg.max_jobs = 2;
    start(&cfg);
    char a[64], atok[96], b[64], btok[96], c[64], ctok[96];
    assert_int_equal(create(g.port, NULL, a, atok), 201);
    assert_int_equal(create(g.port, NULL, b, btok), 201);
    assert_int_equal(create(g.port, NULL, c, ctok), 429);
    double t0 = harness_now(), last = t0, gap = 0;
    int a_status = 200;
    while (a_status == 200 && harness_now() - t0 < 60) {
        assert_int_equal(status_of(g.port, "GET", b, btok), 200);
        double now = harness_now();
        gap = now - last > gap ? now - last : gap;
        last = now;
        /* Asking about A would keep it: look at the count of jobs instead. */
        http_reply h = http_do(g.port, "GET", "/healthz", NULL, NULL, 0, NULL);
        a_status = json_int(h.json, "jobs") == 2 ? 200 : 404;
        http_reply_free(&h);
        harness_sleep_ms(50);
    }
    print_message("idle job deleted after %.2f s (idle timeout 2 s); longest gap between the "
                  "other job's polls %.3f s\n",
                  harness_now() - t0, gap);
    assert_int_equal(status_of(g.port, "GET", a, atok), 404);
    /* B was asked about every poll: it stays, unless this machine stalled the test longer than
     * the idle timeout between two polls. */
    if (gap < 1.5) assert_int_equal(status_of(g.port, "GET", b, btok), 200);
    assert_int_equal(create(g.port, NULL, c, ctok), 201);
}

static int connect_idle(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static long count_in_file(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    char line[2048];
    long n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    if (f) fclose(f);
    return n;
}

/* 250 idle connections against a cap of 50 over two workers: a new client gets a 503 (the
 * harness waits 10 s at most: a client left in the backlog gets no answer), nothing is logged
 * at error, and once the flood is gone new clients are served again. */
static void test_flood_gets_503(void **state)
{
    (void)state;
    enum { NIDLE = 250 };
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    cfg.max_connections = 50;
    cfg.threads = 2;
    start(&cfg);
    int fds[NIDLE];
    for (int i = 0; i < NIDLE; i++) {
        fds[i] = connect_idle(g.port);
        assert_true(fds[i] >= 0);
    }
    http_reply r = http_do(g.port, "GET", "/healthz", NULL, NULL, 0, NULL);
    assert_int_equal(r.status, 503);
    assert_string_equal(json_str(json_object_get(r.json, "error"), "code"), "unavailable");
    http_reply_free(&r);
    for (int i = 0; i < NIDLE; i++)
        close(fds[i]);
    int st = 0;
    for (double t0 = harness_now(); st != 200 && harness_now() - t0 < 30; harness_sleep_ms(20)) {
        r = http_do(g.port, "GET", "/healthz", NULL, NULL, 0, NULL);
        st = r.status;
        http_reply_free(&r);
    }
    assert_int_equal(st, 200);
    assert_int_equal(count_in_file(g.log, "level=error"), 0);
}

/* A DELETE acknowledged just before a kill -9 is not undone by the restart: the job stays gone
 * and the restarted server purges its rows. */
static void test_delete_survives_kill(void **state)
{
    (void)state;
    daemon_proc d = {0};
    harness_tmpdir(d.dir, sizeof d.dir, "delkill");
    assert_int_equal(daemon_start(&d), 0);
    char id[64], tok[96], db[320];
    assert_int_equal(create(d.port, NULL, id, tok), 201);
    assert_int_equal(daemon_stop(&d, SIGTERM), 0);
    /* 200 measurements of 100 windows each, written while the server is down. */
    snprintf(db, sizeof db, "%s/perseusd.db", d.dir);
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    char sql[1024];
    snprintf(sql, sizeof sql,
             "BEGIN;"
             "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n WHERE i<199)"
             " INSERT INTO measurements(job_id, rank, phase, round, iteration, clock_mhz, time_s,"
             " energy_j, used) SELECT '%s', 0, 'profiling', 99, i, 1410, 1, 100, 1 FROM n;"
             "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n WHERE i<99)"
             " INSERT INTO windows(job_id, measurement_id, stage, instr, microbatch, clock_mhz,"
             " time_s, energy_j, used) SELECT '%s', m.id, 0, 0, n.i, 1410, 0.1, 1, 1"
             " FROM measurements m, n WHERE m.job_id='%s';"
             "COMMIT;",
             id, id, id);
    assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    assert_int_equal(daemon_start(&d), 0);
    assert_int_equal(status_of(d.port, "DELETE", id, tok), 200);
    daemon_stop(&d, SIGKILL);
    assert_int_equal(daemon_start(&d), 0);
    assert_int_equal(status_of(d.port, "GET", id, tok), 404);
    long left = -1;
    for (double t0 = harness_now(); left != 0 && harness_now() - t0 < 30; harness_sleep_ms(20)) {
        sqlite3_stmt *st = NULL;
        left = -1;
        if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
            sqlite3_prepare_v2(h,
                               "SELECT (SELECT count(*) FROM windows WHERE job_id=?1) +"
                               " (SELECT count(*) FROM measurements WHERE job_id=?1) +"
                               " (SELECT count(*) FROM jobs WHERE id=?1)",
                               -1, &st, NULL) == SQLITE_OK) {
            sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
            if (sqlite3_step(st) == SQLITE_ROW) left = sqlite3_column_int(st, 0);
        }
        sqlite3_finalize(st);
        sqlite3_close(h);
    }
    assert_int_equal(left, 0);
    daemon_teardown(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_token_before_body, teardown),
        cmocka_unit_test_teardown(test_bearer_any_case, teardown),
        cmocka_unit_test_teardown(test_two_transfer_encodings, teardown),
        cmocka_unit_test_teardown(test_client_mistakes_not_errors, teardown),
        cmocka_unit_test_teardown(test_admin_delete, teardown),
        cmocka_unit_test_teardown(test_metrics_not_to_anyone, teardown),
        cmocka_unit_test_teardown(test_profiling_rows_capped, teardown),
        cmocka_unit_test_teardown(test_idle_expiry, teardown),
        cmocka_unit_test_teardown(test_flood_gets_503, teardown),
        cmocka_unit_test(test_delete_survives_kill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
