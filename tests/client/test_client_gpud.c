/* The client side of perseus-gpud, as an unprivileged trainer sees it: the fake NVML refuses
 * clock changes in this process (PRS_FAKE_NVML_DENY=1, as for a non-root user) and accepts them
 * in the daemon, which runs without it (tests/client/gpud_harness.h). Checks that clocks change
 * only through the daemon, on the GPU selected (by PCI bus id too), that a start whose clock change
 * is refused fails with what to do, that a gpud spec needs the daemon, that a second trainer is
 * refused the GPU, and that a daemon killed under a client leaves the client alive (no SIGPIPE),
 * counting the failures, and its restart resets the GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpud_harness.h"
#include "perseus/client.h"
#include "perseus/gpu.h"
#include "skips.h"

static gpud_harness H;
static const char *g_lib;

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int setup(void **state)
{
    g_lib = getenv("PRS_FAKE_NVML");
    if (!g_lib || gpud_harness_init(&H, NULL)) return 0; /* the cases skip */
    setenv("PRS_FAKE_GPU_DIR", H.dir, 1); /* devices shared with the daemon through files */
    setenv("PRS_NVML_LIBRARY", g_lib, 1);
    setenv("PRS_FAKE_NVML_DEVICES", "2", 1);
    setenv("PRS_FAKE_GPU_COUNT", "2", 1);
    unsetenv("PRS_FAKE_NVML_DENY");
    if (gpud_harness_start(&H, g_lib)) return -1;
    setenv("PRS_FAKE_NVML_DENY", "1", 1); /* from here on, this process is unprivileged */
    setenv("PRS_GPUD_SOCKET", H.sock, 1);
    return 0;
}

static int teardown(void **state)
{
    if (H.dir[0]) gpud_harness_fini(&H);
    return 0;
}

static void need_daemon(void)
{
    if (!g_lib || !H.dir[0]) prs_skip_input("no fake NVML or no perseus-gpud binary");
}

/* The SM clock in effect on device i, read through our own handle. */
static int clock_now(int i)
{
    prs_gpu *g;
    prs_error e;
    assert_int_equal(prs_gpu_open_nvml((unsigned)i, g_lib, &g, &e), 0);
    int mhz = -1;
    assert_int_equal(prs_gpu_sm_clock_now(g, &mhz), 0);
    prs_gpu_close(g);
    return mhz;
}

static void test_clocks_only_through_daemon(void **state)
{
    need_daemon();
    prs_gpu *g;
    prs_error e;
    assert_int_equal(prs_gpu_open_nvml(0, g_lib, &g, &e), 0);
    assert_int_equal(prs_gpu_set_clock(g, 1200), PRS_EGPU); /* we may not */
    prs_clockctl *c;
    assert_int_equal(prs_clockctl_open(g, PRS_CLOCKCTL_DAEMON, H.sock, &c, &e), 0);
    assert_int_equal(prs_clockctl_set(c, 1200), 0);
    assert_int_equal(prs_clockctl_sync(c, 5), 0);
    assert_int_equal(prs_clockctl_confirmed(c), 1200);
    assert_int_equal(clock_now(0), 1200);
    assert_int_equal(clock_now(1), 1410); /* the other GPU is untouched */
    prs_clockctl_free(c);
    assert_int_equal(clock_now(0), 1410); /* reset when free returns */
    prs_gpu_close(g);
}

/* A GPU selected by PCI bus id (device 1 at 00000000:11:00.0) is the one whose clock changes,
 * through the node daemon and through a private one (which may change clocks: the user's rights
 * are the daemon's there); its UUID names it, not index 0. */
static void test_pci_selected_gpu(void **state)
{
    need_daemon();
    for (int mode = 0; mode < 2; mode++) {
        prs_gpu *g;
        prs_clockctl *c;
        prs_error e;
        assert_int_equal(prs_gpu_open("nvml:pci=0000:11:00.0", &g, &e), 0);
        if (mode) unsetenv("PRS_FAKE_NVML_DENY"); /* the private daemon inherits it */
        int rc =
            prs_clockctl_open(g, mode ? PRS_CLOCKCTL_PROCESS : PRS_CLOCKCTL_DAEMON, H.sock, &c, &e);
        setenv("PRS_FAKE_NVML_DENY", "1", 1);
        if (rc) fail_msg("%s: %s", mode ? "PROCESS" : "DAEMON", e.msg);
        assert_int_equal(prs_clockctl_set(c, 1200), 0);
        assert_int_equal(prs_clockctl_sync(c, 5), 0);
        assert_int_equal(prs_clockctl_confirmed(c), 1200);
        assert_int_equal(clock_now(1), 1200);
        assert_int_equal(clock_now(0), 1410);
        prs_clockctl_free(c);
        assert_int_equal(clock_now(1), 1410);
        prs_gpu_close(g);
    }
}

static void client_opts(prs_client_opts *o, const char *spec)
{
    prs_client_opts_init(o);
    o->server_url = "http://127.0.0.1:9"; /* nobody: registration waits in the background */
    o->job_id = "job";
    o->token = "token";
    o->gpu_spec = spec;
}

static void test_client_start_via_daemon(void **state)
{
    need_daemon();
    prs_client_opts o;
    client_opts(&o, "nvml:0");
    prs_client *cl;
    prs_error e;
    assert_int_equal(prs_client_new(&o, &cl, &e), 0);
    prs_client_stats st;
    prs_client_get_stats(cl, &st);
    assert_int_equal(st.clock_failures, 0);
    prs_client_free(cl);
    assert_int_equal(clock_now(0), 1410);
}

/* No daemon: a private one with our privileges, which the GPU refuses: the start fails, loudly. */
static void test_client_start_refused(void **state)
{
    need_daemon();
    setenv("PRS_GPUD_SOCKET", "/nonexistent/gpud.sock", 1);
    prs_client_opts o;
    client_opts(&o, "nvml:0");
    prs_client *cl = NULL;
    prs_error e;
    int rc = prs_client_new(&o, &cl, &e);
    setenv("PRS_GPUD_SOCKET", H.sock, 1);
    printf("refused start: %s\n", e.msg);
    assert_int_equal(rc, PRS_EGPU);
    assert_null(cl);
    assert_non_null(strstr(e.msg, "refused"));
    assert_non_null(strstr(e.msg, "Insufficient Permissions"));
    assert_non_null(strstr(e.msg, "start perseus-gpud"));
}

/* A GPU that accepts locks but ignores them (the fake NVML of a private daemon with
 * PRS_FAKE_NVML_IGNORE_LOCK=1): the start locks a clock below the highest, reads it back, and
 * fails naming the GPU and the clock; the GPU is left at its default clock. */
static void test_client_start_lock_ignored(void **state)
{
    need_daemon();
    setenv("PRS_GPUD_SOCKET", "/nonexistent/gpud.sock", 1);
    unsetenv("PRS_FAKE_NVML_DENY");              /* the private daemon may change clocks ... */
    setenv("PRS_FAKE_NVML_IGNORE_LOCK", "1", 1); /* ... but they never take */
    prs_client_opts o;
    client_opts(&o, "nvml:1");
    prs_client *cl = NULL;
    prs_error e;
    int rc = prs_client_new(&o, &cl, &e);
    unsetenv("PRS_FAKE_NVML_IGNORE_LOCK");
    setenv("PRS_FAKE_NVML_DENY", "1", 1);
    setenv("PRS_GPUD_SOCKET", H.sock, 1);
    printf("lock ignored: %s\n", e.msg);
    assert_int_equal(rc, PRS_EGPU);
    assert_null(cl);
    char uuid[96];
    prs_gpu *g;
    assert_int_equal(prs_gpu_open_nvml(1, g_lib, &g, &e), 0);
    int clocks[2], n = 0;
    assert_int_equal(prs_gpu_clocks(g, clocks, 2, &n), 0);
    assert_int_equal(prs_gpu_uuid(g, uuid, sizeof uuid), 0);
    prs_gpu_close(g);
    char mhz[32];
    snprintf(mhz, sizeof mhz, "at %d MHz", clocks[1]);
    assert_non_null(strstr(e.msg, uuid));
    assert_non_null(strstr(e.msg, mhz));
    assert_non_null(strstr(e.msg, "did not take"));
    assert_int_equal(clock_now(1), 1410);
}

/* Two ranks of a node started by Slurm (SLURM_LOCALID, no LOCAL_RANK): each takes its own GPU.
 * Without any launcher variable both take GPU 0, and the second is refused with a message that
 * says how its GPU was chosen and which variables were looked at. */
static void test_client_local_rank_vars(void **state)
{
    need_daemon();
    unsetenv("LOCAL_RANK");
    unsetenv("SLURM_LOCALID");
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    prs_client_opts o;
    client_opts(&o, "nvml");
    o.cuda_library = "/nonexistent/libcuda.so.1"; /* CUDA_VISIBLE_DEVICES unset: NVML's order */
    prs_client *a = NULL, *b = NULL;
    prs_error e;
    assert_int_equal(prs_client_new(&o, &a, &e), 0);
    assert_int_equal(prs_client_new(&o, &b, &e), PRS_EGPU);
    printf("two ranks on GPU 0: %s\n", e.msg);
    assert_null(b);
    assert_non_null(strstr(e.msg, "refused the lease"));
    assert_non_null(strstr(e.msg, "LOCAL_RANK"));
    assert_non_null(strstr(e.msg, "SLURM_LOCALID"));
    assert_non_null(strstr(e.msg, "OMPI_COMM_WORLD_LOCAL_RANK"));
    setenv("SLURM_LOCALID", "1", 1);
    int rc = prs_client_new(&o, &b, &e);
    unsetenv("SLURM_LOCALID");
    if (rc) fail_msg("SLURM_LOCALID=1: %s", e.msg);
    prs_client_free(b);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
    rc = prs_client_new(&o, &b, &e);
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (rc) fail_msg("OMPI_COMM_WORLD_LOCAL_RANK=1: %s", e.msg);
    prs_client_free(b);
    prs_client_free(a);
}

static void test_gpud_spec_needs_daemon(void **state)
{
    need_daemon();
    prs_client_opts o;
    client_opts(&o, "gpud:0");
    o.gpud_socket = "/nonexistent/gpud.sock";
    prs_client *cl = NULL;
    prs_error e;
    assert_int_equal(prs_client_new(&o, &cl, &e), PRS_EGPU);
    assert_non_null(strstr(e.msg, "cannot reach perseus-gpud"));
    o.gpud_socket = H.sock;
    assert_int_equal(prs_client_new(&o, &cl, &e), 0);
    prs_client_free(cl);
}

static void test_second_trainer_busy(void **state)
{
    need_daemon();
    prs_gpu *g;
    prs_error e;
    assert_int_equal(prs_gpu_open_nvml(1, g_lib, &g, &e), 0);
    prs_clockctl *a, *b = NULL;
    assert_int_equal(prs_clockctl_open(g, PRS_CLOCKCTL_DAEMON, H.sock, &a, &e), 0);
    assert_int_equal(prs_clockctl_open(g, PRS_CLOCKCTL_DAEMON, H.sock, &b, &e), PRS_EGPU);
    assert_null(b);
    printf("second trainer: %s\n", e.msg);
    assert_non_null(strstr(e.msg, "refused the lease"));
    prs_clockctl_free(a);
    assert_int_equal(prs_clockctl_open(g, PRS_CLOCKCTL_DAEMON, H.sock, &b, &e), 0);
    prs_clockctl_free(b);
    prs_gpu_close(g);
}

/* The daemon is SIGKILLed under a client holding a locked clock: the client lives on (no
 * SIGPIPE), its requests fail and are counted, nothing is confirmed; the restarted daemon resets
 * the GPU from its lease file. */
static void test_daemon_killed_under_client(void **state)
{
    need_daemon();
    prs_gpu *g;
    prs_error e;
    assert_int_equal(prs_gpu_open_nvml(0, g_lib, &g, &e), 0);
    prs_clockctl *c;
    assert_int_equal(prs_clockctl_open(g, PRS_CLOCKCTL_DAEMON, H.sock, &c, &e), 0);
    assert_int_equal(prs_clockctl_set(c, 1110), 0);
    assert_int_equal(prs_clockctl_sync(c, 5), 0);
    gpud_harness_stop(&H, SIGKILL);
    assert_int_equal(clock_now(0), 1110); /* nobody reset it yet */
    for (int i = 0; i < 3; i++) {         /* the first send may still succeed into a dead socket */
        prs_clockctl_set(c, i % 2 ? 1200 : 1290);
        gpud_nap_ms(20);
    }
    assert_int_not_equal(prs_clockctl_sync(c, 1), 0);
    assert_true(prs_clockctl_failures(c) >= 1);
    assert_int_equal(prs_clockctl_confirmed(c), -1);
    unsetenv("PRS_FAKE_NVML_DENY");
    double t0 = mono_s();
    assert_int_equal(gpud_harness_start(&H, g_lib), 0);
    setenv("PRS_FAKE_NVML_DENY", "1", 1);
    double t1 = mono_s();
    while (clock_now(0) != 1410 && mono_s() - t1 < 30)
        gpud_nap_ms(1); /* poll interval */
    printf("daemon restarted: GPU reset %.1f ms after the restart began\n", 1e3 * (mono_s() - t0));
    assert_int_equal(clock_now(0), 1410);
    prs_clockctl_free(c);
    prs_gpu_close(g);
}

/* perseus-gpud restarts under a client (SIGKILL, then a new daemon on the same socket): the next
 * requests connect again and take the lease anew, and clocks change through the new daemon; a
 * client does not fail for the rest of its run. */
static void test_reconnect_after_restart(void **state)
{
    need_daemon();
    prs_gpu *g;
    prs_error e;
    assert_int_equal(prs_gpu_open_nvml(0, g_lib, &g, &e), 0);
    prs_clockctl *c;
    assert_int_equal(prs_clockctl_open(g, PRS_CLOCKCTL_DAEMON, H.sock, &c, &e), 0);
    assert_int_equal(prs_clockctl_set(c, 1110), 0);
    assert_int_equal(prs_clockctl_sync(c, 5), 0);
    gpud_harness_stop(&H, SIGKILL);
    int failed = 0; /* requests while the daemon is away fail */
    for (int i = 0; i < 3; i++) {
        int rc = prs_clockctl_set(c, i % 2 ? 1200 : 1290);
        if (!rc) rc = prs_clockctl_sync(c, 1);
        failed += rc != 0;
    }
    assert_true(failed >= 1);
    unsetenv("PRS_FAKE_NVML_DENY");
    assert_int_equal(gpud_harness_start(&H, g_lib), 0);
    setenv("PRS_FAKE_NVML_DENY", "1", 1);
    double t0 = mono_s();
    int rc = -1, tries = 0;
    for (; rc != 0 && mono_s() - t0 < 30; tries++) { /* until a request takes (deadline 30 s) */
        rc = prs_clockctl_set(c, tries % 2 ? 1200 : 1290);
        if (!rc) rc = prs_clockctl_sync(c, 5);
        if (rc) gpud_nap_ms(10); /* poll interval */
    }
    printf("reconnected after %d requests, %.1f ms\n", tries, 1e3 * (mono_s() - t0));
    if (rc) fail_msg("no reconnection: %s", prs_gpu_errmsg(g));
    int want = (tries - 1) % 2 ? 1200 : 1290;
    assert_int_equal(prs_clockctl_confirmed(c), want);
    assert_int_equal(clock_now(0), want);
    assert_int_equal(prs_clockctl_set(c, 1110), 0); /* and the ones after it */
    assert_int_equal(prs_clockctl_sync(c, 5), 0);
    assert_int_equal(clock_now(0), 1110);
    prs_clockctl_free(c);
    assert_int_equal(clock_now(0), 1410); /* the new lease ended: reset */
    prs_gpu_close(g);
}

/* Read from fd until n lines came (or 10 s); returns the lines seen. */
static long read_lines(int fd, long n)
{
    char buf[65536];
    long lines = 0;
    double t0 = mono_s();
    while (lines < n && mono_s() - t0 < 10) {
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r <= 0) break;
        for (ssize_t i = 0; i < r; i++)
            lines += buf[i] == '\n';
    }
    return lines;
}

/* A client that sends a long burst of requests without reading the answers for a while is
 * slowed down (the daemon stops reading it), not dropped: every request is answered. */
static void test_burst_without_reading(void **state)
{
    need_daemon();
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, H.sock, strlen(H.sock) + 1);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    const char *hello = "HELLO 1\nLEASE 1\n";
    assert_int_equal(write(fd, hello, strlen(hello)), (ssize_t)strlen(hello));
    assert_int_equal(read_lines(fd, 2), 2);
    enum { N = 60000 };
    pid_t w = fork(); /* the writer: blocks when the daemon stops reading */
    assert_true(w >= 0);
    if (w == 0) {
        char line[48];
        for (long i = 1; i <= N; i++) {
            int n = snprintf(line, sizeof line, "SET %ld %d\n", i, i % 2 ? 1200 : 1290);
            if (write(fd, line, (size_t)n) != n) _exit(1);
        }
        _exit(0);
    }
    gpud_nap_ms(300); /* nobody reads the answers meanwhile */
    long got = read_lines(fd, N);
    int st = 0;
    waitpid(w, &st, 0);
    printf("burst of %d requests, answers read late: %ld answered\n", N, got);
    assert_int_equal(got, N);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(fd);
    gpud_nap_ms(50);
    assert_int_equal(clock_now(1), 1410); /* released */
}

int main(void)
{
    signal(SIGPIPE, SIG_DFL); /* a send into a dead socket must not kill us */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clocks_only_through_daemon),
        cmocka_unit_test(test_pci_selected_gpu),
        cmocka_unit_test(test_client_start_via_daemon),
        cmocka_unit_test(test_client_start_refused),
        cmocka_unit_test(test_client_start_lock_ignored),
        cmocka_unit_test(test_client_local_rank_vars),
        cmocka_unit_test(test_gpud_spec_needs_daemon),
        cmocka_unit_test(test_second_trainer_busy),
        cmocka_unit_test(test_burst_without_reading),
        cmocka_unit_test(test_daemon_killed_under_client),
        cmocka_unit_test(test_reconnect_after_restart),
    };
    return prs_test_result(cmocka_run_group_tests(tests, setup, teardown));
}
