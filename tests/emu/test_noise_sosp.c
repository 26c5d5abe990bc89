/* The noise study on the SOSP'24 A100-SXM paper profiles ($PRS_SHARED_DIR/data/sosp24): with 5 %
 * jitter on time and energy and R = 3 repeats, the robust planner's fastest plan against today's,
 * judged on the true profile (docs/noise.md). A bounded subset (8 seeds, M = 12) of what
 * scripts/noise-table.sh measures with 20 seeds; and the measured reason why the 0.5 % target
 * cannot hold on both profiles (test_top_clocks). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "skips.h"

#include "perseus/noise.h"
#include "perseus/planner.h"

static prs_profile *load(const char *model)
{
    const char *dir = getenv("PRS_SHARED_DIR");
    if (!dir) return NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/data/sosp24/stage_profile/%s+a100_sxm_bf16.csv", dir, model);
    prs_profile *p = NULL;
    return prs_profile_load(path, &p, NULL) == 0 ? p : NULL;
}

static void study_model(const char *model, prs_cost_model cm, double jitter, prs_noise_truth *t,
                        prs_noise_summary sum[PRS_NOISE_NPLANNERS])
{
    prs_profile *p = load(model);
    if (!p) prs_skip_input("no shared data: $PRS_SHARED_DIR/data/sosp24");
    prs_noise_study_opts o;
    memset(&o, 0, sizeof o);
    prs_plan_opts_default(&o.plan);
    o.plan.cost_model = cm;
    o.plan.pipe.stages = 8;
    o.plan.pipe.microbatches = 12;
    o.plan.pipe.unit_time_s = 0.001;
    o.plan.pipe.blocking_power_w = 83.64;
    prs_noise_model m = {jitter, jitter, 3, 0, 0};
    o.model = m;
    o.seeds = 8;
    o.seed_base = 1;
    o.straggler = 1.2;
    o.threads = 3; /* 8 seeds in shares of 3, 3 and 2 */
    prs_robust_opts_default(&o.robust);
    prs_error err = {0, ""};
    int rc = prs_noise_study(p, &o, t, NULL, sum, &err);
    if (rc) print_message("%s\n", err.msg);
    assert_int_equal(rc, 0);
    for (int k = 0; k < PRS_NOISE_NPLANNERS; k++)
        print_message("%s %s %s jitter %g: overshoot median %.3f max %.3f %%, regret median "
                      "%.3f max %.3f %%\n",
                      model, prs_cost_model_name(cm), k ? "robust  " : "baseline", jitter,
                      sum[k].overshoot_median_pct, sum[k].overshoot_max_pct,
                      sum[k].regret_median_pct, sum[k].regret_max_pct);
    prs_profile_free(p);
}

static void study(const char *model, double jitter, prs_noise_truth *t,
                  prs_noise_summary sum[PRS_NOISE_NPLANNERS])
{
    study_model(model, PRS_COST_EXP, jitter, t, sum);
}

/* Without noise the baseline is the truth's own plan; the robust planner stays within 0.2 %. */
static void test_no_noise(void **state)
{
    (void)state;
    prs_noise_truth t;
    prs_noise_summary s[PRS_NOISE_NPLANNERS];
    study("gpt3-175b", 0, &t, s);
    assert_true(t.t_min_s > 2.8 && t.t_min_s < 2.84);
    assert_true(s[0].overshoot_max_pct == 0 && s[0].regret_max_pct == 0);
    assert_true(fabs(s[1].overshoot_max_pct) < 0.2 && fabs(s[1].regret_max_pct) < 0.2);
}

/* Largest and root-mean-square relative change of a row's time (what = 0) or energy (1) from a
 * to b (same rows). */
static double max_change(const prs_profile *a, const prs_profile *b, int what, double *rms)
{
    const prs_profile_row *x = prs_profile_rows(a), *y = prs_profile_rows(b);
    double worst = 0, ss = 0;
    size_t n = prs_profile_nrows(a);
    for (size_t i = 0; i < n; i++) {
        double c = (what ? y[i].energy_j / x[i].energy_j : y[i].time_s / x[i].time_s) - 1.0;
        worst = fmax(worst, fabs(c));
        ss += c * c;
    }
    *rms = sqrt(ss / (double)n);
    return worst;
}

/* The reconciliation's own bias (docs/noise.md, 'At small noise'): the paper profiles are
 * convex in the clock and scale one curve per instruction only approximately (an A100's energy
 * steps with its voltage). Reconciling the exact profiles, with no noise at all, keeps what lies
 * beyond the noise (PRS_RECONCILE_KEEP_SD), but a stage the pool leaves out has no noise of its
 * own to tell a feature from an outlier: some times still move by up to about one percent and
 * some energies by about two (3.16 % and 2.39 % before the features were kept), the root mean
 * square by a few tenths of a percent at most. Bounded here, so that a change that biases it
 * further is seen. */
static void test_exact_reconcile(void **state)
{
    (void)state;
    static const char *models[] = {"gpt3-175b", "bloom"};
    for (int m = 0; m < 2; m++) {
        prs_profile *p = load(models[m]), *r = NULL;
        if (!p) prs_skip_input("no shared data: $PRS_SHARED_DIR/data/sosp24");
        assert_int_equal(prs_profile_reconcile(p, 0, &r, NULL, NULL), 0);
        double rt, re, dt = max_change(p, r, 0, &rt), de = max_change(p, r, 1, &re);
        print_message("%s: reconciling the exact profile moves a time by up to %.3f %% (rms "
                      "%.3f %%), an energy by up to %.3f %% (rms %.3f %%)\n",
                      models[m], 100.0 * dt, 100.0 * rt, 100.0 * de, 100.0 * re);
        assert_true(dt < 0.015 && de < 0.04 && rt < 0.002 && re < 0.003);
        prs_profile_free(r);
        prs_profile_free(p);
    }
}

/* 5 % jitter, R = 3, GPT-3, exp: the robust fastest plan's median overshoot and median energy
 * regret are below 0.5 % and far below today's planner's, and so is its worst overshoot. The
 * issue's worst-case target (never more than 0.5 % over T_min) is not asserted: over the 20 seeds
 * of docs/noise-table.md the worst is about 1.1 %, with every margin and budget tried
 * (docs/noise.md, 'Measured'). */
static void test_gpt3(void **state)
{
    (void)state;
    prs_noise_truth t;
    prs_noise_summary s[PRS_NOISE_NPLANNERS];
    study("gpt3-175b", 0.05, &t, s);
    assert_true(s[1].overshoot_median_pct < 0.5 && s[1].regret_median_pct < 0.5);
    assert_true(s[1].overshoot_max_pct < 0.5 * s[0].overshoot_max_pct);
    assert_true(s[1].regret_median_pct < 0.5 * s[0].regret_median_pct);
    assert_true(s[1].straggler_overshoot_max_pct < s[0].straggler_overshoot_max_pct);
}

/* The same with the hull cost model: the worst overshoot and the median regret are less than
 * half today's, but the target is not reached (docs/noise.md). */
static void test_gpt3_hull(void **state)
{
    (void)state;
    prs_noise_truth t;
    prs_noise_summary s[PRS_NOISE_NPLANNERS];
    study_model("gpt3-175b", PRS_COST_HULL, 0.05, &t, s);
    assert_true(s[1].overshoot_max_pct < 0.5 * s[0].overshoot_max_pct);
    assert_true(s[1].regret_median_pct < 0.5 * s[0].regret_median_pct);
    assert_true(s[1].straggler_overshoot_max_pct < s[0].straggler_overshoot_max_pct);
}

static void test_bloom(void **state)
{
    (void)state;
    prs_noise_truth t;
    prs_noise_summary s[PRS_NOISE_NPLANNERS];
    study("bloom", 0.05, &t, s);
    assert_true(s[1].overshoot_median_pct < 0.7 * s[0].overshoot_median_pct);
    assert_true(s[1].overshoot_max_pct < 0.7 * s[0].overshoot_max_pct);
    assert_true(s[1].straggler_overshoot_max_pct < s[0].straggler_overshoot_max_pct);
}

/* The true T_min of p (exp) and the true time of the plan running every computation at freq. */
static void uniform_overshoot(const prs_profile *p, const prs_plan_opts *o, int freq, double *t_min,
                              double *over_pct)
{
    int n = o->pipe.stages * prs_ops_per_stage(&o->pipe);
    int *clocks = malloc(sizeof *clocks * (size_t)n);
    assert_non_null(clocks);
    prs_frontier *f = NULL;
    size_t k;
    double t, e;
    assert_int_equal(prs_plan(p, o, &f, NULL), 0);
    assert_int_equal(prs_frontier_lookup(f, 0, &k), 0);
    assert_int_equal(prs_frontier_plan(f, k, clocks, NULL), 0);
    assert_int_equal(prs_evaluate_plan(p, &o->pipe, clocks, t_min, &e, NULL), 0);
    for (int i = 0; i < n; i++)
        clocks[i] = freq;
    assert_int_equal(prs_evaluate_plan(p, &o->pipe, clocks, &t, &e, NULL), 0);
    *over_pct = 100.0 * (t / *t_min - 1.0);
    prs_frontier_free(f);
    free(clocks);
}

/* Mean over the (stage, instruction) types of log(time at hi / time at lo). */
static double top_gap(const prs_profile *p, int lo, int hi)
{
    const prs_profile_row *r = prs_profile_rows(p);
    size_t n = prs_profile_nrows(p);
    double sum = 0;
    int types = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].freq_mhz != hi) continue;
        for (size_t j = 0; j < n; j++)
            if (r[j].freq_mhz == lo && r[j].stage == r[i].stage && r[j].instr == r[i].instr) {
                sum += log(r[i].time_s / r[j].time_s);
                types++;
            }
    }
    assert_true(types > 0);
    return sum / types;
}

/* What 3 repeats at 5 % cannot tell (docs/noise.md). GPT-3's true T_min runs its critical
 * computations at 1410 MHz, Bloom's at 1395 MHz (its GPUs run 1410 MHz slower); each profile run
 * at the other's clock misses T_min by more than 0.5 %. The two clocks' times differ by a few
 * tenths of a percent, which quantization to 1 ms turns into a whole unit per computation. Of
 * the measurements, the mean over all types of log(t(1410) / t(1395)) estimates that gap with a
 * spread several times the gap, so it tells the two cases apart little better than a coin: a
 * planner meeting the 0.5 % target on both profiles would need to pick right in every seed. */
static void test_top_clocks(void **state)
{
    (void)state;
    static const char *models[] = {"gpt3-175b", "bloom"};
    static const int right[] = {1410, 1395}, wrong[] = {1395, 1410};
    enum { SEEDS = 200 };
    for (int m = 0; m < 2; m++) {
        prs_profile *p = load(models[m]);
        if (!p) prs_skip_input("no shared data: $PRS_SHARED_DIR/data/sosp24");
        prs_plan_opts o;
        prs_plan_opts_default(&o);
        o.pipe.stages = 8;
        o.pipe.microbatches = 12;
        o.pipe.unit_time_s = 0.001;
        o.pipe.blocking_power_w = 83.64;
        double t_min, over_right, over_wrong;
        uniform_overshoot(p, &o, right[m], &t_min, &over_right);
        uniform_overshoot(p, &o, wrong[m], &t_min, &over_wrong);
        double gap = top_gap(p, 1395, 1410), sum = 0, sum2 = 0;
        int agree = 0;
        prs_noise_model nm = {0.05, 0.05, 3, 0, 0};
        for (uint64_t seed = 1; seed <= SEEDS; seed++) {
            prs_profile *noisy = NULL;
            assert_int_equal(prs_noise_apply(p, &nm, seed, &noisy, NULL), 0);
            double g = top_gap(noisy, 1395, 1410);
            agree += (g > 0) == (gap > 0);
            sum += g;
            sum2 += g * g;
            prs_profile_free(noisy);
        }
        double sd = sqrt(sum2 / SEEDS - (sum / SEEDS) * (sum / SEEDS));
        print_message("%s: every computation at %d MHz %+.2f %%, at %d MHz %+.2f %% over T_min "
                      "%.3f s; true gap t(1410)/t(1395) %+.3f %%, measured (5 %%, R = 3) spread "
                      "%.3f %%, sign right in %d of %d seeds\n",
                      models[m], right[m], over_right, wrong[m], over_wrong, t_min, 100.0 * gap,
                      100.0 * sd, agree, SEEDS);
        assert_true(over_right < 0.05 && over_wrong > 0.5);
        assert_true(fabs(gap) < 0.005 && sd > 2.0 * fabs(gap));
        assert_true(agree < 0.75 * SEEDS);
        prs_profile_free(p);
    }
}

/* The time of (stage, instruction, clock) in p; -1 when it has no such row. */
static double time_at(const prs_profile *p, int stage, int instr, int freq)
{
    const prs_profile_row *r = prs_profile_rows(p);
    for (size_t i = 0; i < prs_profile_nrows(p); i++)
        if (r[i].stage == stage && (int)r[i].instr == instr && r[i].freq_mhz == freq)
            return r[i].time_s;
    return -1;
}

/* The clock of (stage, instruction) in the truth whose time is nearest to want (fastest: the
 * least time instead). */
static int clock_near(const prs_profile *p, int stage, int instr, double want, int fastest)
{
    const prs_profile_row *r = prs_profile_rows(p);
    int best = -1;
    double bd = INFINITY;
    for (size_t i = 0; i < prs_profile_nrows(p); i++) {
        if (r[i].stage != stage || (int)r[i].instr != instr) continue;
        double d = fastest ? r[i].time_s : fabs(r[i].time_s - want);
        if (d < bd) bd = d, best = r[i].freq_mhz;
    }
    return best;
}

/* What the fastest plan rests on: the slowest stage at its fastest clock against the fastest
 * stage at the clock where it takes as long (GPT-3: stage 7 is the slowest, by 6-8 %; Bloom:
 * stage 7 is the fastest, by 10-12 %; stages 0-6 are identical). Over SEEDS seeds at 5 % and
 * R = 3, the root mean square of the error of their ratio (both instructions), in the reconciled
 * profile (no margin) and in the shape oracle's. The oracle errs by the scales alone: stage 7's,
 * from its own 3 x 38 measurements, and that of stages 0-6 together, sd 5 % sqrt(1 / 114 +
 * 1 / 798) = 0.50 %. */
static void shape_error(const prs_profile *truth, double *rms_rec, double *rms_oracle)
{
    enum { SEEDS = 40 };
    int slow[2], fast[2], fs[2], ff[2]; /* per instruction, from the truth */
    double ts[2], tf[2];
    for (int in = 0; in < 2; in++) {
        double top0 = time_at(truth, 0, in, clock_near(truth, 0, in, 0, 1));
        double top7 = time_at(truth, 7, in, clock_near(truth, 7, in, 0, 1));
        slow[in] = top7 > top0 ? 7 : 0;
        fast[in] = 7 - slow[in];
        fs[in] = clock_near(truth, slow[in], in, 0, 1);
        ts[in] = time_at(truth, slow[in], in, fs[in]);
        ff[in] = clock_near(truth, fast[in], in, ts[in], 0);
        tf[in] = time_at(truth, fast[in], in, ff[in]);
    }
    prs_noise_model nm = {0.05, 0.05, 3, 0, 0};
    double ss[2] = {0, 0};
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
        prs_profile *noisy = NULL, *rec = NULL, *orc = NULL;
        assert_int_equal(prs_noise_apply(truth, &nm, seed, &noisy, NULL), 0);
        assert_int_equal(prs_profile_reconcile(noisy, 0, &rec, NULL, NULL), 0);
        assert_int_equal(prs_noise_oracle_apply(truth, &nm, 0, seed, &orc, NULL), 0);
        const prs_profile *got[2] = {rec, orc};
        for (int in = 0; in < 2; in++)
            for (int k = 0; k < 2; k++) {
                double d = log(time_at(got[k], fast[in], in, ff[in]) / tf[in]) -
                           log(time_at(got[k], slow[in], in, fs[in]) / ts[in]);
                ss[k] += d * d;
            }
        prs_profile_free(noisy);
        prs_profile_free(rec);
        prs_profile_free(orc);
    }
    *rms_rec = 100.0 * sqrt(ss[0] / (2 * SEEDS));
    *rms_oracle = 100.0 * sqrt(ss[1] / (2 * SEEDS));
}

/* The reconciliation against the shape oracle (docs/noise.md, 'What measuring can tell'): the
 * oracle's error is the scales' (0.50 % in theory), the reconciled profile's about twice that,
 * the rest being the shared curve's error at the top clocks, which the oracle does not have. */
static void test_shape_error(void **state)
{
    (void)state;
    static const char *models[] = {"gpt3-175b", "bloom"};
    for (int m = 0; m < 2; m++) {
        prs_profile *p = load(models[m]);
        if (!p) prs_skip_input("no shared data: $PRS_SHARED_DIR/data/sosp24");
        double rec, orc;
        shape_error(p, &rec, &orc);
        print_message(
            "%s: the fastest stage against the slowest one's top, 5 %%, R = 3: error rms %.3f %% "
            "reconciled, %.3f %% shape oracle\n",
            models[m], rec, orc);
        assert_true(orc > 0.40 && orc < 0.56); /* without the groups: 0.65 % */
        assert_true(rec > 1.2 * orc && rec < 1.5);
        prs_profile_free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_noise),    cmocka_unit_test(test_gpt3),
        cmocka_unit_test(test_gpt3_hull),   cmocka_unit_test(test_bloom),
        cmocka_unit_test(test_top_clocks),  cmocka_unit_test(test_exact_reconcile),
        cmocka_unit_test(test_shape_error),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
