/* The instance emulator (src/infer/engine.c) against results worked out by hand with a linear
 * backend (infer_hand.h: prefill 0.1 s + 1 ms a token, decode step 0.05 s + 10 ms a sequence,
 * 1000 W busy, 100 W idle, at TP 8 and the top clock):
 *   - one request alone: TTFT, every token's time, energy busy and idle, the power bins;
 *   - two requests arriving together share one prefill and their decode steps;
 *   - a request arriving during another's prefill waits for it; the gaps it causes;
 *   - the token budget splits prefills; the largest batch holds a request back;
 *   - KV cache full: the latest request is preempted, recomputed after, every time exact;
 *   - a request larger than the KV cache refused; SLO lateness counted. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine.h"
#include "infer_hand.h"

#define CLOSE(a, b)                                                                                \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        if (!(fabs(a_ - b_) <= 1e-9 * (1 + fabs(b_))))                                             \
            fail_msg("line %d: %s = %.12g, want %.12g", __LINE__, #a, a_, b_);                     \
    } while (0)

#define MAX_TOK 64
typedef struct tokens {
    double t[4][MAX_TOK + 1]; /* [request id][token index] */
    int n[4];
} tokens;

static void on_token(void *ud, uint32_t id, int token, double t_s)
{
    tokens *k = ud;
    assert_true(id < 4 && token >= 1 && token <= MAX_TOK);
    assert_int_equal(token, k->n[id] + 1); /* in order, none missed */
    k->t[id][token] = t_s;
    k->n[id] = token;
}

static hand_model model(void)
{
    return (hand_model){.pf_base_s = 0.1,
                        .pf_per_token_s = 0.001,
                        .dc_base_s = 0.05,
                        .dc_per_seq_s = 0.01,
                        .busy_w = 1000,
                        .idle_w = 100,
                        .kv_tokens = 100000,
                        .max_batch = 16,
                        .clocks = {1000, 2000},
                        .n_clocks = 2,
                        .tps = {8},
                        .n_tps = 1};
}

typedef struct rig {
    hand_model m;
    prs_infer_perf perf;
    prs_infer_classes classes;
    prs_infer_latency lat;
    prs_infer_meter meter;
    tokens tok;
    prs_infer_engine *e;
} rig;

static rig *rig_new(hand_model m, long budget)
{
    rig *r = calloc(1, sizeof *r);
    assert_non_null(r);
    r->m = m;
    r->perf = hand_perf(&r->m);
    prs_infer_classes_default(&r->classes);
    prs_error err = {0};
    assert_int_equal(prs__infer_meter_init(&r->meter, 1.0, 100, &err), 0);
    prs_infer_engine_cfg cfg = {.perf = &r->perf,
                                .tp = 8,
                                .mhz = 2000,
                                .max_batched_tokens = budget,
                                .classes = &r->classes,
                                .latency = &r->lat,
                                .meter = &r->meter,
                                .on_token = on_token,
                                .on_token_ud = &r->tok};
    assert_int_equal(prs_infer_engine_new(&cfg, 0, &r->e, &err), 0);
    return r;
}

static void rig_free(rig *r)
{
    prs_infer_engine_free(r->e);
    prs__infer_meter_free(&r->meter);
    free(r);
}

static void submit(rig *r, uint32_t id, int in, int out, double at)
{
    /* Run the engine's iterations that end before the arrival first. */
    prs_error err = {0};
    while (prs_infer_engine_next_s(r->e) < at)
        assert_int_equal(prs_infer_engine_advance(r->e, &err), 0);
    prs_infer_job j = {id, in, out, (uint8_t)prs_infer_class_of(&r->classes, in, out), at};
    assert_int_equal(prs_infer_engine_submit(r->e, &j, at, &err), 0);
}

static void drain(rig *r)
{
    prs_error err = {0};
    while (isfinite(prs_infer_engine_next_s(r->e)))
        assert_int_equal(prs_infer_engine_advance(r->e, &err), 0);
}

static void test_alone(void **state)
{
    (void)state;
    rig *r = rig_new(model(), 2048);
    submit(r, 0, 100, 3, 1.0);
    drain(r);
    /* prefill 0.1 + 0.1 = 0.2 s; two decode steps of 0.06 s. */
    assert_int_equal(r->tok.n[0], 3);
    CLOSE(r->tok.t[0][1], 1.2);
    CLOSE(r->tok.t[0][2], 1.26);
    CLOSE(r->tok.t[0][3], 1.32);
    prs_infer_engine_flush(r->e, 2.0);
    /* idle 1 s (100 J), busy 0.32 s (320 J), idle 0.68 s (68 J) */
    CLOSE(prs_infer_engine_energy_j(r->e), 488);
    CLOSE(r->meter.energy_j[0], 100);
    CLOSE(r->meter.energy_j[1], 388);
    CLOSE(prs__infer_meter_power_quantile(&r->meter, 2.0, 1.0), 388);
    assert_int_equal(r->lat.done[PRS_INFER_ALL], 1);
    assert_int_equal(r->lat.ttft[PRS_INFER_ALL].n, 1);
    CLOSE(r->lat.ttft[PRS_INFER_ALL].max_s, 0.2);
    assert_int_equal(r->lat.tbt[PRS_INFER_ALL].n, 2);
    CLOSE(r->lat.tbt[PRS_INFER_ALL].sum_s, 0.12);
    assert_int_equal(r->lat.late[PRS_INFER_ALL], 0);
    rig_free(r);
}

static void test_batched(void **state)
{
    (void)state;
    rig *r = rig_new(model(), 2048);
    submit(r, 0, 100, 2, 0);
    submit(r, 1, 50, 3, 0);
    drain(r);
    /* One prefill of 150 tokens: 0.25 s; a 2-sequence step 0.07 s, then 1-sequence 0.06 s. */
    CLOSE(r->tok.t[0][1], 0.25);
    CLOSE(r->tok.t[1][1], 0.25);
    CLOSE(r->tok.t[0][2], 0.32);
    CLOSE(r->tok.t[1][2], 0.32);
    CLOSE(r->tok.t[1][3], 0.38);
    assert_int_equal(r->tok.n[0], 2);
    rig_free(r);
}

static void test_arrival_during_prefill(void **state)
{
    (void)state;
    rig *r = rig_new(model(), 2048);
    submit(r, 0, 100, 3, 0);
    submit(r, 1, 50, 2, 0.1);
    drain(r);
    /* A: prefill [0, 0.2]; B waits, prefill [0.2, 0.35]; a 2-step [0.35, 0.42] (B done, its gap
     * 0.07; A's gap 0.22); A alone [0.42, 0.48]. */
    CLOSE(r->tok.t[0][1], 0.2);
    CLOSE(r->tok.t[1][1], 0.35);
    CLOSE(r->tok.t[0][2], 0.42);
    CLOSE(r->tok.t[1][2], 0.42);
    CLOSE(r->tok.t[0][3], 0.48);
    CLOSE(r->lat.ttft[PRS_INFER_ALL].sum_s, 0.2 + 0.25);
    CLOSE(r->lat.tbt[PRS_INFER_ALL].sum_s, 0.22 + 0.07 + 0.06);
    CLOSE(r->lat.tbt[PRS_INFER_ALL].max_s, 0.22);
    rig_free(r);
}

static void test_budget_and_batch(void **state)
{
    (void)state;
    /* Token budget 120: a 100-token and a 50-token prompt take two prefills. */
    rig *r = rig_new(model(), 120);
    submit(r, 0, 100, 2, 0);
    submit(r, 1, 50, 2, 0);
    drain(r);
    CLOSE(r->tok.t[0][1], 0.2);
    CLOSE(r->tok.t[1][1], 0.35);
    rig_free(r);
    /* A prompt over the budget runs alone. */
    r = rig_new(model(), 10);
    submit(r, 0, 100, 1, 0);
    drain(r);
    CLOSE(r->tok.t[0][1], 0.2);
    rig_free(r);
    /* Largest batch 1: the second request waits for the first to finish. */
    hand_model m = model();
    m.max_batch = 1;
    r = rig_new(m, 2048);
    submit(r, 0, 100, 2, 0);
    submit(r, 1, 50, 1, 0);
    drain(r);
    CLOSE(r->tok.t[0][2], 0.26);
    CLOSE(r->tok.t[1][1], 0.41);
    rig_free(r);
}

static void test_preemption(void **state)
{
    (void)state;
    hand_model m = model();
    m.kv_tokens = 64; /* 4 blocks, no watermark */
    rig *r = rig_new(m, 2048);
    submit(r, 0, 16, 40, 0);
    submit(r, 1, 16, 20, 0);
    drain(r);
    /* Prefill of 32 tokens: 0.132 s; 16 two-sequence steps (0.07 s) to 1.252; at context 32
     * both need a fifth block: B (admitted last, 17 tokens) is preempted. A alone for its 23
     * remaining steps (0.06 s) to 2.632. B's recompute prefill of 16 + 17 = 33 tokens (0.133 s)
     * gives its 18th token at 2.765; two more steps to 2.885. */
    CLOSE(r->tok.t[0][1], 0.132);
    CLOSE(r->tok.t[1][17], 0.132 + 16 * 0.07);
    CLOSE(r->tok.t[0][17], 0.132 + 16 * 0.07);
    CLOSE(r->tok.t[0][40], 1.252 + 23 * 0.06);
    CLOSE(r->tok.t[1][18], 2.632 + 0.133);
    CLOSE(r->tok.t[1][20], 2.765 + 2 * 0.06);
    assert_int_equal(prs_infer_engine_preemptions(r->e), 1);
    /* B's gap across its preemption is one gap of 2.765 - 1.252. */
    CLOSE(r->lat.tbt[PRS_INFER_ALL].max_s, 2.765 - 1.252);
    assert_int_equal(r->lat.tbt[PRS_INFER_ALL].n, 39 + 19);
    assert_int_equal(r->lat.done[PRS_INFER_ALL], 2);
    /* B's mean gap (2.885 - 0.132) / 19 = 0.145 s > the 0.1 s SLO: late; A's 0.064 is not. */
    assert_int_equal(r->lat.late[PRS_INFER_ALL], 1);
    prs_infer_job big = {3, 60, 10, 0, 3.0};
    prs_error err = {0};
    assert_int_equal(prs_infer_engine_submit(r->e, &big, 3.0, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "exceeds the KV cache"));
    rig_free(r);
}

static void test_clock_and_pause(void **state)
{
    (void)state;
    rig *r = rig_new(model(), 2048);
    prs_error err = {0};
    /* At 1000 MHz of 2000 every time doubles. */
    assert_int_equal(prs_infer_engine_set_clock(r->e, 1000, 0, &err), 0);
    prs_infer_engine_pause(r->e, 0.5);
    submit(r, 0, 100, 2, 0);
    assert_true(prs_infer_engine_next_s(r->e) == 0.5);
    assert_int_equal(prs_infer_engine_outstanding(r->e), 1);
    drain(r);
    CLOSE(r->tok.t[0][1], 0.5 + 0.4);
    CLOSE(r->tok.t[0][2], 0.9 + 0.12);
    rig_free(r);
}

/* Histogram quantiles: within one bin (1.2 %) of the exact order statistic, monotonic bins. */
static void test_hist(void **state)
{
    (void)state;
    prs_infer_hist *h = calloc(1, sizeof *h);
    assert_non_null(h);
    for (int i = 1; i <= 1000; i++)
        prs__infer_hist_add(h, i * 1e-3, 1);
    static const double q[] = {0.01, 0.5, 0.9, 0.99, 1.0};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        double got = prs__infer_hist_quantile(h, q[i]), want = q[i];
        if (!(got >= want * (1 - 1e-9) && got <= want * 1.012))
            fail_msg("q %g: %g, want %g within a bin", q[i], got, want);
    }
    size_t prev = 0;
    for (int i = 0; i < 40000; i++) {
        size_t b = prs__infer_hist_bin(1e-6 * pow(1.0007, i)); /* up to 1.4e6 s */
        assert_true(b >= prev);
        prev = b;
    }
    assert_int_equal(prs__infer_hist_bin(1e-6), 0);
    free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alone),
        cmocka_unit_test(test_batched),
        cmocka_unit_test(test_arrival_during_prefill),
        cmocka_unit_test(test_budget_and_batch),
        cmocka_unit_test(test_preemption),
        cmocka_unit_test(test_clock_and_pause),
        cmocka_unit_test(test_hist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
