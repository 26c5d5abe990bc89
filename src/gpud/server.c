/* perseus-gpud server: the listening Unix socket (or, in private mode, one connected socket), a
 * single poll() loop over the connections, the leaseholders' pids, the signals (signalfd), the
 * clock setters' wake-ups (setter.c) and the parent (private mode). Enforces the bounds of
 * docs/gpud.md: connections in total and per uid, the HELLO deadline, pending output (conn.c). */
#define _GNU_SOURCE /* accept4, struct ucred, signalfd, syscall */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "gpud.h"

#define POLL_MAX (4 + 2 * GPUD_MAX_CONNS)

typedef struct loop {
    gpud *d;
    int sigfd, listen_fd;
    long parent_pid;    /* private mode: 0 when not watched */
    int parent_pidfd;   /* -1: poll with kill(pid, 0) */
    int parent_by_ppid; /* 1: the parent is whoever getppid() was at start */
    int stop;
} loop;

/* Create the socket's directory (0755) when missing. */
static int make_parent_dir(const char *path, prs_error *err)
{
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return 0;
    *slash = '\0';
    if (mkdir(dir, 0755) == 0 || errno == EEXIST) return 0;
    return prs_error_set(err, PRS_EIO, "socket directory %s: %s", dir, strerror(errno));
}

/* A socket file left by a dead daemon is removed; a live daemon's is an error. */
static int clear_stale(const struct sockaddr_un *sa, prs_error *err)
{
    struct stat st;
    if (lstat(sa->sun_path, &st) != 0) return 0;
    if (!S_ISSOCK(st.st_mode))
        return prs_error_set(err, PRS_EIO, "%s exists and is not a socket", sa->sun_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int live = fd >= 0 && connect(fd, (const struct sockaddr *)sa, sizeof *sa) == 0;
    if (fd >= 0) close(fd);
    if (live)
        return prs_error_set(err, PRS_EIO, "%s: another perseus-gpud is serving it", sa->sun_path);
    unlink(sa->sun_path);
    return 0;
}

static int listen_socket(const char *path, int *out, prs_error *err)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof sa.sun_path)
        return prs_error_set(err, PRS_EINVAL, "--socket %s: path longer than %zu bytes", path,
                             sizeof sa.sun_path - 1);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int rc = make_parent_dir(path, err);
    if (rc || (rc = clear_stale(&sa, err))) return rc;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return prs_error_set(err, PRS_EIO, "socket: %s", strerror(errno));
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || chmod(path, 0666) != 0 ||
        listen(fd, 128) != 0) {
        rc = prs_error_set(err, PRS_EIO, "%s: %s", path, strerror(errno));
        close(fd);
        return rc;
    }
    *out = fd;
    return 0;
}

static int add_conn(gpud *d, gpud_conn *c)
{
    if (d->nconns >= GPUD_MAX_CONNS) return -1;
    d->conns[d->nconns++] = c;
    return 0;
}

static void remove_conn(gpud *d, int i, const char *why)
{
    gpud_conn *c = d->conns[i];
    gpud_log(GPUD_LOG_DEBUG, "msg=disconnect pid=%ld uid=%u why=\"%s\"", c->pid, c->uid, why);
    d->conns[i] = d->conns[--d->nconns];
    gpud_conn_free(d, c, why);
}

static void refuse(int fd, const char *why, const struct ucred *cr)
{
    char line[160];
    int n = snprintf(line, sizeof line, "ERR busy %s\n", why);
    ssize_t w = send(fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
    close(fd);
    gpud_log(GPUD_LOG_WARN, "msg=connection_refused pid=%ld uid=%u why=\"%s\"", (long)cr->pid,
             (unsigned)cr->uid, why);
}

static void accept_all(gpud *d, int lfd)
{
    for (int k = 0; k < 64; k++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        struct ucred cr;
        socklen_t len = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) {
            close(fd);
            continue;
        }
        int same_uid = 0;
        for (int i = 0; i < d->nconns; i++)
            same_uid += d->conns[i]->uid == (unsigned)cr.uid;
        if (d->nconns >= GPUD_MAX_CONNS) {
            refuse(fd, "too many connections to perseus-gpud (256)", &cr);
            continue;
        }
        if (same_uid >= GPUD_MAX_PER_UID) {
            refuse(fd, "too many connections from this uid (64)", &cr);
            continue;
        }
        gpud_conn *c = gpud_conn_new(fd, (long)cr.pid, (unsigned)cr.uid, (unsigned)cr.gid);
        if (!c) {
            refuse(fd, "out of memory", &cr);
            continue;
        }
        add_conn(d, c);
        gpud_log(GPUD_LOG_DEBUG, "msg=connect pid=%ld uid=%u", c->pid, c->uid);
    }
}

/* Send pending output; 0, or -1 when the peer is gone. */
static int flush_out(gpud_conn *c)
{
    size_t done = 0;
    while (done < c->nout) {
        ssize_t w = send(c->fd, c->out + done, c->nout - done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (w <= 0) return -1;
        done += (size_t)w;
    }
    if (done == 0) return 0;
    memmove(c->out, c->out + done, c->nout - done);
    c->nout -= done;
    return 0;
}

/* Read and handle what the peer sent; the reason to close it, or NULL. */
static const char *conn_input(gpud *d, gpud_conn *c)
{
    char buf[GPUD_IN_MAX];
    /* At most 16 reads, and none once the answers pile up (GPUD_OUT_HIGH): the client reads them
     * first. */
    for (int k = 0; k < 16 && !c->closing && !c->dead && !c->setting && c->nout < GPUD_OUT_HIGH;
         k++) {
        /* never more than the connection's buffer holds: a SET applied meanwhile (setter.c)
         * leaves the rest of what was read unhandled until its ACK */
        size_t room = GPUD_IN_MAX - c->nin;
        if (room == 0) break;
        ssize_t r = recv(c->fd, buf, room, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (r < 0) return "read error";
        if (r == 0) return c->nin ? "end of stream within a request" : "connection closed";
        gpud_conn_feed(d, c, buf, (size_t)r);
    }
    return NULL;
}

/* After I/O: the reason to drop the connection now, or NULL. */
static const char *conn_verdict(gpud_conn *c, const char *io_why)
{
    if (c->dead) return "dropped (output not read, or out of memory)";
    if (flush_out(c) != 0) return "peer gone";
    if (io_why) return io_why;
    if (c->closing) return "closed after an error reply";
    if (!c->hello && prs_mono_s() - c->accepted_s > GPUD_HELLO_TIMEOUT_S)
        return "no HELLO within 5 s";
    return NULL;
}

/* The leaseholder's process: 1 when it has exited. */
static int holder_gone(const gpud_conn *c, int pidfd_readable)
{
    if (!c->lease) return 0;
    if (c->pidfd >= 0) return pidfd_readable;
    return c->pid_poll && kill((pid_t)c->pid, 0) != 0 && errno == ESRCH;
}

/* The parent of a private-mode daemon: 1 when it has exited. */
static int parent_gone(const loop *L, int pidfd_readable)
{
    if (L->parent_pid <= 0) return 0;
    if (L->parent_pidfd >= 0) return pidfd_readable;
    if (L->parent_by_ppid) return getppid() != (pid_t)L->parent_pid;
    return kill((pid_t)L->parent_pid, 0) != 0 && errno == ESRCH;
}

static int open_pidfd(long pid)
{
#ifdef SYS_pidfd_open
    long fd = syscall(SYS_pidfd_open, (pid_t)pid, 0);
    if (fd >= 0) fcntl((int)fd, F_SETFD, FD_CLOEXEC);
    return fd >= 0 ? (int)fd : -1;
#else
    return -1;
#endif
}

static void reload_config(gpud *d)
{
    gpud_config fresh;
    prs_error err;
    if (gpud_config_load(d->config_path, &fresh, &err) != 0) {
        char q[600];
        gpud_log(GPUD_LOG_ERROR, "msg=reload_failed action=keep_old_config detail=%s",
                 gpud_logq(err.msg, q, sizeof q));
        return;
    }
    gpud_config_free(&d->cfg);
    d->cfg = fresh;
    gpud_log(GPUD_LOG_INFO, "msg=config_reloaded path=%s rules=%d present=%d", d->config_path,
             d->cfg.n, d->cfg.present);
}

static void on_signals(loop *L)
{
    struct signalfd_siginfo si;
    while (read(L->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGHUP && !L->d->private_mode) {
            reload_config(L->d);
            continue;
        }
        gpud_log(GPUD_LOG_INFO, "msg=signal signal=%s action=reset_and_exit",
                 si.ssi_signo == SIGTERM  ? "TERM"
                 : si.ssi_signo == SIGINT ? "INT"
                                          : "HUP");
        L->stop = 1;
    }
}

static int timeout_ms(const loop *L)
{
    double t = 1.0, now = prs_mono_s();
    for (int i = 0; i < L->d->nconns; i++) {
        const gpud_conn *c = L->d->conns[i];
        if (!c->hello) {
            double left = c->accepted_s + GPUD_HELLO_TIMEOUT_S - now;
            t = left < t ? left : t;
        }
        if (c->pid_poll && t > GPUD_PID_POLL_S) t = GPUD_PID_POLL_S;
    }
    if (L->parent_pid > 0 && L->parent_pidfd < 0 && t > GPUD_PID_POLL_S) t = GPUD_PID_POLL_S;
    return t <= 0 ? 0 : (int)(t * 1000) + 1;
}

static void drop_conn(gpud *d, gpud_conn *c, const char *why)
{
    for (int i = 0; i < d->nconns; i++)
        if (d->conns[i] == c) {
            remove_conn(d, i, why);
            return;
        }
}

/* Handle one connection after poll: its pid, its input, its output and deadlines. */
static void service(gpud *d, gpud_conn *c, short revents, short pid_revents)
{
    const char *io_why = NULL;
    if (revents & (POLLIN | POLLHUP | POLLERR)) io_why = conn_input(d, c);
    if (holder_gone(c, pid_revents != 0)) {
        gpud_log(GPUD_LOG_WARN, "msg=leaseholder_exited pid=%ld uid=%u gpu=%s action=reset", c->pid,
                 c->uid, c->lease->uuid);
        drop_conn(d, c, "leaseholder process exited");
        return;
    }
    const char *why = conn_verdict(c, io_why);
    if (why) drop_conn(d, c, why);
}

/* The ACKs of the SETs the setters applied, to their connections. */
static void answer_sets(gpud *d)
{
    static gpud_setter_done done[GPUD_MAX_GPUS]; /* the loop's thread only */
    int n = gpud_setters_collect(d, done, GPUD_MAX_GPUS);
    for (int i = 0; i < n; i++)
        gpud_conn_answer(d, done[i].c, done[i].res.line);
}

static void loop_once(loop *L)
{
    gpud *d = L->d;
    struct pollfd pfd[POLL_MAX];
    gpud_conn *snap[GPUD_MAX_CONNS];
    int conn_at[GPUD_MAX_CONNS], pid_at[GPUD_MAX_CONNS], n = 0, nc = d->nconns;
    pfd[n++] = (struct pollfd){.fd = L->sigfd, .events = POLLIN};
    int listen_at = L->listen_fd >= 0 ? n : -1, parent_at = L->parent_pidfd >= 0 ? n + 1 : -1;
    pfd[n++] = (struct pollfd){.fd = L->listen_fd, .events = POLLIN}; /* fd -1: ignored */
    pfd[n++] = (struct pollfd){.fd = L->parent_pidfd, .events = POLLIN};
    pfd[n++] = (struct pollfd){.fd = gpud_setters_fd(d), .events = POLLIN};
    for (int i = 0; i < nc; i++) {
        gpud_conn *c = snap[i] = d->conns[i];
        conn_at[i] = n;
        short ev = (short)((c->nout < GPUD_OUT_HIGH && !c->setting ? POLLIN : 0) |
                           (c->nout ? POLLOUT : 0));
        /* waiting for its SET with nothing to send: not polled (a hang-up would spin the loop) */
        pfd[n++] = (struct pollfd){.fd = ev ? c->fd : -1, .events = ev};
        pid_at[i] = c->pidfd >= 0 ? n : -1;
        if (c->pidfd >= 0) pfd[n++] = (struct pollfd){.fd = c->pidfd, .events = POLLIN};
    }
    if (poll(pfd, (nfds_t)n, timeout_ms(L)) < 0 && errno != EINTR) return;
    if (pfd[0].revents) on_signals(L);
    if (pfd[3].revents) answer_sets(d); /* before the output is flushed below */
    for (int i = 0; i < nc; i++)
        service(d, snap[i], pfd[conn_at[i]].revents, pid_at[i] >= 0 ? pfd[pid_at[i]].revents : 0);
    if (listen_at >= 0 && pfd[listen_at].revents) accept_all(d, L->listen_fd);
    if (parent_gone(L, parent_at >= 0 && pfd[parent_at].revents)) {
        gpud_log(GPUD_LOG_INFO, "msg=parent_exited pid=%ld action=reset_and_exit", L->parent_pid);
        L->stop = 1;
    }
    if (d->private_mode && d->nconns == 0) L->stop = 1;
}

/* Private mode: the one connection on fd, and the parent to outlive no longer than needed. */
static int setup_private(loop *L, const gpud_server_opts *o, prs_error *err)
{
    int fd = o->private_fd;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
        return prs_error_set(err, PRS_EINVAL, "--private-fd %d: not an open descriptor", fd);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    struct ucred cr = {0, getuid(), getgid()};
    socklen_t len = sizeof cr;
    int type = 0;
    socklen_t tlen = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0 || type != SOCK_STREAM)
        return prs_error_set(err, PRS_EINVAL, "--private-fd %d: not a stream socket", fd);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || cr.pid == getpid()) cr.pid = 0;
    gpud_conn *c = gpud_conn_new(fd, (long)cr.pid, (unsigned)getuid(), (unsigned)getgid());
    if (!c || add_conn(L->d, c) != 0) {
        free(c);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    L->parent_by_ppid = o->parent_pid <= 0;
    L->parent_pid = o->parent_pid > 0 ? o->parent_pid : (long)getppid();
    if (L->parent_pid <= 1) L->parent_pid = 0;
    if (L->parent_pid > 0) L->parent_pidfd = open_pidfd(L->parent_pid);
    if (L->parent_pid > 0 && L->parent_pidfd < 0 && !L->parent_by_ppid &&
        kill((pid_t)L->parent_pid, 0) != 0 && errno == ESRCH)
        return prs_error_set(err, PRS_EINVAL, "--parent-pid %ld: no such process", L->parent_pid);
    return 0;
}

/* The signals the loop takes through its signalfd (docs/gpud.md, 'Reset guarantees'). */
static void loop_signals(int private_mode, sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    if (!private_mode) sigaddset(set, SIGINT);
}

void gpud_signals_block(int private_mode)
{
    signal(SIGPIPE, SIG_IGN);
    if (private_mode)
        signal(SIGINT, SIG_IGN); /* a terminal's Ctrl-C reaches the trainer's whole group */
    sigset_t set;
    loop_signals(private_mode, &set);
    sigprocmask(SIG_BLOCK, &set, NULL);
}

static int setup_signals(loop *L, prs_error *err)
{
    gpud_signals_block(L->d->private_mode); /* again: a caller that did not, e.g. a test */
    sigset_t set;
    loop_signals(L->d->private_mode, &set);
    L->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (L->sigfd < 0) return prs_error_set(err, PRS_EIO, "signalfd: %s", strerror(errno));
    return 0;
}

int gpud_serve(gpud *d, const gpud_server_opts *o, prs_error *err)
{
    loop L = {.d = d, .sigfd = -1, .listen_fd = -1, .parent_pidfd = -1};
    d->private_mode = o->private_fd >= 0;
    int rc = setup_signals(&L, err);
    if (!rc)
        rc = d->private_mode ? setup_private(&L, o, err)
                             : listen_socket(o->socket_path, &L.listen_fd, err);
    if (!rc && !d->private_mode && (rc = gpud_energy_start(d)) != 0) /* inherits the mask */
        rc = prs_error_set(err, rc, "cannot start the energy reader");
    if (!rc && !d->private_mode && (rc = gpud_setters_start(d)) != 0) /* so do these */
        rc = prs_error_set(err, rc, "cannot start the clock setters");
    if (!rc) {
        gpud_log(GPUD_LOG_INFO, "msg=serving mode=%s socket=%s gpus=%d",
                 d->private_mode ? "private" : "system", d->private_mode ? "-" : o->socket_path,
                 d->ngpus);
        while (!L.stop)
            loop_once(&L);
    }
    gpud_energy_stop(d);
    while (d->nconns > 0)
        remove_conn(d, d->nconns - 1, rc ? "start-up failed" : "daemon stopping");
    gpud_setters_stop(d);
    int dirty = gpud_leases_reset_dirty(d, "daemon stopping");
    gpud_leases_save(d);
    if (L.listen_fd >= 0) {
        close(L.listen_fd);
        unlink(o->socket_path);
    }
    if (L.sigfd >= 0) close(L.sigfd);
    if (L.parent_pidfd >= 0) close(L.parent_pidfd);
    if (!rc && dirty)
        rc = prs_error_set(err, PRS_EGPU,
                           "%d GPU(s) could not be reset to default clocks (the log says which)",
                           dirty);
    return rc;
}
