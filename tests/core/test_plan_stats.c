/* prs_plan_counted (planner.c): the counters of a planning run agree with the frontier it made
 * and with each other, on a small synthetic pipeline (no shared data needed):
 *   - the frontier is the one prs_plan makes, point for point;
 *   - raw points = the raw frontier's length; every step emits at least one point;
 *   - exp: one point per step, nothing repeated, no cut kept, no reclaiming;
 *   - hull: repeated steps happen, reclaimings at most once per evaluation; roundings along the
 *     relaxed schedule only for the clean frontier, at most one per raw point; on the SOSP'24 GPT-3
 *     profile (skipped without the shared data) kept cuts happen too;
 *   - max flow: every level search reaches s at least, a cut search only follows a solve;
 *   - a refused run leaves the counters at zero. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "perseus/planner.h"
#include "paper.h"
#include "perseus/synth.h"
#include "skips.h"

static prs_profile *profile(void)
{
    prs_synth_opts so;
    prs_synth_opts_init(&so);
    so.stages = 4;
    prs_profile *p = NULL;
    assert_int_equal(prs_synth_profile(&so, &p, NULL), 0);
    return p;
}

static void opts_for(prs_plan_opts *o, prs_cost_model model)
{
    prs_plan_opts_default(o);
    o->cost_model = model;
    o->frontier = PRS_FRONTIER_RAW;
    o->pipe.stages = 4;
    o->pipe.microbatches = 8;
    o->pipe.unit_time_s = 0.0005;
    o->pipe.blocking_power_w = 80;
}

/* Plan with and without counting: the same frontier; the counters into *st. */
static size_t plan_both(const prs_profile *p, const prs_plan_opts *o, prs_plan_stats *st)
{
    prs_frontier *a = NULL, *b = NULL;
    assert_int_equal(prs_plan(p, o, &a, NULL), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(prs_plan_counted(p, o, &b, st, NULL), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* the picks take time, within the run's on each of its threads (at most 16) */
    double run_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    int one = o->threads == 1 || o->cost_model == PRS_COST_EXP; /* exp picks on the caller's */
    assert_true(st->pick_s > 0 && st->pick_s <= run_s * (one ? 1.0 : 16.0));
    size_t n = prs_frontier_size(a);
    assert_int_equal(prs_frontier_size(b), n);
    for (size_t k = 0; k < n; k++)
        assert_memory_equal(prs_frontier_point_at(a, k), prs_frontier_point_at(b, k),
                            sizeof(prs_frontier_point));
    prs_frontier_free(a);
    prs_frontier_free(b);
    return n;
}

static void common_checks(const prs_plan_stats *st, size_t n)
{
    assert_int_equal(st->points, (long)n);
    assert_true(st->steps >= 1 && st->steps <= st->points);
    assert_true(st->evaluations >= 1 && st->evaluations <= st->points);
    assert_true(st->cuts + st->cuts_kept >= st->steps); /* every step has a cut */
    assert_true(st->level_searches >= st->cuts);        /* one that fails to reach t, at least */
    assert_true(st->level_nodes >= st->level_searches); /* each reaches s */
    assert_true(st->cut_searches <= st->cuts);
    assert_true(st->cut_nodes >= st->cut_searches);
    assert_true(st->same_ops < st->steps);
}

/* The synthetic pipeline planned with model, counted and checked, into *st. */
static void counted(prs_cost_model model, prs_plan_stats *st)
{
    prs_profile *p = profile();
    prs_plan_opts o;
    opts_for(&o, model);
    size_t n = plan_both(p, &o, st);
    common_checks(st, n);
    prs_profile_free(p);
}

static void test_exp(void **state)
{
    (void)state;
    prs_plan_stats st;
    counted(PRS_COST_EXP, &st);
    assert_int_equal(st.steps, st.points);
    assert_int_equal(st.repeated, 0);
    assert_int_equal(st.cuts_kept, 0);
    assert_int_equal(st.reclaims, 0);
    assert_int_equal(st.reclaim_moves, 0);
    assert_int_equal(st.tracks, 0);
}

static void test_hull(void **state)
{
    (void)state;
    prs_plan_stats st;
    counted(PRS_COST_HULL, &st);
    assert_true(st.repeated > 0 && st.repeated <= st.steps);
    assert_true(st.steps < st.points); /* repeated steps emit several points */
    assert_true(st.cuts_kept <= st.steps);
    assert_true(st.same_ops > 0); /* a step and the next often change the same computations */
    assert_true(st.reclaims > 0 && st.reclaims <= st.evaluations);
    assert_true(st.reclaim_moves >= st.reclaims);
    assert_int_equal(st.tracks, 0); /* the raw frontier has no roundings along the schedule */
}

/* hull's clean frontier also rounds relaxed plans along their schedule (not every one: not
 * where the plan is certified), at most once per raw point; the walk and its raw points are
 * those of the raw frontier. */
static void test_hull_clean(void **state)
{
    (void)state;
    prs_profile *p = profile();
    prs_plan_opts o;
    opts_for(&o, PRS_COST_HULL);
    o.frontier = PRS_FRONTIER_CLEAN;
    prs_plan_stats raw, clean;
    prs_frontier *f = NULL;
    assert_int_equal(prs_plan_counted(p, &o, &f, &clean, NULL), 0);
    prs_frontier_free(f);
    o.frontier = PRS_FRONTIER_RAW;
    assert_int_equal(prs_plan_counted(p, &o, &f, &raw, NULL), 0);
    prs_frontier_free(f);
    prs_profile_free(p);
    assert_true(clean.tracks > 0 && clean.tracks <= raw.points); /* one per raw point at most */
    assert_int_equal(clean.points, raw.points);                  /* points: the raw frontier's */
    assert_int_equal(clean.steps, raw.steps);
}

/* GPT-3's profile has hull segments several units long: steps meet the last solve's problem. */
static void test_hull_paper(void **state)
{
    (void)state;
    prs_profile *p = prs_paper_profile("gpt3-175b");
    if (!p) prs_skip_input("SOSP'24 profiles not found");
    prs_plan_opts o;
    opts_for(&o, PRS_COST_HULL);
    o.pipe.stages = 8;
    o.pipe.microbatches = 12;
    o.pipe.unit_time_s = 0.001;
    o.pipe.blocking_power_w = 83.64;
    prs_plan_stats st;
    size_t n = plan_both(p, &o, &st);
    common_checks(&st, n);
    assert_true(st.cuts_kept > 0 && st.cuts_kept <= st.steps);
    assert_true(st.repeated > 0);
    prs_profile_free(p);
}

static void test_refused(void **state)
{
    (void)state;
    prs_profile *p = profile();
    prs_plan_opts o;
    opts_for(&o, PRS_COST_HULL);
    o.pipe.unit_time_s = -1;
    prs_plan_stats st;
    memset(&st, 0xff, sizeof st);
    prs_frontier *f = NULL;
    prs_error err = {0, ""};
    assert_int_equal(prs_plan_counted(p, &o, &f, &st, &err), PRS_EINVAL);
    assert_null(f);
    prs_plan_stats zero;
    memset(&zero, 0, sizeof zero);
    assert_memory_equal(&st, &zero, sizeof st);
    prs_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp),        cmocka_unit_test(test_hull),
        cmocka_unit_test(test_hull_clean), cmocka_unit_test(test_hull_paper),
        cmocka_unit_test(test_refused),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
