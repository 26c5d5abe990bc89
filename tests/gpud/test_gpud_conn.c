/* perseus-gpud protocol state machine (src/gpud/conn.c) fed byte strings over two sim GPUs: a
 * whole session, the same session split at every byte boundary, coalescing of SET bursts, every
 * kind of error (fatal ones close the connection and release its lease), and the bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud.h"

static gpud *new_daemon(void)
{
    gpud *d = calloc(1, sizeof *d);
    assert_non_null(d);
    for (int i = 0; i < 2; i++) {
        prs_gpu *g;
        prs_error e;
        assert_int_equal(prs_gpu_open_sim(NULL, &g, &e), 0);
        assert_int_equal(gpud_gpus_add(d, g, i, &e), 0);
    }
    snprintf(d->cfg.path, sizeof d->cfg.path, "/etc/perseus/gpud.conf");
    return d;
}

static void free_daemon(gpud *d)
{
    gpud_gpus_close(d);
    free(d);
}

/* Replies with the apply_ns field of ACK lines replaced by T, so runs compare equal. */
static char *normalized(const gpud_conn *c)
{
    char *out = calloc(1, c->nout * 2 + 1);
    assert_non_null(out);
    size_t o = 0;
    for (size_t i = 0; i < c->nout;) {
        const char *nl = memchr(c->out + i, '\n', c->nout - i);
        size_t len = nl ? (size_t)(nl - (c->out + i)) + 1 : c->nout - i;
        char line[4300];
        snprintf(line, sizeof line, "%.*s", (int)len, c->out + i);
        char *w[6], *p = line;
        int k = 0;
        if (strncmp(line, "ACK ", 4) == 0)
            for (; k < 6 && p; k++, p = strchr(p, ' ') ? strchr(p, ' ') + 1 : NULL)
                w[k] = p;
        if (k == 6 && w[5]) {
            size_t head = (size_t)(w[5] - line), digits = strspn(w[5], "0123456789");
            o += (size_t)sprintf(out + o, "%.*sT%s", (int)head, line, w[5] + digits);
        } else {
            o += (size_t)sprintf(out + o, "%s", line);
        }
        i += len;
    }
    return out;
}

static gpud_conn *session(gpud *d, const char *bytes, size_t split)
{
    gpud_conn *c = gpud_conn_new(-1, 4321, 0, 0);
    assert_non_null(c);
    size_t n = strlen(bytes);
    if (split > n) split = n;
    gpud_conn_feed(d, c, bytes, split);
    gpud_conn_feed(d, c, bytes + split, n - split);
    return c;
}

static void test_session(void **state)
{
    gpud *d = new_daemon();
    int f = d->gpus[0].clocks[3];
    char script[256];
    snprintf(script, sizeof script,
             "HELLO 1\nLIST\nLEASE 0\nCLOCKS\nSET 1 %d\nREAD\nSET 2 %d\nSET 3 0\nRELEASE\n", f, f);
    gpud_conn *c = session(d, script, 0);
    char *out = normalized(c);
    char want[2048];
    int sm;
    assert_int_equal(prs_gpu_sm_clock_now(d->gpus[0].g, &sm), 0);
    snprintf(want, sizeof want, "OK perseus-gpud 1 ");
    assert_memory_equal(out, want, strlen(want));
    assert_non_null(strstr(out, "\nGPU 0 GPU-51300000-0000-0000-0000-"));
    assert_non_null(strstr(out, " - 1410 0 0 "));
    assert_non_null(strstr(out, "\nOK 2\nOK GPU-51300000-0000-0000-0000-"));
    assert_non_null(strstr(out, " 81 1410\nOK 1410 1395 1380 "));
    snprintf(want, sizeof want, "\nACK 1 ok %d %d T\nOK 0 ", f, f);
    if (!strstr(out, want)) fail_msg("%s\nlacks\n%s", out, want);
    snprintf(want, sizeof want, " %d %d\nACK 2 superseded %d - T\nACK 3 ok 0 1410 T\nOK\n", f, f,
             f);
    assert_non_null(strstr(out, want));
    assert_false(c->closing);
    assert_null(d->gpus[0].holder);
    gpud_conn_free(d, c, "test");
    free(out);
    free_daemon(d);
}

static void test_split_everywhere(void **state)
{
    gpud *d = new_daemon();
    const char *script = "HELLO 1\nLIST\nLEASE 0\nCLOCKS\nREAD\nSET 7 1200\nREAD\nRELEASE\n"
                         "LEASE GPU-nope\nLEASE 1\nREAD\nCLOCKS\n";
    gpud_conn *whole = session(d, script, 0);
    char *want = normalized(whole);
    gpud_conn_free(d, whole, "test");
    for (size_t k = 1; k <= strlen(script); k++) {
        gpud_conn *c = session(d, script, k);
        char *got = normalized(c);
        if (strcmp(got, want) != 0) fail_msg("split at %zu:\n%s\nvs\n%s", k, got, want);
        free(got);
        gpud_conn_free(d, c, "test");
        int f;
        assert_int_equal(prs_gpu_sim_clock(d->gpus[0].g, &f), 0);
        assert_int_equal(f, 0);
    }
    /* and one byte at a time */
    gpud_conn *c = gpud_conn_new(-1, 1, 0, 0);
    for (const char *p = script; *p; p++)
        gpud_conn_feed(d, c, p, 1);
    char *got = normalized(c);
    assert_string_equal(got, want);
    free(got);
    gpud_conn_free(d, c, "test");
    free(want);
    free_daemon(d);
}

static void test_coalescing(void **state)
{
    gpud *d = new_daemon();
    gpud_conn *c = session(d, "HELLO 1\nLEASE 1\n", 0);
    c->nout = 0;
    const char *burst = "SET 1 1200\nSET 2 1215\nSET 3 1230\n";
    gpud_conn_feed(d, c, burst, strlen(burst));
    char *out = normalized(c);
    assert_string_equal(out,
                        "ACK 1 superseded 0 - T\nACK 2 superseded 0 - T\nACK 3 ok 1230 1230 T\n");
    free(out);
    c->nout = 0;
    gpud_conn_feed(d, c, "SET 4 1230\n", 11);
    out = normalized(c);
    assert_string_equal(out, "ACK 4 same 1230 - T\n");
    free(out);
    assert_int_equal(prs_gpu_sim_clock_changes(d->gpus[1].g), 1);
    gpud_conn_free(d, c, "test");
    int f;
    assert_int_equal(prs_gpu_sim_clock(d->gpus[1].g, &f), 0);
    assert_int_equal(f, 0); /* reset at close */
    free_daemon(d);
}

/* Feed bytes after HELLO and LEASE 0; expect the last reply to start with want and the
 * connection to be closing (fatal) or not. */
static void expect_reply(const char *bytes, size_t n, const char *want, int fatal)
{
    gpud *d = new_daemon();
    gpud_conn *c = session(d, "HELLO 1\nLEASE 0\nSET 1 1200\n", 0);
    c->nout = 0;
    gpud_conn_feed(d, c, bytes, n);
    char last[4300] = "";
    snprintf(last, sizeof last, "%.*s", (int)c->nout, c->out ? c->out : "");
    if (strncmp(last, want, strlen(want)) != 0 || c->closing != fatal)
        fail_msg("input '%.40s': got '%s' closing=%d, expected '%s' closing=%d", bytes, last,
                 c->closing, want, fatal);
    if (fatal) {
        assert_null(d->gpus[0].holder); /* lease released at once */
        int f;
        assert_int_equal(prs_gpu_sim_clock(d->gpus[0].g, &f), 0);
        assert_int_equal(f, 0);
    }
    gpud_conn_free(d, c, "test");
    free_daemon(d);
}

#define EXPECT(s, want, fatal) expect_reply(s, sizeof(s) - 1, want, fatal)

static void test_errors(void **state)
{
    EXPECT("FROB\n", "ERR proto unknown request 'FROB'", 1);
    EXPECT("SET x 1200\n", "ERR proto SET takes", 1);
    EXPECT("SET 9223372036854775808 0\n", "ERR proto SET takes", 1);
    EXPECT("SET 9223372036854775807 0\n", "ACK 9223372036854775807 ok 0", 0);
    EXPECT("SET -1 0\n", "ERR proto", 1);
    EXPECT("SET 1 +1200\n", "ERR proto", 1);
    EXPECT("SET 2 1201\n", "ACK 2 refused 1200 - 0 -1 1201 MHz is not a supported", 0);
    EXPECT("SET 2\n", "ERR proto SET takes 2 argument(s)", 1);
    EXPECT("READ  \n", "ERR proto expected words separated by single spaces", 1);
    EXPECT(" READ\n", "ERR proto expected words", 1);
    EXPECT("READ\r\n", "ERR proto non-printable byte 0x0d", 1);
    EXPECT("RE\0AD\n", "ERR proto non-printable byte 0x00", 1);
    EXPECT("READ \xff\n", "ERR proto non-printable byte 0xff", 1);
    EXPECT("\n", "ERR proto expected words", 1);
    EXPECT("HELLO 1\n", "ERR proto HELLO twice", 1);
    EXPECT("LEASE 1\n", "ERR state this connection already holds", 0);
    EXPECT("LEASE 1 2\n", "ERR proto LEASE takes 1", 1);
    EXPECT("RELEASE\nRELEASE\n", "OK\nERR state no lease", 0);
    EXPECT("RELEASE\nCLOCKS\nREAD\nSET 1 0\n",
           "OK\nERR state no lease\nERR state no lease\nERR "
           "state no lease",
           0);
    EXPECT("RELEASE\nLEASE 9\n", "OK\nERR nogpu no GPU '9'", 0);
    EXPECT("READ\n", "OK 0 ", 0);
    char longline[400];
    memset(longline, 'A', sizeof longline);
    expect_reply(longline, 256, "ERR proto request line longer than 255 bytes", 1);
    expect_reply(longline, 255, "", 0); /* still waiting for the end of the line */
}

static void test_before_hello_and_version(void **state)
{
    gpud *d = new_daemon();
    gpud_conn *c = session(d, "LIST\nHELLO 1\n", 0);
    assert_int_equal(c->closing, 1);
    char *out = normalized(c);
    assert_string_equal(out, "ERR proto HELLO 1 must be the first request\n");
    free(out);
    gpud_conn_free(d, c, "test");
    c = session(d, "HELLO 2\nLIST\n", 0);
    assert_int_equal(c->closing, 1);
    assert_memory_equal(c->out, "ERR version ", 12);
    assert_int_equal((const char *)memchr(c->out, 0x0a, c->nout) - c->out + 1, (long)c->nout);
    gpud_conn_free(d, c, "test");
    free_daemon(d);
}

static void test_busy_and_denied(void **state)
{
    gpud *d = new_daemon();
    gpud_conn *a = session(d, "HELLO 1\nLEASE 0\n", 0);
    gpud_conn *b = gpud_conn_new(-1, 999, 0, 0);
    gpud_conn_feed(d, b, "HELLO 1\nLEASE 0\n", 16);
    assert_non_null(strstr(b->out, "\nERR busy GPU-51300000-0000-0000-0000-"));
    assert_non_null(strstr(b->out, " is leased by pid 4321 uid 0\n"));
    gpud_conn *u = gpud_conn_new(-1, 5, 1234, 1234);
    gpud_conn_feed(d, u, "HELLO 1\nLEASE 1\n", 16);
    assert_non_null(strstr(u->out, "\nERR denied uid 1234 may not lease"));
    assert_non_null(strstr(u->out, "/etc/perseus/gpud.conf"));
    d->cfg.present = 1; /* a config without rules: still denied */
    u->nout = 0;
    gpud_conn_feed(d, u, "LEASE 1\n", 8);
    assert_non_null(strstr(u->out, "ERR denied uid 1234 may not lease"));
    assert_non_null(strstr(u->out, "add 'allow uid 1234 GPU-"));
    d->private_mode = 1; /* private mode: no access check */
    u->nout = 0;
    gpud_conn_feed(d, u, "LEASE 1\n", 8);
    assert_memory_equal(u->out, "OK GPU-", 7);
    gpud_conn_free(d, a, "test");
    gpud_conn_free(d, b, "test");
    gpud_conn_free(d, u, "test");
    free_daemon(d);
}

static void test_output_bound(void **state)
{
    gpud *d = new_daemon();
    gpud_conn *c = session(d, "HELLO 1\nLEASE 0\n", 0);
    size_t n = 0;
    char *many = malloc(2000 * 7 + 1);
    for (int i = 0; i < 2000; i++)
        n += (size_t)sprintf(many + n, "CLOCKS\n");
    gpud_conn_feed(d, c, many, n);
    assert_int_equal(c->dead, 1);
    assert_true(c->nout <= GPUD_OUT_MAX);
    free(many);
    gpud_conn_free(d, c, "test");
    assert_null(d->gpus[0].holder);
    free_daemon(d);
}

int main(void)
{
    gpud_log_setup(-1, GPUD_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_session),
        cmocka_unit_test(test_split_everywhere),
        cmocka_unit_test(test_coalescing),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_before_hello_and_version),
        cmocka_unit_test(test_busy_and_denied),
        cmocka_unit_test(test_output_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
