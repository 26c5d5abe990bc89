/* The clock controller (perseus/gpu.h): SM clock changes off the training thread's critical path,
 * made by a process that may make them, and never a GPU left with locked clocks.
 *
 * INLINE calls the backend in the caller's thread (the sim backend's clock change is an atomic
 * store; a root process may also do it for a real GPU).
 *
 * DAEMON and PROCESS talk to perseus-gpud (docs/gpud.md) over a stream socket (gpud_conn.h): the
 * node's daemon at its socket, or a private instance started for this process with posix_spawn
 * (never fork: the training process has threads, and a forked child of a threaded process may
 * only call async-signal-safe functions). Either holds an exclusive lease on the GPU and resets
 * its clocks when the lease ends for any reason: the socket closes (exit, crash, SIGKILL), or the
 * leaseholder process dies while a forked child still holds the socket. The private instance runs
 * in a session of its own, so a signal to the training process group (a Ctrl-C, scancel) does not
 * kill it before it could reset; it exits once it reset.
 *
 * A request is one non-blocking send; its answer (applied, refused, or applied but not in effect
 * when read back) arrives on the controller's reader thread. prs_clockctl_sync waits for it.
 * When the node daemon goes away (a restart), the next request connects again and takes the
 * lease anew, at most every RECONNECT_INTERVAL_S, instead of failing for the rest of the run. */
#define _GNU_SOURCE /* POSIX_SPAWN_SETSID */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu_int.h"
#include "perseus/clock.h"
#include "gpud_conn.h"

#define LEASE_TIMEOUT_S 10.0 /* a private daemon starts, opens NVML and answers */
#define CLOSE_TIMEOUT_S 10.0
#define RECONNECT_TIMEOUT_S 2.0  /* a restarted node daemon answers HELLO and LEASE */
#define RECONNECT_INTERVAL_S 0.5 /* between attempts while the daemon is away */

extern char **environ;

struct prs_clockctl {
    prs_gpu *gpu;
    prs_clockctl_mode mode;
    int requested;   /* last clock requested (0: default) */
    long last_seq;   /* DAEMON, PROCESS: sequence number of the last request */
    int send_failed; /* the last request could not be sent (the daemon is gone) */
    prs__gpu_conn *conn;
    pid_t helper;
    /* DAEMON: what a reconnection needs, and when it may next try */
    char socket_path[108], lease[128];
    double next_reconnect_s;
    /* INLINE */
    int inline_rc;        /* result of the last request */
    int inline_confirmed; /* clock in effect (0: default) */
    long inline_failures;
};

const char *prs_gpud_socket_path(void)
{
    const char *p = getenv("PRS_GPUD_SOCKET");
    return p && *p ? p : PRS_GPUD_DEFAULT_SOCKET;
}

int prs_gpud_available(const char *socket_path)
{
    struct stat st;
    if (!socket_path) socket_path = prs_gpud_socket_path();
    return stat(socket_path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* How perseus-gpud knows the GPU: its UUID (as opened, else asked of NVML), else its NVML index
 * when it was opened by index. A GPU opened by PCI bus id has no index of its own (it is not
 * GPU 0): without its UUID it cannot be named. */
static int lease_id(prs_gpu *g, char *buf, size_t n, prs_error *err)
{
    if (g->uuid[0]) {
        snprintf(buf, n, "%s", g->uuid);
        return 0;
    }
    if (prs_gpu_uuid(g, buf, n) == 0 && strncmp(buf, "GPU-", 4) == 0) return 0;
    if (!g->pci[0]) {
        snprintf(buf, n, "%u", g->index);
        return 0;
    }
    return prs_error_set(err, PRS_EGPU,
                         "clock controller: GPU %s has no UUID to name it to perseus-gpud by "
                         "(%s); select it by UUID (nvml:GPU-...)",
                         g->pci, prs_gpu_errmsg(g));
}

/* The perseus-gpud program: $PRS_GPUD, the one built beside this library, the installed one, or
 * the first on PATH. */
static const char *gpud_program(int *search_path)
{
    *search_path = 0;
    const char *p = getenv("PRS_GPUD");
    if (p && *p) return p;
#ifdef PRS_GPUD_BUILD_PATH
    if (access(PRS_GPUD_BUILD_PATH, X_OK) == 0) return PRS_GPUD_BUILD_PATH;
#endif
#ifdef PRS_GPUD_INSTALL_PATH
    if (access(PRS_GPUD_INSTALL_PATH, X_OK) == 0) return PRS_GPUD_INSTALL_PATH;
#endif
    *search_path = 1;
    return "perseus-gpud";
}

/* Start a private perseus-gpud on one end of a socket pair; *fd gets our end. */
static int spawn_private(prs_gpu *g, int *fd, pid_t *pid, prs_error *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return prs_error_set(err, PRS_EIO, "clock controller: socketpair: %s", strerror(errno));
    if (sv[1] == 3) { /* dup2(3, 3) would keep close-on-exec */
        int moved = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
        close(sv[1]);
        sv[1] = moved;
    }
    char spec[128], parent[32];
    char id[100];
    int rc = lease_id(g, id, sizeof id, err);
    if (rc) {
        close(sv[0]);
        close(sv[1]);
        return rc;
    }
    snprintf(spec, sizeof spec, "nvml:%s", id);
    snprintf(parent, sizeof parent, "%ld", (long)getpid());
    int search;
    const char *prog = gpud_program(&search);
    char *argv[] = {(char *)prog, "--private-fd", "3",    "--gpu",
                    spec,         "--parent-pid", parent, "--nvml-library",
                    g->lib_path,  "--log-level",  "warn", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 3);
    posix_spawnattr_init(&at);
    sigset_t none, dfl;
    sigemptyset(&none);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE);
    sigaddset(&dfl, SIGTERM);
    sigaddset(&dfl, SIGHUP);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &dfl);
    posix_spawnattr_setflags(&at,
                             POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    rc = search ? posix_spawnp(pid, prog, &fa, &at, argv, environ)
                : posix_spawn(pid, prog, &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(sv[1]);
    if (rc != 0) {
        close(sv[0]);
        return prs_error_set(err, PRS_ENOLIB,
                             "clock controller: cannot start %s: %s (install perseus-gpud, or "
                             "set PRS_GPUD to its path)",
                             prog, strerror(rc));
    }
    *fd = sv[0];
    return 0;
}

static int open_conn(prs_clockctl *c, const char *socket_path, prs_error *err)
{
    prs_gpu *g = c->gpu;
    if (g->is_sim)
        return prs_error_set(err, PRS_EINVAL,
                             "clock controller: the sim GPU has no perseus-gpud (use INLINE)");
    int rc;
    if (c->mode == PRS_CLOCKCTL_DAEMON) {
        rc = prs__gpu_conn_connect(socket_path ? socket_path : prs_gpud_socket_path(), &c->conn,
                                   err);
    } else {
        int fd = -1;
        rc = spawn_private(g, &fd, &c->helper, err);
        if (!rc) rc = prs__gpu_conn_adopt(fd, c->helper, &c->conn, err);
        if (rc && c->helper > 0) close(fd); /* the helper sees the end and exits */
    }
    if (!rc) rc = lease_id(g, c->lease, sizeof c->lease, err);
    if (!rc && c->mode == PRS_CLOCKCTL_DAEMON)
        snprintf(c->socket_path, sizeof c->socket_path, "%s",
                 socket_path ? socket_path : prs_gpud_socket_path());
    if (!rc) rc = prs__gpu_conn_lease(c->conn, c->lease, LEASE_TIMEOUT_S, err);
    if (!rc) rc = prs__gpu_conn_start(c->conn, err);
    return rc;
}

int prs_clockctl_open(prs_gpu *g, prs_clockctl_mode mode, const char *socket_path,
                      prs_clockctl **out, prs_error *err)
{
    *out = NULL;
    if (!g) return prs_error_set(err, PRS_EINVAL, "clock controller: no GPU");
    if (mode != PRS_CLOCKCTL_INLINE && mode != PRS_CLOCKCTL_PROCESS && mode != PRS_CLOCKCTL_DAEMON)
        return prs_error_set(err, PRS_EINVAL, "clock controller: unknown mode %d", (int)mode);
    prs_clockctl *c = calloc(1, sizeof *c);
    if (!c) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    c->gpu = g;
    c->mode = mode;
    if (mode != PRS_CLOCKCTL_INLINE) {
        int rc = open_conn(c, socket_path, err);
        if (rc) {
            prs__gpu_conn_close(c->conn, CLOSE_TIMEOUT_S);
            free(c);
            return rc;
        }
    }
    *out = c;
    return 0;
}

int prs_clockctl_new(prs_gpu *g, prs_clockctl_mode mode, prs_clockctl **out, prs_error *err)
{
    return prs_clockctl_open(g, mode, NULL, out, err);
}

prs_clockctl_mode prs_clockctl_mode_of(const prs_clockctl *c)
{
    return c->mode;
}

static int inline_set(prs_clockctl *c, int freq_mhz)
{
    int rc = freq_mhz > 0 ? prs_gpu_set_clock(c->gpu, freq_mhz) : prs_gpu_reset_clock(c->gpu);
    c->inline_rc = rc;
    if (rc == 0)
        c->inline_confirmed = freq_mhz;
    else
        c->inline_failures++;
    return rc;
}

/* The node daemon went away (restarted, upgraded): at most every RECONNECT_INTERVAL_S, connect
 * again and take the lease anew; the GPU is then at its default clocks. 0 when connected. */
static int reconnect(prs_clockctl *c)
{
    if (!prs__gpu_conn_lost(c->conn) && !c->send_failed) return 0;
    double now = prs_mono_s();
    if (now < c->next_reconnect_s) return PRS_EGPU;
    c->next_reconnect_s = now + RECONNECT_INTERVAL_S;
    if (!prs__gpu_conn_lost(c->conn)) return PRS_EGPU; /* the reader has not seen the end yet */
    prs_error e;
    if (prs__gpu_conn_reconnect(c->conn, c->socket_path, c->lease, RECONNECT_TIMEOUT_S, &e))
        return prs__gpu_fail(c->gpu, PRS_EGPU, "the connection to perseus-gpud is gone (%s)",
                             e.msg);
    c->requested = 0;
    c->send_failed = 0;
    c->last_seq = 0;
    return 0;
}

int prs_clockctl_set(prs_clockctl *c, int freq_mhz)
{
    if (freq_mhz < 0) return prs__gpu_fail(c->gpu, PRS_EINVAL, "clock must be >= 0 MHz");
    if (c->mode == PRS_CLOCKCTL_DAEMON) (void)reconnect(c);
    if (freq_mhz == c->requested && !c->send_failed &&
        (c->mode != PRS_CLOCKCTL_INLINE || c->inline_rc == 0))
        return 0;
    c->requested = freq_mhz;
    if (c->mode == PRS_CLOCKCTL_INLINE) return inline_set(c, freq_mhz);
    long seq = prs__gpu_conn_set(c->conn, freq_mhz);
    c->send_failed = seq < 0;
    if (seq < 0) return prs__gpu_fail(c->gpu, PRS_EGPU, "the connection to perseus-gpud is gone");
    c->last_seq = seq;
    return 0;
}

int prs_clockctl_requested(const prs_clockctl *c)
{
    return c->requested;
}

int prs_clockctl_confirmed(const prs_clockctl *c)
{
    if (c->mode == PRS_CLOCKCTL_INLINE) return c->inline_confirmed;
    return prs__gpu_conn_confirmed(c->conn);
}

long prs_clockctl_last_request(const prs_clockctl *c)
{
    return c->mode == PRS_CLOCKCTL_INLINE || c->send_failed ? 0 : c->last_seq;
}

int prs_clockctl_answer(const prs_clockctl *c, long request, int *in_effect_mhz)
{
    return prs_clockctl_answer_at(c, request, in_effect_mhz, NULL);
}

int prs_clockctl_answer_at(const prs_clockctl *c, long request, int *in_effect_mhz, double *since_s)
{
    if (c->mode == PRS_CLOCKCTL_INLINE || request <= 0) {
        *in_effect_mhz = prs_clockctl_confirmed(c);
        if (since_s) *since_s = 0; /* applied before the call that asked for it returned */
        return 1;
    }
    return prs__gpu_conn_answer(c->conn, request, in_effect_mhz, since_s);
}

long prs_clockctl_failures(const prs_clockctl *c)
{
    return c->mode == PRS_CLOCKCTL_INLINE ? c->inline_failures : prs__gpu_conn_failures(c->conn);
}

long prs_clockctl_apply_ns(const prs_clockctl *c)
{
    return c->mode == PRS_CLOCKCTL_INLINE ? 0 : prs__gpu_conn_apply_ns(c->conn);
}

int prs_clockctl_pid(const prs_clockctl *c)
{
    return (int)c->helper;
}

int prs_clockctl_sync(prs_clockctl *c, double timeout_s)
{
    if (c->mode == PRS_CLOCKCTL_INLINE) return c->inline_rc;
    if (c->send_failed)
        return prs__gpu_fail(c->gpu, PRS_EGPU, "the connection to perseus-gpud is gone");
    if (c->last_seq == 0) return 0;
    char msg[256];
    prs__gpu_ack_status s = prs__gpu_conn_wait(c->conn, c->last_seq, timeout_s, msg, sizeof msg);
    switch (s) {
    case PRS__GPU_ACK_OK:
    case PRS__GPU_ACK_SAME:
    case PRS__GPU_ACK_SUPERSEDED: /* only an older request can be; the latest was answered */
        return 0;
    case PRS__GPU_ACK_REFUSED:
        return prs__gpu_fail(c->gpu, PRS_EGPU, "perseus-gpud: the GPU refused the clock: %s", msg);
    case PRS__GPU_ACK_MISMATCH:
        return prs__gpu_fail(c->gpu, PRS_EGPU, "perseus-gpud: the clock did not take: %s", msg);
    default:
        return prs__gpu_fail(c->gpu, PRS_EGPU, "clock controller: %s", msg);
    }
}

void prs_clockctl_free(prs_clockctl *c)
{
    if (!c) return;
    if (c->mode == PRS_CLOCKCTL_INLINE) {
        if (c->requested != 0 || c->inline_failures) prs_gpu_reset_clock(c->gpu);
    } else {
        prs__gpu_conn_close(c->conn, CLOSE_TIMEOUT_S);
    }
    free(c);
}
