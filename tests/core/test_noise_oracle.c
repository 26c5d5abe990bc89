/* The shape oracle (prs_noise_oracle_apply, perseus/noise.h): one error of scale per group of
 * identical types, as small as the group's measurements allow, and the margin on every row but
 * a type's fastest. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "perseus/noise.h"

#define CLOCKS 30

/* Stages 0 and 1 identical, stage 2 a little slower; the fastest clock of every type is
 * 1395 MHz (the GPU throttles at 1410, as Bloom's profile does). */
static double true_time(int stage, prs_instr in, int f)
{
    double t =
        (in == PRS_BACKWARD ? 0.09 : 0.05) * (stage == 2 ? 1.07 : 1.0) * (0.3 + 0.7 * 1410.0 / f);
    return f == 1410 ? t * 1.01 : t;
}

static prs_profile *truth(void)
{
    prs_profile *p = prs_profile_new();
    for (int f = 1410; f > 1410 - 15 * CLOCKS; f -= 15) /* clock-major: rows not sorted by type */
        for (int s = 0; s < 3; s++)
            for (int in = 0; in < 2; in++) {
                double e = (in ? 40.0 : 20.0) * (s == 2 ? 1.02 : 1.0) * (1 + 1e-4 * (f - 1100));
                prs_profile_row r = {s, (prs_instr)in, f, true_time(s, (prs_instr)in, f), e, 0};
                assert_int_equal(prs_profile_add(p, &r, NULL), 0);
            }
    return p;
}

static prs_profile *oracle(const prs_profile *t, double jitter, int repeats, double margin,
                           uint64_t seed)
{
    prs_noise_model m = {jitter, 0.4 * jitter, repeats, 0, 0};
    prs_profile *out = NULL;
    prs_error err = {0, ""};
    assert_int_equal(prs_noise_oracle_apply(t, &m, margin, seed, &out, &err), 0);
    assert_int_equal(prs_profile_nrows(out), prs_profile_nrows(t));
    return out;
}

/* Per (stage, instruction): the time factor of its rows at 1380 MHz (no margin there is
 * compared: every row of a type is checked against it). */
static void factors(const prs_profile *t, const prs_profile *o, double margin, double ft[3][2],
                    double fe[3][2])
{
    const prs_profile_row *a = prs_profile_rows(t), *b = prs_profile_rows(o);
    size_t n = prs_profile_nrows(t);
    for (size_t i = 0; i < n; i++)
        if (a[i].freq_mhz == 1380) {
            ft[a[i].stage][a[i].instr] = b[i].time_s / a[i].time_s / (1 + margin);
            fe[a[i].stage][a[i].instr] = b[i].energy_j / a[i].energy_j;
        }
    for (size_t i = 0; i < n; i++) { /* rows keep their order; one factor per type */
        assert_int_equal(a[i].stage, b[i].stage);
        assert_int_equal(a[i].freq_mhz, b[i].freq_mhz);
        double m = a[i].freq_mhz == 1395 ? 1.0 : 1 + margin; /* 1395: the fastest */
        assert_true(fabs(b[i].time_s / (a[i].time_s * m) / ft[a[i].stage][a[i].instr] - 1) < 1e-12);
        assert_true(fabs(b[i].energy_j / a[i].energy_j / fe[a[i].stage][a[i].instr] - 1) < 1e-12);
    }
}

static void test_groups_share_a_factor(void **state)
{
    (void)state;
    prs_profile *t = truth(), *o = oracle(t, 0.05, 3, 0.004, 11);
    double ft[3][2], fe[3][2];
    factors(t, o, 0.004, ft, fe);
    for (int in = 0; in < 2; in++) {
        assert_true(ft[0][in] == ft[1][in]); /* identical truth: one draw */
        assert_true(fe[0][in] == fe[1][in]);
        assert_true(ft[2][in] != ft[0][in]);
    }
    assert_true(ft[0][0] != ft[0][1]); /* forward and backward are never one group */
    assert_true(fe[0][1] != ft[0][1]); /* energy draws a factor of its own */
    prs_profile_free(o);
    o = oracle(t, 0, 3, 0, 11); /* no jitter, no margin: the truth */
    factors(t, o, 0, ft, fe);
    for (int s = 0; s < 3; s++)
        for (int in = 0; in < 2; in++)
            assert_true(ft[s][in] == 1.0 && fe[s][in] == 1.0);
    prs_profile_free(o);
    prs_profile_free(t);
}

/* Over seeds, a factor's spread is its jitter / sqrt(repeats * rows of its group): 2 * CLOCKS
 * rows for stages 0-1, CLOCKS for stage 2; energy's jitter is 0.4 times time's here. */
static void test_spread(void **state)
{
    (void)state;
    prs_profile *t = truth();
    const int seeds = 2000;
    double s01 = 0, s2 = 0, e01 = 0;
    for (int k = 0; k < seeds; k++) {
        prs_profile *o = oracle(t, 0.05, 3, 0, (uint64_t)k);
        double ft[3][2], fe[3][2];
        factors(t, o, 0, ft, fe);
        s01 += (ft[0][1] - 1) * (ft[0][1] - 1);
        s2 += (ft[2][1] - 1) * (ft[2][1] - 1);
        e01 += (fe[0][1] - 1) * (fe[0][1] - 1);
        prs_profile_free(o);
    }
    double want01 = 0.05 / sqrt(3.0 * 2 * CLOCKS), want2 = 0.05 / sqrt(3.0 * CLOCKS);
    assert_true(fabs(sqrt(s01 / seeds) / want01 - 1) < 0.06);
    assert_true(fabs(sqrt(s2 / seeds) / want2 - 1) < 0.06);
    assert_true(fabs(sqrt(e01 / seeds) / (0.4 * want01) - 1) < 0.06); /* energy jitter 0.02 */
    prs_profile_free(t);
}

static void test_refuses(void **state)
{
    (void)state;
    prs_profile *t = truth(), *o = NULL;
    prs_error err = {0, ""};
    prs_noise_model refresh = {0.05, 0.05, 3, 0.1, 0}, bias = {0.05, 0.05, 3, 0, 0.01};
    prs_noise_model ok = {0.05, 0.05, 3, 0, 0}, bad = {0.05, 0.05, 0, 0, 0};
    assert_int_equal(prs_noise_oracle_apply(t, &refresh, 0, 1, &o, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "jitter only"));
    assert_int_equal(prs_noise_oracle_apply(t, &bias, 0, 1, &o, &err), PRS_EINVAL);
    assert_int_equal(prs_noise_oracle_apply(t, &ok, 0.2, 1, &o, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "margin"));
    assert_int_equal(prs_noise_oracle_apply(t, &ok, NAN, 1, &o, &err), PRS_EINVAL);
    assert_int_equal(prs_noise_oracle_apply(t, &bad, 0, 1, &o, &err), PRS_EINVAL);
    assert_int_equal(prs_noise_oracle_apply(NULL, &ok, 0, 1, &o, &err), PRS_EINVAL);
    assert_null(o);
    prs_profile_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_groups_share_a_factor),
        cmocka_unit_test(test_spread),
        cmocka_unit_test(test_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
