/* Stage-profile module (profile.h): CSV parsing (good and bad inputs, with the exact line and
 * wording of each error), prs_profile_add validation, write -> parse round trip, stage checks, and
 * the shipped SOSP'24 profile (skipped when the shared data folder is absent). */
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

#include "skips.h"

#include "perseus/limits.h"
#include "perseus/profile.h"

static const char HEADER[] = "stage,instruction,frequency,time,energy\n";

static prs_profile *parse_ok(const char *name, const char *text, size_t len)
{
    prs_error err = {0};
    prs_profile *p = NULL;
    int rc = prs_profile_parse(name, text, len, &p, &err);
    if (rc != PRS_OK) fail_msg("unexpected parse failure (%d): %s", rc, err.msg);
    assert_non_null(p);
    return p;
}

/* Parses text as "bad.csv" and checks the failure: code, *out left NULL, one-line message that
 * starts with want_prefix ("bad.csv:3: " or "bad.csv: ") and contains want_word. */
static void expect_fail_len(const char *text, size_t len, int code, const char *want_prefix,
                            const char *want_word)
{
    prs_error err = {0};
    prs_profile *p = (prs_profile *)(uintptr_t)0x1; /* must be reset to NULL */
    int rc = prs_profile_parse("bad.csv", text, len, &p, &err);
    if (rc != code) fail_msg("rc %d, want %d (msg: %s)", rc, code, err.msg);
    assert_null(p);
    assert_int_equal(err.code, code);
    if (strncmp(err.msg, want_prefix, strlen(want_prefix)) != 0)
        fail_msg("message '%s' does not start with '%s'", err.msg, want_prefix);
    if (!strstr(err.msg, want_word))
        fail_msg("message '%s' does not mention '%s'", err.msg, want_word);
    assert_null(strchr(err.msg, '\n'));
}

static void expect_fail(const char *text, const char *want_prefix, const char *want_word)
{
    expect_fail_len(text, strlen(text), PRS_EPARSE, want_prefix, want_word);
}

/* ---- good inputs ------------------------------------------------------------------------------
 */

static void test_parse_basic(void **state)
{
    (void)state;
    const char *csv = "stage,instruction,frequency,time,energy\n"
                      "0,forward,1410,0.05,23.8\n"
                      "0,backward,1410,0.09,44.5\n"
                      "1,forward,1395,0.051,23.9\n"
                      "1,backward,1395,1e-3,4.25E+1\n";
    prs_profile *p = parse_ok("p.csv", csv, strlen(csv));
    assert_int_equal(prs_profile_nrows(p), 4);
    assert_int_equal(prs_profile_num_stages(p), 2);
    assert_string_equal(prs_profile_name(p), "p.csv");
    const prs_profile_row *r = prs_profile_rows(p);
    assert_int_equal(r[0].stage, 0);
    assert_int_equal(r[0].instr, PRS_FORWARD);
    assert_int_equal(r[0].freq_mhz, 1410);
    assert_true(r[0].time_s == 0.05);
    assert_true(r[0].energy_j == 23.8);
    assert_int_equal(r[0].line, 2);
    assert_int_equal(r[1].instr, PRS_BACKWARD);
    assert_int_equal(r[3].line, 5);
    assert_true(r[3].time_s == 1e-3);
    assert_true(r[3].energy_j == 42.5);
    assert_int_equal(prs_profile_check_stages(p, 2, NULL), PRS_OK);
    prs_profile_free(p);
}

static void test_parse_reordered_crlf_bom_load(void **state)
{
    (void)state;
    /* BOM, CRLF, columns in another order, padding, blank lines, load rows, no final newline. */
    const char *csv = "\xEF\xBB\xBF"
                      " energy , time,stage ,frequency,instruction\r\n"
                      "\r\n"
                      "23.8,0.05,0,1410,forward\r\n"
                      "1.5,0.2,0,1410,load\r\n"
                      "  \t \r\n"
                      " 44.5 ,\t0.09, 0 , 1410 , backward \r\n"
                      "9,9,3,9,load";
    prs_profile *p = parse_ok("r.csv", csv, strlen(csv));
    assert_int_equal(prs_profile_nrows(p), 2);
    assert_int_equal(prs_profile_num_stages(p), 1); /* load rows do not count */
    const prs_profile_row *r = prs_profile_rows(p);
    assert_int_equal(r[0].stage, 0);
    assert_int_equal(r[0].instr, PRS_FORWARD);
    assert_int_equal(r[0].freq_mhz, 1410);
    assert_true(r[0].time_s == 0.05);
    assert_true(r[0].energy_j == 23.8);
    assert_int_equal(r[0].line, 3);
    assert_int_equal(r[1].instr, PRS_BACKWARD);
    assert_true(r[1].time_s == 0.09);
    assert_true(r[1].energy_j == 44.5);
    assert_int_equal(r[1].line, 6);
    prs_profile_free(p);
}

static void test_parse_quoted_fields(void **state)
{
    (void)state;
    const char *csv = "\"stage\",\"instruction\",frequency,\"time\",energy\n"
                      "\"2\", \"forward\" ,\"1410\",\"0.5\",\" 7.25 \"\n";
    prs_profile *p = parse_ok("q.csv", csv, strlen(csv));
    assert_int_equal(prs_profile_nrows(p), 1);
    const prs_profile_row *r = prs_profile_rows(p);
    assert_int_equal(r[0].stage, 2);
    assert_int_equal(r[0].freq_mhz, 1410);
    assert_true(r[0].time_s == 0.5);
    assert_true(r[0].energy_j == 7.25);
    assert_int_equal(prs_profile_num_stages(p), 3);
    prs_profile_free(p);
}

static void test_parse_name_copied(void **state)
{
    (void)state;
    char name[16] = "copy.csv";
    char csv[128];
    snprintf(csv, sizeof csv, "%s0,forward,1,1,1\n", HEADER);
    prs_profile *p = parse_ok(name, csv, strlen(csv));
    strcpy(name, "changed");
    assert_string_equal(prs_profile_name(p), "copy.csv");
    prs_profile_free(p);

    p = prs_profile_new();
    assert_non_null(p);
    assert_string_equal(prs_profile_name(p), "<memory>");
    assert_int_equal(prs_profile_nrows(p), 0);
    assert_int_equal(prs_profile_num_stages(p), 0);
    prs_profile_free(p);
}

/* text is not NUL-terminated: parsing must stop at len. */
static void test_parse_respects_len(void **state)
{
    (void)state;
    char csv[128];
    int n = snprintf(csv, sizeof csv, "%s0,forward,1410,0.5,2\n0,forward,1410,0.5,2\n", HEADER);
    size_t first = strlen(HEADER) + strlen("0,forward,1410,0.5,2\n");
    assert_true((size_t)n > first);
    prs_profile *p = parse_ok("len.csv", csv, first); /* the duplicate lies past len */
    assert_int_equal(prs_profile_nrows(p), 1);
    prs_profile_free(p);
}

/* ---- bad inputs -------------------------------------------------------------------------------
 */

static void test_bad_header(void **state)
{
    (void)state;
    expect_fail("stage,instruction,frequency,time,power\n0,forward,1,1,1\n",
                "bad.csv:1: ", "unknown column 'power'");
    expect_fail("stage,instruction,frequency,time\n0,forward,1,1\n",
                "bad.csv:1: ", "missing column 'energy'");
    expect_fail("stage,instruction,time,energy\n", "bad.csv:1: ", "missing column 'frequency'");
    expect_fail("stage,instruction,frequency,time,energy,time\n",
                "bad.csv:1: ", "duplicate column 'time'");
    expect_fail("stage,stage,frequency,time,energy\n", "bad.csv:1: ", "duplicate column 'stage'");
    expect_fail("\n\nStage,instruction,frequency,time,energy\n", "bad.csv:3: ", "unknown column");
    expect_fail("stage,instruction,frequency,time,energy,\n", "bad.csv:1: ", "unknown column ''");
}

static void test_bad_field_count(void **state)
{
    (void)state;
    char csv[256];
    snprintf(csv, sizeof csv, "%s0,forward,1410,0.5,2\n0,backward,1410,0.5\n", HEADER);
    expect_fail(csv, "bad.csv:3: ", "expected 5 fields, got 4");
    snprintf(csv, sizeof csv, "%s0,forward,1410,0.5,2,\n", HEADER);
    expect_fail(csv, "bad.csv:2: ", "expected 5 fields, got 6");
    snprintf(csv, sizeof csv, "%s0,load,1410\n", HEADER);
    expect_fail(csv, "bad.csv:2: ", "expected 5 fields, got 3");
    snprintf(csv, sizeof csv, "%s,,,,,,,,,,,,,,,,,,,,\n", HEADER);
    expect_fail(csv, "bad.csv:2: ", "got 21");
}

/* One data row (line 2 after the header) that must fail with `word` in the message. */
static void expect_bad_row(const char *row, const char *word)
{
    char csv[512];
    snprintf(csv, sizeof csv, "%s%s\n", HEADER, row);
    expect_fail(csv, "bad.csv:2: ", word);
}

static void test_bad_stage(void **state)
{
    (void)state;
    expect_bad_row("-1,forward,1410,0.5,2", "column 'stage'");
    expect_bad_row("abc,forward,1410,0.5,2", "got 'abc'");
    expect_bad_row("1.5,forward,1410,0.5,2", "column 'stage'");
    expect_bad_row(",forward,1410,0.5,2", "column 'stage'");
    expect_bad_row("99999999999999999999,forward,1410,0.5,2", "column 'stage'");
    expect_bad_row("2000000,forward,1410,0.5,2", "column 'stage'");
}

static void test_bad_instruction(void **state)
{
    (void)state;
    expect_bad_row("0,Forward,1410,0.5,2", "column 'instruction'");
    expect_bad_row("0,fwd,1410,0.5,2", "got 'fwd'");
    expect_bad_row("0,,1410,0.5,2", "column 'instruction'");
}

static void test_bad_frequency(void **state)
{
    (void)state;
    expect_bad_row("0,forward,0,0.5,2", "column 'frequency'");
    expect_bad_row("0,forward,-1410,0.5,2", "column 'frequency'");
    expect_bad_row("0,forward,1410MHz,0.5,2", "got '1410MHz'");
    expect_bad_row("0,forward,1410.0,0.5,2", "column 'frequency'");
}

static void test_bad_time_energy(void **state)
{
    (void)state;
    expect_bad_row("0,forward,1410,abc,2", "column 'time': expected a number > 0, got 'abc'");
    expect_bad_row("0,forward,1410,-0.5,2", "column 'time'");
    expect_bad_row("0,forward,1410,0,2", "column 'time'");
    expect_bad_row("0,forward,1410,0.0,2", "column 'time'");
    expect_bad_row("0,forward,1410,nan,2", "column 'time'");
    expect_bad_row("0,forward,1410,inf,2", "column 'time'");
    expect_bad_row("0,forward,1410,1e999,2", "column 'time'");
    expect_bad_row("0,forward,1410,0x1p3,2", "column 'time'");
    expect_bad_row("0,forward,1410,0.5s,2", "got '0.5s'");
    expect_bad_row("0,forward,1410,0.5 1,2", "column 'time'");
    expect_bad_row("0,forward,1410,,2", "column 'time'");
    expect_bad_row("0,forward,1410,0.5,abc", "column 'energy': expected a number > 0");
    expect_bad_row("0,forward,1410,0.5,-2", "column 'energy'");
    expect_bad_row("0,forward,1410,0.5,0", "column 'energy'");
    expect_bad_row("0,forward,1410,0.5,NaN", "column 'energy'");
    expect_bad_row("0,forward,1410,0.5,-inf", "column 'energy'");
    expect_bad_row("0,forward,1410,0.5,2J", "column 'energy'");
    /* finite but beyond any computation: the planner's sums would overflow */
    expect_bad_row("0,forward,1410,1e300,2", "column 'time': 1e300 s is more than one computation");
    expect_bad_row("0,forward,1410,1000001,2", "(at most 1e+06 s)");
    expect_bad_row("0,forward,1410,0.5,1e308", "column 'energy': 1e308 J is more than one");
    expect_bad_row("0,forward,1410,0.5,1.1e12", "(at most 1e+12 J)");
}

static void test_bad_duplicate_row(void **state)
{
    (void)state;
    char csv[512];
    snprintf(csv, sizeof csv,
             "%s0,forward,1410,0.5,2\n0,backward,1410,0.5,2\n\n1,forward,1410,0.5,2\n"
             "0,backward,1410,0.7,3\n",
             HEADER);
    expect_fail(csv, "bad.csv:6: ", "duplicate row for stage 0 backward at 1410 MHz");
    expect_fail(csv, "bad.csv:6: ", "line 3");
    /* Same stage and clock, other instruction, and load rows: not duplicates. */
    snprintf(csv, sizeof csv,
             "%s0,forward,1410,0.5,2\n0,backward,1410,0.5,2\n0,load,1,1,1\n"
             "0,load,1,1,1\n",
             HEADER);
    prs_profile *p = parse_ok("ok.csv", csv, strlen(csv));
    assert_int_equal(prs_profile_nrows(p), 2);
    prs_profile_free(p);
}

static void test_bad_empty(void **state)
{
    (void)state;
    expect_fail("", "bad.csv: ", "empty");
    expect_fail_len(NULL, 0, PRS_EPARSE, "bad.csv: ", "empty");
    expect_fail("\n  \r\n\t\n", "bad.csv: ", "empty");
    expect_fail("\xEF\xBB\xBF", "bad.csv: ", "empty");
    expect_fail(HEADER, "bad.csv: ", "no forward or backward data rows");
    char csv[256];
    snprintf(csv, sizeof csv, "%s0,load,1410,0.5,2\n\n", HEADER);
    expect_fail(csv, "bad.csv: ", "no forward or backward data rows");
}

static void test_bad_nul_byte(void **state)
{
    (void)state;
    char csv[256];
    int n = snprintf(csv, sizeof csv, "%s0,forward,1410,0.5,2\n0,backward,1410,0.5,2\n", HEADER);
    size_t at = strlen(HEADER) + strlen("0,forward,1410,0.5,2\n") + 4; /* inside line 3 */
    csv[at] = '\0';
    expect_fail_len(csv, (size_t)n, PRS_EPARSE, "bad.csv:3: ", "NUL");
    expect_fail_len("stage\0", 6, PRS_EPARSE, "bad.csv:1: ", "NUL");
}

static void test_bad_quotes(void **state)
{
    (void)state;
    expect_bad_row("0,\"forward,1410,0.5,2", "unterminated quoted field");
    expect_bad_row("0,\"for\"\"ward\",1410,0.5,2", "quote inside a quoted field");
    expect_bad_row("0,\"for\"ward,1410,0.5,2", "after a quoted field");
    expect_bad_row("0,for\"ward,1410,0.5,2", "unexpected quote");
    /* A quoted comma is one field, which then is not a number. */
    expect_bad_row("0,forward,\"14,10\",0.5,2", "column 'frequency'");
}

/* Messages stay one short line whatever the input holds. */
static void test_message_escapes_junk(void **state)
{
    (void)state;
    char junk[200], row[300];
    memset(junk, 'x', sizeof junk - 1);
    junk[sizeof junk - 1] = '\0';
    snprintf(row, sizeof row, "0,forward,1410,\r\x01\xc3\xa9%s,2.0", junk);
    expect_bad_row(row, "column 'time'");
    prs_error err = {0};
    prs_profile *p = NULL;
    char csv[512];
    snprintf(csv, sizeof csv, "%s%s\n", HEADER, row);
    assert_int_equal(prs_profile_parse("j.csv", csv, strlen(csv), &p, &err), PRS_EPARSE);
    assert_non_null(strstr(err.msg, "got '\\x01\\xc3\\xa9xxx"));
    assert_non_null(strstr(err.msg, "..."));
    assert_true(strlen(err.msg) < 200);
    for (const char *c = err.msg; *c; c++)
        assert_true((unsigned char)*c >= 0x20 && (unsigned char)*c < 0x7f);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    prs_error err = {0};
    assert_int_equal(prs_profile_parse("x", "a", 1, NULL, &err), PRS_EINVAL);
    prs_profile *p = (prs_profile *)(uintptr_t)0x1;
    assert_int_equal(prs_profile_parse("x", NULL, 5, &p, &err), PRS_EINVAL);
    assert_null(p);
    assert_int_equal(prs_profile_write_csv(NULL, stdout), PRS_EINVAL);
}

/* ---- prs_profile_add --------------------------------------------------------------------------
 */

static void test_add_validates(void **state)
{
    (void)state;
    prs_profile *p = prs_profile_new();
    assert_non_null(p);
    prs_error err = {0};
    prs_profile_row ok = {
        .stage = 1, .instr = PRS_BACKWARD, .freq_mhz = 1200, .time_s = 0.1, .energy_j = 10};
    assert_int_equal(prs_profile_add(p, &ok, &err), PRS_OK);

    prs_profile_row bad = ok;
    bad.stage = -1;
    assert_int_equal(prs_profile_add(p, &bad, &err), PRS_EPARSE);
    assert_non_null(strstr(err.msg, "<memory>: stage -1"));
    bad = ok;
    bad.instr = (prs_instr)7;
    assert_int_equal(prs_profile_add(p, &bad, &err), PRS_EPARSE);
    assert_non_null(strstr(err.msg, "instruction"));
    bad = ok;
    bad.freq_mhz = 0;
    assert_int_equal(prs_profile_add(p, &bad, &err), PRS_EPARSE);
    assert_non_null(strstr(err.msg, "frequency"));
    const double bad_values[] = {0.0, -1.0, NAN, INFINITY, -INFINITY, 1e300};
    for (size_t i = 0; i < sizeof bad_values / sizeof *bad_values; i++) {
        bad = ok;
        bad.time_s = bad_values[i];
        assert_int_equal(prs_profile_add(p, &bad, &err), PRS_EPARSE);
        assert_non_null(strstr(err.msg, "time"));
        bad = ok;
        bad.energy_j = bad_values[i];
        assert_int_equal(prs_profile_add(p, &bad, &err), PRS_EPARSE);
        assert_non_null(strstr(err.msg, "energy"));
    }
    bad = ok;
    bad.time_s = 1e6; /* the largest time and energy allowed: in, under another clock */
    bad.energy_j = 1e12;
    bad.freq_mhz = 1100;
    assert_int_equal(prs_profile_add(p, &bad, &err), PRS_OK);
    bad = ok;
    bad.time_s = 5.0; /* same key: duplicate whatever the values */
    assert_int_equal(prs_profile_add(p, &bad, &err), PRS_EPARSE);
    assert_non_null(strstr(err.msg, "duplicate row for stage 1 backward at 1200 MHz"));
    bad.line = 42;
    assert_int_equal(prs_profile_add(p, &bad, &err), PRS_EPARSE);
    assert_non_null(strstr(err.msg, "<memory>:42: duplicate"));

    assert_int_equal(prs_profile_nrows(p), 2); /* nothing bad got in */
    assert_int_equal(prs_profile_num_stages(p), 2);
    prs_profile_free(p);
}

/* Many rows: the hash set grows; every duplicate is still caught and rows keep their order. */
static void test_add_many(void **state)
{
    (void)state;
    prs_profile *p = prs_profile_new();
    assert_non_null(p);
    prs_error err = {0};
    for (int s = 0; s < 40; s++)
        for (int f = 0; f < 100; f++)
            for (int ins = 0; ins < 2; ins++) {
                prs_profile_row r = {.stage = s,
                                     .instr = (prs_instr)ins,
                                     .freq_mhz = 800 + 5 * f,
                                     .time_s = 0.01 * (f + 1),
                                     .energy_j = s + 1.0};
                assert_int_equal(prs_profile_add(p, &r, &err), PRS_OK);
            }
    assert_int_equal(prs_profile_nrows(p), 8000);
    assert_int_equal(prs_profile_num_stages(p), 40);
    const prs_profile_row *rows = prs_profile_rows(p);
    assert_int_equal(rows[7999].stage, 39);
    assert_int_equal(rows[7999].freq_mhz, 800 + 5 * 99);
    for (int s = 0; s < 40; s += 7) {
        prs_profile_row r = {.stage = s,
                             .instr = PRS_BACKWARD,
                             .freq_mhz = 800 + 5 * (s % 100),
                             .time_s = 1,
                             .energy_j = 1};
        assert_int_equal(prs_profile_add(p, &r, &err), PRS_EPARSE);
    }
    assert_int_equal(prs_profile_nrows(p), 8000);
    prs_profile_free(p);
}

/* ---- write and round trip ---------------------------------------------------------------------
 */

static char *write_to_string(const prs_profile *p, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    assert_non_null(f);
    assert_int_equal(prs_profile_write_csv(p, f), PRS_OK);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static void test_write_format(void **state)
{
    (void)state;
    prs_profile *p = prs_profile_new();
    prs_profile_row r1 = {0, PRS_FORWARD, 1410, 0.1 + 0.2, 5736.0, 0};
    prs_profile_row r2 = {3, PRS_BACKWARD, 855, 1e-05, 1e12, 0};
    assert_int_equal(prs_profile_add(p, &r1, NULL), PRS_OK);
    assert_int_equal(prs_profile_add(p, &r2, NULL), PRS_OK);
    size_t len = 0;
    char *s = write_to_string(p, &len);
    assert_string_equal(s, "stage,instruction,frequency,time,energy\n"
                           "0,forward,1410,0.30000000000000004,5736.0\n"
                           "3,backward,855,1e-05,1000000000000.0\n");
    assert_int_equal(len, strlen(s));
    free(s);
    prs_profile_free(p);
}

static uint64_t bits(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static void test_round_trip_bit_identical(void **state)
{
    (void)state;
    /* times and energies a profile accepts: at most PRS_PROFILE_MAX_TIME_S (s) and
     * PRS_PROFILE_MAX_ENERGY_J (J); test_numfmt covers the doubles beyond */
    const double values[] = {0.1 + 0.2,
                             19.080000000000002,
                             5736.362622327515,
                             0.05016166687011708,
                             1e-05,
                             123456.7890123456,
                             PRS_PROFILE_MAX_TIME_S,
                             5e-324,
                             2.2250738585072014e-308,
                             7.120236347223045e-307,
                             1.0 / 3.0,
                             2.0 / 3.0,
                             999999.9999999999,
                             9007.199254740993};
    size_t nv = sizeof values / sizeof *values;
    prs_profile *p = prs_profile_new();
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < 500; i++) {
        double t, e;
        if ((size_t)i < nv) {
            t = values[i];
            e = values[nv - 1 - (size_t)i];
        } else { /* random positive finite doubles */
            do {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                uint64_t b = seed & 0x7fffffffffffffffULL;
                memcpy(&t, &b, sizeof t);
            } while (!(t > 0 && t <= PRS_PROFILE_MAX_TIME_S));
            e = t * 0.75 + 1.0;
        }
        prs_profile_row r = {i % 9, (prs_instr)(i % 2), 100 + i, t, e, 0};
        assert_int_equal(prs_profile_add(p, &r, NULL), PRS_OK);
    }
    size_t len = 0;
    char *s = write_to_string(p, &len);
    prs_profile *q = parse_ok("rt.csv", s, len);
    assert_int_equal(prs_profile_nrows(q), prs_profile_nrows(p));
    const prs_profile_row *a = prs_profile_rows(p), *b = prs_profile_rows(q);
    for (size_t i = 0; i < prs_profile_nrows(p); i++) {
        assert_int_equal(a[i].stage, b[i].stage);
        assert_int_equal(a[i].instr, b[i].instr);
        assert_int_equal(a[i].freq_mhz, b[i].freq_mhz);
        assert_true(bits(a[i].time_s) == bits(b[i].time_s));
        assert_true(bits(a[i].energy_j) == bits(b[i].energy_j));
        assert_int_equal(b[i].line, (int)i + 2);
    }
    /* Writing the re-read profile gives the same text. */
    size_t len2 = 0;
    char *s2 = write_to_string(q, &len2);
    assert_int_equal(len, len2);
    assert_memory_equal(s, s2, len);
    free(s);
    free(s2);
    prs_profile_free(p);
    prs_profile_free(q);
}

/* ---- check_stages -----------------------------------------------------------------------------
 */

static void test_check_stages(void **state)
{
    (void)state;
    /* Stage 0 complete, stage 1 forward only (twice), stage 2 complete, stage 4 forward. */
    char csv[512];
    snprintf(csv, sizeof csv,
             "%s0,backward,1,1,1\n0,forward,1,1,1\n1,forward,1,1,1\n1,forward,2,1,1\n"
             "2,forward,1,1,1\n2,backward,1,1,1\n4,forward,1,1,1\n",
             HEADER);
    prs_profile *p = parse_ok("cs.csv", csv, strlen(csv));
    assert_int_equal(prs_profile_num_stages(p), 5);
    prs_error err = {0};
    assert_int_equal(prs_profile_check_stages(p, 0, &err), PRS_OK);
    assert_int_equal(prs_profile_check_stages(p, 1, &err), PRS_OK);
    assert_int_equal(prs_profile_check_stages(p, 2, &err), PRS_EPARSE);
    assert_string_equal(err.msg, "cs.csv: stage 1 has no backward rows");
    assert_int_equal(prs_profile_check_stages(p, 5, &err), PRS_EPARSE);
    assert_string_equal(err.msg, "cs.csv: stage 1 has no backward rows");
    assert_int_equal(prs_profile_check_stages(p, -1, &err), PRS_EINVAL);
    prs_profile_free(p);

    snprintf(csv, sizeof csv, "%s0,backward,1,1,1\n0,forward,1,1,1\n2,backward,1,1,1\n", HEADER);
    p = parse_ok("cs.csv", csv, strlen(csv));
    assert_int_equal(prs_profile_check_stages(p, 1, &err), PRS_OK);
    assert_int_equal(prs_profile_check_stages(p, 3, &err), PRS_EPARSE);
    assert_string_equal(err.msg, "cs.csv: stage 1 has no forward rows");
    prs_profile_free(p);

    snprintf(csv, sizeof csv, "%s0,backward,1,1,1\n0,forward,1,1,1\n", HEADER);
    p = parse_ok("cs.csv", csv, strlen(csv));
    assert_int_equal(prs_profile_check_stages(p, 2147483647, &err), PRS_EPARSE);
    assert_string_equal(err.msg, "cs.csv: stage 1 has no forward rows");
    prs_profile_free(p);

    p = prs_profile_new();
    assert_int_equal(prs_profile_check_stages(p, 1, &err), PRS_EPARSE);
    assert_string_equal(err.msg, "<memory>: stage 0 has no forward rows");
    prs_profile_free(p);
}

/* ---- files ------------------------------------------------------------------------------------
 */

static void test_load_file(void **state)
{
    (void)state;
    char path[] = "/tmp/prs_test_profile_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fprintf(f, "%s0,forward,1410,0.5,2\n0,backward,1410,0.5,2\n0,forward,1410,0.5,2\n", HEADER);
    assert_int_equal(fclose(f), 0);
    prs_profile *p = (prs_profile *)(uintptr_t)0x1;
    prs_error err = {0};
    assert_int_equal(prs_profile_load(path, &p, &err), PRS_EPARSE);
    assert_null(p);
    char want[128];
    snprintf(want, sizeof want, "%s:4: duplicate", path);
    assert_non_null(strstr(err.msg, want));

    f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s0,forward,1410,0.5,2\n0,backward,1410,0.5,2\n", HEADER);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(prs_profile_load(path, &p, &err), PRS_OK);
    assert_int_equal(prs_profile_nrows(p), 2);
    assert_string_equal(prs_profile_name(p), path);
    prs_profile_free(p);
    unlink(path);

    p = (prs_profile *)(uintptr_t)0x1;
    assert_int_equal(prs_profile_load(path, &p, &err), PRS_EIO);
    assert_null(p);
    assert_int_equal(strncmp(err.msg, path, strlen(path)), 0);
    assert_int_equal(prs_profile_load("/", &p, &err), PRS_EIO);
    assert_null(p);

    /* at most PRS_PROFILE_MAX_BYTES are read: a larger file, or an endless one, is refused */
    f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s0,forward,1410,0.5,2\n0,backward,1410,0.5,2\n", HEADER);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(truncate(path, PRS_PROFILE_MAX_BYTES), 0); /* NULs up to the limit */
    assert_int_equal(prs_profile_load(path, &p, &err), PRS_EPARSE);
    assert_non_null(strstr(err.msg, ":4: line longer than")); /* read whole, then parsed */
    assert_int_equal(truncate(path, PRS_PROFILE_MAX_BYTES + 1), 0);
    assert_int_equal(prs_profile_load(path, &p, &err), PRS_EPARSE);
    snprintf(want, sizeof want, "%s: larger than %ld bytes", path, PRS_PROFILE_MAX_BYTES);
    assert_non_null(strstr(err.msg, want));
    unlink(path);
    assert_int_equal(prs_profile_load("/dev/zero", &p, &err), PRS_EPARSE);
    assert_non_null(strstr(err.msg, "/dev/zero: larger than"));
    assert_null(p);
}

/* A line longer than PRS_PROFILE_MAX_LINE, even a blank one, is refused with its number. */
static void test_long_line(void **state)
{
    (void)state;
    size_t n = PRS_PROFILE_MAX_LINE + 100;
    char *text = malloc(sizeof HEADER + n + 1);
    assert_non_null(text);
    memcpy(text, HEADER, sizeof HEADER - 1);
    memset(text + sizeof HEADER - 1, ' ', n);
    text[sizeof HEADER - 1 + n] = '\n';
    expect_fail_len(text, sizeof HEADER + n, PRS_EPARSE,
                    "bad.csv:2: ", "line longer than 4096 bytes");
    free(text);
}

static void test_real_profile(void **state)
{
    (void)state;
    const char *dir = getenv("PRS_SHARED_DIR");
    if (!dir || !*dir) prs_skip_input("no shared data: $PRS_SHARED_DIR/data/sosp24");
    char path[4096];
    snprintf(path, sizeof path, "%s/data/sosp24/stage_profile/gpt3-175b+a100_sxm_bf16.csv", dir);
    if (access(path, R_OK) != 0) prs_skip_input("no shared data: $PRS_SHARED_DIR/data/sosp24");
    prs_profile *p = NULL;
    prs_error err = {0};
    int rc = prs_profile_load(path, &p, &err);
    if (rc != PRS_OK) fail_msg("%s", err.msg);
    assert_int_equal(prs_profile_nrows(p), 608);
    assert_int_equal(prs_profile_num_stages(p), 8);
    assert_int_equal(prs_profile_check_stages(p, 8, &err), PRS_OK);
    const prs_profile_row *r = prs_profile_rows(p);
    /* First data line: 0,forward,1410,0.05016166687011708,23.80547200000007 */
    assert_int_equal(r[0].stage, 0);
    assert_int_equal(r[0].instr, PRS_FORWARD);
    assert_int_equal(r[0].freq_mhz, 1410);
    assert_true(r[0].time_s == 0.05016166687011708);
    assert_true(r[0].energy_j == 23.80547200000007);
    int fwd = 0;
    for (size_t i = 0; i < prs_profile_nrows(p); i++)
        fwd += r[i].instr == PRS_FORWARD;
    assert_int_equal(fwd, 304);
    prs_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_basic),
        cmocka_unit_test(test_parse_reordered_crlf_bom_load),
        cmocka_unit_test(test_parse_quoted_fields),
        cmocka_unit_test(test_parse_name_copied),
        cmocka_unit_test(test_parse_respects_len),
        cmocka_unit_test(test_bad_header),
        cmocka_unit_test(test_bad_field_count),
        cmocka_unit_test(test_bad_stage),
        cmocka_unit_test(test_bad_instruction),
        cmocka_unit_test(test_bad_frequency),
        cmocka_unit_test(test_bad_time_energy),
        cmocka_unit_test(test_long_line),
        cmocka_unit_test(test_bad_duplicate_row),
        cmocka_unit_test(test_bad_empty),
        cmocka_unit_test(test_bad_nul_byte),
        cmocka_unit_test(test_bad_quotes),
        cmocka_unit_test(test_message_escapes_junk),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_add_validates),
        cmocka_unit_test(test_add_many),
        cmocka_unit_test(test_write_format),
        cmocka_unit_test(test_round_trip_bit_identical),
        cmocka_unit_test(test_check_stages),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_real_profile),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
