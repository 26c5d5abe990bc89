/* Inference profiles (src/infer/profile.h): the CSV reader's errors (each with its file:line or
 * the (tp, clock, phase) at fault), the interpolation against values worked out by hand, and the
 * backend callbacks (perf.h). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "perseus/limits.h"
#include "profile.h"

/* |a - b| <= tol, with both values in the failure message. */
#define assert_near(a, b, tol)                                                                     \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        if (!(fabs(a_ - b_) <= (tol))) fail_msg("%.17g != %.17g (tol %g)", a_, b_, (double)(tol)); \
    } while (0)

static const char HEADER[] = "model,gpu,tp,freq_mhz,phase,batch,tokens,time_s,energy_j\n";

/* One (tp, clock) block: prefill grid batch {1,4} x tokens {100,200}, decode grid batch {1,4} x
 * tokens {100,1000}, an idle row. Prefill times (batch, tokens): (1,100) 1, (1,200) 2, (4,100) 4,
 * (4,200) 10, energies ten times the times, scaled by scale; decode 0.5 + batch*tokens/1e4. */
static void add_block(char *buf, size_t n, int tp, int mhz, double scale)
{
    static const int b[2] = {1, 4};
    static const double pt[2][2] = {{1, 2}, {4, 10}};
    size_t o = strlen(buf);
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) {
            long s = k ? 200 : 100;
            o += (size_t)snprintf(buf + o, n - o, "m,g,%d,%d,prefill,%d,%ld,%.17g,%.17g\n", tp, mhz,
                                  b[i], s, pt[i][k] * scale, 10 * pt[i][k] * scale);
            long c = k ? 1000 : 100;
            double dt = (0.5 + b[i] * (double)c / 1e4) * scale;
            o += (size_t)snprintf(buf + o, n - o, "m,g,%d,%d,decode,%d,%ld,%.17g,%.17g\n", tp, mhz,
                                  b[i], c, dt, 300 * dt);
        }
    snprintf(buf + o, n - o, "m,g,%d,%d,idle,0,0,10,%.17g\n", tp, mhz, 100.0 * tp);
}

/* tp 2 and 4 at 1000 and 2000 MHz (2000 MHz twice as fast); capacities. */
static char *good_text(void)
{
    size_t n = 16384;
    char *buf = malloc(n);
    assert_non_null(buf);
    snprintf(buf, n, "# a comment\n%s", HEADER);
    add_block(buf, n, 2, 1000, 1.0);
    add_block(buf, n, 2, 2000, 0.5);
    add_block(buf, n, 4, 2000, 0.25);
    add_block(buf, n, 4, 1000, 0.5);
    size_t o = strlen(buf);
    snprintf(buf + o, n - o, "m,g,2,0,capacity,4,5000,0,0\nm,g,4,0,capacity,3,20000,0,0\n");
    return buf;
}

static prs_infer_profile *parse_ok(const char *text)
{
    prs_error err = {0};
    prs_infer_profile *p = NULL;
    int rc = prs_infer_profile_parse(text, strlen(text), "good.csv", &p, &err);
    if (rc != PRS_OK) fail_msg("unexpected failure (%d): %s", rc, err.msg);
    return p;
}

static void expect_fail(const char *text, size_t len, int code, const char *prefix,
                        const char *word)
{
    prs_error err = {0};
    prs_infer_profile *p = (prs_infer_profile *)(uintptr_t)1;
    int rc = prs_infer_profile_parse(text, len, "bad.csv", &p, &err);
    if (rc != code) fail_msg("rc %d, want %d (msg: %s)", rc, code, err.msg);
    assert_null(p);
    if (strncmp(err.msg, prefix, strlen(prefix)) != 0)
        fail_msg("message '%s' does not start with '%s'", err.msg, prefix);
    if (!strstr(err.msg, word)) fail_msg("message '%s' does not mention '%s'", err.msg, word);
    assert_null(strchr(err.msg, '\n'));
}

/* The good text with its line LINE (1-based) replaced by repl (NULL: deleted). */
static void expect_fail_edit(int line, const char *repl, const char *prefix, const char *word)
{
    char *text = good_text();
    size_t n = strlen(text) + 512;
    char *out = malloc(n);
    assert_non_null(out);
    size_t o = 0;
    int k = 1;
    for (char *s = text; *s; k++) {
        char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) + 1 : strlen(s);
        const char *src = k != line ? s : repl ? repl : "";
        size_t m = k != line ? len : strlen(src);
        assert_true(o + m < n);
        memmove(out + o, src, m);
        o += m;
        out[o] = '\0';
        s += len;
    }
    expect_fail(out, o, PRS_EPARSE, prefix, word);
    free(out);
    free(text);
}

static void test_parse_errors(void **state)
{
    (void)state;
    /* line 1 is the comment, 2 the header, 3.. the rows of tp 2 at 1000 MHz */
    expect_fail_edit(2, "model,gpu,tp,freq,phase,batch,tokens,time_s,energy_j\n",
                     "bad.csv:2: ", "unknown column 'freq'");
    expect_fail_edit(2, "model,gpu,tp,freq_mhz,phase,batch,tokens,time_s\n",
                     "bad.csv:2: ", "missing column 'energy_j'");
    expect_fail_edit(3, "m,g,2,1000,prefill,1,100,1e,10\n", "bad.csv:3: ", "column 'time_s'");
    expect_fail_edit(3, "m,g,2,1000,prefill,1,100,nan,10\n", "bad.csv:3: ", "column 'time_s'");
    expect_fail_edit(3, "m,g,2,1000,prefill,1,100,inf,10\n", "bad.csv:3: ", "column 'time_s'");
    expect_fail_edit(3, "m,g,2,1000,prefill,1,100,1,-10\n", "bad.csv:3: ", "column 'energy_j'");
    expect_fail_edit(3, "m,g,2,1000,prefill,1,100,0x1p0,10\n", "bad.csv:3: ", "column 'time_s'");
    expect_fail_edit(3, "m,g,2,1000,prefill,1,100,0,10\n", "bad.csv:3: ", "column 'time_s'");
    expect_fail_edit(3, "m,g,2,1000,prefill,1.5,100,1,10\n", "bad.csv:3: ", "column 'batch'");
    expect_fail_edit(3, "m,g,2,1000,prefill,1,-100,1,10\n", "bad.csv:3: ", "column 'tokens'");
    expect_fail_edit(3, "m,g,0,1000,prefill,1,100,1,10\n", "bad.csv:3: ", "column 'tp'");
    expect_fail_edit(3, "m,g,2,1000,warmup,1,100,1,10\n", "bad.csv:3: ", "column 'phase'");
    expect_fail_edit(3, "m,g,2,1000,prefill,1,100,1\n", "bad.csv:3: ", "expected 9 fields");
    expect_fail_edit(4, "other,g,2,1000,decode,1,100,0.51,153\n",
                     "bad.csv:4: ", "differs from 'm' on line 3");
    expect_fail_edit(4, "m,g,2,1000,prefill,1,100,1,10\n", "bad.csv:4: ",
                     "duplicate prefill row for tp 2 at 1000 MHz, batch 1, tokens 100 (first on "
                     "line 3)");
    /* idle row of tp 2 at 1000 MHz is line 11 */
    expect_fail_edit(11, NULL, "bad.csv: ", "tp 2 at 1000 MHz: no idle row");
    expect_fail_edit(11, "m,g,2,1000,idle,1,0,10,1000\n", "bad.csv:11: ", "column 'batch'");
    /* the (4, 200) prefill row of tp 2 at 1000 MHz is line 9: the grid has a hole */
    expect_fail_edit(9, NULL,
                     "bad.csv: ", "tp 2 at 1000 MHz, prefill: no row for batch 4, tokens 200");
    /* all four decode rows of tp 2 at 1000 MHz (lines 4, 6, 8, 10) gone */
    {
        char *text = good_text();
        char *s = text;
        for (int k = 1; *s; k++) {
            char *nl = strchr(s, '\n');
            if (k == 4 || k == 6 || k == 8 || k == 10) memset(s, ' ', (size_t)(nl - s));
            s = nl + 1;
        }
        expect_fail(text, strlen(text), PRS_EPARSE, "bad.csv: ", "tp 2 at 1000 MHz: no decode row");
        free(text);
    }
    /* capacity rows are the last two lines (39, 40) */
    expect_fail_edit(39, NULL, "bad.csv: ", "tp 2: no capacity row");
    expect_fail_edit(39, "m,g,2,1000,capacity,4,5000,0,0\n", "bad.csv:39: ", "column 'freq_mhz'");
    expect_fail_edit(39, "m,g,2,0,capacity,4,5000,1,0\n", "bad.csv:39: ", "column 'time_s'");
    expect_fail_edit(39, "m,g,2,0,capacity,8,5000,0,0\n", "bad.csv:39: ",
                     "capacity batch 8 exceeds the largest measured prefill batch 4");
    expect_fail_edit(39, "m,g,2,0,capacity,4,5000,0,0\nm,g,2,0,capacity,4,6000,0,0\n",
                     "bad.csv:40: ", "a second capacity row (first on line 39)");
    /* a clock only tp 4 has */
    expect_fail_edit(40, "m,g,4,0,capacity,3,20000,0,0\nm,g,4,1500,idle,0,0,1,1\n",
                     "bad.csv: ", "tp 2 has no rows at 1500 MHz");
    expect_fail("", 0, PRS_EPARSE, "bad.csv: ", "empty file");
    expect_fail(HEADER, strlen(HEADER), PRS_EPARSE, "bad.csv: ", "no data rows");
}

static void test_size_limits(void **state)
{
    (void)state;
    size_t n = PRS_INFER_PROFILE_MAX_LINE + 2;
    char *text = malloc(strlen(HEADER) + n + 1);
    assert_non_null(text);
    memcpy(text, HEADER, strlen(HEADER));
    memset(text + strlen(HEADER), 'x', n);
    text[strlen(HEADER) + n] = '\0';
    expect_fail(text, strlen(text), PRS_EPARSE, "bad.csv:2: ", "line longer than 4096 bytes");
    free(text);
    size_t big = (size_t)PRS_INFER_PROFILE_MAX_BYTES + 1;
    char *huge = malloc(big);
    assert_non_null(huge);
    memset(huge, '\n', big);
    expect_fail(huge, big, PRS_EPARSE, "bad.csv: ", "larger than");
    free(huge);
}

static void test_load(void **state)
{
    (void)state;
    char path[] = "/tmp/prs_infer_profile_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    char *text = good_text();
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    prs_infer_profile *p = NULL;
    prs_error err = {0};
    assert_int_equal(prs_infer_profile_load(path, &p, &err), PRS_OK);
    assert_string_equal(prs_infer_profile_model(p), "m");
    assert_string_equal(prs_infer_profile_gpu(p), "g");
    prs_infer_profile_free(p);
    unlink(path);
    free(text);
    assert_int_equal(prs_infer_profile_load(path, &p, &err), PRS_EIO);
    assert_null(p);
    assert_non_null(strstr(err.msg, path));
}

static void prefill_at(const prs_infer_perf *pf, int tp, int mhz, int n, long tokens, double want_t,
                       double want_e)
{
    prs_infer_prefill it = {.n_seqs = n, .tokens = tokens};
    double t = -1, e = -1;
    prs_error err = {0};
    int rc = pf->prefill(pf->ctx, tp, mhz, &it, &t, &e, &err);
    if (rc != PRS_OK) fail_msg("prefill %d x %ld: %s", n, tokens, err.msg);
    assert_near(t, want_t, 1e-12);
    assert_near(e, want_e, 1e-10);
}

static void test_interpolation(void **state)
{
    (void)state;
    char *text = good_text();
    prs_infer_profile *p = parse_ok(text);
    free(text);
    prs_infer_perf pf;
    prs_infer_profile_perf(p, &pf);
    /* grid points */
    prefill_at(&pf, 2, 1000, 1, 100, 1, 10);
    prefill_at(&pf, 2, 1000, 4, 800, 10, 100);
    prefill_at(&pf, 2, 2000, 4, 800, 5, 50);
    /* batch 2, 150 tokens each: along tokens 1.5 at batch 1 and 7 at batch 4; a third of the
     * way from batch 1 to 4: 1.5 + (7 - 1.5) / 3 */
    prefill_at(&pf, 2, 1000, 2, 300, 1.5 + 5.5 / 3, 10 * (1.5 + 5.5 / 3));
    /* below the smallest tokens: the value at 100 */
    prefill_at(&pf, 2, 1000, 1, 40, 1, 10);
    /* beyond: the last segment extended, 300 tokens at batch 1: 2 + 1 */
    prefill_at(&pf, 2, 1000, 1, 300, 3, 30);
    prefill_at(&pf, 2, 1000, 4, 4L * 400, 22, 220); /* batch 4: 10 + 2 * 6 */
    /* decode: 0.5 + b c / 1e4 is bilinear, so exact everywhere inside: batch 3 at 550 each */
    prs_infer_decode d = {.n_seqs = 3, .ctx_tokens = 1650};
    double t, e;
    prs_error err = {0};
    assert_int_equal(pf.decode(pf.ctx, 4, 1000, &d, &t, &e, &err), PRS_OK);
    assert_near(t, 0.5 * (0.5 + 3 * 550 / 1e4), 1e-12);
    assert_near(e, 300 * t, 1e-9);
    prs_infer_profile_free(p);
}

static void test_refusals(void **state)
{
    (void)state;
    char *text = good_text();
    prs_infer_profile *p = parse_ok(text);
    free(text);
    prs_infer_perf pf;
    prs_infer_profile_perf(p, &pf);
    prs_error err = {0};
    double t, e;
    prs_infer_prefill it = {.n_seqs = 5, .tokens = 500};
    assert_int_equal(pf.prefill(pf.ctx, 2, 1000, &it, &t, &e, &err), PRS_ERANGE);
    assert_non_null(
        strstr(err.msg, "tp 2 at 1000 MHz, prefill: batch 5 outside the measured 1..4"));
    it = (prs_infer_prefill){.n_seqs = 1, .tokens = 401};
    assert_int_equal(pf.prefill(pf.ctx, 2, 1000, &it, &t, &e, &err), PRS_ERANGE);
    assert_non_null(strstr(err.msg, "401 tokens per sequence beyond"));
    it.tokens = 400; /* exactly twice the largest: still answered */
    assert_int_equal(pf.prefill(pf.ctx, 2, 1000, &it, &t, &e, &err), PRS_OK);
    assert_int_equal(pf.prefill(pf.ctx, 8, 1000, &it, &t, &e, &err), PRS_ERANGE);
    assert_non_null(strstr(err.msg, "no data for tp 8"));
    assert_int_equal(pf.prefill(pf.ctx, 2, 1500, &it, &t, &e, &err), PRS_ERANGE);
    assert_non_null(strstr(err.msg, "no data at 1500 MHz"));
    prs_infer_decode d = {.n_seqs = 0, .ctx_tokens = 10};
    assert_int_equal(pf.decode(pf.ctx, 2, 1000, &d, &t, &e, &err), PRS_EINVAL);
    prs_infer_profile_free(p);
}

static void test_other_callbacks(void **state)
{
    (void)state;
    char *text = good_text();
    prs_infer_profile *p = parse_ok(text);
    free(text);
    prs_infer_perf pf;
    prs_infer_profile_perf(p, &pf);
    prs_error err = {0};
    assert_int_equal(prs__infer_perf_check(&pf, &err), PRS_OK);
    double w;
    assert_int_equal(pf.idle_power(pf.ctx, 4, 2000, &w, &err), PRS_OK);
    assert_near(w, 40.0, 1e-12); /* 400 J over 10 s */
    assert_int_equal(pf.idle_power(pf.ctx, 4, 999, &w, &err), PRS_ERANGE);
    long kv;
    int mb;
    assert_int_equal(pf.capacity(pf.ctx, 4, &kv, &mb, &err), PRS_OK);
    assert_int_equal(kv, 20000);
    assert_int_equal(mb, 3);
    assert_int_equal(pf.capacity(pf.ctx, 3, &kv, &mb, &err), PRS_ERANGE);
    const int *v;
    int n;
    assert_int_equal(pf.clocks(pf.ctx, &v, &n), PRS_OK);
    assert_int_equal(n, 2);
    assert_int_equal(v[0], 1000);
    assert_int_equal(v[1], 2000);
    assert_int_equal(pf.tps(pf.ctx, &v, &n), PRS_OK);
    assert_int_equal(n, 2);
    assert_int_equal(v[0], 2);
    assert_int_equal(v[1], 4);
    prs_infer_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_errors), cmocka_unit_test(test_size_limits),
        cmocka_unit_test(test_load),         cmocka_unit_test(test_interpolation),
        cmocka_unit_test(test_refusals),     cmocka_unit_test(test_other_callbacks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
