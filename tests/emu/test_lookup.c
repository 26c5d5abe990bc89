/* The frontier lookup rule (prs_frontier_lookup, planner.h) that the emulator's "lookup"
 * variant and the server use: with no straggler, the least evaluated energy plan at the fastest
 * evaluated time; with a straggler at T', the plan minimising its evaluated energy plus the
 * blocking energy of its GPUs until T' among plans no slower than T'.
 *   - on a hand-made frontier, where every answer is worked out by hand, including the case
 *     where it picks a plan slower than the least-energy point T* (the paper's rule would not);
 *   - on planned frontiers of synthetic profiles, against brute force, and against the paper's
 *     rule: never more energy per pipeline, and the emulation's lookup savings never below the
 *     exact paper-rule savings. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frontier_int.h"
#include "perseus/emulator.h"
#include "perseus/gpumodel.h"
#include "perseus/planner.h"

/* Points (evaluated time, evaluated energy), slowest first, on a 2-GPU pipeline at 1 W:
 *   0: (5, 9)   1: (4, 8) = T*   2: (3, 9.5)   3: (2, 12)   4: (2, 11.5)
 * Two plans share the fastest time; the cheaper one (4) is the no-straggler answer. */
static prs_frontier *hand_frontier(void)
{
    prs_pipeline pipe = {2, 1, PRS_SCHEDULE_1F1B, 1.0, 1.0, 0, 0};
    int base[4] = {1, 1, 1, 1};
    prs_frontier *f = prs__frontier_new(&pipe, PRS_COST_EXP, base);
    assert_non_null(f);
    static const double pts[][2] = {{5, 9}, {4, 8}, {3, 9.5}, {2, 12}, {2, 11.5}};
    for (size_t i = 0; i < 5; i++) {
        prs_frontier_point p;
        memset(&p, 0, sizeof p);
        p.time_units = (long)pts[i][0];
        p.time_s = pts[i][0];
        p.energy_j = pts[i][1];
        p.eval_time_s = pts[i][0];
        p.eval_energy_j = pts[i][1];
        assert_int_equal(prs__frontier_push(f, &p, NULL, NULL, 0), 0);
    }
    return f;
}

static void test_hand_frontier(void **state)
{
    (void)state;
    prs_frontier *f = hand_frontier();
    /* T' -> expected plan; the objective is e + 2 GPUs * 1 W * (T' - t) */
    static const struct {
        double t_prime;
        size_t k;
    } cases[] = {
        {0, 4},   /* no straggler: fastest time, least energy there */
        {-1, 4},  /* same */
        {1, 4},   /* T' faster than anything: the fastest plan */
        {2, 4},   /* only the fastest plans fit */
        {2.5, 4}, /* 11.5 + 1 = 12.5 vs 12 + 1 */
        {3, 2},   /* 9.5 vs 11.5 + 2 */
        {3.9, 2}, /* 9.5 + 1.8 = 11.3 vs 11.5 + 3.8 */
        {4, 1},   /* 8 vs 9.5 + 2 */
        {4.5, 1}, /* 8 + 1 = 9 vs 9.5 + 3 */
        {5, 0},   /* 9 vs 8 + 2: slower than T* */
        {10, 0},  /* 9 + 10 = 19 vs 8 + 12 = 20 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t k = 99;
        assert_int_equal(prs_frontier_lookup(f, cases[i].t_prime, &k), 0);
        if (k != cases[i].k)
            fail_msg("T' = %g: plan %zu, want %zu", cases[i].t_prime, k, cases[i].k);
    }
    /* The paper's rule at T' = 10 keeps T* (4, 8): 8 + 2 * 6 = 20 J against the lookup's 19 J */
    prs_emu_point pts[5];
    for (size_t i = 0; i < 5; i++) {
        pts[i].time_s = prs_frontier_point_at(f, i)->eval_time_s;
        pts[i].energy_j = prs_frontier_point_at(f, i)->eval_energy_j;
    }
    size_t kp;
    assert_int_equal(prs_emu_paper_rule(pts, 5, 10, &kp), 0);
    assert_int_equal(kp, 1);
    prs_frontier_free(f);

    prs_pipeline pipe = {2, 1, PRS_SCHEDULE_1F1B, 1.0, 1.0, 0, 0};
    int base[4] = {1, 1, 1, 1};
    prs_frontier *empty = prs__frontier_new(&pipe, PRS_COST_EXP, base);
    size_t k;
    assert_int_equal(prs_frontier_lookup(empty, 3, &k), PRS_ERANGE);
    prs_frontier_free(empty);
}

/* With no blocking power the blocking term vanishes: the least energy plan within T'. */
static void test_zero_blocking_power(void **state)
{
    (void)state;
    prs_frontier *f = hand_frontier();
    f->pipe.blocking_power_w = 0;
    size_t k;
    assert_int_equal(prs_frontier_lookup(f, 10, &k), 0);
    assert_int_equal(k, 1);
    assert_int_equal(prs_frontier_lookup(f, 3.5, &k), 0);
    assert_int_equal(k, 2);
    prs_frontier_free(f);
}

static prs_profile *synth(const char *gpu, int stages, double last)
{
    prs_synth_opts o;
    prs_synth_opts_init(&o);
    o.gpu = prs_gpu_preset_find(gpu);
    o.stages = stages;
    double imb[16];
    for (int s = 0; s < stages; s++)
        imb[s] = s == stages - 1 ? last : 1.0;
    o.imbalance = imb;
    o.n_imbalance = stages;
    prs_profile *p = NULL;
    prs_error err = {0, ""};
    if (prs_synth_profile(&o, &p, &err)) fail_msg("synth: %s", err.msg);
    return p;
}

/* The lookup at T' = tp against brute force over the frontier (block_w: the blocking power of a
 * pipeline), and never more energy than the paper's rule on the same (evaluated) figures. */
static void check_lookup_at(const prs_frontier *f, size_t c, double tp, double block_w)
{
    size_t n = prs_frontier_size(f);
    size_t k;
    assert_int_equal(prs_frontier_lookup(f, tp, &k), 0);
    const prs_frontier_point *got = prs_frontier_point_at(f, k);
    assert_true(got->eval_time_s <= tp + 1e-9);
    double obj = got->eval_energy_j + block_w * (tp - got->eval_time_s);
    for (size_t i = 0; i < n; i++) { /* brute force */
        const prs_frontier_point *q = prs_frontier_point_at(f, i);
        if (q->eval_time_s > tp) continue;
        double o2 = q->eval_energy_j + block_w * (tp - q->eval_time_s);
        if (o2 < obj - 1e-9 * fabs(obj))
            fail_msg("case %zu T' %.6g: plan %zu (%.9g J) beats the lookup's %zu "
                     "(%.9g J)",
                     c, tp, i, o2, k, obj);
    }
    /* never more energy than the paper's rule on the same (evaluated) figures */
    size_t kp;
    assert_int_equal(prs_frontier_find_time(f, tp, &kp, NULL), 0);
    const prs_frontier_point *pp = prs_frontier_point_at(f, kp);
    assert_true(obj <= pp->eval_energy_j + block_w * (tp - pp->eval_time_s) + 1e-9);
}

/* The lookup rule over the frontier of case c: the fastest plan at 0, the cheapest plan from the
 * fastest time to past the slowest, the slowest plan past it. */
static void check_lookups(const prs_frontier *f, size_t c, double block_w)
{
    size_t n = prs_frontier_size(f);
    double fastest = INFINITY, slowest = 0;
    for (size_t i = 0; i < n; i++) {
        double t = prs_frontier_point_at(f, i)->eval_time_s;
        if (t < fastest) fastest = t;
        if (t > slowest) slowest = t;
    }
    size_t k0;
    assert_int_equal(prs_frontier_lookup(f, 0, &k0), 0);
    assert_true(prs_frontier_point_at(f, k0)->eval_time_s == fastest);
    for (size_t i = 0; i < n; i++) {
        const prs_frontier_point *q = prs_frontier_point_at(f, i);
        if (q->eval_time_s == fastest)
            assert_true(prs_frontier_point_at(f, k0)->eval_energy_j <= q->eval_energy_j);
    }
    for (int step = 0; step <= 40; step++)
        check_lookup_at(f, c, fastest + (slowest * 1.1 - fastest) * step / 40.0, block_w);
    /* past the slowest plan, the lookup rule takes the slowest plan (blocking is sunk:
     * only the compute energy's effective cost differs, and it falls with time) */
    size_t kl;
    assert_int_equal(prs_frontier_lookup(f, slowest * 2, &kl), 0);
    assert_true(prs_frontier_point_at(f, kl)->eval_time_s >= slowest - 0.05 * slowest);
}

/* the emulation: lookup savings never below the exact paper-rule ones */
static void check_emulated_savings(const prs_profile *p, const prs_frontier *f,
                                   const prs_plan_opts *o, size_t c)
{
    prs_error err = {0, ""};
    double factors[51];
    for (int i = 0; i <= 50; i++)
        factors[i] = 1 + i * 0.01;
    prs_emulate_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.plan = *o;
    eo.pipelines = 8;
    eo.tp = 4;
    eo.stragglers = factors;
    eo.nstragglers = 51;
    prs_emulation *em = NULL;
    if (prs_emulate_frontier(p, f, &eo, &em, &err)) fail_msg("emulate: %s", err.msg);
    const prs_emu_summary *ex = prs_emulation_get(em, PRS_EMU_EXACT, PRS_EMU_PERSEUS);
    const prs_emu_summary *lk = prs_emulation_get(em, PRS_EMU_LOOKUP, PRS_EMU_PERSEUS);
    assert_non_null(ex);
    assert_non_null(lk);
    assert_null(prs_emulation_get(em, PRS_EMU_LOOKUP, PRS_EMU_UNIFORM));
    assert_true(lk->intrinsic_saving_pp == ex->intrinsic_saving_pp);
    for (size_t i = 0; i < 51; i++) {
        if (lk->rows[i].saving < ex->rows[i].saving - 1e-9)
            fail_msg("case %zu s %.2f: lookup %.6f %% < exact %.6f %%", c, factors[i],
                     lk->rows[i].saving, ex->rows[i].saving);
        assert_true(lk->rows[i].saving_pp >= ex->rows[i].saving_pp - 1e-9);
    }
    prs_emulation_free(em);
}

static void test_planned_frontiers(void **state)
{
    (void)state;
    static const struct {
        const char *gpu;
        double last, unit, power;
        int stages, mbs;
        prs_cost_model model;
    } cases[] = {
        {"a100", 1.07, 0.001, 83.64, 4, 6, PRS_COST_EXP},
        {"a100", 0.9, 0.001, 83.64, 4, 6, PRS_COST_HULL},
        {"a40", 1.07, 0.0001, 70.38, 3, 4, PRS_COST_EXP},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        prs_profile *p = synth(cases[c].gpu, cases[c].stages, cases[c].last);
        prs_plan_opts o;
        prs_plan_opts_default(&o);
        o.pipe.stages = cases[c].stages;
        o.pipe.microbatches = cases[c].mbs;
        o.pipe.unit_time_s = cases[c].unit;
        o.pipe.blocking_power_w = cases[c].power;
        o.cost_model = cases[c].model;
        prs_frontier *f = NULL;
        prs_error err = {0, ""};
        if (prs_plan(p, &o, &f, &err)) fail_msg("plan: %s", err.msg);
        assert_true(prs_frontier_size(f) > 10);
        check_lookups(f, c, cases[c].stages * cases[c].power);
        check_emulated_savings(p, f, &o, c);
        prs_frontier_free(f);
        prs_profile_free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_frontier),
        cmocka_unit_test(test_zero_blocking_power),
        cmocka_unit_test(test_planned_frontiers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
