/* perseus-gpud access config (src/gpud/config.c): good files and what they allow, and every kind
 * of bad line reported as FILE:LINE with what was expected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud.h"

static int parse(const char *text, gpud_config *c, prs_error *e)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    assert_non_null(f);
    int rc = gpud_config_read(f, "test.conf", c, e);
    fclose(f);
    return rc;
}

static void test_good_file(void **state)
{
    const char *text = "# who may lease\n"
                       "\n"
                       "   # indented comment\n"
                       "allow user root all\n"
                       "allow uid 1001 0,1,2   # trailing comment\n"
                       "allow\tgid 100\tGPU-0a1b2c3d-0000-1111-2222-333344445555,3\n"
                       "allow group root 7\n"
                       "allow uid 4242 all"; /* no final newline */
    gpud_config c;
    prs_error e;
    assert_int_equal(parse(text, &c, &e), 0);
    assert_int_equal(c.present, 1);
    assert_int_equal(c.n, 5);
    assert_int_equal(c.rules[1].line, 5);
    unsigned g100[] = {5, 100}, g5[] = {5};
    const char *u = "GPU-0a1b2c3d-0000-1111-2222-333344445555";
    assert_true(gpud_config_allows(&c, 1001, g5, 1, 2, "GPU-x"));
    assert_false(gpud_config_allows(&c, 1001, g5, 1, 3, "GPU-x"));
    assert_true(gpud_config_allows(&c, 77, g100, 2, 9, u)); /* by UUID, supplementary group */
    assert_true(gpud_config_allows(&c, 77, g100, 2, 3, "GPU-y"));
    assert_false(gpud_config_allows(&c, 77, g100, 2, 4, "GPU-y"));
    assert_false(gpud_config_allows(&c, 77, g5, 1, 3, "GPU-y"));
    assert_true(gpud_config_allows(&c, 4242, g5, 1, 63, "GPU-z"));
    assert_true(gpud_config_allows(&c, 0, NULL, 0, 1, "GPU-z")); /* root always */
    unsigned g0[] = {0};
    assert_true(gpud_config_allows(&c, 55, g0, 1, 7, "GPU-z")); /* group root, GPU 7 */
    assert_false(gpud_config_allows(&c, 55, g0, 1, 6, "GPU-z"));
    gpud_config_free(&c);
}

static void test_empty_and_missing(void **state)
{
    gpud_config c;
    prs_error e;
    assert_int_equal(parse("# nothing\n\n", &c, &e), 0);
    assert_int_equal(c.present, 1);
    assert_int_equal(c.n, 0);
    unsigned g[] = {1000};
    assert_false(gpud_config_allows(&c, 1000, g, 1, 0, "GPU-a"));
    gpud_config_free(&c);
    assert_int_equal(gpud_config_load("/nonexistent/perseus/gpud.conf", &c, &e), 0);
    assert_int_equal(c.present, 0);
    gpud_config_free(&c);
}

static void expect_error(const char *text, const char *where, const char *what)
{
    gpud_config c;
    prs_error e;
    memset(&e, 0, sizeof e);
    int rc = parse(text, &c, &e);
    if (rc == 0 || strncmp(e.msg, where, strlen(where)) != 0 || !strstr(e.msg, what))
        fail_msg("config %.60s: got rc %d '%s', expected '%s ... %s'", text, rc, e.msg, where,
                 what);
    assert_null(c.rules);
    assert_int_equal(c.n, 0);
}

static void test_errors(void **state)
{
    expect_error("deny user root all\n", "test.conf:1:", "expected 'allow'");
    expect_error("# ok\nallow user root\n", "test.conf:2:", "4 words");
    expect_error("allow user root all extra\n", "test.conf:1:", "4 words");
    expect_error("allow person root all\n", "test.conf:1:", "expected user, group, uid or gid");
    expect_error("\n\nallow user no_such_user_prs all\n", "test.conf:3:", "unknown user");
    expect_error("allow group no_such_group_prs all\n", "test.conf:1:", "unknown group");
    expect_error("allow uid alice all\n", "test.conf:1:", "expected a numeric uid");
    expect_error("allow gid -3 all\n", "test.conf:1:", "expected a numeric gid");
    expect_error("allow uid 99999999999 all\n", "test.conf:1:", "expected a numeric uid");
    expect_error("allow uid 5 0,,1\n", "test.conf:1:", "comma-separated GPU");
    expect_error("allow uid 5 GPU-zz\n", "test.conf:1:", "comma-separated GPU");
    expect_error("allow uid 5 everything\n", "test.conf:1:", "comma-separated GPU");
    expect_error("allow uid 5 all\nallow uid 6 all\x01\n", "test.conf:2:", "control character");
    char *long_line = malloc(GPUD_CONF_LINE_MAX + 40);
    assert_non_null(long_line);
    memset(long_line, '#', GPUD_CONF_LINE_MAX + 10);
    strcpy(long_line + GPUD_CONF_LINE_MAX + 10, "\n");
    expect_error(long_line, "test.conf:1:", "longer than 4096");
    free(long_line);
}

static void test_rule_bound(void **state)
{
    size_t cap = (GPUD_CONF_RULES_MAX + 2) * 20;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t len = 0;
    for (int i = 0; i < GPUD_CONF_RULES_MAX; i++)
        len += (size_t)snprintf(text + len, cap - len, "allow uid %d all\n", i + 1);
    gpud_config c;
    prs_error e;
    assert_int_equal(parse(text, &c, &e), 0);
    assert_int_equal(c.n, GPUD_CONF_RULES_MAX);
    gpud_config_free(&c);
    snprintf(text + len, cap - len, "allow uid 1 all\n");
    expect_error(text, "test.conf:4097:", "more than 4096 rules");
    free(text);
}

int main(void)
{
    gpud_log_setup(-1, GPUD_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_file),
        cmocka_unit_test(test_empty_and_missing),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_rule_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
