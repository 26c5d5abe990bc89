/* The router's load report body (src/router/load_report.h): every class present in order, the
 * rates the counters' differences over the elapsed time divided by the rate scale, a counter
 * that went backwards read as no requests, no time elapsed as zero rates, a buffer too small
 * refused; and the "perseusd" key of the configuration (defaults, fields, errors naming them). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "load_report.h"
#include "router_config.h"

static json_t *body(const unsigned long *prev, const unsigned long *now, double dt, double scale)
{
    char buf[512];
    int n = prs__load_report_body(prev, now, dt, scale, buf, sizeof buf);
    assert_true(n > 0 && (size_t)n == strlen(buf));
    json_t *j = json_loads(buf, 0, NULL);
    assert_non_null(j);
    return j;
}

static double rate(const json_t *j, const char *cls)
{
    return json_number_value(json_object_get(json_object_get(j, "rates_rps"), cls));
}

static void test_body(void **state)
{
    (void)state;
    unsigned long prev[PRS_INFER_NCLASS] = {10, 0, 0, 0, 5, 0, 0, 0, 7};
    unsigned long now[PRS_INFER_NCLASS] = {30, 0, 0, 0, 6, 0, 0, 0, 3};
    json_t *j = body(prev, now, 2.0, 1.0);
    assert_int_equal(json_object_size(json_object_get(j, "rates_rps")), PRS_INFER_NCLASS);
    assert_float_equal(rate(j, "SS"), 10.0, 1e-9);
    assert_float_equal(rate(j, "MM"), 0.5, 1e-9);
    assert_float_equal(rate(j, "LL"), 0.0, 0); /* went backwards */
    assert_float_equal(rate(j, "SM"), 0.0, 0);
    json_decref(j);
    j = body(prev, now, 2.0, 10.0);
    assert_float_equal(rate(j, "SS"), 1.0, 1e-9);
    json_decref(j);
    j = body(prev, now, 0.0, 1.0);
    assert_float_equal(rate(j, "SS"), 0.0, 0);
    json_decref(j);
    char small[20];
    assert_int_equal(prs__load_report_body(prev, now, 1, 1, small, sizeof small), -1);
}

static const char head[] =
    "{\"model\": \"m\", \"cost_model\": {\"model\": \"llama2-70b\", "
    "\"gpu\": \"h100\"}, \"pools\": [{\"name\": \"p\", \"classes\": "
    "[\"SS\",\"SM\",\"SL\",\"MS\",\"MM\",\"ML\",\"LS\",\"LM\",\"LL\"], "
    "\"instances\": [{\"name\": \"i\", \"url\": \"http://h:1\", \"tp\": 2}]}]";

static int parse(const char *extra, prs_router_config *c, prs_error *err)
{
    char text[1024];
    snprintf(text, sizeof text, "%s%s}", head, extra);
    return prs__router_config_parse(text, strlen(text), "r.json", c, err);
}

static void test_config(void **state)
{
    (void)state;
    prs_router_config c;
    prs_error err = {0};
    assert_int_equal(parse("", &c, &err), 0);
    assert_int_equal(c.report.url[0], 0);
    prs__router_config_free(&c);
    assert_int_equal(parse(", \"perseusd\": {\"url\": \"http://s:7787\", \"cluster\": \"abc_-1\", "
                           "\"token\": \"tok\"}",
                           &c, &err),
                     0);
    assert_string_equal(c.report.url, "http://s:7787");
    assert_string_equal(c.report.cluster, "abc_-1");
    assert_string_equal(c.report.token, "tok");
    assert_float_equal(c.report.period_s, 30, 0);
    assert_float_equal(c.report.rate_scale, 1, 0);
    prs__router_config_free(&c);
    static const struct {
        const char *extra, *msg;
    } bad[] = {
        {", \"perseusd\": 1", "perseusd must be an object"},
        {", \"perseusd\": {\"url\": \"http://s\", \"cluster\": \"a/b\", \"token\": \"t\"}",
         "perseusd.cluster must be a cluster id"},
        {", \"perseusd\": {\"url\": \"http://s\", \"cluster\": \"a\"}",
         "give one of token and token_file"},
        {", \"perseusd\": {\"url\": \"http://s\", \"cluster\": \"a\", \"token\": \"t\", "
         "\"rate_scale\": 0}",
         "perseusd.rate_scale must be a number"},
        {", \"perseusd\": {\"cluster\": \"a\", \"token\": \"t\"}", "perseusd.url must be a string"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        assert_int_equal(parse(bad[k].extra, &c, &err), PRS_EINVAL);
        if (strstr(err.msg, bad[k].msg) == NULL) fail_msg("'%s' lacks '%s'", err.msg, bad[k].msg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_body), cmocka_unit_test(test_config)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
