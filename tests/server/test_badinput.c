/* Bad input against a server running in this process (perseus/server.h): malformed JSON, wrong
 * types, unknown fields, huge bodies, unknown jobs and routes, missing or wrong tokens, calls in
 * the wrong phase. Each gets a 4xx answer whose body is {"error": {"code", "message"}}, and the
 * server keeps serving. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "perseus/server.h"
#include "server_harness.h"

static prs_server *srv;
static int port;
static char dir[256];
static char job_id[64], token[96];

static int setup(void **state)
{
    (void)state;
    harness_tmpdir(dir, sizeof dir, "badinput");
    if (!dir[0]) return -1;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    cfg.port = 0;
    char db[300];
    snprintf(db, sizeof db, "%s/test.db", dir);
    cfg.db_path = db;
    cfg.data_dir = dir;
    cfg.max_body_bytes = 64 * 1024;
    cfg.log_fd = -1;
    cfg.threads = 2;
    prs_error err = {0, ""};
    if (prs_server_start(&cfg, &srv, &err) != 0) {
        fprintf(stderr, "server: %s\n", err.msg);
        return -1;
    }
    port = prs_server_port(srv);
    http_reply r = http_do(port, "POST", "/v1/jobs", NULL,
                           "{\"stages\":2,\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[1410,1000],"
                           "\"blocking_power_w\":80}",
                           strlen("{\"stages\":2,\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[1410,"
                                  "1000],\"blocking_power_w\":80}"),
                           NULL);
    if (r.status != 201) return -1;
    snprintf(job_id, sizeof job_id, "%s", json_str(r.json, "job_id"));
    snprintf(token, sizeof token, "%s", json_str(r.json, "token"));
    http_reply_free(&r);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    prs_server_stop(srv);
    harness_rmdir(dir);
    return 0;
}

/* The answer is status with a well-formed error body naming code; the server still answers. */
static void expect_error(http_reply r, int status, const char *code)
{
    if (r.status != status) fprintf(stderr, "got %d: %s\n", r.status, r.body ? r.body : "");
    assert_int_equal(r.status, status);
    assert_non_null(r.json);
    json_t *e = json_object_get(r.json, "error");
    assert_true(json_is_object(e));
    assert_string_equal(json_str(e, "code"), code);
    assert_true(strlen(json_str(e, "message")) > 0);
    assert_int_equal(json_object_size(r.json), 1);
    assert_int_equal(json_object_size(e), 2);
    http_reply_free(&r);
    http_reply h = http_do(port, "GET", "/healthz", NULL, NULL, 0, NULL);
    assert_int_equal(h.status, 200);
    http_reply_free(&h);
}

static http_reply post(const char *path, const char *tok, const char *body)
{
    return http_do(port, "POST", path, tok, body, strlen(body), NULL);
}

static void test_bad_job_specs(void **state)
{
    (void)state;
    static const char *const bodies[] = {
        "",
        "{",
        "[]",
        "{\"stages\":2}",
        "{\"stages\":\"2\",\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[1410],\"blocking_power_w\":"
        "1}",
        "{\"stages\":2.0,\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[1410],\"blocking_power_w\":1}",
        "{\"stages\":2,\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[1410],\"blocking_power_w\":1,"
        "\"surprise\":1}",
        "{\"stages\":2,\"stages\":2,\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[1410],"
        "\"blocking_power_w\":1}",
        "{\"stages\":2,\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[1410],\"blocking_power_w\":1} x",
        "{\"stages\":0,\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[1410],\"blocking_power_w\":1}",
        "{\"stages\":2,\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[],\"blocking_power_w\":1}",
        "{\"stages\":2,\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[1410,1410],"
        "\"blocking_power_w\":1}",
        "{\"stages\":2,\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[1410],\"blocking_power_w\":-1}",
        "{\"stages\":2,\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[1410],\"blocking_power_w\":1,"
        "\"schedule\":\"zigzag\"}",
        "{\"stages\":2,\"microbatches\":2,\"dp\":100000,\"clocks_mhz\":[1410],"
        "\"blocking_power_w\":1}",
        "{\"stages\":2,\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[1410],\"blocking_power_w\":1,"
        "\"profiling\":{\"min_clock_mhz\":2000}}",
        "{\"stages\":2,\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[1410],\"blocking_power_w\":1,"
        "\"model\":\"a\\u0000b\"}",
        "{\"stages\":99999999999999999999999}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++)
        expect_error(post("/v1/jobs", NULL, bodies[i]), 400, "bad_request");
}

static void test_huge_bodies(void **state)
{
    (void)state;
    size_t n = 2 * 1024 * 1024;
    char *big = malloc(n);
    memset(big, ' ', n);
    expect_error(http_do(port, "POST", "/v1/jobs", NULL, big, n, NULL), 413, "too_large");
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/results", job_id);
    expect_error(http_do(port, "POST", path, token, big, n, NULL), 413, "too_large");
    free(big);
    /* A chunked body that grows past the limit: the connection is closed (no way to answer in
     * the middle of an upload), and the server keeps serving. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const char *head = "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_true(send(fd, head, strlen(head), MSG_NOSIGNAL) > 0);
    char chunk[8200];
    int hl = snprintf(chunk, sizeof chunk, "%x\r\n", 8000);
    memset(chunk + hl, 'x', 8000);
    memcpy(chunk + hl + 8000, "\r\n", 2);
    int closed = 0;
    for (int i = 0; i < 64 && !closed; i++)
        if (send(fd, chunk, (size_t)hl + 8002, MSG_NOSIGNAL) < 0) closed = 1;
    char buf[256];
    ssize_t got = recv(fd, buf, sizeof buf, 0);
    assert_true(closed || got <= 0 || strncmp(buf, "HTTP/1.1 4", 10) == 0);
    close(fd);
    http_reply h = http_do(port, "GET", "/healthz", NULL, NULL, 0, NULL);
    assert_int_equal(h.status, 200);
    http_reply_free(&h);
}

/* Ambiguous or unsupported body framing is answered at once, never waited on: two different
 * Content-Length values and Content-Length with Transfer-Encoding are 400, a Transfer-Encoding
 * other than chunked 501 (which libmicrohttpd alone would wait on until its timeout). */
static void test_framing(void **state)
{
    (void)state;
    const char *body = "{\"stages\":2}";
    /* The body is no valid spec either: the answers must name the framing. */
    http_reply r =
        http_do(port, "POST", "/v1/jobs", NULL, body, strlen(body), "Content-Length: 70\r\n");
    assert_non_null(strstr(r.body ? r.body : "", "conflicting Content-Length"));
    expect_error(r, 400, "bad_request");
    r = http_do(port, "POST", "/v1/jobs", NULL, body, strlen(body),
                "Transfer-Encoding: chunked\r\n");
    assert_non_null(strstr(r.body ? r.body : "", "Transfer-Encoding"));
    expect_error(r, 400, "bad_request");
    const char *encodings[] = {"gzip", "gzip, chunked", "identity"};
    for (int i = 0; i < 3; i++) {
        char te[64];
        snprintf(te, sizeof te, "Transfer-Encoding: %s\r\n", encodings[i]);
        double t0 = harness_now();
        r = http_do(port, "POST", "/v1/jobs", NULL, NULL, 0, te);
        double secs = harness_now() - t0;
        if (secs > 1.0) fprintf(stderr, "%s: answered after %.3f s\n", encodings[i], secs);
        assert_true(secs < 1.0);
        expect_error(r, 501, "not_implemented");
    }
    /* Two equal Content-Length values are not ambiguous: the spec itself is judged. */
    r = http_do(port, "POST", "/v1/jobs", NULL, body, strlen(body), "Content-Length: 12\r\n");
    assert_int_equal(r.status, 400);
    assert_null(strstr(r.body, "Content-Length"));
    http_reply_free(&r);
}

static void test_unknown_things(void **state)
{
    (void)state;
    expect_error(http_do(port, "GET", "/nope", NULL, NULL, 0, NULL), 404, "not_found");
    expect_error(http_do(port, "GET", "/v1/jobs/AAAAAAAAAAAAAAAA", token, NULL, 0, NULL), 404,
                 "not_found");
    expect_error(http_do(port, "GET", "/v1/jobs/..%2F..%2Fetc", token, NULL, 0, NULL), 404,
                 "not_found");
    expect_error(http_do(port, "GET", "/v1/jobs/AAAA'--", token, NULL, 0, NULL), 404, "not_found");
    expect_error(http_do(port, "DELETE", "/v1/jobs", NULL, NULL, 0, NULL), 405,
                 "method_not_allowed");
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/schedule", job_id);
    expect_error(http_do(port, "POST", path, token, "{}", 2, NULL), 405, "method_not_allowed");
    snprintf(path, sizeof path, "/v1/jobs/%s/bogus", job_id);
    expect_error(http_do(port, "GET", path, token, NULL, 0, NULL), 404, "not_found");
}

static void test_tokens(void **state)
{
    (void)state;
    char path[128], bad[96];
    snprintf(path, sizeof path, "/v1/jobs/%s", job_id);
    expect_error(http_do(port, "GET", path, NULL, NULL, 0, NULL), 401, "unauthorized");
    snprintf(bad, sizeof bad, "%s", token);
    bad[0] = bad[0] == 'A' ? 'B' : 'A';
    expect_error(http_do(port, "GET", path, bad, NULL, 0, NULL), 401, "unauthorized");
    expect_error(http_do(port, "GET", path, "", NULL, 0, NULL), 401, "unauthorized");
    expect_error(http_do(port, "GET", path, NULL, NULL, 0, "Authorization: Basic Zm9vOmJhcg==\r\n"),
                 401, "unauthorized");
    http_reply r = http_do(port, "GET", path, token, NULL, 0, NULL);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
}

static void test_wrong_phase_and_bad_calls(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/stragglers", job_id);
    expect_error(post(path, token, "{\"dp\":0,\"slowdown\":1.5}"), 409, "wrong_phase");
    snprintf(path, sizeof path, "/v1/jobs/%s/stragglers/0", job_id);
    expect_error(http_do(port, "DELETE", path, token, NULL, 0, NULL), 409, "wrong_phase");
    snprintf(path, sizeof path, "/v1/jobs/%s/results", job_id);
    expect_error(post(path, token, "{\"rank\":0,\"iterations\":[{\"iteration\":0,\"time_s\":1}]}"),
                 409, "wrong_phase");
    expect_error(
        post(path, token, "{\"rank\":0,\"iterations\":[{\"iteration\":0,\"time_s\":\"1\"}]}"), 400,
        "bad_request");
    static const char *const new_fields[] = {"\"pace_s\":0", "\"plan_id\":-1",
                                             "\"blocking_power_w\":-80"};
    for (int i = 0; i < 3; i++) {
        char body[160];
        snprintf(body, sizeof body,
                 "{\"rank\":0,\"iterations\":[{\"iteration\":0,\"time_s\":1,%s}]}", new_fields[i]);
        http_reply r = post(path, token, body);
        assert_non_null(r.body);
        char field[40];
        snprintf(field, sizeof field, "iterations[0].%.*s", (int)strcspn(new_fields[i] + 1, "\""),
                 new_fields[i] + 1);
        assert_non_null(strstr(r.body, field));
        expect_error(r, 400, "bad_request");
    }
    snprintf(path, sizeof path, "/v1/jobs/%s/frontier", job_id);
    expect_error(http_do(port, "GET", path, token, NULL, 0, NULL), 404, "not_found");
    const char *pages[] = {"offset=-1",   "offset=x",           "limit=0",
                           "limit=10001", "offset=0&limit=1e3", "limit="};
    for (size_t i = 0; i < sizeof pages / sizeof *pages; i++) {
        snprintf(path, sizeof path, "/v1/jobs/%s/frontier?%s", job_id, pages[i]);
        http_reply r = http_do(port, "GET", path, token, NULL, 0, NULL);
        assert_non_null(r.body);
        assert_non_null(strstr(
            r.body, pages[i][0] == 'o' && !strstr(pages[i], "limit") ? "offset:" : "limit:"));
        expect_error(r, 400, "bad_request");
    }
    snprintf(path, sizeof path, "/v1/jobs/%s/profile", job_id);
    expect_error(http_do(port, "GET", path, token, NULL, 0, NULL), 404, "not_found");
    expect_error(post(path, token, "stage,instruction,frequency,time,energy\n0,forward,1410,x,1\n"),
                 400, "bad_profile");
    snprintf(path, sizeof path, "/v1/jobs/%s/schedule", job_id);
    expect_error(http_do(port, "GET", path, token, NULL, 0, NULL), 400, "bad_request");
    snprintf(path, sizeof path, "/v1/jobs/%s/schedule?rank=-1", job_id);
    expect_error(http_do(port, "GET", path, token, NULL, 0, NULL), 400, "bad_request");
    snprintf(path, sizeof path, "/v1/jobs/%s/schedule?rank=0", job_id);
    expect_error(http_do(port, "GET", path, token, NULL, 0, NULL), 404, "not_registered");

    snprintf(path, sizeof path, "/v1/jobs/%s/ranks", job_id);
    expect_error(post(path, token, "{\"rank\":5,\"dp\":0,\"pp\":0}"), 400, "bad_request");
    expect_error(post(path, token, "{\"rank\":0,\"dp\":0,\"pp\":7}"), 400, "bad_request");
    expect_error(post(path, token, "{\"rank\":0,\"dp\":0}"), 400, "bad_request");
    http_reply r = post(path, token, "{\"rank\":0,\"dp\":0,\"pp\":0}");
    assert_int_equal(r.status, 201);
    http_reply_free(&r);
    r = post(path, token, "{\"rank\":0,\"dp\":0,\"pp\":0}");
    assert_int_equal(r.status, 200); /* the same rank again: idempotent */
    http_reply_free(&r);
    expect_error(post(path, token, "{\"rank\":0,\"dp\":0,\"pp\":1}"), 409, "conflict");
    expect_error(post(path, token, "{\"rank\":1,\"dp\":0,\"pp\":0}"), 409, "conflict");

    snprintf(path, sizeof path, "/v1/jobs/%s/complete", job_id);
    r = post(path, token, "");
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    expect_error(post(path, token, ""), 409, "wrong_phase");
    snprintf(path, sizeof path, "/v1/jobs/%s/ranks", job_id);
    expect_error(post(path, token, "{\"rank\":1,\"dp\":0,\"pp\":1}"), 409, "wrong_phase");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_job_specs), cmocka_unit_test(test_huge_bodies),
        cmocka_unit_test(test_framing),       cmocka_unit_test(test_unknown_things),
        cmocka_unit_test(test_tokens),        cmocka_unit_test(test_wrong_phase_and_bad_calls),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
