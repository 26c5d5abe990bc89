/* prs_plan_opts.threads: the frontier does not depend on how many threads pick the points'
 * plans. Every point's figures and every plan are the same with 1, 2, 3 and 8 threads, for exp
 * (raw), hull raw and hull clean (the roundings along the relaxed schedule too), on 1F1B,
 * GPipe and interleaved synthetic pipelines and on the SOSP'24 GPT-3 profile at M = 24 (skipped
 * without the shared data); the roundings counted are the same; a run canceled part way through
 * by its progress callback stops with PRS_ECANCELED and no frontier, whatever the threads, and
 * its counters are read once the threads have stopped (on GPT-3 with 5 threads points are then
 * in flight, and ThreadSanitizer sees a race if they are read before); a thread count out of
 * range is refused, naming the limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "perseus/planner.h"
#include "paper.h"
#include "perseus/synth.h"
#include "skips.h"

static prs_profile *synth(int chunks)
{
    prs_synth_opts so;
    prs_synth_opts_init(&so);
    so.stages = chunks;
    prs_profile *p = NULL;
    assert_int_equal(prs_synth_profile(&so, &p, NULL), 0);
    return p;
}

/* a and b: the same points and the same plans. */
static void same_frontier(const prs_frontier *a, const prs_frontier *b, int nops)
{
    size_t n = prs_frontier_size(a);
    assert_int_equal(prs_frontier_size(b), n);
    int *pa = malloc(sizeof(int) * (size_t)nops), *pb = malloc(sizeof(int) * (size_t)nops);
    assert_true(pa && pb);
    for (size_t k = 0; k < n; k++) {
        assert_memory_equal(prs_frontier_point_at(a, k), prs_frontier_point_at(b, k),
                            sizeof(prs_frontier_point));
        assert_int_equal(prs_frontier_plan(a, k, pa, NULL), 0);
        assert_int_equal(prs_frontier_plan(b, k, pb, NULL), 0);
        assert_memory_equal(pa, pb, sizeof(int) * (size_t)nops);
    }
    free(pa);
    free(pb);
}

/* Plan p with o at 1, 2, 3 and 8 threads: the same frontier and roundings each time. */
static void check_threads(const prs_profile *p, prs_plan_opts o)
{
    static const int threads[] = {1, 2, 3, 8};
    prs_frontier *first = NULL;
    prs_plan_stats st0;
    int nops = o.pipe.stages * prs_ops_per_stage(&o.pipe);
    for (size_t i = 0; i < sizeof threads / sizeof *threads; i++) {
        o.threads = threads[i];
        prs_frontier *f = NULL;
        prs_plan_stats st;
        assert_int_equal(prs_plan_counted(p, &o, &f, &st, NULL), 0);
        assert_true(prs_frontier_size(f) > 1);
        if (!first) {
            first = f;
            st0 = st;
            continue;
        }
        same_frontier(first, f, nops);
        assert_int_equal(st.points, st0.points);
        assert_int_equal(st.tracks, st0.tracks);
        assert_int_equal(st.steps, st0.steps);
        prs_frontier_free(f);
    }
    prs_frontier_free(first);
}

static void opts_for(prs_plan_opts *o, prs_cost_model model, prs_frontier_kind kind,
                     prs_schedule schedule)
{
    prs_plan_opts_default(o);
    o->cost_model = model;
    o->frontier = kind;
    o->pipe.schedule = schedule;
    o->pipe.stages = 4;
    o->pipe.microbatches = 8;
    o->pipe.virtual_stages = schedule == PRS_SCHEDULE_INTERLEAVED ? 2 : 0;
    o->pipe.unit_time_s = 0.0005;
    o->pipe.blocking_power_w = 80;
}

static void test_synthetic(void **state)
{
    (void)state;
    static const prs_schedule sched[] = {PRS_SCHEDULE_1F1B, PRS_SCHEDULE_GPIPE,
                                         PRS_SCHEDULE_INTERLEAVED};
    for (size_t s = 0; s < 3; s++) {
        prs_profile *p = synth(sched[s] == PRS_SCHEDULE_INTERLEAVED ? 8 : 4);
        prs_plan_opts o;
        opts_for(&o, PRS_COST_EXP, PRS_FRONTIER_RAW, sched[s]);
        check_threads(p, o);
        opts_for(&o, PRS_COST_HULL, PRS_FRONTIER_RAW, sched[s]);
        check_threads(p, o);
        opts_for(&o, PRS_COST_HULL, PRS_FRONTIER_CLEAN, sched[s]);
        check_threads(p, o);
        prs_profile_free(p);
    }
}

static int cancel_at(void *ud, long done, long total)
{
    (void)total;
    return done >= *(const long *)ud;
}

/* Plan p with o, canceled after `at` steps: PRS_ECANCELED, no frontier, and the counters read
 * (with points possibly still in flight: the threads are stopped first). */
static void canceled(const prs_profile *p, prs_plan_opts *o, long at)
{
    o->progress = cancel_at;
    o->ud = &at;
    prs_frontier *f = NULL;
    prs_error err = {0, ""};
    prs_plan_stats st;
    assert_int_equal(prs_plan_counted(p, o, &f, &st, &err), PRS_ECANCELED);
    assert_null(f);
    char want[64];
    snprintf(want, sizeof want, "canceled after %ld of", at);
    assert_non_null(strstr(err.msg, want));
    /* worker threads may have stopped before picking anything */
    assert_true(st.points >= at && st.steps >= 1 && st.evaluations >= (o->threads == 1));
    o->progress = NULL;
    o->ud = NULL;
}

static void test_paper(void **state)
{
    (void)state;
    prs_profile *p = prs_paper_profile("gpt3-175b");
    if (!p) prs_skip_input("SOSP'24 profiles not found");
    prs_plan_opts o;
    opts_for(&o, PRS_COST_HULL, PRS_FRONTIER_CLEAN, PRS_SCHEDULE_1F1B);
    o.pipe.stages = 8;
    o.pipe.microbatches = 24;
    o.pipe.unit_time_s = 0.001;
    o.pipe.blocking_power_w = 83.64;
    check_threads(p, o);
    o.threads = 5; /* picks slower than steps: points are in flight when it stops */
    canceled(p, &o, 300);
    prs_profile_free(p);
}

static void test_canceled(void **state)
{
    (void)state;
    prs_profile *p = synth(4);
    prs_plan_opts o;
    opts_for(&o, PRS_COST_HULL, PRS_FRONTIER_CLEAN, PRS_SCHEDULE_1F1B);
    for (int threads = 1; threads <= 4; threads += 3) {
        o.threads = threads;
        canceled(p, &o, 50);
    }
    prs_profile_free(p);
}

static void test_refused(void **state)
{
    (void)state;
    prs_profile *p = synth(4);
    prs_plan_opts o;
    opts_for(&o, PRS_COST_HULL, PRS_FRONTIER_CLEAN, PRS_SCHEDULE_1F1B);
    static const int bad[] = {-1, PRS_PLAN_MAX_THREADS + 1};
    for (int i = 0; i < 2; i++) {
        o.threads = bad[i];
        prs_frontier *f = NULL;
        prs_error err = {0, ""};
        assert_int_equal(prs_plan(p, &o, &f, &err), PRS_EINVAL);
        assert_null(f);
        char want[64];
        snprintf(want, sizeof want, "threads must be 0 (one per processor) to %d, got %d",
                 PRS_PLAN_MAX_THREADS, bad[i]);
        assert_string_equal(err.msg, want);
    }
    prs_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synthetic),
        cmocka_unit_test(test_paper),
        cmocka_unit_test(test_canceled),
        cmocka_unit_test(test_refused),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
