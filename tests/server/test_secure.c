/* secure.h: SHA-256 against FIPS 180-4 test vectors, constant-time comparison, base64url, ids
 * and tokens. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "secure.h"

static void hex(const uint8_t *h, char *out)
{
    for (int i = 0; i < 32; i++)
        sprintf(out + 2 * i, "%02x", h[i]);
}

static void test_sha256_vectors(void **state)
{
    (void)state;
    struct {
        const char *in;
        const char *want;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqr"
         "lmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    uint8_t h[32];
    char got[65];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        secure_sha256(v[i].in, strlen(v[i].in), h);
        hex(h, got);
        assert_string_equal(got, v[i].want);
    }
    /* One million 'a': crosses many blocks. */
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    secure_sha256(a, 1000000, h);
    free(a);
    hex(h, got);
    assert_string_equal(got, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* Every length around the padding boundary differs from its neighbours. */
    uint8_t prev[32] = {0};
    char buf[130];
    memset(buf, 'x', sizeof buf);
    for (size_t n = 50; n < 130; n++) {
        secure_sha256(buf, n, h);
        assert_memory_not_equal(h, prev, 32);
        memcpy(prev, h, 32);
    }
}

static void test_equal(void **state)
{
    (void)state;
    assert_true(secure_equal("abcd", "abcd", 4));
    assert_false(secure_equal("abcd", "abce", 4));
    assert_false(secure_equal("xbcd", "abcd", 4));
    assert_true(secure_equal("", "", 0));
}

static void test_b64url_and_ids(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(secure_b64url((const uint8_t *)"\xfb\xff\xbf", 3, out), 4);
    assert_string_equal(out, "-_-_");
    assert_int_equal(secure_b64url((const uint8_t *)"f", 1, out), 2);
    assert_string_equal(out, "Zg");
    assert_int_equal(secure_b64url((const uint8_t *)"fo", 2, out), 3);
    assert_string_equal(out, "Zm8");
    assert_int_equal(secure_b64url((const uint8_t *)"foobar", 6, out), 8);
    assert_string_equal(out, "Zm9vYmFy");

    char id[SECURE_ID_LEN + 1], id2[SECURE_ID_LEN + 1], tok[SECURE_TOKEN_LEN + 1];
    assert_int_equal(secure_new_id(id, NULL), 0);
    assert_int_equal(secure_new_id(id2, NULL), 0);
    assert_int_equal(secure_new_token(tok, NULL), 0);
    assert_int_equal(strlen(id), SECURE_ID_LEN);
    assert_int_equal(strlen(tok), SECURE_TOKEN_LEN);
    assert_string_not_equal(id, id2);
    assert_true(secure_is_id(id, strlen(id)));
    assert_false(secure_is_id(tok, strlen(tok)));
    assert_false(secure_is_id("AAAAAAAAAAAAAAA", 15));
    assert_false(secure_is_id("AAAAAAAAAAAAAAA/", 16));
    assert_false(secure_is_id("AAAAAAAAAAAAAAA.", 16));
    assert_false(secure_is_id("AAAAAAAA\0AAAAAAA", 16));
    assert_true(secure_is_id("AZaz09-_AZaz09-_", 16));
    /* never an option's look on a command line (1 in 32 began with '-' or '_' before) */
    for (int i = 0; i < 4096; i++) {
        assert_int_equal(secure_new_id(id, NULL), 0);
        assert_true(id[0] != '-' && id[0] != '_');
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_equal),
        cmocka_unit_test(test_b64url_and_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
