/* Profiling at a locked clock whose power exceeds the GPU's power limit (src/client/resolve.c): the
 * GPU's limiter holds the clock below the locked one (an H100's did so at 700 W, the fake GPU's
 * limiter as fake_gpu.h describes), so the computations' time and energy are not the locked
 * clock's. The client reads the SM clock back (its sampler) and a round during whose computations
 * it read a lower clock reports no windows from then on: no profile row at a clock the GPU did not
 * run at. On the fake libcuda and fake NVML with a private perseus-gpud, one rank, the A100 preset
 * (475 W at f_max) under a 400 W limit:
 *   - at f_max, every window reported comes from an iteration the GPU ran at f_max (checked
 *     against the fake GPU's own clock history: at most the read-back's resolution below it),
 *     and the limiter did bite;
 *   - at 1200 MHz (370 W) nothing changes: windows at 1200 MHz, none refused for the limit.
 * An iteration during which the clock read back above its tag (a lock that landed late) is
 * refused too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "client_int.h"
#include "fake_cuda.h"
#include "fake_dir.h"
#include "stream_client.h"
#include "fake_gpu.h"
#include "perseus/clock.h"
#include "perseus/client.h"
#include "perseus/gpu.h"
#include "skips.h"
#include "wait.h"

#define ITERS_MAX 150 /* about 30 s on an idle machine */
#define REPORTS 12    /* queued reports (with windows or not) to judge */
#define UNDER_MHZ 1200

static fakecu_api cu;
static const char *cu_path, *nvml_path;
static fakegpu_dev *(*gpu_open)(int);
static int (*gpu_changes)(fakegpu_dev *, double *, int *, int);

/* Two forwards and two backwards of tens of milliseconds (the GPU busy 95 % of the time: 455 W at
 * f_max), between the test's own events span[0] and span[1]. */
static void run_iteration(prs_client *c, CUstream cs, int mhz, CUevent span[2])
{
    assert_int_equal(cu.cuEventCreate(&span[0], 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventCreate(&span[1], 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(span[0], cs), CUDA_SUCCESS);
    for (int k = 0; k < 4; k++) {
        prs_instr in = k < 2 ? PRS_FORWARD : PRS_BACKWARD;
        assert_int_equal(prs_client_begin(c, in, k % 2, 0), 0);
        cu.launch_work(cs, in == PRS_FORWARD ? 0.03 : 0.06, 0.7, mhz);
        assert_int_equal(prs_client_end(c, in, k % 2, 0), 0);
    }
    assert_int_equal(cu.cuEventRecord(span[1], cs), CUDA_SUCCESS);
    cu.cuStreamSynchronize(cs); /* as a framework reading the loss */
    sleep_s(0.01); /* the host's own work between iterations (not a synchronisation): the fit's
                    * blocked time */
    assert_int_equal(prs_client_iteration_end(c), 0);
}

static int queued(prs_client *c)
{
    pthread_mutex_lock(&c->mu);
    int n = c->q_len;
    pthread_mutex_unlock(&c->mu);
    return n;
}

typedef struct history {
    double t[4096];
    int mhz[4096], n;
} history;

/* The lowest clock the GPU ran at over [a, b]. */
static int lowest(const history *h, double a, double b)
{
    int f = h->mhz[0], low;
    for (int i = 0; i < h->n && h->t[i] <= a; i++)
        f = h->mhz[i];
    low = f;
    for (int i = 0; i < h->n; i++)
        if (h->t[i] > a && h->t[i] < b && h->mhz[i] < low) low = h->mhz[i];
    return low;
}

/* The time the GPU ran below mhz over [a, b]. */
static double time_below(const history *h, double a, double b, int mhz)
{
    double sum = 0;
    for (int i = 0; i < h->n; i++) {
        double from = fmax(h->t[i], a), to = fmin(i + 1 < h->n ? h->t[i + 1] : b, b);
        if (h->mhz[i] < mhz && to > from) sum += to - from;
    }
    return sum;
}

/* Profile at mhz until REPORTS reports are queued; check them against the GPU's clocks. Returns
 * the reports with windows; *below: whether the GPU ran below mhz. */
static int run_case(int mhz, int *below, long *refused)
{
    char dir[256];
    assert_int_equal(fake_dir_begin(dir, sizeof dir, "throttled"), 0);
    CUstream cs;
    prs_client *c = stream_client_open(&cu, cu_path, &cs);
    stream_client_set_profiling(c, mhz);
    static CUevent span[ITERS_MAX][2];
    int n = 0;
    for (; n < ITERS_MAX && queued(c) < REPORTS; n++) {
        assert_int_equal(c->iter_no, n);
        run_iteration(c, cs, mhz, span[n]);
    }
    static history h;
    fakegpu_dev *d = gpu_open(0);
    assert_non_null(d);
    h.n = gpu_changes(d, h.t, h.mhz, 4096);
    print_message("%d iterations, %d queued, %d clock changes, %ld refused\n", n, queued(c), h.n,
                  c->dev->throttled);
    assert_true(h.n > 0 && h.n < 4096); /* the whole history */
    int with = 0, windows = 0;
    double worst = 0, worst_below = 0;
    const prs_gpu_preset *a100 = prs_gpu_preset_find("a100");
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->q_len; i++) {
        const prs__client_iteration *q = &c->queue[(c->q_head + i) % c->opts.max_queue];
        if (q->n_windows == 0) continue;
        assert_true(q->iteration >= 0 && q->iteration < n);
        double t0 = 0, t1 = 0;
        assert_int_equal(cu.event_time(span[q->iteration][0], &t0), CUDA_SUCCESS);
        assert_int_equal(cu.event_time(span[q->iteration][1], &t1), CUDA_SUCCESS);
        with++;
        for (int w = 0; w < q->n_windows; w++, windows++) {
            const prs__client_window *win = &q->windows[w];
            assert_int_equal(win->clock_mhz, mhz);
            prs_gpu_work work = {win->instr == PRS_FORWARD ? 0.03 : 0.06, 0.7};
            double dev = win->time_s / prs_gpu_time_s(a100, &work, mhz) - 1;
            if (fabs(dev) > fabs(worst)) worst = dev;
        }
        /* A row at mhz: the GPU ran at mhz, but for what the clock read back every 10 ms can
         * miss at the limiter's onset (the iterations the limiter held back, 0.2 s each, are
         * refused). */
        double below_s = time_below(&h, t0, t1, mhz);
        worst_below = fmax(worst_below, below_s);
        assert_true(below_s <= 5 * PRS__CLIENT_CLOCK_POLL_S);
    }
    *refused = c->dev->throttled;
    pthread_mutex_unlock(&c->mu);
    *below = lowest(&h, 0, 1e300) < mhz;
    print_message("%d MHz: %d iterations, %d reports with windows (%d windows), %ld refused; "
                  "the GPU ran below it: %s\n",
                  mhz, n, with, windows, *refused, *below ? "yes" : "no");
    print_message("reported windows: worst time %+.3f %% from the model's at their clock, "
                  "%.3f s below it at most\n",
                  100 * worst, worst_below);
    assert_true(n < ITERS_MAX);
    stream_client_close(&cu, c, cs);
    for (int i = 0; i < n; i++) {
        assert_int_equal(cu.cuEventDestroy(span[i][0]), CUDA_SUCCESS);
        assert_int_equal(cu.cuEventDestroy(span[i][1]), CUDA_SUCCESS);
    }
    fake_dir_end(dir, 1);
    return with;
}

static void test_over_the_limit(void **state)
{
    (void)state;
    if (!cu_path) prs_skip_input("no fake libcuda or NVML ($PRS_FAKE_CUDA, $PRS_FAKE_NVML)");
    int below;
    long refused;
    run_case(prs_gpu_preset_find("a100")->f_max_mhz, &below, &refused);
    assert_true(below);
    assert_true(refused > 0);
}

static void test_under_the_limit(void **state)
{
    (void)state;
    if (!cu_path) prs_skip_input("no fake libcuda or NVML ($PRS_FAKE_CUDA, $PRS_FAKE_NVML)");
    assert_true(prs_gpu_power_w(prs_gpu_preset_find("a100"), UNDER_MHZ) < 400);
    int below;
    long refused;
    int with = run_case(UNDER_MHZ, &below, &refused);
    assert_false(below);
    /* none refused for the limit (the first iteration may be, when the lock landed during it) */
    assert_true(refused <= 1);
    assert_true(with >= REPORTS / 2);
}

static int setup(void **state)
{
    (void)state;
    cu_path = getenv("PRS_FAKE_CUDA");
    nvml_path = getenv("PRS_FAKE_NVML");
    void *h = cu_path && *cu_path ? dlopen(cu_path, RTLD_NOW | RTLD_LOCAL) : NULL;
    *(void **)&gpu_open = h ? dlsym(h, "fakegpu_open") : NULL;
    *(void **)&gpu_changes = h ? dlsym(h, "fakegpu_clock_changes") : NULL;
    if (!gpu_open || !gpu_changes || !nvml_path || !*nvml_path || fakecu_load(&cu, cu_path)) {
        cu_path = NULL;
        return 0;
    }
    setenv("PRS_NVML_LIBRARY", nvml_path, 1);
    setenv("PRS_CUDA_LIBRARY", cu_path, 1);
    setenv("PRS_FAKE_GPU_COUNT", "1", 1);
    setenv("PRS_FAKE_NVML_POWER_LIMIT_W", "400", 1);
    unsetenv("PRS_FAKE_NVML_PRESET");
    unsetenv("PRS_FAKE_NVML_NOISE");
    unsetenv("PRS_FAKE_NVML_DENY");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_over_the_limit),
        cmocka_unit_test(test_under_the_limit),
    };
    return prs_test_result(cmocka_run_group_tests(tests, setup, NULL));
}
