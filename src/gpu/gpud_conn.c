/* A client's connection to perseus-gpud (gpud_conn.h; the protocol is in docs/gpud.md).
 *
 * Sending is the caller's (the training thread, or the driver's thread that runs stream host
 * functions), under a mutex nobody else holds long: format one line, one non-blocking send with
 * MSG_NOSIGNAL. Receiving is the reader thread's: it splits the daemon's lines, turns each ACK
 * into state (atomics for the lock-free readers, and a condition variable for the waiters), and
 * hands any other line (the answer to RELEASE at close) to whoever waits for it. The set-up
 * before the reader starts reads the socket directly. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perseus/clock.h"
#include "gpud_conn.h"

#define LINE_MAX_IN 8192 /* longest line we accept from the daemon */
#define OUT_CAP 4096     /* requests waiting for room in the socket */
/* Answers kept per request, so that a caller that did not wait learns later what its request
 * left in effect (a plan's clock changes of the iterations in flight fit many times over). */
#define ANSWERS 4096

struct prs__gpu_conn {
    int fd;
    pid_t helper;
    /* sending (send_mu) */
    pthread_mutex_t send_mu;
    char out[OUT_CAP];
    size_t out_len;
    atomic_long seq; /* last request sent or buffered */
    /* receiving: the reader thread, or the caller before it starts */
    char in[LINE_MAX_IN];
    size_t in_len;
    pthread_t reader;
    int reader_started;
    /* answers (mu) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long acked;
    prs__gpu_ack_status last_status;
    char last_msg[200];
    long replies; /* non-ACK lines seen after start */
    char reply[256];
    struct {
        long seq;
        int in_effect; /* -1: unknown (superseded) */
        double at_s;   /* prs_mono_s when it arrived: the change took effect no later */
    } answers[ANSWERS];
    atomic_long acked_a;
    atomic_int in_effect;
    atomic_long failures;
    atomic_long apply_ns;
    atomic_int lost;
};

static int conn_alloc(int fd, pid_t helper, prs__gpu_conn **out, prs_error *err)
{
    prs__gpu_conn *c = calloc(1, sizeof *c);
    if (!c) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    c->fd = fd;
    c->helper = helper;
    pthread_mutex_init(&c->send_mu, NULL);
    if (prs_sync_init_mono(&c->mu, &c->cv)) {
        pthread_mutex_destroy(&c->send_mu);
        free(c);
        return prs_error_set(err, PRS_ENOMEM, "cannot make a condition variable");
    }
    *out = c;
    return 0;
}

int prs__gpu_conn_connect(const char *path, prs__gpu_conn **out, prs_error *err)
{
    *out = NULL;
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    if (!path || !*path || strlen(path) >= sizeof a.sun_path)
        return prs_error_set(err, PRS_EINVAL,
                             "perseus-gpud socket path '%.80s' is empty or too long",
                             path ? path : "");
    memcpy(a.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return prs_error_set(err, PRS_EIO, "socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        int e = errno;
        close(fd);
        return prs_error_set(err, PRS_EGPU,
                             "cannot reach perseus-gpud at %s: %s (is it running? systemctl start "
                             "perseus-gpud)",
                             path, strerror(e));
    }
    int rc = conn_alloc(fd, 0, out, err);
    if (rc) close(fd);
    return rc;
}

int prs__gpu_conn_adopt(int fd, pid_t helper_pid, prs__gpu_conn **out, prs_error *err)
{
    *out = NULL;
    return conn_alloc(fd, helper_pid, out, err);
}

/* ---- set-up: synchronous lines ---- */

static int send_all(prs__gpu_conn *c, const char *s, size_t n, double timeout_s)
{
    double t0 = prs_mono_s();
    while (n > 0) {
        ssize_t w = send(c->fd, s, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            s += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR) return PRS_EGPU;
        double left = timeout_s - (prs_mono_s() - t0);
        if (left <= 0) return PRS_EGPU;
        struct pollfd p = {c->fd, POLLOUT, 0};
        poll(&p, 1, (int)(left * 1000) + 1);
    }
    return 0;
}

/* One line into buf (without '\n'). 0, or PRS_EGPU on timeout, close or an overlong line. */
static int read_line(prs__gpu_conn *c, char *buf, size_t n, double timeout_s)
{
    double t0 = prs_mono_s();
    for (;;) {
        char *nl = memchr(c->in, '\n', c->in_len);
        if (nl) {
            size_t len = (size_t)(nl - c->in);
            snprintf(buf, n, "%.*s", (int)len, c->in);
            memmove(c->in, nl + 1, c->in_len - len - 1);
            c->in_len -= len + 1;
            return 0;
        }
        if (c->in_len == sizeof c->in) return PRS_EGPU;
        double left = timeout_s - (prs_mono_s() - t0);
        if (left <= 0) return PRS_EGPU;
        struct pollfd p = {c->fd, POLLIN, 0};
        int pr = poll(&p, 1, (int)(left * 1000) + 1);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) continue;
        ssize_t got = recv(c->fd, c->in + c->in_len, sizeof c->in - c->in_len, 0);
        if (got == 0) return PRS_EGPU;
        if (got < 0 && errno != EINTR && errno != EAGAIN) return PRS_EGPU;
        if (got > 0) c->in_len += (size_t)got;
    }
}

static int request(prs__gpu_conn *c, const char *line, char *reply, size_t n, double timeout_s,
                   prs_error *err)
{
    if (send_all(c, line, strlen(line), timeout_s))
        return prs_error_set(err, PRS_EGPU, "perseus-gpud: cannot send (connection closed)");
    if (read_line(c, reply, n, timeout_s))
        return prs_error_set(err, PRS_EGPU,
                             "perseus-gpud did not answer '%.*s' (closed or timed out)",
                             (int)strcspn(line, "\n"), line);
    return 0;
}

int prs__gpu_conn_lease(prs__gpu_conn *c, const char *uuid, double timeout_s, prs_error *err)
{
    char reply[512], line[160];
    int rc = request(c, "HELLO 1\n", reply, sizeof reply, timeout_s, err);
    if (rc) return rc;
    if (strncmp(reply, "OK perseus-gpud 1", 17) != 0)
        return prs_error_set(err, PRS_EGPU, "perseus-gpud: unexpected greeting '%.200s'", reply);
    if (!uuid || !*uuid || strlen(uuid) > 100 || strpbrk(uuid, " \n"))
        return prs_error_set(err, PRS_EINVAL, "perseus-gpud: bad GPU id '%.100s'",
                             uuid ? uuid : "");
    snprintf(line, sizeof line, "LEASE %s\n", uuid);
    rc = request(c, line, reply, sizeof reply, timeout_s, err);
    if (rc) return rc;
    if (strncmp(reply, "OK ", 3) != 0)
        return prs_error_set(err, PRS_EGPU, "perseus-gpud refused the lease of GPU %s: %.300s",
                             uuid, strncmp(reply, "ERR ", 4) == 0 ? reply + 4 : reply);
    return 0;
}

/* Free a connection whose reader never started (its fd already closed or handed over). */
static void conn_free(prs__gpu_conn *c)
{
    pthread_mutex_destroy(&c->send_mu);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

int prs__gpu_conn_lost(const prs__gpu_conn *c)
{
    return atomic_load(&c->lost);
}

int prs__gpu_conn_reconnect(prs__gpu_conn *c, const char *path, const char *uuid, double timeout_s,
                            prs_error *err)
{
    if (!atomic_load(&c->lost) || c->helper > 0)
        return prs_error_set(err, PRS_EINVAL,
                             "perseus-gpud: only a lost node connection reconnects");
    prs__gpu_conn *fresh = NULL;
    int rc = prs__gpu_conn_connect(path, &fresh, err);
    if (rc || !fresh) return rc ? rc : PRS_ENOMEM;
    if ((rc = prs__gpu_conn_lease(fresh, uuid, timeout_s, err)) != 0) {
        close(fresh->fd);
        conn_free(fresh);
        return rc;
    }
    if (c->reader_started) pthread_join(c->reader, NULL); /* it ended: that is what lost says */
    c->reader_started = 0;
    pthread_mutex_lock(&c->send_mu);
    close(c->fd);
    c->fd = fresh->fd;
    memcpy(c->in, fresh->in, fresh->in_len);
    c->in_len = fresh->in_len;
    c->out_len = 0; /* requests for the old lease: the new one starts at the default clocks */
    pthread_mutex_lock(&c->mu);
    c->acked = atomic_load(&c->seq);
    atomic_store(&c->acked_a, c->acked);
    atomic_store(&c->in_effect, 0);
    atomic_store(&c->lost, 0);
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_unlock(&c->send_mu);
    conn_free(fresh);
    rc = prs__gpu_conn_start(c, err);
    if (rc) atomic_store(&c->lost, 1);
    return rc;
}

/* ---- the reader thread ---- */

static prs__gpu_ack_status status_of(const char *w)
{
    static const struct {
        const char *word;
        prs__gpu_ack_status s;
    } map[] = {{"ok", PRS__GPU_ACK_OK},
               {"same", PRS__GPU_ACK_SAME},
               {"superseded", PRS__GPU_ACK_SUPERSEDED},
               {"refused", PRS__GPU_ACK_REFUSED},
               {"mismatch", PRS__GPU_ACK_MISMATCH}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(w, map[i].word) == 0) return map[i].s;
    return PRS__GPU_ACK_NONE;
}

/* "ACK seq status in_effect actual apply_ns [rc message...]" */
static void on_ack(prs__gpu_conn *c, char *line)
{
    char status[16] = "", actual[16] = "";
    long seq = 0, ns = 0;
    int in_effect = 0, used = 0;
    if (sscanf(line, "ACK %ld %15s %d %15s %ld %n", &seq, status, &in_effect, actual, &ns, &used) <
        5)
        return;
    prs__gpu_ack_status s = status_of(status);
    if (s == PRS__GPU_ACK_NONE) return;
    if (s == PRS__GPU_ACK_REFUSED || s == PRS__GPU_ACK_MISMATCH) atomic_fetch_add(&c->failures, 1);
    if (s == PRS__GPU_ACK_OK) atomic_store(&c->apply_ns, ns);
    if (s != PRS__GPU_ACK_SUPERSEDED) atomic_store(&c->in_effect, in_effect);
    pthread_mutex_lock(&c->mu);
    if (seq > c->acked) c->acked = seq;
    if (seq > 0) {
        c->answers[seq % ANSWERS].seq = seq;
        c->answers[seq % ANSWERS].in_effect = s == PRS__GPU_ACK_SUPERSEDED ? -1 : in_effect;
        c->answers[seq % ANSWERS].at_s = prs_mono_s();
    }
    c->last_status = s;
    snprintf(c->last_msg, sizeof c->last_msg, "%.199s", used > 0 ? line + used : status);
    atomic_store(&c->acked_a, c->acked);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Answers come in order, one per request: an ERR while clock requests are unanswered refuses
 * the oldest of them (the daemon refuses a clock it does not support that way). */
static int on_err(prs__gpu_conn *c, const char *line)
{
    pthread_mutex_lock(&c->mu);
    int ours = strncmp(line, "ERR ", 4) == 0 && c->acked < atomic_load(&c->seq);
    if (ours) {
        c->acked++;
        c->answers[c->acked % ANSWERS].seq = c->acked; /* refused: the clock stays */
        c->answers[c->acked % ANSWERS].in_effect = atomic_load(&c->in_effect);
        c->answers[c->acked % ANSWERS].at_s = prs_mono_s();
        c->last_status = PRS__GPU_ACK_REFUSED;
        snprintf(c->last_msg, sizeof c->last_msg, "%.199s", line + 4);
        atomic_fetch_add(&c->failures, 1);
        atomic_store(&c->acked_a, c->acked);
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return ours;
}

static void on_line(prs__gpu_conn *c, char *line)
{
    if (strncmp(line, "ACK ", 4) == 0) {
        on_ack(c, line);
        return;
    }
    if (on_err(c, line)) return;
    pthread_mutex_lock(&c->mu);
    snprintf(c->reply, sizeof c->reply, "%.255s", line);
    c->replies++;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void mark_lost(prs__gpu_conn *c)
{
    pthread_mutex_lock(&c->mu);
    long unanswered = atomic_load(&c->seq) - c->acked;
    if (unanswered > 0) atomic_fetch_add(&c->failures, unanswered);
    atomic_store(&c->lost, 1);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void *reader_main(void *arg)
{
    prs__gpu_conn *c = arg;
    for (;;) {
        char *nl;
        while ((nl = memchr(c->in, '\n', c->in_len))) {
            *nl = '\0';
            on_line(c, c->in);
            size_t used = (size_t)(nl - c->in) + 1;
            memmove(c->in, nl + 1, c->in_len - used);
            c->in_len -= used;
        }
        if (c->in_len == sizeof c->in) break; /* an overlong line: not the daemon we know */
        ssize_t got = recv(c->fd, c->in + c->in_len, sizeof c->in - c->in_len, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        c->in_len += (size_t)got;
    }
    mark_lost(c);
    return NULL;
}

int prs__gpu_conn_start(prs__gpu_conn *c, prs_error *err)
{
    if (pthread_create(&c->reader, NULL, reader_main, c) != 0)
        return prs_error_set(err, PRS_ENOMEM, "perseus-gpud: cannot start the reader thread");
    c->reader_started = 1;
    return 0;
}

/* ---- requests ---- */

/* Send what waits in out, without blocking. Under send_mu. 0, or PRS_EGPU (connection gone). */
static int flush_out(prs__gpu_conn *c)
{
    while (c->out_len > 0) {
        ssize_t w = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) return 0;
        if (w <= 0) return PRS_EGPU;
        memmove(c->out, c->out + w, c->out_len - (size_t)w);
        c->out_len -= (size_t)w;
    }
    return 0;
}

/* Keep line in out. Whole requests still waiting are dropped first when there is no room: they
 * never reached the daemon and the newest one replaces them. */
static void keep(prs__gpu_conn *c, const char *line, size_t n)
{
    if (c->out_len + n > sizeof c->out) {
        char *first_nl = memchr(c->out, '\n', c->out_len);
        c->out_len = first_nl ? (size_t)(first_nl - c->out) + 1 : 0;
    }
    memcpy(c->out + c->out_len, line, n);
    c->out_len += n;
}

long prs__gpu_conn_set(prs__gpu_conn *c, int mhz)
{
    char line[48];
    pthread_mutex_lock(&c->send_mu);
    if (atomic_load(&c->lost)) {
        pthread_mutex_unlock(&c->send_mu);
        atomic_fetch_add(&c->failures, 1);
        return PRS_EGPU;
    }
    long seq = atomic_load(&c->seq) + 1;
    int n = snprintf(line, sizeof line, "SET %ld %d\n", seq, mhz);
    atomic_store(&c->seq, seq);
    size_t off = 0;
    int rc = flush_out(c);
    if (rc == 0 && c->out_len == 0) {
        ssize_t w = send(c->fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0)
            off = (size_t)w;
        else if (errno != EAGAIN && errno != EINTR)
            rc = PRS_EGPU;
    }
    if (rc == 0 && off < (size_t)n) keep(c, line + off, (size_t)n - off);
    pthread_mutex_unlock(&c->send_mu);
    if (rc) {
        shutdown(c->fd, SHUT_RD); /* the reader sees the end and counts what is unanswered */
        return PRS_EGPU;
    }
    return seq;
}

static void deadline(struct timespec *ts, double timeout_s)
{
    *ts = prs_mono_timespec(prs_mono_s() + timeout_s); /* the condition variable's clock */
}

/* Send what is buffered, waiting for room (at most until timeout_s). */
static int flush_wait(prs__gpu_conn *c, double timeout_s)
{
    double t0 = prs_mono_s();
    pthread_mutex_lock(&c->send_mu);
    int rc = flush_out(c);
    while (rc == 0 && c->out_len > 0 && prs_mono_s() - t0 < timeout_s) {
        pthread_mutex_unlock(&c->send_mu);
        struct pollfd p = {c->fd, POLLOUT, 0};
        poll(&p, 1, 10);
        pthread_mutex_lock(&c->send_mu);
        rc = flush_out(c);
    }
    if (rc == 0 && c->out_len > 0) rc = PRS_EGPU;
    pthread_mutex_unlock(&c->send_mu);
    return rc;
}

prs__gpu_ack_status prs__gpu_conn_wait(prs__gpu_conn *c, long seq, double timeout_s, char *msg,
                                       size_t n)
{
    if (msg && n) msg[0] = '\0';
    if (flush_wait(c, timeout_s) && !atomic_load(&c->lost)) {
        if (msg && n) snprintf(msg, n, "perseus-gpud does not take requests");
        return PRS__GPU_ACK_NONE;
    }
    struct timespec ts;
    deadline(&ts, timeout_s);
    pthread_mutex_lock(&c->mu);
    while (c->acked < seq && !atomic_load(&c->lost))
        if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) == ETIMEDOUT) break;
    prs__gpu_ack_status s = c->acked >= seq         ? c->last_status
                            : atomic_load(&c->lost) ? PRS__GPU_ACK_LOST
                                                    : PRS__GPU_ACK_NONE;
    if (msg && n) {
        const char *why = s == PRS__GPU_ACK_LOST   ? "the connection to perseus-gpud is gone"
                          : s == PRS__GPU_ACK_NONE ? "perseus-gpud did not answer in time"
                                                   : c->last_msg;
        snprintf(msg, n, "%s", why);
    }
    pthread_mutex_unlock(&c->mu);
    return s;
}

long prs__gpu_conn_last_seq(const prs__gpu_conn *c)
{
    return atomic_load(&c->seq);
}

int prs__gpu_conn_answer(prs__gpu_conn *c, long seq, int *in_effect, double *at_s)
{
    pthread_mutex_lock(&c->mu);
    int answered = 1;
    *in_effect = -1;
    if (at_s) *at_s = NAN;
    if (c->answers[seq % ANSWERS].seq == seq) {
        *in_effect = c->answers[seq % ANSWERS].in_effect;
        if (at_s) *at_s = c->answers[seq % ANSWERS].at_s;
    } else if (seq > c->acked && !atomic_load(&c->lost))
        answered = 0;
    pthread_mutex_unlock(&c->mu);
    return answered;
}

int prs__gpu_conn_confirmed(const prs__gpu_conn *c)
{
    if (atomic_load(&c->lost)) return -1;
    if (atomic_load(&c->acked_a) < atomic_load(&c->seq)) return -1;
    return atomic_load(&c->in_effect);
}

long prs__gpu_conn_failures(const prs__gpu_conn *c)
{
    return atomic_load(&c->failures);
}

long prs__gpu_conn_apply_ns(const prs__gpu_conn *c)
{
    return atomic_load(&c->apply_ns);
}

/* RELEASE and wait for its answer, so the clocks are reset when close returns. */
static void release(prs__gpu_conn *c, double timeout_s)
{
    pthread_mutex_lock(&c->mu);
    long before = c->replies;
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_lock(&c->send_mu);
    int rc = flush_out(c);
    pthread_mutex_unlock(&c->send_mu);
    if (rc || send_all(c, "RELEASE\n", 8, timeout_s)) return;
    struct timespec ts;
    deadline(&ts, timeout_s);
    pthread_mutex_lock(&c->mu);
    while (c->replies == before && !atomic_load(&c->lost))
        if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) == ETIMEDOUT) break;
    pthread_mutex_unlock(&c->mu);
}

static void reap(pid_t pid, double timeout_s)
{
    double t0 = prs_mono_s();
    for (;;) {
        pid_t r = waitpid(pid, NULL, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR)) return;
        if (prs_mono_s() - t0 > timeout_s) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            return;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

void prs__gpu_conn_close(prs__gpu_conn *c, double timeout_s)
{
    if (!c) return;
    if (c->reader_started && !atomic_load(&c->lost)) release(c, timeout_s);
    shutdown(c->fd, SHUT_RDWR);
    if (c->reader_started) pthread_join(c->reader, NULL);
    close(c->fd);
    if (c->helper > 0) reap(c->helper, timeout_s); /* it resets at the end of the socket */
    pthread_mutex_destroy(&c->send_mu);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}
