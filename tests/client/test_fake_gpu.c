/* The fake GPU of the tests (fake_gpu.h, fake_nvml.c, fake_cuda.c) is no kinder than hardware:
 * the energy counter refreshes at coarse instants with a per-device phase, power carries noise,
 * a pre-Volta device has no energy counter, a clock change hits a running kernel at the instant it
 * is made (also from another process), the energy is the model's integral, devices are separate
 * and named by UUID, and a device-side barrier holds streams until all arrived. Each test uses its
 * own $PRS_FAKE_GPU_DIR, so its settings (refresh, noise) apply to fresh device states. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "skips.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dlfcn.h>
#include <unistd.h>

#include "fake_cuda.h"
#include "wait.h"
#include "fake_dir.h"
#include "fake_gpu.h"
#include "perseus/gpu.h"

static fakecu_api cu;
static int have_cu;

/* A fresh device directory, in $PRS_FAKE_GPU_DIR, with the given settings ("" unsets). */
typedef struct fixture {
    char dir[256];
} fixture;

static void fx_begin(fixture *f, const char *refresh_ms, const char *noise, const char *no_energy)
{
    assert_int_equal(fake_dir_begin(f->dir, sizeof f->dir, "fake-gpu"), 0);
    if (*refresh_ms)
        setenv("PRS_FAKE_NVML_REFRESH_MS", refresh_ms, 1);
    else
        unsetenv("PRS_FAKE_NVML_REFRESH_MS");
    if (*noise)
        setenv("PRS_FAKE_NVML_NOISE", noise, 1);
    else
        unsetenv("PRS_FAKE_NVML_NOISE");
    if (*no_energy)
        setenv("PRS_FAKE_NVML_NO_ENERGY", no_energy, 1);
    else
        unsetenv("PRS_FAKE_NVML_NO_ENERGY");
}

static void fx_end(fixture *f)
{
    fake_dir_end(f->dir, FAKEGPU_MAX_DEVICES);
}

static prs_gpu *open_nvml(unsigned index)
{
    const char *lib = getenv("PRS_FAKE_NVML");
    prs_gpu *g = NULL;
    prs_error e;
    assert_int_equal(prs_gpu_open_nvml(index, lib, &g, &e), 0);
    return g;
}

/* Make device dev's primary context current and create a stream on it. */
static CUstream ctx_stream(CUdevice dev)
{
    CUcontext c;
    CUstream s;
    assert_int_equal(cu.cuDevicePrimaryCtxRetain(&c, dev), CUDA_SUCCESS);
    assert_int_equal(cu.cuCtxSetCurrent(c), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    return s;
}

static void ctx_release(CUdevice dev)
{
    assert_int_equal(cu.cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    assert_int_equal(cu.cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);
}

/* The model instant of e's completed record (CLOCK_MONOTONIC, as mono_s()). */
static double event_s(CUevent e)
{
    double t = -1;
    assert_int_equal(cu.event_time(e, &t), CUDA_SUCCESS);
    return t;
}

static double elapsed_s(CUevent a, CUevent b)
{
    float ms = -1;
    assert_int_equal(cu.cuEventElapsedTime(&ms, a, b), CUDA_SUCCESS);
    return 1e-3 * ms;
}

/* With a 50 ms refresh, the counter moves in steps of the power times 50 ms, at the instants
 * phase + k·50 ms of CLOCK_MONOTONIC, the phase of device i being 50 ms · frac(0.618·(i + 1)).
 * Both devices are polled together; a stalled poll may see several steps at once, never a part
 * of one. Each reading is bracketed by host instants [ta, tb], so the steps between two readings
 * number at least the refresh instants in (tb, ta'] and at most those in (ta, tb']: bounds that
 * hold whatever the scheduler does, and that a wrong period or phase breaks. */
static double refresh_count(double t, double phase, double R)
{
    return floor((t - phase) / R);
}

static void test_refresh_quantised(void **state)
{
    fixture f;
    fx_begin(&f, "50", "", "");
    const double R = 0.050;
    prs_gpu *g[2] = {open_nvml(0), open_nvml(1)};
    double step_mj[2], ta[2], tb[2];
    uint64_t last[2];
    int steps[2] = {0, 0}, first[2] = {1, 1};
    for (int d = 0; d < 2; d++) {
        unsigned mw = 0;
        assert_int_equal(prs_gpu_power_mw(g[d], &mw), 0);
        step_mj[d] = mw * R; /* no kernel ran: constant busy power */
        ta[d] = mono_s();
        assert_int_equal(prs_gpu_energy_mj(g[d], &last[d]), 0);
        tb[d] = mono_s();
    }
    /* At least 6 steps on each device (about 0.3 s), or a deadline far beyond. */
    double t0 = mono_s();
    while ((steps[0] < 6 || steps[1] < 6) && mono_s() - t0 < 30) {
        for (int d = 0; d < 2; d++) {
            uint64_t v;
            double a = mono_s();
            assert_int_equal(prs_gpu_energy_mj(g[d], &v), 0);
            double b = mono_s();
            assert_true(v >= last[d]);
            if (v != last[d] && !first[d]) {
                double k = round((double)(v - last[d]) / step_mj[d]);
                assert_true(k >= 1);
                assert_true(fabs((double)(v - last[d]) - k * step_mj[d]) <= 2.0);
                double phase = R * fmod(0.6180339887498949 * (d + 1), 1.0);
                assert_true(k >= refresh_count(a, phase, R) - refresh_count(tb[d], phase, R));
                assert_true(k <= refresh_count(b, phase, R) - refresh_count(ta[d], phase, R));
                steps[d] += (int)k;
            }
            /* The first step is partial: the counter started between two refresh instants. */
            if (v != last[d]) first[d] = 0;
            last[d] = v;
            ta[d] = a; /* the latest reading of the value bounds the next step best */
            tb[d] = b;
        }
        sleep_s(0.0005); /* poll interval */
    }
    for (int d = 0; d < 2; d++) {
        assert_true(steps[d] >= 6);
        prs_gpu_close(g[d]);
    }
    fx_end(&f);
}

static void test_no_energy_counter(void **state)
{
    fixture f;
    fx_begin(&f, "", "", "1");
    prs_gpu *g = open_nvml(0);
    uint64_t mj;
    assert_int_equal(prs_gpu_energy_mj(g, &mj), PRS_EGPU);
    assert_non_null(strstr(prs_gpu_errmsg(g), "Not Supported"));
    assert_true(isnan(prs_gpu_read_energy_j(g)));
    unsigned mw = 0;
    assert_int_equal(prs_gpu_power_mw(g, &mw), 0);
    assert_true(mw > 100000);
    prs_gpu_close(g);
    fx_end(&f);
}

/* The counter is the model's integral: one kernel on an idle device, read before and after. */
static void test_energy_is_model_integral(void **state)
{
    if (!have_cu) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    fixture f;
    fx_begin(&f, "", "", "");
    prs_gpu *g = open_nvml(0);
    const prs_gpu_preset *p = prs_gpu_preset_find("a100");
    CUstream s = ctx_stream(0);
    prs_gpu_work w = {0.040, 0.7};
    /* A first kernel makes the device model its power (idle = blocking power from then on). */
    assert_int_equal(cu.launch_work(s, 0.001, 0.7, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamSynchronize(s), CUDA_SUCCESS);
    uint64_t e0, e1;
    double t0a = mono_s();
    assert_int_equal(prs_gpu_energy_mj(g, &e0), 0);
    double t0b = mono_s();
    assert_int_equal(cu.launch_work(s, w.t_ref_s, w.alpha, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamSynchronize(s), CUDA_SUCCESS);
    sleep_s(0.010); /* an idle stretch, at blocking power, inside the measured span */
    double t1a = mono_s();
    assert_int_equal(prs_gpu_energy_mj(g, &e1), 0);
    double t1b = mono_s();
    double busy = prs_gpu_time_s(p, &w, p->f_max_mhz);
    double e_busy = prs_gpu_energy_j(p, &w, p->f_max_mhz);
    double lo = e_busy + p->blocking_power_w * (t1a - t0b - busy);
    double hi = e_busy + p->blocking_power_w * (t1b - t0a - busy);
    double got = 1e-3 * (double)(e1 - e0);
    assert_true(got >= lo - 0.002 && got <= hi + 0.002);
    assert_int_equal(cu.cuStreamDestroy(s), CUDA_SUCCESS);
    ctx_release(0);
    prs_gpu_close(g);
    fx_end(&f);
}

/* A stream thread preempted before it runs its work (fakecuStall: 60 ms) changes nothing of the
 * device's timeline: the work starts at the model instant the host enqueued it and runs the
 * model's time, the counter ends at the model's integral, and a reading taken during the stall
 * waits for the thread to catch up and then answers with the model's energy at its instant: busy
 * power from the kernel's model start, not idle power integrated past it. */
static void test_late_thread(void **state)
{
    if (!have_cu) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    fixture f;
    fx_begin(&f, "", "", "");
    prs_gpu *g = open_nvml(0);
    const prs_gpu_preset *p = prs_gpu_preset_find("a100");
    CUstream s = ctx_stream(0);
    CUevent a, b;
    assert_int_equal(cu.cuEventCreate(&a, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventCreate(&b, 0), CUDA_SUCCESS);
    assert_int_equal(cu.launch_work(s, 0.001, 0.7, 0), CUDA_SUCCESS); /* power modelled from here */
    assert_int_equal(cu.cuStreamSynchronize(s), CUDA_SUCCESS);
    prs_gpu_work w = {0.200, 1.0};
    uint64_t e0, e1, mid;
    double t0a = mono_s();
    assert_int_equal(prs_gpu_energy_mj(g, &e0), 0);
    double t0b = mono_s();
    assert_int_equal(cu.stall(s, 0.060), CUDA_SUCCESS);
    double h0 = mono_s();
    assert_int_equal(cu.cuEventRecord(a, s), CUDA_SUCCESS);
    assert_int_equal(cu.launch_work(s, w.t_ref_s, w.alpha, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(b, s), CUDA_SUCCESS);
    double h1 = mono_s();
    double m0 = mono_s(); /* at once: the thread is still in its 60 ms stall */
    assert_int_equal(prs_gpu_energy_mj(g, &mid), 0);
    double m1 = mono_s();
    assert_int_equal(cu.cuEventSynchronize(b), CUDA_SUCCESS);
    double t1a = mono_s();
    assert_int_equal(prs_gpu_energy_mj(g, &e1), 0);
    double t1b = mono_s();
    /* Dated by the host's enqueue, not by the thread that ran 60 ms later. */
    assert_true(event_s(a) >= h0 && event_s(a) <= h1);
    double busy = prs_gpu_time_s(p, &w, p->f_max_mhz),
           e_busy = prs_gpu_energy_j(p, &w, p->f_max_mhz);
    /* The kernel starts after the event's 2 us, or when the host enqueued it if later (within the
     * host's own span [h0, h1]), and lasts the model's time. */
    double gap = elapsed_s(a, b) - (FAKECU_EVENT_S + busy);
    assert_true(gap >= -1e-8 && gap <= h1 - h0 + 1e-8);
    double lo = e_busy + p->blocking_power_w * (t1a - t0b - busy);
    double hi = e_busy + p->blocking_power_w * (t1b - t0a - busy);
    double got = 1e-3 * (double)(e1 - e0);
    assert_true(got >= lo - 0.002 && got <= hi + 0.002);
    /* The reading during the stall: the model's energy at an instant of [m0, m1], inside the
     * kernel (which started at ks and runs 200 ms), unless the wait ran out first. */
    double ks = event_s(b) - busy, pb = e_busy / busy;
    double mid_lo = p->blocking_power_w * (ks - t0b) + pb * (m0 - ks);
    double mid_hi = p->blocking_power_w * (ks - t0a) + pb * (m1 - ks);
    double got_mid = 1e-3 * (double)(mid - e0);
    printf("late thread: the reading during the stall took %.1f ms, %.4f J in [%.4f, %.4f]\n",
           1e3 * (m1 - m0), got_mid, mid_lo, mid_hi);
    if (m1 - m0 < FAKEGPU_READ_WAIT_S && m1 < ks + busy)
        assert_true(got_mid >= mid_lo - 0.002 && got_mid <= mid_hi + 0.002);
    assert_int_equal(cu.cuEventDestroy(a), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventDestroy(b), CUDA_SUCCESS);
    assert_int_equal(cu.stall(s, -1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cu.cuStreamDestroy(s), CUDA_SUCCESS);
    ctx_release(0);
    prs_gpu_close(g);
    fx_end(&f);
}

/* nvmlDeviceGetPowerUsage straight from the fake library (prs_gpu_power_mw asks the instant field
 * first): watts. */
static double power_usage_w(unsigned index)
{
    void *lib = dlopen(getenv("PRS_FAKE_NVML"), RTLD_NOW | RTLD_LOCAL);
    assert_non_null(lib);
    int (*by_index)(unsigned, void **) = NULL;
    int (*usage)(void *, unsigned *) = NULL;
    *(void **)&by_index = dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&usage = dlsym(lib, "nvmlDeviceGetPowerUsage");
    assert_true(by_index && usage);
    void *h = NULL;
    unsigned mw = 0;
    assert_int_equal(by_index(index, &h), 0);
    assert_int_equal(usage(h, &mw), 0);
    dlclose(lib);
    return 1e-3 * mw;
}

/* An H100's power reading is the average of the last second, refreshed with the counter; GA100's
 * (preset a100) is the power now; both answer the instantaneous field with the power now. After
 * 0.3 s of work then idle: the instant power drops at once, the H100's reading only once a second
 * of idle has passed (measured from the end of the work, whatever the machine's load). */
static void test_power_reading_averaged(void **state)
{
    if (!have_cu) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    const char *presets[2] = {"h100", "a100"};
    for (int k = 0; k < 2; k++) {
        fixture f;
        fx_begin(&f, "10", "", "");
        setenv("PRS_FAKE_NVML_PRESET", presets[k], 1);
        prs_gpu *g = open_nvml(0);
        const prs_gpu_preset *p = prs_gpu_preset_find(presets[k]);
        CUstream s = ctx_stream(0);
        assert_int_equal(cu.launch_work(s, 0.300, 1.0, 0), CUDA_SUCCESS);
        assert_int_equal(cu.cuStreamSynchronize(s), CUDA_SUCCESS);
        double t_idle = mono_s(); /* the work ended before this */
        unsigned mw = 0;
        assert_int_equal(prs_gpu_power_mw(g, &mw), 0); /* the instant field */
        assert_true(fabs(1e-3 * mw - p->blocking_power_w) < 1.0);
        double first = power_usage_w(0), elapsed = mono_s() - t_idle;
        if (k == 1) {
            assert_true(fabs(first - p->blocking_power_w) < 1.0);
        } else {
            double busy = prs_gpu_power_w(p, p->f_max_mhz);
            /* Idle for under half the window: over half of it was busy (less a refresh). */
            if (elapsed < 0.4)
                assert_true(first > p->blocking_power_w + 0.4 * (busy - p->blocking_power_w));
            double reading = first;
            PRS_WAIT_UNTIL((reading = power_usage_w(0)) < p->blocking_power_w + 1.0, 30);
            assert_true(reading < p->blocking_power_w + 1.0);
            assert_true(mono_s() - t_idle >= 1.0 - 0.025); /* a second of idle, less refreshes */
        }
        unsetenv("PRS_FAKE_NVML_PRESET");
        assert_int_equal(cu.cuStreamDestroy(s), CUDA_SUCCESS);
        ctx_release(0);
        prs_gpu_close(g);
        fx_end(&f);
    }
}

/* The energy counter's reads have a tail as an H100's: one in ten drawn slow (1.8 to 2.6 times
 * the cost, a few 6 times), counted by the fake, never dated by the machine's load. */
static void test_read_tail(void **state)
{
    fixture f;
    fx_begin(&f, "", "", "");
    setenv("PRS_FAKE_NVML_READ_MS", "1", 1);
    prs_gpu *g = open_nvml(0);
    void *lib = dlopen(getenv("PRS_FAKE_NVML"), RTLD_NOW | RTLD_LOCAL);
    assert_non_null(lib);
    long (*slow)(void) = NULL;
    *(void **)&slow = dlsym(lib, "fakenvml_slow_reads");
    assert_non_null(slow);
    long before = slow();
    int n = 400;
    for (int i = 0; i < n; i++) {
        uint64_t mj;
        assert_int_equal(prs_gpu_energy_mj(g, &mj), 0);
    }
    long k = slow() - before; /* binomial(400, 0.1): 40, sd 6 */
    print_message("slow reads: %ld of %d\n", k, n);
    assert_true(k >= 16 && k <= 80);
    dlclose(lib);
    unsetenv("PRS_FAKE_NVML_READ_MS");
    prs_gpu_close(g);
    fx_end(&f);
}

/* Noise 10 %: the energy of many kernels averages to the model's; power readings spread. */
static void test_noise_mean(void **state)
{
    if (!have_cu) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    fixture f;
    fx_begin(&f, "", "0.1", "");
    prs_gpu *g = open_nvml(0);
    const prs_gpu_preset *p = prs_gpu_preset_find("a100");
    CUstream s = ctx_stream(0);
    CUevent a, b;
    assert_int_equal(cu.cuEventCreate(&a, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventCreate(&b, 0), CUDA_SUCCESS);
    prs_gpu_work w = {0.002, 0.7};
    int n = 200;
    fakecu_gate gate = FAKECU_GATE_INIT; /* the kernels back to back, whenever the host ran */
    assert_int_equal(fakecu_gate_close(&cu, &gate, s), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(a, s), CUDA_SUCCESS);
    for (int i = 0; i < n; i++)
        assert_int_equal(cu.launch_work(s, w.t_ref_s, w.alpha, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(b, s), CUDA_SUCCESS);
    fakecu_gate_open(&gate);
    /* Power readings while the kernels run: one noise factor per kernel. */
    double sum = 0, sum2 = 0;
    int m = 0;
    double p_busy = prs_gpu_power_w(p, p->f_max_mhz);
    while (cu.cuEventQuery(b) == CUDA_ERROR_NOT_READY && m < 1000) {
        unsigned mw;
        assert_int_equal(prs_gpu_power_mw(g, &mw), 0);
        double x = 1e-3 * mw / p_busy;
        if (x > 0.5) { /* busy, not between kernels */
            sum += x;
            sum2 += x * x;
            m++;
        }
        sleep_s(0.0007); /* poll interval */
    }
    assert_true(m >= 50);
    double mean = sum / m, sd = sqrt(sum2 / m - mean * mean);
    assert_true(fabs(mean - 1) < 0.05);
    assert_true(sd > 0.05 && sd < 0.15);
    assert_int_equal(cu.cuEventSynchronize(b), CUDA_SUCCESS);
    /* The counter over the whole run, against the noiseless model. */
    double span = elapsed_s(a, b);
    assert_true(fabs(span - n * prs_gpu_time_s(p, &w, p->f_max_mhz)) < 1e-5);
    (void)span;
    assert_int_equal(cu.cuEventDestroy(a), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventDestroy(b), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamDestroy(s), CUDA_SUCCESS);
    ctx_release(0);
    prs_gpu_close(g);
    fx_end(&f);
}

/* Energy of n noisy kernels against the model: within a few standard errors. */
static void test_noise_energy(void **state)
{
    if (!have_cu) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    fixture f;
    fx_begin(&f, "", "0.2", "");
    prs_gpu *g = open_nvml(0);
    const prs_gpu_preset *p = prs_gpu_preset_find("a100");
    CUstream s = ctx_stream(0);
    prs_gpu_work w = {0.002, 0.7};
    int n = 150;
    assert_int_equal(cu.launch_work(s, 0.005, 0.7, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamSynchronize(s), CUDA_SUCCESS);
    uint64_t e0, e1;
    fakecu_gate gate = FAKECU_GATE_INIT; /* the kernels back to back: no idle gap among them */
    assert_int_equal(fakecu_gate_close(&cu, &gate, s), CUDA_SUCCESS);
    for (int i = 0; i < n; i++)
        assert_int_equal(cu.launch_work(s, w.t_ref_s, w.alpha, 0), CUDA_SUCCESS);
    double t0 = mono_s();
    assert_int_equal(prs_gpu_energy_mj(g, &e0), 0);
    fakecu_gate_open(&gate);
    assert_int_equal(cu.cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_int_equal(prs_gpu_energy_mj(g, &e1), 0);
    double t1 = mono_s();
    double busy = n * prs_gpu_time_s(p, &w, p->f_max_mhz);
    double model = n * prs_gpu_energy_j(p, &w, p->f_max_mhz) +
                   p->blocking_power_w * ((t1 - t0) - busy); /* idle: noisy too, small */
    double got = 1e-3 * (double)(e1 - e0);
    /* Standard error of the busy part: 0.2 / sqrt(150) = 1.6 %. */
    assert_true(fabs(got / model - 1) < 0.06);
    assert_int_equal(cu.cuStreamDestroy(s), CUDA_SUCCESS);
    ctx_release(0);
    prs_gpu_close(g);
    fx_end(&f);
}

/* A kernel of 200 ms at f_max (alpha 1); the clock halves once it has run a while: the rest of
 * its work runs at half speed from the instant of the call. The change is made between two host
 * instants c0 and c1, once the event before the kernel has completed (a predicate, not a sleep).
 * The kernel starts at that event's model instant, or later by as long as the host took between
 * recording the event and launching the kernel (the device idles until work is enqueued, as a GPU
 * does; a loaded host makes it tens of microseconds): that delay is the device time between the
 * two events that the kernel did not run. If the host was so late that the kernel had ended
 * before the change, the experiment is made again (at most 5 times). */
static void test_clock_change_mid_kernel(void **state)
{
    if (!have_cu) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    fixture f;
    fx_begin(&f, "", "", "");
    prs_gpu *g = open_nvml(0);
    CUstream s = ctx_stream(0);
    CUevent a, b;
    assert_int_equal(cu.cuEventCreate(&a, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventCreate(&b, 0), CUDA_SUCCESS);
    double start = 0, c0 = 0, c1 = 0;
    for (int attempt = 0; attempt < 5; attempt++) {
        assert_int_equal(prs_gpu_reset_clock(g), 0);
        cu.reset_stats();
        assert_int_equal(cu.cuEventRecord(a, s), CUDA_SUCCESS);
        assert_int_equal(cu.launch_work(s, 0.200, 1.0, 705), CUDA_SUCCESS);
        assert_int_equal(cu.cuEventRecord(b, s), CUDA_SUCCESS);
        while (cu.cuEventQuery(a) == CUDA_ERROR_NOT_READY)
            sleep_s(0.0005); /* poll interval: until the kernel has started */
        start = event_s(a);
        c0 = mono_s();
        assert_int_equal(prs_gpu_set_clock(g, 705), 0);
        c1 = mono_s();
        assert_int_equal(cu.cuEventSynchronize(b), CUDA_SUCCESS);
        if (c1 < start + 0.200) break; /* changed mid-kernel */
    }
    assert_true(c1 < start + 0.200);
    /* The kernel ran busy seconds, at seconds of them at 705 MHz: x = busy - at at 1410 MHz
     * before the change, and the rest of the work (0.200 - x) took twice as long. */
    double t = elapsed_s(a, b), busy, at;
    cu.clock_share(&busy, &at);
    double x = busy - at, launch_delay = t - busy;
    assert_true(launch_delay >= -1e-6);
    assert_true(fabs(at - 2 * (0.200 - x)) < 1e-6);
    /* The change took effect between c0 and c1: x lies in [c0, c1] - kernel start, and the kernel
     * started between the event's instant and launch_delay later. */
    double x_lo = c0 - start - launch_delay, x_hi = c1 - start;
    if (x < x_lo - 1e-5 || x > x_hi + 1e-5)
        fail_msg("the change took effect %.6f s into the kernel, outside [%.6f, %.6f] (launched "
                 "%.6f s after the event)",
                 x, x_lo, x_hi, launch_delay);
    assert_int_equal(prs_gpu_reset_clock(g), 0);
    assert_int_equal(cu.cuEventDestroy(a), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventDestroy(b), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamDestroy(s), CUDA_SUCCESS);
    ctx_release(0);
    prs_gpu_close(g);
    fx_end(&f);
}

/* The clock controller is another process (forked, as in the client): the clock it sets through
 * the fake NVML is the clock this process's kernels run at. */
static void test_clock_from_other_process(void **state)
{
    if (!have_cu) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    fixture f;
    fx_begin(&f, "", "", "");
    prs_gpu *g = open_nvml(0);
    prs_clockctl *c;
    prs_error e;
    assert_int_equal(prs_clockctl_new(g, PRS_CLOCKCTL_PROCESS, &c, &e), 0);
    assert_int_equal(prs_clockctl_set(c, 705), 0);
    assert_int_equal(prs_clockctl_sync(c, 5), 0);
    CUstream s = ctx_stream(0);
    CUevent ev[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(cu.cuEventCreate(&ev[i], 0), CUDA_SUCCESS);
    fakecu_gate gate = FAKECU_GATE_INIT; /* back to back, however late the host ran */
    assert_int_equal(fakecu_gate_close(&cu, &gate, s), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(ev[0], s), CUDA_SUCCESS);
    assert_int_equal(cu.launch_work(s, 0.020, 1.0, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(ev[1], s), CUDA_SUCCESS);
    fakecu_gate_open(&gate);
    assert_int_equal(cu.cuEventSynchronize(ev[1]), CUDA_SUCCESS);
    assert_true(fabs(elapsed_s(ev[0], ev[1]) - 0.040) < 1e-5);
    assert_int_equal(prs_clockctl_set(c, 1410), 0);
    assert_int_equal(prs_clockctl_sync(c, 5), 0);
    assert_int_equal(fakecu_gate_close(&cu, &gate, s), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(ev[1], s), CUDA_SUCCESS);
    assert_int_equal(cu.launch_work(s, 0.020, 1.0, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(ev[2], s), CUDA_SUCCESS);
    fakecu_gate_open(&gate);
    assert_int_equal(cu.cuEventSynchronize(ev[2]), CUDA_SUCCESS);
    assert_true(fabs(elapsed_s(ev[1], ev[2]) - 0.020) < 1e-5);
    prs_clockctl_free(c);
    for (int i = 0; i < 3; i++)
        assert_int_equal(cu.cuEventDestroy(ev[i]), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamDestroy(s), CUDA_SUCCESS);
    ctx_release(0);
    prs_gpu_close(g);
    fx_end(&f);
}

typedef int (*nvml_count_fn)(unsigned *);
typedef int (*nvml_handle_fn)(unsigned, void **);
typedef int (*nvml_uuid_fn)(void *, char *, unsigned);
typedef int (*nvml_by_uuid_fn)(const char *, void **);

/* Four devices: separate UUIDs in NVML and CUDA, and separate clocks. */
static void test_several_devices(void **state)
{
    if (!have_cu) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    fixture f;
    fx_begin(&f, "", "", "");
    void *nv = dlopen(getenv("PRS_FAKE_NVML"), RTLD_NOW | RTLD_LOCAL);
    assert_non_null(nv);
    int (*init)(void) = NULL, (*shutdown)(void) = NULL;
    nvml_count_fn count = NULL;
    nvml_handle_fn handle = NULL;
    nvml_uuid_fn uuid = NULL;
    nvml_by_uuid_fn by_uuid = NULL;
    assert_int_equal(fakecu_sym(nv, &init, sizeof init, "nvmlInit_v2"), 0);
    assert_int_equal(fakecu_sym(nv, &shutdown, sizeof shutdown, "nvmlShutdown"), 0);
    assert_int_equal(fakecu_sym(nv, &count, sizeof count, "nvmlDeviceGetCount_v2"), 0);
    assert_int_equal(fakecu_sym(nv, &handle, sizeof handle, "nvmlDeviceGetHandleByIndex_v2"), 0);
    assert_int_equal(fakecu_sym(nv, &uuid, sizeof uuid, "nvmlDeviceGetUUID"), 0);
    assert_int_equal(fakecu_sym(nv, &by_uuid, sizeof by_uuid, "nvmlDeviceGetHandleByUUID"), 0);
    prs_gpu *g2 = open_nvml(2); /* initialises NVML in this process (shared library instance) */
    assert_int_equal(init(), 0);
    unsigned n = 0;
    assert_int_equal(count(&n), 0);
    assert_int_equal(n, 4);
    char ids[4][96];
    for (unsigned i = 0; i < n; i++) {
        void *h, *h2;
        assert_int_equal(handle(i, &h), 0);
        assert_int_equal(uuid(h, ids[i], sizeof ids[i]), 0);
        assert_int_equal(strlen(ids[i]), 40);
        assert_int_equal(strncmp(ids[i], "GPU-", 4), 0);
        for (unsigned j = 0; j < i; j++)
            assert_string_not_equal(ids[i], ids[j]);
        assert_int_equal(by_uuid(ids[i], &h2), 0);
        assert_ptr_equal(h, h2);
    }
    void *h;
    assert_int_not_equal(handle(4, &h), 0);
    assert_int_equal(by_uuid("GPU-00000000-0000-0000-0000-000000000000", &h), 6);

    int cn = 0;
    assert_int_equal(cu.cuDeviceGetCount(&cn), CUDA_SUCCESS);
    assert_int_equal(cn, 4);
    CUuuid cid;
    assert_int_equal(cu.cuDeviceGetUuid(&cid, 2), CUDA_SUCCESS);
    char s2[48];
    const unsigned char *u = (const unsigned char *)cid.bytes;
    snprintf(s2, sizeof s2,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
             u[15]);
    assert_string_equal(s2, ids[2]);

    /* Device 2 at half clock, device 0 at f_max: the same work takes twice as long on 2. */
    assert_int_equal(prs_gpu_set_clock(g2, 705), 0);
    double t[2];
    for (int k = 0; k < 2; k++) {
        CUdevice dev = k == 0 ? 0 : 2;
        CUstream s = ctx_stream(dev);
        CUevent a, b;
        assert_int_equal(cu.cuEventCreate(&a, 0), CUDA_SUCCESS);
        assert_int_equal(cu.cuEventCreate(&b, 0), CUDA_SUCCESS);
        fakecu_gate gate = FAKECU_GATE_INIT; /* back to back, however late the host ran */
        assert_int_equal(fakecu_gate_close(&cu, &gate, s), CUDA_SUCCESS);
        assert_int_equal(cu.cuEventRecord(a, s), CUDA_SUCCESS);
        assert_int_equal(cu.launch_work(s, 0.010, 1.0, 0), CUDA_SUCCESS);
        assert_int_equal(cu.cuEventRecord(b, s), CUDA_SUCCESS);
        fakecu_gate_open(&gate);
        assert_int_equal(cu.cuEventSynchronize(b), CUDA_SUCCESS);
        t[k] = elapsed_s(a, b);
        assert_int_equal(cu.cuEventDestroy(a), CUDA_SUCCESS);
        assert_int_equal(cu.cuEventDestroy(b), CUDA_SUCCESS);
        assert_int_equal(cu.cuStreamDestroy(s), CUDA_SUCCESS);
        ctx_release(dev);
    }
    assert_true(fabs(t[0] - 0.010) < 1e-5);
    assert_true(fabs(t[1] - 0.020) < 1e-5);
    assert_int_equal(prs_gpu_reset_clock(g2), 0);
    prs_gpu_close(g2);
    assert_int_equal(shutdown(), 0);
    dlclose(nv);
    fx_end(&f);
}

/* A device-side barrier: the faster stream waits; both continue from the last arrival's model
 * instant, whenever their threads run again (model time: exactly). */
static void test_barrier(void **state)
{
    if (!have_cu) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    fixture f;
    fx_begin(&f, "", "", "");
    CUstream s0 = ctx_stream(0), s1 = ctx_stream(1);
    CUevent a0, a1, b0, b1;
    assert_int_equal(cu.cuEventCreate(&a0, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventCreate(&a1, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventCreate(&b0, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventCreate(&b1, 0), CUDA_SUCCESS);
    fakecu_gate gate0 = FAKECU_GATE_INIT, gate1 = FAKECU_GATE_INIT;
    assert_int_equal(fakecu_gate_close(&cu, &gate0, s0), CUDA_SUCCESS);
    assert_int_equal(fakecu_gate_close(&cu, &gate1, s1), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(a0, s0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(a1, s1), CUDA_SUCCESS);
    assert_int_equal(cu.launch_work(s0, 0.005, 1.0, 0), CUDA_SUCCESS);
    assert_int_equal(cu.launch_work(s1, 0.030, 1.0, 0), CUDA_SUCCESS);
    assert_int_equal(cu.launch_barrier(s0, "allreduce", 2), CUDA_SUCCESS);
    assert_int_equal(cu.launch_barrier(s1, "allreduce", 2), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(b0, s0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(b1, s1), CUDA_SUCCESS);
    fakecu_gate_open(&gate0);
    fakecu_gate_open(&gate1);
    assert_int_equal(cu.cuEventSynchronize(b0), CUDA_SUCCESS);
    double seen0 = mono_s();
    assert_int_equal(cu.cuEventSynchronize(b1), CUDA_SUCCESS);
    double seen1 = mono_s();
    /* Released at the last arrival, stream 1's after its 30 ms kernel at the latest: stream 0 (5
     * ms of work) waited for it. */
    double last = fmax(event_s(a0) + 0.005, event_s(a1) + 0.030) + FAKECU_EVENT_S;
    assert_true(fabs(event_s(b0) - last) < 1e-9 && event_s(b0) <= seen0);
    assert_true(fabs(event_s(b1) - last) < 1e-9 && event_s(b1) <= seen1);
    assert_true(elapsed_s(a1, b1) >= 0.030 - 1e-6);
    assert_int_equal(cu.launch_barrier(s0, "x", 0), CUDA_ERROR_INVALID_VALUE);
    CUevent ev[] = {a0, a1, b0, b1};
    for (int i = 0; i < 4; i++)
        assert_int_equal(cu.cuEventDestroy(ev[i]), CUDA_SUCCESS);
    assert_int_equal(cu.cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    assert_int_equal(cu.cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS); /* destroys s0 */
    assert_int_equal(cu.cuDevicePrimaryCtxRelease(1), CUDA_SUCCESS);
    fx_end(&f);
}

/* Without $PRS_FAKE_GPU_DIR the fake NVML and the fake driver of one process still share their
 * devices (in memory): a clock locked through NVML is the clock the kernels run at. */
static void test_shared_without_dir(void **state)
{
    if (!have_cu) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    unsetenv("PRS_FAKE_GPU_DIR");
    unsetenv("PRS_FAKE_NVML_REFRESH_MS");
    unsetenv("PRS_FAKE_NVML_NOISE");
    unsetenv("PRS_FAKE_NVML_NO_ENERGY");
    prs_gpu *g = open_nvml(0);
    assert_int_equal(prs_gpu_set_clock(g, 705), 0);
    CUstream s = ctx_stream(0);
    CUevent a, b;
    assert_int_equal(cu.cuEventCreate(&a, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventCreate(&b, 0), CUDA_SUCCESS);
    fakecu_gate gate = FAKECU_GATE_INIT; /* back to back, however late the host ran */
    assert_int_equal(fakecu_gate_close(&cu, &gate, s), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(a, s), CUDA_SUCCESS);
    assert_int_equal(cu.launch_work(s, 0.010, 1.0, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(b, s), CUDA_SUCCESS);
    fakecu_gate_open(&gate);
    assert_int_equal(cu.cuEventSynchronize(b), CUDA_SUCCESS);
    assert_true(fabs(elapsed_s(a, b) - 0.020) < 1e-5);
    assert_int_equal(prs_gpu_reset_clock(g), 0);
    assert_int_equal(cu.cuEventDestroy(a), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventDestroy(b), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamDestroy(s), CUDA_SUCCESS);
    ctx_release(0);
    prs_gpu_close(g);
}

/* Driver semantics of the fake: codes without initialisation or context, event states. */
static void test_driver_semantics(void **state)
{
    if (!have_cu) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    fixture f;
    fx_begin(&f, "", "", "");
    CUevent e;
    CUcontext c = (CUcontext)1;
    assert_int_equal(cu.cuCtxGetCurrent(&c), CUDA_SUCCESS);
    assert_null(c);
    assert_int_equal(cu.cuEventCreate(&e, 0), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cu.launch_work(NULL, 0.001, 1.0, 0), CUDA_ERROR_INVALID_CONTEXT);
    CUdevice d;
    assert_int_equal(cu.cuDeviceGet(&d, 99), CUDA_ERROR_INVALID_DEVICE);
    CUstream s = ctx_stream(0);
    CUevent a, b;
    assert_int_equal(cu.cuEventCreate(&a, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventCreate(&b, FAKECU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventQuery(a), CUDA_SUCCESS); /* never recorded */
    float ms;
    assert_int_equal(cu.cuEventElapsedTime(&ms, a, a), CUDA_ERROR_INVALID_HANDLE);
    fakecu_gate gate = FAKECU_GATE_INIT; /* a is not reached until the gate opens */
    assert_int_equal(fakecu_gate_close(&cu, &gate, s), CUDA_SUCCESS);
    assert_int_equal(cu.launch_work(s, 0.020, 1.0, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(a, s), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(b, s), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventQuery(a), CUDA_ERROR_NOT_READY);
    assert_int_equal(cu.cuEventElapsedTime(&ms, a, a), CUDA_ERROR_NOT_READY);
    fakecu_gate_open(&gate);
    assert_int_equal(cu.cuEventSynchronize(b), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventQuery(a), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventElapsedTime(&ms, a, b), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cu.cuEventElapsedTime(&ms, a, a), CUDA_SUCCESS);
    assert_true(ms == 0.0f);
    /* The default stream (handle 0) of the current context works too. */
    assert_int_equal(cu.launch_work(NULL, 0.002, 1.0, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(a, NULL), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamSynchronize(NULL), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventQuery(a), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamDestroy(NULL), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cu.cuEventDestroy(a), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventDestroy(b), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamDestroy(s), CUDA_SUCCESS);
    ctx_release(0);
    assert_int_equal(cu.cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
    fx_end(&f);
}

int main(void)
{
    setenv("PRS_FAKE_GPU_COUNT", "4", 1);
    const char *lib = getenv("PRS_FAKE_CUDA");
    if (lib && *lib) {
        if (fakecu_load(&cu, lib)) {
            fprintf(stderr, "cannot load %s: %s\n", lib, dlerror());
            return 1;
        }
        if (cu.cuInit(0) != CUDA_SUCCESS) return 1;
        have_cu = 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refresh_quantised),
        cmocka_unit_test(test_no_energy_counter),
        cmocka_unit_test(test_energy_is_model_integral),
        cmocka_unit_test(test_late_thread),
        cmocka_unit_test(test_power_reading_averaged),
        cmocka_unit_test(test_read_tail),
        cmocka_unit_test(test_noise_mean),
        cmocka_unit_test(test_noise_energy),
        cmocka_unit_test(test_clock_change_mid_kernel),
        cmocka_unit_test(test_clock_from_other_process),
        cmocka_unit_test(test_several_devices),
        cmocka_unit_test(test_barrier),
        cmocka_unit_test(test_shared_without_dir),
        cmocka_unit_test(test_driver_semantics),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
