/* The fake GPU's power limiter (fake_gpu.h, fakegpu_power_limit_w) against what an H100 did at its
 * 700 W limit: heavy work after a gap draws above the limit at first (an H100's matrix products
 * drew 812 W for tens of milliseconds between gaps) and settles at it (690 W alone for seconds),
 * the long-run power being the limit; the kernels' times, the energy counter and NVML's clock
 * follow the limiter's clocks; the same sequence gives the same clocks on another device (the
 * limiter runs on model instants); work under the limit never meets it.
 *
 * The A100 preset draws 475 W at f_max; the limit is 400 W (1260 MHz fits it, 1275 MHz not). Each
 * sequence is enqueued behind a closed gate and runs back to back once it opens, so its model
 * instants follow from the GPU model alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "fake_cuda.h"
#include "fake_dir.h"
#include "fake_gpu.h"
#include "perseus/gpu.h"
#include "skips.h"
#include "wait.h"

#define LIMIT_W 400.0
#define LIGHT_S 1.0 /* a light kernel first (95 W): the gap before the heavy one */
#define LIGHT_SCALE 0.2
#define HEAVY_REF_S 1.6 /* the heavy kernel's work: 1.6 s at f_max, compute-bound */
#define MAX_CHANGES 1024
#define MAX_SAMPLES 4096

static fakecu_api cu;
static int have_cu;
static fakegpu_dev *(*gpu_open)(int);
static int (*gpu_changes)(fakegpu_dev *, double *, int *, int);

/* One device's clock changes (from fakegpu_clock_changes). */
typedef struct trajectory {
    double t[MAX_CHANGES];
    int mhz[MAX_CHANGES];
    int n;
} trajectory;

static void trajectory_of(int index, trajectory *tr)
{
    fakegpu_dev *d = gpu_open(index);
    assert_non_null(d);
    tr->n = gpu_changes(d, tr->t, tr->mhz, MAX_CHANGES);
    assert_true(tr->n > 0 && tr->n < MAX_CHANGES); /* the oldest change is still remembered */
}

static int clock_at(const trajectory *tr, double t)
{
    int f = tr->mhz[0];
    for (int i = 0; i < tr->n && tr->t[i] <= t; i++)
        f = tr->mhz[i];
    return f;
}

/* The integral over [a, b] of fn(clock) along the trajectory. */
static double integral(const trajectory *tr, double a, double b, double (*fn)(int))
{
    double sum = 0, t = a;
    while (t < b) {
        double next = b;
        for (int i = 0; i < tr->n; i++)
            if (tr->t[i] > t && tr->t[i] < next) next = tr->t[i];
        sum += fn(clock_at(tr, t)) * (next - t);
        t = next;
    }
    return sum;
}

static const prs_gpu_preset *a100(void)
{
    return prs_gpu_preset_find("a100");
}

static double power_of(int mhz)
{
    return prs_gpu_power_w(a100(), mhz);
}

/* Work done per second at a clock, for a compute-bound kernel (alpha 1). */
static double speed_of(int mhz)
{
    return (double)mhz / (double)a100()->f_max_mhz;
}

static double event_s(CUevent e)
{
    double t = -1;
    assert_int_equal(cu.event_time(e, &t), CUDA_SUCCESS);
    return t;
}

/* A device's stream with the sequence: gate, e0, light kernel, e1, heavy kernel, e2. */
typedef struct seq {
    CUstream s;
    CUevent e[3];
    fakecu_gate gate;
} seq;

static void seq_enqueue(seq *q, int dev, double light_scale, double heavy_ref_s)
{
    CUcontext c;
    assert_int_equal(cu.cuDevicePrimaryCtxRetain(&c, dev), CUDA_SUCCESS);
    assert_int_equal(cu.cuCtxSetCurrent(c), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamCreate(&q->s, 0), CUDA_SUCCESS);
    for (int i = 0; i < 3; i++)
        assert_int_equal(cu.cuEventCreate(&q->e[i], 0), CUDA_SUCCESS);
    assert_int_equal(fakecu_gate_close(&cu, &q->gate, q->s), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(q->e[0], q->s), CUDA_SUCCESS);
    assert_int_equal(cu.launch_work_power(q->s, LIGHT_S, 1.0, 0, light_scale), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(q->e[1], q->s), CUDA_SUCCESS);
    assert_int_equal(cu.launch_work(q->s, heavy_ref_s, 1.0, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(q->e[2], q->s), CUDA_SUCCESS);
}

static void seq_free(seq *q, int dev)
{
    assert_int_equal(cu.cuStreamSynchronize(q->s), CUDA_SUCCESS);
    for (int i = 0; i < 3; i++)
        assert_int_equal(cu.cuEventDestroy(q->e[i]), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamDestroy(q->s), CUDA_SUCCESS);
    assert_int_equal(cu.cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    assert_int_equal(cu.cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);
}

static int seq_done(const seq *q)
{
    return cu.cuEventQuery(q->e[2]) == CUDA_SUCCESS;
}

/* A reading of NVML's SM clock between host instants ta and tb. */
typedef struct sample {
    double ta, tb;
    int mhz;
} sample;

/* The reading is the trajectory's clock at an instant of its bracket (a read held past
 * FAKEGPU_READ_WAIT_S answers with the state of an earlier instant: not judged). */
static int sample_fits(const trajectory *tr, const sample *s)
{
    if (s->tb - s->ta >= FAKEGPU_READ_WAIT_S) return 1;
    if (clock_at(tr, s->ta) == s->mhz || clock_at(tr, s->tb) == s->mhz) return 1;
    for (int i = 0; i < tr->n; i++)
        if (tr->t[i] > s->ta && tr->t[i] < s->tb && tr->mhz[i] == s->mhz) return 1;
    return 0;
}

/* The heavy kernel's part of a trajectory: [t1, t2]. Checks what an H100 did and returns the
 * instant the clock first fell below f_max. */
static double check_heavy(const trajectory *tr, double t1, double t2)
{
    const prs_gpu_preset *p = a100();
    /* above the limit at first: f_max (475 W) for at least 100 ms after the gap */
    double t_fall = INFINITY;
    for (int i = 0; i < tr->n; i++)
        if (tr->t[i] > t1 && tr->mhz[i] < p->f_max_mhz && tr->t[i] < t_fall) t_fall = tr->t[i];
    print_message("above the limit for %.3f s; then", t_fall - t1);
    assert_int_equal(clock_at(tr, t1 + 1e-3), p->f_max_mhz);
    assert_true(t_fall - t1 >= 0.1 && t_fall - t1 <= 1.0);
    /* settled at the limit: the long-run power within 1 % of it */
    double mean = integral(tr, t1 + 1.0, t2, power_of) / (t2 - t1 - 1.0);
    print_message(" %.2f W over the last %.3f s (limit %.0f W)\n", mean, t2 - t1 - 1.0, LIMIT_W);
    assert_true(fabs(mean / LIMIT_W - 1) < 0.01);
    for (double t = t1 + 1.0; t < t2; t += 0.01) /* about the clock that fits: 1260 MHz */
        assert_true(abs(clock_at(tr, t) - 1260) <= 30);
    /* the kernel ran at the trajectory's clocks: its work done along it is its work */
    double work = integral(tr, t1 + FAKECU_EVENT_S, t2, speed_of);
    assert_true(fabs(work - HEAVY_REF_S) < 1e-6);
    return t_fall;
}

/* The energy counter integrates the trajectory's power: e_a read in [ra, rb] before the gate
 * opened (no kernel yet: the model's power at f_max), e_b in [sa, sb] after the end (blocking). */
static void check_energy(const trajectory *tr, const double *t, double e_a, double ra, double rb,
                         double e_b, double sa, double sb)
{
    const prs_gpu_preset *p = a100();
    double p_max = power_of(p->f_max_mhz), idle = p->blocking_power_w;
    double model = p_max * (t[0] - 0.5 * (ra + rb)) + LIGHT_SCALE * p_max * (t[1] - t[0]) +
                   integral(tr, t[1], t[2], power_of) + idle * (0.5 * (sa + sb) - t[2]);
    double slack = p_max * (rb - ra) + idle * (sb - sa) + 0.01 + 4 * FAKECU_EVENT_S * p_max;
    print_message("energy: counter %.3f J, trajectory %.3f J\n", e_b - e_a, model);
    assert_true(fabs(e_b - e_a - model) < slack);
}

static prs_gpu *open_nvml(unsigned index)
{
    prs_gpu *g = NULL;
    prs_error e;
    assert_int_equal(prs_gpu_open_nvml(index, getenv("PRS_FAKE_NVML"), &g, &e), 0);
    return g;
}

/* Heavy work after a gap, on two devices at once; NVML's clock of device 0 read meanwhile. */
static void test_burst_then_limit(void **state)
{
    (void)state;
    if (!have_cu) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    char dir[256];
    assert_int_equal(fake_dir_begin(dir, sizeof dir, "power-limit"), 0);
    setenv("PRS_FAKE_NVML_POWER_LIMIT_W", "400", 1);
    prs_gpu *g = open_nvml(0);
    seq q[2];
    for (int d = 0; d < 2; d++) {
        q[d].gate = (fakecu_gate)FAKECU_GATE_INIT;
        seq_enqueue(&q[d], d, LIGHT_SCALE, HEAVY_REF_S);
    }
    double ra = prs_wait_now_s(), e_a = prs_gpu_read_energy_j(g), rb = prs_wait_now_s();
    fakecu_gate_open(&q[0].gate);
    fakecu_gate_open(&q[1].gate);
    static sample smp[MAX_SAMPLES];
    int n = 0, below = 0;
    PRS_WAIT_UNTIL(seq_done(&q[0]) && seq_done(&q[1]), 60)
    {
        sample *s = &smp[n < MAX_SAMPLES ? n++ : MAX_SAMPLES - 1];
        s->ta = prs_wait_now_s();
        assert_int_equal(prs_gpu_sm_clock_now(g, &s->mhz), 0);
        s->tb = prs_wait_now_s();
        below += s->mhz < a100()->f_max_mhz;
    }
    assert_true(seq_done(&q[0]) && seq_done(&q[1]));
    double sa = prs_wait_now_s(), e_b = prs_gpu_read_energy_j(g), sb = prs_wait_now_s();
    static trajectory tr[2];
    double t[2][3];
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < 3; i++)
            t[d][i] = event_s(q[d].e[i]);
        trajectory_of(d, &tr[d]);
        check_heavy(&tr[d], t[d][1], t[d][2]);
    }
    check_energy(&tr[0], t[0], e_a, ra, rb, e_b, sa, sb);
    /* NVML's clock is the throttled one: every reading the model's clock at its instant */
    print_message("%d clock readings, %d below f_max\n", n, below);
    assert_true(below > 0);
    for (int i = 0; i < n; i++)
        assert_true(sample_fits(&tr[0], &smp[i]));
    int mhz = 0; /* at rest: the clock asked for */
    assert_int_equal(prs_gpu_sm_clock_now(g, &mhz), 0);
    assert_int_equal(mhz, a100()->f_max_mhz);
    /* the same clocks on device 1, at the same offsets from the first kernel's start */
    int k0 = 0, k1 = 0;
    while (k0 < tr[0].n && tr[0].t[k0] <= t[0][0])
        k0++;
    while (k1 < tr[1].n && tr[1].t[k1] <= t[1][0])
        k1++;
    assert_int_equal(tr[0].n - k0, tr[1].n - k1);
    for (; k0 < tr[0].n; k0++, k1++) {
        assert_int_equal(tr[0].mhz[k0], tr[1].mhz[k1]);
        assert_true(fabs((tr[0].t[k0] - t[0][0]) - (tr[1].t[k1] - t[1][0])) < 1e-6);
    }
    for (int d = 0; d < 2; d++)
        seq_free(&q[d], d);
    unsetenv("PRS_FAKE_NVML_POWER_LIMIT_W");
    prs_gpu_close(g);
    fake_dir_end(dir, 2);
}

/* Work under the limit (0.8 times the model's power, 380 W) never meets the limiter: the clock
 * stays f_max and the kernels last what the model gives there. */
static void test_under_limit(void **state)
{
    (void)state;
    if (!have_cu) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    char dir[256];
    assert_int_equal(fake_dir_begin(dir, sizeof dir, "under-limit"), 0);
    setenv("PRS_FAKE_NVML_POWER_LIMIT_W", "400", 1);
    seq q = {.gate = FAKECU_GATE_INIT};
    CUcontext c;
    assert_int_equal(cu.cuDevicePrimaryCtxRetain(&c, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuCtxSetCurrent(c), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamCreate(&q.s, 0), CUDA_SUCCESS);
    for (int i = 0; i < 3; i++)
        assert_int_equal(cu.cuEventCreate(&q.e[i], 0), CUDA_SUCCESS);
    assert_int_equal(fakecu_gate_close(&cu, &q.gate, q.s), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(q.e[0], q.s), CUDA_SUCCESS);
    for (int i = 0; i < 20; i++)
        assert_int_equal(cu.launch_work_power(q.s, 0.05, 1.0, 0, 0.8), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(q.e[1], q.s), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(q.e[2], q.s), CUDA_SUCCESS);
    fakecu_gate_open(&q.gate);
    assert_int_equal(cu.cuStreamSynchronize(q.s), CUDA_SUCCESS);
    double t0 = event_s(q.e[0]), t1 = event_s(q.e[1]);
    assert_true(fabs(t1 - t0 - 1.0 - FAKECU_EVENT_S) < 1e-6);
    static trajectory tr;
    trajectory_of(0, &tr);
    for (int i = 0; i < tr.n; i++)
        assert_int_equal(tr.mhz[i], a100()->f_max_mhz);
    seq_free(&q, 0);
    unsetenv("PRS_FAKE_NVML_POWER_LIMIT_W");
    fake_dir_end(dir, 1);
}

int main(void)
{
    setenv("PRS_FAKE_GPU_COUNT", "4", 1);
    unsetenv("PRS_FAKE_NVML_REFRESH_MS");
    unsetenv("PRS_FAKE_NVML_NOISE");
    unsetenv("PRS_FAKE_NVML_PRESET");
    const char *lib = getenv("PRS_FAKE_CUDA");
    if (lib && *lib) {
        if (fakecu_load(&cu, lib)) {
            fprintf(stderr, "cannot load %s: %s\n", lib, dlerror());
            return 1;
        }
        if (cu.cuInit(0) != CUDA_SUCCESS) return 1;
        /* the fake device library under it, for the clock history */
        void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        *(void **)&gpu_open = h ? dlsym(h, "fakegpu_open") : NULL;
        *(void **)&gpu_changes = h ? dlsym(h, "fakegpu_clock_changes") : NULL;
        have_cu = gpu_open && gpu_changes && getenv("PRS_FAKE_NVML");
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_then_limit),
        cmocka_unit_test(test_under_limit),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
