/* Request traces (src/infer/trace*.c):
 *   - timestamps of both Azure years (2023: seven fraction digits, 2024: "+00:00" and a
 *     varying number of digits), and malformed ones refused;
 *   - a small CSV loaded exactly; rows out of order sorted stably; every malformed row an
 *     error naming file and line;
 *   - the published 2023 traces (through PRS_SHARED_DIR): every row kept, sorted;
 *   - scaling (counts and spread), window, tiling (diurnal swing), Poisson (reproducible,
 *     rate). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trace.h"

static char tmpdir[256];

static const char *write_file(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void test_timestamps(void **state)
{
    (void)state;
    double a, b, c;
    const char *s23 = "2023-11-16 18:17:03.9799600";
    assert_int_equal(prs_infer_parse_timestamp(s23, strlen(s23), &a), 0);
    /* 2023-11-16 is day 19677 after 1970-01-01. */
    assert_true(fabs(a - (19677 * 86400.0 + 18 * 3600 + 17 * 60 + 3.97996)) < 1e-6);
    const char *s24 = "2024-05-10 00:00:00.009930+00:00";
    assert_int_equal(prs_infer_parse_timestamp(s24, strlen(s24), &b), 0);
    assert_true(fabs(b - (19853 * 86400.0 + 0.00993)) < 1e-6);
    const char *s24b = "2024-05-10 00:00:01+00:00";
    assert_int_equal(prs_infer_parse_timestamp(s24b, strlen(s24b), &c), 0);
    assert_true(fabs(c - (19853 * 86400.0 + 1)) < 1e-9);
    const char *off = "2024-05-10 02:00:01.5+02:00";
    assert_int_equal(prs_infer_parse_timestamp(off, strlen(off), &c), 0);
    assert_true(fabs(c - (19853 * 86400.0 + 1.5)) < 1e-9);
    const char *bad[] = {"2023-11-16",           "2023-13-16 18:17:03",  "2023-02-29 00:00:00",
                         "2023-11-16 18:17:03.", "2023-11-16 18:17:03x", "2024-05-10 00:00:00+0",
                         "2023-11-16 24:00:00"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(prs_infer_parse_timestamp(bad[i], strlen(bad[i]), &c), PRS_EPARSE);
}

static void test_load_small(void **state)
{
    (void)state;
    const char *p = write_file("small.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
                                            "2024-05-10 00:00:01.5+00:00,100,20\r\n"
                                            "2024-05-10 00:00:00.25+00:00,7,3\r\n"
                                            "2024-05-10 00:00:01.5+00:00,50,1\r\n");
    prs_infer_trace t;
    prs_error err = {0};
    assert_int_equal(prs_infer_trace_load(p, &t, &err), 0);
    assert_int_equal(t.n, 3);
    assert_true(fabs(t.start_epoch_s - (19853 * 86400.0 + 0.25)) < 1e-6);
    assert_true(t.reqs[0].arrival_s == 0 && t.reqs[0].in_tokens == 7);
    /* Equal times keep file order. */
    assert_true(fabs(t.reqs[1].arrival_s - 1.25) < 1e-9 && t.reqs[1].in_tokens == 100);
    assert_true(fabs(t.reqs[2].arrival_s - 1.25) < 1e-9 && t.reqs[2].in_tokens == 50);
    prs_infer_trace_free(&t);
}

static void expect_bad(const char *text, const char *want)
{
    const char *p = write_file("bad.csv", text);
    prs_infer_trace t;
    prs_error err = {0};
    assert_int_not_equal(prs_infer_trace_load(p, &t, &err), 0);
    if (!strstr(err.msg, want)) fail_msg("message '%s' lacks '%s'", err.msg, want);
    assert_null(t.reqs);
}

static void test_load_bad(void **state)
{
    (void)state;
    const char *h = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
    char buf[512];
    expect_bad("", "empty file");
    expect_bad("TIMESTAMP,Context,GeneratedTokens\n",
               "bad.csv:1: header lacks column ContextTokens");
    expect_bad(h, "no requests");
    snprintf(buf, sizeof buf, "%s2023-11-16 18:17:03.1,10,5\n2023-11-16 18:17:04.1,10\n", h);
    expect_bad(buf, "bad.csv:3: 2 fields");
    snprintf(buf, sizeof buf, "%s2023-11-16 18:17:03.1,10,0\n", h);
    expect_bad(buf, "bad.csv:2: bad GeneratedTokens '0'");
    snprintf(buf, sizeof buf, "%s2023-11-16 18:17:03.1,-4,3\n", h);
    expect_bad(buf, "bad.csv:2: bad ContextTokens '-4'");
    snprintf(buf, sizeof buf, "%s2023-11-16 18:17:03.1,4,3\n\n", h);
    expect_bad(buf, "bad.csv:3: empty line");
    snprintf(buf, sizeof buf, "%s2023/11/16 18:17:03.1,4,3\n", h);
    expect_bad(buf, "bad.csv:2: bad TIMESTAMP '2023/11/16 18:17:03.1'");
    snprintf(buf, sizeof buf, "%s2023-11-16 18:17:03.1,4,99999999\n", h);
    expect_bad(buf, "bad.csv:2: bad GeneratedTokens");
}

/* The published traces: every data row is a request, in time order. */
static void test_azure_2023(void **state)
{
    (void)state;
    const char *dir = getenv("PRS_SHARED_DIR");
    char path[1024];
    static const struct {
        const char *name;
        size_t rows;
    } files[] = {{"code", 8819}, {"conv", 19366}};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/data/azure-llm-2023/AzureLLMInferenceTrace_%s.csv",
                 dir ? dir : "", files[i].name);
        FILE *f = dir ? fopen(path, "r") : NULL;
        if (!f) {
            if (getenv("CI")) fail_msg("%s missing (CI set)", path);
            skip();
        }
        fclose(f);
        prs_infer_trace t;
        prs_error err = {0};
        assert_int_equal(prs_infer_trace_load(path, &t, &err), 0);
        assert_int_equal(t.n, files[i].rows);
        for (size_t k = 1; k < t.n; k++)
            assert_true(t.reqs[k].arrival_s >= t.reqs[k - 1].arrival_s);
        assert_true(t.reqs[t.n - 1].arrival_s > 3000 && t.reqs[t.n - 1].arrival_s < 3700);
        prs_infer_trace_free(&t);
    }
}

static prs_infer_trace uniform_trace(size_t n, double gap_s)
{
    prs_infer_trace t = {0};
    t.reqs = calloc(n, sizeof *t.reqs);
    assert_non_null(t.reqs);
    t.n = n;
    for (size_t i = 0; i < n; i++)
        t.reqs[i] = (prs_infer_req){gap_s * (double)i, (int32_t)(i + 1), 10};
    return t;
}

static void test_scale_window(void **state)
{
    (void)state;
    prs_infer_trace t = uniform_trace(10, 1.0), s;
    prs_error err = {0};
    assert_int_equal(prs_infer_trace_scale(&t, 2.5, &s, &err), 0);
    assert_int_equal(s.n, 25);
    /* Request 0 gets floor(2.5) - 0 = 2 copies at 0 and 0.5; request 1: floor(5) - 2 = 3 at 1,
     * 1.333, 1.667. */
    assert_true(s.reqs[0].arrival_s == 0 && fabs(s.reqs[1].arrival_s - 0.5) < 1e-12);
    assert_true(fabs(s.reqs[3].arrival_s - (1 + 1.0 / 3)) < 1e-12 && s.reqs[3].in_tokens == 2);
    for (size_t k = 1; k < s.n; k++)
        assert_true(s.reqs[k].arrival_s >= s.reqs[k - 1].arrival_s);
    prs_infer_trace_free(&s);
    assert_int_equal(prs_infer_trace_scale(&t, 0.5, &s, &err), 0);
    assert_int_equal(s.n, 5);
    assert_int_equal(s.reqs[0].in_tokens, 2); /* floor(1) - floor(0.5) */
    prs_infer_trace_free(&s);
    assert_int_equal(prs_infer_trace_scale(&t, 0, &s, &err), PRS_EINVAL);
    assert_int_equal(prs_infer_trace_window(&t, 2.5, 6, &s, &err), 0);
    assert_int_equal(s.n, 3); /* 3, 4, 5 */
    assert_true(fabs(s.reqs[0].arrival_s - 0.5) < 1e-12 && s.reqs[0].in_tokens == 4);
    prs_infer_trace_free(&s);
    assert_int_equal(prs_infer_trace_window(&t, 20, 30, &s, &err), PRS_ERANGE);
    assert_true(fabs(prs_infer_trace_peak_rate(&t, 5) - 1.0) < 1e-12);
    prs_infer_trace_free(&t);
}

static void test_scale_shift(void **state)
{
    (void)state;
    /* 100 requests a second apart: span 100 s (last arrival 99 plus one mean gap). */
    prs_infer_trace t = uniform_trace(100, 1.0), s;
    prs_error err = {0};
    assert_int_equal(prs_infer_trace_scale_shift(&t, 3, 60, &s, &err), 0);
    assert_int_equal(s.n, 300);
    /* Copies shifted by 0, 20 and 40 s, wrapped at 100 s: every second holds three requests, at
     * t, t + 20 and t + 40 modulo 100, so each integer second gets exactly three. */
    for (size_t k = 0; k < s.n; k++) {
        assert_true(k == 0 || s.reqs[k].arrival_s >= s.reqs[k - 1].arrival_s);
        assert_true(s.reqs[k].arrival_s >= 0 && s.reqs[k].arrival_s < 100);
        assert_true(fabs(s.reqs[k].arrival_s - floor((double)k / 3)) < 1e-9);
    }
    /* Request 0 (in_tokens 1) lands at 0, 20 and 40. */
    int seen = 0;
    for (size_t k = 0; k < s.n; k++)
        seen += s.reqs[k].in_tokens == 1;
    assert_int_equal(seen, 3);
    prs_infer_trace_free(&s);
    /* A fractional factor keeps about that share of the last copy. */
    assert_int_equal(prs_infer_trace_scale_shift(&t, 1.5, 50, &s, &err), 0);
    assert_true(s.n > 130 && s.n < 170);
    prs_infer_trace_free(&s);
    assert_int_equal(prs_infer_trace_scale_shift(&t, 2, 0, &s, &err), PRS_EINVAL);
    assert_int_equal(prs_infer_trace_scale_shift(&t, 2, 1000, &s, &err), PRS_EINVAL);
    prs_infer_trace_free(&t);
}

static void test_tile(void **state)
{
    (void)state;
    prs_infer_trace t = uniform_trace(3600, 1.0), s;
    prs_error err = {0};
    assert_int_equal(prs_infer_trace_tile(&t, 2, 0.0, 12, &s, &err), 0);
    assert_int_equal(s.n, 2 * 86400);
    prs_infer_trace_free(&s);
    assert_int_equal(prs_infer_trace_tile(&t, 1, 0.6, 12, &s, &err), 0);
    /* Mean keep 1 - 0.6/2 = 0.7; the hour around noon keeps nearly all, around midnight 0.4. */
    assert_true(fabs((double)s.n / 86400 - 0.7) < 0.01);
    size_t noon = 0, night = 0;
    for (size_t i = 0; i < s.n; i++) {
        double h = s.reqs[i].arrival_s / 3600;
        noon += h >= 11.5 && h < 12.5;
        night += h < 0.5 || h >= 23.5;
    }
    assert_true(noon > 3500 && night > 1300 && night < 1600);
    prs_infer_trace_free(&s);
    assert_int_equal(prs_infer_trace_tile(&t, 0, 0.5, 12, &s, &err), PRS_EINVAL);
    prs_infer_trace_free(&t);
}

static void test_poisson(void **state)
{
    (void)state;
    prs_infer_trace a, b, src = uniform_trace(5, 1.0);
    prs_error err = {0};
    assert_int_equal(prs_infer_trace_poisson(20, 1000, &src, 0, 0, 7, &a, &err), 0);
    assert_int_equal(prs_infer_trace_poisson(20, 1000, &src, 0, 0, 7, &b, &err), 0);
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.reqs, b.reqs, a.n * sizeof *a.reqs);
    assert_true(fabs((double)a.n - 20000) < 5 * sqrt(20000));
    for (size_t i = 0; i < a.n; i++)
        assert_true(a.reqs[i].in_tokens >= 1 && a.reqs[i].in_tokens <= 5);
    prs_infer_trace_free(&b);
    assert_int_equal(prs_infer_trace_poisson(20, 1000, NULL, 64, 8, 8, &b, &err), 0);
    assert_true(b.n != a.n || memcmp(a.reqs, b.reqs, a.n * sizeof *a.reqs) != 0);
    assert_true(b.reqs[0].in_tokens == 64 && b.reqs[0].out_tokens == 8);
    prs_infer_trace_free(&a);
    prs_infer_trace_free(&b);
    prs_infer_trace_free(&src);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/prs_infer_trace_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timestamps),   cmocka_unit_test(test_load_small),
        cmocka_unit_test(test_load_bad),     cmocka_unit_test(test_azure_2023),
        cmocka_unit_test(test_scale_window), cmocka_unit_test(test_scale_shift),
        cmocka_unit_test(test_tile),         cmocka_unit_test(test_poisson),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) return 1;
    return rc;
}
