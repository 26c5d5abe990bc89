/* The power of a plan (perseus/power.h):
 *   - hand-computed pipelines: the steps, the average, and the peak over windows shorter than,
 *     equal to and longer than the iteration (back to back iterations);
 *   - a computation quantized to 0 units is an impulse, counted by a closed window;
 *   - windows far shorter than a step (its power) or far longer than the iteration (the
 *     average), without cancellation or overflow;
 *   - on a synthetic profile: the steps integrate to the evaluated energy, and the peak agrees
 *     with a brute-force scan of window starts, for many windows;
 *   - bad windows and bad steps are refused. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "perseus/power.h"
#include "perseus/synth.h"

/* Stage s forward: tf s, ef J; backward: tb s, eb J; one clock (1000 MHz). */
static void add_stage(prs_profile *p, int s, double tf, double ef, double tb, double eb)
{
    prs_error err;
    prs_profile_row f = {s, PRS_FORWARD, 1000, tf, ef, 0};
    prs_profile_row b = {s, PRS_BACKWARD, 1000, tb, eb, 0};
    assert_int_equal(prs_profile_add(p, &f, &err), 0);
    assert_int_equal(prs_profile_add(p, &b, &err), 0);
}

/* The power of the all-1000 MHz plan of a 1F1B pipeline of one microbatch. */
static void power_of(const prs_profile *p, int stages, double unit, double pb, double window,
                     prs_plan_power *out, prs_power_step **steps, size_t *n)
{
    prs_pipeline pipe = {stages, 1, PRS_SCHEDULE_1F1B, unit, pb, 0, 0};
    prs_eval *ev;
    prs_error err;
    assert_int_equal(prs_eval_open(p, &pipe, &ev, &err), 0);
    int plan[16];
    for (int i = 0; i < prs_eval_nops(ev); i++)
        plan[i] = 1000;
    if (prs_eval_power(ev, plan, window, out, steps, n, &err)) fail_msg("%s", err.msg);
    prs_eval_close(ev);
}

static double peak(const prs_power_step *s, size_t n, double w, double *start)
{
    double pk = -1;
    prs_error err;
    assert_int_equal(prs_power_peak(s, n, w, &pk, start, &err), 0);
    return pk;
}

/* One GPU: F 1 s at 100 W, then B 2 s at 150 W; T = 3 s, E = 400 J. */
static void test_one_gpu(void **state)
{
    (void)state;
    prs_profile *p = prs_profile_new();
    add_stage(p, 0, 1.0, 100, 2.0, 300);
    prs_plan_power pw;
    prs_power_step *s = NULL;
    size_t n = 0;
    power_of(p, 1, 0.5, 50, 1.0, &pw, &s, &n);
    assert_int_equal(n, 2);
    assert_true(s[0].start_s == 0 && s[0].end_s == 1 && s[0].power_w == 100);
    assert_true(s[1].start_s == 1 && s[1].end_s == 3 && s[1].power_w == 150);
    assert_float_equal(pw.time_s, 3, 1e-12);
    assert_float_equal(pw.energy_j, 400, 1e-9);
    assert_float_equal(pw.avg_power_w, 400.0 / 3, 1e-9);
    assert_float_equal(pw.peak_power_w, 150, 1e-9);
    assert_float_equal(pw.max_power_w, 150, 1e-9);
    /* 2.5 s: all of B and half a second of the next iteration's F (wrapping round), 350 J */
    assert_float_equal(peak(s, n, 2.5, NULL), 350 / 2.5, 1e-9);
    /* one whole iteration, whichever start */
    assert_float_equal(peak(s, n, 3.0, NULL), 400.0 / 3, 1e-9);
    /* 4 s: an iteration and the busiest second (150 J) */
    assert_float_equal(peak(s, n, 4.0, NULL), 550 / 4.0, 1e-9);
    /* 6.5 s: two iterations and half a second of B */
    assert_float_equal(peak(s, n, 6.5, NULL), 875 / 6.5, 1e-9);
    free(s);
    prs_profile_free(p);
}

/* Two GPUs, blocking 50 W: stage 0 F 1 s/100 J, B 2 s/300 J; stage 1 F 1 s/120 J, B 2 s/360 J.
 * 1F1B, one microbatch: F0 [0,1) F1 [1,2) B1 [2,4) B0 [4,6). Power: 150, 170, 230 (2 s),
 * 200 (2 s) W; E = 880 J + 50 W * (12 - 6) s = 1180 J. */
static void test_two_gpus(void **state)
{
    (void)state;
    prs_profile *p = prs_profile_new();
    add_stage(p, 0, 1.0, 100, 2.0, 300);
    add_stage(p, 1, 1.0, 120, 2.0, 360);
    prs_plan_power pw;
    prs_power_step *s = NULL;
    size_t n = 0;
    power_of(p, 2, 0.25, 50, 1.0, &pw, &s, &n);
    const double want[4][3] = {{0, 1, 150}, {1, 2, 170}, {2, 4, 230}, {4, 6, 200}};
    assert_int_equal(n, 4);
    for (size_t i = 0; i < 4; i++) {
        assert_float_equal(s[i].start_s, want[i][0], 1e-12);
        assert_float_equal(s[i].end_s, want[i][1], 1e-12);
        assert_float_equal(s[i].power_w, want[i][2], 1e-9);
    }
    assert_float_equal(pw.energy_j, 1180, 1e-9);
    assert_float_equal(pw.avg_power_w, 1180 / 6.0, 1e-9);
    assert_float_equal(pw.peak_power_w, 230, 1e-9);
    assert_true(pw.peak_start_s >= 2 - 1e-12 && pw.peak_start_s <= 3 + 1e-12);
    double at = -1;
    /* 3 s: [2, 5] = 460 + 200 J */
    assert_float_equal(peak(s, n, 3.0, &at), 220, 1e-9);
    assert_float_equal(at, 2, 1e-12);
    /* 2.5 s: [2, 4.5] = 460 + 100 J */
    assert_float_equal(peak(s, n, 2.5, NULL), 224, 1e-9);
    /* 7 s: an iteration and the busiest second, 1180 + 230 J */
    assert_float_equal(peak(s, n, 7.0, NULL), 1410 / 7.0, 1e-9);
    /* 5 s: [1, 6] = 170 + 460 + 400 J; the windows wrapping round hold less ([2, 7]: 1010 J) */
    assert_float_equal(peak(s, n, 5.0, &at), 206, 1e-9);
    assert_float_equal(at, 1, 1e-12);
    /* a window far shorter than a step: that step's power, not a rounding of the energies */
    for (double w = 1e-10; w > 1e-305; w *= 1e-7) {
        assert_float_equal(peak(s, n, w, &at), 230, 1e-12);
        assert_true(at >= 2 && at <= 4);
    }
    /* 1e306 s: iterations back to back, the average (whole * E overflowed to inf) */
    assert_float_equal(peak(s, n, 1e306, NULL), 1180 / 6.0, 1e-9);
    free(s);
    prs_profile_free(p);
}

/* Unit 1 s: F (0.5 s, 50 J) is 0 units long, an impulse at 0; B 2 s at 150 W. T = 2 s. */
static void test_impulse(void **state)
{
    (void)state;
    prs_profile *p = prs_profile_new();
    add_stage(p, 0, 0.5, 50, 2.0, 300);
    prs_plan_power pw;
    prs_power_step *s = NULL;
    size_t n = 0;
    power_of(p, 1, 1.0, 50, 1.0, &pw, &s, &n);
    assert_int_equal(n, 2);
    assert_true(s[0].start_s == 0 && s[0].end_s == 0 && s[0].energy_j == 50);
    assert_true(s[1].start_s == 0 && s[1].end_s == 2 && s[1].power_w == 150);
    assert_float_equal(pw.energy_j, 350, 1e-9);
    assert_float_equal(pw.peak_power_w, 200, 1e-9); /* [0, 1]: 50 + 150 J */
    assert_float_equal(pw.max_power_w, 150, 1e-9);
    /* [0, 0.5] holds the impulse at 0, and [1.5, 2] reaches the next iteration's at 2 */
    double at = -1;
    assert_float_equal(peak(s, n, 0.5, &at), (50 + 75) / 0.5, 1e-9);
    assert_true(at == 0 || fabs(at - 1.5) < 1e-12);
    /* the impulse over a short window: its energy over the window, plus the step's power */
    assert_float_equal(peak(s, n, 1e-9, NULL), 50 / 1e-9 + 150, 1e-12 * (50 / 1e-9));
    /* ... until that is more watts than a double holds: an error, not inf */
    double pk = -1;
    prs_error err;
    assert_int_equal(prs_power_peak(s, n, 1e-310, &pk, NULL, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "window"));
    assert_true(pk == -1);
    free(s);
    prs_profile_free(p);
}

/* Window energy by direct integration of the steps, for the brute-force check (no impulses). */
static double direct(const prs_power_step *s, size_t n, double a, double w)
{
    double T = s[n - 1].end_s, e = 0;
    for (long k = (long)floor(a / T) - 1; (double)k * T < a + w; k++)
        for (size_t i = 0; i < n; i++) {
            double lo = fmax(a, s[i].start_s + (double)k * T);
            double hi = fmin(a + w, s[i].end_s + (double)k * T);
            if (hi > lo) e += s[i].power_w * (hi - lo);
        }
    return e;
}

static void test_synthetic_against_brute_force(void **state)
{
    (void)state;
    prs_synth_opts o;
    prs_synth_opts_init(&o);
    o.stages = 4;
    prs_profile *p = NULL;
    prs_error err;
    assert_int_equal(prs_synth_profile(&o, &p, &err), 0);
    prs_pipeline pipe = {4, 6, PRS_SCHEDULE_1F1B, 0.001, 83.64, 0, 0};
    prs_eval *ev;
    assert_int_equal(prs_eval_open(p, &pipe, &ev, &err), 0);
    int nops = prs_eval_nops(ev);
    int *plan = malloc(sizeof *plan * (size_t)nops);
    assert_non_null(plan);
    for (int op = 0; op < nops; op++) /* mixed clocks */
        plan[op] = prs_eval_clock_at(ev, op, (op * 7) % prs_eval_nclocks(ev, op)).freq_mhz;
    prs_plan_power pw;
    prs_power_step *s = NULL;
    size_t n = 0;
    assert_int_equal(prs_eval_power(ev, plan, 0.05, &pw, &s, &n, &err), 0);
    assert_true(n <= 4 * (size_t)nops + 1);
    double sum = 0, T = pw.time_s;
    for (size_t i = 0; i < n; i++)
        sum += s[i].energy_j;
    assert_float_equal(sum, pw.energy_j, 1e-9 * pw.energy_j);
    double t, e;
    assert_int_equal(prs_eval_run(ev, plan, NULL, &t, &e, &err), 0);
    assert_true(t == T && e == pw.energy_j);
    const double frac[] = {0.013, 0.1, 0.37, 0.5, 0.99, 1.0, 1.3, 2.75, 40};
    for (size_t k = 0; k < sizeof frac / sizeof frac[0]; k++) {
        double w = frac[k] * T, at = -1, pk = peak(s, n, w, &at);
        assert_float_equal(direct(s, n, at, w) / w, pk, 1e-9 * pk);
        double brute = 0;
        for (int i = 0; i < 2000; i++)
            brute = fmax(brute, direct(s, n, T * i / 2000.0, w) / w);
        assert_true(pk >= brute - 1e-9 * pk);
        assert_true(pk <= brute + 2 * pw.max_power_w * (T / 2000) / w + 1e-9);
        assert_true(pk >= pw.avg_power_w - 1e-9 && pk <= pw.max_power_w + 1e-9);
    }
    assert_float_equal(peak(s, n, 1e4 * T, NULL), pw.avg_power_w, 1e-3 * pw.avg_power_w);
    /* shorter than any step: the largest step; far longer than T: the average */
    const double tiny[] = {1e-9, 1e-16, 1e-20, 1e-300}, huge[] = {1e12, 1e306, DBL_MAX};
    for (size_t k = 0; k < 4; k++)
        assert_float_equal(peak(s, n, tiny[k], NULL), pw.max_power_w, 1e-12 * pw.max_power_w);
    for (size_t k = 0; k < 3; k++)
        assert_float_equal(peak(s, n, huge[k], NULL), pw.avg_power_w, 1e-9 * pw.avg_power_w);
    free(s);
    free(plan);
    prs_eval_close(ev);
    prs_profile_free(p);
}

static void test_bad_input(void **state)
{
    (void)state;
    prs_power_step s[2] = {{0, 1, 10, 10}, {1.5, 2, 10, 5}};
    double pk;
    prs_error err;
    assert_int_equal(prs_power_peak(s, 2, 1.0, &pk, NULL, &err), PRS_EINVAL); /* gap */
    s[1].start_s = 1;
    assert_int_equal(prs_power_peak(s, 2, 1.0, &pk, NULL, &err), 0);
    assert_int_equal(prs_power_peak(s, 2, 0, &pk, NULL, &err), PRS_EINVAL);
    assert_int_equal(prs_power_peak(s, 2, NAN, &pk, NULL, &err), PRS_EINVAL);
    assert_int_equal(prs_power_peak(s, 2, INFINITY, &pk, NULL, &err), PRS_EINVAL);
    assert_int_equal(prs_power_peak(s, 0, 1.0, &pk, NULL, &err), PRS_EINVAL);
    s[0].power_w = -1;
    assert_int_equal(prs_power_peak(s, 2, 1.0, &pk, NULL, &err), PRS_EINVAL);
    prs_profile *p = prs_profile_new();
    add_stage(p, 0, 1.0, 100, 2.0, 300);
    prs_pipeline pipe = {1, 1, PRS_SCHEDULE_1F1B, 0.5, 50, 0, 0};
    prs_plan_power pw;
    int plan[2] = {1000, 1000};
    assert_int_equal(prs_plan_power_of(p, &pipe, plan, -1, &pw, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "window"));
    plan[1] = 900;
    assert_int_equal(prs_plan_power_of(p, &pipe, plan, 1, &pw, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "900 MHz"));
    prs_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_gpu),   cmocka_unit_test(test_two_gpus),
        cmocka_unit_test(test_impulse),   cmocka_unit_test(test_synthetic_against_brute_force),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
