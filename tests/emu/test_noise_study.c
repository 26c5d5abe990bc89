/* prs_noise_study's threads and progress (noise_study.c), on a small synthetic A100 pipeline
 * (no shared data needed):
 *   - every seed's figures are the same bits on 1, 2 and 3 threads;
 *   - the progress callback is called once per seed, with done rising 1..seeds and the total;
 *   - a callback that returns non-zero cancels the study: PRS_ECANCELED, on any thread count;
 *   - bad thread counts are refused;
 *   - plans judged at a finer unit on the truth (truth_unit_s): T_min is the truth's at that
 *     unit, the planning and the promised savings are unchanged; a unit coarser than the
 *     planning unit, negative or NaN is refused. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "perseus/noise.h"
#include "perseus/planner.h"
#include "perseus/synth.h"

#define SEEDS 7

typedef struct calls {
    long n, last_done, total;
    int monotone;
    long cancel_at; /* 0: never */
} calls;

static int on_seed(void *ud, long done, long total)
{
    calls *c = ud;
    c->monotone &= done == c->last_done + 1;
    c->last_done = done;
    c->total = total;
    c->n++;
    return c->cancel_at && done >= c->cancel_at;
}

static prs_profile *profile(void)
{
    prs_synth_opts so;
    prs_synth_opts_init(&so);
    so.stages = 3;
    prs_profile *p = NULL;
    assert_int_equal(prs_synth_profile(&so, &p, NULL), 0);
    return p;
}

static void study_opts(prs_noise_study_opts *o, int threads, calls *c)
{
    memset(o, 0, sizeof *o);
    prs_plan_opts_default(&o->plan);
    o->plan.cost_model = PRS_COST_HULL;
    o->plan.pipe.stages = 3;
    o->plan.pipe.microbatches = 4;
    o->plan.pipe.unit_time_s = 0.001;
    o->plan.pipe.blocking_power_w = 80;
    prs_noise_model m = {0.03, 0.03, 2, 0, 0};
    o->model = m;
    o->seeds = SEEDS;
    o->seed_base = 11;
    o->straggler = 1.2;
    prs_robust_opts_default(&o->robust);
    o->threads = threads;
    o->progress = on_seed;
    o->ud = c;
}

static void test_threads_same_figures(void **state)
{
    (void)state;
    prs_profile *p = profile();
    prs_noise_outcome want[PRS_NOISE_NPLANNERS * SEEDS], got[PRS_NOISE_NPLANNERS * SEEDS];
    for (int threads = 1; threads <= 3; threads++) {
        calls c = {0, 0, 0, 1, 0};
        prs_noise_study_opts o;
        study_opts(&o, threads, &c);
        prs_error err = {0, ""};
        int rc = prs_noise_study(p, &o, NULL, threads == 1 ? want : got, NULL, &err);
        if (rc) fail_msg("%d threads: %s", threads, err.msg);
        assert_int_equal(c.n, SEEDS);
        assert_true(c.monotone);
        assert_int_equal(c.last_done, SEEDS);
        assert_int_equal(c.total, SEEDS);
        if (threads > 1) assert_memory_equal(want, got, sizeof want);
    }
    prs_profile_free(p);
}

static void test_cancel(void **state)
{
    (void)state;
    prs_profile *p = profile();
    for (int threads = 1; threads <= 3; threads++) {
        calls c = {0, 0, 0, 1, 3};
        prs_noise_study_opts o;
        study_opts(&o, threads, &c);
        prs_error err = {0, ""};
        assert_int_equal(prs_noise_study(p, &o, NULL, NULL, NULL, &err), PRS_ECANCELED);
        assert_non_null(strstr(err.msg, "canceled"));
        /* seeds still running when it cancels finish, but the callback hears of none */
        assert_int_equal(c.n, 3);
    }
    prs_profile_free(p);
}

static void test_bad_threads(void **state)
{
    (void)state;
    prs_profile *p = profile();
    calls c = {0, 0, 0, 1, 0};
    prs_noise_study_opts o;
    study_opts(&o, -1, &c);
    prs_error err = {0, ""};
    assert_int_equal(prs_noise_study(p, &o, NULL, NULL, NULL, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "threads"));
    o.threads = PRS_NOISE_MAX_THREADS + 1;
    assert_int_equal(prs_noise_study(p, &o, NULL, NULL, NULL, &err), PRS_EINVAL);
    assert_int_equal(c.n, 0);
    prs_profile_free(p);
}

static void test_truth_unit(void **state)
{
    (void)state;
    prs_profile *p = profile();
    calls c = {0, 0, 0, 1, 0};
    prs_noise_study_opts o;
    study_opts(&o, 2, &c);
    prs_noise_truth coarse, fine;
    prs_noise_outcome oc[PRS_NOISE_NPLANNERS * SEEDS], of[PRS_NOISE_NPLANNERS * SEEDS];
    prs_error err = {0, ""};
    assert_int_equal(prs_noise_study(p, &o, &coarse, oc, NULL, &err), 0);
    o.truth_unit_s = 1e-6;
    assert_int_equal(prs_noise_study(p, &o, &fine, of, NULL, &err), 0);
    /* the truth's fastest plan judged in microseconds: its time is not a whole number of
     * milliseconds any more, and it is no shorter than its time cut down to them */
    assert_true(fine.t_min_s >= coarse.t_min_s);
    assert_true(fabs(fine.t_min_s - coarse.t_min_s) > 1e-9);
    for (int k = 0; k < PRS_NOISE_NPLANNERS * SEEDS; k++)
        assert_true(oc[k].promised_saving_pct == of[k].promised_saving_pct);
    const double bad[] = {0.002, -1e-6, NAN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.truth_unit_s = bad[i];
        assert_int_equal(prs_noise_study(p, &o, NULL, NULL, NULL, &err), PRS_EINVAL);
        assert_non_null(strstr(err.msg, "truth's unit"));
    }
    prs_profile_free(p);
}

/* The shape oracle: every seed drawn by it, closer to the truth than measuring; its settings
 * checked only when it is on. */
static void test_oracle(void **state)
{
    (void)state;
    prs_profile *p = profile();
    calls c = {0, 0, 0, 1, 0};
    prs_noise_study_opts o;
    study_opts(&o, 2, &c);
    o.oracle_margin = 5; /* ignored without the oracle */
    prs_noise_summary measured[PRS_NOISE_NPLANNERS], oracle[PRS_NOISE_NPLANNERS];
    prs_error err = {0, ""};
    assert_int_equal(prs_noise_study(p, &o, NULL, NULL, measured, &err), 0);
    o.oracle = 1;
    assert_int_equal(prs_noise_study(p, &o, NULL, NULL, NULL, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "oracle margin"));
    o.oracle_margin = 0;
    assert_int_equal(prs_noise_study(p, &o, NULL, NULL, oracle, &err), 0);
    const prs_noise_summary *m = &measured[PRS_NOISE_BASELINE], *q = &oracle[PRS_NOISE_BASELINE];
    assert_true(q->overshoot_max_pct < m->overshoot_max_pct);
    o.model.clock_bias = 0.01;
    assert_int_equal(prs_noise_study(p, &o, NULL, NULL, NULL, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "jitter only"));
    prs_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_same_figures), cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_bad_threads), cmocka_unit_test(test_truth_unit),
        cmocka_unit_test(test_oracle)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
