/* The fixed-cluster replay (src/infer/fixed.h) against cases computed by hand on the hand
 * backend (infer_hand.h: at TP 8 a prefill takes 1 ms a token, a decode step 10 ms, both at
 * 800 W, idle 80 W, at the top clock 2000 MHz; twice as long at 1000 MHz): the routing hook's
 * choice and rejections, TTFT and SLO attainment, the energy with idle time, and the instance
 * level's decisions (the loads it is given, the clocks applied from then on). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixed.h"
#include "infer_hand.h"

static hand_model model(void)
{
    return (hand_model){.pf_per_token_s = 0.001,
                        .dc_base_s = 0.01,
                        .busy_w = 800,
                        .idle_w = 80,
                        .kv_tokens = 1 << 20,
                        .max_batch = 4,
                        .clocks = {1000, 2000},
                        .n_clocks = 2,
                        .tps = {8},
                        .n_tps = 1};
}

/* The least loaded instance with nothing in flight, the first on ties; -1 when all are busy. */
static int route_idle(void *ud, const int *inflight, int klass, long in, long out, int *rerouted)
{
    (void)klass, (void)in, (void)out;
    int n = *(const int *)ud;
    *rerouted = 0;
    for (int i = 0; i < n; i++)
        if (inflight[i] == 0) return i;
    return -1;
}

static prs_infer_fixed_cfg *config(const prs_infer_perf *perf, int n, int *ud)
{
    prs_infer_fixed_cfg *c = calloc(1, sizeof *c);
    assert_non_null(c);
    c->n_inst = n;
    for (int i = 0; i < n; i++) {
        c->perf[i] = perf;
        c->tp[i] = 8;
        c->mhz[i] = 2000;
    }
    c->max_batched_tokens = 8192;
    prs_infer_classes_default(&c->classes);
    c->run_steps = 64;
    *ud = n;
    c->hooks = (prs_infer_fixed_hooks){ud, route_idle, NULL};
    return c;
}

/* r0 (t 0, 100 + 3 tokens) on instance 0 at 2000 MHz: prefill [0, 0.1], tokens at 0.1, 0.11,
 * 0.12. r1 (t 0.05, 150 + 2) on instance 1 at 1000 MHz: prefill [0.05, 0.35] (TTFT 0.3, past
 * SS's 0.25 s), its second token at 0.37. r2 (t 0.06) finds both busy: rejected. Energy: busy
 * 0.12 s and 0.32 s at 800 W, idle 0.25 s (instance 0 after 0.12) and 0.05 s (instance 1 before
 * its request) at 80 W: 96 + 256 + 20 + 4 = 376 J, over 0.37 s. */
static void routes_and_meters(void **state)
{
    (void)state;
    hand_model m = model();
    prs_infer_perf perf = hand_perf(&m);
    int ud;
    prs_infer_fixed_cfg *c = config(&perf, 2, &ud);
    c->mhz[1] = 1000;
    prs_infer_req reqs[] = {{0, 100, 3}, {0.05, 150, 2}, {0.06, 10, 1}};
    prs_infer_trace t = {.reqs = reqs, .n = 3};
    prs_infer_fixed_result *r = calloc(1, sizeof *r);
    prs_error err = {0};
    assert_int_equal(prs_infer_fixed_replay(&t, c, r, &err), 0);
    assert_int_equal(r->requests, 3);
    assert_int_equal(r->rejected, 1);
    assert_int_equal(r->served[0], 1);
    assert_int_equal(r->served[1], 1);
    assert_int_equal(r->on_time, 1);
    assert_int_equal(r->lat.done[PRS_INFER_ALL], 2);
    assert_float_equal(r->duration_s, 0.37, 1e-9);
    assert_float_equal(r->energy_inst_j[0], 96 + 20, 1e-6);
    assert_float_equal(r->energy_inst_j[1], 256 + 4, 1e-6);
    assert_float_equal(r->energy_j, 376, 1e-6);
    assert_float_equal(prs__infer_hist_quantile(&r->lat.ttft[PRS_INFER_ALL], 1), 0.3, 0.3 * 0.012);
    assert_int_equal(r->clock_changes, 0);
    assert_int_equal(r->mhz_min[1], 1000);
    free(r);
    free(c);
}

typedef struct seen {
    int n;
    prs_infer_fixed_load load[8];
} seen;

static seen clock_seen;

/* The lowest clock when idle, the top one under any load. */
static int busy_top(void *ud, int i, const prs_infer_fixed_load *l, int *mhz, prs_error *err)
{
    (void)ud, (void)i, (void)err;
    if (clock_seen.n < 8) clock_seen.load[clock_seen.n++] = *l;
    *mhz = l->running + l->waiting > 0 ? 2000 : 1000;
    return 0;
}

/* One instance, decisions every 0.1 s; r0 (t 0.15, 100 + 2). Ticks 0 and 0.1: idle, 1000 MHz,
 * so r0's prefill runs at 1000 MHz over [0.15, 0.35]; tick 0.2 sees it (100 prompt tokens in the
 * last 0.1 s: 1000 a second) and goes to 2000 MHz, which the decode step after the prefill runs
 * at: [0.35, 0.36]; tick 0.3 keeps it. Two changes, mean clock 1500 over four decisions. Energy:
 * idle 0.15 s at 80 W, 0.2 s and 0.01 s at 800 W: 12 + 160 + 8 = 180 J. */
static void instance_level(void **state)
{
    (void)state;
    hand_model m = model();
    prs_infer_perf perf = hand_perf(&m);
    int ud;
    prs_infer_fixed_cfg *c = config(&perf, 1, &ud);
    c->instance_period_s = 0.1;
    c->hooks.clock = busy_top;
    prs_infer_req reqs[] = {{0.15, 100, 2}};
    prs_infer_trace t = {.reqs = reqs, .n = 1};
    prs_infer_fixed_result *r = calloc(1, sizeof *r);
    prs_error err = {0};
    clock_seen.n = 0;
    assert_int_equal(prs_infer_fixed_replay(&t, c, r, &err), 0);
    assert_int_equal(clock_seen.n, 4);
    assert_float_equal(clock_seen.load[0].prompt_rate, 0, 1e-9);
    assert_float_equal(clock_seen.load[2].running + clock_seen.load[2].waiting, 1, 1e-9);
    assert_float_equal(clock_seen.load[2].prompt_rate, 1000, 1e-6);
    assert_true(clock_seen.load[2].kv_usage >= 0 && clock_seen.load[2].kv_usage < 1e-3);
    assert_float_equal(clock_seen.load[3].prompt_rate, 0, 1e-9);
    assert_int_equal(r->clock_changes, 2);
    assert_float_equal(r->mhz_mean[0], 1500, 1e-9);
    assert_int_equal(r->mhz_min[0], 1000);
    assert_int_equal(r->mhz_max[0], 2000);
    assert_float_equal(r->duration_s, 0.36, 1e-9);
    assert_float_equal(r->energy_j, 180, 1e-6);
    assert_int_equal(r->on_time, 1);
    free(r);
    free(c);
}

static void bad_config(void **state)
{
    (void)state;
    hand_model m = model();
    prs_infer_perf perf = hand_perf(&m);
    int ud;
    prs_infer_fixed_cfg *c = config(&perf, 1, &ud);
    prs_infer_req reqs[] = {{0, 10, 1}};
    prs_infer_trace t = {.reqs = reqs, .n = 1};
    prs_infer_fixed_result *r = calloc(1, sizeof *r);
    prs_error err = {0};
    c->instance_period_s = 1; /* no clock rule */
    assert_int_equal(prs_infer_fixed_replay(&t, c, r, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "clock rule"));
    c->instance_period_s = 0;
    c->n_inst = 0;
    assert_int_equal(prs_infer_fixed_replay(&t, c, r, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "instances"));
    free(r);
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(routes_and_meters),
        cmocka_unit_test(instance_level),
        cmocka_unit_test(bad_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
