/* Clock changes that cost time (docs/planner.md, 'Clock changes'):
 *   - counting: a GPU's changes are cyclic (its first computation against its last);
 *   - evaluation: a computation after a change takes its time plus the cost, quantized, and the
 *     change's time is spent at blocking power; cost 0 gives the figures of before;
 *   - the merge pass replaces a plan that alternates clocks by a steadier one, never slower nor
 *     costlier;
 *   - the planner: every point's evaluated figures are its plan's with the costs, and a
 *     frontier planned with a cost makes fewer changes than one planned without; at cost 0 the
 *     frontier is the one planned before the option (same plans, same figures);
 *   - plans.prs keeps the cost; the passes can be canceled through the progress callback; bad
 *     costs are refused, naming the field. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plan_int.h"
#include "perseus/limits.h"
#include "perseus/synth.h"

/* One GPU, 4 microbatches (1F1B: F0 B0 F1 B1 ... F3 B3), unit 1 ms, 10 W blocking, two clocks.
 * Slowing a backward saves more per unit than slowing a forward, so the planner's plans at 136
 * ms run every forward at 1400 MHz and every backward at 1000 MHz: 8 changes an iteration. */
static prs_profile *two_clocks(void)
{
    static const prs_profile_row rows[] = {{0, PRS_FORWARD, 1400, 0.0100, 2.0, 0},
                                           {0, PRS_FORWARD, 1000, 0.0120, 1.5, 0},
                                           {0, PRS_BACKWARD, 1400, 0.0200, 4.0, 0},
                                           {0, PRS_BACKWARD, 1000, 0.0240, 2.8, 0}};
    prs_profile *p = prs_profile_new();
    prs_error err;
    assert_non_null(p);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        assert_int_equal(prs_profile_add(p, &rows[i], &err), 0);
    return p;
}

static prs_pipeline one_gpu(double cost_s)
{
    prs_pipeline pipe = {1, 4, PRS_SCHEDULE_1F1B, 0.001, 10, 0, cost_s};
    return pipe;
}

/* F at f, B at b. */
static void fb_plan(int f, int b, int *plan)
{
    for (int i = 0; i < 8; i++)
        plan[i] = i % 2 ? b : f;
}

static void test_count(void **state)
{
    (void)state;
    prs_pipeline pipe = one_gpu(0);
    int plan[8];
    fb_plan(1400, 1000, plan);
    assert_int_equal(prs_plan_count_changes(&pipe, plan), 8);
    fb_plan(1000, 1000, plan);
    assert_int_equal(prs_plan_count_changes(&pipe, plan), 0);
    plan[0] = 1400; /* F0 differs from B3 before it (the iteration before) and from B0 after */
    assert_int_equal(prs_plan_count_changes(&pipe, plan), 2);
    pipe.stages = 0;
    assert_int_equal(prs_plan_count_changes(&pipe, plan), -1);
}

static void test_evaluate(void **state)
{
    (void)state;
    prs_profile *p = two_clocks();
    int plan[8];
    fb_plan(1400, 1000, plan);
    double t, e;
    prs_error err;
    prs_pipeline free_pipe = one_gpu(0), pipe = one_gpu(0.002);
    assert_int_equal(prs_evaluate_plan(p, &free_pipe, plan, &t, &e, &err), 0);
    assert_true(fabs(t - 0.136) < 1e-12); /* 4 x (10 + 24) ms */
    assert_true(fabs(e - 19.2) < 1e-9);   /* 8 + 11.2 J, never idle */
    assert_int_equal(prs_evaluate_plan(p, &pipe, plan, &t, &e, &err), 0);
    assert_true(fabs(t - 0.152) < 1e-12); /* 8 changes of 2 ms on the one GPU's path */
    assert_true(fabs(e - 19.36) < 1e-9);  /* 16 ms more at 10 W */
    /* the timeline: the change opens the computation it precedes */
    prs_timeline_op ops[8];
    assert_int_equal(prs_plan_timeline(p, &pipe, plan, ops, &t, &e, &err), 0);
    assert_true(fabs(ops[1].start_s - 0.012) < 1e-12 && fabs(ops[1].end_s - 0.038) < 1e-12);
    /* one clock: no change, the figures without costs */
    fb_plan(1000, 1000, plan);
    assert_int_equal(prs_evaluate_plan(p, &pipe, plan, &t, &e, &err), 0);
    assert_true(fabs(t - 0.144) < 1e-12 && fabs(e - 17.2) < 1e-9);
    prs_profile_free(p);
}

static void test_merge(void **state)
{
    (void)state;
    prs_profile *p = two_clocks();
    prs_pipeline pipe = one_gpu(0.002);
    prs_eval *ev;
    prs_error err;
    assert_int_equal(prs_eval_open(p, &pipe, &ev, &err), 0);
    int plan[8];
    fb_plan(1400, 1000, plan);
    long T;
    double e;
    assert_int_equal(prs__changes_merge(ev, plan, &T, &e, &err), 0);
    /* every computation at 1000 MHz: no change, 144 ms and 17.2 J against 152 ms and 19.36 J */
    assert_int_equal(prs_plan_count_changes(&pipe, plan), 0);
    for (int i = 0; i < 8; i++)
        assert_int_equal(plan[i], 1000);
    assert_int_equal(T, 144);
    assert_true(fabs(e - 17.2) < 1e-9);
    /* changes that are free: nothing merged */
    prs_eval_close(ev);
    pipe.change_cost_s = 0;
    assert_int_equal(prs_eval_open(p, &pipe, &ev, &err), 0);
    fb_plan(1400, 1000, plan);
    assert_int_equal(prs__changes_merge(ev, plan, &T, &e, &err), 0);
    assert_int_equal(prs_plan_count_changes(&pipe, plan), 8);
    assert_int_equal(T, 136);
    prs_eval_close(ev);
    prs_profile_free(p);
}

/* Changes of every plan of f, summed; each point's evaluated figures checked against its plan's
 * evaluation with f's costs. */
static long frontier_changes(const prs_frontier *f, const prs_profile *p, long *most)
{
    const prs_pipeline *pipe = prs_frontier_pipeline(f);
    int plan[64];
    long sum = 0;
    *most = 0;
    for (size_t k = 0; k < prs_frontier_size(f); k++) {
        const prs_frontier_point *pt = prs_frontier_point_at(f, k);
        prs_error err;
        double t, e;
        assert_int_equal(prs_frontier_plan(f, k, plan, &err), 0);
        assert_int_equal(prs_evaluate_plan(p, pipe, plan, &t, &e, &err), 0);
        assert_true(fabs(t - pt->eval_time_s) < 1e-12);
        assert_true(fabs(e - pt->eval_energy_j) < 1e-9 * e);
        long c = prs_plan_count_changes(pipe, plan);
        sum += c;
        if (c > *most) *most = c;
    }
    return sum;
}

static prs_frontier *plan_with(const prs_profile *p, const prs_pipeline *pipe, prs_cost_model m)
{
    prs_plan_opts o;
    prs_plan_opts_default(&o);
    o.pipe = *pipe;
    o.cost_model = m;
    o.threads = 1;
    prs_frontier *f = NULL;
    prs_error err;
    if (prs_plan(p, &o, &f, &err)) fail_msg("plan: %s", err.msg);
    return f;
}

static void test_planner(void **state)
{
    (void)state;
    prs_profile *p = two_clocks();
    for (int m = 0; m < 2; m++) {
        prs_pipeline free_pipe = one_gpu(0), pipe = one_gpu(0.002);
        prs_frontier *f0 = plan_with(p, &free_pipe, (prs_cost_model)m);
        prs_frontier *f = plan_with(p, &pipe, (prs_cost_model)m);
        long most0, most;
        long c0 = frontier_changes(f0, p, &most0), c = frontier_changes(f, p, &most);
        print_message("%s: changes over the frontier %ld (most %ld) free, %ld (most %ld) at 2 ms\n",
                      prs_cost_model_name((prs_cost_model)m), c0, most0, c, most);
        assert_int_equal(most0, 8); /* the alternating plan is planned when changes are free */
        assert_true(most < 8);      /* and replaced when they cost */
        assert_true(c < c0);
        /* the plan a job runs is no slower than the steadiest one, all at 1400 MHz (120 ms) */
        size_t k;
        assert_int_equal(prs_frontier_lookup(f, 0, &k), 0);
        assert_true(prs_frontier_point_at(f, k)->eval_time_s <= 0.120 + 1e-12);
        prs_frontier_free(f0);
        prs_frontier_free(f);
    }
    prs_profile_free(p);
}

/* plans.prs keeps the cost (and a frontier of free changes writes no line for it). */
static void test_save_load(void **state)
{
    (void)state;
    prs_profile *p = two_clocks();
    prs_pipeline pipe = one_gpu(0.00025), free_pipe = one_gpu(0);
    prs_frontier *f = plan_with(p, &pipe, PRS_COST_HULL), *g = NULL;
    char *text;
    size_t len;
    prs_error err;
    assert_int_equal(prs_frontier_to_plans(f, &text, &len, &err), 0);
    assert_non_null(strstr(text, "\nchange_cost 0.00025\ncost_model hull\n"));
    assert_int_equal(prs_frontier_from_plans("t", text, len, &g, &err), 0);
    assert_true(prs_frontier_pipeline(g)->change_cost_s == 0.00025);
    assert_int_equal(prs_frontier_size(g), prs_frontier_size(f));
    free(text);
    prs_frontier_free(g);
    prs_frontier_free(f);
    f = plan_with(p, &free_pipe, PRS_COST_HULL);
    assert_int_equal(prs_frontier_to_plans(f, &text, &len, &err), 0);
    assert_null(strstr(text, "change_cost"));
    assert_int_equal(prs_frontier_from_plans("t", text, len, &g, &err), 0);
    assert_true(prs_frontier_pipeline(g)->change_cost_s == 0);
    free(text);
    prs_frontier_free(g);
    prs_frontier_free(f);
    const char bad[] = "perseus-plans 1\nstages 1\nmicrobatches 4\nschedule 1f1b\n"
                       "virtual_stages 1\nunit_time 0.001\nblocking_power 10\nchange_cost x\n";
    assert_int_not_equal(prs_frontier_from_plans("bad", bad, sizeof bad - 1, &g, &err), 0);
    print_message("%s\n", err.msg);
    prs_profile_free(p);
}

/* Stops a run at the stop-th call with done = total > 0. */
typedef struct stopper {
    int calls, stop;
} stopper;

static int stop_at(void *ud, long done, long total)
{
    stopper *s = ud;
    return total > 0 && done == total && ++s->calls == s->stop;
}

/* The passes over the plans call the progress callback, and a run canceled there fails naming
 * them. */
static void test_cancel(void **state)
{
    (void)state;
    prs_synth_opts so;
    prs_synth_opts_init(&so);
    so.stages = 4;
    prs_profile *p = NULL;
    prs_error err;
    assert_int_equal(prs_synth_profile(&so, &p, &err), 0);
    prs_plan_opts o;
    prs_plan_opts_default(&o);
    o.pipe = (prs_pipeline){4, 8, PRS_SCHEDULE_1F1B, 0.001, 83.64, 0, 0.0003};
    o.cost_model = PRS_COST_HULL;
    o.threads = 1;
    o.progress = stop_at;
    int found = 0;
    for (int n = 1; n <= 8 && !found; n++) {
        stopper st = {0, n};
        o.ud = &st;
        prs_frontier *f = NULL;
        int rc = prs_plan(p, &o, &f, &err);
        prs_frontier_free(f);
        if (rc == 0) break; /* past the last call */
        assert_int_equal(rc, PRS_ECANCELED);
        found = strstr(err.msg, "clock changes") != NULL;
    }
    assert_true(found);
    prs_profile_free(p);
}

static void test_bad_cost(void **state)
{
    (void)state;
    const double bad[] = {-1e-6, NAN, INFINITY, PRS_MAX_CHANGE_COST_S * 1.5, 1e300};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        prs_pipeline pipe = one_gpu(bad[i]);
        prs_error err;
        assert_int_equal(prs_pipeline_check(&pipe, &err), PRS_EINVAL);
        assert_non_null(strstr(err.msg, "clock change cost"));
    }
    prs_pipeline pipe = one_gpu(PRS_MAX_CHANGE_COST_S);
    assert_int_equal(prs_pipeline_check(&pipe, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count),     cmocka_unit_test(test_evaluate),
        cmocka_unit_test(test_merge),     cmocka_unit_test(test_planner),
        cmocka_unit_test(test_save_load), cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_bad_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
