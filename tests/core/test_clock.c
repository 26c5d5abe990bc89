/* clock.h: timed waits on the monotonic clock. prs_mono_timespec turns prs_mono_s's seconds into
 * an absolute timespec; prs_sync_init_mono makes a condition variable that reads it on
 * CLOCK_MONOTONIC (a wait on one measured against the wall clock would end at once: the
 * monotonic time is far in the wall clock's past). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "perseus/clock.h"

static void test_timespec(void **state)
{
    (void)state;
    struct timespec ts = prs_mono_timespec(12.5);
    assert_int_equal(ts.tv_sec, 12);
    assert_int_equal(ts.tv_nsec, 500000000L);
    ts = prs_mono_timespec(7.0);
    assert_int_equal(ts.tv_sec, 7);
    assert_int_equal(ts.tv_nsec, 0);
    ts = prs_mono_timespec(nextafter(3.0, 2.0)); /* just under 3 s: never 1e9 ns */
    assert_int_equal(ts.tv_sec, 2);
    assert_true(ts.tv_nsec >= 999999000L && ts.tv_nsec <= 999999999L);
    ts = prs_mono_timespec(-1.0);
    assert_int_equal(ts.tv_sec, 0);
    assert_int_equal(ts.tv_nsec, 0);
    ts = prs_mono_timespec(NAN);
    assert_int_equal(ts.tv_sec, 0);
    assert_int_equal(ts.tv_nsec, 0);
}

static void test_wait_is_monotonic(void **state)
{
    (void)state;
    pthread_cond_t cv;
    pthread_mutex_t mu;
    assert_int_equal(prs_sync_init_mono(&mu, &cv), 0);
    pthread_mutex_lock(&mu);
    double t0 = prs_mono_s();
    struct timespec until = prs_mono_timespec(t0 + 0.05);
    int rc = 0;
    while (rc != ETIMEDOUT) /* spurious wake-ups wait again */
        rc = pthread_cond_timedwait(&cv, &mu, &until);
    double waited = prs_mono_s() - t0;
    pthread_mutex_unlock(&mu);
    pthread_cond_destroy(&cv);
    pthread_mutex_destroy(&mu);
    assert_true(waited >= 0.05);
    assert_true(waited < 5.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timespec),
        cmocka_unit_test(test_wait_is_monotonic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
