/* Power caps on the SOSP'24 A100 profiles (GPT-3 175B and Bloom 176B, 8 stages, M = 12 and 96,
 * unit 1 ms, blocking power 83.64 W, the reference's exp cost model), read from
 * $PRS_SHARED_DIR/data/sosp24 (skipped without it):
 *   - over a dense sweep of caps, from the all-max plan's power down to the least power of
 *     Perseus's plans, held on the average and on the peak over 1 s: Perseus always has a plan
 *     within the cap and is never slower than the fastest uniform clock or the per-GPU power
 *     limit at the same cap;
 *   - the plan chosen under a cap on the peak, evaluated again from its clocks, has its peak
 *     over the window within the cap (and the figures the choice reported);
 *   - the caps of the table in docs/power-caps-a100.md (95 to 80 % of the all-max average):
 *     the same, with Perseus strictly faster than the power limit. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "perseus/power.h"
#include "perseus/powercap.h"
#include "skips.h"

#define SWEEP 120

typedef struct setup_case {
    prs_profile *p;
    prs_frontier *f;
    prs_powercap *pc;
    int *clocks;
} setup_case;

static int open_case(const char *model, int m, setup_case *c)
{
    const char *dir = getenv("PRS_SHARED_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/data/sosp24/stage_profile/%s+a100_sxm_bf16.csv", dir ? dir : "",
             model);
    prs_error err;
    if (!dir || prs_profile_load(path, &c->p, &err)) return -1;
    prs_plan_opts o;
    prs_plan_opts_default(&o);
    o.pipe.stages = 8;
    o.pipe.microbatches = m;
    o.pipe.unit_time_s = 0.001;
    o.pipe.blocking_power_w = 83.64;
    if (prs_plan(c->p, &o, &c->f, &err)) fail_msg("plan: %s", err.msg);
    if (prs_powercap_open(c->p, c->f, 1, 1.0, &c->pc, &err)) fail_msg("%s", err.msg);
    c->clocks = malloc(sizeof *c->clocks * (size_t)(8 * prs_ops_per_stage(&o.pipe)));
    assert_non_null(c->clocks);
    return 0;
}

static void close_case(setup_case *c)
{
    free(c->clocks);
    prs_powercap_free(c->pc);
    prs_frontier_free(c->f);
    prs_profile_free(c->p);
}

/* Perseus at cap holds it, is at least as fast as either baseline that holds it, and its plan
 * evaluates to the power reported. Returns the result. */
static prs_cap_result check_cap(setup_case *c, double cap, prs_cap_on on)
{
    prs_cap_result r;
    prs_error err;
    if (prs_powercap_choose(c->pc, cap, on, &r, &err)) fail_msg("%s", err.msg);
    const prs_cap_choice *ps = &r.s[PRS_CAP_PERSEUS];
    if (!ps->feasible) fail_msg("no Perseus plan within %.6g W (%s)", cap, prs_cap_on_name(on));
    for (int s = PRS_CAP_UNIFORM; s < PRS_CAP_NSTRATEGIES; s++)
        if (r.s[s].feasible && ps->throughput_per_s < r.s[s].throughput_per_s)
            fail_msg("%.6g W (%s): Perseus %.6g it/s, %s %.6g it/s", cap, prs_cap_on_name(on),
                     ps->throughput_per_s, prs_cap_strategy_name((prs_cap_strategy)s),
                     r.s[s].throughput_per_s);
    if (on == PRS_CAP_PEAK) {
        prs_plan_power pw;
        assert_int_equal(prs_powercap_plan(c->pc, &r, PRS_CAP_PERSEUS, c->clocks, &err), 0);
        assert_int_equal(
            prs_plan_power_of(c->p, prs_frontier_pipeline(c->f), c->clocks, 1.0, &pw, &err), 0);
        if (!(pw.peak_power_w <= cap * (1 + 1e-12)))
            fail_msg("%.6g W: the chosen plan peaks at %.6g W over 1 s", cap, pw.peak_power_w);
        assert_true(pw.peak_power_w == ps->peak_power_w && pw.time_s == ps->time_s);
    }
    return r;
}

static void sweep_case(const char *model, int m)
{
    setup_case c = {0};
    if (open_case(model, m, &c)) prs_skip_input("no shared data: $PRS_SHARED_DIR/data/sosp24");
    for (int on = 0; on < 2; on++) {
        double hi, lo, avg_hi, unused;
        prs_powercap_range(c.pc, (prs_cap_on)on, &hi, &lo);
        assert_true(lo < hi);
        for (int i = 0; i < SWEEP; i++)
            check_cap(&c, hi - (hi - lo) * i / (SWEEP - 1), (prs_cap_on)on);
        prs_powercap_range(c.pc, PRS_CAP_AVG, &avg_hi, &unused);
        for (int pct = 95; pct >= 80; pct -= 5) {
            prs_cap_result r = check_cap(&c, avg_hi * pct / 100.0, (prs_cap_on)on);
            double vs_limit = prs_cap_ratio(&r.s[PRS_CAP_PERSEUS], &r.s[PRS_CAP_POWER_LIMIT]);
            print_message("%s M=%d %s %d %%: x%.4f uniform, x%.4f power limit\n", model, m,
                          prs_cap_on_name((prs_cap_on)on), pct,
                          prs_cap_ratio(&r.s[PRS_CAP_PERSEUS], &r.s[PRS_CAP_UNIFORM]), vs_limit);
            assert_true(vs_limit > 1);
        }
    }
    close_case(&c);
}

static void test_gpt3_m12(void **state)
{
    (void)state;
    sweep_case("gpt3-175b", 12);
}

static void test_gpt3_m96(void **state)
{
    (void)state;
    sweep_case("gpt3-175b", 96);
}

static void test_bloom_m12(void **state)
{
    (void)state;
    sweep_case("bloom", 12);
}

static void test_bloom_m96(void **state)
{
    (void)state;
    sweep_case("bloom", 96);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt3_m12),
        cmocka_unit_test(test_gpt3_m96),
        cmocka_unit_test(test_bloom_m12),
        cmocka_unit_test(test_bloom_m96),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
