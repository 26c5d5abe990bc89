/* The perseus-gpud end-to-end tests' fixture (test_gpud_e2e.c, test_gpud_faults.c): the real
 * binary on a temporary socket and state directory over the fake NVML (two devices shared
 * through files), the clocks read through the same fake devices, the protocol's commands, leases
 * held by children, and the group setup and teardown. Header-only; define _GNU_SOURCE first. */
#ifndef PRS_TEST_GPUD_FIXTURE_H
#define PRS_TEST_GPUD_FIXTURE_H

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

static inline double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static inline int gpu_clock(int i)
{
    int f = -1;
    assert_int_equal(prs_gpu_sm_clock_now(T.gpu[i], &f), 0);
    return f;
}

/* Seconds until GPU i runs at mhz (at most 30 s), or -1. */
static inline double wait_clock(int i, int mhz, double t0)
{
    while (mono_s() - t0 < 30) {
        if (gpu_clock(i) == mhz) return mono_s() - t0;
        nap_ms(1); /* poll interval */
    }
    return -1;
}

static inline int try_connect(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(T.sock) >= sizeof sa.sun_path) fail_msg("socket path too long: %s", T.sock);
    memcpy(sa.sun_path, T.sock, strlen(T.sock) + 1);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) return fd;
    if (fd >= 0) close(fd);
    return -1;
}

static inline void write_config(const char *text)
{
    FILE *f = fopen(T.conf, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Start the daemon (extra: an environment assignment for it, or NULL); wait for its socket. */
static inline pid_t start_daemon(const char *extra)
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
static inline int stop_daemon(int sig)
{
    if (T.daemon <= 0) return -1; /* kill(0, sig) would signal this process group */
    kill(T.daemon, sig);
    int st = 0;
    waitpid(T.daemon, &st, 0);
    T.daemon = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* One reply line into buf (without '\n'); -1 on EOF or after 5 s. */
static inline int read_line(int fd, char *buf, size_t n)
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
static inline int raw_cmd(int fd, const char *req, char *buf, size_t n)
{
    char line[512];
    int len = snprintf(line, sizeof line, "%s\n", req);
    if (send(fd, line, (size_t)len, MSG_NOSIGNAL) != len || read_line(fd, buf, n) != 0) {
        snprintf(buf, n, "(no reply to %s)", req);
        return -1;
    }
    return 0;
}

static inline const char *cmd(int fd, const char *req, char *buf, size_t n)
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
static inline int raw_lease_and_set(int gpu, int mhz, char *err, size_t n)
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

static inline int lease_and_set(int gpu, int mhz)
{
    char err[512];
    int fd = raw_lease_and_set(gpu, mhz, err, sizeof err);
    if (fd < 0) fail_msg("lease of GPU %d at %d MHz failed: %s", gpu, mhz, err);
    return fd;
}

/* In a child: tell the parent on fd that the lease is set ("r"), or why not; exit on failure. */
static inline void child_lease(int gpu, int fd)
{
    char msg[600] = "r";
    if (raw_lease_and_set(gpu, T.low, msg + 1, sizeof msg - 1) >= 0)
        msg[1] = '\0';
    else
        msg[0] = 'f';
    if (write(fd, msg, strlen(msg)) < 0 || msg[0] != 'r') _exit(1);
}

/* In the parent: the child's report from child_lease. */
static inline void parent_wait_lease(int fd)
{
    char msg[600] = "";
    ssize_t got = read(fd, msg, sizeof msg - 1);
    msg[got > 0 ? got : 0] = '\0';
    if (msg[0] != 'r') fail_msg("child could not lease: %s", msg[0] ? msg + 1 : "(no word)");
}

static inline int setup(void **state)
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
static inline int log_clean(void)
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

static inline int teardown(void **state)
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

#endif
