/* A rank the server refuses for good is told so: with a wrong token or an unknown job id, the
 * real perseusd answers the registration 401 or 404, and prs_client_iteration_end then returns
 * PRS_ESERVER with the server's words in prs_client_errmsg (the client used to give up
 * registering without a word: training ran on at the default clocks, stats said registered 0 and
 * http_failures 0). A rank given the right token registers and its iterations end without error.
 * Waits are on conditions with a deadline (the background thread registers asynchronously). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "perseus/client.h"
#include "server_harness.h"
#include "wait.h"

#define DEADLINE_S 60.0

typedef struct fixture {
    daemon_proc d;
    char url[64];
    char job_id[128], token[128];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    *state = f;
    harness_tmpdir(f->d.dir, sizeof f->d.dir, "client-refused");
    if (!f->d.dir[0] || daemon_start(&f->d) != 0) return -1;
    snprintf(f->url, sizeof f->url, "http://127.0.0.1:%d", f->d.port);
    json_t *spec =
        json_pack("{s:s, s:i, s:i, s:i, s:[i, i], s:f}", "model", "refused", "stages", 1,
                  "microbatches", 2, "dp", 1, "clocks_mhz", 1410, 1200, "blocking_power_w", 80.0);
    http_reply r = http_json(f->d.port, "POST", "/v1/jobs", NULL, spec);
    if (r.status != 201) {
        http_reply_free(&r);
        return -1;
    }
    snprintf(f->job_id, sizeof f->job_id, "%s", json_str(r.json, "job_id"));
    snprintf(f->token, sizeof f->token, "%s", json_str(r.json, "token"));
    http_reply_free(&r);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (!f) return 0;
    daemon_teardown(&f->d);
    free(f);
    return 0;
}

/* One iteration of a forward and a backward on the sim GPU; 1 once the client has been told
 * either way: iteration_end failed (*rc) or the rank registered (*registered). */
static int told(prs_client *cl, prs_gpu *gpu, int *rc, int *registered)
{
    prs_gpu_work w = {0.01, 0.8};
    for (int k = 0; k < 2; k++) {
        prs_instr in = k ? PRS_BACKWARD : PRS_FORWARD;
        prs_client_begin(cl, in, 0, 0);
        prs_gpu_sim_run(gpu, &w, NULL);
        prs_client_end(cl, in, 0, 0);
    }
    *rc = prs_client_iteration_end(cl);
    prs_client_stats st;
    prs_client_get_stats(cl, &st);
    *registered = st.registered;
    return *rc || *registered;
}

/* Iterations until the client is told (the background thread registers asynchronously: a wait
 * on that condition, with a deadline); returns the last iteration_end's result. */
static int run_until_told(const fixture *f, const char *job_id, const char *token, char *msg,
                          size_t n, int *registered)
{
    prs_gpu *gpu;
    prs_error e;
    assert_int_equal(prs_gpu_open("sim:a100", &gpu, &e), 0);
    prs_client_opts o;
    prs_client_opts_init(&o);
    o.server_url = f->url;
    o.job_id = job_id;
    o.token = token;
    o.rank = 0;
    o.dp = 0;
    o.pp = 0;
    o.gpu = gpu;
    o.poll_interval_s = 0.01;
    o.warmup_iterations = 0;
    prs_client *cl;
    assert_int_equal(prs_client_new(&o, &cl, &e), 0);
    int rc = 0;
    *registered = 0;
    PRS_WAIT_UNTIL(told(cl, gpu, &rc, registered), DEADLINE_S);
    snprintf(msg, n, "%s", prs_client_errmsg(cl));
    prs_client_free(cl);
    prs_gpu_close(gpu);
    return rc;
}

static void test_wrong_token(void **state)
{
    fixture *f = *state;
    char msg[PRS_ERRMSG_MAX];
    int reg;
    int rc = run_until_told(f, f->job_id, "not-the-token", msg, sizeof msg, &reg);
    assert_int_equal(rc, PRS_ESERVER);
    assert_false(reg);
    assert_non_null(strstr(msg, "perseusd refused rank 0 of job"));
    assert_non_null(strstr(msg, "HTTP 401 unauthorized"));
    assert_non_null(strstr(msg, f->job_id));
}

static void test_unknown_job(void **state)
{
    fixture *f = *state;
    char msg[PRS_ERRMSG_MAX];
    int reg;
    int rc = run_until_told(f, "no-such-job", f->token, msg, sizeof msg, &reg);
    assert_int_equal(rc, PRS_ESERVER);
    assert_non_null(strstr(msg, "HTTP 404"));
    assert_non_null(strstr(msg, "no-such-job"));
}

static void test_right_token(void **state)
{
    fixture *f = *state;
    char msg[PRS_ERRMSG_MAX];
    int reg;
    int rc = run_until_told(f, f->job_id, f->token, msg, sizeof msg, &reg);
    assert_int_equal(rc, 0);
    assert_true(reg);
    assert_string_equal(msg, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrong_token),
        cmocka_unit_test(test_unknown_job),
        cmocka_unit_test(test_right_token),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
