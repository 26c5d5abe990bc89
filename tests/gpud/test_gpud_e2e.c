/* perseus-gpud end to end: the real binary ($PRS_BIN_DIR/perseus-gpud) on a temporary socket and
 * state directory, over the fake NVML ($PRS_FAKE_NVML, two devices shared through files), run
 * without PRS_FAKE_NVML_DENY (the daemon is the privileged process). This process reads the
 * clocks in effect through the same fake devices. Checks the protocol, every way a lease ends
 * (client SIGKILL, process-group SIGKILL, a leaseholder whose forked child keeps the socket,
 * daemon SIGKILL and restart, SIGTERM), busy and denied leases, malformed input, a GPU that
 * ignores the lock, clock requests beside LISTs when energy reads are slow and beside another
 * GPU's clock change held in the driver; resets that
 * fail (SM and memory clocks: reported, remembered across restarts, tried again), a lease file
 * that cannot be written, GPUs without memory locks, a GPU in MIG mode beside a served one;
 * prints the measured times to reset. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "skips.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <grp.h>
#include <time.h>
#include <unistd.h>

#include "perseus/gpu.h"

static struct {
    char dir[256], sock[300], state[300], conf[300], log[300], bin[512];
    const char *lib;
    pid_t daemon;
    prs_gpu *gpu[2];
    int low; /* a supported clock below f_max */
} T;

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static int gpu_clock(int i)
{
    int f = -1;
    assert_int_equal(prs_gpu_sm_clock_now(T.gpu[i], &f), 0);
    return f;
}

/* Seconds until GPU i runs at mhz (at most 30 s), or -1. */
static double wait_clock(int i, int mhz, double t0)
{
    while (mono_s() - t0 < 30) {
        if (gpu_clock(i) == mhz) return mono_s() - t0;
        nap_ms(1); /* poll interval */
    }
    return -1;
}

static int try_connect(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(T.sock) >= sizeof sa.sun_path) fail_msg("socket path too long: %s", T.sock);
    memcpy(sa.sun_path, T.sock, strlen(T.sock) + 1);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) return fd;
    if (fd >= 0) close(fd);
    return -1;
}

static void write_config(const char *text)
{
    FILE *f = fopen(T.conf, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Start the daemon (extra: an environment assignment for it, or NULL); wait for its socket. */
static pid_t start_daemon(const char *extra)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(T.log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) dup2(fd, 2);
        if (extra) putenv((char *)extra);
        execl(T.bin, T.bin, "--socket", T.sock, "--state-dir", T.state, "--config", T.conf,
              "--nvml-library", T.lib, "--log-level", "debug", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 3000; i++) { /* 30 s */
        int fd = try_connect();
        if (fd >= 0) {
            close(fd);
            return pid;
        }
        nap_ms(10); /* poll interval */
    }
    fail_msg("perseus-gpud did not start (log: %s)", T.log);
    return -1;
}

/* Signal the daemon and wait for it; its exit status (128 + signal when killed). */
static int stop_daemon(int sig)
{
    if (T.daemon <= 0) return -1; /* kill(0, sig) would signal this process group */
    kill(T.daemon, sig);
    int st = 0;
    waitpid(T.daemon, &st, 0);
    T.daemon = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* One reply line into buf (without '\n'); -1 on EOF or after 5 s. */
static int read_line(int fd, char *buf, size_t n)
{
    size_t len = 0;
    while (len + 1 < n) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 5000) <= 0) return -1;
        char ch;
        if (read(fd, &ch, 1) != 1) return -1;
        if (ch == '\n') break;
        buf[len++] = ch;
    }
    buf[len] = '\0';
    return 0;
}

/* Send req (a line without '\n') and read one reply line into buf; -1 when either fails. No
 * cmocka calls: safe in forked children (a failed assertion there would run the rest of the
 * suite in the child). */
static int raw_cmd(int fd, const char *req, char *buf, size_t n)
{
    char line[512];
    int len = snprintf(line, sizeof line, "%s\n", req);
    if (send(fd, line, (size_t)len, MSG_NOSIGNAL) != len || read_line(fd, buf, n) != 0) {
        snprintf(buf, n, "(no reply to %s)", req);
        return -1;
    }
    return 0;
}

static const char *cmd(int fd, const char *req, char *buf, size_t n)
{
    raw_cmd(fd, req, buf, n);
    return buf;
}

#define EXPECT_PREFIX(got, want)                                                                   \
    do {                                                                                           \
        const char *g_ = (got);                                                                    \
        if (strncmp(g_, want, strlen(want)) != 0)                                                  \
            fail_msg("got '%s', expected '%s...'", g_, want);                                      \
    } while (0)

/* Connect, HELLO, LEASE gpu, SET to mhz: the connection, or -1 with the reply at fault in err.
 * Child-safe. */
static int raw_lease_and_set(int gpu, int mhz, char *err, size_t n)
{
    char req[64], want[64];
    int fd = try_connect();
    if (fd < 0) {
        snprintf(err, n, "cannot connect to %s", T.sock);
        return -1;
    }
    snprintf(want, sizeof want, "ACK 1 ok %d %d ", mhz, mhz);
    int ok = raw_cmd(fd, "HELLO 1", err, n) == 0 && strncmp(err, "OK perseus-gpud 1 ", 18) == 0;
    snprintf(req, sizeof req, "LEASE %d", gpu);
    ok = ok && raw_cmd(fd, req, err, n) == 0 && strncmp(err, "OK GPU-", 7) == 0;
    snprintf(req, sizeof req, "SET 1 %d", mhz);
    ok = ok && raw_cmd(fd, req, err, n) == 0 && strncmp(err, want, strlen(want)) == 0;
    if (ok) return fd;
    close(fd);
    return -1;
}

static int lease_and_set(int gpu, int mhz)
{
    char err[512];
    int fd = raw_lease_and_set(gpu, mhz, err, sizeof err);
    if (fd < 0) fail_msg("lease of GPU %d at %d MHz failed: %s", gpu, mhz, err);
    return fd;
}

/* In a child: tell the parent on fd that the lease is set ("r"), or why not; exit on failure. */
static void child_lease(int gpu, int fd)
{
    char msg[600] = "r";
    if (raw_lease_and_set(gpu, T.low, msg + 1, sizeof msg - 1) >= 0)
        msg[1] = '\0';
    else
        msg[0] = 'f';
    if (write(fd, msg, strlen(msg)) < 0 || msg[0] != 'r') _exit(1);
}

/* In the parent: the child's report from child_lease. */
static void parent_wait_lease(int fd)
{
    char msg[600] = "";
    ssize_t got = read(fd, msg, sizeof msg - 1);
    msg[got > 0 ? got : 0] = '\0';
    if (msg[0] != 'r') fail_msg("child could not lease: %s", msg[0] ? msg + 1 : "(no word)");
}

static int setup(void **state)
{
    T.lib = getenv("PRS_FAKE_NVML");
    const char *bin = getenv("PRS_BIN_DIR");
    if (!T.lib || !*T.lib || !bin) return 0;
    snprintf(T.bin, sizeof T.bin, "%s/perseus-gpud", bin);
    const char *tmp = getenv("TMPDIR");
    snprintf(T.dir, sizeof T.dir, "%s/prs-gpud-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(T.dir)) return -1;
    chmod(T.dir, 0755); /* the unprivileged client of test_denied reaches the socket */
    snprintf(T.sock, sizeof T.sock, "%s/run/gpud.sock", T.dir);
    snprintf(T.state, sizeof T.state, "%s/state", T.dir);
    snprintf(T.conf, sizeof T.conf, "%s/gpud.conf", T.dir);
    snprintf(T.log, sizeof T.log, "%s/gpud.log", T.dir);
    setenv("PRS_FAKE_GPU_DIR", T.dir, 1);
    setenv("PRS_FAKE_GPU_COUNT", "2", 1);
    unsetenv("PRS_FAKE_NVML_DENY");
    unsetenv("PRS_FAKE_NVML_IGNORE_LOCK");
    unsetenv("PRS_FAKE_NVML_LOCK_LAG_READS");
    prs_error e;
    for (int i = 0; i < 2; i++)
        if (prs_gpu_open_nvml((unsigned)i, T.lib, &T.gpu[i], &e)) return -1;
    int clocks[8], n;
    if (prs_gpu_clocks(T.gpu[0], clocks, 8, &n) || n < 8) return -1;
    T.low = clocks[5];
    write_config("# e2e\nallow uid 12345 all\n");
    T.daemon = start_daemon(NULL);
    return 0;
}

/* 0 when the daemon's log has no sanitizer report. */
static int log_clean(void)
{
    FILE *f = fopen(T.log, "r");
    if (!f) return 0;
    char line[1024];
    int bad = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "runtime error") || strstr(line, "Sanitizer")) {
            fprintf(stderr, "perseus-gpud log: %s", line);
            bad = 1;
        }
    fclose(f);
    return bad ? -1 : 0;
}

static int teardown(void **state)
{
    int rc = 0;
    if (T.daemon > 0 && stop_daemon(SIGTERM) != 0) rc = -1;
    if (T.dir[0] && log_clean() != 0) rc = -1;
    for (int i = 0; i < 2; i++)
        prs_gpu_close(T.gpu[i]);
    if (T.dir[0] && getenv("PRS_KEEP_TMP") == NULL) {
        char cmdline[400];
        snprintf(cmdline, sizeof cmdline, "rm -rf '%s'", T.dir);
        if (system(cmdline) != 0) return -1;
    }
    return rc;
}

#define NEED_DAEMON()                                                                              \
    do {                                                                                           \
        if (!T.gpu[0]) {                                                                           \
            prs_skip_input("no fake NVML ($PRS_FAKE_NVML) or $PRS_BIN_DIR");                       \
            return;                                                                                \
        }                                                                                          \
    } while (0)

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

/* A read-back right after the lock that still sees the old clock (the fake's first 2 reads
 * after a lock): the daemon reads again before it calls the lock ignored, and keeps it. */
static void test_lock_read_back_lags(void **state)
{
    NEED_DAEMON();
    char buf[512], req[64];
    assert_int_equal(stop_daemon(SIGTERM), 0);
    T.daemon = start_daemon("PRS_FAKE_NVML_LOCK_LAG_READS=2");
    int fd = try_connect();
    EXPECT_PREFIX(cmd(fd, "HELLO 1", buf, sizeof buf), "OK ");
    EXPECT_PREFIX(cmd(fd, "LEASE 0", buf, sizeof buf), "OK ");
    snprintf(req, sizeof req, "SET 6 %d", T.low);
    snprintf(req + 32, 32, "ACK 6 ok %d %d ", T.low, T.low);
    EXPECT_PREFIX(cmd(fd, req, buf, sizeof buf), req + 32);
    print_message("a read-back that lags: '%s'\n", buf);
    close(fd);
    assert_int_equal(stop_daemon(SIGTERM), 0);
    T.daemon = start_daemon(NULL);
}

static void touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    close(fd);
}

/* The lease file's text into buf ("" when missing). */
static const char *lease_file(char *buf, size_t n)
{
    char path[400];
    snprintf(path, sizeof path, "%s/leases", T.state);
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return buf;
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
    return buf;
}

/* LIST on a new connection: GPU gpu's LOCKED_MHZ and LEASE_PID; -2 (both) when not listed. */
static void list_gpu(int gpu, int *locked, long *pid)
{
    char buf[4200];
    int fd = try_connect(), i = -1;
    *locked = -2;
    *pid = -2;
    EXPECT_PREFIX(cmd(fd, "HELLO 1", buf, sizeof buf), "OK ");
    for (cmd(fd, "LIST", buf, sizeof buf); strncmp(buf, "GPU ", 4) == 0;
         read_line(fd, buf, sizeof buf))
        if (sscanf(buf, "GPU %d %*s %*s %*s %d %*s %*s %ld", &i, locked, pid) == 3 && i == gpu)
            break;
    if (i != gpu) *locked = -2, *pid = -2;
    close(fd);
}

/* Restart the daemon with the environment assignment extra (NULL: none), after SIGTERM (its exit
 * status must be want) or SIGKILL (want < 0). */
static void restart(int want, const char *extra)
{
    if (want >= 0)
        assert_int_equal(stop_daemon(SIGTERM), want);
    else
        assert_int_equal(stop_daemon(SIGKILL), 128 + SIGKILL);
    T.daemon = start_daemon(extra);
}

/* A reset that fails: RELEASE says so, the GPU is kept in the lease file as nobody's, LIST shows
 * its locked clock as unknown (-1); a daemon killed and restarted while it still fails keeps it
 * there, one stopped says so in its exit status; once the GPU heals, the next LEASE resets it
 * first, and a restart resets it too. */
static void test_reset_fails(void **state)
{
    NEED_DAEMON();
    static char env[400];
    char fail[330], buf[512], text[512];
    snprintf(fail, sizeof fail, "%s/fail-reset", T.dir);
    snprintf(env, sizeof env, "PRS_FAKE_NVML_FAIL_RESET=%s", fail);
    restart(0, env);
    int fd = lease_and_set(0, T.low), locked;
    long pid;
    touch(fail);
    EXPECT_PREFIX(cmd(fd, "RELEASE", buf, sizeof buf), "ERR reset released, but GPU-");
    print_message("a failed reset: '%s'\n", buf);
    assert_non_null(strstr(buf, "NVML nvmlDeviceResetGpuLockedClocks"));
    assert_int_equal(gpu_clock(0), T.low);
    EXPECT_PREFIX(lease_file(text, sizeof text), "GPU-");
    assert_non_null(strstr(text, " 0 0 0\n"));
    list_gpu(0, &locked, &pid);
    assert_true(locked == -1 && pid == 0);
    restart(-1, env); /* start-up recovery fails too: still listed, still unknown */
    assert_non_null(strstr(lease_file(text, sizeof text), " 0 0 0\n"));
    list_gpu(0, &locked, &pid);
    assert_int_equal(locked, -1);
    restart(1, env); /* the reset at exit fails: exit status 1 */
    assert_non_null(strstr(lease_file(text, sizeof text), " 0 0 0\n"));
    unlink(fail); /* healed: the next LEASE resets it before lending it */
    close(fd);
    fd = try_connect();
    EXPECT_PREFIX(cmd(fd, "HELLO 1", buf, sizeof buf), "OK ");
    EXPECT_PREFIX(cmd(fd, "LEASE 0", buf, sizeof buf), "OK GPU-");
    assert_int_equal(gpu_clock(0), 1410);
    list_gpu(0, &locked, &pid);
    assert_true(locked == 0 && pid > 0);
    close(fd);
    fd = lease_and_set(0, T.low); /* dirty again, then healed by a restart */
    touch(fail);
    EXPECT_PREFIX(cmd(fd, "RELEASE", buf, sizeof buf), "ERR reset ");
    close(fd);
    unlink(fail);
    restart(-1, NULL);
    assert_int_equal(gpu_clock(0), 1410);
    assert_string_equal(lease_file(text, sizeof text), "");
}

/* The state file of the fake NVML in the daemon: its memory lock (" mem=..."). */
static int daemon_mem_locked(const char *state_file)
{
    char text[256] = "";
    FILE *f = fopen(state_file, "r");
    if (f) {
        if (!fgets(text, sizeof text, f)) text[0] = '\0';
        fclose(f);
    }
    if (!strstr(text, " mem=")) fail_msg("no memory lock in the fake's state: '%s'", text);
    return strstr(text, " mem=default") == NULL;
}

/* A memory clock reset that fails is a failed reset; a GPU without memory locks is not. */
static void test_memory_reset(void **state)
{
    NEED_DAEMON();
    static char env[400];
    char fail[330], st[330], buf[512], text[512];
    snprintf(fail, sizeof fail, "%s/fail-mem", T.dir);
    snprintf(st, sizeof st, "%s/nvml-state", T.dir);
    snprintf(env, sizeof env, "PRS_FAKE_NVML_FAIL_MEM_RESET=%s", fail);
    setenv("PRS_FAKE_NVML_STATE", st, 1); /* the daemon's; this process changes no clock */
    restart(0, env);
    unsetenv("PRS_FAKE_NVML_STATE");
    int fd = lease_and_set(1, T.low);
    assert_true(daemon_mem_locked(st));
    touch(fail);
    EXPECT_PREFIX(cmd(fd, "RELEASE", buf, sizeof buf), "ERR reset released, but GPU-");
    assert_non_null(strstr(buf, "nvmlDeviceResetMemoryLockedClocks"));
    assert_int_equal(gpu_clock(1), 1410); /* the SM clock was reset */
    assert_true(daemon_mem_locked(st));
    assert_non_null(strstr(lease_file(text, sizeof text), " 0 0 0\n"));
    close(fd);
    fd = lease_and_set(0, T.low); /* its lock at LEASE fails too: nothing of ours to undo */
    EXPECT_PREFIX(cmd(fd, "RELEASE", buf, sizeof buf), "OK");
    close(fd);
    fd = lease_and_set(1, T.low); /* GPU 1's memory lock is still ours, still not undone */
    EXPECT_PREFIX(cmd(fd, "RELEASE", buf, sizeof buf), "ERR reset ");
    close(fd);
    unlink(fail);
    restart(0, "PRS_FAKE_NVML_NO_MEM_LOCK=1"); /* the reset at exit heals it: status 0 */
    assert_false(daemon_mem_locked(st));
    assert_string_equal(lease_file(text, sizeof text), "");
    fd = lease_and_set(1, T.low); /* no memory locks at all: nothing failed */
    EXPECT_PREFIX(cmd(fd, "RELEASE", buf, sizeof buf), "OK");
    close(fd);
    restart(0, NULL);
}

/* A lease the daemon cannot record is not given (a crash would leave its clocks locked). */
static void test_lease_file_unwritable(void **state)
{
    NEED_DAEMON();
    char tmp[330], buf[512];
    snprintf(tmp, sizeof tmp, "%s/leases.tmp", T.state);
    assert_int_equal(mkdir(tmp, 0755), 0); /* the lease file's temporary cannot be opened */
    int fd = try_connect(), locked;
    long pid;
    EXPECT_PREFIX(cmd(fd, "HELLO 1", buf, sizeof buf), "OK ");
    EXPECT_PREFIX(cmd(fd, "LEASE 0", buf, sizeof buf), "ERR io the lease of GPU-");
    print_message("a lease that cannot be recorded: '%s'\n", buf);
    EXPECT_PREFIX(cmd(fd, "CLOCKS", buf, sizeof buf), "ERR state no lease");
    list_gpu(0, &locked, &pid);
    assert_true(locked == 0 && pid == 0);
    assert_int_equal(rmdir(tmp), 0);
    EXPECT_PREFIX(cmd(fd, "LEASE 0", buf, sizeof buf), "OK GPU-");
    close(fd);
    assert_true(wait_clock(0, 1410, mono_s()) >= 0);
}

/* A GPU in MIG mode is not served; the others are. A lease of it a dead daemon left in the lease
 * file stays there until a daemon that serves it resets it. */
static void test_mig_gpu_skipped(void **state)
{
    NEED_DAEMON();
    char text[512];
    int fd0 = lease_and_set(0, T.low);
    restart(-1, "PRS_FAKE_NVML_MIG=0");
    close(fd0);
    assert_int_equal(gpu_clock(0), T.low);
    EXPECT_PREFIX(lease_file(text, sizeof text), "GPU-"); /* kept, though not served */
    int locked;
    long pid;
    list_gpu(0, &locked, &pid);
    assert_int_equal(locked, -2);
    list_gpu(1, &locked, &pid);
    assert_true(locked == 0 && pid == 0);
    int fd = lease_and_set(1, T.low);
    close(fd);
    assert_true(wait_clock(1, 1410, mono_s()) >= 0);
    EXPECT_PREFIX(lease_file(text, sizeof text), "GPU-"); /* GPU 0's, still */
    restart(0, NULL); /* serves GPU 0 again: resets it at start-up */
    assert_int_equal(gpu_clock(0), 1410);
    assert_string_equal(lease_file(text, sizeof text), "");
}

/* In a child: LIST for seconds, and at least 20 times; writes "lists distinct_energies worst_ms" to
 * fd, or "f why". */
static void child_lists(int fd, double seconds)
{
    char buf[4200], out[128] = "f no connection";
    unsigned long long last = 0;
    int c = try_connect(), lists = 0, distinct = 0;
    double worst = 0;
    if (c >= 0 && raw_cmd(c, "HELLO 1", buf, sizeof buf) == 0) {
        for (double end = mono_s() + seconds; mono_s() < end || lists < 20; lists++) {
            double t0 = mono_s();
            unsigned long long e = 0;
            if (raw_cmd(c, "LIST", buf, sizeof buf) ||
                sscanf(buf, "GPU 0 %*s %*s %*s %*s %llu", &e) != 1)
                break;
            while (strncmp(buf, "OK ", 3) != 0 && read_line(c, buf, sizeof buf) == 0)
                ;
            if (mono_s() - t0 > worst) worst = mono_s() - t0;
            distinct += e != last;
            last = e;
            nap_ms(20); /* a tool's polling interval */
        }
        snprintf(out, sizeof out, "%d %d %.3f", lists, distinct, 1e3 * worst);
    }
    if (write(fd, out, strlen(out)) < 0) _exit(1);
    _exit(0);
}

/* Energy reads that keep a CPU busy for 200 ms each (an H100's take 3 ms): a tool polling LIST
 * must not hold up a trainer's clock requests, since the daemon's reader thread takes the
 * readings (the poll loop used to read 2 reads per LIST), and LIST's energy still moves. A
 * request held up by a read lasts at least the read: the bound is half of it, far above what a
 * busy machine adds to a request that is not held up. */
static void test_energy_reader(void **state)
{
    NEED_DAEMON();
    assert_int_equal(stop_daemon(SIGTERM), 0);
    T.daemon = start_daemon("PRS_FAKE_NVML_READ_MS=200");
    int fd = lease_and_set(0, T.low), p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        child_lists(p[1], 2.5);
    }
    close(p[1]);
    char buf[512], req[64];
    double worst = 0;
    int sets = 0;
    for (double end = mono_s() + 2.5; mono_s() < end || sets < 100; sets++) {
        snprintf(req, sizeof req, "SET %d %d", sets + 2, sets % 2 ? T.low : 1410);
        double t0 = mono_s();
        EXPECT_PREFIX(cmd(fd, req, buf, sizeof buf), "ACK ");
        if (mono_s() - t0 > worst) worst = mono_s() - t0;
        nap_ms(5); /* a trainer's pace */
    }
    char got[128] = "";
    ssize_t n = read(p[0], got, sizeof got - 1);
    got[n > 0 ? n : 0] = '\0';
    close(p[0]);
    waitpid(pid, NULL, 0);
    int lists = 0, distinct = 0;
    double list_ms = 0;
    if (sscanf(got, "%d %d %lf", &lists, &distinct, &list_ms) != 3) fail_msg("LIST child: %s", got);
    print_message("energy reads of 200 ms: %d SETs beside %d LISTs, slowest SET %.2f ms, slowest "
                  "LIST %.2f ms, %d different energy readings of GPU 0\n",
                  sets, lists, 1e3 * worst, list_ms, distinct);
    assert_true(lists >= 20 && sets >= 100);
    assert_true(worst < 0.100 && list_ms < 100); /* a read in the loop: 200 ms at least */
    assert_true(distinct >= 2);                  /* the reader refreshes every second */
    close(fd);
    assert_int_equal(stop_daemon(SIGTERM), 0);
    T.daemon = start_daemon(NULL);
}

/* Send a request without waiting for its answer. */
static void send_only(int fd, const char *req)
{
    char line[128];
    int len = snprintf(line, sizeof line, "%s\n", req);
    assert_int_equal(send(fd, line, (size_t)len, MSG_NOSIGNAL), len);
}

/* One GPU's clock change held in the driver (PRS_FAKE_NVML_SET_HOLD) holds up only its own
 * connection: another trainer's lease and SET on the other GPU are answered while it is held (a
 * daemon applying SETs in its loop answers nothing until the call returns), its own ACK comes
 * once the call returns, and a leaseholder that goes away while its SET is held has its GPU
 * reset after the call returns. */
static void test_set_not_serialised(void **state)
{
    NEED_DAEMON();
    static char env[400];
    char hold[320], buf[512], req[64], want[64];
    int clocks[8], n;
    assert_int_equal(prs_gpu_clocks(T.gpu[0], clocks, 8, &n), 0);
    snprintf(hold, sizeof hold, "%s/set-hold", T.dir);
    snprintf(env, sizeof env, "PRS_FAKE_NVML_SET_HOLD=%s", hold);
    assert_int_equal(stop_daemon(SIGTERM), 0);
    T.daemon = start_daemon(env);
    int a = try_connect();
    assert_true(a >= 0);
    EXPECT_PREFIX(cmd(a, "HELLO 1", buf, sizeof buf), "OK perseus-gpud 1 ");
    EXPECT_PREFIX(cmd(a, "LEASE 0", buf, sizeof buf), "OK GPU-");
    touch(hold);
    snprintf(req, sizeof req, "SET 1 %d", T.low);
    send_only(a, req);
    send_only(a, "CLOCKS");          /* handled after the ACK: answers stay in order */
    int b = lease_and_set(1, T.low); /* fails after 5 s without an answer */
    EXPECT_PREFIX(cmd(b, "READ", buf, sizeof buf), "OK ");
    struct pollfd p = {a, POLLIN, 0};
    assert_int_equal(poll(&p, 1, 0), 0); /* still held */
    unlink(hold);
    snprintf(want, sizeof want, "ACK 1 ok %d %d ", T.low, T.low);
    assert_int_equal(read_line(a, buf, sizeof buf), 0);
    EXPECT_PREFIX(buf, want);
    assert_int_equal(read_line(a, buf, sizeof buf), 0);
    EXPECT_PREFIX(buf, "OK ");
    assert_int_equal(gpu_clock(0), T.low);

    touch(hold);
    snprintf(req, sizeof req, "SET 2 %d", clocks[6]);
    send_only(a, req);
    close(a); /* gone while its SET is held */
    unlink(hold);
    assert_true(wait_clock(0, 1410, mono_s()) >= 0); /* reset, not left at clocks[6] */
    EXPECT_PREFIX(cmd(b, "READ", buf, sizeof buf), "OK ");
    close(b);
    assert_true(wait_clock(1, 1410, mono_s()) >= 0);
    assert_int_equal(stop_daemon(SIGTERM), 0);
    T.daemon = start_daemon(NULL);
}

/* Private mode: the daemon serves one end of a socketpair for GPU 1 with no config, outside our
 * session, and exits 0 after resetting when the other end closes. */
static void test_private_mode(void **state)
{
    NEED_DAEMON();
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        int fd = open(T.log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) dup2(fd, 2);
        char fdarg[16];
        snprintf(fdarg, sizeof fdarg, "%d", sv[1]);
        execl(T.bin, T.bin, "--private-fd", fdarg, "--gpu", "nvml:1", "--nvml-library", T.lib,
              (char *)NULL);
        _exit(127);
    }
    close(sv[1]);
    char buf[512], req[64], want[64];
    EXPECT_PREFIX(cmd(sv[0], "HELLO 1", buf, sizeof buf), "OK perseus-gpud 1 ");
    EXPECT_PREFIX(cmd(sv[0], "LEASE 0", buf, sizeof buf), "ERR nogpu");
    EXPECT_PREFIX(cmd(sv[0], "LEASE 1", buf, sizeof buf), "OK GPU-");
    snprintf(req, sizeof req, "SET 1 %d", T.low);
    snprintf(want, sizeof want, "ACK 1 ok %d %d ", T.low, T.low);
    EXPECT_PREFIX(cmd(sv[0], req, buf, sizeof buf), want);
    assert_int_equal(gpu_clock(1), T.low);
    assert_int_not_equal(getsid(pid), getsid(0)); /* its own session */
    double t0 = mono_s();
    close(sv[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(gpu_clock(1), 1410);
    print_message("private mode: reset and exit 0 in %.2f ms after the socket closed\n",
                  (mono_s() - t0) * 1e3);
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
        cmocka_unit_test(test_lock_read_back_lags),
        cmocka_unit_test(test_reset_fails),
        cmocka_unit_test(test_memory_reset),
        cmocka_unit_test(test_lease_file_unwritable),
        cmocka_unit_test(test_mig_gpu_skipped),
        cmocka_unit_test(test_private_mode),
        cmocka_unit_test(test_energy_reader),
        cmocka_unit_test(test_set_not_serialised),
    };
    return prs_test_result(cmocka_run_group_tests(tests, setup, teardown));
}
