/* The sampler thread (src/client/sampler.h) on the fake libnvidia-ml.so.1 ($PRS_FAKE_NVML), whose
 * counter integrates the model's busy power continuously: change detection, brackets in order,
 * the power the samples imply, power mode, a full ring, stop while waiting, feeding an
 * attribution object, and a counter like an H100's (refreshed every 100 ms, each read keeping a
 * CPU busy for 3 ms), which the sampler reads only around the refreshes once it knows them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "skips.h"
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_dir.h"
#include "fake_gpu.h"
#include "perseus/gpu.h"
#include "sampler.h"

static prs_gpu *open_fake(void)
{
    const char *lib = getenv("PRS_FAKE_NVML");
    if (!lib || !*lib) return NULL;
    prs_gpu *g;
    prs_error err;
    assert_int_equal(prs_gpu_open_nvml(0, lib, &g, &err), 0);
    return g;
}

/* The fake device 0's refresh instants, from the fake GPU library the fake NVML links. */
static void fake_refresh(double *period_s, double *phase_s)
{
    void *lib = dlopen(getenv("PRS_FAKE_NVML"), RTLD_NOW | RTLD_LOCAL);
    assert_non_null(lib);
    void *p[2] = {dlsym(lib, "fakegpu_open"), dlsym(lib, "fakegpu_refresh")};
    assert_true(p[0] && p[1]);
    fakegpu_dev *(*open)(int);
    void (*refresh)(const fakegpu_dev *, double *, double *);
    memcpy(&open, &p[0], sizeof open);
    memcpy(&refresh, &p[1], sizeof refresh);
    fakegpu_dev *d = open(0);
    assert_non_null(d);
    refresh(d, period_s, phase_s);
    dlclose(lib);
}

static double busy_w(void)
{
    const prs_gpu_preset *p = prs_gpu_preset_find("a100");
    return prs_gpu_power_w(p, p->f_max_mhz);
}

static void test_energy_mode(void **state)
{
    (void)state;
    prs_gpu *g = open_fake();
    if (!g) prs_skip_input("no fake NVML library (PRS_FAKE_NVML)");
    prs__client_sampler *s;
    assert_int_equal(prs__client_sampler_start(g, NULL, &s), 0);
    assert_int_equal(prs__client_sampler_mode(s), PRS__CLIENT_SAMPLE_ENERGY);
    sleep_s(0.3);
    static prs__client_sample buf[8192];
    int n = prs__client_sampler_drain(s, buf, 8192);
    prs__client_sampler_stop(s);
    printf("energy mode: %d samples in 0.3 s\n", n);
    assert_true(n >= 30); /* the fake counter changes at every 1-3 ms poll */
    for (int i = 0; i < n; i++) {
        assert_true(buf[i].t_lo < buf[i].t_hi);
        assert_true(buf[i].t_hi - buf[i].t_lo < 0.05);
        if (i) {
            assert_true(buf[i].t_lo >= buf[i - 1].t_lo);
            assert_true(buf[i].value > buf[i - 1].value);
        }
    }
    double dt = 0.5 * (buf[n - 1].t_lo + buf[n - 1].t_hi - buf[0].t_lo - buf[0].t_hi);
    double w = (buf[n - 1].value - buf[0].value) / dt;
    printf("energy mode: %.1f W (model %.1f W)\n", w, busy_w());
    assert_true(fabs(w / busy_w() - 1) < 0.05);
    prs_gpu_close(g);
}

static void test_power_mode(void **state)
{
    (void)state;
    prs_gpu *g = open_fake();
    if (!g) prs_skip_input("no fake NVML library (PRS_FAKE_NVML)");
    prs__client_sampler_opts o;
    prs__client_sampler_opts_init(&o);
    o.force_power = 1;
    o.power_poll_s = 0.02;
    prs__client_sampler *s;
    assert_int_equal(prs__client_sampler_start(g, &o, &s), 0);
    assert_int_equal(prs__client_sampler_mode(s), PRS__CLIENT_SAMPLE_POWER);
    sleep_s(0.25);
    prs__client_sample buf[64];
    int n = prs__client_sampler_drain(s, buf, 64);
    prs__client_sampler_stop(s);
    assert_true(n >= 5 && n <= 30);
    for (int i = 0; i < n; i++) {
        assert_true(buf[i].t_lo <= buf[i].t_hi);
        assert_true(fabs(buf[i].value / busy_w() - 1) < 0.01);
    }
    prs_gpu_close(g);
}

static void test_ring_and_stop(void **state)
{
    (void)state;
    prs_gpu *g = open_fake();
    if (!g) prs_skip_input("no fake NVML library (PRS_FAKE_NVML)");
    prs__client_sampler_opts o;
    prs__client_sampler_opts_init(&o);
    o.capacity = 4;
    o.poll_s = 0.001;
    prs__client_sampler *s;
    assert_int_equal(prs__client_sampler_start(g, &o, &s), 0);
    sleep_s(0.1);
    prs__client_sample buf[8];
    assert_int_equal(prs__client_sampler_drain(s, buf, 8), 4);
    assert_true(prs__client_sampler_dropped(s) > 10);
    assert_int_equal(prs__client_sampler_errors(s), 0);
    prs__client_sampler_stop(s);

    /* A long poll period: stop must not wait for it. */
    o.force_power = 1;
    o.power_poll_s = 30;
    assert_int_equal(prs__client_sampler_start(g, &o, &s), 0);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    prs__client_sampler_stop(s);
    clock_gettime(CLOCK_MONOTONIC, &b);
    assert_true((double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec) < 1.0);
    o.poll_s = 0;
    assert_int_equal(prs__client_sampler_start(g, &o, &s), PRS_EINVAL);
    prs_gpu_close(g);
}

/* The fake GPU is busy all the time: an attribution over one kind running throughout gives the
 * model's busy power. */
static void test_feed_attrib(void **state)
{
    (void)state;
    prs_gpu *g = open_fake();
    if (!g) prs_skip_input("no fake NVML library (PRS_FAKE_NVML)");
    prs__client_attrib *a;
    assert_int_equal(prs__client_attrib_new(1, NULL, &a), 0);
    prs__client_sampler *s;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double t0 = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    assert_int_equal(prs__client_sampler_start(g, NULL, &s), 0);
    sleep_s(0.8); /* one late wake-up of a few ms is then under 1 % of the window (0.3 s: 2 %) */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double t1 = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    assert_int_equal(prs__client_attrib_busy(a, 0, t0, t1), 0);
    assert_int_equal(prs__client_sampler_feed(s, a), 0);
    prs__client_sampler_stop(s);
    double p, idle;
    prs__client_attrib_quality q;
    prs__client_attrib_solve(a, &p, &idle, &q);
    printf("attributed %.1f W over %ld rows (model %.1f W)\n", p, q.rows, busy_w());
    assert_true(q.rows > 20);
    assert_true(fabs(p / busy_w() - 1) < 0.02);
    prs__client_attrib_free(a);
    prs_gpu_close(g);
}

/* Reads of the counter that cost 3 ms of a busy CPU, refreshed every 100 ms: once the refresh fit
 * holds, the thread reads only from shortly before each refresh until it sees it. Every refresh
 * is still seen, in a bracket about one read wide. */
static void test_guided_polls(void **state)
{
    (void)state;
    char dir[256];
    if (!getenv("PRS_FAKE_NVML")) prs_skip_input("no fake NVML library (PRS_FAKE_NVML)");
    assert_int_equal(fake_dir_begin(dir, sizeof dir, "sampler"), 0);
    setenv("PRS_FAKE_NVML_REFRESH_MS", "100", 1);
    setenv("PRS_FAKE_NVML_READ_MS", "3", 1);
    prs_gpu *g = open_fake();
    double period, phase;
    fake_refresh(&period, &phase);
    assert_true(fabs(period - 0.1) < 1e-12);
    prs__client_sampler *s;
    assert_int_equal(prs__client_sampler_start(g, NULL, &s), 0);
    sleep_s(2.5); /* 16 refreshes before the first fit */
    static prs__client_sample buf[8192];
    prs__client_sampler_drain(s, buf, 8192);
    long r0 = prs__client_sampler_reads(s);
    double t0 = mono_s();
    sleep_s(2.0);
    long reads = prs__client_sampler_reads(s) - r0;
    double rate = reads / (mono_s() - t0);
    int n = prs__client_sampler_drain(s, buf, 8192);
    prs__client_sampler_stop(s);
    double gap_max = 0;
    int wide = 0, missed = 0;
    for (int i = 0; i < n; i++) {
        wide += buf[i].t_hi - buf[i].t_lo > 0.012;
        /* the first refresh instant from 0.2 ms before the bracket on */
        double at = phase + ceil((buf[i].t_lo - 2e-4 - phase) / period) * period;
        missed += at > buf[i].t_hi + 2e-4; /* the value is taken 0.15 ms from a read's middle */
        double gap = i ? 0.5 * (buf[i].t_lo + buf[i].t_hi - buf[i - 1].t_lo - buf[i - 1].t_hi) : 0;
        gap_max = gap > gap_max ? gap : gap_max;
    }
    printf("guided polls: %.1f reads/s (back to back: ~330), %d refreshes in 2 s, %d brackets "
           "over 12 ms, %d without their refresh, longest gap %.1f ms\n",
           rate, n, wide, missed, 1e3 * gap_max);
    assert_true(rate < 80);          /* under a quarter of a CPU */
    assert_true(n >= 19 && n <= 21); /* every refresh seen */
    assert_true(gap_max < 0.15);     /* none skipped */
    assert_int_equal(missed, 0);     /* every bracket holds its refresh */
    assert_true(wide <= 1); /* about one read wide; a late wake-up can make one span a sleep */
    prs_gpu_close(g);
    unsetenv("PRS_FAKE_NVML_REFRESH_MS");
    unsetenv("PRS_FAKE_NVML_READ_MS");
    fake_dir_end(dir, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_energy_mode),   cmocka_unit_test(test_power_mode),
        cmocka_unit_test(test_ring_and_stop), cmocka_unit_test(test_feed_attrib),
        cmocka_unit_test(test_guided_polls),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
