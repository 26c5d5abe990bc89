/* The instance level's clock choice (src/router/instclock.h): idle instances get the lowest
 * clock, the clock never falls as the load grows, the clock chosen meets both SLO rules by the
 * cost model while the next lower candidate breaks one, an SLO out of reach gives the highest
 * clock; and the reading of an engine's Prometheus page (sums over series, labels with quotes
 * and braces, refusals). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "instclock.h"

static prs_infer_roofline model(void)
{
    prs_infer_roofline r;
    assert_int_equal(prs_infer_roofline_init(&r, prs_infer_llm_find("llama2-70b"),
                                             prs_infer_gpu_find("h100"), NULL),
                     0);
    return r;
}

static const prs_instclock_slo slo = {
    .ttft_s = 0.5, .tbt_s = 0.1, .headroom = 0.8, .prompt_tokens = 512};

/* Both rules of instclock.h at mhz. */
static int meets(const prs_infer_roofline *m, int tp, int mhz, const prs_instclock_load *l)
{
    long kv;
    assert_int_equal(prs_infer_roofline_kv_tokens(m, tp, &kv, NULL), 0);
    double n = l->running < 1 ? 1 : l->running, ctx = l->kv_usage * (double)kv / n, d, p, j;
    if (ctx < 512) ctx = 512;
    prs_infer_roofline_decode(m, tp, mhz, n, ctx, &d, &j);
    prs_infer_roofline_prefill(m, tp, mhz, l->waiting + 1, 512, &p, &j);
    return d <= 0.08 && p + d <= 0.4;
}

static void test_pick(void **state)
{
    (void)state;
    prs_infer_roofline m = model();
    int mhz, prev = 0, rose = 0;
    prs_instclock_load idle = {0};
    assert_int_equal(prs__instclock_pick(&m, 4, &slo, &idle, &mhz, NULL), 0);
    assert_int_equal(mhz, m.gpu->f_min_mhz);
    for (int n = 0; n <= 256; n += 8) {
        prs_instclock_load l = {.running = n, .waiting = n / 16.0, .kv_usage = n / 300.0};
        assert_int_equal(prs__instclock_pick(&m, 4, &slo, &l, &mhz, NULL), 0);
        assert_true(mhz >= prev);
        rose |= mhz > m.gpu->f_min_mhz && mhz < m.gpu->f_max_mhz;
        if (mhz < m.gpu->f_max_mhz) assert_true(meets(&m, 4, mhz, &l));
        if (mhz > m.gpu->f_min_mhz) assert_false(meets(&m, 4, mhz - PRS_INSTCLOCK_STEP_MHZ, &l));
        prev = mhz;
    }
    assert_true(rose); /* some load between idle and the top needs a clock in between */
    prs_instclock_slo tight = slo;
    tight.tbt_s = 1e-6;
    assert_int_equal(prs__instclock_pick(&m, 4, &tight, &idle, &mhz, NULL), 0);
    assert_int_equal(mhz, m.gpu->f_max_mhz);
    tight.headroom = 0;
    prs_error err = {0};
    assert_int_equal(prs__instclock_pick(&m, 4, &tight, &idle, &mhz, &err), PRS_EINVAL);
    assert_int_equal(prs__instclock_pick(&m, 1, &slo, &idle, &mhz, &err), PRS_EINVAL);
}

/* Several targets: the clock is the highest any one of them needs alone; a prompt rate (the
 * running requests wait while new prompts are prefilled) never lowers the clock, raises it at a
 * rate whose prefills take a fair share of the time, and at the clock chosen the decode step
 * still fits in the TBT SLO's headroom less that share. */
static void test_targets_and_prefill_share(void **state)
{
    (void)state;
    prs_infer_roofline m = model();
    prs_instclock_load l = {.running = 16, .kv_usage = 0.1};
    prs_instclock_slo a = slo, b = slo, both = slo;
    a.prompt_tokens = 256, a.ttft_s = 0.25;
    b.prompt_tokens = 1024, b.ttft_s = 0.5;
    both.prompt_tokens = 256, both.ttft_s = 0.25;
    both.ntargets = 1, both.target_tokens[0] = 1024, both.target_ttft_s[0] = 0.5;
    int fa, fb, f2;
    assert_int_equal(prs__instclock_pick(&m, 2, &a, &l, &fa, NULL), 0);
    assert_int_equal(prs__instclock_pick(&m, 2, &b, &l, &fb, NULL), 0);
    assert_int_equal(prs__instclock_pick(&m, 2, &both, &l, &f2, NULL), 0);
    assert_int_equal(f2, fa > fb ? fa : fb);
    both.ntargets = PRS_INSTCLOCK_MAX_TARGETS + 1;
    assert_int_equal(prs__instclock_pick(&m, 2, &both, &l, &f2, NULL), PRS_EINVAL);

    int f0, prev = 0, rose = 0;
    assert_int_equal(prs__instclock_pick(&m, 4, &slo, &l, &f0, NULL), 0);
    for (double rate = 0; rate <= 20000; rate += 2000) {
        prs_instclock_load r = l;
        r.prompt_rate = rate;
        int f;
        assert_int_equal(prs__instclock_pick(&m, 4, &slo, &r, &f, NULL), 0);
        assert_true(f >= f0 && f >= prev);
        rose |= f > f0;
        prev = f;
        if (f == m.gpu->f_max_mhz) continue;
        long kv;
        double d, p, j, ctx;
        assert_int_equal(prs_infer_roofline_kv_tokens(&m, 4, &kv, NULL), 0);
        ctx = r.kv_usage * (double)kv / r.running;
        prs_infer_roofline_decode(&m, 4, f, r.running, ctx < 512 ? 512 : ctx, &d, &j);
        prs_infer_roofline_prefill(&m, 4, f, 1, 512, &p, &j);
        assert_true(d <= 0.08 * (1 - rate * p / 512));
    }
    assert_true(rose);
}

static int parse(const char *text, prs_instclock_load *l, prs_error *err)
{
    return prs__instclock_parse_metrics(text, strlen(text), l, err);
}

static void test_metrics(void **state)
{
    (void)state;
    prs_instclock_load l;
    prs_error err = {0};
    assert_int_equal(parse("# HELP vllm:num_requests_running x\n"
                           "vllm:num_requests_running{model_name=\"a}\\\"b\"} 3\n"
                           "vllm:num_requests_running{model_name=\"c\"} 2 1700000000\n"
                           "vllm:num_requests_running_total 50\n"
                           "vllm:num_requests_waiting{model_name=\"a\"} 1.5\n"
                           "vllm:gpu_cache_usage_perc{model_name=\"a\"} 0.25",
                           &l, &err),
                     0);
    assert_true(l.running == 5 && l.waiting == 1.5 && l.kv_usage == 0.25);
    assert_true(l.prompt_tokens == -1 && l.prompt_rate == 0);
    assert_int_equal(parse("vllm:num_requests_running 1\nvllm:prompt_tokens_total{a=\"1\"} 700\n"
                           "vllm:prompt_tokens_total{a=\"2\"} 300\n",
                           &l, &err),
                     0);
    assert_true(l.prompt_tokens == 1000);
    assert_int_equal(parse("vllm:num_requests_running 1\nvllm:kv_cache_usage_perc 0.5\n", &l, &err),
                     0);
    assert_true(l.running == 1 && l.waiting == 0 && l.kv_usage == 0.5);
    assert_int_equal(parse("other 1\n", &l, &err), PRS_EPARSE);
    assert_non_null(strstr(err.msg, "no vllm:num_requests_running"));
    assert_int_equal(parse("vllm:num_requests_running{a=\"1\"} NaN\n", &l, &err), PRS_EPARSE);
    assert_non_null(strstr(err.msg, "line 1"));
    assert_int_equal(parse("vllm:num_requests_running{a=\"1\" 4\n", &l, &err), PRS_EPARSE);
    assert_int_equal(parse("x 1\nvllm:num_requests_waiting -1\n", &l, &err), PRS_EPARSE);
    assert_non_null(strstr(err.msg, "line 2"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_pick),
                                       cmocka_unit_test(test_targets_and_prefill_share),
                                       cmocka_unit_test(test_metrics)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
