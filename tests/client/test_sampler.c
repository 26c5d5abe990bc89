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
#include <pthread.h>
#include <stdatomic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_dir.h"
#include "fake_gpu.h"
#include "perseus/gpu.h"
#include "sampler.h"
#include "wait.h"

/* Drain s into buf from *n on (cap in all) until it holds at least want samples, or limit_s pass.
 */
static void drain_until(prs__client_sampler *s, prs__client_sample *buf, int cap, int *n, int want,
                        double limit_s)
{
    PRS_WAIT_UNTIL((*n += prs__client_sampler_drain(s, buf + *n, cap - *n)) >= want, limit_s);
}

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

/* The fake NVML's count of costly reads stretched by the scheduler (fakenvml_stretched_reads). */
static long stretched_reads(void)
{
    void *lib = dlopen(getenv("PRS_FAKE_NVML"), RTLD_NOW | RTLD_LOCAL);
    assert_non_null(lib);
    void *p = dlsym(lib, "fakenvml_stretched_reads");
    assert_non_null(p);
    long (*count)(void);
    memcpy(&count, &p, sizeof count);
    long n = count();
    dlclose(lib);
    return n;
}

/* A thread of this process that sleeps 2 ms at a time and counts its wake-ups more than 4 ms late:
 * how often the scheduler made a thread of this process late (as it makes the sampler's), over the
 * time it runs. */
typedef struct lateness {
    pthread_t th;
    atomic_int stop;
    atomic_long late;
} lateness;

static void *lateness_main(void *arg)
{
    lateness *l = arg;
    while (!atomic_load(&l->stop)) {
        double due = mono_s() + 0.002;
        sleep_s(0.002); /* the probe's own period: it measures its lateness */
        if (mono_s() > due + 0.004) atomic_fetch_add(&l->late, 1);
    }
    return NULL;
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
    static prs__client_sample buf[8192];
    int n = 0;
    drain_until(s, buf, 8192, &n, 150, 60); /* the fake counter changes at every 1-3 ms poll */
    prs__client_sampler_stop(s);
    printf("energy mode: %d samples over %.3f s\n", n, n ? buf[n - 1].t_hi - buf[0].t_lo : 0);
    assert_true(n >= 150);
    for (int i = 0; i < n; i++) {
        assert_true(buf[i].t_lo < buf[i].t_hi);
        if (i) {
            assert_true(buf[i].t_lo >= buf[i - 1].t_lo);
            assert_true(buf[i].value > buf[i - 1].value);
        }
    }
    /* Constant busy power: the energy between the first and the last sample is that power times
     * a time between the brackets' nearest and farthest ends (1 mJ: the counter's unit). */
    double de = buf[n - 1].value - buf[0].value;
    double dt_min = buf[n - 1].t_lo - buf[0].t_hi, dt_max = buf[n - 1].t_hi - buf[0].t_lo;
    printf("energy mode: %.1f W (model %.1f W)\n", 2 * de / (dt_min + dt_max), busy_w());
    assert_true(de >= busy_w() * dt_min - 1e-3 && de <= busy_w() * dt_max + 1e-3);
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
    double t0 = mono_s();
    static prs__client_sample buf[4096];
    int n = 0;
    drain_until(s, buf, 4096, &n, 5, 60);
    prs__client_sampler_stop(s);
    double t1 = mono_s();
    /* At least 5, and no faster than one a poll period over the time it ran. */
    assert_true(n >= 5 && n <= (t1 - t0) / o.power_poll_s + 2);
    for (int i = 0; i < n; i++) {
        assert_true(buf[i].t_lo <= buf[i].t_hi);
        assert_true(fabs(buf[i].value / busy_w() - 1) < 0.01);
    }
    prs_gpu_close(g);
}

/* Every fourth power read is held up 5 ms before it reads (as a preempted thread or a driver
 * that waits would hold it). */
static void hold_every_fourth(void *ud)
{
    atomic_long *calls = ud;
    if (atomic_fetch_add(calls, 1) % 4 == 3) sleep_s(0.005); /* the held-up read itself */
}

/* A held-up power read took its value at some instant of a wide bracket: it is dropped and
 * counted, never pushed; the others are kept. */
static void test_power_held_dropped(void **state)
{
    (void)state;
    prs_gpu *g = open_fake();
    if (!g) prs_skip_input("no fake NVML library (PRS_FAKE_NVML)");
    atomic_long calls = 0;
    prs__client_sampler_opts o;
    prs__client_sampler_opts_init(&o);
    o.force_power = 1;
    o.power_poll_s = 0.005;
    o.before_read = hold_every_fourth;
    o.before_read_ud = &calls;
    prs__client_sampler *s;
    assert_int_equal(prs__client_sampler_start(g, &o, &s), 0);
    static prs__client_sample buf[4096];
    int n = 0;
    drain_until(s, buf, 4096, &n, 40, 60);
    /* Counted while it runs: the read in flight may be held and not counted yet. */
    long held = prs__client_sampler_held(s), reads = prs__client_sampler_reads(s),
         slept = (atomic_load(&calls) + 1) / 4;
    prs__client_sampler_stop(s);
    printf("power reads %ld: %ld held up by the hook, %ld dropped, %d kept\n", reads, slept, held,
           n);
    /* Each read the hook held (but a first one, before the usual cost is known, and the one in
     * flight) is dropped; a read the scheduler held up on a busy machine may be too. */
    assert_true(held >= slept - 2);
    assert_true(n + held <= reads + 1 && n >= 40);
    for (int i = 0; i < n; i++)
        assert_true(buf[i].t_hi - buf[i].t_lo < 0.005);
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
    PRS_WAIT_UNTIL(prs__client_sampler_dropped(s) > 10, 60);
    prs__client_sample buf[8];
    assert_int_equal(prs__client_sampler_drain(s, buf, 8), 4);
    assert_true(prs__client_sampler_dropped(s) > 10);
    assert_int_equal(prs__client_sampler_errors(s), 0);
    prs__client_sampler_stop(s);

    /* A long poll period: stop must not wait for it (a third of it: no machine is that slow). */
    o.force_power = 1;
    o.power_poll_s = 30;
    assert_int_equal(prs__client_sampler_start(g, &o, &s), 0);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    prs__client_sampler_stop(s);
    clock_gettime(CLOCK_MONOTONIC, &b);
    assert_true((double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec) <
                o.power_poll_s / 3);
    o.poll_s = 0;
    assert_int_equal(prs__client_sampler_start(g, &o, &s), PRS_EINVAL);
    prs_gpu_close(g);
}

/* The fake GPU is busy all the time: an attribution over one kind running throughout (from
 * before the sampler started, and on beyond the samples fed) gives the model's busy power. */
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
    PRS_WAIT_UNTIL(prs__client_sampler_reads(s) >= 300, 60);
    assert_int_equal(prs__client_attrib_busy(a, 0, t0, t0 + 3600), 0);
    assert_int_equal(prs__client_sampler_feed(s, a), 0);
    prs__client_sampler_stop(s);
    double p, idle;
    prs__client_attrib_quality q;
    prs__client_attrib_solve(a, &p, &idle, &q);
    printf("attributed %.1f W over %ld rows, standard error %.2f W (model %.1f W)\n", p, q.rows,
           q.kind_se_w[0], busy_w());
    assert_true(q.rows > 20);
    /* within 3 of the fit's own standard errors (the counter's noise and the reads' timing); the
     * error estimate itself is sane: under 5 % of the power (about 1.4 % on an idle machine, 3.4 %
     * under ThreadSanitizer) */
    assert_true(q.kind_se_w[0] < 0.05 * busy_w());
    assert_true(fabs(p - busy_w()) < 3 * q.kind_se_w[0]);
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
    /* 16 refreshes before the first fit: 25 seen, then 20 more counted. */
    static prs__client_sample buf[8192];
    int n = 0;
    drain_until(s, buf, 8192, &n, 25, 60);
    assert_true(n >= 25);
    long r0 = prs__client_sampler_reads(s), stretched0 = stretched_reads();
    lateness late = {.stop = 0, .late = 0};
    assert_int_equal(pthread_create(&late.th, NULL, lateness_main, &late), 0);
    double t0 = mono_s();
    int first = n - 1; /* the last refresh seen before the count: the next must follow it */
    drain_until(s, buf, 8192, &n, first + 21, 60);
    long reads = prs__client_sampler_reads(s) - r0;
    double rate = reads / (mono_s() - t0);
    atomic_store(&late.stop, 1);
    pthread_join(late.th, NULL);
    prs__client_sampler_stop(s);
    long stretched = stretched_reads() - stretched0, wakeups = atomic_load(&late.late);
    int wide = 0, missed = 0, skipped = 0;
    long k_prev = 0;
    for (int i = first; i < n; i++) {
        wide += buf[i].t_hi - buf[i].t_lo > 0.012;
        /* the first refresh instant from 0.2 ms before the bracket on */
        long k = (long)ceil((buf[i].t_lo - 2e-4 - phase) / period);
        double at = phase + (double)k * period;
        missed += at > buf[i].t_hi + 2e-4; /* the value is taken 0.15 ms from a read's middle */
        skipped += i > first && k != k_prev + 1;
        k_prev = k;
    }
    printf("guided polls: %.1f reads/s (back to back: ~330), %d refreshes, %d brackets over "
           "12 ms, %d without their refresh, %d after a skipped one; %ld reads stretched by the "
           "scheduler, %ld late wake-ups of a thread beside\n",
           rate, n - first - 1, wide, missed, skipped, stretched, wakeups);
    assert_true(n >= first + 21);
    assert_true(rate < 80); /* under a quarter of a CPU */
    /* Every refresh seen, none skipped, every bracket holding its refresh, most one read wide:
     * exactly, but for the brackets next to a read the scheduler stretched (its value is then
     * not from its middle, where the sampler places it), at most two for each, and for the
     * brackets widened by a late wake-up of the sampler (counted on a thread beside it). */
    assert_true(skipped <= 2 * stretched);
    assert_true(missed <= 2 * stretched);
    assert_true(4L * wide <= n - first + 4 * (stretched + wakeups));
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
        cmocka_unit_test(test_guided_polls),  cmocka_unit_test(test_power_held_dropped),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
