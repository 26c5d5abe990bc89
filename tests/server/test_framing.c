/* http_framing.c alone: the verdict on a request's body framing from its headers, and the body
 * gathered piece by piece within its limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http.h"

static int refusal(int lengths, int differ, int encodings, const char *encoding, int *status,
                   const char **code)
{
    http_framing f = {lengths, differ, encodings, encoding};
    const char *msg = NULL;
    int r = http_framing_refusal(&f, status, code, &msg);
    if (r) assert_non_null(msg);
    return r;
}

static void test_framing(void **state)
{
    (void)state;
    int status;
    const char *code;
    assert_int_equal(refusal(0, 0, 0, NULL, &status, &code), 0);
    assert_int_equal(refusal(1, 0, 0, NULL, &status, &code), 0);
    assert_int_equal(refusal(2, 0, 0, NULL, &status, &code), 0); /* the same value twice */
    assert_int_equal(refusal(0, 0, 1, "chunked", &status, &code), 0);
    assert_int_equal(refusal(0, 0, 1, "Chunked", &status, &code), 0);
    assert_int_equal(refusal(2, 1, 0, NULL, &status, &code), 1);
    assert_int_equal(status, 400);
    assert_string_equal(code, "bad_request");
    assert_int_equal(refusal(0, 0, 2, "chunked", &status, &code), 1);
    assert_int_equal(status, 400);
    assert_int_equal(refusal(0, 0, 1, "gzip", &status, &code), 1);
    assert_int_equal(status, 501);
    assert_string_equal(code, "not_implemented");
    assert_int_equal(refusal(1, 0, 1, "chunked", &status, &code), 1);
    assert_int_equal(status, 400);
}

static void test_body_within_limit(void **state)
{
    (void)state;
    conn_ctx cc;
    memset(&cc, 0, sizeof cc);
    cc.limit = 10000;
    char piece[3000];
    memset(piece, 'x', sizeof piece);
    for (int i = 0; i < 3; i++)
        assert_int_equal(http_body_append(&cc, piece, sizeof piece), 0);
    assert_int_equal(cc.len, 9000);
    assert_true(cc.cap > cc.len);
    assert_int_equal(cc.body[cc.len], '\0');
    assert_int_equal(strlen(cc.body), 9000);
    assert_false(cc.too_large);
    /* One more piece passes the limit: refused, the body left as it was. */
    assert_int_equal(http_body_append(&cc, piece, sizeof piece), -1);
    assert_true(cc.too_large);
    assert_int_equal(cc.status, 413);
    assert_int_equal(cc.len, 9000);
    /* ...and stays refused, even for a piece that would fit. */
    assert_int_equal(http_body_append(&cc, piece, 1), -1);
    free(cc.body);
}

static void test_body_exact_limit(void **state)
{
    (void)state;
    conn_ctx cc;
    memset(&cc, 0, sizeof cc);
    cc.limit = 5;
    assert_int_equal(http_body_append(&cc, "abc", 3), 0);
    assert_int_equal(http_body_append(&cc, "de", 2), 0);
    assert_string_equal(cc.body, "abcde");
    assert_int_equal(http_body_append(&cc, "f", 1), -1);
    free(cc.body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_framing),
        cmocka_unit_test(test_body_within_limit),
        cmocka_unit_test(test_body_exact_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
