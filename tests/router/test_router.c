/* The router's pure parts (src/router): reading OpenAI request bodies (token estimates, the
 * field named on each error), the configuration (every class in one pool, fields checked with
 * their path), the choice of instance (least predicted energy among those with capacity, then
 * the next pools; tried and failed instances skipped), the history predictor and the Prometheus
 * histogram. The HTTP parts run end to end in tests/cli/router.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "oai_request.h"
#include "prom.h"
#include "router_config.h"
#include "router_pick.h"
#include "sse.h"

static int parse(prs_oai_kind kind, const char *body, prs_oai_request *rq, const char **param,
                 prs_error *err)
{
    return prs__oai_parse(kind, body, strlen(body), rq, param, err);
}

static void test_oai_completions(void **state)
{
    (void)state;
    prs_oai_request rq;
    const char *param;
    prs_error err = {0};
    /* 9 bytes: 3 tokens at 4 bytes a token, rounded up */
    assert_int_equal(parse(PRS_OAI_COMPLETIONS,
                           "{\"model\":\"m\",\"prompt\":\"abcdefghi\",\"max_tokens\":7,"
                           "\"stream\":true}",
                           &rq, &param, &err),
                     0);
    assert_string_equal(rq.model, "m");
    assert_int_equal(rq.prompt_tokens, 3);
    assert_int_equal(rq.max_tokens, 7);
    assert_int_equal(rq.stream, 1);
    /* token ids count exactly; strings in a list add up */
    assert_int_equal(
        parse(PRS_OAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[[1,2,3],[4]]}", &rq, &param, &err),
        0);
    assert_int_equal(rq.prompt_tokens, 4);
    assert_int_equal(rq.max_tokens, 0);
    assert_int_equal(rq.stream, 0);
    assert_int_equal(parse(PRS_OAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[\"abcd\",\"e\"]}",
                           &rq, &param, &err),
                     0);
    assert_int_equal(rq.prompt_tokens, 2);
}

static void test_oai_chat(void **state)
{
    (void)state;
    prs_oai_request rq;
    const char *param;
    prs_error err = {0};
    assert_int_equal(parse(PRS_OAI_CHAT,
                           "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
                           "\"12345678\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                           "\"text\":\"1234\"}]}],\"max_completion_tokens\":9}",
                           &rq, &param, &err),
                     0);
    assert_int_equal(rq.prompt_tokens, 2 + 1 + 2 * PRS_OAI_MESSAGE_TOKENS);
    assert_int_equal(rq.max_tokens, 9);
}

static void expect_bad(prs_oai_kind kind, const char *body, int code, const char *want_param,
                       const char *want_msg)
{
    prs_oai_request rq;
    const char *param = NULL;
    prs_error err = {0};
    assert_int_equal(parse(kind, body, &rq, &param, &err), code);
    assert_string_equal(param, want_param);
    if (strstr(err.msg, want_msg) == NULL) fail_msg("message '%s' lacks '%s'", err.msg, want_msg);
}

static void test_oai_errors(void **state)
{
    (void)state;
    expect_bad(PRS_OAI_COMPLETIONS, "{\"model\":", PRS_EPARSE, "", "not valid JSON");
    expect_bad(PRS_OAI_COMPLETIONS, "[1]", PRS_EPARSE, "", "JSON object");
    expect_bad(PRS_OAI_COMPLETIONS, "{\"prompt\":\"x\"}", PRS_EINVAL, "model", "'model'");
    expect_bad(PRS_OAI_COMPLETIONS, "{\"model\":\"m\"}", PRS_EINVAL, "prompt", "required");
    expect_bad(PRS_OAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[{}]}", PRS_EINVAL, "prompt",
               "'prompt'[0]");
    expect_bad(PRS_OAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":0}",
               PRS_EINVAL, "max_tokens", "from 1");
    expect_bad(PRS_OAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":1.5}",
               PRS_EINVAL, "max_tokens", "integer");
    expect_bad(PRS_OAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"stream\":1}", PRS_EINVAL,
               "stream", "true or false");
    expect_bad(PRS_OAI_CHAT, "{\"model\":\"m\",\"messages\":[{\"content\":\"x\"}]}", PRS_EINVAL,
               "messages", "role");
    expect_bad(PRS_OAI_CHAT, "{\"model\":\"m\",\"messages\":[]}", PRS_EINVAL, "messages",
               "non-empty");
    expect_bad(PRS_OAI_COMPLETIONS, "{\"model\":\"m\",\"model\":\"n\",\"prompt\":\"x\"}",
               PRS_EPARSE, "", "duplicate");
}

static void test_oai_error_body(void **state)
{
    (void)state;
    char *b = prs__oai_error_body("bad \"x\"", "invalid_request_error", "prompt", NULL);
    assert_non_null(b);
    assert_string_equal(b, "{\"error\":{\"message\":\"bad \\\"x\\\"\",\"type\":"
                           "\"invalid_request_error\",\"param\":\"prompt\",\"code\":null}}");
    free(b);
}

#define POOLS_2                                                                                    \
    "\"pools\":[{\"name\":\"short\",\"classes\":[\"SS\",\"SM\",\"SL\",\"MS\",\"MM\",\"ML\"],"      \
    "\"instances\":[{\"name\":\"a\",\"url\":\"http://h:1/\",\"tp\":2,\"max_running\":2},"          \
    "{\"name\":\"b\",\"url\":\"http://h:2\",\"tp\":2,\"mhz\":1200,\"max_running\":2}]},"           \
    "{\"name\":\"long\",\"classes\":[\"LS\",\"LM\",\"LL\"],\"instances\":[{\"name\":\"c\","        \
    "\"url\":\"http://h:3\",\"tp\":4}]}]"
#define HEAD "{\"model\":\"m\",\"cost_model\":{\"model\":\"llama2-70b\",\"gpu\":\"h100\"},"

static void load_cfg(prs_router_config *c)
{
    const char *text = HEAD POOLS_2 "}";
    prs_error err = {0};
    if (prs__router_config_parse(text, strlen(text), "cfg.json", c, &err) != 0)
        fail_msg("%s", err.msg);
}

static void test_config(void **state)
{
    (void)state;
    prs_router_config c;
    load_cfg(&c);
    assert_int_equal(c.npools, 2);
    assert_int_equal(c.ninst, 3);
    assert_string_equal(c.inst[0].url, "http://h:1"); /* trailing slash dropped */
    assert_int_equal(c.inst[0].mhz, 1980);            /* the GPU's highest by default */
    assert_int_equal(c.inst[1].mhz, 1200);
    assert_int_equal(c.inst[2].max_running, 256);
    assert_int_equal(c.pool_of_class[0], 0);
    assert_int_equal(c.pool_of_class[8], 1);
    prs__router_config_free(&c);
}

static void config_bad(const char *text, const char *want)
{
    prs_router_config c;
    prs_error err = {0};
    assert_int_not_equal(prs__router_config_parse(text, strlen(text), "cfg.json", &c, &err), 0);
    if (strstr(err.msg, want) == NULL || strncmp(err.msg, "cfg.json", 8) != 0)
        fail_msg("message '%s' lacks '%s'", err.msg, want);
    assert_null(c.inst);
}

static void test_config_errors(void **state)
{
    (void)state;
    config_bad("{", "cfg.json:1");
    config_bad(HEAD "\"pools\":[]}", "pools must be");
    config_bad(HEAD "\"pool\":[]}", "unknown key 'pool'");
    config_bad("{\"model\":\"m\",\"cost_model\":{\"model\":\"gpt\",\"gpu\":\"h100\"}," POOLS_2 "}",
               "cost_model.model 'gpt' is unknown");
    config_bad(HEAD "\"pools\":[{\"name\":\"p\",\"classes\":[\"SS\"],\"instances\":[{\"name\":"
                    "\"a\",\"url\":\"http://h:1\",\"tp\":2}]}]}",
               "class SM is in no pool");
    config_bad(HEAD "\"pools\":[{\"name\":\"p\",\"classes\":[\"SS\",\"SS\"],\"instances\":[]}]}",
               "class SS is already in pool 'p'");
    config_bad(HEAD "\"pools\":[{\"name\":\"p\",\"classes\":[\"XX\"],\"instances\":[]}]}",
               "pools[0].classes[0]");
    config_bad(HEAD "\"pools\":[{\"name\":\"p\",\"classes\":[\"SS\"],\"instances\":[{\"name\":"
                    "\"a\",\"url\":\"ftp://h\",\"tp\":2}]}]}",
               "pools[0].instances[0].url");
    config_bad(HEAD "\"pools\":[{\"name\":\"p\",\"classes\":[\"SS\"],\"instances\":[{\"name\":"
                    "\"a\",\"url\":\"http://h\",\"tp\":1}]}]}",
               "pools[0].instances[0].tp"); /* 70B weights do not fit one H100 */
    config_bad(HEAD "\"client_timeout_s\":0," POOLS_2 "}", "config.client_timeout_s");
    config_bad(HEAD "\"classes\":{\"input\":[300,200],\"output\":[1,2]}," POOLS_2 "}",
               "input class limits");
}

static void test_pick(void **state)
{
    (void)state;
    prs_router_config c;
    load_cfg(&c);
    prs_router_load load[3] = {{0}};
    int rerouted;
    int ss = prs_infer_class_of(&c.classes, 10, 10),
        ll = prs_infer_class_of(&c.classes, 5000, 1000);
    /* a at the highest clock, b at 1200 MHz: the lower clock spends less energy per request */
    double ja = prs__router_energy_j(&c, &c.inst[0], 0, 10, 10);
    double jb = prs__router_energy_j(&c, &c.inst[1], 0, 10, 10);
    assert_true(jb < ja);
    assert_int_equal(prs__router_pick(&c, load, NULL, 0, ss, 10, 10, &rerouted), 1);
    assert_int_equal(rerouted, 0);
    /* a batch shares the decode steps: a request costs less where others already run */
    assert_true(prs__router_energy_j(&c, &c.inst[0], 1, 10, 100) <
                prs__router_energy_j(&c, &c.inst[0], 0, 10, 100));
    /* b full (max_running 2): a */
    load[1].inflight = 2;
    assert_int_equal(prs__router_pick(&c, load, NULL, 0, ss, 10, 10, &rerouted), 0);
    /* a tried already: the next pool */
    unsigned char tried[3] = {1, 0, 0};
    assert_int_equal(prs__router_pick(&c, load, tried, 0, ss, 10, 10, &rerouted), 2);
    assert_int_equal(rerouted, 1);
    /* c down until t = 5: from the long pool, wrap around to the short one, then nothing */
    load[2].down_until_s = 5;
    assert_int_equal(prs__router_pick(&c, load, NULL, 1, ll, 5000, 1000, &rerouted), 0);
    assert_int_equal(rerouted, 1);
    assert_int_equal(prs__router_pick(&c, load, tried, 1, ll, 5000, 1000, &rerouted), -1);
    /* up again at t = 6 */
    assert_int_equal(prs__router_pick(&c, load, tried, 6, ll, 5000, 1000, &rerouted), 2);
    assert_int_equal(rerouted, 0);
    prs__router_config_free(&c);
}

static void test_history(void **state)
{
    (void)state;
    prs_router_predictor p;
    assert_int_equal(prs__router_history_new(50, &p, NULL), 0);
    assert_int_equal(p.predict(p.ctx, 0, 10, 0), 50);
    assert_int_equal(p.predict(p.ctx, 0, 10, 7), 7); /* max_tokens wins */
    p.observe(p.ctx, 0, 10, 100);
    p.observe(p.ctx, 0, 10, 200);
    assert_int_equal(p.predict(p.ctx, 0, 10, 0), 150);
    assert_int_equal(p.predict(p.ctx, 1, 10, 0), 50); /* per input class */
    prs__router_history_free(&p);
}

static void test_prom_hist(void **state)
{
    (void)state;
    prs_prom_hist h = {0};
    prs__prom_hist_observe(&h, 0.0005);
    prs__prom_hist_observe(&h, 0.2);
    prs__prom_hist_observe(&h, 100);
    prs_prom_buf b = {0};
    prs__prom_hist_write(&b, "x", "a=\"1\"", &h);
    assert_false(b.failed);
    assert_non_null(strstr(b.text, "x_bucket{a=\"1\",le=\"0.001\"} 1\n"));
    assert_non_null(strstr(b.text, "x_bucket{a=\"1\",le=\"0.25\"} 2\n"));
    assert_non_null(strstr(b.text, "x_bucket{a=\"1\",le=\"60\"} 2\n"));
    assert_non_null(strstr(b.text, "x_bucket{a=\"1\",le=\"+Inf\"} 3\n"));
    assert_non_null(strstr(b.text, "x_count{a=\"1\"} 3\n"));
    b.len = 0;
    prs__prom_label_value(&b, "a\"b\\c\nd");
    assert_string_equal(b.text, "a\\\"b\\\\c\\nd");
    free(b.text);
}

static void count_event(void *cls)
{
    (*(int *)cls)++;
}

/* The same stream split at every byte gives the same events: 3 token events (one with a line
 * longer than the kept head, one with CRLF), a comment, a blank line and both [DONE] forms. */
static void test_sse(void **state)
{
    (void)state;
    static const char stream[] =
        "data: {\"choices\":[{\"text\":\" tok tok tok tok tok tok tok\"}]}\n\n"
        ": keep-alive comment\n"
        "data:{\"x\":1}\r\n\r\n"
        "event: ping\n"
        "data: 1\n\n"
        "data: [DONE]\n\n"
        "data:[DONE]\n"
        "data: [DONE] not quite\n";
    size_t n = sizeof stream - 1;
    for (size_t cut = 0; cut <= n; cut++) {
        prs_sse_scan s = {0};
        int calls = 0;
        long events = prs__sse_feed(&s, stream, cut, count_event, &calls);
        events += prs__sse_feed(&s, stream + cut, n - cut, count_event, &calls);
        assert_int_equal(events, 4); /* the last line is data, not the sentinel */
        assert_int_equal(calls, 4);
    }
    prs_sse_scan s = {0};
    for (size_t i = 0; i < n; i++) /* byte by byte */
        (void)prs__sse_feed(&s, stream + i, 1, NULL, NULL);
    assert_int_equal(s.line_len, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oai_completions),
        cmocka_unit_test(test_oai_chat),
        cmocka_unit_test(test_oai_errors),
        cmocka_unit_test(test_oai_error_body),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_pick),
        cmocka_unit_test(test_history),
        cmocka_unit_test(test_prom_hist),
        cmocka_unit_test(test_sse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
