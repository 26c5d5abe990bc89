/* The energy monitor (perseus/monitor.h) on the fake libnvidia-ml.so.1 ($PRS_FAKE_NVML) with a
 * counter refreshed every 100 ms, as on current GPUs, and 3 % power noise: nested and overlapping
 * windows of 0.5 s and more, whose edges fall where the GPU's power steps (the work starts and
 * stops at them), agree within 3 % with the exact integral of the power the fake drew between the
 * same instants; a window shorter than the counter's refresh period is flagged an estimate; the
 * API's refusals. The workload is fake kernels of known duration run by this thread, so nothing
 * here waits on the wall clock. */
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

#include "fake_dir.h"
#include "fake_gpu.h"
#include "perseus/monitor.h"

/* The fake GPU library's functions, from the fake NVML that links it. */
static struct {
    void *lib;
    fakegpu_dev *(*open)(int);
    double (*exact)(fakegpu_dev *);
    double (*run)(fakegpu_dev *, double, const prs_gpu_work *, double, int, double *);
    double (*now)(void);
    fakegpu_dev *dev;
} fk;
static char dir[256];

static int setup(void **state)
{
    (void)state;
    const char *path = getenv("PRS_FAKE_NVML");
    if (!path || !*path) return 0;
    if (fake_dir_begin(dir, sizeof dir, "monitor")) return -1;
    setenv("PRS_FAKE_NVML_REFRESH_MS", "100", 1);
    setenv("PRS_FAKE_NVML_NOISE", "0.03", 1);
    setenv("PRS_NVML_LIBRARY", path, 1);
    fk.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!fk.lib) return -1;
    void *p[4] = {dlsym(fk.lib, "fakegpu_open"), dlsym(fk.lib, "fakegpu_energy_exact_j"),
                  dlsym(fk.lib, "fakegpu_run_kernel"), dlsym(fk.lib, "fakegpu_now_s")};
    if (!p[0] || !p[1] || !p[2] || !p[3]) return -1;
    memcpy(&fk.open, &p[0], sizeof fk.open);
    memcpy(&fk.exact, &p[1], sizeof fk.exact);
    memcpy(&fk.run, &p[2], sizeof fk.run);
    memcpy(&fk.now, &p[3], sizeof fk.now);
    fk.dev = fk.open(0);
    return fk.dev ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    if (fk.lib) fake_dir_end(dir, 1);
    return 0;
}

/* n kernels of 10 ms (at f_max) back to back, drawing scale times the model's busy power. */
static void work(int n, double scale)
{
    const prs_gpu_work w = {0.010, 0.8};
    for (int i = 0; i < n; i++)
        fk.run(fk.dev, fk.now(), &w, scale, 0, NULL);
}

static prs_monitor *open_monitor(void)
{
    const char *spec = "nvml:0";
    prs_monitor *m;
    prs_error err = {0, ""};
    if (prs_monitor_open(&spec, 1, &m, &err)) fail_msg("open: %s", err.msg);
    assert_int_equal(prs_monitor_gpus(m), 1);
    assert_int_equal(prs_monitor_gpu_power_mode(m, 0), 0);
    return m;
}

static void begin(prs_monitor *m, const char *name, double *truth)
{
    prs_error err = {0, ""};
    if (prs_monitor_begin_window(m, name, &err)) fail_msg("begin %s: %s", name, err.msg);
    *truth = fk.exact(fk.dev);
}

/* End the window and check it against the fake's exact energy since its begin. */
static void end_check(prs_monitor *m, const char *name, double truth_begin, double tol)
{
    double truth = fk.exact(fk.dev) - truth_begin;
    prs_monitor_reading r;
    prs_error err = {0, ""};
    if (prs_monitor_end_window(m, name, &r, 1, &err)) fail_msg("end %s: %s", name, err.msg);
    double rel = r.energy_j / truth - 1;
    printf("window %s: %.3f s, %.2f J measured, %.2f J true (%+.2f %%)%s\n", name, r.time_s,
           r.energy_j, truth, 100 * rel, r.estimate ? ", estimate" : "");
    assert_true(r.time_s >= 0.5);
    assert_false(r.estimate);
    if (!(fabs(rel) < tol)) fail_msg("window %s: %+.2f %% off", name, 100 * rel);
}

static void test_windows(void **state)
{
    (void)state;
    if (!fk.dev) prs_skip_case("no fake NVML library (PRS_FAKE_NVML)");
    prs_monitor *m = open_monitor();
    double a, b, c, d;
    begin(m, "a", &a);
    work(30, 1.0);
    begin(m, "b", &b); /* nested in a */
    work(40, 0.4);
    begin(m, "c", &c); /* overlaps a and b */
    work(30, 1.0);
    end_check(m, "b", b, 0.03);
    work(30, 0.6);
    end_check(m, "a", a, 0.03);
    work(25, 1.0);
    end_check(m, "c", c, 0.03);
    /* the same name again, after it ended */
    begin(m, "a", &d);
    work(60, 0.8);
    end_check(m, "a", d, 0.03);
    prs_monitor_close(m);
}

static void test_short_window(void **state)
{
    (void)state;
    if (!fk.dev) prs_skip_case("no fake NVML library (PRS_FAKE_NVML)");
    prs_monitor *m = open_monitor();
    double t;
    begin(m, "short", &t);
    work(3, 1.0);
    prs_monitor_reading r;
    prs_error err = {0, ""};
    assert_int_equal(prs_monitor_end_window(m, "short", &r, 1, &err), 0);
    printf("short window: %.3f s, %.2f J%s\n", r.time_s, r.energy_j,
           r.estimate ? ", estimate" : "");
    assert_true(r.time_s < 0.1);
    assert_true(r.estimate);
    assert_true(r.energy_j > 0);
    prs_monitor_close(m);
}

static void test_refusals(void **state)
{
    (void)state;
    if (!fk.dev) prs_skip_case("no fake NVML library (PRS_FAKE_NVML)");
    prs_monitor *m = open_monitor();
    prs_error err = {0, ""};
    prs_monitor_reading r;
    assert_int_equal(prs_monitor_begin_window(m, "x", &err), 0);
    assert_int_equal(prs_monitor_begin_window(m, "x", &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "window 'x' is already open"));
    assert_int_equal(prs_monitor_begin_window(m, "", &err), PRS_EINVAL);
    assert_int_equal(prs_monitor_end_window(m, "y", &r, 1, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "no open window 'y'"));
    assert_int_equal(prs_monitor_end_window(m, "x", &r, 0, &err), PRS_EINVAL);
    assert_int_equal(prs_monitor_cancel_window(m, "x", &err), 0);
    assert_int_equal(prs_monitor_end_window(m, "x", &r, 1, &err), PRS_EINVAL);
    prs_monitor_close(m);
    const char *bad = "nvml:7";
    assert_int_not_equal(prs_monitor_open(&bad, 1, &m, &err), 0);
    assert_null(m);
    assert_non_null(strstr(err.msg, "GPU 0 (nvml:7)"));
    assert_int_equal(prs_monitor_open(&bad, 0, &m, &err), PRS_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_windows),
        cmocka_unit_test(test_short_window),
        cmocka_unit_test(test_refusals),
    };
    return prs_test_result(cmocka_run_group_tests(tests, setup, teardown));
}
