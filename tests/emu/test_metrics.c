/* The paper's metric formulas (docs/emulator.md) on tiny hand-made frontiers whose every
 * figure is worked out by hand below; the paper's selection rule; the artifact's rounding of
 * tstar; the all-max baseline energy on a profile small enough to lay out by hand; and the parser
 * of straggler factors (lists, ranges, errors). */
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "perseus/emulator.h"
#include "perseus/planner.h"
#include "perseus/profile.h"

static void close_to(double a, double b, const char *what, int line)
{
    if (!(fabs(a - b) <= 1e-9 * (1 + fabs(b))))
        fail_msg("line %d: %s = %.17g, want %.17g", line, what, a, b);
}
#define CLOSE(a, b) close_to((a), (b), #a, __LINE__)

/* Frontier, slowest first: energy falls to T* = 4 then rises to T_min = 2 (unimodal). */
static const prs_emu_point frontier[] = {{5, 9}, {4, 8}, {3, 9.5}, {2, 12}};
#define NPTS (sizeof frontier / sizeof frontier[0])

static void test_paper_rule(void **state)
{
    (void)state;
    size_t k = 99;
    assert_int_equal(prs_emu_paper_rule(frontier, NPTS, 2, &k), 0);
    assert_int_equal(k, 3); /* only T_min fits */
    assert_int_equal(prs_emu_paper_rule(frontier, NPTS, 3, &k), 0);
    assert_int_equal(k, 2);
    assert_int_equal(prs_emu_paper_rule(frontier, NPTS, 3.9, &k), 0);
    assert_int_equal(k, 2);
    /* min(T', T*): past T* the least-energy point stays T*, never a slower one */
    assert_int_equal(prs_emu_paper_rule(frontier, NPTS, 4, &k), 0);
    assert_int_equal(k, 1);
    assert_int_equal(prs_emu_paper_rule(frontier, NPTS, 100, &k), 0);
    assert_int_equal(k, 1);
    /* within 1e-9 s counts as meeting T' (times are products like s * T_min) */
    assert_int_equal(prs_emu_paper_rule(frontier, NPTS, 3 - 1e-12, &k), 0);
    assert_int_equal(k, 2);
    k = 77;
    assert_int_equal(prs_emu_paper_rule(frontier, NPTS, 1.5, &k), PRS_ERANGE);
    assert_int_equal(k, 77);
    /* ties in energy go to the faster point */
    prs_emu_point tie[] = {{5, 7}, {4, 7}, {3, 9}};
    assert_int_equal(prs_emu_paper_rule(tie, 3, 10, &k), 0);
    assert_int_equal(k, 1);
}

static void test_round2(void **state)
{
    (void)state;
    /* expected values are Python's round(x, 2) */
    static const double in[] = {
        1.135, 2.675, 1.125, 1.145, 1.155, 0.995, 1.005, 1.015, 1.375, 1.1480482611781407, 1.2};
    static const double want[] = {1.14, 2.67, 1.12, 1.15, 1.16, 0.99, 1.0, 1.01, 1.38, 1.15, 1.2};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        double got = prs_emu_round2(in[i]);
        if (got != want[i]) fail_msg("round2(%.17g) = %.17g, want %.17g", in[i], got, want[i]);
    }
}

/* Job of the worked examples: N = 4 pipelines of 2 GPUs, tp 1, 1 W blocking; E_base = 15 at
 * T_min = 2; Perseus's fastest plan 12 J. */
static prs_emu_job job4(int tp)
{
    prs_emu_job j = {4, 2, tp, 1.0};
    return j;
}

static prs_emu_inputs perseus_at(double s)
{
    size_t k = 0;
    assert_int_equal(prs_emu_paper_rule(frontier, NPTS, s * 2, &k), 0);
    prs_emu_inputs in = {2, 15, 2, 12, frontier[k].time_s, frontier[k].energy_j};
    return in;
}

static void test_metrics_by_hand(void **state)
{
    (void)state;
    prs_emu_job j = job4(1);
    prs_emu_metrics m;
    prs_emu_inputs in = perseus_at(1.5);
    /* s = 1.5: T' = 3, choice (3, 9.5); B = 1 W * 1 * 2 GPUs * (3 - 2) s = 2 J
     *   E_job_base = 1.5*15 + 3*(15 + 2) = 73.5
     *   E_job_intr = 1.5*12 + 3*(12 + 2) = 60
     *   E_job_P    = 1.5*12 + 3*(9.5 + 0) = 46.5 */
    assert_int_equal(prs_emu_metrics_compute(&j, 1.5, &in, &m, NULL), 0);
    CLOSE(m.t_prime_s, 3);
    CLOSE(m.choice_time_s, 3);
    CLOSE(m.job_base_energy_j, 73.5);
    CLOSE(m.job_intr_energy_j, 60);
    CLOSE(m.job_energy_j, 46.5);
    CLOSE(m.saving, 100 * (1 - 46.5 / 73.5));
    CLOSE(m.intrinsic_saving, 100 * (1 - 60 / 73.5));
    CLOSE(m.extrinsic_saving, 100 * (1 - 46.5 / 60));
    CLOSE(m.saving_pp, 100 * (1 - 9.5 / 17));
    assert_true(m.tstar == 1.5);

    /* s = 2.5: T' = 5 > T* = 4, so the choice is (4, 8) and it blocks 1 s; B = 6 J
     *   E_job_base = 2.5*15 + 3*21 = 100.5; E_job_intr = 2.5*12 + 3*18 = 84;
     *   E_job_P = 2.5*12 + 3*(8 + 2) = 60 */
    in = perseus_at(2.5);
    assert_int_equal(prs_emu_metrics_compute(&j, 2.5, &in, &m, NULL), 0);
    CLOSE(m.choice_time_s, 4);
    CLOSE(m.job_base_energy_j, 100.5);
    CLOSE(m.job_intr_energy_j, 84);
    CLOSE(m.job_energy_j, 60);
    CLOSE(m.saving, 100 * (1 - 60 / 100.5));
    CLOSE(m.intrinsic_saving, 100 * (1 - 84 / 100.5));
    CLOSE(m.extrinsic_saving, 100 * (1 - 60 / 84.0));
    CLOSE(m.saving_pp, 100 * (1 - 10 / 21.0));
    assert_true(m.tstar == 2.0);

    /* s = 1: no straggler; every saving is the intrinsic one, 100 (1 - 12/15) = 20 % */
    in = perseus_at(1);
    assert_int_equal(prs_emu_metrics_compute(&j, 1, &in, &m, NULL), 0);
    CLOSE(m.saving, 20);
    CLOSE(m.intrinsic_saving, 20);
    CLOSE(m.extrinsic_saving, 0);
    CLOSE(m.saving_pp, 20);
    CLOSE(prs_emu_intrinsic_saving(12, 15), 20);
    assert_true(m.tstar == 1.0);
}

/* tp multiplies every absolute energy and leaves every percentage unchanged. */
static void test_tp_scales_energies_only(void **state)
{
    (void)state;
    for (int step = 0; step <= 8; step++) {
        double s = 1 + 0.25 * step;
        prs_emu_job j1 = job4(1), j8 = job4(8);
        prs_emu_inputs in = perseus_at(s);
        prs_emu_metrics a, b;
        assert_int_equal(prs_emu_metrics_compute(&j1, s, &in, &a, NULL), 0);
        assert_int_equal(prs_emu_metrics_compute(&j8, s, &in, &b, NULL), 0);
        CLOSE(b.job_energy_j, 8 * a.job_energy_j);
        CLOSE(b.job_base_energy_j, 8 * a.job_base_energy_j);
        CLOSE(b.job_intr_energy_j, 8 * a.job_intr_energy_j);
        CLOSE(b.choice_energy_j, 8 * a.choice_energy_j);
        CLOSE(b.saving, a.saving);
        CLOSE(b.intrinsic_saving, a.intrinsic_saving);
        CLOSE(b.extrinsic_saving, a.extrinsic_saving);
        CLOSE(b.saving_pp, a.saving_pp);
        assert_true(b.tstar == a.tstar);
    }
}

/* A single pipeline cannot be held back by anyone: its saving is the intrinsic one at every s. */
static void test_single_pipeline(void **state)
{
    (void)state;
    prs_emu_job j = {1, 2, 1, 1.0};
    for (int step = 0; step <= 4; step++) {
        double s = 1 + 0.5 * step;
        prs_emu_inputs in = perseus_at(s);
        prs_emu_metrics m;
        assert_int_equal(prs_emu_metrics_compute(&j, s, &in, &m, NULL), 0);
        CLOSE(m.saving, 20);
        CLOSE(m.extrinsic_saving, 0);
    }
}

/* The exact variant: the baseline and the strategy have different no-slowdown times. */
static void test_metrics_distinct_base_time(void **state)
{
    (void)state;
    prs_emu_job j = {3, 2, 2, 0.5};
    /* base 10 s / 40 J; strategy 8 s / 30 J; non-stragglers pick (11, 28) at s = 1.5 (T' = 12)
     * pw = 0.5 W * 2 tp * 2 stages = 2 W; B_base = 2*(15 - 10) = 10; B0 = 2*(12 - 8) = 8
     * (times 2 for tp): E_base 80, E0 60, e* 56 + 2*(12 - 11) = 58
     * E_job_base = 1.5*80 + 2*(80 + 10) = 300; E_job_intr = 1.5*60 + 2*(60 + 8) = 226;
     * E_job = 1.5*60 + 2*58 = 206 */
    prs_emu_inputs in = {10, 40, 8, 30, 11, 28};
    prs_emu_metrics m;
    assert_int_equal(prs_emu_metrics_compute(&j, 1.5, &in, &m, NULL), 0);
    CLOSE(m.t_prime_s, 12);
    CLOSE(m.job_base_energy_j, 300);
    CLOSE(m.job_intr_energy_j, 226);
    CLOSE(m.job_energy_j, 206);
    CLOSE(m.choice_energy_j, 58);
    CLOSE(m.saving_pp, 100 * (1 - 58 / 90.0));
    assert_true(m.tstar == prs_emu_round2(11 / 8.0));
}

static void test_metrics_errors(void **state)
{
    (void)state;
    prs_emu_inputs in = perseus_at(1);
    prs_emu_metrics m;
    prs_error err = {0, ""};
    prs_emu_job j = job4(1);
    assert_int_equal(prs_emu_metrics_compute(&j, 0.99, &in, &m, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, ">= 1"));
    assert_int_equal(prs_emu_metrics_compute(&j, NAN, &in, &m, &err), PRS_EINVAL);
    j.pipelines = 0;
    assert_int_equal(prs_emu_metrics_compute(&j, 1, &in, &m, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "pipelines"));
    j = job4(0);
    assert_int_equal(prs_emu_metrics_compute(&j, 1, &in, &m, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "tp"));
    j = job4(1);
    j.pipelines = INT_MAX;
    j.tp = INT_MAX;
    assert_int_equal(prs_emu_metrics_compute(&j, 1, &in, &m, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "GPUs"));
    j = job4(1);
    j.blocking_power_w = -1;
    assert_int_equal(prs_emu_metrics_compute(&j, 1, &in, &m, &err), PRS_EINVAL);
    j = job4(1);
    in.base_energy_j = 0;
    assert_int_equal(prs_emu_metrics_compute(&j, 1, &in, &m, &err), PRS_EINVAL);
}

/* ---- The all-max baseline energy, Table 6's E_base, on a profile laid out by hand ---- */

static prs_profile *tiny_profile(void)
{
    /* Two identical stages; times are whole seconds so quantization (unit 1 s) is exact. */
    static const struct {
        prs_instr in;
        int f;
        double t, e;
    } rows[] = {{PRS_FORWARD, 1000, 10, 10}, {PRS_FORWARD, 800, 12, 9},
                {PRS_FORWARD, 600, 15, 9.5}, {PRS_BACKWARD, 1000, 20, 20},
                {PRS_BACKWARD, 800, 24, 17}, {PRS_BACKWARD, 600, 30, 18}};
    prs_profile *p = prs_profile_new();
    assert_non_null(p);
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            prs_profile_row r = {s, rows[i].in, rows[i].f, rows[i].t, rows[i].e, 0};
            assert_int_equal(prs_profile_add(p, &r, NULL), 0);
        }
    return p;
}

static void test_allmax_energy(void **state)
{
    (void)state;
    prs_profile *p = tiny_profile();
    prs_pipeline pipe = {2, 2, PRS_SCHEDULE_1F1B, 1.0, 0.1, 0, 0};
    /* recipe: sum over stages of M (e_F + e_B) + P_b (T - M (t_F + t_B))
     *       = 2 * [2 * 30 + 0.1 * (T - 2 * 30)] */
    double e;
    assert_int_equal(prs_emu_allmax_energy(p, &pipe, 90, &e, NULL), 0);
    CLOSE(e, 2 * (60 + 0.1 * 30));
    assert_int_equal(prs_emu_allmax_energy(p, &pipe, 100, &e, NULL), 0);
    CLOSE(e, 2 * (60 + 0.1 * 40));
    /* the exact evaluation of all-max at its own critical path (90 s) agrees here, since the
     * times are whole units */
    int plan[8];
    double t, ee;
    assert_int_equal(prs_baseline_allmax(p, &pipe, plan, NULL), 0);
    assert_int_equal(prs_evaluate_plan(p, &pipe, plan, &t, &ee, NULL), 0);
    CLOSE(t, 90);
    assert_int_equal(prs_emu_allmax_energy(p, &pipe, t, &e, NULL), 0);
    CLOSE(ee, e);
    prs_error err = {0, ""};
    prs_pipeline bad = pipe;
    bad.stages = 3; /* the profile has 2 */
    assert_int_equal(prs_emu_allmax_energy(p, &bad, 90, &e, &err), PRS_EPARSE);
    assert_non_null(strstr(err.msg, "stage 2"));
    prs_profile_free(p);
}

/* ---- Straggler factors ---- */

static void parse_ok(const char *spec, const double *want, size_t nwant)
{
    double *v = NULL;
    size_t n = 0;
    prs_error err = {0, ""};
    if (prs_straggler_parse(spec, &v, &n, &err)) fail_msg("'%s': %s", spec, err.msg);
    if (n != nwant) {
        fail_msg("'%s': %zu values, want %zu", spec, n, nwant);
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (v[i] != want[i]) fail_msg("'%s'[%zu] = %.17g, want %.17g", spec, i, v[i], want[i]);
    free(v);
}

static void parse_bad(const char *spec, const char *pattern)
{
    static const double keep[] = {1.5};
    double *v = malloc(sizeof *v);
    assert_non_null(v);
    v[0] = keep[0];
    size_t n = 1;
    prs_error err = {0, ""};
    int rc = prs_straggler_parse(spec, &v, &n, &err);
    if (rc != PRS_EINVAL) fail_msg("'%s' accepted (rc %d)", spec, rc);
    if (!strstr(err.msg, pattern))
        fail_msg("'%s': message '%s' lacks '%s'", spec, err.msg, pattern);
    if (strchr(err.msg, '\n')) fail_msg("'%s': message spans lines", spec);
    assert_int_equal(n, 1); /* unchanged on error */
    assert_true(v[0] == 1.5);
    free(v);
}

static void test_straggler_lists(void **state)
{
    (void)state;
    parse_ok("1.2", (double[]){1.2}, 1);
    parse_ok("1.1 1.2", (double[]){1.1, 1.2}, 2);
    parse_ok("1.1,1.2", (double[]){1.1, 1.2}, 2);
    parse_ok(" 1.1 , 1.2\t1.3 ", (double[]){1.1, 1.2, 1.3}, 3);
    parse_ok("1", (double[]){1.0}, 1);
    parse_ok("1.5,1.1", (double[]){1.5, 1.1}, 2); /* order kept */
    parse_ok("1e0", (double[]){1.0}, 1);
}

static void test_straggler_ranges(void **state)
{
    (void)state;
    double *v = NULL;
    size_t n = 0;
    assert_int_equal(prs_straggler_parse("1.01:1.50:0.01", &v, &n, NULL), 0);
    assert_int_equal(n, 50);
    for (size_t i = 0; i < n; i++) { /* each is exactly the decimal one would type */
        char buf[16];
        snprintf(buf, sizeof buf, "%.2f", 1.01 + 0.01 * (double)i);
        if (v[i] != strtod(buf, NULL)) fail_msg("value %zu = %.17g, want %s", i, v[i], buf);
    }
    assert_true(v[6] == 1.07); /* 1.01 + 6 * 0.01 is 1.0700000000000001 in binary */
    assert_true(v[49] == 1.5);
    /* appending: a second spec adds to the first */
    assert_int_equal(prs_straggler_parse("2,3:4:0.5", &v, &n, NULL), 0);
    assert_int_equal(n, 54);
    assert_true(v[50] == 2 && v[51] == 3 && v[52] == 3.5 && v[53] == 4);
    free(v);
    /* float steps that do not land exactly on STOP: 1.0 + 3 * 0.1 = 1.3000000000000003 */
    parse_ok("1.0:1.3:0.1", (double[]){1.0, 1.1, 1.2, 1.3}, 4);
    parse_ok("1:2:0.5", (double[]){1, 1.5, 2}, 3);
    parse_ok("1.2:1.2:0.1", (double[]){1.2}, 1);
    parse_ok("1:1.05:0.1", (double[]){1}, 1); /* STOP not reached: not included */
    parse_ok("1.1, 1.2:1.3:0.1", (double[]){1.1, 1.2, 1.3}, 3);
}

static void test_straggler_errors(void **state)
{
    (void)state;
    parse_bad("0.9", "below 1");
    parse_bad("-1", "below 1");
    parse_bad("abc", "not a number");
    parse_bad("nan", "not a number");
    parse_bad("inf", "not a number");
    parse_bad("1.2x", "not a number");
    parse_bad("", "no straggler factor");
    parse_bad("   ", "no straggler factor");
    parse_bad(",", "empty");
    parse_bad("1.1,,1.2", "empty");
    parse_bad("1.1,", "empty");
    parse_bad(",1.1", "empty");
    parse_bad("1:2", "START:STOP:STEP");
    parse_bad("1:2:3:4", "START:STOP:STEP");
    parse_bad("1::0.1", "START:STOP:STEP");
    parse_bad("1:x:0.1", "START:STOP:STEP");
    parse_bad("1:2:0", "step must be > 0");
    parse_bad("1:2:-0.1", "step must be > 0");
    parse_bad("2:1:0.1", "STOP is below START");
    parse_bad("0.5:1.5:0.1", "starts below 1");
    parse_bad("1:200001:1", "too many");
    parse_bad("1.1 0.5", "below 1"); /* one bad item rejects the whole spec */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paper_rule),       cmocka_unit_test(test_round2),
        cmocka_unit_test(test_metrics_by_hand),  cmocka_unit_test(test_tp_scales_energies_only),
        cmocka_unit_test(test_single_pipeline),  cmocka_unit_test(test_metrics_distinct_base_time),
        cmocka_unit_test(test_metrics_errors),   cmocka_unit_test(test_allmax_energy),
        cmocka_unit_test(test_straggler_lists),  cmocka_unit_test(test_straggler_ranges),
        cmocka_unit_test(test_straggler_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
