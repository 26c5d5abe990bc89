/* numfmt.h: prs_num_fmt_double against Python's repr(float), prs_num_py_floordiv against Python's
 * //, and the strict parsers. Every expected string below was printed by CPython 3
 * (`python3 -c 'print(repr(x))'`). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "perseus/numfmt.h"

struct repr_case {
    double x;
    const char *repr;
};

static void test_fmt_matches_python_repr(void **state)
{
    (void)state;
    const struct repr_case cases[] = {
        {3.456, "3.456"},
        {19.080000000000002, "19.080000000000002"},
        {5736.0, "5736.0"},
        {1e-05, "1e-05"},
        {0.0001, "0.0001"},
        {0.00015, "0.00015"},
        {0.00001234, "1.234e-05"},
        {1e16, "1e+16"},
        {1e15, "1000000000000000.0"},
        {1e16 - 2, "9999999999999998.0"},
        {123456789012345.6, "123456789012345.6"},
        {1234567890123456.7, "1234567890123456.8"},
        {12345678901234567.0, "1.2345678901234568e+16"},
        {5736.362622327515, "5736.362622327515"},
        {-0.5, "-0.5"},
        {0.1 + 0.2, "0.30000000000000004"},
        {0.3, "0.3"},
        {0.001, "0.001"},
        {100.0, "100.0"},
        {123456789.0, "123456789.0"},
        {1.0 / 3.0, "0.3333333333333333"},
        {2.0 / 3.0, "0.6666666666666666"},
        {1e22, "1e+22"},
        {1e23, "1e+23"},
        {-1e-7, "-1e-07"},
        {0.05016166687011708, "0.05016166687011708"},
        {23.805472000000007, "23.805472000000005"},
        {44.584247999999967, "44.58424799999997"},
        {9007199254740993.0, "9007199254740992.0"},
        {1.7976931348623157e308, "1.7976931348623157e+308"},
        {2.2250738585072014e-308, "2.2250738585072014e-308"},
        {5e-324, "5e-324"},
        {1e-323, "1e-323"},
        {0.0, "0.0"},
        {-0.0, "-0.0"},
        {INFINITY, "inf"},
        {-INFINITY, "-inf"},
        {NAN, "nan"},
        /* Powers of two where the nearest 16-digit string misses but the next one up reads back
         * (these used to come out with 17 digits). */
        {0x1p-1017, "7.120236347223045e-307"},
        {0x1p-1007, "7.291122019556398e-304"},
        {0x1p-957, "8.209073602596753e-289"},
        {0x1p-921, "5.641232424577593e-278"},
        {0x1p-808, "5.858190679279809e-244"},
        {0x1p-778, "6.290184345309701e-235"},
        {0x1p-652, "5.351097043477547e-197"},
        {0x1p-509, "5.966672584960166e-154"},
        {0x1p-1000, "9.332636185032189e-302"},
        {0x1p-1016, "1.424047269444609e-306"},
        {0x1p60, "1.152921504606847e+18"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char buf[PRS_NUMFMT_MAX];
        const char *got = prs_num_fmt_double(buf, sizeof buf, cases[i].x);
        assert_ptr_equal(got, buf);
        if (strcmp(got, cases[i].repr) != 0)
            fail_msg("case %zu: got '%s', Python gives '%s'", i, got, cases[i].repr);
    }
}

/* Marsaglia's xorshift64: the next state of *s, returned. */
static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The double whose bits are the next xorshift state: any value, NaN and infinities included. */
static double random_bits(uint64_t *s)
{
    uint64_t bits = xorshift(s);
    double x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

/* Every positive finite double: the text reads back exactly and has at most 17 digits. */
static void test_fmt_round_trips(void **state)
{
    (void)state;
    uint64_t seed = 88172645463325252ULL;
    for (int i = 0; i < 30000; i++) {
        double x = random_bits(&seed);
        if (!isfinite(x)) continue;
        char buf[PRS_NUMFMT_MAX];
        prs_num_fmt_double(buf, sizeof buf, x);
        assert_true(strlen(buf) < PRS_NUMFMT_MAX);
        double back = strtod(buf, NULL);
        if (back != x) fail_msg("%s does not read back as %.17g", buf, x);
    }
    for (int e = -1074; e <= 1023; e++) {
        char buf[PRS_NUMFMT_MAX];
        double x = ldexp(1.0, e);
        prs_num_fmt_double(buf, sizeof buf, x);
        assert_true(strtod(buf, NULL) == x);
    }
}

/* The shortest significant digits of x by a linear search: the first p = 0..16 for which the
 * %.{p}e string reads back as x, or, where that string is below x, the string one unit up does
 * (at powers of two). Returns the count of digits; the formatter's bisection must not give more
 * (nor fewer: its result reads back, test_fmt_round_trips). */
static int linear_shortest(double x)
{
    for (int p = 0; p < 17; p++) {
        char sci[48];
        snprintf(sci, sizeof sci, "%.*e", p, x);
        double back = strtod(sci, NULL);
        if (back == x) return p + 1;
        if (back < x) {
            int i = (int)(strchr(sci, 'e') - sci) - 1;
            for (; i >= 0 && (sci[i] == '9' || sci[i] == '.'); i--)
                if (sci[i] == '9') sci[i] = '0';
            if (i < 0) continue; /* 9.99..e: the string up has another exponent; not needed */
            sci[i]++;
            if (strtod(sci, NULL) == x) return p + 1;
        }
    }
    return 17;
}

/* Significant digits of a formatted number (trailing zeros of the mantissa removed). */
static int sig_digits(const char *s)
{
    int n = 0, lead = 1, zeros = 0;
    for (; *s && *s != 'e'; s++) {
        if (*s < '0' || *s > '9') continue;
        if (lead && *s == '0') continue;
        lead = 0;
        n++;
        zeros = *s == '0' ? zeros + 1 : 0;
    }
    return n - zeros;
}

static void test_fmt_shortest(void **state)
{
    (void)state;
    uint64_t seed = 2463534242ULL;
    for (int i = 0; i < 40000; i++) {
        double x = i % 2 ? fabs(random_bits(&seed))
                         : (double)(xorshift(&seed) % 100000000) / 1000.0; /* short decimals */
        if (!isfinite(x) || x == 0) continue;
        char buf[PRS_NUMFMT_MAX];
        prs_num_fmt_double(buf, sizeof buf, x);
        int want = linear_shortest(x);
        if (sig_digits(buf) > want) fail_msg("%s for %.17g: longer than %d digits", buf, x, want);
    }
    for (int e = -1074; e <= 1023; e++) { /* where the string up matters */
        char buf[PRS_NUMFMT_MAX];
        double x = ldexp(1.0, e);
        prs_num_fmt_double(buf, sizeof buf, x);
        int want = linear_shortest(x);
        if (sig_digits(buf) > want) fail_msg("%s for 2^%d: longer than %d digits", buf, e, want);
    }
}

static void test_fmt_small_buffer(void **state)
{
    (void)state;
    char buf[6];
    memset(buf, 'z', sizeof buf);
    prs_num_fmt_double(buf, sizeof buf, 0.1 + 0.2);
    assert_string_equal(buf, "0.300"); /* truncated, still terminated */
}

struct floordiv_case {
    double a, b, want;
};

static void test_py_floordiv(void **state)
{
    (void)state;
    /* Python: a // b */
    const struct floordiv_case cases[] = {
        {1.0, 0.1, 9.0},           {0.05016166687011708, 0.001, 50.0},
        {-1.0, 0.1, -10.0},        {7.0, 2.0, 3.0},
        {-7.0, 2.0, -4.0},         {7.0, -2.0, -4.0},
        {5.5, 0.5, 11.0},          {0.3, 0.1, 2.0},
        {0.7, 0.1, 6.0},           {-0.5, 1.0, -1.0},
        {0.5, -1.0, -1.0},         {0.0, 1.0, 0.0},
        {1e308, 1e-308, INFINITY},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        double got = prs_num_py_floordiv(cases[i].a, cases[i].b);
        if (got != cases[i].want)
            fail_msg("case %zu: %.17g // %.17g = %.17g, Python gives %.17g", i, cases[i].a,
                     cases[i].b, got, cases[i].want);
    }
    /* Signed zeros as Python: -0.0 // 1.0 == -0.0, 0.0 // -1.0 == -0.0, 0.0 // 1.0 == 0.0. */
    assert_true(signbit(prs_num_py_floordiv(-0.0, 1.0)));
    assert_true(signbit(prs_num_py_floordiv(0.0, -1.0)));
    assert_false(signbit(prs_num_py_floordiv(0.0, 1.0)));
    /* floor(a / b) differs here: the reason this function exists. */
    assert_true(floor(1.0 / 0.1) == 10.0);
}

static void test_parse_double(void **state)
{
    (void)state;
    const struct {
        const char *s;
        double want;
    } good[] = {
        {"0", 0.0},
        {"1.5", 1.5},
        {"-2.25", -2.25},
        {"+3", 3.0},
        {"1e-3", 1e-3},
        {"4.25E+1", 42.5},
        {".5", 0.5},
        {"5.", 5.0},
        {"0.05016166687011708", 0.05016166687011708},
        {"1e-400", 0.0},
        {"1.7976931348623157e308", 1.7976931348623157e308},
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        double v = -123.0;
        if (prs_num_parse_double(good[i].s, &v) != 0) fail_msg("rejected '%s'", good[i].s);
        assert_true(v == good[i].want);
    }
    const char *bad[] = {"",     " 1",       "1 ",    "1x",     "abc",  "nan",   "NaN", "inf",
                         "-inf", "infinity", "1e999", "-1e999", "0x10", "0x1p3", "1e",  "--1",
                         "1,5",  "\t2",      "1.2.3", "e5",     "+",    ".",     "1e+", "1_000"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        double v = -123.0;
        if (prs_num_parse_double(bad[i], &v) == 0) fail_msg("accepted '%s' as %g", bad[i], v);
        assert_true(v == -123.0); /* untouched on failure */
    }
    double v;
    assert_int_equal(prs_num_parse_double(NULL, &v), -1);
}

static void test_parse_long_int(void **state)
{
    (void)state;
    long l = 0;
    assert_int_equal(prs_num_parse_long("1410", &l), 0);
    assert_int_equal(l, 1410);
    assert_int_equal(prs_num_parse_long("-7", &l), 0);
    assert_int_equal(l, -7);
    assert_int_equal(prs_num_parse_long("+7", &l), 0);
    assert_int_equal(l, 7);
    int n = 0;
    assert_int_equal(prs_num_parse_int("2147483647", &n), 0);
    assert_int_equal(n, 2147483647);
    assert_int_equal(prs_num_parse_int("-2147483648", &n), 0);
    assert_int_equal(n, -2147483647 - 1);

    const char *bad[] = {
        "", " 1", "1 ", "1.0", "1e3", "0x10", "abc", "12a", "+", "-", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        l = -5;
        if (prs_num_parse_long(bad[i], &l) == 0) fail_msg("parse_long accepted '%s'", bad[i]);
        assert_int_equal(l, -5);
        n = -5;
        if (prs_num_parse_int(bad[i], &n) == 0) fail_msg("parse_int accepted '%s'", bad[i]);
        assert_int_equal(n, -5);
    }
    n = -5;
    assert_int_equal(prs_num_parse_int("2147483648", &n), -1);
    assert_int_equal(prs_num_parse_int("-2147483649", &n), -1);
    assert_int_equal(n, -5);
    assert_int_equal(prs_num_parse_long(NULL, &l), -1);
}

/* JSON reals in shortest form; strings (escapes, digits), integers and structure untouched. */
static void test_json_shortest(void **state)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"{\"blocking_power_w\":83.640000000000001}", "{\"blocking_power_w\":83.64}"},
        {"[938.60069947369584,-0.10000000000000001,12,-7]", "[938.6006994736958,-0.1,12,-7]"},
        {"{\"a\":9.9999999999999995e-08,\"b\":5736.0}", "{\"a\":1e-07,\"b\":5736.0}"},
        {"{\"s\":\"83.640000000000001 \\\" 1.50\",\"t\":1.5}",
         "{\"s\":\"83.640000000000001 \\\" 1.50\",\"t\":1.5}"},
        {"{\"n\":null,\"x\":true,\"big\":1e+300}", "{\"n\":null,\"x\":true,\"big\":1e+300}"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = prs_num_json_shortest(cases[i].in);
        assert_non_null(got);
        assert_string_equal(got, cases[i].out);
        free(got);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fmt_matches_python_repr),
        cmocka_unit_test(test_fmt_shortest),
        cmocka_unit_test(test_fmt_round_trips),
        cmocka_unit_test(test_fmt_small_buffer),
        cmocka_unit_test(test_py_floordiv),
        cmocka_unit_test(test_parse_double),
        cmocka_unit_test(test_parse_long_int),
        cmocka_unit_test(test_json_shortest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
