/* perseus-gpud protocol v1, one connection: bytes in, reply bytes out (docs/gpud.md, 'Protocol').
 *
 * Requests are '\n'-terminated lines of printable ASCII, tokens separated by single spaces, at
 * most GPUD_LINE_MAX bytes. Every request gets exactly one reply, in order. A malformed request,
 * or any request before HELLO, gets "ERR proto ..." and the connection closes, releasing its
 * lease. The state machine knows nothing of sockets: the server (or a test, or the fuzzer) feeds
 * it whatever bytes arrived and sends what it appended to c->out.
 *
 * Coalescing: a SET whose next request, already received, is another SET is not applied
 * ("superseded"), so a burst of clock changes costs one NVML call: the last one. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpud.h"

#ifndef PRS_VERSION
#define PRS_VERSION "0"
#endif

#define MAX_TOKENS 8
#define REPLY_MAX 4200

gpud_conn *gpud_conn_new(int fd, long pid, unsigned uid, unsigned gid)
{
    gpud_conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fd = fd;
    c->pid = pid;
    c->uid = uid;
    c->gid = gid;
    c->pidfd = -1;
    c->accepted_s = prs_mono_s();
    return c;
}

void gpud_conn_free(gpud *d, gpud_conn *c, const char *why)
{
    if (!c) return;
    gpud_setter_settle(d, c);
    gpud_lease_drop(d, c, why);
    if (c->fd >= 0) close(c->fd);
    free(c->out);
    free(c);
}

static void out_add(gpud_conn *c, const char *s, size_t n)
{
    if (c->dead) return;
    if (c->nout + n > GPUD_OUT_MAX) {
        gpud_log(GPUD_LOG_WARN, "msg=drop_slow_reader pid=%ld uid=%u pending=%zu", c->pid, c->uid,
                 c->nout);
        c->dead = 1;
        return;
    }
    if (c->nout + n > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 1024;
        while (cap < c->nout + n)
            cap *= 2;
        char *grown = realloc(c->out, cap);
        if (!grown) {
            c->dead = 1;
            return;
        }
        c->out = grown;
        c->out_cap = cap;
    }
    memcpy(c->out + c->nout, s, n);
    c->nout += n;
}

static void reply(gpud_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reply(gpud_conn *c, const char *fmt, ...)
{
    char line[REPLY_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    out_add(c, line, (size_t)n);
}

void gpud_conn_fail(gpud *d, gpud_conn *c, const char *kind, const char *msg)
{
    char q[160];
    reply(c, "ERR %s %s", kind, msg);
    gpud_log(GPUD_LOG_INFO, "msg=close_connection pid=%ld uid=%u error=%s detail=%s", c->pid,
             c->uid, kind, gpud_logq(msg, q, sizeof q));
    c->closing = 1;
    gpud_lease_drop(d, c, kind);
}

/* Unsigned decimal, digits only, at most max. */
static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    size_t len = strlen(s);
    if (len == 0 || len > 19 || strspn(s, "0123456789") != len) return -1;
    uint64_t v = 0;
    for (; *s; s++)
        v = v * 10 + (uint64_t)(*s - '0');
    if (v > max) return -1;
    *out = v;
    return 0;
}

static void do_hello(gpud *d, gpud_conn *c, char **tok, int later)
{
    uint64_t v;
    if (parse_u64(tok[1], UINT64_MAX, &v)) {
        gpud_conn_fail(d, c, "proto", "HELLO takes a version number");
        return;
    }
    if (c->hello) {
        gpud_conn_fail(d, c, "proto", "HELLO twice");
        return;
    }
    if (v != GPUD_PROTO_VERSION) {
        reply(c, "ERR version this daemon speaks protocol %d, not %s", GPUD_PROTO_VERSION, tok[1]);
        c->closing = 1;
        return;
    }
    c->hello = 1;
    reply(c, "OK perseus-gpud %d %s", GPUD_PROTO_VERSION, PRS_VERSION);
}

static void fmt_opt_u64(char *buf, size_t n, int ok, unsigned long long v)
{
    if (ok)
        snprintf(buf, n, "%llu", v);
    else
        snprintf(buf, n, "-");
}

/* u's SM clock, energy counter and power as reply tokens ("-" where the GPU cannot give one).
 * Each value is read before it is formatted: as arguments of one call, the order in which a
 * value and the read that fills it are evaluated is unspecified. */
typedef struct readings {
    char sm[24], energy[24], power[24];
} readings;

static void read_gpu(gpud *d, gpud_gpu *u, readings *r)
{
    int f = 0;
    uint64_t e = 0;
    unsigned p = 0;
    int ok = prs_gpu_sm_clock_now(u->g, &f) == 0;
    fmt_opt_u64(r->sm, sizeof r->sm, ok, (unsigned long long)f);
    ok = gpud_energy_get(d, u, &e) == 0;
    fmt_opt_u64(r->energy, sizeof r->energy, ok, e);
    ok = prs_gpu_power_mw(u->g, &p) == 0;
    fmt_opt_u64(r->power, sizeof r->power, ok, p);
}

static void do_list(gpud *d, gpud_conn *c, char **tok, int later)
{
    for (int i = 0; i < d->ngpus; i++) {
        gpud_gpu *u = &d->gpus[i];
        char name[100];
        readings r;
        read_gpu(d, u, &r);
        reply(c, "GPU %d %s %s %s %d %s %s %ld %s", u->index, u->uuid, u->pci, r.sm, u->locked_mhz,
              r.energy, r.power, u->holder ? u->holder_pid : 0L,
              gpud_printable(prs_gpu_name(u->g), name, sizeof name));
    }
    reply(c, "OK %d", d->ngpus);
}

static void do_lease(gpud *d, gpud_conn *c, char **tok, int later)
{
    char msg[512];
    if (c->lease) {
        reply(c, "ERR state this connection already holds %s (RELEASE it first)", c->lease->uuid);
        return;
    }
    gpud_gpu *u = gpud_gpu_find(d, tok[1]);
    if (!u) {
        reply(c, "ERR nogpu no GPU '%s' on this node (LIST shows them)", tok[1]);
        return;
    }
    if (!gpud_lease_allowed(d, c, u, msg, sizeof msg)) {
        gpud_log(GPUD_LOG_WARN, "msg=lease_denied gpu=%s pid=%ld uid=%u", u->uuid, c->pid, c->uid);
        reply(c, "ERR denied %s", msg);
        return;
    }
    if (u->holder) {
        reply(c, "ERR busy %s is leased by pid %ld uid %u", u->uuid, u->holder_pid, u->holder_uid);
        return;
    }
    if (gpud_lease_take(d, c, u, msg, sizeof msg)) {
        reply(c, "ERR io %s", msg);
        return;
    }
    reply(c, "OK %s %d %d", u->uuid, u->nclocks, u->clocks[0]);
}

static int need_lease(gpud_conn *c)
{
    if (c->lease) return 1;
    reply(c, "ERR state no lease");
    return 0;
}

static void do_clocks(gpud *d, gpud_conn *c, char **tok, int later)
{
    if (!need_lease(c)) return;
    char line[REPLY_MAX - 8];
    size_t len = (size_t)snprintf(line, sizeof line, "OK");
    for (int i = 0; i < c->lease->nclocks && len + 12 < sizeof line; i++)
        len += (size_t)snprintf(line + len, sizeof line - len, " %d", c->lease->clocks[i]);
    reply(c, "%s", line);
}

static void do_read(gpud *d, gpud_conn *c, char **tok, int later)
{
    if (!need_lease(c)) return;
    readings r;
    read_gpu(d, c->lease, &r);
    reply(c, "OK %s %s %s %d", r.energy, r.power, r.sm, c->lease->locked_mhz);
}

static void do_release(gpud *d, gpud_conn *c, char **tok, int later)
{
    if (!need_lease(c)) return;
    gpud_gpu *u = c->lease;
    if (gpud_lease_drop(d, c, "RELEASE") == 0) {
        reply(c, "OK");
        return;
    }
    char msg[300];
    gpud_printable(u->reset_msg, msg, sizeof msg);
    reply(c, "ERR reset released, but %s could not be reset to its default clocks (%s); %s",
          u->uuid, msg[0] ? msg : "failed",
          d->state_dir ? "the daemon tries again at its next LEASE, at exit and at start-up"
                       : "the daemon tries again as it exits");
}

/* Apply mhz (0: reset) on c's GPU: by its setter, which answers later, else now. */
static void apply_set(gpud *d, gpud_conn *c, uint64_t seq, int mhz)
{
    gpud_gpu *u = c->lease;
    gpud_apply_req r = {.g = u->g,
                        .uuid = u->uuid,
                        .seq = seq,
                        .mhz = mhz,
                        .locked_mhz = u->locked_mhz,
                        .recv_ns = c->recv_ns};
    if (gpud_setter_submit(d, c, &r) == 0) return;
    gpud_apply a;
    gpud_apply_clock(&r, &a);
    u->locked_mhz = a.locked_mhz;
    reply(c, "%s", a.line);
}

static void do_set(gpud *d, gpud_conn *c, char **tok, int later)
{
    uint64_t seq, mhz;
    if (parse_u64(tok[1], INT64_MAX, &seq) || parse_u64(tok[2], 100000, &mhz)) {
        gpud_conn_fail(d, c, "proto", "SET takes a sequence number (< 2^63) and a clock in MHz");
        return;
    }
    if (!need_lease(c)) return;
    gpud_gpu *u = c->lease;
    if (mhz && !gpud_gpu_supports(u, (int)mhz)) {
        reply(c,
              "ACK %llu refused %d - 0 -1 %d MHz is not a supported SM clock of %s (CLOCKS lists "
              "them)",
              (unsigned long long)seq, u->locked_mhz, (int)mhz, u->uuid);
        return;
    }
    if (later)
        reply(c, "ACK %llu superseded %d - 0", (unsigned long long)seq, u->locked_mhz);
    else if ((int)mhz == u->locked_mhz)
        reply(c, "ACK %llu same %d - 0", (unsigned long long)seq, u->locked_mhz);
    else
        apply_set(d, c, seq, (int)mhz);
}

typedef void (*handler)(gpud *, gpud_conn *, char **, int);

static const struct {
    const char *name;
    int ntok;
    handler fn;
} requests[] = {
    {"HELLO", 2, do_hello},     {"LIST", 1, do_list}, {"LEASE", 2, do_lease},
    {"CLOCKS", 1, do_clocks},   {"SET", 3, do_set},   {"READ", 1, do_read},
    {"RELEASE", 1, do_release},
};

/* Split at single spaces; -1 on an empty token or too many. */
static int tokenize(char *line, char **tok)
{
    int n = 0;
    for (char *s = line;;) {
        char *sp = strchr(s, ' ');
        if (sp) *sp = '\0';
        if (!*s || n == MAX_TOKENS) return -1;
        tok[n++] = s;
        if (!sp) return n;
        s = sp + 1;
    }
}

static void handle_line(gpud *d, gpud_conn *c, char *line, size_t len, int later)
{
    char msg[96], *tok[MAX_TOKENS];
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)line[i] < 0x20 || (unsigned char)line[i] > 0x7e) {
            snprintf(msg, sizeof msg, "non-printable byte 0x%02x at column %zu",
                     (unsigned char)line[i], i + 1);
            gpud_conn_fail(d, c, "proto", msg);
            return;
        }
    int n = tokenize(line, tok);
    if (n < 0) {
        gpud_conn_fail(d, c, "proto", "expected words separated by single spaces");
        return;
    }
    if (!c->hello && strcmp(tok[0], "HELLO") != 0) {
        gpud_conn_fail(d, c, "proto", "HELLO 1 must be the first request");
        return;
    }
    for (size_t i = 0; i < sizeof requests / sizeof requests[0]; i++) {
        if (strcmp(tok[0], requests[i].name) != 0) continue;
        if (n != requests[i].ntok) {
            snprintf(msg, sizeof msg, "%s takes %d argument(s)", requests[i].name,
                     requests[i].ntok - 1);
            gpud_conn_fail(d, c, "proto", msg);
            return;
        }
        requests[i].fn(d, c, tok, later);
        return;
    }
    snprintf(msg, sizeof msg, "unknown request '%.40s'", tok[0]);
    gpud_conn_fail(d, c, "proto", msg);
}

/* 1 when the next request, already received in buf[0..n), is a SET (a burst of SETs). */
static int later_set(const char *buf, size_t n)
{
    const char *nl = memchr(buf, '\n', n);
    return nl && nl - buf >= 4 && memcmp(buf, "SET ", 4) == 0;
}

static void process_lines(gpud *d, gpud_conn *c)
{
    size_t pos = 0;
    while (!c->closing && !c->dead && !c->setting) {
        const char *start = c->in + pos;
        const char *nl = memchr(start, '\n', c->nin - pos);
        size_t len = nl ? (size_t)(nl - start) : c->nin - pos;
        if (len > GPUD_LINE_MAX) {
            gpud_conn_fail(d, c, "proto", "request line longer than 255 bytes");
            break;
        }
        if (!nl) break;
        char line[GPUD_LINE_MAX + 1];
        memcpy(line, start, len);
        line[len] = '\0';
        pos += len + 1;
        handle_line(d, c, line, len, later_set(c->in + pos, c->nin - pos));
    }
    if (c->closing || c->dead) pos = c->nin;
    if (pos == 0) return;
    memmove(c->in, c->in + pos, c->nin - pos);
    c->nin -= pos;
}

void gpud_conn_feed(gpud *d, gpud_conn *c, const char *buf, size_t n)
{
    c->recv_ns = prs_mono_ns();
    while (n > 0 && !c->closing && !c->dead) {
        size_t room = GPUD_IN_MAX - c->nin, take = n < room ? n : room;
        if (take == 0) break; /* a SET in progress holds a full buffer: the server reads no more */
        memcpy(c->in + c->nin, buf, take);
        c->nin += take;
        buf += take;
        n -= take;
        process_lines(d, c);
    }
}

void gpud_conn_answer(gpud *d, gpud_conn *c, const char *line)
{
    out_add(c, line, strlen(line));
    out_add(c, "\n", 1);
    process_lines(d, c);
}
