/* Cancelling a planning run before its walk (planner.c set_up, plan_bounds.c): the set-up of a
 * large pipeline (the schedule graph, the cost models, the run's arrays) calls the progress
 * callback with done = total = 0 between its passes, so a caller that answers non-zero stops it
 * there. Measured in callback calls, not time:
 *   - the set-up of S stages makes at least S + 1 calls (one per GPU while placing the
 *     computations, one per cost model, one between the other passes) before the walk's first
 *     call (total > 0);
 *   - a cancel at the k-th set-up call, for k from the first to the last, returns PRS_ECANCELED
 *     after exactly k calls: nothing runs after the call that asked to stop, no walk starts, no
 *     frontier comes back;
 *   - after the walk, a cancel at the call made once the frontier is cleaned stops the run
 *     before polishing, and one at any call polishing makes (after each plan, every
 *     PRS_POLISH_TICK_OPS computations inside one) stops it there;
 *   - prs_plan_measure (the check the server makes before planning) does the same, and
 *     otherwise agrees with prs_plan_size and prs_plan_check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "perseus/planner.h"
#include "perseus/synth.h"

#define STAGES 64
#define MICROBATCHES 128

typedef struct counter {
    long calls, setup_calls, walk_calls; /* all, total == 0, total > 0 */
    long stop_at;                        /* answer non-zero at this call (0: never) */
    long stop_walk;                      /* answer non-zero at the walk's first call */
} counter;

static int on_progress(void *ud, long done, long total)
{
    counter *c = ud;
    c->calls++;
    if (total == 0) {
        assert_int_equal(done, 0);
        c->setup_calls++;
    } else {
        c->walk_calls++;
    }
    return (c->stop_at && c->calls >= c->stop_at) || (c->stop_walk && total > 0);
}

static prs_profile *profile(void)
{
    prs_synth_opts so;
    prs_synth_opts_init(&so);
    so.stages = STAGES;
    so.f_min_mhz = 1200;
    so.f_step_mhz = 30;
    prs_profile *p = NULL;
    assert_int_equal(prs_synth_profile(&so, &p, NULL), 0);
    return p;
}

static void opts_for(prs_plan_opts *o, prs_cost_model model, counter *c)
{
    prs_plan_opts_default(o);
    o->pipe.stages = STAGES;
    o->pipe.microbatches = MICROBATCHES;
    o->pipe.unit_time_s = 0.005;
    o->pipe.blocking_power_w = 80;
    o->cost_model = model;
    o->threads = 1;
    o->progress = on_progress;
    o->ud = c;
}

/* The set-up calls of a run stopped at the walk's first call. */
static long setup_calls(const prs_profile *p, prs_cost_model model)
{
    counter c = {0};
    c.stop_walk = 1;
    prs_plan_opts o;
    opts_for(&o, model, &c);
    prs_frontier *f = NULL;
    prs_error err = {0, ""};
    assert_int_equal(prs_plan(p, &o, &f, &err), PRS_ECANCELED);
    assert_null(f);
    assert_int_equal(c.walk_calls, 1);
    return c.setup_calls;
}

static void cancel_planning(prs_cost_model model)
{
    prs_profile *p = profile();
    long n = setup_calls(p, model);
    print_message("%s, %d stages x %d microbatches: %ld set-up calls before the walk\n",
                  prs_cost_model_name(model), STAGES, MICROBATCHES, n);
    assert_true(n >= STAGES + 1);
    for (long k = 1; k <= n; k += k < 4 || k > n - 4 ? 1 : n / 7) {
        counter c = {0};
        c.stop_at = k;
        prs_plan_opts o;
        opts_for(&o, model, &c);
        prs_frontier *f = NULL;
        prs_error err = {0, ""};
        assert_int_equal(prs_plan(p, &o, &f, &err), PRS_ECANCELED);
        assert_null(f);
        assert_int_equal(c.calls, k);
        assert_int_equal(c.walk_calls, 0);
        assert_non_null(strstr(err.msg, "cancel"));
    }
    prs_profile_free(p);
}

static void test_cancel_exp(void **state)
{
    (void)state;
    cancel_planning(PRS_COST_EXP);
}

static void test_cancel_hull(void **state)
{
    (void)state;
    cancel_planning(PRS_COST_HULL);
}

/* After the walk: a call with done = total once the frontier is cleaned, before polishing, and
 * one at the end. A cancel at the first stops the run before polishing (no polish time). */
static void test_cancel_before_polish(void **state)
{
    (void)state;
    prs_profile *p = profile();
    counter c = {0};
    prs_plan_opts o;
    opts_for(&o, PRS_COST_HULL, &c);
    o.pipe.microbatches = 8; /* a short walk */
    prs_frontier *f = NULL;
    prs_plan_stats st;
    prs_error err = {0, ""};
    assert_int_equal(prs_plan_counted(p, &o, &f, &st, &err), 0);
    assert_true(st.polish_s > 0);
    prs_frontier_free(f);
    long n = c.calls;
    /* the set-up's calls, the walk's first, one per raw point, the one before polishing, the
     * polishing's (one after each polished plan, one every PRS_POLISH_TICK_OPS computations a
     * sweep visits), then one at the end */
    long before_polish = c.setup_calls + 1 + st.points + 1;
    assert_true(n >= before_polish + 2);
    counter d = {0};
    d.stop_at = n - 1;
    o.ud = &d;
    f = NULL;
    assert_int_equal(prs_plan_counted(p, &o, &f, &st, &err), PRS_ECANCELED);
    assert_null(f);
    assert_int_equal(d.calls, n - 1);
    assert_true(st.polish_s == 0);
    print_message("%ld calls in all, %ld while polishing; canceled at call %ld, before "
                  "polishing\n",
                  n, n - before_polish - 1, before_polish);
    prs_profile_free(p);
}

/* Inside polishing: a cancel at any of its calls stops the run there, naming the polishing. */
static void test_cancel_while_polishing(void **state)
{
    (void)state;
    prs_profile *p = profile();
    counter c = {0};
    prs_plan_opts o;
    opts_for(&o, PRS_COST_HULL, &c);
    o.pipe.microbatches = 8;
    o.polish = PRS_POLISH_ALL; /* every plan: calls between plans and inside each */
    prs_frontier *f = NULL;
    prs_plan_stats st;
    prs_error err = {0, ""};
    assert_int_equal(prs_plan_counted(p, &o, &f, &st, &err), 0);
    prs_frontier_free(f);
    long first = c.setup_calls + 1 + st.points + 2, last = c.calls - 1;
    assert_true(last - first + 1 >= st.points); /* at least one a plan */
    for (long k = first; k <= last; k += 1 + (last - first) / 5) {
        counter d = {0};
        d.stop_at = k;
        o.ud = &d;
        f = NULL;
        assert_int_equal(prs_plan_counted(p, &o, &f, &st, &err), PRS_ECANCELED);
        assert_null(f);
        assert_int_equal(d.calls, k);
        assert_non_null(strstr(err.msg, "polishing"));
    }
    print_message("%ld calls while polishing %ld plans; each stops the run\n", last - first + 1,
                  st.points);
    prs_profile_free(p);
}

static void test_measure(void **state)
{
    (void)state;
    prs_profile *p = profile();
    counter c = {0};
    prs_plan_opts o;
    opts_for(&o, PRS_COST_HULL, &c);
    prs_plan_measures m;
    prs_error err = {0, ""};
    assert_int_equal(prs_plan_measure(p, &o, "unit_time_s", &m, &err), 0);
    long n = c.calls, span;
    double bytes;
    print_message("prs_plan_measure: %ld calls, span %ld, tables %.0f B, peak estimate %.1f MB\n",
                  n, m.span, m.table_bytes, m.peak_bytes / 1e6);
    assert_true(n >= STAGES + 1);
    assert_int_equal(prs_plan_size(p, &o.pipe, &span, &bytes, &err), 0);
    assert_int_equal(m.span, span);
    assert_true(m.table_bytes == bytes);
    assert_true(m.peak_bytes > bytes);
    for (long k = 1; k <= n; k += k < 4 || k > n - 4 ? 1 : n / 7) {
        counter d = {0};
        d.stop_at = k;
        o.ud = &d;
        assert_int_equal(prs_plan_measure(p, &o, "unit_time_s", &m, &err), PRS_ECANCELED);
        assert_int_equal(d.calls, k);
    }
    /* its check is prs_plan_check's: a unit coarser than every computation is refused */
    o.ud = &c;
    o.pipe.unit_time_s = 10;
    assert_int_equal(prs_plan_measure(p, &o, "unit_time_s", &m, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "unit_time_s 10 s is coarser"));
    prs_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cancel_exp),
        cmocka_unit_test(test_cancel_hull),
        cmocka_unit_test(test_cancel_before_polish),
        cmocka_unit_test(test_cancel_while_polishing),
        cmocka_unit_test(test_measure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
