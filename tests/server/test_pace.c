/* A pipeline's wall-clock pace (src/server/pace.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <math.h>

#include <cmocka.h>

#include "pace.h"

static void note_n(pipe_pace *p, int n, double wall_s)
{
    for (int i = 0; i < n; i++)
        pace_note(p, wall_s);
}

/* No pace before a whole window; then the window's rate. A window ends at PACE_WINDOW_S of
 * reported time or at PACE_WINDOW_N reports, whichever comes first. */
static void test_window(void **state)
{
    (void)state;
    pipe_pace p;
    pace_reset(&p);
    assert_int_equal(pace_iterations(&p, 2.0), 0);
    pace_note(&p, 0.1); /* 0.2 s in two reports: not yet */
    pace_note(&p, 0.1);
    assert_int_equal(pace_iterations(&p, 2.0), 0);
    pace_note(&p, 0.1); /* 3 in 0.3 s */
    assert_int_equal(pace_iterations(&p, 2.0), 20);
    assert_int_equal(pace_iterations(&p, 0.01), 1); /* rounded up */
    pace_reset(&p);
    note_n(&p, PACE_WINDOW_N - 1, 0.001);
    assert_int_equal(pace_iterations(&p, 1.0), 0);
    pace_note(&p, 0.001);
    assert_int_equal(pace_iterations(&p, 1.0), 1000);
}

/* The faster of the last two windows: a speed-up counts at once, a slow-down a window later. */
static void test_two_windows(void **state)
{
    (void)state;
    pipe_pace p;
    pace_reset(&p);
    note_n(&p, 2, 0.125); /* one window: 8/s */
    assert_int_equal(pace_iterations(&p, 1.0), 8);
    note_n(&p, PACE_WINDOW_N, 0.0078125); /* 128/s */
    assert_int_equal(pace_iterations(&p, 1.0), 128);
    note_n(&p, 2, 0.125); /* 8/s again, but the window before had 128 */
    assert_int_equal(pace_iterations(&p, 1.0), 128);
    note_n(&p, 2, 0.125);
    assert_int_equal(pace_iterations(&p, 1.0), 8);
}

/* Unknown times are ignored; a stored pace holds until a window ends; a huge pace is bounded. */
static void test_unknown_restore_bound(void **state)
{
    (void)state;
    pipe_pace p;
    pace_reset(&p);
    pace_note(&p, 0);
    pace_note(&p, -1);
    pace_note(&p, NAN);
    pace_note(&p, INFINITY);
    assert_int_equal(p.n, 0);
    pace_restore(&p, 50);
    assert_int_equal(pace_iterations(&p, 1.0), 50);
    pace_note(&p, 0.125); /* half a window */
    assert_int_equal(pace_iterations(&p, 1.0), 50);
    pace_note(&p, 0.125); /* 8/s; the restored 50 counts as the window before */
    assert_int_equal(pace_iterations(&p, 1.0), 50);
    note_n(&p, 2, 0.125);
    assert_int_equal(pace_iterations(&p, 1.0), 8);
    pace_restore(&p, NAN);
    assert_int_equal(pace_iterations(&p, 1.0), 0);
    note_n(&p, PACE_WINDOW_N, 1e-12);
    assert_int_equal(pace_iterations(&p, 3600), 1000000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_two_windows),
        cmocka_unit_test(test_unknown_restore_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
