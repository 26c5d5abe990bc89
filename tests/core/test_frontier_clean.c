/* The clean frontier and the planner's edges (docs/planner.md, 'Clean frontier', 'Limits'):
 *   - every clean frontier of the test profiles (the profiles in examples/; the SOSP'24 A100
 * profiles at M = 12 when $PRS_SHARED_DIR has them) has no plan beaten by a faster plan plus
 * blocking power over the gap, and strictly falling evaluated times; every plan evaluates to its
 *     figures; cleaning keeps what the lookup rule and the least-energy search pick (exp), or
 *     something no costlier and at some times cheaper (hull, whose clean frontier also has plans
 *     rounded along the relaxed schedule that the raw one leaves out);
 *   - a profile with one achievable time gives a one-plan frontier;
 *   - the point limit refuses, before planning, with the smallest unit time that fits;
 *   - a measured time too many units long is an error, never an overflow;
 *   - the progress callback fires throughout a long run. */
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

#include "perseus/clock.h"
#include "perseus/gpumodel.h"
#include "perseus/planner.h"
#include "perseus/synth.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static prs_profile *load(const char *path)
{
    prs_profile *p = NULL;
    prs_error err = {0, ""};
    if (prs_profile_load(path, &p, &err)) return NULL;
    return p;
}

static prs_profile *load_example(void)
{
    const char *src = getenv("PRS_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/examples/a100-8stage.csv", src ? src : ".");
    prs_profile *p = load(path);
    assert_non_null(p);
    return p;
}

static prs_profile *load_paper(const char *model)
{
    const char *dir = getenv("PRS_SHARED_DIR");
    if (!dir || !*dir) return NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/data/sosp24/stage_profile/%s+a100_sxm_bf16.csv", dir, model);
    return load(path);
}

static void opts_for(prs_plan_opts *o, int S, int M, double unit_s, prs_cost_model model,
                     prs_frontier_kind kind)
{
    prs_plan_opts_default(o);
    o->pipe.stages = S;
    o->pipe.microbatches = M;
    o->pipe.unit_time_s = unit_s;
    o->pipe.blocking_power_w = 83.64;
    o->cost_model = model;
    o->frontier = kind;
}

static prs_frontier *plan_ok(const prs_profile *p, const prs_plan_opts *o)
{
    prs_frontier *f = NULL;
    prs_error err = {0, ""};
    if (prs_plan(p, o, &f, &err)) fail_msg("prs_plan: %s", err.msg);
    return f;
}

/* Plans on f that a faster plan (or an equally fast, cheaper one), charged blocking power until
 * the slower one ends, costs no more than (dominated); neighbours out of strictly falling
 * evaluated time (equal times count too); and how much slower than an earlier plan a later one
 * evaluates, at worst (*worst_s). */
static void count_faults(const prs_frontier *f, size_t *dominated, size_t *reversed,
                         double *worst_s)
{
    const prs_pipeline *pipe = prs_frontier_pipeline(f);
    double bw = pipe->stages * pipe->blocking_power_w;
    size_t n = prs_frontier_size(f);
    *dominated = *reversed = 0;
    *worst_s = 0;
    double fastest = INFINITY; /* of the plans before */
    for (size_t j = 0; j < n; j++) {
        const prs_frontier_point *b = prs_frontier_point_at(f, j);
        int beaten = 0;
        for (size_t i = 0; i < n && !beaten; i++) {
            const prs_frontier_point *a = prs_frontier_point_at(f, i);
            if (!(a->eval_time_s < b->eval_time_s ||
                  (a->eval_time_s == b->eval_time_s && a->eval_energy_j < b->eval_energy_j)))
                continue;
            beaten = a->eval_energy_j + bw * (b->eval_time_s - a->eval_time_s) <= b->eval_energy_j;
        }
        *dominated += (size_t)beaten;
        if (j > 0 && b->eval_time_s >= prs_frontier_point_at(f, j - 1)->eval_time_s) (*reversed)++;
        if (j > 0 && b->eval_time_s - fastest > *worst_s) *worst_s = b->eval_time_s - fastest;
        if (b->eval_time_s < fastest) fastest = b->eval_time_s;
    }
}

/* Evaluated energy of plan k charged blocking power up to time t (>= its time). */
static double charged(const prs_frontier *f, size_t k, double t)
{
    const prs_pipeline *pipe = prs_frontier_pipeline(f);
    const prs_frontier_point *pt = prs_frontier_point_at(f, k);
    return pt->eval_energy_j + pipe->stages * pipe->blocking_power_w * (t - pt->eval_time_s);
}

/* hull: the clean frontier also draws on the plans rounded along the relaxed schedule, which
 * the raw one leaves out; so neither the least-energy plan within a time nor the lookup rule's
 * plan for a straggler (charged up to the straggler's time) is ever costlier on the clean
 * frontier than on the raw one. Returns at how many of the times either is cheaper. */
static size_t better_choices(const prs_frontier *raw, const prs_frontier *clean)
{
    size_t n = prs_frontier_size(raw), cheaper = 0;
    double t0 = prs_frontier_point_at(raw, n - 1)->eval_time_s;
    for (int s = 0; s <= 40; s++) {
        double t = t0 * (1 + 0.01 * s);
        size_t a, b;
        assert_int_equal(prs_frontier_lookup(raw, t, &a), 0);
        assert_int_equal(prs_frontier_lookup(clean, t, &b), 0);
        double ta = fmax(t, prs_frontier_point_at(raw, a)->eval_time_s);
        double tb = fmax(t, prs_frontier_point_at(clean, b)->eval_time_s);
        double la = charged(raw, a, ta), lb = charged(clean, b, tb);
        assert_true(lb <= la + 1e-9 * fabs(la));
        int better = lb < la - 1e-9 * fabs(la);
        if (prs_frontier_find_time(raw, t, &a, NULL) == 0) {
            assert_int_equal(prs_frontier_find_time(clean, t, &b, NULL), 0);
            double ea = prs_frontier_point_at(raw, a)->eval_energy_j;
            double eb = prs_frontier_point_at(clean, b)->eval_energy_j;
            assert_true(eb <= ea * (1 + 1e-12));
            better |= eb < ea;
        }
        cheaper += (size_t)better;
    }
    print_message("  the clean frontier is cheaper at %zu of 41 times\n", cheaper);
    return cheaper;
}

/* The lookup rule and the least-energy search give the same figures on raw and clean (exp; hull:
 * better_choices, whose count of cheaper times is returned; 0 for exp). */
static size_t same_choices(const prs_frontier *raw, const prs_frontier *clean)
{
    if (prs_frontier_cost_model(raw) == PRS_COST_HULL) return better_choices(raw, clean);
    size_t n = prs_frontier_size(raw);
    double t0 = prs_frontier_point_at(raw, n - 1)->eval_time_s;
    for (int s = 0; s <= 40; s++) {
        double t = t0 * (1 + 0.01 * s);
        size_t a, b;
        assert_int_equal(prs_frontier_lookup(raw, s ? t : 0, &a), 0);
        assert_int_equal(prs_frontier_lookup(clean, s ? t : 0, &b), 0);
        assert_true(prs_frontier_point_at(raw, a)->eval_time_s ==
                    prs_frontier_point_at(clean, b)->eval_time_s);
        assert_true(prs_frontier_point_at(raw, a)->eval_energy_j ==
                    prs_frontier_point_at(clean, b)->eval_energy_j);
        if (prs_frontier_find_time(raw, t, &a, NULL) == 0) {
            assert_int_equal(prs_frontier_find_time(clean, t, &b, NULL), 0);
            assert_true(prs_frontier_point_at(raw, a)->eval_energy_j ==
                        prs_frontier_point_at(clean, b)->eval_energy_j);
        }
    }
    return 0;
}

/* Every kept point carries its plan: re-evaluating it gives the stored figures. */
static void plans_match(const prs_profile *p, const prs_frontier *f)
{
    const prs_pipeline *pipe = prs_frontier_pipeline(f);
    size_t nops = (size_t)(pipe->stages * prs_ops_per_stage(pipe)), n = prs_frontier_size(f);
    int *clocks = malloc(sizeof *clocks * nops);
    assert_non_null(clocks);
    for (size_t k = 0; k < n; k++) {
        double t, e;
        assert_int_equal(prs_frontier_plan(f, k, clocks, NULL), 0);
        assert_int_equal(prs_evaluate_plan(p, pipe, clocks, &t, &e, NULL), 0);
        assert_true(t == prs_frontier_point_at(f, k)->eval_time_s);
        assert_true(e == prs_frontier_point_at(f, k)->eval_energy_j);
    }
    free(clocks);
}

/* Checks both models' frontiers of p; returns at how many times hull's clean frontier was
 * cheaper than its raw one (better_choices). */
static size_t check_profile(const char *name, const prs_profile *p, int S, int M)
{
    size_t cheaper = 0;
    prs_cost_model models[] = {PRS_COST_EXP, PRS_COST_HULL};
    for (size_t m = 0; m < NELEM(models); m++) {
        prs_plan_opts o;
        opts_for(&o, S, M, 0.001, models[m], PRS_FRONTIER_RAW);
        prs_frontier *raw = plan_ok(p, &o);
        o.frontier = PRS_FRONTIER_CLEAN;
        prs_frontier *clean = plan_ok(p, &o);
        o.frontier = PRS_FRONTIER_AUTO;
        prs_frontier *dflt = plan_ok(p, &o);
        size_t rd, rr, cd, cr;
        double rw, cw;
        count_faults(raw, &rd, &rr, &rw);
        count_faults(clean, &cd, &cr, &cw);
        print_message("%s S=%d M=%d %s: raw %zu points (%zu dominated, %zu not faster than "
                      "the one before, up to %.0f ms slower than an earlier one), clean %zu "
                      "points\n",
                      name, S, M, prs_cost_model_name(models[m]), prs_frontier_size(raw), rd, rr,
                      rw * 1e3, prs_frontier_size(clean));
        assert_int_equal(cd, 0);
        assert_int_equal(cr, 0);
        assert_true(prs_frontier_size(clean) >= 1);
        if (models[m] == PRS_COST_EXP) { /* hull's clean frontier has points raw leaves out */
            assert_true(prs_frontier_size(clean) <= prs_frontier_size(raw));
            if (rd || rr) assert_true(prs_frontier_size(clean) < prs_frontier_size(raw));
        }
        /* auto: clean for hull, the raw (reference) frontier for exp */
        assert_int_equal(prs_frontier_size(dflt), models[m] == PRS_COST_HULL
                                                      ? prs_frontier_size(clean)
                                                      : prs_frontier_size(raw));
        /* cleaning a clean frontier changes nothing */
        prs_frontier *again = NULL;
        assert_int_equal(prs_frontier_clean(clean, &again, NULL), 0);
        assert_int_equal(prs_frontier_size(again), prs_frontier_size(clean));
        cheaper += same_choices(raw, clean);
        plans_match(p, clean);
        prs_frontier_free(again);
        prs_frontier_free(dflt);
        prs_frontier_free(clean);
        prs_frontier_free(raw);
    }
    return cheaper;
}

static void test_clean_examples(void **state)
{
    (void)state;
    prs_profile *p = load_example();
    check_profile("a100-8stage", p, 8, 12);
    check_profile("a100-8stage", p, 4, 8);
    prs_profile_free(p);
    /* a noisy synthetic profile, where the roundings along the relaxed schedule win often */
    prs_synth_opts so;
    prs_synth_opts_init(&so);
    so.gpu = prs_gpu_preset_find("a40");
    assert_non_null(so.gpu);
    so.stages = 4;
    so.noise = 0.03;
    so.seed = 7;
    assert_int_equal(prs_synth_profile(&so, &p, NULL), 0);
    assert_true(check_profile("noisy A40-class", p, 4, 8) > 0);
    prs_profile_free(p);
}

static void test_clean_paper(void **state)
{
    (void)state;
    const char *models[] = {"gpt3-175b", "bloom"};
    for (size_t i = 0; i < NELEM(models); i++) {
        prs_profile *p = load_paper(models[i]);
        if (!p) prs_skip_input("no shared data: $PRS_SHARED_DIR/data/sosp24");
        assert_true(check_profile(models[i], p, 8, 12) > 0);
        prs_profile_free(p);
    }
}

/* ---- One achievable time ---- */

typedef enum shape { ONE_CLOCK, TIED, RISING } shape;

/* Two stages; per (stage, instruction): one clock; or four clocks with the same time and energy;
 * or four clocks whose energy rises as the clock falls (and time grows). */
static prs_profile *edge_profile(shape sh)
{
    prs_profile *p = prs_profile_new();
    int clocks[] = {1410, 1300, 1200, 1100};
    int n = sh == ONE_CLOCK ? 1 : 4;
    for (int s = 0; s < 2; s++)
        for (int in = 0; in < 2; in++)
            for (int c = 0; c < n; c++) {
                double t = 0.05 * (in + 1), e = 20.0 * (in + 1);
                if (sh == RISING) t *= 1 + 0.1 * c, e *= 1 + 0.2 * c;
                prs_profile_row r = {s, (prs_instr)in, clocks[c], t, e, 0};
                assert_int_equal(prs_profile_add(p, &r, NULL), 0);
            }
    return p;
}

static void test_one_plan(void **state)
{
    (void)state;
    shape shapes[] = {ONE_CLOCK, TIED, RISING};
    const char *names[] = {"one clock", "tied clocks", "energy rising as the clock falls"};
    prs_cost_model models[] = {PRS_COST_EXP, PRS_COST_HULL};
    for (size_t s = 0; s < NELEM(shapes); s++)
        for (size_t m = 0; m < NELEM(models); m++) {
            prs_profile *p = edge_profile(shapes[s]);
            prs_plan_opts o;
            opts_for(&o, 2, 2, 0.001, models[m], PRS_FRONTIER_AUTO);
            prs_frontier *f = plan_ok(p, &o);
            print_message("%s, %s: %zu plan(s)\n", names[s], prs_cost_model_name(models[m]),
                          prs_frontier_size(f));
            if (shapes[s] == RISING && models[m] == PRS_COST_EXP) {
                /* the raw exp frontier may keep slower plans; the clean one has only the fastest */
                prs_frontier *c = NULL;
                assert_int_equal(prs_frontier_clean(f, &c, NULL), 0);
                prs_frontier_free(f);
                f = c;
            }
            assert_int_equal(prs_frontier_size(f), 1);
            size_t k;
            assert_int_equal(prs_frontier_lookup(f, 0, &k), 0);
            assert_int_equal(k, 0);
            plans_match(p, f);
            prs_frontier_free(f);
            prs_profile_free(p);
        }
}

/* ---- The point limit and overflow ---- */

static void test_max_points(void **state)
{
    (void)state;
    prs_profile *p = load_example();
    prs_plan_opts o;
    opts_for(&o, 8, 12, 0.001, PRS_COST_EXP, PRS_FRONTIER_RAW);
    prs_frontier *f = plan_ok(p, &o);
    size_t n = prs_frontier_size(f);
    prs_frontier_free(f);
    /* at the limit: planned; one below: refused */
    o.max_points = (long)n;
    f = plan_ok(p, &o);
    assert_int_equal(prs_frontier_size(f), n);
    prs_frontier_free(f);
    o.max_points = (long)n - 1;
    prs_error err = {0, ""};
    assert_int_equal(prs_plan(p, &o, &f, &err), PRS_EINVAL);
    assert_null(f);
    print_message("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "use a unit time of 0.002 s"));
    /* the unit named is the smallest of the 1-2-5 series that fits */
    o.max_points = 50;
    double t0 = prs_mono_s();
    assert_int_equal(prs_plan(p, &o, &f, &err), PRS_EINVAL);
    print_message("refused in %.3f s: %s\n", prs_mono_s() - t0, err.msg);
    const char *u = strstr(err.msg, "use a unit time of ");
    assert_non_null(u);
    double unit = strtod(u + strlen("use a unit time of "), NULL), below = 0;
    const double series[] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1};
    for (size_t i = 1; i < NELEM(series); i++)
        if (fabs(series[i] - unit) < 1e-12) below = series[i - 1];
    assert_true(below > 0);
    o.pipe.unit_time_s = unit;
    f = plan_ok(p, &o);
    assert_true(prs_frontier_size(f) <= 50);
    prs_frontier_free(f);
    o.pipe.unit_time_s = below;
    assert_int_equal(prs_plan(p, &o, &f, &err), PRS_EINVAL);
    /* a tiny unit is refused up front, fast: the default limit */
    opts_for(&o, 8, 12, 1e-7, PRS_COST_HULL, PRS_FRONTIER_AUTO);
    t0 = prs_mono_s();
    assert_int_equal(prs_plan(p, &o, &f, &err), PRS_EINVAL);
    double secs = prs_mono_s() - t0;
    print_message("unit 1e-7: refused in %.3f s: %s\n", secs, err.msg);
    assert_non_null(strstr(err.msg, "limit of 1000000"));
    assert_true(secs < 30);
    o.max_points = -1;
    assert_int_equal(prs_plan(p, &o, &f, &err), PRS_EINVAL);
    prs_profile_free(p);
}

static void test_overflow(void **state)
{
    (void)state;
    /* times far beyond what a long counts in units: an error, never a conversion overflow. A
     * profile's times are at most PRS_PROFILE_MAX_TIME_S, so the unit shrinks instead: times
     * x 1e7 and the unit x 1e7 / scale give the same counts of units as times x scale. */
    double scales[] = {1e300, 1e15, 1e14, 1e12};
    for (size_t i = 0; i < NELEM(scales); i++) {
        prs_profile *p = prs_profile_new();
        for (int s = 0; s < 2; s++)
            for (int in = 0; in < 2; in++)
                for (int c = 0; c < 4; c++) {
                    prs_profile_row r = {s,
                                         (prs_instr)in,
                                         1410 - 100 * c,
                                         0.05 * (1 + 0.1 * c) * 1e7,
                                         20.0 * (1 - 0.05 * c),
                                         0};
                    assert_int_equal(prs_profile_add(p, &r, NULL), 0);
                }
        prs_plan_opts o;
        opts_for(&o, 2, 200, 0.001 * 1e7 / scales[i], PRS_COST_HULL, PRS_FRONTIER_AUTO);
        prs_frontier *f = NULL;
        prs_error err = {0, ""};
        assert_int_equal(prs_plan(p, &o, &f, &err), PRS_EINVAL);
        print_message("times x %g: %s\n", scales[i], err.msg);
        assert_non_null(strstr(err.msg, "unit time"));
        if (scales[i] >= 1e14) { /* the evaluation refuses too */
            size_t nops = (size_t)(2 * prs_ops_per_stage(&o.pipe));
            int *clocks = malloc(sizeof *clocks * nops);
            assert_non_null(clocks);
            for (size_t k = 0; k < nops; k++)
                clocks[k] = 1410;
            double t, e;
            assert_int_equal(prs_evaluate_plan(p, &o.pipe, clocks, &t, &e, &err), PRS_EINVAL);
            free(clocks);
        }
        prs_profile_free(p);
    }
}

/* ---- Progress ---- */

typedef struct progress_log {
    double last_s, max_gap_s;
    long calls, last_done, total;
    int monotone;
    long stop_after; /* calls after which the callback asks to stop (0: never) */
} progress_log;

static int on_progress(void *ud, long done, long total)
{
    progress_log *l = ud;
    double now = prs_mono_s();
    if (now - l->last_s > l->max_gap_s) l->max_gap_s = now - l->last_s;
    l->last_s = now;
    if (done < l->last_done) l->monotone = 0;
    l->last_done = done;
    l->total = total;
    l->calls++;
    return l->stop_after && l->calls >= l->stop_after;
}

static void test_progress(void **state)
{
    (void)state;
    prs_profile *p = load_example();
    prs_plan_opts o;
    opts_for(&o, 8, 12, 0.0001, PRS_COST_HULL, PRS_FRONTIER_AUTO);
    progress_log l = {prs_mono_s(), 0, 0, 0, 0, 1, 0};
    o.progress = on_progress;
    o.ud = &l;
    double t0 = l.last_s;
    prs_frontier *f = plan_ok(p, &o);
    double secs = prs_mono_s() - t0;
    print_message("%zu points in %.2f s: %ld progress calls, longest gap %.3f s\n",
                  prs_frontier_size(f), secs, l.calls, l.max_gap_s);
    assert_true(l.calls >= 2);
    assert_true(l.monotone);
    assert_int_equal(l.last_done, l.total);
    /* the gap bound: the interval plus one iteration, with room for a loaded machine */
    assert_true(l.max_gap_s < PRS_PROGRESS_INTERVAL_S + 1.0);
    prs_frontier_free(f);

    /* A callback that answers non-zero stops the run at once: PRS_ECANCELED, no frontier. */
    progress_log c = {prs_mono_s(), 0, 0, 0, 0, 1, 5};
    o.ud = &c;
    prs_error err = {0, ""};
    f = NULL;
    double c0 = prs_mono_s();
    assert_int_equal(prs_plan(p, &o, &f, &err), PRS_ECANCELED);
    double csecs = prs_mono_s() - c0;
    print_message("canceled at the 5th progress call after %.4f s (%s)\n", csecs, err.msg);
    assert_null(f);
    assert_int_equal(c.calls, 5);
    assert_true(csecs < secs / 2);

    /* prs_plan_size: the span bounds the points of the raw frontier (AUTO with hull: clean). */
    long span;
    double bytes;
    assert_int_equal(prs_plan_size(p, &o.pipe, &span, &bytes, &err), 0);
    print_message("span %ld units, tables at most %.0f bytes\n", span, bytes);
    o.frontier = PRS_FRONTIER_RAW;
    o.progress = NULL;
    f = plan_ok(p, &o);
    assert_true((long)prs_frontier_size(f) <= span + 1);
    assert_true((long)prs_frontier_size(f) * 2 > span);
    assert_true(bytes > (double)span);
    prs_frontier_free(f);
    /* prs_plan_check: this problem has a frontier; at a unit coarser than every computation it
     * has none, and the message says why; energies an iteration could not add up never get as
     * far (a profile refuses the row) */
    assert_int_equal(prs_plan_check(p, &o.pipe, NULL, &err), 0);
    prs_pipeline coarse = o.pipe;
    coarse.unit_time_s = 10;
    assert_int_equal(prs_plan_check(p, &coarse, "--unit-time", &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "--unit-time 10 s is coarser than the computations"));
    prs_profile_row big = *prs_profile_rows(p);
    big.energy_j = 1e308;
    big.freq_mhz = 7; /* a clock of its own */
    assert_int_equal(prs_profile_add(p, &big, &err), PRS_EPARSE);
    assert_non_null(strstr(err.msg, "energy"));
    prs_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clean_examples), cmocka_unit_test(test_one_plan),
        cmocka_unit_test(test_max_points),     cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_progress),       cmocka_unit_test(test_clean_paper),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
