/* Tests of the simulated-GPU model and the synthetic profile generator (perseus/gpumodel.h):
 * the model's shape (time falls and power rises with the clock, energy is U-shaped so the lowest
 * clocks are dominated), its A100 calibration against the artifact's measured GPT-3 profile,
 * preset lookup, generator output and determinism, and rejection of bad options. */
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

#include "perseus/gpumodel.h"
#include "perseus/profile.h"

static const prs_gpu_preset *a100(void)
{
    const prs_gpu_preset *g = prs_gpu_preset_find("a100");
    assert_non_null(g);
    return g;
}

static void test_preset_lookup(void **state)
{
    (void)state;
    const prs_gpu_preset *g = prs_gpu_preset_find("a100");
    assert_non_null(g);
    assert_string_equal(g->name, "a100");
    assert_int_equal(g->f_max_mhz, 1410);
    assert_int_equal(g->f_min_mhz, 210);
    assert_int_equal(g->f_step_mhz, 15);
    assert_int_equal(g->prof_min_mhz, 855);
    assert_true(g->blocking_power_w == 83.64);
    assert_ptr_equal(prs_gpu_preset_find("A100"), g);

    const prs_gpu_preset *a40 = prs_gpu_preset_find("a40");
    assert_non_null(a40);
    assert_int_equal(a40->f_max_mhz, 1740);
    assert_true(a40->blocking_power_w == 70.38);
    const prs_gpu_preset *h100 = prs_gpu_preset_find("h100");
    assert_non_null(h100);
    assert_int_equal(h100->f_max_mhz, 1980);
    assert_true(h100->p_busy_max_w == 700.0);

    assert_null(prs_gpu_preset_find("v100"));
    assert_null(prs_gpu_preset_find("a10"));
    assert_null(prs_gpu_preset_find("a1000"));
    assert_null(prs_gpu_preset_find(""));
    assert_null(prs_gpu_preset_find(NULL));

    int n = prs_gpu_preset_count();
    assert_true(n >= 3);
    for (int i = 0; i < n; i++) {
        const prs_gpu_preset *p = prs_gpu_preset_at(i);
        assert_non_null(p);
        assert_ptr_equal(prs_gpu_preset_find(p->name), p);
        prs_error err = {0};
        assert_int_equal(prs_gpu_preset_check(p, &err), PRS_OK);
    }
    assert_null(prs_gpu_preset_at(-1));
    assert_null(prs_gpu_preset_at(n));

    char buf[64];
    assert_string_equal(prs_gpu_preset_names(buf, sizeof buf), "a100, a40, h100");
    char tiny[5];
    prs_gpu_preset_names(tiny, sizeof tiny);
    assert_int_equal(strlen(tiny), 4);
    assert_int_equal(strncmp(tiny, "a100", 4), 0);
}

static void test_clocks(void **state)
{
    (void)state;
    const prs_gpu_preset *g = a100();
    assert_int_equal(prs_gpu_num_clocks(g), 81);
    assert_int_equal(prs_gpu_clock_at(g, 0), 1410);
    assert_int_equal(prs_gpu_clock_at(g, 1), 1395);
    assert_int_equal(prs_gpu_clock_at(g, 80), 210);
    assert_int_equal(prs_gpu_clock_at(g, 81), 0);
    assert_int_equal(prs_gpu_clock_at(g, -1), 0);
    assert_true(prs_gpu_clock_supported(g, 855));
    assert_true(prs_gpu_clock_supported(g, 210));
    assert_false(prs_gpu_clock_supported(g, 860));
    assert_false(prs_gpu_clock_supported(g, 195));
    assert_false(prs_gpu_clock_supported(g, 1425));
}

/* Time strictly decreasing and power strictly increasing in the clock, over every supported clock
 * of every preset; at f_max the model returns exactly t_ref and P_busy_max. */
static void test_monotone(void **state)
{
    (void)state;
    for (int k = 0; k < prs_gpu_preset_count(); k++) {
        const prs_gpu_preset *g = prs_gpu_preset_at(k);
        for (int i = 0; i < 2; i++) {
            const prs_gpu_work *w = &g->work[i];
            assert_true(prs_gpu_time_s(g, w, g->f_max_mhz) == w->t_ref_s);
            int nc = prs_gpu_num_clocks(g);
            for (int c = 1; c < nc; c++) {
                int hi = prs_gpu_clock_at(g, c - 1), lo = prs_gpu_clock_at(g, c);
                assert_true(prs_gpu_time_s(g, w, lo) > prs_gpu_time_s(g, w, hi));
                assert_true(prs_gpu_power_w(g, lo) < prs_gpu_power_w(g, hi));
            }
        }
        assert_true(prs_gpu_power_w(g, g->f_max_mhz) == g->p_busy_max_w);
        assert_true(prs_gpu_power_w(g, g->f_min_mhz) > g->p_static_w);
    }
    assert_true(isnan(prs_gpu_time_s(a100(), &a100()->work[0], 0)));
    assert_true(isnan(prs_gpu_power_w(a100(), -15)));
    assert_true(isnan(prs_gpu_energy_j(a100(), &a100()->work[0], 0)));
}

/* Index (into the clocks hi..lo step) of the least-energy clock. */
static int argmin_energy(const prs_gpu_preset *g, const prs_gpu_work *w, int hi, int lo)
{
    int best = hi;
    for (int f = hi; f >= lo; f -= g->f_step_mhz)
        if (prs_gpu_energy_j(g, w, f) < prs_gpu_energy_j(g, w, best)) best = f;
    return best;
}

/* Energy is U-shaped: strictly decreasing from f_max down to an interior minimum, strictly
 * increasing below it; the lowest clocks are dominated (slower and costlier than the minimum).
 * Holds over the full supported range and over the default profiling range. */
static void test_u_shape(void **state)
{
    (void)state;
    for (int k = 0; k < prs_gpu_preset_count(); k++) {
        const prs_gpu_preset *g = prs_gpu_preset_at(k);
        for (int i = 0; i < 2; i++) {
            const prs_gpu_work *w = &g->work[i];
            int fmin_e = argmin_energy(g, w, g->f_max_mhz, g->f_min_mhz);
            assert_true(fmin_e < g->f_max_mhz);
            assert_true(fmin_e > g->prof_min_mhz); /* interior even in the profiling range */
            for (int f = g->f_max_mhz - g->f_step_mhz; f >= g->f_min_mhz; f -= g->f_step_mhz) {
                double e = prs_gpu_energy_j(g, w, f);
                double e_above = prs_gpu_energy_j(g, w, f + g->f_step_mhz);
                if (f >= fmin_e)
                    assert_true(e < e_above);
                else
                    assert_true(e > e_above);
            }
            /* The lowest profiled clock is dominated by the minimum-energy clock. */
            int lo = g->prof_min_mhz;
            assert_true(prs_gpu_time_s(g, w, fmin_e) < prs_gpu_time_s(g, w, lo));
            assert_true(prs_gpu_energy_j(g, w, fmin_e) < prs_gpu_energy_j(g, w, lo));
            /* Deep down the curve the penalty is large: f_min costs more than f_max. */
            assert_true(prs_gpu_energy_j(g, w, g->f_min_mhz) >
                        prs_gpu_energy_j(g, w, g->f_max_mhz));
        }
    }
}

/* A100 magnitudes of a GPT-3-like stage (the artifact's profile: 50.2 ms / 23.8 J forward,
 * 93.0 ms / 44.6 J backward at 1410 MHz). */
static void test_a100_magnitudes(void **state)
{
    (void)state;
    const prs_gpu_preset *g = a100();
    const prs_gpu_work *fw = &g->work[PRS_FORWARD], *bw = &g->work[PRS_BACKWARD];
    assert_true(fabs(prs_gpu_time_s(g, fw, 1410) - 0.0502) < 0.002);
    assert_true(fabs(prs_gpu_energy_j(g, fw, 1410) - 23.8) < 1.0);
    assert_true(fabs(prs_gpu_time_s(g, bw, 1410) - 0.0930) < 0.003);
    assert_true(fabs(prs_gpu_energy_j(g, bw, 1410) - 44.6) < 2.0);
    /* Time at the lowest profiled clock is ~1.5x, as measured (1.55x forward, 1.51x backward). */
    double r = prs_gpu_time_s(g, fw, 855) / prs_gpu_time_s(g, fw, 1410);
    assert_true(r > 1.50 && r < 1.60);
}

/* Against the measured profile when shared/ is present: for stage 0 at every profiled clock, the
 * model's time is within 5 % and its energy within 20 % of the measurement. */
static void test_a100_vs_measured(void **state)
{
    (void)state;
    const char *dir = getenv("PRS_SHARED_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/data/sosp24/stage_profile/gpt3-175b+a100_sxm_bf16.csv",
             dir ? dir : "../shared");
    FILE *probe = fopen(path, "r");
    if (!probe) {
        prs_skip_input("no shared data: $PRS_SHARED_DIR/data/sosp24");
        return;
    }
    fclose(probe);
    prs_profile *p = NULL;
    prs_error err = {0};
    assert_int_equal(prs_profile_load(path, &p, &err), PRS_OK);
    const prs_gpu_preset *g = a100();
    const prs_profile_row *rows = prs_profile_rows(p);
    size_t n = prs_profile_nrows(p);
    int checked = 0;
    for (size_t k = 0; k < n; k++) {
        if (rows[k].stage != 0) continue;
        const prs_gpu_work *w = &g->work[rows[k].instr];
        double t = prs_gpu_time_s(g, w, rows[k].freq_mhz);
        double e = prs_gpu_energy_j(g, w, rows[k].freq_mhz);
        assert_true(fabs(t - rows[k].time_s) / rows[k].time_s < 0.05);
        assert_true(fabs(e - rows[k].energy_j) / rows[k].energy_j < 0.20);
        checked++;
    }
    assert_int_equal(checked, 2 * 38);
    prs_profile_free(p);
}

static void test_synth_default_shape(void **state)
{
    (void)state;
    prs_synth_opts o;
    prs_synth_opts_init(&o);
    o.stages = 4;
    prs_profile *p = NULL;
    prs_error err = {0};
    assert_int_equal(prs_synth_profile(&o, &p, &err), PRS_OK);
    assert_non_null(p);
    const prs_gpu_preset *g = a100();
    size_t nclk = (1410 - 855) / 15 + 1;
    assert_int_equal(prs_profile_nrows(p), 4 * nclk * 2);
    assert_int_equal(prs_profile_num_stages(p), 4);
    assert_int_equal(prs_profile_check_stages(p, 4, &err), PRS_OK);

    const prs_profile_row *rows = prs_profile_rows(p);
    /* Order: stage, then clock high to low, then forward before backward. */
    assert_int_equal(rows[0].stage, 0);
    assert_int_equal(rows[0].instr, PRS_FORWARD);
    assert_int_equal(rows[0].freq_mhz, 1410);
    assert_int_equal(rows[1].instr, PRS_BACKWARD);
    assert_int_equal(rows[1].freq_mhz, 1410);
    assert_int_equal(rows[2].freq_mhz, 1395);
    assert_int_equal(rows[2 * nclk - 1].freq_mhz, 855);
    assert_int_equal(rows[2 * nclk].stage, 1);

    /* Exactly the model, with the last stage 7 % heavier by default. */
    for (size_t k = 0; k < prs_profile_nrows(p); k++) {
        const prs_profile_row *r = &rows[k];
        prs_gpu_work w = g->work[r->instr];
        if (r->stage == 3) w.t_ref_s *= PRS_SYNTH_LAST_STAGE_DEFAULT;
        assert_true(r->time_s == prs_gpu_time_s(g, &w, r->freq_mhz));
        assert_true(r->energy_j == prs_gpu_power_w(g, r->freq_mhz) * r->time_s);
    }
    /* First rows of stage 3 and stage 0: forward at 1410 MHz. */
    double ratio = rows[6 * nclk].time_s / rows[0].time_s;
    assert_true(fabs(ratio - 1.07) < 1e-12);
    prs_profile_free(p);
}

static void test_synth_options(void **state)
{
    (void)state;
    prs_synth_opts o;
    prs_synth_opts_init(&o);
    o.gpu = prs_gpu_preset_find("h100");
    o.stages = 2;
    o.f_min_mhz = 1500;
    o.f_max_mhz = 1800;
    o.f_step_mhz = 60;
    double imb[2] = {1.5, 1.0};
    o.imbalance = imb;
    o.n_imbalance = 2;
    o.work[PRS_BACKWARD].t_ref_s = 0.5;
    o.work[PRS_BACKWARD].alpha = 0.0; /* fully memory-bound: time independent of the clock */
    prs_profile *p = NULL;
    prs_error err = {0};
    assert_int_equal(prs_synth_profile(&o, &p, &err), PRS_OK);
    assert_int_equal(prs_profile_nrows(p), 2 * 6 * 2);
    const prs_profile_row *rows = prs_profile_rows(p);
    assert_int_equal(rows[0].freq_mhz, 1800);
    assert_int_equal(rows[2].freq_mhz, 1740);
    assert_int_equal(rows[11].freq_mhz, 1500);
    /* Stage 0 is 1.5x stage 1; the backward takes 0.5 s * multiplier at every clock. */
    assert_true(fabs(rows[0].time_s / rows[12].time_s - 1.5) < 1e-12);
    for (size_t k = 0; k < prs_profile_nrows(p); k++)
        if (rows[k].instr == PRS_BACKWARD)
            assert_true(rows[k].time_s == (rows[k].stage == 0 ? 0.75 : 0.5));
    prs_profile_free(p);
}

static prs_profile *synth_noisy(double noise, uint64_t seed)
{
    prs_synth_opts o;
    prs_synth_opts_init(&o);
    o.stages = 3;
    o.noise = noise;
    o.seed = seed;
    prs_profile *p = NULL;
    prs_error err = {0};
    assert_int_equal(prs_synth_profile(&o, &p, &err), PRS_OK);
    return p;
}

static int same_rows(const prs_profile *a, const prs_profile *b)
{
    size_t n = prs_profile_nrows(a);
    if (n != prs_profile_nrows(b)) return 0;
    const prs_profile_row *ra = prs_profile_rows(a), *rb = prs_profile_rows(b);
    for (size_t k = 0; k < n; k++)
        if (ra[k].stage != rb[k].stage || ra[k].instr != rb[k].instr ||
            ra[k].freq_mhz != rb[k].freq_mhz || ra[k].time_s != rb[k].time_s ||
            ra[k].energy_j != rb[k].energy_j)
            return 0;
    return 1;
}

static void test_synth_noise_deterministic(void **state)
{
    (void)state;
    prs_profile *exact = synth_noisy(0.0, 0);
    prs_profile *exact2 = synth_noisy(0.0, 12345);
    prs_profile *a = synth_noisy(0.02, 42);
    prs_profile *b = synth_noisy(0.02, 42);
    prs_profile *c = synth_noisy(0.02, 43);
    assert_true(same_rows(exact, exact2)); /* no noise: the seed does not matter */
    assert_true(same_rows(a, b));          /* same seed: same stream */
    assert_false(same_rows(a, c));         /* another seed: another stream */
    assert_false(same_rows(a, exact));

    /* Noise stays within its amplitude: time within ±2 %, energy within (1 ± 2 %)². */
    const prs_profile_row *re = prs_profile_rows(exact), *ra = prs_profile_rows(a);
    int moved = 0;
    for (size_t k = 0; k < prs_profile_nrows(a); k++) {
        double rt = ra[k].time_s / re[k].time_s, ren = ra[k].energy_j / re[k].energy_j;
        assert_true(rt >= 0.98 - 1e-12 && rt <= 1.02 + 1e-12);
        assert_true(ren >= 0.98 * 0.98 - 1e-12 && ren <= 1.02 * 1.02 + 1e-12);
        moved += rt != 1.0;
    }
    assert_true(moved > (int)prs_profile_nrows(a) / 2);
    prs_profile_free(exact);
    prs_profile_free(exact2);
    prs_profile_free(a);
    prs_profile_free(b);
    prs_profile_free(c);
}

/* The first splitmix64 outputs for seed 0 are public test vectors; pin the stream through the
 * noise: with noise n, row 0's time is t_ref * (1 + n * (2 * u - 1)), u = first output / 2^64
 * (top 53 bits). */
static void test_synth_noise_stream(void **state)
{
    (void)state;
    prs_profile *p = synth_noisy(0.25, 0);
    const uint64_t first = UINT64_C(0xE220A8397B1DCDAF); /* splitmix64(seed 0), first output */
    double u = (double)(first >> 11) / 9007199254740992.0;
    double expect = 0.0502 * (1.0 + 0.25 * (2.0 * u - 1.0));
    assert_true(prs_profile_rows(p)[0].time_s == expect);
    prs_profile_free(p);
}

static char err_sentinel;

static void expect_einval(prs_synth_opts *o, const char *needle)
{
    prs_profile *p = (prs_profile *)(void *)&err_sentinel; /* must be reset to NULL */
    prs_error err = {0};
    assert_int_equal(prs_synth_profile(o, &p, &err), PRS_EINVAL);
    assert_null(p);
    assert_int_equal(err.code, PRS_EINVAL);
    if (!strstr(err.msg, needle)) fail_msg("message '%s' lacks '%s'", err.msg, needle);
}

static void test_synth_bad_options(void **state)
{
    (void)state;
    prs_synth_opts o;
    double imb3[3] = {1, 1, 1}, imb_bad[2] = {1, -1};

#define RESET()                                                                                    \
    do {                                                                                           \
        prs_synth_opts_init(&o);                                                                   \
        o.stages = 2;                                                                              \
    } while (0)

    RESET();
    o.stages = 0;
    expect_einval(&o, "stages");
    RESET();
    o.stages = PRS_SYNTH_MAX_STAGES + 1;
    expect_einval(&o, "stages");
    RESET();
    o.f_min_mhz = 860;
    expect_einval(&o, "860");
    RESET();
    o.f_max_mhz = 1500;
    expect_einval(&o, "1500");
    RESET();
    o.f_min_mhz = 1410;
    o.f_max_mhz = 855;
    expect_einval(&o, "above");
    RESET();
    o.f_step_mhz = 20;
    expect_einval(&o, "multiple");
    RESET();
    o.f_step_mhz = 30;
    o.f_min_mhz = 870; /* 1410 - 870 = 540 = 18 * 30: fine; 855 would not be */
    prs_profile *ok = NULL;
    assert_int_equal(prs_synth_profile(&o, &ok, NULL), PRS_OK);
    prs_profile_free(ok);
    o.f_min_mhz = 855;
    expect_einval(&o, "whole number");
    RESET();
    o.imbalance = imb3;
    o.n_imbalance = 3;
    expect_einval(&o, "3 values");
    RESET();
    o.imbalance = imb_bad;
    o.n_imbalance = 2;
    expect_einval(&o, "stage 1");
    RESET();
    o.noise = -0.1;
    expect_einval(&o, "noise");
    RESET();
    o.noise = 0.5;
    expect_einval(&o, "noise");
    RESET();
    o.noise = NAN;
    expect_einval(&o, "noise");
    RESET();
    o.work[PRS_FORWARD].t_ref_s = 0.05;
    o.work[PRS_FORWARD].alpha = 1.5;
    expect_einval(&o, "alpha");
    RESET();
    o.work[PRS_BACKWARD].t_ref_s = -1;
    expect_einval(&o, "t_ref");

    prs_gpu_preset custom = *a100();
    custom.name = "custom";
    custom.p_static_w = 500; /* above busy power */
    RESET();
    o.gpu = &custom;
    expect_einval(&o, "custom");
    custom = *a100();
    custom.prof_min_mhz = 856;
    prs_error err = {0};
    assert_int_equal(prs_gpu_preset_check(&custom, &err), PRS_EINVAL);
    custom = *a100();
    custom.gamma = 0;
    assert_int_equal(prs_gpu_preset_check(&custom, &err), PRS_EINVAL);
    assert_int_equal(prs_gpu_preset_check(NULL, &err), PRS_EINVAL);

    prs_error e2 = {0};
    assert_int_equal(prs_synth_profile(NULL, &ok, &e2), PRS_EINVAL);
    assert_null(ok);
#undef RESET
}

/* The CSV the CLI writes reads back to the same numbers (shortest round-trip formatting). */
static void test_synth_csv_roundtrip(void **state)
{
    (void)state;
    prs_profile *p = synth_noisy(0.03, 7);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(prs_profile_write_csv(p, f), PRS_OK);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(strncmp(buf, "stage,instruction,frequency,time,energy\n", 40), 0);
    prs_profile *q = NULL;
    prs_error err = {0};
    assert_int_equal(prs_profile_parse("synth", buf, len, &q, &err), PRS_OK);
    assert_true(same_rows(p, q));
    free(buf);
    prs_profile_free(p);
    prs_profile_free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_preset_lookup),
        cmocka_unit_test(test_clocks),
        cmocka_unit_test(test_monotone),
        cmocka_unit_test(test_u_shape),
        cmocka_unit_test(test_a100_magnitudes),
        cmocka_unit_test(test_a100_vs_measured),
        cmocka_unit_test(test_synth_default_shape),
        cmocka_unit_test(test_synth_options),
        cmocka_unit_test(test_synth_noise_deterministic),
        cmocka_unit_test(test_synth_noise_stream),
        cmocka_unit_test(test_synth_bad_options),
        cmocka_unit_test(test_synth_csv_roundtrip),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
