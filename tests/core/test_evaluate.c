/* The evaluation context (perseus/evaluate.h) and the base helpers around it:
 *   - on synthetic profiles of every schedule: a context evaluates many plans with the same
 *     figures and timeline as the one-shot prs_evaluate_plan / prs_plan_timeline;
 *   - clocks: per-computation lists ascending, find/clock_at agree, clocks common to every
 *     computation; windows are at least the duration and equal to it on a critical path;
 *   - errors: an unprofiled clock is named once, the same text from every entry point; NULL
 *     arguments and a bad pipeline fail at open;
 *   - prs_mono_s / prs_mono_ns never go back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "perseus/clock.h"
#include "perseus/evaluate.h"
#include "perseus/synth.h"

static prs_profile *synth(int stages)
{
    prs_synth_opts o;
    prs_synth_opts_init(&o);
    o.stages = stages;
    o.f_step_mhz = 90;
    o.f_min_mhz = 1410 - 6 * 90;
    prs_profile *p = NULL;
    prs_error err;
    if (prs_synth_profile(&o, &p, &err)) fail_msg("synth: %s", err.msg);
    return p;
}

static prs_pipeline pipeline(prs_schedule sched, int stages, int mb, int virt)
{
    prs_pipeline pp = {stages, mb, sched, 0.001, 83.64, virt, 0};
    return pp;
}

/* A plan with clock index (op * 7 + salt) mod nclocks for every computation. */
static void mixed_plan(const prs_eval *ev, int salt, int *plan)
{
    for (int op = 0; op < prs_eval_nops(ev); op++)
        plan[op] = prs_eval_clock_at(ev, op, (op * 7 + salt) % prs_eval_nclocks(ev, op)).freq_mhz;
}

static void same_as_one_shot(prs_schedule sched, int stages, int mb, int virt)
{
    prs_pipeline pp = pipeline(sched, stages, mb, virt);
    prs_profile *p = synth(prs_pipeline_chunks(&pp));
    prs_eval *ev;
    prs_error err;
    assert_int_equal(prs_eval_open(p, &pp, &ev, &err), 0);
    int nops = prs_eval_nops(ev);
    assert_int_equal(nops, stages * prs_ops_per_stage(&pp));
    int *plan = malloc(sizeof *plan * (size_t)nops);
    prs_timeline_op *a = malloc(sizeof *a * (size_t)nops), *b = malloc(sizeof *b * (size_t)nops);
    assert_non_null(plan);
    for (int salt = 0; salt < 5; salt++) {
        mixed_plan(ev, salt, plan);
        double t1, e1, t2, e2;
        assert_int_equal(prs_eval_run(ev, plan, a, &t1, &e1, &err), 0);
        assert_int_equal(prs_plan_timeline(p, &pp, plan, b, &t2, &e2, &err), 0);
        assert_true(t1 == t2 && e1 == e2);
        assert_memory_equal(a, b, sizeof *a * (size_t)nops);
        assert_int_equal(prs_evaluate_plan(p, &pp, plan, &t2, &e2, &err), 0);
        assert_true(t1 == t2 && e1 == e2);
    }
    free(plan);
    free(a);
    free(b);
    prs_eval_close(ev);
    prs_profile_free(p);
}

static void test_same_as_one_shot(void **state)
{
    (void)state;
    same_as_one_shot(PRS_SCHEDULE_1F1B, 4, 6, 0);
    same_as_one_shot(PRS_SCHEDULE_GPIPE, 3, 4, 0);
    same_as_one_shot(PRS_SCHEDULE_INTERLEAVED, 2, 4, 2);
}

static void test_clocks_and_windows(void **state)
{
    (void)state;
    prs_pipeline pp = pipeline(PRS_SCHEDULE_1F1B, 4, 8, 0);
    prs_profile *p = synth(4);
    prs_eval *ev;
    assert_int_equal(prs_eval_open(p, &pp, &ev, NULL), 0);
    int nops = prs_eval_nops(ev);
    for (int op = 0; op < nops; op++) {
        int n = prs_eval_nclocks(ev, op);
        assert_int_equal(n, 7);
        for (int i = 0; i < n; i++) {
            prs_eval_clock c = prs_eval_clock_at(ev, op, i);
            assert_int_equal(prs_eval_find(ev, op, c.freq_mhz), i);
            assert_true(c.units >= 0 && c.time_s > 0 && c.energy_j > 0);
            if (i) assert_true(c.freq_mhz > prs_eval_clock_at(ev, op, i - 1).freq_mhz);
        }
        assert_int_equal(prs_eval_find(ev, op, 1411), -1);
    }
    int common[16];
    assert_int_equal(prs_eval_common_clocks(ev, common, 16), 7);
    assert_int_equal(common[0], 1410 - 6 * 90);
    assert_int_equal(common[6], 1410);
    assert_int_equal(prs_eval_common_clocks(ev, common, 2), 7); /* count beyond cap */

    int *plan = malloc(sizeof *plan * (size_t)nops);
    long *win = malloc(sizeof *win * (size_t)nops);
    mixed_plan(ev, 3, plan);
    assert_int_equal(prs_eval_windows(ev, plan, win, NULL), 0);
    int critical = 0;
    for (int op = 0; op < nops; op++) {
        long d = prs_eval_clock_at(ev, op, prs_eval_find(ev, op, plan[op])).units;
        assert_true(win[op] >= d);
        critical += win[op] == d;
    }
    assert_true(critical > 0); /* some computation is on the critical path */
    free(plan);
    free(win);
    prs_eval_close(ev);
    prs_profile_free(p);
}

static void test_errors(void **state)
{
    (void)state;
    prs_pipeline pp = pipeline(PRS_SCHEDULE_1F1B, 2, 2, 0);
    prs_profile *p = synth(2);
    prs_eval *ev = (prs_eval *)&pp; /* must be reset to NULL on failure */
    prs_error err;
    assert_int_equal(prs_eval_open(NULL, &pp, &ev, &err), PRS_EINVAL);
    assert_null(ev);
    prs_pipeline bad = pp;
    bad.stages = 0;
    assert_int_equal(prs_eval_open(p, &bad, &ev, &err), PRS_EINVAL);
    bad = pp;
    bad.stages = 3; /* the profile has 2 stages */
    assert_int_not_equal(prs_eval_open(p, &bad, &ev, &err), 0);

    assert_int_equal(prs_eval_open(p, &pp, &ev, &err), 0);
    int plan[8], idx[8];
    for (int op = 0; op < 8; op++)
        plan[op] = 1410;
    assert_int_equal(prs_eval_lookup(ev, plan, idx, &err), 0);
    for (int op = 0; op < 8; op++)
        assert_int_equal(prs_eval_clock_at(ev, op, idx[op]).freq_mhz, 1410);
    plan[5] = 1405; /* GPU 1 (last stage) runs F0 B0 F1 B1: position 1 is a backward */
    const char *want = "plan: stage 1 position 1 runs at 1405 MHz, which the profile has no row "
                       "for (stage 1 backward)";
    double t, e;
    long win[8];
    assert_int_equal(prs_eval_lookup(ev, plan, idx, &err), PRS_EINVAL);
    assert_string_equal(err.msg, want);
    memset(&err, 0, sizeof err);
    assert_int_equal(prs_eval_run(ev, plan, NULL, &t, &e, &err), PRS_EINVAL);
    assert_string_equal(err.msg, want);
    memset(&err, 0, sizeof err);
    assert_int_equal(prs_eval_windows(ev, plan, win, &err), PRS_EINVAL);
    assert_string_equal(err.msg, want);
    memset(&err, 0, sizeof err);
    assert_int_equal(prs_evaluate_plan(p, &pp, plan, &t, &e, &err), PRS_EINVAL);
    assert_string_equal(err.msg, want);
    prs_eval_close(ev);
    prs_eval_close(NULL);
    prs_profile_free(p);
}

static void test_mono_clock(void **state)
{
    (void)state;
    double s0 = prs_mono_s();
    int64_t n0 = prs_mono_ns();
    for (int i = 0; i < 1000; i++) {
        double s = prs_mono_s();
        int64_t n = prs_mono_ns();
        assert_true(s >= s0 && n >= n0);
        s0 = s;
        n0 = n;
    }
    assert_true(s0 > 0 && n0 > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_as_one_shot),
        cmocka_unit_test(test_clocks_and_windows),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_mono_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
