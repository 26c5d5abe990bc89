/* The three pipeline schedules (1F1B, GPipe, Megatron-LM interleaved 1F1B) timed and planned,
 * checked against the independent construction of sched_ref.h (test_schedules.c checks the
 * orders and the DAG themselves):
 *   1. iteration times of uniform pipelines against closed forms ((M + S - 1)(f + b) for 1F1B and
 *      GPipe, Megatron-LM's M(f + b) + (S - 1)(f + b) / V for interleaving), and the evaluated
 *      timeline against a longest-path computation on the DAG built here;
 *   2. the planner runs on every schedule (both cost models): unit steps down to the all-fastest
 *      critical path. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "perseus/gpumodel.h"
#include "perseus/planner.h"
#include "perseus/profile.h"
#include "plan_int.h"
#include "sched_ref.h"

/* ---- Timing of uniform pipelines: closed forms ---- */

#define CLOCK 1000

/* A profile of `chunks` stages with one clock: every forward takes fq units, every backward bq
 * (a hair above the multiple of the unit so that flooring gives exactly fq, bq). */
static prs_profile *uniform_profile(int chunks, long fq, long bq, double unit)
{
    prs_profile *p = prs_profile_new();
    assert_non_null(p);
    for (int c = 0; c < chunks; c++)
        for (int i = 0; i < 2; i++) {
            long q = i == 0 ? fq : bq;
            prs_profile_row r = {
                c, (prs_instr)i, CLOCK, ((double)q + 1e-4) * unit, (double)q * 0.25 + 0.5 * c, 0};
            prs_error err = {0, ""};
            int rc = prs_profile_add(p, &r, &err);
            if (rc) print_message("prs_profile_add: %s\n", err.msg);
            assert_int_equal(rc, 0);
        }
    return p;
}

/* Evaluate the uniform pipeline; check the library's time, energy and timeline against the DAG
 * built here; return the iteration time in units. */
static long uniform_time(const xsched *x, long fq, long bq)
{
    char what[96];
    sched_desc(x, what, sizeof what);
    prs_pipeline p = x->pipe;
    p.blocking_power_w = 40.0;
    double unit = p.unit_time_s;
    prs_profile *prof = uniform_profile(x->C, fq, bq, unit);
    int n = x->S * x->per;
    int *clocks = malloc(sizeof *clocks * (size_t)n);
    prs_timeline_op *tl = calloc((size_t)n, sizeof *tl);
    long *dur = malloc(sizeof *dur * (size_t)n), *start = malloc(sizeof *start * (size_t)n);
    assert_true(clocks && tl && dur && start);
    double sum_e = 0;
    long sum_q = 0;
    for (int op = 0; op < n; op++) {
        clocks[op] = CLOCK;
        const xop *o = &x->ops[op];
        dur[op] = o->instr == PRS_FORWARD ? fq : bq;
        sum_q += dur[op];
        sum_e += (double)dur[op] * 0.25 + 0.5 * o->chunk;
    }
    xdag d;
    xdag_build(&d, x);
    long T = xdag_cpm(&d, dur, start);
    double t_s = -1, e_j = -1;
    prs_error err = {0, ""};
    int rc = prs_evaluate_plan(prof, &p, clocks, &t_s, &e_j, &err);
    if (rc) print_message("%s: prs_evaluate_plan: %s\n", what, err.msg);
    assert_int_equal(rc, 0);
    if (fabs(t_s - (double)T * unit) > 1e-12)
        print_message("%s f=%ld b=%ld: evaluated %.6f s, longest path here %ld units\n", what, fq,
                      bq, t_s, T);
    assert_true(fabs(t_s - (double)T * unit) <= 1e-12);
    double want_e = sum_e + p.blocking_power_w * (double)((long)x->S * T - sum_q) * unit;
    assert_true(fabs(e_j - want_e) <= 1e-9 * fabs(want_e));
    double t2 = -1, e2 = -1;
    assert_int_equal(prs_plan_timeline(prof, &p, clocks, tl, &t2, &e2, &err), 0);
    assert_true(t2 == t_s && e2 == e_j);
    for (int op = 0; op < n; op++) {
        const xop *o = &x->ops[op];
        assert_int_equal(tl[op].stage, op / x->per);
        assert_int_equal(tl[op].pos, op % x->per);
        assert_int_equal(tl[op].chunk, o->chunk);
        assert_int_equal(tl[op].microbatch, o->mb);
        assert_int_equal(tl[op].instr, o->instr);
        assert_int_equal(tl[op].freq_mhz, CLOCK);
        assert_true(fabs(tl[op].start_s - (double)start[op] * unit) <= 1e-12);
        assert_true(fabs(tl[op].end_s - (double)(start[op] + dur[op]) * unit) <= 1e-12);
    }
    /* no GPU runs two computations at once */
    for (int s = 0; s < x->S; s++)
        for (int k = 1; k < x->per; k++)
            assert_true(tl[s * x->per + k].start_s >= tl[s * x->per + k - 1].end_s - 1e-12);
    xdag_free(&d);
    free(clocks);
    free(tl);
    free(dur);
    free(start);
    prs_profile_free(prof);
    return T;
}

static const long fb_pairs[][2] = {{3, 6}, {2, 2}, {1, 3}, {4, 5}, {5, 10}, {2, 1}, {5, 3}};

static void test_time_plain(void **state)
{
    (void)state;
    prs_schedule scheds[] = {PRS_SCHEDULE_1F1B, PRS_SCHEDULE_GPIPE};
    for (size_t k = 0; k < NELEM(scheds); k++)
        for (size_t i = 0; i < NELEM(plain_cases); i++)
            for (size_t j = 0; j < NELEM(fb_pairs); j++) {
                xsched x;
                int S = plain_cases[i][0], M = plain_cases[i][1];
                xsched_init(&x, scheds[k], S, 0, M);
                long f = fb_pairs[j][0], b = fb_pairs[j][1];
                long T = uniform_time(&x, f, b);
                long want = (long)(M + S - 1) * (f + b);
                if (T != want)
                    print_message("%s S=%d M=%d f=%ld b=%ld: T = %ld, (M+S-1)(f+b) = %ld\n",
                                  prs_schedule_name(scheds[k]), S, M, f, b, T, want);
                assert_int_equal(T, want);
                xsched_free(&x);
            }
}

/* Interleaved, each chunk taking f/V and b/V: Megatron-LM's M (f + b) + (S - 1)(f + b) / V (its
 * bubble (S - 1)(f + b) / V). Units per chunk: fc = f / V, bc = b / V. It holds exactly in every
 * case here, b < f included. */
static void test_time_interleaved(void **state)
{
    (void)state;
    static const long chunk_fb[][2] = {{1, 2}, {2, 4}, {1, 1}, {3, 3}, {2, 3},
                                       {1, 3}, {2, 1}, {3, 1}, {3, 2}};
    int mismatches = 0;
    for (size_t i = 0; i < NELEM(interleaved_cases); i++)
        for (size_t j = 0; j < NELEM(chunk_fb); j++) {
            int S = interleaved_cases[i][0], V = interleaved_cases[i][1];
            int M = interleaved_cases[i][2];
            xsched x;
            xsched_init(&x, PRS_SCHEDULE_INTERLEAVED, S, V, M);
            long fc = chunk_fb[j][0], bc = chunk_fb[j][1];
            long T = uniform_time(&x, fc, bc);
            /* f = V fc, b = V bc: M (f + b) + (S - 1)(f + b) / V */
            long want = (long)M * V * (fc + bc) + (long)(S - 1) * (fc + bc);
            if (T != want) {
                print_message("interleaved S=%d V=%d M=%d f/V=%ld b/V=%ld: T = %ld, "
                              "M(f+b) + (S-1)(f+b)/V = %ld\n",
                              S, V, M, fc, bc, T, want);
                mismatches++;
            }
            xsched_free(&x);
        }
    assert_int_equal(mismatches, 0);
}

/* ---- Planning on every schedule ---- */

static long all_fastest_T(const xsched *x, const prs_profile *prof, double unit)
{
    long *qmin = malloc(sizeof *qmin * (size_t)x->C * 2);
    assert_non_null(qmin);
    for (int k = 0; k < x->C * 2; k++)
        qmin[k] = -1;
    const prs_profile_row *rows = prs_profile_rows(prof);
    for (size_t i = 0; i < prs_profile_nrows(prof); i++) {
        if (rows[i].stage >= x->C) continue;
        long q = prs__model_quantize(rows[i].time_s, unit);
        long *m = &qmin[rows[i].stage * 2 + (int)rows[i].instr];
        if (*m < 0 || q < *m) *m = q;
    }
    int n = x->S * x->per;
    long *dur = malloc(sizeof *dur * (size_t)n);
    assert_non_null(dur);
    for (int op = 0; op < n; op++) {
        dur[op] = qmin[x->ops[op].chunk * 2 + (int)x->ops[op].instr];
        assert_true(dur[op] > 0);
    }
    xdag d;
    xdag_build(&d, x);
    long T = xdag_cpm(&d, dur, NULL);
    xdag_free(&d);
    free(dur);
    free(qmin);
    return T;
}

static void check_plan(prs_schedule sched, int S, int V, int M)
{
    xsched x;
    xsched_init(&x, sched, S, V, M);
    char what[96];
    sched_desc(&x, what, sizeof what);
    prs_synth_opts so;
    prs_synth_opts_init(&so);
    so.gpu = prs_gpu_preset_find("a100");
    assert_non_null(so.gpu);
    so.stages = x.C;
    prs_profile *prof = NULL;
    prs_error err = {0, ""};
    assert_int_equal(prs_synth_profile(&so, &prof, &err), 0);
    prs_cost_model models[] = {PRS_COST_EXP, PRS_COST_HULL};
    for (size_t k = 0; k < NELEM(models); k++) {
        prs_plan_opts o;
        prs_plan_opts_default(&o);
        o.pipe = x.pipe;
        o.pipe.blocking_power_w = so.gpu->blocking_power_w;
        o.cost_model = models[k];
        o.frontier = PRS_FRONTIER_RAW; /* one point per iteration, one unit apart */
        prs_frontier *f = NULL;
        int rc = prs_plan(prof, &o, &f, &err);
        if (rc)
            print_message("%s %s: prs_plan: %s\n", what, prs_cost_model_name(models[k]), err.msg);
        assert_int_equal(rc, 0);
        size_t n = prs_frontier_size(f);
        assert_true(n > 0);
        for (size_t i = 1; i < n; i++) {
            const prs_frontier_point *a = prs_frontier_point_at(f, i - 1);
            const prs_frontier_point *b = prs_frontier_point_at(f, i);
            if (a->time_units - b->time_units != 1)
                print_message("%s %s: point %zu at %ld units, point %zu at %ld\n", what,
                              prs_cost_model_name(models[k]), i - 1, a->time_units, i,
                              b->time_units);
            assert_int_equal(a->time_units - b->time_units, 1);
        }
        long Tmin = all_fastest_T(&x, prof, o.pipe.unit_time_s);
        const prs_frontier_point *last = prs_frontier_point_at(f, n - 1);
        if (fabs(last->eval_time_s - (double)Tmin * o.pipe.unit_time_s) > 1e-12)
            print_message("%s %s: last plan evaluates to %.6f s, all-fastest path %ld units\n",
                          what, prs_cost_model_name(models[k]), last->eval_time_s, Tmin);
        assert_true(fabs(last->eval_time_s - (double)Tmin * o.pipe.unit_time_s) <= 1e-12);
        assert_int_equal(last->time_units, Tmin);
        /* the last plan re-evaluates to the same figures */
        int nclk = S * prs_ops_per_stage(&o.pipe);
        int *clk = malloc(sizeof *clk * (size_t)nclk);
        assert_non_null(clk);
        assert_int_equal(prs_frontier_plan(f, n - 1, clk, &err), 0);
        double t = 0, e = 0;
        assert_int_equal(prs_evaluate_plan(prof, &o.pipe, clk, &t, &e, &err), 0);
        assert_true(fabs(t - last->eval_time_s) <= 1e-12);
        assert_true(fabs(e - last->eval_energy_j) <= 1e-9 * fabs(e));
        const prs_pipeline *fp = prs_frontier_pipeline(f);
        assert_int_equal(fp->schedule, sched);
        assert_int_equal(prs_pipeline_chunks(fp), x.C);
        free(clk);
        prs_frontier_free(f);
    }
    prs_profile_free(prof);
    xsched_free(&x);
}

static void test_plan_every_schedule(void **state)
{
    (void)state;
    check_plan(PRS_SCHEDULE_1F1B, 3, 0, 4);
    check_plan(PRS_SCHEDULE_GPIPE, 3, 0, 4);
    check_plan(PRS_SCHEDULE_GPIPE, 2, 1, 3);
    check_plan(PRS_SCHEDULE_INTERLEAVED, 2, 2, 4);
    check_plan(PRS_SCHEDULE_INTERLEAVED, 3, 2, 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_time_plain),
        cmocka_unit_test(test_time_interleaved),
        cmocka_unit_test(test_plan_every_schedule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
