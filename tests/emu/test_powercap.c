/* The fastest plan under a power cap and the baselines at the same cap (perseus/powercap.h),
 * on a one-GPU pipeline worked out by hand, with a frontier built here: two clocks, F (1 s at
 * 100 W or 2 s at 40 W) then B (2 s at 150 W or 4 s at 60 W):
 *   plan          T (s)  E (J)  avg (W)  peak over 1 s (W)
 *   all-max       3      400    133.33   150
 *   F500 B1000    4      380     95      150
 *   F1000 B500    5      340     68      100
 *   all-min       6      320     53.33    60
 * The per-GPU power limit keeps a computation at 1000 MHz only where it draws no more than
 * the limit. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "frontier_int.h"
#include "perseus/powercap.h"

static prs_profile *profile(void)
{
    const prs_profile_row rows[] = {{0, PRS_FORWARD, 1000, 1.0, 100, 0},
                                    {0, PRS_BACKWARD, 1000, 2.0, 300, 0},
                                    {0, PRS_FORWARD, 500, 2.0, 80, 0},
                                    {0, PRS_BACKWARD, 500, 4.0, 240, 0}};
    prs_profile *p = prs_profile_new();
    prs_error err;
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(prs_profile_add(p, &rows[i], &err), 0);
    return p;
}

/* Points slowest first: all-min, F1000 B500, F500 B1000, all-max. */
static prs_frontier *frontier(void)
{
    prs_pipeline pipe = {1, 1, PRS_SCHEDULE_1F1B, 0.5, 50, 0, 0};
    int base[2] = {500, 500};
    prs_frontier *f = prs__frontier_new(&pipe, PRS_COST_HULL, base);
    assert_non_null(f);
    const int ops[2] = {0, 1}, all_min[2] = {500, 500}, f_hi[1] = {1000}, swap[2] = {500, 1000},
              all_max[1] = {1000};
    prs_frontier_point pt = {12, 6, 320, 0, 6, 320, 0};
    assert_int_equal(prs__frontier_push(f, &pt, ops, all_min, 2), 0);
    pt = (prs_frontier_point){10, 5, 340, 0, 5, 340, 0};
    assert_int_equal(prs__frontier_push(f, &pt, ops, f_hi, 1), 0);
    pt = (prs_frontier_point){8, 4, 380, 0, 4, 380, 0};
    assert_int_equal(prs__frontier_push(f, &pt, ops, swap, 2), 0);
    pt = (prs_frontier_point){6, 3, 400, 0, 3, 400, 0};
    assert_int_equal(prs__frontier_push(f, &pt, ops, all_max, 1), 0);
    return f;
}

typedef struct fixture {
    prs_profile *p;
    prs_frontier *f;
    prs_powercap *pc;
} fixture;

static int setup(void **state)
{
    fixture *x = calloc(1, sizeof *x);
    prs_error err;
    x->p = profile();
    x->f = frontier();
    if (prs_powercap_open(x->p, x->f, 1, 1.0, &x->pc, &err)) fail_msg("%s", err.msg);
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    fixture *x = *state;
    prs_powercap_free(x->pc);
    prs_frontier_free(x->f);
    prs_profile_free(x->p);
    free(x);
    return 0;
}

static prs_cap_result choose(prs_powercap *pc, double cap, prs_cap_on on)
{
    prs_cap_result r;
    prs_error err;
    if (prs_powercap_choose(pc, cap, on, &r, &err)) fail_msg("%s", err.msg);
    return r;
}

static void test_range(void **state)
{
    fixture *x = *state;
    double hi, lo;
    prs_powercap_range(x->pc, PRS_CAP_AVG, &hi, &lo);
    assert_float_equal(hi, 400 / 3.0, 1e-9);
    assert_float_equal(lo, 320 / 6.0, 1e-9);
    prs_powercap_range(x->pc, PRS_CAP_PEAK, &hi, &lo);
    assert_float_equal(hi, 150, 1e-9);
    assert_float_equal(lo, 60, 1e-9);
}

static void test_cap_above_all_max(void **state)
{
    fixture *x = *state;
    prs_cap_result r = choose(x->pc, 140, PRS_CAP_AVG);
    const prs_cap_choice *p = &r.s[PRS_CAP_PERSEUS], *u = &r.s[PRS_CAP_UNIFORM],
                         *l = &r.s[PRS_CAP_POWER_LIMIT];
    assert_true(p->feasible && u->feasible && l->feasible);
    assert_int_equal(p->index, 3);
    assert_float_equal(p->time_s, 3, 1e-12);
    assert_int_equal(u->freq_mhz, 1000);
    /* a 140 W limit holds F (100 W) at 1000 MHz, not B (150 W) */
    assert_float_equal(l->gpu_limit_w, 140, 1e-12);
    assert_float_equal(l->time_s, 5, 1e-12);
    assert_float_equal(l->energy_j, 340, 1e-9);
    assert_float_equal(prs_cap_ratio(p, u), 1, 1e-12);
    assert_float_equal(prs_cap_ratio(p, l), 5 / 3.0, 1e-12);
}

static void test_cap_on_average(void **state)
{
    fixture *x = *state;
    prs_cap_result r = choose(x->pc, 100, PRS_CAP_AVG);
    const prs_cap_choice *p = &r.s[PRS_CAP_PERSEUS], *u = &r.s[PRS_CAP_UNIFORM],
                         *l = &r.s[PRS_CAP_POWER_LIMIT];
    assert_int_equal(p->index, 2); /* 95 W */
    assert_float_equal(p->time_s, 4, 1e-12);
    assert_float_equal(p->throughput_per_s, 0.25, 1e-12);
    assert_float_equal(p->avg_power_w, 95, 1e-9);
    assert_float_equal(p->peak_power_w, 150, 1e-9);
    assert_int_equal(u->freq_mhz, 500);
    assert_float_equal(u->time_s, 6, 1e-12);
    assert_float_equal(l->time_s, 5, 1e-12);
    assert_float_equal(prs_cap_ratio(p, u), 1.5, 1e-12);
    assert_float_equal(prs_cap_ratio(p, l), 1.25, 1e-12);
    int clocks[2];
    prs_error err;
    assert_int_equal(prs_powercap_plan(x->pc, &r, PRS_CAP_PERSEUS, clocks, &err), 0);
    assert_true(clocks[0] == 500 && clocks[1] == 1000);
    assert_int_equal(prs_powercap_plan(x->pc, &r, PRS_CAP_POWER_LIMIT, clocks, &err), 0);
    assert_true(clocks[0] == 1000 && clocks[1] == 500);
}

static void test_cap_on_peak(void **state)
{
    fixture *x = *state;
    prs_cap_result r = choose(x->pc, 100, PRS_CAP_PEAK);
    const prs_cap_choice *p = &r.s[PRS_CAP_PERSEUS];
    assert_int_equal(p->index, 1); /* F500 B1000 peaks at 150 W over 1 s */
    assert_float_equal(p->peak_power_w, 100, 1e-9);
    assert_float_equal(prs_cap_ratio(p, &r.s[PRS_CAP_UNIFORM]), 1.2, 1e-12);
    assert_float_equal(prs_cap_ratio(p, &r.s[PRS_CAP_POWER_LIMIT]), 1, 1e-12);
}

static void test_cap_below_every_plan(void **state)
{
    fixture *x = *state;
    prs_cap_result r = choose(x->pc, 50, PRS_CAP_AVG);
    for (int s = 0; s < PRS_CAP_NSTRATEGIES; s++)
        assert_false(r.s[s].feasible);
    assert_true(isnan(prs_cap_ratio(&r.s[0], &r.s[1])));
    /* the best tries: the least power */
    assert_float_equal(r.s[PRS_CAP_PERSEUS].avg_power_w, 320 / 6.0, 1e-9);
    assert_float_equal(r.s[PRS_CAP_POWER_LIMIT].time_s, 6, 1e-12);
}

static void test_tp_scales_power(void **state)
{
    fixture *x = *state;
    prs_powercap *pc2;
    prs_error err;
    assert_int_equal(prs_powercap_open(x->p, x->f, 2, 1.0, &pc2, &err), 0);
    prs_cap_result r = choose(pc2, 200, PRS_CAP_AVG);
    assert_int_equal(r.s[PRS_CAP_PERSEUS].index, 2);
    assert_float_equal(r.s[PRS_CAP_PERSEUS].energy_j, 760, 1e-9);
    assert_float_equal(r.s[PRS_CAP_POWER_LIMIT].gpu_limit_w, 100, 1e-12);
    assert_float_equal(r.s[PRS_CAP_POWER_LIMIT].time_s, 5, 1e-12);
    prs_powercap_free(pc2);
}

static void test_bad_input(void **state)
{
    fixture *x = *state;
    prs_cap_result r;
    prs_error err;
    prs_powercap *pc2 = NULL;
    assert_int_equal(prs_powercap_choose(x->pc, 0, PRS_CAP_AVG, &r, &err), PRS_EINVAL);
    assert_int_equal(prs_powercap_choose(x->pc, NAN, PRS_CAP_AVG, &r, &err), PRS_EINVAL);
    assert_int_equal(prs_powercap_open(x->p, x->f, 0, 1.0, &pc2, &err), PRS_EINVAL);
    assert_int_equal(prs_powercap_open(x->p, x->f, 1, -1, &pc2, &err), PRS_EINVAL);
    assert_null(pc2);
    prs_cap_on on;
    assert_int_equal(prs_cap_on_parse("peak", &on), 0);
    assert_int_equal(on, PRS_CAP_PEAK);
    assert_int_equal(prs_cap_on_parse("max", &on), PRS_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cap_above_all_max, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cap_on_average, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cap_on_peak, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cap_below_every_plan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tp_scales_power, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
