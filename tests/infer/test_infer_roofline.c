/* The synthetic inference model (src/infer/roofline.h) and its profile (infer_synth.h): the KV
 * capacity and a prefill time worked out by hand, the refusals, a synthetic profile that loads
 * and answers as the model does, and the clock sensitivity DynamoLLM reports for Llama2-70B on
 * H100 at low load: from 1980 to 800 MHz, a short request's energy 0.50-0.77x and its prefill
 * time 1.5-3.0x, the decode step slowing much less than the prefill. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "calib.h"
#include "infer_synth.h"
#include "profile.h"

static prs_infer_roofline model(const char *llm, const char *gpu)
{
    prs_infer_roofline r;
    prs_error err = {0};
    if (prs_infer_roofline_init(&r, prs_infer_llm_find(llm), prs_infer_gpu_find(gpu), &err) != 0)
        fail_msg("%s", err.msg);
    return r;
}

static void test_capacity(void **state)
{
    (void)state;
    prs_infer_roofline r = model("llama2-70b", "h100");
    long kv = 0;
    prs_error err = {0};
    /* 2 x (0.9 x 81559 MiB - 2 GB) - 137.96 GB = 11.9774 GB, over 327680 bytes per token */
    assert_int_equal(prs_infer_roofline_kv_tokens(&r, 2, &kv, &err), PRS_OK);
    assert_int_equal(kv, 36552);
    r = model("bloom-176b", "a100");
    assert_int_equal(prs_infer_roofline_kv_tokens(&r, 4, &kv, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "bloom-176b does not fit on 4 a100 GPUs"));
    assert_int_equal(prs_infer_roofline_kv_tokens(&r, 8, &kv, &err), PRS_OK);
    assert_null(prs_infer_llm_find("gpt-4"));
    assert_non_null(prs_infer_gpu_find("H100"));
}

static void test_prefill_by_hand(void **state)
{
    (void)state;
    prs_infer_roofline r = model("llama2-70b", "h100");
    /* compute and the weights read only: shares 1/2 and 1, no all-reduce, no fixed costs */
    r.calib = (prs_infer_calib){.eta_prefill = 0.5,
                                .eta_prefill_long = 0.5,
                                .eta_decode = 0.5,
                                .eta_mem = 1,
                                .ar_bw_prefill = 1e300,
                                .ar_bw_prefill_long = 1e300,
                                .ar_bw_decode = 1e300};
    double t, e;
    prs_infer_roofline_prefill(&r, 4, 1980, 1, 1024, &t, &e);
    /* FLOPs 2 x 68.98e9 x 1024 + 2 x 80 x 8192 x 1024^2 = 1.42645e14 over 4 x 989.4e12 x 0.5:
     * 0.07208684 s; weights 137.96e9 bytes over 4 x 3.35e12: 0.01029552 s */
    assert_true(fabs(t - (0.07208684 + 0.01029552)) < 1e-6);
    assert_true(fabs(e - t * 4 * 700) < 1e-9); /* prefill power 700 W per GPU at f_max */
    prs_infer_roofline_prefill(&r, 4, 990, 1, 1024, &t, &e);
    assert_true(fabs(t - (2 * 0.07208684 + 0.01029552)) < 1e-6); /* half the clock */
}

/* A request of one prompt of `prompt` tokens and out tokens out, through a backend. */
static void request(const prs_infer_perf *pf, int tp, int mhz, int prompt, int out, double *t,
                    double *e)
{
    prs_error err = {0};
    if (prs_infer_run_batch(pf, tp, mhz, 1, prompt, out, t, e, &err) != 0) fail_msg("%s", err.msg);
}

static void test_synth_and_clocks(void **state)
{
    (void)state;
    prs_infer_roofline r = model("llama2-70b", "h100");
    const int tps[] = {2, 4, 8}, mhz[] = {800, 1980};
    char *text;
    size_t len;
    prs_error err = {0};
    assert_int_equal(prs_infer_synth_csv(&r, tps, 3, mhz, 2, &text, &len, &err), PRS_OK);
    prs_infer_profile *p = NULL;
    if (prs_infer_profile_parse(text, len, "synth", &p, &err) != 0) fail_msg("%s", err.msg);
    free(text);
    prs_infer_perf pf;
    prs_infer_profile_perf(p, &pf);
    for (int i = 0; i < 3; i++) {
        /* the profile answers as the model at a grid point */
        prs_infer_prefill it = {.n_seqs = 4, .tokens = 4L * 256};
        double t, e, tm, em;
        assert_int_equal(pf.prefill(pf.ctx, tps[i], 1980, &it, &t, &e, &err), PRS_OK);
        prs_infer_roofline_prefill(&r, tps[i], 1980, 4, 256, &tm, &em);
        assert_true(fabs(t / tm - 1) < 1e-8 && fabs(e / em - 1) < 1e-8);
        /* a short request at low load: a 256-token prompt, 100 tokens out */
        double t_hi, e_hi, t_lo, e_lo, p_hi, p_lo, d_hi, d_lo, x;
        request(&pf, tps[i], 1980, 256, 101, &t_hi, &e_hi);
        request(&pf, tps[i], 800, 256, 101, &t_lo, &e_lo);
        request(&pf, tps[i], 1980, 256, 1, &p_hi, &x);
        request(&pf, tps[i], 800, 256, 1, &p_lo, &x);
        prs_infer_decode d = {.n_seqs = 1, .ctx_tokens = 300};
        assert_int_equal(pf.decode(pf.ctx, tps[i], 1980, &d, &d_hi, &x, &err), PRS_OK);
        assert_int_equal(pf.decode(pf.ctx, tps[i], 800, &d, &d_lo, &x, &err), PRS_OK);
        print_message("tp %d, 800 vs 1980 MHz: request energy x%.3f, prefill time x%.3f, decode "
                      "step x%.3f\n",
                      tps[i], e_lo / e_hi, p_lo / p_hi, d_lo / d_hi);
        assert_true(e_lo / e_hi >= 0.50 && e_lo / e_hi <= 0.77);
        assert_true(p_lo / p_hi >= 1.5 && p_lo / p_hi <= 3.0);
        /* the decode step slows much less than the prefill, where the prefill's compute is a
         * fair share of its time (at TP 8 the fixed costs of both dominate) */
        if (tps[i] < 8)
            assert_true(d_lo / d_hi - 1 < 0.6 * (p_lo / p_hi - 1));
        else
            assert_true(d_lo / d_hi < p_lo / p_hi);
        assert_true(e_lo < e_hi); /* energy per token lower at the lower clock */
    }
    prs_infer_profile_free(p);
}

static void test_synth_refusals(void **state)
{
    (void)state;
    prs_infer_roofline r = model("llama2-70b", "a100");
    const int tps[] = {2, 2}, mhz[] = {1410, 2000};
    char *text;
    size_t len;
    prs_error err = {0};
    assert_int_equal(prs_infer_synth_csv(&r, tps, 2, mhz, 1, &text, &len, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "tp 2 given twice"));
    assert_int_equal(prs_infer_synth_csv(&r, tps, 1, mhz, 2, &text, &len, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "clock 2000 MHz outside a100's 210..1410 MHz"));
    assert_null(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capacity),
        cmocka_unit_test(test_prefill_by_hand),
        cmocka_unit_test(test_synth_and_clocks),
        cmocka_unit_test(test_synth_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
