/* perseus-gpud internals (docs/gpud.md): the per-node daemon that alone changes GPU clocks and
 * lends GPUs to unprivileged trainers over a Unix socket.
 *
 * One concept per file:
 *   log.c     logfmt lines on stderr, with a level
 *   config.c  the access config (who may lease which GPUs) and a user's groups
 *   gpus.c    the device table: identity, supported clocks, the clock the daemon locked, reset
 *   lease.c   leases: access check, taking and dropping (reset), the lease file, start-up recovery
 *   energy.c  the energy readings LIST and READ give, taken by a thread of their own
 *   apply.c   one SET applied to a GPU (lock, read-back) and its ACK line
 *   setter.c  the threads that apply each GPU's SETs off the loop, one per GPU
 *   conn.c    the protocol state machine of one connection, fed bytes, producing reply bytes
 *   server.c  sockets, the poll() loop, peer credentials, bounds, timeouts, signals, pid watches
 *   main.c    options and modes (system daemon, private mode, --list)
 * Every function returns 0 or a negative PRS_E* code (perseus/error.h) unless it says otherwise.
 * One poll() loop does everything but the energy readings (energy.c) and the clock changes
 * (setter.c), which threads of their own do and hand over under a lock. */
#ifndef PRS_GPUD_H
#define PRS_GPUD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "perseus/clock.h" /* prs_mono_s, prs_mono_ns: the daemon times itself with them */
#include "perseus/error.h"
#include "perseus/gpu.h"

#define GPUD_PROTO_VERSION 1
#define GPUD_MAX_GPUS 64
#define GPUD_MAX_CLOCKS 512
#define GPUD_MAX_CONNS 256
#define GPUD_MAX_PER_UID 64
#define GPUD_LINE_MAX 255 /* request line, without its '\n' */
#define GPUD_IN_MAX 4096  /* bytes read ahead per connection */
/* Pending reply bytes before the connection is dropped. */
#define GPUD_OUT_MAX ((size_t)64 * 1024)
/* Pending reply bytes above which a connection's requests are not read until the client reads
 * its answers: one read of GPUD_IN_MAX bytes of clock requests is answered in far less than the
 * gap up to GPUD_OUT_MAX, so a client that sends bursts and reads slowly is slowed, not dropped. */
#define GPUD_OUT_HIGH ((size_t)16 * 1024)
#define GPUD_HELLO_TIMEOUT_S 5.0 /* a connection must say HELLO within this */
#define GPUD_PID_POLL_S 0.2      /* kill(pid, 0) period where pidfd_open is missing */
#define GPUD_CONF_LINE_MAX 4096  /* config line, bytes */
#define GPUD_CONF_RULES_MAX 4096 /* config rules */
#define GPUD_DEFAULT_SOCKET "/run/perseus/gpud.sock"
#define GPUD_DEFAULT_CONFIG "/etc/perseus/gpud.conf"
#define GPUD_DEFAULT_STATE_DIR "/run/perseus"
#define GPUD_ENERGY_PERIOD_S 1.0  /* energy readings while LIST or READ are asked for */
#define GPUD_ENERGY_LINGER_S 60.0 /* ... and for this long after the last time */
#define GPUD_ENERGY_IDLE_S 10.0   /* energy readings otherwise */

/* ---- log.c ---- */

typedef enum gpud_log_level {
    GPUD_LOG_ERROR = 0,
    GPUD_LOG_WARN = 1,
    GPUD_LOG_INFO = 2,
    GPUD_LOG_DEBUG = 3
} gpud_log_level;

/* Log lines go to fd (-1: nowhere) when at or below level. Defaults: stderr, info. */
void gpud_log_setup(int fd, gpud_log_level level);
/* "error", "warn", "info" or "debug"; PRS_EINVAL otherwise. */
int gpud_log_parse_level(const char *s, gpud_log_level *out);
/* One line "ts=... level=L " followed by fmt (key=value pairs; the caller starts with msg=). */
void gpud_log(gpud_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s as a logfmt value: quoted when it has spaces or quotes (quotes become '). Returns out. */
const char *gpud_logq(const char *s, char *out, size_t n);

/* ---- config.c ---- */

typedef struct gpud_rule {
    int is_group; /* 0: matches a uid; 1: a gid */
    unsigned id;
    char *gpus; /* comma-separated indices or UUIDs; NULL: all */
    int line;
} gpud_rule;

typedef struct gpud_config {
    int present; /* 0: no config file: only root may lease */
    char path[512];
    gpud_rule *rules;
    int n;
} gpud_config;

/* Parse a config from f; name is used in messages ("NAME:LINE: ..."). On failure *out is empty. */
int gpud_config_read(FILE *f, const char *name, gpud_config *out, prs_error *err);
/* Load path; a missing file gives an empty config with present = 0 (only root). */
int gpud_config_load(const char *path, gpud_config *out, prs_error *err);
void gpud_config_free(gpud_config *c);
/* 1 when uid (whose groups are gids[0..ngids)) may lease the GPU (index, uuid); uid 0 always. */
int gpud_config_allows(const gpud_config *c, unsigned uid, const unsigned *gids, int ngids,
                       int gpu_index, const char *uuid);
/* gid and the supplementary groups of the user uid (getgrouplist); returns the count (>= 1). */
int gpud_user_groups(unsigned uid, unsigned gid, unsigned *gids, int cap);

/* ---- gpus.c ---- */

struct gpud_conn;

typedef struct gpud_gpu {
    prs_gpu *g;
    int index;
    char uuid[96];
    char pci[32]; /* "-" when unknown */
    int clocks[GPUD_MAX_CLOCKS];
    int nclocks;
    int locked_mhz;           /* the SM clock the daemon locked (0: default; -1: unknown, as
                               * after a failed reset) */
    int dirty;                /* the last reset failed: the clocks may still be locked, so the
                               * GPU stays in the lease file and is reset again at LEASE and at
                               * exit */
    int mem_locked;           /* the memory clock may be locked by us (a lease locked it, or a
                               * dead daemon may have): its reset's failure counts */
    char reset_msg[160];      /* why the last reset failed (the first failure's words) */
    struct gpud_conn *holder; /* NULL: free */
    long holder_pid;
    unsigned holder_uid;
    long long since_unix;
    double since_mono;
} gpud_gpu;

typedef struct gpud gpud;

/* Add an open GPU (taken over, closed by gpud_gpus_close) as index. */
int gpud_gpus_add(gpud *d, prs_gpu *g, int index, prs_error *err);
/* Every GPU the NVML library sees. */
int gpud_gpus_open_all(gpud *d, const char *lib_path, prs_error *err);
void gpud_gpus_close(gpud *d);
/* By UUID or decimal index; NULL when none. */
gpud_gpu *gpud_gpu_find(gpud *d, const char *token);
/* 1 when mhz is a supported SM clock. */
int gpud_gpu_supports(const gpud_gpu *u, int mhz);
/* Reset SM and memory locked clocks (a driver without memory locks has none to reset); 0, or
 * the first failure's error, and the GPU is left dirty (locked_mhz -1 when the SM reset failed).
 * why goes to the log. */
int gpud_gpu_reset(gpud_gpu *u, const char *why);
/* Print the table read-only (--list). */
void gpud_gpus_print(gpud *d, FILE *out);

/* ---- lease.c ---- */

/* 1 when the connection's user may lease u; else 0 and msg says why and what to edit. */
int gpud_lease_allowed(gpud *d, const struct gpud_conn *c, const gpud_gpu *u, char *msg, size_t n);
/* Give u to c (which holds nothing): a dirty GPU reset again, memory clock at max, pid watch,
 * lease file. When the lease file cannot be written the lease is undone and an error returned
 * (msg says why): a lease nobody could reset after a crash is not given. */
int gpud_lease_take(gpud *d, struct gpud_conn *c, gpud_gpu *u, char *msg, size_t n);
/* Release c's lease if any: reset the clocks, log with the lease's duration, lease file. 0, or
 * the reset's error (the lease is released either way; the GPU stays dirty). */
int gpud_lease_drop(gpud *d, struct gpud_conn *c, const char *why);
/* Reset the dirty GPUs nobody holds again (at exit); how many stay dirty. */
int gpud_leases_reset_dirty(gpud *d, const char *why);
/* Write the lease file: the leased GPUs and the dirty ones (no-op without a state dir). */
int gpud_leases_save(gpud *d);
/* At start-up: reset every GPU the lease file lists (every GPU when it is corrupt); those whose
 * reset fails stay dirty, in the file. */
void gpud_leases_recover(gpud *d);

/* ---- energy.c ---- */

typedef struct gpud_energy gpud_energy;

/* Start the energy reader on handles of its own for d's NVML GPUs (none: no reader, and every
 * reading is taken on the spot). PRS_ENOMEM or PRS_EIO when it cannot start. */
int gpud_energy_start(gpud *d);
/* Stop and free it (no reader: no-op). */
void gpud_energy_stop(gpud *d);
/* u's energy counter in mJ: the reader's latest reading (at most about GPUD_ENERGY_PERIOD_S old
 * while asked for, GPUD_ENERGY_IDLE_S after a quiet spell), else read now. 0, or an error when
 * the GPU cannot give it. */
int gpud_energy_get(gpud *d, gpud_gpu *u, uint64_t *mj);

/* ---- apply.c ---- */

typedef struct gpud_apply_req {
    prs_gpu *g;       /* the handle to apply it on */
    const char *uuid; /* for the log */
    uint64_t seq;
    int mhz;         /* 0: reset */
    int locked_mhz;  /* the clock the daemon locked before it */
    int64_t recv_ns; /* when the SET was received (prs_mono_ns) */
} gpud_apply_req;

typedef struct gpud_apply {
    int locked_mhz; /* the clock the daemon locked after it (0: default, -1: unknown) */
    char line[512]; /* the ACK, without its newline */
} gpud_apply;

/* Apply a SET on r->g: lock (or reset), read back (again while the read-back lags), reset when
 * the lock did not take; the outcome in a. Touches nothing but r->g and the log. */
void gpud_apply_clock(const gpud_apply_req *r, gpud_apply *a);
/* Copy s into out as a token-safe string: printable, no newline. Returns out. */
const char *gpud_printable(const char *s, char *out, size_t n);

/* ---- setter.c ---- */

typedef struct gpud_setters gpud_setters;

/* Start a setter thread, on a handle of its own, for each of d's NVML GPUs (none: no setters,
 * every SET is applied in the loop). PRS_ENOMEM or PRS_EIO when they cannot start. */
int gpud_setters_start(gpud *d);
/* Apply the SETs queued, stop and free (no setters: no-op). */
void gpud_setters_stop(gpud *d);
/* The descriptor that is readable when a SET was applied (-1: no setters). */
int gpud_setters_fd(const gpud *d);
/* Queue r for c's leased GPU: 0, and c reads no request until gpud_setters_collect answers it;
 * PRS_EINVAL when the GPU has no setter (apply it on the spot). */
int gpud_setter_submit(gpud *d, struct gpud_conn *c, const gpud_apply_req *r);
typedef struct gpud_setter_done {
    struct gpud_conn *c; /* whose SET it was */
    gpud_apply res;
} gpud_setter_done;

/* The loop, once gpud_setters_fd is readable: the SETs applied since, into done (at most cap);
 * how many. Their connections read again and their GPUs' locked clocks are updated; the caller
 * gives each its ACK (gpud_conn_answer). */
int gpud_setters_collect(gpud *d, gpud_setter_done *done, int cap);
/* c goes away: wait until its SET in progress, if any, is applied; the ACK is dropped. */
void gpud_setter_settle(gpud *d, struct gpud_conn *c);

/* ---- conn.c ---- */

typedef struct gpud_conn {
    int fd;   /* -1 when fed directly (tests, fuzz) */
    long pid; /* peer credentials */
    unsigned uid, gid;
    int hello;   /* HELLO done */
    int closing; /* close once the output is flushed; read nothing more */
    int dead;    /* close now, without flushing */
    char in[GPUD_IN_MAX];
    size_t nin;
    char *out;
    size_t nout, out_cap;
    gpud_gpu *lease;
    int pidfd;         /* of the leaseholder; -1 */
    int pid_poll;      /* 1: no pidfd, check with kill(pid, 0) */
    double accepted_s; /* prs_mono_s at accept */
    int64_t recv_ns;   /* when the bytes being processed were received */
    int setting;       /* a SET of it is being applied (setter.c): read and handle nothing more */
} gpud_conn;

gpud_conn *gpud_conn_new(int fd, long pid, unsigned uid, unsigned gid);
/* Release the lease, close fds, free. NULL: no-op. */
void gpud_conn_free(gpud *d, gpud_conn *c, const char *why);
/* Bytes from the peer: handles every complete request line, appends the replies to c->out. */
void gpud_conn_feed(gpud *d, gpud_conn *c, const char *buf, size_t n);
/* Mark c closing after a fatal error reply: releases its lease now. */
void gpud_conn_fail(gpud *d, gpud_conn *c, const char *kind, const char *msg);
/* The ACK of c's SET applied by its setter (line without newline): appended to c's output, then
 * the requests c holds are handled. */
void gpud_conn_answer(gpud *d, gpud_conn *c, const char *line);

/* ---- the daemon ---- */

struct gpud {
    gpud_gpu gpus[GPUD_MAX_GPUS];
    int ngpus;
    gpud_config cfg;
    const char *config_path; /* for messages and reloads */
    const char *state_dir;   /* NULL: no lease file */
    int private_mode;        /* no access check */
    int watch_pids;          /* watch leaseholders' pids (pidfd or kill(pid, 0)) */
    gpud_conn *conns[GPUD_MAX_CONNS];
    int nconns;
    /* Lease-file lines of GPUs not served this time (not opened: MIG mode, unreachable), kept
     * for a later daemon that serves them (norphans of them). */
    char orphans[GPUD_MAX_GPUS][160];
    int norphans;
    gpud_energy *energy;   /* NULL: energy read on the spot */
    gpud_setters *setters; /* NULL: every SET applied in the loop */
};

/* ---- server.c ---- */

typedef struct gpud_server_opts {
    const char *socket_path;
    int private_fd;  /* >= 0: private mode on this fd */
    long parent_pid; /* private mode: exit when it exits (0: getppid() at start) */
} gpud_server_opts;

/* Block the signals the daemon's loop takes (SIGTERM, SIGHUP, and SIGINT unless private; private
 * mode ignores SIGINT), and ignore SIGPIPE. Call it first, before any GPU is opened: the NVML
 * library starts threads of its own, which keep the signal mask they were started with, and a
 * process-directed SIGTERM lands on a thread that does not block it; with the default action
 * there the daemon would die without resetting the GPUs it lent. */
void gpud_signals_block(int private_mode);
/* Run until SIGTERM/SIGINT (or, in private mode, the end of the connection or the parent).
 * Returns 0 after resetting every leased GPU, or a negative code. */
int gpud_serve(gpud *d, const gpud_server_opts *o, prs_error *err);

#endif
