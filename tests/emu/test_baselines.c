/* The baselines as planners: all-max, uniform clock and EnvPipe-style.
 *   - on a profile small enough to work out by hand (2 stages, 2 microbatches, whole-second
 *     times, unit 1 s): every uniform clock's time and energy, which clock each target picks,
 *     and the exact plan the EnvPipe greedy produces;
 *   - on synthetic profiles of every GPU preset, units and schedules: EnvPipe never lengthens
 *     the iteration, never costs more energy than all-max, keeps the last GPU at all-max and
 *     never speeds a computation up; the uniform clock meets its target and beats every other
 *     uniform clock that does;
 *   - errors: clocks missing for some computation, unreachable targets, missing stages. */
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
#include "perseus/gpumodel.h"
#include "perseus/planner.h"
#include "perseus/profile.h"

static void close_to(double a, double b, const char *what, int line)
{
    if (!(fabs(a - b) <= 1e-9 * (1 + fabs(b))))
        fail_msg("line %d: %s = %.17g, want %.17g", line, what, a, b);
}
#define CLOSE(a, b) close_to((a), (b), #a, __LINE__)

typedef struct tiny_row {
    int stage;
    prs_instr in;
    int f;
    double t, e;
} tiny_row;

/* Per computation (both stages alike):
 *   forward   1000 MHz 10 s 10 J | 800 MHz 12 s 9 J  | 600 MHz 15 s 9.5 J
 *   backward  1000 MHz 20 s 20 J | 800 MHz 24 s 17 J | 600 MHz 30 s 18 J
 * With P_block = 0.1 W, S = 2, M = 2 (1F1B), a uniform clock scales every duration alike:
 *   1000: T = 90,  energy 4*30 + 0.1*(2*90 - 120)   = 126
 *    800: T = 108, energy 4*26 + 0.1*(2*108 - 144)  = 111.2
 *    600: T = 135, energy 4*27.5 + 0.1*(2*135 - 180) = 119 */
static const tiny_row tiny_rows[] = {
    {0, PRS_FORWARD, 1000, 10, 10},  {0, PRS_FORWARD, 800, 12, 9},   {0, PRS_FORWARD, 600, 15, 9.5},
    {0, PRS_BACKWARD, 1000, 20, 20}, {0, PRS_BACKWARD, 800, 24, 17}, {0, PRS_BACKWARD, 600, 30, 18},
    {1, PRS_FORWARD, 1000, 10, 10},  {1, PRS_FORWARD, 800, 12, 9},   {1, PRS_FORWARD, 600, 15, 9.5},
    {1, PRS_BACKWARD, 1000, 20, 20}, {1, PRS_BACKWARD, 800, 24, 17}, {1, PRS_BACKWARD, 600, 30, 18},
};

static prs_profile *make_profile(const tiny_row *rows, size_t n, int skip_stage, int skip_freq)
{
    prs_profile *p = prs_profile_new();
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) {
        if (rows[i].stage == skip_stage && rows[i].f == skip_freq) continue;
        prs_profile_row r = {rows[i].stage, rows[i].in, rows[i].f, rows[i].t, rows[i].e, 0};
        assert_int_equal(prs_profile_add(p, &r, NULL), 0);
    }
    return p;
}

static const prs_pipeline tiny_pipe = {2, 2, PRS_SCHEDULE_1F1B, 1.0, 0.1, 0, 0};

static void test_allmax_tiny(void **state)
{
    (void)state;
    prs_profile *p = make_profile(tiny_rows, 12, -1, 0);
    int plan[8];
    double t, e;
    assert_int_equal(prs_baseline_allmax(p, &tiny_pipe, plan, NULL), 0);
    for (int i = 0; i < 8; i++)
        assert_int_equal(plan[i], 1000);
    assert_int_equal(prs_evaluate_plan(p, &tiny_pipe, plan, &t, &e, NULL), 0);
    CLOSE(t, 90);
    CLOSE(e, 126);
    prs_profile_free(p);

    /* per-type maxima: stage 1's forward tops out at 800 MHz */
    p = make_profile(tiny_rows, 12, 1, 1000);
    assert_int_equal(prs_baseline_allmax(p, &tiny_pipe, plan, NULL), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(plan[i], 1000);
    /* stage 1's order: F0 B0 F1 B1 */
    assert_int_equal(plan[4], 800);
    assert_int_equal(plan[6], 800);
    prs_profile_free(p);
}

static void test_uniform_tiny(void **state)
{
    (void)state;
    prs_profile *p = make_profile(tiny_rows, 12, -1, 0);
    prs_uniform_point *pts = NULL;
    size_t n = 0;
    assert_int_equal(prs_uniform_sweep(p, &tiny_pipe, &pts, &n, NULL), 0);
    assert_int_equal(n, 3);
    static const double want_t[] = {135, 108, 90}, want_e[] = {119, 111.2, 126};
    static const int want_f[] = {600, 800, 1000};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(pts[i].freq_mhz, want_f[i]);
        CLOSE(pts[i].time_s, want_t[i]);
        CLOSE(pts[i].energy_j, want_e[i]);
    }
    /* target -> clock: the least energy among those meeting it */
    static const struct {
        double target;
        int f;
    } cases[] = {{90, 1000}, {100, 1000}, {107.9, 1000}, {108, 800},
                 {134, 800}, {135, 800},  {1000, 800}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t k;
        assert_int_equal(prs_uniform_pick(pts, n, cases[i].target, &k), 0);
        if (pts[k].freq_mhz != cases[i].f)
            fail_msg("target %g: %d MHz, want %d", cases[i].target, pts[k].freq_mhz, cases[i].f);
        prs_uniform_point up;
        int plan[8];
        assert_int_equal(prs_baseline_uniform(p, &tiny_pipe, cases[i].target, plan, &up, NULL), 0);
        assert_int_equal(up.freq_mhz, cases[i].f);
        for (int j = 0; j < 8; j++)
            assert_int_equal(plan[j], cases[i].f);
    }
    size_t k;
    assert_int_equal(prs_uniform_pick(pts, n, 89, &k), PRS_ERANGE);
    free(pts);
    /* no target: no slower than all-max (90 s) */
    prs_uniform_point up;
    assert_int_equal(prs_baseline_uniform(p, &tiny_pipe, 0, NULL, &up, NULL), 0);
    assert_int_equal(up.freq_mhz, 1000);
    prs_error err = {0, ""};
    assert_int_equal(prs_baseline_uniform(p, &tiny_pipe, 80, NULL, &up, &err), PRS_ERANGE);
    assert_non_null(strstr(err.msg, "fastest uniform clock takes 90 s"));
    prs_profile_free(p);
}

static void test_uniform_missing_clocks(void **state)
{
    (void)state;
    /* 600 MHz missing for stage 1's forward: only 800 and 1000 are uniform candidates, so a
     * generous target picks 800 even though 600 is profiled elsewhere */
    prs_profile *p = make_profile(tiny_rows, 12, 1, 600);
    prs_uniform_point *pts = NULL;
    size_t n = 0;
    assert_int_equal(prs_uniform_sweep(p, &tiny_pipe, &pts, &n, NULL), 0);
    assert_int_equal(n, 2);
    assert_int_equal(pts[0].freq_mhz, 800);
    assert_int_equal(pts[1].freq_mhz, 1000);
    free(pts);
    prs_profile_free(p);

    /* stage 1 profiled at other clocks altogether: no uniform clock exists */
    tiny_row rows[12];
    memcpy(rows, tiny_rows, sizeof rows);
    for (int i = 6; i < 12; i++)
        rows[i].f += 1;
    p = make_profile(rows, 12, -1, 0);
    prs_error err = {0, ""};
    prs_uniform_point up;
    assert_int_equal(prs_uniform_sweep(p, &tiny_pipe, &pts, &n, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "no clock is profiled for every computation"));
    assert_int_equal(prs_baseline_uniform(p, &tiny_pipe, 0, NULL, &up, &err), PRS_EINVAL);
    prs_profile_free(p);
}

/* The EnvPipe greedy on the tiny pipeline, by hand. All-max timeline (seconds):
 *   GPU 0: F0 [0,10]  F1 [10,20]  B0 [40,60]  B1 [70,90]
 *   GPU 1: F0 [10,20] B0 [20,40]  F1 [40,50]  B1 [50,70]
 * GPU 1 (last) stays at 1000 MHz. GPU 0, in order: F0 has no float (keeps 1000); F1 may end
 * by 40 (F(1,1) starts at 40): limit 30 s, effective costs e - 0.1 q are 9 / 7.8 / 8 -> 800;
 * B0 starts at 40 and must end by 70: limit 30, costs 18 / 14.6 / 15 -> 800; B1 ends the
 * iteration: keeps 1000. Energy: 116 J computing + 0.1 * (180 - 126) = 121.4 J at 90 s. */
static void test_envpipe_tiny(void **state)
{
    (void)state;
    prs_profile *p = make_profile(tiny_rows, 12, -1, 0);
    int plan[8];
    assert_int_equal(prs_baseline_envpipe(p, &tiny_pipe, plan, NULL), 0);
    static const int want[8] = {1000, 800, 800, 1000, 1000, 1000, 1000, 1000};
    for (int i = 0; i < 8; i++)
        if (plan[i] != want[i]) fail_msg("op %d: %d MHz, want %d", i, plan[i], want[i]);
    double t, e;
    assert_int_equal(prs_evaluate_plan(p, &tiny_pipe, plan, &t, &e, NULL), 0);
    CLOSE(t, 90);
    CLOSE(e, 121.4);
    /* one stage: nothing but the (critical) last stage, so all-max */
    prs_pipeline one = {1, 3, PRS_SCHEDULE_1F1B, 1.0, 0.1, 0, 0};
    int p1[6];
    assert_int_equal(prs_baseline_envpipe(p, &one, p1, NULL), 0);
    for (int i = 0; i < 6; i++)
        assert_int_equal(p1[i], 1000);
    prs_profile_free(p);
}

/* ---- Properties on synthetic profiles ---- */

typedef struct synth_case {
    const char *gpu;
    int profile_stages; /* model chunks */
    double last;        /* last chunk's time multiplier */
    prs_pipeline pipe;
} synth_case;

static prs_profile *synth(const char *gpu, int stages, double last, double noise)
{
    prs_synth_opts o;
    prs_synth_opts_init(&o);
    o.gpu = prs_gpu_preset_find(gpu);
    assert_non_null(o.gpu);
    o.stages = stages;
    double imb[64];
    for (int s = 0; s < stages; s++)
        imb[s] = s == stages - 1 ? last : 1.0;
    o.imbalance = imb;
    o.n_imbalance = stages;
    o.noise = noise;
    o.seed = 7;
    prs_profile *p = NULL;
    prs_error err = {0, ""};
    if (prs_synth_profile(&o, &p, &err)) fail_msg("synth: %s", err.msg);
    return p;
}

static void test_envpipe_properties(void **state)
{
    (void)state;
    static const synth_case cases[] = {
        {"a100", 8, 1.07, {8, 12, PRS_SCHEDULE_1F1B, 0.001, 83.64, 0, 0}},
        {"a100", 8, 0.9, {8, 12, PRS_SCHEDULE_1F1B, 0.001, 83.64, 0, 0}},
        {"a40", 4, 1.07, {4, 8, PRS_SCHEDULE_1F1B, 0.0001, 70.38, 0, 0}},
        {"a40", 4, 0.9, {4, 6, PRS_SCHEDULE_GPIPE, 0.0001, 70.38, 0, 0}},
        {"h100", 6, 1.1, {6, 3, PRS_SCHEDULE_1F1B, 0.001, 60, 0, 0}}, /* M < S */
        {"a100", 8, 1.07, {4, 8, PRS_SCHEDULE_INTERLEAVED, 0.001, 83.64, 2, 0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int noisy = 0; noisy < 2; noisy++) {
            const synth_case *sc = &cases[c];
            prs_profile *p = synth(sc->gpu, sc->profile_stages, sc->last, noisy ? 0.03 : 0);
            const prs_pipeline *pipe = &sc->pipe;
            int per = prs_ops_per_stage(pipe), nops = pipe->stages * per;
            int *am = calloc((size_t)nops, sizeof *am), *ep = calloc((size_t)nops, sizeof *ep);
            assert_true(am && ep);
            double t_am = 0, e_am = 0, t_ep = 0, e_ep = 0;
            prs_error err = {0, ""};
            if (prs_baseline_allmax(p, pipe, am, &err) ||
                prs_evaluate_plan(p, pipe, am, &t_am, &e_am, &err) ||
                prs_baseline_envpipe(p, pipe, ep, &err) ||
                prs_evaluate_plan(p, pipe, ep, &t_ep, &e_ep, &err))
                fail_msg("case %zu: %s", c, err.msg);
            /* never longer; with noisy profiles a lower clock can measure faster than f_max
             * (as in the measured Bloom profile), and then the greedy may even shorten it */
            if (noisy ? !(t_ep <= t_am) : t_ep != t_am)
                fail_msg("case %zu%s: envpipe %.9g s vs all-max %.9g s", c, noisy ? " (noisy)" : "",
                         t_ep, t_am);
            if (!(e_ep <= e_am))
                fail_msg("case %zu%s: envpipe %.9g J > all-max %.9g J", c, noisy ? " (noisy)" : "",
                         e_ep, e_am);
            /* 1F1B's warm-up and cool-down leave the non-last GPUs slack: it must save there.
             * (GPipe with equal stages is tight: every forward and backward of a non-last GPU
             * waits for its neighbours' and delays the next, so nothing may be saved.) */
            if (pipe->schedule != PRS_SCHEDULE_GPIPE && !(e_ep < e_am * (1 - 1e-4)))
                fail_msg("case %zu: envpipe saves nothing (%.9g J vs %.9g J)", c, e_ep, e_am);
            for (int i = 0; i < nops; i++) {
                if (i >= (pipe->stages - 1) * per && ep[i] != am[i])
                    fail_msg("case %zu: last GPU op %d changed", c, i - (pipe->stages - 1) * per);
                if (ep[i] > am[i]) fail_msg("case %zu: op %d faster than all-max", c, i);
            }
            /* uniform, no slower than all-max: meets it, and is the least-energy such clock */
            prs_uniform_point up, *pts = NULL;
            size_t n = 0;
            if (prs_baseline_uniform(p, pipe, 0, NULL, &up, &err) ||
                prs_uniform_sweep(p, pipe, &pts, &n, &err))
                fail_msg("case %zu: %s", c, err.msg);
            assert_true(up.time_s <= t_am + 1e-9);
            assert_true(up.energy_j <= e_am); /* f_max itself qualifies */
            for (size_t i = 0; i < n; i++)
                if (pts[i].time_s <= t_am + 1e-9) assert_true(up.energy_j <= pts[i].energy_j);
            /* a slower target never costs more */
            prs_uniform_point slow;
            assert_int_equal(prs_baseline_uniform(p, pipe, 1.3 * t_am, NULL, &slow, NULL), 0);
            assert_true(slow.energy_j <= up.energy_j);
            assert_true(slow.time_s <= 1.3 * t_am + 1e-9);
            free(pts);
            free(am);
            free(ep);
            prs_profile_free(p);
        }
    }
}

static void test_errors(void **state)
{
    (void)state;
    prs_profile *p = make_profile(tiny_rows, 12, -1, 0);
    int plan[64];
    prs_error err = {0, ""};
    prs_pipeline three = tiny_pipe;
    three.stages = 3;
    assert_int_equal(prs_baseline_allmax(p, &three, plan, &err), PRS_EPARSE);
    assert_non_null(strstr(err.msg, "stage 2"));
    assert_int_equal(prs_baseline_envpipe(p, &three, plan, &err), PRS_EPARSE);
    prs_pipeline bad = tiny_pipe;
    bad.microbatches = 0;
    assert_int_equal(prs_baseline_allmax(p, &bad, plan, &err), PRS_EINVAL);
    bad = tiny_pipe;
    bad.schedule = PRS_SCHEDULE_INTERLEAVED;
    bad.virtual_stages = 2; /* needs 4 profile stages; also M % S == 0 holds */
    assert_int_equal(prs_baseline_envpipe(p, &bad, plan, &err), PRS_EPARSE);
    prs_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allmax_tiny),
        cmocka_unit_test(test_uniform_tiny),
        cmocka_unit_test(test_uniform_missing_clocks),
        cmocka_unit_test(test_envpipe_tiny),
        cmocka_unit_test(test_envpipe_properties),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
