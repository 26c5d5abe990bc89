/* perseus-gpud leases: who may lease a GPU, taking one (memory clock at its highest, a watch on
 * the leaseholder's pid), dropping one (reset at once, logged with the lease's duration), and the
 * lease file that lets a restarted daemon reset the GPUs a dead one held.
 *
 * The lease file STATE_DIR/leases has one line per lease, "UUID PID UID SINCE_UNIX_S", and one
 * "UUID 0 0 0" per GPU nobody holds whose last reset failed (dirty); it is replaced atomically
 * (temporary file, fsync, rename) on every change. */
#define _GNU_SOURCE /* syscall */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "gpud.h"

#define LEASE_FILE_MAX 65536

int gpud_lease_allowed(gpud *d, const gpud_conn *c, const gpud_gpu *u, char *msg, size_t n)
{
    if (d->private_mode || c->uid == 0) return 1;
    if (!d->cfg.present) {
        snprintf(msg, n,
                 "uid %u may not lease %s: only root may, as there is no config file %s (add "
                 "'allow uid %u all' there)",
                 c->uid, u->uuid, d->cfg.path, c->uid);
        return 0;
    }
    unsigned gids[64];
    int ng = gpud_user_groups(c->uid, c->gid, gids, 64);
    if (gpud_config_allows(&d->cfg, c->uid, gids, ng, u->index, u->uuid)) return 1;
    snprintf(msg, n, "uid %u may not lease %s: add 'allow uid %u %s' (or a group rule) to %s",
             c->uid, u->uuid, c->uid, u->uuid, d->cfg.path);
    return 0;
}

/* Watch the leaseholder's pid: a pidfd, else kill(pid, 0) polling. */
static void watch_pid(gpud *d, gpud_conn *c)
{
    c->pidfd = -1;
    c->pid_poll = 0;
    if (!d->watch_pids || c->pid <= 0) return;
#ifdef SYS_pidfd_open
    long fd = syscall(SYS_pidfd_open, (pid_t)c->pid, 0);
    if (fd >= 0) {
        c->pidfd = (int)fd;
        fcntl(c->pidfd, F_SETFD, FD_CLOEXEC);
        return;
    }
    gpud_log(GPUD_LOG_DEBUG, "msg=pidfd_unavailable pid=%ld errno=%d", c->pid, errno);
#endif
    c->pid_poll = 1;
}

/* Drop c's hold on u without a reset (the lease was never recorded). */
static void unhold(gpud_conn *c, gpud_gpu *u)
{
    u->holder = NULL;
    u->holder_pid = 0;
    u->holder_uid = 0;
    c->lease = NULL;
    if (c->pidfd >= 0) close(c->pidfd);
    c->pidfd = -1;
    c->pid_poll = 0;
}

int gpud_lease_take(gpud *d, gpud_conn *c, gpud_gpu *u, char *msg, size_t n)
{
    char q[160];
    if (u->dirty) /* leased either way: the holder sets its own clocks, SET 0 calls NVML */
        gpud_gpu_reset(u, "lease of a GPU whose last reset failed");
    u->holder = c;
    u->holder_pid = c->pid;
    u->holder_uid = c->uid;
    u->since_unix = (long long)time(NULL);
    u->since_mono = prs_mono_s();
    c->lease = u;
    if (prs_gpu_lock_memory_max(u->g))
        gpud_log(GPUD_LOG_INFO, "msg=memory_clock_not_locked gpu=%s detail=%s", u->uuid,
                 gpud_logq(prs_gpu_errmsg(u->g), q, sizeof q));
    else
        u->mem_locked = 1;
    watch_pid(d, c);
    int rc = gpud_leases_save(d);
    if (rc) {
        unhold(c, u);
        gpud_gpu_reset(u, "lease not recorded"); /* the memory clock it locked */
        gpud_log(GPUD_LOG_ERROR, "msg=lease_refused gpu=%s pid=%ld uid=%u why=lease_file", u->uuid,
                 c->pid, c->uid);
        snprintf(msg, n,
                 "the lease of %s cannot be recorded in %s/leases (see the daemon's log), so a "
                 "restarted daemon could not reset it: not leased",
                 u->uuid, d->state_dir);
        return rc;
    }
    gpud_log(GPUD_LOG_INFO, "msg=lease gpu=%s pid=%ld uid=%u", u->uuid, c->pid, c->uid);
    return 0;
}

int gpud_lease_drop(gpud *d, gpud_conn *c, const char *why)
{
    gpud_gpu *u = c->lease;
    if (!u) return 0;
    char q[96];
    int rc = gpud_gpu_reset(u, why);
    gpud_log(rc ? GPUD_LOG_ERROR : GPUD_LOG_INFO,
             "msg=release gpu=%s pid=%ld uid=%u why=%s held_s=%.3f reset=%s", u->uuid,
             u->holder_pid, u->holder_uid, gpud_logq(why, q, sizeof q),
             prs_mono_s() - u->since_mono, rc ? "failed" : "ok");
    unhold(c, u);
    gpud_leases_save(d);
    return rc;
}

int gpud_leases_reset_dirty(gpud *d, const char *why)
{
    int left = 0;
    for (int i = 0; i < d->ngpus; i++)
        if (d->gpus[i].dirty && !d->gpus[i].holder) left += gpud_gpu_reset(&d->gpus[i], why) != 0;
    return left;
}

static int write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

int gpud_leases_save(gpud *d)
{
    if (!d->state_dir) return 0;
    char path[600], tmp[620], text[2 * GPUD_MAX_GPUS * 160]; /* served GPUs and orphans */
    snprintf(path, sizeof path, "%s/leases", d->state_dir);
    snprintf(tmp, sizeof tmp, "%s/leases.tmp", d->state_dir);
    size_t len = 0;
    for (int i = 0; i < d->ngpus; i++) {
        const gpud_gpu *u = &d->gpus[i];
        if (!u->holder && !u->dirty) continue;
        int m = u->holder ? snprintf(text + len, sizeof text - len, "%s %ld %u %lld\n", u->uuid,
                                     u->holder_pid, u->holder_uid, u->since_unix)
                          : snprintf(text + len, sizeof text - len, "%s 0 0 0\n", u->uuid);
        if (m > 0 && (size_t)m < sizeof text - len) len += (size_t)m;
    }
    for (int i = 0; i < d->norphans; i++) {
        int m = snprintf(text + len, sizeof text - len, "%s\n", d->orphans[i]);
        if (m > 0 && (size_t)m < sizeof text - len) len += (size_t)m;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int ok = fd >= 0 && write_all(fd, text, len) == 0 && fsync(fd) == 0;
    if (fd >= 0 && close(fd) != 0) ok = 0;
    if (ok && rename(tmp, path) == 0) return 0;
    gpud_log(GPUD_LOG_ERROR, "msg=lease_file_not_written path=%s error=\"%s\"", path,
             strerror(errno));
    if (fd >= 0) unlink(tmp);
    return PRS_EIO;
}

/* Parse one lease line "UUID PID UID SINCE"; 0 when well-formed. */
static int parse_lease(char *line, char **uuid, long *pid, unsigned *uid)
{
    char *save, *w[5];
    int n = 0;
    for (char *t = strtok_r(line, " ", &save); t; t = strtok_r(NULL, " ", &save))
        if (n < 5)
            w[n++] = t;
        else
            return -1;
    if (n != 4 || strncmp(w[0], "GPU-", 4) != 0) return -1;
    for (int i = 1; i < 4; i++)
        if (!*w[i] || strlen(w[i]) > 19 || strspn(w[i], "0123456789") != strlen(w[i])) return -1;
    *uuid = w[0];
    *pid = atol(w[1]);
    *uid = (unsigned)strtoul(w[2], NULL, 10);
    return 0;
}

/* Read the whole lease file into buf (LEASE_FILE_MAX + 1); 1: read, 0: missing, -1: bad. */
static int read_lease_file(const char *path, char *buf, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? 0 : -1;
    *len = 0;
    ssize_t r;
    while ((r = read(fd, buf + *len, LEASE_FILE_MAX + 1 - *len)) > 0)
        *len += (size_t)r;
    close(fd);
    if (r < 0 || *len > LEASE_FILE_MAX) return -1;
    buf[*len] = '\0';
    return memchr(buf, '\0', *len) ? -1 : 1;
}

/* Reset the GPUs listed in buf; -1 when a line is malformed (after resetting what parsed). */
static int reset_listed(gpud *d, char *buf)
{
    int bad = 0;
    char *save;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *uuid;
        long pid;
        unsigned uid;
        if (parse_lease(line, &uuid, &pid, &uid)) {
            bad = 1;
            continue;
        }
        gpud_gpu *u = gpud_gpu_find(d, uuid);
        if (!u) { /* kept for a daemon that serves it: it may still be locked */
            gpud_log(GPUD_LOG_WARN, "msg=lease_of_gpu_not_served gpu=%.96s pid=%ld action=kept",
                     uuid, pid);
            if (d->norphans < GPUD_MAX_GPUS)
                snprintf(d->orphans[d->norphans++], sizeof d->orphans[0], "%.96s %ld %u 0", uuid,
                         pid, uid);
            continue;
        }
        u->mem_locked = 1; /* the dead daemon may have locked it */
        gpud_log(GPUD_LOG_WARN, "msg=reset_at_start gpu=%s pid=%ld uid=%u why=%s", u->uuid, pid,
                 uid, pid ? "daemon_died_holding" : "last_reset_failed");
        gpud_gpu_reset(u, "start-up recovery");
    }
    return bad ? -1 : 0;
}

void gpud_leases_recover(gpud *d)
{
    if (!d->state_dir) return;
    char path[600];
    snprintf(path, sizeof path, "%s/leases", d->state_dir);
    char *buf = malloc(LEASE_FILE_MAX + 1);
    size_t len = 0;
    int r = buf ? read_lease_file(path, buf, &len) : -1;
    if (r > 0) r = reset_listed(d, buf);
    if (r < 0) {
        gpud_log(GPUD_LOG_WARN, "msg=lease_file_unreadable path=%s action=reset_every_gpu", path);
        for (int i = 0; i < d->ngpus; i++) {
            d->gpus[i].mem_locked = 1;
            gpud_gpu_reset(&d->gpus[i], "lease file unreadable");
        }
    }
    free(buf);
    gpud_leases_save(d);
}
