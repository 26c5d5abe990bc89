/* The cluster and pool levels run online on reported loads (src/infer/online.c), against the
 * emulator's dynamollm (policy.c) whose decisions they share (levels.c):
 *   - on a trace whose load is constant within each peak window, reporting each window's rate
 *     at its end (the first window's at 0) gives the emulator's decisions exactly: as many
 *     instances started, re-formed and stopped, and as many pool changes skipped as not paying
 *     for themselves, some of each;
 *   - within a period nothing changes; a period acts on the past period's peak window; a change
 *     that would not pay is skipped with its saving and cost given; one that pays is made;
 *   - an emergency (a load the instances in force cannot carry) scales up at once, and only
 *     with emergencies on. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster.h"
#include "infer_hand.h"
#include "online.h"

#define WINDOWS 150 /* 60-s windows: 2.5 h */
#define TWO_PI 6.283185307179586

static hand_model model(void)
{
    return (hand_model){.pf_base_s = 0.02,
                        .pf_per_token_s = 0.00012,
                        .dc_base_s = 0.025,
                        .dc_per_seq_s = 0.0002,
                        .dc_per_ctx_s = 1e-7,
                        .busy_w = 1000,
                        .busy_w_per_mhz = 8,
                        .idle_w = 200,
                        .kv_tokens = 400000,
                        .max_batch = 128,
                        .clocks = {800, 1200, 1600, 1980},
                        .n_clocks = 4,
                        .tps = {2, 4, 8},
                        .n_tps = 3,
                        .tp_alpha = 0.3};
}

typedef struct world {
    hand_model m;
    prs_infer_perf perf;
    prs_infer_opts o;
    prs_infer_captable caps;
    prs_infer_trace t;
    double rate[WINDOWS][PRS_INFER_NCLASS]; /* each window's rate, as the emulator counts it */
} world;

/* Requests/s of the two loaded classes (SS, MM) in window w: waves of different periods. */
static double wave(int c, int w)
{
    return c == 0 ? 14 + 12 * sin(TWO_PI * w / 50.0) + 2 * sin(w * 1.7)
                  : 7 + 5 * cos(TWO_PI * w / 35.0) + sin(w * 2.3);
}

static const prs_infer_req lens[2] = {{0, 100, 50}, {0, 500, 200}}; /* SS, MM */
static const int klass[2] = {0, 4};

/* The first window carries the peak of the first cluster period (the emulator's first plan
 * looks ahead over it; the online one has only the first report). */
static int count_in(int c, int w, double period_windows)
{
    double r = wave(c, w);
    if (w == 0)
        for (int v = 1; v < (int)period_windows; v++)
            r = fmax(r, wave(c, v));
    return (int)lround(r * 60);
}

static world *world_new(void)
{
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->m = model();
    w->perf = hand_perf(&w->m);
    prs_infer_opts_default(&w->o);
    w->o.gpus = 64;
    w->o.cluster_period_s = 900;
    w->o.pool_period_s = 300;
    w->o.start_s = 600; /* costly starts: some changes do not pay */
    size_t cap = 0;
    for (int v = 0; v < WINDOWS; v++)
        for (int c = 0; c < 2; c++)
            cap += (size_t)count_in(c, v, 15);
    w->t.reqs = calloc(cap, sizeof *w->t.reqs);
    assert_non_null(w->t.reqs);
    for (int v = 0; v < WINDOWS; v++) {
        int n[2] = {count_in(0, v, 15), count_in(1, v, 15)};
        for (int c = 0; c < 2; c++)
            w->rate[v][klass[c]] = n[c] / 60.0;
        /* Interleaved, ascending: request i of class c at v*60 + i*60/n. */
        int i[2] = {0, 0};
        while (i[0] < n[0] || i[1] < n[1]) {
            double a0 = i[0] < n[0] ? v * 60.0 + i[0] * 60.0 / n[0] : INFINITY;
            double a1 = i[1] < n[1] ? v * 60.0 + i[1] * 60.0 / n[1] : INFINITY;
            int c = a0 <= a1 ? 0 : 1;
            prs_infer_req q = lens[c];
            q.arrival_s = c == 0 ? a0 : a1;
            w->t.reqs[w->t.n++] = q;
            i[c]++;
        }
    }
    prs_infer_cap_opts co;
    prs_infer_cap_opts_default(&co);
    co.probe_requests = 200;
    prs_error err = {0};
    assert_int_equal(prs_infer_captable_build(&w->perf, &w->o.classes, &co, &w->t, &w->caps, &err),
                     0);
    return w;
}

static void world_free(world *w)
{
    prs_infer_trace_free(&w->t);
    free(w);
}

/* The online levels fed the trace's windows: window 0's rate at 0, window v - 1's at v x 60. */
static prs_infer_online *run_online(const world *w, int emergencies)
{
    prs_infer_online *s = NULL;
    prs_error err = {0};
    assert_int_equal(prs_infer_online_new(&w->caps, &w->o, emergencies, &s, &err), 0);
    assert_int_equal(prs_infer_online_report(s, 0, w->rate[0], &err), 0);
    for (int v = 1; v < WINDOWS; v++) {
        if (prs_infer_online_report(s, v * 60.0, w->rate[v - 1], &err))
            fail_msg("report %d: %s", v, err.msg);
    }
    return s;
}

static void test_same_as_emulator(void **state)
{
    (void)state;
    world *w = world_new();
    prs_infer_result r;
    prs_error err = {0};
    if (prs_infer_replay(&w->t, &w->perf, &w->caps, &w->o, PRS_INFER_DYNAMOLLM, &r, &err))
        fail_msg("replay: %s", err.msg);
    prs_infer_online *s = run_online(w, 0);
    static const int kinds[] = {PRS_INFER_RECONF_START, PRS_INFER_RECONF_RESHARD,
                                PRS_INFER_RECONF_STOP, PRS_INFER_RECONF_SKIPPED};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        print_message("reconf %d: emulator %ld, online %ld\n", kinds[i], r.reconf[kinds[i]],
                      s->reconf[kinds[i]]);
        assert_int_equal(s->reconf[kinds[i]], r.reconf[kinds[i]]);
    }
    /* Not vacuous: the load moved the pools, and some moves did not pay. */
    assert_true(r.reconf[PRS_INFER_RECONF_START] + r.reconf[PRS_INFER_RECONF_RESHARD] > 0);
    assert_true(r.reconf[PRS_INFER_RECONF_SKIPPED] > 0);
    assert_int_equal(s->decisions[PRS_INFER_DEC_CLUSTER_PERIOD], (WINDOWS - 1) * 60 / 900);
    prs_infer_online_free(s);
    prs_infer_result_free(&r);
    world_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_as_emulator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
