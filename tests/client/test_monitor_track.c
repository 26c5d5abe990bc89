/* The monitor's energy history (src/client/monitor_int.h) on synthetic counters, no threads: a
 * counter refreshed every 100 ms over a power that steps from 80 W to 400 W at a window's edge is
 * split exactly there (linear interpolation is up to 8 J off), for any position of the edge in
 * its interval; a mark the counter has not passed twice stays pending until forced, and then is an
 * estimate; pruning keeps what pending marks need; power readings integrate by trapezoids. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>

#include "monitor_int.h"

/* The exact integral of 80 W before t = 1 s and 400 W after, from t = 0. */
static double truth(double t)
{
    return t < 1 ? 80 * t : 80 + 400 * (t - 1);
}

/* Counter values at refreshes phase + k * 0.1 s, each seen within a 2 ms bracket after it. */
static void feed(prs__mon_track *k, double phase, double until)
{
    for (int i = 0; phase + 0.1 * i <= until; i++) {
        double r = phase + 0.1 * i;
        assert_int_equal(prs__mon_track_add(k, r - 0.001, r + 0.001, truth(r)), 0);
    }
}

static void test_step_at_edge(void **state)
{
    (void)state;
    for (int i = 0; i < 10; i++) {
        double phase = 0.005 + 0.0099 * i; /* the edge at 1 s anywhere in its interval */
        prs__mon_track k;
        prs__mon_track_init(&k, 0);
        feed(&k, phase, 3.0);
        prs__mon_mark begin = {.t_s = 1.0}, end = {.t_s = 2.5};
        assert_int_equal(prs__mon_track_resolve(&k, &begin, 0), 1);
        assert_int_equal(prs__mon_track_resolve(&k, &end, 0), 1);
        assert_false(begin.estimate);
        double got = end.e_j - begin.e_j, want = truth(2.5) - truth(1.0);
        if (!(fabs(got - want) < 1e-9 * want))
            fail_msg("phase %g: %.9f J, want %.9f", phase, got, want);
        assert_true(end.after_seq - begin.after_seq >= 14);
        prs__mon_track_free(&k);
    }
}

static void test_pending_and_forced(void **state)
{
    (void)state;
    prs__mon_track k;
    prs__mon_track_init(&k, 0);
    feed(&k, 0.05, 1.96); /* last refresh at 1.95 */
    prs__mon_mark m = {.t_s = 1.9};
    assert_int_equal(prs__mon_track_resolve(&k, &m, 0), 0); /* one refresh after it, not two */
    prs__mon_mark late = {.t_s = 2.2};
    assert_int_equal(prs__mon_track_resolve(&k, &late, 0), 0);
    assert_int_equal(prs__mon_track_resolve(&k, &late, 1), 1);
    assert_true(late.estimate);
    assert_true(fabs(late.e_j - truth(2.2)) < 1e-6 * truth(2.2)); /* extrapolated at 400 W */
    assert_int_equal(prs__mon_track_resolve(&k, &m, 1), 1);
    assert_true(m.estimate);
    prs__mon_track_free(&k);
}

static void test_prune(void **state)
{
    (void)state;
    prs__mon_track k;
    prs__mon_track_init(&k, 0);
    feed(&k, 0.05, 2.0);
    size_t n = k.n;
    prs__mon_track_prune(&k, 1.0); /* a pending mark at 1 s */
    assert_true(k.n < n && k.n > 10);
    assert_true(k.pts[0].t_s < 1.0 - 0.1); /* the interval before the mark's is kept */
    prs__mon_mark m = {.t_s = 1.0};
    assert_int_equal(prs__mon_track_resolve(&k, &m, 0), 1);
    assert_true(fabs(m.e_j - truth(1.0)) < 0.2);
    long long seq = m.after_seq;
    prs__mon_track_prune(&k, INFINITY);
    assert_int_equal(k.n, 3);
    prs__mon_mark again = {.t_s = 1.0};
    prs__mon_track_resolve(&k, &again, 1);
    assert_true(again.after_seq > seq); /* before every point kept: an estimate */
    assert_true(again.after_seq == k.base_seq);
    assert_true(again.estimate);
    prs__mon_track_free(&k);
}

static void test_power_mode(void **state)
{
    (void)state;
    prs__mon_track k;
    prs__mon_track_init(&k, 1);
    for (int i = 0; i <= 20; i++) /* 100 W then 300 W from reading 10 on */
        assert_int_equal(prs__mon_track_add(&k, 0.1 * i, 0.1 * i, i < 10 ? 100 : 300), 0);
    assert_int_equal(k.n, 21);
    assert_true(fabs(k.pts[20].e_j - (0.9 * 100 + 0.1 * 200 + 1.0 * 300)) < 1e-9);
    prs__mon_mark a = {.t_s = 0.45}, b = {.t_s = 1.55};
    assert_int_equal(prs__mon_track_resolve(&k, &a, 0), 1);
    assert_int_equal(prs__mon_track_resolve(&k, &b, 0), 1);
    assert_true(fabs((b.e_j - a.e_j) - (0.45 * 100 + 0.1 * 200 + 0.55 * 300)) < 1e-9);
    prs__mon_track_free(&k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_at_edge),
        cmocka_unit_test(test_pending_and_forced),
        cmocka_unit_test(test_prune),
        cmocka_unit_test(test_power_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
