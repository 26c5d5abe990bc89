/* The clock controller (perseus/gpu.h): SM clock changes off the training thread's critical path,
 * and a watchdog that never leaves a GPU with locked clocks.
 *
 * PROCESS mode forks a child that owns the clock. The parent writes 4-byte commands into a
 * non-blocking pipe (a clock > 0, 0 = reset, -1 = ping); an unchanged clock is not even written.
 * The child drains what is in the pipe, applies only the last clock of the batch (older ones are
 * stale) unless it is the one already applied, and answers pings on a second pipe with the result
 * of the last clock change. It resets the clocks and exits when:
 *   - the pipe reaches end of file: the parent closed it (prs_clockctl_free) or died, whatever
 *     killed it (SIGKILL included: the kernel closes the dead process's descriptors);
 *   - its parent changed (getppid, checked every 200 ms): covers a write end that leaked into
 *     another child forked by the training process;
 *   - it gets SIGTERM or SIGHUP. SIGINT is ignored: a Ctrl-C in the terminal reaches the whole
 *     process group, and the child must outlive the parent long enough to see it go.
 * The pipes are O_CLOEXEC so programs the training process execs do not hold them open.
 *
 * INLINE mode calls the backend directly (the sim backend's clock change is an atomic store). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpu_int.h"

#define CMD_PING (-1)

struct prs_clockctl {
    prs_gpu *gpu;
    prs_clockctl_mode mode;
    int requested; /* last clock requested (0: default) */
    int pending;   /* a request the full pipe refused, to send first next time; -2: none */
    pid_t pid;
    int cmd_fd; /* parent's write end */
    int ack_fd; /* parent's read end of the answers */
};

static volatile sig_atomic_t child_stop;

static void on_stop(int sig)
{
    (void)sig;
    child_stop = 1;
}

/* The child's loop; never returns. */
static void child_main(prs_gpu *g, int cmd_fd, int ack_fd, pid_t parent)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop; /* no SA_RESTART: poll returns EINTR */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGINT, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    int last_rc = gpuI_after_fork(g);
    int applied = 0; /* 0: default clocks */
    int32_t buf[256];
    while (!child_stop) {
        struct pollfd p = {cmd_fd, POLLIN, 0};
        int pr = poll(&p, 1, 200);
        if (pr < 0 && errno != EINTR) break;
        if (getppid() != parent) break;
        if (pr <= 0) continue;
        ssize_t got = read(cmd_fd, buf, sizeof buf);
        if (got == 0) break; /* every write end is closed: the parent is gone */
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            break;
        }
        int n = (int)(got / (ssize_t)sizeof buf[0]);
        for (int i = 0; i < n; i++) {
            int cmd = buf[i];
            if (cmd == CMD_PING) {
                int32_t answer = last_rc;
                if (write(ack_fd, &answer, sizeof answer) < 0) {
                    /* the parent stopped listening; nothing to do */
                }
                continue;
            }
            int later_clock = 0;
            for (int j = i + 1; j < n && !later_clock; j++)
                later_clock = buf[j] != CMD_PING;
            if (later_clock || cmd == applied) continue;
            last_rc = cmd > 0 ? prs_gpu_set_clock(g, cmd) : prs_gpu_reset_clock(g);
            /* A refused clock leaves the device as it was; a refused reset is retried at exit. */
            if (last_rc == 0) applied = cmd;
        }
    }
    if (applied != 0 || last_rc != 0) prs_gpu_reset_clock(g);
    /* The parent may be gone; only the clocks matter. Skip atexit handlers (not ours). */
    _exit(0);
}

int prs_clockctl_new(prs_gpu *g, prs_clockctl_mode mode, prs_clockctl **out, prs_error *err)
{
    *out = NULL;
    if (!g) return prs_error_set(err, PRS_EINVAL, "clock controller: no GPU");
    if (mode != PRS_CLOCKCTL_INLINE && mode != PRS_CLOCKCTL_PROCESS)
        return prs_error_set(err, PRS_EINVAL, "clock controller: unknown mode %d", (int)mode);
    prs_clockctl *c = calloc(1, sizeof *c);
    if (!c) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    c->gpu = g;
    c->mode = mode;
    c->pending = -2;
    c->cmd_fd = c->ack_fd = -1;
    if (mode == PRS_CLOCKCTL_INLINE) {
        *out = c;
        return 0;
    }
    int cmd[2], ack[2];
    if (pipe(cmd) != 0) {
        free(c);
        return prs_error_set(err, PRS_EIO, "clock controller: pipe: %s", strerror(errno));
    }
    if (pipe(ack) != 0) {
        close(cmd[0]);
        close(cmd[1]);
        free(c);
        return prs_error_set(err, PRS_EIO, "clock controller: pipe: %s", strerror(errno));
    }
    for (int i = 0; i < 2; i++) {
        fcntl(cmd[i], F_SETFD, FD_CLOEXEC);
        fcntl(ack[i], F_SETFD, FD_CLOEXEC);
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(cmd[0]);
        close(cmd[1]);
        close(ack[0]);
        close(ack[1]);
        free(c);
        return prs_error_set(err, PRS_EIO, "clock controller: fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(cmd[1]);
        close(ack[0]);
        child_main(g, cmd[0], ack[1], parent);
    }
    close(cmd[0]);
    close(ack[1]);
    fcntl(cmd[1], F_SETFL, fcntl(cmd[1], F_GETFL) | O_NONBLOCK);
    c->pid = pid;
    c->cmd_fd = cmd[1];
    c->ack_fd = ack[0];
    *out = c;
    return 0;
}

/* 0 sent, 1 pipe full, PRS_EGPU child gone. */
static int send_cmd(prs_clockctl *c, int32_t cmd)
{
    for (;;) {
        ssize_t w = write(c->cmd_fd, &cmd, sizeof cmd);
        if (w == (ssize_t)sizeof cmd) return 0;
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) return 1;
        return PRS_EGPU;
    }
}

int prs_clockctl_set(prs_clockctl *c, int freq_mhz)
{
    if (freq_mhz < 0) return gpuI_fail(c->gpu, PRS_EINVAL, "clock must be >= 0 MHz");
    if (freq_mhz == c->requested && c->pending == -2) return 0;
    c->requested = freq_mhz;
    if (c->mode == PRS_CLOCKCTL_INLINE)
        return freq_mhz > 0 ? prs_gpu_set_clock(c->gpu, freq_mhz) : prs_gpu_reset_clock(c->gpu);
    int rc = send_cmd(c, freq_mhz);
    if (rc == 1) {
        c->pending = freq_mhz; /* the child is behind; the latest value is all that matters */
        return 0;
    }
    c->pending = -2;
    return rc == 0 ? 0 : gpuI_fail(c->gpu, PRS_EGPU, "clock controller process is gone");
}

int prs_clockctl_requested(const prs_clockctl *c)
{
    return c->requested;
}

int prs_clockctl_pid(const prs_clockctl *c)
{
    return (int)c->pid;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int prs_clockctl_sync(prs_clockctl *c, double timeout_s)
{
    if (c->mode == PRS_CLOCKCTL_INLINE) return 0;
    double t0 = now_s();
    while (c->pending != -2) {
        int rc = send_cmd(c, c->pending);
        if (rc == 0) c->pending = -2;
        if (rc < 0) return gpuI_fail(c->gpu, PRS_EGPU, "clock controller process is gone");
        if (rc == 1) {
            if (now_s() - t0 > timeout_s)
                return gpuI_fail(c->gpu, PRS_EGPU, "clock controller does not answer");
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    int32_t ping = CMD_PING;
    for (;;) {
        int rc = send_cmd(c, ping);
        if (rc == 0) break;
        if (rc < 0 || now_s() - t0 > timeout_s)
            return gpuI_fail(c->gpu, PRS_EGPU, "clock controller does not answer");
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    for (;;) {
        double left = timeout_s - (now_s() - t0);
        if (left < 0) left = 0;
        struct pollfd p = {c->ack_fd, POLLIN, 0};
        int pr = poll(&p, 1, (int)(left * 1000) + 1);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) return gpuI_fail(c->gpu, PRS_EGPU, "clock controller does not answer");
        int32_t answer;
        ssize_t got = read(c->ack_fd, &answer, sizeof answer);
        if (got < 0 && errno == EINTR) continue;
        if (got != (ssize_t)sizeof answer)
            return gpuI_fail(c->gpu, PRS_EGPU, "clock controller process is gone");
        if (answer != 0)
            return gpuI_fail(c->gpu, answer, "clock controller: the GPU refused the clock");
        return 0;
    }
}

void prs_clockctl_free(prs_clockctl *c)
{
    if (!c) return;
    if (c->mode == PRS_CLOCKCTL_INLINE) {
        if (c->requested != 0) prs_gpu_reset_clock(c->gpu);
        free(c);
        return;
    }
    /* Closing the pipe is the stop command: the child resets the clocks and exits. */
    close(c->cmd_fd);
    double t0 = now_s();
    for (;;) {
        pid_t r = waitpid(c->pid, NULL, WNOHANG);
        if (r == c->pid || (r < 0 && errno != EINTR)) break;
        if (now_s() - t0 > 10) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, NULL, 0);
            break;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    close(c->ack_fd);
    free(c);
}
