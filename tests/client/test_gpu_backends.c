/* GPU backends (perseus/gpu.h): the sim backend driven deterministically, the nvml backend through
 * the fake libnvidia-ml.so.1 (tests/client/fake_nvml.c, path in $PRS_FAKE_NVML), clean failures
 * when the library is missing, and the clock controller: skipping unchanged values, a private
 * perseus-gpud, and the reset when the training process is SIGKILLed, exits or crashes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "skips.h"
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perseus/gpu.h"

static const char *fake_lib(void)
{
    const char *p = getenv("PRS_FAKE_NVML");
    return p && *p ? p : NULL;
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Read the fake NVML's state file into buf; 0 when it exists. */
static int read_state(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
    return 0;
}

/* Wait (at most 30 s) until the state file starts with prefix. */
static int wait_state(const char *path, const char *prefix, char *buf, size_t n)
{
    double t0 = mono_s();
    while (mono_s() - t0 < 30) {
        if (read_state(path, buf, n) == 0 && strncmp(buf, prefix, strlen(prefix)) == 0) return 0;
        struct timespec ts = {0, 5000000}; /* poll interval */
        nanosleep(&ts, NULL);
    }
    return -1;
}

static void state_path(char *out, size_t n, const char *tag)
{
    const char *base = getenv("TMPDIR");
    snprintf(out, n, "%s/prs-fake-nvml-%s-%ld", base && *base ? base : "/tmp", tag, (long)getpid());
    unlink(out);
}

static void test_sim_backend(void **state)
{
    prs_gpu *g;
    prs_error e;
    assert_int_equal(prs_gpu_open("sim:a100", &g, &e), 0);
    assert_string_equal(prs_gpu_backend(g), "sim");
    const prs_gpu_preset *p = prs_gpu_preset_find("a100");
    int n = 0, clocks[256];
    assert_int_equal(prs_gpu_clocks(g, clocks, 256, &n), 0);
    assert_int_equal(n, prs_gpu_num_clocks(p));
    assert_int_equal(clocks[0], p->f_max_mhz);
    assert_true(clocks[1] < clocks[0]);

    /* Default clocks run at f_max. */
    double t = 0;
    assert_int_equal(prs_gpu_sim_run(g, &p->work[PRS_FORWARD], &t), 0);
    assert_true(fabs(t - prs_gpu_time_s(p, &p->work[PRS_FORWARD], p->f_max_mhz)) < 1e-9);
    double e1 = prs_gpu_read_energy_j(g);
    assert_true(fabs(e1 - prs_gpu_energy_j(p, &p->work[PRS_FORWARD], p->f_max_mhz)) < 1e-6);

    /* A locked clock: slower, and on the U-shaped curve near its bottom, cheaper. */
    assert_int_equal(prs_gpu_set_clock(g, 1005), 0);
    int f = 0;
    assert_int_equal(prs_gpu_sim_clock(g, &f), 0);
    assert_int_equal(f, 1005);
    double t0 = prs_gpu_now_s(g);
    assert_int_equal(prs_gpu_sim_run(g, &p->work[PRS_FORWARD], &t), 0);
    assert_true(fabs(prs_gpu_now_s(g) - t0 - t) < 1e-6);
    assert_true(t > prs_gpu_time_s(p, &p->work[PRS_FORWARD], p->f_max_mhz));
    double e2 = prs_gpu_read_energy_j(g) - e1;
    assert_true(e2 < e1);

    /* Idle time costs blocking power. */
    double before = prs_gpu_read_energy_j(g);
    assert_int_equal(prs_gpu_sim_idle(g, 2.0), 0);
    assert_true(fabs(prs_gpu_read_energy_j(g) - before - 2.0 * p->blocking_power_w) < 1e-6);
    uint64_t mj = 0;
    assert_int_equal(prs_gpu_energy_mj(g, &mj), 0);
    assert_true(fabs((double)mj - 1000.0 * prs_gpu_read_energy_j(g)) <= 1.0);
    unsigned mw = 0;
    assert_int_equal(prs_gpu_power_mw(g, &mw), 0);
    assert_true(mw > 0 && mw < 1000u * (unsigned)p->p_busy_max_w);

    /* Refusals leave the clock as it was. */
    assert_int_equal(prs_gpu_set_clock(g, 1001), PRS_EGPU);
    assert_non_null(strstr(prs_gpu_errmsg(g), "1001"));
    assert_int_equal(prs_gpu_sim_idle(g, -1), PRS_EINVAL);
    assert_int_equal(prs_gpu_sim_clock(g, &f), 0);
    assert_int_equal(f, 1005);
    assert_int_equal(prs_gpu_reset_clock(g), 0);
    assert_int_equal(prs_gpu_sim_clock(g, &f), 0);
    assert_int_equal(f, 0);
    assert_int_equal(prs_gpu_sim_clock_changes(g), 2);
    prs_gpu_close(g);

    assert_int_equal(prs_gpu_open("sim:nope", &g, &e), PRS_EINVAL);
    assert_null(g);
    assert_non_null(strstr(e.msg, "a100"));
    assert_int_equal(prs_gpu_open("cuda", &g, &e), PRS_EINVAL);
    assert_int_equal(prs_gpu_open("nvml:x", &g, &e), PRS_EINVAL);
}

static void test_nvml_missing(void **state)
{
    prs_gpu *g;
    prs_error e;
    assert_int_equal(prs_gpu_open_nvml(0, "/nonexistent/libnvidia-ml.so.1", &g, &e), PRS_ENOLIB);
    assert_null(g);
    assert_non_null(strstr(e.msg, "/nonexistent/libnvidia-ml.so.1"));
    /* A library that loads but lacks the symbols (libm is always there). */
    assert_int_equal(prs_gpu_open_nvml(0, "libm.so.6", &g, &e), PRS_ENOLIB);
    assert_non_null(strstr(e.msg, "nvmlInit_v2"));
}

static void test_nvml_fake(void **state)
{
    if (!fake_lib()) prs_skip_input("no fake NVML library (PRS_FAKE_NVML)");
    char st[512], buf[256];
    state_path(st, sizeof st, "basic");
    setenv("PRS_FAKE_NVML_STATE", st, 1);
    prs_gpu *g;
    prs_error e;
    assert_int_equal(prs_gpu_open_nvml(0, fake_lib(), &g, &e), 0);
    assert_string_equal(prs_gpu_backend(g), "nvml");
    assert_non_null(strstr(prs_gpu_name(g), "Fake NVML"));
    int n = 0, clocks[256];
    assert_int_equal(prs_gpu_clocks(g, NULL, 0, &n), 0);
    const prs_gpu_preset *p = prs_gpu_preset_find("a100");
    assert_int_equal(n, prs_gpu_num_clocks(p));
    assert_int_equal(prs_gpu_clocks(g, clocks, 256, &n), 0);
    assert_int_equal(clocks[0], p->f_max_mhz);
    assert_int_equal(clocks[n - 1], p->f_min_mhz);

    assert_int_equal(prs_gpu_set_clock(g, 1200), 0);
    assert_int_equal(read_state(st, buf, sizeof buf), 0);
    assert_int_equal(strncmp(buf, "locked 1200 1200", 16), 0);
    assert_int_equal(prs_gpu_set_clock(g, 1201), PRS_EGPU);
    assert_non_null(strstr(prs_gpu_errmsg(g), "nvmlDeviceSetGpuLockedClocks"));
    uint64_t e0 = 0, e1 = 0;
    assert_int_equal(prs_gpu_energy_mj(g, &e0), 0);
    double t0 = mono_s();
    do { /* the counter moves: a few hundred watts, a millijoule every few microseconds */
        struct timespec ts = {0, 1000000}; /* poll interval */
        nanosleep(&ts, NULL);
        assert_int_equal(prs_gpu_energy_mj(g, &e1), 0);
    } while (e1 == e0 && mono_s() - t0 < 30);
    assert_true(e1 > e0);
    unsigned mw = 0;
    assert_int_equal(prs_gpu_power_mw(g, &mw), 0);
    assert_true(mw > 100000 && mw < 1000000);
    assert_int_equal(prs_gpu_reset_clock(g), 0);
    assert_int_equal(read_state(st, buf, sizeof buf), 0);
    assert_int_equal(strncmp(buf, "default", 7), 0);

    setenv("PRS_FAKE_NVML_DENY", "1", 1);
    assert_int_equal(prs_gpu_set_clock(g, 1200), PRS_EGPU);
    assert_non_null(strstr(prs_gpu_errmsg(g), "Insufficient Permissions"));
    unsetenv("PRS_FAKE_NVML_DENY");
    prs_gpu_close(g);
    unlink(st);
}

static void test_clockctl_inline_skips(void **state)
{
    prs_gpu *g;
    prs_error e;
    assert_int_equal(prs_gpu_open_sim(NULL, &g, &e), 0);
    prs_clockctl *c;
    assert_int_equal(prs_clockctl_new(g, PRS_CLOCKCTL_INLINE, &c, &e), 0);
    assert_int_equal(prs_clockctl_pid(c), 0);
    for (int i = 0; i < 10; i++)
        assert_int_equal(prs_clockctl_set(c, 1200), 0);
    assert_int_equal(prs_clockctl_set(c, 1110), 0);
    assert_int_equal(prs_clockctl_set(c, 1110), 0);
    assert_int_equal(prs_gpu_sim_clock_changes(g), 2);
    assert_int_equal(prs_clockctl_requested(c), 1110);
    prs_clockctl_free(c);
    int f = -1;
    prs_gpu_sim_clock(g, &f);
    assert_int_equal(f, 0); /* reset on free */
    prs_gpu_close(g);
}

/* The sim GPU has no perseus-gpud: only the inline controller drives it. */
static void test_clockctl_sim_inline_only(void **state)
{
    prs_gpu *g;
    prs_error e;
    assert_int_equal(prs_gpu_open_sim(NULL, &g, &e), 0);
    prs_clockctl *c = (prs_clockctl *)1;
    assert_int_equal(prs_clockctl_new(g, PRS_CLOCKCTL_PROCESS, &c, &e), PRS_EINVAL);
    assert_null(c);
    assert_non_null(strstr(e.msg, "INLINE"));
    prs_gpu_close(g);
}

/* A process controller (a private perseus-gpud) on the fake NVML: its clock changes reach the
 * device, a burst is coalesced, a refused clock is reported by sync and counted, the confirmed
 * clock follows the answers, and free resets the clock and reaps the helper. */
static void test_clockctl_process_nvml(void **state)
{
    if (!fake_lib()) prs_skip_input("no fake NVML library (PRS_FAKE_NVML)");
    char st[512], buf[256];
    state_path(st, sizeof st, "process");
    setenv("PRS_FAKE_NVML_STATE", st, 1);
    prs_gpu *g;
    prs_error e;
    assert_int_equal(prs_gpu_open_nvml(0, fake_lib(), &g, &e), 0);
    prs_clockctl *c;
    assert_int_equal(prs_clockctl_new(g, PRS_CLOCKCTL_PROCESS, &c, &e), 0);
    assert_true(prs_clockctl_pid(c) > 0);
    assert_int_equal(prs_clockctl_confirmed(c), 0);
    assert_int_equal(prs_clockctl_set(c, 1200), 0);
    assert_int_equal(prs_clockctl_sync(c, 5), 0);
    assert_int_equal(prs_clockctl_confirmed(c), 1200);
    assert_int_equal(wait_state(st, "locked 1200 1200", buf, sizeof buf), 0);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(prs_clockctl_set(c, 1200 - 15 * (i % 20)), 0);
    assert_int_equal(prs_clockctl_set(c, 990), 0);
    assert_int_equal(prs_clockctl_sync(c, 5), 0);
    assert_int_equal(prs_clockctl_confirmed(c), 990);
    assert_int_equal(wait_state(st, "locked 990 990", buf, sizeof buf), 0);
    assert_int_equal(prs_clockctl_failures(c), 0);
    /* A clock the GPU refuses is reported by sync, counted, and the clock stays. */
    assert_int_equal(prs_clockctl_set(c, 991), 0);
    assert_int_equal(prs_clockctl_sync(c, 5), PRS_EGPU);
    assert_non_null(strstr(prs_gpu_errmsg(g), "refused"));
    assert_int_equal(prs_clockctl_failures(c), 1);
    assert_int_equal(prs_clockctl_confirmed(c), 990);
    pid_t pid = prs_clockctl_pid(c);
    prs_clockctl_free(c);
    assert_int_equal(read_state(st, buf, sizeof buf), 0);
    assert_int_equal(strncmp(buf, "default", 7), 0);
    assert_int_equal(kill(pid, 0), -1); /* reaped */
    prs_gpu_close(g);
    unsetenv("PRS_FAKE_NVML_STATE");
    unlink(st);
}

/* The training process (a child here) opens the nvml backend on the fake library, starts a
 * process controller, locks a clock, reports it, and is SIGKILLed: the controller must notice and
 * reset the clocks. With exit_normally it returns from main without freeing anything instead
 * (the controller sees the pipe close at exit). */
static void run_training_child(const char *st, int ready_fd, int go_fd, int how)
{
    prs_gpu *g;
    prs_error e;
    if (prs_gpu_open_nvml(0, fake_lib(), &g, &e)) _exit(10);
    prs_clockctl *c;
    if (prs_clockctl_new(g, PRS_CLOCKCTL_PROCESS, &c, &e)) _exit(11);
    if (prs_clockctl_set(c, 1110) || prs_clockctl_sync(c, 5)) _exit(12);
    int pid = prs_clockctl_pid(c);
    if (write(ready_fd, &pid, sizeof pid) != sizeof pid) _exit(13);
    char go;
    if (read(go_fd, &go, 1) != 1) _exit(14); /* the test saw the clock locked */
    if (how == 0) pause();                   /* wait for SIGKILL */
    if (how == 1) _exit(0);                  /* exit without cleanup */
    abort();                                 /* how == 2: a crash */
}

static void watchdog_case(int how)
{
    if (!fake_lib()) prs_skip_input("no fake NVML library (PRS_FAKE_NVML)");
    char st[512], buf[256];
    state_path(st, sizeof st, how == 0 ? "kill" : how == 1 ? "exit" : "abort");
    setenv("PRS_FAKE_NVML_STATE", st, 1);
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
    int fds[2], go[2];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(pipe(go), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        close(fds[0]);
        close(go[1]);
        signal(SIGABRT, SIG_DFL);
        run_training_child(st, fds[1], go[0], how);
    }
    close(fds[1]);
    close(go[0]);
    int ctl_pid = 0;
    assert_int_equal(read(fds[0], &ctl_pid, sizeof ctl_pid), (ssize_t)sizeof ctl_pid);
    close(fds[0]);
    assert_int_equal(read_state(st, buf, sizeof buf), 0);
    assert_int_equal(strncmp(buf, "locked 1110 1110", 16), 0);
    assert_int_equal(write(go[1], "g", 1), 1);
    close(go[1]);
    if (how == 0) kill(child, SIGKILL);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    if (how == 0) assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    /* The controller (now orphaned) resets the clocks and exits. */
    assert_int_equal(wait_state(st, "default", buf, sizeof buf), 0);
    assert_non_null(strstr(buf, "resets=1"));
    /* We are the subreaper: the orphaned controller is ours to reap once it exits. */
    double t0 = mono_s();
    pid_t reaped = 0;
    while (reaped != ctl_pid && mono_s() - t0 < 30) {
        reaped = waitpid(ctl_pid, &status, WNOHANG);
        struct timespec ts = {0, 5000000}; /* poll interval */
        nanosleep(&ts, NULL);
    }
    assert_int_equal(reaped, ctl_pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    unlink(st);
}

static void test_watchdog_sigkill(void **state)
{
    watchdog_case(0);
}

static void test_watchdog_exit(void **state)
{
    watchdog_case(1);
}

static void test_watchdog_abort(void **state)
{
    watchdog_case(2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sim_backend),
        cmocka_unit_test(test_nvml_missing),
        cmocka_unit_test(test_nvml_fake),
        cmocka_unit_test(test_clockctl_inline_skips),
        cmocka_unit_test(test_clockctl_sim_inline_only),
        cmocka_unit_test(test_clockctl_process_nvml),
        cmocka_unit_test(test_watchdog_sigkill),
        cmocka_unit_test(test_watchdog_exit),
        cmocka_unit_test(test_watchdog_abort),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
