/* perseus-gpud end to end: the real binary ($PRS_BIN_DIR/perseus-gpud) on a temporary socket and
 * state directory, over the fake NVML ($PRS_FAKE_NVML, two devices shared through files), run
 * without PRS_FAKE_NVML_DENY (the daemon is the privileged process). This process reads the
 * clocks in effect through the same fake devices (gpud_fixture.h). Checks the protocol, every way
 * a lease ends (client SIGKILL, process-group SIGKILL, a leaseholder whose forked child keeps the
 * socket, daemon SIGKILL and restart, SIGTERM), busy and denied leases, malformed input, a GPU
 * that ignores the lock. test_gpud_faults.c checks the faults of GPUs and of the state. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpud_fixture.h"

static void test_protocol(void **state)
{
    NEED_DAEMON();
    char buf[4200], req[64];
    int fd = try_connect();
    assert_true(fd >= 0);
    EXPECT_PREFIX(cmd(fd, "HELLO 1", buf, sizeof buf), "OK perseus-gpud 1 ");
    EXPECT_PREFIX(cmd(fd, "LIST", buf, sizeof buf), "GPU 0 GPU-");
    assert_non_null(strstr(buf, " 00000000:10:00.0 1410 0 "));
    unsigned long long mj = 0, mw = 0; /* the fake draws the A100 preset's 475 W */
    assert_int_equal(sscanf(buf, "GPU 0 %*s %*s %*s %*s %llu %llu", &mj, &mw), 2);
    assert_true(mj > 0 && mw == 475000);
    EXPECT_PREFIX((read_line(fd, buf, sizeof buf), buf), "GPU 1 GPU-");
    assert_non_null(strstr(buf, " 00000000:11:00.0 "));
    EXPECT_PREFIX((read_line(fd, buf, sizeof buf), buf), "OK 2");
    EXPECT_PREFIX(cmd(fd, "CLOCKS", buf, sizeof buf), "ERR state no lease");
    EXPECT_PREFIX(cmd(fd, "LEASE 0", buf, sizeof buf), "OK GPU-");
    assert_non_null(strstr(buf, " 81 1410"));
    EXPECT_PREFIX(cmd(fd, "CLOCKS", buf, sizeof buf), "OK 1410 1395 ");
    snprintf(req, sizeof req, "SET 1 %d", T.low);
    char want[64];
    snprintf(want, sizeof want, "ACK 1 ok %d %d ", T.low, T.low);
    EXPECT_PREFIX(cmd(fd, req, buf, sizeof buf), want);
    long long apply_ns = atoll(strrchr(buf, ' ') + 1);
    print_message("SET applied in %.3f ms (daemon-side, request to NVML return)\n", apply_ns / 1e6);
    assert_int_equal(gpu_clock(0), T.low);
    snprintf(want, sizeof want, "ACK 2 same %d - ", T.low);
    snprintf(req, sizeof req, "SET 2 %d", T.low);
    EXPECT_PREFIX(cmd(fd, req, buf, sizeof buf), want);
    EXPECT_PREFIX(cmd(fd, "READ", buf, sizeof buf), "OK ");
    snprintf(want, sizeof want, " %d %d", T.low, T.low);
    assert_non_null(strstr(buf, want));
    unsigned long long mj2 = 0;
    assert_int_equal(sscanf(buf, "OK %llu %llu", &mj2, &mw), 2);
    assert_true(mj2 >= mj && mw > 0);
    EXPECT_PREFIX(cmd(fd, "RELEASE", buf, sizeof buf), "OK");
    assert_int_equal(gpu_clock(0), 1410);
    EXPECT_PREFIX(cmd(fd, "LEASE 1", buf, sizeof buf), "OK GPU-");
    close(fd);
    assert_true(wait_clock(1, 1410, mono_s()) >= 0);
}

/* A child that leases gpu 0 at T.low, says so on the pipe, and waits to be killed. With group,
 * it first makes its own process group, and the lease is held by a grandchild in it. */
static pid_t leaseholder(int group)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        if (group) setpgid(0, 0);
        if (group && fork() != 0) {
            close(p[1]);
            for (;;) /* the group leader waits too */
                pause();
        }
        child_lease(0, p[1]);
        for (;;)
            pause();
    }
    close(p[1]);
    parent_wait_lease(p[0]);
    close(p[0]);
    return pid;
}

static void test_client_sigkill(void **state)
{
    NEED_DAEMON();
    pid_t pid = leaseholder(0);
    assert_int_equal(gpu_clock(0), T.low);
    double t0 = mono_s();
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    double dt = wait_clock(0, 1410, t0);
    assert_true(dt >= 0);
    print_message("reset after the leaseholder was SIGKILLed: %.2f ms\n", dt * 1e3);
}

static void test_group_sigkill(void **state)
{
    NEED_DAEMON();
    pid_t pid = leaseholder(1);
    assert_int_equal(gpu_clock(0), T.low);
    double t0 = mono_s();
    kill(-pid, SIGKILL);
    waitpid(pid, NULL, 0);
    double dt = wait_clock(0, 1410, t0);
    assert_true(dt >= 0);
    print_message("reset after the trainer's process group was SIGKILLed: %.2f ms\n", dt * 1e3);
}

static void test_forked_child_keeps_socket(void **state)
{
    NEED_DAEMON();
    int p[2], go[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(pipe(go), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(go[1]);
        char err[512];
        if (raw_lease_and_set(0, T.low, err, sizeof err) < 0) _exit(1);
        pid_t worker = fork(); /* like a data-loader worker: inherits the socket */
        if (worker == 0) {
            for (;;)
                pause();
        }
        char msg[32];
        int n = snprintf(msg, sizeof msg, "%ld\n", (long)worker);
        if (write(p[1], msg, (size_t)n) != n) _exit(1);
        char ch;
        if (read(go[0], &ch, 1) != 1) _exit(1);
        _exit(0); /* the leaseholder dies; the worker still holds the socket */
    }
    close(p[1]);
    close(go[0]);
    char msg[32] = "";
    assert_true(read(p[0], msg, sizeof msg - 1) > 0);
    close(p[0]);
    pid_t worker = (pid_t)atol(msg);
    if (worker <= 1) {
        waitpid(pid, NULL, 0);
        fail_msg("the leaseholder child failed before forking its worker");
    }
    assert_int_equal(gpu_clock(0), T.low);
    double t0 = mono_s();
    assert_int_equal(write(go[1], "x", 1), 1);
    close(go[1]);
    waitpid(pid, NULL, 0);
    double dt = wait_clock(0, 1410, t0);
    kill(worker, SIGKILL);
    assert_true(dt >= 0);
    print_message("reset after the leaseholder exited, its forked worker still holding the "
                  "socket: %.2f ms\n",
                  dt * 1e3);
}

static void test_daemon_sigkill_restart(void **state)
{
    NEED_DAEMON();
    int fd = lease_and_set(1, T.low);
    assert_int_equal(stop_daemon(SIGKILL), 128 + SIGKILL);
    assert_int_equal(gpu_clock(1), T.low); /* nobody reset it */
    close(fd);
    double t0 = mono_s();
    T.daemon = start_daemon(NULL);
    double dt = wait_clock(1, 1410, t0);
    assert_true(dt >= 0);
    print_message("daemon SIGKILLed holding a lease: restarted and reset in %.2f ms\n", dt * 1e3);
    char path[400], buf[256] = "x";
    snprintf(path, sizeof path, "%s/leases", T.state);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_null(fgets(buf, sizeof buf, f)); /* empty again */
    fclose(f);
}

static void test_sigterm(void **state)
{
    NEED_DAEMON();
    int fd = lease_and_set(0, T.low);
    double t0 = mono_s();
    assert_int_equal(stop_daemon(SIGTERM), 0);
    print_message("SIGTERM: daemon reset and exited in %.2f ms\n", (mono_s() - t0) * 1e3);
    assert_int_equal(gpu_clock(0), 1410);
    struct stat st;
    assert_int_not_equal(stat(T.sock, &st), 0); /* socket removed */
    close(fd);
    T.daemon = start_daemon(NULL);
}

static void test_busy(void **state)
{
    NEED_DAEMON();
    char buf[512];
    int a = lease_and_set(0, T.low);
    int b = try_connect();
    EXPECT_PREFIX(cmd(b, "HELLO 1", buf, sizeof buf), "OK ");
    EXPECT_PREFIX(cmd(b, "LEASE 0", buf, sizeof buf), "ERR busy GPU-");
    assert_non_null(strstr(buf, "is leased by pid"));
    close(a);
    assert_true(wait_clock(0, 1410, mono_s()) >= 0);
    EXPECT_PREFIX(cmd(b, "LEASE 0", buf, sizeof buf), "OK GPU-");
    close(b);
}

/* In a child running as uid/gid 65534: HELLO and LEASE 0; the reply line into buf. */
static void lease_as_nobody(char *buf, size_t n)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        char reply[1024] = "(setuid failed)";
        if (setgroups(0, NULL) == 0 && setgid(65534) == 0 && setuid(65534) == 0) {
            int fd = try_connect();
            if (fd < 0)
                snprintf(reply, sizeof reply, "(connect failed: %s)", strerror(errno));
            else if (raw_cmd(fd, "HELLO 1", reply, sizeof reply) == 0 &&
                     strncmp(reply, "OK", 2) == 0)
                raw_cmd(fd, "LEASE 0", reply, sizeof reply);
        }
        if (write(p[1], reply, strlen(reply)) < 0) _exit(1);
        _exit(0);
    }
    close(p[1]);
    ssize_t got = read(p[0], buf, n - 1);
    buf[got > 0 ? got : 0] = '\0';
    close(p[0]);
    waitpid(pid, NULL, 0);
}

static void test_denied(void **state)
{
    NEED_DAEMON();
    if (geteuid() != 0) {
        prs_skip_case("needs root to run a client as uid 65534");
        return;
    }
    char buf[1024];
    lease_as_nobody(buf, sizeof buf);
    EXPECT_PREFIX(buf, "ERR denied uid 65534 may not lease GPU-");
    assert_non_null(strstr(buf, T.conf));
    write_config("allow uid 65534 all\n");
    kill(T.daemon, SIGHUP);
    /* Until the daemon has read the new configuration. */
    for (double t0 = mono_s(); mono_s() - t0 < 30; nap_ms(10)) {
        lease_as_nobody(buf, sizeof buf);
        if (strncmp(buf, "OK GPU-", 7) == 0) break;
    }
    EXPECT_PREFIX(buf, "OK GPU-");
    write_config("# e2e\nallow uid 12345 all\n");
    kill(T.daemon, SIGHUP);
    for (double t0 = mono_s(); mono_s() - t0 < 30; nap_ms(10)) {
        lease_as_nobody(buf, sizeof buf);
        if (strncmp(buf, "ERR denied", 10) == 0) break;
    }
    EXPECT_PREFIX(buf, "ERR denied uid 65534 may not lease GPU-");
}

/* Send raw bytes and expect the daemon to close the connection after a last reply starting with
 * want. */
static void expect_dropped(const char *bytes, size_t n, const char *want)
{
    char buf[512], last[512] = "(none)";
    int fd = try_connect();
    assert_true(fd >= 0);
    assert_int_equal(send(fd, bytes, n, MSG_NOSIGNAL), (ssize_t)n);
    int lines = 0;
    while (lines < 10 && read_line(fd, buf, sizeof buf) == 0) {
        snprintf(last, sizeof last, "%s", buf);
        lines++;
    }
    assert_true(lines < 10); /* closed by the daemon */
    EXPECT_PREFIX(last, want);
    close(fd);
}

static void test_malformed(void **state)
{
    NEED_DAEMON();
    char buf[512];
    int ok = try_connect(); /* a well-behaved client, served throughout */
    EXPECT_PREFIX(cmd(ok, "HELLO 1", buf, sizeof buf), "OK ");
    expect_dropped("LIST\n", 5, "ERR proto HELLO 1 must be the first request");
    expect_dropped("HELLO 1\nGARBAGE here\n", 21, "ERR proto unknown request 'GARBAGE'");
    expect_dropped("HELLO 7\n", 8, "ERR version");
    char big[600];
    memset(big, 'x', sizeof big);
    expect_dropped(big, sizeof big, "ERR proto request line longer than 255 bytes");
    expect_dropped("HELLO 1\x01\n", 9, "ERR proto non-printable");
    /* truncated: a leaseholder whose last request never ends, then EOF */
    int fd = lease_and_set(0, T.low);
    assert_int_equal(send(fd, "SET 2 12", 8, MSG_NOSIGNAL), 8);
    close(fd);
    assert_true(wait_clock(0, 1410, mono_s()) >= 0);
    EXPECT_PREFIX(cmd(ok, "LIST", buf, sizeof buf), "GPU 0 ");
    read_line(ok, buf, sizeof buf);
    EXPECT_PREFIX((read_line(ok, buf, sizeof buf), buf), "OK 2");
    close(ok);
}

static void test_ignore_lock(void **state)
{
    NEED_DAEMON();
    char buf[512], req[64];
    assert_int_equal(stop_daemon(SIGTERM), 0);
    T.daemon = start_daemon("PRS_FAKE_NVML_IGNORE_LOCK=1");
    int fd = try_connect();
    EXPECT_PREFIX(cmd(fd, "HELLO 1", buf, sizeof buf), "OK ");
    EXPECT_PREFIX(cmd(fd, "LEASE 0", buf, sizeof buf), "OK ");
    snprintf(req, sizeof req, "SET 5 %d", T.low);
    EXPECT_PREFIX(cmd(fd, req, buf, sizeof buf), "ACK 5 mismatch 0 1410 ");
    print_message("a GPU that ignores the lock: '%s'\n", buf);
    EXPECT_PREFIX(cmd(fd, "READ", buf, sizeof buf), "OK ");
    close(fd);
    assert_int_equal(stop_daemon(SIGTERM), 0);
    T.daemon = start_daemon(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protocol),
        cmocka_unit_test(test_client_sigkill),
        cmocka_unit_test(test_group_sigkill),
        cmocka_unit_test(test_forked_child_keeps_socket),
        cmocka_unit_test(test_daemon_sigkill_restart),
        cmocka_unit_test(test_sigterm),
        cmocka_unit_test(test_busy),
        cmocka_unit_test(test_denied),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_ignore_lock),
    };
    return prs_test_result(cmocka_run_group_tests(tests, setup, teardown));
}
